//! `ktrace check`: read probe definitions and report what the kernel would say,
//! without touching the kernel: verdict, the line the kernel would read back, and for
//! rejections the kernel's `error_log` message with its caret, plus a hint.
//!
//! The language lives in `ktrace-probe`; this module only gathers input, loads
//! `--kallsyms` and prints. Without `--arch`, `--kernel`, `--kallsyms` or `--offline`, and
//! with tracefs mounted, the running kernel answers the target-dependent
//! questions (`crate::resolve::live::LiveEnv`: kallsyms, files, existing
//! events), its tracefs README says which language features it has, and its
//! version (for what the README does not list) and CPU count complete the
//! target; it is still only read, never written. Offline (`--kernel`,
//! `--arch`, `--kallsyms`, `--offline`), features follow the version.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use std::path::Path;

use ktrace_probe::{
    Arch, Checked, Definition, Environment, Interface, KernelVersion, Offline, Target, check_line,
};
use ktrace_symbols::KernelView;

use crate::resolve::live::{LiveEnv, SymbolsEnv, live_target};

/// Arguments of `ktrace check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The target kernel (live by default).
    #[command(flatten)]
    pub target: TargetArgs,
    /// The tracefs file the definitions are meant for.
    #[arg(long, value_enum, default_value = "dynamic_events")]
    pub file: FileArg,
    /// One JSON object per definition.
    #[arg(long)]
    pub json: bool,
    /// Also print how each BTF argument was compiled, and the classic definition.
    #[arg(long)]
    pub explain: bool,
    /// Definitions to check; one per line from standard input when none.
    pub defs: Vec<String>,
}

/// The flags that name the kernel a definition is checked for (`check`,
/// `boot`): the running kernel by default, or a target described offline.
#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// Target architecture (x86_64, arm64/aarch64, arm, riscv, i386); default: this machine's.
    #[arg(long, value_parser = crate::cli::arch())]
    pub arch: Option<String>,
    /// Target kernel version (MAJOR.MINOR or `uname -r`; checked against 5.10,
    /// 6.1, 6.12 and 7.2). Default: live, the running kernel (its README decides
    /// the features); offline, this machine's series when it is one of those,
    /// else the newest (7.2).
    #[arg(long)]
    pub kernel: Option<String>,
    /// A copy of the target's /proc/kallsyms, for symbol checks.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<std::path::PathBuf>,
    /// Possible CPUs of the target (for the default maxactive of return probes).
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Check offline even on a live kernel: no kallsyms, files or events of
    /// this machine are consulted. Without it, and without --arch and
    /// --kallsyms, the running kernel is asked when tracefs is mounted.
    #[arg(long)]
    pub offline: bool,
    /// A copy of the target's /sys/kernel/btf/vmlinux: BTF argument names
    /// (`file->f_flags`, `$arg*`, typed `$retval`) are checked with it and, for
    /// kernels before 6.6, compiled to the classic fetch language. Live, the
    /// running kernel's /sys/kernel/btf is used.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<std::path::PathBuf>,
    /// The target has no BTF (no /sys/kernel/btf/vmlinux: built without
    /// CONFIG_DEBUG_INFO_BTF, as Debian's 32-bit arm kernels are), so its
    /// parser reads no BTF names whatever its version: a bare name is "BTF
    /// is not available or not supported". Offline only; live, the running
    /// kernel's README says.
    #[arg(long, conflicts_with = "btf")]
    pub no_btf: bool,
    /// The target's vmlinux (ELF with symbols): kprobes at `SYM+OFF` are
    /// checked against its code (instruction boundary; on x86 whether `+4`
    /// is the entry after `endbr64`), offline. Live, the running kernel's
    /// code is read from /proc/kcore.
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<std::path::PathBuf>,
}

/// Which probe file to check against.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FileArg {
    /// dynamic_events (all kinds).
    #[value(name = "dynamic_events")]
    Dynamic,
    /// kprobe_events.
    #[value(name = "kprobe_events")]
    Kprobe,
    /// uprobe_events.
    #[value(name = "uprobe_events")]
    Uprobe,
}

/// Runs `ktrace check`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut source = Inputs::new(&args.defs);
    let mut batch = source.next_batch()?;
    let mut checker = Checker::new(&args, &batch)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_ok = true;
    loop {
        for input in &batch {
            let report = checker.check(input);
            all_ok &= report.kernel.accepted();
            let written = if args.json {
                writeln!(out, "{}", report.json(checker.arch))
            } else {
                report.human(&mut out, checker.arch, args.explain)
            };
            match written.and_then(|()| out.flush()) {
                Ok(()) => {}
                // a reader that went away (`| head`): a quiet end
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(exit(all_ok)),
                Err(e) => return Err(e.into()),
            }
        }
        batch = source.next_batch()?;
        if batch.is_empty() {
            break;
        }
        checker.want(&batch)?;
    }
    if let Some(n) = source.cut {
        anyhow::bail!(
            "standard input: line {n} is longer than {} KiB (the kernel takes 4,094 bytes): \
             checked as far as that, and nothing after it was read",
            LINE_CAP >> 10
        );
    }
    Ok(exit(all_ok))
}

fn exit(all_ok: bool) -> ExitCode {
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Definitions read from standard input are checked a batch at a time, so
/// an endless stream (`yes 'p vfs_read' | ktrace check`) is answered as it
/// comes, in bounded memory: at most this many lines ...
const BATCH_LINES: usize = 4096;
/// ... or bytes in a batch (a terminal: one line).
const BATCH_BYTES: usize = 8 << 20;
/// What is kept of one line: the kernel refuses any over 4,094 bytes, so a
/// longer one is checked (and shown) as its first 64 KiB, and a stream
/// without a newline (`/dev/zero`) is not read into memory whole.
const LINE_CAP: usize = 64 << 10;

/// The definitions to check: those given, or standard input's lines.
struct Inputs {
    given: Option<Vec<String>>,
    stdin: Option<std::io::StdinLock<'static>>,
    tty: bool,
    /// Lines read so far.
    lines: usize,
    /// The line (1-based) longer than [`LINE_CAP`] where reading stopped.
    cut: Option<usize>,
}

impl Inputs {
    fn new(defs: &[String]) -> Inputs {
        if !defs.is_empty() {
            return Inputs {
                given: Some(defs.to_vec()),
                stdin: None,
                tty: false,
                lines: 0,
                cut: None,
            };
        }
        let stdin = std::io::stdin();
        let tty = std::io::IsTerminal::is_terminal(&stdin);
        if tty {
            crate::say!("reading definitions from standard input, one per line (Ctrl-D to end)");
        }
        Inputs {
            given: None,
            stdin: Some(stdin.lock()),
            tty,
            lines: 0,
            cut: None,
        }
    }

    /// The next batch; empty at the end.
    fn next_batch(&mut self) -> anyhow::Result<Vec<String>> {
        if let Some(given) = self.given.take() {
            return Ok(given);
        }
        let Some(r) = self.stdin.as_mut() else {
            return Ok(Vec::new());
        };
        let lines = if self.tty { 1 } else { BATCH_LINES };
        let mut batch = Vec::new();
        let mut bytes = 0;
        let mut line = Vec::new();
        let mut ended = false;
        while batch.len() < lines && bytes < BATCH_BYTES {
            let Some(cut) =
                read_line_capped(r, LINE_CAP, &mut line).context("reading standard input")?
            else {
                ended = true;
                break;
            };
            if cut {
                // checked as far as kept; nothing after it is read
                ended = true;
                self.cut = Some(self.lines + batch.len() + 1);
            }
            bytes += line.len();
            let text = String::from_utf8(std::mem::take(&mut line)).map_err(|_| {
                anyhow::anyhow!("reading standard input: stream did not contain valid UTF-8")
            })?;
            batch.push(text);
            if cut {
                break;
            }
        }
        if ended {
            self.stdin = None;
        }
        self.lines += batch.len();
        Ok(batch)
    }
}

/// Reads one line of `r` into `line` (without its `\n` or `\r\n`), at
/// most `cap` bytes of it: `Some(true)` when the line is longer (the rest is
/// not read), `None` at the end of the input.
fn read_line_capped(
    r: &mut impl BufRead,
    cap: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut any = false;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        any = true;
        let (chunk, used, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = cap - line.len();
        if chunk.len() > room {
            line.extend_from_slice(&chunk[..room]);
            return Ok(Some(true));
        }
        line.extend_from_slice(chunk);
        r.consume(used);
        if end {
            break;
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(any.then_some(false))
}

/// The definitions given, or one per line of standard input when none are
/// (saying so when that is a terminal), at most [`BATCH_LINES`] of them
/// (`ktrace boot`: its definitions go on a kernel command line).
pub fn read_inputs(defs: &[String]) -> anyhow::Result<Vec<String>> {
    let mut source = Inputs::new(defs);
    let mut all = Vec::new();
    loop {
        let more = source.next_batch()?;
        if let Some(n) = source.cut {
            anyhow::bail!(
                "standard input: line {n} is longer than {} KiB",
                LINE_CAP >> 10
            );
        }
        if more.is_empty() {
            return Ok(all);
        }
        all.extend(more);
        if all.len() > BATCH_LINES {
            anyhow::bail!("more than {BATCH_LINES} definitions");
        }
    }
}

/// The options of a check that do not come from the definitions.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// `--arch`.
    pub arch: Option<String>,
    /// `--kernel`.
    pub kernel: Option<String>,
    /// `--kallsyms`.
    pub kallsyms: Option<std::path::PathBuf>,
    /// `--cpus`.
    pub cpus: Option<u32>,
    /// `--offline`.
    pub offline: bool,
    /// `--btf`.
    pub btf: Option<std::path::PathBuf>,
    /// `--no-btf`.
    pub no_btf: bool,
    /// `--vmlinux`.
    pub vmlinux: Option<std::path::PathBuf>,
    /// `--file`.
    pub interface: Interface,
    /// `--explain`.
    pub explain: bool,
    /// Check against the kernel's events as they are at set-up, not as
    /// they are at each check (`ktrace conform`, which writes meanwhile).
    pub frozen: bool,
    /// No "did you mean" suggestions for unknown symbols (`ktrace
    /// conform`, which does not compare hints).
    pub no_suggestions: bool,
}

impl From<&Args> for Options {
    fn from(args: &Args) -> Options {
        Options {
            interface: match args.file {
                FileArg::Dynamic => Interface::DynamicEvents,
                FileArg::Kprobe => Interface::KprobeEvents,
                FileArg::Uprobe => Interface::UprobeEvents,
            },
            explain: args.explain,
            ..Options::from(&args.target)
        }
    }
}

impl From<&TargetArgs> for Options {
    fn from(t: &TargetArgs) -> Options {
        Options {
            arch: t.arch.clone(),
            kernel: t.kernel.clone(),
            kallsyms: t.kallsyms.clone(),
            cpus: t.cpus,
            offline: t.offline,
            btf: t.btf.clone(),
            no_btf: t.no_btf,
            vmlinux: t.vmlinux.clone(),
            ..Options::default()
        }
    }
}

/// What ktrace itself makes of a line whose BTF names the kernel does not
/// read (5.10, 6.1): `ktrace trace` compiles them into the classic fetch
/// language. Present only where that differs from the kernel's verdict.
#[derive(Debug)]
pub struct KtraceForm {
    /// The compiled definition ktrace would write, or why it would refuse.
    pub result: Result<Box<ktrace_probe::btfarg::Compiled>, ktrace_probe::ProbeError>,
}

/// Whether the definition `line` probes a file (a uprobe, `PATH:OFFSET`):
/// the kernel's BTF says nothing of its arguments, so a missing BTF is no
/// hint for it.
fn on_a_file(line: &str) -> bool {
    ktrace_probe::head(line)
        .and_then(|h| h.place)
        .is_some_and(|p| p.starts_with('/') && p.contains(':'))
}

/// Live: whether the running kernel lacks event probes (no `e:` in its
/// README, or no eprobe_dyn_event_* in kallsyms: CONFIG_EPROBE_EVENTS off),
/// asked once.
/// The kernel's symbol table is the view's when it has one (a check that
/// needed it has parsed it already; under TCG a second read of
/// /proc/kallsyms was 2.9 s of a CI cell's 15-second conform budget,
/// arm64 7.2).
fn eprobes_absent(tracefs: &Path, view: Option<&KernelView>, absent: &mut Absent) -> bool {
    *absent.eprobes.get_or_insert_with(|| {
        if ktrace_tracefs::discover::require_eprobes(tracefs).is_err() {
            return true;
        }
        let built = match view.map(KernelView::kallsyms) {
            Some(Ok(table)) => {
                crate::session::eprobes_built_in(table.symbols().iter().map(|s| s.name.as_str()))
            }
            _ => std::fs::read_to_string("/proc/kallsyms")
                .ok()
                .and_then(|t| crate::session::eprobes_built(&t)),
        };
        built == Some(false)
    })
}

/// Live: a definition of a kind the running kernel was built without
/// (kprobes on a kernel without kprobe events; event probes where
/// CONFIG_EPROBE_EVENTS is off, which the README does not tell) is refused
/// as the kernel refuses it, with EINVAL and nothing logged, and says why.
/// `absent` keeps the answers once found (kallsyms is read once per batch,
/// and the probe files are looked up once, not once per line: a guest's
/// `stat()` of tracefs costs under emulation).
fn refuse_missing_kind(
    kernel: &mut Checked,
    tracefs: &Path,
    view: Option<&KernelView>,
    absent: &mut Absent,
) {
    let Ok(Definition::Probe(p)) = &kernel.definition else {
        return;
    };
    let (message, hint) = match &p.kind {
        ktrace_probe::ProbeKind::Kprobe { .. } => {
            let none = *absent.kprobes.get_or_insert_with(|| {
                ktrace_tracefs::discover::require(
                    tracefs,
                    ktrace_tracefs::discover::ProbeFile::KprobeEvents,
                )
                .is_err_and(|e| e.to_string().contains("no kprobe events"))
            });
            if !none {
                return;
            }
            (
                "this kernel has no kprobe events",
                ktrace_probe::NO_KPROBES_WHY,
            )
        }
        ktrace_probe::ProbeKind::Eprobe { .. } => {
            if !eprobes_absent(tracefs, view, absent) {
                return;
            }
            (
                "this kernel has no event probes (e:)",
                ktrace_probe::NO_EPROBES_WHY,
            )
        }
        ktrace_probe::ProbeKind::Uprobe { .. } => return,
    };
    kernel.definition = Err(ktrace_probe::ProbeError {
        kind: ktrace_probe::ErrorKind::Silent(ktrace_probe::Silent::Other),
        message,
        subsystem: None,
        pos: None,
        command: kernel.command.clone(),
        hint: Some(hint.to_string()),
    });
    kernel.unchecked.clear();
}

/// Which kinds of probe the running kernel was built without, once known.
#[derive(Debug, Default)]
struct Absent {
    kprobes: Option<bool>,
    eprobes: Option<bool>,
}

/// One definition's check: the kernel's verdict on the line as written, and
/// where it differs, ktrace's own reading of it.
#[derive(Debug)]
pub struct Report {
    /// The line checked.
    pub input: String,
    /// The kernel's verdict: definition, error, unchecked items.
    pub kernel: Checked,
    /// The kernel's readback, where the check's own rendering does not
    /// have it (a native BTF route: the kernel renames and types the
    /// arguments from BTF).
    pub readback: Option<String>,
    /// The BTF route the line took (`native`: the kernel reads the names;
    /// `compiled`: ktrace compiles them), when it used BTF.
    pub btf_route: Option<&'static str>,
    /// The native route's compilation (what is written, the explanation).
    pub native: Option<Box<ktrace_probe::btfarg::Compiled>>,
    /// ktrace's own reading, where it differs from the kernel's verdict.
    pub ktrace: Option<KtraceForm>,
    /// Why code-dependent checks (instruction boundary, entry) stay open.
    pub why: Option<String>,
    /// A hint about BTF that could not be loaded.
    pub btf_missing: Option<String>,
}

/// The names a line's words may look up in kallsyms, taken from the words
/// as the kernel splits them whether or not the line parses as ktrace's
/// spec does: the probed place's symbol (`p: sym`, a quoted `"sym"`, `MOD:SYM`
/// and its `SYM`) and every `@SYM` argument's. Counting more names than
/// the checks ask for costs nothing; one they ask for and that was not
/// counted is left unchecked (offline with `--kallsyms`, x86_64 6.1, conform
/// seed 1201: `p: sg_miter_ge` was refused for its event name where the
/// kernel refuses the symbol first, and `p "vfs_read"` was taken). An
/// fprobe's function (`f`, `fN`, `f:NAME`, without `%return` and `MOD:`)
/// is counted too; a glob is not, ftrace matches it against its own list
/// (`f target\_store` is a glob too: [`ktrace_symbols::glob::is_glob`]).
fn raw_symbol_words(line: &str) -> Vec<String> {
    let cut = |w: &str| -> String {
        let w = w.split('%').next().unwrap_or("");
        match w
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == '+' || c == '-')
        {
            Some((i, _)) => w[..i].to_string(),
            None => w.to_string(),
        }
    };
    let mut out = Vec::new();
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() >= 2 && matches!(words[0].as_bytes().first(), Some(b'p' | b'r' | b'f' | b't')) {
        let place = cut(words[1]);
        if let Some((_, name)) = place.split_once(':') {
            out.push(name.to_string());
        }
        out.push(place);
    }
    for w in words.iter().skip(2) {
        if let Some((_, after)) = w.split_once('@') {
            let sym = cut(after.split([':', ')', '(']).next().unwrap_or(""));
            out.push(sym);
            if let Some((module, rest)) = after.split_once(':') {
                out.push(format!(
                    "{module}:{}",
                    cut(rest.split([':', ')', '(']).next().unwrap_or(""))
                ));
                out.push(cut(rest.split([':', ')', '(']).next().unwrap_or("")));
            }
        }
    }
    // an event probe filter's `FIELD.function == NAME` names a symbol: every
    // word of the filter that could be one is counted (a few per filter)
    if let Some(at) = words.iter().position(|w| *w == "if") {
        for w in &words[at + 1..] {
            out.extend(
                w.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$')))
                    .filter(|p| p.len() > 1 && !p.contains(".function") && !p.contains(".ustring"))
                    .map(str::to_string),
            );
        }
    }
    // a glob (`f vma*`) names no symbol: its matches are counted where it
    // is expanded (x86_64 6.12, offline, seed 1204: counted as a name, it
    // was refused as missing)
    out.retain(|s| !s.is_empty() && !ktrace_symbols::glob::is_glob(s));
    out
}

/// The kernel symbol names `inputs` mention: their specs' and every word
/// [`raw_symbol_words`] finds.
fn wanted_symbols(inputs: &[String]) -> Vec<String> {
    inputs
        .iter()
        .filter_map(|i| crate::resolve::spec::split(i).ok().flatten())
        .flat_map(|s| s.kernel_symbols())
        .chain(inputs.iter().flat_map(|i| raw_symbol_words(i)))
        .collect()
}

/// The checking pipeline of `ktrace check` (and of `ktrace conform`):
/// built once for a batch of definitions, then one [`Checker::check`] per line.
pub struct Checker {
    /// The target architecture.
    pub arch: Arch,
    /// The target (kernel, features, file).
    pub target: Target,
    file_counts: Option<ktrace_symbols::kallsyms::SymbolCounts>,
    /// The `--kallsyms` copy as a table, parsed when a check needs its
    /// addresses.
    file_view: Option<KernelView>,
    live_counts: Option<ktrace_symbols::kallsyms::SymbolCounts>,
    tracefs: Option<std::path::PathBuf>,
    route: ktrace_symbols::route::Route,
    btf: Option<ktrace_symbols::btf_types::KernelBtf>,
    vmlinux: Option<std::path::PathBuf>,
    view: Option<KernelView>,
    explain: bool,
    frozen: Option<crate::resolve::live::Frozen>,
    /// Live: whether the kernel lacks event probes, once asked.
    absent: Absent,
    no_suggestions: bool,
}

impl Checker {
    /// Sets up the checks of `inputs` (their kernel symbols are counted in
    /// one pass) for the target the options name, or the running kernel.
    pub fn new(args: &Args, inputs: &[String]) -> anyhow::Result<Checker> {
        Self::with_options(&Options::from(args), inputs)
    }

    /// As [`Checker::new`], from [`Options`].
    pub fn with_options(opts: &Options, inputs: &[String]) -> anyhow::Result<Checker> {
        let arch = match (&opts.arch, &opts.vmlinux) {
            (Some(a), _) => a.parse::<Arch>()?,
            (None, Some(v)) => ktrace_symbols::code::vmlinux_arch(v)?,
            (None, None) => Arch::native().context("unknown machine architecture: give --arch")?,
        };
        // Offline, the version decides the language: the one given, else this
        // machine's series when it is one ktrace is checked against, else the newest.
        // Live (below), the running kernel's README decides the features.
        let kernel = match &opts.kernel {
            Some(k) => {
                let v = k.parse::<KernelVersion>()?;
                // Debian's `uname -r` (`5.10.0-32-cloud-arm64`) names the
                // ABI, not the stable update, on which some rules turn
                // (5.10.223 and 5.10.262 differ: offline, conform seed
                // 1204 on arm64 5.10)
                if k.contains(".0-") {
                    crate::eline!(
                        "ktrace: --kernel {k} names no stable update: checked as the newest {}.{} \
                         (Debian's /proc/version names it, e.g. `Debian 5.10.223-1`: give \
                         --kernel 5.10.223)",
                        v.major,
                        v.minor
                    );
                }
                v
            }
            None => KernelVersion::offline_default(
                KernelView::running(None)
                    .release()
                    .and_then(|r| r.parse().ok()),
            ),
        };
        let mut target = Target::new(arch);
        target.kernel = kernel;
        target.interface = opts.interface;
        target.possible_cpus = opts.cpus;
        if opts.no_btf {
            // the version's language without BTF arguments (the parser
            // generation stays the version's: 6.5+ still takes a bare name
            // for a BTF variable, and refuses it)
            let mut f = target.features();
            f.btf_args = false;
            target.features = Some(f);
        }
        // The kernel symbol names the definitions mention, counted in one pass.
        let wanted = wanted_symbols(inputs);
        let wanted = wanted.iter().map(String::as_str);
        let mounted = if opts.offline
            || opts.no_btf
            || opts.arch.is_some()
            || opts.kernel.is_some()
            || opts.kallsyms.is_some()
            || opts.vmlinux.is_some()
        {
            None
        } else {
            ktrace_tracefs::discover::find_mounted()
        };
        // one view of the copy: its counting pass keeps the text for the
        // table a check may need after (the file is read once)
        let file_view = opts
            .kallsyms
            .as_deref()
            .map(|p| KernelView::running(None).with_kallsyms_file(p));
        let file_counts = match &file_view {
            Some(v) => Some(v.symbol_counts(wanted.clone())?),
            None => None,
        };
        let view = mounted
            .as_deref()
            .map(|root| KernelView::running(Some(root)));
        let live_counts = view.as_ref().and_then(|v| v.symbol_counts(wanted).ok());
        if let Some(v) = &view {
            // Live: the kernel says what its language offers (README); its
            // version only fills in what the README does not list.
            let t = live_target(arch, v);
            target.kernel = t.kernel;
            target.features = t.features;
            if opts.cpus.is_none() {
                target.possible_cpus = t.possible_cpus;
            }
        }
        let route = match (&opts.btf, &mounted) {
            (Some(file), _) => ktrace_symbols::route::Route::offline(file, target.kernel),
            (None, Some(_)) => ktrace_symbols::route::Route::live(
                target.kernel,
                view.as_ref().and_then(|v| v.features()),
            ),
            (None, None) if opts.no_btf => ktrace_symbols::route::Route::absent(target.kernel),
            (None, None) => ktrace_symbols::route::Route::none(target.kernel),
        };
        // The BTF the kernel's own reading of BTF names is checked with.
        let btf = match (&opts.btf, &mounted) {
            (Some(file), _) => Some(
                ktrace_symbols::btf_types::KernelBtf::open_file(file)
                    .with_context(|| format!("--btf {}", file.display()))?,
            ),
            (None, Some(_)) => ktrace_symbols::btf_types::KernelBtf::running(),
            (None, None) => None,
        };
        let tracefs = view
            .as_ref()
            .and_then(|v| v.tracefs().map(Path::to_path_buf));
        Ok(Checker {
            arch,
            target,
            file_counts,
            file_view,
            live_counts,
            frozen: tracefs
                .as_deref()
                .filter(|_| opts.frozen)
                .map(crate::resolve::live::Frozen::capture),
            tracefs,
            route,
            btf,
            vmlinux: opts.vmlinux.clone(),
            view,
            explain: opts.explain,
            absent: Absent::default(),
            no_suggestions: opts.no_suggestions,
        })
    }

    /// Counts the kernel symbols a further batch of definitions names, for
    /// their checks (a stream of definitions is checked a batch at a time).
    pub fn want(&mut self, inputs: &[String]) -> anyhow::Result<()> {
        let wanted = wanted_symbols(inputs);
        let wanted = wanted.iter().map(String::as_str);
        if let Some(v) = &self.file_view {
            self.file_counts = Some(v.symbol_counts(wanted.clone())?);
        }
        if let Some(v) = &self.view {
            self.live_counts = v.symbol_counts(wanted).ok();
        }
        Ok(())
    }

    /// Checks one line as written to the file of `interface` (the one the
    /// checker was set up for is [`Checker::check`]'s).
    pub fn check_as(&mut self, interface: Interface, input: &str) -> Report {
        let set_up = std::mem::replace(&mut self.target.interface, interface);
        let report = self.check(input);
        self.target.interface = set_up;
        report
    }

    /// Checks one line: the kernel's verdict first, then ktrace's own
    /// reading where it differs.
    pub fn check(&mut self, input: &str) -> Report {
        // Live, an event probe's line (or any the eprobe parser is handed:
        // its first word starts with `e`) on a kernel whose README lists
        // `e:` but that was built without them: no eprobe parser is behind
        // dynamic_events, as kallsyms tells (read once, when first needed).
        if let Some(t) = &self.tracefs
            && self.target.features().eprobes
            && input.trim_start().starts_with('e')
            && eprobes_absent(t, self.view.as_ref(), &mut self.absent)
            && let Some(f) = &mut self.target.features
        {
            f.eprobes = false;
        }
        let arch = self.arch;
        let target = self.target;
        let btf = self.btf.as_ref();
        let file_env = (self.file_counts.is_some() || (self.tracefs.is_none() && btf.is_some()))
            .then_some(SymbolsEnv {
                symbols: self.file_counts.as_ref(),
                btf,
                table: self.file_view.as_ref(),
                arch,
            });
        let live_env = self.tracefs.as_deref().map(|t| LiveEnv {
            symbols: self.live_counts.as_ref(),
            tracefs: t,
            btf,
            view: self.view.as_ref(),
            frozen: self.frozen.as_ref(),
            kernel_decides_ftrace: false,
            no_suggestions: self.no_suggestions,
        });
        let env: &dyn Environment = match (&file_env, &live_env) {
            (Some(k), _) => k,
            (None, Some(l)) => l,
            (None, None) => &Offline,
        };
        // The functions' code, for kprobes at an offset.
        let source = match (&self.vmlinux, &self.view) {
            (Some(file), _) => ktrace_symbols::code::Source::Vmlinux(file),
            (None, Some(v)) => ktrace_symbols::code::Source::live(v),
            (None, None) => ktrace_symbols::code::Source::None(
                "offline: give --vmlinux FILE for the code".to_string(),
            ),
        };
        // The kernel's verdict on the line as written: the kernel's own
        // parser, BTF names included where the kernel reads them.
        let mut kernel = check_line(input, target, env);
        if let Some(t) = &self.tracefs {
            refuse_missing_kind(&mut kernel, t, self.view.as_ref(), &mut self.absent);
        }
        let why = ktrace_symbols::code::check(&mut kernel, target, &source);
        let mut report = Report {
            input: input.to_string(),
            kernel,
            readback: None,
            btf_route: None,
            native: None,
            ktrace: None,
            why,
            btf_missing: None,
        };
        // A uprobe inside an instruction: the kernel takes it; `ktrace
        // trace` does not (the program would die of SIGILL).
        if let Ok(Definition::Probe(p)) = &report.kernel.definition
            && let ktrace_probe::ProbeKind::Uprobe { path, offset, .. } = &p.kind
            && let Err(why) = ktrace_symbols::code::uprobe_boundary(Path::new(path), *offset)
        {
            report.ktrace = Some(KtraceForm {
                result: Err(ktrace_probe::ProbeError {
                    kind: ktrace_probe::ErrorKind::Silent(ktrace_probe::Silent::Other),
                    message: "the uprobe is not on an instruction boundary",
                    subsystem: None,
                    pos: None,
                    command: report.kernel.command.clone(),
                    hint: Some(why),
                }),
            });
            return report;
        }
        if !ktrace_probe::btfarg::may_use_btf(input) {
            return report;
        }
        if self.route.native {
            report.btf_route = Some("native");
            if self.explain
                && let Some(Ok(c)) =
                    ktrace_symbols::define::compile(input, target, env, &mut self.route)
            {
                report.native = Some(Box::new(c));
            }
            if !report.kernel.accepted()
                && self.btf.is_none()
                && let Err(e) = &report.kernel.definition
                && e.message.contains("BTF")
                && !on_a_file(&e.command)
            {
                report.btf_missing = Some(ktrace_symbols::route::no_btf());
            }
            return report;
        }
        // The kernel does not read BTF names (5.10, 6.1, kernels built
        // without BTF arguments): ktrace's compilation is the second answer.
        let Some(result) =
            ktrace_symbols::define::compiled(input, target, env, &mut self.route, &source)
        else {
            return report;
        };
        let result = result.map(Box::new);
        let same = match &result {
            Ok(c) => {
                c.checked.accepted() == report.kernel.accepted()
                    && c.readback == report.kernel.normalized(arch)
            }
            Err(_) => !report.kernel.accepted(),
        };
        if result.as_ref().is_ok_and(|c| c.uses_btf) {
            report.btf_route = Some("compiled");
        }
        if result.is_err() && !on_a_file(input) {
            report.btf_missing = self.route.missing.clone();
        }
        if !same {
            report.ktrace = Some(KtraceForm { result });
        }
        report
    }
}

impl Report {
    /// The readback of an accepted line, as the kernel would list it.
    pub fn normalized(&self, arch: Arch) -> Option<String> {
        if !self.kernel.accepted() {
            return None;
        }
        self.readback
            .clone()
            .or_else(|| self.kernel.normalized(arch))
    }

    /// The format file the kernel would give the event (without its `ID:`
    /// line).
    pub fn format(&self, arch: Arch, features: ktrace_probe::kernel::Features) -> Option<String> {
        match &self.kernel.definition {
            Ok(Definition::Probe(p)) => {
                Some(ktrace_probe::render::format_file_for(p, arch, features))
            }
            Ok(Definition::Fprobe(f)) => Some(ktrace_probe::render::format_file_for(
                &f.probe, arch, features,
            )),
            _ => None,
        }
    }

    /// What `ktrace trace` writes for this line: ktrace's own compilation
    /// where it differs from the kernel's reading, else the line itself;
    /// `None` when neither is accepted.
    pub fn write_line(&self) -> Option<String> {
        match &self.ktrace {
            Some(KtraceForm { result: Ok(c) }) if c.checked.accepted() => Some(c.text.clone()),
            Some(_) => None,
            None if self.kernel.accepted() => Some(self.input.clone()),
            None => None,
        }
    }

    /// The JSON object `ktrace check --json` prints for this line.
    pub fn json(&self, arch: Arch) -> serde_json::Value {
        let mut v = json_line(&self.input, &self.kernel, arch, self.why.as_deref());
        if let Some(e) = v.get_mut("error")
            && let (Some(m), true) = (&self.btf_missing, !e.is_null())
        {
            let h = e["hint"].as_str().unwrap_or_default().to_string();
            e["hint"] = format!("{h} (btf: {m})").trim_start().to_string().into();
        }
        if self.kernel.accepted()
            && let Some(r) = &self.readback
        {
            v["normalized"] = r.clone().into();
        }
        if let Some(route) = self.btf_route {
            v["btf_route"] = route.into();
        }
        if let Some(w) = self.write_line() {
            v["write"] = w.into();
        }
        if let Some(c) = &self.native {
            v["classic"] = c.classic.clone().into();
        }
        if let Some(k) = &self.ktrace {
            v["ktrace"] = match &k.result {
                Ok(c) => serde_json::json!({
                    "accepted": c.checked.accepted(),
                    "compiled": c.text,
                    "normalized": c.readback,
                    "uses_btf": c.uses_btf,
                }),
                Err(e) => serde_json::json!({
                    "accepted": false,
                    "error": {"message": e.message, "pos": e.pos, "hint": e.hint},
                }),
            };
        }
        v
    }

    /// The human report `ktrace check` prints for this line.
    pub fn human(&self, out: &mut impl Write, arch: Arch, explain: bool) -> std::io::Result<()> {
        let c = &self.kernel;
        match &c.definition {
            Ok(Definition::Empty) => writeln!(out, "ok: (nothing to do) {}", self.input)?,
            Ok(_) => writeln!(out, "ok: {}", self.normalized(arch).unwrap_or_default())?,
            Err(e) => {
                writeln!(out, "rejected: {}", e.command)?;
                if let Some((cmd, caret)) = e.caret_lines() {
                    writeln!(out, "  {cmd}")?;
                    writeln!(out, "  {caret}")?;
                }
                match e.subsystem {
                    Some(sub) => writeln!(out, "  {sub}: error: {}", e.message)?,
                    None => writeln!(out, "  error: {} (the kernel logs nothing)", e.message)?,
                }
                match (&e.hint, &self.btf_missing) {
                    (Some(h), Some(m)) => writeln!(out, "  hint: {h} (btf: {m})")?,
                    (Some(h), None) => writeln!(out, "  hint: {h}")?,
                    (None, Some(m)) => writeln!(out, "  hint: btf: {m}")?,
                    (None, None) => {}
                }
            }
        }
        if explain && self.btf_route == Some("native") {
            writeln!(out, "  btf route: native")?;
            if let Some(n) = &self.native {
                writeln!(out, "{}", n.explain())?;
            }
        }
        if let Some(k) = &self.ktrace {
            match &k.result {
                Ok(comp) if comp.checked.accepted() => {
                    writeln!(
                        out,
                        "  ktrace: `ktrace trace` compiles it with BTF (this kernel does not read BTF names) to: {}",
                        comp.readback.clone().unwrap_or_else(|| comp.text.clone())
                    )?;
                    if explain {
                        writeln!(out, "  btf route: compiled")?;
                        writeln!(out, "{}", comp.explain())?;
                    }
                }
                Ok(comp) => {
                    let why = comp
                        .checked
                        .definition
                        .as_ref()
                        .err()
                        .map(|e| e.message.to_string())
                        .unwrap_or_default();
                    writeln!(out, "  ktrace: `ktrace trace` would refuse it: {why}")?;
                }
                Err(e) => {
                    writeln!(
                        out,
                        "  ktrace: `ktrace trace` refuses it: {}{}",
                        e.message,
                        e.hint
                            .as_deref()
                            .map(|h| format!("; hint: {h}"))
                            .unwrap_or_default()
                    )?;
                }
            }
        }
        if !c.unchecked.is_empty() {
            let list = ktrace_symbols::code::not_checked(c, self.why.as_deref());
            writeln!(out, "  not checked: {}", list.join("; "))?;
        }
        Ok(())
    }
}

fn json_line(input: &str, c: &Checked, arch: Arch, why: Option<&str>) -> serde_json::Value {
    let unchecked = ktrace_symbols::code::not_checked(c, why);
    let error = match &c.definition {
        Ok(_) => serde_json::Value::Null,
        Err(e) => serde_json::json!({
            "message": e.message,
            "pos": e.pos,
            "logged": e.kind.is_logged(),
            "subsystem": e.subsystem,
            "command": e.command,
            "hint": e.hint,
        }),
    };
    let mut v = serde_json::json!({
        "input": input,
        "accepted": c.accepted(),
        "normalized": c.normalized(arch),
        "error": error,
        "not_checked": unchecked,
    });
    if let Ok(Definition::Probe(p)) = &c.definition {
        v["group"] = p.group.clone().into();
        v["event"] = p.event.clone().into();
        v["boot_param"] = ktrace_probe::render::boot_param(p, arch).into();
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &str) -> serde_json::Value {
        let c = check_line(line, Target::new(Arch::X86_64), &Offline);
        json_line(line, &c, Arch::X86_64, None)
    }

    #[test]
    fn on_a_file_reads_the_place_word() {
        assert!(on_a_file("p:u/e /bin/sh:0x10 %ax"));
        assert!(on_a_file("r\t/bin/sh:0x10"));
        assert!(!on_a_file("p:g/e vfs_read"));
        assert!(!on_a_file("p /bin/sh"));
        assert!(!on_a_file("/bin/sh:0x10"));
        assert!(!on_a_file(""));
    }

    #[test]
    fn json_lines() {
        let v = json("p:myev do_sys_openat2+16");
        assert_eq!(v["accepted"], true);
        assert_eq!(v["normalized"], "p:kprobes/myev do_sys_openat2+16");
        assert_eq!(v["error"], serde_json::Value::Null);
        let v = json("p:myev do_sys_openat2 x=%rdi");
        assert_eq!(v["accepted"], false);
        assert_eq!(v["normalized"], serde_json::Value::Null);
        assert_eq!(v["error"]["message"], "Invalid register name");
        assert_eq!(v["error"]["pos"], 24);
        assert_eq!(v["error"]["logged"], true);
    }

    #[test]
    fn a_kallsyms_file_answers_for_every_word_the_kernel_looks_up() {
        // offline with --kallsyms, x86_64 6.1, conform seed 1201: names the
        // spec parser does not take (`p: SYM`, a quoted symbol, a quoted
        // `MOD:SYM`) went uncounted and unchecked, and the kernel refuses
        // them for the symbol first; seed 1202: `r SYM+0x100000` was judged
        // by its offset where the kernel looks the address up
        let dir = std::env::temp_dir().join(format!("ktrace_raw_ks_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        std::fs::write(
            &ks,
            "ffffffff81000000 T _stext\nffffffff81000100 T vfs_read\n\
             ffffffff81000200 T vfs_write\nffffffff81000300 T _etext\n",
        )
        .unwrap();
        let lines: Vec<String> = [
            "p: nosuch",
            "p \"vfs_read\"",
            "p:ev \"nosuchmod:vfs_read\" $arg1",
            "p: vfs_read",
            "r vfs_read+0x100 $retval",
            "r vfs_read+0x104",
            "r vfs_read+8",
            "r vfs_write+0x10000 +0(%zz)",
            "p vfs_read a=@nosuch",
            "p nosuchmod: $arg10000",
            "r nosuch+0x100000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let opts = Options {
            arch: Some("x86_64".into()),
            kernel: Some("6.1".into()),
            kallsyms: Some(ks),
            offline: true,
            ..Options::default()
        };
        let mut c = Checker::with_options(&opts, &lines).unwrap();
        let answers: Vec<String> = lines
            .iter()
            .map(|l| match c.check(l).kernel.definition {
                Ok(_) => "ok".to_string(),
                Err(e) => e.message.to_string(),
            })
            .collect();
        assert_eq!(
            answers,
            [
                "Invalid probed address or symbol",
                "Invalid probed address or symbol",
                "Invalid $-variable specified",
                "Event name is not specified",
                // vfs_write's entry
                "ok",
                // vfs_write+4: after an endbr64 or not, registration decides
                "ok",
                "Retprobe address must be an function entry",
                // past the text of a kallsyms without data: in no symbol
                // (-ENOENT), so the arguments come next
                "Invalid register name",
                "Invalid probed address or symbol",
                // a module the copy does not list: no entry, so `$argN` is
                // no variable (seed 1202)
                "Invalid $-variable specified",
                // no such name: no offset judged (arm64 6.1, seed 1205)
                "Invalid probed address or symbol",
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A cell's directory of the conformance corpus (ktrace-probe's fixtures).
    fn corpus_dir(cell: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/probe/fixtures/corpus")
            .join(cell)
    }

    /// The blocks of the 32-bit arm corpora (Debian's armmp 6.12 and 7.2,
    /// built without BTF) that the kernel refused with "BTF is not available
    /// or not supported", as `(definition, message, caret)`.
    fn armmp_btf_refusals(cell: &str) -> Vec<(String, String, usize)> {
        let text = std::fs::read_to_string(corpus_dir(cell).join("corpus.txt")).unwrap();
        let mut out = Vec::new();
        for block in text.split("=== DEF\n").skip(1) {
            let mut lines = block.lines();
            let def = lines.next().unwrap().to_string();
            let log: Vec<&str> = lines.skip_while(|l| *l != "--- ERROR_LOG").collect();
            // the last entry is the write's answer (a parser may log twice)
            let Some(i) = log.iter().rposition(|l| l.contains(" error: ")) else {
                continue;
            };
            if !log[i].ends_with(" error: BTF is not available or not supported") {
                continue;
            }
            let start = log[i + 1].find("Command: ").unwrap() + "Command: ".len();
            let caret = log[i + 2].find('^').unwrap() - start;
            out.push((def, "BTF is not available or not supported".into(), caret));
        }
        out
    }

    #[test]
    fn a_target_without_btf_is_checked_as_its_kernel_reads_it() {
        // issue 22, conform seeds 1204 and 1205 offline on arm 6.12 and 7.2:
        // a bare name is a BTF variable there, and the kernel, which has no
        // BTF, refuses it before looking at the name (`common_pid`,
        // `__probe_ip`); checked as a BTF kernel, ktrace said "This argument
        // name is already used". The kernel's answers are the corpus blocks
        // captured on those kernels.
        for (cell, kernel) in [("arm-7.2", "7.2"), ("arm-6.12", "6.12.95")] {
            let cases = armmp_btf_refusals(cell);
            assert!(cases.len() >= 6, "{cell}: {} cases", cases.len());
            let lines: Vec<String> = cases.iter().map(|c| c.0.clone()).collect();
            let opts = Options {
                arch: Some("arm".into()),
                kernel: Some(kernel.into()),
                kallsyms: Some(corpus_dir(cell).join("kallsyms.txt")),
                ..Options::default()
            };
            let answers = |no_btf: bool| {
                let mut c = Checker::with_options(
                    &Options {
                        no_btf,
                        ..opts.clone()
                    },
                    &lines,
                )
                .unwrap();
                cases
                    .iter()
                    .map(|(def, _, _)| match c.check(def).kernel.definition {
                        Ok(_) => ("ok".to_string(), 0),
                        Err(e) => (e.message.to_string(), e.pos.unwrap_or(usize::MAX)),
                    })
                    .collect::<Vec<_>>()
            };
            let want: Vec<(String, usize)> = cases.iter().map(|c| (c.1.clone(), c.2)).collect();
            assert_eq!(answers(true), want, "{cell} with --no-btf");
            // told nothing, ktrace answers for the version's usual build
            assert!(
                answers(false).iter().zip(&want).any(|(a, w)| a != w),
                "{cell}: --no-btf changes nothing"
            );
        }
    }

    #[test]
    fn fprobe_functions_are_checked_against_a_kallsyms_file() {
        // issue 22, category 2: `f:` symbols were not counted in --kallsyms
        // and every one was left unchecked.
        let dir = std::env::temp_dir().join(format!("ktrace_fprobe_ks_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        std::fs::write(
            &ks,
            "ffffffff81000000 T vfs_read\nffffffff81000100 t target_store\n",
        )
        .unwrap();
        let lines: Vec<String> = [
            "f nosuch_fn",
            "f2:g/e nosuch_fn%return",
            "f vfs_read",
            "f:g/e vfs_read%return",
            "f vfs_*",
            "f target\\_store",
            "p vfs_read",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let opts = Options {
            arch: Some("x86_64".into()),
            kernel: Some("7.2".into()),
            kallsyms: Some(ks),
            ..Options::default()
        };
        let mut c = Checker::with_options(&opts, &lines).unwrap();
        let accepted: Vec<bool> = lines.iter().map(|l| c.check(l).kernel.accepted()).collect();
        assert_eq!(accepted, [false, false, true, true, true, true, true]);
        let e = c.check("f nosuch_fn").kernel.definition.unwrap_err();
        assert_eq!(e.message, "Invalid probed address or symbol");
        assert!(raw_symbol_words("f mod:fn%return").contains(&"fn".to_string()));
        assert!(raw_symbol_words("f:g/e fn%return").contains(&"fn".to_string()));
        assert!(raw_symbol_words("f a?").is_empty());
        assert!(raw_symbol_words("f target\\_store").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn human_report() {
        let line = "p vfs_read $retval";
        let report = Report {
            input: line.to_string(),
            kernel: check_line(line, Target::new(Arch::X86_64), &Offline),
            readback: None,
            btf_route: None,
            native: None,
            ktrace: None,
            why: None,
            btf_missing: None,
        };
        let mut out = Vec::new();
        report.human(&mut out, Arch::X86_64, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "rejected: p vfs_read $retval");
        assert_eq!(lines[1], "  p vfs_read $retval");
        assert_eq!(lines[2], "             ^");
        assert_eq!(
            lines[3],
            "  trace_kprobe: error: $retval is not available on probe"
        );
        assert!(lines[4].starts_with("  hint: "));
    }
}
