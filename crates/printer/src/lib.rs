//! ktrace-printer: output identical to the kernel's `trace` text, JSON lines
//! and a raw mode.
//!
//! Mirrors kernel/trace/trace_output.c (context columns), the probe print
//! functions in kernel/trace/trace_probe.c, trace_kprobe.c and
//! trace_uprobe.c. It formats records handed to it; reading pages is
//! ktrace-ring, parsing formats ktrace-event, and kallsyms lookups are
//! provided through the [`Symbolizer`] trait (implemented by ktrace-symbols).
//!
//! # Wiring (for the `ktrace trace` command)
//!
//! 1. Build [`ktrace_event::Events`] from the `format` files of the probes in
//!    the instance (`Events::add_with_kind` with the kind from
//!    `ProbeKind::from_dynamic_event(line)`), long size from `header_page`.
//! 2. Start [`ktrace_ring::Pipeline`] on [`ktrace_ring::Reader::open`] of
//!    the instance; feed pages into [`ktrace_ring::Merger`], flush on each
//!    `PipelineMsg::Round`.
//! 3. For each `Merged::Record` call [`TextPrinter::write_record`] (or
//!    [`JsonPrinter::write_record`], [`write_raw`]); for each `Merged::Lost`
//!    call [`TextPrinter::write_lost`] and [`LostSummary::add_missed`].
//! 4. At the end read `per_cpu/cpuN/stats` ([`ktrace_ring::CpuStats`]) into
//!    [`LostSummary::add_stats`] and print [`LostSummary`]'s line.

mod context;
mod json;
mod num;
mod summary;
mod text;

pub use context::{Comms, FlagStyle, write_task_cpu, write_timestamp};
pub use json::{JsonPrinter, write_raw};
pub use summary::LostSummary;
pub use text::{TextPrinter, clock_in_ns};

/// A kernel symbol covering an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// Symbol name.
    pub name: &'a str,
    /// Address minus the symbol's start.
    pub offset: u64,
    /// Symbol size (distance to the next symbol, as kallsyms computes it).
    pub size: u64,
    /// Module name for module symbols.
    pub module: Option<&'a str>,
}

/// Address → symbol lookups (implemented from /proc/kallsyms elsewhere).
pub trait Symbolizer {
    /// The symbol containing `addr`, if any.
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>>;
}

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
