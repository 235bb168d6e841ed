//! ktrace-aggregate: counts, histograms and latency without BPF — in the
//! kernel (hist triggers and synthetic events, [`kernel`], read back by
//! [`khist`]) or in ktrace from the decoded event stream ([`agg`]) — and
//! their output: terminal and JSON ([`render`]), Prometheus ([`prom`],
//! [`server`]).
//!
//! Mirrors Documentation/trace/histogram.rst and
//! kernel/trace/trace_events_hist.c (trigger syntax, the `hist` file's
//! format). It does not open tracefs (the binary writes the commands this
//! crate generates through ktrace-tracefs) and does not read the ring
//! buffer (the stream does, and hands [`Sample`]s over).
//!
//! # Wiring the user engine as a stream sink
//!
//! For each decoded record build a [`Sample`]: `ts_ns` = the record's time
//! stamp, `cpu` = its CPU, `tid` = `common_pid`, `pid` = the tgid (from
//! `/proc/TID/status` or the saved tgids; the tid when unknown), `comm` =
//! the comm lookup, `event` = `GROUP/EVENT`, `func` = the probed function
//! when a wildcard/fprobe event names it (else `None`), `stack` = the
//! symbolized stack record that followed it (else `None`), `fields` = the
//! decoded probe fields mapped to [`Value`] (unsigned and hex → `U64`,
//! signed → `S64`, strings → `Str`; arrays and bitfields as their numbers or
//! left out). Then call `add` on the aggregator; `lost(cpu, n)` →
//! `lost(n)`; at each interval `report()` then `reset()`; at finish
//! `report()`.

pub mod agg;
pub mod error;
pub mod hist;
pub mod kernel;
pub mod key;
pub mod khist;
pub mod prom;
pub mod render;
pub mod sample;
pub mod server;

pub use agg::{CountAgg, CountReport, HistAgg, HistReport, LatencyAgg, LatencyPair, LatencyReport};
pub use error::{Error, Result};
pub use hist::{Histogram, Scale, Stats, Unit};
pub use key::{FieldInfo, FieldKind, Key, KeySpec, KeyValue};
pub use sample::{Sample, Value};
