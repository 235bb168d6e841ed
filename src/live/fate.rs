//! What became of the traced command and of ktrace: the line for a
//! command that failed or was killed, and the exit codes (the command's
//! status, 128 + N for a signal, 0 for Ctrl-C).

use std::process::ExitCode;

/// The exit code after signal `sig`: 0 for SIGINT (Ctrl-C is the normal
/// way to stop), 128 + N otherwise.
pub(crate) fn signal_exit(sig: i32) -> ExitCode {
    if sig == signal_hook::consts::SIGINT {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(128u8.saturating_add(sig as u8))
    }
}

/// What became of the traced command, when it did not simply succeed: a
/// line for the user and the exit code ktrace passes on (the command's own
/// status, or 128 + N for a signal, as a shell does).
pub(crate) fn command_fate(
    status: std::process::ExitStatus,
    uprobes: bool,
) -> Option<(String, u8)> {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return (code != 0).then(|| {
            (
                format!("the command exited with status {code}"),
                u8::try_from(code).unwrap_or(1),
            )
        });
    }
    let sig = status.signal()?;
    let name = signal_name(sig);
    let mut line = format!("the command was killed by signal {sig} ({name})");
    if uprobes && matches!(sig, 4 | 5 | 7 | 11) {
        line.push_str(
            "; a uprobe placed inside an instruction (not on an instruction boundary) \
             corrupts the probed code: check the offsets against the disassembly",
        );
    }
    Some((line, 128u8.saturating_add(sig as u8)))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}
