//! Readers of `per_cpu/cpuN/trace_pipe_raw` under one tracefs instance.
//!
//! Mirrors the reader side of kernel/trace/trace.c (`tracing_buffers_read`,
//! `tracing_buffers_poll`): each read hands over one sub-buffer, consuming
//! it. A full sub-buffer is swapped out of the ring whole
//! (`ring_buffer_read_page`) and copied to user space once; when only the
//! page the kernel is writing is left, a read takes what is committed on it
//! so far, and the next read continues after it. Reads are paced by
//! `buffer_percent` wakeups (and one read of the page being written per
//! round), so partially filled pages stay rare. `splice` was used before:
//! it moves the same full pages but allocates a page and goes through a
//! pipe for each (measured: more CPU per million events). A read of 0
//! bytes or `EAGAIN` while tracing is live means "nothing now, poll again",
//! never end of file.
//! `poll` wakes when the instance's `buffer_percent` is reached; setting it
//! is up to the instance owner (ktrace-tracefs). This module does not decode
//! pages ([`crate::Page`]) or order them ([`crate::Merger`]).

use crate::{Error, Page, PageLayout};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::time::Duration;

/// One sub-buffer read from one CPU.
#[derive(Debug, Clone)]
pub struct RawPage {
    /// The CPU it came from.
    pub cpu: usize,
    /// The bytes (normally a whole sub-buffer).
    pub bytes: Vec<u8>,
}

/// A non-blocking reader of one CPU's `trace_pipe_raw`.
#[derive(Debug)]
pub struct CpuReader {
    cpu: usize,
    path: PathBuf,
    fd: OwnedFd,
    subbuf_size: usize,
}

fn io_err(path: &Path, e: Errno) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        reason: e.into(),
    }
}

impl CpuReader {
    /// A reader of one CPU's `trace_pipe_raw`, already opened non-blocking
    /// (ktrace-tracefs opens it); `path` names it in messages.
    pub fn new(cpu: usize, fd: OwnedFd, path: PathBuf, layout: &PageLayout) -> CpuReader {
        CpuReader {
            cpu,
            path,
            fd,
            subbuf_size: layout.subbuf_size,
        }
    }

    /// The CPU this reads.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Takes the next sub-buffer into `buf` (resized to what was read): a
    /// full one when the kernel has one, else what is committed on the page
    /// being written. Returns false when there is nothing now.
    pub fn read_page(&mut self, buf: &mut Vec<u8>) -> Result<bool, Error> {
        // the read fills the buffer's spare capacity (no zeroing first); a
        // read of trace_pipe_raw hands over at most one sub-buffer however
        // large the buffer is (tracing_buffers_read())
        buf.clear();
        buf.reserve_exact(self.subbuf_size);
        match rustix::io::read(&self.fd, rustix::buffer::spare_capacity(buf)) {
            Ok(0) | Err(Errno::AGAIN) | Err(Errno::INTR) => {
                buf.clear();
                Ok(false)
            }
            Ok(_) => Ok(true),
            Err(e) => Err(io_err(&self.path, e)),
        }
    }
}

/// The trace clock of the instance being read, now (see
/// [`Reader::new`]); `None` when it cannot be read.
pub type Clock = Box<dyn FnMut() -> Option<u64> + Send>;

/// Readers for every CPU of an instance.
pub struct Reader {
    readers: Vec<CpuReader>,
    layout: PageLayout,
    clock: Clock,
    /// Page buffers handed back by the consumer, reused for the next reads.
    free: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("readers", &self.readers)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Readers of the given CPUs' `trace_pipe_raw` files, with `clock`
    /// giving the instance's trace clock now (the `now ts:` of a CPU's
    /// `stats`, read through ktrace-tracefs), which orders the rounds.
    pub fn new(readers: Vec<CpuReader>, layout: PageLayout, clock: Clock) -> Reader {
        Reader {
            readers,
            layout,
            clock,
            free: Vec::new(),
        }
    }

    /// A page buffer: a recycled one when there is one.
    fn buffer(&mut self) -> Vec<u8> {
        self.free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.layout.subbuf_size))
    }

    /// The CPUs being read.
    pub fn cpus(&self) -> Vec<usize> {
        self.readers.iter().map(|r| r.cpu).collect()
    }

    /// The page layout.
    pub fn layout(&self) -> PageLayout {
        self.layout
    }

    /// Waits until some CPU's buffer is readable or `timeout` passes.
    pub fn poll(&self, timeout: Duration) -> Result<(), Error> {
        let mut fds: Vec<PollFd<'_>> = self
            .readers
            .iter()
            .map(|r| PollFd::new(&r.fd, PollFlags::IN))
            .collect();
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(e) => Err(Error::Io {
                path: "poll of the per-CPU buffers".into(),
                reason: e.into(),
            }),
        }
    }

    /// The instance's trace clock now (the [`Clock`] given to
    /// [`Reader::new`]).
    pub fn clock_now(&mut self) -> Option<u64> {
        (self.clock)()
    }

    /// One reading round after the trace clock read `now`: from each CPU,
    /// full pages and then what is committed on the page the kernel is
    /// writing, until the CPU has nothing more, or a page based at `now` or
    /// later was read (everything older from that CPU is then in hand), or
    /// `max_per_cpu` pages were read. Without `now`, a CPU is read until it
    /// has nothing or its budget runs out. Returns the pages read and, when some CPU's budget ran
    /// out first, the smallest base stamp of the last page read from such a
    /// CPU: its unread records are not older than that.
    pub fn read_round(
        &mut self,
        max_per_cpu: usize,
        now: Option<u64>,
        sink: &mut dyn FnMut(RawPage) -> bool,
    ) -> Result<(usize, Option<u64>), Error> {
        let mut total = 0;
        let mut behind: Option<u64> = None;
        let layout = self.layout;
        for i in 0..self.readers.len() {
            let mut n = 0;
            loop {
                let mut buf = self.buffer();
                let r = &mut self.readers[i];
                if !r.read_page(&mut buf)? {
                    self.free.push(buf);
                    break;
                }
                n += 1;
                // the page's base stamp: no record on it is older, and
                // reading it costs nothing (the records are walked once,
                // by the consumer)
                let first = Page::parse(layout, &buf).ok().map(|p| p.timestamp);
                if !sink(RawPage {
                    cpu: self.readers[i].cpu,
                    bytes: buf,
                }) {
                    return Ok((total + n, behind));
                }
                // without a clock, a CPU is read until it has nothing or its
                // budget runs out
                let done = matches!((now, first), (Some(now), Some(first)) if first >= now);
                if done {
                    break;
                }
                if n >= max_per_cpu {
                    let first = first.unwrap_or(0);
                    behind = Some(behind.map_or(first, |b| b.min(first)));
                    break;
                }
            }
            total += n;
        }
        Ok((total, behind))
    }

    /// Reads every page left, partial ones included, passing each to `sink`
    /// (full pages first, so a drain does not split them). Returns the
    /// number of pages read.
    pub fn drain(&mut self, sink: &mut dyn FnMut(RawPage) -> bool) -> Result<usize, Error> {
        let mut total = 0;
        for i in 0..self.readers.len() {
            loop {
                let mut buf = self.buffer();
                let r = &mut self.readers[i];
                if !r.read_page(&mut buf)? {
                    self.free.push(buf);
                    break;
                }
                total += 1;
                if !sink(RawPage {
                    cpu: self.readers[i].cpu,
                    bytes: buf,
                }) {
                    return Ok(total);
                }
            }
        }
        Ok(total)
    }
}

/// What the reader thread of a [`Pipeline`] sends.
#[derive(Debug)]
pub enum PipelineMsg {
    /// Sub-buffers read from one CPU in a row (at most `max_per_cpu` of
    /// [`Pipeline::spawn`]): one message, so the consumer wakes once per
    /// batch rather than once per page.
    Pages(Vec<RawPage>),
    /// A reading round has been sent. `complete_to: Some(t)`: every record
    /// with a time stamp up to `t` has now been delivered, from every CPU
    /// (the trace clock read `t` before the round, and each CPU was read to
    /// its end), so they can be merged and printed in order; later ones may
    /// still be joined by older records of another CPU. `None`: no such
    /// bound is known (the clock could not be read, or this is the final
    /// drain): print everything delivered.
    Round {
        /// Time stamp up to which the delivered records are complete.
        complete_to: Option<u64>,
    },
    /// The reader failed; nothing more follows.
    Failed(Error),
}

/// A reader thread feeding a bounded channel.
///
/// Memory is bounded by `capacity` messages of at most `max_per_cpu` pages
/// each plus one round of at most `max_per_cpu` pages per CPU in the
/// consumer. When the consumer falls
/// behind, the thread blocks, the kernel buffer fills and the kernel
/// overwrites (overwrite mode) or drops (non-overwrite) events, which shows
/// up in page missed counts and the instance's `per_cpu/cpuN/stats`.
/// Page buffers go back to the thread through [`Pipeline::recycle`], so a
/// steady run allocates none.
#[derive(Debug)]
pub struct Pipeline {
    /// Receives pages and round markers.
    pub rx: Receiver<PipelineMsg>,
    free: Sender<Vec<u8>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Pipeline {
    /// Starts the reader thread. Each round it reads the trace clock, then
    /// every CPU up to that moment ([`Reader::read_round`], at most
    /// `max_per_cpu` pages each), and sends [`PipelineMsg::Round`]; when it
    /// has caught up it polls for `buffer_percent` or `poll_interval`. Once
    /// [`Pipeline::stop`] is called it drains everything left and closes.
    pub fn spawn(
        mut reader: Reader,
        capacity: usize,
        max_per_cpu: usize,
        poll_interval: Duration,
    ) -> Pipeline {
        let (tx, rx) = sync_channel(capacity.max(1));
        let (free, free_rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let keep = (capacity.max(1) + reader.readers.len().max(1)) * max_per_cpu.max(1);
        let handle = std::thread::spawn(move || {
            run(
                &mut reader,
                &tx,
                (&free_rx, keep),
                &stop2,
                max_per_cpu,
                poll_interval,
            )
        });
        Pipeline {
            rx,
            free,
            stop,
            handle: Some(handle),
        }
    }

    /// Hands a page buffer back to the reader thread for reuse.
    pub fn recycle(&self, page: Vec<u8>) {
        let _ = self.free.send(page);
    }

    /// Asks the thread to drain what is left and finish; the channel closes
    /// after the last page.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Waits for the thread to finish (call after [`Pipeline::stop`] and
    /// after the channel closed).
    pub fn join(mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(
    reader: &mut Reader,
    tx: &SyncSender<PipelineMsg>,
    (free, keep): (&Receiver<Vec<u8>>, usize),
    stop: &AtomicBool,
    max_per_cpu: usize,
    poll_interval: Duration,
) {
    let mut batch = Batch {
        tx,
        pages: Vec::new(),
        max: max_per_cpu.max(1),
    };
    loop {
        while let Ok(b) = free.try_recv() {
            if reader.free.len() < keep {
                reader.free.push(b);
            }
        }
        if stop.load(Ordering::SeqCst) {
            let res = reader.drain(&mut |p| batch.push(p));
            let msg = match res {
                Ok(_) => PipelineMsg::Round { complete_to: None },
                Err(e) => PipelineMsg::Failed(e),
            };
            if batch.send() {
                let _ = tx.send(msg);
            }
            return;
        }
        // the clock first: every record stamped before it is committed by
        // the time its CPU is read below
        let now = reader.clock_now();
        let res = reader.read_round(max_per_cpu, now, &mut |p| batch.push(p));
        if !batch.send() {
            return;
        }
        let (complete_to, behind) = match res {
            Ok((_, behind)) => match (now, behind) {
                (Some(now), Some(b)) => (Some(now.min(b)), true),
                (Some(now), None) => (Some(now), false),
                (None, b) => (None, b.is_some()),
            },
            Err(e) => {
                let _ = tx.send(PipelineMsg::Failed(e));
                return;
            }
        };
        if tx.send(PipelineMsg::Round { complete_to }).is_err() {
            return;
        }
        // caught up with every CPU: wait for the buffer to fill
        // (`buffer_percent`) or `poll_interval`, whichever comes first
        if !behind && let Err(e) = reader.poll(poll_interval) {
            let _ = tx.send(PipelineMsg::Failed(e));
            return;
        }
    }
}

/// Pages on their way to the consumer, sent a CPU's run at a time.
struct Batch<'a> {
    tx: &'a SyncSender<PipelineMsg>,
    pages: Vec<RawPage>,
    max: usize,
}

impl Batch<'_> {
    /// Adds a page; sends the batch when it changes CPU or is full.
    /// False when the consumer is gone.
    fn push(&mut self, p: RawPage) -> bool {
        if self.pages.last().is_some_and(|l| l.cpu != p.cpu) && !self.send() {
            return false;
        }
        self.pages.push(p);
        self.pages.len() < self.max || self.send()
    }

    /// Sends what is batched. False when the consumer is gone.
    fn send(&mut self) -> bool {
        if self.pages.is_empty() {
            return true;
        }
        let pages = std::mem::replace(&mut self.pages, Vec::with_capacity(self.max));
        self.tx.send(PipelineMsg::Pages(pages)).is_ok()
    }
}
