//! The trace.dat writer: version 6 (trace-cmd.dat.v6(5)), the version every
//! trace-cmd and KernelShark reads, written while recording. It writes what
//! it is given (formats, kallsyms, pages as the kernel wrote them) and reads
//! nothing from tracefs; it does not compress.
//!
//! # Layout while recording (why a SIGKILL leaves a readable file)
//!
//! ```text
//! 0                      header: magic .. options .. "flyrecord\0" + table
//! align(header + slack)  cpu 0 region: pages appended in arrival order
//! + stride               cpu 1 region
//! + 2 * stride           ...
//! ```
//!
//! Version 6 wants each CPU's data contiguous, with its offset and size in
//! the flyrecord table written before the data. So every CPU gets its own
//! region, `stride` bytes apart (1 TiB, or 8 TiB / CPUs when smaller, by
//! default): the regions are holes of a sparse file until pages land in
//! them, so they cost no disk. The table's offsets are fixed at
//! [`Writer::create`]; [`Writer::append_pages`] writes the pages and then
//! patches that CPU's size (8 bytes), so at every moment the table
//! describes only pages that were completely written. A recorder killed by
//! SIGKILL (whose written data stays in the page cache) therefore leaves a
//! file that trace-cmd and this crate's reader read up to the last page
//! appended — with the saved cmdlines of the start and no CPU stats.
//!
//! [`Writer::finish`] then writes the final metadata (saved cmdlines taken at
//! the end, one CPUSTAT option per CPU with its lost/overrun counts), moves
//! the CPU data together (memmove order, so no CPU's data is overwritten
//! before it has been moved) and cuts the file to its length. The finish is
//! not atomic: a kill during it can leave the moved CPUs' table entries
//! stale. A recording left unfinished (the recorder was killed) reads as
//! it is, sparse; [`Writer::recover`] reopens it so that `finish` makes it
//! compact. Filesystems without sparse files or with a small maximum file size
//! (vfat, ext4 with 1 KiB blocks) need a smaller [`WriterOptions::stride`];
//! a region that fills is an error, not an overwrite.

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

/// Where the writer puts things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Distance between two CPUs' regions (0: 1 TiB, or 8 TiB / CPUs when
    /// smaller); rounded down to the page size. One CPU may record at most
    /// this much.
    pub stride: u64,
    /// Room left after the first header for the final one to grow into
    /// (more saved cmdlines, the CPU stats) without moving CPU 0 up.
    pub slack: u64,
}

impl Default for WriterOptions {
    fn default() -> WriterOptions {
        WriterOptions {
            stride: 0,
            slack: 1 << 20,
        }
    }
}

/// A version 6 trace.dat file being recorded (see the module notes for the
/// layout).
pub struct Writer<F> {
    f: F,
    header: Header,
    table_offset: u64,
    data_start: u64,
    stride: u64,
    sizes: Vec<u64>,
}

impl<F> std::fmt::Debug for Writer<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("data_start", &self.data_start)
            .field("stride", &self.stride)
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

/// The version 6 header with `table` as the flyrecord table; returns the
/// bytes and the offset of the table in them.
fn encode_v6(
    h: &Header,
    cmdlines: &[u8],
    stats: &[String],
    table: &[(u64, u64)],
) -> Result<(Vec<u8>, u64), Error> {
    let mut o = Out {
        b: Vec::with_capacity(h.kallsyms.len() + cmdlines.len() + 65536),
        e: h.endian,
    };
    o.b.extend_from_slice(MAGIC);
    o.b.extend_from_slice(b"6\0");
    o.b.push(match h.endian {
        Endian::Little => 0,
        Endian::Big => 1,
    });
    o.b.push(h.long_size);
    o.u32(h.page_size);
    // the same pieces as version 7's sections, in version 6's order
    let m = encode_metadata_v7(h, cmdlines)?;
    for piece in [
        &m.header_info,
        &m.ftrace,
        &m.events,
        &m.kallsyms,
        &m.printk,
        &m.cmdlines,
    ] {
        o.b.extend_from_slice(piece);
    }
    o.u32(count32(table.len(), "cpus")?);
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
    o.b.extend_from_slice(b"flyrecord\0");
    let table_offset = o.b.len() as u64;
    for &(off, size) in table {
        o.u64(off);
        o.u64(size);
    }
    Ok((o.b, table_offset))
}

/// The bodies of the version 7 metadata sections (same content as the
/// version 6 header's pieces).
pub(crate) struct Metadata7 {
    pub(crate) header_info: Vec<u8>,
    pub(crate) ftrace: Vec<u8>,
    pub(crate) events: Vec<u8>,
    pub(crate) kallsyms: Vec<u8>,
    pub(crate) printk: Vec<u8>,
    pub(crate) cmdlines: Vec<u8>,
}

pub(crate) fn encode_metadata_v7(h: &Header, cmdlines: &[u8]) -> Result<Metadata7, Error> {
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
    ks.blob32(&h.kallsyms)?;
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

impl<F: Storage> Writer<F> {
    /// Writes the header for `cpus` CPUs (every CPU empty) into `f`, which
    /// should be empty. The file is a valid trace.dat from here on.
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
        header: Header,
        cpus: usize,
        opts: WriterOptions,
    ) -> Result<Writer<F>, Error> {
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
        let stride = if opts.stride == 0 {
            (1u64 << 40).min((8u64 << 40) / cpus as u64)
        } else {
            opts.stride
        } / ps
            * ps;
        if stride == 0 {
            return Err(Error::Usage(format!(
                "stride {} is below the page size",
                opts.stride
            )));
        }
        let empty = vec![(0u64, 0u64); cpus];
        // only its length is needed (kallsyms makes it megabytes)
        let first_len = encode_v6(&header, &header.cmdlines, &[], &empty)?.0.len();
        let data_start = align_up(first_len as u64 + opts.slack, ps)
            .ok_or_else(|| Error::Usage("slack too large".into()))?;
        let last = (cpus as u64 - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(data_start))
            .and_then(|x| x.checked_add(stride))
            .ok_or_else(|| Error::Usage("cpus x stride overflows".into()))?;
        let _ = last;
        let table: Vec<(u64, u64)> = (0..cpus as u64)
            .map(|c| (data_start + c * stride, 0))
            .collect();
        let (bytes, table_offset) = encode_v6(&header, &header.cmdlines, &[], &table)?;
        let mut w = Writer {
            f,
            header,
            table_offset,
            data_start,
            stride,
            sizes: vec![0; cpus],
        };
        w.write_at(0, &bytes, "write the header")?;
        Ok(w)
    }

    /// Reopens a recording this writer left unfinished (its recorder was
    /// killed): the header must be exactly what [`Writer::create`] wrote,
    /// each CPU's size a whole number of pages within its region. Then
    /// [`Writer::append_pages`] and [`Writer::finish`] work as before, e.g.
    /// `Writer::recover(f)?.finish(None, &[])` makes the file compact
    /// (the saved cmdlines of the start, no CPU stats).
    pub fn recover(mut f: F) -> Result<Writer<F>, Error> {
        let meta = crate::TraceDat::open(&mut f)?.meta;
        let not_ours =
            |why: &str| Error::Format(format!("not an unfinished ktrace recording: {why}"));
        if meta.version != 6 || meta.buffers.len() != 1 || !meta.cpu_stats().is_empty() {
            return Err(not_ours("finished, or not version 6 with one buffer"));
        }
        let cpus = &meta.buffers[0].cpus;
        let header = Header::from_meta(&meta);
        let ps = header.page_size as u64;
        let data_start = cpus.first().map_or(0, |c| c.offset);
        let stride = match cpus.get(1) {
            Some(c) => c
                .offset
                .checked_sub(data_start)
                .ok_or_else(|| not_ours("regions out of order"))?,
            None => u64::MAX / 2 / ps * ps,
        };
        for (i, c) in cpus.iter().enumerate() {
            if c.cpu as usize != i
                || Some(c.offset)
                    != (i as u64)
                        .checked_mul(stride)
                        .and_then(|x| x.checked_add(data_start))
                || c.size > stride
                || !c.size.is_multiple_of(ps)
            {
                return Err(not_ours(&format!(
                    "cpu {i}: region {} + {}",
                    c.offset, c.size
                )));
            }
        }
        let table: Vec<(u64, u64)> = cpus.iter().map(|c| (c.offset, c.size)).collect();
        let (bytes, table_offset) = encode_v6(&header, &header.cmdlines, &[], &table)?;
        let mut on_disk = vec![0u8; bytes.len()];
        f.seek(SeekFrom::Start(0)).map_err(Error::io("seek"))?;
        f.read_exact(&mut on_disk)
            .map_err(Error::io("read the header back"))?;
        if on_disk != bytes || data_start < bytes.len() as u64 || stride == 0 {
            return Err(not_ours("the header is not this writer's"));
        }
        Ok(Writer {
            f,
            header,
            table_offset,
            data_start,
            stride,
            sizes: table.iter().map(|t| t.1).collect(),
        })
    }

    fn write_at(&mut self, offset: u64, data: &[u8], what: &str) -> Result<(), Error> {
        self.f
            .seek(SeekFrom::Start(offset))
            .map_err(Error::io(what))?;
        self.f.write_all(data).map_err(Error::io(what))
    }

    /// Appends whole pages (a multiple of the page size, as the kernel
    /// wrote them) to `cpu`'s data, then records the new size in the table.
    pub fn append_pages(&mut self, cpu: usize, pages: &[u8]) -> Result<(), Error> {
        let ps = self.header.page_size as u64;
        let Some(&size) = self.sizes.get(cpu) else {
            return Err(Error::Usage(format!(
                "cpu {cpu} is not among the file's {} cpus",
                self.sizes.len()
            )));
        };
        if !(pages.len() as u64).is_multiple_of(ps) {
            return Err(Error::Usage(format!(
                "{} bytes are not whole {ps}-byte pages",
                pages.len()
            )));
        }
        if pages.is_empty() {
            return Ok(());
        }
        let new = size + pages.len() as u64;
        if new > self.stride {
            return Err(Error::Usage(format!(
                "cpu {cpu}: region full ({} bytes per cpu)",
                self.stride
            )));
        }
        let at = self.data_start + cpu as u64 * self.stride + size;
        self.write_at(at, pages, &format!("write cpu {cpu} pages"))?;
        let e = Out {
            b: Vec::new(),
            e: self.header.endian,
        };
        let entry = self.table_offset + cpu as u64 * 16 + 8;
        self.write_at(entry, &e.u64_bytes(new), "patch the flyrecord table")?;
        self.sizes[cpu] = new;
        Ok(())
    }

    /// Bytes appended to each CPU so far.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Finishes the file: final saved cmdlines (None keeps the start's),
    /// one CPUSTAT option per entry of `cpu_stats` (the text of
    /// `per_cpu/cpuN/stats`), CPU data moved together and the file cut to
    /// length. Returns the storage (flushed).
    pub fn finish(mut self, cmdlines: Option<&[u8]>, cpu_stats: &[String]) -> Result<F, Error> {
        let ps = self.header.page_size as u64;
        let cmdlines = cmdlines.map_or_else(|| self.header.cmdlines.clone(), <[u8]>::to_vec);
        let cpus = self.sizes.len();
        let dummy = vec![(0u64, 0u64); cpus];
        // only its length is needed
        let probe_len = encode_v6(&self.header, &cmdlines, cpu_stats, &dummy)?
            .0
            .len();
        let start = align_up(probe_len as u64, ps)
            .ok_or_else(|| Error::Usage("header too large".into()))?;
        let mut table = Vec::with_capacity(cpus);
        let mut at = start;
        for &s in &self.sizes {
            table.push((at, s));
            at += s;
        }
        let end = at;
        let (data_start, stride) = (self.data_start, self.stride);
        let old = |c: usize| data_start + c as u64 * stride;
        // memmove order: CPUs moving down in ascending order, then CPUs
        // moving up in descending order
        let mut buf = vec![0u8; 1 << 20];
        for (c, &(new, size)) in table.iter().enumerate() {
            if new <= old(c) {
                self.move_data(old(c), new, size, &mut buf)?;
            }
        }
        for (c, &(new, size)) in table.iter().enumerate().rev() {
            if new > old(c) {
                self.move_data(old(c), new, size, &mut buf)?;
            }
        }
        let (bytes, _) = encode_v6(&self.header, &cmdlines, cpu_stats, &table)?;
        self.write_at(0, &bytes, "write the final header")?;
        // zero the gap between the header and the data (old header bytes
        // or old data may lie there)
        let gap = vec![0u8; (start - bytes.len() as u64) as usize];
        self.write_at(bytes.len() as u64, &gap, "write the header padding")?;
        self.f
            .set_len(end.max(start))
            .map_err(Error::io("cut the file to length"))?;
        self.f.flush().map_err(Error::io("flush"))?;
        Ok(self.f)
    }

    fn move_data(&mut self, from: u64, to: u64, len: u64, buf: &mut [u8]) -> Result<(), Error> {
        if from == to || len == 0 {
            return Ok(());
        }
        let n = buf.len() as u64;
        let mut done = 0u64;
        while done < len {
            let k = n.min(len - done);
            // forward when moving down, backward when moving up
            let off = if to < from { done } else { len - done - k };
            self.f
                .seek(SeekFrom::Start(from + off))
                .map_err(Error::io("seek cpu data"))?;
            self.f
                .read_exact(&mut buf[..k as usize])
                .map_err(Error::io("read cpu data back"))?;
            self.write_at(to + off, &buf[..k as usize], "move cpu data")?;
            done += k;
        }
        Ok(())
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

    #[test]
    fn round_trip_both_byte_orders() {
        for e in [Endian::Little, Endian::Big] {
            let h = header(e);
            let opts = WriterOptions {
                stride: 4096,
                slack: 512,
            };
            let bytes = write(&h, 3, &[(0, 1), (2, 2), (0, 3)], opts, None);
            let (m, pages) = read_back(bytes);
            assert_eq!(m.version, 6);
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
    fn header_growing_past_the_slack_moves_data_up_intact() {
        let h = header(Endian::Little);
        let opts = WriterOptions {
            stride: 1024,
            slack: 0,
        };
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
        let bytes = write(&h, 3, &pages, opts, Some(big.as_bytes()));
        let (m, got) = read_back(bytes);
        assert_eq!(m.cmdlines, big.as_bytes());
        assert_eq!(got[0], vec![page(1), page(2), page(3), page(4)]);
        assert_eq!(got[1], vec![page(5), page(6), page(7), page(8)]);
        assert_eq!(got[2], vec![page(9)]);
    }

    #[test]
    fn the_file_reads_before_finish() {
        let h = header(Endian::Little);
        let mut w = Writer::create(
            Cursor::new(Vec::new()),
            &h,
            2,
            WriterOptions {
                stride: 2048,
                slack: 0,
            },
        )
        .unwrap();
        w.append_pages(1, &[page(7), page(8)].concat()).unwrap();
        assert_eq!(w.sizes(), &[0, 512]);
        let snapshot = w.f.get_ref().clone();
        let (m, pages) = read_back(snapshot);
        assert!(m.cpu_stats().is_empty());
        assert_eq!(pages, vec![vec![], vec![page(7), page(8)]]);
    }

    #[test]
    fn misuse_is_an_error() {
        let h = header(Endian::Little);
        let mut w = Writer::create(
            Cursor::new(Vec::new()),
            &h,
            2,
            WriterOptions {
                stride: 512,
                slack: 0,
            },
        )
        .unwrap();
        let cases: [(usize, Vec<u8>, &str); 3] = [
            (2, page(1), "writer: cpu 2 is not among the file's 2 cpus"),
            (
                0,
                vec![0; 100],
                "writer: 100 bytes are not whole 256-byte pages",
            ),
            (
                0,
                vec![0; 768],
                "writer: cpu 0: region full (512 bytes per cpu)",
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
        assert!(
            Writer::create(
                Cursor::new(Vec::new()),
                &bad,
                1,
                WriterOptions {
                    stride: 512,
                    slack: 0
                }
            )
            .is_err()
        );
        assert!(Writer::create(Cursor::new(Vec::new()), &h, 0, WriterOptions::default()).is_err());
    }
}
