//! Small allocation-free number formatting for the hot printing paths
//! (`core::fmt` costs about half the text printer's time). Not a general
//! printf; the callers apply widths and flags.

/// Appends `v` in decimal.
#[inline]
pub fn dec(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Digits of `v` in `radix` (8, 10, 16) into `buf`, returning the used tail.
#[inline]
pub fn digits(buf: &mut [u8; 24], v: u64, radix: u64, upper: bool) -> &[u8] {
    let set: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = set[(v % radix) as usize];
        v /= radix;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Appends `v` in lowercase hex.
#[inline]
pub fn hex(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 24];
    out.extend_from_slice(digits(&mut b, v, 16, false));
}

/// Appends `s` right-aligned in `width` columns.
#[inline]
pub fn right(out: &mut Vec<u8>, s: &[u8], width: usize) {
    out.resize(out.len() + width.saturating_sub(s.len()), b' ');
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_core_fmt() {
        for v in [0u64, 1, 9, 10, 255, 4096, 123456789, u64::MAX] {
            let mut o = Vec::new();
            dec(&mut o, v);
            assert_eq!(o, v.to_string().into_bytes());
            let mut o = Vec::new();
            hex(&mut o, v);
            assert_eq!(o, format!("{v:x}").into_bytes());
            let mut b = [0; 24];
            assert_eq!(digits(&mut b, v, 8, false), format!("{v:o}").as_bytes());
            assert_eq!(digits(&mut b, v, 16, true), format!("{v:X}").as_bytes());
        }
        let mut o = Vec::new();
        right(&mut o, b"ab", 5);
        right(&mut o, b"abcdef", 3);
        assert_eq!(o, b"   ababcdef");
    }
}
