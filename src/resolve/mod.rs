//! `ktrace trace`'s definition step, orchestrated: user specs → the
//! convenience syntax ([`spec`]) → kernel syntax in the session's group →
//! checked once by ktrace-probe against the running kernel ([`live`]) →
//! typed probes named into the session's group → `session::Probe`s, which the
//! session renders when it writes them. Also the `--stack` triggers.
//!
//! Nothing is written to the kernel before every definition passed its
//! check; the kernel's tables come from one [`KernelView`]. One rule is
//! left to the kernel, which applies it itself: a notrace function (or an
//! ftrace call site), whose table (available_filter_functions) is the
//! costliest read of a command's start; after a refusal the rule says why
//! (`live::kernel_refusal_reason`). `ktrace check` applies every rule.

pub mod live;
pub mod spec;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ktrace_probe::fetch::MAX_TRACE_ARGS;
use ktrace_probe::{Arch, Definition, ProbeDef, Target, naming};
use ktrace_symbols::KernelView;

use crate::session::{Probe, Session};
use ktrace_probe::error::rejection_text;
use live::{LiveEnv, live_target};
use spec::{LD_SO_CACHE, Resolver};

pub use spec::TRACE_HELP;

/// Resolves the user's specs into the session's group, checks each
/// resulting definition once against the running kernel (seen through
/// `view`) and names the events. Nothing is written; the first rejection is
/// returned with its caret. A kernel that silently drops arguments past
/// the 128th gets a warning.
pub fn build(
    sess: &Session,
    specs: &[String],
    pid: Option<u32>,
    view: &KernelView,
) -> anyhow::Result<Vec<Probe>> {
    let arch = Arch::native().context("unknown machine architecture")?;
    let kernel_btf = ktrace_symbols::btf_types::KernelBtf::running();
    let resolver = Resolver {
        arch,
        pid,
        ldcache: PathBuf::from(LD_SO_CACHE),
        kernel: view,
        group: sess.name().to_string(),
        btf: kernel_btf.as_ref(),
    };
    let outcome = resolver.resolve(specs)?;
    for n in &outcome.notes {
        crate::say!("{n}");
    }
    // The checks need counts of a few kernel names: one cheap kallsyms pass.
    let wanted: Vec<&str> = outcome
        .defs
        .iter()
        .flat_map(|d| d.symbols.iter().map(String::as_str))
        .collect();
    let counts = match wanted.is_empty() {
        true => None,
        false => Some(
            view.symbol_counts(wanted)
                .context("kernel symbols are needed to check kernel probes")?,
        ),
    };
    let tracefs = view.tracefs().context("tracefs is not mounted")?;
    let env = LiveEnv {
        symbols: counts.as_ref(),
        tracefs,
        btf: kernel_btf.as_ref(),
        view: Some(view),
        frozen: None,
        kernel_decides_ftrace: true,
        no_suggestions: false,
    };
    let target = live_target(arch, view);
    // BTF names (`file->f_path.dentry`, `$arg*`, typed `$retval`): checked
    // as the kernel reads them where its README says it reads them, else
    // compiled with the kernel's BTF into the classic fetch language.
    let mut route = ktrace_symbols::route::Route::live(target.kernel, view.features());
    let code = ktrace_symbols::code::Source::live(view);
    let mut defs = Vec::with_capacity(outcome.defs.len());
    let mut systems = Vec::with_capacity(outcome.defs.len());
    for r in &outcome.defs {
        let (def, system) = check_def(r, sess, view, target, &env, &mut route, &code)?;
        defs.push(def);
        systems.push((system, r.input.clone()));
    }
    let taken: Vec<String> = sess
        .probes()
        .iter()
        .map(|p| p.event().to_string())
        .collect();
    naming::name_into_group(&mut defs, sess.name(), &taken);
    Ok(defs
        .into_iter()
        .zip(systems)
        .map(|(def, (system, input))| Probe { def, system, input })
        .collect())
}

/// One resolved definition through its checks, in order: its `--group`
/// system, an offset past the function's end, the kernel's rules (or the
/// BTF route's compilation), the function's code at SYM+OFF, a uprobe past
/// its file's end or inside an instruction, the arguments a kernel ignores,
/// the event's name. Returns the checked probe and its system.
fn check_def(
    r: &spec::Resolved,
    sess: &Session,
    view: &KernelView,
    target: Target,
    env: &LiveEnv<'_>,
    route: &mut ktrace_symbols::route::Route,
    code: &ktrace_symbols::code::Source<'_>,
) -> anyhow::Result<(ProbeDef, String)> {
    let system = match spec::written_group(&r.input) {
        // shown and recorded as the probe's system: checked as `--group`
        Some(g) => crate::cli::group(g).map_err(|e| anyhow::anyhow!("{:?}: {e}", r.input))?,
        None => sess.system().to_string(),
    };
    let system = system.as_str();
    let shown = Some((sess.name(), system));
    // An offset past the function's end, said before the kernel's own
    // verdict on whatever lies there (x86_64 5.10: a notrace function).
    if let Some((symbol, offset, size)) = past_function_end(view, &r.line) {
        bail!(
            "definition rejected before anything was written: {}\n  +{offset:#x} is past the \
             end of {symbol} ({size:#x} bytes): the probe would land in another function \
             (ktrace disasm {symbol} lists the offsets a probe can take)",
            r.input
        );
    }
    let defined = ktrace_symbols::define::define(&r.line, target, env, route, code)
        .map_err(|e| anyhow::anyhow!("{}", rejection_text(&r.input, &e, shown)))?;
    if let Some(classic) = &defined.compiled_with_btf {
        crate::say!("{} compiled with BTF: {classic}", r.input);
    }
    let mut def = match defined.checked.definition {
        Ok(Definition::Probe(p)) => p,
        Ok(_) => bail!("{:?} is not a probe definition", r.input),
        Err(e) => bail!("{}", rejection_text(&r.input, &e, shown)),
    };
    // A uprobe past the end of its file: the kernel takes the
    // definition and refuses to switch it on ("Invalid argument").
    if let ktrace_probe::ProbeKind::Uprobe { path, offset, .. } = &def.kind
        && let Ok(meta) = std::fs::metadata(path)
        && meta.is_file()
        && *offset >= meta.len()
    {
        bail!(
            "definition rejected before anything was written: {}\n  offset {offset:#x} is \
             past the end of {path} ({} bytes): a uprobe goes on an instruction of the file \
             (ktrace syms {path} lists its functions)",
            r.input,
            meta.len()
        );
    }
    // A uprobe inside an instruction: the kernel takes it, the traced
    // program dies of SIGILL; ktrace refuses it.
    if let ktrace_probe::ProbeKind::Uprobe { path, offset, .. } = &def.kind
        && let Err(why) = ktrace_symbols::code::uprobe_boundary(Path::new(path), *offset)
    {
        bail!(
            "definition rejected before anything was written: {}\n  {why}",
            r.input
        );
    }
    if def.ignored_args > 0 {
        crate::eline!(
            "ktrace: warning: {:?}: this kernel keeps the first {MAX_TRACE_ARGS} arguments \
             and ignores the other {} without a word; they will not be recorded",
            r.input,
            def.ignored_args
        );
    }
    if def.auto_event {
        def.event = r
            .auto_name
            .clone()
            .unwrap_or_else(|| naming::auto_name(&def));
    }
    // tracefs keeps the files `enable` and `filter` beside a group's
    // events: an event of that name is created but cannot be switched
    // on ("Is a directory").
    if matches!(def.event.as_str(), "enable" | "filter") {
        bail!(
            "{:?}: an event named {:?} clashes with the file of that name in its group's \
             tracefs directory, so it could not be switched on: choose another name",
            r.input,
            def.event
        );
    }
    Ok((def, system.to_string()))
}

/// `SYM+OFF` of a kprobe line (`p[:EV] SYM+OFF ...`, `r...`) whose offset is
/// at or past the end of SYM: the symbol, the offset and SYM's size.
fn past_function_end(view: &KernelView, line: &str) -> Option<(String, u64, u64)> {
    let mut words = line.split_whitespace();
    let head = words.next()?;
    if !(head.starts_with('p') || head.starts_with('r')) {
        return None;
    }
    let place = words.next()?;
    let place = place.strip_suffix("%return").unwrap_or(place);
    let (symbol, off) = place.split_once('+')?;
    if symbol.is_empty() || symbol.contains('/') || symbol.starts_with("0x") {
        return None;
    }
    let offset = match off.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => off.parse().ok()?,
    };
    let size = function_size(view, symbol)?;
    (offset > 0 && offset >= size).then(|| (symbol.to_string(), offset, size))
}

/// The size of kernel function `symbol` (`NAME` or `MOD:NAME`): up to the
/// next symbol in kallsyms.
fn function_size(view: &KernelView, symbol: &str) -> Option<u64> {
    let (module, name) = match symbol.split_once(':') {
        Some((m, n)) => (Some(m), n),
        None => (None, symbol),
    };
    let ks = view.kallsyms().ok()?;
    if ks.addresses_hidden() {
        return None;
    }
    let sym = ks.by_name(name, module).into_iter().find(|s| s.is_text())?;
    ks.extent(sym)
}

/// Creates the probes, in chunks with a progress line when there are many
/// and stderr is a terminal.
pub fn create(
    sess: &mut crate::session::Session,
    probes: Vec<crate::session::Probe>,
    stop: &dyn Fn() -> Option<i32>,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    // Chunks small enough that a signal is seen within a few ms of writes;
    // the progress line only on a terminal.
    const CHUNK: usize = 25;
    let total = probes.len();
    // Many probes: a progress line, redrawn on a terminal, else one line
    // a second.
    let progress = total > 100;
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut last = started;
    let mut done = 0;
    let mut rest = probes;
    while !rest.is_empty() {
        if let Some(sig) = stop() {
            return Err(crate::session::Interrupted(sig).into());
        }
        let tail = rest.split_off(rest.len().min(CHUNK));
        done += rest.len();
        sess.create(rest)?;
        if progress && terminal {
            crate::eput!("\rktrace: created {done}/{total} probes");
        } else if progress && (last.elapsed().as_secs() >= 1 || done == total) {
            last = std::time::Instant::now();
            crate::eline!(
                "ktrace: created {done}/{total} probes ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
        }
        rest = tail;
    }
    if progress && terminal {
        crate::eline!("");
    }
    Ok(())
}

/// The trigger text for `--stack`. Always with a condition: the kernel
/// calls a trigger without one before it applies the pid lists
/// (set_event_pid, set_event_notrace_pid), so stacks would come from every
/// task, ktrace's own included; a conditional trigger runs on the committed
/// record only, after the event, and with the event's own filter it keeps
/// exactly the stacks of the events shown.
pub fn stack_trigger(filter: Option<&str>) -> String {
    match filter.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => format!("stacktrace if {f}"),
        None => "stacktrace if common_pid >= 0".to_string(),
    }
}

/// `--stack`: a `stacktrace` trigger on each kernel probe (ftrace then
/// records a `kernel_stack` event after each hit), and the instance option
/// `userstacktrace` when there are user probes (a `user_stack` event after
/// each event of the instance). A kernel without user stack support says
/// so and tracing goes on without user stacks.
pub fn enable_stacks(
    sess: &crate::session::Session,
    inst: &ktrace_tracefs::Instance,
    filter: Option<&str>,
) -> anyhow::Result<()> {
    let trigger = stack_trigger(filter);
    let mut user = false;
    for p in sess.probes() {
        if p.kind().is_uprobe() {
            user = true;
        } else {
            inst.add_trigger(sess.name(), p.event(), &trigger)
                .with_context(|| format!("{trigger:?} trigger on {}", p.event()))?;
        }
    }
    if user {
        if !inst.has_option("userstacktrace") {
            crate::eline!(
                "ktrace: note: this kernel records no user stacks (no options/userstacktrace: \
                 built without CONFIG_USER_STACKTRACE_SUPPORT); uprobe events come without stacks"
            );
        } else if let Err(e) = inst.set_option("userstacktrace", true) {
            crate::say!("note: user stacks unavailable: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_triggers_are_conditional() {
        assert_eq!(stack_trigger(None), "stacktrace if common_pid >= 0");
        assert_eq!(stack_trigger(Some(" ")), "stacktrace if common_pid >= 0");
        assert_eq!(
            stack_trigger(Some("fn == \"/etc/hostname\"")),
            "stacktrace if fn == \"/etc/hostname\""
        );
    }
}
