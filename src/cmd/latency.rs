//! `ktrace latency`: how long functions take, from an entry and a return
//! probe on each, paired per thread with a stack of open entries (nested
//! and recursive calls pair correctly; unmatched returns and kretprobe
//! misses are reported, never folded in). In the kernel through a
//! synthetic event fed by `onmatch()` where it can, else by ktrace from
//! the event stream. The run and its output are crate::cmd::agg's.

use std::process::ExitCode;

use anyhow::bail;
use ktrace_aggregate::Unit;

use super::agg::{self, Common, Job};

/// Arguments of `ktrace latency`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Functions to time: kernel symbols (wildcards too), PATH:SYMBOL or
    /// LIB:SYMBOL; an entry and a return probe each.
    #[arg(required = true, value_name = "FUNC")]
    pub funcs: Vec<String>,
    /// One histogram per KEY: func, comm, pid, tid, cpu, or an entry probe
    /// field.
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    /// Unit of the latencies.
    #[arg(long, value_name = "UNIT", default_value = "us", value_parser = agg::unit)]
    pub unit: Unit,
    /// Linear buckets STEP units wide instead of powers of two.
    #[arg(long, value_name = "STEP", value_parser = crate::cli::count)]
    pub linear: Option<u64>,
    #[command(flatten)]
    pub common: Common,
}

/// The entry and return probe specs of `func`.
fn pair(func: &str) -> anyhow::Result<[String; 2]> {
    let f = func.trim();
    if f.is_empty() || f.contains(char::is_whitespace) || f.ends_with("%return") {
        bail!(
            "{func:?} is not a function: give a symbol (vfs_read, 'ext4_*'), PATH:SYMBOL or \
             LIB:SYMBOL, without arguments or %return"
        );
    }
    if f.contains(':') && f.split(':').next().is_some_and(|h| matches!(h, "p" | "r")) {
        bail!("{func:?}: give the function alone, ktrace makes the entry and return probes");
    }
    Ok([f.to_string(), format!("{f}%return")])
}

/// Runs `ktrace latency`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut defs = Vec::new();
    for f in &args.funcs {
        defs.extend(pair(f)?);
    }
    let job = Job::Latency {
        scale: agg::scale(args.linear),
        unit: args.unit,
        by: args.by,
    };
    agg::run(defs, job, &args.common)
}
