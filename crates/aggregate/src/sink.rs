//! The user engine as a stream sink ([`AggSink`]): each decoded record of
//! ktrace's probes (or of the function tracer) becomes a [`Sample`] for the
//! aggregator in a shared [`UserState`]; with a `stack` key a sample waits
//! for the stack record the kernel writes right after it (`stacktrace`
//! trigger, `userstacktrace` option, `func_stack_trace`). Also the count of
//! a recording's hits by stack ([`count_recording_by_stack`]).
//!
//! It mirrors the crate docs' "wiring the user engine": the record → sample
//! mapping, kernel frames named `sym+0xoff` through the caller's
//! [`Symbolizer`]. It does not set up tracing, print or warn (the caller
//! says what [`UserAgg::overflowed`] reports); the one file it reads is
//! `/proc/TID/status`, for a live thread's process ([`tgid_of`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;

use ktrace_event::FieldKind as RecordFieldKind;
use ktrace_event::printfmt::Symbolizer;
use ktrace_stream::{CpuPages, Decoder, EndOfRun, Event, Flow, Int, Missed, Role, Sink, StrValue};

use crate::agg::{CountAgg, CountReport, DEFAULT_MAX_KEYS};
use crate::key::KeySpec;
use crate::report::UserAgg;
use crate::sample::{Sample, Value};

/// The event the function tracer's records are (system/name).
pub const FUNCTION_EVENT: &str = "ftrace/function";

/// A `func_stack_trace` stack from the traced function `func` outwards:
/// the tracer's own frames before it (`ftrace_caller+0x6c` on arm64 7.2)
/// are left out, as a kprobe's stack starts at its function.
fn from_function<'f>(frames: &'f [String], func: &str) -> &'f [String] {
    let own = |f: &String| {
        f.strip_prefix(func)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('+'))
    };
    match frames.iter().position(own) {
        Some(i) => &frames[i..],
        None => frames,
    }
}

/// The process (tgid) of thread `tid`, from `/proc/TID/status`; the tid
/// itself when the thread is gone.
pub fn tgid_of(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

/// What the sink feeds: the aggregator, and the one Prometheus serves.
#[derive(Debug)]
pub struct UserState {
    /// Reset each interval.
    pub agg: UserAgg,
    /// Never reset: what Prometheus serves.
    pub total: Option<UserAgg>,
}

impl UserState {
    /// Whether either aggregator passed its `max_keys`.
    pub fn overflowed(&self) -> bool {
        self.agg.overflowed() || self.total.as_ref().is_some_and(UserAgg::overflowed)
    }

    fn add_sample(&mut self, s: &Sample<'_>) {
        self.agg.add(s);
        if let Some(t) = &mut self.total {
            t.add(s);
        }
    }

    fn add(&mut self, p: &Pending, func: Option<&str>, stack: Option<&[String]>) {
        let fields: Vec<(&str, Value<'_>)> = p
            .fields
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str(),
                    match v {
                        Owned::Num(x) => *x,
                        Owned::Text(t) => Value::Str(t.as_str()),
                    },
                )
            })
            .collect();
        let s = Sample {
            ts_ns: p.ts_ns,
            cpu: p.cpu,
            pid: p.pid,
            tid: p.tid,
            comm: &p.comm,
            event: &p.event,
            func,
            stack,
            fields: &fields,
        };
        self.add_sample(&s);
    }
}

/// A field value that outlives its record.
#[derive(Debug, Clone)]
enum Owned {
    Num(Value<'static>),
    Text(String),
}

/// A field value borrowed from its record.
enum Field<'a> {
    Num(Value<'static>),
    Text(Cow<'a, str>),
}

/// A sample waiting for its stack.
#[derive(Debug, Clone)]
struct Pending {
    ts_ns: u64,
    cpu: u32,
    pid: u32,
    tid: u32,
    comm: String,
    event: String,
    /// The function: the probe's (looked up once per event id) or the one
    /// the function tracer's record is in.
    func: Option<String>,
    fields: Vec<(String, Owned)>,
}

impl Pending {
    /// The sample of record `ev` of process `pid`, waiting for its stack.
    fn of(
        ev: &Event<'_>,
        pid: u32,
        event: &str,
        func: Option<String>,
        fields: Vec<(String, Owned)>,
    ) -> Pending {
        Pending {
            ts_ns: ev.ts,
            cpu: ev.cpu as u32,
            pid,
            tid: ev.pid() as u32,
            comm: ev.comm().to_string(),
            event: event.to_string(),
            func,
            fields,
        }
    }
}

/// The sample of record `ev` of process `pid`, without a stack.
fn sample_of<'a>(
    ev: &'a Event<'_>,
    pid: u32,
    event: &'a str,
    func: Option<&'a str>,
    fields: &'a [(&'a str, Value<'a>)],
) -> Sample<'a> {
    Sample {
        ts_ns: ev.ts,
        cpu: ev.cpu as u32,
        pid,
        tid: ev.pid() as u32,
        comm: ev.comm(),
        event,
        func,
        stack: None,
        fields,
    }
}

/// The user engine's sink: each decoded record becomes a [`Sample`]. With
/// a `stack` key, a probe's sample waits for the stack record the kernel
/// writes right after it (`stacktrace` trigger, `userstacktrace` option).
pub struct AggSink<'s> {
    state: Rc<RefCell<UserState>>,
    /// `GROUP/EVENT` → the function.
    funcs: HashMap<String, String>,
    tgids: HashMap<u32, u32>,
    /// The last (tid, tgid) looked up: a burst of one task hashes nothing.
    last_tgid: Option<(u32, u32)>,
    /// `GROUP/EVENT` and its function, by event id (a record costs an
    /// index, not a hash of its name).
    names: Vec<Option<(String, Option<String>)>>,
    /// Key by stack: samples wait for their stack record.
    stacks: bool,
    pending: Option<Pending>,
    symbols: &'s dyn Symbolizer,
    /// The fields the keys and the histogram read: only these are decoded
    /// (none for a count by func/comm/pid, so a record costs no allocation).
    wanted: Vec<String>,
    /// Counting the function tracer's records (`ftrace/function`).
    function: bool,
    /// The function tracer's `ip` → its function.
    ips: HashMap<u64, String>,
    /// Processes from /proc (live); a recording's threads are their own.
    proc: bool,
}

impl<'s> AggSink<'s> {
    /// A sink feeding `state`, naming kernel frames with `symbols`: no
    /// functions, fields or stacks, no function tracer, threads as their
    /// own processes until the `with_*` calls say otherwise.
    pub fn new(state: Rc<RefCell<UserState>>, symbols: &'s dyn Symbolizer) -> Self {
        AggSink {
            state,
            funcs: HashMap::new(),
            tgids: HashMap::new(),
            last_tgid: None,
            names: Vec::new(),
            stacks: false,
            pending: None,
            symbols,
            wanted: Vec::new(),
            function: false,
            ips: HashMap::new(),
            proc: false,
        }
    }

    /// The function of each probe event (`GROUP/EVENT` → function).
    pub fn with_funcs(mut self, funcs: HashMap<String, String>) -> Self {
        self.funcs = funcs;
        self
    }

    /// Key by stack: each sample waits for its stack record.
    pub fn with_stacks(mut self, stacks: bool) -> Self {
        self.stacks = stacks;
        self
    }

    /// The probe fields the keys and the histogram read (only these are
    /// decoded).
    pub fn with_wanted(mut self, wanted: Vec<String>) -> Self {
        self.wanted = wanted;
        self
    }

    /// Count the function tracer's records (`ftrace/function`).
    pub fn with_function_tracer(mut self, function: bool) -> Self {
        self.function = function;
        self
    }

    /// Look each live thread's process up in /proc ([`tgid_of`]).
    pub fn with_processes(mut self, proc: bool) -> Self {
        self.proc = proc;
        self
    }

    /// The process of thread `tid` (looked up once per thread).
    fn tgid(&mut self, tid: u32) -> u32 {
        if !self.proc {
            return tid;
        }
        if let Some((t, p)) = self.last_tgid
            && t == tid
        {
            return p;
        }
        let p = *self.tgids.entry(tid).or_insert_with(|| tgid_of(tid));
        self.last_tgid = Some((tid, p));
        p
    }

    /// The pending sample goes in (with `stack`, or without one).
    fn settle(&mut self, stack: Option<&[String]>) {
        if let Some(p) = self.pending.take() {
            let func = p.func.as_deref();
            let stack = match (p.event.as_str(), func, stack) {
                (FUNCTION_EVENT, Some(f), Some(frames)) => Some(from_function(frames, f)),
                (_, _, stack) => stack,
            };
            self.state.borrow_mut().add(&p, func, stack);
        }
    }

    /// The frames of a `kernel_stack` / `user_stack` record
    /// ([`ktrace_event::Stack`]'s, innermost first): kernel addresses as
    /// `sym+0xoff`, user addresses (and unknown kernel ones) in hex.
    fn frames(&self, ev: &Event<'_>) -> Vec<String> {
        let Some(stack) = ev.stack() else {
            return Vec::new();
        };
        stack
            .frames()
            .map(|addr| match (stack.user, self.symbols.lookup(addr)) {
                (false, Some(sym)) => format!("{}+0x{:x}", sym.name, sym.offset),
                _ => format!("0x{addr:x}"),
            })
            .collect()
    }

    /// One record of the function tracer: counted for the function its
    /// `ip` is in (the traced function: ftrace's call site is in its
    /// first instructions).
    fn function_hit(&mut self, ev: &Event<'_>) {
        let ip = ev
            .fields()
            .find(|(_, f)| f.name == "ip")
            .and_then(|(i, _)| match ev.int(i, 0) {
                Some(Int::U(v)) => Some(v),
                Some(Int::S(v)) => Some(v as u64),
                None => None,
            });
        let Some(ip) = ip else {
            return;
        };
        let tid = ev.pid() as u32;
        let pid = self.tgid(tid);
        let symbols = self.symbols;
        let func = self.ips.entry(ip).or_insert_with(|| {
            symbols
                .lookup(ip)
                .map_or_else(|| format!("0x{ip:x}"), |s| s.name.to_string())
        });
        if self.stacks {
            // `func_stack_trace`: the stack record follows
            let func = Some(func.clone());
            self.pending = Some(Pending::of(ev, pid, FUNCTION_EVENT, func, Vec::new()));
            return;
        }
        let s = sample_of(ev, pid, FUNCTION_EVENT, Some(func.as_str()), &[]);
        self.state.borrow_mut().add_sample(&s);
    }

    /// The wanted fields of a probe's record, as decoded.
    fn fields<'e>(&self, ev: &'e Event<'_>) -> Vec<(&'e str, Field<'e>)> {
        let mut vals = Vec::new();
        for (i, f) in ev.fields() {
            if !self.wanted.contains(&f.name) {
                continue;
            }
            if f.name.starts_with("__probe_")
                || (f.is_array && !matches!(f.kind, RecordFieldKind::DataLoc { .. }))
            {
                continue;
            }
            let v = match f.kind {
                RecordFieldKind::Int => match ev.int(i, 0) {
                    Some(Int::U(v)) => Field::Num(Value::U64(v)),
                    Some(Int::S(v)) => Field::Num(Value::S64(v)),
                    None => continue,
                },
                RecordFieldKind::DataLoc { .. } => match ev.str(i, 0) {
                    StrValue::Ok(b) => Field::Text(String::from_utf8_lossy(b)),
                    _ => continue,
                },
                RecordFieldKind::Bytes => continue,
            };
            vals.push((f.name.as_str(), v));
        }
        vals
    }
}

impl Sink for AggSink<'_> {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow> {
        match ev.info.role {
            Role::Probe => {}
            Role::Stack { .. } => {
                if self.pending.is_some() {
                    let frames = self.frames(ev);
                    self.settle(Some(&frames));
                }
                return Ok(Flow::Continue);
            }
            Role::Kernel => {
                if self.function && ev.info.system() == "ftrace" && ev.info.name() == "function" {
                    self.function_hit(ev);
                }
                return Ok(Flow::Continue);
            }
        }
        // a sample still waiting had no stack record
        self.settle(None);
        let tid = ev.pid() as u32;
        let pid = self.tgid(tid);
        let vals = self.fields(ev);
        let id = usize::from(ev.info.id);
        if self.names.len() <= id {
            self.names.resize(id + 1, None);
        }
        let (event, func) = self.names[id].get_or_insert_with(|| {
            let name = format!("{}/{}", ev.info.system(), ev.info.name());
            let func = self.funcs.get(&name).cloned();
            (name, func)
        });
        if self.stacks {
            let fields = vals
                .into_iter()
                .map(|(n, v)| {
                    let v = match v {
                        Field::Num(x) => Owned::Num(x),
                        Field::Text(t) => Owned::Text(t.into_owned()),
                    };
                    (n.to_string(), v)
                })
                .collect();
            self.pending = Some(Pending::of(ev, pid, event, func.clone(), fields));
            return Ok(Flow::Continue);
        }
        let fields: Vec<(&str, Value<'_>)> = vals
            .iter()
            .map(|(n, v)| {
                (
                    *n,
                    match v {
                        Field::Num(x) => *x,
                        Field::Text(t) => Value::Str(t),
                    },
                )
            })
            .collect();
        let sample = sample_of(ev, pid, event, func.as_deref(), &fields);
        self.state.borrow_mut().add_sample(&sample);
        Ok(Flow::Continue)
    }

    fn lost(&mut self, _cpu: usize, missed: Missed) -> io::Result<()> {
        self.settle(None);
        let n = missed.count().max(1);
        let mut st = self.state.borrow_mut();
        st.agg.lost(n);
        if let Some(t) = &mut st.total {
            t.lost(n);
        }
        Ok(())
    }

    fn finish(&mut self, _end: &EndOfRun) -> io::Result<()> {
        self.settle(None);
        Ok(())
    }
}

/// A recording's hits counted by stack.
#[derive(Debug)]
pub struct StackCounts {
    /// The table.
    pub report: CountReport,
    /// How the run ended.
    pub end: EndOfRun,
    /// More than [`DEFAULT_MAX_KEYS`] stacks: the rest counted as other.
    pub overflowed: bool,
}

/// Counts the probe hits of a recording by stack (`ktrace report
/// --folded`) with the sink `count --by stack` runs live: an event's stack
/// is the first stack record the stream pairs with it, its frames named as
/// the live table names them. Keeps [`DEFAULT_MAX_KEYS`] stacks (the rest
/// counted together as other, and said in [`StackCounts::overflowed`]).
pub fn count_recording_by_stack(
    decoder: &mut Decoder,
    streams: Vec<CpuPages>,
    symbols: &dyn Symbolizer,
) -> Result<StackCounts, ktrace_stream::Error> {
    let keys = vec![KeySpec::Stack];
    let state = Rc::new(RefCell::new(UserState {
        agg: UserAgg::Count(CountAgg::new(keys).with_max_keys(DEFAULT_MAX_KEYS)),
        total: None,
    }));
    let mut sink = AggSink::new(Rc::clone(&state), symbols).with_stacks(true);
    let end = ktrace_stream::replay(decoder, streams, &mut sink)?;
    drop(sink);
    let st = state.borrow();
    let report = match &st.agg {
        UserAgg::Count(a) => a.report(),
        // (a count job makes a count aggregator)
        _ => CountReport::new(vec!["stack".into()], []),
    };
    Ok(StackCounts {
        report,
        end,
        overflowed: st.agg.overflowed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_stacks_start_at_the_function() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // arm64 7.2, func_stack_trace on ksys_sync
        let arm = f(&[
            "ftrace_caller+0x6c",
            "ksys_sync+0x8",
            "__arm64_sys_sync+0x18",
        ]);
        assert_eq!(from_function(&arm, "ksys_sync"), &arm[1..]);
        // already starting there; a longer name sharing the prefix is not it
        let x = f(&["ksys_sync_helper+0x4", "ksys_sync+0x5", "x+0x1"]);
        assert_eq!(from_function(&x, "ksys_sync"), &x[1..]);
        assert_eq!(from_function(&x[1..], "ksys_sync"), &x[1..]);
        // not found: the stack as the kernel wrote it
        assert_eq!(from_function(&arm, "vfs_read"), &arm[..]);
    }
}
