//! The kernel engine's plan for a job ([`KPlan`]): the hist triggers and
//! synthetic events ktrace-aggregate plans for the probes, or why the
//! kernel cannot do it ([`plan`]); the tables sized within what the kernel
//! preallocates ([`fit_tables`]) and the run's filter added to each
//! trigger ([`add_filters`]).
//!
//! Plans only: writing them and reading the tables back is
//! [`super::kernel_run`]'s; the trigger text is ktrace-aggregate's.

use ktrace_aggregate::kernel::{
    self, CountPlan, Features, HistPlan, LatencyPlan, LatencyProbe, ProbeEvent, Step, Unsupported,
};

use super::Job;
use super::probes::{Checked, fields_of, func_of};
use crate::live::RunArgs;
use crate::session::Probe;

/// The kernel engine's plan for the job.
pub(super) enum KPlan {
    Count(CountPlan),
    Hist(HistPlan),
    Latency(Vec<LatencyPlan>),
}

impl KPlan {
    pub(super) fn steps_mut(&mut self) -> Vec<&mut Vec<Step>> {
        match self {
            KPlan::Count(p) => vec![&mut p.plan.setup],
            KPlan::Hist(p) => vec![&mut p.plan.setup],
            KPlan::Latency(ps) => ps.iter_mut().map(|p| &mut p.plan.setup).collect(),
        }
    }

    pub(super) fn steps(&self) -> Vec<&Step> {
        match self {
            KPlan::Count(p) => p.plan.setup.iter().collect(),
            KPlan::Hist(p) => p.plan.setup.iter().collect(),
            KPlan::Latency(ps) => ps.iter().flat_map(|p| &p.plan.setup).collect(),
        }
    }
}

/// The kernel engine's plan, or why not.
pub(super) fn plan(
    job: &Job,
    checked: &Checked,
    probes: &[Probe],
    group: &str,
    f: &Features,
    args: &RunArgs,
    prometheus: bool,
) -> anyhow::Result<Result<KPlan, Unsupported>> {
    let no = |r: &str| Ok(Err(Unsupported { reason: r.into() }));
    if !f.hist {
        return no("this kernel has no hist triggers (its tracefs README lists none)");
    }
    if args.count.is_some() {
        return no("-n counts events in the stream");
    }
    if args.trigger.is_some() {
        return no("--trigger applies to the event stream");
    }
    let event = |p: &Probe| ProbeEvent {
        system: group.to_string(),
        event: p.event().to_string(),
        func: func_of(p),
        fields: fields_of(p),
        user: p.kind().is_uprobe(),
    };
    Ok(match job {
        Job::Count { .. } => {
            let evs: Vec<ProbeEvent> = probes.iter().map(event).collect();
            kernel::plan_count(&evs, &checked.keys, f, None).map(KPlan::Count)
        }
        Job::Hist { field, scale, .. } => {
            if probes.len() != 1 {
                return no(&format!(
                    "the kernel makes one histogram per event and the probe names {} events",
                    probes.len()
                ));
            }
            kernel::plan_hist(
                &event(&probes[0]),
                field,
                *scale,
                &checked.keys,
                f,
                prometheus,
            )?
            .map(KPlan::Hist)
        }
        Job::Latency { scale, unit, .. } => {
            let lps: Vec<LatencyProbe> = checked
                .pairs
                .iter()
                .map(|(e, r)| LatencyProbe {
                    system: group.to_string(),
                    entry_event: probes[*e].event().to_string(),
                    return_event: probes[*r].event().to_string(),
                    func: func_of(&probes[*e]),
                })
                .collect();
            let prefix = |n: usize| ktrace_tracefs::owner::synthetic_name(group, &n.to_string());
            kernel::plan_latencies(&lps, &prefix, *unit, *scale, &checked.keys, f, prometheus)
                .map(KPlan::Latency)
        }
    })
}

/// Hist-table entries all of a run's triggers may have together: the
/// kernel preallocates every entry of a table when the trigger is written
/// (measured on a 6.1 x86_64 guest with 1 GB: 630 tables of 8192 entries,
/// `ktrace count 'ext4_*'`, ran the kernel out of memory).
const TABLE_BUDGET: usize = 65_536;

/// The largest hist table the kernel makes (`TRACING_MAP_BITS_MAX` 17).
const MAX_TABLE: usize = 1 << 17;

/// The size of each table for `--max-keys want`: a power of two from 128
/// (the kernel's least) to [`MAX_TABLE`].
fn table_size(want: u64) -> usize {
    (want.clamp(128, MAX_TABLE as u64) as usize).next_power_of_two()
}

/// Sizes the tables: `want` entries each ([`table_size`]), unless
/// together they would pass [`TABLE_BUDGET`] (or the one table asked
/// for, if larger), in which case each gets an equal share, a power of
/// two from 128. Returns the size each got and whether the budget made
/// them smaller. Keys beyond a table's size are counted by the kernel as
/// dropped, and reported.
pub(super) fn fit_tables(kp: &mut KPlan, want: u64) -> (usize, bool) {
    let shared_by = shared_by(kp);
    let tables: usize = kp
        .steps()
        .into_iter()
        .map(|s| match s {
            Step::Trigger { command, .. } if is_shared(command) => shared_by,
            Step::Trigger { .. } => 1,
            Step::Synthetic { .. } => 0,
        })
        .sum();
    let full = table_size(want);
    let budget = TABLE_BUDGET.max(full);
    let over = tables * full > budget;
    let size = if over {
        let each = (budget / tables.max(1)).max(128);
        (1usize << (usize::BITS - 1 - each.leading_zeros())).clamp(128, full)
    } else {
        full
    };
    let planned = format!(":size={}", kernel::TABLE_SIZE);
    let sized = format!(":size={size}");
    // a table shared by several functions holds the rows of each
    let shared_size = (size * shared_by).next_power_of_two().min(MAX_TABLE);
    let shared_sized = format!(":size={shared_size}");
    for steps in kp.steps_mut() {
        for step in steps.iter_mut() {
            let Step::Trigger { command, .. } = step else {
                continue;
            };
            if command.contains(&planned) && is_shared(command) {
                *command = command.replace(&planned, &shared_sized);
            } else if command.contains(&planned) {
                *command = command.replace(&planned, &sized);
            } else if over && !command.contains(":size=") {
                // right after the keys (the kernel takes attributes in any order)
                let keys_end = command
                    .strip_prefix("hist:keys=")
                    .and_then(|rest| rest.find([':', ' ']))
                    .map(|i| i + "hist:keys=".len());
                match keys_end {
                    Some(i) => command.insert_str(i, &sized),
                    None if command.starts_with("hist:keys=") => command.push_str(&sized),
                    None => {}
                }
            }
        }
    }
    (size, over)
}

/// Whether trigger `command` is a latency table shared by several
/// functions (keyed by their `id` first, [`kernel::plan_latencies`]).
fn is_shared(command: &str) -> bool {
    command.starts_with("hist:keys=id,")
}

/// How many functions share the latency tables of the plan (1: none).
fn shared_by(kp: &KPlan) -> usize {
    match kp {
        KPlan::Latency(ps) if ps.iter().any(|p| is_shared(&p.main.command)) => ps.len(),
        _ => 1,
    }
}

/// Adds the run's filter to the triggers on the session's probes: the
/// user's `-f` and ktrace's own threads left out. A latency's return
/// trigger gets only the latter (the user's fields are the entry's).
pub(super) fn add_filters(kp: &mut KPlan, group: &str, user: Option<&str>, own: &str) {
    let latency = matches!(kp, KPlan::Latency(_));
    for steps in kp.steps_mut() {
        for step in steps.iter_mut() {
            if let Step::Trigger {
                system, command, ..
            } = step
                && system == group
                && !command.contains(" if ")
            {
                let is_return = command.contains("onmatch(");
                let f = match user {
                    Some(u) if !(latency && is_return) => format!("({u}) && {own}"),
                    _ => own.to_string(),
                };
                command.push_str(&format!(" if {f}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_plan(n: usize) -> KPlan {
        let evs: Vec<ProbeEvent> = (0..n)
            .map(|i| ProbeEvent {
                system: "ktrace_p1_s2_n3".into(),
                event: format!("p_f{i}"),
                func: format!("f{i}"),
                fields: vec![],
                user: false,
            })
            .collect();
        let f = Features {
            hist: true,
            max_keys: 3,
            ..Features::default()
        };
        KPlan::Count(kernel::plan_count(&evs, &[], &f, None).unwrap())
    }

    #[test]
    fn many_tables_are_made_smaller() {
        let mut few = count_plan(8);
        assert_eq!(fit_tables(&mut few, 8192), (8192, false));
        let mut many = count_plan(630);
        assert_eq!(fit_tables(&mut many, 8192), (128, true));
        for s in many.steps() {
            let Step::Trigger { command, .. } = s else {
                panic!()
            };
            assert!(
                command.contains(":size=128") && !command.contains("8192"),
                "{command}"
            );
        }
        let mut some = count_plan(20);
        assert_eq!(fit_tables(&mut some, 8192), (2048, true));
        // --max-keys: rounded up to a power of two, within the kernel's
        // limits; one large table is what was asked for
        let mut one = count_plan(1);
        assert_eq!(fit_tables(&mut one, 100_000), (131_072, false));
        assert!(
            matches!(&one.steps()[0], Step::Trigger { command, .. } if command.contains(":size=131072"))
        );
        let mut small = count_plan(2);
        assert_eq!(fit_tables(&mut small, 1000), (1024, false));
        assert_eq!(table_size(1), 128);
        assert_eq!(table_size(u64::MAX), 131_072);
    }

    /// The latency tables 80 functions share hold the rows of each: sized
    /// as 80 of the per-function tables, within the budget.
    #[test]
    fn shared_latency_tables_are_sized_for_every_function() {
        let ps: Vec<LatencyProbe> = (0..80)
            .map(|i| LatencyProbe {
                system: "g".into(),
                entry_event: format!("f{i}"),
                return_event: format!("f{i}_ret"),
                func: format!("f{i}"),
            })
            .collect();
        let f = Features {
            hist: true,
            max_keys: 2,
            constants: true,
            synthetic_dynamic: true,
            onmatch_trace: true,
            ..Features::default()
        };
        let prefix = |n: usize| format!("g__{n}");
        let plans = kernel::plan_latencies(
            &ps,
            &prefix,
            ktrace_aggregate::Unit::Us,
            ktrace_aggregate::Scale::Log2,
            &[],
            &f,
            false,
        )
        .unwrap();
        let mut kp = KPlan::Latency(plans);
        assert_eq!(fit_tables(&mut kp, 8192), (128, true));
        let sizes: Vec<(bool, &str)> = kp
            .steps()
            .into_iter()
            .filter_map(|s| match s {
                Step::Trigger { command, .. } => Some((
                    is_shared(command),
                    command.split(":size=").nth(1)?.split(':').next()?,
                )),
                Step::Synthetic { .. } => None,
            })
            .collect();
        assert_eq!(sizes.iter().filter(|s| s.0).count(), 2);
        assert!(
            sizes
                .iter()
                .all(|s| s.1 == if s.0 { "16384" } else { "128" }),
            "{sizes:?}"
        );
    }

    #[test]
    fn size_goes_after_the_keys_when_absent() {
        let mut kp = KPlan::Count(kernel::CountPlan::clone(match &count_plan(1) {
            KPlan::Count(c) => c,
            _ => unreachable!(),
        }));
        for steps in kp.steps_mut() {
            steps.push(Step::Trigger {
                system: "s".into(),
                event: "e".into(),
                command: "hist:keys=common_pid:ts0=common_timestamp".into(),
            });
            for _ in 0..20 {
                steps.push(steps[0].clone());
            }
        }
        fit_tables(&mut kp, 8192);
        assert!(
            kp.steps()
                .iter()
                .any(|s| matches!(s, Step::Trigger { command, .. }
            if command == "hist:keys=common_pid:size=2048:ts0=common_timestamp"))
        );
    }
}
