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
//! kernel release. It does not format event fields, nor look task names
//! up (that is ktrace-stream's [`ktrace_stream::Comms`]).

use crate::num;
use ktrace_event::append::{append, fill};

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
    /// Kernels before the migrate-disable column (5.10: `d.h.`, four
    /// characters): otherwise as [`FlagStyle::Classic`].
    ClassicFour,
}

impl FlagStyle {
    /// The style for a kernel release string such as `6.18.44-fc` or
    /// `6.1.0-28-cloud-amd64` (unparsable releases get the newest style):
    /// for a recording, whose kernel cannot be asked. Four columns before
    /// 5.13 (the migrate-disable column came with it), bit 0x02 read as
    /// before 6.13.
    pub fn for_release(release: &str) -> FlagStyle {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        match (it.next(), it.next()) {
            (Some(major), Some(minor)) if (major, minor) < (5, 13) => FlagStyle::ClassicFour,
            (Some(major), Some(minor)) if (major, minor) < (6, 13) => FlagStyle::Classic,
            _ => FlagStyle::Lazy,
        }
    }

    /// The style the running kernel prints, from the header of an
    /// instance's (empty) `trace` file: one `=>` line per flag column, so
    /// four lines mean no migrate-disable column (5.10); otherwise the
    /// release decides what bit 0x02 means.
    pub fn from_trace_header(header: &str, release: &str) -> FlagStyle {
        let columns = header
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter(|l| l.contains("=>"))
            .count();
        match (columns, FlagStyle::for_release(release)) {
            (4, _) => FlagStyle::ClassicFour,
            // five columns on an older release (a backport): as the header says
            (_, FlagStyle::ClassicFour) => FlagStyle::Classic,
            (_, style) => style,
        }
    }

    /// Writes the 5-character column (4 for [`FlagStyle::ClassicFour`]) for
    /// `flags` and `preempt_count`.
    pub fn write(self, out: &mut Vec<u8>, flags: u8, preempt_count: u8) {
        let irqs_off = flags & IRQS_OFF != 0;
        let bh_off = flags & BH_OFF != 0;
        let c1 = if irqs_off && bh_off {
            b'D'
        } else if irqs_off {
            b'd'
        } else if bh_off {
            b'b'
        } else if self != FlagStyle::Lazy && flags & BIT_02 != 0 {
            b'X'
        } else {
            b'.'
        };
        let c2 = match self {
            FlagStyle::Classic | FlagStyle::ClassicFour => {
                match flags & (NEED_RESCHED | PREEMPT_RESCHED) {
                    x if x == NEED_RESCHED | PREEMPT_RESCHED => b'N',
                    NEED_RESCHED => b'n',
                    PREEMPT_RESCHED => b'p',
                    _ => b'.',
                }
            }
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
        if self != FlagStyle::ClassicFour {
            out.push(if hi != 0 { hex[hi as usize] } else { b'.' });
        }
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
    fill(out, b' ', 7usize.saturating_sub(used));
    out.extend_from_slice(b" [");
    let mut b = [0u8; 24];
    let d = num::digits(&mut b, cpu as u64, 10, false);
    fill(out, b'0', 3usize.saturating_sub(d.len()));
    append(out, d);
    out.extend_from_slice(b"] ");
}

#[cfg(test)]
mod tests {

    #[test]
    fn flag_columns_come_from_the_trace_header() {
        // The header print_func_help_header_irq() writes before 5.13 (four
        // columns) and after (five, with migrate-disable).
        let h510 = "# tracer: nop\n#\n# entries-in-buffer/entries-written: 0/0   #P:2\n#\n\
#                              _-----=> irqs-off\n\
#                             / _----=> need-resched\n\
#                            | / _---=> hardirq/softirq\n\
#                            || / _--=> preempt-depth\n\
#                            ||| /     delay\n\
#           TASK-PID   CPU#  ||||   TIMESTAMP  FUNCTION\n\
#              | |       |   ||||      |         |\n";
        let h61 = "# tracer: nop\n#\n\
#                                _-----=> irqs-off/BH-disabled\n\
#                               / _----=> need-resched\n\
#                              | / _---=> hardirq/softirq\n\
#                              || / _--=> preempt-depth\n\
#                              ||| / _-=> migrate-disable\n\
#                              |||| /     delay\n";
        assert_eq!(
            FlagStyle::from_trace_header(h510, "5.10.0-33-cloud-amd64"),
            FlagStyle::ClassicFour
        );
        assert_eq!(
            FlagStyle::from_trace_header(h61, "6.1.0-56-cloud-amd64"),
            FlagStyle::Classic
        );
        assert_eq!(FlagStyle::from_trace_header(h61, "6.18.4"), FlagStyle::Lazy);
        assert_eq!(
            FlagStyle::from_trace_header("", "6.1.0"),
            FlagStyle::Classic
        );
        let mut out = Vec::new();
        FlagStyle::ClassicFour.write(&mut out, IRQS_OFF | HARDIRQ, 0x21);
        assert_eq!(out, b"d.h1", "5.10 prints four characters");
        out.clear();
        FlagStyle::Classic.write(&mut out, IRQS_OFF | HARDIRQ, 0x21);
        assert_eq!(out, b"d.h12");
    }

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
        // a 5.10 recording (report): four columns, as 5.10's trace prints
        // (a report of arm64 5.10's recording printed five)
        assert_eq!(
            FlagStyle::for_release("5.10.0-32-cloud-arm64"),
            FlagStyle::ClassicFour
        );
        assert_eq!(FlagStyle::for_release("5.13.0"), FlagStyle::Classic);
        // live, the trace header decides: five columns on an old release
        let five = "#                              _-----=> irqs-off/BH-disabled\n\
                    #                             / _----=> need-resched\n\
                    #                            | / _---=> hardirq/softirq\n\
                    #                            || / _--=> preempt-depth\n\
                    #                            ||| / _-=> migrate-disable\n";
        assert_eq!(
            FlagStyle::from_trace_header(five, "5.10.0"),
            FlagStyle::Classic
        );
        assert_eq!(
            FlagStyle::from_trace_header(
                &five.lines().take(4).collect::<Vec<_>>().join("\n"),
                "6.1.0"
            ),
            FlagStyle::ClassicFour
        );
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
    }
}
