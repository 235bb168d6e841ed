//! Error kinds of the probe-definition language, with the exact message text the
//! kernel writes to `error_log`.
//!
//! This mirrors the `ERRORS` table of kernel/trace/trace_probe.h (Linux 6.1 as shipped
//! by Debian bookworm, which carries later fixes such as `NON_UNIQ_SYMBOL`,
//! `BAD_SYMSTRING` and `EVENT_TOO_BIG`). It is not a place for I/O errors: this crate
//! does none. Rejections the kernel makes *without* writing to `error_log` (it just
//! returns `-EINVAL`) are separate kinds, flagged by [`ErrorKind::is_logged`].

use std::fmt;

macro_rules! tp_errors {
    ($($name:ident => $text:literal,)*) => {
        /// One entry of the kernel's probe error table (`TP_ERR_*`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum TpErr {
            $(
                #[doc = concat!("`", $text, "`")]
                $name,
            )*
        }

        impl TpErr {
            /// All entries, in kernel order.
            pub const ALL: &'static [TpErr] = &[$(TpErr::$name,)*];

            /// The message the kernel prints after `error: `.
            pub fn message(self) -> &'static str {
                match self {
                    $(TpErr::$name => $text,)*
                }
            }

            /// The kernel's identifier without the `TP_ERR_` prefix.
            pub fn code(self) -> &'static str {
                match self {
                    $(TpErr::$name => stringify!($name),)*
                }
            }
        }
    };
}

tp_errors! {
    FILE_NOT_FOUND => "Failed to find the given file",
    NO_REGULAR_FILE => "Not a regular file",
    BAD_REFCNT => "Invalid reference counter offset",
    REFCNT_OPEN_BRACE => "Reference counter brace is not closed",
    BAD_REFCNT_SUFFIX => "Reference counter has wrong suffix",
    BAD_UPROBE_OFFS => "Invalid uprobe offset",
    MAXACT_NO_KPROBE => "Maxactive is not for kprobe",
    BAD_MAXACT => "Invalid maxactive number",
    MAXACT_TOO_BIG => "Maxactive is too big",
    BAD_PROBE_ADDR => "Invalid probed address or symbol",
    NON_UNIQ_SYMBOL => "The symbol is not unique",
    BAD_RETPROBE => "Retprobe address must be an function entry",
    BAD_ADDR_SUFFIX => "Invalid probed address suffix",
    NO_GROUP_NAME => "Group name is not specified",
    GROUP_TOO_LONG => "Group name is too long",
    BAD_GROUP_NAME => "Group name must follow the same rules as C identifiers",
    NO_EVENT_NAME => "Event name is not specified",
    EVENT_TOO_LONG => "Event name is too long",
    BAD_EVENT_NAME => "Event name must follow the same rules as C identifiers",
    EVENT_EXIST => "Given group/event name is already used by another event",
    RETVAL_ON_PROBE => "$retval is not available on probe",
    BAD_STACK_NUM => "Invalid stack number",
    BAD_ARG_NUM => "Invalid argument number",
    BAD_VAR => "Invalid $-variable specified",
    BAD_REG_NAME => "Invalid register name",
    BAD_MEM_ADDR => "Invalid memory address",
    BAD_IMM => "Invalid immediate value",
    IMMSTR_NO_CLOSE => "String is not closed with '\"'",
    FILE_ON_KPROBE => "File offset is not available with kprobe",
    BAD_FILE_OFFS => "Invalid file offset value",
    SYM_ON_UPROBE => "Symbol is not available with uprobe",
    TOO_MANY_OPS => "Dereference is too much nested",
    DEREF_NEED_BRACE => "Dereference needs a brace",
    BAD_DEREF_OFFS => "Invalid dereference offset",
    DEREF_OPEN_BRACE => "Dereference brace is not closed",
    COMM_CANT_DEREF => "$comm can not be dereferenced",
    BAD_FETCH_ARG => "Invalid fetch argument",
    ARRAY_NO_CLOSE => "Array is not closed",
    BAD_ARRAY_SUFFIX => "Array has wrong suffix",
    BAD_ARRAY_NUM => "Invalid array size",
    ARRAY_TOO_BIG => "Array number is too big",
    BAD_TYPE => "Unknown type is specified",
    BAD_STRING => "String accepts only memory argument",
    BAD_SYMSTRING => "Symbol String doesn't accept data/userdata",
    BAD_BITFIELD => "Invalid bitfield",
    ARG_NAME_TOO_LONG => "Argument name is too long",
    NO_ARG_NAME => "Argument name is not specified",
    BAD_ARG_NAME => "Argument name must follow the same rules as C identifiers",
    USED_ARG_NAME => "This argument name is already used",
    ARG_TOO_LONG => "Argument expression is too long",
    NO_ARG_BODY => "No argument expression",
    BAD_INSN_BNDRY => "Probe point is not an instruction boundary",
    FAIL_REG_PROBE => "Failed to register probe event",
    DIFF_PROBE_TYPE => "Probe type is different from existing probe",
    DIFF_ARG_TYPE => "Argument type or name is different from existing probe",
    SAME_PROBE => "There is already the exact same probe event",
    NO_EVENT_INFO => "This requires both group and event name to attach",
    BAD_ATTACH_EVENT => "Attached event does not exist",
    BAD_ATTACH_ARG => "Attached event does not have this field",
    NO_EP_FILTER => "No filter rule after 'if'",
    EVENT_TOO_BIG => "Event too big (too many fields?)",
    NOFENTRY_ARGS => "$arg* can be used only on function entry or exit",
    COMM_NOT_STRING => "$comm and immediate-string only accepts string type",
    MAXACT_NO_RETURN => "Maxactive is only for function exit",
    NOSUP_BTFARG => "BTF is not available or not supported",
    NO_BTFARG => "This variable is not found at this probe point",
    NO_BTF_ENTRY => "No BTF entry for this probe point",
    BAD_VAR_ARGS => "$arg* must be an independent parameter without name etc.",
    DOUBLE_ARGS => "$arg* can be used only once in the parameters",
    ARGS_2LONG => "$arg* failed because the argument list is too long",
    ARGIDX_2BIG => "$argN index is too big",
    NO_PTR_STRCT => "This is not a pointer to union/structure.",
    NOSUP_DAT_ARG => "Non pointer structure/union argument is not supported.",
    BAD_HYPHEN => "Failed to parse single hyphen. Forgot '>'?",
    NO_BTF_FIELD => "This field is not found.",
    BAD_BTF_TID => "Failed to get BTF type info.",
    BAD_TYPE4STR => "This type does not fit for string.",
    NO_RETVAL => "This function returns 'void' type",
    TOO_MANY_ARGS => "Too many arguments are specified",
    TOO_MANY_EARGS => "Too many entry arguments specified",
    NO_TRACEPOINT => "Tracepoint is not found",
    BAD_TP_NAME => "Invalid character in tracepoint name",
    TYPECAST_NOT_EVENT => "Typecasts are only for eprobe fields",
    // Synthetic events' own entries (kernel/trace/trace_events_synth.c, subsystem
    // `synthetic_events`).
    SYNTH_CMD_INCOMPLETE => "Command must be of the form: <name> field[;field] ...",
    SYNTH_INVALID_DYN_CMD => "Command must be of the form: s or -:[synthetic/]<name> field[;field] ...",
    SYNTH_INVALID_TYPE => "Invalid type",
    SYNTH_BAD_NAME => "Illegal name",
    SYNTH_EVENT_EXISTS => "Event already exists",
    SYNTH_TOO_MANY_FIELDS => "Too many fields",
    SYNTH_INCOMPLETE_TYPE => "Incomplete type",
    SYNTH_INVALID_FIELD => "Invalid field",
    SYNTH_INVALID_ARRAY_SPEC => "Invalid array specification",
    // The event filter's own entries (kernel/trace/trace_events_filter.c,
    // subsystem `event filter parse error`): an event probe's `if` filter.
    // (kernel order, FILTER_ERRORS of 6.12 and 7.2: those event probes
    // never meet are left out)
    FILT_INVALID_OP => "Invalid operator",
    FILT_TOO_MANY_OPEN => "Too many '('",
    FILT_TOO_MANY_CLOSE => "Too few '('",
    FILT_MISSING_QUOTE => "Missing matching quote",
    // a `CPUS` value without its `{` or `}` (6.6 and later)
    FILT_MISSING_BRACE_OPEN => "Missing '{'",
    FILT_MISSING_BRACE_CLOSE => "Missing '}'",
    FILT_OPERAND_TOO_LONG => "Operand too long",
    FILT_EXPECT_STRING => "Expecting string field",
    FILT_EXPECT_DIGIT => "Expecting numeric field",
    FILT_ILLEGAL_FIELD_OP => "Illegal operation for field type",
    FILT_FIELD_NOT_FOUND => "Field not found",
    FILT_ILLEGAL_INTVAL => "Illegal integer value",
    // predicate_parse(): a predicate followed by neither `&&`, `||`, `)`
    // nor the end
    FILT_TOO_MANY_PREDS => "Too many terms in predicate expression",
    // a filter ending in `&&` or `||` (kernels before 6.16, estimate)
    FILT_INVALID_FILTER => "Meaningless filter expression",
    // a `CPUS{...}` list bitmap_parselist() refuses (6.6 and later)
    FILT_INVALID_CPULIST => "Invalid cpulist",
    FILT_INVALID_VALUE => "Invalid value (did you forget quotes)?",
    // a `.function` value that is no kernel symbol (6.2 and later)
    FILT_NO_FUNCTION => "Function not found",
    // FILT_ERR_ERRNO: what append_filter_err() logs, at 0, for a failure
    // that set no error of its own (parse_pred() on a predicate without a
    // field name)
    FILT_ERRNO => "Error",
    // predicate_parse(): no predicate after all (`!`)
    FILT_NO_FILTER => "No filter found",
    // Not in trace_probe.h: dynamic_events' own entry (subsystem `dynevent`) when
    // no kind of event takes the line; seen on 7.2, absent on 6.18.
    NO_MATCHING_TYPE => "No matching dynamic event type",
}

impl TpErr {
    /// The message text as older kernels spelled it, where it differs.
    ///
    /// `BAD_VAR` read "Invalid $-valiable specified" until the typo was fixed
    /// upstream; Debian's 6.1 carries the fix.
    pub fn message_for(self, features: crate::kernel::Features) -> &'static str {
        match self {
            TpErr::BAD_VAR if !features.bad_var_spelling_fixed => "Invalid $-valiable specified",
            other => other.message(),
        }
    }
}

/// Rejections that return an error to `write()` but leave `error_log` untouched,
/// and ktrace's own refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Silent {
    /// The line holds a newline or another control character; ktrace never writes it.
    ControlChar,
    /// Longer than the kernel's write buffer allows for one line (4094 bytes).
    LineTooLong,
    /// No command letter the kernel knows (`p`, `r`, `e`, `-`), or too few words.
    NotAProbe,
    /// `$comm` or an immediate string with a type other than `string`, or as an array.
    CommType,
    /// A removal command (`-:...`) that the kernel refuses before looking anything up.
    BadRemove,
    /// A definition a kprobe-only or uprobe-only file does not take.
    WrongFile,
    /// A synthetic event definition (`s:`), which this crate does not check.
    Synthetic,
    /// A BTF argument with no equivalent in the target kernel's classic fetch
    /// language (ktrace's own refusal; the hint names the expression).
    BtfCompile,
    /// More than 128 arguments: kernels 6.5 to 6.14 return `-E2BIG` without a log
    /// entry.
    TooManyArgs,
    /// A removal that matches no event of the file's kind (`-ENOENT`).
    NothingToRemove,
    /// A tracepoint probe on a tracepoint that already has one, where the
    /// kernel registers at creation (`-EEXIST`, not logged).
    TracepointTaken,
    /// A tracepoint probe that failed to register earlier left the
    /// tracepoint's stub on it (6.12): EEXIST until the next boot.
    TracepointStubLeft,
    /// Zero bytes consumed: the kernel returns `-EINVAL` without logging (e.g. a bad
    /// `%return` on an address, eprobe filter compile failures).
    Other,
}

impl Silent {
    /// ktrace's description of the rejection.
    pub fn message(self) -> &'static str {
        match self {
            Silent::ControlChar => {
                "definition contains a newline or control character (never written to tracefs)"
            }
            Silent::LineTooLong => "definition is longer than the kernel's 4094-byte line limit",
            Silent::NotAProbe => {
                "not a probe definition: expected p, r, rN, e or - and a probe point"
            }
            Silent::CommType => {
                "$comm and immediate strings take only the type string, and no array"
            }
            Silent::BadRemove => "malformed removal command: expected -:[GROUP/]EVENT",
            Silent::WrongFile => "this kind of definition is not accepted by that file",
            Silent::Synthetic => "synthetic event definitions are not checked by ktrace",
            Silent::NothingToRemove => "no such event to remove (the kernel answers ENOENT)",
            Silent::TracepointTaken => {
                "this tracepoint already has a tracepoint probe and this kernel takes one per \
                 tracepoint (it answers EEXIST, File exists, without an error_log entry)"
            }
            Silent::TracepointStubLeft => {
                "an earlier tracepoint probe on this tracepoint failed to register and left its \
                 stub on the tracepoint; this kernel answers EEXIST, File exists, without an \
                 error_log entry, to every tracepoint probe on it until the next boot"
            }
            Silent::Other => "rejected by the kernel without an error_log entry",
            Silent::TooManyArgs => {
                "more than 128 arguments (this kernel refuses them without an error_log entry)"
            }
            Silent::BtfCompile => {
                "this BTF argument has no form in the target kernel's classic fetch language"
            }
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The kernel writes this entry to `error_log`.
    Logged(TpErr),
    /// The kernel (or ktrace) rejects without an `error_log` entry.
    Silent(Silent),
}

impl ErrorKind {
    /// Whether the kernel records this rejection in `error_log`.
    pub fn is_logged(self) -> bool {
        matches!(self, ErrorKind::Logged(_))
    }
}

/// A rejected definition: the kernel's message, the caret position, and a hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProbeError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The message text (the kernel's own for logged errors).
    pub message: &'static str,
    /// The `error_log` subsystem (`trace_kprobe`, `trace_uprobe`, `event_probe`).
    pub subsystem: Option<&'static str>,
    /// The caret position as `error_log` shows it: a byte offset into
    /// [`ProbeError::command`].
    pub pos: Option<usize>,
    /// The command as the kernel re-joins it: its words separated by single spaces.
    pub command: String,
    /// ktrace's own, friendlier advice.
    pub hint: Option<String>,
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(pos) => write!(f, "{} (at byte {pos})", self.message),
            None => f.write_str(self.message),
        }
    }
}

impl ProbeError {
    /// The two lines `error_log` prints under the message: the command and a caret.
    pub fn caret_lines(&self) -> Option<(String, String)> {
        let pos = self.pos?;
        Some((self.command.clone(), format!("{}^", " ".repeat(pos))))
    }
}

/// Renders a rejected check like the kernel's error_log: the command, a
/// caret under the offending byte, the message and any hint.
/// `shown` is (the session's group, the system shown in its place): the
/// kernel-language line under the user's definition names the stable
/// system, never the session's group, which changes every run.
pub fn rejection_text(input: &str, e: &ProbeError, shown: Option<(&str, &str)>) -> String {
    let mut s = format!("definition rejected before anything was written: {input}");
    if let Some(pos) = e.pos {
        let (cmd, pos) = match shown {
            Some((group, system)) => crate::naming::shown_command(&e.command, pos, group, system),
            None => (e.command.clone(), pos),
        };
        s.push_str(&format!("\n  {cmd}\n  {}^", " ".repeat(pos)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_distinct_message() {
        let mut seen = std::collections::HashSet::new();
        for e in TpErr::ALL {
            assert!(
                seen.insert(e.message()),
                "duplicate message {}",
                e.message()
            );
            assert!(!e.code().is_empty());
        }
        // The 6.1 table has 61 entries; the rest are from newer kernels (the BTF
        // argument errors of 6.6+, as in 6.12's trace_probe.h, and 7.2's
        // tracepoint-name and typecast errors) and the event filter's.
        assert_eq!(TpErr::ALL.len(), 112);
    }

    #[test]
    fn old_kernels_keep_the_typo() {
        // Debian's 5.10.223 (arm64 corpus) still has it; 5.10.262 does not.
        let old = crate::KernelVersion::with_sublevel(5, 10, 223);
        assert_eq!(
            TpErr::BAD_VAR.message_for(old.features()),
            "Invalid $-valiable specified"
        );
        assert_eq!(
            TpErr::BAD_VAR.message_for(crate::KernelVersion::new(6, 1).features()),
            "Invalid $-variable specified"
        );
    }
}
