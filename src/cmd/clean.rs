//! `ktrace clean`: remove what ktrace sessions whose process is gone left in
//! tracefs (after a SIGKILL, a power cut of the tool, …).
//!
//! Only names ktrace creates (`ktrace_p<PID>_s<START>_n<PIDNS>…`, see
//! `ktrace_tracefs::owner`) are considered, and only those whose owner is
//! provably gone; live sessions and everything else are never touched.

use std::process::ExitCode;

use ktrace_tracefs::{SessionName, discover, owner};

/// Arguments of `ktrace clean`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only list ktrace sessions present and whether their owner lives.
    #[arg(long)]
    pub list: bool,
}

/// Runs `ktrace clean`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = discover::find_or_mount()?;
    if args.list {
        for name in owner::present_sessions(&root)? {
            let state = match SessionName::parse(&name).and_then(|s| s.owner_alive()) {
                Some(true) => "running",
                Some(false) => "dead (would be removed)",
                None => "unknown owner (left alone)",
            };
            crate::oline!("{name}\t{state}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let n = crate::session::reap_and_report(&root);
    if n == 0 {
        crate::say!("nothing to clean");
    }
    Ok(ExitCode::SUCCESS)
}
