//! ftrace's stack records decoded: the frames of a `kernel_stack` record
//! (`struct stack_entry`, written by a `stacktrace` trigger or
//! `func_stack_trace`) and of a `user_stack` record (`struct
//! userstack_entry`, written with `options/userstacktrace`), with the one
//! stop rule the kernel's own `trace` file uses.
//!
//! Mirrors `trace_stack_print()` and `trace_user_stack_print()` in
//! kernel/trace/trace_output.c:
//!
//! - a kernel stack's frames run from `caller` to the end of the record (the
//!   record is sized to the frames saved, whatever the format's
//!   `caller[8]` says) and stop before the first `ULONG_MAX` (all ones in
//!   the traced kernel's `long`); a zero is a frame (the kernel prints it
//!   as `0`);
//! - a user stack's frames are at most the format's `caller` count
//!   (`FTRACE_STACK_ENTRIES`) and stop before the first zero. (Before
//!   Linux 5.2 user stacks ended at `ULONG_MAX` and a zero printed as `??`;
//!   the kernels ktrace supports stop at zero, and so does this.)
//!
//! It decodes only: it names no frame (symbolizing is the sinks' job) and
//! does not decide which event a stack belongs to (that is the stream's
//! pairing). A [`Stack`] borrows the record's bytes and reads a frame as it
//! is asked for: nothing is allocated.

use crate::{Endian, EventFormat};

/// The frames of one stack record, read from its bytes on demand.
#[derive(Debug, Clone, Copy)]
pub struct Stack<'a> {
    /// True for a `user_stack` record, false for `kernel_stack`.
    pub user: bool,
    /// The bytes from `caller` on: the end of the record for a kernel
    /// stack, at most the format's `caller` count of frames for a user one.
    bytes: &'a [u8],
    /// The traced kernel's `long` (4 or 8 bytes).
    long_size: usize,
    endian: Endian,
}

impl<'a> Stack<'a> {
    /// The stack in record `data` of event `format` (`kernel_stack` or
    /// `user_stack`), or `None` for any other event, or a format without a
    /// `caller` array of 4- or 8-byte words.
    pub fn read(format: &EventFormat, data: &'a [u8], endian: Endian) -> Option<Stack<'a>> {
        let user = match format.name.as_str() {
            "kernel_stack" => false,
            "user_stack" => true,
            _ => return None,
        };
        let caller = format.fields.iter().find(|f| f.name == "caller")?;
        let long_size = caller.elem_size;
        if long_size != 4 && long_size != 8 {
            return None;
        }
        let mut bytes = data.get(caller.offset..).unwrap_or(&[]);
        if user {
            let max = caller.count.saturating_mul(long_size);
            bytes = &bytes[..bytes.len().min(max)];
        }
        Some(Stack {
            user,
            bytes,
            long_size,
            endian,
        })
    }

    /// The traced kernel's `long` in bytes (4 or 8): user addresses print
    /// as twice as many hex digits.
    pub fn long_size(&self) -> usize {
        self.long_size
    }

    /// The frames, innermost first, up to the stop rule (see the module
    /// notes).
    pub fn frames(&self) -> Frames<'a> {
        Frames {
            words: self.bytes.chunks_exact(self.long_size),
            user: self.user,
            long_size: self.long_size,
            endian: self.endian,
        }
    }
}

/// The frames of a [`Stack`], innermost first.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    words: std::slice::ChunksExact<'a, u8>,
    user: bool,
    long_size: usize,
    endian: Endian,
}

impl Iterator for Frames<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let b = self.words.next()?;
        let (addr, end) = if self.long_size == 8 {
            (self.endian.u64(b), u64::MAX)
        } else {
            (u64::from(self.endian.u32(b)), u64::from(u32::MAX))
        };
        let stop = if self.user { addr == 0 } else { addr == end };
        if stop {
            // nothing after the stop is a frame
            self.words = [].chunks_exact(self.long_size);
            return None;
        }
        Some(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "name: kernel_stack\nID: 4\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]\n";

    const USER: &str = "name: user_stack\nID: 13\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]\n";

    /// A 32-bit kernel's kernel_stack (arm, `long` of 4 bytes).
    const KERNEL32: &str = "name: kernel_stack\nID: 4\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned long caller[8];\toffset:12;\tsize:32;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]\n";

    fn record(head: usize, words: &[u64], long: usize) -> Vec<u8> {
        let mut d = vec![0u8; head];
        for w in words {
            if long == 8 {
                d.extend_from_slice(&w.to_le_bytes());
            } else {
                d.extend_from_slice(&(*w as u32).to_le_bytes());
            }
        }
        d
    }

    fn frames(format: &str, long: usize, head: usize, words: &[u64]) -> Option<(bool, Vec<u64>)> {
        let f = EventFormat::parse(format, long).unwrap();
        let data = record(head, words, long);
        let s = Stack::read(&f, &data, Endian::Little)?;
        Some((s.user, s.frames().collect()))
    }

    const M: u64 = u64::MAX;

    #[test]
    fn stop_rules() {
        // (format, long size, words from caller on, the frames)
        let table: &[(&str, usize, &[u64], &[u64])] = &[
            // kernel: to the record's end, past the format's 8
            (
                KERNEL,
                8,
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            ),
            // kernel: stops before ULONG_MAX, nothing after it counts
            (KERNEL, 8, &[1, 2, M, 4], &[1, 2]),
            // kernel: a zero is a frame (printed `0`)
            (KERNEL, 8, &[1, 0, 3], &[1, 0, 3]),
            (KERNEL, 8, &[], &[]),
            (KERNEL, 8, &[M], &[]),
            // user: stops before the first zero
            (USER, 8, &[1, 2, 0, 4], &[1, 2]),
            // user: ULONG_MAX is an address like any other
            (USER, 8, &[1, M, 3], &[1, M, 3]),
            // user: at most the format's count
            (
                USER,
                8,
                &[1, 2, 3, 4, 5, 6, 7, 8, 9],
                &[1, 2, 3, 4, 5, 6, 7, 8],
            ),
            (USER, 8, &[0, 1], &[]),
            // 32-bit: ULONG_MAX is 0xffffffff
            (KERNEL32, 4, &[1, 2, 0xffff_ffff, 4], &[1, 2]),
            (KERNEL32, 4, &[1, 0, 3], &[1, 0, 3]),
        ];
        for (i, (fmt, long, words, want)) in table.iter().enumerate() {
            let head = if *fmt == KERNEL32 { 12 } else { 16 };
            let (_, got) = frames(fmt, *long, head, words).unwrap();
            assert_eq!(&got, want, "row {i}");
        }
    }

    #[test]
    fn kind_and_other_events() {
        assert!(!frames(KERNEL, 8, 16, &[1]).unwrap().0);
        assert!(frames(USER, 8, 16, &[1]).unwrap().0);
        let other = KERNEL.replace("kernel_stack", "function");
        assert!(frames(&other, 8, 16, &[1]).is_none());
        let no_caller = KERNEL.replace("caller[8]", "callers[8]");
        assert!(frames(&no_caller, 8, 16, &[1]).is_none());
    }

    #[test]
    fn a_short_record_is_not_a_panic() {
        // cut inside the header, and inside a frame
        let f = EventFormat::parse(KERNEL, 8).unwrap();
        for n in [0, 8, 17, 23] {
            let data = record(16, &[1, 2], 8);
            let s = Stack::read(&f, &data[..n], Endian::Little).unwrap();
            assert_eq!(s.frames().count(), 0, "{n} bytes");
        }
        let data = record(16, &[1, 2], 8);
        let s = Stack::read(&f, &data[..31], Endian::Little).unwrap();
        assert_eq!(s.frames().collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn big_endian_frames() {
        let f = EventFormat::parse(KERNEL, 8).unwrap();
        let mut data = vec![0u8; 16];
        data.extend_from_slice(&0x1122u64.to_be_bytes());
        data.extend_from_slice(&u64::MAX.to_be_bytes());
        let s = Stack::read(&f, &data, Endian::Big).unwrap();
        assert_eq!(s.frames().collect::<Vec<_>>(), [0x1122]);
    }
}
