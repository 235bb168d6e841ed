//! ktrace: kprobe-based event tracing for Linux.
//!
//! The binary is thin: it parses flags, dispatches to one module per
//! subcommand under `cmd/`, and turns the result into an exit code. All real
//! work lives in the `ktrace-*` library crates.

// musl's allocator (mallocng) maps and unmaps memory for most new groups of
// small blocks, which an emulated or small board pays dearly for at every
// command's start: the measurements are beside the dependency in Cargo.toml.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

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

/// `eprintln!` that never panics (see [`say!`]), without the prefix.
macro_rules! eline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use eline;

/// `eprint!` that never panics.
macro_rules! eput {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut e = std::io::stderr();
        let _ = write!(e, $($arg)*);
        let _ = e.flush();
    }};
}
pub(crate) use eput;

/// `println!` for listings on stdout: a reader that went away (`| head`)
/// ends the program quietly (exit 0); any other write error (a full disk)
/// is reported and ends it with exit 1. Never a panic. Only for commands
/// that hold nothing in tracefs when they print.
macro_rules! oline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            $crate::say!("cannot write to standard output: {e}");
            std::process::exit(1);
        }
    }};
}
pub(crate) use oline;

mod cli;
mod cmd;
mod kview;
mod live;
mod modwatch;
mod outfile;
mod output;
mod progress;
mod resolve;
mod session;

use std::process::ExitCode;

use clap::Parser;

/// kprobe-based event tracing for Linux.
#[derive(Debug, Parser)]
#[command(name = "ktrace", version, about, long_about = LONG_ABOUT, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

/// What ktrace is, for `ktrace --help` and the man page's DESCRIPTION.
const LONG_ABOUT: &str = "\
kprobe-based event tracing for Linux in one static binary.

ktrace speaks the kernel's own dynamic-probe language (the lines written into \
kprobe_events, uprobe_events or dynamic_events), checks every definition exactly \
as the running kernel would before the kernel sees a byte, installs the probes in \
its own event group and tracing instance, reads the per-CPU ring buffers itself \
and prints lines identical to the kernel's trace file (or JSON), aggregates \
without BPF (count, hist, latency), records trace.dat files that trace-cmd, \
KernelShark and Perfetto open, and removes everything it created when it exits. \
It never touches probes, events or buffers it did not create.";

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
