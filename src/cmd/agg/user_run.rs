//! The user engine's run: the session's probes (or the function tracer's
//! records) streamed into ktrace-aggregate's [`AggSink`], reports printed
//! per interval and at the end, the Prometheus totals published, the
//! `--max-keys` warning said once; and a recording's hits counted by stack
//! for `ktrace report --folded` ([`count_recording_by_stack`]).
//!
//! The lifecycle (probes, instance, streaming, teardown) is crate::live's;
//! the sink and the aggregation are ktrace-aggregate's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ktrace_aggregate::agg::DEFAULT_MAX_KEYS;
use ktrace_aggregate::{AggSink, CountReport, KeySpec, LatencyPair, UserAgg, UserState, sink};

use super::probes::{Checked, func_of, is_return};
use super::{Ctx, Job};
use crate::live::{self, Stop};
use crate::session::{Probe, Session};

/// The warning when keys pass `--max-keys` (said once per run).
fn say_overflow(max_keys: usize) {
    crate::say!(
        "warning: more than {max_keys} distinct keys: ktrace keeps the first {max_keys} and \
         counts the rest together as other (exactly); --max-keys N keeps more"
    );
}

/// Counts the probe hits of a recording by stack (`ktrace report
/// --folded`) with the sink `count --by stack` runs live
/// ([`sink::count_recording_by_stack`]), warning when the stacks passed
/// [`DEFAULT_MAX_KEYS`].
pub(crate) fn count_recording_by_stack(
    decoder: &mut ktrace_stream::Decoder,
    streams: Vec<ktrace_stream::CpuPages>,
    symbols: &dyn ktrace_printer::Symbolizer,
) -> Result<(CountReport, ktrace_stream::EndOfRun), ktrace_stream::Error> {
    let counted = sink::count_recording_by_stack(decoder, streams, symbols)?;
    if counted.overflowed {
        say_overflow(DEFAULT_MAX_KEYS);
    }
    Ok((counted.report, counted.end))
}

/// The aggregators of `job`: the one printed, and with Prometheus the one
/// it serves (never reset).
fn user_state(
    job: &Job,
    checked: &Checked,
    probes: &[Probe],
    prom: bool,
    max_keys: usize,
) -> UserState {
    // as the event table names them: the stable system, not the group
    let ev = |p: &Probe| format!("{}/{}", p.system, p.event());
    let pairs: Vec<LatencyPair> = checked
        .pairs
        .iter()
        .map(|(e, r)| LatencyPair {
            func: func_of(&probes[*e]),
            entry_event: ev(&probes[*e]),
            return_event: ev(&probes[*r]),
        })
        .collect();
    let what = job.aggregation();
    let agg = UserAgg::new(what, pairs.clone(), &checked.keys, max_keys, false);
    UserState {
        total: prom.then(|| UserAgg::new(what, pairs, &checked.keys, max_keys, true)),
        agg,
    }
}

/// The probe fields the keys and the histogram read.
fn wanted(checked: &Checked, job: &Job) -> Vec<String> {
    checked
        .keys
        .iter()
        .filter_map(|k| match k {
            KeySpec::Field(name) => Some(name.clone()),
            _ => None,
        })
        .chain(match job {
            Job::Hist { field, .. } => Some(field.clone()),
            _ => None,
        })
        .collect()
}

/// Runs the user engine over the session's probes, or with `globs` over
/// the function tracer's records of those functions.
pub(super) fn run_user(
    sess: Session,
    probes: Vec<Probe>,
    globs: Option<&[String]>,
    job: &Job,
    checked: Checked,
    max_keys: usize,
    ctx: Ctx<'_>,
) -> anyhow::Result<ExitCode> {
    let Ctx {
        args,
        signals,
        root,
        view,
        printer,
    } = ctx;
    let symbols = crate::kview::KernelSymbols::new(view);
    let symbols: &dyn ktrace_printer::Symbolizer = &symbols;
    let group = sess.name().to_string();
    let stacks = checked.keys.contains(&KeySpec::Stack);
    let funcs: HashMap<String, String> = probes
        .iter()
        .map(|p| (format!("{}/{}", p.system, p.event()), func_of(p)))
        .collect();
    let kernel_returns = probes.iter().any(|p| is_return(p) && !p.kind().is_uprobe());
    let prom = printer.metrics.is_some();
    let state = user_state(job, &checked, &probes, prom, max_keys);
    let state = Rc::new(RefCell::new(state));
    let mut sink = AggSink::new(Rc::clone(&state), symbols)
        .with_funcs(funcs)
        .with_stacks(stacks)
        .with_wanted(wanted(&checked, job))
        .with_function_tracer(globs.is_some())
        .with_processes(true);
    let live_ctx = live::Live {
        args,
        root,
        view,
        signals,
    };
    let setup = match globs {
        Some(g) => live::setup_function(&live_ctx, sess, g, stacks).map(|(r, funcs)| {
            live::say_functions("counting", &funcs, g);
            r
        }),
        None => live::setup_built(
            &live_ctx,
            sess,
            probes,
            live::Beside {
                stacks,
                events: &[],
            },
        ),
    };
    let mut run = match setup {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    let misses = || -> Option<u64> {
        if !kernel_returns {
            return None;
        }
        let p = ktrace_tracefs::profile::read_group(root, &group).ok()?;
        Some(p.iter().filter_map(|x| x.misses).sum())
    };
    let deadline = args.deadline();
    let mut next_print = printer.interval.map(|i| Instant::now() + i);
    let mut next_publish = Instant::now();
    let mut warned = false;
    let mut tick = || -> io::Result<()> {
        let now = Instant::now();
        if !warned && state.borrow().overflowed() {
            warned = true;
            say_overflow(max_keys);
        }
        if prom && now >= next_publish {
            let mut st = state.borrow_mut();
            if let Some(t) = &mut st.total {
                printer.publish(&t.report(misses()));
            }
            next_publish = now + Duration::from_millis(500);
        }
        if next_print.is_some_and(|n| now >= n) {
            let mut st = state.borrow_mut();
            let r = st.agg.report(misses());
            st.agg.reset();
            drop(st);
            printer.print(&r)?;
            next_print = printer.interval.map(|i| now + i);
        }
        Ok(())
    };
    let (mut stop, mut error) =
        live::stream_loop_ticking(args, signals, deadline, &mut run, &mut sink, &mut tick);
    let end = live::finish(&mut run, &mut sink, &mut stop, &mut error);
    {
        let mut st = state.borrow_mut();
        if !warned && st.overflowed() {
            say_overflow(max_keys);
        }
        if let Some(t) = &mut st.total {
            printer.publish(&t.report(misses()));
        }
        if !matches!(stop, Stop::OutputClosed | Stop::OutputFailed) {
            let r = st.agg.report(misses());
            let _ = printer.print(&r);
        }
    }
    live::conclude(run, end, stop, error, None, "stdout")
}
