//! The error type of ktrace-tracefs.
//!
//! Every error says which tracefs file was involved and, when the kernel
//! explained a rejected write in its `error_log`, carries that entry (message,
//! command and caret). It is not a general I/O wrapper: plain `std::io`
//! errors are always wrapped with the path they happened on.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::error_log::ErrorLogEntry;

/// What went wrong, in broad classes callers can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// tracefs is not mounted and could not be mounted, or is unusable.
    NotAvailable,
    /// The kernel lacks a feature (a config option or a tracefs file).
    Unsupported,
    /// The caller lacks a privilege (not root, lockdown).
    Permission,
    /// The kernel rejected a write (a definition, filter, trigger, setting).
    Rejected,
    /// The object is in use (enabled event, open instance file).
    Busy,
    /// The object does not exist.
    NotFound,
    /// The object already exists.
    Exists,
    /// A tracefs file had content this crate could not parse.
    Parse,
    /// Any other I/O failure.
    Io,
}

/// An error from a tracefs operation (boxed: it is returned often and must
/// stay small).
#[derive(Debug)]
pub struct Error(Box<Inner>);

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    context: String,
    path: Option<PathBuf>,
    source: Option<io::Error>,
    kernel: Option<ErrorLogEntry>,
    hint: Option<String>,
}

impl Error {
    /// A new error of `kind` described by `context`.
    pub fn new(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            context: context.into(),
            path: None,
            source: None,
            kernel: None,
            hint: None,
        }))
    }

    /// Wraps an I/O error that happened while doing `context` on `path`.
    pub fn io(context: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let kind = kind_of(&source);
        Self(Box::new(Inner {
            kind,
            context: context.into(),
            path: Some(path.into()),
            source: Some(source),
            kernel: None,
            hint: None,
        }))
    }

    /// Attaches the kernel's `error_log` entry explaining this error.
    pub fn with_kernel(mut self, entry: Option<ErrorLogEntry>) -> Self {
        if entry.is_some() {
            self.0.kernel = entry;
        }
        self
    }

    /// Attaches a plain-language hint on what to do next.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.0.hint = Some(hint.into());
        self
    }

    /// The broad class of the error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The tracefs path involved, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.0.path.as_deref()
    }

    /// The raw OS error number, if this came from a system call.
    pub fn errno(&self) -> Option<i32> {
        self.0.source.as_ref().and_then(io::Error::raw_os_error)
    }

    /// The kernel's `error_log` entry for this failure, if it wrote one.
    pub fn kernel_entry(&self) -> Option<&ErrorLogEntry> {
        self.0.kernel.as_ref()
    }
}

fn kind_of(err: &io::Error) -> ErrorKind {
    match err.raw_os_error() {
        Some(e) if e == rustix::io::Errno::BUSY.raw_os_error() => ErrorKind::Busy,
        Some(e) if e == rustix::io::Errno::NOENT.raw_os_error() => ErrorKind::NotFound,
        Some(e) if e == rustix::io::Errno::EXIST.raw_os_error() => ErrorKind::Exists,
        Some(e)
            if e == rustix::io::Errno::PERM.raw_os_error()
                || e == rustix::io::Errno::ACCESS.raw_os_error() =>
        {
            ErrorKind::Permission
        }
        Some(e)
            if e == rustix::io::Errno::INVAL.raw_os_error()
                || e == rustix::io::Errno::NOSPC.raw_os_error()
                || e == rustix::io::Errno::TOOBIG.raw_os_error() =>
        {
            ErrorKind::Rejected
        }
        _ => ErrorKind::Io,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let this = &self.0;
        f.write_str(&this.context)?;
        if let Some(path) = &this.path {
            write!(f, " ({})", path.display())?;
        }
        if let Some(source) = &this.source {
            write!(f, ": {source}")?;
        }
        if let Some(entry) = &this.kernel {
            write!(f, "\nkernel: {}\n{}", entry.message, entry.caret_display())?;
        }
        if let Some(hint) = &this.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

// The I/O source is already part of the message (so the kernel's error_log
// entry can follow it); it is not repeated as `source()`, which would make
// `anyhow`'s `{:#}` print it twice.
impl std::error::Error for Error {}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
