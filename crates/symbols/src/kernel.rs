//! The kernel view: everything ktrace reads about the kernel it probes,
//! each table loaded lazily, once, behind one type — kallsyms (the whole
//! table, or a cheap count of a few names), the BTF of vmlinux, the kprobe
//! blacklist, the ftrace locations
//! (`available_filter_functions[_addrs]`), the tracefs README's feature list,
//! the release and possible CPUs, and whether notrace functions may be
//! probed (`CONFIG_KPROBE_EVENTS_ON_NOTRACE` in /boot/config-RELEASE).
//!
//! Files under tracefs and debugfs are read through ktrace-tracefs (the one
//! door to them); /proc, /sys/kernel/btf, /sys/module and /boot directly.
//! It is not a checker: ktrace-probe decides what a definition means, and
//! the binary turns this view into its check environment. A view made from
//! files ([`KernelView::with_kallsyms_file`]) describes another kernel and
//! reads nothing of the running one it was not given.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ktrace_probe::KernelVersion;
use ktrace_tracefs::Features;

use crate::blacklist::{self, BlacklistEntry};
use crate::btf::{self, Btf};
use crate::error::{Error, Result};
use crate::kallsyms::{self, Kallsyms, SymbolCounts};
use crate::probeable::{FtraceLocations, Rules};

/// The running kernel's symbol table.
pub const PROC_KALLSYMS: &str = "/proc/kallsyms";

/// The one spelling of the directory below, for `concat!`.
macro_rules! sysfs_btf {
    () => {
        "/sys/kernel/btf"
    };
}

/// Where the running kernel publishes its BTF: `vmlinux`, and one split
/// blob per loaded module (`CONFIG_DEBUG_INFO_BTF_MODULES`) read on top of
/// it. Everything that opens the running kernel's BTF starts here.
pub const SYSFS_BTF: &str = sysfs_btf!();
/// The running kernel's own BTF (`SYSFS_BTF/vmlinux`).
pub const VMLINUX_BTF: &str = concat!(sysfs_btf!(), "/vmlinux");

/// One kernel, seen through its tables. Every accessor loads its table at
/// the first call and keeps it (or the reason it could not be read).
#[derive(Debug)]
pub struct KernelView {
    tracefs: Option<PathBuf>,
    kallsyms_path: PathBuf,
    /// Whether the tables are the running kernel's (else only given files).
    running: bool,
    blacklist_path: Option<PathBuf>,
    filter_functions_path: Option<PathBuf>,
    notrace_allowed: Option<bool>,
    kallsyms: OnceLock<Result<Kallsyms>>,
    /// The text a [`KernelView::symbol_counts`] pass read, kept for the
    /// table so that kallsyms is read once per process: the kernel formats
    /// /proc/kallsyms anew on every read, about as long as ktrace takes to
    /// parse it (0.6 s of a 2.3 s `ktrace check` on an emulated x86_64 7.2).
    kallsyms_text: std::sync::Mutex<Option<String>>,
    blacklist: OnceLock<Option<Result<Vec<BlacklistEntry>>>>,
    ftrace: OnceLock<Option<FtraceLocations>>,
    ftrace_names: OnceLock<Option<Vec<String>>>,
    features: OnceLock<Option<Features>>,
    release: OnceLock<Option<String>>,
    proc_version: OnceLock<Option<KernelVersion>>,
    possible_cpus: OnceLock<Option<u32>>,
    btf: OnceLock<Result<Btf>>,
    notrace: OnceLock<bool>,
}

impl KernelView {
    /// The running kernel, with tracefs mounted at `tracefs` (when it is).
    pub fn running(tracefs: Option<&Path>) -> Self {
        Self {
            tracefs: tracefs.map(Path::to_path_buf),
            kallsyms_path: PathBuf::from(PROC_KALLSYMS),
            running: true,
            blacklist_path: None,
            filter_functions_path: None,
            notrace_allowed: None,
            kallsyms: OnceLock::new(),
            kallsyms_text: std::sync::Mutex::new(None),
            blacklist: OnceLock::new(),
            ftrace: OnceLock::new(),
            ftrace_names: OnceLock::new(),
            features: OnceLock::new(),
            release: OnceLock::new(),
            proc_version: OnceLock::new(),
            possible_cpus: OnceLock::new(),
            btf: OnceLock::new(),
            notrace: OnceLock::new(),
        }
    }

    /// Another kernel's symbols from a copy of its kallsyms: the running
    /// kernel's blacklist, ftrace lists and config are then not used.
    pub fn with_kallsyms_file(mut self, path: &Path) -> Self {
        self.kallsyms_path = path.to_path_buf();
        self.running = false;
        self
    }

    /// The kprobe blacklist from a file instead of debugfs.
    pub fn with_blacklist_file(mut self, path: &Path) -> Self {
        self.blacklist_path = Some(path.to_path_buf());
        self
    }

    /// The ftrace locations from a file instead of tracefs.
    pub fn with_filter_functions_file(mut self, path: &Path) -> Self {
        self.filter_functions_path = Some(path.to_path_buf());
        self
    }

    /// Says whether the kernel accepts kprobes on notrace functions, instead
    /// of reading its config.
    pub fn with_notrace_allowed(mut self, allowed: bool) -> Self {
        self.notrace_allowed = Some(allowed);
        self
    }

    /// Whether this is the running kernel (not a copy of another's tables).
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// The tracefs mount, when known.
    pub fn tracefs(&self) -> Option<&Path> {
        self.tracefs.as_deref()
    }

    /// Where kallsyms is read from.
    pub fn kallsyms_path(&self) -> &Path {
        &self.kallsyms_path
    }

    /// The whole kallsyms table.
    pub fn kallsyms(&self) -> std::result::Result<&Kallsyms, &Error> {
        self.kallsyms
            .get_or_init(|| match self.take_text() {
                Some(text) => Kallsyms::parse(text),
                None => kallsyms::open(&self.kallsyms_path),
            })
            .as_ref()
    }

    /// The text a counting pass kept, handed over once (the table then
    /// answers every later question).
    fn take_text(&self) -> Option<String> {
        self.kallsyms_text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// How often each name in `wanted` occurs: from the table when it is
    /// loaded, else in one pass over kallsyms that keeps nothing else.
    pub fn symbol_counts<'w>(
        &self,
        wanted: impl IntoIterator<Item = &'w str>,
    ) -> Result<SymbolCounts> {
        if let Some(Ok(table)) = self.kallsyms.get() {
            return Ok(SymbolCounts::from_table(table, wanted));
        }
        // The running kernel: every command that counts names goes on to
        // ask the table (sizes, the probe-ability rules), so it is built
        // now instead of after a counting pass over the same text (the
        // pass was 0.5 s of a 2.4 s `ktrace check` on an emulated x86_64
        // 7.2). A table that cannot be read falls to the pass, which says
        // why.
        if self.running
            && let Ok(table) = self.kallsyms()
        {
            return Ok(SymbolCounts::from_table(table, wanted));
        }
        let mut kept = self
            .kallsyms_text
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.is_none() {
            let text = kallsyms::read(&self.kallsyms_path)?;
            if !self.running {
                kallsyms::check_format(&text, &self.kallsyms_path)?;
            }
            *kept = Some(text);
        }
        Ok(SymbolCounts::scan(
            kept.as_deref().unwrap_or_default(),
            wanted,
        ))
    }

    /// The kprobe blacklist: `None` when this view has none (another
    /// kernel's symbols and no blacklist file given).
    pub fn blacklist(&self) -> Option<std::result::Result<&[BlacklistEntry], &Error>> {
        self.blacklist
            .get_or_init(|| match (&self.blacklist_path, self.running) {
                (Some(p), _) => Some(blacklist::open(p)),
                (None, true) => Some(
                    ktrace_tracefs::tables::read_kprobes_blacklist()
                        .map_err(Error::from)
                        .and_then(|t| blacklist::parse(&t)),
                ),
                (None, false) => None,
            })
            .as_ref()
            .map(|r| r.as_deref())
    }

    /// The ftrace locations, when they can be read.
    pub fn ftrace(&self) -> Option<&FtraceLocations> {
        self.ftrace
            .get_or_init(|| {
                let text = match (&self.filter_functions_path, &self.tracefs) {
                    (Some(p), _) => crate::read_table_text(p).ok(),
                    (None, Some(t)) if self.running => {
                        ktrace_tracefs::tables::read_filter_functions(t)
                    }
                    _ => None,
                }?;
                Some(FtraceLocations::parse(&text))
            })
            .as_ref()
    }

    /// The names of the functions ftrace can attach to (the second field
    /// of `available_filter_functions_addrs`, or `available_filter_functions`),
    /// sorted; what an fprobe's symbol or pattern must match.
    pub fn ftrace_names(&self) -> Option<&[String]> {
        self.ftrace_names
            .get_or_init(|| {
                let text = match (&self.filter_functions_path, &self.tracefs) {
                    (Some(p), _) => std::fs::read_to_string(p).ok(),
                    (None, Some(t)) if self.running => {
                        ktrace_tracefs::tables::read_filter_functions(t)
                    }
                    _ => None,
                }?;
                let addrs = matches!(FtraceLocations::parse(&text), FtraceLocations::Addrs(_));
                let mut names: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.split_ascii_whitespace().nth(usize::from(addrs)))
                    .map(str::to_string)
                    .collect();
                names.sort();
                names.dedup();
                Some(names)
            })
            .as_deref()
    }

    /// Whether the kernel refuses kprobes on notrace functions (it does
    /// unless built with CONFIG_KPROBE_EVENTS_ON_NOTRACE=y; unknown counts
    /// as refused).
    pub fn notrace_refused(&self) -> bool {
        !*self.notrace.get_or_init(|| match self.notrace_allowed {
            Some(a) => a,
            None if self.running => self.release().is_some_and(|r| {
                std::fs::read_to_string(Path::new("/boot").join(format!("config-{r}")))
                    .is_ok_and(|c| c.lines().any(|l| l == "CONFIG_KPROBE_EVENTS_ON_NOTRACE=y"))
            }),
            None => false,
        })
    }

    /// The rules of `probeable` from this view's tables (a table that
    /// cannot be read leaves its rule out; `probeable` names it).
    pub fn rules(&self) -> Rules<'_> {
        self.rules_with(self.ftrace())
    }

    /// The rules without the ftrace locations, which are not read: for
    /// definitions about to be written, whose notrace refusal the kernel
    /// gives itself. Reading them is the largest part of a command's
    /// start (available_filter_functions_addrs: 1.0 s of system time of a
    /// 2.9 s `ktrace check` on an emulated x86_64 7.2, more than
    /// /proc/kallsyms's 0.7 s).
    pub fn rules_without_ftrace(&self) -> Rules<'_> {
        self.rules_with(None)
    }

    fn rules_with<'s>(&'s self, ftrace: Option<&'s FtraceLocations>) -> Rules<'s> {
        Rules {
            blacklist: self.blacklist().and_then(|r| r.ok()),
            ftrace,
            notrace_refused: self.notrace_refused(),
            // (the running kernel is this machine's architecture)
            refused_areas: if self.running && cfg!(target_arch = "arm") {
                crate::probeable::ARM_REFUSED_AREAS
            } else {
                &[]
            },
        }
    }

    /// What the kernel's tracefs README announces (and which probe files
    /// exist); `None` without tracefs or for another kernel.
    pub fn features(&self) -> Option<&Features> {
        self.features
            .get_or_init(|| {
                let root = self.tracefs.as_deref().filter(|_| self.running)?;
                Some(Features::detect(root))
            })
            .as_ref()
    }

    /// The release (`uname -r`) of the running kernel.
    pub fn release(&self) -> Option<&str> {
        self.release
            .get_or_init(|| {
                let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
                Some(r.trim().to_string())
            })
            .as_deref()
            .filter(|_| self.running)
    }

    /// The version of the running kernel: its release (`uname -r`), or
    /// `fallback` when that cannot be read or parsed (another kernel's view:
    /// always); then the stable sublevel /proc/version names, when that is
    /// of the same series — Debian's `uname -r` has none (5.10.0-32) while
    /// its /proc/version says `Debian 5.10.223-1`, and fixes carried back
    /// within a series depend on it. The one reader of both files.
    pub fn version_or(&self, fallback: KernelVersion) -> KernelVersion {
        let release = self
            .release()
            .and_then(|r| r.parse().ok())
            .unwrap_or(fallback);
        match self.proc_version() {
            Some(v) if v.series() == release.series() => v,
            _ => release,
        }
    }

    /// The version /proc/version names ([`KernelVersion::from_proc_version`]),
    /// read once; `None` for another kernel's view.
    fn proc_version(&self) -> Option<KernelVersion> {
        self.running
            .then(|| {
                *self.proc_version.get_or_init(|| {
                    std::fs::read_to_string("/proc/version")
                        .ok()
                        .and_then(|text| KernelVersion::from_proc_version(&text))
                })
            })
            .flatten()
    }

    /// The number of possible CPUs (/sys/devices/system/cpu/possible).
    pub fn possible_cpus(&self) -> Option<u32> {
        *self.possible_cpus.get_or_init(|| {
            let list = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
            count_cpu_list(list.trim())
        })
    }

    /// The BTF of vmlinux (/sys/kernel/btf/vmlinux).
    pub fn btf(&self) -> std::result::Result<&Btf, &Error> {
        self.btf
            .get_or_init(|| btf::open(Path::new(VMLINUX_BTF)))
            .as_ref()
    }

    /// Whether `name` is a loaded module: it has /sys/module/NAME/sections,
    /// or symbols in the kallsyms table when that is loaded.
    pub fn is_module(&self, name: &str) -> bool {
        if name.is_empty() || name.contains('/') {
            return false;
        }
        (self.running
            && Path::new("/sys/module")
                .join(name)
                .join("sections")
                .exists())
            || self
                .kallsyms
                .get()
                .is_some_and(|k| k.as_ref().is_ok_and(|k| k.has_module(name)))
    }
}

/// Whether a kernel reads BTF argument names itself
/// (`CONFIG_PROBE_EVENTS_BTF_ARGS`: `<argname>` fetch arguments, `$arg*`
/// expanded to the function's parameter names): the one place that decides
/// it. With a README to go by, what it lists (`<argname>`,
/// [`Features::btf_args`]); without one, the version
/// ([`ktrace_probe::kernel::Features::btf_args`], 6.5 and later).
///
/// Which README counts is the caller's, and the callers differ (kept as
/// they were): the live checks' features (`features_from_readme` in the
/// binary) take a README without a probe section (no `type:` list) as no
/// README, and fall back to the version; the live BTF route
/// (`route::Route::live`) passes the README as it is, so such a kernel
/// is not native there. `ktrace check --btf FILE` routes by the version
/// even on a live kernel, whose checks still follow its README.
pub fn reads_btf_names(version: KernelVersion, readme: Option<&Features>) -> bool {
    match readme {
        Some(r) => r.btf_args,
        None => version.features().btf_args,
    }
}

/// Counts the CPUs in a kernel CPU list (`0-3,5`).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => b.parse::<u32>().ok()?.checked_sub(a.parse().ok()?)? + 1,
            None => {
                part.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_btf_paths_are_the_kernels() {
        assert_eq!(SYSFS_BTF, "/sys/kernel/btf");
        assert_eq!(VMLINUX_BTF, "/sys/kernel/btf/vmlinux");
    }

    #[test]
    fn btf_names_are_the_readmes_word_else_the_versions() {
        let mut readme = Features::from_readme("");
        assert!(!reads_btf_names(KernelVersion::new(7, 2), Some(&readme)));
        readme.btf_args = true;
        assert!(reads_btf_names(KernelVersion::new(5, 10), Some(&readme)));
        assert!(!reads_btf_names(KernelVersion::new(6, 1), None));
        assert!(reads_btf_names(KernelVersion::new(6, 5), None));
        for v in KernelVersion::SERIES {
            assert_eq!(reads_btf_names(*v, None), v.features().btf_args);
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-3"), Some(4));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-1,4-5,7"), Some(5));
        assert_eq!(count_cpu_list("x"), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn kallsyms_is_read_once_for_counts_and_table() {
        // The kernel formats /proc/kallsyms on every read (slow on a small
        // board): the counting pass's text is the one the table is built
        // from, so a file gone after the count still yields the table.
        let dir = std::env::temp_dir().join(format!("ktrace_kview_once_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        std::fs::write(
            &ks,
            "ffffffff81100000 T vfs_read\nffffffff81100100 T vfs_write\n",
        )
        .unwrap();
        let v = KernelView::running(None).with_kallsyms_file(&ks);
        assert_eq!(
            v.symbol_counts(["vfs_read"]).unwrap().count("vfs_read"),
            Some(1)
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            v.symbol_counts(["vfs_write"]).unwrap().count("vfs_write"),
            Some(1)
        );
        assert_eq!(
            v.kallsyms().unwrap().symbols().len(),
            2,
            "built from the text read"
        );
        assert_eq!(
            v.symbol_counts(["vfs_read"]).unwrap().count("vfs_read"),
            Some(1)
        );
    }

    #[test]
    fn the_running_kernels_counts_come_from_its_table() {
        // One parse of /proc/kallsyms for the counts and the table the
        // command asks next (no counting pass first); this host's table.
        let v = KernelView::running(None);
        let Ok(c) = v.symbol_counts(["_stext", "ktrace_no_such_symbol"]) else {
            return; // no /proc/kallsyms here
        };
        assert!(
            matches!(v.kallsyms.get(), Some(Ok(_))),
            "the counts built the table"
        );
        assert!(v.take_text().is_none(), "no text kept for a later parse");
        assert_eq!(c.count("ktrace_no_such_symbol"), Some(0));
        let t = v.kallsyms().unwrap();
        assert_eq!(
            c.count("_stext"),
            Some(t.by_name("_stext", None).len()),
            "the table's count"
        );
    }

    #[test]
    fn a_view_from_files_reads_only_them() {
        let dir = std::env::temp_dir().join(format!("ktrace_kview_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        // Lines as /proc/kallsyms prints them (6.1 x86_64 layout).
        std::fs::write(
            &ks,
            "ffffffff81100000 T vfs_read\nffffffffc0000000 t ext4_file_open\t[ext4]\n",
        )
        .unwrap();
        let v = KernelView::running(None).with_kallsyms_file(&ks);
        assert!(!v.is_running());
        assert!(v.blacklist().is_none());
        assert!(v.ftrace().is_none());
        assert!(v.features().is_none());
        assert!(v.release().is_none());
        let fallback = KernelVersion::with_sublevel(5, 10, 7);
        assert_eq!(v.version_or(fallback), fallback, "nothing of the host's");
        assert!(v.notrace_refused());
        let c = v.symbol_counts(["vfs_read"]).unwrap();
        assert_eq!(c.count("vfs_read"), Some(1));
        assert!(
            !v.is_module("ext4"),
            "table not loaded yet, not the running kernel"
        );
        assert_eq!(v.kallsyms().unwrap().symbols().len(), 2);
        assert!(v.is_module("ext4"));
        assert_eq!(v.symbol_counts(["vfs_read"]).unwrap(), c, "from the table");
        let missing = KernelView::running(None).with_kallsyms_file(&dir.join("nope"));
        assert!(missing.kallsyms().is_err());
        assert!(missing.symbol_counts(["x"]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
