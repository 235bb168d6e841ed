//! Byte-exact golden tests of the renderers. The goldens live in
//! tests/golden/; `UPDATE_GOLDEN=1 cargo test -p ktrace-aggregate --test
//! render` rewrites them (review the diff before committing).

use ktrace_aggregate::render::{
    count_json, count_text, hist_json, hist_text, interval_header, latency_json, latency_text,
};
use ktrace_aggregate::{
    CountAgg, HistAgg, KeySpec, LatencyAgg, LatencyPair, Sample, Scale, Unit, Value,
};
use std::path::PathBuf;

fn golden(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        got == want,
        "{name} differs:\n--- got\n{got}\n--- want\n{want}"
    );
}

/// 2026-11-23 11:41:31.5 UTC
const T: u64 = 1_795_434_091_500_000_000;

fn sample<'a>(
    event: &'a str,
    ts: u64,
    tid: u32,
    comm: &'a str,
    fields: &'a [(&'a str, Value<'a>)],
) -> Sample<'a> {
    Sample {
        ts_ns: ts,
        cpu: tid % 2,
        pid: tid,
        tid,
        comm,
        event,
        func: None,
        stack: None,
        fields,
    }
}

/// The guest workload of fixtures/capture-hist.sh, as the user engine would
/// see it: dd reading 100 x 1000, 50 x 4096, 7 x 1, 3 x 65536 bytes; cat
/// reading once 65536.
fn reads() -> Vec<(&'static str, u32, u64)> {
    let mut v = Vec::new();
    v.extend(std::iter::repeat_n(("dd", 153, 1000), 100));
    v.extend(std::iter::repeat_n(("dd", 154, 4096), 50));
    v.extend(std::iter::repeat_n(("dd", 155, 1), 7));
    v.extend(std::iter::repeat_n(("dd", 156, 65536), 3));
    v.push(("cat", 160, 65536));
    v
}

#[test]
fn count_by_comm_and_tid() {
    let mut c = CountAgg::new(vec![KeySpec::Comm, KeySpec::Tid]);
    for (comm, tid, n) in reads() {
        let f = [("count", Value::U64(n))];
        c.add(&sample("ktrace/ksys_read", 0, tid, comm, &f));
    }
    let mut out = String::new();
    interval_header(&mut out, T);
    count_text(&mut out, &c.report());
    count_text(&mut out, &c.report().top(2));
    c.lost(12);
    count_text(&mut out, &c.report());
    golden("count.txt", &out);
    let mut j = String::new();
    count_json(&mut j, &c.report().top(3), T, Some(1_000_000_000));
    golden("count.json", &j);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["total"], 161);
    assert_eq!(v["rows"][0]["key"]["comm"], "dd");
    assert_eq!(v["rows"][0]["key"]["tid"], 153);
    assert_eq!(v["time"], "2026-11-23T11:41:31Z");
}

#[test]
fn count_by_stack() {
    let a = vec![
        "ksys_read+0x5/0xf0".to_string(),
        "do_syscall_64+0x5d/0x90".to_string(),
    ];
    let b = vec!["vfs_read+0x1/0x2".to_string()];
    let mut c = CountAgg::new(vec![KeySpec::Comm, KeySpec::Stack]);
    for (stack, n) in [(&a, 3), (&b, 1)] {
        for _ in 0..n {
            let s = Sample {
                stack: Some(stack),
                ..sample("g/e", 0, 1, "sh", &[])
            };
            c.add(&s);
        }
    }
    let mut out = String::new();
    count_text(&mut out, &c.report());
    golden("count-stack.txt", &out);
}

#[test]
fn hist_log2_and_linear() {
    let mut log2 = HistAgg::new("count", Scale::Log2, vec![]);
    let mut lin = HistAgg::new("count", Scale::linear(16384).unwrap(), vec![KeySpec::Comm]);
    for (comm, tid, n) in reads() {
        let f = [("count", Value::U64(n))];
        log2.add(&sample("ktrace/ksys_read", 0, tid, comm, &f));
        lin.add(&sample("ktrace/ksys_read", 0, tid, comm, &f));
    }
    let mut out = String::new();
    hist_text(&mut out, &log2.report(), 40);
    hist_text(&mut out, &lin.report(), 20);
    golden("hist.txt", &out);
    let mut j = String::new();
    hist_json(&mut j, &log2.report(), T, None);
    golden("hist.json", &j);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["scale"]["type"], "log2");
    assert_eq!(
        v["groups"][0]["buckets"][0],
        serde_json::json!({"lo": 1, "hi": 2, "count": 7})
    );
    assert_eq!(v["groups"][0]["sum"], 100_000 + 50 * 4096 + 7 + 4 * 65536);
}

#[test]
fn hist_negative_values() {
    // return values: errors are negative
    let mut h = HistAgg::new("ret", Scale::Log2, vec![]);
    for r in [-9i64, -9, -2, 0, 0, 1, 3, 1000] {
        let f = [("ret", Value::S64(r))];
        h.add(&sample("g/r", 0, 1, "x", &f));
    }
    let mut out = String::new();
    hist_text(&mut out, &h.report(), 10);
    golden("hist-negative.txt", &out);
}

#[test]
fn latency_by_comm() {
    let pair = LatencyPair {
        func: "f".into(),
        entry_event: "g/f".into(),
        return_event: "g/f_ret".into(),
    };
    let mut l = LatencyAgg::new(vec![pair], Unit::Us, Scale::Log2, vec![KeySpec::Comm]);
    // durations in ns; usleep-like, with one recursive call and one orphan
    let mut ts = 0u64;
    for (comm, tid, d) in [
        ("usleep", 10, 1_161_000),
        ("usleep", 11, 1_171_000),
        ("usleep", 12, 20_200_000),
        ("usleep", 13, 100_424_000),
        ("sleep", 14, 20_591_000),
    ] {
        l.add(&sample("g/f", ts, tid, comm, &[]));
        l.add(&sample("g/f_ret", ts + d, tid, comm, &[]));
        ts += 1_000_000_000;
    }
    l.add(&sample("g/f_ret", ts, 99, "orphan", &[]));
    l.add(&sample("g/f", ts, 98, "open", &[]));
    l.set_kretprobe_misses(4);
    let mut out = String::new();
    interval_header(&mut out, T);
    latency_text(&mut out, &l.report(), 30);
    golden("latency.txt", &out);
    let mut j = String::new();
    latency_json(&mut j, &l.report(), T, Some(5_000_000_000));
    golden("latency.json", &j);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["unit"], "us");
    assert_eq!(v["unmatched_returns"], 1);
    assert_eq!(v["kretprobe_misses"], 4);
    assert_eq!(v["in_flight"], 1);
}

#[test]
fn empty_reports() {
    let mut out = String::new();
    count_text(&mut out, &CountAgg::new(vec![KeySpec::Comm]).report());
    hist_text(
        &mut out,
        &HistAgg::new("count", Scale::Log2, vec![]).report(),
        10,
    );
    let l = LatencyAgg::new(vec![], Unit::Ns, Scale::Log2, vec![]);
    latency_text(&mut out, &l.report(), 10);
    golden("empty.txt", &out);
}

/// Regression (issue 23 row 13): a traced string holding a newline or an
/// escape sequence was printed raw in the tables (a fake row, a colour
/// change on the user's terminal). Every control character and the
/// backslash are escaped in keys, histogram titles and stack frames;
/// JSON keeps the string exact (its own escaping).
#[test]
fn tables_escape_control_characters() {
    let evil = [
        "a\n    999  fake",
        "\u{1b}[31mred",
        "back\\slash",
        "c1\u{9b}x\t\r\u{7f}",
    ];
    let mut c = CountAgg::new(vec![KeySpec::Comm]);
    let mut h = HistAgg::new("v", Scale::Log2, vec![KeySpec::Comm]);
    for e in evil {
        let f = [("v", Value::U64(1))];
        c.add(&sample("g/e", 0, 1, e, &f));
        h.add(&sample("g/e", 0, 1, e, &f));
    }
    let frames = vec!["f+0x1/0x2".to_string(), "\u{1b}]0;title\u{7}".to_string()];
    let mut st = CountAgg::new(vec![KeySpec::Stack]);
    st.add(&Sample {
        stack: Some(&frames),
        ..sample("g/e", 0, 1, "x", &[])
    });
    let mut out = String::new();
    count_text(&mut out, &c.report());
    hist_text(&mut out, &h.report(), 10);
    count_text(&mut out, &st.report());
    for bad in ['\u{1b}', '\u{9b}', '\u{7}', '\r', '\t', '\u{7f}'] {
        assert!(!out.contains(bad), "{bad:?} printed raw:\n{out}");
    }
    // one header, four rows, the total: no fake row
    let total = out.lines().position(|l| l.starts_with("total ")).unwrap();
    assert_eq!(total, 5, "{out}");
    for want in [
        "a\\n    999  fake",
        "\\x1b[31mred",
        "back\\\\slash",
        "c1\\x9bx\\t\\r\\x7f",
        "v [comm=\\x1b[31mred]:",
        "\\x1b]0;title\\x07",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
    // JSON: the exact strings, escaped by JSON's rules
    let mut j = String::new();
    count_json(&mut j, &c.report(), T, None);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    let mut got: Vec<String> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"]["comm"].as_str().unwrap().to_string())
        .collect();
    got.sort();
    let mut want: Vec<String> = evil.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

/// Keys beyond `--max-keys` are one "other" line (count) or histogram
/// (hist, latency), in the text and in JSON.
#[test]
fn other_keys_are_said() {
    let mut c = CountAgg::new(vec![KeySpec::Comm]).with_max_keys(1);
    let mut h = HistAgg::new("v", Scale::Log2, vec![KeySpec::Comm]).with_max_keys(1);
    for (comm, v) in [("a", 1), ("b", 2), ("c", 4), ("b", 8)] {
        let f = [("v", Value::U64(v))];
        c.add(&sample("g/e", 0, 1, comm, &f));
        h.add(&sample("g/e", 0, 1, comm, &f));
    }
    let mut out = String::new();
    count_text(&mut out, &c.report());
    hist_text(&mut out, &h.report(), 10);
    golden("other.txt", &out);
    let mut j = String::new();
    count_json(&mut j, &c.report(), T, None);
    hist_json(&mut j, &h.report(), T, None);
    let docs: Vec<serde_json::Value> = j
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs[0]["total"], 4);
    assert_eq!(docs[0]["other"], 3);
    assert_eq!(docs[0]["max_keys"], 1);
    assert_eq!(docs[1]["other"]["count"], 3);
    assert_eq!(docs[1]["other"]["sum"], 14);
}

/// Regression (issue 21 item 4): a return probe attached mid-call (its
/// return came with no entry, or an entry never got its return) left
/// "unmatched returns 1, in flight 1" alone, which reads like loss. Without
/// loss the summary says what these are; with loss it does not pretend.
#[test]
fn a_return_probe_attached_mid_call_read_like_loss() {
    let pair = LatencyPair {
        func: "f".into(),
        entry_event: "g/f".into(),
        return_event: "g/f_ret".into(),
    };
    let run = |lost: u64| {
        let mut l = LatencyAgg::new(vec![pair.clone()], Unit::Us, Scale::Log2, vec![]);
        // the return of a call entered before the entry probe was live
        l.add(&sample("g/f_ret", 5, 7, "t", &[]));
        l.add(&sample("g/f", 10, 7, "t", &[]));
        l.add(&sample("g/f_ret", 2_010, 7, "t", &[]));
        // a call whose return probe was not live yet when it began
        l.add(&sample("g/f", 3_000, 8, "t", &[]));
        if lost > 0 {
            l.lost(lost);
        }
        let mut out = String::new();
        latency_text(&mut out, &l.report(), 10);
        out
    };
    let out = run(0);
    assert!(out.contains("unmatched returns 1, in flight 1\n"), "{out}");
    assert!(
        out.contains("(nothing was lost: unpaired entries and returns are calls already under way"),
        "{out}"
    );
    let out = run(3);
    assert!(!out.contains("nothing was lost"), "{out}");
}
