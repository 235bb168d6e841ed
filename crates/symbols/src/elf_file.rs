//! Reading an ELF file by the byte ranges that symbol lookups need, never
//! the whole file: the ELF header, the program and section header tables,
//! and the sections [`crate::elf::ElfImage::parse`] reads (`.symtab`,
//! `.dynsym`, their string tables and extended indices, the GNU version
//! tables, notes and the section names). A 2 GB file, or a vmlinux with
//! its DWARF, costs the size of its symbol tables in memory, not its own.
//!
//! [`Ranges`] holds the pieces read and serves them to the `object` crate
//! as a [`ReadRef`]: a read inside a piece is a slice of it, any other read
//! fails as a read past the end of a file would. Pieces start at offsets
//! rounded down to 16 bytes so the ELF structures in them keep the
//! alignment they have in the file. No memory mapping: nothing here can
//! fault when someone truncates the file meanwhile.

use std::ops::Range;
use std::os::unix::fs::FileExt;

use object::elf;
use object::read::ReadRef;
use object::read::elf::{FileHeader, SectionHeader};

/// The most bytes read for one table or section: more is a damaged or
/// hostile file (the largest symbol tables of real programs are some tens
/// of megabytes).
pub const MAX_PIECE: u64 = 1 << 30;

/// The most bytes read for one note section (build ids are 36 bytes; a
/// bigger note section is skipped, not an error).
const MAX_NOTES: u64 = 1 << 20;

/// Where the pieces come from: a file, or bytes already in memory (tests
/// and fuzzing read the same way as a file is read).
pub trait Source {
    /// Fills `buf` from `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl Source for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl Source for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let at = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = at
            .checked_add(buf.len())
            .and_then(|end| self.get(at..end))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Where an empty read points when no piece holds its offset.
#[repr(align(16))]
struct Aligned([u8; 16]);
static ALIGNED: Aligned = Aligned([0; 16]);

/// Pieces of a file, by offset.
#[derive(Debug, Default)]
pub struct Ranges {
    len: u64,
    pieces: Vec<(u64, Vec<u8>)>,
}

/// Why a range could not be read.
#[derive(Debug)]
pub enum RangeError {
    /// The file failed.
    Io(std::io::Error),
    /// The file asks for more than [`MAX_PIECE`] bytes in one piece.
    TooBig {
        /// What it is.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Its size.
        size: u64,
    },
}

impl Ranges {
    /// Bytes held, all pieces together.
    pub fn held(&self) -> u64 {
        self.pieces.iter().map(|p| p.1.len() as u64).sum()
    }

    fn covers(&self, start: u64, end: u64) -> bool {
        self.pieces
            .iter()
            .any(|(s, b)| *s <= start && end <= s + b.len() as u64)
    }

    /// Reads `size` bytes at `offset` (cut at the end of the file) unless a
    /// piece already holds them.
    fn load(
        &mut self,
        f: &(impl Source + ?Sized),
        what: &'static str,
        offset: u64,
        size: u64,
    ) -> Result<(), RangeError> {
        // a range past the end of the file is left out: reading it fails
        // then, as it fails on the whole file
        if size == 0 || offset.checked_add(size).is_none_or(|end| end > self.len) {
            return Ok(());
        }
        if size > MAX_PIECE {
            return Err(RangeError::TooBig { what, offset, size });
        }
        let start = offset & !15;
        let end = offset + size;
        if self.covers(start, end) {
            return Ok(());
        }
        let mut buf = vec![0u8; (end - start) as usize];
        f.read_exact_at(&mut buf, start).map_err(RangeError::Io)?;
        self.pieces.push((start, buf));
        Ok(())
    }
}

impl<'a> ReadRef<'a> for &'a Ranges {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            // as over the whole file: empty, aligned as `offset` is
            if offset > self.len {
                return Err(());
            }
            if let Some((s, b)) = self
                .pieces
                .iter()
                .find(|(s, b)| *s <= offset && offset <= s + b.len() as u64)
            {
                let at = (offset - s) as usize;
                return Ok(&b[at..at]);
            }
            let at = (offset % 16) as usize;
            return Ok(&ALIGNED.0[at..at]);
        }
        let end = offset.checked_add(size).ok_or(())?;
        let (s, b) = self
            .pieces
            .iter()
            .find(|(s, b)| *s <= offset && end <= s + b.len() as u64)
            .ok_or(())?;
        let at = (offset - s) as usize;
        Ok(&b[at..at + size as usize])
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        // as over the whole file: the range must lie in it
        if range.end > self.len {
            return Err(());
        }
        // of the pieces holding the start, the one reaching furthest (a
        // string table can begin inside the first piece and end past it)
        let (s, b) = self
            .pieces
            .iter()
            .filter(|(s, b)| *s <= range.start && range.start < s + b.len() as u64)
            .max_by_key(|(s, b)| s + b.len() as u64)
            .ok_or(())?;
        let from = (range.start - s) as usize;
        let to = (range.end.min(s + b.len() as u64).max(range.start) - s) as usize;
        let hay = &b[from..to];
        let n = hay.iter().position(|&c| c == delimiter).ok_or(())?;
        Ok(&hay[..n])
    }
}

/// Reads the pieces of `f` (`len` bytes long) that [`crate::elf::ElfImage::parse`]
/// needs. A file that is not ELF, or whose tables lie outside it, gives
/// pieces that simply miss them: the parse then fails as it would on the
/// whole file.
pub fn read(f: &(impl Source + ?Sized), len: u64) -> Result<Ranges, RangeError> {
    let mut r = Ranges {
        len,
        pieces: Vec::new(),
    };
    // the header and, in every linker's layout, the program headers
    r.load(f, "elf header", 0, len.min(64 << 10))?;
    match object::FileKind::parse(&r) {
        Ok(object::FileKind::Elf32) => tables::<elf::FileHeader32<object::Endianness>>(f, &mut r)?,
        Ok(object::FileKind::Elf64) => tables::<elf::FileHeader64<object::Endianness>>(f, &mut r)?,
        _ => {}
    }
    Ok(r)
}

/// Loads the header tables, then the sections the symbol lookups read.
fn tables<Elf: FileHeader<Endian = object::Endianness>>(
    f: &(impl Source + ?Sized),
    r: &mut Ranges,
) -> Result<(), RangeError> {
    // The tables as `object` reads them: none at offset 0, none with
    // entries of another size than the ELF class's.
    let sh_size = std::mem::size_of::<Elf::SectionHeader>() as u64;
    let ph_size = std::mem::size_of::<Elf::ProgramHeader>() as u64;
    let table = |off: u64, entsize: u16, want: u64, n: u64| {
        (off != 0 && u64::from(entsize) == want).then(|| (off, n.saturating_mul(want)))
    };
    // section 0 first: it holds the counts when they overflow the header
    let first = |r: &Ranges| -> Option<Vec<(u64, u64)>> {
        let h = Elf::parse(r).ok()?;
        let e = h.endian().ok()?;
        let phnum = u64::from(h.e_phnum(e)).min(u64::from(elf::PN_XNUM) - 1);
        Some(
            [
                table(h.e_shoff(e).into(), h.e_shentsize(e), sh_size, 1),
                table(h.e_phoff(e).into(), h.e_phentsize(e), ph_size, phnum),
            ]
            .into_iter()
            .flatten()
            .collect(),
        )
    };
    if let Some(ranges) = first(r) {
        for (off, size) in ranges {
            r.load(f, "elf header table", off, size)?;
        }
    }
    let counted = |r: &Ranges| -> Option<Vec<(u64, u64)>> {
        let h = Elf::parse(r).ok()?;
        let e = h.endian().ok()?;
        let shnum = h.shnum(e, r).map_or(0, |n| n as u64);
        let phnum = h.phnum(e, r).map_or(0, |n| n as u64);
        Some(
            [
                table(h.e_shoff(e).into(), h.e_shentsize(e), sh_size, shnum),
                table(h.e_phoff(e).into(), h.e_phentsize(e), ph_size, phnum),
            ]
            .into_iter()
            .flatten()
            .collect(),
        )
    };
    if let Some(ranges) = counted(r) {
        for (off, size) in ranges {
            r.load(f, "elf header table", off, size)?;
        }
    }
    let wanted = |r: &Ranges| -> Option<Vec<(&'static str, u64, u64)>> {
        let h = Elf::parse(r).ok()?;
        let e = h.endian().ok()?;
        let sections = h.section_headers(e, r).ok()?;
        let range = |i: usize, what: &'static str| {
            sections
                .get(i)
                .and_then(|s| s.file_range(e))
                .map(|(o, s)| (what, o, s))
        };
        let mut out = Vec::new();
        if let Ok(i) = h.shstrndx(e, r) {
            out.extend(range(i as usize, "section name table"));
        }
        for (i, s) in sections.iter().enumerate() {
            let linked = match s.sh_type(e) {
                elf::SHT_SYMTAB | elf::SHT_DYNSYM => {
                    out.extend(range(i, "symbol table"));
                    true
                }
                elf::SHT_GNU_VERDEF | elf::SHT_GNU_VERNEED => {
                    out.extend(range(i, "version table"));
                    true
                }
                elf::SHT_GNU_VERSYM | elf::SHT_SYMTAB_SHNDX => {
                    out.extend(range(i, "symbol index table"));
                    false
                }
                elf::SHT_NOTE => {
                    out.extend(range(i, "notes").filter(|n| n.2 <= MAX_NOTES));
                    false
                }
                _ => false,
            };
            if linked {
                out.extend(range(s.sh_link(e) as usize, "string table"));
            }
        }
        Some(out)
    };
    for (what, off, size) in wanted(r).unwrap_or_default() {
        r.load(f, what, off, size)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_serve_reads_inside_them_only() {
        let r = Ranges {
            len: 1000,
            pieces: vec![(0, b"\x7fELF".to_vec()), (96, b"abc\0def\0".to_vec())],
        };
        assert_eq!((&r).read_bytes_at(1, 3), Ok(&b"ELF"[..]));
        assert_eq!((&r).read_bytes_at(3, 2), Err(()));
        assert_eq!((&r).read_bytes_at(500, 1), Err(()));
        assert_eq!((&r).read_bytes_at(u64::MAX, 2), Err(()));
        // empty reads: anywhere in the file, as over the whole file
        assert_eq!((&r).read_bytes_at(1000, 0), Ok(&b""[..]));
        assert_eq!((&r).read_bytes_at(1001, 0), Err(()));
        assert_eq!((&r).read_bytes_at_until(96..104, 0), Ok(&b"abc"[..]));
        assert_eq!((&r).read_bytes_at_until(100..104, 0), Ok(&b"def"[..]));
        // the delimiter must lie inside the range and the piece
        assert_eq!((&r).read_bytes_at_until(100..102, 0), Err(()));
        assert_eq!((&r).read_bytes_at_until(200..300, 0), Err(()));
        assert_eq!(
            (&r).read_bytes_at_until(
                Range {
                    start: 100,
                    end: 90
                },
                0
            ),
            Err(())
        );
        assert_eq!(r.held(), 12);
        // a string starting in one piece and ending in a longer one
        let r = Ranges {
            len: 1000,
            pieces: vec![(0, b"xxab".to_vec()), (0, b"xxabc\0".to_vec())],
        };
        assert_eq!((&r).read_bytes_at_until(2..6, 0), Ok(&b"abc"[..]));
    }
}
