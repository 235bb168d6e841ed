//! A line formatted into a region of the output set aside for it at once:
//! the text printer's fast path (see `TextPrinter::write_line`). Each piece
//! is one or two 16-byte stores at a cursor kept in a register, where
//! appending to the `Vec` itself checks and updates its length and
//! capacity through memory for every piece (about half the printer's
//! instructions per line, callgrind said). The region must hold
//! [`Line::SLACK`] bytes past the last byte written: every store is 16
//! bytes (32 for a decimal), cut back by moving the cursor only as far as
//! the piece is long.

use crate::num;

/// Text that many lines repeat (the context columns, an event's prefix and
/// probe header, a long literal), kept in whole 16-byte pieces with zeros
/// past its end: [`Line::padded`] copies it a piece at a time and moves the
/// cursor back by the padding, where [`Line::bytes`] must cut its last
/// piece to the text's length with two overlapping loads and shifts.
#[derive(Debug, Default, Clone)]
pub(crate) struct Padded {
    /// The text, then zeros up to a multiple of 16 bytes.
    bytes: Vec<u8>,
    len: usize,
}

impl Padded {
    /// `text`, padded.
    pub fn new(text: &[u8]) -> Padded {
        let mut p = Padded::default();
        p.set(|v| v.extend_from_slice(text));
        p
    }

    /// Replaces the text with what `f` appends to an empty buffer.
    pub fn set(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        self.bytes.clear();
        f(&mut self.bytes);
        self.len = self.bytes.len();
        self.bytes.resize(self.len.next_multiple_of(16), 0);
    }

    /// The text.
    #[inline(always)]
    pub fn text(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Its length.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no text.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The region a line is formatted into: [`Line::MAX`] bytes for the line
/// and its [`Line::SLACK`], and `SLACK` more, so that a store at any cursor
/// below `MAX` stays inside.
pub(crate) type Region = [u8; Line::MAX + Line::SLACK];

/// The cursor into the region.
pub(crate) struct Line<'a> {
    buf: &'a mut Region,
    at: usize,
}

impl<'a> Line<'a> {
    /// Bytes of the region past the last one written that stores may
    /// overwrite.
    pub const SLACK: usize = 32;

    /// The most a line may take, [`Line::SLACK`] included: the caller
    /// checks a line's bound against it before formatting.
    pub const MAX: usize = 4096;

    /// A line starting at the beginning of `buf`.
    #[inline(always)]
    pub fn new(buf: &'a mut Region) -> Line<'a> {
        Line { buf, at: 0 }
    }

    /// Where the next store goes. The cursor never passes `MAX - SLACK`
    /// when the caller checked the line's bound; taken modulo `MAX` it
    /// provably leaves 32 bytes of the region after it, which spares every
    /// store its bounds check (two compares and a branch each, ~10% of a
    /// line's instructions), and a wrong bound writes wrong text, never
    /// outside the region.
    #[inline(always)]
    fn cursor(&self) -> usize {
        debug_assert!(self.at + Line::SLACK <= Line::MAX);
        self.at & (Line::MAX - 1)
    }

    /// Bytes written.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.at
    }

    #[inline(always)]
    fn store16(&mut self, x: [u8; 16], n: usize) {
        let at = self.cursor();
        self.buf[at..at + 16].copy_from_slice(&x);
        self.at += n;
    }

    /// The first `len` bytes of `padded`.
    #[inline(always)]
    pub fn short(&mut self, padded: &[u8; 16], len: usize) {
        self.store16(*padded, len);
    }

    /// One byte.
    #[inline(always)]
    pub fn byte(&mut self, b: u8) {
        let at = self.cursor();
        self.buf[at] = b;
        self.at += 1;
    }

    /// `b`, 16 bytes a store (the last one read as two overlapping loads,
    /// never past `b`'s end).
    #[inline(always)]
    pub fn bytes(&mut self, b: &[u8]) {
        let mut rest = b;
        while rest.len() > 16 {
            let (head, tail) = rest.split_at(16);
            self.store16(head.try_into().unwrap_or_default(), 16);
            rest = tail;
        }
        let n = rest.len();
        self.store16(ktrace_event::append::upto16_le(rest).to_le_bytes(), n);
    }

    /// `p`'s text: its whole pieces, then the cursor moved back over the
    /// padding (less than 16 bytes, within [`Line::SLACK`]).
    #[inline(always)]
    pub fn padded(&mut self, p: &Padded) {
        for piece in p.bytes.chunks_exact(16) {
            self.store16(piece.try_into().unwrap_or_default(), 16);
        }
        self.at -= p.bytes.len() - p.len;
    }

    /// `v` in hex without leading zeros (`upper`: `A-F`).
    #[inline(always)]
    pub fn hex(&mut self, v: u64, upper: bool) {
        let (digits, n) = num::hex_top(v, upper);
        self.store16(digits, n);
    }

    /// `v` in decimal.
    #[inline(always)]
    pub fn dec(&mut self, v: u64) {
        let mut b = [0u8; 56];
        let i = num::dec_tail(&mut b, v);
        let n = 24 - i;
        let at = self.cursor();
        self.buf[at..at + 32].copy_from_slice(&b[i..i + 32]);
        self.at += n;
    }

    /// `v` (below 1,000,000) as six digits, then `: `.
    #[inline(always)]
    pub fn dec6_colon(&mut self, v: u32) {
        let d = num::six_digits(v);
        let mut x = [0u8; 16];
        x[..6].copy_from_slice(&d);
        x[6] = b':';
        x[7] = b' ';
        self.store16(x, 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece against what the Vec appends of num and append write,
    /// pieces of every length one after another, lines filled up to the
    /// most a line may take.
    #[test]
    fn pieces_are_what_the_appends_write() {
        let src: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37) | 1).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut region: Box<Region> = Box::new([0xee; Line::MAX + Line::SLACK]);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut i = 0u64;
        let mut lines = 0;
        while i < 20_000 {
            let mut line = Line::new(&mut region);
            // the longest piece below is 70 bytes
            while line.len() + 70 + Line::SLACK <= Line::MAX {
                i += 1;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = x >> (i % 64);
                match i % 7 {
                    0 => {
                        line.hex(v, i.is_multiple_of(12));
                        num::hex_case(&mut want, v, i.is_multiple_of(12));
                    }
                    1 => {
                        line.dec(v);
                        num::dec(&mut want, v);
                    }
                    2 => {
                        line.dec6_colon((v % 1_000_000) as u32);
                        num::dec6_colon(&mut want, (v % 1_000_000) as u32);
                    }
                    3 => {
                        let n = (v % 70) as usize;
                        line.bytes(&src[3..3 + n]);
                        want.extend_from_slice(&src[3..3 + n]);
                    }
                    4 => {
                        let mut padded = [0u8; 16];
                        let n = (v % 17) as usize;
                        padded[..n].copy_from_slice(&src[..n]);
                        line.short(&padded, n);
                        want.extend_from_slice(&src[..n]);
                    }
                    5 => {
                        let n = (v % 70) as usize;
                        line.padded(&Padded::new(&src[5..5 + n]));
                        want.extend_from_slice(&src[5..5 + n]);
                    }
                    _ => {
                        line.byte(b'\n');
                        want.push(b'\n');
                    }
                }
            }
            let n = line.len();
            assert!(n + 70 + Line::SLACK > Line::MAX);
            got.extend_from_slice(&region[..n]);
            lines += 1;
        }
        assert!(lines > 5);
        assert_eq!(got, want);
    }
}
