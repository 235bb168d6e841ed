//! ktrace: kprobe-based event tracing for Linux.
//!
//! The binary is thin: it parses flags, dispatches to one module per
//! subcommand under `cmd/`, and turns the result into an exit code. All real
//! work lives in the `ktrace-*` library crates.

mod cmd;
mod resolve;
mod session;

use std::process::ExitCode;

use clap::Parser;

/// kprobe-based event tracing for Linux.
#[derive(Debug, Parser)]
#[command(name = "ktrace", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cmd::run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ktrace: {err:#}");
            ExitCode::from(1)
        }
    }
}
