//! The running kernel as ktrace-probe's check environment, and the check
//! target: which kernel a definition is checked against.
//!
//! [`LiveEnv`] answers the checker's questions from the kernel view
//! (kallsyms counts), the file system (uprobe files) and tracefs (existing
//! events and their fields, read through ktrace-tracefs). [`live_target`]
//! takes the language features from what the kernel says, its tracefs
//! README, and only the rest from its version; offline (`ktrace check
//! --kernel`) everything comes from the version. It writes nothing.

use std::path::Path;

use ktrace_probe::btfarg::{BtfFunc, BtfTypes};
use ktrace_probe::env::{AddressFate, Refusal};
use ktrace_probe::{Arch, Environment, FileKind, KernelVersion, Target};
use ktrace_symbols::KernelView;
use ktrace_symbols::btf_types::KernelBtf;
use ktrace_symbols::kallsyms::SymbolCounts;

/// `ktrace_probe::Environment` over the running kernel.
pub struct LiveEnv<'a> {
    /// Kernel symbol counts, when read (kprobe checks are skipped otherwise).
    pub symbols: Option<&'a SymbolCounts>,
    /// The tracefs mount.
    pub tracefs: &'a Path,
    /// The kernel's BTF (/sys/kernel/btf), for the names a kernel that reads
    /// BTF arguments resolves itself.
    pub btf: Option<&'a KernelBtf>,
    /// The kernel's tables (kallsyms, blacklist, ftrace locations), for what
    /// the counts above do not hold and for registration checks.
    pub view: Option<&'a KernelView>,
    /// The dynamic events and event directories as they were when the
    /// checks were set up, answered instead of the kernel's current ones.
    pub frozen: Option<&'a Frozen>,
    /// Leave the ftrace locations unread (`KernelView::rules_without_ftrace`):
    /// the definitions are about to be written, and the kernel refuses a
    /// notrace function (or an ftrace call site) itself;
    /// [`kernel_refusal_reason`] says why after it did. `ktrace check`
    /// predicts the kernel's verdict and reads them.
    pub kernel_decides_ftrace: bool,
    /// Leave "did you mean" suggestions out (`ktrace conform`, which
    /// compares verdicts, messages and carets: on the host a fifth of its
    /// checking went into edit distances over kallsyms).
    pub no_suggestions: bool,
}

/// The kernel's events as one moment saw them: `ktrace conform` checks its
/// definitions while another thread writes each into the kernel (and
/// removes what it made), so every check must see the kernel as it was,
/// not an event another definition has for the moment (x86_64 6.1, seed 1:
/// `-:kprobes/` was taken as removing such an event).
#[derive(Debug, Clone, Default)]
pub struct Frozen {
    listing: Vec<String>,
    events: std::collections::HashSet<(String, String)>,
}

impl Frozen {
    /// `dynamic_events` and the `events/SYSTEM/EVENT` directories of the
    /// tracefs at `root` now.
    pub fn capture(root: &Path) -> Frozen {
        let listing = ktrace_tracefs::DynEvents::new(root)
            .listing()
            .unwrap_or_default();
        let mut events = std::collections::HashSet::new();
        for system in std::fs::read_dir(root.join("events")).into_iter().flatten() {
            let Ok(system) = system else { continue };
            let group = system.file_name().to_string_lossy().into_owned();
            for event in std::fs::read_dir(system.path()).into_iter().flatten() {
                let Ok(event) = event else { continue };
                if event.path().is_dir() {
                    events.insert((
                        group.clone(),
                        event.file_name().to_string_lossy().into_owned(),
                    ));
                }
            }
        }
        Frozen { listing, events }
    }
}

impl LiveEnv<'_> {
    /// The probe-ability rules this check uses (see `kernel_decides_ftrace`).
    fn rules<'v>(&self, view: &'v KernelView) -> ktrace_symbols::probeable::Rules<'v> {
        if self.kernel_decides_ftrace {
            view.rules_without_ftrace()
        } else {
            view.rules()
        }
    }

    /// `is_ksym_addr()` with CONFIG_KALLSYMS_ALL: within the core kernel
    /// (`_stext` to `_end`), or within a module's symbols.
    fn in_kernel(&self, table: &ktrace_symbols::kallsyms::Kallsyms, addr: u64) -> bool {
        // __module_address(): kallsyms bounds no module's last symbol, so
        // an address far past every module is told by where modules' memory
        // may lie (`ModuleSpans`; a running kernel only)
        let in_module = || {
            if self
                .module_spans()
                .is_some_and(|spans| !spans.may_hold(addr))
                || self.in_text_gap(addr)
            {
                return false;
            }
            self.module_holds(addr)
                || table
                    .lookup(addr)
                    .is_some_and(|l| l.symbol.module.is_some())
        };
        // is_ksym_addr(): without CONFIG_KALLSYMS_ALL only kernel text and
        // init text are placed (32-bit arm and arm64 5.10: `SYM+1MiB` past
        // the text, or a `D` section marker, is -ENOENT, "Invalid probed
        // address or symbol"; arm 6.12 seed 1); without bounds, placed
        match table.core_image_holds(addr) {
            Some(false) => in_module(),
            _ => true,
        }
    }

    /// Whether `addr` is past a module's text region, before its next
    /// allocation, in no module's memory although kallsyms places it in a
    /// function ([`ktrace_symbols::code::in_text_gap`]; a running kernel
    /// only).
    fn in_text_gap(&self, addr: u64) -> bool {
        self.view.is_some_and(|v| {
            v.is_running()
                && ktrace_symbols::code::in_text_gap(v, Path::new(ktrace_disasm::kcore::PATH), addr)
        })
    }

    /// Whether `addr` is known to lie in a module's memory although kallsyms
    /// may show no symbol after it: in a module that is one allocation
    /// (`ModuleSpans::holding`, before 6.4). kallsyms then places it after
    /// the module's last symbol below it.
    fn module_holds(&self, addr: u64) -> bool {
        self.module_spans()
            .is_some_and(|s| s.holding(addr).is_some())
    }

    /// Where the running kernel's modules may lie (`None`: not the running
    /// kernel, or not readable).
    fn module_spans(&self) -> Option<&'static ktrace_symbols::modules::ModuleSpans> {
        self.view
            .is_some_and(|v| v.is_running())
            .then(ktrace_symbols::modules::ModuleSpans::running)
            .flatten()
    }

    /// The whole kallsyms table, when a count or a check needs more than the
    /// names counted up front.
    fn table(&self) -> Option<&ktrace_symbols::kallsyms::Kallsyms> {
        self.view?.kallsyms().ok()
    }
}

/// within_notrace_func() where ftrace locations are known only by name
/// (available_filter_functions, before 6.5): a name several static functions
/// share is listed when any of them is traced, so the name cannot say
/// whether the one the address falls in has an ftrace location. On x86_64
/// its code can: a traced function starts (after an endbr, or the nop a
/// sealed one becomes) with the 5-byte nop ftrace patched over its `call
/// __fentry__`, or that call itself while it is traced. Anything else there is a function built
/// without -pg, which the kernel refuses (x86_64 6.1, conform seed
/// 20261128: `set_security_override_from_ctx+0x100000` lands in one of six
/// `t_next`, kernel/trace's, notrace: "Failed to register probe event").
fn notrace_by_code(
    rules: &ktrace_symbols::probeable::Rules<'_>,
    table: &ktrace_symbols::kallsyms::Kallsyms,
    symbol: &str,
    offset: u64,
) -> Option<String> {
    if Arch::native() != Some(Arch::X86_64) || table.addresses_hidden() {
        return None;
    }
    if !rules.notrace_refused
        || !matches!(
            rules.ftrace,
            Some(ktrace_symbols::probeable::FtraceLocations::Names(_))
        )
    {
        return None;
    }
    let sym = core_symbol(table, symbol)?;
    let at = table.lookup(sym.addr.checked_add(offset)?)?;
    let func = at.symbol;
    let namesakes = table
        .by_name(&func.name, None)
        .into_iter()
        .filter(|s| s.module.is_none() && s.is_text())
        .count();
    // (a suffixed copy, `.isra.0`, is judged by its base function's name)
    if func.module.is_some() || func.name.contains('.') || namesakes < 2 {
        return None;
    }
    let code =
        ktrace_disasm::kcore::read(Path::new(ktrace_disasm::kcore::PATH), func.addr, 9).ok()?;
    let body = ktrace_symbols::code::after_endbr(&code);
    // ftrace's patched site is the kernel's atomic 5-byte nop: P6's
    // `0f 1f 44 00 00`, or K8's `66 66 66 66 90` where 5.10's ideal_nops
    // chose it (x86_64 5.10 under QEMU TCG, seed 20261130: namesake
    // `init_once` was taken as notrace, `r __x64_sys_syncfs+0x100000`
    // refused); a `call __fentry__` before boot patching.
    const NOP5: [[u8; 5]; 2] = [
        [0x0f, 0x1f, 0x44, 0x00, 0x00],
        [0x66, 0x66, 0x66, 0x66, 0x90],
    ];
    let fentry = NOP5.iter().any(|n| body.starts_with(n)) || body.first() == Some(&0xe8);
    (!fentry).then(|| {
        format!(
            "{} at {:#x} (one of {namesakes} functions of that name) does not start with an \
             ftrace call site: a notrace function, which the kernel refuses kprobe events on",
            func.name, func.addr
        )
    })
}

/// The first core (not module) symbol named `symbol`: modules sit below the
/// image on arm64 and 32-bit arm, so only core symbols place an offset.
fn core_symbol<'t>(
    table: &'t ktrace_symbols::kallsyms::Kallsyms,
    symbol: &str,
) -> Option<&'t ktrace_symbols::kallsyms::KernelSymbol> {
    table
        .by_name(symbol, None)
        .into_iter()
        .find(|s| s.module.is_none())
}

/// check_kprobe_address_safe(): an address in a site the kernel patches
/// itself (a jump label) is refused like a blacklisted one. On arm64 and
/// riscv64 a site is one 4-byte word, so this needs no decoding and comes
/// before the alignment rules (riscv64 6.12, CI seed 127735542:
/// `detach_if_pending+33`, inside the site at +0x20, is "Failed to register
/// probe event", not "not an instruction boundary"); x86's 2- or 5-byte
/// sites are left to the code check, which decodes them.
fn patched_site(
    view: &KernelView,
    table: &ktrace_symbols::kallsyms::Kallsyms,
    symbol: &str,
    offset: u64,
) -> Option<String> {
    let arch = Arch::native().filter(|a| matches!(a, Arch::Arm64 | Arch::Riscv64))?;
    if table.addresses_hidden() {
        return None;
    }
    let sym = table
        .by_name(symbol, None)
        .into_iter()
        .find(|s| s.module.is_none() && s.is_text())?;
    let addr = sym.addr.checked_add(offset)?;
    let sites =
        ktrace_symbols::reserved::Sites::running(view, Path::new(ktrace_disasm::kcore::PATH), arch);
    let site = sites.at(addr, arch, |_| None)?;
    let at = table
        .lookup(addr)
        .map_or(format!("{symbol}+{offset:#x}"), |l| {
            format!("{}+{:#x}", l.symbol.name, l.offset)
        });
    Some(format!(
        "{at} is in {}: kprobes refuse it (ktrace disasm marks it)",
        site.describe()
    ))
}

/// [`Environment::symbol_at_zero`] from a kallsyms table: its first symbol
/// of that name is at 0, and the table shows addresses.
fn first_at_zero(table: &ktrace_symbols::kallsyms::Kallsyms, name: &str) -> Option<bool> {
    let first = table.by_name(name, None).first().map(|s| s.addr)?;
    // hidden addresses (kptr_restrict) are all 0: nothing to tell
    Some(first == 0 && !table.addresses_hidden())
}

impl Environment for LiveEnv<'_> {
    fn symbol_at_zero(&self, name: &str) -> Option<bool> {
        first_at_zero(self.table()?, name)
    }

    fn similar_symbols(&self, name: &str) -> Vec<String> {
        if self.no_suggestions {
            return Vec::new();
        }
        let Some(t) = self.table() else {
            return Vec::new();
        };
        ktrace_probe::similar::similar(
            name,
            t.shaped_like(name)
                .filter(|s| s.is_text() && s.module.is_none())
                .map(|s| s.name.as_str()),
        )
    }

    fn symbol_count(&self, name: &str) -> Option<usize> {
        self.symbols
            .and_then(|s| s.count(name))
            .or_else(|| Some(self.table()?.count_same(name, None)))
    }

    fn module_symbol_count(&self, module: &str, name: &str) -> Option<Option<usize>> {
        self.symbols
            .and_then(|s| s.module_symbol_count(module, name))
            .or_else(|| {
                let t = self.table()?;
                Some(
                    t.lists_module(module)
                        .then(|| t.count_same(name, Some(module))),
                )
            })
    }

    fn kprobe_address(&self, addr: u64, is_return: bool) -> Option<AddressFate> {
        let view = self.view?;
        let table = view.kallsyms().ok()?;
        if table.addresses_hidden() {
            return None;
        }
        // kallsyms_lookup_size_offset(): an address in no symbol of the
        // kernel (or of a module) is -ENOENT, which registration takes as a
        // module yet to come.
        if !self.in_kernel(table, addr) {
            return Some(AddressFate::Deferred);
        }
        let Some(at) = table.lookup(addr) else {
            return Some(AddressFate::Deferred);
        };
        let name = at.symbol.name.clone();
        // the same rules as `SYM+OFF` (an address on an ftrace call site of
        // an architecture without kprobes on ftrace included: riscv64 6.12
        // refused `p 0xADDR` at function entries, 10 of seed 1's 12
        // disagreements there)
        let refusal = ktrace_symbols::probeable::kprobe_refusal_at(
            table,
            &self.rules(view),
            addr,
            no_kprobes_on_ftrace(),
        )?;
        if let Err(why) = refusal {
            return Some(AddressFate::Refused(Refusal::Notrace(why)));
        }
        if is_return {
            // register_kretprobe(): kprobe_on_func_entry()
            let entry = at.offset == 0
                || (at.offset == 4
                    && matches!(Arch::native(), Some(Arch::X86_64 | Arch::I386))
                    && ktrace_symbols::code::starts_with_endbr(view, &name) == Some(true));
            if !entry {
                return Some(AddressFate::Refused(Refusal::Address(format!(
                    "{name}+{:#x} is not the entry of {name}: return probes go on a function's entry",
                    at.offset
                ))));
            }
        }
        if let Ok(Some(why)) = refusal {
            return Some(AddressFate::Refused(Refusal::Address(why)));
        }
        // arch_prepare_kprobe(): arm64 instructions are 4 bytes, aligned, as
        // are 32-bit arm's in ARM state (Debian's armmp; `SYM+OFF` is held
        // to the same in the parser): -EINVAL, "Failed to register probe
        // event" (arm64 5.10, 6.1 and 6.12, conform seed 20261202 #2492:
        // `p 0xffffd00fec5fd61a`)
        if matches!(Arch::native(), Some(Arch::Arm64 | Arch::Arm)) && !addr.is_multiple_of(4) {
            return Some(AddressFate::Refused(Refusal::Address(format!(
                "{addr:#x} ({name}+{:#x}) is not 4-byte aligned, as every instruction \
                 of this kernel is",
                at.offset
            ))));
        }
        Some(AddressFate::Registered)
    }

    fn ftrace_matches(&self, pattern: &str) -> Option<bool> {
        let names = self.view?.ftrace_names()?;
        // register_fprobe() hands the name to ftrace, which takes it as a
        // glob when it holds `*?[\` (filter_parse_regex()): arm64 7.2 takes
        // `f target\_store`.
        if ktrace_symbols::glob::is_glob(pattern) {
            return Some(
                names
                    .iter()
                    .any(|n| ktrace_symbols::glob::glob_match(pattern, n)),
            );
        }
        Some(names.binary_search_by(|n| n.as_str().cmp(pattern)).is_ok())
    }

    fn ftrace_alias(&self, name: &str) -> Option<bool> {
        let view = self.view?;
        let names = view.ftrace_names()?;
        let table = view.kallsyms().ok()?;
        if table.addresses_hidden() {
            return None;
        }
        Some(table.by_name(name, None).iter().any(|sym| {
            table.aliases(sym).iter().any(|a| {
                a.name != name && names.binary_search_by(|n| n.as_str().cmp(&a.name)).is_ok()
            })
        }))
    }

    fn kprobe_entry(&self, symbol: &str, offset: u64) -> Option<Option<bool>> {
        let view = self.view?;
        let table = view.kallsyms().ok()?;
        if table.addresses_hidden() {
            return None;
        }
        let (module, name) = match symbol.split_once(':') {
            Some((m, n)) => (Some(m), n),
            None => (None, symbol),
        };
        let sym = *table.by_name(name, module).first()?;
        let addr = sym.addr.checked_add(offset)?;
        let x86 = matches!(Arch::native(), Some(Arch::X86_64 | Arch::I386));
        let entry = |func: &str, offset: u64| {
            offset == 0
                || (x86
                    && offset == 4
                    && ktrace_symbols::code::starts_with_endbr(view, func) == Some(true))
        };
        // in a module's last function, to the end of the page its code
        // surely reaches, which kallsyms does not bound (x86_64 7.2: `r
        // exit_autofs_fs+1` and `+0x400` are not at an entry, `r
        // exit_romfs_fs+4` after its endbr64 is)
        if let Some(m) = sym.module.as_deref()
            && table.lookup(addr).is_none()
            && ktrace_symbols::code::last_function_span(
                view,
                Path::new(ktrace_disasm::kcore::PATH),
                sym,
            )
            .is_some_and(|span| offset < span)
        {
            return Some(Some(entry(&format!("{m}:{}", sym.name), offset)));
        }
        if !self.in_kernel(table, addr) {
            return Some(None);
        }
        let Some(at) = table.lookup(addr) else {
            // past a module's last symbol, in its memory: kallsyms places it
            // after that symbol, so it is no entry (x86_64 6.1: `r
            // romfs:romfs_fill_super+0x4000`, in romfs's data)
            if self.module_holds(addr) {
                return Some(Some(false));
            }
            return Some(None);
        };
        let func = at.symbol.name.to_string();
        let func = match &at.symbol.module {
            Some(m) => format!("{m}:{func}"),
            None => func,
        };
        Some(Some(entry(&func, at.offset)))
    }

    fn tracepoint_stub_registered(&self, name: &str) -> Option<bool> {
        ktrace_symbols::tracepoint::stub_registered(
            self.view?,
            Path::new(ktrace_disasm::kcore::PATH),
            name,
        )
    }

    fn dynamic_events(&self) -> Option<Vec<String>> {
        if let Some(f) = self.frozen {
            return Some(f.listing.clone());
        }
        ktrace_tracefs::DynEvents::new(self.tracefs).listing().ok()
    }

    fn kprobe_refusal(&self, symbol: &str, offset: u64) -> Option<Option<Refusal>> {
        let view = self.view?;
        let table = view.kallsyms().ok()?;
        // (modules sit below the image on arm64 and 32-bit arm: only core
        // symbols count)
        let core = (!table.addresses_hidden())
            .then(|| core_symbol(table, symbol))
            .flatten();
        if let Some(sym) = core
            && let Some(start) = table
                .by_name("_text", None)
                .first()
                .or(table.by_name("_stext", None).first())
            && sym.addr.saturating_add(offset) < start.addr
        {
            if sym.addr == 0 {
                return Some(Some(Refusal::NotFound(format!(
                    "{symbol} is at address 0 in kallsyms (a per-cpu variable): the kernel's \
                     lookup of the name finds nothing; kprobes go on kernel text"
                ))));
            }
            return Some(Some(Refusal::Unresolved(format!(
                "{symbol} ({:#x}) lies below the kernel image (a per-cpu variable?): \
                 kprobes go on kernel text",
                sym.addr
            ))));
        }
        // _kprobe_addr(): an address kallsyms cannot place is -ENOENT,
        // which a probe on a core symbol reports as a bad address.
        if let Some(sym) = core
            && let Some(addr) = sym.addr.checked_add(offset)
            && !self.in_kernel(table, addr)
        {
            return Some(Some(Refusal::Unresolved(format!(
                "{symbol}+{offset:#x} ({addr:#x}) is outside the kernel's text, where kallsyms \
                 places no function: kprobes go on kernel text"
            ))));
        }
        let module_sym = match symbol.split_once(':') {
            Some((m, name)) => table.by_name(name, Some(m)).first().copied(),
            None => table.by_name(symbol, None).first().copied(),
        }
        .filter(|s| s.module.is_some());
        // past a module's text region, before its next allocation: in no
        // module, -ENOENT, where kallsyms places a (notrace) function
        // (x86_64 6.12: `exit_romfs_fs+0x100`)
        if core.is_none()
            && !table.addresses_hidden()
            && let Some(sym) = module_sym
            && let Some(addr) = sym.addr.checked_add(offset)
            && self.in_text_gap(addr)
        {
            return Some(Some(Refusal::Unresolved(format!(
                "{symbol}+{offset:#x} ({addr:#x}) is past the end of module {}'s text, before \
                 its next allocation (/sys/module/*/sections): in no module's memory",
                sym.module.as_deref().unwrap_or_default()
            ))));
        }
        if let Some(why) = notrace_by_code(&self.rules(view), table, symbol, offset) {
            return Some(Some(Refusal::Notrace(why)));
        }
        // a module's function with an offset past every module's memory:
        // -ENOENT, as for a core symbol (seed 20261202 with romfs and
        // autofs4 loaded, on every architecture: `+0x100000`, `+39896`)
        if core.is_none()
            && !table.addresses_hidden()
            && let Some(sym) = module_sym
            && let Some(addr) = sym.addr.checked_add(offset)
            && self
                .module_spans()
                .is_some_and(|spans| !spans.may_hold(addr))
            && !self.in_kernel(table, addr)
        {
            return Some(Some(Refusal::Unresolved(format!(
                "{symbol}+{offset:#x} ({addr:#x}) is past the memory of every loaded module \
                 (/proc/modules, /sys/module/*/sections): kallsyms places no function there"
            ))));
        }
        // in a module's data, its own or another's (/proc/modules and the
        // sections say so): no text (-EINVAL, x86_64 6.1:
        // `romfs:romfs_fill_super+0x4000` in romfs's data,
        // `exit_romfs_fs+0x10000` in autofs4's)
        if let Some(sym) = module_sym.filter(|s| s.is_text())
            && let Some(addr) = sym.addr.checked_add(offset)
            && let Some((owner, false)) = self.module_spans().and_then(|s| s.holding(addr))
        {
            return Some(Some(Refusal::Address(format!(
                "{symbol}+{offset:#x} ({addr:#x}) is in the data of module {owner}: kprobes go \
                 on text"
            ))));
        }
        // past a module's text, where nothing tells what is there: the
        // kernel refuses, but how differs (arm64 7.2: "Invalid probed
        // address or symbol", x86_64 6.1: "Failed to register probe
        // event"): left to it, as the code check says
        if view.is_running()
            && let Some(sym) = module_sym.filter(|s| s.is_text())
            && let Some(m) = sym.module.as_deref()
            && let Some(end) = ktrace_symbols::modules::module_text_end(m, sym.addr)
            && sym.addr.saturating_add(offset) >= end
        {
            return None;
        }
        // past a module's last symbol, beyond the page its code surely
        // reaches: in the function up to its text's end, which nothing
        // shows, and in no module or another past it (x86_64 7.2: romfs's
        // text ends in `exit_romfs_fs`, autofs4's text follows)
        if let Some(sym) = module_sym
            && let Some(addr) = sym.addr.checked_add(offset)
            && table.lookup(addr).is_none()
            && ktrace_symbols::code::last_function_span(
                view,
                Path::new(ktrace_disasm::kcore::PATH),
                sym,
            )
            .is_none_or(|span| offset >= span)
        {
            return None;
        }
        match ktrace_symbols::probeable::kprobe_refusal_on(
            table,
            &self.rules(view),
            symbol,
            offset,
            no_kprobes_on_ftrace(),
        )? {
            Err(why) => Some(Some(Refusal::Notrace(why))),
            Ok(Some(why)) => Some(Some(Refusal::Address(why))),
            Ok(None) => Some(patched_site(view, table, symbol, offset).map(Refusal::Address)),
        }
    }

    fn file_kind(&self, path: &str) -> Option<FileKind> {
        use rustix::io::Errno;
        // kern_path() fails on these as the lookup here does, and the
        // kernel logs each as "Failed to find the given file" (arm64 6.1,
        // conform seed 20261222, index 44342: `r: /bin/true/:0x2b16c`,
        // ENOTDIR); a permission error may be this user's alone
        let missing =
            [Errno::NOENT, Errno::NOTDIR, Errno::LOOP, Errno::NAMETOOLONG].map(Errno::raw_os_error);
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Some(FileKind::Regular),
            Ok(_) => Some(FileKind::Other),
            Err(e) if e.raw_os_error().is_some_and(|n| missing.contains(&n)) => {
                Some(FileKind::Missing)
            }
            Err(_) => None,
        }
    }

    fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
        if let Some(f) = self.frozen {
            return Some(f.events.contains(&(group.to_string(), event.to_string())));
        }
        ktrace_tracefs::tables::event_exists(self.tracefs, group, event)
    }

    fn event_fields(&self, system: &str, event: &str) -> Option<Option<Vec<String>>> {
        match ktrace_tracefs::tables::read_event_format(self.tracefs, system, event) {
            Ok(Some(text)) => Some(Some(format_fields(&text))),
            Ok(None) => Some(None),
            Err(_) => None,
        }
    }

    fn event_field_decls(
        &self,
        system: &str,
        event: &str,
    ) -> Option<Vec<ktrace_probe::filter::FieldDecl>> {
        match ktrace_tracefs::tables::read_event_format(self.tracefs, system, event) {
            Ok(Some(text)) => Some(ktrace_probe::filter::parse_format(&text)),
            _ => None,
        }
    }

    fn btf_function(&self, name: &str) -> Option<Option<(&dyn BtfTypes, BtfFunc)>> {
        self.btf?.function(name)
    }
    fn btf_struct(&self, name: &str) -> Option<bool> {
        btf_struct(self.btf?, name)
    }

    fn btf_vmlinux(&self) -> Option<&dyn BtfTypes> {
        Some(self.btf?.vmlinux()?)
    }
}

/// Why the running kernel refused `kind` at registration, by the rules a
/// definition about to be written skips ([`LiveEnv::kernel_decides_ftrace`]):
/// a notrace function, an ftrace call site. `None` when they find nothing
/// (the kernel's own message is then all there is).
pub fn kernel_refusal_reason(view: &KernelView, kind: &ktrace_probe::ProbeKind) -> Option<String> {
    let ktrace_probe::ProbeKind::Kprobe { place, .. } = kind else {
        return None;
    };
    let table = view.kallsyms().ok()?;
    let rules = view.rules();
    match place {
        ktrace_probe::ast::KprobePlace::Symbol { symbol, offset } => {
            ktrace_symbols::probeable::kprobe_refusal_on(
                table,
                &rules,
                symbol,
                *offset,
                no_kprobes_on_ftrace(),
            )
            .and_then(|r| r.unwrap_or_else(Some))
            .or_else(|| notrace_by_code(&rules, table, symbol, *offset))
        }
        ktrace_probe::ast::KprobePlace::Address(addr) => {
            ktrace_symbols::probeable::kprobe_refusal_at(
                table,
                &rules,
                *addr,
                no_kprobes_on_ftrace(),
            )
            .and_then(|r| r.unwrap_or_else(Some))
        }
    }
}

/// The architectures without `HAVE_KPROBES_ON_FTRACE` (a kprobe exactly on
/// an ftrace call site is refused), with the site's offset in a traceable
/// function where only the ftrace names are known: arm64's is +4 (after the
/// first patchable nop; arm64 6.1 refuses `p FUNC+4`).
fn no_kprobes_on_ftrace() -> Option<Option<u64>> {
    match Arch::native()? {
        Arch::Arm64 => Some(Some(4)),
        Arch::Riscv64 | Arch::Arm => Some(None),
        _ => None,
    }
}

/// Another kernel's copies (`ktrace check --kallsyms FILE`, `--btf FILE`):
/// symbol counts and BTF where given; every other question is left
/// unchecked.
pub struct SymbolsEnv<'a> {
    /// Counts from the kallsyms copy.
    pub symbols: Option<&'a SymbolCounts>,
    /// The BTF copy.
    pub btf: Option<&'a KernelBtf>,
    /// The kallsyms copy's table (addresses), read when a check needs it.
    pub table: Option<&'a KernelView>,
    /// The target's architecture.
    pub arch: Arch,
}

impl Environment for SymbolsEnv<'_> {
    fn symbol_at_zero(&self, name: &str) -> Option<bool> {
        first_at_zero(self.table?.kallsyms().ok()?, name)
    }

    /// From the copy's addresses, for a core kernel symbol whose offset
    /// lands in a core kernel function: at its entry or not
    /// (kprobe_on_func_entry() looks the address up, so an offset past the
    /// function is judged by the function it reaches: x86_64 6.1, offline
    /// `--kallsyms`, conform seed 1201: `r percpu_enable_async+0x100000`
    /// was refused as no entry, where the kernel took the address and went
    /// on to the arguments). A name or module the copy lacks, and an
    /// address kallsyms places in no symbol, are -ENOENT (the registration
    /// decides); x86's `+4` after an `endbr64` (code the copy lacks) is left
    /// unchecked for the function itself and to the registration for one
    /// the offset reaches; where the copy has no image bounds, the offset
    /// rules answer.
    fn kprobe_entry(&self, symbol: &str, offset: u64) -> Option<Option<bool>> {
        let table = self.table?.kallsyms().ok()?;
        if table.addresses_hidden() {
            return None;
        }
        let (module, name) = ktrace_symbols::code::split_module(symbol);
        // `MOD:SYM` of a module the copy does not list, or a name it does
        // not have: kprobe_lookup_name() finds nothing, -ENOENT (x86_64
        // 6.1, seed 1202: `p input_event_from_user: $arg10000` is no
        // entry, so `$argN` is no variable there)
        if let Some(m) = module
            && !ktrace_symbols::kallsyms::is_pseudo_module(m)
            && !table.lists_module(m)
        {
            return Some(None);
        }
        // a name the copy lacks: the kernel's lookup fails too (arm64 6.1,
        // offline, seed 1205: `r ipv6_l\ist_rcv+0x100000` is "Invalid
        // probed address or symbol", not judged by its offset)
        let Some(sym) = table.by_name(name, module).first().copied() else {
            return Some(None);
        };
        if sym.module.is_some() && module.is_none() {
            return None;
        }
        let addr = sym.addr.checked_add(offset)?;
        // is_ksym_addr() as LiveEnv's in_kernel; outside the core image
        // only a module's symbol is found, and an address in no symbol is
        // -ENOENT, which the registration decides
        let placed = table.core_image_holds(addr)?;
        let at = match table.lookup(addr) {
            Some(at) if placed || at.symbol.module.is_some() => at,
            _ => return Some(None),
        };
        match at.offset {
            0 => Some(Some(true)),
            // after an endbr64 or not, which the copy cannot show: the
            // function's own +4 is left unchecked (the offset rules), a
            // +4 of the function the offset reaches to the registration
            4 if matches!(self.arch, Arch::X86_64 | Arch::I386) => (offset != 4).then_some(None),
            _ => Some(Some(false)),
        }
    }

    fn symbol_count(&self, name: &str) -> Option<usize> {
        self.symbols?.count(name)
    }

    fn module_symbol_count(&self, module: &str, name: &str) -> Option<Option<usize>> {
        self.symbols?.module_symbol_count(module, name)
    }

    fn btf_function(&self, name: &str) -> Option<Option<(&dyn BtfTypes, BtfFunc)>> {
        self.btf?.function(name)
    }
    fn btf_struct(&self, name: &str) -> Option<bool> {
        btf_struct(self.btf?, name)
    }

    fn btf_vmlinux(&self) -> Option<&dyn BtfTypes> {
        Some(self.btf?.vmlinux()?)
    }
}

/// Whether vmlinux's BTF has a struct or union `name` (`query_btf_struct()`
/// of a typecast); `None` without vmlinux BTF.
fn btf_struct(btf: &ktrace_symbols::btf_types::KernelBtf, name: &str) -> Option<bool> {
    use ktrace_symbols::btf::Kind;
    let b = btf.vmlinux()?;
    Some(b.find(Kind::Struct, name).is_some() || b.find(Kind::Union, name).is_some())
}

/// Field names of an event's `format` file (`field:TYPE NAME[N];` lines).
pub fn format_fields(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let decl = l.trim().strip_prefix("field:")?.split(';').next()?;
            let last = decl.split_whitespace().last()?;
            Some(last.split('[').next().unwrap_or(last).to_string())
        })
        .collect()
}

/// The language features of a kernel of `version` that announces
/// `readme` in its tracefs: what the README lists (event probes, immediates,
/// the `char`, `symstr` and `%pd` types, `%return`) decides; messages and
/// limits the README does not describe follow the version.
pub fn features_from_readme(
    version: KernelVersion,
    readme: &ktrace_tracefs::Features,
) -> ktrace_probe::kernel::Features {
    let mut f = version.features();
    if readme.types.is_empty() {
        // No README probe section (or no README): nothing to go by.
        return f;
    }
    f.eprobes = readme.eprobes;
    f.immediates = readme.immediates;
    f.char_type = readme.has_type("char");
    f.symstr = readme.has_type("symstr");
    f.dentry_types = readme.has_type("%pd");
    // BTF arguments (`<argname>` in the README) switch the argument parser to
    // its BTF generation; it needs the function argument access API. (Without
    // a probe section above, the version decided: reads_btf_names(version, None).)
    f.btf_args = ktrace_symbols::kernel::reads_btf_names(version, Some(readme));
    f.btf_parser |= f.btf_args;
    // `f`/`t` probes exist where the README announces them (not on 32-bit arm).
    f.fprobes = readme.fprobes;
    f.synthetic_events = readme.synthetic;
    f
}

/// The check target for the running kernel seen through `view`.
pub fn live_target(arch: Arch, view: &KernelView) -> Target {
    let mut t = Target::new(arch);
    // The release, with the stable sublevel /proc/version names (Debian's
    // `uname -r` has none), from the view.
    t.kernel = view.version_or(t.kernel);
    t.features = view.features().map(|r| {
        let mut f = features_from_readme(t.kernel, r);
        // a kernel without kprobe events has no kprobe_events file (and
        // its dynamic_events takes no kprobe)
        f.kprobes = r.kprobe_events || !r.dynamic_events;
        f
    });
    t.possible_cpus = view.possible_cpus();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_file_fields() {
        // Captured: cat /sys/kernel/tracing/events/sched/sched_switch/format (6.18)
        let text = "name: sched_switch\nID: 318\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\nprint fmt: \"x\"\n";
        assert_eq!(
            format_fields(text),
            ["common_type", "prev_comm", "prev_pid"]
        );
    }

    #[test]
    fn live_checks_follow_the_kernels_readme() {
        // The 6.18 host's README (crates/tracefs/fixtures/README.6.18.txt)
        // lists `char`; a 6.1-numbered kernel announcing it gets it, and one
        // whose README lacks `symstr` does not get that, whatever its number.
        let readme = include_str!("../../crates/tracefs/fixtures/README.6.18.txt");
        let r = ktrace_tracefs::Features::from_readme(readme);
        let f = features_from_readme(KernelVersion::new(6, 1), &r);
        assert!(f.char_type && f.symstr && f.eprobes);
        assert!(!KernelVersion::new(6, 1).features().char_type);
        let no_symstr = readme.replace("symstr,", "");
        let r = ktrace_tracefs::Features::from_readme(&no_symstr);
        assert!(!features_from_readme(KernelVersion::new(6, 18), &r).symstr);
        // Limits the README does not list follow the version.
        let r = ktrace_tracefs::Features::from_readme(readme);
        assert!(features_from_readme(KernelVersion::new(6, 18), &r).too_many_args_error);
        assert!(!features_from_readme(KernelVersion::new(6, 1), &r).too_many_args_error);
        // The 6.18 host's README lists no BTF arguments and no fprobes (its
        // kernel has neither): a live check goes by that, not by the version.
        let f = features_from_readme(KernelVersion::new(6, 18), &r);
        assert!(!f.btf_args && !f.fprobes && f.btf_parser);
        assert!(KernelVersion::new(6, 18).features().btf_args);
        let empty = ktrace_tracefs::Features::default();
        assert_eq!(
            features_from_readme(KernelVersion::new(6, 1), &empty),
            KernelVersion::new(6, 1).features()
        );
    }
}

#[cfg(test)]
mod entry_tests {
    use super::*;

    /// The environment of a kernel view made of files only.
    fn file_env(view: &KernelView) -> LiveEnv<'_> {
        LiveEnv {
            symbols: None,
            tracefs: Path::new("/nonexistent"),
            btf: None,
            view: Some(view),
            frozen: None,
            kernel_decides_ftrace: false,
            no_suggestions: false,
        }
    }

    /// 32-bit arm 6.12's kallsyms has `_stext` but no `_end`: an offset
    /// into a function is still decided (it was left to registration).
    #[test]
    fn entry_is_decided_without_an_end_symbol() {
        let dir = std::env::temp_dir().join(format!("ktrace_entry_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k = dir.join("kallsyms");
        std::fs::write(
            &k,
            "c0300000 T _stext\nc0848c90 T io_sq_thread_finish\nc0848d00 T next_fn\n\
             c0db6a7c t inet6_create\nc0f00000 D _etext\nc14003c0 T _sinittext\nc1490f08 T _einittext\n",
        )
        .unwrap();
        let view = KernelView::running(None).with_kallsyms_file(&k);
        let env = file_env(&view);
        assert_eq!(
            env.kprobe_entry("io_sq_thread_finish", 49),
            Some(Some(false))
        );
        assert_eq!(env.kprobe_entry("io_sq_thread_finish", 0), Some(Some(true)));
        // an offset landing on the next function's start is its entry
        assert_eq!(
            env.kprobe_entry("io_sq_thread_finish", 0x70),
            Some(Some(true))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A definition about to be written leaves the notrace rule to the
    /// kernel (its ftrace locations are not read); `ktrace check` applies
    /// it; after the kernel's refusal the rule says why.
    #[test]
    fn notrace_is_the_kernels_to_refuse_when_writing() {
        let dir = std::env::temp_dir().join(format!("ktrace_notrace_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k = dir.join("kallsyms");
        std::fs::write(
            &k,
            "ffffffff81000000 T _stext\nffffffff81100000 T traced_fn\n\
             ffffffff81100100 T notrace_fn\nffffffff81100200 T next_fn\n\
             ffffffff82000000 T _etext\n",
        )
        .unwrap();
        let f = dir.join("available_filter_functions_addrs");
        std::fs::write(&f, "ffffffff81100004 traced_fn\nffffffff81100204 next_fn\n").unwrap();
        let view = KernelView::running(None)
            .with_kallsyms_file(&k)
            .with_filter_functions_file(&f)
            .with_notrace_allowed(false);
        let mut env = file_env(&view);
        assert!(matches!(
            env.kprobe_refusal("notrace_fn", 0),
            Some(Some(Refusal::Notrace(_)))
        ));
        assert!(
            !matches!(env.kprobe_refusal("traced_fn", 0), Some(Some(_))),
            "a traced function passes"
        );
        env.kernel_decides_ftrace = true;
        assert!(
            !matches!(env.kprobe_refusal("notrace_fn", 0), Some(Some(_))),
            "left to the kernel"
        );
        let at = |symbol: &str| ktrace_probe::ProbeKind::Kprobe {
            place: ktrace_probe::ast::KprobePlace::Symbol {
                symbol: symbol.into(),
                offset: 0,
            },
            is_return: false,
            maxactive: 0,
            shown_maxactive: None,
        };
        let why = kernel_refusal_reason(&view, &at("notrace_fn")).expect("a reason");
        assert!(why.contains("notrace_fn has no ftrace location"), "{why}");
        assert_eq!(kernel_refusal_reason(&view, &at("traced_fn")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// arm64 7.2 (conform seed 20261128): thermal_genl_event_threshold_up
    /// shares its address with thermal_genl_event_threshold_down, the name
    /// available_filter_functions lists; `f thermal_genl_event_threshold_up`
    /// was taken and enabled. `f target\_store` is a glob to ftrace.
    #[test]
    fn fprobe_names_ftrace_lists_under_an_alias_or_as_a_glob() {
        let dir = std::env::temp_dir().join(format!("ktrace_alias_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let k = dir.join("kallsyms");
        std::fs::write(
            &k,
            "ffff800080010000 T _stext\n\
             ffff8000807bf000 T thermal_genl_event_threshold_down\n\
             ffff8000807bf000 t thermal_genl_event_threshold_up\n\
             ffff8000807bf100 t target_store\n\
             ffff8000807bf200 t notrace_fn\n\
             ffff800080f00000 T _etext\n",
        )
        .unwrap();
        let f = dir.join("available_filter_functions");
        std::fs::write(&f, "thermal_genl_event_threshold_down\ntarget_store\n").unwrap();
        let view = KernelView::running(None)
            .with_kallsyms_file(&k)
            .with_filter_functions_file(&f);
        let env = file_env(&view);
        assert_eq!(
            env.ftrace_matches("thermal_genl_event_threshold_up"),
            Some(false)
        );
        assert_eq!(
            env.ftrace_alias("thermal_genl_event_threshold_up"),
            Some(true)
        );
        assert_eq!(env.ftrace_alias("notrace_fn"), Some(false));
        assert_eq!(env.ftrace_alias("nosuch"), Some(false));
        assert_eq!(env.ftrace_matches("target\\_store"), Some(true));
        assert_eq!(env.ftrace_matches("target\\_stor"), Some(false));
        assert_eq!(env.ftrace_matches("notrace_fn"), Some(false));
        let mut t = Target::new(Arch::Arm64);
        t.kernel = KernelVersion::new(7, 2);
        let taken = |line: &str, t| ktrace_probe::parse::check_line(line, t, &env).accepted();
        assert!(taken("f thermal_genl_event_threshold_up", t));
        assert!(taken("f target\\_store", t));
        assert!(!taken("f notrace_fn", t));
        // ftrace_set_filter() of 6.12 matches the listed name only
        t.kernel = KernelVersion::new(6, 12);
        assert!(!taken("f thermal_genl_event_threshold_up", t));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
