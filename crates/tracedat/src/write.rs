//! The trace.dat writer: version 6 (trace-cmd.dat.v6(5)), the version every
//! trace-cmd and KernelShark reads, written while recording. It writes what
//! it is given (formats, kallsyms, pages as the kernel wrote them) and reads
//! nothing from tracefs; it does not compress.
//!
//! # Layout while recording (why a SIGKILL leaves a readable file)
//!
//! Version 6 wants each CPU's data contiguous, with its offset and size in
//! the flyrecord table written before the data; a recorder does not know
//! the sizes in advance. So while recording the file is not yet version 6
//! but ktrace's own *unfinished* form of it: the same header after the
//! magic bytes `\x17\x08Dktrace\0` (not trace.dat's: trace-cmd refuses the
//! file, "error reading header") and the version string `recording`, whose
//! data kind is `ktchunks` instead of `flyrecord`, followed by the offset of
//! the first chunk:
//!
//! ```text
//! 0                  "\x17\x08Dktrace\0", "recording\0", header .. options,
//!                    "ktchunks\0\0", u64 offset of the first chunk
//! align(.. + slack)  chunk 0: a header page, then `capacity` data pages
//!                    chunk 1: ...   (one CPU's pages each, in arrival order)
//! ```
//!
//! A chunk belongs to one CPU and is allocated at the end of the file when
//! that CPU's pages arrive and its last chunk is full; a CPU's chunks grow
//! from [`WriterOptions::first_chunk`] to [`WriterOptions::max_chunk`]
//! bytes (doubling). The file therefore grows with the data: no offset lies
//! further than about twice the data recorded (a hole at the end of each
//! CPU's last chunk), so any file system that can hold the data can hold
//! the recording (ext2 with 1 KiB blocks included), and a killed recording
//! leaves no giant sparse file. A chunk's header page starts with
//! `ktchunk\0`, its CPU, capacity, pages used (u32 each) and its number in
//! the file (u32); [`Writer::append_pages`] writes the pages, then patches
//! the pages used, so at every moment the headers describe only pages that
//! were completely written. A recorder killed by SIGKILL (whose written data
//! stays in the page cache) thus leaves a file that this crate's reader
//! ([`crate::TraceDat`], hence `ktrace report`) reads up to the last page
//! appended, with the saved cmdlines of the start and no CPU stats;
//! [`Writer::recover`] reopens it so that `finish` makes it a version 6
//! file trace-cmd reads.
//!
//! [`Writer::finish`] first changes the version string to `finishing` (every
//! reader refuses the file from then on, rather than misread it), moves
//! each CPU's pages together right after the final header (each page read
//! once and written once, in place: pages in the way are read into memory
//! first, at most about a megabyte at a time), cuts the file to its length,
//! then writes the final header — all but its first 12 bytes first,
//! trace.dat's magic and the version `6` last. A kill during the finish
//! leaves a file every reader refuses.

use crate::read::{Meta, System, TraceOption};
use crate::{Endian, Error, MAGIC, option};
use std::io::{Cursor, Read, Seek, SeekFrom, Write};

/// A file the writer can cut to length (the final file is shorter than the
/// recording layout).
pub trait Storage: Read + Write + Seek {
    /// Sets the file's length.
    fn set_len(&mut self, len: u64) -> std::io::Result<()>;
}

impl Storage for std::fs::File {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        std::fs::File::set_len(self, len)
    }
}

impl Storage for Cursor<Vec<u8>> {
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        self.get_mut().resize(len, 0);
        Ok(())
    }
}

/// The metadata of a file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Byte order of the traced kernel (the pages are written as they are).
    pub endian: Endian,
    /// Size of a user-space `long` on the traced machine (4 or 8).
    pub long_size: u8,
    /// Size of every page appended: the instance's sub-buffer size (v6 has
    /// one page size for the file; trace-cmd reads pages of this size).
    pub page_size: u32,
    /// `events/header_page` text.
    pub header_page: Vec<u8>,
    /// `events/header_event` text.
    pub header_event: Vec<u8>,
    /// `events/ftrace/<event>/format` texts (e.g. kernel_stack, user_stack
    /// when stacks are recorded).
    pub ftrace_formats: Vec<Vec<u8>>,
    /// The formats of the recorded events, by system.
    pub systems: Vec<System>,
    /// `/proc/kallsyms` text (may be empty).
    pub kallsyms: Vec<u8>,
    /// `printk_formats` text (may be empty).
    pub printk_formats: Vec<u8>,
    /// `saved_cmdlines` at the start (replaced by [`Writer::finish`]'s).
    pub cmdlines: Vec<u8>,
    /// The trace clock name, written as a TRACECLOCK option `[name]`
    /// (empty: no option, readers assume `local`).
    pub clock: String,
    /// Other options, written in order (e.g. [`TraceOption::text`] of
    /// [`option::UNAME`], [`option::VERSION`]); CPUSTAT options come from
    /// [`Writer::finish`].
    pub options: Vec<TraceOption>,
}

impl Default for Header {
    fn default() -> Header {
        Header {
            endian: Endian::native(),
            long_size: std::mem::size_of::<usize>() as u8,
            page_size: 4096,
            header_page: Vec::new(),
            header_event: Vec::new(),
            ftrace_formats: Vec::new(),
            systems: Vec::new(),
            kallsyms: Vec::new(),
            printk_formats: Vec::new(),
            cmdlines: Vec::new(),
            clock: String::new(),
            options: Vec::new(),
        }
    }
}

impl TraceOption {
    /// A text option (NUL-terminated, as trace-cmd writes them).
    pub fn text(id: u16, text: &str) -> TraceOption {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        TraceOption { id, data }
    }
}

impl Header {
    /// The header of an existing file, to write it again: its options are
    /// kept except the ones the writers generate (TRACECLOCK from the clock,
    /// CPUSTAT from [`Writer::finish`]) and version 7's own (section
    /// offsets, BUFFER, CPUCOUNT, STRINGS); the page size is the top
    /// buffer's.
    pub fn from_meta(m: &Meta) -> Header {
        let page_size = m.buffers.first().map_or(m.page_size, |b| b.page_size);
        let clock = m.clock().unwrap_or("").to_string();
        // everything but what the writers generate themselves and version
        // 7's own options (unknown ids, e.g. ktrace's, are kept)
        let options = m
            .options
            .iter()
            .filter(|o| {
                !matches!(
                    o.id,
                    option::DONE
                        | option::CPUSTAT
                        | option::BUFFER
                        | option::TRACECLOCK
                        | option::CPUCOUNT
                        | option::STRINGS
                        | option::HEADER_INFO
                        | option::FTRACE_EVENTS
                        | option::EVENT_FORMATS
                        | option::KALLSYMS
                        | option::PRINTK
                        | option::CMDLINES
                        | option::BUFFER_TEXT
                )
            })
            .cloned()
            .collect();
        Header {
            endian: m.endian,
            long_size: m.long_size,
            page_size,
            header_page: m.header_page.clone(),
            header_event: m.header_event.clone(),
            ftrace_formats: m.ftrace_formats.clone(),
            systems: m.systems.clone(),
            kallsyms: m.kallsyms.clone(),
            printk_formats: m.printk_formats.clone(),
            cmdlines: m.cmdlines.clone(),
            clock,
            options,
        }
    }
}

/// The magic bytes of an unfinished recording (see the module notes): not
/// trace.dat's, so that trace-cmd refuses the file.
pub(crate) const UNFINISHED_MAGIC: &[u8; 10] = b"\x17\x08Dktrace\0";
/// The version string of a recording in progress.
pub(crate) const VERSION_RECORDING: &str = "recording";
/// The version string while [`Writer::finish`] moves the pages (the same
/// length as [`VERSION_RECORDING`]: written over it in place).
pub(crate) const VERSION_FINISHING: &str = "finishing";
/// The data kind of a recording in progress (in place of `flyrecord`).
pub(crate) const KIND_CHUNKS: &[u8; 10] = b"ktchunks\0\0";
/// The first bytes of a chunk's header page.
pub(crate) const CHUNK_MAGIC: &[u8; 8] = b"ktchunk\0";
/// Bytes of a chunk header in use (magic, cpu, capacity, used, number).
pub(crate) const CHUNK_HEADER: usize = 24;
/// Offset of the pages-used field in a chunk header.
const CHUNK_USED: u64 = 16;

/// The head of a finished file.
const FINISHED: (&[u8; 10], &str) = (MAGIC, "6");
/// The head of a recording in progress.
const RECORDING: (&[u8; 10], &str) = (UNFINISHED_MAGIC, VERSION_RECORDING);

/// Where the writer puts things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Data bytes of a CPU's first chunk (rounded down to whole pages, at
    /// least one).
    pub first_chunk: u64,
    /// Data bytes a CPU's chunks grow to, doubling from `first_chunk`
    /// (rounded down to whole pages, at least one).
    pub max_chunk: u64,
    /// Room left after the header before the first chunk.
    pub slack: u64,
}

impl Default for WriterOptions {
    fn default() -> WriterOptions {
        WriterOptions {
            first_chunk: 64 << 10,
            max_chunk: 4 << 20,
            slack: 0,
        }
    }
}

/// One chunk of a recording in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// Offset of its header page.
    pub(crate) at: u64,
    /// The CPU whose pages it holds.
    pub(crate) cpu: u32,
    /// Data pages it can hold.
    pub(crate) capacity: u32,
    /// Data pages written.
    pub(crate) used: u32,
}

/// A version 6 trace.dat file being recorded (see the module notes for the
/// layout).
pub struct Writer<F> {
    f: F,
    /// The header, its kallsyms text left empty: that text is only in the
    /// file, `ks_len` bytes from `ks_at` (megabytes not held in memory
    /// while recording).
    header: Header,
    ks_at: u64,
    ks_len: u64,
    /// Offset of the first chunk.
    data_start: u64,
    /// The chunks in file order.
    chunks: Vec<Chunk>,
    /// Per CPU: its last chunk (index into `chunks`).
    last: Vec<Option<usize>>,
    /// Per CPU: data pages of its next chunk.
    next_capacity: Vec<u32>,
    /// Data pages a chunk grows to.
    max_capacity: u32,
    /// Where the next chunk goes.
    end: u64,
    sizes: Vec<u64>,
}

impl<F> std::fmt::Debug for Writer<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("data_start", &self.data_start)
            .field("chunks", &self.chunks.len())
            .field("end", &self.end)
            .field("sizes", &self.sizes)
            .finish()
    }
}

struct Out {
    b: Vec<u8>,
    e: Endian,
}

impl Out {
    fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&self.u64_bytes(v));
    }
    fn u64_bytes(&self, v: u64) -> [u8; 8] {
        match self.e {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn blob64(&mut self, d: &[u8]) {
        self.u64(d.len() as u64);
        self.b.extend_from_slice(d);
    }
    fn blob32(&mut self, d: &[u8]) -> Result<(), Error> {
        let n = u32::try_from(d.len())
            .map_err(|_| Error::Usage(format!("{} bytes do not fit a 32-bit size", d.len())))?;
        self.u32(n);
        self.b.extend_from_slice(d);
        Ok(())
    }
}

fn count32(n: usize, what: &str) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Usage(format!("{n} {what} do not fit a 32-bit count")))
}

/// What follows the options of a header: the flyrecord table of a
/// finished file, or the offset of the first chunk of a recording.
#[derive(Clone, Copy)]
enum Tail<'a> {
    Table(&'a [(u64, u64)]),
    Chunks { first: u64, cpus: usize },
}

impl Tail<'_> {
    fn cpus(self) -> usize {
        match self {
            Tail::Table(t) => t.len(),
            Tail::Chunks { cpus, .. } => cpus,
        }
    }
}

/// The version 6 header (`magic` and `version`: trace.dat's and "6", or
/// those of an unfinished recording) with `tail` after the options;
/// returns the bytes and the offset of the tail in them.
/// The header is `head`, then the kallsyms text (`ks_len` bytes, not
/// copied here: megabytes), then `rest`.
struct V6 {
    head: Vec<u8>,
    rest: Vec<u8>,
}

impl V6 {
    fn len(&self, ks_len: u64) -> u64 {
        self.head.len() as u64 + ks_len + self.rest.len() as u64
    }
}

fn encode_v6(
    h: &Header,
    (magic, version): (&[u8; 10], &str),
    cmdlines: &[u8],
    stats: &[String],
    ks_len: u64,
    tail: Tail<'_>,
) -> Result<V6, Error> {
    let mut o = Out {
        b: Vec::with_capacity(cmdlines.len() + 65536),
        e: h.endian,
    };
    o.b.extend_from_slice(magic);
    o.b.extend_from_slice(version.as_bytes());
    o.b.push(0);
    o.b.push(match h.endian {
        Endian::Little => 0,
        Endian::Big => 1,
    });
    o.b.push(h.long_size);
    o.u32(h.page_size);
    // the same pieces as version 7's sections, in version 6's order
    let m = encode_metadata_v7(h, ks_len, cmdlines)?;
    for piece in [&m.header_info[..], &m.ftrace, &m.events, &m.kallsyms] {
        o.b.extend_from_slice(piece);
    }
    let head = std::mem::take(&mut o.b);
    for piece in [&m.printk[..], &m.cmdlines] {
        o.b.extend_from_slice(piece);
    }
    o.u32(count32(tail.cpus(), "cpus")?);
    o.b.extend_from_slice(b"options  \0");
    let mut opts: Vec<TraceOption> = Vec::new();
    if !h.clock.is_empty() {
        opts.push(TraceOption::text(
            option::TRACECLOCK,
            &format!("[{}]", h.clock),
        ));
    }
    opts.extend(h.options.iter().cloned());
    opts.extend(stats.iter().map(|s| TraceOption::text(option::CPUSTAT, s)));
    for op in &opts {
        if op.id == option::DONE {
            return Err(Error::Usage("option id 0 is the end marker".into()));
        }
        o.u16(op.id);
        o.blob32(&op.data)?;
    }
    o.u16(option::DONE);
    match tail {
        Tail::Table(table) => {
            o.b.extend_from_slice(b"flyrecord\0");
            for &(off, size) in table {
                o.u64(off);
                o.u64(size);
            }
            Ok(V6 { head, rest: o.b })
        }
        Tail::Chunks { first, .. } => {
            o.b.extend_from_slice(KIND_CHUNKS);
            o.u64(first);
            Ok(V6 { head, rest: o.b })
        }
    }
}

/// The bodies of the version 7 metadata sections (same content as the
/// version 6 header's pieces), but for kallsyms: `kallsyms` holds its
/// size prefix only, the header's kallsyms text follows it (megabytes, not
/// copied).
pub(crate) struct Metadata7 {
    pub(crate) header_info: Vec<u8>,
    pub(crate) ftrace: Vec<u8>,
    pub(crate) events: Vec<u8>,
    pub(crate) kallsyms: Vec<u8>,
    pub(crate) printk: Vec<u8>,
    pub(crate) cmdlines: Vec<u8>,
}

pub(crate) fn encode_metadata_v7(
    h: &Header,
    ks_len: u64,
    cmdlines: &[u8],
) -> Result<Metadata7, Error> {
    let out = || Out {
        b: Vec::new(),
        e: h.endian,
    };
    let mut hi = out();
    hi.b.extend_from_slice(b"header_page\0");
    hi.blob64(&h.header_page);
    hi.b.extend_from_slice(b"header_event\0");
    hi.blob64(&h.header_event);
    let mut ft = out();
    ft.u32(count32(h.ftrace_formats.len(), "ftrace formats")?);
    for f in &h.ftrace_formats {
        ft.blob64(f);
    }
    let mut ev = out();
    ev.u32(count32(h.systems.len(), "systems")?);
    for s in &h.systems {
        if s.name.as_bytes().contains(&0) {
            return Err(Error::Usage(format!(
                "system name {:?} holds a NUL",
                s.name
            )));
        }
        ev.b.extend_from_slice(s.name.as_bytes());
        ev.b.push(0);
        ev.u32(count32(s.formats.len(), "formats")?);
        for f in &s.formats {
            ev.blob64(f);
        }
    }
    let mut ks = out();
    ks.u32(count32(
        usize::try_from(ks_len).unwrap_or(usize::MAX),
        "kallsyms bytes",
    )?);
    let mut pk = out();
    pk.blob32(&h.printk_formats)?;
    let mut cl = out();
    cl.blob64(cmdlines);
    Ok(Metadata7 {
        header_info: hi.b,
        ftrace: ft.b,
        events: ev.b,
        kallsyms: ks.b,
        printk: pk.b,
        cmdlines: cl.b,
    })
}

fn align_up(v: u64, a: u64) -> Option<u64> {
    v.checked_add(a - 1).map(|x| x / a * a)
}

/// Whole pages in `bytes`, at least one, at most `u32::MAX`.
fn pages_in(bytes: u64, ps: u64) -> u32 {
    u32::try_from((bytes / ps).max(1)).unwrap_or(u32::MAX)
}

/// The longest run of pages [`Writer::finish`] reads at once.
const MOVE_BYTES: u64 = 1 << 20;

impl<F: Storage> Writer<F> {
    /// Writes the header for `cpus` CPUs (no pages yet) into `f`, which is
    /// cut to length 0 first. The file is an unfinished recording from here
    /// on (see the module notes).
    pub fn create(
        f: F,
        header: &Header,
        cpus: usize,
        opts: WriterOptions,
    ) -> Result<Writer<F>, Error> {
        Writer::create_owned(f, header.clone(), cpus, opts)
    }

    /// Like [`Writer::create`], taking the header (no copy of its
    /// kallsyms-sized texts is kept besides the writer's).
    pub fn create_owned(
        f: F,
        mut header: Header,
        cpus: usize,
        opts: WriterOptions,
    ) -> Result<Writer<F>, Error> {
        let ks = std::mem::take(&mut header.kallsyms);
        Writer::create_streaming(f, header, &mut &ks[..], cpus, opts)
    }

    /// Like [`Writer::create_owned`], with the kallsyms text read from
    /// `kallsyms` (e.g. `/proc/kallsyms`, which has no size) straight into
    /// the file, in place of `header.kallsyms` (ignored): the text is never
    /// held in memory, and the writer reads it back from the file when it
    /// finishes.
    pub fn create_streaming(
        mut f: F,
        mut header: Header,
        kallsyms: &mut dyn Read,
        cpus: usize,
        opts: WriterOptions,
    ) -> Result<Writer<F>, Error> {
        header.kallsyms = Vec::new();
        let ps = header.page_size as u64;
        if !(64..=(1 << 24)).contains(&ps) {
            return Err(Error::Usage(format!("page size {ps} is implausible")));
        }
        if header.long_size != 4 && header.long_size != 8 {
            return Err(Error::Usage(format!(
                "long size {} is neither 4 nor 8",
                header.long_size
            )));
        }
        if cpus == 0 || cpus > 65536 {
            return Err(Error::Usage(format!("{cpus} cpus")));
        }
        let tail = |first| Tail::Chunks { first, cpus };
        f.set_len(0).map_err(Error::io("empty the file"))?;
        // the text first, after the head (whose length does not depend on
        // the text's), to learn its length
        let ks_at = encode_v6(&header, RECORDING, &header.cmdlines, &[], 0, tail(0))?
            .head
            .len() as u64;
        f.seek(SeekFrom::Start(ks_at))
            .map_err(Error::io("write kallsyms"))?;
        let ks_len = {
            let mut w = std::io::BufWriter::with_capacity(64 << 10, &mut f);
            let n = std::io::copy(kallsyms, &mut w).map_err(Error::io("write kallsyms"))?;
            w.flush().map_err(Error::io("write kallsyms"))?;
            n
        };
        let len =
            encode_v6(&header, RECORDING, &header.cmdlines, &[], ks_len, tail(0))?.len(ks_len);
        let data_start =
            align_up(len + opts.slack, ps).ok_or_else(|| Error::Usage("slack too large".into()))?;
        let v = encode_v6(
            &header,
            RECORDING,
            &header.cmdlines,
            &[],
            ks_len,
            tail(data_start),
        )?;
        let first = pages_in(opts.first_chunk, ps);
        let mut w = Writer {
            f,
            header,
            ks_at,
            ks_len,
            data_start,
            chunks: Vec::new(),
            last: vec![None; cpus],
            next_capacity: vec![first; cpus],
            max_capacity: pages_in(opts.max_chunk, ps).max(first),
            end: data_start,
            sizes: vec![0; cpus],
        };
        w.write_at(ks_at + ks_len, &v.rest, "write the header")?;
        w.write_at(0, &v.head, "write the header")?;
        Ok(w)
    }

    /// The kallsyms text, read back from the file.
    fn kallsyms_text(&mut self) -> Result<Vec<u8>, Error> {
        let n = usize::try_from(self.ks_len)
            .map_err(|_| Error::Usage("kallsyms does not fit in memory".into()))?;
        let mut b = vec![0u8; n];
        self.read_at(self.ks_at, &mut b, "read kallsyms back")?;
        Ok(b)
    }

    /// Reopens a recording this writer left unfinished (its recorder was
    /// killed): the header must be exactly what [`Writer::create`] wrote.
    /// Then [`Writer::append_pages`] and [`Writer::finish`] work as before,
    /// e.g. `Writer::recover(f)?.finish(None, &[])` makes it a compact
    /// version 6 file (the saved cmdlines of the start, no CPU stats).
    pub fn recover(mut f: F) -> Result<Writer<F>, Error> {
        let not_ours =
            |why: &str| Error::Format(format!("not an unfinished ktrace recording: {why}"));
        let meta = crate::TraceDat::open(&mut f)?.meta;
        let Some(data_start) = meta.unfinished else {
            return Err(not_ours("a finished file"));
        };
        let cpus = meta.cpus as usize;
        let mut header = Header::from_meta(&meta);
        let ps = header.page_size as u64;
        let ks = std::mem::take(&mut header.kallsyms);
        let ks_len = ks.len() as u64;
        let v = encode_v6(
            &header,
            RECORDING,
            &header.cmdlines,
            &[],
            ks_len,
            Tail::Chunks {
                first: data_start,
                cpus,
            },
        )?;
        let ks_at = v.head.len() as u64;
        let bytes = [&v.head[..], &ks, &v.rest].concat();
        drop(ks);
        let mut on_disk = vec![0u8; bytes.len()];
        f.seek(SeekFrom::Start(0)).map_err(Error::io("seek"))?;
        f.read_exact(&mut on_disk)
            .map_err(Error::io("read the header back"))?;
        if on_disk != bytes || data_start < bytes.len() as u64 {
            return Err(not_ours("the header is not this writer's"));
        }
        let len = f.seek(SeekFrom::End(0)).map_err(Error::io("seek"))?;
        let chunks = crate::read::walk_chunks(&mut f, len, meta.endian, ps, cpus, data_start)?;
        let opts = WriterOptions::default();
        let max = chunks
            .iter()
            .map(|c| c.capacity)
            .fold(pages_in(opts.max_chunk, ps), u32::max);
        let mut w = Writer {
            f,
            header,
            ks_at,
            ks_len,
            data_start,
            chunks: Vec::new(),
            last: vec![None; cpus],
            next_capacity: vec![pages_in(opts.first_chunk, ps); cpus],
            max_capacity: max,
            end: data_start,
            sizes: vec![0; cpus],
        };
        for c in chunks {
            let cpu = c.cpu as usize;
            w.last[cpu] = Some(w.chunks.len());
            w.next_capacity[cpu] = c.capacity.saturating_mul(2).min(max);
            w.sizes[cpu] += u64::from(c.used) * ps;
            w.end = c.at + (1 + u64::from(c.capacity)) * ps;
            w.chunks.push(c);
        }
        Ok(w)
    }

    fn write_at(&mut self, offset: u64, data: &[u8], what: &str) -> Result<(), Error> {
        self.f
            .seek(SeekFrom::Start(offset))
            .map_err(Error::io(what))?;
        self.f.write_all(data).map_err(Error::io(what))
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8], what: &str) -> Result<(), Error> {
        self.f
            .seek(SeekFrom::Start(offset))
            .map_err(Error::io(what))?;
        self.f.read_exact(buf).map_err(Error::io(what))
    }

    fn u32_bytes(&self, v: u32) -> [u8; 4] {
        match self.header.endian {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }

    /// Allocates a new chunk for `cpu` at the end of the file and writes
    /// its header; returns its index.
    fn new_chunk(&mut self, cpu: usize) -> Result<usize, Error> {
        let ps = self.header.page_size as u64;
        let capacity = self.next_capacity[cpu];
        let number =
            u32::try_from(self.chunks.len()).map_err(|_| Error::Usage("too many chunks".into()))?;
        let at = self.end;
        let end = (1 + u64::from(capacity))
            .checked_mul(ps)
            .and_then(|n| n.checked_add(at))
            .ok_or_else(|| Error::Usage("the file would pass 2^64 bytes".into()))?;
        let mut h = Vec::with_capacity(CHUNK_HEADER);
        h.extend_from_slice(CHUNK_MAGIC);
        for v in [cpu as u32, capacity, 0, number] {
            h.extend_from_slice(&self.u32_bytes(v));
        }
        self.write_at(at, &h, &format!("write a chunk header for cpu {cpu}"))?;
        self.end = end;
        self.next_capacity[cpu] = capacity.saturating_mul(2).min(self.max_capacity);
        self.chunks.push(Chunk {
            at,
            cpu: cpu as u32,
            capacity,
            used: 0,
        });
        self.last[cpu] = Some(self.chunks.len() - 1);
        Ok(self.chunks.len() - 1)
    }

    /// Appends whole pages (a multiple of the page size, as the kernel
    /// wrote them) to `cpu`'s data, then records in the chunk's header how
    /// many pages it holds.
    pub fn append_pages(&mut self, cpu: usize, pages: &[u8]) -> Result<(), Error> {
        let ps = self.header.page_size as u64;
        if cpu >= self.sizes.len() {
            return Err(Error::Usage(format!(
                "cpu {cpu} is not among the file's {} cpus",
                self.sizes.len()
            )));
        }
        if !(pages.len() as u64).is_multiple_of(ps) {
            return Err(Error::Usage(format!(
                "{} bytes are not whole {ps}-byte pages",
                pages.len()
            )));
        }
        let mut rest = pages;
        while !rest.is_empty() {
            let i = match self.last[cpu] {
                Some(i) if self.chunks[i].used < self.chunks[i].capacity => i,
                _ => self.new_chunk(cpu)?,
            };
            let c = self.chunks[i];
            let room = u64::from(c.capacity - c.used);
            let n = room.min(rest.len() as u64 / ps);
            let bytes = (n * ps) as usize;
            let at = c.at + ps + u64::from(c.used) * ps;
            self.write_at(at, &rest[..bytes], &format!("write cpu {cpu} pages"))?;
            let used = c.used + n as u32;
            let b = self.u32_bytes(used);
            self.write_at(c.at + CHUNK_USED, &b, "patch a chunk header")?;
            self.chunks[i].used = used;
            self.sizes[cpu] += bytes as u64;
            rest = &rest[bytes..];
        }
        Ok(())
    }

    /// Bytes appended to each CPU so far.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The length the file has reached (header and chunks, the unused room
    /// of each CPU's last chunk included).
    pub fn file_end(&self) -> u64 {
        self.end
    }

    /// Finishes the recording as a version 7 file written to `out`
    /// ([`crate::write_v7`]'s layout: sections, each CPU's pages in
    /// compressed chunks of ten pages with [`crate::Compress7::Zstd`]),
    /// with the final saved cmdlines (None keeps the start's) and one
    /// CPUSTAT option per entry of `cpu_stats`. Each page is read back from
    /// the recording once, a chunk at a time; the recording itself is left
    /// as it is (still an unfinished recording every reader of this crate
    /// reads), so a recorder killed while this runs loses nothing but
    /// `out`'s partial bytes. Returns the recording and `out` (flushed).
    pub fn finish_v7<W: Write + Seek>(
        mut self,
        out: W,
        cmdlines: Option<&[u8]>,
        cpu_stats: &[String],
        compress: crate::Compress7,
    ) -> Result<(F, W), Error> {
        let ps = self.header.page_size as u64;
        let cmdlines = cmdlines.map_or_else(|| self.header.cmdlines.clone(), <[u8]>::to_vec);
        // per CPU, its data's extents in the file: (first byte of the
        // CPU's data it holds, offset in the file, bytes)
        let mut extents: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); self.sizes.len()];
        let mut seen = vec![0u64; self.sizes.len()];
        for c in &self.chunks {
            let cpu = c.cpu as usize;
            let bytes = u64::from(c.used) * ps;
            if bytes > 0 {
                extents[cpu].push((seen[cpu], c.at + ps, bytes));
                seen[cpu] += bytes;
            }
        }
        let cpus: Vec<(u32, u64)> = seen
            .iter()
            .enumerate()
            .map(|(c, &n)| (c as u32, n))
            .collect();
        // the kallsyms text is read back a block at a time into its
        // section, never held whole
        let (ks_at, ks_len) = (self.ks_at, self.ks_len);
        let f = &mut self.f;
        let out = crate::write7::write_v7_from(
            out,
            &self.header,
            ks_len,
            &cmdlines,
            cpu_stats,
            &cpus,
            compress,
            &mut |src, at, buf| {
                let i = match src {
                    crate::write7::Source::Cpu(i) => i,
                    crate::write7::Source::Kallsyms => {
                        if at + buf.len() as u64 > ks_len {
                            return Err(Error::Usage("kallsyms read past its end".into()));
                        }
                        f.seek(SeekFrom::Start(ks_at + at))
                            .map_err(Error::io("read kallsyms back"))?;
                        return f.read_exact(buf).map_err(Error::io("read kallsyms back"));
                    }
                };
                let ext = &extents[i];
                let mut k = ext.partition_point(|e| e.0 + e.2 <= at);
                let mut filled = 0usize;
                while filled < buf.len() {
                    let Some(&(start, off, len)) = ext.get(k) else {
                        return Err(Error::Usage(format!("cpu {i}: data read past its end")));
                    };
                    let from = at + filled as u64 - start;
                    let n = ((len - from) as usize).min(buf.len() - filled);
                    f.seek(SeekFrom::Start(off + from))
                        .map_err(Error::io("read cpu pages back"))?;
                    f.read_exact(&mut buf[filled..filled + n])
                        .map_err(Error::io("read cpu pages back"))?;
                    filled += n;
                    k += 1;
                }
                Ok(())
            },
        )?;
        Ok((self.f, out))
    }

    /// Finishes the file: final saved cmdlines (None keeps the start's),
    /// one CPUSTAT option per entry of `cpu_stats` (the text of
    /// `per_cpu/cpuN/stats`), each CPU's pages moved together after the
    /// header, the file cut to length. Returns the storage (flushed).
    pub fn finish(mut self, cmdlines: Option<&[u8]>, cpu_stats: &[String]) -> Result<F, Error> {
        let ps = self.header.page_size as u64;
        let cmdlines = cmdlines.map_or_else(|| self.header.cmdlines.clone(), <[u8]>::to_vec);
        let cpus = self.sizes.len();
        let dummy = vec![(0u64, 0u64); cpus];
        let ks_len = self.ks_len;
        // only its length is needed
        let len = encode_v6(
            &self.header,
            FINISHED,
            &cmdlines,
            cpu_stats,
            ks_len,
            Tail::Table(&dummy),
        )?
        .len(ks_len);
        let start = align_up(len, ps).ok_or_else(|| Error::Usage("header too large".into()))?;
        // read before the pages move (they may land where it lies)
        let ks = self.kallsyms_text()?;
        let mut table = Vec::with_capacity(cpus);
        let mut at = start;
        for &s in &self.sizes {
            table.push((at, s));
            at += s;
        }
        let end = at;
        // from here on, readers refuse the file until it is whole again
        let v = MAGIC.len() as u64;
        self.write_at(
            v,
            VERSION_FINISHING.as_bytes(),
            "mark the file as being finished",
        )?;
        self.compact(&table)?;
        let v = encode_v6(
            &self.header,
            FINISHED,
            &cmdlines,
            cpu_stats,
            ks_len,
            Tail::Table(&table),
        )?;
        let len = v.len(ks_len);
        // zero the gap between the header and the data (old bytes may lie
        // there), cut the file, then the header: the version string last
        let gap = vec![0u8; (start - len) as usize];
        self.write_at(len, &gap, "write the header padding")?;
        self.f
            .set_len(end.max(start))
            .map_err(Error::io("cut the file to length"))?;
        let head = MAGIC.len() + 2;
        let ks_at = v.head.len() as u64;
        self.write_at(head as u64, &v.head[head..], "write the final header")?;
        self.write_at(ks_at, &ks, "write the final header")?;
        drop(ks);
        self.write_at(ks_at + ks_len, &v.rest, "write the final header")?;
        self.f.flush().map_err(Error::io("flush"))?;
        self.write_at(0, &v.head[..head], "write the final header")?;
        self.f.flush().map_err(Error::io("flush"))?;
        Ok(self.f)
    }

    /// Moves every chunk's pages to their place in the finished file
    /// (`table`: each CPU's offset and size), in place: before a run of
    /// pages is written, the pages not yet moved that it would cover are
    /// read into memory and moved in turn. Every page is read once and
    /// written once; what is held in memory never exceeds [`MOVE_BYTES`]
    /// (a run written frees at least as much as it rescues).
    fn compact(&mut self, table: &[(u64, u64)]) -> Result<(), Error> {
        let ps = self.header.page_size as u64;
        let first = self.data_start / ps;
        let slots = (self.end - self.data_start) / ps;
        // where each chunk's first page goes, in pages
        let mut next: Vec<u64> = table.iter().map(|t| t.0 / ps).collect();
        let dest: Vec<u64> = self
            .chunks
            .iter()
            .map(|c| {
                let d = next[c.cpu as usize];
                next[c.cpu as usize] += u64::from(c.used);
                d
            })
            .collect();
        // pages still to move, by page number
        let mut waiting = Bits::new(slots);
        for c in &self.chunks {
            let s = c.at / ps + 1 - first;
            for k in 0..u64::from(c.used) {
                waiting.set(s + k);
            }
        }
        // chunk headers' page numbers, for finding a page's chunk
        let heads: Vec<u64> = self.chunks.iter().map(|c| c.at / ps).collect();
        let max_run = (MOVE_BYTES / ps).max(1);
        let mut pending: Vec<(u64, Vec<u8>)> = Vec::new();
        for i in 0..self.chunks.len() {
            let c = self.chunks[i];
            let data = c.at / ps + 1;
            let mut k = 0u64;
            while k < u64::from(c.used) {
                if !waiting.get(data + k - first) {
                    k += 1;
                    continue;
                }
                let mut e = k + 1;
                while e < u64::from(c.used) && e - k < max_run && waiting.get(data + e - first) {
                    e += 1;
                }
                let run = self.take(&mut waiting, first, data + k, e - k)?;
                pending.push((dest[i] + k, run));
                while let Some((d, bytes)) = pending.pop() {
                    let n = bytes.len() as u64 / ps;
                    // rescue what waits where this run goes
                    let mut s = d.max(first);
                    let stop = (d + n).min(first + slots);
                    while s < stop {
                        if !waiting.get(s - first) {
                            s += 1;
                            continue;
                        }
                        let j = heads.partition_point(|&h| h <= s) - 1;
                        let cj = self.chunks[j];
                        let cdata = heads[j] + 1;
                        let cend = (cdata + u64::from(cj.used)).min(stop);
                        let mut r = s + 1;
                        while r < cend && waiting.get(r - first) {
                            r += 1;
                        }
                        let held = self.take(&mut waiting, first, s, r - s)?;
                        pending.push((dest[j] + (s - cdata), held));
                        s = r;
                    }
                    self.write_at(d * ps, &bytes, "move cpu pages")?;
                }
                k = e;
            }
        }
        Ok(())
    }

    /// Reads `n` waiting pages from page number `at` and marks them moved.
    fn take(&mut self, waiting: &mut Bits, first: u64, at: u64, n: u64) -> Result<Vec<u8>, Error> {
        let ps = self.header.page_size as u64;
        let mut buf = vec![0u8; (n * ps) as usize];
        self.read_at(at * ps, &mut buf, "read cpu pages back")?;
        for s in at..at + n {
            waiting.clear(s - first);
        }
        Ok(buf)
    }
}

/// A bit per page.
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: u64) -> Bits {
        Bits(vec![0; n.div_ceil(64) as usize])
    }
    fn get(&self, i: u64) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, i: u64) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: u64) {
        self.0[(i / 64) as usize] &= !(1 << (i % 64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceDat;

    fn header(endian: Endian) -> Header {
        Header {
            endian,
            long_size: 8,
            page_size: 256,
            header_page: b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n".to_vec(),
            header_event: b"# compressed entry header\n".to_vec(),
            ftrace_formats: vec![b"name: kernel_stack\nID: 4\n".to_vec()],
            systems: vec![System {
                name: "ktrace_1".into(),
                formats: vec![
                    b"name: ent\nID: 1500\n".to_vec(),
                    b"name: ret\nID: 1501\n".to_vec(),
                ],
            }],
            kallsyms: b"ffffffff81000000 T _stext\n".to_vec(),
            printk_formats: Vec::new(),
            cmdlines: b"1 init\n".to_vec(),
            clock: "mono".into(),
            options: vec![
                TraceOption::text(option::UNAME, "Linux box 6.1.0-28-cloud-arm64 aarch64"),
                TraceOption::text(option::VERSION, "ktrace 0.1.0"),
            ],
        }
    }

    fn page(tag: u8) -> Vec<u8> {
        vec![tag; 256]
    }

    fn write(
        h: &Header,
        cpus: usize,
        pages: &[(usize, u8)],
        opts: WriterOptions,
        cmd: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut w = Writer::create(Cursor::new(Vec::new()), h, cpus, opts).unwrap();
        for &(cpu, tag) in pages {
            w.append_pages(cpu, &page(tag)).unwrap();
        }
        let stats: Vec<String> = (0..cpus)
            .map(|c| format!("CPU: {c}\noverrun: {c}\n"))
            .collect();
        w.finish(cmd, &stats).unwrap().into_inner()
    }

    fn read_back(bytes: Vec<u8>) -> (crate::Meta, Vec<Vec<Vec<u8>>>) {
        let mut d = TraceDat::open(Cursor::new(bytes)).unwrap();
        let n = d.meta.buffers[0].cpus.len();
        let pages = (0..n)
            .map(|i| d.pages(0, i).unwrap().map(Result::unwrap).collect())
            .collect();
        (d.meta, pages)
    }

    /// Small chunks: one page first, growing to four.
    fn small() -> WriterOptions {
        WriterOptions {
            first_chunk: 256,
            max_chunk: 1024,
            slack: 0,
        }
    }

    #[test]
    fn round_trip_both_byte_orders() {
        for e in [Endian::Little, Endian::Big] {
            let h = header(e);
            let opts = WriterOptions {
                slack: 512,
                ..small()
            };
            let bytes = write(&h, 3, &[(0, 1), (2, 2), (0, 3)], opts, None);
            let (m, pages) = read_back(bytes);
            assert_eq!(m.version, 6);
            assert_eq!(m.unfinished, None);
            assert_eq!(m.endian, e);
            assert_eq!(m.page_size, 256);
            assert_eq!(
                (m.header_page.clone(), m.header_event.clone()),
                (h.header_page.clone(), h.header_event.clone())
            );
            assert_eq!(m.ftrace_formats, h.ftrace_formats);
            assert_eq!(m.systems, h.systems);
            assert_eq!(m.kallsyms, h.kallsyms);
            assert_eq!(m.cmdlines, h.cmdlines);
            assert_eq!(m.clock(), Some("mono"));
            assert_eq!(m.kernel_release(), Some("6.1.0-28-cloud-arm64"));
            assert_eq!(m.writer_version(), Some("ktrace 0.1.0"));
            assert_eq!(
                m.cpu_stats(),
                vec![
                    "CPU: 0\noverrun: 0\n",
                    "CPU: 1\noverrun: 1\n",
                    "CPU: 2\noverrun: 2\n"
                ]
            );
            assert_eq!(pages, vec![vec![page(1), page(3)], vec![], vec![page(2)]]);
            // compact: header, padding to a page, then 3 pages
            let first = m.buffers[0].cpus[0].offset;
            assert_eq!(first % 256, 0);
            assert_eq!(m.buffers[0].cpus[2].offset, first + 512);
        }
    }

    #[test]
    fn header_growing_moves_data_up_intact() {
        let h = header(Endian::Little);
        let big = "4242 kfix_target\n".repeat(200);
        let pages = [
            (0, 1),
            (0, 2),
            (0, 3),
            (0, 4),
            (1, 5),
            (1, 6),
            (1, 7),
            (1, 8),
            (2, 9),
        ];
        let bytes = write(&h, 3, &pages, small(), Some(big.as_bytes()));
        let (m, got) = read_back(bytes);
        assert_eq!(m.cmdlines, big.as_bytes());
        assert_eq!(got[0], vec![page(1), page(2), page(3), page(4)]);
        assert_eq!(got[1], vec![page(5), page(6), page(7), page(8)]);
        assert_eq!(got[2], vec![page(9)]);
    }

    /// A tiny deterministic generator (xorshift), for the shuffles below.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Pages of several CPUs in random order and random batches, chunks of
    /// several sizes, the final header smaller or larger than the
    /// recording's: every CPU reads back its pages in order, the file is
    /// exactly header + pages long, and it matches a file written with one
    /// CPU at a time (nothing to move apart from the header's growth).
    #[test]
    fn finish_moves_every_interleaving_into_place() {
        let h = header(Endian::Little);
        for seed in 1..200u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let cpus = 1 + rng.next(4) as usize;
            let opts = WriterOptions {
                first_chunk: 256 * (1 + rng.next(3)),
                max_chunk: 256 * (1 + rng.next(8)),
                slack: 256 * rng.next(3),
            };
            let mut w = Writer::create(Cursor::new(Vec::new()), &h, cpus, opts).unwrap();
            let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); cpus];
            let mut tag = 0u32;
            for _ in 0..rng.next(40) {
                let cpu = rng.next(cpus as u64) as usize;
                let n = 1 + rng.next(5) as usize;
                let mut batch = Vec::new();
                for _ in 0..n {
                    tag += 1;
                    let mut p = vec![(tag % 251) as u8; 256];
                    p[..4].copy_from_slice(&tag.to_le_bytes());
                    want[cpu].push(p.clone());
                    batch.extend_from_slice(&p);
                }
                w.append_pages(cpu, &batch).unwrap();
            }
            assert!(
                w.file_end() <= 4096 + 2 * 256 * (tag as u64 + 9 * cpus as u64),
                "seed {seed}: the recording grows with its data ({} bytes)",
                w.file_end()
            );
            let cmdlines = "1 init\n".repeat(rng.next(300) as usize);
            let bytes = w
                .finish(Some(cmdlines.as_bytes()), &[])
                .unwrap()
                .into_inner();
            let (m, got) = read_back(bytes.clone());
            assert_eq!(got, want, "seed {seed}");
            let total: usize = want.iter().map(Vec::len).sum();
            let start = m.buffers[0].cpus[0].offset as usize;
            assert_eq!(bytes.len(), start + total * 256, "seed {seed}: compact");
            // the same pages appended one CPU after the other
            let mut w = Writer::create(Cursor::new(Vec::new()), &h, cpus, opts).unwrap();
            for (cpu, pages) in want.iter().enumerate() {
                for p in pages {
                    w.append_pages(cpu, p).unwrap();
                }
            }
            let alike = w
                .finish(Some(cmdlines.as_bytes()), &[])
                .unwrap()
                .into_inner();
            assert_eq!(bytes, alike, "seed {seed}");
        }
    }

    /// `finish_v7` of pages appended in random order and batches, chunks
    /// of several sizes: every CPU's pages read back in order (through
    /// the compressed chunks), the file is byte for byte what `write_v7`
    /// writes from the same data, and the recording is still readable
    /// afterwards.
    #[test]
    fn finish_v7_writes_what_write_v7_writes() {
        let h = header(Endian::Little);
        for comp in [
            crate::Compress7::Zstd(crate::ZSTD_VERSION),
            crate::Compress7::None,
        ] {
            for seed in 1..60u64 {
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let cpus = 1 + rng.next(4) as usize;
                let opts = WriterOptions {
                    first_chunk: 256 * (1 + rng.next(3)),
                    max_chunk: 256 * (1 + rng.next(8)),
                    slack: 256 * rng.next(3),
                };
                let mut w = Writer::create(Cursor::new(Vec::new()), &h, cpus, opts).unwrap();
                let mut want: Vec<Vec<u8>> = vec![Vec::new(); cpus];
                let mut tag = 0u32;
                // up to ~100 pages per CPU: several ten-page chunks
                for _ in 0..rng.next(80) {
                    let cpu = rng.next(cpus as u64) as usize;
                    let n = 1 + rng.next(7) as usize;
                    let mut batch = Vec::new();
                    for _ in 0..n {
                        tag += 1;
                        let mut p = vec![(tag % 251) as u8; 256];
                        p[..4].copy_from_slice(&tag.to_le_bytes());
                        p[100..104].copy_from_slice(&(tag * 7919).to_le_bytes());
                        batch.extend_from_slice(&p);
                    }
                    want[cpu].extend_from_slice(&batch);
                    w.append_pages(cpu, &batch).unwrap();
                }
                let stats: Vec<String> = (0..cpus).map(|c| format!("CPU: {c}\n")).collect();
                let cmd = b"42 kfix_target\n";
                let (rec, out) = w
                    .finish_v7(Cursor::new(Vec::new()), Some(cmd), &stats, comp)
                    .unwrap();
                let bytes = out.into_inner();
                let (m, got) = read_back(bytes.clone());
                assert_eq!(m.version, 7, "seed {seed}");
                assert_eq!(
                    m.compression.as_ref().map(|c| c.0.name()),
                    (comp != crate::Compress7::None).then_some("zstd")
                );
                assert_eq!(m.cmdlines, cmd, "seed {seed}");
                assert_eq!(m.cpu_stats().len(), cpus);
                let got: Vec<Vec<u8>> = got.into_iter().map(|p| p.concat()).collect();
                assert_eq!(got, want, "seed {seed}");
                let refs: Vec<(u32, &[u8])> = want
                    .iter()
                    .enumerate()
                    .map(|(c, d)| (c as u32, &d[..]))
                    .collect();
                let direct = crate::write_v7(Cursor::new(Vec::new()), &h, cmd, &stats, &refs, comp)
                    .unwrap()
                    .into_inner();
                assert_eq!(bytes, direct, "seed {seed}");
                // the recording is untouched: still read as it was
                let (rm, rgot) = read_back(rec.into_inner());
                assert!(rm.unfinished.is_some());
                let rgot: Vec<Vec<u8>> = rgot.into_iter().map(|p| p.concat()).collect();
                assert_eq!(rgot, want, "seed {seed}");
            }
        }
    }

    /// A kallsyms text of several zstd blocks and more than a window
    /// (read back from the recording a block at a time into its section)
    /// comes out of `finish_v7` whole, compressed or not.
    #[test]
    fn finish_v7_streams_a_large_kallsyms() {
        let mut h = header(Endian::Little);
        let mut rng = Rng(77);
        let mut ks = Vec::new();
        while ks.len() < 700_000 {
            let addr = 0xffff_ffff_8100_0000u64 + rng.next(1 << 24);
            let t = [b'T', b't', b'D', b'b'][rng.next(4) as usize] as char;
            let name: String = (0..4 + rng.next(20))
                .map(|_| (b'a' + rng.next(26) as u8) as char)
                .collect();
            ks.extend_from_slice(format!("{addr:016x} {t} {name}\n").as_bytes());
        }
        h.kallsyms = ks;
        for comp in [
            crate::Compress7::Zstd(crate::ZSTD_VERSION),
            crate::Compress7::None,
        ] {
            let mut w = Writer::create(Cursor::new(Vec::new()), &h, 2, small()).unwrap();
            w.append_pages(1, &[page(7), page(8)].concat()).unwrap();
            w.append_pages(0, &page(1)).unwrap();
            let (_, out) = w
                .finish_v7(Cursor::new(Vec::new()), None, &[], comp)
                .unwrap();
            let bytes = out.into_inner();
            let (m, _) = read_back(bytes.clone());
            assert!(m.kallsyms == h.kallsyms, "{comp:?}: kallsyms differs");
            if comp != crate::Compress7::None {
                assert!(
                    bytes.len() < h.kallsyms.len() / 2,
                    "{comp:?}: {}",
                    bytes.len()
                );
            }
        }
    }

    #[test]
    fn the_file_reads_before_finish() {
        let h = header(Endian::Little);
        let mut w = Writer::create(Cursor::new(Vec::new()), &h, 2, small()).unwrap();
        w.append_pages(1, &[page(7), page(8)].concat()).unwrap();
        w.append_pages(0, &page(1)).unwrap();
        w.append_pages(1, &[page(9), page(10), page(11)].concat())
            .unwrap();
        assert_eq!(w.sizes(), &[256, 1280]);
        let snapshot = w.f.get_ref().clone();
        // a chunk header written, no page yet: the end of what was
        // allocated is found, nothing more is read
        w.new_chunk(0).unwrap();
        let (m, pages) = read_back(snapshot);
        assert!(m.cpu_stats().is_empty());
        assert!(m.unfinished.is_some());
        assert_eq!(
            pages,
            vec![
                vec![page(1)],
                vec![page(7), page(8), page(9), page(10), page(11)]
            ]
        );
        let (m2, pages2) = read_back(w.f.get_ref().clone());
        assert_eq!(pages2, pages);
        assert_eq!(m2.buffers, m.buffers);
    }

    #[test]
    fn finishing_or_foreign_chunks_are_refused() {
        let h = header(Endian::Little);
        let mut w = Writer::create(Cursor::new(Vec::new()), &h, 2, small()).unwrap();
        w.append_pages(1, &page(7)).unwrap();
        let mut bytes = w.f.get_ref().clone();
        // a chunk header that is not the writer's
        let at = w.chunks[0].at as usize;
        bytes[at + 8] = 5;
        let e = TraceDat::open(Cursor::new(bytes.clone())).unwrap_err();
        assert!(e.to_string().contains("chunk at offset"), "{e}");
        // the file as it is while `finish` moves the pages
        let v = MAGIC.len();
        bytes[v..v + VERSION_FINISHING.len()].copy_from_slice(VERSION_FINISHING.as_bytes());
        let e = TraceDat::open(Cursor::new(bytes)).unwrap_err();
        assert!(e.to_string().contains("finish was interrupted"), "{e}");
    }

    #[test]
    fn misuse_is_an_error() {
        let h = header(Endian::Little);
        let mut w = Writer::create(Cursor::new(Vec::new()), &h, 2, small()).unwrap();
        let cases: [(usize, Vec<u8>, &str); 2] = [
            (2, page(1), "writer: cpu 2 is not among the file's 2 cpus"),
            (
                0,
                vec![0; 100],
                "writer: 100 bytes are not whole 256-byte pages",
            ),
        ];
        for (cpu, data, msg) in cases {
            assert_eq!(w.append_pages(cpu, &data).unwrap_err().to_string(), msg);
        }
        let mut bad = h.clone();
        bad.page_size = 3;
        assert!(
            Writer::create(Cursor::new(Vec::new()), &bad, 1, WriterOptions::default()).is_err()
        );
        bad = h.clone();
        bad.options.push(TraceOption {
            id: option::DONE,
            data: vec![],
        });
        assert!(Writer::create(Cursor::new(Vec::new()), &bad, 1, small()).is_err());
        assert!(Writer::create(Cursor::new(Vec::new()), &h, 0, WriterOptions::default()).is_err());
    }
}
