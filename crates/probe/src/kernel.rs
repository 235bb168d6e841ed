//! Kernel versions and the probe-language features that depend on them.
//!
//! The reference is Linux 6.1 as Debian bookworm ships it (6.1.192 sources read for
//! this crate), which already carries the `symstr` type, the non-unique-symbol check
//! and the 3072-byte event size limit. Gates for other versions are recorded from
//! upstream history as understood by the authors; only 6.1 was verified against
//! source and a running kernel.

use std::fmt;
use std::str::FromStr;

/// A kernel version, `MAJOR.MINOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// Behaviour switches derived from a [`KernelVersion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `symstr` type.
    pub symstr: bool,
    /// `%return` suffix on probe points.
    pub return_suffix: bool,
    /// Immediate values `\IMM` and `\"string"`.
    pub immediates: bool,
    /// Event probes (`e:`).
    pub eprobes: bool,
    /// "The symbol is not unique" check.
    pub non_unique_symbol: bool,
    /// 3072-byte limit on an event's argument data.
    pub event_size_limit: bool,
    /// `BAD_VAR` message spelled "variable" (older kernels: "valiable").
    pub bad_var_spelling_fixed: bool,
    /// `char` type.
    pub char_type: bool,
    /// `%pd`/`%pD` types (recorded only; this crate does not implement them).
    pub dentry_types: bool,
    /// `$argN` outside a function entry is refused with "$arg* can be used only on
    /// function entry or exit" (seen on uprobes of 6.18; 6.1 says "Invalid
    /// $-variable specified"). Gate at 6.5, when BTF arguments arrived (unverified).
    pub nofentry_args_error: bool,
    /// `symbol`/`symstr` are unknown types for uprobes (seen on 6.18; gate at 6.10,
    /// unverified).
    pub uprobe_rejects_symbol_types: bool,
    /// `$comm`/immediate strings with another type are logged ("$comm and
    /// immediate-string only accepts string type") and `pN` reads "Maxactive is only
    /// for function exit" (seen on 6.12; 6.1 rejects the first silently). Gated at
    /// 6.12, the earliest version where it was observed.
    pub newer_messages: bool,
    /// More than `MAX_TRACE_ARGS` (128) arguments are refused with "Too many
    /// arguments are specified" (logged at the first argument); older kernels
    /// keep the first 128 and ignore the rest without a word. The logged error
    /// came with "tracing: probe-events: Log error for exceeding the number of
    /// arguments" (merged for 6.15); seen on the 6.18 host, and 6.1 guests keep
    /// 128 silently.
    pub too_many_args_error: bool,
}

impl KernelVersion {
    /// The conformance target: Linux 6.1 (Debian bookworm).
    pub const DEFAULT: KernelVersion = KernelVersion { major: 6, minor: 1 };

    /// A version from its numbers.
    pub const fn new(major: u32, minor: u32) -> Self {
        KernelVersion { major, minor }
    }

    fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// The features of this version.
    pub fn features(self) -> Features {
        Features {
            symstr: self.at_least(6, 1),
            return_suffix: self.at_least(5, 11),
            immediates: self.at_least(5, 7),
            eprobes: self.at_least(5, 15),
            non_unique_symbol: self.at_least(6, 1),
            event_size_limit: self.at_least(6, 1),
            bad_var_spelling_fixed: self.at_least(6, 1),
            char_type: self.at_least(6, 5),
            dentry_types: self.at_least(6, 9),
            nofentry_args_error: self.at_least(6, 5),
            uprobe_rejects_symbol_types: self.at_least(6, 10),
            newer_messages: self.at_least(6, 12),
            too_many_args_error: self.at_least(6, 15),
        }
    }
}

impl Default for KernelVersion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A version string that is not `MAJOR.MINOR[.PATCH][-suffix]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad kernel version {0:?}: expected MAJOR.MINOR, e.g. 6.1")]
pub struct BadVersion(pub String);

impl FromStr for KernelVersion {
    type Err = BadVersion;

    /// Accepts `6.1`, `6.1.0-13-amd64` (the `uname -r` form) and the like.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(s.to_string());
        let mut parts = s.split(|c: char| !c.is_ascii_digit());
        let major = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let minor = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        if !s.starts_with(|c: char| c.is_ascii_digit()) || !s[major_len(s)..].starts_with('.') {
            return Err(bad());
        }
        Ok(KernelVersion { major, minor })
    }
}

fn major_len(s: &str) -> usize {
    s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_versions() {
        assert_eq!("6.1".parse(), Ok(KernelVersion::new(6, 1)));
        assert_eq!("6.1.0-13-cloud-amd64".parse(), Ok(KernelVersion::new(6, 1)));
        assert_eq!("5.15.0".parse(), Ok(KernelVersion::new(5, 15)));
        assert!("6".parse::<KernelVersion>().is_err());
        assert!("v6.1".parse::<KernelVersion>().is_err());
        assert!("6-1".parse::<KernelVersion>().is_err());
    }

    #[test]
    fn gates() {
        assert!(KernelVersion::new(6, 1).features().symstr);
        assert!(!KernelVersion::new(5, 15).features().symstr);
        assert!(!KernelVersion::new(6, 1).features().char_type);
        assert!(KernelVersion::new(6, 6).features().char_type);
    }
}
