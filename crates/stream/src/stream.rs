//! The live stream of one instance: reader thread, merge, decode, filters,
//! sinks.
//!
//! [`Stream::open`] reads the sub-buffer layout (`events/header_page`,
//! `header_event`, the instance's `buffer_subbuf_size_kb`) and the event
//! table through ktrace-tracefs, opens the per-CPU buffers and starts the
//! reader thread ([`ktrace_ring::Pipeline`]: each round takes the full
//! pages and what is committed on the page being written, so a rare event
//! shows within about 0.1 s). Each [`Stream::poll`] turns at most one
//! reading round into sink calls, so memory stays bounded by the
//! pipeline's capacity: a slow sink blocks this thread, then the reader
//! thread, and the kernel overwrites (counted in page headers and
//! `per_cpu/cpuN/stats`, reported at [`Stream::finish`]) instead of ktrace
//! growing. It does not create, enable or remove anything.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::time::Duration;

use ktrace_ring::{CpuReader, Page, PageLayout, Pipeline, PipelineMsg, Reader};
use ktrace_tracefs::Instance;

use crate::decode::Decoder;
use crate::{EndOfRun, Error, EventTable, Flow, ProbeSpec, Sink, TaskNames};

/// How a run reads and what it lets through.
#[derive(Debug, Clone)]
pub struct Options {
    /// Records of these pids are dropped (with their stacks).
    pub skip_pids: Vec<i32>,
    /// Stop after this many events (stacks not counted).
    pub limit: Option<u64>,
    /// Batches (of at most `round_pages_per_cpu` pages each) the channel
    /// between the reader thread and the consumer holds.
    pub channel_batches: usize,
    /// Pages taken from one CPU in one reading round, counted in 4 KiB
    /// pages (a 16 KiB sub-buffer counts for four).
    pub round_pages_per_cpu: usize,
    /// The longest wait between reading rounds when the buffer stays below
    /// the instance's `buffer_percent` (the latency of a rare event).
    pub quiet: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            skip_pids: Vec::new(),
            limit: None,
            channel_batches: 4,
            round_pages_per_cpu: 64,
            quiet: Duration::from_millis(100),
        }
    }
}

/// What [`Stream::poll`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still reading.
    Running,
    /// The reader has finished (after [`Stream::stop`]) and everything was
    /// handed over.
    Finished,
    /// A sink said stop, or the count was reached.
    Stopped,
}

/// The sub-buffer layout of the instance at `instance` (byte order: this
/// machine's), read through ktrace-tracefs.
pub fn page_layout(root: &Path, instance: &Instance) -> Result<PageLayout, Error> {
    let hp = ktrace_tracefs::buffers::header_page(root)?;
    ktrace_ring::check_header_event(&ktrace_tracefs::buffers::header_event(root)?)?;
    let layout = PageLayout::from_header_page(&hp, ktrace_ring::Endian::native())?;
    Ok(match instance.subbuf_size() {
        Some(s) if s != layout.subbuf_size => layout.with_subbuf_size(s),
        _ => layout,
    })
}

/// The binary ring-buffer stream of one instance.
pub struct Stream {
    pipeline: Option<Pipeline>,
    /// Merge, decode, filters (ktrace's own threads: the kernel leaves out
    /// their events, set_event_notrace_pid, but not the stacks a
    /// `stacktrace` trigger takes for them, so the decoder drops those).
    dec: Decoder,
    instance: Instance,
    cpus: Vec<usize>,
}

impl Stream {
    /// Prepares reading `instance` (under the tracefs at `root`) for the
    /// session's `probes`, and starts the reader thread. Call before
    /// enabling the events.
    pub fn open(
        root: &Path,
        instance: &Instance,
        probes: &[ProbeSpec],
        opts: Options,
    ) -> Result<Stream, Error> {
        let layout = page_layout(root, instance)?;
        let table = EventTable::load(root, layout.long_size, probes)?;
        let buffers = instance.open_cpu_buffers()?;
        let cpus: Vec<usize> = buffers.iter().map(|b| b.cpu).collect();
        let readers = buffers
            .into_iter()
            .map(|b| CpuReader::new(b.cpu, b.fd, b.path, &layout))
            .collect();
        let first = cpus.first().copied().unwrap_or(0);
        let mut reader = instance.trace_clock_reader(first);
        let clock = Box::new(move || reader.as_mut()?.now());
        // the round's budget is in 4 KiB pages: larger sub-buffers count
        // for several, so memory stays bounded the same
        let per_round = (opts.round_pages_per_cpu * 4096 / layout.subbuf_size.max(1)).max(4);
        let pipeline = Pipeline::spawn(
            Reader::new(readers, layout, clock),
            opts.channel_batches,
            per_round,
            opts.quiet,
        );
        let own = own_threads();
        Ok(Stream {
            pipeline: Some(pipeline),
            dec: Decoder::new(layout, table, TaskNames::new(Some(root)), opts, own),
            instance: instance.clone(),
            cpus,
        })
    }

    /// The event table (more events may be registered as they are met).
    pub fn table(&self) -> &EventTable {
        self.dec.table()
    }

    /// Where the kernel's events registered as they are met find the
    /// values of names left in their print fmt (see
    /// [`EventTable::set_names`]).
    pub fn set_names(&mut self, names: ktrace_event::printfmt::Names) {
        self.dec.table_mut().set_names(names);
    }

    /// The sub-buffer layout.
    pub fn layout(&self) -> PageLayout {
        self.dec.layout()
    }

    /// Events delivered so far (stacks not counted).
    pub fn events(&self) -> u64 {
        self.dec.events()
    }

    /// Stack records left out so far because they followed no event shown
    /// (see [`crate::StackPairing`]).
    pub fn orphan_stacks(&self) -> u64 {
        self.dec.orphan_stacks()
    }

    /// Messages about records that could not be decoded, since the last
    /// call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        self.dec.take_warnings()
    }

    /// Calls [`Sink::begin`] with the table.
    pub fn begin(&mut self, sink: &mut dyn Sink) -> Result<(), Error> {
        sink.begin(self.dec.table()).map_err(Error::Output)
    }

    /// Waits up to `timeout` for a reading round and hands it to `sink`.
    pub fn poll(&mut self, timeout: Duration, sink: &mut dyn Sink) -> Result<Status, Error> {
        if self.dec.stopped() {
            return Ok(Status::Stopped);
        }
        let Some(pipeline) = &self.pipeline else {
            return Ok(Status::Finished);
        };
        let mut msg = match pipeline.rx.recv_timeout(timeout) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => return Ok(Status::Running),
            Err(RecvTimeoutError::Disconnected) => return Ok(self.finish_reader()),
        };
        loop {
            match msg {
                PipelineMsg::Pages(pages) => {
                    for p in pages {
                        if self.page(p.cpu, p.bytes, sink)? == Flow::Stop {
                            return self.stop_now(sink);
                        }
                    }
                }
                PipelineMsg::Round { complete_to } => {
                    return self.flush(complete_to.unwrap_or(u64::MAX), sink);
                }
                PipelineMsg::Failed(e) => return Err(Error::Ring(e)),
            }
            let Some(pipeline) = &self.pipeline else {
                return Ok(Status::Finished);
            };
            msg = match pipeline.rx.try_recv() {
                Ok(m) => m,
                // The round marker follows its pages; wait for it briefly.
                Err(TryRecvError::Empty) => match pipeline.rx.recv_timeout(timeout) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => return Ok(Status::Running),
                    Err(RecvTimeoutError::Disconnected) => {
                        self.flush(u64::MAX, sink)?;
                        return Ok(self.finish_reader());
                    }
                },
                Err(TryRecvError::Disconnected) => {
                    self.flush(u64::MAX, sink)?;
                    return Ok(self.finish_reader());
                }
            };
        }
    }

    fn stop_now(&mut self, sink: &mut dyn Sink) -> Result<Status, Error> {
        self.dec.stop();
        sink.flush().map_err(Error::Output)?;
        Ok(Status::Stopped)
    }

    /// One page from the reader: to the page sinks, then to the merger
    /// (or straight back to the reader when nobody wants events).
    fn page(&mut self, cpu: usize, bytes: Vec<u8>, sink: &mut dyn Sink) -> Result<Flow, Error> {
        let flow = if sink.wants_pages() {
            sink.page(cpu, &bytes).map_err(Error::Output)?
        } else {
            Flow::Continue
        };
        if sink.wants_events() {
            self.dec.push(cpu, bytes);
        } else {
            if let Ok(p) = Page::parse(self.dec.layout(), &bytes)
                && p.missed != ktrace_ring::Missed::None
            {
                self.dec.summary_mut().add_missed(cpu, p.missed);
                sink.lost(cpu, p.missed).map_err(Error::Output)?;
            }
            if let Some(pl) = &self.pipeline {
                pl.recycle(bytes);
            }
        }
        Ok(flow)
    }

    fn finish_reader(&mut self) -> Status {
        if let Some(p) = self.pipeline.take() {
            p.join();
        }
        Status::Finished
    }

    /// Asks the reader thread to take the partial pages left and finish
    /// (call after recording stopped); keep calling [`Stream::poll`] until
    /// it returns [`Status::Finished`].
    pub fn stop(&self) {
        if let Some(p) = &self.pipeline {
            p.stop();
        }
    }

    /// Stops the reader and throws away what it still delivers.
    pub fn discard(&mut self) {
        self.stop();
        if let Some(p) = self.pipeline.take() {
            while p.rx.recv().is_ok() {}
            p.join();
        }
    }

    /// Hands the records up to time stamp `limit` to `sink` in order;
    /// later ones stay in the merger for the next round.
    fn flush(&mut self, limit: u64, sink: &mut dyn Sink) -> Result<Status, Error> {
        let status = self.dec.flush(limit, sink);
        if let Some(pl) = &self.pipeline {
            while let Some(page) = self.dec.take_spare_page() {
                pl.recycle(page);
            }
        }
        status
    }

    /// Ends the run: reads every CPU's `per_cpu/cpuN/stats` into the loss
    /// account, calls [`Sink::finish`] and returns the account. Stats that
    /// cannot be read are reported in the warnings.
    pub fn finish(&mut self, sink: &mut dyn Sink) -> Result<EndOfRun, Error> {
        self.discard();
        for &cpu in &self.cpus {
            match self.instance.cpu_stats(cpu as u32) {
                Ok(st) => self.dec.summary_mut().add_stats(cpu, &st),
                Err(e) => self.dec.warn(e.to_string()),
            }
        }
        let end = self.dec.end_of_run();
        sink.finish(&end).map_err(Error::Output)?;
        Ok(end)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.discard();
    }
}

/// The thread ids of this process now.
fn own_threads() -> Vec<i32> {
    let dir = PathBuf::from("/proc/self/task");
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
