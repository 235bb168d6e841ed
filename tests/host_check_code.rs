//! Host test of `ktrace check --vmlinux` (offline code checks, issue 13
//! item 3): a vmlinux-like ELF is linked from vfs_read's real bytes (Debian
//! 6.1 x86_64, read from /proc/kcore in a guest: the fixture in
//! crates/disasm/tests/fixtures with the command that captured it) at the
//! address it had, with binutils' objcopy and ld. Every offset of the
//! function is checked in one run, and the verdicts must follow GNU
//! objdump's instruction boundaries in the same fixture (not ktrace's own
//! decoder); the kernel's message and caret, the nearest boundaries, the
//! return probe rule at +4, and "not checked" with its reason are checked
//! too.

#![cfg(target_arch = "x86_64")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/disasm/tests/fixtures/kernel-x86_64-vfs_read.txt"
);

struct Fixture {
    address: u64,
    bytes: Vec<u8>,
    /// objdump's instruction offsets.
    boundaries: Vec<u64>,
}

fn fixture() -> Fixture {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let mut address = 0;
    let mut bytes = Vec::new();
    let mut addrs = Vec::new();
    let mut in_objdump = false;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if in_objdump {
            let a = line.split(':').next().unwrap().trim();
            addrs.push(u64::from_str_radix(a, 16).unwrap());
        } else if let Some(a) = line.strip_prefix("address 0x") {
            address = u64::from_str_radix(a, 16).unwrap();
        } else if let Some(b) = line.strip_prefix("bytes ") {
            bytes = b
                .split(' ')
                .map(|h| u8::from_str_radix(h, 16).unwrap())
                .collect();
        } else if line == "objdump" {
            in_objdump = true;
        }
    }
    let boundaries = addrs.iter().map(|a| a - address).collect();
    Fixture {
        address,
        bytes,
        boundaries,
    }
}

/// Links `bytes` into an ELF executable whose `vfs_read` is at `address`.
fn link_vmlinux(dir: &Path, f: &Fixture) -> PathBuf {
    let bin = dir.join("vfs_read.bin");
    std::fs::write(&bin, &f.bytes).unwrap();
    let obj = dir.join("vfs_read.o");
    let st = Command::new("objcopy")
        .current_dir(dir)
        .args([
            "-I",
            "binary",
            "-O",
            "elf64-x86-64",
            "-B",
            "i386:x86-64",
            "--rename-section",
            ".data=.text,alloc,load,readonly,code,contents",
            "--add-symbol",
            "vfs_read=.text:0,global,function",
            "vfs_read.bin",
            "vfs_read.o",
        ])
        .status()
        .expect("objcopy (binutils) is needed: run scripts/setup");
    assert!(st.success());
    let vmlinux = dir.join("vmlinux");
    let st = Command::new("ld")
        .arg("-o")
        .arg(&vmlinux)
        .arg(format!("-Ttext={:#x}", f.address))
        .args(["-e", "vfs_read"])
        .arg(&obj)
        .status()
        .expect("ld (binutils) is needed: run scripts/setup");
    assert!(st.success());
    vmlinux
}

fn check(args: &[&str], stdin: &str) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ktrace"))
        .arg("check")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn vmlinux_offsets_follow_objdump() {
    let f = fixture();
    assert!(f.boundaries.len() > 100 && f.bytes.len() > 0x300);
    let dir = std::env::temp_dir().join(format!("ktrace_check_code_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vmlinux = link_vmlinux(&dir, &f);
    let v = vmlinux.to_str().unwrap();

    // every offset inside the function, one JSON line each
    let defs: String = (1..f.bytes.len())
        .map(|o| format!("p:k/a vfs_read+{o:#x}\n"))
        .collect();
    let (_, out) = check(&["--vmlinux", v, "--json"], &defs);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), f.bytes.len() - 1, "{out}");
    let mut refused = 0;
    for (i, v) in lines.iter().enumerate() {
        let off = i as u64 + 1;
        // an int3 (the padding after `ret`, +0xed) starts an instruction
        // but is no place for a probe (refused on every kernel, as "not an
        // instruction boundary" from 6.12)
        // (and a ud2, +0x2ed, is a BUG()/WARN() site)
        let at = &f.bytes[off as usize..];
        let boundary =
            f.boundaries.contains(&off) && at[0] != 0xcc && !at.starts_with(&[0x0f, 0x0b]);
        assert_eq!(v["accepted"], boundary, "+{off:#x}: {v}");
        if boundary {
            let nc = v["not_checked"].to_string();
            assert!(!nc.contains("instruction boundary"), "+{off:#x}: {v}");
        } else {
            refused += 1;
            let message = if at.starts_with(&[0x0f, 0x0b]) {
                "Failed to register probe event"
            } else {
                "Probe point is not an instruction boundary"
            };
            assert_eq!(v["error"]["message"], message, "+{off:#x}");
            assert_eq!(v["error"]["pos"], 6, "the probe point, as error_log");
        }
    }
    assert!(refused > 300, "{refused}");

    // the human report: message, caret, nearest boundaries
    let (st, out) = check(&["--vmlinux", v, "p:k/a vfs_read+0x6"], "");
    assert_eq!(st, 1);
    let want = "rejected: p:k/a vfs_read+0x6\n  p:k/a vfs_read+0x6\n        ^\n  \
                trace_kprobe: error: Probe point is not an instruction boundary\n  \
                hint: +0x6 is inside an instruction; the nearest boundaries are \
                vfs_read+0x5 and vfs_read+0x7 (ktrace disasm vfs_read lists them all)\n";
    assert_eq!(out, want);

    // a return probe at +4 without endbr64 (this kernel has no IBT)
    let (st, out) = check(&["--vmlinux", v, "r:k/a vfs_read+4"], "");
    assert_eq!(st, 1);
    assert!(
        out.contains("trace_kprobe: error: Retprobe address must be an function entry"),
        "{out}"
    );

    // past the end, and offline without the code: not checked, and why
    let (st, out) = check(&["--vmlinux", v, "p:k/a vfs_read+0x5000"], "");
    assert_eq!(st, 0);
    assert!(
        out.contains(
            "instruction boundary of the offset (+0x5000 is past the end of vfs_read (0x310 bytes): \
             only the running kernel's symbols tell which function is there)"
        ),
        "{out}"
    );
    let (st, out) = check(&["--arch", "x86_64", "p:k/a vfs_read+0x6"], "");
    assert_eq!(st, 0);
    assert!(
        out.contains(
            "instruction boundary of the offset (offline: give --vmlinux FILE for the code)"
        ),
        "{out}"
    );
    let (_, out) = check(&["--vmlinux", v, "p:k/a nosuch+0x6"], "");
    assert!(
        out.contains("instruction boundary of the offset (")
            && out.contains("\"nosuch\" not found"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
