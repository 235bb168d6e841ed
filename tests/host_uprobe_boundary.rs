//! Regression (issue 23 row 14): a uprobe inside an instruction. The kernel
//! takes `PATH:OFF` at any offset; the traced program then dies of SIGILL
//! when it reaches the probe. `ktrace trace` refused nothing and the
//! program crashed (under `sh -c`, ktrace even exited 0). Now `trace`
//! refuses it before anything is written, naming the nearest boundaries,
//! and `check` gives the kernel's verdict (ok) and says that `ktrace
//! trace` refuses it. The boundaries are taken from objdump, not from
//! ktrace's own decoder.

mod common;

use std::process::Command;

use common::{Prog, ktrace, serial, state, tracefs};

/// probe_me's instruction offsets, from `objdump -d`.
fn boundaries(p: &Prog) -> Vec<u64> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&p.bin)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut in_fn = false;
    let mut start = None;
    let mut offs = Vec::new();
    for l in text.lines() {
        if l.ends_with("<probe_me>:") {
            in_fn = true;
            continue;
        }
        if in_fn {
            let Some((addr, _)) = l.trim().split_once(':') else {
                break;
            };
            let Ok(a) = u64::from_str_radix(addr.trim(), 16) else {
                break;
            };
            let s = *start.get_or_insert(a);
            offs.push(a - s);
        }
    }
    offs
}

#[test]
fn a_uprobe_inside_an_instruction_killed_the_traced_program() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let p = Prog::build("ubound");
    let b = boundaries(&p);
    assert!(b.len() > 2, "{b:?}");
    // the first offset inside an instruction of probe_me
    let inside = (1..b[b.len() - 1]).find(|o| !b.contains(o)).unwrap();
    let def = format!("p:ubound {}:{:#x}", p.bin.display(), p.off + inside);
    let before = state(&root);
    let out = ktrace()
        .args(["trace", &def, "--"])
        .arg(&p.bin)
        .arg("3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("inside an instruction"), "{stderr}");
    let near = format!(
        "probe_me+{:#x}",
        b.iter().rev().find(|&&o| o < inside).unwrap()
    );
    assert!(stderr.contains(&near), "want {near} in {stderr}");
    assert_eq!(before, state(&root), "tracefs changed");
    // check: the kernel's verdict, and ktrace's own
    let out = ktrace().args(["check", &def]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.starts_with("ok: "), "{stdout}");
    assert!(
        stdout.contains("ktrace: `ktrace trace` refuses it") && stdout.contains("SIGILL"),
        "{stdout}"
    );
    // on a boundary: traced, and the program ran to its end
    let def = format!("p:ubound {}:{:#x}", p.bin.display(), p.off + b[1]);
    let out = ktrace()
        .args(["trace", &def, "--"])
        .arg(&p.bin)
        .arg("3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.contains("ubound:")).count(),
        3,
        "{stdout}"
    );
}
