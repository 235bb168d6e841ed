//! The checks of a kprobe at `SYM+OFF` that need the function's machine
//! code: whether OFF is an instruction boundary, and on x86 whether `+4` is
//! the function entry (an `endbr64` there). The kernel makes them only when
//! the probe is registered, after the write: `register_kprobe()` answers
//! `-EILSEQ` (`BAD_INSN_BNDRY`, "Probe point is not an instruction
//! boundary") on x86, and `kprobe_on_func_entry()` decides `BAD_RETPROBE`
//! ("Retprobe address must be an function entry") in
//! kernel/trace/trace_kprobe.c. Both are logged against the probe point
//! (word 1, offset 0), so the caret is where the kernel puts it.
//!
//! The code comes from the running kernel (the view's kallsyms for the
//! address and size, /proc/kcore for the bytes) or from a vmlinux file
//! (`--vmlinux`); the boundaries from ktrace-disasm, which decodes the
//! function from its first byte as the kernel does. arm64's boundaries need
//! no bytes (4-byte instructions: the checker refuses a misaligned offset
//! as the kernel does, with its own message), but its decoder refuses some
//! words ("Failed to register probe event"): those every kernel refuses
//! alike are decided from the code. 32-bit arm's word at an aligned offset
//! goes through the kernel's ARM-state decode table, when the code can be
//! read (Debian's arm kernels have no /proc/kcore: `--vmlinux`).
//! Nothing here writes to the kernel.

use std::path::{Path, PathBuf};

use crate::kallsyms::KernelSymbol;
use crate::{Error, KernelView, Result, elf};
use ktrace_disasm::Isa;
use ktrace_probe::ast::{KprobePlace, ProbeKind};
use ktrace_probe::error::{ErrorKind, TpErr};
use ktrace_probe::{Arch, Checked, Definition, ProbeError, Target, Unchecked};

/// Where a function's code is read from.
pub enum Source<'a> {
    /// The running kernel: kallsyms through the view, bytes from this core
    /// file (/proc/kcore).
    Live(&'a KernelView, PathBuf),
    /// A vmlinux (ELF with symbols).
    Vmlinux(&'a Path),
    /// No code can be read, for this reason.
    None(String),
    /// The code of the probed function, already read (any symbol).
    Code(&'a [u8]),
}

impl Source<'_> {
    /// The running kernel's code.
    pub fn live(view: &KernelView) -> Source<'_> {
        Source::Live(view, PathBuf::from(ktrace_disasm::kcore::PATH))
    }

    /// The function the address `symbol`+`offset` falls in when that is past
    /// `symbol`'s own code (the running kernel's kallsyms decide): its name,
    /// the offset into it and its code.
    fn containing(&self, symbol: &str, offset: u64) -> Result<(String, u64, Vec<u8>), String> {
        let Source::Live(view, core) = self else {
            return Err("only the running kernel's symbols tell which function is there".into());
        };
        let (module, name) = split_module(symbol);
        let ks = view.kallsyms().map_err(|e| e.to_string())?;
        let sym = ks
            .by_name(name, module)
            .into_iter()
            .find(|s| s.is_text())
            .ok_or_else(|| format!("no kernel function {symbol:?}"))?;
        let addr = sym.addr.checked_add(offset).ok_or("address overflow")?;
        let at = ks
            .lookup(addr)
            .ok_or_else(|| format!("{addr:#x} is in no kernel symbol"))?;
        let (f, o) = (at.symbol.clone(), at.offset);
        // (by the symbol found, not its name: a name two functions share,
        // such as load_elf_binary and its compat twin, is still one address)
        let bytes = symbol_code(view, core, &f, true).map_err(|e| e.to_string())?;
        let fname = match &f.module {
            Some(m) => format!("{m}:{}", f.name),
            None => f.name.to_string(),
        };
        Ok((fname, o, bytes))
    }

    /// The bytes of kernel function `symbol` (`NAME` or `MOD:NAME`), or
    /// why they cannot be read.
    fn read(&self, symbol: &str) -> Result<Vec<u8>, String> {
        let (module, name) = split_module(symbol);
        match self {
            Source::Live(view, core) => function_code(view, core, name, module, true)
                .map(|(_, b)| b)
                .map_err(|e| e.to_string()),
            Source::Vmlinux(path) => {
                if module.is_some() {
                    return Err(format!(
                        "{symbol} is a module's function, not in {}",
                        path.display()
                    ));
                }
                vmlinux_function(path, name)
                    .map(|(_, b)| b)
                    .map_err(|e| e.to_string())
            }
            Source::None(why) => Err(why.clone()),
            Source::Code(bytes) => Ok(bytes.to_vec()),
        }
    }
}

/// A kernel function's symbol and code through `view`'s kallsyms and the
/// core file `core`: `st_size` is unknown to kallsyms, so the code runs to
/// the next symbol (at most 1 MiB).
pub fn kernel_function(
    view: &KernelView,
    core: &Path,
    name: &str,
    module: Option<&str>,
) -> Result<(KernelSymbol, Vec<u8>)> {
    function_code(view, core, name, module, false)
}

/// [`kernel_function`]; with `reach` (for the checks at an offset, not a
/// listing of the function), a module's last function is read as far as
/// its code surely reaches ([`last_function_reach`]), and a name several
/// functions share is the first kallsyms lists, which the kernel's lookup
/// finds (where it refuses such a name, the parse has refused it first).
fn function_code(
    view: &KernelView,
    core: &Path,
    name: &str,
    module: Option<&str>,
    reach: bool,
) -> Result<(KernelSymbol, Vec<u8>)> {
    let kpath = view.kallsyms_path().to_path_buf();
    let ks = view
        .kallsyms()
        .map_err(|e| said(format!("reading {}: {e}", kpath.display())))?;
    if ks.addresses_hidden() {
        return Err(said(format!(
            "{} shows no addresses (kptr_restrict): run as root",
            kpath.display()
        )));
    }
    let spec = match module {
        Some(m) => format!("{m}:{name}"),
        None => name.to_string(),
    };
    let found: Vec<_> = ks
        .by_name(name, module)
        .into_iter()
        .filter(|s| s.is_text())
        .collect();
    let sym = match found.as_slice() {
        [] => {
            return Err(said(format!(
                "no kernel function {spec:?} in {}",
                kpath.display()
            )));
        }
        [one] => (*one).clone(),
        // for the checks, the one the kernel's lookup of the name finds
        // (kernels that take a name several functions share: the first in
        // kallsyms, arm64 5.10, seed 20261130: `p
        // probes_profile_seq_show+0x100000`, trace_kprobe.c's, is an ldxr
        // of __arm64_sys_swapoff, refused)
        [first, ..] if reach => (*first).clone(),
        many => return Err(said(many_functions(&spec, many, &kpath))),
    };
    let bytes = symbol_code(view, core, &sym, reach)?;
    Ok((sym, bytes))
}

/// The code of kernel symbol `sym` of `view`'s kallsyms, through the core
/// file `core`: up to the next symbol (at most 1 MiB).
fn symbol_code(view: &KernelView, core: &Path, sym: &KernelSymbol, reach: bool) -> Result<Vec<u8>> {
    let name = &sym.name;
    let kpath = view.kallsyms_path().to_path_buf();
    let ks = view
        .kallsyms()
        .map_err(|e| said(format!("reading {}: {e}", kpath.display())))?;
    let size = match ks.extent(sym) {
        Some(size) => size,
        // a module's last function: as far as its code surely reaches
        None => reach
            .then(|| last_function_reach(view, core, sym))
            .flatten()
            .ok_or_else(|| {
                said(format!(
                    "the size of {name} is unknown (it is the last symbol of its region)"
                ))
            })?,
    };
    // a module's last function ends where its text does, not at the
    // read-only data kallsyms names next
    let size = match (&sym.module, view.is_running()) {
        (Some(m), true) => crate::modules::module_text_end(m, sym.addr)
            .map_or(size, |end| size.min(end - sym.addr)),
        _ => size,
    };
    let size = usize::try_from(size.min(1 << 20)).unwrap_or(1 << 20);
    ktrace_disasm::kcore::read(core, sym.addr, size).map_err(|e| {
        within(
            format!(
                "reading {name}'s code (kernels without CONFIG_PROC_KCORE have no /proc/kcore: use --vmlinux FILE)"
            ),
            &e,
        )
    })
}

/// How far the code of a loaded module's last function surely reaches,
/// from its start: to the end of its first instruction that does not fall
/// through (a return, a jump, a trap), read from `core` page by page (at
/// most 16). kallsyms gives no size for the last symbol of a module's text
/// (since 6.4 its text is a region of its own, and its highest), and the
/// kernel's lookup bounds it by the region's end, which nothing shows; but
/// up to there the address is in the function (x86_64 7.2, romfs loaded:
/// `p exit_romfs_fs+4`, an `__exit` function, is "Failed to register probe
/// event" as notrace, and `r exit_romfs_fs+4` after its endbr64 too).
/// `None` when `sym` is not such a function, the kernel is not the running
/// one, or the code cannot be read or decoded.
pub fn last_function_reach(view: &KernelView, core: &Path, sym: &KernelSymbol) -> Option<u64> {
    if view.kallsyms().ok()?.extent(sym).is_some() {
        return None;
    }
    module_code_reach(view, core, sym)
}

/// How far the code of loaded module function `sym` surely reaches, from
/// its start ([`code_reach`] on its bytes, read from `core` page by page,
/// at most 16); `None` when `sym` is no module's text, the kernel is not
/// the running one, or the code cannot be read or decoded.
fn module_code_reach(view: &KernelView, core: &Path, sym: &KernelSymbol) -> Option<u64> {
    if sym.module.is_none() || !sym.is_text() || !view.is_running() {
        return None;
    }
    let isa = match Arch::native()? {
        Arch::X86_64 => Isa::X86_64,
        Arch::Arm64 => Isa::Arm64,
        Arch::Riscv64 => Isa::Riscv64,
        _ => return None,
    };
    const PAGES: u64 = 16;
    let mut bytes = Vec::new();
    let mut at = sym.addr;
    for _ in 0..PAGES {
        let page_end = (at | 0xfff).checked_add(1)?;
        let len = usize::try_from(page_end - at).ok()?;
        bytes.extend_from_slice(&ktrace_disasm::kcore::read(core, at, len).ok()?);
        at = page_end;
        if let Some(reach) = code_reach(isa, &bytes, sym.addr) {
            return Some(reach);
        }
    }
    None
}

/// How far past a loaded module's last function (from its start) every
/// address is still in it, as the kernel's lookup places addresses: to the
/// end of the page its surely reached code ends in. A module's memory is
/// whole pages (move_module() and module_memory_alloc() round each region
/// up with PAGE_ALIGN), and the lookup bounds the last symbol by the end of
/// the text (x86_64 7.2: `exit_autofs_fs+0x400`, its page's last bytes, is
/// in the notrace `exit_autofs_fs`; `+0x1000`, the next page, in no
/// module). Not past the first data section after it, where one shows;
/// before 6.4, where a module is one allocation, exactly to its text's end.
/// `None` as for [`last_function_reach`].
pub fn last_function_span(view: &KernelView, core: &Path, sym: &KernelSymbol) -> Option<u64> {
    if sym.module.is_none() || !sym.is_text() || !view.is_running() {
        return None;
    }
    if view.kallsyms().ok()?.extent(sym).is_some() {
        return None;
    }
    // one allocation (before 6.4): the text's end is known, where the
    // read-only data starts (arm64 5.10: `cleanup_module+0x400`, past the
    // module's `.plt` and ftrace trampoline, still in it)
    if let Some(end) = crate::modules::ModuleSpans::running()
        .and_then(|spans| spans.text_end(sym.addr))
        .filter(|&end| end > sym.addr)
    {
        return Some(end - sym.addr);
    }
    let reach = last_function_reach(view, core, sym)?;
    let end = sym.addr.checked_add(reach)?.checked_add(0xfff)? & !0xfff;
    let end = match sym
        .module
        .as_deref()
        .and_then(|m| crate::modules::module_text_end(m, sym.addr))
    {
        Some(data) => end.min(data),
        None => end,
    };
    Some(end - sym.addr)
}

/// Whether `addr` is in no module although kallsyms places it in a
/// module's function: past the end of a module's text region (6.4+, where
/// text and data are allocations of their own), in the guard page vmalloc
/// leaves before the module's next allocation. The kernel's lookup finds
/// no module there (`__module_address()`), so a probe is -ENOENT, "Invalid
/// probed address or symbol" (x86_64 6.12, romfs loaded: `exit_romfs_fs`
/// at 0xfb0 in its page, `+0x100` to `+0x1000` the next page, before its
/// data), where kallsyms, whose next symbol is in that data, puts the
/// notrace `exit_romfs_fs`.
///
/// Only where it is sure: the region ends on a page boundary no lower
/// than the last text section's start and the code of the function there
/// ([`code_reach`]), and no higher than a page below the next allocation;
/// `true` when the two meet and `addr` is between. The running kernel only.
pub fn in_text_gap(view: &KernelView, core: &Path, addr: u64) -> bool {
    in_text_gap_inner(view, core, addr).unwrap_or(false)
}

fn in_text_gap_inner(view: &KernelView, core: &Path, addr: u64) -> Option<bool> {
    if !view.is_running() {
        return None;
    }
    let (section, next) = crate::modules::ModuleSpans::running()?.after_split_text(addr)?;
    let table = view.kallsyms().ok()?;
    let at = table.lookup(addr)?;
    let sym = &at.symbol;
    // the code reached from the function kallsyms names there, when that
    // is in the section (a section without symbols ends where it starts)
    let code_end = if sym.addr >= section {
        sym.addr.checked_add(module_code_reach(view, core, sym)?)?
    } else {
        section + 1
    };
    let end = code_end.max(section + 1).checked_add(0xfff)? & !0xfff;
    Some(end.checked_add(0x1000)? == next && (end..next).contains(&addr))
}

/// How far code that starts at `bytes` (loaded at `address`) surely runs:
/// to the end of its first instruction that does not fall through, or to
/// the first that does not decode; `None` when `bytes` ends first (an
/// instruction cut at the end, or bytes that do not decode within 16 of
/// it, do not count).
pub fn code_reach(isa: Isa, bytes: &[u8], address: u64) -> Option<u64> {
    for insn in ktrace_disasm::decode(isa, bytes, address) {
        let end = insn.offset + u64::from(insn.len);
        if end >= bytes.len() as u64 {
            return None;
        }
        if !insn.valid {
            // (within the longest instruction of the end: maybe one cut)
            if bytes.len() as u64 - insn.offset < 16 {
                return None;
            }
            return (insn.offset > 0).then_some(insn.offset);
        }
        if matches!(
            insn.flow,
            ktrace_disasm::Flow::Jump | ktrace_disasm::Flow::Return | ktrace_disasm::Flow::Stop
        ) {
            return Some(end);
        }
    }
    None
}

/// "`spec` names N functions in kallsyms: ADDR \[MOD\], ...".
fn many_functions(spec: &str, many: &[&KernelSymbol], kpath: &Path) -> String {
    format!(
        "{spec:?} names {} functions in {}: {}",
        many.len(),
        kpath.display(),
        many.iter()
            .map(|s| format!(
                "{:#x}{}",
                s.addr,
                s.module
                    .as_deref()
                    .map(|m| format!(" [{m}]"))
                    .unwrap_or_default()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// An error of this module, said whole.
fn said(message: String) -> Error {
    Error::Code(message)
}

/// `what`, then the error `e` and its sources, each after ": ".
fn within(what: String, e: &dyn std::error::Error) -> Error {
    let mut s = format!("{what}: {e}");
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    said(s)
}

/// A function's code in a vmlinux (or any ELF with symbols): `st_size`
/// bytes (or up to the next symbol, at most 4 KiB, when the size is 0)
/// through its `PT_LOAD` segment. Also the file offset of the first byte.
pub fn symbol_bytes(
    path: &Path,
    image: &elf::ElfImage,
    sym: &elf::ElfSymbol,
) -> Result<(u64, Vec<u8>)> {
    let seg = *image
        .segment_of_vaddr(sym.value)
        .ok_or_else(|| said(format!("{} is in no PT_LOAD segment", sym.name)))?;
    let seg_left = seg.filesz - (sym.value - seg.vaddr);
    let size = if sym.size > 0 {
        sym.size
    } else {
        let next = image
            .symbols
            .iter()
            .map(|s| s.value)
            .filter(|&v| v > sym.value)
            .min()
            .unwrap_or(u64::MAX);
        (next - sym.value).min(4096)
    }
    .min(seg_left)
    .min(1 << 20);
    let start = seg.offset + (sym.value - seg.vaddr);
    Ok((start, read_range(path, start, size as usize)?))
}

fn read_range(path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file =
        crate::open_no_wait(path).map_err(|e| within(format!("opening {}", path.display()), &e))?;
    let mut out = vec![0u8; len];
    file.read_exact_at(&mut out, offset).map_err(|e| {
        within(
            format!("reading {len} bytes at {offset:#x} of {}", path.display()),
            &e,
        )
    })?;
    Ok(out)
}

/// Function `name`'s ELF machine and code in the vmlinux at `path`.
pub fn vmlinux_function(path: &Path, name: &str) -> Result<(u16, Vec<u8>)> {
    let image = elf::open(path)?;
    let target = image.resolve(name)?;
    let (_, bytes) = symbol_bytes(path, &image, &target.symbol)?;
    Ok((image.machine, bytes))
}

/// The ELF machine of a vmlinux, for its architecture.
pub fn vmlinux_arch(path: &Path) -> Result<Arch> {
    let image = elf::open(path)?;
    Arch::from_elf_machine(image.machine).ok_or_else(|| {
        said(format!(
            "{}: ELF machine {} is not one ktrace knows",
            path.display(),
            image.machine
        ))
    })
}

/// What the kernel's `is_endbr()` (arch/x86/include/asm/ibt.h) takes for
/// an `endbr` at a function's start: `endbr64`, `endbr32`, and the nop
/// newer kernels write over a sealed one (`nopl -0x2a(%rax)`: Debian's 7.2
/// has it at vfs_read+0 and takes `r vfs_read+4`). On an IBT kernel a
/// probe at `+4` past it is at the function entry
/// (`arch_adjust_kprobe_addr()`).
const ENDBR: [[u8; 4]; 3] = [
    [0xf3, 0x0f, 0x1e, 0xfa],
    [0xf3, 0x0f, 0x1e, 0xfb],
    [0x0f, 0x1f, 0x40, 0xd6],
];
/// The older nop written over a sealed `endbr64` at boot (`osp nopl
/// (%rax)`): that kernel's `is_endbr()` takes it too (Debian's x86_64
/// 6.12 has it at vfs_read+0 under TCG and accepts `r vfs_read+4`; seen in
/// the guest test agree_vfs_read).
const ENDBR_POISON: [u8; 4] = [0x66, 0x0f, 0x1f, 0x00];

/// Whether code starts with what the kernel's `is_endbr()` takes.
fn is_endbr(bytes: &[u8]) -> bool {
    bytes.starts_with(&ENDBR_POISON) || ENDBR.iter().any(|e| bytes.starts_with(e))
}

/// A function's code after its `endbr64`/`endbr32` or the nop a sealed one
/// becomes (all four bytes), or all of it when it starts with none.
pub fn after_endbr(bytes: &[u8]) -> &[u8] {
    if is_endbr(bytes) { &bytes[4..] } else { bytes }
}

/// Whether the running kernel's function `symbol` (`NAME` or `MOD:NAME`)
/// starts with an `endbr64`/`endbr32` or the nop a sealed one becomes, read
/// from /proc/kcore; `None` when its code cannot be read.
pub fn starts_with_endbr(view: &KernelView, symbol: &str) -> Option<bool> {
    // A symbol that is not a function (data): its bytes are no endbr64.
    let (module, name) = split_module(symbol);
    if let Ok(ks) = view.kallsyms() {
        let found = ks.by_name(name, module);
        if !found.is_empty() && found.iter().all(|s| !s.is_text()) {
            return Some(false);
        }
    }
    let bytes = Source::live(view).read(symbol).ok()?;
    Some(is_endbr(&bytes))
}

/// Makes the code checks of an accepted kprobe at `SYM+OFF` that the
/// checker left open ([`Unchecked::InsnBoundary`], and on x86
/// [`Unchecked::FunctionEntry`] for `+4`): a refusal replaces the
/// definition with the kernel's error; a pass removes the open check.
/// Returns why the checks stay open, when they do.
pub fn check(checked: &mut Checked, target: Target, source: &Source) -> Option<String> {
    let arch = target.arch;
    let Ok(Definition::Probe(p)) = &checked.definition else {
        return None;
    };
    let ProbeKind::Kprobe {
        place, is_return, ..
    } = &p.kind
    else {
        return None;
    };
    // a raw address is judged as the function and offset it falls in
    // (x86_64 5.10, seed 20261130 #115975: `p 0xffffffffb610b600`, inside
    // an instruction, was accepted unjudged)
    let (symbol, offset, is_return, by_address) = match place {
        KprobePlace::Symbol { symbol, offset } => (symbol.clone(), *offset, *is_return, false),
        &KprobePlace::Address(addr) if arch == Arch::X86_64 && !*is_return => {
            match address_symbol(source, addr) {
                Some((name, off)) if off != 0 => (name, off, false, true),
                _ => return None,
            }
        }
        _ => return None,
    };
    let probe = (symbol.clone(), offset);
    if arch == Arch::Arm64 && offset != 0 && !is_return {
        return arm64_decoder(checked, target, source, &symbol, offset);
    }
    let open = |c: &Checked, u| c.unchecked.contains(&u);
    let boundary = by_address || open(checked, Unchecked::InsnBoundary);
    let entry = open(checked, Unchecked::FunctionEntry);
    if !boundary && !entry {
        return None;
    }
    // x86_64 code is decoded; riscv64's boundaries are walked; 32-bit arm's
    // ARM-state word at the address is judged.
    let x86 = match arch {
        Arch::X86_64 => true,
        Arch::Riscv64 => false,
        Arch::Arm64 => return None,
        Arch::Arm if !is_return => return check_arm(checked, source, &symbol, offset),
        other => return Some(format!("ktrace has no kprobe rules for {}", other.name())),
    };
    let bytes = match source.read(&symbol) {
        Ok(b) => b,
        Err(why) => return Some(why),
    };
    if entry {
        if is_endbr(&bytes) || !is_return {
            checked.unchecked.retain(|u| *u != Unchecked::FunctionEntry);
        } else {
            reject(
                checked,
                TpErr::BAD_RETPROBE,
                format!(
                    "{symbol} starts with {} (no endbr64), so only +0 is its entry; \
                     return probes must be placed on the function entry",
                    ktrace_disasm::hex_bytes(&bytes[..bytes.len().min(4)])
                ),
            );
            return None;
        }
    }
    if !boundary {
        return None;
    }
    let len = bytes.len() as u64;
    // Past the function's end the address is in another function: the
    // kernel checks the boundary there, from that function's start.
    let (fname, offset, bytes) = if offset >= len {
        if let Some(why) = past_module_text(source, &symbol, offset) {
            return Some(why);
        }
        match source.containing(&symbol, offset) {
            Ok((f, o, b)) => (f, o, b),
            Err(why) => {
                return Some(format!(
                    "+{offset:#x} is past the end of {symbol} ({len:#x} bytes): {why}"
                ));
            }
        }
    } else {
        (symbol.clone(), offset, bytes)
    };
    let symbol = fname;
    if !x86 {
        if reserved(
            checked,
            source,
            arch,
            (&probe.0, probe.1),
            (&symbol, offset),
            &[],
        ) {
            return None;
        }
        // riscv64: arch_check_kprobe() walks 2- and 4-byte instructions
        // from the function's start.
        return check_riscv(checked, &bytes, offset, &symbol);
    }
    let insns = ktrace_disasm::decode(Isa::X86_64, &bytes, 0);
    if reserved(
        checked,
        source,
        arch,
        (&probe.0, probe.1),
        (&symbol, offset),
        &insns,
    ) {
        return None;
    }
    // Another tool's kprobe shows as int3 in the live code; the kernel
    // decodes the original instruction there, ktrace cannot. (An int3
    // after a return or jump is the compiler's straight-line-speculation
    // padding, not a probe.)
    if let Some(why) = int3_before(&insns, &bytes, offset) {
        return Some(why);
    }
    check_x86(checked, target, &bytes, &insns, offset, &symbol)
}

/// A probe at `probe` (`SYM+OFF` as written) of the running kernel's own
/// text (not a module's) inside a site the kernel patches itself: refused
/// as `check_kprobe_address_safe()` refuses it, before any boundary check
/// (x86_64 6.12: `async_run_entry_fn+0x34`, the 5-byte nop of a static
/// branch). `at` is the function the address falls in and the offset into
/// it (the probe itself, or the function past its end), `insns` that
/// function's decoded code, for the length of an x86 site. Whether it
/// refused.
fn reserved(
    checked: &mut Checked,
    source: &Source,
    arch: Arch,
    probe: (&str, u64),
    at: (&str, u64),
    insns: &[ktrace_disasm::Insn],
) -> bool {
    let Source::Live(view, core) = source else {
        return false;
    };
    let ((symbol, offset), (fname, foff)) = (probe, at);
    let Ok(ks) = view.kallsyms() else {
        return false;
    };
    // `MOD:SYM`: a loaded module's function, whose own tables the sites
    // include
    let (module, name) = split_module(symbol);
    let Some(addr) = ks
        .by_name(name, module)
        .into_iter()
        .find(|s| s.is_text())
        .and_then(|s| s.addr.checked_add(offset))
    else {
        return false;
    };
    let start = addr - foff.min(addr);
    let sites = crate::reserved::Sites::running(view, core, arch);
    let len = |code: u64| {
        let off = code.checked_sub(start)?;
        insns
            .iter()
            .find(|i| i.offset == off)
            .map(|i| u64::from(i.len))
    };
    let Some(site) = sites.at(addr, arch, len) else {
        return false;
    };
    reject(
        checked,
        TpErr::FAIL_REG_PROBE,
        format!(
            "{fname}+{foff:#x} is in {}: kprobes refuse it (ktrace disasm {fname} marks it)",
            site.describe()
        ),
    );
    true
}

/// Refuses `symbol+offset` as the kernel's "not an instruction boundary",
/// naming the nearest boundaries (and `more` after them).
fn not_a_boundary(
    checked: &mut Checked,
    symbol: &str,
    offset: u64,
    nearest: [Option<u64>; 2],
    more: &str,
) {
    let near: Vec<String> = nearest
        .into_iter()
        .flatten()
        .map(|o| format!("{symbol}+{o:#x}"))
        .collect();
    reject(
        checked,
        TpErr::BAD_INSN_BNDRY,
        format!(
            "+{offset:#x} is inside an instruction; the nearest boundaries are {}{more}",
            near.join(" and ")
        ),
    );
}

/// riscv64's boundary check of `SYM+OFF`: arch_check_kprobe() walks 2- and
/// 4-byte instructions from the function's start; a refusal names the
/// nearest boundaries.
fn check_riscv(checked: &mut Checked, bytes: &[u8], offset: u64, symbol: &str) -> Option<String> {
    match riscv_boundary(bytes, offset) {
        Ok(()) => {
            checked.unchecked.retain(|u| *u != Unchecked::InsnBoundary);
            // riscv_probe_decode_insn(): -EINVAL for what it rejects
            let code = bytes.get(offset as usize..).unwrap_or_default();
            if let Some(why) = ktrace_disasm::riscv::kprobe_refusal(code) {
                reject(
                    checked,
                    TpErr::FAIL_REG_PROBE,
                    format!("{symbol}+{offset:#x} is {why} (ktrace disasm {symbol} marks it)"),
                );
            }
            None
        }
        Err((before, after)) => {
            not_a_boundary(checked, symbol, offset, [before, after], "");
            None
        }
    }
}

/// Another tool's kprobe before `offset`: an int3 where an instruction
/// falls through to it (not the padding after a return or jump), which
/// hides the instruction the kernel decodes there.
fn int3_before(insns: &[ktrace_disasm::Insn], bytes: &[u8], offset: u64) -> Option<String> {
    let before: Vec<_> = insns.iter().take_while(|i| i.offset < offset).collect();
    let i = before
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find_map(|(prev, i)| {
            let is_int3 = |x: &ktrace_disasm::Insn| {
                x.valid && x.len == 1 && bytes.get(x.offset as usize) == Some(&0xcc)
            };
            let int3 = is_int3(i);
            // (a run of int3 after a return is padding too)
            let falls_in = !is_int3(prev)
                && matches!(
                    prev.flow,
                    ktrace_disasm::Flow::Next
                        | ktrace_disasm::Flow::Call
                        | ktrace_disasm::Flow::CondJump
                );
            (int3 && falls_in).then_some(i)
        })?;
    Some(format!(
        "an int3 at +{:#x} (another kprobe?) hides the instruction there",
        i.offset
    ))
}

/// The x86 boundary check of `SYM+OFF` in the function's decoded code: a
/// refusal names the nearest boundaries; on a boundary, an instruction the
/// kernel will not probe is refused as it refuses it.
fn check_x86(
    checked: &mut Checked,
    target: Target,
    bytes: &[u8],
    insns: &[ktrace_disasm::Insn],
    offset: u64,
    symbol: &str,
) -> Option<String> {
    match ktrace_disasm::boundary(Isa::X86_64, bytes, offset) {
        Ok(()) => {
            checked.unchecked.retain(|u| *u != Unchecked::InsnBoundary);
            if let Some(i) = insns.iter().find(|i| i.offset == offset)
                && let Some((err, hint)) = exception_insn(target, bytes, i, symbol)
            {
                reject(checked, err, hint);
            }
            None
        }
        Err(nb) => {
            let list = format!(" (ktrace disasm {symbol} lists them all)");
            not_a_boundary(
                checked,
                symbol,
                offset,
                [nb.nearest_before, nb.nearest_after],
                &list,
            );
            None
        }
    }
}

/// arm64's `arch_prepare_kprobe()` decodes the word at the probe address
/// (`arm_kprobe_decode_insn()`) and refuses with `-EINVAL`, which the
/// kernel logs as "Failed to register probe event" at the probe point,
/// what it can neither single-step nor simulate (`autiasp`, `msr`, `brk`,
/// an exclusive sequence, ...): ktrace-disasm decides it from the code
/// where every kernel decides alike. Code that cannot be read, or a word
/// the kernels differ on, leaves the definition as it is; an offset past
/// a module's text too, and says why (returned).
fn arm64_decoder(
    checked: &mut Checked,
    target: Target,
    source: &Source,
    symbol: &str,
    offset: u64,
) -> Option<String> {
    let probe_offset = offset;
    let Ok(bytes) = source.read(symbol) else {
        return None;
    };
    let (fname, offset, bytes) = if offset >= bytes.len() as u64 {
        if let Some(why) = past_module_text(source, symbol, offset) {
            return Some(why);
        }
        match source.containing(symbol, offset) {
            Ok(found) => found,
            Err(_) => return None,
        }
    } else {
        (symbol.to_string(), offset, bytes)
    };
    let probe = (symbol, probe_offset);
    if reserved(checked, source, Arch::Arm64, probe, (&fname, offset), &[]) {
        return None;
    }
    let wide = target.features().arm64_wide_exclusive_masks;
    let Ok(Some(why)) = ktrace_disasm::arm64::kprobe_refusal_with(&bytes, offset, Some(wide))
    else {
        return None;
    };
    let at = offset as usize;
    refuse_word(
        checked,
        Isa::Arm64,
        (&fname, offset),
        &bytes[at..at + 4],
        why,
    );
    None
}

/// Refuses the kprobe at `at` (function, offset) on the 4-byte `word`
/// there, which the kernel's decoder for `isa` rejects for `why`: the
/// kernel's "Failed to register probe event", the instruction named.
fn refuse_word(checked: &mut Checked, isa: Isa, at: (&str, u64), word: &[u8], why: &str) {
    let (fname, offset) = at;
    let text = ktrace_disasm::decode(isa, word, 0)
        .first()
        .map_or_else(String::new, |i| i.text.clone());
    reject(
        checked,
        TpErr::FAIL_REG_PROBE,
        format!(
            "{fname}+{offset:#x} is `{text}` ({}), which {} kprobes refuse: {why} \
             (ktrace disasm {fname} marks what a probe can take)",
            ktrace_disasm::hex_bytes(word),
            isa.arch().name()
        ),
    );
}

/// 32-bit arm's `arch_prepare_kprobe()` in an ARM-state kernel (Debian's
/// armmp; ktrace assumes no Thumb-2 kernel, as the alignment rule does):
/// a misaligned address is refused before this (4-byte instructions);
/// the word at an aligned one goes through `arm_probes_decode_insn()`,
/// and what it rejects ([`ktrace_disasm::arm::kprobe_refusal`]: coprocessor
/// and system instructions, barriers, exclusives, PC where it cannot be
/// emulated, stores far below SP) is "Failed to register probe event" at
/// the probe point. The code must be readable (`--vmlinux`, or
/// /proc/kcore, which Debian's arm kernels do not have).
fn check_arm(checked: &mut Checked, source: &Source, symbol: &str, offset: u64) -> Option<String> {
    let bytes = match source.read(symbol) {
        Ok(b) => b,
        Err(why) => return Some(why),
    };
    let (fname, offset, bytes) = if offset >= bytes.len() as u64 {
        match source.containing(symbol, offset) {
            Ok(found) => found,
            Err(why) => {
                return Some(format!(
                    "+{offset:#x} is past the end of {symbol} ({:#x} bytes): {why}",
                    bytes.len()
                ));
            }
        }
    } else {
        (symbol.to_string(), offset, bytes)
    };
    if offset % 4 != 0 {
        // refused before the code is read (the checker's alignment rule)
        return None;
    }
    let at = usize::try_from(offset).ok()?;
    let Some(&[a, b, c, d]) = bytes.get(at..at + 4) else {
        return Some(format!(
            "{fname}+{offset:#x}: fewer than 4 bytes of code there"
        ));
    };
    checked.unchecked.retain(|u| *u != Unchecked::InsnBoundary);
    if let Some(why) = ktrace_disasm::arm::kprobe_refusal(u32::from_le_bytes([a, b, c, d])) {
        refuse_word(checked, Isa::Arm, (&fname, offset), &[a, b, c, d], why);
    }
    None
}

/// An x86 instruction at the probe address that the kernel refuses to
/// probe, with the error it logs. `can_probe()` refuses INT and UD
/// instructions since 6.12 (estimate: seen on 6.12 and 7.2, "Probe point is
/// not an instruction boundary" for an `int3` of the padding after a
/// `ret`); before (6.1, 5.10), an `int3` there passes `can_probe()` and
/// `__copy_instruction()` refuses it: "Failed to register probe event". A
/// `ud2` fails earlier on every kernel, as a BUG()/WARN() site.
pub fn exception_insn(
    target: Target,
    bytes: &[u8],
    i: &ktrace_disasm::Insn,
    symbol: &str,
) -> Option<(TpErr, String)> {
    let at = &bytes[i.offset as usize..];
    let what = match at {
        [0xcc, ..] => "int3",
        [0xcd, ..] => "int",
        [0xce, ..] => "into",
        [0xf1, ..] => "int1",
        [0x0f, 0x0b, ..] => "ud2",
        [0x0f, 0xb9, ..] => "ud1",
        [0x0f, 0xff, ..] => "ud0",
        _ => return None,
    };
    let off = i.offset;
    // check_kprobe_address_safe() comes first: a `ud2` is a BUG()/WARN()
    // site (find_bug(); every ud2 of kernel text is taken to be one)
    if what == "ud2" {
        return Some((
            TpErr::FAIL_REG_PROBE,
            format!("{symbol}+{off:#x} is a ud2, a BUG()/WARN() site, which kprobes refuse"),
        ));
    }
    if target.features().can_probe_refuses_exceptions {
        Some((
            TpErr::BAD_INSN_BNDRY,
            format!(
                "{symbol}+{off:#x} is an {what}: the kernel does not probe INT and UD \
                 instructions (an int3 there is padding or another debugger's breakpoint)"
            ),
        ))
    } else if what == "int3" {
        Some((
            TpErr::FAIL_REG_PROBE,
            format!(
                "{symbol}+{off:#x} is an int3 (padding or another debugger's breakpoint): the \
                 kernel cannot copy it to single-step"
            ),
        ))
    } else {
        None
    }
}

/// Whether a uprobe at `file_offset` of the ELF at `path` starts an
/// instruction of the function it falls in, decoded from the file (x86_64),
/// or is aligned (aarch64's 4-byte instructions). The kernel does not
/// check: a uprobe inside an instruction is accepted, and the traced
/// program dies of SIGILL when it gets there. `Ok(())` also when the
/// offset is in no function of the symbol table, or the machine is not
/// one ktrace decodes.
pub fn uprobe_boundary(path: &Path, file_offset: u64) -> Result<(), String> {
    // One parse per file and process (`ktrace check` of many definitions on
    // one binary, the differential tester).
    type Cache = std::collections::HashMap<PathBuf, Option<std::sync::Arc<elf::ElfImage>>>;
    static IMAGES: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);
    let image = {
        let mut cache = IMAGES.lock().unwrap_or_else(|p| p.into_inner());
        let cache = cache.get_or_insert_with(Cache::new);
        cache
            .entry(path.to_path_buf())
            .or_insert_with(|| elf::open(path).ok().map(std::sync::Arc::new))
            .clone()
    };
    let Some(image) = image else {
        return Ok(());
    };
    let Some(vaddr) = image.file_offset_to_vaddr(file_offset) else {
        return Ok(());
    };
    let Some((sym, inner)) = image.symbolize(vaddr) else {
        return Ok(());
    };
    if inner == 0 || sym.size == 0 || inner >= sym.size {
        return Ok(());
    }
    let name = sym.display_name();
    match Arch::from_elf_machine(image.machine) {
        Some(Arch::Arm64) if inner % 4 != 0 => Err(format!(
            "{name}+{inner:#x} is not on an instruction (aarch64 instructions are 4 bytes: \
             {name}+{:#x} and {name}+{:#x} are); the traced program would die of SIGILL there",
            inner - inner % 4,
            inner - inner % 4 + 4
        )),
        Some(Arch::X86_64) => {
            let Ok((_, bytes)) = symbol_bytes(path, &image, sym) else {
                return Ok(());
            };
            match ktrace_disasm::boundary(Isa::X86_64, &bytes, inner) {
                Ok(()) => Ok(()),
                Err(nb) => {
                    let near: Vec<String> = [nb.nearest_before, nb.nearest_after]
                        .into_iter()
                        .flatten()
                        .map(|o| format!("{name}+{o:#x}"))
                        .collect();
                    Err(format!(
                        "{name}+{inner:#x} is inside an instruction; the nearest boundaries are \
                         {}; the traced program would die of SIGILL there",
                        near.join(" and ")
                    ))
                }
            }
        }
        _ => Ok(()),
    }
}

/// riscv64's `arch_check_kprobe()`: from the function's start, each
/// instruction is 4 bytes when its low two bits are set, else 2 (a
/// compressed one); `offset` must land on one. The boundaries around it
/// otherwise.
fn riscv_boundary(bytes: &[u8], offset: u64) -> Result<(), (Option<u64>, Option<u64>)> {
    let mut at = 0u64;
    let mut before = None;
    while at <= offset {
        if at == offset {
            return Ok(());
        }
        before = Some(at);
        let Some(&low) = bytes.get(at as usize) else {
            return Err((before, None));
        };
        at += if low & 3 == 3 { 4 } else { 2 };
    }
    Err((before, Some(at).filter(|a| (*a as usize) < bytes.len())))
}

/// A module's function probed past the end of the module's text (into the
/// data after it, or the gap before its next allocation): the kernel
/// refuses it, but how differs (x86_64 6.1: "Failed to register probe
/// event", `__module_text_address()`; 6.12: "Invalid probed address or
/// symbol", kallsyms cannot place the address), so the verdict is left to
/// it, and why is said. `None` when the address is in the text or this
/// cannot be told.
fn past_module_text(source: &Source, symbol: &str, offset: u64) -> Option<String> {
    let Source::Live(view, _) = source else {
        return None;
    };
    if !view.is_running() {
        return None;
    }
    let (module, name) = split_module(symbol);
    let ks = view.kallsyms().ok()?;
    let sym = ks.by_name(name, module).into_iter().find(|s| s.is_text())?;
    let m = sym.module.as_deref()?;
    let end = crate::modules::module_text_end(m, sym.addr)?;
    let addr = sym.addr.checked_add(offset)?;
    (addr >= end).then(|| {
        format!(
            "{symbol}+{offset:#x} ({addr:#x}) is past the end of {m}'s text ({end:#x}, where its \
             data starts): the kernel refuses it"
        )
    })
}

/// The function of the running kernel (`NAME` or `MOD:NAME`, a name
/// kallsyms gives one function) that `addr` falls in, and the offset.
fn address_symbol(source: &Source, addr: u64) -> Option<(String, u64)> {
    let Source::Live(view, _) = source else {
        return None;
    };
    let ks = view.kallsyms().ok()?;
    if ks.addresses_hidden() {
        return None;
    }
    let at = ks.lookup(addr)?;
    let sym = at.symbol;
    if !sym.is_text() || ks.by_name(&sym.name, sym.module.as_deref()).len() != 1 {
        return None;
    }
    let name = match &sym.module {
        Some(m) => format!("{m}:{}", sym.name),
        None => sym.name.to_string(),
    };
    Some((name, at.offset))
}

/// `MOD:NAME` as (Some(MOD), NAME); `NAME` as (None, NAME).
pub fn split_module(symbol: &str) -> (Option<&str>, &str) {
    match symbol.split_once(':') {
        Some((m, n)) => (Some(m), n),
        None => (None, symbol),
    }
}

/// Replaces an accepted definition with the kernel's logged error `err`,
/// the caret on the probe point as `trace_kprobe_create()` logs it.
fn reject(checked: &mut Checked, err: TpErr, hint: String) {
    let command = checked.command.clone();
    let pos = command.find(' ').map(|p| p + 1);
    checked.definition = Err(ProbeError {
        kind: ErrorKind::Logged(err),
        message: err.message(),
        subsystem: Some("trace_kprobe"),
        pos,
        command,
        hint: Some(hint),
    });
    checked.unchecked.clear();
}

/// The checks left open, described for a report; the instruction boundary
/// (and function entry) with `why` they stayed open.
pub fn not_checked(c: &Checked, why: Option<&str>) -> Vec<String> {
    let code = |u: &Unchecked| matches!(u, Unchecked::InsnBoundary | Unchecked::FunctionEntry);
    let mut out: Vec<String> = c
        .unchecked
        .iter()
        .map(|u| match why {
            Some(w) if code(u) => format!("{} ({w})", u.describe()),
            _ => u.describe().to_string(),
        })
        .collect();
    // a why without a code check it belongs to (arm64, whose offsets the
    // parser leaves no boundary check: past a module's text)
    if let Some(w) = why
        && !c.unchecked.iter().any(code)
    {
        out.push(format!("the probe point ({w})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ktrace_probe::{Offline, Target, check_line};

    /// vfs_read's bytes as Debian's 6.1 x86_64 kernel had them in
    /// /proc/kcore (crates/disasm/tests/fixtures, with the capture command).
    fn vfs_read() -> Vec<u8> {
        let text = include_str!("../../disasm/tests/fixtures/kernel-x86_64-vfs_read.txt");
        let line = text.lines().find_map(|l| l.strip_prefix("bytes ")).unwrap();
        line.split(' ')
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect()
    }

    fn run(line: &str, arch: Arch, code: &[u8]) -> (Checked, Option<String>) {
        let mut c = check_line(line, Target::new(arch), &Offline);
        let why = check(&mut c, Target::new(arch), &Source::Code(code));
        (c, why)
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_functions_code_reaches_its_first_instruction_that_does_not_fall_through() {
        // romfs's exit_romfs_fs (`.exit.text` from +0x10, after its
        // `__pfx_` padding), Debian's 7.2.13 x86_64 module: `llvm-objcopy -O
        // binary --only-section=.exit.text romfs.ko` (relocations not
        // applied, lengths as loaded): endbr64, mov, call, call, mov, then
        // its tail call `jmp kmem_cache_destroy` ending at +0x21
        let x86 = hex("f30f1efa48c7c700000000e800000000e800000000488b3d00000000e900000000");
        let mut then = x86.clone();
        then.extend_from_slice(&[0xcc; 4]);
        assert_eq!(code_reach(Isa::X86_64, &then, 0), Some(0x21));
        // the bytes end with the jump: not known to be whole
        assert_eq!(code_reach(Isa::X86_64, &x86, 0), None);
        // the same function of the arm64 module (same command): its `ret`
        // at +0x34
        let mut arm64 = hex(
            "3f2303d5fd7bbfa90000009000000091fd03009100800091000000940000009400000090\
             000040f900000094fd7bc1a8bf2303d5c0035fd6",
        );
        arm64.extend_from_slice(&[0; 4]);
        assert_eq!(code_reach(Isa::Arm64, &arm64, 0), Some(0x38));
        // code cut before its end: unknown; bytes that do not decode first:
        // up to them
        assert_eq!(code_reach(Isa::X86_64, &then[..0x20], 0), None);
        let mut bad = vec![0x90, 0x06];
        bad.extend_from_slice(&[0x90; 16]);
        assert_eq!(code_reach(Isa::X86_64, &bad, 0), Some(1));
    }

    #[test]
    fn after_endbr_skips_every_endbr_form_and_nothing_else() {
        let nop5 = [0x0f, 0x1f, 0x44, 0x00, 0x00];
        for head in [
            &ENDBR[0][..],
            &ENDBR[1][..],
            &ENDBR[2][..],
            &ENDBR_POISON[..],
        ] {
            let code = [head, &nop5[..]].concat();
            assert_eq!(after_endbr(&code), &nop5[..]);
        }
        assert_eq!(after_endbr(&nop5), &nop5[..]);
    }

    #[test]
    fn inside_an_instruction_is_refused_with_the_kernels_message_and_caret() {
        let code = vfs_read();
        // nop5 at +0, push %r15 at +5, push %r14 at +7
        let (c, why) = run("p:k/a vfs_read+6", Arch::X86_64, &code);
        assert_eq!(why, None);
        let e = c.definition.unwrap_err();
        assert_eq!(e.message, "Probe point is not an instruction boundary");
        assert_eq!(e.caret_lines().unwrap().1, "      ^");
        assert!(
            e.hint
                .unwrap()
                .contains("nearest boundaries are vfs_read+0x5 and vfs_read+0x7")
        );
        for ok in [
            "p:k/a vfs_read+5",
            "p:k/a vfs_read+7",
            "p:k/a vfs_read+0x13",
        ] {
            let (c, why) = run(ok, Arch::X86_64, &code);
            assert!(c.accepted(), "{ok}");
            assert_eq!(why, None);
            assert!(!c.unchecked.contains(&Unchecked::InsnBoundary), "{ok}");
        }
    }

    #[test]
    fn every_offset_follows_the_decoder() {
        let code = vfs_read();
        let bounds = ktrace_disasm::boundaries(Isa::X86_64, &code);
        for off in 1..code.len() as u64 {
            let (c, _) = run(&format!("p:k/a vfs_read+{off}"), Arch::X86_64, &code);
            // an int3 (the padding after `ret`: +0xed, as the x86_64 6.1
            // guest refused `p vfs_read+0xed`) is no place for a probe
            // and a ud2 (+0x2ed) is a BUG()/WARN() site
            let at = &code[off as usize..];
            let refused = at[0] == 0xcc || at.starts_with(&[0x0f, 0x0b]);
            assert_eq!(c.accepted(), bounds.contains(&off) && !refused, "+{off:#x}");
        }
    }

    #[test]
    fn retprobe_at_plus_4_needs_endbr64() {
        let code = vfs_read();
        let (c, _) = run("r:k/a vfs_read+4", Arch::X86_64, &code);
        assert_eq!(
            c.definition.unwrap_err().message,
            "Retprobe address must be an function entry"
        );
        // an IBT kernel's function: endbr64 (or FineIBT's nop), then the nop5
        for endbr in ENDBR {
            let mut ibt = endbr.to_vec();
            ibt.extend_from_slice(&code);
            let (c, why) = run("r:k/a vfs_read+4", Arch::X86_64, &ibt);
            assert!(c.accepted());
            assert_eq!(why, None);
        }
        assert!(c.unchecked.is_empty() || !c.unchecked.contains(&Unchecked::FunctionEntry));
    }

    #[test]
    fn retprobe_past_the_endbr_poison_is_at_the_entry() {
        let mut poisoned = ENDBR_POISON.to_vec();
        poisoned.extend_from_slice(&vfs_read());
        let (c, _) = run("r:k/a vfs_read+4", Arch::X86_64, &poisoned);
        assert!(c.accepted());
        assert!(!c.unchecked.contains(&Unchecked::FunctionEntry));
        // without it, +4 is refused as the kernel does
        let (c, _) = run("r:k/a vfs_read+4", Arch::X86_64, &vfs_read());
        assert!(!c.accepted());
    }

    #[test]
    fn what_cannot_be_decided_says_why() {
        let code = vfs_read();
        let (c, why) = run("p:k/a vfs_read+0x5000", Arch::X86_64, &code);
        assert!(c.accepted());
        assert_eq!(
            why.as_deref(),
            Some(
                "+0x5000 is past the end of vfs_read (0x310 bytes): only the running kernel's \
                 symbols tell which function is there"
            )
        );
        let list = not_checked(&c, why.as_deref());
        assert!(
            list.iter()
                .any(|l| l.starts_with("instruction boundary of the offset (+0x5000"))
        );
        // riscv64: 2- and 4-byte instructions walked from the start (a
        // compressed one, low bits 01, then a 4-byte one, low bits 11)
        let rv = [0x01u8, 0x00, 0x13, 0x00, 0x00, 0x00, 0x01, 0x00];
        let (c, why) = run("p:k/a f+2", Arch::Riscv64, &rv);
        assert!(c.accepted(), "{:?}", c.definition);
        assert_eq!(why, None);
        let (c, _) = run("p:k/a f+4", Arch::Riscv64, &rv);
        let e = c.definition.unwrap_err();
        assert_eq!(e.message, "Probe point is not an instruction boundary");
        assert!(e.hint.unwrap().contains("f+0x2 and f+0x6"));
        // 32-bit arm (ARM state): kfree of Debian's 6.12.117 armmp, whose
        // +16 (`mrc p15, 0, r3, c13, c0, 3`, reading the thread pointer)
        // the kernel refused ("Failed to register probe event") and whose
        // +20 and +24 it took; +12 is the ftrace site (the `bl` before
        // boot patches it), which the checker refuses before the code.
        let kfree: Vec<u8> = [
            0xe92d_47f0u32,
            0xe24d_d010,
            0xe52d_e004,
            0xebf4_a35d,
            0xee1d_3f70,
            0xe283_2e67,
            0xe1a0_700e,
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
        let (c, why) = run("p:k/a kfree+16", Arch::Arm, &kfree);
        let e = c.definition.unwrap_err();
        assert_eq!(e.message, "Failed to register probe event");
        assert!(e.hint.unwrap().contains("kfree+0x10 is `mrc"));
        assert_eq!(why, None);
        for ok in ["p:k/a kfree+20", "p:k/a kfree+24", "p:k/a kfree+4"] {
            let (c, why) = run(ok, Arch::Arm, &kfree);
            assert!(c.accepted(), "{ok}: {:?}", c.definition);
            assert_eq!(why, None);
            assert!(!c.unchecked.contains(&Unchecked::InsnBoundary), "{ok}");
        }
        let (c, why) = run("p:k/a kfree+0x100", Arch::Arm, &kfree);
        assert!(c.accepted());
        assert!(why.unwrap().starts_with("+0x100 is past the end of kfree"));
        let mut c = check_line("p:k/a vfs_read+6", Target::new(Arch::X86_64), &Offline);
        let why = check(
            &mut c,
            Target::new(Arch::X86_64),
            &Source::None("offline".into()),
        );
        assert_eq!(why.as_deref(), Some("offline"));
        // another tool's int3 before the offset
        let mut hit = code.clone();
        hit[5] = 0xcc;
        let (c, why) = run("p:k/a vfs_read+0x13", Arch::X86_64, &hit);
        assert!(c.accepted());
        assert!(why.unwrap().starts_with("an int3 at +0x5"));
    }

    #[test]
    fn an_int3_of_the_padding_is_refused_as_each_kernel_refuses_it() {
        // x86_64 guests: `p set_majmin+0x13` (the first int3 after `ret`)
        // and `p bpf_lsm_socket_sock_rcv_skb+0xf` (the fourth) are "not an
        // instruction boundary" on 6.12 and 7.2; an int3 after `ret` on 6.1
        // and 5.10 is "Failed to register probe event".
        // endbr64; nopl 0(%rax,%rax); xor %eax,%eax; ret; int3 x4
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x31, 0xc0, 0xc3, 0xcc, 0xcc,
            0xcc, 0xcc,
        ];
        for (series, err) in [
            ((7, 2), "Probe point is not an instruction boundary"),
            ((6, 12), "Probe point is not an instruction boundary"),
            ((6, 1), "Failed to register probe event"),
            ((5, 10), "Failed to register probe event"),
        ] {
            let mut t = Target::new(Arch::X86_64);
            t.kernel = ktrace_probe::KernelVersion::new(series.0, series.1);
            for off in [0xc, 0xf] {
                let mut c = check_line(&format!("p:k/a f+{off}"), t, &Offline);
                let why = check(&mut c, t, &Source::Code(&code));
                assert_eq!(why, None, "{series:?} +{off:#x}");
                let e = c.definition.unwrap_err();
                assert_eq!(e.message, err, "{series:?} +{off:#x}");
                assert!(e.hint.unwrap().contains("int3"));
            }
            let mut c = check_line("p:k/a f+0xb", t, &Offline);
            check(&mut c, t, &Source::Code(&code));
            assert!(c.accepted(), "the ret");
        }
    }

    #[test]
    fn arm64_words_the_decoder_rejects_are_the_kernels_registration_failure() {
        // vfs_read of arm64 6.1 (the disasm fixture, read from /proc/kcore):
        // autiasp at +0x124, brk #0x800 (BUG) at +0x2b0; conform seed 41 on
        // arm64 7.2 met `p acpi_disable_wakeup_device_power+0x3c`, an
        // autiasp, refused as "Failed to register probe event"
        let text = include_str!("../../disasm/tests/fixtures/kernel-arm64-vfs_read.txt");
        let line = text.lines().find_map(|l| l.strip_prefix("bytes ")).unwrap();
        let code: Vec<u8> = line
            .split(' ')
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        for (off, word) in [(0x124, "autiasp"), (0x2b0, "brk")] {
            let (c, why) = run(&format!("p:k/a vfs_read+{off:#x}"), Arch::Arm64, &code);
            assert_eq!(why, None);
            let e = c.definition.unwrap_err();
            assert_eq!(e.message, "Failed to register probe event", "{off:#x}");
            assert_eq!(e.caret_lines().unwrap().1, "      ^");
            let hint = e.hint.unwrap();
            assert!(
                hint.contains(&format!("vfs_read+{off:#x} is `{word}")),
                "{hint}"
            );
        }
        for ok in [
            "p:k/a vfs_read+0x8",
            "p:k/a vfs_read+0x128",
            "p:k/a vfs_read+0x1c",
        ] {
            let (c, _) = run(ok, Arch::Arm64, &code);
            assert!(c.accepted(), "{ok}");
        }
        // past the function without the running kernel's symbols: left
        let (c, _) = run("p:k/a vfs_read+0x100000", Arch::Arm64, &code);
        assert!(c.accepted());
    }

    #[test]
    fn arm64_misalignment_is_the_checkers_with_a_hint() {
        let (c, why) = run("p:k/a vfs_read+6", Arch::Arm64, &[]);
        assert_eq!(why, None);
        let e = c.definition.unwrap_err();
        assert_eq!(e.message, "Failed to register probe event");
        assert!(e.hint.unwrap().contains("vfs_read+0x4 and vfs_read+0x8"));
    }
}
