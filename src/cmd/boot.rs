//! Tracing the boot: `ktrace boot` turns probe definitions into the kernel
//! command line's `kprobe_event=` parameter (checked for the target kernel,
//! as `ktrace check` does), `ktrace report --boot` prints what those probes
//! recorded in the top-level buffer, and `ktrace clean --boot` removes them.
//!
//! The kernel creates and enables `kprobe_event=` probes at `fs_initcall`
//! time (kernel/trace/trace_kprobe.c, `setup_boot_kprobe_events()`), in the
//! top-level buffer, before init runs. They are not a ktrace session: no
//! process owns them, so nothing reaps them; ktrace puts them in its own
//! group ([`BOOT_GROUP`]) and removes them only when asked. How a definition
//! travels on the command line is `ktrace_probe::boot`; the verdict on each
//! definition is the checker's (`crate::cmd::check::Checker`), live or
//! offline.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use ktrace_printer::{FlagStyle, JsonSink, SyscallStyle, TextSink, clock_in_ns};
use ktrace_probe::boot::{self, BOOT_GROUP};
use ktrace_probe::{Definition, Interface, ProbeKind};
use ktrace_stream::{Comms, CpuPages, Decoder, EventTable, Options, ProbeSpec, Sink, TaskNames};
use ktrace_symbols::KernelView;
use ktrace_tracefs::{DynEvents, Instance, discover};

use crate::cmd::check::{self, Checker, TargetArgs};

/// Arguments of `ktrace boot`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
The probes are created and enabled by the kernel at fs_initcall time, before \
init runs (what runs earlier is not seen), in the top-level buffer. Add the \
printed parameters to the kernel command line (e.g. GRUB_CMDLINE_LINUX in \
/etc/default/grub, then update-grub) and reboot; then `ktrace report --boot` \
prints the events (and consumes them, as trace_pipe does) and `ktrace clean \
--boot` removes the probes. A definition without a group goes to the group \
ktrace_boot. Nothing is written to the kernel by this command.")]
pub struct Args {
    /// The target kernel (live by default).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Each CPU's ring buffer at boot (`trace_buf_size=`: bytes, or with K,
    /// M or G).
    #[arg(long, value_name = "SIZE")]
    pub buffer_size: Option<String>,
    /// Also set aside SIZE bytes of memory (`reserve_mem=`, K, M or G, whole
    /// pages) for a trace instance that survives a reboot without power
    /// loss (`trace_instance=ktrace@ktrace`, Linux 6.12 on); the kernel
    /// enables the boot probes in the top-level buffer only, so enable
    /// them in that instance after boot (`echo 1 >
    /// instances/ktrace/events/ktrace_boot/enable`), and after the next
    /// reboot `ktrace report --previous-boot` prints what it kept.
    #[arg(long, value_name = "SIZE")]
    pub persistent: Option<String>,
    /// Also print the ring buffer to the console on an oops
    /// (`ftrace_dump_on_oops`): the events before a crash, on the serial
    /// console.
    #[arg(long)]
    pub dump_on_oops: bool,
    /// One JSON object (the parameters, their length against the kernel's
    /// limit, each definition as it will be written).
    #[arg(long)]
    pub json: bool,
    /// Kprobe and kretprobe definitions (as `ktrace check` takes them); one
    /// per line from standard input when none.
    pub defs: Vec<String>,
}

/// One definition ready for the command line.
struct Encoded {
    input: String,
    line: String,
    encoded: String,
    group: String,
    event: String,
}

/// Runs `ktrace boot`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs: Vec<String> = check::read_inputs(&args.defs)?
        .into_iter()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    if inputs.is_empty() {
        anyhow::bail!("no definitions: give kprobes or kretprobes to set at boot");
    }
    let buffer = args
        .buffer_size
        .as_deref()
        .map(buffer_size_arg)
        .transpose()?;
    let opts = check::Options {
        interface: Interface::DynamicEvents,
        ..check::Options::from(&args.target)
    };
    let mut checker = Checker::with_options(&opts, &inputs)?;
    let arch = checker.arch;
    let Some(done) = encode_all(&mut checker, &inputs)? else {
        return Ok(ExitCode::from(1));
    };
    let persistent = match &args.persistent {
        Some(size) => {
            let k = checker.target.kernel;
            match boot::persistent(size, k.major, k.minor) {
                Ok(p) => Some(p),
                Err(why) => {
                    crate::say!("--persistent {size:?}: {why}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        None => None,
    };
    let encoded: Vec<String> = done.iter().map(|e| e.encoded.clone()).collect();
    let mut params = vec![boot::parameter(&encoded)];
    if let Some(p) = &persistent {
        params.push(p.clone());
    }
    if let Some(b) = &buffer {
        params.push(format!("trace_buf_size={b}"));
    }
    if args.dump_on_oops {
        params.push("ftrace_dump_on_oops".to_string());
    }
    let line = params.join(" ");
    let limit = boot::command_line_size(arch) - 1;
    let live = !(opts.offline
        || opts.arch.is_some()
        || opts.kernel.is_some()
        || opts.kallsyms.is_some()
        || opts.vmlinux.is_some());
    let current = if live {
        std::fs::read_to_string("/proc/cmdline")
            .ok()
            .map(|c| c.trim_end().len())
    } else {
        None
    };
    if line.len() > limit {
        crate::say!(
            "the parameters take {} bytes: more than the {limit} a kernel keeps of its command \
             line on {arch} (COMMAND_LINE_SIZE); split the probes over fewer definitions or \
             arguments",
            line.len()
        );
        return Ok(ExitCode::from(1));
    }
    if args.json {
        print_json(
            &line,
            &params[0],
            persistent.as_deref(),
            limit,
            current,
            &done,
        );
    } else {
        crate::oline!("{line}");
    }
    let with_current = match current {
        Some(c) => {
            let total = c + 1 + line.len();
            let warn = if total > limit {
                " — too long: the kernel would cut it; drop something from the command line"
            } else {
                ""
            };
            format!(
                "; with this machine's command line ({c} bytes) the whole line is {total}{warn}"
            )
        }
        None => String::new(),
    };
    crate::say!(
        "{} probe(s); the parameters take {} of the {limit} bytes a kernel keeps of its \
         command line on {arch}{with_current}",
        done.len(),
        line.len()
    );
    crate::say!(
        "after booting with them: `ktrace report --boot` prints the events, `ktrace clean \
         --boot` removes the probes"
    );
    if persistent.is_some() {
        crate::say!(
            "the kernel enables boot probes in the top-level buffer only (the instance's event \
             list is read before kprobe_event= makes them): after each boot, once the previous \
             boot's events are read (`ktrace report --previous-boot`), enable them in the \
             instance: echo 1 > /sys/kernel/tracing/instances/{}/events/{BOOT_GROUP}/enable",
            boot::PERSIST_INSTANCE
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--buffer-size SIZE`, as `trace_buf_size=` reads it.
fn buffer_size_arg(s: &str) -> anyhow::Result<String> {
    match boot::buffer_size(s) {
        Some(_) => Ok(s.to_string()),
        None => anyhow::bail!(
            "--buffer-size {s:?}: not a size the kernel reads (a number of bytes, optionally \
             with K, M or G)"
        ),
    }
}

/// Each input checked and encoded for `kprobe_event=`, in order; `None`
/// when any is refused (each refusal said, nothing to print).
fn encode_all(checker: &mut Checker, inputs: &[String]) -> anyhow::Result<Option<Vec<Encoded>>> {
    let arch = checker.arch;
    let mut done: Vec<Encoded> = Vec::new();
    let mut refused = 0usize;
    let stderr = std::io::stderr();
    for input in inputs {
        match encode(checker, input, &done) {
            Ok(e) => done.push(e),
            Err(Refused::Check(report)) => {
                refused += 1;
                report.human(&mut stderr.lock(), arch, false)?;
            }
            Err(Refused::Boot(why)) => {
                refused += 1;
                crate::eline!("{input}\n  refused for kprobe_event=: {why}");
            }
        }
    }
    if refused > 0 {
        crate::say!(
            "{refused} of {} definition(s) cannot be set at boot: nothing printed",
            inputs.len()
        );
        return Ok(None);
    }
    Ok(Some(done))
}

/// `ktrace boot --json`: the parameters, their length against the limit,
/// and each definition as given, checked and encoded.
fn print_json(
    line: &str,
    kprobe_event: &str,
    persistent: Option<&str>,
    limit: usize,
    current: Option<usize>,
    done: &[Encoded],
) {
    let v = serde_json::json!({
        "parameters": line,
        "kprobe_event": kprobe_event,
        "persistent": persistent,
        "length": line.len(),
        "limit": limit,
        "current_command_line": current,
        "definitions": done.iter().map(|e| serde_json::json!({
            "input": e.input,
            "line": e.line,
            "encoded": e.encoded,
            "group": e.group,
            "event": e.event,
        })).collect::<Vec<_>>(),
    });
    crate::oline!("{v}");
}

/// Why a definition is not printed.
enum Refused {
    /// The kernel would refuse it (the checker's full report).
    Check(Box<check::Report>),
    /// The boot parameter cannot carry it.
    Boot(String),
}

/// Checks `input`, puts it in [`BOOT_GROUP`] when it names no group, checks
/// that line again and encodes it.
fn encode(checker: &mut Checker, input: &str, done: &[Encoded]) -> Result<Encoded, Refused> {
    let report = checker.check(boot::without_comment(input));
    let Some(write) = report.write_line() else {
        return Err(Refused::Check(Box::new(report)));
    };
    if write.trim_start().starts_with('-') {
        return Err(Refused::Boot(boot::BootRefusal::Removal.to_string()));
    }
    let line = if boot::names_group(&write) {
        write
    } else {
        let again = checker.check(&write);
        let Some(event) = probe_of(&again).map(|(_, e)| e) else {
            return Err(Refused::Boot(boot::BootRefusal::NotKprobe.to_string()));
        };
        boot::with_group(&write, BOOT_GROUP, &event)
    };
    let report = checker.check(&line);
    let Some((group, event)) = probe_of(&report) else {
        if report.write_line().is_none() {
            return Err(Refused::Check(Box::new(report)));
        }
        return Err(Refused::Boot(boot::BootRefusal::NotKprobe.to_string()));
    };
    if report.write_line().as_deref() != Some(line.as_str()) {
        return Err(Refused::Check(Box::new(report)));
    }
    if let Some(d) = done.iter().find(|d| d.group == group && d.event == event) {
        return Err(Refused::Boot(format!(
            "the event {group}/{event} is already defined by {:?}: give each probe its own name",
            d.input
        )));
    }
    let encoded = boot::encode_line(&line).map_err(|e| Refused::Boot(e.to_string()))?;
    Ok(Encoded {
        input: input.to_string(),
        line,
        encoded,
        group,
        event,
    })
}

/// The group and event of an accepted kprobe or kretprobe line.
fn probe_of(report: &check::Report) -> Option<(String, String)> {
    match &report.kernel.definition {
        Ok(Definition::Probe(p)) if matches!(p.kind, ProbeKind::Kprobe { .. }) => {
            Some((p.group.clone(), p.event.clone()))
        }
        _ => None,
    }
}

/// A non-blocking `trace_pipe_raw` read to its end: the pages there are
/// now (the kernel's "try again" is the end).
struct Drain(std::fs::File);

impl Read for Drain {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }
}

/// `ktrace report --boot`: the events of the boot-time probes, from the
/// top-level buffer they were written to (consumed, as `trace_pipe` does).
/// With `previous` (`--previous-boot`): from the boot-mapped instance of
/// `ktrace boot --persistent`, what the previous boot left there, decoded
/// with this boot's formats of the same probes (the same `kprobe_event=`
/// makes them again, in the same order, so with the same event ids — as
/// the kernel's own `trace` file of the instance reads them).
pub fn report(
    json: bool,
    previous: bool,
    perfetto: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    // the output first: a file that cannot be written is refused before
    // anything is read (reading consumes the events)
    let mut out_file = match perfetto {
        Some(p) => Some(crate::outfile::OutFile::replace(
            p,
            "the Perfetto trace",
            false,
        )?),
        None => None,
    };
    let root = discover::find_or_mount()?;
    let (top, last_info) = if previous {
        match previous_boot_instance(&root) {
            Some(found) => found,
            None => return Ok(ExitCode::from(1)),
        }
    } else {
        (Instance::top(&root), String::new())
    };
    let listed = DynEvents::new(&root)
        .list()
        .context("cannot list the dynamic events")?;
    let probes: Vec<ProbeSpec> = listed
        .iter()
        .filter(|e| e.kind.starts_with('p') || e.kind.starts_with('r'))
        .map(|e| ProbeSpec {
            group: e.group.clone(),
            system: e.group.clone(),
            event: e.event.clone(),
            kind: ktrace_stream::ProbeKind::from_dynamic_event(&e.line),
            target: None,
        })
        .collect();
    if probes.is_empty() {
        explain_no_boot_probes();
        return Ok(ExitCode::from(1));
    }
    let mut decoder = boot_decoder(&root, &top, &probes, previous)?;
    let streams: Vec<CpuPages> = top
        .open_cpu_buffers()?
        .into_iter()
        .map(|b| {
            let r: Box<dyn Read> = Box::new(Drain(std::fs::File::from(b.fd)));
            (b.cpu, r)
        })
        .collect();
    let view = KernelView::running(Some(&root));
    let mut symbols = crate::kview::KernelSymbols::with_strings(&view, &root);
    if previous {
        symbols = moved_text(symbols, &view, &last_info);
    }
    let defs: Vec<String> = listed.iter().map(|e| e.line.clone()).collect();
    let mut sink = boot_sink(out_file.as_mut(), json, &top, &symbols, defs)?;
    let end = ktrace_stream::replay(&mut decoder, streams, sink.as_mut());
    for w in decoder.take_warnings() {
        crate::say!("{w}");
    }
    let end = match end {
        Ok(e) => e,
        Err(ktrace_stream::Error::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(anyhow::Error::new(e).context("cannot print the boot-time events")),
    };
    drop(sink);
    if let Some(o) = out_file {
        let name = o.name();
        o.commit().with_context(|| format!("cannot write {name}"))?;
    }
    crate::cmd::report::summary(&end);
    let place = if previous {
        format!(
            "the previous boot's events in instances/{}",
            boot::PERSIST_INSTANCE
        )
    } else {
        "the top-level buffer".to_string()
    };
    crate::say!(
        "read from {place}, decoded with the formats of {} kprobe event(s); the events read \
         are gone from it, as with trace_pipe",
        probes.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The decoder of `ktrace report --boot`: the buffer's page layout, the
/// boot probes' formats, the saved comms and each CPU's statistics.
fn boot_decoder(
    root: &std::path::Path,
    top: &Instance,
    probes: &[ProbeSpec],
    previous: bool,
) -> anyhow::Result<Decoder> {
    let layout = ktrace_stream::page_layout(root, top)?;
    let table = boot_table(root, top, layout.long_size, probes);
    let comms = ktrace_tracefs::buffers::saved_cmdlines(root)
        .map(|t| Comms::from_saved_cmdlines(&t))
        .unwrap_or_default();
    let options = Options {
        // ktrace's own reads (a boot probe on openat sees them); not in the
        // previous boot's records, whose pids were another boot's
        skip_pids: if previous {
            Vec::new()
        } else {
            vec![std::process::id() as i32]
        },
        ..Options::default()
    };
    let mut decoder = Decoder::new(layout, table, TaskNames::fixed(comms), options, Vec::new());
    for cpu in top.cpus()? {
        if let Ok(s) = top.cpu_stats(cpu) {
            decoder.summary_mut().add_stats(cpu as usize, &s);
        }
    }
    Ok(decoder)
}

/// The symbols for the previous boot's addresses: moved by as far as the
/// kernel's text moved since (KASLR), when that can be told.
fn moved_text<'v>(
    mut symbols: crate::kview::KernelSymbols<'v>,
    view: &KernelView,
    last_info: &str,
) -> crate::kview::KernelSymbols<'v> {
    let current = view
        .kallsyms()
        .ok()
        .and_then(|t| t.by_name("_text", None).first().map(|s| s.addr));
    match text_delta(last_info, current) {
        Some(0) => {}
        Some(delta) => {
            crate::say!(
                "the kernel's text moved since the previous boot (KASLR; last_boot_info: \
                 {:?}, this boot's _text: {}): its addresses are symbolized {}{:#x} away, \
                 as the kernel's trace of the instance does",
                last_info.lines().next().unwrap_or(""),
                current.map_or("unknown".to_string(), |a| format!("{a:x}")),
                if (delta as i64) < 0 { "-" } else { "+" },
                (delta as i64).unsigned_abs()
            );
            symbols = symbols.with_text_delta(delta);
        }
        None => crate::say!(
            "cannot tell how far the kernel's text moved since the previous boot \
             (last_boot_info: {:?}, this boot's _text {}): its addresses are symbolized \
             as they are",
            last_info.lines().next().unwrap_or(""),
            if current.is_some() {
                "known"
            } else {
                "not in kallsyms"
            }
        ),
    }
    symbols
}

/// The sink of `ktrace report --boot`: Perfetto into `out_file`, JSON or
/// the kernel's text on standard output.
fn boot_sink<'a>(
    out_file: Option<&'a mut crate::outfile::OutFile>,
    json: bool,
    top: &Instance,
    symbols: &'a crate::kview::KernelSymbols,
    defs: Vec<String>,
) -> anyhow::Result<Box<dyn Sink + 'a>> {
    let out = std::fs::File::from(
        rustix::io::dup(std::io::stdout()).context("cannot use standard output")?,
    );
    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    Ok(if let Some(o) = out_file {
        o.start()?;
        Box::new(ktrace_perfetto::PerfettoSink::new(
            std::io::BufWriter::new(o.file()?),
            symbols,
            defs,
        ))
    } else if json {
        Box::new(JsonSink::new(out, symbols))
    } else {
        let style = top
            .trace_header()
            .map_or(FlagStyle::for_release(&release), |h| {
                FlagStyle::from_trace_header(&h, &release)
            });
        let in_ns = top.trace_clock().map_or(true, |c| clock_in_ns(&c));
        Box::new(
            TextSink::new(out, style, symbols, in_ns).syscalls(SyscallStyle::for_release(&release)),
        )
    })
}

/// The boot-mapped instance of `ktrace boot --persistent` and its
/// `last_boot_info`, when it holds (or may hold) the previous boot's
/// events; `None` when it does not, said.
fn previous_boot_instance(root: &std::path::Path) -> Option<(Instance, String)> {
    let inst = Instance::open(root, boot::PERSIST_INSTANCE);
    if !inst.exists() {
        crate::say!(
            "no instance {}: this boot's command line has no trace_instance={}@... \
             (`ktrace boot --persistent SIZE DEFS...` prints one; Linux 6.12 on)",
            boot::PERSIST_INSTANCE,
            boot::PERSIST_INSTANCE
        );
        return None;
    }
    let info = inst.last_boot_info();
    match info.as_deref() {
        None => {
            crate::say!(
                "instances/{} is not boot-mapped (no last_boot_info): it holds nothing \
                 from a previous boot",
                boot::PERSIST_INSTANCE
            );
            return None;
        }
        Some(info) if last_boot(info) == LastBoot::Unknown => {
            crate::say!(
                "this kernel's last_boot_info ({:?}) does not say whether instances/{} holds \
                 the previous boot's events (its log does: 'Ring buffer meta [N] is from \
                 previous boot!'); reading what it holds, which includes this boot's events \
                 if they were enabled there already",
                info.lines().next().unwrap_or(""),
                boot::PERSIST_INSTANCE
            );
        }
        Some(info) if last_boot(info) == LastBoot::Current => {
            crate::say!(
                "instances/{} holds no previous boot's events (last_boot_info: {:?}): they \
                 were read already (the kernel makes the buffer this boot's once they are \
                 read out), or the kernel started it afresh (its memory did not survive the \
                 reset, or moved)",
                boot::PERSIST_INSTANCE,
                info.lines().next().unwrap_or("")
            );
            return None;
        }
        Some(_) => {}
    }
    Some((inst, info.unwrap_or_default()))
}

/// How far (wrapping) the kernel's text moved from the boot that wrote a
/// persistent instance to this one, `current_text` being this boot's
/// `_text`: what the kernel adds to the instance's previous-boot addresses
/// (kernel/trace/trace.c `trace_adjust_address()`, `tr->text_delta`). 7.x's
/// `last_boot_info` gives the previous boot's `_text` (`ADDR\t[kernel]`, then
/// its modules); 6.12's gives the delta itself (`text delta:\tN`, signed
/// decimal). `None` when it cannot be told. Module addresses, which the
/// kernel moves by each module's own delta, are not told apart.
fn text_delta(info: &str, current_text: Option<u64>) -> Option<u64> {
    let first = info.lines().next()?.trim();
    if let Some(n) = first.strip_prefix("text delta:") {
        return n.trim().parse::<i64>().ok().map(|d| d as u64);
    }
    let (addr, what) = first.split_once(char::is_whitespace)?;
    if what.trim() != "[kernel]" {
        return None;
    }
    match u64::from_str_radix(addr, 16) {
        Ok(prev) if prev != 0 => current_text.map(|cur| cur.wrapping_sub(prev)),
        _ => None,
    }
}

/// What a boot-mapped instance's `last_boot_info` says of its buffer.
#[derive(Debug, PartialEq, Eq)]
enum LastBoot {
    /// The previous boot's (7.x: its kernel address, `ADDR\t[kernel]`).
    Previous,
    /// This boot's: `# Current` once the buffer is this boot's, or a
    /// buffer set up afresh with no previous kernel address (`0\t[kernel]`,
    /// arm64 7.2 after "Ring buffer boot meta mismatch of magic").
    Current,
    /// The file does not say: 6.12 prints `text delta:` and `data delta:`
    /// alike for a kept buffer and a fresh one (arm64 6.12 guest, both
    /// boots: `text delta:\t0`, `data delta:\t0`).
    Unknown,
}

fn last_boot(info: &str) -> LastBoot {
    let first = info.lines().next().unwrap_or("").trim();
    if first.starts_with("text delta:") {
        return LastBoot::Unknown;
    }
    let addr = first.split_ascii_whitespace().next().unwrap_or("");
    match u64::from_str_radix(addr, 16) {
        Ok(a) if a != 0 => LastBoot::Previous,
        _ => LastBoot::Current,
    }
}

/// The event table of the boot-time probes. A boot-time probe may have no
/// `format` (Debian's x86_64 6.1 and arm 6.12 guests, now and then: listed
/// in kprobe_events, its events/GROUP/EVENT directory never made): each is
/// waited for up to a second, then left to the lookup of unknown event ids
/// while reading, and its records are left out with a warning.
fn boot_table(
    root: &std::path::Path,
    instance: &Instance,
    long_size: usize,
    probes: &[ProbeSpec],
) -> EventTable {
    let mut table = EventTable::new(long_size, Some(root));
    for p in probes {
        let mut format = None;
        for _ in 0..10 {
            // (the instance's own copy of the events directory, where the
            // top-level one was not made: arm64 7.2, the boot after a reset)
            match ktrace_tracefs::buffers::event_format(root, &p.group, &p.event).or_else(|e| {
                ktrace_tracefs::buffers::event_format(instance.dir(), &p.group, &p.event)
                    .map_err(|_| e)
            }) {
                Ok(f) => {
                    format = Some(f);
                    break;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
        let added = format.map(|f| {
            table
                .add(&p.group, &f, p.kind, None, ktrace_stream::Role::Probe)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        match added {
            Some(Ok(())) => {}
            Some(Err(e)) => crate::say!("{}/{}: bad event format: {e}", p.group, p.event),
            None => crate::say!(
                "{g}/{e}: the kernel made no events/{g}/{e} directory for it (seen on 6.1 and \
                 6.12 with probes set at boot: a race in the kernel's tracefs setup), so its \
                 records cannot be decoded: they are left out",
                g = p.group,
                e = p.event
            ),
        }
    }
    // the stacks, and the trace_marker lines (`print`) written among the
    // events (the previous boot's instance keeps them as its trace does)
    for (name, role) in [
        ("kernel_stack", ktrace_stream::Role::Stack { user: false }),
        ("user_stack", ktrace_stream::Role::Stack { user: true }),
        ("print", ktrace_stream::Role::Kernel),
    ] {
        if let Ok(text) = ktrace_tracefs::buffers::event_format(root, "ftrace", name) {
            let _ = table.add("ftrace", &text, ktrace_stream::ProbeKind::Other, None, role);
        }
    }
    table
}

/// Why there is nothing to report: no `kprobe_event=` on this boot's command
/// line, or the kernel refused its definitions (its own words, from the
/// kernel log).
fn explain_no_boot_probes() {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if !cmdline
        .split_ascii_whitespace()
        .any(|w| w.starts_with(boot::PARAM))
    {
        crate::say!(
            "no boot-time probes: this boot's command line has no kprobe_event= \
             (`ktrace boot DEFS...` prints one)"
        );
        return;
    }
    crate::say!("the command line has kprobe_event=, but no kprobe event is present");
    let failures = kernel_log_failures();
    if failures.is_empty() {
        crate::say!(
            "(the kernel log holds no 'Failed to add event' line; were they removed with `ktrace clean --boot`?)"
        );
    }
    for f in failures {
        crate::say!("kernel log: {f}");
    }
}

/// The kernel log's `trace_kprobe: Failed to add event(ERR): DEFINITION`
/// lines (`setup_boot_kprobe_events()`), from /dev/kmsg.
fn kernel_log_failures() -> Vec<String> {
    use rustix::fs::{Mode, OFlags};
    let Ok(fd) = rustix::fs::open(
        "/dev/kmsg",
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let mut f = std::fs::File::from(fd);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    // one record per read; bounded so that a busy log cannot keep us here
    for _ in 0..100_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                let msg = rec.split_once(';').map_or("", |(_, m)| m).trim_end();
                if msg.contains("Failed to add event") {
                    out.push(msg.to_string());
                }
            }
            // EPIPE: a record overwritten while reading; go on
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PIPE.raw_os_error()) => {}
            Err(_) => break,
        }
    }
    out
}

/// `ktrace clean --boot [EVENT...]`: disables the boot-time probes in the
/// top-level buffer and removes them — every one of [`BOOT_GROUP`], or
/// only those named (`EVENT` in that group, or `GROUP/EVENT`, which may be
/// a probe somebody set at boot by hand: named, so asked for).
pub fn clean(names: &[String]) -> anyhow::Result<ExitCode> {
    let root = discover::find_or_mount()?;
    let top = Instance::top(&root);
    let dynevents = DynEvents::new(&root);
    let listed = dynevents.list().context("cannot list the dynamic events")?;
    let targets: Vec<(String, String)> = if names.is_empty() {
        listed
            .iter()
            .filter(|e| e.group == BOOT_GROUP)
            .map(|e| (e.group.clone(), e.event.clone()))
            .collect()
    } else {
        let mut v = Vec::new();
        for n in names {
            let (g, e) = n.split_once('/').unwrap_or((BOOT_GROUP, n.as_str()));
            if !listed.iter().any(|l| {
                l.group == g && l.event == e && (l.kind.starts_with('p') || l.kind.starts_with('r'))
            }) {
                anyhow::bail!(
                    "no kprobe event {g}/{e} is present (`ktrace list --probes` lists them): \
                     nothing removed"
                );
            }
            v.push((g.to_string(), e.to_string()));
        }
        v
    };
    if targets.is_empty() {
        crate::say!("no boot-time probes of ktrace (group {BOOT_GROUP}) are present");
        return Ok(ExitCode::SUCCESS);
    }
    for (g, e) in &targets {
        if top.event_enabled(g, e).ok().flatten() == Some(true) {
            top.set_enabled(g, Some(e), false)
                .with_context(|| format!("cannot disable {g}/{e}"))?;
        }
    }
    let mut removed = 0usize;
    for (g, e) in &targets {
        let file = listed
            .iter()
            .find(|l| &l.group == g && &l.event == e)
            .and_then(|l| l.file);
        dynevents.destroy_event(g, e, file).with_context(|| {
            format!("cannot remove {g}/{e} (enabled in an instance, or in use?)")
        })?;
        removed += 1;
    }
    crate::say!("removed {removed} boot-time probe(s)");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{LastBoot, last_boot, text_delta};

    #[test]
    fn text_delta_of_a_kernel_moved_by_kaslr() {
        // x86_64 7.2 guest, the boot after `echo b >/proc/sysrq-trigger`:
        // the previous _text, this boot's _text
        assert_eq!(
            text_delta("ffffffffb6c00000\t[kernel]\n", Some(0xffffffffa0800000)),
            Some(0xffffffffa0800000u64.wrapping_sub(0xffffffffb6c00000))
        );
        assert_eq!(
            text_delta("ffffffffa0800000\t[kernel]\n", Some(0xffffffffb6c00000)),
            Some(0x1640_0000)
        );
        // arm64 7.2: the same kaslr-seed after QEMU's reset, no move
        assert_eq!(
            text_delta("ffffbd459d800000\t[kernel]\n", Some(0xffffbd459d800000)),
            Some(0)
        );
        // 6.12 says the delta itself
        assert_eq!(
            text_delta("text delta:\t-4096\ndata delta:\t0\n", None),
            Some(-4096i64 as u64)
        );
        assert_eq!(
            text_delta("text delta:\t0\ndata delta:\t0\n", None),
            Some(0)
        );
        // nothing to tell it from
        assert_eq!(text_delta("ffffffffb6c00000\t[kernel]\n", None), None);
        assert_eq!(text_delta("# Current\n", Some(1)), None);
        assert_eq!(text_delta("0\t[kernel]\n", Some(1)), None);
        assert_eq!(text_delta("", Some(1)), None);
    }

    #[test]
    fn last_boot_info_of_a_previous_boot() {
        // arm64 7.2 guest, the boot after `echo b >/proc/sysrq-trigger`
        assert_eq!(
            last_boot("ffffbd459d800000\t[kernel]\n"),
            LastBoot::Previous
        );
        assert_eq!(
            last_boot("ffffbd459d800000\t[kernel]\nffffbd4500000000\tsome_module\n"),
            LastBoot::Previous
        );
        // the buffer is this boot's; a fresh one; nothing
        assert_eq!(last_boot("# Current\n"), LastBoot::Current);
        assert_eq!(last_boot("0\t[kernel]\n"), LastBoot::Current);
        assert_eq!(last_boot(""), LastBoot::Current);
        // arm64 6.12 guest: the same on a kept and a fresh buffer
        assert_eq!(
            last_boot("text delta:\t0\ndata delta:\t0\n"),
            LastBoot::Unknown
        );
    }
}
