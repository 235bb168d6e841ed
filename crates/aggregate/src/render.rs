//! Terminal and JSON output of the reports.
//!
//! Text follows the histograms people know from bpftrace and bcc: one row
//! per bucket from the first to the last non-empty one (empty ones between
//! included), the range, the count and a bar of `@` scaled to the largest
//! bucket, then count, sum, average and extremes under each histogram.
//! Counts print as a table, most hits first. With `-i`, each interval is a
//! block opened by [`interval_header`]. JSON is one document per interval
//! ([`count_json`], [`hist_json`], [`latency_json`]) with units and bucket
//! bounds (`lo` inclusive, `hi` exclusive, `lo` null for the negative
//! bucket). It is not the Prometheus format ([`crate::prom`]).
//!
//! Key values come from the traced programs and may hold anything: in the
//! terminal tables every control character (C0, DEL, C1: a newline that
//! would fake a row, an ESC that would drive the terminal) and the
//! backslash are written as escapes ([`escape_text`]), as JSON and
//! Prometheus escape them in theirs. (`ktrace trace` prints what the
//! kernel's `trace` file prints, byte for byte; these tables are ktrace's
//! own.)

use crate::agg::{CountReport, HistReport, LatencyReport};
use crate::hist::{Histogram, Scale, Stats, Unit};
use crate::key::{Key, KeyValue};
use std::fmt::Write;

/// Buckets spanned above which only non-empty rows are printed (a linear
/// histogram of far-apart values would otherwise print millions of rows).
pub const MAX_GAP_ROWS: i128 = 256;

/// `[2026-11-23 11:41:31 UTC]` for a wall-clock time in nanoseconds since
/// the epoch, then a newline.
pub fn interval_header(out: &mut String, unix_ns: u64) {
    let _ = writeln!(out, "[{}]", utc(unix_ns, " ", " UTC"));
}

/// `YYYY-MM-DD{sep}HH:MM:SS{suffix}` (UTC) from nanoseconds since the epoch.
fn utc(unix_ns: u64, sep: &str, suffix: &str) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // civil from days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}{sep}{:02}:{:02}:{:02}{suffix}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `s` safe for a terminal: `\\` for a backslash, `\n`, `\t`, `\r`, and
/// `\xNN` for every other control character (C0, DEL and C1, all below
/// 0x100), so that a traced string can neither fake a row nor send an
/// escape sequence.
pub fn escape_text(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c == '\\' || c.is_control()) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A key value as a table shows it: escaped ([`escape_text`]), stacks
/// folded with `;`.
fn value_text(v: &KeyValue) -> String {
    match v {
        KeyValue::Str(s) => escape_text(s).into_owned(),
        KeyValue::Stack(frames) => frames
            .iter()
            .map(|f| escape_text(f))
            .collect::<Vec<_>>()
            .join(";"),
        v => v.to_string(),
    }
}

/// A key as `k1=v1, k2=v2` (stacks folded with `;`).
fn key_text(names: &[String], key: &Key) -> String {
    names
        .iter()
        .zip(key)
        .map(|(n, v)| format!("{n}={}", value_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The count table.
pub fn count_text(out: &mut String, r: &CountReport) {
    let stack_col = r.keys.iter().position(|k| k == "stack");
    let cols: Vec<usize> = (0..r.keys.len())
        .filter(|i| Some(*i) != stack_col)
        .collect();
    let cw = r
        .rows
        .iter()
        .map(|(_, n)| digits(*n))
        .max()
        .unwrap_or(1)
        .max("COUNT".len());
    let mut widths: Vec<usize> = cols.iter().map(|&i| r.keys[i].len()).collect();
    for (key, _) in &r.rows {
        for (w, &i) in widths.iter_mut().zip(&cols) {
            *w = (*w).max(key.get(i).map_or(1, |v| value_text(v).chars().count()));
        }
    }
    let mut line = format!("{:>cw$}", "COUNT");
    for (j, &i) in cols.iter().enumerate() {
        push_cell(
            &mut line,
            &r.keys[i].to_uppercase(),
            widths[j],
            j + 1 == cols.len(),
        );
    }
    if stack_col.is_some() {
        line.push_str("  STACK");
    }
    out.push_str(line.trim_end());
    out.push('\n');
    for (key, n) in &r.rows {
        let mut line = format!("{n:>cw$}");
        for (j, &i) in cols.iter().enumerate() {
            let v = key.get(i).map_or_else(|| "-".to_string(), value_text);
            push_cell(&mut line, &v, widths[j], j + 1 == cols.len());
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if let Some(KeyValue::Stack(frames)) = stack_col.and_then(|i| key.get(i)) {
            for f in frames {
                let _ = writeln!(out, "{:cw$}    {}", "", escape_text(f));
            }
        }
    }
    let _ = write!(out, "total {} hits, {} keys", r.total, r.distinct);
    if r.rows.len() < r.distinct {
        let _ = write!(out, " (top {} shown)", r.rows.len());
    }
    out.push('\n');
    if r.other > 0 {
        let _ = writeln!(
            out,
            "other {} hits: keys beyond the first {} seen (--max-keys), counted together; \
             the rows are of the kept keys only",
            r.other, r.max_keys
        );
    }
    loss_lines(out, r.lost, r.dropped);
}

fn push_cell(line: &mut String, v: &str, width: usize, last: bool) {
    line.push_str("  ");
    line.push_str(v);
    if !last {
        let n = v.chars().count();
        line.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
    }
}

fn digits(n: u64) -> usize {
    n.to_string().len()
}

fn loss_lines(out: &mut String, lost: u64, dropped: u64) {
    if lost > 0 {
        let _ = writeln!(
            out,
            "lost {lost} events (ring buffer full): the numbers above are short"
        );
    }
    if dropped > 0 {
        let _ = writeln!(
            out,
            "dropped {dropped} events (kernel hist table full): the numbers above are short"
        );
    }
}

/// One histogram's rows (bars `width` wide) and its summary line.
pub fn histogram_text(out: &mut String, h: &Histogram, unit: Option<Unit>, width: usize) {
    let rows = rows(h);
    let lw = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0).max(16);
    let cw = rows
        .iter()
        .map(|(_, c)| digits(*c))
        .max()
        .unwrap_or(1)
        .max(8);
    let max = rows.iter().map(|(_, c)| *c).max().unwrap_or(0);
    for (label, c) in &rows {
        let bar = if max == 0 {
            0
        } else {
            (u128::from(*c) * width as u128 / u128::from(max)) as usize
        };
        let _ = writeln!(
            out,
            "{label:<lw$} {c:>cw$} |{}{}|",
            "@".repeat(bar),
            " ".repeat(width - bar)
        );
    }
    stats_line(out, &h.stats, unit);
}

fn rows(h: &Histogram) -> Vec<(String, u64)> {
    let (Some((&first, _)), Some((&last, _))) =
        (h.buckets.first_key_value(), h.buckets.last_key_value())
    else {
        return Vec::new();
    };
    if last - first >= MAX_GAP_ROWS {
        return h
            .buckets
            .iter()
            .map(|(i, c)| (h.scale.label(*i), *c))
            .collect();
    }
    (first..=last)
        .map(|i| (h.scale.label(i), h.buckets.get(&i).copied().unwrap_or(0)))
        .collect()
}

fn stats_line(out: &mut String, s: &Stats, unit: Option<Unit>) {
    let u = unit.map_or(String::new(), |u| format!(" {u}"));
    let _ = write!(out, "count {}, sum {}{u}", s.count, s.sum);
    if let Some(a) = s.avg_centi() {
        let sign = if a < 0 { "-" } else { "" };
        let _ = write!(out, ", avg {sign}{}.{:02}{u}", a.abs() / 100, a.abs() % 100);
    }
    if let Some(m) = s.min {
        let _ = write!(out, ", min {m}{u}");
    }
    if let Some(m) = s.max {
        let _ = write!(out, ", max {m}{u}");
    }
    out.push('\n');
}

/// Every histogram of the report: a title line (`VALUE` or
/// `VALUE [k=v, ...]`, with the unit), the rows, the summary, a blank line.
pub fn hist_text(out: &mut String, r: &HistReport, width: usize) {
    let unit = r.unit.map_or(String::new(), |u| format!(" ({u})"));
    if r.groups.is_empty() {
        let _ = writeln!(out, "{}{unit}: no events", r.value);
    }
    for (key, h) in &r.groups {
        if r.keys.is_empty() {
            let _ = writeln!(out, "{}{unit}:", r.value);
        } else {
            let _ = writeln!(out, "{}{unit} [{}]:", r.value, key_text(&r.keys, key));
        }
        histogram_text(out, h, r.unit, width);
        out.push('\n');
    }
    if let Some(h) = &r.other {
        let _ = writeln!(
            out,
            "{}{unit} [other: keys beyond the first {} seen (--max-keys), together]:",
            r.value, r.max_keys
        );
        histogram_text(out, h, r.unit, width);
        out.push('\n');
    }
    if r.missing > 0 {
        let _ = writeln!(out, "{} events without a numeric {}", r.missing, r.value);
    }
    loss_lines(out, r.lost, r.dropped);
}

/// The latency histograms, then the pairing counts: unmatched returns
/// always, kretprobe misses where the kernel counts them (kretprobes; a
/// uretprobe has none), the others when not zero.
pub fn latency_text(out: &mut String, r: &LatencyReport, width: usize) {
    hist_text(out, &r.hist, width);
    let _ = write!(out, "unmatched returns {}", r.unmatched_returns);
    if let Some(n) = r.kretprobe_misses {
        let _ = write!(out, ", kretprobe misses {n}");
    }
    if let Some(n) = r.in_flight.filter(|n| *n > 0) {
        let _ = write!(out, ", in flight {n}");
    }
    if let Some(n) = r.discarded_entries.filter(|n| *n > 0) {
        let _ = write!(out, ", entries without return {n}");
    }
    if let Some(n) = r.backwards.filter(|n| *n > 0) {
        let _ = write!(out, ", returns before entry {n}");
    }
    out.push('\n');
    // Without loss, unpaired events are the edges of the run, not missing
    // data: a call under way when the probes were switched on (its entry
    // or its return probe was not live yet) or still running at the end.
    let unpaired = r.unmatched_returns > 0 || r.in_flight.is_some_and(|n| n > 0);
    let lost = r.hist.lost > 0
        || r.hist.dropped > 0
        || r.kretprobe_misses.is_some_and(|n| n > 0)
        || r.discarded_entries.is_some_and(|n| n > 0);
    if unpaired && !lost {
        out.push_str(
            "(nothing was lost: unpaired entries and returns are calls already under way when \
             the probes were switched on, or still running at the end; they are not measured)\n",
        );
    }
}

/// JSON string literal.
pub(crate) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_key(out: &mut String, names: &[String], key: &Key) {
    out.push('{');
    for (i, (n, v)) in names.iter().zip(key).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, n);
        out.push(':');
        match v {
            KeyValue::U64(x) => {
                let _ = write!(out, "{x}");
            }
            KeyValue::S64(x) => {
                let _ = write!(out, "{x}");
            }
            KeyValue::Str(s) => json_str(out, s),
            KeyValue::Stack(frames) => {
                out.push('[');
                for (j, f) in frames.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    json_str(out, f);
                }
                out.push(']');
            }
            KeyValue::Missing => out.push_str("null"),
        }
    }
    out.push('}');
}

fn json_head(out: &mut String, kind: &str, unix_ns: u64, interval_ns: Option<u64>) {
    out.push_str("{\"type\":");
    json_str(out, kind);
    let _ = write!(
        out,
        ",\"time\":\"{}\",\"unix_ns\":{unix_ns}",
        utc(unix_ns, "T", "Z")
    );
    match interval_ns {
        Some(i) => {
            let _ = write!(out, ",\"interval_ns\":{i}");
        }
        None => out.push_str(",\"interval_ns\":null"),
    }
}

fn json_opt(out: &mut String, v: Option<i128>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str("null"),
    }
}

/// The count report as one JSON document (one line, newline-terminated).
/// `interval_ns` is the interval's length, `None` for a whole run.
pub fn count_json(out: &mut String, r: &CountReport, unix_ns: u64, interval_ns: Option<u64>) {
    json_head(out, "count", unix_ns, interval_ns);
    out.push_str(",\"keys\":[");
    for (i, k) in r.keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, k);
    }
    out.push_str("],\"rows\":[");
    for (i, (key, n)) in r.rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":");
        json_key(out, &r.keys, key);
        let _ = write!(out, ",\"count\":{n}}}");
    }
    let _ = writeln!(
        out,
        "],\"total\":{},\"distinct\":{},\"lost\":{},\"dropped\":{},\"other\":{},\"max_keys\":{}}}",
        r.total, r.distinct, r.lost, r.dropped, r.other, r.max_keys
    );
}

fn hist_body(out: &mut String, r: &HistReport) {
    out.push_str(",\"value\":");
    json_str(out, &r.value);
    out.push_str(",\"unit\":");
    match r.unit {
        Some(u) => json_str(out, u.as_str()),
        None => out.push_str("null"),
    }
    match r.scale {
        Scale::Log2 => out.push_str(",\"scale\":{\"type\":\"log2\"}"),
        Scale::Linear { step } => {
            let _ = write!(out, ",\"scale\":{{\"type\":\"linear\",\"step\":{step}}}");
        }
    }
    out.push_str(",\"keys\":[");
    for (i, k) in r.keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, k);
    }
    out.push_str("],\"groups\":[");
    for (i, (key, h)) in r.groups.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":");
        json_key(out, &r.keys, key);
        out.push(',');
        histogram_json(out, h);
        out.push('}');
    }
    let _ = write!(
        out,
        "],\"missing\":{},\"lost\":{},\"dropped\":{},\"other\":",
        r.missing, r.lost, r.dropped
    );
    match &r.other {
        Some(h) => {
            out.push('{');
            histogram_json(out, h);
            out.push('}');
        }
        None => out.push_str("null"),
    }
    let _ = write!(out, ",\"max_keys\":{}", r.max_keys);
}

/// `"buckets":[...],"count":N,"sum":N,"min":N,"max":N` of one histogram.
fn histogram_json(out: &mut String, h: &Histogram) {
    out.push_str("\"buckets\":[");
    for (j, (idx, c)) in h.buckets.iter().enumerate() {
        if j > 0 {
            out.push(',');
        }
        let (lo, hi) = h.scale.bounds(*idx);
        out.push_str("{\"lo\":");
        json_opt(out, lo);
        let _ = write!(out, ",\"hi\":{hi},\"count\":{c}}}");
    }
    let s = &h.stats;
    let _ = write!(out, "],\"count\":{},\"sum\":{},\"min\":", s.count, s.sum);
    json_opt(out, s.min);
    out.push_str(",\"max\":");
    json_opt(out, s.max);
}

/// The histogram report as one JSON document (one line).
pub fn hist_json(out: &mut String, r: &HistReport, unix_ns: u64, interval_ns: Option<u64>) {
    json_head(out, "hist", unix_ns, interval_ns);
    hist_body(out, r);
    out.push_str("}\n");
}

/// The latency report as one JSON document (one line).
pub fn latency_json(out: &mut String, r: &LatencyReport, unix_ns: u64, interval_ns: Option<u64>) {
    json_head(out, "latency", unix_ns, interval_ns);
    hist_body(out, &r.hist);
    let _ = write!(out, ",\"unmatched_returns\":{}", r.unmatched_returns);
    for (name, v) in [
        ("discarded_entries", r.discarded_entries),
        ("backwards", r.backwards),
        ("in_flight", r.in_flight),
        ("kretprobe_misses", r.kretprobe_misses),
    ] {
        let _ = write!(out, ",\"{name}\":");
        json_opt(out, v.map(i128::from));
    }
    out.push_str("}\n");
}
