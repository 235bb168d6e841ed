//! ktrace-printer: output identical to the kernel's `trace` text, and JSON.
//!
//! Mirrors kernel/trace/trace_output.c and the probe print functions in
//! trace_probe.c.
