//! The stream loop of a live run: records handed to the sink until the
//! duration, the count, the command's exit, the end of `-p PID`, a signal
//! or an output error; the drain of the partial pages left; and the end of
//! reading with its account.

use std::io;
use std::process::Child;
use std::time::{Duration, Instant};

use ktrace_stream::{EndOfRun, Sink, Status, Stream};

use super::{Run, RunArgs, Stop};
use crate::output;
use crate::session::Signals;

/// Hands records to `sink` until the duration, the count, the command's
/// exit, a signal or an output error; then stops recording and drains what
/// is left. Returns why, and the error to exit with (if any).
pub(crate) fn stream_loop(
    args: &RunArgs,
    signals: &Signals,
    deadline: Option<Instant>,
    run: &mut Run,
    sink: &mut dyn Sink,
) -> (Stop, Option<anyhow::Error>) {
    stream_loop_ticking(args, signals, deadline, run, sink, &mut || Ok(()))
}

/// [`stream_loop`] calling `tick` at least every 100 ms while it reads
/// (per-interval output of the aggregating commands); an error from it
/// stops the run as an output error would.
pub(crate) fn stream_loop_ticking(
    args: &RunArgs,
    signals: &Signals,
    deadline: Option<Instant>,
    run: &mut Run,
    sink: &mut dyn Sink,
    tick: &mut dyn FnMut() -> io::Result<()>,
) -> (Stop, Option<anyhow::Error>) {
    if let Err(e) = run.stream.begin(sink) {
        return failed(e);
    }
    let test_panic = std::env::var_os("KTRACE_TEST_PANIC").is_some();
    let stop = loop {
        if let Some(sig) = signals.caught() {
            break Stop::Signal(sig);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Stop::Duration;
        }
        if test_panic {
            // Test-only (KTRACE_TEST_PANIC): proves cleanup after a panic.
            panic!("KTRACE_TEST_PANIC set: panicking mid-run");
        }
        let exited = match child_exited(&run.child) {
            Ok(e) => e,
            Err(e) => return (Stop::ReadFailed, Some(e)),
        };
        if run.child.is_none() && args.pid.is_some_and(|p| !process_exists(p)) {
            // `-p PID` ends when the process does; take what is left.
            break Stop::ProcessExited;
        }
        let wait = deadline.map_or(Duration::from_millis(100), |d| {
            d.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        });
        let polled = run
            .stream
            .poll(if exited { Duration::ZERO } else { wait }, sink);
        warn(&mut run.stream);
        if run.disturbed.is_none() && run.checked.elapsed() >= Duration::from_secs(1) {
            run.checked = Instant::now();
            if let Some(m) = run.sess.disturbance(true) {
                crate::say!("warning: {m}");
                run.disturbed = Some(m);
            }
        }
        match polled {
            Ok(Status::Running) => {}
            Ok(Status::Stopped) => break Stop::Count,
            Ok(Status::Finished) => {
                return (
                    Stop::ReadFailed,
                    Some(anyhow::anyhow!(
                        "the ring-buffer reader stopped unexpectedly"
                    )),
                );
            }
            Err(e) => return failed(e),
        }
        if exited {
            break Stop::CommandExited;
        }
        if let Err(e) = tick() {
            return failed(ktrace_stream::Error::Output(e));
        }
    };
    run.sess.stop();
    if stop != Stop::Count {
        // Recording has stopped: take the partial pages left.
        run.stream.stop();
        loop {
            let polled = run.stream.poll(Duration::from_millis(100), sink);
            warn(&mut run.stream);
            match polled {
                Ok(Status::Running) => {}
                Ok(Status::Finished | Status::Stopped) => break,
                Err(e) => return failed(e),
            }
        }
    }
    (stop, None)
}

/// The stop and exit error for a stream error: a closed pipe is a quiet
/// stop; any other output error or a reader failure is an error.
fn failed(e: ktrace_stream::Error) -> (Stop, Option<anyhow::Error>) {
    match &e {
        ktrace_stream::Error::Output(io) if io.kind() == io::ErrorKind::BrokenPipe => {
            (Stop::OutputClosed, None)
        }
        ktrace_stream::Error::Output(io) if output::is_stopped(io) => (Stop::Stopped, None),
        ktrace_stream::Error::Output(_) => (Stop::OutputFailed, Some(e.into())),
        _ => (Stop::ReadFailed, Some(e.into())),
    }
}

pub(crate) fn warn(stream: &mut Stream) {
    for w in stream.take_warnings() {
        crate::say!("{w}");
    }
}

/// Stops reading, takes the end-of-run account (per-CPU stats) and ends
/// the sink. The sink's last writes can fail: a closed pipe then ends the
/// run quietly (`stop` becomes [`Stop::OutputClosed`]), any other failure
/// becomes `error` (unless there is one already); the account is kept
/// either way.
pub(crate) fn finish(
    run: &mut Run,
    sink: &mut dyn Sink,
    stop: &mut Stop,
    error: &mut Option<anyhow::Error>,
) -> anyhow::Result<EndOfRun> {
    run.sess.stop();
    let end = run.stream.finish(&mut Discard);
    warn(&mut run.stream);
    let end = end?;
    // the output is gone: account without writing to it
    if !matches!(
        *stop,
        Stop::OutputClosed | Stop::OutputFailed | Stop::Stopped
    ) && let Err(e) = sink.finish(&end)
    {
        let (s, err) = failed(ktrace_stream::Error::Output(e));
        *stop = s;
        if error.is_none() {
            *error = err;
        }
    }
    Ok(end)
}

/// A sink that keeps nothing (the end of a run whose output failed).
struct Discard;

impl Sink for Discard {
    fn event(&mut self, _: &ktrace_stream::Event<'_>) -> io::Result<ktrace_stream::Flow> {
        Ok(ktrace_stream::Flow::Continue)
    }
}

/// Whether the traced command has exited. It is not reaped here
/// (`WNOWAIT`): it stays a zombie until the end of the run
/// ([`conclude`](super::conclude) reaps it), so `/proc/PID/comm` still
/// names its records when the reader reaches them after it exited. Once
/// reaped, only the kernel's `saved_cmdlines` could, and that loses names
/// (128 slots shared by every task switched after an event, a save given
/// up when its lock is contended): a recording and a live run of the same
/// command then disagreed on its name.
pub(super) fn child_exited(child: &Option<Child>) -> anyhow::Result<bool> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    match child {
        Some(c) => {
            let pid = Pid::from_raw(c.id() as i32)
                .ok_or_else(|| anyhow::anyhow!("the command has no pid"))?;
            let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
            Ok(waitid(WaitId::Pid(pid), opts)?.is_some())
        }
        None => Ok(false),
    }
}

/// Whether a process `pid` exists (and is not a zombie).
pub(super) fn process_exists(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| ktrace_tracefs::owner::stat_is_live(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command's exit is seen without reaping it: its /proc name stays
    /// for the records read after (the reap at the run's end gives the
    /// status). Reaped here, as before, `/proc/PID/comm` was gone.
    #[test]
    fn an_exited_command_keeps_its_name_until_the_end() {
        let mut child = Some(std::process::Command::new("true").spawn().unwrap());
        let pid = child.as_ref().unwrap().id();
        let t0 = Instant::now();
        while !child_exited(&child).unwrap() {
            assert!(t0.elapsed() < Duration::from_secs(10), "true did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap(),
            "true\n"
        );
        assert!(child_exited(&child).unwrap());
        let st = child.as_mut().unwrap().try_wait().unwrap().expect("reaped");
        assert!(st.success());
        assert!(std::fs::metadata(format!("/proc/{pid}")).is_err());
        assert!(!child_exited(&None).unwrap());
    }
}
