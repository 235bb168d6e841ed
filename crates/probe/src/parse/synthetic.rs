//! `s` synthetic events: `create_synth_event()`, `__create_synth_event()`,
//! `parse_synth_field()` and `synth_field_size()`
//! (kernel/trace/trace_events_synth.c).

use super::names::listed_name;
use super::{Ctx, Fail, Unchecked};
use crate::ast::SynthDef;
use crate::error::{ErrorKind, ProbeError, TpErr};
use crate::fetch::good_name;
use crate::kstrtox::kstrtouint;

/// `synth_event_create()` / `__create_synth_event()` (trace_events_synth.c) as
/// `dynamic_events` takes it: `s:[synthetic/]NAME TYPE FIELD[; TYPE FIELD]…`.
/// `create_synth_event()`, `__create_synth_event()` and
/// `parse_synth_field()` of kernel/trace/trace_events_synth.c (the same in
/// 6.1 and 7.2): `s:[synthetic/]NAME TYPE FIELD[; TYPE FIELD]...` on the
/// raw command (the kernel does not split it into words first, and logs it
/// as written); an error's caret is where its word first occurs in the
/// command (`err_pos()` is a `strstr()`).
pub(super) fn synthetic(raw: &str, ctx: &mut Ctx) -> Result<SynthDef, Fail> {
    ctx.subsystem = "synthetic_events";
    let cmd = raw.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let err = |e: TpErr, pos: usize| {
        Fail::Err(ProbeError {
            kind: ErrorKind::Logged(e),
            message: e.message(),
            subsystem: Some("synthetic_events"),
            pos: Some(pos),
            command: cmd.to_string(),
            hint: None,
        })
    };
    let errpos = |word: &str| cmd.find(word).unwrap_or(0);
    let Some(after) = cmd.strip_prefix("s:") else {
        return Err(Fail::Cancel);
    };
    let Some(p) = cmd.find([' ', '\t']) else {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    };
    let fields_text = cmd[p..].trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let mut start = 2;
    if after.contains('/') {
        if !after.starts_with("synthetic/") {
            return Err(err(TpErr::SYNTH_INVALID_DYN_CMD, 0));
        }
        start += "synthetic/".len();
    }
    // check_command(): the name and the first field need three words
    let first = cmd[start..].split(';').next().unwrap_or_default();
    if !first.starts_with('!') && first.split_ascii_whitespace().count() < 3 {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    let name = cmd.get(start..p).unwrap_or_default();
    if name.is_empty() {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    if !good_name(name) {
        return Err(err(TpErr::SYNTH_BAD_NAME, errpos(name)));
    }
    if let Some(listing) = ctx.env.dynamic_events() {
        if listing
            .iter()
            .any(|l| l.starts_with("s:") && listed_name(l).is_some_and(|(_, e)| e == name))
        {
            return Err(err(TpErr::SYNTH_EVENT_EXISTS, errpos(name)));
        }
    } else {
        ctx.note(Unchecked::EventName);
    }
    const SYNTH_FIELDS_MAX: usize = 64;
    let mut fields = Vec::new();
    for part in fields_text.split(';') {
        let argv: Vec<&str> = part.split_ascii_whitespace().collect();
        let mut consumed = 0;
        while argv.len() > consumed {
            let rest = &argv[consumed..];
            let (prefix, ty, fname) = if rest[0] == "unsigned" {
                if rest.len() < 3 {
                    return Err(err(TpErr::SYNTH_INCOMPLETE_TYPE, errpos(rest[0])));
                }
                consumed += 3;
                ("unsigned ", rest[1], Some(rest[2]))
            } else {
                consumed += 2;
                ("", rest[0], rest.get(1).copied())
            };
            let Some(fname) = fname else {
                return Err(err(TpErr::SYNTH_INVALID_FIELD, errpos(ty)));
            };
            let (bare, array) = match fname.find('[') {
                Some(a) => (&fname[..a], &fname[a..]),
                None => (fname, ""),
            };
            if !good_name(bare) {
                return Err(err(TpErr::SYNTH_BAD_NAME, errpos(fname)));
            }
            let full = format!("{prefix}{ty}{array}");
            match synth_field_size(&full) {
                Err(()) if !array.is_empty() => {
                    return Err(err(TpErr::SYNTH_INVALID_ARRAY_SPEC, errpos(fname)));
                }
                Err(()) => return Err(err(TpErr::SYNTH_INVALID_TYPE, errpos(ty))),
                Ok(0) if !(full.contains("char[") || full.contains("long[")) => {
                    return Err(err(TpErr::SYNTH_INVALID_TYPE, errpos(ty)));
                }
                Ok(_) => {}
            }
            if fields.len() == SYNTH_FIELDS_MAX {
                return Err(err(TpErr::SYNTH_TOO_MANY_FIELDS, 0));
            }
            fields.push((full, bare.to_string()));
        }
    }
    if fields.is_empty() {
        return Err(err(TpErr::SYNTH_CMD_INCOMPLETE, 0));
    }
    Ok(SynthDef {
        name: name.to_string(),
        fields,
    })
}

/// `synth_field_size()`: a field type's size (0: variable, a `char[]` or
/// `long[]`), or an error for a string length that is not one.
fn synth_field_size(ty: &str) -> Result<u32, ()> {
    const SCALARS: &[(&str, u32)] = &[
        ("s64", 8),
        ("u64", 8),
        ("s32", 4),
        ("u32", 4),
        ("s16", 2),
        ("u16", 2),
        ("s8", 1),
        ("u8", 1),
        ("char", 1),
        ("unsigned char", 1),
        ("int", 4),
        ("unsigned int", 4),
        ("long", 8),
        ("unsigned long", 8),
        ("bool", 1),
        ("pid_t", 4),
        ("gfp_t", 4),
    ];
    if let Some((_, n)) = SCALARS.iter().find(|(t, _)| *t == ty) {
        return Ok(*n);
    }
    if let Some(at) = ty.find("char[") {
        // synth_field_string_size()
        let start = at + "char[".len();
        let Some(end) = ty.find(']') else {
            return Err(());
        };
        if end < start || ty.len() > end + 1 {
            return Err(());
        }
        let digits = &ty[start..end];
        if digits.len() > 3 {
            return Err(());
        }
        if digits.is_empty() {
            return Ok(0);
        }
        let n = kstrtouint(digits, 0).map_err(|_| ())?;
        // STR_VAR_LEN_MAX
        return if n > 256 { Err(()) } else { Ok(n) };
    }
    Ok(0)
}
