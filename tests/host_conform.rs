//! The differential tester against the host kernel itself (6.18 with
//! uprobes but no kprobe events, and a README that lists `e:` although it
//! was built without event probes): `ktrace conform` generates
//! definitions from the host's own names, writes each raw into its
//! dynamic_events and uprobe_events, and holds the kernel's verdict,
//! error_log message and caret, readback and format file against `ktrace
//! check`'s live answer. The guests' suite (tests/kernel/guest/95-conform.sh)
//! does the same on every cell of the matrix; the host is the one kernel of
//! its kind (no kprobes), which no guest has.
//!
//! A test binary of its own: conform removes whatever each definition
//! creates, so no other test may write probe events while it runs (cargo
//! runs test binaries one at a time).

#![cfg(target_arch = "x86_64")]

mod common;

use common::{ktrace, serial, state, tracefs};

/// Every generated definition, answered as the host kernel answers it.
/// `KTRACE_CONFORM_SEED` picks the seed (default a fixed one: the same
/// definitions every run; CI's guests take a new seed per commit).
#[test]
fn generated_definitions_are_answered_as_the_host_kernel_answers_them() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let left = state(&root);
    if !std::fs::read_to_string(root.join("dynamic_events"))
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        // conform refuses a kernel with events it did not make (a user's
        // session on this machine): nothing is compared then
        eprintln!("\n!!!!!! SKIP: the host has dynamic events of its own: {left:?} !!!!!!\n");
        return;
    }
    let seed = std::env::var("KTRACE_CONFORM_SEED").unwrap_or_else(|_| "20261202".into());
    let out = ktrace()
        .args([
            "conform", "--seed", &seed, "--count", "3000", "--show", "10",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary = stdout.lines().next().unwrap_or_default();
    // `conform: seed S: N definitions, A agree, D disagree (...)`
    let number = |before: &str| -> u64 {
        summary
            .split(before)
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {before:?} in {summary:?}\n{stderr}"))
    };
    let (total, agree, disagree) = (
        number(" definitions"),
        number(" agree"),
        number(" disagree"),
    );
    assert!(
        out.status.success() && disagree == 0 && agree == total,
        "seed {seed}: {summary}\n{stderr}"
    );
    // the host has no kprobe_events: its cases are left out, the rest
    // (dynamic_events and uprobe_events) compared
    assert!(
        total >= 2000,
        "seed {seed}: only {total} compared: {summary}"
    );
    assert!(
        std::fs::read_to_string(root.join("dynamic_events"))
            .unwrap_or_default()
            .trim()
            .is_empty(),
        "conform left dynamic events behind"
    );
}
