//! The event source of `ktrace trace`: the session instance's binary
//! per-CPU ring buffers, decoded and printed as they arrive.
//!
//! It wires the libraries together: [`ktrace_ring::Pipeline`] (a reader
//! thread on every CPU's `trace_pipe_raw` with a bounded channel; each round
//! takes the full pages and what is committed on the page being written, so
//! a rare event shows within about 0.1 s) → [`ktrace_ring::Merger`] (records
//! printed in time order up to the point every CPU is known to be complete,
//! the rest held for the next round) →
//! [`ktrace_printer`] (the kernel's `trace` text, JSON lines or raw lines),
//! with the events registered from the probes' own `format` files. Each
//! [`Source::poll`] turns at most one reading round into a [`Batch`] of
//! printed lines, so memory stays bounded by the pipeline's capacity: a slow
//! output blocks this thread, then the reader thread, and the kernel
//! overwrites (counted in page headers and `per_cpu/cpuN/stats`, reported
//! by [`Source::lost_summary`]) instead of ktrace growing. It is not the
//! session's lifecycle (that is `session.rs`) and does not decide what to
//! show (that is the caller's `-n`/pid logic).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::time::Duration;

use anyhow::Context;
use ktrace_event::{Common, Endian, Events, ProbeKind};
use ktrace_printer::{
    Comms, FlagStyle, JsonPrinter, LostSummary, NoSymbols, Symbolizer, TextPrinter, clock_in_ns,
};
use ktrace_ring::{CpuStats, Merged, Merger, PageLayout, Pipeline, PipelineMsg, Reader};

use crate::session::Probe;

/// Pages the channel between the reader thread and the printer may hold.
const CHANNEL_PAGES: usize = 256;
/// Pages taken from one CPU in one reading round.
const ROUND_PAGES_PER_CPU: usize = 64;
/// Percent of the ring buffer filled before a poll wakes the reader (the
/// caller sets the instance's `buffer_percent` to it before
/// [`Source::open`], so polls wake for batches of pages, not every event).
pub const BUFFER_PERCENT: u32 = 25;
/// The longest wait between reading rounds when the buffer stays below
/// `BUFFER_PERCENT` (the latency of a rare event).
const QUIET: Duration = Duration::from_millis(100);

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The kernel's `trace` lines.
    Text,
    /// One JSON object per line.
    Json,
    /// `ts cpu pid system:event field=value...`.
    Raw,
}

/// What one printed line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An event of task `pid` with `common_type == id`.
    Event {
        /// The task (thread id) that hit the probe.
        pid: i32,
        /// The event's type id.
        id: u16,
    },
    /// A stack trace of task `pid` (from `--stack`), shown with the event
    /// before it, not counted as an event.
    Stack {
        /// The task the stack belongs to.
        pid: i32,
    },
    /// A lost-events notice (always shown, never counted as an event).
    Lost,
}

/// Printed lines of one reading round, in one buffer.
#[derive(Debug, Default)]
pub struct Batch {
    /// The lines, each ending in a newline.
    pub bytes: Vec<u8>,
    /// Where each line ends in `bytes`, and what it is.
    pub lines: Vec<(usize, Kind)>,
}

impl Batch {
    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.lines.clear();
    }

    /// The lines with their kinds.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Kind)> {
        let mut start = 0;
        self.lines.iter().map(move |&(end, kind)| {
            let line = &self.bytes[start..end];
            start = end;
            (line, kind)
        })
    }
}

/// The type ids of the `ftrace/kernel_stack` and `ftrace/user_stack` events
/// (from a `stacktrace` trigger or `options/userstacktrace`): their records
/// are shown with the event before them but not counted as events. The
/// printers format them (as kernel/trace/trace_output.c does).
#[derive(Debug, Default, Clone, Copy)]
struct Stacks {
    kernel: Option<u16>,
    user: Option<u16>,
}

impl Stacks {
    fn contains(self, id: u16) -> bool {
        self.kernel == Some(id) || self.user == Some(id)
    }
}

enum Printer {
    Text(TextPrinter<'static>),
    Json(JsonPrinter<'static>),
    Raw,
}

/// The binary ring-buffer reader of one session instance.
pub struct Source {
    pipeline: Option<Pipeline>,
    merger: Merger,
    events: &'static Events,
    endian: Endian,
    printer: Printer,
    instance: PathBuf,
    cpus: Vec<usize>,
    summary: LostSummary,
    closed: bool,
    /// Pids whose name was looked up (first sight in this run).
    seen: std::collections::HashSet<i32>,
    saved_cmdlines: PathBuf,
    /// ktrace's own threads: the kernel leaves out their events
    /// (set_event_notrace_pid) but not the stacks a `stacktrace` trigger
    /// takes for them.
    own: Vec<i32>,
    stacks: Stacks,
}

impl Source {
    /// Prepares reading the instance at `instance` (under tracefs `root`)
    /// for the session's `group` and `probes`, and starts the reader
    /// thread. Call before enabling the events. The event registry and the
    /// symbol table live for the rest of the process (one session per
    /// process), which lets the printers borrow them.
    pub fn open(
        root: &Path,
        instance: &Path,
        group: &str,
        probes: &[Probe],
        format: Format,
    ) -> anyhow::Result<Source> {
        let layout = PageLayout::from_tracefs(root)?;
        let layout = match subbuf_size(instance) {
            Some(s) if s != layout.subbuf_size => layout.with_subbuf_size(s),
            _ => layout,
        };
        let mut events = Events::new(layout.long_size);
        let mut kernel_probes = false;
        for p in probes {
            let path = root
                .join("events")
                .join(group)
                .join(p.event())
                .join("format");
            let text = ktrace_ring::read_whole(&path)?;
            let kind = ProbeKind::from(p.kind());
            kernel_probes |= matches!(kind, ProbeKind::Kprobe | ProbeKind::Kretprobe);
            events
                .add_with_kind(group, &text, kind)
                .with_context(|| format!("format of {}", path.display()))?;
        }
        // Stack traces from a `stacktrace` trigger arrive as ftrace's own
        // events; register them when the kernel describes them.
        for (sys, ev) in [("ftrace", "kernel_stack"), ("ftrace", "user_stack")] {
            let path = root.join("events").join(sys).join(ev).join("format");
            if let Ok(text) = ktrace_ring::read_whole(&path) {
                let _ = events.add_with_kind(sys, &text, ProbeKind::Other);
            }
        }
        let mut stacks = Stacks::default();
        for ev in events.iter().filter(|e| e.system == "ftrace") {
            match ev.format.name.as_str() {
                "kernel_stack" => stacks.kernel = Some(ev.format.id),
                "user_stack" => stacks.user = Some(ev.format.id),
                _ => {}
            }
        }
        let events: &'static Events = Box::leak(Box::new(events));
        let symbols: &'static dyn Symbolizer = if kernel_probes {
            let view = Box::leak(Box::new(ktrace_symbols::KernelView::running(Some(root))));
            Box::leak(Box::new(crate::kview::KernelSymbols::new(view)))
        } else {
            &NoSymbols
        };
        // Names are looked up per pid at first sight (see `flush`), not
        // from a snapshot taken now: pids get reused.
        let comms = Comms::new();
        let endian = layout.endian;
        let release = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        let style = FlagStyle::for_release(&release);
        let printer = match format {
            Format::Text => {
                let mut p = TextPrinter::new(events, endian, style, symbols, comms);
                // counting clocks print raw, as the kernel's `trace` does
                p.time_in_ns = std::fs::read_to_string(instance.join("trace_clock"))
                    .ok()
                    .and_then(|t| selected_clock(&t).map(clock_in_ns))
                    .unwrap_or(true);
                Printer::Text(p)
            }
            Format::Json => Printer::Json(JsonPrinter::new(events, endian, symbols, comms)),
            Format::Raw => Printer::Raw,
        };
        let reader = Reader::open(instance, layout)?;
        let cpus = reader.cpus();
        let pipeline = Pipeline::spawn(reader, CHANNEL_PAGES, ROUND_PAGES_PER_CPU, QUIET);
        let own = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Source {
            pipeline: Some(pipeline),
            merger: Merger::new(layout),
            events,
            endian,
            printer,
            instance: instance.to_path_buf(),
            cpus,
            summary: LostSummary::new(),
            closed: false,
            seen: std::collections::HashSet::new(),
            saved_cmdlines: root.join("saved_cmdlines"),
            own,
            stacks,
        })
    }

    /// The name of the event with type `id`.
    pub fn event_name(&self, id: u16) -> &str {
        self.events.get(id).map_or("?", |e| e.format.name.as_str())
    }

    /// Waits up to `timeout` for a reading round and prints it into
    /// `batch`. Returns false once the reader has finished (after
    /// [`Source::stop`]) and everything was handed over.
    pub fn poll(&mut self, timeout: Duration, batch: &mut Batch) -> anyhow::Result<bool> {
        let Some(pipeline) = &self.pipeline else {
            return Ok(false);
        };
        let mut msg = match pipeline.rx.recv_timeout(timeout) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => return Ok(true),
            Err(RecvTimeoutError::Disconnected) => return Ok(self.finish()),
        };
        loop {
            match msg {
                PipelineMsg::Page(p) => self.merger.push(p.cpu, p.bytes),
                PipelineMsg::Round { complete_to } => {
                    self.flush(batch, complete_to.unwrap_or(u64::MAX));
                    return Ok(true);
                }
                PipelineMsg::Failed(e) => {
                    return Err(anyhow::Error::new(e).context("reading the ring buffer"));
                }
            }
            let Some(pipeline) = &self.pipeline else {
                return Ok(false);
            };
            msg = match pipeline.rx.try_recv() {
                Ok(m) => m,
                // The round marker follows its pages; wait for it briefly.
                Err(TryRecvError::Empty) => match pipeline.rx.recv_timeout(timeout) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => return Ok(true),
                    Err(RecvTimeoutError::Disconnected) => {
                        self.flush(batch, u64::MAX);
                        return Ok(self.finish());
                    }
                },
                Err(TryRecvError::Disconnected) => {
                    self.flush(batch, u64::MAX);
                    return Ok(self.finish());
                }
            };
        }
    }

    fn finish(&mut self) -> bool {
        if let Some(p) = self.pipeline.take() {
            p.join();
        }
        self.closed = true;
        false
    }

    /// Asks the reader thread to take the partial pages left and finish
    /// (call after recording stopped); keep calling [`Source::poll`] until
    /// it returns false.
    pub fn stop(&self) {
        if let Some(p) = &self.pipeline {
            p.stop();
        }
    }

    /// Stops the reader and throws away what it still delivers.
    pub fn discard(&mut self) {
        self.stop();
        if let Some(p) = self.pipeline.take() {
            while p.rx.recv().is_ok() {}
            p.join();
        }
        self.closed = true;
    }

    /// Prints the records up to time stamp `limit` in order; later ones
    /// stay in the merger for the next round.
    fn flush(&mut self, batch: &mut Batch, limit: u64) {
        let Source {
            merger,
            printer,
            summary,
            endian,
            events,
            seen,
            stacks,
            saved_cmdlines,
            own,
            ..
        } = self;
        let endian = *endian;
        merger.flush_until(limit, &mut |m| match m {
            Merged::Record { cpu, ts, data } => {
                let Some(c) = Common::read(data, endian) else {
                    return;
                };
                // Live, the running task's name is the truth: the kernel
                // updates `saved_cmdlines` only when the task is switched
                // out, so right after the event it may still hold the name
                // of an earlier task with the same pid. A task already gone
                // has been switched out: then `saved_cmdlines`, read now,
                // has its name (or nothing, and `<...>` prints as in the
                // kernel).
                if c.pid > 0 && seen.insert(c.pid) {
                    let comms = match printer {
                        Printer::Text(p) => Some(&mut p.comms),
                        Printer::Json(p) => Some(&mut p.comms),
                        Printer::Raw => None,
                    };
                    if let Some(comms) = comms {
                        let name = std::fs::read_to_string(format!("/proc/{}/comm", c.pid))
                            .ok()
                            .map(|n| n.trim_end_matches('\n').to_string())
                            .or_else(|| saved_name(saved_cmdlines, c.pid));
                        if let Some(name) = name {
                            comms.insert(c.pid, &name);
                        }
                    }
                }
                let is_stack = stacks.contains(c.type_id);
                if is_stack && own.contains(&c.pid) {
                    return;
                }
                match printer {
                    Printer::Text(p) => p.write_record(&mut batch.bytes, cpu, ts, data),
                    Printer::Json(p) => p.write_record(&mut batch.bytes, cpu, ts, data),
                    Printer::Raw => {
                        ktrace_printer::write_raw(&mut batch.bytes, events, endian, cpu, ts, data)
                    }
                }
                let kind = if is_stack {
                    Kind::Stack { pid: c.pid }
                } else {
                    Kind::Event {
                        pid: c.pid,
                        id: c.type_id,
                    }
                };
                batch.lines.push((batch.bytes.len(), kind));
            }
            Merged::Lost { cpu, missed } => {
                summary.add_missed(cpu, missed);
                match printer {
                    Printer::Text(p) => p.write_lost(&mut batch.bytes, cpu, missed),
                    Printer::Json(p) => p.write_lost(&mut batch.bytes, cpu, missed),
                    Printer::Raw => {
                        if let Some(n) = match missed {
                            ktrace_ring::Missed::None => None,
                            ktrace_ring::Missed::Unknown => Some("?".to_string()),
                            ktrace_ring::Missed::Count(n) => Some(n.to_string()),
                        } {
                            batch
                                .bytes
                                .extend_from_slice(format!("lost {cpu} {n}\n").as_bytes());
                        }
                    }
                }
                if batch.lines.last().map_or(0, |l| l.0) != batch.bytes.len() {
                    batch.lines.push((batch.bytes.len(), Kind::Lost));
                }
            }
            Merged::Bad { cpu, error } => {
                eprintln!("ktrace: CPU {cpu}: undecodable sub-buffer: {error}");
            }
        });
    }

    /// The end-of-run account: page-level missed counts seen so far plus
    /// the instance's `per_cpu/cpuN/stats`; `events` is the number shown.
    pub fn lost_summary(&mut self, events: u64) -> &LostSummary {
        for &cpu in &self.cpus {
            match CpuStats::read(&self.instance, cpu) {
                Ok(s) => self.summary.add_stats(cpu, &s),
                Err(e) => eprintln!("ktrace: {e}"),
            }
        }
        self.summary.events = events;
        &self.summary
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if !self.closed {
            self.discard();
        }
    }
}

/// The name `saved_cmdlines` (`<pid> <comm>` lines) holds for `pid` now.
fn saved_name(path: &Path, pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (p, comm) = l.split_once(' ')?;
        (p.trim().parse::<i32>().ok()? == pid).then(|| comm.to_string())
    })
}

/// The selected clock of a `trace_clock` file (`local [counter] …`).
fn selected_clock(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
}

/// The instance's sub-buffer size when it can be read
/// (`buffer_subbuf_size_kb`, 6.8 and later); older kernels use one page.
fn subbuf_size(instance: &Path) -> Option<usize> {
    let t = std::fs::read_to_string(instance.join("buffer_subbuf_size_kb")).ok()?;
    t.trim().parse::<usize>().ok().map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_clock_is_the_bracketed_one() {
        assert_eq!(
            selected_clock("local global [counter] uptime\n"),
            Some("counter")
        );
        assert_eq!(selected_clock("[local] global\n"), Some("local"));
        assert_eq!(selected_clock("local global\n"), None);
    }

    #[test]
    fn batch_lines_split_at_their_ends() {
        let mut b = Batch::default();
        for (text, kind) in [
            ("a-1 [000] x\n", Kind::Event { pid: 1, id: 7 }),
            ("CPU:0 [LOST 3 EVENTS]\n", Kind::Lost),
            ("b-2 [001] y\n", Kind::Event { pid: 2, id: 8 }),
        ] {
            b.bytes.extend_from_slice(text.as_bytes());
            b.lines.push((b.bytes.len(), kind));
        }
        let got: Vec<(String, Kind)> = b
            .iter()
            .map(|(l, k)| (String::from_utf8_lossy(l).into_owned(), k))
            .collect();
        assert_eq!(got[1], ("CPU:0 [LOST 3 EVENTS]\n".into(), Kind::Lost));
        assert_eq!(got[2].1, Kind::Event { pid: 2, id: 8 });
        b.clear();
        assert_eq!(b.iter().count(), 0);
    }
}
