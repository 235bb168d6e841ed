//! A run whose events the kernel aggregates itself (hist triggers): its
//! setup, the wait for its end, and its conclusion. No stream: nothing is
//! copied to user space. The triggers themselves are crate::cmd::agg's.

use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::fate::{command_fate, signal_exit};
use super::setup::{check, create_objects, own_exclusion, pid_lists, start_command, threads_of};
use super::stream::{child_exited, process_exists};
use super::{Live, RunArgs, Stop};
use crate::session::{self, Session, Signals};

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
    live: &Live<'_>,
    mut sess: Session,
    probes: Vec<session::Probe>,
    keep_recording: bool,
    install: &mut Install<'_>,
) -> anyhow::Result<KernelRun> {
    let Live { args, signals, .. } = *live;
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
        if child_exited(&run.child)? {
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
