//! ktrace-stream: a live run's records, read once, merged by time, decoded
//! once, filtered, and handed to sinks.
//!
//! The flow: ktrace-tracefs opens every CPU's `per_cpu/cpuN/trace_pipe_raw`
//! → a reader thread ([`ktrace_ring::Pipeline`], page buffers recycled)
//! → each page to the sinks that want raw pages ([`Sink::page`], before
//! any decoding) → [`ktrace_ring::Merger`] (records in time order across
//! CPUs, up to what every CPU is known to be complete to) → each record's
//! common header read and its event found in the [`EventTable`] (an id not
//! registered is looked up once through tracefs) → the filters: the pid
//! filter (records of pids in [`Options::skip_pids`], e.g. ktrace itself
//! while it traces a command, and stacks ktrace's own threads caused) and
//! the count ([`Options::limit`], `-n`: after N events the run stops) →
//! [`Sink::event`] with an [`Event`]. Nothing is formatted before the
//! filters; when no sink wants events ([`Sink::wants_events`]), pages are
//! not decoded at all.
//!
//! It is not the session's lifecycle (creating probes, enabling, teardown)
//! and it does not format: text, JSON and raw lines are sinks in
//! ktrace-printer; aggregations, record files and exports are further
//! sinks. Mirrors the consuming readers of kernel/trace/trace.c
//! (`trace_pipe_raw` per CPU, `__find_next_entry()` ordering, `trace`'s
//! lost-events notices).
//!
//! # The Sink contract
//!
//! - [`Sink::begin`] once, with the table of every event known at start
//!   (more may be registered later: an [`Event`] always carries its
//!   [`EventInfo`]).
//! - [`Sink::page`] for every sub-buffer read, in reading order per CPU,
//!   when [`Sink::wants_pages`] (record files); pages arrive before their
//!   records are decoded.
//! - [`Sink::event`] for each record in time order. A stack record
//!   ([`Event::is_stack`]) comes right after the event it belongs to, is
//!   not counted, and is dropped with it by the pid filter. Return
//!   [`Flow::Stop`] to end the run.
//! - [`Sink::lost`] where the kernel reported lost events on a CPU, before
//!   that CPU's next records.
//! - [`Sink::flush`] after each reading round (about every 0.1 s when
//!   events are rare): write out what is buffered.
//! - [`Sink::finish`] once, with the end-of-run account ([`EndOfRun`]).
//!
//! Every call returns `io::Result`: an error ends the run and comes back
//! from [`Stream::poll`] as [`Error::Output`] (a closed pipe is
//! `ErrorKind::BrokenPipe`, which callers may treat as a quiet stop).
//! Aggregations keep state across [`Sink::event`] calls and write at
//! [`Sink::finish`]; record-file sinks return false from
//! [`Sink::wants_events`] and true from [`Sink::wants_pages`]. Several
//! sinks run together through [`Fanout`].
//!
//! # Decoding
//!
//! An [`Event`] holds the record bytes, its CPU and time stamp, the common
//! header (read once), its table entry and the task names; field values are
//! read from the bytes through the parsed format on access
//! ([`Event::value`], [`Event::int`], [`Event::str`], by index or name),
//! without allocating for scalars and strings. Text printers compile their
//! own per-event plan from the same format.

mod decode;
mod event;
mod names;
mod pairing;
mod stream;
mod summary;
mod table;

pub use decode::{CpuPages, Decoder, replay};
pub use event::Event;
pub use ktrace_event::{Common, Endian, Int, ProbeKind, StrValue, Value};
pub use ktrace_ring::Missed;
pub use names::{Comms, TaskNames, saved_name};
pub use pairing::StackPairing;
pub use stream::{Options, Status, Stream, page_layout};
pub use summary::LostSummary;
pub use table::{EventInfo, EventTable, ProbeSpec, Role};

use std::io;

/// Whether the run goes on after a sink call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// End the run (the sink has what it wants).
    Stop,
}

/// The end-of-run account handed to [`Sink::finish`].
#[derive(Debug, Clone, Default)]
pub struct EndOfRun {
    /// Events lost per CPU (page headers and `per_cpu/cpuN/stats`), and
    /// the number of events delivered (`summary.events`).
    pub summary: LostSummary,
    /// Events delivered, per event: (system, name, count), in id order;
    /// stacks are not counted.
    pub shown: Vec<(String, String, u64)>,
}

/// Where a run's records go.
pub trait Sink {
    /// Called once before anything else, with the events known at start.
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        let _ = table;
        Ok(())
    }

    /// One record, after the filters.
    fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow>;

    /// Events lost on `cpu` before its next records.
    fn lost(&mut self, cpu: usize, missed: Missed) -> io::Result<()> {
        let _ = (cpu, missed);
        Ok(())
    }

    /// End of a reading round: write out what is buffered.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Called once at the end, with the account of the run.
    fn finish(&mut self, end: &EndOfRun) -> io::Result<()> {
        let _ = end;
        Ok(())
    }

    /// True when the sink wants every sub-buffer as read ([`Sink::page`]).
    fn wants_pages(&self) -> bool {
        false
    }

    /// False when the sink wants no decoded events (then, if no sink does,
    /// pages are not decoded).
    fn wants_events(&self) -> bool {
        true
    }

    /// A sub-buffer as read from `cpu`, before decoding.
    fn page(&mut self, cpu: usize, bytes: &[u8]) -> io::Result<Flow> {
        let _ = (cpu, bytes);
        Ok(Flow::Continue)
    }
}

/// Several sinks fed from one stream, in order; the run stops when any of
/// them says [`Flow::Stop`].
pub struct Fanout<'a> {
    sinks: Vec<&'a mut dyn Sink>,
}

impl<'a> Fanout<'a> {
    /// The sinks, called in this order.
    pub fn new(sinks: Vec<&'a mut dyn Sink>) -> Fanout<'a> {
        Fanout { sinks }
    }
}

impl Sink for Fanout<'_> {
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.begin(table))
    }

    fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow> {
        let mut flow = Flow::Continue;
        for s in self.sinks.iter_mut().filter(|s| s.wants_events()) {
            if s.event(ev)? == Flow::Stop {
                flow = Flow::Stop;
            }
        }
        Ok(flow)
    }

    fn lost(&mut self, cpu: usize, missed: Missed) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.lost(cpu, missed))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.flush())
    }

    fn finish(&mut self, end: &EndOfRun) -> io::Result<()> {
        self.sinks.iter_mut().try_for_each(|s| s.finish(end))
    }

    fn wants_pages(&self) -> bool {
        self.sinks.iter().any(|s| s.wants_pages())
    }

    fn wants_events(&self) -> bool {
        self.sinks.iter().any(|s| s.wants_events())
    }

    fn page(&mut self, cpu: usize, bytes: &[u8]) -> io::Result<Flow> {
        let mut flow = Flow::Continue;
        for s in self.sinks.iter_mut().filter(|s| s.wants_pages()) {
            if s.page(cpu, bytes)? == Flow::Stop {
                flow = Flow::Stop;
            }
        }
        Ok(flow)
    }
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or reading a tracefs file failed.
    #[error(transparent)]
    Tracefs(#[from] ktrace_tracefs::Error),
    /// Reading or decoding the ring buffer failed.
    #[error("reading the ring buffer")]
    Ring(#[from] ktrace_ring::Error),
    /// An event's format file could not be parsed.
    #[error("format of {event}")]
    Format {
        /// `system/event`.
        event: String,
        /// What was wrong.
        source: ktrace_event::Error,
    },
    /// A sink failed to write its output.
    #[error("cannot write the output")]
    Output(#[source] io::Error),
    /// The reader thread ended without saying why.
    #[error("the ring-buffer reader stopped unexpectedly")]
    ReaderGone,
}
