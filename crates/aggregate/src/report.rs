//! One report of any aggregation ([`Report`]: counts, a histogram or
//! latency) and the user engine's aggregator of any of them ([`UserAgg`]),
//! so a command handles the three alike: per-interval differences,
//! terminal and JSON text, the Prometheus exposition.
//!
//! It renders through [`crate::render`] and [`crate::prom`] (folded
//! stacks, for counts only, are [`crate::folded`]'s); it reads nothing and
//! prints nothing. The kernel engine's reports come from
//! [`crate::kernel`]'s plans, the user engine's from [`UserAgg::report`].

use crate::agg::{
    CountAgg, CountReport, HistAgg, HistReport, LatencyAgg, LatencyPair, LatencyReport,
};
use crate::hist::{Histogram, Scale, Unit};
use crate::key::{Key, KeySpec};
use crate::sample::Sample;
use crate::{prom, render};

/// What is aggregated, as [`UserAgg::new`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation<'a> {
    /// Hits per key.
    Count,
    /// The distribution of a field.
    Hist {
        /// The field.
        field: &'a str,
        /// Buckets.
        scale: Scale,
    },
    /// Entry-to-return time of functions.
    Latency {
        /// Buckets.
        scale: Scale,
        /// Unit.
        unit: Unit,
    },
}

/// One report of any job.
#[derive(Debug, Clone)]
pub enum Report {
    /// Hits per key.
    Count(CountReport),
    /// The distribution of a field.
    Hist(HistReport),
    /// Entry-to-return time.
    Latency(LatencyReport),
}

impl Report {
    /// The kernel engine's report, stating its tables' size as the cap
    /// (the user engine's reports carry their own).
    pub fn sized(mut self, entries: usize) -> Report {
        match &mut self {
            Report::Count(r) => r.max_keys = entries,
            Report::Hist(r) => r.max_keys = entries,
            Report::Latency(r) => r.hist.max_keys = entries,
        }
        self
    }

    /// What came since `earlier` (of the same kind; else this report).
    pub fn since(&self, earlier: &Report) -> Report {
        match (self, earlier) {
            (Report::Count(a), Report::Count(b)) => Report::Count(a.since(b)),
            (Report::Hist(a), Report::Hist(b)) => Report::Hist(a.since(b)),
            (Report::Latency(a), Report::Latency(b)) => Report::Latency(a.since(b)),
            (a, _) => a.clone(),
        }
    }

    /// The terminal table, bars `width` wide; counts only the `top` rows.
    pub fn text(&self, out: &mut String, width: usize, top: Option<u64>) {
        match self {
            Report::Count(r) => match top {
                Some(n) => render::count_text(out, &r.clone().top(n as usize)),
                None => render::count_text(out, r),
            },
            Report::Hist(r) => render::hist_text(out, r, width),
            Report::Latency(r) => render::latency_text(out, r, width),
        }
    }

    /// The JSON document; counts only the `top` rows.
    pub fn json(&self, out: &mut String, unix_ns: u64, interval_ns: Option<u64>, top: Option<u64>) {
        match self {
            Report::Count(r) => match top {
                Some(n) => {
                    render::count_json(out, &r.clone().top(n as usize), unix_ns, interval_ns)
                }
                None => render::count_json(out, r, unix_ns, interval_ns),
            },
            Report::Hist(r) => render::hist_json(out, r, unix_ns, interval_ns),
            Report::Latency(r) => render::latency_json(out, r, unix_ns, interval_ns),
        }
    }

    /// This report with an empty series (no hits) for each key of `series`
    /// it does not have, so that Prometheus sees every probe from the
    /// first scrape, each histogram on its whole ladder with zero counts
    /// (a key of another length than the report's keys is ignored).
    pub fn with_series(mut self, series: &[Key]) -> Report {
        let fits = |keys: &[String], k: &Key| k.len() == keys.len();
        match &mut self {
            Report::Count(r) => {
                for k in series {
                    if fits(&r.keys, k) && !r.rows.iter().any(|(x, _)| x == k) {
                        r.rows.push((k.clone(), 0));
                    }
                }
            }
            Report::Hist(r) | Report::Latency(LatencyReport { hist: r, .. }) => {
                let missing: Vec<(Key, Histogram)> = series
                    .iter()
                    .filter(|k| fits(&r.keys, k) && !r.groups.iter().any(|(x, _)| x == *k))
                    .map(|k| (k.clone(), Histogram::new(r.scale)))
                    .collect();
                if !missing.is_empty() {
                    let mut all = std::mem::take(&mut r.groups);
                    all.extend(missing);
                    r.set_groups(all);
                }
            }
        }
        self
    }

    /// The Prometheus text of the report (a histogram's metric named after
    /// `field`), losses included.
    pub fn prometheus(&self, field: Option<&str>) -> String {
        let mut out = String::new();
        let losses = match self {
            Report::Count(r) => {
                prom::count_metrics(&mut out, "ktrace_hits_total", "probe hits", r);
                prom::Losses::of_count(r)
            }
            Report::Hist(r) => {
                let f = field.unwrap_or("value");
                prom::hist_metrics(
                    &mut out,
                    &prom::hist_name(f),
                    &format!("distribution of {f}"),
                    r,
                );
                prom::Losses::of_hist(r)
            }
            Report::Latency(r) => {
                prom::latency_metrics(&mut out, r);
                prom::Losses::of_latency(r)
            }
        };
        prom::loss_metrics(&mut out, &losses);
        out
    }
}

/// The keys of what Prometheus serves: the probe (its event name), the
/// function unless `keys` has it, then `keys`, so every series says which
/// probe and function it is about, in both engines.
pub fn prom_keys(keys: &[KeySpec]) -> Vec<KeySpec> {
    let mut out = vec![KeySpec::Probe];
    if !keys.contains(&KeySpec::Func) {
        out.push(KeySpec::Func);
    }
    out.extend(keys.iter().filter(|k| **k != KeySpec::Probe).cloned());
    out
}

/// The user engine's aggregator.
#[derive(Debug, Clone)]
pub enum UserAgg {
    /// Hits per key.
    Count(CountAgg),
    /// The distribution of a field.
    Hist(HistAgg),
    /// Entry-to-return time.
    Latency(LatencyAgg),
}

impl UserAgg {
    /// The aggregator of `what` by `keys` keeping `max_keys`; with `prom`,
    /// the one Prometheus serves ([`prom_keys`]: every series names its
    /// probe and function), in power-of-two buckets whatever the scale
    /// asked for (the fixed ladder every scrape lists), latency measured in
    /// nanoseconds (its bounds below 16 us are then distinct and exact).
    pub fn new(
        what: Aggregation<'_>,
        pairs: Vec<LatencyPair>,
        keys: &[KeySpec],
        max_keys: usize,
        prom: bool,
    ) -> UserAgg {
        let keys = if prom { prom_keys(keys) } else { keys.to_vec() };
        match what {
            Aggregation::Count => UserAgg::Count(CountAgg::new(keys).with_max_keys(max_keys)),
            Aggregation::Hist { field, scale } => {
                let scale = if prom { Scale::Log2 } else { scale };
                UserAgg::Hist(HistAgg::new(field, scale, keys).with_max_keys(max_keys))
            }
            Aggregation::Latency { scale, unit } => {
                let (unit, scale) = if prom {
                    (Unit::Ns, Scale::Log2)
                } else {
                    (unit, scale)
                };
                UserAgg::Latency(LatencyAgg::new(pairs, unit, scale, keys).with_max_keys(max_keys))
            }
        }
    }

    /// Whether keys beyond `max_keys` were counted as other.
    pub fn overflowed(&self) -> bool {
        match self {
            UserAgg::Count(a) => a.overflowed(),
            UserAgg::Hist(a) => a.overflowed(),
            UserAgg::Latency(a) => a.overflowed(),
        }
    }

    /// One sample in.
    pub fn add(&mut self, s: &Sample<'_>) {
        match self {
            UserAgg::Count(a) => a.add(s),
            UserAgg::Hist(a) => a.add(s),
            UserAgg::Latency(a) => a.add(s),
        }
    }

    /// `n` events the ring buffer lost.
    pub fn lost(&mut self, n: u64) {
        match self {
            UserAgg::Count(a) => a.lost(n),
            UserAgg::Hist(a) => a.lost(n),
            UserAgg::Latency(a) => a.lost(n),
        }
    }

    /// The report so far; latency with the kretprobes' `misses` when known.
    pub fn report(&mut self, misses: Option<u64>) -> Report {
        match self {
            UserAgg::Count(a) => Report::Count(a.report()),
            UserAgg::Hist(a) => Report::Hist(a.report()),
            UserAgg::Latency(a) => {
                if let Some(m) = misses {
                    a.set_kretprobe_misses(m);
                }
                Report::Latency(a.report())
            }
        }
    }

    /// Starts the next interval from nothing.
    pub fn reset(&mut self) {
        match self {
            UserAgg::Count(a) => a.reset(),
            UserAgg::Hist(a) => a.reset(),
            UserAgg::Latency(a) => a.reset(),
        }
    }
}
