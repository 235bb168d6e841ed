//! A version 7 trace.dat writer (trace-cmd.dat.v7(5)) for finished data:
//! the metadata sections (header info, ftrace and event formats, kallsyms,
//! printk formats, saved cmdlines), an options section, the buffer
//! flyrecord section with each CPU's pages page-aligned, a second options
//! section with the BUFFER option, and the strings section, in the order
//! trace-cmd 3.1 writes them. Uncompressed, or zstd (each metadata section
//! one frame, the kallsyms text read and compressed a block at a time
//! with the fast strategy;
//! CPU data in chunks, with the compressor's fast strategy) through
//! [`crate::zstd`], or zlib through miniz_oxide (sections gathered
//! whole). Recording goes
//! through the version 6 [`crate::Writer`] (its layout survives a kill);
//! [`crate::Writer::finish_v7`] converts a recording to version 7 through
//! the same code, reading the kallsyms text back a block at a time and
//! each CPU's pages a chunk at a time.

use crate::write::{Header, encode_metadata_v7};
use crate::{Endian, Error, MAGIC, option};
use std::io::{Seek, SeekFrom, Write};

/// Pages per compressed chunk of CPU data (trace-cmd uses a few pages).
const CHUNK_PAGES: usize = 10;

/// Compression of a version 7 file written here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compress7 {
    /// "none".
    None,
    /// "zstd", with the version string written in the file (trace-cmd
    /// writes its libzstd's, e.g. "1.5.4"; 3.1.6 does not check it).
    Zstd(&'static str),
    /// "zlib" (RFC 1950 streams through miniz_oxide), with its version
    /// string; Debian's trace-cmd 3.1.6 is built without zlib.
    Zlib(&'static str),
}

/// The zstd version string ktrace writes: that of the libzstd format
/// [`crate::zstd`]'s frames follow (trace-cmd writes its libzstd's version
/// and checks only the name "zstd").
pub const ZSTD_VERSION: &str = "1.5.4";

/// Compresses blocks, reusing one zstd compressor (and its tables) for
/// every block of a file; each block is a whole zstd frame of its own, as
/// trace-cmd's `ZSTD_compress2` writes them.
struct Packer {
    comp: Compress7,
    zstd: crate::zstd::Compressor,
}

impl Packer {
    fn new(comp: Compress7) -> Packer {
        Packer {
            comp,
            zstd: crate::zstd::Compressor::new(),
        }
    }

    /// A chunk of CPU data, `data`, compressed into `out` (cleared first;
    /// zstd: the fast strategy); `data` is handed back (its buffer is
    /// reused).
    fn compress(&mut self, data: Vec<u8>, out: &mut Vec<u8>) -> Vec<u8> {
        out.clear();
        match self.comp {
            Compress7::Zstd(_) => self.zstd.compress_fast(&data, out),
            Compress7::Zlib(_) => *out = miniz_oxide::deflate::compress_to_vec_zlib(&data, 6),
            Compress7::None => out.extend_from_slice(&data),
        }
        data
    }
}

struct Out<W> {
    w: W,
    e: Endian,
    pos: u64,
    strings: Vec<u8>,
}

impl<W: Write + Seek> Out<W> {
    fn raw(&mut self, b: &[u8]) -> Result<(), Error> {
        self.w
            .write_all(b)
            .map_err(Error::io("write version 7 file"))?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn n16(&self, v: u16) -> [u8; 2] {
        match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn n32(&self, v: u32) -> [u8; 4] {
        match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn n64(&self, v: u64) -> [u8; 8] {
        match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn string_id(&mut self, s: &str) -> u32 {
        let id = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        id
    }
    fn pad_to(&mut self, align: u64) -> Result<(), Error> {
        let pad = (align - self.pos % align) % align;
        self.raw(&vec![0u8; pad as usize])
    }
    fn patch_u64(&mut self, at: u64, v: u64) -> Result<(), Error> {
        let b = self.n64(v);
        self.patch(at, &b)
    }
    fn patch(&mut self, at: u64, b: &[u8]) -> Result<(), Error> {
        self.w
            .seek(SeekFrom::Start(at))
            .map_err(Error::io("seek"))?;
        self.w
            .write_all(b)
            .map_err(Error::io("patch version 7 file"))?;
        self.w
            .seek(SeekFrom::Start(self.pos))
            .map_err(Error::io("seek"))?;
        Ok(())
    }
    /// A section whose body is `parts` one after the other; returns its
    /// offset.
    fn section(
        &mut self,
        id: u16,
        desc: &str,
        parts: &[&[u8]],
        pack: Option<&mut Packer>,
    ) -> Result<u64, Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut fill = |at: u64, buf: &mut [u8]| {
            // the parts' bytes from `at` on
            let mut at = at as usize;
            let mut filled = 0;
            for p in parts {
                if at >= p.len() {
                    at -= p.len();
                    continue;
                }
                let n = (p.len() - at).min(buf.len() - filled);
                buf[filled..filled + n].copy_from_slice(&p[at..at + n]);
                filled += n;
                at = 0;
                if filled == buf.len() {
                    break;
                }
            }
            Ok(())
        };
        self.section_from(id, desc, len as u64, &mut fill, pack, false)
    }

    /// A section whose body is `len` bytes read a piece at a time through
    /// `fill(at, buf)` (the body's bytes from `at` on, in order), written
    /// as they come (zstd: one frame, compressed a block at a time; zlib
    /// gathers the body first; `fast`: zstd's fast strategy instead of
    /// the chain); returns its offset.
    fn section_from(
        &mut self,
        id: u16,
        desc: &str,
        len: u64,
        fill: &mut ReadAt<'_>,
        pack: Option<&mut Packer>,
        fast: bool,
    ) -> Result<u64, Error> {
        let at = self.pos;
        let sid = self.string_id(desc);
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&self.n16(id));
        h.extend_from_slice(&self.n16(u16::from(pack.is_some())));
        h.extend_from_slice(&self.n32(sid));
        let Some(pack) = pack else {
            h.extend_from_slice(&self.n64(len));
            self.raw(&h)?;
            let mut buf = vec![0u8; (len as usize).min(COPY)];
            let mut done = 0u64;
            while done < len {
                let n = (len - done).min(COPY as u64) as usize;
                fill(done, &mut buf[..n])?;
                self.raw(&buf[..n])?;
                done += n as u64;
            }
            return Ok(at);
        };
        // sizes patched once the body is written
        h.extend_from_slice(&[0; 8]);
        self.raw(&h)?;
        let size_at = self.pos - 8;
        let ul = self.n32(len32(usize::try_from(len).unwrap_or(usize::MAX))?);
        self.raw(&[0; 4])?;
        self.raw(&ul)?;
        let body_at = self.pos;
        match pack.comp {
            Compress7::Zstd(_) => {
                let n = usize::try_from(len)
                    .map_err(|_| Error::Usage(format!("{len} bytes do not fit in memory")))?;
                let mut done = 0u64;
                let read = |buf: &mut [u8]| {
                    fill(done, buf)?;
                    done += buf.len() as u64;
                    Ok(())
                };
                if fast {
                    pack.zstd.compress_stream_fast(n, read, |b| self.raw(b))?;
                } else {
                    pack.zstd.compress_stream(n, read, |b| self.raw(b))?;
                }
            }
            _ => {
                let mut v = vec![0u8; len as usize];
                fill(0, &mut v)?;
                let mut c = Vec::new();
                pack.compress(v, &mut c);
                self.raw(&c)?;
            }
        }
        let clen = self.pos - body_at;
        self.patch_u64(size_at, 8 + clen)?;
        let cl = self.n32(len32(usize::try_from(clen).unwrap_or(usize::MAX))?);
        self.patch(size_at + 8, &cl)?;
        Ok(at)
    }
}

/// Bytes copied at a time into an uncompressed section.
const COPY: usize = 64 << 10;

/// Fills a buffer with a body's bytes from byte `at` on.
type ReadAt<'a> = dyn FnMut(u64, &mut [u8]) -> Result<(), Error> + 'a;

/// Each CPU's data, page-aligned, read a chunk at a time: compressed in
/// chunks of [`CHUNK_PAGES`] pages (a count, then each chunk's compressed
/// and uncompressed sizes and bytes), or copied. Returns each CPU's number,
/// where its data starts and its size as the BUFFER option gives them.
fn write_cpu_data<W: Write + Seek>(
    o: &mut Out<W>,
    ps: u64,
    cpus: &[(u32, u64)],
    pack: &mut Packer,
    zstd: bool,
    read: &mut Read7<'_>,
) -> Result<Vec<(u32, u64, u64)>, Error> {
    let mut table = Vec::with_capacity(cpus.len());
    // a chunk of CPU data as trace-cmd cuts them (PAGES_IN_CHUNK pages),
    // compressed on its own; uncompressed data is copied in runs as large
    let chunk = ps as usize * CHUNK_PAGES;
    let mut buf = Vec::with_capacity(chunk);
    let mut z = Vec::new();
    for (i, &(cpu, size)) in cpus.iter().enumerate() {
        o.pad_to(ps)?;
        let at = o.pos;
        let count_at = o.pos;
        if zstd {
            o.raw(&[0; 4])?;
        }
        let mut done = 0u64;
        let mut chunks = 0u32;
        while done < size {
            let n = (size - done).min(chunk as u64) as usize;
            buf.resize(n, 0);
            read(Source::Cpu(i), done, &mut buf)?;
            if zstd {
                buf = pack.compress(std::mem::take(&mut buf), &mut z);
                let (cl, ul) = (o.n32(len32(z.len())?), o.n32(len32(n)?));
                o.raw(&cl)?;
                o.raw(&ul)?;
                o.raw(&z)?;
                chunks = chunks
                    .checked_add(1)
                    .ok_or_else(|| Error::Usage(format!("cpu {cpu}: too many chunks")))?;
            } else {
                o.raw(&buf)?;
            }
            done += n as u64;
        }
        if zstd {
            let n = o.n32(chunks);
            o.patch(count_at, &n)?;
            // trace-cmd's size counts the chunks, not their count
            table.push((cpu, at, o.pos - at - 4));
        } else {
            table.push((cpu, at, size));
        }
    }
    Ok(table)
}

/// The file's first bytes: magic, version 7, endianness, long size, page
/// size and the compression's name and version.
fn file_header<W: Write + Seek>(o: &Out<W>, header: &Header, compress: Compress7) -> Vec<u8> {
    let e = header.endian;
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(b"7\0");
    b.push(u8::from(e == Endian::Big));
    b.push(header.long_size);
    b.extend_from_slice(&o.n32(header.page_size));
    match compress {
        Compress7::None => b.extend_from_slice(b"none\0\0"),
        Compress7::Zstd(v) | Compress7::Zlib(v) => {
            b.extend_from_slice(if zstd_name(compress) {
                b"zstd\0"
            } else {
                b"zlib\0"
            });
            b.extend_from_slice(v.as_bytes());
            b.push(0);
        }
    }
    b
}

/// The BUFFER option of the top instance: where its flyrecord section is,
/// its clock, page size and each CPU's data.
fn buffer_option<W: Write + Seek>(
    o: &Out<W>,
    buf_at: u64,
    header: &Header,
    table: &[(u32, u64, u64)],
) -> Result<Vec<u8>, Error> {
    let mut bo = Vec::new();
    bo.extend_from_slice(&o.n64(buf_at));
    bo.extend_from_slice(b"\0"); // top instance
    let clock = if header.clock.is_empty() {
        "local"
    } else {
        &header.clock
    };
    bo.extend_from_slice(clock.as_bytes());
    bo.push(0);
    bo.extend_from_slice(&o.n32(header.page_size));
    bo.extend_from_slice(&o.n32(len32(table.len())?));
    for &(cpu, at, size) in table {
        bo.extend_from_slice(&o.n32(cpu));
        bo.extend_from_slice(&o.n64(at));
        bo.extend_from_slice(&o.n64(size));
    }
    Ok(bo)
}

fn zstd_name(c: Compress7) -> bool {
    matches!(c, Compress7::Zstd(_))
}

fn len32(n: usize) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Usage(format!("{n} bytes do not fit a 32-bit size")))
}

fn opt(o: &mut Vec<u8>, e: Endian, id: u16, data: &[u8]) -> Result<(), Error> {
    let (a, b) = match e {
        Endian::Little => (id.to_le_bytes(), len32(data.len())?.to_le_bytes()),
        Endian::Big => (id.to_be_bytes(), len32(data.len())?.to_be_bytes()),
    };
    o.extend_from_slice(&a);
    o.extend_from_slice(&b);
    o.extend_from_slice(data);
    Ok(())
}

/// Writes a whole version 7 file to `w`: `cpus` holds each CPU's number
/// and its pages (a multiple of `header.page_size`), `cmdlines` the saved
/// cmdlines, `cpu_stats` the `per_cpu/cpuN/stats` texts.
pub fn write_v7<W: Write + Seek>(
    w: W,
    header: &Header,
    cmdlines: &[u8],
    cpu_stats: &[String],
    cpus: &[(u32, &[u8])],
    compress: Compress7,
) -> Result<W, Error> {
    let sizes: Vec<(u32, u64)> = cpus.iter().map(|&(c, d)| (c, d.len() as u64)).collect();
    write_v7_from(
        w,
        header,
        header.kallsyms.len() as u64,
        cmdlines,
        cpu_stats,
        &sizes,
        compress,
        &mut |src, at, buf| {
            let at = at as usize;
            let data = match src {
                Source::Kallsyms => &header.kallsyms,
                Source::Cpu(i) => cpus[i].1,
            };
            buf.copy_from_slice(&data[at..at + buf.len()]);
            Ok(())
        },
    )
}

/// What [`write_v7_from`] reads through its `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The kallsyms text.
    Kallsyms,
    /// CPU `cpus[i]`'s data.
    Cpu(usize),
}

/// Fills a buffer with a source's bytes from byte `at` on.
pub(crate) type Read7<'a> = dyn FnMut(Source, u64, &mut [u8]) -> Result<(), Error> + 'a;

/// [`write_v7`] with the kallsyms text (`ks_len` bytes; `header.kallsyms`
/// is not read) and each CPU's data read through `read(source, at, buf)`:
/// fill `buf` with the source's bytes from byte `at` on. `cpus` holds
/// each CPU's number and data size; the kallsyms text and every CPU's
/// data are read once, in order, a piece at a time (a block of at most
/// 128 KiB of kallsyms, a chunk of pages: what is held in memory is a
/// piece, not the data).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_v7_from<W: Write + Seek>(
    w: W,
    header: &Header,
    ks_len: u64,
    cmdlines: &[u8],
    cpu_stats: &[String],
    cpus: &[(u32, u64)],
    compress: Compress7,
    read: &mut Read7<'_>,
) -> Result<W, Error> {
    let e = header.endian;
    let ps = header.page_size as u64;
    if !(64..=(1 << 24)).contains(&ps) {
        return Err(Error::Usage(format!("page size {ps} is implausible")));
    }
    for &(cpu, size) in cpus {
        if !size.is_multiple_of(ps) {
            return Err(Error::Usage(format!(
                "cpu {cpu}: {size} bytes are not whole pages"
            )));
        }
    }
    let zstd = compress != Compress7::None;
    let mut pack = Packer::new(compress);
    let mut o = Out {
        w,
        e,
        pos: 0,
        strings: Vec::new(),
    };
    let b = file_header(&o, header, compress);
    o.raw(&b)?;
    let first_opt_at = o.pos;
    o.raw(&[0; 8])?;
    let m = encode_metadata_v7(header, ks_len, cmdlines)?;
    let mut offsets = Vec::new();
    for (id, desc, parts) in [
        (option::HEADER_INFO, "headers", &[&m.header_info[..]][..]),
        (option::FTRACE_EVENTS, "ftrace events", &[&m.ftrace]),
        (option::EVENT_FORMATS, "events format", &[&m.events]),
        (option::KALLSYMS, "kallsyms", &[]),
        (option::PRINTK, "printk", &[&m.printk]),
        (option::CMDLINES, "command lines", &[&m.cmdlines]),
    ] {
        let p = zstd.then_some(&mut pack);
        let at = if id == option::KALLSYMS {
            // its size field, then the text read a piece at a time
            let head = &m.kallsyms;
            let hl = head.len() as u64;
            let mut fill = |at: u64, buf: &mut [u8]| {
                let mut filled = 0;
                if at < hl {
                    let n = ((hl - at) as usize).min(buf.len());
                    buf[..n].copy_from_slice(&head[at as usize..at as usize + n]);
                    filled = n;
                }
                if filled < buf.len() {
                    read(
                        Source::Kallsyms,
                        at + filled as u64 - hl,
                        &mut buf[filled..],
                    )?;
                }
                Ok(())
            };
            // the fast strategy: on a 6.18 host's 5.4 MB text 986,764
            // bytes against the chain's 848,212, in 313 M instructions
            // against 640 M
            o.section_from(id, desc, hl + ks_len, &mut fill, p, true)?
        } else {
            o.section(id, desc, parts, p)?
        };
        offsets.push((id, at));
    }
    drop(m);
    // first options section: where the metadata is, clock, uname, stats
    let mut opts = Vec::new();
    for (id, at) in &offsets {
        opt(&mut opts, e, *id, &o.n64(*at))?;
    }
    if !header.clock.is_empty() {
        opt(
            &mut opts,
            e,
            option::TRACECLOCK,
            format!("[{}]\0", header.clock).as_bytes(),
        )?;
    }
    for op in &header.options {
        opt(&mut opts, e, op.id, &op.data)?;
    }
    for s in cpu_stats {
        opt(
            &mut opts,
            e,
            option::CPUSTAT,
            [s.as_bytes(), b"\0"].concat().as_slice(),
        )?;
    }
    opt(&mut opts, e, option::CPUCOUNT, &o.n32(len32(cpus.len())?))?;
    let done_at_in_opts = opts.len() + 6;
    opt(&mut opts, e, option::DONE, &[0; 8])?;
    let opts1 = o.section(option::DONE, "options", &[&opts], None)?;
    o.patch_u64(first_opt_at, opts1)?;
    let done1 = opts1 + 16 + done_at_in_opts as u64;
    // the buffer flyrecord section: header, padding, each CPU page-aligned
    let buf_at = o.pos;
    let sid = o.string_id("buffer flyrecord ");
    let mut h = Vec::new();
    h.extend_from_slice(&o.n16(option::BUFFER));
    h.extend_from_slice(&o.n16(u16::from(zstd)));
    h.extend_from_slice(&o.n32(sid));
    h.extend_from_slice(&[0; 8]);
    o.raw(&h)?;
    let body_start = o.pos;
    let table = write_cpu_data(&mut o, ps, cpus, &mut pack, zstd, read)?;
    let size = o.pos - body_start;
    o.patch_u64(buf_at + 8, size)?;
    // second options section: the BUFFER option
    let bo = buffer_option(&o, buf_at, header, &table)?;
    let mut opts = Vec::new();
    opt(&mut opts, e, option::BUFFER, &bo)?;
    opt(&mut opts, e, option::DONE, &[0; 8])?;
    let opts2 = o.section(option::DONE, "options", &[&opts], None)?;
    o.patch_u64(done1, opts2)?;
    let sid = o.string_id("strings");
    let strings = std::mem::take(&mut o.strings);
    let mut h = Vec::new();
    h.extend_from_slice(&o.n16(option::STRINGS));
    h.extend_from_slice(&o.n16(0));
    h.extend_from_slice(&o.n32(sid));
    h.extend_from_slice(&o.n64(strings.len() as u64));
    o.raw(&h)?;
    o.raw(&strings)?;
    o.w.flush().map_err(Error::io("flush"))?;
    Ok(o.w)
}
