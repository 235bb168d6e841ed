//! The `syscalls` events (`sys_enter_*`, `sys_exit_*`) as the kernel's
//! `trace` prints them: not from their print fmt but from
//! `print_syscall_enter()` / `print_syscall_exit()` in
//! kernel/trace/trace_syscalls.c, as `sys_openat(dfd: ..., ...)` and
//! `sys_openat -> 0x3`, without the `name: ` prefix.
//!
//! The argument text changed with the kernel release ([`SyscallStyle`]):
//! before 6.18 each value is `%lx`; from 6.18 on values below 10 are
//! decimal and the others `0x%lx`, and events that copy user memory append
//! it (a string as ` "text"`, a buffer as ` (62:69:6e)` and its printable
//! text, `sys_enter_openat` its flags by name and the mode in octal), which
//! the format shows as `__ARG_val` fields. It does not read records beyond
//! the fields the format names.

use ktrace_event::printfmt::print_flags;
use ktrace_event::{EventFormat, FieldKind, StrValue};
use ktrace_ring::Endian;

/// How the running kernel prints syscall arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallStyle {
    /// Before 6.18: `arg: %lx`.
    Hex,
    /// 6.18 and later: `arg: %lu` below 10, else `arg: 0x%lx`, and the user
    /// memory the event copied.
    Mixed,
}

impl SyscallStyle {
    /// The style of a kernel release such as `6.1.0-28-cloud-amd64`
    /// (unparsable releases get the newest style).
    pub fn for_release(release: &str) -> SyscallStyle {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().unwrap_or(0));
        match (it.next(), it.next()) {
            (Some(major), Some(minor)) if (major, minor) < (6, 18) => SyscallStyle::Hex,
            _ => SyscallStyle::Mixed,
        }
    }
}

/// Writes the kernel's line body for a `syscalls` event; false when `f`
/// is not a syscall event it knows (the caller prints the print fmt).
pub(crate) fn write(
    out: &mut Vec<u8>,
    f: &EventFormat,
    data: &[u8],
    endian: Endian,
    long_size: usize,
    style: SyscallStyle,
) -> bool {
    let ulong = |i: usize| -> Option<u64> {
        let fl = f.fields.get(i)?;
        let b = data.get(fl.offset..fl.offset.checked_add(long_size)?)?;
        Some(if long_size == 8 {
            endian.u64(b)
        } else {
            u64::from(endian.u32(b))
        })
    };
    if let Some(name) = f.name.strip_prefix("sys_exit_") {
        let Some(ret) = f.field_index("ret").and_then(ulong) else {
            return false;
        };
        out.extend_from_slice(format!("sys_{name} -> 0x{ret:x}").as_bytes());
        return true;
    }
    let Some(name) = f.name.strip_prefix("sys_enter_") else {
        return false;
    };
    // the arguments: every field after __syscall_nr but the user copies
    let args: Vec<usize> = f
        .fields
        .iter()
        .enumerate()
        .filter(|(_, x)| {
            !x.common && x.name != "__syscall_nr" && !matches!(x.kind, FieldKind::DataLoc { .. })
        })
        .map(|(i, _)| i)
        .collect();
    let mut vals = Vec::with_capacity(args.len());
    for &i in &args {
        match ulong(i) {
            Some(v) => vals.push(v),
            None => return false,
        }
    }
    out.extend_from_slice(format!("sys_{name}(").as_bytes());
    if style == SyscallStyle::Mixed
        && name == "openat"
        && f.print_fmt_text.contains("flags: %s%s")
        && openat(out, f, &args, &vals, data, endian)
    {
        out.push(b')');
        return true;
    }
    for (k, (&i, &v)) in args.iter().zip(&vals).enumerate() {
        if k > 0 {
            out.extend_from_slice(b", ");
        }
        let arg = &f.fields[i].name;
        match style {
            SyscallStyle::Hex => out.extend_from_slice(format!("{arg}: {v:x}").as_bytes()),
            SyscallStyle::Mixed if v < 10 => {
                out.extend_from_slice(format!("{arg}: {v}").as_bytes())
            }
            SyscallStyle::Mixed => out.extend_from_slice(format!("{arg}: 0x{v:x}").as_bytes()),
        }
        if style == SyscallStyle::Mixed {
            user_data(out, f, arg, vals.get(k + 1).copied(), data, endian);
        }
    }
    out.push(b')');
    true
}

/// The user memory copied for argument `arg` (field `__ARG_val`): ` "text"`
/// for a string, ` (xx:xx...)` and its printable text for a buffer whose
/// size is the next argument (`, ...` when the copy was cut).
fn user_data(
    out: &mut Vec<u8>,
    f: &EventFormat,
    arg: &str,
    size: Option<u64>,
    data: &[u8],
    endian: Endian,
) {
    let field = format!("__{arg}_val");
    let Some(i) = f.field_index(&field) else {
        return;
    };
    let bytes = match raw_loc(f, i, data, endian) {
        Some(b) => b,
        None => return,
    };
    if !f
        .print_fmt_text
        .contains(&format!("__print_dynamic_array({field}"))
    {
        // `%.*s`: up to the NUL the copy ends with
        let s = bytes.split(|&c| c == 0).next().unwrap_or(&[]);
        out.extend_from_slice(b" \"");
        out.extend_from_slice(s);
        out.push(b'"');
        return;
    }
    let cut = size.is_some_and(|n| (bytes.len() as u64) < n);
    out.extend_from_slice(b" (");
    for (k, c) in bytes.iter().enumerate() {
        if k > 0 {
            out.push(b':');
        }
        out.extend_from_slice(format!("{c:02x}").as_bytes());
    }
    if cut {
        out.extend_from_slice(b", ...");
    }
    out.push(b')');
    let printable = |c: u8| (0x20..0x7f).contains(&c);
    if bytes.iter().any(|&c| printable(c)) {
        out.extend_from_slice(b" \"");
        for &c in bytes {
            out.push(if printable(c) { c } else { b'.' });
        }
        out.extend_from_slice(if cut { b"\"..." } else { b"\"" });
    }
}

/// The bytes a `__data_loc` field points to, as stored (its length is the
/// copy's).
fn raw_loc<'a>(f: &EventFormat, i: usize, data: &'a [u8], endian: Endian) -> Option<&'a [u8]> {
    let fl = f.fields.get(i)?;
    let loc = endian.u32(data.get(fl.offset..fl.offset + 4)?);
    let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
    data.get(off..off.checked_add(len)?)
}

/// `sys_enter_openat_print()`: `dfd: %lu, filename: %lu "path", flags:
/// O_RDONLY|..., mode: 0%03o` (the mode only when the flags can create a
/// file). The flag names and values are those of the event's print fmt
/// (they differ between architectures), `O_TMPFILE` first as the kernel's
/// table has it. False when the format is not the one expected.
fn openat(
    out: &mut Vec<u8>,
    f: &EventFormat,
    args: &[usize],
    vals: &[u64],
    data: &[u8],
    endian: Endian,
) -> bool {
    let Some(table) = flag_table(&f.print_fmt_text) else {
        return false;
    };
    let value = |n: &str| table.iter().find(|(_, s)| s == n.as_bytes()).map(|e| e.0);
    let (Some(creat), Some(dir)) = (value("O_CREAT"), value("O_DIRECTORY")) else {
        return false;
    };
    if args.len() != 4 {
        return false;
    }
    let tmpfile = 0o20000000 | dir;
    let mut full = vec![(tmpfile, b"O_TMPFILE".to_vec())];
    full.extend(table.iter().cloned());
    let filename = f
        .field_index("__filename_val")
        .map(|i| match f.read_str(data, i, 0, endian) {
            StrValue::Ok(s) => s.to_vec(),
            _ => Vec::new(),
        });
    for (k, &v) in vals.iter().enumerate() {
        if k > 0 {
            out.extend_from_slice(b", ");
        }
        let arg = &f.fields[args[k]].name;
        match k {
            2 => {
                // `int bits`
                let bits = i64::from(v as u32 as i32) as u64;
                out.extend_from_slice(b"flags: ");
                let done = bits & (creat | tmpfile) == 0;
                if bits & 3 == 0 {
                    if bits == 0 {
                        out.extend_from_slice(b"O_RDONLY");
                        if done {
                            break;
                        }
                        continue;
                    }
                    out.extend_from_slice(b"O_RDONLY|");
                }
                out.extend_from_slice(&print_flags(bits, b"|", &full));
                if done {
                    break;
                }
            }
            3 => out.extend_from_slice(format!("{arg}: 0{:03o}", v as u32).as_bytes()),
            _ => {
                out.extend_from_slice(format!("{arg}: {v}").as_bytes());
                if k == 1
                    && let Some(s) = &filename
                {
                    out.extend_from_slice(b" \"");
                    out.extend_from_slice(s);
                    out.push(b'"');
                }
            }
        }
    }
    true
}

/// The `{ 0x1, "O_WRONLY" }, ...` table of the print fmt's
/// `__print_flags()`.
fn flag_table(text: &str) -> Option<Vec<(u64, Vec<u8>)>> {
    let start = text.find("__print_flags(")?;
    let mut t = Vec::new();
    for entry in text[start..].split('{').skip(1) {
        let body = entry.split('}').next()?;
        let (v, name) = body.split_once(',')?;
        let v = u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok()?;
        let name = name.trim().trim_matches('"');
        t.push((v, name.as_bytes().to_vec()));
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_by_release() {
        assert_eq!(
            SyscallStyle::for_release("6.1.0-28-cloud-amd64"),
            SyscallStyle::Hex
        );
        assert_eq!(SyscallStyle::for_release("6.17.2"), SyscallStyle::Hex);
        assert_eq!(SyscallStyle::for_release("6.18.44-fc"), SyscallStyle::Mixed);
        assert_eq!(
            SyscallStyle::for_release("7.2.13+deb14-cloud-amd64"),
            SyscallStyle::Mixed
        );
        assert_eq!(SyscallStyle::for_release(""), SyscallStyle::Mixed);
    }
}
