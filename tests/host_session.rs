//! Host tests of the session lifecycle with real uprobes: every exit path
//! leaves nothing behind, a concurrent tool is untouched, two sessions do
//! not collide, rejected input leaves tracefs as it was.

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{Target, serial, start_trace, state, tracefs};
use rustix::process::Signal;

fn assert_clean(root: &std::path::Path, pid: u32, stderr: &str) {
    let left = state(root).of_pid(pid);
    assert!(
        left.is_empty(),
        "ktrace {pid} left {left:?}\nstderr:\n{stderr}"
    );
}

#[test]
fn normal_end_counts_events_and_leaves_nothing() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("normal");
    let defs = vec![
        t.def("p:entry", "x=%ax"),
        t.def("p", ""),
        "-d".into(),
        "2".into(),
    ];
    let mut run = start_trace(&defs, Stdio::piped(), &[]);
    let pid = run.child.id();
    let mut stdout = run.child.stdout.take().unwrap();
    let during = state(&root).of_pid(pid);
    assert_eq!(
        during.len(),
        3,
        "two probes and one instance while running: {during:?}"
    );
    t.hit(5);
    let (code, stderr) = run.finish();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" entry: ")).count(),
        5,
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(" p_true_")).count(),
        5,
        "{out}"
    );
    assert!(
        stderr.contains("10 event(s), 0 lost (duration reached)"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.trim_start().starts_with("entry") && l.contains("hits          5")),
        "{stderr}"
    );
    assert_clean(&root, pid, &stderr);
}

fn signal_case(sig: Signal, tag: &str, want_code: i32) {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new(tag);
    let run = common::start_minute_session(&t);
    let pid = run.child.id();
    assert_eq!(state(&root).of_pid(pid).len(), 2);
    t.hit(2);
    run.signal(sig);
    let (code, stderr) = run.finish();
    assert_eq!(code, want_code, "{stderr}");
    assert!(stderr.contains("2 event(s)"), "{stderr}");
    assert_clean(&root, pid, &stderr);
}

#[test]
fn sigint_cleans_up() {
    signal_case(Signal::INT, "int", 0);
}

#[test]
fn sigterm_cleans_up() {
    signal_case(Signal::TERM, "term", 128 + 15);
}

#[test]
fn sighup_cleans_up() {
    signal_case(Signal::HUP, "hup", 128 + 1);
}

#[test]
fn panic_cleans_up() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("panic");
    let run = start_trace(
        &[t.def("p:ev", ""), "-d".into(), "60".into()],
        Stdio::null(),
        &[("KTRACE_TEST_PANIC", "1")],
    );
    let pid = run.child.id();
    let (code, stderr) = run.finish();
    assert_eq!(code, 101, "{stderr}");
    assert!(stderr.contains("KTRACE_TEST_PANIC"), "{stderr}");
    assert_clean(&root, pid, &stderr);
}

#[test]
fn broken_pipe_cleans_up() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("epipe");
    let mut run = start_trace(
        &[t.def("p:ev", ""), "-d".into(), "60".into()],
        Stdio::piped(),
        &[],
    );
    let pid = run.child.id();
    let mut out = BufReader::new(run.child.stdout.take().unwrap());
    t.hit(1);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains(" ev: "), "{line}");
    drop(out);
    // Keep hitting until ktrace notices the closed pipe.
    for _ in 0..50 {
        t.hit(1);
        if run.child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("(output closed)"), "{stderr}");
    assert_clean(&root, pid, &stderr);
}

#[test]
fn sigkill_leftovers_are_reaped_by_the_next_run_and_by_clean() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("kill");
    for reaper in [["clean"].as_slice(), ["profile"].as_slice()] {
        let run = common::start_minute_session(&t);
        let pid = run.child.id();
        run.signal(Signal::KILL);
        let (code, _) = run.finish();
        assert_eq!(code, -9);
        let left = state(&root).of_pid(pid);
        assert_eq!(
            left.len(),
            2,
            "SIGKILL leaves the probe and the instance: {left:?}"
        );
        let out = common::ktrace().args(reaper).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("ktrace_p{pid}_")) && stderr.contains("removed leftovers"),
            "{stderr}"
        );
        assert_clean(&root, pid, &stderr);
    }
}

#[test]
fn a_concurrent_tool_is_left_untouched() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let theirs = Target::new("other_tool");
    let ours = Target::new("other_ours");
    // The other tool: its own group, probe, instance, settings and buffer.
    let group = format!("othertool_{}", std::process::id());
    let inst = root.join("instances").join(&group);
    let append = |f: &std::path::Path, s: &str| {
        use std::io::Write;
        fs::OpenOptions::new()
            .append(true)
            .open(f)
            .unwrap()
            .write_all(s.as_bytes())
            .unwrap();
    };
    append(
        &root.join("uprobe_events"),
        &format!("{}\n", theirs.def(&format!("p:{group}/hit"), "x=%ax")),
    );
    fs::create_dir(&inst).unwrap();
    let ev = inst.join("events").join(&group).join("hit");
    append(&inst.join("buffer_size_kb"), "300");
    append(&inst.join("trace_clock"), "global");
    append(&ev.join("filter"), "x != 12345");
    append(&ev.join("enable"), "1");
    theirs.hit(3);
    let snap = || {
        let files = [
            "trace",
            "buffer_size_kb",
            "trace_clock",
            "tracing_on",
            "set_event_pid",
        ];
        let mut v: Vec<String> = files
            .iter()
            .map(|f| fs::read_to_string(inst.join(f)).unwrap())
            .collect();
        v.push(fs::read_to_string(ev.join("filter")).unwrap());
        v.push(fs::read_to_string(ev.join("enable")).unwrap());
        let top = [
            "buffer_size_kb",
            "trace_clock",
            "tracing_on",
            "current_tracer",
            "set_event",
        ];
        v.extend(
            top.iter()
                .map(|f| fs::read_to_string(root.join(f)).unwrap()),
        );
        let mine: Vec<String> = state(&root)
            .uprobe_events
            .into_iter()
            .filter(|l| l.contains(&group))
            .collect();
        (v, mine)
    };
    let before = snap();
    assert_eq!(
        before.0[0].lines().filter(|l| l.contains(" hit: ")).count(),
        3,
        "{}",
        before.0[0]
    );
    let run = start_trace(
        &[ours.def("p:ev", ""), "-d".into(), "1".into()],
        Stdio::null(),
        &[],
    );
    let pid = run.child.id();
    assert_eq!(
        snap(),
        before,
        "ktrace start changed the other tool's state"
    );
    ours.hit(2);
    let (code, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        snap(),
        before,
        "ktrace run/exit changed the other tool's state"
    );
    assert_clean(&root, pid, &stderr);
    append(&ev.join("enable"), "0");
    fs::remove_dir(&inst).unwrap();
    append(&root.join("uprobe_events"), &format!("-:{group}/hit\n"));
}

#[test]
fn two_sessions_at_once_do_not_collide() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("two");
    let args = vec![t.def("p:ev", ""), "-d".into(), "2".into()];
    let a = start_trace(&args, Stdio::null(), &[]);
    let b = start_trace(&args, Stdio::null(), &[]);
    let (pa, pb) = (a.child.id(), b.child.id());
    assert_eq!(state(&root).of_pid(pa).len(), 2);
    assert_eq!(state(&root).of_pid(pb).len(), 2);
    t.hit(4);
    let (ca, ea) = a.finish();
    let (cb, eb) = b.finish();
    assert_eq!((ca, cb), (0, 0), "{ea}\n{eb}");
    assert!(ea.contains("4 event(s), 0 lost"), "{ea}");
    assert!(eb.contains("4 event(s), 0 lost"), "{eb}");
    assert_clean(&root, pa, &ea);
    assert_clean(&root, pb, &eb);
}

/// Runs ktrace expecting a rejection; checks the message and that tracefs
/// is exactly as before (as far as anything of this run goes).
fn rejected(args: &[String], want: &[&str]) {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let before = state(&root);
    let out = common::ktrace().arg("trace").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "want {w:?} in:\n{stderr}");
    }
    let caret = stderr
        .lines()
        .find(|l| l.trim() == "^")
        .expect("caret line");
    let cmd_line = stderr
        .lines()
        .take_while(|l| l.trim() != "^")
        .last()
        .unwrap();
    assert!(
        cmd_line.len() >= caret.len(),
        "caret inside the command:\n{stderr}"
    );
    let after = state(&root);
    assert_eq!(after.of_pid(0).len(), 0);
    // Other helpers may create their own objects meanwhile; nothing may be
    // ktrace's, and everything that was there is still there.
    for l in before.dynamic_events.iter().chain(&before.instances) {
        assert!(
            after.dynamic_events.contains(l) || after.instances.contains(l),
            "{l} vanished"
        );
    }
    let new: Vec<&String> = after
        .dynamic_events
        .iter()
        .chain(&after.instances)
        .filter(|l| l.contains("ktrace_p"))
        .filter(|l| !before.dynamic_events.contains(l) && !before.instances.contains(l))
        .collect();
    assert!(new.is_empty(), "left behind: {new:?}");
}

#[test]
fn bad_definition_leaves_tracefs_as_it_was() {
    let t = Target::new("baddef");
    rejected(
        &[
            t.def("p:one", ""),
            t.def("p:two", "a=%nosuchreg"),
            t.def("p:three", ""),
        ],
        &["Invalid register name", "%nosuchreg"],
    );
}

#[test]
fn bad_filter_leaves_tracefs_as_it_was() {
    let t = Target::new("badfilter");
    rejected(
        &[
            t.def("p:one", "x=%ax"),
            "-f".into(),
            "nosuchfield == 1".into(),
        ],
        &["Field not found", "nosuchfield"],
    );
}

#[test]
fn bad_trigger_leaves_tracefs_as_it_was() {
    let t = Target::new("badtrigger");
    rejected(
        &[
            t.def("p:one", ""),
            "--trigger".into(),
            "traceoff if nosuchfield == 1".into(),
        ],
        &["Field not found"],
    );
}

#[test]
fn command_mode_traces_only_the_command_and_its_children() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("cmd");
    let script = format!("sleep 1; {0}; {0}", t.path.display());
    let args = vec![
        t.def("p:ev", ""),
        "--".into(),
        "sh".into(),
        "-c".into(),
        script,
    ];
    let mut run = start_trace(&args, Stdio::piped(), &[]);
    let pid = run.child.id();
    let mut stdout = run.child.stdout.take().unwrap();
    t.hit(3); // not children of the command: must not show
    let (code, stderr) = run.finish();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("(command exited)"), "{stderr}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" ev: ")).count(),
        2,
        "{out}\n{stderr}"
    );
    assert_clean(&root, pid, &stderr);
}

#[test]
fn pid_mode_traces_only_that_process_tree() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("pid");
    let script = format!("sleep 1.5; {0}; {0}; {0}", t.path.display());
    let mut target = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let args = vec![
        t.def("p:ev", ""),
        "-p".into(),
        target.id().to_string(),
        "-d".into(),
        "3".into(),
    ];
    let mut run = start_trace(&args, Stdio::piped(), &[]);
    let pid = run.child.id();
    let mut stdout = run.child.stdout.take().unwrap();
    t.hit(2); // another process tree: must not show
    target.wait().unwrap();
    let (code, stderr) = run.finish();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        out.lines().filter(|l| l.contains(" ev: ")).count(),
        3,
        "{out}\n{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.trim_start().starts_with("ev") && l.contains("hits          5")),
        "the profile counts every hit, the pid list only what is recorded: {stderr}"
    );
    assert_clean(&root, pid, &stderr);
}

#[test]
fn own_reads_do_not_feed_back_into_the_session() {
    // A probe on libc's read() is hit by ktrace's own reads of trace_pipe;
    // unchecked, every read makes the next event. ktrace must not see itself
    // and must still stop on time.
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let libc = common::libc();
    let off = common::symbol_offset(&libc, "read");
    let def = format!("p:rd {}:{off:#x}", libc.display());
    let started = std::time::Instant::now();
    let child = common::ktrace()
        .args(["trace", &def, "-d", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Watchdog: a feedback loop never ends on its own; kill it after 20 s
    // (the next ktrace run reaps what it leaves) so the test fails, not hangs.
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done_w = std::sync::Arc::clone(&done);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(20));
        // Only while it is still ours: after the wait its pid may be reused.
        if !done_w.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    assert!(
        elapsed < Duration::from_secs(10),
        "took {elapsed:?}: {stderr}"
    );
    let me = stderr
        .split("session ktrace_p")
        .nth(1)
        .and_then(|s| s.split('_').next())
        .expect("session name in stderr")
        .to_string();
    let own = stdout
        .lines()
        .filter(|l| l.contains(&format!("-{me} ")))
        .count();
    assert_eq!(own, 0, "ktrace recorded its own reads:\n{stderr}");
    let pid: u32 = me.parse().unwrap();
    assert_clean(&root, pid, &stderr);
}
