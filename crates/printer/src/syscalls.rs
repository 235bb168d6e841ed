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
    use crate::{FlagStyle, NoSymbols, TextPrinter};
    use ktrace_event::{Events, ProbeKind};
    use ktrace_stream::Comms;

    const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n";

    /// A record of event `id`: the arguments as unsigned longs from offset
    /// 16, then the user copies (`__data_loc` words and their bytes).
    fn record(id: u16, args: &[u64], user: &[&[u8]]) -> Vec<u8> {
        let mut d = vec![0u8; 16];
        d[..2].copy_from_slice(&id.to_le_bytes());
        for a in args {
            d.extend_from_slice(&a.to_le_bytes());
        }
        let mut at = d.len() + 4 * user.len();
        let mut data = Vec::new();
        for u in user {
            d.extend_from_slice(&((at as u32) | (u.len() as u32) << 16).to_le_bytes());
            at += u.len();
            data.extend_from_slice(u);
        }
        d.extend(data);
        d
    }

    fn print(style: SyscallStyle, format: &str, rec: &[u8]) -> String {
        let mut events = Events::new(8);
        events
            .add_with_kind("syscalls", format, ProbeKind::Other)
            .unwrap();
        let mut p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &NoSymbols,
            Comms::new(),
        );
        p.syscall_style = style;
        let id = u16::from_le_bytes([rec[0], rec[1]]);
        let mut out = Vec::new();
        p.write_event(&mut out, events.get(id).unwrap(), rec);
        String::from_utf8(out).unwrap()
    }

    /// The lines the kernels' own `trace` printed for these records:
    /// Debian 6.1.0-56 (x86_64 guest), the 6.18 host, Debian 7.2.13
    /// (x86_64 guest, with its user copies and openat's own printer).
    #[test]
    fn syscall_lines_like_each_kernel() {
        let enter = format!(
            "name: sys_enter_openat\nID: 760\nformat:\n{COMMON}\
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;\n\n\
print fmt: \"dfd: 0x%08lx, filename: 0x%08lx, flags: 0x%08lx, mode: 0x%08lx\", ((unsigned long)(REC->dfd)), ((unsigned long)(REC->filename)), ((unsigned long)(REC->flags)), ((unsigned long)(REC->mode))\n"
        );
        let exit = format!(
            "name: sys_exit_openat\nID: 759\nformat:\n{COMMON}\
\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\n\
print fmt: \"0x%lx\", REC->ret\n"
        );
        let rec = record(760, &[0xffffff9c, 0x3a77c990, 0x241, 0x1b6], &[]);
        assert_eq!(
            print(SyscallStyle::Hex, &enter, &rec),
            "sys_openat(dfd: ffffff9c, filename: 3a77c990, flags: 241, mode: 1b6)"
        );
        let rec = record(760, &[0xffffff9c, 0x7f05661685b0, 0x80000, 0], &[]);
        assert_eq!(
            print(SyscallStyle::Mixed, &enter, &rec),
            "sys_openat(dfd: 0xffffff9c, filename: 0x7f05661685b0, flags: 0x80000, mode: 0)"
        );
        let rec = record(759, &[3], &[]);
        assert_eq!(print(SyscallStyle::Hex, &exit, &rec), "sys_openat -> 0x3");
        let rec = record(759, &[-22i64 as u64], &[]);
        assert_eq!(
            print(SyscallStyle::Mixed, &exit, &rec),
            "sys_openat -> 0xffffffffffffffea"
        );
        // 7.2: user copies
        let write = format!(
            "name: sys_enter_write\nID: 800\nformat:\n{COMMON}\
\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:const char * buf;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:__data_loc char[] __buf_val;\toffset:40;\tsize:4;\tsigned:0;\n\n\
print fmt: \"fd: 0x%08lx, buf: 0x%08lx (%s), count: 0x%08lx\", ((unsigned long)(REC->fd)), ((unsigned long)(REC->buf)), __print_dynamic_array(__buf_val, 1), ((unsigned long)(REC->count))\n"
        );
        let rec = record(800, &[1, 0x464bd30, 6], &[b"hello\n"]);
        assert_eq!(
            print(SyscallStyle::Mixed, &write, &rec),
            "sys_write(fd: 1, buf: 0x464bd30 (68:65:6c:6c:6f:0a) \"hello.\", count: 6)"
        );
        // a copy cut short of the count, and bytes with nothing printable
        let rec = record(800, &[1, 0x464bd30, 600], &[b"ab"]);
        assert_eq!(
            print(SyscallStyle::Mixed, &write, &rec),
            "sys_write(fd: 1, buf: 0x464bd30 (61:62, ...) \"ab\"..., count: 0x258)"
        );
        let rec = record(800, &[1, 0x464bd30, 2], &[&[0, 1]]);
        assert_eq!(
            print(SyscallStyle::Mixed, &write, &rec),
            "sys_write(fd: 1, buf: 0x464bd30 (00:01), count: 2)"
        );
        let openat = format!(
            "name: sys_enter_openat\nID: 760\nformat:\n{COMMON}\
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;\n\
\tfield:__data_loc char[] __filename_val;\toffset:48;\tsize:4;\tsigned:0;\n\n\
print fmt: \"dfd: 0x%08lx, filename: 0x%08lx \\\"%s\\\", flags: %s%s, mode: 0%03o\", ((unsigned long)(REC->dfd)), ((unsigned long)(REC->filename)), __get_str(__filename_val), (REC->flags & ~3) && !(REC->flags & 3) ? \"O_RDONLY|\" : \"\",  REC->flags ? __print_flags(REC->flags, \"|\", {{ 0x1, \"O_WRONLY\" }}, {{ 0x2, \"O_RDWR\" }}, {{ 0x40, \"O_CREAT\" }}, {{ 0x80, \"O_EXCL\" }}, {{ 0x100, \"O_NOCTTY\" }}, {{ 0x200, \"O_TRUNC\" }}, {{ 0x400, \"O_APPEND\" }}, {{ 0x800, \"O_NONBLOCK\" }}, {{ 0x1000, \"O_DSYNC\" }}, {{ 0x4000, \"O_DIRECT\" }}, {{ 0x8000, \"O_LARGEFILE\" }}, {{ 0x10000, \"O_DIRECTORY\" }}, {{ 0x20000, \"O_NOFOLLOW\" }}, {{ 0x40000, \"O_NOATIME\" }}, {{ 0x80000, \"O_CLOEXEC\" }}) : \"O_RDONLY\",  ((unsigned long)(REC->mode))\n"
        );
        let rec = record(
            760,
            &[0xffffff9c, 389940048, 0x241, 0o666],
            &[b"/dev/null\0"],
        );
        assert_eq!(
            print(SyscallStyle::Mixed, &openat, &rec),
            "sys_openat(dfd: 4294967196, filename: 389940048 \"/dev/null\", flags: O_WRONLY|O_CREAT|O_TRUNC, mode: 0666)"
        );
        let rec = record(760, &[0xffffff9c, 389939992, 0x90800, 0], &[b"/\0"]);
        assert_eq!(
            print(SyscallStyle::Mixed, &openat, &rec),
            "sys_openat(dfd: 4294967196, filename: 389939992 \"/\", flags: O_RDONLY|O_NONBLOCK|O_DIRECTORY|O_CLOEXEC, mode: 0000)"
        );
        // no O_CREAT nor O_TMPFILE bit: the mode is left out
        let rec = record(760, &[3, 389939992, 0x80000, 0], &[b"x\0"]);
        assert_eq!(
            print(SyscallStyle::Mixed, &openat, &rec),
            "sys_openat(dfd: 3, filename: 389939992 \"x\", flags: O_RDONLY|O_CLOEXEC)"
        );
        let rec = record(760, &[3, 389939992, 0, 0], &[b"x\0"]);
        assert_eq!(
            print(SyscallStyle::Mixed, &openat, &rec),
            "sys_openat(dfd: 3, filename: 389939992 \"x\", flags: O_RDONLY)"
        );
    }

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
