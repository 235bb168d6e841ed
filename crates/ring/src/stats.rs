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

    /// Events lost on this CPU by the kernel's own count.
    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
