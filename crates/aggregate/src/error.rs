//! The crate's error type: bad specifications (keys, fields, units, steps),
//! kernel `hist` text that does not parse, and server I/O. It is not used for
//! "the kernel engine cannot do this": that is [`crate::kernel::Unsupported`],
//! a reason to fall back to the user engine, not a failure.

use std::fmt;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--by` key that is not one of the built-in names and not a field of
    /// the probe.
    #[error("unknown key '{key}': not a field of {event} (fields: {fields})")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The event it was looked up in.
        event: String,
        /// The event's fields, comma-separated.
        fields: String,
    },
    /// The histogram's field is not a field of the probe.
    #[error("no field '{field}' in {event} (fields: {fields})")]
    UnknownField {
        /// The field as given.
        field: String,
        /// The event it was looked up in.
        event: String,
        /// The event's fields, comma-separated.
        fields: String,
    },
    /// A histogram (or a value) on a string field.
    #[error(
        "cannot make a histogram of '{field}': it is a string field; count by it instead (--by {field})"
    )]
    StringField {
        /// The field.
        field: String,
    },
    /// A linear step of zero.
    #[error("linear step must be at least 1")]
    ZeroStep,
    /// A unit other than ns, us, ms.
    #[error("unknown unit '{0}': expected ns, us or ms")]
    BadUnit(String),
    /// The same key twice.
    #[error("key '{0}' given twice")]
    DuplicateKey(String),
    /// Kernel `hist` text that does not follow trace_events_hist.c's format.
    #[error("hist text line {line}: {msg}")]
    HistParse {
        /// 1-based line number in the text given.
        line: usize,
        /// What was expected.
        msg: HistMsg,
    },
    /// Binding or serving the metrics endpoint.
    #[error("metrics server on {addr}: {source}")]
    Server {
        /// The address given.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The detail of a [`Error::HistParse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistMsg(pub String);

impl fmt::Display for HistMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
