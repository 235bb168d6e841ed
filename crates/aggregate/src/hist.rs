//! Histograms: the bucket schemes ([`Scale`]: bpftrace/bcc power-of-two
//! buckets, or linear steps), one histogram with its summary ([`Histogram`],
//! [`Stats`]) and time units ([`Unit`]).
//!
//! Power-of-two buckets are bpftrace's `hist()`: all negative values in one
//! bucket `(..., 0)`, then `[0]`, `[1]`, `[2, 4)`, `[4, 8)`, … up to
//! `[2^63, 2^64)`. The kernel's `.log2` modifier (trace_events_hist.c,
//! `hist_field_log2`) rounds up instead (`2^k` holds `(2^(k-1), 2^k]`), so
//! the kernel engine feeds it `v + 1` and shifts the exponent back, see
//! [`Histogram::add_kernel_log2`]. Linear buckets are `[i*step, (i+1)*step)`
//! (floor division, negative values too), the kernel's `.buckets=STEP`.
//! Values are kept as i128 so that every u64 and i64 fits.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fmt;

/// A bucket scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Power-of-two buckets (bpftrace `hist()`, bcc).
    Log2,
    /// Linear buckets of `step` (at least 1).
    Linear {
        /// The bucket width.
        step: u64,
    },
}

impl Scale {
    /// A linear scale; a zero step is refused.
    pub fn linear(step: u64) -> Result<Scale> {
        if step == 0 {
            return Err(Error::ZeroStep);
        }
        Ok(Scale::Linear { step })
    }

    /// The bucket index of `v`. Log2: -1 for negatives, 0 for zero, k+1 for
    /// `[2^k, 2^(k+1))`. Linear: `floor(v / step)`.
    pub fn index(&self, v: i128) -> i128 {
        match *self {
            Scale::Log2 => {
                if v < 0 {
                    -1
                } else if v == 0 {
                    0
                } else {
                    // v <= u64::MAX, so ilog2 <= 63
                    i128::from(v.ilog2()) + 1
                }
            }
            Scale::Linear { step } => v.div_euclid(i128::from(step.max(1))),
        }
    }

    /// The bounds of bucket `index`: `lo` inclusive (`None`: unbounded),
    /// `hi` exclusive.
    pub fn bounds(&self, index: i128) -> (Option<i128>, i128) {
        match *self {
            Scale::Log2 => {
                if index < 0 {
                    (None, 0)
                } else if index == 0 {
                    (Some(0), 1)
                } else {
                    let k = (index - 1).clamp(0, 126) as u32;
                    (Some(1i128 << k), 1i128 << (k + 1))
                }
            }
            Scale::Linear { step } => {
                let step = i128::from(step.max(1));
                (Some(index * step), (index + 1) * step)
            }
        }
    }

    /// The bucket's label as printed: `(..., 0)`, `[0]`, `[1]`, `[2, 4)`,
    /// `[1K, 2K)` for log2 (bpftrace's suffixes, powers of 1024); `[0, 512)`
    /// for linear (plain numbers).
    pub fn label(&self, index: i128) -> String {
        let (lo, hi) = self.bounds(index);
        match (*self, lo) {
            (Scale::Log2, None) => "(..., 0)".to_string(),
            (Scale::Log2, Some(lo)) if hi - lo == 1 => format!("[{lo}]"),
            (Scale::Log2, Some(lo)) => format!("[{}, {})", pow2_label(lo), pow2_label(hi)),
            (Scale::Linear { .. }, Some(lo)) => format!("[{lo}, {hi})"),
            (Scale::Linear { .. }, None) => format!("(..., {hi})"),
        }
    }
}

/// `1024` → `1K`, `2^20` → `1M`, … (exact powers of two only get a suffix
/// when they are a multiple of the suffix's power).
fn pow2_label(v: i128) -> String {
    const SUFFIX: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let mut n = v;
    let mut i = 0;
    while i + 1 < SUFFIX.len() && n >= 1024 && n % 1024 == 0 {
        n /= 1024;
        i += 1;
    }
    format!("{n}{}", SUFFIX[i])
}

/// A time unit for latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
}

impl Unit {
    /// Parse `ns`, `us`, `ms`.
    pub fn parse(s: &str) -> Result<Unit> {
        match s {
            "ns" => Ok(Unit::Ns),
            "us" => Ok(Unit::Us),
            "ms" => Ok(Unit::Ms),
            _ => Err(Error::BadUnit(s.to_string())),
        }
    }

    /// `ns`, `us`, `ms`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
        }
    }

    /// The Prometheus base-unit word: nanoseconds, microseconds,
    /// milliseconds.
    pub fn word(&self) -> &'static str {
        match self {
            Unit::Ns => "nanoseconds",
            Unit::Us => "microseconds",
            Unit::Ms => "milliseconds",
        }
    }

    /// Nanoseconds in one of this unit.
    pub fn nanos(&self) -> u64 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
        }
    }

    /// The latency between two nanosecond stamps in this unit, computed the
    /// way the kernel engine does: the time measured in nanoseconds, then
    /// truncated to the unit (`lat/1000` of the nanosecond latency, not
    /// the difference of two truncated stamps, which is up to one unit
    /// off). `None` when the return is stamped before the entry.
    pub fn delta(&self, entry_ns: u64, return_ns: u64) -> Option<u64> {
        if return_ns < entry_ns {
            return None;
        }
        Some((return_ns - entry_ns) / self.nanos())
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Count, sum and extremes of the values in a histogram. `min`/`max` are
/// `None` when the source did not have them (the kernel engine's latency
/// buckets carry counts and sums only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Number of values.
    pub count: u64,
    /// Their sum.
    pub sum: i128,
    /// The smallest, when known.
    pub min: Option<i128>,
    /// The largest, when known.
    pub max: Option<i128>,
}

impl Stats {
    /// The average times 100, rounded half away from zero; `None` when
    /// empty.
    pub fn avg_centi(&self) -> Option<i128> {
        if self.count == 0 {
            return None;
        }
        let n = i128::from(self.count);
        let x = self.sum.checked_mul(100)?;
        let q = x / n;
        let r = x % n;
        Some(if 2 * r.abs() >= n { q + x.signum() } else { q })
    }
}

/// One histogram: counts per bucket index and the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// The bucket scheme.
    pub scale: Scale,
    /// Count per bucket index ([`Scale::index`]); empty buckets absent.
    pub buckets: BTreeMap<i128, u64>,
    /// Summary of all values.
    pub stats: Stats,
}

impl Histogram {
    /// An empty histogram.
    pub fn new(scale: Scale) -> Self {
        Histogram {
            scale,
            buckets: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    /// Record `v` once.
    pub fn record(&mut self, v: i128) {
        self.record_n(v, 1);
    }

    /// Record `v` `n` times (the kernel engine's raw-value keys).
    pub fn record_n(&mut self, v: i128, n: u64) {
        if n == 0 {
            return;
        }
        *self.buckets.entry(self.scale.index(v)).or_insert(0) += n;
        let s = &mut self.stats;
        let first = s.count == 0;
        s.count += n;
        s.sum = s.sum.saturating_add(v.saturating_mul(i128::from(n)));
        s.min = Some(if first {
            v
        } else {
            s.min.map_or(v, |m| m.min(v))
        });
        s.max = Some(if first {
            v
        } else {
            s.max.map_or(v, |m| m.max(v))
        });
    }

    /// Add a bucket counted elsewhere (`count` values summing to `sum`);
    /// extremes become unknown.
    pub fn add_bucket(&mut self, index: i128, count: u64, sum: i128) {
        if count == 0 {
            return;
        }
        *self.buckets.entry(index).or_insert(0) += count;
        self.stats.count += count;
        self.stats.sum = self.stats.sum.saturating_add(sum);
        self.stats.min = None;
        self.stats.max = None;
    }

    /// Add the kernel's `.log2` bucket `2^exp` of `v + 1` (the kernel
    /// engine's latency histograms): `2^0` is `[0]`, `2^(k+1)` is
    /// `[2^k, 2^(k+1))`. Only meaningful on a [`Scale::Log2`] histogram.
    pub fn add_kernel_log2(&mut self, exp: u32, count: u64, sum: i128) {
        // index 0 is [0]; index k+1 is [2^k, 2^(k+1)): the exponent of v+1
        self.add_bucket(i128::from(exp), count, sum);
    }

    /// What was added since `earlier` (an earlier read of the same,
    /// only-growing source, e.g. a kernel hist table): bucket counts, count
    /// and sum subtract; extremes stay known only when `earlier` was empty.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut buckets = BTreeMap::new();
        for (i, c) in &self.buckets {
            let d = c.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0));
            if d > 0 {
                buckets.insert(*i, d);
            }
        }
        let fresh = earlier.stats.count == 0;
        let stats = Stats {
            count: self.stats.count.saturating_sub(earlier.stats.count),
            sum: self.stats.sum - earlier.stats.sum,
            min: if fresh { self.stats.min } else { None },
            max: if fresh { self.stats.max } else { None },
        };
        Histogram {
            scale: self.scale,
            buckets,
            stats,
        }
    }

    /// Merge another histogram of the same scale into this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (i, c) in &other.buckets {
            *self.buckets.entry(*i).or_insert(0) += c;
        }
        let a = self.stats;
        let b = other.stats;
        let min = if a.count == 0 {
            b.min
        } else if b.count == 0 {
            a.min
        } else {
            a.min.zip(b.min).map(|(x, y)| x.min(y))
        };
        let max = if a.count == 0 {
            b.max
        } else if b.count == 0 {
            a.max
        } else {
            a.max.zip(b.max).map(|(x, y)| x.max(y))
        };
        self.stats = Stats {
            count: a.count + b.count,
            sum: a.sum.saturating_add(b.sum),
            min,
            max,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_index_and_labels() {
        let s = Scale::Log2;
        let table: &[(i128, i128, &str)] = &[
            (i128::from(i64::MIN), -1, "(..., 0)"),
            (-1, -1, "(..., 0)"),
            (0, 0, "[0]"),
            (1, 1, "[1]"),
            (2, 2, "[2, 4)"),
            (3, 2, "[2, 4)"),
            (4, 3, "[4, 8)"),
            (1000, 10, "[512, 1K)"),
            (1023, 10, "[512, 1K)"),
            (1024, 11, "[1K, 2K)"),
            (4096, 13, "[4K, 8K)"),
            (65536, 17, "[64K, 128K)"),
            (1 << 20, 21, "[1M, 2M)"),
            (1 << 30, 31, "[1G, 2G)"),
            (i128::from(u64::MAX), 64, "[8E, 16E)"),
        ];
        for &(v, idx, label) in table {
            assert_eq!(s.index(v), idx, "index of {v}");
            assert_eq!(s.label(idx), label, "label of {v}");
            let (lo, hi) = s.bounds(idx);
            assert!(
                lo.is_none_or(|lo| lo <= v) && v < hi,
                "{v} in bounds of {idx}"
            );
        }
    }

    #[test]
    fn linear_index_and_labels() {
        let s = Scale::linear(512).unwrap();
        let table: &[(i128, i128, &str)] = &[
            (0, 0, "[0, 512)"),
            (511, 0, "[0, 512)"),
            (512, 1, "[512, 1024)"),
            (1000, 1, "[512, 1024)"),
            (-1, -1, "[-512, 0)"),
            (-512, -1, "[-512, 0)"),
            (-513, -2, "[-1024, -512)"),
            (65536, 128, "[65536, 66048)"),
        ];
        for &(v, idx, label) in table {
            assert_eq!(s.index(v), idx, "index of {v}");
            assert_eq!(s.label(idx), label, "label of {v}");
        }
        assert!(matches!(Scale::linear(0), Err(Error::ZeroStep)));
    }

    #[test]
    fn stats_and_avg() {
        let mut h = Histogram::new(Scale::Log2);
        for v in [1, 2, 3, -9, 1000] {
            h.record(v);
        }
        h.record_n(7, 3);
        assert_eq!(
            h.stats,
            Stats {
                count: 8,
                sum: 1018,
                min: Some(-9),
                max: Some(1000)
            }
        );
        assert_eq!(h.stats.avg_centi(), Some(12725));
        assert_eq!(h.buckets.get(&-1), Some(&1));
        assert_eq!(h.buckets.get(&3), Some(&3));
        let neg = Stats {
            count: 3,
            sum: -10,
            min: None,
            max: None,
        };
        assert_eq!(neg.avg_centi(), Some(-333));
        let half = Stats {
            count: 2,
            sum: 1,
            min: None,
            max: None,
        };
        assert_eq!(half.avg_centi(), Some(50));
        assert_eq!(Stats::default().avg_centi(), None);
    }

    #[test]
    fn kernel_log2_of_v_plus_one_is_bpftrace_bucket() {
        // the kernel's ilog2(roundup_pow_of_two(v + 1)) for every small v
        for v in 0u64..5000 {
            let w = v + 1;
            let exp = w.next_power_of_two().ilog2();
            assert_eq!(i128::from(exp), Scale::Log2.index(i128::from(v)), "{v}");
        }
    }

    #[test]
    fn merge_keeps_unknown_extremes_unknown() {
        let mut a = Histogram::new(Scale::Log2);
        a.record(5);
        let mut b = Histogram::new(Scale::Log2);
        b.add_kernel_log2(3, 2, 10);
        a.merge(&b);
        assert_eq!(
            a.stats,
            Stats {
                count: 3,
                sum: 15,
                min: None,
                max: None
            }
        );
        let mut c = Histogram::new(Scale::Log2);
        c.merge(&a);
        assert_eq!(c, a);
    }

    #[test]
    fn since_an_earlier_read() {
        let mut a = Histogram::new(Scale::Log2);
        a.record_n(5, 2);
        let mut b = a.clone();
        b.record_n(5, 1);
        b.record(100);
        let d = b.since(&a);
        assert_eq!(
            d.buckets.iter().map(|(i, c)| (*i, *c)).collect::<Vec<_>>(),
            [(3, 1), (7, 1)]
        );
        assert_eq!(
            d.stats,
            Stats {
                count: 2,
                sum: 105,
                min: None,
                max: None
            }
        );
        let empty = Histogram::new(Scale::Log2);
        assert_eq!(b.since(&empty), b);
        assert_eq!(b.since(&b).stats.count, 0);
        assert!(b.since(&b).buckets.is_empty());
    }

    #[test]
    fn unit_delta_like_the_kernel() {
        assert_eq!(Unit::Ns.delta(1_999, 3_001), Some(1_002));
        // 1.002 us measured: 1 us (lat/1000 of the nanoseconds, as the
        // kernel engine's conversion trigger; not 3 - 1 = 2 of truncated
        // stamps)
        assert_eq!(Unit::Us.delta(1_999, 3_001), Some(1));
        assert_eq!(Unit::Ms.delta(0, 2_500_000), Some(2));
        assert_eq!(Unit::Ms.delta(999_999, 2_000_001), Some(1));
        assert_eq!(Unit::Us.delta(5, 4), None);
        for (s, u) in [("ns", Unit::Ns), ("us", Unit::Us), ("ms", Unit::Ms)] {
            assert_eq!(Unit::parse(s).unwrap(), u);
            assert_eq!(u.as_str(), s);
        }
        assert_eq!(
            Unit::parse("s").unwrap_err().to_string(),
            "unknown unit 's': expected ns, us or ms"
        );
    }
}
