//! ktrace-event: event `format` files and records decoded into typed values.
//!
//! Mirrors the format files tracefs writes for each event
//! (`f_show()` in kernel/trace/trace_events.c) and the field layout probe
//! events use (kernel/trace/trace_probe.c: integer types, hex types, `char`,
//! arrays, bitfields, `__data_loc` strings for `string`, `ustring`, `symstr`,
//! `$comm` and immediate strings, `__probe_ip` / `__probe_func` /
//! `__probe_ret_ip`), and ftrace's stack records ([`stack`]: the frames of
//! `kernel_stack` / `user_stack`, with the kernel's stop rule). It does not read ring-buffer pages (that is
//! ktrace-ring) and does not print (that is ktrace-printer).
//!
//! # Use
//!
//! ```
//! use ktrace_event::{EventFormat, Events};
//! let text = "name: ent\nID: 2326\nformat:\n\
//! \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
//! \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
//! \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
//! \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
//! \tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\n\
//! print fmt: \"(%lx)\", REC->__probe_ip\n";
//! let mut events = Events::new(8);
//! events.add("ktrace_x", text).unwrap();
//! assert_eq!(events.get(2326).unwrap().format.name, "ent");
//! ```

pub mod append;
mod format;
pub mod printfmt;
mod record;
pub mod stack;

pub use format::{EventFormat, Field, FieldKind};
pub use ktrace_ring::Endian;
pub use record::{Common, Int, StrValue, Value, read_loc_str};
pub use stack::{PROBE_MACHINERY, Stack, probe_machinery};

use std::sync::Arc;

/// Errors from parsing format files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A format file line could not be understood.
    #[error("format file line {line}: {msg}")]
    Format {
        /// 1-based line number (0 when the whole file is at fault).
        line: usize,
        /// What was wrong.
        msg: String,
    },
    /// Two events share one id.
    #[error("event id {id} registered twice ({first} and {second})")]
    DuplicateId {
        /// The id.
        id: u16,
        /// The first event's name.
        first: String,
        /// The second event's name.
        second: String,
    },
}

/// How the kernel prints a probe event's header (`(0x...)` for uprobes,
/// `(sym+off/size)` for kprobes, `(x <- y)` for return probes; see
/// kernel/trace/trace_kprobe.c and trace_uprobe.c): a view of
/// `ktrace_probe::ProbeKind`, the one probe kind, made with `From`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// `p:` on a kernel address.
    Kprobe,
    /// `r:` on a kernel function.
    Kretprobe,
    /// `p:` on `path:offset`.
    Uprobe,
    /// `r:` on `path:offset`.
    Uretprobe,
    /// `e:` on another event (kernel/trace/trace_eprobe.c): printed as
    /// `name: (system.event)` and its arguments.
    Eprobe,
    /// Not a probe: printed from its print fmt alone.
    Other,
}

impl From<&ktrace_probe::ProbeKind> for ProbeKind {
    fn from(k: &ktrace_probe::ProbeKind) -> Self {
        match (k.is_kprobe(), k.is_uprobe(), k.is_return()) {
            (true, _, false) => ProbeKind::Kprobe,
            (true, _, true) => ProbeKind::Kretprobe,
            (_, true, false) => ProbeKind::Uprobe,
            (_, true, true) => ProbeKind::Uretprobe,
            _ if matches!(k, ktrace_probe::ProbeKind::Eprobe { .. }) => ProbeKind::Eprobe,
            _ => ProbeKind::Other,
        }
    }
}

impl ProbeKind {
    /// The kind of a line as `dynamic_events` lists it (`p:grp/ev
    /// /bin/x:0x10 ...`), read by ktrace-probe's parser
    /// (`ktrace_probe::parse_listed`); `Other` for what it does not read.
    /// For captured definitions; a probe ktrace made has its typed kind.
    pub fn from_dynamic_event(line: &str) -> ProbeKind {
        ktrace_probe::parse_listed(line).map_or(ProbeKind::Other, |p| ProbeKind::from(&p.kind))
    }

    /// True for return probes.
    pub fn is_return(self) -> bool {
        matches!(self, ProbeKind::Kretprobe | ProbeKind::Uretprobe)
    }
}

/// One registered event.
#[derive(Debug, Clone)]
pub struct Event {
    /// The event's system (group).
    pub system: String,
    /// Its parsed format.
    pub format: EventFormat,
    /// How the kernel prints its header.
    pub kind: ProbeKind,
    /// For an eprobe, the event it is attached to as `system.event` (the
    /// kernel prints it in the header; the record does not hold it).
    pub target: Option<String>,
}

/// The `system.event` an eprobe definition (`e:[grp/]name SYS.EV|SYS/EV
/// ...`) attaches to; `None` for other definitions.
pub fn eprobe_target(definition: &str) -> Option<String> {
    let head = ktrace_probe::head(definition)?;
    if head.prefix != "e" {
        return None;
    }
    let place = head.place?;
    let (sys, ev) = place.split_once(['.', '/'])?;
    Some(format!("{sys}.{ev}"))
}

/// The events a reader may meet, by id.
#[derive(Debug, Clone, Default)]
pub struct Events {
    long_size: usize,
    by_id: Vec<Option<Arc<Event>>>,
    names: Option<printfmt::Names>,
}

impl Events {
    /// An empty set for a kernel with `sizeof(long) == long_size`.
    pub fn new(long_size: usize) -> Events {
        Events {
            long_size,
            by_id: Vec::new(),
            names: None,
        }
    }

    /// Where the print fmts of events added from now on find the values
    /// of names the kernel left in them (enum constants, from BTF).
    pub fn set_names(&mut self, names: printfmt::Names) {
        self.names = Some(names);
    }

    fn parse(&self, text: &str) -> Result<EventFormat, Error> {
        EventFormat::parse_with(text, self.long_size, self.names.as_ref())
    }

    /// The kernel's `sizeof(long)`.
    pub fn long_size(&self) -> usize {
        self.long_size
    }

    /// Parses `format_text` and registers it under `system`, guessing the
    /// probe kind from its fields (a uprobe/kprobe distinction needs
    /// [`Events::add_with_kind`]).
    pub fn add(&mut self, system: &str, format_text: &str) -> Result<&Arc<Event>, Error> {
        let format = self.parse(format_text)?;
        let kind = if format.field("__probe_ret_ip").is_some() {
            ProbeKind::Uretprobe
        } else if format.field("__probe_ip").is_some() {
            ProbeKind::Uprobe
        } else {
            ProbeKind::Other
        };
        self.insert(system, format, kind)
    }

    /// Parses and registers with an explicit probe kind.
    pub fn add_with_kind(
        &mut self,
        system: &str,
        format_text: &str,
        kind: ProbeKind,
    ) -> Result<&Arc<Event>, Error> {
        let format = self.parse(format_text)?;
        self.insert(system, format, kind)
    }

    /// Parses and registers an eprobe attached to `target` (`system.event`).
    pub fn add_eprobe(
        &mut self,
        system: &str,
        format_text: &str,
        target: &str,
    ) -> Result<&Arc<Event>, Error> {
        let format = self.parse(format_text)?;
        self.insert_event(Event {
            system: system.to_string(),
            format,
            kind: ProbeKind::Eprobe,
            target: Some(target.to_string()),
        })
    }

    fn insert(
        &mut self,
        system: &str,
        format: EventFormat,
        kind: ProbeKind,
    ) -> Result<&Arc<Event>, Error> {
        self.insert_event(Event {
            system: system.to_string(),
            format,
            kind,
            target: None,
        })
    }

    /// Registers an event built elsewhere.
    pub fn insert_event(&mut self, event: Event) -> Result<&Arc<Event>, Error> {
        let format = &event.format;
        let id = usize::from(format.id);
        if self.by_id.len() <= id {
            self.by_id.resize_with(id + 1, || None);
        }
        if let Some(old) = &self.by_id[id] {
            return Err(Error::DuplicateId {
                id: format.id,
                first: old.format.name.clone(),
                second: format.name.clone(),
            });
        }
        let slot = &mut self.by_id[id];
        Ok(&*slot.insert(Arc::new(event)))
    }

    /// The event with `common_type == id`.
    pub fn get(&self, id: u16) -> Option<&Event> {
        self.by_id.get(usize::from(id))?.as_deref()
    }

    /// The shared handle of the event with `common_type == id` (printers
    /// keep it with what they worked out for the event).
    pub fn get_shared(&self, id: u16) -> Option<&Arc<Event>> {
        self.by_id.get(usize::from(id))?.as_ref()
    }

    /// All registered events.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.by_id.iter().filter_map(|e| e.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_kinds() {
        let cases = [
            ("p:g/e /bin/true:0x1136 a=%di", ProbeKind::Uprobe),
            ("p:g/e /tmp/adv/a:b/hot:0x1250", ProbeKind::Uprobe),
            ("p:g/e vfs_read a=%x0", ProbeKind::Kprobe),
            ("r:g/e /bin/true:0x1136 rv=$retval", ProbeKind::Uretprobe),
            ("p:g/e do_sys_open+0 a=%di", ProbeKind::Kprobe),
            ("r16:g/e vfs_read", ProbeKind::Kretprobe),
            ("e:g/e sched/sched_switch", ProbeKind::Eprobe),
            ("e sched.sched_switch", ProbeKind::Eprobe),
            ("t:g/e sched_switch", ProbeKind::Other),
            ("", ProbeKind::Other),
        ];
        for (line, kind) in cases {
            assert_eq!(ProbeKind::from_dynamic_event(line), kind, "{line}");
        }
    }

    #[test]
    fn eprobe_targets() {
        for (line, want) in [
            (
                "e:g/e1 sched/sched_switch prev=$prev_pid",
                Some("sched.sched_switch"),
            ),
            (
                "e:ee sched.sched_process_exec",
                Some("sched.sched_process_exec"),
            ),
            ("e sched.x", Some("sched.x")),
            ("e:ee", None),
            ("e:ee nodot", None),
            ("p:g/e do_sys_open", None),
            ("", None),
        ] {
            assert_eq!(eprobe_target(line).as_deref(), want, "{line}");
        }
    }
}
