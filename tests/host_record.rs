//! `ktrace record` and `ktrace report` on the host kernel (uprobes on the
//! fixture program), checked against trace-cmd 3.x, the reference reader
//! and writer of trace.dat: trace-cmd reads ktrace's recordings with the
//! same event lines, ktrace reads trace-cmd's (version 7, compressed) with
//! the same lines, a report equals the live `ktrace trace` of the same
//! workload, a recorder killed with SIGKILL leaves `FILE.partial` that
//! `ktrace report` reads (and the target untouched), and bad files are
//! refused without a panic.
//!
//! trace-cmd's `report` prints `comm-pid [cpu] ts: event: (addr) args`
//! without the flags column and with the address in plain hex, the kernel's
//! text (ktrace's) `comm-pid [cpu] flags ts: event: (0xaddr) args`: lines
//! are compared after [`norm`] takes both apart into the same fields.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Prog, ktrace, tracefs};

/// (task, cpu, ts, event, probe address, arguments) of a report line of
/// either tool; `None` for lines that are not events (`cpus=2`).
fn norm(line: &str) -> Option<String> {
    // trace-cmd prefixes lines of an instance buffer with "NAME: "
    let (task, rest) = line.split_once(" [")?;
    let task = task.trim();
    let task = task.rsplit_once(": ").map_or(task, |(_, t)| t).trim();
    let (cpu, rest) = rest.split_once(']')?;
    let mut words = rest.split_whitespace();
    // skip the flags column when there is one: the time stamp ends with ':'
    let ts = loop {
        let w = words.next()?;
        if let Some(t) = w.strip_suffix(':')
            && t.contains('.')
            && t.parse::<f64>().is_ok()
        {
            break t;
        }
    };
    let rest = rest.split_once(&format!("{ts}:"))?.1.trim();
    let (event, rest) = rest.split_once(':')?;
    let rest = rest.trim();
    let (addr, args) = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
        Some((a, args)) => (
            u64::from_str_radix(a.trim_start_matches("0x"), 16)
                .map_or(a.to_string(), |v| format!("{v:#x}")),
            args.trim(),
        ),
        None => (String::new(), rest),
    };
    Some(format!("{task} [{cpu}] {ts} {event} ({addr}) {args}"))
}

fn norm_all(text: &str) -> Vec<String> {
    text.lines().filter_map(norm).collect()
}

fn trace_cmd_report(file: &Path) -> String {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "trace-cmd report: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn report(file: &Path, json: bool) -> (String, String) {
    let mut c = ktrace();
    c.arg("report").arg(file);
    if json {
        c.arg("--json");
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "ktrace report {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const ARGS: &str = "a=%di s=+0(%si):string";

fn record(p: &Prog, file: &Path, hits: u64) -> String {
    record_with(p, file, hits, &[])
}

fn record_with(p: &Prog, file: &Path, hits: u64, flags: &[&str]) -> String {
    let out = ktrace()
        .arg("record")
        .args(flags)
        .arg(format!("p:hit {} {ARGS}", p.place()))
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(&p.bin)
        .arg(hits.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ktrace record: {err}");
    err
}

/// trace-cmd reads an `--uncompressed` ktrace recording (trace.dat version
/// 6) with the same event lines (time stamps, tasks, CPUs, arguments) as
/// `ktrace report`, every event there.
#[test]
fn tracecmd_reads_ktrace_recording_alike() {
    if tracefs().is_none() || !common::have_trace_cmd() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_tc");
    let file = p.dir.join("k.dat");
    let err = record_with(&p, &file, 5000, &["--uncompressed"]);
    assert!(
        err.contains("wrote 5000 event(s)") && err.contains("(trace.dat version 6, uncompressed)"),
        "record summary: {err}"
    );
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.starts_with(b"\x17\x08Dtracing6\0"), "not version 6");
    assert!(!p.dir.join("k.dat.partial.v7").exists());
    let (ours, summary) = report(&file, false);
    assert!(summary.contains("5000 event(s), 0 lost"), "{summary}");
    let ours = norm_all(&ours);
    let theirs = norm_all(&trace_cmd_report(&file));
    assert_eq!(ours.len(), 5000);
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
    assert!(ours[0].contains(" hit (0x") && ours[0].contains("s=\"hello, ring0\""));
    // JSON: one object per event
    let (json, _) = report(&file, true);
    assert_eq!(json.lines().filter(|l| l.starts_with('{')).count(), 5000);
}

/// `ktrace record` writes trace.dat version 7 with zstd sections and CPU
/// chunks by default (issue 24; 20,000 events: hundreds of compressed
/// chunks), which trace-cmd reads with the same event lines as `ktrace
/// report`, every event there; no temporary file is left.
#[test]
fn tracecmd_reads_compressed_ktrace_recording_alike() {
    if tracefs().is_none() || !common::have_trace_cmd() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_zstd");
    let file = p.dir.join("k.dat");
    let err = record(&p, &file, 20000);
    assert!(
        err.contains("wrote 20000 event(s)") && err.contains("version 7, zstd"),
        "record summary: {err}"
    );
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.starts_with(b"\x17\x08Dtracing7\0"), "not version 7");
    assert_eq!(&bytes[18..23], b"zstd\0");
    for leftover in ["k.dat.partial", "k.dat.partial.v7"] {
        assert!(!p.dir.join(leftover).exists(), "{leftover} left behind");
    }
    let (ours, summary) = report(&file, false);
    assert!(summary.contains("20000 event(s), 0 lost"), "{summary}");
    let ours = norm_all(&ours);
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "trace-cmd report: {out:?}");
    assert!(
        out.stderr.is_empty(),
        "trace-cmd report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = norm_all(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(ours.len(), 20000);
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
    assert!(ours[0].contains(" hit (0x") && ours[0].contains("s=\"hello, ring0\""));
    // the pages compressed (the file itself is mostly kallsyms here): the
    // CPU data takes a fraction of the pages' bytes
    let mut dat = ktrace_tracedat::TraceDat::open(std::io::Cursor::new(bytes)).unwrap();
    let (mut stored, mut pages) = (0u64, 0u64);
    for i in 0..dat.meta.buffers[0].cpus.len() {
        stored += dat.meta.buffers[0].cpus[i].size;
        pages += dat
            .pages(0, i)
            .unwrap()
            .map(|p| p.unwrap().len() as u64)
            .sum::<u64>();
    }
    assert!(
        pages > 0 && stored * 4 < pages,
        "{stored} bytes of CPU data in the file for {pages} bytes of pages"
    );
    // issue 24: no bigger than libzstd makes the same recording, through
    // trace-cmd's own `convert --compression zstd` (the same header,
    // kallsyms and pages, compressed by trace-cmd)
    let theirs = p.dir.join("tc-zstd.dat");
    let out = Command::new("trace-cmd")
        .args([
            "convert",
            "--file-version",
            "7",
            "--compression",
            "zstd",
            "-i",
        ])
        .arg(&file)
        .arg("-o")
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(out.status.success(), "trace-cmd convert: {out:?}");
    let (ours_len, theirs_len) = (
        std::fs::metadata(&file).unwrap().len(),
        std::fs::metadata(&theirs).unwrap().len(),
    );
    eprintln!("zstd v7 of 20000 events: ktrace {ours_len} bytes, trace-cmd convert {theirs_len}");
    assert!(
        ours_len <= theirs_len,
        "ktrace's zstd v7 is {ours_len} bytes, trace-cmd's libzstd makes {theirs_len}"
    );
}

/// `--compress` (the flag that asked for version 7 before it was the
/// default) still writes it; `--compress --uncompressed` is a usage error
/// before anything starts (exit 2, no file, no probe).
#[test]
fn compress_is_the_default_and_uncompressed_excludes_it() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_flags");
    let file = p.dir.join("k.dat");
    let err = record_with(&p, &file, 30, &["--compress"]);
    assert!(err.contains("(trace.dat version 7, zstd"), "{err}");
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.starts_with(b"\x17\x08Dtracing7\0"), "not version 7");
    let (ours, _) = report(&file, false);
    assert_eq!(norm_all(&ours).len(), 30);
    let both = p.dir.join("both.dat");
    let out = ktrace()
        .args(["record", "--compress", "--uncompressed"])
        .arg(format!("p:hit {} {ARGS}", p.place()))
        .arg("-o")
        .arg(&both)
        .arg("--")
        .arg(&p.bin)
        .arg("3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--uncompressed") && err.contains("--compress"),
        "{err}"
    );
    assert!(!both.exists() && !p.dir.join("both.dat.partial").exists());
    // the help names --uncompressed, not the alias
    let help = ktrace().args(["record", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--uncompressed"), "{help}");
    assert!(!help.contains("--compress "), "{help}");
}

/// KernelShark's own library (libkshark 2.x through libtracecmd, what the
/// GUI loads a file with; tests/fixtures/kshark_read.c) reads a recording
/// of either format (the default version 7, zstd, and `--uncompressed`
/// version 6): every event, the first one's task and fields as recorded.
/// Skipped, loudly, without libkshark.
#[test]
fn kernelshark_reads_compressed_recording() {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libkshark.so.2");
    if tracefs().is_none() {
        return;
    }
    if !lib.exists() {
        eprintln!(
            "\n!!!!!! SKIP: KernelShark's libkshark is not installed (apt-get install kernelshark) !!!!!!\n"
        );
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_ks");
    let reader = p.dir.join("kshark_read");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kshark_read.c");
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&reader)
        .arg(&src)
        .arg(lib)
        .status()
        .unwrap();
    assert!(st.success(), "gcc {}", src.display());
    for (flags, magic) in [
        (&[][..], &b"\x17\x08Dtracing7\0"[..]),
        (&["--uncompressed"][..], &b"\x17\x08Dtracing6\0"[..]),
    ] {
        let file = p.dir.join("k.dat");
        record_with(&p, &file, 3000, flags);
        assert!(
            std::fs::read(&file).unwrap().starts_with(magic),
            "{flags:?}"
        );
        let out = Command::new(&reader).arg(&file).arg("1").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flags:?}: {out:?}");
        assert!(text.starts_with("entries 3000\n"), "{flags:?}: {text}");
        let first = text.lines().nth(1).unwrap_or("");
        assert!(
            first.starts_with("target ")
                && first.contains("/hit ")
                && first.ends_with("s=\"hello, ring0\""),
            "{flags:?}: {first}"
        );
    }
}

/// `ktrace report` of a recording prints what live `ktrace trace` prints
/// for the same workload (per line, apart from pid, time stamp and the
/// stack address `a=`, which differ between two runs).
#[test]
fn report_equals_live_trace() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_live");
    let file = p.dir.join("k.dat");
    record(&p, &file, 300);
    let (rep, _) = report(&file, false);
    let out = ktrace()
        .arg("trace")
        .arg(format!("p:hit {} {ARGS}", p.place()))
        .arg("--")
        .arg(&p.bin)
        .arg("300")
        .output()
        .unwrap();
    assert!(out.status.success());
    let live = String::from_utf8_lossy(&out.stdout).into_owned();
    let mask = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| {
                let mut w: Vec<&str> = l.split_whitespace().collect();
                // task-pid, [cpu], flags, ts:, event:, (addr), a=..., s=...
                // The pid, CPU, timestamp and address differ between the
                // two runs, and so do the flags: irqs-off, need-resched and
                // the softirq/hardirq bits are whatever the CPU was doing
                // when the uprobe hit (a fresh 6.18 host once gave one event
                // `dL.ff` where the others had `DBZff`). Each run's flags
                // column is still required to be one, in the kernel's shape.
                assert!(
                    w.len() > 4 && (4..=5).contains(&w[2].len()),
                    "no flags column in {l:?}"
                );
                w[0] = w[0].rsplit_once('-').map_or(w[0], |x| x.0);
                w[1] = "[*]";
                w[2] = "FLAGS";
                w[3] = "TS:";
                for x in w.iter_mut() {
                    if x.starts_with("a=") {
                        *x = "a=*";
                    }
                }
                w.join(" ")
            })
            .collect()
    };
    let (r, l) = (mask(&rep), mask(&live));
    assert_eq!(r.len(), 300, "report:\n{rep}");
    if r != l {
        // the first difference first: a CI log keeps only the start
        let i = r.iter().zip(&l).take_while(|(a, b)| a == b).count();
        panic!(
            "report and live trace differ at line {i} ({} and {} lines): {:?} / {:?}\nreport:\n{rep}\nlive:\n{live}",
            r.len(),
            l.len(),
            r.get(i),
            l.get(i)
        );
    }
}

/// A file from `trace-cmd record` (version 7, zstd sections, the events in
/// an instance buffer) prints as trace-cmd prints it.
#[test]
fn ktrace_reads_tracecmd_recording_alike() {
    let Some(root) = tracefs() else { return };
    if !common::have_trace_cmd() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_tcrec");
    let file = p.dir.join("tc.dat");
    let group = "uprobes";
    let event = format!("ktrec_{}", std::process::id());
    let inst = format!("ktrec_{}_tc", std::process::id());
    // appending (O_APPEND) keeps others' probes: a plain write would
    // truncate uprobe_events and delete every probe of everyone else
    {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("uprobe_events"))
            .unwrap()
            .write_all(format!("p:{group}/{event} {} {ARGS}\n", p.place()).as_bytes())
            .unwrap();
    }
    // trace-cmd writes ftrace_enabled and the set_ftrace_* files, which
    // are EPERM in this sandbox: plain files over them in a private mount
    // namespace (see DESIGN.md), the instance's too (made first for that;
    // this test skipped until the trace-cmd check was mended, and failed
    // on the instance's set_ftrace_filter)
    let script = format!(
        "set -e
        T={root}
        I=$T/instances/{inst}
        mkdir -p $I
        for f in /proc/sys/kernel/ftrace_enabled $T/set_ftrace_filter $T/set_ftrace_notrace \
                 $T/set_ftrace_pid $T/set_ftrace_notrace_pid $T/set_graph_function $T/set_graph_notrace \
                 $I/set_ftrace_filter $I/set_ftrace_notrace $I/set_ftrace_pid $I/set_ftrace_notrace_pid; do
            [ -e $f ] || continue
            b={dir}/$(echo $f | tr / _)
            cp $f $b 2>/dev/null || : > $b
            mount --bind $b $f
        done
        trace-cmd record -q -B {inst} -e {group}:{event} -o {file} -- {bin} 3000 > {dir}/tc.log 2>&1",
        root = root.display(),
        dir = p.dir.display(),
        file = file.display(),
        bin = p.bin.display(),
    );
    let st = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .status()
        .unwrap();
    let _ = std::fs::remove_dir(root.join("instances").join(&inst));
    {
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("uprobe_events"))
            .and_then(|mut f| f.write_all(format!("-:{group}/{event}\n").as_bytes()));
    }
    assert!(
        st.success(),
        "trace-cmd record: {}",
        std::fs::read_to_string(p.dir.join("tc.log")).unwrap_or_default()
    );
    let head = std::fs::read(&file).unwrap();
    assert_eq!(&head[..10], b"\x17\x08Dtracing");
    let (ours, _) = report(&file, false);
    let ours = norm_all(&ours);
    let theirs = norm_all(&trace_cmd_report(&file));
    assert_eq!(ours.len(), 3000, "{:?}", ours.first());
    assert_eq!(ours, theirs);
}

/// A recorder killed with SIGKILL leaves `k.dat.partial`, which `ktrace
/// report` reads up to the last page written (trace-cmd refuses it rather
/// than misread it), no larger than about its data (regression: 1.1 TB of
/// apparent size, each CPU's region 1 TiB further into the file), and
/// `k.dat` as it was; the next ktrace run reaps the session. With
/// `--uncompressed` (version 6 at the end).
#[test]
fn sigkill_leaves_a_readable_recording() {
    sigkill_case(&["--uncompressed"]);
}

/// The same by default (version 7 at the end): the recording is the same
/// uncompressed FILE.partial until the end, so a kill loses nothing more.
#[test]
fn sigkill_leaves_a_readable_recording_compressed() {
    sigkill_case(&[]);
}

fn sigkill_case(flags: &[&str]) {
    let Some(_root) = tracefs() else { return };
    let _g = common::serial();
    let p = Prog::build(if flags.is_empty() {
        "rec_killz"
    } else {
        "rec_kill"
    });
    let file = p.dir.join("k.dat");
    let partial = p.dir.join("k.dat.partial");
    std::fs::write(&file, "an earlier file").unwrap();
    // 20,000 hits 200 us apart: about 4 s of events
    let mut child = ktrace()
        .arg("record")
        .args(flags)
        .arg(format!("p:hit {} {ARGS}", p.place()))
        .arg("-o")
        .arg(&file)
        .arg("--")
        .arg(&p.bin)
        .arg("20000")
        .arg("200")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait until pages landed in the partial file, then kill
    let start = Instant::now();
    let grown = || {
        let out = ktrace().arg("report").arg(&partial).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count() > 100
    };
    while !grown() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no pages written"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let _ = child.wait();
    assert_eq!(std::fs::read(&file).unwrap(), b"an earlier file");
    let (ours, err) = report(&partial, false);
    assert!(err.contains("unfinished recording"), "{err}");
    let ours = norm_all(&ours);
    assert!(
        ours.len() > 100 && ours.len() < 20000,
        "{} lines",
        ours.len()
    );
    // the events are the program's first ones, in order, none missing
    for (i, l) in ours.iter().enumerate() {
        let want = if i % 5 == 4 {
            "s=\"\"".to_string()
        } else {
            format!("s=\"hello, ring{}\"", i % 10)
        };
        assert!(l.ends_with(&want), "line {i}: {l}");
    }
    // no giant sparse file: each CPU's last chunk holds at most 4 MiB
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let len = std::fs::metadata(&partial).unwrap().len();
    assert!(
        len < (ours.len() as u64) * 1024 + (cpus + 2) * (4 << 20) + (8 << 20),
        "{len} bytes apparent for {} events",
        ours.len()
    );
    if common::have_trace_cmd() {
        let out = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(&partial)
            .output()
            .unwrap();
        assert!(!out.status.success(), "trace-cmd read an unfinished file");
    }
    // the traced program was left running by the kill; end it, and let
    // the next run reap the session
    let _ = Command::new("pkill")
        .arg("-KILL")
        .arg("-xf")
        .arg(format!("{} 20000 200", p.bin.display()))
        .status();
    let clean = ktrace().arg("clean").output().unwrap();
    assert!(clean.status.success(), "{clean:?}");
    // recording again to the same name replaces the leftover, then the file
    let err = record_with(&p, &file, 50, flags);
    assert!(
        err.contains("replacing") && err.contains("k.dat.partial"),
        "{err}"
    );
    assert!(!partial.exists());
    assert!(!p.dir.join("k.dat.partial.v7").exists());
    let (again, _) = report(&file, false);
    assert_eq!(norm_all(&again).len(), 50);
}

/// Truncated, corrupted and foreign files: exit 1 with a message naming
/// the file, never a panic (exit 101).
#[test]
fn bad_files_are_refused_clearly() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_bad");
    // both formats: the default version 7 (zstd) and --uncompressed (6)
    for flags in [&[][..], &["--uncompressed"][..]] {
        let good = p.dir.join("k.dat");
        record_with(&p, &good, 50, flags);
        let bytes = std::fs::read(&good).unwrap();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("foreign", b"#!/bin/sh\necho not a trace\n".repeat(100)),
            ("magic only", bytes[..10].to_vec()),
            ("cut in the header", bytes[..200].to_vec()),
            ("bad version", {
                let mut b = bytes.clone();
                b[10] = b'9';
                b
            }),
            ("flipped bytes", {
                let mut b = bytes.clone();
                for i in (12..b.len().min(4000)).step_by(7) {
                    b[i] ^= 0x5a;
                }
                b
            }),
        ];
        for (what, data) in cases {
            let f = p.dir.join("bad.dat");
            std::fs::write(&f, &data).unwrap();
            let out = ktrace().arg("report").arg(&f).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{flags:?} {what}: {err}");
            assert!(!err.contains("panicked"), "{flags:?} {what}: {err}");
            assert!(
                err.contains("bad.dat") || err.contains("trace.dat"),
                "{flags:?} {what}: {err}"
            );
        }
        // cut inside the pages: the whole pages before the cut print, then a
        // warning; not an error
        let cut = p.dir.join("cut.dat");
        std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
        let out = ktrace().arg("report").arg(&cut).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "{err}"
        );
    }
}

/// `ktrace export --perfetto` of a recording of an entry and a return
/// uprobe on the same function in two processes: decoded by `protoc
/// --decode` against crates/perfetto/tests/perfetto.proto (Perfetto's
/// documented field numbers), one track per thread with its name, every
/// entry/return pair a balanced slice named by the entry event, every
/// field an annotation.
#[test]
fn export_perfetto_threads_slices_fields() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_pf");
    let file = p.dir.join("k.dat");
    let bin = p.bin.display().to_string();
    let out = ktrace()
        .arg("record")
        .arg(format!("p:ent {} {ARGS}", p.place()))
        .arg(format!("r:ret {} rv=$retval:s64", p.place()))
        .arg("-o")
        .arg(&file)
        .args(["--", "sh", "-c", &format!("{bin} 20; {bin} 20")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let pf = p.dir.join("k.pftrace");
    let out = ktrace()
        .arg("export")
        .arg(&file)
        .arg("--perfetto")
        .arg("-o")
        .arg(&pf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("exported 80 event(s)"), "{err}");
    let report = ktrace().arg("report").arg(&file).output().unwrap();
    assert!(report.status.success(), "{report:?}");
    let names = report_names(&String::from_utf8_lossy(&report.stdout));
    check_perfetto(&pf, &p.place(), Some(&names));
}

/// The name `ktrace report` gives each pid (its TASK-PID column).
fn report_names(report: &str) -> std::collections::BTreeMap<u64, String> {
    report
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.rsplit_once('-'))
        .filter_map(|(name, pid)| Some((pid.parse().ok()?, name.to_string())))
        .collect()
}

/// The thread tracks of an expanded Perfetto trace: tid and name.
fn thread_names(text: &str) -> std::collections::BTreeMap<u64, String> {
    let mut out = std::collections::BTreeMap::new();
    let (mut inside, mut tid) = (false, None);
    for l in text.lines().map(str::trim) {
        if l == "thread {" {
            (inside, tid) = (true, None);
        } else if inside && let Some(t) = l.strip_prefix("tid: ") {
            tid = t.parse::<u64>().ok();
        } else if inside && let Some(n) = l.strip_prefix("thread_name: ") {
            if let Some(t) = tid {
                out.insert(t, n.trim_matches('"').to_string());
            }
        } else if l == "}" {
            inside = false;
        }
    }
    out
}

/// Regression (issue 24 item 4): the export of a two-field uprobe
/// (`a=%di`, a stack address, 7 bytes as a varint, and `s`, one of ten
/// strings) cost 45.6 B per event, the string written whole every time.
/// Now string values are interned: 35 B (13 of packet, 3 of time delta,
/// 12 for `a`, 7 for `s`), and 37.1 B since each event carries its
/// system as category (issue 21 item 2: an interned id, 2 bytes).
#[test]
fn export_perfetto_bytes_per_event() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_pfsize");
    let file = p.dir.join("k.dat");
    record(&p, &file, 5000);
    let pf = p.dir.join("k.pftrace");
    let out = ktrace()
        .arg("export")
        .arg(&file)
        .args(["--perfetto", "-o"])
        .arg(&pf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let size = std::fs::metadata(&pf).unwrap().len();
    let per_event = size as f64 / 5000.0;
    eprintln!("{size} bytes, {per_event:.1} B per event");
    assert!(per_event <= 38.0, "{per_event:.1} B per event");
    let Some(text) = decode_perfetto(&pf) else {
        return;
    };
    assert_eq!(text.matches("type: TYPE_INSTANT").count(), 5000);
    assert_eq!(text.matches("string_value: \"hello, ring3\"").count(), 500);
}

/// `ktrace trace --perfetto -o OUT` live: the same trace as the export.
#[test]
fn live_trace_perfetto() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_pflive");
    let pf = p.dir.join("live.pftrace");
    let bin = p.bin.display().to_string();
    let out = ktrace()
        .arg("trace")
        .arg(format!("p:ent {} {ARGS}", p.place()))
        .arg(format!("r:ret {} rv=$retval:s64", p.place()))
        .arg("--perfetto")
        .arg("-o")
        .arg(&pf)
        .args(["--", "sh", "-c", &format!("{bin} 20; {bin} 20")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    check_perfetto(&pf, &p.place(), None);
}

/// `protoc --decode` of the Perfetto trace `pf`, interning and time
/// stamps expanded (`None`, after a loud message, without protoc).
fn decode_perfetto(pf: &Path) -> Option<String> {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/perfetto/tests");
    let Ok(child) = Command::new("protoc")
        .arg(format!("-I{}", proto.display()))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(std::fs::File::open(pf).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("\n!!!!!! SKIP: protoc is not installed !!!!!!\n");
        return None;
    };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8(out.stdout).unwrap();
    Some(ktrace_perfetto::protoc_text::expand(&raw))
}

/// An entry probe with no return probe among the events: every hit an
/// instant named by the event (the README's promise), none a slice that
/// never ends.
#[test]
fn export_perfetto_entry_only_probes_are_instants() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_pfinst");
    let file = p.dir.join("k.dat");
    record(&p, &file, 20);
    let pf = p.dir.join("k.pftrace");
    let out = ktrace()
        .arg("export")
        .arg(&file)
        .args(["--perfetto", "-o"])
        .arg(&pf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let Some(text) = decode_perfetto(&pf) else {
        return;
    };
    assert_eq!(text.matches("type: TYPE_INSTANT").count(), 20, "{text}");
    assert_eq!(text.matches("type: TYPE_SLICE_BEGIN").count(), 0);
    assert_eq!(text.matches("type: TYPE_SLICE_END").count(), 0);
    assert_eq!(text.matches("name: \"hit\"").count(), 20);
    assert!(!text.contains(&format!("name: \"{}\"", p.place())));
}

/// Regression (issue 21 item 3): an event recorded with a user stack
/// (`--stack`) and a kernel stack (a `stacktrace` trigger) kept only the
/// first stack record that followed it, and a kernel stack began with the
/// probe machinery's frames (`__uprobe_trace_func, uprobe_dispatcher,
/// handler_chain, uprobe_notify_resume, irqentry_exit_to_user_mode,
/// asm_exc_int3` on this host). Now both are arguments (`stack`,
/// `user_stack`), the kernel one without the machinery: a uprobe's is all
/// machinery and is left out. The text output keeps every frame but with
/// `--hide-probe-frames`.
#[test]
fn live_trace_perfetto_stacks_whole_without_probe_machinery() {
    if tracefs().is_none() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_pfstack");
    let pf = p.dir.join("st.pftrace");
    let run = |how: &str| {
        let mut c = ktrace();
        c.arg("trace")
            .arg(format!("p:hit {} a=%di", p.place()))
            .args(["--stack", "--trigger", "stacktrace"]);
        match how {
            "perfetto" => {
                c.arg("--perfetto").arg("-o").arg(&pf);
            }
            "hide" => {
                c.arg("--hide-probe-frames");
            }
            _ => {}
        }
        let out = c.arg("--").arg(&p.bin).arg("10").output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = run("text");
    // the text output is unchanged: every frame, machinery included
    assert_eq!(text.matches(" => uprobe_dispatcher").count(), 10, "{text}");
    assert_eq!(text.matches("<user stack trace>").count(), 10, "{text}");
    // unless asked: then the kernel stacks are empty (all machinery)
    let text = run("hide");
    assert_eq!(text.matches("<stack trace>\n").count(), 10, "{text}");
    assert_eq!(text.matches("<user stack trace>").count(), 10, "{text}");
    for f in PROBE_FRAMES {
        assert!(!text.contains(f), "{f}: {text}");
    }
    run("perfetto");
    let Some(text) = decode_perfetto(&pf) else {
        return;
    };
    assert_eq!(text.matches("type: TYPE_INSTANT").count(), 10, "{text}");
    assert_eq!(text.matches("name: \"user_stack\"").count(), 10, "{text}");
    // user frames in hex (a=%di is an integer)
    assert_eq!(text.matches("string_value: \"0x").count(), 10, "{text}");
    for f in PROBE_FRAMES {
        assert!(!text.contains(f), "{f}: {text}");
    }
    assert_eq!(text.matches("name: \"stack\"").count(), 0, "{text}");
}

/// The probe machinery's frames of a uprobe's kernel stack on this host.
const PROBE_FRAMES: [&str; 6] = [
    "__uprobe_trace_func",
    "uprobe_dispatcher",
    "handler_chain",
    "uprobe_notify_resume",
    "irqentry_exit_to_user_mode",
    "asm_exc_int3",
];

/// Decodes `pf` with protoc against Perfetto's field numbers and checks
/// two thread tracks, named as `names_by_pid` says (else `target` or
/// `<...>`), 40 balanced slices named by the entry
/// event (`ent`, not the probed `place`: issue 24), every field of both
/// probes an annotation but the probe's own address, names interned, time
/// never going back.
fn check_perfetto(
    pf: &Path,
    place: &str,
    names_by_pid: Option<&std::collections::BTreeMap<u64, String>>,
) {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/perfetto/tests");
    let Ok(child) = Command::new("protoc")
        .arg(format!("-I{}", proto.display()))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(std::fs::File::open(pf).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("\n!!!!!! SKIP: protoc is not installed !!!!!!\n");
        return;
    };
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8(out.stdout).unwrap();
    assert!(
        !raw.lines()
            .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())),
        "unknown fields: {raw}"
    );
    // names are interned: written once, then referred to by number
    assert_eq!(raw.matches("name: \"a\"").count(), 1, "{raw}");
    let text = ktrace_perfetto::protoc_text::expand(&raw);
    assert_eq!(text.matches("thread {").count(), 2, "one track per process");
    // each thread named as the recording names its pid: `target`, or
    // `<...>` for a process that exited before the kernel saved its comm
    // (saved_cmdlines is written at a sched_switch after an event on the
    // same CPU; the first `target` here runs for microseconds)
    let names = thread_names(&text);
    assert_eq!(names.len(), 2, "{names:?}");
    match names_by_pid {
        Some(want) => assert_eq!(&names, want, "the threads' names, against the report"),
        None => assert!(
            names.values().all(|n| n == "target" || n == "<...>"),
            "{names:?}"
        ),
    }
    assert_eq!(text.matches("type: TYPE_SLICE_BEGIN").count(), 40);
    assert_eq!(text.matches("type: TYPE_SLICE_END").count(), 40);
    assert_eq!(text.matches("type: TYPE_INSTANT").count(), 0);
    for f in ["a", "s", "__probe_ret_ip", "rv"] {
        assert_eq!(text.matches(&format!("name: \"{f}\"")).count(), 40, "{f}");
    }
    // the probe's own address, the same on every hit, is left out
    for f in ["__probe_ip", "__probe_func"] {
        assert_eq!(text.matches(&format!("name: \"{f}\"")).count(), 0, "{f}");
    }
    assert!(text.contains("string_value: \"hello, ring0\""));
    // the slice is named by the entry's event name, not the probed place
    assert_eq!(text.matches("name: \"ent\"").count(), 40, "{text}");
    assert!(!text.contains(&format!("name: \"{place}\"")), "{text}");
    let mut depth = std::collections::HashMap::new();
    let (mut last_ts, mut kind) = (0u64, "");
    for l in text.lines().map(str::trim) {
        if let Some(t) = l.strip_prefix("timestamp: ") {
            let ts: u64 = t.parse().unwrap();
            assert!(ts >= last_ts, "time goes back at {ts}");
            last_ts = ts;
        }
        if let Some(t) = l.strip_prefix("type: ") {
            kind = t;
        }
        if let Some(u) = l.strip_prefix("track_uuid: ") {
            let d = depth.entry(u.to_string()).or_insert(0i32);
            *d += match kind {
                "TYPE_SLICE_BEGIN" => 1,
                "TYPE_SLICE_END" => -1,
                _ => 0,
            };
            assert!(*d >= 0, "track {u}: an end without a begin");
        }
    }
    assert_eq!(depth.len(), 2);
    assert!(depth.values().all(|&d| d == 0), "{depth:?}");
}

/// Regression: `ktrace record --trigger stacktrace` wrote the stack records
/// but not ftrace's `kernel_stack` format (only `--stack` added it), so
/// `ktrace report` dropped every stack and trace-cmd printed `[UNKNOWN
/// EVENT]` for each. Both now show one stack per hit.
#[test]
fn record_with_a_stacktrace_trigger_keeps_the_stacks() {
    if tracefs().is_none() || !common::have_trace_cmd() {
        return;
    }
    let _g = common::serial();
    let p = Prog::build("rec_sttrig");
    let file = p.dir.join("st.dat");
    let out = ktrace()
        .arg("record")
        .arg(format!("p:hit {} a=%di", p.place()))
        .args(["--trigger", "stacktrace", "-o"])
        .arg(&file)
        .arg("--")
        .arg(&p.bin)
        .arg("3")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ktrace record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ours, _) = report(&file, false);
    assert_eq!(ours.matches(" hit: (0x").count(), 3, "{ours}");
    assert_eq!(ours.matches("<stack trace>").count(), 3, "{ours}");
    let theirs = trace_cmd_report(&file);
    assert!(!theirs.contains("UNKNOWN EVENT"), "{theirs}");
    assert_eq!(theirs.matches("kernel_stack:").count(), 3, "{theirs}");
}
