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

use crate::{Error, PageLayout};
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

    /// Reads up to `max_per_cpu` full pages from each CPU, passing each to
    /// `sink`. Returns the number of pages read.
    pub fn read_full(
        &mut self,
        max_per_cpu: usize,
        sink: &mut dyn FnMut(RawPage) -> bool,
    ) -> Result<usize, Error> {
        self.read_with(max_per_cpu, false, sink)
    }

    /// Reads every page left, partial ones included, passing each to `sink`.
    pub fn drain(&mut self, sink: &mut dyn FnMut(RawPage) -> bool) -> Result<usize, Error> {
        self.read_with(usize::MAX, true, sink)
    }

    fn read_with(
        &mut self,
        max_per_cpu: usize,
        partial: bool,
        sink: &mut dyn FnMut(RawPage) -> bool,
    ) -> Result<usize, Error> {
        let mut total = 0;
        for r in &mut self.readers {
            let mut n = 0;
            while n < max_per_cpu {
                let mut buf = Vec::with_capacity(self.layout.subbuf_size);
                let got = if partial {
                    // full pages first, so a drain does not split them
                    r.read_full(&mut buf)? || r.read_partial(&mut buf)?
                } else {
                    r.read_full(&mut buf)?
                };
                if !got {
                    break;
                }
                n += 1;
                if !sink(RawPage {
                    cpu: r.cpu,
                    bytes: buf,
                }) {
                    return Ok(total + n);
                }
            }
            total += n;
        }
        Ok(total)
    }
}

/// What the reader thread of a [`Pipeline`] sends.
#[derive(Debug)]
pub enum PipelineMsg {
    /// A sub-buffer.
    Page(RawPage),
    /// Every page available at one moment has been sent: records up to here
    /// can be merged and printed.
    Round,
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
    /// Starts the reader thread. It polls every `poll_interval` at most,
    /// reads full pages while running and drains partial pages once
    /// [`Pipeline::stop`] is called.
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
        let stopping = stop.load(Ordering::SeqCst);
        let res = if stopping {
            reader.drain(&mut send)
        } else {
            reader.read_full(max_per_cpu, &mut send)
        };
        match res {
            Ok(n) => {
                if n > 0 && tx.send(PipelineMsg::Round).is_err() {
                    return;
                }
                if stopping {
                    let _ = tx.send(PipelineMsg::Round);
                    return;
                }
                if n == 0
                    && let Err(e) = reader.poll(poll_interval)
                {
                    let _ = tx.send(PipelineMsg::Failed(e));
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(PipelineMsg::Failed(e));
                return;
            }
        }
    }
}
