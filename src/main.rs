//! ktrace: kprobe-based event tracing for Linux.
//!
//! The binary is thin: it parses flags, dispatches to one module per
//! subcommand under `cmd/`, and turns the result into an exit code. All real
//! work lives in the `ktrace-*` library crates.

/// Prints one line to stderr, prefixed `ktrace: `, ignoring write errors:
/// a closed or full stderr (`2>/dev/full`, `2>&1 | head -1`) must never
/// turn a message into a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "ktrace: {}", format_args!($($arg)*));
    }};
}
pub(crate) use say;

mod btfroute;
mod cli;
mod cmd;
mod kview;
mod output;
mod resolve;
mod session;

use std::process::ExitCode;

use clap::Parser;

/// kprobe-based event tracing for Linux.
#[derive(Debug, Parser)]
#[command(name = "ktrace", version, about, long_about = None, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

/// Exit codes, shown by `ktrace --help` and in the man page.
const EXIT_CODES: &str = "\
Examples:
  ktrace trace do_sys_openat2 dfd=arg1 'filename=+0(arg2):ustring'
  ktrace trace 'libc:getenv name=+0(arg1):string' -- /usr/bin/env true
  ktrace check 'p:myev vfs_read+4 count=%dx:u64'
  ktrace list 'vfs_*'

Exit codes:
  0      success
  1      an error, or a definition `ktrace check` rejects, or nothing matched (`ktrace list`)
  2      a usage error (bad flags or arguments)
  128+N  `ktrace trace` stopped by signal N other than SIGINT";

/// The CLI definition, for generated completions and man pages.
pub(crate) fn cli_command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cmd::run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            say!("{err:#}");
            ExitCode::from(1)
        }
    }
}
