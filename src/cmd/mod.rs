//! One module per subcommand. Each module owns its clap `Args` and a `run`
//! function returning the process exit code.

use std::process::ExitCode;

use clap::Subcommand;

pub mod agg;
pub mod bench;
pub mod boot;
pub mod check;
pub mod clean;
pub mod conform;
pub mod count;
pub mod disasm;
pub mod docs;
pub mod export;
pub mod hist;
pub mod latency;
pub mod list;
pub mod profile;
pub mod record;
pub mod report;
pub mod syms;
pub mod trace;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check probe definitions exactly as the kernel would read them.
    Check(check::Args),
    /// Print the kernel command line that sets probes at boot (kprobe_event=).
    Boot(boot::Args),
    /// Look up kernel and ELF symbols: addresses, sizes, uprobe file offsets.
    Syms(syms::Args),
    /// List probe-able kernel functions, or the dynamic events present.
    List(list::Args),
    /// Create probes in a private session, stream their events, clean up.
    Trace(trace::Args),
    /// Count probe hits per key (function, task, field...).
    Count(count::Args),
    /// Show the distribution of a probe field.
    Hist(hist::Args),
    /// Time functions from entry to return.
    Latency(latency::Args),
    /// Trace like `trace`, writing the raw pages to a trace.dat file.
    Record(record::Args),
    /// Print a trace.dat file (ktrace's or trace-cmd's) as `trace` prints.
    Report(report::Args),
    /// Convert a trace.dat file to a Perfetto trace.
    Export(export::Args),
    /// Show a function's instructions and the offsets a probe can take.
    Disasm(disasm::Args),
    /// Show per-probe hits and misses.
    Profile(profile::Args),
    /// Measure what one probe hit costs the traced code, on this machine.
    Bench(bench::Args),
    /// Remove what ktrace sessions whose process is gone left behind.
    Clean(clean::Args),
    /// Print shell completions generated from the CLI definition.
    Completions(docs::CompletionsArgs),
    /// Print the man page (or write one per subcommand with --dir).
    Man(docs::ManArgs),
    /// Differential test of `ktrace check` against the running kernel (a
    /// tool of the kernel rig: writes generated definitions into the kernel).
    #[command(hide = true)]
    Conform(conform::Args),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Check(args) => check::run(args),
        Command::Boot(args) => boot::run(args),
        Command::Syms(args) => syms::run(args),
        Command::List(args) => list::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Count(args) => count::run(args),
        Command::Hist(args) => hist::run(args),
        Command::Latency(args) => latency::run(args),
        Command::Record(args) => record::run(args),
        Command::Report(args) => report::run(args),
        Command::Export(args) => export::run(args),
        Command::Disasm(args) => disasm::run(args),
        Command::Profile(args) => profile::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Clean(args) => clean::run(args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
        Command::Conform(args) => conform::run(args),
    }
}
