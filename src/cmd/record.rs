//! `ktrace record`: trace like `ktrace trace`, but write the raw per-CPU
//! sub-buffers to a trace-cmd `trace.dat` file (version 7, zstd) instead of
//! printing, for `ktrace report`, `trace-cmd report` or KernelShark later.
//!
//! The live run (probes, instance, filter, trigger, pid lists, the command,
//! the stop conditions and the cleanup on every exit) is crate::live's; this
//! module is the record sink: it takes the pages as the kernel wrote them
//! (no record is decoded on the recording path; only each record's type id
//! is read, to count events) and appends them through
//! ktrace_tracedat::Writer, whose layout leaves a readable file if ktrace is
//! killed with SIGKILL. The file carries what a reader needs: header_page
//! and header_event, the probes' formats (and ftrace's kernel_stack /
//! user_stack, and the events an `enable_event` trigger switches on, such
//! as sched_switch), kallsyms, printk_formats, saved_cmdlines (at
//! the start, replaced at the end), the trace clock, the CPU count, uname,
//! and the probe definitions (ktrace's own option). At the end each CPU's
//! `per_cpu/cpuN/stats` (lost and overrun counts) goes into the file.
//! `-n` is refused: without decoding, the recorder cannot stop after
//! exactly N events.
//!
//! By default the file is trace.dat version 7 with zstd sections and CPU
//! data (trace-cmd 3.x's default format): the recording goes to
//! FILE.partial as version 6 (so a kill leaves a readable file, and
//! `ktrace report FILE.partial` reads it while recording), and at the end
//! Writer::finish_v7 compresses it into FILE.partial.v7, which is renamed
//! to FILE before FILE.partial is removed. `--uncompressed` finishes
//! FILE.partial as version 6 in place and renames it (for trace-cmd 2.x);
//! `--compress`, the flag that asked for version 7 before it was the
//! default, is still accepted.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ktrace_stream::{EndOfRun, EventTable, Flow, Sink};
use ktrace_symbols::KernelView;
use ktrace_tracedat::{Compress7, Header, System, TraceOption, Writer, WriterOptions, option};

use crate::live::{self, RunArgs};
use crate::outfile::{self, OutFile};
use crate::session::{self, Signals};

/// Arguments of `ktrace record`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::resolve::TRACE_HELP)]
#[command(mut_arg("count", |a| a.hide(true)))]
pub struct Args {
    /// Probe definitions, as for `ktrace trace`.
    #[arg(required = true, value_name = "DEF")]
    pub defs: Vec<String>,
    /// Record a stack with each hit (as for `ktrace trace --stack`).
    #[arg(long)]
    pub stack: bool,
    /// The options of the run (filter, trigger, -d, -p, buffer, clock, the
    /// command); -n is refused (pages are not decoded while recording).
    /// The kernel's own events traced beside the probes (-e).
    #[command(flatten)]
    pub events: live::EventArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The trace.dat file to write: recorded as FILE.partial beside it
    /// (which `ktrace report` reads while recording, or after a kill), and
    /// renamed to FILE at the end, replacing it. Refused before anything
    /// starts when FILE is not a regular file (a FIFO, /dev/null,
    /// /dev/stdout on a pipe), is one of the run's inputs, or another ktrace
    /// writes it.
    #[arg(short = 'o', long, value_name = "FILE", required = true)]
    pub output: PathBuf,
    /// Write uncompressed trace.dat version 6 instead of the default
    /// version 7 with zstd sections.
    ///
    /// Version 6 is read by every trace-cmd, 2.x included, and
    /// KernelShark; version 7 (zstd-compressed sections and CPU data in
    /// chunks of ten pages, as trace-cmd 3.x writes by default) by
    /// trace-cmd 3.x, KernelShark 2.x and `ktrace report`. Either way the pages are recorded
    /// uncompressed into FILE.partial (version 6, readable while recording
    /// and after a kill); the default compresses it into FILE at the end,
    /// through FILE.partial.v7.
    #[arg(long, conflicts_with = "compress")]
    pub uncompressed: bool,
    /// The default (trace.dat version 7, zstd), accepted for scripts
    /// written when it was not.
    #[arg(long, hide = true)]
    pub compress: bool,
}

/// Runs `ktrace record`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.run.count.is_some() {
        anyhow::bail!(
            "ktrace record does not decode events while recording, so it cannot stop after \
             -n events: use -d, a command, or Ctrl-C (or `ktrace trace -n`)"
        );
    }
    let signals = Signals::catch()?;
    // The output is planned (and refused) before anything is created: the
    // pages go to NAME.partial, renamed to NAME at the end.
    let mut out = OutFile::replace(&args.output, "the recording", true)?;
    let root = session::open_tracefs()?;
    let view = KernelView::running(Some(&root));
    let setup = args.run.session(&root).and_then(|sess| {
        let probes = crate::resolve::build(&sess, &args.defs, args.run.pid, &view)?;
        out.check_inputs(&outfile::run_inputs(
            &probes,
            &args.run.command,
            args.run.pid,
        ))?;
        let live_ctx = live::Live {
            args: &args.run,
            root: &root,
            view: &view,
            signals: &signals,
        };
        live::setup_built(
            &live_ctx,
            sess,
            probes,
            live::Beside {
                stacks: args.stack,
                events: &args.events.events,
            },
        )
    });
    let mut run = match setup {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    let header = header(&root, &run, args.run.trigger.as_deref())?;
    let cpus = run.inst.cpus()?.iter().max().map_or(1, |m| *m as usize + 1);
    let page_size = header.page_size as usize;
    // Tracing has started: the partial file is emptied and written.
    out.start()?;
    let name = out.name();
    // kallsyms: the kernel's addresses in kprobe headers and stacks,
    // megabytes copied from /proc/kallsyms into the file, never held in
    // memory (an unreadable kallsyms is written empty, as before)
    let mut kallsyms: Box<dyn std::io::Read> = match File::open(view.kallsyms_path()) {
        Ok(f) => Box::new(f),
        Err(_) => Box::new(std::io::empty()),
    };
    let created = Writer::create_streaming(
        out.file()?,
        header,
        &mut kallsyms,
        cpus,
        WriterOptions::default(),
    );
    drop(kallsyms);
    let writer = match created {
        Ok(w) => w,
        Err(e) => {
            out.abandon();
            anyhow::bail!("cannot write {name}: {}", tracedat_error(&e));
        }
    };
    let v7 = if args.uncompressed {
        None
    } else {
        out.finished_path()
    };
    let mut sink = RecordSink {
        writer: Some(writer),
        v7: v7.clone(),
        sizes: None,
        page_size,
        layout: run.stream.layout(),
        stack_ids: Vec::new(),
        names: BTreeMap::new(),
        per_id: Vec::new(),
        events: 0,
        pages: 0,
        inst: run.inst.clone(),
        root: root.clone(),
        cpus,
        pad: Vec::new(),
        tasks: ktrace_stream::TaskNames::new(Some(&root)),
    };
    let deadline = args.run.deadline();
    let (mut stop, mut error) =
        live::stream_loop(&args.run, &signals, deadline, &mut run, &mut sink);
    let mut end = live::finish(&mut run, &mut sink, &mut stop, &mut error);
    if let Ok(e) = end.as_mut() {
        e.summary.events = sink.events;
        e.shown = sink.shown();
    }
    let finished = sink.writer.is_none() && end.is_ok();
    let mut output_error = None;
    if finished {
        let committed = match &v7 {
            Some(done) => out.commit_from(done),
            None => out.commit(),
        };
        let how = match sink.sizes {
            Some((raw, file)) => {
                format!(" (trace.dat version 7, zstd: {file} bytes for {raw} bytes of pages)")
            }
            None => " (trace.dat version 6, uncompressed)".to_string(),
        };
        match committed {
            Ok(()) => crate::eline!(
                "ktrace: wrote {} event(s) in {} page(s) to {}{how}",
                sink.events,
                sink.pages,
                args.output.display()
            ),
            Err(e) => output_error = Some(format!("{e:#}")),
        }
    } else {
        drop(out);
    }
    let result = live::conclude(run, end, stop, error, output_error, &name);
    if !finished && std::path::Path::new(&name).exists() {
        crate::say!(
            "the recording is unfinished: what was written is in {name} (`ktrace report {name}` \
             reads it; {} was not touched)",
            args.output.display()
        );
    }
    result
}

/// A trace.dat error in words (an I/O error without Rust's "(os error N)"
/// and without repeating its cause).
fn tracedat_error(e: &ktrace_tracedat::Error) -> String {
    match e {
        ktrace_tracedat::Error::Io { context, reason } => {
            format!("{context}: {}", crate::output::describe(reason))
        }
        e => e.to_string(),
    }
}

/// A trace.dat error as an I/O error of the sink (kind kept: a full disk
/// stays a full disk).
fn sink_error(e: ktrace_tracedat::Error) -> io::Error {
    let kind = match &e {
        ktrace_tracedat::Error::Io { reason, .. } => reason.kind(),
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, tracedat_error(&e))
}

/// The events a trigger switches on (`enable_event:SYS:EVENT[:N] [if
/// ...]`, the kernel's event_enable_trigger syntax): the records they
/// leave in the instance need their formats in the file.
fn trigger_events(trigger: &str) -> Vec<(String, String)> {
    let head = trigger.split(" if ").next().unwrap_or("").trim();
    let mut parts = head.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("enable_event"), Some(sys), Some(ev)) if !sys.is_empty() && !ev.is_empty() => {
            vec![(sys.to_string(), ev.to_string())]
        }
        _ => Vec::new(),
    }
}

/// The file's metadata, read through ktrace-tracefs before the first page.
fn header(root: &Path, run: &live::Run, trigger: Option<&str>) -> anyhow::Result<Header> {
    use ktrace_tracefs::buffers;
    let layout = run.stream.layout();
    // Each probe's format is read from the session's group and filed
    // under the stable system ktrace shows (`ktrace`, `--group`, or the
    // group the definition wrote): trace-cmd and KernelShark name an event
    // by its system directory, and the session's group changes every run.
    let group = run.sess.name();
    let mut systems: Vec<System> = Vec::new();
    for p in run.sess.probes() {
        let format = buffers::event_format(root, group, p.event())?.into_bytes();
        match systems.iter_mut().find(|s| s.name == p.system) {
            Some(s) => s.formats.push(format),
            None => systems.push(System {
                name: p.system.clone(),
                formats: vec![format],
            }),
        }
    }
    // The kernel's events on in the instance (-e), then those a trigger
    // switches on: their records need their formats in the file.
    let mut kernel_events: Vec<(String, String)> = run
        .inst
        .enabled_events()?
        .into_iter()
        .filter(|(sys, _)| sys != group)
        .collect();
    for e in trigger.map(trigger_events).unwrap_or_default() {
        if !kernel_events.contains(&e) {
            kernel_events.push(e);
        }
    }
    for (sys, ev) in kernel_events {
        let format = buffers::event_format(root, &sys, &ev)
            .with_context(|| format!("the format of the kernel's event {sys}:{ev}"))?
            .into_bytes();
        match systems.iter_mut().find(|s| s.name == sys) {
            Some(s) => s.formats.push(format),
            None => systems.push(System {
                name: sys,
                formats: vec![format],
            }),
        }
    }
    // The stack records' formats, always: `--stack` writes them, and so
    // does a `stacktrace` trigger, whose records were left without a
    // format (`[UNKNOWN EVENT]` in trace-cmd, dropped by `ktrace report`).
    let mut ftrace_formats = Vec::new();
    for name in ["kernel_stack", "user_stack"] {
        if let Ok(f) = buffers::event_format(root, "ftrace", name) {
            ftrace_formats.push(f.into_bytes());
        }
    }
    let u = rustix::system::uname();
    let uname = format!(
        "{} {} {} {} {}",
        u.sysname().to_string_lossy(),
        u.nodename().to_string_lossy(),
        u.release().to_string_lossy(),
        u.version().to_string_lossy(),
        u.machine().to_string_lossy()
    );
    let defs: String = run
        .sess
        .probes()
        .iter()
        .map(|p| format!("{}\n", p.shown_definition()))
        .collect();
    Ok(Header {
        endian: layout.endian,
        long_size: layout.long_size as u8,
        page_size: layout.subbuf_size as u32,
        header_page: buffers::header_page(root)?.into_bytes(),
        header_event: buffers::header_event(root)?.into_bytes(),
        ftrace_formats,
        systems,
        // streamed into the file by Writer::create_streaming
        kallsyms: Vec::new(),
        printk_formats: buffers::printk_formats(root)
            .map(String::into_bytes)
            .unwrap_or_default(),
        cmdlines: buffers::saved_cmdlines(root)
            .map(String::into_bytes)
            .unwrap_or_default(),
        clock: run.inst.trace_clock().unwrap_or_else(|_| "local".into()),
        options: vec![
            TraceOption::text(option::UNAME, &uname),
            TraceOption::text(
                option::VERSION,
                &format!("ktrace {}", env!("CARGO_PKG_VERSION")),
            ),
            TraceOption::text(option::KTRACE_DYNAMIC_EVENTS, &defs),
        ],
    })
}

/// The record sink: pages to the file as they come.
struct RecordSink {
    writer: Option<Writer<File>>,
    /// Where the version 7 file is written at the end (`None`:
    /// `--uncompressed`, FILE.partial finished as version 6).
    v7: Option<PathBuf>,
    /// Version 7, once written: bytes of pages, bytes of the file.
    sizes: Option<(u64, u64)>,
    page_size: usize,
    layout: ktrace_ring::PageLayout,
    /// Type ids of stack records (not counted as events): kernel_stack
    /// and user_stack, searched per record (a HashSet's SipHash was 5%
    /// of the recorder's user CPU).
    stack_ids: Vec<u16>,
    /// (system, name) by type id, for the per-probe counts (a map: type
    /// ids run into the thousands, and a vector indexed by them held
    /// 110 KB of empty slots for one probe).
    names: BTreeMap<u16, (String, String)>,
    /// Events per type id.
    per_id: Vec<u64>,
    events: u64,
    pages: u64,
    inst: ktrace_tracefs::Instance,
    root: PathBuf,
    cpus: usize,
    /// A short (partial) page padded to the page size.
    pad: Vec<u8>,
    /// Each recorded task's name, looked up at its first record as live
    /// `ktrace trace` does (/proc/PID/comm, else saved_cmdlines). The
    /// kernel's saved_cmdlines alone, read at the end, can lack a task
    /// whose name it failed to save (it only tries at the context switch
    /// after an event, under a trylock): on a busy machine every event of
    /// `report_equals_live_trace`'s target once printed as `<...>` where
    /// live `ktrace trace` named it.
    tasks: ktrace_stream::TaskNames,
}

impl RecordSink {
    /// Events written per event: (system, name, count).
    fn shown(&self) -> Vec<(String, String, u64)> {
        self.per_id
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .filter_map(|(id, n)| {
                let (s, e) = self.names.get(&u16::try_from(id).ok()?)?;
                Some((s.clone(), e.clone(), *n))
            })
            .collect()
    }
}

impl Sink for RecordSink {
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        self.stack_ids = table
            .iter()
            .filter(|i| i.is_stack())
            .map(|i| i.id)
            .collect();
        for i in table.iter() {
            self.names
                .insert(i.id, (i.system().to_string(), i.name().to_string()));
        }
        Ok(())
    }

    fn event(&mut self, _: &ktrace_stream::Event<'_>) -> io::Result<Flow> {
        Ok(Flow::Continue)
    }

    fn wants_pages(&self) -> bool {
        true
    }

    fn wants_events(&self) -> bool {
        false
    }

    fn page(&mut self, cpu: usize, bytes: &[u8]) -> io::Result<Flow> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(Flow::Continue);
        };
        let page = if bytes.len() == self.page_size {
            bytes
        } else {
            // a partial page taken at the end: padded (its header says
            // how much of it is data)
            self.pad.clear();
            self.pad
                .extend_from_slice(&bytes[..bytes.len().min(self.page_size)]);
            self.pad.resize(self.page_size, 0);
            &self.pad
        };
        w.append_pages(cpu, page).map_err(sink_error)?;
        self.pages += 1;
        // count the events written: each record's type id, nothing else
        // decoded (a page that could not be written is not counted)
        if let Ok(p) = ktrace_ring::Page::parse(self.layout, bytes) {
            for r in p.records().flatten() {
                // common_pid, after the type id, flags and preempt count
                if let Some(pid) = r.data.get(4..8) {
                    self.tasks.see(self.layout.endian.u32(pid) as i32);
                }
                if r.data.len() >= 2 {
                    let id = self.layout.endian.u16(r.data);
                    if !self.stack_ids.contains(&id) {
                        self.events += 1;
                        let id = usize::from(id);
                        if self.per_id.len() <= id {
                            self.per_id.resize(id + 1, 0);
                        }
                        self.per_id[id] += 1;
                    }
                }
            }
        }
        Ok(Flow::Continue)
    }

    fn finish(&mut self, _end: &EndOfRun) -> io::Result<()> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        // (the names ktrace found stay when saved_cmdlines is unreadable)
        let saved = ktrace_tracefs::buffers::saved_cmdlines(&self.root).unwrap_or_default();
        let cmdlines = Some(with_tasks(saved, self.tasks.comms())).filter(|t| !t.is_empty());
        let stats: Vec<String> = (0..self.cpus)
            .map(|c| {
                let text = self.inst.cpu_stats_text(c as u32).unwrap_or_default();
                format!("CPU: {c}\n{text}")
            })
            .collect();
        let cmdlines = cmdlines.as_deref().map(str::as_bytes);
        let Some(path) = &self.v7 else {
            w.finish(cmdlines, &stats).map_err(sink_error)?;
            return Ok(());
        };
        // the recording stays as it is (readable) until the version 7
        // file is complete; a stale one of an earlier run is replaced
        let _ = std::fs::remove_file(path);
        let written = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("create {}: {}", path.display(), crate::output::describe(&e)),
                )
            })
            .and_then(|f| {
                let raw: u64 = w.sizes().iter().sum();
                let zstd = Compress7::Zstd(ktrace_tracedat::ZSTD_VERSION);
                let (_, f) = w
                    .finish_v7(io::BufWriter::new(f), cmdlines, &stats, zstd)
                    .map_err(sink_error)?;
                let f = f.into_inner().map_err(io::IntoInnerError::into_error)?;
                Ok((raw, f.metadata()?.len()))
            });
        match written {
            Ok(sizes) => {
                self.sizes = Some(sizes);
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(path);
                Err(e)
            }
        }
    }
}

/// saved_cmdlines text with the recorded tasks it no longer names added
/// (a name the kernel still holds is its own).
fn with_tasks(mut saved: String, tasks: &ktrace_stream::Comms) -> String {
    let known = ktrace_stream::Comms::from_saved_cmdlines(&saved);
    for (pid, comm) in tasks.iter() {
        if !known.knows(pid) {
            if !saved.is_empty() && !saved.ends_with('\n') {
                saved.push('\n');
            }
            saved.push_str(&format!("{pid} {comm}\n"));
        }
    }
    saved
}

#[cfg(test)]
mod tests {
    use super::trigger_events;

    #[test]
    fn saved_cmdlines_keep_their_names_and_gain_the_evicted() {
        let mut tasks = ktrace_stream::Comms::new();
        tasks.insert(7, "target");
        tasks.insert(8, "renamed");
        let text = super::with_tasks("8 kept\n1 init".to_string(), &tasks);
        let c = ktrace_stream::Comms::from_saved_cmdlines(&text);
        assert_eq!((c.get(7), c.get(8), c.get(1)), ("target", "kept", "init"));
        assert_eq!(
            super::with_tasks(String::new(), &ktrace_stream::Comms::new()),
            ""
        );
    }

    #[test]
    fn events_a_trigger_enables() {
        let e = |s: &str, v: &str| vec![(s.to_string(), v.to_string())];
        assert_eq!(
            trigger_events("enable_event:sched:sched_switch"),
            e("sched", "sched_switch")
        );
        assert_eq!(
            trigger_events("enable_event:irq:softirq_raise:3"),
            e("irq", "softirq_raise")
        );
        assert_eq!(
            trigger_events("enable_event:sched:sched_switch if common_pid != 7"),
            e("sched", "sched_switch")
        );
        for other in [
            "stacktrace",
            "traceoff:1",
            "disable_event:sched:sched_switch",
            "enable_event:",
            "",
        ] {
            assert!(trigger_events(other).is_empty(), "{other}");
        }
    }
}
