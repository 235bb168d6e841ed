//! Host tests of faults on the output side of `ktrace trace`, with real
//! uprobes: a full device is an error (exit 1), a destination that cannot be
//! written is refused before anything starts, and a reader that stops
//! reading (a full pipe, a FIFO nobody opens) never keeps ktrace from
//! honouring SIGTERM or `-d` and cleaning up.

mod common;

use std::io::{BufRead, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Prog, serial, start_trace, state, tracefs};
use rustix::process::Signal;

#[test]
fn output_to_a_full_device_is_an_error() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("devfull");
    let out = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .args(["-o", "/dev/full", "--"])
        .arg(&p.bin)
        .arg("20000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(!stderr.contains("os error"), "{stderr}");
    let pid = common::session_pid(&stderr);
    assert!(state(&root).of_pid(pid).is_empty(), "{stderr}");
}

#[test]
fn unwritable_destinations_are_refused_before_anything_starts() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("baddest");
    let marker = p.dir.join("ran");
    let before = state(&root);
    for dest in ["/tmp", "/nonexistent-ktrace-dir/out"] {
        let out = common::ktrace()
            .arg("trace")
            .arg(format!("p:hot {}", p.place()))
            .args(["-o", dest, "--", "sh", "-c"])
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{dest}: {stderr}");
        assert!(stderr.contains("cannot write events"), "{dest}: {stderr}");
        assert!(!marker.exists(), "{dest}: the command ran untraced");
        assert_eq!(state(&root), before, "{dest}: tracefs changed");
    }
}

#[test]
fn sigterm_is_honoured_while_the_output_pipe_is_full() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("fullpipe");
    let mut run = start_trace(
        &[
            format!("p:hot {} a=%di", p.place()),
            "--".into(),
            p.bin.display().to_string(),
            "2000000".into(),
        ],
        Stdio::piped(),
        &[],
    );
    // Nobody reads stdout: the pipe fills within a moment.
    let _unread = run.child.stdout.take();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = run.child.id();
    let t0 = Instant::now();
    run.signal(Signal::TERM);
    let (code, stderr) = run.finish();
    assert_eq!(code, 143, "{stderr}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "exit took {:?}",
        t0.elapsed()
    );
    assert!(state(&root).of_pid(pid).is_empty(), "{stderr}");
}

/// Regression: Ctrl-C gave up the output at once, so events formatted but
/// still on their way to a slow reader were dropped ("the output was not
/// read to the end"). An output that still moves is written to the end.
#[test]
fn ctrl_c_keeps_events_on_their_way_to_a_slow_reader() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("slowpipe");
    let mut run = start_trace(&[format!("p:hot {} a=%di", p.place())], Stdio::piped(), &[]);
    let mut out = run.child.stdout.take().unwrap();
    // A reader that keeps reading, slowly: 16 KiB every 10 ms.
    let reader = std::thread::spawn(move || {
        let mut lines = 0usize;
        let mut buf = vec![0u8; 16 << 10];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break lines,
                Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    p.run(30000);
    let pid = run.child.id();
    run.signal(Signal::INT);
    let (code, stderr) = run.finish();
    let lines = reader.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("not read to the end"), "{stderr}");
    assert!(stderr.contains("30000 event(s), 0 lost"), "{stderr}");
    assert_eq!(lines, 30000, "{stderr}");
    assert!(state(&root).of_pid(pid).is_empty(), "{stderr}");
}

#[test]
fn duration_is_honoured_while_the_output_pipe_is_full() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("fullpipe_d");
    let mut child = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .args(["-d", "2", "--"])
        .arg(&p.bin)
        .arg("2000000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _unread = child.stdout.take();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "-d 2 not honoured in 30 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("not read to the end"), "{stderr}");
    assert!(state(&root).of_pid(child.id()).is_empty(), "{stderr}");
}

#[test]
fn sigterm_is_honoured_while_waiting_for_a_fifo_reader() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("fifo");
    let fifo = p.dir.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let before = state(&root);
    let mut child = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {}", p.place()))
        .arg("-o")
        .arg(&fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("waiting for a reader"), "{line}");
    assert_eq!(
        state(&root),
        before,
        "nothing is created before the FIFO opens"
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        Signal::TERM,
    )
    .unwrap();
    let t0 = Instant::now();
    let st = child.wait().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(st.code(), Some(143));
    assert_eq!(state(&root), before);
}

#[test]
fn a_full_or_closed_stderr_is_not_a_panic() {
    // Regression: `… 2>/dev/full` and `… 2>&1 | head -1` panicked (exit
    // 101) at the first message.
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("stderr");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let st = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .arg("--")
        .args(["sh", "-c"])
        .arg(format!("{} 5; exit 0", p.bin.display()))
        .stdout(Stdio::null())
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0), "stderr on /dev/full");
    let mut child = common::ktrace()
        .arg("trace")
        .arg(format!("p:hot {} a=%di", p.place()))
        .arg("--")
        .args(["sh", "-c"])
        .arg(format!("sleep 0.5; {} 5; exit 0", p.bin.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // the reader is gone (as `| head -1` would be)
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "stderr closed after: {first}");
    let out = common::ktrace()
        .args(["syms", "getenv", "--elf"])
        .arg(common::libc())
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write to standard output"));
    assert!(
        state(&root)
            .instances
            .iter()
            .all(|i| !i.contains("_stderr"))
    );
}

#[test]
fn ctrl_c_while_creating_many_probes_stops_before_enabling() {
    // Regression: 200 uprobes and SIGINT at 5 ms: ktrace created and enabled
    // them all, then spent 9.4 s removing them (the kernel takes a grace
    // period for each enabled uprobe).
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("manyint");
    let defs: Vec<String> = (0..1000)
        .map(|i| format!("p:e{i} {} a=%di", p.place()))
        .collect();
    let mut child = common::ktrace()
        .arg("trace")
        .args(&defs)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tag = format!("ktrace_p{}_", child.id());
    // SIGINT as soon as the first probes exist.
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(root.join("dynamic_events"))
        .unwrap_or_default()
        .contains(&tag)
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "no probe appeared");
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        Signal::INT,
    )
    .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{err}");
    assert!(
        err.contains("while setting up") && !err.contains("Ctrl-C to stop"),
        "stopped before enabling anything: {err}"
    );
    assert!(state(&root).of_pid(child.id()).is_empty(), "{err}");
}
