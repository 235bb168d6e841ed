//! Which kernel functions a kprobe *event* may be put on, and wildcard
//! expansion (`vfs_*`, `MOD:glob`) against that set.
//!
//! The rules, each from the kernel code that enforces it:
//!
//! 1. Text only: kallsyms type `t`/`T` (and weak `w`/`W`). `register_kprobe`
//!    refuses addresses outside kernel or module text
//!    (`check_kprobe_address_safe` → `kernel_text_address`).
//! 2. No CFI/prefix preambles: `__cfi_*` and `__pfx_*` symbols are refused
//!    by `check_kprobe_address_safe` (`is_cfi_preamble_symbol`,
//!    kernel/kprobes.c; stable kernels before the 2024 fix of its argument
//!    order refuse them anyway as notrace, having no ftrace location).
//! 3. Not blacklisted: the address lies in none of the ranges of
//!    `/sys/kernel/debug/kprobes/blacklist`. Like `within_kprobe_blacklist`,
//!    a suffixed symbol (`foo.isra.0`, `foo.cold`) is also refused when its
//!    non-suffixed name is blacklisted. With zeroed addresses (reader without
//!    CAP_SYSLOG) names are compared instead.
//! 4. Not notrace, when the kernel refuses those: with `CONFIG_DYNAMIC_FTRACE`
//!    and without `CONFIG_KPROBE_EVENTS_ON_NOTRACE` (the default, and Debian's
//!    configuration), `__register_trace_kprobe` in kernel/trace/trace_kprobe.c
//!    calls `within_notrace_func`: the function (start = address - offset,
//!    size from `kallsyms_lookup_size_offset`) is refused ("Could not probe
//!    notrace function") when no ftrace location (`ftrace_location_range`)
//!    lies in `[start, start + size)`; for a suffixed symbol, the
//!    non-suffixed function is checked the same way and decides. Ftrace
//!    locations are exactly what `available_filter_functions_addrs` lists
//!    (by address, used when present) and `available_filter_functions`
//!    lists (by name, the fallback). Without either file the rule cannot be
//!    checked and is reported as skipped, not silently assumed.
//! 5. Unique: since Linux 6.6 `__trace_kprobe_create` refuses a symbol that
//!    `number_of_same_symbols()` counts more than once (all symbol types,
//!    core kernel plus all modules; only that module for `MOD:SYM`) with
//!    "symbol is not unique" (EADDRNOTAVAIL).
//!
//! Not modelled: `check_kprobe_address_safe` also refuses addresses reserved
//! by jump labels or static calls and `BUG()` sites; those concern single
//! instructions, rarely a function's entry. This module is pure: the tables
//! come from the caller.

use std::collections::HashSet;

use crate::blacklist::BlacklistEntry;
use crate::glob::glob_match;
use crate::kallsyms::{Kallsyms, KernelSymbol};

/// Ftrace locations, from `available_filter_functions[_addrs]`.
#[derive(Debug, Clone)]
pub enum FtraceLocations {
    /// Sorted addresses of ftrace call sites (from `_addrs`).
    Addrs(Vec<u64>),
    /// `(name, module)` pairs (from the name-only file).
    Names(HashSet<(String, Option<String>)>),
}

impl FtraceLocations {
    /// Parses `available_filter_functions_addrs` (`ADDR NAME [MOD]`) or
    /// `available_filter_functions` (`NAME [MOD]`), told apart by whether the
    /// first field of the first line is hexadecimal and a name follows.
    pub fn parse(text: &str) -> Self {
        let addr_form = text.lines().next().is_some_and(|l| {
            let mut f = l.split_ascii_whitespace();
            f.next()
                .is_some_and(|a| u64::from_str_radix(a, 16).is_ok() && a.len() >= 8)
                && f.next().is_some()
        });
        if addr_form {
            let mut v: Vec<u64> = text
                .lines()
                .filter_map(|l| l.split_ascii_whitespace().next())
                .filter_map(|a| u64::from_str_radix(a, 16).ok())
                .collect();
            v.sort_unstable();
            FtraceLocations::Addrs(v)
        } else {
            FtraceLocations::Names(
                text.lines()
                    .filter_map(|l| {
                        let mut f = l.split_ascii_whitespace();
                        let name = f.next()?;
                        let module = f
                            .next()
                            .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                            .map(str::to_string);
                        Some((name.to_string(), module))
                    })
                    .collect(),
            )
        }
    }

    fn covers(&self, ks: &Kallsyms, sym: &KernelSymbol) -> bool {
        match self {
            FtraceLocations::Addrs(v) => {
                let Some(size) = ks.extent(sym) else {
                    return v.binary_search(&sym.addr).is_ok();
                };
                let end = sym.addr.saturating_add(size);
                let i = v.partition_point(|&a| a < sym.addr);
                v.get(i).is_some_and(|&a| a < end)
            }
            // The kernel checks the address range, which aliases share: a
            // label such as __softirqentry_text_start at a traced function's
            // address is covered by that function's ftrace location.
            FtraceLocations::Names(set) => {
                ks.aliases(sym)
                    .iter()
                    .chain(std::iter::once(&sym))
                    .any(|a| {
                        set.contains(&(a.name.to_string(), a.module.as_deref().map(str::to_string)))
                    })
            }
        }
    }
}

/// Why a matching function is left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusion {
    /// Not a text symbol.
    NotText,
    /// A `__cfi_`/`__pfx_` preamble.
    Preamble,
    /// In the kprobe blacklist (the entry's name given).
    Blacklisted(String),
    /// No ftrace location in it: refused as notrace.
    Notrace,
    /// The name is counted this many times.
    NotUnique(usize),
}

impl std::fmt::Display for Exclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exclusion::NotText => write!(f, "not a text symbol"),
            Exclusion::Preamble => write!(f, "cfi/prefix preamble"),
            Exclusion::Blacklisted(n) => write!(f, "in the kprobe blacklist ({n})"),
            Exclusion::Notrace => {
                write!(f, "notrace (no ftrace location), refused for kprobe events")
            }
            Exclusion::NotUnique(n) => {
                write!(f, "name not unique ({n} symbols), the kernel refuses it")
            }
        }
    }
}

/// The tables and settings the rules need.
#[derive(Debug, Clone, Default)]
pub struct Rules<'a> {
    /// The blacklist, when readable.
    pub blacklist: Option<&'a [BlacklistEntry]>,
    /// Ftrace locations, when readable.
    pub ftrace: Option<&'a FtraceLocations>,
    /// Whether the kernel refuses notrace functions (true unless the kernel
    /// has `CONFIG_KPROBE_EVENTS_ON_NOTRACE=y`).
    pub notrace_refused: bool,
    /// Text the architecture refuses outside the blacklist file, as the
    /// kallsyms names of each area's first and end markers.
    pub refused_areas: &'static [(&'static str, &'static str)],
}

/// The areas of [`Rules::refused_areas`] for 32-bit arm
/// (arch/arm/probes/kprobes/core.c, `arch_within_kprobe_blacklist()`).
pub const ARM_REFUSED_AREAS: &[(&str, &str)] = &[
    ("__irqentry_text_start", "__irqentry_text_end"),
    ("__entry_text_start", "__entry_text_end"),
    ("__idmap_text_start", "__idmap_text_end"),
    ("__kprobes_text_start", "__kprobes_text_end"),
];

/// The outcome of checking one symbol or expanding one pattern.
#[derive(Debug, Clone, Default)]
pub struct Expansion<'k> {
    /// Functions a kprobe event can take, one per name.
    pub accepted: Vec<&'k KernelSymbol>,
    /// Matching symbols left out, with the reason.
    pub excluded: Vec<(&'k KernelSymbol, Exclusion)>,
    /// Rules that could not be applied for lack of a table.
    pub skipped_rules: Vec<&'static str>,
}

fn base_name(name: &str) -> Option<&str> {
    name.split_once('.').map(|(b, _)| b)
}

fn blacklisted(ks: &Kallsyms, bl: &[BlacklistEntry], sym: &KernelSymbol) -> Option<String> {
    let by_addr = |addr: u64| {
        bl.iter()
            .find(|e| e.start != 0 && addr >= e.start && addr < e.end)
            .map(|e| e.name.clone())
    };
    let by_name = |name: &str| {
        bl.iter()
            .find(|e| e.name == name && e.module.as_deref() == sym.module.as_deref())
            .map(|e| e.name.clone())
    };
    if let Some(n) = by_addr(sym.addr).or_else(|| by_name(&sym.name)) {
        return Some(n);
    }
    let base = base_name(&sym.name)?;
    let base_sym = ks.by_name(base, sym.module.as_deref()).into_iter().next();
    base_sym
        .and_then(|b| by_addr(b.addr))
        .or_else(|| by_name(base))
}

fn notrace(ks: &Kallsyms, ft: &FtraceLocations, sym: &KernelSymbol) -> bool {
    if ft.covers(ks, sym) {
        return false;
    }
    // A suffixed symbol: the non-suffixed function decides.
    match base_name(&sym.name).and_then(|b| ks.by_name(b, sym.module.as_deref()).into_iter().next())
    {
        Some(base) => !ft.covers(ks, base),
        None => true,
    }
}

/// Checks one symbol against the rules; `module_scoped` is true for
/// `MOD:SYM` (uniqueness counted in the module only).
pub fn check(
    ks: &Kallsyms,
    rules: &Rules<'_>,
    sym: &KernelSymbol,
    module_scoped: bool,
) -> Option<Exclusion> {
    if !sym.is_text() {
        return Some(Exclusion::NotText);
    }
    if sym.name.starts_with("__cfi_") || sym.name.starts_with("__pfx_") {
        return Some(Exclusion::Preamble);
    }
    if let Some(bl) = rules.blacklist
        && let Some(n) = blacklisted(ks, bl, sym)
    {
        return Some(Exclusion::Blacklisted(n));
    }
    if rules.notrace_refused
        && let Some(ft) = rules.ftrace
        && notrace(ks, ft, sym)
    {
        return Some(Exclusion::Notrace);
    }
    let scope = if module_scoped {
        sym.module.as_deref()
    } else {
        None
    };
    let count = ks.count_same(&sym.name, scope);
    if count > 1 {
        return Some(Exclusion::NotUnique(count));
    }
    None
}

/// Splits `MOD:PATTERN` into its module and pattern.
pub fn split_module(pattern: &str) -> (Option<&str>, &str) {
    match pattern.split_once(':') {
        Some((m, p)) => (Some(m), p),
        None => (None, pattern),
    }
}

/// Expands a pattern (`vfs_*`, `ext4:ext4_*`, or a plain name) into the
/// probe-able functions it names. Non-text symbols are silently skipped for
/// wildcards; a plain name that is not text is reported as excluded.
pub fn expand<'k>(ks: &'k Kallsyms, rules: &Rules<'_>, pattern: &str) -> Expansion<'k> {
    let (module, glob) = split_module(pattern);
    let wildcard = crate::glob::is_glob(glob);
    let mut out = Expansion::default();
    if rules.blacklist.is_none() {
        out.skipped_rules.push("kprobe blacklist (not readable)");
    }
    if rules.notrace_refused && rules.ftrace.is_none() {
        out.skipped_rules
            .push("notrace check (no available_filter_functions)");
    }
    let mut seen: HashSet<(&str, Option<&str>)> = HashSet::new();
    for sym in ks.symbols() {
        if let Some(m) = module
            && sym.module.as_deref() != Some(m)
        {
            continue;
        }
        let hit = if wildcard {
            glob_match(glob, &sym.name)
        } else {
            sym.name == glob
        };
        if !hit {
            continue;
        }
        if wildcard && !sym.is_text() {
            continue;
        }
        match check(ks, rules, sym, module.is_some()) {
            None => {
                if seen.insert((sym.name.as_str(), sym.module.as_deref())) {
                    out.accepted.push(sym);
                }
            }
            Some(why) => out.excluded.push((sym, why)),
        }
    }
    out
}

/// Why `register_kprobe()` (or `__register_trace_kprobe()`'s notrace check)
/// refuses a kprobe at `symbol`+`offset` that the language allows, from the
/// kernel's tables: `Some(Err(reason))` for a notrace function (refused
/// before the arguments' symbols are resolved), `Some(Ok(Some(reason)))` for
/// an address that is not kernel text (data, an init function freed after
/// boot, a CFI/prefix preamble) or is blacklisted, `Some(Ok(None))` when it
/// registers; `None` when the symbol is not in the table or the addresses
/// are hidden.
pub fn kprobe_refusal(
    ks: &Kallsyms,
    rules: &Rules<'_>,
    symbol: &str,
    offset: u64,
) -> Option<std::result::Result<Option<String>, String>> {
    kprobe_refusal_on(ks, rules, symbol, offset, None)
}

/// [`kprobe_refusal`] for an architecture without `KPROBES_ON_FTRACE`
/// (arm64, riscv64, arm): `check_ftrace_location()` refuses a probe exactly
/// on a function's ftrace call site. The sites come from
/// `available_filter_functions_addrs`; with only the names,
/// `site_offset` (arm64: 4, after the first patchable nop) is taken as the
/// site of every traceable function.
pub fn kprobe_refusal_on(
    ks: &Kallsyms,
    rules: &Rules<'_>,
    symbol: &str,
    offset: u64,
    no_kprobes_on_ftrace: Option<Option<u64>>,
) -> Option<std::result::Result<Option<String>, String>> {
    if ks.addresses_hidden() {
        return None;
    }
    // `MOD:SYM`: the module's own symbol (x86_64 6.1: `p
    // autofs4:exit_autofs_fs`, an `__exit` function and so notrace, went
    // unjudged and the kernel refused it)
    let (module, name) = crate::code::split_module(symbol);
    let sym = *ks.by_name(name, module).first()?;
    let addr = sym.addr.checked_add(offset)?;
    refusal_at(ks, rules, sym, symbol, offset, addr, no_kprobes_on_ftrace)
}

/// [`kprobe_refusal_on`] for a raw address: the symbol is the one the
/// address falls in, not the first of its name (arm 6.12, seed 23: `p
/// 0xc0785320` in one static `p_next` was judged by another's ftrace
/// location).
pub fn kprobe_refusal_at(
    ks: &Kallsyms,
    rules: &Rules<'_>,
    addr: u64,
    no_kprobes_on_ftrace: Option<Option<u64>>,
) -> Option<std::result::Result<Option<String>, String>> {
    if ks.addresses_hidden() {
        return None;
    }
    let at = ks.lookup(addr)?;
    refusal_at(
        ks,
        rules,
        at.symbol,
        &at.symbol.name,
        at.offset,
        addr,
        no_kprobes_on_ftrace,
    )
}

fn refusal_at(
    ks: &Kallsyms,
    rules: &Rules<'_>,
    sym: &KernelSymbol,
    symbol: &str,
    offset: u64,
    addr: u64,
    no_kprobes_on_ftrace: Option<Option<u64>>,
) -> Option<std::result::Result<Option<String>, String>> {
    // The function the address falls in (the kernel looks the address up).
    let at = ks.lookup(addr);
    let func = at.as_ref().map_or(sym, |l| l.symbol);
    // within_notrace_func() looks the address up with
    // kallsyms_lookup_size_offset(), which knows nothing below the kernel
    // image (x86_64's zero-based per-cpu variables): there the check is
    // passed, and the arguments are resolved before register_kprobe()
    // refuses the address (x86_64 6.1: `r bpf_prog_active%return
    // a=@nosuch` is "Invalid probed address or symbol").
    // (modules sit below the image on arm64 and 32-bit arm: only a core
    // symbol is below it for this purpose)
    // (the image starts at `_text`: 32-bit arm keeps its init text and
    // arm64 its head text between `_text` and `_stext`)
    let below_image = sym.module.is_none()
        && ks
            .by_name("_text", None)
            .first()
            .or(ks.by_name("_stext", None).first())
            .is_some_and(|s| addr < s.addr);
    if rules.notrace_refused
        && !below_image
        && let Some(ft) = rules.ftrace
        && notrace(ks, ft, func)
    {
        return Some(Err(format!(
            "{} has no ftrace location: the kernel refuses kprobe events on notrace functions",
            func.name
        )));
    }
    if !sym.is_text() {
        return Some(Ok(Some(format!(
            "{symbol} is not a function (kallsyms type '{}'): kprobes go on kernel text",
            sym.kind
        ))));
    }
    let bound = |name: &str| ks.by_name(name, None).first().map(|s| s.addr);
    if let (Some(lo), Some(hi)) = (bound("_sinittext"), bound("_einittext"))
        && addr >= lo
        && addr < hi
    {
        return Some(Ok(Some(format!(
            "{symbol} is an init function: its code was freed after boot"
        ))));
    }
    if func.name.starts_with("__cfi_") || func.name.starts_with("__pfx_") {
        return Some(Ok(Some(format!(
            "{} is a CFI/prefix preamble, which kprobes refuse",
            func.name
        ))));
    }
    if let (Some(site_guess), Some(ft)) = (no_kprobes_on_ftrace, rules.ftrace) {
        let on_site = match ft {
            FtraceLocations::Addrs(sites) => sites.binary_search(&addr).is_ok(),
            FtraceLocations::Names(_) => {
                site_guess.is_some_and(|o| at.as_ref().is_some_and(|l| l.offset == o))
                    && ft.covers(ks, func)
            }
        };
        if on_site {
            return Some(Ok(Some(format!(
                "{symbol}+{offset:#x} is the ftrace call site of {}, and this architecture \
                 has no kprobes on ftrace: probe the function's entry (+0) or use an fprobe",
                func.name
            ))));
        }
    }
    // arch_within_kprobe_blacklist(): sections an architecture refuses
    // without listing them in the blacklist file (32-bit arm: the IRQ entry,
    // entry and idmap text; arm 7.2 refused `vt8500_handle_irq%return`).
    for (start, end) in rules.refused_areas {
        if let (Some(lo), Some(hi)) = (bound(start), bound(end))
            && addr >= lo
            && addr < hi
        {
            return Some(Ok(Some(format!(
                "{} is in {}..{}, which kprobes on this architecture refuse",
                func.name,
                start.trim_end_matches("_start"),
                end.trim_end_matches("_end").trim_start_matches("__")
            ))));
        }
    }
    if let Some(bl) = rules.blacklist {
        if let Some(e) = bl
            .iter()
            .find(|e| e.start != 0 && addr >= e.start && addr < e.end)
        {
            return Some(Ok(Some(format!(
                "{symbol}+{offset} is in the kprobe blacklist ({})",
                e.name
            ))));
        }
        if let Some(n) = blacklisted(ks, bl, func) {
            return Some(Ok(Some(format!(
                "{} is in the kprobe blacklist ({n})",
                func.name
            ))));
        }
    }
    Some(Ok(None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blacklist;

    const TABLE: &str = "\
ffffffff81000000 T _stext
ffffffff81000100 t __pfx_vfs_read
ffffffff81000110 T vfs_read
ffffffff81000200 T vfs_write
ffffffff81000300 t vfs_helper.isra.0
ffffffff81000380 t vfs_helper
ffffffff81000400 T vfs_notraced
ffffffff81000480 t vfs_dup
ffffffff81000500 t vfs_dup
ffffffff81000580 D vfs_data
ffffffff81000600 T do_int3
ffffffff81000700 T _etext
ffffffffc0001000 t vfs_modfn\t[foo]
ffffffffc0001080 t vfs_dup\t[foo]
ffffffffc0001100 t other\t[foo]
";

    fn names(e: &Expansion<'_>) -> Vec<String> {
        e.accepted
            .iter()
            .map(|s| match &s.module {
                Some(m) => format!("{m}:{}", s.name),
                None => s.name.to_string(),
            })
            .collect()
    }

    #[test]
    fn wildcard_without_tables_keeps_text_and_reports_skips() {
        let ks = Kallsyms::parse(TABLE).unwrap();
        let rules = Rules {
            notrace_refused: true,
            ..Rules::default()
        };
        let e = expand(&ks, &rules, "vfs_*");
        assert_eq!(
            names(&e),
            [
                "vfs_read",
                "vfs_write",
                "vfs_helper.isra.0",
                "vfs_helper",
                "vfs_notraced",
                "foo:vfs_modfn"
            ]
        );
        assert_eq!(
            e.excluded
                .iter()
                .filter(|(_, w)| *w == Exclusion::NotUnique(3))
                .count(),
            3
        );
        assert_eq!(e.skipped_rules.len(), 2);
    }

    #[test]
    fn blacklist_and_notrace_rules() {
        let ks = Kallsyms::parse(TABLE).unwrap();
        let bl = blacklist::parse(
            "0xffffffff81000600-0xffffffff81000700\tdo_int3\n\
             0xffffffff81000380-0xffffffff81000400\tvfs_helper\n",
        )
        .unwrap();
        // ftrace locations: fentry at +0 of vfs_read, vfs_write; none in
        // vfs_notraced, vfs_helper*, modfn.
        let ft = FtraceLocations::parse("ffffffff81000110 vfs_read\nffffffff81000204 vfs_write\n");
        let rules = Rules {
            blacklist: Some(&bl),
            ftrace: Some(&ft),
            notrace_refused: true,
            refused_areas: &[],
        };
        let e = expand(&ks, &rules, "vfs_*");
        assert_eq!(names(&e), ["vfs_read", "vfs_write"]);
        let why = |n: &str| {
            e.excluded
                .iter()
                .find(|(s, _)| s.name == n)
                .map(|(_, w)| w.clone())
        };
        assert_eq!(
            why("vfs_helper"),
            Some(Exclusion::Blacklisted("vfs_helper".into()))
        );
        assert_eq!(
            why("vfs_helper.isra.0"),
            Some(Exclusion::Blacklisted("vfs_helper".into()))
        );
        assert_eq!(why("vfs_notraced"), Some(Exclusion::Notrace));
        assert!(e.skipped_rules.is_empty());
        // A kernel built with KPROBE_EVENTS_ON_NOTRACE takes notrace functions.
        let on_notrace = Rules {
            notrace_refused: false,
            ..rules.clone()
        };
        assert!(names(&expand(&ks, &on_notrace, "vfs_*")).contains(&"vfs_notraced".to_string()));
        // Plain names get a reason, including non-text.
        let e = expand(&ks, &rules, "do_int3");
        assert!(e.accepted.is_empty());
        let e = expand(&ks, &rules, "vfs_data");
        assert_eq!(e.excluded[0].1, Exclusion::NotText);
    }

    #[test]
    fn a_raw_address_is_judged_by_its_own_function_not_its_namesake() {
        // two static `p_next`: the second is traced, the first is not
        let ks = Kallsyms::parse(
            "c0300000 T _stext\nc0400000 t p_next\nc0400080 t other\nc0785320 t p_next\n\
             c0785400 t last\nc0f00000 D _etext\n",
        )
        .unwrap();
        let ft = FtraceLocations::parse("c0785328 p_next\nc0400088 other\n");
        let rules = Rules {
            ftrace: Some(&ft),
            notrace_refused: true,
            ..Rules::default()
        };
        assert_eq!(
            kprobe_refusal_at(&ks, &rules, 0xc0785320, None),
            Some(Ok(None))
        );
        assert!(matches!(
            kprobe_refusal_at(&ks, &rules, 0xc0400000, None),
            Some(Err(_))
        ));
    }

    #[test]
    fn arm_refuses_its_irq_entry_text() {
        // arm 7.2: `vt8500_handle_irq%return` is "Failed to register probe
        // event"; the IRQ entry text is not in the blacklist file.
        let ks = Kallsyms::parse(
            "c0300000 T _stext\nc0300100 T __irqentry_text_start\nc0300100 T vt8500_handle_irq\n\
             c0300200 T __irqentry_text_end\nc0300200 T vfs_read\nc0f00000 D _etext\n",
        )
        .unwrap();
        let arm = Rules {
            refused_areas: ARM_REFUSED_AREAS,
            ..Rules::default()
        };
        assert!(matches!(
            kprobe_refusal_on(&ks, &arm, "vt8500_handle_irq", 0, None),
            Some(Ok(Some(why))) if why.contains("__irqentry_text")
        ));
        assert_eq!(
            kprobe_refusal_on(&ks, &arm, "vfs_read", 0, None),
            Some(Ok(None))
        );
        assert_eq!(
            kprobe_refusal_on(&ks, &Rules::default(), "vt8500_handle_irq", 0, None),
            Some(Ok(None))
        );
    }

    #[test]
    fn per_cpu_data_is_refused_after_the_arguments() {
        // (and a module function below the image, as on arm64 and arm)
        let table = format!(
            "000000000001e4e0 D bpf_prog_active\nffffffff80001000 t mod_notraced\t[m]\n{TABLE}"
        );
        let ks = Kallsyms::parse(&table).unwrap();
        let ft = FtraceLocations::parse("vfs_read\n");
        let rules = Rules {
            ftrace: Some(&ft),
            notrace_refused: true,
            ..Rules::default()
        };
        // below the image: not the notrace check, the address's refusal
        assert!(matches!(
            kprobe_refusal_on(&ks, &rules, "bpf_prog_active", 0, None),
            Some(Ok(Some(_)))
        ));
        // data in the image: no ftrace location, refused as notrace
        assert!(matches!(
            kprobe_refusal_on(&ks, &rules, "vfs_data", 0, None),
            Some(Err(_))
        ));
        // a module's function below the image is still held to notrace
        assert!(matches!(
            kprobe_refusal_on(&ks, &rules, "mod_notraced", 0, None),
            Some(Err(_))
        ));
        // the image starts at _text: init text before _stext (32-bit arm)
        // is in it
        let table = format!(
            "ffffffff80f00000 T _text\nffffffff80f00100 t early_fn\n\
             000000000001e4e0 D bpf_prog_active\n{TABLE}"
        );
        let ks = Kallsyms::parse(&table).unwrap();
        assert!(matches!(
            kprobe_refusal_on(&ks, &rules, "early_fn", 0, None),
            Some(Err(_))
        ));
        assert!(matches!(
            kprobe_refusal_on(&ks, &rules, "bpf_prog_active", 0, None),
            Some(Ok(Some(_)))
        ));
    }

    #[test]
    fn notrace_by_names_and_suffix_rule() {
        let ks = Kallsyms::parse(TABLE).unwrap();
        let ft = FtraceLocations::parse("vfs_read\nvfs_helper\nvfs_modfn [foo]\n");
        assert!(matches!(ft, FtraceLocations::Names(_)));
        let rules = Rules {
            ftrace: Some(&ft),
            notrace_refused: true,
            ..Rules::default()
        };
        let e = expand(&ks, &rules, "vfs_*");
        // vfs_helper.isra.0 has no location of its own, its base does.
        assert_eq!(
            names(&e),
            [
                "vfs_read",
                "vfs_helper.isra.0",
                "vfs_helper",
                "foo:vfs_modfn"
            ]
        );
    }

    #[test]
    fn a_module_function_named_with_its_module() {
        let ks = Kallsyms::parse(TABLE).unwrap();
        let ft = FtraceLocations::parse("vfs_read\nvfs_modfn [foo]\n");
        let rules = Rules {
            ftrace: Some(&ft),
            notrace_refused: true,
            ..Rules::default()
        };
        // `other [foo]` has no ftrace location (an __exit function)
        for sym in ["foo:other", "other"] {
            assert!(
                matches!(kprobe_refusal(&ks, &rules, sym, 0), Some(Err(ref w)) if w.contains("notrace")),
                "{sym}"
            );
        }
        assert_eq!(
            kprobe_refusal(&ks, &rules, "foo:vfs_modfn", 4),
            Some(Ok(None))
        );
        assert_eq!(kprobe_refusal(&ks, &rules, "bar:vfs_modfn", 0), None);
    }

    #[test]
    fn alias_label_of_a_traced_function_is_not_notrace() {
        // arm64 6.1: __softirqentry_text_start sits at __do_softirq's address;
        // the kernel took a kprobe on it although only __do_softirq is in
        // available_filter_functions.
        let ks = Kallsyms::parse(
            "ffff800008010000 T __softirqentry_text_start\n\
             ffff800008010000 T __do_softirq\n\
             ffff800008010400 T __softirqentry_text_end\n",
        )
        .unwrap();
        let ft = FtraceLocations::parse("__do_softirq\n");
        let rules = Rules {
            ftrace: Some(&ft),
            notrace_refused: true,
            ..Rules::default()
        };
        let e = expand(&ks, &rules, "__softirqentry_text_*");
        assert_eq!(names(&e), ["__softirqentry_text_start"]);
        assert_eq!(e.excluded[0].1, Exclusion::Notrace);
    }

    #[test]
    fn module_scope() {
        let ks = Kallsyms::parse(TABLE).unwrap();
        let rules = Rules::default();
        // MOD:SYM counts uniqueness in the module only.
        let e = expand(&ks, &rules, "foo:vfs_dup");
        assert_eq!(names(&e), ["foo:vfs_dup"]);
        let e = expand(&ks, &rules, "foo:*");
        assert_eq!(names(&e), ["foo:vfs_modfn", "foo:vfs_dup", "foo:other"]);
        assert_eq!(split_module("ext4:ext4_*"), (Some("ext4"), "ext4_*"));
    }
}
