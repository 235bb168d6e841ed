//! `ktrace hist`: the distribution of one numeric field of a probe (sizes,
//! return values, flags) in power-of-two or linear buckets, optionally one
//! histogram per key; by the kernel's hist triggers where it can, else by
//! ktrace from the event stream. The run and its output are
//! crate::cmd::agg's.

use std::process::ExitCode;

use super::agg::{self, Common, Job};

/// Arguments of `ktrace hist`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = crate::resolve::TRACE_HELP)]
pub struct Args {
    /// The probe, as in `ktrace trace`, with the field among its
    /// arguments (e.g. '/bin/prog:work size=arg1:u64').
    #[arg(value_name = "PROBE")]
    pub probe: String,
    /// The numeric field whose distribution to show.
    #[arg(value_name = "FIELD")]
    pub field: String,
    /// Power-of-two buckets, bpftrace's `[0]`, `[1]`, `[2, 4)`, ... (the
    /// default).
    #[arg(long, conflicts_with = "linear")]
    pub log2: bool,
    /// Linear buckets STEP wide.
    #[arg(long, value_name = "STEP", value_parser = crate::cli::count)]
    pub linear: Option<u64>,
    /// One histogram per KEY (see `ktrace count --by`).
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// Runs `ktrace hist`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let job = Job::Hist {
        field: args.field,
        scale: agg::scale(args.linear),
        by: args.by,
    };
    agg::run(vec![args.probe], job, &args.common)
}
