//! The convenience syntax of `ktrace trace`: user specs → definitions in the
//! kernel's own language, ready to be checked once by ktrace-probe.
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
//!   which the kernel lacks, likewise. An untyped `argN` at a kernel
//!   function's entry takes its parameter's integer type from BTF
//!   (`dfd=arg1` → `dfd=%di:s32`).
//!
//! A spec is split into its words here (the one reading of the user's text);
//! what comes out is kernel syntax for ktrace-probe's parser, plus the
//! kernel symbol names the check will ask about. It writes nothing and does
//! not check the kernel's language; it reads ld.so.cache, ELF files and the
//! kernel view (for wildcards and module names).

use anyhow::{Context, bail};
use ktrace_probe::Arch;
use ktrace_symbols::KernelView;
use ktrace_symbols::glob;
use ktrace_symbols::probeable::{self, Exclusion};
use std::path::{Path, PathBuf};

/// Where ld.so.cache lives.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";

/// `ktrace trace --help`: the conveniences, examples and exit codes.
pub const TRACE_HELP: &str = "\
Definitions (each checked by ktrace's copy of the kernel's parser before anything is written):
  p:EV SYM[+OFF] ARGS...     the kernel's forms work verbatim (p, r, rN, PATH:0xOFF, MOD:SYM, e:);
                             fprobes and tracepoint probes (f:, t:) are not traced (`ktrace check` reads them)
  SYM ARGS...                a bare symbol is an entry probe: 'do_sys_openat2 dfd=%di'
  SYM%return / r SYM         a return probe; rN:EV SYM for maxactive N
  PATH:SYMBOL[+OFF]          a uprobe on an ELF symbol (symtab or dynsym, PIE or not): '/bin/bash:readline'
  LIB:SYMBOL                 a uprobe in a library found through -p PID's maps or ld.so.cache: 'libc:getenv'
  GLOB / MOD:GLOB            one kprobe per function a kprobe event can take ('vfs_*'); the kprobe
                             blacklist, notrace and non-unique functions are left out and counted
  argN (N from 1)            the N-th integer argument register of this architecture
                             (x86_64: arg1=%di arg2=%si ...; arm64: arg1=%x0 ...); $argN too on uprobes;
                             untyped at a kernel function's entry, typed from BTF (int dfd: -100)

Examples:
  ktrace trace do_sys_openat2 dfd=arg1 'filename=+0(arg2):ustring'
  ktrace trace 'r16:openret do_sys_openat2%return' 'ret=$retval:s64' -d 5
  ktrace trace 'p:w do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32'   (arm64; %di on x86_64)
  ktrace trace 'do_sys_openat2 fn=+0(arg2):ustring' -f 'fn == \"/etc/hostname\"'
  ktrace trace 'vfs_*' -d 2 -n 100
  ktrace trace do_sys_openat2 --stack -n 5
  ktrace trace 'libc:getenv name=+0(arg1):string' -- /usr/bin/env true
  ktrace trace '/bin/bash:readline%return line=+0($retval):string' -p $$

The summary at the end, one line per probe:
  hits     every hit of the probe by any task, ktrace's own included, before filters and pid lists
  misses   kretprobe instances that were not free (maxactive too low); - where the kernel keeps none
  shown    the events written

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

impl Spec {
    /// The kernel symbol names a check of this spec asks about: the probed
    /// symbol (without `MOD:` and `+OFF`) and every `@SYM` of the arguments.
    pub fn kernel_symbols(&self) -> Vec<String> {
        let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
        let take = |s: &str| -> String { s.chars().take_while(|&c| is_name(c)).collect() };
        let mut out = Vec::new();
        let place = self
            .place
            .rsplit_once(':')
            .map_or(self.place.as_str(), |(_, s)| s);
        let name = take(place);
        if !name.is_empty() {
            out.push(name);
        }
        for a in &self.args {
            for (i, _) in a.match_indices('@') {
                let name = take(&a[i + 1..]);
                if !name.is_empty() {
                    out.push(name);
                }
            }
        }
        out
    }
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

/// The group the user wrote in a definition's head (`p:GROUP/EVENT ...`,
/// `r:`, `e:`, `f:`, `t:`), if any: what ktrace shows as the probe's
/// system, while the kernel holds the probe in the session's group.
pub fn written_group(input: &str) -> Option<&str> {
    let first = input.split_whitespace().next()?;
    let (kind, name) = first.split_once(':')?;
    if !(is_kind_token(kind) || matches!(kind, "e" | "f" | "t")) {
        return None;
    }
    let (group, _) = name.split_once('/')?;
    (!group.is_empty()).then_some(group)
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
    // The kernel splits `PATH:OFFSET` at the last ':' (a path may hold ':').
    if let Some((_, off)) = place.rsplit_once(':')
        && off.starts_with(|c: char| c.is_ascii_digit())
    {
        return Place::UserOffset;
    }
    match place.split_once(':') {
        Some((file, rest)) => {
            if !file.contains('/') && is_module(file) {
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

/// `ktrace trace --args`: `$arg*` (every argument by its BTF name) added
/// to each kernel function's definition that does not have it yet. The
/// words are joined into definitions first ([`join_words`]). Wildcards and
/// uprobes are refused: `$arg*` names one kernel function's BTF arguments.
pub fn with_all_args(
    words: &[String],
    is_module: &dyn Fn(&str) -> bool,
) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for def in join_words(words)? {
        let Some(spec) = split(&def)? else {
            bail!("{def:?}: --args adds $arg* to kprobes (p, r), not to this kind of definition");
        };
        match classify(&spec.place, is_module) {
            Place::Kernel if spec.place.starts_with("0x") => {
                bail!("{def:?}: --args needs a function name (BTF), not an address")
            }
            Place::Kernel => {}
            Place::KernelGlob => bail!(
                "{def:?}: --args takes named functions, not a wildcard (each function has its own arguments)"
            ),
            Place::UserOffset | Place::UserSymbol => {
                bail!("{def:?}: --args uses the kernel's BTF; user code has none")
            }
        }
        if spec
            .args
            .iter()
            .any(|a| a.split_whitespace().any(|w| w == "$arg*"))
        {
            out.push(def);
        } else {
            out.push(format!("{def} $arg*"));
        }
    }
    Ok(out)
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

/// A spec turned into kernel syntax, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The user's spec it came from.
    pub input: String,
    /// The definition in the kernel's language (any group is replaced later).
    pub line: String,
    /// The event name to use when the line names none (a convenience's
    /// choice, e.g. `p_getenv` for `libc:getenv`); ktrace's kernel-like
    /// name otherwise.
    pub auto_name: Option<String>,
    /// Kernel symbol names the check asks about.
    pub symbols: Vec<String>,
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
pub struct Resolver<'k> {
    /// Architecture of the running kernel.
    pub arch: Arch,
    /// `-p PID`: its maps find libraries first.
    pub pid: Option<u32>,
    /// ld.so.cache.
    pub ldcache: PathBuf,
    /// The kernel view (module names, wildcard expansion).
    pub kernel: &'k KernelView,
    /// The session's group: every definition is put there (a group the user
    /// wrote is kept only as the system ktrace shows, see [`written_group`];
    /// the event name is kept).
    pub group: String,
    /// The running kernel's BTF: an untyped `argN` on a function entry takes
    /// its parameter's integer type from it (`dfd=arg1` → `dfd=%di:s32`).
    pub btf: Option<&'k ktrace_symbols::btf_types::KernelBtf>,
}

/// `N` when `arg` (a fetch argument as written, `NAME=` allowed) is a
/// bare, untyped `argN`: the only form BTF types (a dereference or a
/// written type is the user's).
fn bare_arg_n(arg: &str) -> Option<usize> {
    let value = arg.split_once('=').map_or(arg, |(_, v)| v);
    let digits = value.strip_prefix("arg")?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// The fetch type of an integer or enum of `bits`/`signed` as BTF
/// describes it (`int` → `s32`), as the kernel types a BTF argument; `None`
/// for what has no integer fetch type (pointers stay the default hex).
fn int_fetch_type(kind: &ktrace_probe::btfarg::BtfKind) -> Option<String> {
    use ktrace_probe::btfarg::BtfKind;
    match *kind {
        BtfKind::Int { bits, signed, .. } if matches!(bits, 8 | 16 | 32 | 64) => {
            Some(format!("{}{bits}", if signed { 's' } else { 'u' }))
        }
        BtfKind::Enum => Some("s32".into()),
        BtfKind::Enum64 => Some("s64".into()),
        _ => None,
    }
}

/// The fetch type BTF gives parameter `n` (1-based) of kernel function
/// `func`, when it is an integer or an enum.
pub fn btf_arg_type(
    btf: &ktrace_symbols::btf_types::KernelBtf,
    func: &str,
    n: usize,
) -> Option<String> {
    let (types, f) = btf.function(func)??;
    let (_, ty) = f.params.get(n.checked_sub(1)?)?;
    let (_, kind) = types.resolve(*ty)?;
    int_fetch_type(&kind)
}

/// Refuses a uprobe on an ELF file built for another architecture than
/// this machine's: the kernel takes it (an offset is only an offset) but it
/// can never fire, since the file cannot run here. Files that are not ELF
/// or cannot be read are left to the kernel's own check.
/// A uprobe on a file whose path holds a space: the kernel splits its
/// definitions at spaces, so no definition can name that file. Said in
/// those words (the words would otherwise be read as a symbol and an
/// argument, and refused for something else).
fn refuse_path_with_space(input: &str) -> anyhow::Result<()> {
    let text = input.trim_start();
    // the place after an optional `KIND[:NAME] ` head
    let text = match text.split_once(char::is_whitespace) {
        Some((first, rest)) if is_kind_token(first.split(':').next().unwrap_or("")) => {
            rest.trim_start()
        }
        _ => text,
    };
    if !text.starts_with('/') {
        return Ok(());
    }
    let Some(colon) = text.find(':') else {
        return Ok(());
    };
    let path = &text[..colon];
    if path.contains(char::is_whitespace) && Path::new(path).exists() {
        bail!(
            "{input:?}: the path {path:?} holds a space, and the kernel splits probe \
             definitions at spaces: no definition can name that file. Give a path without \
             spaces, e.g. a symbolic link: ln -s {path:?} /tmp/target"
        );
    }
    Ok(())
}

fn refuse_foreign_elf(path: &Path, arch: Arch) -> anyhow::Result<()> {
    use std::io::Read;
    let mut head = [0u8; 20];
    let Ok(mut f) = ktrace_symbols::open_no_wait(path) else {
        return Ok(());
    };
    if f.read_exact(&mut head).is_err() || &head[..4] != b"\x7fELF" {
        return Ok(());
    }
    let machine = match head[5] {
        2 => u16::from_be_bytes([head[18], head[19]]),
        _ => u16::from_le_bytes([head[18], head[19]]),
    };
    // (an i386 machine is not checked)
    if arch == Arch::I386 || machine == arch.elf_machine() {
        return Ok(());
    }
    let theirs = Arch::from_elf_machine(machine).map_or("another architecture", Arch::name);
    bail!(
        "{} is an ELF file for {theirs} (e_machine {machine}); this machine is {}, \
         so it never runs here and a uprobe on it would never fire",
        path.display(),
        arch.flag_name()
    )
}

/// The event of a written `EVENT` or `GROUP/EVENT` name.
fn event_part(name: &str) -> &str {
    name.split_once('/').map_or(name, |(_, e)| e)
}

impl Resolver<'_> {
    /// An event probe (`e[:[GROUP/]EVENT] ...`), passed through otherwise
    /// verbatim, is put into the session's group; other pass-through lines
    /// stay as they are (the check refuses what ktrace cannot create).
    fn regroup_passthrough(&self, line: &str) -> String {
        let (head, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let name = match head.strip_prefix("e:") {
            Some(n) => n,
            None if head == "e" => "",
            None => return line.to_string(),
        };
        format!(
            "e:{}/{} {}",
            self.group,
            event_part(name),
            rest.trim_start()
        )
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
        refuse_path_with_space(input)?;
        let Some(spec) = split(input)? else {
            out.defs.push(Resolved {
                input: input.to_string(),
                line: self.regroup_passthrough(input.trim()),
                auto_name: None,
                symbols: Vec::new(),
            });
            return Ok(());
        };
        if let Some((group, _)) = spec.name.as_deref().and_then(|n| n.split_once('/')) {
            // ktrace puts every probe in its own group; a group written
            // anyway is checked as the kernel would, and shown as the
            // probe's system (resolve::build).
            let good = group
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && group.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !good {
                bail!(
                    "{input:?}: group {group:?}: Group name must follow the same rules as C \
                     identifiers (the kernel's verdict)"
                );
            }
        }
        let place = classify(&spec.place, &|m| self.kernel.is_module(m));
        let user = matches!(place, Place::UserOffset | Place::UserSymbol);
        let args = spec
            .args
            .iter()
            .map(|a| map_args(a, self.arch, user || !self.arch.has_arg_access()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // An untyped `argN` at a kernel function's entry: the type BTF gives
        // the parameter (`int dfd` prints -100, not 0xffffff9c), as perf and
        // bpftrace print it and as kernels reading BTF names type `$argN`.
        let mut args = args;
        if place == Place::Kernel
            && spec.kind == "p"
            && self.arch.has_arg_access()
            && let Some(btf) = self.btf
            && !spec.place.starts_with("0x")
            && !spec.place.contains(['+', '-', '%'])
        {
            let func = spec.place.rsplit(':').next().unwrap_or(&spec.place);
            for (a, orig) in args.iter_mut().zip(&spec.args) {
                if let Some(n) = bare_arg_n(orig)
                    && let Some(t) = btf_arg_type(btf, func, n)
                {
                    a.push(':');
                    a.push_str(&t);
                }
            }
        }
        // Without an event name the line names no group either (`p SYM`):
        // the kernel's own naming is modelled by the check, and the session's
        // group is put in afterwards (naming::name_into_group). `p:GROUP/
        // SYM` would do on 6.x, but 5.10 refuses an empty event name after
        // the slash ("Event name is not specified").
        let line = |place: &str| {
            let mut s = match spec.name.as_deref() {
                Some(name) => format!("{}:{}/{} {place}", spec.kind, self.group, event_part(name)),
                None => format!("{} {place}", spec.kind),
            };
            for a in &args {
                s.push(' ');
                s.push_str(a);
            }
            s
        };
        let symbols = if user {
            Vec::new()
        } else {
            spec.kernel_symbols()
        };
        match place {
            Place::Kernel | Place::UserOffset => {
                if place == Place::UserOffset
                    && let Some((path, _)) = spec.place.rsplit_once(':')
                {
                    refuse_foreign_elf(Path::new(path), self.arch)?;
                }
                out.defs.push(Resolved {
                    input: input.to_string(),
                    line: line(&spec.place),
                    auto_name: None,
                    symbols,
                })
            }
            Place::UserSymbol => self.resolve_user_symbol(input, &spec, &line, symbols, out)?,
            Place::KernelGlob => self.expand_glob(input, &spec, &line, symbols, out)?,
        }
        Ok(())
    }

    /// A `LIB:SYMBOL` (or `PATH:SYMBOL`) uprobe: the library found (`-p`'s
    /// maps first, then ld.so.cache), refused when built for another
    /// machine, and its symbol turned into the file offset the kernel takes.
    fn resolve_user_symbol(
        &self,
        input: &str,
        spec: &Spec,
        line: &dyn Fn(&str) -> String,
        symbols: Vec<String>,
        out: &mut Outcome,
    ) -> anyhow::Result<()> {
        let up = ktrace_symbols::library::resolve_user_probe(&spec.place, self.pid, &self.ldcache)
            .map_err(|e| {
                let lib = spec.place.split_once(':').map_or("", |(l, _)| l);
                match e {
                    ktrace_symbols::Error::LibraryNotFound { .. } if !lib.contains('/') => {
                        anyhow::anyhow!(
                            "cannot resolve {:?}: {lib:?} is neither a loaded kernel module \
                         (/proc/modules) nor a library ({e}). For a module, load it \
                         first (modprobe {lib}); for a library, give its path",
                            spec.place
                        )
                    }
                    e => anyhow::Error::new(e).context(format!("cannot resolve {:?}", spec.place)),
                }
            })?;
        refuse_foreign_elf(&up.path, self.arch)?;
        let location = up.to_kernel_location();
        out.notes.push(format!(
            "{} -> {location} ({} at {:#x})",
            spec.place, up.target.symbol.name, up.target.vaddr
        ));
        let symbol = spec.place.rsplit_once(':').map_or("", |(_, s)| s);
        out.defs.push(Resolved {
            input: input.to_string(),
            line: line(&location),
            auto_name: Some(ktrace_probe::naming::sanitize(&format!(
                "{}_{symbol}",
                &spec.kind[..1]
            ))),
            symbols,
        });
        Ok(())
    }

    /// A kernel wildcard: one definition per function a kprobe can take,
    /// with a note of what the expansion left out and why.
    fn expand_glob(
        &self,
        input: &str,
        spec: &Spec,
        line: &dyn Fn(&str) -> String,
        symbols: Vec<String>,
        out: &mut Outcome,
    ) -> anyhow::Result<()> {
        if spec.name.is_some() {
            bail!("{input:?}: a wildcard makes one event per function; leave out the event name");
        }
        let ks = self
            .kernel
            .kallsyms()
            .map_err(|e| anyhow::anyhow!("kernel symbols are needed to expand a wildcard: {e}"))?;
        let rules = self.kernel.rules();
        let exp = probeable::expand(ks, &rules, &spec.place);
        for r in &exp.skipped_rules {
            out.notes.push(format!("rule not checked: {r}"));
        }
        let count = |f: fn(&Exclusion) -> bool| exp.excluded.iter().filter(|(_, w)| f(w)).count();
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
                None => sym.name.to_string(),
            };
            let mut symbols = symbols.clone();
            symbols.push(sym.name.to_string());
            out.defs.push(Resolved {
                input: input.to_string(),
                line: line(&place),
                auto_name: None,
                symbols,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's traceprobe_parse_event_name() splits GROUP/EVENT at the
    /// first '/': `p:a/b/c` is group `a` with the bad event name `b/c`.
    #[test]
    fn the_group_ends_at_the_first_slash() {
        assert_eq!(written_group("p:a/b/c vfs_read"), Some("a"));
        assert_eq!(written_group("r:a//b vfs_read"), Some("a"));
        assert_eq!(written_group("p:ev vfs_read"), None);
        assert_eq!(event_part("a/b/c"), "b/c");
        assert_eq!(event_part("ev"), "ev");
    }

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
    fn all_args_added_once() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let none = |_: &str| false;
        assert_eq!(
            with_all_args(
                &w(&[
                    "vfs_read",
                    "r:ret vfs_read%return",
                    "do_sys_openat2",
                    "$arg*"
                ]),
                &none
            )
            .unwrap(),
            vec![
                "vfs_read $arg*",
                "r:ret vfs_read%return $arg*",
                "do_sys_openat2 $arg*"
            ]
        );
        for bad in [
            "vfs_*",
            "/bin/sh:main",
            "e:x sched/sched_switch",
            "0xffffffff81000000",
        ] {
            assert!(with_all_args(&w(&[bad]), &none).is_err(), "{bad}");
        }
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
            ("/tmp/adv/a:b/hot:0x1250", Place::UserOffset),
            ("/tmp/adv/a:b/hot:main", Place::UserSymbol),
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
        let dir = std::env::temp_dir().join(format!("ktrace_spec_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let view = KernelView::running(None).with_kallsyms_file(&dir.join("none"));
        let r = Resolver {
            arch: Arch::Arm64,
            pid: None,
            ldcache: PathBuf::from(LD_SO_CACHE),
            kernel: &view,
            group: "ktrace_g".to_string(),
            btf: None,
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
        let defs: Vec<&str> = out.defs.iter().map(|d| d.line.as_str()).collect();
        assert_eq!(
            defs,
            [
                "p:ktrace_g/myev do_sys_openat2 dfd=%x0",
                "p do_sys_openat2 dfd=%x0 filename=+0(%x1):ustring",
                "r do_sys_openat2 $retval",
                "p:ktrace_g/w do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32",
                "r8 do_sys_openat2",
                "e:ktrace_g/ev sched/sched_switch",
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
        assert_eq!(
            out.defs[1].symbols,
            ["do_sys_openat2"],
            "the probed symbol, for the check's kallsyms count"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Regression (issue 21 item 4): `dfd=arg1` on do_sys_openat2 printed
    /// 0xffffff9c where perf and bpftrace print -100: an untyped `argN` at
    /// a function entry takes its parameter's integer type from BTF (the
    /// host's own /sys/kernel/btf/vmlinux); pointers, written types,
    /// dereferences, offsets and return probes are left as written.
    #[test]
    fn an_int_argn_printed_as_hex_where_btf_knows_the_type() {
        assert_eq!(bare_arg_n("dfd=arg1"), Some(1));
        assert_eq!(bare_arg_n("arg12"), Some(12));
        for a in [
            "dfd=arg1:u64",
            "x=+0(arg2)",
            "arg01",
            "x=$arg1",
            "args",
            "arg",
        ] {
            assert_eq!(bare_arg_n(a), None, "{a}");
        }
        let Some(btf) = ktrace_symbols::btf_types::KernelBtf::running() else {
            return eprintln!("SKIP: no /sys/kernel/btf/vmlinux");
        };
        if btf.function("do_sys_openat2").flatten().is_none() {
            return eprintln!("SKIP: no BTF prototype of do_sys_openat2");
        }
        assert_eq!(
            btf_arg_type(&btf, "do_sys_openat2", 1).as_deref(),
            Some("s32")
        );
        assert_eq!(btf_arg_type(&btf, "do_sys_openat2", 2), None, "a pointer");
        assert_eq!(btf_arg_type(&btf, "do_sys_openat2", 9), None);
        let dir = std::env::temp_dir().join(format!("ktrace_btfargn_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let view = KernelView::running(None).with_kallsyms_file(&dir.join("none"));
        let r = Resolver {
            arch: Arch::X86_64,
            pid: None,
            ldcache: PathBuf::from(LD_SO_CACHE),
            kernel: &view,
            group: "ktrace_g".to_string(),
            btf: Some(&btf),
        };
        let out = r
            .resolve(&[
                "do_sys_openat2 dfd=arg1 filename=+0(arg2):ustring how=arg3".to_string(),
                "do_sys_openat2 arg1 x=arg1:x32 y=%di".to_string(),
                "do_sys_openat2+4 dfd=arg1".to_string(),
                "do_sys_openat2%return dfd=arg1".to_string(),
            ])
            .unwrap();
        let defs: Vec<&str> = out.defs.iter().map(|d| d.line.as_str()).collect();
        assert_eq!(
            defs,
            [
                "p do_sys_openat2 dfd=%di:s32 filename=+0(%si):ustring how=%dx",
                "p do_sys_openat2 arg1=%di:s32 x=%di:x32 y=%di",
                "p do_sys_openat2+4 dfd=%di",
                "r do_sys_openat2 dfd=%di",
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wildcard_expansion_uses_probeable_rules() {
        // A kallsyms excerpt of Debian's 6.1 x86_64 kernel layout (names and
        // types as /proc/kallsyms prints them).
        let dir = std::env::temp_dir().join(format!("ktrace_glob_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        std::fs::write(
            &ks,
            "ffffffff81100000 T vfs_read\nffffffff81100100 T vfs_write\n\
             ffffffff81100200 t __pfx_vfs_open\nffffffff81100210 T vfs_open\n\
             ffffffff81200000 D vfs_data\nffffffff81300000 t dup\nffffffff81300010 t dup\n",
        )
        .unwrap();
        let view = KernelView::running(None).with_kallsyms_file(&ks);
        let r = Resolver {
            arch: Arch::X86_64,
            pid: None,
            ldcache: PathBuf::from(LD_SO_CACHE),
            kernel: &view,
            group: "ktrace_g".to_string(),
            btf: None,
        };
        let out = r
            .resolve(&["vfs_* a=arg1".to_string(), "r d*".to_string()])
            .unwrap_err();
        assert!(
            out.to_string().contains("\"d*\" matches no function"),
            "{out}"
        );
        let out = r.resolve(&["vfs_* a=arg1".to_string()]).unwrap();
        let defs: Vec<&str> = out.defs.iter().map(|d| d.line.as_str()).collect();
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
