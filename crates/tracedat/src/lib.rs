//! ktrace-tracedat: trace-cmd's `trace.dat` file format, written and read.
//!
//! Mirrors the format trace-cmd documents in trace-cmd.dat.v6(5) and
//! trace-cmd.dat.v7(5) (trace-cmd 3.x, `Documentation/trace-cmd/`), which in
//! turn carries the kernel's own tracefs files: `events/header_page`,
//! `events/header_event`, `events/<system>/<event>/format`, `/proc/kallsyms`,
//! `printk_formats`, `saved_cmdlines`, `per_cpu/cpuN/stats` and the raw
//! sub-buffer pages of `per_cpu/cpuN/trace_pipe_raw`. It is pure code over
//! `Read`/`Write`/`Seek`: it opens no tracefs file, decodes no page (that is
//! ktrace-ring) and parses no format (that is ktrace-event).
//!
//! # Pieces
//!
//! - [`Writer`]: a version 6 file written while recording. The metadata
//!   ([`Header`]) goes first, under ktrace's own "unfinished" version string;
//!   [`Writer::append_pages`] writes whole sub-buffer pages as they arrive
//!   into chunks of the CPU's own, allocated at the end of the file as data
//!   comes (the file grows with its data, on any file system), patching the
//!   chunk's page count after every append. A recorder killed at any moment
//!   thus leaves a file that [`TraceDat`] reads up to the last page appended
//!   (trace-cmd refuses it). [`Writer::finish`] moves each CPU's pages
//!   together in place, writes the final metadata (final saved cmdlines, CPU
//!   stats with lost and overrun counts) and cuts the file to size: a plain
//!   version 6 file; [`Writer::recover`] reopens a killed recording to
//!   finish it.
//! - [`write_v7`]: a whole version 7 file from finished data (sections in
//!   trace-cmd 3.1's order, uncompressed or zstd through our own
//!   compressor ([`zstd`]), CPU data in chunks of ten pages each
//!   compressed on its own, as trace-cmd writes them); recording goes through the version 6 [`Writer`], whose layout
//!   survives a kill, and [`Writer::finish_v7`] writes the version 7 file
//!   from it (to another file: the recording stays readable until the new
//!   file is complete). trace-cmd 3.1.6 does not check the zstd version
//!   string.
//! - [`TraceDat`]: reads versions 6 and 7 (sections, the zlib and zstd
//!   compression trace-cmd writes by default, several options sections,
//!   instance buffers) into [`Meta`] and hands out each CPU's pages through
//!   [`Pages`]. Truncated, corrupted or foreign files give an [`Error`] and
//!   never a panic; a CPU whose data runs past the end of the file yields the
//!   whole pages that are there, then [`Error::Truncated`]. It also reads an
//!   unfinished recording of [`Writer`] ([`Meta::unfinished`]).
//!
//! # Wiring (for `ktrace record` / `ktrace report`)
//!
//! Record: fill a [`Header`] from tracefs (header_page, header_event, the
//! formats of the recorded events under their group, ftrace's
//! kernel_stack/user_stack formats when stacks are taken, kallsyms,
//! printk_formats, saved_cmdlines, the instance's clock, a UNAME and VERSION
//! option, the probe definitions as [`option::KTRACE_DYNAMIC_EVENTS`]) with
//! `page_size` = the instance's sub-buffer size; [`Writer::create`] on a
//! new file opened read+write; [`Writer::append_pages`] for every page the
//! splice reader hands over (several at once is fine); at the end
//! [`Writer::finish`] with the final saved_cmdlines and each CPU's stats.
//! Report: [`TraceDat::open`], `PageLayout::from_header_page` of
//! `meta.header_page` with `meta.endian` and the buffer's page size,
//! `Events` from `meta.systems`, [`TraceDat::pages`] per CPU into the
//! merge (examples/report.rs).
//!
//! # Example
//!
//! ```
//! use ktrace_tracedat::{Endian, Header, TraceDat, Writer, WriterOptions};
//! use std::io::Cursor;
//! let header = Header {
//!     endian: Endian::Little,
//!     long_size: 8,
//!     page_size: 4096,
//!     header_page: b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n".to_vec(),
//!     clock: "local".into(),
//!     ..Header::default()
//! };
//! let mut w = Writer::create(Cursor::new(Vec::new()), &header, 2, WriterOptions::default())?;
//! w.append_pages(1, &[0u8; 4096])?;
//! let file = w.finish(None, &[])?.into_inner();
//! let mut dat = TraceDat::open(Cursor::new(file))?;
//! assert_eq!(dat.meta.buffers[0].cpus[1].size, 4096);
//! assert_eq!(dat.pages(0, 1)?.count(), 1);
//! # Ok::<(), ktrace_tracedat::Error>(())
//! ```

mod compress;
mod read;
mod write;
mod write7;
pub mod zstd;

pub use ktrace_ring::Endian;
pub use read::{Buffer, Compression, CpuData, Meta, Pages, System, TraceDat, TraceOption};
pub use write::{Header, Storage, Writer, WriterOptions};
pub use write7::{Compress7, ZSTD_VERSION, write_v7};

/// The 10 bytes every trace.dat file starts with: 0x17 0x08 0x44 "tracing".
pub const MAGIC: &[u8; 10] = b"\x17\x08Dtracing";

/// Whether `head`, a file's first [`MAGIC`]`.len()` bytes, is what
/// [`TraceDat::open`] takes: the magic, or that of a recording ktrace has
/// not finished writing. For readers that see a stream before they keep it
/// (a pipe is copied to a file before it is read by offset).
pub fn starts_as_tracedat(head: &[u8]) -> bool {
    head == MAGIC || head == write::UNFINISHED_MAGIC
}

/// Option identifiers (trace-cmd's `enum tracecmd_file_options`).
pub mod option {
    /// End of an options list (v7: with the offset of the next section).
    pub const DONE: u16 = 0;
    /// Time difference to the wall clock, text.
    pub const DATE: u16 = 1;
    /// One CPU's `per_cpu/cpuN/stats` text.
    pub const CPUSTAT: u16 = 2;
    /// An instance buffer (offset, name; v7: clock, page size, CPU table).
    pub const BUFFER: u16 = 3;
    /// The `trace_clock` file text (`[local] global ...`).
    pub const TRACECLOCK: u16 = 4;
    /// `uname -a`-like text of the traced machine.
    pub const UNAME: u16 = 5;
    /// Event hooks, text.
    pub const HOOK: u16 = 6;
    /// A fixed offset added to time stamps, text.
    pub const OFFSET: u16 = 7;
    /// Number of CPUs of the traced machine (u32).
    pub const CPUCOUNT: u16 = 8;
    /// Version of the program that wrote the file, text.
    pub const VERSION: u16 = 9;
    /// Memory maps of the traced processes, text.
    pub const PROCMAPS: u16 = 10;
    /// Trace session identifier (u64).
    pub const TRACEID: u16 = 11;
    /// Host/guest time synchronisation.
    pub const TIME_SHIFT: u16 = 12;
    /// Traced guests.
    pub const GUEST: u16 = 13;
    /// TSC to nanoseconds conversion.
    pub const TSC2NSEC: u16 = 14;
    /// Strings section (v7).
    pub const STRINGS: u16 = 15;
    /// Offset of the header info section (v7).
    pub const HEADER_INFO: u16 = 16;
    /// Offset of the ftrace event formats section (v7).
    pub const FTRACE_EVENTS: u16 = 17;
    /// Offset of the event formats section (v7).
    pub const EVENT_FORMATS: u16 = 18;
    /// Offset of the kallsyms section (v7).
    pub const KALLSYMS: u16 = 19;
    /// Offset of the printk formats section (v7).
    pub const PRINTK: u16 = 20;
    /// Offset of the saved cmdlines section (v7).
    pub const CMDLINES: u16 = 21;
    /// A latency (text) buffer (v7).
    pub const BUFFER_TEXT: u16 = 22;
    /// ktrace's own option (not trace-cmd's; "KT"): the `dynamic_events`
    /// lines of the recorded probes, text, so a reader knows a kprobe from
    /// a uprobe and the definitions behind the formats. trace-cmd 3.1.6
    /// skips option ids it does not know without a word (tested).
    pub const KTRACE_DYNAMIC_EVENTS: u16 = 0x4b54;
}

/// Errors from reading and writing trace.dat files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the file failed.
    #[error("{context}: {reason}")]
    Io {
        /// What was being read or written.
        context: String,
        /// What the operating system said (in the message, not repeated as
        /// a source: a chain printer would show it twice).
        reason: std::io::Error,
    },
    /// The file does not start with trace.dat's magic bytes.
    #[error("not a trace.dat file (no 0x17 0x08 0x44 \"tracing\" magic)")]
    NotTraceDat,
    /// A version this reader does not know.
    #[error("trace.dat version {0:?} is not supported (versions 6 and 7 are)")]
    Version(String),
    /// The file ends inside its metadata.
    #[error("file truncated: {what} needs {need} bytes at offset {offset}, the file has {len}")]
    Short {
        /// What was being read.
        what: String,
        /// Where.
        offset: u64,
        /// How many bytes it needs.
        need: u64,
        /// The file's length.
        len: u64,
    },
    /// A CPU's data runs past the end of the file (a recording cut short);
    /// the whole pages before the end were handed out first.
    #[error("cpu {cpu}: data truncated: {size} bytes at offset {offset}, the file ends at {len}")]
    Truncated {
        /// The CPU.
        cpu: u32,
        /// Data offset from the flyrecord table or BUFFER option.
        offset: u64,
        /// Data size from the table.
        size: u64,
        /// The file's length.
        len: u64,
    },
    /// Something in the file is not what the format allows.
    #[error("bad trace.dat: {0}")]
    Format(String),
    /// A compressed block could not be decompressed.
    #[error("{algo} block at offset {offset}: {msg}")]
    Decompress {
        /// Compression algorithm.
        algo: &'static str,
        /// Where the block is.
        offset: u64,
        /// What went wrong.
        msg: String,
    },
    /// A compression algorithm this reader does not have.
    #[error("compression {0:?} is not supported (zlib and zstd are)")]
    Compression(String),
    /// A writer call that does not fit the file being written.
    #[error("writer: {0}")]
    Usage(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |reason| Error::Io { context, reason }
    }
}
