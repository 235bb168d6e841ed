//! `ktrace report`: print a recorded trace.dat file (ktrace's or
//! trace-cmd's, versions 6 and 7, compressed or not) exactly as the live
//! `ktrace trace` prints: the same sinks (ktrace-printer's text and JSON),
//! fed through the same merge and decode as the live stream
//! (`ktrace_stream::replay`), with the event formats, kallsyms, saved
//! cmdlines, clock and kernel release taken from the file.
//!
//! The file is read through ktrace-tracedat (one reader per CPU, each at
//! its own offset of the one open file, about one page per CPU in memory;
//! a recording that comes through a pipe is copied to a temporary file
//! first); nothing on this machine is consulted. A
//! truncated, corrupted or foreign file is a clear error; a CPU whose data
//! was cut short (a recorder killed mid-page) prints up to its last whole
//! page and says so. The loss account (page headers, the CPU stats the
//! recorder saved) goes to stderr, as the live summary does.

use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ktrace_event::ProbeKind;
use ktrace_printer::{FlagStyle, JsonSink, SyscallStyle, TextSink, clock_in_ns};
use ktrace_stream::{
    Comms, CpuPages, Decoder, EndOfRun, EventTable, Options, Role, Sink, TaskNames,
};
use ktrace_tracedat::{Meta, TraceDat, option};

use crate::kview::SavedSymbols;

/// Arguments of `ktrace report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace.dat file (written by `ktrace record` or `trace-cmd record`);
    /// `-` (or a pipe: `<(zstdcat F)`) is read into a temporary file first.
    #[arg(value_name = "FILE", required_unless_present_any = ["boot", "previous_boot"], value_hint = clap::ValueHint::FilePath)]
    pub file: Option<PathBuf>,
    /// Instead of a file: the events the boot-time probes (`kprobe_event=`,
    /// see `ktrace boot`) wrote to the top-level buffer of this boot.
    /// Reading them consumes them, as trace_pipe does.
    #[arg(long, conflicts_with = "file")]
    pub boot: bool,
    /// Instead of a file: the events the previous boot left in the
    /// boot-mapped instance of `ktrace boot --persistent` (a reboot without
    /// power loss: a crash, a watchdog, `sysrq b`), decoded with the formats
    /// of this boot's boot-time probes. Reading them consumes them.
    #[arg(long, conflicts_with_all = ["file", "boot"])]
    pub previous_boot: bool,
    /// Print events as JSON lines (typed values) instead of the kernel's
    /// text.
    #[arg(long)]
    pub json: bool,
    /// With --boot or --previous-boot: write the events as a Perfetto
    /// trace (protobuf, as `ktrace export --perfetto`) to OUT instead of
    /// printing them (written as OUT.partial, renamed at the end). For a
    /// recording, `ktrace export FILE --perfetto -o OUT`.
    #[arg(long, value_name = "OUT", conflicts_with_all = ["json", "folded", "hide_probe_frames"])]
    pub perfetto: Option<PathBuf>,
    /// Print the probe hits counted by stack as folded stacks instead of
    /// the events: one line per stack, frames root first separated by
    /// `;`, a space and the count (what flamegraph.pl, inferno and
    /// speedscope read); the counts `ktrace count --by stack --folded`
    /// gives live. Needs a recording made with `--stack` (not with --boot).
    #[arg(long, conflicts_with_all = ["json", "boot", "previous_boot"])]
    pub folded: bool,
    /// Leave out of kernel stacks the probe machinery's own frames at
    /// their top (kprobe_dispatcher, kprobe_ftrace_handler, trampolines,
    /// trap entries, uprobe dispatch), so a stack starts at the probed
    /// function; the kernel (and the default) prints them. Text output.
    #[arg(long, conflicts_with = "json")]
    pub hide_probe_frames: bool,
}

/// A recording opened for replay: its metadata, the decoder built from it
/// and one page stream per CPU.
pub(crate) struct Recording {
    pub(crate) meta: Meta,
    pub(crate) decoder: Decoder,
    pub(crate) streams: Vec<CpuPages>,
}

/// One reader of a recording's file at a place of its own (`pread`): the
/// metadata and every CPU's pages read the one open file, each where it is.
struct At {
    file: std::sync::Arc<std::fs::File>,
    pos: u64,
}

impl At {
    fn new(file: &std::sync::Arc<std::fs::File>) -> At {
        At {
            file: file.clone(),
            pos: 0,
        }
    }
}

impl io::Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Seek for At {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let pos = match to {
            io::SeekFrom::Start(o) => Some(o),
            // the length as it is now (a recording still being written grows)
            io::SeekFrom::End(d) => self.file.metadata()?.len().checked_add_signed(d),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )
        })?;
        Ok(self.pos)
    }
}

/// The recording at `path` (`-`: standard input), open for reading by
/// offset. A trace.dat is read by offset, so one that comes through a pipe
/// (`-`, a FIFO, `<(zstdcat F)`, `ssh board cat F |`) is first copied to a
/// temporary file, unlinked at once (nothing is left behind, whatever
/// ends the run) and read from there.
fn open_file(path: &Path) -> anyhow::Result<std::fs::File> {
    let name = path.display();
    let stdin = path == Path::new("-");
    if !stdin {
        let f = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
        // (a directory fails below with the reader's own words)
        let seekable = f.metadata().is_ok_and(|m| m.is_file() || m.is_dir());
        if seekable {
            return Ok(f);
        }
        return spool(f, &name.to_string());
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        anyhow::bail!("`-` reads the recording from standard input, which is a terminal here");
    }
    spool(std::io::stdin().lock(), "standard input")
}

/// Bytes copied between looks at the free space left where a piped
/// recording is copied.
const SPOOL_LOOK: usize = 64 << 20;

/// `from`'s bytes in an unlinked temporary file (in $TMPDIR, else /tmp).
fn spool(mut from: impl io::Read, name: &str) -> anyhow::Result<std::fs::File> {
    let dir = std::env::temp_dir();
    let mut tmp = None;
    for n in 0..100u32 {
        let p = dir.join(format!(".ktrace-report-{}-{n}.dat", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&p);
                tmp = Some(f);
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot read {name}: a temporary file in {} for it",
                        dir.display()
                    )
                });
            }
        }
    }
    let mut tmp =
        tmp.with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    // the magic first: what is not a trace.dat (`/dev/zero`, a text file
    // through a pipe) is refused at once, not copied without end
    let mut head = [0u8; ktrace_tracedat::MAGIC.len()];
    let got = ktrace_ring::read_full(&mut from, &mut head)
        .with_context(|| format!("cannot read {name}"))?;
    if got == 0 {
        anyhow::bail!("{name} is empty: no trace.dat came through it");
    }
    if !ktrace_tracedat::starts_as_tracedat(&head[..got]) {
        anyhow::bail!(
            "cannot read {name}: not a trace.dat file (no 0x17 0x08 0x44 \"tracing\" magic)"
        );
    }
    let into = || {
        format!(
            "cannot read {name} into a temporary file in {} (a trace.dat is read by offset)",
            dir.display()
        )
    };
    tmp.write_all(&head).with_context(into)?;
    // ... and a stream that never ends (a trace.dat with endless bytes
    // after it) stops before the file system fills
    let mut buf = vec![0u8; 1 << 20];
    let mut since_look = 0usize;
    let mut copied = head.len() as u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(into),
        };
        tmp.write_all(&buf[..n]).with_context(into)?;
        copied += n as u64;
        since_look += n;
        if since_look >= SPOOL_LOOK {
            since_look = 0;
            if let Ok(st) = rustix::fs::fstatvfs(&tmp)
                && st.f_bavail.saturating_mul(20) < st.f_blocks
            {
                anyhow::bail!(
                    "cannot read {name}: after {} MB, its copy in {} would leave under 5% of \
                     that file system free (give the recording as a file, or set TMPDIR)",
                    copied >> 20,
                    dir.display()
                );
            }
        }
    }
    Ok(tmp)
}

/// Opens `path` for replay (`-`: standard input).
pub(crate) fn open(path: &Path) -> anyhow::Result<Recording> {
    let name = if path == Path::new("-") {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let file = std::sync::Arc::new(open_file(path)?);
    let dat = TraceDat::open(BufReader::new(At::new(&file)))
        .with_context(|| format!("cannot read {name}"))?;
    let TraceDat { mut meta, .. } = dat;
    // what the page streams need of the metadata (not the big texts,
    // which are not copied to leave them out)
    let big = (
        std::mem::take(&mut meta.kallsyms),
        std::mem::take(&mut meta.printk_formats),
        std::mem::take(&mut meta.cmdlines),
        std::mem::take(&mut meta.systems),
        std::mem::take(&mut meta.ftrace_formats),
    );
    let slim = meta.clone();
    (
        meta.kallsyms,
        meta.printk_formats,
        meta.cmdlines,
        meta.systems,
        meta.ftrace_formats,
    ) = big;
    if meta.latency {
        anyhow::bail!("{name} holds a latency (text) trace, not recorded pages");
    }
    if meta.unfinished.is_some() {
        crate::say!(
            "{name} is an unfinished recording (its ktrace record is still writing it, or \
             stopped before finishing it): reading the pages it holds so far"
        );
    }
    // trace-cmd records an instance (`-B`) as a buffer after an empty top
    // one: the first buffer that holds pages is the recording
    let with_data: Vec<usize> = (0..meta.buffers.len())
        .filter(|&b| meta.buffers[b].cpus.iter().any(|c| c.size > 0))
        .collect();
    let index = with_data.first().copied().unwrap_or(0);
    let Some(buffer) = meta.buffers.get(index) else {
        anyhow::bail!("{name} holds no recorded pages (no flyrecord buffer)");
    };
    if with_data.len() > 1 {
        crate::say!(
            "{name} holds {} buffers with pages; printing only the first ({:?})",
            with_data.len(),
            buffer.name
        );
    }
    let layout = ktrace_ring::PageLayout::from_header_page(
        &String::from_utf8_lossy(&meta.header_page),
        meta.endian,
    )
    .with_context(|| format!("{name}: bad header_page"))?
    .with_subbuf_size(buffer.page_size as usize);
    let table = table(&meta).with_context(|| format!("{name}: bad event format"))?;
    let comms = Comms::from_saved_cmdlines(&String::from_utf8_lossy(&meta.cmdlines));
    let mut decoder = Decoder::new(
        layout,
        table,
        TaskNames::fixed(comms),
        Options::default(),
        Vec::new(),
    );
    for (i, text) in meta.cpu_stats().iter().enumerate() {
        let cpu = text
            .lines()
            .find_map(|l| l.strip_prefix("CPU:")?.trim().parse().ok())
            .unwrap_or(i);
        decoder
            .summary_mut()
            .add_stats(cpu, &ktrace_tracefs::CpuStats::parse(text));
    }
    let mut streams: Vec<CpuPages> = Vec::new();
    for (i, c) in buffer.cpus.iter().enumerate() {
        let dat = TraceDat::reopen(
            BufReader::with_capacity(1 << 16, At::new(&file)),
            slim.clone(),
        )
        .with_context(|| format!("cannot read {name}"))?;
        let pages = dat
            .into_pages(index, i)
            .with_context(|| format!("{name}: cpu {}", c.cpu))?;
        streams.push((c.cpu as usize, Box::new(pages)));
    }
    Ok(Recording {
        meta,
        decoder,
        streams,
    })
}

/// The event table of a recording: its formats, each probe with the kind
/// its definition (ktrace's option) or its format says.
fn table(meta: &Meta) -> anyhow::Result<EventTable> {
    let mut t = EventTable::new(usize::from(meta.long_size), None);
    // enum constants left in print fmts: from the running kernel's BTF,
    // when the recording was made on this very kernel
    let running = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    if meta.kernel_release() == Some(running.as_str()) {
        t.set_names(crate::kview::btf_names());
    }
    let defs = definitions(meta);
    for f in &meta.ftrace_formats {
        let text = String::from_utf8_lossy(f);
        let role = match format_name(&text) {
            Some("kernel_stack") => Role::Stack { user: false },
            Some("user_stack") => Role::Stack { user: true },
            _ => Role::Kernel,
        };
        // ftrace's own events beyond the stacks: best effort
        let _ = t.add("ftrace", &text, ProbeKind::Other, None, role);
    }
    for s in &meta.systems {
        for f in &s.formats {
            let text = String::from_utf8_lossy(f);
            let name = format_name(&text).unwrap_or("");
            let def = defs.iter().find(|d| defines(d, &s.name, name));
            let (kind, target) = match def {
                Some(d) => (
                    ProbeKind::from_dynamic_event(d),
                    ktrace_event::eprobe_target(d),
                ),
                None => (kind_of_format(&text, &s.name), None),
            };
            let role = if kind == ProbeKind::Other {
                Role::Kernel
            } else {
                Role::Probe
            };
            match t.add(&s.name, &text, kind, target.as_deref(), role) {
                Ok(_) => {}
                // a kernel event whose format ktrace cannot read (a form no
                // kernel of the matrix wrote yet) costs its own records,
                // said once, not the whole report
                Err(e) if role == Role::Kernel => crate::say!(
                    "{}/{name}: format not understood ({e}); its records are left out",
                    s.name
                ),
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!("{}/{name}", s.name)));
                }
            }
        }
    }
    Ok(t)
}

/// The probe definitions a ktrace recording keeps (its own option; none
/// in trace-cmd's files).
pub(crate) fn definitions(meta: &Meta) -> Vec<String> {
    meta.options
        .iter()
        .filter(|o| o.id == option::KTRACE_DYNAMIC_EVENTS)
        .flat_map(|o| {
            let end = o.data.iter().position(|&b| b == 0).unwrap_or(o.data.len());
            String::from_utf8_lossy(&o.data[..end])
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `name:` of a format file.
fn format_name(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("name:"))
        .map(str::trim)
}

/// True when the `dynamic_events` line `def` defines `system/event`.
fn defines(def: &str, system: &str, event: &str) -> bool {
    ktrace_probe::head(def)
        .and_then(|h| h.name)
        .is_some_and(|place| place == format!("{system}/{event}"))
}

/// A probe's kind from its format alone (trace-cmd's files carry no
/// definitions): the probe fields say entry (`__probe_ip`) or return
/// (`__probe_ret_ip`), as trace_kprobe.c and trace_uprobe.c write them.
/// Kernel or user cannot be told from the format (both print `(%lx)`):
/// the kernel's default groups (`uprobes`, `kprobes`) say it; otherwise a
/// kernel probe is assumed, and the printer prints a header address
/// without a kernel symbol as print_uprobe_event() does.
fn kind_of_format(text: &str, system: &str) -> ProbeKind {
    let has = |f: &str| text.contains(&format!(" {f};"));
    let user = system.starts_with("uprobe");
    if has("__probe_ret_ip") {
        if user {
            ProbeKind::Uretprobe
        } else {
            ProbeKind::Kretprobe
        }
    } else if has("__probe_ip") {
        if user {
            ProbeKind::Uprobe
        } else {
            ProbeKind::Kprobe
        }
    } else {
        ProbeKind::Other
    }
}

/// Runs `ktrace report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(file) = &args.file else {
        return crate::cmd::boot::report(args.json, args.previous_boot, args.perfetto.as_deref());
    };
    if args.perfetto.is_some() {
        anyhow::bail!(
            "--perfetto goes with --boot or --previous-boot; a recording is exported with \
             `ktrace export {} --perfetto -o OUT`",
            file.display()
        );
    }
    let Recording {
        mut meta,
        mut decoder,
        streams,
    } = open(file)?;
    // moved, not copied: the kallsyms text is megabytes
    let symbols = SavedSymbols::with_strings(
        std::mem::take(&mut meta.kallsyms),
        std::mem::take(&mut meta.printk_formats),
    );
    if args.folded {
        return folded(file, &mut decoder, streams, &symbols);
    }
    // Straight to file descriptor 1: the standard library's stdout is
    // line-buffered, which scans every 64 KiB written for newlines.
    let out =
        std::fs::File::from(rustix::io::dup(io::stdout()).context("cannot use standard output")?);
    let mut sink: Box<dyn Sink + '_> = if args.json {
        Box::new(JsonSink::new(out, &symbols))
    } else {
        let release = meta.kernel_release().unwrap_or("");
        Box::new(
            TextSink::new(
                out,
                FlagStyle::for_release(release),
                &symbols,
                clock_in_ns(meta.clock().unwrap_or("local")),
            )
            .syscalls(SyscallStyle::for_release(release))
            .hide_probe_frames(args.hide_probe_frames),
        )
    };
    let end = ktrace_stream::replay(&mut decoder, streams, sink.as_mut());
    for w in decoder.take_warnings() {
        crate::say!("{w}");
    }
    let end = match end {
        Ok(e) => e,
        Err(ktrace_stream::Error::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(anyhow::Error::new(e).context("cannot print the recording")),
    };
    summary(&end);
    Ok(ExitCode::SUCCESS)
}

/// `--folded`: the recording's probe hits by stack, as folded stacks.
fn folded(
    path: &Path,
    decoder: &mut Decoder,
    streams: Vec<CpuPages>,
    symbols: &SavedSymbols,
) -> anyhow::Result<ExitCode> {
    let r = crate::cmd::agg::count_recording_by_stack(decoder, streams, symbols);
    for w in decoder.take_warnings() {
        crate::say!("{w}");
    }
    let (r, end) = r.map_err(|e| anyhow::Error::new(e).context("cannot read the recording"))?;
    // a recording made without --stack (its file holds the stack event
    // formats all the same, so only the records tell)
    let stacked = r.rows.iter().any(|(key, _)| {
        key.iter()
            .any(|v| matches!(v, ktrace_aggregate::KeyValue::Stack(f) if !f.is_empty()))
    });
    if !stacked && end.summary.events > 0 {
        summary(&end);
        anyhow::bail!(
            "{} holds no stacks: none of its {} event(s) has one (record with --stack)",
            path.display(),
            end.summary.events
        );
    }
    let mut out = String::new();
    ktrace_aggregate::folded::count_folded(&mut out, &r);
    let mut so = io::stdout().lock();
    match so.write_all(out.as_bytes()).and_then(|()| so.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        r => r.context("cannot write the folded stacks")?,
    }
    summary(&end);
    Ok(ExitCode::SUCCESS)
}

/// The loss account on stderr, as the live run's summary words it.
pub(crate) fn summary(end: &EndOfRun) {
    let line = end.summary.line();
    let per_cpu = line.split_once(", ").map_or("", |(_, d)| d);
    if end.summary.lost() == 0 && per_cpu == "0 lost" {
        crate::say!("{} event(s), 0 lost", end.summary.events);
    } else {
        crate::eline!(
            "ktrace: {} event(s), {} lost: {per_cpu}",
            end.summary.events,
            end.summary.lost()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_reads_the_name_of_the_first_word() {
        assert!(defines("p:ktrace/open do_sys_openat2", "ktrace", "open"));
        assert!(defines("r16:ktrace/open do_sys_openat2", "ktrace", "open"));
        assert!(defines("\t p:ktrace/open\tx", "ktrace", "open"));
        assert!(defines("s:synthetic/lat\tu64 lat", "synthetic", "lat"));
        assert!(!defines(
            "p:ktrace/open_ret do_sys_openat2",
            "ktrace",
            "open"
        ));
        assert!(!defines("p:open do_sys_openat2", "ktrace", "open"));
        assert!(!defines("p do_sys_openat2 ktrace/open", "ktrace", "open"));
        assert!(!defines("", "ktrace", "open"));
    }
}
