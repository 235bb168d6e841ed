//! Decode throughput: per-CPU pages → merge → kernel-identical text (and
//! JSON, raw), in memory.
//!
//! Input: `$KTRACE_BENCH_DIR` (default /work/targets/ring/big) made by
//! `sh crates/printer/benches/capture-big.sh DIR` (1,000,000 uprobe hits,
//! `a=%di s=+0(%si):string`); without it, the committed host fixture pages
//! (crates/ring/fixtures/host-uprobe/overflow) repeated 1000 times.
//!
//!     cargo bench -p ktrace-printer --bench decode

use divan::counter::ItemsCount;
use ktrace_event::{Endian, Events, ProbeKind};
use ktrace_printer::{Comms, FlagStyle, JsonPrinter, NoSymbols, TextPrinter, write_raw};
use ktrace_ring::{Merged, PageLayout, merge_streams};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

struct Input {
    layout: PageLayout,
    events: Events,
    comms: Comms,
    cpus: Vec<(usize, &'static [u8])>,
    records: u64,
}

fn input() -> &'static Input {
    static I: OnceLock<Input> = OnceLock::new();
    I.get_or_init(|| {
        let big = PathBuf::from(
            std::env::var("KTRACE_BENCH_DIR").unwrap_or_else(|_| "/work/targets/ring/big".into()),
        );
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../ring/fixtures/host-uprobe/overflow");
        let (dir, repeat) = if big.join("header_page").exists() {
            (big, 1)
        } else {
            (fixture, 1000)
        };
        let rd = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        let layout = PageLayout::from_header_page(&rd("header_page"), Endian::Little).unwrap();
        let info = rd("info.txt");
        let mut events = Events::new(layout.long_size);
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(ev) = name.strip_suffix(".format") {
                let def = info
                    .lines()
                    .find(|l| {
                        l.split_whitespace()
                            .next()
                            .is_some_and(|h| h.ends_with(&format!("/{ev}")))
                    })
                    .unwrap_or("");
                let kind = ProbeKind::from_dynamic_event(def);
                events
                    .add_with_kind("bench", &std::fs::read_to_string(&path).unwrap(), kind)
                    .unwrap();
            }
        }
        let mut cpus = Vec::new();
        for cpu in 0..64 {
            if let Ok(raw) = std::fs::read(dir.join(format!("cpu{cpu}.raw"))) {
                let all: Vec<u8> = raw.repeat(repeat);
                cpus.push((cpu, &*Box::leak(all.into_boxed_slice())));
            }
        }
        let mut inp = Input {
            layout,
            events,
            comms: Comms::from_saved_cmdlines(&rd("saved_cmdlines")),
            cpus,
            records: 0,
        };
        inp.records = run(&inp, |_, _, _, _| {});
        eprintln!("bench input: {} ({} records)", dir.display(), inp.records);
        inp
    })
}

fn run(inp: &Input, mut f: impl FnMut(&mut Vec<u8>, usize, u64, &[u8])) -> u64 {
    let streams = inp
        .cpus
        .iter()
        .map(|(c, b)| {
            (
                *c,
                Box::new(std::io::Cursor::new(*b)) as Box<dyn std::io::Read>,
            )
        })
        .collect();
    let mut out = Vec::with_capacity(1 << 17);
    merge_streams(inp.layout, streams, &mut |m| {
        if let Merged::Record { cpu, ts, data } = m {
            f(&mut out, cpu, ts, data);
            if out.len() > 1 << 16 {
                divan::black_box(&out);
                out.clear();
            }
        }
    })
    .unwrap()
}

#[divan::bench(sample_count = 5)]
fn decode_only(b: divan::Bencher) {
    let inp = input();
    b.counter(ItemsCount::new(inp.records)).bench(|| {
        run(inp, |_, _, _, d| {
            divan::black_box(d);
        })
    });
}

#[divan::bench(sample_count = 5)]
fn text(b: divan::Bencher) {
    let inp = input();
    b.counter(ItemsCount::new(inp.records)).bench(|| {
        let mut p = TextPrinter::new(
            &inp.events,
            inp.layout.endian,
            FlagStyle::Lazy,
            &NoSymbols,
            inp.comms.clone(),
        );
        run(inp, |o, c, t, d| p.write_record(o, c, t, d))
    });
}

#[divan::bench(sample_count = 5)]
fn json(b: divan::Bencher) {
    let inp = input();
    b.counter(ItemsCount::new(inp.records)).bench(|| {
        let mut p = JsonPrinter::new(
            &inp.events,
            inp.layout.endian,
            &NoSymbols,
            inp.comms.clone(),
        );
        run(inp, |o, c, t, d| p.write_record(o, c, t, d))
    });
}

#[divan::bench(sample_count = 5)]
fn raw(b: divan::Bencher) {
    let inp = input();
    b.counter(ItemsCount::new(inp.records)).bench(|| {
        run(inp, |o, c, t, d| {
            write_raw(o, &inp.events, inp.layout.endian, c, t, d)
        })
    });
}

fn main() {
    divan::main();
}
