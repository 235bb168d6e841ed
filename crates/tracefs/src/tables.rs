//! Read-only kernel tables that live behind tracefs and debugfs: the kprobe
//! blacklist (`/sys/kernel/debug/kprobes/blacklist`, kernel/kprobes.c), the
//! ftrace locations (`available_filter_functions[_addrs]`,
//! kernel/trace/ftrace.c) and what an event directory says about an event
//! (whether it exists, its `format` file).
//!
//! Only the bytes are read here; parsing them is ktrace-symbols' (blacklist,
//! ftrace lists) or the caller's. Nothing is ever written.

use std::path::Path;

use crate::error::Result;
use crate::io;

/// The kprobe blacklist in debugfs.
pub const KPROBES_BLACKLIST: &str = "/sys/kernel/debug/kprobes/blacklist";

/// The text of the kprobe blacklist ([`KPROBES_BLACKLIST`]).
pub fn read_kprobes_blacklist() -> Result<String> {
    io::read(
        Path::new(KPROBES_BLACKLIST),
        "cannot read the kprobe blacklist",
    )
}

/// The text of `available_filter_functions_addrs` (6.5+: with addresses),
/// else of `available_filter_functions`, under the tracefs at `root`; `None`
/// when neither can be read.
pub fn read_filter_functions(root: &Path) -> Option<String> {
    [
        "available_filter_functions_addrs",
        "available_filter_functions",
    ]
    .iter()
    .find_map(|f| std::fs::read_to_string(root.join(f)).ok())
}

/// Whether event `group/event` exists; `None` when tracefs shows no
/// `events` directory at all.
pub fn event_exists(root: &Path, group: &str, event: &str) -> Option<bool> {
    let events = root.join("events");
    events
        .is_dir()
        .then(|| events.join(group).join(event).is_dir())
}

/// The `format` file of event `system/event`: `Ok(None)` when there is no
/// such event.
pub fn read_event_format(root: &Path, system: &str, event: &str) -> Result<Option<String>> {
    let dir = root.join("events").join(system).join(event);
    if !dir.is_dir() {
        return Ok(None);
    }
    io::read(&dir.join("format"), "cannot read an event format").map(Some)
}

/// Every event under `events/` as `(system, event)`, sorted; empty when
/// tracefs shows none.
pub fn list_events(root: &Path) -> Vec<(String, String)> {
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| {
                    let e = e.ok()?;
                    e.file_type().ok()?.is_dir().then_some(())?;
                    e.file_name().into_string().ok()
                })
                .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let events = root.join("events");
    let mut out = Vec::new();
    for system in names(&events) {
        for event in names(&events.join(&system)) {
            out.push((system.clone(), event));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tables_are_none_not_errors() {
        let dir = std::env::temp_dir().join(format!("ktrace_tables_{}", std::process::id()));
        std::fs::create_dir_all(dir.join("events/g/e")).unwrap();
        std::fs::write(dir.join("events/g/e/format"), "name: e\n").unwrap();
        assert_eq!(read_filter_functions(&dir), None);
        std::fs::write(dir.join("available_filter_functions"), "vfs_read\n").unwrap();
        assert_eq!(read_filter_functions(&dir).as_deref(), Some("vfs_read\n"));
        assert_eq!(event_exists(&dir, "g", "e"), Some(true));
        assert_eq!(event_exists(&dir, "g", "x"), Some(false));
        assert_eq!(
            read_event_format(&dir, "g", "e").unwrap().as_deref(),
            Some("name: e\n")
        );
        assert_eq!(read_event_format(&dir, "g", "x").unwrap(), None);
        assert_eq!(event_exists(&dir.join("nope"), "g", "e"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
