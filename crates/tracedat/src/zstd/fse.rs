//! Finite State Entropy encoding as zstd uses it (RFC 8878 section 4.1):
//! normalizing symbol counts to a table of `1 << log` cells, writing that
//! distribution as an FSE table description (section 4.1.1), spreading
//! the symbols over the cells exactly as a decoder does, and encoding
//! symbols backward so that a decoder reading the stream from its end gets
//! them in order. Not a decoder.

use super::bits::BitWriter;

/// A distribution: per symbol its share of the `1 << log` cells; -1 is the
/// format's "less than one" share (one cell, only in predefined tables).
pub(crate) struct Norm {
    pub(crate) log: u32,
    pub(crate) counts: Vec<i16>,
}

/// `counts` (at least two symbols present, total > 0) scaled to
/// `1 << log` cells, every present symbol keeping at least one cell.
/// `log` must leave room: `1 << log` > 2 × the number of symbols present.
pub(crate) fn normalize(counts: &[u32], log: u32) -> Norm {
    let size = 1i64 << log;
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let mut norm: Vec<i16> = vec![0; counts.len()];
    let mut rest: Vec<(u64, usize)> = Vec::new();
    let mut sum = 0i64;
    for (s, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let scaled = u64::from(c) * size as u64;
        let n = (scaled / total).max(1);
        norm[s] = n as i16;
        sum += n as i64;
        rest.push((scaled % total, s));
    }
    if sum < size {
        // the largest remainders first, then round-robin over the largest
        rest.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        let mut i = 0;
        while sum < size {
            let s = rest[i % rest.len()].1;
            norm[s] += 1;
            sum += 1;
            i += 1;
        }
    }
    while sum > size {
        // take from the symbol whose cost grows least: the largest share
        let (s, _) = norm
            .iter()
            .enumerate()
            .max_by_key(|&(_, &n)| n)
            .unwrap_or((0, &0));
        norm[s] -= 1;
        sum -= 1;
    }
    Norm { log, counts: norm }
}

/// The table log zstd would pick for `total` symbols of which the largest
/// is `max_symbol`, within `[5, max_log]`.
pub(crate) fn table_log(total: usize, max_symbol: usize, max_log: u32) -> u32 {
    let hb = |x: usize| usize::BITS - 1 - x.max(1).leading_zeros();
    let mut log = max_log;
    let from_src = hb(total.saturating_sub(1)).saturating_sub(2);
    if from_src < log {
        log = from_src;
    }
    let min_bits = (hb(total) + 1).min(hb(max_symbol) + 2);
    if min_bits > log {
        log = min_bits;
    }
    // every present symbol needs a cell, with room to spare
    log.clamp(5, max_log)
}

impl Norm {
    /// Appends the FSE table description of this distribution (RFC 8878
    /// 4.1.1). The last symbol with a non-zero share must be the last
    /// entry of `counts` that is non-zero.
    pub(crate) fn write_description(&self, out: &mut Vec<u8>) {
        let mut w = BitWriter::new(out);
        w.add(self.log - 5, 4);
        let size = 1i32 << self.log;
        let mut remaining = size + 1;
        let mut threshold = size;
        let mut bits = self.log + 1;
        let last = self.counts.iter().rposition(|&c| c != 0).unwrap_or(0);
        let mut s = 0usize;
        let mut previous0 = false;
        while s <= last && remaining > 1 {
            if previous0 {
                let start = s;
                while self.counts[s] == 0 {
                    s += 1;
                }
                let mut zeros = s - start;
                while zeros >= 24 {
                    w.add(0xffff, 16);
                    zeros -= 24;
                }
                while zeros >= 3 {
                    w.add(3, 2);
                    zeros -= 3;
                }
                w.add(zeros as u32, 2);
            }
            let count = i32::from(self.counts[s]);
            s += 1;
            let max = (2 * threshold - 1) - remaining;
            remaining -= count.abs();
            let mut value = count + 1;
            if value >= threshold {
                value += max;
            }
            let n = if value < max { bits - 1 } else { bits };
            w.add(value as u32, n);
            previous0 = value == 1;
            while remaining < threshold {
                bits -= 1;
                threshold >>= 1;
            }
        }
        w.flush_bytes();
    }

    /// Where the decoder puts each symbol: the cell order of RFC 8878
    /// 4.1.1 (the "less than one" symbols at the end, the others spread
    /// with step `5/8 size + 3`).
    fn spread(&self) -> Vec<u8> {
        let size = 1usize << self.log;
        let mut cells = vec![0u8; size];
        let mut high = size - 1;
        for (s, &c) in self.counts.iter().enumerate() {
            if c == -1 {
                cells[high] = s as u8;
                high = high.wrapping_sub(1);
            }
        }
        let step = (size >> 1) + (size >> 3) + 3;
        let mask = size - 1;
        let mut pos = 0usize;
        for (s, &c) in self.counts.iter().enumerate() {
            for _ in 0..c.max(0) {
                cells[pos] = s as u8;
                pos = (pos + step) & mask;
                while pos > high {
                    pos = (pos + step) & mask;
                }
            }
        }
        cells
    }

    /// The encoding table of this distribution.
    pub(crate) fn encoder(&self) -> Encoder {
        let size = 1usize << self.log;
        let cells = self.spread();
        let nsym = self.counts.len();
        let mut start = vec![0u32; nsym + 1];
        for s in 0..nsym {
            let c = i32::from(self.counts[s]);
            let n = if c == -1 { 1 } else { c.max(0) };
            start[s + 1] = start[s] + n as u32;
        }
        let mut next = start.clone();
        let mut states = vec![0u16; size];
        for (u, &s) in cells.iter().enumerate() {
            let s = usize::from(s);
            states[next[s] as usize] = (size + u) as u16;
            next[s] += 1;
        }
        let sym = (0..nsym)
            .map(|s| {
                let n = start[s + 1] - start[s];
                let hb = if n == 0 { 0 } else { 31 - n.leading_zeros() };
                Sym {
                    n,
                    first: start[s],
                    bits: self.log.saturating_sub(hb),
                }
            })
            .collect();
        Encoder {
            log: self.log,
            states,
            sym,
        }
    }

    /// Estimated cost in bits of coding `counts` with this distribution
    /// (`None` when a symbol present has no cell).
    pub(crate) fn cost(&self, counts: &[u32]) -> Option<u64> {
        let mut bits = 0f64;
        for (s, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let n = match self.counts.get(s) {
                Some(&-1) => 1.0,
                Some(&n) if n > 0 => f64::from(n),
                _ => return None,
            };
            bits += f64::from(c) * (f64::from(self.log) - n.log2());
        }
        Some(bits as u64 + 1)
    }
}

#[derive(Clone, Copy)]
struct Sym {
    /// Cells the symbol has.
    n: u32,
    /// Its first entry in `states`.
    first: u32,
    /// Bits emitted from a state when they make `state >> bits` reach `n`.
    bits: u32,
}

/// A symbol-to-state encoding table.
pub(crate) struct Encoder {
    log: u32,
    /// Per symbol (from `Sym::first`), its cells in increasing order, each
    /// as `size + cell`.
    states: Vec<u16>,
    sym: Vec<Sym>,
}

impl Encoder {
    /// The state to start from when `s` is the last symbol coded: its
    /// first cell, whose transition always reads at least one bit unless
    /// the symbol owns every cell.
    #[inline]
    pub(crate) fn init(&self, s: u8) -> u32 {
        u32::from(self.states[self.sym[usize::from(s)].first as usize])
    }

    /// Codes `s` from `state` (the state of the symbol that follows it):
    /// writes the bits the decoder reads to get there, returns the new state.
    #[inline]
    pub(crate) fn encode(&self, w: &mut BitWriter<'_>, state: u32, s: u8) -> u32 {
        let t = self.sym[usize::from(s)];
        let mut bits = t.bits;
        if (state >> bits) < t.n {
            bits -= 1;
        }
        w.add(state & ((1 << bits) - 1), bits);
        let k = (state >> bits) - t.n;
        u32::from(self.states[(t.first + k) as usize])
    }

    /// Writes the final state (read first by the decoder).
    #[inline]
    pub(crate) fn flush(&self, w: &mut BitWriter<'_>, state: u32) {
        w.add(state - (1 << self.log), self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_sums_to_table() {
        let counts = [1000, 1, 1, 0, 5, 77, 0, 3];
        for log in 5..=9 {
            let n = normalize(&counts, log);
            let sum: i32 = n.counts.iter().map(|&c| i32::from(c)).sum();
            assert_eq!(sum, 1 << log);
            for (c, k) in counts.iter().zip(&n.counts) {
                assert_eq!(*c == 0, *k == 0);
            }
        }
    }
}
