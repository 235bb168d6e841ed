//! Byte-identical comparison with the kernel's own `trace` text.
//!
//! The fixtures in crates/ring/fixtures/host-uprobe/ were captured on the
//! 6.18 host by `sh crates/ring/fixtures/capture-host.sh <dir>` (see the
//! script): raw `per_cpu/cpuN/trace_pipe_raw` pages, the events' `format`
//! files, `header_page`, `header_event`, `saved_cmdlines` and the kernel's
//! `trace` text of the same instance, read before the pages were consumed.
//! These tests decode the pages, merge the CPUs, print every record and
//! compare with the kernel's lines byte for byte.

use ktrace_event::{Endian, Events, ProbeKind};
use ktrace_printer::{Comms, FlagStyle, JsonPrinter, LostSummary, NoSymbols, TextPrinter};
use ktrace_ring::{Merged, Merger, PageLayout, check_header_event};
use ktrace_tracefs::CpuStats;
use std::path::{Path, PathBuf};

fn dir(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ring/fixtures/host-uprobe")
        .join(scenario)
}

fn read(d: &Path, f: &str) -> String {
    std::fs::read_to_string(d.join(f)).unwrap_or_else(|e| panic!("{}: {e}", d.join(f).display()))
}

struct Capture {
    layout: PageLayout,
    events: Events,
    comms: Comms,
    style: FlagStyle,
    pages: Vec<(usize, Vec<u8>)>,
    trace: Vec<u8>,
    stats: Vec<(usize, CpuStats)>,
}

fn load(scenario: &str) -> Capture {
    let d = dir(scenario);
    let info = read(&d, "info.txt");
    let release = info
        .lines()
        .find_map(|l| l.strip_prefix("uname -r: "))
        .expect("release in info.txt");
    let defs: Vec<&str> = info
        .lines()
        .filter(|l| l.starts_with("p:") || l.starts_with("r:"))
        .collect();
    let layout = PageLayout::from_header_page(&read(&d, "header_page"), Endian::Little).unwrap();
    check_header_event(&read(&d, "header_event")).unwrap();
    let mut events = Events::new(layout.long_size);
    for (file, def) in [("ent.format", defs[0]), ("ret.format", defs[1])] {
        let system = def[2..].split('/').next().unwrap();
        events
            .add_with_kind(system, &read(&d, file), ProbeKind::from_dynamic_event(def))
            .unwrap();
    }
    let mut pages = Vec::new();
    let mut stats = Vec::new();
    for cpu in 0..64 {
        if let Ok(s) = std::fs::read_to_string(d.join(format!("cpu{cpu}.stats"))) {
            stats.push((cpu, CpuStats::parse(&s)));
        }
        let Ok(raw) = std::fs::read(d.join(format!("cpu{cpu}.raw"))) else {
            continue;
        };
        for chunk in raw.chunks(layout.subbuf_size) {
            pages.push((cpu, chunk.to_vec()));
        }
    }
    Capture {
        layout,
        events,
        comms: Comms::from_saved_cmdlines(&read(&d, "saved_cmdlines")),
        style: FlagStyle::for_release(release),
        pages,
        trace: std::fs::read(d.join("trace.txt")).unwrap(),
        stats,
    }
}

/// The kernel's lines, without the `#` header.
fn kernel_lines(trace: &[u8]) -> Vec<&[u8]> {
    trace
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
        .collect()
}

fn print_all(c: &Capture) -> (Vec<u8>, LostSummary) {
    let mut merger = Merger::new(c.layout);
    for (cpu, p) in &c.pages {
        merger.push(*cpu, p.clone());
    }
    let mut printer = TextPrinter::new(
        &c.events,
        c.layout.endian,
        c.style,
        &NoSymbols,
        c.comms.clone(),
    );
    let mut out = Vec::new();
    let mut summary = LostSummary::new();
    merger.flush(&mut |m| match m {
        Merged::Record { cpu, ts, data } => {
            summary.events += 1;
            printer.write_record(&mut out, cpu, ts, data);
        }
        Merged::Lost { cpu, missed } => summary.add_missed(cpu, missed),
        Merged::Bad { cpu, error } => panic!("cpu {cpu}: {error}"),
    });
    for (cpu, s) in &c.stats {
        summary.add_stats(*cpu, s);
    }
    (out, summary)
}

/// Asserts two sets of lines are equal, naming the first that differs.
fn assert_lines_equal<T: AsRef<[u8]>>(scenario: &str, ours: &[T], theirs: &[T]) {
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let (a, b) = (a.as_ref(), b.as_ref());
        assert!(
            a == b,
            "{scenario}: line {i} differs\n ours:   {}\n kernel: {}",
            a.escape_ascii(),
            b.escape_ascii()
        );
    }
    assert_eq!(ours.len(), theirs.len(), "{scenario}: line count");
}

fn assert_identical(scenario: &str) -> (usize, LostSummary) {
    let c = load(scenario);
    let (out, summary) = print_all(&c);
    let ours = kernel_lines(&out);
    assert_lines_equal(scenario, &ours, &kernel_lines(&c.trace));
    (ours.len(), summary)
}

#[test]
fn every_uprobe_field_type_prints_like_the_kernel() {
    let (n, summary) = assert_identical("types");
    // 12 entry + 12 return hits from each of two processes
    assert_eq!(n, 48);
    assert_eq!(summary.line(), "48 events, 0 lost");
}

#[test]
fn overflowed_buffer_prints_like_the_kernel_and_counts_losses() {
    let (n, summary) = assert_identical("overflow");
    let c = load("overflow");
    let overrun = c.stats.iter().find(|(cpu, _)| *cpu == 0).unwrap().1.overrun;
    assert!(overrun > 0);
    // the first page carries the kernel's stored missed count, equal to the
    // overrun counter of per_cpu/cpu0/stats
    assert_eq!(summary.lost_on(0), overrun);
    assert_eq!(
        summary.line(),
        format!("{n} events, {overrun} lost on CPU 0")
    );
    let mut lost = Vec::new();
    let printer = TextPrinter::new(&c.events, Endian::Little, c.style, &NoSymbols, Comms::new());
    let mut merger = Merger::new(c.layout);
    for (cpu, p) in &c.pages {
        merger.push(*cpu, p.clone());
    }
    merger.flush(&mut |m| {
        if let Merged::Lost { cpu, missed } = m {
            printer.write_lost(&mut lost, cpu, missed);
        }
    });
    assert_eq!(
        String::from_utf8(lost).unwrap(),
        format!("CPU:0 [LOST {overrun} EVENTS]\n")
    );
}

#[test]
fn json_lines_are_typed() {
    let c = load("types");
    let mut merger = Merger::new(c.layout);
    for (cpu, p) in &c.pages {
        merger.push(*cpu, p.clone());
    }
    let mut jp = JsonPrinter::new(&c.events, Endian::Little, &NoSymbols, c.comms.clone());
    let mut out = Vec::new();
    merger.flush(&mut |m| {
        if let Merged::Record { cpu, ts, data } = m {
            jp.write_record(&mut out, cpu, ts, data);
        }
    });
    let lines: Vec<serde_json::Value> = out
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 48);
    let ent = lines.iter().find(|v| v["event"] == "ent").unwrap();
    let f = &ent["fields"];
    assert_eq!(ent["comm"], "kfix_target");
    assert_eq!(f["u8"], 200);
    assert_eq!(f["s8"], -100);
    assert_eq!(f["u64"], 18000000000000000000u64);
    assert_eq!(f["s64"], -9000000000000000000i64);
    assert_eq!(f["x32"], 0xee6b2800u32);
    assert_eq!(f["arr"], serde_json::json!([0, 3735928559u32, 7]));
    assert_eq!(f["ch"], "A");
    assert_eq!(f["str"], "hello, ring0");
    assert_eq!(f["strs"], serde_json::json!(["alpha", "", "gamma delta"]));
    assert_eq!(f["imm"], serde_json::Value::Null);
    let ret = lines.iter().find(|v| v["event"] == "ret").unwrap();
    assert_eq!(ret["fields"]["rv"], -5999999998i64);
}

/// Replaces the time stamp of a kernel `trace` line (`<secs>.<usecs>: `
/// after the flags column) with `TS`.
fn mask_ts(line: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(line);
    let Some(colon) = s.find(": ") else {
        return line.to_vec();
    };
    let head = &s[..colon];
    let start = head.rfind(' ').map_or(0, |i| i + 1);
    format!("{}TS{}", &s[..start], &s[colon..]).into_bytes()
}

#[test]
fn partial_reads_with_tail_padding_print_like_the_kernel() {
    // pages read while the kernel was still writing them, several ending
    // in (or consisting only of) a padding record with a length
    let c = load("padding");
    let mut discarded = 0;
    let mut records = 0;
    for (_, p) in &c.pages {
        let page = ktrace_ring::Page::parse(c.layout, p).unwrap();
        let mut it = page.records();
        for r in it.by_ref() {
            r.unwrap();
            records += 1;
        }
        discarded += it.discarded();
    }
    assert!(discarded >= 1, "the capture has real padding records");
    assert_eq!(records, 200, "100 entry + 100 return hits, each once");
    let (out, summary) = print_all(&c);
    assert_eq!(summary.line(), "200 events, 0 lost");
    // the reference is a second instance: same events, its own stamps
    let ours: Vec<Vec<u8>> = kernel_lines(&out).into_iter().map(mask_ts).collect();
    let theirs: Vec<Vec<u8>> = kernel_lines(&c.trace).into_iter().map(mask_ts).collect();
    assert_lines_equal("padding", &ours, &theirs);
}
