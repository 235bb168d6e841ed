//! The end of a live run: the summary (events, losses, the probe
//! profile), the session's teardown with its report, and the exit code the
//! run's fate gives.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use ktrace_stream::EndOfRun;

use super::fate::{command_fate, signal_exit};
use super::{Run, Stop};
use crate::session::Tally;

/// Prints the summary, removes the session and reports the cleanup;
/// returns what someone else did to the session, if anything.
pub(crate) fn teardown_and_summary(
    mut run: Run,
    end: EndOfRun,
    stop: Stop,
) -> anyhow::Result<Option<String>> {
    let profile = run.sess.profile();
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
/// stream error from [`stream_loop`](super::stream::stream_loop), `output_error` a failure of the
/// destination found at its end; `out_name` names the destination in
/// messages.
pub(crate) fn conclude(
    mut run: Run,
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
    if let Some(c) = run.child.as_mut()
        && run.status.is_none()
    {
        // Reap it if it is done (the stream has read its last records: its
        // name no longer needs /proc); a command still running (we were
        // signalled alone, or -d ended first) is the user's and is left to run.
        run.status = c.try_wait().ok().flatten();
    }
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
