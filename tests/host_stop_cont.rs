//! Host test: ktrace stopped (SIGSTOP) for longer than its buffer lasts
//! while a tight loop hits the probe, then continued. The kernel
//! overwrites what ktrace could not read; at the end every hit is either
//! printed or counted as lost — printed + lost = the hits the loop made —
//! and the output holds exactly the printed lines.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{Prog, serial, state, tracefs};
use rustix::process::{Pid, Signal, kill_process};

#[test]
fn stopped_longer_than_the_buffer_lasts_loses_events_and_counts_every_one() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("stopcont");
    let out = p.dir.join("out");
    let hits: u64 = 300_000;
    // A small buffer (64 KiB per CPU), so the stop outlasts it.
    let mut child = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .args(["--buffer-size", "64", "-o"])
        .arg(&out)
        .arg("--")
        .args(["sh", "-c"])
        .arg(format!("sleep 1; {} {hits}", p.bin.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    kill_process(pid, Signal::STOP).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    kill_process(pid, Signal::CONT).unwrap();
    let st = child.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(st.code(), Some(0), "{err}");
    let summary = err
        .lines()
        .find(|l| l.contains(" event(s), "))
        .unwrap_or_else(|| panic!("no summary in {err}"));
    let num = |prefix: &str, after: &str| -> u64 {
        let line = summary.strip_prefix(prefix).unwrap_or("");
        line.split(after)
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix}…{after} in {err}"))
    };
    let printed = num("ktrace: ", " event(s)");
    let lost = num("ktrace: ", " lost");
    let text = std::fs::read_to_string(&out).unwrap();
    let lines = text.lines().filter(|l| l.contains(" hot: ")).count() as u64;
    let markers = text.lines().filter(|l| l.contains(" EVENTS]")).count();
    assert!(lost > 0, "the stop outlasted the buffer: {err}");
    assert!(
        markers > 0,
        "the loss is marked in the stream as the kernel does"
    );
    assert_eq!(lines, printed, "{err}");
    assert_eq!(printed + lost, hits, "{err}");
    assert!(state(&root).of_pid(child.id()).is_empty(), "{err}");
}

#[test]
fn the_traced_binary_deleted_while_it_runs_keeps_its_events() {
    // The uprobe sits on the file's inode: a running program whose file is
    // deleted keeps hitting it, and ktrace keeps every event and cleans up.
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("deleted");
    let child = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .arg("--")
        .arg(&p.bin)
        .args(["20", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    std::fs::remove_file(&p.bin).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        text.lines().filter(|l| l.contains(" hot: ")).count(),
        20,
        "{err}"
    );
    assert!(err.contains("20 event(s), 0 lost"), "{err}");
    let pid = common::session_pid(&err);
    assert!(state(&root).of_pid(pid).is_empty(), "{err}");
}
