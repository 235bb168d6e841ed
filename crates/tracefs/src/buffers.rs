//! The files the reading path opens: per-CPU `trace_pipe_raw` handles,
//! `per_cpu/cpuN/stats`, `trace_clock`, `buffer_subbuf_size_kb`,
//! `events/header_page` and `header_event`, event `format` files (also
//! found by their type id), and `saved_cmdlines`.
//!
//! Mirrors the reader side of kernel/trace/trace.c (`tracing_buffers_open`,
//! `tracing_stats_read`, `tracing_saved_cmdlines_fops`, `tracing_clock_show`)
//! and `f_show()`/`event_id_read()` of kernel/trace/trace_events.c. It only
//! opens and reads: decoding pages is ktrace-ring and parsing formats
//! ktrace-event, which work on the file descriptors and text handed out
//! here. Files such as `format` and `header_page` are read with one large
//! `read()` first: 6.18 hands a reader that asks for 32 bytes first only
//! those 32 bytes (`std::fs::read_to_string` starts that way).

use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::instance::{CpuStats, Instance};

/// One CPU's `per_cpu/cpuN/trace_pipe_raw`, opened non-blocking.
#[derive(Debug)]
pub struct CpuBuffer {
    /// The CPU.
    pub cpu: usize,
    /// The open file (read, splice and poll it).
    pub fd: OwnedFd,
    /// Its path, for messages.
    pub path: PathBuf,
}

/// An event found by its type id (`events/SYSTEM/EVENT/id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventById {
    /// The event's system.
    pub system: String,
    /// The event's name.
    pub name: String,
    /// The text of its `format` file.
    pub format: String,
}

/// Reads a whole tracefs file, starting with one large `read()`.
pub fn read_whole(path: &Path, what: &str) -> Result<String> {
    let io = |e| Error::io(what.to_string(), path, e);
    let mut f = fs::File::open(path).map_err(io)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0;
    loop {
        if got == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    buf.truncate(got);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `events/header_page` of the tracefs at `root` (the sub-buffer layout).
pub fn header_page(root: &Path) -> Result<String> {
    read_whole(&root.join("events/header_page"), "cannot read header_page")
}

/// `events/header_event` of the tracefs at `root` (the record header).
pub fn header_event(root: &Path) -> Result<String> {
    read_whole(
        &root.join("events/header_event"),
        "cannot read header_event",
    )
}

/// The `format` file of `system/event`.
pub fn event_format(root: &Path, system: &str, event: &str) -> Result<String> {
    read_whole(
        &root.join("events").join(system).join(event).join("format"),
        "cannot read event format",
    )
}

/// The kernel's `saved_cmdlines` (`<pid> <comm>` lines).
pub fn saved_cmdlines(root: &Path) -> Result<String> {
    read_whole(&root.join("saved_cmdlines"), "cannot read saved_cmdlines")
}

/// The kernel's `printk_formats` (addresses of trace_printk formats; read
/// for record files).
pub fn printk_formats(root: &Path) -> Result<String> {
    read_whole(&root.join("printk_formats"), "cannot read printk_formats")
}

/// Every event's type id: `(id, system, event)` from each
/// `events/*/*/id` (a few thousand small files: read them once, not once
/// per id looked up).
pub fn event_ids(root: &Path) -> Result<Vec<(u16, String, String)>> {
    let events = root.join("events");
    let systems = fs::read_dir(&events).map_err(|e| Error::io("cannot list events", &events, e))?;
    let mut out = Vec::new();
    for sys in systems.filter_map(|e| e.ok()) {
        let Ok(evs) = fs::read_dir(sys.path()) else {
            continue;
        };
        let system = sys.file_name().to_string_lossy().into_owned();
        for ev in evs.filter_map(|e| e.ok()) {
            let Ok(text) = fs::read_to_string(ev.path().join("id")) else {
                continue;
            };
            if let Ok(id) = text.trim().parse::<u16>() {
                out.push((
                    id,
                    system.clone(),
                    ev.file_name().to_string_lossy().into_owned(),
                ));
            }
        }
    }
    Ok(out)
}

/// The event whose type id is `id`: every `events/*/*/id` is read until
/// one holds it (a few thousand small files; for many ids, read
/// [`event_ids`] once). `None` when no event has it.
pub fn find_event_by_id(root: &Path, id: u16) -> Result<Option<EventById>> {
    let events = root.join("events");
    let systems = fs::read_dir(&events).map_err(|e| Error::io("cannot list events", &events, e))?;
    for sys in systems.filter_map(|e| e.ok()) {
        let Ok(evs) = fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.filter_map(|e| e.ok()) {
            let Ok(text) = fs::read_to_string(ev.path().join("id")) else {
                continue;
            };
            if text.trim().parse::<u16>().ok() != Some(id) {
                continue;
            }
            let system = sys.file_name().to_string_lossy().into_owned();
            let name = ev.file_name().to_string_lossy().into_owned();
            let format = event_format(root, &system, &name)?;
            return Ok(Some(EventById {
                system,
                name,
                format,
            }));
        }
    }
    Ok(None)
}

impl CpuStats {
    /// The `now ts:` line of a stats file: the instance's trace clock when
    /// the file was read, in the units of record time stamps (`secs.usecs`
    /// for nanosecond clocks, truncated to the microsecond; the raw count
    /// for the others, such as `counter` and `x86-tsc`).
    pub fn now_ts(text: &str) -> Option<u64> {
        let v = text.lines().find_map(|l| l.strip_prefix("now ts:"))?.trim();
        match v.split_once('.') {
            Some((secs, usecs)) if usecs.len() == 6 => {
                let secs: u64 = secs.parse().ok()?;
                let usecs: u64 = usecs.parse().ok()?;
                secs.checked_mul(1_000_000_000)?.checked_add(usecs * 1000)
            }
            Some(_) => None,
            None => v.parse().ok(),
        }
    }
}

/// The trace clock of an instance, read through an open `stats` file
/// ([`Instance::trace_clock_reader`]).
#[derive(Debug)]
pub struct TraceClock {
    file: fs::File,
    buf: Vec<u8>,
}

impl TraceClock {
    /// The trace clock now (`now ts:`), or `None` when it cannot be read.
    pub fn now(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        CpuStats::now_ts(std::str::from_utf8(&self.buf[..n]).ok()?)
    }
}

impl Instance {
    /// Opens every CPU's `per_cpu/cpuN/trace_pipe_raw` of this instance,
    /// non-blocking and close-on-exec, in CPU order.
    pub fn open_cpu_buffers(&self) -> Result<Vec<CpuBuffer>> {
        use rustix::fs::{Mode, OFlags};
        let mut out = Vec::new();
        for cpu in self.cpus()? {
            let path = self.dir().join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let fd = rustix::fs::open(
                &path,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| Error::io("cannot open the ring buffer", &path, e.into()))?;
            out.push(CpuBuffer {
                cpu: cpu as usize,
                fd,
                path,
            });
        }
        Ok(out)
    }

    /// The instance's trace clock now, from the `now ts:` line of
    /// `per_cpu/cpu<cpu>/stats` (see [`CpuStats::now_ts`]); `None` when it
    /// cannot be read.
    pub fn clock_now(&self, cpu: usize) -> Option<u64> {
        let p = self.dir().join(format!("per_cpu/cpu{cpu}/stats"));
        CpuStats::now_ts(&fs::read_to_string(p).ok()?)
    }

    /// A reader of the instance's trace clock that keeps
    /// `per_cpu/cpu<cpu>/stats` open: each [`TraceClock::now`] is one
    /// `pread` (the kernel formats the file anew on every read), without
    /// the path walk, open and close of [`Instance::clock_now`]. `None`
    /// when the file cannot be opened.
    pub fn trace_clock_reader(&self, cpu: usize) -> Option<TraceClock> {
        let file = fs::File::open(self.dir().join(format!("per_cpu/cpu{cpu}/stats"))).ok()?;
        Some(TraceClock {
            file,
            buf: vec![0u8; 1024],
        })
    }

    /// The selected trace clock (`trace_clock`'s bracketed entry).
    pub fn trace_clock(&self) -> Result<String> {
        let (_, sel) = self.trace_clocks()?;
        sel.ok_or_else(|| Error::new(ErrorKind::Parse, "trace_clock names no selected clock"))
    }

    /// A boot-mapped instance's `last_boot_info` (Linux 6.12 on,
    /// kernel/trace/trace.c): `# Current` when its buffer holds this boot's
    /// events only, else the previous boot's kernel text address
    /// (`ADDR\t[kernel]`) and modules. `None` when the instance has no such
    /// file (not boot-mapped, or an older kernel).
    pub fn last_boot_info(&self) -> Option<String> {
        fs::read_to_string(self.dir().join("last_boot_info")).ok()
    }

    /// The header of the instance's `trace` file (the `#` lines the kernel
    /// prints before any event; read while the instance is still empty):
    /// it shows which flag columns this kernel prints.
    pub fn trace_header(&self) -> Option<String> {
        use std::io::Read;
        let mut f = fs::File::open(self.dir().join("trace")).ok()?;
        let mut buf = vec![0u8; 4096];
        let n = f.read(&mut buf).ok()?;
        buf.truncate(n);
        let text = String::from_utf8_lossy(&buf);
        Some(
            text.lines()
                .take_while(|l| l.starts_with('#'))
                .fold(String::new(), |mut s, l| {
                    s.push_str(l);
                    s.push('\n');
                    s
                }),
        )
    }

    /// The sub-buffer size in bytes (`buffer_subbuf_size_kb`, 6.8 and
    /// later); `None` on kernels that have one page per sub-buffer.
    pub fn subbuf_size(&self) -> Option<usize> {
        let t = fs::read_to_string(self.dir().join("buffer_subbuf_size_kb")).ok()?;
        t.trim().parse::<usize>().ok()?.checked_mul(1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_ts_in_both_clock_styles() {
        let ns = "entries: 0\noldest event ts: 10198.923860\nnow ts: 10199.078825\n";
        assert_eq!(CpuStats::now_ts(ns), Some(10_199_078_825_000));
        assert_eq!(
            CpuStats::now_ts("now ts:     3.000001\n"),
            Some(3_000_001_000)
        );
        assert_eq!(
            CpuStats::now_ts("now ts: 81234567890\n"),
            Some(81_234_567_890)
        );
        assert_eq!(CpuStats::now_ts("entries: 0\n"), None);
        assert_eq!(CpuStats::now_ts("now ts: 1.5\n"), None);
        assert_eq!(
            CpuStats::now_ts("now ts: 99999999999999999999.000001\n"),
            None
        );
    }

    #[test]
    fn whole_files_are_read_past_the_first_buffer() {
        let dir = std::env::temp_dir().join(format!("ktrace_whole_{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("big");
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        fs::write(&f, &text).unwrap();
        assert_eq!(read_whole(&f, "x").unwrap(), text);
        assert!(read_whole(&dir.join("missing"), "x").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
