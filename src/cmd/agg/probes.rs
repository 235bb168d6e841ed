//! The probes as the aggregation sees them — their fields, function,
//! place, entry/return pairs — and the check of `--by` keys and the
//! histogram's field against every probe they apply to ([`check`]), before
//! anything is written to the kernel.
//!
//! Not the probes' parsing or creation (crate::resolve, crate::session).

use anyhow::bail;
use ktrace_aggregate::{FieldInfo, FieldKind, KeySpec, kernel};

use super::Job;
use crate::session::Probe;

/// The fields of a probe as the aggregation sees them (arrays left out).
pub(super) fn fields_of(p: &Probe) -> Vec<FieldInfo> {
    use ktrace_probe::types::BaseType;
    p.def
        .args
        .iter()
        .filter(|a| a.ty.count.is_none())
        .map(|a| {
            let kind = match a.ty.base {
                BaseType::String | BaseType::UString | BaseType::SymStr => FieldKind::String,
                BaseType::S(_) => FieldKind::Signed,
                _ => FieldKind::Unsigned,
            };
            FieldInfo::new(&a.name, kind)
        })
        .collect()
}

/// The function a probe is on: the kernel symbol; for a uprobe named by
/// ktrace (`p_SYMBOL`, `r_SYMBOL`), the symbol; else the event's name.
pub(super) fn func_of(p: &Probe) -> String {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe {
            place: ktrace_probe::ast::KprobePlace::Symbol { symbol, .. },
            ..
        } => symbol.clone(),
        ktrace_probe::ProbeKind::Uprobe { .. } if p.def.auto_event => p
            .event()
            .strip_prefix("p_")
            .or_else(|| p.event().strip_prefix("r_"))
            .unwrap_or(p.event())
            .to_string(),
        _ => p.event().to_string(),
    }
}

/// Whether a probe is a return probe.
pub(super) fn is_return(p: &Probe) -> bool {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe { is_return, .. }
        | ktrace_probe::ProbeKind::Uprobe { is_return, .. } => *is_return,
        ktrace_probe::ProbeKind::Eprobe { .. } => false,
    }
}

/// Where a probe is, return or not (pairs entry and return probes).
fn place_of(p: &Probe) -> String {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe { place, .. } => format!("{place:?}"),
        ktrace_probe::ProbeKind::Uprobe { path, offset, .. } => format!("{path}:{offset}"),
        ktrace_probe::ProbeKind::Eprobe { system, event, .. } => format!("{system}.{event}"),
    }
}

/// The checked input: probes (built, nothing written), keys, and for
/// latency the entry/return pairs (indexes into the probes).
pub(super) struct Checked {
    pub(super) keys: Vec<KeySpec>,
    /// (entry, return) probe indexes.
    pub(super) pairs: Vec<(usize, usize)>,
}

/// Checks keys and the field against every probe they apply to.
pub(super) fn check(job: &Job, probes: &[Probe], group: &str) -> anyhow::Result<Checked> {
    let ev = |p: &Probe| format!("{group}/{}", p.event());
    match job {
        Job::Count { by, .. } => {
            let mut keys = Vec::new();
            for p in probes {
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
            }
            Ok(Checked {
                keys,
                pairs: Vec::new(),
            })
        }
        Job::Hist { field, by, .. } => {
            let mut keys = Vec::new();
            for p in probes {
                kernel::check_hist_field(field, &ev(p), &fields_of(p))?;
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
            }
            Ok(Checked {
                keys,
                pairs: Vec::new(),
            })
        }
        Job::Latency { by, .. } => {
            let mut pairs = Vec::new();
            let mut keys = Vec::new();
            for (i, p) in probes.iter().enumerate() {
                if is_return(p) {
                    continue;
                }
                let place = place_of(p);
                let Some(r) = probes
                    .iter()
                    .position(|q| is_return(q) && place_of(q) == place)
                else {
                    bail!("no return probe for {} (internal)", p.event());
                };
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
                pairs.push((i, r));
            }
            Ok(Checked { keys, pairs })
        }
    }
}
