//! The choice of engine: the kernel's hist triggers and synthetic events
//! where `--engine` allows, the instance's README lists them and the kernel
//! can key as asked, their tables sized within the kernel's budget; else
//! ktrace's own aggregation of the decoded stream, with the reason said
//! ([`choose`]).
//!
//! Decides only, before anything is written: the plans are
//! [`super::kplan`]'s, the runs [`super::kernel_run`]'s and
//! [`super::user_run`]'s.

use anyhow::bail;
use ktrace_aggregate::kernel::{Features, Step};

use super::kplan::{self, KPlan};
use super::probes::Checked;
use super::{Common, EngineChoice, Job};
use crate::session::Probe;

/// The kernel engine's plan and its tables' size (said in its reports as
/// max_keys), or `None` for the user engine. `function` (the function
/// tracer counts) leaves the kernel engine out. `--engine kernel` when the
/// kernel cannot do the job is an error.
pub(super) fn choose(
    job: &Job,
    checked: &Checked,
    probes: &[Probe],
    group: &str,
    features: &Features,
    common: &Common,
    function: bool,
) -> anyhow::Result<Option<(KPlan, usize)>> {
    let planned = match common.engine {
        EngineChoice::User => None,
        _ if function => None,
        _ => Some(kplan::plan(
            job,
            checked,
            probes,
            group,
            features,
            &common.run,
            common.prometheus.is_some(),
        )?),
    };
    Ok(match (common.engine, planned) {
        (EngineChoice::User, _) | (_, None) => None,
        (EngineChoice::Kernel, Some(Err(u))) => {
            bail!("the kernel engine cannot do this: {}", u.reason)
        }
        (_, Some(Ok(mut p))) => {
            let (size, over) = kplan::fit_tables(&mut p, common.max_keys);
            if over {
                crate::eline!(
                    "ktrace: {} hist tables of {size} entries each (the kernel allocates them \
                     up front); keys beyond that are counted as dropped",
                    p.steps()
                        .iter()
                        .filter(|s| matches!(s, Step::Trigger { .. }))
                        .count()
                );
            }
            Some((p, size))
        }
        (_, Some(Err(u))) => {
            crate::eline!("ktrace: aggregating in ktrace (user engine): {}", u.reason);
            None
        }
    })
}
