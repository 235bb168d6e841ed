//! A Perfetto trace built from real uprobe records (the trace-cmd fixture
//! of crates/tracedat, decoded by ktrace-ring and ktrace-event), decoded by
//! `protoc --decode` against tests/perfetto.proto (Perfetto's documented
//! field numbers) and checked: one track per thread with its name, every
//! entry/return pair a balanced slice, every field an annotation. Skips
//! loudly when protoc (Debian protobuf-compiler) is not installed.

use ktrace_event::{Events, Int, StrValue, Value};
use ktrace_perfetto::{Arg, Writer};
use ktrace_ring::{Merged, PageLayout, merge_streams};
use ktrace_tracedat::TraceDat;
use std::io::{Cursor, Write};
use std::path::Path;
use std::process::{Command, Stdio};

fn build() -> (Vec<u8>, usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracedat/fixtures/tc-v7.dat");
    let mut dat = TraceDat::open(std::fs::File::open(path).unwrap()).unwrap();
    let meta = dat.meta.clone();
    let layout =
        PageLayout::from_header_page(&String::from_utf8_lossy(&meta.header_page), meta.endian)
            .unwrap();
    let mut events = Events::new(layout.long_size);
    for s in &meta.systems {
        for f in &s.formats {
            events.add(&s.name, &String::from_utf8_lossy(f)).unwrap();
        }
    }
    let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
    for (i, c) in meta.buffers[0].cpus.iter().enumerate() {
        let b: Vec<u8> = dat.pages(0, i).unwrap().flat_map(Result::unwrap).collect();
        streams.push((c.cpu as usize, Box::new(Cursor::new(b))));
    }
    let comm = |pid: i32| {
        String::from_utf8_lossy(&meta.cmdlines)
            .lines()
            .find_map(|l| {
                l.split_once(' ')
                    .filter(|(p, _)| p.parse() == Ok(pid))
                    .map(|(_, c)| c.to_string())
            })
            .unwrap_or_default()
    };
    let mut w = Writer::new(Vec::new());
    let (mut entries, mut returns) = (0, 0);
    merge_streams(layout, streams, &mut |m| {
        let Merged::Record { ts, data, .. } = m else {
            return;
        };
        let c = ktrace_event::Common::read(data, meta.endian).unwrap();
        let ev = events.get(c.type_id).unwrap();
        w.thread(c.pid, c.pid, &comm(c.pid)).unwrap();
        let mut strs = Vec::new();
        let mut ints = Vec::new();
        for (i, f) in ev
            .format
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.common)
        {
            match ev.format.value(data, i, meta.endian) {
                Value::Int(Int::S(v)) => ints.push((f.name.clone(), Arg::Int(v))),
                Value::Int(Int::U(v)) => ints.push((f.name.clone(), Arg::Uint(v))),
                Value::Str(StrValue::Ok(s)) => {
                    strs.push((f.name.clone(), String::from_utf8_lossy(s).into_owned()))
                }
                v => panic!("unexpected {v:?}"),
            }
        }
        let mut args: Vec<(&str, Arg<'_>)> = ints.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        args.extend(strs.iter().map(|(n, s)| (n.as_str(), Arg::Str(s))));
        if ev.format.name == "ret" {
            returns += 1;
            w.end(c.pid, ts, "ent", &args).unwrap();
        } else {
            entries += 1;
            w.begin(c.pid, ts, &ev.format.name, &args).unwrap();
        }
    })
    .unwrap();
    (w.finish().unwrap(), entries, returns)
}

#[test]
fn protoc_decodes_threads_slices_and_fields() {
    let (bytes, entries, returns) = build();
    assert_eq!((entries, returns), (40, 40));
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let Ok(mut child) = Command::new("protoc")
        .arg(format!("-I{}", proto.display()))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED: protoc is not installed (apt-get install protobuf-compiler)");
        return;
    };
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8(out.stdout).unwrap();
    // every name written once, then referred to by its interned id
    assert_eq!(raw.matches("name: \"u32\"").count(), 1, "{raw}");
    assert_eq!(raw.matches("name: \"ent\"").count(), 1, "{raw}");
    let text = ktrace_perfetto::protoc_text::expand(&raw);
    // protoc prints unknown fields as bare numbers: there must be none
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())),
        "{text}"
    );
    let threads = text.matches("thread {").count();
    assert_eq!(threads, 2, "two target processes, one track each");
    assert_eq!(text.matches("thread_name: \"kfix_target\"").count(), 2);
    assert_eq!(text.matches("type: TYPE_SLICE_BEGIN").count(), 40);
    assert_eq!(text.matches("type: TYPE_SLICE_END").count(), 40);
    assert_eq!(text.matches("type: TYPE_INSTANT").count(), 0);
    // every entry field and the return value are annotations
    for f in ["u32", "s64", "x16", "str", "n", "comm", "__probe_ip"] {
        assert_eq!(text.matches(&format!("name: \"{f}\"")).count(), 40, "{f}");
    }
    assert_eq!(text.matches("name: \"rv\"").count(), 40);
    assert!(text.contains("string_value: \"hello, ring0\""));
    assert!(text.contains("int_value: -9000000000000000000"));
    // slices balance per track (never below zero, zero at the end), and
    // time stamps never go back (protoc prints type before track_uuid)
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

#[test]
fn returns_without_entries_are_instants_and_inner_slices_close() {
    let mut w = Writer::new(Vec::new());
    w.thread(1, 1, "a").unwrap();
    w.end(1, 5, "f", &[]).unwrap(); // entry before the trace: instant
    w.begin(1, 10, "f", &[]).unwrap();
    w.begin(1, 11, "g", &[]).unwrap(); // g's return lost
    w.end(1, 12, "f", &[("rv", Arg::Int(-1))]).unwrap(); // ends g, then f
    w.begin(1, 13, "h", &[("p", Arg::Pointer(0x10))]).unwrap(); // open at the end
    let bytes = w.finish().unwrap();
    let Ok(mut child) = Command::new("protoc")
        .arg(format!(
            "-I{}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests")
                .display()
        ))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED: protoc is not installed (apt-get install protobuf-compiler)");
        return;
    };
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let text = ktrace_perfetto::protoc_text::expand(
        &String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap(),
    );
    let types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("type: "))
        .collect();
    assert_eq!(
        types,
        [
            "TYPE_INSTANT",
            "TYPE_SLICE_BEGIN",
            "TYPE_SLICE_BEGIN",
            "TYPE_SLICE_END",
            "TYPE_SLICE_END",
            "TYPE_SLICE_BEGIN",
            "TYPE_SLICE_END"
        ]
    );
    assert!(text.contains("int_value: -1"));
    assert!(text.contains("pointer_value: 16"));
}

/// `protoc --decode` of `bytes`, interning and time stamps expanded;
/// `None` (after a loud message) without protoc.
fn decode(bytes: &[u8]) -> Option<String> {
    let Ok(mut child) = Command::new("protoc")
        .arg(format!(
            "-I{}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests")
                .display()
        ))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED: protoc is not installed (apt-get install protobuf-compiler)");
        return None;
    };
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    Some(ktrace_perfetto::protoc_text::expand(
        &String::from_utf8(out.stdout).unwrap(),
    ))
}

/// Memory stays bounded when entries never return: past
/// `MAX_DEPTH` open slices on a thread an entry is an instant (counted);
/// a time stamp earlier than the one before is written absolute, on the
/// trace's clock, and does not move the incremental clock.
#[test]
fn deep_entries_become_instants_and_time_may_go_back() {
    let mut w = Writer::new(Vec::new());
    w.thread(7, 7, "t").unwrap();
    let n = ktrace_perfetto::MAX_DEPTH + 10;
    for i in 0..n as u64 {
        w.begin(7, 1000 + i, "f", &[("i", Arg::Uint(i))]).unwrap();
    }
    assert_eq!(w.flattened(), 10);
    w.instant(7, 500, "back", &[]).unwrap();
    w.instant(7, 5000, "later", &[]).unwrap();
    let bytes = w.finish().unwrap();
    let Some(text) = decode(&bytes) else {
        return;
    };
    let count = |s: &str| text.matches(s).count();
    assert_eq!(count("type: TYPE_SLICE_BEGIN"), ktrace_perfetto::MAX_DEPTH);
    assert_eq!(count("type: TYPE_SLICE_END"), ktrace_perfetto::MAX_DEPTH);
    assert_eq!(count("type: TYPE_INSTANT"), 12);
    let ts: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("  timestamp: "))
        .map(|l| {
            l.trim()
                .strip_prefix("timestamp: ")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // snapshot packet, the entries, "back", "later", the ends at 5000
    assert_eq!(ts[..3], [1000, 1000, 1001]);
    let back = ts
        .iter()
        .position(|&t| t == 500)
        .expect("the early instant");
    assert_eq!(ts[back + 1], 5000);
    assert!(ts[back + 2..].iter().all(|&t| t == 5000));
}

/// Bytes each of `n` events adds once the names are interned: instants on
/// one thread 1 µs apart, made by `args(i)`.
fn bytes_per_event(n: u64, args: impl Fn(u64) -> Vec<(&'static str, Arg<'static>)>) -> f64 {
    let mut w = Writer::new(Vec::new());
    w.thread(1, 1, "t").unwrap();
    for i in 0..10 {
        w.instant(1, 1000 * (i + 1), "hit", &args(i)).unwrap();
    }
    let before = w.finish().unwrap().len();
    let mut w = Writer::new(Vec::new());
    w.thread(1, 1, "t").unwrap();
    for i in 0..10 + n {
        w.instant(1, 1000 * (i + 1), "hit", &args(i)).unwrap();
    }
    let after = w.finish().unwrap();
    // what protoc reads back is what was written
    if let Some(text) = decode(&after) {
        assert_eq!(
            text.matches("type: TYPE_INSTANT").count() as u64,
            10 + n,
            "{text}"
        );
    }
    (after.len() - before) as f64 / n as f64
}

/// Regression (issue 24 item 4): every event packet carried
/// `sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE` (2 bytes; the first
/// packet's SEQ_INCREMENTAL_STATE_CLEARED makes the state valid for the
/// whole file), so a two-field event cost 29 bytes. Now 27: 13 bytes of
/// packet, track, type and name, 2 of time delta, 6 per field.
#[test]
fn two_field_events_cost_27_bytes() {
    let b = bytes_per_event(1000, |i| {
        vec![("a", Arg::Uint(i % 100)), ("b", Arg::Uint(i % 7))]
    });
    assert_eq!(b, 27.0);
}

/// Regression (issue 24 item 4): a string field was written whole in every
/// event (`hello, ringN`: 29 bytes a field). Now string values are
/// interned like names: written once, then referred to by id.
#[test]
fn repeated_string_values_are_interned() {
    const S: [&str; 10] = [
        "hello, ring0",
        "hello, ring1",
        "hello, ring2",
        "hello, ring3",
        "hello, ring4",
        "hello, ring5",
        "hello, ring6",
        "hello, ring7",
        "hello, ring8",
        "hello, ring9",
    ];
    let b = bytes_per_event(1000, |i| {
        vec![
            ("a", Arg::Uint(i % 100)),
            ("s", Arg::Str(S[i as usize % 10])),
        ]
    });
    // one byte more than a small integer: string_value_iid is field 17,
    // a two-byte key
    assert_eq!(b, 28.0);
    let mut w = Writer::new(Vec::new());
    w.thread(1, 1, "t").unwrap();
    for i in 0..100 {
        w.instant(1, i, "hit", &[("s", Arg::Str(S[i as usize % 10]))])
            .unwrap();
    }
    let bytes = w.finish().unwrap();
    let raw = String::from_utf8_lossy(&bytes);
    assert_eq!(raw.matches("hello, ring3").count(), 1);
    let Some(text) = decode(&bytes) else {
        return;
    };
    for s in S {
        let want = format!("string_value: \"{s}\"");
        assert_eq!(text.matches(&want).count(), 10, "{s}: {text}");
    }
}

/// The string table is bounded: past `MAX_INTERNED_STRING_BYTES` new
/// values are written in place (and still read back), known ones are still
/// referred to.
#[test]
fn string_interning_is_bounded() {
    let big: Vec<String> = (0..6)
        .map(|i| format!("{i}").repeat(ktrace_perfetto::MAX_INTERNED_STRING_BYTES / 4))
        .collect();
    let mut w = Writer::new(Vec::new());
    w.thread(1, 1, "t").unwrap();
    for (i, s) in big.iter().chain(big.iter()).enumerate() {
        w.instant(1, i as u64, "hit", &[("s", Arg::Str(s))])
            .unwrap();
    }
    let bytes = w.finish().unwrap();
    // 4 interned once each; the 2 past the budget written every time
    let len = big[0].len();
    assert!(
        bytes.len() > 8 * len && bytes.len() < 8 * len + 4096,
        "{}",
        bytes.len()
    );
    let Some(text) = decode(&bytes) else {
        return;
    };
    for s in &big {
        let want = format!("string_value: \"{s}\"");
        assert_eq!(text.matches(&want).count(), 2);
    }
}

/// An event's category (its system, issue 21 item 2) is interned like a
/// name: written once, then two bytes an event; an end carries none, and
/// an end without its begin becomes an instant in the category given.
#[test]
fn categories_are_interned_once() {
    let mut w = Writer::new(Vec::new());
    w.thread(7, 7, "t").unwrap();
    for i in 0..10u64 {
        w.begin_in(7, 1000 + 2 * i, Some("ktrace"), "f", &[])
            .unwrap();
        w.end_in(7, 1001 + 2 * i, Some("ktrace"), "f", &[]).unwrap();
    }
    w.end_in(7, 2000, Some("app"), "g", &[]).unwrap();
    w.instant(7, 2001, "plain", &[]).unwrap();
    let bytes = w.finish().unwrap();
    let Some(text) = decode(&bytes) else {
        return;
    };
    assert_eq!(text.matches("categories: \"ktrace\"").count(), 10, "{text}");
    assert_eq!(text.matches("categories: \"app\"").count(), 1, "{text}");
    assert_eq!(text.matches("categories:").count(), 11, "{text}");
    // the raw trace names each category once
    let raw = String::from_utf8_lossy(&bytes);
    assert_eq!(raw.matches("ktrace").count(), 1);
}
