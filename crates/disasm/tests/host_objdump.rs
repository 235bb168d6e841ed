//! The decoder against GNU objdump on the host's real ELF files: for a
//! sample of functions in libc and bash, the instruction boundaries and the
//! direct branch/call targets must be those `objdump -d` prints. objdump
//! comes from binutils (scripts/setup installs it); without it this test
//! fails rather than pass untested.

#![cfg(target_arch = "x86_64")]

use std::path::Path;
use std::process::Command;

use ktrace_disasm::{Isa, decode};
use ktrace_probe::Arch;
use ktrace_symbols::elf::{self, SymbolKind};

/// `objdump -d` of `[start, stop)`: (address, instruction text) per line.
fn objdump(path: &Path, start: u64, stop: u64) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .args(["-d", "-w", "--no-show-raw-insn"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={stop:#x}"))
        .arg(path)
        .output()
        .expect("objdump (binutils) is needed: run scripts/setup");
    assert!(out.status.success(), "objdump failed on {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim_start().split_once(":\t")?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            Some((addr, rest.trim().to_string()))
        })
        .collect()
}

/// The hexadecimal target objdump prints for a direct call or jump.
fn objdump_target(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let mnemonic = words.next()?;
    if !(mnemonic.starts_with('j') || mnemonic.starts_with("call")) {
        return None;
    }
    let op = words.next()?;
    if op.starts_with('*') {
        return None;
    }
    u64::from_str_radix(op.trim_start_matches("0x"), 16).ok()
}

fn compare(path: &str, wanted: usize) {
    let path = Path::new(path);
    let image = elf::open(path).unwrap();
    assert_eq!(Arch::from_elf_machine(image.machine), Some(Arch::X86_64));
    let data = std::fs::read(path).unwrap();
    let mut funcs: Vec<_> = image
        .symbols
        .iter()
        .filter(|s| s.kind == SymbolKind::Func && s.size > 16 && s.size < 4096)
        .collect();
    funcs.sort_by_key(|s| s.value);
    funcs.dedup_by_key(|s| s.value);
    assert!(funcs.len() >= wanted, "{}: few functions", path.display());
    // An even sample across the file.
    let step = funcs.len() / wanted;
    let mut insns_checked = 0;
    let mut targets_checked = 0;
    for sym in funcs.iter().step_by(step).take(wanted) {
        let off = image.vaddr_to_file_offset(sym.value).unwrap() as usize;
        let bytes = &data[off..off + sym.size as usize];
        let ours = decode(Isa::X86_64, bytes, sym.value);
        let theirs = objdump(path, sym.value, sym.value + sym.size);
        let our_addrs: Vec<u64> = ours.iter().map(|i| sym.value + i.offset).collect();
        let their_addrs: Vec<u64> = theirs.iter().map(|(a, _)| *a).collect();
        assert_eq!(
            our_addrs,
            their_addrs,
            "{} {}: boundaries differ from objdump",
            path.display(),
            sym.name
        );
        for (i, (_, text)) in ours.iter().zip(&theirs) {
            if let Some(t) = objdump_target(text) {
                assert_eq!(i.target, Some(t), "{}+{:#x}: {text}", sym.name, i.offset);
                targets_checked += 1;
            }
        }
        insns_checked += ours.len();
    }
    assert!(insns_checked > 1000, "{insns_checked}");
    assert!(targets_checked > 100, "{targets_checked}");
}

#[test]
fn libc_boundaries_and_targets_match_objdump() {
    compare("/usr/lib/x86_64-linux-gnu/libc.so.6", 60);
}

#[test]
fn bash_boundaries_and_targets_match_objdump() {
    compare("/usr/bin/bash", 60);
}
