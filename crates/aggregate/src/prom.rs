//! Prometheus text exposition format (version 0.0.4) of the reports:
//! counters with `_total`, histograms as cumulative `_bucket{le="..."}`,
//! `_sum` and `_count`, and the loss counters (lost events, kernel table
//! drops, unmatched returns, kretprobe misses).
//!
//! Buckets hold integers, so a bucket `[lo, hi)` is `le="hi-1"` exactly
//! (the negative bucket is `le="-1"`), listed from the first to the last
//! non-empty bucket of each series, then `+Inf`. Prometheus wants counters
//! that only grow: serve reports of an aggregator that is never reset.
//! This is the format only; [`crate::server`] serves it.

use crate::agg::{CountReport, HistReport, LatencyReport};
use crate::hist::Unit;
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

/// A label name for a key: sanitized, and kept off the names Prometheus
/// reserves (`__` prefix) or ours uses (`le`).
pub fn label_name(key: &str) -> String {
    let n = sanitize_name(key);
    if n.starts_with("__") || n == "le" {
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

/// Hits per key as counter `name` (which should end in `_total`).
pub fn count_metrics(out: &mut String, name: &str, help: &str, r: &CountReport) {
    head(out, name, help, "counter");
    for (key, n) in &r.rows {
        let _ = writeln!(out, "{name}{} {n}", labels(&r.keys, key, None));
    }
}

/// Histograms per key as histogram `name`.
pub fn hist_metrics(out: &mut String, name: &str, help: &str, r: &HistReport) {
    hist_family(out, name, help, r, 0);
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

fn hist_family(out: &mut String, name: &str, help: &str, r: &HistReport, decimals: u32) {
    head(out, name, help, "histogram");
    for (key, h) in &r.groups {
        let mut cum = 0u64;
        if let (Some((&first, _)), Some((&last, _))) =
            (h.buckets.first_key_value(), h.buckets.last_key_value())
        {
            for i in first..=last {
                cum += h.buckets.get(&i).copied().unwrap_or(0);
                let le = decimal(h.scale.bounds(i).1 - 1, decimals);
                let _ = writeln!(
                    out,
                    "{name}_bucket{} {cum}",
                    labels(&r.keys, key, Some(("le", &le)))
                );
            }
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            labels(&r.keys, key, Some(("le", "+Inf"))),
            h.stats.count
        );
        let _ = writeln!(
            out,
            "{name}_sum{} {}",
            labels(&r.keys, key, None),
            decimal(h.stats.sum, decimals)
        );
        let _ = writeln!(
            out,
            "{name}_count{} {}",
            labels(&r.keys, key, None),
            h.stats.count
        );
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
        for v in [-2, 0, 1, 3, 3, 9] {
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
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"-0.000001\"} 1
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0\"} 2
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000001\"} 3
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000003\"} 5
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000007\"} 5
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"0.000015\"} 6
ktrace_latency_seconds_bucket{key_le=\"1\",le=\"+Inf\"} 6
ktrace_latency_seconds_sum{key_le=\"1\"} 0.000014
ktrace_latency_seconds_count{key_le=\"1\"} 6
";
        assert!(out.starts_with(want), "{out}");
        assert!(out.contains("\nktrace_unmatched_returns_total 2\n"));
        assert!(out.contains("\nktrace_kretprobe_misses_total 4\n"));
        assert!(out.contains("\nktrace_lost_events_total 1\n"));
    }
}
