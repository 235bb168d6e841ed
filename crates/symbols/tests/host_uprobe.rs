//! End-to-end proof on the host kernel: a uprobe placed at the file offset
//! ktrace-symbols computes fires when the function runs.
//!
//! The probe lives in its own group `ktrace_symtest_<pid>`, is enabled only in
//! its own instance `instances/ktrace_symtest_<pid>`, and everything is
//! removed afterwards (also when an assertion fails, by a drop guard). Skips
//! loudly without root, tracefs, uprobe_events or gcc.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use ktrace_symbols::elf;

const TRACEFS: &str = "/sys/kernel/tracing";

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int ktrace_target(int x) { return x * 3 + 1; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3, s = 0;
    for (int i = 0; i < n; i++) s += ktrace_target(i);
    printf("%d\n", s);
    return 0;
}
"#;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().append(true).open(path)?;
    f.write_all(line.as_bytes())
}

/// Removes what the test created, in the order the kernel needs.
struct Cleanup {
    group: String,
    events: Vec<String>,
    instance: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let root = Path::new(TRACEFS);
        for ev in &self.events {
            let enable = self
                .instance
                .join(format!("events/{}/{ev}/enable", self.group));
            let _ = std::fs::write(enable, "0");
        }
        if self.instance.exists()
            && let Err(e) = std::fs::remove_dir(&self.instance)
        {
            eprintln!("cleanup: rmdir {}: {e}", self.instance.display());
        }
        for ev in &self.events {
            if let Err(e) = append(
                &root.join("uprobe_events"),
                &format!("-:{}/{ev}\n", self.group),
            ) {
                eprintln!("cleanup: delete {}/{ev}: {e}", self.group);
            }
        }
    }
}

const C_LIB: &str =
    "__attribute__((noinline)) int ktrace_lib_target(int x) { return x * 5 + 2; }\n";
const C_LIB_MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int ktrace_lib_target(int x);
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3, s = 0;
    for (int i = 0; i < n; i++) s += ktrace_lib_target(i);
    printf("%d\n", s);
    return 0;
}
"#;

/// A shared object linked at 0x200000 (its text segment's vaddr differs
/// from its file offset) and a program calling into it.
fn build_shifted_lib(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    std::fs::write(dir.join("lib.c"), C_LIB).unwrap();
    std::fs::write(dir.join("main.c"), C_LIB_MAIN).unwrap();
    let lib = dir.join("libktshift.so");
    let ok = Command::new("gcc")
        .args([
            "-shared",
            "-fPIC",
            "-O1",
            "-Wl,-Ttext-segment=0x200000",
            "-o",
        ])
        .arg(&lib)
        .arg(dir.join("lib.c"))
        .status()
        .ok()?
        .success();
    let prog = dir.join("libuser");
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let ok = ok
        && Command::new("gcc")
            .args(["-O1", "-o"])
            .arg(&prog)
            .arg(dir.join("main.c"))
            .arg(format!("-L{}", dir.display()))
            .args(["-lktshift", &rpath])
            .status()
            .ok()?
            .success();
    ok.then_some((lib, prog))
}

fn build(dir: &Path, tag: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join("t.c");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let out = dir.join(tag);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-O1")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .ok()?;
    st.success().then_some(out)
}

#[test]
fn uprobe_at_our_offset_fires() {
    let root = Path::new(TRACEFS);
    if !is_root() || !root.join("uprobe_events").exists() {
        return eprintln!("SKIP: needs root and tracefs with uprobe_events at {TRACEFS}");
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        return eprintln!("SKIP: gcc not available");
    }
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ktrace-symtest-uprobe-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let nopie = build(&dir, "nopie", &["-no-pie", "-fno-PIE"]).expect("gcc -no-pie");
    let pie = build(&dir, "pie", &["-pie", "-fPIE"]).expect("gcc -pie");

    let group = format!("ktrace_symtest_{pid}");
    let instance = root.join("instances").join(&group);
    let mut guard = Cleanup {
        group: group.clone(),
        events: Vec::new(),
        instance: instance.clone(),
    };
    let (shlib, shlib_user) = build_shifted_lib(&dir).expect("gcc -shared");
    let mut targets = Vec::new();
    for (ev, bin, sym) in [
        ("nopie", &nopie, "ktrace_target"),
        ("pie", &pie, "ktrace_target"),
        ("shlib", &shlib, "ktrace_lib_target"),
    ] {
        let t = elf::open(bin).unwrap().resolve(sym).unwrap();
        if ev == "shlib" {
            // The point of this case: vaddr and file offset differ.
            assert_ne!(t.vaddr, t.file_offset);
        }
        let def = format!("p:{group}/{ev} {}:{:#x}\n", bin.display(), t.file_offset);
        eprint!("creating: {def}");
        append(&root.join("uprobe_events"), &def).unwrap();
        guard.events.push(ev.to_string());
        targets.push((ev, bin, t));
    }
    std::fs::create_dir(&instance).unwrap();
    for (ev, _, _) in &targets {
        std::fs::write(instance.join(format!("events/{group}/{ev}/enable")), "1").unwrap();
    }
    let calls = 5;
    for (ev, bin, _) in &targets {
        let runs = if *ev == "shlib" { &shlib_user } else { *bin };
        let out = Command::new(runs).arg(calls.to_string()).output().unwrap();
        assert!(out.status.success());
    }
    let trace = std::fs::read_to_string(instance.join("trace")).unwrap();
    for (ev, _, t) in &targets {
        let hits: Vec<&str> = trace
            .lines()
            .filter(|l| l.contains(&format!(" {ev}: (")))
            .collect();
        eprintln!("{ev}: {} hits, first: {:?}", hits.len(), hits.first());
        assert_eq!(hits.len(), calls, "{ev} hits in:\n{trace}");
        if *ev == "nopie" {
            // A non-PIE runs at its link address: the kernel's printed ip
            // is the symbol's virtual address.
            let want = format!("({:#x})", t.vaddr);
            assert!(hits.iter().all(|l| l.ends_with(&want)), "expected {want}");
        } else {
            // A PIE or shared object is relocated by whole pages: the page
            // offset survives.
            for l in &hits {
                let ip = l.rsplit("(0x").next().unwrap().trim_end_matches(')');
                let ip = u64::from_str_radix(ip, 16).unwrap();
                assert_eq!(ip & 0xfff, t.vaddr & 0xfff, "{l}");
            }
        }
    }
    drop(guard);
    let left = std::fs::read_to_string(root.join("dynamic_events")).unwrap();
    assert!(!left.contains(&group), "left behind: {left}");
    assert!(!instance.exists());
    std::fs::remove_dir_all(&dir).ok();
}
