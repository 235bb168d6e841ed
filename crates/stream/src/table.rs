//! The event table of a run: every event whose records may appear in the
//! instance's buffer, by type id, with its parsed format and what it is to
//! ktrace.
//!
//! Built from the `format` files (read through ktrace-tracefs) of the
//! session's probes and of ftrace's stack events; an id met in a record but
//! not registered (an event enabled by a trigger such as
//! `enable_event:sched:sched_switch`, which the kernel switches on by
//! itself) is looked up once through `events/*/*/id` and registered then.
//! Mirrors `ftrace_find_event()` in kernel/trace/trace_output.c, which the
//! kernel's own `trace` uses to find an event's printer by type. It does
//! not decode records (that is [`crate::Event`]) nor print.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ktrace_event::{Events, ProbeKind};

use crate::Error;

/// What an event is to this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One of the session's probes (created by ktrace).
    Probe,
    /// A stack trace (`ftrace/kernel_stack` from a `stacktrace` trigger, or
    /// `ftrace/user_stack` from `options/userstacktrace`): it belongs to
    /// the event record just before it, is shown with it and not counted.
    Stack {
        /// True for `user_stack`.
        user: bool,
    },
    /// An event ktrace did not create but the kernel records in the
    /// instance (enabled by a trigger, or by someone through the instance).
    Kernel,
}

/// One registered event.
#[derive(Debug, Clone)]
pub struct EventInfo {
    /// The type id (`common_type`).
    pub id: u16,
    /// System, parsed format, probe kind (how its header prints) and, for
    /// an eprobe, the event it is attached to.
    pub event: Arc<ktrace_event::Event>,
    /// What it is to this run.
    pub role: Role,
}

impl EventInfo {
    /// The event's system (group).
    pub fn system(&self) -> &str {
        &self.event.system
    }

    /// The event's name.
    pub fn name(&self) -> &str {
        &self.event.format.name
    }

    /// How the kernel prints its header.
    pub fn kind(&self) -> ProbeKind {
        self.event.kind
    }

    /// True for a stack record.
    pub fn is_stack(&self) -> bool {
        matches!(self.role, Role::Stack { .. })
    }
}

/// A probe of the session, as the table needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The group it lives in, in the kernel (where its format is read).
    pub group: String,
    /// The system it is registered, decoded and shown under (ktrace's
    /// stable name for a per-session group; `group` itself elsewhere).
    pub system: String,
    /// The event name.
    pub event: String,
    /// How its header prints.
    pub kind: ProbeKind,
    /// For an eprobe, the event it is attached to (`system.event`).
    pub target: Option<String>,
}

/// Every event of a run, by id.
#[derive(Debug, Clone)]
pub struct EventTable {
    events: Events,
    infos: Vec<Option<EventInfo>>,
    /// Where unknown ids are looked up (`None`: offline, no lookups).
    root: Option<PathBuf>,
    /// Ids looked up and not found (not looked up again).
    missing: HashSet<u16>,
    /// Every event's id in the tracefs, read at the first unknown id (and
    /// again when an id is not in it: an event created since).
    ids: Option<HashMap<u16, (String, String)>>,
}

impl EventTable {
    /// An empty table for a kernel with `sizeof(long) == long_size`, with
    /// unknown ids looked up in the tracefs at `root` when given.
    pub fn new(long_size: usize, root: Option<&Path>) -> EventTable {
        EventTable {
            events: Events::new(long_size),
            infos: Vec::new(),
            root: root.map(Path::to_path_buf),
            missing: HashSet::new(),
            ids: None,
        }
    }

    /// The table of a live run: the probes' formats (read from their
    /// `group`, registered under their `system`) and ftrace's stack
    /// events, read from the tracefs at `root`.
    pub fn load(root: &Path, long_size: usize, probes: &[ProbeSpec]) -> Result<EventTable, Error> {
        let mut t = EventTable::new(long_size, Some(root));
        for p in probes {
            let text = ktrace_tracefs::buffers::event_format(root, &p.group, &p.event)?;
            t.add(&p.system, &text, p.kind, p.target.as_deref(), Role::Probe)
                .map_err(|e| Error::Format {
                    event: format!("{}/{}", p.system, p.event),
                    source: e,
                })?;
        }
        // Stack traces from a `stacktrace` trigger or `userstacktrace`
        // arrive as ftrace's own events; register them when the kernel
        // describes them.
        for (name, user) in [("kernel_stack", false), ("user_stack", true)] {
            if let Ok(text) = ktrace_tracefs::buffers::event_format(root, "ftrace", name) {
                let _ = t.add(
                    "ftrace",
                    &text,
                    ProbeKind::Other,
                    None,
                    Role::Stack { user },
                );
            }
        }
        Ok(t)
    }

    /// Parses `format_text` and registers it under `system`.
    pub fn add(
        &mut self,
        system: &str,
        format_text: &str,
        kind: ProbeKind,
        target: Option<&str>,
        role: Role,
    ) -> Result<&EventInfo, ktrace_event::Error> {
        let ev = match (kind, target) {
            (ProbeKind::Eprobe, Some(t)) => self.events.add_eprobe(system, format_text, t)?,
            _ => self.events.add_with_kind(system, format_text, kind)?,
        };
        let id = ev.format.id;
        let event = ev.clone();
        let slot = usize::from(id);
        if self.infos.len() <= slot {
            self.infos.resize_with(slot + 1, || None);
        }
        Ok(self.infos[slot].insert(EventInfo { id, event, role }))
    }

    /// The event with type `id`, if registered.
    #[inline]
    pub fn get(&self, id: u16) -> Option<&EventInfo> {
        self.infos.get(usize::from(id))?.as_ref()
    }

    /// The event with type `id`, looking it up in tracefs (once) when it
    /// is not registered yet. Returns a warning to show (once per id) when
    /// the lookup failed.
    pub fn find(&mut self, id: u16) -> (Option<&EventInfo>, Option<String>) {
        let mut warning = None;
        if self.get(id).is_none()
            && let Some(root) = self.root.clone()
            && self.missing.insert(id)
        {
            match self.lookup_id(&root, id) {
                Ok(Some((system, name))) => {
                    let added = ktrace_tracefs::buffers::event_format(&root, &system, &name)
                        .map_err(|e| e.to_string())
                        .and_then(|format| {
                            self.add(&system, &format, ProbeKind::Other, None, Role::Kernel)
                                .map(|_| ())
                                .map_err(|e| e.to_string())
                        });
                    match added {
                        Err(e) => {
                            warning = Some(format!(
                                "cannot decode event {system}/{name} (id {id}): {e}"
                            ))
                        }
                        Ok(()) => {
                            self.missing.remove(&id);
                        }
                    }
                }
                Ok(None) => {
                    warning = Some(format!(
                        "records of event type {id} are left out: no event has that id"
                    ))
                }
                Err(e) => warning = Some(format!("cannot look up event type {id}: {e}")),
            }
        }
        (self.get(id), warning)
    }

    /// The system and name of event `id`, from the id map (read again
    /// once when `id` is not in it).
    fn lookup_id(
        &mut self,
        root: &Path,
        id: u16,
    ) -> Result<Option<(String, String)>, ktrace_tracefs::Error> {
        let fresh = self.ids.is_none();
        if !fresh && let Some(found) = self.ids.as_ref().and_then(|m| m.get(&id)) {
            return Ok(Some(found.clone()));
        }
        let map: HashMap<u16, (String, String)> = ktrace_tracefs::buffers::event_ids(root)?
            .into_iter()
            .map(|(i, s, n)| (i, (s, n)))
            .collect();
        let found = map.get(&id).cloned();
        self.ids = Some(map);
        Ok(found)
    }

    /// All registered events.
    pub fn iter(&self) -> impl Iterator<Item = &EventInfo> {
        self.infos.iter().filter_map(Option::as_ref)
    }

    /// Where events registered from now on find the values of the names
    /// their print fmt holds (enum constants the kernel did not export).
    pub fn set_names(&mut self, names: ktrace_event::printfmt::Names) {
        self.events.set_names(names);
    }

    /// The registered events as ktrace-event's registry (what printers
    /// are built from).
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The kernel's `sizeof(long)`.
    pub fn long_size(&self) -> usize {
        self.events.long_size()
    }
}
