//! ktrace-probe: the kernel's dynamic-probe definition language.
//!
//! Parses, checks, names and renders the lines accepted by `kprobe_events`,
//! `uprobe_events` and `dynamic_events` (Documentation/trace/kprobetrace.rst,
//! uprobetracer.rst; kernel/trace/trace_probe.c, trace_kprobe.c, trace_uprobe.c,
//! trace_eprobe.c, trace_dynevent.c of Linux 6.1). Pure code over strings: no I/O.
//! Errors carry the kernel's `error_log` message and caret position; checks that need
//! the target kernel go through an [`Environment`] and are otherwise listed as not
//! checked.
//!
//! # Limits (Linux 6.1, read from Debian's 6.1.192 sources and checked on the rig)
//!
//! | limit | value | where |
//! |---|---|---|
//! | argument expression (`MAX_ARGSTR_LEN`) | 63 bytes | [`fetch::MAX_ARGSTR_LEN`] |
//! | argument name (`MAX_ARG_NAME_LEN`) | 32 bytes | [`fetch::MAX_ARG_NAME_LEN`] |
//! | arguments (`MAX_TRACE_ARGS`) | 128, further words ignored | [`fetch::MAX_TRACE_ARGS`] |
//! | array length (`MAX_ARRAY_LEN`) | 64 | [`fetch::MAX_ARRAY_LEN`] |
//! | argument data per event (`MAX_PROBE_EVENT_SIZE`) | 3072 bytes | [`fetch::MAX_PROBE_EVENT_SIZE`] |
//! | fetch instructions (`FETCH_INSN_MAX`) | 16 (about 12 nested dereferences) | `fetch.rs` |
//! | event and group names (`MAX_EVENT_NAME_LEN`) | 63 bytes | [`parse::MAX_EVENT_NAME_LEN`] |
//! | maxactive (`KRETPROBE_MAXACTIVE_MAX`) | 1..=4096, or 2^31..2^32-1 (a negative `int` to the kernel: the default once registered); default max(10, 2 × CPUs) | [`parse::KRETPROBE_MAXACTIVE_MAX`] |
//! | `$stackN`, `$argN` on kprobes | N ≤ THREAD_SIZE / sizeof(long) = 2048 | [`Arch::param_max_stack`] |
//! | one written line (`WRITE_BUFSIZE` - 2) | 4094 bytes | [`parse::MAX_LINE_LEN`] |
//!
//! Version gates ([`kernel::Features`]): `symstr`, the non-unique-symbol check and
//! the event size limit are present in Debian's 6.1 (backported); "$arg* can be used
//! only on function entry or exit" and the uprobe rejection of `symbol`/`symstr` were
//! observed on 6.18 (the version that introduced them is an estimate); `char` is
//! accepted only with `--kernel` 6.5 or later (an estimate, not verified). Newer
//! kernels' BTF argument names, `$arg*` and `%pd`/`%pD` are rejected by
//! [`check_line`] as on 6.1; [`btfarg::compile`] checks them against a kernel's BTF
//! and compiles them to the classic form.
//!
//! ```
//! use ktrace_probe::{check_line, Arch, Offline, Target};
//! let c = check_line("p:myev do_sys_openat2 dfd=%di:s32", Target::new(Arch::X86_64), &Offline);
//! assert_eq!(c.normalized(Arch::X86_64).as_deref(),
//!            Some("p:kprobes/myev do_sys_openat2 dfd=%di:s32"));
//! let c = check_line("p vfs_read %rdi", Target::new(Arch::X86_64), &Offline);
//! let e = c.definition.unwrap_err();
//! assert_eq!((e.message, e.pos), ("Invalid register name", Some(11)));
//! ```

pub mod arch;
pub mod ast;
pub mod boot;
pub mod btfarg;
pub mod btfvar;
pub mod env;
pub mod error;
pub mod fetch;
pub mod filter;
pub mod head;
pub mod hint;
pub mod kernel;
pub mod kstrtox;
pub mod naming;
pub mod parse;
pub mod render;
pub mod similar;
pub mod types;

pub use arch::Arch;
pub use ast::{Definition, Fetch, ProbeArg, ProbeDef, ProbeKind};
pub use env::{Environment, FileKind, Kallsyms, Offline};
pub use error::{ErrorKind, ProbeError, Silent, TpErr};
pub use head::{Head, head};
pub use kernel::KernelVersion;
pub use parse::{
    Checked, Interface, NO_EPROBES_WHY, NO_KPROBES_WHY, Target, Unchecked, check_line,
};

/// Parses a line as the kernel lists it in `dynamic_events`, `kprobe_events`
/// or `uprobe_events` (a probe someone else created, or a captured fixture),
/// whose architecture and kernel are not known: the first reading any
/// architecture accepts, as 6.1 or as 6.18 would. `None` for lines this
/// language does not cover (`f:`, `t:`, synthetic events).
pub fn parse_listed(line: &str) -> Option<ProbeDef> {
    let versions = [KernelVersion::DEFAULT, KernelVersion::new(6, 18)];
    let native = Arch::native().into_iter();
    for arch in native.chain(Arch::ALL.iter().copied()) {
        for kernel in versions {
            let mut t = Target::new(arch);
            t.kernel = kernel;
            if let Ok(Definition::Probe(p)) = check_line(line, t, &Offline).definition {
                return Some(p);
            }
        }
    }
    None
}

impl Checked {
    /// The line the kernel would print when read back, for an accepted probe.
    pub fn normalized(&self, arch: Arch) -> Option<String> {
        match &self.definition {
            Ok(Definition::Probe(p)) => Some(render::readback(p, arch)),
            Ok(Definition::Remove(_)) => Some(self.command.clone()),
            Ok(Definition::Fprobe(f)) => Some(render::fprobe_readback(f)),
            Ok(Definition::Synthetic(d)) => Some(render::synth_readback(d)),
            _ => None,
        }
    }
}
