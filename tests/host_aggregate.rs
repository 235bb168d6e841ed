//! `ktrace count`, `ktrace hist` and `ktrace latency` on the host's real
//! uprobes (the user engine: this kernel's README lists no hist triggers).
//! A workload built here (tests/fixtures/agg_workload.c) calls `work(i)` for
//! i = 0..N-1, sleeps known durations in `nap`, and recurses in `rec`; the
//! numbers must be exact, computed here independently of ktrace. Also:
//! intervals that partition the counts, Ctrl-C printing the final result,
//! Prometheus through the command (scraped over loopback, checked by
//! promtool), bad input refused before anything is written, and bpftrace
//! `count()`/`hist()` on the same workload (skipped with the reason when
//! bpftrace is not installed or cannot attach).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ktrace, serial, state, tracefs};

/// The workload, built with gcc into a private directory.
struct Workload {
    dir: PathBuf,
    bin: PathBuf,
}

impl Workload {
    fn build(tag: &str) -> Workload {
        let dir = std::env::temp_dir().join(format!("ktrace_agg_{}_{tag}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("aggwl");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agg_workload.c");
        let st = Command::new("gcc")
            .args(["-O1", "-fno-inline", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(st.success());
        Workload { dir, bin }
    }

    fn at(&self, func: &str) -> String {
        format!("{}:{func}", self.bin.display())
    }

    fn cmd(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec!["--".to_string(), self.bin.display().to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

thread_local! {
    /// The ktrace processes this test started.
    static PIDS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs ktrace with `args`; (exit code, stdout, stderr).
fn run(args: &[String]) -> (i32, String, String) {
    let child = ktrace()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
}

/// bpftrace-style power-of-two bucket of `v` (0 → [0,1), 1 → [1,2),
/// [2,4), ...), as (lo, hi).
fn log2_bucket(v: u64) -> (u64, u64) {
    if v == 0 {
        return (0, 1);
    }
    let lo = 1u64 << (63 - v.leading_zeros());
    (lo, lo * 2)
}

/// (lo, hi) → count from one histogram group of a JSON report.
fn buckets(group: &serde_json::Value) -> BTreeMap<(u64, u64), u64> {
    group["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                (b["lo"].as_u64().unwrap(), b["hi"].as_u64().unwrap()),
                b["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Nothing of the ktrace processes this test started is left in tracefs
/// (other users of the machine may come and go meanwhile, so only ours
/// are judged), and no probe on the test's workload either.
fn assert_clean(root: &Path, w: &Workload) {
    let after = state(root);
    let pids = PIDS.with(|p| p.borrow().clone());
    for pid in pids {
        assert_eq!(after.of_pid(pid), Vec::<String>::new(), "left behind");
    }
    let dir = w.dir.display().to_string();
    let ours: Vec<&String> = after
        .dynamic_events
        .iter()
        .filter(|l| l.contains(&dir))
        .collect();
    assert!(ours.is_empty(), "left behind: {ours:?}");
}

#[test]
fn count_is_exact() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("count");
    let mut args = s(&["count", "--json"]);
    args.push(w.at("work"));
    args.extend(w.cmd(&["work", "1234"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("user engine"), "the engine is said: {err}");
    let r = json(out.lines().next().unwrap());
    assert_eq!(r["total"], 1234, "{out}");
    assert_eq!(r["lost"], 0);
    assert_clean(&root, &w);
}

#[test]
fn count_by_field_and_top() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("countby");
    // work(i) for i < 10: ten keys of one hit, and --by comm: one key
    let mut args = s(&["count", "--json", "--by", "v", "--by", "comm"]);
    args.push(format!("{} v=arg1:s64", w.at("work")));
    args.extend(w.cmd(&["work", "10"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    let rows = r["rows"].as_array().unwrap();
    let mut vs: Vec<i64> = rows
        .iter()
        .map(|row| {
            assert_eq!(row["count"], 1);
            assert_eq!(row["key"]["comm"], "aggwl");
            row["key"]["v"].as_i64().unwrap()
        })
        .collect();
    vs.sort();
    assert_eq!(vs, (0..10).collect::<Vec<_>>());
    // --top 3 in the terminal table
    let mut args = s(&["count", "--by", "v", "--top", "3"]);
    args.push(format!("{} v=arg1:s64", w.at("work")));
    args.extend(w.cmd(&["work", "10"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("total 10 hits, 10 keys (top 3 shown)"),
        "{out}"
    );
    assert_clean(&root, &w);
}

#[test]
fn count_by_user_stack() {
    let Some(root) = tracefs() else { return };
    if !root.join("options/userstacktrace").exists() {
        eprintln!("SKIP count_by_user_stack: no options/userstacktrace");
        return;
    }
    let _g = serial();
    let w = Workload::build("stack");
    let mut args = s(&["count", "--json", "--by", "stack"]);
    args.push(w.at("work"));
    args.extend(w.cmd(&["work", "100"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    assert_eq!(r["total"], 100, "{out}");
    // every hit has the same user stack, which starts at the probed
    // instruction (a hex address: user stacks are not symbolized)
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{out}");
    let frames = rows[0]["key"]["stack"].as_array().expect("stack frames");
    assert!(
        frames[0].as_str().is_some_and(|f| f.starts_with("0x")),
        "{out}"
    );
    assert_clean(&root, &w);
}

#[test]
fn hist_log2_and_linear_are_exact() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("hist");
    let n = 1000u64;
    let probe = format!("{} v=arg1:s64", w.at("work"));
    let mut args = s(&["hist", "--json"]);
    args.extend([probe.clone(), "v".into()]);
    args.extend(w.cmd(&["work", &n.to_string()]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    let g = &r["groups"][0];
    let mut want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for i in 0..n {
        *want.entry(log2_bucket(i)).or_default() += 1;
    }
    assert_eq!(buckets(g), want, "{out}");
    assert_eq!(g["count"], n);
    assert_eq!(g["sum"], n * (n - 1) / 2);
    assert_eq!((g["min"].as_i64(), g["max"].as_i64()), (Some(0), Some(999)));
    // linear, 128 wide
    let mut args = s(&["hist", "--json", "--linear", "128"]);
    args.extend([probe, "v".into()]);
    args.extend(w.cmd(&["work", &n.to_string()]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    let mut want: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for i in 0..n {
        let lo = i / 128 * 128;
        *want.entry((lo, lo + 128)).or_default() += 1;
    }
    assert_eq!(buckets(&r["groups"][0]), want, "{out}");
    assert_clean(&root, &w);
}

#[test]
fn latency_of_known_sleeps() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("lat");
    // 5 naps of 40 ms: in [32, 64) ms, [32768, 65536) us on a quiet
    // machine; a loaded one oversleeps (a nap of 70 ms landed in the next
    // bucket once), so the buckets are only required to be log2 buckets at
    // or above that one and below 64 times it, which a unit off by 1000
    // still fails.
    for (unit, lo, hi) in [("ms", 32, 64), ("us", 32768, 65536)] {
        let mut args = s(&["latency", "--json", "--unit", unit]);
        args.push(w.at("nap"));
        args.extend(w.cmd(&["nap", "5", "40000"]));
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let r = json(out.lines().next().unwrap());
        assert_eq!(r["unit"], unit);
        let got = buckets(&r["groups"][0]);
        assert_eq!(got.values().sum::<u64>(), 5, "{out}");
        for &(l, h) in got.keys() {
            assert!(
                l >= lo && h == 2 * l && h <= hi * 64,
                "bucket [{l}, {h}): {out}"
            );
        }
        assert_eq!(r["unmatched_returns"], 0);
        assert_eq!(r["in_flight"], 0);
        let min = r["groups"][0]["min"].as_u64().unwrap();
        assert!(min >= if unit == "ms" { 40 } else { 40_000 }, "{out}");
    }
    assert_clean(&root, &w);
}

#[test]
fn latency_pairs_recursive_and_nested_calls() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("rec");
    // rec(5) recurses to rec(0), which naps 30 ms: six calls of rec, each
    // taking at least the nap, and one nap, inside all of them.
    let mut args = s(&["latency", "--json", "--unit", "ms", "--by", "func"]);
    args.extend([w.at("rec"), w.at("nap")]);
    args.extend(w.cmd(&["rec", "5", "30000"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    let groups = r["groups"].as_array().unwrap();
    let count_of = |f: &str| {
        groups
            .iter()
            .find(|g| g["key"]["func"].as_str().is_some_and(|k| k.contains(f)))
            .map(|g| (g["count"].as_u64().unwrap(), g["min"].as_u64().unwrap()))
    };
    let (rec_n, rec_min) = count_of("rec").expect("rec measured");
    let (nap_n, nap_min) = count_of("nap").expect("nap measured");
    assert_eq!((rec_n, nap_n), (6, 1), "{out}");
    assert!(rec_min >= 30 && nap_min >= 30, "{out}");
    assert_eq!(r["unmatched_returns"], 0, "{out}");
    assert_eq!(r["discarded_entries"], 0, "{out}");
    assert_eq!(r["in_flight"], 0, "{out}");
    assert_clean(&root, &w);
}

#[test]
fn intervals_partition_the_counts() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("ival");
    // 12 rounds of 50 calls, 0.2 s apart: blocks every 0.5 s, whose totals
    // add up to 600 with the final block.
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do {} work 50; sleep 0.2; done",
        w.bin.display()
    );
    let mut args = s(&["count", "--json", "-i", "0.5"]);
    args.push(w.at("work"));
    args.extend(s(&["--", "sh", "-c", &script]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<serde_json::Value> = out.lines().map(json).collect();
    assert!(docs.len() >= 3, "several interval blocks: {out}");
    let total: u64 = docs.iter().map(|d| d["total"].as_u64().unwrap()).sum();
    assert_eq!(total, 600, "{out}");
    for d in &docs[..docs.len() - 1] {
        assert_eq!(d["interval_ns"], 500_000_000u64, "{d}");
    }
    // terminal blocks are headed by their time
    let mut args = s(&["count", "-i", "0.5"]);
    args.push(w.at("work"));
    args.extend(s(&["--", "sh", "-c", &script]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let heads = out
        .lines()
        .filter(|l| l.starts_with("[20") && l.ends_with(" UTC]"))
        .count();
    assert!(heads >= 3, "{out}");
    assert_clean(&root, &w);
}

/// Starts ktrace with `args` and waits for its "Ctrl-C to stop" line.
fn start(args: &[String]) -> (std::process::Child, String) {
    let mut child = ktrace()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut early = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut line = String::new();
        let n = err.read_line(&mut line).unwrap();
        early.push_str(&line);
        if n == 0 || line.contains("Ctrl-C to stop") {
            break;
        }
        assert!(Instant::now() < deadline, "ktrace did not start: {early}");
    }
    // keep draining stderr so ktrace never blocks on it
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
    });
    (child, early)
}

#[test]
fn ctrl_c_prints_the_final_result() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("int");
    let mut args = s(&["count"]);
    args.push(w.at("work"));
    let (mut child, early) = start(&args);
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    assert!(early.contains("Ctrl-C to stop"), "{early}");
    Command::new(&w.bin).args(["work", "321"]).status().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(out.contains("total 321 hits"), "{out}");
    assert_clean(&root, &w);
}

/// GET /metrics from `addr`.
fn scrape(addr: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1."), "{resp}");
    resp.split_once("\r\n\r\n").unwrap().1.to_string()
}

#[test]
fn prometheus_through_the_command() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("prom");
    // a free loopback port
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut args = s(&["hist", "--prometheus", &addr]);
    args.extend([format!("{} v=arg1:s64", w.at("work")), "v".into()]);
    let (mut child, early) = start(&args);
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    assert!(early.contains(&format!("http://{addr}/metrics")), "{early}");
    // bound to exactly that address: listening on 127.0.0.1 only
    let tcp = fs::read_to_string("/proc/net/tcp").unwrap();
    let hexport = format!(":{port:04X}");
    let listening: Vec<&str> = tcp
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&hexport) && f[3] == "0A"
        })
        .collect();
    assert_eq!(listening.len(), 1, "{listening:?}");
    assert!(
        listening[0].split_whitespace().nth(1).unwrap() == format!("0100007F{hexport}"),
        "{listening:?}"
    );
    Command::new(&w.bin).args(["work", "100"]).status().unwrap();
    // published at least every 0.5 s
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let t = scrape(&addr);
        if t.contains("ktrace_v_count{probe=\"p_work\",func=\"work\"} 100")
            || Instant::now() > deadline
        {
            break t;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    child.wait().unwrap();
    assert!(text.contains("# TYPE ktrace_v histogram"), "{text}");
    // every series names its function (no --by func given)
    assert!(
        text.contains("ktrace_v_count{probe=\"p_work\",func=\"work\"} 100"),
        "{text}"
    );
    assert!(
        text.contains("ktrace_v_sum{probe=\"p_work\",func=\"work\"} 4950"),
        "{text}"
    );
    // cumulative buckets: le=63 holds 0..63, +Inf all
    assert!(
        text.contains("ktrace_v_bucket{probe=\"p_work\",func=\"work\",le=\"63\"} 64"),
        "{text}"
    );
    assert!(
        text.contains("ktrace_v_bucket{probe=\"p_work\",func=\"work\",le=\"+Inf\"} 100"),
        "{text}"
    );
    // the whole ladder, the negative bucket of a field included
    assert!(
        text.contains("ktrace_v_bucket{probe=\"p_work\",func=\"work\",le=\"-1\"} 0"),
        "{text}"
    );
    if Path::new("/usr/bin/promtool").exists() {
        let (ok, said) = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .output_with(&text);
        assert!(ok, "promtool check metrics: {said}\n{text}");
    } else {
        eprintln!("SKIP part: promtool not installed");
    }
    assert_clean(&root, &w);
}

trait OutputWith {
    fn output_with(&mut self, input: &str) -> (bool, String);
}

impl OutputWith for Command {
    fn output_with(&mut self, input: &str) -> (bool, String) {
        let mut c = self
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let o = c.wait_with_output().unwrap();
        (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    }
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("bad");
    let probe = format!("{} v=arg1:s64 name=+0(%sp):string", w.at("work"));
    let table: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["hist".into(), probe.clone(), "nope".into()],
            "no field 'nope' in",
        ),
        (
            vec!["hist".into(), probe.clone(), "name".into()],
            "cannot make a histogram of 'name': it is a string field",
        ),
        (
            vec!["count".into(), probe.clone(), "--by".into(), "nope".into()],
            "unknown key 'nope'",
        ),
        (
            vec![
                "count".into(),
                probe.clone(),
                "--by".into(),
                "v".into(),
                "--by".into(),
                "v".into(),
            ],
            "v",
        ),
        (
            vec![
                "count".into(),
                probe.clone(),
                "--engine".into(),
                "kernel".into(),
            ],
            "the kernel engine cannot do this: this kernel has no hist triggers",
        ),
        (
            vec!["latency".into(), format!("{}%return", w.at("nap"))],
            "is not a function",
        ),
        // the function tracer's route, forced where it cannot do the job
        (
            vec![
                "count".into(),
                probe.clone(),
                "--route".into(),
                "ftrace".into(),
            ],
            "--route ftrace cannot do this: ",
        ),
        (
            vec![
                "count".into(),
                "vfs_read".into(),
                "--by".into(),
                "count".into(),
                "--route".into(),
                "ftrace".into(),
            ],
            "--route ftrace cannot do this: --by count needs a probe",
        ),
        (
            vec![
                "count".into(),
                "vfs_*".into(),
                "-f".into(),
                "common_pid > 1".into(),
                "--route".into(),
                "ftrace".into(),
            ],
            "--route ftrace cannot do this: -f filters probe events",
        ),
    ];
    for (args, want) in table {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("tracing 1 probe"), "{args:?}: {err}");
        assert!(
            !err.contains("cleanup removed"),
            "nothing was created: {args:?}: {err}"
        );
        assert_clean(&root, &w);
    }
}

/// bpftrace's `@[...]: N` lines and `[lo, hi) N |...|` histogram rows.
fn bpftrace_hist(text: &str) -> BTreeMap<(u64, u64), u64> {
    let mut out = BTreeMap::new();
    let num = |s: &str| -> u64 {
        let s = s.trim();
        let (n, mult) = match s.chars().last() {
            Some('K') => (&s[..s.len() - 1], 1u64 << 10),
            Some('M') => (&s[..s.len() - 1], 1 << 20),
            Some('G') => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        n.parse::<u64>().unwrap() * mult
    };
    for l in text.lines() {
        let l = l.trim();
        if !l.starts_with('[') {
            continue;
        }
        let Some((range, rest)) = l.split_once(']').or_else(|| l.split_once(')')) else {
            continue;
        };
        let count: u64 = rest
            .trim_start_matches(')')
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let range = range.trim_start_matches('[');
        let (lo, hi) = match range.split_once(',') {
            Some((a, b)) => (num(a), num(b.trim_end_matches(')'))),
            None => {
                let v = num(range);
                (v, v + 1)
            }
        };
        out.insert((lo, hi), count);
    }
    out
}

#[test]
fn same_numbers_as_bpftrace() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let Ok(bt) = which("bpftrace") else {
        eprintln!("SKIP same_numbers_as_bpftrace: bpftrace is not installed");
        return;
    };
    let w = Workload::build("bpf");
    let n = "5000";
    let script = format!(
        "uprobe:{bin}:work {{ @c = count(); @h = hist(arg0); @l = lhist(arg0, 0, 5000, 500); }}",
        bin = w.bin.display()
    );
    let out = Command::new(&bt)
        .args(["-e", &script, "-c"])
        .arg(format!("{} work {n}", w.bin.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errs = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() || !text.contains("@c:") {
        eprintln!(
            "SKIP same_numbers_as_bpftrace: bpftrace cannot attach here (exit {:?}): {}",
            out.status.code(),
            errs.lines().take(3).collect::<Vec<_>>().join(" | ")
        );
        return;
    }
    eprintln!("bpftrace:\n{text}");
    let count: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("@c: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let sections: Vec<&str> = text.split("@h:").collect();
    let (h_text, l_text) = sections[1].split_once("@l:").unwrap();
    let bt_log2 = bpftrace_hist(h_text);
    let bt_lin = bpftrace_hist(l_text);
    // ktrace on the same workload
    let mut args = s(&["count", "--json", &w.at("work")]);
    args.extend(w.cmd(&["work", n]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    eprintln!("ktrace count: {out}");
    assert_eq!(json(out.lines().next().unwrap())["total"], count);
    let probe = format!("{} v=arg1:u64", w.at("work"));
    let mut args = s(&["hist", "--json", &probe, "v"]);
    args.extend(w.cmd(&["work", n]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    eprintln!("ktrace hist: {out}");
    assert_eq!(
        buckets(&json(out.lines().next().unwrap())["groups"][0]),
        bt_log2
    );
    let mut args = s(&["hist", "--json", "--linear", "500", &probe, "v"]);
    args.extend(w.cmd(&["work", n]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    eprintln!("ktrace hist --linear 500: {out}");
    assert_eq!(
        buckets(&json(out.lines().next().unwrap())["groups"][0]),
        bt_lin
    );
    assert_clean(&root, &w);
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.exists())
        })
        .ok_or(())
}

/// Regression (issue 23 row 13): strings of the traced program holding a
/// newline or an escape sequence were printed raw in ktrace's own tables:
/// a fake row, colours on the user's terminal. Each control character
/// (and the backslash) is now escaped; JSON keeps the exact strings.
#[test]
fn count_table_escapes_control_characters_of_traced_strings() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("ctl");
    let def = format!("{} s=+0(arg1):string", w.at("tag"));
    let mut args = s(&["count", "--by", "s"]);
    args.push(def.clone());
    args.extend(w.cmd(&["ctl"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    for bad in ['\u{1b}', '\u{9b}'] {
        assert!(!out.contains(bad), "{bad:?} reached the terminal:\n{out}");
    }
    // the header, four rows of one hit, the total: no fake row
    let lines: Vec<&str> = out.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(
        lines[1..5]
            .iter()
            .all(|l| l.trim_start().starts_with("1  ")),
        "{out}"
    );
    for want in [
        "a\\n    999  fake",
        "\\x1b[31mred\\x1b[0m",
        "back\\\\slash",
        "c1\\x9bx",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // JSON: the strings themselves
    let mut args = s(&["count", "--by", "s", "--json"]);
    args.push(def);
    args.extend(w.cmd(&["ctl"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let r = json(out.lines().next().unwrap());
    let mut got: Vec<String> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"]["s"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want = vec![
        "a\n    999  fake".to_string(),
        "\u{1b}[31mred\u{1b}[0m".to_string(),
        "back\\slash".to_string(),
        "c1\u{9b}x".to_string(),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_clean(&root, &w);
}

/// Runs ktrace under /usr/bin/time: (exit code, stdout, stderr, peak RSS
/// in KiB).
fn run_measured(args: &[String]) -> (i32, String, String, u64) {
    let dir = std::env::temp_dir().join(format!("ktrace_agg_rss_{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let rss = dir.join("rss");
    let child = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_ktrace"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    let out = child.wait_with_output().unwrap();
    let kb = fs::read_to_string(&rss)
        .unwrap_or_default()
        .trim()
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let _ = fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        kb,
    )
}

/// Regression (issue 23 row 8): `ktrace count … --by s` with a million
/// distinct strings grew to 834 MB (`--top 3` still 544 MB at 600,000
/// keys). The first `--max-keys` keys (8192 by default) keep a row; the
/// hits of the others are counted together as other, exactly, with a
/// warning; memory stays a few MB whatever the number of keys, `--top`
/// included.
#[test]
fn distinct_string_keys_stay_within_max_keys() {
    let Some(root) = tracefs() else { return };
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("SKIP distinct_string_keys_stay_within_max_keys: no /usr/bin/time");
        return;
    }
    let _g = serial();
    let w = Workload::build("keys");
    const N: u64 = 200_000;
    let def = format!("{} s=+0(arg1):string", w.at("tag"));
    for top in [None, Some("3")] {
        let mut args = s(&["count", "--by", "s", "--json", "--buffer-size", "16384"]);
        if let Some(t) = top {
            args.extend(s(&["--top", t]));
        }
        args.push(def.clone());
        args.extend(w.cmd(&["strs", &N.to_string()]));
        let (code, out, err, kb) = run_measured(&args);
        assert_eq!(code, 0, "{err}");
        eprintln!("--top {top:?}: peak RSS {kb} KiB for {N} distinct keys");
        let r = json(out.lines().next().unwrap());
        let rows = r["rows"].as_array().unwrap().len() as u64;
        let kept = r["distinct"].as_u64().unwrap();
        let other = r["other"].as_u64().unwrap();
        let lost = r["lost"].as_u64().unwrap();
        assert_eq!(r["max_keys"], 8192);
        assert_eq!(kept, 8192, "{err}");
        assert_eq!(rows, if top.is_some() { 3 } else { 8192 });
        assert_eq!(r["total"].as_u64().unwrap(), N - lost, "{err}");
        assert_eq!(kept + other, N - lost, "every hit once: a row or other");
        assert!(
            err.contains("warning: more than 8192 distinct keys"),
            "{err}"
        );
        // (measured before the cap: 38 MB for 100,000 keys, growing with
        // each key; with it 14 MB, the reader's buffers and tables)
        assert!(kb > 0 && kb < 30_000, "peak RSS {kb} KiB");
    }
    // the terminal table says it too
    let mut args = s(&["count", "--by", "s", "--max-keys", "10", "--top", "2"]);
    args.push(def);
    args.extend(w.cmd(&["strs", "25"]));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("total 25 hits, 10 keys (top 2 shown)"),
        "{out}"
    );
    assert!(
        out.contains("other 15 hits: keys beyond the first 10 seen (--max-keys)"),
        "{out}"
    );
    assert_clean(&root, &w);
}

/// A free port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Regression (issue 23 row 6): with `--prometheus`, each client that
/// connected and sent nothing delayed every scrape ~5 s and the exit
/// waited for them too. Through the command: 30 idle clients, scrapes
/// still answered at once, and `-d 2` still ends the run on time.
#[test]
fn prometheus_scrapes_and_exit_are_not_delayed_by_idle_clients() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("idle");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = s(&["count", "--prometheus", &addr, "-d", "4"]);
    args.push(w.at("work"));
    let started = Instant::now();
    let (mut child, early) = start(&args);
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    assert!(early.contains("Ctrl-C to stop"), "{early}");
    let idle: Vec<std::net::TcpStream> = (0..30)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    // the first publication (every 0.5 s) may not have happened yet: an
    // empty page until then, seen 1 in 4 on a loaded machine; wait for it
    // (bounded), then time three scrapes
    let first = Instant::now();
    while !scrape(&addr).contains("# TYPE ktrace_hits_total counter")
        && first.elapsed() < Duration::from_secs(3)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    for _ in 0..3 {
        let text = scrape(&addr);
        assert!(text.contains("# TYPE ktrace_hits_total counter"), "{text}");
    }
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "3 scrapes beside 30 idle clients took {:?}",
        t.elapsed()
    );
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "-d 4 with idle clients took {:?}",
        started.elapsed()
    );
    drop(idle);
    assert_clean(&root, &w);
}

/// Regression (issue 23 row 6b): in a network namespace whose loopback is
/// down (a fresh `unshare -n`, a busybox guest), `--prometheus
/// 127.0.0.1:P` binds, then at the end the server waited for a connection
/// that could never come: the run printed, cleaned up and never exited,
/// ignoring SIGTERM. It now ends at `-d`, and on SIGTERM (143).
#[test]
fn prometheus_without_loopback_exits_on_time_and_on_sigterm() {
    let Some(root) = tracefs() else { return };
    if Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!("SKIP prometheus_without_loopback_exits_on_time_and_on_sigterm: no unshare -n");
        return;
    }
    let _g = serial();
    let w = Workload::build("netns");
    let ktrace_bin = env!("CARGO_BIN_EXE_ktrace");
    // -d 2: the exit comes on time
    let t = Instant::now();
    let mut child = Command::new("unshare")
        .arg("-n")
        .arg(ktrace_bin)
        .args(["count", "-d", "2", "--prometheus", "127.0.0.1:9100"])
        .arg(w.at("work"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("-d 2 in a namespace without loopback: still running after 20 s");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("-d 2 without loopback: exited after {:?}", t.elapsed());
    // SIGTERM: exit 143 within seconds
    let mut child = Command::new("unshare")
        .arg("-n")
        .arg(ktrace_bin)
        .args(["count", "--prometheus", "127.0.0.1:9100"])
        .arg(w.at("work"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("Ctrl-C to stop") {}
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
    });
    // the pid of ktrace itself: unshare execs it
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("SIGTERM in a namespace without loopback: still running after 10 s");
    }
    assert_eq!(status.unwrap().code(), Some(143));
    assert_clean(&root, &w);
}

/// Regression (issue 23 row 7): `--prometheus 0.0.0.0:P` (or `[::]:P`)
/// was accepted silently although it serves what the probes saw (traced
/// strings included) to every network. It works, and says so.
#[test]
fn prometheus_on_a_wildcard_address_warns() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("wild");
    for any in ["0.0.0.0:0", "[::]:0"] {
        if std::net::TcpListener::bind(any).is_err() {
            eprintln!("SKIP part: cannot bind {any} here");
            continue;
        }
        let mut args = s(&["count", "--prometheus", any, "-d", "1"]);
        args.push(w.at("work"));
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains("serves the metrics to every network this machine is on"),
            "{any}: {err}"
        );
        assert!(err.contains("traced strings"), "{err}");
    }
    // a loopback address: no warning
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = s(&["count", "--prometheus", &addr, "-d", "1"]);
    args.push(w.at("work"));
    let (code, _, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("every network"), "{err}");
    assert_clean(&root, &w);
}

/// Issue 21 item 8, through the command: Prometheus' latency is measured
/// in nanoseconds (bounds below 16 us are not whole microseconds apart:
/// 1023 ns, 2047 ns ...), on the whole fixed ladder in every scrape, and
/// every series names its function although `--by func` was not given.
#[test]
fn prometheus_latency_in_nanoseconds_with_func_and_full_ladder() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("promlat");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = s(&["latency", "--prometheus", &addr]);
    args.push(w.at("nap"));
    let (mut child, early) = start(&args);
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    assert!(early.contains("Ctrl-C to stop"), "{early}");
    Command::new(&w.bin)
        .args(["nap", "5", "50"])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let t = scrape(&addr);
        if t.contains("ktrace_latency_seconds_count{probe=\"p_nap\",func=\"nap\"} 5")
            || Instant::now() > deadline
        {
            break t;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    child.wait().unwrap();
    assert!(
        text.contains("# HELP ktrace_latency_seconds function latency in seconds (measured in ns)"),
        "{text}"
    );
    let les: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ktrace_latency_seconds_bucket{probe=\"p_nap\",func=\"nap\""))
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(les.len(), 65 + 1, "{text}");
    for le in [
        "0.000000001",
        "0.000001023",
        "0.000002047",
        "0.000008191",
        "0.000016383",
    ] {
        assert!(les.contains(&le), "{le} not a bound: {les:?}");
    }
    if Path::new("/usr/bin/promtool").exists() {
        let (ok, said) = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .output_with(&text);
        assert!(ok, "promtool check metrics: {said}\n{text}");
    }
    assert_clean(&root, &w);
}

/// The `le` bounds of the series of `metric` whose labels start with
/// `labels`, in order.
fn les_of<'a>(text: &'a str, metric: &str, labels: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}_bucket{{{labels}")))
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect()
}

/// Scrapes until `want` is in the text (at most 10 s).
fn scrape_until(addr: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = scrape(addr);
        if t.contains(want) || Instant::now() > deadline {
            return t;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn interrupt(child: &mut std::process::Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    child.wait().unwrap();
}

/// Regression (issue 21 item 8): with `--linear` Prometheus got the linear
/// buckets seen so far (the set of bounds grew during the run), the first
/// scrapes had no series at all, and the series had no probe label.
/// Now the first scrape already lists the probe's series (labelled with
/// its probe and function) on the whole power-of-two ladder with zero
/// counts, and a later scrape has exactly the same bounds.
#[test]
fn prometheus_ladder_is_fixed_from_the_first_scrape() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let w = Workload::build("promfixed");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = s(&["hist", "--linear", "10", "--prometheus", &addr]);
    args.extend([format!("{} v=arg1:s64", w.at("work")), "v".into()]);
    let (mut child, _) = start(&args);
    PIDS.with(|p| p.borrow_mut().push(child.id()));
    let series = "probe=\"p_work\",func=\"work\"";
    let first = scrape_until(&addr, &format!("ktrace_v_count{{{series}}} 0"));
    Command::new(&w.bin).args(["work", "300"]).status().unwrap();
    let later = scrape_until(&addr, &format!("ktrace_v_count{{{series}}} 300"));
    interrupt(&mut child);
    let (l0, l1) = (
        les_of(&first, "ktrace_v", series),
        les_of(&later, "ktrace_v", series),
    );
    // -1, 0, [2^k, 2^(k+1)) for k = 0..63, +Inf
    assert_eq!(l0.len(), 66 + 1, "{first}");
    assert_eq!(l0, l1, "{later}");
    assert!(
        first.contains(&format!("ktrace_v_bucket{{{series},le=\"+Inf\"}} 0\n")),
        "{first}"
    );
    // 0..299: 256 values below 256, all 300 below 512
    assert!(
        later.contains(&format!("ktrace_v_bucket{{{series},le=\"255\"}} 256\n")),
        "{later}"
    );
    assert!(
        later.contains(&format!("ktrace_v_bucket{{{series},le=\"511\"}} 300\n")),
        "{later}"
    );
    assert!(
        later.contains(&format!("ktrace_v_sum{{{series}}} 44850\n")),
        "{later}"
    );
    assert_clean(&root, &w);
}

/// The real Prometheus server scrapes `ktrace latency --prometheus` (issue
/// 21 item 8): the series is there, at zero, before any call; after 20
/// calls of nap(3000 us) `histogram_quantile(0.5, ...)` answers within
/// the power-of-two bucket of nanoseconds that holds 3 ms to 4.19 ms
/// (`rate()` over the run as well), and the number of bucket series
/// never changed. Skipped when /usr/bin/prometheus is not installed.
#[test]
fn prometheus_server_answers_histogram_quantile() {
    let Some(root) = tracefs() else { return };
    if !Path::new("/usr/bin/prometheus").exists() {
        eprintln!("SKIP prometheus_server_answers_histogram_quantile: prometheus not installed");
        return;
    }
    let _g = serial();
    let w = Workload::build("promserver");
    let addr = format!("127.0.0.1:{}", free_port());
    let (mut child, _) = start(&s(&["latency", "--prometheus", &addr, &w.at("nap")]));
    PIDS.with(|p| p.borrow_mut().push(child.id()));

    let dir = w.dir.join("prom");
    fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\n\
             scrape_configs:\n  - job_name: ktrace\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let mut server = Command::new("/usr/bin/prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let query = |q: &str| -> serde_json::Value {
        let enc: String = q
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let Ok(mut c) = std::net::TcpStream::connect(&web) else {
            return serde_json::Value::Null;
        };
        c.write_all(
            format!("GET /api/v1/query?query={enc} HTTP/1.0\r\nHost: {web}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut resp = String::new();
        let _ = c.read_to_string(&mut resp);
        resp.split_once("\r\n\r\n")
            .and_then(|(_, body)| serde_json::from_str(body).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    // the single value of an instant query's first series
    let value = |q: &str| -> Option<f64> {
        let v = query(q);
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let wait_for = |q: &str, ok: &dyn Fn(f64) -> bool| -> Option<f64> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = value(q);
            if got.is_some_and(ok) || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let sel = "{job=\"ktrace\",probe=\"p_nap\",func=\"nap\"}";
    let count = format!("ktrace_latency_seconds_count{sel}");
    let buckets = format!("count(ktrace_latency_seconds_bucket{sel})");
    // before any call: the series, zero, on its whole ladder
    let zero = wait_for(&count, &|v| v == 0.0);
    let series_before = value(&buckets);
    Command::new(&w.bin)
        .args(["nap", "20", "3000"])
        .status()
        .unwrap();
    let twenty = wait_for(&count, &|v| v == 20.0);
    let series_after = value(&buckets);
    let q = value(&format!(
        "histogram_quantile(0.5, ktrace_latency_seconds_bucket{sel})"
    ));
    let q_rate = value(&format!(
        "histogram_quantile(0.5, rate(ktrace_latency_seconds_bucket{sel}[1m]))"
    ));
    let _ = server.kill();
    let _ = server.wait();
    interrupt(&mut child);
    assert_eq!(zero, Some(0.0), "the series before any call");
    assert_eq!(
        series_before,
        Some(66.0),
        "65 bounds and +Inf before any call"
    );
    assert_eq!(twenty, Some(20.0));
    assert_eq!(series_after, Some(66.0), "the same series after the calls");
    // 3 ms <= each latency: bucket [2^21, 2^22) ns is 2.097152 ms to
    // 4.194303 ms; histogram_quantile interpolates inside it
    for (what, got) in [("quantile", q), ("quantile of rate", q_rate)] {
        let got = got.unwrap_or(f64::NAN);
        eprintln!("{what}: {got}");
        assert!(
            (0.002097152..=0.004194303).contains(&got),
            "{what}: {got} s"
        );
    }
    assert_clean(&root, &w);
}
