//! `ktrace disasm`: a function's instructions, and where a probe can go.
//!
//! Kernel functions (`SYM[+OFF]`, `MOD:SYM[+OFF]`) are read from the
//! running kernel: address and size from /proc/kallsyms, bytes from
//! /proc/kcore, the kprobe blacklist from debugfs (through ktrace-tracefs);
//! or offline from `--vmlinux FILE` (its ELF symbols and segments). User
//! functions (`PATH:SYM[+OFF]`, `LIB:SYM[+OFF]`) are resolved the way
//! `ktrace trace` resolves uprobes, and each line shows the uprobe file
//! offset. Each line is marked `*` when a kprobe can go there (an
//! instruction boundary, not refused by the architecture's rules in
//! ktrace-disasm, not blacklisted, not an arm64 ftrace patch site) and `-`
//! otherwise, with the reason. Read-only: nothing is written to the kernel.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use ktrace_disasm::{Insn, Isa};
use ktrace_probe::Arch;
use ktrace_probe::error::TpErr;
use ktrace_symbols::blacklist::{self, BlacklistEntry};
use ktrace_symbols::kallsyms::KernelSymbol;
use ktrace_symbols::{KernelView, elf, library};

/// Where ld.so.cache lives (LIB:SYM lookups).
const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// Arguments of `ktrace disasm`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ktrace disasm do_sys_openat2             the running kernel's code, probe-able offsets marked *
  ktrace disasm vfs_read+0x1c              is +0x1c a place a kprobe can take? (exit 1 if not)
  ktrace disasm vfs_read --offsets         OFFSET LENGTH ok|refused lines for scripts
  ktrace disasm do_sys_openat2 --vmlinux ./vmlinux --arch x86_64
  ktrace disasm /bin/bash:readline         user code, with the uprobe file offset per line
  ktrace disasm libc:getenv")]
pub struct Args {
    /// `SYM[+OFF]` or `MOD:SYM[+OFF]` (kernel), or `PATH:SYM[+OFF]` /
    /// `LIB:SYM[+OFF]` (user code; PATH contains a `/`, LIB starts with
    /// `lib`). Several: each listed in turn, the kernel's symbols and
    /// tables read once (with --offsets, each list after a `# TARGET`
    /// line).
    #[arg(required = true, num_args = 1..)]
    pub target: Vec<String>,
    /// Decode as this architecture (x86_64, arm64, arm, thumb, riscv64);
    /// default: the ELF file's, or this machine's for the running kernel.
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Read the kernel function from this vmlinux (ELF with symbols)
    /// instead of /proc/kallsyms and /proc/kcore.
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<PathBuf>,
    /// Kernel symbols from this file instead of /proc/kallsyms.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// Kernel memory from this ELF core instead of /proc/kcore.
    #[arg(long, value_name = "FILE")]
    pub kcore: Option<PathBuf>,
    /// With LIB:SYM, find the library in this process's maps first.
    #[arg(long, short = 'p')]
    pub pid: Option<u32>,
    /// Print `OFFSET LENGTH ok|refused[: reason]` per instruction instead
    /// of the listing.
    #[arg(long)]
    pub offsets: bool,
}

/// One function's code and how to name addresses around it.
struct Function<'v> {
    /// What to call it in the header.
    title: String,
    /// Its first address.
    addr: u64,
    /// Its bytes.
    bytes: Vec<u8>,
    isa: Isa,
    /// Where the bytes came from.
    source: String,
    /// The offset asked for, if any.
    offset: Option<u64>,
    /// For user code: the file offset of the first byte.
    file_offset: Option<u64>,
    /// Kernel: whether kprobe rules apply (false for user code).
    kernel: bool,
    /// Extra refusals by offset (blacklist, ftrace site, an exception
    /// instruction of the running kernel's rules).
    extra: Vec<(u64, String)>,
    /// What the kernel logs for a refusal at an offset, where it is not
    /// "Failed to register probe event".
    kernel_says: Vec<(u64, &'static str)>,
    /// Notes for the header.
    notes: Vec<String>,
    names: Box<dyn Fn(u64) -> Option<String> + 'v>,
}

/// Runs `ktrace disasm`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let isa = args.arch.as_deref().map(Isa::parse).transpose()?;
    if let [target] = args.target.as_slice() {
        return run_one(&args, target, isa, &mut None);
    }
    // several: each in turn, one kernel view for all; a target that
    // fails is said and the others listed
    let mut view = None;
    let mut failed = false;
    for (i, target) in args.target.iter().enumerate() {
        if args.offsets {
            println!("# {target}");
        } else if i > 0 {
            println!();
        }
        match run_one(&args, target, isa, &mut view) {
            Ok(code) => failed |= code != ExitCode::SUCCESS,
            Err(e) => {
                crate::say!("{target}: {e:#}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One target of `ktrace disasm`; `view`: the kernel's, read at the first
/// kernel target and kept for the next.
fn run_one(
    args: &Args,
    target: &str,
    isa: Option<Isa>,
    view: &mut Option<ktrace_symbols::KernelView>,
) -> anyhow::Result<ExitCode> {
    let f = if is_user_target(target) {
        user_function(args, target, isa)?
    } else if let Some(vmlinux) = &args.vmlinux {
        vmlinux_function(target, vmlinux, isa)?
    } else {
        let view = view.get_or_insert_with(|| match &args.kallsyms {
            Some(p) => ktrace_symbols::KernelView::running(None).with_kallsyms_file(p),
            None => ktrace_symbols::KernelView::running(
                ktrace_tracefs::discover::find_mounted().as_deref(),
            ),
        });
        kernel_function(args, target, isa, view)?
    };
    let insns = ktrace_disasm::decode(f.isa, &f.bytes, f.addr);
    let verdicts: Vec<Option<String>> = insns.iter().map(|i| verdict(&f, i)).collect();
    if args.offsets {
        print_offsets(&insns, &verdicts);
    } else {
        print_listing(&f, &insns, &verdicts);
    }
    let Some(off) = f.offset else {
        return Ok(ExitCode::SUCCESS);
    };
    if let Err(e) = ktrace_disasm::boundary(f.isa, &f.bytes, off) {
        if f.kernel {
            crate::say!(
                "{}: {e}; the kernel would answer {:?}",
                f.title,
                e.kernel_message
            );
        } else {
            crate::say!(
                "{}: {e}; a uprobe there would replace the middle of an instruction",
                f.title
            );
        }
        return Ok(ExitCode::from(1));
    }
    let at = insns.iter().position(|i| i.offset == off);
    if let Some(Some(why)) = at.map(|n| &verdicts[n]) {
        let says = f
            .kernel_says
            .iter()
            .find(|(o, _)| *o == off)
            .map_or(ktrace_disasm::FAIL_REG_MESSAGE, |(_, m)| m);
        crate::say!(
            "{}+{off:#x}: refused: {why}; the kernel would answer {says:?}",
            f.title
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `PATH:SYM` (PATH has a `/`) and `LIB:SYM` (LIB starts with `lib`) are
/// user code; `MOD:SYM` and `SYM` are the kernel's.
fn is_user_target(target: &str) -> bool {
    match target.split_once(':') {
        Some((file, _)) => library::is_path(file) || file.starts_with("lib"),
        None => false,
    }
}

/// Splits `NAME+OFF` (OFF decimal or 0x hex).
fn split_offset(spec: &str) -> anyhow::Result<(&str, Option<u64>)> {
    match spec.split_once('+') {
        Some((name, off)) => {
            let o = elf::parse_number(off)
                .with_context(|| format!("{spec:?}: bad offset {off:?} (decimal or 0x hex)"))?;
            Ok((name, Some(o)))
        }
        None => Ok((spec, None)),
    }
}

/// Why a kprobe (or uprobe) cannot go on this instruction, or None.
fn verdict(f: &Function, insn: &Insn) -> Option<String> {
    if let Some((_, why)) = f.extra.iter().find(|(o, _)| *o == insn.offset) {
        return Some(why.clone());
    }
    if let Some(r) = &insn.refusal
        && (f.kernel || !insn.valid)
    {
        return Some(r.reason.to_string());
    }
    // A whole arm64 word the decoder does not know is no refusal of the
    // kernel's (6.12 and 7.2 took probes on such words at function ends);
    // elsewhere an undecodable byte sequence is not an instruction.
    let arm64_word = f.kernel && f.isa == Isa::Arm64 && insn.len == 4;
    if !insn.valid && !arm64_word {
        return Some("does not decode".to_string());
    }
    None
}

fn kernel_function<'v>(
    args: &Args,
    target: &str,
    isa: Option<Isa>,
    view: &'v ktrace_symbols::KernelView,
) -> anyhow::Result<Function<'v>> {
    let isa = match isa {
        Some(i) => i,
        None => Isa::host().context("unknown machine architecture: pass --arch")?,
    };
    let arch = isa.arch();
    let (spec, offset) = split_offset(target)?;
    let (module, name) = match spec.split_once(':') {
        Some((m, n)) => (Some(m), n),
        None => (None, spec),
    };
    // (the view reads kallsyms, the running kernel's or --kallsyms, and
    // the running kernel's tracefs when mounted: its ftrace locations)
    let core = args
        .kcore
        .clone()
        .unwrap_or_else(|| PathBuf::from(ktrace_disasm::kcore::PATH));
    let (sym, bytes) = ktrace_symbols::code::kernel_function(view, &core, name, module)?;
    let mut marks = Marks::default();
    marks.blacklist(&sym, bytes.len());
    if isa == Isa::Arm64
        && let Some(site) = ktrace_disasm::arm64::ftrace_site(&bytes)
    {
        marks.extra.push((
            site,
            "the ftrace patch site (no KPROBES_ON_FTRACE on arm64 6.1/6.12: check_ftrace_location)"
                .to_string(),
        ));
    }
    // riscv64 has no KPROBES_ON_FTRACE either (6.12 and 7.2 refuse
    // `p do_sys_openat2+0`, the first of the two patchable nops): the
    // sites are known by address from available_filter_functions_addrs
    if isa == Isa::Riscv64
        && let Some(ktrace_symbols::probeable::FtraceLocations::Addrs(sites)) = view.rules().ftrace
    {
        let end = sym.addr.saturating_add(bytes.len() as u64);
        let from = sites.partition_point(|&a| a < sym.addr);
        for &site in sites[from..].iter().take_while(|&&a| a < end) {
            marks.extra.push((
                site - sym.addr,
                "the ftrace patch site (no KPROBES_ON_FTRACE on riscv64: check_ftrace_location)"
                    .to_string(),
            ));
        }
    }
    if arch.bits() == 64 {
        marks.reserved(view, &core, isa, &sym, &bytes);
    }
    if isa == Isa::X86_64 {
        let target = crate::resolve::live::live_target(arch, view);
        marks.exceptions(target, isa, &bytes, name);
    }
    let Marks {
        mut notes,
        extra,
        kernel_says,
    } = marks;
    if let Some(line) = btf_prototype(name, isa, view) {
        notes.push(line);
    }
    let names = move |addr: u64| {
        view.kallsyms().ok()?.lookup(addr).map(|l| {
            format!(
                "{}+{:#x}{}",
                l.symbol.name,
                l.offset,
                module_suffix(l.symbol.module.as_deref())
            )
        })
    };
    Ok(Function {
        title: format!("{name}{}", module_suffix(sym.module.as_deref())),
        addr: sym.addr,
        bytes,
        isa,
        source: core.display().to_string(),
        offset,
        file_offset: None,
        kernel: true,
        extra,
        kernel_says,
        notes,
        names: Box::new(names),
    })
}

/// What `ktrace disasm` marks in a kernel function besides the decoder's
/// own refusals: offsets the kernel refuses (with why, and the message it
/// logs where the checker knows it), and notes on what was read.
#[derive(Default)]
struct Marks {
    notes: Vec<String>,
    extra: Vec<(u64, String)>,
    kernel_says: Vec<(u64, &'static str)>,
}

impl Marks {
    fn taken(&self, offset: u64) -> bool {
        self.extra.iter().any(|(o, _)| *o == offset)
    }

    /// The kprobe blacklist's ranges over the function.
    fn blacklist(&mut self, sym: &KernelSymbol, size: usize) {
        match ktrace_tracefs::debugfs::read_kprobe_blacklist(Path::new(
            ktrace_tracefs::debugfs::DEBUGFS,
        ))
        .map_err(anyhow::Error::from)
        .and_then(|t| blacklist::parse(&t).map_err(anyhow::Error::from))
        {
            Ok(list) => {
                let hits = blacklisted(&list, &sym.name, sym.module.as_deref(), sym.addr, size);
                self.notes
                    .push(format!("kprobe blacklist read ({} ranges)", list.len()));
                self.extra.extend(hits);
            }
            Err(e) => self.notes.push(format!("kprobe blacklist not read: {e:#}")),
        }
    }

    /// Sites the kernel patches itself (jump labels, static calls): refused
    /// before anything else looks at the code, as the checker refuses them
    /// (read for the 64-bit architectures: 32-bit arm's entries are
    /// absolute).
    fn reserved(
        &mut self,
        view: &KernelView,
        core: &Path,
        isa: Isa,
        sym: &KernelSymbol,
        bytes: &[u8],
    ) {
        let arch = isa.arch();
        let sites = ktrace_symbols::reserved::Sites::running(view, core, arch);
        let (jumps, calls, extable) = sites.counts();
        if jumps + calls + extable == 0 {
            self.notes.push(
                "jump label sites not read (no __start___jump_table in kallsyms nor a table of its shape, or no kcore)"
                    .to_string(),
            );
            return;
        }
        let calls_note = if calls > 0 {
            format!(", static call sites ({calls})")
        } else {
            String::new()
        };
        let extable_note = if extable > 0 {
            format!(", exception table instructions ({extable})")
        } else {
            String::new()
        };
        let how = if sites.scanned() {
            "; the tables found by their shape in the kernel image (kallsyms does not name them)"
        } else {
            ""
        };
        let (mj, mc, me) = sites.module_counts();
        let modules_note = if mj + mc + me > 0 {
            format!("; of them in loaded modules' tables: {mj}, {mc}, {me}")
        } else {
            String::new()
        };
        self.notes.push(format!(
            "jump label sites read ({jumps}){calls_note}{extable_note}{how}{modules_note}"
        ));
        let insns = ktrace_disasm::decode(isa, bytes, 0);
        let len = |code: u64| {
            let off = code.checked_sub(sym.addr)?;
            insns
                .iter()
                .find(|j| j.offset == off)
                .map(|j| u64::from(j.len))
        };
        for i in &insns {
            if self.taken(i.offset) {
                continue;
            }
            if let Some(site) = sites.at(sym.addr + i.offset, arch, len) {
                self.extra.push((i.offset, site.describe().to_string()));
                self.kernel_says
                    .push((i.offset, TpErr::FAIL_REG_PROBE.message()));
            }
        }
    }

    /// The running kernel's rules for exception instructions at the probe
    /// address, the checker's own (code.rs): INT and UD refused by
    /// can_probe() from 6.12, an int3 by __copy_instruction() before, a ud2
    /// as a BUG()/WARN() site always.
    fn exceptions(&mut self, target: ktrace_probe::Target, isa: Isa, bytes: &[u8], name: &str) {
        for i in ktrace_disasm::decode(isa, bytes, 0) {
            // (the blacklist is checked first: its refusal stands)
            if self.taken(i.offset) {
                continue;
            }
            if let Some((err, why)) = ktrace_symbols::code::exception_insn(target, bytes, &i, name)
            {
                self.extra.push((i.offset, why));
                self.kernel_says.push((i.offset, err.message()));
            }
        }
    }
}

/// `prototype: long do_sys_openat2(int dfd, ...) with dfd=%di ...` from the
/// running kernel's BTF, when it has BTF and the function (not for
/// module functions, whose types are in split BTF).
fn btf_prototype(name: &str, isa: Isa, view: &ktrace_symbols::KernelView) -> Option<String> {
    // (the view's BTF, read once for every function listed)
    let btf = view.btf().ok()?;
    let (ret, params) = btf.func_params(name)?;
    // the probe language's argument registers (32-bit arm and riscv64
    // pass some arguments in register pairs: not shown)
    let regs: &[&str] = match isa {
        Isa::X86_64 | Isa::Arm64 => isa.arch().arg_registers(),
        _ => &[],
    };
    let decl = |t: &str, n: &str| {
        if t.ends_with('*') {
            format!("{t}{n}")
        } else {
            format!("{t} {n}")
        }
    };
    let proto: Vec<String> = params.iter().map(|(n, t)| decl(t, n)).collect();
    let at_entry: Vec<String> = params
        .iter()
        .zip(regs)
        .map(|((n, _), r)| format!("{n}=%{r}"))
        .collect();
    let mut line = format!("prototype (BTF): {ret} {name}({})", proto.join(", "));
    if !at_entry.is_empty() {
        line.push_str(&format!("; at +0x0: {}", at_entry.join(" ")));
    }
    Some(line)
}

fn module_suffix(module: Option<&str>) -> String {
    module.map(|m| format!(" [{m}]")).unwrap_or_default()
}

/// The offsets of `[addr, addr+size)` inside blacklisted ranges; when the
/// blacklist shows zero addresses (read without CAP_SYSLOG), a range whose
/// name is the function's covers all of it.
fn blacklisted(
    list: &[BlacklistEntry],
    name: &str,
    module: Option<&str>,
    addr: u64,
    size: usize,
) -> Vec<(u64, String)> {
    let end = addr.saturating_add(size as u64);
    let mut out = std::collections::BTreeMap::new();
    for e in list {
        let (from, to) = if e.start == 0 && e.end == 0 {
            if e.name != name || e.module.as_deref() != module {
                continue;
            }
            (addr, end)
        } else {
            (e.start.max(addr), e.end.min(end))
        };
        for a in from..to {
            out.entry(a - addr)
                .or_insert_with(|| format!("in the kprobe blacklist ({})", e.name));
        }
    }
    out.into_iter().collect()
}

fn vmlinux_function(
    target: &str,
    path: &Path,
    isa: Option<Isa>,
) -> anyhow::Result<Function<'static>> {
    let image = elf::open(path)?;
    let isa = match isa.or_else(|| elf_isa(&image)) {
        Some(a) => a,
        None => bail!(
            "{}: machine {} is not one ktrace decodes: pass --arch",
            path.display(),
            image.machine
        ),
    };
    let target = image.resolve(target)?;
    let mut f = elf_function(path, image, target, isa)?;
    f.kernel = true;
    f.file_offset = None;
    f.notes
        .push("offline: the kprobe blacklist is the running kernel's, not read".to_string());
    if isa == Isa::Arm64
        && let Some(site) = ktrace_disasm::arm64::ftrace_site(&f.bytes)
    {
        f.extra.push((
            site,
            "the ftrace patch site (no KPROBES_ON_FTRACE on arm64 6.1/6.12)".to_string(),
        ));
    }
    Ok(f)
}

fn user_function(args: &Args, target: &str, isa: Option<Isa>) -> anyhow::Result<Function<'static>> {
    let probe = library::resolve_user_probe(target, args.pid, Path::new(LD_SO_CACHE))?;
    let image = elf::open_with_debug(&probe.path)?;
    let isa = match isa.or_else(|| elf_isa(&image)) {
        Some(a) => a,
        None => bail!(
            "{}: machine {} is not one ktrace decodes: pass --arch",
            probe.path.display(),
            image.machine
        ),
    };
    let mut f = elf_function(&probe.path, image, probe.target, isa)?;
    f.notes.push(
        "uprobes: instruction boundaries only (the kernel's uprobe rules are not checked)"
            .to_string(),
    );
    Ok(f)
}

/// The instruction set of an ELF file's machine (32-bit arm: ARM state).
fn elf_isa(image: &elf::ElfImage) -> Option<Isa> {
    Arch::from_elf_machine(image.machine).and_then(Isa::of)
}

/// The code of an ELF symbol: `st_size` bytes (or up to the next symbol,
/// at most 4 KiB, when the size is 0) through its `PT_LOAD` segment.
fn elf_function(
    path: &Path,
    image: elf::ElfImage,
    target: elf::UprobeTarget,
    isa: Isa,
) -> anyhow::Result<Function<'static>> {
    let sym = &target.symbol;
    let (start, bytes) = ktrace_symbols::code::symbol_bytes(path, &image, sym)?;
    let title = sym.display_name();
    let names = move |addr: u64| {
        image
            .symbolize(addr)
            .map(|(s, off)| format!("{}+{off:#x}", s.name))
    };
    Ok(Function {
        title,
        addr: sym.value,
        bytes,
        isa,
        source: path.display().to_string(),
        offset: (target.offset > 0 || target.vaddr != sym.value).then_some(target.offset),
        file_offset: Some(start),
        kernel: false,
        extra: Vec::new(),
        kernel_says: Vec::new(),
        notes: Vec::new(),
        names: Box::new(names),
    })
}

fn print_offsets(insns: &[Insn], verdicts: &[Option<String>]) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for (i, v) in insns.iter().zip(verdicts) {
        let verdict = match v {
            None => "ok".to_string(),
            Some(why) => format!("refused: {why}"),
        };
        if writeln!(out, "{:#x} {} {verdict}", i.offset, i.len).is_err() {
            return;
        }
    }
}

fn print_listing(f: &Function, insns: &[Insn], verdicts: &[Option<String>]) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let head = format!(
        "{} at {:#x}, {:#x} bytes from {}, {}",
        f.title,
        f.addr,
        f.bytes.len(),
        f.source,
        f.isa
    );
    let what = if f.kernel { "kprobe" } else { "uprobe" };
    let mut lines = vec![head];
    lines.extend(f.notes.iter().map(|n| format!("  {n}")));
    lines.push(format!(
        "* = a {what} can go here, - = refused (why after ;)"
    ));
    if f.kernel && !f.isa.knows_kprobe_rules() {
        lines.push(format!(
            "note: {} kprobe rules are not known here: * only means an instruction boundary",
            f.isa
        ));
    }
    for (i, v) in insns.iter().zip(verdicts) {
        let mark = if v.is_none() { '*' } else { '-' };
        let file = match f.file_offset {
            Some(base) => format!("{:#010x}  ", base + i.offset),
            None => String::new(),
        };
        let target = i
            .target
            .and_then(|t| (f.names)(t))
            .map(|n| format!(" <{n}>"))
            .unwrap_or_default();
        let why = v.as_ref().map(|w| format!("  ; {w}")).unwrap_or_default();
        let here = if f.offset == Some(i.offset) {
            "  <=="
        } else {
            ""
        };
        lines.push(format!(
            "{mark} {:<8} {file}{:<26} {}{target}{why}{here}",
            format!("+{:#x}", i.offset),
            ktrace_disasm::hex_bytes(i.bytes(&f.bytes)),
            i.text
        ));
    }
    for l in lines {
        if writeln!(out, "{}", l.trim_end()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_kernel_targets() {
        assert!(is_user_target("/bin/bash:readline"));
        assert!(is_user_target("./a.out:main+4"));
        assert!(is_user_target("libc:getenv"));
        assert!(is_user_target("libc.so.6:getenv"));
        assert!(!is_user_target("do_sys_openat2"));
        assert!(!is_user_target("dummy:dummy_init+4"));
        assert!(!is_user_target("vfs_read+0x10"));
    }

    #[test]
    fn prototype_from_the_host_btf() {
        // The host kernel (6.18) has BTF; do_sys_openat2 takes
        // (int dfd, const char *filename, struct open_how *how).
        let view = ktrace_symbols::KernelView::running(None);
        let line = btf_prototype("do_sys_openat2", Isa::X86_64, &view).expect("host BTF");
        assert!(line.contains("do_sys_openat2(int dfd, "), "{line}");
        assert!(
            line.ends_with("at +0x0: dfd=%di filename=%si how=%dx"),
            "{line}"
        );
        let arm = btf_prototype("do_sys_openat2", Isa::Arm64, &view).unwrap();
        assert!(arm.ends_with("dfd=%x0 filename=%x1 how=%x2"), "{arm}");
        assert_eq!(
            btf_prototype("no_such_function_xyz", Isa::X86_64, &view),
            None
        );
    }

    #[test]
    fn offsets_split() {
        assert_eq!(split_offset("vfs_read").unwrap(), ("vfs_read", None));
        assert_eq!(
            split_offset("vfs_read+0x1c").unwrap(),
            ("vfs_read", Some(0x1c))
        );
        assert_eq!(split_offset("vfs_read+12").unwrap(), ("vfs_read", Some(12)));
        assert!(split_offset("vfs_read+x").is_err());
    }

    #[test]
    fn blacklist_by_range_and_by_name() {
        let list = vec![
            BlacklistEntry {
                start: 0x1000,
                end: 0x1004,
                name: "a".to_string(),
                module: None,
            },
            BlacklistEntry {
                start: 0,
                end: 0,
                name: "b".to_string(),
                module: None,
            },
        ];
        let hits: Vec<u64> = blacklisted(&list, "a", None, 0x1000, 8)
            .into_iter()
            .map(|(o, _)| o)
            .collect();
        assert_eq!(hits, vec![0, 1, 2, 3]);
        assert_eq!(blacklisted(&list, "b", None, 0x2000, 3).len(), 3);
        assert!(blacklisted(&list, "c", None, 0x3000, 3).is_empty());
    }
}
