//! ktrace-perfetto: a minimal writer of Perfetto traces (the protobuf
//! `Trace` of Perfetto's protos/perfetto/trace/trace.proto), encoded here
//! without any Perfetto or protobuf library.
//!
//! It writes only what ktrace needs: one `TrackDescriptor` per thread (with
//! its pid, tid and name), `TrackEvent`s on those tracks — slices for
//! entry/return pairs, instants for other events — and every field as a
//! `DebugAnnotation`. Field numbers are Perfetto's documented ones (see
//! tests/perfetto.proto, the subset used, which `protoc --decode` checks
//! the output against). It reads no trace and knows no event format: the
//! caller (a stream sink, [`PerfettoSink`] in [`sink`]) hands it names,
//! times and fields.
//!
//! Lean, as Perfetto's own SDK writes (track_event's incremental state):
//! every packet is on one sequence; event names and categories,
//! annotation names and string values are interned (`InternedData`, written once, then referred
//! to by number: a string field that repeats, or a stack, costs a few
//! bytes after its first time); time stamps are deltas on a sequence-scoped
//! incremental clock (id 64, tied to `CLOCK_BOOTTIME` by a `ClockSnapshot`
//! in the first packet, and made the default by `TracePacketDefaults`). The
//! first packet clears the sequence's incremental state, which then stays
//! valid (nothing is lost in a file), so event packets do not repeat
//! `SEQ_NEEDS_INCREMENTAL_STATE` (Perfetto's trace processor reads that
//! flag only to skip packets of a sequence whose state was lost). An
//! event costs 13 bytes plus the varint of its time delta, and 5 bytes
//! plus the varint of its value per field (an interned string's value is
//! its id): 27 bytes for two small fields 1 µs apart (see
//! `tests/decode.rs`, `two_field_events_cost_27_bytes`). An event given a
//! category ([`Writer::begin_in`], [`Writer::instant_in`]: the sink writes
//! the event's system there) costs 2 bytes more, the category being
//! interned too. A time stamp earlier
//! than the one before (a corrupt recording) is written absolute, on
//! `CLOCK_BOOTTIME`.
//!
//! Memory is bounded and does not grow with the events: the interning
//! tables hold each distinct name once and at most
//! [`MAX_INTERNED_STRINGS`] string values of at most
//! [`MAX_INTERNED_STRING_BYTES`] in all (later new ones are written in
//! place), the threads one open-slice stack each, at most [`MAX_DEPTH`]
//! deep (an entry deeper than that is written as an instant and counted,
//! [`Writer::flattened`]).
//!
//! Slices nest: a [`Writer::end`] closes the innermost open slice of that
//! name on the thread, ending any slices opened inside it first (a return
//! whose inner returns were lost); an end with no open slice of that name
//! (its entry was before the trace began) becomes an instant. Slices still
//! open at [`Writer::finish`] end at the last time stamp seen.

use std::collections::HashMap;
use std::io::Write;

pub mod sink;
pub use sink::PerfettoSink;

/// Errors from writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The output failed.
    #[error("write perfetto trace: {0}")]
    Io(#[from] std::io::Error),
}

/// A field value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<'a> {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer.
    Uint(u64),
    /// An address (shown in hex by Perfetto).
    Pointer(u64),
    /// Text.
    Str(&'a str),
    /// Floating point.
    Double(f64),
    /// Boolean.
    Bool(bool),
}

/// Open slices one thread may have; deeper entries become instants.
pub const MAX_DEPTH: usize = 1024;

/// String values interned at most; new ones past this are written in
/// place.
pub const MAX_INTERNED_STRINGS: usize = 1 << 16;

/// Bytes of interned string values at most (with
/// [`MAX_INTERNED_STRINGS`], what bounds the table's memory).
pub const MAX_INTERNED_STRING_BYTES: usize = 4 << 20;

// Perfetto field numbers (protos/perfetto/trace/...)
const TRACE_PACKET: u32 = 1;
const PKT_CLOCK_SNAPSHOT: u32 = 6;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_INTERNED_DATA: u32 = 12;
const PKT_SEQ_FLAGS: u32 = 13;
const PKT_TIMESTAMP_CLOCK_ID: u32 = 58;
const PKT_DEFAULTS: u32 = 59;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;
const CS_CLOCKS: u32 = 1;
const CLOCK_ID: u32 = 1;
const CLOCK_TIMESTAMP: u32 = 2;
const CLOCK_IS_INCREMENTAL: u32 = 3;
const ID_EVENT_CATEGORIES: u32 = 1;
const ID_EVENT_NAMES: u32 = 2;
const ID_DEBUG_ANNOTATION_NAMES: u32 = 3;
const ID_DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
const INTERNED_IID: u32 = 1;
const INTERNED_NAME: u32 = 2;
/// `InternedString.str` (profiling/profile_common.proto).
const INTERNED_STR: u32 = 2;
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PROCESS: u32 = 3;
const TD_THREAD: u32 = 4;
const TD_PARENT: u32 = 5;
const PD_PID: u32 = 1;
const PD_NAME: u32 = 6;
const THD_PID: u32 = 1;
const THD_TID: u32 = 2;
const THD_NAME: u32 = 5;
const TE_CATEGORY_IIDS: u32 = 3;
const TE_DEBUG: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_NAME_IID: u32 = 10;
const TE_TRACK: u32 = 11;
const DA_NAME_IID: u32 = 1;
const DA_BOOL: u32 = 2;
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_DOUBLE: u32 = 5;
const DA_STRING: u32 = 6;
const DA_POINTER: u32 = 7;
const DA_STRING_IID: u32 = 17;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
/// SequenceFlags: SEQ_INCREMENTAL_STATE_CLEARED (the first packet).
const SEQ_CLEARED: u64 = 1;
const SEQ_ID: u64 = 1;
/// `BuiltinClock` BOOTTIME, the trace's default clock domain.
const CLOCK_BOOTTIME: u64 = 6;
/// The sequence-scoped incremental clock (user-defined ids are 64..=127).
const CLOCK_INCREMENTAL: u64 = 64;

/// Protobuf encoding helpers over a byte vector.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, 0);
        self.varint(v);
    }
    fn int(&mut self, field: u32, v: i64) {
        // int32/int64: two's complement as a 64-bit varint
        self.uint(field, v as u64);
    }
    fn double(&mut self, field: u32, v: f64) {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: &Msg) {
        self.bytes(field, &m.0);
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

struct Thread {
    uuid: u64,
    /// Names (interned ids) of the open slices, innermost last.
    open: Vec<u64>,
}

/// A Perfetto trace being written to `W` (packets are written as they come;
/// memory holds the interning tables and one open-slice stack per thread).
pub struct Writer<W: Write> {
    w: W,
    threads: HashMap<i32, Thread>,
    processes: HashMap<i32, u64>,
    next_uuid: u64,
    /// The first packet (clock snapshot, defaults) is written.
    started: bool,
    /// The last time stamp written on the incremental clock.
    clock: u64,
    last_ts: u64,
    event_names: HashMap<String, u64>,
    categories: HashMap<String, u64>,
    annotation_names: HashMap<String, u64>,
    string_values: HashMap<String, u64>,
    string_bytes: usize,
    flattened: u64,
    /// Track descriptors declared before the first event (written right
    /// after the first packet, which needs the first event's time stamp).
    early: Vec<Msg>,
    // encoding buffers, reused
    packet: Msg,
    event: Msg,
    interned: Msg,
    scratch: Msg,
    out: Msg,
}

impl<W: Write> Writer<W> {
    /// A writer to `w`.
    pub fn new(w: W) -> Writer<W> {
        Writer {
            w,
            threads: HashMap::new(),
            processes: HashMap::new(),
            next_uuid: 1,
            started: false,
            clock: 0,
            last_ts: 0,
            event_names: HashMap::new(),
            categories: HashMap::new(),
            annotation_names: HashMap::new(),
            string_values: HashMap::new(),
            string_bytes: 0,
            flattened: 0,
            early: Vec::new(),
            packet: Msg::default(),
            event: Msg::default(),
            interned: Msg::default(),
            scratch: Msg::default(),
            out: Msg::default(),
        }
    }

    /// Entries written as instants because their thread already had
    /// [`MAX_DEPTH`] slices open.
    pub fn flattened(&self) -> u64 {
        self.flattened
    }

    /// Writes `self.packet` (its fields so far) as one `TracePacket`.
    fn emit(&mut self) -> Result<(), Error> {
        self.packet.uint(PKT_SEQ_ID, SEQ_ID);
        self.out.clear();
        self.out.msg(TRACE_PACKET, &self.packet);
        self.w.write_all(&self.out.0)?;
        self.packet.clear();
        Ok(())
    }

    /// Writes a track descriptor now, or after the first packet when that
    /// is not written yet.
    fn describe(&mut self, td: Msg) -> Result<(), Error> {
        if !self.started {
            self.early.push(td);
            return Ok(());
        }
        self.packet.msg(PKT_TRACK_DESCRIPTOR, &td);
        self.emit()
    }

    /// The first packet: the incremental clock, tied to BOOTTIME at `ts`,
    /// made the sequence's default clock; then the tracks declared so far.
    fn start(&mut self, ts: u64) -> Result<(), Error> {
        self.started = true;
        self.clock = ts;
        let mut cs = Msg::default();
        for (id, incremental) in [(CLOCK_INCREMENTAL, true), (CLOCK_BOOTTIME, false)] {
            let mut c = Msg::default();
            c.uint(CLOCK_ID, id);
            c.uint(CLOCK_TIMESTAMP, ts);
            if incremental {
                c.uint(CLOCK_IS_INCREMENTAL, 1);
            }
            cs.msg(CS_CLOCKS, &c);
        }
        let mut defaults = Msg::default();
        defaults.uint(DEFAULTS_TIMESTAMP_CLOCK_ID, CLOCK_INCREMENTAL);
        self.packet.uint(PKT_TIMESTAMP, ts);
        self.packet.uint(PKT_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        self.packet.msg(PKT_CLOCK_SNAPSHOT, &cs);
        self.packet.uint(PKT_SEQ_FLAGS, SEQ_CLEARED);
        self.packet.msg(PKT_DEFAULTS, &defaults);
        self.emit()?;
        for td in std::mem::take(&mut self.early) {
            self.describe(td)?;
        }
        Ok(())
    }

    /// Declares (once) the track of thread `tid` of process `pid`, named
    /// `name`; later calls for a known tid do nothing.
    pub fn thread(&mut self, pid: i32, tid: i32, name: &str) -> Result<u64, Error> {
        if let Some(t) = self.threads.get(&tid) {
            return Ok(t.uuid);
        }
        let parent = match self.processes.get(&pid) {
            Some(&u) => u,
            None => {
                let u = self.next_uuid;
                self.next_uuid += 1;
                let mut pd = Msg::default();
                pd.int(PD_PID, i64::from(pid));
                if pid == tid {
                    pd.bytes(PD_NAME, name.as_bytes());
                }
                let mut td = Msg::default();
                td.uint(TD_UUID, u);
                td.msg(TD_PROCESS, &pd);
                self.describe(td)?;
                self.processes.insert(pid, u);
                u
            }
        };
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        let mut th = Msg::default();
        th.int(THD_PID, i64::from(pid));
        th.int(THD_TID, i64::from(tid));
        th.bytes(THD_NAME, name.as_bytes());
        let mut td = Msg::default();
        td.uint(TD_UUID, uuid);
        td.uint(TD_PARENT, parent);
        td.bytes(TD_NAME, format!("{name} {tid}").as_bytes());
        td.msg(TD_THREAD, &th);
        self.describe(td)?;
        self.threads.insert(
            tid,
            Thread {
                uuid,
                open: Vec::new(),
            },
        );
        Ok(uuid)
    }

    /// The interned id of event name `name`, adding it to
    /// `self.interned` when new.
    fn event_name(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.event_names.get(name) {
            return iid;
        }
        let iid = self.event_names.len() as u64 + 1;
        self.event_names.insert(name.to_string(), iid);
        self.scratch.clear();
        self.scratch.uint(INTERNED_IID, iid);
        self.scratch.bytes(INTERNED_NAME, name.as_bytes());
        self.interned.msg(ID_EVENT_NAMES, &self.scratch);
        iid
    }

    /// The interned id of event category `name` (see
    /// [`Writer::event_name`]).
    fn category(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.categories.get(name) {
            return iid;
        }
        let iid = self.categories.len() as u64 + 1;
        self.categories.insert(name.to_string(), iid);
        self.scratch.clear();
        self.scratch.uint(INTERNED_IID, iid);
        self.scratch.bytes(INTERNED_NAME, name.as_bytes());
        self.interned.msg(ID_EVENT_CATEGORIES, &self.scratch);
        iid
    }

    /// The interned id of annotation name `name` (see
    /// [`Writer::event_name`]).
    fn annotation_name(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.annotation_names.get(name) {
            return iid;
        }
        let iid = self.annotation_names.len() as u64 + 1;
        self.annotation_names.insert(name.to_string(), iid);
        self.scratch.clear();
        self.scratch.uint(INTERNED_IID, iid);
        self.scratch.bytes(INTERNED_NAME, name.as_bytes());
        self.interned.msg(ID_DEBUG_ANNOTATION_NAMES, &self.scratch);
        iid
    }

    /// The interned id of string value `s`, adding it to `self.interned`
    /// when new; `None` when the table is full (the value is then written
    /// in place).
    fn string_value(&mut self, s: &str) -> Option<u64> {
        if let Some(&iid) = self.string_values.get(s) {
            return Some(iid);
        }
        if self.string_values.len() >= MAX_INTERNED_STRINGS
            || self.string_bytes + s.len() > MAX_INTERNED_STRING_BYTES
        {
            return None;
        }
        let iid = self.string_values.len() as u64 + 1;
        self.string_values.insert(s.to_string(), iid);
        self.string_bytes += s.len();
        self.scratch.clear();
        self.scratch.uint(INTERNED_IID, iid);
        self.scratch.bytes(INTERNED_STR, s.as_bytes());
        self.interned
            .msg(ID_DEBUG_ANNOTATION_STRING_VALUES, &self.scratch);
        Some(iid)
    }

    fn event(
        &mut self,
        tid: i32,
        ts: u64,
        kind: u64,
        name: Option<u64>,
        category: Option<u64>,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        let uuid = match self.threads.get(&tid) {
            Some(t) => t.uuid,
            None => self.thread(tid, tid, &format!("<{tid}>"))?,
        };
        if !self.started {
            self.start(ts)?;
        }
        self.last_ts = self.last_ts.max(ts);
        self.event.clear();
        self.event.uint(TE_TYPE, kind);
        self.event.uint(TE_TRACK, uuid);
        if let Some(iid) = category {
            self.event.uint(TE_CATEGORY_IIDS, iid);
        }
        if let Some(iid) = name {
            self.event.uint(TE_NAME_IID, iid);
        }
        for (k, v) in args {
            let iid = self.annotation_name(k);
            let string_iid = match *v {
                Arg::Str(s) => self.string_value(s),
                _ => None,
            };
            self.scratch.clear();
            self.scratch.uint(DA_NAME_IID, iid);
            match (*v, string_iid) {
                (Arg::Str(_), Some(i)) => self.scratch.uint(DA_STRING_IID, i),
                (Arg::Str(s), None) => self.scratch.bytes(DA_STRING, s.as_bytes()),
                (Arg::Int(i), _) => self.scratch.int(DA_INT, i),
                (Arg::Uint(u), _) => self.scratch.uint(DA_UINT, u),
                (Arg::Pointer(p), _) => self.scratch.uint(DA_POINTER, p),
                (Arg::Double(d), _) => self.scratch.double(DA_DOUBLE, d),
                (Arg::Bool(b), _) => self.scratch.uint(DA_BOOL, u64::from(b)),
            }
            self.event.msg(TE_DEBUG, &self.scratch);
        }
        if ts >= self.clock {
            self.packet.uint(PKT_TIMESTAMP, ts - self.clock);
            self.clock = ts;
        } else {
            // earlier than the last one: absolute, on the trace's clock
            self.packet.uint(PKT_TIMESTAMP, ts);
            self.packet.uint(PKT_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        }
        if !self.interned.0.is_empty() {
            self.packet.msg(PKT_INTERNED_DATA, &self.interned);
            self.interned.clear();
        }
        self.packet.msg(PKT_TRACK_EVENT, &self.event);
        self.emit()
    }

    /// Opens a slice `name` on thread `tid` at `ts` (ns); a thread with
    /// [`MAX_DEPTH`] slices open gets an instant instead.
    pub fn begin(
        &mut self,
        tid: i32,
        ts: u64,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        self.begin_in(tid, ts, None, name, args)
    }

    /// [`Writer::begin`] with the event in `category` (the event's system:
    /// Perfetto shows it as the slice's category; interned, two bytes an
    /// event).
    pub fn begin_in(
        &mut self,
        tid: i32,
        ts: u64,
        category: Option<&str>,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        let iid = self.event_name(name);
        let cat = category.map(|c| self.category(c));
        if self
            .threads
            .get(&tid)
            .is_some_and(|t| t.open.len() >= MAX_DEPTH)
        {
            self.flattened += 1;
            return self.event(tid, ts, TYPE_INSTANT, Some(iid), cat, args);
        }
        self.event(tid, ts, TYPE_SLICE_BEGIN, Some(iid), cat, args)?;
        if let Some(t) = self.threads.get_mut(&tid) {
            t.open.push(iid);
        }
        Ok(())
    }

    /// Closes the innermost open slice `name` on `tid` (and any opened
    /// inside it); with none open, writes an instant `name` instead. The
    /// fields go on the closing event.
    pub fn end(
        &mut self,
        tid: i32,
        ts: u64,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        self.end_in(tid, ts, None, name, args)
    }

    /// [`Writer::end`]; an instant written instead is in `category`.
    pub fn end_in(
        &mut self,
        tid: i32,
        ts: u64,
        category: Option<&str>,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        let iid = self.event_names.get(name).copied();
        let depth = iid.and_then(|iid| {
            self.threads
                .get(&tid)
                .and_then(|t| t.open.iter().rposition(|&n| n == iid))
        });
        let Some(depth) = depth else {
            return self.instant_in(tid, ts, category, name, args);
        };
        let inner = self
            .threads
            .get(&tid)
            .map_or(0, |t| t.open.len() - depth - 1);
        for _ in 0..inner {
            self.event(tid, ts, TYPE_SLICE_END, None, None, &[])?;
        }
        self.event(tid, ts, TYPE_SLICE_END, None, None, args)?;
        if let Some(t) = self.threads.get_mut(&tid) {
            t.open.truncate(depth);
        }
        Ok(())
    }

    /// An instant event `name` on `tid` at `ts`.
    pub fn instant(
        &mut self,
        tid: i32,
        ts: u64,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        self.instant_in(tid, ts, None, name, args)
    }

    /// [`Writer::instant`] with the event in `category`.
    pub fn instant_in(
        &mut self,
        tid: i32,
        ts: u64,
        category: Option<&str>,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        let iid = self.event_name(name);
        let cat = category.map(|c| self.category(c));
        self.event(tid, ts, TYPE_INSTANT, Some(iid), cat, args)
    }

    /// Ends every open slice at the last time stamp seen and returns the
    /// output (flushed).
    pub fn finish(mut self) -> Result<W, Error> {
        if !self.started && !self.early.is_empty() {
            self.start(0)?;
        }
        let mut open: Vec<(i32, usize)> = self
            .threads
            .iter()
            .map(|(&tid, t)| (tid, t.open.len()))
            .collect();
        open.sort();
        let ts = self.last_ts;
        for (tid, n) in open {
            for _ in 0..n {
                self.event(tid, ts, TYPE_SLICE_END, None, None, &[])?;
            }
        }
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Reading back what [`Writer`] wrote, for tests: `protoc --decode` text of
/// a trace with its interning and incremental time stamps expanded.
pub mod protoc_text {
    use std::collections::HashMap;

    /// Rewrites the text `protoc --decode=perfetto.protos.Trace` prints:
    /// every packet's `timestamp` absolute (deltas on the incremental clock
    /// added up), `name_iid` of events and annotations replaced by `name:`
    /// with the interned string, `string_value_iid` by `string_value:` with
    /// the interned value (as protoc prints it), `interned_data` blocks left
    /// out. Other lines are kept as they are.
    pub fn expand(text: &str) -> String {
        let mut out = String::new();
        let mut names: [HashMap<u64, String>; 4] = Default::default();
        let mut clock = 0u64;
        let mut packet: Vec<&str> = Vec::new();
        for line in text.lines() {
            if line.starts_with("packet {") {
                packet.clear();
            }
            packet.push(line);
            if line == "}" {
                expand_packet(&packet, &mut names, &mut clock, &mut out);
                packet.clear();
            }
        }
        for l in packet {
            out.push_str(l);
            out.push('\n');
        }
        out
    }

    fn value(line: &str, key: &str) -> Option<String> {
        line.trim()
            .strip_prefix(key)?
            .strip_prefix(": ")
            .map(str::to_string)
    }

    fn expand_packet(
        lines: &[&str],
        names: &mut [HashMap<u64, String>; 4],
        clock: &mut u64,
        out: &mut String,
    ) {
        // the packet's own fields are indented by two spaces
        let own = |key: &str| {
            lines
                .iter()
                .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
                .find_map(|l| value(l, key))
        };
        let absolute = own("timestamp_clock_id").is_some();
        // interned entries (event_names: 0, debug_annotation_names: 1,
        // debug_annotation_string_values: 2, event_categories: 3, kept as
        // protoc escapes them)
        let mut stack: Vec<&str> = Vec::new();
        let mut iid = None;
        for l in lines {
            let t = l.trim();
            if let Some(b) = t.strip_suffix(" {") {
                stack.push(b);
            } else if t == "}" {
                stack.pop();
            } else if stack.len() >= 3 && stack[1] == "interned_data" {
                let (table, key) = match stack[2] {
                    "event_names" => (0, "name"),
                    "debug_annotation_names" => (1, "name"),
                    "debug_annotation_string_values" => (2, "str"),
                    "event_categories" => (3, "name"),
                    _ => continue,
                };
                if let Some(v) = value(t, "iid") {
                    iid = v.parse().ok();
                } else if let (Some(v), Some(i)) = (value(t, key), iid) {
                    let v = v.strip_prefix('"').unwrap_or(&v);
                    let v = v.strip_suffix('"').unwrap_or(v);
                    names[table].insert(i, v.to_string());
                }
            } else if stack.len() >= 3
                && stack[1] == "clock_snapshot"
                && value(t, "timestamp").is_some()
            {
                // the snapshot ties the incremental clock to the absolute
                // one: both read the same here
                *clock = value(t, "timestamp")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
        }
        let mut stack: Vec<&str> = Vec::new();
        for l in lines {
            let t = l.trim();
            let indent = &l[..l.len() - l.trim_start().len()];
            if let Some(b) = t.strip_suffix(" {") {
                stack.push(b);
                if stack.get(1) == Some(&"interned_data") {
                    continue;
                }
            } else if t == "}" {
                let was = stack.len() >= 2 && stack[1] == "interned_data";
                stack.pop();
                if was {
                    continue;
                }
            } else if stack.get(1) == Some(&"interned_data") {
                continue;
            } else if stack.len() == 1 && value(t, "timestamp").is_some() {
                let v: u64 = value(t, "timestamp")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let abs = if absolute {
                    v
                } else {
                    *clock += v;
                    *clock
                };
                out.push_str(&format!("{indent}timestamp: {abs}\n"));
                continue;
            } else if let Some(v) = value(t, "string_value_iid") {
                let n = v.parse().ok().and_then(|i| names[2].get(&i));
                out.push_str(&format!(
                    "{indent}string_value: \"{}\"\n",
                    n.map_or("?", |s| s)
                ));
                continue;
            } else if let Some(v) = value(t, "category_iids") {
                let n = v.parse().ok().and_then(|i| names[3].get(&i));
                out.push_str(&format!("{indent}categories: {:?}\n", n.map_or("?", |s| s)));
                continue;
            } else if let Some(v) = value(t, "name_iid") {
                let table = usize::from(stack.last() == Some(&"debug_annotations"));
                let n = v.parse().ok().and_then(|i| names[table].get(&i));
                out.push_str(&format!("{indent}name: {:?}\n", n.map_or("?", |s| s)));
                continue;
            }
            out.push_str(l);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_table() {
        let cases: [(u64, &[u8]); 5] = [
            (0, &[0]),
            (1, &[1]),
            (127, &[0x7f]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for (v, want) in cases {
            let mut m = Msg::default();
            m.varint(v);
            assert_eq!(m.0, want, "{v}");
        }
        let mut m = Msg::default();
        m.int(1, -1);
        assert_eq!(m.0.len(), 11, "negative ints take 10 varint bytes");
    }
}
