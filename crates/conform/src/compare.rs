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
    if ours.filter_by_chance
        && ours.accepted
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
    fn strip_id_drops_only_the_id() {
        assert_eq!(
            strip_id("name: a\nID: 1234\nformat:\n"),
            "name: a\nformat:\n"
        );
    }
}
