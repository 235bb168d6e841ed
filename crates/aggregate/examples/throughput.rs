//! CPU time of the user engine per million samples (issue 11 asks for at
//! most 0.2 s per million events): count by comm, a log2 histogram of a
//! field by comm, and entry/return latency by comm, each fed 1,000,000
//! samples from 64 threads with 8 names.
//!
//!   cargo run --release -p ktrace-aggregate --example throughput

use ktrace_aggregate::{
    CountAgg, HistAgg, KeySpec, LatencyAgg, LatencyPair, Sample, Scale, Unit, Value,
};
use std::time::Instant;

const N: u64 = 1_000_000;
const COMMS: [&str; 8] = [
    "dd",
    "sh",
    "cat",
    "kworker/0:1",
    "sshd",
    "bash",
    "cc1",
    "ld",
];

fn main() {
    let mut count = CountAgg::new(vec![KeySpec::Comm]);
    let mut hist = HistAgg::new("count", Scale::Log2, vec![KeySpec::Comm]);
    let pair = LatencyPair {
        func: "f".into(),
        entry_event: "g/f".into(),
        return_event: "g/r".into(),
    };
    let mut lat = LatencyAgg::new(vec![pair], Unit::Us, Scale::Log2, vec![KeySpec::Comm]);
    let sample =
        |i: u64, event: &'static str, fields: &'static [(&'static str, Value<'static>)]| Sample {
            ts_ns: i * 1000,
            cpu: (i % 2) as u32,
            pid: (i % 64) as u32,
            tid: (i % 64) as u32,
            comm: COMMS[(i % 8) as usize],
            event,
            func: None,
            stack: None,
            fields,
        };
    static FIELDS: [(&str, Value<'static>); 2] =
        [("fd", Value::S64(3)), ("count", Value::U64(4096))];

    let t = Instant::now();
    for i in 0..N {
        count.add(&sample(i, "g/f", &FIELDS));
    }
    let c = t.elapsed();
    let t = Instant::now();
    for i in 0..N {
        hist.add(&sample(i, "g/f", &FIELDS));
    }
    let h = t.elapsed();
    let t = Instant::now();
    // 500,000 entry/return pairs: 1,000,000 samples
    for i in 0..N / 2 {
        lat.add(&sample(i, "g/f", &[]));
        lat.add(&Sample {
            ts_ns: i * 1000 + 500,
            ..sample(i, "g/r", &[])
        });
    }
    let l = t.elapsed();
    assert_eq!(count.report().total, N);
    assert_eq!(
        lat.report()
            .hist
            .groups
            .iter()
            .map(|g| g.1.stats.count)
            .sum::<u64>(),
        N / 2
    );
    println!(
        "per million samples: count {:.3} s, hist {:.3} s, latency {:.3} s",
        c.as_secs_f64(),
        h.as_secs_f64(),
        l.as_secs_f64()
    );
}
