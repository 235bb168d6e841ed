//! The merge-and-decode half of a stream, shared by the live run and by
//! replaying a recording: per-CPU pages in, records merged by time,
//! their events found in the [`EventTable`], the pid and count filters
//! applied, and [`Sink::event`] / [`Sink::lost`] called in order.
//!
//! [`crate::Stream`] feeds it pages from the live reader thread;
//! [`replay`] feeds it whole sub-buffers from per-CPU byte streams (the
//! CPU data of a trace.dat file), about one page per CPU in memory, so a
//! recording prints exactly as the live run would have. It reads no
//! tracefs file itself (the table may look unknown ids up when it was
//! made with a tracefs root) and does not format.

use std::io::Read;

use ktrace_event::{Common, Endian};
use ktrace_ring::{Merged, Merger, PageLayout, read_full};

use crate::pairing::StackPairing;
use crate::{
    EndOfRun, Error, Event, EventInfo, EventTable, Flow, LostSummary, Missed, Options, Role, Sink,
    Status, TaskNames,
};

/// Merge, decode and filters of one run.
pub struct Decoder {
    merger: Merger,
    layout: PageLayout,
    table: EventTable,
    names: TaskNames,
    opts: Options,
    summary: LostSummary,
    /// Events delivered, per id.
    shown: Vec<u64>,
    counted: u64,
    /// Threads whose stack records are dropped (ktrace's own, live).
    own: Vec<i32>,
    stopped: bool,
    warnings: Vec<String>,
    /// Which stack records belong to an event shown.
    pairing: StackPairing,
}

impl Decoder {
    /// A decoder for pages of `layout` whose records are events of
    /// `table`, named by `names`, filtered by `opts`; stack records of
    /// the threads in `own` are dropped.
    pub fn new(
        layout: PageLayout,
        table: EventTable,
        names: TaskNames,
        opts: Options,
        own: Vec<i32>,
    ) -> Decoder {
        Decoder {
            merger: Merger::new(layout),
            layout,
            table,
            names,
            opts,
            summary: LostSummary::new(),
            shown: Vec::new(),
            counted: 0,
            own,
            stopped: false,
            warnings: Vec::new(),
            pairing: StackPairing::new(),
        }
    }

    /// Stack records left out so far because they followed no event shown
    /// (see [`StackPairing`]).
    pub fn orphan_stacks(&self) -> u64 {
        self.pairing.orphans()
    }

    /// The event table.
    pub fn table(&self) -> &EventTable {
        &self.table
    }

    /// The event table, to change.
    pub fn table_mut(&mut self) -> &mut EventTable {
        &mut self.table
    }

    /// The sub-buffer layout.
    pub fn layout(&self) -> PageLayout {
        self.layout
    }

    /// Events delivered so far (stacks not counted).
    pub fn events(&self) -> u64 {
        self.counted
    }

    /// True once the count was reached or a sink said stop.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Marks the run stopped.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// The loss account so far.
    pub fn summary_mut(&mut self) -> &mut LostSummary {
        &mut self.summary
    }

    /// Messages about records that could not be decoded, since the last
    /// call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Adds a warning.
    pub fn warn(&mut self, w: String) {
        self.warnings.push(w);
    }

    /// Adds a page read from `cpu`.
    pub fn push(&mut self, cpu: usize, bytes: Vec<u8>) {
        self.merger.push(cpu, bytes);
    }

    /// Time stamp of the newest record queued for `cpu` (`None`: nothing
    /// left to hand out from it).
    pub fn newest(&self, cpu: usize) -> Option<u64> {
        self.merger.newest(cpu)
    }

    /// A buffer of a page already handed out, for reuse.
    pub fn take_spare_page(&mut self) -> Option<Vec<u8>> {
        self.merger.take_spare_page()
    }

    /// Hands the records up to time stamp `limit` to `sink` in order;
    /// later ones stay queued.
    pub fn flush(&mut self, limit: u64, sink: &mut dyn Sink) -> Result<Status, Error> {
        self.hand_out(limit, sink, true)
    }

    /// [`Decoder::flush`], flushing `sink` afterwards only when `flush_sink`
    /// (a live run shows what it has; a replay fills the sink's buffer).
    fn hand_out(
        &mut self,
        limit: u64,
        sink: &mut dyn Sink,
        flush_sink: bool,
    ) -> Result<Status, Error> {
        let Decoder {
            merger,
            table,
            names,
            opts,
            summary,
            shown,
            counted,
            own,
            stopped,
            warnings,
            layout,
            pairing,
        } = self;
        let mut recs = Records {
            table,
            names,
            opts,
            shown,
            counted,
            own,
            stopped,
            warnings,
            pairing,
            endian: layout.endian,
        };
        let mut failed: Option<std::io::Error> = None;
        merger.flush_until(limit, &mut |m| {
            if *recs.stopped || failed.is_some() {
                return;
            }
            let res = match m {
                Merged::Record { cpu, ts, data } => record(&mut recs, cpu, ts, data, sink),
                Merged::Lost { cpu, missed } => lost(&mut recs, summary, cpu, missed, sink),
                Merged::Bad { cpu, error } => {
                    bad(recs.warnings, cpu, &error);
                    Ok(())
                }
            };
            if let Err(e) = res {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            self.stopped = true;
            return Err(Error::Output(e));
        }
        if flush_sink {
            sink.flush().map_err(Error::Output)?;
        }
        if self.opts.limit.is_some_and(|n| self.counted >= n) {
            self.stopped = true;
        }
        Ok(if self.stopped {
            Status::Stopped
        } else {
            Status::Running
        })
    }

    /// The end-of-run account (with the summary as it stands); a CPU
    /// whose time stamps went backwards adds a warning.
    pub fn end_of_run(&mut self) -> EndOfRun {
        self.summary.events = self.counted;
        for (cpu, n) in self.merger.backwards().into_iter().enumerate() {
            if n > 0 {
                self.warnings.push(format!(
                    "CPU {cpu}: {n} record(s) stamped earlier than the record before them \
                     (a corrupt recording or a clock that jumped): the order around them may be wrong"
                ));
            }
        }
        let shown = self
            .shown
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .filter_map(|(id, n)| {
                let info = self.table.get(id as u16)?;
                Some((info.system().to_string(), info.name().to_string(), *n))
            })
            .collect();
        EndOfRun {
            summary: self.summary.clone(),
            shown,
        }
    }
}

/// The decoder's state one record reads and updates: all of it but the
/// merger, which is handing the records out.
struct Records<'a> {
    table: &'a mut EventTable,
    names: &'a mut TaskNames,
    opts: &'a Options,
    shown: &'a mut Vec<u64>,
    counted: &'a mut u64,
    own: &'a [i32],
    stopped: &'a mut bool,
    warnings: &'a mut Vec<String>,
    pairing: &'a mut StackPairing,
    endian: Endian,
}

/// One data record of [`Decoder::flush`]: its event looked up, stacks paired
/// with their events, the pid and count filters applied, and the event
/// handed to `sink` and counted.
fn record(
    s: &mut Records<'_>,
    cpu: usize,
    ts: u64,
    data: &[u8],
    sink: &mut dyn Sink,
) -> std::io::Result<()> {
    let (table, names, opts, shown, counted) = (
        &mut *s.table,
        &mut *s.names,
        s.opts,
        &mut *s.shown,
        &mut *s.counted,
    );
    let (own, stopped, warnings, pairing, endian) = (
        s.own,
        &mut *s.stopped,
        &mut *s.warnings,
        &mut *s.pairing,
        s.endian,
    );
    let Some(common) = Common::read(data, endian) else {
        too_short(warnings, cpu, data.len());
        return Ok(());
    };
    let info = match table.get(common.type_id) {
        Some(_) => table.get(common.type_id),
        None => find(table, warnings, common.type_id),
    };
    let Some(info) = info else {
        return Ok(());
    };
    let pid = common.pid;
    // A stack is shown only after the event it belongs to
    // (the kernel also writes stacks for events it discards).
    let stack = match info.role {
        Role::Stack { user } => {
            if !pairing.stack(cpu, pid, user) || own.contains(&pid) {
                return Ok(());
            }
            true
        }
        _ => false,
    };
    if !stack && opts.skip_pids.contains(&pid) {
        pairing.event(cpu, pid, false);
        return Ok(());
    }
    if !stack && opts.limit.is_some_and(|n| *counted >= n) {
        pairing.event(cpu, pid, false);
        *stopped = true;
        return Ok(());
    }
    if !stack {
        pairing.event(cpu, pid, true);
    }
    names.see(pid);
    let ev = Event {
        cpu,
        ts,
        common,
        info,
        data,
        names: names.comms(),
        endian,
    };
    let r = sink.event(&ev);
    if !stack {
        *counted += 1;
        let id = usize::from(common.type_id);
        if shown.len() <= id {
            shown.resize(id + 1, 0);
        }
        shown[id] += 1;
    }
    match r {
        Ok(Flow::Stop) => {
            *stopped = true;
            Ok(())
        }
        Ok(Flow::Continue) => Ok(()),
        Err(e) => Err(e),
    }
}

// The rare turns of a record's way, out of line: in the closure that
// hands out every record they made its frame and code several times
// larger than the common path.

/// A loss report: handed to `sink` and counted.
#[cold]
#[inline(never)]
fn lost(
    s: &mut Records<'_>,
    summary: &mut LostSummary,
    cpu: usize,
    missed: Missed,
    sink: &mut dyn Sink,
) -> std::io::Result<()> {
    s.pairing.lost(cpu);
    summary.add_missed(cpu, missed);
    sink.lost(cpu, missed)
}

#[cold]
#[inline(never)]
fn bad(warnings: &mut Vec<String>, cpu: usize, error: &dyn std::fmt::Display) {
    warnings.push(format!("CPU {cpu}: undecodable sub-buffer: {error}"));
}

#[cold]
#[inline(never)]
fn too_short(warnings: &mut Vec<String>, cpu: usize, len: usize) {
    warnings.push(format!("CPU {cpu}: record too short ({len} bytes)"));
}

/// The event of an id not registered yet, looked up in tracefs.
#[cold]
#[inline(never)]
fn find<'t>(
    table: &'t mut EventTable,
    warnings: &mut Vec<String>,
    id: u16,
) -> Option<&'t EventInfo> {
    let (info, warning) = table.find(id);
    warnings.extend(warning);
    info
}

/// One CPU's recorded pages for [`replay`]: its number and a reader of
/// whole sub-buffers, as `trace_pipe_raw` handed them out.
pub type CpuPages = (usize, Box<dyn Read>);

/// Replays recorded pages through `dec` into `sink`: [`Sink::begin`],
/// every record in time order, [`Sink::finish`]. A CPU whose stream fails
/// (a file cut short) ends there with a warning; its records up to the
/// failure are handed out. Returns the end-of-run account.
pub fn replay(
    dec: &mut Decoder,
    streams: Vec<CpuPages>,
    sink: &mut dyn Sink,
) -> Result<EndOfRun, Error> {
    sink.begin(&dec.table).map_err(Error::Output)?;
    let size = dec.layout.subbuf_size;
    let mut live = streams;
    'run: loop {
        // every live CPU gets a queued page with records, or ends
        let mut i = 0;
        while i < live.len() {
            let cpu = live[i].0;
            let mut ended = false;
            while dec.newest(cpu).is_none() {
                let mut page = dec.take_spare_page().unwrap_or_default();
                page.resize(size, 0);
                match read_full(&mut live[i].1, &mut page) {
                    Ok(0) => {
                        ended = true;
                        break;
                    }
                    Ok(n) => {
                        page.truncate(n);
                        dec.push(cpu, page);
                    }
                    Err(e) => {
                        dec.warn(format!("CPU {cpu}: {e}"));
                        ended = true;
                        break;
                    }
                }
            }
            if ended {
                live.swap_remove(i);
            } else {
                i += 1;
            }
        }
        let limit = if live.is_empty() {
            u64::MAX
        } else {
            live.iter()
                .filter_map(|(cpu, _)| dec.newest(*cpu))
                .min()
                .unwrap_or(u64::MAX)
        };
        // the sink writes out when its buffer fills, and at the end
        // (finish): not after every page as a live run must
        if dec.hand_out(limit, sink, false)? == Status::Stopped || live.is_empty() {
            break 'run;
        }
    }
    let end = dec.end_of_run();
    sink.finish(&end).map_err(Error::Output)?;
    Ok(end)
}
