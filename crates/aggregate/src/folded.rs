//! Counts by stack as folded stacks: the text flamegraph.pl, inferno and
//! speedscope read (Brendan Gregg's FlameGraph "folded" format, as
//! stackcollapse-perf.pl writes it): one line per distinct stack, its
//! frames root first separated by `;`, a space, and its count, e.g.
//! `entry_SYSCALL_64;do_syscall_64;__x64_sys_openat;do_sys_openat2 42`.
//!
//! The input is a [`CountReport`] keyed by `stack` (innermost frame first,
//! as both engines give it), so the counts are the table's. A frame is
//! folded to its function: a kernel frame `sym+0xoff` or `sym+0xoff/0xsize`
//! loses its offset (calls from two places of one function are one frame of
//! the graph, as in stackcollapse-perf.pl without `--addrs`), so two rows
//! of the table can become one line (their counts added); a frame that is
//! an address (`0x…`: user frames, unknown kernel ones) stays as it is.
//! Other keys of a compound key (`--by comm --by stack`) come before the
//! stack as root frames, in key order. A row without a stack is the one
//! frame `[no stack]`; hits beyond `--max-keys` are `[other]`. `;` and
//! control characters in a frame (a task name may hold them) become `_`.
//! Lines are sorted, so equal input gives equal output.
//!
//! It is not a flame graph renderer and reads no symbols: the frames come
//! named.

use std::collections::BTreeMap;

use crate::agg::CountReport;
use crate::key::KeyValue;

/// A frame as the graph shows it: a kernel `sym+0xoff[/0xsize]` as `sym`,
/// anything else as it is.
pub fn frame_name(frame: &str) -> &str {
    if frame.starts_with("0x") {
        return frame;
    }
    match frame.rfind("+0x") {
        Some(i) if i > 0 => &frame[..i],
        _ => frame,
    }
}

/// Folded stacks being gathered: line (without its count) → count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    lines: BTreeMap<String, u64>,
}

impl Folded {
    /// No stacks yet.
    pub fn new() -> Folded {
        Folded::default()
    }

    /// Adds `count` hits of the stack whose frames are `roots` (root
    /// first, e.g. other key values) then `stack` (innermost first).
    pub fn add<R: AsRef<str>, S: AsRef<str>>(&mut self, roots: &[R], stack: &[S], count: u64) {
        let mut line = String::new();
        let frames = roots
            .iter()
            .map(AsRef::as_ref)
            .chain(stack.iter().rev().map(|f| frame_name(f.as_ref())));
        for f in frames {
            if !line.is_empty() {
                line.push(';');
            }
            push_frame(&mut line, f);
        }
        if line.is_empty() {
            line.push_str("[no stack]");
        }
        *self.lines.entry(line).or_insert(0) += count;
    }

    /// The rows of a count report (keyed by `stack`, alone or with other
    /// keys) and its `other` hits.
    pub fn from_count(r: &CountReport) -> Folded {
        let mut f = Folded::new();
        for (key, n) in &r.rows {
            let mut roots: Vec<String> = Vec::new();
            let mut stack: &[String] = &[];
            let mut no_stack = true;
            for (i, v) in key.iter().enumerate() {
                match v {
                    KeyValue::Stack(frames) => {
                        stack = frames;
                        no_stack = frames.is_empty();
                    }
                    // the stack key's slot, for a hit without a stack
                    KeyValue::Missing if r.keys.get(i).is_some_and(|k| k == "stack") => {}
                    v => roots.push(v.to_string()),
                }
            }
            if no_stack {
                roots.push("[no stack]".to_string());
            }
            f.add(&roots, stack, *n);
        }
        if r.other > 0 {
            f.add(&["[other]"], &[] as &[&str], r.other);
        }
        f
    }

    /// (line without count, count), lines sorted.
    pub fn lines(&self) -> impl Iterator<Item = (&str, u64)> {
        self.lines.iter().map(|(l, n)| (l.as_str(), *n))
    }

    /// Appends the folded text: `frames count` per line.
    pub fn write(&self, out: &mut String) {
        for (l, n) in self.lines() {
            out.push_str(l);
            out.push(' ');
            out.push_str(&n.to_string());
            out.push('\n');
        }
    }
}

/// Appends `f` with `;` and control characters as `_` (an empty frame as
/// `[unknown]`).
fn push_frame(line: &mut String, f: &str) {
    if f.is_empty() {
        line.push_str("[unknown]");
        return;
    }
    line.extend(
        f.chars()
            .map(|c| if c == ';' || c.is_control() { '_' } else { c }),
    );
}

/// The folded text of a count report keyed by `stack`.
pub fn count_folded(out: &mut String, r: &CountReport) {
    Folded::from_count(r).write(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[&str]) -> KeyValue {
        KeyValue::Stack(frames.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn frame_names() {
        let table = [
            ("do_sys_openat2+0x8a", "do_sys_openat2"),
            ("do_sys_openat2+0x8a/0x120", "do_sys_openat2"),
            ("foo.isra.0+0x10", "foo.isra.0"),
            ("0x7f12ab", "0x7f12ab"),
            ("0xffffffff81000000", "0xffffffff81000000"),
            ("plain", "plain"),
            ("+0x10", "+0x10"),
        ];
        for (frame, want) in table {
            assert_eq!(frame_name(frame), want, "{frame}");
        }
    }

    #[test]
    fn root_first_with_counts() {
        let r = CountReport::new(
            vec!["stack".into()],
            [
                (
                    vec![stack(&[
                        "do_sys_openat2+0x8a",
                        "__x64_sys_openat+0x55",
                        "do_syscall_64+0x3b",
                        "entry_SYSCALL_64_after_hwframe+0x44",
                    ])],
                    42,
                ),
                (vec![stack(&["0x401136", "0x401180"])], 3),
            ],
        );
        let mut out = String::new();
        count_folded(&mut out, &r);
        assert_eq!(
            out,
            "0x401180;0x401136 3\n\
             entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_openat;do_sys_openat2 42\n"
        );
    }

    #[test]
    fn stacks_that_differ_only_in_offsets_are_one_line() {
        let r = CountReport::new(
            vec!["stack".into()],
            [
                (vec![stack(&["a+0x1", "main+0x10"])], 2),
                (vec![stack(&["a+0x7", "main+0x10"])], 5),
            ],
        );
        let f = Folded::from_count(&r);
        assert_eq!(f.lines().collect::<Vec<_>>(), [("main;a", 7)]);
        // the counts are the table's: nothing lost, nothing added
        assert_eq!(f.lines().map(|l| l.1).sum::<u64>(), r.total);
    }

    #[test]
    fn other_keys_missing_stacks_and_overflow() {
        let r = CountReport::new(
            vec!["comm".into(), "stack".into()],
            [
                (
                    vec![KeyValue::Str("my;task".into()), stack(&["0x10", "0x20"])],
                    4,
                ),
                (vec![KeyValue::Str("sh".into()), KeyValue::Missing], 1),
            ],
        )
        .with_other(6, 2);
        let mut out = String::new();
        count_folded(&mut out, &r);
        assert_eq!(out, "[other] 6\nmy_task;0x20;0x10 4\nsh;[no stack] 1\n");
        let alone = CountReport::new(vec!["stack".into()], [(vec![KeyValue::Missing], 9)]);
        let mut out = String::new();
        count_folded(&mut out, &alone);
        assert_eq!(out, "[no stack] 9\n");
    }

    #[test]
    fn control_characters_and_empty_frames() {
        let mut f = Folded::new();
        f.add(&["a\nb"], &["", "x\ty"], 1);
        let mut out = String::new();
        f.write(&mut out);
        assert_eq!(out, "a_b;x_y;[unknown] 1\n");
    }
}
