//! Which BTF the definitions are compiled with, and which route they take: the
//! running kernel's /sys/kernel/btf (or `--btf FILE`, a copy of a target's
//! vmlinux BTF, plus a module's split BTF next to it for `MOD:func` probes),
//! and "native" when the kernel reads BTF arguments itself. Live, that is what
//! its tracefs README says (`<argname>`), never the version number; offline,
//! the target version decides (its features: 6.5 and later). Both through
//! [`crate::kernel::reads_btf_names`].
//!
//! A [`Route`] is the kernel's [`NameSource`]: [`crate::define`] asks it
//! for the types of the function each definition probes, for `ktrace trace`
//! and `ktrace check` alike.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ktrace_probe::KernelVersion;
use ktrace_probe::btfarg::{BtfTypes, NameSource};

use crate::btf::Btf;

/// The BTF source and route for a run.
pub struct Route {
    /// Directory holding `vmlinux` and module BTF (`/sys/kernel/btf`), or the
    /// single file given with `--btf`.
    source: Option<PathBuf>,
    single_file: bool,
    /// Whether the kernel reads BTF arguments itself.
    pub native: bool,
    /// Loaded blobs by module ("" for vmlinux alone); `None` when unreadable.
    loaded: HashMap<String, Option<Btf>>,
    /// The module blobs in `source` (live), listed at the first function
    /// vmlinux's BTF lacks.
    module_names: Option<Vec<String>>,
    /// Why BTF could not be loaded, for the report.
    pub missing: Option<String>,
}

impl Route {
    /// `--btf FILE` (offline: the target kernel version decides the route).
    pub fn offline(file: &Path, kernel: KernelVersion) -> Route {
        Route {
            source: Some(file.to_path_buf()),
            single_file: true,
            native: crate::kernel::reads_btf_names(kernel, None),
            loaded: HashMap::new(),
            module_names: None,
            missing: None,
        }
    }

    /// The running kernel: /sys/kernel/btf, and the README of its tracefs
    /// as the kernel view read it (`readme`: [`KernelView::features`] of a
    /// view of the running kernel with tracefs, never `None` then); `kernel`
    /// would decide only without one.
    ///
    /// [`KernelView::features`]: crate::KernelView::features
    pub fn live(kernel: KernelVersion, readme: Option<&ktrace_tracefs::Features>) -> Route {
        let dir = PathBuf::from(crate::kernel::SYSFS_BTF);
        let native = crate::kernel::reads_btf_names(kernel, readme);
        Route {
            source: dir.join("vmlinux").exists().then_some(dir),
            single_file: false,
            native,
            loaded: HashMap::new(),
            module_names: None,
            missing: None,
        }
    }

    /// No BTF at all (offline without `--btf`).
    pub fn none(kernel: KernelVersion) -> Route {
        Route {
            source: None,
            single_file: false,
            native: crate::kernel::reads_btf_names(kernel, None),
            loaded: HashMap::new(),
            module_names: None,
            missing: None,
        }
    }

    /// A target said to have no BTF (offline `--no-btf`): its kernel reads
    /// no BTF names whatever its version, and ktrace has none to compile
    /// them with.
    pub fn absent(kernel: KernelVersion) -> Route {
        Route {
            native: false,
            missing: Some("the target has no BTF (--no-btf)".to_string()),
            ..Route::none(kernel)
        }
    }

    fn btf_for(&mut self, module: Option<&str>) -> Option<&Btf> {
        let key = module.unwrap_or("").to_string();
        if !self.loaded.contains_key(&key) {
            let loaded = match (&self.source, self.single_file) {
                (None, _) => {
                    self.missing.get_or_insert_with(no_btf);
                    None
                }
                (Some(file), true) => {
                    let r = crate::read_table(file)
                        .map_err(|e| e.to_string())
                        .and_then(|base| match module {
                            Some(m) => {
                                let p = file.with_file_name(m);
                                let split = crate::read_table(&p).map_err(|e| e.to_string())?;
                                Btf::parse_split(&base, &split).map_err(|e| e.to_string())
                            }
                            None => Btf::parse(&base).map_err(|e| e.to_string()),
                        });
                    r.map_err(|e| self.missing = Some(e)).ok()
                }
                (Some(dir), false) => crate::btf_types::open_kernel(dir, module)
                    .map_err(|e| self.missing = Some(e.to_string()))
                    .ok(),
            };
            self.loaded.insert(key.clone(), loaded);
        }
        self.loaded.get(&key).and_then(Option::as_ref)
    }

    /// The module whose split BTF has the probed function, when the
    /// definition names it without `MOD:` and vmlinux's BTF lacks it (the
    /// kernel itself searches every module's BTF). Live only: each loaded
    /// module's /sys/kernel/btf/MOD is read until one has the function.
    /// `place` is the definition's probe point (`FUNC`, `FUNC+OFF`, ...).
    fn module_of(&mut self, place: &str) -> Option<String> {
        let func = place.split(['+', '%']).next()?;
        if self.single_file || func.is_empty() || func.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        if self.btf_for(None)?.function(None, func).is_some() {
            return None;
        }
        let dir = self.source.as_deref()?;
        let names = self
            .module_names
            .get_or_insert_with(|| {
                let mut names: Vec<String> = std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n != "vmlinux")
                    .collect();
                names.sort();
                names
            })
            .clone();
        let missing = self.missing.take();
        let found = names.into_iter().find(|m| {
            self.btf_for(Some(m))
                .is_some_and(|b| b.function(Some(m), func).is_some())
        });
        self.missing = missing;
        found
    }
}

impl NameSource for Route {
    fn native(&self) -> bool {
        self.native
    }

    /// The BTF holding the function `line` probes: its `MOD:`'s split BTF,
    /// else vmlinux's, else (live) the first module's that has it.
    fn types_for(&mut self, line: &str) -> Option<&dyn BtfTypes> {
        let place = ktrace_probe::head(line).and_then(|h| h.place);
        let module = match place
            .and_then(|p| p.split_once(':'))
            .filter(|(m, _)| !m.contains('/'))
        {
            Some((m, _)) => Some(m.to_string()),
            None => place.and_then(|p| self.module_of(p)),
        };
        self.btf_for(module.as_deref()).map(|b| b as &dyn BtfTypes)
    }
}

/// Why no BTF could be read: neither the running kernel's nor `--btf FILE`.
pub fn no_btf() -> String {
    format!(
        "no {} (kernel built without CONFIG_DEBUG_INFO_BTF?) and no --btf FILE",
        crate::kernel::VMLINUX_BTF
    )
}

#[cfg(test)]
mod tests {
    use ktrace_probe::{Arch, KernelVersion, Offline, Target, TpErr};

    #[test]
    fn the_missing_btf_message_names_the_kernels_file() {
        assert_eq!(
            super::no_btf(),
            "no /sys/kernel/btf/vmlinux (kernel built without CONFIG_DEBUG_INFO_BTF?) \
             and no --btf FILE"
        );
    }

    /// With the host's real BTF (/sys/kernel/btf/vmlinux, as a `--btf`
    /// copy): a kernel that reads BTF names itself looks `MOD:FUNC` up as
    /// written and refuses it (7.2 guest: "No BTF entry for this probe
    /// point"); the compiled route resolves FUNC in the module's BTF.
    #[test]
    fn module_prefix_on_the_native_route_is_refused_as_the_kernel_does() {
        let file = std::path::Path::new(crate::kernel::VMLINUX_BTF);
        let btf = crate::btf::Btf::parse(&std::fs::read(file).unwrap()).unwrap();
        let mut target = Target::new(Arch::X86_64);
        target.kernel = KernelVersion::new(7, 2);
        let line = "p:k/a mymod:vfs_read count";
        let native =
            ktrace_probe::btfarg::compile(line, Some(&btf), target, &Offline, true).unwrap_err();
        assert_eq!(
            native.kind,
            ktrace_probe::ErrorKind::Logged(TpErr::NO_BTF_ENTRY)
        );
        assert!(
            native
                .hint
                .unwrap()
                .contains("write vfs_read without the module")
        );
        let ok = ktrace_probe::btfarg::compile(
            "p:k/a vfs_read count",
            Some(&btf),
            target,
            &Offline,
            true,
        );
        assert!(ok.is_ok());
    }

    /// The kernel's NameSource: no BTF, no types (and why); a `--btf` copy
    /// of vmlinux's BTF has the probed function's prototype.
    #[test]
    fn a_route_gives_the_types_of_the_probed_function() {
        use ktrace_probe::btfarg::NameSource;
        let mut none = super::Route::none(KernelVersion::new(6, 1));
        assert!(none.types_for("p:k/a vfs_read count").is_none());
        assert_eq!(none.missing, Some(super::no_btf()));
        let file = std::path::Path::new(crate::kernel::VMLINUX_BTF);
        let mut route = super::Route::offline(file, KernelVersion::new(6, 1));
        assert!(!route.native());
        let types = route.types_for("p:k/a vfs_read count").unwrap();
        assert!(types.function(None, "vfs_read").is_some());
    }
}
