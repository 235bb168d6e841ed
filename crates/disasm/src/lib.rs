//! ktrace-disasm: the instructions of a function, where they begin, and
//! which of them a kprobe can take.
//!
//! A kprobe (and a uprobe) must sit on the first byte of an instruction; the
//! kernel decodes the function from its symbol up to the probe address and
//! refuses the write with "Probe point is not an instruction boundary"
//! (`BAD_INSN_BNDRY` in kernel/trace/trace_probe.h, returned for `-EILSEQ`
//! from `can_probe()` in arch/x86/kernel/kprobes/core.c). On top of the
//! boundary, each architecture refuses some instructions it cannot
//! single-step or emulate (x86: `__copy_instruction()` and
//! `prepare_emulation()`; arm64: `arm_probe_decode_insn()` and
//! `is_probed_address_atomic()` in arch/arm64/kernel/probes/decode-insn.c).
//! This crate decodes machine code with pure-Rust decoders (iced-x86 for
//! x86_64, yaxpeax-arm for arm64 and 32-bit arm) and writes those rules
//! again from the kernel's sources: it does not copy the kernel's tables.
//!
//! What it is not: it knows nothing about symbols, files or the running
//! kernel. The kprobe blacklist, ftrace patch sites known from the kernel's
//! tables, jump labels and alternatives are the caller's business (the
//! bytes alone cannot tell). [`kcore`] reads kernel text from /proc/kcore.
//! The architecture is ktrace-probe's [`ktrace_probe::Arch`]; [`Isa`] adds
//! which state 32-bit arm code is in (ARM or Thumb).

pub mod arm;
pub mod arm64;
pub mod kcore;
pub mod riscv;
pub mod x86;

use std::fmt;

use ktrace_probe::Arch;

/// The kernel's message when a probe is not on an instruction boundary
/// (`BAD_INSN_BNDRY`, kernel/trace/trace_probe.h).
pub const BOUNDARY_MESSAGE: &str = "Probe point is not an instruction boundary";
/// The kernel's message when a return probe has an offset
/// (`BAD_RETPROBE`, kernel/trace/trace_probe.h).
pub const RETPROBE_MESSAGE: &str = "Retprobe address must be an function entry";
/// The kernel's message for every other refusal by `register_kprobe()`
/// (`FAIL_REG_PROBE`): the blacklist, an instruction the architecture will
/// not step, an unaligned arm64 address, an arm64 ftrace patch site.
pub const FAIL_REG_MESSAGE: &str = "Failed to register probe event";

/// The instruction sets this crate decodes: an architecture's
/// ([`ktrace_probe::Arch`]), and for 32-bit arm which of its two states.
/// 32-bit x86 is not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// x86_64 (64-bit mode).
    X86_64,
    /// AArch64 (arm64, ARMv8-A).
    Arm64,
    /// 32-bit arm, ARM (A32) state.
    Arm,
    /// 32-bit arm, Thumb (T32) state.
    Thumb,
    /// riscv64 (RV64GC): boundaries only, see [`riscv`].
    Riscv64,
}

impl Isa {
    /// Every instruction set, in the order `--arch` help lists them.
    pub const ALL: [Isa; 5] = [Isa::X86_64, Isa::Arm64, Isa::Arm, Isa::Thumb, Isa::Riscv64];

    /// The instruction set of an architecture (32-bit arm: ARM state), if
    /// this crate decodes it.
    pub fn of(arch: Arch) -> Option<Isa> {
        match arch {
            Arch::X86_64 => Some(Isa::X86_64),
            Arch::Arm64 => Some(Isa::Arm64),
            Arch::Arm => Some(Isa::Arm),
            Arch::Riscv64 => Some(Isa::Riscv64),
            Arch::I386 => None,
        }
    }

    /// The architecture it belongs to.
    pub fn arch(self) -> Arch {
        match self {
            Isa::X86_64 => Arch::X86_64,
            Isa::Arm64 => Arch::Arm64,
            Isa::Arm | Isa::Thumb => Arch::Arm,
            Isa::Riscv64 => Arch::Riscv64,
        }
    }

    /// The name used on the command line and in messages: the
    /// architecture's ([`Arch::flag_name`]), or `thumb`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Thumb => "thumb",
            isa => isa.arch().flag_name(),
        }
    }

    /// Parses a name: an architecture's in any spelling [`Arch`] takes
    /// (the kernel's, uname's, Debian's), or an instruction set's (`a32`,
    /// `thumb`, `t32`).
    pub fn parse(name: &str) -> Result<Isa, Error> {
        match name {
            "thumb" | "t32" => Ok(Isa::Thumb),
            "a32" => Ok(Isa::Arm),
            _ => name
                .parse::<Arch>()
                .ok()
                .and_then(Isa::of)
                .ok_or_else(|| Error::UnknownArch(name.to_string())),
        }
    }

    /// The instruction set of the machine this program was built for, if
    /// this crate decodes it.
    pub fn host() -> Option<Isa> {
        Arch::native().and_then(Isa::of)
    }

    /// Whether this crate knows which instructions the kernel refuses to
    /// kprobe on this architecture (x86_64, arm64, 32-bit arm in ARM
    /// state, riscv64); in Thumb state only boundaries are known.
    pub fn knows_kprobe_rules(self) -> bool {
        matches!(self, Isa::X86_64 | Isa::Arm64 | Isa::Arm | Isa::Riscv64)
    }

    /// What the kernel writes to error_log for a kprobe between instruction
    /// boundaries: x86 decodes the function and answers `-EILSEQ`
    /// ([`BOUNDARY_MESSAGE`]); arm64 refuses an unaligned address in
    /// `arch_prepare_kprobe()` with `-EINVAL` ([`FAIL_REG_MESSAGE`]).
    pub fn not_boundary_message(self) -> &'static str {
        match self {
            Isa::Arm64 => FAIL_REG_MESSAGE,
            _ => BOUNDARY_MESSAGE,
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An architecture or instruction set name this crate does not decode.
    #[error("unknown architecture {0:?} (known: x86_64, arm64, arm, thumb, riscv64)")]
    UnknownArch(String),
    /// /proc/kcore (or another ELF core) could not be read or parsed.
    #[error("{path}: {reason}")]
    Kcore {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// How an instruction changes the flow of control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Falls through to the next instruction.
    Next,
    /// A call (direct when the instruction has a target).
    Call,
    /// An unconditional jump.
    Jump,
    /// A conditional branch.
    CondJump,
    /// A return.
    Return,
    /// Anything else that does not fall through (trap, undefined, int3).
    Stop,
}

/// Why the kernel will refuse a kprobe on an instruction that starts at a
/// boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What the instruction is and which kernel rule refuses it.
    pub reason: &'static str,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    /// Offset from the first byte given to [`decode`].
    pub offset: u64,
    /// Length in bytes (for undecodable bytes: the unit skipped).
    pub len: u8,
    /// The instruction in the usual assembler syntax (AT&T for x86, as
    /// `objdump -d` prints it); `(bad)` when the bytes do not decode.
    pub text: String,
    /// How it changes the flow.
    pub flow: Flow,
    /// A direct branch/call target or a pc-relative address it forms
    /// (`adrp`, `lea 0x..(%rip)`), as an absolute address.
    pub target: Option<u64>,
    /// Whether the bytes decoded to a valid instruction.
    pub valid: bool,
    /// Set when the architecture refuses to kprobe this instruction.
    pub refusal: Option<Refusal>,
}

impl Insn {
    /// The bytes of this instruction within the `bytes` given to [`decode`].
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        let start = usize::try_from(self.offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(self.len as usize);
        bytes.get(start..end.min(bytes.len())).unwrap_or(&[])
    }
}

/// Decodes `bytes` (a function's code, loaded at `address`) from the first
/// byte to the last. Never panics: undecodable bytes become `(bad)`
/// entries of one unit (1 byte on x86, 2 in Thumb and on riscv, 4 on arm
/// and arm64), and every offset after the first one of those is not a
/// boundary the kernel will accept (its decoder stops there too).
pub fn decode(isa: Isa, bytes: &[u8], address: u64) -> Vec<Insn> {
    let mut insns = match isa {
        Isa::X86_64 => x86::decode(bytes, address),
        Isa::Arm64 => arm64::decode(bytes, address),
        Isa::Arm => arm::decode(bytes, address, false),
        Isa::Thumb => arm::decode(bytes, address, true),
        Isa::Riscv64 => riscv::decode(bytes, address),
    };
    if isa == Isa::Arm64 {
        arm64::mark_atomic_sequences(&mut insns, bytes);
    }
    insns
}

/// The offsets at which instructions begin, as the kernel's decoder walks
/// the function: from offset 0, one instruction after the other, stopping
/// at the first byte sequence that does not decode (that offset itself is
/// still a boundary; nothing after it is known to be one).
pub fn boundaries(isa: Isa, bytes: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    for insn in decode(isa, bytes, 0) {
        out.push(insn.offset);
        if !insn.valid {
            break;
        }
    }
    out
}

/// An offset that is not an instruction boundary, with the closest ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotBoundary {
    /// The offset asked about.
    pub offset: u64,
    /// The closest boundary below it, if any.
    pub nearest_before: Option<u64>,
    /// The closest boundary above it inside the bytes, if any.
    pub nearest_after: Option<u64>,
    /// What the kernel answers for it on this architecture
    /// ([`Isa::not_boundary_message`]).
    pub kernel_message: &'static str,
}

impl fmt::Display for NotBoundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{:#x} is not an instruction boundary", self.offset)?;
        match (self.nearest_before, self.nearest_after) {
            (Some(b), Some(a)) => write!(f, " (nearest: +{b:#x} or +{a:#x})"),
            (Some(b), None) => write!(f, " (nearest: +{b:#x})"),
            (None, Some(a)) => write!(f, " (nearest: +{a:#x})"),
            (None, None) => Ok(()),
        }
    }
}

impl std::error::Error for NotBoundary {}

/// Whether `offset` into a function whose code is `bytes` is where an
/// instruction begins, decoding from offset 0 as the kernel does. An
/// offset at or past the end of `bytes` is not a boundary (the kernel
/// would decode past the function, into the next symbol).
pub fn boundary(isa: Isa, bytes: &[u8], offset: u64) -> Result<(), NotBoundary> {
    let all = boundaries(isa, bytes);
    if all.binary_search(&offset).is_ok() {
        return Ok(());
    }
    let pos = all.partition_point(|&b| b < offset);
    Err(NotBoundary {
        offset,
        nearest_before: pos.checked_sub(1).map(|i| all[i]),
        nearest_after: all.get(pos).copied(),
        kernel_message: isa.not_boundary_message(),
    })
}

/// A return probe with an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEntry {
    /// The offset given.
    pub offset: u64,
}

impl fmt::Display for NotEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a return probe must be at the function entry, not +{:#x}",
            self.offset
        )
    }
}

impl std::error::Error for NotEntry {}

/// The kernel's rule for return probes (`kprobe_on_func_entry()` in
/// kernel/kprobes.c with the default `arch_kprobe_on_func_entry()`, which
/// x86 and arm64 keep): only offset 0 of a symbol. An IBT kernel moves a
/// probe on `SYM+0` past the `endbr64` itself; that is still offset 0 here.
pub fn retprobe_at_entry(offset: u64) -> Result<(), NotEntry> {
    if offset == 0 {
        Ok(())
    } else {
        Err(NotEntry { offset })
    }
}

/// Formats bytes as `0f 1f 44 00 00`.
pub fn hex_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_round_trip() {
        for a in Isa::ALL {
            assert_eq!(Isa::parse(a.name()).unwrap(), a);
        }
        assert_eq!(Isa::parse("aarch64").unwrap(), Isa::Arm64);
        assert_eq!(Isa::parse("amd64").unwrap(), Isa::X86_64);
        assert!(Isa::parse("mips").is_err());
        // the names `ktrace check` took as well
        assert_eq!(Isa::parse("riscv").unwrap(), Isa::Riscv64);
        assert_eq!(Isa::parse("a32").unwrap(), Isa::Arm);
        assert_eq!(Isa::parse("t32").unwrap(), Isa::Thumb);
        // 32-bit x86 is an architecture this crate does not decode
        assert_eq!(
            Isa::parse("i386").unwrap_err().to_string(),
            "unknown architecture \"i386\" (known: x86_64, arm64, arm, thumb, riscv64)"
        );
        assert_eq!(Isa::of(Arch::I386), None);
        for a in Isa::ALL {
            assert_eq!(Isa::of(a.arch()).map(Isa::arch), Some(a.arch()));
        }
    }

    #[test]
    fn boundary_of_x86_fentry_prologue() {
        // do_sys_openat2's first bytes on Debian 6.1 x86_64: the 5-byte
        // ftrace nop, push %r15, push %r14 (see tests/kernel/guest/*-disasm.sh:
        // the kernel refuses +1..+4 and takes +5).
        let bytes = [0x0f, 0x1f, 0x44, 0x00, 0x00, 0x41, 0x57, 0x41, 0x56];
        assert_eq!(boundaries(Isa::X86_64, &bytes), vec![0, 5, 7]);
        assert!(boundary(Isa::X86_64, &bytes, 0).is_ok());
        assert!(boundary(Isa::X86_64, &bytes, 5).is_ok());
        let e = boundary(Isa::X86_64, &bytes, 3).unwrap_err();
        assert_eq!(e.nearest_before, Some(0));
        assert_eq!(e.nearest_after, Some(5));
        assert_eq!(e.kernel_message, BOUNDARY_MESSAGE);
        assert_eq!(
            e.to_string(),
            "+0x3 is not an instruction boundary (nearest: +0x0 or +0x5)"
        );
        let past = boundary(Isa::X86_64, &bytes, 100).unwrap_err();
        assert_eq!(past.nearest_before, Some(7));
        assert_eq!(past.nearest_after, None);
    }

    #[test]
    fn boundary_of_arm64_is_alignment() {
        let bytes = [0x1f, 0x20, 0x03, 0xd5, 0xe9, 0x03, 0x1e, 0xaa];
        assert_eq!(boundaries(Isa::Arm64, &bytes), vec![0, 4]);
        let e = boundary(Isa::Arm64, &bytes, 2).unwrap_err();
        assert_eq!((e.nearest_before, e.nearest_after), (Some(0), Some(4)));
        assert_eq!(e.kernel_message, FAIL_REG_MESSAGE);
    }

    #[test]
    fn boundaries_stop_at_undecodable_bytes() {
        // push %rbp, then 0x06 (invalid in 64-bit mode), then nops.
        let bytes = [0x55, 0x06, 0x90, 0x90];
        assert_eq!(boundaries(Isa::X86_64, &bytes), vec![0, 1]);
        assert!(boundary(Isa::X86_64, &bytes, 2).is_err());
    }

    #[test]
    fn retprobe_only_at_entry() {
        assert!(retprobe_at_entry(0).is_ok());
        let e = retprobe_at_entry(4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a return probe must be at the function entry, not +0x4"
        );
    }

    #[test]
    fn empty_input() {
        for a in Isa::ALL {
            assert!(decode(a, &[], 0).is_empty());
            assert!(boundary(a, &[], 0).is_err());
        }
    }
}
