//! ktrace-tracefs: the only part of ktrace that touches tracefs.
//!
//! Mount discovery, instances, dynamic events, enable/filter/trigger files,
//! error_log, profiles and README feature detection. The tracefs root is always
//! a parameter so tests can point it anywhere.
