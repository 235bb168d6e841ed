//! The input of the user engine: one decoded event as the aggregators see
//! it ([`Sample`]) and the typed value of one probe field ([`Value`]).
//!
//! This is deliberately not the stream crate's record type: the stream's
//! `Sink` adapter builds a `Sample` per decoded record (see the crate docs for
//! the mapping). A sample borrows everything; aggregators copy only the key
//! parts they keep.

/// The value of one probe field, as decoded from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// An unsigned integer (u8..u64, x8..x64, symbol addresses).
    U64(u64),
    /// A signed integer (s8..s64), sign-extended.
    S64(i64),
    /// A string (string, ustring, symstr, comm).
    Str(&'a str),
}

impl Value<'_> {
    /// The number as i128 (which holds every u64 and i64), or `None` for a
    /// string.
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::U64(v) => Some(i128::from(v)),
            Value::S64(v) => Some(i128::from(v)),
            Value::Str(_) => None,
        }
    }
}

/// One decoded event, as the aggregators need it.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// Ring-buffer time stamp in nanoseconds (the instance's trace clock).
    pub ts_ns: u64,
    /// The CPU whose buffer held the record.
    pub cpu: u32,
    /// Process id (the kernel's tgid).
    pub pid: u32,
    /// Thread id (the record's `common_pid`).
    pub tid: u32,
    /// The task's name (from the record's `comm` or the saved cmdlines).
    pub comm: &'a str,
    /// The event's name (`GROUP/EVENT`, as the probe was created).
    pub event: &'a str,
    /// The probed function, when one is known (a wildcard probe names the
    /// function it hit here).
    pub func: Option<&'a str>,
    /// The kernel (or user) stack attached to the event, innermost frame
    /// first, already symbolized; `None` when no stack was recorded.
    pub stack: Option<&'a [String]>,
    /// The probe's own fields, in format order.
    pub fields: &'a [(&'a str, Value<'a>)],
}

impl<'a> Sample<'a> {
    /// The value of field `name`.
    pub fn field(&self, name: &str) -> Option<Value<'a>> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}
