//! Kernel text the kernel patches itself, which kprobes refuse: jump label
//! sites (`static_branch_*()`, tracepoints' enable checks) and, on x86_64,
//! inline static call sites. `check_kprobe_address_safe()`
//! (kernel/kprobes.c) refuses a probe whose address falls in one
//! (`jump_label_text_reserved()`, `static_call_text_reserved()`) with
//! `-EINVAL` before the architecture decodes anything, so the kernel logs
//! "Failed to register probe event" at the probe point even where the
//! address is not an instruction boundary.
//!
//! The sites come from the running kernel's own tables, read through
//! /proc/kcore between the linker symbols kallsyms shows when the kernel
//! has `CONFIG_KALLSYMS_ALL` (`__start___jump_table`,
//! `__start_static_call_sites`, ...). On the 64-bit architectures both
//! tables hold offsets relative to each entry's own field
//! (`CONFIG_HAVE_ARCH_JUMP_LABEL_RELATIVE`): a jump entry is `{s32 code;
//! s32 target; long key}` (16 bytes), a static call site `{s32 addr; s32
//! key}` (8 bytes). Modules' tables are not visible this way: their sites
//! are left to the kernel. Nothing here writes to the kernel.

use std::path::Path;
use std::sync::OnceLock;

use crate::KernelView;
use ktrace_probe::Arch;

/// What kind of reserved site an address falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A jump label (static branch) site.
    JumpLabel,
    /// An inline static call site.
    StaticCall,
    /// An instruction of the exception table (arm64: a user access or
    /// another instruction that may fault and be fixed up), which arm64's
    /// `arch_prepare_kprobe()` refuses (`search_exception_tables()`).
    ExceptionTable,
}

impl Site {
    /// The kernel function that refuses it, for hints.
    pub fn describe(self) -> &'static str {
        match self {
            Site::JumpLabel => {
                "a jump label (static branch) site, which the kernel patches itself \
                 (jump_label_text_reserved())"
            }
            Site::StaticCall => {
                "a static call site, which the kernel patches itself \
                 (static_call_text_reserved())"
            }
            Site::ExceptionTable => {
                "an instruction of the exception table (one that may fault and is \
                 fixed up), which arm64 kprobes refuse (search_exception_tables())"
            }
        }
    }
}

/// The vmlinux sites of the running kernel, sorted by address.
#[derive(Debug, Default)]
pub struct Sites {
    jump: Vec<u64>,
    calls: Vec<u64>,
    /// arm64: the instructions of vmlinux's exception table.
    extable: Vec<u64>,
}

/// `CALL_INSN_SIZE` (x86): a static call site is a 5-byte call or jump.
const CALL_INSN_SIZE: u64 = 5;

impl Sites {
    /// The sites of the running kernel (read once per process); empty when
    /// its tables cannot be read (no `CONFIG_KALLSYMS_ALL`, no /proc/kcore,
    /// addresses hidden, 32-bit arm's absolute entries).
    pub fn running(view: &KernelView, core: &Path, arch: Arch) -> &'static Sites {
        static SITES: OnceLock<Sites> = OnceLock::new();
        SITES.get_or_init(|| Sites::read(view, core, arch).unwrap_or_default())
    }

    fn read(view: &KernelView, core: &Path, arch: Arch) -> Option<Sites> {
        if !matches!(arch, Arch::X86_64 | Arch::Arm64 | Arch::Riscv64) {
            return None;
        }
        let ks = view.kallsyms().ok()?;
        if ks.addresses_hidden() {
            return None;
        }
        let table = |start: &str, stop: &str| -> Option<(u64, Vec<u8>)> {
            let addr = |n: &str| ks.by_name(n, None).first().map(|s| s.addr);
            let (a, b) = (addr(start)?, addr(stop)?);
            let len = usize::try_from(b.checked_sub(a)?).ok()?;
            // (a table of more than 4 MiB is no jump table)
            if len > 4 << 20 {
                return None;
            }
            let bytes = ktrace_disasm::kcore::read(core, a, len).ok()?;
            Some((a, bytes))
        };
        let jump = table("__start___jump_table", "__stop___jump_table")
            .map(|(a, b)| relative_sites(&b, a, 16))
            .unwrap_or_default();
        let calls = if arch == Arch::X86_64 {
            table("__start_static_call_sites", "__stop_static_call_sites")
                .map(|(a, b)| relative_sites(&b, a, 8))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        // arm64's entries are `{s32 insn; s32 fixup}` (8 bytes) or, since
        // the fixup types, `{s32 insn; s32 fixup; s16 type; s16 data}` (12):
        // the size whose every instruction lies aligned in the kernel's text
        let extable = if arch == Arch::Arm64 {
            let text = |n: &str| ks.by_name(n, None).first().map(|s| s.addr);
            match (
                table("__start___ex_table", "__stop___ex_table"),
                text("_stext"),
                text("_etext"),
            ) {
                (Some((a, b)), Some(lo), Some(hi)) => extable_sites(&b, a, lo..hi),
                _ => Vec::new(),
            }
        } else {
            Vec::new()
        };
        Some(Sites {
            jump,
            calls,
            extable,
        })
    }

    /// Whether `addr` falls in a site. `insn_len` gives the length of the
    /// instruction that starts at a jump label site (x86: a 2- or 5-byte
    /// nop or jump, `arch_jump_entry_size()`), when known; 4 bytes on
    /// arm64 and riscv64, 5 on x86 otherwise.
    pub fn at(&self, addr: u64, arch: Arch, insn_len: impl Fn(u64) -> Option<u64>) -> Option<Site> {
        let jump_size = |code: u64| match arch {
            Arch::X86_64 => insn_len(code).unwrap_or(5),
            _ => 4,
        };
        if covers(&self.jump, addr, jump_size) {
            return Some(Site::JumpLabel);
        }
        if covers(&self.calls, addr, |_| CALL_INSN_SIZE) {
            return Some(Site::StaticCall);
        }
        if self.extable.binary_search(&addr).is_ok() {
            return Some(Site::ExceptionTable);
        }
        None
    }

    /// How many sites were read (jump labels, static calls, exception
    /// table instructions).
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.jump.len(), self.calls.len(), self.extable.len())
    }
}

/// The addresses a table of self-relative entries points at: each entry's
/// first field is an `s32` offset from that field's own address.
fn relative_sites(table: &[u8], base: u64, entry: usize) -> Vec<u64> {
    let mut out: Vec<u64> = table
        .chunks_exact(entry)
        .enumerate()
        .map(|(i, e)| {
            let rel = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let field = base.wrapping_add((i * entry) as u64);
            field.wrapping_add_signed(i64::from(rel))
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The instructions of an arm64 exception table at `base`: entries of 12
/// bytes (`{s32 insn; s32 fixup; s16 type; s16 data}`) or, before the
/// fixup types, 8 (`{s32 insn; s32 fixup}`); the size whose every
/// instruction lies 4-byte aligned in `text` is the table's. Empty when
/// neither fits.
fn extable_sites(table: &[u8], base: u64, text: std::ops::Range<u64>) -> Vec<u64> {
    [12, 8]
        .into_iter()
        .filter(|&size| table.len().is_multiple_of(size))
        .map(|size| relative_sites(table, base, size))
        .find(|sites| !sites.is_empty() && sites.iter().all(|&i| i % 4 == 0 && text.contains(&i)))
        .unwrap_or_default()
}

/// Whether a site of `sorted` covers `addr`: `code <= addr < code + size`
/// (the kernel's `addr_conflict()` for a one-byte range).
fn covers(sorted: &[u64], addr: u64, size: impl Fn(u64) -> u64) -> bool {
    let i = sorted.partition_point(|&c| c <= addr);
    // (sites are at least 2 bytes apart: the nearest one decides)
    i > 0 && addr < sorted[i - 1].saturating_add(size(sorted[i - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries as the kernel's linker output lays them out: each `s32`
    /// is the site's address minus the field's own address.
    fn table(base: u64, entry: usize, sites: &[u64]) -> Vec<u8> {
        let mut out = vec![0u8; sites.len() * entry];
        for (i, s) in sites.iter().enumerate() {
            let field = base + (i * entry) as u64;
            let rel = (*s as i64 - field as i64) as i32;
            out[i * entry..i * entry + 4].copy_from_slice(&rel.to_le_bytes());
        }
        out
    }

    #[test]
    fn arm64_exception_tables_of_either_entry_size() {
        let text = 0xffff_8000_8001_0000..0xffff_8000_8100_0000;
        let insns = [
            0xffff_8000_8002_0004,
            0xffff_8000_8001_0100,
            0xffff_8000_8003_0000,
        ];
        let base = 0xffff_8000_8200_0000;
        let mut sorted = insns.to_vec();
        sorted.sort_unstable();
        for size in [12, 8] {
            let t = table(base, size, &insns);
            assert_eq!(extable_sites(&t, base, text.clone()), sorted, "{size}");
            let s = Sites {
                extable: extable_sites(&t, base, text.clone()),
                ..Sites::default()
            };
            assert_eq!(
                s.at(insns[0], Arch::Arm64, |_| None),
                Some(Site::ExceptionTable)
            );
            assert_eq!(s.at(insns[0] + 4, Arch::Arm64, |_| None), None);
        }
        // a table whose instructions fall outside the text is not read
        let t = table(base, 12, &[0x10]);
        assert!(extable_sites(&t, base, text).is_empty());
    }

    #[test]
    fn self_relative_entries_give_the_sites_sorted() {
        // x86_64 6.12: __start___jump_table at 0xffffffff927a7320, code
        // some 20 MB below it
        let base = 0xffff_ffff_927a_7320;
        let sites = [
            0xffff_ffff_912f_be74,
            0xffff_ffff_912f_be56,
            0xffff_ffff_9400_0000,
        ];
        let got = relative_sites(&table(base, 16, &sites), base, 16);
        assert_eq!(
            got,
            vec![
                0xffff_ffff_912f_be56,
                0xffff_ffff_912f_be74,
                0xffff_ffff_9400_0000
            ]
        );
        let got = relative_sites(&table(base, 8, &sites[..2]), base, 8);
        assert_eq!(got, vec![0xffff_ffff_912f_be56, 0xffff_ffff_912f_be74]);
    }

    #[test]
    fn a_site_covers_its_instruction_and_no_more() {
        let s = Sites {
            jump: vec![0x1000, 0x1010],
            calls: vec![0x2000],
            extable: Vec::new(),
        };
        let len = |c: u64| (c == 0x1010).then_some(2);
        assert_eq!(s.at(0x1000, Arch::X86_64, len), Some(Site::JumpLabel));
        // inside the 5-byte nop: refused before any boundary check
        assert_eq!(s.at(0x1004, Arch::X86_64, len), Some(Site::JumpLabel));
        assert_eq!(s.at(0x1005, Arch::X86_64, len), None);
        assert_eq!(s.at(0x0fff, Arch::X86_64, len), None);
        // a 2-byte site
        assert_eq!(s.at(0x1011, Arch::X86_64, len), Some(Site::JumpLabel));
        assert_eq!(s.at(0x1012, Arch::X86_64, len), None);
        assert_eq!(s.at(0x2004, Arch::X86_64, len), Some(Site::StaticCall));
        assert_eq!(s.at(0x2005, Arch::X86_64, len), None);
        // arm64: one word
        assert_eq!(s.at(0x1003, Arch::Arm64, |_| None), Some(Site::JumpLabel));
        assert_eq!(s.at(0x1004, Arch::Arm64, |_| None), None);
    }
}
