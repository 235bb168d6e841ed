//! Where `ktrace trace` writes its events: stdout or `-o FILE`, opened and
//! checked before anything is created in tracefs. Anything that can stop
//! taking bytes is written by a thread of its own so that a reader that
//! stops reading (a full pipe, a FIFO nobody opened, a slow terminal) never
//! keeps ktrace from seeing Ctrl-C, SIGTERM or the end of `-d`; a regular
//! file on a local file system, which takes a write or refuses it at once,
//! is written by the run's own thread.
//!
//! The run loop writes into an [`Output`] like into any `Write`; full
//! buffers go to the file, or to the writer thread through a bounded
//! channel. When the channel is full, the writer waits, asking its stop
//! check every few milliseconds; once the check says stop *and* the writer
//! thread has written nothing for [`STALL`] (a reader that went away, a FIFO
//! nobody opened), writes fail with [`Stopped`] and the run ends. An output
//! that still moves (a file, a slow but live pipe) is never given up:
//! Ctrl-C ends tracing, not the writing of what was traced. The first error
//! (a full disk, a closed pipe) is kept and returned by every later write
//! and by [`Output::finish`]. It is not the formatting of events
//! (that is the sinks) and does not decide when to stop (that is the caller,
//! through the stop check).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes gathered before a buffer is handed to the writer thread.
const BUFFER: usize = 1 << 18;
/// Bytes gathered before a buffer is written to a local regular file by
/// the run's own thread: fewer, larger writes, since each write after a
/// pause spent formatting starts with the file system's code and data cold
/// (a live run writes its rounds' text, about 100 MB per million events,
/// a round at a time). Measured on the 6.18 host (ext4): 98.6 MB of event
/// text written at a steady pace over 6 s from a buffer just filled, time
/// inside write(2), three runs each: 256 KiB 37, 38, 39 ms; 512 KiB 30,
/// 32, 30 ms; 1 MiB 24, 26, 25 ms. (2 MiB writes cost 215 and 242 ms of
/// system time in the same test; why was not looked into.)
const DIRECT_BUFFER: usize = 1 << 20;
/// How far past its writes a local file's blocks are reserved at a time
/// (`fallocate` keeping the size, see [`Direct`]).
const AHEAD: u64 = 4 << 20;
/// Room past a buffer's size for the line that crosses it, so a buffer is
/// never reallocated (and copied) on its way to the writer thread.
const SLACK: usize = 1 << 14;
/// Buffers the channel to the writer thread holds.
const IN_FLIGHT: usize = 8;
/// How often a blocked writer asks its stop check.
const TICK: Duration = Duration::from_millis(10);
/// How long an output must have written nothing, once a stop is asked
/// for, before what is left is given up.
const STALL: Duration = Duration::from_millis(500);

/// A stop check: true once the run must end (a signal, the deadline).
pub type StopCheck = Box<dyn Fn() -> bool + Send>;

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Standard output.
    Stdout,
    /// A file, created or truncated (a FIFO is opened for writing).
    File(PathBuf),
}

impl Target {
    /// What to call it in messages.
    pub fn describe(&self) -> String {
        match self {
            Target::Stdout => "standard output".to_string(),
            Target::File(p) => p.display().to_string(),
        }
    }
}

/// Opens `target` for writing, before the session creates anything: a
/// directory, a missing directory, a read-only file system, a file another
/// ktrace writes or a FIFO without a reader (waited for while `stop` says
/// go on) are refused here. A file is not truncated yet: see
/// [`OutFile::start`](crate::outfile::OutFile::start).
pub fn open_target(
    target: &Target,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<(File, Option<crate::outfile::OutFile>)> {
    match target {
        Target::Stdout => {
            let fd = rustix::io::dup(std::io::stdout())?;
            Ok((File::from(fd), None))
        }
        Target::File(p) => {
            let out = crate::outfile::OutFile::in_place(p, stop)?;
            Ok((out.file()?, Some(out)))
        }
    }
}

/// Opens a FIFO for writing without blocking in `open`: while nobody has it
/// open for reading, waits and asks `stop`.
pub(crate) fn open_fifo(path: &Path, stop: &dyn Fn() -> bool) -> anyhow::Result<File> {
    let mut said = false;
    loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
        {
            Ok(f) => {
                // Blocking writes from here on (the writer thread owns them).
                rustix::fs::fcntl_setfl(&f, rustix::fs::OFlags::empty())?;
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
                if !said {
                    crate::say!(
                        "waiting for a reader of the FIFO {} (Ctrl-C to give up)",
                        path.display()
                    );
                    said = true;
                }
                if stop() {
                    anyhow::bail!("no reader opened the FIFO {}", path.display());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => anyhow::bail!(
                "cannot write events to {}: {}",
                path.display(),
                describe(&e)
            ),
        }
    }
}

/// The error of a write given up because the run is stopping while the
/// output is not being read (not an I/O failure of the destination).
#[derive(Debug)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped while the output was not being read")
    }
}

impl std::error::Error for Stopped {}

/// Writes all of `data` to `file`; returns how many bytes it took, and the
/// error that stopped it.
fn write_counted(file: &mut File, data: &[u8]) -> (usize, io::Result<()>) {
    let mut done = 0;
    while done < data.len() {
        match file.write(&data[done..]) {
            Ok(0) => return (done, Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

/// Whether data written to `file` can still fail after write(2) took it,
/// when it is written back: network and FUSE file systems (NFS, SMB/CIFS,
/// Ceph, 9p, AFS, FUSE), whose server may be full or gone. Local file
/// systems reserve the space at write(2) and report a full disk there.
fn fails_late(file: &File) -> bool {
    const LATE: [u32; 8] = [
        0x6969,      // NFS
        0xfe53_4d42, // SMB2
        0xff53_4d42, // CIFS
        0x517b,      // SMB
        0x00c3_6400, // Ceph
        0x0102_1997, // 9p
        0x5346_414f, // AFS
        0x6573_5546, // FUSE
    ];
    // the magic's 32 bits, whether f_type is 64 bits wide or 32 (arm)
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstatfs(file).is_ok_and(|s| LATE.contains(&(s.f_type as u32)))
}

/// Whether `e` is [`Stopped`].
pub fn is_stopped(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Stopped>())
}

/// An I/O error in words, without Rust's "(os error N)" suffix.
pub fn describe(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// What reached the destination, counted by the writer thread from the
/// marks the run put where each event starts ([`Output::mark`]): an event
/// counts once every byte of it was accepted by the destination (a pipe
/// closed by its reader, a full disk: the events written before, not the
/// ones formatted).
#[derive(Debug, Default, Clone)]
pub struct Written {
    /// Events written whole.
    pub events: u64,
    /// The same, by event type id.
    pub per_id: Vec<u64>,
    /// The event whose bytes are being written (its end is the next mark,
    /// or the end of the output).
    open: Option<u16>,
}

impl Written {
    #[inline(always)]
    fn count(&mut self, id: u16) {
        let i = usize::from(id);
        match self.per_id.get_mut(i) {
            Some(n) => *n += 1,
            None => {
                self.per_id.resize(i + 1, 0);
                self.per_id[i] = 1;
            }
        }
    }

    /// A buffer with `marks` (in the order of their offsets) of which the
    /// first `accepted` bytes reached the destination: every event that
    /// started before one of those marks is whole.
    fn account(&mut self, marks: &[(u32, u16)], accepted: usize) {
        let started = marks.partition_point(|&(at, _)| at as usize <= accepted);
        let Some(&(_, last)) = marks[..started].last() else {
            return;
        };
        if let Some(before) = self.open.replace(last) {
            self.count(before);
            self.events += 1;
        }
        for &(_, id) in &marks[..started - 1] {
            self.count(id);
        }
        self.events += started as u64 - 1;
    }

    /// The output ended without an error: the last event is whole.
    fn close(&mut self) {
        if let Some(prev) = self.open.take() {
            self.count(prev);
            self.events += 1;
        }
    }
}

/// Where events start in a buffer: (offset, type id) in the order of the
/// offsets. Filled by index in a boxed slice grown ahead, not by
/// `Vec::push` (nor a `Vec`'s `IndexMut`), which in the size-optimised root
/// crate of the shipped binary is a call for every event (1.3% of a live
/// run's samples under perf).
#[derive(Default)]
struct Marks {
    at: Box<[(u32, u16)]>,
    n: usize,
}

impl Marks {
    #[inline(always)]
    fn add(&mut self, mark: (u32, u16)) {
        if self.n == self.at.len() {
            self.grow();
        }
        self.at[self.n] = mark;
        self.n += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let len = (self.at.len() * 2).max(1024);
        let mut at = std::mem::take(&mut self.at).into_vec();
        at.resize(len, (0, 0));
        self.at = at.into_boxed_slice();
    }

    fn as_slice(&self) -> &[(u32, u16)] {
        &self.at[..self.n]
    }

    fn clear(&mut self) {
        self.n = 0;
    }
}

/// A buffer on its way to the writer thread, with its marks.
type Chunk = (Vec<u8>, Marks);

/// The events' destination: a buffer in front of the file, or of a writer
/// thread.
pub struct Output {
    buf: Vec<u8>,
    /// Bytes gathered before `buf` is handed over ([`BUFFER`] or
    /// [`DIRECT_BUFFER`]).
    limit: usize,
    /// Where events start in `buf`.
    marks: Marks,
    writer: Writer,
    counted: Arc<Mutex<Written>>,
    failed: Arc<Mutex<Option<io::Error>>>,
    stop: StopCheck,
}

/// Who writes the full buffers.
enum Writer {
    /// A regular file on a local file system, which takes a write or
    /// refuses it at once and never stops moving: written by the run's own
    /// thread, while the bytes it just formatted are still in its cache.
    /// (Handing them to a thread on another CPU cost the reader about 9%
    /// of its CPU per million events: the copy into the page cache read
    /// every line across CPUs, and each buffer took a wakeup.)
    Direct(Direct),
    /// Anything that may stop taking bytes (a pipe, a FIFO, a terminal, a
    /// network file system): a writer thread.
    Thread(Thread),
}

/// A local regular file written by the run's own thread, its blocks
/// reserved [`AHEAD`] of the writes with `fallocate(FALLOC_FL_KEEP_SIZE)`:
/// a write into reserved blocks skips ext4's delayed-allocation bookkeeping
/// for every page (reserving space, quota, the extent cache), about a
/// quarter of write(2)'s time on the 6.18 host. The size stays what was
/// written; the blocks reserved past it are released when the output
/// ends (a truncate to the size it has, which frees them on ext4 and
/// btrfs; XFS frees them on close), and after a SIGKILL at most
/// [`AHEAD`] of them stay with the file, counted by `du`, never read.
struct Direct {
    file: File,
    /// Where the next write lands, and up to where blocks are reserved;
    /// `None` for a file opened to append, or once reserving failed (a
    /// file system without it, a full disk: the writes then say so).
    ahead: Option<(u64, u64)>,
}

impl Direct {
    fn new(file: File) -> Direct {
        let append =
            rustix::fs::fcntl_getfl(&file).map_or(true, |f| f.contains(rustix::fs::OFlags::APPEND));
        let ahead = if append {
            None
        } else {
            rustix::fs::seek(&file, rustix::fs::SeekFrom::Current(0))
                .ok()
                .map(|at| (at, at))
        };
        Direct { file, ahead }
    }

    /// Writes all of `data` (see [`write_counted`]), reserving blocks
    /// first when it goes past the reserved ones.
    fn write(&mut self, data: &[u8]) -> (usize, io::Result<()>) {
        if let Some((at, upto)) = self.ahead {
            let end = at + data.len() as u64;
            if end > upto {
                let want = end + AHEAD;
                let from = upto.max(at);
                match rustix::fs::fallocate(
                    &self.file,
                    rustix::fs::FallocateFlags::KEEP_SIZE,
                    from,
                    want - from,
                ) {
                    Ok(()) => self.ahead = Some((at, want)),
                    Err(_) => self.release(),
                }
            }
        }
        let (accepted, result) = write_counted(&mut self.file, data);
        if let Some((at, _)) = &mut self.ahead {
            *at += accepted as u64;
        }
        (accepted, result)
    }

    /// Frees the blocks reserved past the end of the file; reserves no
    /// more.
    fn release(&mut self) {
        if self.ahead.take().is_some()
            && let Ok(st) = rustix::fs::fstat(&self.file)
        {
            let _ = rustix::fs::ftruncate(&self.file, st.st_size as u64);
        }
    }
}

/// The writer thread's end of an [`Output`].
struct Thread {
    tx: Option<SyncSender<Chunk>>,
    recycle: Receiver<Chunk>,
    done: Receiver<()>,
    handle: Option<JoinHandle<()>>,
    /// Buffers the writer thread has finished with.
    written: Arc<AtomicU64>,
}

/// Whether an output stopped moving: the writer thread's count of
/// finished buffers has not changed for [`STALL`].
struct Stall {
    seen: u64,
    since: Instant,
}

impl Stall {
    fn new(written: &AtomicU64) -> Stall {
        Stall {
            seen: written.load(Ordering::Relaxed),
            since: Instant::now(),
        }
    }

    fn stalled(&mut self, written: &AtomicU64) -> bool {
        let now = written.load(Ordering::Relaxed);
        if now != self.seen {
            self.seen = now;
            self.since = Instant::now();
            return false;
        }
        self.since.elapsed() >= STALL
    }
}

/// Whether `file` is written by the run's own thread ([`Writer::Direct`]):
/// a regular file on a file system that does not fail late.
fn written_directly(file: &File) -> bool {
    rustix::fs::fstat(file)
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file())
        && !fails_late(file)
}

/// Starts the writer thread on `file`.
fn spawn_writer(
    file: File,
    counted: &Arc<Mutex<Written>>,
    failed: &Arc<Mutex<Option<io::Error>>>,
) -> Thread {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(IN_FLIGHT);
    let (back_tx, back_rx) = std::sync::mpsc::sync_channel::<Chunk>(IN_FLIGHT + 1);
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let written = Arc::new(AtomicU64::new(0));
    let failed = Arc::clone(failed);
    let counted = Arc::clone(counted);
    let finished = Arc::clone(&written);
    let handle = std::thread::Builder::new()
        .name("ktrace-output".into())
        .spawn(move || {
            let mut file = file;
            for (mut chunk, mut marks) in rx {
                let ok = failed.lock().map(|f| f.is_none()).unwrap_or(false);
                if ok {
                    let (accepted, result) = write_counted(&mut file, &chunk);
                    if let Ok(mut c) = counted.lock() {
                        c.account(marks.as_slice(), accepted);
                    }
                    if let Err(e) = result
                        && let Ok(mut f) = failed.lock()
                    {
                        *f = Some(e);
                    }
                }
                chunk.clear();
                marks.clear();
                finished.fetch_add(1, Ordering::Relaxed);
                let _ = back_tx.try_send((chunk, marks));
            }
            // A file system that can refuse data after write(2) took it
            // (a full server): make sure it reached it. Local ones report
            // a full disk at write(2), and syncing there costs the run the
            // writeback's CPU.
            if fails_late(&file)
                && let Err(e) = file.sync_data()
                && e.raw_os_error() != Some(rustix::io::Errno::INVAL.raw_os_error())
                && e.raw_os_error() != Some(rustix::io::Errno::ROFS.raw_os_error())
                && let Ok(mut f) = failed.lock()
                && f.is_none()
            {
                *f = Some(e);
            }
            if failed.lock().is_ok_and(|f| f.is_none())
                && let Ok(mut c) = counted.lock()
            {
                c.close();
            }
            let _ = done_tx.send(());
        })
        .expect("spawn the output thread");
    Thread {
        tx: Some(tx),
        recycle: back_rx,
        done: done_rx,
        handle: Some(handle),
        written,
    }
}

impl Output {
    /// An output to `file`: written directly when it is a local regular
    /// file, by a writer thread otherwise (see [`Writer`]).
    pub fn new(file: File, stop: StopCheck) -> Output {
        let counted = Arc::new(Mutex::new(Written::default()));
        let failed = Arc::new(Mutex::new(None));
        let (writer, limit) = if written_directly(&file) {
            (Writer::Direct(Direct::new(file)), DIRECT_BUFFER)
        } else {
            (
                Writer::Thread(spawn_writer(file, &counted, &failed)),
                BUFFER,
            )
        };
        Output {
            buf: Vec::with_capacity(limit + SLACK),
            limit,
            marks: Marks::default(),
            writer,
            counted,
            failed,
            stop,
        }
    }

    /// An event of type `id` starts here (see [`Written`]). This and the
    /// other calls made for every event (`buf`, `filled`, and
    /// `OutputRef`'s in cmd/trace.rs) are always inlined: this crate is
    /// built for size in the shipped binary, where as calls they cost
    /// about 90 instructions an event (callgrind, `ktrace trace` of a
    /// million uprobe hits), more than the work they do.
    #[inline(always)]
    pub fn mark(&mut self, id: u16) {
        let at = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.marks.add((at, id));
    }

    /// What was written so far (final once [`Output::finish`] has
    /// returned).
    pub fn written(&self) -> Arc<Mutex<Written>> {
        Arc::clone(&self.counted)
    }

    /// The first error writing met, if any (as a new error with the same
    /// kind and message).
    pub fn error(&self) -> Option<io::Error> {
        let f = self.failed.lock().ok()?;
        f.as_ref().map(|e| io::Error::new(e.kind(), describe(e)))
    }

    fn hand_over(&mut self) -> io::Result<()> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let t = match &mut self.writer {
            Writer::Direct(d) => {
                let (accepted, result) = d.write(&self.buf);
                if let Ok(mut c) = self.counted.lock() {
                    c.account(self.marks.as_slice(), accepted);
                }
                self.buf.clear();
                self.marks.clear();
                if let Err(e) = result {
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(e);
                    }
                    return Err(self
                        .error()
                        .unwrap_or_else(|| io::Error::other("write failed")));
                }
                return Ok(());
            }
            Writer::Thread(t) => t,
        };
        let (fresh, fresh_marks) = t
            .recycle
            .try_recv()
            .unwrap_or_else(|_| (Vec::with_capacity(BUFFER + SLACK), Marks::default()));
        let mut chunk = (
            std::mem::replace(&mut self.buf, fresh),
            std::mem::replace(&mut self.marks, fresh_marks),
        );
        let Some(tx) = &t.tx else {
            return Err(io::Error::other("output already closed"));
        };
        let mut stall = Stall::new(&t.written);
        loop {
            match tx.try_send(chunk) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(c)) => {
                    chunk = c;
                    let f = self.failed.lock().ok();
                    if let Some(e) = f.as_ref().and_then(|f| f.as_ref()) {
                        return Err(io::Error::new(e.kind(), describe(e)));
                    }
                    drop(f);
                    if (self.stop)() && stall.stalled(&t.written) {
                        // Keep the bytes: `finish` may still get them out.
                        (self.buf, self.marks) = chunk;
                        return Err(io::Error::other(Stopped));
                    }
                    std::thread::sleep(TICK);
                }
                Err(TrySendError::Disconnected(_)) => {
                    let f = self.failed.lock().ok();
                    return Err(match f.as_ref().and_then(|f| f.as_ref()) {
                        Some(e) => io::Error::new(e.kind(), describe(e)),
                        None => io::Error::other("the output thread ended"),
                    });
                }
            }
        }
    }

    /// Writes what is buffered (hands it over and waits until the writer
    /// thread has written everything, or `stop` says to give up and the
    /// output has not moved for [`STALL`]; then what is still in flight is
    /// dropped with the process). Returns the first write error.
    pub fn finish(mut self, stop: &dyn Fn() -> bool) -> io::Result<()> {
        let handed = self.hand_over();
        match &mut self.writer {
            Writer::Direct(d) => {
                d.release();
                if handed.is_ok()
                    && let Ok(mut c) = self.counted.lock()
                {
                    c.close();
                }
            }
            Writer::Thread(t) => {
                drop(t.tx.take());
                let mut stall = Stall::new(&t.written);
                loop {
                    match t.done.recv_timeout(Duration::from_millis(50)) {
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                            if let Some(h) = t.handle.take() {
                                let _ = h.join();
                            }
                            break;
                        }
                        Err(RecvTimeoutError::Timeout) => {
                            if stop() && stall.stalled(&t.written) {
                                return Err(io::Error::other(Stopped));
                            }
                        }
                    }
                }
            }
        }
        match self.error() {
            Some(e) => Err(e),
            None => handed,
        }
    }
}

/// The sinks format straight into the output's buffer, which goes to the
/// writer thread without a copy when full.
impl ktrace_printer::Dest for Output {
    #[inline(always)]
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    #[inline(always)]
    fn filled(&mut self) -> io::Result<()> {
        if self.buf.len() >= self.limit {
            self.hand_over()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

impl Write for Output {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.limit && !self.buf.is_empty() {
            self.hand_over()?;
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not finished: let the thread end on its own; never block here.
        match &mut self.writer {
            Writer::Thread(t) => drop(t.tx.take()),
            Writer::Direct(d) => d.release(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> StopCheck {
        Box::new(|| false)
    }

    #[test]
    fn only_a_file_system_that_can_refuse_written_data_later_is_synced() {
        // tmpfs and procfs take or refuse data at write(2): no sync
        let dir = Path::new("/dev/shm");
        if dir.is_dir() {
            let p = dir.join(format!("ktrace-fails-late-{}", std::process::id()));
            let f = File::create(&p).unwrap();
            let late = fails_late(&f);
            let _ = std::fs::remove_file(&p);
            assert!(!late, "tmpfs taken for a file system that fails late");
        }
        assert!(!fails_late(&File::open("/proc/self/stat").unwrap()));
    }

    /// The account of whole events against the rule it implements, one
    /// mark at a time (an event is whole once the next one's start, or the
    /// end of the output, was accepted): random buffers of marks cut at
    /// random points, across buffers, with the close at the end.
    #[test]
    fn whole_events_are_counted_as_mark_by_mark() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..2000 {
            let mut fast = Written::default();
            let (mut events, mut per_id, mut open) = (0u64, [0u64; 8], None::<u16>);
            for _ in 0..next(4) + 1 {
                let mut marks = Vec::new();
                let mut at = next(3) as u32;
                for _ in 0..next(6) {
                    marks.push((at, next(8) as u16));
                    at += 1 + next(40) as u32;
                }
                let accepted = next(u64::from(at) + 2) as usize;
                fast.account(&marks, accepted);
                for &(at, id) in &marks {
                    if at as usize > accepted {
                        break;
                    }
                    if let Some(prev) = open.replace(id) {
                        events += 1;
                        per_id[usize::from(prev)] += 1;
                    }
                }
            }
            if next(2) == 0 {
                fast.close();
                if let Some(prev) = open.take() {
                    events += 1;
                    per_id[usize::from(prev)] += 1;
                }
            }
            let trim = |v: &[u64]| {
                let n = v.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
                v[..n].to_vec()
            };
            assert_eq!(
                (fast.events, trim(&fast.per_id), fast.open),
                (events, trim(&per_id), open)
            );
        }
    }

    #[test]
    fn only_a_local_regular_file_is_written_without_the_thread() {
        let dir = std::env::temp_dir().join(format!("ktrace-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = File::create(dir.join("out")).unwrap();
        assert!(written_directly(&f), "a file in {}", dir.display());
        assert!(matches!(Output::new(f, never()).writer, Writer::Direct(_)));
        let (_r, w) = rustix::pipe::pipe().unwrap();
        assert!(!written_directly(&File::from(w)), "a pipe");
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        assert!(!written_directly(&full), "a character device");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn everything_written_arrives_in_order() {
        let dir = std::env::temp_dir().join(format!("ktrace-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        let t = Target::File(path.clone());
        let (f, mut out) = open_target(&t, &|| false).unwrap();
        out.as_mut().unwrap().start().unwrap();
        let mut o = Output::new(f, never());
        let mut want = Vec::new();
        for i in 0..100_000u32 {
            let line = format!("line {i}\n");
            o.write_all(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
        }
        o.finish(&|| false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dev_full_is_an_error_not_a_quiet_end() {
        // Regression: `-o /dev/full` ended with exit 0 and "0 lost".
        let t = Target::File("/dev/full".into());
        let (f, _out) = open_target(&t, &|| false).unwrap();
        let mut o = Output::new(f, never());
        let mut failed = false;
        for _ in 0..1000 {
            if o.write_all(&[b'x'; 4096]).and_then(|_| o.flush()).is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let end = o.finish(&|| false);
        assert!(failed || end.is_err());
        let e = end.unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            None,
            "described without the os error suffix"
        );
        assert!(e.to_string().contains("No space left"), "{e}");
    }

    #[test]
    fn bad_destinations_are_refused_before_starting() {
        // Regression: `-o /tmp` ran the command untraced, then failed.
        let e = open_target(&Target::File("/tmp".into()), &|| false).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = open_target(&Target::File("/nonexistent-dir/x".into()), &|| false).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = open_target(&Target::File("/proc/self/no-such".into()), &|| false).unwrap_err();
        assert!(!e.to_string().contains("os error"), "{e}");
    }

    #[test]
    fn a_fifo_without_reader_gives_up_when_told() {
        // Regression: `-o FIFO` with no reader blocked in open, deaf to
        // SIGTERM.
        let dir = std::env::temp_dir().join(format!("ktrace-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("f");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let started = std::time::Instant::now();
        let e = open_target(&Target::File(fifo.clone()), &|| {
            started.elapsed() > Duration::from_millis(200)
        })
        .unwrap_err();
        assert!(e.to_string().contains("no reader"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pipe_nobody_reads_does_not_block_the_stop() {
        // Regression: `| sleep 20` kept ktrace blocked in write, deaf to
        // SIGTERM and -d.
        let (r, w) = rustix::pipe::pipe().unwrap();
        let stop_at = std::time::Instant::now() + Duration::from_millis(300);
        let mut o = Output::new(
            File::from(w),
            Box::new(move || std::time::Instant::now() > stop_at),
        );
        let mut err = None;
        for _ in 0..10_000 {
            if let Err(e) = o.write_all(&[b'x'; 4096]) {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("writes stop once the stop check says so");
        assert!(is_stopped(&e), "{e}");
        let end = o.finish(&|| true);
        assert!(end.is_err());
        drop(r);
    }

    /// The marks as added, across growths and after a clear.
    #[test]
    fn marks_keep_what_was_added_in_order() {
        let mut m = Marks::default();
        let mut want = Vec::new();
        for round in 0..3u32 {
            m.clear();
            want.clear();
            for i in 0..(2500 + round * 1000) {
                let mark = (i * 7 + round, (i % 65_536) as u16);
                m.add(mark);
                want.push(mark);
            }
            assert_eq!(m.as_slice(), &want[..]);
        }
    }
}
