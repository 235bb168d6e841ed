//! Dynamic events: listing, creating and destroying probe events.
//!
//! Mirrors the definition heads of Documentation/trace/kprobetrace.rst and
//! uprobetracer.rst (`p[:[GRP/][EVENT]] PLACE ARGS`, `r[MAXACTIVE]:…`,
//! `e:`, `f:`, `t:`, `-:GRP/EVENT`) and the command loop of
//! kernel/trace/trace_dynevent.c: `dynamic_events` when the kernel has it
//! (4.20+), else `kprobe_events` / `uprobe_events`. It does not check
//! fetch arguments: the definition language lives in ktrace-probe; here only
//! the head is split so a definition can be moved into a group.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::discover::ProbeKind;
use crate::error::{Error, ErrorKind, Result};
use crate::error_log::ErrorLog;
use crate::io;

/// Largest batch written in one `write(2)`; the kernel parses writes in
/// 4096-byte pieces and a definition may not straddle more than that.
const BATCH_BYTES: usize = 4000;

/// One dynamic event as listed by tracefs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynEvent {
    /// The type prefix: `p`, `r`, `r4`, `e`, `f`, `t`, `s`…
    pub kind: String,
    /// The event group (system).
    pub group: String,
    /// The event name.
    pub event: String,
    /// The whole listed line.
    pub line: String,
}

/// The head of a definition: `KIND[:[GROUP/][EVENT]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The type prefix with any maxactive: `p`, `r`, `r16`, `e`, `f`, `t`.
    pub kind: String,
    /// The group, when written.
    pub group: Option<String>,
    /// The event name, when written.
    pub event: Option<String>,
}

/// Splits a definition into its head and the rest (place and arguments).
pub fn split_head(def: &str) -> Result<(Head, &str)> {
    let def = def.trim();
    let (head, rest) = match def.find(char::is_whitespace) {
        Some(i) => (&def[..i], def[i..].trim_start()),
        None => (def, ""),
    };
    let (kind, name) = match head.split_once(':') {
        Some((k, n)) => (k, Some(n)),
        None => (head, None),
    };
    let first = kind.chars().next();
    let valid_kind = match first {
        Some('p' | 'e' | 'f' | 't') => kind.len() == 1,
        Some('r') => kind[1..].chars().all(|c| c.is_ascii_digit()),
        _ => false,
    };
    if !valid_kind {
        let why = if first == Some('-') {
            "a removal (`-:`) is not a probe definition"
        } else {
            "a definition starts with p, r[MAXACTIVE], e, f or t"
        };
        return Err(Error::new(ErrorKind::Rejected, format!("{why}: {def}")));
    }
    if rest.is_empty() {
        return Err(Error::new(
            ErrorKind::Rejected,
            format!("definition has no place: {def}"),
        ));
    }
    let (group, event) = match name {
        None | Some("") => (None, None),
        Some(n) => match n.split_once('/') {
            Some((g, e)) => (non_empty(g), non_empty(e)),
            None => (None, non_empty(n)),
        },
    };
    Ok((
        Head {
            kind: kind.to_string(),
            group,
            event,
        },
        rest,
    ))
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Whether a definition's place is a user-space one (`PATH:OFFSET`).
pub fn kind_of_place(place_and_args: &str) -> ProbeKind {
    let place = place_and_args.split_whitespace().next().unwrap_or("");
    match place.rsplit_once(':') {
        Some((path, _)) if path.contains('/') => ProbeKind::Uprobe,
        _ => ProbeKind::Kprobe,
    }
}

/// Renders a definition with `group` and `event` in its head.
pub fn render(head_kind: &str, group: &str, event: &str, rest: &str) -> String {
    format!("{head_kind}:{group}/{event} {rest}")
}

/// Parses a `dynamic_events` / `kprobe_events` / `uprobe_events` listing.
pub fn parse_list(text: &str) -> Vec<DynEvent> {
    text.lines()
        .filter_map(|line| {
            let head = line.split_whitespace().next()?;
            let (kind, name) = head.split_once(':')?;
            let (group, event) = name.split_once('/')?;
            Some(DynEvent {
                kind: kind.to_string(),
                group: group.to_string(),
                event: event.to_string(),
                line: line.to_string(),
            })
        })
        .collect()
}

/// Access to the dynamic events of one tracefs.
#[derive(Debug, Clone)]
pub struct DynEvents {
    root: PathBuf,
    dynamic: bool,
}

impl DynEvents {
    /// The dynamic events of the tracefs at `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            dynamic: root.join("dynamic_events").exists(),
        }
    }

    /// Whether the generic `dynamic_events` file is used.
    pub fn uses_dynamic_events(&self) -> bool {
        self.dynamic
    }

    fn files_for_listing(&self) -> Vec<PathBuf> {
        if self.dynamic {
            vec![self.root.join("dynamic_events")]
        } else {
            ["kprobe_events", "uprobe_events"]
                .iter()
                .map(|f| self.root.join(f))
                .filter(|p| p.exists())
                .collect()
        }
    }

    fn file_for(&self, kind: ProbeKind) -> PathBuf {
        if self.dynamic {
            self.root.join("dynamic_events")
        } else {
            match kind {
                ProbeKind::Kprobe => self.root.join("kprobe_events"),
                ProbeKind::Uprobe => self.root.join("uprobe_events"),
            }
        }
    }

    /// Lists every dynamic event.
    pub fn list(&self) -> Result<Vec<DynEvent>> {
        let mut out = Vec::new();
        for f in self.files_for_listing() {
            out.extend(parse_list(&io::read(&f, "cannot list dynamic events")?));
        }
        Ok(out)
    }

    /// Lists the events of one group.
    pub fn list_group(&self, group: &str) -> Result<Vec<DynEvent>> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|e| e.group == group)
            .collect())
    }

    /// Creates `defs`, each with an explicit `GROUP/EVENT` head. Either all
    /// are created, or none: on failure the ones this call created are
    /// removed again and the error carries the kernel's `error_log` entry.
    pub fn create(&self, defs: &[String]) -> Result<()> {
        let mut targets = Vec::new();
        for d in defs {
            io::check_one_line(d.trim(), "a probe definition")?;
            let (head, rest) = split_head(d)?;
            let (Some(g), Some(e)) = (head.group, head.event) else {
                return Err(Error::new(
                    ErrorKind::Rejected,
                    format!("definition needs GROUP/EVENT to be created here: {d}"),
                ));
            };
            targets.push((g, e, kind_of_place(rest)));
        }
        let before: BTreeSet<(String, String)> = self
            .list()?
            .into_iter()
            .map(|e| (e.group, e.event))
            .collect();
        let log = ErrorLog::in_dir(&self.root);
        // Batches of definitions that go to the same file.
        let mut i = 0;
        while i < defs.len() {
            let file = self.file_for(targets[i].2);
            let mut batch = String::new();
            let mut lines: Vec<&str> = Vec::new();
            while i < defs.len() && self.file_for(targets[i].2) == file {
                let line = defs[i].trim();
                if !batch.is_empty() && batch.len() + line.len() + 1 > BATCH_BYTES {
                    break;
                }
                batch.push_str(line);
                batch.push('\n');
                lines.push(line);
                i += 1;
            }
            if let Err(err) = io::write(
                &file,
                &batch,
                Some(&log),
                &lines,
                "the kernel rejected a probe definition",
            ) {
                self.rollback(&targets, &before);
                return Err(err);
            }
        }
        Ok(())
    }

    fn rollback(
        &self,
        targets: &[(String, String, ProbeKind)],
        before: &BTreeSet<(String, String)>,
    ) {
        let now: BTreeSet<(String, String)> = match self.list() {
            Ok(l) => l.into_iter().map(|e| (e.group, e.event)).collect(),
            Err(_) => return,
        };
        for (g, e, kind) in targets {
            let key = (g.clone(), e.clone());
            if now.contains(&key) && !before.contains(&key) {
                let _ = self.destroy_event(g, e, *kind);
            }
        }
    }

    /// Removes one event. An event that is already gone is not an error.
    pub fn destroy_event(&self, group: &str, event: &str, kind: ProbeKind) -> Result<()> {
        let cmd = format!("-:{group}/{event}");
        match io::write(
            &self.file_for(kind),
            &format!("{cmd}\n"),
            None,
            &[],
            "cannot remove a dynamic event",
        ) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    /// Removes every event of `group` at once (`-:GROUP/`, which is far
    /// faster than one event at a time), falling back to per-event removal
    /// when the kernel does not take the group form. Returns how many events
    /// the group had. A group that is already gone counts as removed;
    /// [`ErrorKind::Busy`] means some event is still enabled somewhere.
    pub fn destroy_group(&self, group: &str) -> Result<usize> {
        let events = self.list_group(group)?;
        if events.is_empty() {
            return Ok(0);
        }
        let mut kinds: Vec<ProbeKind> = Vec::new();
        for e in &events {
            let k = kind_of_place(e.line.split_once(' ').map(|x| x.1).unwrap_or(""));
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let mut files: Vec<PathBuf> = kinds.iter().map(|k| self.file_for(*k)).collect();
        files.dedup();
        for file in &files {
            match io::write(
                file,
                &format!("-:{group}/\n"),
                None,
                &[],
                "cannot remove a dynamic event group",
            ) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) if e.kind() == ErrorKind::Busy => return Err(e),
                Err(_) => {
                    // Older kernels: one event at a time.
                    for ev in self.list_group(group)? {
                        let k = kind_of_place(ev.line.split_once(' ').map(|x| x.1).unwrap_or(""));
                        self.destroy_event(group, &ev.event, k)?;
                    }
                }
            }
        }
        let left = self.list_group(group)?;
        if !left.is_empty() {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{} event(s) of group {group} are still present after removal",
                    left.len()
                ),
            ));
        }
        Ok(events.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// definition, kind, group, event, rest
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, &'a str);

    #[test]
    fn split_head_table() {
        let cases: &[Case] = &[
            (
                "p:grp/ev /bin/true:0x10 a=%ax",
                "p",
                Some("grp"),
                Some("ev"),
                "/bin/true:0x10 a=%ax",
            ),
            ("p /bin/true:0x10", "p", None, None, "/bin/true:0x10"),
            ("r:ev do_sys_open", "r", None, Some("ev"), "do_sys_open"),
            (
                "r16:g/ do_sys_open $retval",
                "r16",
                Some("g"),
                None,
                "do_sys_open $retval",
            ),
            ("p: vfs_read", "p", None, None, "vfs_read"),
            (
                "e:g/e sched.sched_switch",
                "e",
                Some("g"),
                Some("e"),
                "sched.sched_switch",
            ),
            (
                "  t:tp   sched_switch  ",
                "t",
                None,
                Some("tp"),
                "sched_switch",
            ),
        ];
        for (def, kind, g, e, rest) in cases {
            let (h, r) = split_head(def).unwrap();
            assert_eq!(h.kind, *kind, "{def}");
            assert_eq!(h.group.as_deref(), *g, "{def}");
            assert_eq!(h.event.as_deref(), *e, "{def}");
            assert_eq!(r, *rest, "{def}");
        }
    }

    #[test]
    fn split_head_rejects() {
        for def in [
            "-:grp/ev",
            "x:grp/ev foo",
            "p:grp/ev",
            "",
            "rx:e foo",
            "pp foo",
        ] {
            assert!(split_head(def).is_err(), "{def}");
        }
    }

    #[test]
    fn kind_of_place_table() {
        for (place, want) in [
            ("/bin/true:0x10 a=%ax", ProbeKind::Uprobe),
            (
                "/usr/lib/x86_64-linux-gnu/libc.so.6:0x1234%return",
                ProbeKind::Uprobe,
            ),
            ("do_sys_open", ProbeKind::Kprobe),
            ("ext4:ext4_sync_fs+4", ProbeKind::Kprobe),
            ("0xffffffff81000000", ProbeKind::Kprobe),
            ("", ProbeKind::Kprobe),
        ] {
            assert_eq!(kind_of_place(place), want, "{place}");
        }
    }

    #[test]
    fn parse_list_real() {
        // cat dynamic_events on the 6.18 host after
        // echo 'p:ktrace_x/ev /bin/true:0x1000' >> dynamic_events
        let l = parse_list(
            "p:ktrace_x/ev /bin/true:0x0000000000001000\nr4:kprobes/r_vfs_read vfs_read\ngarbage\n",
        );
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].kind.as_str(), l[0].group.as_str(), l[0].event.as_str()),
            ("p", "ktrace_x", "ev")
        );
        assert_eq!(
            (l[1].kind.as_str(), l[1].group.as_str(), l[1].event.as_str()),
            ("r4", "kprobes", "r_vfs_read")
        );
    }

    #[test]
    fn render_round_trip() {
        let (h, rest) = split_head("p:a/b /bin/true:0x10 x=%ax").unwrap();
        let out = render(&h.kind, "g", "e", rest);
        assert_eq!(out, "p:g/e /bin/true:0x10 x=%ax");
        let (h2, rest2) = split_head(&out).unwrap();
        assert_eq!(
            (h2.group.as_deref(), h2.event.as_deref(), rest2),
            (Some("g"), Some("e"), rest)
        );
    }
}
