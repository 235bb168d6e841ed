//! ktrace-tracefs: the only part of ktrace that touches tracefs.
//!
//! Mount discovery, instances, dynamic events, enable/filter/trigger files,
//! error_log, profiles and README feature detection, and the files the
//! reading path opens ([`buffers`]: per-CPU ring buffers, stats, clocks,
//! formats, saved_cmdlines). The tracefs root is always
//! a parameter so tests can point it anywhere. Ownership rules live in
//! [`owner`]: everything this crate creates is named after its owning
//! process, and nothing else is ever removed or reconfigured. It does not
//! read ring buffers (ktrace-ring) nor parse fetch arguments (ktrace-probe).

pub mod buffers;
pub mod debugfs;
pub mod discover;
pub mod dynevent;
pub mod error;
pub mod error_log;
pub mod features;
pub mod instance;
pub mod io;
pub mod owner;
pub mod pin;
pub mod profile;
pub mod tables;

pub use buffers::{CpuBuffer, EventById};
pub use discover::ProbeFile;
pub use dynevent::{DynEvent, DynEvents, NewEvent};
pub use error::{Error, ErrorKind, Result};
pub use error_log::{ErrorLog, ErrorLogEntry};
pub use features::Features;
pub use instance::{CpuStats, Instance};
pub use owner::SessionName;
