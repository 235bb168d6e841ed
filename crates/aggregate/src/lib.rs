//! ktrace-aggregate: counts, histograms and latency without BPF — in the
//! kernel (hist triggers and synthetic events, [`kernel`], read back by
//! [`khist`]) or in ktrace from the decoded event stream ([`agg`]) — and
//! their output: terminal and JSON ([`render`]), folded stacks for flame
//! graphs ([`folded`]), Prometheus ([`prom`],
//! [`server`]).
//!
//! Mirrors Documentation/trace/histogram.rst and
//! kernel/trace/trace_events_hist.c (trigger syntax, the `hist` file's
//! format). It does not open tracefs (the binary writes the commands this
//! crate generates through ktrace-tracefs) and does not read the ring
//! buffer (the stream does, and its decoded events reach [`sink::AggSink`],
//! which makes them [`Sample`]s).
//!
//! # Wiring the user engine as a stream sink
//!
//! [`sink::AggSink`] is that sink, feeding a [`UserAgg`] (the three
//! aggregators as one, their [`Report`]s alike). What it does:
//! for each decoded record build a [`Sample`]: `ts_ns` = the record's time
//! stamp, `cpu` = its CPU, `tid` = `common_pid`, `pid` = the tgid (from
//! `/proc/TID/status` or the saved tgids; the tid when unknown), `comm` =
//! the comm lookup, `event` = `GROUP/EVENT`, `func` = the probed function
//! when a wildcard/fprobe event names it (else `None`), `stack` = the
//! symbolized stack record that followed it (else `None`), `fields` = the
//! decoded probe fields mapped to [`Value`] (unsigned and hex → `U64`,
//! signed → `S64`, strings → `Str`; arrays and bitfields as their numbers or
//! left out). Then call `add` on the aggregator; `lost(cpu, n)` →
//! `lost(n)`; at each interval `report()` then `reset()`; at finish
//! `report()`. For Prometheus keep a second aggregator that is never reset
//! (counters must only grow), keyed by `func` first and timing latency in
//! nanoseconds, and render it in the server's closure. Every aggregator
//! keeps at most `with_max_keys(N)` keys ([`agg::DEFAULT_MAX_KEYS`]); the
//! rest goes to one other bucket, and `overflowed()` says when.
//! Latency: one [`LatencyPair`] per function (entry and return event
//! names); set the return probes' kretprobe misses from `kprobe_profile`
//! ([`khist::parse_kprobe_profile`]) before each report.
//!
//! # Wiring the kernel engine
//!
//! 1. [`kernel::Features::from_readme`] on the instance's README.
//! 2. [`kernel::plan_count`] / [`kernel::plan_hist`] /
//!    [`kernel::plan_latency`]; `Err(Unsupported)` means "use the user
//!    engine" (with the reason), an [`Error`] is bad input (before anything
//!    is written).
//! 3. Write `plan.setup` in order ([`kernel::Step::install_text`]:
//!    synthetic events to `dynamic_events`, or `synthetic_events` when the
//!    README has no `s:`; triggers to the instance's
//!    `events/SYSTEM/EVENT/trigger`). Triggers count from the moment they
//!    are written, enabled or not.
//! 4. At each interval read the `hist` file(s), [`khist::parse_hist`],
//!    [`kernel::find_table`] with the plan's command, then `plan.report`
//!    (a latency plan names its tables: `main`, `min`, `prom`, and the
//!    chain `entry`, `ret`, `derive` whose drops it reports). Check the
//!    triggers are still there with [`kernel::trigger_state`] on each
//!    event's `trigger` file: someone else may remove or pause them.
//!    Kernel tables only grow: per-interval numbers are the difference of
//!    two reads (or append `:clear` through a trigger write).
//! 5. On every exit write `plan.teardown()` in order
//!    ([`kernel::Step::remove_text`]), before deleting the probes.

pub mod agg;
pub mod error;
pub mod folded;
pub mod hist;
pub mod kernel;
pub mod key;
pub mod khist;
pub mod prom;
pub mod render;
pub mod report;
pub mod sample;
pub mod server;
pub mod sink;

pub use agg::{CountAgg, CountReport, HistAgg, HistReport, LatencyAgg, LatencyPair, LatencyReport};
pub use error::{Error, Result};
pub use hist::{Histogram, Scale, Stats, Unit};
pub use key::{FieldInfo, FieldKind, Key, KeySpec, KeyValue};
pub use report::{Aggregation, Report, UserAgg};
pub use sample::{Sample, Value};
pub use sink::{AggSink, UserState};
