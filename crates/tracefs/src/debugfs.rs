//! Files ktrace reads under debugfs (`/sys/kernel/debug`): the kprobe
//! blacklist (`kprobes/blacklist`, written by `kprobe_blacklist_seq_show()`
//! in kernel/kprobes.c).
//!
//! Read-only, and only the text: parsing is ktrace-symbols' `blacklist`
//! module. This crate is the one door to debugfs as it is to tracefs; it
//! does not mount debugfs (a missing mount is reported as not available).

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

/// Where debugfs is normally mounted.
pub const DEBUGFS: &str = "/sys/kernel/debug";

/// The kprobe blacklist file under a debugfs root.
pub fn kprobe_blacklist_path(debugfs: &Path) -> PathBuf {
    debugfs.join("kprobes/blacklist")
}

/// The text of `kprobes/blacklist` under the debugfs mounted at `debugfs`
/// (normally [`DEBUGFS`]). A missing file means debugfs is not mounted or
/// the kernel has no kprobes.
pub fn read_kprobe_blacklist(debugfs: &Path) -> Result<String> {
    let path = kprobe_blacklist_path(debugfs);
    std::fs::read_to_string(&path).map_err(|e| {
        let missing = e.kind() == std::io::ErrorKind::NotFound;
        let err = Error::io("reading the kprobe blacklist", &path, e);
        if missing {
            Error::new(
                ErrorKind::NotAvailable,
                format!(
                    "{} is missing: debugfs is not mounted there or the kernel has no kprobes",
                    path.display()
                ),
            )
        } else {
            err
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_blacklist_under_a_root() {
        let dir = std::env::temp_dir().join(format!("ktrace-debugfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("kprobes")).unwrap();
        let text = "0xffffffff81001000-0xffffffff81001040\tnmi_handle\n";
        std::fs::write(dir.join("kprobes/blacklist"), text).unwrap();
        assert_eq!(read_kprobe_blacklist(&dir).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = read_kprobe_blacklist(&dir).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotAvailable);
        assert!(e.to_string().contains("kprobes/blacklist"), "{e}");
    }
}
