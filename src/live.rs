//! The live run shared by the commands that trace: the session's setup
//! (probes checked and created in ktrace's own group, its own instance,
//! filters and triggers that keep ktrace's own threads out, the traced
//! command started), the stream loop that hands records to a sink until
//! the duration, the count, the command's exit or a signal, the drain at
//! the end, and the teardown with its summary.
//!
//! Commands differ only in their sink (text, JSON, raw, a record file, an
//! aggregation) and in what they do with it at the end; the lifecycle and
//! its cleanup on every exit are here once. It is not the sinks
//! (ktrace-printer and others) nor the definition language (crate::resolve,
//! ktrace-probe).
//!
//! Test-only: when the environment variable `KTRACE_TEST_PANIC` is set, the
//! run loop panics once the probes are enabled, so tests can prove that a
//! panic still tears the session down. It has no other use.

use std::io;
use std::path::Path;
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;
use ktrace_stream::{EndOfRun, Options, ProbeSpec, Sink, Status, Stream};
use ktrace_symbols::KernelView;

use crate::output;
use crate::session::{self, Session, Signals, Tally};

/// How full (percent) a CPU's buffer must be before its reader wakes.
const BUFFER_PERCENT: u32 = 25;
/// The sub-buffer size asked for where the kernel lets it be set.
const SUBBUF_KB: u32 = 16;

/// The options of a live run that every tracing command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Event filter applied to every probe (the kernel's filter language).
    #[arg(short = 'f', long)]
    pub filter: Option<String>,
    /// Trigger added to every probe (e.g. 'traceoff:1', 'stacktrace').
    #[arg(long)]
    pub trigger: Option<String>,
    /// Stop after this many seconds (a finite number above zero).
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub duration: Option<f64>,
    /// Stop after this many events (at least 1).
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = crate::cli::count)]
    pub count: Option<u64>,
    /// Only events of this process (its threads and the children it forks).
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// Per-CPU buffer size of the session's instance, in KiB (at most the
    /// machine's memory).
    #[arg(long, value_name = "KB", value_parser = crate::cli::buffer_kb)]
    pub buffer_size: Option<u64>,
    /// Trace clock of the session's instance (see tracefs trace_clock).
    #[arg(long)]
    pub clock: Option<String>,
    /// The system (group) ktrace shows and writes for the probes, in text,
    /// JSON, raw output, recordings (trace.dat's system directories, so
    /// trace-cmd and KernelShark list NAME/EVENT), Perfetto and errors:
    /// `ktrace` by default. The kernel still holds the probes in the
    /// session's own group (`ktrace_p<PID>_s<START>_n<PIDNS>`), so sessions
    /// never collide. A group written in a definition (`p:mygrp/ev ...`)
    /// is shown for that probe instead. A C identifier of at most 63 bytes,
    /// not `ftrace`.
    #[arg(long, value_name = "NAME", value_parser = crate::cli::group)]
    pub group: Option<String>,
    /// Command to run and trace (with the processes it forks); tracing
    /// stops when it exits, and ktrace exits with its status (128+N when a
    /// signal N killed it). When -d, -n or a signal ends tracing first, the
    /// command is left running, not killed.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The kernel's own events a `trace` or `record` run switches on beside
/// its probes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EventArgs {
    /// Also trace the kernel's own events (tracepoints) in the session's
    /// instance, beside the probes: SYS:EVENT, SYS:* (a whole system),
    /// EVENT, or *:* (every event), as the kernel's set_event file takes
    /// them (whole names; `*` alone stands for any). Repeatable. They obey
    /// -p, leave ktrace's own threads out, print as the kernel's `trace`
    /// prints them, and are recorded with their formats.
    #[arg(short = 'e', long = "event", value_name = "SYS:EVENT", value_parser = event_spec)]
    pub events: Vec<String>,
}

/// A `set_event` word: no `!` (that switches off), no blank or control
/// character, at most one `:`.
fn event_spec(text: &str) -> Result<String, String> {
    let bad = text.is_empty()
        || text.starts_with('!')
        || text.chars().any(|c| c.is_whitespace() || c.is_control())
        || text.matches(':').count() > 1
        || text.split(':').any(str::is_empty);
    if bad {
        Err(format!(
            "{text:?} is not an event: give SYS:EVENT (sched:sched_switch), SYS:* (sched:*), \
             EVENT, or *:* for every event"
        ))
    } else {
        Ok(text.to_string())
    }
}

impl RunArgs {
    /// A new session in the tracefs at `root`, showing `--group` (or
    /// `ktrace`) as its probes' system.
    pub fn session(&self, root: &Path) -> anyhow::Result<Session> {
        let mut sess = Session::new(root)?;
        sess.set_system(self.group.as_deref());
        Ok(sess)
    }

    /// When the run must end by `-d`, counted from now.
    pub fn deadline(&self) -> Option<Instant> {
        self.duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d))
    }
}

/// Why the run loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Duration,
    Count,
    CommandExited,
    /// The process of `-p PID` is gone.
    ProcessExited,
    Signal(i32),
    /// The output's reader went away (EPIPE): a quiet stop.
    OutputClosed,
    /// A write was given up because a stop was asked for (a signal, the
    /// deadline) while the output was not being read.
    Stopped,
    /// Writing the output failed (a full disk, an I/O error): exit 1.
    OutputFailed,
    /// Reading the ring buffer failed: exit 1.
    ReadFailed,
}

/// What setup made: the session with its probes enabled, the stream
/// reading its instance, and the traced command.
/// (Fields drop in order: the stream, closing the per-CPU buffers, before
/// the session, whose teardown removes the instance.)
pub(crate) struct Run {
    pub(crate) stream: Stream,
    pub(crate) sess: Session,
    pub(crate) inst: ktrace_tracefs::Instance,
    pub(crate) child: Option<Child>,
    /// The command's exit status, once it has exited.
    pub(crate) status: Option<std::process::ExitStatus>,
    /// The header of the instance's `trace` file, read before enabling
    /// (opening `trace` pauses recording while it is open).
    pub(crate) trace_header: Option<String>,
    /// The modules the kernel probes live in (an unload is reported).
    pub(crate) modules: crate::modwatch::ModuleWatch,
    /// What someone else did to the session, once seen (reported, exit 1).
    pub(crate) disturbed: Option<String>,
    /// When the session was last checked for that.
    pub(crate) checked: Instant,
}

/// The exit code after signal `sig`: 0 for SIGINT (Ctrl-C is the normal
/// way to stop), 128 + N otherwise.
pub(crate) fn signal_exit(sig: i32) -> ExitCode {
    if sig == signal_hook::consts::SIGINT {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(128u8.saturating_add(sig as u8))
    }
}

/// Setup's error as the command's end: a signal during setup (what was
/// created is already gone: the session was dropped) exits as for that
/// signal; any other error is returned.
pub(crate) fn setup_failed(e: anyhow::Error) -> anyhow::Result<ExitCode> {
    if let Some(session::Interrupted(sig)) = e.downcast_ref::<session::Interrupted>() {
        crate::say!("{e}; nothing was traced and everything created was removed");
        return Ok(signal_exit(*sig));
    }
    Err(e)
}

/// What a run records beside its probes' events.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Beside<'a> {
    /// A kernel stack with each hit (`--stack`).
    pub stacks: bool,
    /// The kernel's own events switched on in the instance (`-e`).
    pub events: &'a [String],
}

/// Creates the probes already built (checked, nothing written) into `sess`
/// by `resolve::build`, the instance and its settings, opens the stream,
/// keeps ktrace's own threads out, enables the probes and starts the
/// command. Commands check their own input (fields, outputs) against the
/// built probes first.
pub(crate) fn setup_built(
    mut sess: Session,
    probes: Vec<session::Probe>,
    beside: Beside<'_>,
    args: &RunArgs,
    root: &std::path::Path,
    view: &KernelView,
    signals: &Signals,
) -> anyhow::Result<Run> {
    let inst = create_objects(&mut sess, probes, args, signals)?;
    inst.set_buffer_percent(BUFFER_PERCENT)?;
    let specs = probe_specs(&sess);
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
    let mut stream = Stream::open(root, &inst, &specs, opts)?;
    // the kernel's own events a trigger enables may name enum constants
    stream.set_names(crate::kview::btf_names());
    // ktrace's own threads (main, reader, output) are kept out in the
    // kernel: by the event filter, and by a condition on every trigger.
    // An unconditional trigger runs before the kernel's pid lists are
    // applied, so without one it would fire on ktrace's own reads of
    // tracefs (a `traceoff` stopped the session at its first stats read).
    let own = own_exclusion(&threads_of(own_pid)?);
    let filter = match &args.filter {
        Some(f) => {
            // The user's text first, so a rejection shows the kernel's
            // message for what the user wrote.
            sess.set_filter(f)?;
            format!("({f}) && {own}")
        }
        None => own.clone(),
    };
    sess.set_filter(&filter)?;
    if let Some(t) = &args.trigger {
        if let Some((_, cond)) = t.split_once(" if ") {
            for p in sess.probes() {
                if let Some(e) = inst.diagnose_filter(sess.name(), p.event(), cond.trim()) {
                    return Err(anyhow::Error::new(e).context(format!(
                        "the kernel rejected the condition of the trigger {t:?} on {}",
                        p.event()
                    )));
                }
            }
        }
        let written = trigger_without_own(t, &own);
        if let Err(e) = sess.add_trigger(&written) {
            // Show the kernel's verdict on what the user wrote: the added
            // condition comes after it, so carets into it stay right.
            let text = format!("{e:#}")
                .replace(&format!("{written:?}"), &format!("{t:?}"))
                .replace(&written, t);
            anyhow::bail!("{text}");
        }
    }
    if beside.stacks {
        crate::resolve::enable_stacks(&sess, &inst, Some(&filter))?;
    }
    pid_lists(&inst, args, own_pid)?;
    for e in beside.events {
        inst.enable_events(e).map_err(|err| {
            anyhow::anyhow!(
                "-e {e}: no event of this kernel matches it ({err}); the events are listed \
                 under {}/events as SYS/EVENT",
                root.display()
            )
        })?;
    }
    let trace_header = inst.trace_header();
    // The last moment to stop cheaply: removing enabled uprobes costs the
    // kernel a grace period each (~50 ms), unenabled ones almost nothing.
    check(signals)?;
    let modules = crate::modwatch::ModuleWatch::new(
        sess.probes().iter().map(|p| (p.event(), p.kind())),
        view,
    );
    sess.enable()?;
    crate::eline!(
        "ktrace: tracing {} probe(s) in session {}; Ctrl-C to stop",
        sess.probes().len(),
        sess.name()
    );
    let child = start_command(args)?;
    Ok(Run {
        stream,
        sess,
        inst,
        child,
        status: None,
        trace_header,
        modules,
        disturbed: None,
        checked: Instant::now(),
    })
}

/// Says what the function tracer's route attaches to (`verb`: counting,
/// tracing): the functions of its list that the globs matched.
pub(crate) fn say_functions(verb: &str, funcs: &[String], globs: &[String]) {
    crate::eline!(
        "ktrace: {verb} the {} function(s) of available_filter_functions matching {} (the \
         function tracer's list: it has functions kprobes refuse, and lacks notrace ones \
         kprobes may take)",
        funcs.len(),
        globs.join(" ")
    );
}

/// Why the function tracer refused to take `glob` in its filter, from the
/// write's error: EPERM (a sandbox, lockdown) refuses every glob, so it is
/// not "no function matches" (which the kernel says with EINVAL/ENOENT).
fn ftrace_filter_refusal(glob: &str, kind: ktrace_tracefs::ErrorKind) -> String {
    match kind {
        ktrace_tracefs::ErrorKind::Permission => format!(
            "the kernel does not permit setting the function tracer's filter here (EPERM, \
             whatever the glob: {glob:?} was not the cause; a sandbox or lockdown forbids \
             set_ftrace_filter); use --route kprobe (one kprobe per function) where the \
             kernel has kprobe events"
        ),
        _ => format!(
            "the function tracer refused {glob:?}: no function of \
             available_filter_functions matches it"
        ),
    }
}

/// The function tracer's setup (`ktrace count` over bare function globs,
/// see crate::cmd::agg): ktrace's own instance, no probes; the globs
/// written to the instance's `set_ftrace_filter` one write each (the
/// kernel refuses a glob that matches nothing, and the filter is read back:
/// an empty one would trace every function), ktrace's own threads kept out
/// (`set_ftrace_notrace_pid`) or only `-p PID` / the command traced
/// (`set_ftrace_pid` with `function-fork`), the stream opened, then
/// `current_tracer=function`; with `stacks`, its `func_stack_trace`
/// option (a kernel stack record after each call). Returns the run and the
/// functions the kernel's filter holds.
pub(crate) fn setup_function(
    mut sess: Session,
    globs: &[String],
    stacks: bool,
    args: &RunArgs,
    root: &std::path::Path,
    view: &KernelView,
    signals: &Signals,
) -> anyhow::Result<(Run, Vec<String>)> {
    let inst = create_objects(&mut sess, Vec::new(), args, signals)?;
    inst.set_buffer_percent(BUFFER_PERCENT)?;
    if !inst.has_function_tracer() {
        anyhow::bail!(
            "ktrace's instance {} offers no function tracer (no `function` in its \
             available_tracers, or no set_ftrace_filter); use --route kprobe",
            inst.name()
        );
    }
    let started = Instant::now();
    let mut had = 0;
    for g in globs {
        inst.add_ftrace_filter(g).map_err(|e| {
            let why = ftrace_filter_refusal(g, e.kind());
            anyhow::Error::new(e).context(why)
        })?;
        // Some kernels (6.1) take a glob that matches nothing silently.
        let now = inst.ftrace_filter()?.len();
        if now == had {
            anyhow::bail!(
                "no function of available_filter_functions matches {g:?}{}; nothing was traced",
                if had > 0 {
                    " (none that the globs before it did not)"
                } else {
                    ""
                }
            );
        }
        had = now;
    }
    let funcs = inst.ftrace_filter()?;
    if funcs.is_empty() {
        // an empty filter would trace every function
        anyhow::bail!(
            "the function tracer's filter is empty after writing {}; nothing was traced",
            globs.join(" ")
        );
    }
    let own_pid = std::process::id();
    let opts = Options {
        skip_pids: if args.command.is_empty() {
            Vec::new()
        } else {
            vec![own_pid as i32]
        },
        limit: args.count,
        ..Options::default()
    };
    // The kernel refuses to change the tracer while a buffer of the
    // instance is open (EBUSY), and the reader thread must exist before
    // the pid lists are written (`function-fork` would add it): the tracer
    // goes on with recording off, then the stream opens, then the pid
    // lists, then recording starts.
    check(signals)?;
    inst.set_tracing_on(false)?;
    inst.set_current_tracer("function")?;
    // A tracer option: its file is there while the tracer is current. Set
    // either way: where the tracer's options are one value for all
    // instances (6.12), one left on elsewhere would otherwise put a stack
    // after every call. Teardown switches it off again.
    let stack_option = ktrace_tracefs::owner::FUNC_STACK_TRACE;
    if stacks {
        inst.set_option(stack_option, true).with_context(|| {
            format!(
                "the function tracer in ktrace's instance {} has no func_stack_trace option \
                 (a stack per call); use --route kprobe for --by stack",
                inst.name()
            )
        })?;
    } else if inst.option(stack_option) == Some(true) {
        inst.set_option(stack_option, false)?;
    }
    let mut stream = Stream::open(root, &inst, &[], opts)?;
    stream.set_names(crate::kview::btf_names());
    if let Some(pid) = args.pid {
        let mut tids = threads_of(pid).with_context(|| format!("no process {pid}"))?;
        if !args.command.is_empty() {
            tids.push(own_pid);
        }
        inst.set_option("function-fork", true)?;
        inst.set_ftrace_pids(&tids)?;
    } else if !args.command.is_empty() {
        inst.set_option("function-fork", true)?;
        inst.set_ftrace_pids(&[own_pid])?;
    } else if !inst.set_ftrace_notrace_pids(&threads_of(own_pid)?)? {
        crate::say!(
            "warning: this kernel has no set_ftrace_notrace_pid; ktrace's own calls of \
             these functions (reading the buffer) are counted too"
        );
    }
    check(signals)?;
    inst.set_tracing_on(true)?;
    crate::eline!(
        "ktrace: function tracer on {} function(s) in session {} (attached in {} ms); \
         Ctrl-C to stop",
        funcs.len(),
        sess.name(),
        started.elapsed().as_millis()
    );
    let child = start_command(args)?;
    let modules = crate::modwatch::ModuleWatch::new(std::iter::empty(), view);
    Ok((
        Run {
            stream,
            sess,
            inst,
            child,
            status: None,
            trace_header: None,
            modules,
            disturbed: None,
            checked: Instant::now(),
        },
        funcs,
    ))
}

/// An error for a signal caught during setup (the session is torn down as
/// it is dropped).
fn check(signals: &Signals) -> anyhow::Result<()> {
    match signals.caught() {
        Some(sig) => Err(anyhow::Error::new(session::Interrupted(sig))),
        None => Ok(()),
    }
}

/// Writes the probes, creates the instance and applies `--buffer-size` and
/// `--clock`.
fn create_objects(
    sess: &mut Session,
    probes: Vec<session::Probe>,
    args: &RunArgs,
    signals: &Signals,
) -> anyhow::Result<ktrace_tracefs::Instance> {
    let stop = || signals.caught();
    check(signals)?;
    crate::resolve::create(sess, probes, &stop)?;
    let inst = sess.create_instance()?.clone();
    check(signals)?;
    // Larger sub-buffers where the kernel offers them (6.8+): a quarter
    // of the reads, page swaps and wakeups for the same events (measured:
    // less reader CPU per million events). Not with a small --buffer-size,
    // whose few sub-buffers would then be fewer still.
    if args.buffer_size.is_none_or(|kb| kb >= 1024)
        && inst
            .subbuf_size()
            .is_some_and(|b| b < SUBBUF_KB as usize * 1024)
    {
        inst.set_subbuf_size_kb(SUBBUF_KB)?;
    }
    if let Some(kb) = args.buffer_size {
        inst.set_buffer_size_kb(kb)?;
        check(signals)?;
    }
    if let Some(clock) = &args.clock {
        inst.set_trace_clock(clock)?;
    }
    Ok(inst)
}

/// The instance's pid lists: `-p PID` (and the command's tree), or ktrace's
/// own threads left out. Returns the pids of `set_event_pid` that must
/// stay there while they live: ktrace's own (the command's parent) or the
/// process of `-p` (`None`: the list is empty, the notrace list was
/// written).
fn pid_lists(
    inst: &ktrace_tracefs::Instance,
    args: &RunArgs,
    own_pid: u32,
) -> anyhow::Result<Option<Vec<u32>>> {
    if let Some(pid) = args.pid {
        let mut tids = threads_of(pid).with_context(|| format!("no process {pid}"))?;
        if !args.command.is_empty() {
            // `-p PID -- CMD`: both, the command through ktrace's own pid
            // (its children are added as they fork; ktrace's own records
            // are left out by the filter). Said, not silent.
            crate::say!(
                "tracing both process {pid} (-p) and the command {:?} with the processes                  it forks; give only one of them to trace one",
                args.command.join(" ")
            );
            tids.push(own_pid);
        }
        inst.set_option("event-fork", true)?;
        inst.set_event_pids(&tids)?;
        // (its other threads may exit, and their numbers be reused)
        let mut anchors = vec![pid];
        if !args.command.is_empty() {
            anchors.push(own_pid);
        }
        Ok(Some(anchors))
    } else if !args.command.is_empty() {
        // Children of listed pids are added as they fork, so the command is
        // traced from its first instruction; our own records are dropped.
        inst.set_option("event-fork", true)?;
        inst.set_event_pids(&[own_pid])?;
        Ok(Some(vec![own_pid]))
    } else {
        // ktrace's own reads of the ring buffer (main and reader thread)
        // would otherwise feed probes on read/write paths, which feed the
        // buffer again.
        inst.set_event_notrace_pids(&threads_of(own_pid)?)?;
        Ok(None)
    }
}

fn start_command(args: &RunArgs) -> anyhow::Result<Option<Child>> {
    Ok(match args.command.split_first() {
        Some((cmd, rest)) => Some(
            std::process::Command::new(cmd)
                .args(rest)
                .spawn()
                .with_context(|| format!("cannot run {cmd}"))?,
        ),
        None => None,
    })
}

/// A run whose events the kernel aggregates itself (hist triggers): the
/// session, its instance and the command, but no stream — nothing is
/// copied to user space. The probes are never enabled: a hist trigger
/// soft-enables its event.
pub(crate) struct KernelRun {
    pub(crate) sess: Session,
    pub(crate) inst: ktrace_tracefs::Instance,
    pub(crate) child: Option<Child>,
    pub(crate) status: Option<std::process::ExitStatus>,
    /// Pids written to `set_event_pid` that stay there while they live
    /// (`None`: it was left empty and ktrace's own threads went to
    /// `set_event_notrace_pid`).
    pub(crate) event_pids: Option<Vec<u32>>,
}

/// What writes the kernel engine's triggers: given the instance, the
/// user's `-f` and the filter leaving ktrace's own threads out.
pub(crate) type Install<'a> =
    dyn FnMut(&ktrace_tracefs::Instance, Option<&str>, &str) -> anyhow::Result<()> + 'a;

/// The kernel engine's setup: the probes and the instance as for a stream
/// run, the pid lists, then `install` (given the instance, the user's `-f`
/// and the filter that leaves ktrace's own threads out, which every
/// trigger must carry) writes the triggers; then the command starts.
pub(crate) fn setup_kernel(
    mut sess: Session,
    probes: Vec<session::Probe>,
    args: &RunArgs,
    signals: &Signals,
    keep_recording: bool,
    install: &mut Install<'_>,
) -> anyhow::Result<KernelRun> {
    let inst = create_objects(&mut sess, probes, args, signals)?;
    let own_pid = std::process::id();
    let own = own_exclusion(&threads_of(own_pid)?);
    if let Some(f) = &args.filter {
        // the user's text alone first: the kernel's message names it
        sess.set_filter(f)?;
        sess.set_filter("0")?;
    }
    let event_pids = pid_lists(&inst, args, own_pid)?;
    check(signals)?;
    install(&inst, args.filter.as_deref(), &own)?;
    if !keep_recording {
        // Nobody reads this instance's buffer: with recording off, the
        // kernel hands each hit to the hist triggers in its temporary
        // buffer and writes nothing (trace_event_buffer_lock_reserve():
        // "If tracing is off, but we have triggers enabled we still need
        // to look at the event data"), so the traced tasks do not pay for
        // filling a ring buffer. Latency keeps it on: its `common_timestamp`
        // variables need events in the real buffer (measured on 6.1: with
        // recording off every return went unmatched).
        inst.set_tracing_on(false)?;
    }
    crate::eline!(
        "ktrace: aggregating {} probe(s) in the kernel, session {}; Ctrl-C to stop",
        sess.probes().len(),
        sess.name()
    );
    let child = start_command(args)?;
    Ok(KernelRun {
        sess,
        inst,
        child,
        status: None,
        event_pids,
    })
}

/// Whether someone else rewrote the kernel-engine instance's pid list:
/// a pid ktrace wrote (still alive) is gone from `set_event_pid`, or the
/// list ktrace left empty now names pids. Either way events ktrace should
/// count are not counted.
pub(crate) fn kernel_pids_disturbed(run: &KernelRun) -> Option<String> {
    let now = run.inst.event_pids(false).ok().flatten()?;
    let lost = match &run.event_pids {
        Some(ours) => ours.iter().any(|p| !now.contains(p) && process_exists(*p)),
        None => !now.is_empty(),
    };
    lost.then(|| {
        "the instance's set_event_pid was rewritten by someone else while aggregating: events \
         of the traced tasks are no longer counted"
            .to_string()
    })
}

/// Waits up to `wait` for the end of a kernel-engine run: the deadline,
/// a signal, the command's exit or the end of `-p PID`. `None` while it
/// goes on.
pub(crate) fn kernel_wait(
    run: &mut KernelRun,
    args: &RunArgs,
    signals: &Signals,
    deadline: Option<Instant>,
    wait: Duration,
) -> anyhow::Result<Option<Stop>> {
    let until = Instant::now() + wait;
    loop {
        if let Some(sig) = signals.caught() {
            return Ok(Some(Stop::Signal(sig)));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(Some(Stop::Duration));
        }
        if child_exited(&mut run.child, &mut run.status)? {
            return Ok(Some(Stop::CommandExited));
        }
        if run.child.is_none() && args.pid.is_some_and(|p| !process_exists(p)) {
            return Ok(Some(Stop::ProcessExited));
        }
        if now >= until {
            return Ok(None);
        }
        let step = until
            .min(deadline.unwrap_or(until))
            .saturating_duration_since(now)
            .min(Duration::from_millis(50));
        std::thread::sleep(step);
    }
}

/// The end of a kernel-engine run: `remove` undoes what `install` wrote
/// (triggers, then synthetic events), the session is torn down, and the
/// run's fate becomes the exit code.
pub(crate) fn conclude_kernel(
    mut run: KernelRun,
    stop: Stop,
    remove: &mut dyn FnMut(&ktrace_tracefs::Instance) -> anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    if let Some(c) = run.child.as_mut()
        && run.status.is_none()
    {
        run.status = c.try_wait().ok().flatten();
    }
    let kprobes = run
        .sess
        .probes()
        .iter()
        .filter(|p| !p.kind().is_uprobe())
        .count();
    if kprobes > 100 {
        crate::say!("detaching {kprobes} kprobes (the kernel disables them one by one)");
    }
    let removed = remove(&run.inst);
    let started = Instant::now();
    let teardown = run.sess.destroy();
    removed.context("cleanup failed")?;
    let teardown = teardown.context("cleanup failed")?;
    crate::eline!(
        "ktrace: cleanup removed {} in {} ms{}",
        teardown.removed_words("probe(s) and synthetic event(s)"),
        started.elapsed().as_millis(),
        teardown.via()
    );
    if let Some(m) = teardown.moved {
        anyhow::bail!("{m}");
    }
    let uprobes = run.sess.probes().iter().any(|p| p.kind().is_uprobe());
    let fate = run.status.and_then(|st| command_fate(st, uprobes));
    if let Some((line, _)) = &fate {
        crate::say!("{line}");
    }
    Ok(match (stop, fate) {
        (Stop::Signal(sig), _) => signal_exit(sig),
        (_, Some((_, code))) => ExitCode::from(code),
        _ => ExitCode::SUCCESS,
    })
}

/// The session's probes as the event table needs them (group = session,
/// system = the stable one ktrace shows, event name, how the kernel prints
/// its header).
pub(crate) fn probe_specs(sess: &Session) -> Vec<ProbeSpec> {
    sess.probes()
        .iter()
        .map(|p| ProbeSpec {
            group: sess.name().to_string(),
            system: p.system.clone(),
            event: p.event().to_string(),
            kind: ktrace_event::ProbeKind::from(p.kind()),
            target: match p.kind() {
                ktrace_probe::ProbeKind::Eprobe { system, event, .. } => {
                    Some(format!("{system}.{event}"))
                }
                _ => None,
            },
        })
        .collect()
}

/// Hands records to `sink` until the duration, the count, the command's
/// exit, a signal or an output error; then stops recording and drains what
/// is left. Returns why, and the error to exit with (if any).
pub(crate) fn stream_loop(
    args: &RunArgs,
    signals: &Signals,
    deadline: Option<Instant>,
    run: &mut Run,
    sink: &mut dyn Sink,
) -> (Stop, Option<anyhow::Error>) {
    stream_loop_ticking(args, signals, deadline, run, sink, &mut || Ok(()))
}

/// [`stream_loop`] calling `tick` at least every 100 ms while it reads
/// (per-interval output of the aggregating commands); an error from it
/// stops the run as an output error would.
pub(crate) fn stream_loop_ticking(
    args: &RunArgs,
    signals: &Signals,
    deadline: Option<Instant>,
    run: &mut Run,
    sink: &mut dyn Sink,
    tick: &mut dyn FnMut() -> io::Result<()>,
) -> (Stop, Option<anyhow::Error>) {
    if let Err(e) = run.stream.begin(sink) {
        return failed(e);
    }
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
        let exited = match child_exited(&mut run.child, &mut run.status) {
            Ok(e) => e,
            Err(e) => return (Stop::ReadFailed, Some(e)),
        };
        if run.child.is_none() && args.pid.is_some_and(|p| !process_exists(p)) {
            // `-p PID` ends when the process does; take what is left.
            break Stop::ProcessExited;
        }
        let wait = deadline.map_or(Duration::from_millis(100), |d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        });
        let polled = run
            .stream
            .poll(if exited { Duration::ZERO } else { wait }, sink);
        warn(&mut run.stream);
        if run.disturbed.is_none() && run.checked.elapsed() >= Duration::from_secs(1) {
            run.checked = Instant::now();
            if let Some(m) = run.sess.disturbance(true) {
                crate::say!("warning: {m}");
                run.disturbed = Some(m);
            }
        }
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
        if let Err(e) = tick() {
            return failed(ktrace_stream::Error::Output(e));
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
        ktrace_stream::Error::Output(io) if output::is_stopped(io) => (Stop::Stopped, None),
        ktrace_stream::Error::Output(_) => (Stop::OutputFailed, Some(e.into())),
        _ => (Stop::ReadFailed, Some(e.into())),
    }
}

pub(crate) fn warn(stream: &mut Stream) {
    for w in stream.take_warnings() {
        crate::say!("{w}");
    }
}

/// Stops reading, takes the end-of-run account (per-CPU stats) and ends
/// the sink. The sink's last writes can fail: a closed pipe then ends the
/// run quietly (`stop` becomes [`Stop::OutputClosed`]), any other failure
/// becomes `error` (unless there is one already); the account is kept
/// either way.
pub(crate) fn finish(
    run: &mut Run,
    sink: &mut dyn Sink,
    stop: &mut Stop,
    error: &mut Option<anyhow::Error>,
) -> anyhow::Result<EndOfRun> {
    run.sess.stop();
    let end = run.stream.finish(&mut Discard);
    warn(&mut run.stream);
    let end = end?;
    // the output is gone: account without writing to it
    if !matches!(
        *stop,
        Stop::OutputClosed | Stop::OutputFailed | Stop::Stopped
    ) && let Err(e) = sink.finish(&end)
    {
        let (s, err) = failed(ktrace_stream::Error::Output(e));
        *stop = s;
        if error.is_none() {
            *error = err;
        }
    }
    Ok(end)
}

/// A sink that keeps nothing (the end of a run whose output failed).
struct Discard;

impl Sink for Discard {
    fn event(&mut self, _: &ktrace_stream::Event<'_>) -> io::Result<ktrace_stream::Flow> {
        Ok(ktrace_stream::Flow::Continue)
    }
}

/// Prints the summary, removes the session and reports the cleanup;
/// returns what someone else did to the session, if anything.
pub(crate) fn teardown_and_summary(
    mut run: Run,
    end: EndOfRun,
    stop: Stop,
) -> anyhow::Result<Option<String>> {
    let profile = run.sess.profile();
    if let Some(c) = run.child.as_mut()
        && run.status.is_none()
    {
        // Reap it if it is done; a command still running (we were signalled
        // alone, or -d ended first) is the user's and is left to run.
        run.status = c.try_wait().ok().flatten();
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
    for (module, fate, events) in run.modules.changed() {
        crate::say!(
            "warning: {}",
            crate::modwatch::message(&module, &fate, &events)
        );
    }
    let uprobes = run
        .sess
        .probes()
        .iter()
        .filter(|p| p.kind().is_uprobe())
        .count();
    if uprobes >= 20 {
        // Measured on 6.18: each enabled uprobe costs ~40-50 ms to switch off
        // (the kernel waits for a grace period per event), instance removal
        // included; the group delete afterwards is ~30 ms for 1000.
        crate::say!("removing {uprobes} uprobes; the kernel takes ~50 ms for each");
    }
    let kprobes = run.sess.probes().len() - uprobes;
    if kprobes > 100 {
        // One grace period per enabled kprobe as the instance goes: say
        // so before the wait (measured: 630 kprobes took ~19 s on a 6.1
        // x86_64 guest under TCG).
        crate::say!("detaching {kprobes} kprobes (the kernel disables them one by one)");
    }
    let disturbed = run.sess.disturbance(false).or(run.disturbed.take());
    let cleanup_started = Instant::now();
    let teardown = run.sess.destroy();
    let cleanup_time = cleanup_started.elapsed();
    let teardown = teardown.context("cleanup failed")?;
    crate::eline!(
        "ktrace: cleanup removed {} in {} ms{}",
        teardown.removed_words("probe(s)"),
        cleanup_time.as_millis(),
        teardown.via()
    );
    // tracefs unmounted under the run: cleaned up, but the user's tracefs
    // went away (an error, as a disturbance is)
    Ok(disturbed.or(teardown.moved))
}

/// A filter that is false for ktrace's own threads.
fn own_exclusion(tids: &[u32]) -> String {
    let parts: Vec<String> = tids.iter().map(|t| format!("common_pid != {t}")).collect();
    parts.join(" && ")
}

/// The user's trigger with a condition that leaves ktrace's own threads
/// out: `T` becomes `T if OWN`, `T if C` becomes `T if (C) && OWN`. A
/// conditional trigger runs only on a recorded event, after the pid lists.
fn trigger_without_own(trigger: &str, own: &str) -> String {
    match trigger.split_once(" if ") {
        Some((head, cond)) => format!("{} if ({}) && {own}", head.trim_end(), cond.trim()),
        None => format!("{} if {own}", trigger.trim_end()),
    }
}

fn child_exited(
    child: &mut Option<Child>,
    status: &mut Option<std::process::ExitStatus>,
) -> anyhow::Result<bool> {
    match child {
        Some(c) => {
            if status.is_none() {
                *status = c.try_wait()?;
            }
            Ok(status.is_some())
        }
        None => Ok(false),
    }
}

/// Whether a process `pid` exists (and is not a zombie).
fn process_exists(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| ktrace_tracefs::owner::stat_is_live(&s))
}

/// What became of the traced command, when it did not simply succeed: a
/// line for the user and the exit code ktrace passes on (the command's own
/// status, or 128 + N for a signal, as a shell does).
pub(crate) fn command_fate(
    status: std::process::ExitStatus,
    uprobes: bool,
) -> Option<(String, u8)> {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return (code != 0).then(|| {
            (
                format!("the command exited with status {code}"),
                u8::try_from(code).unwrap_or(1),
            )
        });
    }
    let sig = status.signal()?;
    let name = signal_name(sig);
    let mut line = format!("the command was killed by signal {sig} ({name})");
    if uprobes && matches!(sig, 4 | 5 | 7 | 11) {
        line.push_str(
            "; a uprobe placed inside an instruction (not on an instruction boundary) \
             corrupts the probed code: check the offsets against the disassembly",
        );
    }
    Some((line, 128u8.saturating_add(sig as u8)))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

pub(crate) fn threads_of(pid: u32) -> io::Result<Vec<u32>> {
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
        Stop::ProcessExited => "process exited".to_string(),
        Stop::Stopped => "stopped".to_string(),
        Stop::Signal(s) => format!("signal {s}"),
        Stop::OutputClosed => "output closed".to_string(),
        Stop::OutputFailed => "output failed".to_string(),
        Stop::ReadFailed => "reading failed".to_string(),
    };
    // "N events, M lost on CPU k, ..." from page headers and per-CPU stats.
    let line = lost.line();
    let per_cpu = line.split_once(", ").map_or("", |(_, d)| d);
    if lost.lost() == 0 && per_cpu == "0 lost" {
        crate::say!("{} event(s), 0 lost ({why})", tally.events);
    } else {
        crate::eline!(
            "ktrace: {} event(s), {} lost ({why}): {per_cpu}",
            tally.events,
            lost.lost()
        );
    }
    match profile {
        Some(p) => {
            // (what hits, misses and shown count: `ktrace trace --help`)
            for pr in &p {
                let seen = tally.per_event.get(&pr.event).copied().unwrap_or(0);
                let misses = pr.misses.map_or_else(|| "-".to_string(), |m| m.to_string());
                crate::eline!(
                    "  {:<32} hits {:>10}  misses {:>6}  shown {:>10}",
                    pr.event,
                    pr.hits,
                    misses,
                    seen
                );
                if let Some(w) = pr.warning() {
                    crate::say!("warning: {w}");
                }
            }
        }
        None => crate::say!("probe profile unavailable"),
    }
}

/// The end of a run, after the sink is done: prints the summary, tears the
/// session down and turns the run's fate into the exit code. `error` is a
/// stream error from [`stream_loop`], `output_error` a failure of the
/// destination found at its end; `out_name` names the destination in
/// messages.
pub(crate) fn conclude(
    run: Run,
    end: anyhow::Result<EndOfRun>,
    stop: Stop,
    error: Option<anyhow::Error>,
    output_error: Option<String>,
    out_name: &str,
) -> anyhow::Result<ExitCode> {
    let summary_error = end.as_ref().err().map(|e| format!("{e:#}"));
    let uprobes = run
        .sess
        .probes()
        .iter()
        .filter(|p| p.kind().is_uprobe())
        .count();
    let status = run.status;
    let disturbed = teardown_and_summary(run, end.unwrap_or_default(), stop)?;
    if let Some(e) = error {
        return Err(e.context(format!("cannot write events to {out_name}")));
    }
    if let Some(e) = output_error {
        anyhow::bail!(
            "cannot write events to {out_name}: {e}; events after the failure were not written"
        );
    }
    if let Some(e) = summary_error {
        anyhow::bail!("{e}");
    }
    if let Some(d) = disturbed {
        anyhow::bail!("{d}");
    }
    let fate = status.and_then(|st| command_fate(st, uprobes > 0));
    if let Some((line, _)) = &fate {
        crate::say!("{line}");
    }
    Ok(match (stop, fate) {
        (Stop::Signal(sig), _) => signal_exit(sig),
        (_, Some((_, code))) => ExitCode::from(code),
        _ => ExitCode::SUCCESS,
    })
}
