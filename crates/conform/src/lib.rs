//! ktrace-conform: differential testing of ktrace's definition checker
//! against a real kernel. A seeded [`generate`]r draws definitions from the
//! kernel's grammar (every kind, fetch form and type, names, limits) and
//! mutates them; [`compare`](mod@compare) holds the kernel's answer to one definition
//! (the write's verdict, the error_log entry, the readback, the format
//! file) against ktrace's (`ktrace check` on the same line) field by field
//! and sorts each disagreement by category and level; [`record`] writes a
//! disagreement in the conformance corpus's block format, so it becomes a
//! fixture with the kernel's answer captured.
//!
//! Pure code: the kernel is asked by the binary (`ktrace conform`, which
//! writes through ktrace-tracefs inside a test guest), and ktrace's answer
//! comes from the same code as `ktrace check`. Nothing here decides whether
//! a definition is valid.

pub mod compare;
pub mod filtergen;
pub mod generate;
pub mod record;
pub mod rng;

pub use compare::{Answer, Disagreement, Field, Level, Undone, compare};
pub use generate::{Case, File, Function, Gen, Param, Pool, Tracepoint};
pub use rng::Rng;
