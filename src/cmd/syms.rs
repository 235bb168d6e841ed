//! `ktrace syms`: look symbols up the way probes will use them.
//!
//! Kernel symbols come from kallsyms (the running kernel's /proc/kallsyms or
//! `--kallsyms FILE`): names or globs (`vfs_*`, `MOD:glob`) print address,
//! type, size and module; an address (`0xffff...`) prints the kernel's
//! `sym+0xoff/0xsize [mod]`. With `--elf PATH|LIB` the symbols of an ELF file
//! print with their uprobe file offsets, and an exact `SYMBOL[@VER][+OFF]`
//! prints the `PATH:0xOFFSET` a uprobe definition needs. Read-only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ktrace_symbols::elf::{self, ElfSymbol, SymbolKind, SymbolTable};
use ktrace_symbols::{KernelView, glob, library};

/// Arguments of `ktrace syms`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ktrace syms 'vfs_*'                      kernel functions, sizes, modules
  ktrace syms 0xffffffff816d5374            address -> vfs_read+0x4/0x3d0
  ktrace syms vfs_read+4                   address of vfs_read+4, as %pS prints it
  ktrace syms 0x7f3b4c2670b4 --pid 1234    user address -> getenv+0x4 (/usr/lib/.../libc.so.6)
  ktrace syms --btf do_sys_openat2         prototype from BTF
  ktrace syms --btf open_how.mode          member offset for +OFF(%reg) fetchargs
  ktrace syms getenv --elf libc            uprobe location of libc's getenv
  ktrace syms 'read*' --elf /bin/bash      all matching symbols with file offsets
  ktrace syms realpath@GLIBC_2.2.5 --elf libc.so.6")]
pub struct Args {
    /// A name, a glob (`vfs_*`), `MOD:glob`, `[MOD:]SYM+OFF`, a kernel
    /// address (`0x...`), or
    /// with --elf `SYMBOL[@VERSION][+OFFSET]` or a glob.
    pub pattern: String,
    /// Look in this ELF file or library (`libc`, `libc.so.6`) instead of the
    /// kernel.
    #[arg(long, value_name = "PATH|LIB")]
    pub elf: Option<String>,
    /// With --elf LIB: find the library in this process's maps first;
    /// with an address and no --elf: symbolize a user address of it.
    #[arg(long, short = 'p')]
    pub pid: Option<u32>,
    /// Read kernel symbols from this file instead of /proc/kallsyms.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// Look PATTERN up in BTF instead: a function's prototype, a struct's
    /// members with byte offsets, or `STRUCT.member[.member]`'s offset.
    #[arg(long, conflicts_with = "elf")]
    pub btf: bool,
    /// The target architecture for --btf (argument registers); default: this machine's.
    #[arg(long, value_parser = crate::cli::arch())]
    pub arch: Option<String>,
    /// The BTF file for --btf.
    #[arg(long, value_name = "FILE", default_value = ktrace_symbols::kernel::VMLINUX_BTF)]
    pub btf_file: PathBuf,
}

/// Runs `ktrace syms`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.btf {
        return run_btf(&args);
    }
    if let (Some(pid), None) = (args.pid, &args.elf)
        && let Some(addr) = args
            .pattern
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        // A user address of process PID.
        let mut s = ktrace_symbols::usersym::Symbolizer::open(pid)?;
        let u = s
            .symbolize(addr)
            .with_context(|| format!("{addr:#x} is not mapped in process {pid}"))?;
        crate::oline!("{u}");
        return Ok(ExitCode::SUCCESS);
    }
    match &args.elf {
        Some(file) => run_elf(&args, file),
        None => run_kernel(&args),
    }
}

/// `const char *name`, `int x`: C spacing for a declaration.
fn declare(ty: &str, name: &str) -> String {
    if ty.ends_with('*') {
        format!("{ty}{name}")
    } else {
        format!("{ty} {name}")
    }
}

fn run_btf(args: &Args) -> anyhow::Result<ExitCode> {
    use ktrace_symbols::btf::{self, Kind};
    let arch = match &args.arch {
        Some(a) => a.parse::<ktrace_probe::Arch>()?,
        None => {
            ktrace_probe::Arch::native().context("unknown machine architecture: give --arch")?
        }
    };
    if !args.btf_file.exists() {
        anyhow::bail!(
            "no BTF: {} does not exist (a kernel built without CONFIG_DEBUG_INFO_BTF, or give \
             --btf-file with a copy of the target's {}); without BTF write \
             raw fetch arguments (+OFFSET(%REG):TYPE) with offsets from the kernel's headers",
            args.btf_file.display(),
            ktrace_symbols::kernel::VMLINUX_BTF
        );
    }
    let b = btf::open(&args.btf_file)?;
    let name = args
        .pattern
        .trim_start_matches("struct ")
        .trim_start_matches("union ");
    if let Some((agg, path)) = name.split_once('.') {
        let (off, m) = b.member_offset(agg, path).with_context(|| {
            format!(
                "no member {path:?} in struct/union {agg:?} ({})",
                args.btf_file.display()
            )
        })?;
        let bits = if m.bitfield_size > 0 {
            format!(
                " (bitfield: {} bits at bit {})",
                m.bitfield_size, m.bit_offset
            )
        } else {
            String::new()
        };
        crate::oline!(
            "+{off}  {}{bits}",
            declare(&b.type_name(m.type_id), b.name(m.name_off))
        );
        return Ok(ExitCode::SUCCESS);
    }
    let is_type = args.pattern.starts_with("struct ") || args.pattern.starts_with("union ");
    if !is_type && let Some((ret, params)) = b.func_params(name) {
        let regs = arch.arg_registers();
        let list: Vec<String> = params.iter().map(|(n, t)| declare(t, n)).collect();
        crate::oline!("{ret} {name}({});", list.join(", "));
        for (i, (n, t)) in params.iter().enumerate() {
            let at = match regs.get(i) {
                Some(r) => format!("%{r}"),
                None if matches!(arch, ktrace_probe::Arch::X86_64 | ktrace_probe::Arch::I386) => {
                    format!("$stack{}", i - regs.len() + 1)
                }
                None => "(stack: no register)".to_string(),
            };
            crate::oline!("  $arg{:<2} {:<8} {}", i + 1, at, declare(t, n));
        }
        crate::oline!("  return   %{:<7} {ret}", arch.retval_register());
        return Ok(ExitCode::SUCCESS);
    }
    let (_, t) = b
        .find(Kind::Struct, name)
        .or_else(|| b.find(Kind::Union, name))
        .with_context(|| {
            format!(
                "no function, struct or union {name:?} in {} (static and inlined functions \
                 often have no BTF entry: probe them with raw fetch arguments)",
                args.btf_file.display()
            )
        })?;
    crate::oline!(
        "{} {} {{",
        if t.kind == Kind::Union {
            "union"
        } else {
            "struct"
        },
        b.name(t.name_off),
    );
    for m in b.members(t) {
        let ty = b.type_name(m.type_id);
        let size = type_size(&b, m.type_id, arch.bits() / 8);
        let decl = if b.name(m.name_off).is_empty() {
            format!("{} {{ /* anonymous */ }}", ty.trim_end())
        } else {
            declare(&ty, b.name(m.name_off))
        };
        if m.bitfield_size > 0 {
            crate::oline!(
                "    {:<40} /* {:>5}:{:<2} {:>4} */",
                format!("{decl}:{};", m.bitfield_size),
                m.bit_offset / 8,
                m.bit_offset % 8,
                size
            );
        } else {
            crate::oline!(
                "    {:<40} /* {:>5}    {:>4} */",
                format!("{decl};"),
                m.bit_offset / 8,
                size
            );
        }
    }
    crate::oline!("}};  /* size: {} */", t.size);
    Ok(ExitCode::SUCCESS)
}

/// The size in bytes of BTF type `id` (pointers are `ptr` bytes).
fn type_size(b: &ktrace_symbols::btf::Btf, id: u32, ptr: u32) -> u32 {
    use ktrace_symbols::btf::Kind;
    match b.resolve(id) {
        Some((_, t)) => match t.kind {
            Kind::Ptr => ptr,
            Kind::Array => t.nelems.saturating_mul(type_size(b, t.ref_id, ptr)),
            _ => t.size,
        },
        None => 0,
    }
}

fn kind_name(s: &ElfSymbol) -> &'static str {
    match s.kind {
        SymbolKind::Func => "FUNC",
        SymbolKind::Ifunc => "IFUNC",
        SymbolKind::Object => "OBJECT",
        SymbolKind::NoType => "NOTYPE",
    }
}

fn run_elf(args: &Args, file: &str) -> anyhow::Result<ExitCode> {
    let path = library::find(file, args.pid, Path::new("/etc/ld.so.cache"))?;
    let img = elf::open_with_debug(&path)?;
    let (base, _) = args.pattern.split_once('@').unwrap_or((&args.pattern, ""));
    if !glob::is_glob(base) {
        let t = img.resolve(&args.pattern)?;
        crate::oline!(
            "{}  vaddr {:#x}  size {:#x}  {}{}",
            t.symbol.display_name(),
            t.vaddr,
            t.symbol.size,
            kind_name(&t.symbol),
            if t.symbol.local { " LOCAL" } else { "" }
        );
        if t.symbol.kind == SymbolKind::Ifunc {
            crate::eline!(
                "ktrace: note: {} is an IFUNC: this is its resolver, which runs once at load time, not the implementation it picks",
                t.symbol.name
            );
        }
        crate::oline!("{}:{:#x}", path.display(), t.file_offset);
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows: Vec<&ElfSymbol> = img
        .symbols
        .iter()
        .filter(|s| glob::glob_match(base, &s.name))
        .collect();
    rows.sort_by_key(|s| (s.value, s.name.clone(), s.table));
    rows.dedup_by(|a, b| a.value == b.value && a.name == b.name && a.version == b.version);
    if rows.is_empty() {
        anyhow::bail!(
            "{}: no symbol matches {:?}{}",
            path.display(),
            args.pattern,
            if img.has_symtab {
                ""
            } else {
                " (no .symtab: stripped, only dynamic symbols searched)"
            }
        );
    }
    crate::oline!(
        "{:>18} {:>18} {:>8} {:<6} {:<6} NAME",
        "FILE_OFFSET",
        "VADDR",
        "SIZE",
        "TYPE",
        "TABLE"
    );
    for s in rows {
        let off = img
            .vaddr_to_file_offset(s.value)
            .map_or_else(|| "-".to_string(), |o| format!("{o:#x}"));
        crate::oline!(
            "{off:>18} {:>18} {:>8} {:<6} {:<6} {}{}",
            format!("{:#x}", s.value),
            s.size,
            kind_name(s),
            match s.table {
                SymbolTable::Symtab => "symtab",
                SymbolTable::Dynsym => "dynsym",
            },
            s.display_name(),
            if s.local { " (local)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_kernel(args: &Args) -> anyhow::Result<ExitCode> {
    let mut view = KernelView::running(None);
    if let Some(k) = &args.kallsyms {
        view = view.with_kallsyms_file(k);
    }
    let path = view.kallsyms_path().to_path_buf();
    let ks = view
        .kallsyms()
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("kernel symbols (use --kallsyms FILE or --elf PATH)")?;
    if ks.addresses_hidden() {
        crate::eline!(
            "ktrace: warning: {} shows only zero addresses (kptr_restrict); run as root",
            path.display()
        );
    }
    if let Some(addr) = args
        .pattern
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        let l = ks
            .lookup(addr)
            .with_context(|| format!("no kernel symbol contains {addr:#x}"))?;
        crate::oline!("{}", l.to_kernel_string());
        return Ok(ExitCode::SUCCESS);
    }
    let (module, pat) = ktrace_symbols::probeable::split_module(&args.pattern);
    if let Some((name, off)) = pat.rsplit_once('+') {
        // SYM+OFF: the address and how the kernel prints it.
        let off =
            elf::parse_number(off).with_context(|| format!("bad offset in {:?}", args.pattern))?;
        let found = ks.by_name(name, module);
        let sym = match found.as_slice() {
            [] => anyhow::bail!("no kernel symbol {name:?} in {}", path.display()),
            [one] => *one,
            many => anyhow::bail!(
                "{name:?} names {} symbols ({}); give MOD:{name} or an address",
                many.len(),
                many.iter()
                    .map(|s| format!(
                        "{:#x}{}",
                        s.addr,
                        s.module
                            .as_ref()
                            .map(|m| format!(" [{m}]"))
                            .unwrap_or_default()
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let addr = sym.addr.checked_add(off).context("address overflows")?;
        let l = ks
            .lookup(addr)
            .with_context(|| format!("no kernel symbol contains {addr:#x}"))?;
        crate::oline!("{addr:#x} {}", l.to_kernel_string());
        return Ok(ExitCode::SUCCESS);
    }
    let mut n = 0;
    for s in ks.symbols() {
        if module.is_some() && s.module.as_deref() != module {
            continue;
        }
        if !glob::glob_match(pat, &s.name) {
            continue;
        }
        if n == 0 {
            crate::oline!("{:>18} T {:>8} NAME", "ADDRESS", "SIZE");
        }
        n += 1;
        let size = ks
            .extent(s)
            .map_or_else(|| "?".to_string(), |z| format!("{z:#x}"));
        let same = ks.count_same(&s.name, None);
        crate::oline!(
            "{:>18} {} {size:>8} {}{}{}",
            format!("{:#x}", s.addr),
            s.kind,
            s.name,
            s.module
                .as_ref()
                .map(|m| format!(" [{m}]"))
                .unwrap_or_default(),
            if same > 1 {
                format!("  ({same} symbols share this name)")
            } else {
                String::new()
            }
        );
    }
    if n == 0 {
        anyhow::bail!(
            "no kernel symbol matches {:?} in {}",
            args.pattern,
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
