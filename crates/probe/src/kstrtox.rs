//! The kernel's integer parsers, byte for byte: `kstrtoull`, `kstrtoll`,
//! `kstrtouint`, `kstrtoul`/`kstrtol` (by word size) and `simple_strtoul`.
//!
//! Mirrors lib/kstrtox.c and lib/vsprintf.c: base 0 picks hex after `0x`, octal after
//! a leading `0`, decimal otherwise; one leading `+` is accepted by the `kstrto*`
//! family; a single trailing newline is accepted. Not a general number parser.

/// Why a conversion failed (`-EINVAL` or `-ERANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KstrError {
    /// Not a number (`-EINVAL`).
    Invalid,
    /// Out of range (`-ERANGE`).
    Range,
}

fn fixup_radix(s: &[u8], base: &mut u32) -> usize {
    if *base == 0 {
        if s.first() == Some(&b'0') {
            if s.get(1).map(|c| c.to_ascii_lowercase()) == Some(b'x')
                && s.get(2).is_some_and(|c| c.is_ascii_hexdigit())
            {
                *base = 16;
            } else {
                *base = 8;
            }
        } else {
            *base = 10;
        }
    }
    if *base == 16
        && s.first() == Some(&b'0')
        && s.get(1).map(|c| c.to_ascii_lowercase()) == Some(b'x')
    {
        2
    } else {
        0
    }
}

/// Parses digits; returns (value wrapped mod 2^64, digits consumed, overflowed).
fn parse_integer(s: &[u8], base: u32) -> (u64, usize, bool) {
    let mut res: u64 = 0;
    let mut n = 0;
    let mut overflow = false;
    for &c in s {
        let val = match c {
            b'0'..=b'9' => (c - b'0') as u32,
            b'a'..=b'f' => (c - b'a' + 10) as u32,
            b'A'..=b'F' => (c - b'A' + 10) as u32,
            _ => break,
        };
        if val >= base {
            break;
        }
        match res
            .checked_mul(base as u64)
            .and_then(|r| r.checked_add(val as u64))
        {
            Some(r) => res = r,
            None => {
                overflow = true;
                res = res.wrapping_mul(base as u64).wrapping_add(val as u64);
            }
        }
        n += 1;
    }
    (res, n, overflow)
}

fn kstrtoull_inner(s: &[u8], mut base: u32) -> Result<u64, KstrError> {
    let skip = fixup_radix(s, &mut base);
    let s = &s[skip..];
    let (v, n, overflow) = parse_integer(s, base);
    if n == 0 {
        return Err(KstrError::Invalid);
    }
    if overflow {
        return Err(KstrError::Range);
    }
    let mut rest = &s[n..];
    if rest.first() == Some(&b'\n') {
        rest = &rest[1..];
    }
    if !rest.is_empty() {
        return Err(KstrError::Invalid);
    }
    Ok(v)
}

/// `kstrtoull(s, base)`.
pub fn kstrtoull(s: &str, base: u32) -> Result<u64, KstrError> {
    let b = s.as_bytes();
    let b = if b.first() == Some(&b'+') { &b[1..] } else { b };
    kstrtoull_inner(b, base)
}

/// `kstrtoll(s, base)`. After a `-` the digits go to `_kstrtoull()`, which
/// takes no `+`: `-+80` is not a number (x86_64 7.2, conform seed 59:
/// `a37=-+80(%r8)` is "Invalid dereference offset").
pub fn kstrtoll(s: &str, base: u32) -> Result<i64, KstrError> {
    if let Some(rest) = s.strip_prefix('-') {
        let v = kstrtoull_inner(rest.as_bytes(), base)?;
        let neg = (v as i64).wrapping_neg();
        if neg > 0 {
            return Err(KstrError::Range);
        }
        Ok(neg)
    } else {
        let v = kstrtoull(s, base)?;
        if v > i64::MAX as u64 {
            return Err(KstrError::Range);
        }
        Ok(v as i64)
    }
}

/// `kstrtouint(s, base)`.
pub fn kstrtouint(s: &str, base: u32) -> Result<u32, KstrError> {
    let v = kstrtoull(s, base)?;
    u32::try_from(v).map_err(|_| KstrError::Range)
}

/// `kstrtoint(s, base)`.
pub fn kstrtoint(s: &str, base: u32) -> Result<i32, KstrError> {
    let v = kstrtoll(s, base)?;
    i32::try_from(v).map_err(|_| KstrError::Range)
}

/// `kstrtoul` on a kernel whose `long` has `bits` bits.
pub fn kstrtoul(s: &str, base: u32, bits: u32) -> Result<u64, KstrError> {
    if bits == 64 {
        kstrtoull(s, base)
    } else {
        kstrtouint(s, base).map(u64::from)
    }
}

/// `kstrtol` on a kernel whose `long` has `bits` bits.
pub fn kstrtol(s: &str, base: u32, bits: u32) -> Result<i64, KstrError> {
    if bits == 64 {
        kstrtoll(s, base)
    } else {
        kstrtoint(s, base).map(i64::from)
    }
}

/// `simple_strtoul(s, &tail, base)`: returns the value (wrapped like the kernel's,
/// truncated to `bits`) and the number of bytes consumed (radix prefix included).
pub fn simple_strtoul(s: &str, base: u32, bits: u32) -> (u64, usize) {
    let b = s.as_bytes();
    let mut base = base;
    let skip = fixup_radix(b, &mut base);
    let (v, n, _) = parse_integer(&b[skip..], base);
    let v = if bits == 64 { v } else { v & 0xffff_ffff };
    (v, skip + n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, Result<u64, KstrError>)] = &[
            ("0", Ok(0)),
            ("10", Ok(10)),
            ("0x10", Ok(16)),
            ("0X1f", Ok(31)),
            ("010", Ok(8)),
            ("08", Err(KstrError::Invalid)),
            ("0x", Err(KstrError::Invalid)),
            ("+5", Ok(5)),
            ("++5", Err(KstrError::Invalid)),
            ("5\n", Ok(5)),
            ("5 ", Err(KstrError::Invalid)),
            ("", Err(KstrError::Invalid)),
            ("18446744073709551615", Ok(u64::MAX)),
            ("18446744073709551616", Err(KstrError::Range)),
            ("1a", Err(KstrError::Invalid)),
            ("-1", Err(KstrError::Invalid)),
        ];
        for (s, want) in cases {
            assert_eq!(kstrtoull(s, 0), *want, "{s:?}");
        }
    }

    #[test]
    fn signed() {
        assert_eq!(kstrtoll("-8", 0), Ok(-8));
        assert_eq!(kstrtoll("-0x10", 0), Ok(-16));
        assert_eq!(kstrtoll("-+1", 0), Err(KstrError::Invalid));
        assert_eq!(kstrtoll("+1", 0), Ok(1));
        assert_eq!(kstrtoll("-0", 0), Ok(0));
        assert_eq!(kstrtol("-+1", 0, 32), Err(KstrError::Invalid));
        assert_eq!(kstrtoll("9223372036854775808", 0), Err(KstrError::Range));
        assert_eq!(kstrtoll("-9223372036854775808", 0), Ok(i64::MIN));
        assert_eq!(kstrtoll("-9223372036854775809", 0), Err(KstrError::Range));
        assert_eq!(kstrtol("2147483648", 0, 32), Err(KstrError::Range));
        assert_eq!(kstrtoul("4294967296", 0, 32), Err(KstrError::Range));
        assert_eq!(kstrtouint("4294967295", 0), Ok(u32::MAX));
    }

    #[test]
    fn simple() {
        assert_eq!(simple_strtoul("10@2", 0, 64), (10, 2));
        assert_eq!(simple_strtoul("@2", 0, 64), (0, 0));
        assert_eq!(simple_strtoul("0x/8", 0, 64), (0, 1));
        assert_eq!(simple_strtoul("0x1f/", 0, 64), (31, 4));
        assert_eq!(simple_strtoul("a", 0, 64), (0, 0));
    }
}
