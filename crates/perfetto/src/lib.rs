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
//! caller (a stream sink) hands it names, times and fields.
//!
//! Slices nest: a [`Writer::end`] closes the innermost open slice of that
//! name on the thread, ending any slices opened inside it first (a return
//! whose inner returns were lost); an end with no open slice of that name
//! (its entry was before the trace began) becomes an instant. Slices still
//! open at [`Writer::finish`] end at the last time stamp seen.

use std::collections::HashMap;
use std::io::Write;

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

// Perfetto field numbers (protos/perfetto/trace/...)
const TRACE_PACKET: u32 = 1;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_SEQ_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
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
const TE_DEBUG: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_TRACK: u32 = 11;
const TE_CATEGORIES: u32 = 22;
const TE_NAME: u32 = 23;
const DA_BOOL: u32 = 2;
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_DOUBLE: u32 = 5;
const DA_STRING: u32 = 6;
const DA_POINTER: u32 = 7;
const DA_NAME: u32 = 10;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
/// SEQ_INCREMENTAL_STATE_CLEARED on the first packet of the sequence.
const SEQ_CLEARED: u64 = 1;
const SEQ_ID: u64 = 1;

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
}

struct Thread {
    uuid: u64,
    open: Vec<String>,
}

/// A Perfetto trace being written to `W` (packets are written as they come;
/// memory holds one open-slice stack per thread).
pub struct Writer<W: Write> {
    w: W,
    threads: HashMap<i32, Thread>,
    processes: HashMap<i32, u64>,
    next_uuid: u64,
    first: bool,
    last_ts: u64,
    category: String,
}

impl<W: Write> Writer<W> {
    /// A writer whose events carry `category` (e.g. "ktrace").
    pub fn new(w: W, category: &str) -> Writer<W> {
        Writer {
            w,
            threads: HashMap::new(),
            processes: HashMap::new(),
            next_uuid: 1,
            first: true,
            last_ts: 0,
            category: category.to_string(),
        }
    }

    fn packet(&mut self, ts: Option<u64>, field: u32, body: &Msg) -> Result<(), Error> {
        let mut p = Msg::default();
        if let Some(ts) = ts {
            p.uint(PKT_TIMESTAMP, ts);
        }
        p.uint(PKT_SEQ_ID, SEQ_ID);
        if self.first {
            p.uint(PKT_SEQ_FLAGS, SEQ_CLEARED);
            self.first = false;
        }
        p.msg(field, body);
        let mut outer = Msg::default();
        outer.msg(TRACE_PACKET, &p);
        self.w.write_all(&outer.0)?;
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
                self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
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
        self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
        self.threads.insert(
            tid,
            Thread {
                uuid,
                open: Vec::new(),
            },
        );
        Ok(uuid)
    }

    fn event(
        &mut self,
        tid: i32,
        ts: u64,
        kind: u64,
        name: Option<&str>,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        let uuid = match self.threads.get(&tid) {
            Some(t) => t.uuid,
            None => self.thread(tid, tid, &format!("<{tid}>"))?,
        };
        self.last_ts = self.last_ts.max(ts);
        let mut te = Msg::default();
        te.uint(TE_TYPE, kind);
        te.uint(TE_TRACK, uuid);
        if let Some(n) = name {
            te.bytes(TE_CATEGORIES, self.category.as_bytes());
            te.bytes(TE_NAME, n.as_bytes());
        }
        for (k, v) in args {
            let mut da = Msg::default();
            da.bytes(DA_NAME, k.as_bytes());
            match *v {
                Arg::Int(i) => da.int(DA_INT, i),
                Arg::Uint(u) => da.uint(DA_UINT, u),
                Arg::Pointer(p) => da.uint(DA_POINTER, p),
                Arg::Str(s) => da.bytes(DA_STRING, s.as_bytes()),
                Arg::Double(d) => da.double(DA_DOUBLE, d),
                Arg::Bool(b) => da.uint(DA_BOOL, u64::from(b)),
            }
            te.msg(TE_DEBUG, &da);
        }
        self.packet(Some(ts), PKT_TRACK_EVENT, &te)
    }

    /// Opens a slice `name` on thread `tid` at `ts` (ns).
    pub fn begin(
        &mut self,
        tid: i32,
        ts: u64,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> Result<(), Error> {
        self.event(tid, ts, TYPE_SLICE_BEGIN, Some(name), args)?;
        if let Some(t) = self.threads.get_mut(&tid) {
            t.open.push(name.to_string());
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
        let depth = self
            .threads
            .get(&tid)
            .and_then(|t| t.open.iter().rposition(|n| n == name));
        let Some(depth) = depth else {
            return self.instant(tid, ts, name, args);
        };
        let inner = self
            .threads
            .get(&tid)
            .map_or(0, |t| t.open.len() - depth - 1);
        for _ in 0..inner {
            self.event(tid, ts, TYPE_SLICE_END, None, &[])?;
        }
        self.event(tid, ts, TYPE_SLICE_END, None, args)?;
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
        self.event(tid, ts, TYPE_INSTANT, Some(name), args)
    }

    /// Ends every open slice at the last time stamp seen and returns the
    /// output (flushed).
    pub fn finish(mut self) -> Result<W, Error> {
        let mut open: Vec<(i32, usize)> = self
            .threads
            .iter()
            .map(|(&tid, t)| (tid, t.open.len()))
            .collect();
        open.sort();
        let ts = self.last_ts;
        for (tid, n) in open {
            for _ in 0..n {
                self.event(tid, ts, TYPE_SLICE_END, None, &[])?;
            }
        }
        self.w.flush()?;
        Ok(self.w)
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
