//! Finding tracefs: where it is mounted, mounting it when allowed, and saying
//! plainly what is missing when it cannot be used.
//!
//! Mirrors the kernel's own layout: tracefs at `/sys/kernel/tracing` (since
//! 4.1), or inside debugfs at `/sys/kernel/debug/tracing` on older kernels;
//! kprobes can be switched off globally in `/sys/kernel/debug/kprobes/enabled`
//! (kernel/kprobes.c). It is not a general mount helper: it only ever mounts
//! tracefs at its standard place.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// The standard mount point of tracefs.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// The legacy place, inside debugfs.
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
/// The global kprobes switch.
pub const KPROBES_ENABLED: &str = "/sys/kernel/debug/kprobes/enabled";

/// Whether `dir` looks like a mounted tracefs (it has the `trace` file).
pub fn is_tracefs(dir: &Path) -> bool {
    dir.join("trace").exists() || dir.join("README").exists()
}

/// Finds a mounted tracefs, or mounts it at [`TRACEFS`] when permitted.
pub fn find_or_mount() -> Result<PathBuf> {
    if let Some(found) = find_mounted() {
        check_open(&found)?;
        return Ok(found);
    }
    if !rustix::process::geteuid().is_root() {
        // Mounted, but this user cannot see into it (tracefs is 0700):
        // say that, rather than "not mounted".
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        if let Some(dir) = mount_points(&mounts, "tracefs").into_iter().next() {
            return Err(Error::new(
                ErrorKind::Permission,
                format!(
                    "tracefs is mounted at {dir} but this user (uid {}) may not use it",
                    rustix::process::geteuid().as_raw()
                ),
            )
            .with_hint(
                "run ktrace as root: creating probes and reading the ring buffers needs \
                 CAP_SYS_ADMIN (tracefs is readable by root only)",
            ));
        }
    }
    if let Some(e) = unusable_mount() {
        return Err(e);
    }
    let target = Path::new(TRACEFS);
    let mounted = rustix::mount::mount(
        "nodev",
        target,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    );
    match mounted {
        Ok(()) if is_tracefs(target) => Ok(target.to_path_buf()),
        Ok(()) => Err(Error::new(
            ErrorKind::NotAvailable,
            "mounted tracefs but it has no trace files",
        )),
        Err(errno) => Err(explain_unavailable(io::Error::from(errno))),
    }
}

/// A mounted tracefs, if any: the standard place, the legacy debugfs place,
/// or any tracefs mount listed in `/proc/self/mounts`.
pub fn find_mounted() -> Option<PathBuf> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if is_tracefs(Path::new(dir)) {
            return Some(PathBuf::from(dir));
        }
    }
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mount_points(&mounts, "tracefs")
        .into_iter()
        .map(PathBuf::from)
        .find(|p| is_tracefs(p))
}

/// Mount points of filesystem type `fstype` in a `/proc/mounts` text.
pub fn mount_points(mounts: &str, fstype: &str) -> Vec<String> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, dir, ty) = (f.next()?, f.next()?, f.next()?);
            (ty == fstype).then(|| unescape_mount(dir))
        })
        .collect()
}

fn unescape_mount(s: &str) -> String {
    // /proc/mounts escapes space, tab, newline and backslash as \ooo.
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn explain_unavailable(err: io::Error) -> Error {
    let base = Error::io(
        "tracefs is not mounted and mounting it failed",
        TRACEFS,
        err,
    );
    if !rustix::process::geteuid().is_root() {
        return base
            .with_hint("run ktrace as root (or with CAP_SYS_ADMIN) to mount and use tracefs");
    }
    if let Some(mode) = lockdown_mode()
        && mode != "none"
    {
        return base.with_hint(format!(
            "the kernel is locked down ({mode}); tracefs is restricted under lockdown"
        ));
    }
    let filesystems = fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("tracefs"))
    {
        return base.with_hint(
            "this kernel has no tracefs (built without CONFIG_TRACING / CONFIG_FTRACE)",
        );
    }
    base.with_hint(format!("try: mount -t tracefs nodev {TRACEFS}"))
}

/// For root, when no usable tracefs was found: a tracefs mount that shows
/// no trace files. Under lockdown=confidentiality the kernel creates none
/// (measured on 6.1: `events/enable` "nonexistent", mounting again EBUSY);
/// the error says so, with the lockdown mode.
pub fn unusable_mount() -> Option<Error> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let dir = mount_points(&mounts, "tracefs").into_iter().next()?;
    Some(
        Error::new(
            ErrorKind::Permission,
            format!("tracefs is mounted at {dir} but shows root no trace files"),
        )
        .with_hint(lockdown_hint(lockdown_mode().as_deref())),
    )
}

/// Opens the tracefs `README` at `root` to find out, before anything is
/// written, whether root may use tracefs at all: under
/// `lockdown=confidentiality` the kernel mounts tracefs and lists its
/// files but refuses to open them (`security_locked_down(LOCKDOWN_TRACEFS)`
/// in `tracing_check_open_get_tr()`, EPERM), kprobes included.
/// Not-root is left to the callers' own messages.
pub fn check_open(root: &Path) -> Result<()> {
    let path = root.join("README");
    match fs::File::open(&path) {
        Err(e)
            if e.kind() == io::ErrorKind::PermissionDenied
                && rustix::process::geteuid().is_root() =>
        {
            Err(Error::io("tracefs refuses root", &path, e)
                .with_hint(lockdown_hint(lockdown_mode().as_deref())))
        }
        _ => Ok(()),
    }
}

/// Why tracefs refuses root: the lockdown mode read from securityfs, or
/// where to look when securityfs is not mounted.
fn lockdown_hint(mode: Option<&str>) -> String {
    match mode {
        Some(m) if m != "none" => format!(
            "the kernel is locked down ({m}, /sys/kernel/security/lockdown): lockdown=confidentiality \
             forbids tracefs, kprobes and BPF to everyone, root included; nothing was changed"
        ),
        _ => "the kernel is probably locked down (lockdown=confidentiality forbids tracefs and \
              kprobes to root; see /sys/kernel/security/lockdown, securityfs mounted); nothing \
              was changed"
            .to_string(),
    }
}

/// The active lockdown mode from `/sys/kernel/security/lockdown`
/// (`none`, `integrity` or `confidentiality`), if the file exists.
pub fn lockdown_mode() -> Option<String> {
    let text = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    parse_lockdown(&text)
}

/// Picks the bracketed mode out of a lockdown file: `none [integrity] confidentiality`.
pub fn parse_lockdown(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_string())
}

/// The probe file a definition belongs to: `kprobe_events` (kprobes,
/// kretprobes, and the other kinds `dynamic_events` takes) or
/// `uprobe_events`. Which one is the caller's to say, from its typed probe;
/// this crate does not classify definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeFile {
    /// `kprobe_events` (CONFIG_KPROBE_EVENTS).
    KprobeEvents,
    /// `uprobe_events` (CONFIG_UPROBE_EVENTS).
    UprobeEvents,
}

impl ProbeFile {
    /// The file's name under tracefs.
    pub fn name(self) -> &'static str {
        match self {
            ProbeFile::KprobeEvents => "kprobe_events",
            ProbeFile::UprobeEvents => "uprobe_events",
        }
    }
}

/// Checks that the tracefs at `root` can take probes written to `file`, and
/// explains what is missing otherwise.
pub fn require(root: &Path, file: ProbeFile) -> Result<()> {
    match file {
        ProbeFile::UprobeEvents => {
            if !root.join("uprobe_events").exists() {
                return Err(
                    Error::new(ErrorKind::Unsupported, "this kernel has no uprobe events")
                        .with_hint("it was built without CONFIG_UPROBE_EVENTS"),
                );
            }
        }
        ProbeFile::KprobeEvents => {
            if !root.join("kprobe_events").exists() {
                return Err(
                    Error::new(ErrorKind::Unsupported, "this kernel has no kprobe events")
                        .with_hint("it was built without CONFIG_KPROBES / CONFIG_KPROBE_EVENTS"),
                );
            }
            if let Ok(v) = fs::read_to_string(KPROBES_ENABLED)
                && v.trim() == "0"
            {
                return Err(
                    Error::new(ErrorKind::NotAvailable, "kprobes are disabled globally")
                        .with_hint(format!("enable them with: echo 1 > {KPROBES_ENABLED}")),
                );
            }
        }
    }
    Ok(())
}

/// Checks that the tracefs at `root` can take event probes (`e:`, 5.15+):
/// they are written to `dynamic_events` only and need neither kprobe nor
/// uprobe events, so a kernel without kprobes can still have them.
pub fn require_eprobes(root: &Path) -> Result<()> {
    let readme = crate::features::readme(root);
    if !root.join("dynamic_events").exists()
        || !crate::features::Features::from_readme(&readme).eprobes
    {
        return Err(
            Error::new(ErrorKind::Unsupported, "this kernel has no event probes (e:)")
                .with_hint("they came in Linux 5.15 (CONFIG_PROBE_EVENTS); its tracefs README lists no e: definitions"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_table() {
        // Lines as in /proc/self/mounts on the 6.18 host after
        // `mount -t tracefs nodev /sys/kernel/tracing`.
        let text = "proc /proc proc rw,nosuid 0 0\n\
                    nodev /sys/kernel/tracing tracefs rw,relatime 0 0\n\
                    tracefs /mnt/my\\040trace tracefs rw 0 0\n\
                    debugfs /sys/kernel/debug debugfs rw 0 0\n";
        assert_eq!(
            mount_points(text, "tracefs"),
            vec!["/sys/kernel/tracing", "/mnt/my trace"]
        );
        assert_eq!(mount_points(text, "debugfs"), vec!["/sys/kernel/debug"]);
        assert!(mount_points("", "tracefs").is_empty());
        assert!(mount_points("short line\n", "tracefs").is_empty());
    }

    #[test]
    fn lockdown_hint_names_the_mode() {
        let h = lockdown_hint(Some("confidentiality"));
        assert!(
            h.starts_with("the kernel is locked down (confidentiality"),
            "{h}"
        );
        let h = lockdown_hint(None);
        assert!(h.contains("probably locked down"), "{h}");
        assert!(lockdown_hint(Some("none")).contains("probably"));
    }

    #[test]
    fn lockdown_table() {
        for (text, want) in [
            ("[none] integrity confidentiality\n", Some("none")),
            ("none [integrity] confidentiality\n", Some("integrity")),
            (
                "none integrity [confidentiality]\n",
                Some("confidentiality"),
            ),
            ("garbage", None),
            ("[unterminated", None),
        ] {
            assert_eq!(parse_lockdown(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn require_reports_missing_files() {
        let dir = std::env::temp_dir().join(format!("ktrace_tracefs_req_{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let e = require(&dir, ProbeFile::UprobeEvents).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.to_string().contains("CONFIG_UPROBE_EVENTS"));
        let e = require(&dir, ProbeFile::KprobeEvents).unwrap_err();
        assert!(e.to_string().contains("CONFIG_KPROBE_EVENTS"));
        fs::write(dir.join("uprobe_events"), "").unwrap();
        require(&dir, ProbeFile::UprobeEvents).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
