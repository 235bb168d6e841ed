//! `ktrace check`: read probe definitions and report what the kernel would say,
//! without touching the kernel: verdict, the line the kernel would read back, and for
//! rejections the kernel's `error_log` message with its caret, plus a hint.
//!
//! The language lives in `ktrace-probe`; this module only gathers input, loads
//! `--kallsyms` and prints. Without `--arch`, `--kernel`, `--kallsyms` or `--offline`, and
//! with tracefs mounted, the running kernel answers the target-dependent
//! questions (`crate::resolve::live::LiveEnv`: kallsyms, files, existing
//! events), its tracefs README says which language features it has, and its
//! version (for what the README does not list) and CPU count complete the
//! target; it is still only read, never written. Offline (`--kernel`,
//! `--arch`, `--kallsyms`, `--offline`), features follow the version.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use std::path::Path;

use ktrace_probe::{
    Arch, Checked, Definition, Environment, Interface, KernelVersion, Offline, Target, check_line,
};
use ktrace_symbols::KernelView;

use crate::resolve::live::{LiveEnv, SymbolsEnv, live_target};

/// Arguments of `ktrace check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Target architecture (x86_64, arm64/aarch64, arm, riscv, i386); default: this machine's.
    #[arg(long)]
    pub arch: Option<String>,
    /// Target kernel version (MAJOR.MINOR or `uname -r`; checked against 5.10,
    /// 6.1, 6.12 and 7.2). Default: live, the running kernel (its README decides
    /// the features); offline, this machine's series when it is one of those,
    /// else the newest (7.2).
    #[arg(long)]
    pub kernel: Option<String>,
    /// A copy of the target's /proc/kallsyms, for symbol checks.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<std::path::PathBuf>,
    /// The tracefs file the definitions are meant for.
    #[arg(long, value_enum, default_value = "dynamic_events")]
    pub file: FileArg,
    /// Possible CPUs of the target (for the default maxactive of return probes).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// One JSON object per definition.
    #[arg(long)]
    pub json: bool,
    /// Check offline even on a live kernel: no kallsyms, files or events of
    /// this machine are consulted. Without it, and without --arch and
    /// --kallsyms, the running kernel is asked when tracefs is mounted.
    #[arg(long)]
    pub offline: bool,
    /// A copy of the target's /sys/kernel/btf/vmlinux: BTF argument names
    /// (`file->f_flags`, `$arg*`, typed `$retval`) are checked with it and, for
    /// kernels before 6.6, compiled to the classic fetch language. Live, the
    /// running kernel's /sys/kernel/btf is used.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<std::path::PathBuf>,
    /// The target's vmlinux (ELF with symbols): kprobes at `SYM+OFF` are
    /// checked against its code (instruction boundary; on x86 whether `+4`
    /// is the entry after `endbr64`), offline. Live, the running kernel's
    /// code is read from /proc/kcore.
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<std::path::PathBuf>,
    /// Also print how each BTF argument was compiled, and the classic definition.
    #[arg(long)]
    pub explain: bool,
    /// Definitions to check; one per line from standard input when none.
    pub defs: Vec<String>,
}

/// Which probe file to check against.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FileArg {
    /// dynamic_events (all kinds).
    #[value(name = "dynamic_events")]
    Dynamic,
    /// kprobe_events.
    #[value(name = "kprobe_events")]
    Kprobe,
    /// uprobe_events.
    #[value(name = "uprobe_events")]
    Uprobe,
}

/// Runs `ktrace check`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let arch = match (&args.arch, &args.vmlinux) {
        (Some(a), _) => a.parse::<Arch>()?,
        (None, Some(v)) => crate::code::vmlinux_arch(v)?,
        (None, None) => Arch::native().context("unknown machine architecture: give --arch")?,
    };
    // Offline, the version decides the language: the one given, else this
    // machine's series when it is one ktrace is checked against, else the newest.
    // Live (below), the running kernel's README decides the features.
    let kernel = match &args.kernel {
        Some(k) => k.parse::<KernelVersion>()?,
        None => KernelVersion::offline_default(
            KernelView::running(None)
                .release()
                .and_then(|r| r.parse().ok()),
        ),
    };
    let interface = match args.file {
        FileArg::Dynamic => Interface::DynamicEvents,
        FileArg::Kprobe => Interface::KprobeEvents,
        FileArg::Uprobe => Interface::UprobeEvents,
    };
    let mut target = Target::new(arch);
    target.kernel = kernel;
    target.interface = interface;
    target.possible_cpus = args.cpus;
    let inputs: Vec<String> = if args.defs.is_empty() {
        let stdin = std::io::stdin();
        let mut v = Vec::new();
        for line in stdin.lock().lines() {
            v.push(line.context("reading standard input")?);
        }
        v
    } else {
        args.defs.clone()
    };
    // The kernel symbol names the definitions mention, counted in one pass.
    let wanted: Vec<String> = inputs
        .iter()
        .filter_map(|i| crate::resolve::spec::split(i).ok().flatten())
        .flat_map(|s| s.kernel_symbols())
        .collect();
    let wanted = wanted.iter().map(String::as_str);

    let mounted = if args.offline
        || args.arch.is_some()
        || args.kernel.is_some()
        || args.kallsyms.is_some()
        || args.vmlinux.is_some()
    {
        None
    } else {
        ktrace_tracefs::discover::find_mounted()
    };
    let file_counts = match &args.kallsyms {
        Some(path) => Some(
            KernelView::running(None)
                .with_kallsyms_file(path)
                .symbol_counts(wanted.clone())?,
        ),
        None => None,
    };
    let file_env = file_counts.as_ref().map(SymbolsEnv);
    let view = mounted
        .as_deref()
        .map(|root| KernelView::running(Some(root)));
    let live_counts = view.as_ref().and_then(|v| v.symbol_counts(wanted).ok());
    let live_env = view.as_ref().map(|v| LiveEnv {
        symbols: live_counts.as_ref(),
        tracefs: v.tracefs().unwrap_or(Path::new("/")),
    });
    if let Some(v) = &view {
        // Live: the kernel says what its language offers (README); its
        // version only fills in what the README does not list.
        let t = live_target(arch, v);
        target.kernel = t.kernel;
        target.features = t.features;
        if args.cpus.is_none() {
            target.possible_cpus = t.possible_cpus;
        }
    }
    let env: &dyn Environment = match (&file_env, &live_env) {
        (Some(k), _) => k,
        (None, Some(l)) => l,
        (None, None) => &Offline,
    };

    let mut route = match (&args.btf, &mounted) {
        (Some(file), _) => crate::btfroute::Route::offline(file, target.kernel),
        (None, Some(root)) => crate::btfroute::Route::live(root),
        (None, None) => crate::btfroute::Route::none(target.kernel),
    };
    // The functions' code, for kprobes at an offset.
    let source = match (&args.vmlinux, &view) {
        (Some(file), _) => crate::code::Source::Vmlinux(file),
        (None, Some(v)) => crate::code::Source::live(v),
        (None, None) => {
            crate::code::Source::None("offline: give --vmlinux FILE for the code".to_string())
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_ok = true;
    for input in &inputs {
        let (checked, why) = match route.compile(input, target, env) {
            None => {
                let mut c = check_line(input, target, env);
                let why = crate::code::check(&mut c, arch, &source);
                (c, why)
            }
            // Nothing BTF-specific went wrong, but the kernel would still
            // refuse the line (a uprobe's BTF name, say): report that.
            Some(Ok(c)) if !c.checked.accepted() => (c.checked, None),
            Some(Ok(mut c)) => {
                let why = crate::code::check(&mut c.checked, arch, &source);
                if c.checked.accepted() {
                    btf_report(&mut out, input, Ok(c), &route, &args, arch, why.as_deref())?;
                    continue;
                }
                (c.checked, why)
            }
            Some(result) => {
                let ok = result.is_ok();
                all_ok &= ok;
                btf_report(&mut out, input, result, &route, &args, arch, None)?;
                continue;
            }
        };
        all_ok &= checked.accepted();
        if args.json {
            writeln!(out, "{}", json_line(input, &checked, arch, why.as_deref()))?;
        } else {
            human(&mut out, input, &checked, arch, why.as_deref())?;
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reports a definition that went through the BTF route.
fn btf_report(
    out: &mut impl Write,
    input: &str,
    result: Result<ktrace_probe::btfarg::Compiled, ktrace_probe::ProbeError>,
    route: &crate::btfroute::Route,
    args: &Args,
    arch: Arch,
    why: Option<&str>,
) -> std::io::Result<()> {
    let (json, explain) = (args.json, args.explain);
    let route_name = if route.native { "native" } else { "compiled" };
    match result {
        Ok(c) => {
            if json {
                let mut v = json_line(input, &c.checked, arch, why);
                v["normalized"] = c.readback.clone().into();
                v["btf_route"] = route_name.into();
                v["write"] = c.text.clone().into();
                v["classic"] = c.classic.clone().into();
                return writeln!(out, "{v}");
            }
            writeln!(out, "ok: {}", c.readback.clone().unwrap_or_default())?;
            if explain {
                writeln!(out, "  btf route: {route_name}")?;
                writeln!(out, "{}", c.explain())?;
            }
            if !c.checked.unchecked.is_empty() {
                let list = crate::code::not_checked(&c.checked, why);
                writeln!(out, "  not checked: {}", list.join("; "))?;
            }
            Ok(())
        }
        Err(mut e) => {
            if let Some(m) = &route.missing {
                let h = e.hint.take().unwrap_or_default();
                e.hint = Some(format!("{h} (btf: {m})"));
            }
            let c = Checked {
                command: e.command.clone(),
                definition: Err(e),
                unchecked: Vec::new(),
            };
            if json {
                let mut v = json_line(input, &c, arch, None);
                v["btf_route"] = route_name.into();
                return writeln!(out, "{v}");
            }
            human(out, input, &c, arch, None)
        }
    }
}

fn json_line(input: &str, c: &Checked, arch: Arch, why: Option<&str>) -> serde_json::Value {
    let unchecked = crate::code::not_checked(c, why);
    let error = match &c.definition {
        Ok(_) => serde_json::Value::Null,
        Err(e) => serde_json::json!({
            "message": e.message,
            "pos": e.pos,
            "logged": e.kind.is_logged(),
            "subsystem": e.subsystem,
            "command": e.command,
            "hint": e.hint,
        }),
    };
    let mut v = serde_json::json!({
        "input": input,
        "accepted": c.accepted(),
        "normalized": c.normalized(arch),
        "error": error,
        "not_checked": unchecked,
    });
    if let Ok(Definition::Probe(p)) = &c.definition {
        v["group"] = p.group.clone().into();
        v["event"] = p.event.clone().into();
        v["boot_param"] = ktrace_probe::render::boot_param(p, arch).into();
    }
    v
}

fn human(
    out: &mut impl Write,
    input: &str,
    c: &Checked,
    arch: Arch,
    why: Option<&str>,
) -> std::io::Result<()> {
    match &c.definition {
        Ok(Definition::Empty) => writeln!(out, "ok: (nothing to do) {input}")?,
        Ok(_) => {
            writeln!(out, "ok: {}", c.normalized(arch).unwrap_or_default())?;
        }
        Err(e) => {
            writeln!(out, "rejected: {}", e.command)?;
            if let Some((cmd, caret)) = e.caret_lines() {
                writeln!(out, "  {cmd}")?;
                writeln!(out, "  {caret}")?;
            }
            match e.subsystem {
                Some(sub) => writeln!(out, "  {sub}: error: {}", e.message)?,
                None => writeln!(out, "  error: {} (the kernel logs nothing)", e.message)?,
            }
            if let Some(h) = &e.hint {
                writeln!(out, "  hint: {h}")?;
            }
        }
    }
    if !c.unchecked.is_empty() {
        let list = crate::code::not_checked(c, why);
        writeln!(out, "  not checked: {}", list.join("; "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &str) -> serde_json::Value {
        let c = check_line(line, Target::new(Arch::X86_64), &Offline);
        json_line(line, &c, Arch::X86_64, None)
    }

    #[test]
    fn json_lines() {
        let v = json("p:myev do_sys_openat2+16");
        assert_eq!(v["accepted"], true);
        assert_eq!(v["normalized"], "p:kprobes/myev do_sys_openat2+16");
        assert_eq!(v["error"], serde_json::Value::Null);
        let v = json("p:myev do_sys_openat2 x=%rdi");
        assert_eq!(v["accepted"], false);
        assert_eq!(v["normalized"], serde_json::Value::Null);
        assert_eq!(v["error"]["message"], "Invalid register name");
        assert_eq!(v["error"]["pos"], 24);
        assert_eq!(v["error"]["logged"], true);
    }

    #[test]
    fn human_report() {
        let line = "p vfs_read $retval";
        let c = check_line(line, Target::new(Arch::X86_64), &Offline);
        let mut out = Vec::new();
        human(&mut out, line, &c, Arch::X86_64, None).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "rejected: p vfs_read $retval");
        assert_eq!(lines[1], "  p vfs_read $retval");
        assert_eq!(lines[2], "             ^");
        assert_eq!(
            lines[3],
            "  trace_kprobe: error: $retval is not available on probe"
        );
        assert!(lines[4].starts_with("  hint: "));
    }
}
