//! Per-architecture facts the probe language depends on: the register names
//! `regs_query_register_offset()` accepts, the word size (default type `x64`/`x32`),
//! the kernel stack depth limit for `$stackN`/`$argN`, whether `$argN` exists
//! (`CONFIG_HAVE_FUNCTION_ARG_ACCESS_API`), and the C calling convention's argument
//! registers (for hints and for translating `$argN`), the names the architecture goes by
//! (one parser for every command's `--arch`) and its ELF `e_machine`.
//!
//! Mirrors the `regoffset_table[]` of arch/{x86,arm64,arm,riscv}/kernel/ptrace.c in
//! Linux 6.1. Not a disassembler and not a place for instruction-boundary rules.

use std::fmt;
use std::str::FromStr;

/// A kernel architecture, by its kernel name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86_64.
    X86_64,
    /// 32-bit x86 (`i386`).
    I386,
    /// arm64 (`aarch64`).
    Arm64,
    /// 32-bit ARM.
    Arm,
    /// 64-bit RISC-V (`riscv`).
    Riscv64,
}

const X86_64_REGS: &[&str] = &[
    "r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8", "bx", "cx", "dx", "si", "di", "bp", "ax",
    "orig_ax", "ip", "cs", "flags", "sp", "ss",
];
const I386_REGS: &[&str] = &[
    "bx", "cx", "dx", "si", "di", "bp", "ax", "ds", "es", "fs", "gs", "orig_ax", "ip", "cs",
    "flags", "sp", "ss",
];
const ARM64_REGS: &[&str] = &[
    "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14",
    "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
    "x28", "x29", "x30", "lr", "sp", "pc", "pstate",
];
const ARM_REGS: &[&str] = &[
    "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "fp", "ip", "sp", "lr",
    "pc", "cpsr", "ORIG_r0",
];
const RISCV_REGS: &[&str] = &[
    "epc", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "s0", "s1", "a0", "a1", "a2", "a3", "a4",
    "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
    "t5", "t6", "status", "badaddr", "cause", "orig_a0",
];

impl Arch {
    /// Every architecture this crate knows.
    pub const ALL: &'static [Arch] = &[
        Arch::X86_64,
        Arch::I386,
        Arch::Arm64,
        Arch::Arm,
        Arch::Riscv64,
    ];

    /// The kernel's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::I386 => "i386",
            Arch::Arm64 => "arm64",
            Arch::Arm => "arm",
            Arch::Riscv64 => "riscv",
        }
    }

    /// The name command lines show for it (`--arch` values, `ktrace disasm`'s header):
    /// the kernel's, but `riscv64` for `riscv`.
    pub fn flag_name(self) -> &'static str {
        self.spellings()[0]
    }

    /// Every name `FromStr` takes for it: [`Arch::flag_name`] first, then the kernel's,
    /// uname's, Debian's and Rust's other spellings.
    pub fn spellings(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &["x86_64", "amd64", "x86-64"],
            Arch::Arm64 => &["arm64", "aarch64"],
            Arch::Arm => &["arm", "armhf", "armv7", "armv7l"],
            Arch::Riscv64 => &["riscv64", "riscv", "rv64"],
            Arch::I386 => &["i386", "i686", "x86"],
        }
    }

    /// The architectures in the order command lines list them (`--arch` values).
    pub fn flag_order() -> impl Iterator<Item = Arch> {
        [
            Arch::X86_64,
            Arch::Arm64,
            Arch::Arm,
            Arch::Riscv64,
            Arch::I386,
        ]
        .into_iter()
    }

    /// Its ELF `e_machine` (`EM_X86_64`, `EM_386`, `EM_AARCH64`, `EM_ARM`, `EM_RISCV` of
    /// include/uapi/linux/elf-em.h).
    pub fn elf_machine(self) -> u16 {
        match self {
            Arch::X86_64 => 62,
            Arch::I386 => 3,
            Arch::Arm64 => 183,
            Arch::Arm => 40,
            Arch::Riscv64 => 243,
        }
    }

    /// The architecture of an ELF `e_machine`, if this crate knows it.
    pub fn from_elf_machine(machine: u16) -> Option<Arch> {
        Arch::ALL
            .iter()
            .copied()
            .find(|a| a.elf_machine() == machine)
    }

    /// The architecture this program was built for, if known.
    pub fn native() -> Option<Arch> {
        // Rust's names (`x86_64`, `x86`, `aarch64`, `arm`, `riscv64`) are among the spellings.
        std::env::consts::ARCH.parse().ok()
    }

    /// Register names accepted after `%`, in `regoffset_table[]` order.
    pub fn registers(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => X86_64_REGS,
            Arch::I386 => I386_REGS,
            Arch::Arm64 => ARM64_REGS,
            Arch::Arm => ARM_REGS,
            Arch::Riscv64 => RISCV_REGS,
        }
    }

    /// Whether `%name` is a register the kernel knows (exact, case-sensitive).
    pub fn has_register(self, name: &str) -> bool {
        self.registers().contains(&name)
    }

    /// Bits in the kernel's `long`.
    pub fn bits(self) -> u32 {
        match self {
            Arch::X86_64 | Arch::Arm64 | Arch::Riscv64 => 64,
            Arch::I386 | Arch::Arm => 32,
        }
    }

    /// `THREAD_SIZE / sizeof(long)`: the largest N for `$stackN` and `$argN` on kprobes
    /// (16 KiB stacks on 64-bit, 8 KiB on 32-bit; kernels built without KASAN).
    pub fn param_max_stack(self) -> u64 {
        match self {
            Arch::X86_64 | Arch::Arm64 | Arch::Riscv64 => 16384 / 8,
            Arch::I386 | Arch::Arm => 8192 / 4,
        }
    }

    /// Whether the arch selects `HAVE_FUNCTION_ARG_ACCESS_API` (so `$argN` exists).
    pub fn has_arg_access(self) -> bool {
        matches!(self, Arch::X86_64 | Arch::Arm64 | Arch::Riscv64)
    }

    /// Registers carrying the first integer arguments of a C function call.
    pub fn arg_registers(self) -> &'static [&'static str] {
        match self {
            Arch::X86_64 => &["di", "si", "dx", "cx", "r8", "r9"],
            // i386 kernels are built with -mregparm=3.
            Arch::I386 => &["ax", "dx", "cx"],
            Arch::Arm64 => &["x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"],
            Arch::Arm => &["r0", "r1", "r2", "r3"],
            Arch::Riscv64 => &["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"],
        }
    }

    /// The register holding a function's return value.
    pub fn retval_register(self) -> &'static str {
        match self {
            Arch::X86_64 | Arch::I386 => "ax",
            Arch::Arm64 => "x0",
            Arch::Arm => "r0",
            Arch::Riscv64 => "a0",
        }
    }

    /// The closest register name to a wrong one, for hints (`%rdi` -> `%di`).
    pub fn suggest_register(self, name: &str) -> Option<&'static str> {
        let lower = name.to_ascii_lowercase();
        let regs = self.registers();
        if let Some(r) = regs.iter().find(|r| r.eq_ignore_ascii_case(name)) {
            return Some(r);
        }
        let stripped = match self {
            Arch::X86_64 | Arch::I386 => lower
                .strip_prefix('r')
                .or_else(|| lower.strip_prefix('e'))
                .map(|s| s.to_string()),
            Arch::Arm64 => lower.strip_prefix('w').map(|s| format!("x{s}")),
            _ => None,
        };
        if let Some(s) = stripped
            && let Some(r) = regs.iter().find(|r| **r == s)
        {
            return Some(r);
        }
        None
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An architecture name this crate does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown architecture {0:?} (known: x86_64, i386, arm64, arm, riscv)")]
pub struct UnknownArch(pub String);

impl FromStr for Arch {
    type Err = UnknownArch;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .iter()
            .copied()
            .find(|a| a.spellings().contains(&s))
            .ok_or_else(|| UnknownArch(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_tables() {
        assert!(Arch::X86_64.has_register("di"));
        assert!(!Arch::X86_64.has_register("rdi"));
        assert!(!Arch::X86_64.has_register("ds"));
        assert!(Arch::I386.has_register("ds"));
        assert!(!Arch::I386.has_register("r8"));
        assert!(Arch::Arm64.has_register("x30") && Arch::Arm64.has_register("lr"));
        assert!(!Arch::Arm64.has_register("x31"));
        assert!(Arch::Arm.has_register("ORIG_r0"));
        assert!(Arch::Riscv64.has_register("orig_a0"));
        assert_eq!(Arch::Arm64.registers().len(), 35);
        assert_eq!(Arch::X86_64.registers().len(), 21);
    }

    #[test]
    fn names() {
        assert_eq!("aarch64".parse::<Arch>(), Ok(Arch::Arm64));
        assert_eq!("riscv".parse::<Arch>(), Ok(Arch::Riscv64));
        assert!("sparc".parse::<Arch>().is_err());
        // the union of what `ktrace check` and `ktrace disasm` took
        assert_eq!("rv64".parse::<Arch>(), Ok(Arch::Riscv64));
        assert_eq!("armv7l".parse::<Arch>(), Ok(Arch::Arm));
        assert_eq!(Arch::Riscv64.flag_name(), "riscv64");
        let order: Vec<_> = Arch::flag_order().map(Arch::flag_name).collect();
        assert_eq!(order, ["x86_64", "arm64", "arm", "riscv64", "i386"]);
        for a in Arch::ALL {
            for s in a.spellings() {
                assert_eq!(s.parse::<Arch>(), Ok(*a));
            }
            assert_eq!(Arch::from_elf_machine(a.elf_machine()), Some(*a));
            assert_eq!(a.name().parse::<Arch>(), Ok(*a));
            for r in a.arg_registers() {
                assert!(a.has_register(r), "{a} {r}");
            }
            assert!(a.has_register(a.retval_register()));
        }
    }

    #[test]
    fn elf_machines() {
        assert_eq!(Arch::from_elf_machine(62), Some(Arch::X86_64));
        assert_eq!(Arch::from_elf_machine(183), Some(Arch::Arm64));
        assert_eq!(Arch::from_elf_machine(3), Some(Arch::I386));
        assert_eq!(Arch::Riscv64.elf_machine(), 243);
        assert_eq!(Arch::Arm.elf_machine(), 40);
        assert_eq!(Arch::from_elf_machine(8), None);
    }

    #[test]
    fn suggestions() {
        assert_eq!(Arch::X86_64.suggest_register("rdi"), Some("di"));
        assert_eq!(Arch::X86_64.suggest_register("DI"), Some("di"));
        assert_eq!(Arch::Arm64.suggest_register("w3"), Some("x3"));
        assert_eq!(Arch::Arm64.suggest_register("foo"), None);
    }
}
