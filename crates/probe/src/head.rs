//! The head of a definition line: its kind prefix (`p`, `r4`, `f`, `t`, `e`,
//! `s`, `-`), the `GROUP/EVENT` name after the `:`, and the place word that
//! follows (`SYM+OFF`, `PATH:OFFSET`, `SYS.EVENT`), read as the kernel's
//! `argv_split()` splits a command into words (on isspace(): space, `\t`, `\n`,
//! `\v`, `\f`, `\r`) and as `__trace_kprobe_create()` and its siblings take the
//! first word apart.
//!
//! It is not a parser: nothing is checked (the kind letter may be any byte, the
//! names any text), and a `#` comment is not cut (trace_parse_run_command()
//! does that before splitting; a listed line has none). It serves code that
//! holds a definition as text (a `dynamic_events` listing, a recorded file's
//! definitions, a line before it is compiled) and needs only its head; a
//! definition ktrace made has its typed [`ProbeDef`](crate::ProbeDef).

/// The bytes `argv_split()` separates words with (the kernel's isspace() of
/// ASCII; its ctype also counts the byte 0xA0, which is left inside words here
/// as in [`check_line`](crate::check_line)).
const SPACES: [char; 6] = [' ', '\t', '\n', '\x0b', '\x0c', '\r'];

/// The head of a definition, borrowed from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    /// The first word up to its first `:` (the whole word when it has none):
    /// `p`, `r`, `r16`, `f`, `t`, `e`, `s`, `-`.
    pub prefix: &'a str,
    /// What the first word holds after its first `:` (`grp/ev`, `ev`, maybe
    /// empty); `None` when it has no `:`.
    pub name: Option<&'a str>,
    /// The group: `name` before its first `/`; `None` without a `/`.
    pub group: Option<&'a str>,
    /// The event: `name` after its first `/`, or all of `name` without one.
    pub event: Option<&'a str>,
    /// The second word: the probed place (`SYM+OFF`, `SYM%return`, an
    /// address, `PATH:OFFSET(REF)`, `SYS.EVENT`, a synthetic event's first
    /// field type); `None` when the line has one word.
    pub place: Option<&'a str>,
    /// The text after the place word, from the next word on (the arguments);
    /// empty when there are none.
    pub rest: &'a str,
}

impl<'a> Head<'a> {
    /// The kind letter: the prefix's first byte (`b'p'`, `b'r'`, `b'-'`, ...);
    /// `None` when the first word starts with `:`.
    pub fn letter(&self) -> Option<u8> {
        self.prefix.as_bytes().first().copied()
    }

    /// What stands between the kind letter and the `:` (`16` of `r16:`),
    /// when anything does: a return probe's maxactive, as text.
    pub fn maxactive(&self) -> Option<&'a str> {
        let after = &self.prefix[self.prefix.chars().next().map_or(0, char::len_utf8)..];
        (!after.is_empty()).then_some(after)
    }

    /// The words after the place (the arguments), split as the kernel does.
    pub fn args(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        words(self.rest)
    }
}

/// The words of `text` as `argv_split()` cuts them.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(SPACES).filter(|w| !w.is_empty())
}

/// `text` from its first word on.
fn skip_spaces(text: &str) -> &str {
    text.trim_start_matches(SPACES)
}

/// Splits `text` into its first word and what follows that word.
fn first_word(text: &str) -> Option<(&str, &str)> {
    let text = skip_spaces(text);
    if text.is_empty() {
        return None;
    }
    Some(match text.find(SPACES) {
        Some(end) => (&text[..end], &text[end..]),
        None => (text, ""),
    })
}

/// The head of the definition `line`; `None` for a line without words.
///
/// ```
/// let h = ktrace_probe::head("r16:grp/ev vfs_read%return ret=$retval").unwrap();
/// assert_eq!((h.letter(), h.maxactive()), (Some(b'r'), Some("16")));
/// assert_eq!((h.group, h.event, h.place), (Some("grp"), Some("ev"), Some("vfs_read%return")));
/// assert_eq!(h.args().collect::<Vec<_>>(), ["ret=$retval"]);
/// ```
pub fn head(line: &str) -> Option<Head<'_>> {
    let (first, after) = first_word(line)?;
    let (prefix, name) = match first.split_once(':') {
        Some((p, n)) => (p, Some(n)),
        None => (first, None),
    };
    let (group, event) = match name.map(|n| n.split_once('/')) {
        Some(Some((g, e))) => (Some(g), Some(e)),
        Some(None) => (None, name),
        None => (None, None),
    };
    let (place, rest) = match first_word(after) {
        Some((p, r)) => (Some(p), skip_spaces(r)),
        None => (None, ""),
    };
    Some(Head {
        prefix,
        name,
        group,
        event,
        place,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (prefix, name, group, event, place, rest) of `line`.
    type Parts<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
    );

    fn parts(line: &str) -> Parts<'_> {
        let h = head(line).unwrap();
        (h.prefix, h.name, h.group, h.event, h.place, h.rest)
    }

    #[test]
    fn every_kind_with_group_and_event() {
        let table: &[(&str, Parts)] = &[
            (
                "p:kprobes/myev do_sys_openat2+0x10 dfd=%di:s32",
                (
                    "p",
                    Some("kprobes/myev"),
                    Some("kprobes"),
                    Some("myev"),
                    Some("do_sys_openat2+0x10"),
                    "dfd=%di:s32",
                ),
            ),
            (
                "r4:grp/ev vfs_read $retval",
                (
                    "r4",
                    Some("grp/ev"),
                    Some("grp"),
                    Some("ev"),
                    Some("vfs_read"),
                    "$retval",
                ),
            ),
            (
                "f:fprobes/ev vfs_read%return",
                (
                    "f",
                    Some("fprobes/ev"),
                    Some("fprobes"),
                    Some("ev"),
                    Some("vfs_read%return"),
                    "",
                ),
            ),
            (
                "t:tracepoints/sw sched_switch prev=prev",
                (
                    "t",
                    Some("tracepoints/sw"),
                    Some("tracepoints"),
                    Some("sw"),
                    Some("sched_switch"),
                    "prev=prev",
                ),
            ),
            (
                "e:eprobes/op syscalls.sys_enter_openat file=+0($filename):ustring",
                (
                    "e",
                    Some("eprobes/op"),
                    Some("eprobes"),
                    Some("op"),
                    Some("syscalls.sys_enter_openat"),
                    "file=+0($filename):ustring",
                ),
            ),
            (
                "p:uprobes/p_bash_0x4245c0 /bin/bash:0x00000000004245c0(0x10) %ax",
                (
                    "p",
                    Some("uprobes/p_bash_0x4245c0"),
                    Some("uprobes"),
                    Some("p_bash_0x4245c0"),
                    Some("/bin/bash:0x00000000004245c0(0x10)"),
                    "%ax",
                ),
            ),
            (
                "r:uprobes/ret /lib/libc.so.6:0x1234",
                (
                    "r",
                    Some("uprobes/ret"),
                    Some("uprobes"),
                    Some("ret"),
                    Some("/lib/libc.so.6:0x1234"),
                    "",
                ),
            ),
            (
                // synthetic events as dynamic_events lists them (a tab after the name)
                "s:synthetic/wakeup_lat\tu64 lat; pid_t pid",
                (
                    "s",
                    Some("synthetic/wakeup_lat"),
                    Some("synthetic"),
                    Some("wakeup_lat"),
                    Some("u64"),
                    "lat; pid_t pid",
                ),
            ),
            (
                "-:grp/ev",
                ("-", Some("grp/ev"), Some("grp"), Some("ev"), None, ""),
            ),
        ];
        for (line, want) in table {
            assert_eq!(parts(line), *want, "{line}");
        }
    }

    #[test]
    fn without_group_or_event() {
        assert_eq!(
            parts("p vfs_read"),
            ("p", None, None, None, Some("vfs_read"), "")
        );
        assert_eq!(
            parts("p:myev vfs_read"),
            ("p", Some("myev"), None, Some("myev"), Some("vfs_read"), "")
        );
        // newer kernels' `GROUP/` (automatic event name) and an empty name
        assert_eq!(
            parts("p:grp/ vfs_read"),
            (
                "p",
                Some("grp/"),
                Some("grp"),
                Some(""),
                Some("vfs_read"),
                ""
            )
        );
        assert_eq!(
            parts("p: vfs_read"),
            ("p", Some(""), None, Some(""), Some("vfs_read"), "")
        );
        assert_eq!(
            parts("e sched.sched_switch"),
            ("e", None, None, None, Some("sched.sched_switch"), "")
        );
        assert_eq!(parts("-:ev"), ("-", Some("ev"), None, Some("ev"), None, ""));
        // the name is cut at the first `:` and the first `/` only
        assert_eq!(
            parts("p:a/b/c:d x"),
            (
                "p",
                Some("a/b/c:d"),
                Some("a"),
                Some("b/c:d"),
                Some("x"),
                ""
            )
        );
        // `.` does not separate a group here (the kernel lists `GROUP/EVENT`)
        assert_eq!(parts("p:grp.ev x").2, None);
        // a bare word: no place
        assert_eq!(parts("p"), ("p", None, None, None, None, ""));
    }

    #[test]
    fn kind_letter_and_maxactive() {
        let h = |l| head(l).unwrap();
        assert_eq!(
            (h("r16:g/e f").letter(), h("r16:g/e f").maxactive()),
            (Some(b'r'), Some("16"))
        );
        assert_eq!(h("r0x10 f").maxactive(), Some("0x10"));
        assert_eq!(h("r:g/e f").maxactive(), None);
        assert_eq!(h("r f").maxactive(), None);
        assert_eq!(h("p f").letter(), Some(b'p'));
        assert_eq!(h("f2:ev f").maxactive(), Some("2"));
        assert_eq!(h("e:ev s.e").letter(), Some(b'e'));
        assert_eq!(h("-:g/e").letter(), Some(b'-'));
        // no letter before the `:`
        assert_eq!((h(":x y").letter(), h(":x y").maxactive()), (None, None));
        // a letter of more than one byte is one letter
        assert_eq!(h("\u{e9}9:x y").maxactive(), Some("9"));
    }

    #[test]
    fn odd_spacing_splits_as_argv_split() {
        let line = " \t p:g/e\x0b\x0c vfs_read \r\t a=%di   b=%si \t";
        assert_eq!(
            parts(line),
            (
                "p",
                Some("g/e"),
                Some("g"),
                Some("e"),
                Some("vfs_read"),
                "a=%di   b=%si \t"
            )
        );
        assert_eq!(
            head(line).unwrap().args().collect::<Vec<_>>(),
            ["a=%di", "b=%si"]
        );
        // only isspace() separates: a non-ASCII space is inside a word
        assert_eq!(parts("p\u{a0}x y").0, "p\u{a0}x");
        assert_eq!(parts("p x\u{2000}y").4, Some("x\u{2000}y"));
        // a `#` is a byte like another (comments are the caller's)
        assert_eq!(parts("p #x").4, Some("#x"));
    }

    #[test]
    fn blank_lines_have_no_head() {
        for l in ["", " ", "\t\r\n\x0b\x0c "] {
            assert_eq!(head(l), None, "{l:?}");
        }
    }

    #[test]
    fn agrees_with_the_parser_on_accepted_definitions() {
        use crate::{Arch, Definition, Offline, Target, check_line};
        let t = Target::new(Arch::X86_64);
        for line in [
            "p:g/e vfs_read+4 a=%di",
            "r8:g/e vfs_read",
            "p:ev /bin/sh:0x10",
            "r vfs_read",
        ] {
            let Ok(Definition::Probe(p)) = check_line(line, t, &Offline).definition else {
                panic!("{line} refused");
            };
            let h = head(line).unwrap();
            assert_eq!(h.group.unwrap_or(&p.group), p.group, "{line}");
            assert_eq!(h.event.unwrap_or(&p.event), p.event, "{line}");
        }
    }

    #[test]
    fn never_panics_on_any_bytes() {
        for line in [
            "\u{0}",
            ":",
            "::",
            "/",
            ":/",
            "\u{10ffff}:\u{10ffff}/\u{10ffff}",
            "é",
        ] {
            if let Some(h) = head(line) {
                let _ = (h.letter(), h.maxactive(), h.args().count());
            }
        }
    }
}
