//! Task names: the one service every sink asks for the name of a pid.
//!
//! Mirrors `trace_find_cmdline()` in kernel/trace/trace.c: `<idle>` for pid
//! 0, the saved name, `<...>` when none is known. Live, a pid is looked up
//! once, at its first record: `/proc/PID/comm` first (the running task's
//! name is the truth: the kernel updates `saved_cmdlines` only when a task
//! is switched out, so right after an event it may still hold an earlier
//! task with the same pid), then the instance's `saved_cmdlines` read
//! through ktrace-tracefs (a task already gone has been switched out, so
//! the kernel has its name, or nothing and `<...>` prints as in the
//! kernel). [`Comms`] itself is only the table and reads no files.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

/// A multiplicative hasher for pid keys (SipHash showed up in profiles).
#[derive(Default)]
struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.0 = (v as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Task names by pid, as the kernel's `saved_cmdlines` has them.
#[derive(Debug, Clone, Default)]
pub struct Comms {
    map: HashMap<i32, String, BuildHasherDefault<PidHasher>>,
    /// Changes whenever `map` may have changed, unique across all tables
    /// (printers cache formatted columns keyed by it).
    generation: u64,
}

/// Source of [`Comms::generation`] values.
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Comms {
    /// An empty table.
    pub fn new() -> Comms {
        Comms::default()
    }

    /// Parses the text of `saved_cmdlines` (`<pid> <comm>` per line).
    pub fn from_saved_cmdlines(text: &str) -> Comms {
        let mut c = Comms::new();
        c.add_saved_cmdlines(text);
        c
    }

    /// Adds (or replaces) entries from `saved_cmdlines` text.
    pub fn add_saved_cmdlines(&mut self, text: &str) {
        self.touch();
        for line in text.lines() {
            if let Some((pid, comm)) = line.split_once(' ')
                && let Ok(pid) = pid.trim().parse()
            {
                self.map.insert(pid, comm.to_string());
            }
        }
    }

    /// Every (pid, name) known, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, &str)> {
        self.map.iter().map(|(&p, c)| (p, c.as_str()))
    }

    /// Records `comm` for `pid`.
    pub fn insert(&mut self, pid: i32, comm: &str) {
        self.touch();
        self.map.insert(pid, comm.to_string());
    }

    /// Marks the table changed.
    fn touch(&mut self) {
        self.generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A value that changes whenever a name may have changed: the name
    /// [`Comms::get`] gives for a pid it knows stays the same while this
    /// does.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True when `pid` has a name (`<idle>` for 0 counts; `<...>` does not).
    pub fn knows(&self, pid: i32) -> bool {
        pid == 0 || self.map.contains_key(&pid)
    }

    /// The name the kernel would print for `pid`: `<idle>` for 0, the
    /// saved name, else `<...>`.
    pub fn get(&self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.map.get(&pid).map_or("<...>", String::as_str)
    }

    /// The saved name, if any (no `<...>` placeholder).
    pub fn lookup(&self, pid: i32) -> Option<&str> {
        self.map.get(&pid).map(String::as_str)
    }
}

/// The task-name service of a live run: [`Comms`] filled at each pid's
/// first record from `/proc/PID/comm`, else the instance's
/// `saved_cmdlines`.
#[derive(Debug)]
pub struct TaskNames {
    comms: Comms,
    seen: std::collections::HashSet<i32, BuildHasherDefault<PidHasher>>,
    /// The pid seen last (runs of one task's records skip the set).
    last: i32,
    root: Option<PathBuf>,
    proc: PathBuf,
    /// False for a recording: the names are what the file saved.
    lookup: bool,
}

impl TaskNames {
    /// Names for a run on the tracefs at `root` (`None`: no tracefs, names
    /// from `/proc` only).
    pub fn new(root: Option<&Path>) -> TaskNames {
        TaskNames {
            comms: Comms::new(),
            seen: Default::default(),
            last: 0,
            root: root.map(Path::to_path_buf),
            proc: PathBuf::from("/proc"),
            lookup: true,
        }
    }

    /// Fixed names (a recording's saved cmdlines): nothing is looked up.
    pub fn fixed(comms: Comms) -> TaskNames {
        TaskNames {
            comms,
            seen: Default::default(),
            last: 0,
            root: None,
            proc: PathBuf::from("/proc"),
            lookup: false,
        }
    }

    /// The table as it stands.
    pub fn comms(&self) -> &Comms {
        &self.comms
    }

    /// Looks `pid` up if this is its first sight in the run.
    #[inline]
    pub fn see(&mut self, pid: i32) {
        if pid == self.last || pid <= 0 || !self.lookup {
            return;
        }
        self.last = pid;
        if self.seen.insert(pid) {
            self.name_new(pid);
        }
    }

    /// Names a task seen for the first time, from /proc or
    /// `saved_cmdlines` (out of line: once a task, not every event).
    #[cold]
    #[inline(never)]
    fn name_new(&mut self, pid: i32) {
        let name = std::fs::read_to_string(self.proc.join(format!("{pid}/comm")))
            .ok()
            .map(|n| task_comm(n.trim_end_matches('\n')).to_string())
            .or_else(|| {
                let text = ktrace_tracefs::buffers::saved_cmdlines(self.root.as_deref()?).ok()?;
                saved_name(&text, pid).map(str::to_string)
            });
        if let Some(name) = name {
            self.comms.insert(pid, &name);
        }
    }
}

/// The task's own name (`task->comm`, what `saved_cmdlines` and the
/// kernel's TASK column hold) from what `/proc/PID/comm` shows: for a
/// workqueue worker the kernel appends its work's description there
/// (`wq_worker_comm()`: `kworker/1:0-rcu_gp`, `kworker/u8:2+flush-254:0`),
/// for a kernel thread it shows the full name (`rcu_tasks_trace_kthread`)
/// where `task->comm` keeps 15 bytes (`TASK_COMM_LEN`).
fn task_comm(name: &str) -> &str {
    let name = match name.strip_prefix("kworker/") {
        Some(rest) => match rest.find(['-', '+']) {
            Some(i) => &name[..8 + i],
            None => name,
        },
        None => name,
    };
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The name `saved_cmdlines` text (`<pid> <comm>` lines) holds for `pid`.
pub fn saved_name(text: &str, pid: i32) -> Option<&str> {
    text.lines().find_map(|l| {
        let (p, comm) = l.split_once(' ')?;
        (p.trim().parse::<i32>().ok()? == pid).then_some(comm)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_cmdlines_names() {
        let c = Comms::from_saved_cmdlines("12161 kfix_target\n12 a b\n");
        assert_eq!(c.get(12161), "kfix_target");
        assert_eq!(c.get(12), "a b");
        assert_eq!(c.get(0), "<idle>");
        assert_eq!(c.get(5), "<...>");
        assert!(c.knows(0) && c.knows(12) && !c.knows(5));
        assert_eq!(saved_name("1 init\n22 sh\n", 22), Some("sh"));
        assert_eq!(saved_name("1 init\nx y\n", 2), None);
    }

    /// A workqueue worker's /proc name carries its work after the name,
    /// a kernel thread's its full name (live 6.18 host: `kworker/1:0-rcu_gp`
    /// and `rcu_tasks_trace_kthread` where the kernel's TASK column has
    /// `kworker/1:0` and `rcu_tasks_trace`).
    #[test]
    fn workqueue_workers_by_their_task_name() {
        for (proc_comm, want) in [
            ("kworker/1:0-rcu_gp", "kworker/1:0"),
            ("kworker/u8:2+flush-254:0", "kworker/u8:2"),
            ("kworker/1:1H-kblockd", "kworker/1:1H"),
            ("kworker/0:2", "kworker/0:2"),
            ("my-kworker/1", "my-kworker/1"),
            ("systemd-journal", "systemd-journal"),
            ("rcu_tasks_trace_kthread", "rcu_tasks_trace"),
            ("ééééééééé", "ééééééé"),
        ] {
            assert_eq!(task_comm(proc_comm), want);
        }
    }

    /// The running task's name comes from /proc first; a pid is looked up
    /// once, so a later rename does not show (as the kernel's own table).
    #[test]
    fn proc_first_then_saved_cmdlines() {
        let dir = std::env::temp_dir().join(format!("ktrace_names_{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc/7")).unwrap();
        std::fs::write(dir.join("proc/7/comm"), "live\n").unwrap();
        std::fs::write(dir.join("saved_cmdlines"), "7 old\n8 gone\n").unwrap();
        let mut n = TaskNames::new(Some(&dir));
        n.proc = dir.join("proc");
        n.see(7);
        n.see(8);
        n.see(9);
        assert_eq!(n.comms().get(7), "live");
        assert_eq!(n.comms().get(8), "gone");
        assert_eq!(n.comms().get(9), "<...>");
        std::fs::write(dir.join("proc/7/comm"), "renamed\n").unwrap();
        n.see(7);
        assert_eq!(n.comms().get(7), "live");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
