//! One definition's two answers, the kernel's and ktrace's, held against each
//! other field by field: the verdict, the error_log message and caret of a
//! refusal, the readback line and the format file of an accepted probe.
//!
//! A disagreement is sorted by [`Level`]: *registration* when the refusing
//! side's reason is about the running kernel's state rather than the
//! language (the symbol, the blacklist, an instruction boundary, a function
//! entry, a name already taken), *syntax* otherwise. Both levels count; the
//! split says where to look.

/// What one side answered for one definition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The definition was taken.
    pub accepted: bool,
    /// The error_log message of a refusal (`None`: nothing was logged).
    pub message: Option<String>,
    /// The caret's byte offset in [`Answer::command`].
    pub caret: Option<usize>,
    /// The command the error_log entry quotes.
    pub command: Option<String>,
    /// The lines the definition added to the listing (`dynamic_events`, or
    /// the file written).
    pub readback: Vec<String>,
    /// The new event's format file without its `ID:` line (`None`: there is
    /// no event, or this side cannot tell it).
    pub format: Option<String>,
    /// The kernel's `errno` of the refused write (`None` for ktrace).
    pub errno: Option<i32>,
    /// This side cannot tell the readback and format (ktrace, for what
    /// depends on the kernel's hashed pointers: an address probe's name).
    pub readback_unknown: bool,
    /// This side left an event probe's filter to the kernel (ktrace:
    /// "not checked"), and answers as if the filter were taken; counted in
    /// the report, not compared.
    pub filter_undecided: bool,
    /// This side says the kernel decides the filter by chance (ktrace: the
    /// kernel reads memory before the filter's program), so a refusal with
    /// "Error" at 0, the one refusal that chance gives, is the same answer
    /// as its "taken".
    pub filter_by_chance: bool,
    /// This side says the kernel computes the error's caret from a pointer
    /// (ktrace: "not checked: where the kernel puts this error's caret"), so
    /// any caret, or none, is the same answer.
    pub caret_unknown: bool,
    /// Where the kernel logged its refusal (the error_log entry's location:
    /// `trace_kprobe`, `event filter parse error`, ...; `None` for ktrace).
    pub location: Option<String>,
    /// This side checked offline (`ktrace check --offline`): what only the
    /// target shows (its files, events, kernel text and state, CPUs) was
    /// not looked at, and a kernel answer that only that explains is
    /// [`left_open`], not a disagreement.
    pub offline: bool,
    /// What this side left undone before it answered (ktrace's "not
    /// checked").
    pub undone: Undone,
}

/// Checks an answer was given without ([`Answer::undone`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Undone {
    /// The kernel's state: the symbol, the function entry, the
    /// instruction boundary, the blacklist, argument symbols, names in use,
    /// a removal's target.
    pub state: bool,
    /// The function's BTF (parameter names and types).
    pub btf: bool,
    /// Whether the probed offset is the function's entry, on which the
    /// meaning of `$argN`, `$retval` and BTF names depends.
    pub entry: bool,
    /// Whether the build has the event kind at all (fprobe, synthetic
    /// events).
    pub build: bool,
    /// The attached event of an event probe and its fields.
    pub event: bool,
    /// The instruction at a probe's offset, where the kernel's text could
    /// not be read (no /proc/kcore: Debian's arm 6.12). Also in `state`.
    pub code: bool,
}

/// The error_log messages of what only a function's entry takes (`$argN`,
/// `$arg*`, a return probe).
const ENTRY_MESSAGES: &[&str] = &[
    "Invalid $-variable specified",
    // (5.10's spelling)
    "Invalid $-valiable specified",
    "$arg* can be used only on function entry or exit",
    "Retprobe address must be an function entry",
];

/// The error_log messages of BTF names and types (trace_probe.h's
/// `NO_BTFARG`, `NOSUP_BTFARG`, `NO_PTR_STRCT`, `NO_BTF_FIELD`,
/// `BAD_BTF_TID`, `NO_BTF_ENTRY`, `ARGIDX_2BIG`, `NOSUP_DAT_ARG`,
/// `USED_ARG_NAME`: a name `$arg*` or a parameter makes).
const BTF_MESSAGES: &[&str] = &[
    "This variable is not found at this probe point",
    "BTF is not available or not supported",
    "This is not a pointer to union/structure.",
    "This field is not found.",
    "Failed to get BTF type info.",
    "No BTF entry for this probe point",
    "$argN index is too big",
    "Non pointer structure/union argument is not supported.",
    "This argument name is already used",
    "This function returns 'void' type",
];

/// Messages on an argument's type against what it fetches: for a BTF
/// variable the type the BTF gives it decides them (`$arg1:ustring` is a
/// parameter read as a string with BTF for the function, a register
/// without; riscv64 6.12 offline, seed 57002).
const BTF_TYPE_MESSAGES: &[&str] = &[
    // a `$argN` that the BTF names after a variadic function's `...`
    // (x86_64 6.12 offline, seed 59102: `f:_e35 acpi_exception%return
    // $arg5 module_name. $comm:`)
    "No argument expression",
    "String accepts only memory argument",
    "This type does not fit for string.",
    // a parameter in a return probe is entry data, which `symstr` does
    // not take (x86_64 6.12 offline, seed 59102: `r:x-y/_e24
    // enable_trace_kprobe a26=file file:symstr`)
    "Symbol String doesn't accept data/userdata",
];

/// The refusals of `$arg…` words that the expansion with BTF makes before
/// any argument is parsed (`traceprobe_expand_meta_args()`).
const EXPANSION_MESSAGES: &[&str] = &[
    "Invalid $-variable specified",
    "Invalid argument number",
    "This argument name is already used",
];

/// Whether the kernel's refusal of a line that ktrace took without the
/// kernel's BTF came from what the BTF decides: a `$arg*` word (the
/// parameters it expands into are parsed, and logged at indexes the command
/// does not have), or a type message at a BTF word (anywhere when the caret
/// is not on the command).
fn decided_by_btf(kernel: &Answer, message: &str) -> bool {
    let Some(line) = kernel.command.as_deref() else {
        return false;
    };
    let words = words_of(line);
    let args = words.get(2..).unwrap_or_default();
    // `$arg*…`: the kernel expands any word that starts so, dropping the
    // rest (`$arg*:s64`), as ktrace's check reads it
    if args.iter().any(|(_, w)| w.starts_with("$arg*")) {
        return true;
    }
    if !BTF_TYPE_MESSAGES.contains(&message) {
        return false;
    }
    match kernel.caret {
        Some(c) if c < line.len() => args
            .iter()
            .any(|&(s, w)| (s..s + w.len()).contains(&c) && is_btf_word(w)),
        _ => args.iter().any(|(_, w)| is_btf_word(w)),
    }
}

/// Where the kernel's refusal is in its command: the caret, or where the
/// caret is off the command (a pointer past a BTF variable's members), the
/// first BTF word's start.
fn btf_refusal_at(kernel: &Answer) -> Option<usize> {
    let line = kernel.command.as_deref()?;
    match kernel.caret {
        Some(c) if c < line.len() => Some(c),
        _ => words_of(line)
            .get(2..)
            .unwrap_or_default()
            .iter()
            .find(|(_, w)| is_btf_word(w))
            .map(|&(s, _)| s),
    }
}

/// The words of a command, each with where it starts.
fn words_of(line: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (c.is_ascii_whitespace(), start) {
            (true, Some(s)) => {
                words.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    words
}

/// Whether an argument names a BTF variable: `$argN`, `$retval`, a
/// parameter or member chain, a cast.
fn is_btf_word(word: &str) -> bool {
    // `NAME=$argN` is not expanded: a register (or stack slot) however
    // the BTF reads
    let (named, body) = match word.split_once('=') {
        Some((name, body)) if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            (true, body)
        }
        _ => (false, word),
    };
    (body.starts_with("$arg") && !named)
        || body.starts_with("$retval")
        || body.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '(')
}

/// Which field disagrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// One side accepted, the other refused.
    Verdict,
    /// Both refused with different messages (or one logged nothing).
    Message,
    /// Same message, different caret.
    Caret,
    /// Both accepted, different readback.
    Readback,
    /// Both accepted, different format file.
    Format,
}

impl Field {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Field::Verdict => "verdict",
            Field::Message => "message",
            Field::Caret => "caret",
            Field::Readback => "readback",
            Field::Format => "format",
        }
    }
}

/// Whether a disagreement is about the language or the kernel's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The definition language: lexing, names, fetch forms, types, limits.
    Syntax,
    /// The running kernel's state: symbols, blacklist, boundaries, entries,
    /// names already in use, registration.
    Registration,
}

impl Level {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Level::Syntax => "syntax",
            Level::Registration => "registration",
        }
    }
}

/// One field that disagrees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// The field.
    pub field: Field,
    /// Its level.
    pub level: Level,
    /// Both values, readable.
    pub detail: String,
}

/// The error_log messages that speak of the kernel's state, not the language.
pub const REGISTRATION_MESSAGES: &[&str] = &[
    "Failed to register probe event",
    "Probe point is not an instruction boundary",
    "Retprobe address must be an function entry",
    "Invalid probed address or symbol",
    "The symbol is not unique",
    "Given group/event name is already used by another event",
    "Probe type is different from existing probe",
    "Argument type or name is different from existing probe",
    "There is already the exact same probe event",
];

/// `EEXIST`, `EBUSY`, `ENOENT`: refusals without a log entry that come from
/// the kernel's state (a name in use, an event busy, nothing to remove).
const STATE_ERRNOS: &[i32] = &[17, 16, 2];

fn level_of(kernel: &Answer, ours: &Answer) -> Level {
    let refusal = if !kernel.accepted { kernel } else { ours };
    let state_message = refusal
        .message
        .as_deref()
        .is_some_and(|m| REGISTRATION_MESSAGES.contains(&m));
    let state_errno = !kernel.accepted
        && kernel.message.is_none()
        && kernel.errno.is_some_and(|e| STATE_ERRNOS.contains(&e));
    if state_message || state_errno {
        Level::Registration
    } else {
        Level::Syntax
    }
}

/// The error_log messages of a uprobe's file that is missing or not a
/// regular file.
const FILE_MESSAGES: &[&str] = &["Failed to find the given file", "Not a regular file"];

/// The error_log messages of an event probe's event or field that does not
/// exist.
const ATTACHED_MESSAGES: &[&str] = &[
    "Attached event does not exist",
    "Attached event does not have this field",
];

/// The error_log messages of an event probe's `$comm` read as the task's
/// comm, which only an event without a `comm` field does.
const COMM_MESSAGES: &[&str] = &[
    "Symbol String doesn't accept data/userdata",
    "$comm can not be dereferenced",
];

/// Why the kernel's answer is one that `ours`, an offline check, could not
/// give: what decided it is only on the target (a uprobe's file, an event
/// probe's event, fields and filter, the kernel's symbols, text and state,
/// the default maxactive from its CPU count). For a live check, only the
/// kernel's text where it cannot be read ([`Undone::code`]). `None` for
/// every answer that the language alone decides: those are compared.
/// `ktrace conform` asks only of answers that differ: an answer that is
/// the kernel's agrees, whatever decided it.
pub fn left_open(kernel: &Answer, ours: &Answer) -> Option<&'static str> {
    // the registration refused what ktrace took without seeing the
    // instruction: the architecture's decoder (arm 6.12, which has no
    // /proc/kcore, seed 60007: `p __bpf_prog_run128+0x5c`, where +0x58 and
    // +0x60 register) decides it from code only the target shows
    if ours.accepted
        && ours.undone.code
        && !kernel.accepted
        && kernel.message.as_deref() == Some("Failed to register probe event")
    {
        return Some("the kernel's text (unreadable)");
    }
    if !ours.offline {
        return None;
    }
    if !kernel.accepted {
        let message = kernel.message.as_deref().unwrap_or("");
        if FILE_MESSAGES.contains(&message) {
            return Some("the probed file");
        }
        if ATTACHED_MESSAGES.contains(&message) {
            return Some("the attached event");
        }
        if kernel.location.as_deref() == Some("event filter parse error") {
            return Some("the event's fields (filter)");
        }
        if ours.undone.state && level_of(kernel, ours) == Level::Registration {
            return Some("the kernel's state");
        }
        // the entry is decided by the symbol too: one the kernel does
        // not find (a module not loaded) is no entry
        if (ours.undone.entry || ours.undone.state)
            && [message, ours.message.as_deref().unwrap_or("")]
                .iter()
                .any(|m| ENTRY_MESSAGES.contains(m) || BTF_MESSAGES.contains(m))
        {
            return Some("the function's entry");
        }
        if ours.undone.btf && BTF_MESSAGES.contains(&message) {
            return Some("the kernel's BTF");
        }
        // taken, or refused at a later word (arm64 7.2 offline, seed
        // 59101: `p f pdev:string pdev->dma_parms x-y=pdev`, the kernel's
        // "This type does not fit for string." at `pdev:string`, ktrace's
        // name error at `x-y=pdev`)
        // (where ktrace's own caret is unknown, past a member chain, its
        // word is taken to be later: x86_64 7.2 offline, seed 59104,
        // `r:ev22257 f p:string $retval%pd p->on_rq:b31@23/32`)
        let ours_later = !ours.accepted
            && match (ours.caret, btf_refusal_at(kernel)) {
                (Some(o), Some(k)) => o > k,
                (None, Some(_)) => ours.caret_unknown,
                _ => false,
            };
        if (ours.accepted || ours_later) && ours.undone.btf && decided_by_btf(kernel, message) {
            return Some("the kernel's BTF");
        }
        if !ours.accepted
            && ours.undone.btf
            && ours
                .message
                .as_deref()
                .is_some_and(|m| EXPANSION_MESSAGES.contains(&m))
        {
            // refused before any argument, as the expansion with BTF for
            // the function does; without it the kernel parses the
            // arguments in order and may meet an earlier one's error first
            // (x86_64 6.12 offline, seed 59102: `r f+0 a23=@m:s.:symstr[17]
            // $arg0:s8`, "Unknown type is specified" at a23)
            return Some("the kernel's BTF");
        }
        if ours.undone.event && message == "Invalid $-variable specified" {
            // an event probe's `$FIELD` the event lacks (7.2)
            return Some("the attached event");
        }
        if ours.undone.event
            && COMM_MESSAGES.contains(&message)
            && ours.message.as_deref() != Some(message)
        {
            // an event probe's `$comm`: a field when the event has one,
            // else the task's comm, which takes no `symstr` and no
            // dereference (arm 6.12 and 7.2 offline, seed 20261130:
            // `e:sched/ev21709 watchdog/watchdog_set_timeout $comm:symstr`)
            return Some("the attached event");
        }
        if ours.undone.build && kernel.message.is_none() && kernel.errno == Some(22) {
            return Some("the kernel's build");
        }
        return None;
    }
    if !ours.accepted
        && ours.undone.state
        && ours
            .message
            .as_deref()
            .is_some_and(|m| REGISTRATION_MESSAGES.contains(&m))
    {
        // a refusal for a state ktrace could not see: the kernel did not
        // find the symbol and took the probe to wait for its module
        // (x86_64 6.1 offline: `r:ev2090 ext4:ext4_file_open+8`)
        return Some("the kernel's state");
    }
    if !ours.accepted
        && (ours.undone.entry || ours.undone.state)
        && ours
            .message
            .as_deref()
            .is_some_and(|m| ENTRY_MESSAGES.contains(&m) || BTF_MESSAGES.contains(&m))
    {
        // taken at an offset that is the function's entry, which ktrace
        // could not tell offline (x86_64 7.2, token soup seed 58001:
        // `p:ev49588 kfree+4 $arg1`, the entry after `endbr64`, refused
        // as off the entry with the kernel's text not looked at)
        return Some("the function's entry");
    }
    if ours.accepted && ours.undone.btf {
        // parameter names in the readback and the format: the BTF's
        return Some("the kernel's BTF");
    }
    if ours.accepted
        && kernel.readback != ours.readback
        && kernel
            .readback
            .iter()
            .map(|l| without_maxactive(l))
            .eq(ours.readback.iter().map(|l| without_maxactive(l)))
    {
        return Some("the default maxactive");
    }
    None
}

/// A return probe's readback without its maxactive (`r10:g/e f` -> `r:g/e
/// f`).
fn without_maxactive(line: &str) -> String {
    match line.strip_prefix('r') {
        Some(rest) => format!(
            "r{}",
            rest.trim_start_matches(|c: char| c.is_ascii_digit() || c == '-')
        ),
        None => line.to_string(),
    }
}

/// Holds `ours` against `kernel`: every field that differs.
pub fn compare(kernel: &Answer, ours: &Answer) -> Vec<Disagreement> {
    let level = level_of(kernel, ours);
    let mut out = Vec::new();
    let mut push = |field, detail: String| {
        out.push(Disagreement {
            field,
            level,
            detail,
        })
    };
    // the kernel takes the filter (and goes on to what ktrace answered:
    // taken, or an argument's error after the filter) or refuses it with
    // "Error" at 0
    if ours.filter_by_chance
        && !kernel.accepted
        && kernel.message.as_deref() == Some("Error")
        && kernel.caret == Some(0)
    {
        return out;
    }
    if kernel.accepted != ours.accepted {
        push(
            Field::Verdict,
            format!("kernel {} ktrace {}", verdict(kernel), verdict(ours)),
        );
        return out;
    }
    if !kernel.accepted {
        if kernel.message != ours.message {
            push(
                Field::Message,
                format!(
                    "kernel {:?} ktrace {:?}",
                    kernel.message.as_deref().unwrap_or("(nothing logged)"),
                    ours.message.as_deref().unwrap_or("(nothing logged)")
                ),
            );
        } else if kernel.message.is_some()
            && kernel.caret != ours.caret
            && !ours.caret_unknown
            && !(ours.caret.is_none() && caret_past_command(kernel))
        {
            push(
                Field::Caret,
                format!("kernel {:?} ktrace {:?}", kernel.caret, ours.caret),
            );
        }
        return out;
    }
    if ours.readback_unknown || kernel.readback_unknown {
        return out;
    }
    if kernel.readback != ours.readback {
        push(
            Field::Readback,
            format!("kernel {:?} ktrace {:?}", kernel.readback, ours.readback),
        );
    }
    if let (Some(k), Some(o)) = (&kernel.format, &ours.format)
        && k != o
    {
        push(Field::Format, format!("\n--kernel--\n{k}--ktrace--\n{o}"));
    }
    out
}

/// A caret past the end of the command the kernel logged (the one place
/// past it a real position takes is one past the end, an argument past the
/// command's words): 6.12 and 7.2 log some BTF errors of member chains
/// (`dev->parent->p:string`, `a->b:b7@3/8`) at an offset that is no
/// position in the command (10,098 and 34,267 for commands of some 70
/// bytes, seed 23; 145 for one of 98, arm64 6.12, seed 20261128, index
/// 148746: `np->fwnode.dev:string`), which ktrace does not imitate: it gives
/// no caret there, and that is taken as the same answer.
fn caret_past_command(a: &Answer) -> bool {
    match (a.caret, &a.command) {
        (Some(c), Some(cmd)) => c > cmd.len() + 1,
        _ => false,
    }
}

fn verdict(a: &Answer) -> String {
    if a.accepted {
        return "accepted".into();
    }
    match (&a.message, a.caret) {
        (Some(m), Some(c)) => format!("refused {m:?}@{c}"),
        (Some(m), None) => format!("refused {m:?}"),
        (None, _) => match a.errno {
            Some(e) => format!("refused (errno {e}, nothing logged)"),
            None => "refused (nothing logged)".into(),
        },
    }
}

/// The format file without its `ID:` line (the id differs run to run).
pub fn strip_id(format: &str) -> String {
    format
        .lines()
        .filter(|l| !l.starts_with("ID: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(m: &str, c: usize) -> Answer {
        Answer {
            message: Some(m.into()),
            caret: Some(c),
            ..Answer::default()
        }
    }

    fn accepted(line: &str) -> Answer {
        Answer {
            accepted: true,
            readback: vec![line.into()],
            ..Answer::default()
        }
    }

    #[test]
    fn each_field_is_told_apart() {
        let k = refused("Invalid register name", 20);
        assert!(compare(&k, &k.clone()).is_empty());
        let d = compare(&k, &refused("Invalid register name", 21));
        assert_eq!((d[0].field, d[0].level), (Field::Caret, Level::Syntax));
        let d = compare(&k, &refused("Invalid fetch argument", 20));
        assert_eq!(d[0].field, Field::Message);
        let d = compare(&k, &accepted("p:kprobes/a vfs_read"));
        assert_eq!(d[0].field, Field::Verdict);
        assert!(
            d[0].detail
                .contains("kernel refused \"Invalid register name\"@20")
        );
        let d = compare(
            &accepted("p:kprobes/a vfs_read"),
            &accepted("p:kprobes/b vfs_read"),
        );
        assert_eq!(d[0].field, Field::Readback);
        let mut a = accepted("x");
        a.format = Some("f1\n".into());
        let mut b = a.clone();
        b.format = Some("f2\n".into());
        assert_eq!(compare(&a, &b)[0].field, Field::Format);
        b.format = None;
        assert!(compare(&a, &b).is_empty());
    }

    #[test]
    fn a_filter_decided_by_chance_agrees_with_taken_and_with_error_at_0_only() {
        // x86_64 7.2, the same `a || b &&` filter written 80 times: 32 taken,
        // 48 refused "Error" at 0
        let line = "e:kprobes/x syscalls.sys_exit_getgroups";
        let mut ours = accepted(line);
        ours.filter_by_chance = true;
        assert!(compare(&accepted(line), &ours).is_empty());
        assert!(compare(&refused("Error", 0), &ours).is_empty());
        // any other refusal is still one
        assert_eq!(
            compare(&refused("Error", 5), &ours)[0].field,
            Field::Verdict
        );
        let d = compare(&refused("Field not found", 3), &ours);
        assert_eq!(d[0].field, Field::Verdict);
        // and without the mark, "Error" at 0 is a disagreement
        ours.filter_by_chance = false;
        assert_eq!(
            compare(&refused("Error", 0), &ours)[0].field,
            Field::Verdict
        );
        // ktrace refusing an argument after such a filter: the kernel
        // takes the filter and refuses the argument, or refuses the filter
        // (riscv64 7.2, seed 20261221, indexes 126114 and 150057)
        let mut ours = refused("This is not a pointer to union/structure.", 41);
        ours.filter_by_chance = true;
        assert!(compare(&refused("Error", 0), &ours).is_empty());
        assert!(compare(&ours.clone(), &ours).is_empty());
        assert_eq!(
            compare(&refused("Error", 5), &ours)[0].field,
            Field::Message
        );
        ours.filter_by_chance = false;
        assert_eq!(
            compare(&refused("Error", 0), &ours)[0].field,
            Field::Message
        );
    }

    #[test]
    fn a_caret_from_a_pointer_is_any_caret() {
        // riscv64 7.2, seed 20261221, index 42270: `pool->worklist.next:string
        // pool->cpu_stall`, "This type does not fit for string." at 50 of 60
        let mut ours = refused("This type does not fit for string.", 0);
        ours.caret = None;
        ours.caret_unknown = true;
        for c in [0, 50, 59, 10_098] {
            assert!(compare(&refused("This type does not fit for string.", c), &ours).is_empty());
        }
        assert_eq!(
            compare(&refused("This type is not a string.", 50), &ours)[0].field,
            Field::Message
        );
        ours.caret_unknown = false;
        assert_eq!(
            compare(&refused("This type does not fit for string.", 50), &ours)[0].field,
            Field::Caret
        );
    }

    #[test]
    fn levels_follow_the_refusing_side() {
        let reg = refused("Probe point is not an instruction boundary", 6);
        let d = compare(&reg, &accepted("p:kprobes/a vfs_read+6"));
        assert_eq!(d[0].level, Level::Registration);
        let d = compare(&accepted("p:kprobes/a vfs_read+6"), &reg);
        assert_eq!(d[0].level, Level::Registration);
        let busy = Answer {
            errno: Some(17),
            ..Answer::default()
        };
        assert_eq!(compare(&busy, &accepted("x"))[0].level, Level::Registration);
        let silent = Answer {
            errno: Some(22),
            ..Answer::default()
        };
        assert_eq!(compare(&silent, &accepted("x"))[0].level, Level::Syntax);
        // nothing logged on both sides agrees, whatever the errno
        assert!(compare(&silent, &Answer::default()).is_empty());
    }

    #[test]
    fn a_kernel_caret_far_past_the_command_is_no_caret() {
        // x86_64 6.12, seed 23: "This type does not fit for string." at 12,538
        let cmd = "p:g-x/ udp4_proc_exit_net net->cleanup_list.next:string";
        let mut k = refused("This type does not fit for string.", 12538);
        k.command = Some(cmd.into());
        let mut ours = refused("This type does not fit for string.", 0);
        ours.caret = None;
        assert!(compare(&k, &ours).is_empty());
        // arm64 6.12, seed 20261128: 145 for a command of 98 bytes
        let cmd = "r:ev33324 of_platform_device_create_pdata bus_id np->fwnode.dev:string platform_data->nosuch $comm";
        k.command = Some(cmd.into());
        k.caret = Some(145);
        assert!(compare(&k, &ours).is_empty());
        // one past the end is a real position
        k.caret = Some(cmd.len() + 1);
        assert_eq!(compare(&k, &ours)[0].field, Field::Caret);
        // a caret in the command still has to match
        k.caret = Some(30);
        assert_eq!(compare(&k, &ours)[0].field, Field::Caret);
        ours.caret = Some(31);
        assert_eq!(compare(&k, &ours)[0].field, Field::Caret);
    }

    #[test]
    fn an_instruction_ktrace_could_not_read_is_left_open_live() {
        let refused_at_registration = refused("Failed to register probe event", 2);
        let unread = |mut a: Answer| {
            a.undone.state = true;
            a.undone.code = true;
            a
        };
        assert_eq!(
            left_open(&refused_at_registration, &unread(accepted("x"))),
            Some("the kernel's text (unreadable)")
        );
        // the code read (or no offset): compared
        let mut read = unread(accepted("x"));
        read.undone.code = false;
        assert_eq!(left_open(&refused_at_registration, &read), None);
        // another refusal, or ktrace's own: the language's, compared
        assert_eq!(
            left_open(
                &refused("Invalid fetch argument", 12),
                &unread(accepted("x"))
            ),
            None
        );
        assert_eq!(
            left_open(
                &refused_at_registration,
                &unread(refused("Failed to register probe event", 2))
            ),
            None
        );
        // the kernel took it: nothing to leave open
        assert_eq!(left_open(&accepted("x"), &unread(accepted("x"))), None);
    }

    #[test]
    fn only_what_the_target_shows_is_left_open_offline() {
        let offline = |mut a: Answer| {
            a.offline = true;
            a
        };
        let file = refused("Failed to find the given file", 18);
        let mut filter = refused("Invalid operator", 14);
        filter.location = Some("event filter parse error".into());
        let state = refused("Failed to register probe event", 10);
        let unchecked = |mut a: Answer| {
            a.undone.state = true;
            a
        };
        let attached = refused("Attached event does not exist", 28);
        let syntax = refused("Invalid fetch argument", 12);
        for k in [&file, &filter, &state, &attached] {
            // live, every answer is compared
            assert_eq!(left_open(k, &unchecked(accepted("x"))), None);
            assert!(left_open(k, &offline(unchecked(accepted("x")))).is_some());
        }
        // a file or event the target lacks explains any answer before it
        assert!(
            left_open(
                &file,
                &offline(refused("Argument name is not specified", 30))
            )
            .is_some()
        );
        // a refusal for the kernel's state explains an answer given after
        // a check of that state was left undone, and no other
        assert!(
            left_open(
                &state,
                &offline(unchecked(refused("Invalid fetch argument", 20)))
            )
            .is_some()
        );
        assert_eq!(
            left_open(&state, &offline(refused("Invalid fetch argument", 20))),
            None
        );
        assert_eq!(left_open(&state, &offline(accepted("x"))), None);
        // the language is compared offline too
        assert_eq!(left_open(&syntax, &offline(accepted("x"))), None);
        // a filter message logged as the probe's own is the language's
        assert_eq!(
            left_open(&refused("Invalid operator", 14), &offline(accepted("x"))),
            None
        );
        // the function's BTF, the build's probe kinds, an event's fields:
        // only where ktrace said it could not look
        let btf = refused("This variable is not found at this probe point", 20);
        let mut undone = offline(accepted("x"));
        assert_eq!(left_open(&btf, &undone), None);
        undone.undone.btf = true;
        assert_eq!(left_open(&btf, &undone), Some("the kernel's BTF"));
        assert_eq!(
            left_open(&accepted("p:g/e f a=b"), &undone),
            Some("the kernel's BTF")
        );
        assert_eq!(left_open(&syntax, &undone), None);
        let silent = Answer {
            errno: Some(22),
            ..Answer::default()
        };
        let mut undone = offline(accepted("x"));
        assert_eq!(left_open(&silent, &undone), None);
        undone.undone.build = true;
        assert_eq!(left_open(&silent, &undone), Some("the kernel's build"));
        let mut undone = offline(refused(
            "$arg* can be used only on function entry or exit",
            30,
        ));
        assert_eq!(left_open(&btf, &undone), None);
        undone.undone.entry = true;
        assert_eq!(left_open(&btf, &undone), Some("the function's entry"));
        // ... or where it could not look the symbol up: one the kernel
        // does not find (a module not loaded) is no entry to it
        let fetch = refused("Invalid fetch argument", 40);
        let mut undone = offline(refused("Retprobe address must be an function entry", 0));
        assert_eq!(left_open(&fetch, &undone), None);
        undone.undone.state = true;
        assert_eq!(left_open(&fetch, &undone), Some("the function's entry"));
        // taken by the kernel (a probe left waiting for its module),
        // refused for a state ktrace did not look at
        let waiting = accepted("r:kprobes/ev ext4:ext4_file_open+8");
        let mut ours = offline(refused("Retprobe address must be an function entry", 0));
        assert_eq!(left_open(&waiting, &ours), None);
        ours.undone.state = true;
        assert_eq!(left_open(&waiting, &ours), Some("the kernel's state"));
        // taken at what is the entry (x86_64: `kfree+4` after `endbr64`),
        // refused as off the entry where ktrace did not know the entry
        let at_entry = accepted("p:kprobes/ev49588 kfree+4 object=object");
        let mut ours = offline(refused(
            "$arg* can be used only on function entry or exit",
            18,
        ));
        assert_eq!(left_open(&at_entry, &ours), None);
        ours.undone.btf = true;
        assert_eq!(left_open(&at_entry, &ours), None, "not the BTF's to decide");
        ours.undone.entry = true;
        assert_eq!(left_open(&at_entry, &ours), Some("the function's entry"));
        // and only for a refusal the entry decides
        let mut syntax_refusal = offline(refused("Invalid fetch argument", 18));
        syntax_refusal.undone.entry = true;
        assert_eq!(left_open(&at_entry, &syntax_refusal), None);
        // 5.10 spells it "valiable" (arm64 5.10, `p no_such_fn $arg7`)
        let var = refused("Invalid $-valiable specified", 20);
        let mut ours = offline(refused("Invalid fetch argument", 30));
        assert_eq!(left_open(&var, &ours), None);
        ours.undone.state = true;
        assert_eq!(left_open(&var, &ours), Some("the function's entry"));
        let var = refused("Invalid $-variable specified", 30);
        let mut undone = offline(accepted("x"));
        assert_eq!(left_open(&var, &undone), None);
        undone.undone.event = true;
        assert_eq!(left_open(&var, &undone), Some("the attached event"));
        // `$comm` of an event probe: the task's only without such a field
        let symstr = refused("Symbol String doesn't accept data/userdata", 52);
        assert_eq!(left_open(&symstr, &undone), Some("the attached event"));
        undone.undone.event = false;
        assert_eq!(left_open(&symstr, &undone), None);
        // ktrace refusing with the same message is an agreement to count
        let mut same = offline(refused("Symbol String doesn't accept data/userdata", 52));
        same.undone.event = true;
        assert_eq!(left_open(&symstr, &same), None);
        // the default maxactive on readback, and nothing else there
        let k = accepted("r10:kprobes/ev f a=%di");
        assert_eq!(
            left_open(&k, &offline(accepted("r:kprobes/ev f a=%di"))),
            Some("the default maxactive")
        );
        assert_eq!(
            left_open(&k, &offline(accepted("r:kprobes/ev f a=%si"))),
            None
        );
        assert_eq!(left_open(&k, &accepted("r:kprobes/ev f a=%di")), None);
        assert_eq!(
            left_open(&k, &offline(accepted("r10:kprobes/ev f a=%di"))),
            None
        );
    }

    #[test]
    fn refusals_the_btf_decides_are_open_offline() {
        // riscv64 6.12, `--offline bare`, seed 57002: taken by ktrace
        // without the kernel's BTF, refused by the kernel for what it
        // read there
        let with = |m: &str, c: usize, line: &str| Answer {
            command: Some(line.into()),
            ..refused(m, c)
        };
        let offline = |mut a: Answer| {
            a.offline = true;
            a
        };
        let mut ours = offline(accepted("x"));
        let cases = [
            // `$arg*` became the parameters, a variadic one among them
            with(
                "No argument expression",
                44,
                "p:grp352/E9x logfc%return $arg* fmt->nosuch",
            ),
            // a parameter, not a pointer, read as a string
            with(
                "String accepts only memory argument",
                39,
                "p:ev85732 riscv_pmu_format_group $arg1:ustring a24=%a2:symbol",
            ),
            // a member chain's type, the caret nowhere on the command
            with(
                "This type does not fit for string.",
                42990,
                "r4096:kprobes/ev14043 f attr->attr:ustring dev->comm",
            ),
        ];
        for k in &cases {
            assert_eq!(left_open(k, &ours), None, "BTF looked at: {k:?}");
        }
        ours.undone.btf = true;
        for k in &cases {
            assert_eq!(left_open(k, &ours), Some("the kernel's BTF"), "{k:?}");
        }
        // `$arg*` with a suffix is expanded all the same
        let suffixed = with(
            "Invalid fetch argument",
            37,
            "p mqueue_unlink $arg*:s64 $retval:s8",
        );
        assert_eq!(left_open(&suffixed, &ours), Some("the kernel's BTF"));
        // the same messages at words no BTF decides are the language's
        for k in [
            with(
                "String accepts only memory argument",
                20,
                "p:e f a=$arg1:string",
            ),
            with(
                "String accepts only memory argument",
                12,
                "p:e f %a0:string $arg1",
            ),
            with("Invalid fetch argument", 20, "p:e f $arg1 %zz"),
            with("This type does not fit for string.", 0, "p:e f %ax:string"),
        ] {
            assert_eq!(left_open(&k, &ours), None, "{k:?}");
        }
        // a refusal by ktrace at the same word or before is compared as
        // it is, one at a later word is not
        let mut refusing = offline(refused("String accepts only memory argument", 39));
        refusing.undone.btf = true;
        assert_eq!(left_open(&cases[1], &refusing), None);
        let mut later = offline(refused(
            "Argument name must follow the same rules as C identifiers",
            50,
        ));
        later.undone.btf = true;
        assert_eq!(left_open(&cases[1], &later), Some("the kernel's BTF"));
        later.caret = Some(20);
        assert_eq!(left_open(&cases[1], &later), None);
        // the kernel's caret off the command: at its first BTF word
        let off = with(
            "This type does not fit for string.",
            42990,
            "p:ev51975 tracing_lseek file->f_flags:string $retval",
        );
        later.caret = Some(46);
        assert_eq!(left_open(&off, &later), Some("the kernel's BTF"));
        later.caret = Some(10);
        assert_eq!(left_open(&off, &later), None);
        later.caret = None;
        assert_eq!(left_open(&off, &later), None);
        later.caret_unknown = true;
        assert_eq!(left_open(&off, &later), Some("the kernel's BTF"));
        // but not one made before the arguments, as with BTF for the
        // function (`$arg0` after an argument the kernel refuses first)
        let earlier = with(
            "Unknown type is specified",
            50,
            "r:g/e efi_apply_memmap_quirks+0 a23=@vfs_read:symstr[17] $arg0:s8",
        );
        let mut expansion = offline(refused("Invalid argument number", 62));
        assert_eq!(left_open(&earlier, &expansion), None);
        expansion.undone.btf = true;
        assert_eq!(left_open(&earlier, &expansion), Some("the kernel's BTF"));
    }

    #[test]
    fn strip_id_drops_only_the_id() {
        assert_eq!(
            strip_id("name: a\nID: 1234\nformat:\n"),
            "name: a\nformat:\n"
        );
    }
}
