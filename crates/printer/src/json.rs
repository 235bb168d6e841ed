//! JSON lines and raw output for records.
//!
//! JSON: one object per record with typed values: integers as JSON numbers
//! (signedness from the format file), strings as strings (invalid UTF-8
//! replaced), a faulted string as `null`, arrays as arrays, `char` fields as
//! one-character strings, and symbol fields (`%pS` in the print fmt, and a
//! kprobe's `__probe_ip`/`__probe_func`/`__probe_ret_ip`) as
//! `{"addr":N,"sym":"name+0xoff/0xsize"}`. Raw: `ts cpu pid system:event
//! field=value...` with no print-fmt interpretation, for speed. Neither
//! mirrors a kernel file; the field meanings are those of ktrace-event.

use crate::{Symbolizer, num};
use ktrace_event::append::append;
use ktrace_event::printfmt::{Arg, Conv, Op};
use ktrace_event::{Common, Endian, Event, Events, Int, ProbeKind, StrValue, Value};
use ktrace_ring::Missed;
use ktrace_stream::Comms;
use std::io::Write;

/// Renders records as JSON lines.
pub struct JsonPrinter<'a> {
    events: Events,
    endian: Endian,
    symbols: &'a dyn Symbolizer,
    /// Task names for the `comm` member.
    pub comms: Comms,
    hints: Vec<Option<Vec<Hint>>>,
}

fn json_str(out: &mut Vec<u8>, s: &[u8]) {
    // fast path: printable ASCII without quotes or backslashes
    if s.iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push(b'"');
        append(out, s);
        out.push(b'"');
        return;
    }
    let s = String::from_utf8_lossy(s);
    let _ = serde_json::to_writer(&mut *out, &*s);
}

#[derive(Clone, Copy, PartialEq)]
enum Hint {
    Plain,
    Char,
    Symbol,
}

fn hints(ev: &Event) -> Vec<Hint> {
    let mut h = vec![Hint::Plain; ev.format.fields.len()];
    if let Some(pf) = &ev.format.print_fmt {
        for op in &pf.ops {
            if let Op::Conv {
                spec,
                arg: Arg::Field { index, .. },
            } = op
            {
                match &spec.conv {
                    Conv::Char => h[*index] = Hint::Char,
                    Conv::Pointer(x) if x.starts_with(['S', 's', 'B', 'F', 'f']) => {
                        h[*index] = Hint::Symbol
                    }
                    _ => {}
                }
            }
        }
    }
    if matches!(ev.kind, ProbeKind::Kprobe | ProbeKind::Kretprobe) {
        for name in ["__probe_ip", "__probe_func", "__probe_ret_ip"] {
            if let Some(i) = ev.format.field_index(name) {
                h[i] = Hint::Symbol;
            }
        }
    }
    h
}

impl<'a> JsonPrinter<'a> {
    /// A JSON printer for records of `events`.
    pub fn new(events: &Events, endian: Endian, symbols: &'a dyn Symbolizer, comms: Comms) -> Self {
        JsonPrinter {
            events: events.clone(),
            endian,
            symbols,
            comms,
            hints: Vec::new(),
        }
    }

    /// Appends one JSON object and a newline for a record, with the
    /// printer's own events and names.
    pub fn write_record(&mut self, out: &mut Vec<u8>, cpu: usize, ts: u64, data: &[u8]) {
        let Some(c) = Common::read(data, self.endian) else {
            let _ = writeln!(
                out,
                "{{\"cpu\":{cpu},\"ts\":{ts},\"error\":\"record too short\"}}"
            );
            return;
        };
        let comms = std::mem::take(&mut self.comms);
        let ev = self.events.get_shared(c.type_id).cloned();
        self.write_line(out, cpu, ts, data, c, ev.as_deref(), &comms);
        self.comms = comms;
    }

    /// Appends one JSON object and a newline for a record whose header and
    /// event were found already (`ev`: `None` for an unknown id), naming
    /// tasks from `comms`.
    #[allow(clippy::too_many_arguments)]
    pub fn write_line(
        &mut self,
        out: &mut Vec<u8>,
        cpu: usize,
        ts: u64,
        data: &[u8],
        c: Common,
        ev: Option<&Event>,
        comms: &Comms,
    ) {
        out.extend_from_slice(b"{\"ts\":");
        num::dec(out, ts);
        out.extend_from_slice(b",\"cpu\":");
        num::dec(out, cpu as u64);
        out.extend_from_slice(b",\"pid\":");
        signed(out, i64::from(c.pid));
        out.extend_from_slice(b",\"comm\":");
        json_str(out, comms.get(c.pid).as_bytes());
        let Some(ev) = ev else {
            let _ = writeln!(out, ",\"type\":{},\"error\":\"unknown event\"}}", c.type_id);
            return;
        };
        out.extend_from_slice(b",\"system\":");
        json_str(out, ev.system.as_bytes());
        out.extend_from_slice(b",\"event\":");
        json_str(out, ev.format.name.as_bytes());
        out.extend_from_slice(b",\"flags\":");
        num::dec(out, u64::from(c.flags));
        out.extend_from_slice(b",\"preempt_count\":");
        num::dec(out, u64::from(c.preempt_count));
        out.extend_from_slice(b",\"fields\":{");
        let id = usize::from(c.type_id);
        if self.hints.len() <= id {
            self.hints.resize(id + 1, None);
        }
        let hints = self.hints[id].get_or_insert_with(|| hints(ev));
        let mut first = true;
        for (i, f) in ev.format.fields.iter().enumerate() {
            if f.common {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            json_str(out, f.name.as_bytes());
            out.push(b':');
            let v = ev.format.value(data, i, self.endian);
            write_value(self.symbols, out, &v, hints[i]);
        }
        out.extend_from_slice(b"}}\n");
    }

    /// Appends a JSON loss report: `{"lost":N,"cpu":K}` (`null` when the
    /// kernel did not say how many).
    pub fn write_lost(&self, out: &mut Vec<u8>, cpu: usize, missed: Missed) {
        match missed {
            Missed::None => {}
            Missed::Unknown => {
                let _ = writeln!(out, "{{\"lost\":null,\"cpu\":{cpu}}}");
            }
            Missed::Count(n) => {
                let _ = writeln!(out, "{{\"lost\":{n},\"cpu\":{cpu}}}");
            }
        }
    }
}

fn write_value(symbols: &dyn Symbolizer, out: &mut Vec<u8>, v: &Value<'_>, hint: Hint) {
    match v {
        Value::Int(i) => match hint {
            Hint::Char => json_str(out, &[i.bits() as u8]),
            Hint::Symbol => {
                let a = i.bits();
                let _ = write!(out, "{{\"addr\":{a},\"sym\":");
                match symbols.lookup(a) {
                    Some(s) => {
                        let t = format!("{}+0x{:x}/0x{:x}", s.name, s.offset, s.size);
                        json_str(out, t.as_bytes());
                    }
                    None => out.extend_from_slice(b"null"),
                }
                out.push(b'}');
            }
            Hint::Plain => match i {
                Int::U(u) => crate::num::dec(out, *u),
                Int::S(s) => {
                    if *s < 0 {
                        out.push(b'-');
                    }
                    crate::num::dec(out, s.unsigned_abs());
                }
            },
        },
        Value::Str(StrValue::Ok(s)) => json_str(out, s),
        Value::Str(_) | Value::Missing => out.extend_from_slice(b"null"),
        Value::Bytes(b) => {
            out.push(b'[');
            for (k, x) in b.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                let _ = write!(out, "{x}");
            }
            out.push(b']');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (k, x) in items.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                write_value(symbols, out, x, hint);
            }
            out.push(b']');
        }
    }
}

/// Appends `v` in decimal with its sign.
fn signed(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    num::dec(out, v.unsigned_abs());
}

/// Appends the raw line of a record: `ts cpu pid system:event f=v ...`
/// (strings in double quotes with `\` escapes, faulted strings as `(fault)`).
pub fn write_raw(
    out: &mut Vec<u8>,
    events: &Events,
    endian: Endian,
    cpu: usize,
    ts: u64,
    data: &[u8],
) {
    let Some(c) = Common::read(data, endian) else {
        return;
    };
    write_raw_line(out, events.get(c.type_id), c, endian, cpu, ts, data);
}

/// [`write_raw`] for a record whose header and event were found already.
pub fn write_raw_line(
    out: &mut Vec<u8>,
    ev: Option<&Event>,
    c: Common,
    endian: Endian,
    cpu: usize,
    ts: u64,
    data: &[u8],
) {
    num::dec(out, ts);
    out.push(b' ');
    num::dec(out, cpu as u64);
    out.push(b' ');
    signed(out, i64::from(c.pid));
    let Some(ev) = ev else {
        let _ = writeln!(out, " type={}", c.type_id);
        return;
    };
    out.push(b' ');
    append(out, ev.system.as_bytes());
    out.push(b':');
    append(out, ev.format.name.as_bytes());
    for (i, f) in ev.format.fields.iter().enumerate() {
        if f.common {
            continue;
        }
        out.push(b' ');
        append(out, f.name.as_bytes());
        out.push(b'=');
        raw_value(out, &ev.format.value(data, i, endian));
    }
    out.push(b'\n');
}

fn raw_value(out: &mut Vec<u8>, v: &Value<'_>) {
    match v {
        Value::Int(Int::U(u)) => num::dec(out, *u),
        Value::Int(Int::S(s)) => signed(out, *s),
        Value::Str(StrValue::Ok(s)) => {
            // what escape_ascii() leaves alone is copied as it is
            if s.iter()
                .all(|&b| (0x20..0x7f).contains(&b) && !matches!(b, b'"' | b'\'' | b'\\'))
            {
                out.push(b'"');
                append(out, s);
                out.push(b'"');
            } else {
                let _ = write!(out, "\"{}\"", s.escape_ascii());
            }
        }
        Value::Str(_) | Value::Missing => out.extend_from_slice(b"(fault)"),
        Value::Bytes(b) => {
            for x in *b {
                let _ = write!(out, "{x:02x}");
            }
        }
        Value::Array(items) => {
            out.push(b'{');
            for (k, x) in items.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                raw_value(out, x);
            }
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{json_str, raw_value, signed};
    use ktrace_event::{Int, StrValue, Value};

    /// The raw mode's fast paths print what `{}` and `escape_ascii()` do.
    #[test]
    fn raw_values_match_core_fmt() {
        for s in [
            &b"plain text 0123"[..],
            b"",
            b"q\"uote",
            b"it's",
            b"back\\slash",
            b"tab\tnl\n",
            b"\x7f\x1f\xff",
            "é".as_bytes(),
        ] {
            let mut out = Vec::new();
            raw_value(&mut out, &Value::Str(StrValue::Ok(s)));
            assert_eq!(
                out,
                format!("\"{}\"", s.escape_ascii()).into_bytes(),
                "{s:?}"
            );
        }
        for v in [0i64, 1, -1, 42, -4096, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            raw_value(&mut out, &Value::Int(Int::S(v)));
            signed(&mut out, v);
            assert_eq!(out, format!("{v}{v}").into_bytes());
        }
        let mut out = Vec::new();
        raw_value(&mut out, &Value::Int(Int::U(u64::MAX)));
        assert_eq!(out, u64::MAX.to_string().into_bytes());
    }

    #[test]
    fn strings_are_valid_json() {
        let cases: &[&[u8]] = &[
            b"plain",
            b"",
            b"q\"uote",
            b"back\\slash",
            b"tab\tnl\n",
            b"\xff\xfe",
            b"\x00",
            "é".as_bytes(),
        ];
        for s in cases {
            let mut out = Vec::new();
            json_str(&mut out, s);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v.as_str().unwrap(), String::from_utf8_lossy(s), "{s:?}");
        }
    }
}
