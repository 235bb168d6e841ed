//! The context columns of a kernel `trace` line: task, pid, CPU, the
//! irqs-off / need-resched / hardirq-softirq / preempt-depth /
//! migrate-disable column and the time stamp.
//!
//! Mirrors `trace_print_context()`, `trace_print_lat_fmt()` and
//! `trace_print_time()` in kernel/trace/trace_output.c and
//! `trace_find_cmdline()` in kernel/trace/trace_sched_switch.c /
//! trace.c (`<idle>` for pid 0, `<...>` when the pid is not in
//! `saved_cmdlines`). The flag bits changed meaning in 6.13 (bit 0x02 went
//! from IRQS_NOSUPPORT to NEED_RESCHED_LAZY), so the style is chosen from the
//! kernel release. It does not format event fields.

use crate::num;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hasher for pid keys (SipHash showed up in profiles).
#[derive(Default)]
struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.0 = (v as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

const IRQS_OFF: u8 = 0x01;
const BIT_02: u8 = 0x02; // IRQS_NOSUPPORT before 6.13, NEED_RESCHED_LAZY after
const NEED_RESCHED: u8 = 0x04;
const HARDIRQ: u8 = 0x08;
const SOFTIRQ: u8 = 0x10;
const PREEMPT_RESCHED: u8 = 0x20;
const NMI: u8 = 0x40;
const BH_OFF: u8 = 0x80;

/// How the running kernel renders `common_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagStyle {
    /// Kernels before 6.13: 0x02 is IRQS_NOSUPPORT (`X`), resched is `N n p`.
    Classic,
    /// 6.13 and later: 0x02 is NEED_RESCHED_LAZY, resched is `B N L b n l p`.
    Lazy,
}

impl FlagStyle {
    /// The style for a kernel release string such as `6.18.44-fc` or
    /// `6.1.0-28-cloud-amd64` (unparsable releases get the newest style).
    pub fn for_release(release: &str) -> FlagStyle {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        match (it.next(), it.next()) {
            (Some(major), Some(minor)) if (major, minor) < (6, 13) => FlagStyle::Classic,
            _ => FlagStyle::Lazy,
        }
    }

    /// Writes the 5-character column for `flags` and `preempt_count`.
    pub fn write(self, out: &mut Vec<u8>, flags: u8, preempt_count: u8) {
        let irqs_off = flags & IRQS_OFF != 0;
        let bh_off = flags & BH_OFF != 0;
        let c1 = if irqs_off && bh_off {
            b'D'
        } else if irqs_off {
            b'd'
        } else if bh_off {
            b'b'
        } else if self == FlagStyle::Classic && flags & BIT_02 != 0 {
            b'X'
        } else {
            b'.'
        };
        let c2 = match self {
            FlagStyle::Classic => match flags & (NEED_RESCHED | PREEMPT_RESCHED) {
                x if x == NEED_RESCHED | PREEMPT_RESCHED => b'N',
                NEED_RESCHED => b'n',
                PREEMPT_RESCHED => b'p',
                _ => b'.',
            },
            FlagStyle::Lazy => match flags & (NEED_RESCHED | BIT_02 | PREEMPT_RESCHED) {
                x if x == NEED_RESCHED | BIT_02 | PREEMPT_RESCHED => b'B',
                x if x == NEED_RESCHED | PREEMPT_RESCHED => b'N',
                x if x == BIT_02 | PREEMPT_RESCHED => b'L',
                x if x == NEED_RESCHED | BIT_02 => b'b',
                NEED_RESCHED => b'n',
                BIT_02 => b'l',
                PREEMPT_RESCHED => b'p',
                _ => b'.',
            },
        };
        let nmi = flags & NMI != 0;
        let hard = flags & HARDIRQ != 0;
        let soft = flags & SOFTIRQ != 0;
        let c3 = match (nmi, hard, soft) {
            (true, true, _) => b'Z',
            (true, false, _) => b'z',
            (false, true, true) => b'H',
            (false, true, false) => b'h',
            (false, false, true) => b's',
            _ => b'.',
        };
        out.extend_from_slice(&[c1, c2, c3]);
        let hex = b"0123456789abcdef";
        let lo = preempt_count & 0xf;
        let hi = preempt_count >> 4;
        out.push(if lo != 0 { hex[lo as usize] } else { b'.' });
        out.push(if hi != 0 { hex[hi as usize] } else { b'.' });
    }
}

/// Task names by pid, as the kernel's `saved_cmdlines` has them.
#[derive(Debug, Clone, Default)]
pub struct Comms {
    map: HashMap<i32, String, BuildHasherDefault<PidHasher>>,
    use_proc: bool,
    saved_cmdlines: Option<std::path::PathBuf>,
    last_reload: Option<std::time::Instant>,
    /// Changes whenever `map` may have changed, unique across all tables
    /// (printers cache formatted columns keyed by it).
    generation: u64,
}

/// Source of [`Comms::generation`] values.
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Comms {
    /// An empty table.
    pub fn new() -> Comms {
        Comms::default()
    }

    /// Parses the text of `saved_cmdlines` (`<pid> <comm>` per line).
    pub fn from_saved_cmdlines(text: &str) -> Comms {
        let mut c = Comms::new();
        c.add_saved_cmdlines(text);
        c
    }

    /// Adds (or replaces) entries from `saved_cmdlines` text.
    pub fn add_saved_cmdlines(&mut self, text: &str) {
        self.touch();
        for line in text.lines() {
            if let Some((pid, comm)) = line.split_once(' ')
                && let Ok(pid) = pid.trim().parse()
            {
                self.map.insert(pid, comm.to_string());
            }
        }
    }

    /// Also look unknown pids up in `/proc/<pid>/comm` (live tracing).
    pub fn with_proc(mut self, on: bool) -> Comms {
        self.use_proc = on;
        self
    }

    /// On an unknown pid, re-read the kernel's `saved_cmdlines` at `path`
    /// (at most every 100 ms) before trying `/proc`: the kernel keeps names
    /// of processes that already exited, `/proc` does not (live tracing).
    pub fn with_saved_cmdlines_file(mut self, path: &std::path::Path) -> Comms {
        if let Ok(t) = std::fs::read_to_string(path) {
            self.add_saved_cmdlines(&t);
        }
        self.saved_cmdlines = Some(path.to_path_buf());
        self.last_reload = Some(std::time::Instant::now());
        self
    }

    /// Records `comm` for `pid`.
    pub fn insert(&mut self, pid: i32, comm: &str) {
        self.touch();
        self.map.insert(pid, comm.to_string());
    }

    /// Marks the table changed.
    fn touch(&mut self) {
        self.generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A value that changes whenever a name may have changed: the name
    /// [`Comms::get`] gives for a pid it knows stays the same while this
    /// does.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// True when `pid` has a name (`<idle>` for 0 counts; `<...>` does not).
    pub(crate) fn knows(&self, pid: i32) -> bool {
        pid == 0 || self.map.contains_key(&pid)
    }

    /// The name the kernel would print for `pid`: `<idle>` for 0, the saved
    /// name, else (optionally) `/proc`, else `<...>`.
    pub fn get(&mut self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        if self.map.contains_key(&pid) {
            return self.map.get(&pid).map_or("<...>", String::as_str);
        }
        if !self.map.contains_key(&pid)
            && let Some(path) = &self.saved_cmdlines
            && self
                .last_reload
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_millis(100))
        {
            self.last_reload = Some(std::time::Instant::now());
            if let Ok(t) = std::fs::read_to_string(path) {
                self.add_saved_cmdlines(&t);
            }
        }
        if !self.map.contains_key(&pid)
            && self.use_proc
            && pid > 0
            && let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        {
            self.touch();
            self.map.insert(pid, s.trim_end_matches('\n').to_string());
        }
        self.map.get(&pid).map(String::as_str).unwrap_or("<...>")
    }

    /// The saved name, if any (no `<...>` placeholder).
    pub fn lookup(&self, pid: i32) -> Option<&str> {
        self.map.get(&pid).map(String::as_str)
    }
}

/// Writes ` %5lu.%06lu` for a nanosecond time stamp, rounding to the
/// microsecond like `ns2usecs()`.
pub fn write_timestamp(out: &mut Vec<u8>, ts_ns: u64) {
    let us = ts_ns.saturating_add(500) / 1000;
    let mut b = [0u8; 24];
    out.push(b' ');
    num::right(out, num::digits(&mut b, us / 1_000_000, 10, false), 5);
    out.push(b'.');
    num::dec6(out, (us % 1_000_000) as u32);
}

/// Writes `%16s-%-7d [%03d] ` for a task and CPU.
pub fn write_task_cpu(out: &mut Vec<u8>, comm: &str, pid: i32, cpu: usize) {
    num::right(out, comm.as_bytes(), 16);
    out.push(b'-');
    let start = out.len();
    if pid < 0 {
        out.push(b'-');
    }
    num::dec(out, u64::from(pid.unsigned_abs()));
    let used = out.len() - start;
    out.resize(out.len() + 7usize.saturating_sub(used), b' ');
    out.extend_from_slice(b" [");
    let mut b = [0u8; 24];
    let d = num::digits(&mut b, cpu as u64, 10, false);
    out.resize(out.len() + 3usize.saturating_sub(d.len()), b'0');
    out.extend_from_slice(d);
    out.extend_from_slice(b"] ");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_columns() {
        let cases: &[(FlagStyle, u8, u8, &str)] = &[
            (FlagStyle::Lazy, 0, 0, "....."),
            (FlagStyle::Lazy, 0xff, 0xff, "DBZff"),
            (FlagStyle::Lazy, IRQS_OFF, 1, "d..1."),
            (FlagStyle::Lazy, BH_OFF | SOFTIRQ, 0x21, "b.s12"),
            (FlagStyle::Lazy, BIT_02, 0, ".l..."),
            (FlagStyle::Lazy, BIT_02 | PREEMPT_RESCHED, 0, ".L..."),
            (FlagStyle::Lazy, NEED_RESCHED | BIT_02, 0, ".b..."),
            (FlagStyle::Lazy, HARDIRQ | SOFTIRQ, 0, "..H.."),
            (FlagStyle::Lazy, NMI, 0, "..z.."),
            (FlagStyle::Classic, BIT_02, 0, "X...."),
            (
                FlagStyle::Classic,
                NEED_RESCHED | PREEMPT_RESCHED | HARDIRQ,
                0x10,
                ".Nh.1",
            ),
            (FlagStyle::Classic, PREEMPT_RESCHED | IRQS_OFF, 2, "dp.2."),
            (FlagStyle::Classic, 0xff, 0xff, "DNZff"),
        ];
        for &(style, flags, pc, want) in cases {
            let mut out = Vec::new();
            style.write(&mut out, flags, pc);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                want,
                "{style:?} {flags:#x} {pc:#x}"
            );
        }
    }

    #[test]
    fn releases() {
        assert_eq!(FlagStyle::for_release("6.18.44-fc-v769"), FlagStyle::Lazy);
        assert_eq!(FlagStyle::for_release("6.13.0"), FlagStyle::Lazy);
        assert_eq!(FlagStyle::for_release("6.12.9"), FlagStyle::Classic);
        assert_eq!(
            FlagStyle::for_release("6.1.0-28-cloud-amd64"),
            FlagStyle::Classic
        );
        assert_eq!(FlagStyle::for_release("5.10.0"), FlagStyle::Classic);
    }

    #[test]
    fn timestamps_and_tasks() {
        let cases = [
            (602_566_253_499u64, "   602.566253"),
            (602_566_253_500, "   602.566254"),
            (5_000, "     0.000005"),
            (123_456_789_999_999_999, " 123456790.000000"), // rounding carries, as ns2usecs does
        ];
        for (ts, want) in cases {
            let mut out = Vec::new();
            write_timestamp(&mut out, ts);
            assert_eq!(String::from_utf8(out).unwrap(), want, "{ts}");
        }
        let mut out = Vec::new();
        write_task_cpu(&mut out, "kfix_target", 12161, 1);
        assert_eq!(out, b"     kfix_target-12161   [001] ");
        for (comm, pid, cpu) in [
            ("a", -5, 7),
            ("a-very-long-name-here", 1234567, 1234),
            ("", 0, 0),
        ] {
            let mut out = Vec::new();
            write_task_cpu(&mut out, comm, pid, cpu);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("{comm:>16}-{pid:<7} [{cpu:03}] ")
            );
        }
        let mut c = Comms::from_saved_cmdlines("12161 kfix_target\n12 a b\n");
        assert_eq!(c.get(12161), "kfix_target");
        assert_eq!(c.get(12), "a b");
        assert_eq!(c.get(0), "<idle>");
        assert_eq!(c.get(5), "<...>");
        // a saved_cmdlines file is re-read when a pid is missing
        let dir = std::env::temp_dir().join(format!("ktrace_comms_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("saved_cmdlines");
        std::fs::write(&f, "7 first\n").unwrap();
        let mut c = Comms::new().with_saved_cmdlines_file(&f);
        assert_eq!(c.get(7), "first");
        std::fs::write(&f, "7 first\n8 later\n").unwrap();
        c.last_reload = None;
        assert_eq!(c.get(8), "later");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
