//! Event text identical to the kernel's `trace` / `trace_pipe` lines.
//!
//! Mirrors `print_trace_line()` / `print_trace_fmt()` in
//! kernel/trace/trace.c (context columns, then the event), `print_kprobe_event`
//! / `print_kretprobe_event` in kernel/trace/trace_kprobe.c (`(sym+off/size)`,
//! `(caller+off/size <- func)`), `print_uprobe_event` in
//! kernel/trace/trace_uprobe.c (`(0x...)`, `(0x... <- 0x...)`), and the
//! per-type print functions of kernel/trace/trace_probe.c, which the event's
//! `print fmt` spells out (`%u`, `%d`, `%Lu`, `0x%x`, `'%c'`, `"%s"`, `%pS`,
//! `{...}` arrays); a string whose fetch faulted prints `(fault)` without
//! quotes. Lost events print as the kernel's `CPU:N [LOST M EVENTS]`. It does
//! not read pages or files.

use crate::Symbolizer;
use crate::context::{Comms, FlagStyle, write_task_cpu, write_timestamp};
use crate::num;
use ktrace_event::printfmt::{Arg, Conv, Length, Op, Spec};
use ktrace_event::{Common, Endian, Event, Events, Int, ProbeKind, StrValue};
use ktrace_ring::Missed;
use std::io::Write;

/// Renders records as kernel `trace` lines.
pub struct TextPrinter<'a> {
    events: &'a Events,
    endian: Endian,
    long_size: usize,
    style: FlagStyle,
    symbols: &'a dyn Symbolizer,
    /// Task names used for the TASK column.
    pub comms: Comms,
    /// Whether to print the irq-info column (the kernel's `irq-info` option,
    /// on by default).
    pub irq_info: bool,
}

impl<'a> TextPrinter<'a> {
    /// A printer for records of `events` from a kernel with byte order
    /// `endian`, flag style `style`, resolving kernel addresses with
    /// `symbols`.
    pub fn new(
        events: &'a Events,
        endian: Endian,
        style: FlagStyle,
        symbols: &'a dyn Symbolizer,
        comms: Comms,
    ) -> TextPrinter<'a> {
        TextPrinter {
            events,
            endian,
            long_size: events.long_size(),
            style,
            symbols,
            comms,
            irq_info: true,
        }
    }

    /// Appends the line for one record (with its newline). Unknown event
    /// ids print the kernel's `Unknown type N` line.
    pub fn write_record(&mut self, out: &mut Vec<u8>, cpu: usize, ts: u64, data: &[u8]) {
        let Some(common) = Common::read(data, self.endian) else {
            let _ = writeln!(out, "CPU:{cpu} [RECORD TOO SHORT: {} BYTES]", data.len());
            return;
        };
        let comm = self.comms.get(common.pid);
        write_task_cpu(out, comm, common.pid, cpu);
        if self.irq_info {
            self.style.write(out, common.flags, common.preempt_count);
        }
        write_timestamp(out, ts);
        out.extend_from_slice(b": ");
        match self.events.get(common.type_id) {
            Some(ev) => self.write_event(out, ev, data),
            None => {
                let _ = write!(out, "Unknown type {}", common.type_id);
            }
        }
        out.push(b'\n');
    }

    /// Appends the kernel's lost-events line for `cpu`.
    pub fn write_lost(&self, out: &mut Vec<u8>, cpu: usize, missed: Missed) {
        match missed {
            Missed::None => {}
            Missed::Unknown => {
                let _ = writeln!(out, "CPU:{cpu} [LOST EVENTS]");
            }
            Missed::Count(n) => {
                let _ = writeln!(out, "CPU:{cpu} [LOST {n} EVENTS]");
            }
        }
    }

    /// Appends `name: ` and the event's own text (no context, no newline).
    pub fn write_event(&self, out: &mut Vec<u8>, ev: &Event, data: &[u8]) {
        let f = &ev.format;
        out.extend_from_slice(f.name.as_bytes());
        out.extend_from_slice(b": ");
        let Some(pf) = &f.print_fmt else {
            let _ = write!(out, "[FAILED TO PARSE]");
            return;
        };
        let u = |name: &str| -> u64 {
            f.field_index(name)
                .and_then(|i| f.read_int(data, i, 0, self.endian))
                .map_or(0, Int::bits)
        };
        let header_convs = match ev.kind {
            ProbeKind::Uprobe | ProbeKind::Kprobe => 1,
            ProbeKind::Uretprobe | ProbeKind::Kretprobe => 2,
            ProbeKind::Other => 0,
        };
        let (start, skip) = if header_convs > 0 {
            body_start(&pf.ops, header_convs).unwrap_or_default()
        } else {
            (0, 0)
        };
        let probe = header_convs > 0 && (start, skip) != (0, 0);
        if probe {
            match ev.kind {
                ProbeKind::Uprobe => {
                    out.extend_from_slice(b"(0x");
                    num::hex(out, u("__probe_ip"));
                    out.push(b')');
                }
                ProbeKind::Uretprobe => {
                    out.extend_from_slice(b"(0x");
                    num::hex(out, u("__probe_ret_ip"));
                    out.extend_from_slice(b" <- 0x");
                    num::hex(out, u("__probe_func"));
                    out.push(b')');
                }
                ProbeKind::Kprobe => {
                    out.push(b'(');
                    self.write_ip_sym(out, u("__probe_ip"), true);
                    out.push(b')');
                }
                ProbeKind::Kretprobe => {
                    out.push(b'(');
                    self.write_ip_sym(out, u("__probe_ret_ip"), true);
                    out.extend_from_slice(b" <- ");
                    self.write_ip_sym(out, u("__probe_func"), false);
                    out.push(b')');
                }
                ProbeKind::Other => {}
            }
        }
        let mut skip_quote = false;
        for (i, op) in pf.ops.iter().enumerate().skip(start) {
            match op {
                Op::Lit(b) => {
                    let mut b = if i == start {
                        &b[skip.min(b.len())..]
                    } else {
                        &b[..]
                    };
                    if skip_quote {
                        skip_quote = false;
                        if let Some(rest) = b.strip_prefix(b"\"") {
                            b = rest;
                        }
                    }
                    out.extend_from_slice(b);
                }
                Op::Conv { spec, arg } => {
                    skip_quote = false;
                    match arg {
                        Arg::Field { index, elem } => {
                            match f.read_int(data, *index, elem.unwrap_or(0), self.endian) {
                                Some(v) => self.write_int(out, spec, v),
                                None => out.extend_from_slice(b"[FAILED TO PARSE]"),
                            }
                        }
                        Arg::Str { index, elem } => {
                            match f.read_str(data, *index, elem.unwrap_or(0), self.endian) {
                                StrValue::Ok(s) => write_padded(out, spec, s),
                                StrValue::Fault if probe => {
                                    if out.last() == Some(&b'"') {
                                        out.pop();
                                        skip_quote = true;
                                    }
                                    out.extend_from_slice(b"(fault)");
                                }
                                StrValue::Fault => write_padded(out, spec, b""),
                                StrValue::Bad => out.extend_from_slice(b"[FAILED TO PARSE]"),
                            }
                        }
                        Arg::Unsupported(_) => out.extend_from_slice(b"[FAILED TO PARSE]"),
                    }
                }
            }
        }
    }

    /// `seq_print_ip_sym()`: `0` for a null address, `sym+0xoff/0xsize
    /// [mod]` (with offset) or `sym` (without), `0x%08lx` when unknown.
    fn write_ip_sym(&self, out: &mut Vec<u8>, addr: u64, offset: bool) {
        if addr == 0 {
            out.push(b'0');
            return;
        }
        match self.symbols.lookup(addr) {
            Some(s) if offset => {
                let _ = write!(out, "{}+0x{:x}/0x{:x}", s.name, s.offset, s.size);
                if let Some(m) = s.module {
                    let _ = write!(out, " [{m}]");
                }
            }
            Some(s) => out.extend_from_slice(s.name.as_bytes()),
            None => {
                let _ = write!(out, "0x{addr:08x}");
            }
        }
    }

    fn write_int(&self, out: &mut Vec<u8>, spec: &Spec, v: Int) {
        let bits = v.bits();
        let width_bits = match spec.length {
            // pointers are always the kernel's long, whatever the modifier
            _ if matches!(spec.conv, Conv::Pointer(_)) => 8 * self.long_size as u32,
            Length::Char => 8,
            Length::Short => 16,
            Length::Int => 32,
            Length::Long | Length::Size => 8 * self.long_size as u32,
            Length::LongLong => 64,
        };
        let mask = if width_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << width_bits) - 1
        };
        let ubits = bits & mask;
        let sval = if width_bits >= 64 {
            ubits as i64
        } else {
            let sh = 64 - width_bits;
            ((ubits << sh) as i64) >> sh
        };
        let mut tmp = [0u8; 24];
        let (prefix, digits): (&[u8], &[u8]) = match &spec.conv {
            Conv::Signed => {
                let d = num::digits(&mut tmp, sval.unsigned_abs(), 10, false);
                let p: &[u8] = if sval < 0 {
                    b"-"
                } else if spec.plus {
                    b"+"
                } else if spec.space {
                    b" "
                } else {
                    b""
                };
                (p, d)
            }
            Conv::Unsigned => (b"", num::digits(&mut tmp, ubits, 10, false)),
            Conv::Hex { upper } => {
                let p: &[u8] = match (spec.alt && ubits != 0, *upper) {
                    (true, true) => b"0X",
                    (true, false) => b"0x",
                    _ => b"",
                };
                (p, num::digits(&mut tmp, ubits, 16, *upper))
            }
            Conv::Octal => {
                let p: &[u8] = if spec.alt { b"0" } else { b"" };
                (p, num::digits(&mut tmp, ubits, 8, false))
            }
            Conv::Char => {
                write_padded(out, spec, &[ubits as u8]);
                return;
            }
            Conv::Str => {
                out.extend_from_slice(b"[FAILED TO PARSE]");
                return;
            }
            Conv::Pointer(ext) => {
                self.write_pointer(out, spec, ext, ubits);
                return;
            }
        };
        let digits: &[u8] =
            if spec.precision == Some(0) && ubits == 0 && !matches!(spec.conv, Conv::Signed) {
                b""
            } else {
                digits
            };
        if spec.width.is_none() && spec.precision.is_none() {
            out.extend_from_slice(prefix);
            out.extend_from_slice(digits);
            return;
        }
        let prec = spec.precision.unwrap_or(0);
        let zeros_prec = prec.saturating_sub(digits.len());
        let body = prefix.len() + zeros_prec + digits.len();
        let width = spec.width.unwrap_or(0);
        let pad = width.saturating_sub(body);
        if spec.left {
            out.extend_from_slice(prefix);
            out.resize(out.len() + zeros_prec, b'0');
            out.extend_from_slice(digits);
            out.resize(out.len() + pad, b' ');
        } else if spec.zero && spec.precision.is_none() {
            out.extend_from_slice(prefix);
            out.resize(out.len() + pad + zeros_prec, b'0');
            out.extend_from_slice(digits);
        } else {
            out.resize(out.len() + pad, b' ');
            out.extend_from_slice(prefix);
            out.resize(out.len() + zeros_prec, b'0');
            out.extend_from_slice(digits);
        }
    }

    /// `%pS`/`%pB` (sym+off/size), `%ps` (sym), anything else as hex.
    fn write_pointer(&self, out: &mut Vec<u8>, spec: &Spec, ext: &str, addr: u64) {
        let mut s = Vec::new();
        match (ext.chars().next(), self.symbols.lookup(addr)) {
            (Some('S' | 'B'), Some(sym)) => {
                let _ = write!(s, "{}+0x{:x}/0x{:x}", sym.name, sym.offset, sym.size);
                if let Some(m) = sym.module {
                    let _ = write!(s, " [{m}]");
                }
            }
            (Some('s'), Some(sym)) => s.extend_from_slice(sym.name.as_bytes()),
            _ => {
                let _ = write!(s, "0x{addr:x}");
            }
        }
        write_padded(out, spec, &s);
    }
}

/// Where the print fmt body starts after a probe header of `n` conversions
/// (`(%lx)` or `(%lx <- %lx)`): (op index, bytes to skip in that literal).
fn body_start(ops: &[Op], n: usize) -> Option<(usize, usize)> {
    let mut convs = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Conv { .. } => convs += 1,
            Op::Lit(b) if convs == n => {
                return b.starts_with(b")").then_some((i, 1));
            }
            Op::Lit(_) => {}
        }
        if convs == n && i + 1 == ops.len() {
            return None;
        }
    }
    None
}

fn write_padded(out: &mut Vec<u8>, spec: &Spec, s: &[u8]) {
    let s = match spec.precision {
        Some(p) if p < s.len() => &s[..p],
        _ => s,
    };
    let pad = spec.width.unwrap_or(0).saturating_sub(s.len());
    if !spec.left {
        out.resize(out.len() + pad, b' ');
    }
    out.extend_from_slice(s);
    if spec.left {
        out.resize(out.len() + pad, b' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoSymbols;

    /// printf conversions against values as C's printf renders them.
    #[test]
    fn int_conversions_follow_c_printf() {
        let fmt = "name: t\nID: 9\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:s64 v;\toffset:8;\tsize:8;\tsigned:1;\n\n";
        let cases: &[(&str, i64, &str)] = &[
            ("%d", -5, "-5"),
            ("%5d", -5, "   -5"),
            ("%-5u|", 7, "7    |"),
            ("%05x", 255, "000ff"),
            ("%#x", 255, "0xff"),
            ("%#x", 0, "0"),
            ("%#o", 8, "010"),
            ("%X", 48879, "BEEF"),
            ("%hhd", 255, "-1"),
            ("%hu", 65537, "1"),
            ("%.3d", 5, "005"),
            ("%+d", 5, "+5"),
            ("%lu", -1, "18446744073709551615"),
            ("%d", 0xffff_ffff, "-1"),
            ("%u", -1, "4294967295"),
            ("%Ld", i64::MIN, "-9223372036854775808"),
            ("%c", 65, "A"),
            ("%3c|", 65, "  A|"),
            ("%pS", 0x1234, "0x1234"),
        ];
        for (conv, v, want) in cases {
            let text = format!("{fmt}print fmt: \"{conv}\", REC->v\n");
            let mut events = Events::new(8);
            events.add_with_kind("s", &text, ProbeKind::Other).unwrap();
            let mut rec = vec![9, 0, 0, 0, 1, 0, 0, 0];
            rec.extend_from_slice(&v.to_le_bytes());
            let p = TextPrinter::new(
                &events,
                Endian::Little,
                FlagStyle::Lazy,
                &NoSymbols,
                Comms::new(),
            );
            let mut out = Vec::new();
            p.write_event(&mut out, events.get(9).unwrap(), &rec);
            assert_eq!(
                String::from_utf8_lossy(&out),
                format!("t: {want}"),
                "{conv} {v}"
            );
        }
    }
}
