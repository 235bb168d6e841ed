//! The tracing session: one event group and one instance owned by this
//! process, created, run and always torn down.
//!
//! Lifecycle: build (rewrite definitions into the session's group) → create
//! (write them; a rejected one leaves nothing behind and carries the kernel's
//! error_log entry) → enable (in the session's own instance only) → run →
//! stop → destroy (remove the instance, then the whole group at once, see
//! `ktrace_tracefs::owner`). Teardown runs on every exit path: normal end,
//! Ctrl-C/SIGTERM/SIGHUP (flags polled by the run loop), a broken output pipe
//! (the loop sees EPIPE), a panic (a panic hook plus the `Drop` guard).
//! After SIGKILL, [`open_tracefs`] — used by every subcommand that touches
//! tracefs — reaps what dead sessions left. This module does not read or
//! decode events: that is ktrace-stream (the instance's binary ring
//! buffers, merged and decoded once), driven by `crate::live`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use anyhow::Context;
use ktrace_probe::{ProbeDef, ProbeKind};
use ktrace_tracefs::{
    DynEvents, Instance, NewEvent, ProbeFile, SessionName, discover, owner, profile,
};

/// Sessions of this process not yet torn down: what the panic hook cleans.
static LIVE: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());
static HOOKS: Once = Once::new();

/// Finds (or mounts) tracefs and reaps what dead ktrace sessions left
/// behind, reporting each reaped session on stderr.
pub fn open_tracefs() -> anyhow::Result<PathBuf> {
    let root = discover::find_or_mount()?;
    reap_and_report(&root);
    Ok(root)
}

/// Reaps sessions of dead owners and says so on stderr; returns how many.
pub fn reap_and_report(root: &Path) -> usize {
    // (a dead kernel-engine session's hist triggers take long to remove)
    let mut progress: Option<(String, crate::progress::Progress)> = None;
    let reaped = owner::reap_reporting(root, &mut |name, done, total| {
        if progress.as_ref().is_none_or(|(n, _)| n != name) {
            progress = Some((
                name.to_string(),
                crate::progress::Progress::new(
                    format!(
                        "removing the hist triggers and synthetic events of dead session {name}"
                    ),
                    total,
                ),
            ));
        }
        if let Some((_, p)) = progress.as_mut() {
            p.set(done, total);
        }
    });
    drop(progress);
    match reaped {
        Ok(reaped) => {
            for r in &reaped {
                match &r.result {
                    Ok(t) => crate::eline!(
                        "ktrace: removed leftovers of dead session {} ({} event(s){})",
                        r.name,
                        t.events_removed,
                        if t.instance_removed { ", instance" } else { "" }
                    ),
                    Err(e) => crate::say!("cannot remove dead session {}: {e}", r.name),
                }
            }
            reaped.len()
        }
        Err(e) => {
            crate::say!("cannot look for leftovers of dead sessions: {e}");
            0
        }
    }
}

/// Installs, once, the panic hook that tears down every live session.
fn install_panic_hook() {
    HOOKS.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            teardown_all_live();
        }));
    });
}

fn teardown_all_live() {
    let live = match LIVE.try_lock() {
        Ok(mut l) => std::mem::take(&mut *l),
        Err(_) => return,
    };
    for (root, name) in live {
        // While unwinding, the event reader may still hold the instance
        // open (EBUSY); the session's `Drop` then retries once it is closed.
        if owner::teardown(&root, &name).is_err() {
            LIVE.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((root, name));
        }
    }
}

fn unregister(name: &str) -> bool {
    let mut l = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    let before = l.len();
    l.retain(|(_, n)| n != name);
    l.len() != before
}

/// Which signals ended the run; set by handlers, polled by the loop.
#[derive(Debug, Clone)]
pub struct Signals {
    flags: Vec<(i32, Arc<AtomicBool>)>,
}

impl Signals {
    /// Catches SIGINT, SIGTERM and SIGHUP from now on. SIGPIPE stays ignored
    /// (Rust's default), so a closed output shows up as EPIPE.
    pub fn catch() -> anyhow::Result<Self> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut flags = Vec::new();
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let f = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(sig, Arc::clone(&f))
                .with_context(|| format!("cannot catch signal {sig}"))?;
            flags.push((sig, f));
        }
        Ok(Self { flags })
    }

    /// The first caught signal, if any.
    pub fn caught(&self) -> Option<i32> {
        self.flags
            .iter()
            .find(|(_, f)| f.load(Ordering::Relaxed))
            .map(|(s, _)| *s)
    }
}

/// Setup was stopped by signal N before tracing began (the session is
/// torn down as it is dropped).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by signal {} while setting up", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// Whether the kernel whose kallsyms is `text` has event probes built in
/// (CONFIG_EPROBE_EVENTS): `eprobe_dyn_event_create` and its siblings are
/// their `dynamic_events` hooks, taken by address, so never inlined away
/// (a suffix such as clang's `.llvm.N` is allowed). `None` when `text` is
/// not a kernel's symbol table (no `_stext`).
pub fn eprobes_built(text: &str) -> Option<bool> {
    eprobes_built_in(text.lines().filter_map(|l| l.split_whitespace().nth(2)))
}

/// [`eprobes_built`] over a table's symbol names.
pub fn eprobes_built_in<'a>(names: impl Iterator<Item = &'a str>) -> Option<bool> {
    let mut stext = false;
    for name in names {
        if name.starts_with("eprobe_dyn_event_") {
            return Some(true);
        }
        stext |= name == "_stext";
    }
    stext.then_some(false)
}

/// One probe of the session: its checked, typed definition (group = the
/// session's name, event named by `resolve::build`). The text written to the
/// kernel is rendered from it; nothing re-parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The definition (for a BTF-named definition: as the kernel reads it
    /// where it reads BTF names itself, else the classic form ktrace
    /// compiled, which records the same fields).
    pub def: ProbeDef,
    /// The system ktrace shows and writes for it (text, JSON, raw,
    /// recordings, Perfetto, errors): the group the user wrote in the
    /// definition, else the session's [`Session::system`]. The kernel holds
    /// the probe in the session's own group (`def.group`), which changes
    /// every run.
    pub system: String,
    /// The user's definition as typed (what a rejection echoes).
    pub input: String,
}

impl Probe {
    /// Event name inside the session's group.
    pub fn event(&self) -> &str {
        &self.def.event
    }

    /// The kind and place.
    pub fn kind(&self) -> &ProbeKind {
        &self.def.kind
    }

    /// The probe file a kernel without `dynamic_events` takes it in.
    pub fn file(&self) -> ProbeFile {
        match self.def.kind.is_uprobe() {
            true => ProbeFile::UprobeEvents,
            false => ProbeFile::KprobeEvents,
        }
    }

    /// The definition as written to the kernel.
    pub fn definition(&self) -> String {
        ktrace_probe::render::definition(&self.def)
    }

    /// The definition as ktrace shows and records it: the kernel's line
    /// with the stable system in place of the session's group.
    pub fn shown_definition(&self) -> String {
        let mut def = self.def.clone();
        def.group.clone_from(&self.system);
        ktrace_probe::render::definition(&def)
    }
}

/// The kernel's rejection of one of `probes` (its error_log entry names
/// the line it refused) said as a rejected definition is said before
/// anything is written: the user's definition as typed, then the line with
/// the stable system in place of the session's `group` and the kernel's
/// caret moved with it, then the kernel's message. Other errors as they
/// are.
fn rejected_by_kernel(
    root: &Path,
    probes: &[Probe],
    group: &str,
    e: ktrace_tracefs::Error,
) -> anyhow::Error {
    let Some(entry) = e.kernel_entry() else {
        return e.into();
    };
    let Some(p) = probes
        .iter()
        .find(|p| p.definition() == entry.command.trim())
    else {
        return e.into();
    };
    let mut text = kernel_rejection_text(p, group, entry);
    // The rules a definition about to be written skips (the ftrace
    // locations: resolve::live::LiveEnv::kernel_decides_ftrace) say why,
    // now that the kernel refused it.
    if let Some(why) = crate::resolve::live::kernel_refusal_reason(
        &ktrace_symbols::KernelView::running(Some(root)),
        p.kind(),
    ) {
        text.push_str(&format!("\n  hint: {why}"));
    }
    anyhow::anyhow!("{text}")
}

fn kernel_rejection_text(p: &Probe, group: &str, entry: &ktrace_tracefs::ErrorLogEntry) -> String {
    let (cmd, caret) = ktrace_probe::naming::shown_command(
        &entry.command,
        entry.caret.unwrap_or(0),
        group,
        &p.system,
    );
    let mut s = format!(
        "the kernel rejected a probe definition: {}\n  {cmd}",
        p.input
    );
    if entry.caret.is_some() {
        s.push_str(&format!("\n  {}^", " ".repeat(caret)));
    }
    s.push_str(&format!("\n  {}: error: {}", entry.location, entry.message));
    s
}

/// The system ktrace shows when neither `--group` nor the definition
/// names one.
pub const DEFAULT_SYSTEM: &str = "ktrace";

/// A session: its group and instance share the session's name.
#[derive(Debug)]
pub struct Session {
    root: PathBuf,
    /// tracefs held open: teardown reaches it even if the path stops
    /// leading there (a lazy unmount while tracing).
    pinned: ktrace_tracefs::pin::Pinned,
    name: String,
    /// The system shown for probes whose definition names no group.
    system: String,
    probes: Vec<Probe>,
    instance: Option<Instance>,
    /// A trigger was added (its events are soft-disabled, not detached,
    /// when switched off).
    triggered: bool,
    /// `stop` switched the events off: what `disturbance` found just
    /// before (their `enable` files say nothing about others from then on).
    before_stop: Option<Option<String>>,
    destroyed: bool,
}

impl Session {
    /// A new, empty session in the tracefs at `root`. Nothing is written yet.
    pub fn new(root: &Path) -> anyhow::Result<Self> {
        install_panic_hook();
        let name = SessionName::for_this_process()?.to_string();
        LIVE.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((root.to_path_buf(), name.clone()));
        let pinned = ktrace_tracefs::pin::Pinned::new(root)?;
        Ok(Self {
            root: root.to_path_buf(),
            pinned,
            name,
            system: DEFAULT_SYSTEM.to_string(),
            probes: Vec::new(),
            instance: None,
            triggered: false,
            before_stop: None,
            destroyed: false,
        })
    }

    /// The session's group and instance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The system shown for probes whose definition names no group
    /// (`ktrace`, or `--group NAME`).
    pub fn system(&self) -> &str {
        &self.system
    }

    /// Sets [`Session::system`] (`--group NAME`, checked by the argument
    /// parser); before any probe is built.
    pub fn set_system(&mut self, system: Option<&str>) {
        if let Some(s) = system {
            self.system = s.to_string();
        }
    }

    /// The probes created so far.
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// Writes `probes` (named into this session's group by
    /// `resolve::build`) to the kernel. If one is rejected, none stays and
    /// the error carries the kernel's own message and caret.
    pub fn create(&mut self, probes: Vec<Probe>) -> anyhow::Result<()> {
        // An event probe goes to dynamic_events and needs neither kprobe
        // nor uprobe events (a kernel without kprobes may have eprobes).
        let is_eprobe = |p: &Probe| matches!(p.kind(), ProbeKind::Eprobe { .. });
        let mut files: Vec<ProbeFile> = probes
            .iter()
            .filter(|p| !is_eprobe(p))
            .map(Probe::file)
            .collect();
        files.sort_by_key(|f| f.name());
        files.dedup();
        for f in files {
            discover::require(&self.root, f)?;
        }
        if probes.iter().any(is_eprobe) {
            discover::require_eprobes(&self.root)?;
            // The README lists `e:` whenever probe events are built, with or
            // without CONFIG_EPROBE_EVENTS (the 6.18 host): kallsyms tells.
            if let Ok(text) = std::fs::read_to_string("/proc/kallsyms")
                && eprobes_built(&text) == Some(false)
            {
                anyhow::bail!(
                    "this kernel has no event probes (e:): it was built without \
                     CONFIG_EPROBE_EVENTS (/proc/kallsyms has no eprobe_dyn_event_create; \
                     its tracefs README lists e: regardless)"
                );
            }
        }
        let defs: Vec<NewEvent> = probes
            .iter()
            .map(|p| NewEvent {
                group: p.def.group.clone(),
                event: p.def.event.clone(),
                file: p.file(),
                line: p.definition(),
            })
            .collect();
        if let Some(d) = defs.iter().find(|d| d.group != self.name) {
            anyhow::bail!("{}: not in this session's group {}", d.line, self.name);
        }
        DynEvents::new(&self.root)
            .create(&defs)
            .map_err(|e| rejected_by_kernel(&self.root, &probes, &self.name, e))?;
        self.probes.extend(probes);
        Ok(())
    }

    /// Creates the session's own instance.
    pub fn create_instance(&mut self) -> anyhow::Result<&Instance> {
        if self.instance.is_none() {
            self.instance = Some(Instance::create(&self.root, &self.name)?);
        }
        Ok(self.instance.as_ref().expect("just created"))
    }

    fn inst(&self) -> anyhow::Result<&Instance> {
        self.instance
            .as_ref()
            .context("the session has no instance yet")
    }

    /// Sets `filter` on every probe, in the session's instance.
    pub fn set_filter(&self, filter: &str) -> anyhow::Result<()> {
        let inst = self.inst()?;
        for p in &self.probes {
            inst.set_filter(&self.name, p.event(), filter)
                .with_context(|| format!("filter on {}", p.event()))?;
        }
        Ok(())
    }

    /// Adds `trigger` to every probe, in the session's instance.
    pub fn add_trigger(&mut self, trigger: &str) -> anyhow::Result<()> {
        let inst = self
            .instance
            .as_ref()
            .context("the session has no instance yet")?;
        for p in &self.probes {
            let Err(err) = inst.add_trigger(&self.name, p.event(), trigger) else {
                self.triggered = true;
                continue;
            };
            // The kernel logs nothing for a bad trigger filter; its filter
            // file does, so ask it there (own instance, nothing enabled yet).
            let diagnosis = trigger
                .split_once(" if ")
                .and_then(|(_, f)| inst.diagnose_filter(&self.name, p.event(), f.trim()));
            return Err(match diagnosis {
                Some(d) => anyhow::Error::new(d).context(format!(
                    "the kernel rejected the trigger {trigger:?} on {} ({}); its `if` part, \
                     tried as a filter",
                    p.event(),
                    err.errno()
                        .map_or("no errno".into(), |e| format!("errno {e}"))
                )),
                None => anyhow::Error::new(err).context(format!("trigger on {}", p.event())),
            });
        }
        Ok(())
    }

    /// Enables every probe, in the session's instance only (one write for
    /// the whole group).
    pub fn enable(&self) -> anyhow::Result<()> {
        self.inst()?.set_enabled(&self.name, None, true)?;
        Ok(())
    }

    /// Stops recording into the instance (cheap; probes stay attached).
    ///
    /// With triggers, the events are switched off first: a `stacktrace`
    /// trigger writes its stack after the event is committed, so a hit in
    /// flight when `tracing_on` goes to 0 would keep its event and lose its
    /// stack (seen on a 5.10 guest: 902 stacks for 903 events). Switched
    /// off, a triggered event is only soft-disabled (cheap, still
    /// attached): hits that already passed the check finish, event and
    /// stack, while ktrace writes `tracing_on`; later ones are discarded,
    /// and the stacks the kernel still writes for them own no event shown.
    pub fn stop(&mut self) {
        if self.triggered && self.before_stop.is_none() && self.instance.is_some() {
            self.before_stop = Some(self.disturbance(false));
        }
        if let Some(i) = &self.instance {
            if self.triggered {
                let _ = i.set_enabled(&self.name, None, false);
            }
            let _ = i.set_tracing_on(false);
        }
    }

    /// What someone else did to the session while it ran (`trace-cmd
    /// reset` switches off the events of every instance and deletes every
    /// dynamic event): the message, or `None` while it is intact. `quick`
    /// reads only the group's `enable` file (one read, for a periodic
    /// check; a soft-disabled event still counts as enabled there);
    /// otherwise every probe's.
    pub fn disturbance(&self, quick: bool) -> Option<String> {
        if let Some(before) = &self.before_stop {
            return before.clone();
        }
        let inst = self.instance.as_ref()?;
        if let ktrace_tracefs::pin::Reach::Moved { .. } = self.pinned.reach() {
            // tracefs itself went (unmounted): `destroy` says so
            return None;
        }
        if !inst.exists() {
            return Some(format!(
                "ktrace's instance {} was removed by someone else while tracing; nothing was \
                 recorded from then on",
                self.name
            ));
        }
        if quick {
            // no probes (the function tracer's route): no group to check
            return (!self.probes.is_empty() && !inst.has_group(&self.name)).then(|| {
                format!(
                    "ktrace's probes were removed by someone else while tracing: all of group \
                     {} (trace-cmd reset deletes every dynamic event); nothing was recorded \
                     for them from then on",
                    self.name
                )
            });
        }
        let mut deleted = Vec::new();
        let mut off = Vec::new();
        for p in &self.probes {
            match inst.event_enabled(&self.name, p.event()) {
                Ok(None) => deleted.push(p.event()),
                Ok(Some(false)) => off.push(p.event()),
                _ => {}
            }
        }
        let mut parts = Vec::new();
        if !deleted.is_empty() {
            parts.push(format!(
                "ktrace's probes were removed by someone else while tracing: {} (trace-cmd \
                 reset deletes every dynamic event)",
                deleted.join(", ")
            ));
        }
        if !off.is_empty() {
            parts.push(format!(
                "ktrace's probes were switched off in its instance by someone else while \
                 tracing: {}",
                off.join(", ")
            ));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "{}; nothing was recorded for them from then on",
                parts.join("; ")
            )
        })
    }

    /// Hits and misses of this session's probes.
    pub fn profile(&self) -> anyhow::Result<Vec<profile::ProbeProfile>> {
        Ok(profile::read_group(&self.root, &self.name)?)
    }

    /// Removes the instance and the group. Safe to call more than once.
    pub fn destroy(&mut self) -> anyhow::Result<Cleanup> {
        if self.destroyed {
            return Ok(Cleanup::default());
        }
        self.destroyed = true;
        let still_live = unregister(&self.name);
        if !still_live {
            // The panic hook got here first.
            return Ok(Cleanup::default());
        }
        match self.pinned.reach() {
            ktrace_tracefs::pin::Reach::Path(p) => Ok(Cleanup {
                removed: owner::teardown(&p, &self.name)?,
                moved: None,
            }),
            ktrace_tracefs::pin::Reach::Moved { was, now } => {
                let removed = owner::teardown(&now, &self.name)?;
                Ok(Cleanup {
                    removed,
                    moved: Some(format!(
                        "tracefs at {} was unmounted or replaced while tracing; ktrace \
                         removed its session through the mount it held open",
                        was.display()
                    )),
                })
            }
        }
    }
}

/// What [`Session::destroy`] did.
#[derive(Debug, Default)]
pub struct Cleanup {
    /// What was removed.
    pub removed: owner::Teardown,
    /// tracefs was unmounted or replaced while tracing (the cleanup went
    /// through the mount the session held open): what to tell the user.
    pub moved: Option<String>,
}

impl Cleanup {
    /// The cleanup line's words after "removed": `N probe(s)[ and the
    /// instance]`, and how when tracefs had gone.
    pub fn removed_words(&self, what: &str) -> String {
        format!(
            "{} {what}{}",
            self.removed.events_removed,
            if self.removed.instance_removed {
                " and the instance"
            } else {
                ""
            }
        )
    }

    /// Where the cleanup went, when not through tracefs's usual path.
    pub fn via(&self) -> &'static str {
        match self.moved {
            Some(_) => " (through the tracefs mount ktrace held open)",
            None => "",
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            crate::say!("cleanup of {} failed: {e:#}", self.name);
        }
    }
}

/// Counts of what a run saw, for the summary.
#[derive(Debug, Default)]
pub struct Tally {
    /// Events handed to the output.
    pub events: u64,
    /// Events per probe.
    pub per_event: BTreeMap<String, u64>,
}

impl Tally {
    /// Counts one event of probe `event` (allocates only for a new name).
    pub fn count(&mut self, event: &str) {
        self.events += 1;
        match self.per_event.get_mut(event) {
            Some(n) => *n += 1,
            None => {
                self.per_event.insert(event.to_string(), 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Probe, eprobes_built, kernel_rejection_text};

    /// A rejection the kernel wrote at creation (error_log, in its format:
    /// `[ts] LOCATION: error: MESSAGE`, `  Command: LINE`, caret line) is
    /// said with the user's definition as typed and the stable system, the
    /// caret still under the byte the kernel pointed at (issue 21 item 2:
    /// it showed `p:ktrace_p…/ev …`, the session's group).
    #[test]
    fn kernel_rejection_echoes_the_definition_with_the_stable_system() {
        let group = "ktrace_p4242_s777_n4026531836";
        let line = format!("p:{group}/ev /tmp/hn:0x1129 a=%di:u32");
        let caret = line.find("%di").unwrap();
        let log = format!(
            "[ 1234.567890] trace_uprobe: error: Invalid fetch argument\n  Command: {line}\n{}^\n",
            " ".repeat("  Command: ".len() + caret)
        );
        let entry = &ktrace_tracefs::error_log::parse(&log)[0];
        assert_eq!(entry.caret, Some(caret));
        let probe = Probe {
            def: ktrace_probe::parse_listed(&line).unwrap(),
            system: "app".into(),
            input: "p:ev /tmp/hn:hn_fn a=%di:u32".into(),
        };
        assert_eq!(probe.definition(), line);
        let text = kernel_rejection_text(&probe, group, entry);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "the kernel rejected a probe definition: p:ev /tmp/hn:hn_fn a=%di:u32"
        );
        assert_eq!(lines[1], "  p:app/ev /tmp/hn:0x1129 a=%di:u32");
        assert_eq!(&lines[1][lines[2].find('^').unwrap()..], "%di:u32");
        assert_eq!(lines[3], "  trace_uprobe: error: Invalid fetch argument");
        assert!(!text.contains(group), "{text}");
    }

    #[test]
    fn eprobe_refused_on_a_kernel_built_without_eprobe_events() {
        // Excerpts of /proc/kallsyms: the 6.18 host (CONFIG_EPROBE_EVENTS
        // unset, README lists e: anyway) and a kernel with eprobes.
        let without = "ffffffff81000000 T _stext\nffffffff814c4d40 T traceprobe_parse_event_name\n";
        let with = "ffffffff81000000 T _stext\nffffffff814d0000 t eprobe_dyn_event_create\n";
        let lto = "0000000000000000 T _stext\n0000000000000000 t eprobe_dyn_event_show.llvm.12\n";
        assert_eq!(eprobes_built(without), Some(false));
        assert_eq!(eprobes_built(with), Some(true));
        assert_eq!(eprobes_built(lto), Some(true));
        assert_eq!(eprobes_built(""), None);
    }
}
