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
pub mod env;
pub mod error;
pub mod fetch;
pub mod hint;
pub mod kernel;
pub mod kstrtox;
pub mod parse;
pub mod render;
pub mod types;

pub use arch::Arch;
pub use ast::{Definition, Fetch, ProbeArg, ProbeDef, ProbeKind};
pub use env::{Environment, FileKind, Kallsyms, Offline};
pub use error::{ErrorKind, ProbeError, Silent, TpErr};
pub use kernel::KernelVersion;
pub use parse::{Checked, Interface, Target, Unchecked, check_line};

impl Checked {
    /// The line the kernel would print when read back, for an accepted probe.
    pub fn normalized(&self, arch: Arch) -> Option<String> {
        match &self.definition {
            Ok(Definition::Probe(p)) => Some(render::readback(p, arch)),
            Ok(Definition::Remove(_)) => Some(self.command.clone()),
            _ => None,
        }
    }
}
