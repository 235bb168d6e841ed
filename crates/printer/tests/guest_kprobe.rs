//! Byte-identical comparison with the kernel's own `trace` text for kprobe
//! and kretprobe events, from real guest kernels (Debian cloud 6.1 under the
//! rig, tests/kernel/README.md). Captured by
//! crates/ring/fixtures/guest-capture.sh (the host command is in its header);
//! each scenario directory holds raw pages, formats, `trace` text, and the
//! /proc/kallsyms lines around every symbol printed, from which the symbol
//! table (`sym+0xoff/0xsize`) is rebuilt.

use ktrace_event::{Endian, Events, ProbeKind};
use ktrace_printer::{Comms, FlagStyle, TableSymbols, TextPrinter};
use ktrace_ring::{Merged, Merger, PageLayout, check_header_event};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ring/fixtures")
}

fn read(d: &Path, f: &str) -> String {
    std::fs::read_to_string(d.join(f)).unwrap_or_else(|e| panic!("{}: {e}", d.join(f).display()))
}

/// kallsyms lines sorted by address: each symbol's size is the distance to
/// the next different address, as kallsyms_lookup_size_offset() computes it.
fn symbols(text: &str) -> TableSymbols {
    let mut rows: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let a = u64::from_str_radix(w.next()?, 16).ok()?;
            let _ty = w.next()?;
            Some((a, w.next()?.to_string()))
        })
        .collect();
    rows.sort();
    let mut syms = Vec::new();
    for (i, (a, name)) in rows.iter().enumerate() {
        if let Some((next, _)) = rows[i + 1..].iter().find(|(b, _)| b > a) {
            syms.push((*a, next - a, name.clone(), None));
        }
    }
    TableSymbols::new(syms)
}

fn check(d: &Path) -> usize {
    let info = read(d, "info.txt");
    let release = info
        .lines()
        .find_map(|l| l.strip_prefix("uname -r: "))
        .unwrap();
    let defs: Vec<&str> = info
        .lines()
        .filter(|l| {
            let head = l.split(':').next().unwrap_or("");
            head.starts_with(['p', 'r']) && head[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    let layout = PageLayout::from_header_page(&read(d, "header_page"), Endian::Little).unwrap();
    check_header_event(&read(d, "header_event")).unwrap();
    let mut events = Events::new(layout.long_size);
    for def in &defs {
        let name = def
            .split_whitespace()
            .next()
            .unwrap()
            .split('/')
            .nth(1)
            .unwrap();
        let kind = ProbeKind::from_dynamic_event(def);
        assert!(
            matches!(kind, ProbeKind::Kprobe | ProbeKind::Kretprobe),
            "{def}"
        );
        events
            .add_with_kind("ktrace_fix", &read(d, &format!("{name}.format")), kind)
            .unwrap();
    }
    let syms = symbols(&read(d, "kallsyms.excerpt"));
    let mut merger = Merger::new(layout);
    for cpu in 0..64 {
        if let Ok(raw) = std::fs::read(d.join(format!("cpu{cpu}.raw"))) {
            for page in raw.chunks(layout.subbuf_size) {
                merger.push(cpu, page.to_vec());
            }
        }
    }
    let comms = Comms::from_saved_cmdlines(&read(d, "saved_cmdlines"));
    let mut p = TextPrinter::new(
        &events,
        layout.endian,
        FlagStyle::for_release(release),
        &syms,
        comms,
    );
    let mut out = Vec::new();
    merger.flush(&mut |m| match m {
        Merged::Record { cpu, ts, data } => p.write_record(&mut out, cpu, ts, data),
        Merged::Lost { .. } => {}
        Merged::Bad { cpu, error } => panic!("cpu {cpu}: {error}"),
    });
    let kernel = std::fs::read(d.join("trace.txt")).unwrap();
    let lines = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split(|&c| c == b'\n')
            .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
            .map(<[u8]>::to_vec)
            .collect()
    };
    let (ours, theirs) = (lines(&out), lines(&kernel));
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!(
            a == b,
            "{}: line {i}\n ours:   {}\n kernel: {}",
            d.display(),
            a.escape_ascii(),
            b.escape_ascii()
        );
    }
    assert_eq!(ours.len(), theirs.len(), "{}", d.display());
    ours.len()
}

fn arch(name: &str) {
    let base = fixtures().join(name);
    let mut total = 0;
    for scenario in ["kprobe", "abs"] {
        let d = base.join(scenario);
        if d.join("trace.txt").exists() {
            total += check(&d);
        }
    }
    assert!(total > 8, "{name}: only {total} lines compared");
}

#[test]
fn arm64_kprobe_and_kretprobe_print_like_the_kernel() {
    arch("guest-arm64");
}

#[test]
fn x86_64_kprobe_and_kretprobe_print_like_the_kernel() {
    arch("guest-x86_64");
}

#[test]
fn abs_scenarios_really_hold_absolute_time_stamps() {
    // the hist trigger on common_timestamp makes the kernel write type_len
    // 31 records; make sure the fixtures exercise them
    for a in ["guest-x86_64", "guest-arm64", "guest-x86_64-6.12"] {
        let d = fixtures().join(a).join("abs");
        let layout =
            PageLayout::from_header_page(&read(&d, "header_page"), Endian::Little).unwrap();
        let mut stamps = 0;
        for cpu in 0..2 {
            let Ok(raw) = std::fs::read(d.join(format!("cpu{cpu}.raw"))) else {
                continue;
            };
            for page in raw.chunks(layout.subbuf_size) {
                let p = ktrace_ring::Page::parse(layout, page).unwrap();
                // walk headers: type_len is the low 5 bits of each u32
                let body = &page[layout.data_offset..layout.data_offset + p.commit];
                let mut pos = 0;
                while pos + 8 <= body.len() {
                    let h = u32::from_le_bytes(body[pos..pos + 4].try_into().unwrap());
                    let len =
                        u32::from_le_bytes(body[pos + 4..pos + 8].try_into().unwrap()) as usize;
                    pos += match h & 31 {
                        31 => {
                            stamps += 1;
                            8
                        }
                        30 => 8,
                        29 => 4 + len,
                        0 => 4 + len,
                        t => 4 + 4 * t as usize,
                    };
                }
            }
        }
        assert!(stamps > 0, "{a}: no absolute time stamp records");
    }
}

#[test]
fn x86_64_debian_6_12_prints_like_the_kernel() {
    // Debian 6.12.117: the last series with the classic flag bits
    arch("guest-x86_64-6.12");
}
