//! A zstd decompressor (RFC 8878) for trace.dat version 7 sections and CPU
//! chunks, ktrace's own and trace-cmd's (libzstd's): frames with or without
//! a content size, single-segment or windowed, their checksum verified
//! (XXH64, [`super::xxhash`]); raw, RLE and compressed blocks; raw, RLE and
//! Huffman literals (one or four streams, a new or the previous table);
//! sequences with predefined, RLE, FSE-described or repeated tables and the
//! three repeat offsets; skippable frames skipped. Dictionaries are refused.
//!
//! It decodes a whole input into one flat buffer (every frame's window is
//! what it has decoded so far) and never grows that buffer past the limit
//! the caller gives (the size the trace.dat header states); a content size
//! a frame claims is a hint for the first allocation, capped by that limit.
//! Corrupt input gives an error, never a panic or a hang: every loop is
//! bounded by the input it consumes or a count checked beforehand. Not a
//! streaming decoder.

use super::xxhash::xxh64;
use super::{BLOCK, LL_BASE, LL_BITS, LL_DEFAULT, MAGIC, ML_BASE, ML_BITS, ML_DEFAULT, OF_DEFAULT};

/// Why a zstd input does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(&'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for DecodeError {}

type Result<T> = std::result::Result<T, DecodeError>;

fn err<T>(msg: &'static str) -> Result<T> {
    Err(DecodeError(msg))
}

/// Bytes past the decoded content the output buffer keeps, so that short
/// copies can move 16 or 32 bytes at a time and trim later.
const SLACK: usize = 64;
const HUF_MAX_BITS: u32 = 11;
const LL_MAX_LOG: u32 = 9;
const ML_MAX_LOG: u32 = 9;
const OF_MAX_LOG: u32 = 8;
const OF_MAX_CODE: usize = 31;

/// Decompresses every frame of `src` (skippable frames are skipped) into
/// one buffer of at most `limit` bytes: more is an error.
pub fn decompress(src: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut d = Decoder::new(limit);
    d.frames(src)?;
    d.out.truncate(d.pos);
    Ok(d.out)
}

/// A decoder kept from one input to the next (a CPU's chunks, one after
/// another): its output buffer, literal buffer and tables are allocated
/// once and reused, so a chunk costs neither an allocation nor the zeroing
/// of fresh memory.
pub struct Decompressor {
    d: Decoder,
}

impl Default for Decompressor {
    fn default() -> Decompressor {
        Decompressor::new()
    }
}

impl Decompressor {
    /// A decoder with nothing allocated yet.
    pub fn new() -> Decompressor {
        Decompressor { d: Decoder::new(0) }
    }

    /// Decompresses every frame of `src` as [`decompress`] does (at most
    /// `limit` bytes) into the buffer this decoder keeps; the bytes stay
    /// valid until the next call.
    pub fn decompress(&mut self, src: &[u8], limit: usize) -> Result<&[u8]> {
        self.d.pos = 0;
        self.d.limit = limit;
        self.d.frames(src)?;
        Ok(&self.d.out[..self.d.pos])
    }

    /// The first `n` bytes the last [`Decompressor::decompress`] wrote
    /// (`n` at most what it returned).
    pub fn last(&self, n: usize) -> &[u8] {
        &self.d.out[..n.min(self.d.pos)]
    }
}

/// One FSE decoding table entry for a sequence code: the value's base and
/// extra bits, and the state transition.
#[derive(Clone, Copy, Default)]
struct SeqEntry {
    base: u32,
    next: u16,
    nb: u8,
    extra: u8,
}

/// A sequence code's table: the entries and its accuracy log.
#[derive(Default)]
struct SeqTable {
    entries: Vec<SeqEntry>,
    log: u32,
    valid: bool,
}

struct Decoder {
    out: Vec<u8>,
    /// Bytes decoded (the buffer past it is slack or not yet written).
    pos: usize,
    limit: usize,
    /// The previous Huffman table for treeless literals: entries of
    /// `symbol | bits << 8`, indexed by `HUF_MAX`-bit... its own max bits.
    huf: Vec<u16>,
    huf_bits: u32,
    huf_valid: bool,
    lit_buf: Vec<u8>,
    ll: SeqTable,
    ml: SeqTable,
    of: SeqTable,
    rep: [usize; 3],
    /// Scratch for building FSE tables: symbols per state.
    syms: Vec<u8>,
}

impl Decoder {
    fn new(limit: usize) -> Decoder {
        Decoder {
            out: Vec::new(),
            pos: 0,
            limit,
            huf: Vec::new(),
            huf_bits: 0,
            huf_valid: false,
            lit_buf: Vec::new(),
            ll: SeqTable::default(),
            ml: SeqTable::default(),
            of: SeqTable::default(),
            rep: [1, 4, 8],
            syms: Vec::new(),
        }
    }

    /// Decodes every frame of `src` (at least one) after `pos`.
    fn frames(&mut self, src: &[u8]) -> Result<()> {
        let mut rest = src;
        if rest.is_empty() {
            return err("no zstd frame");
        }
        while !rest.is_empty() {
            rest = self.frame(rest)?;
        }
        Ok(())
    }

    /// Makes room for `n` more bytes past `pos` (plus slack), within the
    /// limit; `n` beyond the limit is an error.
    fn reserve(&mut self, n: usize) -> Result<()> {
        let need = match self.pos.checked_add(n) {
            Some(x) if x <= self.limit => x,
            _ => return err("decompressed data exceeds the expected size"),
        };
        if need + SLACK > self.out.len() {
            let grown = (self.out.len().saturating_mul(2)).max(need + SLACK);
            let cap = self.limit.saturating_add(SLACK);
            self.out.resize(grown.min(cap).max(need + SLACK), 0);
        }
        Ok(())
    }

    /// Decodes one frame (or skips a skippable one) at the start of `src`;
    /// returns what follows it.
    fn frame<'a>(&mut self, src: &'a [u8]) -> Result<&'a [u8]> {
        let Some(magic) = src.get(..4) else {
            return err("truncated frame magic");
        };
        let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            let Some(len) = src.get(4..8) else {
                return err("truncated skippable frame");
            };
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            return match src.get(8..).and_then(|r| r.get(len..)) {
                Some(rest) => Ok(rest),
                None => err("truncated skippable frame"),
            };
        }
        if magic != MAGIC {
            return err("not a zstd frame (bad magic number)");
        }
        let mut at = 4;
        let Some(&fhd) = src.get(at) else {
            return err("truncated frame header");
        };
        at += 1;
        if fhd & 0x08 != 0 {
            return err("reserved bit set in the frame header");
        }
        let single = fhd & 0x20 != 0;
        let checksum = fhd & 0x04 != 0;
        let dict_len = [0, 1, 2, 4][usize::from(fhd & 3)];
        let fcs_len = match fhd >> 6 {
            0 => usize::from(single),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        if !single {
            // the window descriptor: this decoder keeps the whole output, so
            // any window is met; it is read past, not used
            if src.get(at).is_none() {
                return err("truncated frame header");
            }
            at += 1;
        }
        let Some(dict) = src.get(at..at + dict_len) else {
            return err("truncated frame header");
        };
        if dict.iter().any(|&b| b != 0) {
            return err("zstd dictionaries are not supported");
        }
        at += dict_len;
        let Some(fcs) = src.get(at..at + fcs_len) else {
            return err("truncated frame header");
        };
        at += fcs_len;
        let mut v = 0u64;
        for (i, &b) in fcs.iter().enumerate() {
            v |= u64::from(b) << (8 * i);
        }
        let content = match fcs_len {
            0 => None,
            2 => Some(v + 256),
            _ => Some(v),
        };
        if let Some(c) = content {
            if c > (self.limit - self.pos) as u64 {
                return err("frame content size exceeds the expected size");
            }
            // one allocation for what the frame says it holds (capped by
            // the limit just checked)
            self.reserve(c as usize)?;
        }
        let start = self.pos;
        self.rep = [1, 4, 8];
        self.huf_valid = false;
        self.ll.valid = false;
        self.ml.valid = false;
        self.of.valid = false;
        loop {
            let Some(h) = src.get(at..at + 3) else {
                return err("truncated block header");
            };
            at += 3;
            let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
            let last = h & 1 != 0;
            let size = (h >> 3) as usize;
            match (h >> 1) & 3 {
                0 => {
                    if size > BLOCK {
                        return err("raw block larger than 128 KiB");
                    }
                    let Some(b) = src.get(at..at + size) else {
                        return err("truncated raw block");
                    };
                    at += size;
                    self.reserve(size)?;
                    self.out[self.pos..self.pos + size].copy_from_slice(b);
                    self.pos += size;
                }
                1 => {
                    if size > BLOCK {
                        return err("rle block larger than 128 KiB");
                    }
                    let Some(&b) = src.get(at) else {
                        return err("truncated rle block");
                    };
                    at += 1;
                    self.reserve(size)?;
                    self.out[self.pos..self.pos + size].fill(b);
                    self.pos += size;
                }
                2 => {
                    if size > BLOCK {
                        return err("compressed block larger than 128 KiB");
                    }
                    let Some(b) = src.get(at..at + size) else {
                        return err("truncated compressed block");
                    };
                    at += size;
                    self.block(b, start)?;
                }
                _ => return err("reserved block type"),
            }
            if last {
                break;
            }
        }
        let produced = self.pos - start;
        if let Some(c) = content
            && c != produced as u64
        {
            return err("frame content size does not match the decoded data");
        }
        if checksum {
            let Some(c) = src.get(at..at + 4) else {
                return err("truncated frame checksum");
            };
            at += 4;
            let want = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if xxh64(&self.out[start..self.pos], 0) as u32 != want {
                return err("frame checksum mismatch");
            }
        }
        Ok(&src[at..])
    }

    /// Decodes one compressed block; `start` is where its frame's output
    /// began (matches reach no further back).
    fn block(&mut self, b: &[u8], start: usize) -> Result<()> {
        self.reserve(BLOCK.min(self.limit - self.pos))?;
        let (lits, at) = self.literals(b)?;
        let seqs = &b[at..];
        // literals come from the block (raw) or lit_buf (everything else)
        let lit_buf = std::mem::take(&mut self.lit_buf);
        let r = match lits {
            Lits::Raw(s, n) => self.sequences(seqs, &b[s..s + n], start),
            Lits::Buf(n) => self.sequences(seqs, &lit_buf[..n], start),
        };
        self.lit_buf = lit_buf;
        r
    }

    /// Reads the literals section: where the literals are and the offset
    /// of the sequences section.
    fn literals(&mut self, b: &[u8]) -> Result<(Lits, usize)> {
        let Some(&b0) = b.first() else {
            return err("empty compressed block");
        };
        let ty = b0 & 3;
        let sf = (b0 >> 2) & 3;
        let byte = |i: usize| b.get(i).copied().map(u32::from);
        if ty < 2 {
            let (regen, hl) = match sf {
                0 | 2 => (u32::from(b0 >> 3), 1),
                1 => match byte(1) {
                    Some(b1) => ((u32::from(b0) >> 4) | b1 << 4, 2),
                    None => return err("truncated literals header"),
                },
                _ => match (byte(1), byte(2)) {
                    (Some(b1), Some(b2)) => ((u32::from(b0) >> 4) | b1 << 4 | b2 << 12, 3),
                    _ => return err("truncated literals header"),
                },
            };
            let regen = regen as usize;
            if regen > BLOCK {
                return err("literals larger than 128 KiB");
            }
            if ty == 0 {
                if b.len() < hl + regen {
                    return err("truncated raw literals");
                }
                return Ok((Lits::Raw(hl, regen), hl + regen));
            }
            let Some(&v) = b.get(hl) else {
                return err("truncated rle literals");
            };
            self.lit_buf.clear();
            self.lit_buf.resize(regen + SLACK, v);
            return Ok((Lits::Buf(regen), hl + 1));
        }
        let (regen, comp, hl, four) = {
            let h = |n: usize| -> Option<u64> {
                let mut v = 0u64;
                for i in 0..n {
                    v |= u64::from(*b.get(i)?) << (8 * i);
                }
                Some(v)
            };
            match sf {
                0 | 1 => match h(3) {
                    Some(v) => ((v >> 4) & 0x3FF, (v >> 14) & 0x3FF, 3, sf == 1),
                    None => return err("truncated literals header"),
                },
                2 => match h(4) {
                    Some(v) => ((v >> 4) & 0x3FFF, (v >> 18) & 0x3FFF, 4, true),
                    None => return err("truncated literals header"),
                },
                _ => match h(5) {
                    Some(v) => ((v >> 4) & 0x3FFFF, (v >> 22) & 0x3FFFF, 5, true),
                    None => return err("truncated literals header"),
                },
            }
        };
        let (regen, comp) = (regen as usize, comp as usize);
        if regen > BLOCK {
            return err("literals larger than 128 KiB");
        }
        let Some(mut data) = b.get(hl..hl + comp) else {
            return err("truncated compressed literals");
        };
        if ty == 2 {
            let used = self.huffman_table(data)?;
            data = &data[used..];
        } else if !self.huf_valid {
            return err("treeless literals without a previous huffman table");
        }
        self.lit_buf.clear();
        self.lit_buf.resize(regen + SLACK, 0);
        if four {
            decode_4(&self.huf, self.huf_bits, data, &mut self.lit_buf[..regen])?;
        } else {
            decode_1(&self.huf, self.huf_bits, data, &mut self.lit_buf[..regen])?;
        }
        Ok((Lits::Buf(regen), hl + comp))
    }

    /// Reads a Huffman tree description into `self.huf`; returns its size.
    fn huffman_table(&mut self, d: &[u8]) -> Result<usize> {
        let Some(&hb) = d.first() else {
            return err("truncated huffman tree description");
        };
        let mut w = [0u8; 256];
        let (n, used) = if hb >= 128 {
            let n = usize::from(hb) - 127;
            let bytes = n.div_ceil(2);
            let Some(s) = d.get(1..1 + bytes) else {
                return err("truncated huffman weights");
            };
            for i in 0..n {
                let byte = s[i / 2];
                w[i] = if i % 2 == 0 { byte >> 4 } else { byte & 15 };
            }
            (n, 1 + bytes)
        } else {
            let len = usize::from(hb);
            let Some(s) = d.get(1..1 + len) else {
                return err("truncated huffman weights");
            };
            (fse_weights(s, &mut w, &mut self.syms)?, 1 + len)
        };
        // the last weight is implied: what completes a power of two
        let mut total = 0u32;
        for &x in &w[..n] {
            if x > HUF_MAX_BITS as u8 {
                return err("huffman weight too large");
            }
            if x > 0 {
                total += 1 << (x - 1);
            }
        }
        if total == 0 {
            return err("huffman weights are all zero");
        }
        let max_bits = 32 - total.leading_zeros();
        if max_bits > HUF_MAX_BITS {
            return err("huffman codes longer than 11 bits");
        }
        let left = (1u32 << max_bits) - total;
        if !left.is_power_of_two() {
            return err("huffman weights do not complete a tree");
        }
        if n >= 256 {
            return err("too many huffman weights");
        }
        w[n] = (left.trailing_zeros() + 1) as u8;
        let syms = n + 1;
        // entries in order of weight, then symbol: 2^(w-1) cells each
        let size = 1usize << max_bits;
        self.huf.clear();
        self.huf.resize(size, 0);
        let mut rank_start = [0usize; 13];
        let mut count = [0usize; 13];
        for &x in &w[..syms] {
            count[usize::from(x)] += 1;
        }
        let mut next = 0usize;
        for x in 1..=max_bits as usize {
            rank_start[x] = next;
            next += count[x] << (x - 1);
        }
        if next != size {
            return err("huffman weights do not complete a tree");
        }
        for (s, &x) in w[..syms].iter().enumerate() {
            if x == 0 {
                continue;
            }
            let x = usize::from(x);
            let cells = 1usize << (x - 1);
            let bits = max_bits as usize + 1 - x;
            let e = (s as u16) | (bits as u16) << 8;
            self.huf[rank_start[x]..rank_start[x] + cells].fill(e);
            rank_start[x] += cells;
        }
        self.huf_bits = max_bits;
        self.huf_valid = true;
        Ok(used)
    }

    /// Reads the sequences section and executes it into the output.
    fn sequences(&mut self, s: &[u8], lits: &[u8], start: usize) -> Result<()> {
        let Some(&b0) = s.first() else {
            return err("missing sequences section");
        };
        let (nseq, mut at) = match b0 {
            0 => (0usize, 1),
            1..=127 => (usize::from(b0), 1),
            128..=254 => match s.get(1) {
                Some(&b1) => ((usize::from(b0) - 128) << 8 | usize::from(b1), 2),
                None => return err("truncated sequences header"),
            },
            255 => match s.get(1..3) {
                Some(x) => (usize::from(x[0]) | usize::from(x[1]) << 8 | 0x7F00, 3),
                None => return err("truncated sequences header"),
            },
        };
        if nseq == 0 {
            if at != s.len() {
                return err("bytes after an empty sequences section");
            }
            return self.put_literals(lits);
        }
        let Some(&modes) = s.get(at) else {
            return err("truncated sequences header");
        };
        at += 1;
        if modes & 3 != 0 {
            return err("reserved bits set in the sequence modes");
        }
        at += seq_table(&mut self.ll, modes >> 6, &s[at..], Kind::Ll, &mut self.syms)?;
        at += seq_table(
            &mut self.of,
            (modes >> 4) & 3,
            &s[at..],
            Kind::Of,
            &mut self.syms,
        )?;
        at += seq_table(
            &mut self.ml,
            (modes >> 2) & 3,
            &s[at..],
            Kind::Ml,
            &mut self.syms,
        )?;
        let mut br = BackBits::new(&s[at..])?;
        let ll_t = &self.ll.entries[..];
        let of_t = &self.of.entries[..];
        let ml_t = &self.ml.entries[..];
        let mut lls = br.read(self.ll.log) as usize;
        let mut ofs = br.read(self.of.log) as usize;
        let mut mls = br.read(self.ml.log) as usize;
        let mut rep = self.rep;
        let mut lp = 0usize;
        let block_end = self.pos + BLOCK.min(self.limit - self.pos);
        let out = &mut self.out[..];
        let mut pos = self.pos;
        for i in 0..nseq {
            br.refill();
            // the tables are as large as their logs, states stay inside
            let (lle, ofe, mle) = (
                ll_t[lls & (ll_t.len() - 1)],
                of_t[ofs & (of_t.len() - 1)],
                ml_t[mls & (ml_t.len() - 1)],
            );
            let ofv = ofe.base + br.read(u32::from(ofe.extra)) as u32;
            let ml = mle.base as usize + br.read(u32::from(mle.extra)) as usize;
            br.refill();
            let ll = lle.base as usize + br.read(u32::from(lle.extra)) as usize;
            let off = if ofv > 3 {
                let o = ofv as usize - 3;
                rep = [o, rep[0], rep[1]];
                o
            } else {
                let idx = ofv as usize - usize::from(ll != 0);
                match idx {
                    0 => rep[0],
                    1 => {
                        rep = [rep[1], rep[0], rep[2]];
                        rep[0]
                    }
                    2 => {
                        rep = [rep[2], rep[0], rep[1]];
                        rep[0]
                    }
                    _ => {
                        let o = rep[0].wrapping_sub(1);
                        if o == 0 {
                            return err("repeat offset of zero");
                        }
                        rep = [o, rep[0], rep[1]];
                        o
                    }
                }
            };
            if i + 1 < nseq {
                lls = usize::from(lle.next) + br.read(u32::from(lle.nb)) as usize;
                mls = usize::from(mle.next) + br.read(u32::from(mle.nb)) as usize;
                ofs = usize::from(ofe.next) + br.read(u32::from(ofe.nb)) as usize;
            }
            // execute: ll literals, then ml bytes from off back
            if ll > lits.len() - lp {
                return err("sequence takes more literals than there are");
            }
            if ll + ml > block_end - pos {
                return err("block decodes to more than 128 KiB or the expected size");
            }
            if ll <= 16 && lp + 16 <= lits.len() {
                out[pos..pos + 16].copy_from_slice(&lits[lp..lp + 16]);
            } else {
                out[pos..pos + ll].copy_from_slice(&lits[lp..lp + ll]);
            }
            lp += ll;
            pos += ll;
            if off > pos - start {
                return err("match offset reaches before the frame");
            }
            copy_match(out, pos, off, ml);
            pos += ml;
        }
        if !br.finished() {
            return err("sequences bitstream not consumed exactly");
        }
        self.rep = rep;
        self.pos = pos;
        self.put_literals(&lits[lp..])
    }

    fn put_literals(&mut self, l: &[u8]) -> Result<()> {
        self.reserve(l.len())?;
        self.out[self.pos..self.pos + l.len()].copy_from_slice(l);
        self.pos += l.len();
        Ok(())
    }
}

/// Copies `ml` bytes from `off` bytes back to `pos` (the regions may
/// overlap: the copy repeats the last `off` bytes). The buffer holds
/// [`SLACK`] bytes past `pos + ml`.
#[inline]
fn copy_match(out: &mut [u8], pos: usize, off: usize, ml: usize) {
    let src = pos - off;
    if off >= 16 {
        if ml <= 32 {
            out.copy_within(src..src + 16, pos);
            if ml > 16 {
                out.copy_within(src + 16..src + 32, pos + 16);
            }
        } else {
            let mut i = 0;
            while i < ml {
                out.copy_within(src + i..src + i + 16, pos + i);
                i += 16;
            }
        }
    } else if off >= ml {
        out.copy_within(src..src + ml, pos);
    } else {
        // short period: copy what is there, doubling the run each time
        let mut done = 0;
        let mut step = off;
        while done < ml {
            let n = step.min(ml - done);
            out.copy_within(src..src + n, pos + done);
            done += n;
            step += n;
        }
    }
}

enum Lits {
    /// Raw literals in the block: offset and length.
    Raw(usize, usize),
    /// The first this many bytes of `lit_buf`.
    Buf(usize),
}

#[derive(Clone, Copy)]
enum Kind {
    Ll,
    Of,
    Ml,
}

/// Sets up one sequence code's table by its mode; returns the bytes the
/// description took.
fn seq_table(
    t: &mut SeqTable,
    mode: u8,
    d: &[u8],
    kind: Kind,
    syms: &mut Vec<u8>,
) -> Result<usize> {
    let (max_sym, max_log) = match kind {
        Kind::Ll => (35, LL_MAX_LOG),
        Kind::Of => (OF_MAX_CODE, OF_MAX_LOG),
        Kind::Ml => (52, ML_MAX_LOG),
    };
    let value = |s: usize| -> (u32, u8) {
        match kind {
            Kind::Ll => (LL_BASE[s], LL_BITS[s]),
            Kind::Ml => (ML_BASE[s], ML_BITS[s]),
            Kind::Of => (1u32 << s, s as u8),
        }
    };
    match mode {
        0 => {
            let (norm, log): (&[i16], u32) = match kind {
                Kind::Ll => (&LL_DEFAULT, 6),
                Kind::Ml => (&ML_DEFAULT, 6),
                Kind::Of => (&OF_DEFAULT, 5),
            };
            build_seq(t, norm, log, syms, value)?;
            Ok(0)
        }
        1 => {
            let Some(&s) = d.first() else {
                return err("truncated rle sequence code");
            };
            let s = usize::from(s);
            if s > max_sym {
                return err("rle sequence code out of range");
            }
            let (base, extra) = value(s);
            t.entries.clear();
            t.entries.push(SeqEntry {
                base,
                next: 0,
                nb: 0,
                extra,
            });
            t.log = 0;
            t.valid = true;
            Ok(1)
        }
        2 => {
            let mut norm = [0i16; 53];
            let (n, log, used) = read_ncount(d, &mut norm, max_sym, max_log)?;
            build_seq(t, &norm[..n], log, syms, value)?;
            Ok(used)
        }
        _ => {
            if !t.valid {
                return err("repeated sequence table without a previous one");
            }
            Ok(0)
        }
    }
}

fn build_seq(
    t: &mut SeqTable,
    norm: &[i16],
    log: u32,
    syms: &mut Vec<u8>,
    value: impl Fn(usize) -> (u32, u8),
) -> Result<()> {
    let size = 1usize << log;
    t.entries.clear();
    t.entries.resize(size, SeqEntry::default());
    spread(norm, log, syms)?;
    let mut next = [0u32; 64];
    for (s, &c) in norm.iter().enumerate() {
        next[s] = if c == -1 { 1 } else { c as u32 };
    }
    for (i, &s) in syms.iter().enumerate() {
        let s = usize::from(s);
        let ns = next[s];
        next[s] += 1;
        let nb = log - (31 - ns.leading_zeros());
        let (base, extra) = value(s);
        t.entries[i] = SeqEntry {
            base,
            next: ((ns << nb) as usize - size) as u16,
            nb: nb as u8,
            extra,
        };
    }
    t.log = log;
    t.valid = true;
    Ok(())
}

/// The symbol of each state of an FSE table (RFC 8878 4.1.1): "less than
/// one" symbols at the end, the others spread with the format's step.
fn spread(norm: &[i16], log: u32, syms: &mut Vec<u8>) -> Result<()> {
    let size = 1usize << log;
    let cells: i64 = norm.iter().map(|&c| i64::from(c).abs()).sum();
    if cells != size as i64 {
        return err("fse distribution does not fill its table");
    }
    syms.clear();
    syms.resize(size, 0);
    let mut high = size;
    for (s, &c) in norm.iter().enumerate() {
        if c == -1 {
            if high == 0 {
                return err("fse table overfull");
            }
            high -= 1;
            syms[high] = s as u8;
        }
    }
    let step = (size >> 1) + (size >> 3) + 3;
    let mask = size - 1;
    let mut p = 0usize;
    let mut placed = 0usize;
    for (s, &c) in norm.iter().enumerate() {
        if c <= 0 {
            continue;
        }
        for _ in 0..c {
            syms[p] = s as u8;
            placed += 1;
            p = (p + step) & mask;
            while p >= high {
                p = (p + step) & mask;
            }
        }
    }
    if placed != high || p != 0 {
        return err("fse distribution does not fill its table");
    }
    Ok(())
}

/// Reads an FSE table description (RFC 8878 4.1.1) into `norm`; returns
/// the number of symbols, the accuracy log and the bytes read.
fn read_ncount(
    d: &[u8],
    norm: &mut [i16],
    max_sym: usize,
    max_log: u32,
) -> Result<(usize, u32, usize)> {
    let mut bitpos = 0usize;
    let peek = |bitpos: usize| -> u32 {
        let mut v = 0u64;
        let b = bitpos / 8;
        for i in 0..5 {
            if let Some(&x) = d.get(b + i) {
                v |= u64::from(x) << (8 * i);
            }
        }
        (v >> (bitpos % 8)) as u32
    };
    let log = (peek(0) & 15) + 5;
    bitpos += 4;
    if log > max_log {
        return err("fse accuracy log too large");
    }
    let mut remaining: i32 = (1 << log) + 1;
    let mut threshold: i32 = 1 << log;
    let mut nbits = log + 1;
    let mut sym = 0usize;
    while remaining > 1 {
        if sym > max_sym {
            return err("fse description has too many symbols");
        }
        let v = peek(bitpos) as i32;
        let max = 2 * threshold - 1 - remaining;
        let mut count;
        if v & (threshold - 1) < max {
            count = v & (threshold - 1);
            bitpos += nbits as usize - 1;
        } else {
            count = v & (2 * threshold - 1);
            if count >= threshold {
                count -= max;
            }
            bitpos += nbits as usize;
        }
        count -= 1;
        remaining -= count.abs();
        if remaining < 1 {
            return err("fse description overflows its table");
        }
        norm[sym] = count as i16;
        sym += 1;
        if count == 0 {
            loop {
                let r = (peek(bitpos) & 3) as usize;
                bitpos += 2;
                for _ in 0..r {
                    if sym > max_sym {
                        return err("fse description has too many symbols");
                    }
                    norm[sym] = 0;
                    sym += 1;
                }
                if r != 3 {
                    break;
                }
                if bitpos > d.len() * 8 {
                    return err("truncated fse description");
                }
            }
        }
        while remaining < threshold {
            nbits -= 1;
            threshold >>= 1;
        }
    }
    if remaining != 1 {
        return err("fse description does not sum up");
    }
    let used = bitpos.div_ceil(8);
    if used > d.len() {
        return err("truncated fse description");
    }
    Ok((sym, log, used))
}

/// Huffman weights FSE-compressed (RFC 8878 4.2.1.2): two interleaved
/// states over one backward stream; returns the number of weights.
fn fse_weights(s: &[u8], w: &mut [u8; 256], syms: &mut Vec<u8>) -> Result<usize> {
    let mut norm = [0i16; 16];
    let (n, log, used) = read_ncount(s, &mut norm, 15, 6)?;
    spread(&norm[..n], log, syms)?;
    // per state: symbol, bits, next-state base
    let size = 1usize << log;
    let mut tab = [(0u8, 0u32, 0usize); 64];
    let mut next = [0u32; 16];
    for (k, &c) in norm[..n].iter().enumerate() {
        next[k] = if c == -1 { 1 } else { c as u32 };
    }
    for (i, &k) in syms.iter().enumerate() {
        let ns = next[usize::from(k)];
        next[usize::from(k)] += 1;
        let nb = log - (31 - ns.leading_zeros());
        tab[i] = (k, nb, (ns << nb) as usize - size);
    }
    let mut br = BackBits::new(&s[used..])?;
    let s1 = br.read(log) as usize;
    let s2 = br.read(log) as usize;
    let mut st = [s1, s2];
    let mut n = 0usize;
    let mut which = 0usize;
    loop {
        if n >= 255 {
            return err("too many huffman weights");
        }
        let (k, nb, base) = tab[st[which] & (size - 1)];
        w[n] = k;
        n += 1;
        br.refill();
        st[which] = base + br.read(nb) as usize;
        which ^= 1;
        if br.overflowed() {
            // the last weight comes from the other state
            if n >= 255 {
                return err("too many huffman weights");
            }
            w[n] = tab[st[which] & (size - 1)].0;
            return Ok(n + 1);
        }
    }
}

/// A backward bit stream (RFC 8878 4.1): read from its last byte down,
/// most significant bit first, after the final byte's padding and marker.
/// The next bits sit at the top of `acc`; `n` counts the valid ones and
/// goes negative when reading past the start (zeros are read then).
struct BackBits<'a> {
    src: &'a [u8],
    pos: usize,
    acc: u64,
    n: i32,
}

impl<'a> BackBits<'a> {
    fn new(src: &'a [u8]) -> Result<BackBits<'a>> {
        let Some(&last) = src.last() else {
            return err("empty bitstream");
        };
        if last == 0 {
            return err("bitstream without its end marker");
        }
        let mut b = BackBits {
            src,
            pos: src.len(),
            acc: 0,
            n: 0,
        };
        b.refill();
        b.read(last.leading_zeros() + 1);
        Ok(b)
    }

    /// Loads bytes until at least 56 bits are valid (or the stream's
    /// start is reached).
    #[inline(always)]
    fn refill(&mut self) {
        if self.pos >= 8 {
            let p = self.pos;
            // one 8-byte load (bounds checked once), not eight
            let mut w = [0u8; 8];
            w.copy_from_slice(&self.src[p - 8..p]);
            let x = u64::from_le_bytes(w);
            // n is 0..=63 here: the bytes below the valid bits, whole
            // bytes counted (a partial one is loaded again next time)
            self.acc |= x >> self.n;
            let take = (63 - self.n) >> 3;
            self.pos -= take as usize;
            self.n += take << 3;
        } else {
            while self.n <= 56 && self.pos > 0 {
                self.pos -= 1;
                self.acc |= u64::from(self.src[self.pos]) << (56 - self.n);
                self.n += 8;
            }
        }
    }

    /// The next `k` bits (`k` at most 56 after a refill).
    #[inline(always)]
    fn read(&mut self, k: u32) -> u64 {
        let v = self.acc.rotate_left(k) & ((1u64 << k) - 1);
        self.acc <<= k;
        self.n -= k as i32;
        v
    }

    /// The next `k` bits without consuming them (`k` 1 to 56).
    #[inline(always)]
    fn peek(&self, k: u32) -> usize {
        (self.acc >> (64 - k)) as usize
    }

    #[inline(always)]
    fn consume(&mut self, k: u32) {
        self.acc <<= k;
        self.n -= k as i32;
    }

    fn overflowed(&self) -> bool {
        self.n < 0
    }

    /// Every bit read, none past the start.
    fn finished(&self) -> bool {
        self.n == 0 && self.pos == 0
    }
}

/// One Huffman stream into `out`.
fn decode_1(t: &[u16], bits: u32, s: &[u8], out: &mut [u8]) -> Result<()> {
    let mut br = BackBits::new(s)?;
    huf_stream(t, bits, &mut br, out);
    if !br.finished() {
        return err("huffman stream not consumed exactly");
    }
    Ok(())
}

#[inline(always)]
fn huf_sym(t: &[u16], bits: u32, br: &mut BackBits) -> u8 {
    let e = t[br.peek(bits)];
    br.consume(u32::from(e >> 8));
    e as u8
}

fn huf_stream(t: &[u16], bits: u32, br: &mut BackBits, out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(4);
    for c in &mut chunks {
        br.refill();
        c[0] = huf_sym(t, bits, br);
        c[1] = huf_sym(t, bits, br);
        c[2] = huf_sym(t, bits, br);
        c[3] = huf_sym(t, bits, br);
    }
    for o in chunks.into_remainder() {
        br.refill();
        *o = huf_sym(t, bits, br);
    }
}

/// Four Huffman streams (a 6-byte jump table first) into `out`.
fn decode_4(t: &[u16], bits: u32, s: &[u8], out: &mut [u8]) -> Result<()> {
    if s.len() < 10 {
        return err("truncated huffman jump table");
    }
    let l1 = usize::from(u16::from_le_bytes([s[0], s[1]]));
    let l2 = usize::from(u16::from_le_bytes([s[2], s[3]]));
    let l3 = usize::from(u16::from_le_bytes([s[4], s[5]]));
    let body = &s[6..];
    if l1 + l2 + l3 > body.len() {
        return err("huffman jump table beyond the literals");
    }
    let (s1, r) = body.split_at(l1);
    let (s2, r) = r.split_at(l2);
    let (s3, s4) = r.split_at(l3);
    let seg = out.len().div_ceil(4);
    if 3 * seg > out.len() {
        return err("too few literals for four streams");
    }
    let (o1, r) = out.split_at_mut(seg);
    let (o2, r) = r.split_at_mut(seg);
    let (o3, o4) = r.split_at_mut(seg);
    let mut b1 = BackBits::new(s1)?;
    let mut b2 = BackBits::new(s2)?;
    let mut b3 = BackBits::new(s3)?;
    let mut b4 = BackBits::new(s4)?;
    // all four together while each has four symbols to go
    let whole = o4.len() / 4;
    for i in 0..whole {
        let a = 4 * i;
        b1.refill();
        b2.refill();
        b3.refill();
        b4.refill();
        for j in a..a + 4 {
            o1[j] = huf_sym(t, bits, &mut b1);
            o2[j] = huf_sym(t, bits, &mut b2);
            o3[j] = huf_sym(t, bits, &mut b3);
            o4[j] = huf_sym(t, bits, &mut b4);
        }
    }
    let a = 4 * whole;
    huf_stream(t, bits, &mut b1, &mut o1[a..]);
    huf_stream(t, bits, &mut b2, &mut o2[a..]);
    huf_stream(t, bits, &mut b3, &mut o3[a..]);
    huf_stream(t, bits, &mut b4, &mut o4[a..]);
    if !(b1.finished() && b2.finished() && b3.finished() && b4.finished()) {
        return err("huffman stream not consumed exactly");
    }
    Ok(())
}
