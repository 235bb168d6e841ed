//! Evaluation of a print fmt argument ([`super::expr::Expr`]) against one
//! record, with C's integer rules and the kernel's print helpers.
//!
//! Values are what the kernel's compiled `trace_raw_output_*()` would hand
//! to `trace_seq_printf()`: integers of a C type, and pointers — into the
//! record (array fields, `__get_str()`, `__get_dynamic_array()`), to string
//! literals, or to the text a helper wrote (`__print_flags()` and friends
//! write into the iterator's `tmp_seq` and return a `char *`, see
//! `trace_print_flags_seq()` and the others in kernel/trace/trace_output.c).
//! A pointer value read from the record points to kernel memory, which
//! cannot be read here: it stays an integer, and dereferencing it is an
//! error. Pure code over the record bytes; no I/O.

use std::borrow::Cow;

use super::ctype::{CType, IntTy};
use super::expr::{Binary, Expr, Helper, Unary, field_type};
use crate::format::{EventFormat, FieldKind};
use ktrace_ring::Endian;

/// A value of an argument expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val<'a> {
    /// An integer of a C type; the bits are [`IntTy::norm`]alised.
    Int(u64, IntTy),
    /// A pointer whose target is known: the bytes from the pointer on (to
    /// the end of what it points into), and the element type (`None` for
    /// `void *` and structures).
    Ptr(Cow<'a, [u8]>, Option<IntTy>),
}

impl Val<'_> {
    /// C truthiness: a non-zero integer, any known pointer.
    pub fn truth(&self) -> bool {
        match self {
            Val::Int(v, _) => *v != 0,
            Val::Ptr(..) => true,
        }
    }
}

/// One record and what is needed to read it.
#[derive(Clone, Copy)]
pub struct Rec<'a> {
    /// The event's format.
    pub format: &'a EventFormat,
    /// The record's bytes (from `common_type` on).
    pub data: &'a [u8],
    /// The kernel's byte order.
    pub endian: Endian,
    /// The kernel's `sizeof(long)`.
    pub long_size: usize,
}

/// The value of a constant expression (no field, no helper), as `u64`
/// bits; `None` when it is not constant.
pub fn constant(e: &Expr, long_size: usize) -> Option<u64> {
    let ev = Ev {
        rec: None,
        long_size,
    };
    match ev.eval(e) {
        Ok(Val::Int(v, _)) => Some(v),
        _ => None,
    }
}

/// Evaluates `e` against `rec`.
pub fn eval<'a>(e: &Expr, rec: Rec<'a>) -> Result<Val<'a>, String> {
    Ev {
        rec: Some(rec),
        long_size: rec.long_size,
    }
    .eval(e)
}

struct Ev<'a> {
    rec: Option<Rec<'a>>,
    long_size: usize,
}

fn read_uint(b: &[u8], endian: Endian) -> u64 {
    match b.len() {
        1 => u64::from(b[0]),
        2 => u64::from(endian.u16(b)),
        4 => u64::from(endian.u32(b)),
        _ => endian.u64(b),
    }
}

fn int_of(v: Val<'_>) -> Result<(u64, IntTy), String> {
    match v {
        Val::Int(v, t) => Ok((v, t)),
        Val::Ptr(..) => Err("the address of record data is not known".into()),
    }
}

fn convert(v: u64, to: IntTy) -> u64 {
    to.norm(v)
}

impl<'a> Ev<'a> {
    fn rec(&self) -> Result<Rec<'a>, String> {
        self.rec.ok_or_else(|| "not a constant".to_string())
    }

    fn eval(&self, e: &Expr) -> Result<Val<'a>, String> {
        match e {
            Expr::Num(v, t) => Ok(Val::Int(t.norm(*v), *t)),
            Expr::Str(s) => {
                let mut b = s.clone();
                b.push(0);
                Ok(Val::Ptr(Cow::Owned(b), Some(IntTy::CHAR)))
            }
            Expr::Field(i) => self.field(*i),
            Expr::Index(b, i) => {
                let p = self.eval(b)?;
                let (i, it) = int_of(self.eval(i)?)?;
                let i = if it.signed {
                    i as i64
                } else {
                    i.min(i64::MAX as u64) as i64
                };
                self.load(p, i)
            }
            Expr::Unary(Unary::Deref, b) => {
                let p = self.eval(b)?;
                self.load(p, 0)
            }
            Expr::Unary(op, x) => {
                let v = self.eval(x)?;
                if *op == Unary::Not {
                    return Ok(Val::Int(u64::from(!v.truth()), IntTy::INT));
                }
                let (v, t) = int_of(v)?;
                let t = t.promote();
                let v = convert(v, t);
                Ok(Val::Int(
                    t.norm(match op {
                        Unary::Neg => v.wrapping_neg(),
                        Unary::BitNot => !v,
                        _ => v,
                    }),
                    t,
                ))
            }
            Expr::Binary(Binary::And, a, b) => {
                let r = self.eval(a)?.truth() && self.eval(b)?.truth();
                Ok(Val::Int(u64::from(r), IntTy::INT))
            }
            Expr::Binary(Binary::Or, a, b) => {
                let r = self.eval(a)?.truth() || self.eval(b)?.truth();
                Ok(Val::Int(u64::from(r), IntTy::INT))
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                self.binary(*op, a, b)
            }
            Expr::Cond(c, a, b) => {
                let v = if self.eval(c)?.truth() {
                    self.eval(a)?
                } else {
                    self.eval(b)?
                };
                // both arms convert to one type (6.5.15)
                let fields = self.rec.map_or(&[][..], |r| &r.format.fields[..]);
                match (
                    v,
                    a.ty(fields, self.long_size),
                    b.ty(fields, self.long_size),
                ) {
                    (Val::Int(v, _), Some(CType::Int(x)), Some(CType::Int(y))) => {
                        let t = IntTy::common(x, y);
                        Ok(Val::Int(t.norm(v), t))
                    }
                    (v, _, _) => Ok(v),
                }
            }
            Expr::Cast(t, x) => {
                let v = self.eval(x)?;
                match (t, v) {
                    (CType::Int(t), Val::Int(v, _)) => Ok(Val::Int(t.norm(v), *t)),
                    (CType::Int(_), Val::Ptr(..)) => {
                        Err("the address of record data is not known".into())
                    }
                    (CType::Ptr(elem), Val::Ptr(b, _)) => Ok(Val::Ptr(b, *elem)),
                    // a pointer value: a kernel address, kept as a number
                    (CType::Ptr(_), Val::Int(v, _)) => {
                        let t = IntTy::ulong(self.long_size);
                        Ok(Val::Int(t.norm(v), t))
                    }
                }
            }
            Expr::Helper(h) => self.helper(h),
        }
    }

    fn field(&self, i: usize) -> Result<Val<'a>, String> {
        let rec = self.rec()?;
        let f = rec.format.fields.get(i).ok_or("no such field")?;
        let short = || format!("record too short for field {}", f.name);
        match (f.kind, field_type(f, rec.long_size)) {
            (FieldKind::DataLoc { .. }, _) => self.dyn_array(i, 0),
            (_, CType::Int(t)) => {
                let b = rec
                    .data
                    .get(f.offset..f.offset.saturating_add(f.elem_size))
                    .ok_or_else(short)?;
                Ok(Val::Int(t.norm(read_uint(b, rec.endian)), t))
            }
            (_, CType::Ptr(elem)) => {
                // a zero size is "the rest of the record" (`args[]`)
                let end = if f.size == 0 {
                    rec.data.len()
                } else {
                    f.offset.saturating_add(f.size)
                };
                let b = rec.data.get(f.offset..end).ok_or_else(short)?;
                Ok(Val::Ptr(Cow::Borrowed(b), elem))
            }
        }
    }

    /// `p[i]`.
    fn load(&self, p: Val<'a>, i: i64) -> Result<Val<'a>, String> {
        let endian = self.rec()?.endian;
        match p {
            Val::Ptr(b, Some(t)) => {
                let size = (t.bits / 8) as usize;
                let at = usize::try_from(i)
                    .ok()
                    .and_then(|i| i.checked_mul(size))
                    .ok_or("index out of range")?;
                let x = b
                    .get(at..at.saturating_add(size))
                    .ok_or("index past the end of the data")?;
                Ok(Val::Int(t.norm(read_uint(x, endian)), t))
            }
            Val::Ptr(_, None) => Err("dereference of a void pointer".into()),
            Val::Int(..) => Err("cannot read kernel memory".into()),
        }
    }

    fn binary(&self, op: Binary, a: Val<'a>, b: Val<'a>) -> Result<Val<'a>, String> {
        let (a, b) = match (a, b) {
            (Val::Ptr(p, t), Val::Int(n, nt)) | (Val::Int(n, nt), Val::Ptr(p, t))
                if op == Binary::Add || op == Binary::Sub =>
            {
                if op == Binary::Sub && nt.signed && (n as i64) > 0
                    || op == Binary::Add && nt.signed && (n as i64) < 0
                {
                    return Err("pointer moved before the data".into());
                }
                let n = if nt.signed {
                    (n as i64).unsigned_abs()
                } else {
                    n
                };
                let size = t.map_or(1, |t| (t.bits / 8) as u64);
                let skip = usize::try_from(n.saturating_mul(size)).unwrap_or(usize::MAX);
                let rest: Cow<'a, [u8]> = match p {
                    Cow::Borrowed(x) => Cow::Borrowed(x.get(skip..).unwrap_or(&[])),
                    Cow::Owned(x) => Cow::Owned(x.get(skip..).unwrap_or(&[]).to_vec()),
                };
                return Ok(Val::Ptr(rest, t));
            }
            (Val::Ptr(..), Val::Int(0, _)) | (Val::Int(0, _), Val::Ptr(..))
                if op == Binary::Eq || op == Binary::Ne =>
            {
                return Ok(Val::Int(u64::from(op == Binary::Ne), IntTy::INT));
            }
            (a, b) => (int_of(a)?, int_of(b)?),
        };
        let ((x, xt), (y, yt)) = (a, b);
        if matches!(op, Binary::Shl | Binary::Shr) {
            let t = xt.promote();
            let x = convert(x, t);
            let n = if yt.signed && (y as i64) < 0 {
                u32::MAX
            } else {
                u32::try_from(y).unwrap_or(u32::MAX)
            };
            let v = match op {
                Binary::Shl => x.checked_shl(n).unwrap_or(0),
                _ if t.signed => ((x as i64) >> n.min(63)) as u64,
                _ => x.checked_shr(n).unwrap_or(0),
            };
            return Ok(Val::Int(t.norm(v), t));
        }
        let t = IntTy::common(xt, yt);
        let (x, y) = (convert(x, t), convert(y, t));
        let (sx, sy) = (x as i64, y as i64);
        let cmp = |r: bool| Ok(Val::Int(u64::from(r), IntTy::INT));
        let v = match op {
            Binary::Mul => x.wrapping_mul(y),
            Binary::Div | Binary::Rem if y == 0 => return Err("division by zero".into()),
            Binary::Div if t.signed => sx.wrapping_div(sy) as u64,
            Binary::Div => x / y,
            Binary::Rem if t.signed => sx.wrapping_rem(sy) as u64,
            Binary::Rem => x % y,
            Binary::Add => x.wrapping_add(y),
            Binary::Sub => x.wrapping_sub(y),
            Binary::BitAnd => x & y,
            Binary::BitXor => x ^ y,
            Binary::BitOr => x | y,
            Binary::Lt => return cmp(if t.signed { sx < sy } else { x < y }),
            Binary::Gt => return cmp(if t.signed { sx > sy } else { x > y }),
            Binary::Le => return cmp(if t.signed { sx <= sy } else { x <= y }),
            Binary::Ge => return cmp(if t.signed { sx >= sy } else { x >= y }),
            Binary::Eq => return cmp(x == y),
            Binary::Ne => return cmp(x != y),
            Binary::Shl | Binary::Shr | Binary::And | Binary::Or => unreachable!(),
        };
        Ok(Val::Int(t.norm(v), t))
    }

    /// The bytes of element `elem` of `__data_loc`/`__rel_loc` field `i`.
    fn dyn_array(&self, i: usize, elem: usize) -> Result<Val<'a>, String> {
        let rec = self.rec()?;
        let (off, len) = self.loc(i, elem)?;
        let b = rec
            .data
            .get(off..off.saturating_add(len))
            .ok_or("dynamic data past the end of the record")?;
        Ok(Val::Ptr(Cow::Borrowed(b), Some(IntTy::CHAR)))
    }

    /// Offset (from the record start) and length of a dynamic field.
    fn loc(&self, i: usize, elem: usize) -> Result<(usize, usize), String> {
        let rec = self.rec()?;
        let f = rec.format.fields.get(i).ok_or("no such field")?;
        let FieldKind::DataLoc { relative } = f.kind else {
            return Err(format!("{} is not a dynamic field", f.name));
        };
        let at = f.offset.saturating_add(elem.saturating_mul(4));
        let b = rec
            .data
            .get(at..at.saturating_add(4))
            .ok_or("record too short")?;
        let loc = rec.endian.u32(b);
        let mut off = (loc & 0xffff) as usize;
        if relative {
            off += at + 4;
        }
        Ok((off, (loc >> 16) as usize))
    }

    fn helper(&self, h: &Helper) -> Result<Val<'a>, String> {
        let text = |s: Vec<u8>| -> Result<Val<'a>, String> {
            let mut s = s;
            s.push(0);
            Ok(Val::Ptr(Cow::Owned(s), Some(IntTy::CHAR)))
        };
        let ulong = |wide: bool| {
            if wide {
                IntTy::ULLONG
            } else {
                IntTy::ulong(self.long_size)
            }
        };
        match h {
            Helper::Flags {
                value,
                delim,
                table,
                wide,
            } => {
                let t = ulong(*wide);
                let (v, _) = int_of(self.eval(value)?)?;
                text(print_flags(t.norm(v), delim, table))
            }
            Helper::Symbolic { value, table, wide } => {
                let t = ulong(*wide);
                let (v, _) = int_of(self.eval(value)?)?;
                let v = t.norm(v);
                let s = match table.iter().find(|(m, _)| *m == v) {
                    Some((_, name)) => name.clone(),
                    None => format!("0x{v:x}").into_bytes(),
                };
                text(s)
            }
            Helper::Hex { buf, len, concat } => {
                let b = self.bytes(buf)?;
                let (n, _) = int_of(self.eval(len)?)?;
                // `int buf_len`
                let n = usize::try_from(IntTy::INT.norm(n) as i64).unwrap_or(0);
                let b = b.get(..n).ok_or("hex dump past the end of the data")?;
                let mut s = Vec::with_capacity(n * 3);
                for (i, x) in b.iter().enumerate() {
                    if i > 0 && !concat {
                        s.push(b' ');
                    }
                    s.extend_from_slice(format!("{x:02x}").as_bytes());
                }
                text(s)
            }
            Helper::Array {
                buf,
                count,
                el_size,
            } => {
                let b = self.bytes(buf)?;
                let (n, _) = int_of(self.eval(count)?)?;
                let (el, _) = int_of(self.eval(el_size)?)?;
                let n = usize::try_from(IntTy::INT.norm(n) as i64).unwrap_or(0);
                let el = usize::try_from(el).map_err(|_| "bad element size")?;
                let total = n.checked_mul(el).ok_or("array too large")?;
                let b = b.get(..total).ok_or("array past the end of the data")?;
                text(print_array(b, el, self.rec()?.endian))
            }
            Helper::DynArray { field, elem } => self.dyn_array(*field, *elem),
            Helper::DynLen { field } => {
                let (_, len) = self.loc(*field, 0)?;
                Ok(Val::Int(len as u64, IntTy::UINT))
            }
            Helper::Bitmask { field } => {
                let Val::Ptr(b, _) = self.dyn_array(*field, 0)? else {
                    return Err("bad bitmask".into());
                };
                let rec = self.rec()?;
                text(bitmap_string(&b, b.len() * 8, rec.long_size, rec.endian))
            }
            Helper::NsToSecs(v) => {
                let (v, _) = int_of(self.eval(v)?)?;
                Ok(Val::Int(v / 1_000_000_000, IntTy::ULLONG))
            }
            Helper::NsWithoutSecs(v) => {
                let (v, _) = int_of(self.eval(v)?)?;
                Ok(Val::Int(v % 1_000_000_000, IntTy::UINT))
            }
            Helper::InIrq(mask) => {
                let flags = *self.rec()?.data.get(2).ok_or("record too short")?;
                Ok(Val::Int(u64::from(flags & mask), IntTy::INT))
            }
        }
    }

    fn bytes(&self, e: &Expr) -> Result<Cow<'a, [u8]>, String> {
        match self.eval(e)? {
            Val::Ptr(b, _) => Ok(b),
            Val::Int(..) => Err("cannot read kernel memory".into()),
        }
    }
}

/// `trace_print_flags_seq()`: the names of the masks set in `flags`, in
/// table order, joined by `delim`, and what no name covered as `0x%lx`.
pub fn print_flags(mut flags: u64, delim: &[u8], table: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut s = Vec::new();
    let mut first = true;
    for (mask, name) in table {
        if flags == 0 {
            break;
        }
        if flags & mask != *mask {
            continue;
        }
        flags &= !mask;
        if !first {
            s.extend_from_slice(delim);
        }
        first = false;
        s.extend_from_slice(name);
    }
    if flags != 0 {
        if !first {
            s.extend_from_slice(delim);
        }
        s.extend_from_slice(format!("0x{flags:x}").as_bytes());
    }
    s
}

/// `trace_print_array_seq()`: `{0x1,0x2}`.
fn print_array(b: &[u8], el: usize, endian: Endian) -> Vec<u8> {
    let mut s = vec![b'{'];
    let mut at = 0;
    let mut el = el;
    while at < b.len() {
        if at > 0 {
            s.push(b',');
        }
        match el {
            1 | 2 | 4 | 8 => {
                let Some(x) = b.get(at..at + el) else { break };
                s.extend_from_slice(format!("0x{:x}", read_uint(x, endian)).as_bytes());
            }
            _ => {
                s.extend_from_slice(format!("BAD SIZE:{el} 0x{:x}", b[at]).as_bytes());
                el = 1;
            }
        }
        at += el;
    }
    s.push(b'}');
    s
}

/// `bitmap_string()` (`%*pb`): `nr_bits` bits of a bitmap of `long`s, as
/// comma-separated 32-bit hex chunks, most significant first.
pub fn bitmap_string(b: &[u8], nr_bits: usize, long_size: usize, endian: Endian) -> Vec<u8> {
    let lbits = 8 * long_size;
    let word = |w: usize| -> u64 {
        let at = w * long_size;
        match b.get(at..at + long_size) {
            Some(x) => read_uint(x, endian),
            None => 0,
        }
    };
    let mut s = Vec::new();
    let mut chunk = nr_bits & 31;
    if chunk == 0 {
        chunk = 32;
    }
    let mut i = nr_bits.div_ceil(32) * 32;
    let mut first = true;
    while i >= 32 {
        i -= 32;
        let mask = if chunk >= 32 {
            0xffff_ffff
        } else {
            (1u64 << chunk) - 1
        };
        let v = (word(i / lbits) >> (i % lbits)) & mask;
        if !first {
            s.push(b',');
        }
        first = false;
        s.extend_from_slice(format!("{v:0w$x}", w = chunk.div_ceil(4)).as_bytes());
        chunk = 32;
    }
    s
}

/// `bitmap_list_string()` (`%*pbl`): `0-3,7`.
pub fn bitmap_list(b: &[u8], nr_bits: usize, long_size: usize, endian: Endian) -> Vec<u8> {
    let lbits = 8 * long_size;
    let bit = |n: usize| -> bool {
        let at = (n / lbits) * long_size;
        b.get(at..at + long_size)
            .is_some_and(|x| read_uint(x, endian) >> (n % lbits) & 1 == 1)
    };
    let mut s = Vec::new();
    let mut n = 0;
    while n < nr_bits {
        if !bit(n) {
            n += 1;
            continue;
        }
        let start = n;
        while n + 1 < nr_bits && bit(n + 1) {
            n += 1;
        }
        if !s.is_empty() {
            s.push(b',');
        }
        s.extend_from_slice(start.to_string().as_bytes());
        if n > start {
            s.push(b'-');
            s.extend_from_slice(n.to_string().as_bytes());
        }
        n += 1;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_like_trace_print_flags_seq() {
        let t: Vec<(u64, Vec<u8>)> = vec![
            (1, b"S".to_vec()),
            (2, b"D".to_vec()),
            (0x80, b"I".to_vec()),
            (0x6, b"DX".to_vec()),
        ];
        assert_eq!(print_flags(0, b"|", &t), b"");
        assert_eq!(print_flags(1, b"|", &t), b"S");
        assert_eq!(print_flags(3, b"|", &t), b"S|D");
        assert_eq!(print_flags(0x103, b"|", &t), b"S|D|0x100");
        assert_eq!(print_flags(0x100, b"|", &t), b"0x100");
        assert_eq!(print_flags(0x84, b"", &t), b"I0x4");
    }

    #[test]
    fn arrays_and_bitmaps() {
        let b = [1u8, 0, 0, 0, 0xff, 0xff, 0, 0];
        assert_eq!(print_array(&b, 4, Endian::Little), b"{0x1,0xffff}");
        assert_eq!(print_array(&b, 8, Endian::Little), b"{0xffff00000001}");
        assert_eq!(
            print_array(&b[..3], 3, Endian::Little),
            b"{BAD SIZE:3 0x1,0x0,0x0}"
        );
        assert_eq!(print_array(&[], 4, Endian::Little), b"{}");
        // a 2-CPU machine's cpumask (one long)
        assert_eq!(
            bitmap_string(&[3, 0, 0, 0, 0, 0, 0, 0], 64, 8, Endian::Little),
            b"00000000,00000003"
        );
        assert_eq!(
            bitmap_string(&[3, 0, 0, 0], 32, 4, Endian::Little),
            b"00000003"
        );
        assert_eq!(
            bitmap_string(&[0x5a, 0x01, 0, 0], 12, 4, Endian::Little),
            b"15a"
        );
        assert_eq!(
            bitmap_string(&[0, 0, 0, 0, 0, 0, 1, 2], 64, 8, Endian::Big),
            b"00000000,00000102"
        );
        assert_eq!(
            bitmap_list(
                &[0b1011_1001, 0, 0, 0, 0, 0, 0, 0x80],
                64,
                8,
                Endian::Little
            ),
            b"0,3-5,7,63"
        );
        assert_eq!(bitmap_list(&[0; 8], 64, 8, Endian::Little), b"");
    }
}
