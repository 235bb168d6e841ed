//! `ktrace list`: the kernel functions a kprobe event can take, or (with
//! `--probes`) the dynamic events present in tracefs.
//!
//! The probe-able set is computed by `ktrace_symbols::probeable` from
//! kallsyms, the kprobe blacklist and the ftrace locations (see that module
//! for each rule and the kernel code behind it). Rules whose table cannot be
//! read are named on stderr, never silently assumed. Read-only: nothing is
//! written to the kernel.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ktrace_symbols::KernelView;
use ktrace_symbols::probeable::{self, Exclusion};

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

/// `--tracefs DIR` (which must look like a tracefs mount: a directory
/// with a probe events file), or the mount found.
fn tracefs_dir(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    match &args.tracefs {
        Some(d) => {
            let files = ["dynamic_events", "kprobe_events", "uprobe_events"];
            if !files.iter().any(|f| d.join(f).is_file()) {
                anyhow::bail!(
                    "--tracefs {}: not a tracefs mount (it has no {})",
                    d.display(),
                    files.join(", ")
                );
            }
            Ok(Some(d.clone()))
        }
        None => Ok(ktrace_tracefs::discover::find_mounted()),
    }
}

/// Runs `ktrace list`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.probes {
        return list_probes(&args);
    }
    let tracefs = tracefs_dir(&args)?;
    let mut view = KernelView::running(tracefs.as_deref());
    if let Some(k) = &args.kallsyms {
        view = view.with_kallsyms_file(k);
    }
    if let Some(b) = &args.blacklist {
        view = view.with_blacklist_file(b);
    }
    if let Some(f) = &args.filter_functions {
        view = view.with_filter_functions_file(f);
    }
    if args.notrace_allowed {
        view = view.with_notrace_allowed(true);
    }
    let ks = view.kallsyms().map_err(|e| anyhow::anyhow!("{e}"))?;
    if ks.addresses_hidden() {
        crate::eline!(
            "ktrace: warning: {} shows only zero addresses (kptr_restrict); sizes and the notrace check need root",
            view.kallsyms_path().display()
        );
    }
    match view.blacklist() {
        Some(Err(e)) if args.blacklist.is_some() => anyhow::bail!("{e}"),
        Some(Err(e)) => crate::say!("note: {e}"),
        _ => {}
    }
    if let Some(f) = &args.filter_functions
        && view.ftrace().is_none()
    {
        // the table's own reason when it has one
        if let Err(e) = ktrace_symbols::read_table(f) {
            anyhow::bail!("{e}");
        }
        anyhow::bail!(
            "cannot read {}: not a list of ftrace functions",
            f.display()
        );
    }
    let rules = view.rules();
    if view.is_running() && !view.features().is_some_and(|f| f.kprobe_events) {
        crate::eline!(
            "ktrace: note: this kernel has no kprobe events ({} has no kprobe_events); the list shows what its symbols would allow",
            tracefs
                .as_deref()
                .map_or("tracefs".to_string(), |t| t.display().to_string())
        );
    }
    let pattern = args.pattern.as_deref().unwrap_or("*");
    let exp = probeable::expand(ks, &rules, pattern);
    for s in &exp.accepted {
        match &s.module {
            Some(m) => crate::oline!("{} [{m}]", s.name),
            None => crate::oline!("{}", s.name),
        }
    }
    if args.verbose {
        for (s, why) in &exp.excluded {
            crate::eline!(
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
    crate::eline!(
        "{} probe-able functions match {pattern:?}; excluded: {} blacklisted, {} notrace, {} not unique, {} preambles, {} not text",
        exp.accepted.len(),
        count(|w| matches!(w, Exclusion::Blacklisted(_))),
        count(|w| matches!(w, Exclusion::Notrace)),
        count(|w| matches!(w, Exclusion::NotUnique(_))),
        count(|w| matches!(w, Exclusion::Preamble)),
        count(|w| matches!(w, Exclusion::NotText)),
    );
    for r in &exp.skipped_rules {
        crate::say!("note: rule not checked: {r}");
    }
    if exp.accepted.is_empty() {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn list_probes(args: &Args) -> anyhow::Result<ExitCode> {
    let Some(root) = tracefs_dir(args)? else {
        if let Some(e) = ktrace_tracefs::discover::unusable_mount() {
            return Err(e.into());
        }
        // Mounted, but not readable by this user (tracefs is root's).
        let mounted = std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        });
        if mounted {
            anyhow::bail!(
                "tracefs is mounted but this user cannot read it (it belongs to root): run \
                 `sudo ktrace list --probes`"
            );
        }
        anyhow::bail!(
            "tracefs is not mounted (mount it: mount -t tracefs nodev /sys/kernel/tracing)"
        );
    };
    let dynev = ktrace_tracefs::DynEvents::new(&root);
    let listed = dynev.list().context("is tracefs mounted? run as root")?;
    for d in &listed {
        let ours = d.group.starts_with("ktrace_");
        let rest = d.line.split_once(' ').map_or("", |(_, r)| r.trim());
        crate::oline!(
            "{} {:<4} {}/{} {}",
            if ours { "ktrace" } else { "-     " },
            kind_name(&d.line),
            d.group,
            d.event,
            rest
        );
    }
    crate::eline!("{} dynamic events in {}", listed.len(), root.display());
    Ok(ExitCode::SUCCESS)
}

/// The kind a listed line shows (`p`, `r`, `r16`, `e`), from ktrace-probe's
/// reading of it; the line's own head for kinds it does not read (`f`, `t`,
/// synthetic `s`).
fn kind_name(line: &str) -> String {
    use ktrace_probe::ProbeKind;
    match ktrace_probe::parse_listed(line).map(|p| p.kind) {
        Some(ProbeKind::Eprobe { .. }) => "e".into(),
        Some(ProbeKind::Kprobe {
            is_return: true,
            maxactive,
            ..
        }) if maxactive > 0 => format!("r{maxactive}"),
        Some(k) if k.is_return() => "r".into(),
        Some(_) => "p".into(),
        None => line.split([':', ' ']).next().unwrap_or("?").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_kinds() {
        // Lines as dynamic_events shows them (trace_kprobe_show /
        // trace_uprobe_show formats).
        for (line, want) in [
            ("p:ktrace_1/vfs_read vfs_read+4 arg1=%di", "p"),
            ("r16:kprobes/r_do_sys_open do_sys_open", "r16"),
            (
                "p:uprobes/p_bash_0x4245c0 /bin/bash:0x00000000000c6c20",
                "p",
            ),
            ("r:uprobes/r_x /tmp/a:b/x:0x0000000000001000", "r"),
            ("e:eprobes/e sched.sched_switch", "e"),
            ("f:fprobes/f vfs_read", "f"),
        ] {
            assert_eq!(kind_name(line), want, "{line}");
        }
    }
}
