//! A session's hold on the tracefs it created things in.
//!
//! ktrace finds tracefs by path (`/sys/kernel/tracing`), but the path can
//! stop leading there while a session runs: someone unmounts it lazily
//! (`umount -l`), mounts something over it, or the session runs in a mount
//! namespace that changes. The kernel objects ktrace created stay, and a
//! teardown through the path would write into whatever is there now and
//! report "0 removed". A [`Pinned`] root holds a file descriptor on the
//! tracefs root directory from the start; a lazily unmounted mount stays
//! reachable through it (`/proc/self/fd/N`), so teardown still reaches the
//! session's own objects, and the change is reported instead of hidden.
//! It does not mount anything and is not the discovery of tracefs (that is
//! [`crate::discover`]).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The tracefs root a session uses, held open.
#[derive(Debug)]
pub struct Pinned {
    path: PathBuf,
    dir: File,
    dev: u64,
    ino: u64,
}

/// Where the pinned tracefs is reachable now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Through the path it was found at.
    Path(PathBuf),
    /// Only through the held descriptor (`/proc/self/fd/N`): the path no
    /// longer leads to it.
    Moved {
        /// The path it was found at.
        was: PathBuf,
        /// The path through the descriptor.
        now: PathBuf,
    },
}

impl Reach {
    /// The directory to use.
    pub fn dir(&self) -> &Path {
        match self {
            Reach::Path(p) => p,
            Reach::Moved { now, .. } => now,
        }
    }
}

impl Pinned {
    /// Opens and holds the tracefs root at `path`.
    pub fn new(path: &Path) -> Result<Pinned> {
        let dir = File::open(path).map_err(|e| Error::io("cannot open tracefs", path, e))?;
        let meta = dir
            .metadata()
            .map_err(|e| Error::io("cannot stat tracefs", path, e))?;
        Ok(Pinned {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            dir,
        })
    }

    /// The path it was found at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it is reachable now: the original path while that still is
    /// the same directory of the same mount, else the held descriptor.
    pub fn reach(&self) -> Reach {
        let same = std::fs::metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino)
            && std::fs::metadata(self.path.join("README")).is_ok();
        if same {
            Reach::Path(self.path.clone())
        } else {
            Reach::Moved {
                was: self.path.clone(),
                now: PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_replaced_under_the_path_is_reached_through_the_descriptor() {
        let base = std::env::temp_dir().join(format!("ktrace-pin-{}", std::process::id()));
        let a = base.join("a");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join("README"), "x").unwrap();
        let p = Pinned::new(&a).unwrap();
        assert_eq!(p.reach(), Reach::Path(a.clone()));
        // Replace the directory under the same path (as a mount over it
        // would): the pinned one is still reachable, with its contents.
        std::fs::rename(&a, base.join("gone")).unwrap();
        std::fs::create_dir_all(&a).unwrap();
        let r = p.reach();
        assert!(matches!(r, Reach::Moved { .. }), "{r:?}");
        assert_eq!(
            std::fs::read_to_string(r.dir().join("README")).unwrap(),
            "x"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
