//! Aggregation keys: what `--by KEY` names ([`KeySpec`]), the value a sample
//! yields for it ([`KeyValue`]), and a whole key ([`Key`], one value per
//! spec, in the order given).
//!
//! Built-in names are func, comm, pid, tid, cpu and stack; anything else is
//! a probe field, checked against the probe's fields by [`KeySpec::parse`].
//! This module does not decide which engine can compute a key; that is
//! [`crate::kernel`].

use crate::error::{Error, Result};
use crate::sample::{Sample, Value};
use std::fmt;

/// The type of a probe field, as far as aggregation cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Unsigned integer (u8..u64, x8..x64, symbol).
    Unsigned,
    /// Signed integer (s8..s64).
    Signed,
    /// String (string, ustring, symstr).
    String,
}

/// A probe field's name and kind: what validation needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    /// The field name as in the event's format.
    pub name: String,
    /// Its kind.
    pub kind: FieldKind,
}

impl FieldInfo {
    /// A field.
    pub fn new(name: &str, kind: FieldKind) -> Self {
        FieldInfo {
            name: name.to_string(),
            kind,
        }
    }
}

/// One `--by` key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeySpec {
    /// The probed function (one per event, or the function a wildcard hit).
    Func,
    /// The task name.
    Comm,
    /// The process id (tgid).
    Pid,
    /// The thread id.
    Tid,
    /// The CPU.
    Cpu,
    /// The stack recorded with the event.
    Stack,
    /// A probe field.
    Field(String),
    /// The probe's event name (without its group; a latency's is its
    /// entry probe's). Not a `--by` key: the Prometheus exposition adds it
    /// to every series, so each names the probe it counts.
    Probe,
}

impl KeySpec {
    /// Parse a key name; names that are not built in must be one of
    /// `fields` (the probe's fields) or the result is [`Error::UnknownKey`].
    pub fn parse(s: &str, event: &str, fields: &[FieldInfo]) -> Result<KeySpec> {
        Ok(match s {
            "func" => KeySpec::Func,
            "comm" => KeySpec::Comm,
            "pid" => KeySpec::Pid,
            "tid" => KeySpec::Tid,
            "cpu" => KeySpec::Cpu,
            "stack" => KeySpec::Stack,
            _ => {
                if fields.iter().any(|f| f.name == s) {
                    KeySpec::Field(s.to_string())
                } else {
                    return Err(Error::UnknownKey {
                        key: s.to_string(),
                        event: event.to_string(),
                        fields: field_list(fields),
                    });
                }
            }
        })
    }

    /// Parse several keys, refusing duplicates.
    pub fn parse_all(keys: &[String], event: &str, fields: &[FieldInfo]) -> Result<Vec<KeySpec>> {
        let mut out: Vec<KeySpec> = Vec::with_capacity(keys.len());
        for k in keys {
            let spec = KeySpec::parse(k, event, fields)?;
            if out.contains(&spec) {
                return Err(Error::DuplicateKey(k.clone()));
            }
            out.push(spec);
        }
        Ok(out)
    }

    /// The key's name, as in `--by` and in output headers.
    pub fn name(&self) -> &str {
        match self {
            KeySpec::Func => "func",
            KeySpec::Comm => "comm",
            KeySpec::Pid => "pid",
            KeySpec::Tid => "tid",
            KeySpec::Cpu => "cpu",
            KeySpec::Stack => "stack",
            KeySpec::Field(f) => f,
            KeySpec::Probe => "probe",
        }
    }

    /// The value of this key in `s`. `event_func` names the function when
    /// the sample does not (one probe per function).
    pub fn value_of(&self, s: &Sample<'_>) -> KeyValue {
        match self {
            KeySpec::Func => {
                KeyValue::Str(s.func.unwrap_or_else(|| event_name(s.event)).to_string())
            }
            KeySpec::Probe => KeyValue::Str(event_name(s.event).to_string()),
            KeySpec::Comm => KeyValue::Str(s.comm.to_string()),
            KeySpec::Pid => KeyValue::U64(u64::from(s.pid)),
            KeySpec::Tid => KeyValue::U64(u64::from(s.tid)),
            KeySpec::Cpu => KeyValue::U64(u64::from(s.cpu)),
            KeySpec::Stack => match s.stack {
                Some(frames) => KeyValue::Stack(frames.to_vec()),
                None => KeyValue::Missing,
            },
            KeySpec::Field(f) => match s.field(f) {
                Some(Value::U64(v)) => KeyValue::U64(v),
                Some(Value::S64(v)) => KeyValue::S64(v),
                Some(Value::Str(v)) => KeyValue::Str(v.to_string()),
                None => KeyValue::Missing,
            },
        }
    }
}

/// `GROUP/EVENT` → `EVENT`.
fn event_name(event: &str) -> &str {
    event.rsplit('/').next().unwrap_or(event)
}

fn field_list(fields: &[FieldInfo]) -> String {
    if fields.is_empty() {
        return "none".to_string();
    }
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The value of one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyValue {
    /// A number (pid, tid, cpu, unsigned field).
    U64(u64),
    /// A signed field.
    S64(i64),
    /// A string (func, comm, string field).
    Str(String),
    /// A stack, innermost frame first.
    Stack(Vec<String>),
    /// The sample has no such field or no stack.
    Missing,
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyValue::U64(v) => write!(f, "{v}"),
            KeyValue::S64(v) => write!(f, "{v}"),
            KeyValue::Str(s) => f.write_str(s),
            KeyValue::Stack(frames) => f.write_str(&frames.join(";")),
            KeyValue::Missing => f.write_str("-"),
        }
    }
}

/// A whole key: one value per [`KeySpec`], in the order of the specs.
pub type Key = Vec<KeyValue>;

/// The key of `s` under `specs`.
pub fn key_of(specs: &[KeySpec], s: &Sample<'_>) -> Key {
    specs.iter().map(|k| k.value_of(s)).collect()
}

/// Makes `key` the key of `s` under `specs`, reusing its allocations (a
/// string value keeps its buffer): what [`key_of`] gives, without
/// allocating per sample once `key` has held a value of each kind.
pub fn fill_key(specs: &[KeySpec], s: &Sample<'_>, key: &mut Key) {
    key.resize(specs.len(), KeyValue::Missing);
    for (spec, slot) in specs.iter().zip(key.iter_mut()) {
        let text = match spec {
            KeySpec::Func => Some(s.func.unwrap_or_else(|| event_name(s.event))),
            KeySpec::Probe => Some(event_name(s.event)),
            KeySpec::Comm => Some(s.comm),
            KeySpec::Field(f) => match s.field(f) {
                Some(Value::Str(v)) => Some(v),
                _ => None,
            },
            _ => None,
        };
        match (text, slot) {
            (Some(t), KeyValue::Str(buf)) => {
                buf.clear();
                buf.push_str(t);
            }
            (_, slot) => *slot = spec.value_of(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<FieldInfo> {
        vec![
            FieldInfo::new("count", FieldKind::Unsigned),
            FieldInfo::new("path", FieldKind::String),
        ]
    }

    #[test]
    fn parse_names_and_fields() {
        let f = fields();
        let table: &[(&str, Option<KeySpec>)] = &[
            ("func", Some(KeySpec::Func)),
            ("comm", Some(KeySpec::Comm)),
            ("pid", Some(KeySpec::Pid)),
            ("tid", Some(KeySpec::Tid)),
            ("cpu", Some(KeySpec::Cpu)),
            ("stack", Some(KeySpec::Stack)),
            ("count", Some(KeySpec::Field("count".into()))),
            ("path", Some(KeySpec::Field("path".into()))),
            ("nope", None),
            ("", None),
            ("Comm", None),
        ];
        for (s, want) in table {
            let got = KeySpec::parse(s, "ktrace/rd", &f).ok();
            assert_eq!(&got, want, "{s}");
        }
    }

    #[test]
    fn unknown_key_lists_fields() {
        let e = KeySpec::parse("size", "ktrace/rd", &fields())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unknown key 'size': not a field of ktrace/rd (fields: count, path)"
        );
    }

    #[test]
    fn duplicate_keys_refused() {
        let e = KeySpec::parse_all(&["comm".into(), "comm".into()], "e", &[]).unwrap_err();
        assert_eq!(e.to_string(), "key 'comm' given twice");
    }

    #[test]
    fn values_of_a_sample() {
        let stack = vec!["a+0x1/0x10".to_string(), "b+0x2/0x20".to_string()];
        let fields = [
            ("count", Value::U64(7)),
            ("ret", Value::S64(-9)),
            ("path", Value::Str("/x")),
        ];
        let s = Sample {
            ts_ns: 1,
            cpu: 3,
            pid: 10,
            tid: 11,
            comm: "dd",
            event: "ktrace/ksys_read",
            func: None,
            stack: Some(&stack),
            fields: &fields,
        };
        let specs = [
            KeySpec::Func,
            KeySpec::Comm,
            KeySpec::Pid,
            KeySpec::Tid,
            KeySpec::Cpu,
            KeySpec::Stack,
            KeySpec::Field("count".into()),
            KeySpec::Field("ret".into()),
            KeySpec::Field("path".into()),
            KeySpec::Field("gone".into()),
        ];
        assert_eq!(
            key_of(&specs, &s),
            vec![
                KeyValue::Str("ksys_read".into()),
                KeyValue::Str("dd".into()),
                KeyValue::U64(10),
                KeyValue::U64(11),
                KeyValue::U64(3),
                KeyValue::Stack(stack.clone()),
                KeyValue::U64(7),
                KeyValue::S64(-9),
                KeyValue::Str("/x".into()),
                KeyValue::Missing,
            ]
        );
        let with_func = Sample {
            func: Some("vfs_read"),
            stack: None,
            ..s
        };
        assert_eq!(
            KeySpec::Func.value_of(&with_func),
            KeyValue::Str("vfs_read".into())
        );
        assert_eq!(KeySpec::Stack.value_of(&with_func), KeyValue::Missing);
    }

    #[test]
    fn fill_key_reuses_and_equals_key_of() {
        let stack = vec!["a+0x1/0x10".to_string()];
        let a = [("path", Value::Str("/a/long/path")), ("n", Value::U64(1))];
        let b = [("path", Value::U64(5)), ("n", Value::Str("x"))];
        let c = [("n", Value::S64(-2))];
        let base = Sample {
            ts_ns: 1,
            cpu: 0,
            pid: 1,
            tid: 1,
            comm: "swapper",
            event: "g/vfs_open",
            func: None,
            stack: None,
            fields: &a,
        };
        let specs = [
            KeySpec::Comm,
            KeySpec::Field("path".into()),
            KeySpec::Field("n".into()),
            KeySpec::Func,
            KeySpec::Stack,
        ];
        // values change kind between samples; the scratch key must follow
        let samples = [
            base,
            Sample {
                comm: "dd",
                fields: &b,
                func: Some("f"),
                stack: Some(&stack),
                ..base
            },
            Sample {
                comm: "a-much-longer-comm",
                fields: &c,
                ..base
            },
            base,
        ];
        let mut scratch = vec![KeyValue::U64(9); 7];
        for s in &samples {
            fill_key(&specs, s, &mut scratch);
            assert_eq!(scratch, key_of(&specs, s));
        }
        let mut short = Key::new();
        fill_key(&specs[..1], &samples[1], &mut short);
        assert_eq!(short, vec![KeyValue::Str("dd".into())]);
    }
}
