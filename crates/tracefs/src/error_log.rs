//! Reading the kernel's `error_log` and finding the entry a failed write made.
//!
//! Mirrors the output of `tracing_err_log_seq_show()` in
//! kernel/trace/trace.c: each entry is a header `[secs.usecs] LOC: error: MSG`,
//! a `  Command: CMD` line and, when the kernel knows the offending byte, a
//! caret line whose `^` sits under it. The top-level log is shared with every
//! other user of tracefs, so this module never clears it: a [`Mark`] taken
//! before a write tells which entries are new afterwards. It is not a log
//! watcher: nothing here follows the file over time.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Width of the `  Command: ` prefix the kernel prints before the command.
const COMMAND_PREFIX: &str = "  Command: ";

/// How much of a command 5.10 keeps: its entry holds 256 bytes of
/// `"\n  Command: CMD\n"` with the terminating NUL (`MAX_FILTER_STR_VAL`).
const CUT_COMMAND: usize = 256 - 1 - "\n  Command: ".len();

/// One entry of an `error_log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorLogEntry {
    /// Seconds part of the timestamp.
    pub secs: u64,
    /// Microseconds part of the timestamp.
    pub usecs: u32,
    /// Where the error came from, e.g. `trace_uprobe` or `event filter parse error`.
    pub location: String,
    /// The kernel's message, e.g. `Invalid register name`.
    pub message: String,
    /// The command the kernel was parsing.
    pub command: String,
    /// Byte offset of the caret in `command`, if the kernel printed one.
    pub caret: Option<usize>,
}

impl ErrorLogEntry {
    /// The command followed by a caret line under the offending byte.
    pub fn caret_display(&self) -> String {
        match self.caret {
            Some(pos) => format!("  {}\n  {}^", self.command, " ".repeat(pos)),
            None => format!("  {}", self.command),
        }
    }
}

/// Parses the text of an `error_log` file. Lines that fit no entry are
/// skipped, so a format change loses details rather than failing.
pub fn parse(text: &str) -> Vec<ErrorLogEntry> {
    let mut out: Vec<ErrorLogEntry> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(mut entry) = parse_header(line) else {
            continue;
        };
        if let Some(next) = lines.peek()
            && let Some(cmd) = next.strip_prefix(COMMAND_PREFIX)
        {
            entry.command = cmd.to_string();
            lines.next();
            if let Some(caret_line) = lines.peek()
                && caret_line.trim_start_matches(' ') == "^"
            {
                let col = caret_line.len() - 1;
                entry.caret = col.checked_sub(COMMAND_PREFIX.len());
                lines.next();
            } else if let Some(body) = cmd.strip_suffix('^') {
                // 5.10 keeps at most 255 bytes of "\n  Command: CMD\n": a cut
                // command loses its newline and the caret line follows on
                // the same line (prefix-wide spaces, then the position).
                // The cut is at CUT_COMMAND bytes, which also tells where
                // the command ends when it ends in spaces (arm64 5.10: a cut
                // after `a20=%x1:u8 ` read as caret 11 for 10).
                let cut = body
                    .get(CUT_COMMAND..)
                    .filter(|rest| rest.bytes().all(|b| b == b' '))
                    .map(|rest| (&body[..CUT_COMMAND], rest.len()));
                let (command, spaces) = cut.unwrap_or_else(|| {
                    let trimmed = body.trim_end_matches(' ');
                    (trimmed, body.len() - trimmed.len())
                });
                if let Some(pos) = spaces.checked_sub(COMMAND_PREFIX.len()) {
                    entry.command = command.to_string();
                    entry.caret = Some(pos);
                }
            }
        }
        out.push(entry);
    }
    out
}

fn parse_header(line: &str) -> Option<ErrorLogEntry> {
    let rest = line.strip_prefix('[')?;
    let (ts, rest) = rest.split_once("] ")?;
    let (secs, usecs) = ts.trim().split_once('.')?;
    let secs = secs.parse().ok()?;
    let usecs = usecs.parse().ok()?;
    let (location, message) = match rest.split_once(": error: ") {
        Some((loc, msg)) => (loc.to_string(), msg.to_string()),
        None => (String::new(), rest.to_string()),
    };
    Some(ErrorLogEntry {
        secs,
        usecs,
        location,
        message,
        command: String::new(),
        caret: None,
    })
}

/// A position in an `error_log`: entries after it are new.
#[derive(Debug, Clone, Default)]
pub struct Mark {
    last: Option<ErrorLogEntry>,
}

impl Mark {
    /// The end of a log whose entries were just read: entries after the
    /// last of `entries` are new.
    pub fn after(entries: &[ErrorLogEntry]) -> Mark {
        Mark {
            last: entries.last().cloned(),
        }
    }
}

/// One `error_log` file: the top-level one or an instance's.
#[derive(Debug, Clone)]
pub struct ErrorLog {
    path: PathBuf,
}

impl ErrorLog {
    /// The `error_log` file in the directory `dir` (tracefs root or instance).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join("error_log"),
        }
    }

    /// Reads and parses all entries. A missing file (kernels before 5.2)
    /// reads as empty.
    pub fn read(&self) -> Result<Vec<ErrorLogEntry>> {
        match fs::read_to_string(&self.path) {
            Ok(text) => Ok(parse(&text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io("cannot read error_log", &self.path, e)),
        }
    }

    /// The log held open, to be read many times (see [`OpenErrorLog`]).
    pub fn held_open(&self) -> OpenErrorLog {
        OpenErrorLog {
            path: self.path.clone(),
            file: None,
            text: String::new(),
        }
    }

    /// Remembers the current end of the log. Failures read as an empty log.
    pub fn mark(&self) -> Mark {
        Mark {
            last: self.read().ok().and_then(|mut v| v.pop()),
        }
    }

    /// The newest entry written after `mark` whose command is one of
    /// `commands` (compared with whitespace runs collapsed, as the kernel
    /// re-joins the words it split). With no `commands`, the newest entry
    /// after `mark`: only for a log nobody else writes (an own instance's).
    pub fn find_since(&self, mark: &Mark, commands: &[&str]) -> Option<ErrorLogEntry> {
        let entries = self.read().ok()?;
        let fresh = entries_since(&entries, mark);
        if commands.is_empty() {
            return fresh.last().cloned();
        }
        let wanted: Vec<String> = commands.iter().map(|c| normalise(c)).collect();
        fresh
            .iter()
            .rev()
            .find(|e| wanted.contains(&normalise(&e.command)))
            .cloned()
    }

    /// Empties the log. Only for a log this process owns (its own instance):
    /// the top-level log belongs to everyone.
    pub fn clear(&self) -> Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&self.path)
            .map_err(|e| Error::io("cannot clear error_log", &self.path, e))?;
        f.flush()
            .map_err(|e| Error::io("cannot clear error_log", &self.path, e))
    }
}

/// An `error_log` opened once and read again from its start each time
/// (a seq_file: lseek to 0 starts its walk of the entries over), with one
/// buffer for every read: [`ErrorLog::read`] without an open(2) per read.
#[derive(Debug)]
pub struct OpenErrorLog {
    path: PathBuf,
    file: Option<fs::File>,
    text: String,
}

impl OpenErrorLog {
    /// Reads and parses all entries, as [`ErrorLog::read`] does.
    pub fn read(&mut self) -> Result<Vec<ErrorLogEntry>> {
        use std::io::{Read, Seek};
        let file = match &mut self.file {
            Some(f) => f,
            None => match fs::File::open(&self.path) {
                Ok(f) => self.file.insert(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(Error::io("cannot read error_log", &self.path, e)),
            },
        };
        self.text.clear();
        if self.text.capacity() < 1 << 16 {
            self.text.reserve(1 << 16);
        }
        file.seek(io::SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut self.text))
            .map_err(|e| Error::io("cannot read error_log", &self.path, e))?;
        Ok(parse(&self.text))
    }
}

/// The entries of `entries` that come after `mark`.
pub fn entries_since<'a>(entries: &'a [ErrorLogEntry], mark: &Mark) -> &'a [ErrorLogEntry] {
    let Some(last) = &mark.last else {
        return entries;
    };
    if let Some(i) = entries.iter().rposition(|e| e == last) {
        return &entries[i + 1..];
    }
    // The marked entry rotated out (the kernel keeps only the last few, 8 on
    // 6.18, TRACING_LOG_ERRS_MAX): keep the newer ones.
    let first_newer = entries
        .iter()
        .position(|e| (e.secs, e.usecs) > (last.secs, last.usecs))
        .unwrap_or(entries.len());
    &entries[first_newer..]
}

fn normalise(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on the 6.18 host:
    //   echo 'p:ktrace_x/ev /bin/true:0x0 a=%zz' >> uprobe_events
    //   echo 'p:ktrace_x/ev /bin/true:0x0 a=%ax b=+0(%zz):u32' >> dynamic_events
    //   mkdir instances/ktrace_t
    //   echo 'foo ==' > instances/ktrace_t/events/sched/sched_switch/filter
    //   cat error_log; cat instances/ktrace_t/error_log
    // (the top-level log also holds five entries other helpers' tests made at
    // the same time, kept as captured)
    const TOP: &str = include_str!("../fixtures/error_log.6.18.txt");
    const FILTER: &str = include_str!("../fixtures/error_log.filter.6.18.txt");

    /// A log held open reads what was added since its last read (from the
    /// start again, as a seq_file is read after lseek 0), and a missing one
    /// reads as empty.
    #[test]
    fn a_log_held_open_reads_again_from_its_start() {
        let dir = std::env::temp_dir().join(format!("ktrace-elog-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut missing = ErrorLog::in_dir(&dir).held_open();
        assert!(missing.read().unwrap().is_empty());
        let entries: Vec<&str> = TOP.split_inclusive('\n').collect();
        fs::write(dir.join("error_log"), entries[..3].concat()).unwrap();
        let mut log = ErrorLog::in_dir(&dir).held_open();
        let first = log.read().unwrap();
        assert_eq!(first.len(), 1);
        fs::write(dir.join("error_log"), entries[..6].concat()).unwrap();
        let both = log.read().unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!(both[0], first[0]);
        assert_eq!(both, ErrorLog::in_dir(&dir).read().unwrap());
        assert_eq!(entries_since(&both, &Mark::after(&first)).len(), 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn parses_probe_errors_with_carets() {
        let e = parse(TOP);
        assert_eq!(e.len(), 7);
        assert!(
            e.iter()
                .all(|e| e.location == "trace_uprobe" && e.caret.is_some())
        );
        let last = e.last().unwrap();
        assert_eq!(&last.command[last.caret.unwrap()..], "S4");
        assert_eq!(e[0].secs, 485);
        assert_eq!(e[0].usecs, 74629);
        assert_eq!(e[0].location, "trace_uprobe");
        assert_eq!(e[0].message, "Invalid register name");
        assert_eq!(e[0].command, "p:ktrace_x/ev /bin/true:0x0 a=%zz");
        let pos = e[0].caret.unwrap();
        assert_eq!(&e[0].command[pos..], "%zz");
        let pos = e[1].caret.unwrap();
        assert_eq!(&e[1].command[pos..], "%zz):u32");
    }

    #[test]
    fn a_cut_command_of_5_10_keeps_its_caret_on_its_line() {
        // Captured on x86_64 5.10.262 (the differential tester): a command
        // longer than the entry's 255 bytes, its caret line run on.
        let text = "[  125.957572] trace_kprobe: error: Failed to register probe event\n  Command: p:ev dmi_string_nosave a0=%sp:u8 a1=%                     ^\n";
        let e = parse(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].command, "p:ev dmi_string_nosave a0=%sp:u8 a1=%");
        assert_eq!(e[0].caret, Some(10));
    }

    #[test]
    fn a_cut_command_ending_in_a_space_keeps_it() {
        // arm64 5.10.223, `p:ev49264 __raw_readq` with 128 arguments: the
        // kernel's caret is at 10; the 243 bytes kept end in a space.
        let mut cmd = String::from("p:ev49264 __raw_readq");
        for i in 0..128 {
            cmd.push_str(&format!(" a{i}=%x1:u8"));
        }
        let mut kept = cmd[..CUT_COMMAND].to_string();
        while !kept.ends_with(' ') {
            kept.pop();
            kept.insert(0, 'p');
        }
        assert_eq!(kept.len(), CUT_COMMAND);
        let text = format!(
            "[  286.002860] trace_kprobe: error: Failed to register probe event\n  Command: {kept}{}^\n",
            " ".repeat(COMMAND_PREFIX.len() + 10)
        );
        let e = parse(&text);
        assert_eq!(e[0].command, kept);
        assert_eq!(e[0].caret, Some(10));
    }

    #[test]
    fn parses_filter_error() {
        let e = parse(FILTER);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].location, "event filter parse error");
        assert_eq!(e[0].message, "Field not found");
        assert_eq!(e[0].command, "foo ==");
        assert_eq!(e[0].caret, Some(4));
    }

    #[test]
    fn caret_display_points_at_byte() {
        let e = &parse(TOP)[0];
        let shown = e.caret_display();
        let mut lines = shown.lines();
        let cmd = lines.next().unwrap();
        let caret = lines.next().unwrap();
        assert_eq!(&cmd[caret.len() - 1..], "%zz");
    }

    #[test]
    fn since_mark_table() {
        let all = parse(TOP);
        let cases: Vec<(Mark, usize)> = vec![
            (Mark { last: None }, 7),
            (
                Mark {
                    last: Some(all[0].clone()),
                },
                6,
            ),
            (
                Mark {
                    last: Some(all[6].clone()),
                },
                0,
            ),
        ];
        for (mark, n) in cases {
            assert_eq!(entries_since(&all, &mark).len(), n);
        }
        // A marked entry that rotated out: newer timestamps count.
        let mut gone = all[0].clone();
        gone.usecs -= 1;
        gone.command = "rotated".into();
        assert_eq!(entries_since(&all, &Mark { last: Some(gone) }).len(), 7);
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "[",
            "[x] y",
            "[  1.2] a: error: b\n  Command: \n^",
            "\n\n^\n",
        ] {
            let _ = parse(text);
        }
    }
}
