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
//!
//! Once a sink has named the frames, [`probe_machinery`] says how many of
//! the innermost ones are the probe machinery's own (the kprobe or uprobe
//! dispatch, the trap or ftrace entry that led to it, the trace function
//! that saved the stack) rather than the traced code's.

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

/// Kernel functions that are the probe machinery's, not the traced code's:
/// the trace functions that save the stack (kernel/trace/trace_kprobe.c,
/// trace_uprobe.c, trace_fprobe.c), kprobe and kretprobe dispatch
/// (kernel/kprobes.c, rethook), the ftrace entry of ftrace-based kprobes
/// and fprobes, the breakpoint trap entries of x86_64, arm64, arm and
/// riscv64, and the uprobe path back to user space
/// (kernel/events/uprobes.c, kernel/entry/common.c). Read from real stacks:
/// a host uprobe's `__uprobe_trace_func, uprobe_dispatcher, handler_chain,
/// uprobe_notify_resume, irqentry_exit_to_user_mode, asm_exc_int3`, an
/// x86_64 6.1 kprobe's `aggr_pre_handler, kprobe_ftrace_handler,
/// 0xffffffffc04ee0c8 (the ftrace trampoline, no symbol), ksys_read+0x5`.
pub const PROBE_MACHINERY: &[&str] = &[
    // the trace functions that save the stack
    "__kprobe_trace_func",
    "kprobe_trace_func",
    "__kretprobe_trace_func",
    "kretprobe_trace_func",
    "__uprobe_trace_func",
    "uprobe_trace_func",
    "uretprobe_trace_func",
    "fentry_trace_func",
    "__fentry_trace_func",
    "fexit_trace_func",
    "__fexit_trace_func",
    "kprobe_perf_func",
    "kretprobe_perf_func",
    // kprobe, kretprobe and fprobe dispatch
    "kprobe_dispatcher",
    "kretprobe_dispatcher",
    "fentry_dispatcher",
    "fexit_dispatcher",
    "aggr_pre_handler",
    "aggr_post_handler",
    "pre_handler_kretprobe",
    "kretprobe_rethook_handler",
    "__kretprobe_trampoline_handler",
    "kretprobe_trampoline_handler",
    "trampoline_handler",
    "__kretprobe_trampoline",
    "kretprobe_trampoline",
    "rethook_trampoline_handler",
    "arch_rethook_trampoline_callback",
    "arch_rethook_trampoline",
    "fprobe_handler",
    "__fprobe_handler",
    "fprobe_kprobe_handler",
    "fprobe_entry",
    "fprobe_return",
    "fprobe_exit_handler",
    "fprobe_ftrace_entry",
    "fprobe_fgraph_entry",
    "optimized_callback",
    "opt_pre_handler",
    // ftrace entry (ftrace-based kprobes, fprobes)
    "kprobe_ftrace_handler",
    "ftrace_trampoline",
    "ftrace_caller",
    "ftrace_regs_caller",
    "ftrace_call",
    "ftrace_regs_call",
    "ftrace_common",
    "ftrace_ops_list_func",
    "arch_ftrace_ops_list_func",
    "ftrace_ops_assist_func",
    "ftrace_graph_func",
    "function_graph_enter_regs",
    "ftrace_return_to_handler",
    "__ftrace_return_to_handler",
    "return_to_handler",
    // breakpoint traps: x86_64
    "kprobe_int3_handler",
    "kprobe_debug_handler",
    "do_int3",
    "do_int3_user",
    "exc_int3",
    "asm_exc_int3",
    "exc_debug",
    "asm_exc_debug",
    "notify_die",
    "kprobe_exceptions_notify",
    // arm64
    "kprobe_breakpoint_handler",
    "kprobe_breakpoint_ss_handler",
    "kprobe_brk_handler",
    "kprobe_ss_brk_handler",
    "call_break_hook",
    "brk_handler",
    "do_brk_handler",
    "do_el1_brk64",
    "do_debug_exception",
    "el1_dbg",
    "el1_brk64",
    "el1h_64_sync_handler",
    "el1h_64_sync",
    "el0_dbg",
    "el0_brk64",
    "el0t_64_sync_handler",
    "el0t_64_sync",
    // arm
    "kprobe_handler",
    "kprobe_trap_handler",
    "call_undef_hook",
    "do_undefinstr",
    "__und_svc",
    "__und_usr",
    // riscv64
    "handle_break",
    "do_trap_break",
    "handle_exception",
    // uprobes and the way back to user space
    "uprobe_dispatcher",
    "uretprobe_dispatcher",
    "handler_chain",
    "handle_swbp",
    "handle_uretprobe_chain",
    "handle_trampoline",
    "uprobe_handle_trampoline",
    "uprobe_notify_resume",
    "uprobe_pre_sstep_notifier",
    "uprobe_post_sstep_notifier",
    "arch_uprobe_exception_notify",
    "__do_sys_uretprobe",
    "__x64_sys_uretprobe",
    "resume_user_mode_work",
    "exit_to_user_mode_loop",
    "exit_to_user_mode_prepare",
    "irqentry_exit_to_user_mode",
    "do_notify_resume",
];

/// How many of a kernel stack's innermost frames are the probe machinery's
/// ([`PROBE_MACHINERY`]): the leading run of frames whose names (`None`
/// for an address with no symbol; a compiler suffix such as `.isra.0` or
/// `.cold` is ignored) are in the list, with an unnamed frame right after
/// such a frame counted too (an ftrace or optprobe trampoline, which has no
/// symbol). The first frame after the run is the probed function (or what
/// called it, for a return probe). A probe on one of these functions
/// itself loses its own frame with them.
pub fn probe_machinery<'n>(names: impl IntoIterator<Item = Option<&'n str>>) -> usize {
    let mut n = 0;
    let mut after_named = false;
    for name in names {
        match name {
            Some(name) => {
                let base = name.split('.').next().unwrap_or(name);
                if !PROBE_MACHINERY.contains(&base) {
                    break;
                }
                after_named = true;
            }
            None if after_named => after_named = false,
            None => break,
        }
        n += 1;
    }
    n
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

    /// Stacks read on real kernels: the machinery before the traced code
    /// is counted, nothing after it.
    #[test]
    fn probe_machinery_frames() {
        // (frames innermost first, how many are the machinery's)
        let table: &[(&[Option<&str>], usize)] = &[
            // host 6.18 uprobe (stacktrace trigger): all machinery
            (
                &[
                    Some("__uprobe_trace_func"),
                    Some("uprobe_dispatcher"),
                    Some("handler_chain"),
                    Some("uprobe_notify_resume"),
                    Some("irqentry_exit_to_user_mode"),
                    Some("asm_exc_int3"),
                ],
                6,
            ),
            // x86_64 6.1 guest, two kprobes on ksys_read (hist stacktrace):
            // the ftrace trampoline has no symbol
            (
                &[
                    Some("aggr_pre_handler"),
                    Some("kprobe_ftrace_handler"),
                    None,
                    Some("ksys_read"),
                    Some("do_syscall_64"),
                    Some("entry_SYSCALL_64_after_hwframe"),
                ],
                3,
            ),
            // arm64 breakpoint kprobe
            (
                &[
                    Some("kprobe_dispatcher"),
                    Some("kprobe_breakpoint_handler"),
                    Some("call_break_hook"),
                    Some("brk_handler"),
                    Some("do_debug_exception"),
                    Some("el1_dbg"),
                    Some("el1h_64_sync_handler"),
                    Some("el1h_64_sync"),
                    Some("do_sys_openat2"),
                    Some("__arm64_sys_openat"),
                ],
                8,
            ),
            // a suffixed clone is the same function
            (&[Some("kprobe_dispatcher.cold"), Some("vfs_read")], 1),
            // the traced code's frames are kept, even a listed name after
            (&[Some("vfs_read"), Some("kprobe_dispatcher")], 0),
            // an unnamed frame with no machinery before it is kept
            (&[None, Some("kprobe_dispatcher")], 0),
            // only one unnamed frame after a named one
            (&[Some("kprobe_ftrace_handler"), None, None], 2),
            (&[], 0),
        ];
        for (i, (names, want)) in table.iter().enumerate() {
            assert_eq!(probe_machinery(names.iter().copied()), *want, "row {i}");
        }
    }
}
