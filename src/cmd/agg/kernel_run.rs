//! The kernel engine's run: its plan's synthetic events and hist
//! triggers written in the session's instance ([`Written`]) and removed on
//! every exit, the tables read back per interval and at the end
//! ([`read_kernel`]), and someone else's changes to them looked for and
//! said ([`kernel_disturbance`]).
//!
//! The lifecycle (probes, instance, pid lists, teardown) is crate::live's;
//! the plan is [`super::kplan`]'s, the tables' parsing ktrace-aggregate's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use ktrace_aggregate::kernel::{self, Step};
use ktrace_aggregate::{LatencyReport, Report, khist};
use ktrace_tracefs::{DynEvents, Instance};

use super::Ctx;
use super::kplan::{KPlan, add_filters};
use super::output::Printer;
use crate::live::{self, RunArgs, Stop};
use crate::session::{Probe, Session, Signals};

/// Each event's hist file, read once; our tables in it found by command.
/// With `gone_is_empty` (someone removed triggers of ours: their tables
/// went with them) a missing file or table reads as empty.
struct HistFiles<'a> {
    inst: &'a Instance,
    gone_is_empty: bool,
    files: HashMap<(String, String), Vec<khist::HistTable>>,
}

impl HistFiles<'_> {
    /// The table of trigger `cmd` on `system/event`.
    fn table(&mut self, system: &str, event: &str, cmd: &str) -> anyhow::Result<khist::HistTable> {
        let key = (system.to_string(), event.to_string());
        if !self.files.contains_key(&key) {
            let tables = match self.inst.read_hist(system, event) {
                Ok(text) => khist::parse_hist(&text)?,
                Err(_) if self.gone_is_empty => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            self.files.insert(key.clone(), tables);
        }
        let found = self
            .files
            .get(&key)
            .and_then(|t| kernel::find_table(t, cmd))
            .cloned();
        match found {
            Some(t) => Ok(t),
            None if self.gone_is_empty => Ok(khist::HistTable {
                trigger: cmd.to_string(),
                keys: khist::trigger_keys(cmd).unwrap_or_default(),
                entries: Vec::new(),
                hits: 0,
                n_entries: 0,
                dropped: 0,
            }),
            None => anyhow::bail!("the kernel shows no table of ours on {system}/{event}"),
        }
    }

    /// The table a plan names.
    fn of(&mut self, t: &kernel::TableRef) -> anyhow::Result<khist::HistTable> {
        self.table(&t.system, &t.event, &t.command)
    }
}

/// The triggers among `steps`: (system, event, command).
fn triggers(steps: &[Step]) -> Vec<(String, String, String)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Trigger {
                system,
                event,
                command,
            } => Some((system.clone(), event.clone(), command.clone())),
            Step::Synthetic { .. } => None,
        })
        .collect()
}

/// What the kernel's tables say, totals since the triggers went in: the
/// report as asked, and with `prom` the one Prometheus serves (keyed by
/// function first; latency in nanoseconds). With `gone_is_empty` (someone
/// removed triggers of ours: their tables went with them) a missing table
/// reads as empty, so what is left is still reported.
fn read_kernel(
    kp: &KPlan,
    inst: &Instance,
    root: &Path,
    group: &str,
    prom: bool,
    gone_is_empty: bool,
) -> anyhow::Result<(Report, Option<Report>)> {
    let mut files = HistFiles {
        inst,
        gone_is_empty,
        files: HashMap::new(),
    };
    Ok(match kp {
        KPlan::Count(p) => {
            let mut ts = Vec::new();
            for (sy, ev, cmd) in triggers(&p.plan.setup) {
                ts.push(files.table(&sy, &ev, &cmd)?);
            }
            let ts: Vec<&khist::HistTable> = ts.iter().collect();
            let by_func = if prom {
                Some(Report::Count(p.by_func().report(&ts)?))
            } else {
                None
            };
            (Report::Count(p.report(&ts)?), by_func)
        }
        KPlan::Hist(p) => {
            let (sy, ev) = &p.read;
            let cmd = p
                .main_command()
                .context("no trigger in the plan (internal)")?;
            let t = files.table(sy, ev, cmd)?;
            let for_prom = if prom {
                let pt = match &p.prom {
                    Some(r) => files.of(r)?,
                    None => t.clone(),
                };
                Some(Report::Hist(p.prom_report(&pt)?))
            } else {
                None
            };
            (Report::Hist(p.report(&t)?), for_prom)
        }
        KPlan::Latency(ps) => {
            let (all, all_prom) = read_latency(ps, &mut files, root, group, prom)?;
            (Report::Latency(all), all_prom.map(Report::Latency))
        }
    })
}

/// [`read_kernel`] of latency plans: every function's report as one, and
/// with `prom` the one Prometheus serves.
fn read_latency(
    ps: &[kernel::LatencyPlan],
    files: &mut HistFiles<'_>,
    root: &Path,
    group: &str,
    prom: bool,
) -> anyhow::Result<(LatencyReport, Option<LatencyReport>)> {
    let profile = ktrace_tracefs::profile::read_group(root, group).unwrap_or_default();
    let mut all: Option<LatencyReport> = None;
    let mut all_prom: Option<LatencyReport> = None;
    for p in ps {
        let main = files.of(&p.main)?;
        let min = files.of(&p.min)?;
        // The returns that reached the return trigger (after the
        // pid lists and the filter, unlike kprobe_profile's hits):
        // its own table's hit count.
        let ret_t = files.of(&p.ret)?;
        let drops = kernel::ChainDrops {
            entry: files.of(&p.entry)?.dropped,
            ret: ret_t.dropped,
            // (a conversion shared by several functions: counted once)
            derive: match &p.derive {
                Some(d) if p.owns_shared() => files.of(d)?.dropped,
                _ => 0,
            },
        };
        let misses = profile
            .iter()
            .find(|x| x.event == p.return_event.1)
            .and_then(|x| x.misses);
        let r = p.report(&main, Some(&min), Some(ret_t.hits), misses, drops)?;
        all = Some(merge_latency(all, r));
        if prom {
            let t = files.of(p.prom_table())?;
            let r = p.prom_report(&t, Some(ret_t.hits), misses, drops)?;
            all_prom = Some(merge_latency(all_prom, r));
        }
    }
    Ok((all.context("no function to time")?, all_prom))
}

/// Two functions' latency reports as one.
fn merge_latency(a: Option<LatencyReport>, r: LatencyReport) -> LatencyReport {
    let Some(mut a) = a else {
        return r;
    };
    let mut groups = std::mem::take(&mut a.hist.groups);
    groups.extend(r.hist.groups);
    a.hist.set_groups(groups);
    a.hist.dropped += r.hist.dropped;
    a.unmatched_returns += r.unmatched_returns;
    a.kretprobe_misses = match (a.kretprobe_misses, r.kretprobe_misses) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    a
}

/// What someone else did to a kernel-engine session that makes its
/// numbers short: the instance or the probes' group gone, one of our
/// triggers removed or paused, the instance's pid lists rewritten. (Not
/// a write of `0` to the events' `enable`: a hist trigger holds its event
/// in soft mode, and the kernel keeps counting — measured on 6.1, 6.12 and
/// 7.2.) `triggers` are the commands as written. One line per kind.
fn kernel_disturbance(run: &live::KernelRun, triggers: &[Step]) -> Vec<String> {
    if let Some(m) = run.sess.disturbance(true) {
        return vec![m];
    }
    let mut removed = Vec::new();
    let mut paused = Vec::new();
    for step in triggers {
        let Step::Trigger {
            system,
            event,
            command,
        } = step
        else {
            continue;
        };
        let Ok(text) = run.inst.read_triggers(system, event) else {
            removed.push(format!("{system}/{event}"));
            continue;
        };
        match kernel::trigger_state(&text, command) {
            kernel::TriggerState::Active => {}
            kernel::TriggerState::Paused => paused.push(format!("{system}/{event}")),
            kernel::TriggerState::Missing => removed.push(format!("{system}/{event}")),
        }
    }
    let mut parts = Vec::new();
    if !removed.is_empty() {
        parts.push(format!(
            "ktrace's hist triggers were removed by someone else while aggregating: {}",
            removed.join(", ")
        ));
    }
    if !paused.is_empty() {
        parts.push(format!(
            "ktrace's hist triggers were paused by someone else while aggregating: {}",
            paused.join(", ")
        ));
    }
    if let Some(m) = live::kernel_pids_disturbed(run) {
        parts.push(m);
    }
    parts
}

/// Warns of what [`kernel_disturbance`] finds that was not said yet.
fn say_disturbance(found: Vec<String>, said: &mut Vec<String>) {
    for m in found {
        if !said.contains(&m) {
            crate::say!("warning: {m}; the numbers above are short");
            said.push(m);
        }
    }
}

/// What the kernel engine wrote, so exactly that is removed (in reverse).
struct Written {
    dynev: DynEvents,
    /// No `dynamic_events`: synthetic events go to `synthetic_events`.
    legacy: bool,
    steps: RefCell<Vec<Step>>,
}

impl Written {
    fn new(root: &Path) -> Written {
        let dynev = DynEvents::new(root);
        Written {
            legacy: !dynev.uses_dynamic_events(),
            dynev,
            steps: RefCell::new(Vec::new()),
        }
    }

    /// Writes the plan in order, the run's filter added to its triggers
    /// first ([`add_filters`]), noting each step written.
    fn install(
        &self,
        kp: &mut KPlan,
        group: &str,
        inst: &Instance,
        user: Option<&str>,
        own: &str,
    ) -> anyhow::Result<()> {
        add_filters(kp, group, user, own);
        let steps = kp.steps();
        let mut progress = crate::progress::Progress::new(
            "writing hist triggers and synthetic events",
            steps.len(),
        );
        for step in steps {
            match step {
                Step::Synthetic { name, fields } => self
                    .dynev
                    .create_synthetic(name, fields, self.legacy)
                    .with_context(|| format!("synthetic event {name}"))?,
                Step::Trigger {
                    system,
                    event,
                    command,
                } => inst
                    .add_trigger(system, event, command)
                    .with_context(|| format!("hist trigger on {system}/{event}: {command}"))?,
            }
            self.steps.borrow_mut().push(step.clone());
            progress.step(1);
        }
        Ok(())
    }

    /// Removes what was written, in reverse; a trigger someone else
    /// removed already (reported) is nothing to undo. The first error.
    ///
    /// The triggers go by one truncation of each event's trigger file
    /// (the kernel's `unreg_all`), events in the reverse order of the
    /// plan, and only the triggers left after that by `!TRIGGER`: a
    /// `!TRIGGER` write makes the kernel parse the whole trigger again,
    /// filter included, and free that copy as well as the trigger, each
    /// free waiting for a grace period (7.2 under TCG: 60 triggers of
    /// latency chains removed in 4.26 s by `!`, 3.25 s by truncation).
    /// The events are the session's own in its own instance. The kernel
    /// leaves a file whole while another trigger uses one of its
    /// variables, which the order avoids and the second pass covers.
    fn remove(&self, inst: &Instance) -> anyhow::Result<()> {
        let steps: Vec<Step> = self.steps.borrow_mut().drain(..).rev().collect();
        let mut progress = crate::progress::Progress::new(
            "removing hist triggers and synthetic events",
            steps.len(),
        );
        let mut events: Vec<(&str, &str)> = Vec::new();
        for step in &steps {
            if let Step::Trigger { system, event, .. } = step
                && !events.contains(&(system.as_str(), event.as_str()))
            {
                events.push((system, event));
            }
        }
        for (system, event) in &events {
            let _ = inst.clear_triggers(system, event);
            let ours = steps
                .iter()
                .filter(|s| matches!(s, Step::Trigger { system: sy, event: ev, .. } if sy == system && ev == event))
                .count();
            progress.step(ours);
        }
        // what each event's trigger file holds now, read once
        let mut left: HashMap<(&str, &str), Option<String>> = HashMap::new();
        let mut first_err = None;
        for step in &steps {
            let r = match step {
                Step::Synthetic { name, .. } => {
                    let r = self.dynev.destroy_synthetic(name);
                    progress.step(1);
                    r
                }
                Step::Trigger {
                    system,
                    event,
                    command,
                } => match left
                    .entry((system, event))
                    .or_insert_with(|| inst.read_triggers(system, event).ok())
                {
                    Some(text)
                        if kernel::trigger_state(text, command)
                            == kernel::TriggerState::Missing =>
                    {
                        Ok(())
                    }
                    _ => inst.remove_trigger(system, event, command).or_else(|e| {
                        match inst.read_triggers(system, event) {
                            Ok(text)
                                if kernel::trigger_state(&text, command)
                                    == kernel::TriggerState::Missing =>
                            {
                                Ok(())
                            }
                            _ => Err(e),
                        }
                    }),
                },
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        progress.finish();
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// What someone else did to what was written ([`kernel_disturbance`]).
    fn disturbance(&self, run: &live::KernelRun) -> Vec<String> {
        kernel_disturbance(run, &self.steps.borrow())
    }
}

/// The reading side of a kernel-engine run: its plan's tables, read back
/// and printed.
struct Tables<'a> {
    kp: &'a KPlan,
    root: &'a Path,
    group: &'a str,
    printer: &'a Printer,
    /// The table size, said in the reports as max_keys.
    table_entries: usize,
}

impl Tables<'_> {
    /// Whether Prometheus is served.
    fn prom(&self) -> bool {
        self.printer.metrics.is_some()
    }

    /// [`read_kernel`], the report sized.
    fn read(
        &self,
        inst: &Instance,
        gone_is_empty: bool,
    ) -> anyhow::Result<(Report, Option<Report>)> {
        let (total, by_func) = read_kernel(
            self.kp,
            inst,
            self.root,
            self.group,
            self.prom(),
            gone_is_empty,
        )?;
        Ok((total.sized(self.table_entries), by_func))
    }
}

/// What a kernel-engine run's loop left: how it stopped, why it failed,
/// the last totals printed and someone else's changes said.
struct Watched {
    stop: Stop,
    failure: Option<anyhow::Error>,
    printed: Option<Report>,
    disturbed: Vec<String>,
}

/// Waits for the run's end, looking for someone else's changes every
/// second (one read of each trigger file: every 10 s beyond 64 of them),
/// publishing the totals each second and printing each interval.
fn watch(
    run: &mut live::KernelRun,
    args: &RunArgs,
    signals: &Signals,
    tables: &Tables<'_>,
    written: &Written,
) -> Watched {
    let printer = tables.printer;
    let deadline = args.deadline();
    let prom = tables.prom();
    let n_triggers = written
        .steps
        .borrow()
        .iter()
        .filter(|s| matches!(s, Step::Trigger { .. }))
        .count();
    let check_every = Duration::from_secs(if n_triggers <= 64 { 1 } else { 10 });
    let mut next_check = Instant::now() + check_every;
    let mut next_publish = Instant::now() + Duration::from_secs(1);
    let mut next_print = printer.interval.map(|i| Instant::now() + i);
    let mut w = Watched {
        stop: Stop::ReadFailed,
        failure: None,
        printed: None,
        disturbed: Vec::new(),
    };
    w.stop = loop {
        let now = Instant::now();
        let mut wake = next_check;
        if prom {
            wake = wake.min(next_publish);
        }
        if let Some(n) = next_print {
            wake = wake.min(n);
        }
        let wait = wake.saturating_duration_since(now);
        let stop = match live::kernel_wait(run, args, signals, deadline, wait) {
            Ok(s) => s,
            Err(e) => {
                w.failure = Some(e);
                break Stop::ReadFailed;
            }
        };
        if let Some(stop) = stop {
            break stop;
        }
        let now = Instant::now();
        if now >= next_check {
            say_disturbance(written.disturbance(run), &mut w.disturbed);
            next_check = now + check_every;
        }
        let publish = prom && now >= next_publish;
        let print = next_print.is_some_and(|n| now >= n);
        if !publish && !print {
            continue;
        }
        let (total, by_func) = match tables.read(&run.inst, !w.disturbed.is_empty()) {
            Ok(r) => r,
            Err(e) => {
                w.failure = Some(e);
                break Stop::ReadFailed;
            }
        };
        if let Some(p) = &by_func {
            printer.publish(p);
            next_publish = now + Duration::from_secs(1);
        }
        if print {
            let block = match &w.printed {
                Some(p) => total.since(p),
                None => total.clone(),
            };
            if printer.print(&block).is_err() {
                break Stop::OutputClosed;
            }
            w.printed = Some(total);
            next_print = printer.interval.map(|i| Instant::now() + i);
        }
    };
    w
}

/// Runs the kernel engine's plan `kp` over the session's probes, its
/// tables `table_entries` each.
pub(super) fn run_kernel(
    sess: Session,
    probes: Vec<Probe>,
    mut kp: KPlan,
    table_entries: usize,
    ctx: Ctx<'_>,
) -> anyhow::Result<ExitCode> {
    let Ctx {
        args,
        signals,
        root,
        view,
        printer,
    } = ctx;
    let group = sess.name().to_string();
    // (latency's synthetic events time entries with common_timestamp)
    let timestamps = matches!(kp, KPlan::Latency(_));
    let written = Written::new(root);
    let mut install = |inst: &Instance, user: Option<&str>, own: &str| {
        written.install(&mut kp, &group, inst, user, own)
    };
    let live_ctx = live::Live {
        args,
        root,
        view,
        signals,
    };
    let mut run = match live::setup_kernel(&live_ctx, sess, probes, timestamps, &mut install) {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    let tables = Tables {
        kp: &kp,
        root,
        group: &group,
        printer,
        table_entries,
    };
    let Watched {
        stop,
        mut failure,
        printed,
        mut disturbed,
    } = watch(&mut run, args, signals, &tables, &written);
    if failure.is_none() {
        // the last look, before our triggers go
        say_disturbance(written.disturbance(&run), &mut disturbed);
    }
    if failure.is_none() && stop != Stop::OutputClosed {
        match tables.read(&run.inst, !disturbed.is_empty()) {
            Ok((total, by_func)) => {
                if let Some(p) = &by_func {
                    printer.publish(p);
                }
                let block = match &printed {
                    Some(p) => total.since(p),
                    None => total,
                };
                let _ = printer.print(&block);
            }
            Err(e) => failure = Some(e),
        }
    }
    let code = live::conclude_kernel(run, stop, &mut |inst| written.remove(inst))?;
    match failure {
        Some(e) => Err(e.context("cannot read the kernel's histograms")),
        None if !disturbed.is_empty() => {
            anyhow::bail!("{}; the numbers above are short", disturbed.join("; "))
        }
        None => Ok(code),
    }
}
