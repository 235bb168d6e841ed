//! ktrace-printer: output identical to the kernel's `trace` text, JSON lines
//! and a raw mode.
//!
//! Mirrors kernel/trace/trace_output.c (context columns), the probe print
//! functions in kernel/trace/trace_probe.c, trace_kprobe.c and
//! trace_uprobe.c. It formats records handed to it; reading pages is
//! ktrace-ring, parsing formats ktrace-event, and kallsyms lookups are
//! provided through the [`Symbolizer`] trait (implemented by ktrace-symbols).
//!
//! # Sinks
//!
//! [`TextSink`], [`JsonSink`] and [`RawSink`] are [`ktrace_stream::Sink`]s
//! writing to any `Write`: records come decoded and filtered from
//! ktrace-stream, lines are built in a buffer and written in large chunks
//! at most once per reading round, and a write error ends the run (it comes
//! back from `Stream::poll` as `Error::Output`). [`TextPrinter`] and
//! [`JsonPrinter`] also format records on their own, for offline tools
//! over captured pages (examples/decode_dir.rs).

mod context;
mod json;
mod line;
mod num;
mod sink;
mod syscalls;
mod text;

pub use context::{FlagStyle, write_task_cpu, write_timestamp};
pub use json::{JsonPrinter, write_raw};
pub use ktrace_stream::{Comms, LostSummary};
pub use sink::{Buffered, Dest, JsonSink, RawSink, TextSink};
pub use syscalls::SyscallStyle;
pub use text::{TextPrinter, clock_in_ns};

/// A kernel symbol covering an address, and address → symbol lookups
/// (implemented from /proc/kallsyms elsewhere): ktrace-event's, which
/// prints `%pS` with them.
pub use ktrace_event::printfmt::{Symbol, Symbolizer};

/// A symbolizer that knows no symbols (addresses print as hex).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSymbols;

impl Symbolizer for NoSymbols {
    fn lookup(&self, _addr: u64) -> Option<Symbol<'_>> {
        None
    }
}

/// A symbolizer over a sorted table `(start, size, name, module)`; handy
/// for tests and small tables.
#[derive(Debug, Clone, Default)]
pub struct TableSymbols {
    syms: Vec<(u64, u64, String, Option<String>)>,
}

impl TableSymbols {
    /// Builds the table (sorted here).
    pub fn new(mut syms: Vec<(u64, u64, String, Option<String>)>) -> TableSymbols {
        syms.sort_by_key(|s| s.0);
        TableSymbols { syms }
    }
}

impl Symbolizer for TableSymbols {
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, size, name, module) = &self.syms[i];
        (addr - start < *size).then(|| Symbol {
            name,
            offset: addr - start,
            size: *size,
            module: module.as_deref(),
        })
    }
}
