//! `ktrace trace`: create probes in a private session, stream their events,
//! clean up, and print a summary.
//!
//! Definitions are the kernel's own (kprobetrace.rst, uprobetracer.rst),
//! taken verbatim, plus the conveniences `crate::resolve` turns into kernel
//! definitions (bare symbols, `%return`, `PATH:SYMBOL`, `LIB:SYMBOL`,
//! wildcards, `argN`); every resulting line is checked by ktrace-probe
//! against the live kernel before anything is written. Only the group is
//! replaced by the session's (the event name is kept, or made up like the
//! kernel's when absent). Events stream to stdout until the duration, the
//! count, the traced command's exit, or SIGINT/SIGTERM/SIGHUP; the summary
//! goes to stderr.
//!
//! Test-only: when the environment variable `KTRACE_TEST_PANIC` is set, the
//! run loop panics once the probes are enabled, so tests can prove that a
//! panic still tears the session down. It has no other use.

use std::io::{self, Write};
use std::path::Path;
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;
use ktrace_printer::{
    FlagStyle, JsonSink, NoSymbols, RawSink, Symbol, Symbolizer, TextSink, clock_in_ns,
};
use ktrace_stream::{EndOfRun, Options, ProbeSpec, Sink, Status, Stream};
use ktrace_symbols::kallsyms::Kallsyms;

use crate::session::{self, Session, Signals, Tally};

/// Percent of the ring buffer filled before a poll wakes the reader (set on
/// the instance before the stream opens, so polls wake for batches of
/// pages, not every event).
const BUFFER_PERCENT: u32 = 25;

/// Arguments of `ktrace trace`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::resolve::TRACE_HELP)]
pub struct Args {
    /// Probe definitions: the kernel's own syntax verbatim ('p:myev
    /// /bin/bash:0x9a4f0 x=%di'), or the conveniences below: a bare symbol
    /// (entry probe), SYM%return, PATH:SYMBOL[+OFF], LIB:SYMBOL, kernel
    /// wildcards, argN. Each is checked before anything is written.
    #[arg(required = true, value_name = "DEF")]
    pub defs: Vec<String>,
    /// Record a stack with each hit: kernel stacks for kprobes (the
    /// `stacktrace` trigger), user stacks for uprobes where the kernel has
    /// options/userstacktrace.
    #[arg(long)]
    pub stack: bool,
    /// Event filter applied to every probe (the kernel's filter language).
    #[arg(short = 'f', long)]
    pub filter: Option<String>,
    /// Trigger added to every probe (e.g. 'traceoff:1', 'stacktrace').
    #[arg(long)]
    pub trigger: Option<String>,
    /// Stop after this many seconds.
    #[arg(short = 'd', long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Stop after this many events.
    #[arg(short = 'n', long, value_name = "COUNT")]
    pub count: Option<u64>,
    /// Only events of this process (its threads and the children it forks).
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// Per-CPU buffer size of the session's instance, in KiB.
    #[arg(long, value_name = "KB")]
    pub buffer_size: Option<u64>,
    /// Trace clock of the session's instance (see tracefs trace_clock).
    #[arg(long)]
    pub clock: Option<String>,
    /// Print events as JSON lines (typed values) instead of the kernel's
    /// text.
    #[arg(long, conflicts_with = "raw")]
    pub json: bool,
    /// Print events raw (`ts cpu pid system:event field=value...`), the
    /// fastest output.
    #[arg(long)]
    pub raw: bool,
    /// Write events to FILE instead of stdout (the summary stays on stderr).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Command to run and trace (with the processes it forks); tracing
    /// stops when it exits.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Why the run loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Duration,
    Count,
    CommandExited,
    Signal(i32),
    /// The output's reader went away (EPIPE): a quiet stop.
    OutputClosed,
    /// Writing the output failed (a full disk, an I/O error): exit 1.
    OutputFailed,
    /// Reading the ring buffer failed: exit 1.
    ReadFailed,
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Raw,
}

/// What setup made: the session with its probes enabled, the stream
/// reading its instance, and the traced command.
/// (Fields drop in order: the stream, closing the per-CPU buffers, before
/// the session, whose teardown removes the instance.)
struct Run {
    stream: Stream,
    sess: Session,
    inst: ktrace_tracefs::Instance,
    child: Option<Child>,
    kernel_probes: bool,
}

/// Runs `ktrace trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Signals are caught before anything is created, so there is no window in
    // which Ctrl-C kills us with probes installed.
    let signals = Signals::catch()?;
    let mut run = setup(&args)?;
    let symbols = KallsymsSymbols::new();
    let symbols: &dyn Symbolizer = if run.kernel_probes {
        &symbols
    } else {
        &NoSymbols
    };
    let out = open_output(args.output.as_deref())?;
    let format = if args.json {
        Format::Json
    } else if args.raw {
        Format::Raw
    } else {
        Format::Text
    };
    let mut sink: Box<dyn Sink + '_> = match format {
        Format::Text => {
            // counting clocks print raw, as the kernel's `trace` does
            let in_ns = run.inst.trace_clock().map_or(true, |c| clock_in_ns(&c));
            let release = rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned();
            Box::new(TextSink::new(
                out,
                FlagStyle::for_release(&release),
                symbols,
                in_ns,
            ))
        }
        Format::Json => Box::new(JsonSink::new(out, symbols)),
        Format::Raw => Box::new(RawSink::new(out)),
    };
    let (stop, error) = stream_loop(&args, &signals, &mut run, sink.as_mut());
    let end = finish(&mut run, sink.as_mut(), stop);
    drop(sink);
    let summary_error = end.as_ref().err().map(|e| format!("{e:#}"));
    teardown_and_summary(run, end.unwrap_or_default(), stop)?;
    if let Some(e) = error {
        return Err(e);
    }
    if let Some(e) = summary_error {
        anyhow::bail!("{e}");
    }
    Ok(match stop {
        Stop::Signal(sig) if sig != signal_hook::consts::SIGINT => ExitCode::from(128 + sig as u8),
        _ => ExitCode::SUCCESS,
    })
}

/// Creates the probes, the instance and its settings, opens the stream,
/// enables the probes and starts the command.
fn setup(args: &Args) -> anyhow::Result<Run> {
    let root = session::open_tracefs()?;
    let mut sess = Session::new(&root)?;
    let probes = crate::resolve::build(&sess, &args.defs, args.pid, &root)?;
    crate::resolve::create(&mut sess, probes)?;
    let inst = sess.create_instance()?.clone();
    if let Some(kb) = args.buffer_size {
        inst.set_buffer_size_kb(kb)?;
    }
    if let Some(clock) = &args.clock {
        inst.set_trace_clock(clock)?;
    }
    if let Some(f) = &args.filter {
        sess.set_filter(f)?;
    }
    if let Some(t) = &args.trigger {
        sess.add_trigger(t)?;
    }
    if args.stack {
        crate::resolve::enable_stacks(&sess, &inst, args.filter.as_deref())?;
    }
    inst.set_buffer_percent(BUFFER_PERCENT)?;
    let specs = probe_specs(&sess);
    let kernel_probes = specs.iter().any(|p| {
        matches!(
            p.kind,
            ktrace_event::ProbeKind::Kprobe | ktrace_event::ProbeKind::Kretprobe
        )
    });
    let own_pid = std::process::id();
    let opts = Options {
        // tracing a command: ktrace's own records (before the fork) go
        skip_pids: if args.command.is_empty() {
            Vec::new()
        } else {
            vec![own_pid as i32]
        },
        limit: args.count,
        ..Options::default()
    };
    // The reader thread starts before the pid lists are written, so
    // `event-fork` does not add it to the traced pids.
    let stream = Stream::open(&root, &inst, &specs, opts)?;
    if let Some(pid) = args.pid {
        let tids = threads_of(pid).with_context(|| format!("no process {pid}"))?;
        inst.set_option("event-fork", true)?;
        inst.set_event_pids(&tids)?;
    } else if !args.command.is_empty() {
        // Children of listed pids are added as they fork, so the command is
        // traced from its first instruction; our own records are dropped.
        inst.set_option("event-fork", true)?;
        inst.set_event_pids(&[own_pid])?;
    } else {
        // ktrace's own reads of the ring buffer (main and reader thread)
        // would otherwise feed probes on read/write paths, which feed the
        // buffer again.
        inst.set_event_notrace_pids(&threads_of(own_pid)?)?;
    }
    sess.enable()?;
    eprintln!(
        "ktrace: tracing {} probe(s) in session {}; Ctrl-C to stop",
        sess.probes().len(),
        sess.name()
    );
    let child = match args.command.split_first() {
        Some((cmd, rest)) => Some(
            std::process::Command::new(cmd)
                .args(rest)
                .spawn()
                .with_context(|| format!("cannot run {cmd}"))?,
        ),
        None => None,
    };
    Ok(Run {
        stream,
        sess,
        inst,
        child,
        kernel_probes,
    })
}

/// The session's probes as the event table needs them (group = session,
/// event name, how the kernel prints its header).
fn probe_specs(sess: &Session) -> Vec<ProbeSpec> {
    sess.probes()
        .iter()
        .map(|p| ProbeSpec {
            group: sess.name().to_string(),
            event: p.event.clone(),
            kind: ktrace_event::ProbeKind::from_dynamic_event(&p.definition),
            target: ktrace_event::eprobe_target(&p.definition),
        })
        .collect()
}

/// Where events go: FILE (`-o`) or stdout.
fn open_output(path: Option<&Path>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(io::stdout().lock()),
    })
}

/// Hands records to `sink` until the duration, the count, the command's
/// exit, a signal or an output error; then stops recording and drains what
/// is left. Returns why, and the error to exit with (if any).
fn stream_loop(
    args: &Args,
    signals: &Signals,
    run: &mut Run,
    sink: &mut dyn Sink,
) -> (Stop, Option<anyhow::Error>) {
    if let Err(e) = run.stream.begin(sink) {
        return failed(e);
    }
    let deadline = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let test_panic = std::env::var_os("KTRACE_TEST_PANIC").is_some();
    let stop = loop {
        if let Some(sig) = signals.caught() {
            break Stop::Signal(sig);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Stop::Duration;
        }
        if test_panic {
            // Test-only (KTRACE_TEST_PANIC): proves cleanup after a panic.
            panic!("KTRACE_TEST_PANIC set: panicking mid-run");
        }
        let exited = match child_exited(&mut run.child) {
            Ok(e) => e,
            Err(e) => return (Stop::ReadFailed, Some(e)),
        };
        let wait = deadline.map_or(Duration::from_millis(100), |d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        });
        let polled = run
            .stream
            .poll(if exited { Duration::ZERO } else { wait }, sink);
        warn(&mut run.stream);
        match polled {
            Ok(Status::Running) => {}
            Ok(Status::Stopped) => break Stop::Count,
            Ok(Status::Finished) => {
                return (
                    Stop::ReadFailed,
                    Some(anyhow::anyhow!(
                        "the ring-buffer reader stopped unexpectedly"
                    )),
                );
            }
            Err(e) => return failed(e),
        }
        if exited {
            break Stop::CommandExited;
        }
    };
    run.sess.stop();
    if stop != Stop::Count {
        // Recording has stopped: take the partial pages left.
        run.stream.stop();
        loop {
            let polled = run.stream.poll(Duration::from_millis(100), sink);
            warn(&mut run.stream);
            match polled {
                Ok(Status::Running) => {}
                Ok(Status::Finished | Status::Stopped) => break,
                Err(e) => return failed(e),
            }
        }
    }
    (stop, None)
}

/// The stop and exit error for a stream error: a closed pipe is a quiet
/// stop; any other output error or a reader failure is an error.
fn failed(e: ktrace_stream::Error) -> (Stop, Option<anyhow::Error>) {
    match &e {
        ktrace_stream::Error::Output(io) if io.kind() == io::ErrorKind::BrokenPipe => {
            (Stop::OutputClosed, None)
        }
        ktrace_stream::Error::Output(_) => (Stop::OutputFailed, Some(e.into())),
        _ => (Stop::ReadFailed, Some(e.into())),
    }
}

fn warn(stream: &mut Stream) {
    for w in stream.take_warnings() {
        eprintln!("ktrace: {w}");
    }
}

/// Stops reading and takes the end-of-run account (per-CPU stats).
fn finish(run: &mut Run, sink: &mut dyn Sink, stop: Stop) -> anyhow::Result<EndOfRun> {
    run.sess.stop();
    let end = match stop {
        // the output is gone: account without writing to it
        Stop::OutputClosed | Stop::OutputFailed => run.stream.finish(&mut Discard),
        _ => run.stream.finish(sink),
    };
    warn(&mut run.stream);
    Ok(end?)
}

/// A sink that keeps nothing (the end of a run whose output failed).
struct Discard;

impl Sink for Discard {
    fn event(&mut self, _: &ktrace_stream::Event<'_>) -> io::Result<ktrace_stream::Flow> {
        Ok(ktrace_stream::Flow::Continue)
    }
}

/// Prints the summary, removes the session and reports the cleanup.
fn teardown_and_summary(mut run: Run, end: EndOfRun, stop: Stop) -> anyhow::Result<()> {
    let profile = run.sess.profile();
    if let Some(c) = run.child.as_mut() {
        // Reap it if it is done; a command still running (we were signalled
        // alone) is the user's and is left to run.
        let _ = c.try_wait();
    }
    drop(run.stream);
    let mut tally = Tally::default();
    for (_, name, n) in &end.shown {
        // one count registers the name, the rest are added at once
        tally.count(name);
        *tally.per_event.entry(name.clone()).or_default() += n - 1;
    }
    tally.events = end.summary.events;
    // The summary first: teardown can take a while with many uprobes.
    summary(&tally, &end.summary, profile.ok(), stop);
    let uprobes = run
        .sess
        .probes()
        .iter()
        .filter(|p| p.kind == ktrace_tracefs::ProbeKind::Uprobe)
        .count();
    if uprobes >= 20 {
        // Measured on 6.18: each enabled uprobe costs ~40-50 ms to switch off
        // (the kernel waits for a grace period per event), instance removal
        // included; the group delete afterwards is ~30 ms for 1000.
        eprintln!("ktrace: removing {uprobes} uprobes; the kernel takes ~50 ms for each");
    }
    let cleanup_started = Instant::now();
    let teardown = run.sess.destroy();
    let cleanup_time = cleanup_started.elapsed();
    let teardown = teardown.context("cleanup failed")?;
    eprintln!(
        "ktrace: cleanup removed {} probe(s){} in {} ms",
        teardown.events_removed,
        if teardown.instance_removed {
            " and the instance"
        } else {
            ""
        },
        cleanup_time.as_millis()
    );
    Ok(())
}

/// Kernel symbols from /proc/kallsyms for the `(func+off/size)` columns,
/// parsed at the first lookup: parsing takes seconds on a slow board and
/// must not delay enabling the probes (nor compete with it for the CPU).
struct KallsymsSymbols {
    table: std::sync::OnceLock<Option<Kallsyms>>,
}

impl KallsymsSymbols {
    fn new() -> KallsymsSymbols {
        KallsymsSymbols {
            table: std::sync::OnceLock::new(),
        }
    }

    fn table(&self) -> Option<&Kallsyms> {
        self.table
            .get_or_init(
                || match ktrace_symbols::kallsyms::open(Path::new("/proc/kallsyms")) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        eprintln!(
                            "ktrace: kernel symbols unavailable ({e}); addresses print as hex"
                        );
                        None
                    }
                },
            )
            .as_ref()
    }
}

impl Symbolizer for KallsymsSymbols {
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let l = self.table()?.lookup(addr)?;
        // Past the last symbol of the core kernel (e.g. a kprobe's ftrace
        // trampoline page) the kernel finds nothing and prints the address.
        // Only code symbols cover code addresses (a linker-script data
        // symbol such as __init_scratch_end must not claim them).
        if (l.size.is_none() && l.offset > 0) || !l.symbol.is_text() {
            return None;
        }
        Some(Symbol {
            name: &l.symbol.name,
            offset: l.offset,
            size: l.size.unwrap_or(0),
            module: l.symbol.module.as_deref(),
        })
    }
}

fn child_exited(child: &mut Option<Child>) -> anyhow::Result<bool> {
    match child {
        Some(c) => Ok(c.try_wait()?.is_some()),
        None => Ok(false),
    }
}

fn threads_of(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

fn summary(
    tally: &Tally,
    lost: &ktrace_stream::LostSummary,
    profile: Option<Vec<ktrace_tracefs::profile::ProbeProfile>>,
    stop: Stop,
) {
    let why = match stop {
        Stop::Duration => "duration reached".to_string(),
        Stop::Count => "count reached".to_string(),
        Stop::CommandExited => "command exited".to_string(),
        Stop::Signal(s) => format!("signal {s}"),
        Stop::OutputClosed => "output closed".to_string(),
        Stop::OutputFailed => "output failed".to_string(),
        Stop::ReadFailed => "reading failed".to_string(),
    };
    // "N events, M lost on CPU k, ..." from page headers and per-CPU stats.
    let line = lost.line();
    let per_cpu = line.split_once(", ").map_or("", |(_, d)| d);
    if lost.lost() == 0 && per_cpu == "0 lost" {
        eprintln!("ktrace: {} event(s), 0 lost ({why})", tally.events);
    } else {
        eprintln!(
            "ktrace: {} event(s), {} lost ({why}): {per_cpu}",
            tally.events,
            lost.lost()
        );
    }
    match profile {
        Some(p) => {
            for pr in &p {
                let seen = tally.per_event.get(&pr.event).copied().unwrap_or(0);
                let misses = pr.misses.map_or_else(|| "-".to_string(), |m| m.to_string());
                eprintln!(
                    "  {:<32} hits {:>10}  misses {:>6}  shown {:>10}",
                    pr.event, pr.hits, misses, seen
                );
                if let Some(w) = pr.warning() {
                    eprintln!("ktrace: warning: {w}");
                }
            }
        }
        None => eprintln!("ktrace: probe profile unavailable"),
    }
}
