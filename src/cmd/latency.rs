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

/// What `ktrace latency --help` shows after the options.
const LATENCY_HELP: &str = "\
Examples:
  ktrace latency vfs_read -d 5                  one histogram of vfs_read's latencies, in us
  ktrace latency 'vfs_*' --by func -d 2         one histogram per function
  ktrace latency do_sys_openat2 --by comm --unit ms --linear 5
  ktrace latency libc:malloc -p 1234 --unit ns  a user function, through uprobes
  ktrace latency vfs_write --prometheus 127.0.0.1:9100
                                                latencies served to Prometheus (seconds)

Units (--unit): ns, us (the default), ms. Calls still open when tracing
stops, and returns whose entry was not seen (a return probe attached in the
middle of a call), are counted apart, not folded in.

Exit status: 0 on success, 1 on an error (a function no probe can take, the
kernel refusing a probe), 2 on a usage error; with -- CMD, the command's
status (128+N when a signal N killed it).";

/// Arguments of `ktrace latency`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = LATENCY_HELP)]
pub struct Args {
    /// Functions to time: kernel symbols (wildcards too), PATH:SYMBOL or
    /// LIB:SYMBOL; an entry and a return probe each.
    #[arg(required = true, value_name = "FUNC")]
    pub funcs: Vec<String>,
    /// One histogram per KEY: func, comm, pid, tid, cpu, or an entry probe
    /// field.
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    /// Unit of the latencies: ns, us or ms.
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
