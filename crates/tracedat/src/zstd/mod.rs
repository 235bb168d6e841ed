//! A zstd compressor (RFC 8878) written for trace.dat sections and CPU
//! chunks: standard frames (single segment, content size stated, no
//! checksum) that any zstd decoder reads. A hash-chain matcher over a
//! window of up to 256 KiB with lazy matching and the format's
//! three repeat offsets (fixed-size trace records repeat offsets all the
//! time), Huffman-coded literals, and per block the cheapest of the
//! predefined, RLE and custom FSE tables for each sequence code. A second,
//! fast strategy ([`Compressor::compress_fast`], for CPU data chunks):
//! one table entry per hash and no chain, the repeat offsets tried first,
//! one lazy step, few positions inside a match entered; streamed, with a
//! larger table, for the kallsyms text
//! ([`Compressor::compress_stream_fast`]). Keeps no dictionary. The
//! decompressor is [`decompress`] (`decode.rs`), or [`Decompressor`] to
//! reuse its buffers from one input to the next.

mod bits;
mod decode;
mod fse;
mod huf;
mod xxhash;

pub use decode::{DecodeError, Decompressor, decompress};

use bits::BitWriter;

/// Largest distance a match reaches back (and the chain's size at most).
pub(crate) const WINDOW: usize = 1 << 18;
/// Largest block (the format's limit), for the encoder and the decoder.
const BLOCK: usize = 128 << 10;
/// A zstd frame's magic number (little-endian at its start).
const MAGIC: u32 = 0xFD2F_B528;
const HASH_LOG: u32 = 16;
/// Chain candidates looked at per position (on a 16 MB recording, 8
/// against 16 costs 1.7% in size and saves a fifth of the time).
const DEPTH: u32 = 8;
/// Positions further on tried for a better match before taking one (lazy
/// matching; two instead of none saves 11% on trace data).
const LAZY: usize = 2;
/// Inside a match longer than twice this, only its first and last this
/// many positions enter the chain.
const SPARSE: usize = 16;
/// A match this long is taken without looking further (down the chain
/// or at the next positions).
const NICE: usize = 64;
const MIN_MATCH: usize = 4;

const LL_BASE: [u32; 36] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 64,
    128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
];
const LL_BITS: [u8; 36] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11,
    12, 13, 14, 15, 16,
];
const ML_BASE: [u32; 53] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
    28, 29, 30, 31, 32, 33, 34, 35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027,
    2051, 4099, 8195, 16387, 32771, 65539,
];
const ML_BITS: [u8; 53] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];
/// The predefined distributions (RFC 8878 3.1.1.3.2.2).
const LL_DEFAULT: [i16; 36] = [
    4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1,
    -1, -1, -1, -1,
];
const ML_DEFAULT: [i16; 53] = [
    1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
];
const OF_DEFAULT: [i16; 29] = [
    1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1,
];

#[inline]
fn highbit(x: u32) -> u32 {
    31 - x.max(1).leading_zeros()
}

/// The literal length code of each length below 64.
const LL_CODE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut ll = 0;
    while ll < 64 {
        let mut c = 0;
        while c + 1 < LL_BASE.len() && LL_BASE[c + 1] <= ll as u32 {
            c += 1;
        }
        t[ll] = c as u8;
        ll += 1;
    }
    t
};

/// The match length code of each length from 3 to 130 (index: length - 3).
const ML_CODE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let ml = i as u32 + 3;
        let mut c = 0;
        while c + 1 < ML_BASE.len() && ML_BASE[c + 1] <= ml {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
};

#[inline]
fn ll_code(ll: u32) -> u8 {
    if ll >= 64 {
        (highbit(ll) + 19) as u8
    } else {
        LL_CODE[ll as usize]
    }
}

#[inline]
fn ml_code(ml: u32) -> u8 {
    if ml >= 131 {
        (highbit(ml - 3) + 36) as u8
    } else {
        ML_CODE[ml.saturating_sub(3) as usize]
    }
}

/// One sequence: literals before it, match length, offset value as the
/// format codes it (1-3 a repeat offset, else the distance + 3).
#[derive(Clone, Copy)]
struct Seq {
    ll: u32,
    ml: u32,
    off: u32,
}

/// A reusable compressor: its hash head and chain tables are kept between
/// frames (each frame still compresses on its own).
pub struct Compressor {
    head: Vec<u32>,
    chain: Vec<u32>,
    /// Number the next frame's first byte gets in the tables (earlier
    /// frames' entries are below it and so ignored).
    next: u32,
    lits: Vec<u8>,
    seqs: Vec<Seq>,
    body: Vec<u8>,
    tmp: Vec<u8>,
    /// [`Compressor::compress_parts`]'s buffer.
    window: Vec<u8>,
    /// The fast strategy's hash table: per hash, the number of the last
    /// position with it (entries below a frame's first number are stale).
    fast: Vec<u32>,
    /// The same for streamed sections ([`META_LOG`] bits).
    meta: Vec<u32>,
}

impl Default for Compressor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

/// `src` compressed as one zstd frame.
pub fn compress(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Compressor::new().compress(src, &mut out);
    out
}

struct Parse<'a> {
    src: &'a [u8],
    head: &'a mut [u32],
    chain: &'a mut [u32],
    mask: usize,
    /// Number of `src[0]` in the tables.
    base: u32,
    /// Lowest number a match may start at (the frame's first byte, or the
    /// oldest byte still in `src`).
    lo: u32,
    reps: [u32; 3],
}

#[inline]
fn read32(src: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(src[i..i + 4].try_into().unwrap_or([0; 4]))
}

#[inline]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_LOG)) as usize
}

/// Length of the common prefix of `src[a..]` and `src[b..end]` (a < b).
#[inline]
fn common(src: &[u8], a: usize, b: usize, end: usize) -> usize {
    let limit = end - b;
    // a < b: src[a..a + limit] lies before end
    let (x, y) = (&src[a..a + limit], &src[b..end]);
    let mut n = 0;
    while n + 8 <= limit {
        let d = read64(x, n) ^ read64(y, n);
        if d != 0 {
            return n + (d.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < limit && x[n] == y[n] {
        n += 1;
    }
    n
}

#[inline]
fn read64(src: &[u8], i: usize) -> u64 {
    match src.get(i..i + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        None => 0,
    }
}

/// Appends `src[from..to]` to `lits`: a short run (most of them, between
/// matches) as one 16-byte copy cut back, without a call to memcpy.
#[inline]
fn push_lits(lits: &mut Vec<u8>, src: &[u8], from: usize, to: usize) {
    let n = to - from;
    match src.get(from..from + 16) {
        Some(b) if n <= 16 => {
            let len = lits.len();
            lits.extend_from_slice(&<[u8; 16]>::try_from(b).unwrap_or([0; 16]));
            lits.truncate(len + n);
        }
        _ => lits.extend_from_slice(&src[from..to]),
    }
}

/// How much a match is worth (libzstd's lazy heuristic: 4 per byte minus
/// the offset value's bits).
#[inline]
fn gain(len: usize, off: u32) -> i64 {
    len as i64 * 4 - i64::from(highbit(off))
}

impl Parse<'_> {
    /// Enters position `p` in the hash chain.
    #[inline]
    fn insert(&mut self, p: usize) {
        let h = hash(read32(self.src, p));
        let g = self.base + p as u32;
        self.chain[g as usize & self.mask] = self.head[h];
        self.head[h] = g;
    }

    /// The best match at `p` (ending by `end`) as (length, offset value),
    /// with `ll` literals before it; enters `p` in the chain.
    fn find(&mut self, p: usize, end: usize, ll: usize, depth: u32) -> Option<(usize, u32)> {
        let src = self.src;
        let mut best: Option<(usize, u32)> = None;
        let mut best_gain = 0i64;
        let reps = if ll > 0 {
            [self.reps[0], self.reps[1], self.reps[2]]
        } else {
            [self.reps[1], self.reps[2], self.reps[0].wrapping_sub(1)]
        };
        let first = read32(src, p);
        for (k, &r) in reps.iter().enumerate() {
            let r = r as usize;
            if r == 0 || r > p || r > self.mask || read32(src, p - r) != first {
                continue;
            }
            let n = common(src, p - r, p, end);
            if n >= MIN_MATCH {
                let g = gain(n, k as u32 + 1);
                if g > best_gain {
                    best = Some((n, k as u32 + 1));
                    best_gain = g;
                }
            }
        }
        let h = hash(first);
        let mut cand = self.head[h];
        let here = self.base + p as u32;
        self.chain[here as usize & self.mask] = cand;
        self.head[h] = here;
        if best.is_some_and(|(n, _)| n >= NICE) {
            return best;
        }
        let lowest = here.saturating_sub(self.mask as u32).max(self.lo);
        let mut depth = depth;
        // a candidate must match the first four bytes and, to beat the
        // best so far, the byte just past it
        let mut top = best.map_or(MIN_MATCH - 1, |(n, _)| n);
        while cand >= lowest && cand < here && depth > 0 {
            depth -= 1;
            let c = (cand - self.base) as usize;
            if p + top < end && src[c + top] == src[p + top] && read32(src, c) == first {
                let n = common(src, c, p, end);
                let off = (p - c) as u32 + 3;
                let g = gain(n, off);
                if g > best_gain && g > 4 * MIN_MATCH as i64 - 12 {
                    best = Some((n, off));
                    best_gain = g;
                    top = top.max(n);
                    if n >= NICE {
                        break;
                    }
                }
            } else if p + top >= end {
                break;
            }
            let next = self.chain[cand as usize & self.mask];
            if next >= cand {
                break;
            }
            cand = next;
        }
        best
    }

    /// The distance an offset value stands for with `ll` literals before,
    /// and the repeat offsets updated as the decoder updates them.
    fn take(&mut self, off: u32, ll: usize) -> u32 {
        take_rep(&mut self.reps, off, ll)
    }
}

/// The distance offset value `off` stands for with `ll` literals before,
/// `reps` updated as the decoder updates them.
fn take_rep(reps: &mut [u32; 3], off: u32, ll: usize) -> u32 {
    if off > 3 {
        *reps = [off - 3, reps[0], reps[1]];
        return off - 3;
    }
    let k = if ll == 0 { off } else { off - 1 } as usize;
    let d = match k {
        0 => reps[0],
        1 => reps[1],
        2 => reps[2],
        _ => reps[0].wrapping_sub(1),
    };
    match k {
        0 => {}
        1 => *reps = [d, reps[0], reps[2]],
        _ => *reps = [d, reps[0], reps[1]],
    }
    d
}

impl Compressor {
    /// A compressor with empty tables (they grow on first use).
    pub fn new() -> Compressor {
        Compressor {
            head: Vec::new(),
            chain: Vec::new(),
            next: 1,
            lits: Vec::new(),
            seqs: Vec::new(),
            body: Vec::new(),
            tmp: Vec::new(),
            window: Vec::new(),
            fast: Vec::new(),
            meta: Vec::new(),
        }
    }

    /// Appends `src` compressed as one zstd frame to `out`.
    pub fn compress(&mut self, src: &[u8], out: &mut Vec<u8>) {
        self.compress_with(src, Strategy::Chain, out);
    }

    /// Appends `src` compressed as one zstd frame to `out` with the fast
    /// strategy: about twice the speed of [`Compressor::compress`]; on the
    /// CPU pages of ktrace's uprobe recordings in 40 KiB frames from 3%
    /// smaller to 6% larger, on data with distant repeats much larger
    /// (see `Strategy::Fast`).
    pub fn compress_fast(&mut self, src: &[u8], out: &mut Vec<u8>) {
        self.compress_with(src, Strategy::Fast, out);
    }

    fn compress_with(&mut self, src: &[u8], strategy: Strategy, out: &mut Vec<u8>) {
        frame_header(src.len(), out);
        if src.is_empty() {
            // one empty raw block, the last
            out.extend_from_slice(&[1, 0, 0]);
            return;
        }
        let frame = self.start_frame(src.len());
        let mut reps = [1, 4, 8];
        let mut start = 0;
        while start < src.len() {
            let end = (start + BLOCK).min(src.len());
            self.block(
                src,
                frame,
                frame,
                start,
                end,
                end == src.len(),
                &mut reps,
                strategy,
                out,
            );
            start = end;
        }
    }

    /// Appends `parts`, one after the other, compressed as one zstd frame
    /// to `out`, without gathering them: a block at a time goes through a
    /// buffer that keeps the window behind it.
    pub fn compress_parts(&mut self, parts: &[&[u8]], out: &mut Vec<u8>) {
        if let [one] = parts {
            return self.compress(one, out);
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let (mut part, mut off) = (0usize, 0usize);
        let read = |buf: &mut [u8]| {
            let mut filled = 0;
            while filled < buf.len() {
                let p = parts[part];
                let n = (p.len() - off).min(buf.len() - filled);
                buf[filled..filled + n].copy_from_slice(&p[off..off + n]);
                filled += n;
                off += n;
                if off == p.len() {
                    part += 1;
                    off = 0;
                }
            }
            Ok::<(), std::convert::Infallible>(())
        };
        let write = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
        let Ok(()) = self.compress_stream(total, read, write);
    }

    /// Compresses `total` bytes as one zstd frame (content size stated up
    /// front), streaming: `read(buf)` must fill `buf` with the next bytes
    /// (a block, at most 128 KiB, at a time), and the frame goes to
    /// `write` a block at a time. What is held is the window behind the
    /// block (at most 256 KiB), the block and its compressed form.
    pub fn compress_stream<E>(
        &mut self,
        total: usize,
        read: impl FnMut(&mut [u8]) -> Result<(), E>,
        write: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.stream_with(total, Strategy::Chain, read, write)
    }

    /// [`Compressor::compress_stream`] with the fast strategy and a larger
    /// table than CPU chunks get (see
    /// `Strategy::FastWide`): for the kallsyms text, whose chain
    /// compression cost more than a 200,000-event recording's CPU data.
    pub fn compress_stream_fast<E>(
        &mut self,
        total: usize,
        read: impl FnMut(&mut [u8]) -> Result<(), E>,
        write: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.stream_with(total, Strategy::FastWide, read, write)
    }

    fn stream_with<E>(
        &mut self,
        total: usize,
        strategy: Strategy,
        mut read: impl FnMut(&mut [u8]) -> Result<(), E>,
        mut write: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut out = Vec::new();
        frame_header(total, &mut out);
        if total == 0 {
            out.extend_from_slice(&[1, 0, 0]);
            return write(&out);
        }
        let frame = self.start_frame(total);
        let keep = self.chain.len();
        let mut buf = std::mem::take(&mut self.window);
        buf.clear();
        // number of buf[0] in the tables
        let mut at = frame;
        let mut done = 0usize;
        let mut reps = [1, 4, 8];
        while done < total {
            if buf.len() > keep {
                let drop = buf.len() - keep;
                buf.drain(..drop);
                at += drop as u32;
            }
            let start = buf.len();
            let want = BLOCK.min(total - done);
            buf.resize(start + want, 0);
            if let Err(e) = read(&mut buf[start..]) {
                self.window = buf;
                return Err(e);
            }
            done += want;
            let end = buf.len();
            self.block(
                &buf,
                at,
                at,
                start,
                end,
                done == total,
                &mut reps,
                strategy,
                &mut out,
            );
            let w = write(&out);
            out.clear();
            if let Err(e) = w {
                self.window = buf;
                return Err(e);
            }
        }
        self.window = buf;
        Ok(())
    }

    /// Makes the tables ready for a frame of `len` bytes; returns the
    /// number of its first byte.
    fn start_frame(&mut self, len: usize) -> u32 {
        let size = len.next_power_of_two().clamp(1 << 12, WINDOW);
        if self.chain.len() < size {
            self.chain = vec![0; size];
        }
        if self.head.is_empty() {
            self.head = vec![0; 1 << HASH_LOG];
        }
        if (u32::MAX - self.next) as usize <= len + 1 {
            self.head.fill(0);
            self.chain.fill(0);
            self.fast.fill(0);
            self.meta.fill(0);
            self.next = 1;
        }
        let frame = self.next;
        self.next += len as u32 + 1;
        frame
    }

    /// Compresses `src[start..end]` as one block (`base`: number of
    /// `src[0]`; `lo`: lowest number a match may reach) and appends it.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        src: &[u8],
        base: u32,
        lo: u32,
        start: usize,
        end: usize,
        last: bool,
        reps: &mut [u32; 3],
        strategy: Strategy,
        out: &mut Vec<u8>,
    ) {
        let block = &src[start..end];
        let first = block[0];
        let flag = u32::from(last);
        if block.iter().all(|&b| b == first) {
            let h = flag | (1 << 1) | ((block.len() as u32) << 3);
            out.extend_from_slice(&h.to_le_bytes()[..3]);
            out.push(first);
            return;
        }
        self.lits.clear();
        self.seqs.clear();
        let new_reps = match strategy {
            Strategy::Chain => {
                let mut parse = Parse {
                    src,
                    mask: self.chain.len() - 1,
                    head: &mut self.head,
                    chain: &mut self.chain,
                    base,
                    lo,
                    reps: *reps,
                };
                parse_block(&mut parse, start, end, &mut self.lits, &mut self.seqs);
                parse.reps
            }
            Strategy::Fast | Strategy::FastWide => {
                let (table, log, lazy, ahead) = if strategy == Strategy::Fast {
                    (&mut self.fast, FAST_LOG, NICE, true)
                } else {
                    (&mut self.meta, META_LOG, WIDE_LAZY, false)
                };
                if table.is_empty() {
                    *table = vec![0; 1 << log];
                }
                let mut parse = Fast {
                    src,
                    table,
                    shift: 32 - log,
                    base,
                    lo,
                    reps: *reps,
                    lazy,
                    ahead,
                };
                parse.block(start, end, &mut self.lits, &mut self.seqs);
                parse.reps
            }
        };
        self.body.clear();
        encode_block(&self.lits, &self.seqs, &mut self.body, &mut self.tmp);
        if self.body.len() < block.len() {
            *reps = new_reps;
            let h = flag | (2 << 1) | ((self.body.len() as u32) << 3);
            out.extend_from_slice(&h.to_le_bytes()[..3]);
            out.extend_from_slice(&self.body);
        } else {
            // a raw block leaves the decoder's repeat offsets as they were
            let h = flag | ((block.len() as u32) << 3);
            out.extend_from_slice(&h.to_le_bytes()[..3]);
            out.extend_from_slice(block);
        }
    }
}

/// How a frame's matches are found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strategy {
    /// Hash chains, [`DEPTH`] candidates, lazy matching: the smaller
    /// output (metadata sections, written once).
    Chain,
    /// One candidate per hash, the repeat offsets tried first (the last
    /// distance alone, taken at once when it matches, then a byte or two
    /// on), one lazy step past a table match, a stride growing over
    /// literal runs: CPU data chunks.
    Fast,
    /// The fast strategy with a [`META_LOG`]-bit table and the lazy step
    /// only past table matches shorter than [`WIDE_LAZY`]: streamed
    /// sections (the kallsyms text). On a 6.18 host's 5,414,658 bytes of
    /// it (zbench under callgrind): 986,764 bytes in 313 M instructions;
    /// before the last distance was tried alone and the lazy step cut,
    /// 965,052 bytes in 388 M; the chain 848,212 bytes in 640 M (without
    /// any lazy step 1,016,981 bytes in 327 M, which made a 20,000-event
    /// recording larger than trace-cmd convert's libzstd one: 1,130,723
    /// bytes against 1,120,139).
    FastWide,
}

/// Hash bits of the fast strategy's table: 1,024 entries, so that what a
/// candidate points to is mostly recent (the record before, whose offset
/// the next matches repeat). On the CPU pages of two uprobe recordings,
/// 40 KiB frames: 14 bits 655,974 and 351,575 bytes, 12 bits 641,710,
/// 10 bits 595,863 and 325,538 (the chain strategy: 611,239 and 323,551),
/// 8 bits 551,779 but 4% more than 10 bits on trace-cmd's fixture.
const FAST_LOG: u32 = 10;
/// Over a run of literals the fast strategy steps one more byte every
/// `1 << FAST_SKIP` bytes (incompressible data is passed over quickly).
const FAST_SKIP: u32 = 8;
/// Repeat offsets the fast strategy tries.
const FAST_REPS: usize = 2;
/// Inside a match longer than twice this, only its first and last this
/// many positions enter the table.
const FAST_SPARSE: usize = 2;
/// Bytes past a position where the repeat offset fails that
/// [`Strategy::Fast`] tries the last distance at before the table (a
/// record's time delta changes, what follows repeats). On a 200,000-event
/// recording's pages (9,650,176 bytes, zbench under callgrind): none
/// 247.4 M instructions and 605,601 bytes, 1 byte 219.7 M and 614,048, 2
/// bytes 180.2 M and 561,087, 3 bytes 191.7 M and 607,967, 5 bytes
/// 193.3 M and 610,341; 2 bytes on a 1,000,000-event recording's
/// (52,379,648 bytes): 1,114 M against 1,252 M, 3,198,650 bytes against
/// 3,164,416.
const FAST_AHEAD: usize = 2;
/// A repeat-offset match this long is taken without looking at the
/// table's candidate (on real pages 24 against 64: 3% fewer
/// instructions, 62 bytes more of 656 KB).
const FAST_GOOD: usize = 24;

/// [`Strategy::FastWide`] looks one byte on (lazy matching) only past a
/// table match shorter than this ([`Strategy::Fast`]: [`NICE`]). On a
/// 6.18 host's kallsyms text (5,414,658 bytes): 16 bytes 975,120 bytes in
/// 328 M instructions, 8 bytes 986,764 in 313 M, [`NICE`] 969,968 in
/// 352 M. CPU pages need the lazy step: on a 200,000-event recording's,
/// 16 made them 20% larger (728,476 bytes against 605,601) and slower.
const WIDE_LAZY: usize = 8;

/// Hash bits of [`Strategy::FastWide`]'s table. On a 6.18 host's
/// kallsyms text (5,414,658 bytes), before [`WIDE_LAZY`]: 12 bits
/// 965,052 bytes, 14 bits 962,693, 16 bits 962,078.
const META_LOG: u32 = 12;

#[inline]
fn fast_hash(v: u32, shift: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> shift) as usize
}

/// The fast strategy's state over one block.
struct Fast<'a> {
    src: &'a [u8],
    table: &'a mut [u32],
    /// 32 less the table's hash bits.
    shift: u32,
    /// Number of `src[0]`.
    base: u32,
    /// Lowest number a match may start at.
    lo: u32,
    reps: [u32; 3],
    /// A table match shorter than this gets the lazy step.
    lazy: usize,
    /// Whether a position whose repeat offset fails tries the last
    /// distance up to [`FAST_AHEAD`] bytes on before the table.
    ahead: bool,
}

impl Fast<'_> {
    /// Enters position `p` in the table.
    #[inline]
    fn insert(&mut self, p: usize) {
        self.table[fast_hash(read32(self.src, p), self.shift)] = self.base + p as u32;
    }

    /// The match at `i` (ending by `end`, with literals from `anchor`)
    /// as (start, length, offset value): the repeat offsets first, then
    /// the table's candidate, extended backward over the literals down
    /// to `anchor`. Enters `i` in the table.
    #[inline]
    fn probe(&mut self, i: usize, anchor: usize, end: usize) -> Option<(usize, usize, u32)> {
        let src = self.src;
        let low = (self.lo - self.base) as usize;
        let cur = read32(src, i);
        // the distances offset values 1 and 2 stand for
        let (r1, r2) = if i > anchor {
            (self.reps[0], self.reps[1])
        } else {
            (self.reps[1], self.reps[2])
        };
        let mut found: Option<(usize, usize, u32)> = None;
        let mut best = 0;
        let r = r1 as usize;
        if r > 0 && i >= low + r && read32(src, i - r) == cur {
            let n = MIN_MATCH + common(src, i - r + MIN_MATCH, i + MIN_MATCH, end);
            found = Some((i, n, 1));
            best = gain(n, 1);
        }
        let r = r2 as usize;
        if FAST_REPS > 1
            && found.is_none_or(|(_, n, _)| n < FAST_GOOD)
            && r > 0
            && i >= low + r
            && read32(src, i - r) == cur
        {
            let n = MIN_MATCH + common(src, i - r + MIN_MATCH, i + MIN_MATCH, end);
            let g = gain(n, 2);
            if g > best {
                found = Some((i, n, 2));
                best = g;
            }
        }
        let h = fast_hash(cur, self.shift);
        let cand = self.table[h];
        let here = self.base + i as u32;
        self.table[h] = here;
        if found.is_some_and(|(_, n, _)| n >= FAST_GOOD)
            || cand < self.lo
            || cand >= here
            || here - cand > WINDOW as u32
        {
            return found;
        }
        let c = (cand - self.base) as usize;
        if read32(src, c) != cur {
            return found;
        }
        let mut n = MIN_MATCH + common(src, c + MIN_MATCH, i + MIN_MATCH, end);
        // backward over the literals
        let (mut at, mut c) = (i, c);
        while at > anchor && c > low && src[at - 1] == src[c - 1] {
            at -= 1;
            c -= 1;
            n += 1;
        }
        let off = (at - c) as u32 + 3;
        if gain(n, off) > best {
            found = Some((at, n, off));
        }
        found
    }

    /// Cuts `src[start..end]` into literals and sequences. At each
    /// position, when the distance offset value 1 stands for (the last
    /// one, or with no literals before, the one before it) matches, that
    /// match is taken at once, without the table or a lazy step; otherwise
    /// a [`Fast::probe`], and when it finds a table match shorter than
    /// `lazy`, one at the next position too (the better is taken); over
    /// literals the step grows.
    fn block(&mut self, start: usize, end: usize, lits: &mut Vec<u8>, seqs: &mut Vec<Seq>) {
        let src = self.src;
        let last = end.min(src.len().saturating_sub(3));
        let low = (self.lo - self.base) as usize;
        let mut anchor = start;
        let mut i = start;
        while i + MIN_MATCH <= last {
            let cur = read32(src, i);
            let ll = i - anchor;
            let r = if ll > 0 { self.reps[0] } else { self.reps[1] } as usize;
            // CPU data: the last distance a few bytes on (past a record's
            // changing time delta), offset value 1 there with literals
            // before it
            let r0 = self.reps[0] as usize;
            let ahead = || {
                (1..=FAST_AHEAD).find(|&k| {
                    i + k + MIN_MATCH <= last
                        && r0 > 0
                        && i + k >= low + r0
                        && read32(src, i + k - r0) == read32(src, i + k)
                })
            };
            let m = if r > 0 && i >= low + r && read32(src, i - r) == cur {
                let n = MIN_MATCH + common(src, i - r + MIN_MATCH, i + MIN_MATCH, end);
                self.table[fast_hash(cur, self.shift)] = self.base + i as u32;
                (i, n, 1)
            } else if let Some(k) = self.ahead.then(ahead).flatten() {
                let j = i + k;
                let n = MIN_MATCH + common(src, j - r0 + MIN_MATCH, j + MIN_MATCH, end);
                self.table[fast_hash(cur, self.shift)] = self.base + i as u32;
                (j, n, 1)
            } else {
                let Some(mut m) = self.probe(i, anchor, end) else {
                    i += 1 + ((i - anchor) >> FAST_SKIP);
                    continue;
                };
                if m.1 < self.lazy
                    && m.2 > 3
                    && i + 1 + MIN_MATCH <= last
                    && let Some(m2) = self.probe(i + 1, anchor, end)
                {
                    let rel = |m: (usize, usize, u32)| gain(m.1, m.2) - 4 * (m.0 as i64);
                    if rel(m2) > rel(m) + 4 {
                        m = m2;
                    }
                }
                m
            };
            let (at, len, off) = m;
            let ll = at - anchor;
            push_lits(lits, src, anchor, at);
            let d = take_rep(&mut self.reps, off, ll);
            debug_assert!(d as usize <= at - low);
            seqs.push(Seq {
                ll: ll as u32,
                ml: len as u32,
                off,
            });
            let from = (i + 2).max(at + 1);
            i = at + len;
            anchor = i;
            if i <= last {
                if i - from > 2 * FAST_SPARSE {
                    for q in (from..from + FAST_SPARSE).chain(i - FAST_SPARSE..i) {
                        self.insert(q);
                    }
                } else {
                    for q in from..i {
                        self.insert(q);
                    }
                }
            }
        }
        lits.extend_from_slice(&src[anchor..end]);
    }
}

/// The frame header: magic, descriptor (single segment, content size),
/// content size.
fn frame_header(len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC.to_le_bytes());
    let len = len as u64;
    if len < 256 {
        out.push(0x20);
        out.push(len as u8);
    } else if len < 65536 + 256 {
        out.push(0x60);
        out.extend_from_slice(&((len - 256) as u16).to_le_bytes());
    } else if len <= u64::from(u32::MAX) {
        out.push(0xA0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    } else {
        out.push(0xE0);
        out.extend_from_slice(&len.to_le_bytes());
    }
}

/// Cuts `src[start..end]` into literals and sequences (lazy matching, up
/// to two positions ahead).
fn parse_block(
    p: &mut Parse<'_>,
    start: usize,
    end: usize,
    lits: &mut Vec<u8>,
    seqs: &mut Vec<Seq>,
) {
    let src = p.src;
    // positions whose four bytes can be hashed
    let last = end.min(src.len().saturating_sub(3));
    let mut anchor = start;
    let mut i = start;
    while i + MIN_MATCH <= last {
        let Some((mut len, mut off)) = p.find(i, end, i - anchor, DEPTH) else {
            i += 1 + ((i - anchor) >> 7);
            continue;
        };
        let mut at = i;
        let mut inserted = i + 1;
        // lazy: a better match one or two bytes on
        for _ in 0..LAZY {
            if at + 1 + MIN_MATCH > last || len >= NICE {
                break;
            }
            let Some((l2, o2)) = p.find(at + 1, end, at + 1 - anchor, DEPTH) else {
                inserted = at + 2;
                break;
            };
            inserted = at + 2;
            if gain(l2, o2) > gain(len, off) + 4 {
                len = l2;
                off = o2;
                at += 1;
            } else {
                break;
            }
        }
        let ll = at - anchor;
        push_lits(lits, src, anchor, at);
        p.take(off, ll);
        seqs.push(Seq {
            ll: ll as u32,
            ml: len as u32,
            off,
        });
        let stop = (at + len).min(last);
        let from = inserted.max(at + 1);
        if stop > from + 2 * SPARSE {
            for q in from..from + SPARSE {
                p.insert(q);
            }
            for q in stop - SPARSE..stop {
                p.insert(q);
            }
        } else {
            for q in from..stop {
                p.insert(q);
            }
        }
        i = at + len;
        anchor = i;
    }
    lits.extend_from_slice(&src[anchor..end]);
}

/// Table choice for one kind of sequence code.
enum Coder {
    Rle,
    Fse(fse::Encoder),
}

/// Picks the cheapest mode for symbols `codes` (max symbol `max_sym`,
/// table log at most `max_log`), writes its table, returns the mode
/// number and the coder.
fn choose(
    codes: &[u8],
    default: &[i16],
    default_log: u32,
    max_log: u32,
    out: &mut Vec<u8>,
) -> (u8, Coder) {
    let mut counts = vec![0u32; default.len().max(64)];
    for &c in codes {
        counts[usize::from(c)] += 1;
    }
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    let present = counts.iter().filter(|&&c| c > 0).count();
    if present == 1 {
        out.push(last as u8);
        return (1, Coder::Rle);
    }
    let counts = &counts[..=last];
    let pre = fse::Norm {
        log: default_log,
        counts: default.to_vec(),
    };
    let pre_cost = pre.cost(counts);
    let log = fse::table_log(codes.len(), last, max_log);
    let norm = fse::normalize(counts, log);
    let mut desc = Vec::new();
    norm.write_description(&mut desc);
    let custom = norm
        .cost(counts)
        .unwrap_or(u64::MAX)
        .saturating_add(desc.len() as u64 * 8);
    match pre_cost {
        Some(c) if c <= custom => (0, Coder::Fse(pre.encoder())),
        _ => {
            out.extend_from_slice(&desc);
            (2, Coder::Fse(norm.encoder()))
        }
    }
}

/// A compressed block's content: literals section, sequences section.
fn encode_block(lits: &[u8], seqs: &[Seq], out: &mut Vec<u8>, tmp: &mut Vec<u8>) {
    encode_literals(lits, out, tmp);
    let n = seqs.len();
    if n < 128 {
        out.push(n as u8);
    } else if n < 0x7F00 {
        out.push(((n >> 8) + 128) as u8);
        out.push(n as u8);
    } else {
        out.push(255);
        out.extend_from_slice(&((n - 0x7F00) as u16).to_le_bytes());
    }
    if n == 0 {
        return;
    }
    let mut llc = Vec::with_capacity(n);
    let mut mlc = Vec::with_capacity(n);
    let mut ofc = Vec::with_capacity(n);
    for s in seqs {
        llc.push(ll_code(s.ll));
        mlc.push(ml_code(s.ml));
        ofc.push(highbit(s.off) as u8);
    }
    let modes_at = out.len();
    out.push(0);
    let (llm, ll_t) = choose(&llc, &LL_DEFAULT, 6, 9, out);
    let (ofm, of_t) = choose(&ofc, &OF_DEFAULT, 5, 8, out);
    let (mlm, ml_t) = choose(&mlc, &ML_DEFAULT, 6, 9, out);
    out[modes_at] = (llm << 6) | (ofm << 4) | (mlm << 2);
    let mut w = BitWriter::new(out);
    #[inline(always)]
    fn extra(w: &mut BitWriter<'_>, seqs: &[Seq], llc: &[u8], mlc: &[u8], ofc: &[u8], i: usize) {
        let s = seqs[i];
        let (l, m, o) = (usize::from(llc[i]), usize::from(mlc[i]), u32::from(ofc[i]));
        w.add(s.ll - LL_BASE[l], u32::from(LL_BITS[l]));
        w.add(s.ml - ML_BASE[m], u32::from(ML_BITS[m]));
        w.add(s.off - (1 << o), o);
    }
    let init = |t: &Coder, c: u8| match t {
        Coder::Rle => 0,
        Coder::Fse(e) => e.init(c),
    };
    let (mut sl, mut so, mut sm) = (
        init(&ll_t, llc[n - 1]),
        init(&of_t, ofc[n - 1]),
        init(&ml_t, mlc[n - 1]),
    );
    extra(&mut w, seqs, &llc, &mlc, &ofc, n - 1);
    for i in (0..n - 1).rev() {
        if let Coder::Fse(e) = &of_t {
            so = e.encode(&mut w, so, ofc[i]);
        }
        if let Coder::Fse(e) = &ml_t {
            sm = e.encode(&mut w, sm, mlc[i]);
        }
        if let Coder::Fse(e) = &ll_t {
            sl = e.encode(&mut w, sl, llc[i]);
        }
        extra(&mut w, seqs, &llc, &mlc, &ofc, i);
    }
    if let Coder::Fse(e) = &ml_t {
        e.flush(&mut w, sm);
    }
    if let Coder::Fse(e) = &of_t {
        e.flush(&mut w, so);
    }
    if let Coder::Fse(e) = &ll_t {
        e.flush(&mut w, sl);
    }
    w.close();
}

/// The literals section: raw, RLE or Huffman-compressed, the smallest.
fn encode_literals(lits: &[u8], out: &mut Vec<u8>, tmp: &mut Vec<u8>) {
    let n = lits.len();
    if n > 0 && lits.iter().all(|&b| b == lits[0]) {
        literals_header(1, n, out);
        out.push(lits[0]);
        return;
    }
    if n >= 32 {
        let mut counts = [0u32; 256];
        for &b in lits {
            counts[usize::from(b)] += 1;
        }
        if let Some(t) = huf::Table::new(&counts) {
            let four = n >= 1024;
            if t.cost(&counts) + t.description.len() + 6 < n {
                tmp.clear();
                tmp.extend_from_slice(&t.description);
                t.encode(lits, four, tmp);
                let c = tmp.len();
                if c + 2 < n {
                    let (hdr, kind) = if !four {
                        (3, 0u64)
                    } else if n < 1024 && c < 1024 {
                        (3, 1)
                    } else if n < 16384 && c < 16384 {
                        (4, 2)
                    } else {
                        (5, 3)
                    };
                    let bits = if hdr == 3 {
                        10
                    } else if hdr == 4 {
                        14
                    } else {
                        18
                    };
                    let v: u64 = 2 | (kind << 2) | ((n as u64) << 4) | ((c as u64) << (4 + bits));
                    out.extend_from_slice(&v.to_le_bytes()[..hdr]);
                    out.extend_from_slice(tmp);
                    return;
                }
            }
        }
    }
    literals_header(0, n, out);
    out.extend_from_slice(lits);
}

/// A raw (0) or RLE (1) literals header for `n` bytes.
fn literals_header(kind: u8, n: usize, out: &mut Vec<u8>) {
    if n < 32 {
        out.push(kind | ((n as u8) << 3));
    } else if n < 4096 {
        out.extend_from_slice(&((u16::from(kind) | (1 << 2)) | ((n as u16) << 4)).to_le_bytes());
    } else {
        let v = u32::from(kind) | (3 << 2) | ((n as u32) << 4);
        out.extend_from_slice(&v.to_le_bytes()[..3]);
    }
}

#[cfg(test)]
mod decode_tests;
#[cfg(test)]
mod tests;
