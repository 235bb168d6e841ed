//! Event names for a set of probes moved into one group: the names users wrote
//! are kept, the others are made up the way the kernel makes its own
//! (`p_SYMBOL_OFFSET`, `p_FILE_0xOFFSET`, see `__trace_kprobe_create()` and
//! `__trace_uprobe_create()`), and made unique within the group.
//!
//! It is not the kernel's naming itself (the parser records that in
//! [`ProbeDef::event`] when a definition has no name): ktrace leaves out a zero
//! offset (`p_vfs_read`, not `p_vfs_read_0`) and names a uprobe after the
//! file's base name. Pure code: no I/O.

use std::collections::HashSet;

use crate::ast::{KprobePlace, ProbeDef, ProbeKind};
use crate::parse::MAX_EVENT_NAME_LEN;

/// Longest generated base name, leaving room for a `_N` suffix.
const BASE_LEN: usize = 60;

/// Turns any text into a name the kernel takes (`[A-Za-z0-9_]`), at most 60
/// bytes.
pub fn sanitize(s: &str) -> String {
    let mut n: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    n.truncate(BASE_LEN);
    n
}

/// ktrace's name for a probe written without one: `p_vfs_read`,
/// `r_do_sys_openat2_4`, `p_true_0x23d0`, `p_0xffffffff81000000`, `e_sched_switch`.
pub fn auto_name(def: &ProbeDef) -> String {
    let letter = if def.kind.is_return() { 'r' } else { 'p' };
    let place = match &def.kind {
        ProbeKind::Kprobe { place, .. } => match place {
            KprobePlace::Symbol { symbol, offset: 0 } => symbol.clone(),
            KprobePlace::Symbol { symbol, offset } => format!("{symbol}_{offset}"),
            KprobePlace::Address(a) => format!("0x{a:x}"),
        },
        ProbeKind::Uprobe { path, offset, .. } => {
            let base = path.rsplit('/').next().unwrap_or(path);
            format!("{base}_0x{offset:x}")
        }
        ProbeKind::Eprobe { event, .. } => return sanitize(&format!("e_{event}")),
    };
    sanitize(&format!("{letter}_{place}"))
}

/// Moves `defs` into `group` and gives each a name unique among them and
/// `taken` (names already in the group). Names written by the user
/// (`auto_event == false`) are reserved first, so a generated `_N` suffix
/// never takes one; a written name that repeats an earlier one (or one in
/// `taken`) gets a suffix too. Other definitions use their `event` as the base
/// (set it with [`auto_name`] or a convenience's own choice).
pub fn name_into_group(defs: &mut [ProbeDef], group: &str, taken: &[String]) {
    let mut reserved: HashSet<String> = taken.iter().cloned().collect();
    let mut claimed: HashSet<String> = HashSet::new();
    let mut keeps = vec![false; defs.len()];
    for (i, d) in defs.iter().enumerate() {
        if !d.auto_event && !reserved.contains(&d.event) && claimed.insert(d.event.clone()) {
            keeps[i] = true;
        }
    }
    reserved.extend(claimed);
    for (d, keep) in defs.iter_mut().zip(keeps) {
        d.group = group.to_string();
        if keep {
            continue;
        }
        let base = d.event.clone();
        let mut name = base.clone();
        let mut n = 2;
        while reserved.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        if name.len() >= MAX_EVENT_NAME_LEN {
            name.truncate(MAX_EVENT_NAME_LEN - 1);
        }
        reserved.insert(name.clone());
        d.event = name;
    }
}

/// `cmd` with the session's `group` in its head replaced by `system`, and
/// the caret position `pos` moved with what follows it.
pub fn shown_command(cmd: &str, pos: usize, group: &str, system: &str) -> (String, usize) {
    let head_end = cmd.find(char::is_whitespace).unwrap_or(cmd.len());
    let Some(at) = cmd[..head_end].find(&format!(":{group}/")).map(|i| i + 1) else {
        return (cmd.to_string(), pos);
    };
    let end = at + group.len();
    let text = format!("{}{system}{}", &cmd[..at], &cmd[end..]);
    let pos = if pos >= end {
        pos - group.len() + system.len()
    } else {
        pos.min(at)
    };
    (text, pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, Definition, Offline, Target, check_line};

    fn def(line: &str) -> ProbeDef {
        match check_line(line, Target::new(Arch::X86_64), &Offline).definition {
            Ok(Definition::Probe(p)) => p,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn auto_names_table() {
        for (line, want) in [
            ("p /bin/true:0x23d0", "p_true_0x23d0"),
            ("r /usr/lib/libc.so.6:0x1234 $retval", "r_libc_so_6_0x1234"),
            ("p vfs_read", "p_vfs_read"),
            ("r16 do_sys_openat2+0", "r_do_sys_openat2"),
            ("p do_sys_openat2+4", "p_do_sys_openat2_4"),
            ("p ext4:ext4_sync_fs", "p_ext4_ext4_sync_fs"),
            ("p 0xffffffff81000000", "p_0xffffffff81000000"),
            ("p /tmp/adv/a:b/hot:0x1250", "p_hot_0x1250"),
        ] {
            assert_eq!(auto_name(&def(line)), want, "{line}");
        }
    }

    fn named(lines: &[&str], taken: &[&str]) -> Vec<String> {
        let mut defs: Vec<ProbeDef> = lines
            .iter()
            .map(|l| {
                let mut d = def(l);
                if d.auto_event {
                    d.event = auto_name(&d);
                }
                d
            })
            .collect();
        let taken: Vec<String> = taken.iter().map(|s| s.to_string()).collect();
        name_into_group(&mut defs, "ktrace_g", &taken);
        assert!(defs.iter().all(|d| d.group == "ktrace_g"));
        defs.into_iter().map(|d| d.event).collect()
    }

    /// Issue 14 #12: the duplicate became `x_2` and the explicit `x_2` was
    /// renamed `x_2_2`.
    #[test]
    fn explicit_names_are_reserved_before_suffixes_are_made() {
        assert_eq!(
            named(
                &[
                    "p:x /bin/true:0x1250 which=\\1",
                    "p:x /bin/true:0x1250 which=\\2",
                    "p:x_2 /bin/true:0x1250 which=\\3",
                ],
                &[],
            ),
            ["x", "x_3", "x_2"]
        );
        assert_eq!(
            named(
                &["p vfs_read", "p:p_vfs_read_2 vfs_write", "p vfs_read"],
                &["p_vfs_read_3"],
            ),
            ["p_vfs_read", "p_vfs_read_2", "p_vfs_read_4"]
        );
        assert_eq!(named(&["p:y vfs_read"], &["y"]), ["y_2"]);
    }

    #[test]
    fn rejection_shows_the_stable_system() {
        let group = "ktrace_p23885_s3850302_n4026531836";
        let cmd = format!("p:{group}/ev /tmp/hn:0x1129 a=%di:bogus");
        let pos = cmd.find("bogus").unwrap();
        let (text, at) = shown_command(&cmd, pos, group, "ktrace");
        assert_eq!(text, "p:ktrace/ev /tmp/hn:0x1129 a=%di:bogus");
        assert_eq!(&text[at..], "bogus");
        // a caret inside the group goes to the system's start
        let (text, at) = shown_command(&cmd, 5, group, "mine");
        assert_eq!(
            (text.as_str(), at),
            ("p:mine/ev /tmp/hn:0x1129 a=%di:bogus", 2)
        );
        // no group in the line (`p SYM`): unchanged
        assert_eq!(
            shown_command("p vfs_read", 2, group, "ktrace"),
            ("p vfs_read".into(), 2)
        );
    }
}
