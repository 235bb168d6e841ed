//! Which modules the session's kernel probes live in, and whether each one
//! stayed loaded while tracing.
//!
//! When a module is unloaded, the kernel keeps the kprobe events placed in
//! it (they stay in `dynamic_events`, enabled) but marks their kprobes gone
//! (`[GONE]` in debugfs `kprobes/list`): they never fire again, and nothing
//! in tracefs says so. ktrace notes, when the probes are enabled, the load
//! address `/proc/modules` gives each module (its identity: a module loaded
//! again gets new code), and compares at the end of the run. It reads
//! /proc/modules only (not tracefs); which module a symbol lives in comes
//! from the kernel view's kallsyms.

use std::collections::BTreeMap;

use ktrace_probe::ProbeKind;
use ktrace_probe::ast::KprobePlace;
use ktrace_symbols::KernelView;

/// A module some probes live in, as it was when tracing started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    /// Its line's load address in /proc/modules (`None`: not listed then).
    addr: Option<String>,
    /// The session's events placed in it.
    events: Vec<String>,
}

/// The modules of a session's kernel probes.
#[derive(Debug, Clone, Default)]
pub struct ModuleWatch {
    modules: BTreeMap<String, Watched>,
}

/// What became of a module during the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// No longer loaded.
    Unloaded,
    /// Unloaded and loaded again (another load address).
    Reloaded,
}

impl ModuleWatch {
    /// Notes the modules of `probes` (event name, kind): a symbol written
    /// `MOD:SYM`, or one kallsyms lists only in modules. Empty when there
    /// are no kernel probes in modules (or kallsyms cannot be read: then
    /// nothing is watched).
    pub fn new<'p>(
        probes: impl IntoIterator<Item = (&'p str, &'p ProbeKind)>,
        view: &KernelView,
    ) -> ModuleWatch {
        let mut placed: Vec<(String, Option<String>, String)> = Vec::new();
        for (event, kind) in probes {
            if let ProbeKind::Kprobe {
                place: KprobePlace::Symbol { symbol, .. },
                ..
            } = kind
            {
                match symbol.split_once(':') {
                    Some((m, s)) => {
                        placed.push((event.to_string(), Some(m.to_string()), s.to_string()))
                    }
                    None => placed.push((event.to_string(), None, symbol.clone())),
                }
            }
        }
        let mut watch = ModuleWatch::default();
        // no module loaded: none can go (and kallsyms is not read)
        let loaded = std::fs::read_to_string("/proc/modules").unwrap_or_default();
        if placed.is_empty() || loaded.trim().is_empty() {
            return watch;
        }
        let lookups: Vec<&str> = placed
            .iter()
            .filter(|(_, m, _)| m.is_none())
            .map(|(_, _, s)| s.as_str())
            .collect();
        let counts = if lookups.is_empty() {
            None
        } else {
            view.symbol_counts(lookups.iter().copied()).ok()
        };
        for (event, module, sym) in placed {
            let module = match module {
                Some(m) => Some(m),
                None => counts.as_ref().and_then(|c| {
                    let mods = c.modules_of(&sym);
                    // only in one module, not in the core kernel
                    (mods.len() == 1 && c.count(&sym) == Some(1)).then(|| mods[0].to_string())
                }),
            };
            if let Some(m) = module {
                let w = watch.modules.entry(m.clone()).or_insert_with(|| Watched {
                    addr: load_address(&loaded, &m),
                    events: Vec::new(),
                });
                w.events.push(event);
            }
        }
        watch
    }

    /// The modules that were unloaded (or reloaded) since [`ModuleWatch::new`],
    /// each with the events placed in it.
    pub fn changed(&self) -> Vec<(String, Fate, Vec<String>)> {
        if self.modules.is_empty() {
            return Vec::new();
        }
        let loaded = std::fs::read_to_string("/proc/modules").unwrap_or_default();
        self.modules
            .iter()
            .filter(|(_, w)| w.addr.is_some())
            .filter_map(|(m, w)| {
                let fate = match load_address(&loaded, m) {
                    None => Fate::Unloaded,
                    Some(a) if Some(&a) != w.addr.as_ref() => Fate::Reloaded,
                    Some(_) => return None,
                };
                Some((m.clone(), fate, w.events.clone()))
            })
            .collect()
    }
}

/// The message for a module that went away under the probes.
pub fn message(module: &str, fate: &Fate, events: &[String]) -> String {
    let what = match fate {
        Fate::Unloaded => "was unloaded",
        Fate::Reloaded => "was unloaded and loaded again",
    };
    format!(
        "module {module} {what} while tracing: the kernel marked the kprobes of {} gone when it \
         went, so they recorded nothing from then on{}; the events before were kept",
        events.join(", "),
        match fate {
            Fate::Reloaded => " until it came back",
            Fate::Unloaded => "",
        }
    )
}

/// The load address of `module` in /proc/modules text (`name size refs
/// deps state address`); `None` when it is not listed.
fn load_address(text: &str, module: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == module).then(|| f.nth(4).unwrap_or("").to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // the layout of /proc/modules lines (kernel/module/procfs.c m_show)
    const MODULES: &str = "romfs 28672 0 - Live 0xffffffffc0348000\n\
                           dummy 16384 1 - Live 0xffffffffc0350000\n";

    #[test]
    fn load_address_of_a_listed_module() {
        assert_eq!(
            load_address(MODULES, "romfs").as_deref(),
            Some("0xffffffffc0348000")
        );
        assert_eq!(load_address(MODULES, "rom"), None);
        assert_eq!(load_address("", "romfs"), None);
    }

    #[test]
    fn unloaded_module_message_names_the_probes() {
        let m = message("romfs", &Fate::Unloaded, &["rm".to_string()]);
        assert!(m.starts_with("module romfs was unloaded while tracing"));
        assert!(m.contains("kprobes of rm gone"));
    }
}
