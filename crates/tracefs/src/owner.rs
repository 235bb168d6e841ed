//! Ownership of tracefs objects: session names, owner liveness, teardown and
//! reaping what dead sessions left behind.
//!
//! A session's event group and instance share one name,
//! `ktrace_p<PID>_s<START>_n<PIDNS>[_<SEQ>]`: the owner's pid, its start time
//! in clock ticks (field 22 of `/proc/<pid>/stat`, which tells a reused pid
//! from the original), the inode of its pid namespace (pids from another
//! namespace are never judged), and a per-process sequence number when one
//! process runs several sessions. Anything not matching this pattern is not
//! ours and is never touched. Teardown follows what was measured on 6.18:
//! remove the instance (which disables its events and frees its buffer),
//! then delete the whole group with one `-:GROUP/` write.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::dynevent::DynEvents;
use crate::error::{Error, ErrorKind, Result};
use crate::instance::Instance;
use crate::io;

/// The fixed prefix of every name ktrace creates.
pub const PREFIX: &str = "ktrace_";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The name of one session's group and instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SessionName {
    /// Owner pid.
    pub pid: u32,
    /// Owner start time in clock ticks since boot.
    pub start: u64,
    /// Inode of the owner's pid namespace (0 if unknown).
    pub pidns: u64,
    /// Sequence number within the owning process.
    pub seq: u32,
}

impl SessionName {
    /// A fresh name for a session of this process.
    pub fn for_this_process() -> Result<Self> {
        let pid = std::process::id();
        let start = start_time(pid).ok_or_else(|| {
            Error::new(
                ErrorKind::NotAvailable,
                "cannot read this process's start time from /proc/self/stat",
            )
            .with_hint("ktrace needs /proc mounted")
        })?;
        Ok(Self {
            pid,
            start,
            pidns: own_pidns(),
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Parses a name; `None` for anything ktrace did not create.
    pub fn parse(name: &str) -> Option<Self> {
        let rest = name.strip_prefix(PREFIX)?;
        let mut parts = rest.split('_');
        let pid = number(parts.next()?.strip_prefix('p')?)?;
        let start = number(parts.next()?.strip_prefix('s')?)?;
        let pidns = number(parts.next()?.strip_prefix('n')?)?;
        let seq = match parts.next() {
            None => 0,
            Some(s) => number(s)?,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            pid: u32::try_from(pid).ok()?,
            start,
            pidns,
            seq: u32::try_from(seq).ok()?,
        })
    }

    /// Whether the owner is alive: `Some(true)` alive, `Some(false)` gone
    /// (no such pid, a zombie or a dead task not yet waited for, or the pid
    /// now belongs to a process started at another time), `None` when this
    /// process cannot tell (no /proc, or another pid namespace that this
    /// process cannot see whole) — and then nothing may be reaped.
    ///
    /// A session of another pid namespace (a ktrace run in a container) is
    /// judged only from the initial pid namespace, which sees every task:
    /// the owner lives if some task is in a namespace with that inode, has
    /// that pid there (the last `NSpid` of its status) and that start time.
    /// Namespace inodes are reused, so the inode alone never decides.
    pub fn owner_alive(&self) -> Option<bool> {
        if !Path::new("/proc/self/stat").exists() {
            return None;
        }
        let own = own_pidns();
        if self.pidns == own {
            return match fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(false),
                Err(_) => None,
                Ok(text) => {
                    Some(stat_is_live(&text) && parse_start_time(&text) == Some(self.start))
                }
            };
        }
        if own != INITIAL_PIDNS || self.pidns == 0 {
            return None;
        }
        Some(foreign_owner_alive(self.pidns, self.pid, self.start))
    }
}

/// The inode of the initial pid namespace (`PROC_PID_INIT_INO`), the one
/// that sees every task.
pub const INITIAL_PIDNS: u64 = 0xEFFF_FFFC;

/// Whether any task of the system is the owner `pid` (as its own namespace
/// `pidns` numbers it) started at `start`: a walk over /proc, from the
/// initial pid namespace.
fn foreign_owner_alive(pidns: u64, pid: u32, start: u64) -> bool {
    let Ok(rd) = fs::read_dir("/proc") else {
        // Cannot look: treat as alive, so nothing is reaped.
        return true;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(host_pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if ns_inode(&format!("/proc/{host_pid}/ns/pid")) != Some(pidns) {
            continue;
        }
        let Ok(status) = fs::read_to_string(format!("/proc/{host_pid}/status")) else {
            continue;
        };
        if innermost_nspid(&status) != Some(pid) {
            continue;
        }
        match fs::read_to_string(format!("/proc/{host_pid}/stat")) {
            Ok(stat) if stat_is_live(&stat) && parse_start_time(&stat) == Some(start) => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// The pid a task has in its own (innermost) pid namespace: the last number
/// of the `NSpid:` line of `/proc/PID/status`.
pub fn innermost_nspid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// Whether a `/proc/PID/stat` text describes a task that still runs: a
/// zombie (`Z`, killed but not yet waited for by its parent) or a dead task
/// (`X`) owns nothing any more.
pub fn stat_is_live(stat: &str) -> bool {
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    !matches!(
        stat[close + 1..].split_whitespace().next(),
        Some("Z" | "X" | "x")
    )
}

impl fmt::Display for SessionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}p{}_s{}_n{}", self.pid, self.start, self.pidns)?;
        if self.seq != 0 {
            write!(f, "_{}", self.seq)?;
        }
        Ok(())
    }
}

fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

/// The start time (clock ticks since boot) of `pid`.
pub fn start_time(pid: u32) -> Option<u64> {
    parse_start_time(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat` text. The command name in
/// field 2 may hold spaces and parentheses, so fields are counted after the
/// last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

fn own_pidns() -> u64 {
    ns_inode("/proc/self/ns/pid").unwrap_or(0)
}

/// The inode of a `pid:[INODE]` namespace link.
fn ns_inode(link: &str) -> Option<u64> {
    let p = fs::read_link(link).ok()?;
    let s = p.to_string_lossy();
    s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The function tracer's option that writes a stack after each call.
pub const FUNC_STACK_TRACE: &str = "func_stack_trace";

/// What a teardown removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Teardown {
    /// The instance existed and was removed.
    pub instance_removed: bool,
    /// Events of the group that were removed.
    pub events_removed: usize,
}

/// Removes the instance and the event group called `name`: first the
/// instance, then the whole group at once. Copes with objects already gone,
/// and with a busy group (one of its events enabled elsewhere, e.g. by a
/// global `events/enable`) by switching that group off and retrying.
pub fn teardown(root: &Path, name: &str) -> Result<Teardown> {
    teardown_reporting(root, name, &mut |_, _| {})
}

/// [`teardown`], telling `progress` (done, total) how far it got in its
/// long part: a dead kernel-engine session's instance holds hist triggers
/// (each event's trigger file is cleared, in passes) and synthetic events
/// (removed one by one), and the kernel waits for grace periods for each
/// trigger it frees (x86_64 7.2 under TCG: tens of ms). Not called when
/// there are none.
pub fn teardown_reporting(
    root: &Path,
    name: &str,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Teardown> {
    let mut out = Teardown::default();
    let dynev = DynEvents::new(root);
    let synthetic: Vec<String> = dynev
        .list_synthetic()?
        .into_iter()
        .filter(|ev| session_of_synthetic(&ev.event) == Some(name))
        .map(|ev| ev.event)
        .collect();
    let mut done = 0;
    let mut total = synthetic.len();
    let inst = Instance::open(root, name);
    if inst.exists() {
        let _ = inst.set_tracing_on(false);
        // The function tracer of `ktrace count`'s fast route: switched off
        // first (removing the instance would too, and frees its filter).
        if inst.current_tracer().is_ok_and(|t| t != "nop") {
            // Its `func_stack_trace` (`--by stack`) is one value for every
            // instance on kernels whose tracer options are the tracer's
            // (6.12: a later instance's function tracer started with it
            // on): switched off here, while the tracer is current and its
            // option file exists, so nothing of it outlives the session.
            if inst.option(FUNC_STACK_TRACE) == Some(true) {
                let _ = inst.set_option(FUNC_STACK_TRACE, false);
            }
            let _ = inst.set_current_tracer("nop");
        }
        // The kernel's own events on in the instance (`ktrace trace -e`):
        // all off in one write before the instance goes.
        if inst
            .enabled_events()
            .is_ok_and(|on| on.iter().any(|(sys, _)| sys != name))
        {
            let _ = inst.disable_all_events();
        }
        if let Err(e) = inst.remove() {
            if e.kind() != ErrorKind::Busy {
                return Err(e);
            }
            // Hist triggers tied to synthetic events keep the instance busy
            // (measured on 6.1 after a SIGKILL): clear ours first.
            clear_own_triggers(&inst, name, &mut |d, t| {
                total = t + synthetic.len();
                done = d;
                progress(done, total);
            });
            let _ = inst.set_enabled(name, None, false);
            inst.remove()?;
        }
        out.instance_removed = true;
    }
    // The session's synthetic events (global, named `NAME__…`): after the
    // instance, whose removal dropped the triggers that used them.
    for ev in &synthetic {
        dynev.destroy_synthetic(ev)?;
        out.events_removed += 1;
        done += 1;
        progress(done, total);
    }
    out.events_removed += match dynev.destroy_group(name) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::Busy => {
            disable_group_everywhere(root, name);
            dynev.destroy_group(name)?
        }
        Err(e) => return Err(e),
    };
    Ok(out)
}

/// Clears the triggers of session `name` in its own instance `inst`: on
/// the events of its group and on its synthetic events. In passes, since
/// the kernel keeps a hist trigger whose variables another still uses.
/// `progress` is told (events cleared, events with triggers) after each.
fn clear_own_triggers(inst: &Instance, name: &str, progress: &mut dyn FnMut(usize, usize)) {
    let mut events: Vec<(String, String)> = Vec::new();
    for system in [name, crate::dynevent::SYNTHETIC] {
        let Ok(rd) = fs::read_dir(inst.dir().join("events").join(system)) else {
            continue;
        };
        for e in rd.flatten() {
            let Some(ev) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if e.path().is_dir() && (system == name || session_of_synthetic(&ev) == Some(name)) {
                events.push((system.to_string(), ev));
            }
        }
    }
    let has_triggers = |system: &str, ev: &str| {
        inst.read_triggers(system, ev).is_ok_and(|t| {
            t.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
    };
    events.retain(|(system, ev)| has_triggers(system, ev));
    let total = events.len();
    progress(0, total);
    for _ in 0..4 {
        if events.is_empty() {
            break;
        }
        for (system, ev) in &events {
            let _ = inst.clear_triggers(system, ev);
        }
        events.retain(|(system, ev)| has_triggers(system, ev));
        progress(total - events.len(), total);
    }
}

/// Switches off the group `group` wherever it is enabled: top level and every
/// instance. Only the group's own switch is written.
fn disable_group_everywhere(root: &Path, group: &str) {
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(rd) = fs::read_dir(root.join("instances")) {
        dirs.extend(rd.filter_map(|e| Some(e.ok()?.path())));
    }
    for d in dirs {
        let f = d.join("events").join(group).join("enable");
        if let Ok(v) = fs::read_to_string(&f)
            && v.trim() != "0"
        {
            let _ = io::write(&f, "0", None, &[], "cannot switch event group off");
        }
    }
}

/// Every session name present in the tracefs at `root`, as an instance or
/// as an event group.
pub fn present_sessions(root: &Path) -> Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    if let Ok(rd) = fs::read_dir(root.join("instances")) {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str()
                && SessionName::parse(n).is_some()
            {
                names.insert(n.to_string());
            }
        }
    }
    let dynev = DynEvents::new(root);
    for ev in dynev.list()? {
        if SessionName::parse(&ev.group).is_some() {
            names.insert(ev.group);
        }
    }
    for ev in dynev.list_synthetic()? {
        if let Some(n) = session_of_synthetic(&ev.event) {
            names.insert(n.to_string());
        }
    }
    Ok(names)
}

/// The name of synthetic event `suffix` of session `session`:
/// `SESSION__SUFFIX` (session names never hold a double underscore, so the
/// owner is read back unambiguously). Synthetic events are global (system
/// `synthetic`), not in the session's group, so their names carry it.
pub fn synthetic_name(session: &str, suffix: &str) -> String {
    format!("{session}__{suffix}")
}

/// The session owning synthetic event `event`, if ktrace named it.
pub fn session_of_synthetic(event: &str) -> Option<&str> {
    let (session, _) = event.split_once("__")?;
    SessionName::parse(session).map(|_| session)
}

/// An exclusive `flock` on tracefs's `instances` directory, held while
/// reaping; released when dropped (or when the process dies). Nothing is
/// created for it. Without the directory (no instances support) there is
/// no lock and reaping proceeds alone.
struct ReapLock(Option<fs::File>);

impl ReapLock {
    fn take(root: &Path) -> ReapLock {
        let dir = fs::File::open(root.join("instances")).ok();
        if let Some(d) = &dir {
            let _ = rustix::fs::flock(d, rustix::fs::FlockOperation::LockExclusive);
        }
        ReapLock(dir)
    }
}

impl Drop for ReapLock {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = rustix::fs::flock(d, rustix::fs::FlockOperation::Unlock);
        }
    }
}

/// One session left behind and what happened to it.
#[derive(Debug)]
pub struct Reaped {
    /// The session's name.
    pub name: String,
    /// What was removed, or why not.
    pub result: Result<Teardown>,
}

/// Removes the groups and instances of sessions whose owner is gone.
/// Sessions whose owner is alive, or cannot be judged, are left alone, and so
/// is everything not named by ktrace.
///
/// Concurrent reapers (two `ktrace clean`s, or two sessions starting at
/// once) take turns on an advisory lock of the `instances` directory, so a
/// session is reaped and reported by one of them only.
pub fn reap(root: &Path) -> Result<Vec<Reaped>> {
    reap_reporting(root, &mut |_, _, _| {})
}

/// [`reap`], telling `progress` (session, done, total) how far each
/// session's teardown got ([`teardown_reporting`]).
pub fn reap_reporting(
    root: &Path,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Vec<Reaped>> {
    let _lock = ReapLock::take(root);
    let mut out = Vec::new();
    for name in present_sessions(root)? {
        let Some(s) = SessionName::parse(&name) else {
            continue;
        };
        if s.owner_alive() == Some(false) {
            out.push(Reaped {
                result: teardown_reporting(root, &name, &mut |d, t| progress(&name, d, t)),
                name,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_round_trip() {
        for n in [
            SessionName {
                pid: 1234,
                start: 98765,
                pidns: 4026531836,
                seq: 0,
            },
            SessionName {
                pid: 1,
                start: 0,
                pidns: 0,
                seq: 7,
            },
        ] {
            let s = n.to_string();
            assert!(s.starts_with(PREFIX));
            assert!(s.len() < 64, "event group names are limited to 64 bytes");
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
            assert_eq!(SessionName::parse(&s), Some(n));
        }
    }

    #[test]
    fn synthetic_names_carry_their_session() {
        let s = SessionName {
            pid: 12,
            start: 34,
            pidns: 56,
            seq: 2,
        }
        .to_string();
        let n = synthetic_name(&s, "0_lat1");
        assert_eq!(session_of_synthetic(&n), Some(s.as_str()));
        assert!(
            n.len() < 64,
            "synthetic event names are limited to 63 bytes"
        );
        for foreign in ["wakeup_latency", "ktrace_x__lat", "ktrace_p1_s2_n3_lat"] {
            assert_eq!(session_of_synthetic(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn foreign_names_are_not_ours() {
        for n in [
            "ktrace_x",
            "ktrace_1234",
            "ktrace_1234_5678",
            "ktrace_p1_s2",
            "ktrace_p1_s2_n3_4_5",
            "ktrace_p01_s2_n3",
            "ktrace_p1_s2_n3_",
            "ktrace_p_s2_n3",
            "ktrace_fix_t7535",
            "kprobes",
            "ktrace_p1_s2_nx",
            "ktrace_p99999999999_s2_n3",
        ] {
            assert_eq!(SessionName::parse(n), None, "{n}");
        }
    }

    #[test]
    fn start_time_table() {
        // /proc/self/stat shape; the comm holds ") (" to test the rfind.
        let stat =
            "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("1 (x) S 1"), None);
        assert_eq!(parse_start_time("no paren"), None);
    }

    #[test]
    fn zombie_owner_is_dead() {
        let run = "77 (ktrace) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5000 1000 10";
        let zombie = "77 (ktrace) Z 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5000 1000 10";
        let odd = "77 (a) Z (b) R 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 5000 1000 10";
        assert!(stat_is_live(run));
        assert!(!stat_is_live(zombie));
        assert!(stat_is_live(odd), "the state follows the last ')'");
        assert!(!stat_is_live("garbage"));
    }

    #[test]
    fn nspid_is_the_innermost() {
        let status = "Name:\tktrace\nTgid:\t4242\nNSpid:\t4242\t7\nNSsid:\t1\n";
        assert_eq!(innermost_nspid(status), Some(7));
        assert_eq!(innermost_nspid("NSpid:\t99\n"), Some(99));
        assert_eq!(innermost_nspid("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_is_alive_and_others_are_judged() {
        let me = SessionName::for_this_process().unwrap();
        assert_eq!(me.owner_alive(), Some(true));
        assert_eq!(me.start, start_time(std::process::id()).unwrap());
        let reused = SessionName {
            start: me.start + 1,
            ..me
        };
        assert_eq!(
            reused.owner_alive(),
            Some(false),
            "same pid, other start time: pid reused"
        );
        let foreign_ns = SessionName {
            pidns: me.pidns + 1,
            ..me
        };
        if me.pidns == INITIAL_PIDNS {
            // The initial namespace sees every task: no task lives in a
            // namespace with that inode and this pid and start time.
            assert_eq!(foreign_ns.owner_alive(), Some(false));
        } else {
            assert_eq!(foreign_ns.owner_alive(), None);
        }
        let next = SessionName::for_this_process().unwrap();
        assert_ne!(next.to_string(), me.to_string());
    }
}
