//! Names that stay put (issue 21 item 2), on the host kernel's uprobes: the
//! kernel holds every session's probes in the session's own group
//! (`ktrace_p<PID>_s<START>_n<PIDNS>`, new every run), but what ktrace
//! shows and writes names the stable system `ktrace` (or `--group NAME`, or
//! the group a definition wrote): JSON's `system`, `--raw`, the system
//! directories of a `record` trace.dat (so trace-cmd and KernelShark's
//! libkshark list `ktrace/hit`), the category of `export --perfetto`'s
//! events (decoded with Perfetto's official protos, its python package),
//! and the kernel-language line of a rejected definition.
//!
//! Checked against the tools themselves: trace-cmd 3.x `report -E`, the
//! KernelShark library through tests/fixtures/kshark_read.c, and
//! `perfetto.protos.perfetto.trace.perfetto_trace_pb2`. A missing tool is
//! a loud skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Prog, ktrace, serial, start_trace, state, tracefs};

const ARGS: &str = "a=%di s=+0(%si):string";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(args: &[String]) -> Output {
    ktrace().args(args).output().unwrap()
}

/// `ktrace record` of an entry and a return probe on `probe_me`, with
/// stacks, into `file`; `extra` goes before the definitions.
fn record(p: &Prog, file: &Path, extra: &[&str]) {
    let mut args: Vec<String> = vec!["record".into(), "--stack".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(format!("p:hit {} {ARGS}", p.place()));
    args.push(format!("r:hit_ret {}%return", p.place()));
    args.extend(["-o".into(), file.display().to_string(), "--".into()]);
    args.push(p.bin.display().to_string());
    args.push("20".into());
    let out = run(&args);
    assert!(out.status.success(), "ktrace record: {}", text(&out.stderr));
}

/// `trace-cmd report -E`: the event formats the file holds, as
/// `system:event` lines (ftrace's own left out).
fn trace_cmd_events(file: &Path) -> Vec<String> {
    let out = Command::new("trace-cmd")
        .args(["report", "-E", "-i"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "trace-cmd report -E: {out:?}");
    text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("ftrace:"))
        .map(str::to_string)
        .collect()
}

/// The names (`system/event`) KernelShark's libkshark gives the first
/// `n` entries of `file`; `None` without libkshark.
fn kshark_names(dir: &Path, file: &Path, n: usize) -> Option<Vec<String>> {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libkshark.so.2");
    if !lib.exists() {
        eprintln!(
            "\n!!!!!! SKIP: KernelShark's libkshark is not installed (apt-get install kernelshark) !!!!!!\n"
        );
        return None;
    }
    let reader = dir.join("kshark_read");
    if !reader.exists() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kshark_read.c");
        let st = Command::new("gcc")
            .args(["-O1", "-o"])
            .arg(&reader)
            .arg(&src)
            .arg(lib)
            .status()
            .unwrap();
        assert!(st.success(), "gcc {}", src.display());
    }
    let out = Command::new(&reader)
        .arg(file)
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // "TASK EVENT INFO" after the "entries N" line
    Some(
        text(&out.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect(),
    )
}

/// Perfetto's official protos (its python package) decode `pf`: one line
/// per slice begin or instant, `TYPE categories name`; `None` without the
/// package.
fn perfetto_events(pf: &Path) -> Option<Vec<String>> {
    const PY: &str = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
cats, names = {}, {}
for p in t.packet:
    if p.HasField('interned_data'):
        for c in p.interned_data.event_categories: cats[c.iid] = c.name
        for n in p.interned_data.event_names: names[n.iid] = n.name
    if p.HasField('track_event'):
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_END: continue
        cs = [cats.get(i, '?') for i in e.category_iids] + list(e.categories)
        print(pb.TrackEvent.Type.Name(e.type), ','.join(cs) or '-', names.get(e.name_iid, e.name))
"#;
    let have = Command::new("python3")
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        eprintln!(
            "\n!!!!!! SKIP: Perfetto's python package (its official protos) is not installed !!!!!!\n"
        );
        return None;
    }
    let out = Command::new("python3")
        .args(["-c", PY])
        .arg(pf)
        .output()
        .unwrap();
    assert!(out.status.success(), "perfetto decode: {out:?}");
    Some(text(&out.stdout).lines().map(str::to_string).collect())
}

fn export(file: &Path, pf: &Path) {
    let out = ktrace()
        .arg("export")
        .arg(file)
        .args(["--perfetto", "-o"])
        .arg(pf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Two recordings of the same probes by two runs (two sessions, two
/// kernel groups) list the same events under the same system, `ktrace`,
/// in trace-cmd, KernelShark and Perfetto (official protos), and in
/// `ktrace report --json`. Before: each file named its system after its
/// session (`ktrace_p…_s…_n…:hit`), and Perfetto had no category.
#[test]
fn two_recordings_share_their_names() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let before = state(&root);
    let p = Prog::build("stable_rec");
    let files: Vec<PathBuf> = (0..2).map(|i| p.dir.join(format!("r{i}.dat"))).collect();
    for f in &files {
        record(&p, f, &[]);
    }
    assert_eq!(
        state(&root),
        before,
        "a recording left something in tracefs"
    );
    if common::have_trace_cmd() {
        let a = trace_cmd_events(&files[0]);
        let b = trace_cmd_events(&files[1]);
        assert_eq!(a, ["ktrace:hit", "ktrace:hit_ret"], "{a:?}");
        assert_eq!(a, b);
    }
    if let Some(a) = kshark_names(&p.dir, &files[0], 4) {
        let b = kshark_names(&p.dir, &files[1], 4).unwrap();
        assert!(a.iter().any(|n| n == "ktrace/hit"), "{a:?}");
        assert!(a.iter().any(|n| n == "ktrace/hit_ret"), "{a:?}");
        assert!(!a.iter().any(|n| n.contains("ktrace_p")), "{a:?}");
        assert_eq!(a, b);
    }
    // ktrace's own report
    for f in &files {
        let out = ktrace()
            .arg("report")
            .arg(f)
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let json = text(&out.stdout);
        assert_eq!(json.matches("\"system\":\"ktrace\"").count(), 40, "{json}");
        assert!(!json.contains("ktrace_p"), "{json}");
    }
    // Perfetto, with the stacks the recording holds
    let pfs: Vec<PathBuf> = files.iter().map(|f| f.with_extension("pftrace")).collect();
    for (f, pf) in files.iter().zip(&pfs) {
        export(f, pf);
    }
    if let Some(a) = perfetto_events(&pfs[0]) {
        let b = perfetto_events(&pfs[1]).unwrap();
        assert_eq!(a.len(), 20, "{a:?}");
        assert!(
            a.iter().all(|l| l == "TYPE_SLICE_BEGIN ktrace hit"),
            "{a:?}"
        );
        assert_eq!(a, b);
    }
}

/// `--group NAME` names the system in JSON, `--raw` and a recording (trace-cmd
/// lists `app:hit`, Perfetto's category is `app`); a group written in a
/// definition names that probe's; two sessions with the same `--group` and
/// event names run side by side (the kernel still has a group per
/// session), and neither leaves anything behind.
#[test]
fn group_option_names_the_system() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let before = state(&root);
    let p = Prog::build("stable_group");
    let cmd = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["--group".into(), "app".into()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v.push(format!("p:hit {} {ARGS}", p.place()));
        v.push(format!("p:mine/hit2 {}", p.place()));
        v
    };
    // two sessions at once, same --group, same event names
    let mut one = start_trace(&cmd(&["--json", "-d", "6"]), Stdio::piped(), &[]);
    let mut two = start_trace(&cmd(&["--raw", "-d", "6"]), Stdio::piped(), &[]);
    p.run(5);
    let (mut out_one, mut out_two) = (one.child.stdout.take(), two.child.stdout.take());
    let (code_one, err_one) = one.finish();
    let (code_two, err_two) = two.finish();
    assert_eq!((code_one, code_two), (0, 0), "{err_one}\n{err_two}");
    let read = |o: &mut Option<std::process::ChildStdout>| {
        let mut s = String::new();
        std::io::Read::read_to_string(o.as_mut().unwrap(), &mut s).unwrap();
        s
    };
    let json = read(&mut out_one);
    assert_eq!(
        json.matches("\"system\":\"app\",\"event\":\"hit\"").count(),
        5,
        "{json}"
    );
    assert_eq!(
        json.matches("\"system\":\"mine\",\"event\":\"hit2\"")
            .count(),
        5,
        "{json}"
    );
    let raw = read(&mut out_two);
    assert_eq!(raw.matches(" app:hit ").count(), 5, "{raw}");
    assert_eq!(raw.matches(" mine:hit2 ").count(), 5, "{raw}");
    assert!(!json.contains("ktrace_p") && !raw.contains("ktrace_p"));
    // a recording
    let file = p.dir.join("g.dat");
    let mut args = vec!["record".to_string(), "--group".into(), "app".into()];
    args.push(format!("p:hit {} {ARGS}", p.place()));
    args.extend(["-o".into(), file.display().to_string(), "--".into()]);
    args.push(p.bin.display().to_string());
    args.push("3".into());
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(state(&root), before, "something was left in tracefs");
    if common::have_trace_cmd() {
        assert_eq!(trace_cmd_events(&file), ["app:hit"]);
    }
    let pf = p.dir.join("g.pftrace");
    export(&file, &pf);
    if let Some(ev) = perfetto_events(&pf) {
        assert_eq!(ev, vec!["TYPE_INSTANT app hit"; 3]);
    }
}

/// A bad `--group` is a usage error (exit 2) that says why, before
/// anything is created; so is a bad group written in a definition (exit 1,
/// as every rejected definition).
#[test]
fn bad_group_names_are_refused() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let before = state(&root);
    let p = Prog::build("stable_bad");
    let long = "g".repeat(64);
    for (group, why) in [
        (
            "1app",
            "a group name must follow the same rules as C identifiers",
        ),
        (
            "my-app",
            "a group name must follow the same rules as C identifiers",
        ),
        (
            "",
            "a group name must follow the same rules as C identifiers",
        ),
        (long.as_str(), "a group name is at most 63 bytes"),
        ("ftrace", "is the system of ftrace's own events"),
    ] {
        let out = run(&[
            "trace".into(),
            "--group".into(),
            group.into(),
            format!("p:hit {}", p.place()),
            "-d".into(),
            "1".into(),
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{group:?}: {err}");
        assert!(err.contains(why), "{group:?}: {err}");
    }
    let out = run(&[
        "trace".into(),
        format!("p:ftrace/hit {}", p.place()),
        "-d".into(),
        "1".into(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is the system of ftrace's own events"),
        "{err}"
    );
    assert_eq!(state(&root), before);
}

/// A rejected definition is echoed as the user typed it, and the
/// kernel-language line under it (with the caret) names the stable system,
/// never the session's group. Before: `p:ktrace_p…_s…_n…/hit …`.
#[test]
fn a_rejected_definition_shows_no_session_group() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let before = state(&root);
    let p = Prog::build("stable_err");
    for (extra, def, system) in [
        (None, format!("p:hit {} a=%di:bogus", p.place()), "ktrace"),
        (
            Some("app"),
            format!("p:hit {} a=%di:bogus", p.place()),
            "app",
        ),
        (
            None,
            format!("p:mine/hit {} a=%di:bogus", p.place()),
            "mine",
        ),
    ] {
        let mut args: Vec<String> = vec!["trace".into()];
        if let Some(g) = extra {
            args.extend(["--group".into(), g.into()]);
        }
        args.extend([def.clone(), "-d".into(), "1".into()]);
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("ktrace_p"), "{err}");
        let lines: Vec<&str> = err.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.ends_with(&format!("written: {def}")))
            .unwrap_or_else(|| panic!("the definition as typed: {err}"));
        let cmd = lines[i + 1].trim_start();
        assert!(cmd.starts_with(&format!("p:{system}/hit ")), "{err}");
        // the caret is under the bad type
        let caret = lines[i + 2].find('^').unwrap();
        assert_eq!(&lines[i + 1][caret..], "bogus", "{err}");
    }
    assert_eq!(state(&root), before);
}
