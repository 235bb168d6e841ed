//! How `ktrace count` attaches to its functions: the function tracer in
//! ktrace's own instance (one glob write) when it can do the job, else one
//! kprobe per function ([`function_route`], with the reason said), and
//! what a bare function name or glob is ([`bare_glob`], which `ktrace
//! trace` asks too).
//!
//! Decides only: setting the tracer up is crate::live's.

use std::path::Path;

use anyhow::bail;

use super::{Common, EngineChoice, Route};

/// The keys the function tracer's records can give (no probe fields; the
/// stack with its `func_stack_trace` option).
const FUNCTION_KEYS: [&str; 6] = ["func", "comm", "pid", "tid", "cpu", "stack"];

/// A bare kernel function name or glob (`vfs_*`, `ext4_?et*`, `tcp_v4_rcv`):
/// the characters of symbol names and the kernel's glob (`*`, `?`), and
/// nothing of the probe syntax (no place, argument, `%return`, path).
pub(crate) fn bare_glob(def: &str) -> bool {
    !def.is_empty()
        && def.len() <= 256
        && !def.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && def
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '*' | '?' | '.'))
        && def.chars().any(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why the function tracer cannot do this count (`None`: it can), before
/// asking the kernel.
fn function_route_refusal(defs: &[String], by: &[String], common: &Common) -> Option<String> {
    if let Some(d) = defs.iter().find(|d| !bare_glob(d)) {
        return Some(format!(
            "{d:?} is not a bare function name or glob (arguments, return probes, offsets, \
             user probes and events need probes)"
        ));
    }
    if let Some(k) = by.iter().find(|k| !FUNCTION_KEYS.contains(&k.as_str())) {
        return Some(format!(
            "--by {k} needs a probe (the function tracer gives func, comm, pid, tid, cpu, stack)"
        ));
    }
    if common.engine == EngineChoice::Kernel {
        return Some("--engine kernel needs probe events for its hist triggers".into());
    }
    if common.run.filter.is_some() {
        return Some("-f filters probe events".into());
    }
    if common.run.trigger.is_some() {
        return Some("--trigger applies to probe events".into());
    }
    None
}

/// The route of `ktrace count`: the function tracer's globs, or `None`
/// for per-function probes; says which and why on stderr. `--route
/// ftrace` when the function tracer cannot do the job is an error, before
/// anything is written.
pub(super) fn function_route(
    defs: &[String],
    by: &[String],
    common: &Common,
    route: Route,
    root: &Path,
) -> anyhow::Result<Option<Vec<String>>> {
    if route == Route::Kprobe {
        crate::eline!("ktrace: route: one kprobe per function (--route kprobe)");
        return Ok(None);
    }
    let named = |d: &String| d.split_whitespace().next().is_some_and(bare_glob);
    if route == Route::Auto && !defs.iter().any(named) {
        // no kernel function named (user probes, events): nothing to choose
        return Ok(None);
    }
    let refusal = function_route_refusal(defs, by, common).or_else(|| {
        (!ktrace_tracefs::features::function_tracer(root)).then(|| {
            "this kernel offers no function tracer (no `function` in available_tracers)".into()
        })
    });
    match (refusal, route) {
        (None, _) => {
            crate::eline!(
                "ktrace: route: the function tracer in ktrace's own instance (one glob write \
                 for all the functions of available_filter_functions that match; \
                 --route kprobe for one kprobe per function)"
            );
            let mut globs = defs.to_vec();
            globs.dedup();
            Ok(Some(globs))
        }
        (Some(why), Route::Ftrace) => bail!("--route ftrace cannot do this: {why}"),
        (Some(why), _) => {
            crate::eline!("ktrace: route: one kprobe per function: {why}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_globs_are_function_names_and_globs_only() {
        for ok in [
            "vfs_*",
            "ext4_?et*",
            "tcp_v4_rcv",
            "*sync*",
            "foo.isra.0",
            "_x",
        ] {
            assert!(bare_glob(ok), "{ok}");
        }
        for bad in [
            "",
            "*",
            "vfs_read a=%di",
            "vfs_read%return",
            "vfs_read+4",
            "r:vfs_read",
            "/bin/true:main",
            "sched:sched_switch",
            "0abc",
            "vfs_\nread",
            "vfs_[ab]*",
        ] {
            assert!(!bare_glob(bad), "{bad:?}");
        }
    }
}
