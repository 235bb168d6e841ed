//! ktrace-ring: decoding of the kernel's per-CPU ring-buffer sub-buffer pages.
//!
//! Mirrors kernel/trace/ring_buffer.c: page header, record headers, time
//! extends and stamps, padding, lost-event flags; per-CPU readers and a k-way
//! merge by timestamp.
