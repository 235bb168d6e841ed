//! ktrace-event: event `format` files and records decoded into typed values.
//!
//! Mirrors the format files tracefs writes for each event
//! (kernel/trace/trace_events.c, trace_probe.c's print fmt).
