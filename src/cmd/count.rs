//! `ktrace count`: hits per key (function, task, process, thread, CPU,
//! stack, or a probe field) of probes given as in `ktrace trace`, counted
//! by the kernel's hist triggers where it can, else by ktrace from the
//! event stream. The run and its output are crate::cmd::agg's.

use std::process::ExitCode;

use super::agg::{self, Common, Job};

/// Arguments of `ktrace count`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = crate::resolve::TRACE_HELP)]
pub struct Args {
    /// Probes, as in `ktrace trace` (kernel and user probes, wildcards).
    #[arg(required = true, value_name = "PROBE")]
    pub probes: Vec<String>,
    /// Count per KEY: func, comm, pid, tid, cpu, stack, or a probe field
    /// (repeat for a compound key).
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    /// Show only the N keys with the most hits.
    #[arg(long, value_name = "N", value_parser = crate::cli::count)]
    pub top: Option<u64>,
    /// How the functions are attached: `ftrace` (the function tracer in
    /// ktrace's own instance: one glob write for all the functions; bare
    /// function globs, keys among func/comm/pid/tid/cpu), `kprobe` (one
    /// kprobe per function), or auto (ftrace when it can do the job).
    #[arg(long, value_enum, default_value_t = agg::Route::Auto)]
    pub route: agg::Route,
    /// With `--by stack`: print the counts as folded stacks, one line per
    /// stack, frames root first separated by `;`, a space and the count
    /// (what flamegraph.pl, inferno and speedscope read); kernel frames
    /// without their offsets, user frames as addresses.
    #[arg(long, conflicts_with_all = ["json", "interval"])]
    pub folded: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Runs `ktrace count`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.folded && !args.by.iter().any(|k| k == "stack") {
        anyhow::bail!("--folded needs --by stack");
    }
    let job = Job::Count {
        by: args.by,
        top: args.top,
        route: args.route,
        folded: args.folded,
    };
    agg::run(args.probes, job, &args.common)
}
