//! Host tests of `ktrace disasm` on user code through the real binary:
//! the listing of libc's getenv against `objdump -d` of the same range
//! (boundaries), its first file offset against `ktrace syms`' uprobe
//! location, `--offsets` against the listing, and the exit status and
//! message for an offset between two instructions.

#![cfg(target_arch = "x86_64")]

use std::process::Command;

fn ktrace(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ktrace"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (offset, file offset) of each instruction line of a user listing.
fn listing_offsets(out: &str) -> Vec<(u64, u64)> {
    out.lines()
        .filter(|l| l.starts_with("* +0x") || l.starts_with("- +0x"))
        .map(|l| {
            let mut w = l.split_whitespace().skip(1);
            let off = u64::from_str_radix(w.next().unwrap().trim_start_matches("+0x"), 16).unwrap();
            let file = u64::from_str_radix(w.next().unwrap().trim_start_matches("0x"), 16).unwrap();
            (off, file)
        })
        .collect()
}

#[test]
fn getenv_listing_matches_objdump_and_syms() {
    let (st, out, err) = ktrace(&["disasm", "libc:getenv"]);
    assert_eq!(st, 0, "{err}");
    let head = out.lines().next().unwrap();
    assert!(head.starts_with("getenv"), "{head}");
    let (_, syms, _) = ktrace(&["syms", "getenv", "--elf", "libc"]);
    let loc = syms.lines().find(|l| l.contains(":0x")).unwrap();
    let (path, first) = loc.rsplit_once(":0x").unwrap();
    let first = u64::from_str_radix(first, 16).unwrap();
    let lines = listing_offsets(&out);
    assert!(lines.len() > 20, "{out}");
    assert_eq!(
        lines[0],
        (0, first),
        "+0x0 is the uprobe offset ktrace syms gives"
    );
    for (off, file) in &lines {
        assert_eq!(*file, first + off);
    }
    // objdump of the same range: addresses are vaddrs; getenv's vaddr is
    // in the syms line.
    let vaddr = syms
        .split_whitespace()
        .skip_while(|w| *w != "vaddr")
        .nth(1)
        .unwrap();
    let vaddr = u64::from_str_radix(vaddr.trim_start_matches("0x"), 16).unwrap();
    let size = syms
        .split_whitespace()
        .skip_while(|w| *w != "size")
        .nth(1)
        .unwrap();
    let size = u64::from_str_radix(size.trim_start_matches("0x"), 16).unwrap();
    let od = Command::new("objdump")
        .args(["-d", "-w", "--no-show-raw-insn"])
        .arg(format!("--start-address={vaddr:#x}"))
        .arg(format!("--stop-address={:#x}", vaddr + size))
        .arg(path)
        .output()
        .expect("objdump (binutils) is needed: run scripts/setup");
    let theirs: Vec<u64> = String::from_utf8_lossy(&od.stdout)
        .lines()
        .filter_map(|l| l.trim_start().split_once(":\t"))
        .filter_map(|(a, _)| u64::from_str_radix(a, 16).ok())
        .map(|a| a - vaddr)
        .collect();
    let ours: Vec<u64> = lines.iter().map(|(o, _)| *o).collect();
    assert_eq!(ours, theirs);
    // --offsets: the same instructions, one line each.
    let (st, offs, _) = ktrace(&["disasm", "libc:getenv", "--offsets"]);
    assert_eq!(st, 0);
    let from_offsets: Vec<u64> = offs
        .lines()
        .map(|l| {
            u64::from_str_radix(l.split(' ').next().unwrap().trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    assert_eq!(from_offsets, ours);
}

#[test]
fn offset_between_instructions_is_an_error_with_the_nearest() {
    // getenv begins with a two-byte push (%r15 on Debian's libc): find the
    // first instruction longer than one byte and ask for its second byte.
    let (_, offs, _) = ktrace(&["disasm", "libc:getenv", "--offsets"]);
    let (off, len) = offs
        .lines()
        .map(|l| {
            let mut w = l.split(' ');
            let o = u64::from_str_radix(w.next().unwrap().trim_start_matches("0x"), 16).unwrap();
            (o, w.next().unwrap().parse::<u64>().unwrap())
        })
        .find(|(_, len)| *len > 1)
        .unwrap();
    let spec = format!("libc:getenv+{:#x}", off + 1);
    let (st, out, err) = ktrace(&["disasm", &spec]);
    assert_eq!(st, 1, "{err}");
    assert!(!out.is_empty(), "the listing is still printed");
    let want = format!(
        "+{:#x} is not an instruction boundary (nearest: +{off:#x} or +{:#x})",
        off + 1,
        off + len
    );
    assert!(err.contains(&want), "{err}");
    // A boundary is fine and marked.
    let spec = format!("libc:getenv+{:#x}", off + len);
    let (st, out, err) = ktrace(&["disasm", &spec]);
    assert_eq!(st, 0, "{err}");
    assert!(out.lines().any(|l| l.ends_with("<==")), "{out}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let (st, _, err) = ktrace(&["disasm", "libc:getenv", "--arch", "mips"]);
    assert_eq!(st, 1);
    assert!(err.contains("unknown architecture \"mips\""), "{err}");
    let (st, _, err) = ktrace(&["disasm", "libc:no_such_function_here"]);
    assert_eq!(st, 1);
    assert!(err.contains("no_such_function_here"), "{err}");
    let (st, _, err) = ktrace(&["disasm", "/dev/zero:foo"]);
    assert_eq!(st, 1);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn several_targets_list_each_as_alone() {
    // each function's listing, in the order asked, as `ktrace disasm` of
    // it alone prints it; a target that fails is said, the others listed,
    // and the exit status is 1
    let alone: Vec<String> = ["libc:getenv", "libc:strlen"]
        .iter()
        .map(|t| {
            let (st, out, err) = ktrace(&["disasm", t]);
            assert_eq!(st, 0, "{t}: {err}");
            out
        })
        .collect();
    let (st, out, err) = ktrace(&["disasm", "libc:getenv", "libc:strlen"]);
    assert_eq!(st, 0, "{err}");
    assert_eq!(out, format!("{}\n{}", alone[0], alone[1]));
    let (st, offs, err) = ktrace(&[
        "disasm",
        "libc:getenv",
        "libc:no_such_function_here",
        "libc:strlen",
        "--offsets",
    ]);
    assert_eq!(st, 1);
    assert!(err.contains("no_such_function_here"), "{err}");
    let (_, getenv, _) = ktrace(&["disasm", "libc:getenv", "--offsets"]);
    let (_, strlen, _) = ktrace(&["disasm", "libc:strlen", "--offsets"]);
    assert_eq!(
        offs,
        format!("# libc:getenv\n{getenv}# libc:no_such_function_here\n# libc:strlen\n{strlen}")
    );
}
