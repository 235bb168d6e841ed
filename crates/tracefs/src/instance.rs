//! Tracing instances: private ring buffers with their own event switches.
//!
//! Mirrors `instances/` in kernel/trace/trace.c (`instance_mkdir`,
//! `instance_rmdir`) and the per-event control files of
//! kernel/trace/trace_events.c: `enable`, `filter`, `trigger`. An instance
//! has its own buffer, `error_log`, `trace_clock`, `buffer_size_kb`,
//! `tracing_on` and `set_event_pid`, so a session that works only in its own
//! instance never disturbs the top-level buffer or anyone else's. This is
//! not a reader: the ring buffer is read by ktrace-ring.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::error_log::ErrorLog;
use crate::io;

/// One tracing instance.
#[derive(Debug, Clone)]
pub struct Instance {
    name: String,
    dir: PathBuf,
}

/// Counters of one CPU's buffer, from `per_cpu/cpuN/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Events in the buffer now.
    pub entries: u64,
    /// Events lost because the buffer wrapped (overwrite mode).
    pub overrun: u64,
    /// Events lost because a commit overran (nested writers).
    pub commit_overrun: u64,
    /// Bytes in the buffer.
    pub bytes: u64,
    /// Events dropped because the buffer was full (no-overwrite mode).
    pub dropped_events: u64,
    /// Events read so far.
    pub read_events: u64,
}

impl CpuStats {
    /// Events this CPU lost for any reason.
    pub fn lost(&self) -> u64 {
        self.overrun + self.commit_overrun + self.dropped_events
    }

    /// Parses the text of a `per_cpu/cpuN/stats` file.
    pub fn parse(text: &str) -> Self {
        let mut s = Self::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let Ok(v) = value.trim().parse::<u64>() else {
                continue;
            };
            match key.trim() {
                "entries" => s.entries = v,
                "overrun" => s.overrun = v,
                "commit overrun" => s.commit_overrun = v,
                "bytes" => s.bytes = v,
                "dropped events" => s.dropped_events = v,
                "read events" => s.read_events = v,
                _ => {}
            }
        }
        s
    }
}

impl Instance {
    /// Creates the instance `name` under the tracefs at `root`. Fails with
    /// [`ErrorKind::Exists`] if it exists: it may be someone else's.
    pub fn create(root: &Path, name: &str) -> Result<Self> {
        let dir = root.join("instances").join(name);
        fs::create_dir(&dir).map_err(|e| {
            let err = Error::io("cannot create tracing instance", &dir, e);
            if err.kind() == ErrorKind::NotFound {
                err.with_hint("this kernel has no tracing instances")
            } else {
                err
            }
        })?;
        Ok(Self {
            name: name.to_string(),
            dir,
        })
    }

    /// The top-level buffer: the tracefs root itself, where the kernel's
    /// boot-time events (`kprobe_event=`, `trace_event=`) are enabled and
    /// written. ktrace reads it and disables the events it is asked to
    /// remove there; it is never removed ([`Instance::remove`] fails).
    pub fn top(root: &Path) -> Self {
        Self {
            name: String::new(),
            dir: root.to_path_buf(),
        }
    }

    /// An existing instance, without touching it.
    pub fn open(root: &Path, name: &str) -> Self {
        Self {
            name: name.to_string(),
            dir: root.join("instances").join(name),
        }
    }

    /// The instance's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the instance exists.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// The instance's own error log.
    pub fn error_log(&self) -> ErrorLog {
        ErrorLog::in_dir(&self.dir)
    }

    /// Removes the instance, which also disables every event enabled in it.
    /// Retries while it is busy (a reader still closing); an instance that
    /// is already gone counts as removed.
    pub fn remove(&self) -> Result<()> {
        let mut delay = Duration::from_millis(5);
        let mut last = None;
        for _ in 0..8 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => {
                    let err = Error::io("cannot remove tracing instance", &self.dir, e);
                    if err.kind() != ErrorKind::Busy {
                        return Err(err);
                    }
                    last = Some(err);
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(200));
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::new(ErrorKind::Busy, "tracing instance stays busy")))
    }

    /// The directory of `group/event` in this instance.
    pub fn event_dir(&self, group: &str, event: &str) -> PathBuf {
        self.dir.join("events").join(group).join(event)
    }

    fn write(&self, rel: &Path, data: &str, what: &str) -> Result<()> {
        // The instance's log is written only for this instance, and the
        // kernel may decorate the command it logs (hist triggers prefix it),
        // so any entry made after the mark explains this write.
        io::check_one_line(data, what)?;
        let log = self.error_log();
        io::write(&self.dir.join(rel), data, Some(&log), &[], what)
    }

    /// Enables or disables `group/event` (or the whole group when `event`
    /// is `None`) in this instance only.
    pub fn set_enabled(&self, group: &str, event: Option<&str>, on: bool) -> Result<()> {
        let rel = match event {
            Some(e) => Path::new("events").join(group).join(e).join("enable"),
            None => Path::new("events").join(group).join("enable"),
        };
        self.write(&rel, if on { "1" } else { "0" }, "cannot switch event")
    }

    /// Whether `group/event` records in this instance: `None` when the
    /// event is not there (deleted), else whether its `enable` file starts
    /// with `1` (`0*` is soft-disabled: kept registered for a trigger, not
    /// recording).
    pub fn event_enabled(&self, group: &str, event: &str) -> Result<Option<bool>> {
        let dir = self.event_dir(group, event);
        if !dir.exists() {
            return Ok(None);
        }
        let t = io::read(&dir.join("enable"), "cannot read enable")?;
        Ok(Some(t.trim_start().starts_with('1')))
    }

    /// Sets the filter of `group/event` in this instance. The kernel's
    /// message (with caret) is attached when it rejects the filter.
    pub fn set_filter(&self, group: &str, event: &str, filter: &str) -> Result<()> {
        let rel = Path::new("events").join(group).join(event).join("filter");
        self.write(&rel, filter, "the kernel rejected the filter")
    }

    /// Adds a trigger to `group/event` in this instance.
    pub fn add_trigger(&self, group: &str, event: &str, trigger: &str) -> Result<()> {
        let rel = Path::new("events").join(group).join(event).join("trigger");
        self.write(&rel, trigger, "the kernel rejected the trigger")
    }

    /// Removes trigger `trigger` (the text that installed it) from
    /// `group/event` in this instance (`!TRIGGER`).
    pub fn remove_trigger(&self, group: &str, event: &str, trigger: &str) -> Result<()> {
        let rel = Path::new("events").join(group).join(event).join("trigger");
        self.write(&rel, &format!("!{trigger}"), "cannot remove the trigger")
    }

    /// Removes every trigger of `group/event` in this instance at once, as
    /// the kernel does when the event's trigger file is opened with
    /// `O_TRUNC` (each trigger command's `unreg_all` for this event file
    /// only). For teardown of an instance ktrace owns, whose triggers'
    /// texts are lost (a killed session): a hist trigger's readback is not
    /// always accepted back with `!`. The kernel keeps a hist trigger whose
    /// variables another trigger still uses, so callers repeat in passes.
    /// Returns whether triggers were present before.
    pub fn clear_triggers(&self, group: &str, event: &str) -> Result<bool> {
        let path = self.event_dir(group, event).join("trigger");
        let text = io::read(&path, "cannot read the triggers")?;
        if !text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        {
            return Ok(false);
        }
        fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io("cannot clear the triggers", &path, e))?;
        Ok(true)
    }

    /// The `trigger` file of `group/event` in this instance: one line per
    /// trigger as the kernel prints it back (a hist trigger ends in
    /// `[active]` or `[paused]`), or `# Available triggers:` when none.
    pub fn read_triggers(&self, group: &str, event: &str) -> Result<String> {
        io::read(
            &self.event_dir(group, event).join("trigger"),
            "cannot read the triggers",
        )
    }

    /// The pids of `set_event_pid` (`notrace`: `set_event_notrace_pid`),
    /// empty when the file is empty; `None` when this kernel has no such
    /// file.
    pub fn event_pids(&self, notrace: bool) -> Result<Option<Vec<u32>>> {
        let name = if notrace {
            "set_event_notrace_pid"
        } else {
            "set_event_pid"
        };
        let path = self.dir.join(name);
        if !path.exists() {
            return Ok(None);
        }
        let text = io::read(&path, "cannot read the pid list")?;
        Ok(Some(
            text.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect(),
        ))
    }

    /// The `hist` file of `group/event` in this instance (the tables of
    /// its hist triggers).
    pub fn read_hist(&self, group: &str, event: &str) -> Result<String> {
        io::read(
            &self.event_dir(group, event).join("hist"),
            "cannot read the histogram",
        )
    }

    /// The kernel's verdict on `filter` for `group/event`, obtained by
    /// setting it as the event's filter in this instance and restoring the
    /// previous filter afterwards. The kernel writes no error_log entry for a
    /// bad `if FILTER` in a trigger, but does for the same text in a filter
    /// file, so this recovers its message. Only for an instance the caller
    /// owns and whose event is not enabled yet.
    pub fn diagnose_filter(&self, group: &str, event: &str, filter: &str) -> Option<Error> {
        let path = self.event_dir(group, event).join("filter");
        let previous = fs::read_to_string(&path).ok()?;
        let err = self.set_filter(group, event, filter).err();
        let previous = previous.trim();
        let restore = if previous == "none" || previous.is_empty() {
            "0"
        } else {
            previous
        };
        let _ = self.set_filter(group, event, restore);
        err
    }

    /// Sets the per-CPU buffer size in KiB.
    pub fn set_buffer_size_kb(&self, kb: u64) -> Result<()> {
        self.write(
            Path::new("buffer_size_kb"),
            &kb.to_string(),
            "cannot set buffer size",
        )
    }

    /// How full (percent) a CPU's buffer must be before a poll on its
    /// `trace_pipe_raw` wakes (`buffer_percent`, 5.1+). Returns `false`,
    /// writing nothing, when the kernel lacks it.
    pub fn set_buffer_percent(&self, percent: u32) -> Result<bool> {
        if !self.dir.join("buffer_percent").exists() {
            return Ok(false);
        }
        self.write(
            Path::new("buffer_percent"),
            &percent.to_string(),
            "cannot set buffer_percent",
        )?;
        Ok(true)
    }

    /// Whether the event group `group` is present in this instance
    /// (`events/GROUP`: gone once its last dynamic event is deleted).
    pub fn has_group(&self, group: &str) -> bool {
        self.dir.join("events").join(group).is_dir()
    }

    /// Sets the sub-buffer size in KiB (`buffer_subbuf_size_kb`, 6.8+; the
    /// kernel rounds it up to a power-of-two number of pages). Returns
    /// `false`, writing nothing, when the kernel has one page per
    /// sub-buffer. Write it before events are enabled: the kernel
    /// reallocates the buffer.
    pub fn set_subbuf_size_kb(&self, kb: u32) -> Result<bool> {
        if !self.dir.join("buffer_subbuf_size_kb").exists() {
            return Ok(false);
        }
        self.write(
            Path::new("buffer_subbuf_size_kb"),
            &kb.to_string(),
            "cannot set the sub-buffer size",
        )?;
        Ok(true)
    }

    /// The per-CPU buffer size in KiB.
    pub fn buffer_size_kb(&self) -> Result<u64> {
        let t = io::read(&self.dir.join("buffer_size_kb"), "cannot read buffer size")?;
        first_number(&t)
            .ok_or_else(|| Error::new(ErrorKind::Parse, format!("buffer_size_kb: {t:?}")))
    }

    /// The clocks the kernel offers and the selected one (`[local] global …`).
    pub fn trace_clocks(&self) -> Result<(Vec<String>, Option<String>)> {
        let t = io::read(&self.dir.join("trace_clock"), "cannot read trace_clock")?;
        Ok(parse_choice(&t))
    }

    /// Selects the trace clock, after checking the kernel offers it.
    pub fn set_trace_clock(&self, clock: &str) -> Result<()> {
        let (all, _) = self.trace_clocks()?;
        if !all.iter().any(|c| c == clock) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "this kernel has no trace clock {clock:?}; it offers {}",
                    all.join(", ")
                ),
            ));
        }
        self.write(Path::new("trace_clock"), clock, "cannot set trace clock")
    }

    /// Starts or stops recording into this instance's buffer.
    pub fn set_tracing_on(&self, on: bool) -> Result<()> {
        self.write(
            Path::new("tracing_on"),
            if on { "1" } else { "0" },
            "cannot switch tracing_on",
        )
    }

    /// Restricts events to the given pids (empty clears the list).
    pub fn set_event_pids(&self, pids: &[u32]) -> Result<()> {
        let text = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() {
            // Opening with O_TRUNC clears the list of this instance only.
            let p = self.dir.join("set_event_pid");
            return fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&p)
                .map(drop)
                .map_err(|e| Error::io("cannot clear set_event_pid", p, e));
        }
        self.write(
            Path::new("set_event_pid"),
            &text,
            "cannot set set_event_pid",
        )
    }

    /// Never records events of the given pids (`set_event_notrace_pid`,
    /// 5.8+). Returns `false`, writing nothing, when the kernel lacks it.
    pub fn set_event_notrace_pids(&self, pids: &[u32]) -> Result<bool> {
        if !self.dir.join("set_event_notrace_pid").exists() {
            return Ok(false);
        }
        let text = pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        self.write(
            Path::new("set_event_notrace_pid"),
            &text,
            "cannot set set_event_notrace_pid",
        )?;
        Ok(true)
    }

    /// Switches on, in this instance only, the kernel's events that `spec`
    /// names as the instance's `set_event` file takes them (`SYS:EVENT`,
    /// `SYS:*` or `SYS`, `EVENT`, `*:*`; the kernel matches whole words,
    /// `*` alone stands for any). Appended, so the events already on stay
    /// on. The kernel refuses (EINVAL) a spec that matches no event.
    pub fn enable_events(&self, spec: &str) -> Result<()> {
        self.write(Path::new("set_event"), spec, "set_event")
    }

    /// Switches every event of this instance off (`events/enable`): one
    /// write, where removing the instance with many events on costs the
    /// kernel far more (measured under TCG: 3 s against 20 s for ~1,300).
    pub fn disable_all_events(&self) -> Result<()> {
        self.write(Path::new("events/enable"), "0", "cannot switch events off")
    }

    /// The events on in this instance (`set_event`), as `(system, event)`.
    pub fn enabled_events(&self) -> Result<Vec<(String, String)>> {
        let text = io::read(&self.dir.join("set_event"), "cannot read set_event")?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(s, e)| (s.to_string(), e.to_string()))
            .collect())
    }

    /// Sets an instance option (`options/NAME`).
    pub fn set_option(&self, name: &str, on: bool) -> Result<()> {
        self.write(
            &Path::new("options").join(name),
            if on { "1" } else { "0" },
            "cannot set option",
        )
    }

    /// Whether this instance has the option `options/NAME` at all (the
    /// kernel lists only the options it was built with: no
    /// `userstacktrace` without `CONFIG_USER_STACKTRACE_SUPPORT`).
    pub fn has_option(&self, name: &str) -> bool {
        self.dir.join("options").join(name).exists()
    }

    /// The value of `options/NAME` (`None`: no such option here).
    pub fn option(&self, name: &str) -> Option<bool> {
        let v = fs::read_to_string(self.dir.join("options").join(name)).ok()?;
        match v.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }
    }

    /// Whether this instance offers the function tracer: `function` in its
    /// `available_tracers` and its own `set_ftrace_filter` (instances have
    /// them where the kernel supports function tracing in instances).
    pub fn has_function_tracer(&self) -> bool {
        let tracers = fs::read_to_string(self.dir.join("available_tracers")).unwrap_or_default();
        tracers.split_whitespace().any(|t| t == "function")
            && self.dir.join("set_ftrace_filter").exists()
    }

    /// Adds the functions matching `glob` (the kernel's glob, or its
    /// `:mod:` form) to this instance's `set_ftrace_filter`, appending to
    /// what is there. The kernel refuses a glob that matches no function
    /// of `available_filter_functions`.
    pub fn add_ftrace_filter(&self, glob: &str) -> Result<()> {
        self.write(
            Path::new("set_ftrace_filter"),
            glob,
            "cannot set set_ftrace_filter",
        )
    }

    /// The functions in this instance's `set_ftrace_filter` (empty when it
    /// is empty, i.e. when the function tracer would trace everything).
    pub fn ftrace_filter(&self) -> Result<Vec<String>> {
        let t = io::read(
            &self.dir.join("set_ftrace_filter"),
            "cannot read set_ftrace_filter",
        )?;
        Ok(t.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect())
    }

    /// The instance's tracer (`nop` when none).
    pub fn current_tracer(&self) -> Result<String> {
        let t = io::read(
            &self.dir.join("current_tracer"),
            "cannot read current_tracer",
        )?;
        Ok(t.trim().to_string())
    }

    /// Selects the instance's tracer (`function`, or `nop` to stop it).
    pub fn set_current_tracer(&self, tracer: &str) -> Result<()> {
        self.write(
            Path::new("current_tracer"),
            tracer,
            "cannot set current_tracer",
        )
    }

    /// Restricts the function tracer to the given pids
    /// (`set_ftrace_pid`); with the `function-fork` option their children
    /// are added as they fork.
    pub fn set_ftrace_pids(&self, pids: &[u32]) -> Result<()> {
        let text = join_pids(pids);
        self.write(
            Path::new("set_ftrace_pid"),
            &text,
            "cannot set set_ftrace_pid",
        )
    }

    /// Keeps the function tracer off the given pids
    /// (`set_ftrace_notrace_pid`, 5.8+). Returns `false`, writing nothing,
    /// when the kernel lacks it.
    pub fn set_ftrace_notrace_pids(&self, pids: &[u32]) -> Result<bool> {
        if !self.dir.join("set_ftrace_notrace_pid").exists() {
            return Ok(false);
        }
        self.write(
            Path::new("set_ftrace_notrace_pid"),
            &join_pids(pids),
            "cannot set set_ftrace_notrace_pid",
        )?;
        Ok(true)
    }

    /// The CPUs that have a `per_cpu/cpuN` directory.
    pub fn cpus(&self) -> Result<Vec<u32>> {
        let dir = self.dir.join("per_cpu");
        let rd =
            fs::read_dir(&dir).map_err(|e| Error::io("cannot list per-CPU buffers", &dir, e))?;
        let mut cpus: Vec<u32> = rd
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_prefix("cpu")?
                    .parse()
                    .ok()
            })
            .collect();
        cpus.sort_unstable();
        Ok(cpus)
    }

    /// The text of one CPU's `per_cpu/cpuN/stats` (as record files keep
    /// it).
    pub fn cpu_stats_text(&self, cpu: u32) -> Result<String> {
        let p = self
            .dir
            .join("per_cpu")
            .join(format!("cpu{cpu}"))
            .join("stats");
        io::read(&p, "cannot read per-CPU stats")
    }

    /// The buffer counters of one CPU.
    pub fn cpu_stats(&self, cpu: u32) -> Result<CpuStats> {
        let p = self
            .dir
            .join("per_cpu")
            .join(format!("cpu{cpu}"))
            .join("stats");
        Ok(CpuStats::parse(&io::read(&p, "cannot read per-CPU stats")?))
    }
}

fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn first_number(t: &str) -> Option<u64> {
    t.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// Parses a `[selected] other other` choice file such as `trace_clock`.
pub fn parse_choice(text: &str) -> (Vec<String>, Option<String>) {
    let mut all = Vec::new();
    let mut selected = None;
    for w in text.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            selected = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    (all, selected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_real() {
        // cat /sys/kernel/tracing/per_cpu/cpu0/stats on the 6.18 host.
        let text = include_str!("../fixtures/stats.6.18.txt");
        let s = CpuStats::parse(text);
        assert_eq!(
            s,
            CpuStats {
                entries: 0,
                overrun: 0,
                commit_overrun: 0,
                bytes: 0,
                dropped_events: 0,
                read_events: 0
            }
        );
        let busy = "entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 480\noldest event ts:  5.1\nnow ts:  6.2\ndropped events: 7\nread events: 9\n";
        let s = CpuStats::parse(busy);
        assert_eq!(
            (
                s.entries,
                s.overrun,
                s.commit_overrun,
                s.bytes,
                s.dropped_events,
                s.read_events
            ),
            (12, 3, 1, 480, 7, 9)
        );
        assert_eq!(s.lost(), 11);
    }

    #[test]
    fn an_option_is_there_when_its_file_is() {
        let root = std::env::temp_dir().join(format!("ktrace_opt_{}", std::process::id()));
        let inst = Instance::open(&root, "i");
        fs::create_dir_all(inst.dir().join("options")).unwrap();
        fs::write(inst.dir().join("options/userstacktrace"), "0\n").unwrap();
        assert!(inst.has_option("userstacktrace"));
        assert!(!inst.has_option("func_stack_trace"));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn choice_table() {
        let (all, sel) =
            parse_choice("[local] global counter uptime perf mono mono_raw boot tai x86-tsc\n");
        assert_eq!(sel.as_deref(), Some("local"));
        assert_eq!(all.len(), 10);
        assert_eq!(parse_choice(""), (vec![], None));
        assert_eq!(first_number("1410 (expanded: 1410)\n"), Some(1410));
        assert_eq!(first_number("x"), None);
    }
}
