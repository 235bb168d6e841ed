//! Output files written safely, for every command with `-o`: nothing is
//! truncated or replaced before tracing really starts, an output that is
//! one of the inputs or that another ktrace is writing is refused, and so
//! is one that cannot do what the writer needs — all before anything is
//! created in tracefs.
//!
//! Two ways to write:
//!
//! - [`OutFile::in_place`] (`ktrace trace -o`, a stream of lines or a
//!   Perfetto trace): the file is opened without truncation and truncated
//!   by [`OutFile::start`], once tracing has started; a FIFO, a terminal,
//!   `/dev/null` are written as they are. A file it created and never
//!   started is removed again.
//! - [`OutFile::replace`] (`ktrace record`, `ktrace export`): the data goes
//!   to `NAME.partial` beside the target (symlinks followed), renamed over
//!   the target by [`OutFile::commit`]; the target is never touched before.
//!   It must be a regular file or not exist (a trace.dat file is written
//!   with seeks; a FIFO, a character device or `/dev/stdout` on a pipe
//!   cannot take it).
//!
//! Each run holds an advisory lock (`flock`, exclusive) on the regular
//! files it writes — the target in place, or `NAME.partial` and an
//! existing target — for the whole run, and tries the other one's lock
//! too, so two ktrace processes never write the same output. Inputs (the
//! recording read, the traced program, every file probed) are compared by
//! device and inode, so a symlink or a hard link to an input is refused
//! too. This module does not format or write events (crate::output and the
//! sinks do).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::output::describe;

/// The suffix of the file a replacing writer writes.
pub const PARTIAL: &str = ".partial";

/// A file the run reads, to compare outputs with.
#[derive(Debug, Clone)]
pub struct Input {
    /// Its path.
    pub path: PathBuf,
    /// What it is to the run, in words ("the traced program").
    pub role: String,
}

impl Input {
    /// An input `path` that is `role` to the run.
    pub fn new(path: impl Into<PathBuf>, role: impl Into<String>) -> Input {
        Input {
            path: path.into(),
            role: role.into(),
        }
    }
}

/// How the output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The target itself, truncated at the start.
    InPlace,
    /// `NAME.partial`, renamed over the target at the end; `keep`: left
    /// behind when the run fails after its start (a recording so far).
    Replace { keep: bool },
}

/// An output file planned and locked, not yet written.
#[derive(Debug)]
pub struct OutFile {
    /// As the user gave it (for messages).
    shown: PathBuf,
    /// Where the data goes in the end (symlinks followed).
    target: PathBuf,
    /// `NAME.partial` beside `target` (replacing writers).
    partial: Option<PathBuf>,
    mode: Mode,
    /// The file written: the target, or the partial file.
    file: File,
    /// A regular file (locked, truncated at the start).
    regular: bool,
    /// Created by this run (removed when it never starts).
    created: bool,
    /// Further locks held for the run.
    _locks: Vec<File>,
    /// The partial file holds what an earlier run left.
    stale: bool,
    started: bool,
    committed: bool,
}

/// How the target is found on disk.
struct Found {
    /// Symlinks followed (the path itself when it does not exist yet).
    target: PathBuf,
    meta: Option<std::fs::Metadata>,
}

/// Resolves `path`: a directory, a missing directory or a dangling symlink
/// is an error.
fn find(path: &Path, what: &str) -> anyhow::Result<Found> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => anyhow::bail!("cannot write {what} to {shown}: it is a directory"),
        Ok(m) => {
            let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            return Ok(Found {
                target,
                meta: Some(m),
            });
        }
        Err(_) => {}
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        anyhow::bail!(
            "cannot write {what} to {shown}: it is a symbolic link to nothing ({})",
            std::fs::read_link(path).map_or_else(|_| "?".into(), |t| t.display().to_string())
        );
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent
        && !parent.is_dir()
    {
        anyhow::bail!(
            "cannot write {what} to {shown}: the directory {} does not exist",
            parent.display()
        );
    }
    let dir = std::fs::canonicalize(parent.unwrap_or(Path::new(".")))
        .unwrap_or_else(|_| parent.unwrap_or(Path::new(".")).to_path_buf());
    let name = path
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("cannot write {what} to {shown}: it names no file"))?;
    Ok(Found {
        target: dir.join(name),
        meta: None,
    })
}

/// What kind of file `m` is, in words, when it is not a regular file.
fn special(m: &std::fs::Metadata) -> Option<&'static str> {
    let t = m.file_type();
    if t.is_file() {
        None
    } else if t.is_fifo() {
        Some("a FIFO (a pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// An exclusive lock on `f` without waiting; false when another process
/// holds one.
fn try_lock(f: &File) -> anyhow::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(f, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(anyhow::anyhow!("cannot lock: {}", describe(&e.into()))),
    }
}

/// Same file: device and inode.
fn same(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Locks the existing regular file `path` for the run (opened for
/// reading, never changed); `None` when there is none. An error when
/// another process holds its lock.
fn lock_existing(path: &Path, shown: &Path, what: &str) -> anyhow::Result<Option<File>> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        _ => return Ok(None),
    }
    let Ok(f) = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
    else {
        return Ok(None);
    };
    if !try_lock(&f)? {
        anyhow::bail!(
            "cannot write {what} to {}: another ktrace is writing {} (it holds its lock); \
             wait for it to end or choose another file",
            shown.display(),
            path.display()
        );
    }
    Ok(Some(f))
}

/// Opens (creating if needed, never truncating) and locks the regular file
/// `path` for writing (and reading, for `read`); returns it and whether it
/// was created. Retries when the path was replaced between the open and
/// the lock.
fn open_locked(path: &Path, shown: &Path, what: &str, read: bool) -> anyhow::Result<(File, bool)> {
    for _ in 0..10 {
        let existed = std::fs::symlink_metadata(path).is_ok();
        let f = OpenOptions::new()
            .read(read)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot write {what} to {}: {}{}",
                    shown.display(),
                    if path == shown {
                        String::new()
                    } else {
                        format!("{}: ", path.display())
                    },
                    describe(&e)
                )
            })?;
        if !try_lock(&f)? {
            anyhow::bail!(
                "cannot write {what} to {}: another ktrace is writing {} (it holds its lock); \
                 wait for it to end or choose another file",
                shown.display(),
                path.display()
            );
        }
        // the lock is on the file that path names now?
        let (Ok(held), Ok(now)) = (f.metadata(), std::fs::metadata(path)) else {
            continue;
        };
        if same(&held, &now) {
            return Ok((f, !existed));
        }
    }
    anyhow::bail!(
        "cannot write {what} to {}: {} keeps being replaced",
        shown.display(),
        path.display()
    )
}

impl OutFile {
    /// `ktrace trace -o PATH`: opens PATH for writing without truncating it
    /// (a FIFO: waits for a reader while `stop` says go on), locks a regular
    /// file and checks that no `ktrace record` writes it.
    pub fn in_place(path: &Path, stop: &dyn Fn() -> bool) -> anyhow::Result<OutFile> {
        let what = "events";
        let found = find(path, what)?;
        if let Some(m) = &found.meta
            && let Some(kind) = special(m)
        {
            let file = if m.file_type().is_fifo() {
                crate::output::open_fifo(path, stop)?
            } else {
                OpenOptions::new().write(true).open(path).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot write {what} to {} ({kind}): {}",
                        path.display(),
                        describe(&e)
                    )
                })?
            };
            return Ok(OutFile {
                shown: path.to_path_buf(),
                target: found.target,
                partial: None,
                mode: Mode::InPlace,
                file,
                regular: false,
                created: false,
                _locks: Vec::new(),
                stale: false,
                started: false,
                committed: false,
            });
        }
        let (file, created) = open_locked(path, path, what, false)?;
        let mut out = OutFile {
            shown: path.to_path_buf(),
            target: found.target,
            partial: None,
            mode: Mode::InPlace,
            file,
            regular: true,
            created,
            _locks: Vec::new(),
            stale: false,
            started: false,
            committed: false,
        };
        // a `ktrace record` of the same name writes NAME.partial
        let partial = partial_of(&out.target);
        if let Some(l) = lock_existing(&partial, path, what)? {
            out._locks.push(l);
        }
        Ok(out)
    }

    /// `ktrace record -o PATH` / `ktrace export -o PATH`: `what` goes to
    /// `PATH.partial`, renamed over PATH by [`OutFile::commit`]. PATH must be
    /// a regular file or not exist; `keep`: a run that fails after its start
    /// leaves the partial file (a recording so far) instead of removing it.
    pub fn replace(path: &Path, what: &str, keep: bool) -> anyhow::Result<OutFile> {
        let found = find(path, what)?;
        if let Some(m) = &found.meta
            && let Some(kind) = special(m)
        {
            anyhow::bail!(
                "cannot write {what} to {}: it is {kind}, and {what} must go to a regular file \
                 (it is written with seeks, as FILE{PARTIAL} renamed to FILE at the end): give \
                 a file name, and copy or read the file once it is written",
                path.display()
            );
        }
        let partial = partial_of(&found.target);
        if std::fs::metadata(&partial).is_ok_and(|m| !m.is_file()) {
            anyhow::bail!(
                "cannot write {what} to {}: {} is in the way (not a regular file)",
                path.display(),
                partial.display()
            );
        }
        let mut locks = Vec::new();
        if let Some(l) = lock_existing(&found.target, path, what)? {
            locks.push(l);
        }
        let (file, created) = open_locked(&partial, path, what, true)?;
        let stale = !created && file.metadata().is_ok_and(|m| m.len() > 0);
        Ok(OutFile {
            shown: path.to_path_buf(),
            target: found.target,
            partial: Some(partial),
            mode: Mode::Replace { keep },
            file,
            regular: true,
            created,
            _locks: locks,
            stale,
            started: false,
            committed: false,
        })
    }

    /// Refuses an output that is one of `inputs`: the target, or the
    /// partial file a replacing writer writes, is the same file (device and
    /// inode) as an input. Nothing has been written yet.
    pub fn check_inputs(&self, inputs: &[Input]) -> anyhow::Result<()> {
        let mine: Vec<(&Path, std::fs::Metadata)> =
            [Some(self.target.as_path()), self.partial.as_deref()]
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p, std::fs::metadata(p).ok()?)))
                .filter(|(_, m)| m.is_file())
                .collect();
        for input in inputs {
            let Ok(im) = std::fs::metadata(&input.path) else {
                continue;
            };
            for (p, m) in &mine {
                if same(m, &im) {
                    let how = if Some(*p) == self.partial.as_deref() {
                        format!(" (its temporary file {} is)", p.display())
                    } else if self.shown != input.path {
                        format!(" ({} is the same file)", input.path.display())
                    } else {
                        String::new()
                    };
                    anyhow::bail!(
                        "refusing to write {}: it is {}{how}; nothing was written",
                        self.shown.display(),
                        input.role
                    );
                }
            }
        }
        Ok(())
    }

    /// A handle on the file to write (the target, or the partial file).
    pub fn file(&self) -> anyhow::Result<File> {
        self.file
            .try_clone()
            .map_err(|e| anyhow::anyhow!("cannot use {}: {}", self.name(), describe(&e)))
    }

    /// Tracing has started: a regular file is emptied now.
    pub fn start(&mut self) -> anyhow::Result<()> {
        if self.stale && !self.started {
            crate::say!(
                "replacing {}, left by an earlier run that did not finish",
                self.name()
            );
        }
        if self.regular && !self.started {
            self.file
                .set_len(0)
                .map_err(|e| anyhow::anyhow!("cannot empty {}: {}", self.name(), describe(&e)))?;
        }
        self.started = true;
        Ok(())
    }

    /// The name of the file being written (the partial file of a
    /// replacing writer).
    pub fn name(&self) -> String {
        self.partial
            .as_deref()
            .unwrap_or(&self.shown)
            .display()
            .to_string()
    }

    /// Nothing worth keeping was written (the writer failed at its
    /// start): a replacing writer's partial file goes.
    pub fn abandon(mut self) {
        if let Mode::Replace { keep } = &mut self.mode {
            *keep = false;
        }
    }

    /// The writing is complete: the partial file replaces the target.
    pub fn commit(mut self) -> anyhow::Result<()> {
        self.committed = true;
        if let Some(p) = &self.partial {
            std::fs::rename(p, &self.target).map_err(|e| {
                anyhow::anyhow!(
                    "cannot rename {} to {}: {}; the complete file is {}",
                    p.display(),
                    self.target.display(),
                    describe(&e),
                    p.display()
                )
            })?;
        }
        Ok(())
    }
}

impl OutFile {
    /// Where a writer that converts the partial file at the end (`ktrace
    /// record`, by default: version 7) writes the finished file: `NAME.partial.v7`
    /// beside the partial file, handed to [`OutFile::commit_from`].
    pub fn finished_path(&self) -> Option<PathBuf> {
        let p = self.partial.as_ref()?;
        let mut name = p.file_name().unwrap_or_default().to_os_string();
        name.push(".v7");
        Some(p.with_file_name(name))
    }

    /// The writing is complete in `done` (written from the partial file):
    /// `done` replaces the target, then the partial file goes. A kill
    /// between the two leaves the complete target and a stale partial
    /// file (the next run replaces it, saying so).
    pub fn commit_from(mut self, done: &Path) -> anyhow::Result<()> {
        self.committed = true;
        std::fs::rename(done, &self.target).map_err(|e| {
            anyhow::anyhow!(
                "cannot rename {} to {}: {}; the complete file is {}",
                done.display(),
                self.target.display(),
                describe(&e),
                done.display()
            )
        })?;
        if let Some(p) = &self.partial
            && let (Ok(held), Ok(now)) = (self.file.metadata(), std::fs::metadata(p))
            && same(&held, &now)
        {
            let _ = std::fs::remove_file(p);
        }
        Ok(())
    }
}

impl Drop for OutFile {
    /// Not committed: a file never started that this run created is
    /// removed; a replacing writer's partial file is removed unless it
    /// keeps what was written.
    fn drop(&mut self) {
        if self.committed || !self.regular {
            return;
        }
        let path = match (&self.mode, &self.partial) {
            (Mode::InPlace, _) if self.created && !self.started => &self.shown,
            (Mode::Replace { .. }, Some(p)) if !self.started && self.created => p,
            (Mode::Replace { keep: false }, Some(p)) if self.started => p,
            _ => return,
        };
        // only the file this run holds, and only when still empty or ours
        if let (Ok(held), Ok(now)) = (self.file.metadata(), std::fs::metadata(path))
            && same(&held, &now)
            && (self.started || now.len() == 0)
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `NAME.partial` beside `target`.
pub fn partial_of(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(PARTIAL);
    target.with_file_name(name)
}

/// The files a live run reads: every file its uprobes probe, the command
/// it runs (found through PATH as the shell would) and the program of
/// `-p PID`.
pub fn run_inputs(
    probes: &[crate::session::Probe],
    command: &[String],
    pid: Option<u32>,
) -> Vec<Input> {
    let mut inputs = Vec::new();
    for p in probes {
        if let ktrace_probe::ProbeKind::Uprobe { path, .. } = p.kind() {
            inputs.push(Input::new(
                path,
                format!("the file the uprobe {} is placed in", p.event()),
            ));
        }
    }
    if let Some(cmd) = command.first() {
        let found = if cmd.contains('/') {
            Some(PathBuf::from(cmd))
        } else {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(cmd))
                    .find(|p| p.is_file())
            })
        };
        if let Some(p) = found {
            inputs.push(Input::new(p, "the traced command"));
        }
    }
    if let Some(pid) = pid {
        inputs.push(Input::new(
            format!("/proc/{pid}/exe"),
            format!("the program of process {pid}"),
        ));
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ktrace-outfile-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn nothing_is_truncated_before_the_start() {
        let d = dir("trunc");
        let f = d.join("f");
        std::fs::write(&f, "data\n").unwrap();
        let out = OutFile::in_place(&f, &|| false).unwrap();
        drop(out);
        assert_eq!(std::fs::read(&f).unwrap(), b"data\n");
        let mut out = OutFile::in_place(&f, &|| false).unwrap();
        out.start().unwrap();
        drop(out);
        assert_eq!(std::fs::read(&f).unwrap(), b"");
        // created and never started: removed again
        let g = d.join("g");
        drop(OutFile::in_place(&g, &|| false).unwrap());
        assert!(!g.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_replacing_writer_touches_the_target_only_at_commit() {
        let d = dir("replace");
        let f = d.join("k.dat");
        std::fs::write(&f, "old").unwrap();
        let mut out = OutFile::replace(&f, "the recording", true).unwrap();
        out.start().unwrap();
        use std::io::Write;
        out.file().unwrap().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"old");
        assert_eq!(std::fs::read(d.join("k.dat.partial")).unwrap(), b"new");
        out.commit().unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
        assert!(!d.join("k.dat.partial").exists());
        // never started: no partial file left, the target as it was
        drop(OutFile::replace(&f, "the recording", true).unwrap());
        assert!(!d.join("k.dat.partial").exists());
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_second_writer_is_refused_while_the_first_holds_the_lock() {
        let d = dir("lock");
        let f = d.join("k.dat");
        let first = OutFile::replace(&f, "the recording", true).unwrap();
        let e = OutFile::replace(&f, "the recording", true).unwrap_err();
        assert!(e.to_string().contains("another ktrace is writing"), "{e}");
        let e = OutFile::in_place(&f, &|| false).unwrap_err();
        assert!(e.to_string().contains("another ktrace is writing"), "{e}");
        assert!(
            !f.exists(),
            "the refused in-place writer removed what it created"
        );
        drop(first);
        let _second = OutFile::replace(&f, "the recording", true).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn inputs_are_refused_through_links() {
        let d = dir("inputs");
        let input = d.join("in.dat");
        std::fs::write(&input, "recording").unwrap();
        std::os::unix::fs::symlink(&input, d.join("sym")).unwrap();
        std::fs::hard_link(&input, d.join("hard")).unwrap();
        let inputs = [Input::new(&input, "the recording read")];
        for name in ["in.dat", "sym", "hard"] {
            let out = OutFile::replace(&d.join(name), "a trace", false).unwrap();
            let e = out.check_inputs(&inputs).unwrap_err();
            assert!(
                e.to_string().contains("it is the recording read"),
                "{name}: {e}"
            );
        }
        let out = OutFile::in_place(&d.join("sym"), &|| false).unwrap();
        assert!(out.check_inputs(&inputs).is_err());
        drop(out);
        assert_eq!(std::fs::read(&input).unwrap(), b"recording");
        // the temporary file of the output is the input
        std::fs::rename(&input, d.join("x.partial")).unwrap();
        let out = OutFile::replace(&d.join("x"), "a trace", false).unwrap();
        let e = out
            .check_inputs(&[Input::new(d.join("x.partial"), "the recording read")])
            .unwrap_err();
        assert!(e.to_string().contains("temporary file"), "{e}");
        drop(out);
        assert_eq!(std::fs::read(d.join("x.partial")).unwrap(), b"recording");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn special_files_cannot_take_a_recording() {
        for p in ["/dev/null", "/dev/full"] {
            let e = OutFile::replace(Path::new(p), "the recording", true).unwrap_err();
            assert!(e.to_string().contains("character device"), "{p}: {e}");
        }
        let e = OutFile::replace(Path::new("/tmp"), "the recording", true).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        // a stream takes them as they are
        let out = OutFile::in_place(Path::new("/dev/null"), &|| false).unwrap();
        assert!(!out.regular);
    }
}
