//! `ktrace trace`: create probes in a private session, stream their events,
//! clean up, and print a summary.
//!
//! Definitions are the kernel's own (kprobetrace.rst, uprobetracer.rst),
//! taken verbatim, plus the conveniences `crate::resolve` turns into kernel
//! definitions (bare symbols, `%return`, `PATH:SYMBOL`, `LIB:SYMBOL`,
//! wildcards, `argN`); every resulting line is checked by ktrace-probe
//! against the live kernel before anything is written. Only the group is
//! replaced by the session's in the kernel (the event name is kept, or made
//! up like the kernel's when absent); what is shown names the stable system
//! (`ktrace`, `--group`, or the group written, see `session::Probe`). Events stream to stdout until the duration, the
//! count, the traced command's exit, or SIGINT/SIGTERM/SIGHUP; the summary
//! goes to stderr.
//!
//! The lifecycle (setup, stream loop, drain, teardown, summary) is
//! crate::live's, shared with the other tracing commands; this module
//! chooses the sink and the destination.

use std::io;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ktrace_printer::{
    Dest, FlagStyle, JsonSink, RawSink, Symbolizer, SyscallStyle, TextSink, clock_in_ns,
};
use ktrace_stream::Sink;
use ktrace_symbols::KernelView;

use crate::cmd::agg::{Route, bare_glob};
use crate::live::{self, RunArgs, Stop};
use crate::outfile;
use crate::output::{self, Output, Target};
use crate::session::{self, Signals};

/// Arguments of `ktrace trace`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::resolve::TRACE_HELP)]
pub struct Args {
    /// Probe definitions: the kernel's own syntax verbatim ('p:myev
    /// /bin/bash:0x9a4f0 x=%di'), or the conveniences below: a bare symbol
    /// (entry probe), SYM%return, PATH:SYMBOL[+OFF], LIB:SYMBOL, kernel
    /// wildcards, argN. Each is checked before anything is written.
    #[arg(required = true, value_name = "DEF")]
    pub defs: Vec<String>,
    /// Record a stack with each hit: kernel stacks for kprobes (the
    /// `stacktrace` trigger), user stacks for uprobes where the kernel has
    /// options/userstacktrace.
    #[arg(long)]
    pub stack: bool,
    /// Leave out of kernel stacks the probe machinery's own frames at
    /// their top (kprobe_dispatcher, kprobe_ftrace_handler, trampolines,
    /// trap entries, uprobe dispatch), so a stack starts at the probed
    /// function; the kernel (and the default) prints them. Text output
    /// (Perfetto traces always leave them out).
    #[arg(long, conflicts_with_all = ["json", "raw"])]
    pub hide_probe_frames: bool,
    /// Every argument of each kernel function by its BTF name (`$arg*`):
    /// passed through where the kernel reads BTF arguments (6.6 and later),
    /// compiled with its BTF into registers and types elsewhere.
    #[arg(long)]
    pub args: bool,
    /// How kernel wildcards attach: `auto` takes the function tracer in
    /// ktrace's own instance (one glob write, ~1,000 functions in about a
    /// second; the kernel's function-tracer lines `func <-caller`) when
    /// every definition is a bare glob (`'ext4_*'`) and nothing needs a
    /// probe (no arguments, -f, --trigger, --args), else one kprobe per
    /// function; `ftrace` / `kprobe` force one.
    #[arg(long, value_enum, default_value_t = Route::Auto)]
    pub route: Route,
    /// The options of the run (filter, trigger, -d, -n, -p, buffer, clock,
    /// the command).
    /// The kernel's own events traced beside the probes (-e).
    #[command(flatten)]
    pub events: live::EventArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print events as JSON lines (typed values) instead of the kernel's
    /// text.
    #[arg(long, conflicts_with = "raw")]
    pub json: bool,
    /// Print events raw (`ts cpu pid system:event field=value...`), the
    /// fastest output.
    #[arg(long, conflicts_with = "perfetto")]
    pub raw: bool,
    /// Write a Perfetto trace (protobuf) to the -o file instead of text:
    /// a track per thread, entry/return pairs as slices, fields as
    /// arguments (as `ktrace export --perfetto`).
    #[arg(long, requires = "output", conflicts_with = "json")]
    pub perfetto: bool,
    /// Write events to FILE instead of stdout (the summary stays on stderr).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Raw,
    Perfetto,
}

/// Runs `ktrace trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Signals are caught before anything is created, so there is no window in
    // which Ctrl-C kills us with probes installed.
    let signals = Signals::catch()?;
    // The destination is opened (and refused) before anything is created:
    // a directory, a missing directory or a FIFO nobody reads must not
    // leave the traced command running untraced.
    let target = match &args.output {
        Some(p) => Target::File(p.clone()),
        None => Target::Stdout,
    };
    let (out_file, mut out_plan) =
        match output::open_target(&target, &|| signals.caught().is_some()) {
            Ok(f) => f,
            Err(e) => match signals.caught() {
                Some(sig) => {
                    crate::say!("{e:#}");
                    return Ok(live::signal_exit(sig));
                }
                None => return Err(e),
            },
        };
    // The writer thread starts now, so it is among ktrace's own threads
    // that the kernel is told to leave out in setup.
    let deadline_cell: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let stop_check = {
        let signals = signals.clone();
        let cell = Arc::clone(&deadline_cell);
        Box::new(move || {
            signals.caught().is_some() || cell.get().is_some_and(|d| Instant::now() >= *d)
        })
    };
    let out_name = target.describe();
    let mut out = Some(Output::new(out_file, stop_check));
    let root = session::open_tracefs()?;
    let view = KernelView::running(Some(&root));
    let defs = match args.args {
        true => crate::resolve::spec::with_all_args(&args.defs, &|m| view.is_module(m))?,
        false => args.defs.clone(),
    };
    let globs = function_route(&args, &root)?;
    // The output must not be one of the files the run reads (the traced
    // program, a probed file): checked once the probes are built, before
    // anything is written to the kernel.
    let check_output = |probes: &[session::Probe]| -> anyhow::Result<()> {
        match &out_plan {
            Some(o) => o.check_inputs(&outfile::run_inputs(
                probes,
                &args.run.command,
                args.run.pid,
            )),
            None => Ok(()),
        }
    };
    let setup = set_up(
        &args,
        &root,
        &view,
        &defs,
        globs.as_ref(),
        &check_output,
        &signals,
    );
    let mut run = match setup {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    // Tracing has started: only now is an existing file emptied.
    if let Some(o) = out_plan.as_mut() {
        o.start()?;
    }
    // kernel symbols (parsed at the first lookup) for every run: the
    // kernel's own events a trigger enables print `%pS` and kernel strings
    // too, uprobe sessions included
    let symbols = crate::kview::KernelSymbols::with_strings(&view, &root);
    let symbols: &dyn Symbolizer = &symbols;
    let format = format_of(&args);
    let counts = out.as_ref().map(Output::written);
    let writer = OutputRef {
        out: &mut out,
        spare: Vec::new(),
    };
    let mut sink = sink_for(format, writer, &run, symbols, args.hide_probe_frames);
    let deadline = args.run.deadline();
    if let Some(d) = deadline {
        let _ = deadline_cell.set(d);
    }
    let (mut stop, mut error) =
        live::stream_loop(&args.run, &signals, deadline, &mut run, &mut *sink);
    let mut end = live::finish(&mut run, &mut *sink, &mut stop, &mut error);
    let stop = match (stop, signals.caught()) {
        // a write given up while the output was not read: for the reason
        // that asked for the stop
        (Stop::Stopped, Some(sig)) => Stop::Signal(sig),
        (Stop::Stopped, None) => Stop::Duration,
        (s, _) => s,
    };
    drop(sink);
    // by type id: the events the run began with and those met since
    let mut names: Vec<Option<(String, String)>> = Vec::new();
    for info in run.stream.table().iter() {
        let id = usize::from(info.id);
        if names.len() <= id {
            names.resize(id + 1, None);
        }
        names[id] = Some((info.system().to_string(), info.name().to_string()));
    }
    let (closed, output_error) = close_output(out.take(), stop, deadline, &signals);
    if format != Format::Perfetto
        && let (Some(counts), Ok(e)) = (&counts, end.as_mut())
    {
        let failed = stop == Stop::OutputFailed || output_error.is_some();
        count_what_was_written(counts, e, &names, &out_name, closed, failed);
    }
    live::conclude(run, end, stop, error, output_error, &out_name)
}

/// Waits for the output to take what is left, but not past a signal, nor
/// long past the end of `-d` when nobody reads it. Returns whether the
/// reader closed it, and the error to report, if any.
fn close_output(
    out: Option<Output>,
    stop: Stop,
    deadline: Option<Instant>,
    signals: &Signals,
) -> (bool, Option<String>) {
    let give_up = deadline.map(|d| d.max(Instant::now()) + Duration::from_secs(2));
    let written = out.map_or(Ok(()), |o| {
        o.finish(&|| signals.caught().is_some() || give_up.is_some_and(|g| Instant::now() >= g))
    });
    let closed = stop == Stop::OutputClosed
        || written
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::BrokenPipe);
    let output_error = match (stop, written) {
        (Stop::OutputFailed, _) => None,
        (_, Err(e)) if output::is_stopped(&e) => {
            crate::say!("the output was not read to the end; events still in flight were dropped");
            None
        }
        (_, Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => None,
        (_, Err(e)) => Some(output::describe(&e)),
        (_, Ok(())) => None,
    };
    (closed, output_error)
}
/// The session and its probes, set up: the function tracer's globs, or the
/// definitions built and checked against the output.
fn set_up(
    args: &Args,
    root: &std::path::Path,
    view: &KernelView,
    defs: &[String],
    globs: Option<&Vec<String>>,
    check_output: &dyn Fn(&[session::Probe]) -> anyhow::Result<()>,
    signals: &Signals,
) -> anyhow::Result<live::Run> {
    let live_ctx = live::Live {
        args: &args.run,
        root,
        view,
        signals,
    };
    match globs {
        Some(g) => check_output(&[])
            .and_then(|()| args.run.session(root))
            .and_then(|sess| {
                let (run, funcs) = live::setup_function(&live_ctx, sess, g, args.stack)?;
                live::say_functions("tracing", &funcs, g);
                Ok(run)
            }),
        None => args.run.session(root).and_then(|sess| {
            let probes = crate::resolve::build(&sess, defs, args.run.pid, view)?;
            check_output(&probes)?;
            live::setup_built(
                &live_ctx,
                sess,
                probes,
                live::Beside {
                    stacks: args.stack,
                    events: &args.events.events,
                },
            )
        }),
    }
}
/// The output format the flags ask for.
fn format_of(args: &Args) -> Format {
    if args.perfetto {
        Format::Perfetto
    } else if args.json {
        Format::Json
    } else if args.raw {
        Format::Raw
    } else {
        Format::Text
    }
}

/// The sink of `format`, writing through `writer`.
fn sink_for<'a>(
    format: Format,
    writer: OutputRef<'a>,
    run: &live::Run,
    symbols: &'a dyn Symbolizer,
    hide_probe_frames: bool,
) -> Box<dyn Sink + 'a> {
    match format {
        Format::Text => {
            // counting clocks print raw, as the kernel's `trace` does
            let in_ns = run.inst.trace_clock().map_or(true, |c| clock_in_ns(&c));
            let release = rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned();
            Box::new(
                TextSink::with_dest(
                    writer,
                    run.trace_header
                        .as_deref()
                        .map_or(FlagStyle::for_release(&release), |h| {
                            FlagStyle::from_trace_header(h, &release)
                        }),
                    symbols,
                    in_ns,
                )
                .syscalls(SyscallStyle::for_release(&release))
                .hide_probe_frames(hide_probe_frames),
            )
        }
        Format::Json => Box::new(JsonSink::with_dest(writer, symbols)),
        Format::Raw => Box::new(RawSink::with_dest(writer)),
        Format::Perfetto => Box::new(ktrace_perfetto::PerfettoSink::new(
            writer,
            symbols,
            run.sess
                .probes()
                .iter()
                .map(|p| p.shown_definition())
                .collect(),
        )),
    }
}

/// The summary counts what was written, not what was formatted: a reader
/// that went away (`| head`) got the events before, not the ones still
/// buffered (a Perfetto trace writes each event late, and is not counted
/// so). `closed`: the output was closed; `failed`: writing it failed.
fn count_what_was_written(
    counts: &std::sync::Mutex<output::Written>,
    e: &mut ktrace_stream::EndOfRun,
    names: &[Option<(String, String)>],
    out_name: &str,
    closed: bool,
    failed: bool,
) {
    let w = counts.lock().map(|w| w.clone()).unwrap_or_default();
    if w.events < e.summary.events {
        let how = if closed {
            "was closed"
        } else if failed {
            "failed"
        } else {
            "stopped being read"
        };
        crate::say!(
            "{} of the {} event(s) read were written to {out_name} before it {how}; the \
             other {} were not",
            w.events,
            e.summary.events,
            e.summary.events - w.events
        );
        e.summary.events = w.events;
        e.shown = shown(names, &w);
    }
}

/// The route of `ktrace trace`: the function tracer's globs, or `None` for
/// probes. Auto takes the function tracer only for kernel wildcards (a
/// bare name keeps its kprobe and its event line); says which and why on
/// stderr when there was a choice. `--route ftrace` when the function
/// tracer cannot do the job is an error, before anything is written.
fn function_route(args: &Args, root: &std::path::Path) -> anyhow::Result<Option<Vec<String>>> {
    let wild = |d: &String| bare_glob(d) && d.contains(['*', '?']);
    let refusal = if let Some(d) = args.defs.iter().find(|d| !bare_glob(d)) {
        Some(format!(
            "{d:?} is not a bare function name or glob (arguments, return probes, offsets, \
             user probes and events need probes)"
        ))
    } else if args.args {
        Some("--args needs probes".to_string())
    } else if args.run.filter.is_some() {
        Some("-f filters probe events".to_string())
    } else if args.run.trigger.is_some() {
        Some("--trigger applies to probe events".to_string())
    } else if !ktrace_tracefs::features::function_tracer(root) {
        Some("this kernel offers no function tracer (no `function` in available_tracers)".into())
    } else {
        None
    };
    match (args.route, refusal) {
        (Route::Kprobe, _) => Ok(None),
        (Route::Ftrace, Some(why)) => anyhow::bail!("--route ftrace cannot do this: {why}"),
        (Route::Auto, _) if !args.defs.iter().any(wild) => Ok(None),
        (Route::Auto, Some(why)) => {
            crate::eline!("ktrace: route: one kprobe per function: {why}");
            Ok(None)
        }
        (_, None) => {
            crate::eline!(
                "ktrace: route: the function tracer in ktrace's own instance (one glob write \
                 for all the functions of available_filter_functions that match; --route \
                 kprobe for one kprobe per function)"
            );
            let mut globs = args.defs.clone();
            globs.dedup();
            Ok(Some(globs))
        }
    }
}

/// The sinks' destination: the [`Output`] held by `run`, which takes it
/// back at the end to wait for the writer thread (then a spare buffer
/// takes what is still formatted, and writing it fails). Where the line
/// sinks say an event starts, its start is marked in the output (the
/// count of events written whole).
struct OutputRef<'a> {
    out: &'a mut Option<Output>,
    spare: Vec<u8>,
}

impl Dest for OutputRef<'_> {
    #[inline(always)]
    fn buf(&mut self) -> &mut Vec<u8> {
        match self.out {
            Some(o) => o.buf(),
            None => &mut self.spare,
        }
    }

    #[inline(always)]
    fn starts(&mut self, id: u16) {
        if let Some(o) = self.out {
            o.mark(id);
        }
    }

    #[inline(always)]
    fn filled(&mut self) -> io::Result<()> {
        match self.out {
            Some(o) => o.filled(),
            None => Err(io::Error::other("output closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out {
            Some(o) => Dest::flush(o),
            None => Ok(()),
        }
    }
}

/// Sinks that write whole records themselves (Perfetto) take the output as
/// a plain `Write` (no marks: its events are written one late).
impl io::Write for OutputRef<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self.out {
            Some(o) => o.write(data),
            None => Err(io::Error::other("output closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.out {
            Some(o) => io::Write::flush(o),
            None => Ok(()),
        }
    }
}

/// `written`'s counts as (system, event, count), in id order, named by
/// `names` (by type id).
fn shown(
    names: &[Option<(String, String)>],
    written: &output::Written,
) -> Vec<(String, String, u64)> {
    written
        .per_id
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .filter_map(|(id, n)| {
            let (s, e) = names.get(id)?.as_ref()?;
            Some((s.clone(), e.clone(), *n))
        })
        .collect()
}
