//! `--folded` on the host's real uprobes with user stacks: `ktrace count
//! --by stack --folded`, `ktrace report --folded` of a `ktrace record
//! --stack` recording, and the `--by stack` table (JSON) of the same
//! workload give the same count per stack. The workload
//! (tests/fixtures/agg_workload.c `rec`: a recursion, so each depth is its
//! own stack) is built with frame pointers, so the kernel's user unwinder
//! sees the whole chain, and run without address randomisation (`setarch
//! -R`), so separate runs have the same addresses. When a flame graph tool
//! is on PATH (`inferno-flamegraph`, `flamegraph.pl`) it is fed the folded
//! output and must draw it; otherwise that part is skipped, loudly.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{ktrace, serial, tracefs};

/// The workload with frame pointers, in a private directory.
struct Workload {
    dir: PathBuf,
    bin: PathBuf,
}

impl Workload {
    fn build() -> Workload {
        let dir = std::env::temp_dir().join(format!("ktrace_folded_{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("aggfp");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agg_workload.c");
        let st = Command::new("gcc")
            .args(["-O1", "-fno-inline", "-fno-omit-frame-pointer", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(st.success());
        Workload { dir, bin }
    }

    /// The probes (every depth of `rec`, and `nap` at the bottom) and the
    /// command: `rec 6` gives 7 hits of rec and 1 of nap.
    fn args(&self) -> Vec<String> {
        let b = self.bin.display().to_string();
        [
            format!("{b}:rec"),
            format!("{b}:nap"),
            "--".into(),
            "setarch".into(),
            "-R".into(),
            b,
            "rec".into(),
            "6".into(),
            "100".into(),
        ]
        .into()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn run(args: &[String]) -> (String, String) {
    let out = ktrace().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ktrace {args:?}: {err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Folded lines parsed: stack → count (a repeated stack is an error).
fn parse_folded(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("`frames count`");
        let n: u64 = n.parse().expect("a count");
        assert!(m.insert(stack.to_string(), n).is_none(), "twice: {line}");
    }
    m
}

/// The `--by stack` table (JSON) folded here, independently of ktrace's
/// folding: frames reversed (root first), joined by `;` (user frames are
/// addresses: nothing to strip).
fn fold_table(json: &str) -> BTreeMap<String, u64> {
    let r: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    let mut m = BTreeMap::new();
    for row in r["rows"].as_array().unwrap() {
        let frames: Vec<&str> = row["key"]["stack"]
            .as_array()
            .expect("a stack in every row")
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let stack = frames.into_iter().rev().collect::<Vec<_>>().join(";");
        *m.entry(stack).or_insert(0) += row["count"].as_u64().unwrap();
    }
    m
}

/// A flame graph tool on PATH.
fn flame_tool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["inferno-flamegraph", "flamegraph.pl"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

#[test]
fn folded_counts_are_the_stack_tables() {
    let Some(root) = tracefs() else { return };
    if !root.join("options/userstacktrace").exists() {
        eprintln!("SKIP folded_counts_are_the_stack_tables: no options/userstacktrace");
        return;
    }
    if Command::new("setarch").arg("--version").output().is_err() {
        eprintln!("SKIP folded_counts_are_the_stack_tables: no setarch");
        return;
    }
    let _g = serial();
    let w = Workload::build();

    let mut args = s(&["count", "--json", "--by", "stack"]);
    args.extend(w.args());
    let table = fold_table(&run(&args).0);

    let mut args = s(&["count", "--by", "stack", "--folded"]);
    args.extend(w.args());
    let live = parse_folded(&run(&args).0);

    let file = w.dir.join("stacks.dat");
    let mut args = s(&["record", "--stack", "-o"]);
    args.push(file.display().to_string());
    args.extend(w.args());
    run(&args);
    let (text, _) = run(&[
        "report".into(),
        "--folded".into(),
        file.display().to_string(),
    ]);
    let report = parse_folded(&text);

    // 7 calls of rec (depths 0..6) and 1 of nap, each its own stack
    assert_eq!(table.values().sum::<u64>(), 8, "{table:#?}");
    assert!(table.len() >= 7, "{table:#?}");
    assert_eq!(live, table, "count --folded against the --by stack table");
    assert_eq!(
        report, table,
        "report --folded against the --by stack table"
    );
    for stack in table.keys() {
        assert!(
            stack.split(';').all(|f| f.starts_with("0x")),
            "user frames are addresses: {stack}"
        );
    }

    match flame_tool() {
        None => eprintln!(
            "\n!!!!!! SKIP (part): no flame graph tool on PATH (inferno-flamegraph, \
             flamegraph.pl): the folded text was not drawn !!!!!!\n"
        ),
        Some(tool) => {
            let mut child = Command::new(&tool)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let svg = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}: {}",
                tool.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(svg.contains("<svg"), "{svg}");
            // the tool counted every hit (both tools title the root so)
            assert!(svg.contains("all (8 samples, 100%)"), "{svg}");
            // every frame of the deepest stack is drawn
            let deepest = table.keys().max_by_key(|k| k.split(';').count()).unwrap();
            for f in deepest.split(';') {
                assert!(svg.contains(f), "{f} not in the graph");
            }
            eprintln!("{} drew the folded stacks", tool.display());
        }
    }
}

#[test]
fn folded_needs_a_stack_key() {
    // refused before anything is written (no root needed)
    let out = ktrace()
        .args(["count", "--folded", "--by", "comm", "/bin/true:main"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--folded needs --by stack"), "{err}");
    // and it prints text, not JSON
    let out = ktrace()
        .args([
            "count",
            "--folded",
            "--json",
            "--by",
            "stack",
            "/bin/true:main",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}

/// `ktrace report --folded` of a recording made without `--stack` said
/// nothing and printed one `[no stack] N` line (found by hand, 30 Nov
/// 2026, on a 1M-event recording): an empty flame graph for a forgotten
/// flag. Now it is an error that says so (trace-cmd's fixture: no stacks).
#[test]
fn folded_report_of_a_recording_without_stacks_says_so() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/tracedat/fixtures/tc-v7-zstd.dat");
    let out = ktrace()
        .args(["report", "--folded"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds no stacks: none of its 80 event(s) has one (record with --stack)"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
