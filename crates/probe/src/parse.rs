//! Parsing and checking a whole definition line as the kernel's writers do:
//! comment stripping and line splitting (`trace_parse_run_command()`), word splitting
//! (`argv_split()`), dispatch between probe kinds (`create_dyn_event()`), and
//! `__trace_kprobe_create()`, `__trace_uprobe_create()`, `__trace_eprobe_create()`,
//! `dyn_event_release()` from kernel/trace/ (Linux 6.1).
//!
//! Errors carry the kernel's message and the caret position `error_log` would show.
//! Checks that need the target kernel go through [`Environment`]; when it cannot
//! answer, the check is listed in [`Checked::unchecked`] instead of guessed.

use crate::arch::Arch;
use crate::ast::{
    Definition, FprobeDef, KprobePlace, ProbeDef, ProbeKind, RemoveDef, Span, SynthDef,
};
use crate::btfvar::BtfScope;
use crate::env::{Environment, FileKind};
use crate::error::{ErrorKind, ProbeError, Silent, TpErr};
use crate::fetch::{
    ArgCtx, ArgError, ArgFlags, ArgsState, MAX_TRACE_ARGS, good_name, good_system_name,
    parse_arg_with,
};
use crate::kernel::{Features, KernelVersion};
use crate::kstrtox::{kstrtol, kstrtouint, kstrtoul};

/// Longest event or group name plus its terminator (`MAX_EVENT_NAME_LEN`).
pub const MAX_EVENT_NAME_LEN: usize = 64;
/// Largest `rN` (`KRETPROBE_MAXACTIVE_MAX`).
pub const KRETPROBE_MAXACTIVE_MAX: u32 = 4096;
/// Longest line one write can carry (`WRITE_BUFSIZE - 2`).
pub const MAX_LINE_LEN: usize = 4094;

/// Which tracefs file the line is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    /// `dynamic_events`: every kind.
    #[default]
    DynamicEvents,
    /// `kprobe_events`.
    KprobeEvents,
    /// `uprobe_events`.
    UprobeEvents,
}

/// The target of a check.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Architecture.
    pub arch: Arch,
    /// Kernel version.
    pub kernel: KernelVersion,
    /// File written to.
    pub interface: Interface,
    /// Possible CPUs of the target (sets the default maxactive of return probes).
    pub possible_cpus: Option<u32>,
    /// The language features of the target, when known from the kernel itself
    /// (its tracefs README); `None` derives them from `kernel`.
    pub features: Option<Features>,
}

impl Target {
    /// Linux 6.1 on `arch`, writing to `dynamic_events`.
    pub fn new(arch: Arch) -> Target {
        Target {
            arch,
            kernel: KernelVersion::DEFAULT,
            interface: Interface::DynamicEvents,
            possible_cpus: None,
            features: None,
        }
    }

    /// The features checks follow: those the kernel announced, else those of
    /// its version.
    pub fn features(&self) -> Features {
        self.features.unwrap_or_else(|| self.kernel.features())
    }
}

/// A check the target kernel would make but that could not be made here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unchecked {
    /// Whether the probed symbol exists and is unique.
    SymbolExists,
    /// Whether the probed offset is a function entry (return probes, `$argN`).
    FunctionEntry,
    /// Whether the probed offset is an instruction boundary.
    InsnBoundary,
    /// Whether the function may be probed at all (blacklist, notrace).
    Probeable,
    /// Whether `@SYM` arguments resolve.
    ArgSymbols,
    /// Whether the uprobe's file exists and is regular.
    File,
    /// Whether the event name is already used.
    EventName,
    /// Whether the attached event (event probes) and its fields exist.
    AttachedEvent,
    /// The event probe filter's syntax.
    Filter,
    /// Whether a removal matches any event.
    RemoveTarget,
    /// How an address probe reads back, and the name generated for it: the kernel
    /// prints the address with `%p`, which it hashes.
    AddressName,
    /// The default maxactive of a return probe (depends on the number of CPUs).
    DefaultMaxactive,
    /// What the target kernel's BTF says about the probed function: the names
    /// `$argN` expands to, how many parameters there are, whether a bare name is
    /// one of them, the type of `$retval` (kernels with BTF arguments).
    Btf,
    /// The offsets of `struct dentry`'s name and `struct file`'s dentry in the
    /// target's build, which `:%pd`/`:%pD` expand to.
    StructLayout,
}

impl Unchecked {
    /// A short description, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Unchecked::SymbolExists => "symbol existence and uniqueness (give --kallsyms)",
            Unchecked::FunctionEntry => "whether the offset is a function entry",
            Unchecked::InsnBoundary => "instruction boundary of the offset",
            Unchecked::Probeable => "kprobe blacklist and notrace functions",
            Unchecked::ArgSymbols => "existence of @SYM argument symbols (give --kallsyms)",
            Unchecked::File => "existence of the probed file",
            Unchecked::EventName => "whether the event name is already taken",
            Unchecked::AttachedEvent => "existence of the attached event and its fields",
            Unchecked::Filter => "event probe filter syntax",
            Unchecked::RemoveTarget => "whether any event matches the removal",
            Unchecked::AddressName => {
                "the address as read back and any generated name (the kernel hashes %p)"
            }
            Unchecked::DefaultMaxactive => "the default maxactive shown on readback (give --cpus)",
            Unchecked::Btf => "the probed function's BTF (parameter names and types; give --btf)",
            Unchecked::StructLayout => {
                "the struct dentry/struct file offsets %pd and %pD expand to in the target's build"
            }
        }
    }
}

/// The outcome of checking one line.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The command as the kernel joins its words.
    pub command: String,
    /// The parsed definition, when accepted.
    pub definition: Result<Definition, ProbeError>,
    /// Target-dependent checks that could not be made.
    pub unchecked: Vec<Unchecked>,
}

impl Checked {
    /// Whether the kernel would accept the line (as far as could be checked).
    pub fn accepted(&self) -> bool {
        self.definition.is_ok()
    }
}

/// The words of a command and their positions in the joined form.
struct Argv<'a> {
    words: Vec<&'a str>,
    starts: Vec<usize>,
    joined: String,
}

impl<'a> Argv<'a> {
    fn split(line: &'a str) -> Argv<'a> {
        // argv_split() splits on isspace(): space, \t, \n, \v, \f, \r.
        let words: Vec<&str> = line
            .split([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
            .filter(|w| !w.is_empty())
            .collect();
        let mut starts = Vec::with_capacity(words.len());
        let mut pos = 0;
        for w in &words {
            starts.push(pos);
            pos += w.len() + 1;
        }
        Argv {
            joined: words.join(" "),
            words,
            starts,
        }
    }

    /// An argv of words already split.
    fn split_words(words: &'a [String]) -> Argv<'a> {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut starts = Vec::with_capacity(words.len());
        let mut pos = 0;
        for w in &words {
            starts.push(pos);
            pos += w.len() + 1;
        }
        Argv {
            joined: words.join(" "),
            words,
            starts,
        }
    }

    /// The same words again (a second view of `other`).
    fn split_words_from(other: &Argv<'a>) -> Argv<'a> {
        Argv {
            words: other.words.clone(),
            starts: other.starts.clone(),
            joined: other.joined.clone(),
        }
    }

    /// `__trace_probe_log_err()`'s position for word `index` at `offset`.
    fn pos(&self, index: usize, offset: usize) -> usize {
        match self.starts.get(index) {
            Some(s) => s + offset,
            None => self.joined.len() + 1,
        }
    }

    fn span(&self, index: usize) -> Span {
        let start = self.starts[index];
        Span {
            start,
            end: start + self.words[index].len(),
        }
    }
}

enum Fail {
    /// Not this kind of probe; the next parser may take it (`-ECANCELED`).
    Cancel,
    Err(ProbeError),
}

struct Ctx<'e> {
    target: Target,
    env: &'e dyn Environment,
    unchecked: Vec<Unchecked>,
    subsystem: &'static str,
}

impl Ctx<'_> {
    fn logged(&self, argv: &Argv, err: TpErr, index: usize, offset: usize) -> Fail {
        // __trace_probe_log_err(): an index past the logged command's words
        // (an argument that `$arg*` expanded into being) puts the caret one
        // past the command and drops the offset, garbage or not (x86_64 7.2,
        // seed 59: `r ... $arg* saddr->in6.in6_u:ustring`, whose offset is
        // lost past the member chain, at 76 of a 75-byte command).
        let pos = if index >= argv.words.len() {
            Some(argv.pos(index, 0))
        } else {
            (offset != crate::fetch::NO_CARET).then(|| argv.pos(index, offset))
        };
        // 5.10 keeps the position in a byte
        let pos = pos.map(|p| {
            if self.target.features().error_pos_u8 {
                p % 256
            } else {
                p
            }
        });
        Fail::Err(ProbeError {
            kind: ErrorKind::Logged(err),
            message: err.message_for(self.target.features()),
            subsystem: Some(self.subsystem),
            pos,
            command: argv.joined.clone(),
            hint: None,
        })
    }

    fn note(&mut self, u: Unchecked) {
        if !self.unchecked.contains(&u) {
            self.unchecked.push(u);
        }
    }
}

fn silent(kind: Silent, command: &str) -> ProbeError {
    ProbeError {
        kind: ErrorKind::Silent(kind),
        message: kind.message(),
        subsystem: None,
        pos: None,
        command: command.to_string(),
        hint: None,
    }
}

/// Checks one line as the kernel would read it from `target.interface`.
pub fn check_line(line: &str, target: Target, env: &dyn Environment) -> Checked {
    // A newline ends the command (the kernel reads what follows as another);
    // a NUL ends the write. Other control characters are bytes like any
    // other to the kernel's parser (isspace() ones separate words).
    if line.contains(['\n', '\0']) {
        return Checked {
            command: line.to_string(),
            definition: Err(silent(Silent::ControlChar, line)),
            unchecked: vec![],
        };
    }
    if line.len() > MAX_LINE_LEN {
        return Checked {
            command: line.to_string(),
            definition: Err(silent(Silent::LineTooLong, line)),
            unchecked: vec![],
        };
    }
    // trace_parse_run_command() cuts the line at the first '#'.
    let raw = match line.find('#') {
        Some(h) => &line[..h],
        None => line,
    };
    let argv = Argv::split(raw);
    let mut ctx = Ctx {
        target,
        env,
        unchecked: Vec::new(),
        subsystem: "trace_kprobe",
    };
    let result = dispatch(raw, &argv, &mut ctx);
    let definition = match result {
        Ok(d) => Ok(d),
        Err(Fail::Cancel)
            if target.interface == Interface::DynamicEvents && target.features().no_match_error =>
        {
            let err = TpErr::NO_MATCHING_TYPE;
            Err(ProbeError {
                kind: ErrorKind::Logged(err),
                message: err.message(),
                subsystem: Some("dynevent"),
                pos: Some(0),
                command: argv.joined.clone(),
                hint: None,
            })
        }
        Err(Fail::Cancel) => Err(silent(
            if target.interface == Interface::DynamicEvents {
                Silent::NotAProbe
            } else {
                Silent::WrongFile
            },
            &argv.joined,
        )),
        Err(Fail::Err(mut e)) => {
            // the checker's own why (a refusal's cause, a "did you mean")
            // first, else the general advice for the error
            if e.hint.is_none() {
                e.hint = crate::hint::hint_for(&e, &argv.words, target);
            }
            Err(e)
        }
    };
    Checked {
        command: argv.joined.clone(),
        definition,
        unchecked: ctx.unchecked,
    }
}

fn dispatch(raw: &str, argv: &Argv, ctx: &mut Ctx) -> Result<Definition, Fail> {
    let first = raw.as_bytes().first().copied();
    let removing = match ctx.target.interface {
        Interface::DynamicEvents => matches!(first, Some(b'-') | Some(b'!')),
        _ => first == Some(b'-'),
    };
    if removing {
        return remove(argv, ctx).map(Definition::Remove);
    }
    if argv.words.is_empty() {
        return Ok(Definition::Empty);
    }
    match ctx.target.interface {
        Interface::KprobeEvents => kprobe(argv, ctx).map(Definition::Probe),
        Interface::UprobeEvents => uprobe(argv, ctx).map(Definition::Probe),
        Interface::DynamicEvents => {
            match kprobe(argv, ctx) {
                Err(Fail::Cancel) => {}
                other => return other.map(Definition::Probe),
            }
            match uprobe(argv, ctx) {
                Err(Fail::Cancel) => {}
                other => return other.map(Definition::Probe),
            }
            if ctx.target.features().eprobes {
                match eprobe(argv, ctx) {
                    Err(Fail::Cancel) => {}
                    other => return other.map(Definition::Probe),
                }
            }
            // fprobes need ftrace with arguments (DYNAMIC_FTRACE_WITH_ARGS or
            // _REGS), which 32-bit arm lacks: its 7.2 takes no `f`/`t` (seen).
            if ctx.target.features().fprobes && ctx.target.arch != Arch::Arm {
                match fprobe(argv, ctx) {
                    Err(Fail::Cancel) => {}
                    other => return other.map(Definition::Fprobe),
                }
            }
            if ctx.target.features().synthetic_events {
                match synthetic(raw, ctx) {
                    Err(Fail::Cancel) => {}
                    other => return other.map(Definition::Synthetic),
                }
            }
            Err(Fail::Cancel)
        }
    }
}

fn remove(argv: &Argv, ctx: &mut Ctx) -> Result<RemoveDef, Fail> {
    let bad = || Fail::Err(silent(Silent::BadRemove, &argv.joined));
    let w0 = *argv.words.first().ok_or_else(bad)?;
    let event = if let Some(rest) = w0.strip_prefix('-') {
        rest.strip_prefix(':').ok_or_else(bad)?
    } else {
        let c = w0.find(':').ok_or_else(bad)?;
        &w0[c + 1..]
    };
    let (group, event) = match event.find('/') {
        Some(s) => (Some(event[..s].to_string()), event[s + 1..].to_string()),
        None => (None, event.to_string()),
    };
    if group.is_none() && event.is_empty() {
        return Err(bad());
    }
    // dyn_event_release(): -ENOENT unless some event of the file's kind
    // matches (name, group, and the place and arguments when given).
    match ctx.env.dynamic_events() {
        Some(listing) => {
            let args: Vec<&str> = argv.words[1..].to_vec();
            let found = listing.iter().any(|line| {
                removal_matches(line, group.as_deref(), &event, &args, ctx.target.interface)
            });
            if !found {
                return Err(Fail::Err(silent(Silent::NothingToRemove, &argv.joined)));
            }
        }
        None => ctx.note(Unchecked::RemoveTarget),
    }
    Ok(RemoveDef {
        group,
        event,
        args: argv.words[1..].iter().map(|s| s.to_string()).collect(),
    })
}

/// The event field an argument fetches, if any (at the bottom of its
/// dereferences).
fn first_field(f: &crate::ast::Fetch) -> Option<&str> {
    match f {
        crate::ast::Fetch::Field(name) => Some(name),
        crate::ast::Fetch::Deref { inner, .. } => first_field(inner),
        _ => None,
    }
}

/// Whether `group/event` names an event that is not a dynamic event of
/// that name (a tracepoint's own, another kind's): `register_*_event()`
/// then fails with -EEXIST, "already used"; a dynamic event of that name
/// is appended to instead, with its own checks.
fn name_taken_by_another_event(ctx: &Ctx, group: &str, event: &str) -> bool {
    ctx.env.event_exists(group, event) == Some(true)
        && ctx
            .env
            .dynamic_events()
            .is_some_and(|l| !l.iter().any(|l| listed_name(l) == Some((group, event))))
}

/// `(group, event)` of a listed dynamic event line.
fn listed_name(line: &str) -> Option<(&str, &str)> {
    let head = line.split_whitespace().next()?;
    head.split_once(':')?.1.split_once('/')
}

/// Whether listed event `line` is what `-:[GROUP/]EVENT [PLACE ARGS...]`
/// removes from `interface` (the `match` operations of trace_kprobe.c,
/// trace_uprobe.c, trace_eprobe.c, trace_fprobe.c, trace_events_synth.c).
fn removal_matches(
    line: &str,
    group: Option<&str>,
    event: &str,
    args: &[&str],
    interface: Interface,
) -> bool {
    let mut words = line.split_whitespace();
    let Some(head) = words.next() else {
        return false;
    };
    let Some((kind, name)) = head.split_once(':') else {
        return false;
    };
    let Some((g, e)) = name.split_once('/') else {
        return false;
    };
    let place = words.next().unwrap_or_default();
    let uprobe = place.contains('/') && place.contains(':');
    let of_file = match interface {
        Interface::DynamicEvents => true,
        Interface::KprobeEvents => kind.starts_with(['p', 'r']) && !uprobe,
        Interface::UprobeEvents => kind.starts_with(['p', 'r']) && uprobe,
    };
    if !of_file || !(event.is_empty() || e == event) || group.is_some_and(|want| want != g) {
        return false;
    }
    if kind.starts_with('s') {
        // a synthetic event matches by name (and its fields, not compared)
        return args.is_empty();
    }
    let Some((first, rest)) = args.split_first() else {
        return true;
    };
    let listed: Vec<&str> = words.collect();
    *first == place && rest.len() <= listed.len() && rest.iter().zip(&listed).all(|(a, l)| a == l)
}

/// `traceprobe_parse_event_name()`: returns (group, event or None for auto).
fn parse_event_name(
    ctx: &Ctx,
    argv: &Argv,
    index: usize,
    name: &str,
    offset: usize,
) -> Result<(Option<String>, Option<String>), Fail> {
    let mut offset = offset;
    let newer = ctx.target.features().newer_event_names;
    let slash = if newer {
        name.find('/').or_else(|| name.find('.'))
    } else {
        name.find('/')
    };
    let mut group = None;
    let mut event = name;
    if let Some(s) = slash {
        if s == 0 {
            return Err(ctx.logged(argv, TpErr::NO_GROUP_NAME, index, offset));
        }
        if s + 1 > MAX_EVENT_NAME_LEN {
            return Err(ctx.logged(argv, TpErr::GROUP_TOO_LONG, index, offset));
        }
        let good = if newer {
            good_system_name(&name[..s])
        } else {
            good_name(&name[..s])
        };
        if !good {
            return Err(ctx.logged(argv, TpErr::BAD_GROUP_NAME, index, offset));
        }
        group = Some(name[..s].to_string());
        event = &name[s + 1..];
        offset += s + 1;
    }
    if event.is_empty() {
        if slash.is_some() && newer {
            return Ok((group, None));
        }
        return Err(ctx.logged(argv, TpErr::NO_EVENT_NAME, index, offset));
    }
    let limit = if ctx.target.features().name_and_imm_fixes {
        MAX_EVENT_NAME_LEN
    } else {
        MAX_EVENT_NAME_LEN + 1
    };
    if event.len() >= limit {
        return Err(ctx.logged(argv, TpErr::EVENT_TOO_LONG, index, offset));
    }
    if !good_name(event) {
        return Err(ctx.logged(argv, TpErr::BAD_EVENT_NAME, index, offset));
    }
    Ok((group, Some(event.to_string())))
}

fn truncate_name(mut s: String) -> String {
    if s.len() > MAX_EVENT_NAME_LEN - 1 {
        let mut cut = MAX_EVENT_NAME_LEN - 1;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// The offsets `:%pd`/`:%pD` expand to, `offsetof(struct dentry, d_name.name)`
/// and `offsetof(struct file, f_path.dentry)`, as the readback of Debian's
/// kernels shows them (corpus fixtures); `None` where not seen.
fn dentry_offsets(arch: Arch, kernel: KernelVersion) -> Option<(u64, u64)> {
    let series = kernel.series();
    if series != KernelVersion::new(6, 12) && series != KernelVersion::new(7, 2) {
        return None;
    }
    match arch {
        // arm-7.2: `+0x0(+0x20(+0x2c(%r0))):string` (6.12's struct file is
        // laid out as 7.2's: the 64-bit readbacks of both agree).
        Arch::Arm => Some((0x20, 0x2c)),
        // riscv64-7.2: `+0x0(+0x28(+0x48(%a0))):string`; the same on x86_64
        // 6.12, arm64 6.12 and 7.2 (conform seed 7: `+224(\-1):%pD`,
        // `%ip:%pD`, `$retval:%pD` read back with +0x48).
        Arch::Riscv64 | Arch::X86_64 | Arch::Arm64 => Some((0x28, 0x48)),
        Arch::I386 => None,
    }
}

/// `traceprobe_expand_dentry_args()` (6.9+): a `NAME=ARG:%pd` word becomes
/// `NAME=+0x0(+0xD(ARG)):string` and `:%pD` `+0x0(+0xD(+0xF(ARG))):string`, with
/// D and F the offsets of `struct dentry`'s name and `struct file`'s dentry in
/// the target's build. The kernel rewrites the words in place, so later errors
/// show the rewritten command. `None` when no word has such a type.
fn expand_dentry_args(words: &[String], ctx: &mut Ctx) -> Option<Vec<String>> {
    if !ctx.target.features().dentry_types
        || !words
            .iter()
            .any(|w| w.ends_with(":%pd") || w.ends_with(":%pD"))
    {
        return None;
    }
    let (d_name, f_dentry) = match dentry_offsets(ctx.target.arch, ctx.target.kernel) {
        Some(o) => o,
        None => {
            // The layout of the target's build is not known here: the offsets
            // below are a 64-bit guess, and the readback is not checked.
            ctx.note(Unchecked::StructLayout);
            (0x28, 0x40)
        }
    };
    let words = words
        .iter()
        .map(|w| {
            let is_d = w.ends_with(":%pd");
            if !(is_d || w.ends_with(":%pD")) {
                return w.to_string();
            }
            let w = &w[..w.len() - 4];
            let (name, body) = match w.split_once('=') {
                Some((n, b)) => (format!("{n}="), b),
                None => (String::new(), w),
            };
            if is_d {
                format!("{name}+0x0(+0x{d_name:x}({body})):string")
            } else {
                format!("{name}+0x0(+0x{d_name:x}(+0x{f_dentry:x}({body}))):string")
            }
        })
        .collect();
    Some(words)
}

fn parse_args<'e>(
    argv: &Argv,
    first: usize,
    actx: &ArgCtx,
    ctx: &mut Ctx<'e>,
    mut btf: Option<&mut BtfScope<'e>>,
) -> Result<(Vec<crate::ast::ProbeArg>, usize), Fail> {
    let features = ctx.target.features();
    let btf_era = features.btf_args && ctx.target.arch.has_arg_access();
    // traceprobe_expand_meta_args() (6.5+, kernel probes): `$arg…` words are
    // checked first, then, with BTF, `$argN` and `$arg*` become parameter names.
    let mut expanded: Option<Vec<String>> = None;
    if features.btf_parser && actx.flags.kernel && !actx.flags.tpoint {
        if btf_era || features.meta_args_without_btf {
            let mut own;
            let scope = match btf.as_deref_mut() {
                Some(s) => s,
                None => {
                    own = BtfScope::new(ctx.env, ctx.target.arch, None);
                    &mut own
                }
            };
            let entry_or_exit = crate::fetch::function_entry(actx.flags)
                || crate::fetch::function_return(actx.flags);
            match crate::btfvar::expand_meta_args(
                &argv.words[first..],
                entry_or_exit,
                btf_era,
                scope,
            ) {
                Ok(crate::btfvar::Expanded::Same) => {}
                Ok(crate::btfvar::Expanded::Words(w)) => expanded = Some(w),
                Err((i, e)) => {
                    return Err(match e {
                        ArgError::Logged(e, off) => ctx.logged(argv, e, first + i, off),
                        ArgError::Silent(s) => Fail::Err(silent(s, &argv.joined)),
                    });
                }
            }
        } else if let Err((i, e)) = crate::fetch::scan_meta_args(&argv.words[first..], actx) {
            return Err(match e {
                ArgError::Logged(e, off) => ctx.logged(argv, e, first + i, off),
                ArgError::Silent(s) => Fail::Err(silent(s, &argv.joined)),
            });
        }
    }
    // The words parsed: the expanded ones, or the command's own.
    let mut words: Vec<String> = match &expanded {
        Some(w) => w.clone(),
        None => argv.words[first..].iter().map(|w| w.to_string()).collect(),
    };
    // Newer kernels refuse what older ones silently cut at MAX_TRACE_ARGS
    // (counted after the expansion).
    if features.too_many_args_error && words.len() > MAX_TRACE_ARGS {
        return Err(ctx.logged(argv, TpErr::TOO_MANY_ARGS, first, 0));
    }
    if features.too_many_args_silent && words.len() > MAX_TRACE_ARGS {
        return Err(Fail::Err(silent(Silent::TooManyArgs, &argv.joined)));
    }
    // `%pd`/`%pD` rewrite the words in place: in the command the log shows
    // too, unless the meta-argument expansion made a copy of them.
    let rewritten;
    // (kprobes and fprobes only: event probes and uprobes keep the words)
    let dentry = if actx.flags.kernel && !actx.flags.tpoint {
        expand_dentry_args(&words, ctx)
    } else {
        None
    };
    let log = match dentry {
        Some(new) => {
            words = new;
            if expanded.is_none() {
                let mut all: Vec<String> =
                    argv.words[..first].iter().map(|w| w.to_string()).collect();
                all.extend(words.iter().cloned());
                rewritten = all;
                Argv::split_words(&rewritten)
            } else {
                Argv::split_words_from(argv)
            }
        }
        None => Argv::split_words_from(argv),
    };
    let mut state = ArgsState::default();
    let mut args = Vec::new();
    let unknown_btf = btf.as_deref().is_some_and(BtfScope::unknown);
    for (i, w) in words.iter().enumerate().take(MAX_TRACE_ARGS) {
        let index = first + i;
        let span = if index < log.words.len() {
            log.span(index)
        } else {
            Default::default()
        };
        // `$arg…` words whose expansion needed BTF this check does not have
        if unknown_btf && w.starts_with("$arg") {
            ctx.note(Unchecked::Btf);
            args.push(crate::fetch::opaque_arg(w, i, span, actx, &mut state));
            continue;
        }
        match parse_arg_with(w, i, span, actx, &mut state, btf.as_deref_mut()) {
            // 6.1 trace_eprobe_tp_arg_update(): the field is looked up after
            // the argument parsed, before the next one.
            Ok(a)
                if actx.flags.tpoint
                    && !features.btf_parser
                    && first_field(&a.fetch).is_some_and(|f| {
                        f != "comm"
                            && f != "COMM"
                            && btf.as_deref().and_then(|b| b.has_event_field(f)) == Some(false)
                    }) =>
            {
                return Err(ctx.logged(&log, TpErr::BAD_ATTACH_ARG, index, 0));
            }
            Ok(a) => args.push(a),
            Err(ArgError::Logged(e, off)) => return Err(ctx.logged(&log, e, index, off)),
            Err(ArgError::Silent(s)) => return Err(Fail::Err(silent(s, &log.joined))),
        }
        if btf.as_deref().is_some_and(BtfScope::unknown) {
            ctx.note(Unchecked::Btf);
        }
    }
    Ok((args, words.len().saturating_sub(MAX_TRACE_ARGS)))
}

fn kprobe(argv: &Argv, ctx: &mut Ctx) -> Result<ProbeDef, Fail> {
    let bits = ctx.target.arch.bits();
    let w0 = argv.words[0];
    let b0 = w0.as_bytes();
    let mut is_return = match b0[0] {
        b'r' => true,
        b'p' => false,
        _ => return Err(Fail::Cancel),
    };
    if argv.words.len() < 2 {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "trace_kprobe";
    let event_at = w0[1..].find(':').map(|c| c + 2);
    let mut maxactive = 0u32;
    if b0.get(1).is_some_and(|c| c.is_ascii_digit()) {
        if !is_return {
            let e = if ctx.target.features().newer_messages {
                TpErr::MAXACT_NO_RETURN
            } else {
                TpErr::MAXACT_NO_KPROBE
            };
            return Err(ctx.logged(argv, e, 0, 1));
        }
        let end = event_at.map_or(w0.len(), |e| e - 1);
        let digits = &w0[1..end];
        if digits.len() > MAX_EVENT_NAME_LEN - 1 {
            return Err(ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1));
        }
        maxactive = kstrtouint(digits, 0)
            .ok()
            .filter(|m| *m != 0)
            .ok_or_else(|| ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1))?;
        if maxactive > KRETPROBE_MAXACTIVE_MAX {
            return Err(ctx.logged(argv, TpErr::MAXACT_TOO_BIG, 0, 1));
        }
    }

    let w1 = argv.words[1];
    let mut fentry = false;
    let mut missing_symbol = false;
    let place = match kstrtoul(w1, 0, bits) {
        Ok(addr) => {
            ctx.note(Unchecked::AddressName);
            KprobePlace::Address(addr)
        }
        Err(_) => {
            if w1.contains('/') && w1.contains(':') {
                return Err(Fail::Cancel);
            }
            let mut symbol = w1;
            if let Some(pct) = w1.find('%') {
                if &w1[pct..] == "%return" && ctx.target.features().return_suffix {
                    symbol = &w1[..pct];
                    is_return = true;
                } else {
                    return Err(ctx.logged(argv, TpErr::BAD_ADDR_SUFFIX, 1, pct));
                }
            }
            let (sym, offset) = match symbol.find(['+', '-']) {
                Some(p) => match kstrtol(&symbol[p..], 0, bits) {
                    Ok(o) => (&symbol[..p], o),
                    Err(_) => return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0)),
                },
                None => (symbol, 0),
            };
            if offset < 0 || offset > i64::from(u32::MAX) {
                return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
            }
            // validate_probe_symbol() (6.12 and later: before the entry check;
            // 6.1 counts after it): no symbol, or more than one, is refused.
            // Without the count (5.10.223), a symbol that does not exist
            // fails at registration, after the event name and the arguments.
            let counts = ctx.target.features().non_unique_symbol;
            // No symbol has an empty name, nor one starting with a digit (kallsyms
            // names are C identifiers, perhaps with '.' suffixes): the kernel's
            // lookup and count both fail (arm64 5.10: `r:kprobes/ 54x/ev` is
            // refused for its empty event name first).
            // A `MOD:SYM` is no such case: a module of that name is not loaded,
            // so validate_probe_symbol() defers it (arm 6.12, seed 41:
            // `0xc045c364[=\:symstr` was taken and its arguments parsed).
            let impossible =
                !sym.contains(':') && (sym.is_empty() || sym.as_bytes()[0].is_ascii_digit());
            if impossible && counts {
                return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
            }
            missing_symbol |= impossible;
            let validate = |ctx: &mut Ctx, missing: &mut bool| -> Result<(), Fail> {
                if sym.contains(':') {
                    return Ok(());
                }
                match ctx.env.symbol_count(sym) {
                    Some(0) if !counts => {
                        *missing = true;
                        Ok(())
                    }
                    Some(0) => Err(with_suggestion(
                        ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0),
                        ctx.env.similar_symbols(sym),
                    )),
                    Some(n) if n > 1 && ctx.target.features().non_unique_symbol => {
                        Err(ctx.logged(argv, TpErr::NON_UNIQ_SYMBOL, 1, 0))
                    }
                    Some(_) => Ok(()),
                    None => {
                        ctx.note(Unchecked::SymbolExists);
                        Ok(())
                    }
                }
            };
            if ctx.target.features().validate_symbol_early {
                validate(ctx, &mut missing_symbol)?;
            }
            // kprobe_on_func_entry(): -ENOENT (unknown symbol) is deferred, -EINVAL
            // (known symbol, not at its entry) rejects a return probe.
            let exists = symbol_exists(ctx, sym);
            if exists != Some(false) {
                let at_entry = match ctx.env.kprobe_entry(sym, offset as u64) {
                    Some(known) => Some(known),
                    None => entry_offset(ctx, offset as u64).map(Some),
                };
                match at_entry {
                    Some(Some(true)) => fentry = true,
                    Some(Some(false)) => {
                        if is_return {
                            return Err(ctx.logged(argv, TpErr::BAD_RETPROBE, 1, 0));
                        }
                    }
                    // -ENOENT: the registration decides
                    Some(None) => {}
                    None => ctx.note(Unchecked::FunctionEntry),
                }
            }
            if !ctx.target.features().validate_symbol_early {
                validate(ctx, &mut missing_symbol)?;
            }
            // x86 decodes the function up to the offset (-EILSEQ); riscv64
            // walks instruction lengths; 32-bit arm checks alignment by the
            // instruction set; arm64's alignment is checked below.
            if offset != 0 && ctx.target.arch != Arch::Arm64 {
                ctx.note(Unchecked::InsnBoundary);
            }
            KprobePlace::Symbol {
                symbol: sym.to_string(),
                offset: offset as u64,
            }
        }
    };
    ctx.note(Unchecked::Probeable);

    let (group, event) = match event_at {
        Some(at) => parse_event_name(ctx, argv, 0, &w0[at..], at)?,
        None => (None, None),
    };
    let group = group.unwrap_or_else(|| "kprobes".to_string());
    let auto_event = event.is_none();
    let event = match event {
        Some(e) => e,
        None => {
            let c = if is_return { 'r' } else { 'p' };
            let name = match &place {
                KprobePlace::Symbol { symbol, offset } => format!("{c}_{symbol}_{offset}"),
                KprobePlace::Address(a) => {
                    ctx.note(Unchecked::AddressName);
                    format!("{c}_0x{a:x}")
                }
            };
            sanitize_event_name(&truncate_name(name), ctx.target.features())
        }
    };

    // TPARG_FL_RETURN is set for a probe on a symbol only: the arguments of
    // a return probe on a raw address are parsed as a plain kprobe's.
    let symbol_return = is_return && matches!(place, KprobePlace::Symbol { .. });
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: symbol_return,
            kernel: true,
            fentry,
            tpoint: false,
            fprobe: false,
        },
    };
    // ctx->funcname: the symbol as written (an address probe has none)
    let func = match &place {
        KprobePlace::Symbol { symbol, .. } => Some(symbol.clone()),
        KprobePlace::Address(_) => None,
    };
    let env = ctx.env;
    let mut scope = BtfScope::new(env, ctx.target.arch, func.as_deref());
    let (args, ignored_args) = parse_args(argv, 2, &actx, ctx, Some(&mut scope))?;
    // A probe on a module that is not loaded waits for it: registration
    // (and its -ENOENT for an argument's symbol) comes when it loads.
    let deferred = match &place {
        KprobePlace::Symbol { symbol, .. } => symbol
            .split_once(':')
            .is_some_and(|(m, n)| ctx.env.module_symbol(m, n) == Some(None)),
        // (5.10's register_kretprobe() looks the address up first, in
        // kprobe_on_func_entry(): a return probe waits there too)
        KprobePlace::Address(a) => {
            *a != 0
                && (ctx.target.features().kprobe_addr_lookup || is_return)
                && ctx.env.kprobe_address(*a, is_return) == Some(crate::env::AddressFate::Deferred)
        }
    };
    // register_trace_kprobe(): a symbol of a loaded module that does not exist fails
    // with -ENOENT (after the event's name and the arguments' symbols); a
    // module that is not loaded defers the probe. So does a core symbol that
    // does not exist on kernels that do not count symbols up front.
    let mut unresolved = missing_symbol;
    if let KprobePlace::Symbol { symbol, .. } = &place
        && let Some((module, name)) = symbol.split_once(':')
    {
        match ctx.env.module_symbol(module, name) {
            Some(Some(false)) => unresolved = true,
            Some(_) => {}
            None => ctx.note(Unchecked::SymbolExists),
        }
    }
    // register_trace_kprobe(): a name another event (a tracepoint) has is
    // taken ("already used"); then __register_trace_kprobe() refuses a
    // notrace function before it resolves the arguments' symbols, and
    // register_kprobe() an address that is not kernel text or blacklisted.
    let mut refusal = match &place {
        KprobePlace::Symbol { symbol, offset } if !symbol.contains(':') => {
            ctx.env.kprobe_refusal(symbol, *offset)
        }
        // _kprobe_addr(): neither a symbol nor an address is -EINVAL, on
        // every kernel, whatever the kernel holds (x86_64 7.2, seed 59: `r:ev
        // 0`; the corpora's `p:addrev 0`)
        KprobePlace::Address(0) => Some(Some(crate::env::Refusal::Address(
            "address 0 is no probe point: register_kprobe() needs a symbol or an address"
                .to_string(),
        ))),
        KprobePlace::Address(a) => match ctx.env.kprobe_address(*a, is_return) {
            Some(crate::env::AddressFate::Refused(r)) => Some(Some(r)),
            // before _kprobe_addr() looked addresses up (5.10), an address in
            // no symbol is not deferred: it is no kernel text, -EINVAL (arm64
            // 5.10, seed 23: `p 0xffff`)
            Some(crate::env::AddressFate::Deferred)
                if !ctx.target.features().kprobe_addr_lookup && !is_return =>
            {
                Some(Some(crate::env::Refusal::Address(format!(
                    "{a:#x} is in no function of the kernel or a loaded module: kprobes go on \
                     kernel text"
                ))))
            }
            Some(_) => Some(None),
            None => None,
        },
        _ => None,
    };
    if name_taken_by_another_event(ctx, &group, &event) {
        return Err(ctx.logged(argv, TpErr::EVENT_EXIST, 0, 0));
    }
    if let Some(Some(crate::env::Refusal::Notrace(why))) = &refusal {
        let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
        if let Fail::Err(e) = &mut e {
            e.hint = Some(why.clone());
        }
        return Err(e);
    }
    // -ENOENT from an argument's symbol is taken as "the module is not
    // loaded yet" for a probe not on a core symbol (trace_kprobe_module_exist()
    // is false without a symbol): the probe is accepted and waits.
    let on_core_symbol =
        matches!(&place, KprobePlace::Symbol { symbol, .. } if !symbol.contains(':'));
    let mut waits_for_arg_symbol = false;
    if !deferred {
        match check_arg_symbols(ctx, argv, &args, true) {
            Err(Fail::Err(e))
                if !on_core_symbol && e.kind == ErrorKind::Logged(TpErr::BAD_PROBE_ADDR) =>
            {
                waits_for_arg_symbol = true;
            }
            other => other?,
        }
    }
    // (__register_trace_kprobe() resolves the arguments before
    // register_kprobe() sees the address: a raw address whose argument
    // symbol is missing waits, whatever the address)
    if waits_for_arg_symbol && matches!(place, KprobePlace::Address(_)) {
        refusal = None;
    }
    if unresolved {
        let near = match &place {
            KprobePlace::Symbol { symbol, .. } if !symbol.contains(':') => {
                ctx.env.similar_symbols(symbol)
            }
            _ => Vec::new(),
        };
        return Err(with_suggestion(
            ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0),
            near,
        ));
    }
    match refusal {
        // (5.10's _kprobe_addr() does not look the address up: it is
        // check_kprobe_address_safe() that refuses it, -EINVAL; but its
        // register_kretprobe() calls kprobe_on_func_entry() first, whose
        // lookup fails with -ENOENT: arm64 5.10, seed 41,
        // `r acpi_install_table+0x100000`)
        Some(Some(crate::env::Refusal::Unresolved(why)))
            if ctx.target.features().kprobe_addr_lookup || is_return =>
        {
            let mut e = ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0);
            if let Fail::Err(e) = &mut e {
                e.hint = Some(why);
            }
            return Err(e);
        }
        Some(Some(crate::env::Refusal::Address(why) | crate::env::Refusal::Unresolved(why))) => {
            let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
            if let Fail::Err(e) = &mut e {
                e.hint = Some(why);
            }
            return Err(e);
        }
        Some(_) => {
            ctx.unchecked.retain(|u| *u != Unchecked::Probeable);
        }
        None => {}
    }
    // register_kprobe() -> arch_prepare_kprobe(): arm64 instructions are 4-byte
    // aligned; a misaligned offset into a function fails with -EINVAL. (An address
    // outside kernel text is not looked at: the kernel defers it as if it were in a
    // module not loaded yet.)
    // 32-bit arm kernels built in ARM mode (Debian's armmp: no
    // CONFIG_THUMB2_KERNEL) refuse a misaligned address the same way (arm
    // 6.12: `p fn_show_mem+0x1a`, `vfs_read+0x2`). A probe that waits for
    // its module is not looked at (`nosuchmod:vfs_read+0x21` is accepted).
    // (a probe on a module known to be loaded is; one on a module of unknown
    // state is left to the kernel, which accepts it when the module is not)
    let aligned_check = match &place {
        KprobePlace::Symbol { symbol, .. } => match symbol.split_once(':') {
            Some((m, n)) => ctx.env.module_symbol(m, n) == Some(Some(true)),
            None => true,
        },
        KprobePlace::Address(_) => false,
    };
    if matches!(ctx.target.arch, Arch::Arm64 | Arch::Arm)
        && aligned_check
        && let KprobePlace::Symbol { offset, .. } = &place
        && offset % 4 != 0
    {
        return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0));
    }
    // riscv64 instructions are 2 or 4 bytes, 2-byte aligned: an odd offset is
    // never an instruction boundary (riscv64-7.2 corpus: `vfs_read+1`, `+3`).
    if ctx.target.arch == Arch::Riscv64
        && aligned_check
        && let KprobePlace::Symbol { offset, .. } = &place
        && offset % 2 != 0
    {
        return Err(ctx.logged(argv, TpErr::BAD_INSN_BNDRY, 1, 0));
    }
    ctx.note(Unchecked::EventName);
    // register_kretprobe(): maxactive 0 becomes max(10, 2 * num_possible_cpus()),
    // unless the probe waits for its module (nothing registered yet).
    let shown_maxactive = match (is_return, maxactive, ctx.target.possible_cpus) {
        (false, _, _) => Some(0),
        (true, m, _) if deferred => Some(m),
        (true, m, _) if m != 0 => Some(m),
        (true, _, Some(cpus)) if ctx.target.features().maxactive_default_10 => {
            Some(10.max(2 * cpus))
        }
        (true, _, Some(cpus)) => Some(cpus),
        (true, _, None) => {
            ctx.note(Unchecked::DefaultMaxactive);
            None
        }
    };
    Ok(ProbeDef {
        group,
        event,
        auto_event,
        kind: ProbeKind::Kprobe {
            place,
            is_return,
            maxactive,
            shown_maxactive,
        },
        args,
        ignored_args,
    })
}

/// `sanitize_event_name()`: ':' and '.' (and '*' where the kernel has
/// the fix) become '_', never the first byte.
fn sanitize_event_name(name: &str, features: Features) -> String {
    name.char_indices()
        .map(|(i, ch)| {
            if i > 0 && (ch == ':' || ch == '.' || (ch == '*' && features.sanitize_star)) {
                '_'
            } else {
                ch
            }
        })
        .collect()
}

fn symbol_exists(ctx: &Ctx, sym: &str) -> Option<bool> {
    match sym.split_once(':') {
        Some((module, name)) => match ctx.env.module_symbol(module, name) {
            Some(Some(found)) => Some(found),
            // module not loaded: the kernel defers the probe until it is.
            Some(None) => Some(false),
            None => None,
        },
        None => ctx.env.symbol_count(sym).map(|n| n > 0),
    }
}

/// Whether `offset` is at the function entry (`arch_adjust_kprobe_addr()`), or
/// `None` when that depends on the code at the address (x86 `endbr64` at +0).
fn entry_offset(ctx: &Ctx, offset: u64) -> Option<bool> {
    match (ctx.target.arch, offset) {
        (_, 0) => Some(true),
        (Arch::X86_64 | Arch::I386, 4) => None,
        _ => Some(false),
    }
}

/// `traceprobe_update_arg()` at registration: `@SYM` must resolve. Kprobes report a
/// failure against the probe point; event probes return it without a log entry.
fn check_arg_symbols(
    ctx: &mut Ctx,
    argv: &Argv,
    args: &[crate::ast::ProbeArg],
    logged: bool,
) -> Result<(), Fail> {
    let fail = |ctx: &Ctx, err: TpErr| {
        if logged {
            ctx.logged(argv, err, 1, 0)
        } else {
            Fail::Err(silent(Silent::Other, &argv.joined))
        }
    };
    fn walk<'a>(f: &'a crate::ast::Fetch, out: &mut Vec<&'a str>) {
        match f {
            crate::ast::Fetch::Symbol(s) => out.push(s),
            crate::ast::Fetch::Deref { inner, .. } => walk(inner, out),
            _ => {}
        }
    }
    let mut syms = Vec::new();
    for a in args {
        walk(&a.fetch, &mut syms);
    }
    for s in syms {
        let name = match s.find(['+', '-']) {
            Some(p) => {
                if kstrtol(&s[p..], 0, ctx.target.arch.bits()).is_err() {
                    return Err(fail(ctx, TpErr::FAIL_REG_PROBE));
                }
                &s[..p]
            }
            None => s,
        };
        match ctx.env.symbol_count(name) {
            Some(0) => return Err(fail(ctx, TpErr::BAD_PROBE_ADDR)),
            Some(_) => {}
            None => ctx.note(Unchecked::ArgSymbols),
        }
    }
    Ok(())
}

fn uprobe(argv: &Argv, ctx: &mut Ctx) -> Result<ProbeDef, Fail> {
    let bits = ctx.target.arch.bits();
    let w0 = argv.words[0];
    let b0 = w0.as_bytes();
    let mut is_return = match b0[0] {
        b'r' => true,
        b'p' => false,
        _ => return Err(Fail::Cancel),
    };
    if argv.words.len() < 2 {
        return Err(Fail::Cancel);
    }
    // __trace_uprobe_create() counts the arguments before it looks at the place.
    if ctx.target.features().too_many_args_error && argv.words.len() - 2 > MAX_TRACE_ARGS {
        ctx.subsystem = "trace_uprobe";
        return Err(ctx.logged(argv, TpErr::TOO_MANY_ARGS, 2, 0));
    }
    let event_name = if b0.get(1) == Some(&b':') {
        Some(&w0[2..])
    } else {
        None
    };
    let w1 = argv.words[1];
    if !w1.contains('/') {
        return Err(Fail::Cancel);
    }
    let colon = match w1.rfind(':') {
        Some(c) if w1.as_bytes().get(c + 1).is_some_and(|d| d.is_ascii_digit()) => c,
        _ => return Err(Fail::Cancel),
    };
    ctx.subsystem = "trace_uprobe";
    let path = &w1[..colon];
    match ctx.env.file_kind(path) {
        Some(FileKind::Missing) => return Err(ctx.logged(argv, TpErr::FILE_NOT_FOUND, 1, 0)),
        Some(FileKind::Other) => return Err(ctx.logged(argv, TpErr::NO_REGULAR_FILE, 1, 0)),
        Some(FileKind::Regular) => {}
        None => ctx.note(Unchecked::File),
    }
    let arg_start = colon + 1;
    let mut spec = &w1[arg_start..];
    let mut ref_ctr_offset = 0;
    if let Some(open) = spec.find('(') {
        let rel_open = arg_start + open;
        let inner_all = &spec[open..];
        let Some(close) = inner_all.find(')') else {
            return Err(ctx.logged(argv, TpErr::REFCNT_OPEN_BRACE, 1, w1.len()));
        };
        let close_abs = rel_open + close;
        if close_abs + 1 != w1.len() {
            return Err(ctx.logged(argv, TpErr::BAD_REFCNT_SUFFIX, 1, close_abs + 1));
        }
        ref_ctr_offset = kstrtoul(&inner_all[1..close], 0, bits)
            .map_err(|_| ctx.logged(argv, TpErr::BAD_REFCNT, 1, rel_open + 1))?;
        spec = &spec[..open];
    }
    if let Some(pct) = spec.find('%') {
        if &spec[pct..] == "%return" && ctx.target.features().return_suffix {
            is_return = true;
            spec = &spec[..pct];
        } else {
            return Err(ctx.logged(argv, TpErr::BAD_ADDR_SUFFIX, 1, arg_start + pct));
        }
    }
    let offset = kstrtoul(spec, 0, bits)
        .map_err(|_| ctx.logged(argv, TpErr::BAD_UPROBE_OFFS, 1, arg_start))?;

    let (group, event) = match event_name {
        Some(n) => parse_event_name(ctx, argv, 0, n, 2)?,
        None => (None, None),
    };
    let group = group.unwrap_or_else(|| "uprobes".to_string());
    let auto_event = event.is_none();
    let event = event.unwrap_or_else(|| {
        let base = path.rsplit('/').next().unwrap_or(path);
        let tail = match base.find(['.', '-', '_']) {
            Some(p) => &base[..p],
            None => base,
        };
        truncate_name(format!("p_{tail}_0x{offset:x}"))
    });
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: is_return,
            kernel: false,
            fentry: false,
            tpoint: false,
            fprobe: false,
        },
    };
    let (args, ignored_args) = parse_args(argv, 2, &actx, ctx, None)?;
    ctx.note(Unchecked::EventName);
    Ok(ProbeDef {
        group,
        event,
        auto_event,
        kind: ProbeKind::Uprobe {
            path: path.to_string(),
            offset,
            ref_ctr_offset,
            is_return,
        },
        args,
        ignored_args,
    })
}

/// A refusal for a symbol no table has, with the names near it.
fn with_suggestion(mut fail: Fail, near: Vec<String>) -> Fail {
    if let Fail::Err(e) = &mut fail
        && !near.is_empty()
    {
        let s = crate::similar::did_you_mean(&near);
        e.hint = Some(s.trim_start_matches("; ").to_string());
    }
    fail
}

fn eprobe(argv: &Argv, ctx: &mut Ctx) -> Result<ProbeDef, Fail> {
    let w0 = argv.words[0];
    if argv.words.len() < 2 || !w0.starts_with('e') {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "event_probe";
    let (group, event) = match w0[1..].find(':') {
        Some(c) => parse_event_name(ctx, argv, 0, &w0[c + 2..], c + 2)?,
        None => (None, None),
    };
    let (system, sys_event) = match parse_event_name(ctx, argv, 1, argv.words[1], 0) {
        Ok((Some(s), Some(e))) => (s, e),
        _ => return Err(ctx.logged(argv, TpErr::NO_EVENT_INFO, 1, 0)),
    };
    let group = group.unwrap_or_else(|| "eprobes".to_string());
    let auto_event = event.is_none();
    let event = event.unwrap_or_else(|| truncate_name(sys_event.clone()));
    let mut argc = argv.words.len();
    let mut filter = None;
    if let Some(i) = argv.words.iter().skip(2).position(|w| *w == "if") {
        let idx = i + 2;
        let words = &argv.words[idx + 1..];
        if words.is_empty() {
            match ctx.env.event_fields(&system, &sys_event) {
                Some(None) => return Err(ctx.logged(argv, TpErr::BAD_ATTACH_EVENT, 1, 0)),
                _ => return Err(ctx.logged(argv, TpErr::NO_EP_FILTER, idx + 1, 0)),
            }
        }
        filter = Some(words.join(" "));
        ctx.note(Unchecked::Filter);
        argc = idx;
    }
    let fields = ctx.env.event_fields(&system, &sys_event);
    match &fields {
        Some(None) => return Err(ctx.logged(argv, TpErr::BAD_ATTACH_EVENT, 1, 0)),
        Some(Some(_)) => {}
        None => ctx.note(Unchecked::AttachedEvent),
    }
    // trace_eprobe_parse_filter(): the filter is parsed before the
    // arguments, by the event filter parser, which logs its own error.
    // (quotes and parentheses are decided without the event's fields)
    if let Some(text) = &filter
        && let Some(verdict) = match ctx.env.event_field_decls(&system, &sys_event) {
            Some(decls) => crate::filter::check(text, &decls),
            None => crate::filter::calc_stack(text.as_bytes())
                .or_else(|| crate::filter::no_field_name(text))
                .map(Err),
        }
    {
        ctx.unchecked.retain(|u| *u != Unchecked::Filter);
        if let Err((e, pos)) = verdict {
            return Err(Fail::Err(ProbeError {
                kind: ErrorKind::Logged(e),
                message: e.message(),
                subsystem: Some("event filter parse error"),
                pos: Some(pos),
                command: text.clone(),
                hint: None,
            }));
        }
    }
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: false,
            kernel: true,
            fentry: false,
            tpoint: true,
            fprobe: false,
        },
    };
    let sub = Argv {
        words: argv.words[..argc].to_vec(),
        starts: argv.starts[..argc].to_vec(),
        joined: argv.joined.clone(),
    };
    let env = ctx.env;
    let mut scope = BtfScope::new(env, ctx.target.arch, None);
    if let Some(Some(fields)) = &fields {
        scope.set_event_fields(fields);
    }
    let (args, ignored_args) = match parse_args(&sub, 2, &actx, ctx, Some(&mut scope)) {
        Ok(parsed) => parsed,
        Err(e) => {
            // trace_eprobe_tp_update_arg(): each argument's `@SYM` is
            // resolved as soon as it is parsed, so a symbol that does not
            // resolve in an earlier argument fails first, silently (x86_64
            // 6.1, seed 23: `+0(@no_such_fn) … $nlink:b43@14/128`).
            let failing = match &e {
                Fail::Err(pe) => pe
                    .pos
                    .map(|pos| sub.starts.iter().take_while(|s| **s <= pos).count()),
                _ => None,
            };
            if let Some(k) = failing.filter(|k| *k > 3 && *k <= sub.words.len()) {
                let prefix = Argv {
                    words: sub.words[..k - 1].to_vec(),
                    starts: sub.starts[..k - 1].to_vec(),
                    joined: sub.joined.clone(),
                };
                let mut scope = BtfScope::new(env, ctx.target.arch, None);
                if let Some(Some(fields)) = &fields {
                    scope.set_event_fields(fields);
                }
                let unchecked = ctx.unchecked.clone();
                let earlier = parse_args(&prefix, 2, &actx, ctx, Some(&mut scope));
                ctx.unchecked = unchecked;
                if let Ok((earlier, _)) = earlier {
                    check_arg_symbols(ctx, argv, &earlier, false)?;
                }
            }
            return Err(e);
        }
    };
    check_arg_symbols(ctx, argv, &args, false)?;
    ctx.note(Unchecked::EventName);
    Ok(ProbeDef {
        group,
        event,
        auto_event,
        kind: ProbeKind::Eprobe {
            system,
            event: sys_event,
            filter,
        },
        args,
        ignored_args,
    })
}

/// `synth_event_create()` / `__create_synth_event()` (trace_events_synth.c) as
/// `dynamic_events` takes it: `s:[synthetic/]NAME TYPE FIELD[; TYPE FIELD]…`.
/// `create_synth_event()`, `__create_synth_event()` and
/// `parse_synth_field()` of kernel/trace/trace_events_synth.c (the same in
/// 6.1 and 7.2): `s:[synthetic/]NAME TYPE FIELD[; TYPE FIELD]...` on the
/// raw command (the kernel does not split it into words first, and logs it
/// as written); an error's caret is where its word first occurs in the
/// command (`err_pos()` is a `strstr()`).
fn synthetic(raw: &str, ctx: &mut Ctx) -> Result<SynthDef, Fail> {
    ctx.subsystem = "synthetic_events";
    let cmd = raw.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let err = |e: TpErr, pos: usize| {
        Fail::Err(ProbeError {
            kind: ErrorKind::Logged(e),
            message: e.message(),
            subsystem: Some("synthetic_events"),
            pos: Some(pos),
            command: cmd.to_string(),
            hint: None,
        })
    };
    let errpos = |word: &str| cmd.find(word).unwrap_or(0);
    let Some(after) = cmd.strip_prefix("s:") else {
        return Err(Fail::Cancel);
    };
    let Some(p) = cmd.find([' ', '\t']) else {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    };
    let fields_text = cmd[p..].trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let mut start = 2;
    if after.contains('/') {
        if !after.starts_with("synthetic/") {
            return Err(err(TpErr::SYNTH_INVALID_DYN_CMD, 0));
        }
        start += "synthetic/".len();
    }
    // check_command(): the name and the first field need three words
    let first = cmd[start..].split(';').next().unwrap_or_default();
    if !first.starts_with('!') && first.split_ascii_whitespace().count() < 3 {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    let name = cmd.get(start..p).unwrap_or_default();
    if name.is_empty() {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    if !good_name(name) {
        return Err(err(TpErr::SYNTH_BAD_NAME, errpos(name)));
    }
    if let Some(listing) = ctx.env.dynamic_events() {
        if listing
            .iter()
            .any(|l| l.starts_with("s:") && listed_name(l).is_some_and(|(_, e)| e == name))
        {
            return Err(err(TpErr::SYNTH_EVENT_EXISTS, errpos(name)));
        }
    } else {
        ctx.note(Unchecked::EventName);
    }
    const SYNTH_FIELDS_MAX: usize = 64;
    let mut fields = Vec::new();
    for part in fields_text.split(';') {
        let argv: Vec<&str> = part.split_ascii_whitespace().collect();
        let mut consumed = 0;
        while argv.len() > consumed {
            let rest = &argv[consumed..];
            let (prefix, ty, fname) = if rest[0] == "unsigned" {
                if rest.len() < 3 {
                    return Err(err(TpErr::SYNTH_INCOMPLETE_TYPE, errpos(rest[0])));
                }
                consumed += 3;
                ("unsigned ", rest[1], Some(rest[2]))
            } else {
                consumed += 2;
                ("", rest[0], rest.get(1).copied())
            };
            let Some(fname) = fname else {
                return Err(err(TpErr::SYNTH_INVALID_FIELD, errpos(ty)));
            };
            let (bare, array) = match fname.find('[') {
                Some(a) => (&fname[..a], &fname[a..]),
                None => (fname, ""),
            };
            if !good_name(bare) {
                return Err(err(TpErr::SYNTH_BAD_NAME, errpos(fname)));
            }
            let full = format!("{prefix}{ty}{array}");
            match synth_field_size(&full) {
                Err(()) if !array.is_empty() => {
                    return Err(err(TpErr::SYNTH_INVALID_ARRAY_SPEC, errpos(fname)));
                }
                Err(()) => return Err(err(TpErr::SYNTH_INVALID_TYPE, errpos(ty))),
                Ok(0) if !(full.contains("char[") || full.contains("long[")) => {
                    return Err(err(TpErr::SYNTH_INVALID_TYPE, errpos(ty)));
                }
                Ok(_) => {}
            }
            if fields.len() == SYNTH_FIELDS_MAX {
                return Err(err(TpErr::SYNTH_TOO_MANY_FIELDS, 0));
            }
            fields.push((full, bare.to_string()));
        }
    }
    if fields.is_empty() {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    Ok(SynthDef {
        name: name.to_string(),
        fields,
    })
}

/// `synth_field_size()`: a field type's size (0: variable, a `char[]` or
/// `long[]`), or an error for a string length that is not one.
fn synth_field_size(ty: &str) -> Result<u32, ()> {
    const SCALARS: &[(&str, u32)] = &[
        ("s64", 8),
        ("u64", 8),
        ("s32", 4),
        ("u32", 4),
        ("s16", 2),
        ("u16", 2),
        ("s8", 1),
        ("u8", 1),
        ("char", 1),
        ("unsigned char", 1),
        ("int", 4),
        ("unsigned int", 4),
        ("long", 8),
        ("unsigned long", 8),
        ("bool", 1),
        ("pid_t", 4),
        ("gfp_t", 4),
    ];
    if let Some((_, n)) = SCALARS.iter().find(|(t, _)| *t == ty) {
        return Ok(*n);
    }
    if let Some(at) = ty.find("char[") {
        // synth_field_string_size()
        let start = at + "char[".len();
        let Some(end) = ty.find(']') else {
            return Err(());
        };
        if end < start || ty.len() > end + 1 {
            return Err(());
        }
        let digits = &ty[start..end];
        if digits.len() > 3 {
            return Err(());
        }
        if digits.is_empty() {
            return Ok(0);
        }
        let n = kstrtouint(digits, 0).map_err(|_| ())?;
        // STR_VAR_LEN_MAX
        return if n > 256 { Err(()) } else { Ok(n) };
    }
    Ok(0)
}

/// `__trace_fprobe_create()` (kernel/trace/trace_fprobe.c, 6.12) and
/// `trace_fprobe_create_internal()` (7.2): `f[N][:[GRP/][EVENT]]
/// [MOD:]SYM[%return] [ARGS]` and `t[:[GRP/][EVENT]] TRACEPOINT [ARGS]`.
fn fprobe(argv: &Argv, ctx: &mut Ctx) -> Result<FprobeDef, Fail> {
    let w0 = argv.words[0];
    let tracepoint = match w0.as_bytes()[0] {
        b'f' => false,
        b't' => true,
        _ => return Err(Fail::Cancel),
    };
    if argv.words.len() < 2 {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "trace_fprobe";
    let event_at = w0[1..].find(':').map(|c| c + 2);
    let mut maxactive = 0u32;
    if ctx.target.features().fprobe_no_maxactive {
        // 7.2: anything between the kind and `:` is a bad maxactive.
        if w0.len() > 1 && w0.as_bytes()[1] != b':' {
            return Err(ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1));
        }
    } else if w0.as_bytes().get(1).is_some_and(|c| c.is_ascii_digit()) {
        let end = event_at.map_or(w0.len(), |e| e - 1);
        let digits = &w0[1..end];
        if digits.len() > MAX_EVENT_NAME_LEN - 1 {
            return Err(ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1));
        }
        maxactive = kstrtouint(digits, 0)
            .ok()
            .filter(|m| *m != 0)
            .ok_or_else(|| ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1))?;
        if maxactive > KRETPROBE_MAXACTIVE_MAX {
            return Err(ctx.logged(argv, TpErr::MAXACT_TOO_BIG, 0, 1));
        }
    }
    // parse_symbol_and_return()
    let w1 = argv.words[1];
    let mut symbol = w1;
    let mut is_return = false;
    if let Some(pct) = w1.find('%') {
        if !tracepoint && &w1[pct..] == "%return" {
            symbol = &w1[..pct];
            is_return = true;
        } else {
            return Err(ctx.logged(argv, TpErr::BAD_ADDR_SUFFIX, 1, pct));
        }
    }
    if !is_return {
        if tracepoint
            && let Some(bad) = symbol.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(ctx.logged(argv, TpErr::BAD_TP_NAME, 1, bad));
        }
        // A `$retval` (not followed by a name character) makes it an exit
        // probe; a tracepoint has none.
        for (i, w) in argv.words.iter().enumerate().skip(2) {
            if let Some(at) = w.find("$retval")
                && !w[at + 7..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            {
                if tracepoint {
                    return Err(ctx.logged(argv, TpErr::RETVAL_ON_PROBE, i, at));
                }
                is_return = true;
                break;
            }
        }
    }
    if !is_return && maxactive != 0 {
        return Err(ctx.logged(argv, TpErr::MAXACT_NO_RETURN, 0, 1));
    }
    let (group, event) = match event_at {
        Some(at) => parse_event_name(ctx, argv, 0, &w0[at..], at)?,
        None => (None, None),
    };
    let group =
        group.unwrap_or_else(|| if tracepoint { "tracepoints" } else { "fprobes" }.to_string());
    let auto_event = event.is_none();
    let event = match event {
        Some(e) => e,
        None => {
            let name = if tracepoint {
                let lead = if symbol.starts_with(|c: char| c.is_ascii_digit()) {
                    "_"
                } else {
                    ""
                };
                format!("{lead}{symbol}")
            } else {
                format!("{symbol}__{}", if is_return { "exit" } else { "entry" })
            };
            sanitize_event_name(&truncate_name(name), ctx.target.features())
        }
    };
    if tracepoint {
        // Whether the tracepoint exists only the running kernel knows.
        ctx.note(Unchecked::SymbolExists);
    }
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: is_return,
            kernel: true,
            fentry: !is_return,
            tpoint: false,
            fprobe: true,
        },
    };
    let env = ctx.env;
    let stub = tracepoint.then(|| format!("__probestub_{symbol}"));
    let mut scope = BtfScope::new(
        env,
        ctx.target.arch,
        Some(stub.as_deref().unwrap_or(symbol)),
    );
    scope.set_tracepoint(tracepoint);
    let (args, ignored_args) = parse_args(argv, 2, &actx, ctx, Some(&mut scope))?;
    // register_fprobe(): the symbol (or glob) must name functions ftrace
    // can attach to.
    let attachable = |ctx: &mut Ctx| -> Result<(), Fail> {
        let exists = (!symbol.contains(':'))
            .then(|| ctx.env.ftrace_matches(symbol))
            .flatten()
            .or_else(|| symbol_exists(ctx, symbol));
        match exists {
            Some(false) if ctx.target.features().fprobe_no_match_enoent => {
                return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
            }
            Some(false) => return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0)),
            Some(true) => {}
            None => ctx.note(Unchecked::SymbolExists),
        }
        ctx.note(Unchecked::Probeable);
        Ok(())
    };
    let registered_now = ctx.target.features().fprobe_registered_at_creation;
    if !tracepoint && !registered_now {
        attachable(ctx)?;
    }
    // A tracepoint the kernel does not have is taken as one of a module to
    // come (TRACEPOINT_STUB): where registration waits for the enable
    // (7.2), its arguments' symbols are not looked up (arm64 7.2, seed 23:
    // `t sys_exit_llistxattr foo=@pa[am_set_copystring` accepted); where it
    // happens now (6.12), they are, before the stub is left waiting.
    // register_trace_fprobe(): a name another event has (a tracepoint's
    // own, `t:sched/ sched_stat_iowait`) is taken when no fprobe event of
    // that name is there to append to (x86_64 7.2, seed 23).
    if name_taken_by_another_event(ctx, &group, &event) {
        return Err(ctx.logged(argv, TpErr::EVENT_EXIST, 0, 0));
    }
    // __register_trace_fprobe() (kernels that register at creation): the
    // arguments' symbols first (traceprobe_update_arg(): -ENOENT, logged
    // as "Invalid probed address or symbol" at the probed symbol), before
    // a tracepoint not loaded yet is left waiting and before
    // register_fprobe() looks the function up (x86_64 6.12, seed 41:
    // `t:uprobes/ sys_enter_time a36=@no_such_fn_27:x64` and `f
    // snapshot_write_finalize+4 @__blo` both refused so)
    if registered_now {
        check_arg_symbols(ctx, argv, &args, true)?;
        if !tracepoint {
            attachable(ctx)?;
        }
    }
    // A tracepoint probe is an fprobe on the tracepoint's `__probestub_TP`:
    // a stub ftrace cannot attach to fails to register (the tracepoints
    // defined in kernel/trace/, built without -pg: power-traces.c and
    // rpm-traces.c; x86_64 6.12, seed 23: cpu_frequency, pm_qos_add_request,
    // wakeup_source_deactivate).
    if let Some(stub) = &stub
        && ctx.target.features().fprobe_registered_at_creation
        && symbol_exists(ctx, stub) == Some(true)
        && ctx.env.ftrace_matches(stub) == Some(false)
    {
        let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
        if let Fail::Err(e) = &mut e {
            e.hint = Some(format!(
                "{stub} has no ftrace location (notrace), so the tracepoint cannot be probed \
                 this way; enable the tracepoint itself (events/…/{symbol})"
            ));
        }
        return Err(e);
    }
    ctx.note(Unchecked::EventName);
    Ok(FprobeDef {
        tracepoint,
        symbol: symbol.to_string(),
        is_return,
        maxactive,
        probe: ProbeDef {
            group,
            event,
            auto_event,
            kind: ProbeKind::Kprobe {
                place: KprobePlace::Symbol {
                    symbol: symbol.to_string(),
                    offset: 0,
                },
                is_return,
                maxactive,
                shown_maxactive: Some(maxactive),
            },
            args,
            ignored_args,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Kallsyms, Offline};

    fn check(line: &str) -> Checked {
        check_line(line, Target::new(Arch::X86_64), &Offline)
    }

    fn err(line: &str, target: Target, env: &dyn Environment) -> (ErrorKind, Option<usize>) {
        let e = check_line(line, target, env).definition.unwrap_err();
        (e.kind, e.pos)
    }

    #[test]
    fn newlines_and_nul_never_pass_other_control_characters_read_as_the_kernel() {
        for l in ["p foo\n-:someone_else", "p vfs_read\0"] {
            let c = check(l);
            assert_eq!(
                c.definition.unwrap_err().kind,
                ErrorKind::Silent(Silent::ControlChar),
                "{l:?}"
            );
        }
        // argv_split() splits at isspace(): \t, \v, \f and \r separate words
        // like a space; other control bytes are part of a word (a symbol
        // with ESC or DEL in it is no symbol; a line starting with DEL is no
        // kind of event: x86_64 7.2 logged "No matching dynamic event type").
        assert!(check("p\tvfs_read").accepted());
        assert!(check("p vfs_read\r").accepted());
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(7, 2);
        let e = check_line("\x7fp vfs_read", t, &Offline)
            .definition
            .unwrap_err();
        assert_eq!(e.message, "No matching dynamic event type");
        assert!(check("p vfs\x1b[0m").accepted());
    }

    #[test]
    fn pd_offsets_of_the_64_bit_6_12_and_7_2_builds() {
        // conform seed 7: x86_64 6.12 read `%ip:%pD` back with +0x48, the
        // offset of struct file's f_path.dentry (not the +0x40 guessed)
        for (arch, reg) in [(Arch::X86_64, "%ip"), (Arch::Arm64, "%lr")] {
            for k in [KernelVersion::new(6, 12), KernelVersion::new(7, 2)] {
                let mut t = Target::new(arch);
                t.kernel = k;
                let c = check_line(&format!("p:g/e vfs_read {reg}:%pD"), t, &Offline);
                assert_eq!(
                    c.normalized(arch).as_deref(),
                    Some(format!("p:g/e vfs_read arg1=+0x0(+0x28(+0x48({reg}))):string").as_str()),
                    "{arch:?} {k:?}"
                );
            }
        }
    }

    #[test]
    fn arg_star_without_btf_args_follows_the_6_12_backport() {
        // 32-bit arm has no BTF arguments. Debian's arm 6.12.95 (corpus
        // fixtures) leaves `$arg*` to the classic parser ("Invalid
        // $-valiable"); 6.12.117 (CI's conform run, seed 1 index 1562) scans
        // the `$arg` words first and refuses `$arg*` at the last of them.
        let at = |sub: u32, line: &str| {
            let mut t = Target::new(Arch::Arm);
            t.kernel = KernelVersion::with_sublevel(6, 12, sub);
            let e = check_line(line, t, &Offline).definition.unwrap_err();
            (e.message, e.pos)
        };
        let line = "p:ev vfs_read $arg1 x $arg*";
        assert_eq!(at(95, line).0, "Invalid $-valiable specified");
        assert_eq!(
            at(117, line),
            ("BTF is not available or not supported", Some(22))
        );
        assert_eq!(
            at(117, "r:ev vfs_read $arg0 a=\\0 $arg*").0,
            "BTF is not available or not supported"
        );
    }

    #[test]
    fn comments_blank_lines_and_spacing() {
        assert!(matches!(check("").definition, Ok(Definition::Empty)));
        assert!(matches!(
            check("   # only a comment").definition,
            Ok(Definition::Empty)
        ));
        let c = check("  p   vfs_read   %di  # comment");
        assert_eq!(c.command, "p vfs_read %di");
        assert_eq!(
            c.normalized(Arch::X86_64).as_deref(),
            Some("p:kprobes/p_vfs_read_0 vfs_read arg1=%di")
        );
        let long = format!("p vfs_read {}", "x".repeat(MAX_LINE_LEN));
        assert_eq!(
            check(&long).definition.unwrap_err().kind,
            ErrorKind::Silent(Silent::LineTooLong)
        );
    }

    #[test]
    fn removals() {
        for (l, ok) in [
            ("-:myev", true),
            ("-:grp/myev", true),
            ("-:grp/", true),
            ("-:", false),
            ("-myev", false),
            ("-:grp/ev arg1=%di", true),
        ] {
            assert_eq!(check(l).accepted(), ok, "{l}");
        }
        match check("-:grp/ev x").definition {
            Ok(Definition::Remove(r)) => {
                assert_eq!((r.group.as_deref(), r.event.as_str()), (Some("grp"), "ev"));
                assert_eq!(r.args, vec!["x"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dispatch_by_file() {
        let mut t = Target::new(Arch::X86_64);
        t.interface = Interface::KprobeEvents;
        assert_eq!(
            err("p /bin/ls:0x10", t, &Offline),
            (ErrorKind::Silent(Silent::WrongFile), None)
        );
        assert_eq!(
            err("e sched.sched_switch", t, &Offline).0,
            ErrorKind::Silent(Silent::WrongFile)
        );
        t.interface = Interface::UprobeEvents;
        assert_eq!(
            err("p vfs_read", t, &Offline).0,
            ErrorKind::Silent(Silent::WrongFile)
        );
        // uprobe_events has no maxactive: the digits are ignored with the name.
        assert!(check_line("r2 /bin/ls:0x10", t, &Offline).accepted());
        // dynamic_events asks the kprobe parser first, which rejects the digits.
        t.interface = Interface::DynamicEvents;
        assert_eq!(
            err("p2 /bin/ls:0x10", t, &Offline),
            (ErrorKind::Logged(TpErr::MAXACT_NO_KPROBE), Some(1))
        );
        assert_eq!(
            err("x vfs_read", t, &Offline).0,
            ErrorKind::Silent(Silent::NotAProbe)
        );
        assert_eq!(
            err("p:only", t, &Offline).0,
            ErrorKind::Silent(Silent::NotAProbe)
        );
        // Synthetic events are checked as trace_events_synth.c takes them
        // (arm-7.2 corpus).
        let c = check_line("s:syn int x; char comm[16]", t, &Offline);
        assert_eq!(
            c.normalized(Arch::X86_64).as_deref(),
            Some("s:synthetic/syn\tint x; char[16] comm")
        );
        assert_eq!(
            err("s:syn no_type x", t, &Offline),
            (ErrorKind::Logged(TpErr::SYNTH_INVALID_TYPE), Some(6))
        );
    }

    #[test]
    fn kallsyms_decides_symbols() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T vfs_read\nffffffff81000100 t name_show\nffffffff81000200 t name_show\n\
             ffffffff81000300 D jiffies\nffffffffc0000000 t ext4_sync_fs\t[ext4]\n",
        );
        let t = Target::new(Arch::X86_64);
        let ok = |l: &str| check_line(l, t, &k).accepted();
        assert!(ok("p vfs_read @jiffies"));
        assert!(ok("p ext4:ext4_sync_fs"));
        assert!(
            ok("p xfs:xfs_foo"),
            "a module that is not loaded defers the probe"
        );
        let logged = |e| ErrorKind::Logged(e);
        assert_eq!(
            err("p nope", t, &k),
            (logged(TpErr::BAD_PROBE_ADDR), Some(2))
        );
        assert_eq!(
            err("p name_show", t, &k),
            (logged(TpErr::NON_UNIQ_SYMBOL), Some(2))
        );
        assert_eq!(
            err("p ext4:nope", t, &k),
            (logged(TpErr::BAD_PROBE_ADDR), Some(2))
        );
        assert_eq!(
            err("p vfs_read @nope", t, &k),
            (logged(TpErr::BAD_PROBE_ADDR), Some(2))
        );
        assert_eq!(
            err("p vfs_read @jiffies+x", t, &k),
            (logged(TpErr::FAIL_REG_PROBE), Some(2))
        );
        let c = check_line("p vfs_read", t, &k);
        assert!(!c.unchecked.contains(&Unchecked::SymbolExists));
        let c = check_line("p vfs_read", t, &Offline);
        assert!(c.unchecked.contains(&Unchecked::SymbolExists));
    }

    #[test]
    fn module_symbol_starting_with_a_digit_waits_for_its_module() {
        // arm 6.12, seed 41: the kernel took the symbol (a module that is not
        // loaded defers it) and refused the immediate string's bitfield type.
        let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
        for kernel in [
            KernelVersion::new(5, 10),
            KernelVersion::new(6, 1),
            KernelVersion::new(6, 12),
            KernelVersion::new(7, 2),
        ] {
            let t = Target {
                kernel,
                ..Target::new(Arch::X86_64)
            };
            assert!(
                check_line("p 0xc045c364[=\\:symstr", t, &k).accepted(),
                "{kernel:?}"
            );
            assert!(
                check_line("p 1mod:vfs_read", t, &k).accepted(),
                "{kernel:?}"
            );
        }
        let t = Target {
            kernel: KernelVersion::new(6, 12),
            ..Target::new(Arch::Arm)
        };
        let l = r#"p:grp82/ 0xc045c364[=\:symstr a1=\"1234567":b26@38/64"#;
        assert_eq!(
            err(l, t, &k),
            (ErrorKind::Logged(TpErr::COMM_NOT_STRING), Some(44))
        );
    }

    #[test]
    fn empty_symbol_is_no_symbol() {
        // Found by fuzzing: "%return" alone left an empty symbol that was accepted.
        let t = Target::new(Arch::X86_64);
        // Also found by fuzzing: "0+000" is not a number, so it is a symbol "0".
        for l in ["p %return", "r -0", "p -0%return", "p 0+000", "p 0xzz"] {
            assert_eq!(
                err(l, t, &Offline),
                (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(2)),
                "{l}"
            );
        }
    }

    #[test]
    fn argument_limits() {
        let args: Vec<String> = (0..130).map(|i| format!("a{i}=%di:u8")).collect();
        let c = check(&format!("p vfs_read {}", args.join(" ")));
        match c.definition {
            Ok(Definition::Probe(p)) => assert_eq!((p.args.len(), p.ignored_args), (128, 2)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err(
                "p vfs_read %di arg1=%si",
                Target::new(Arch::X86_64),
                &Offline
            ),
            (ErrorKind::Logged(TpErr::USED_ARG_NAME), Some(15))
        );
    }

    #[test]
    fn arg_numbers_need_a_function_entry() {
        let t = Target::new(Arch::Arm64);
        assert!(check_line("p vfs_read $arg1 $arg8", t, &Offline).accepted());
        for l in ["r vfs_read $arg1", "p vfs_read+8 $arg1", "p 0x1000 $arg1"] {
            assert_eq!(
                err(l, t, &Offline).0,
                ErrorKind::Logged(TpErr::BAD_VAR),
                "{l}"
            );
        }
        // 32-bit arm has no $argN at all.
        let t = Target::new(Arch::Arm);
        assert_eq!(
            err("p vfs_read $arg1", t, &Offline).0,
            ErrorKind::Logged(TpErr::BAD_VAR)
        );
    }

    #[test]
    fn arm64_offsets_are_word_aligned() {
        let t = Target::new(Arch::Arm64);
        assert_eq!(
            err("p vfs_read+2", t, &Offline),
            (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(2))
        );
        assert!(check_line("p vfs_read+8", t, &Offline).accepted());
    }

    #[test]
    fn an_eprobe_argument_symbol_fails_before_later_arguments_parse() {
        // x86_64 6.1, conform seed 23: the kernel resolves `@SYM` as each
        // argument is parsed, so `@no_such_fn` fails (nothing logged)
        // before the bad bitfield of the next argument is read.
        let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
        let t = Target::new(Arch::X86_64);
        let line = "e:grp/ev ext4.ext4_evict_inode +0(@no_such_fn) $nlink:b43@14/128";
        assert!(matches!(err(line, t, &k).0, ErrorKind::Silent(_)));
        // the other way round the bitfield is reported
        let line = "e:grp/ev ext4.ext4_evict_inode $nlink:b43@14/128 +0(@no_such_fn)";
        assert_eq!(err(line, t, &k).0, ErrorKind::Logged(TpErr::BAD_TYPE));
        let line = "e:grp/ev ext4.ext4_evict_inode +0(@vfs_read) $nlink:b43@14/128";
        assert_eq!(err(line, t, &k).0, ErrorKind::Logged(TpErr::BAD_TYPE));
    }

    #[test]
    fn a_tracepoint_to_come_does_not_resolve_its_arguments_symbols() {
        let k = Kallsyms::parse("ffffffff81000000 T __probestub_sched_switch\n");
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(7, 2);
        assert!(check_line("t sys_exit_llistxattr foo=@pa[am_set:u64", t, &k).accepted());
        // 7.2 resolves no argument symbol before the probe is enabled
        // (x86_64 7.2: `t:a2 sched_switch @nosuchsym_x` taken, its enable
        // refused); 6.12 resolves them when the probe is created
        assert!(check_line("t sched_switch foo=@pa[am_set:u64", t, &k).accepted());
        t.kernel = KernelVersion::new(6, 12);
        assert!(!check_line("t sched_switch foo=@pa[am_set:u64", t, &k).accepted());
    }

    #[test]
    fn address_zero_fails_to_register_unless_an_argument_symbol_makes_it_wait() {
        // x86_64 7.2, seed 59: `r:ev29611 0` refused ("Failed to register
        // probe event" at the address), as `p:addrev 0` in every corpus;
        // with kallsyms known, 0 is in no symbol, which made it wait
        let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
        for kernel in [KernelVersion::new(5, 10), KernelVersion::new(7, 2)] {
            let mut t = Target::new(Arch::X86_64);
            t.kernel = kernel;
            for line in ["r:ev29611 0", "p:addrev 0x0", "p 0 a=%ax"] {
                for env in [&Offline as &dyn Environment, &k] {
                    let (kind, pos) = err(line, t, env);
                    assert_eq!(
                        (kind, pos),
                        (
                            ErrorKind::Logged(TpErr::FAIL_REG_PROBE),
                            line.find(" 0").map(|p| p + 1)
                        ),
                        "{line} {kernel:?}"
                    );
                }
            }
            // an argument's missing symbol fails first with -ENOENT, which a
            // probe without a symbol takes as a module to come
            assert!(
                check_line("p:ev 0 @no_such_sym_x", t, &k).accepted(),
                "{kernel:?}"
            );
        }
    }

    #[test]
    fn a_tracepoint_whose_probestub_is_notrace_fails_to_register() {
        struct Env;
        impl Environment for Env {
            fn symbol_count(&self, name: &str) -> Option<usize> {
                Some(usize::from(
                    name.contains("cpu_frequency") || name.contains("sched_switch"),
                ))
            }
            fn ftrace_matches(&self, pattern: &str) -> Option<bool> {
                Some(pattern == "__probestub_sched_switch")
            }
        }
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(6, 12);
        let c = check_line("t:ev.x cpu_frequency", t, &Env);
        let e = c.definition.unwrap_err();
        assert_eq!(
            (e.kind, e.pos),
            (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(7))
        );
        assert!(check_line("t:ev.y sched_switch", t, &Env).accepted());
        // 7.2 attaches it only when enabled (seed 23: taken)
        t.kernel = KernelVersion::new(7, 2);
        assert!(check_line("t:ev.x cpu_frequency", t, &Env).accepted());
    }

    #[test]
    fn a_tracepoint_probe_named_as_an_existing_event_is_refused() {
        // x86_64 7.2, seed 23: `t:sched/ sched_stat_iowait` is named
        // sched/sched_stat_iowait, the tracepoint's own event.
        struct Env;
        impl Environment for Env {
            fn symbol_count(&self, name: &str) -> Option<usize> {
                Some(usize::from(name.contains("sched_stat_iowait")))
            }
            fn ftrace_matches(&self, _: &str) -> Option<bool> {
                Some(true)
            }
            fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
                Some((group, event) == ("sched", "sched_stat_iowait"))
            }
            fn dynamic_events(&self) -> Option<Vec<String>> {
                Some(Vec::new())
            }
        }
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(7, 2);
        let e = check_line("t:sched/ sched_stat_iowait a19=+0($arg10)", t, &Env)
            .definition
            .unwrap_err();
        assert_eq!(
            (e.kind, e.pos),
            (ErrorKind::Logged(TpErr::EVENT_EXIST), Some(0))
        );
        assert!(check_line("t:mine/ sched_stat_iowait", t, &Env).accepted());
        assert!(
            check_line("f:sched/sched_stat_iowait vfs_read", t, &Env)
                .definition
                .is_err()
        );
    }

    #[test]
    fn fprobe_argument_symbols_are_resolved_only_where_registered_at_creation() {
        // arm64 7.2, seed 23: `f gnet_stats_copy_queue @update_wall_tie`
        // taken (the fprobe registers when enabled); 6.12 resolves it.
        let k = Kallsyms::parse("ffffffff81000000 T gnet_stats_copy_queue\n");
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(7, 2);
        assert!(check_line("f gnet_stats_copy_queue @update_wall_tie", t, &k).accepted());
        t.kernel = KernelVersion::new(6, 12);
        assert!(!check_line("f gnet_stats_copy_queue @update_wall_tie", t, &k).accepted());
    }

    #[test]
    fn automatic_names_make_a_star_an_underscore_where_the_kernel_does() {
        // 7.2 and 6.12.117: `f kbd*` is fprobes/kbd___entry; 6.1 keeps '*'
        let mut t = Target::new(Arch::X86_64);
        t.kernel = KernelVersion::new(7, 2);
        let d = format!(
            "{:?}",
            check_line("r nosuchmod:vfs_re*d", t, &Offline).definition
        );
        assert!(d.contains("\"r_nosuchmod_vfs_re_d_0\""), "{d}");
        let d = format!("{:?}", check_line("f kbd*", t, &Offline).definition);
        assert!(d.contains("\"kbd___entry\""), "{d}");
        let t = Target::new(Arch::X86_64);
        let d = format!(
            "{:?}",
            check_line("r nosuchmod:vfs_re*d", t, &Offline).definition
        );
        assert!(d.contains("\"r_nosuchmod_vfs_re*d_0\""), "{d}");
    }

    #[test]
    fn before_the_address_lookup_an_address_in_no_symbol_is_not_text() {
        // arm64 5.10.223, seed 23: `p 0xffff` and `skip_pgd+0x100000` are
        // "Failed to register probe event"; 6.1 defers the first and calls
        // the second "Invalid probed address or symbol".
        struct Env;
        impl Environment for Env {
            fn kprobe_address(&self, _: u64, _: bool) -> Option<crate::env::AddressFate> {
                Some(crate::env::AddressFate::Deferred)
            }
            fn kprobe_refusal(&self, _: &str, _: u64) -> Option<Option<crate::env::Refusal>> {
                Some(Some(crate::env::Refusal::Unresolved(
                    "outside the text".into(),
                )))
            }
            // in no symbol: -ENOENT, as the live view answers
            fn kprobe_entry(&self, _: &str, _: u64) -> Option<Option<bool>> {
                Some(None)
            }
        }
        let mut old = Target::new(Arch::Arm64);
        old.kernel = KernelVersion::with_sublevel(5, 10, 223);
        let new = Target::new(Arch::Arm64);
        let reg = ErrorKind::Logged(TpErr::FAIL_REG_PROBE);
        assert_eq!(err("p 0xffff", old, &Env).0, reg);
        assert!(check_line("p 0xffff", new, &Env).accepted());
        assert_eq!(err("p skip_pgd+0x100000", old, &Env).0, reg);
        assert_eq!(
            err("p skip_pgd+0x100000", new, &Env).0,
            ErrorKind::Logged(TpErr::BAD_PROBE_ADDR)
        );
        // ... but a return probe is looked up by register_kretprobe()'s
        // kprobe_on_func_entry() first (arm64 5.10.223, seed 41: `r:ip/ev
        // 0xfff` taken, waiting like a module's; `r
        // acpi_install_table+0x100000` "Invalid probed address or symbol")
        for t in [old, new] {
            let c = check_line("r:ip/ev 0xfff", t, &Env);
            assert!(c.accepted(), "{:?} {:?}", t.kernel, c.definition);
            assert_eq!(
                err("r acpi_install_table+0x100000", t, &Env).0,
                ErrorKind::Logged(TpErr::BAD_PROBE_ADDR)
            );
        }
    }

    #[test]
    fn arm_kernels_in_arm_mode_take_word_aligned_offsets() {
        // arm 6.12 (Debian armmp, no CONFIG_THUMB2_KERNEL): `fn_show_mem+0x1a`
        // and `vfs_read+0x2` are refused at registration, `+0x100000` taken.
        let t = Target::new(Arch::Arm);
        assert_eq!(
            err("p vfs_read+0x1a", t, &Offline),
            (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(2))
        );
        assert!(check_line("p vfs_read+0x100000", t, &Offline).accepted());
    }

    #[test]
    fn a_probe_waiting_for_its_module_is_not_aligned() {
        // arm64 5.10 and riscv64 6.12 accept `nosuchmod:vfs_read+0x21`: the
        // symbol is not found, the module is not loaded, the probe waits.
        let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
        for arch in [Arch::Arm64, Arch::Arm, Arch::Riscv64] {
            let t = Target::new(arch);
            assert!(
                check_line("p:ev nosuchmod:vfs_read+0x21", t, &k).accepted(),
                "{arch:?}"
            );
            assert!(check_line("p:ev nosuchmod:vfs_read+0x21", t, &Offline).accepted());
        }
    }

    #[test]
    fn without_the_symbol_count_an_impossible_symbol_fails_late() {
        // arm64 5.10.223 (no validate_probe_symbol()): `54x` is looked up only
        // at registration, so the empty event name is refused first.
        let mut t = Target::new(Arch::Arm64);
        t.kernel = KernelVersion::with_sublevel(5, 10, 223);
        assert_eq!(
            err("r:kprobes/ 54x/ev25330 x", t, &Offline),
            (ErrorKind::Logged(TpErr::NO_EVENT_NAME), Some(10))
        );
        assert_eq!(
            err("p:e1 54x", t, &Offline),
            (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(5))
        );
        // 6.1 counts the symbol before the name.
        let t = Target::new(Arch::Arm64);
        assert_eq!(
            err("r:kprobes/ 54x/ev25330 x", t, &Offline),
            (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(11))
        );
    }
}
