//! Reading typed values out of one record's bytes, following a parsed
//! [`EventFormat`].
//!
//! A record is the payload of one ring-buffer data event: it starts with the
//! common fields of `struct trace_entry` (include/linux/trace_events.h) and
//! continues with the event's own fields; `__data_loc` fields point into the
//! variable area at the end (kernel/trace/trace_probe.c stores probe strings
//! there, `len` including the terminating NUL, `len == 0` meaning the fetch
//! faulted). This module only reads; it never formats text.

use crate::format::{EventFormat, FieldKind};
use ktrace_ring::Endian;

/// The `struct trace_entry` header every record starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Common {
    /// `common_type`: the event id.
    pub type_id: u16,
    /// `common_flags`: irqs-off, need-resched, hardirq, softirq, ... bits.
    pub flags: u8,
    /// `common_preempt_count`: preempt depth (low nibble) and migrate-disable
    /// depth (high nibble).
    pub preempt_count: u8,
    /// `common_pid`.
    pub pid: i32,
}

impl Common {
    /// Reads the common header; `None` when the record is shorter than 8 bytes.
    pub fn read(data: &[u8], endian: Endian) -> Option<Common> {
        if data.len() < 8 {
            return None;
        }
        Some(Common {
            type_id: endian.u16(&data[0..2]),
            flags: data[2],
            preempt_count: data[3],
            pid: endian.u32(&data[4..8]) as i32,
        })
    }
}

/// `s` up to (not including) its first NUL, or all of it. Looks at eight
/// bytes a step (strings are the bulk of probe records), the last few
/// bytes as the eight the slice ends with when it has eight.
#[inline]
fn until_nul(s: &[u8]) -> &[u8] {
    let mut i = 0;
    while let Some(chunk) = s.get(i..i + 8) {
        if let Some(z) = first_zero(chunk) {
            return &s[..i + z];
        }
        i += 8;
    }
    if i == s.len() {
        return s;
    }
    if s.len() >= 8 {
        // overlaps bytes already seen, none of them NUL
        let at = s.len() - 8;
        return match first_zero(&s[at..]) {
            Some(z) => &s[..at + z],
            None => s,
        };
    }
    match s.iter().position(|&c| c == 0) {
        Some(p) => &s[..p],
        None => s,
    }
}

/// Index of the first zero byte of eight bytes `b`. The bit trick marks
/// every zero byte; a byte after a zero one may be marked falsely (the
/// borrow), one before it never, so the lowest mark is exact.
#[inline]
fn first_zero(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let w = u64::from_le_bytes(b.try_into().unwrap_or_default());
    let m = w.wrapping_sub(ONES) & !w & HIGHS;
    (m != 0).then(|| m.trailing_zeros() as usize / 8)
}

/// The string a `__data_loc` reference (`__rel_loc` when `relative`) at
/// byte `at` of record `data` points to, as [`EventFormat::read_str`]
/// reads it: for callers that looked the field up once, ahead of the
/// records.
#[inline]
pub fn read_loc_str(data: &[u8], at: usize, relative: bool, endian: Endian) -> StrValue<'_> {
    let Some(b) = data.get(at..at + 4) else {
        return StrValue::Bad;
    };
    let loc = endian.u32(b);
    let len = (loc >> 16) as usize;
    let mut off = (loc & 0xffff) as usize;
    if relative {
        off += at + 4;
    }
    if len == 0 {
        return StrValue::Fault;
    }
    match data.get(off..off + len) {
        Some(s) => StrValue::Ok(until_nul(s)),
        None => StrValue::Bad,
    }
}

/// Whether C type `t` is a `char` type (`char`, `unsigned char`, `const
/// char`), whose arrays hold text; `u8` arrays (addresses, hashes) do not.
fn is_char(t: &str) -> bool {
    t.split_whitespace().any(|w| w == "char")
}

/// A string field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrValue<'a> {
    /// The bytes up to (not including) the first NUL.
    Ok(&'a [u8]),
    /// The kernel stored a zero length: the fetch faulted.
    Fault,
    /// The reference points outside the record.
    Bad,
}

/// An integer read from a field, with the field's signedness applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int {
    /// Unsigned field value.
    U(u64),
    /// Signed field value (sign-extended from the field size).
    S(i64),
}

impl Int {
    /// The value's bits as `u64` (two's complement for negatives).
    pub fn bits(self) -> u64 {
        match self {
            Int::U(v) => v,
            Int::S(v) => v as u64,
        }
    }
}

/// A decoded field value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    /// An integer scalar.
    Int(Int),
    /// A string (`__data_loc`).
    Str(StrValue<'a>),
    /// An array of values.
    Array(Vec<Value<'a>>),
    /// Bytes of a field of unknown type.
    Bytes(&'a [u8]),
    /// The record is too short for this field.
    Missing,
}

impl EventFormat {
    /// Reads element `elem` of integer field `field` of record `data`.
    pub fn read_int(&self, data: &[u8], field: usize, elem: usize, endian: Endian) -> Option<Int> {
        let f = self.fields.get(field)?;
        if f.kind != FieldKind::Int || elem >= f.count {
            return None;
        }
        let off = f.offset.checked_add(elem.checked_mul(f.elem_size)?)?;
        let b = data.get(off..off.checked_add(f.elem_size)?)?;
        let raw = match f.elem_size {
            1 => u64::from(b[0]),
            2 => u64::from(endian.u16(b)),
            4 => u64::from(endian.u32(b)),
            8 => endian.u64(b),
            _ => return None,
        };
        Some(if f.signed {
            let shift = 64 - 8 * f.elem_size as u32;
            Int::S(((raw << shift) as i64) >> shift)
        } else {
            Int::U(raw)
        })
    }

    /// The bytes of fixed `char` array field `field` (such as
    /// `char comm[16]`) up to its first NUL, as `%s` prints them; `None`
    /// for other fields or a record too short.
    pub fn read_char_array<'a>(&self, data: &'a [u8], field: usize) -> Option<&'a [u8]> {
        let f = self.fields.get(field)?;
        if f.kind != FieldKind::Int || !f.is_array || f.elem_size != 1 {
            return None;
        }
        // `char buf[]` of size 0 (ftrace's `print`, a trace_marker line):
        // the rest of the record
        let end = if f.size == 0 {
            data.len()
        } else {
            f.offset.checked_add(f.size)?
        };
        Some(until_nul(data.get(f.offset..end)?))
    }

    /// Reads element `elem` of `__data_loc`/`__rel_loc` field `field`.
    pub fn read_str<'a>(
        &self,
        data: &'a [u8],
        field: usize,
        elem: usize,
        endian: Endian,
    ) -> StrValue<'a> {
        let Some(f) = self.fields.get(field) else {
            return StrValue::Bad;
        };
        let FieldKind::DataLoc { relative } = f.kind else {
            return StrValue::Bad;
        };
        if elem >= f.count {
            return StrValue::Bad;
        }
        read_loc_str(data, f.offset + elem * 4, relative, endian)
    }

    /// Decodes field `field` of record `data` into a [`Value`].
    pub fn value<'a>(&self, data: &'a [u8], field: usize, endian: Endian) -> Value<'a> {
        let Some(f) = self.fields.get(field) else {
            return Value::Missing;
        };
        let one = |elem: usize| -> Value<'a> {
            match f.kind {
                FieldKind::Int => match self.read_int(data, field, elem, endian) {
                    Some(v) => Value::Int(v),
                    None => Value::Missing,
                },
                FieldKind::DataLoc { .. } => Value::Str(self.read_str(data, field, elem, endian)),
                FieldKind::Bytes => match data.get(f.offset..f.offset + f.size) {
                    Some(b) => Value::Bytes(b),
                    None => Value::Missing,
                },
            }
        };
        // a fixed `char` array (`char comm[16]`) holding text is a string
        // up to its first NUL, as the kernel's `%s` and trace-cmd show it;
        // one holding binary (a UUID in `char sec_type[16]`) stays bytes
        if f.is_array && f.elem_size == 1 && f.kind == FieldKind::Int && is_char(&f.type_name) {
            match self.read_char_array(data, field) {
                // a flexible array is text to its NUL (`%s`), newline and all
                Some(s) if f.size == 0 || s.iter().all(|&c| c >= 0x20 && c != 0x7f) => {
                    return Value::Str(StrValue::Ok(s));
                }
                Some(_) => {}
                None => return Value::Missing,
            }
        }
        if f.is_array && f.kind != FieldKind::Bytes {
            Value::Array((0..f.count).map(one).collect())
        } else {
            one(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FMT: &str = "name: t\nID: 7\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:s8 a;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield:s16 b;\toffset:9;\tsize:2;\tsigned:1;\n\
\tfield:u16 c[];\toffset:11;\tsize:4;\tsigned:0;\n\
\tfield:__data_loc char[] s;\toffset:15;\tsize:4;\tsigned:1;\n\
\tfield:__rel_loc char[] r;\toffset:19;\tsize:4;\tsigned:1;\n\n\
print fmt: \"%d\", REC->a\n";

    fn record() -> Vec<u8> {
        let mut d = vec![7, 0, 0x81, 0x12, 0x39, 0x30, 0, 0];
        d.push(0xfe); // a = -2
        d.extend_from_slice(&(-300i16).to_le_bytes());
        d.extend_from_slice(&[1, 0, 0xff, 0xff]);
        // s: offset 23, len 3 ("hi\0")
        d.extend_from_slice(&(23u32 | 3 << 16).to_le_bytes());
        // r: relative to end of field (23): offset 3 -> 26, len 0 -> fault
        d.extend_from_slice(&(3u32).to_le_bytes());
        d.extend_from_slice(b"hi\0");
        d
    }

    /// Issue 20: ftrace's `print` event (a trace_marker line; format of
    /// the 6.18 host) ends in `char buf[]` of size 0, the text to the end
    /// of the record: it was decoded as an empty array, so JSON and
    /// Perfetto lost the marker's text.
    #[test]
    fn flexible_char_array_is_the_rest_of_the_record() {
        let fmt = "name: print\nID: 5\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n\n\
print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";
        let f = EventFormat::parse(fmt, 8).unwrap();
        let buf = f.fields.iter().position(|x| x.name == "buf").unwrap();
        let mut d = vec![5, 0, 0, 0, 1, 0, 0, 0];
        d.extend_from_slice(&0xffff_0000_1088u64.to_le_bytes());
        let head = d.clone();
        d.extend_from_slice(b"before reset 2\n\0\0\0");
        match f.value(&d, buf, Endian::Little) {
            Value::Str(StrValue::Ok(s)) => assert_eq!(s, b"before reset 2\n"),
            other => panic!("{other:?}"),
        }
        // nothing after the fixed fields: an empty string, no panic
        match f.value(&head, buf, Endian::Little) {
            Value::Str(StrValue::Ok(s)) => assert!(s.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn strings_end_at_the_first_nul() {
        for n in 0..40 {
            let mut s: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert_eq!(until_nul(&s), &s[..], "{n} no nul");
            for at in 0..n {
                let keep = s[at];
                s[at] = 0;
                assert_eq!(until_nul(&s), &s[..at], "{n} nul at {at}");
                // bytes with the high bit set or 0x01 do not fool it
                s[at] = 0x80 | keep;
                assert_eq!(until_nul(&s), &s[..], "{n} high at {at}");
                s[at] = 1;
                assert_eq!(until_nul(&s), &s[..], "{n} one at {at}");
                // a 0x01 or a second NUL after the first does not move it
                s[at] = 0;
                for after in [0u8, 1] {
                    if at + 1 < n {
                        let next = s[at + 1];
                        s[at + 1] = after;
                        assert_eq!(until_nul(&s), &s[..at], "{n} nul at {at}, {after}");
                        s[at + 1] = next;
                    }
                }
                s[at] = keep;
            }
        }
    }

    /// `char comm[16]` as `%s` shows it: up to the NUL, or all 16 bytes.
    #[test]
    fn char_arrays_read_as_strings() {
        let fmt = "name: s\nID: 3\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\n\
print fmt: \"%s\", REC->comm\n";
        let f = EventFormat::parse(fmt, 8).unwrap();
        let mut d = vec![3, 0, 0, 0, 0, 0, 0, 0];
        d.extend_from_slice(b"kfix\0garbage\0\0\0\0");
        assert_eq!(f.read_char_array(&d, 1), Some(&b"kfix"[..]));
        d[12..24].copy_from_slice(b"0123456789ab");
        assert_eq!(f.read_char_array(&d, 1), Some(&b"kfix0123456789ab"[..]));
        assert_eq!(f.read_char_array(&d[..20], 1), None);
        assert_eq!(f.read_char_array(&d, 0), None);
    }

    /// Issue 23 row 16: `char comm[16]` fields were byte arrays in JSON;
    /// they are strings (up to the NUL), binary char arrays stay bytes.
    #[test]
    fn char_arrays_are_strings() {
        let fmt = "name: s\nID: 3\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:u8 addr[4];\toffset:24;\tsize:4;\tsigned:0;\n\n\
print fmt: \"%s\", REC->prev_comm\n";
        let f = EventFormat::parse(fmt, 8).unwrap();
        let mut d = vec![3, 0, 0, 0, 0, 0, 0, 0];
        d.extend_from_slice(b"swapper/1\0\0\0\0\0\0\0");
        d.extend_from_slice(&[10, 0, 2, 15]);
        let e = Endian::Little;
        assert_eq!(f.value(&d, 1, e), Value::Str(StrValue::Ok(b"swapper/1")));
        assert!(matches!(f.value(&d, 2, e), Value::Array(_)));
        d[8] = 1;
        assert!(matches!(f.value(&d, 1, e), Value::Array(_)));
        assert_eq!(f.value(&d[..20], 1, e), Value::Missing);
    }

    #[test]
    fn reads_every_kind() {
        let f = EventFormat::parse(FMT, 8).unwrap();
        let d = record();
        let e = Endian::Little;
        assert_eq!(
            Common::read(&d, e),
            Some(Common {
                type_id: 7,
                flags: 0x81,
                preempt_count: 0x12,
                pid: 12345
            })
        );
        assert_eq!(f.value(&d, 4, e), Value::Int(Int::S(-2)));
        assert_eq!(f.value(&d, 5, e), Value::Int(Int::S(-300)));
        assert_eq!(
            f.value(&d, 6, e),
            Value::Array(vec![Value::Int(Int::U(1)), Value::Int(Int::U(65535))])
        );
        assert_eq!(f.value(&d, 7, e), Value::Str(StrValue::Ok(b"hi")));
        // `u16 c[]` is no char array; `s` no fixed array at all
        assert_eq!(f.read_char_array(&d, 6), None);
        assert_eq!(f.read_char_array(&d, 7), None);
        assert_eq!(f.value(&d, 8, e), Value::Str(StrValue::Fault));
        // short record: never panics
        for n in 0..d.len() {
            for i in 0..f.fields.len() + 1 {
                let _ = f.value(&d[..n], i, e);
            }
        }
        assert_eq!(
            f.value(&d[..12], 6, e),
            Value::Array(vec![Value::Missing, Value::Missing])
        );
        let mut bad = d.clone();
        bad[15] = 200; // offset past the end
        assert_eq!(f.read_str(&bad, 7, 0, e), StrValue::Bad);
    }
}
