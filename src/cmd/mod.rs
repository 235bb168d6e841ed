//! One module per subcommand. Each module owns its clap `Args` and a `run`
//! function returning the process exit code.

use std::process::ExitCode;

use clap::Subcommand;

pub mod check;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check probe definitions exactly as the kernel would read them.
    Check(check::Args),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Check(args) => check::run(args),
    }
}
