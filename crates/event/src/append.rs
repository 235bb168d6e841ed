//! Appending short byte strings to an output buffer without a call to the
//! C library's `memcpy`.
//!
//! A copy whose length is only known at run time compiles to a `memcpy`
//! call. glibc's is fast for a few bytes; musl's (what the static x86_64
//! binary links) starts `rep movsq` and moves the rest a byte at a time,
//! and was half of the static binary's reader CPU when every event line is
//! built from about ten copies of 1 to 43 bytes (perf of `ktrace trace` on
//! 1,000,000 uprobe hits, issue 24). [`append`] reads up to 48 bytes as a
//! few fixed-size, possibly overlapping loads into registers, stores them
//! whole past the end of the buffer's contents, and cuts the length back:
//! plain loads and stores, no call, no stack copy read back (a first
//! version that went through a stack array spent as much again in
//! store-to-load forwarding stalls). Longer strings go through
//! `extend_from_slice`. It is not a general `memcpy`: the printers' hot
//! paths use it.

/// Appends `b` to `out`, exactly like `out.extend_from_slice(b)`. Always
/// inlined: as a call (thin LTO kept it one in the static x86_64 build) its
/// prologue and epilogue cost about as much as the copy.
#[inline(always)]
pub fn append(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    let len = out.len();
    if n <= 16 {
        out.extend_from_slice(&upto16(b).to_le_bytes());
    } else if n <= 32 {
        out.extend_from_slice(&le128(&b[..16]).to_le_bytes());
        out.extend_from_slice(&last16(b, n - 16).to_le_bytes());
    } else if n <= 48 {
        out.extend_from_slice(&le128(&b[..16]).to_le_bytes());
        out.extend_from_slice(&le128(&b[16..32]).to_le_bytes());
        out.extend_from_slice(&last16(b, n - 32).to_le_bytes());
    } else {
        out.extend_from_slice(b);
        return;
    }
    out.truncate(len + n);
}

/// Appends `n` copies of `byte`, like `out.resize(out.len() + n, byte)`.
#[inline]
pub fn fill(out: &mut Vec<u8>, byte: u8, n: usize) {
    if n <= 16 {
        let len = out.len();
        out.extend_from_slice(&[byte; 16]);
        out.truncate(len + n);
    } else {
        out.resize(out.len() + n, byte);
    }
}

/// `b` (at most 16 bytes) as the low bytes of a little-endian u128, for
/// callers that store it themselves (see `upto16`).
#[inline(always)]
pub fn upto16_le(b: &[u8]) -> u128 {
    upto16(b)
}

/// `b` (at most 16 bytes) as the low bytes of a little-endian u128, read
/// as two overlapping loads: bytes both loads cover are the same, so
/// or-ing them is exact.
#[inline(always)]
fn upto16(b: &[u8]) -> u128 {
    let n = b.len();
    if n >= 8 {
        u128::from(le64(&b[..8])) | u128::from(le64(&b[n - 8..])) << (8 * (n - 8))
    } else if n >= 4 {
        u128::from(le32(&b[..4])) | u128::from(le32(&b[n - 4..])) << (8 * (n - 4))
    } else if n > 0 {
        u128::from(b[0])
            | u128::from(b[n / 2]) << (8 * (n / 2))
            | u128::from(b[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

/// The `k` (1 to 16) bytes `b` ends with as the low bytes of a u128: its
/// last 16 bytes, shifted down.
#[inline(always)]
fn last16(b: &[u8], k: usize) -> u128 {
    le128(&b[b.len() - 16..]) >> (8 * (16 - k))
}

#[inline(always)]
fn le128(b: &[u8]) -> u128 {
    u128::from_le_bytes(b.try_into().unwrap_or_default())
}

#[inline(always)]
fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

#[inline(always)]
fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_every_length_exactly() {
        let src: Vec<u8> = (0..200u8).collect();
        for pre in [0usize, 1, 7, 100] {
            for n in 0..=130 {
                let mut got = vec![0xaa; pre];
                append(&mut got, &src[3..3 + n]);
                let mut want = vec![0xaa; pre];
                want.extend_from_slice(&src[3..3 + n]);
                assert_eq!(got, want, "prefix {pre}, {n} bytes");
            }
        }
    }

    #[test]
    fn fills_every_length_exactly() {
        for n in 0..=40 {
            let mut got = b"ab".to_vec();
            fill(&mut got, b' ', n);
            let mut want = b"ab".to_vec();
            want.resize(2 + n, b' ');
            assert_eq!(got, want, "{n} spaces");
        }
    }
}
