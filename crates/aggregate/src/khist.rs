//! Parser for the kernel's `events/SYSTEM/EVENT/hist` files, and the
//! kernel's `kprobe_profile` (for kretprobe misses).
//!
//! Mirrors `hist_show()`, `hist_trigger_entry_print()` and
//! `hist_trigger_print_key()` in kernel/trace/trace_events_hist.c: one
//! table per hist trigger on the event (separated by a blank line pair),
//! each opened by `# event histogram` and `# trigger info: hist:keys=...`,
//! one line per entry `{ KEY: VALUE, ... } hitcount: N  VAL: N ...` (a
//! stacktrace key spans lines; an `onmax()` handler adds a `\tmax: N`
//! line under it, `track_data_print()`), and `Totals:` with Hits,
//! Entries, Dropped.
//! How a key's value is printed depends on its modifier, which is read from
//! the trigger info (`.execname`, `.log2`, `.buckets=N`, `.hex`, `.sym`,
//! `.sym-offset`, `.syscall`, `stacktrace`, strings). This module only
//! parses; turning tables into reports is [`crate::kernel`]'s plans.

use crate::error::{Error, HistMsg, Result};
use std::fmt::Write;

/// How a key is printed, from its modifier in the trigger info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFormat {
    /// `%10llu` (plain numbers; also string fields, told apart by value).
    Plain,
    /// `.execname`: `%-16s[%10llu]`.
    Execname,
    /// `.log2`: `~ 2^%-2llu`.
    Log2,
    /// `.buckets=N`: `~ LO-HI`.
    Buckets(u64),
    /// `.hex`: `%llx`.
    Hex,
    /// `.sym` (`[%llx] %-45ps`) / `.sym-offset` (`[%llx] %-55pS`).
    Sym {
        /// `.sym-offset`.
        offset: bool,
    },
    /// `.syscall`: `%-30s[%3llu]`.
    Syscall,
    /// `stacktrace` / `common_stacktrace`: frames on the following lines.
    Stack,
}

/// One key of the trigger, from the trigger info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerKey {
    /// The key as written in the trigger info (`common_pid.execname`).
    pub spec: String,
    /// Its print format.
    pub format: KeyFormat,
}

/// A key's value in one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyText {
    /// A number (printed as u64; signed fields wrap).
    Num(u64),
    /// `.execname`: the comm the kernel saved and the pid.
    Execname {
        /// The task name.
        comm: String,
        /// The thread id.
        pid: u64,
    },
    /// `.log2`: the exponent.
    Log2(u32),
    /// `.buckets`: the bucket's first value (the kernel prints LO-HI).
    Bucket(u64),
    /// `.sym`: the address and the symbol text.
    Sym {
        /// The address.
        addr: u64,
        /// The symbol as printed.
        name: String,
    },
    /// `.syscall`: name and number.
    Syscall {
        /// The syscall's name.
        name: String,
        /// Its number.
        nr: u64,
    },
    /// A string field (trailing padding removed).
    Str(String),
    /// A stack, innermost frame first.
    Stack(Vec<String>),
}

/// One entry: its keys (in trigger order) and values (hitcount first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistEntry {
    /// (label as printed, value) per key.
    pub keys: Vec<(String, KeyText)>,
    /// (name, sum) per value; the first is `hitcount`.
    pub vals: Vec<(String, u64)>,
    /// The value an `onmax()` handler tracks for this entry (the `max:`
    /// line under it; the first when the trigger has several).
    pub max: Option<u64>,
}

impl HistEntry {
    /// The hitcount.
    pub fn hitcount(&self) -> u64 {
        self.vals.first().map_or(0, |v| v.1)
    }

    /// The sum of value `name`.
    pub fn val(&self, name: &str) -> Option<u64> {
        self.vals.iter().find(|v| v.0 == name).map(|v| v.1)
    }
}

/// One hist trigger's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistTable {
    /// The trigger info line after `# trigger info: `.
    pub trigger: String,
    /// The trigger's keys.
    pub keys: Vec<TriggerKey>,
    /// The entries, in the kernel's order.
    pub entries: Vec<HistEntry>,
    /// Totals: Hits.
    pub hits: u64,
    /// Totals: Entries.
    pub n_entries: u64,
    /// Totals: Dropped (the table was full).
    pub dropped: u64,
}

fn err(line: usize, msg: impl Into<String>) -> Error {
    Error::HistParse {
        line,
        msg: HistMsg(msg.into()),
    }
}

/// The keys of a trigger info line (`hist:keys=A.execname,B:vals=...`).
pub fn trigger_keys(info: &str) -> Option<Vec<TriggerKey>> {
    let rest = info.strip_prefix("hist:")?;
    // a named trigger prints its name first: hist:NAME:keys=...
    let start = rest.find("keys=")?;
    let keys = &rest[start + "keys=".len()..];
    let end = keys.find([':', ' ']).unwrap_or(keys.len());
    let keys = &keys[..end];
    if keys.is_empty() {
        return None;
    }
    Some(
        keys.split(',')
            .map(|k| {
                let format = if k == "stacktrace"
                    || k == "common_stacktrace"
                    || k.ends_with(".stacktrace")
                {
                    KeyFormat::Stack
                } else if k.ends_with(".execname") {
                    KeyFormat::Execname
                } else if k.ends_with(".log2") {
                    KeyFormat::Log2
                } else if k.ends_with(".hex") {
                    KeyFormat::Hex
                } else if k.ends_with(".sym") {
                    KeyFormat::Sym { offset: false }
                } else if k.ends_with(".sym-offset") {
                    KeyFormat::Sym { offset: true }
                } else if k.ends_with(".syscall") {
                    KeyFormat::Syscall
                } else if let Some(n) = k.rsplit_once(".buckets=").and_then(|(_, n)| n.parse().ok())
                {
                    KeyFormat::Buckets(n)
                } else {
                    KeyFormat::Plain
                };
                TriggerKey {
                    spec: k.to_string(),
                    format,
                }
            })
            .collect(),
    )
}

/// Parse a whole `hist` file (every table in it).
pub fn parse_hist(text: &str) -> Result<Vec<HistTable>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut tables = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.is_empty() || line == "#" || line == "# event histogram" {
            i += 1;
            continue;
        }
        let Some(info) = line.strip_prefix("# trigger info: ") else {
            return Err(err(
                i + 1,
                format!("expected '# trigger info:', found '{}'", short(line)),
            ));
        };
        let trigger = info.trim_end().to_string();
        let keys =
            trigger_keys(&trigger).ok_or_else(|| err(i + 1, "trigger info without keys="))?;
        i += 1;
        let mut entries = Vec::new();
        let (mut hits, mut n_entries, mut dropped) = (None, None, None);
        while i < lines.len() {
            let line = lines[i];
            if line.starts_with("# trigger info: ") || line == "# event histogram" {
                break;
            }
            if line.is_empty() || line.starts_with('#') {
                i += 1;
                continue;
            }
            if line == "Totals:" {
                i += 1;
                while i < lines.len() {
                    let t = lines[i].trim_start();
                    let slot = if let Some(v) = t.strip_prefix("Hits: ") {
                        (&mut hits, v)
                    } else if let Some(v) = t.strip_prefix("Entries: ") {
                        (&mut n_entries, v)
                    } else if let Some(v) = t.strip_prefix("Dropped: ") {
                        (&mut dropped, v)
                    } else {
                        break;
                    };
                    *slot.0 = Some(
                        slot.1
                            .trim()
                            .parse::<u64>()
                            .map_err(|_| err(i + 1, "bad number in Totals"))?,
                    );
                    i += 1;
                }
                break;
            }
            if line.starts_with('{') {
                let (entry, next) = parse_entry(&lines, i, &keys)?;
                entries.push(entry);
                i = next;
                continue;
            }
            // `\tmax: N  SAVED: N` under an entry (track_data_print())
            if let Some(rest) = line.strip_prefix("\tmax:")
                && let Some(e) = entries.last_mut()
                && e.max.is_none()
            {
                let n = rest.split_whitespace().next().unwrap_or("");
                e.max = Some(
                    n.parse()
                        .map_err(|_| err(i + 1, format!("bad max '{}'", short(rest))))?,
                );
                i += 1;
                continue;
            }
            // "Snapshot taken" and other details: not ours, skip
            i += 1;
        }
        let (Some(hits), Some(n_entries), Some(dropped)) = (hits, n_entries, dropped) else {
            return Err(err(i.min(lines.len()), "table without complete Totals"));
        };
        tables.push(HistTable {
            trigger,
            keys,
            entries,
            hits,
            n_entries,
            dropped,
        });
    }
    Ok(tables)
}

fn short(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Parse the entry starting at `lines[i]`; returns it and the next line.
fn parse_entry(lines: &[&str], mut i: usize, keys: &[TriggerKey]) -> Result<(HistEntry, usize)> {
    let first = i + 1;
    let mut rest: &str = lines[i]
        .strip_prefix("{ ")
        .ok_or_else(|| err(first, "entry does not start with '{ '"))?;
    let mut out = Vec::with_capacity(keys.len());
    for (k, key) in keys.iter().enumerate() {
        let last = k + 1 == keys.len();
        if k > 0 {
            rest = rest
                .strip_prefix(", ")
                .ok_or_else(|| err(i + 1, "expected ', ' between keys"))?;
        }
        if key.format == KeyFormat::Stack {
            let label = rest
                .strip_suffix(':')
                .ok_or_else(|| err(i + 1, "expected 'stacktrace:'"))?;
            let mut frames = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].starts_with('}') {
                frames.push(lines[i].trim().to_string());
                i += 1;
            }
            if !last {
                return Err(err(i + 1, "a stacktrace key must be the last key"));
            }
            let Some(line) = lines.get(i) else {
                return Err(err(i, "stacktrace without closing '}'"));
            };
            out.push((label.to_string(), KeyText::Stack(frames)));
            rest = line;
            break;
        }
        let (label, after) = rest
            .split_once(": ")
            .ok_or_else(|| err(i + 1, "expected 'KEY: VALUE'"))?;
        let (value, remain) = take_value(after, key, last, keys.get(k + 1)).ok_or_else(|| {
            err(
                i + 1,
                format!(
                    "cannot read the value of key '{}' ({:?}) in '{}'",
                    key.spec,
                    key.format,
                    short(after)
                ),
            )
        })?;
        out.push((label.to_string(), value));
        rest = remain;
    }
    // rest: " } hitcount: ..." or "} hitcount: ..." after a stack
    let rest = rest
        .trim_start()
        .strip_prefix('}')
        .ok_or_else(|| err(i + 1, "expected '}' after the keys"))?;
    let vals = parse_vals(rest)
        .ok_or_else(|| err(i + 1, format!("cannot read the values '{}'", short(rest))))?;
    Ok((
        HistEntry {
            keys: out,
            vals,
            max: None,
        },
        i + 1,
    ))
}

/// Read one key value in `s` (after `LABEL: `); returns it and the text
/// after it (starting at `, ` or ` }`).
fn take_value<'a>(
    s: &'a str,
    key: &TriggerKey,
    last: bool,
    next: Option<&TriggerKey>,
) -> Option<(KeyText, &'a str)> {
    match key.format {
        KeyFormat::Execname => {
            // %-16s then [%10llu]; a comm is at most 15 bytes, so the
            // bracket is at byte 16 unless the name was longer
            let open = if s.as_bytes().get(16) == Some(&b'[') {
                16
            } else {
                s.find('[')?
            };
            let comm = s.get(..open)?.trim_end().to_string();
            let close = open + s.get(open..)?.find(']')?;
            let pid = s.get(open + 1..close)?.trim().parse().ok()?;
            Some((KeyText::Execname { comm, pid }, s.get(close + 1..)?))
        }
        KeyFormat::Syscall => {
            let open = s.find('[')?;
            let name = s.get(..open)?.trim_end().to_string();
            let close = open + s.get(open..)?.find(']')?;
            let nr = s.get(open + 1..close)?.trim().parse().ok()?;
            Some((KeyText::Syscall { name, nr }, s.get(close + 1..)?))
        }
        KeyFormat::Log2 => {
            let r = s.strip_prefix("~ 2^")?;
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            let exp = r.get(..end)?.parse().ok()?;
            let r = r.get(end..)?;
            // %-2llu pads one-digit exponents
            let r = if end == 1 {
                r.strip_prefix(' ').unwrap_or(r)
            } else {
                r
            };
            Some((KeyText::Log2(exp), r))
        }
        KeyFormat::Buckets(_) => {
            let r = s.strip_prefix("~ ")?;
            let dash = r.find('-')?;
            let lo = r.get(..dash)?.parse().ok()?;
            let r = r.get(dash + 1..)?;
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            Some((KeyText::Bucket(lo), r.get(end..)?))
        }
        KeyFormat::Hex => {
            let end = s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
            let v = u64::from_str_radix(s.get(..end)?, 16).ok()?;
            Some((KeyText::Num(v), s.get(end..)?))
        }
        KeyFormat::Sym { .. } => {
            let r = s.strip_prefix('[')?;
            let close = r.find(']')?;
            let addr = u64::from_str_radix(r.get(..close)?, 16).ok()?;
            let r = r.get(close + 1..)?.strip_prefix(' ')?;
            let (name, rest) = split_text(r, last, next)?;
            Some((
                KeyText::Sym {
                    addr,
                    name: name.trim_end().to_string(),
                },
                rest,
            ))
        }
        KeyFormat::Plain => {
            let t = s.trim_start();
            let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let after = t.get(end..)?;
            // %10llu is right-aligned: a number ends at ", " or " }"
            if end > 0 && (after.starts_with(", ") || after.starts_with(" }")) {
                return Some((KeyText::Num(t.get(..end)?.parse().ok()?), after));
            }
            // a string field: %-50s
            let (text, rest) = split_text(s, last, next)?;
            Some((KeyText::Str(text.trim_end().to_string()), rest))
        }
        KeyFormat::Stack => None,
    }
}

/// Split free text (a string key, a symbol) from what follows: the next
/// key's `, LABEL: ` or, for the last key, the line's last ` }`.
fn split_text<'a>(s: &'a str, last: bool, next: Option<&TriggerKey>) -> Option<(&'a str, &'a str)> {
    if last {
        let end = s.rfind(" }")?;
        return Some((s.get(..end)?, s.get(end..)?));
    }
    let next = next?;
    let name = next.spec.split('.').next().unwrap_or(&next.spec);
    let mut pat = String::new();
    let _ = write!(pat, ", {name}");
    let end = s.find(&pat)?;
    Some((s.get(..end)?, s.get(end..)?))
}

/// ` hitcount:          5  lat:      20474` → [(hitcount, 5), (lat, 20474)]
fn parse_vals(s: &str) -> Option<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once(':')?;
        let after = after.trim_start();
        let end = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        let v = after.get(..end)?.parse().ok()?;
        out.push((name.trim().to_string(), v));
        rest = after.get(end..)?.trim_start();
    }
    if out.first().is_none_or(|v| v.0 != "hitcount") {
        return None;
    }
    Some(out)
}

/// Write tables back in the kernel's format (`hist_show()`): the
/// round-trip of [`parse_hist`] for every key format but strings and
/// symbols that ended in spaces.
pub fn write_hist(tables: &[HistTable]) -> String {
    let mut out = String::new();
    for (n, t) in tables.iter().enumerate() {
        if n > 0 {
            out.push_str("\n\n");
        }
        let _ = write!(
            out,
            "# event histogram\n#\n# trigger info: {}\n#\n\n",
            t.trigger
        );
        for e in &t.entries {
            out.push_str("{ ");
            let mut multiline = false;
            for (i, ((label, v), key)) in e.keys.iter().zip(&t.keys).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = match (v, &key.format) {
                    (KeyText::Num(x), KeyFormat::Hex) => write!(out, "{label}: {x:x}"),
                    (KeyText::Num(x), _) => write!(out, "{label}: {x:>10}"),
                    (KeyText::Execname { comm, pid }, _) => {
                        write!(out, "{label}: {comm:<16}[{pid:>10}]")
                    }
                    (KeyText::Log2(x), _) => write!(out, "{label}: ~ 2^{x:<2}"),
                    (KeyText::Bucket(lo), KeyFormat::Buckets(n)) => {
                        write!(
                            out,
                            "{label}: ~ {lo}-{}",
                            lo.wrapping_add(*n).wrapping_sub(1)
                        )
                    }
                    (KeyText::Bucket(lo), _) => write!(out, "{label}: ~ {lo}-{lo}"),
                    (KeyText::Sym { addr, name }, KeyFormat::Sym { offset: true }) => {
                        write!(out, "{label}: [{addr:x}] {name:<55}")
                    }
                    (KeyText::Sym { addr, name }, _) => {
                        write!(out, "{label}: [{addr:x}] {name:<45}")
                    }
                    (KeyText::Syscall { name, nr }, _) => {
                        write!(out, "{label}: {name:<30}[{nr:>3}]")
                    }
                    (KeyText::Str(x), _) => write!(out, "{label}: {x:<50}"),
                    (KeyText::Stack(frames), _) => {
                        multiline = true;
                        let _ = writeln!(out, "{label}:");
                        for f in frames {
                            let _ = writeln!(out, "         {f}");
                        }
                        Ok(())
                    }
                };
            }
            if !multiline {
                out.push(' ');
            }
            out.push('}');
            for (i, (name, v)) in e.vals.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, " {name}: {v:>10}");
            }
            out.push('\n');
        }
        let _ = write!(
            out,
            "\nTotals:\n    Hits: {}\n    Entries: {}\n    Dropped: {}\n",
            t.hits, t.n_entries, t.dropped
        );
    }
    out
}

/// One line of `kprobe_profile`: event, hits, misses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileLine {
    /// The event's name (without group).
    pub event: String,
    /// Times the probe was hit.
    pub hits: u64,
    /// Missed hits; for a return probe, returns missed because maxactive
    /// instances were all in use.
    pub misses: u64,
}

/// Parse `kprobe_profile` (trace_kprobe.c `probes_profile_seq_show`:
/// `  %-44s %15lu %15lu`).
pub fn parse_kprobe_profile(text: &str) -> Result<Vec<ProfileLine>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(event), Some(hits), Some(misses), None) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(err(n + 1, "expected 'EVENT HITS MISSES'"));
        };
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| err(n + 1, format!("bad number '{s}'")))
        };
        out.push(ProfileLine {
            event: event.to_string(),
            hits: num(hits)?,
            misses: num(misses)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_key_formats() {
        let table: &[(&str, &[(&str, KeyFormat)])] = &[
            (
                "hist:keys=common_pid.execname:vals=hitcount:sort=hitcount.descending:size=2048 [active]",
                &[("common_pid.execname", KeyFormat::Execname)],
            ),
            (
                "hist:keys=lat1.log2:vals=hitcount,lat:sort=lat1.log2:size=2048 [active]",
                &[("lat1.log2", KeyFormat::Log2)],
            ),
            (
                "hist:keys=count.buckets=512:vals=hitcount,count:sort=count.buckets=512:size=2048 if fd == 0 [active]",
                &[("count.buckets=512", KeyFormat::Buckets(512))],
            ),
            (
                "hist:keys=fd,common_pid:vals=hitcount,count:sort=fd:size=2048 [active]",
                &[("fd", KeyFormat::Plain), ("common_pid", KeyFormat::Plain)],
            ),
            (
                "hist:keys=stacktrace:vals=hitcount [active]",
                &[("stacktrace", KeyFormat::Stack)],
            ),
            (
                "hist:keys=ret.hex,call_site.sym-offset,id.syscall",
                &[
                    ("ret.hex", KeyFormat::Hex),
                    ("call_site.sym-offset", KeyFormat::Sym { offset: true }),
                    ("id.syscall", KeyFormat::Syscall),
                ],
            ),
            (
                "hist:myname:keys=count+1:vals=hitcount [active]",
                &[("count+1", KeyFormat::Plain)],
            ),
        ];
        for (info, want) in table {
            let got = trigger_keys(info).unwrap();
            let got: Vec<(&str, KeyFormat)> = got
                .iter()
                .map(|k| (k.spec.as_str(), k.format.clone()))
                .collect();
            assert_eq!(&got, want, "{info}");
        }
        assert_eq!(trigger_keys("hist:vals=hitcount"), None);
        assert_eq!(trigger_keys("traceon"), None);
        assert_eq!(trigger_keys("hist:keys=:vals=hitcount"), None);
    }

    const EXEC: &str = "# event histogram
#
# trigger info: hist:keys=common_pid.execname,common_cpu:vals=hitcount:sort=hitcount.descending:size=2048 [active]
#

{ common_pid: dd              [       153], cpu:          1 } hitcount:        100
{ common_pid: kworker/u4:1-ev [        12], cpu:          0 } hitcount:          2

Totals:
    Hits: 102
    Entries: 2
    Dropped: 0
";

    #[test]
    fn execname_and_cpu() {
        let t = parse_hist(EXEC).unwrap();
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!((t.hits, t.n_entries, t.dropped), (102, 2, 0));
        assert_eq!(
            t.entries[1].keys,
            vec![
                (
                    "common_pid".to_string(),
                    KeyText::Execname {
                        comm: "kworker/u4:1-ev".into(),
                        pid: 12
                    }
                ),
                ("cpu".to_string(), KeyText::Num(0)),
            ]
        );
        assert_eq!(t.entries[0].vals, vec![("hitcount".to_string(), 100)]);
    }

    #[test]
    fn strings_symbols_and_hex() {
        let text =
            "# trigger info: hist:keys=path,ret.hex:vals=hitcount:sort=hitcount:size=2048 [active]

{ path: /etc/a, b: c                                      , ret: fffffff7 } hitcount:          3
{ path: x                                                 , ret: 0 } hitcount:          1

Totals:
    Hits: 4
    Entries: 2
    Dropped: 0


# event histogram
#
# trigger info: hist:keys=call_site.sym:vals=hitcount:sort=hitcount:size=2048 [active]
#

{ call_site: [ffffffff811e5a10] ksys_read                                     } hitcount:          9

Totals:
    Hits: 9
    Entries: 1
    Dropped: 7
";
        let t = parse_hist(text).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].entries[0].keys,
            vec![
                ("path".to_string(), KeyText::Str("/etc/a, b: c".into())),
                ("ret".to_string(), KeyText::Num(0xfffffff7)),
            ]
        );
        assert_eq!(t[0].entries[1].keys[0].1, KeyText::Str("x".into()));
        assert_eq!(
            t[1].entries[0].keys[0].1,
            KeyText::Sym {
                addr: 0xffffffff811e5a10,
                name: "ksys_read".into()
            }
        );
        assert_eq!(t[1].dropped, 7);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let table: &[&str] = &[
            "garbage",
            "# trigger info: hist:keys=a:vals=hitcount\n{ a: x } hitcount: 1\n",
            "# trigger info: hist:keys=a:vals=hitcount\n{ a:          1 } hitcount: 1\n",
            "# trigger info: hist:keys=a:vals=hitcount\n{ a:          1 } hits: 1\nTotals:\n    Hits: 1\n    Entries: 1\n    Dropped: 0\n",
            "# trigger info: hist:keys=a.log2:vals=hitcount\n{ a: ~ 2^x } hitcount: 1\n",
            "# trigger info: hist:keys=a.execname:vals=hitcount\n{ a: dd [ } hitcount: 1\n",
            "# trigger info: hist:keys=stacktrace:vals=hitcount\n{ stacktrace:\n  a+0x1/0x2\n",
            "# trigger info: hist:keys=a,stacktrace:vals=hitcount\n{ a:          1, stacktrace:\n  f\n} hitcount: 1\nTotals:\n    Hits: x\n",
            "# trigger info: hist:keys=a:vals=hitcount\nTotals:\n    Hits: 1\n",
        ];
        for text in table {
            assert!(parse_hist(text).is_err(), "{text}");
        }
        // multi-byte text where a comm is expected
        let t = "# trigger info: hist:keys=common_pid.execname:vals=hitcount\n{ common_pid: ééééééééé[ 1] } hitcount: 1\nTotals:\n Hits: 1\n Entries: 1\n Dropped: 0\n";
        let _ = parse_hist(t);
        assert_eq!(parse_hist("").unwrap(), vec![]);
    }

    #[test]
    fn kprobe_profile() {
        let text = "  rd                                                       552               0\n  nsret1                                                     1               3\n";
        assert_eq!(
            parse_kprobe_profile(text).unwrap(),
            vec![
                ProfileLine {
                    event: "rd".into(),
                    hits: 552,
                    misses: 0
                },
                ProfileLine {
                    event: "nsret1".into(),
                    hits: 1,
                    misses: 3
                },
            ]
        );
        assert!(parse_kprobe_profile("a b\n").is_err());
        assert!(parse_kprobe_profile("a 1 x\n").is_err());
    }
}
