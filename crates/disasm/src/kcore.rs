//! /proc/kcore: the running kernel's memory as an ELF core file.
//!
//! fs/proc/kcore.c writes an ELF64 header and one `PT_LOAD` program header
//! per region (kernel text, direct map, vmalloc, modules); `p_vaddr` is the
//! kernel virtual address and `p_offset` where its bytes are in the file.
//! The file is as large as the address space, so it is never read whole:
//! [`parse_header`] and [`parse_segments`] are pure over the first bytes,
//! and [`read`] is the only I/O (positioned reads). Reading needs
//! `CAP_SYS_RAWIO`; kernels without `CONFIG_PROC_KCORE` have no such file.
//! This is not a general ELF reader (see ktrace-symbols' elf module).

use std::path::Path;

use crate::Error;

/// Where the running kernel's core file is.
pub const PATH: &str = "/proc/kcore";

/// The ELF header fields that locate the program headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `e_phoff`.
    pub phoff: u64,
    /// `e_phentsize`.
    pub phentsize: u16,
    /// `e_phnum`.
    pub phnum: u16,
}

/// One `PT_LOAD` segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`: the kernel virtual address.
    pub vaddr: u64,
    /// `p_offset`: where the bytes are in the file.
    pub offset: u64,
    /// `p_filesz`.
    pub size: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the 64-byte ELF64 little-endian header of a core file.
pub fn parse_header(b: &[u8]) -> Result<Header, String> {
    if b.get(..4) != Some(b"\x7fELF") {
        return Err("not an elf file".to_string());
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err("not a little-endian elf64 file".to_string());
    }
    if u16_at(b, 16) != Some(4) {
        return Err("not an elf core file (e_type is not ET_CORE)".to_string());
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(b, 32), u16_at(b, 54), u16_at(b, 56))
    else {
        return Err("short elf header".to_string());
    };
    if phentsize < 56 {
        return Err(format!("program header size {phentsize} is below 56"));
    }
    Ok(Header {
        phoff,
        phentsize,
        phnum,
    })
}

/// Parses `phnum` program headers of `phentsize` bytes from `b` (the bytes
/// at `e_phoff`), keeping the `PT_LOAD` ones.
pub fn parse_segments(b: &[u8], header: &Header) -> Result<Vec<Segment>, String> {
    let size = usize::from(header.phentsize);
    let mut out = Vec::new();
    for n in 0..usize::from(header.phnum) {
        let at = n * size;
        let ph = b
            .get(at..at + size)
            .ok_or_else(|| format!("program header {n} is past the bytes read"))?;
        if u32_at(ph, 0) != Some(1) {
            continue;
        }
        let (Some(offset), Some(vaddr), Some(filesz)) =
            (u64_at(ph, 8), u64_at(ph, 16), u64_at(ph, 32))
        else {
            return Err(format!("short program header {n}"));
        };
        out.push(Segment {
            vaddr,
            offset,
            size: filesz,
        });
    }
    Ok(out)
}

/// The file offset of `len` bytes at kernel address `addr`, when one
/// segment holds them all.
pub fn file_offset(segments: &[Segment], addr: u64, len: u64) -> Option<u64> {
    segments.iter().find_map(|s| {
        let into = addr.checked_sub(s.vaddr)?;
        (into.checked_add(len)? <= s.size).then(|| s.offset.checked_add(into))?
    })
}

/// The `PT_LOAD` segments of a kcore file (normally /proc/kcore): which
/// kernel addresses it holds.
pub fn segments(path: &Path) -> Result<Vec<Segment>, Error> {
    let file = std::fs::File::open(path).map_err(|e| kcore_error(path, e.to_string()))?;
    file_segments(&file, path)
}

fn kcore_error(path: &Path, reason: String) -> Error {
    Error::Kcore {
        path: path.display().to_string(),
        reason,
    }
}

fn file_segments(file: &std::fs::File, path: &Path) -> Result<Vec<Segment>, Error> {
    use std::os::unix::fs::FileExt;
    let err = |reason: String| kcore_error(path, reason);
    let mut head = [0u8; 64];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| err(format!("reading the elf header: {e}")))?;
    let header = parse_header(&head).map_err(err)?;
    let mut phdrs = vec![0u8; usize::from(header.phnum) * usize::from(header.phentsize)];
    file.read_exact_at(&mut phdrs, header.phoff)
        .map_err(|e| err(format!("reading the program headers: {e}")))?;
    parse_segments(&phdrs, &header).map_err(err)
}

/// Reads `len` bytes of kernel memory at `addr` from a kcore file
/// (normally /proc/kcore).
pub fn read(path: &Path, addr: u64, len: usize) -> Result<Vec<u8>, Error> {
    use std::os::unix::fs::FileExt;
    let err = |reason: String| kcore_error(path, reason);
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let segments = file_segments(&file, path)?;
    let offset = file_offset(&segments, addr, len as u64)
        .ok_or_else(|| err(format!("no segment holds {len} bytes at {addr:#x}")))?;
    let mut out = vec![0u8; len];
    file.read_exact_at(&mut out, offset)
        .map_err(|e| err(format!("reading {len} bytes at {addr:#x}: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a core file header and program headers (the round trip:
    /// what we write, we parse back).
    fn core(segments: &[(u32, u64, u64, u64)]) -> (Vec<u8>, Vec<u8>) {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16..18].copy_from_slice(&4u16.to_le_bytes());
        h[32..40].copy_from_slice(&64u64.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&(segments.len() as u16).to_le_bytes());
        let mut p = Vec::new();
        for &(ty, off, vaddr, size) in segments {
            let mut ph = vec![0u8; 56];
            ph[0..4].copy_from_slice(&ty.to_le_bytes());
            ph[8..16].copy_from_slice(&off.to_le_bytes());
            ph[16..24].copy_from_slice(&vaddr.to_le_bytes());
            ph[32..40].copy_from_slice(&size.to_le_bytes());
            p.extend(ph);
        }
        (h, p)
    }

    #[test]
    fn round_trip() {
        let (h, p) = core(&[
            (4, 0x1000, 0, 0x100),
            (1, 0x2000, 0xffff_ffff_8100_0000, 0x10_0000),
            (1, 0x20_0000, 0xffff_8880_0000_0000, 0x1000),
        ]);
        let header = parse_header(&h).unwrap();
        assert_eq!(header.phnum, 3);
        let segs = parse_segments(&p, &header).unwrap();
        assert_eq!(segs.len(), 2);
        assert_eq!(file_offset(&segs, 0xffff_ffff_8100_0010, 16), Some(0x2010));
        assert_eq!(file_offset(&segs, 0xffff_ffff_810f_fff8, 16), None);
        assert_eq!(file_offset(&segs, 0x10, 1), None);
    }

    #[test]
    fn rejects_bad_headers() {
        let (mut h, _) = core(&[]);
        assert!(parse_header(&h[..40]).is_err());
        h[16] = 2;
        assert!(parse_header(&h).unwrap_err().contains("ET_CORE"));
        assert!(parse_header(b"\x7fELF\x01\x01").is_err());
        assert!(parse_header(b"").is_err());
        let header = Header {
            phoff: 64,
            phentsize: 56,
            phnum: 2,
        };
        assert!(parse_segments(&[0u8; 60], &header).is_err());
    }
}
