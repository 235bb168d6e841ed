//! The one error type of ktrace-symbols.
//!
//! Every variant carries the context a user needs to act: the file, the
//! symbol asked for, the candidates found. It is not a place for I/O policy;
//! the binary decides how to print it.

use std::path::PathBuf;

/// Errors from symbol lookups, ELF reading and the text files of `/proc`
/// and `/sys` this crate parses.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A function's code could not be read (kallsyms, /proc/kcore, a
    /// vmlinux): the message whole, with what it came from.
    #[error("{0}")]
    Code(String),
    /// A file could not be read.
    #[error("cannot read {path}: {}", crate::error::in_words(reason))]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said (in the message, not repeated as
        /// a source: a chain printer would show it twice).
        reason: std::io::Error,
    },
    /// The bytes are not an ELF file this crate can read.
    #[error("{path}: not a readable elf file: {reason}")]
    BadElf {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The ELF file has neither `.symtab` nor `.dynsym`.
    #[error(
        "{path}: no symbol table (.symtab or .dynsym); the binary is stripped, cannot resolve {symbol:?}; probe it by file offset instead (PATH:0xOFFSET)"
    )]
    Stripped {
        /// The file.
        path: String,
        /// The symbol asked for.
        symbol: String,
    },
    /// No symbol of that name.
    #[error("{path}: symbol {symbol:?} not found{hint}")]
    NotFound {
        /// The file (or `kallsyms`).
        path: String,
        /// The symbol asked for.
        symbol: String,
        /// Extra advice, starting with "; " when present.
        hint: String,
    },
    /// Several different addresses carry the name.
    #[error("{path}: symbol {symbol:?} is ambiguous, it has {} addresses: {}; pick one with NAME@VERSION or an address", candidates.len(), candidates.join(", "))]
    Ambiguous {
        /// The file (or `kallsyms`).
        path: String,
        /// The symbol asked for.
        symbol: String,
        /// One description per candidate address.
        candidates: Vec<String>,
    },
    /// The symbol (plus offset) lies in no loadable, executable segment.
    #[error("{path}: {symbol} at {vaddr:#x} {reason}")]
    NotProbeable {
        /// The file.
        path: String,
        /// The symbol (and offset) asked for.
        symbol: String,
        /// The virtual address it resolved to.
        vaddr: u64,
        /// Why no uprobe can go there.
        reason: String,
    },
    /// A symbol specification that cannot be parsed.
    #[error("bad symbol specification {spec:?}: {reason}")]
    BadSpec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A malformed line or record in a text or binary table.
    #[error("{what}: {reason} (at {at})")]
    Parse {
        /// Which table (`kallsyms`, `ld.so.cache`, `maps`, ...).
        what: &'static str,
        /// Line number (1-based) or byte offset, as text.
        at: String,
        /// What was wrong.
        reason: String,
    },
    /// A library name that neither the process maps nor ld.so.cache know.
    #[error("library {name:?} not found in {searched}; give its path instead")]
    LibraryNotFound {
        /// The name asked for.
        name: String,
        /// Where we looked.
        searched: String,
    },
    /// A table behind tracefs or debugfs could not be read.
    #[error(transparent)]
    Tracefs(#[from] ktrace_tracefs::Error),
}

/// An I/O error in words, without Rust's " (os error N)" suffix.
pub(crate) fn in_words(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            reason: source,
        }
    }

    pub(crate) fn parse(what: &'static str, at: impl ToString, reason: impl Into<String>) -> Self {
        Error::Parse {
            what,
            at: at.to_string(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn io_errors_say_the_reason_once() {
        // Regression: "(os error 2): …(os error 2)" was printed twice.
        let e = super::Error::io("/nonexistent", std::io::Error::from_raw_os_error(2));
        let chain = format!("{:#}", anyhow_like(&e));
        assert_eq!(chain, "cannot read /nonexistent: No such file or directory");
    }

    /// What `{:#}` of an error chain shows: the message, then each source.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut src = e.source();
        while let Some(x) = src {
            s.push_str(&format!(": {x}"));
            src = x.source();
        }
        s
    }
}
