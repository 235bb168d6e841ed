//! Small allocation-free number formatting for the hot printing paths
//! (`core::fmt` costs about half the text printer's time). Not a general
//! printf; the callers apply widths and flags. Digits are appended with
//! [`append`], not `extend_from_slice` (see ktrace_event::append).

use ktrace_event::append::{append, fill};

/// Two-digit decimal pairs `00`..`99`.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Decimal digits of `v` into the tail of `buf`; returns where they start.
#[inline]
fn dec_into(buf: &mut [u8; 24], v: u64) -> usize {
    let mut i = buf.len();
    let mut v = v;
    while v >= 100 {
        let r = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        buf[i] = PAIRS[r];
        buf[i + 1] = PAIRS[r + 1];
    }
    if v >= 10 {
        let r = v as usize * 2;
        i -= 2;
        buf[i] = PAIRS[r];
        buf[i + 1] = PAIRS[r + 1];
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    i
}

/// Decimal digits of `v` ending at byte 24 of `buf`; returns where they
/// start (4 or more), with at least 32 bytes of `buf` from there.
#[inline(always)]
pub(crate) fn dec_tail(buf: &mut [u8; 56], v: u64) -> usize {
    let mut b = [0u8; 24];
    let i = dec_into(&mut b, v);
    buf[..24].copy_from_slice(&b);
    i
}

/// Appends `v` in decimal.
#[inline]
pub fn dec(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 24];
    let i = dec_into(&mut buf, v);
    append(out, &buf[i..]);
}

/// `v` (below 1,000,000) as exactly six decimal digits.
#[inline]
pub(crate) fn six_digits(v: u32) -> [u8; 6] {
    let v = v % 1_000_000;
    let (a, b, c) = (
        (v / 10_000) as usize,
        (v / 100 % 100) as usize,
        (v % 100) as usize,
    );
    [
        PAIRS[2 * a],
        PAIRS[2 * a + 1],
        PAIRS[2 * b],
        PAIRS[2 * b + 1],
        PAIRS[2 * c],
        PAIRS[2 * c + 1],
    ]
}

/// Appends `v` (below 1,000,000) as exactly six decimal digits.
#[inline]
pub fn dec6(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&six_digits(v));
}

/// Appends `v` (below 1,000,000) as exactly six decimal digits and `: `,
/// in one store.
#[inline]
pub fn dec6_colon(out: &mut Vec<u8>, v: u32) {
    let [a, b, c, d, e, f] = six_digits(v);
    out.extend_from_slice(&[a, b, c, d, e, f, b':', b' ']);
}

/// Digits of `v` in `radix` (8, 10, 16) into `buf`, returning the used tail.
#[inline]
pub fn digits(buf: &mut [u8; 24], v: u64, radix: u64, upper: bool) -> &[u8] {
    let set: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    // power-of-two radixes by shifting; 10 (and anything else) by division
    let shift = match radix {
        16 => {
            let i = hex_into(buf, v, upper);
            return &buf[i..];
        }
        8 => 3,
        10 => {
            let i = dec_into(buf, v);
            return &buf[i..];
        }
        _ => 0,
    };
    let mut i = buf.len();
    let mut v = v;
    if shift == 0 {
        loop {
            i -= 1;
            buf[i] = set[(v % radix) as usize];
            v /= radix;
            if v == 0 {
                break;
            }
        }
    } else {
        let mask = (1u64 << shift) - 1;
        loop {
            i -= 1;
            buf[i] = set[(v & mask) as usize];
            v >>= shift;
            if v == 0 {
                break;
            }
        }
    }
    &buf[i..]
}

/// Hex digits of `v` as ASCII, one per byte of a u128 (byte j, counting
/// from the least significant, is digit j), and how many digits `v` has
/// (1 to 16). All sixteen digits are made at once: each nibble is spread
/// into its own byte, then turned into ASCII without branches.
#[inline]
fn hex_ascii(v: u64, upper: bool) -> (u128, usize) {
    const LO32: u128 = 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
    const LO16: u128 = 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
    const LO8: u128 = 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
    const LO4: u128 = 0x0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f;
    const SIX: u128 = 0x0606_0606_0606_0606_0606_0606_0606_0606;
    const ONE: u128 = 0x0101_0101_0101_0101_0101_0101_0101_0101;
    const ZERO: u128 = 0x3030_3030_3030_3030_3030_3030_3030_3030;
    let mut x = u128::from(v);
    x = (x | (x << 32)) & LO32;
    x = (x | (x << 16)) & LO16;
    x = (x | (x << 8)) & LO8;
    x = (x | (x << 4)) & LO4;
    // byte j now holds nibble j; nibbles 10..15 get bit 4 when 6 is added
    let letters = ((x + SIX) >> 4) & ONE;
    let gap = if upper {
        b'A' - b'9' - 1
    } else {
        b'a' - b'9' - 1
    };
    x += ZERO + letters * u128::from(gap);
    let n = (67 - (v | 1).leading_zeros() as usize) / 4;
    (x, n)
}

/// Hex digits of `v` into the tail of `buf`; returns where they start.
#[inline]
fn hex_into(buf: &mut [u8; 24], v: u64, upper: bool) -> usize {
    let (x, n) = hex_ascii(v, upper);
    buf[8..].copy_from_slice(&x.to_be_bytes());
    buf.len() - n
}

/// Appends `v` in lowercase hex.
#[inline]
pub fn hex(out: &mut Vec<u8>, v: u64) {
    hex_case(out, v, false);
}

/// The hex digits of `v` (`upper` for `A-F`) at the start of 16 bytes,
/// and how many there are (1 to 16).
#[inline(always)]
pub(crate) fn hex_top(v: u64, upper: bool) -> ([u8; 16], usize) {
    let (x, n) = hex_ascii(v, upper);
    ((x << (8 * (16 - n))).to_be_bytes(), n)
}

/// Appends `v` in hex (`upper` for `A-F`): the digits shifted to the top
/// of the u128, stored whole (big-endian, most significant digit first)
/// and the unused tail cut off again, as [`append`] does; no stack buffer
/// read back.
#[inline]
pub fn hex_case(out: &mut Vec<u8>, v: u64, upper: bool) {
    let (x, n) = hex_ascii(v, upper);
    let len = out.len();
    // n is 1 to 16: the shift is 0 to 120 bits
    out.extend_from_slice(&(x << (8 * (16 - n))).to_be_bytes());
    out.truncate(len + n);
}

/// Appends `v` in lower-case hex, zero-padded to at least `width` digits
/// (`%0*lx`; `width` at most 16).
#[inline]
pub fn hex_zero(out: &mut Vec<u8>, v: u64, width: usize) {
    let (x, n) = hex_ascii(v, false);
    fill(out, b'0', width.saturating_sub(n));
    let len = out.len();
    out.extend_from_slice(&(x << (8 * (16 - n))).to_be_bytes());
    out.truncate(len + n);
}

/// Appends `s` right-aligned in `width` columns.
#[inline]
pub fn right(out: &mut Vec<u8>, s: &[u8], width: usize) {
    fill(out, b' ', width.saturating_sub(s.len()));
    append(out, s);
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_zero_pads_as_format_does() {
        for v in [0u64, 1, 0xf, 0x401136, 0x1234_5678, 0x1_0000_0000, u64::MAX] {
            for w in [0, 1, 8, 16] {
                let mut got = b"x".to_vec();
                super::hex_zero(&mut got, v, w);
                assert_eq!(got, format!("x{v:0w$x}").into_bytes(), "{v:#x} {w}");
            }
        }
    }

    use super::*;

    /// Every hex form against core::fmt over generated values of every
    /// digit count (the two halves meet at 8 and 9 digits).
    #[test]
    fn hex_forms_match_core_fmt_at_every_length() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x >> (i % 64);
            let mut o = b"ab".to_vec();
            hex(&mut o, v);
            assert_eq!(o, format!("ab{v:x}").into_bytes());
            let mut o = Vec::new();
            hex_case(&mut o, v, true);
            assert_eq!(o, format!("{v:X}").into_bytes());
            let w = (i % 18) as usize;
            let mut o = Vec::new();
            hex_zero(&mut o, v, w.min(16));
            assert_eq!(o, format!("{v:0w$x}", w = w.min(16)).into_bytes());
            let mut b = [0; 24];
            assert_eq!(digits(&mut b, v, 16, false), format!("{v:x}").as_bytes());
        }
    }

    #[test]
    fn matches_core_fmt() {
        for v in [
            0u64,
            1,
            9,
            10,
            11,
            15,
            16,
            99,
            100,
            101,
            255,
            256,
            999,
            1000,
            4095,
            4096,
            0x7ffd8c9e5e30,
            1 << 63,
            10_000_000_000_000_000_000,
            123456789,
            u64::MAX,
        ] {
            let mut o = Vec::new();
            dec(&mut o, v);
            assert_eq!(o, v.to_string().into_bytes());
            let mut o = Vec::new();
            hex(&mut o, v);
            assert_eq!(o, format!("{v:x}").into_bytes());
            let mut o = Vec::new();
            hex_case(&mut o, v, true);
            assert_eq!(o, format!("{v:X}").into_bytes());
            let mut b = [0; 24];
            assert_eq!(digits(&mut b, v, 8, false), format!("{v:o}").as_bytes());
            assert_eq!(digits(&mut b, v, 16, true), format!("{v:X}").as_bytes());
            assert_eq!(digits(&mut b, v, 10, false), format!("{v}").as_bytes());
        }
        for v in [0u32, 5, 42, 999, 1000, 123456, 999_999] {
            let mut o = Vec::new();
            dec6(&mut o, v);
            assert_eq!(o, format!("{v:06}").into_bytes());
            let mut o = Vec::new();
            dec6_colon(&mut o, v);
            assert_eq!(o, format!("{v:06}: ").into_bytes());
        }
        let mut o = Vec::new();
        right(&mut o, b"ab", 5);
        right(&mut o, b"abcdef", 3);
        assert_eq!(o, b"   ababcdef");
    }
}
