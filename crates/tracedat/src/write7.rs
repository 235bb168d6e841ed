//! A version 7 trace.dat writer (trace-cmd.dat.v7(5)) for finished data:
//! the metadata sections (header info, ftrace and event formats, kallsyms,
//! printk formats, saved cmdlines), an options section, the buffer
//! flyrecord section with each CPU's pages page-aligned, a second options
//! section with the BUFFER option, and the strings section, in the order
//! trace-cmd 3.1 writes them. Uncompressed, or zstd (metadata sections
//! compressed whole, CPU data in chunks) through ruzstd, or zlib through
//! miniz_oxide. Recording goes
//! through the version 6 [`crate::Writer`] (its layout survives a kill); this
//! converts to version 7 for readers that want it.

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

impl Compress7 {
    fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Compress7::None => data.to_vec(),
            Compress7::Zstd(_) => {
                ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
            }
            Compress7::Zlib(_) => miniz_oxide::deflate::compress_to_vec_zlib(data, 6),
        }
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
        self.w
            .seek(SeekFrom::Start(at))
            .map_err(Error::io("seek"))?;
        self.w
            .write_all(&b)
            .map_err(Error::io("patch version 7 file"))?;
        self.w
            .seek(SeekFrom::Start(self.pos))
            .map_err(Error::io("seek"))?;
        Ok(())
    }
    /// A section; returns its offset.
    fn section(&mut self, id: u16, desc: &str, body: &[u8], comp: Compress7) -> Result<u64, Error> {
        let zstd = comp != Compress7::None;
        let at = self.pos;
        let sid = self.string_id(desc);
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&self.n16(id));
        h.extend_from_slice(&self.n16(u16::from(zstd)));
        h.extend_from_slice(&self.n32(sid));
        if zstd {
            let c = comp.compress(body);
            h.extend_from_slice(&self.n64(8 + c.len() as u64));
            self.raw(&h)?;
            let (cl, ul) = (self.n32(len32(c.len())?), self.n32(len32(body.len())?));
            self.raw(&cl)?;
            self.raw(&ul)?;
            self.raw(&c)?;
        } else {
            h.extend_from_slice(&self.n64(body.len() as u64));
            self.raw(&h)?;
            self.raw(body)?;
        }
        Ok(at)
    }
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
    let e = header.endian;
    let ps = header.page_size as u64;
    if !(64..=(1 << 24)).contains(&ps) {
        return Err(Error::Usage(format!("page size {ps} is implausible")));
    }
    let zstd = compress != Compress7::None;
    let mut o = Out {
        w,
        e,
        pos: 0,
        strings: Vec::new(),
    };
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
    o.raw(&b)?;
    let first_opt_at = o.pos;
    o.raw(&[0; 8])?;
    let m = encode_metadata_v7(header, cmdlines)?;
    let mut offsets = Vec::new();
    for (id, desc, body) in [
        (option::HEADER_INFO, "headers", &m.header_info),
        (option::FTRACE_EVENTS, "ftrace events", &m.ftrace),
        (option::EVENT_FORMATS, "events format", &m.events),
        (option::KALLSYMS, "kallsyms", &m.kallsyms),
        (option::PRINTK, "printk", &m.printk),
        (option::CMDLINES, "command lines", &m.cmdlines),
    ] {
        offsets.push((id, o.section(id, desc, body, compress)?));
    }
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
    let opts1 = o.section(option::DONE, "options", &opts, Compress7::None)?;
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
    let mut table = Vec::new();
    for &(cpu, data) in cpus {
        if !(data.len() as u64).is_multiple_of(ps) {
            return Err(Error::Usage(format!(
                "cpu {cpu}: {} bytes are not whole pages",
                data.len()
            )));
        }
        o.pad_to(ps)?;
        let at = o.pos;
        if zstd {
            let chunks: Vec<&[u8]> = data.chunks(ps as usize * CHUNK_PAGES).collect();
            let n = o.n32(len32(chunks.len())?);
            o.raw(&n)?;
            for c in chunks {
                let z = compress.compress(c);
                let (cl, ul) = (o.n32(len32(z.len())?), o.n32(len32(c.len())?));
                o.raw(&cl)?;
                o.raw(&ul)?;
                o.raw(&z)?;
            }
            // trace-cmd's size counts the chunks, not their count
            table.push((cpu, at, o.pos - at - 4));
        } else {
            o.raw(data)?;
            table.push((cpu, at, data.len() as u64));
        }
    }
    let size = o.pos - body_start;
    o.patch_u64(buf_at + 8, size)?;
    // second options section: the BUFFER option
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
    for (cpu, at, size) in table {
        bo.extend_from_slice(&o.n32(cpu));
        bo.extend_from_slice(&o.n64(at));
        bo.extend_from_slice(&o.n64(size));
    }
    let mut opts = Vec::new();
    opt(&mut opts, e, option::BUFFER, &bo)?;
    opt(&mut opts, e, option::DONE, &[0; 8])?;
    let opts2 = o.section(option::DONE, "options", &opts, Compress7::None)?;
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
