//! Parser for `per_cpu/cpuN/stats` (`tracing_stats_read()` in
//! kernel/trace/trace.c): how many events a CPU's buffer holds, overwrote
//! (`overrun`), failed to commit (`commit overrun`), dropped because the
//! buffer was full in non-overwrite mode (`dropped events`) and handed to
//! readers (`read events`). Time stamp lines are ignored.

use crate::Error;
use std::path::Path;

/// One CPU's ring-buffer counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// `entries`: events in the buffer now.
    pub entries: u64,
    /// `overrun`: events overwritten before anyone read them.
    pub overrun: u64,
    /// `commit overrun`: events lost while nested writes wrapped the buffer.
    pub commit_overrun: u64,
    /// `bytes`: bytes in the buffer now.
    pub bytes: u64,
    /// `dropped events`: events refused because the buffer was full.
    pub dropped: u64,
    /// `read events`: events handed to readers.
    pub read: u64,
}

impl CpuStats {
    /// Parses the text of a stats file.
    pub fn parse(text: &str, path: &Path) -> Result<CpuStats, Error> {
        let mut s = CpuStats::default();
        for line in text.lines() {
            let Some((key, val)) = line.split_once(':') else {
                continue;
            };
            let slot = match key.trim() {
                "entries" => &mut s.entries,
                "overrun" => &mut s.overrun,
                "commit overrun" => &mut s.commit_overrun,
                "bytes" => &mut s.bytes,
                "dropped events" => &mut s.dropped,
                "read events" => &mut s.read,
                _ => continue,
            };
            *slot = val.trim().parse().map_err(|_| Error::Stats {
                path: path.to_path_buf(),
                line: line.to_string(),
            })?;
        }
        Ok(s)
    }

    /// Reads `<instance>/per_cpu/cpu<cpu>/stats`.
    pub fn read(instance: &Path, cpu: usize) -> Result<CpuStats, Error> {
        let path = instance.join(format!("per_cpu/cpu{cpu}/stats"));
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        CpuStats::parse(&text, &path)
    }

    /// The `now ts:` line of a stats file: the instance's trace clock when
    /// the file was read, in the units of record time stamps (`secs.usecs`
    /// for nanosecond clocks, truncated to the microsecond; the raw count
    /// for the others, such as `counter` and `x86-tsc`).
    pub fn now_ts(text: &str) -> Option<u64> {
        let v = text.lines().find_map(|l| l.strip_prefix("now ts:"))?.trim();
        match v.split_once('.') {
            Some((secs, usecs)) if usecs.len() == 6 => {
                let secs: u64 = secs.parse().ok()?;
                let usecs: u64 = usecs.parse().ok()?;
                secs.checked_mul(1_000_000_000)?.checked_add(usecs * 1000)
            }
            Some(_) => None,
            None => v.parse().ok(),
        }
    }

    /// Events lost on this CPU by the kernel's own count.
    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_ts_in_both_clock_styles() {
        let ns = "entries: 0\noldest event ts: 10198.923860\nnow ts: 10199.078825\n";
        assert_eq!(CpuStats::now_ts(ns), Some(10_199_078_825_000));
        assert_eq!(
            CpuStats::now_ts("now ts:     3.000001\n"),
            Some(3_000_001_000)
        );
        assert_eq!(
            CpuStats::now_ts("now ts: 81234567890\n"),
            Some(81_234_567_890)
        );
        assert_eq!(CpuStats::now_ts("entries: 0\n"), None);
        assert_eq!(CpuStats::now_ts("now ts: 1.5\n"), None);
    }

    #[test]
    fn parses_kernel_stats() {
        // per_cpu/cpu0/stats of the host overflow capture (6.18)
        let text = "entries: 96\noverrun: 39904\ncommit overrun: 0\nbytes: 12096\noldest event ts:   604.804652\nnow ts:   604.902755\ndropped events: 0\nread events: 0\n";
        let s = CpuStats::parse(text, Path::new("x")).unwrap();
        assert_eq!(
            (s.entries, s.overrun, s.bytes, s.lost()),
            (96, 39904, 12096, 39904)
        );
        assert!(CpuStats::parse("overrun: x\n", Path::new("x")).is_err());
    }
}
