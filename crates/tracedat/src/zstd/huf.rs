//! Huffman coding of zstd literals (RFC 8878 section 4.2): code lengths
//! limited to 11 bits, the tree description as weights (4-bit direct or
//! FSE-compressed, whichever is smaller), canonical codes assigned as a
//! decoder assigns them, and one or four backward streams with the jump
//! table. Not a decoder.

use super::bits::BitWriter;
use super::fse;

/// Longest code used (the format allows 11).
const MAX_BITS: u32 = 11;

/// A Huffman table for byte literals.
pub(crate) struct Table {
    /// Per byte: code length in bits (0: absent).
    len: [u8; 256],
    /// Per byte: code value.
    code: [u16; 256],
    /// The tree description (header byte included).
    pub(crate) description: Vec<u8>,
}

/// Code lengths for `counts` (at least two symbols present), none longer
/// than `MAX_BITS`, forming a complete prefix code.
fn lengths(counts: &[u32; 256]) -> Option<[u8; 256]> {
    // Huffman by two queues over symbols sorted by count
    let mut syms: Vec<(u32, u16)> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(s, &c)| (c, s as u16))
        .collect();
    if syms.len() < 2 {
        return None;
    }
    syms.sort_unstable();
    let n = syms.len();
    // nodes: leaves 0..n, internal n..2n-1; parent links
    let mut weight: Vec<u64> = syms.iter().map(|&(c, _)| u64::from(c)).collect();
    weight.resize(2 * n - 1, 0);
    let mut parent = vec![0usize; 2 * n - 1];
    let (mut leaf, mut inner, mut next) = (0usize, n, n);
    let pick = |weight: &[u64], leaf: &mut usize, inner: &mut usize, next: usize| {
        if *leaf < n && (*inner >= next || weight[*leaf] <= weight[*inner]) {
            *leaf += 1;
            *leaf - 1
        } else {
            *inner += 1;
            *inner - 1
        }
    };
    while next < 2 * n - 1 {
        let a = pick(&weight, &mut leaf, &mut inner, next);
        let b = pick(&weight, &mut leaf, &mut inner, next);
        weight[next] = weight[a] + weight[b];
        parent[a] = next;
        parent[b] = next;
        next += 1;
    }
    let mut depth = vec![0u32; 2 * n - 1];
    for i in (0..2 * n - 2).rev() {
        depth[i] = depth[parent[i]] + 1;
    }
    // limit to MAX_BITS: clamp, then repay the Kraft overflow by lengthening
    // the deepest codes still short of the limit (least frequent first)
    let mut len: Vec<u32> = depth[..n].iter().map(|&d| d.min(MAX_BITS)).collect();
    let full = 1i64 << MAX_BITS;
    let mut kraft: i64 = len.iter().map(|&l| 1i64 << (MAX_BITS - l)).sum();
    while kraft > full {
        // leaves are in increasing count order: the first with the longest
        // length below the limit costs least to lengthen
        let mut best: Option<usize> = None;
        for i in 0..n {
            if len[i] < MAX_BITS && best.is_none_or(|b| len[i] > len[b]) {
                best = Some(i);
            }
        }
        let i = best?;
        kraft -= 1i64 << (MAX_BITS - len[i] - 1);
        len[i] += 1;
    }
    // fill any slack by shortening the most frequent codes that fit
    while kraft < full {
        let mut done = false;
        for i in (0..n).rev() {
            if len[i] > 1 && kraft + (1i64 << (MAX_BITS - len[i])) <= full {
                kraft += 1i64 << (MAX_BITS - len[i]);
                len[i] -= 1;
                done = true;
                break;
            }
        }
        if !done {
            return None;
        }
    }
    let mut out = [0u8; 256];
    for (i, &(_, s)) in syms.iter().enumerate() {
        out[usize::from(s)] = len[i] as u8;
    }
    Some(out)
}

impl Table {
    /// A table for literals with these byte counts; `None` when fewer than
    /// two distinct bytes occur or no description fits.
    pub(crate) fn new(counts: &[u32; 256]) -> Option<Table> {
        let len = lengths(counts)?;
        let max = u32::from(*len.iter().max()?);
        let last = len.iter().rposition(|&l| l != 0)?;
        // weights of every symbol but the last, which the decoder infers
        let weights: Vec<u8> = len[..last]
            .iter()
            .map(|&l| {
                if l == 0 {
                    0
                } else {
                    (max + 1 - u32::from(l)) as u8
                }
            })
            .collect();
        let description = describe(&weights)?;
        // canonical codes: longest first, by symbol within a length
        let mut per_len = [0u32; 16];
        for &l in &len {
            per_len[usize::from(l)] += 1;
        }
        let mut start = [0u32; 16];
        let mut next = 0u32;
        for l in (1..=max as usize).rev() {
            start[l] = next;
            next = (next + per_len[l]) >> 1;
        }
        let mut code = [0u16; 256];
        for s in 0..256 {
            let l = usize::from(len[s]);
            if l > 0 {
                code[s] = start[l] as u16;
                start[l] += 1;
            }
        }
        Some(Table {
            len,
            code,
            description,
        })
    }

    /// Size in bytes of `counts` coded with this table (streams only).
    pub(crate) fn cost(&self, counts: &[u32; 256]) -> usize {
        let bits: u64 = counts
            .iter()
            .zip(&self.len)
            .map(|(&c, &l)| u64::from(c) * u64::from(l))
            .sum();
        (bits / 8) as usize + 1
    }

    /// Appends one stream holding `lits` (the first literal read first).
    fn stream(&self, lits: &[u8], out: &mut Vec<u8>) {
        let mut w = BitWriter::new(out);
        for &b in lits.iter().rev() {
            let b = usize::from(b);
            w.add(u32::from(self.code[b]), u32::from(self.len[b]));
        }
        w.close();
    }

    /// Appends `lits` as one stream (`four` false) or four streams with
    /// their jump table.
    pub(crate) fn encode(&self, lits: &[u8], four: bool, out: &mut Vec<u8>) {
        if !four {
            self.stream(lits, out);
            return;
        }
        let seg = lits.len().div_ceil(4);
        let jump = out.len();
        out.extend_from_slice(&[0; 6]);
        let mut at = out.len();
        for i in 0..4 {
            let part = &lits[(i * seg).min(lits.len())..((i + 1) * seg).min(lits.len())];
            self.stream(part, out);
            if i < 3 {
                let n = (out.len() - at) as u16;
                out[jump + 2 * i..jump + 2 * i + 2].copy_from_slice(&n.to_le_bytes());
            }
            at = out.len();
        }
    }
}

/// The tree description of `weights`: FSE-compressed when smaller, else
/// 4-bit direct (possible for at most 128 weights).
fn describe(weights: &[u8]) -> Option<Vec<u8>> {
    let direct = (weights.len() <= 128).then(|| {
        let mut d = vec![127 + weights.len() as u8];
        for pair in weights.chunks(2) {
            d.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
        }
        d
    });
    let fse = compress_weights(weights)
        .filter(|c| c.len() < 128)
        .map(|c| {
            let mut d = vec![c.len() as u8];
            d.extend_from_slice(&c);
            d
        });
    match (direct, fse) {
        (Some(d), Some(f)) => Some(if f.len() < d.len() { f } else { d }),
        (d, f) => d.or(f),
    }
}

/// The weights as an FSE table description and a two-state stream (RFC
/// 8878 4.2.1.2: even-indexed weights on the first state, odd on the
/// second; the decoder stops when a state update runs past the stream).
fn compress_weights(weights: &[u8]) -> Option<Vec<u8>> {
    if weights.len() < 2 {
        return None;
    }
    let mut counts = [0u32; 13];
    for &w in weights {
        counts[usize::from(w)] += 1;
    }
    if counts.iter().filter(|&&c| c > 0).count() < 2 {
        return None;
    }
    let last = counts.iter().rposition(|&c| c > 0)?;
    let log = fse::table_log(weights.len(), last, 6);
    let norm = fse::normalize(&counts[..=last], log);
    let enc = norm.encoder();
    let mut out = Vec::new();
    norm.write_description(&mut out);
    let mut w = BitWriter::new(&mut out);
    let n = weights.len();
    // the last two weights start the states; the one decoded just before
    // the end must leave through a transition that reads bits
    let (mut s1, mut s2);
    let mut i;
    if n.is_multiple_of(2) {
        s2 = enc.init(weights[n - 1]);
        s1 = enc.init(weights[n - 2]);
        i = n - 2;
    } else {
        s1 = enc.init(weights[n - 1]);
        s2 = enc.init(weights[n - 2]);
        s1 = enc.encode(&mut w, s1, weights[n - 3]);
        i = n - 3;
    }
    while i > 0 {
        s2 = enc.encode(&mut w, s2, weights[i - 1]);
        s1 = enc.encode(&mut w, s1, weights[i - 2]);
        i -= 2;
    }
    enc.flush(&mut w, s2);
    enc.flush(&mut w, s1);
    w.close();
    Some(out)
}
