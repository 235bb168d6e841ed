//! The tokens of a print fmt argument: identifiers, C integer literals
//! with their types (C11 6.4.4.1), string and character literals with C's
//! escapes, and punctuators. [`super::expr`] parses them into a tree.

use super::ctype::IntTy;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Num(u64, IntTy),
    Str(Vec<u8>),
    P(&'static str),
}

impl Tok {
    pub(super) fn show(&self) -> String {
        match self {
            Tok::Ident(s) => format!("{s:?}"),
            Tok::Num(v, _) => v.to_string(),
            Tok::Str(s) => format!("{:?}", String::from_utf8_lossy(s)),
            Tok::P(p) => format!("'{p}'"),
        }
    }
}

const PUNCT: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", "?",
    ":", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "<", ">", ".",
];

pub(super) fn lex(text: &str, long_size: usize) -> Result<Vec<Tok>, String> {
    let b = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok::Ident(text[s..i].to_string()));
        } else if c.is_ascii_digit() {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            let (v, ty) = number(&text[s..i], long_size)?;
            toks.push(Tok::Num(v, ty));
        } else if c == b'"' {
            let (s, n) = string_lit(&b[i..])?;
            i += n;
            // adjacent literals concatenate
            if let Some(Tok::Str(prev)) = toks.last_mut() {
                prev.extend_from_slice(&s);
            } else {
                toks.push(Tok::Str(s));
            }
        } else if c == b'\'' {
            let (s, n) = char_lit(&b[i..])?;
            i += n;
            toks.push(Tok::Num(IntTy::INT.norm(u64::from(s)), IntTy::INT));
        } else {
            let p = PUNCT
                .iter()
                .find(|p| b[i..].starts_with(p.as_bytes()))
                .ok_or_else(|| format!("unexpected character {:?}", c as char))?;
            i += p.len();
            toks.push(Tok::P(p));
        }
    }
    Ok(toks)
}

/// An integer literal with C's typing rules (6.4.4.1).
pub(super) fn number(s: &str, long_size: usize) -> Result<(u64, IntTy), String> {
    let lower = s.to_ascii_lowercase();
    let digits_end = lower.trim_end_matches(['u', 'l']).len();
    let (digits, suffix) = lower.split_at(digits_end);
    let (unsigned, longs) = match suffix {
        "" => (false, 0),
        "u" => (true, 0),
        "l" => (false, 1),
        "ul" | "lu" => (true, 1),
        "ll" => (false, 2),
        "ull" | "llu" => (true, 2),
        _ => return Err(format!("bad integer literal {s:?}")),
    };
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x") {
        (16, h)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    let v = u64::from_str_radix(body, radix).map_err(|_| format!("bad integer literal {s:?}"))?;
    let lbits = 8 * long_size as u32;
    let candidates: &[(u32, bool)] = match (longs, unsigned, radix == 10) {
        (0, false, true) => &[(32, true), (0, true), (64, true)],
        (0, false, false) => &[
            (32, true),
            (32, false),
            (0, true),
            (0, false),
            (64, true),
            (64, false),
        ],
        (0, true, _) => &[(32, false), (0, false), (64, false)],
        (1, false, true) => &[(0, true), (64, true)],
        (1, false, false) => &[(0, true), (0, false), (64, true), (64, false)],
        (1, true, _) => &[(0, false), (64, false)],
        (_, false, true) => &[(64, true)],
        (_, false, false) => &[(64, true), (64, false)],
        (_, true, _) => &[(64, false)],
    };
    for &(bits, signed) in candidates {
        let bits = if bits == 0 { lbits } else { bits };
        let max = if signed {
            (1u64 << (bits - 1)) - 1
        } else if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        if v <= max {
            return Ok((v, IntTy::new(bits, signed)));
        }
    }
    Ok((v, IntTy::ULLONG))
}

fn escape(b: &[u8], i: &mut usize) -> Result<u8, String> {
    let c = *b.get(*i).ok_or("unterminated escape")?;
    *i += 1;
    Ok(match c {
        b'n' => b'\n',
        b't' => b'\t',
        b'r' => b'\r',
        b'a' => 7,
        b'b' => 8,
        b'f' => 12,
        b'v' => 11,
        b'x' => {
            let mut v = 0u32;
            while let Some(d) = b.get(*i).and_then(|c| (*c as char).to_digit(16)) {
                v = (v * 16 + d) & 0xff;
                *i += 1;
            }
            v as u8
        }
        b'0'..=b'7' => {
            let mut v = u32::from(c - b'0');
            let mut n = 1;
            while n < 3 && b.get(*i).is_some_and(|c| (b'0'..=b'7').contains(c)) {
                v = v * 8 + u32::from(b[*i] - b'0');
                *i += 1;
                n += 1;
            }
            v as u8
        }
        other => other,
    })
}

/// A string literal at the start of `b`: its bytes and its length in `b`.
fn string_lit(b: &[u8]) -> Result<(Vec<u8>, usize), String> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, i + 1)),
            b'\\' => {
                i += 1;
                out.push(escape(b, &mut i)?);
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err("unterminated string literal".into())
}

fn char_lit(b: &[u8]) -> Result<(u8, usize), String> {
    let mut i = 1;
    let c = match b.get(i) {
        Some(b'\\') => {
            i += 1;
            escape(b, &mut i)?
        }
        Some(&c) => {
            i += 1;
            c
        }
        None => return Err("unterminated character literal".into()),
    };
    if b.get(i) != Some(&b'\'') {
        return Err("unterminated character literal".into());
    }
    // a plain `char` constant is an int holding a (signed) char
    Ok((c, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_take_c_types() {
        let cases: &[(&str, u64, IntTy)] = &[
            ("0", 0, IntTy::INT),
            ("2147483647", 0x7fff_ffff, IntTy::INT),
            ("2147483648", 0x8000_0000, IntTy::new(64, true)),
            ("0x80000000", 0x8000_0000, IntTy::UINT),
            ("0x00000001", 1, IntTy::INT),
            ("1UL", 1, IntTy::new(64, false)),
            ("1ULL", 1, IntTy::ULLONG),
            ("1u", 1, IntTy::UINT),
            ("010", 8, IntTy::INT),
            ("0xFFFF0000U", 0xffff_0000, IntTy::UINT),
            ("0xffffffffffffffff", u64::MAX, IntTy::ULLONG),
        ];
        for (s, v, t) in cases {
            assert_eq!(number(s, 8).unwrap(), (*v, *t), "{s}");
        }
        assert_eq!(number("1UL", 4).unwrap(), (1, IntTy::UINT));
        assert_eq!(number("2147483648", 4).unwrap().1, IntTy::LLONG);
        for bad in ["0x", "1uu", "12abc", "1lul", "08"] {
            assert!(number(bad, 8).is_err(), "{bad}");
        }
    }
}
