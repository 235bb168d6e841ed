//! `ktrace check`: read probe definitions and report what the kernel would say.

use std::process::ExitCode;

/// Arguments of `ktrace check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Definitions to check; one per line from standard input when none.
    pub defs: Vec<String>,
}

/// Runs `ktrace check`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("ktrace check is not implemented yet")
}
