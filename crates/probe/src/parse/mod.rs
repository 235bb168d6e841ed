//! Parsing and checking a whole definition line as the kernel's writers do:
//! comment stripping and line splitting (`trace_parse_run_command()`), word splitting
//! (`argv_split()`), dispatch between probe kinds (`create_dyn_event()`), and
//! `__trace_kprobe_create()`, `__trace_uprobe_create()`, `__trace_eprobe_create()`,
//! `dyn_event_release()` from kernel/trace/ (Linux 6.1).
//!
//! Errors carry the kernel's message and the caret position `error_log` would show.
//! Checks that need the target kernel go through [`Environment`]; when it cannot
//! answer, the check is listed in [`Checked::unchecked`] instead of guessed.
//!
//! This file holds the line, its words and the dispatch (and removals); each
//! kind has its own file: kprobe.rs (`p`/`r` on kernel code), uprobe.rs
//! (`p`/`r` on a file), eprobe.rs (`e`), fprobe.rs (`f`/`t`) and synthetic.rs
//! (`s`); args.rs parses and resolves the arguments they share, names.rs
//! checks and makes event names.

mod args;
mod eprobe;
mod fprobe;
mod kprobe;
mod names;
mod synthetic;
mod uprobe;

use crate::arch::Arch;
use crate::ast::{Definition, RemoveDef, Span};
use crate::env::Environment;
use crate::error::{ErrorKind, ProbeError, Silent, TpErr};
use crate::kernel::{Features, KernelVersion};
use crate::kstrtox::kstrtouint;
use eprobe::eprobe;
use fprobe::fprobe;
use kprobe::kprobe;
use synthetic::synthetic;
use uprobe::uprobe;

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
    /// The event probe filter's verdict, which the kernel decides by chance:
    /// building its program reads memory before it (`a || b &&`, kernels that
    /// take a dangling operator).
    FilterByChance,
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
    /// Whether the target's build has fprobe events (`f`, `t`) and
    /// synthetic events (`s`): offline, the version says a series has them,
    /// not whether a build enabled them (CONFIG_FPROBE_EVENTS,
    /// CONFIG_SYNTH_EVENTS; Debian's arm64 6.12 refuses every `f` line and
    /// riscv64 6.12 every `s` line with EINVAL and nothing logged, conform
    /// seeds 1203 and 1205, offline).
    Build,
    /// Where the kernel puts the caret of this error: it computes the
    /// position from a pointer (`parse_btf_field()` adds `NULL - fieldname`
    /// past a BTF variable's last member), so it lands anywhere in the
    /// command or nowhere (riscv64 7.2, conform seed 20261221, index 42270:
    /// at 50 of 60 bytes; most often none).
    ErrorPosition,
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
            Unchecked::FilterByChance => {
                "the event probe filter: it ends in && after ||, and this kernel's filter \
                 parser then reads memory before its program (a kernel bug), so it takes the \
                 filter or refuses it with \"Error\" by chance; drop the trailing &&"
            }
            Unchecked::RemoveTarget => "whether any event matches the removal",
            Unchecked::AddressName => {
                "the address as read back and any generated name (the kernel hashes %p)"
            }
            Unchecked::DefaultMaxactive => "the default maxactive shown on readback (give --cpus)",
            Unchecked::Btf => "the probed function's BTF (parameter names and types; give --btf)",
            Unchecked::Build => {
                "whether the target's build has this kind of event (CONFIG_FPROBE_EVENTS, \
                 CONFIG_SYNTH_EVENTS; its tracefs README says)"
            }
            Unchecked::ErrorPosition => {
                "where the kernel puts this error's caret (it computes the position from a \
                 pointer past the BTF variable's last member: anywhere in the command, or none)"
            }
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
    /// [`Ctx::logged`] for an argument's error, whose offset may be the
    /// garbage one ([`crate::fetch::NO_CARET`]): then where the kernel puts
    /// the caret is noted as unknowable.
    fn arg_logged(&mut self, argv: &Argv, err: TpErr, index: usize, offset: usize) -> Fail {
        if offset == crate::fetch::NO_CARET && index < argv.words.len() {
            self.note(Unchecked::ErrorPosition);
        }
        self.logged(argv, err, index, offset)
    }

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

/// Why a kprobe's line is taken by no kind of event on a kernel without
/// kprobe events.
pub const NO_KPROBES_WHY: &str = "it was built without CONFIG_KPROBES / \
     CONFIG_KPROBE_EVENTS (tracefs has no kprobe_events); uprobes (PATH:OFFSET) may \
     still work";

/// Why an event probe's line is taken by no kind of event on a kernel
/// whose README lists `e:` but that was built without them.
pub const NO_EPROBES_WHY: &str = "it was built without CONFIG_EPROBE_EVENTS \
     (its tracefs README lists e: regardless)";

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
    // a kprobe's or an event probe's line where the kernel has no such
    // kind: say why no kind took it
    let features = target.features();
    // (`p`, `r4:ev`, `e:g/ev`: the kind's own first word, not any word
    // that starts with its letter)
    let kind_word = |w: &str, kinds: &[char]| {
        w.strip_prefix(kinds)
            .map(|rest| rest.trim_start_matches(|c: char| c.is_ascii_digit()))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    };
    let missing_kind = match argv.words.first() {
        Some(w) if !features.kprobes && kind_word(w, &['p', 'r']) => {
            Some(("this kernel has no kprobe events", NO_KPROBES_WHY))
        }
        Some(w) if !features.eprobes && kind_word(w, &['e']) => Some((
            "this kernel has no event probes (e:)",
            if target.kernel.at_least(5, 15) {
                NO_EPROBES_WHY
            } else {
                "event probes (e:) came with Linux 5.15"
            },
        )),
        _ => None,
    };
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
                hint: missing_kind.map(|(_, why)| why.to_string()),
            })
        }
        Err(Fail::Cancel) => {
            let mut e = silent(
                if target.interface == Interface::DynamicEvents {
                    Silent::NotAProbe
                } else {
                    Silent::WrongFile
                },
                &argv.joined,
            );
            if let Some((message, why)) = missing_kind {
                e.message = message;
                e.hint = Some(why.to_string());
            }
            Err(e)
        }
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
            if ctx.target.features().kprobes {
                match kprobe(argv, ctx) {
                    Err(Fail::Cancel) => {}
                    other => return other.map(Definition::Probe),
                }
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
                    other => {
                        // offline, by the version: whether this build has
                        // fprobe events only its README says
                        if ctx.target.features.is_none() {
                            ctx.note(Unchecked::Build);
                        }
                        return other.map(Definition::Fprobe);
                    }
                }
            }
            if ctx.target.features().synthetic_events {
                match synthetic(raw, ctx) {
                    Err(Fail::Cancel) => {}
                    other => {
                        // as for fprobes: the version, not the build
                        // (riscv64 6.12 refuses every `s:` line, seed 1205)
                        if ctx.target.features.is_none() {
                            ctx.note(Unchecked::Build);
                        }
                        return other.map(Definition::Synthetic);
                    }
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
    if event.is_empty() && (group.is_none() || !ctx.target.features().remove_whole_group) {
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

/// The digits of `rN:`/`fN:` (or `rN`), as `trace_kprobe_create()` and
/// `trace_fprobe_create()` read them: at most `MAX_EVENT_NAME_LEN - 1`
/// of them, a number `kstrtouint()` takes, not 0 ("Invalid maxactive
/// number"), at most `KRETPROBE_MAXACTIVE_MAX` ("Maxactive is too big").
fn maxactive_digits(
    argv: &Argv,
    ctx: &mut Ctx,
    w0: &str,
    event_at: Option<usize>,
) -> Result<u32, Fail> {
    let end = event_at.map_or(w0.len(), |e| e - 1);
    let digits = &w0[1..end];
    if digits.len() > MAX_EVENT_NAME_LEN - 1 {
        return Err(ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1));
    }
    let maxactive = kstrtouint(digits, 0)
        .ok()
        .filter(|m| *m != 0)
        .ok_or_else(|| ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1))?;
    // the kernel's maxactive is an `int` that kstrtouint() fills: from
    // 2^31 on it is negative and passes this check (arm 7.2, conform seed
    // 20261304: `r0xc105d0e8 \x` went on to "Invalid probed address or
    // symbol")
    if maxactive as i32 > KRETPROBE_MAXACTIVE_MAX as i32 {
        return Err(ctx.logged(argv, TpErr::MAXACT_TOO_BIG, 0, 1));
    }
    Ok(maxactive)
}

#[cfg(test)]
mod tests;
