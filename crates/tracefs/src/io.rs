//! Small helpers for reading and writing tracefs files safely.
//!
//! tracefs files have sharp edges: opening `kprobe_events`, `uprobe_events`,
//! `dynamic_events` or a `trigger` file with `O_TRUNC` wipes every probe or
//! trigger, for every user. Everything here opens for writing with
//! `O_APPEND` and never truncates. Each write is one `write(2)` call, so the
//! kernel parses it as one command batch. This is not a buffered writer.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::error_log::ErrorLog;

/// Writes `data` to the tracefs file `path` in one call, without truncating.
/// When the write fails and `log` is given, the entry the kernel wrote to
/// that `error_log` for one of `commands` (any new entry when `commands` is
/// empty) is attached to the error.
pub fn write(
    path: &Path,
    data: &str,
    log: Option<&ErrorLog>,
    commands: &[&str],
    what: &str,
) -> Result<()> {
    let mark = log.map(ErrorLog::mark);
    let res = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| write_once(&mut f, data.as_bytes()));
    res.map_err(|e| {
        let entry = match (log, &mark) {
            (Some(log), Some(mark)) => log.find_since(mark, commands),
            _ => None,
        };
        Error::io(what.to_string(), path, e).with_kernel(entry)
    })
}

/// Refuses `text` that is meant to be one tracefs command (a definition, a
/// filter, a trigger, a setting) but holds a newline or another control
/// character: tracefs would read the part after a newline as a second
/// command, so such text is never written. One trailing newline is allowed.
pub fn check_one_line(text: &str, what: &str) -> Result<()> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.char_indices().find(|(_, c)| c.is_control()) {
        None => Ok(()),
        Some((pos, c)) => Err(Error::new(
            ErrorKind::Rejected,
            format!(
                "{what} contains a control character ({c:?} at byte {pos}); it was not written: {body:?}"
            ),
        )),
    }
}

fn write_once(f: &mut fs::File, data: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        let n = f.write(&data[done..])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "tracefs accepted no bytes",
            ));
        }
        done += n;
    }
    Ok(())
}

/// Reads a tracefs file to a string.
pub fn read(path: &Path, what: &str) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Error::io(what.to_string(), path, e))
}

#[cfg(test)]
mod tests {
    use super::check_one_line;

    #[test]
    fn control_characters_in_one_command_are_refused() {
        assert!(check_one_line("p:g/e do_sys_openat2 dfd=%di", "definition").is_ok());
        assert!(check_one_line("common_pid == 1\n", "filter").is_ok());
        for bad in [
            "p:g/e foo\n-:someone/else",
            "p:g/e foo\tx=%di",
            "comm == \"a\"\r",
            "1\n\n",
            "stacktrace\u{1b}[2J",
        ] {
            let err = check_one_line(bad, "definition").unwrap_err();
            assert!(
                err.to_string().contains("control character"),
                "{bad:?}: {err}"
            );
        }
    }
}
