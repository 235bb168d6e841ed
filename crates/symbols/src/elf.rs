//! ELF symbols → uprobe file offsets, and user addresses → symbols.
//!
//! A uprobe is placed at an offset *in the file* (Documentation/trace/
//! uprobetracer.rst: `PATH:OFFSET`), not at a virtual address. For a symbol
//! with value `st_value` inside the `PT_LOAD` segment that contains it, the
//! kernel wants `st_value - p_vaddr + p_offset`; this is what perf's
//! `probe-finder`/`symbol-elf.c` compute as well. The rule is the same for PIE
//! (`ET_DYN`, addresses start near 0) and non-PIE (`ET_EXEC`, addresses start
//! at e.g. 0x400000) files; segments whose `p_vaddr` differs from `p_offset`
//! (every `ET_EXEC`, and the data/text segments of many shared objects) are
//! exactly the case the subtraction handles.
//!
//! Reading the ELF is done once, by [`ElfImage::parse`], into plain owned
//! tables (segments, symbols with their GNU versions); every lookup after that
//! is pure code over those tables. This module is not a demangler, and it
//! does not read DWARF.

use object::elf;
use object::read::ReadRef;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym};

use crate::error::{Error, Result};
use ktrace_probe::Arch;

/// What kind of ELF file this is (`e_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC`: a non-PIE executable, linked at fixed addresses.
    Exec,
    /// `ET_DYN`: a PIE executable or a shared object.
    Dyn,
    /// Anything else (relocatable objects, core files), with its `e_type`.
    Other(u16),
}

/// One `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`: bytes present in the file.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_flags & PF_X`.
    pub executable: bool,
}

/// Which table a symbol came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SymbolTable {
    /// `.symtab` (absent from stripped files).
    Symtab,
    /// `.dynsym` (present in every dynamically linked file).
    Dynsym,
}

/// The `STT_*` kinds this crate keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    /// `STT_FUNC`.
    Func,
    /// `STT_GNU_IFUNC`: the symbol is the resolver, not the implementation.
    Ifunc,
    /// `STT_OBJECT`.
    Object,
    /// `STT_NOTYPE` (hand-written assembly labels).
    NoType,
}

/// One defined symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfSymbol {
    /// The name without any `@VERSION` suffix.
    pub name: String,
    /// The GNU symbol version, if any (`GLIBC_2.2.5`).
    pub version: Option<String>,
    /// Whether this is the default version (`name@@VERSION`) or unversioned;
    /// false for hidden, non-default versions (`name@VERSION`).
    pub default_version: bool,
    /// `st_value` (for 32-bit ARM Thumb functions, with bit 0 cleared).
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// The symbol kind.
    pub kind: SymbolKind,
    /// `STB_LOCAL`.
    pub local: bool,
    /// The table it came from.
    pub table: SymbolTable,
}

impl ElfSymbol {
    /// The name as readelf prints it: `name`, `name@@VER` or `name@VER`.
    pub fn display_name(&self) -> String {
        match &self.version {
            None => self.name.clone(),
            Some(v) if self.default_version => format!("{}@@{v}", self.name),
            Some(v) => format!("{}@{v}", self.name),
        }
    }
}

/// The parts of an ELF file that symbol lookups need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfImage {
    /// The path it was read from (for messages only).
    pub path: String,
    /// `e_type`.
    pub kind: ElfKind,
    /// `e_machine`.
    pub machine: u16,
    /// The `PT_LOAD` segments, in file order.
    pub segments: Vec<LoadSegment>,
    /// Defined symbols of both tables.
    pub symbols: Vec<ElfSymbol>,
    /// Whether a `.symtab` was present.
    pub has_symtab: bool,
    /// Whether a `.dynsym` was present.
    pub has_dynsym: bool,
    /// The GNU build id (`NT_GNU_BUILD_ID`), in hexadecimal.
    pub build_id: Option<String>,
    /// The separate debug file whose `.symtab` was merged in, if any.
    pub debug_file: Option<String>,
}

/// A parsed `SYMBOL[@VERSION|@@VERSION][+OFFSET]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolSpec {
    /// The bare symbol name.
    pub name: String,
    /// The version asked for, and whether `@@` (default only) was written.
    pub version: Option<(String, bool)>,
    /// The offset after `+` (0 when absent).
    pub offset: u64,
}

impl SymbolSpec {
    /// Parses `SYMBOL[@VERSION|@@VERSION][+OFFSET]`; OFFSET is decimal or
    /// `0x` hexadecimal.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = |reason: &str| Error::BadSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (sym, offset) = match spec.rsplit_once('+') {
            Some((sym, off)) => (
                sym,
                parse_number(off).ok_or_else(|| bad("offset is not a number"))?,
            ),
            None => (spec, 0),
        };
        let (name, version) = match sym.split_once('@') {
            Some((name, rest)) => match rest.strip_prefix('@') {
                Some(v) => (name, Some((v.to_string(), true))),
                None => (name, Some((rest.to_string(), false))),
            },
            None => (sym, None),
        };
        if name.is_empty() {
            return Err(bad("empty symbol name"));
        }
        if matches!(&version, Some((v, _)) if v.is_empty() || v.contains('@')) {
            return Err(bad("empty or malformed version"));
        }
        if name.bytes().any(|b| b.is_ascii_whitespace() || b == b':') {
            return Err(bad("symbol names contain no blanks or ':'"));
        }
        Ok(SymbolSpec {
            name: name.to_string(),
            version,
            offset,
        })
    }
}

/// Parses a decimal or `0x` hexadecimal number.
pub fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => text.parse().ok(),
        None => None,
    }
}

/// Where a uprobe goes for one symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UprobeTarget {
    /// The symbol that matched.
    pub symbol: ElfSymbol,
    /// The offset asked for past the symbol.
    pub offset: u64,
    /// `symbol.value + offset`.
    pub vaddr: u64,
    /// The file offset the kernel wants (`PATH:0x...`).
    pub file_offset: u64,
}

impl ElfImage {
    /// Reads the ELF header, program headers, `.symtab`, `.dynsym` and the GNU
    /// version tables from `data`. `path` is used in messages only.
    pub fn parse(path: &str, data: &[u8]) -> Result<Self> {
        Self::parse_from(path, data)
    }

    /// [`ElfImage::parse`] of `data` read in pieces, as [`open`] reads a
    /// file (for tests and fuzzing: it must give what parsing the whole
    /// bytes gives).
    pub fn parse_in_pieces(path: &str, data: &[u8]) -> Result<Self> {
        let ranges = crate::elf_file::read(data, data.len() as u64)
            .map_err(|e| range_error(std::path::Path::new(path), e))?;
        Self::parse_from(path, &ranges)
    }

    /// [`ElfImage::parse`] over any `object` reader (the whole file as bytes,
    /// or the pieces of it [`crate::elf_file`] read).
    fn parse_from<'data, R: ReadRef<'data>>(path: &str, data: R) -> Result<Self> {
        let bad = |reason: String| Error::BadElf {
            path: path.to_string(),
            reason,
        };
        match object::FileKind::parse(data).map_err(|e| bad(e.to_string()))? {
            object::FileKind::Elf32 => {
                parse_generic::<elf::FileHeader32<object::Endianness>, R>(path, data).map_err(bad)
            }
            object::FileKind::Elf64 => {
                parse_generic::<elf::FileHeader64<object::Endianness>, R>(path, data).map_err(bad)
            }
            other => Err(bad(format!("file kind {other:?} is not elf"))),
        }
    }

    /// Finds the symbols a specification names, before deduplication: exact
    /// version when one is given; otherwise the default-version and
    /// unversioned definitions, or, when the name only exists in hidden
    /// versions, all of them.
    pub fn candidates(&self, spec: &SymbolSpec) -> Vec<&ElfSymbol> {
        let named = self.symbols.iter().filter(|s| s.name == spec.name);
        match &spec.version {
            Some((v, default_only)) => named
                .filter(|s| s.version.as_deref() == Some(v.as_str()))
                .filter(|s| !default_only || s.default_version)
                .collect(),
            None => {
                let all: Vec<&ElfSymbol> = named.collect();
                let defaults: Vec<&ElfSymbol> =
                    all.iter().copied().filter(|s| s.default_version).collect();
                if defaults.is_empty() { all } else { defaults }
            }
        }
    }

    /// Resolves `SYMBOL[@VER][+OFF]` to the file offset a uprobe needs.
    pub fn resolve(&self, spec: &str) -> Result<UprobeTarget> {
        let parsed = SymbolSpec::parse(spec)?;
        if !self.has_symtab && !self.has_dynsym {
            return Err(Error::Stripped {
                path: self.path.clone(),
                symbol: spec.to_string(),
            });
        }
        let mut found = self.candidates(&parsed);
        // The same definition usually appears in both tables: keep one per address.
        found.sort_by_key(|s| (s.value, s.table));
        found.dedup_by_key(|s| s.value);
        let symbol = match found.as_slice() {
            [] => {
                let hint = if self.has_symtab {
                    ktrace_probe::similar::did_you_mean(&ktrace_probe::similar::similar(
                        &parsed.name,
                        self.symbols.iter().map(|s| s.name.as_str()),
                    ))
                } else {
                    "; the file has no .symtab (stripped) and no debug file under /usr/lib/debug/.build-id, only its dynamic symbols were searched"
                        .to_string()
                };
                return Err(Error::NotFound {
                    path: self.path.clone(),
                    symbol: parsed.name,
                    hint,
                });
            }
            [one] => (*one).clone(),
            many => {
                return Err(Error::Ambiguous {
                    path: self.path.clone(),
                    symbol: spec.to_string(),
                    candidates: many
                        .iter()
                        .map(|s| {
                            format!(
                                "{} at {:#x} ({}{})",
                                s.display_name(),
                                s.value,
                                if s.local { "local, " } else { "" },
                                match s.table {
                                    SymbolTable::Symtab => ".symtab",
                                    SymbolTable::Dynsym => ".dynsym",
                                }
                            )
                        })
                        .collect(),
                });
            }
        };
        let not_probeable = |vaddr: u64, reason: String| Error::NotProbeable {
            path: self.path.clone(),
            symbol: spec.to_string(),
            vaddr,
            reason,
        };
        if parsed.offset > 0 && symbol.size > 0 && parsed.offset >= symbol.size {
            return Err(not_probeable(
                symbol.value.saturating_add(parsed.offset),
                format!(
                    "is past the end of {} (size {:#x})",
                    symbol.name, symbol.size
                ),
            ));
        }
        let vaddr = symbol
            .value
            .checked_add(parsed.offset)
            .ok_or_else(|| not_probeable(symbol.value, "overflows".to_string()))?;
        let segment = self.segment_of_vaddr(vaddr).ok_or_else(|| {
            not_probeable(vaddr, "is in no PT_LOAD segment of the file".to_string())
        })?;
        if !segment.executable {
            return Err(not_probeable(
                vaddr,
                format!(
                    "is in a segment that is not executable (vaddr {:#x}); uprobes only fire on code",
                    segment.vaddr
                ),
            ));
        }
        Ok(UprobeTarget {
            symbol,
            offset: parsed.offset,
            vaddr,
            file_offset: (vaddr - segment.vaddr)
                .checked_add(segment.offset)
                .ok_or_else(|| {
                    not_probeable(vaddr, "has a file offset that overflows".to_string())
                })?,
        })
    }

    /// The `PT_LOAD` segment whose file-backed part holds `vaddr`.
    pub fn segment_of_vaddr(&self, vaddr: u64) -> Option<&LoadSegment> {
        self.segments
            .iter()
            .find(|s| vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz)
    }

    /// The file offset of a virtual address (the uprobe offset of that
    /// instruction).
    pub fn vaddr_to_file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segment_of_vaddr(vaddr)
            .and_then(|s| (vaddr - s.vaddr).checked_add(s.offset))
    }

    /// The virtual address of a file offset, e.g. of `offset` from a
    /// `/proc/PID/maps` line plus the distance into the mapping.
    pub fn file_offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.offset && offset - s.offset < s.filesz)
            .and_then(|s| (offset - s.offset).checked_add(s.vaddr))
    }

    /// The symbol covering `vaddr` and the distance into it: the symbol with
    /// the highest value not above `vaddr` whose size covers it (symbols of
    /// size 0 cover nothing but their own address). Functions are preferred
    /// over other kinds at the same address, global over local, `.symtab`
    /// over `.dynsym`.
    pub fn symbolize(&self, vaddr: u64) -> Option<(&ElfSymbol, u64)> {
        self.symbols
            .iter()
            .filter(|s| {
                s.value <= vaddr && (vaddr - s.value < s.size || (s.size == 0 && s.value == vaddr))
            })
            .max_by_key(|s| {
                (
                    s.value,
                    matches!(s.kind, SymbolKind::Func | SymbolKind::Ifunc),
                    !s.local,
                    s.default_version,
                    s.table == SymbolTable::Symtab,
                )
            })
            .map(|s| (s, vaddr - s.value))
    }
}

fn parse_generic<'data, Elf: FileHeader<Endian = object::Endianness>, R: ReadRef<'data>>(
    path: &str,
    data: R,
) -> std::result::Result<ElfImage, String> {
    let header = Elf::parse(data).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let machine = header.e_machine(endian);
    let kind = match header.e_type(endian) {
        elf::ET_EXEC => ElfKind::Exec,
        elf::ET_DYN => ElfKind::Dyn,
        other => ElfKind::Other(other),
    };
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .map(|ph| LoadSegment {
            vaddr: ph.p_vaddr(endian).into(),
            offset: ph.p_offset(endian).into(),
            filesz: ph.p_filesz(endian).into(),
            memsz: ph.p_memsz(endian).into(),
            executable: ph.p_flags(endian) & elf::PF_X != 0,
        })
        .collect();
    let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
    // 32-bit arm marks Thumb functions with bit 0 of their address.
    let thumb = Arch::from_elf_machine(machine) == Some(Arch::Arm);
    let mut symbols = Vec::new();
    let mut has = [false, false];
    for (i, (table, sh_type)) in [
        (SymbolTable::Symtab, elf::SHT_SYMTAB),
        (SymbolTable::Dynsym, elf::SHT_DYNSYM),
    ]
    .into_iter()
    .enumerate()
    {
        let syms = sections
            .symbols(endian, data, sh_type)
            .map_err(|e| e.to_string())?;
        if syms.is_empty() {
            continue;
        }
        has[i] = true;
        // Version information (SHT_GNU_versym) belongs to .dynsym only.
        let versions = if table == SymbolTable::Dynsym {
            sections.versions(endian, data).map_err(|e| e.to_string())?
        } else {
            None
        };
        for (index, sym) in syms.enumerate() {
            if sym.is_undefined(endian) || sym.st_shndx(endian) == elf::SHN_ABS {
                continue;
            }
            let kind = match sym.st_type() {
                elf::STT_FUNC => SymbolKind::Func,
                elf::STT_GNU_IFUNC => SymbolKind::Ifunc,
                elf::STT_OBJECT => SymbolKind::Object,
                elf::STT_NOTYPE => SymbolKind::NoType,
                _ => continue,
            };
            let raw = match sym.name(endian, syms.strings()) {
                Ok(raw) if !raw.is_empty() => String::from_utf8_lossy(raw).into_owned(),
                _ => continue,
            };
            let mut value: u64 = sym.st_value(endian).into();
            if thumb && kind == SymbolKind::Func {
                value &= !1;
            }
            // `.symtab` of recent binutils carries versions in the name itself.
            let (name, mut version, mut default_version) = match raw.split_once('@') {
                Some((n, rest)) => match rest.strip_prefix('@') {
                    Some(v) => (n.to_string(), Some(v.to_string()), true),
                    None => (n.to_string(), Some(rest.to_string()), false),
                },
                None => (raw.clone(), None, true),
            };
            if let Some(vt) = &versions {
                let vi = vt.version_index(endian, index);
                if let Ok(Some(v)) = vt.version(vi) {
                    version = Some(String::from_utf8_lossy(v.name()).into_owned());
                    default_version = !vi.is_hidden();
                }
            }
            symbols.push(ElfSymbol {
                name,
                version,
                default_version,
                value,
                size: sym.st_size(endian).into(),
                kind,
                local: sym.st_bind() == elf::STB_LOCAL,
                table,
            });
        }
    }
    let mut build_id = None;
    for section in sections.iter() {
        if let Ok(Some(mut notes)) = section.notes(endian, data) {
            while let Ok(Some(note)) = notes.next() {
                if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                    build_id = Some(note.desc().iter().map(|b| format!("{b:02x}")).collect());
                }
            }
        }
    }
    Ok(ElfImage {
        path: path.to_string(),
        kind,
        machine,
        segments,
        symbols,
        has_symtab: has[0],
        has_dynsym: has[1],
        build_id,
        debug_file: None,
    })
}

/// Where distributions install the separate debug file of a build id
/// (`/usr/lib/debug/.build-id/ab/cdef....debug`, as gdb and perf look).
pub fn debug_file_path(build_id: &str) -> Option<std::path::PathBuf> {
    if build_id.len() < 3 || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(std::path::PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &build_id[..2],
        &build_id[2..]
    )))
}

impl ElfImage {
    /// Takes the `.symtab` symbols of a separate debug file of this image
    /// (same build id). Segments stay this file's own: a debug file's
    /// `PT_LOAD` headers describe no file bytes.
    pub fn merge_debug(&mut self, debug: &ElfImage) -> bool {
        if debug.build_id.is_none() || debug.build_id != self.build_id || !debug.has_symtab {
            return false;
        }
        self.symbols.extend(
            debug
                .symbols
                .iter()
                .filter(|s| s.table == SymbolTable::Symtab)
                .cloned(),
        );
        self.has_symtab = true;
        self.debug_file = Some(debug.path.clone());
        true
    }
}

/// Reads and parses an ELF file: only a regular file that starts with the
/// ELF magic, and of it only the headers and the sections symbol lookups
/// need ([`crate::elf_file`]), never the whole file: a device such as
/// /dev/zero would be read without end, a 2 GB file would cost 2 GB.
pub fn open(path: &std::path::Path) -> Result<ElfImage> {
    use std::io::Read;
    let bad = |reason: String| Error::BadElf {
        path: path.display().to_string(),
        reason,
    };
    let mut f = crate::open_no_wait(path).map_err(|e| Error::io(path, e))?;
    let meta = f.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(bad(if meta.is_dir() {
            "a directory, not an elf file".into()
        } else {
            "not a regular file".into()
        }));
    }
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err() || &magic != b"\x7fELF" {
        return Err(bad("not an elf file (no \\x7fELF magic)".into()));
    }
    let ranges = crate::elf_file::read(&f, meta.len()).map_err(|e| range_error(path, e))?;
    ElfImage::parse_from(&path.display().to_string(), &ranges)
}

/// The error of a piece of `path` that could not be read.
fn range_error(path: &std::path::Path, e: crate::elf_file::RangeError) -> Error {
    match e {
        crate::elf_file::RangeError::Io(e) => Error::io(path, e),
        crate::elf_file::RangeError::TooBig { what, offset, size } => Error::BadElf {
            path: path.display().to_string(),
            reason: format!(
                "{what} at offset {offset:#x} claims {size} bytes, more than ktrace reads ({} MiB)",
                crate::elf_file::MAX_PIECE >> 20
            ),
        },
    }
}

/// Like [`open`], and for a file without `.symtab` also reads the symbols of
/// its separate debug file when one is installed under
/// /usr/lib/debug/.build-id (e.g. Debian's `-dbg`/`-dbgsym` packages).
pub fn open_with_debug(path: &std::path::Path) -> Result<ElfImage> {
    let mut img = open(path)?;
    if !img.has_symtab
        && let Some(dbg) = img.build_id.as_deref().and_then(debug_file_path)
        && dbg.exists()
        && let Ok(debug) = open(&dbg)
    {
        img.merge_debug(&debug);
    }
    Ok(img)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_without_reading_it() {
        // Regression: `ktrace syms x --elf /dev/zero` read until the OOM killer.
        let e = open(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = open(std::path::Path::new("/etc")).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let e = open(std::path::Path::new("/etc/hostname")).unwrap_err();
        assert!(e.to_string().contains("not an elf file"), "{e}");
        assert!(open(std::path::Path::new("/bin/true")).is_ok());
    }

    /// Reading only the pieces gives exactly what parsing the whole file
    /// gives, on the system's own programs and libraries (and debug files
    /// when installed), for a fraction of the bytes.
    #[test]
    fn pieces_parse_like_the_whole_file() {
        let mut files = Vec::new();
        for dir in [
            "/bin",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib/debug/.build-id",
        ] {
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut v: Vec<_> = rd.filter_map(|e| Some(e.ok()?.path())).collect();
            v.sort();
            files.extend(v.into_iter().take(150));
        }
        let (mut same, mut whole, mut held) = (0, 0u64, 0u64);
        for p in files {
            let Ok(bytes) = std::fs::read(&p) else {
                continue;
            };
            if !bytes.starts_with(b"\x7fELF") || !std::fs::metadata(&p).unwrap().is_file() {
                continue;
            }
            let name = p.display().to_string();
            let want = ElfImage::parse(&name, &bytes).map_err(|e| e.to_string());
            let got = open(&p).map_err(|e| e.to_string());
            if got != want {
                let brief = |r: &std::result::Result<ElfImage, String>| match r {
                    Ok(i) => format!(
                        "{} symbols, {:?} {:?} {} {}",
                        i.symbols.len(),
                        i.segments.first(),
                        i.build_id,
                        i.has_symtab,
                        i.has_dynsym
                    ),
                    Err(e) => e.clone(),
                };
                let first = match (&got, &want) {
                    (Ok(g), Ok(w)) => g
                        .symbols
                        .iter()
                        .zip(&w.symbols)
                        .find(|(a, b)| a != b)
                        .map(|p| format!("{p:?}")),
                    _ => None,
                };
                panic!(
                    "{name}: pieces {} / whole {}; first different symbol {first:?}",
                    brief(&got),
                    brief(&want)
                );
            }
            let f = std::fs::File::open(&p).unwrap();
            held += crate::elf_file::read(&f, bytes.len() as u64)
                .unwrap()
                .held();
            whole += bytes.len() as u64;
            same += 1;
        }
        eprintln!("{same} ELF files: {held} bytes read in pieces, {whole} in the files");
        assert!(same > 20, "only {same} ELF files found");
        assert!(held * 2 < whole, "{held} bytes read of {whole}");
    }

    fn sym(name: &str, version: Option<&str>, default: bool, value: u64, size: u64) -> ElfSymbol {
        ElfSymbol {
            name: name.to_string(),
            version: version.map(str::to_string),
            default_version: default,
            value,
            size,
            kind: SymbolKind::Func,
            local: false,
            table: SymbolTable::Dynsym,
        }
    }

    fn seg(vaddr: u64, offset: u64, filesz: u64, executable: bool) -> LoadSegment {
        LoadSegment {
            vaddr,
            offset,
            filesz,
            memsz: filesz,
            executable,
        }
    }

    /// A shared-object-like layout (from `readelf -lW` of a glibc: text at
    /// vaddr == offset, data with vaddr - offset = 0x1000) and a non-PIE
    /// layout (text at 0x401000 from offset 0x1000).
    fn image(kind: ElfKind, segments: Vec<LoadSegment>, symbols: Vec<ElfSymbol>) -> ElfImage {
        ElfImage {
            path: "test.so".to_string(),
            kind,
            machine: elf::EM_X86_64,
            segments,
            symbols,
            has_symtab: false,
            has_dynsym: true,
            build_id: Some("93ac61ec".to_string()),
            debug_file: None,
        }
    }

    fn libc_like() -> ElfImage {
        let mut local = sym("helper", None, true, 0x29000, 0x20);
        local.local = true;
        local.table = SymbolTable::Symtab;
        let mut local2 = local.clone();
        local2.value = 0x29100;
        let mut data = sym("environ_copy", None, true, 0x1f0010, 8);
        data.kind = SymbolKind::Object;
        image(
            ElfKind::Dyn,
            vec![
                seg(0, 0, 0x28000, false),
                seg(0x28000, 0x28000, 0x150000, true),
                seg(0x1f0000, 0x1ef000, 0x5000, false),
            ],
            vec![
                sym("getenv", Some("GLIBC_2.2.5"), true, 0x3f0b0, 204),
                sym("realpath", Some("GLIBC_2.3"), true, 0x3d560, 1966),
                sym("realpath", Some("GLIBC_2.2.5"), false, 0x150070, 33),
                sym("old_only", Some("GLIBC_2.0"), false, 0x40000, 16),
                local,
                local2,
                data,
            ],
        )
    }

    #[test]
    fn spec_parse_table() {
        type Case<'a> = (&'a str, &'a str, Option<(&'a str, bool)>, u64);
        let cases: &[Case<'_>] = &[
            ("getenv", "getenv", None, 0),
            ("getenv+4", "getenv", None, 4),
            ("getenv+0x10", "getenv", None, 16),
            (
                "getenv@@GLIBC_2.2.5",
                "getenv",
                Some(("GLIBC_2.2.5", true)),
                0,
            ),
            (
                "getenv@GLIBC_2.2.5+0x2",
                "getenv",
                Some(("GLIBC_2.2.5", false)),
                2,
            ),
            ("_ZN3foo3barEv", "_ZN3foo3barEv", None, 0),
        ];
        for &(text, name, version, offset) in cases {
            let s = SymbolSpec::parse(text).unwrap();
            assert_eq!(s.name, name, "{text}");
            assert_eq!(
                s.version,
                version.map(|(v, d)| (v.to_string(), d)),
                "{text}"
            );
            assert_eq!(s.offset, offset, "{text}");
        }
        for bad in [
            "", "+4", "getenv+", "getenv+x", "getenv@", "getenv@@", "a@b@c", "a b", "lib:sym",
        ] {
            assert!(
                SymbolSpec::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn default_version_matches_bare_name() {
        let img = libc_like();
        let t = img.resolve("getenv").unwrap();
        assert_eq!((t.vaddr, t.file_offset), (0x3f0b0, 0x3f0b0));
        let t = img.resolve("realpath").unwrap();
        assert_eq!(t.symbol.version.as_deref(), Some("GLIBC_2.3"));
        assert_eq!(t.file_offset, 0x3d560);
        let t = img.resolve("realpath@GLIBC_2.2.5").unwrap();
        assert_eq!(t.file_offset, 0x150070);
        assert!(img.resolve("realpath@@GLIBC_2.2.5").is_err());
        // Only hidden versions: the bare name still finds it when unique.
        assert_eq!(img.resolve("old_only").unwrap().vaddr, 0x40000);
    }

    #[test]
    fn offsets_inside_and_past_the_symbol() {
        let img = libc_like();
        assert_eq!(img.resolve("getenv+0x10").unwrap().file_offset, 0x3f0c0);
        assert_eq!(
            img.resolve("getenv+203").unwrap().file_offset,
            0x3f0b0 + 203
        );
        let e = img.resolve("getenv+204").unwrap_err().to_string();
        assert!(e.contains("past the end"), "{e}");
    }

    #[test]
    fn ambiguous_lists_every_address() {
        let e = libc_like().resolve("helper").unwrap_err();
        let Error::Ambiguous { candidates, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(candidates.len(), 2);
        let text = e.to_string();
        assert!(
            text.contains("0x29000") && text.contains("0x29100"),
            "{text}"
        );
    }

    #[test]
    fn same_definition_in_both_tables_is_one() {
        let mut img = libc_like();
        let mut dup = img.symbols[0].clone();
        dup.table = SymbolTable::Symtab;
        img.symbols.push(dup);
        assert_eq!(img.resolve("getenv").unwrap().vaddr, 0x3f0b0);
    }

    #[test]
    fn data_and_missing_and_stripped() {
        let img = libc_like();
        let e = img.resolve("environ_copy").unwrap_err().to_string();
        assert!(e.contains("not executable"), "{e}");
        let e = img.resolve("nosuch").unwrap_err().to_string();
        assert!(e.contains("not found") && e.contains("stripped"), "{e}");
        let mut stripped = img.clone();
        stripped.has_dynsym = false;
        stripped.symbols.clear();
        let e = stripped.resolve("getenv").unwrap_err();
        assert!(matches!(e, Error::Stripped { .. }), "{e}");
    }

    #[test]
    fn non_pie_segment_with_vaddr_not_offset() {
        let img = image(
            ElfKind::Exec,
            vec![
                seg(0x400000, 0, 0x600, false),
                seg(0x401000, 0x1000, 0x200, true),
            ],
            vec![sym("main", None, true, 0x401136, 0x20)],
        );
        let t = img.resolve("main+2").unwrap();
        assert_eq!((t.vaddr, t.file_offset), (0x401138, 0x1138));
        assert_eq!(img.vaddr_to_file_offset(0x401138), Some(0x1138));
        assert_eq!(img.file_offset_to_vaddr(0x1138), Some(0x401138));
        assert_eq!(img.vaddr_to_file_offset(0x402000), None);
    }

    #[test]
    fn symbolize_picks_the_covering_symbol() {
        let img = libc_like();
        let (s, off) = img.symbolize(0x3f0b4).unwrap();
        assert_eq!((s.name.as_str(), off), ("getenv", 4));
        assert!(img.symbolize(0x3f0b0 + 204).is_none());
        let (s, _) = img.symbolize(0x150070).unwrap();
        assert_eq!(s.display_name(), "realpath@GLIBC_2.2.5");
    }

    #[test]
    fn debug_files_merge_only_with_the_same_build_id() {
        let mut img = libc_like();
        let mut dbg = image(ElfKind::Dyn, vec![], vec![]);
        let mut hidden = sym("static_helper", None, true, 0x29200, 0x10);
        hidden.table = SymbolTable::Symtab;
        hidden.local = true;
        dbg.symbols.push(hidden);
        dbg.has_symtab = true;
        dbg.path = "x.debug".to_string();
        dbg.build_id = Some("ffff".to_string());
        assert!(!img.merge_debug(&dbg));
        assert!(img.resolve("static_helper").is_err());
        dbg.build_id = img.build_id.clone();
        assert!(img.merge_debug(&dbg));
        assert_eq!(img.resolve("static_helper").unwrap().file_offset, 0x29200);
        assert_eq!(img.debug_file.as_deref(), Some("x.debug"));
        assert_eq!(
            debug_file_path("93ac61ec").unwrap(),
            std::path::PathBuf::from("/usr/lib/debug/.build-id/93/ac61ec.debug")
        );
        assert!(debug_file_path("../etc").is_none());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for data in [
            &b""[..],
            b"\x7fELF",
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0garbage",
            b"MZ\x90\0",
        ] {
            assert!(ElfImage::parse("x", data).is_err());
        }
    }

    #[test]
    fn reads_its_own_test_binary() {
        // The test executable is a real ELF with a .symtab.
        let exe = std::env::current_exe().unwrap();
        let img = open(&exe).unwrap();
        assert!(img.has_symtab);
        assert!(!img.segments.is_empty());
        assert!(img.segments.iter().any(|s| s.executable));
        let main = img.resolve("main").unwrap();
        let seg = img.segment_of_vaddr(main.vaddr).unwrap();
        assert_eq!(main.file_offset, main.vaddr - seg.vaddr + seg.offset);
    }
}
