//! The user engine's aggregators — hits per key ([`CountAgg`]), histograms
//! of a field per key ([`HistAgg`]), entry/return latency per key
//! ([`LatencyAgg`]) — and the reports they (and the kernel engine, through
//! [`crate::khist`]) produce: [`CountReport`], [`HistReport`],
//! [`LatencyReport`]. Renderers take reports only, so both engines print
//! the same way.
//!
//! Latency pairs entries and returns per thread with a stack of entries:
//! a return matches the innermost open entry of the same function (so
//! nested and recursive calls pair correctly); open entries above it are
//! discarded (their returns were missed); a return with no open entry is an
//! unmatched return. Lost events empty every stack (a pair across a gap
//! cannot be trusted) and count what was dropped. kretprobe misses are
//! the kernel's number (`kprobe_profile`), given from outside and reported
//! next to, never folded into, the histogram.
//!
//! Memory is bounded: each aggregator keeps at most `max_keys` distinct
//! keys ([`DEFAULT_MAX_KEYS`], `--max-keys`), the first ones seen; what
//! later keys bring is counted exactly, all together, in one overflow
//! bucket ([`CountReport::other`], [`HistReport::other`]), and the report
//! says so. Latency also keeps open entries for at most [`MAX_TASKS`]
//! threads at once.

use crate::hist::{Histogram, Scale, Unit};
use crate::key::{Key, KeySpec, KeyValue, fill_key};
use crate::sample::Sample;
use std::collections::HashMap;

/// Hits per key, as a report: rows sorted by count (descending), then key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountReport {
    /// The key names, in order (empty: one total).
    pub keys: Vec<String>,
    /// (key, hits), most hits first.
    pub rows: Vec<(Key, u64)>,
    /// Hits in all rows (before any `--top` cut).
    pub total: u64,
    /// Number of distinct keys (before any `--top` cut).
    pub distinct: usize,
    /// Events the user engine lost (ring-buffer overruns).
    pub lost: u64,
    /// Events the kernel engine could not count (its table was full).
    pub dropped: u64,
    /// Hits of keys beyond the first `max_keys`, counted together (in
    /// `total`, not in `rows` or `distinct`).
    pub other: u64,
    /// The key cap the rows were kept under (0: none given).
    pub max_keys: usize,
}

impl CountReport {
    /// Build from unsorted rows.
    pub fn new(keys: Vec<String>, rows: impl IntoIterator<Item = (Key, u64)>) -> Self {
        let mut merged: HashMap<Key, u64> = HashMap::new();
        for (k, n) in rows {
            *merged.entry(k).or_insert(0) += n;
        }
        let mut rows: Vec<(Key, u64)> = merged.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let total = rows.iter().map(|r| r.1).sum();
        let distinct = rows.len();
        CountReport {
            keys,
            rows,
            total,
            distinct,
            lost: 0,
            dropped: 0,
            other: 0,
            max_keys: 0,
        }
    }

    /// With `other` hits of keys beyond `max_keys` (added to the total).
    pub fn with_other(mut self, other: u64, max_keys: usize) -> Self {
        self.other = other;
        self.total += other;
        self.max_keys = max_keys;
        self
    }

    /// What was counted since `earlier` (an earlier read of the same
    /// only-growing source: the kernel's hist tables are cumulative).
    pub fn since(&self, earlier: &CountReport) -> CountReport {
        let before: HashMap<&Key, u64> = earlier.rows.iter().map(|(k, n)| (k, *n)).collect();
        let rows = self
            .rows
            .iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n.saturating_sub(before.get(k).copied().unwrap_or(0)),
                )
            })
            .filter(|(_, n)| *n > 0);
        let mut r = CountReport::new(self.keys.clone(), rows)
            .with_other(self.other.saturating_sub(earlier.other), self.max_keys);
        r.lost = self.lost.saturating_sub(earlier.lost);
        r.dropped = self.dropped.saturating_sub(earlier.dropped);
        r
    }

    /// Keep the first `n` rows (`total` and `distinct` still describe all).
    pub fn top(mut self, n: usize) -> Self {
        self.rows.truncate(n);
        self
    }
}

/// Histograms of a value per key, as a report: groups sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistReport {
    /// What is measured: a field name, or `latency`.
    pub value: String,
    /// The unit, for latency.
    pub unit: Option<Unit>,
    /// The bucket scheme.
    pub scale: Scale,
    /// The key names, in order.
    pub keys: Vec<String>,
    /// (key, histogram), sorted by key.
    pub groups: Vec<(Key, Histogram)>,
    /// Events that had no such field (or a string there).
    pub missing: u64,
    /// Events the user engine lost.
    pub lost: u64,
    /// Events the kernel engine could not count (its table was full).
    pub dropped: u64,
    /// The values of keys beyond the first `max_keys`, in one histogram.
    pub other: Option<Histogram>,
    /// The key cap the groups were kept under (0: none given).
    pub max_keys: usize,
}

impl HistReport {
    /// An empty report.
    pub fn new(value: &str, unit: Option<Unit>, scale: Scale, keys: Vec<String>) -> Self {
        HistReport {
            value: value.to_string(),
            unit,
            scale,
            keys,
            groups: Vec::new(),
            missing: 0,
            lost: 0,
            dropped: 0,
            other: None,
            max_keys: 0,
        }
    }

    /// What was added since `earlier` (see [`CountReport::since`]).
    pub fn since(&self, earlier: &HistReport) -> HistReport {
        let mut r = HistReport::new(&self.value, self.unit, self.scale, self.keys.clone());
        r.groups = self
            .groups
            .iter()
            .map(|(k, h)| match earlier.groups.iter().find(|g| &g.0 == k) {
                Some((_, e)) => (k.clone(), h.since(e)),
                None => (k.clone(), h.clone()),
            })
            .filter(|(_, h)| h.stats.count > 0)
            .collect();
        r.missing = self.missing.saturating_sub(earlier.missing);
        r.lost = self.lost.saturating_sub(earlier.lost);
        r.dropped = self.dropped.saturating_sub(earlier.dropped);
        r.other = match (&self.other, &earlier.other) {
            (Some(h), Some(e)) => Some(h.since(e)).filter(|h| h.stats.count > 0),
            (h, _) => h.clone(),
        };
        r.max_keys = self.max_keys;
        r
    }

    /// Set the groups (merging equal keys) and sort them by key.
    pub fn set_groups(&mut self, groups: impl IntoIterator<Item = (Key, Histogram)>) {
        let mut merged: HashMap<Key, Histogram> = HashMap::new();
        for (k, h) in groups {
            match merged.get_mut(&k) {
                Some(m) => m.merge(&h),
                None => {
                    merged.insert(k, h);
                }
            }
        }
        let mut groups: Vec<(Key, Histogram)> = merged.into_iter().collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        self.groups = groups;
    }
}

/// Latency histograms and the pairing counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyReport {
    /// The histograms (value `latency`, with the unit).
    pub hist: HistReport,
    /// Returns with no open entry of their function on their thread.
    pub unmatched_returns: u64,
    /// Open entries discarded: their return never came (a deeper return
    /// matched, the stack overflowed, or events were lost). `None`: the
    /// engine cannot tell (kernel).
    pub discarded_entries: Option<u64>,
    /// Returns stamped before their entry (clock skew), not measured.
    /// `None`: the engine cannot tell (kernel).
    pub backwards: Option<u64>,
    /// Entries still open when the report was made. `None`: the engine
    /// cannot tell (kernel).
    pub in_flight: Option<u64>,
    /// The kernel's kretprobe miss count (maxactive exhausted), from
    /// `kprobe_profile`; `None` when not known.
    pub kretprobe_misses: Option<u64>,
}

impl LatencyReport {
    /// What was measured since `earlier` (see [`CountReport::since`]).
    pub fn since(&self, earlier: &LatencyReport) -> LatencyReport {
        let sub = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
        LatencyReport {
            hist: self.hist.since(&earlier.hist),
            unmatched_returns: self
                .unmatched_returns
                .saturating_sub(earlier.unmatched_returns),
            discarded_entries: sub(self.discarded_entries, earlier.discarded_entries),
            backwards: sub(self.backwards, earlier.backwards),
            in_flight: self.in_flight,
            kretprobe_misses: sub(self.kretprobe_misses, earlier.kretprobe_misses),
        }
    }
}

/// Distinct keys an aggregator keeps by default: the kernel engine's table
/// size ([`crate::kernel::TABLE_SIZE`]), so both engines hold as many.
/// Measured on the 6.18 host (`ktrace count … --by s`, one string key of
/// 8 bytes per hit): 1,000,000 distinct keys took 329 MB before the cap;
/// with it 9 MB, the same at any number of keys.
pub const DEFAULT_MAX_KEYS: usize = crate::kernel::TABLE_SIZE as usize;

/// Threads with open entries a latency aggregator follows at once; an
/// entry of one more thread is discarded (counted with the entries
/// without return).
pub const MAX_TASKS: usize = 65_536;

/// Per-key state with a cap: the first `max` keys get their own value,
/// every later key adds to the one overflow value.
#[derive(Debug, Clone)]
struct Capped<V> {
    map: HashMap<Key, V>,
    other: Option<V>,
    max: usize,
}

impl<V> Capped<V> {
    fn new(max: usize) -> Self {
        Capped {
            map: HashMap::new(),
            other: None,
            max: max.max(1),
        }
    }

    /// `f` on the value of `key`: its own (a new one while there is
    /// room, from `new`, the key copied once) or the overflow value.
    fn update(&mut self, key: &Key, new: impl FnOnce() -> V, f: impl FnOnce(&mut V)) {
        if let Some(v) = self.map.get_mut(key) {
            f(v);
        } else if self.map.len() < self.max {
            let mut v = new();
            f(&mut v);
            self.map.insert(key.clone(), v);
        } else {
            f(self.other.get_or_insert_with(new));
        }
    }

    /// Whether `key` has (or would get) its own value.
    fn keeps(&self, key: &Key) -> bool {
        self.map.len() < self.max || self.map.contains_key(key)
    }

    fn clear(&mut self) {
        self.map.clear();
        self.other = None;
    }
}

/// Hits per key (user engine).
#[derive(Debug, Clone)]
pub struct CountAgg {
    keys: Vec<KeySpec>,
    counts: Capped<u64>,
    /// The current run: samples in a row with one key (a task's burst on a
    /// CPU) are counted here and go into `counts` in one lookup when the
    /// key changes, so a sample costs no hashing and no allocation.
    run: Run<()>,
    lost: u64,
}

/// Samples in a row with the same key, not yet in the table.
#[derive(Debug, Clone, Default)]
struct Run<D> {
    /// The key of the run (valid while `len > 0`).
    key: Key,
    /// The key of the sample at hand, refilled in place.
    next: Key,
    len: u64,
    /// What the run's samples add up to.
    delta: D,
}

impl<D> Run<D> {
    /// Takes the key of `s`: true when it continues the run; false when a
    /// new run starts, after `flush` got the finished one (if any).
    fn extend(
        &mut self,
        specs: &[KeySpec],
        s: &Sample<'_>,
        flush: impl FnOnce(&Key, &mut D, u64),
    ) -> bool {
        fill_key(specs, s, &mut self.next);
        if self.len > 0 && self.next == self.key {
            self.len += 1;
            return true;
        }
        self.take(flush);
        std::mem::swap(&mut self.key, &mut self.next);
        self.len = 1;
        false
    }

    /// Hands the run to `flush` (which empties the delta, keeping its
    /// allocation) and ends it.
    fn take(&mut self, flush: impl FnOnce(&Key, &mut D, u64)) {
        if self.len > 0 {
            flush(&self.key, &mut self.delta, self.len);
            self.len = 0;
        }
    }

    /// The run's key and delta, if there is a run.
    fn current(&self) -> Option<(&Key, &D)> {
        (self.len > 0).then_some((&self.key, &self.delta))
    }
}

impl CountAgg {
    /// Count by `keys` (none: one total), keeping [`DEFAULT_MAX_KEYS`].
    pub fn new(keys: Vec<KeySpec>) -> Self {
        CountAgg {
            keys,
            counts: Capped::new(DEFAULT_MAX_KEYS),
            run: Run::default(),
            lost: 0,
        }
    }

    /// Keep at most `n` distinct keys (at least 1); hits of later keys are
    /// counted together as other.
    pub fn with_max_keys(mut self, n: usize) -> Self {
        self.counts.max = n.max(1);
        self
    }

    /// Whether hits went to the overflow bucket since the last reset.
    pub fn overflowed(&self) -> bool {
        self.counts.other.is_some()
    }

    /// One event.
    pub fn add(&mut self, s: &Sample<'_>) {
        let counts = &mut self.counts;
        self.run
            .extend(&self.keys, s, |key, (), n| add_count(counts, key, n));
    }

    /// `n` events lost.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
    }

    /// The counts so far.
    pub fn report(&self) -> CountReport {
        // (the run at hand is merged with its key's row, or the other
        // bucket, as its flush will)
        let mut other = self.counts.other.unwrap_or(0);
        let mut run = None;
        if let Some((k, _)) = self.run.current() {
            if self.counts.keeps(k) {
                run = Some((k.clone(), self.run.len));
            } else {
                other += self.run.len;
            }
        }
        let mut r = CountReport::new(
            self.keys.iter().map(|k| k.name().to_string()).collect(),
            self.counts
                .map
                .iter()
                .map(|(k, n)| (k.clone(), *n))
                .chain(run),
        )
        .with_other(other, self.counts.max);
        r.lost = self.lost;
        r
    }

    /// Start a new interval.
    pub fn reset(&mut self) {
        self.counts.clear();
        self.run.take(|_, (), _| {});
        self.lost = 0;
    }
}

/// Values a histogram's run holds before they go into the table.
const RUN_VALUES: usize = 256;

/// Moves `values` into `key`'s histogram (a new one for a new key, the
/// overflow one beyond the cap).
fn record_all(groups: &mut Capped<Histogram>, scale: Scale, key: &Key, values: &mut Vec<i128>) {
    groups.update(
        key,
        || Histogram::new(scale),
        |h| {
            for v in values.drain(..) {
                h.record(v);
            }
        },
    );
}

/// Adds `n` to `key`'s count (a copy of the key for a new row; the
/// overflow count beyond the cap).
fn add_count(counts: &mut Capped<u64>, key: &Key, n: u64) {
    counts.update(key, || 0, |c| *c += n);
}

/// The groups of a capped table with the run at hand merged in (its key's
/// group, or the overflow one), as a report wants them.
fn report_groups(
    groups: &Capped<Histogram>,
    run: Option<(&Key, Histogram)>,
) -> (Vec<(Key, Histogram)>, Option<Histogram>) {
    let mut out: Vec<(Key, Histogram)> = groups
        .map
        .iter()
        .map(|(k, h)| (k.clone(), h.clone()))
        .collect();
    let mut other = groups.other.clone();
    if let Some((k, h)) = run {
        if groups.keeps(k) {
            out.push((k.clone(), h));
        } else {
            match &mut other {
                Some(o) => o.merge(&h),
                None => other = Some(h),
            }
        }
    }
    (out, other)
}

/// Histograms of a numeric field per key (user engine).
#[derive(Debug, Clone)]
pub struct HistAgg {
    field: String,
    scale: Scale,
    keys: Vec<KeySpec>,
    groups: Capped<Histogram>,
    /// The current run of samples with one key: their values.
    run: Run<Vec<i128>>,
    missing: u64,
    lost: u64,
}

impl HistAgg {
    /// Histogram of `field` (checked numeric by the caller, see
    /// [`crate::kernel::check_hist_field`]) by `keys`.
    pub fn new(field: &str, scale: Scale, keys: Vec<KeySpec>) -> Self {
        HistAgg {
            field: field.to_string(),
            scale,
            keys,
            groups: Capped::new(DEFAULT_MAX_KEYS),
            run: Run::default(),
            missing: 0,
            lost: 0,
        }
    }

    /// Keep at most `n` distinct keys (at least 1); values of later keys
    /// go into one other histogram.
    pub fn with_max_keys(mut self, n: usize) -> Self {
        self.groups.max = n.max(1);
        self
    }

    /// Whether values went to the overflow histogram since the last reset.
    pub fn overflowed(&self) -> bool {
        self.groups.other.is_some()
    }

    /// One event.
    pub fn add(&mut self, s: &Sample<'_>) {
        let Some(v) = s.field(&self.field).and_then(|v| v.as_i128()) else {
            self.missing += 1;
            return;
        };
        let (groups, scale) = (&mut self.groups, self.scale);
        let flush = |key: &Key, values: &mut Vec<i128>, _| record_all(groups, scale, key, values);
        self.run.extend(&self.keys, s, flush);
        self.run.delta.push(v);
        if self.run.delta.len() == RUN_VALUES {
            // a long run goes in by parts: memory stays bounded
            record_all(
                &mut self.groups,
                self.scale,
                &self.run.key,
                &mut self.run.delta,
            );
        }
    }

    /// `n` events lost.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
    }

    /// The histograms so far.
    pub fn report(&self) -> HistReport {
        let mut r = HistReport::new(
            &self.field,
            None,
            self.scale,
            self.keys.iter().map(|k| k.name().to_string()).collect(),
        );
        let run = self.run.current().map(|(k, values)| {
            let mut h = Histogram::new(self.scale);
            for v in values {
                h.record(*v);
            }
            (k, h)
        });
        let (groups, other) = report_groups(&self.groups, run);
        r.set_groups(groups);
        r.other = other;
        r.max_keys = self.groups.max;
        r.missing = self.missing;
        r.lost = self.lost;
        r
    }

    /// Start a new interval.
    pub fn reset(&mut self) {
        self.groups.clear();
        self.run.take(|_, values, _| values.clear());
        self.missing = 0;
        self.lost = 0;
    }
}

/// One function measured: its entry and return events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyPair {
    /// The function's name (the `func` key).
    pub func: String,
    /// The entry probe's event, as in [`Sample::event`].
    pub entry_event: String,
    /// The return probe's event.
    pub return_event: String,
}

#[derive(Debug, Clone)]
struct Frame {
    func: usize,
    ts_ns: u64,
    key: Key,
}

/// Open entries kept per thread; deeper ones push the oldest out (counted
/// as discarded).
pub const MAX_DEPTH: usize = 1024;

/// Entry/return latency per key (user engine).
#[derive(Debug, Clone)]
pub struct LatencyAgg {
    pairs: Vec<LatencyPair>,
    roles: HashMap<String, (usize, bool)>,
    unit: Unit,
    scale: Scale,
    keys: Vec<KeySpec>,
    tasks: HashMap<u32, Vec<Frame>>,
    groups: Capped<Histogram>,
    unmatched: u64,
    discarded: u64,
    backwards: u64,
    lost: u64,
    kretprobe_misses: Option<u64>,
}

impl LatencyAgg {
    /// Measure `pairs`, in `unit`, bucketed by `scale`, by `keys` (taken
    /// from the entry event, so entry arguments can be keys; `func` is the
    /// pair's function).
    pub fn new(pairs: Vec<LatencyPair>, unit: Unit, scale: Scale, keys: Vec<KeySpec>) -> Self {
        let mut roles = HashMap::new();
        for (i, p) in pairs.iter().enumerate() {
            roles.insert(p.entry_event.clone(), (i, true));
            roles.insert(p.return_event.clone(), (i, false));
        }
        LatencyAgg {
            pairs,
            roles,
            unit,
            scale,
            keys,
            tasks: HashMap::new(),
            groups: Capped::new(DEFAULT_MAX_KEYS),
            unmatched: 0,
            discarded: 0,
            backwards: 0,
            lost: 0,
            kretprobe_misses: None,
        }
    }

    /// Keep at most `n` distinct keys (at least 1); latencies of later
    /// keys go into one other histogram.
    pub fn with_max_keys(mut self, n: usize) -> Self {
        self.groups.max = n.max(1);
        self
    }

    /// Whether latencies went to the overflow histogram since the last
    /// reset.
    pub fn overflowed(&self) -> bool {
        self.groups.other.is_some()
    }

    /// One event (others than the pairs' are ignored).
    pub fn add(&mut self, s: &Sample<'_>) {
        let Some(&(func, is_entry)) = self.roles.get(s.event) else {
            return;
        };
        if is_entry {
            let key = self
                .keys
                .iter()
                .map(|k| match k {
                    KeySpec::Func => KeyValue::Str(self.pairs[func].func.clone()),
                    k => k.value_of(s),
                })
                .collect();
            if self.tasks.len() >= MAX_TASKS && !self.tasks.contains_key(&s.tid) {
                // memory stays bounded: this entry is not followed
                self.discarded += 1;
                return;
            }
            let stack = self.tasks.entry(s.tid).or_default();
            if stack.len() >= MAX_DEPTH {
                stack.remove(0);
                self.discarded += 1;
            }
            stack.push(Frame {
                func,
                ts_ns: s.ts_ns,
                key,
            });
            return;
        }
        let Some(stack) = self.tasks.get_mut(&s.tid) else {
            self.unmatched += 1;
            return;
        };
        let Some(pos) = stack.iter().rposition(|f| f.func == func) else {
            self.unmatched += 1;
            return;
        };
        self.discarded += (stack.len() - pos - 1) as u64;
        stack.truncate(pos + 1);
        let Some(frame) = stack.pop() else {
            return;
        };
        if stack.is_empty() {
            self.tasks.remove(&s.tid);
        }
        match self.unit.delta(frame.ts_ns, s.ts_ns) {
            Some(d) => {
                let scale = self.scale;
                self.groups.update(
                    &frame.key,
                    || Histogram::new(scale),
                    |h| h.record(i128::from(d)),
                );
            }
            None => self.backwards += 1,
        }
    }

    /// `n` events lost: every open entry is discarded.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
        self.discarded += self.tasks.values().map(|s| s.len() as u64).sum::<u64>();
        self.tasks.clear();
    }

    /// The kernel's kretprobe miss count (sum over the pairs' return
    /// probes), read by the caller from `kprobe_profile`.
    pub fn set_kretprobe_misses(&mut self, n: u64) {
        self.kretprobe_misses = Some(n);
    }

    /// The latencies so far.
    pub fn report(&self) -> LatencyReport {
        let mut hist = HistReport::new(
            "latency",
            Some(self.unit),
            self.scale,
            self.keys.iter().map(|k| k.name().to_string()).collect(),
        );
        let (groups, other) = report_groups(&self.groups, None);
        hist.set_groups(groups);
        hist.other = other;
        hist.max_keys = self.groups.max;
        hist.lost = self.lost;
        LatencyReport {
            hist,
            unmatched_returns: self.unmatched,
            discarded_entries: Some(self.discarded),
            backwards: Some(self.backwards),
            in_flight: Some(self.tasks.values().map(|s| s.len() as u64).sum()),
            kretprobe_misses: self.kretprobe_misses,
        }
    }

    /// Start a new interval: histograms and counts restart, open entries
    /// stay open.
    pub fn reset(&mut self) {
        self.groups.clear();
        self.unmatched = 0;
        self.discarded = 0;
        self.backwards = 0;
        self.lost = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_of;
    use crate::sample::Value;

    fn sample<'a>(
        event: &'a str,
        ts: u64,
        tid: u32,
        comm: &'a str,
        fields: &'a [(&'a str, Value<'a>)],
    ) -> Sample<'a> {
        Sample {
            ts_ns: ts,
            cpu: 0,
            pid: tid,
            tid,
            comm,
            event,
            func: None,
            stack: None,
            fields,
        }
    }

    /// Runs of one key (counted without a lookup) and interleaved keys
    /// give the counts and histograms one lookup per sample would, at
    /// every report, across a reset, and past a histogram run's buffer.
    #[test]
    fn runs_equal_lookups_per_sample() {
        let comms = ["a", "b", "a", "a", "c", "b", "b", "b", "a"];
        let mut seq = Vec::new();
        for (i, c) in comms.iter().enumerate() {
            // run lengths 1, 2, 3, ..., one longer than a run's buffer
            let n = if i == 7 { RUN_VALUES + 3 } else { i + 1 };
            for j in 0..n {
                seq.push((*c, (i * 1000 + j) as u64));
            }
        }
        let keys = vec![KeySpec::Comm];
        let mut count = CountAgg::new(keys.clone());
        let mut hist = HistAgg::new("v", Scale::Log2, keys.clone());
        let mut want_n: HashMap<Key, u64> = HashMap::new();
        let mut want_h: HashMap<Key, Histogram> = HashMap::new();
        for (step, (c, v)) in seq.iter().enumerate() {
            if step == 20 {
                count.reset();
                hist.reset();
                want_n.clear();
                want_h.clear();
            }
            let f = [("v", Value::U64(*v))];
            let s = sample("g/e", step as u64, 1, c, &f);
            count.add(&s);
            hist.add(&s);
            let k = key_of(&keys, &s);
            *want_n.entry(k.clone()).or_insert(0) += 1;
            want_h
                .entry(k)
                .or_insert_with(|| Histogram::new(Scale::Log2))
                .record(i128::from(*v));
            if step % 7 == 0 || step + 1 == seq.len() {
                let got = count.report();
                let want = CountReport::new(vec!["comm".into()], want_n.clone())
                    .with_other(0, DEFAULT_MAX_KEYS);
                assert_eq!(got, want, "counts after sample {step}");
                let mut wh = HistReport::new("v", None, Scale::Log2, vec!["comm".into()]);
                wh.set_groups(want_h.clone());
                wh.max_keys = DEFAULT_MAX_KEYS;
                assert_eq!(hist.report(), wh, "histograms after sample {step}");
            }
        }
        assert_eq!(count.report().total, (seq.len() - 20) as u64);
    }

    /// Regression (issue 23 row 8: `--by s` over a million distinct
    /// strings grew to 834 MB): past the cap a new key gets no row; its
    /// hits (and values) go to the one other bucket, counted exactly, at
    /// every report — the run at hand included — and across a reset.
    #[test]
    fn key_cap_counts_the_rest_exactly_in_other() {
        let keys = vec![KeySpec::Comm];
        let mut count = CountAgg::new(keys.clone()).with_max_keys(2);
        let mut hist = HistAgg::new("v", Scale::Log2, keys.clone()).with_max_keys(2);
        let mut lat = lat().with_max_keys(1);
        // runs: a a b c c c a d e e b (keys a, b kept; c, d, e beyond)
        let seq = ["a", "a", "b", "c", "c", "c", "a", "d", "e", "e", "b"];
        for (i, c) in seq.iter().enumerate() {
            let f = [("v", Value::U64(i as u64))];
            let s = sample("g/e", 0, 1, c, &f);
            count.add(&s);
            hist.add(&s);
            let r = count.report();
            assert_eq!(r.total, i as u64 + 1, "after {i}");
            assert_eq!(
                r.rows.iter().map(|x| x.1).sum::<u64>() + r.other,
                r.total,
                "after {i}"
            );
            assert!(r.distinct <= 2);
        }
        let r = count.report();
        let rows: Vec<(String, u64)> = r.rows.iter().map(|(k, n)| (k[0].to_string(), *n)).collect();
        assert_eq!(rows, [("a".into(), 3), ("b".into(), 2)]);
        assert_eq!((r.other, r.max_keys, r.total), (6, 2, 11));
        assert!(count.overflowed());
        let h = hist.report();
        assert_eq!(h.groups.len(), 2);
        let other = h.other.as_ref().unwrap();
        // c at 3, 4, 5; d at 7; e at 8, 9
        assert_eq!(
            (
                other.stats.count,
                other.stats.sum,
                other.stats.min,
                other.stats.max
            ),
            (6, 36, Some(3), Some(9))
        );
        assert!(hist.overflowed());
        // latency: f kept (the first key), h beyond
        for (ev, ts) in [("g/f", 0), ("g/f_ret", 5), ("g/h", 10), ("g/h_ret", 17)] {
            lat.add(&sample(ev, ts, 1, "t", &[]));
        }
        let l = lat.report();
        assert_eq!(l.hist.groups.len(), 1);
        assert_eq!(l.hist.other.as_ref().map(|h| h.stats.sum), Some(7));
        // a reset starts the cap over
        count.reset();
        hist.reset();
        assert!(!count.overflowed() && !hist.overflowed());
        count.add(&sample("g/e", 0, 1, "z", &[]));
        assert_eq!(count.report().rows.len(), 1);
        assert_eq!(count.report().other, 0);
    }

    #[test]
    fn latency_follows_a_bounded_number_of_threads() {
        let mut l = lat();
        for tid in 0..(MAX_TASKS as u32 + 3) {
            l.add(&sample("g/f", 0, tid, "t", &[]));
        }
        let r = l.report();
        assert_eq!(r.in_flight, Some(MAX_TASKS as u64));
        assert_eq!(r.discarded_entries, Some(3));
    }

    #[test]
    fn count_by_comm_and_top() {
        let mut c = CountAgg::new(vec![KeySpec::Comm]);
        for (comm, n) in [("dd", 100), ("sh", 20), ("cat", 20), ("tail", 1)] {
            for _ in 0..n {
                c.add(&sample("g/rd", 0, 1, comm, &[]));
            }
        }
        c.lost(3);
        let r = c.report();
        let rows: Vec<(String, u64)> = r.rows.iter().map(|(k, n)| (k[0].to_string(), *n)).collect();
        assert_eq!(
            rows,
            [
                ("dd".into(), 100),
                ("cat".into(), 20),
                ("sh".into(), 20),
                ("tail".into(), 1)
            ]
        );
        assert_eq!((r.total, r.distinct, r.lost), (141, 4, 3));
        let t = r.top(2);
        assert_eq!((t.rows.len(), t.total, t.distinct), (2, 141, 4));
        c.reset();
        assert_eq!(c.report().total, 0);
    }

    #[test]
    fn reports_since_an_earlier_read() {
        let k = |s: &str| vec![KeyValue::Str(s.into())];
        let a = CountReport::new(vec!["comm".into()], vec![(k("dd"), 10), (k("sh"), 2)]);
        let mut b = CountReport::new(
            vec!["comm".into()],
            vec![(k("dd"), 15), (k("sh"), 2), (k("cat"), 1)],
        );
        b.dropped = 3;
        let d = b.since(&a);
        assert_eq!(d.rows, vec![(k("dd"), 5), (k("cat"), 1)]);
        assert_eq!((d.total, d.distinct, d.dropped), (6, 2, 3));

        let mut l = lat();
        l.add(&sample("g/f", 0, 1, "t", &[]));
        l.add(&sample("g/f_ret", 4, 1, "t", &[]));
        let first = l.report();
        l.add(&sample("g/f", 10, 1, "t", &[]));
        l.add(&sample("g/f_ret", 13, 1, "t", &[]));
        l.add(&sample("g/h_ret", 14, 1, "t", &[]));
        let d = l.report().since(&first);
        assert_eq!(d.unmatched_returns, 1);
        assert_eq!(d.hist.groups.len(), 1);
        assert_eq!(d.hist.groups[0].1.stats.count, 1);
        assert_eq!(d.hist.groups[0].1.buckets.get(&3), Some(&1));
    }

    #[test]
    fn count_with_no_keys_is_one_total() {
        let mut c = CountAgg::new(vec![]);
        for _ in 0..5 {
            c.add(&sample("g/rd", 0, 1, "x", &[]));
        }
        assert_eq!(c.report().rows, vec![(vec![], 5)]);
    }

    #[test]
    fn hist_of_a_field_by_key_and_missing() {
        let mut h = HistAgg::new("count", Scale::Log2, vec![KeySpec::Field("fd".into())]);
        let a = [("fd", Value::S64(0)), ("count", Value::U64(1000))];
        let b = [("fd", Value::S64(3)), ("count", Value::U64(0))];
        let c = [("fd", Value::S64(3)), ("count", Value::Str("x"))];
        for _ in 0..4 {
            h.add(&sample("g/rd", 0, 1, "dd", &a));
        }
        h.add(&sample("g/rd", 0, 1, "dd", &b));
        h.add(&sample("g/rd", 0, 1, "dd", &c));
        h.add(&sample("g/rd", 0, 1, "dd", &[]));
        let r = h.report();
        assert_eq!(r.missing, 2);
        assert_eq!(r.groups.len(), 2);
        assert_eq!(r.groups[0].0, vec![KeyValue::S64(0)]);
        assert_eq!(r.groups[0].1.buckets.get(&10), Some(&4));
        assert_eq!(r.groups[1].1.buckets.get(&0), Some(&1));
    }

    fn lat() -> LatencyAgg {
        LatencyAgg::new(
            vec![
                LatencyPair {
                    func: "f".into(),
                    entry_event: "g/f".into(),
                    return_event: "g/f_ret".into(),
                },
                LatencyPair {
                    func: "h".into(),
                    entry_event: "g/h".into(),
                    return_event: "g/h_ret".into(),
                },
            ],
            Unit::Ns,
            Scale::Linear { step: 1 },
            vec![KeySpec::Func],
        )
    }

    fn values(r: &LatencyReport, func: &str) -> Vec<(i128, u64)> {
        r.hist
            .groups
            .iter()
            .find(|(k, _)| k[0] == KeyValue::Str(func.into()))
            .map(|(_, h)| h.buckets.iter().map(|(i, c)| (*i, *c)).collect())
            .unwrap_or_default()
    }

    #[test]
    fn latency_table() {
        // (events as (event, ts, tid)), want f latencies, h latencies,
        // unmatched, discarded, in flight
        type Case = (
            &'static str,
            &'static [(&'static str, u64, u32)],
            &'static [i128],
            &'static [i128],
            u64,
            u64,
            u64,
        );
        let cases: &[Case] = &[
            (
                "simple",
                &[("g/f", 10, 1), ("g/f_ret", 15, 1)],
                &[5],
                &[],
                0,
                0,
                0,
            ),
            (
                "recursive f(f(f()))",
                &[
                    ("g/f", 0, 1),
                    ("g/f", 10, 1),
                    ("g/f", 20, 1),
                    ("g/f_ret", 25, 1),
                    ("g/f_ret", 40, 1),
                    ("g/f_ret", 100, 1),
                ],
                &[5, 30, 100],
                &[],
                0,
                0,
                0,
            ),
            (
                "nested f(h())",
                &[
                    ("g/f", 0, 1),
                    ("g/h", 3, 1),
                    ("g/h_ret", 7, 1),
                    ("g/f_ret", 9, 1),
                ],
                &[9],
                &[4],
                0,
                0,
                0,
            ),
            (
                "two threads interleaved",
                &[
                    ("g/f", 0, 1),
                    ("g/f", 1, 2),
                    ("g/f_ret", 5, 2),
                    ("g/f_ret", 50, 1),
                ],
                &[4, 50],
                &[],
                0,
                0,
                0,
            ),
            (
                "unmatched return",
                &[("g/f_ret", 5, 1), ("g/h", 6, 1), ("g/f_ret", 7, 1)],
                &[],
                &[],
                2,
                0,
                1,
            ),
            (
                "missed inner return discarded",
                &[("g/f", 0, 1), ("g/h", 2, 1), ("g/f_ret", 10, 1)],
                &[10],
                &[],
                0,
                1,
                0,
            ),
            (
                "still open",
                &[("g/f", 0, 1), ("g/f", 1, 1), ("g/f_ret", 3, 1)],
                &[2],
                &[],
                0,
                0,
                1,
            ),
            (
                "other events ignored",
                &[("g/x", 0, 1), ("g/f", 0, 1), ("g/f_ret", 1, 1)],
                &[1],
                &[],
                0,
                0,
                0,
            ),
        ];
        for (name, events, want_f, want_h, unmatched, discarded, in_flight) in cases {
            let mut l = lat();
            for (ev, ts, tid) in *events {
                l.add(&sample(ev, *ts, *tid, "t", &[]));
            }
            let r = l.report();
            let mut f: Vec<i128> = values(&r, "f")
                .iter()
                .flat_map(|(v, c)| std::iter::repeat_n(*v, *c as usize))
                .collect();
            f.sort();
            let h: Vec<i128> = values(&r, "h").iter().map(|(v, _)| *v).collect();
            assert_eq!(&f, want_f, "{name}: f");
            assert_eq!(&h, want_h, "{name}: h");
            assert_eq!(r.unmatched_returns, *unmatched, "{name}: unmatched");
            assert_eq!(r.discarded_entries, Some(*discarded), "{name}: discarded");
            assert_eq!(r.in_flight, Some(*in_flight), "{name}: in flight");
            assert_eq!(r.kretprobe_misses, None);
        }
    }

    #[test]
    fn latency_lost_events_discard_open_entries() {
        let mut l = lat();
        l.add(&sample("g/f", 0, 1, "t", &[]));
        l.add(&sample("g/f", 0, 2, "t", &[]));
        l.lost(7);
        l.add(&sample("g/f_ret", 9, 1, "t", &[]));
        l.set_kretprobe_misses(4);
        let r = l.report();
        assert_eq!(
            (
                r.unmatched_returns,
                r.discarded_entries,
                r.in_flight,
                r.hist.lost
            ),
            (1, Some(2), Some(0), 7)
        );
        assert_eq!(r.kretprobe_misses, Some(4));
        assert!(r.hist.groups.is_empty());
    }

    #[test]
    fn latency_backwards_and_depth_limit() {
        let mut l = lat();
        l.add(&sample("g/f", 10, 1, "t", &[]));
        l.add(&sample("g/f_ret", 5, 1, "t", &[]));
        assert_eq!(l.report().backwards, Some(1));
        let mut l = lat();
        for i in 0..(MAX_DEPTH as u64 + 5) {
            l.add(&sample("g/f", i, 1, "t", &[]));
        }
        let r = l.report();
        assert_eq!(
            (r.in_flight, r.discarded_entries),
            (Some(MAX_DEPTH as u64), Some(5))
        );
    }

    #[test]
    fn latency_keys_from_the_entry_and_units() {
        let mut l = LatencyAgg::new(
            vec![LatencyPair {
                func: "f".into(),
                entry_event: "g/f".into(),
                return_event: "g/f_ret".into(),
            }],
            Unit::Us,
            Scale::Log2,
            vec![KeySpec::Field("arg".into()), KeySpec::Comm],
        );
        let a = [("arg", Value::U64(7))];
        l.add(&sample("g/f", 1_999, 1, "a", &a));
        l.add(&sample("g/f_ret", 4_001, 1, "b", &[]));
        let r = l.report();
        assert_eq!(r.hist.groups.len(), 1);
        assert_eq!(
            r.hist.groups[0].0,
            vec![KeyValue::U64(7), KeyValue::Str("a".into())]
        );
        // 2.002 us measured
        assert_eq!(r.hist.groups[0].1.stats.sum, 2);
        assert_eq!(r.hist.unit, Some(Unit::Us));
    }
}
