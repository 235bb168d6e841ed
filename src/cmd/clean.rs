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
    /// Remove the boot-time probes `ktrace boot` set (group ktrace_boot), or
    /// only the EVENTs named (`EVENT` of that group, or `GROUP/EVENT`): they
    /// belong to no session, so only this removes them.
    #[arg(long, conflicts_with = "list")]
    pub boot: bool,
    /// With --boot: the events to remove.
    #[arg(requires = "boot", value_name = "EVENT")]
    pub events: Vec<String>,
}

/// Runs `ktrace clean`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.boot {
        return crate::cmd::boot::clean(&args.events);
    }
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
