//! Host tests: uprobe file offsets computed by ktrace-symbols compared with
//! offsets computed independently from binutils' `readelf -sW`/`-lW`, and
//! with where the dynamic linker really mapped a function in this process.
//!
//! Each test says loudly on stderr when it skips (no readelf, no gcc, no
//! such file); none of them touches the kernel's tracing state.

// One test takes the run-time address of a libc function: that needs an
// extern block, which is the only unsafe-adjacent code here.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ktrace_symbols::elf::{self, ElfKind};
use ktrace_symbols::{Error, ldcache, library, maps};

/// One symbol line of `readelf -sW`.
#[derive(Debug)]
struct ReadelfSym {
    value: u64,
    size: u64,
    kind: String,
    name: String,
}

/// One LOAD line of `readelf -lW`: (offset, vaddr, filesz).
type Load = (u64, u64, u64);

fn tool(name: &str) -> bool {
    let ok = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP: {name} not available");
    }
    ok
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn readelf_syms(path: &Path) -> Vec<ReadelfSym> {
    let out = Command::new("readelf")
        .arg("-sW")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut syms = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Num: Value Size Type Bind Vis Ndx Name
        if f.len() < 8 || !f[0].ends_with(':') || f[6] == "UND" || f[6] == "Ndx" {
            continue;
        }
        let Ok(size) = f[2].parse::<u64>().or_else(|_| {
            f[2].strip_prefix("0x")
                .map_or(Err(()), |h| u64::from_str_radix(h, 16).map_err(|_| ()))
        }) else {
            continue;
        };
        syms.push(ReadelfSym {
            value: hex(f[1]),
            size,
            kind: f[3].to_string(),
            name: f[7].to_string(),
        });
    }
    syms
}

fn readelf_loads(path: &Path) -> Vec<Load> {
    let out = Command::new("readelf")
        .arg("-lW")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]), hex(f[4]))
        })
        .collect()
}

/// The independent computation: file offset from readelf's tables.
fn readelf_offset(path: &Path, name: &str) -> (u64, u64) {
    let syms = readelf_syms(path);
    let s = syms
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("readelf shows no {name} in {}", path.display()));
    let loads = readelf_loads(path);
    let (off, vaddr, _) = loads
        .iter()
        .find(|(_, v, sz)| s.value >= *v && s.value < v + sz)
        .expect("symbol in a LOAD segment");
    (s.value, s.value - vaddr + off)
}

#[test]
fn bash_readline_matches_readelf() {
    let bash = Path::new("/bin/bash");
    if !tool("readelf") || !bash.exists() {
        return eprintln!("SKIP: no readelf or /bin/bash");
    }
    let img = elf::open(bash).unwrap();
    // The host's bash is stripped: readline comes from .dynsym.
    let name = if readelf_syms(bash).iter().any(|s| s.name == "readline") {
        "readline"
    } else {
        "main"
    };
    let t = img.resolve(name).unwrap();
    let (value, offset) = readelf_offset(bash, name);
    eprintln!(
        "/bin/bash:{name} value {value:#x} file offset {offset:#x} (ours {:#x})",
        t.file_offset
    );
    assert_eq!(t.vaddr, value);
    assert_eq!(t.file_offset, offset);
}

fn ldconfig_path(soname: &str) -> Option<String> {
    let out = Command::new("ldconfig").arg("-p").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let arch = if cfg!(target_arch = "x86_64") {
        "x86-64"
    } else {
        "AArch64"
    };
    text.lines()
        .find(|l| l.trim_start().starts_with(&format!("{soname} ")) && l.contains(arch))
        .and_then(|l| l.split("=> ").nth(1))
        .map(str::to_string)
}

#[test]
fn ld_so_cache_agrees_with_ldconfig() {
    let Some(expected) = ldconfig_path("libc.so.6") else {
        return eprintln!("SKIP: ldconfig -p shows no libc.so.6");
    };
    let entries = ldcache::open(Path::new("/etc/ld.so.cache")).unwrap();
    let out = Command::new("ldconfig").arg("-p").output().unwrap();
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string();
    // "718 libs found in cache `/etc/ld.so.cache'"
    let n: usize = first.split_whitespace().next().unwrap().parse().unwrap();
    eprintln!("ldconfig -p: {n} libs; ours: {} entries", entries.len());
    assert_eq!(entries.len(), n);
    let found = ldcache::lookup(&entries, "libc", ldcache::host_flags());
    assert_eq!(found.first(), Some(&expected));
    let path = library::find("libc", None, Path::new("/etc/ld.so.cache")).unwrap();
    assert_eq!(path, PathBuf::from(&expected));
    let path = library::find("libc.so.6", None, Path::new("/etc/ld.so.cache")).unwrap();
    assert_eq!(path, PathBuf::from(&expected));
    let e = library::find("libktrace_nosuch", None, Path::new("/etc/ld.so.cache")).unwrap_err();
    assert!(matches!(e, Error::LibraryNotFound { .. }), "{e}");
}

#[test]
fn libc_getenv_versioned_matches_readelf() {
    if !tool("readelf") {
        return;
    }
    let Some(libc) = ldconfig_path("libc.so.6") else {
        return eprintln!("SKIP: no libc.so.6 in ldconfig -p");
    };
    let libc = Path::new(&libc);
    let img = elf::open(libc).unwrap();
    let syms = readelf_syms(libc);
    let getenv = syms
        .iter()
        .find(|s| s.name.starts_with("getenv@@"))
        .expect("readelf shows a default-versioned getenv");
    eprintln!(
        "readelf: {} at {:#x} size {}",
        getenv.name, getenv.value, getenv.size
    );
    let (_, offset) = readelf_offset(libc, &getenv.name);
    for spec in [
        "getenv".to_string(),
        getenv.name.clone(),
        getenv.name.replace("@@", "@"),
    ] {
        let t = img.resolve(&spec).unwrap();
        assert_eq!(t.file_offset, offset, "{spec}");
        assert_eq!(t.symbol.size, getenv.size);
    }
    // A name with a default and a hidden version at different addresses:
    // the bare name takes the default, NAME@VER the hidden one.
    let mut checked = 0;
    for d in syms
        .iter()
        .filter(|s| s.name.contains("@@") && s.kind == "FUNC")
    {
        let (base, ver) = d.name.split_once("@@").unwrap();
        let Some(h) = syms.iter().find(|s| {
            s.name.starts_with(&format!("{base}@"))
                && !s.name.contains("@@")
                && s.value != d.value
                && s.kind == "FUNC"
        }) else {
            continue;
        };
        assert_eq!(
            img.resolve(base).unwrap().vaddr,
            d.value,
            "{base} default {ver}"
        );
        assert_eq!(img.resolve(&h.name).unwrap().vaddr, h.value, "{}", h.name);
        checked += 1;
    }
    eprintln!("checked {checked} names with default and hidden versions at different addresses");
    assert!(checked > 0);
}

unsafe extern "C" {
    fn getenv(name: *const std::ffi::c_char) -> *mut std::ffi::c_char;
}

#[test]
fn libc_getenv_offset_is_where_ld_so_mapped_it() {
    // The run-time address of getenv in this very process, turned into a file
    // offset through /proc/self/maps, must equal our offset from the ELF.
    let addr = getenv as *const () as u64;
    let entries = maps::open(std::process::id()).unwrap();
    let m = maps::find(&entries, addr).expect("getenv is mapped");
    let runtime_offset = m.file_offset(addr).unwrap();
    let lib = library::find(
        "libc",
        Some(std::process::id()),
        Path::new("/etc/ld.so.cache"),
    )
    .unwrap();
    assert_eq!(lib, PathBuf::from(&m.path));
    let t = elf::open(&lib).unwrap().resolve("getenv").unwrap();
    eprintln!(
        "getenv at {addr:#x} in {} -> file offset {runtime_offset:#x}, ours {:#x}",
        m.path, t.file_offset
    );
    assert_eq!(t.file_offset, runtime_offset);
    // And back: the address symbolizes to getenv+0.
    let img = elf::open(&lib).unwrap();
    let vaddr = img.file_offset_to_vaddr(runtime_offset).unwrap();
    let (s, off) = img.symbolize(vaddr).unwrap();
    assert_eq!((s.name.as_str(), off), ("getenv", 0));
}

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int ktrace_target(int x) { return x * 3 + 1; }
static __attribute__((noinline, used)) int ktrace_local(int x) { return x ^ 5; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3, s = 0;
    for (int i = 0; i < n; i++) s += ktrace_target(i) + ktrace_local(i);
    printf("%d\n", s);
    return 0;
}
"#;

/// Builds the C program with extra gcc flags into a fresh directory.
pub fn build_c(tag: &str, flags: &[&str]) -> Option<PathBuf> {
    if !tool("gcc") {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("ktrace-symtest-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("t.c");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let out = dir.join("t");
    let st = Command::new("gcc")
        .args(flags)
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    if !st.success() {
        eprintln!("SKIP: gcc {flags:?} failed");
        return None;
    }
    Some(out)
}

#[test]
fn pie_and_non_pie_match_readelf() {
    if !tool("readelf") {
        return;
    }
    for (tag, flags, kind) in [
        ("pie", &["-pie", "-fPIE"][..], ElfKind::Dyn),
        ("nopie", &["-no-pie", "-fno-PIE"][..], ElfKind::Exec),
    ] {
        let Some(bin) = build_c(tag, flags) else {
            return;
        };
        let img = elf::open(&bin).unwrap();
        assert_eq!(img.kind, kind, "{tag}");
        for name in ["ktrace_target", "main", "ktrace_local"] {
            let (value, offset) = readelf_offset(&bin, name);
            let t = img.resolve(name).unwrap();
            eprintln!(
                "{tag} {name}: value {value:#x} readelf offset {offset:#x} ours {:#x}",
                t.file_offset
            );
            assert_eq!((t.vaddr, t.file_offset), (value, offset), "{tag} {name}");
            if kind == ElfKind::Exec {
                // The point of the non-PIE case: vaddr and offset differ.
                assert_ne!(t.vaddr, t.file_offset);
            }
            let t4 = img.resolve(&format!("{name}+4")).unwrap();
            assert_eq!(t4.file_offset, offset + 4);
        }
        std::fs::remove_dir_all(bin.parent().unwrap()).ok();
    }
}

#[test]
fn stripped_binaries_give_clear_errors() {
    let Some(bin) = build_c("strip", &["-no-pie"]) else {
        return;
    };
    let st = Command::new("strip").arg("-s").arg(&bin).status().unwrap();
    assert!(st.success());
    let e = elf::open(&bin)
        .unwrap()
        .resolve("ktrace_target")
        .unwrap_err();
    eprintln!("dynamic, stripped: {e}");
    assert!(
        matches!(e, Error::NotFound { .. }) && e.to_string().contains("stripped"),
        "{e}"
    );
    std::fs::remove_dir_all(bin.parent().unwrap()).ok();
    // A static stripped binary has no symbol table at all.
    let Some(bin) = build_c("static", &["-static"]) else {
        return;
    };
    Command::new("strip").arg("-s").arg(&bin).status().unwrap();
    let img = elf::open(&bin).unwrap();
    let e = img.resolve("ktrace_target").unwrap_err();
    eprintln!("static, stripped: {e}");
    assert!(matches!(e, Error::Stripped { .. }), "{e}");
    std::fs::remove_dir_all(bin.parent().unwrap()).ok();
}

#[test]
fn lib_colon_symbol_resolves_like_readelf() {
    if !tool("readelf") {
        return;
    }
    let Some(libc) = ldconfig_path("libc.so.6") else {
        return eprintln!("SKIP: no libc.so.6 in ldconfig -p");
    };
    let (_, offset) = readelf_offset(Path::new(&libc), "getenv@@GLIBC_2.2.5");
    let cache = Path::new("/etc/ld.so.cache");
    for spec in ["libc:getenv", "libc.so.6:getenv", &format!("{libc}:getenv")] {
        let p = library::resolve_user_probe(spec, None, cache).unwrap();
        assert_eq!(
            p.to_kernel_location(),
            format!("{libc}:{offset:#x}"),
            "{spec}"
        );
    }
    let p =
        library::resolve_user_probe("libc:getenv+0x8", Some(std::process::id()), cache).unwrap();
    assert_eq!(p.target.file_offset, offset + 8);
    eprintln!("libc:getenv+0x8 with pid -> {}", p.to_kernel_location());
}

#[test]
fn user_addresses_symbolize_through_maps() {
    use ktrace_symbols::usersym::Symbolizer;
    let addr = getenv as *const () as u64;
    let mut s = Symbolizer::open(std::process::id()).unwrap();
    let got = s.symbolize(addr + 4).unwrap();
    eprintln!("{addr:#x}+4 -> {got}");
    assert_eq!(got.symbol, Some(("getenv".to_string(), 4)));
    assert!(got.to_string().starts_with("getenv+0x4 ("));
    // A stack address: mapped, but no file and no symbol.
    let local = 0u8;
    let st = s.symbolize(&local as *const u8 as u64).unwrap();
    assert_eq!(st.symbol, None);
    assert_eq!(st.file_offset, None);
    assert!(s.symbolize(8).is_none());
}

#[test]
fn stripped_library_uses_its_installed_debug_file() {
    if !tool("readelf") {
        return;
    }
    let Some(libc) = ldconfig_path("libc.so.6") else {
        return eprintln!("SKIP: no libc.so.6");
    };
    let plain = elf::open(Path::new(&libc)).unwrap();
    let Some(dbg) = plain
        .build_id
        .as_deref()
        .and_then(elf::debug_file_path)
        .filter(|p| p.exists())
    else {
        return eprintln!("SKIP: no debug file for {libc} (apt-get install libc6-dbg)");
    };
    assert!(!plain.has_symtab);
    let img = elf::open_with_debug(Path::new(&libc)).unwrap();
    assert_eq!(img.debug_file.as_deref(), Some(dbg.to_str().unwrap()));
    // A static (local) function only the debug file names; readelf: its
    // value from the debug file, the segment from libc itself.
    let name = "__libc_start_call_main";
    assert!(plain.resolve(name).is_err());
    let value = readelf_syms(&dbg)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
        .value;
    let (off, vaddr, _) = readelf_loads(Path::new(&libc))
        .into_iter()
        .find(|(_, v, sz)| value >= *v && value < v + sz)
        .unwrap();
    let t = img.resolve(name).unwrap();
    eprintln!(
        "{libc}:{name} via {} -> {:#x} (readelf {:#x})",
        dbg.display(),
        t.file_offset,
        value - vaddr + off
    );
    assert_eq!(t.file_offset, value - vaddr + off);
    assert!(t.symbol.local);
    // The debug file's names must not make exported names ambiguous or move them.
    let mut same = 0;
    let mut changed = Vec::new();
    for s in plain
        .symbols
        .iter()
        .filter(|s| s.kind == elf::SymbolKind::Func)
    {
        let spec = s.display_name();
        let (a, b) = (plain.resolve(&spec), img.resolve(&spec));
        match (a, b) {
            (Ok(a), Ok(b)) if a.file_offset == b.file_offset => same += 1,
            (a, b) => changed.push(format!(
                "{spec}: {:?} -> {:?}",
                a.map(|t| t.file_offset),
                b.map(|t| t.file_offset)
            )),
        }
    }
    eprintln!("{same} exported functions resolve the same with the debug file");
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}
