//! A definition and the kernel's answer in the conformance corpus's block
//! format (crates/probe/fixtures/corpus/*/corpus.txt, written by
//! tests/kernel/guest/corpus/capture.sh and read by crates/probe/tests/corpus.rs):
//!
//! ```text
//! === DEF
//! p:grp/ev vfs_read x=%zz
//! --- RC 1
//! --- DYNAMIC_EVENTS
//! --- ERROR_LOG
//! [  12.345678] trace_kprobe: error: Invalid register name
//!   Command: p:grp/ev vfs_read x=%zz
//!                                ^
//! --- FORMAT grp/ev            (only when an event was created)
//! ...
//! === END
//! ```
//!
//! so that a disagreement the generator finds becomes a fixture as the
//! kernel answered it. The `RC` is the shell's `echo` status capture.sh
//! records: 0 for a taken write, 1 for a refused one.

use std::fmt::Write as _;

/// The kernel's raw answer to one definition, as captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The definition.
    pub def: String,
    /// The write was taken.
    pub accepted: bool,
    /// The listing after the write.
    pub listing: Vec<String>,
    /// The error_log text after the write (the new entries).
    pub error_log: String,
    /// `GROUP/EVENT` and the format file of the event created.
    pub format: Option<(String, String)>,
}

/// The block for `c`.
pub fn block(c: &Captured) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "=== DEF\n{}", c.def);
    let _ = writeln!(s, "--- RC {}", if c.accepted { 0 } else { 1 });
    s.push_str("--- DYNAMIC_EVENTS\n");
    for l in &c.listing {
        let _ = writeln!(s, "{l}");
    }
    s.push_str("--- ERROR_LOG\n");
    s.push_str(&c.error_log);
    if !c.error_log.is_empty() && !c.error_log.ends_with('\n') {
        s.push('\n');
    }
    if let Some((name, text)) = &c.format {
        let _ = writeln!(s, "--- FORMAT {name}");
        s.push_str(text);
        if !text.ends_with('\n') {
            s.push('\n');
        }
    }
    s.push_str("=== END\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_layout_matches_capture_sh() {
        let c = Captured {
            def: "p:g/e vfs_read".into(),
            accepted: true,
            listing: vec!["p:g/e vfs_read".into()],
            error_log: String::new(),
            format: Some(("g/e".into(), "name: e\nformat:\n".into())),
        };
        assert_eq!(
            block(&c),
            "=== DEF\np:g/e vfs_read\n--- RC 0\n--- DYNAMIC_EVENTS\np:g/e vfs_read\n\
             --- ERROR_LOG\n--- FORMAT g/e\nname: e\nformat:\n=== END\n"
        );
    }
}
