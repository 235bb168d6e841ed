//! The bit writer behind zstd's entropy streams (RFC 8878 section 4.1 and
//! 4.2.1): bits are appended least significant first and the stream is
//! closed with a single 1 bit and zero padding, because decoders read it
//! backward from that final bit. Not a reader.

/// Appends bit fields to a byte vector, least significant bit first.
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl<'a> BitWriter<'a> {
    /// A writer appending to `out` (what `out` holds is kept).
    pub(crate) fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        BitWriter { out, acc: 0, n: 0 }
    }

    /// Appends the low `bits` bits of `value` (`bits` at most 32).
    #[inline]
    pub(crate) fn add(&mut self, value: u32, bits: u32) {
        debug_assert!(bits <= 32);
        debug_assert!(bits == 32 || u64::from(value) < (1u64 << bits));
        self.acc |= u64::from(value) << self.n;
        self.n += bits;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// Closes the stream: a 1 bit, then zeros up to the next byte.
    pub(crate) fn close(mut self) {
        self.add(1, 1);
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
    }

    /// Pads with zeros to a whole byte without an end marker (the FSE
    /// table description is such a forward stream).
    pub(crate) fn flush_bytes(mut self) {
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_little_endian_and_marker() {
        let mut v = Vec::new();
        let mut w = BitWriter::new(&mut v);
        w.add(0b101, 3);
        w.add(0x1ffff, 17);
        w.add(0xdead_beef, 32);
        w.close();
        // 3 + 17 + 32 bits + marker = 53 bits: 7 bytes, marker at bit 52
        assert_eq!(v.len(), 7);
        let mut x = 0u64;
        for (i, b) in v.iter().enumerate() {
            x |= u64::from(*b) << (8 * i);
        }
        assert_eq!(x & 7, 0b101);
        assert_eq!((x >> 3) & 0x1ffff, 0x1ffff);
        assert_eq!((x >> 20) & 0xffff_ffff, 0xdead_beef);
        assert_eq!(x >> 52, 1);
    }
}
