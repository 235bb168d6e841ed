//! The glibc dynamic linker cache, `/etc/ld.so.cache`, read by ourselves.
//!
//! Mirrors glibc's `sysdeps/generic/dl-cache.h` (the on-disk layout) and
//! `elf/dl-cache.c` (how ld.so reads it); `ldconfig -p` prints the same
//! table. Only the "new" format (`glibc-ld.so.cache1.1`) is read, either
//! alone (the default since glibc 2.32) or hidden behind an old
//! `ld.so-1.7.0` table, in which case it starts at the first 8-byte aligned
//! offset after the old entries. String offsets in the new format count
//! from the start of the new header. This module does not read the
//! glibc-hwcaps extension; entries tagged with a hwcaps subdirectory are
//! kept but ranked after plain ones.
//!
//! Layout (little or host endian, as written by ldconfig on the machine):
//! header `magic[17] "glibc-ld.so.cache" version[3] "1.1" nlibs:u32
//! len_strings:u32 flags:u8 pad[3] extension_offset:u32 unused[3]:u32`
//! (48 bytes), then `nlibs` entries `flags:i32 key:u32 value:u32
//! osversion:u32 hwcap:u64` (24 bytes).

use crate::error::{Error, Result};

const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;
const OLD_ENTRY: usize = 12;

/// `FLAG_ELF_LIBC6`: the entry is a glibc ELF library.
pub const FLAG_ELF_LIBC6: i32 = 0x0003;
/// `FLAG_X8664_LIB64`.
pub const FLAG_X8664_LIB64: i32 = 0x0300;
/// `FLAG_AARCH64_LIB64`.
pub const FLAG_AARCH64_LIB64: i32 = 0x0a00;

/// One library the cache knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The raw flags (type in the low byte, required architecture above).
    pub flags: i32,
    /// The soname, e.g. `libc.so.6`.
    pub key: String,
    /// The path, e.g. `/lib/x86_64-linux-gnu/libc.so.6`.
    pub value: String,
    /// The hwcap field; non-zero for glibc-hwcaps subdirectory entries.
    pub hwcap: u64,
}

/// The flags an entry must have to be loadable by a process of the
/// architecture this program was built for, as `ldconfig -p` shows them
/// (`libc6,x86-64`).
pub fn host_flags() -> i32 {
    if cfg!(target_arch = "x86_64") {
        FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
    } else if cfg!(target_arch = "aarch64") {
        FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
    } else {
        FLAG_ELF_LIBC6
    }
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    data.get(at..at.checked_add(4)?)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32_at(data, at)?) | (u64::from(u32_at(data, at + 4)?) << 32))
}

fn cstr_at(data: &[u8], at: usize) -> Option<String> {
    let rest = data.get(at..)?;
    let end = memchr_nul(rest)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

fn memchr_nul(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == 0)
}

/// Parses the bytes of an ld.so.cache file.
pub fn parse(data: &[u8]) -> Result<Vec<CacheEntry>> {
    let err = |at: usize, reason: &str| Error::parse("ld.so.cache", format!("byte {at}"), reason);
    let start = if data.starts_with(NEW_MAGIC) {
        0
    } else if data.starts_with(OLD_MAGIC) {
        // struct cache_file: magic[11] (padded to 12) nlibs:u32, then entries.
        let nlibs = u32_at(data, 12).ok_or_else(|| err(12, "truncated old header"))? as usize;
        let end = nlibs
            .checked_mul(OLD_ENTRY)
            .and_then(|n| n.checked_add(16))
            .ok_or_else(|| err(12, "old entry count overflows"))?;
        let aligned = end.div_ceil(8) * 8;
        if !data
            .get(aligned..)
            .is_some_and(|d| d.starts_with(NEW_MAGIC))
        {
            return Err(err(
                aligned,
                "old-format cache without a new-format table is not supported",
            ));
        }
        aligned
    } else {
        return Err(err(0, "not an ld.so.cache (bad magic)"));
    };
    let cache = &data[start..];
    let nlibs = u32_at(cache, 20).ok_or_else(|| err(start + 20, "truncated header"))? as usize;
    let mut entries = Vec::with_capacity(nlibs.min(65536));
    for i in 0..nlibs {
        let at = i
            .checked_mul(NEW_ENTRY)
            .and_then(|o| o.checked_add(NEW_HEADER))
            .ok_or_else(|| err(start, "entry count overflows"))?;
        let rec = cache
            .get(at..at + NEW_ENTRY)
            .ok_or_else(|| err(start + at, "truncated entry table"))?;
        let flags = u32_at(rec, 0).unwrap_or(0) as i32;
        let key = u32_at(rec, 4).unwrap_or(0) as usize;
        let value = u32_at(rec, 8).unwrap_or(0) as usize;
        let hwcap = u64_at(rec, 16).unwrap_or(0);
        let key =
            cstr_at(cache, key).ok_or_else(|| err(start + at + 4, "key string out of range"))?;
        let value = cstr_at(cache, value)
            .ok_or_else(|| err(start + at + 8, "value string out of range"))?;
        entries.push(CacheEntry {
            flags,
            key,
            value,
            hwcap,
        });
    }
    Ok(entries)
}

/// Whether a soname answers to what a user typed: `libc.so.6` matches only
/// itself; `libc` (no `.so` in it) matches `libc.so` and `libc.so.N...`.
pub fn soname_matches(wanted: &str, soname: &str) -> bool {
    if wanted.contains(".so") {
        return soname == wanted;
    }
    match soname
        .strip_prefix(wanted)
        .and_then(|r| r.strip_prefix(".so"))
    {
        Some(rest) => rest.is_empty() || rest.starts_with('.'),
        None => false,
    }
}

/// The paths of the cache entries for `wanted` (see [`soname_matches`])
/// loadable with `flags`, plain entries before hwcaps ones, duplicates
/// removed. A versioned soname (`libc.so.6`) ranks before the bare
/// development link (`libc.so`), which is often a linker script.
pub fn lookup(entries: &[CacheEntry], wanted: &str, flags: i32) -> Vec<String> {
    let mut found: Vec<&CacheEntry> = entries
        .iter()
        .filter(|e| e.flags == flags && soname_matches(wanted, &e.key))
        .collect();
    found.sort_by_key(|e| (e.hwcap != 0, !e.key.contains(".so."), e.key.clone()));
    let mut paths: Vec<String> = Vec::new();
    for e in found {
        if !paths.contains(&e.value) {
            paths.push(e.value.clone());
        }
    }
    paths
}

/// Reads and parses a cache file (the only I/O in this module).
pub fn open(path: &std::path::Path) -> Result<Vec<CacheEntry>> {
    parse(&crate::read_table(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a cache the way ldconfig lays one out (new format only).
    fn build(entries: &[(i32, &str, &str, u64)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let table_end = NEW_HEADER + entries.len() * NEW_ENTRY;
        let mut recs = Vec::new();
        for &(flags, key, value, hwcap) in entries {
            let k = table_end + strings.len();
            strings.extend_from_slice(key.as_bytes());
            strings.push(0);
            let v = table_end + strings.len();
            strings.extend_from_slice(value.as_bytes());
            strings.push(0);
            recs.extend_from_slice(&flags.to_ne_bytes());
            recs.extend_from_slice(&(k as u32).to_ne_bytes());
            recs.extend_from_slice(&(v as u32).to_ne_bytes());
            recs.extend_from_slice(&0u32.to_ne_bytes());
            recs.extend_from_slice(&hwcap.to_ne_bytes());
        }
        let mut out = NEW_MAGIC.to_vec();
        out.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        out.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        out.extend_from_slice(&[2, 0, 0, 0]);
        out.extend_from_slice(&[0; 16]);
        assert_eq!(out.len(), NEW_HEADER);
        out.extend(recs);
        out.extend(strings);
        out
    }

    const X86: i32 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64;

    #[test]
    fn round_trip_and_lookup() {
        let data = build(&[
            (X86, "libcjson.so.1", "/lib/libcjson.so.1", 0),
            (X86, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", 0),
            (FLAG_ELF_LIBC6, "libc.so.6", "/lib/i386/libc.so.6", 0),
            (X86, "libreadline.so", "/lib/libreadline.so", 0),
            (X86, "libreadline.so.8", "/lib/libreadline.so.8", 0),
            (
                X86,
                "libz.so.1",
                "/lib/glibc-hwcaps/x86-64-v3/libz.so.1",
                1 << 62,
            ),
            (X86, "libz.so.1", "/lib/libz.so.1", 0),
        ]);
        let entries = parse(&data).unwrap();
        assert_eq!(entries.len(), 7);
        assert_eq!(entries[1].key, "libc.so.6");
        assert_eq!(
            lookup(&entries, "libc", X86),
            vec!["/lib/x86_64-linux-gnu/libc.so.6"]
        );
        assert_eq!(
            lookup(&entries, "libc.so.6", X86),
            vec!["/lib/x86_64-linux-gnu/libc.so.6"]
        );
        assert_eq!(
            lookup(&entries, "libc.so.6", FLAG_ELF_LIBC6),
            vec!["/lib/i386/libc.so.6"]
        );
        assert_eq!(
            lookup(&entries, "libreadline", X86),
            vec!["/lib/libreadline.so.8", "/lib/libreadline.so"]
        );
        assert_eq!(lookup(&entries, "libz", X86)[0], "/lib/libz.so.1");
        assert!(lookup(&entries, "libcj", X86).is_empty());
    }

    #[test]
    fn old_format_prefix_is_skipped() {
        let new = build(&[(X86, "libc.so.6", "/lib/libc.so.6", 0)]);
        let mut data = OLD_MAGIC.to_vec();
        data.push(0);
        data.extend_from_slice(&1u32.to_ne_bytes());
        data.extend_from_slice(&[0; OLD_ENTRY]);
        while !data.len().is_multiple_of(8) {
            data.push(0);
        }
        data.extend(new);
        assert_eq!(parse(&data).unwrap()[0].value, "/lib/libc.so.6");
    }

    #[test]
    fn soname_rule_table() {
        let cases = [
            ("libc", "libc.so.6", true),
            ("libc", "libc.so", true),
            ("libc", "libcjson.so.1", false),
            ("libc", "libc.so6", false),
            ("libc.so.6", "libc.so.6", true),
            ("libc.so.6", "libc.so.6.1", false),
            ("libreadline", "libreadline.so.8", true),
        ];
        for (w, s, want) in cases {
            assert_eq!(soname_matches(w, s), want, "{w} vs {s}");
        }
    }

    #[test]
    fn truncated_or_foreign_input_errors() {
        let data = build(&[(X86, "libc.so.6", "/lib/libc.so.6", 0)]);
        for cut in [0, 10, 30, NEW_HEADER + 10] {
            assert!(parse(&data[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = data.clone();
        // Key offset far outside the file.
        bad[NEW_HEADER + 4..NEW_HEADER + 8].copy_from_slice(&0xffff_fff0u32.to_ne_bytes());
        assert!(parse(&bad).is_err());
        assert!(parse(b"ld.so-1.7.0\0\x01\0\0\0").is_err());
    }
}
