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
//! key}` (8 bytes). Loaded modules' tables are found through their
//! section addresses in /sys/module/NAME/sections (`Sites::add_module`)
//! and read the same way. Nothing here writes to the kernel.
//!
//! arm64 kernels without `CONFIG_KALLSYMS_ALL` (Debian's 5.10 and 6.1)
//! name no table. There the jump table is found by its shape in the
//! kernel image after `_etext` (/proc/kcore's segment for `[_text, _end)`):
//! the longest run of 16-byte entries, 8-byte aligned, whose code and
//! target lie 4-byte aligned in the kernel's text and whose key (less its
//! two flag bits) is an 8-byte aligned address in the image. Random data
//! passes one entry's test about once in 10^7; the table is thousands of
//! entries in a row. The exception table likewise: the longest run of
//! 12-byte entries (4-byte aligned; type under 32, data under 0x400) or,
//! when there is none, of 8-byte ones (8-byte aligned, 5.10), whose
//! instruction and fixup lie in the text, in instruction order. Checked
//! against the symbols of Debian's arm64 vmlinux files (their -dbg
//! packages, 29 Nov 2026; the rules run over the image in a script):
//! 5.10, 6.1, 6.12 and 7.2 each give exactly their named tables, the
//! jump table's 27,757, 6,429, 11,172 and 10,872 entries at
//! `__start___jump_table` and the exception table's 881, 778, 850 and
//! 947 at `__start___ex_table`; read 8 bytes at a time, the sorted
//! `kallsyms_offsets` pass for longer runs (27,596 entries on 7.2), which
//! is why a 12-byte run wins. In guests both scans find the named tables'
//! sites on arm64 6.12 and 7.2. `KTRACE_SCAN_TABLES=1` scans for both
//! tables even where kallsyms names them, so a test can hold the scans
//! against the names.

use std::path::Path;
use std::sync::OnceLock;

use crate::KernelView;
use crate::modules::{MODULES_DIR, ModuleSections};
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
    /// A table was found by its shape, not by kallsyms' names.
    scanned: bool,
    calls: Vec<u64>,
    /// arm64: the instructions of vmlinux's exception table.
    extable: Vec<u64>,
    /// How many of the sites above are loaded modules' (jump labels,
    /// static calls, exception table instructions).
    modules: (usize, usize, usize),
}

/// The sites (each entry's first field, relative to itself) of the
/// entries of `size` bytes at the start of `table` (at `base`) that pass
/// `valid(entry, field address)`, up to the first that does not.
fn entries(
    table: &[u8],
    base: u64,
    size: usize,
    valid: impl Fn(&[u8], &dyn Fn(&[u8], usize) -> u64) -> bool,
) -> Vec<u64> {
    let mut out = Vec::new();
    for (i, e) in table.chunks_exact(size).enumerate() {
        let entry = base.wrapping_add((i * size) as u64);
        let at = |e: &[u8], o: usize| {
            let rel = i32::from_le_bytes([e[o], e[o + 1], e[o + 2], e[o + 3]]);
            entry
                .wrapping_add(o as u64)
                .wrapping_add_signed(i64::from(rel))
        };
        if !valid(e, &at) {
            break;
        }
        out.push(at(e, 0));
    }
    out
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
        // a test hook: both tables found by their shape even where
        // kallsyms names them (arm64), to hold the scan against the names
        let force_scan = std::env::var_os("KTRACE_SCAN_TABLES").is_some_and(|v| v == "1");
        let named_jump = if force_scan && arch == Arch::Arm64 {
            None
        } else {
            table("__start___jump_table", "__stop___jump_table")
        };
        let named_extable = if arch == Arch::Arm64 && !force_scan {
            table("__start___ex_table", "__stop___ex_table")
        } else {
            None
        };
        // arm64 without the names: both tables found by their shape
        let image = if arch == Arch::Arm64 && (named_jump.is_none() || named_extable.is_none()) {
            Image::read(ks, core)
        } else {
            None
        };
        let mut scanned = false;
        let jump = match (named_jump, &image) {
            (Some((a, b)), _) => relative_sites(&b, a, 16),
            (None, Some(image)) => {
                let sites = image.jump_table();
                scanned |= !sites.is_empty();
                sites
            }
            (None, None) => Vec::new(),
        };
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
        let text = |n: &str| ks.by_name(n, None).first().map(|s| s.addr);
        let extable = match (named_extable, &image) {
            _ if arch != Arch::Arm64 => Vec::new(),
            (Some((a, b)), _) => match (text("_stext"), text("_etext")) {
                (Some(lo), Some(hi)) => extable_sites(&b, a, lo..hi),
                _ => Vec::new(),
            },
            (None, Some(image)) => {
                let sites = image.exception_table();
                scanned |= !sites.is_empty();
                sites
            }
            (None, None) => Vec::new(),
        };
        let mut sites = Sites {
            jump,
            scanned,
            calls,
            extable,
            modules: (0, 0, 0),
        };
        if let Ok(dir) = std::fs::read_dir(MODULES_DIR) {
            for m in dir.flatten() {
                sites.add_module(&m.path().join("sections"), core, arch);
            }
        }
        Some(sites)
    }

    /// Adds the sites of one loaded module's tables, found through its
    /// section addresses (`/sys/module/NAME/sections/`, root only: zeros
    /// otherwise) and read through /proc/kcore. A module's tables hold
    /// self-relative entries like vmlinux's (relocated at load), and the
    /// kernel refuses probes on them alike (`jump_label_text_reserved()`
    /// and `static_call_text_reserved()` walk every module's;
    /// `search_exception_tables()` too). The sections' sizes are not shown:
    /// a table is read up to the next section's address and ends at its
    /// first entry whose code is not in the module's text (the zeros the
    /// kernel leaves between sections point at themselves).
    fn add_module(&mut self, sections: &Path, core: &Path, arch: Arch) {
        let Some(mods) = ModuleSections::read(sections) else {
            return;
        };
        let text = mods.text();
        if text.is_empty() {
            return;
        }
        let in_text = |a: u64| text.iter().any(|r| r.contains(&a));
        // (arm64 code is 4-byte aligned; riscv64 jumps to 2-byte aligned targets)
        let code = |a: u64| in_text(a) && (arch != Arch::Arm64 || a.is_multiple_of(4));
        let added = |into: &mut Vec<u64>, found: Vec<u64>| {
            let n = found.len();
            into.extend(found);
            into.sort_unstable();
            into.dedup();
            n
        };
        if let Some(t) = mods.table("__jump_table", core) {
            // {s32 code; s32 target; long key}
            let found = entries(&t.1, t.0, 16, |e, at| code(at(e, 0)) && code(at(e, 4)));
            self.modules.0 += added(&mut self.jump, found);
        }
        if arch == Arch::X86_64
            && let Some(t) = mods.table(".static_call_sites", core)
        {
            // {s32 addr; s32 key}
            let found = entries(&t.1, t.0, 8, |e, at| code(at(e, 0)));
            self.modules.1 += added(&mut self.calls, found);
        }
        if arch == Arch::Arm64
            && let Some(t) = mods.table("__ex_table", core)
        {
            // the kernel's entry size: the one whose entries read on
            // longest (12 on a tie; a 12-byte entry's type and data small)
            let twelve = entries(&t.1, t.0, 12, |e, at| {
                code(at(e, 0))
                    && code(at(e, 4))
                    && u16::from_le_bytes([e[8], e[9]]) < 32
                    && u16::from_le_bytes([e[10], e[11]]) < 0x400
            });
            let eight = entries(&t.1, t.0, 8, |e, at| code(at(e, 0)) && code(at(e, 4)));
            let found = if twelve.len() >= eight.len() {
                twelve
            } else {
                eight
            };
            self.modules.2 += added(&mut self.extable, found);
        }
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

    /// How many of [`Sites::counts`] are loaded modules' (read from
    /// their tables through /sys/module and /proc/kcore).
    pub fn module_counts(&self) -> (usize, usize, usize) {
        self.modules
    }

    /// Whether a table was found by its shape (kallsyms does not name it)
    /// rather than between its `__start_`/`__stop_` symbols.
    pub fn scanned(&self) -> bool {
        self.scanned
    }
}

/// At most this much of the image after `_etext` is read for the scan
/// (arm64 6.1's cloud image: about 13 MiB).
const IMAGE_SCAN_MAX: u64 = 64 << 20;

/// Fewer entries in a row than this are no jump table (arm64 6.1's has
/// thousands).
const MIN_JUMP_ENTRIES: usize = 64;

/// Fewer entries in a row than this are no exception table (arm64 6.1's
/// has thousands).
const MIN_EXTABLE_ENTRIES: usize = 64;

/// arm64 without `CONFIG_KALLSYMS_ALL`: the kernel image after `_etext`
/// (read through /proc/kcore), where the tables are found by their shape.
struct Image {
    /// The address of `bytes[0]` (8-byte aligned).
    base: u64,
    bytes: Vec<u8>,
    text: std::ops::Range<u64>,
    init: Option<std::ops::Range<u64>>,
    /// The whole image, `[_text, _end)`.
    all: std::ops::Range<u64>,
}

impl Image {
    fn read(ks: &crate::kallsyms::Kallsyms, core: &Path) -> Option<Image> {
        let addr = |n: &str| ks.by_name(n, None).first().map(|s| s.addr);
        let (stext, etext) = (addr("_stext")?, addr("_etext")?);
        let init = addr("_sinittext")
            .zip(addr("_einittext"))
            .map(|(lo, hi)| lo..hi);
        let segments = ktrace_disasm::kcore::segments(core).ok()?;
        // the image's own segment (fs/proc/kcore.c's KCORE_TEXT, [_text,
        // _end)): the smallest that holds _etext (vmalloc's holds it too)
        let image = segments
            .iter()
            .filter(|s| s.vaddr <= etext && etext - s.vaddr < s.size)
            .min_by_key(|s| s.size)?;
        let end = image.vaddr.checked_add(image.size)?;
        let base = etext.checked_add(7)? & !7;
        let len = usize::try_from(end.checked_sub(base)?.min(IMAGE_SCAN_MAX)).ok()?;
        let bytes = ktrace_disasm::kcore::read(core, base, len).ok()?;
        Some(Image {
            base,
            bytes,
            text: stext..etext,
            init,
            all: image.vaddr..end,
        })
    }

    /// A 4-byte aligned address in the kernel's text or init text.
    fn is_code(&self, a: u64) -> bool {
        a.is_multiple_of(4)
            && (self.text.contains(&a) || self.init.as_ref().is_some_and(|r| r.contains(&a)))
    }

    /// The address an `s32` at `o` points at (relative to itself).
    fn rel32(&self, o: usize) -> u64 {
        let b = &self.bytes[o..o + 4];
        let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        self.base
            .wrapping_add(o as u64)
            .wrapping_add_signed(i64::from(v))
    }

    /// Whether the `s32` at `o` points at code from outside it. The freed
    /// init text reads as zeros through /proc/kcore, and a zero there
    /// "points at" its own address, init text: arm64 6.12's 480 KiB of it
    /// looked like 30,927 jump entries before this rule.
    fn points_to_code(&self, o: usize) -> bool {
        let field = self.base.wrapping_add(o as u64);
        self.bytes[o..o + 4] != [0; 4] && !self.is_code(field & !3) && self.is_code(self.rel32(o))
    }

    /// The sites of the longest run of jump entries (`{s32 code; s32
    /// target; s64 key}`, 8-byte aligned) whose key, less the branch and
    /// init flags, is an 8-byte aligned address in the image and whose
    /// code and target are 4-byte aligned addresses in the image other
    /// than their own field; at least [`MIN_JUMP_ENTRIES`] of them, and
    /// nine in ten, with code and target in the text or init text (arm64
    /// 6.12's named table: 2 of its 11,172 entries point at `.exit.text`,
    /// after `_einittext`, which kallsyms does not bound).
    fn jump_table(&self) -> Vec<u64> {
        const ENTRY: usize = 16;
        let in_image = |o: usize| {
            let field = self.base.wrapping_add(o as u64);
            let a = self.rel32(o);
            a != field && a.is_multiple_of(4) && self.all.contains(&a)
        };
        let valid = |o: usize, _prev: Option<usize>| {
            let mut k = [0u8; 8];
            k.copy_from_slice(&self.bytes[o + 8..o + 16]);
            let key = self
                .base
                .wrapping_add(o as u64 + 8)
                .wrapping_add_signed(i64::from_le_bytes(k))
                & !3;
            in_image(o) && in_image(o + 4) && key.is_multiple_of(8) && self.all.contains(&key)
        };
        let (at, n) = longest_run(self.bytes.len(), ENTRY, &[0, 8], valid);
        let in_code = (0..n)
            .filter(|i| {
                let o = at + i * ENTRY;
                self.points_to_code(o) && self.points_to_code(o + 4)
            })
            .count();
        if in_code < MIN_JUMP_ENTRIES || in_code * 10 < n * 9 {
            return Vec::new();
        }
        let table = &self.bytes[at..at + n * ENTRY];
        relative_sites(table, self.base.wrapping_add(at as u64), ENTRY)
    }

    /// The instructions of the longest run of exception table entries
    /// (12 bytes `{s32 insn; s32 fixup; s16 type; s16 data}`, 4-byte
    /// aligned, or 8 bytes `{s32 insn; s32 fixup}`, 8-byte aligned) whose
    /// instruction and fixup are code, in the table's order (sorted by
    /// instruction, as the build and `sort_main_extable()` leave it); a
    /// 12-byte entry's type is under 32 (`EX_TYPE_*`) and its data under
    /// 0x400 (`EX_DATA_REG_*`: two 5-bit register numbers). A run of
    /// 12-byte entries wins over any of 8-byte ones: read 8 bytes at a
    /// time, `kallsyms_offsets` (sorted, and relative to `_text`) passes
    /// for long runs of ordered pairs pointing into the init text, 27,596
    /// entries on arm64 7.2 against its 947-entry table (719 and 541 on
    /// 6.1 and 6.12, against 778 and 850: Debian's vmlinux files of those
    /// kernels, from their -dbg packages, scanned as this does); 5.10's
    /// table is of 8-byte entries, and its image no run of 12-byte ones
    /// with the data rule (562 without it). None under
    /// [`MIN_EXTABLE_ENTRIES`].
    fn exception_table(&self) -> Vec<u64> {
        let mut best: Option<(usize, usize, usize)> = None;
        for size in [12usize, 8] {
            let valid = |o: usize, prev: Option<usize>| {
                let insn = self.rel32(o);
                // the fixup type (EX_TYPE_*) is a small number, its data
                // two register numbers
                let typed = size == 8
                    || (u16::from_le_bytes([self.bytes[o + 8], self.bytes[o + 9]]) < 32
                        && u16::from_le_bytes([self.bytes[o + 10], self.bytes[o + 11]]) < 0x400);
                typed
                    && self.points_to_code(o)
                    && self.points_to_code(o + 4)
                    && prev.is_none_or(|p| self.rel32(p) <= insn)
            };
            // 8-byte entries are 8-byte aligned (5.10's `.align 3`): read
            // 4 bytes on, (fixup, next instruction) pairs would pass too
            let phases: Vec<usize> = if size == 8 {
                vec![0]
            } else {
                (0..size).step_by(4).collect()
            };
            let (at, n) = longest_run(self.bytes.len(), size, &phases, valid);
            if n >= MIN_EXTABLE_ENTRIES {
                best = Some((size, at, n));
                break;
            }
        }
        match best {
            Some((size, at, n)) => {
                let table = &self.bytes[at..at + n * size];
                relative_sites(table, self.base.wrapping_add(at as u64), size)
            }
            _ => Vec::new(),
        }
    }
}

/// The (start offset, entries) of the longest run of consecutive entries
/// of `entry` bytes within `len` bytes, starting at each of `phases`, that
/// pass `valid(offset, previous entry's offset in the run)`.
fn longest_run(
    len: usize,
    entry: usize,
    phases: &[usize],
    valid: impl Fn(usize, Option<usize>) -> bool,
) -> (usize, usize) {
    let mut best = (0usize, 0usize);
    for &phase in phases {
        let (mut run_start, mut n) = (phase, 0usize);
        let mut o = phase;
        while o + entry <= len {
            let prev = (n > 0).then(|| o - entry);
            if valid(o, prev) {
                if n == 0 {
                    run_start = o;
                }
                n += 1;
                if n > best.1 {
                    best = (run_start, n);
                }
            } else if n > 0 && valid(o, None) {
                // out of order: a new run starts here
                run_start = o;
                n = 1;
            } else {
                n = 0;
            }
            o += entry;
        }
    }
    best
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

    /// A jump table of `codes` at `at` in `image` (at `base`), each entry
    /// `{s32 code; s32 target; s64 key}` relative to its own field, the
    /// key with its branch flag set on odd entries.
    fn put_jump_table(image: &mut [u8], base: u64, at: usize, codes: &[u64], key: u64) {
        for (i, &c) in codes.iter().enumerate() {
            let o = at + i * 16;
            let e = base + o as u64;
            let code = (c as i64 - e as i64) as i32;
            let target = ((c + 8) as i64 - (e + 4) as i64) as i32;
            let k = (key | (i as u64 & 1)) as i64 - (e + 8) as i64;
            image[o..o + 4].copy_from_slice(&code.to_le_bytes());
            image[o + 4..o + 8].copy_from_slice(&target.to_le_bytes());
            image[o + 8..o + 16].copy_from_slice(&k.to_le_bytes());
        }
    }

    /// arm64 6.1-like layout: text below the scanned data, which is
    /// noise from a fixed xorshift (words that are not entries).
    fn noisy_image() -> Image {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..1 << 16)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect();
        Image {
            base: 0xffff_8000_0900_0000,
            bytes,
            text: 0xffff_8000_0801_0000..0xffff_8000_0900_0000,
            init: None,
            all: 0xffff_8000_0800_0000..0xffff_8000_0a00_0000,
        }
    }

    /// 300 instructions spread over the text, in order.
    fn codes(image: &Image) -> Vec<u64> {
        (0..300u64)
            .map(|i| image.text.start + 0x40 + i * 0x1234 * 4)
            .collect()
    }

    #[test]
    fn a_jump_table_is_found_by_its_shape_among_other_data() {
        let mut image = noisy_image();
        let codes = codes(&image);
        let key = image.all.start + 0x0180_0000;
        // the table at an odd multiple of 8 (the second phase), and a
        // decoy of three valid entries elsewhere
        put_jump_table(&mut image.bytes, image.base, 0x1_0008, &codes, key);
        put_jump_table(&mut image.bytes, image.base, 0x200, &codes[..3], key + 0x40);
        assert_eq!(image.jump_table(), codes);
        // two entries at .exit.text (in the image, not the text) are part
        // of the table, not its end
        let mut exits = noisy_image();
        let mut with_exits = codes.clone();
        with_exits[100] = exits.text.end + 0x100;
        with_exits[200] = exits.text.end + 0x200;
        put_jump_table(&mut exits.bytes, exits.base, 0x1_0008, &with_exits, key);
        with_exits.sort_unstable();
        assert_eq!(exits.jump_table(), with_exits);
        // a run shorter than MIN_JUMP_ENTRIES is none
        let mut short = noisy_image();
        short.bytes = image.bytes.clone();
        for i in [40, 80, 120, 180, 240] {
            let o = 0x1_0008 + i * 16;
            short.bytes[o..o + 16].copy_from_slice(&[0u8; 16]);
        }
        assert!(short.jump_table().is_empty());
        // keys outside the image, or codes outside the text: no table
        let mut keys_out = noisy_image();
        let end = keys_out.all.end;
        put_jump_table(
            &mut keys_out.bytes,
            keys_out.base,
            0x1_0008,
            &codes,
            end + 0x1000,
        );
        assert!(keys_out.jump_table().is_empty());
        image.text = image.text.end..image.text.end + 0x1000;
        assert!(image.jump_table().is_empty());
    }

    #[test]
    fn freed_init_text_read_as_zeros_is_no_table() {
        // arm64 6.12: the unmapped init text inside the scanned part of
        // the image reads as zeros, each of which "points at" itself
        let mut image = noisy_image();
        let (lo, hi) = (0x8000usize, 0x4_0000usize);
        image.bytes[lo..hi].fill(0);
        image.init = Some(image.base + lo as u64..image.base + hi as u64);
        assert!(image.jump_table().is_empty());
        assert!(image.exception_table().is_empty());
        // and a real table beside it is still found
        let codes = codes(&image);
        let key = image.all.start + 0x0180_0000;
        put_jump_table(&mut image.bytes, image.base, 0x4_0008, &codes, key);
        assert_eq!(image.jump_table(), codes);
    }

    #[test]
    fn an_exception_table_is_found_by_its_shape_of_either_size() {
        for size in [12usize, 8] {
            let mut image = noisy_image();
            let codes = codes(&image);
            // the fixup: the next instruction (arm64 6.1's continuations)
            let fixups: Vec<u64> = codes.iter().map(|c| c + 4).collect();
            let (base, at) = (image.base, 0x2_0008);
            for (i, (c, f)) in codes.iter().zip(&fixups).enumerate() {
                let o = at + i * size;
                let e = base + o as u64;
                let insn = (*c as i64 - e as i64) as i32;
                let fixup = (*f as i64 - (e + 4) as i64) as i32;
                image.bytes[o..o + 4].copy_from_slice(&insn.to_le_bytes());
                image.bytes[o + 4..o + 8].copy_from_slice(&fixup.to_le_bytes());
                if size == 12 {
                    // EX_TYPE_UACCESS_ERR_ZERO, registers 0 and 1
                    image.bytes[o + 8..o + 12].copy_from_slice(&[3, 0, 0x20, 0]);
                }
            }
            assert_eq!(image.exception_table(), codes, "{size}");
            // a jump table is not taken for one
            let mut jumps = noisy_image();
            let key = jumps.all.start + 0x0180_0000;
            put_jump_table(&mut jumps.bytes, jumps.base, 0x1_0008, &codes, key);
            assert!(jumps.exception_table().is_empty(), "{size}");
            // entries out of order end a run: every tenth swapped with its
            // neighbour leaves runs of at most 9
            let mut unsorted = noisy_image();
            unsorted.bytes = image.bytes.clone();
            for i in (0..codes.len() - 1).step_by(10) {
                let (a, b) = (at + i * size, at + (i + 1) * size);
                let insn_a = (codes[i + 1] as i64 - (base + a as u64) as i64) as i32;
                let insn_b = (codes[i] as i64 - (base + b as u64) as i64) as i32;
                unsorted.bytes[a..a + 4].copy_from_slice(&insn_a.to_le_bytes());
                unsorted.bytes[b..b + 4].copy_from_slice(&insn_b.to_le_bytes());
            }
            assert!(unsorted.exception_table().is_empty(), "{size}");
        }
    }

    /// An exception table of `codes` at `at`: entries of `size` bytes,
    /// the fixup the next instruction, 12-byte ones typed
    /// EX_TYPE_UACCESS_ERR_ZERO with `data`.
    fn put_extable(image: &mut Image, at: usize, size: usize, codes: &[u64], data: u16) {
        let base = image.base;
        for (i, c) in codes.iter().enumerate() {
            let o = at + i * size;
            let e = base + o as u64;
            let insn = (*c as i64 - e as i64) as i32;
            let fixup = ((c + 4) as i64 - (e + 4) as i64) as i32;
            image.bytes[o..o + 4].copy_from_slice(&insn.to_le_bytes());
            image.bytes[o + 4..o + 8].copy_from_slice(&fixup.to_le_bytes());
            if size == 12 {
                image.bytes[o + 8..o + 10].copy_from_slice(&3u16.to_le_bytes());
                image.bytes[o + 10..o + 12].copy_from_slice(&data.to_le_bytes());
            }
        }
    }

    /// arm64 7.2: read 8 bytes at a time, the sorted `kallsyms_offsets`
    /// are a run of ordered code pairs 29 times longer than the 12-byte
    /// table; the 12-byte table is the one. Entries whose data is more
    /// than two register numbers (`.altinstructions`-like lengths, 0x404)
    /// are no 12-byte table, and the 8-byte run is then taken.
    #[test]
    fn a_typed_table_wins_over_a_longer_run_of_pairs() {
        let mut image = noisy_image();
        let codes = codes(&image);
        let pairs: Vec<u64> = (0..900u64)
            .map(|i| image.text.start + 0x80 + i * 0x100)
            .collect();
        put_extable(&mut image, 0x3_0000, 8, &pairs, 0);
        put_extable(&mut image, 0x2_0004, 12, &codes, 0x20);
        assert_eq!(image.exception_table(), codes);
        let mut untyped = noisy_image();
        put_extable(&mut untyped, 0x3_0000, 8, &pairs, 0);
        put_extable(&mut untyped, 0x2_0004, 12, &codes, 0x404);
        assert_eq!(untyped.exception_table(), pairs);
        // with the data rule alone: no table of either size
        let mut none = noisy_image();
        put_extable(&mut none, 0x2_0004, 12, &codes, 0x404);
        assert!(none.exception_table().is_empty());
    }

    #[test]
    fn a_module_table_ends_at_its_first_entry_outside_the_text() {
        // x86_64 6.1, autofs4: text at 0xffffffffc02d0000, __jump_table
        // at ...9000 followed by the zeros the kernel leaves before
        // __bug_table (no size is shown for a module's section)
        let text = 0xffff_ffff_c02d_0000..0xffff_ffff_c02d_5000;
        let base = 0xffff_ffff_c02d_9000;
        let codes = [
            0xffff_ffff_c02d_0123,
            0xffff_ffff_c02d_4652,
            0xffff_ffff_c02d_0010,
        ];
        let mut t = table(base, 16, &codes);
        // each target 8 bytes after its code
        for i in 0..codes.len() {
            let rel = (codes[i] as i64 + 8 - (base + (i * 16) as u64 + 4) as i64) as i32;
            t[i * 16 + 4..i * 16 + 8].copy_from_slice(&rel.to_le_bytes());
        }
        t.extend_from_slice(&[0u8; 48]);
        // what follows: one entry that would pass were the zeros not read
        let after = base + t.len() as u64;
        let mut e = table(after, 16, &[codes[0]]);
        let rel = (codes[0] as i64 + 8 - (after + 4) as i64) as i32;
        e[4..8].copy_from_slice(&rel.to_le_bytes());
        t.extend_from_slice(&e);
        let code = |a: u64| text.contains(&a);
        let got = entries(&t, base, 16, |e, at| code(at(e, 0)) && code(at(e, 4)));
        assert_eq!(got, codes);
        // a target outside the text ends it too
        let got = entries(&t[16..], base + 16, 16, |e, at| {
            code(at(e, 0)) && code(at(e, 4)) && at(e, 0) != codes[2]
        });
        assert_eq!(got, [codes[1]]);
    }

    #[test]
    fn a_site_covers_its_instruction_and_no_more() {
        let s = Sites {
            jump: vec![0x1000, 0x1010],
            scanned: false,
            calls: vec![0x2000],
            extable: Vec::new(),
            modules: (0, 0, 0),
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
