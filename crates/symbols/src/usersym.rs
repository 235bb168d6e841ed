//! User addresses → `symbol+0xoff` through a process's maps and the ELF
//! files they name.
//!
//! A run-time address lies in one mapping of `/proc/PID/maps`; the mapping's
//! file offset turns it into a file offset, the file's `PT_LOAD` segments
//! turn that into a link-time virtual address, and the symbol tables name
//! it (the way perf and gdb symbolize user stacks). ELF files are parsed
//! once and cached by path. Addresses in anonymous memory, `[vdso]` or
//! files without a covering symbol come back without a name.

use std::collections::HashMap;

use crate::elf::{self, ElfImage};
use crate::maps::{self, MapEntry};

/// One symbolized address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSymbol {
    /// The mapped file (or pseudo name such as `[vdso]`, or empty).
    pub path: String,
    /// The symbol name and offset, when a symbol covers the address.
    pub symbol: Option<(String, u64)>,
    /// The file offset of the address, when it is file-backed.
    pub file_offset: Option<u64>,
}

impl std::fmt::Display for UserSymbol {
    /// `getenv+0x4 (/usr/lib/x86_64-linux-gnu/libc.so.6)`, or
    /// `/path+0xFILEOFF` without a symbol, or `?`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.symbol, self.file_offset) {
            (Some((name, off)), _) => write!(f, "{name}+{off:#x} ({})", self.path),
            (None, Some(off)) => write!(f, "{}+{off:#x}", self.path),
            (None, None) if !self.path.is_empty() => write!(f, "{}", self.path),
            (None, None) => write!(f, "?"),
        }
    }
}

/// Symbolizes addresses of one process; ELF files are read on first use.
#[derive(Debug, Default)]
pub struct Symbolizer {
    maps: Vec<MapEntry>,
    cache: HashMap<String, Option<ElfImage>>,
}

impl Symbolizer {
    /// Over an already parsed maps table.
    pub fn new(maps: Vec<MapEntry>) -> Self {
        Symbolizer {
            maps,
            cache: HashMap::new(),
        }
    }

    /// Reads `/proc/PID/maps`.
    pub fn open(pid: u32) -> crate::Result<Self> {
        Ok(Self::new(maps::open(pid)?))
    }

    /// Symbolizes one run-time address; `None` when no mapping holds it.
    pub fn symbolize(&mut self, addr: u64) -> Option<UserSymbol> {
        let m = maps::find(&self.maps, addr)?.clone();
        let mut out = UserSymbol {
            path: m.path.clone(),
            symbol: None,
            file_offset: None,
        };
        if !m.is_file() {
            return Some(out);
        }
        let file_offset = m.file_offset(addr)?;
        out.file_offset = Some(file_offset);
        let path = m.path.trim_end_matches(" (deleted)").to_string();
        let img = self
            .cache
            .entry(path.clone())
            .or_insert_with(|| elf::open_with_debug(std::path::Path::new(&path)).ok());
        if let Some(img) = img
            && let Some(vaddr) = img.file_offset_to_vaddr(file_offset)
            && let Some((s, off)) = img.symbolize(vaddr)
        {
            out.symbol = Some((s.name.clone(), off));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_table() {
        let u = |path: &str, symbol: Option<(&str, u64)>, off: Option<u64>| UserSymbol {
            path: path.to_string(),
            symbol: symbol.map(|(n, o)| (n.to_string(), o)),
            file_offset: off,
        };
        let cases = [
            (
                u("/lib/libc.so.6", Some(("getenv", 4)), Some(0x3f0b4)),
                "getenv+0x4 (/lib/libc.so.6)",
            ),
            (u("/bin/x", None, Some(0x10)), "/bin/x+0x10"),
            (u("[vdso]", None, None), "[vdso]"),
            (u("", None, None), "?"),
        ];
        for (v, want) in cases {
            assert_eq!(v.to_string(), want);
        }
    }

    #[test]
    fn unmapped_and_anonymous() {
        let maps = maps::parse(
            "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             7f0000001000-7f0000002000 r--p 00000000 00:00 0                          [vvar]\n",
        )
        .unwrap();
        let mut s = Symbolizer::new(maps);
        assert!(s.symbolize(0x1000).is_none());
        assert_eq!(s.symbolize(0x7f0000000010).unwrap().to_string(), "?");
        assert_eq!(s.symbolize(0x7f0000001010).unwrap().to_string(), "[vvar]");
    }
}
