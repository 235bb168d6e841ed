//! `ktrace profile`: per-probe hits and misses from `kprobe_profile` and
//! `uprobe_profile`, with a warning for return probes that missed returns.
//!
//! Read-only: it reads the profile files and the probe listings, nothing
//! else (apart from reaping dead ktrace sessions, as every subcommand does).

use std::process::ExitCode;

use ktrace_tracefs::{ProbeFile, SessionName, profile};

/// Arguments of `ktrace profile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show every probe, not only those of ktrace sessions.
    #[arg(long)]
    pub all: bool,
    /// Only probes of this group.
    #[arg(long)]
    pub group: Option<String>,
}

/// Runs `ktrace profile`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::session::open_tracefs()?;
    let mut rows = Vec::new();
    for kind in [ProbeFile::KprobeEvents, ProbeFile::UprobeEvents] {
        rows.extend(profile::read(&root, kind)?);
    }
    rows.retain(|p| match &args.group {
        Some(g) => &p.group == g,
        None => args.all || SessionName::parse(&p.group).is_some(),
    });
    crate::oline!(
        "{:<40} {:<32} {:>12} {:>10}",
        "GROUP",
        "EVENT",
        "HITS",
        "MISSES"
    );
    for p in &rows {
        let misses = p.misses.map_or_else(|| "-".to_string(), |m| m.to_string());
        crate::oline!(
            "{:<40} {:<32} {:>12} {:>10}",
            p.group,
            p.event,
            p.hits,
            misses
        );
    }
    for p in &rows {
        if let Some(w) = p.warning() {
            crate::say!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
