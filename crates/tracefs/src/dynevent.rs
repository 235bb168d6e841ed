//! Dynamic events: listing, creating and destroying probe events.
//!
//! Mirrors the definition heads of Documentation/trace/kprobetrace.rst and
//! uprobetracer.rst (`p[:[GRP/][EVENT]] PLACE ARGS`, `r[MAXACTIVE]:…`,
//! `e:`, `f:`, `t:`, `-:GRP/EVENT`) and the command loop of
//! kernel/trace/trace_dynevent.c: `dynamic_events` when the kernel has it
//! (4.20+), else `kprobe_events` / `uprobe_events`. It does not parse
//! definitions: the language lives in ktrace-probe, which renders the lines
//! written here; a listing is split only into group and event, which is what
//! ownership needs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::discover::ProbeFile;
use crate::error::{Error, ErrorKind, Result};
use crate::error_log::ErrorLog;
use crate::io;

/// Largest batch written in one `write(2)`; the kernel parses writes in
/// 4096-byte pieces and a definition may not straddle more than that.
const BATCH_BYTES: usize = 4000;

/// The probe files of a tracefs for raw writes, each opened once and
/// written many times: a line and its newline in one `write(2)`, exactly as
/// given, the raw write a shell's `echo LINE >> FILE` makes, for
/// differential tests against the kernel's own parser (`ktrace conform`).
/// Nothing is checked or rolled back; the OS error of a refused write is
/// returned as it came. The kernel parses each write(2) on its own
/// (trace_parse_run_command()), so one held descriptor answers every line
/// as a fresh one does; under emulation the open costs about as much as
/// the write (`ktrace conform`, which writes hundreds of thousands of
/// lines).
#[derive(Debug)]
pub struct RawWriter {
    root: PathBuf,
    open: Vec<(&'static str, std::fs::File)>,
}

impl RawWriter {
    /// Writes `line` and a newline to the probe file `name`
    /// (`dynamic_events`, `kprobe_events`, `uprobe_events` or
    /// `synthetic_events`) in one write(2).
    pub fn write(&mut self, name: &str, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        let name: &'static str = match name {
            "dynamic_events" => "dynamic_events",
            "kprobe_events" => "kprobe_events",
            "uprobe_events" => "uprobe_events",
            "synthetic_events" => "synthetic_events",
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{name} is not a probe file"),
                ));
            }
        };
        let at = match self.open.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                let f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.root.join(name))?;
                self.open.push((name, f));
                self.open.len() - 1
            }
        };
        let mut data = Vec::with_capacity(line.len() + 1);
        data.extend_from_slice(line.as_bytes());
        data.push(b'\n');
        self.open[at].1.write(&data).map(|_| ())
    }
}

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
    /// The legacy file it was listed from; `None` when listed from
    /// `dynamic_events`.
    pub file: Option<ProbeFile>,
}

/// One probe to create: its group and event (which ownership and rollback
/// go by), the legacy file it belongs to when the kernel has no
/// `dynamic_events`, and the definition line itself, rendered by the caller
/// from its typed probe (ktrace-probe). Nothing here parses the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// The event group (system) the line names.
    pub group: String,
    /// The event name the line names.
    pub event: String,
    /// `kprobe_events` or `uprobe_events`.
    pub file: ProbeFile,
    /// The whole definition, `p:GROUP/EVENT PLACE ARGS...`.
    pub line: String,
}

/// Parses a `dynamic_events` / `kprobe_events` / `uprobe_events` listing.
pub fn parse_list(text: &str) -> Vec<DynEvent> {
    parse_list_from(text, None)
}

fn parse_list_from(text: &str, file: Option<ProbeFile>) -> Vec<DynEvent> {
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
                file,
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

    fn files_for_listing(&self) -> Vec<(PathBuf, Option<ProbeFile>)> {
        if self.dynamic {
            vec![(self.root.join("dynamic_events"), None)]
        } else {
            [ProbeFile::KprobeEvents, ProbeFile::UprobeEvents]
                .into_iter()
                .map(|f| (self.root.join(f.name()), Some(f)))
                .filter(|(p, _)| p.exists())
                .collect()
        }
    }

    fn file_for(&self, file: Option<ProbeFile>) -> PathBuf {
        match file {
            Some(f) if !self.dynamic => self.root.join(f.name()),
            _ => self.root.join("dynamic_events"),
        }
    }

    /// The probe files held open for many raw writes (see [`RawWriter`]).
    pub fn raw_writer(&self) -> RawWriter {
        RawWriter {
            root: self.root.clone(),
            open: Vec::new(),
        }
    }

    /// The listing of `dynamic_events` (or of both legacy files), line by
    /// line as the kernel prints it.
    pub fn listing(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (f, _) in self.files_for_listing() {
            out.extend(
                io::read(&f, "cannot list dynamic events")?
                    .lines()
                    .map(str::to_string),
            );
        }
        Ok(out)
    }

    /// Lists every dynamic event.
    pub fn list(&self) -> Result<Vec<DynEvent>> {
        let mut out = Vec::new();
        for (f, file) in self.files_for_listing() {
            out.extend(parse_list_from(
                &io::read(&f, "cannot list dynamic events")?,
                file,
            ));
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

    /// Creates `defs`. Either all are created, or none: on failure the ones
    /// this call created are removed again and the error carries the
    /// kernel's `error_log` entry.
    pub fn create(&self, defs: &[NewEvent]) -> Result<()> {
        for d in defs {
            io::check_one_line(d.line.trim(), "a probe definition")?;
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
            let file = self.file_for(Some(defs[i].file));
            let mut batch = String::new();
            let mut lines: Vec<&str> = Vec::new();
            while i < defs.len() && self.file_for(Some(defs[i].file)) == file {
                let line = defs[i].line.trim();
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
                self.rollback(defs, &before);
                return Err(err);
            }
        }
        Ok(())
    }

    fn rollback(&self, defs: &[NewEvent], before: &BTreeSet<(String, String)>) {
        let now: BTreeSet<(String, String)> = match self.list() {
            Ok(l) => l.into_iter().map(|e| (e.group, e.event)).collect(),
            Err(_) => return,
        };
        for d in defs {
            let key = (d.group.clone(), d.event.clone());
            if now.contains(&key) && !before.contains(&key) {
                let _ = self.destroy_event(&d.group, &d.event, Some(d.file));
            }
        }
    }

    /// Removes one event (`file`: where a kernel without `dynamic_events`
    /// keeps it). An event that is already gone is not an error.
    pub fn destroy_event(&self, group: &str, event: &str, file: Option<ProbeFile>) -> Result<()> {
        let cmd = format!("-:{group}/{event}");
        match io::write(
            &self.file_for(file),
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
        let mut files: Vec<PathBuf> = Vec::new();
        for e in &events {
            let f = self.file_for(e.file);
            if !files.contains(&f) {
                files.push(f);
            }
        }
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
                        self.destroy_event(group, &ev.event, ev.file)?;
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

    /// The synthetic events (system `synthetic`) listed.
    pub fn list_synthetic(&self) -> Result<Vec<DynEvent>> {
        if !self.dynamic {
            let f = self.root.join("synthetic_events");
            if !f.exists() {
                return Ok(Vec::new());
            }
            // `NAME FIELDS` lines
            return Ok(io::read(&f, "cannot list synthetic events")?
                .lines()
                .filter_map(|l| {
                    let name = l.split_whitespace().next()?;
                    Some(DynEvent {
                        kind: "s".into(),
                        group: SYNTHETIC.into(),
                        event: name.to_string(),
                        line: l.to_string(),
                        file: None,
                    })
                })
                .collect());
        }
        Ok(self
            .list()?
            .into_iter()
            .filter(|e| e.kind == "s" && e.group == SYNTHETIC)
            .collect())
    }

    /// Creates synthetic event `name` with `fields` (`u64 lat; u64 lat1`):
    /// `s:synthetic/NAME FIELDS` to `dynamic_events`, or `NAME FIELDS` to
    /// `synthetic_events` on a kernel without the `s:` form (`legacy`).
    /// Synthetic events are global, so only names in ktrace's own
    /// namespace ([`crate::owner::PREFIX`]) are created.
    pub fn create_synthetic(&self, name: &str, fields: &str, legacy: bool) -> Result<()> {
        own_synthetic_name(name)?;
        let (file, line) = if legacy || !self.dynamic {
            (
                self.root.join("synthetic_events"),
                format!("{name} {fields}"),
            )
        } else {
            (
                self.root.join("dynamic_events"),
                format!("s:{SYNTHETIC}/{name} {fields}"),
            )
        };
        io::check_one_line(&line, "a synthetic event definition")?;
        let log = ErrorLog::in_dir(&self.root);
        io::write(
            &file,
            &format!("{line}\n"),
            Some(&log),
            &[],
            "the kernel rejected a synthetic event",
        )
    }

    /// Removes synthetic event `name` (one of ktrace's own); one already
    /// gone is not an error. [`ErrorKind::Busy`] while a trigger still
    /// refers to it.
    pub fn destroy_synthetic(&self, name: &str) -> Result<()> {
        own_synthetic_name(name)?;
        let (file, cmd) = if self.dynamic {
            (
                self.root.join("dynamic_events"),
                format!("-:{SYNTHETIC}/{name}\n"),
            )
        } else {
            (self.root.join("synthetic_events"), format!("!{name}\n"))
        };
        match io::write(&file, &cmd, None, &[], "cannot remove a synthetic event") {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// The system of synthetic events.
pub const SYNTHETIC: &str = "synthetic";

/// Synthetic events are global: ktrace creates and removes only names that
/// start with its prefix.
fn own_synthetic_name(name: &str) -> Result<()> {
    if name.starts_with(crate::owner::PREFIX)
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Rejected,
            format!("{name:?} is not a synthetic event name of ktrace's (ktrace_*)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One held descriptor per probe file, a line and its newline per
    /// write, and nothing but probe files.
    #[test]
    fn a_raw_writer_writes_each_line_to_its_file() {
        let dir = std::env::temp_dir().join(format!("ktrace-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["dynamic_events", "uprobe_events"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let mut w = DynEvents::new(&dir).raw_writer();
        w.write("dynamic_events", "p:a/b vfs_read").unwrap();
        w.write("uprobe_events", "p:a/c /bin/true:0x10").unwrap();
        w.write("dynamic_events", "-:a/b").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("dynamic_events")).unwrap(),
            "p:a/b vfs_read\n-:a/b\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("uprobe_events")).unwrap(),
            "p:a/c /bin/true:0x10\n"
        );
        assert_eq!(w.open.len(), 2);
        let e = w.write("trace", "x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let _ = std::fs::remove_dir_all(&dir);
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
}
