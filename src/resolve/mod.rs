//! User probe specs → kernel probe definitions, for `ktrace trace`.
//!
//! Every definition the kernel accepts (kprobetrace.rst, uprobetracer.rst)
//! passes through unchanged. On top of that, ktrace accepts:
//!
//! - a bare place: `do_sys_openat2 dfd=%di` means `p do_sys_openat2 dfd=%di`;
//! - `SYM%return` (or `r SYM`): a return probe;
//! - `PATH:SYMBOL[+OFF]` and `LIB:SYMBOL[+OFF]` (`libc:getenv`): a uprobe,
//!   the symbol turned into the kernel's file offset by
//!   `ktrace_symbols::library` (ld.so.cache, or the maps of `-p PID`);
//! - kernel wildcards (`vfs_*`, `MOD:glob`): one probe per function that
//!   `ktrace_symbols::probeable` finds a kprobe event can take;
//! - `argN` (1-based) in arguments: the architecture's N-th integer argument
//!   register (`arg2` → `%si` on x86_64, `%x1` on arm64); `$argN` on uprobes,
//!   which the kernel lacks, likewise.
//!
//! It also provides [`LiveEnv`], `ktrace_probe::Environment` over the running
//! kernel, so each definition is checked before anything is written. This
//! module writes nothing to the kernel; it reads kallsyms, the kprobe
//! blacklist, ftrace's filter functions, ld.so.cache and ELF files.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ktrace_probe::{Arch, Environment, FileKind};
use ktrace_symbols::kallsyms::{self, Kallsyms};
use ktrace_symbols::probeable::{self, Exclusion, FtraceLocations, Rules};
use ktrace_symbols::{blacklist, glob};

/// Where ld.so.cache lives.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// `ktrace trace --help`: the conveniences, examples and exit codes.
pub const TRACE_HELP: &str = "\
Definitions (each checked by ktrace's copy of the kernel's parser before anything is written):
  p:EV SYM[+OFF] ARGS...     any kernel form works verbatim (p, r, rN, PATH:0xOFF, MOD:SYM, e:, f:, t:)
  SYM ARGS...                a bare symbol is an entry probe: 'do_sys_openat2 dfd=%di'
  SYM%return / r SYM         a return probe; rN:EV SYM for maxactive N
  PATH:SYMBOL[+OFF]          a uprobe on an ELF symbol (symtab or dynsym, PIE or not): '/bin/bash:readline'
  LIB:SYMBOL                 a uprobe in a library found through -p PID's maps or ld.so.cache: 'libc:getenv'
  GLOB / MOD:GLOB            one kprobe per function a kprobe event can take ('vfs_*'); the kprobe
                             blacklist, notrace and non-unique functions are left out and counted
  argN (N from 1)            the N-th integer argument register of this architecture
                             (x86_64: arg1=%di arg2=%si ...; arm64: arg1=%x0 ...); $argN too on uprobes

Examples:
  ktrace trace do_sys_openat2 dfd=arg1 'filename=+0(arg2):ustring'
  ktrace trace 'r16:openret do_sys_openat2%return' 'ret=$retval:s64' -d 5
  ktrace trace 'p:w do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32'   (arm64; %di on x86_64)
  ktrace trace 'do_sys_openat2 fn=+0(arg2):ustring' -f 'fn == \"/etc/hostname\"'
  ktrace trace 'vfs_*' -d 2 -n 100
  ktrace trace do_sys_openat2 --stack -n 5
  ktrace trace 'libc:getenv name=+0(arg1):string' -- /usr/bin/env true
  ktrace trace '/bin/bash:readline%return line=+0($retval):string' -p $$

Exit codes:
  0    done (duration, count, the command's exit, or Ctrl-C)
  1    an error: a rejected definition (with the kernel's message and a caret), a kernel refusal, I/O
  2    a usage error (bad flags)
  128+N  stopped by signal N other than SIGINT (SIGTERM: 143, SIGHUP: 129)
";

/// One user spec split into its parts (nothing resolved yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `p`, `r` or `rN`.
    pub kind: String,
    /// `EVENT` or `GROUP/EVENT`, when written.
    pub name: Option<String>,
    /// The probed place, `%return` removed.
    pub place: String,
    /// The fetch arguments, verbatim.
    pub args: Vec<String>,
}

/// What kind of place a spec names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A kernel place the kernel reads itself: `SYM[+OFF]`, `MOD:SYM`, `0xADDR`.
    Kernel,
    /// A kernel wildcard to expand.
    KernelGlob,
    /// A uprobe already in the kernel's `PATH:OFFSET` form.
    UserOffset,
    /// `PATH:SYMBOL` or `LIB:SYMBOL` to resolve.
    UserSymbol,
}

fn is_kind_token(k: &str) -> bool {
    k == "p" || (k.starts_with('r') && k[1..].chars().all(|c| c.is_ascii_digit()))
}

/// Splits one spec. `None` for definitions passed through untouched
/// (event probes `e:`, fprobes `f:`, tracepoint probes `t:`, removals `-:`).
pub fn split(spec: &str) -> anyhow::Result<Option<Spec>> {
    let mut words = spec.split_whitespace();
    let Some(first) = words.next() else {
        bail!("empty probe definition");
    };
    let (head, name) = match first.split_once(':') {
        Some((k, n)) if is_kind_token(k) => (Some(k), Some(n)),
        Some(("e" | "f" | "t" | "-", _)) => return Ok(None),
        _ if is_kind_token(first) => (Some(first), None),
        _ if matches!(first, "e" | "f" | "t") => return Ok(None),
        _ => (None, None),
    };
    let place = match head {
        Some(_) => words
            .next()
            .with_context(|| format!("{spec:?}: no probe place after {first:?}"))?,
        None => first,
    };
    let mut kind = head.unwrap_or("p").to_string();
    let place = match place.strip_suffix("%return") {
        Some(p) => {
            if kind == "p" {
                kind = "r".to_string();
            }
            p
        }
        None => place,
    };
    if place.is_empty() {
        bail!("{spec:?}: empty probe place");
    }
    if let Some(n) = name
        && n.is_empty()
    {
        bail!("{spec:?}: empty event name after ':'");
    }
    Ok(Some(Spec {
        kind,
        name: name.map(str::to_string),
        place: place.to_string(),
        args: words.map(str::to_string).collect(),
    }))
}

/// Classifies a place. `is_module` says whether a name is a loaded kernel
/// module (for `MOD:SYM` against `LIB:SYM`).
pub fn classify(place: &str, is_module: &dyn Fn(&str) -> bool) -> Place {
    match place.split_once(':') {
        Some((file, rest)) => {
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                Place::UserOffset
            } else if !file.contains('/') && is_module(file) {
                if glob::is_glob(rest) {
                    Place::KernelGlob
                } else {
                    Place::Kernel
                }
            } else {
                Place::UserSymbol
            }
        }
        None if glob::is_glob(place) => Place::KernelGlob,
        None => Place::Kernel,
    }
}

/// Replaces `argN` (1-based, not part of a longer name) with the N-th
/// argument register of `arch`; with `dollar` also `$argN`. The kernel's
/// auto name for an unnamed bare `argN` is kept by naming it `argN=`.
pub fn map_args(arg: &str, arch: Arch, dollar: bool) -> anyhow::Result<String> {
    let regs = arch.arg_registers();
    let (name, value) = match arg.split_once('=') {
        Some((n, v)) => (Some(n), v),
        None => (None, arg),
    };
    let bytes = value.as_bytes();
    let mut out = String::with_capacity(value.len());
    let mut i = 0;
    let mut changed = false;
    while i < value.len() {
        let rest = &value[i..];
        let prev = if i == 0 { None } else { Some(bytes[i - 1]) };
        let (skip, is_dollar) = if dollar && rest.starts_with("$arg") {
            (4, true)
        } else if rest.starts_with("arg") {
            (3, false)
        } else {
            (0, false)
        };
        let boundary = !prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == b'_' || p == b'$')
            || is_dollar && prev != Some(b'$');
        if skip > 0 && boundary {
            let digits: String = rest[skip..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            let after = rest[skip + digits.len()..].chars().next();
            let ends = !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if !digits.is_empty() && ends {
                let n: usize = digits.parse().unwrap_or(0);
                let reg = n
                    .checked_sub(1)
                    .and_then(|k| regs.get(k))
                    .with_context(|| {
                        format!(
                            "{arg:?}: arg{digits} is not one of the {} argument registers of {arch} (arg1..arg{})",
                            regs.len(),
                            regs.len()
                        )
                    })?;
                out.push('%');
                out.push_str(reg);
                i += skip + digits.len();
                changed = true;
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    Ok(match name {
        Some(n) => format!("{n}={out}"),
        None if changed && (value.starts_with("arg") || value.starts_with("$arg")) => {
            let auto = value.trim_start_matches('$');
            let auto: String = auto.split(':').next().unwrap_or(auto).to_string();
            if auto.chars().skip(3).all(|c| c.is_ascii_digit()) {
                format!("{auto}={out}")
            } else {
                out
            }
        }
        None => out,
    })
}

/// Whether a command-line word is a fetch argument rather than the start of
/// a definition: `NAME=...`, or `$...`, `%...`, `+...`, `@...` (no probe place
/// or definition head starts so).
fn is_arg_word(w: &str) -> bool {
    let first = w.split_whitespace().next().unwrap_or("");
    first.contains('=') || first.starts_with(['$', '%', '+', '@'])
}

/// Joins command-line words into definitions: a word that is a fetch
/// argument belongs to the definition before it, so
/// `ktrace trace do_sys_openat2 dfd=arg1` is one probe with one argument.
pub fn join_words(words: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for w in words {
        if let Some(c) = w.chars().find(|c| c.is_control()) {
            bail!(
                "{w:?} contains a newline or another control character ({c:?}); \
                 each definition must be one line, and nothing was written"
            );
        }
        if is_arg_word(w) {
            let Some(last) = out.last_mut() else {
                bail!("{w:?} looks like a probe argument, but no definition comes before it");
            };
            last.push(' ');
            last.push_str(w.trim());
        } else {
            out.push(w.trim().to_string());
        }
    }
    Ok(out)
}

/// Kernel symbol tables for wildcard expansion and live checks.
#[derive(Debug)]
pub struct KernelTables {
    /// /proc/kallsyms.
    pub kallsyms: Kallsyms,
    blacklist: Option<Vec<blacklist::BlacklistEntry>>,
    ftrace: Option<FtraceLocations>,
    notrace_refused: bool,
}

impl KernelTables {
    /// Reads the running kernel's tables (kallsyms, kprobe blacklist,
    /// available_filter_functions\[_addrs\] under `tracefs`).
    /// The blacklist and ftrace tables are read only `with_rules` (for
    /// wildcards): they are big, and a slow board pays seconds for them.
    pub fn load(tracefs: &Path, with_rules: bool) -> anyhow::Result<Self> {
        let kallsyms = kallsyms::open(Path::new("/proc/kallsyms"))?;
        let blacklist = with_rules
            .then(|| blacklist::open(Path::new("/sys/kernel/debug/kprobes/blacklist")).ok())
            .flatten();
        let ftrace = with_rules
            .then(|| {
                [
                    "available_filter_functions_addrs",
                    "available_filter_functions",
                ]
                .iter()
                .find_map(|f| std::fs::read_to_string(tracefs.join(f)).ok())
            })
            .flatten()
            .map(|t| FtraceLocations::parse(&t));
        Ok(Self {
            kallsyms,
            blacklist,
            ftrace,
            notrace_refused: !crate::cmd::list::kernel_allows_notrace(),
        })
    }

    fn rules(&self) -> Rules<'_> {
        Rules {
            blacklist: self.blacklist.as_deref(),
            ftrace: self.ftrace.as_ref(),
            notrace_refused: self.notrace_refused,
        }
    }

    /// Whether `name` is a module with symbols in kallsyms.
    pub fn is_module(&self, name: &str) -> bool {
        Path::new("/sys/module")
            .join(name)
            .join("sections")
            .exists()
            || self
                .kallsyms
                .symbols()
                .iter()
                .any(|s| s.module.as_deref() == Some(name))
    }
}

/// A resolved definition, ready for `Session::build`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The user's spec it came from.
    pub input: String,
    /// Kernel definition text (the group is replaced by the session's).
    pub definition: String,
}

/// What a resolution found besides the definitions.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The definitions, in order.
    pub defs: Vec<Resolved>,
    /// Notes for the user (skipped rules, excluded functions, resolutions).
    pub notes: Vec<String>,
}

/// Resolves user specs.
pub struct Resolver<'t> {
    /// Architecture of the running kernel.
    pub arch: Arch,
    /// `-p PID`: its maps find libraries first.
    pub pid: Option<u32>,
    /// ld.so.cache.
    pub ldcache: PathBuf,
    /// Kernel tables, when loaded.
    pub kernel: Option<&'t KernelTables>,
}

fn sanitize(s: &str) -> String {
    let mut n: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    n.truncate(60);
    n
}

impl Resolver<'_> {
    fn is_module(&self, name: &str) -> bool {
        match self.kernel {
            Some(k) => k.is_module(name),
            None => Path::new("/sys/module")
                .join(name)
                .join("sections")
                .exists(),
        }
    }

    /// Resolves every spec; the first failure stops with its reason.
    pub fn resolve(&self, specs: &[String]) -> anyhow::Result<Outcome> {
        let mut out = Outcome::default();
        for input in &join_words(specs)? {
            self.resolve_one(input, &mut out)?;
        }
        Ok(out)
    }

    fn resolve_one(&self, input: &str, out: &mut Outcome) -> anyhow::Result<()> {
        let Some(spec) = split(input)? else {
            out.defs.push(Resolved {
                input: input.to_string(),
                definition: input.trim().to_string(),
            });
            return Ok(());
        };
        let place = classify(&spec.place, &|m| self.is_module(m));
        let user = matches!(place, Place::UserOffset | Place::UserSymbol);
        let args = spec
            .args
            .iter()
            .map(|a| map_args(a, self.arch, user || !self.arch.has_arg_access()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let head = |name: Option<&str>| match name {
            Some(n) => format!("{}:{n}", spec.kind),
            None => spec.kind.clone(),
        };
        let line = |name: Option<&str>, place: &str| {
            let mut s = format!("{} {place}", head(name));
            for a in &args {
                s.push(' ');
                s.push_str(a);
            }
            s
        };
        match place {
            Place::Kernel | Place::UserOffset => out.defs.push(Resolved {
                input: input.to_string(),
                definition: line(spec.name.as_deref(), &spec.place),
            }),
            Place::UserSymbol => {
                let up = ktrace_symbols::library::resolve_user_probe(
                    &spec.place,
                    self.pid,
                    &self.ldcache,
                )
                .with_context(|| format!("cannot resolve {:?}", spec.place))?;
                let location = up.to_kernel_location();
                out.notes.push(format!(
                    "{} -> {location} ({} at {:#x})",
                    spec.place, up.target.symbol.name, up.target.vaddr
                ));
                let auto = format!(
                    "{}_{}",
                    &spec.kind[..1],
                    sanitize(spec.place.split_once(':').map_or("", |(_, s)| s))
                );
                let name = spec.name.clone().unwrap_or(auto);
                out.defs.push(Resolved {
                    input: input.to_string(),
                    definition: line(Some(&name), &location),
                });
            }
            Place::KernelGlob => {
                if spec.name.is_some() {
                    bail!(
                        "{input:?}: a wildcard makes one event per function; leave out the event name"
                    );
                }
                let k = self
                    .kernel
                    .context("kernel symbols are needed to expand a wildcard")?;
                let exp = probeable::expand(&k.kallsyms, &k.rules(), &spec.place);
                for r in &exp.skipped_rules {
                    out.notes.push(format!("rule not checked: {r}"));
                }
                let count =
                    |f: fn(&Exclusion) -> bool| exp.excluded.iter().filter(|(_, w)| f(w)).count();
                out.notes.push(format!(
                    "{:?}: {} functions; left out {} blacklisted, {} notrace, {} not unique, {} preambles",
                    spec.place,
                    exp.accepted.len(),
                    count(|w| matches!(w, Exclusion::Blacklisted(_))),
                    count(|w| matches!(w, Exclusion::Notrace)),
                    count(|w| matches!(w, Exclusion::NotUnique(_))),
                    count(|w| matches!(w, Exclusion::Preamble)),
                ));
                if exp.accepted.is_empty() {
                    bail!(
                        "{:?} matches no function a kprobe can take (see `ktrace list {:?} --verbose`)",
                        spec.place,
                        spec.place
                    );
                }
                for sym in exp.accepted {
                    let place = match &sym.module {
                        Some(m) => format!("{m}:{}", sym.name),
                        None => sym.name.clone(),
                    };
                    out.defs.push(Resolved {
                        input: input.to_string(),
                        definition: line(None, &place),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether a spec needs the kernel's symbol tables: a kprobe (a place
/// without `/` and without `:`, or `MOD:SYM` of a loaded module).
pub fn needs_kernel(spec: &str) -> bool {
    match split(spec) {
        Ok(Some(s)) => match s.place.split_once(':') {
            None => true,
            Some((f, _)) => {
                !f.contains('/') && Path::new("/sys/module").join(f).join("sections").exists()
            }
        },
        _ => false,
    }
}

/// How often each of a few kallsyms names occurs (in all, and per module),
/// and which modules are loaded: what the live check asks, read in one pass
/// over /proc/kallsyms without building the whole symbol table (which costs
/// seconds on a slow board). Names not asked for are unknown (`None`).
#[derive(Debug, Default)]
pub struct SymbolCounts {
    counts: HashMap<String, usize>,
    in_module: HashMap<(String, String), usize>,
    modules: HashSet<String>,
}

impl SymbolCounts {
    /// Counts `wanted` in kallsyms text (`ADDR TYPE NAME [\[MOD\]]` lines).
    pub fn scan(text: &str, wanted: &HashSet<String>) -> Self {
        let mut c = SymbolCounts {
            counts: wanted.iter().map(|w| (w.clone(), 0)).collect(),
            ..Default::default()
        };
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(_), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let module = f
                .next()
                .and_then(|m| m.strip_prefix('['))
                .and_then(|m| m.strip_suffix(']'));
            if let Some(m) = module
                && !c.modules.contains(m)
            {
                c.modules.insert(m.to_string());
            }
            if let Some(n) = c.counts.get_mut(name) {
                *n += 1;
                if let Some(m) = module {
                    *c.in_module
                        .entry((m.to_string(), name.to_string()))
                        .or_default() += 1;
                }
            }
        }
        c
    }

    /// Reads /proc/kallsyms for `wanted`.
    pub fn open(wanted: &HashSet<String>) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string("/proc/kallsyms").context("cannot read /proc/kallsyms")?;
        Ok(Self::scan(&text, wanted))
    }
}

/// The kernel symbol names definitions may make the checker ask about: each
/// word's leading name (the probed place, `MOD:SYM` split) and every `@SYM`.
pub fn wanted_symbols<'a>(defs: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let mut out = HashSet::new();
    for d in defs {
        for w in d.split_whitespace() {
            let place = w.trim_end_matches("%return");
            let place = place.rsplit_once(':').map_or(place, |(_, s)| s);
            let name: String = place.chars().take_while(|&c| is_name(c)).collect();
            if !name.is_empty() {
                out.insert(name);
            }
            for (i, _) in w.match_indices('@') {
                let name: String = w[i + 1..].chars().take_while(|&c| is_name(c)).collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

/// `ktrace_probe::Environment` over the running kernel: kallsyms counts for
/// symbols, the file system for uprobe files, tracefs for events.
pub struct LiveEnv<'a> {
    /// Kernel symbol counts, when read (kprobe checks are skipped otherwise).
    pub symbols: Option<&'a SymbolCounts>,
    /// The tracefs mount.
    pub tracefs: &'a Path,
}

impl Environment for LiveEnv<'_> {
    fn symbol_count(&self, name: &str) -> Option<usize> {
        self.symbols?.counts.get(name).copied()
    }

    fn module_symbol(&self, module: &str, name: &str) -> Option<Option<bool>> {
        let s = self.symbols?;
        s.counts.get(name)?;
        Some(s.modules.contains(module).then(|| {
            s.in_module
                .get(&(module.to_string(), name.to_string()))
                .is_some_and(|&n| n > 0)
        }))
    }

    fn file_kind(&self, path: &str) -> Option<FileKind> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Some(FileKind::Regular),
            Ok(_) => Some(FileKind::Other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(FileKind::Missing),
            Err(_) => None,
        }
    }

    fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
        let events = self.tracefs.join("events");
        events
            .is_dir()
            .then(|| events.join(group).join(event).is_dir())
    }

    fn event_fields(&self, system: &str, event: &str) -> Option<Option<Vec<String>>> {
        let dir = self.tracefs.join("events").join(system).join(event);
        if !dir.is_dir() {
            return Some(None);
        }
        let text = std::fs::read_to_string(dir.join("format")).ok()?;
        Some(Some(format_fields(&text)))
    }
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

/// The check target for the running kernel.
pub fn live_target(arch: Arch) -> ktrace_probe::Target {
    let mut t = ktrace_probe::Target::new(arch);
    if let Some(v) = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| r.trim().parse().ok())
    {
        t.kernel = v;
    }
    t.possible_cpus = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| possible_cpus(s.trim()));
    t
}

/// Counts the CPUs in a kernel CPU list (`0-3,5`).
pub fn possible_cpus(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<u32>().ok()?.checked_sub(a.parse().ok()?)? + 1,
            None => {
                part.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// Renders a rejected check like the kernel's error_log: the command, a
/// caret under the offending byte, the message and any hint.
pub fn rejection_text(input: &str, e: &ktrace_probe::ProbeError) -> String {
    let mut s = format!("definition rejected before anything was written: {input}");
    if let Some((cmd, caret)) = e.caret_lines() {
        s.push_str(&format!("\n  {cmd}\n  {caret}"));
    }
    match e.subsystem {
        Some(sub) => s.push_str(&format!("\n  {sub}: error: {}", e.message)),
        None => s.push_str(&format!("\n  error: {}", e.message)),
    }
    if let Some(h) = &e.hint {
        s.push_str(&format!("\n  hint: {h}"));
    }
    s
}

/// `ktrace trace`'s definition step: resolves the user's specs, names them
/// into the session's group (`Session::build`) and checks every resulting
/// line with ktrace-probe against the live kernel. Nothing is written; the
/// first rejection is returned with its caret.
pub fn build(
    sess: &crate::session::Session,
    specs: &[String],
    pid: Option<u32>,
    tracefs: &Path,
) -> anyhow::Result<Vec<crate::session::Probe>> {
    let arch = Arch::native().context("unknown machine architecture")?;
    // The whole symbol table only for wildcards; the checks need counts of
    // a few names, read in one cheap pass below.
    let kprobes = specs.iter().any(|s| needs_kernel(s));
    let globs = join_words(specs)?.iter().any(|s| {
        split(s).ok().flatten().is_some_and(|sp| {
            classify(&sp.place, &|m| {
                Path::new("/sys/module").join(m).join("sections").exists()
            }) == Place::KernelGlob
        })
    });
    let tables = if globs {
        Some(KernelTables::load(tracefs, true)?)
    } else {
        None
    };
    let resolver = Resolver {
        arch,
        pid,
        ldcache: PathBuf::from(LD_SO_CACHE),
        kernel: tables.as_ref(),
    };
    let outcome = resolver.resolve(specs)?;
    for n in &outcome.notes {
        eprintln!("ktrace: {n}");
    }
    let defs: Vec<String> = outcome.defs.iter().map(|d| d.definition.clone()).collect();
    let probes = sess.build(&defs)?;
    let counts = match kprobes || globs {
        true => Some(SymbolCounts::open(&wanted_symbols(
            probes.iter().map(|p| p.definition.as_str()),
        ))?),
        false => None,
    };
    let env = LiveEnv {
        symbols: counts.as_ref(),
        tracefs,
    };
    let target = live_target(arch);
    for (p, r) in probes.iter().zip(&outcome.defs) {
        let checked = ktrace_probe::check_line(&p.definition, target, &env);
        if let Err(e) = &checked.definition {
            bail!("{}", rejection_text(&r.input, e));
        }
    }
    Ok(probes)
}

/// Creates the probes, in chunks with a progress line when there are many
/// and stderr is a terminal.
pub fn create(
    sess: &mut crate::session::Session,
    probes: Vec<crate::session::Probe>,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    const CHUNK: usize = 100;
    let total = probes.len();
    if total <= CHUNK || !std::io::stderr().is_terminal() {
        return sess.create(probes);
    }
    let mut done = 0;
    let mut rest = probes;
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(CHUNK));
        done += rest.len();
        sess.create(rest)?;
        eprint!("\rktrace: created {done}/{total} probes");
        rest = tail;
    }
    eprintln!();
    Ok(())
}

/// The trigger text for `--stack`. Always with a condition: the kernel
/// calls a trigger without one before it applies the pid lists
/// (set_event_pid, set_event_notrace_pid), so stacks would come from every
/// task, ktrace's own included; a conditional trigger runs on the committed
/// record only, after the event, and with the event's own filter it keeps
/// exactly the stacks of the events shown.
pub fn stack_trigger(filter: Option<&str>) -> String {
    match filter.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => format!("stacktrace if {f}"),
        None => "stacktrace if common_pid >= 0".to_string(),
    }
}

/// `--stack`: a `stacktrace` trigger on each kernel probe (ftrace then
/// records a `kernel_stack` event after each hit), and the instance option
/// `userstacktrace` when there are user probes (a `user_stack` event after
/// each event of the instance). A kernel without user stack support says
/// so and tracing goes on without user stacks.
pub fn enable_stacks(
    sess: &crate::session::Session,
    inst: &ktrace_tracefs::Instance,
    filter: Option<&str>,
) -> anyhow::Result<()> {
    use ktrace_tracefs::ProbeKind;
    let trigger = stack_trigger(filter);
    let mut user = false;
    for p in sess.probes() {
        match p.kind {
            ProbeKind::Kprobe => inst
                .add_trigger(sess.name(), &p.event, &trigger)
                .with_context(|| format!("{trigger:?} trigger on {}", p.event))?,
            ProbeKind::Uprobe => user = true,
        }
    }
    if user {
        if !inst.dir().join("options/userstacktrace").exists() {
            eprintln!(
                "ktrace: note: this kernel records no user stacks (no options/userstacktrace: \
                 built without CONFIG_USER_STACKTRACE_SUPPORT); uprobe events come without stacks"
            );
        } else if let Err(e) = inst.set_option("userstacktrace", true) {
            eprintln!("ktrace: note: user stacks unavailable: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_table() {
        for (spec, want) in [
            ("do_sys_openat2", Some(("p", None, "do_sys_openat2", 0))),
            (
                "do_sys_openat2%return $retval",
                Some(("r", None, "do_sys_openat2", 1)),
            ),
            (
                "r16:ev do_sys_openat2%return",
                Some(("r16", Some("ev"), "do_sys_openat2", 0)),
            ),
            (
                "p:g/ev vfs_read+4 a=%di b=%si",
                Some(("p", Some("g/ev"), "vfs_read+4", 2)),
            ),
            ("r vfs_read", Some(("r", None, "vfs_read", 0))),
            ("libc:getenv%return", Some(("r", None, "libc:getenv", 0))),
            ("/bin/bash:0x4a20", Some(("p", None, "/bin/bash:0x4a20", 0))),
            ("e:ev sched/sched_switch", None),
            ("-:ev", None),
            ("t sched_switch", None),
        ] {
            let got = split(spec).unwrap();
            let got = got.as_ref().map(|s| {
                (
                    s.kind.as_str(),
                    s.name.as_deref(),
                    s.place.as_str(),
                    s.args.len(),
                )
            });
            assert_eq!(got, want, "{spec}");
        }
        for bad in ["", "p", "p: vfs_read", "%return"] {
            assert!(split(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn words_join_into_definitions() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            join_words(&w(&[
                "do_sys_openat2",
                "dfd=arg1",
                "filename=+0(arg2):ustring",
                "r vfs_read",
                "$retval",
                "p:x 0xffffffff81000000",
                "%di",
                "+0(%si):u32",
                "@jiffies",
            ]))
            .unwrap(),
            [
                "do_sys_openat2 dfd=arg1 filename=+0(arg2):ustring",
                "r vfs_read $retval",
                "p:x 0xffffffff81000000 %di +0(%si):u32 @jiffies",
            ]
        );
        assert!(join_words(&w(&["x=%di", "vfs_read"])).is_err());
    }

    #[test]
    fn classify_table() {
        let module = |m: &str| m == "ext4";
        for (place, want) in [
            ("vfs_read", Place::Kernel),
            ("vfs_read+0x10", Place::Kernel),
            ("0xffffffff81000000", Place::Kernel),
            ("vfs_*", Place::KernelGlob),
            ("ext4:ext4_file_open", Place::Kernel),
            ("ext4:ext4_*", Place::KernelGlob),
            ("/bin/bash:0x9a4f0", Place::UserOffset),
            ("/bin/bash:123(0x10)", Place::UserOffset),
            ("/bin/bash:readline", Place::UserSymbol),
            ("libc:getenv", Place::UserSymbol),
            ("./a.out:main+4", Place::UserSymbol),
        ] {
            assert_eq!(classify(place, &module), want, "{place}");
        }
    }

    #[test]
    fn map_args_table() {
        for (arch, arg, dollar, want) in [
            (Arch::X86_64, "dfd=arg1", false, "dfd=%di"),
            (
                Arch::X86_64,
                "filename=+0(arg2):ustring",
                false,
                "filename=+0(%si):ustring",
            ),
            (
                Arch::Arm64,
                "filename=+0(arg2):ustring",
                false,
                "filename=+0(%x1):ustring",
            ),
            (
                Arch::Arm64,
                "wo_type=+0(arg1):u32",
                false,
                "wo_type=+0(%x0):u32",
            ),
            (Arch::X86_64, "arg3", false, "arg3=%dx"),
            (Arch::X86_64, "arg3:x32", false, "arg3=%dx:x32"),
            (Arch::X86_64, "x=$arg1", false, "x=$arg1"),
            (Arch::X86_64, "x=$arg1", true, "x=%di"),
            (Arch::X86_64, "$arg2", true, "arg2=%si"),
            (Arch::X86_64, "argv=%di", false, "argv=%di"),
            (Arch::X86_64, "x=@myarg1", false, "x=@myarg1"),
            (Arch::X86_64, "x=+8(%sp):u64", false, "x=+8(%sp):u64"),
            (Arch::X86_64, "x=+0(arg1):string", true, "x=+0(%di):string"),
            (Arch::X86_64, "x=arg10a", false, "x=arg10a"),
            (Arch::I386, "x=arg3", false, "x=%cx"),
        ] {
            assert_eq!(map_args(arg, arch, dollar).unwrap(), want, "{arch} {arg}");
        }
        let e = map_args("x=arg7", Arch::X86_64, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("arg1..arg6"), "{e}");
        assert!(map_args("x=arg0", Arch::X86_64, false).is_err());
    }

    #[test]
    fn resolver_passes_kernel_forms_and_maps_args() {
        let r = Resolver {
            arch: Arch::Arm64,
            pid: None,
            ldcache: PathBuf::from(LD_SO_CACHE),
            kernel: None,
        };
        let out = r
            .resolve(&[
                "p:myev do_sys_openat2 dfd=%x0".to_string(),
                "do_sys_openat2 dfd=arg1 filename=+0(arg2):ustring".to_string(),
                "do_sys_openat2%return $retval".to_string(),
                "p:w do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32".to_string(),
                "r8 do_sys_openat2".to_string(),
                "e:ev sched/sched_switch".to_string(),
            ])
            .unwrap();
        let defs: Vec<&str> = out.defs.iter().map(|d| d.definition.as_str()).collect();
        assert_eq!(
            defs,
            [
                "p:myev do_sys_openat2 dfd=%x0",
                "p do_sys_openat2 dfd=%x0 filename=+0(%x1):ustring",
                "r do_sys_openat2 $retval",
                "p:w do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32",
                "r8 do_sys_openat2",
                "e:ev sched/sched_switch",
            ]
        );
        // Every rewritten line is one the kernel's language accepts.
        for d in &defs[..5] {
            let c = ktrace_probe::check_line(
                d,
                ktrace_probe::Target::new(Arch::Arm64),
                &ktrace_probe::Offline,
            );
            assert!(c.accepted(), "{d}: {:?}", c.definition);
        }
        let e = r.resolve(&["vfs_*".to_string()]).unwrap_err().to_string();
        assert!(e.contains("kernel symbols"), "{e}");
    }

    #[test]
    fn wildcard_expansion_uses_probeable_rules() {
        // A kallsyms excerpt of Debian's 6.1 x86_64 kernel layout (names and
        // types as /proc/kallsyms prints them).
        let ks = Kallsyms::parse(
            "ffffffff81100000 T vfs_read\nffffffff81100100 T vfs_write\n\
             ffffffff81100200 t __pfx_vfs_open\nffffffff81100210 T vfs_open\n\
             ffffffff81200000 D vfs_data\nffffffff81300000 t dup\nffffffff81300010 t dup\n",
        )
        .unwrap();
        let tables = KernelTables {
            kallsyms: ks,
            blacklist: None,
            ftrace: None,
            notrace_refused: true,
        };
        let r = Resolver {
            arch: Arch::X86_64,
            pid: None,
            ldcache: PathBuf::from(LD_SO_CACHE),
            kernel: Some(&tables),
        };
        let out = r
            .resolve(&["vfs_* a=arg1".to_string(), "r d*".to_string()])
            .unwrap_err();
        assert!(
            out.to_string().contains("\"d*\" matches no function"),
            "{out}"
        );
        let out = r.resolve(&["vfs_* a=arg1".to_string()]).unwrap();
        let defs: Vec<&str> = out.defs.iter().map(|d| d.definition.as_str()).collect();
        assert_eq!(
            defs,
            ["p vfs_read a=%di", "p vfs_write a=%di", "p vfs_open a=%di"]
        );
        assert!(
            out.notes.iter().any(|n| n.contains("blacklist")),
            "{:?}",
            out.notes
        );
        assert!(r.resolve(&["p:x vfs_*".to_string()]).is_err());
    }

    #[test]
    fn stack_triggers_are_conditional() {
        assert_eq!(stack_trigger(None), "stacktrace if common_pid >= 0");
        assert_eq!(stack_trigger(Some(" ")), "stacktrace if common_pid >= 0");
        assert_eq!(
            stack_trigger(Some("fn == \"/etc/hostname\"")),
            "stacktrace if fn == \"/etc/hostname\""
        );
    }

    #[test]
    fn symbol_counts_from_one_kallsyms_pass() {
        // Lines as /proc/kallsyms prints them (6.1 x86_64 layout, module
        // symbols tab-separated with [MOD]).
        let text = "ffffffff81100000 T do_sys_openat2\nffffffff81200000 t dup\n\
                    ffffffff81200100 t dup\nffffffffc0000000 t ext4_file_open\t[ext4]\n\
                    ffffffffc0001000 t dup\t[ext4]\nbad line\n";
        let wanted = wanted_symbols([
            "p:g/e do_sys_openat2+4 x=@jiffies",
            "r16 ext4:ext4_file_open%return",
            "p dup",
        ]);
        for w in [
            "do_sys_openat2",
            "jiffies",
            "ext4_file_open",
            "dup",
            "g",
            "r16",
        ] {
            assert!(wanted.contains(w), "{w}: {wanted:?}");
        }
        let c = SymbolCounts::scan(text, &wanted);
        let env = LiveEnv {
            symbols: Some(&c),
            tracefs: Path::new("/nonexistent"),
        };
        assert_eq!(env.symbol_count("do_sys_openat2"), Some(1));
        assert_eq!(env.symbol_count("dup"), Some(3));
        assert_eq!(env.symbol_count("jiffies"), Some(0));
        assert_eq!(env.symbol_count("vfs_read"), None, "not asked for: unknown");
        assert_eq!(
            env.module_symbol("ext4", "ext4_file_open"),
            Some(Some(true))
        );
        assert_eq!(env.module_symbol("ext4", "dup"), Some(Some(true)));
        assert_eq!(env.module_symbol("ext4", "jiffies"), Some(Some(false)));
        assert_eq!(env.module_symbol("xfs", "dup"), Some(None));
        // The checker turns a zero count into the kernel's rejection.
        let t = ktrace_probe::Target::new(Arch::X86_64);
        assert!(ktrace_probe::check_line("p do_sys_openat2", t, &env).accepted());
        assert!(!ktrace_probe::check_line("p jiffies", t, &env).accepted());
    }

    #[test]
    fn possible_cpu_lists() {
        assert_eq!(possible_cpus("0-3"), Some(4));
        assert_eq!(possible_cpus("0"), Some(1));
        assert_eq!(possible_cpus("0-1,4-5,7"), Some(5));
        assert_eq!(possible_cpus("x"), None);
        assert_eq!(possible_cpus("3-1"), None);
    }

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
}
