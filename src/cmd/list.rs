//! `ktrace list`: the kernel functions a kprobe event can take, or (with
//! `--probes`) the dynamic events present in tracefs.
//!
//! The probe-able set is computed by `ktrace_symbols::probeable` from
//! kallsyms, the kprobe blacklist and the ftrace locations (see that module
//! for each rule and the kernel code behind it). Rules whose table cannot be
//! read are named on stderr, never silently assumed. Read-only: nothing is
//! written to the kernel.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ktrace_symbols::blacklist;
use ktrace_symbols::kallsyms;
use ktrace_symbols::probeable::{self, Exclusion, FtraceLocations, Rules};

/// Arguments of `ktrace list`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ktrace list 'vfs_*'                 probe-able functions named vfs_*
  ktrace list 'ext4:*' --verbose      functions of module ext4, with exclusions
  ktrace list --probes                dynamic events present, ktrace's marked")]
pub struct Args {
    /// A glob (`vfs_*`) or `MOD:glob`; all functions when absent.
    pub pattern: Option<String>,
    /// List the dynamic events present instead (kprobes, uprobes, ...).
    #[arg(long)]
    pub probes: bool,
    /// Read kernel symbols from this file instead of /proc/kallsyms; the
    /// running kernel's blacklist and ftrace tables are then not used unless
    /// given with --blacklist / --filter-functions.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
    /// The kprobe blacklist (default /sys/kernel/debug/kprobes/blacklist).
    #[arg(long, value_name = "FILE")]
    pub blacklist: Option<PathBuf>,
    /// available_filter_functions or its _addrs variant (default from tracefs).
    #[arg(long, value_name = "FILE")]
    pub filter_functions: Option<PathBuf>,
    /// The kernel accepts kprobe events on notrace functions
    /// (CONFIG_KPROBE_EVENTS_ON_NOTRACE=y; detected from /boot/config-*).
    #[arg(long)]
    pub notrace_allowed: bool,
    /// The tracefs mount (default /sys/kernel/tracing, then
    /// /sys/kernel/debug/tracing).
    #[arg(long, value_name = "DIR")]
    pub tracefs: Option<PathBuf>,
    /// Also print the excluded functions and why.
    #[arg(long, short)]
    pub verbose: bool,
}

fn tracefs_dir(args: &Args) -> PathBuf {
    if let Some(d) = &args.tracefs {
        return d.clone();
    }
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("README").exists())
        .unwrap_or_else(|| PathBuf::from("/sys/kernel/tracing"))
}

/// Runs `ktrace list`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.probes {
        return list_probes(&args);
    }
    let own_kernel = args.kallsyms.is_none();
    let ks_path = args
        .kallsyms
        .clone()
        .unwrap_or_else(|| PathBuf::from("/proc/kallsyms"));
    let ks = kallsyms::open(&ks_path)?;
    if ks.addresses_hidden() {
        eprintln!(
            "ktrace: warning: {} shows only zero addresses (kptr_restrict); sizes and the notrace check need root",
            ks_path.display()
        );
    }
    let bl_path = args
        .blacklist
        .clone()
        .or_else(|| own_kernel.then(|| PathBuf::from("/sys/kernel/debug/kprobes/blacklist")));
    let bl = match &bl_path {
        Some(p) => match blacklist::open(p) {
            Ok(b) => Some(b),
            Err(e) if args.blacklist.is_some() => return Err(e.into()),
            Err(e) => {
                eprintln!("ktrace: note: {e}");
                None
            }
        },
        None => None,
    };
    let ft_text = match &args.filter_functions {
        Some(p) => Some(
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        ),
        None if own_kernel => {
            let t = tracefs_dir(&args);
            [
                "available_filter_functions_addrs",
                "available_filter_functions",
            ]
            .iter()
            .find_map(|f| std::fs::read_to_string(t.join(f)).ok())
        }
        None => None,
    };
    let ft = ft_text.as_deref().map(FtraceLocations::parse);
    let rules = Rules {
        blacklist: bl.as_deref(),
        ftrace: ft.as_ref(),
        notrace_refused: !(args.notrace_allowed || (own_kernel && kernel_allows_notrace())),
    };
    if own_kernel && !tracefs_dir(&args).join("kprobe_events").exists() {
        eprintln!(
            "ktrace: note: this kernel has no kprobe events ({} has no kprobe_events); the list shows what its symbols would allow",
            tracefs_dir(&args).display()
        );
    }
    let pattern = args.pattern.as_deref().unwrap_or("*");
    let exp = probeable::expand(&ks, &rules, pattern);
    for s in &exp.accepted {
        match &s.module {
            Some(m) => println!("{} [{m}]", s.name),
            None => println!("{}", s.name),
        }
    }
    if args.verbose {
        for (s, why) in &exp.excluded {
            eprintln!(
                "excluded: {}{}: {why}",
                s.name,
                s.module
                    .as_ref()
                    .map(|m| format!(" [{m}]"))
                    .unwrap_or_default()
            );
        }
    }
    let count = |f: fn(&Exclusion) -> bool| exp.excluded.iter().filter(|(_, w)| f(w)).count();
    eprintln!(
        "{} probe-able functions match {pattern:?}; excluded: {} blacklisted, {} notrace, {} not unique, {} preambles, {} not text",
        exp.accepted.len(),
        count(|w| matches!(w, Exclusion::Blacklisted(_))),
        count(|w| matches!(w, Exclusion::Notrace)),
        count(|w| matches!(w, Exclusion::NotUnique(_))),
        count(|w| matches!(w, Exclusion::Preamble)),
        count(|w| matches!(w, Exclusion::NotText)),
    );
    for r in &exp.skipped_rules {
        eprintln!("ktrace: note: rule not checked: {r}");
    }
    if exp.accepted.is_empty() {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the running kernel's config says CONFIG_KPROBE_EVENTS_ON_NOTRACE=y
/// (from /boot/config-RELEASE; false when unknown).
pub(crate) fn kernel_allows_notrace() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let cfg = Path::new("/boot").join(format!("config-{}", release.trim()));
    std::fs::read_to_string(cfg)
        .is_ok_and(|c| c.lines().any(|l| l == "CONFIG_KPROBE_EVENTS_ON_NOTRACE=y"))
}

/// One line of `dynamic_events`, split as ktrace shows it.
#[derive(Debug, PartialEq, Eq)]
struct DynEvent<'a> {
    /// `p`, `r`, `r10`, `e`, `s`, `f`, `t`, ...
    kind: &'a str,
    group: Option<&'a str>,
    event: &'a str,
    rest: &'a str,
}

fn parse_dynevent(line: &str) -> Option<DynEvent<'_>> {
    let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
    let (kind, name) = head.split_once(':')?;
    let (group, event) = match name.split_once('/') {
        Some((g, e)) => (Some(g), e),
        None => (None, name),
    };
    Some(DynEvent {
        kind,
        group,
        event,
        rest: rest.trim(),
    })
}

fn list_probes(args: &Args) -> anyhow::Result<ExitCode> {
    let path = tracefs_dir(args).join("dynamic_events");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (is tracefs mounted? run as root)",
            path.display()
        )
    })?;
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        n += 1;
        match parse_dynevent(line) {
            Some(d) => {
                let ours = d.group.is_some_and(|g| g.starts_with("ktrace_"));
                println!(
                    "{} {:<4} {}/{} {}",
                    if ours { "ktrace" } else { "-     " },
                    d.kind,
                    d.group.unwrap_or("-"),
                    d.event,
                    d.rest
                );
            }
            None => println!("?      {line}"),
        }
    }
    eprintln!("{n} dynamic events in {}", path.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynevent_lines() {
        // Lines as dynamic_events shows them (trace_kprobe_show /
        // trace_uprobe_show formats).
        let d = parse_dynevent("p:ktrace_1/vfs_read vfs_read+4 arg1=%di").unwrap();
        assert_eq!(
            (d.kind, d.group, d.event, d.rest),
            ("p", Some("ktrace_1"), "vfs_read", "vfs_read+4 arg1=%di")
        );
        let d = parse_dynevent("r16:kprobes/r_do_sys_open do_sys_open").unwrap();
        assert_eq!((d.kind, d.group), ("r16", Some("kprobes")));
        let d = parse_dynevent("p:uprobes/p_bash_0x4245c0 /bin/bash:0x00000000000c6c20").unwrap();
        assert_eq!(d.rest, "/bin/bash:0x00000000000c6c20");
        assert!(parse_dynevent("garbage").is_none());
    }
}
