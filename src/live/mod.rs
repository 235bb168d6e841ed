//! The live run shared by the commands that trace: the session's setup
//! (probes checked and created in ktrace's own group, its own instance,
//! filters and triggers that keep ktrace's own threads out, the traced
//! command started), the stream loop that hands records to a sink until
//! the duration, the count, the command's exit or a signal, the drain at
//! the end, and the teardown with its summary.
//!
//! Commands differ only in their sink (text, JSON, raw, a record file, an
//! aggregation) and in what they do with it at the end; the lifecycle and
//! its cleanup on every exit are here once. It is not the sinks
//! (ktrace-printer and others) nor the definition language (crate::resolve,
//! ktrace-probe).
//!
//! This module holds the options and the run's types; its parts: `setup`
//! (the session made and started), `stream` (the loop and the drain),
//! `summary` (the teardown, its summary and the exit code), `kernel` (a
//! run the kernel aggregates itself) and `fate` (what became of the traced
//! command).
//!
//! Test-only: when the environment variable `KTRACE_TEST_PANIC` is set, the
//! run loop panics once the probes are enabled, so tests can prove that a
//! panic still tears the session down. It has no other use.

mod fate;
mod kernel;
mod setup;
mod stream;
mod summary;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use ktrace_stream::Stream;
use ktrace_symbols::KernelView;

use crate::session::{Session, Signals};

pub(crate) use fate::signal_exit;
pub(crate) use kernel::{
    KernelRun, conclude_kernel, kernel_pids_disturbed, kernel_wait, setup_kernel,
};
pub(crate) use setup::{Beside, say_functions, setup_built, setup_failed, setup_function};
pub(crate) use stream::{finish, stream_loop, stream_loop_ticking};
pub(crate) use summary::conclude;

/// What every setup of a live run is given besides the session and its
/// probes: the run's options, the tracefs mount, the kernel view and the
/// signals caught. Built once by the command that traces.
#[derive(Clone, Copy)]
pub(crate) struct Live<'a> {
    pub(crate) args: &'a RunArgs,
    pub(crate) root: &'a Path,
    pub(crate) view: &'a KernelView,
    pub(crate) signals: &'a Signals,
}

/// The options of a live run that every tracing command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Event filter applied to every probe (the kernel's filter language).
    #[arg(short = 'f', long)]
    pub filter: Option<String>,
    /// Trigger added to every probe (e.g. 'traceoff:1', 'stacktrace').
    #[arg(long)]
    pub trigger: Option<String>,
    /// Stop after this many seconds (a finite number above zero).
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub duration: Option<f64>,
    /// Stop after this many events (at least 1).
    #[arg(short = 'n', long, value_name = "COUNT", value_parser = crate::cli::count)]
    pub count: Option<u64>,
    /// Only events of this process (its threads and the children it forks).
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// Per-CPU buffer size of the session's instance, in KiB (at most the
    /// machine's memory).
    #[arg(long, value_name = "KB", value_parser = crate::cli::buffer_kb)]
    pub buffer_size: Option<u64>,
    /// Trace clock of the session's instance (see tracefs trace_clock).
    #[arg(long)]
    pub clock: Option<String>,
    /// The system (group) ktrace shows and writes for the probes, in text,
    /// JSON, raw output, recordings (trace.dat's system directories, so
    /// trace-cmd and KernelShark list NAME/EVENT), Perfetto and errors:
    /// `ktrace` by default. The kernel still holds the probes in the
    /// session's own group (`ktrace_p<PID>_s<START>_n<PIDNS>`), so sessions
    /// never collide. A group written in a definition (`p:mygrp/ev ...`)
    /// is shown for that probe instead. A C identifier of at most 63 bytes,
    /// not `ftrace`.
    #[arg(long, value_name = "NAME", value_parser = crate::cli::group)]
    pub group: Option<String>,
    /// Command to run and trace (with the processes it forks); tracing
    /// stops when it exits, and ktrace exits with its status (128+N when a
    /// signal N killed it). When -d, -n or a signal ends tracing first, the
    /// command is left running, not killed.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The kernel's own events a `trace` or `record` run switches on beside
/// its probes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EventArgs {
    /// Also trace the kernel's own events (tracepoints) in the session's
    /// instance, beside the probes: SYS:EVENT, SYS:* (a whole system),
    /// EVENT, or *:* (every event), as the kernel's set_event file takes
    /// them (whole names; `*` alone stands for any). Repeatable. They obey
    /// -p, leave ktrace's own threads out, print as the kernel's `trace`
    /// prints them, and are recorded with their formats.
    #[arg(short = 'e', long = "event", value_name = "SYS:EVENT", value_parser = event_spec)]
    pub events: Vec<String>,
}

/// A `set_event` word: no `!` (that switches off), no blank or control
/// character, at most one `:`.
fn event_spec(text: &str) -> Result<String, String> {
    let bad = text.is_empty()
        || text.starts_with('!')
        || text.chars().any(|c| c.is_whitespace() || c.is_control())
        || text.matches(':').count() > 1
        || text.split(':').any(str::is_empty);
    if bad {
        Err(format!(
            "{text:?} is not an event: give SYS:EVENT (sched:sched_switch), SYS:* (sched:*), \
             EVENT, or *:* for every event"
        ))
    } else {
        Ok(text.to_string())
    }
}

impl RunArgs {
    /// A new session in the tracefs at `root`, showing `--group` (or
    /// `ktrace`) as its probes' system.
    pub fn session(&self, root: &Path) -> anyhow::Result<Session> {
        let mut sess = Session::new(root)?;
        sess.set_system(self.group.as_deref());
        Ok(sess)
    }

    /// When the run must end by `-d`, counted from now.
    pub fn deadline(&self) -> Option<Instant> {
        self.duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d))
    }
}

/// Why the run loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Duration,
    Count,
    CommandExited,
    /// The process of `-p PID` is gone.
    ProcessExited,
    Signal(i32),
    /// The output's reader went away (EPIPE): a quiet stop.
    OutputClosed,
    /// A write was given up because a stop was asked for (a signal, the
    /// deadline) while the output was not being read.
    Stopped,
    /// Writing the output failed (a full disk, an I/O error): exit 1.
    OutputFailed,
    /// Reading the ring buffer failed: exit 1.
    ReadFailed,
}

/// What setup made: the session with its probes enabled, the stream
/// reading its instance, and the traced command.
/// (Fields drop in order: the stream, closing the per-CPU buffers, before
/// the session, whose teardown removes the instance.)
pub(crate) struct Run {
    pub(crate) stream: Stream,
    pub(crate) sess: Session,
    pub(crate) inst: ktrace_tracefs::Instance,
    pub(crate) child: Option<Child>,
    /// The command's exit status, once it has exited.
    pub(crate) status: Option<std::process::ExitStatus>,
    /// The header of the instance's `trace` file, read before enabling
    /// (opening `trace` pauses recording while it is open).
    pub(crate) trace_header: Option<String>,
    /// The modules the kernel probes live in (an unload is reported).
    pub(crate) modules: crate::modwatch::ModuleWatch,
    /// What someone else did to the session, once seen (reported, exit 1).
    pub(crate) disturbed: Option<String>,
    /// When the session was last checked for that.
    pub(crate) checked: Instant,
}
