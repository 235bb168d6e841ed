//! K-way merge of per-CPU record streams by time stamp.
//!
//! Each CPU's pages arrive in order and each page's records are in time
//! order, so a heap over the head record of every CPU yields a global order,
//! as the kernel's own `trace` iterator does (`__find_next_entry()` in
//! kernel/trace/trace.c). The merger owns the pages it is given and emits
//! when asked to flush (after each reading round, or at the end). It does not
//! read files and does not decode event fields.

use crate::{Error, Missed, Page, PageLayout};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

struct Decoded {
    bytes: Vec<u8>,
    /// (ts, start, end) of each record, relative to `bytes`.
    recs: Vec<(u64, u32, u32)>,
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
}

impl Merger {
    /// A merger for pages of `layout`.
    pub fn new(layout: PageLayout) -> Merger {
        Merger {
            layout,
            queues: Vec::new(),
            errors: Vec::new(),
            records: 0,
        }
    }

    /// Records handed out so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Adds a page read from `cpu`.
    pub fn push(&mut self, cpu: usize, bytes: Vec<u8>) {
        if self.queues.len() <= cpu {
            self.queues.resize_with(cpu + 1, VecDeque::new);
        }
        let (recs, missed) = match Page::parse(self.layout, &bytes) {
            Ok(p) => {
                let base = bytes.as_ptr() as usize;
                let mut recs = Vec::new();
                for r in p.records() {
                    match r {
                        Ok(r) => {
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
            pos: 0,
            missed,
            missed_reported: false,
        });
    }

    /// Emits every buffered record in time-stamp order (ties: lower CPU
    /// first), with loss reports before the records of the page they
    /// precede and decode errors first.
    pub fn flush(&mut self, out: &mut dyn FnMut(Merged<'_>)) {
        for (cpu, error) in self.errors.drain(..) {
            out(Merged::Bad { cpu, error });
        }
        let mut heap = BinaryHeap::new();
        for (cpu, q) in self.queues.iter_mut().enumerate() {
            if let Some(ts) = head(q, cpu, out) {
                heap.push(Reverse((ts, cpu)));
            }
        }
        while let Some(Reverse((_, cpu))) = heap.pop() {
            let q = &mut self.queues[cpu];
            let Some(d) = q.front_mut() else { continue };
            let (ts, s, e) = d.recs[d.pos];
            d.pos += 1;
            self.records += 1;
            out(Merged::Record {
                cpu,
                ts,
                data: &d.bytes[s as usize..e as usize],
            });
            if let Some(ts) = head(q, cpu, out) {
                heap.push(Reverse((ts, cpu)));
            }
        }
    }
}

/// Time stamp of the next record of a CPU queue, reporting losses and
/// dropping finished pages on the way.
fn head(q: &mut VecDeque<Decoded>, cpu: usize, out: &mut dyn FnMut(Merged<'_>)) -> Option<u64> {
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
        q.pop_front();
    }
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
    }
}
