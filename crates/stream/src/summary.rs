//! The end-of-run account of events seen and lost.
//!
//! Losses come from two places and both are reported: the missed-event
//! counts the kernel writes into sub-buffer headers (RB_MISSED_EVENTS /
//! RB_MISSED_STORED, see ktrace-ring) and the per-CPU counters of
//! `per_cpu/cpuN/stats` (overrun, commit overrun, dropped events). The
//! larger of the two per CPU is the loss; pages that only said "some" are
//! counted separately. It prints nothing by itself beyond [`LostSummary::line`]
//! and reads no files (the stats come from ktrace-tracefs).

use ktrace_ring::Missed;
use ktrace_tracefs::CpuStats;
use std::collections::BTreeMap;

/// Counts of events seen and lost, per CPU.
#[derive(Debug, Clone, Default)]
pub struct LostSummary {
    /// Records delivered.
    pub events: u64,
    page_missed: BTreeMap<usize, u64>,
    unknown_pages: BTreeMap<usize, u64>,
    stats_lost: BTreeMap<usize, u64>,
}

impl LostSummary {
    /// An empty summary.
    pub fn new() -> LostSummary {
        LostSummary::default()
    }

    /// Counts a page-level loss report.
    pub fn add_missed(&mut self, cpu: usize, missed: Missed) {
        match missed {
            Missed::None => {}
            Missed::Unknown => *self.unknown_pages.entry(cpu).or_default() += 1,
            Missed::Count(n) => *self.page_missed.entry(cpu).or_default() += n,
        }
    }

    /// Records a CPU's final `stats` counters.
    pub fn add_stats(&mut self, cpu: usize, stats: &CpuStats) {
        self.stats_lost.insert(cpu, stats.lost());
    }

    /// Events lost on `cpu`: the larger of the page counts and the stats.
    pub fn lost_on(&self, cpu: usize) -> u64 {
        let p = self.page_missed.get(&cpu).copied().unwrap_or(0);
        let s = self.stats_lost.get(&cpu).copied().unwrap_or(0);
        p.max(s)
    }

    /// Total events lost.
    pub fn lost(&self) -> u64 {
        self.cpus().into_iter().map(|c| self.lost_on(c)).sum()
    }

    fn cpus(&self) -> Vec<usize> {
        let mut c: Vec<usize> = self
            .page_missed
            .keys()
            .chain(self.stats_lost.keys())
            .chain(self.unknown_pages.keys())
            .copied()
            .collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    /// `N events, 0 lost` or `N events, M lost on CPU k, L lost on CPU j`
    /// (plus `some lost on CPU k` for pages that did not say how many).
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        for cpu in self.cpus() {
            let n = self.lost_on(cpu);
            if n > 0 {
                parts.push(format!("{n} lost on CPU {cpu}"));
            } else if self.unknown_pages.contains_key(&cpu) {
                parts.push(format!("some lost on CPU {cpu}"));
            }
        }
        if parts.is_empty() {
            format!("{} events, 0 lost", self.events)
        } else {
            format!("{} events, {}", self.events, parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines() {
        let mut s = LostSummary::new();
        s.events = 10;
        assert_eq!(s.line(), "10 events, 0 lost");
        s.add_missed(0, Missed::Count(5));
        s.add_missed(0, Missed::Count(7));
        s.add_missed(2, Missed::Unknown);
        s.add_stats(
            1,
            &CpuStats {
                overrun: 3,
                dropped_events: 1,
                ..CpuStats::default()
            },
        );
        s.add_stats(0, &CpuStats::default());
        assert_eq!(
            s.line(),
            "10 events, 12 lost on CPU 0, 4 lost on CPU 1, some lost on CPU 2"
        );
        assert_eq!(s.lost(), 16);
    }
}
