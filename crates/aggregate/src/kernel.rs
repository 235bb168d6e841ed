//! The kernel engine's text: which hist-trigger features the running kernel
//! has ([`Features`], read from its tracefs README, never from the version),
//! the trigger commands and synthetic events that make the kernel count,
//! bucket and time by itself ([`plan_count`], [`plan_hist`],
//! [`plan_latency`], [`plan_latencies`] for several functions sharing
//! their tables), and the mapping of its `hist` tables back into the
//! same reports the user engine makes ([`CountPlan::report`], ...).
//!
//! Mirrors Documentation/trace/histogram.rst and trace_events_hist.c. What
//! the kernel cannot do comes back as [`Unsupported`] with the reason (the
//! caller then uses the user engine); bad user input is an [`Error`]. This
//! module writes nothing: the binary installs [`KernelPlan::setup`] in
//! order through ktrace-tracefs and removes [`KernelPlan::teardown`] in
//! order (triggers with the very text that installed them — the kernel's
//! readback such as `sort=lat1.log2` is not accepted back — then the
//! synthetic events, which stay busy while a trigger refers to them).
//!
//! Measured on Debian's 6.1 (fixtures/guest-x86_64-6.1): hist triggers run
//! as soon as they are installed, whether or not the event is enabled (the
//! event is soft-enabled), so install the triggers when counting should
//! start; `sort=FIELD.log2` is refused (a sort key takes no modifier); a
//! constant cannot be added to a timestamp with units (`.usecs`) nor to a
//! variable holding one, but a plain u64 field of a synthetic event takes
//! it; `common_timestamp-$ts0+1` (nanoseconds) is `(a - b) + 1`.

use crate::agg::{CountReport, HistReport, LatencyReport};
use crate::error::{Error, Result};
use crate::hist::{Histogram, Scale, Unit};
use crate::key::{FieldInfo, FieldKind, Key, KeySpec, KeyValue};
use crate::khist::{HistEntry, HistTable, KeyText};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

mod latency;
pub use latency::{
    ChainDrops, LatencyPlan, LatencyProbe, MIN_BASE, TableRef, plan_latencies, plan_latency,
};

/// Hist-trigger features of the running kernel, from its tracefs README:
/// ktrace-tracefs parses it (the README's one parser), this crate plans
/// with it.
pub use ktrace_tracefs::features::HistFeatures as Features;

/// Why the kernel engine cannot do what was asked (use the user engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The reason, lowercase, for the user.
    pub reason: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

fn unsupported<T>(reason: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported {
        reason: reason.into(),
    })
}

/// One hist trigger command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistCommand {
    /// `keys=`, in order.
    pub keys: Vec<String>,
    /// Variables, `name=expr` (written as one `:a=..,b=..` group).
    pub vars: Vec<String>,
    /// `vals=` (empty: the kernel's implicit hitcount).
    pub vals: Vec<String>,
    /// `sort=` (no modifiers: the kernel refuses them).
    pub sort: Vec<String>,
    /// `size=`, a power of two.
    pub size: Option<u32>,
    /// Handlers with actions, e.g. `onmatch(G.E).trace(S,$lat)`.
    pub actions: Vec<String>,
    /// ` if FILTER`.
    pub filter: Option<String>,
}

impl fmt::Display for HistCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hist:keys={}", self.keys.join(","))?;
        if !self.vars.is_empty() {
            write!(f, ":{}", self.vars.join(","))?;
        }
        if !self.vals.is_empty() {
            write!(f, ":vals={}", self.vals.join(","))?;
        }
        if !self.sort.is_empty() {
            write!(f, ":sort={}", self.sort.join(","))?;
        }
        if let Some(n) = self.size {
            write!(f, ":size={n}")?;
        }
        for a in &self.actions {
            write!(f, ":{a}")?;
        }
        if let Some(flt) = &self.filter {
            write!(f, " if {flt}")?;
        }
        Ok(())
    }
}

/// One write of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Append to `dynamic_events` (or, without `s:` support, the bare
    /// definition to `synthetic_events`): a synthetic event.
    Synthetic {
        /// The event's name (its system is `synthetic`).
        name: String,
        /// Its fields, `u64 lat; u64 lat1`.
        fields: String,
    },
    /// Append `command` to `events/SYSTEM/EVENT/trigger` in our instance.
    Trigger {
        /// The event's system (group).
        system: String,
        /// The event.
        event: String,
        /// The command.
        command: String,
    },
}

impl Step {
    /// The text to write to install this step: for a synthetic event the
    /// `dynamic_events` line (`s:NAME FIELDS`), or with `file` true the
    /// `synthetic_events` line.
    pub fn install_text(&self, file: bool) -> String {
        match self {
            Step::Synthetic { name, fields } if file => format!("{name} {fields}"),
            Step::Synthetic { name, fields } => format!("s:{name} {fields}"),
            Step::Trigger { command, .. } => command.clone(),
        }
    }

    /// The text to write to undo this step: `-:synthetic/NAME` (or
    /// `!NAME` to `synthetic_events`), `!COMMAND` to the trigger file.
    pub fn remove_text(&self, file: bool) -> String {
        match self {
            Step::Synthetic { name, .. } if file => format!("!{name}"),
            Step::Synthetic { name, .. } => format!("-:synthetic/{name}"),
            Step::Trigger { command, .. } => format!("!{command}"),
        }
    }
}

/// What to write, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelPlan {
    /// Install in this order.
    pub setup: Vec<Step>,
}

impl KernelPlan {
    /// Remove in this order (the reverse of setup: triggers before the
    /// synthetic events they feed or read).
    pub fn teardown(&self) -> Vec<Step> {
        self.setup.iter().rev().cloned().collect()
    }
}

/// One probe event the kernel engine aggregates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeEvent {
    /// Its system (ktrace's group).
    pub system: String,
    /// Its name.
    pub event: String,
    /// The function it probes (the `func` key).
    pub func: String,
    /// Its fields.
    pub fields: Vec<FieldInfo>,
    /// A uprobe (the kernel's `stacktrace` key is the kernel stack).
    pub user: bool,
}

/// Table size used for every trigger (a power of two; the kernel allows
/// 2^7..2^17). Entries beyond it are counted as Dropped.
pub const TABLE_SIZE: u32 = 8192;

/// How a report key is read from a kernel table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Func,
    Probe,
    Comm(usize),
    Num(usize, FieldKind),
    Text(usize),
    Stack(usize),
}

/// The kernel keys for `specs` and how to read them back.
fn kernel_keys(
    specs: &[KeySpec],
    ev: &ProbeEvent,
    f: &Features,
    latency: bool,
) -> Result<(Vec<String>, Vec<Slot>), Unsupported> {
    let mut keys: Vec<String> = Vec::new();
    let mut slots = Vec::new();
    let pid_key = if specs.contains(&KeySpec::Comm) {
        "common_pid.execname"
    } else {
        "common_pid"
    };
    let index_of = |k: &str, keys: &mut Vec<String>| match keys.iter().position(|x| x == k) {
        Some(i) => i,
        None => {
            keys.push(k.to_string());
            keys.len() - 1
        }
    };
    for s in specs {
        let slot = match s {
            KeySpec::Func => Slot::Func,
            KeySpec::Probe => Slot::Probe,
            KeySpec::Comm => Slot::Comm(index_of(pid_key, &mut keys)),
            KeySpec::Tid => Slot::Num(index_of(pid_key, &mut keys), FieldKind::Unsigned),
            KeySpec::Pid => {
                return unsupported(
                    "the kernel's hist keys have the thread id (common_pid), not the process id: use --by tid, or the user engine",
                );
            }
            KeySpec::Cpu if latency => {
                return unsupported(
                    "the kernel engine times at the return, so its cpu is the return's: the user engine keys latency by the entry's cpu",
                );
            }
            KeySpec::Cpu => Slot::Num(
                index_of(if f.common_cpu { "common_cpu" } else { "cpu" }, &mut keys),
                FieldKind::Unsigned,
            ),
            KeySpec::Stack if latency => {
                return unsupported("latency by stack needs the user engine");
            }
            KeySpec::Stack if ev.user => {
                return unsupported(
                    "the kernel's stacktrace key is the kernel stack; a user stack needs the user engine",
                );
            }
            KeySpec::Stack if !f.stacktrace => {
                return unsupported("this kernel has no stacktrace hist key");
            }
            KeySpec::Stack => Slot::Stack(index_of("stacktrace", &mut keys)),
            KeySpec::Field(name) if latency => {
                return unsupported(format!(
                    "latency by the probe field '{name}' needs the user engine"
                ));
            }
            KeySpec::Field(name) => {
                let kind = ev
                    .fields
                    .iter()
                    .find(|x| &x.name == name)
                    .map_or(FieldKind::Unsigned, |x| x.kind);
                let i = index_of(name, &mut keys);
                if kind == FieldKind::String {
                    Slot::Text(i)
                } else {
                    Slot::Num(i, kind)
                }
            }
        };
        slots.push(slot);
    }
    // a stacktrace key must come last (it is printed over several lines)
    if let Some(p) = keys.iter().position(|k| k == "stacktrace") {
        let last = keys.len() - 1;
        if p != last {
            keys.swap(p, last);
            for s in &mut slots {
                match s {
                    Slot::Comm(i) | Slot::Num(i, _) | Slot::Text(i) | Slot::Stack(i) if *i == p => {
                        *i = last
                    }
                    Slot::Comm(i) | Slot::Num(i, _) | Slot::Text(i) | Slot::Stack(i)
                        if *i == last =>
                    {
                        *i = p
                    }
                    _ => {}
                }
            }
        }
    }
    Ok((keys, slots))
}

fn check_hist(f: &Features) -> Result<(), Unsupported> {
    if !f.hist {
        return unsupported("this kernel has no hist triggers (CONFIG_HIST_TRIGGERS)");
    }
    Ok(())
}

fn read_key(
    slots: &[Slot],
    table_keys: &[(String, KeyText)],
    func: &str,
    probe: &str,
) -> Option<Key> {
    slots
        .iter()
        .map(|s| {
            Some(match s {
                Slot::Func => KeyValue::Str(func.to_string()),
                Slot::Probe => KeyValue::Str(probe.to_string()),
                Slot::Comm(i) => match &table_keys.get(*i)?.1 {
                    KeyText::Execname { comm, .. } => KeyValue::Str(comm.clone()),
                    _ => return None,
                },
                Slot::Num(i, kind) => match &table_keys.get(*i)?.1 {
                    KeyText::Num(v) | KeyText::Execname { pid: v, .. } => num_key(*v, *kind),
                    _ => return None,
                },
                Slot::Text(i) => match &table_keys.get(*i)?.1 {
                    KeyText::Str(v) => KeyValue::Str(v.clone()),
                    _ => return None,
                },
                Slot::Stack(i) => match &table_keys.get(*i)?.1 {
                    KeyText::Stack(v) => KeyValue::Stack(v.clone()),
                    _ => return None,
                },
            })
        })
        .collect()
}

fn num_key(v: u64, kind: FieldKind) -> KeyValue {
    match kind {
        FieldKind::Signed => KeyValue::S64(v as i64),
        _ => KeyValue::U64(v),
    }
}

fn num_value(v: u64, kind: FieldKind) -> i128 {
    match kind {
        FieldKind::Signed => i128::from(v as i64),
        _ => i128::from(v),
    }
}

fn table_error(t: &HistTable, msg: &str) -> Error {
    Error::HistParse {
        line: 0,
        msg: crate::error::HistMsg(format!("{msg} (trigger {})", t.trigger)),
    }
}

/// The kernel engine's count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountPlan {
    /// What to write.
    pub plan: KernelPlan,
    /// Per probe event (in the order given): its system, event and
    /// function; read `events/SYSTEM/EVENT/hist` of each.
    pub events: Vec<(String, String, String)>,
    keys: Vec<String>,
    slots: Vec<Slot>,
}

/// Count hits of `events` by `keys`, in the kernel.
pub fn plan_count(
    events: &[ProbeEvent],
    keys: &[KeySpec],
    f: &Features,
    filter: Option<&str>,
) -> Result<CountPlan, Unsupported> {
    check_hist(f)?;
    let mut plan = KernelPlan::default();
    let mut slots = Vec::new();
    for ev in events {
        let (mut kk, s) = kernel_keys(keys, ev, f, false)?;
        if kk.is_empty() {
            // a total: key by thread, summed back
            kk.push("common_pid".to_string());
        }
        if kk.len() > f.max_keys {
            return unsupported(format!(
                "the kernel's compound keys have at most {} fields",
                f.max_keys
            ));
        }
        slots = s;
        let cmd = HistCommand {
            keys: kk,
            vals: vec!["hitcount".into()],
            sort: vec!["hitcount.descending".into()],
            size: Some(TABLE_SIZE),
            filter: filter.map(str::to_string),
            ..Default::default()
        };
        plan.setup.push(Step::Trigger {
            system: ev.system.clone(),
            event: ev.event.clone(),
            command: cmd.to_string(),
        });
    }
    Ok(CountPlan {
        plan,
        events: events
            .iter()
            .map(|e| (e.system.clone(), e.event.clone(), e.func.clone()))
            .collect(),
        keys: keys.iter().map(|k| k.name().to_string()).collect(),
        slots,
    })
}

/// What tells one of our triggers from another on the same event: its
/// keys, values and handlers (`onmax($m)`, `onmatch(...)`), as written
/// or as the kernel prints them back (which adds `vals=hitcount`, `sort`,
/// `size`, `clock`, `[active]`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signature {
    keys: Vec<String>,
    vals: Vec<String>,
    handlers: Vec<String>,
}

fn signature(text: &str) -> Option<Signature> {
    let keys = crate::khist::trigger_keys(text)?
        .into_iter()
        .map(|k| {
            if k.spec == "cpu" {
                "common_cpu".to_string()
            } else {
                k.spec
            }
        })
        .collect();
    let body = text.split(" if ").next().unwrap_or(text);
    let body = body
        .trim_end()
        .trim_end_matches("[active]")
        .trim_end_matches("[paused]");
    let mut vals = vec!["hitcount".to_string()];
    let mut handlers = Vec::new();
    for part in body.trim_end().split(':') {
        if let Some(v) = part.strip_prefix("vals=") {
            vals = v.split(',').map(str::to_string).collect();
            if !vals.iter().any(|v| v == "hitcount") {
                vals.insert(0, "hitcount".into());
            }
        } else if ["onmax(", "onmatch(", "onchange("]
            .iter()
            .any(|h| part.starts_with(h))
        {
            handlers.push(part.split(')').next().unwrap_or(part).to_string());
        }
    }
    Some(Signature {
        keys,
        vals,
        handlers,
    })
}

/// The table of ours in a `hist` file's tables: the one with the
/// command's keys (the readback may add `:size`, modifiers on sort,
/// `[active]`); where several have them, the one that also has its
/// values and handlers.
pub fn find_table<'a>(tables: &'a [HistTable], command: &str) -> Option<&'a HistTable> {
    let want = signature(command)?;
    let mut same_keys = tables
        .iter()
        .filter(|t| signature(&t.trigger).is_some_and(|s| s.keys == want.keys));
    let first = same_keys.next()?;
    if signature(&first.trigger).as_ref() == Some(&want) {
        return Some(first);
    }
    same_keys
        .find(|t| signature(&t.trigger).as_ref() == Some(&want))
        .or(Some(first))
}

/// Whether the trigger installed by `command` is still there, as the
/// event's `trigger` file lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerState {
    /// Listed and `[active]` (or listed without a state).
    Active,
    /// Listed `[paused]`: it counts nothing.
    Paused,
    /// Not listed: removed.
    Missing,
}

/// The state of our trigger `command` in the text of a `trigger` file.
pub fn trigger_state(trigger_file: &str, command: &str) -> TriggerState {
    let Some(want) = signature(command) else {
        return TriggerState::Missing;
    };
    let filter = command.split_once(" if ").map(|(_, f)| f.trim());
    for line in trigger_file.lines() {
        if line.starts_with('#') || signature(line).as_ref() != Some(&want) {
            continue;
        }
        // the same keys, values and handlers with another condition is
        // someone else's (or a leftover): ours has our filter
        let theirs = line.split_once(" if ").map(|(_, f)| {
            f.trim()
                .trim_end_matches("[active]")
                .trim_end_matches("[paused]")
                .trim()
        });
        if filter.is_some() && theirs != filter {
            continue;
        }
        return if line.trim_end().ends_with("[paused]") {
            TriggerState::Paused
        } else {
            TriggerState::Active
        };
    }
    TriggerState::Missing
}

impl CountPlan {
    /// The report from each event's table (in [`CountPlan::events`] order).
    pub fn report(&self, tables: &[&HistTable]) -> Result<CountReport> {
        let mut rows = Vec::new();
        let mut dropped = 0;
        for (t, (_, event, func)) in tables.iter().zip(&self.events) {
            dropped += t.dropped;
            for e in &t.entries {
                let key = read_key(&self.slots, &e.keys, func, event)
                    .ok_or_else(|| table_error(t, "keys do not match the plan"))?;
                rows.push((key, e.hitcount()));
            }
        }
        let mut r = CountReport::new(self.keys.clone(), rows);
        r.dropped = dropped;
        Ok(r)
    }
}

/// Check that `field` is a numeric field of the probe: the field's kind, or
/// [`Error::UnknownField`] / [`Error::StringField`].
pub fn check_hist_field(field: &str, event: &str, fields: &[FieldInfo]) -> Result<FieldKind> {
    match fields.iter().find(|f| f.name == field) {
        None => Err(Error::UnknownField {
            field: field.to_string(),
            event: event.to_string(),
            fields: if fields.is_empty() {
                "none".into()
            } else {
                fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        }),
        Some(f) if f.kind == FieldKind::String => Err(Error::StringField {
            field: field.to_string(),
        }),
        Some(f) => Ok(f.kind),
    }
}

/// How the kernel buckets a field histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKey {
    /// Key on the raw value; bucket here (exact count, sum, min, max).
    Raw,
    /// `.buckets=STEP` with the value summed (count and sum exact, extremes
    /// unknown).
    Buckets(u64),
    /// `.log2` of `lat1` = `lat + 1`, `lat` summed.
    Log2Shifted,
}

/// The kernel engine's histogram of a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistPlan {
    /// What to write.
    pub plan: KernelPlan,
    /// The event whose `hist` to read (system, event).
    pub read: (String, String),
    /// With `prometheus` and linear buckets, a table keyed on the raw
    /// value (Prometheus gets power-of-two buckets, bucketed here, on
    /// its fixed ladder; distinct values beyond the table are dropped
    /// and counted); else Prometheus reads the main table.
    pub prom: Option<TableRef>,
    value: String,
    kind: FieldKind,
    mode: ValueKey,
    scale: Scale,
    func: String,
    keys: Vec<String>,
    slots: Vec<Slot>,
}

/// Histogram of `field` of `ev` by `keys`, in the kernel. Power-of-two
/// buckets key on the raw value (the kernel's `.log2` rounds up, and
/// negative values become 2^64) and bucket here; linear buckets use
/// `.buckets=STEP` on unsigned fields where the README offers it.
pub fn plan_hist(
    ev: &ProbeEvent,
    field: &str,
    scale: Scale,
    keys: &[KeySpec],
    f: &Features,
    prometheus: bool,
) -> Result<Result<HistPlan, Unsupported>> {
    let kind = check_hist_field(field, &format!("{}/{}", ev.system, ev.event), &ev.fields)?;
    Ok(plan_hist_checked(
        ev, field, kind, scale, keys, f, prometheus,
    ))
}

fn plan_hist_checked(
    ev: &ProbeEvent,
    field: &str,
    kind: FieldKind,
    scale: Scale,
    keys: &[KeySpec],
    f: &Features,
    prometheus: bool,
) -> Result<HistPlan, Unsupported> {
    check_hist(f)?;
    let (mut kk, slots) = kernel_keys(keys, ev, f, false)?;
    let raw_keys = {
        let mut k = kk.clone();
        let at = if k.last().is_some_and(|k| k == "stacktrace") {
            k.len() - 1
        } else {
            k.len()
        };
        k.insert(at, field.to_string());
        k
    };
    let mode = match scale {
        Scale::Linear { step } if f.buckets && kind == FieldKind::Unsigned => {
            ValueKey::Buckets(step)
        }
        _ => ValueKey::Raw,
    };
    let value_key = match mode {
        ValueKey::Buckets(step) => format!("{field}.buckets={step}"),
        _ => field.to_string(),
    };
    // the value key goes before a stacktrace key (which must be last)
    let at = if kk.last().is_some_and(|k| k == "stacktrace") {
        kk.len() - 1
    } else {
        kk.len()
    };
    kk.insert(at, value_key);
    let slots = slots
        .into_iter()
        .map(|s| match s {
            Slot::Stack(i) => Slot::Stack(i + 1),
            s => s,
        })
        .collect();
    if kk.len() > f.max_keys {
        return unsupported(format!(
            "the kernel's compound keys have at most {} fields, the value included",
            f.max_keys
        ));
    }
    let cmd = HistCommand {
        keys: kk,
        vals: vec!["hitcount".into(), field.to_string()],
        size: Some(TABLE_SIZE),
        ..Default::default()
    };
    let prom = (prometheus && mode != ValueKey::Raw).then(|| TableRef {
        system: ev.system.clone(),
        event: ev.event.clone(),
        command: HistCommand {
            keys: raw_keys,
            vals: vec!["hitcount".into(), field.to_string()],
            size: Some(TABLE_SIZE),
            ..Default::default()
        }
        .to_string(),
    });
    let mut setup = vec![Step::Trigger {
        system: ev.system.clone(),
        event: ev.event.clone(),
        command: cmd.to_string(),
    }];
    setup.extend(prom.iter().map(|t| Step::Trigger {
        system: t.system.clone(),
        event: t.event.clone(),
        command: t.command.clone(),
    }));
    Ok(HistPlan {
        plan: KernelPlan { setup },
        read: (ev.system.clone(), ev.event.clone()),
        prom,
        value: field.to_string(),
        kind,
        mode,
        scale,
        func: ev.func.clone(),
        keys: keys.iter().map(|k| k.name().to_string()).collect(),
        slots,
    })
}

/// The position of the value key among the table's keys: `at`, or 0 when
/// there is no key before it.
fn value_at(slots: &[Slot]) -> usize {
    let mut n = 0;
    for s in slots {
        match s {
            Slot::Comm(i) | Slot::Num(i, _) | Slot::Text(i) => n = n.max(i + 1),
            _ => {}
        }
    }
    n
}

#[allow(clippy::too_many_arguments)]
fn hist_groups(
    t: &HistTable,
    slots: &[Slot],
    func: &str,
    probe: &str,
    mode: ValueKey,
    kind: FieldKind,
    value: &str,
    scale: Scale,
) -> Result<Vec<(Key, Histogram)>> {
    let at = value_at(slots);
    let mut out = Vec::new();
    for e in &t.entries {
        let key = read_key(slots, &e.keys, func, probe)
            .ok_or_else(|| table_error(t, "keys do not match the plan"))?;
        let v = e.keys.get(at).map(|k| &k.1);
        let sum = e.val(value).map(|s| num_value(s, kind));
        let mut h = Histogram::new(scale);
        match (mode, v, sum) {
            (ValueKey::Raw, Some(KeyText::Num(v)), _) => {
                h.record_n(num_value(*v, kind), e.hitcount())
            }
            (ValueKey::Buckets(step), Some(KeyText::Bucket(lo)), Some(sum)) => {
                h.add_bucket(i128::from(*lo / step.max(1)), e.hitcount(), sum);
            }
            (ValueKey::Log2Shifted, Some(KeyText::Log2(exp)), Some(sum)) => {
                h.add_kernel_log2(*exp, e.hitcount(), sum)
            }
            _ => return Err(table_error(t, "value key does not match the plan")),
        }
        out.push((key, h));
    }
    Ok(out)
}

impl HistPlan {
    /// The trigger command of the table the text reports read.
    pub fn main_command(&self) -> Option<&str> {
        self.plan.setup.iter().find_map(|s| match s {
            Step::Trigger { command, .. } => Some(command.as_str()),
            Step::Synthetic { .. } => None,
        })
    }

    /// The report for Prometheus from its table ([`HistPlan::prom`], else
    /// the main one): keyed by probe and function first, in power-of-two
    /// buckets.
    pub fn prom_report(&self, t: &HistTable) -> Result<HistReport> {
        let (slots, keys) = func_first(&self.slots, &self.keys);
        let mode = if self.prom.is_some() {
            ValueKey::Raw
        } else {
            self.mode
        };
        let mut r = HistReport::new(&self.value, None, Scale::Log2, keys);
        r.set_groups(hist_groups(
            t,
            &slots,
            &self.func,
            &self.read.1,
            mode,
            self.kind,
            &self.value,
            Scale::Log2,
        )?);
        r.dropped = t.dropped;
        Ok(r)
    }

    /// The report from the event's table.
    pub fn report(&self, t: &HistTable) -> Result<HistReport> {
        let mut r = HistReport::new(&self.value, None, self.scale, self.keys.clone());
        r.set_groups(hist_groups(
            t,
            &self.slots,
            &self.func,
            &self.read.1,
            self.mode,
            self.kind,
            &self.value,
            self.scale,
        )?);
        r.dropped = t.dropped;
        Ok(r)
    }
}

/// `slots`/`keys` with the probe first, then the function (unless
/// already there), as [`crate::report::prom_keys`] orders the user
/// engine's: the Prometheus series always say which probe and function
/// they are about.
fn func_first(slots: &[Slot], keys: &[String]) -> (Vec<Slot>, Vec<String>) {
    let mut s = vec![Slot::Probe];
    let mut k = vec!["probe".to_string()];
    if !keys.iter().any(|k| k == "func") {
        s.push(Slot::Func);
        k.push("func".to_string());
    }
    s.extend(slots.iter().cloned());
    k.extend(keys.iter().cloned());
    (s, k)
}

impl CountPlan {
    /// The same plan reading its tables keyed by function first (for
    /// Prometheus, whose series always name their function).
    pub fn by_func(&self) -> CountPlan {
        let (slots, keys) = func_first(&self.slots, &self.keys);
        CountPlan {
            slots,
            keys,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const README_6_1: &str = include_str!("../fixtures/guest-x86_64-6.1/README.txt");

    #[test]
    fn features_of_6_1() {
        let f = Features::from_readme(README_6_1);
        assert_eq!(
            f,
            Features {
                hist: true,
                buckets: true,
                common_cpu: true,
                constants: true,
                synthetic_dynamic: true,
                synthetic_file: true,
                onmatch_trace: true,
                stacktrace: true,
                max_keys: 2,
            }
        );
    }

    #[test]
    fn features_without_hist_triggers() {
        // the host's README (6.18, no CONFIG_HIST_TRIGGERS)
        let host = include_str!("../../tracefs/fixtures/README.6.18.txt");
        let f = Features::from_readme(host);
        assert!(!f.hist, "{f:?}");
        assert_eq!(f.max_keys, 0);
        let ev = probe(&[]);
        let e = plan_count(&[ev], &[KeySpec::Comm], &f, None).unwrap_err();
        assert_eq!(
            e.reason,
            "this kernel has no hist triggers (CONFIG_HIST_TRIGGERS)"
        );
    }

    fn probe(fields: &[(&str, FieldKind)]) -> ProbeEvent {
        ProbeEvent {
            system: "ktrace".into(),
            event: "ksys_read".into(),
            func: "ksys_read".into(),
            fields: fields.iter().map(|(n, k)| FieldInfo::new(n, *k)).collect(),
            user: false,
        }
    }

    fn f61() -> Features {
        Features::from_readme(README_6_1)
    }

    #[test]
    fn count_commands() {
        let ev = probe(&[("fd", FieldKind::Signed), ("path", FieldKind::String)]);
        let table: &[(&[KeySpec], &str)] = &[
            (
                &[KeySpec::Comm],
                "hist:keys=common_pid.execname:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[],
                "hist:keys=common_pid:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[KeySpec::Func],
                "hist:keys=common_pid:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[KeySpec::Tid, KeySpec::Comm],
                "hist:keys=common_pid.execname:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[KeySpec::Comm, KeySpec::Cpu],
                "hist:keys=common_pid.execname,common_cpu:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[KeySpec::Stack, KeySpec::Field("fd".into())],
                "hist:keys=fd,stacktrace:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
            (
                &[KeySpec::Field("path".into())],
                "hist:keys=path:vals=hitcount:sort=hitcount.descending:size=8192",
            ),
        ];
        for (keys, want) in table {
            let p = plan_count(std::slice::from_ref(&ev), keys, &f61(), None).unwrap();
            assert_eq!(
                p.plan.setup,
                vec![Step::Trigger {
                    system: "ktrace".into(),
                    event: "ksys_read".into(),
                    command: want.to_string()
                }],
                "{keys:?}"
            );
            assert_eq!(p.plan.teardown()[0].remove_text(false), format!("!{want}"));
        }
        let p = plan_count(&[ev], &[KeySpec::Comm], &f61(), Some("fd == 0")).unwrap();
        assert_eq!(
            p.plan.setup[0].install_text(false),
            "hist:keys=common_pid.execname:vals=hitcount:sort=hitcount.descending:size=8192 if fd == 0"
        );
    }

    #[test]
    fn what_the_kernel_cannot_count() {
        let ev = probe(&[("a", FieldKind::Unsigned), ("b", FieldKind::Unsigned)]);
        let table: &[(&[KeySpec], &str)] = &[
            (
                &[KeySpec::Pid],
                "the kernel's hist keys have the thread id (common_pid), not the process id: use --by tid, or the user engine",
            ),
            (
                &[
                    KeySpec::Comm,
                    KeySpec::Field("a".into()),
                    KeySpec::Field("b".into()),
                ],
                "the kernel's compound keys have at most 2 fields",
            ),
        ];
        for (keys, want) in table {
            assert_eq!(
                &plan_count(std::slice::from_ref(&ev), keys, &f61(), None)
                    .unwrap_err()
                    .reason,
                want
            );
        }
        let user = ProbeEvent { user: true, ..ev };
        assert_eq!(
            plan_count(&[user], &[KeySpec::Stack], &f61(), None)
                .unwrap_err()
                .reason,
            "the kernel's stacktrace key is the kernel stack; a user stack needs the user engine"
        );
    }

    #[test]
    fn hist_commands_and_errors() {
        let ev = probe(&[
            ("count", FieldKind::Unsigned),
            ("ret", FieldKind::Signed),
            ("path", FieldKind::String),
        ]);
        let table: &[(&str, Scale, &[KeySpec], &str)] = &[
            (
                "count",
                Scale::Log2,
                &[],
                "hist:keys=count:vals=hitcount,count:size=8192",
            ),
            (
                "count",
                Scale::Linear { step: 512 },
                &[],
                "hist:keys=count.buckets=512:vals=hitcount,count:size=8192",
            ),
            (
                "ret",
                Scale::Linear { step: 100 },
                &[],
                "hist:keys=ret:vals=hitcount,ret:size=8192",
            ),
            (
                "count",
                Scale::Log2,
                &[KeySpec::Comm],
                "hist:keys=common_pid.execname,count:vals=hitcount,count:size=8192",
            ),
            (
                "count",
                Scale::Log2,
                &[KeySpec::Stack],
                "hist:keys=count,stacktrace:vals=hitcount,count:size=8192",
            ),
        ];
        for (field, scale, keys, want) in table {
            let p = plan_hist(&ev, field, *scale, keys, &f61(), false)
                .unwrap()
                .unwrap();
            assert_eq!(p.plan.setup[0].install_text(false), *want);
        }
        assert_eq!(
            plan_hist(&ev, "path", Scale::Log2, &[], &f61(), false)
                .unwrap_err()
                .to_string(),
            "cannot make a histogram of 'path': it is a string field; count by it instead (--by path)"
        );
        assert_eq!(
            plan_hist(&ev, "size", Scale::Log2, &[], &f61(), false)
                .unwrap_err()
                .to_string(),
            "no field 'size' in ktrace/ksys_read (fields: count, ret, path)"
        );
    }

    #[test]
    fn latency_steps_in_order() {
        let p = LatencyProbe {
            system: "ktrace".into(),
            entry_event: "f".into(),
            return_event: "f_ret".into(),
            func: "f".into(),
        };
        let us = plan_latency(
            &p,
            "ktrace_7_0",
            Unit::Us,
            Scale::Log2,
            &[KeySpec::Comm],
            &f61(),
            false,
        )
        .unwrap();
        let got: Vec<String> = us
            .plan
            .setup
            .iter()
            .map(|s| s.install_text(false))
            .collect();
        assert_eq!(
            got,
            [
                "s:ktrace_7_0_lat u64 lat; u64 lat1",
                "s:ktrace_7_0_lat1 u64 lat1; u64 lat",
                "hist:keys=common_pid.execname,lat1.log2:m=lat:vals=hitcount,lat:size=8192:onmax($m).save(lat)",
                "hist:keys=common_pid.execname,lat1.log2:n=9223372036854775807-lat:vals=hitcount:size=8192:onmax($n).save(lat)",
                "hist:keys=common_pid:l1=lat/1000+1,l=lat/1000:onmatch(synthetic.ktrace_7_0_lat).trace(ktrace_7_0_lat1,$l1,$l)",
                "hist:keys=common_pid:ts0=common_timestamp",
                "hist:keys=common_pid:lat=common_timestamp-$ts0,lat1=common_timestamp-$ts0+1:onmatch(ktrace.f).trace(ktrace_7_0_lat,$lat,$lat1)",
            ]
        );
        let down: Vec<String> = us
            .plan
            .teardown()
            .iter()
            .map(|s| s.remove_text(false))
            .collect();
        assert_eq!(
            down[0],
            "!hist:keys=common_pid:lat=common_timestamp-$ts0,lat1=common_timestamp-$ts0+1:onmatch(ktrace.f).trace(ktrace_7_0_lat,$lat,$lat1)"
        );
        assert_eq!(down[5], "-:synthetic/ktrace_7_0_lat1");
        assert_eq!(down[6], "-:synthetic/ktrace_7_0_lat");
        assert_eq!(
            us.plan.setup[0].install_text(true),
            "ktrace_7_0_lat u64 lat; u64 lat1"
        );
        assert_eq!(us.plan.setup[0].remove_text(true), "!ktrace_7_0_lat");
        assert_eq!(us.read, "ktrace_7_0_lat1");

        let ns = plan_latency(
            &p,
            "k",
            Unit::Ns,
            Scale::Linear { step: 1000 },
            &[],
            &f61(),
            true,
        )
        .unwrap();
        let got: Vec<String> = ns
            .plan
            .setup
            .iter()
            .map(|s| s.install_text(false))
            .collect();
        assert_eq!(
            got,
            [
                "s:k_lat u64 lat; u64 lat1",
                "hist:keys=lat.buckets=1000:m=lat:vals=hitcount,lat:size=8192:onmax($m).save(lat)",
                "hist:keys=lat.buckets=1000:n=9223372036854775807-lat:vals=hitcount:size=8192:onmax($n).save(lat)",
                "hist:keys=lat1.log2:vals=hitcount,lat:size=8192",
                "hist:keys=common_pid:ts0=common_timestamp",
                "hist:keys=common_pid:lat=common_timestamp-$ts0,lat1=common_timestamp-$ts0+1:onmatch(ktrace.f).trace(k_lat,$lat,$lat1)",
            ]
        );
        // Prometheus' ladder is power-of-two nanoseconds whatever the
        // scale: linear buckets get a table of their own; in ns and log2
        // the histogram is Prometheus' already
        assert_eq!(
            ns.prom.as_ref().map(|t| t.command.as_str()),
            Some("hist:keys=lat1.log2:vals=hitcount,lat:size=8192")
        );
        let nsl = plan_latency(&p, "k", Unit::Ns, Scale::Log2, &[], &f61(), true).unwrap();
        assert_eq!(nsl.prom, None);
        assert_eq!(nsl.prom_table(), &nsl.main);
        let usp = plan_latency(&p, "k", Unit::Us, Scale::Log2, &[], &f61(), true).unwrap();
        assert_eq!(
            usp.prom
                .as_ref()
                .map(|t| (t.event.as_str(), t.command.as_str())),
            Some(("k_lat", "hist:keys=lat1.log2:vals=hitcount,lat:size=8192"))
        );
        let lin = plan_latency(
            &p,
            "k",
            Unit::Ms,
            Scale::Linear { step: 5 },
            &[],
            &f61(),
            true,
        )
        .unwrap();
        assert_eq!(
            lin.prom.map(|t| t.command),
            Some("hist:keys=lat1.log2:vals=hitcount,lat:size=8192".into())
        );
        for (keys, want) in [
            (
                vec![KeySpec::Pid],
                "the kernel's hist keys have the thread id (common_pid), not the process id: use --by tid, or the user engine",
            ),
            (
                vec![KeySpec::Field("x".into())],
                "latency by the probe field 'x' needs the user engine",
            ),
            (
                vec![KeySpec::Cpu],
                "the kernel engine times at the return, so its cpu is the return's: the user engine keys latency by the entry's cpu",
            ),
        ] {
            assert_eq!(
                plan_latency(&p, "k", Unit::Ns, Scale::Log2, &keys, &f61(), false)
                    .unwrap_err()
                    .reason,
                want
            );
        }
        let old = Features {
            constants: false,
            ..f61()
        };
        assert!(plan_latency(&p, "k", Unit::Ns, Scale::Log2, &[], &old, false).is_err());
    }

    /// Issue 21 item 6: `ktrace latency 'vfs_*'` made 5 hist triggers and
    /// 2 synthetic events per function, and the kernel frees each trigger
    /// after a grace period. Several functions now share the synthetic
    /// events and the counting tables, keyed by each function's `id`; each
    /// keeps only its entry and return triggers, and reads its own rows.
    #[test]
    fn latency_functions_share_their_tables() {
        let ps: Vec<LatencyProbe> = ["f", "g", "h"]
            .iter()
            .map(|f| LatencyProbe {
                system: "ktrace".into(),
                entry_event: f.to_string(),
                return_event: format!("{f}_ret"),
                func: f.to_string(),
            })
            .collect();
        let prefix = |n: usize| format!("k_{n}");
        let plans =
            plan_latencies(&ps, &prefix, Unit::Us, Scale::Log2, &[], &f61(), false).unwrap();
        let got: Vec<String> = plans
            .iter()
            .flat_map(|p| &p.plan.setup)
            .map(|s| s.install_text(false))
            .collect();
        let ret = |n: usize, f: &str| {
            format!(
                "hist:keys=common_pid:lat=common_timestamp-$ts0,lat1=common_timestamp-$ts0+1,id={n}:onmatch(ktrace.{f}).trace(k_0_lat,$lat,$lat1,$id)"
            )
        };
        let entry = "hist:keys=common_pid:ts0=common_timestamp".to_string();
        assert_eq!(
            got,
            [
                "s:k_0_lat u64 lat; u64 lat1; u64 id".to_string(),
                "s:k_0_lat1 u64 lat1; u64 lat; u64 id".into(),
                "hist:keys=id,lat1.log2:m=lat:vals=hitcount,lat:size=8192:onmax($m).save(lat)".into(),
                "hist:keys=id,lat1.log2:n=9223372036854775807-lat:vals=hitcount:size=8192:onmax($n).save(lat)".into(),
                "hist:keys=common_pid:l1=lat/1000+1,l=lat/1000:onmatch(synthetic.k_0_lat).trace(k_0_lat1,$l1,$l,id)".into(),
                entry.clone(),
                ret(0, "f"),
                entry.clone(),
                ret(1, "g"),
                entry,
                ret(2, "h"),
            ]
        );
        // the shared steps go last, after every function's triggers
        let down = plans.last().unwrap().plan.teardown();
        assert_eq!(down[0].remove_text(false), format!("!{}", ret(2, "h")));
        assert!(
            plans
                .iter()
                .all(|p| p.main == plans[0].main && p.read == "k_0_lat1")
        );
        assert_eq!(plans[2].ret.event, "h_ret");
        // Prometheus' nanosecond table is shared too
        let prom = plan_latencies(&ps, &prefix, Unit::Us, Scale::Log2, &[], &f61(), true).unwrap();
        assert_eq!(
            prom[2]
                .prom
                .as_ref()
                .map(|t| (t.event.as_str(), t.command.as_str())),
            Some((
                "k_0_lat",
                "hist:keys=id,lat1.log2:vals=hitcount,lat:size=8192"
            ))
        );
        // the id does not fit beside comm and the latency on a kernel of
        // two keys, nor is one function worth it: a plan of its own each
        let comm = plan_latencies(
            &ps,
            &prefix,
            Unit::Us,
            Scale::Log2,
            &[KeySpec::Comm],
            &f61(),
            false,
        )
        .unwrap();
        assert_eq!(
            comm.iter().map(|p| p.plan.setup.len()).collect::<Vec<_>>(),
            [7, 7, 7]
        );
        assert_eq!(
            comm[1].plan.setup[0].install_text(false),
            "s:k_1_lat u64 lat; u64 lat1"
        );
        let one =
            plan_latencies(&ps[..1], &prefix, Unit::Ns, Scale::Log2, &[], &f61(), false).unwrap();
        assert_eq!(one[0].plan.setup.len(), 5);
        assert!(one[0].main.command.starts_with("hist:keys=lat1.log2:"));

        // each function reads its own rows (as 6.1 and 7.2 print them);
        // what the shared table dropped is counted once, by the first
        let text = "# event histogram
#
# trigger info: hist:keys=id,lat1.log2:vals=hitcount,lat:m=lat:sort=hitcount:size=8192:onmax($m).save(lat) [active]
#

{ id:          0, lat1: ~ 2^2  } hitcount:          2  lat:         10
\tmax:          7  lat:          7
{ id:          1, lat1: ~ 2^3  } hitcount:          2  lat:         12
\tmax:          8  lat:          8
{ id:          0, lat1: ~ 2^6  } hitcount:          1  lat:         40
\tmax:         40  lat:         40

Totals:
    Hits: 6
    Entries: 3
    Dropped: 1


# event histogram
#
# trigger info: hist:keys=id,lat1.log2:vals=hitcount:n=9223372036854775807-lat:sort=hitcount:size=8192:onmax($n).save(lat) [active]
#

{ id:          0, lat1: ~ 2^2  } hitcount:          2
\tmax: 9223372036854775804  lat:          3
{ id:          1, lat1: ~ 2^3  } hitcount:          2
\tmax: 9223372036854775803  lat:          4
{ id:          0, lat1: ~ 2^6  } hitcount:          1
\tmax: 9223372036854775767  lat:         40

Totals:
    Hits: 6
    Entries: 3
    Dropped: 1
";
        let tables = crate::khist::parse_hist(text).unwrap();
        let main = find_table(&tables, &plans[0].main.command).unwrap();
        let min = find_table(&tables, &plans[0].min.command).unwrap();
        let read = |p: &LatencyPlan, returns| {
            p.report(main, Some(min), Some(returns), None, ChainDrops::default())
                .unwrap()
        };
        let (f, g, h) = (read(&plans[0], 4), read(&plans[1], 3), read(&plans[2], 0));
        let stats = |r: &LatencyReport| {
            let s = r.hist.groups[0].1.stats;
            (s.count, s.sum, s.min, s.max)
        };
        assert_eq!(stats(&f), (3, 50, Some(3), Some(40)));
        assert_eq!(stats(&g), (2, 12, Some(4), Some(8)));
        assert!(h.hist.groups.is_empty());
        assert_eq!((f.hist.dropped, g.hist.dropped), (1, 0));
        // 4 returns of f: 3 measured, 1 dropped; g's third is unmatched
        assert_eq!((f.unmatched_returns, g.unmatched_returns), (0, 1));
        assert!(plans[0].owns_shared() && !plans[1].owns_shared());
    }

    /// Issue 23 row 5: a kernel-engine run must see its triggers removed
    /// or paused. The `trigger` file as 6.1 lists our latency tables
    /// (captured in a guest: the readback adds `sort`, `size`, `[active]`
    /// and orders the attributes its own way).
    #[test]
    fn trigger_states_from_the_trigger_file() {
        let main = "hist:keys=lat1.log2:m=lat:vals=hitcount,lat:size=8192:onmax($m).save(lat)";
        let min = "hist:keys=lat1.log2:n=9223372036854775807-lat:vals=hitcount:size=8192:onmax($n).save(lat)";
        let file = "hist:keys=lat1.log2:vals=hitcount,lat:m=lat:sort=hitcount:size=8192:onmax($m).save(lat) [active]
hist:keys=lat1.log2:vals=hitcount:n=9223372036854775807-lat:sort=hitcount:size=8192:onmax($n).save(lat) [active]
";
        assert_eq!(trigger_state(file, main), TriggerState::Active);
        assert_eq!(trigger_state(file, min), TriggerState::Active);
        let paused = file.replacen("[active]", "[paused]", 1);
        assert_eq!(trigger_state(&paused, main), TriggerState::Paused);
        assert_eq!(trigger_state(&paused, min), TriggerState::Active);
        let one = file.lines().nth(1).unwrap();
        assert_eq!(trigger_state(one, main), TriggerState::Missing);
        assert_eq!(
            trigger_state("# Available triggers:\n# traceon traceoff\n", main),
            TriggerState::Missing
        );
        // our filter tells ours from the same keys with another condition
        let ours = "hist:keys=common_pid:ts0=common_timestamp if common_pid != 111";
        let listed = "hist:keys=common_pid:vals=hitcount:ts0=common_timestamp:sort=hitcount:size=2048:clock=global if common_pid != 111 [active]";
        assert_eq!(trigger_state(listed, ours), TriggerState::Active);
        let other = listed.replace("111", "222");
        assert_eq!(trigger_state(&other, ours), TriggerState::Missing);
    }
}
