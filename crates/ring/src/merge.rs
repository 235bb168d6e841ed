//! K-way merge of per-CPU record streams by time stamp.
//!
//! Each CPU's pages arrive in order and each page's records are in time
//! order, so a heap over the head record of every CPU yields a global order,
//! as the kernel's own `trace` iterator does (`__find_next_entry()` in
//! kernel/trace/trace.c). The merger owns the pages it is given and emits
//! when asked to flush (after each reading round, or at the end). It does not
//! read files and does not decode event fields.
//!
//! A CPU whose time stamps go backwards (a corrupt recording, or a clock
//! that jumped) is still merged and always makes progress: the limit a
//! streaming reader flushes to is each CPU's latest (largest) stamp
//! queued, not its last, so the CPU with the smallest such stamp is always
//! emptied and read further. Such records are counted
//! ([`Merger::backwards`]) for the caller to report.

use crate::{Error, Missed, Page, PageLayout};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

struct Decoded {
    bytes: Vec<u8>,
    /// (ts, start, end) of each record, relative to `bytes`.
    recs: Vec<(u64, u32, u32)>,
    /// The largest time stamp in `recs`.
    latest: Option<u64>,
    pos: usize,
    missed: Missed,
    missed_reported: bool,
}

/// One item out of the merger.
#[derive(Debug)]
pub enum Merged<'a> {
    /// A data record.
    Record {
        /// CPU it was recorded on.
        cpu: usize,
        /// Time stamp.
        ts: u64,
        /// Payload (starts at `common_type`).
        data: &'a [u8],
    },
    /// Events lost on `cpu` before the records that follow from it.
    Lost {
        /// The CPU.
        cpu: usize,
        /// How many (or unknown).
        missed: Missed,
    },
    /// A page that could not be decoded (records before the fault were kept).
    Bad {
        /// The CPU.
        cpu: usize,
        /// What was wrong.
        error: Error,
    },
}

/// Merges pages from several CPUs into one time-ordered stream.
pub struct Merger {
    layout: PageLayout,
    queues: Vec<VecDeque<Decoded>>,
    errors: Vec<(usize, Error)>,
    records: u64,
    /// Per CPU: the last time stamp pushed and how many records were
    /// stamped earlier than the record before them.
    order: Vec<(u64, u64)>,
    /// Buffers of finished pages, reused for the next ones.
    spare: Spare,
}

/// Page and record-index buffers of finished pages, kept for reuse (a
/// bounded number, so memory stays bounded).
#[derive(Default)]
struct Spare {
    pages: Vec<Vec<u8>>,
    recs: Vec<Vec<(u64, u32, u32)>>,
}

impl Spare {
    const KEEP: usize = 256;

    fn put(&mut self, d: Decoded) {
        if self.pages.len() < Spare::KEEP {
            self.pages.push(d.bytes);
        }
        if self.recs.len() < Spare::KEEP {
            let mut r = d.recs;
            r.clear();
            self.recs.push(r);
        }
    }
}

impl Merger {
    /// A merger for pages of `layout`.
    pub fn new(layout: PageLayout) -> Merger {
        Merger {
            layout,
            queues: Vec::new(),
            errors: Vec::new(),
            records: 0,
            order: Vec::new(),
            spare: Spare::default(),
        }
    }

    /// The latest time stamp queued for `cpu`, if any: its last record's,
    /// unless time went backwards on it, then the largest. Every record of
    /// `cpu` still queued is at or before it, so flushing up to the
    /// smallest of these over the CPUs empties at least that CPU.
    pub fn newest(&self, cpu: usize) -> Option<u64> {
        let q = self.queues.get(cpu)?;
        q.iter().filter_map(|d| d.latest).max()
    }

    /// Per CPU (index), the records pushed so far whose time stamp is
    /// earlier than that of the record before them on the same CPU.
    pub fn backwards(&self) -> Vec<u64> {
        self.order.iter().map(|o| o.1).collect()
    }

    /// Pages buffered across all CPUs.
    pub fn pages(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// A buffer of a page already handed out, to be reused for reading
    /// (see `Pipeline::recycle`); `None` when none is spare.
    pub fn take_spare_page(&mut self) -> Option<Vec<u8>> {
        self.spare.pages.pop()
    }

    /// Records handed out so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Adds a page read from `cpu`.
    pub fn push(&mut self, cpu: usize, bytes: Vec<u8>) {
        if self.queues.len() <= cpu {
            self.queues.resize_with(cpu + 1, VecDeque::new);
            self.order.resize(cpu + 1, (0, 0));
        }
        let order = &mut self.order[cpu];
        // the largest stamp, found on the way (one pass over the records)
        let mut latest: Option<u64> = None;
        let (recs, missed) = match Page::parse(self.layout, &bytes) {
            Ok(p) => {
                let base = bytes.as_ptr() as usize;
                let mut recs = self.spare.recs.pop().unwrap_or_default();
                for r in p.records() {
                    match r {
                        Ok(r) => {
                            if r.ts < order.0 {
                                order.1 += 1;
                            }
                            order.0 = r.ts;
                            latest = Some(latest.map_or(r.ts, |l| l.max(r.ts)));
                            let start = r.data.as_ptr() as usize - base;
                            recs.push((r.ts, start as u32, (start + r.data.len()) as u32));
                        }
                        Err(e) => {
                            self.errors.push((cpu, e));
                            break;
                        }
                    }
                }
                (recs, p.missed)
            }
            Err(e) => {
                self.errors.push((cpu, e));
                (Vec::new(), Missed::None)
            }
        };
        self.queues[cpu].push_back(Decoded {
            bytes,
            recs,
            latest,
            pos: 0,
            missed,
            missed_reported: false,
        });
    }

    /// Emits every buffered record in time-stamp order (ties: lower CPU
    /// first), with loss reports before the records of the page they
    /// precede and decode errors first.
    pub fn flush(&mut self, out: &mut dyn FnMut(Merged<'_>)) {
        self.flush_until(u64::MAX, out);
    }

    /// Like [`Merger::flush`], but stops before the first record later than
    /// `limit`, keeping it and everything after it buffered. Streaming
    /// readers pass the smallest "newest time stamp queued" over the CPUs
    /// still producing, which keeps the output ordered with one page per CPU
    /// in memory. Generic in `out`: each record is handed over by a direct
    /// call, not through a vtable (callgrind: 8 instructions an event
    /// fewer; the decoder's closure stays a function of its own).
    pub fn flush_until<F: FnMut(Merged<'_>) + ?Sized>(&mut self, limit: u64, out: &mut F) {
        for (cpu, error) in self.errors.drain(..) {
            out(Merged::Bad { cpu, error });
        }
        let mut heap = BinaryHeap::new();
        for (cpu, q) in self.queues.iter_mut().enumerate() {
            if let Some(ts) = head(q, cpu, out, &mut self.spare) {
                heap.push(Reverse((ts, cpu)));
            }
        }
        while let Some(Reverse((ts, cpu))) = heap.pop() {
            if ts > limit {
                break;
            }
            // emit from this CPU while it stays ahead of every other
            // (ties: lower CPU first), without going through the heap
            let rival = heap.peek().map(|r| r.0);
            let q = &mut self.queues[cpu];
            while let Some(d) = q.front_mut() {
                let (ts, s, e) = d.recs[d.pos];
                d.pos += 1;
                self.records += 1;
                out(Merged::Record {
                    cpu,
                    ts,
                    data: &d.bytes[s as usize..e as usize],
                });
                // the page's next record needs no look at losses or
                // finished pages (head() saw this page already)
                let next = if d.pos < d.recs.len() {
                    Some(d.recs[d.pos].0)
                } else {
                    head(q, cpu, out, &mut self.spare)
                };
                match next {
                    Some(ts) if ts <= limit && rival.is_none_or(|r| (ts, cpu) < r) => {}
                    Some(ts) => {
                        heap.push(Reverse((ts, cpu)));
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}

/// Time stamp of the next record of a CPU queue, reporting losses and
/// dropping finished pages on the way.
fn head<F: FnMut(Merged<'_>) + ?Sized>(
    q: &mut VecDeque<Decoded>,
    cpu: usize,
    out: &mut F,
    spare: &mut Spare,
) -> Option<u64> {
    loop {
        let d = q.front_mut()?;
        if !d.missed_reported {
            d.missed_reported = true;
            if d.missed != Missed::None {
                out(Merged::Lost {
                    cpu,
                    missed: d.missed,
                });
            }
        }
        if d.pos < d.recs.len() {
            return Some(d.recs[d.pos].0);
        }
        if let Some(d) = q.pop_front() {
            spare.put(d);
        }
    }
}

/// Merges per-CPU streams of whole sub-buffers (files of pages as read from
/// `trace_pipe_raw`) in time order, keeping about one page per CPU in
/// memory. Returns the number of records emitted.
pub fn merge_streams(
    layout: PageLayout,
    streams: Vec<(usize, Box<dyn std::io::Read>)>,
    out: &mut dyn FnMut(Merged<'_>),
) -> Result<u64, Error> {
    let mut m = Merger::new(layout);
    let mut live: Vec<(usize, Box<dyn std::io::Read>)> = streams;
    let size = layout.subbuf_size;
    loop {
        // top up: every live CPU gets at least one queued page with records
        let mut i = 0;
        while i < live.len() {
            let cpu = live[i].0;
            let mut ended = false;
            while m
                .queues
                .get(cpu)
                .is_none_or(|q| q.iter().all(|d| d.pos >= d.recs.len()))
            {
                // a reused buffer keeps its old bytes: only a short one's
                // tail is zeroed, and the read overwrites what is used
                let mut page = m.spare.pages.pop().unwrap_or_default();
                page.resize(size, 0);
                let n = read_full(&mut live[i].1, &mut page).map_err(|reason| Error::Io {
                    path: format!("cpu{cpu} stream").into(),
                    reason,
                })?;
                if n == 0 {
                    ended = true;
                    break;
                }
                page.truncate(n);
                m.push(cpu, page);
            }
            if ended {
                live.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if live.is_empty() {
            m.flush(out);
            return Ok(m.records());
        }
        let limit = live
            .iter()
            .filter_map(|(cpu, _)| m.newest(*cpu))
            .min()
            .unwrap_or(u64::MAX);
        m.flush_until(limit, out);
    }
}

/// Reads until `buf` is full or the stream ends (a recorded CPU's pages:
/// a short count means the stream ended inside a sub-buffer).
pub fn read_full(r: &mut dyn std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(ts: u64, deltas: &[u32], missed: Option<u64>) -> Vec<u8> {
        let mut body = Vec::new();
        for d in deltas {
            body.extend_from_slice(&(1 | d << 5).to_le_bytes());
            body.extend_from_slice(&d.to_le_bytes());
        }
        let mut commit = body.len() as u64;
        if let Some(m) = missed {
            commit |= crate::RB_MISSED_EVENTS | crate::RB_MISSED_STORED;
            body.extend_from_slice(&m.to_le_bytes());
        }
        let mut p = ts.to_le_bytes().to_vec();
        p.extend_from_slice(&commit.to_le_bytes());
        p.extend_from_slice(&body);
        p
    }

    #[test]
    fn merges_in_time_order() {
        let layout = PageLayout {
            endian: crate::Endian::Little,
            ..PageLayout::native(4096)
        };
        let mut m = Merger::new(layout);
        m.push(0, page(10, &[0, 5, 5], None)); // 10 15 20
        m.push(1, page(12, &[0, 1, 10], Some(7))); // 12 13 23
        m.push(0, page(30, &[0], None)); // 30
        m.push(1, vec![1, 2, 3]); // bad page
        let mut seen = Vec::new();
        m.flush(&mut |it| match it {
            Merged::Record { cpu, ts, .. } => seen.push(format!("{cpu}@{ts}")),
            Merged::Lost { cpu, missed } => seen.push(format!("lost{cpu}:{}", missed.count())),
            Merged::Bad { cpu, .. } => seen.push(format!("bad{cpu}")),
        });
        assert_eq!(
            seen,
            [
                "bad1", "lost1:7", "0@10", "1@12", "1@13", "0@15", "0@20", "1@23", "0@30"
            ]
        );
        assert_eq!(m.records(), 7);
        // bounded: only up to a limit
        m.push(0, page(100, &[0, 10], None)); // 100 110
        m.push(1, page(105, &[0], None)); // 105
        assert_eq!(m.newest(0), Some(110));
        let mut seen = Vec::new();
        m.flush_until(105, &mut |it| {
            if let Merged::Record { ts, .. } = it {
                seen.push(ts)
            }
        });
        assert_eq!(seen, [100, 105]);
        assert_eq!(m.pages(), 1);
    }

    #[test]
    fn streams_merge_with_bounded_memory() {
        let layout = PageLayout {
            endian: crate::Endian::Little,
            ..PageLayout::native(64)
        };
        let pad = |mut p: Vec<u8>| {
            p.resize(64, 0);
            p
        };
        let cpu0 = [pad(page(10, &[0, 10], None)), pad(page(40, &[0], None))].concat();
        let cpu1 = [pad(page(15, &[0], Some(2))), pad(page(50, &[0, 1], None))].concat();
        let mut seen = Vec::new();
        let n = merge_streams(
            layout,
            vec![
                (0, Box::new(std::io::Cursor::new(cpu0))),
                (1, Box::new(std::io::Cursor::new(cpu1))),
            ],
            &mut |it| match it {
                Merged::Record { cpu, ts, .. } => seen.push(format!("{cpu}@{ts}")),
                Merged::Lost { cpu, missed } => seen.push(format!("lost{cpu}:{}", missed.count())),
                Merged::Bad { cpu, error } => panic!("{cpu}: {error}"),
            },
        )
        .unwrap();
        assert_eq!(n, 6);
        // a loss is reported as soon as its page reaches the head of its CPU
        assert_eq!(
            seen,
            ["lost1:2", "0@10", "1@15", "0@20", "0@40", "1@50", "1@51"]
        );
    }

    /// Runs `f` on a thread and fails the test when it takes longer than
    /// `secs` (a hang becomes a failure, not a stuck test run).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .expect("hung: no result in time")
    }

    /// A CPU whose time stamps go backwards (a corrupt recording: a page
    /// stamped later than the records after it) spun `merge_streams`
    /// forever: the flush limit was the last record's stamp, below the
    /// CPU's first queued record, so nothing was handed out and nothing
    /// more was read.
    #[test]
    fn merge_streams_ends_when_time_goes_backwards() {
        let layout = PageLayout {
            endian: crate::Endian::Little,
            ..PageLayout::native(64)
        };
        let pad = |mut p: Vec<u8>| {
            p.resize(64, 0);
            p
        };
        // cpu 0: a page stamped just below 2^64 whose second record wraps
        // the clock round to 4
        let cpu0 = [
            pad(page(u64::MAX - 5, &[0, 10], None)),
            pad(page(200, &[0], None)),
        ]
        .concat();
        let cpu1 = [pad(page(60, &[0], None)), pad(page(300, &[0], None))].concat();
        let seen = within(10, move || {
            let mut seen = Vec::new();
            merge_streams(
                layout,
                vec![
                    (0, Box::new(std::io::Cursor::new(cpu0))),
                    (1, Box::new(std::io::Cursor::new(cpu1))),
                ],
                &mut |it| {
                    if let Merged::Record { cpu, ts, .. } = it {
                        seen.push((cpu, ts));
                    }
                },
            )
            .unwrap();
            seen
        });
        assert_eq!(seen.len(), 5, "{seen:?}");
        let mut m = Merger::new(layout);
        m.push(1, page(7, &[0], None));
        m.push(0, page(u64::MAX - 5, &[0, 10], None));
        m.push(0, page(5, &[0], None));
        assert_eq!(m.backwards(), [1, 0], "counted where it happens");
        assert_eq!(m.newest(0), Some(u64::MAX - 5), "the latest, not the last");
    }

    /// Long runs from one CPU, equal time stamps across CPUs and flush
    /// limits falling inside runs: the order is always (time stamp, CPU),
    /// each CPU's records in page order, as a plain sort gives.
    #[test]
    fn runs_and_ties_follow_time_then_cpu() {
        let layout = PageLayout {
            endian: crate::Endian::Little,
            ..PageLayout::native(4096)
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..20 {
            let mut m = Merger::new(layout);
            let mut want = Vec::new();
            let mut ts = [100u64; 3];
            for _ in 0..6 {
                let cpu = rnd(3) as usize;
                // deltas of 0 and 1 make ties; bursts make runs
                let deltas: Vec<u32> = (0..1 + rnd(12)).map(|_| rnd(3) as u32).collect();
                let start = ts[cpu] + rnd(4);
                let mut t = start;
                for d in &deltas {
                    t += u64::from(*d);
                    want.push((t, cpu));
                }
                ts[cpu] = t;
                m.push(cpu, page(start, &deltas, None));
            }
            want.sort(); // stable: within (ts, cpu), page order
            let limit = 100 + rnd(30);
            let mut seen = Vec::new();
            m.flush_until(limit, &mut |it| {
                if let Merged::Record { cpu, ts, .. } = it {
                    seen.push((ts, cpu));
                }
            });
            let cut = want.iter().take_while(|r| r.0 <= limit).count();
            assert_eq!(seen, want[..cut], "round {round} limit {limit}");
            m.flush(&mut |it| {
                if let Merged::Record { cpu, ts, .. } = it {
                    seen.push((ts, cpu));
                }
            });
            assert_eq!(seen, want, "round {round}");
        }
    }
}
