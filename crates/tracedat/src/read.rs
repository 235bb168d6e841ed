//! The trace.dat reader: versions 6 and 7 as trace-cmd.dat.v6(5) and
//! trace-cmd.dat.v7(5) describe them, into [`Meta`] (header page and event
//! texts, formats by system, kallsyms, printk formats, saved cmdlines,
//! options, buffers) and per-CPU page iterators ([`Pages`]). It does not
//! decode pages or formats (ktrace-ring, ktrace-event do) and never panics
//! on a bad file: every length is checked against the file before it is
//! used, every count is bounded by the bytes that must follow it.

use crate::compress::{Blocks, MAX_BLOCK, decompress};
use crate::write::{
    CHUNK_HEADER, CHUNK_MAGIC, Chunk, KIND_CHUNKS, UNFINISHED_MAGIC, VERSION_FINISHING,
    VERSION_RECORDING,
};
use crate::{Endian, Error, MAGIC, option};
use std::io::{Read, Seek, SeekFrom};

/// Compression of a version 7 file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// trace-cmd's "zlib".
    Zlib,
    /// trace-cmd's "zstd".
    Zstd,
}

impl Compression {
    /// The name trace-cmd writes in the file.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zlib => "zlib",
            Compression::Zstd => "zstd",
        }
    }
}

/// The event formats of one system (`events/<system>/*/format`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct System {
    /// System (group) name.
    pub name: String,
    /// The `format` file texts, as stored.
    pub formats: Vec<Vec<u8>>,
}

/// An option as stored (id and data); the known ones are also interpreted
/// into [`Meta`]'s fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOption {
    /// Option id (see [`crate::option`]).
    pub id: u16,
    /// Its data.
    pub data: Vec<u8>,
}

/// Where one CPU's pages are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuData {
    /// CPU number.
    pub cpu: u32,
    /// Offset in the file (v7 compressed: of the chunk list; an unfinished
    /// ktrace recording: of the first run).
    pub offset: u64,
    /// Size in the file (an unfinished ktrace recording: of all runs).
    pub size: u64,
    /// An unfinished ktrace recording: the runs of pages (offset, size) in
    /// order, one per chunk; empty otherwise (the data is `offset`, `size`).
    pub runs: Vec<(u64, u64)>,
}

/// One ring buffer: the top one or an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffer {
    /// Instance name; "" for the top buffer.
    pub name: String,
    /// Its trace clock, when the file says.
    pub clock: Option<String>,
    /// Size of its pages (sub-buffers).
    pub page_size: u32,
    /// Per-CPU data.
    pub cpus: Vec<CpuData>,
}

/// Everything in a trace.dat file except the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// File version (6 or 7).
    pub version: u32,
    /// Byte order of the traced machine (and of every number in the file).
    pub endian: Endian,
    /// Size of a user-space `long` on the traced machine.
    pub long_size: u8,
    /// Page size of the traced machine (v6: also the size of every page of
    /// CPU data).
    pub page_size: u32,
    /// Compression (v7), with the version string trace-cmd wrote.
    pub compression: Option<(Compression, String)>,
    /// `events/header_page` text.
    pub header_page: Vec<u8>,
    /// `events/header_event` text.
    pub header_event: Vec<u8>,
    /// `events/ftrace/*/format` texts.
    pub ftrace_formats: Vec<Vec<u8>>,
    /// The other event formats, by system.
    pub systems: Vec<System>,
    /// `/proc/kallsyms` text (possibly empty).
    pub kallsyms: Vec<u8>,
    /// `printk_formats` text (possibly empty).
    pub printk_formats: Vec<u8>,
    /// `saved_cmdlines` text (possibly empty).
    pub cmdlines: Vec<u8>,
    /// Number of CPUs (v6 header; v7 CPUCOUNT option).
    pub cpus: u32,
    /// Every option in file order (DONE excluded).
    pub options: Vec<TraceOption>,
    /// The buffers with flyrecord data: the top one first.
    pub buffers: Vec<Buffer>,
    /// The file holds a latency (text) trace instead of pages.
    pub latency: bool,
    /// An unfinished ktrace recording (its recorder did not finish it:
    /// killed, or still recording; see [`crate::Writer`]): the offset of its
    /// first chunk. The CPUs' pages are then in [`CpuData::runs`].
    pub unfinished: Option<u64>,
}

fn opt_str(data: &[u8]) -> &str {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    std::str::from_utf8(&data[..end]).unwrap_or("")
}

impl Meta {
    fn option_texts(&self, id: u16) -> impl Iterator<Item = &str> {
        self.options
            .iter()
            .filter(move |o| o.id == id)
            .map(|o| opt_str(&o.data))
    }

    /// The trace clock: the selected (`[bracketed]`) one of the TRACECLOCK
    /// option, else the top buffer's clock, else None.
    pub fn clock(&self) -> Option<&str> {
        if let Some(t) = self.option_texts(option::TRACECLOCK).next() {
            if let Some(c) = t
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
            {
                return Some(c);
            }
            if !t.trim().is_empty() && !t.contains(' ') {
                return Some(t.trim());
            }
        }
        self.buffers.first().and_then(|b| b.clock.as_deref())
    }

    /// The UNAME option text.
    pub fn uname(&self) -> Option<&str> {
        self.option_texts(option::UNAME).next()
    }

    /// The VERSION option text (the writing program's version).
    pub fn writer_version(&self) -> Option<&str> {
        self.option_texts(option::VERSION).next()
    }

    /// The CPUSTAT option texts (`per_cpu/cpuN/stats`), in file order.
    pub fn cpu_stats(&self) -> Vec<&str> {
        self.option_texts(option::CPUSTAT).collect()
    }

    /// Kernel release from the UNAME option (its third word, as in
    /// `uname -a`), if there is one.
    pub fn kernel_release(&self) -> Option<&str> {
        self.uname()?.split_whitespace().nth(2)
    }
}

/// A trace.dat file opened for reading.
pub struct TraceDat<R> {
    src: Src<R>,
    /// What the file says, pages aside.
    pub meta: Meta,
}

impl<R: Read + Seek> std::fmt::Debug for TraceDat<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDat")
            .field("len", &self.src.len)
            .field("meta", &self.meta)
            .finish()
    }
}

/// Random access to the file with every range checked against its length.
struct Src<R> {
    r: R,
    len: u64,
    /// Where `r` is, when known: reads that follow on from the last one
    /// skip the seek, which would drop a `BufReader`'s buffer (a
    /// compressed file's chunks are read as a header, then the data after
    /// it: two seeks and two 64 KiB refills of the same bytes per chunk).
    at: Option<u64>,
}

impl<R: Read + Seek> Src<R> {
    fn read_at(&mut self, offset: u64, n: u64, what: &str) -> Result<Vec<u8>, Error> {
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(Error::Short {
                what: what.into(),
                offset,
                need: n,
                len: self.len,
            });
        }
        // unknown until the read below has succeeded
        if self.at.take() != Some(offset) {
            self.r
                .seek(SeekFrom::Start(offset))
                .map_err(Error::io(format!("seek to {what}")))?;
        }
        let mut buf = vec![0u8; n as usize];
        self.r
            .read_exact(&mut buf)
            .map_err(Error::io(format!("read {what}")))?;
        self.at = Some(offset + n);
        Ok(buf)
    }
}

/// Sequential reading of numbers, strings and sized blobs, either from the
/// file (version 6 metadata) or from a section's bytes (version 7).
trait Input {
    fn endian(&self) -> Endian;
    fn take(&mut self, n: u64, what: &str) -> Result<Vec<u8>, Error>;
    /// Bytes left, when known (bounds counts before any allocation).
    fn left(&self) -> u64;

    fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, Error> {
        Ok(self.endian().u16(&self.take(2, what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(self.endian().u32(&self.take(4, what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        Ok(self.endian().u64(&self.take(8, what)?))
    }
    /// A NUL-terminated string (at most 4096 bytes).
    fn cstr(&mut self, what: &str) -> Result<String, Error> {
        let mut s = Vec::new();
        loop {
            let b = self.u8(what)?;
            if b == 0 {
                break;
            }
            if s.len() >= 4096 {
                return Err(Error::Format(format!(
                    "{what}: string longer than 4096 bytes"
                )));
            }
            s.push(b);
        }
        String::from_utf8(s).map_err(|_| Error::Format(format!("{what}: not utf-8")))
    }
    /// A fixed tag like `"header_page\0"`.
    fn tag(&mut self, tag: &[u8], what: &str) -> Result<(), Error> {
        let got = self.take(tag.len() as u64, what)?;
        if got != tag {
            return Err(Error::Format(format!(
                "expected {:?} at {what}, found {:?}",
                String::from_utf8_lossy(tag),
                String::from_utf8_lossy(&got)
            )));
        }
        Ok(())
    }
    fn blob64(&mut self, what: &str) -> Result<Vec<u8>, Error> {
        let n = self.u64(what)?;
        self.take(n, what)
    }
    fn blob32(&mut self, what: &str) -> Result<Vec<u8>, Error> {
        let n = self.u32(what)?;
        self.take(n as u64, what)
    }
}

struct FileIn<'a, R> {
    src: &'a mut Src<R>,
    pos: u64,
    endian: Endian,
}

impl<R: Read + Seek> Input for FileIn<'_, R> {
    fn endian(&self) -> Endian {
        self.endian
    }
    fn take(&mut self, n: u64, what: &str) -> Result<Vec<u8>, Error> {
        let b = self.src.read_at(self.pos, n, what)?;
        self.pos += n;
        Ok(b)
    }
    fn left(&self) -> u64 {
        self.src.len.saturating_sub(self.pos)
    }
}

struct SliceIn<'a> {
    b: &'a [u8],
    pos: usize,
    endian: Endian,
    /// File offset of `b[0]` (for messages).
    base: u64,
}

impl Input for SliceIn<'_> {
    fn endian(&self) -> Endian {
        self.endian
    }
    fn take(&mut self, n: u64, what: &str) -> Result<Vec<u8>, Error> {
        let left = self.b.len() - self.pos;
        if n > left as u64 {
            return Err(Error::Short {
                what: format!("{what} (in the section at offset {})", self.base),
                offset: self.base + self.pos as u64,
                need: n,
                len: self.base + self.b.len() as u64,
            });
        }
        let v = self.b[self.pos..self.pos + n as usize].to_vec();
        self.pos += n as usize;
        Ok(v)
    }
    fn left(&self) -> u64 {
        (self.b.len() - self.pos) as u64
    }
}

fn header_info(i: &mut impl Input, m: &mut Meta) -> Result<(), Error> {
    i.tag(b"header_page\0", "header_page tag")?;
    m.header_page = i.blob64("header_page")?;
    i.tag(b"header_event\0", "header_event tag")?;
    m.header_event = i.blob64("header_event")?;
    Ok(())
}

fn ftrace_formats(i: &mut impl Input, m: &mut Meta) -> Result<(), Error> {
    let n = i.u32("ftrace format count")?;
    check_count(i, n as u64, 8, "ftrace format count")?;
    for _ in 0..n {
        m.ftrace_formats.push(i.blob64("ftrace format")?);
    }
    Ok(())
}

fn event_formats(i: &mut impl Input, m: &mut Meta) -> Result<(), Error> {
    let n = i.u32("event system count")?;
    check_count(i, n as u64, 5, "event system count")?;
    for _ in 0..n {
        let name = i.cstr("event system name")?;
        let k = i.u32("event count")?;
        check_count(i, k as u64, 8, "event count")?;
        let mut formats = Vec::new();
        for _ in 0..k {
            formats.push(i.blob64("event format")?);
        }
        m.systems.push(System { name, formats });
    }
    Ok(())
}

/// A count of items of at least `min` bytes each must fit in what is left.
fn check_count(i: &impl Input, n: u64, min: u64, what: &str) -> Result<(), Error> {
    if n.saturating_mul(min) > i.left() {
        return Err(Error::Format(format!(
            "{what} {n} does not fit in the {} bytes that follow",
            i.left()
        )));
    }
    Ok(())
}

impl<R: Read + Seek> TraceDat<R> {
    /// Reads the metadata of a trace.dat file (version 6 or 7); pages are
    /// read later, through [`TraceDat::pages`].
    pub fn open(mut r: R) -> Result<TraceDat<R>, Error> {
        let len = r
            .seek(SeekFrom::End(0))
            .map_err(Error::io("seek to the end of the file"))?;
        let mut src = Src { r, len, at: None };
        if len < MAGIC.len() as u64 {
            return Err(Error::NotTraceDat);
        }
        let magic = src.read_at(0, MAGIC.len() as u64, "magic")?;
        let unfinished = magic == UNFINISHED_MAGIC;
        if !unfinished && magic != MAGIC {
            return Err(Error::NotTraceDat);
        }
        let mut i = FileIn {
            src: &mut src,
            pos: MAGIC.len() as u64,
            endian: Endian::Little,
        };
        let version = i.cstr("version").map_err(|e| match e {
            Error::Format(_) => Error::Version("?".into()),
            e => e,
        })?;
        let version = match (unfinished, version.as_str()) {
            (false, "6" | "7") => version,
            (true, VERSION_RECORDING) => "ktrace unfinished".to_string(),
            (true, VERSION_FINISHING) => {
                return Err(Error::Format(
                    "an unfinished ktrace recording whose finish was interrupted (its \
                     recorder stopped while moving the pages into place): its pages cannot \
                     be read"
                        .into(),
                ));
            }
            (true, v) => {
                return Err(Error::Format(format!(
                    "an unfinished ktrace recording of unknown state {v:?}"
                )));
            }
            (false, _) => return Err(Error::Version(version)),
        };
        let endian = match i.u8("endian")? {
            0 => Endian::Little,
            1 => Endian::Big,
            e => return Err(Error::Format(format!("endian flag {e} is neither 0 nor 1"))),
        };
        i.endian = endian;
        let long_size = i.u8("long size")?;
        if long_size != 4 && long_size != 8 {
            return Err(Error::Format(format!(
                "long size {long_size} is neither 4 nor 8"
            )));
        }
        let page_size = i.u32("page size")?;
        check_page_size(page_size)?;
        let mut meta = Meta {
            version: 0,
            endian,
            long_size,
            page_size,
            compression: None,
            header_page: Vec::new(),
            header_event: Vec::new(),
            ftrace_formats: Vec::new(),
            systems: Vec::new(),
            kallsyms: Vec::new(),
            printk_formats: Vec::new(),
            cmdlines: Vec::new(),
            cpus: 0,
            options: Vec::new(),
            buffers: Vec::new(),
            latency: false,
            unfinished: None,
        };
        match version.as_str() {
            "6" => {
                meta.version = 6;
                read_v6(&mut i, &mut meta, false)?;
            }
            "ktrace unfinished" => {
                meta.version = 6;
                read_v6(&mut i, &mut meta, true)?;
            }
            "7" => {
                meta.version = 7;
                let name = i.cstr("compression name")?;
                let ver = i.cstr("compression version")?;
                meta.compression = match name.as_str() {
                    "none" | "" => None,
                    "zlib" => Some((Compression::Zlib, ver)),
                    "zstd" => Some((Compression::Zstd, ver)),
                    _ => return Err(Error::Compression(name)),
                };
                let first = i.u64("offset of the first options section")?;
                read_v7(&mut src, &mut meta, first)?;
            }
            v => return Err(Error::Version(v.into())),
        }
        for b in &meta.buffers {
            check_merge_size(b)?;
        }
        Ok(TraceDat { src, meta })
    }

    /// Another handle on a file already opened, with the `meta` read then
    /// (the metadata is not read again): one per CPU gives independent page
    /// streams without decompressing the metadata once per CPU. The pages
    /// need only `meta`'s endianness, compression and buffers.
    pub fn reopen(mut r: R, meta: Meta) -> Result<TraceDat<R>, Error> {
        let len = r
            .seek(SeekFrom::End(0))
            .map_err(Error::io("seek to the end of the file"))?;
        Ok(TraceDat {
            src: Src { r, len, at: None },
            meta,
        })
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.src.len
    }

    /// True for an empty file (never, for an opened one).
    pub fn is_empty(&self) -> bool {
        self.src.len == 0
    }

    /// The pages of `meta.buffers[buffer].cpus[index]`, each `page_size`
    /// bytes, in file order (also a `Read` of their bytes).
    pub fn pages(&mut self, buffer: usize, index: usize) -> Result<Pages<'_, R>, Error> {
        let (data, page_size) = self.cpu_data(buffer, index)?;
        Ok(Pages::new(
            SrcRef::Borrowed(&mut self.src),
            &self.meta,
            data,
            page_size,
        ))
    }

    /// Like [`TraceDat::pages`], owning the file: one `TraceDat` opened per
    /// CPU gives independent streams to merge.
    pub fn into_pages(self, buffer: usize, index: usize) -> Result<Pages<'static, R>, Error> {
        let (data, page_size) = self.cpu_data(buffer, index)?;
        let meta = self.meta;
        Ok(Pages::new(SrcRef::Owned(self.src), &meta, data, page_size))
    }

    fn cpu_data(&self, buffer: usize, index: usize) -> Result<(CpuData, u64), Error> {
        let b = self
            .meta
            .buffers
            .get(buffer)
            .ok_or_else(|| Error::Usage(format!("no buffer {buffer}")))?;
        let data = b
            .cpus
            .get(index)
            .cloned()
            .ok_or_else(|| Error::Usage(format!("buffer {buffer} has no cpu index {index}")))?;
        Ok((data, b.page_size as u64))
    }
}

/// Page memory a buffer's merge may need: one page per CPU is held while
/// the CPUs are merged by time (the kernel's largest sub-buffers are
/// 512 KiB with 4 KiB pages; 256 CPUs of those are 128 MiB).
pub const MAX_MERGE: u64 = 256 << 20;

/// A buffer whose CPUs' pages, one each, exceed [`MAX_MERGE`] is refused:
/// reading it would hold them all at once.
fn check_merge_size(b: &Buffer) -> Result<(), Error> {
    let need = (b.cpus.len() as u64).saturating_mul(u64::from(b.page_size));
    if need > MAX_MERGE {
        return Err(Error::Format(format!(
            "buffer {:?}: {} cpus of {}-byte pages need more than {} MiB to merge",
            b.name,
            b.cpus.len(),
            b.page_size,
            MAX_MERGE >> 20
        )));
    }
    Ok(())
}

fn check_page_size(page_size: u32) -> Result<(), Error> {
    if !(64..=(1 << 24)).contains(&page_size) {
        return Err(Error::Format(format!(
            "page size {page_size} is implausible"
        )));
    }
    Ok(())
}

fn read_v6<R: Read + Seek>(
    i: &mut FileIn<'_, R>,
    meta: &mut Meta,
    recording: bool,
) -> Result<(), Error> {
    header_info(i, meta)?;
    ftrace_formats(i, meta)?;
    event_formats(i, meta)?;
    meta.kallsyms = i.blob32("kallsyms")?;
    meta.printk_formats = i.blob32("printk formats")?;
    meta.cmdlines = i.blob64("saved cmdlines")?;
    meta.cpus = i.u32("cpu count")?;
    check_count(i, meta.cpus as u64, 16, "cpu count")?;
    let mut kind = i.take(10, "data kind")?;
    let mut instances = Vec::new();
    if kind == b"options  \0" {
        loop {
            let id = i.u16("option id")?;
            if id == option::DONE {
                break;
            }
            let data = i.blob32("option data")?;
            if id == option::BUFFER {
                if data.len() < 9 {
                    return Err(Error::Format(
                        "v6 BUFFER option shorter than 9 bytes".into(),
                    ));
                }
                let off = meta.endian.u64(&data);
                instances.push((off, opt_str(&data[8..]).to_string()));
            }
            meta.options.push(TraceOption { id, data });
        }
        kind = i.take(10, "data kind")?;
    }
    if recording != (&kind[..] == KIND_CHUNKS) {
        return Err(Error::Format(format!(
            "data kind {:?} in a file of version {}",
            String::from_utf8_lossy(&kind),
            if recording { "ktrace unfinished" } else { "6" }
        )));
    }
    match &kind[..] {
        b"ktchunks\0\0" => unfinished_buffer(i, meta)?,
        b"flyrecord\0" => {
            let cpus = flyrecord_table(i, meta.cpus)?;
            meta.buffers.push(Buffer {
                name: String::new(),
                clock: None,
                page_size: meta.page_size,
                cpus,
            });
        }
        b"latency  \0" => meta.latency = true,
        k => {
            return Err(Error::Format(format!(
                "expected \"flyrecord\" or \"latency\", found {:?}",
                String::from_utf8_lossy(k)
            )));
        }
    }
    for (off, name) in instances {
        instance_buffer(i, meta, off, name)?;
    }
    Ok(())
}

/// The data of a recording ktrace did not finish (`ktchunks`): each CPU's
/// pages as runs of the chunks it wrote, walked from the first.
fn unfinished_buffer<R: Read + Seek>(i: &mut FileIn<'_, R>, meta: &mut Meta) -> Result<(), Error> {
    let first = i.u64("offset of the first chunk")?;
    let ps = u64::from(meta.page_size);
    if first % ps != 0 || first < i.pos {
        return Err(Error::Format(format!(
            "first chunk at offset {first}: not a page after the header"
        )));
    }
    let len = i.src.len;
    // walk_chunks moves the reader on its own
    i.src.at = None;
    let chunks = walk_chunks(
        &mut i.src.r,
        len,
        meta.endian,
        ps,
        meta.cpus as usize,
        first,
    )?;
    let mut cpus: Vec<CpuData> = (0..meta.cpus)
        .map(|cpu| CpuData {
            cpu,
            offset: 0,
            size: 0,
            runs: Vec::new(),
        })
        .collect();
    for c in chunks.iter().filter(|c| c.used > 0) {
        let d = &mut cpus[c.cpu as usize];
        let run = (c.at + ps, u64::from(c.used) * ps);
        if d.runs.is_empty() {
            d.offset = run.0;
        }
        d.size += run.1;
        d.runs.push(run);
    }
    meta.unfinished = Some(first);
    meta.buffers.push(Buffer {
        name: String::new(),
        clock: None,
        page_size: meta.page_size,
        cpus,
    });
    Ok(())
}

/// An instance's buffer of a version 6 file: its own flyrecord table at
/// `off`, named by its BUFFER option.
fn instance_buffer<R: Read + Seek>(
    i: &mut FileIn<'_, R>,
    meta: &mut Meta,
    off: u64,
    name: String,
) -> Result<(), Error> {
    // an instance buffer: its own flyrecord table at the offset
    i.pos = off;
    let mut kind = i.take(10, "instance data kind")?;
    if kind == b"options  \0" {
        // trace-cmd may repeat an (empty) options list here
        while i.u16("option id")? != option::DONE {
            i.blob32("option data")?;
        }
        kind = i.take(10, "instance data kind")?;
    }
    if kind != b"flyrecord\0" {
        return Err(Error::Format(format!(
            "instance {name:?}: no flyrecord table"
        )));
    }
    // every buffer's table is its own part of the file: more entries
    // than the file holds (one table read again and again, by many
    // BUFFER options) would cost memory quadratic in its size
    let entries = (meta.buffers.len() as u64 + 1).saturating_mul(u64::from(meta.cpus));
    if entries.saturating_mul(16) > i.src.len {
        return Err(Error::Format(format!(
            "{} buffers of {} cpus do not fit in the file: their flyrecord tables overlap",
            meta.buffers.len() + 1,
            meta.cpus
        )));
    }
    let cpus = flyrecord_table(i, meta.cpus)?;
    meta.buffers.push(Buffer {
        name,
        clock: None,
        page_size: meta.page_size,
        cpus,
    });
    Ok(())
}

fn flyrecord_table<R: Read + Seek>(i: &mut FileIn<'_, R>, n: u32) -> Result<Vec<CpuData>, Error> {
    let mut cpus = Vec::new();
    for cpu in 0..n {
        let offset = i.u64("cpu data offset")?;
        let size = i.u64("cpu data size")?;
        cpus.push(CpuData {
            cpu,
            offset,
            size,
            runs: Vec::new(),
        });
    }
    Ok(cpus)
}

/// Bytes of metadata sections one version 7 file may decompress to, all
/// together (a recording's kallsyms and formats are some megabytes; many
/// options naming one small section that decompresses big would otherwise
/// cost that much time and memory again and again).
#[cfg(not(test))]
const META_BUDGET: u64 = 256 << 20;
#[cfg(test)]
const META_BUDGET: u64 = 1 << 20;

/// The chunks of an unfinished ktrace recording (see [`crate::Writer`]), in
/// file order, from `first` on: up to the first page that is not a chunk
/// header (the end of what was allocated) or the end of the file. A chunk
/// header that is not what the writer writes is an error.
pub(crate) fn walk_chunks<R: Read + Seek>(
    r: &mut R,
    len: u64,
    endian: Endian,
    ps: u64,
    cpus: usize,
    first: u64,
) -> Result<Vec<Chunk>, Error> {
    let mut chunks = Vec::new();
    let mut at = first;
    let mut h = [0u8; CHUNK_HEADER];
    while at
        .checked_add(CHUNK_HEADER as u64)
        .is_some_and(|e| e <= len)
    {
        r.seek(SeekFrom::Start(at))
            .map_err(Error::io("seek to a chunk header"))?;
        r.read_exact(&mut h)
            .map_err(Error::io("read a chunk header"))?;
        if &h[..8] != CHUNK_MAGIC {
            break;
        }
        let [cpu, capacity, used, number] = [8, 12, 16, 20].map(|o| endian.u32(&h[o..o + 4]));
        if cpu as usize >= cpus
            || capacity == 0
            || used > capacity
            || number as usize != chunks.len()
        {
            return Err(Error::Format(format!(
                "chunk at offset {at}: cpu {cpu}, {used} of {capacity} pages used, number \
                 {number} (expected chunk {} of a file of {cpus} cpus)",
                chunks.len()
            )));
        }
        chunks.push(Chunk {
            at,
            cpu,
            capacity,
            used,
        });
        // no overflow: capacity < 2^32, ps <= 2^24
        at = at.saturating_add((1 + u64::from(capacity)) * ps);
    }
    Ok(chunks)
}

/// Reads the section at `offset` (header checked against `id`), returning
/// its decompressed content; its size is taken from `budget`.
fn section<R: Read + Seek>(
    src: &mut Src<R>,
    meta: &Meta,
    offset: u64,
    id: u16,
    budget: &mut u64,
) -> Result<Vec<u8>, Error> {
    let b = section_body(src, meta, offset, id)?;
    *budget = budget.checked_sub(b.len() as u64).ok_or_else(|| {
        Error::Format(format!(
            "metadata sections decompress to more than {} MiB (the section at offset {offset} \
             is {} bytes)",
            META_BUDGET >> 20,
            b.len()
        ))
    })?;
    Ok(b)
}

fn section_body<R: Read + Seek>(
    src: &mut Src<R>,
    meta: &Meta,
    offset: u64,
    id: u16,
) -> Result<Vec<u8>, Error> {
    let e = meta.endian;
    let h = src.read_at(offset, 16, "section header")?;
    let got = e.u16(&h);
    if got != id {
        return Err(Error::Format(format!(
            "section at offset {offset} has id {got}, expected {id}"
        )));
    }
    let flags = e.u16(&h[2..]);
    let size = e.u64(&h[8..]);
    let body = offset + 16;
    if flags & 1 == 0 {
        return src.read_at(body, size, "section");
    }
    let Some((algo, _)) = &meta.compression else {
        return Err(Error::Format(format!(
            "section at offset {offset} is compressed in an uncompressed file"
        )));
    };
    let ch = src.read_at(body, 8, "compression header")?;
    let (csize, usize_) = (e.u32(&ch), e.u32(&ch[4..]));
    if csize as u64 + 8 > size {
        return Err(Error::Format(format!(
            "section at offset {offset}: compressed size {csize} exceeds the section size {size}"
        )));
    }
    let data = src.read_at(body + 8, csize as u64, "compressed section")?;
    decompress(*algo, &data, usize_, body)
}

fn read_v7<R: Read + Seek>(src: &mut Src<R>, meta: &mut Meta, first: u64) -> Result<(), Error> {
    let mut budget = META_BUDGET;
    let mut next = first;
    let mut seen = Vec::new();
    while next != 0 {
        if seen.contains(&next) || seen.len() >= 1024 {
            return Err(Error::Format(format!(
                "options sections loop at offset {next}"
            )));
        }
        seen.push(next);
        let body = section(src, meta, next, option::DONE, &mut budget)?;
        let mut s = SliceIn {
            b: &body,
            pos: 0,
            endian: meta.endian,
            base: next,
        };
        next = 0;
        loop {
            if s.left() == 0 {
                break; // a section without DONE: no further sections
            }
            let id = s.u16("option id")?;
            let data = s.blob32("option data")?;
            if id == option::DONE {
                if data.len() < 8 {
                    return Err(Error::Format("DONE option shorter than 8 bytes".into()));
                }
                next = meta.endian.u64(&data);
                break;
            }
            meta.options.push(TraceOption { id, data });
        }
    }
    let opts = std::mem::take(&mut meta.options);
    let endian = meta.endian;
    let offset_of = |o: &TraceOption| -> Result<u64, Error> {
        if o.data.len() < 8 {
            return Err(Error::Format(format!(
                "option {} shorter than 8 bytes",
                o.id
            )));
        }
        Ok(endian.u64(&o.data))
    };
    let mut have_header = false;
    for o in &opts {
        let e = meta.endian;
        match o.id {
            option::HEADER_INFO => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                header_info(&mut slice(&b, e, off), meta)?;
                have_header = true;
            }
            option::FTRACE_EVENTS => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                ftrace_formats(&mut slice(&b, e, off), meta)?;
            }
            option::EVENT_FORMATS => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                event_formats(&mut slice(&b, e, off), meta)?;
            }
            option::KALLSYMS => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                meta.kallsyms = slice(&b, e, off).blob32("kallsyms")?;
            }
            option::PRINTK => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                meta.printk_formats = slice(&b, e, off).blob32("printk formats")?;
            }
            option::CMDLINES => {
                let off = offset_of(o)?;
                let b = section(src, meta, off, o.id, &mut budget)?;
                meta.cmdlines = slice(&b, e, off).blob64("saved cmdlines")?;
            }
            option::CPUCOUNT => {
                if o.data.len() < 4 {
                    return Err(Error::Format("CPUCOUNT option shorter than 4 bytes".into()));
                }
                meta.cpus = e.u32(&o.data);
            }
            option::BUFFER => {
                let mut s = slice(&o.data, e, 0);
                let _section = s.u64("buffer offset")?;
                let name = s.cstr("buffer name")?;
                let clock = s.cstr("buffer clock")?;
                let page_size = s.u32("buffer page size")?;
                check_page_size(page_size)?;
                let n = s.u32("buffer cpu count")?;
                check_count(&s, n as u64, 20, "buffer cpu count")?;
                let mut cpus = Vec::new();
                for _ in 0..n {
                    let cpu = s.u32("cpu id")?;
                    let offset = s.u64("cpu data offset")?;
                    let size = s.u64("cpu data size")?;
                    cpus.push(CpuData {
                        cpu,
                        offset,
                        size,
                        runs: Vec::new(),
                    });
                }
                let b = Buffer {
                    name,
                    clock: Some(clock),
                    page_size,
                    cpus,
                };
                if b.name.is_empty() {
                    meta.buffers.insert(0, b);
                } else {
                    meta.buffers.push(b);
                }
            }
            option::BUFFER_TEXT => meta.latency = true,
            _ => {}
        }
    }
    meta.options = opts;
    if !have_header {
        return Err(Error::Format(
            "version 7 file without a header info section".into(),
        ));
    }
    Ok(())
}

fn slice(b: &[u8], endian: Endian, base: u64) -> SliceIn<'_> {
    SliceIn {
        b,
        pos: 0,
        endian,
        base,
    }
}

/// The pages of one CPU, read one at a time (uncompressed) or one chunk at a
/// time (compressed). After an error it yields nothing more.
pub struct Pages<'a, R> {
    src: SrcRef<'a, R>,
    rbuf: Vec<u8>,
    rpos: usize,
    data: CpuData,
    page_size: u64,
    compression: Option<Compression>,
    endian: Endian,
    pos: u64,
    end: u64,
    /// Runs of pages still to read after this one (an unfinished
    /// recording), last first.
    runs: Vec<(u64, u64)>,
    chunks_left: u32,
    /// The chunk being read (compressed data), decompressed into buffers
    /// reused from chunk to chunk.
    chunk: Blocks,
    chunk_pos: usize,
    /// What [`Read`] has still to give of the current page, in `chunk`.
    in_chunk: std::ops::Range<usize>,
    done: bool,
    pending: Option<Error>,
}

impl<'a, R: Read + Seek> Pages<'a, R> {
    fn new(src: SrcRef<'a, R>, meta: &Meta, data: CpuData, page_size: u64) -> Pages<'a, R> {
        let compression = meta.compression.as_ref().map(|c| c.0);
        let mut runs: Vec<(u64, u64)> = data.runs.iter().rev().copied().collect();
        let (pos, end) = match runs.pop() {
            Some((o, n)) => (o, o.saturating_add(n)),
            None => (data.offset, data.offset.saturating_add(data.size)),
        };
        let empty = data.size == 0;
        let mut p = Pages {
            src,
            rbuf: Vec::new(),
            rpos: 0,
            data,
            page_size,
            compression,
            endian: meta.endian,
            pos,
            end,
            runs,
            chunks_left: 0,
            chunk: Blocks::default(),
            chunk_pos: 0,
            in_chunk: 0..0,
            done: empty,
            pending: None,
        };
        if compression.is_some() && !empty {
            match p.src.get().read_at(p.pos, 4, "chunk count") {
                Ok(b) => {
                    p.chunks_left = p.endian.u32(&b);
                    p.pos += 4;
                    // trace-cmd's size counts the chunks, not their count
                    p.end = p.end.saturating_add(4);
                }
                Err(e) => p.pending = Some(p.trunc(e)),
            }
        }
        p
    }

    fn next_plain(&mut self) -> Option<Result<Vec<u8>, Error>> {
        while self.pos >= self.end {
            let (o, n) = self.runs.pop()?;
            self.pos = o;
            self.end = o.saturating_add(n);
        }
        let left = self.end - self.pos;
        if self.pos.saturating_add(self.page_size.min(left)) > self.src.len() {
            return Some(Err(Error::Truncated {
                cpu: self.data.cpu,
                offset: self.data.offset,
                size: self.data.size,
                len: self.src.len(),
            }));
        }
        if left < self.page_size {
            return Some(Err(Error::Format(format!(
                "cpu {}: data size {} is not a whole number of {}-byte pages",
                self.data.cpu, self.data.size, self.page_size
            ))));
        }
        let r = self.src.get().read_at(self.pos, self.page_size, "page");
        self.pos += self.page_size;
        Some(r)
    }

    /// The next page of compressed data: where it is in `chunk`.
    fn next_chunked(&mut self, algo: Compression) -> Option<Result<std::ops::Range<usize>, Error>> {
        let ps = self.page_size as usize;
        let len = self.chunk.last().len();
        if self.chunk_pos + ps <= len {
            let p = self.chunk_pos..self.chunk_pos + ps;
            self.chunk_pos += ps;
            return Some(Ok(p));
        }
        if self.chunk_pos < len {
            return Some(Err(Error::Format(format!(
                "cpu {}: a chunk of {len} bytes is not a whole number of {ps}-byte pages",
                self.data.cpu,
            ))));
        }
        if self.chunks_left == 0 {
            return None;
        }
        self.chunks_left -= 1;
        let r = (|| {
            let h = self
                .src
                .get()
                .read_at(self.pos, 8, "chunk header")
                .map_err(|e| self.trunc(e))?;
            let (csize, usize_) = (self.endian.u32(&h), self.endian.u32(&h[4..]));
            if usize_ > MAX_BLOCK || usize_ == 0 {
                return Err(Error::Format(format!(
                    "cpu {}: chunk of {usize_} uncompressed bytes is implausible",
                    self.data.cpu
                )));
            }
            let at = self.pos + 8;
            if at.saturating_add(csize as u64) > self.end {
                return Err(Error::Format(format!(
                    "cpu {}: chunk at offset {} runs past the cpu's data",
                    self.data.cpu, self.pos
                )));
            }
            let data = self
                .src
                .get()
                .read_at(at, csize as u64, "chunk")
                .map_err(|e| self.trunc(e))?;
            self.pos = at + csize as u64;
            Ok((data, usize_, at))
        })()
        .and_then(|(data, usize_, at)| self.chunk.decompress(algo, &data, usize_, at));
        match r {
            Ok(()) => {
                self.chunk_pos = 0;
                self.next_chunked(algo)
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn trunc(&self, e: Error) -> Error {
        match e {
            Error::Short { .. } => Error::Truncated {
                cpu: self.data.cpu,
                offset: self.data.offset,
                size: self.data.size,
                len: self.src.len(),
            },
            e => e,
        }
    }
}

/// A page: read from the file (uncompressed data) or in the current chunk.
enum Page {
    Owned(Vec<u8>),
    InChunk(std::ops::Range<usize>),
}

impl<R: Read + Seek> Pages<'_, R> {
    fn next_page(&mut self) -> Option<Result<Page, Error>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Some(Err(e));
        }
        let r = match self.compression {
            None => self.next_plain().map(|r| r.map(Page::Owned)),
            Some(a) => self.next_chunked(a).map(|r| r.map(Page::InChunk)),
        };
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

impl<R: Read + Seek> Iterator for Pages<'_, R> {
    type Item = Result<Vec<u8>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_page()?.map(|p| match p {
            Page::Owned(v) => v,
            Page::InChunk(r) => self.chunk.last()[r].to_vec(),
        }))
    }
}

impl<R: Read + Seek> Read for Pages<'_, R> {
    /// The pages as one byte stream (for ktrace-ring's `merge_streams`); a
    /// bad or truncated page is an `io::Error` carrying the [`Error`].
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rpos == self.rbuf.len() && self.in_chunk.is_empty() {
            match self.next_page() {
                Some(Ok(Page::Owned(p))) => {
                    self.rbuf = p;
                    self.rpos = 0;
                }
                // straight from the decompressed chunk, not copied first
                Some(Ok(Page::InChunk(r))) => self.in_chunk = r,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
                None => return Ok(0),
            }
        }
        if !self.in_chunk.is_empty() {
            let r = self.in_chunk.clone();
            let n = buf.len().min(r.len());
            buf[..n].copy_from_slice(&self.chunk.last()[r.start..r.start + n]);
            self.in_chunk.start += n;
            return Ok(n);
        }
        let n = buf.len().min(self.rbuf.len() - self.rpos);
        buf[..n].copy_from_slice(&self.rbuf[self.rpos..self.rpos + n]);
        self.rpos += n;
        Ok(n)
    }
}

/// The file, borrowed from a [`TraceDat`] or owned by the [`Pages`].
enum SrcRef<'a, R> {
    Borrowed(&'a mut Src<R>),
    Owned(Src<R>),
}

impl<R> SrcRef<'_, R> {
    fn get(&mut self) -> &mut Src<R> {
        match self {
            SrcRef::Borrowed(s) => s,
            SrcRef::Owned(s) => s,
        }
    }
    fn len(&self) -> u64 {
        match self {
            SrcRef::Borrowed(s) => s.len,
            SrcRef::Owned(s) => s.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_with(options: Vec<TraceOption>, buffer_clock: Option<&str>) -> Meta {
        Meta {
            version: 6,
            endian: Endian::Little,
            long_size: 8,
            page_size: 4096,
            compression: None,
            header_page: vec![],
            header_event: vec![],
            ftrace_formats: vec![],
            systems: vec![],
            kallsyms: vec![],
            printk_formats: vec![],
            cmdlines: vec![],
            cpus: 1,
            options,
            buffers: vec![Buffer {
                name: String::new(),
                clock: buffer_clock.map(str::to_string),
                page_size: 4096,
                cpus: vec![],
            }],
            latency: false,
            unfinished: None,
        }
    }

    #[test]
    fn clock_table() {
        let clock = |t: &str| TraceOption::text(option::TRACECLOCK, t);
        let cases: [(Vec<TraceOption>, Option<&str>, Option<&str>); 5] = [
            (vec![clock("[local] global counter\n")], None, Some("local")),
            (
                vec![clock("local global [x86-tsc]\n")],
                None,
                Some("x86-tsc"),
            ),
            (vec![clock("mono")], None, Some("mono")),
            (vec![], Some("boot"), Some("boot")),
            (vec![], None, None),
        ];
        for (opts, buf, want) in cases {
            assert_eq!(meta_with(opts, buf).clock(), want);
        }
    }

    /// A minimal version 6 file with `patch` applied at `at`.
    fn v6(at: usize, patch: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(b"6\0\0\x08");
        b.extend_from_slice(&4096u32.to_le_bytes());
        b.extend_from_slice(b"header_page\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(b"header_event\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // ftrace formats
        b.extend_from_slice(&0u32.to_le_bytes()); // systems
        b.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
        b.extend_from_slice(&0u32.to_le_bytes()); // printk
        b.extend_from_slice(&0u64.to_le_bytes()); // cmdlines
        b.extend_from_slice(&1u32.to_le_bytes()); // cpus
        b.extend_from_slice(b"flyrecord\0");
        b.extend_from_slice(&4096u64.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b[at..at + patch.len()].copy_from_slice(patch);
        b
    }

    /// Many BUFFER options of a version 6 file naming one flyrecord table
    /// of many CPUs: every instance copied the table, memory quadratic in
    /// the file's size (a 64 KB file gave 2,001 buffers of 2,000 CPUs,
    /// 96 MB). Now tables that cannot all be in the file are an error.
    #[test]
    fn v6_instances_sharing_one_table_are_refused() {
        let (n, cpus) = (2000u32, 2000u32);
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(b"6\0\0\x08");
        b.extend_from_slice(&4096u32.to_le_bytes());
        b.extend_from_slice(b"header_page\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(b"header_event\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&[0; 4 + 4 + 4 + 4 + 8]); // formats, kallsyms, printk, cmdlines
        b.extend_from_slice(&cpus.to_le_bytes());
        b.extend_from_slice(b"options  \0");
        let table_at = b.len() as u64 + u64::from(n) * (2 + 4 + 10) + 2;
        for _ in 0..n {
            b.extend_from_slice(&option::BUFFER.to_le_bytes());
            b.extend_from_slice(&10u32.to_le_bytes());
            b.extend_from_slice(&table_at.to_le_bytes());
            b.extend_from_slice(b"x\0");
        }
        b.extend_from_slice(&option::DONE.to_le_bytes());
        assert_eq!(b.len() as u64, table_at);
        b.extend_from_slice(b"flyrecord\0");
        b.extend(std::iter::repeat_n(0u8, cpus as usize * 16));
        let e = TraceDat::open(std::io::Cursor::new(b)).unwrap_err();
        assert!(e.to_string().contains("flyrecord tables overlap"), "{e}");
    }

    /// A version 6 file of 20 CPUs of 16 MiB pages: merging them held a
    /// page per CPU, 320 MiB (and a file of thousands of CPUs far more);
    /// now refused at open.
    #[test]
    fn buffers_whose_merge_needs_too_much_are_refused() {
        let cpus = 20u32;
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(b"6\0\0\x08");
        b.extend_from_slice(&(1u32 << 24).to_le_bytes());
        b.extend_from_slice(b"header_page\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(b"header_event\0");
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&[0; 4 + 4 + 4 + 4 + 8]);
        b.extend_from_slice(&cpus.to_le_bytes());
        b.extend_from_slice(b"flyrecord\0");
        b.extend(std::iter::repeat_n(0u8, cpus as usize * 16));
        let e = TraceDat::open(std::io::Cursor::new(b.clone())).unwrap_err();
        assert!(
            e.to_string().contains("need more than 256 MiB to merge"),
            "{e}"
        );
        // 15 of them fit
        let at = b.len() - 20 * 16 - 10 - 4;
        b[at..at + 4].copy_from_slice(&15u32.to_le_bytes());
        assert!(TraceDat::open(std::io::Cursor::new(b)).is_ok());
    }

    /// Version 7 metadata sections may decompress to [`META_BUDGET`]
    /// bytes in all (1 MiB under test): many options naming one section
    /// that decompresses big cost that much again and again.
    #[test]
    fn v7_metadata_has_a_decompression_budget() {
        let file = |kallsyms: usize| {
            let h = crate::Header {
                kallsyms: vec![b'x'; kallsyms],
                ..crate::Header::default()
            };
            crate::write_v7(
                std::io::Cursor::new(Vec::new()),
                &h,
                b"",
                &[],
                &[],
                crate::Compress7::Zstd("1.5.4"),
            )
            .unwrap()
            .into_inner()
        };
        let small = TraceDat::open(std::io::Cursor::new(file(100 << 10))).unwrap();
        assert_eq!(small.meta.kallsyms.len(), 100 << 10);
        let e = TraceDat::open(std::io::Cursor::new(file(2 << 20))).unwrap_err();
        assert!(
            e.to_string().contains("decompress to more than 1 MiB"),
            "{e}"
        );
    }

    #[test]
    fn v6_header_errors() {
        assert!(TraceDat::open(std::io::Cursor::new(v6(0, b""))).is_ok());
        let cases: [(usize, &[u8], &str); 6] = [
            (
                0,
                b"\x18",
                "not a trace.dat file (no 0x17 0x08 0x44 \"tracing\" magic)",
            ),
            (
                10,
                b"5",
                "trace.dat version \"5\" is not supported (versions 6 and 7 are)",
            ),
            (
                12,
                b"\x02",
                "bad trace.dat: endian flag 2 is neither 0 nor 1",
            ),
            (13, b"\x05", "bad trace.dat: long size 5 is neither 4 nor 8"),
            (14, b"\0\0\0\0", "bad trace.dat: page size 0 is implausible"),
            (
                18,
                b"header_pagX",
                "bad trace.dat: expected \"header_page\\0\" at header_page tag, found \"header_pagX\\0\"",
            ),
        ];
        for (at, patch, msg) in cases {
            let e = TraceDat::open(std::io::Cursor::new(v6(at, patch))).unwrap_err();
            assert_eq!(e.to_string(), msg);
        }
        // a count that cannot fit in the rest of the file
        let e = TraceDat::open(std::io::Cursor::new(v6(
            18 + 12 + 8 + 13 + 8,
            &u32::MAX.to_le_bytes(),
        )))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("ftrace format count 4294967295 does not fit"),
            "{e}"
        );
        // the data of cpu 0 lies beyond the end: one error, then nothing
        let mut d = TraceDat::open(std::io::Cursor::new(v6(0, b""))).unwrap();
        d.meta.buffers[0].cpus[0].size = 8192;
        let got: Vec<_> = d.pages(0, 0).unwrap().collect();
        assert_eq!(got.len(), 1);
        assert!(
            got[0]
                .as_ref()
                .unwrap_err()
                .to_string()
                .starts_with("cpu 0: data truncated")
        );
    }
}
