//! Host tests of reaping across the ways a ktrace can die: a SIGKILLed
//! ktrace its parent has not waited for yet (a zombie), a ktrace killed
//! inside its own pid namespace (as in a container), and a reaper inside
//! another pid namespace, which must leave everything alone. Real uprobes,
//! real namespaces (`unshare`).

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Target, serial, state, tracefs};
use rustix::process::Signal;

fn clean(extra: &[&str]) -> (bool, String) {
    let out = common::ktrace().arg("clean").args(extra).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

#[test]
fn zombie_owner_is_reaped_before_its_parent_waits() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("zombie");
    let run = common::start_minute_session(&t);
    let pid = run.child.id();
    run.signal(Signal::KILL);
    // Not waited for: the dead ktrace stays a zombie until `finish` below.
    let deadline = Instant::now() + Duration::from_secs(10);
    while proc_state(pid) != Some('Z') {
        assert!(
            Instant::now() < deadline,
            "ktrace {pid} did not become a zombie"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(state(&root).of_pid(pid).len(), 2, "probe and instance left");
    let (ok, out) = clean(&["--list"]);
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("ktrace_p{pid}_")) && l.contains("dead")),
        "a zombie owner is dead: {out}"
    );
    let (ok, out) = clean(&[]);
    assert!(ok, "{out}");
    assert!(out.contains("removed leftovers"), "{out}");
    assert!(state(&root).of_pid(pid).is_empty(), "{out}");
    let (code, _) = run.finish();
    assert_eq!(code, -9);
}

/// The host pid of the task in pid namespace `ns_of` that is a child of
/// `parent`.
fn child_of(parent: u32) -> Option<u32> {
    for e in fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        if after.split_whitespace().nth(1) == Some(&parent.to_string()) {
            return Some(p);
        }
    }
    None
}

fn in_initial_pid_namespace() -> bool {
    fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.to_string_lossy() == "pid:[4026531836]")
}

#[test]
fn killed_in_its_own_pid_namespace_is_reaped_from_the_initial_one() {
    let Some(root) = tracefs() else { return };
    if !in_initial_pid_namespace() {
        eprintln!("SKIP: the test runs outside the initial pid namespace");
        return;
    }
    let _s = serial();
    let t = Target::new("pidns");
    let mut unshare = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_ktrace"))
        .arg("trace")
        .arg(t.def("p:ev", ""))
        .args(["-d", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // ktrace is pid 1 of the new namespace: its session is ktrace_p1_…
    let deadline = Instant::now() + Duration::from_secs(20);
    let (host_pid, session) = loop {
        let inner = child_of(unshare.id());
        let ns = inner.and_then(|p| fs::read_link(format!("/proc/{p}/ns/pid")).ok());
        let ns = ns.map(|l| {
            l.to_string_lossy()
                .trim_start_matches("pid:[")
                .trim_end_matches(']')
                .to_string()
        });
        if let (Some(p), Some(ns)) = (inner, ns) {
            let tag = format!("_n{ns}");
            let found = state(&root)
                .instances
                .into_iter()
                .find(|i| i.starts_with("ktrace_p1_") && i.contains(&tag));
            if let Some(name) = found {
                break (p, name);
            }
        }
        assert!(
            Instant::now() < deadline,
            "ktrace did not start in its namespace"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Alive in its namespace: judged alive from here, left alone.
    let (ok, out) = clean(&["--list"]);
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&session) && l.contains("running")),
        "{out}"
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(host_pid as i32).unwrap(),
        Signal::KILL,
    )
    .unwrap();
    let _ = unshare.wait();
    assert!(
        state(&root).instances.contains(&session),
        "SIGKILL leaves the instance"
    );
    let (ok, out) = clean(&[]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&session) && out.contains("removed leftovers"),
        "{out}"
    );
    assert!(!state(&root).instances.contains(&session), "{out}");
    let left: Vec<String> = state(&root)
        .dynamic_events
        .into_iter()
        .filter(|l| l.contains(&session))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_reaper_in_another_pid_namespace_leaves_live_sessions_alone() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("nsreaper");
    let run = common::start_minute_session(&t);
    let pid = run.child.id();
    let before = state(&root);
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_ktrace"))
        .arg("clean")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("removed"), "{text}");
    assert_eq!(
        state(&root),
        before,
        "nothing touched from another namespace"
    );
    assert_eq!(state(&root).of_pid(pid).len(), 2);
    run.signal(Signal::TERM);
    let (code, stderr) = run.finish();
    assert_eq!(code, 143, "{stderr}");
}

#[test]
fn two_concurrent_cleans_report_one_removal() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("twoclean");
    let run = common::start_minute_session(&t);
    let pid = run.child.id();
    run.signal(Signal::KILL);
    let (code, _) = run.finish();
    assert_eq!(code, -9);
    let a = common::ktrace()
        .arg("clean")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = common::ktrace()
        .arg("clean")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let a = a.wait_with_output().unwrap();
    let b = b.wait_with_output().unwrap();
    let tag = format!("ktrace_p{pid}_");
    let reports = [&a, &b]
        .iter()
        .filter(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .any(|l| l.contains(&tag) && l.contains("removed leftovers"))
        })
        .count();
    assert_eq!(
        reports,
        1,
        "a: {}\nb: {}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    assert!(state(&root).of_pid(pid).is_empty());
}
