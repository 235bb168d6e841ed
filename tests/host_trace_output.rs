//! Host tests of `ktrace trace` output from the binary ring buffers, with
//! real uprobes on a small C program (crates/ring/fixtures/target.c):
//! ktrace's text equals the kernel's own `trace` lines for the same events
//! (the same probes enabled in a private reference instance), JSON carries
//! typed values, and events lost to a slow reader are reported both in the
//! stream and in the summary.

mod common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{Prog, serial, start_trace, state, tracefs};
use rustix::process::Signal;

/// Every field type a uprobe can carry, on `probe_me(struct sample *p,
/// const char *s, const char **strs, long n)` (x86_64 registers).
fn field_defs(p: &Prog) -> Vec<String> {
    vec![
        format!(
            "p:ints {} u8=+0(%di):u8 s8=+1(%di):s8 u16=+2(%di):u16 s16=+4(%di):s16 \
             u32=+8(%di):u32 s32=+12(%di):s32 u64=+16(%di):u64 s64=+24(%di):s64 \
             x8=+0(%di):x8 x16=+2(%di):x16 x32=+8(%di):x32 x64=+16(%di):x64 n=%cx",
            p.place()
        ),
        format!(
            "p:more {} arr=+32(%di):u32[3] bits=+44(%di):b4@8/32 ch=+48(%di):char \
             s=+0(%si):string strs=+0(%dx):string[3] comm=$comm",
            p.place()
        ),
        format!("r:ret {} rv=$retval:s64", p.place()),
    ]
}

/// The session name from ktrace's "tracing ... in session NAME;" line.
fn session_name(early: &str) -> String {
    early
        .split("in session ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .expect("session name on stderr")
        .to_string()
}

/// A private instance where the session's events are enabled too, so the
/// kernel prints the same events itself.
struct Reference {
    dir: PathBuf,
    group: String,
}

impl Reference {
    fn new(root: &Path, group: &str, clock: Option<&str>) -> Reference {
        let dir = root
            .join("instances")
            .join(format!("ktrace_ref_{}", std::process::id()));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("buffer_size_kb"), "4096").unwrap();
        if let Some(clock) = clock {
            fs::write(dir.join("trace_clock"), clock).unwrap();
        }
        fs::write(dir.join("events").join(group).join("enable"), "1").unwrap();
        Reference {
            dir,
            group: group.to_string(),
        }
    }

    /// The event lines of the instance's `trace` file.
    fn lines(&self) -> Vec<String> {
        fs::read_to_string(self.dir.join("trace"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = fs::write(
            self.dir.join("events").join(&self.group).join("enable"),
            "0",
        );
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Runs the fixture under ktrace with `extra` flags and a reference
/// instance; returns (ktrace stdout lines, kernel lines, ktrace stderr).
fn with_reference(
    root: &Path,
    p: &Prog,
    extra: &[&str],
    hits: u64,
) -> (Vec<String>, Vec<String>, String) {
    let mut args = field_defs(p);
    args.extend(["-d", "60"].iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut run = start_trace(&args, Stdio::piped(), &[]);
    let group = session_name(&run.early_stderr);
    // the session's instance wakes its reader for batches of pages
    let percent = fs::read_to_string(root.join("instances").join(&group).join("buffer_percent"));
    assert_eq!(percent.unwrap().trim(), "25");
    // the same trace clock as ktrace's instance
    let clock = extra
        .iter()
        .position(|a| *a == "--clock")
        .map(|i| extra[i + 1]);
    let reference = Reference::new(root, &group, clock);
    if extra.contains(&"--stack") {
        // What --stack asks of ktrace's instance for uprobes.
        fs::write(reference.dir.join("options/userstacktrace"), "1").unwrap();
    }
    p.run(hits);
    std::thread::sleep(Duration::from_millis(300));
    let kernel = reference.lines();
    // Disabled and removed before ktrace deletes its group.
    drop(reference);
    let mut stdout = run.child.stdout.take().unwrap();
    run.signal(Signal::INT);
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    let (code, stderr) = run.finish();
    assert_eq!(code, 0, "{stderr}");
    let pid = run_pid(&stderr);
    assert!(state(root).of_pid(pid).is_empty(), "leftovers: {stderr}");
    (out.lines().map(str::to_string).collect(), kernel, stderr)
}

/// A trace line split at its timestamp: (line with the timestamp blanked,
/// the timestamp in microseconds). Each instance reads the clock for its own
/// copy of an event, so the two copies' stamps differ by a few microseconds;
/// every other byte must be equal.
fn split_ts(line: &str) -> (String, u64) {
    let close = line.find("] ").expect("a [CPU] column");
    let colon = close + line[close..].find(": ").expect("a timestamp");
    let start = line[..colon]
        .rfind(' ')
        .expect("space before the timestamp")
        + 1;
    let (sec, usec) = line[start..colon].split_once('.').expect("sec.usec");
    assert_eq!(usec.len(), 6, "{line}");
    let us = sec.trim().parse::<u64>().unwrap() * 1_000_000 + usec.parse::<u64>().unwrap();
    let blank = format!(
        "{}{}{}",
        &line[..start],
        "#".repeat(colon - start),
        &line[colon..]
    );
    (blank, us)
}

/// Asserts `ours` equals `kernel` byte for byte except for timestamps, which
/// must be within 200 µs of the kernel's.
fn assert_same_lines(ours: &[String], kernel: &[String], context: &str) {
    assert_eq!(
        ours.len(),
        kernel.len(),
        "{context}\nours: {ours:#?}\nkernel: {kernel:#?}"
    );
    for (o, k) in ours.iter().zip(kernel) {
        let (ob, ots) = split_ts(o);
        let (kb, kts) = split_ts(k);
        assert_eq!(ob, kb, "{context}");
        assert!(ots.abs_diff(kts) < 200, "{o}\n{k}\n{context}");
    }
}

fn run_pid(stderr: &str) -> u32 {
    session_name(stderr)
        .strip_prefix("ktrace_p")
        .and_then(|r| r.split('_').next())
        .and_then(|p| p.parse().ok())
        .expect("pid in the session name")
}

#[test]
fn text_equals_the_kernels_trace_lines() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("text");
    let (ours, kernel, stderr) = with_reference(&root, &p, &[], 12);
    // 12 hits of each entry probe and 12 returns.
    assert_eq!(kernel.len(), 36, "{kernel:#?}");
    for ev in [" ints: ", " more: ", " ret: "] {
        assert_eq!(kernel.iter().filter(|l| l.contains(ev)).count(), 12, "{ev}");
    }
    // Field types really present: negative values, the string array, the
    // faulted-free strings, the return probe's arrow.
    let all = kernel.join("\n");
    for needle in [
        "s8=-100",
        "strs={\"alpha\",\"\",\"gamma delta\"}",
        "s=\"hello, ring0\"",
        " <- ",
        "ch='A'",
    ] {
        assert!(all.contains(needle), "kernel lines lack {needle}:\n{all}");
    }
    assert_same_lines(&ours, &kernel, &stderr);
    assert!(stderr.contains("36 event(s), 0 lost"), "{stderr}");
}

/// A trace line printed with a counting clock (` %12llu`), split at its
/// stamp: (line with the 12-column stamp blanked, the count).
fn split_count(line: &str) -> (String, u64) {
    let close = line.find("] ").expect("a [CPU] column");
    let colon = close + line[close..].find(": ").expect("a time stamp");
    let field = &line[colon - 12..colon];
    let count = field.trim_start();
    assert!(
        !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()),
        "not a right-aligned count in 12 columns: {line}"
    );
    let blank = format!(
        "{}{}{}",
        &line[..colon - 12],
        "#".repeat(12),
        &line[colon..]
    );
    (blank, count.parse().unwrap())
}

#[test]
fn counting_clock_stamps_print_raw_like_the_kernels() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("counter");
    let (ours, kernel, stderr) = with_reference(&root, &p, &["--clock", "counter"], 4);
    assert_eq!(kernel.len(), 12, "{kernel:#?}");
    assert_eq!(ours.len(), kernel.len(), "{stderr}\nours: {ours:#?}");
    let mut last = 0;
    for (o, k) in ours.iter().zip(&kernel) {
        let (ob, ocount) = split_count(o);
        let (kb, _) = split_count(k);
        assert_eq!(ob, kb, "{stderr}");
        // the counter clock counts reads: one per event, rising
        assert!(ocount > last, "{o}");
        last = ocount;
    }
}

#[test]
fn output_file_holds_the_same_lines() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("file");
    let file = p.dir.join("out.txt");
    let (ours, kernel, stderr) = with_reference(&root, &p, &["-o", file.to_str().unwrap()], 3);
    assert!(ours.is_empty(), "stdout should be empty with -o: {ours:?}");
    let written: Vec<String> = fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_same_lines(&written, &kernel, &stderr);
}

#[test]
fn stack_lines_equal_the_kernels() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("stack");
    let (ours, kernel, stderr) = with_reference(&root, &p, &["--stack"], 2);
    let stacks = kernel
        .iter()
        .filter(|l| l.ends_with(": <user stack trace>"))
        .count();
    // One user stack per entry and return hit.
    assert_eq!(stacks, 6, "{kernel:#?}");
    assert!(
        kernel.iter().any(|l| l.starts_with(" =>  <")),
        "{kernel:#?}"
    );
    // Stack lines have no timestamp of their own: compare them whole.
    let (o_ev, o_st): (Vec<String>, Vec<String>) =
        ours.iter().cloned().partition(|l| l.contains("] "));
    let (k_ev, k_st): (Vec<String>, Vec<String>) =
        kernel.iter().cloned().partition(|l| l.contains("] "));
    assert_same_lines(&o_ev, &k_ev, &stderr);
    assert_eq!(o_st, k_st, "{stderr}");
    // Stacks are shown but not counted as events.
    assert!(stderr.contains("6 event(s), 0 lost"), "{stderr}");
}

#[test]
fn json_has_typed_values() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("json");
    let (ours, kernel, stderr) = with_reference(&root, &p, &["--json"], 5);
    assert_eq!(ours.len(), kernel.len(), "{stderr}");
    let objs: Vec<serde_json::Value> = ours
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let of = |ev: &str| -> Vec<&serde_json::Value> {
        objs.iter()
            .filter(|o| o["event"] == ev)
            .map(|o| &o["fields"])
            .collect()
    };
    let ints = of("ints");
    let more = of("more");
    let ret = of("ret");
    assert_eq!((ints.len(), more.len(), ret.len()), (5, 5, 5));
    for (i, f) in ints.iter().enumerate() {
        let i = i as i64;
        assert_eq!(f["u8"], serde_json::json!(200 + i), "{f}");
        assert_eq!(f["s8"], serde_json::json!(-100 - i));
        assert_eq!(f["u16"], serde_json::json!(60000 + i));
        assert_eq!(f["s16"], serde_json::json!(-30000 + i));
        assert_eq!(f["u32"], serde_json::json!(4_000_000_000u64 + i as u64));
        assert_eq!(f["s32"], serde_json::json!(-2_000_000_000 + i));
        assert_eq!(
            f["u64"],
            serde_json::json!(18_000_000_000_000_000_000u64 + i as u64)
        );
        assert_eq!(
            f["s64"],
            serde_json::json!(-9_000_000_000_000_000_000i64 + i)
        );
        assert_eq!(f["n"], serde_json::json!(i));
    }
    for (i, f) in more.iter().enumerate() {
        assert_eq!(f["arr"], serde_json::json!([i, 0xdeadbeefu32, 7]), "{f}");
        assert_eq!(
            f["strs"],
            serde_json::json!(["alpha", "", "gamma delta"]),
            "{f}"
        );
        let want_s = if i % 5 == 4 {
            String::new()
        } else {
            format!("hello, ring{i}")
        };
        assert_eq!(f["s"], serde_json::json!(want_s));
        let ch = char::from(b'A' + i as u8).to_string();
        assert_eq!(f["ch"], serde_json::json!(ch));
        assert_eq!(f["comm"], serde_json::json!("target"));
        assert!(f["bits"].is_u64(), "{f}");
    }
    for f in ret {
        assert!(f["rv"].is_i64(), "{f}");
    }
    assert!(
        objs.iter()
            .all(|o| o["comm"] == "target" && o["ts"].is_u64()),
        "{ours:#?}"
    );
}

#[test]
fn slow_reader_losses_are_reported() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("lost");
    let hits: u64 = 20_000;
    // A small buffer, and a reader that does not read for 3 s: the kernel
    // overwrites while ktrace is blocked on its output.
    let mut cmd = common::ktrace();
    cmd.arg("trace")
        .arg(format!("p:hit {} a=%di s=+0(%si):string", p.place()))
        .args(["--buffer-size", "16", "--"])
        .arg(&p.bin)
        .arg(hits.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let st = child.wait().unwrap();
    assert!(st.success(), "{stderr}");
    let shown = out.lines().filter(|l| l.contains(" hit: ")).count() as u64;
    let lost_lines: u64 = out
        .lines()
        .filter_map(|l| {
            l.strip_prefix("CPU:")?
                .split_once(" [LOST ")?
                .1
                .strip_suffix(" EVENTS]")?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let summary = stderr
        .lines()
        .find(|l| l.contains(" event(s), "))
        .unwrap_or_else(|| panic!("no summary: {stderr}"));
    let counted: u64 = summary
        .trim_start_matches("ktrace: ")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let lost: u64 = summary
        .split(" event(s), ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(counted, shown, "{summary}");
    assert!(
        lost > 0,
        "a 16 KB buffer and a 3 s stall lost nothing?\n{stderr}"
    );
    assert!(summary.contains(" lost on CPU "), "{summary}");
    assert!(lost_lines > 0, "no [LOST N EVENTS] line in the stream");
    assert!(lost_lines <= lost, "{lost_lines} > {lost}: {summary}");
    // Every hit is either shown or counted as lost.
    assert_eq!(shown + lost, hits, "{summary}\n{stderr}");
    assert!(state(&root).of_pid(child.id()).is_empty(), "{stderr}");
}

/// Issue 14 defect #1: `-o /dev/full` exited 0 saying "output closed".
/// A write error on the output is an I/O error: exit 1, the kernel's
/// reason on stderr, and nothing left in tracefs.
#[test]
fn output_write_error_is_an_io_error_exit_1() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("full");
    let before = state(&root);
    let out = common::ktrace()
        .args(["trace", &format!("p:hot {} a=%di", p.place())])
        .args(["-o", "/dev/full", "--"])
        .arg(&p.bin)
        .arg("3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // the writer thread meets the error either while events still flow or
    // when the output is finished: both say so and name the reason
    assert!(
        stderr.contains("cannot write") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert!(!stderr.contains("output closed"), "{stderr}");
    assert!(stderr.contains("cleanup removed 1 probe(s)"), "{stderr}");
    assert_eq!(state(&root), before);
}

/// Issue 14 defect #4: an event a trigger enabled
/// (`enable_event:sched:sched_switch`) printed as `Unknown type 372`. Its
/// id is looked up through tracefs and its records printed from its print
/// fmt: the target's own switches name it and its pid, as the kernel does.
#[test]
fn trigger_enabled_event_is_decoded_not_unknown_type() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let p = Prog::build("trig");
    let before = state(&root);
    // the target sleeps between hits, so it switches out after the first
    let out = common::ktrace()
        .args(["trace", &format!("p:hot {} a=%di", p.place())])
        .args(["--trigger", "enable_event:sched:sched_switch", "--"])
        .arg(&p.bin)
        .args(["3", "20000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stdout.contains("Unknown type"), "{stdout}");
    let pid = run_pid_of(&stdout, " hot: ");
    let switch = format!(" sched_switch: prev_comm=target prev_pid={pid} prev_prio=");
    assert!(stdout.contains(&switch), "no {switch:?} in\n{stdout}");
    // the hits are still all there, and counted apart from the switches
    assert_eq!(stdout.matches(" hot: ").count(), 3, "{stdout}");
    assert!(stderr.contains("shown          3"), "{stderr}");
    assert_eq!(state(&root), before);
}

/// The pid of the task of the first line containing `what`.
fn run_pid_of(stdout: &str, what: &str) -> u32 {
    let line = stdout
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} line in\n{stdout}"));
    let task = line.split(" [").next().unwrap().trim();
    task.rsplit('-').next().unwrap().trim().parse().unwrap()
}
