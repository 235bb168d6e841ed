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
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::session::{self, Session, Signals, Tally};
use crate::source::{Batch, Format, Kind, Source};

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
    OutputClosed,
}

/// Runs `ktrace trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Signals are caught before anything is created, so there is no window in
    // which Ctrl-C kills us with probes installed.
    let signals = Signals::catch()?;
    let root = session::open_tracefs()?;
    let mut sess = Session::new(&root)?;
    let view = ktrace_symbols::KernelView::running(Some(&root));
    let probes = crate::resolve::build(&sess, &args.defs, args.pid, &view)?;
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
    let format = if args.json {
        Format::Json
    } else if args.raw {
        Format::Raw
    } else {
        Format::Text
    };
    inst.set_buffer_percent(crate::source::BUFFER_PERCENT)?;
    // The reader thread starts before the pid lists are written, so
    // `event-fork` does not add it to the traced pids.
    let mut source = Source::open(&root, inst.dir(), sess.name(), sess.probes(), format)?;
    let own_pid = std::process::id();
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
    let mut child = match args.command.split_first() {
        Some((cmd, rest)) => Some(
            std::process::Command::new(cmd)
                .args(rest)
                .spawn()
                .with_context(|| format!("cannot run {cmd}"))?,
        ),
        None => None,
    };
    let skip_pid = child.as_ref().map(|_| own_pid);

    let started = Instant::now();
    let deadline = args
        .duration
        .map(|d| started + Duration::from_secs_f64(d.max(0.0)));
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(io::BufWriter::with_capacity(
            1 << 16,
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(io::BufWriter::with_capacity(1 << 16, io::stdout().lock())),
    };
    let mut tally = Tally::default();
    let mut batch = Batch::default();
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
        let exited = child_exited(&mut child)?;
        batch.clear();
        let wait = deadline.map_or(Duration::from_millis(100), |d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        });
        if !source.poll(if exited { Duration::ZERO } else { wait }, &mut batch)? {
            anyhow::bail!("the ring-buffer reader stopped unexpectedly");
        }
        if let Some(s) = emit(&mut out, &batch, &source, skip_pid, args.count, &mut tally) {
            break s;
        }
        if exited {
            break Stop::CommandExited;
        }
    };
    sess.stop();
    if matches!(stop, Stop::Count | Stop::OutputClosed) {
        source.discard();
    } else {
        // Recording has stopped: take the partial pages left.
        source.stop();
        loop {
            batch.clear();
            let open = source.poll(Duration::from_millis(100), &mut batch)?;
            if emit(&mut out, &batch, &source, skip_pid, args.count, &mut tally).is_some() {
                source.discard();
                break;
            }
            if !open {
                break;
            }
        }
    }
    let _ = out.flush();
    drop(out);
    let lost = source.lost_summary(tally.events).clone();
    drop(source);
    let profile = sess.profile();
    if let Some(c) = child.as_mut() {
        // Reap it if it is done; a command still running (we were signalled
        // alone) is the user's and is left to run.
        let _ = c.try_wait();
    }
    // The summary first: teardown can take a while with many uprobes.
    summary(&tally, &lost, profile.ok(), stop);
    let uprobes = sess
        .probes()
        .iter()
        .filter(|p| p.kind().is_uprobe())
        .count();
    if uprobes >= 20 {
        // Measured on 6.18: each enabled uprobe costs ~40-50 ms to switch off
        // (the kernel waits for a grace period per event), instance removal
        // included; the group delete afterwards is ~30 ms for 1000.
        eprintln!("ktrace: removing {uprobes} uprobes; the kernel takes ~50 ms for each");
    }
    let cleanup_started = Instant::now();
    let teardown = sess.destroy();
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
    Ok(match stop {
        Stop::Signal(sig) if sig != signal_hook::consts::SIGINT => ExitCode::from(128 + sig as u8),
        _ => ExitCode::SUCCESS,
    })
}

/// Writes records; returns why to stop, if the count is reached or the
/// output is gone.
fn emit(
    out: &mut impl Write,
    batch: &Batch,
    source: &Source,
    skip_pid: Option<u32>,
    limit: Option<u64>,
    tally: &mut Tally,
) -> Option<Stop> {
    for (line, kind) in batch.iter() {
        let event = match kind {
            Kind::Event { pid, id } => {
                if skip_pid.is_some_and(|s| i64::from(s) == i64::from(pid)) {
                    continue;
                }
                if limit.is_some_and(|n| tally.events >= n) {
                    return Some(Stop::Count);
                }
                Some(id)
            }
            Kind::Stack { pid } => {
                if skip_pid.is_some_and(|s| i64::from(s) == i64::from(pid)) {
                    continue;
                }
                None
            }
            Kind::Lost => None,
        };
        if out.write_all(line).is_err() {
            return Some(Stop::OutputClosed);
        }
        if let Some(id) = event {
            tally.count(source.event_name(id));
        }
    }
    if out.flush().is_err() {
        return Some(Stop::OutputClosed);
    }
    if limit.is_some_and(|n| tally.events >= n) {
        return Some(Stop::Count);
    }
    None
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
    lost: &ktrace_printer::LostSummary,
    profile: Option<Vec<ktrace_tracefs::profile::ProbeProfile>>,
    stop: Stop,
) {
    let why = match stop {
        Stop::Duration => "duration reached".to_string(),
        Stop::Count => "count reached".to_string(),
        Stop::CommandExited => "command exited".to_string(),
        Stop::Signal(s) => format!("signal {s}"),
        Stop::OutputClosed => "output closed".to_string(),
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
