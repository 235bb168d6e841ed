//! ktrace-ring: decoding of the kernel's per-CPU ring-buffer sub-buffer pages.
//!
//! Mirrors kernel/trace/ring_buffer.c (page header, commit and lost-events
//! flags, record headers, time extends and stamps, padding) and the reader
//! side of `per_cpu/cpuN/trace_pipe_raw` in kernel/trace/trace.c. It knows
//! nothing about event formats (that is ktrace-event) and opens no files:
//! ktrace-tracefs opens the per-CPU buffers and reads `header_page` and the
//! stats; this crate works on the descriptors and text handed to it.
//!
//! # Pieces
//!
//! - [`PageLayout`] from `events/header_page` (+ [`check_header_event`]),
//!   [`Page::parse`] and [`Page::records`]: pure decoding, no I/O.
//! - [`CpuReader`] / [`Reader`]: non-blocking readers of every CPU's
//!   `trace_pipe_raw` (descriptors opened by ktrace-tracefs). Live, they read
//!   full sub-buffers, then what is committed on the page being written,
//!   once per round, and wait with `poll` (which wakes when
//!   `buffer_percent` of the buffer is filled, set by whoever owns the
//!   instance); [`Reader::drain`] takes what is left at the end. A read
//!   returning 0 while tracing is live means "poll again".
//! - [`Pipeline`]: a reader thread feeding a bounded channel, so a slow
//!   consumer makes the kernel overwrite (counted, never hidden) instead of
//!   ktrace growing without limit; page buffers come back to it through
//!   [`Pipeline::recycle`] (no allocation per page).
//! - [`Merger`]: k-way merge of the per-CPU record streams by time stamp
//!   ([`Merger::flush`] everything buffered, [`Merger::flush_until`] a time
//!   limit), and [`merge_streams`] for files of captured pages (about one
//!   page per CPU in memory).
//! - The stream crate (ktrace-stream) wires these to tracefs: it is the
//!   place to look for a complete live reader.
//!
//! # Live reading
//!
//! ```no_run
//! use ktrace_ring::{CpuReader, Merged, Merger, PageLayout, Pipeline, PipelineMsg, Reader};
//! use std::time::Duration;
//! # fn fds() -> Vec<(usize, std::os::fd::OwnedFd)> { Vec::new() }
//! let layout = PageLayout::native(4096); // from events/header_page
//! let readers = fds()
//!     .into_iter()
//!     .map(|(cpu, fd)| CpuReader::new(cpu, fd, format!("cpu{cpu}").into(), &layout))
//!     .collect();
//! let clock = Box::new(|| None); // the instance's `now ts`, from tracefs
//! let pipeline = Pipeline::spawn(Reader::new(readers, layout, clock), 4, 64, Duration::from_millis(100));
//! let mut merger = Merger::new(layout);
//! // ... enable the events; on Ctrl-C / child exit: disable them, then
//! // pipeline.stop() so the thread drains the partial pages and closes.
//! while let Ok(msg) = pipeline.rx.recv() {
//!     match msg {
//!         PipelineMsg::Pages(pages) => pages.into_iter().for_each(|p| merger.push(p.cpu, p.bytes)),
//!         // print what every CPU is known to be complete up to
//!         PipelineMsg::Round { complete_to } => merger.flush_until(complete_to.unwrap_or(u64::MAX), &mut |m| match m {
//!             Merged::Record { cpu, ts, data } => { /* print */ }
//!             Merged::Lost { cpu, missed } => { /* report, count */ }
//!             Merged::Bad { cpu, error } => { /* report */ }
//!         }),
//!         PipelineMsg::Failed(e) => return Err(e),
//!     }
//!     while let Some(page) = merger.take_spare_page() {
//!         pipeline.recycle(page);
//!     }
//! }
//! pipeline.join();
//! # Ok::<(), ktrace_ring::Error>(())
//! ```
//!
//! Ordering: before each round the reader reads the instance's trace
//! clock (`now ts` of `per_cpu/cpuN/stats`), then reads every CPU until it
//! has nothing more or a page based at or after that moment, so every
//! record stamped before it is in hand: `complete_to`. Records up to it are
//! printed in order; later ones wait in the [`Merger`] for the next round.
//! The output is then in time order across CPUs, like the kernel's `trace`,
//! with a rare event shown within one poll interval. Set `buffer_percent`
//! on the instance (e.g. 25–50) so polls wake for batches, not every event.
//!
//! # Example: decoding a captured page
//!
//! ```
//! use ktrace_ring::{Endian, Page, PageLayout};
//! let layout = PageLayout::native(4096);
//! let mut page = vec![0u8; 4096];
//! page[0..8].copy_from_slice(&1000u64.to_ne_bytes());
//! page[8..16].copy_from_slice(&8u64.to_ne_bytes()); // commit: 8 bytes
//! page[16..20].copy_from_slice(&(1u32 | 3 << 5).to_ne_bytes()); // 4-byte record, delta 3
//! let p = Page::parse(layout, &page).unwrap();
//! let r: Vec<_> = p.records().map(Result::unwrap).collect();
//! assert_eq!(r[0].ts, 1003);
//! # let _ = Endian::Little;
//! ```

mod merge;
mod page;
mod reader;

pub use merge::{Merged, Merger, merge_streams, read_full};
pub use page::{
    Missed, Page, PageLayout, RB_MISSED_EVENTS, RB_MISSED_STORED, Record, Records, TYPE_DATA_MAX,
    TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP, check_header_event,
};
pub use reader::{Clock, CpuReader, Pipeline, PipelineMsg, RawPage, Reader};

use std::path::PathBuf;

/// Byte order of the traced kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Little endian (x86_64, arm64 as usually run).
    Little,
    /// Big endian.
    Big,
}

impl Endian {
    /// The byte order of this machine.
    pub fn native() -> Endian {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }

    /// Reads a u16 from the first 2 bytes of `b` (which must hold them).
    #[inline]
    pub fn u16(self, b: &[u8]) -> u16 {
        let a: [u8; 2] = b[..2].try_into().unwrap_or_default();
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    /// Reads a u32 from the first 4 bytes of `b`.
    #[inline]
    pub fn u32(self, b: &[u8]) -> u32 {
        let a: [u8; 4] = b[..4].try_into().unwrap_or_default();
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    /// Reads a u64 from the first 8 bytes of `b`.
    #[inline]
    pub fn u64(self, b: &[u8]) -> u64 {
        let a: [u8; 8] = b[..8].try_into().unwrap_or_default();
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// Errors from decoding pages and reading the per-CPU buffers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `events/header_page` is not in the expected form.
    #[error("header_page: {0}")]
    HeaderPage(String),
    /// `events/header_event` describes a record header we do not decode.
    #[error("header_event: {0}")]
    HeaderEvent(String),
    /// A page is malformed.
    #[error("page: {0}")]
    Page(String),
    /// A file could not be opened, read or polled.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said (in the message, not repeated as
        /// a source: a chain printer would show it twice).
        reason: std::io::Error,
    },
}
