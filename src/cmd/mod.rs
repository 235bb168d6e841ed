//! One module per subcommand. Each module owns its clap `Args` and a `run`
//! function returning the process exit code.

use std::process::ExitCode;

use clap::Subcommand;

pub mod check;
pub mod list;
pub mod syms;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check probe definitions exactly as the kernel would read them.
    Check(check::Args),
    /// Look up kernel and ELF symbols: addresses, sizes, uprobe file offsets.
    Syms(syms::Args),
    /// List probe-able kernel functions, or the dynamic events present.
    List(list::Args),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Check(args) => check::run(args),
        Command::Syms(args) => syms::run(args),
        Command::List(args) => list::run(args),
    }
}
