//! The Perfetto sink: a stream of decoded events ([`ktrace_stream::Sink`])
//! written as a Perfetto trace through [`crate::Writer`]. It is what
//! `ktrace export --perfetto` and `ktrace trace --perfetto` feed; the binary
//! only opens the files and wires the flags.
//!
//! One track per thread with its name; an entry probe and the return probe
//! of the same place (kprobe + kretprobe, uprobe + uretprobe; paired by the
//! probed function in the definitions the recording keeps, or by event name
//! less a `_ret`/`_return`/`__return` suffix for files without them) become
//! a slice named by the entry's event name, nested as the calls were; every
//! other event (an entry probe without a return probe among the events,
//! too) is an instant named by its event name; slices and instants are in
//! their event's system as category (`ktrace`, or the `--group` chosen,
//! stable from run to run); every field is an argument,
//! but for the probe's own address (`__probe_ip`, `__probe_func`: the same
//! on every hit). The stacks recorded with an event become its `stack`
//! (kernel) and `user_stack` arguments, whole, one frame a line, kernel
//! addresses as `sym+off/size`; the kernel stack without the probe
//! machinery's own frames ([`ktrace_event::probe_machinery`]: dispatchers,
//! trampolines, trap entries), so it starts at the probed function.
//!
//! An event is held until its stacks have come: the kernel writes them
//! right after it, on its CPU. Each CPU holds at most one event; holding
//! ends at the CPU's next event, and whenever one is written every held
//! event older than it is written first, so the trace stays in time order
//! (a stack written after another CPU's two events would find its event
//! gone and is left out). Memory holds the event table, those held events
//! and the writer's interning tables and open slices, never the events.

use std::collections::HashMap;
use std::io::{self, Write};

use ktrace_event::printfmt::Symbolizer;
use ktrace_event::{Int, ProbeKind, StrValue, Value};
use ktrace_stream::{Event, EventTable, Flow, Sink};

use crate::{Arg, Writer};

/// What an event becomes.
#[derive(Debug, Clone)]
enum Shape {
    /// The start of a slice named by the event.
    Begin,
    /// The end of the slice of the entry event named here.
    End(String),
    /// An instant named by the event.
    Instant,
}

/// How the events of one type are written.
#[derive(Debug, Clone)]
struct Plan {
    shape: Shape,
    name: String,
    /// The event's system, written as its category (`ktrace`, or the
    /// group the user chose: never the session's changing group).
    category: String,
    /// The fields written (index, name): all but the probe's own address.
    fields: Vec<(usize, String)>,
}

/// A field value, owned (held while a stack may still follow).
enum Owned {
    Int(i64),
    Uint(u64),
    Str(String),
}

/// An event held until its stacks have come.
struct Pending {
    tid: i32,
    ts: u64,
    id: usize,
    /// Values of the plan's fields, in order.
    values: Vec<Owned>,
    /// The kernel stack (machinery frames dropped).
    stack: Option<String>,
    user_stack: Option<String>,
}

/// A Perfetto trace as a stream sink.
pub struct PerfettoSink<'a, W: Write> {
    w: Option<Writer<W>>,
    symbols: &'a dyn Symbolizer,
    /// `system/event` → definition line.
    defs: HashMap<String, String>,
    /// How to write each event type, by type id.
    plans: Vec<Option<Plan>>,
    /// The event each CPU holds.
    pending: Vec<Option<Pending>>,
    /// A spare value buffer (the last pending event's).
    spare: Vec<Owned>,
}

impl<'a, W: Write> PerfettoSink<'a, W> {
    /// A sink writing to `w`; `defs` are the `dynamic_events` lines of
    /// the probes (empty when unknown).
    pub fn new(w: W, symbols: &'a dyn Symbolizer, defs: Vec<String>) -> Self {
        let defs = defs
            .into_iter()
            .filter_map(|d| {
                let place = ktrace_probe::head(&d)?.name?;
                Some((place.to_string(), d.clone()))
            })
            .collect();
        PerfettoSink {
            w: Some(Writer::new(w)),
            symbols,
            defs,
            plans: Vec::new(),
            pending: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Writes what is held and ends the open slices.
    pub fn close(&mut self) -> io::Result<()> {
        self.write_held(u64::MAX, None)?;
        if let Some(w) = self.w.take() {
            let mut out = w.finish().map_err(io::Error::other)?;
            out.flush()?;
        }
        Ok(())
    }

    /// Writes, oldest first, the held events stamped at or before `ts`,
    /// and the one of task `tid`.
    fn write_held(&mut self, ts: u64, tid: Option<i32>) -> io::Result<()> {
        loop {
            let next = self
                .pending
                .iter()
                .enumerate()
                .filter_map(|(c, p)| p.as_ref().map(|p| (p.ts, c, p.tid)))
                .filter(|&(t, _, pid)| t <= ts || Some(pid) == tid)
                .min();
            let Some((_, cpu, _)) = next else {
                return Ok(());
            };
            let p = self.pending[cpu].take();
            self.write_pending(p)?;
        }
    }

    fn write_pending(&mut self, p: Option<Pending>) -> io::Result<()> {
        let (Some(p), Some(w)) = (p, self.w.as_mut()) else {
            return Ok(());
        };
        let Some(plan) = self.plans.get(p.id).and_then(Option::as_ref) else {
            return Ok(());
        };
        let mut args: Vec<(&str, Arg<'_>)> = plan
            .fields
            .iter()
            .zip(&p.values)
            .map(|((_, k), v)| {
                (
                    k.as_str(),
                    match v {
                        Owned::Int(i) => Arg::Int(*i),
                        Owned::Uint(u) => Arg::Uint(*u),
                        Owned::Str(s) => Arg::Str(s),
                    },
                )
            })
            .collect();
        if let Some(s) = &p.stack {
            args.push(("stack", Arg::Str(s)));
        }
        if let Some(s) = &p.user_stack {
            args.push(("user_stack", Arg::Str(s)));
        }
        let r = match &plan.shape {
            Shape::Begin => w.begin_in(p.tid, p.ts, Some(&plan.category), &plan.name, &args),
            Shape::End(entry) => w.end_in(p.tid, p.ts, Some(&plan.category), entry, &args),
            Shape::Instant => w.instant_in(p.tid, p.ts, Some(&plan.category), &plan.name, &args),
        };
        drop(args);
        let mut values = p.values;
        values.clear();
        self.spare = values;
        r.map_err(io::Error::other)
    }

    /// The probed place of a probe event (its definition's, or its name
    /// less a return suffix), when it is at a function.
    fn place(&self, info: &ktrace_stream::EventInfo) -> Option<String> {
        let key = format!("{}/{}", info.system(), info.name());
        match self.defs.get(&key) {
            Some(d) => place_of(d),
            None => {
                let n = info.name();
                let base = ["__return", "_return", "_ret"]
                    .iter()
                    .find_map(|s| n.strip_suffix(s))
                    .unwrap_or(n);
                Some(base.to_string())
            }
        }
    }

    /// The plans of every event of `table`: an entry and a return probe of
    /// the same place are a slice (named by the entry), everything else an
    /// instant.
    fn plan(&mut self, table: &EventTable) {
        let probe = |k: ProbeKind| {
            matches!(
                k,
                ProbeKind::Kprobe | ProbeKind::Kretprobe | ProbeKind::Uprobe | ProbeKind::Uretprobe
            )
        };
        let mut entries: HashMap<String, String> = HashMap::new();
        let mut returns: Vec<String> = Vec::new();
        for info in table.iter().filter(|i| probe(i.kind())) {
            if let Some(p) = self.place(info) {
                if info.kind().is_return() {
                    returns.push(p);
                } else {
                    entries.entry(p).or_insert_with(|| info.name().to_string());
                }
            }
        }
        for info in table.iter() {
            let kind = info.kind();
            let place = probe(kind).then(|| self.place(info)).flatten();
            let shape = match place {
                Some(p) if kind.is_return() => match entries.get(&p) {
                    Some(entry) => Shape::End(entry.clone()),
                    None => Shape::Instant,
                },
                Some(p) if returns.contains(&p) => Shape::Begin,
                _ => Shape::Instant,
            };
            let fields = info
                .event
                .format
                .fields
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.common && f.name != "__probe_ip" && f.name != "__probe_func")
                .map(|(i, f)| (i, f.name.clone()))
                .collect();
            let id = usize::from(info.id);
            if self.plans.len() <= id {
                self.plans.resize(id + 1, None);
            }
            self.plans[id] = Some(Plan {
                shape,
                name: info.name().to_string(),
                category: info.system().to_string(),
                fields,
            });
        }
    }

    /// A stack record's frames ([`ktrace_event::Stack`]'s, all of them,
    /// innermost first), one per line: kernel addresses as `sym+off/size`,
    /// user addresses (and unknown kernel ones) in hex; a kernel stack
    /// without the probe machinery's frames. `None` for a record that is
    /// not a stack.
    fn stack_text(&self, ev: &Event<'_>) -> Option<String> {
        let stack = ev.stack()?;
        let skip = if stack.user {
            0
        } else {
            ktrace_event::probe_machinery(
                stack
                    .frames()
                    .map(|a| self.symbols.lookup(a).map(|s| s.name)),
            )
        };
        let mut text = String::new();
        for a in stack.frames().skip(skip) {
            if !text.is_empty() {
                text.push('\n');
            }
            match (stack.user, self.symbols.lookup(a)) {
                (false, Some(s)) => {
                    text.push_str(&format!("{}+{:#x}/{:#x}", s.name, s.offset, s.size));
                }
                _ => text.push_str(&format!("{a:#x}")),
            }
        }
        Some(text)
    }
}

/// The probed place of a definition: the kernel symbol of a kprobe at a
/// function (`SYM` of `SYM`, `SYM+0`, `SYM%return`), or `PATH:OFFSET` of a
/// uprobe; `None` for a probe inside a function (no slice pairs with it).
fn place_of(def: &str) -> Option<String> {
    let head = ktrace_probe::head(def)?;
    let mut place = head.place?;
    if place.chars().all(|c| c.is_ascii_digit()) {
        // r16:ev SYM (maxactive written apart is not the kernel's form,
        // but take the next word)
        place = head.args().next()?;
    }
    let place = place.strip_suffix("%return").unwrap_or(place);
    if matches!(head.letter(), Some(b'p' | b'r')) {
        if place.contains(':') || place.starts_with('/') {
            // uprobe: PATH:OFFSET (a return probe names the function's
            // entry, as the entry probe does)
            return Some(place.split('(').next().unwrap_or(place).to_string());
        }
        let (sym, off) = place.split_once('+').unwrap_or((place, "0"));
        let zero = off == "0"
            || off
                .trim_start_matches("0x")
                .trim_start_matches('0')
                .is_empty();
        return zero.then(|| sym.to_string());
    }
    None
}

fn owned(v: Value<'_>) -> Owned {
    match v {
        Value::Int(Int::S(i)) => Owned::Int(i),
        Value::Int(Int::U(u)) => Owned::Uint(u),
        Value::Str(StrValue::Ok(b)) => Owned::Str(String::from_utf8_lossy(b).into_owned()),
        Value::Str(StrValue::Fault) => Owned::Str("(fault)".into()),
        Value::Str(StrValue::Bad) => Owned::Str("(bad)".into()),
        Value::Array(items) => Owned::Str(format!(
            "[{}]",
            items
                .into_iter()
                .map(|v| match owned(v) {
                    Owned::Int(i) => i.to_string(),
                    Owned::Uint(u) => u.to_string(),
                    Owned::Str(s) => format!("{s:?}"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Value::Bytes(b) => Owned::Str(
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Value::Missing => Owned::Str("(missing)".into()),
    }
}

impl<W: Write> Sink for PerfettoSink<'_, W> {
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        self.plan(table);
        Ok(())
    }

    fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow> {
        if ev.is_stack() {
            // the stream passes only stacks of the event last shown on
            // their CPU, the first of each kind
            let user = ev.stack().is_some_and(|s| s.user);
            let text = self.stack_text(ev);
            if let Some(p) = self.pending.get_mut(ev.cpu).and_then(Option::as_mut)
                && p.tid == ev.pid()
            {
                let slot = if user {
                    &mut p.user_stack
                } else {
                    &mut p.stack
                };
                // a kernel stack that was all machinery (a uprobe's) is
                // left out
                if slot.is_none() && text.as_ref().is_some_and(|t| !t.is_empty()) {
                    *slot = text;
                }
            }
            return Ok(Flow::Continue);
        }
        // this CPU's held event is complete: write it, with every older
        // one, and the task's own (it may have moved to this CPU)
        let held = self
            .pending
            .get(ev.cpu)
            .and_then(Option::as_ref)
            .map_or(0, |p| p.ts);
        self.write_held(held, Some(ev.pid()))?;
        let id = usize::from(ev.info.id);
        if self.plans.get(id).is_none_or(Option::is_none) {
            // an event the table learnt of after begin: an instant
            if self.plans.len() <= id {
                self.plans.resize(id + 1, None);
            }
            self.plans[id] = Some(Plan {
                shape: Shape::Instant,
                name: ev.info.name().to_string(),
                category: ev.info.system().to_string(),
                fields: ev
                    .fields()
                    .filter(|(_, f)| f.name != "__probe_ip" && f.name != "__probe_func")
                    .map(|(i, f)| (i, f.name.clone()))
                    .collect(),
            });
        }
        if let Some(w) = self.w.as_mut() {
            w.thread(ev.pid(), ev.pid(), ev.comm())
                .map_err(io::Error::other)?;
        }
        let mut values = std::mem::take(&mut self.spare);
        if let Some(plan) = self.plans.get(id).and_then(Option::as_ref) {
            values.extend(plan.fields.iter().map(|(i, _)| owned(ev.value(*i))));
        }
        if self.pending.len() <= ev.cpu {
            self.pending.resize_with(ev.cpu + 1, || None);
        }
        self.pending[ev.cpu] = Some(Pending {
            tid: ev.pid(),
            ts: ev.ts,
            id,
            values,
            stack: None,
            user_stack: None,
        });
        Ok(Flow::Continue)
    }

    fn finish(&mut self, _end: &ktrace_stream::EndOfRun) -> io::Result<()> {
        self.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoSymbols;

    impl Symbolizer for NoSymbols {
        fn lookup(&self, _: u64) -> Option<ktrace_event::printfmt::Symbol<'_>> {
            None
        }
    }

    #[test]
    fn place_of_definitions() {
        for (def, want) in [
            ("p:g/e vfs_read", Some("vfs_read")),
            ("p:g/e vfs_read+0 a=%di", Some("vfs_read")),
            ("r:g/e vfs_read%return $retval", Some("vfs_read")),
            ("r16:g/e vfs_read", Some("vfs_read")),
            ("p:g/e vfs_read+0x0", Some("vfs_read")),
            ("p:g/e vfs_read+4", None),
            // maxactive written apart: the next word
            ("r:g/e 16 vfs_read", Some("vfs_read")),
            ("r:g/e 16", None),
            ("p:u/e /bin/sh:0x10(0x20) %ax", Some("/bin/sh:0x10")),
            ("r:u/e /bin/sh:0x10", Some("/bin/sh:0x10")),
            ("p:g/e\tvfs_read\t\ta=%di", Some("vfs_read")),
            ("e:g/e sched.sched_switch", None),
            ("f:g/e vfs_read", None),
            ("p:g/e", None),
            ("", None),
        ] {
            assert_eq!(place_of(def).as_deref(), want, "{def:?}");
        }
    }

    #[test]
    fn definitions_are_keyed_by_their_name() {
        let defs = [
            "p:ktrace/open do_sys_openat2",
            "r8:ktrace/open_ret do_sys_openat2",
            "  p:ev vfs_read",
            "p vfs_write",
            "",
        ];
        let sink = PerfettoSink::new(
            Vec::new(),
            &NoSymbols,
            defs.iter().map(|d| d.to_string()).collect(),
        );
        let mut keys: Vec<&str> = sink.defs.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["ev", "ktrace/open", "ktrace/open_ret"]);
        assert_eq!(sink.defs["ev"], "  p:ev vfs_read");
    }
}
