//! ktrace-probe: the kernel's dynamic-probe definition language.
//!
//! Parses, checks, names and renders the lines accepted by `kprobe_events`,
//! `uprobe_events` and `dynamic_events` (Documentation/trace/kprobetrace.rst,
//! uprobetracer.rst; kernel/trace/trace_probe.c). Pure code over strings: no I/O.
