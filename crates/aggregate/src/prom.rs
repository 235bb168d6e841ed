//! Prometheus text exposition format (version 0.0.4) of the reports:
//! counters with `_total`, histograms as cumulative `_bucket{le="..."}`,
//! `_sum` and `_count`, and the loss counters (lost events, kernel table
//! drops, unmatched returns, kretprobe misses).
//!
//! Buckets hold integers, so a bucket `[lo, hi)` is `le="hi-1"` exactly
//! (the negative bucket is `le="-1"`). Every series of a family has the
//! same, fixed ladder of bounds, so a bound never appears mid-run (which
//! breaks `rate()` and `histogram_quantile()` over the change): for power
//! of two buckets all of them, `[0]`, `[1]`, `[2, 4)` ... `[2^63, 2^64)`
//! (and the negative bucket for a field; a latency is never negative),
//! 65 or 66 bounds from 1 ns to 584 years; for linear buckets the run of
//! buckets from 0 (or the lowest negative one) to the highest seen in any
//! series — open-ended by nature, so it grows at its top only, and past
//! [`MAX_LINEAR_BOUNDS`] buckets only the bounds some series has are
//! listed: the binary therefore serves power-of-two reports only, whatever
//! `--linear` says. Then `+Inf`. Latency is in seconds, written exactly
//! from the unit it was measured in (the binary measures in nanoseconds
//! for Prometheus, so bounds below 16 µs are distinct and exact).
//!
//! Keys beyond the aggregator's cap are one more series labelled
//! `other="true"` (so a sum over the family is still the total); a key
//! named `other` (or `le`, or `__...`) gets a `key_` label name.
//! Prometheus wants counters that only grow: serve reports of an
//! aggregator that is never reset. This is the format only;
//! [`crate::server`] serves it.

use crate::agg::{CountReport, HistReport, LatencyReport};
use crate::hist::{Scale, Unit};
use crate::key::{Key, KeyValue};
use std::fmt::Write;

/// A metric or label name made valid (`[a-zA-Z_][a-zA-Z0-9_]*`): other
/// characters become `_`, a leading digit gets a `_` before it.
pub fn sanitize_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Linear buckets listed one by one at most; beyond, only those a series
/// has.
pub const MAX_LINEAR_BOUNDS: i128 = 1024;

/// A label name for a key: sanitized, and kept off the names Prometheus
/// reserves (`__` prefix) or ours uses (`le`, `other`).
pub fn label_name(key: &str) -> String {
    let n = sanitize_name(key);
    if n.starts_with("__") || n == "le" || n == "other" {
        format!("key_{}", n.trim_start_matches('_'))
    } else {
        n
    }
}

/// Escape a label value: backslash, double quote and newline.
pub fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Escape HELP text: backslash and newline.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn labels(names: &[String], key: &Key, extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(key)
        .map(|(n, v)| {
            let v = match v {
                KeyValue::Stack(frames) => frames.join(";"),
                v => v.to_string(),
            };
            format!("{}=\"{}\"", label_name(n), escape_label(&v))
        })
        .collect();
    if let Some((n, v)) = extra {
        parts.push(format!("{n}=\"{}\"", escape_label(v)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn head(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A single counter.
pub fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    head(out, name, help, "counter");
    let _ = writeln!(out, "{name} {value}");
}

/// `{other="true"}` with `extra` after it.
fn other_labels(extra: Option<(&str, &str)>) -> String {
    match extra {
        Some((n, v)) => format!("{{other=\"true\",{n}=\"{}\"}}", escape_label(v)),
        None => "{other=\"true\"}".to_string(),
    }
}

/// Hits per key as counter `name` (which should end in `_total`), and
/// the hits of keys beyond the cap as the `other="true"` series.
pub fn count_metrics(out: &mut String, name: &str, help: &str, r: &CountReport) {
    head(out, name, help, "counter");
    for (key, n) in &r.rows {
        let _ = writeln!(out, "{name}{} {n}", labels(&r.keys, key, None));
    }
    if r.other > 0 {
        let _ = writeln!(out, "{name}{} {}", other_labels(None), r.other);
    }
}

/// Histograms per key as histogram `name` (a field's: the negative
/// bucket is on its ladder).
pub fn hist_metrics(out: &mut String, name: &str, help: &str, r: &HistReport) {
    hist_family(out, name, help, r, 0, true);
}

/// `v / 10^decimals` written exactly (`1023`, 6 → `0.001023`).
pub fn decimal(v: i128, decimals: u32) -> String {
    if decimals == 0 {
        return v.to_string();
    }
    let p = 10i128.pow(decimals);
    let sign = if v < 0 { "-" } else { "" };
    let (int, frac) = (
        v.unsigned_abs() / p.unsigned_abs(),
        v.unsigned_abs() % p.unsigned_abs(),
    );
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{sign}{int}.{}", frac.trim_end_matches('0'))
}

/// The bucket indexes every series of the family lists (see the module
/// documentation).
fn ladder(r: &HistReport, negative: bool) -> Vec<i128> {
    let all = r.groups.iter().map(|g| &g.1).chain(r.other.as_ref());
    match r.scale {
        Scale::Log2 => (if negative { -1 } else { 0 }..=64).collect(),
        Scale::Linear { .. } => {
            let seen: std::collections::BTreeSet<i128> =
                all.flat_map(|h| h.buckets.keys().copied()).collect();
            let (Some(&lo), Some(&hi)) = (seen.first(), seen.last()) else {
                return Vec::new();
            };
            let lo = lo.min(0);
            if hi - lo < MAX_LINEAR_BOUNDS {
                (lo..=hi).collect()
            } else {
                seen.into_iter().collect()
            }
        }
    }
}

fn hist_family(
    out: &mut String,
    name: &str,
    help: &str,
    r: &HistReport,
    decimals: u32,
    negative: bool,
) {
    head(out, name, help, "histogram");
    let ladder = ladder(r, negative);
    let series = r
        .groups
        .iter()
        .map(|(k, h)| (Some(k), h))
        .chain(r.other.as_ref().map(|h| (None, h)));
    for (key, h) in series {
        let l = |extra: Option<(&str, &str)>| match key {
            Some(k) => labels(&r.keys, k, extra),
            None => other_labels(extra),
        };
        let mut cum = 0u64;
        for &i in &ladder {
            cum += h.buckets.get(&i).copied().unwrap_or(0);
            let le = decimal(h.scale.bounds(i).1 - 1, decimals);
            let _ = writeln!(out, "{name}_bucket{} {cum}", l(Some(("le", &le))));
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            l(Some(("le", "+Inf"))),
            h.stats.count
        );
        let _ = writeln!(
            out,
            "{name}_sum{} {}",
            l(None),
            decimal(h.stats.sum, decimals)
        );
        let _ = writeln!(out, "{name}_count{} {}", l(None), h.stats.count);
    }
}

/// Latency histograms as `ktrace_latency_seconds` (Prometheus' base unit;
/// values converted exactly from the measured unit, so a microsecond
/// bucket `[1024, 2048)` is `le="0.002047"`); the pairing counters are in
/// [`Losses::of_latency`].
pub fn latency_metrics(out: &mut String, r: &LatencyReport) {
    let (decimals, unit) = match r.hist.unit {
        Some(Unit::Ns) => (9, "ns"),
        Some(Unit::Us) => (6, "us"),
        Some(Unit::Ms) => (3, "ms"),
        None => (0, "seconds"),
    };
    hist_family(
        out,
        "ktrace_latency_seconds",
        &format!("function latency in seconds (measured in {unit})"),
        &r.hist,
        decimals,
        false,
    );
}

/// The loss counters of everything exposed, written once per scrape (a
/// metric family may appear only once): sum the reports' [`Losses`] and
/// call [`loss_metrics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Losses {
    /// Events lost in the ring buffer.
    pub lost: u64,
    /// Events the kernel's hist tables had no room for.
    pub dropped: u64,
    /// Returns without an entry (latency only).
    pub unmatched_returns: Option<u64>,
    /// kretprobe misses (latency only, when known).
    pub kretprobe_misses: Option<u64>,
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

impl Losses {
    /// Of a count report.
    pub fn of_count(r: &CountReport) -> Losses {
        Losses {
            lost: r.lost,
            dropped: r.dropped,
            ..Losses::default()
        }
    }

    /// Of a histogram report.
    pub fn of_hist(r: &HistReport) -> Losses {
        Losses {
            lost: r.lost,
            dropped: r.dropped,
            ..Losses::default()
        }
    }

    /// Of a latency report.
    pub fn of_latency(r: &LatencyReport) -> Losses {
        Losses {
            lost: r.hist.lost,
            dropped: r.hist.dropped,
            unmatched_returns: Some(r.unmatched_returns),
            kretprobe_misses: r.kretprobe_misses,
        }
    }
}

impl std::ops::Add for Losses {
    type Output = Losses;

    /// Both together.
    fn add(self, o: Losses) -> Losses {
        Losses {
            lost: self.lost + o.lost,
            dropped: self.dropped + o.dropped,
            unmatched_returns: add_opt(self.unmatched_returns, o.unmatched_returns),
            kretprobe_misses: add_opt(self.kretprobe_misses, o.kretprobe_misses),
        }
    }
}

/// The loss counters: lost and dropped events always, unmatched returns
/// and kretprobe misses when known.
pub fn loss_metrics(out: &mut String, l: &Losses) {
    counter(
        out,
        "ktrace_lost_events_total",
        "events lost in the ring buffer",
        l.lost,
    );
    counter(
        out,
        "ktrace_dropped_events_total",
        "events the kernel hist table had no room for",
        l.dropped,
    );
    if let Some(n) = l.unmatched_returns {
        counter(
            out,
            "ktrace_unmatched_returns_total",
            "returns without an entry of the same function on the same thread",
            n,
        );
    }
    if let Some(n) = l.kretprobe_misses {
        counter(
            out,
            "ktrace_kretprobe_misses_total",
            "returns the kernel missed (kretprobe maxactive exhausted)",
            n,
        );
    }
}

/// The metric name for a histogram of probe field `field`.
pub fn hist_name(field: &str) -> String {
    format!("ktrace_{}", sanitize_name(field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{Histogram, Scale};

    #[test]
    fn names_and_escaping() {
        let table = [
            ("comm", "comm"),
            ("fd", "fd"),
            ("a.b-c", "a_b_c"),
            ("1x", "_1x"),
            ("", "_"),
        ];
        for (i, o) in table {
            assert_eq!(sanitize_name(i), o, "{i}");
        }
        assert_eq!(label_name("le"), "key_le");
        assert_eq!(label_name("__name__"), "key_name__");
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape_help("x\\y\nz"), "x\\\\y\\nz");
    }

    #[test]
    fn decimals_are_exact() {
        let table = [
            (0, 6, "0"),
            (1, 6, "0.000001"),
            (2047, 6, "0.002047"),
            (1_000_000, 6, "1"),
            (1_500_000, 6, "1.5"),
            (-1, 9, "-0.000000001"),
            (42, 0, "42"),
            (-3, 0, "-3"),
        ];
        for (v, d, want) in table {
            assert_eq!(decimal(v, d), want, "{v} {d}");
        }
    }

    #[test]
    fn count_exposition() {
        let mut r = CountReport::new(
            vec!["comm".into(), "stack".into()],
            vec![
                (
                    vec![
                        KeyValue::Str("dd".into()),
                        KeyValue::Stack(vec!["a+0x1/0x2".into(), "b".into()]),
                    ],
                    100,
                ),
                (
                    vec![KeyValue::Str("we\"ird\\\n".into()), KeyValue::Missing],
                    2,
                ),
            ],
        );
        r.lost = 3;
        let mut out = String::new();
        count_metrics(&mut out, "ktrace_hits_total", "probe hits", &r);
        loss_metrics(&mut out, &Losses::of_count(&r));
        assert_eq!(
            out,
            "# HELP ktrace_hits_total probe hits
# TYPE ktrace_hits_total counter
ktrace_hits_total{comm=\"dd\",stack=\"a+0x1/0x2;b\"} 100
ktrace_hits_total{comm=\"we\\\"ird\\\\\\n\",stack=\"-\"} 2
# HELP ktrace_lost_events_total events lost in the ring buffer
# TYPE ktrace_lost_events_total counter
ktrace_lost_events_total 3
# HELP ktrace_dropped_events_total events the kernel hist table had no room for
# TYPE ktrace_dropped_events_total counter
ktrace_dropped_events_total 0
"
        );
    }

    #[test]
    fn histogram_exposition_is_cumulative() {
        let mut h = Histogram::new(Scale::Log2);
        for v in [0, 1, 3, 3, 9] {
            h.record(v);
        }
        let mut r = HistReport::new("latency", Some(Unit::Us), Scale::Log2, vec!["le".into()]);
        r.set_groups(vec![(vec![KeyValue::U64(1)], h)]);
        let lr = LatencyReport {
            hist: r,
            unmatched_returns: 2,
            discarded_entries: None,
            backwards: None,
            in_flight: None,
            kretprobe_misses: Some(4),
        };
        let mut out = String::new();
        latency_metrics(&mut out, &lr);
        loss_metrics(
            &mut out,
            &(Losses::of_latency(&lr)
                + Losses {
                    lost: 1,
                    ..Losses::default()
                }),
        );
        let want = "# HELP ktrace_latency_seconds function latency in seconds (measured in us)
# TYPE ktrace_latency_seconds histogram
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0\"} 1
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000001\"} 2
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000003\"} 4
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000007\"} 4
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000015\"} 5
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000031\"} 5
";
        assert!(out.starts_with(want), "{out}");
        // the whole ladder, every bucket of a u64, then +Inf
        assert!(
            out.contains(
                "ktrace_latency_seconds_bucket{key_le=\"1\",le=\"18446744073709.551615\"} 5\n\
                 ktrace_latency_seconds_bucket{key_le=\"1\",le=\"+Inf\"} 5\n\
                 ktrace_latency_seconds_sum{key_le=\"1\"} 0.000016\n\
                 ktrace_latency_seconds_count{key_le=\"1\"} 5\n"
            ),
            "{out}"
        );
        assert_eq!(out.matches("_bucket{").count(), 65 + 1, "{out}");
        assert!(out.contains("\nktrace_unmatched_returns_total 2\n"));
        assert!(out.contains("\nktrace_kretprobe_misses_total 4\n"));
        assert!(out.contains("\nktrace_lost_events_total 1\n"));
    }

    /// Regression (issue 21 item 8): a family listed only the buckets seen
    /// so far, so its set of bounds grew during the run. Every series now
    /// has the same, fixed ladder: a field's with its negative bucket, a
    /// linear one from 0 to the highest bucket of any series; keys
    /// beyond the cap are the `other="true"` series.
    #[test]
    fn every_series_has_the_same_ladder() {
        let mut a = Histogram::new(Scale::Log2);
        a.record(5);
        let mut b = Histogram::new(Scale::Log2);
        b.record(-3);
        b.record(1 << 40);
        let mut r = HistReport::new("ret", None, Scale::Log2, vec!["comm".into()]);
        r.set_groups(vec![
            (vec![KeyValue::Str("a".into())], a.clone()),
            (vec![KeyValue::Str("b".into())], b),
        ]);
        r.other = Some(a);
        let mut out = String::new();
        hist_metrics(&mut out, "ktrace_ret", "x", &r);
        let les = |series: &str| -> Vec<String> {
            out.lines()
                .filter(|l| l.starts_with(&format!("ktrace_ret_bucket{{{series}")))
                .map(|l| {
                    l.split("le=\"")
                        .nth(1)
                        .unwrap()
                        .split('"')
                        .next()
                        .unwrap()
                        .to_string()
                })
                .collect()
        };
        let (la, lb, lo) = (les("comm=\"a\""), les("comm=\"b\""), les("other=\"true\""));
        assert_eq!(la, lb);
        assert_eq!(la, lo);
        assert_eq!(la.len(), 66 + 1);
        assert_eq!(la[0], "-1");
        assert_eq!(la[1], "0");
        assert_eq!(la[65], "18446744073709551615");
        assert!(
            out.contains("ktrace_ret_bucket{other=\"true\",le=\"7\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("ktrace_ret_count{other=\"true\"} 1\n"),
            "{out}"
        );

        // linear: one run of buckets shared by the series
        let s = Scale::Linear { step: 10 };
        let (mut x, mut y) = (Histogram::new(s), Histogram::new(s));
        x.record(5);
        y.record(42);
        let mut r = HistReport::new("n", None, s, vec!["k".into()]);
        r.set_groups(vec![
            (vec![KeyValue::U64(1)], x),
            (vec![KeyValue::U64(2)], y),
        ]);
        let mut out = String::new();
        hist_metrics(&mut out, "ktrace_n", "x", &r);
        for k in ["1", "2"] {
            let got: Vec<&str> = out
                .lines()
                .filter(|l| l.starts_with(&format!("ktrace_n_bucket{{k=\"{k}\"")))
                .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
                .collect();
            assert_eq!(got, ["9", "19", "29", "39", "49", "+Inf"], "{k}");
        }

        // counts: the other series
        let c = CountReport::new(
            vec!["other".into()],
            vec![(vec![KeyValue::Str("x".into())], 3)],
        )
        .with_other(7, 1);
        let mut out = String::new();
        count_metrics(&mut out, "ktrace_hits_total", "h", &c);
        assert!(
            out.contains("ktrace_hits_total{key_other=\"x\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("ktrace_hits_total{other=\"true\"} 7\n"),
            "{out}"
        );
    }
}
