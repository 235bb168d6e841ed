//! Parser for the per-event `format` files tracefs writes under
//! `events/<system>/<event>/format`.
//!
//! This mirrors the text produced by `f_show()` in kernel/trace/trace_events.c:
//! a `name:` line, an `ID:` line, the `format:` block with one
//! `field:<decl>;\toffset:N;\tsize:N;\tsigned:N;` line per field (common fields
//! first, a blank line, then the event's own fields) and finally `print fmt:`.
//! It only understands the text; turning record bytes into values is
//! [`crate::record`], and the `print fmt` line is compiled by
//! [`crate::printfmt`].

use crate::Error;
use crate::printfmt::{Names, PrintFmt};

/// How a field's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A signed or unsigned integer of 1, 2, 4 or 8 bytes, or an array of them.
    Int,
    /// A `__data_loc` (offset from the record start) or `__rel_loc` (offset
    /// from the end of the field) reference to variable data, usually a
    /// string; `count` of them for `__data_loc char[][N]` string arrays.
    DataLoc {
        /// True for `__rel_loc`.
        relative: bool,
    },
    /// Anything else (structures, odd sizes): exposed as raw bytes.
    Bytes,
}

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name, without any `[N]` suffix.
    pub name: String,
    /// The C type as written, e.g. `u32`, `unsigned long`, `__data_loc char[]`.
    pub type_name: String,
    /// Byte offset from the start of the record.
    pub offset: usize,
    /// Size in bytes of the whole field (all elements).
    pub size: usize,
    /// Whether the kernel marked the field signed.
    pub signed: bool,
    /// How to read it.
    pub kind: FieldKind,
    /// Number of elements: 1 for scalars, N for arrays.
    pub count: usize,
    /// Size of one element in bytes.
    pub elem_size: usize,
    /// True when declared as an array (`name[]`, `name[N]`, `char[][N]`).
    pub is_array: bool,
    /// True for the `common_*` fields before the blank line.
    pub common: bool,
}

/// A parsed `format` file.
#[derive(Debug, Clone)]
pub struct EventFormat {
    /// The event name (`name:` line).
    pub name: String,
    /// The event type id (`ID:` line), matching `common_type` in records.
    pub id: u16,
    /// All fields, common ones first, in file order.
    pub fields: Vec<Field>,
    /// The `print fmt:` line compiled against the fields, if it was present
    /// and understood.
    pub print_fmt: Option<PrintFmt>,
    /// The `print fmt:` text as written (after `print fmt: `).
    pub print_fmt_text: String,
    /// Error met while compiling the print fmt, if any.
    pub print_fmt_error: Option<String>,
}

impl EventFormat {
    /// Parses the text of a `format` file. `long_size` (4 or 8) is the
    /// kernel's `sizeof(long)`, used to size `long` array elements.
    pub fn parse(text: &str, long_size: usize) -> Result<EventFormat, Error> {
        EventFormat::parse_with(text, long_size, None)
    }

    /// [`EventFormat::parse`], with the values of names its print fmt may
    /// hold (see [`Names`]).
    pub fn parse_with(
        text: &str,
        long_size: usize,
        names: Option<&Names>,
    ) -> Result<EventFormat, Error> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut common = true;
        let mut in_format = false;
        let mut print_fmt_text = None;
        // the print fmt is the file's last item and may hold newlines (a
        // TP_printk() format string with a literal line break, ext4's
        // fsmap events): it runs to the end of the file
        let (text, tail) = match text.find("\nprint fmt:") {
            Some(i) => (&text[..i + 1], Some(&text[i + 1..])),
            None if text.starts_with("print fmt:") => ("", Some(text)),
            None => (text, None),
        };
        if let Some(rest) = tail.and_then(|t| t.strip_prefix("print fmt:")) {
            print_fmt_text = Some(rest.trim().to_string());
        }
        for (lineno, line) in text.lines().enumerate() {
            let lineno = lineno + 1;
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                let v = rest.trim();
                id = Some(v.parse::<u16>().map_err(|_| Error::Format {
                    line: lineno,
                    msg: format!("bad event id {v:?}"),
                })?);
            } else if line.starts_with("format:") {
                in_format = true;
            } else if in_format && line.trim().is_empty() {
                if !fields.is_empty() {
                    common = false;
                }
            } else if in_format {
                let field = parse_field_line(line.trim(), long_size, common)
                    .map_err(|msg| Error::Format { line: lineno, msg })?;
                fields.push(field);
            }
        }
        let name = name.ok_or(Error::Format {
            line: 0,
            msg: "missing name line".into(),
        })?;
        let id = id.ok_or(Error::Format {
            line: 0,
            msg: "missing ID line".into(),
        })?;
        let print_fmt_text = print_fmt_text.unwrap_or_default();
        let (print_fmt, print_fmt_error) = if print_fmt_text.is_empty() {
            (None, Some("no print fmt".to_string()))
        } else {
            match PrintFmt::parse_with(&print_fmt_text, &fields, long_size, names) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e)),
            }
        };
        Ok(EventFormat {
            name,
            id,
            fields,
            print_fmt,
            print_fmt_text,
            print_fmt_error,
        })
    }

    /// Index of the field called `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn parse_kv<'a>(part: &'a str, key: &str) -> Result<&'a str, String> {
    part.trim()
        .strip_prefix(key)
        .and_then(|r| r.strip_prefix(':'))
        .map(str::trim)
        .ok_or_else(|| format!("expected {key}: in {part:?}"))
}

fn parse_field_line(line: &str, long_size: usize, common: bool) -> Result<Field, String> {
    let mut parts = line.split(';');
    let decl = parse_kv(parts.next().unwrap_or(""), "field")?;
    let num = |p: Option<&str>, key: &str| -> Result<usize, String> {
        let v = parse_kv(p.unwrap_or(""), key)?;
        v.parse::<usize>()
            .map_err(|_| format!("bad {key} value {v:?}"))
    };
    let offset = num(parts.next(), "offset")?;
    let size = num(parts.next(), "size")?;
    let signed = num(parts.next(), "signed")? != 0;
    if offset > u16::MAX as usize * 16 || size > u16::MAX as usize * 16 {
        return Err(format!("field too large: offset {offset} size {size}"));
    }
    let (type_name, name, name_dim) = split_decl(decl)?;
    let data_loc = type_name.starts_with("__data_loc");
    let rel_loc = type_name.starts_with("__rel_loc");
    let mut is_array = name_dim.is_some();
    let (kind, elem_size) = if data_loc || rel_loc {
        // `__data_loc char[][3]` is three 4-byte references.
        if type_name.ends_with("[][]") || type_name.matches("[]").count() > 1 {
            is_array = true;
        }
        if let Some(dim) = type_name.rsplit_once("][")
            && dim.1.trim_end_matches(']').parse::<usize>().is_ok()
        {
            is_array = true;
        }
        (FieldKind::DataLoc { relative: rel_loc }, 4)
    } else {
        let base = type_name
            .trim_start_matches("const ")
            .trim_start_matches("volatile ");
        match scalar_size(base, long_size) {
            Some(sz) => (FieldKind::Int, sz),
            // a typedef or an enum (`dev_t`, `ino_t`, `enum lru_list`):
            // an integer of the size the kernel gives (per element for an
            // array of a known length)
            None if !base.starts_with("struct ") && !base.starts_with("union ") => {
                let elem = match name_dim {
                    None => size,
                    Some(Some(n)) if n > 0 && size % n == 0 => size / n,
                    Some(_) => 0,
                };
                if matches!(elem, 1 | 2 | 4 | 8) {
                    (FieldKind::Int, elem)
                } else {
                    (FieldKind::Bytes, size.max(1))
                }
            }
            None => (FieldKind::Bytes, size.max(1)),
        }
    };
    let elem_size = if kind == FieldKind::Int && !is_array && elem_size != size {
        // e.g. `char comm[16]` handled above; a scalar whose size disagrees
        // with its type is read by its declared size.
        size
    } else {
        elem_size
    };
    let count = if is_array || (kind == FieldKind::DataLoc { relative: rel_loc }) {
        size.checked_div(elem_size).unwrap_or(0)
    } else {
        1
    };
    let kind = if kind == FieldKind::Int && !matches!(elem_size, 1 | 2 | 4 | 8) {
        FieldKind::Bytes
    } else {
        kind
    };
    Ok(Field {
        name,
        type_name,
        offset,
        size,
        signed,
        kind,
        count,
        elem_size,
        is_array,
        common,
    })
}

/// Splits `unsigned long __probe_ip` / `u32 arr[]` / `char comm[16]` /
/// `__data_loc char[][3] strs` into (type, name, array dimension).
fn split_decl(decl: &str) -> Result<(String, String, Option<Option<usize>>), String> {
    let decl = decl.trim();
    // `TYPE NAME[DIM]`: the dimension may hold blanks and brackets inside
    // parentheses (5.10's tcp_probe: `__u8 saddr[sizeof(struct
    // sockaddr_in6)]`), so it is cut off first, at the `[` that opens it
    let (rest, dim_text) = match decl.strip_suffix(']') {
        Some(body) => {
            let mut depth = 0i32;
            let open = body.char_indices().rev().find_map(|(i, c)| {
                match c {
                    ')' => depth += 1,
                    '(' => depth -= 1,
                    '[' if depth == 0 => return Some(i),
                    _ => {}
                }
                None
            });
            match open {
                Some(i) => (&body[..i], Some(&body[i + 1..])),
                None => return Err(format!("bad array size in {decl:?}")),
            }
        }
        None => (decl, None),
    };
    let (head, name) = rest
        .trim_end()
        .rsplit_once(char::is_whitespace)
        .ok_or_else(|| format!("field declaration without a type: {decl:?}"))?;
    let dim = match dim_text.map(str::trim) {
        None => None,
        Some("") => Some(None),
        Some(inner) => match inner.parse::<usize>() {
            Ok(n) => Some(Some(n)),
            // a length the kernel left as a name or an expression (5.10's
            // ext4_fc_stats: `int fc_ineligible_rc[EXT4_FC_REASON_MAX]`,
            // tcp_probe's `sizeof(struct sockaddr_in6)`): the field's size
            // tells it, as for `[]`
            Err(_)
                if inner.bytes().any(|b| b.is_ascii_alphabetic())
                    && inner
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b" _+-*()".contains(&b)) =>
            {
                Some(None)
            }
            Err(_) => return Err(format!("bad array size in {decl:?}")),
        },
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("bad field name {name:?}"));
    }
    Ok((head.trim().to_string(), name.to_string(), dim))
}

fn scalar_size(t: &str, long_size: usize) -> Option<usize> {
    Some(match t {
        "u8" | "s8" | "char" | "unsigned char" | "signed char" | "bool" | "__u8" | "__s8"
        | "uint8_t" | "int8_t" => 1,
        "u16" | "s16" | "short" | "unsigned short" | "__u16" | "__s16" | "uint16_t" | "int16_t" => {
            2
        }
        "u32" | "s32" | "int" | "unsigned int" | "unsigned" | "__u32" | "__s32" | "uint32_t"
        | "int32_t" | "pid_t" | "gfp_t" => 4,
        "u64" | "s64" | "long long" | "unsigned long long" | "__u64" | "__s64" | "uint64_t"
        | "int64_t" => 8,
        "long" | "unsigned long" | "size_t" | "ssize_t" => long_size,
        _ if t.ends_with('*') => long_size,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_length_left_as_a_name_is_taken_from_the_size() {
        // x86_64 and arm64 5.10: ext4/ext4_fc_stats (a `ktrace record -e
        // '*:*'` file whose report failed on it)
        let f = parse_field_line(
            "\tfield:int fc_ineligible_rc[EXT4_FC_REASON_MAX];\toffset:12;\tsize:40;\tsigned:1;",
            8,
            false,
        )
        .unwrap();
        assert_eq!(
            (f.name.as_str(), f.count, f.elem_size, f.is_array),
            ("fc_ineligible_rc", 10, 4, true)
        );
        assert!(
            parse_field_line(
                "\tfield:int x[a.b];\toffset:12;\tsize:40;\tsigned:1;",
                8,
                false
            )
            .is_err()
        );
    }

    #[test]
    fn field_lines() {
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a str,
            usize,
            usize,
            FieldKind,
            usize,
            bool,
        );
        let cases: &[Case] = &[
            // line, name, type, count, elem, kind, offset, array
            (
                "field:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;",
                "common_type",
                "unsigned short",
                1,
                2,
                FieldKind::Int,
                0,
                false,
            ),
            (
                "field:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;",
                "__probe_ip",
                "unsigned long",
                1,
                8,
                FieldKind::Int,
                8,
                false,
            ),
            (
                "field:u32 arr[];\toffset:61;\tsize:12;\tsigned:0;",
                "arr",
                "u32",
                3,
                4,
                FieldKind::Int,
                61,
                true,
            ),
            (
                "field:char comm[16];\toffset:8;\tsize:16;\tsigned:0;",
                "comm",
                "char",
                16,
                1,
                FieldKind::Int,
                8,
                true,
            ),
            (
                "field:__data_loc char[] str;\toffset:98;\tsize:4;\tsigned:1;",
                "str",
                "__data_loc char[]",
                1,
                4,
                FieldKind::DataLoc { relative: false },
                98,
                false,
            ),
            (
                "field:__data_loc char[][3] strs;\toffset:106;\tsize:12;\tsigned:1;",
                "strs",
                "__data_loc char[][3]",
                3,
                4,
                FieldKind::DataLoc { relative: false },
                106,
                true,
            ),
            (
                "field:__rel_loc char[] s;\toffset:8;\tsize:4;\tsigned:1;",
                "s",
                "__rel_loc char[]",
                1,
                4,
                FieldKind::DataLoc { relative: true },
                8,
                false,
            ),
            // typedefs and enums: integers of the size the kernel gives
            (
                "field:dev_t s_dev;\toffset:16;\tsize:4;\tsigned:0;",
                "s_dev",
                "dev_t",
                1,
                4,
                FieldKind::Int,
                16,
                false,
            ),
            (
                "field:enum lru_list lru;\toffset:24;\tsize:4;\tsigned:0;",
                "lru",
                "enum lru_list",
                1,
                4,
                FieldKind::Int,
                24,
                false,
            ),
            (
                "field:xfs_ino_t inos[2];\toffset:8;\tsize:16;\tsigned:0;",
                "inos",
                "xfs_ino_t",
                2,
                8,
                FieldKind::Int,
                8,
                true,
            ),
            (
                "field:cpumask_t mask;\toffset:8;\tsize:12;\tsigned:0;",
                "mask",
                "cpumask_t",
                1,
                12,
                FieldKind::Bytes,
                8,
                false,
            ),
            (
                "field:struct foo f;\toffset:8;\tsize:12;\tsigned:0;",
                "f",
                "struct foo",
                1,
                12,
                FieldKind::Bytes,
                8,
                false,
            ),
        ];
        for &(line, name, ty, count, elem, kind, offset, array) in cases {
            let f = parse_field_line(line, 8, false).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(f.name, name, "{line}");
            assert_eq!(f.type_name, ty, "{line}");
            assert_eq!(f.count, count, "{line}");
            assert_eq!(f.elem_size, elem, "{line}");
            assert_eq!(f.kind, kind, "{line}");
            assert_eq!(f.offset, offset, "{line}");
            assert_eq!(f.is_array, array, "{line}");
        }
    }

    #[test]
    fn bad_field_lines() {
        for line in [
            "field:u32;\toffset:0;\tsize:4;\tsigned:0;",
            "field:u32 x;\toffset:zz;\tsize:4;\tsigned:0;",
            "field:u32 x;\toffset:0;\tsize:4;",
            "field:u32 x[z;z];\toffset:0;\tsize:4;\tsigned:0;",
            "field:u32 x[1.5];\toffset:0;\tsize:4;\tsigned:0;",
            "bogus",
        ] {
            assert!(parse_field_line(line, 8, false).is_err(), "{line}");
        }
    }

    #[test]
    fn long_size_follows_kernel() {
        let f = parse_field_line(
            "field:unsigned long __probe_ip;\toffset:8;\tsize:4;\tsigned:0;",
            4,
            false,
        )
        .unwrap();
        assert_eq!(f.elem_size, 4);
        assert_eq!(f.count, 1);
    }

    #[test]
    fn missing_name_or_id() {
        assert!(EventFormat::parse("ID: 1\nformat:\n", 8).is_err());
        assert!(EventFormat::parse("name: x\nformat:\n", 8).is_err());
        assert!(EventFormat::parse("name: x\nID: 99999999\n", 8).is_err());
    }
}
