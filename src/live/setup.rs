//! The setup of a live run: the probes written and the instance made
//! with its settings, the filters and triggers that keep ktrace's own
//! threads out, the pid lists, the function tracer's route, the stream
//! opened and the traced command started. Not the loop (super::stream) nor
//! the kernel engine's setup (super::kernel), which uses its pieces.

use std::io;
use std::process::{Child, ExitCode};
use std::time::Instant;

use anyhow::Context;
use ktrace_stream::{Options, ProbeSpec, Stream};

use super::fate::signal_exit;
use super::{Live, Run, RunArgs};
use crate::session::{self, Session, Signals};

/// How full (percent) a CPU's buffer must be before its reader wakes.
const BUFFER_PERCENT: u32 = 25;
/// The sub-buffer size asked for where the kernel lets it be set.
const SUBBUF_KB: u32 = 16;

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
    live: &Live<'_>,
    mut sess: Session,
    probes: Vec<session::Probe>,
    beside: Beside<'_>,
) -> anyhow::Result<Run> {
    let Live {
        args,
        root,
        view,
        signals,
    } = *live;
    let inst = create_objects(&mut sess, probes, args, signals)?;
    inst.set_buffer_percent(BUFFER_PERCENT)?;
    let specs = probe_specs(&sess);
    let own_pid = std::process::id();
    let opts = stream_options(args, own_pid);
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
    live: &Live<'_>,
    mut sess: Session,
    globs: &[String],
    stacks: bool,
) -> anyhow::Result<(Run, Vec<String>)> {
    let Live {
        args,
        root,
        view,
        signals,
    } = *live;
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
    let funcs = write_ftrace_filter(&inst, globs)?;
    let own_pid = std::process::id();
    let opts = stream_options(args, own_pid);
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

/// Writes `globs` to the instance's `set_ftrace_filter`, one write each,
/// and reads the filter back: a glob that adds no function is refused (some
/// kernels take it silently), and so is an empty filter, which would trace
/// every function. Returns the functions the filter holds.
fn write_ftrace_filter(
    inst: &ktrace_tracefs::Instance,
    globs: &[String],
) -> anyhow::Result<Vec<String>> {
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
    Ok(funcs)
}

/// An error for a signal caught during setup (the session is torn down as
/// it is dropped).
pub(super) fn check(signals: &Signals) -> anyhow::Result<()> {
    match signals.caught() {
        Some(sig) => Err(anyhow::Error::new(session::Interrupted(sig))),
        None => Ok(()),
    }
}

/// Writes the probes, creates the instance and applies `--buffer-size` and
/// `--clock`.
pub(super) fn create_objects(
    sess: &mut Session,
    probes: Vec<session::Probe>,
    args: &RunArgs,
    signals: &Signals,
) -> anyhow::Result<ktrace_tracefs::Instance> {
    let stop = || signals.caught();
    check(signals)?;
    // the command is found before anything is written: a typo is an error
    // that changes nothing, not a session set up and torn down
    if let Some(cmd) = args.command.first() {
        runnable(cmd)?;
    }
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
pub(super) fn pid_lists(
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
                "tracing both process {pid} (-p) and the command {:?} with the processes it forks; give only one of them to trace one",
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

/// Whether `cmd` can be started as `std::process::Command` would: a path
/// (with a `/`) to an executable file, or an executable file of that name
/// in a `PATH` directory. The error says which of those it is not.
fn runnable(cmd: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let usable = |p: &std::path::Path| -> Result<(), &'static str> {
        let m = std::fs::metadata(p).map_err(|_| "no such file")?;
        if m.is_dir() {
            return Err("it is a directory");
        }
        if m.permissions().mode() & 0o111 == 0 {
            return Err("it is not executable");
        }
        Ok(())
    };
    if cmd.contains('/') {
        return usable(std::path::Path::new(cmd))
            .map_err(|why| anyhow::anyhow!("cannot run {cmd}: {why}"));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    if std::env::split_paths(&path).any(|d| usable(&d.join(cmd)).is_ok()) {
        return Ok(());
    }
    anyhow::bail!("cannot run {cmd}: no executable of that name in PATH")
}

pub(super) fn start_command(args: &RunArgs) -> anyhow::Result<Option<Child>> {
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

/// A filter that is false for ktrace's own threads.
pub(super) fn own_exclusion(tids: &[u32]) -> String {
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

pub(crate) fn threads_of(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The stream's options for a run: a traced command's records from before
/// its fork are ktrace's own (its pid) and are left out; `-n` is the limit.
fn stream_options(args: &RunArgs, own_pid: u32) -> Options {
    Options {
        skip_pids: if args.command.is_empty() {
            Vec::new()
        } else {
            vec![own_pid as i32]
        },
        limit: args.count,
        ..Options::default()
    }
}
