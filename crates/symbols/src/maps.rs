//! `/proc/PID/maps`: which files a process has mapped, and where.
//!
//! Mirrors the format written by `fs/proc/task_mmu.c` (`show_map_vma`):
//! `start-end perms offset major:minor inode [path]`, addresses and offset in
//! hexadecimal, the path padded with blanks and possibly ending in
//! ` (deleted)`. Used to find the library a running process really loaded
//! (`LIB:SYMBOL` with a pid) and to turn a user address into a file offset.
//! This module parses text; it does not read other processes' memory.

use crate::error::{Error, Result};

/// One mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: String,
    /// File offset of `start`.
    pub offset: u64,
    /// Inode (0 for anonymous mappings).
    pub inode: u64,
    /// The path or pseudo name (`[stack]`), empty when anonymous.
    pub path: String,
}

impl MapEntry {
    /// Whether the mapping is executable.
    pub fn executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }

    /// The file offset of `addr` if this mapping holds it.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        if addr >= self.start && addr < self.end {
            (addr - self.start).checked_add(self.offset)
        } else {
            None
        }
    }

    /// Whether the path is a real file (not `[vdso]`, not anonymous).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }
}

/// Parses the text of a maps file.
pub fn parse(text: &str) -> Result<Vec<MapEntry>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |reason: &str| Error::parse("maps", format!("line {}", n + 1), reason);
        let mut fields = line.splitn(6, ' ');
        let range = fields.next().ok_or_else(|| err("missing range"))?;
        let perms = fields.next().ok_or_else(|| err("missing perms"))?;
        let offset = fields.next().ok_or_else(|| err("missing offset"))?;
        let _dev = fields.next().ok_or_else(|| err("missing device"))?;
        let inode = fields.next().ok_or_else(|| err("missing inode"))?;
        let path = fields.next().unwrap_or("").trim_start();
        let (start, end) = range.split_once('-').ok_or_else(|| err("bad range"))?;
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| err("bad hexadecimal number"));
        out.push(MapEntry {
            start: hex(start)?,
            end: hex(end)?,
            perms: perms.to_string(),
            offset: hex(offset)?,
            inode: inode.parse().map_err(|_| err("bad inode"))?,
            path: path.to_string(),
        });
    }
    Ok(out)
}

/// The mapping holding `addr`.
pub fn find(maps: &[MapEntry], addr: u64) -> Option<&MapEntry> {
    maps.iter().find(|m| addr >= m.start && addr < m.end)
}

/// The distinct mapped file paths whose file name answers to `wanted`
/// (a soname rule, see [`crate::ldcache::soname_matches`], applied to the
/// file name: `libc` finds `/usr/lib/x86_64-linux-gnu/libc.so.6`).
pub fn libraries<'a>(maps: &'a [MapEntry], wanted: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for m in maps.iter().filter(|m| m.is_file()) {
        let file = m.path.rsplit('/').next().unwrap_or(&m.path);
        if (file == wanted || crate::ldcache::soname_matches(wanted, file))
            && !out.contains(&m.path.as_str())
        {
            out.push(&m.path);
        }
    }
    out
}

/// Reads `/proc/PID/maps` (the only I/O in this module).
pub fn open(pid: u32) -> Result<Vec<MapEntry>> {
    let path = format!("/proc/{pid}/maps");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as /proc/self/maps shows them on the x86_64 host (cat /proc/self/maps).
    const MAPS: &str = "\
5581c2a0d000-5581c2a0f000 r--p 00000000 00:1f 1864                       /usr/bin/cat
5581c2a0f000-5581c2a14000 r-xp 00002000 00:1f 1864                       /usr/bin/cat
7f3b4c228000-7f3b4c250000 r--p 00000000 00:1f 3101                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f3b4c250000-7f3b4c3b5000 r-xp 00028000 00:1f 3101                       /usr/lib/x86_64-linux-gnu/libc.so.6
7f3b4c40a000-7f3b4c40c000 rw-p 00000000 00:00 0 
7ffd1c3e4000-7ffd1c405000 rw-p 00000000 00:00 0                          [stack]
7ffd1c5f2000-7ffd1c5f6000 r--p 00000000 00:00 0                          [vvar]
";

    #[test]
    fn parses_and_finds() {
        let m = parse(MAPS).unwrap();
        assert_eq!(m.len(), 7);
        assert_eq!(m[1].offset, 0x2000);
        assert!(m[1].executable() && !m[0].executable());
        assert_eq!(m[4].path, "");
        assert_eq!(m[5].path, "[stack]");
        let hit = find(&m, 0x7f3b4c250010).unwrap();
        assert_eq!(hit.file_offset(0x7f3b4c250010), Some(0x28010));
        assert!(find(&m, 0x1000).is_none());
        assert_eq!(
            libraries(&m, "libc"),
            vec!["/usr/lib/x86_64-linux-gnu/libc.so.6"]
        );
        assert_eq!(libraries(&m, "libc.so.6").len(), 1);
        assert!(libraries(&m, "stack").is_empty());
    }

    #[test]
    fn bad_lines_error() {
        for bad in ["zz-1 r--p 0 0:0 0", "1-2 r--p", "1-2 r--p 0 0:0 x /a"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
