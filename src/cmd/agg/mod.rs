//! What `ktrace count`, `ktrace hist` and `ktrace latency` share: their
//! common options, the checks of keys and fields against the probes'
//! fields (before anything is written), the choice of engine — the
//! kernel's hist triggers and synthetic events where the instance's README
//! lists them and the kernel can key as asked, else ktrace's own
//! aggregation of the decoded stream, with the reason said — and the run:
//! per-interval blocks with their time, the final result on Ctrl-C, JSON,
//! Prometheus.
//!
//! By concern: the flags ([`args`]), the probes' checks ([`probes`]),
//! `count`'s route ([`route`]), the engine's choice ([`engine`]), the
//! kernel engine's plan ([`kplan`]) and run ([`kernel_run`]), the user
//! engine's run ([`user_run`]), where reports go ([`output`]); [`run`]
//! wires them.
//!
//! The lifecycle (probes, instance, pid lists, teardown on every exit) is
//! crate::live's; the aggregation, its stream sink, the kernel's trigger
//! text and the rendering are ktrace-aggregate's. The three command
//! modules only turn their arguments into a [`Job`].

mod args;
mod engine;
mod kernel_run;
mod kplan;
mod output;
mod probes;
mod route;
mod user_run;

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use ktrace_aggregate::server::MetricsServer;
use ktrace_aggregate::sink::FUNCTION_EVENT;
use ktrace_aggregate::{Key, KeySpec, KeyValue};
use ktrace_symbols::KernelView;

pub use args::{Common, EngineChoice, Job, Route, scale, unit};
pub(crate) use route::bare_glob;
pub(crate) use user_run::count_recording_by_stack;

use output::Printer;
use probes::Checked;

use crate::live::RunArgs;
use crate::session::{self, Signals};

/// What either engine's run takes from the command besides its plan: the
/// run's options, the signals caught, tracefs, the kernel view and where
/// reports go.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    args: &'a RunArgs,
    signals: &'a Signals,
    root: &'a Path,
    view: &'a KernelView,
    printer: &'a Printer,
}

/// Runs one of the three commands: `defs` are the probe specs (for latency
/// already the entry and return of each function).
pub fn run(defs: Vec<String>, job: Job, common: &Common) -> anyhow::Result<ExitCode> {
    let signals = Signals::catch()?;
    let root = session::open_tracefs()?;
    let view = KernelView::running(Some(&root));
    let sess = common.run.session(&root)?;
    let globs = match &job {
        Job::Count { by, route, .. } => route::function_route(&defs, by, common, *route, &root)?,
        _ => None,
    };
    let (probes, checked) = match &globs {
        Some(_) => {
            let Job::Count { by, .. } = &job else {
                bail!("the function tracer counts only (internal)");
            };
            let keys = KeySpec::parse_all(by, FUNCTION_EVENT, &[])?;
            (
                Vec::new(),
                Checked {
                    keys,
                    pairs: Vec::new(),
                },
            )
        }
        None => {
            let probes = crate::resolve::build(&sess, &defs, common.run.pid, &view)?;
            let checked = probes::check(&job, &probes, sess.name())?;
            (probes, checked)
        }
    };
    let group = sess.name().to_string();
    // What the README says of hist triggers: the view's one reading of it
    // (the definitions' checks read it there too).
    let features = view.features().map(|f| f.hist).unwrap_or_default();
    let kplan = engine::choose(
        &job,
        &checked,
        &probes,
        &group,
        &features,
        common,
        globs.is_some(),
    )?;
    let (metrics, server) = serve(common)?;
    let series = prom_series(&checked, &probes);
    let printer = printer(&job, common, metrics, series);
    let ctx = Ctx {
        args: &common.run,
        signals: &signals,
        root: &root,
        view: &view,
        printer: &printer,
    };
    let code = match kplan {
        Some((kp, table_entries)) => kernel_run::run_kernel(sess, probes, kp, table_entries, ctx),
        None => user_run::run_user(
            sess,
            probes,
            globs.as_deref(),
            &job,
            checked,
            usize::try_from(common.max_keys).unwrap_or(usize::MAX),
            ctx,
        ),
    };
    if let Some(s) = server {
        s.stop();
    }
    code
}

/// The Prometheus text and its server, with `--prometheus` (said on
/// stderr, with a warning when it serves every network).
#[allow(clippy::type_complexity)]
fn serve(common: &Common) -> anyhow::Result<(Option<Arc<Mutex<String>>>, Option<MetricsServer>)> {
    let metrics = common
        .prometheus
        .map(|_| Arc::new(Mutex::new(String::new())));
    let server = match (common.prometheus, &metrics) {
        (Some(addr), Some(m)) => {
            let m = Arc::clone(m);
            let s = MetricsServer::start(addr, move || {
                m.lock().unwrap_or_else(|p| p.into_inner()).clone()
            })
            .with_context(|| format!("cannot serve Prometheus metrics on {addr}"))?;
            crate::eline!(
                "ktrace: Prometheus metrics at http://{}/metrics",
                s.local_addr()
            );
            if addr.ip().is_unspecified() {
                crate::say!(
                    "warning: {} serves the metrics to every network this machine is on, \
                     unauthenticated: they hold what the probes saw (task names, traced strings, \
                     stacks); bind 127.0.0.1 or a private address to keep them local",
                    s.local_addr()
                );
            }
            Some(s)
        }
        _ => None,
    };
    Ok((metrics, server))
}

/// Where the job's reports go, as the options say.
fn printer(
    job: &Job,
    common: &Common,
    metrics: Option<Arc<Mutex<String>>>,
    series: Vec<Key>,
) -> Printer {
    Printer {
        json: common.json,
        folded: matches!(job, Job::Count { folded: true, .. }),
        width: output::bar_width(common.width),
        top: match job {
            Job::Count { top, .. } => *top,
            _ => None,
        },
        field: match job {
            Job::Hist { field, .. } => Some(field.clone()),
            _ => None,
        },
        interval: common.interval.map(Duration::from_secs_f64),
        metrics,
        series,
    }
}

/// The Prometheus series known before any hit: (probe, function) of each
/// probe (of each entry probe for latency), when those are the series'
/// only keys (no `--by` but `func`); else none (the other keys' values
/// come with the hits).
fn prom_series(checked: &Checked, probes: &[crate::session::Probe]) -> Vec<Key> {
    if checked.keys.iter().any(|k| *k != KeySpec::Func) {
        return Vec::new();
    }
    let of = |p: &crate::session::Probe| {
        vec![
            KeyValue::Str(p.event().to_string()),
            KeyValue::Str(probes::func_of(p)),
        ]
    };
    if checked.pairs.is_empty() {
        probes.iter().map(of).collect()
    } else {
        checked.pairs.iter().map(|(e, _)| of(&probes[*e])).collect()
    }
}
