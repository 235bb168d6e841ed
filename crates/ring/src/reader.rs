//! Readers of `per_cpu/cpuN/trace_pipe_raw` under one tracefs instance.
//!
//! Mirrors the reader side of kernel/trace/trace.c (`tracing_buffers_read`,
//! `tracing_buffers_splice_read`, `tracing_buffers_poll`): each read hands
//! over one sub-buffer, consuming it. `splice` only ever moves *full*
//! sub-buffers, so live reading uses it and never sees the same half-filled
//! page twice; plain `read` also returns partially filled pages and is used
//! only when draining at the end. A read of 0 bytes or `EAGAIN` while
//! tracing is live means "nothing now, poll again", never end of file.
//! `poll` wakes when the instance's `buffer_percent` is reached; setting it
//! is up to the instance owner (ktrace-tracefs). This module does not decode
//! pages ([`crate::Page`]) or order them ([`crate::Merger`]).

use crate::{CpuStats, Error, Page, PageLayout};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
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
    pipe: Option<(OwnedFd, OwnedFd)>,
    subbuf_size: usize,
}

fn io_err(path: &Path, e: Errno) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

impl CpuReader {
    /// Opens `<instance>/per_cpu/cpu<cpu>/trace_pipe_raw`.
    pub fn open(instance: &Path, cpu: usize, layout: &PageLayout) -> Result<CpuReader, Error> {
        let path = instance.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let fd = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err(&path, e))?;
        let pipe = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)
            .ok()
            .and_then(|(r, w)| {
                if layout.subbuf_size > 65536 {
                    rustix::pipe::fcntl_setpipe_size(&w, layout.subbuf_size).ok()?;
                }
                Some((r, w))
            });
        Ok(CpuReader {
            cpu,
            path,
            fd,
            pipe,
            subbuf_size: layout.subbuf_size,
        })
    }

    /// The CPU this reads.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Takes one *full* sub-buffer if the kernel has one, into `buf`
    /// (resized to the page). Returns false when there is none now.
    pub fn read_full(&mut self, buf: &mut Vec<u8>) -> Result<bool, Error> {
        let Some((r, w)) = &self.pipe else {
            return self.read_partial(buf);
        };
        let n = match rustix::pipe::splice(
            &self.fd,
            None,
            w,
            None,
            self.subbuf_size,
            SpliceFlags::NONBLOCK,
        ) {
            Ok(0) | Err(Errno::AGAIN) | Err(Errno::INTR) => return Ok(false),
            Ok(n) => n,
            Err(Errno::INVAL) | Err(Errno::NOSYS) => {
                // no splice here: fall back to read() from now on
                self.pipe = None;
                return self.read_partial(buf);
            }
            Err(e) => return Err(io_err(&self.path, e)),
        };
        buf.clear();
        buf.resize(n, 0);
        let mut got = 0;
        while got < n {
            match rustix::io::read(r, &mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
                Err(e) => return Err(io_err(&self.path, e)),
            }
        }
        buf.truncate(got);
        Ok(got > 0)
    }

    /// Takes whatever the kernel has, partial pages included (use when
    /// draining). Returns false when there is nothing.
    pub fn read_partial(&mut self, buf: &mut Vec<u8>) -> Result<bool, Error> {
        buf.clear();
        buf.resize(self.subbuf_size, 0);
        match rustix::io::read(&self.fd, &mut buf[..]) {
            Ok(0) | Err(Errno::AGAIN) | Err(Errno::INTR) => {
                buf.clear();
                Ok(false)
            }
            Ok(n) => {
                buf.truncate(n);
                Ok(true)
            }
            Err(e) => Err(io_err(&self.path, e)),
        }
    }
}

/// Readers for every CPU of an instance.
#[derive(Debug)]
pub struct Reader {
    readers: Vec<CpuReader>,
    layout: PageLayout,
    root: PathBuf,
}

impl Reader {
    /// Opens `per_cpu/cpu*/trace_pipe_raw` of the instance at `instance`
    /// (e.g. `/sys/kernel/tracing/instances/ktrace_1234`).
    pub fn open(instance: &Path, layout: PageLayout) -> Result<Reader, Error> {
        let dir = instance.join("per_cpu");
        let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        let mut cpus: Vec<usize> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        let readers = cpus
            .into_iter()
            .map(|c| CpuReader::open(instance, c, &layout))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Reader {
            readers,
            layout,
            root: instance.to_path_buf(),
        })
    }

    /// The CPUs being read.
    pub fn cpus(&self) -> Vec<usize> {
        self.readers.iter().map(|r| r.cpu).collect()
    }

    /// The page layout.
    pub fn layout(&self) -> PageLayout {
        self.layout
    }

    /// The instance directory.
    pub fn root(&self) -> &Path {
        &self.root
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
            Err(e) => Err(io_err(&self.root, e)),
        }
    }

    /// The instance's trace clock now, from the `now ts:` line of the first
    /// CPU's `stats` (see [`CpuStats::now_ts`]); `None` when unreadable.
    pub fn clock_now(&self) -> Option<u64> {
        let cpu = self.readers.first()?.cpu;
        let path = self.root.join(format!("per_cpu/cpu{cpu}/stats"));
        CpuStats::now_ts(&std::fs::read_to_string(path).ok()?)
    }

    /// One reading round after the trace clock read `now`: from each CPU,
    /// full pages and then what is committed on the page the kernel is
    /// writing, until the CPU has nothing more, or a page based at `now` or
    /// later was read (everything older from that CPU is then in hand), or
    /// `max_per_cpu` pages were read. Without `now`, one partial read ends a
    /// CPU's turn. Returns the pages read and, when some CPU's budget ran
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
        for r in &mut self.readers {
            let mut n = 0;
            loop {
                let mut buf = Vec::with_capacity(layout.subbuf_size);
                let partial = if r.read_full(&mut buf)? {
                    false
                } else if r.read_partial(&mut buf)? {
                    true
                } else {
                    break;
                };
                n += 1;
                // the page's base stamp: no record on it is older, and
                // reading it costs nothing (the records are walked once,
                // by the consumer)
                let first = Page::parse(layout, &buf).ok().map(|p| p.timestamp);
                if !sink(RawPage {
                    cpu: r.cpu,
                    bytes: buf,
                }) {
                    return Ok((total + n, behind));
                }
                let done = match (now, first) {
                    (Some(now), Some(first)) => first >= now,
                    (None, _) => partial,
                    (Some(_), None) => false,
                };
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
        for r in &mut self.readers {
            loop {
                let mut buf = Vec::with_capacity(self.layout.subbuf_size);
                if !(r.read_full(&mut buf)? || r.read_partial(&mut buf)?) {
                    break;
                }
                total += 1;
                if !sink(RawPage {
                    cpu: r.cpu,
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
    /// A sub-buffer.
    Page(RawPage),
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
/// Memory is bounded by `capacity` pages plus one round of at most
/// `max_per_cpu` pages per CPU in the consumer. When the consumer falls
/// behind, the thread blocks, the kernel buffer fills and the kernel
/// overwrites (overwrite mode) or drops (non-overwrite) events, which shows
/// up in page missed counts and [`crate::CpuStats`].
#[derive(Debug)]
pub struct Pipeline {
    /// Receives pages and round markers.
    pub rx: Receiver<PipelineMsg>,
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
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle =
            std::thread::spawn(move || run(&mut reader, &tx, &stop2, max_per_cpu, poll_interval));
        Pipeline {
            rx,
            stop,
            handle: Some(handle),
        }
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
    stop: &AtomicBool,
    max_per_cpu: usize,
    poll_interval: Duration,
) {
    let mut send = |p: RawPage| tx.send(PipelineMsg::Page(p)).is_ok();
    loop {
        if stop.load(Ordering::SeqCst) {
            let msg = match reader.drain(&mut send) {
                Ok(_) => PipelineMsg::Round { complete_to: None },
                Err(e) => PipelineMsg::Failed(e),
            };
            let _ = tx.send(msg);
            return;
        }
        // the clock first: every record stamped before it is committed by
        // the time its CPU is read below
        let now = reader.clock_now();
        let (complete_to, behind) = match reader.read_round(max_per_cpu, now, &mut send) {
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
