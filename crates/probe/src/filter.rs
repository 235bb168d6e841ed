//! An event probe's `if FILTER`, as `trace_eprobe_parse_filter()` hands it to
//! the event filter parser (kernel/trace/trace_events_filter.c,
//! `parse_pred()`), for the filters whose answer is certain from the
//! attached event's format: quotes and parentheses that do not balance
//! (`calc_stack()`, the first pass), a first predicate whose field the
//! event lacks or whose operator is none of the parser's, and one predicate
//! `FIELD OP VALUE` whose value is a number. A number compared with a
//! string field, a glob (`~`) on a numeric field, a number
//! `kstrtoull()`/`kstrtoll()` refuses and a value that is neither a number
//! nor quoted (or missing) are refused with the filter parser's own
//! message; anything else (several predicates, parentheses, quoted
//! strings) is left to the kernel.

use crate::error::TpErr;
use crate::kstrtox::{kstrtoll, kstrtoull};

/// One field of an event's format file: `field:DECL;` with its `signed:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDecl {
    /// The field's name (`prev_pid`, `common_pid`).
    pub name: String,
    /// The C declaration without the name (`char[16]`, `__data_loc char[]`).
    pub ctype: String,
    /// `signed:1`.
    pub signed: bool,
}

/// The fields of an event's format file (common fields included).
pub fn parse_format(text: &str) -> Vec<FieldDecl> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.trim().split(';').map(str::trim);
            let decl = parts.next()?.strip_prefix("field:")?.trim();
            let signed = parts
                .find_map(|p| p.strip_prefix("signed:"))
                .is_some_and(|v| v.trim() == "1");
            let (ctype, last) = decl.rsplit_once(char::is_whitespace)?;
            let (name, dims) = match last.find('[') {
                Some(b) => (&last[..b], &last[b..]),
                None => (last, ""),
            };
            Some(FieldDecl {
                name: name.to_string(),
                ctype: format!("{}{dims}", ctype.trim()),
                signed,
            })
        })
        .collect()
}

/// `filter_assign_type()` and `is_string_field()`: dynamic, relative and
/// static `char` arrays and `char *` pointers compare as strings.
fn is_string(f: &FieldDecl) -> bool {
    let t = f.ctype.as_str();
    (t.contains("__data_loc") && t.contains("char"))
        || (t.contains("__rel_loc") && t.contains("char"))
        || (t.contains('[') && t.contains("char"))
        || t == "char *"
        || t == "const char *"
}

/// The fields every event's filter knows besides its format's
/// (`trace_define_generic_fields()`, kernel/trace/trace_events.c).
const GENERIC_FIELDS: &[&str] = &[
    "CPU",
    "cpu",
    "common_cpu",
    "COMM",
    "comm",
    "common_comm",
    "STACKTRACE",
    "common_stacktrace",
];

/// `calc_stack()`, the filter parser's first pass over the whole string:
/// quotes and parentheses must balance, and its errors point at the byte
/// itself (x86_64 6.12/7.2, seed 23: `next_even" != 18` at 9, `iova(== 98`
/// at 4).
pub fn calc_stack(s: &[u8]) -> Option<(TpErr, usize)> {
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut open = 1usize;
    let mut quote = 0u8;
    let mut last_quote = 0;
    for (i, &c) in s.iter().enumerate() {
        if space(c) {
            continue;
        }
        if quote != 0 {
            if c == quote {
                quote = 0;
            }
            continue;
        }
        match c {
            b'\'' | b'"' => {
                quote = c;
                last_quote = i;
            }
            b'(' => open += 1,
            b')' => {
                if open == 1 {
                    return Some((TpErr::FILT_TOO_MANY_CLOSE, i));
                }
                open -= 1;
            }
            _ => {}
        }
    }
    if quote != 0 {
        return Some((TpErr::FILT_MISSING_QUOTE, last_quote));
    }
    if open != 1 {
        // the unmatched '(' nearest the end, or 0
        let mut level = open;
        let mut i = s.len().saturating_sub(1);
        while i > 0 {
            let c = s[i];
            if quote != 0 {
                if c == quote {
                    quote = 0;
                }
            } else {
                match c {
                    b'(' => {
                        if level == open {
                            return Some((TpErr::FILT_TOO_MANY_OPEN, i));
                        }
                        level -= 1;
                    }
                    b')' => level += 1,
                    b'\'' | b'"' => quote = c,
                    _ => {}
                }
            }
            i -= 1;
        }
        return Some((TpErr::FILT_TOO_MANY_OPEN, 0));
    }
    None
}

/// A first predicate with no field name: parse_pred() returns -1 without
/// an error of its own (`if (!len) return -1;` after the spaces), and
/// append_filter_err() logs "Error" at 0. A `(` or `!` first is
/// predicate_parse()'s own and is left alone. Needs no field list.
/// (conform seed 161573531, index 1632, on arm 7.2, riscv64 7.2 and arm64
/// 6.12: `e:ev41528 SYS/EV x-y=%r1 ... if ~ 90` is the filter's "Error",
/// where ktrace answered the argument's name first)
pub fn no_field_name(filter: &str) -> Option<(TpErr, usize)> {
    let first = filter.trim_start_matches(' ').bytes().next();
    match first {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'(' || b == b'!' => None,
        _ => Some((TpErr::FILT_ERRNO, 0)),
    }
}

/// The filter parser's verdict on `filter` (the words after `if` joined by
/// single spaces): `Some(Ok(()))` accepted, `Some(Err((error, caret)))`
/// refused with the caret the kernel's error_log shows, `None` not decided.
pub fn check(filter: &str, fields: &[FieldDecl]) -> Option<Result<(), (TpErr, usize)>> {
    if let Some(e) = calc_stack(filter.as_bytes()).or_else(|| no_field_name(filter)) {
        return Some(Err(e));
    }
    let b = filter.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let name = &filter[start..i];
    // (`FIELD.function` and the like: read on the kernel's own terms)
    if name.is_empty() || b.get(i) == Some(&b'.') {
        return None;
    }
    // The caret is one past the byte parse_pred() reports (see below):
    // after the name for a field it does not know (x86_64 6.1, seed 23:
    // `22 > sector` at 3), at the operator it does not know (`timer$== 20`
    // at 6, `state state > 7`, `skbaddr =_ 3`).
    let field = match fields.iter().find(|f| f.name == name) {
        Some(f) => f,
        None if GENERIC_FIELDS.contains(&name) => return None,
        None => return Some(Err((TpErr::FILT_FIELD_NOT_FOUND, i + 1))),
    };
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    let op_len = match &b[i..] {
        [b'=', b'=', ..] | [b'!', b'=', ..] | [b'<', b'=', ..] | [b'>', b'=', ..] => 2,
        [b'<' | b'>' | b'~', ..] => 1,
        // OP_BAND: its value is read as the others' are (below), a number
        // after it on the kernel's terms
        [b'&', ..] => 1,
        _ => return Some(Err((TpErr::FILT_INVALID_OP, i + 1))),
    };
    let band = b[i] == b'&';
    let glob = b[i] == b'~';
    i += op_len;
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    let s = i;
    // parse_pred()'s value is a quoted string, a number (a digit or '-'),
    // or (6.6 and later) a `CPUS{...}` list; anything else, nothing
    // included, is "Invalid value" at the value whatever follows (riscv64
    // 6.12 and 7.2, seed 41: `flags ==` at 9, `order_failed&> 3` at 14).
    match b.get(i) {
        Some(b'"' | b'\'') => return None,
        Some(_) if b[i..].starts_with(b"CPUS") => return None,
        Some(c) if c.is_ascii_digit() || *c == b'-' => {}
        _ => return Some(Err((TpErr::FILT_INVALID_VALUE, i + 1))),
    }
    // The first predicate's field and operator are certain whatever
    // follows (arm64 7.2, seed 23: `err&r ~ 89` is "Field not found");
    // past them only one numeric predicate is decided here.
    if band || filter.contains(['(', ')', '"', '\'', '{', '|', '&', ',']) {
        return None;
    }
    // The error_log's caret is one past the value's start that
    // parse_pred() reports (seen on x86_64 6.1 and 6.12: byte 7 of
    // `uid ~ 9`, byte 16 of `__syscall_nr ~ 19`).
    let caret = s + 1;
    if is_string(field) {
        return Some(Err((TpErr::FILT_EXPECT_STRING, caret)));
    }
    if glob {
        return Some(Err((TpErr::FILT_ILLEGAL_FIELD_OP, caret)));
    }
    if b[i] == b'-' {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_alphanumeric() {
        i += 1;
    }
    let num = &filter[s..i];
    // Something after the value: another term, or words the kernel reads
    // on its own terms.
    if filter[i..].trim() != "" || num.len() >= 24 {
        return None;
    }
    let ok = if field.signed {
        kstrtoll(num, 0).is_ok()
    } else {
        kstrtoull(num, 0).is_ok()
    };
    Some(if ok {
        Ok(())
    } else {
        Err((TpErr::FILT_ILLEGAL_INTVAL, caret))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // tracefs events/sched/sched_switch/format (x86_64 6.1 guest), cut
    const SCHED_SWITCH: &str = "name: sched_switch\nID: 316\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
        \tfield:__data_loc char[] name;\toffset:40;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned int flags;\toffset:44;\tsize:4;\tsigned:0;\n";

    #[test]
    fn format_fields_with_types() {
        let f = parse_format(SCHED_SWITCH);
        assert_eq!(f.len(), 7);
        assert_eq!(f[2].name, "prev_comm");
        assert_eq!(f[2].ctype, "char[16]");
        assert!(f[3].signed);
        assert_eq!(f[5].ctype, "__data_loc char[]");
    }

    #[test]
    fn a_predicate_without_a_field_name_is_the_parsers_error_at_0() {
        let f = parse_format(SCHED_SWITCH);
        assert_eq!(check("~ 90", &f), Some(Err((TpErr::FILT_ERRNO, 0))));
        assert_eq!(check(" == 1", &f), Some(Err((TpErr::FILT_ERRNO, 0))));
        assert_eq!(no_field_name("~ 90"), Some((TpErr::FILT_ERRNO, 0)));
        assert_eq!(no_field_name("prev_pid == 1"), None);
        assert_eq!(no_field_name("(prev_pid == 1)"), None);
        assert_eq!(no_field_name("!prev_pid"), None);
        // a quote or parenthesis problem is found first, as before
        assert_eq!(
            check("~ \"90", &f).map(|r| r.unwrap_err().0),
            Some(TpErr::FILT_MISSING_QUOTE)
        );
    }

    #[test]
    fn numbers_against_field_types() {
        let f = parse_format(SCHED_SWITCH);
        let c = |s: &str| check(s, &f);
        // seen on x86_64 6.1/6.12: "Illegal operation for field type", caret
        // at byte 7 of `uid ~ 9`
        assert_eq!(
            c("prev_pid ~ 9"),
            Some(Err((TpErr::FILT_ILLEGAL_FIELD_OP, 12)))
        );
        assert_eq!(c("prev_pid == 9"), Some(Ok(())));
        assert_eq!(c("prev_pid > -9"), Some(Ok(())));
        assert_eq!(c("flags > -9"), Some(Err((TpErr::FILT_ILLEGAL_INTVAL, 9))));
        assert_eq!(
            c("flags == 09"),
            Some(Err((TpErr::FILT_ILLEGAL_INTVAL, 10)))
        );
        assert_eq!(c("flags == 0x10"), Some(Ok(())));
        assert_eq!(
            c("prev_comm == 1"),
            Some(Err((TpErr::FILT_EXPECT_STRING, 14)))
        );
        assert_eq!(c("name ~ 1"), Some(Err((TpErr::FILT_EXPECT_STRING, 8))));
        // `!=` too (conform seed 7: `comm != 45` of sched_process_exit on
        // arm64 6.12, `_key != 45` of sys_enter_fsconfig on arm64 6.1)
        assert_eq!(
            c("prev_comm != 45"),
            Some(Err((TpErr::FILT_EXPECT_STRING, 14)))
        );
        assert_eq!(c("prev_pid != 45"), Some(Ok(())));
        assert_eq!(c("!prev_pid"), None);
        // conform seed 23 (x86_64 6.1): an unknown field, an unknown operator
        assert_eq!(
            c("22 > prev_pid"),
            Some(Err((TpErr::FILT_FIELD_NOT_FOUND, 3)))
        );
        assert_eq!(
            c("nosuch == 1"),
            Some(Err((TpErr::FILT_FIELD_NOT_FOUND, 7)))
        );
        assert_eq!(c("prev_pid$== 20"), Some(Err((TpErr::FILT_INVALID_OP, 9))));
        assert_eq!(
            c("prev_pid prev_pid > 7"),
            Some(Err((TpErr::FILT_INVALID_OP, 10)))
        );
        assert_eq!(c("prev_pid =_ 3"), Some(Err((TpErr::FILT_INVALID_OP, 10))));
        assert_eq!(c("err&r ~ 89"), Some(Err((TpErr::FILT_FIELD_NOT_FOUND, 4))));
        assert_eq!(
            c("prev_pid = 1 && flags == 2"),
            Some(Err((TpErr::FILT_INVALID_OP, 10)))
        );
        assert_eq!(c("prev_pid & 1"), None);
        assert_eq!(
            c("prev_pid&> 3"),
            Some(Err((TpErr::FILT_INVALID_VALUE, 10)))
        );
        assert_eq!(
            c("prev_pid == x && flags == 1"),
            Some(Err((TpErr::FILT_INVALID_VALUE, 13)))
        );
        assert_eq!(
            c("prev_pid && 1"),
            Some(Err((TpErr::FILT_INVALID_VALUE, 11)))
        );
        // calc_stack(): quotes and parentheses, at the byte itself
        assert_eq!(
            c("prev_pid\" != 18"),
            Some(Err((TpErr::FILT_MISSING_QUOTE, 8)))
        );
        assert_eq!(
            c("prev_pid(== 98"),
            Some(Err((TpErr::FILT_TOO_MANY_OPEN, 8)))
        );
        assert_eq!(
            c("prev_pid == 1)"),
            Some(Err((TpErr::FILT_TOO_MANY_CLOSE, 13)))
        );
        assert_eq!(
            c("(prev_pid == 1) && (x"),
            Some(Err((TpErr::FILT_TOO_MANY_OPEN, 19)))
        );
        // a value neither quoted nor a number, or none (riscv64 6.12, seed
        // 41: `flags ==` "Invalid value (did you forget quotes)?" at 9)
        assert_eq!(c("flags =="), Some(Err((TpErr::FILT_INVALID_VALUE, 9))));
        assert_eq!(
            c("prev_pid == x"),
            Some(Err((TpErr::FILT_INVALID_VALUE, 13)))
        );
        assert_eq!(
            c("prev_comm ~ x*"),
            Some(Err((TpErr::FILT_INVALID_VALUE, 13)))
        );
        // left to the kernel
        for s in [
            "prev_comm == \"x\"",
            "comm == 1",
            "prev_pid.function == 1",
            "prev_pid == 1 && flags == 2",
            "(prev_pid == 1)",
            "prev_pid & CPUS{1}",
            "prev_pid == CPUS{1}",
        ] {
            assert_eq!(c(s), None, "{s}");
        }
    }
}
