//! The kprobe blacklist, `/sys/kernel/debug/kprobes/blacklist`.
//!
//! Written by `kprobe_blacklist_seq_show` in kernel/kprobes.c, one range per
//! line: `0xSTART-0xEND\tSYMBOL` where SYMBOL is printed with `%ps` (so it
//! carries ` [module]` for module functions). Entries come from
//! `NOKPROBE_SYMBOL()`, the `.kprobes.text` section and the architecture's
//! areas (entry text, ...). Readers without `CAP_SYSLOG` see zero addresses;
//! the names are still right, so matching falls back to names then.
//! This module parses; it does not decide what is probe-able (see
//! [`crate::probeable`]).

use crate::error::{Error, Result};

/// One blacklisted range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlacklistEntry {
    /// First address.
    pub start: u64,
    /// End address (exclusive, as the kernel's `end_addr`).
    pub end: u64,
    /// The symbol name at `start`.
    pub name: String,
    /// Its module, if any.
    pub module: Option<String>,
}

/// Parses the blacklist text.
pub fn parse(text: &str) -> Result<Vec<BlacklistEntry>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err =
            |reason: &str| Error::parse("kprobes blacklist", format!("line {}", n + 1), reason);
        let (range, sym) = line
            .split_once(['\t', ' '])
            .ok_or_else(|| err("expected RANGE SYMBOL"))?;
        let (start, end) = range.split_once('-').ok_or_else(|| err("bad range"))?;
        let hex = |s: &str| {
            let s = s
                .strip_prefix("0x")
                .ok_or_else(|| err("address without 0x"))?;
            u64::from_str_radix(s, 16).map_err(|_| err("bad address"))
        };
        let sym = sym.trim();
        let (name, module) = match sym.split_once(" [") {
            Some((n, m)) => (
                n.to_string(),
                Some(
                    m.strip_suffix(']')
                        .ok_or_else(|| err("unclosed module"))?
                        .to_string(),
                ),
            ),
            None => (sym.to_string(), None),
        };
        out.push(BlacklistEntry {
            start: hex(start)?,
            end: hex(end)?,
            name,
            module,
        });
    }
    Ok(out)
}

/// Reads and parses a blacklist file (the only I/O in this module).
pub fn open(path: &std::path::Path) -> Result<Vec<BlacklistEntry>> {
    parse(&crate::read_table_text(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let text = "0xffffffff81001000-0xffffffff81001040\tnmi_handle\n\
                    0xffffffffc0a01000-0xffffffffc0a01010\tfoo_fn [foo]\n\
                    0x0000000000000000-0x0000000000000000\tdo_int3\n";
        let got = parse(text).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].start, 0xffffffff81001000);
        assert_eq!(got[0].end, 0xffffffff81001040);
        assert_eq!(got[0].name, "nmi_handle");
        assert_eq!(got[1].module.as_deref(), Some("foo"));
        assert_eq!(got[1].name, "foo_fn");
        assert_eq!(got[2].start, 0);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "nonsense",
            "0x1 foo",
            "1-2\tfoo",
            "0x1-0xzz\tfoo",
            "0x1-0x2\tfoo [bar",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
