//! Host test: the kernel's own tracepoints print as the kernel's `trace`
//! file prints them (issue 21 item 1, issue 23 row 16), on the host's
//! 6.18 kernel.
//!
//! - `--trigger enable_event:sched:sched_switch`: `prev_state=R/S/I...`
//!   where `[FAILED TO PARSE]` was, and the `char comm[16]` fields as JSON
//!   strings, not byte arrays.
//! - Every tracepoint of the host enabled for a moment in a private
//!   instance; the kernel's `trace` of it read, then the same buffer
//!   extracted by `trace-cmd extract` (so all three readers see the same
//!   records) and printed by `ktrace report` and `trace-cmd report`:
//!   ktrace's lines must equal the kernel's, line by line. The only
//!   allowance: arguments computed from a kernel variable
//!   (`vmemmap_base`, `memstart_addr`, `jiffies`: `page=%p` of the mm
//!   events), which no reader of the buffer can know, print `[FAILED TO
//!   PARSE]`; the rest of those lines must still match. trace-cmd's lines
//!   are compared as a figure (its plugins and its `%p`/`%pS` print
//!   differently), and must agree on `sched_switch`, `softirq_raise` and
//!   `irq_handler_exit` (with `-N`, its print-fmt reading).
//! - The live route: `ktrace trace` with a handful of subsystems enabled
//!   in its own instance and in a reference instance at the same time;
//!   each of ktrace's lines must be one of the kernel's (time stamps and
//!   the need-resched flag masked: each instance's copy has its own).
//!
//! trace-cmd writes /proc/sys/kernel/ftrace_enabled and the function
//! tracer's set_ftrace_* files, which are EPERM in this sandbox: it runs in
//! a private mount namespace with plain files bound over them (DESIGN.md).

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Prog, ktrace, tracefs};

const FAILED: &str = "[FAILED TO PARSE]";

/// Runs `script` with sh in a private mount namespace where trace-cmd's
/// writes to ftrace_enabled and set_ftrace_* land in plain files.
fn in_namespace(dir: &Path, script: &str) -> std::process::Output {
    let t = "/sys/kernel/tracing";
    let prelude = format!(
        "for f in /proc/sys/kernel/ftrace_enabled {t}/set_ftrace_filter {t}/set_ftrace_notrace \
         {t}/set_ftrace_pid {t}/set_ftrace_notrace_pid {t}/set_graph_function {t}/set_graph_notrace; do
            [ -e $f ] || continue
            b={dir}/bind_$(echo $f | tr / _)
            cp $f $b 2>/dev/null || : > $b
            mount --bind $b $f
        done\n",
        dir = dir.display()
    );
    Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!("{prelude}{script}"))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The event name of a kernel-style line (`... ts: name: text`), and for
/// `syscalls` lines (`... ts: sys_openat(...)`) the syscall.
fn event_of(line: &str) -> Option<&str> {
    let ts_end = line.find(": ")?;
    let rest = &line[ts_end + 2..];
    let end = rest.find([':', '(', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether ktrace's line `ours` is the kernel's `theirs` where every
/// `[FAILED TO PARSE]` of ours stands for some text of theirs.
fn matches_with_gaps(ours: &str, theirs: &str) -> bool {
    let parts: Vec<&str> = ours.split(FAILED).collect();
    let mut rest = theirs;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p) && rest.len() >= p.len();
        } else {
            match rest.find(p) {
                Some(at) => rest = &rest[at + p.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// Events whose print fmt computes an argument from a kernel variable.
fn from_kernel_variables(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(systems) = fs::read_dir(root.join("events")) else {
        return out;
    };
    for s in systems.flatten() {
        let Ok(evs) = fs::read_dir(s.path()) else {
            continue;
        };
        for e in evs.flatten() {
            let text = fs::read_to_string(e.path().join("format")).unwrap_or_default();
            let pf = text.split("print fmt:").nth(1).unwrap_or("");
            if [
                "vmemmap_base",
                "memstart_addr",
                "jiffies",
                "page_offset_base",
            ]
            .iter()
            .any(|v| pf.contains(v))
            {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// Issue 23 row 16: events a trigger enables print their helpers:
/// `sched_switch` showed `prev_state=[FAILED TO PARSE][FAILED TO PARSE]`
/// and JSON `prev_comm`/`next_comm` as arrays of byte values.
#[test]
fn trigger_enabled_sched_switch_prints_state_and_text_comms() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("tp_sched");
    let run = |json: bool| -> String {
        let mut c = ktrace();
        c.arg("trace")
            .arg(format!("p:hit {}", p.place()))
            .arg("--trigger")
            .arg("enable_event:sched:sched_switch");
        if json {
            c.arg("--json");
        }
        // 20 hits 10 ms apart: the first enables sched_switch, the
        // sleeps after it switch tasks
        let out = c
            .arg("--")
            .arg(&p.bin)
            .args(["20", "10000"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = run(false);
    let switches: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" sched_switch: "))
        .collect();
    assert!(!switches.is_empty(), "no sched_switch line:\n{text}");
    for l in &switches {
        assert!(!l.contains(FAILED), "{l}");
        let state = l
            .split(" prev_state=")
            .nth(1)
            .and_then(|r| r.split(" ==> ").next())
            .unwrap_or_else(|| panic!("no prev_state in {l}"));
        assert!(
            !state.is_empty()
                && state
                    .trim_end_matches('+')
                    .split('|')
                    .all(|s| ["R", "S", "D", "T", "t", "X", "Z", "P", "I"].contains(&s)),
            "prev_state {state:?} in {l}"
        );
        assert!(
            l.contains(" prev_comm=") && !l.contains("prev_comm= "),
            "{l}"
        );
    }
    // the traced program sleeps: at least one switch away from it in S
    assert!(
        switches
            .iter()
            .any(|l| l.contains("prev_comm=target ") && l.contains("prev_state=S ")),
        "{}",
        switches.join("\n")
    );
    let json = run(true);
    let mut seen = 0;
    for l in json
        .lines()
        .filter(|l| l.contains("\"event\":\"sched_switch\""))
    {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let f = &v["fields"];
        for k in ["prev_comm", "next_comm"] {
            assert!(f[k].is_string(), "{k} not a string: {l}");
        }
        assert!(f["prev_state"].is_i64(), "{l}");
        seen += 1;
    }
    assert!(seen > 0, "no sched_switch object:\n{json}");
}

/// `ktrace record` of a probe on the test program (20 hits, 10 ms apart,
/// as its command) with `extra` options into `file`, and `ktrace report`
/// of it.
fn record_and_report(p: &Prog, file: &Path, extra: &[&str]) -> String {
    let out = ktrace()
        .arg("record")
        .arg(format!("p:hit {}", p.place()))
        .args(extra)
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(&p.bin)
        .args(["20", "10000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = ktrace().arg("report").arg(file).output().unwrap();
    String::from_utf8_lossy(&rep.stdout).into_owned()
}

/// The `sched_switch` lines of `trace-cmd report -N` (its own reading of
/// the print fmt) of `file`, in [`tc_body`]'s form.
fn tc_switches(file: &Path) -> Vec<String> {
    let o = Command::new("trace-cmd")
        .args(["report", "-N", "-i"])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains(" sched_switch:"))
        .filter_map(tc_body)
        .collect()
}

/// `ktrace record --trigger enable_event:sched:sched_switch` keeps
/// sched_switch's format in the file: `ktrace report` printed none of its
/// records (their type was unknown to the file), trace-cmd neither.
#[test]
fn recording_keeps_the_events_a_trigger_enables() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("tp_rec");
    let file = p.dir.join("k.dat");
    let text = record_and_report(&p, &file, &["--trigger", "enable_event:sched:sched_switch"]);
    let ours: Vec<String> = text
        .lines()
        .filter(|l| l.contains(" sched_switch: "))
        .map(str::to_string)
        .collect();
    assert!(!ours.is_empty(), "no sched_switch in the report:\n{text}");
    assert!(
        ours.iter()
            .all(|l| !l.contains(FAILED) && l.contains(" prev_state="))
    );
    if common::have_trace_cmd() {
        let ours: Vec<String> = ours.iter().filter_map(|l| kernel_body(l)).collect();
        assert_eq!(
            ours,
            tc_switches(&file),
            "trace-cmd report -N reads the file alike"
        );
    }
}

/// Every tracepoint of the host for a moment, one buffer read three ways:
/// the kernel's `trace`, `ktrace report` and `trace-cmd report` of a
/// `trace-cmd extract` of it.
#[test]
fn every_tracepoint_prints_as_the_kernel_trace() {
    let Some(root) = tracefs() else { return };
    if !common::have_trace_cmd() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("tp_all");
    let name = format!("ktest_tp_{}", std::process::id());
    let inst = root.join("instances").join(&name);
    let _ = fs::remove_dir(&inst);
    fs::create_dir(&inst).unwrap();
    let set = |f: &str, v: &str| fs::write(inst.join(f), v).unwrap();
    set("buffer_size_kb", "4096");
    // the kernel prints %p hashed unless told otherwise; 6.18 prints
    // strings right with it off (6.1 x86_64 does not: see 72-tracepoints.sh)
    set("options/hash-ptr", "0");
    set("events/enable", "1");
    let enabled = count_enabled(&inst.join("events"));
    // a workload that switches tasks, opens files, takes interrupts
    let _ = Command::new("sh")
        .args([
            "-c",
            "ls / >/dev/null; cat /etc/hostname >/dev/null; sleep 0.2",
        ])
        .status();
    p.run(50);
    set("events/enable", "0");
    let kernel: Vec<String> = fs::read_to_string(inst.join("trace"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let out = in_namespace(
        &p.dir,
        &format!("trace-cmd extract -B {name} -o x.dat >extract.log 2>&1; echo rc=$?"),
    );
    let _ = fs::remove_dir(&inst);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("rc=0"),
        "trace-cmd extract: {said} {}",
        fs::read_to_string(p.dir.join("extract.log")).unwrap_or_default()
    );
    let dat = p.dir.join("x.dat");
    let rep = ktrace().arg("report").arg(&dat).output().unwrap();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let ours: Vec<String> = String::from_utf8_lossy(&rep.stdout)
        .lines()
        .filter(|l| !l.starts_with("CPU:"))
        .map(str::to_string)
        .collect();
    assert!(kernel.len() > 1000, "only {} lines", kernel.len());
    assert_eq!(
        ours.len(),
        kernel.len(),
        "ktrace and the kernel saw other records"
    );
    let gaps_allowed = from_kernel_variables(&root);
    let (mut equal, mut with_gaps) = (0, 0);
    let mut bad: HashMap<String, (usize, String, String)> = HashMap::new();
    for (o, k) in ours.iter().zip(&kernel) {
        let ev = event_of(k).unwrap_or("?").to_string();
        if o == k {
            equal += 1;
        } else if gaps_allowed.contains(&ev) && matches_with_gaps(o, k) {
            with_gaps += 1;
        } else {
            let e = bad.entry(ev).or_insert((0, o.clone(), k.clone()));
            e.0 += 1;
        }
    }
    // trace-cmd's reading of the same file, as a figure
    let tc = |plugins: bool| -> Vec<String> {
        let mut c = Command::new("trace-cmd");
        c.arg("report");
        if !plugins {
            c.arg("-N");
        }
        let o = c.arg("-i").arg(&dat).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(tc_body)
            .collect()
    };
    let ours_bodies: Vec<String> = ours.iter().filter_map(|l| kernel_body(l)).collect();
    let tc_equal = |theirs: &[String]| {
        ours_bodies
            .iter()
            .zip(theirs)
            .filter(|(a, b)| a == b)
            .count()
    };
    let (tc_default, tc_plain) = (tc(true), tc(false));
    eprintln!(
        "tracepoints enabled {enabled}, lines compared {}, equal to the kernel's trace {equal} \
         (+{with_gaps} equal but for kernel-variable arguments), equal to trace-cmd report {} \
         (-N: {})",
        kernel.len(),
        tc_equal(&tc_default),
        tc_equal(&tc_plain)
    );
    let mut report: Vec<_> = bad.iter().collect();
    report.sort_by_key(|(_, (n, ..))| std::cmp::Reverse(*n));
    assert!(
        report.is_empty(),
        "lines unlike the kernel's:\n{}",
        report
            .iter()
            .take(20)
            .map(|(e, (n, o, k))| format!("{n} {e}\n  ours:   {o}\n  kernel: {k}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // where trace-cmd reads the print fmt itself, it agrees with ktrace
    for ev in ["sched_switch:", "softirq_raise:", "irq_handler_exit:"] {
        for (a, b) in ours_bodies.iter().zip(&tc_plain) {
            if a.contains(ev) {
                assert_eq!(a, b, "trace-cmd report -N disagrees");
            }
        }
    }
}

/// The live route: `ktrace trace` decodes the kernel's events met in its
/// instance, beside a reference instance with the same events.
///
/// Every line ktrace printed must be in the reference. Once in a CI run on
/// a loaded host, one sched_switch line of 17,754 was not, and passed when
/// run again (cause not found: each instance's record is made apart, and
/// a field read again between the two writes differs, as timer_expire_entry's
/// jiffies did). A mismatch is printed with the reference's lines around it
/// on the same CPU, and the capture is taken once more: a decoding error
/// comes back every time, a race between two writes does not.
#[test]
fn live_trace_of_kernel_events_matches_a_reference_instance() {
    let Some(root) = tracefs() else { return };
    let _g = common::serial();
    let p = Prog::build("tp_live");
    let first = match live_against_reference(&root, &p) {
        Ok(compared) => {
            eprintln!("live: {compared} lines compared, all in the reference instance's");
            return;
        }
        Err(why) => why,
    };
    eprintln!(
        "live, first capture: {first}
-- taking the capture once more"
    );
    if let Err(second) = live_against_reference(&root, &p) {
        panic!(
            "twice: first capture: {first}
second capture: {second}"
        );
    }
}

/// One capture of [`live_trace_of_kernel_events_matches_a_reference_instance`]:
/// how many of ktrace's lines were compared, or what was unlike the
/// reference's.
fn live_against_reference(root: &Path, p: &Prog) -> Result<usize, String> {
    let out_file = p.dir.join("kt.out");
    let mut child = ktrace()
        .arg("trace")
        .arg(format!("p:hit {}", p.place()))
        .args(["-d", "30", "-o"])
        .arg(&out_file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let sess = loop {
        let l = lines.next().expect("ktrace ended early").unwrap();
        err.push_str(&l);
        err.push('\n');
        if let Some(s) = l.split("in session ").nth(1) {
            break s.split(';').next().unwrap().to_string();
        }
    };
    let ours_inst = root.join("instances").join(&sess);
    let ref_name = format!("ktest_tpref_{}", std::process::id());
    let reference = root.join("instances").join(&ref_name);
    let _ = fs::remove_dir(&reference);
    fs::create_dir(&reference).unwrap();
    fs::write(reference.join("buffer_size_kb"), "32768").unwrap();
    let systems = [
        "sched",
        "irq",
        "timer",
        "syscalls",
        "raw_syscalls",
        "signal",
        "task",
    ];
    for inst in [&reference, &ours_inst] {
        let _ = fs::write(inst.join("options/hash-ptr"), "0");
        for s in systems {
            let _ = fs::write(inst.join("events").join(s).join("enable"), "1");
        }
    }
    let _ = Command::new("sh")
        .args([
            "-c",
            "ls / >/dev/null; cat /etc/hostname >/dev/null; sleep 0.2",
        ])
        .status();
    p.run(20);
    for inst in [&ours_inst, &reference] {
        for s in systems {
            let _ = fs::write(inst.join("events").join(s).join("enable"), "0");
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let kernel = fs::read_to_string(reference.join("trace")).unwrap();
    let _ = fs::remove_dir(&reference);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    for l in lines.map_while(Result::ok) {
        err.push_str(&l);
        err.push('\n');
    }
    let st = child.wait().unwrap();
    assert!(st.success(), "{err}");
    // the task's name is left out: the kernel names tasks from its small
    // saved_cmdlines cache when `trace` is read (`<...>` once a busy
    // machine evicted them), ktrace when it printed them
    let mask = |l: &str| -> Option<String> {
        let (head, rest) = l.split_once("] ")?;
        let head = head.rsplit_once('-').map_or(head, |(_, pid)| pid);
        let (flags, rest) = rest.split_once(' ')?;
        let (_, body) = rest.split_once(": ")?;
        let mut f: Vec<char> = flags.chars().collect();
        if f.len() > 1 {
            f[1] = '?';
        }
        // each instance's record is made apart, its fields read again:
        // timer_expire_entry's `now` and `baseclk` are jiffies read at each
        // write, and an interrupt between the two writes can tick them (a
        // failure of this test on a loaded host: ours `now=4308944564
        // baseclk=4308944563`, not in the reference's)
        let body = match body.strip_prefix("timer_expire_entry: ") {
            Some(b) => format!(
                "timer_expire_entry: {}",
                b.split(' ')
                    .map(|w| match w.split_once('=') {
                        Some((k @ ("now" | "baseclk"), _)) => format!("{k}=*"),
                        _ => w.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            None => body.to_string(),
        };
        Some(format!("{head}] {} {body}", f.iter().collect::<String>()))
    };
    let mut theirs: HashMap<String, usize> = HashMap::new();
    // where the reference's buffer overflowed (a busy host), it lost its
    // first records: compare what came after its first one on each CPU
    let overflowed = kernel
        .lines()
        .find_map(|l| l.strip_prefix("# entries-in-buffer/entries-written: "))
        .and_then(|v| v.split_whitespace().next()?.split_once('/'))
        .is_some_and(|(kept, written)| kept != written);
    let mut first: HashMap<String, f64> = HashMap::new();
    for l in kernel.lines().filter(|l| !l.starts_with('#')) {
        if let Some(m) = mask(l) {
            *theirs.entry(m).or_default() += 1;
        }
        if let Some((cpu, ts)) = cpu_ts(l) {
            first.entry(cpu).or_insert(ts);
        }
    }
    let ours = fs::read_to_string(&out_file).unwrap();
    let (mut compared, mut equal) = (0, 0);
    let mut unlike = Vec::new();
    for l in ours.lines().filter(|l| !l.contains(" hit: ")) {
        let Some(m) = mask(l) else { continue };
        if overflowed
            && let Some((cpu, ts)) = cpu_ts(l)
            && first.get(&cpu).is_none_or(|f| ts < f + 0.001)
        {
            continue;
        }
        compared += 1;
        match theirs.get_mut(&m) {
            Some(n) if *n > 0 => {
                *n -= 1;
                equal += 1;
            }
            _ => unlike.push(l.to_string()),
        }
    }
    // too few lines is no race: it fails at once
    assert!(compared > 100, "{compared} lines:\n{ours}");
    if unlike.is_empty() {
        return Ok(compared);
    }
    // each unlike line with the reference's lines within 0.5 ms of it on
    // its CPU (at most 8): what the kernel wrote there instead
    let around = |l: &str| -> String {
        let Some((cpu, ts)) = cpu_ts(l) else {
            return String::new();
        };
        kernel
            .lines()
            .filter(|k| cpu_ts(k).is_some_and(|(c, t)| c == cpu && (t - ts).abs() < 0.0005))
            .take(8)
            .map(|k| format!("\n    reference: {k}"))
            .collect()
    };
    Err(format!(
        "{compared} lines compared, {equal} in the reference; {} not in the kernel's trace:\n{}",
        unlike.len(),
        unlike
            .iter()
            .take(5)
            .map(|l| format!("  ours: {l}{}", around(l)))
            .collect::<Vec<_>>()
            .join("\n")
    ))
}

/// The CPU and time stamp of a kernel-style line.
fn cpu_ts(l: &str) -> Option<(String, f64)> {
    let (_, rest) = l.split_once(" [")?;
    let (cpu, rest) = rest.split_once("] ")?;
    let ts = rest.split_whitespace().nth(1)?.strip_suffix(':')?;
    Some((cpu.to_string(), ts.parse().ok()?))
}

/// How many events an `events/` tree has enabled.
fn count_enabled(events: &Path) -> usize {
    let mut n = 0;
    for s in fs::read_dir(events).into_iter().flatten().flatten() {
        for e in fs::read_dir(s.path()).into_iter().flatten().flatten() {
            if fs::read_to_string(e.path().join("enable")).is_ok_and(|v| v.trim() == "1") {
                n += 1;
            }
        }
    }
    n
}

/// `comm-pid [cpu] ts event: text` of a kernel-style line (no flags).
fn kernel_body(l: &str) -> Option<String> {
    let (task, rest) = l.split_once(" [")?;
    let (cpu, rest) = rest.split_once("] ")?;
    let (_, rest) = rest.trim_start().split_once(' ')?;
    let (ts, body) = rest.trim_start().split_once(": ")?;
    Some(format!("{} [{cpu}] {ts} {}", task.trim(), body.trim_end()))
}

/// The same of a trace-cmd report line (`[NAME: ]comm-pid [cpu] ts: event:
/// padding text`).
fn tc_body(l: &str) -> Option<String> {
    let (task, rest) = l.split_once(" [")?;
    let task = task.rsplit_once(": ").map_or(task, |(_, t)| t).trim();
    let (cpu, rest) = rest.split_once("] ")?;
    let (ts, body) = rest.trim_start().split_once(": ")?;
    let (ev, text) = body.split_once(':').unwrap_or((body, ""));
    Some(
        format!("{task} [{cpu}] {ts} {ev}: {}", text.trim())
            .trim_end()
            .to_string(),
    )
}

/// `-e SYS:EVENT` traces the kernel's own events beside the probes: in a
/// recording (their formats in the file, so `ktrace report` and `trace-cmd
/// report -N` print them alike, line for line) and live; obeying the
/// command's pid list. Before, there was no way to trace a tracepoint with
/// ktrace but a trigger on a probe.
#[test]
fn kernel_events_beside_the_probes() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("tp_e");
    let file = p.dir.join("e.dat");
    let text = record_and_report(&p, &file, &["-e", "sched:sched_switch", "-e", "irq:*"]);
    let hits = text.lines().filter(|l| l.contains(" hit: ")).count();
    assert_eq!(hits, 20, "the probe's hits:\n{text}");
    let switches: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" sched_switch: "))
        .collect();
    // the command sleeps between hits: it is switched out each time
    assert!(switches.len() >= 20, "sched_switch lines:\n{text}");
    assert!(
        switches
            .iter()
            .all(|l| !l.contains(FAILED) && l.contains(" prev_state="))
    );
    // the pid list holds as the kernel applies it (set_event_pid keeps a
    // sched_switch when either task is listed): every switch involves the
    // command or ktrace, whose pid the list holds for the command's sake
    let pid_of = |l: &str| -> Option<String> {
        let task = l.split(" [").next()?.trim();
        Some(task.rsplit('-').next()?.to_string())
    };
    let cmd_pids: std::collections::HashSet<String> = text
        .lines()
        .filter(|l| l.contains(" hit: "))
        .filter_map(pid_of)
        .collect();
    for l in &switches {
        assert!(
            cmd_pids
                .iter()
                .any(|pid| l.contains(&format!("_pid={pid} ")))
                || l.contains("_comm=ktrace "),
            "a switch of other tasks: {l}"
        );
    }
    if common::have_trace_cmd() {
        let ours: Vec<String> = switches.iter().filter_map(|l| kernel_body(l)).collect();
        assert_eq!(
            ours,
            tc_switches(&file),
            "trace-cmd report -N reads the file alike"
        );
    }
    // live: the same events printed as they come
    let live = ktrace()
        .arg("trace")
        .arg(format!("p:hit {}", p.place()))
        .args(["-e", "sched:sched_switch", "--"])
        .arg(&p.bin)
        .args(["20", "10000"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&live.stdout).into_owned();
    // (the program exits with the low bit of a sum: 0 for 20 hits)
    assert!(
        live.status.success(),
        "{}",
        String::from_utf8_lossy(&live.stderr)
    );
    assert_eq!(text.lines().filter(|l| l.contains(" hit: ")).count(), 20);
    assert!(
        text.lines().any(|l| l.contains(" sched_switch: ")),
        "{text}"
    );
}

/// A `-e` that names no event of the kernel: a clear error, the output
/// file untouched, nothing left in tracefs; a `!` (which would switch
/// events off) is a usage error.
#[test]
fn kernel_event_that_does_not_exist_is_refused_cleanly() {
    let Some(root) = tracefs() else { return };
    let _g = common::serial();
    let p = Prog::build("tp_e_bad");
    let file = p.dir.join("e.dat");
    let before = common::state(&root);
    let out = ktrace()
        .arg("record")
        .arg(format!("p:hit {}", p.place()))
        .args(["-e", "nosuchsystem:nosuchevent", "-d", "1", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("-e nosuchsystem:nosuchevent: no event of this kernel matches it"),
        "{err}"
    );
    assert!(!file.exists() && !p.dir.join("e.dat.partial").exists());
    assert_eq!(common::state(&root), before, "tracefs changed");
    let out = ktrace()
        .arg("trace")
        .arg(format!("p:hit {}", p.place()))
        .args(["-e", "!sched", "-d", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an event"));
}
