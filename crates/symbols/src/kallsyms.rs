//! `/proc/kallsyms`: kernel symbol names, types, modules, and address →
//! `sym+0xoff/0xsize [mod]` exactly as the kernel prints `%pS`.
//!
//! The text format is the one `kernel/kallsyms.c` (`s_show`) writes:
//! `ADDR TYPE NAME` for the core kernel and `ADDR TYPE NAME\t[MODULE]` for
//! module (and `[bpf]`, `[__builtin__ftrace]`, ...) symbols. The core kernel
//! part is sorted by address; module symbols follow in each module's symbol
//! table order.
//!
//! Lookup mirrors `kallsyms_lookup_size_offset`:
//! - core kernel (`get_symbol_pos`): the symbol is the *first* (in table
//!   order) of those with the highest address not above the target; its size
//!   is the distance to the next higher address in the core table. For the
//!   very last core symbol the kernel uses `_etext`/`_end`/`_einittext`,
//!   which /proc/kallsyms does not show: the size is then unknown and we say
//!   so instead of inventing one.
//! - a module (`find_kallsyms_symbol` in kernel/module/kallsyms.c): the best
//!   symbol is the first with the highest address not above the target among
//!   that module's symbols, the size runs to the next higher symbol of the
//!   same module (the kernel stops at the end of the module's text region,
//!   which kallsyms does not show either).
//!
//! Printing follows `__sprint_symbol` in kernel/kallsyms.c and `number()` in
//! lib/vsprintf.c: `name+%#lx/%#lx` and ` [module]`; `%#lx` of zero prints
//! `0x0` in the kernel (the `0x` prefix is unconditional for base 16).
//! This module does not read /proc itself except in [`open`].

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::symname::SymName;

/// The pseudo-modules /proc/kallsyms lists beside the real ones (`[bpf]`,
/// `[__builtin__ftrace]`, `[__builtin__kprobes]`: BPF programs, ftrace
/// trampolines, kprobe instruction pages, from `kallsyms_show`'s arch and
/// subsystem hooks). No name lookup sees them: `kallsyms_lookup_name()`
/// searches the core kernel and real modules, `find_module()` knows no such
/// module. Seen on arm 7.2: `kprobe_optinsn_page [__builtin__kprobes]`, which
/// the kernel refuses as "Invalid probed address or symbol" and takes as
/// `__builtin__kprobes:kprobe_optinsn_page` of a module yet to come.
pub fn is_pseudo_module(module: &str) -> bool {
    module == "bpf" || module.starts_with("__builtin__")
}

use crate::error::{Error, Result};

/// One line of kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbol {
    /// The address (0 for every symbol when kptr_restrict hides them).
    pub addr: u64,
    /// The nm-style type letter (`T`, `t`, `W`, `D`, ...).
    pub kind: char,
    /// The symbol name.
    pub name: SymName,
    /// The module in brackets, if any.
    pub module: Option<SymName>,
}

impl KernelSymbol {
    /// Whether the type letter says text (code): `t`, `T`, `w`, `W`.
    pub fn is_text(&self) -> bool {
        matches!(self.kind, 't' | 'T' | 'w' | 'W')
    }
}

/// The result of an address lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup<'a> {
    /// The symbol containing the address.
    pub symbol: &'a KernelSymbol,
    /// Distance from the symbol start.
    pub offset: u64,
    /// Distance to the next symbol, when kallsyms shows one.
    pub size: Option<u64>,
}

impl Lookup<'_> {
    /// `name+0xoff/0xsize [mod]` like the kernel's `%pS`; with an unknown size
    /// `name+0xoff/?`.
    pub fn to_kernel_string(&self) -> String {
        let size = match self.size {
            Some(s) => format!("{s:#x}"),
            None => "?".to_string(),
        };
        let mut out = format!("{}+{:#x}/{size}", self.symbol.name, self.offset);
        if let Some(m) = &self.symbol.module {
            out.push_str(&format!(" [{m}]"));
        }
        out
    }
}

/// A counter a shared table bumps (a clone starts again from its count).
#[derive(Debug, Default)]
pub(crate) struct Tally(std::sync::atomic::AtomicU32);

impl Tally {
    /// The count before this call.
    pub(crate) fn next(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Clone for Tally {
    fn clone(&self) -> Self {
        Tally(self.0.load(std::sync::atomic::Ordering::Relaxed).into())
    }
}

/// A parsed kallsyms table with address indexes.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    symbols: Vec<KernelSymbol>,
    /// Per module (None = core): indexes into `symbols` sorted by
    /// (address, table order).
    sorted: HashMap<Option<SymName>, Vec<u32>>,
    /// Indexes sorted by (name, table order): one allocation instead of a
    /// map of names (kallsyms has ~100k lines; small boards matter), built
    /// at the first question by name. Printing asks only by address: the
    /// name sort was a third of `ktrace report`'s start (155 of 485
    /// million instructions for a 7.2 recording's saved kallsyms).
    by_name: std::sync::OnceLock<Vec<u32>>,
    /// Questions by name answered by a scan ([`Self::by_name`]).
    name_scans: Tally,
    /// Indexes in "did you mean" order (`ktrace_probe::similar::shape_order`),
    /// built at the first misspelt name.
    /// (with each name's `ktrace_probe::similar::signature_of` beside it)
    by_shape: std::sync::OnceLock<(Vec<u32>, Vec<u64>)>,
    /// Whether the core kernel lists `d`/`b` symbols ([`Self::lists_data`]),
    /// found while indexing: the checker asks for every address it places,
    /// and the first data symbol is some 60,000 lines into a table.
    lists_data: bool,
    /// The highest address of a core kernel symbol, for tables without
    /// `_end` ([`Self::core_last`]).
    core_last: Option<u64>,
    /// Where the core kernel's lookup by address stops (`_end`, else
    /// `__bss_stop` or `_ebss`): is_ksym_addr() places nothing past it in
    /// the core kernel (5.10 takes `_end` itself, 6.x not), although
    /// kallsyms lists symbols there
    /// (x86_64: `__init_scratch_begin` and `__init_scratch_end`, 2 and 6
    /// MiB past `_end` on 5.10 and 7.2).
    core_end: Option<u64>,
    /// The lowest address of any symbol: below it every lookup fails
    /// without searching each region (a report of uprobes read as kprobes
    /// looks up one user-space address per event; with a region per
    /// module that search was 15% of `ktrace report`'s CPU on trace-cmd's
    /// files).
    lowest: u64,
}

impl Kallsyms {
    /// Parses the text of /proc/kallsyms (lines starting with `#` are
    /// skipped as comments). The names are slices of the text, which the
    /// table keeps: given a `String`, it is not copied.
    pub fn parse(text: impl Into<String>) -> Result<Self> {
        let text = Arc::new(text.into());
        let mut symbols = Vec::new();
        for (n, _, parsed) in parse_lines(&text) {
            let Some(l) = parsed
                .map_err(|reason| Error::parse("kallsyms", format!("line {}", n + 1), reason))?
            else {
                continue;
            };
            symbols.push(KernelSymbol {
                addr: l.addr,
                kind: l.kind,
                name: SymName::within(&text, l.name),
                module: l.module.map(|m| SymName::within(&text, m)),
            });
        }
        Ok(Self::from_symbols(symbols))
    }

    /// Builds the indexes over symbols given in table order.
    pub fn from_symbols(symbols: Vec<KernelSymbol>) -> Self {
        // kallsyms lists each module's symbols together: group them by
        // comparing with the previous symbol's module instead of hashing
        // (and copying) a module name per symbol.
        let mut sorted: HashMap<Option<SymName>, Vec<u32>> = HashMap::new();
        let mut run: Option<(&Option<SymName>, Vec<u32>)> = None;
        for (i, s) in (0u32..).zip(symbols.iter()) {
            match &mut run {
                Some((m, v)) if *m == &s.module => v.push(i),
                _ => {
                    if let Some((m, v)) = run.take() {
                        sorted.entry(m.clone()).or_default().extend(v);
                    }
                    let mut v = sorted.remove(&s.module).unwrap_or_default();
                    v.push(i);
                    run = Some((&s.module, v));
                }
            }
        }
        if let Some((m, v)) = run {
            sorted.entry(m.clone()).or_default().extend(v);
        }
        for (m, v) in sorted.iter_mut() {
            // a module's mapping symbols (arm64's `$x`, `$d`) place no
            // address: the kernel's lookup by address skips them
            // (is_mapping_symbol() in find_kallsyms_symbol()); taken as
            // functions they cut the one they sit in short (arm64 7.2,
            // autofs4: `$x` at autofs_expire_multi+0x98 made that offset a
            // notrace `$x`). Its lookup by name counts them: `p
            // autofs4:$x` is "The symbol is not unique".
            if m.is_some() {
                v.retain(|&i| !is_mapping_symbol(&symbols[i as usize].name));
            }
            // the core kernel's part is already in address order
            if !v.is_sorted_by_key(|&i| symbols[i as usize].addr) {
                v.sort_unstable_by_key(|&i| (symbols[i as usize].addr, i));
            }
        }
        let core = symbols.iter().filter(|s| s.module.is_none());
        let lists_data = core.clone().any(|s| matches!(s.kind, 'd' | 'b'));
        let core_last = core.clone().map(|s| s.addr).max();
        let core_end = ["_end", "__bss_stop", "_ebss"]
            .iter()
            .find_map(|&end| core.clone().find(|s| s.name == end).map(|s| s.addr));
        let lowest = symbols.iter().map(|s| s.addr).min().unwrap_or(u64::MAX);
        Kallsyms {
            lowest,
            symbols,
            sorted,
            by_name: std::sync::OnceLock::new(),
            name_scans: Tally::default(),
            by_shape: std::sync::OnceLock::new(),
            lists_data,
            core_last,
            core_end,
        }
    }

    /// The symbol at an index of `sorted`.
    fn at(&self, i: u32) -> &KernelSymbol {
        &self.symbols[i as usize]
    }

    /// The name index, built once.
    fn name_index(&self) -> &[u32] {
        self.by_name.get_or_init(|| {
            let symbols = &self.symbols;
            crate::names::sorted_ids((0..symbols.len()).map(|i| (i as u32, &*symbols[i].name)))
        })
    }

    /// Whether module `name` is loaded (has symbols in the table).
    pub fn has_module(&self, name: &str) -> bool {
        self.sorted.contains_key(&Some(SymName::from(name)))
    }

    /// All symbols in table order.
    pub fn symbols(&self) -> &[KernelSymbol] {
        &self.symbols
    }

    /// Whether every address is zero (kptr_restrict hides them from this
    /// reader: read kallsyms as root).
    pub fn addresses_hidden(&self) -> bool {
        !self.symbols.is_empty() && self.symbols.iter().all(|s| s.addr == 0)
    }

    /// Symbols of that name (any type), optionally within one module
    /// (`Some("")` is not a module: use `None` for "anywhere").
    /// The first few questions scan the table instead of sorting its
    /// names: a one-line `ktrace check` asks two or three, and the sort
    /// costs as much as 50 scans (15 ms of a 67 ms check natively; an
    /// emulated guest or a small board pays twenty times that).
    pub fn by_name(&self, name: &str, module: Option<&str>) -> Vec<&KernelSymbol> {
        const SCANS: u32 = 16;
        let wanted = |s: &&KernelSymbol| module.is_none() || s.module.as_deref() == module;
        if self.by_name.get().is_none() && self.name_scans.next() < SCANS {
            return self
                .symbols
                .iter()
                .filter(|s| s.name == name)
                .filter(wanted)
                .collect();
        }
        let index = self.name_index();
        let from = index.partition_point(|&i| self.symbols[i as usize].name.as_str() < name);
        index[from..]
            .iter()
            .map(|&i| &self.symbols[i as usize])
            .take_while(|s| s.name == name)
            .filter(wanted)
            .collect()
    }

    /// The symbols "did you mean" compares `wanted` with: the same first
    /// byte, a length within its edit limit, the kinds of byte near enough
    /// (`ktrace_probe::similar`).
    pub fn shaped_like<'a>(&'a self, wanted: &str) -> impl Iterator<Item = &'a KernelSymbol> {
        let (index, signatures) = self.by_shape.get_or_init(|| {
            let symbols = &self.symbols;
            let index = ktrace_probe::similar::shape_order(
                (0..symbols.len()).map(|i| (i as u32, &*symbols[i].name)),
            );
            let signatures = index
                .iter()
                .map(|&i| ktrace_probe::similar::signature_of(&symbols[i as usize].name))
                .collect();
            (index, signatures)
        });
        let run =
            ktrace_probe::similar::shape_run(index, |&i| &self.symbols[i as usize].name, wanted);
        let near = ktrace_probe::similar::may_be_near(wanted);
        index[run.clone()]
            .iter()
            .zip(&signatures[run])
            .filter(move |(_, sig)| near(**sig))
            .map(|(&i, _)| &self.symbols[i as usize])
    }

    /// The count `number_of_same_symbols()` in kernel/trace/trace_kprobe.c
    /// computes: without a module, every symbol of that name in the core
    /// kernel and in all modules; with `MOD:`, those of that module only.
    /// A kprobe event on a name counted more than once is refused with
    /// "symbol is not unique" (EADDRNOTAVAIL) since Linux 6.6 (and in the
    /// stable kernels the fix went to).
    pub fn count_same(&self, name: &str, module: Option<&str>) -> usize {
        self.by_name(name, module)
            .iter()
            .filter(|s| !s.module.as_deref().is_some_and(is_pseudo_module))
            .count()
    }

    /// Whether the table lists the kernel's data as well as its code
    /// (`CONFIG_KALLSYMS_ALL`): static data (`d`, `b`) of the kernel itself
    /// appears only then. Without it, kallsyms places only addresses in
    /// kernel text and init text (`is_ksym_addr()`), and lists a few data
    /// markers besides (32-bit arm and arm64 5.10: `D`/`R` section bounds).
    pub fn lists_data(&self) -> bool {
        self.lists_data
    }

    /// The highest address of any core kernel symbol (not a module's).
    pub fn core_last(&self) -> Option<u64> {
        self.core_last
    }

    /// Whether a module of this name is loaded: some symbol of the table is
    /// its own (a pseudo-module such as `[bpf]` never is).
    pub fn lists_module(&self, module: &str) -> bool {
        !is_pseudo_module(module)
            && self
                .symbols
                .iter()
                .any(|s| s.module.as_deref() == Some(module))
    }

    /// Whether `is_ksym_addr()` places `addr` in the core kernel: without
    /// `CONFIG_KALLSYMS_ALL` ([`Kallsyms::lists_data`]) in its text or init
    /// text, with it anywhere in the image (`_stext` to `_end`; 32-bit arm
    /// 6.12 lists no `_end`: up to the last core symbol then). `None` where
    /// the table lacks the bounds. An address outside may still be in a
    /// module's symbols.
    pub fn core_image_holds(&self, addr: u64) -> Option<bool> {
        let bound = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| self.by_name(n, None).first().map(|s| s.addr))
        };
        if !self.lists_data {
            let within = |lo: &[&str], hi: &[&str]| match (bound(lo), bound(hi)) {
                (Some(lo), Some(hi)) => Some(addr >= lo && addr < hi),
                _ => None,
            };
            match (
                within(&["_stext"], &["_etext"]),
                within(&["_sinittext"], &["_einittext"]),
            ) {
                (Some(true), _) | (_, Some(true)) => return Some(true),
                (Some(false), _) => return Some(false),
                _ => {}
            }
        }
        let lo = bound(&["_stext", "_text", "_sinittext"])?;
        let hi = bound(&["_end", "__bss_stop", "_ebss"])
            .or_else(|| self.core_last.map(|a| a.saturating_add(1)))?;
        Some(addr >= lo && addr < hi)
    }

    /// The symbol containing `addr`, as the kernel's lookup finds it: each
    /// region (the core kernel, each module) is searched for its closest
    /// preceding symbol, and the closest of those wins.
    pub fn lookup(&self, addr: u64) -> Option<Lookup<'_>> {
        if addr < self.lowest {
            return None;
        }
        // (the region of the closest symbol, and its answer)
        let mut best: Option<(u64, Option<Lookup<'_>>)> = None;
        for (module, idx) in &self.sorted {
            // past the core kernel's end only modules are searched (x86_64
            // 7.2: `r exit_autofs_fs+1`, past autofs4's last symbol, was
            // judged as `__init_scratch_end`, a core symbol above `_end`)
            if module.is_none() && self.core_end.is_some_and(|end| addr > end) {
                continue;
            }
            let pos = idx.partition_point(|&i| self.at(i).addr <= addr);
            let Some(&i) = pos.checked_sub(1).and_then(|p| idx.get(p)) else {
                continue;
            };
            let at = self.at(i).addr;
            // The region whose symbol is closest to the address; past a
            // module's last symbol that is no answer, not another region's
            // farther symbol (since 6.4 a module's text and data are apart:
            // `exit_romfs_fs+4`, past romfs's text, was placed in autofs4's
            // data, which lies below)
            if best.as_ref().is_none_or(|(b, _)| at > *b) {
                best = Some((at, self.lookup_in(idx, addr)));
            }
        }
        best.and_then(|(_, l)| l)
    }

    fn lookup_in(&self, idx: &[u32], addr: u64) -> Option<Lookup<'_>> {
        // Last position whose address is <= addr.
        let pos = idx.partition_point(|&i| self.at(i).addr <= addr);
        if pos == 0 {
            return None;
        }
        let best_addr = self.at(idx[pos - 1]).addr;
        // First (table order) among the aliases at best_addr.
        let first = idx.partition_point(|&i| self.at(i).addr < best_addr);
        let symbol = self.at(idx[first]);
        let size = idx.get(pos).map(|&i| self.at(i).addr - best_addr);
        // An address past the last symbol of a region with no end known:
        // only the symbol itself is certain.
        if size.is_none() && addr != best_addr && symbol.module.is_some() {
            return None;
        }
        Some(Lookup {
            symbol,
            offset: addr - best_addr,
            size,
        })
    }

    /// The symbols at the same address as `sym` in its region (itself
    /// included), in table order.
    pub fn aliases(&self, sym: &KernelSymbol) -> Vec<&KernelSymbol> {
        let Some(idx) = self.sorted.get(&sym.module) else {
            return Vec::new();
        };
        let from = idx.partition_point(|&i| self.at(i).addr < sym.addr);
        idx[from..]
            .iter()
            .map(|&i| self.at(i))
            .take_while(|s| s.addr == sym.addr)
            .collect()
    }

    /// The size of `sym` as the kernel computes it: the distance to the next
    /// higher address in its region; `None` for the last one.
    pub fn extent(&self, sym: &KernelSymbol) -> Option<u64> {
        let idx = self.sorted.get(&sym.module)?;
        let pos = idx.partition_point(|&i| self.at(i).addr <= sym.addr);
        idx.get(pos).map(|&i| self.at(i).addr - sym.addr)
    }
}

/// A mapping symbol, as the kernel's `is_mapping_symbol()` tells one
/// since "module: Ignore RISC-V mapping symbols too" (6.5; every 6.12 and
/// 7.2 cell): any name starting with `$`, or a local label (`.L…`,
/// `L0…`). riscv64 modules carry `$xrv64i2p1_m2p0_…` (autofs4 on riscv64
/// 7.2: 93 of them). Older kernels take only `$a`, `$d`, `$t` and `$x`
/// (alone or followed by `.`), the only `$` names arm's and arm64's
/// assemblers write, so the wider rule reads their modules the same.
fn is_mapping_symbol(name: &str) -> bool {
    matches!(
        name.as_bytes(),
        [b'.', b'L', ..] | [b'L', b'0', ..] | [b'$', ..]
    )
}

/// One kallsyms line split into its fields, borrowing the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The address.
    pub addr: u64,
    /// The type letter.
    pub kind: char,
    /// The symbol name.
    pub name: &'a str,
    /// The module in brackets, if any.
    pub module: Option<&'a str>,
}

/// Refuses a copy of kallsyms (`--kallsyms FILE`) of which no line is in
/// /proc/kallsyms's `ADDRESS TYPE NAME [\t[MODULE]]` format, naming the
/// first line that is not: a file of `T vfs_read` lines would otherwise
/// count no symbol at all, and every definition would be refused.
pub fn check_format(text: &str, path: &std::path::Path) -> Result<()> {
    let mut first_bad = None;
    for (n, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(why) => {
                first_bad.get_or_insert((n + 1, line, why));
            }
        }
    }
    let (at, reason) = match first_bad {
        Some((n, line, why)) => (
            format!("line {n}"),
            format!(
                "not in /proc/kallsyms's format (ADDRESS TYPE NAME, as `ffffffff81234560 T vfs_read`): {why} in {:?}",
                line.chars().take(80).collect::<String>()
            ),
        ),
        None => ("its end".into(), "no symbol in the file".into()),
    };
    Err(Error::Parse {
        what: "kallsyms",
        at: format!("{}, {at}", path.display()),
        reason,
    })
}

/// The lowest address of a text symbol (`t`, `T`, `w`, `W`) in kallsyms
/// `text`, found by one scan that builds nothing: an address below it is in
/// no symbol [`Kallsyms::lookup`] would call code, so a reader can answer
/// "no symbol" for user-space addresses without parsing the table (a
/// report of uprobes in a recording that keeps kallsyms). `u64::MAX` when
/// there is no text symbol; `None` when a line is not in the canonical
/// form (`ADDR TYPE ...` with single spaces) and only the full parse can
/// tell.
pub fn lowest_text(text: &[u8]) -> Option<u64> {
    let mut lowest = u64::MAX;
    let mut rest = text;
    while !rest.is_empty() {
        // only a line's first bytes are looked at: memchr skips the rest
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or(&[]);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let sp = line.iter().take(17).position(|&c| c == b' ')?;
        if sp == 0 || line.get(sp + 2) != Some(&b' ') {
            return None;
        }
        let kind = line[sp + 1];
        if !kind.is_ascii_graphic() {
            return None;
        }
        if !matches!(kind, b't' | b'T' | b'w' | b'W') {
            continue;
        }
        let mut addr = 0u64;
        for &c in &line[..sp] {
            let d = HEX[usize::from(c)];
            if d == NOT_HEX {
                return None;
            }
            addr = (addr << 4) | u64::from(d);
        }
        lowest = lowest.min(addr);
    }
    Some(lowest)
}

/// Every line of a kallsyms text as `str::lines` splits it, parsed as
/// [`parse_line`] parses it: (line index from 0, the line, its parse). A
/// line in /proc/kallsyms's own format is split and parsed in one pass over
/// its bytes (finding its end was a separate search before: a fifth of
/// `ktrace list`'s instructions, and a slow board parses ~200,000 lines at
/// every command's start).
pub fn parse_lines(
    text: &str,
) -> impl Iterator<
    Item = (
        usize,
        &str,
        std::result::Result<Option<Line<'_>>, &'static str>,
    ),
> {
    let mut pos = 0;
    let mut n = 0;
    std::iter::from_fn(move || {
        if pos >= text.len() {
            return None;
        }
        let (end, parsed) = match canonical_at(text, pos) {
            Some((l, end)) => (end, Some(l)),
            None => (text[pos..].find('\n').map_or(text.len(), |i| pos + i), None),
        };
        let raw = &text[pos..end];
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let parsed = match parsed {
            Some(l) => Ok(Some(l)),
            None => parse_line(line),
        };
        pos = end + 1;
        n += 1;
        Some((n - 1, line, parsed))
    })
}

/// Each byte's value as a hex digit, [`NOT_HEX`] for the others.
const HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = match c as u8 {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            d @ b'A'..=b'F' => d - b'A' + 10,
            _ => NOT_HEX,
        };
        c += 1;
    }
    t
};
const NOT_HEX: u8 = 0xff;

/// The index of the first byte at or after `from` that is at most `b' '`
/// (where every ASCII whitespace byte is), `b.len()` when there is none:
/// eight bytes a step (a name is about twenty bytes; a byte at a time was
/// a fifth of a table's parse). The first byte the word test flags is
/// always one (a borrow can flag only bytes above a true one).
fn next_space_or_control(b: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut i = from;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // bytes below 0x21 (a byte of 0x80 and above never flags)
        let flagged = w.wrapping_sub(ONES * 0x21) & !w & (ONES * 0x80);
        if flagged != 0 {
            return i + (flagged.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    // `i` never passes the end: a step is taken only over eight bytes there
    b[i..]
        .iter()
        .position(|&c| c <= b' ')
        .map_or(b.len(), |p| i + p)
}

/// [`parse_canonical`] of the line starting at `start`, finding its end on
/// the way: the line and the index of its `\n` (or of the text's end).
fn canonical_at(text: &str, start: usize) -> Option<(Line<'_>, usize)> {
    let b = text.as_bytes();
    let mut i = start;
    let mut addr = 0u64;
    // (17 digits are as refused as more: the scan stops there)
    let digits_end = b.len().min(start + 17);
    while i < digits_end {
        let d = HEX[usize::from(b[i])];
        if d == NOT_HEX {
            break;
        }
        addr = (addr << 4) | u64::from(d);
        i += 1;
    }
    if i == start || i - start > 16 || b.get(i) != Some(&b' ') {
        return None;
    }
    let kind = *b.get(i + 1)?;
    if !kind.is_ascii_graphic() || b.get(i + 2) != Some(&b' ') {
        return None;
    }
    let name_at = i + 3;
    let mut j = name_at;
    let mut space = false;
    loop {
        j = next_space_or_control(b, j);
        match b.get(j) {
            None | Some(b'\n' | b'\t') => break,
            Some(b' ') => space = true,
            // (`\r`, form feeds: the general parser decides)
            Some(&c) if c.is_ascii_whitespace() => return None,
            // another control byte is part of the name
            Some(_) => {}
        }
        j += 1;
    }
    let name = &text[name_at..j];
    if name.is_empty() {
        return None;
    }
    let kind = kind as char;
    if b.get(j) != Some(&b'\t') {
        // (a space is in a module's symbol names only: parse_canonical)
        return (!space).then_some((
            Line {
                addr,
                kind,
                name,
                module: None,
            },
            j,
        ));
    }
    let mut k = j + 1;
    while let Some(&c) = b.get(k) {
        if c == b'\n' {
            break;
        }
        if c.is_ascii_whitespace() {
            return None;
        }
        k += 1;
    }
    let module = text[j + 1..k].strip_prefix('[')?.strip_suffix(']')?;
    if module.is_empty() || name.starts_with(' ') {
        return None;
    }
    Some((
        Line {
            addr,
            kind,
            name,
            module: Some(module),
        },
        k,
    ))
}

/// Splits one line of kallsyms: `Ok(None)` for blank and `#` lines (the
/// kernel never prints them; they let fixtures carry the command that
/// captured them), `Err(reason)` for a line that is not `ADDR TYPE
/// NAME[\t[MODULE]]`. The one line parser of both [`Kallsyms::parse`] and
/// [`SymbolCounts::scan`].
pub fn parse_line(line: &str) -> std::result::Result<Option<Line<'_>>, &'static str> {
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    match parse_canonical(line) {
        Some(l) => Ok(Some(l)),
        None => parse_general(line).map(Some),
    }
}

/// Any line with the fields `ADDR TYPE NAME[\t[MODULE]]`, however spaced.
fn parse_general(line: &str) -> std::result::Result<Line<'_>, &'static str> {
    let (main, module) = match line.split_once('\t') {
        Some((main, rest)) => {
            let m = rest
                .trim()
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .ok_or("module is not in brackets")?;
            (main, Some(m))
        }
        None => (line, None),
    };
    let mut f = main.split_ascii_whitespace();
    let (Some(addr), Some(kind), Some(name), None) = (f.next(), f.next(), f.next(), f.next())
    else {
        return Err("expected ADDR TYPE NAME");
    };
    let addr = u64::from_str_radix(addr, 16).map_err(|_| "bad address")?;
    let mut kc = kind.chars();
    let (Some(kind), None) = (kc.next(), kc.next()) else {
        return Err("type is not one letter");
    };
    Ok(Line {
        addr,
        kind,
        name,
        module,
    })
}

/// The line exactly as `s_show` prints it (`%px %c %s` and, for a module,
/// `\t[%s]`), split without the general parser's searching: the table
/// of a running kernel has ~100k of these, and a slow board parses it on
/// every command. `None` for anything else (the general parser decides).
fn parse_canonical(line: &str) -> Option<Line<'_>> {
    canonical_at(line, 0)
        .filter(|&(_, end)| end == line.len())
        .map(|(l, _)| l)
}

/// How often each of a few names occurs in kallsyms (in all, and per
/// module), and which modules have symbols: what a live definition check
/// asks, counted in one pass without building the whole table (which costs
/// seconds on a slow board). Names not asked for are unknown (`None`).
/// Lines that do not parse are skipped, as the full parse would refuse them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolCounts {
    counts: HashMap<String, usize>,
    /// Bit n set when a wanted name is n bytes long (bit 63: 63 or more):
    /// most of ~100k lines are passed over on their length, unhashed.
    lengths: u64,
    in_module: HashMap<(String, String), usize>,
    modules: std::collections::HashSet<String>,
}

impl SymbolCounts {
    /// Counts the names in `wanted` in kallsyms `text`.
    pub fn scan<'w>(text: &str, wanted: impl IntoIterator<Item = &'w str>) -> Self {
        let mut c = Self::wanting(wanted);
        let mut last_module = None;
        for (_, _, parsed) in parse_lines(text) {
            let Ok(Some(l)) = parsed else {
                continue;
            };
            if l.module.is_some_and(is_pseudo_module) {
                continue;
            }
            // a module's symbols come together: look its name up once a run
            if let Some(m) = l.module
                && last_module != Some(m)
            {
                last_module = Some(m);
                if !c.modules.contains(m) {
                    c.modules.insert(m.to_string());
                }
            }
            c.add(l.name, l.module);
        }
        c
    }

    /// The same counts from a parsed table.
    pub fn from_table<'w>(table: &Kallsyms, wanted: impl IntoIterator<Item = &'w str>) -> Self {
        let mut c = Self::wanting(wanted);
        for s in &table.symbols {
            if s.module.as_deref().is_some_and(is_pseudo_module) {
                continue;
            }
            if let Some(m) = s.module.as_deref()
                && !c.modules.contains(m)
            {
                c.modules.insert(m.to_string());
            }
            c.add(&s.name, s.module.as_deref());
        }
        c
    }

    /// No symbol counted yet, `wanted` asked for.
    fn wanting<'w>(wanted: impl IntoIterator<Item = &'w str>) -> Self {
        let counts: HashMap<String, usize> =
            wanted.into_iter().map(|w| (w.to_string(), 0)).collect();
        let lengths = counts.keys().fold(0, |m, w| m | length_bit(w));
        SymbolCounts {
            counts,
            lengths,
            ..Default::default()
        }
    }

    fn add(&mut self, name: &str, module: Option<&str>) {
        if self.lengths & length_bit(name) == 0 {
            return;
        }
        if let Some(n) = self.counts.get_mut(name) {
            *n += 1;
            if let Some(m) = module {
                *self
                    .in_module
                    .entry((m.to_string(), name.to_string()))
                    .or_default() += 1;
            }
        }
    }

    /// How many symbols are named `name`; `None` when it was not asked for.
    pub fn count(&self, name: &str) -> Option<usize> {
        self.counts.get(name).copied()
    }

    /// The modules with a symbol named `name` (asked for), sorted.
    pub fn modules_of(&self, name: &str) -> Vec<&str> {
        let mut m: Vec<&str> = self
            .in_module
            .iter()
            .filter(|((_, n), c)| n == name && **c > 0)
            .map(|((m, _), _)| m.as_str())
            .collect();
        m.sort_unstable();
        m
    }

    /// Whether module `module` has symbol `name`: `None` when `name` was not
    /// asked for, `Some(None)` when the module has no symbols (not loaded).
    pub fn module_symbol(&self, module: &str, name: &str) -> Option<Option<bool>> {
        self.module_symbol_count(module, name)
            .map(|loaded| loaded.map(|n| n > 0))
    }

    /// How many symbols of module `module` are named `name`: `None` when
    /// `name` was not asked for, `Some(None)` when the module has no symbols
    /// (not loaded).
    pub fn module_symbol_count(&self, module: &str, name: &str) -> Option<Option<usize>> {
        self.counts.get(name)?;
        Some(self.modules.contains(module).then(|| {
            self.in_module
                .get(&(module.to_string(), name.to_string()))
                .copied()
                .unwrap_or(0)
        }))
    }
}

/// A name's bit in [`SymbolCounts`]'s length mask.
fn length_bit(name: &str) -> u64 {
    1 << name.len().min(63)
}

/// Reads and parses a kallsyms file (the only I/O in this module).
pub fn open(path: &std::path::Path) -> Result<Kallsyms> {
    Kallsyms::parse(read(path)?)
}

/// Reads a kallsyms file's text.
pub fn read(path: &std::path::Path) -> Result<String> {
    crate::read_table_text(path)
}

#[cfg(test)]
mod tests {
    /// The canonical parser as it was before `canonical_at`, the oracle of
    /// the generated tables: a line exactly as `s_show` prints it (`%px %c
    /// %s` and, for a module, `\t[%s]`), else `None`.
    fn oracle_canonical(line: &str) -> Option<Line<'_>> {
        let b = line.as_bytes();
        let sp = b.iter().position(|&c| c == b' ')?;
        let (kind, rest) = (*b.get(sp + 1)?, b.get(sp + 2..)?);
        if !kind.is_ascii_graphic() || rest.first() != Some(&b' ') || sp == 0 || sp > 16 {
            return None;
        }
        let mut addr = 0u64;
        for &c in &b[..sp] {
            addr = (addr << 4) | u64::from((c as char).to_digit(16)?);
        }
        let tail = &line[sp + 3..];
        let (name, module) = match tail.split_once('\t') {
            Some((name, m)) => (name, Some(m.strip_prefix('[')?.strip_suffix(']')?)),
            None => (tail, None),
        };
        let plain = |t: &str| !t.is_empty() && !t.bytes().any(|c| c.is_ascii_whitespace());
        // A module's name ends at the tab and may hold spaces: GNU as names its
        // local labels ".L0 " (FAKE_LABEL_NAME, trailing space), which riscv64
        // modules keep (6.12's autofs4: 862 of them). The kernel counts and
        // looks up ".L0 ", so `p .L0` finds nothing there.
        let module_name = |t: &str| {
            !t.is_empty()
                && !t.starts_with(' ')
                && !t.bytes().any(|c| c != b' ' && c.is_ascii_whitespace())
        };
        let name_ok = match module {
            Some(m) => module_name(name) && plain(m),
            None => plain(name),
        };
        if !name_ok {
            return None;
        }
        Some(Line {
            addr,
            kind: kind as char,
            name,
            module,
        })
    }

    /// The one-pass split and parse against `str::lines` and [`super::parse_line`]
    /// line by line, and the table [`super::Kallsyms::parse`] builds, over
    /// generated tables: canonical lines and their
    /// mutations (spaces and tabs in names and modules, `\r`, long and
    /// non-hex addresses, blank and `#` lines, a last line without `\n`).
    #[test]
    fn parse_lines_splits_and_parses_as_lines_and_parse_line() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let pieces = [
            "ffffffff81000000",
            "c0300000",
            "0",
            "ffffffffffffffff1",
            "g1",
            "",
            "FFFF8000",
        ];
        let kinds = ["T", "t", "d", "?", " ", "TT", ""];
        let names = [
            "vfs_read", ".L0 ", " x", "a b", "a\tb", "", "__pfx_x", "$x", "a\rb",
        ];
        let modules = [
            "", "\t[ext4]", "\t[]", "\t[a b]", "\t[bpf]", "\text4", "\t[m]\t", " [m]",
        ];
        let ends = ["\n", "\r\n", "\n\n", "\n#c\n", "\n \n"];
        let mut canonical = 0;
        for _ in 0..800 {
            let mut text = String::new();
            for _ in 0..next(12) {
                let pick = |a: &[&'static str], r: u64| a[r as usize % a.len()];
                let (a, k, n, m) = (
                    pick(&pieces, next(100)),
                    pick(&kinds, next(100)),
                    pick(&names, next(100)),
                    pick(&modules, next(100)),
                );
                // most lines as the kernel prints them
                if next(3) == 0 {
                    text.push_str(&format!(
                        "{a}{}{k}{}{n}{m}",
                        if next(9) == 0 { "  " } else { " " },
                        " "
                    ));
                } else {
                    text.push_str(&format!("{a} {} {n}{m}", &k[..k.len().min(1)]));
                }
                text.push_str(pick(&ends, next(100)));
            }
            if next(4) == 0 {
                text.push_str("ffffffff81000000 T last_without_newline");
            }
            let ours: Vec<_> = super::parse_lines(&text).collect();
            let theirs: Vec<_> = text
                .lines()
                .enumerate()
                .map(|(i, l)| (i, l, super::parse_line(l)))
                .collect();
            assert_eq!(ours, theirs, "{text:?}");
            for l in text.lines() {
                assert_eq!(super::parse_canonical(l), oracle_canonical(l), "{l:?}");
            }
            // the table holds the same fields, its names all slices of
            // one text (no copy per name)
            if ours.iter().all(|(_, _, p)| p.is_ok()) {
                let table = super::Kallsyms::parse(text.as_str()).unwrap();
                let lines: Vec<_> = ours
                    .iter()
                    .filter_map(|(_, _, p)| p.as_ref().ok().and_then(|l| *l))
                    .collect();
                assert_eq!(table.symbols().len(), lines.len(), "{text:?}");
                for (s, l) in table.symbols().iter().zip(&lines) {
                    let got = (s.addr, s.kind, &*s.name, s.module.as_deref());
                    assert_eq!(got, (l.addr, l.kind, l.name, l.module), "{text:?}");
                    assert!(s.name.shares_text(&table.symbols()[0].name));
                    assert!(s.module.as_ref().is_none_or(|m| m.shares_text(&s.name)));
                }
            }
            canonical += ours
                .iter()
                .filter(|(_, _, p)| matches!(p, Ok(Some(_))))
                .count();
        }
        assert!(canonical > 1000, "{canonical} lines parsed");
    }

    #[test]
    fn the_core_image_as_is_ksym_addr_places_it() {
        use super::Kallsyms;
        // without CONFIG_KALLSYMS_ALL (32-bit arm 6.12: `_stext`, no `_end`):
        // text and init text only; a module is loaded by its symbols
        let arm = Kallsyms::parse(
            "c0300000 T _stext\nc0848c90 T next_fn\nc0f00000 D _etext\n\
             c14003c0 T _sinittext\nc1490f08 T _einittext\nbf000000 t m_fn\t[m]\n",
        )
        .unwrap();
        assert!(!arm.lists_data());
        assert_eq!(arm.core_image_holds(0xc0848c90 + 0x10), Some(true));
        assert_eq!(arm.core_image_holds(0xc0f00000), Some(false));
        assert_eq!(arm.core_image_holds(0xc1400400), Some(true));
        assert_eq!(arm.core_image_holds(0xbf000000), Some(false));
        assert!(arm.lists_module("m") && !arm.lists_module("n") && !arm.lists_module("bpf"));
        // with it (a `d` symbol): the whole image, `_stext` to `_end`
        let all = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 T f\nffffffff82000000 d data\n\
             ffffffff83000000 B _end\n",
        )
        .unwrap();
        assert!(all.lists_data());
        assert_eq!(all.core_image_holds(0xffffffff82000010), Some(true));
        assert_eq!(all.core_image_holds(0xffffffff83000000), Some(false));
        // no bounds at all: not known
        let none = Kallsyms::parse("ffffffff81000100 T f\n").unwrap();
        assert_eq!(none.core_image_holds(0xffffffff81000100), None);
    }

    #[test]
    fn a_modules_mapping_symbols_are_no_functions() {
        use super::Kallsyms;
        // arm64 7.2 with autofs4 loaded (/proc/kallsyms, sorted)
        let text = "ffffc2ff9351d488 t autofs_expire_multi\t[autofs4]\n\
                    ffffc2ff9351d520 t $x\t[autofs4]\n\
                    ffffc2ff9351d528 t autofs_dev_ioctl_version\t[autofs4]\n\
                    ffffc2ff9351d600 t $d.12\t[autofs4]\n\
                    ffffc2ff9351d700 t $xrv64i2p1_m2p0\t[autofs4]\n\
                    ffffc2ff9351d780 t autofs_last\t[autofs4]\n\
                    ffff800080010000 T $x_core\n";
        let t = Kallsyms::parse(text).unwrap();
        let l = t.lookup(0xffffc2ff9351d520).unwrap();
        assert_eq!(
            (l.symbol.name.as_str(), l.offset),
            ("autofs_expire_multi", 0x98)
        );
        assert_eq!(t.extent(l.symbol), Some(0xa0));
        // found by name, as the kernel's lookup by name finds them
        assert_eq!(t.by_name("$x", Some("autofs4")).len(), 1);
        assert_eq!(t.by_name("$d.12", None).len(), 1);
        assert_eq!(
            t.lookup(0xffffc2ff9351d600).unwrap().symbol.name,
            "autofs_dev_ioctl_version"
        );
        // riscv64's longer mapping symbols (6.5 and later) are no functions
        // either; a core symbol is never one (vmlinux's table has none)
        let l = t.lookup(0xffffc2ff9351d700).unwrap();
        assert_eq!(
            (l.symbol.name.as_str(), l.offset),
            ("autofs_dev_ioctl_version", 0x1d8)
        );
        assert_eq!(t.lookup(0xffff800080010000).unwrap().symbol.name, "$x_core");
    }

    #[test]
    fn a_modules_local_label_keeps_its_trailing_space() {
        use super::{Kallsyms, SymbolCounts, parse_line};
        // riscv64 6.12 with autofs4 loaded: GNU as's ".L0 " labels; the
        // kernel answers `p .L0` with "Invalid probed address or symbol"
        let text = "ffffffff01000000 t autofs_mount\t[autofs4]\n\
                    ffffffff01000010 t .L0 \t[autofs4]\n\
                    ffffffff01000020 t .L0 \t[autofs4]\n\
                    ffffffff81000000 T vfs_read\n";
        let l = parse_line("ffffffff01000010 t .L0 \t[autofs4]")
            .unwrap()
            .unwrap();
        assert_eq!((l.name, l.module), (".L0 ", Some("autofs4")));
        let t = Kallsyms::parse(text).unwrap();
        assert_eq!(t.count_same(".L0", None), 0);
        assert_eq!(t.count_same(".L0 ", Some("autofs4")), 2);
        let c = SymbolCounts::scan(text, [".L0", ".L0 "]);
        assert_eq!(c.count(".L0"), Some(0));
        assert_eq!(c.module_symbol_count("autofs4", ".L0 "), Some(Some(2)));
        // a core line's trailing space is no part of its name
        let l = parse_line("ffffffff81000000 T vfs_read ").unwrap().unwrap();
        assert_eq!(l.name, "vfs_read");
    }

    #[test]
    fn lowest_text_answers_for_addresses_below_every_code_symbol() {
        use super::{Kallsyms, lowest_text};
        let text = "# cat /proc/kallsyms\n0000000000000000 A fixed_percpu_data\n\
                    0000000000001000 D cpu_number\nffffffff81000000 T _stext\n\
                    ffffffff81000010 t helper\nffffffff82000000 D data\n\
                    ffffffffc0000000 t mod_fn\t[m]\nffffffffa0000000 W weak\n";
        let low = lowest_text(text.as_bytes()).unwrap();
        assert_eq!(low, 0xffffffff81000000);
        // what the full table says of addresses below it: no code symbol
        let table = Kallsyms::parse(text).unwrap();
        for addr in [0, 0x1000, 0x401136, 0x7fff_ffff_f000, low - 1] {
            assert!(addr < low);
            assert!(table.lookup(addr).is_none_or(|l| !l.symbol.is_text()));
        }
        assert!(table.lookup(low).unwrap().symbol.is_text());
        // no code symbol at all; and lines only the full parse can read
        assert_eq!(lowest_text(b"0 A a\n10 D b\n"), Some(u64::MAX));
        assert_eq!(lowest_text(b""), Some(u64::MAX));
        assert_eq!(lowest_text(b"ffffffff81000000  T x\n"), None);
        assert_eq!(lowest_text(b"ffffffff81000000\tT x\n"), None);
        assert_eq!(lowest_text(b"ffffffff8100000g T x\n"), None);
        assert_eq!(
            lowest_text(b"ffffffff81000000 T x\r\n"),
            Some(0xffffffff81000000)
        );
    }

    #[test]
    fn counts_pass_over_other_lengths_only() {
        // names of 63 bytes and more share one bit of the length mask
        let long = "a".repeat(70);
        let longer = "a".repeat(80);
        let text = format!(
            "ffffffff81000000 T vfs_read\nffffffff81000010 T vfs_reaX\n\
             ffffffff81000020 T {long}\nffffffff81000030 T {longer}\n\
             ffffffffc0000000 t vfs_read\t[m]\nffffffffc0000010 t x\t[n]\n"
        );
        let c = SymbolCounts::scan(&text, ["vfs_read", long.as_str(), "x", "absent"]);
        assert_eq!(c.count("vfs_read"), Some(2));
        assert_eq!(c.count(&long), Some(1));
        assert_eq!(c.count("x"), Some(1));
        assert_eq!(c.count("absent"), Some(0));
        assert_eq!(c.count("vfs_reaX"), None);
        assert_eq!(c.modules_of("vfs_read"), ["m"]);
        assert_eq!(c.module_symbol("n", "x"), Some(Some(true)));
        let table = Kallsyms::parse(&text).unwrap();
        assert_eq!(
            SymbolCounts::from_table(&table, ["vfs_read", long.as_str(), "x", "absent"]),
            c
        );
    }

    #[test]
    fn module_runs_that_come_back_are_one_region() {
        // [bpf] programs and ftrace trampolines may sit between modules,
        // and a module's symbols may come in two runs: each region holds all
        // of its symbols, sorted by address, aliases in table order.
        let t = Kallsyms::parse(
            "ffffffff81000010 T b_core\nffffffff81000000 T a_core\n\
             ffffffffc0000100 t m2\t[m]\nffffffffc0001000 t bpf_x\t[bpf]\n\
             ffffffffc0000000 t m1\t[m]\nffffffffc0000000 t m1_alias\t[m]\n\
             ffffffff81000020 T c_core\n",
        )
        .unwrap();
        let m1 = &t.by_name("m1", Some("m"))[0];
        let names = |v: Vec<&KernelSymbol>| v.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(t.aliases(m1)), ["m1", "m1_alias"]);
        assert_eq!(t.extent(m1), Some(0x100));
        assert_eq!(
            t.lookup(0xffffffffc0000004).unwrap().to_kernel_string(),
            "m1+0x4/0x100 [m]"
        );
        assert_eq!(
            t.lookup(0xffffffff81000012).unwrap().to_kernel_string(),
            "b_core+0x2/0x10"
        );
        assert_eq!(
            t.lookup(0xffffffff81000004).unwrap().to_kernel_string(),
            "a_core+0x4/0x10"
        );
        // below the lowest symbol (a user-space address): none, at it: it
        assert!(t.lookup(0x401136).is_none());
        assert!(t.lookup(0xffffffff80ffffff).is_none());
        assert_eq!(
            t.lookup(0xffffffff81000000).unwrap().to_kernel_string(),
            "a_core+0x0/0x10"
        );
        assert_eq!(names(t.by_name("c_core", None)), ["c_core"]);
        assert!(t.has_module("m") && t.has_module("bpf") && !t.has_module("x"));
    }

    #[test]
    fn the_fast_split_agrees_with_the_general_one() {
        // Every line the fast path takes, the general parser splits alike;
        // the odd ones (extra spaces, no brackets, long addresses) are left
        // to the general parser, which answers as before.
        let lines = [
            "ffffffff81100000 T vfs_read",
            "ffffffffc0000000 t ext4_file_open\t[ext4]",
            "0000000000000000 T hidden",
            "c0300000 T _stext",
            "ffffffffc0000000 t bpf_prog_6deef7357e7b4530_sd_fw_egress\t[bpf]",
            "ffffffff81100000  T two_spaces",
            "ffffffff81100000 T name extra",
            "ffffffff81100000 T",
            "ffffffff81100000 T ",
            "ffffffff81100000 TT x",
            "fffffffff81100000 T too_long_address",
            "ffffffffg1100000 T bad_hex",
            "ffffffff81100000 T m\text4",
            "ffffffff81100000 T m\t[ext4",
            "ffffffff81100000 T m\t[ext 4]",
            "ffffffff81100000 T m\t [ext4] ",
            " ffffffff81100000 T lead",
            "ffffffff81100000 é x",
        ];
        for (n, l) in lines.iter().enumerate() {
            let general = parse_general(l);
            match parse_canonical(l) {
                Some(fast) => assert_eq!(Ok(fast), general, "{l:?}"),
                None => assert!(n >= 5, "{l:?}: the kernel's own form left to the slow path"),
            }
            // parse_line answers as the general parser always did
            assert_eq!(parse_line(l), general.map(Some), "{l:?}");
        }
        assert_eq!(
            parse_line("ffffffffc0000000 t f\t[ext4]")
                .unwrap()
                .unwrap()
                .module,
            Some("ext4")
        );
    }

    #[test]
    fn data_is_listed_only_with_kallsyms_all() {
        // 32-bit arm 6.12 (no CONFIG_KALLSYMS_ALL): text and section markers.
        let arm = Kallsyms::parse(
            "c0300000 T _stext\nc0f00000 D _etext\nc12b5a10 D __stop___tracepoints_ptrs\n",
        )
        .unwrap();
        assert!(!arm.lists_data());
        let x86 = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff82000000 d static_data\nffffffffc0000000 t f\t[m]\n",
        )
        .unwrap();
        assert!(x86.lists_data());
        let module_only = Kallsyms::parse("ffffffffc0000000 d modvar\t[m]\n").unwrap();
        assert!(!module_only.lists_data());
    }

    #[test]
    fn a_module_address_past_its_last_symbol_is_not_the_core_kernels() {
        // x86_64 7.2 with romfs and autofs4 loaded (tests/kernel/run
        // --script modexit.sh: the lines of /proc/kallsyms): the core kernel
        // lists `__init_scratch_*` 6 MiB past `_end`, and autofs4's text,
        // its highest memory since 6.4, ends in `exit_autofs_fs`
        let t = Kallsyms::parse(
            "ffffffff9e200000 T _stext\n\
             ffffffffa1430000 B _end\n\
             ffffffffa1600000 D __init_scratch_begin\n\
             ffffffffa1a00000 D __init_scratch_end\n\
             ffffffffc058f000 r autofs_ops\t[autofs4]\n\
             ffffffffc0602000 t autofs_mount\t[autofs4]\n\
             ffffffffc0607960 t exit_autofs_fs\t[autofs4]\n",
        )
        .unwrap();
        // the kernel's lookup places it nowhere: not in the core kernel
        // (is_ksym_addr() stops at `_end`), not past the module's last
        // symbol, whose size is unknown
        assert!(t.lookup(0xffff_ffff_c060_7961).is_none());
        let at = t.lookup(0xffff_ffff_c060_7960).unwrap();
        assert_eq!((at.symbol.name.as_str(), at.offset), ("exit_autofs_fs", 0));
        // inside the image, and `_end` itself (5.10's is_kernel()), as before
        let at = t.lookup(0xffff_ffff_a143_0000).unwrap();
        assert_eq!(at.symbol.name, "_end");
        assert_eq!(
            t.lookup(0xffff_ffff_a000_0000).unwrap().symbol.name,
            "_stext"
        );
        // past `_end` in the core kernel: nothing
        assert!(t.lookup(0xffff_ffff_a1a0_0010).is_none());
        // romfs's text (its last function `exit_romfs_fs`) lies above
        // autofs4's data and below autofs4's text, as the 7.2 guest had
        // them: past romfs's last function is not in autofs4's data
        let t = Kallsyms::parse(
            "ffffffff9e200000 T _stext\n\
             ffffffffa1430000 B _end\n\
             ffffffffc0244100 d romfs_fs_type\t[romfs]\n\
             ffffffffc0248000 d autofs_fs_type\t[autofs4]\n\
             ffffffffc0400000 t romfs_read_folio\t[romfs]\n\
             ffffffffc04011e0 t exit_romfs_fs\t[romfs]\n\
             ffffffffc0402000 t autofs_mount\t[autofs4]\n\
             ffffffffc0402100 t autofs_kill_sb\t[autofs4]\n",
        )
        .unwrap();
        assert!(t.lookup(0xffff_ffff_c040_11e4).is_none());
        let at = t.lookup(0xffff_ffff_c040_2010).unwrap();
        assert_eq!((at.symbol.name.as_str(), at.offset), ("autofs_mount", 0x10));
        let at = t.lookup(0xffff_ffff_c024_8010).unwrap();
        assert_eq!(
            (at.symbol.name.as_str(), at.offset),
            ("autofs_fs_type", 0x10)
        );
        // without `_end`, the core's last symbol still runs on
        let t = Kallsyms::parse("c0300000 T _stext\nc0400000 T last\n").unwrap();
        assert_eq!(t.lookup(0xc050_0000).unwrap().symbol.name, "last");
    }

    /// The first questions by name scan the table, later ones use the
    /// name index: the same symbols, in table order, either way.
    #[test]
    fn by_name_scans_and_index_agree() {
        let t = Kallsyms::parse(
            "c0100000 T _text\nc0200000 t dup\nc0300000 T vfs_read\nc0400000 t dup\n\
             bf000000 t dup\t[m]\nbf001000 t other\t[m]\n",
        )
        .unwrap();
        let queries = [
            ("dup", None),
            ("dup", Some("m")),
            ("vfs_read", None),
            ("nosuch", None),
            ("other", Some("m")),
            ("other", Some("x")),
        ];
        let ask = || -> Vec<Vec<u64>> {
            queries
                .iter()
                .map(|&(n, m)| t.by_name(n, m).iter().map(|s| s.addr).collect())
                .collect()
        };
        let scanned = ask();
        assert!(
            t.by_name.get().is_none(),
            "the first questions build no index"
        );
        for _ in 0..16 {
            t.by_name("_text", None);
        }
        assert!(t.by_name.get().is_some());
        assert_eq!(ask(), scanned);
        assert_eq!(scanned[0], [0xc020_0000, 0xc040_0000, 0xbf00_0000]);
        assert_eq!(scanned[1], [0xbf00_0000]);
        assert!(scanned[3].is_empty() && scanned[5].is_empty());
    }

    /// "Did you mean" from the shaped run is what it is from the whole
    /// table, for names near and far from a generated table's.
    #[test]
    fn shaped_runs_lose_no_suggestion() {
        let mut text = String::new();
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        let alphabet = b"abcdefgs_rtx01";
        let mut made = Vec::new();
        for i in 0..3000 {
            let len = 2 + next() % 12;
            let name: String = (0..len)
                .map(|_| alphabet[next() % alphabet.len()] as char)
                .collect();
            text.push_str(&format!("{:x} T {name}\n", 0xc000_0000u64 + i * 16));
            made.push(name);
        }
        let t = Kallsyms::parse(&text).unwrap();
        let all: Vec<&str> = made.iter().map(String::as_str).collect();
        for (k, m) in made.iter().enumerate().take(400) {
            // the name itself, one byte changed, one dropped, two swapped
            let mut b = m.clone().into_bytes();
            let j = next() % b.len();
            let wanted = match k % 4 {
                0 => m.clone(),
                1 => {
                    b[j] = alphabet[next() % alphabet.len()];
                    String::from_utf8(b).unwrap()
                }
                2 => {
                    b.remove(j);
                    String::from_utf8(b).unwrap()
                }
                _ => {
                    let n = b.len();
                    b.swap(j, (j + 1) % n);
                    String::from_utf8(b).unwrap()
                }
            };
            let shaped: Vec<String> = t.shaped_like(&wanted).map(|s| s.name.to_string()).collect();
            assert_eq!(
                ktrace_probe::similar::similar(&wanted, shaped.iter().map(String::as_str)),
                ktrace_probe::similar::similar(&wanted, all.iter().copied()),
                "{wanted}"
            );
        }
    }

    #[test]
    fn core_last_and_shaped_runs() {
        let t = Kallsyms::parse(
            "c0300000 T _stext\nc0400000 T vfs_read\nc0400100 t vfs_write\n\
             c0380000 T vfat_x\nbf000000 t vfs_mod\t[m]\nc0500000 D _etext\n",
        )
        .unwrap();
        // a module's symbol past the core (or before it) does not count
        assert_eq!(t.core_last(), Some(0xc050_0000));
        let names = |w: &str| t.shaped_like(w).map(|s| s.name.clone()).collect::<Vec<_>>();
        // the same first byte, a length within the limit (2 beyond 6 bytes),
        // kinds of byte that differ in at most twice the limit (`vfat_x`
        // lacks s, r, e and d and has a, t and x)
        assert_eq!(names("vfs_red"), ["vfs_mod", "vfs_read", "vfs_write"]);
        assert_eq!(names("vfs_reads"), ["vfs_read"]);
        assert_eq!(names("_stxt"), ["_etext", "_stext"]);
        assert!(names("x").is_empty());
        assert!(names("").is_empty());
        assert_eq!(Kallsyms::parse("").unwrap().core_last(), None);
    }

    use super::*;

    #[test]
    fn pseudo_modules_hold_no_names_a_lookup_sees() {
        let text = "c0100000 T _text\nc0200000 T vfs_read\nbf000000 t kprobe_optinsn_page\t[__builtin__kprobes]\n\
                    bf001000 t bpf_prog_1\t[bpf]\nbf002000 t romfs_fill\t[romfs]\n";
        let t = Kallsyms::parse(text).unwrap();
        assert_eq!(t.count_same("kprobe_optinsn_page", None), 0);
        assert_eq!(t.count_same("bpf_prog_1", None), 0);
        assert_eq!(t.count_same("romfs_fill", None), 1);
        let wanted = ["kprobe_optinsn_page", "romfs_fill", "vfs_read"];
        for c in [
            SymbolCounts::scan(text, wanted),
            SymbolCounts::from_table(&t, wanted),
        ] {
            assert_eq!(c.count("kprobe_optinsn_page"), Some(0));
            assert_eq!(c.count("vfs_read"), Some(1));
            // `__builtin__kprobes:` names no loaded module: the kernel defers it
            assert_eq!(
                c.module_symbol("__builtin__kprobes", "kprobe_optinsn_page"),
                Some(None)
            );
            assert_eq!(c.module_symbol("romfs", "romfs_fill"), Some(Some(true)));
        }
    }

    #[test]
    fn counting_mode_agrees_with_the_table() {
        // Lines as /proc/kallsyms prints them (6.1 x86_64 layout, module
        // symbols tab-separated with [MOD]).
        let text = "ffffffff81100000 T do_sys_openat2\nffffffff81200000 t dup\n\
                    ffffffff81200100 t dup\nffffffffc0000000 t ext4_file_open\t[ext4]\n\
                    ffffffffc0001000 t dup\t[ext4]\n";
        let wanted = ["do_sys_openat2", "jiffies", "ext4_file_open", "dup"];
        let c = SymbolCounts::scan(text, wanted);
        assert_eq!(
            c,
            SymbolCounts::from_table(&Kallsyms::parse(text).unwrap(), wanted)
        );
        assert_eq!(c.count("do_sys_openat2"), Some(1));
        assert_eq!(c.count("dup"), Some(3));
        assert_eq!(c.count("jiffies"), Some(0));
        assert_eq!(c.count("vfs_read"), None, "not asked for: unknown");
        assert_eq!(c.module_symbol("ext4", "ext4_file_open"), Some(Some(true)));
        assert_eq!(c.module_symbol("ext4", "dup"), Some(Some(true)));
        assert_eq!(c.module_symbol("ext4", "jiffies"), Some(Some(false)));
        assert_eq!(c.module_symbol("xfs", "dup"), Some(None));
        assert_eq!(c.modules_of("ext4_file_open"), vec!["ext4"]);
        assert_eq!(c.modules_of("dup"), vec!["ext4"]);
        assert!(c.modules_of("do_sys_openat2").is_empty());
        assert_eq!(c.module_symbol("ext4", "vfs_read"), None);
        // A line the full parse refuses is skipped by the count.
        let bad = format!("{text}bad line\n");
        assert!(Kallsyms::parse(&bad).is_err());
        assert_eq!(SymbolCounts::scan(&bad, wanted), c);
    }

    fn fixture(name: &str) -> Kallsyms {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).unwrap();
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        Kallsyms::parse(&body).unwrap()
    }

    #[test]
    fn sizes_are_distances_to_the_next_address() {
        let ks = fixture("kallsyms-6.18-x86_64-vfs.txt");
        let syms = ks.symbols();
        // Independently: walk the table in order and compare each symbol with
        // the next line having a higher address.
        for (i, s) in syms.iter().enumerate() {
            let next = syms[i + 1..].iter().find(|n| n.addr > s.addr);
            let l = ks.lookup(s.addr + 1).unwrap();
            match next {
                Some(n) if n.addr > s.addr + 1 => {
                    assert_eq!(l.symbol.addr, s.addr);
                    assert_eq!(l.size, Some(n.addr - s.addr), "{}", s.name);
                    assert_eq!(l.offset, 1);
                }
                Some(_) => {}
                None => assert_eq!(l.size, None),
            }
        }
    }

    #[test]
    fn prints_like_percent_ps() {
        let ks = fixture("kallsyms-6.18-x86_64-vfs.txt");
        let vfs = ks.by_name("vfs_read", None)[0].clone();
        let size = ks.extent(&vfs).unwrap();
        let l = ks.lookup(vfs.addr + 4).unwrap();
        assert_eq!(l.to_kernel_string(), format!("vfs_read+0x4/{size:#x}"));
        // %#lx of zero prints 0x0 in the kernel.
        let l = ks.lookup(vfs.addr).unwrap();
        assert_eq!(l.to_kernel_string(), format!("vfs_read+0x0/{size:#x}"));
    }

    #[test]
    fn aliases_print_the_first_in_table_order() {
        let ks = fixture("kallsyms-6.18-x86_64-dups.txt");
        let first = &ks.symbols()[0];
        let l = ks.lookup(first.addr + 3).unwrap();
        assert_eq!(l.symbol.name, first.name);
        assert_eq!(ks.by_name("_text", None)[0].addr, first.addr);
    }

    #[test]
    fn duplicate_names_are_counted() {
        let ks = fixture("kallsyms-6.18-x86_64-dups.txt");
        assert_eq!(ks.count_same("NF_HOOK.constprop.0", None), 3);
        assert_eq!(ks.count_same("PageHuge", None), 2);
        assert_eq!(ks.count_same("_stext", None), 1);
        assert_eq!(ks.count_same("nosuch", None), 0);
    }

    #[test]
    fn modules_are_their_own_regions() {
        // Module lines in the kernel's format (ADDR TYPE NAME\t[MOD]).
        let text = "ffffffff81000000 T _stext\n\
                    ffffffff81000100 T core_fn\n\
                    ffffffff82000000 B _end\n\
                    ffffffffc0001000 t mod_a\t[foo]\n\
                    ffffffffc0001000 t mod_a_alias\t[foo]\n\
                    ffffffffc0001040 t mod_b\t[foo]\n\
                    ffffffffc0002000 t bar_fn\t[bar]\n\
                    ffffffffc0002030 T bar_fn2\t[bar]\n\
                    ffffffffc0002060 T core_fn\t[bar]\n";
        let ks = Kallsyms::parse(text).unwrap();
        let l = ks.lookup(0xffffffffc0001010).unwrap();
        assert_eq!(l.to_kernel_string(), "mod_a+0x10/0x40 [foo]");
        assert_eq!(
            ks.lookup(0xffffffff81000104).unwrap().to_kernel_string(),
            "core_fn+0x4/0xffff00"
        );
        assert_eq!(ks.count_same("core_fn", None), 2);
        assert_eq!(ks.count_same("core_fn", Some("bar")), 1);
        assert!(ks.lookup(0x1000).is_none());
    }

    #[test]
    fn hidden_addresses_are_detected() {
        let ks = Kallsyms::parse("0000000000000000 T a\n0000000000000000 t b\n").unwrap();
        assert!(ks.addresses_hidden());
    }

    #[test]
    fn malformed_lines_error() {
        for bad in [
            "xyz T a",
            "ffff T",
            "ffff TT a",
            "ffff T a b",
            "ffff t a\tfoo",
        ] {
            assert!(Kallsyms::parse(bad).is_err(), "{bad:?}");
        }
    }
}
