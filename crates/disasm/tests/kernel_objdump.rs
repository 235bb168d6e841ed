//! The decoder against GNU objdump on real kernel code: functions whose
//! bytes `ktrace disasm` read from /proc/kcore in the guests (Debian 6.1,
//! x86_64 and arm64), disassembled by objdump on the host (see each
//! fixture's header and tests/fixtures/capture.sh). Boundaries and direct
//! branch targets must agree.

use ktrace_disasm::{Isa, decode};

struct Fixture {
    arch: Isa,
    address: u64,
    bytes: Vec<u8>,
    /// objdump's (address, instruction text).
    objdump: Vec<(u64, String)>,
}

fn load(name: &str) -> Fixture {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut arch = None;
    let mut address = None;
    let mut bytes = Vec::new();
    let mut objdump = Vec::new();
    let mut in_objdump = false;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if in_objdump {
            let mut f = line.splitn(3, '\t');
            let addr = f.next().unwrap().trim().trim_end_matches(':');
            let _raw = f.next().unwrap();
            let insn = f.next().unwrap_or("").trim().to_string();
            objdump.push((u64::from_str_radix(addr, 16).unwrap(), insn));
        } else if let Some(a) = line.strip_prefix("arch ") {
            arch = Some(Isa::parse(a).unwrap());
        } else if let Some(a) = line.strip_prefix("address 0x") {
            address = Some(u64::from_str_radix(a, 16).unwrap());
        } else if let Some(b) = line.strip_prefix("bytes ") {
            bytes = b
                .split(' ')
                .map(|h| u8::from_str_radix(h, 16).unwrap())
                .collect();
        } else if line == "objdump" {
            in_objdump = true;
        }
    }
    Fixture {
        arch: arch.unwrap(),
        address: address.unwrap(),
        bytes,
        objdump,
    }
}

/// The target objdump prints for a direct branch, call or pc-relative
/// address (`call 0xffff...`, `bl 0xffff...`, `adrp x0, 0xffff...`,
/// `cbz x1, 0xffff...`, `tbnz w0, #3, 0xffff...`).
fn objdump_target(arch: Isa, text: &str) -> Option<u64> {
    // arm64 objdump adds `// b.any`-style comments.
    let text = text.split("//").next()?;
    let mnemonic = text.split_whitespace().next()?;
    let branchy = match arch {
        Isa::X86_64 => mnemonic.starts_with('j') || mnemonic.starts_with("call"),
        _ => {
            matches!(
                mnemonic,
                "b" | "bl" | "cbz" | "cbnz" | "tbz" | "tbnz" | "adr" | "adrp"
            ) || mnemonic.starts_with("b.")
        }
    };
    if !branchy {
        return None;
    }
    let last = text.split([' ', ',', '\t']).rfind(|w| !w.is_empty())?;
    if last.starts_with('*') {
        return None;
    }
    u64::from_str_radix(last.strip_prefix("0x")?, 16).ok()
}

fn check(name: &str) {
    let f = load(name);
    let ours = decode(f.arch, &f.bytes, f.address);
    let our_addrs: Vec<u64> = ours.iter().map(|i| f.address + i.offset).collect();
    let their_addrs: Vec<u64> = f.objdump.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        our_addrs, their_addrs,
        "{name}: boundaries differ from objdump"
    );
    let mut targets = 0;
    for (i, (_, text)) in ours.iter().zip(&f.objdump) {
        if let Some(t) = objdump_target(f.arch, text) {
            assert_eq!(
                i.target,
                Some(t),
                "{name}+{:#x}: {text} / {}",
                i.offset,
                i.text
            );
            targets += 1;
        }
    }
    assert!(targets >= 10, "{name}: only {targets} targets compared");
    eprintln!(
        "{name}: {} instructions, {targets} targets agree with objdump",
        ours.len()
    );
}

#[test]
fn x86_64_do_sys_openat2() {
    check("kernel-x86_64-do_sys_openat2.txt");
}

#[test]
fn x86_64_vfs_read() {
    check("kernel-x86_64-vfs_read.txt");
}

#[test]
fn arm64_do_sys_openat2() {
    check("kernel-arm64-do_sys_openat2.txt");
}

#[test]
fn arm64_vfs_read() {
    check("kernel-arm64-vfs_read.txt");
}
