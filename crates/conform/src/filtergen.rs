//! Event filters for event probes' `if FILTER` (issue 22): several
//! predicates joined by `&&` and `||` (and by what the parser does not take:
//! a lone `&` or `|`, nothing), nested in parentheses, negated with `!`, with
//! fields of the attached event and others, operators good and bad, and
//! values of every kind the event filter parser reads
//! (kernel/trace/trace_events_filter.c): numbers, hex, negative, too big,
//! quoted strings and globs, bare words, none; and predicates without a
//! field name; the generic fields (`cpu`, `CPU`, `common_cpu`, `comm`,
//! `COMM`, `STACKTRACE`, and `common_comm`, which no kernel here has), the
//! `.ustring` and `.function` suffixes with function names and addresses,
//! `CPUS{...}` lists good and bad, and strings around the 256-byte limit,
//! which kernels before and after 6.6 read differently. Like the rest of
//! the generator it knows no verdicts.

use crate::rng::Rng;

/// A filter over `fields` (the attached event's field names).
pub fn filter(r: &mut Rng, fields: &[String]) -> String {
    let n = [1, 2, 3, 4][r.weighted(&[35, 35, 22, 8])];
    let mut s = String::new();
    for k in 0..n {
        if k > 0 {
            s.push_str(match r.weighted(&[40, 30, 10, 4, 4, 4, 4, 4]) {
                0 => " && ",
                1 => " || ",
                2 => "&&",
                3 => "||",
                4 => " & ",
                5 => " | ",
                6 => " ",
                _ => " && !",
            });
        }
        let p = predicate(r, fields);
        match r.weighted(&[80, 8, 8, 4]) {
            0 => s.push_str(&p),
            1 => s.push_str(&format!("!{p}")),
            2 => s.push_str(&format!("({p})")),
            _ => s.push_str(&format!("!({p})")),
        }
    }
    match r.weighted(&[84, 6, 4, 2, 2, 2]) {
        0 => s,
        1 => format!("({s})"),
        2 => format!("{s} &&"),
        3 => format!("{s} )"),
        4 => format!("{s} ||"),
        _ => format!("!{s}"),
    }
}

/// One predicate `FIELD OP VALUE`, or something near it.
fn predicate(r: &mut Rng, fields: &[String]) -> String {
    let mut name = match r.weighted(&[70, 6, 4, 6, 4, 10]) {
        0 => r
            .pick(fields)
            .cloned()
            .unwrap_or_else(|| "common_pid".into()),
        1 => "common_pid".into(),
        2 => "no_such_field".into(),
        3 => String::new(),
        4 => "9x".into(),
        _ => [
            "cpu",
            "CPU",
            "common_cpu",
            "comm",
            "COMM",
            "STACKTRACE",
            "common_comm",
        ][r.weighted(&[30, 10, 8, 30, 8, 8, 6])]
        .to_string(),
    };
    let function = !name.is_empty() && r.chance(6);
    if !name.is_empty() && r.chance(3) {
        name.push_str(".ustring");
    }
    if function {
        name.push_str([".function", ".func"][r.weighted(&[9, 1])]);
    }
    let op = [
        "==", "!=", ">", "<", ">=", "<=", "~", "&", "=", "=<", "!~", "",
    ][r.weighted(&[30, 15, 10, 5, 5, 5, 10, 5, 3, 2, 1, 2])];
    let value = match r.weighted(&[60, 8, 8, 12, 6, 6, 3, 2, 2, 8, 2]) {
        _ if function => match r.weighted(&[40, 15, 15, 10, 10, 10]) {
            0 => ["vfs_read", "schedule", "do_sys_open", "kfree"][r.below(4)].to_string(),
            1 => "no_such_function".into(),
            2 => format!("0x{:x}", r.range(0, 0x10000)),
            3 => "0x".into(),
            4 => "\"vfs_read\"".into(),
            _ => "123456789012345678901234".into(),
        },
        0 => r.range(0, 100).to_string(),
        1 => format!("0x{:x}", r.range(0, 4096)),
        2 => format!("-{}", r.range(1, 100)),
        3 => format!("\"{}\"", ["bash", "a", "", "sh*", "x y"][r.below(5)]),
        4 => format!("'{}*'", ["k", "sys", "?"][r.below(3)]),
        5 => ["x", "abc", "0x", "08", "1x"][r.below(5)].to_string(),
        6 => String::new(),
        7 => "18446744073709551616".into(),
        8 => "0x00000000000000000000001".into(),
        9 => cpus(r),
        _ => format!("\"{}\"", "x".repeat(r.range(250, 262) as usize)),
    };
    let parts = [name.as_str(), op, value.as_str()];
    let sep = if r.chance(10) { "" } else { " " };
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(sep)
}

/// A `CPUS{LIST}` value: lists of CPUs the guests have (2) and do not,
/// ranges, groups, `N`, `all`, and what bitmap_parselist() refuses.
fn cpus(r: &mut Rng) -> String {
    let list = match r.weighted(&[20, 15, 10, 8, 8, 6, 6, 6, 6, 5, 5, 5]) {
        0 => r.range(0, 3).to_string(),
        1 => format!("{}-{}", r.range(0, 2), r.range(0, 4)),
        2 => format!("{},{}", r.range(0, 2), r.range(0, 2)),
        3 => "N".into(),
        4 => ["all", "ALL", "0-N"][r.below(3)].into(),
        5 => format!("0-1:{}/{}", r.range(0, 3), r.range(0, 3)),
        6 => ["", " ", ","][r.below(3)].into(),
        7 => ["x", "1,x", "a1", "-1", "0-"][r.below(5)].into(),
        8 => r.range(2, 5000).to_string(),
        9 => "1:1/2".into(),
        10 => " 0 , 1 ".into(),
        _ => "4294967296".into(),
    };
    match r.weighted(&[85, 5, 5, 5]) {
        0 => format!("CPUS{{{list}}}"),
        1 => format!("CPUS {list}"),
        2 => format!("CPUS{{{list}"),
        _ => "CPUS".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_have_several_predicates_parentheses_and_nameless_ones() {
        let fields = vec!["prev_pid".to_string(), "prev_comm".to_string()];
        let mut r = Rng::new(5);
        let all: Vec<String> = (0..2000).map(|_| filter(&mut r, &fields)).collect();
        let has = |p: &dyn Fn(&str) -> bool| all.iter().filter(|f| p(f)).count();
        assert!(has(&|f| f.contains("&&")) > 400);
        assert!(has(&|f| f.contains("||")) > 300);
        assert!(has(&|f| f.contains('(')) > 200);
        assert!(has(&|f| f.contains('!')) > 150);
        assert!(has(&|f| f.contains("&& ==") || f.contains("|| ~")) > 5);
        assert!(has(&|f| f.contains('"')) > 200);
        assert!(all.iter().all(|f| !f.contains('\n') && !f.is_empty()));
        // the generic fields, the suffixes, CPU lists and long strings
        assert!(has(&|f| f.contains("comm ") || f.contains("comm.")) > 40);
        assert!(has(&|f| f.contains("cpu ") || f.contains("CPU ")) > 40);
        assert!(has(&|f| f.contains(".function")) > 40);
        assert!(has(&|f| f.contains(".ustring")) > 40);
        assert!(has(&|f| f.contains("CPUS{")) > 40);
        assert!(has(&|f| f.contains(&"x".repeat(256))) > 5);
    }
}
