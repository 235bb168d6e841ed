//! `ktrace conform` (hidden; a test tool for the kernel rig): differential
//! testing of `ktrace check` against the running kernel. Definitions come
//! from ktrace-conform's seeded generator, drawn with names from this
//! kernel (its functions and their BTF parameters, tracepoints, files);
//! each is checked by the same [`Checker`] as `ktrace check --file FILE`
//! (live), then written raw into that file, and the kernel's answer — the
//! write's verdict, its error_log entry with the caret, the readback in
//! `dynamic_events`, the new event's format file — is held against
//! ktrace's, field by field. Whatever the write created is removed again
//! before the next definition, so every definition meets the kernel as it
//! was. Disagreements are printed with the seed and index that regenerate
//! them, and written as conformance-corpus blocks (`--out DIR`).
//!
//! `--offline bare|files` holds the same kernel answers against ktrace's
//! offline check instead (`ktrace check --offline --arch --kernel`, with
//! copies of this kernel's kallsyms and BTF for `files`), as on another
//! machine: an answer that only the target could give (its files, events,
//! text and state, BTF, build) is left open and counted apart
//! ([`ktrace_conform::compare::left_open`]); everything else is compared.
//!
//! It writes arbitrary definitions into the kernel: it refuses to run
//! unless `dynamic_events` is empty (a test guest), and only removes what
//! its own writes created.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use ktrace_conform::compare::strip_id;
use ktrace_conform::record::{Captured, block};
use ktrace_conform::{Answer, Case, File, Function, Gen, Level, Param, Pool, Tracepoint};
use ktrace_probe::kernel::KernelVersion;
use ktrace_probe::{Arch, Interface};
use ktrace_symbols::KernelView;
use ktrace_tracefs::DynEvents;
use ktrace_tracefs::dynevent::RawWriter;
use ktrace_tracefs::error_log::{ErrorLog, Mark, OpenErrorLog, entries_since};

use super::check::{Checker, Options};

/// Arguments of `ktrace conform`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's seed (default: from the clock; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How many definitions to generate.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// Stop taking new definitions after SECS seconds of comparing, once
    /// --min-count are done (a CI budget: the fast kernels get further;
    /// the summary says where the run stopped). 0: no budget.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub budget: f64,
    /// With --budget: how many definitions are compared however long they
    /// take.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub min_count: u64,
    /// Only case INDEX of the run (with --seed): regenerate one definition.
    #[arg(long)]
    pub index: Option<u64>,
    /// Print the definitions only; write nothing to the kernel.
    #[arg(long)]
    pub dry_run: bool,
    /// Run ktrace's checks only and time them; write nothing to the kernel
    /// (for profiling the checker).
    #[arg(long)]
    pub check_only: bool,
    /// Directory for the report: `disagreements.txt` (corpus blocks),
    /// `summary.txt`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// How many disagreements to print in full (all go to --out).
    #[arg(long, default_value_t = 40)]
    pub show: usize,
    /// Compare the lines of FILE instead of generated ones: one definition
    /// per line, written to dynamic_events, or to the file named before a
    /// tab (`kprobe_events<TAB>r:ev vfs_read`); empty lines are skipped.
    /// A disagreement names the line number as its index (seed 0).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "count", "index"])]
    pub lines: Option<PathBuf>,
    /// Hold the kernel's answers against ktrace's offline check instead of
    /// its live one, as on another machine: `bare` is `ktrace check
    /// --offline --arch ARCH --kernel RELEASE` (this kernel's), `files`
    /// adds `--kallsyms` and `--btf` with copies of this kernel's. What
    /// only the running kernel shows (its text, blacklist, ftrace sites,
    /// modules) is not checked offline: the kernel's registration-level
    /// refusals are counted apart, as live.
    #[arg(long, value_enum)]
    pub offline: Option<OfflineAs>,
}

/// What an offline check is given (`ktrace conform --offline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OfflineAs {
    /// The architecture and release only.
    Bare,
    /// Copies of kallsyms and vmlinux's BTF too.
    Files,
}

/// The cases of a `--lines` file.
fn cases_from_lines(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut cases = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let (file, line) = match raw.split_once('\t') {
            Some((name, line)) => match File::from_name(name) {
                Some(f) => (f, line),
                None => bail!(
                    "{}:{}: {name:?} is not kprobe_events, uprobe_events or dynamic_events",
                    path.display(),
                    n + 1
                ),
            },
            None => (File::DynamicEvents, raw),
        };
        cases.push(Case {
            seed: 0,
            index: n as u64 + 1,
            line: line.to_string(),
            file,
            family: "lines",
        });
    }
    Ok(cases)
}

/// Tallies of one run.
#[derive(Default)]
struct Tally {
    total: u64,
    agree: u64,
    by_level: BTreeMap<&'static str, u64>,
    by_field: BTreeMap<(&'static str, &'static str), u64>,
    by_family: BTreeMap<&'static str, (u64, u64)>,
    kernel_accepted: u64,
    ktrace_second: u64,
    filter_undecided: u64,
    filter_by_chance: u64,
    /// Seconds of ktrace's checks per family, and the slowest checks:
    /// (seconds, family, line).
    check_by_family: BTreeMap<&'static str, f64>,
    slowest_checks: Vec<(f64, &'static str, String)>,
    /// Answers an offline check could not give, by what decided them
    /// ([`ktrace_conform::compare::left_open`]).
    open: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// Definitions on which the two answers differ (those left open
    /// offline are neither agreements nor disagreements).
    fn disagree(&self) -> u64 {
        self.total - self.agree - self.open.values().sum::<u64>()
    }
}

/// Runs `ktrace conform`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // a --lines run has no seed: its cases are named by line number
    let seed = match (&args.lines, args.seed) {
        (Some(_), _) => 0,
        (None, Some(s)) => s,
        (None, None) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    let root = ktrace_tracefs::discover::find_mounted().context("tracefs is not mounted")?;
    let arch = Arch::native().context("unknown machine architecture")?;
    let view = KernelView::running(Some(&root));
    let started = Instant::now();
    let pool = gather_pool(arch, &view, &root);
    crate::say!(
        "conform: seed {seed}, {} functions ({} with BTF), {} other symbols, {} module functions, \
         {} tracepoints, {} files (pool {:.1} s)",
        pool.functions.len(),
        pool.functions
            .iter()
            .filter(|f| !f.params.is_empty())
            .count(),
        pool.other_symbols.len(),
        pool.module_functions.len(),
        pool.tracepoints.len(),
        pool.files.len(),
        started.elapsed().as_secs_f64()
    );
    let generator = Gen::new(&pool, seed);
    let mut cases: Vec<Case> = match (&args.lines, args.index) {
        (Some(path), _) => cases_from_lines(path)?,
        (None, Some(i)) => vec![generator.case(i)],
        (None, None) => (0..args.count).map(|i| generator.case(i)).collect(),
    };
    // a kernel without uprobe (or kprobe) events has no such file to write
    // (each file looked up once, not once per case)
    let mut present: BTreeMap<File, bool> = BTreeMap::new();
    cases.retain(|c| {
        *present
            .entry(c.file)
            .or_insert_with(|| root.join(c.file.name()).exists())
    });
    if args.dry_run {
        for c in &cases {
            crate::oline!("{}\t{}\t{}\t{}", c.index, c.file.name(), c.family, c.line);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dynevents = DynEvents::new(&root);
    if args.check_only {
        return check_only(&cases);
    }
    let before = dynevents.listing()?;
    if !before.is_empty() {
        bail!(
            "conform writes arbitrary definitions into the kernel and needs one with no dynamic \
             events; this one has {} ({})",
            before.len(),
            before[0]
        );
    }
    let offline = match args.offline {
        Some(how) => Some(offline_options(arch, &view, how, args.out.as_deref())?),
        None => None,
    };
    let (checker, files) = checker_for(&root, &cases, offline.as_ref())?;
    let features = checker.target.features();
    let mut log = ErrorLog::in_dir(&root).held_open();
    let mut kernel_side = Kernel {
        dynevents: &dynevents,
        writer: dynevents.raw_writer(),
        root: &root,
        mark: Mark::after(&log.read()?),
        log,
        split: [0.0; 3],
        slowest: Vec::new(),
        by_family: BTreeMap::new(),
    };
    let compared = compare_all(&args, &cases, (checker, files), features, &mut kernel_side);
    if let Some(copy) = offline.as_ref().and_then(|o| o.kallsyms.as_ref()) {
        let _ = std::fs::remove_file(copy);
    }
    let (tally, check_secs, checking) = compared?;
    let mut summary = summary_text(
        &tally,
        (seed, args.offline.is_some()),
        checking.elapsed().as_secs_f64(),
        check_secs,
        kernel_side.split.iter().sum(),
    );
    if let Some(how) = args.offline {
        let (first, rest) = summary.split_once('\n').unwrap_or((&summary, ""));
        let how = match how {
            OfflineAs::Bare => "bare",
            OfflineAs::Files => "files",
        };
        summary = format!("{first}; ktrace checked offline ({how})\n{rest}")
            .trim_end()
            .to_string();
    }
    if tally.total < cases.len() as u64 {
        // on the first line, after the figures the rig's scripts read
        let (first, rest) = summary.split_once('\n').unwrap_or((&summary, ""));
        summary = format!(
            "{first}; stopped at the {} s budget after {} of {}\n{rest}",
            args.budget,
            tally.total,
            cases.len()
        )
        .trim_end()
        .to_string();
    }
    crate::oline!("{summary}");
    for (secs, family, line) in &kernel_side.slowest {
        crate::eline!("  slowest kernel answer: {:.3} s ({family}) {line}", secs);
    }
    let [w, l, r] = kernel_side.split;
    crate::eline!(
        "  kernel time split: writes {w:.1} s, error_log reads {l:.1} s, readback/format/removal {r:.1} s"
    );
    for (family, (secs, n, accepted)) in &kernel_side.by_family {
        crate::eline!(
            "  kernel time {family:<10} {secs:>7.1} s for {n:>6} ({accepted} accepted, {:.2} ms each)",
            1000.0 * secs / (*n).max(1) as f64
        );
    }
    for (secs, family, line) in &tally.slowest_checks {
        crate::eline!("  slowest ktrace check: {:.3} s ({family}) {line}", secs);
    }
    for (family, secs) in &tally.check_by_family {
        let n = kernel_side.by_family.get(family).map_or(0, |f| f.1);
        crate::eline!(
            "  ktrace time {family:<10} {secs:>7.1} s for {n:>6} ({:.2} ms each)",
            1000.0 * secs / n.max(1) as f64
        );
    }
    if let Some(dir) = &args.out {
        std::fs::write(dir.join("summary.txt"), &summary)?;
    }
    let after = dynevents.listing()?;
    if !after.is_empty() {
        bail!("conform left dynamic events behind: {after:?}");
    }
    Ok(if tally.disagree() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--check-only`: ktrace's checks alone, timed; nothing is written to the
/// kernel.
fn check_only(cases: &[Case]) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let lines: Vec<String> = cases.iter().map(|c| c.line.clone()).collect();
    let opts = Options {
        no_suggestions: true,
        ..Options::default()
    };
    let mut checker = Checker::with_options(&opts, &lines)?;
    let setup = t0.elapsed().as_secs_f64();
    let mut accepted = 0;
    for c in cases {
        accepted += usize::from(checker.check(&c.line).kernel.accepted());
    }
    crate::oline!(
        "conform: {} checks ({accepted} accepted) in {:.2} s (setup {setup:.2} s)",
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The options of `ktrace check --offline` for this kernel (`--offline
/// files`: its kallsyms copied into `out`, or the temporary directory, and
/// vmlinux's BTF read from sysfs as a file).
fn offline_options(
    arch: Arch,
    view: &KernelView,
    how: OfflineAs,
    out: Option<&Path>,
) -> anyhow::Result<Options> {
    // as a careful user gives it: the stable update /proc/version names
    // (Debian's `uname -r` names only the ABI: 5.10.0-32 is 5.10.223)
    let release = std::fs::read_to_string("/proc/version")
        .ok()
        .and_then(|t| KernelVersion::from_proc_version(&t))
        .map(|v| v.to_string())
        .or_else(|| view.release().map(str::to_string))
        .context("offline: the running kernel's release is not readable")?;
    let mut opts = Options {
        offline: true,
        arch: Some(arch.name().to_string()),
        kernel: Some(release),
        ..Options::default()
    };
    if how == OfflineAs::Files {
        let dir = match out {
            Some(d) => d.to_path_buf(),
            None => std::env::temp_dir(),
        };
        std::fs::create_dir_all(&dir)?;
        let copy = dir.join(format!("kallsyms-{}.txt", std::process::id()));
        let text =
            std::fs::read("/proc/kallsyms").context("offline: cannot read /proc/kallsyms")?;
        std::fs::write(&copy, text)
            .with_context(|| format!("offline: cannot write {}", copy.display()))?;
        opts.kallsyms = Some(copy);
        let btf = Path::new("/sys/kernel/btf/vmlinux");
        if btf.exists() {
            opts.btf = Some(btf.to_path_buf());
        } else {
            // as a careful user copying this kernel's files says: it has none
            opts.no_btf = true;
        }
    }
    Ok(opts)
}

/// The checker of every case, and the probe files this tracefs has: one
/// [`Checker`] for the three files (a case is checked as its file's
/// interface), so that what a check loads once (kallsyms' counts, BTF, the
/// kernel's text) is loaded once per run, not once per file: under TCG
/// each load is a second or more of the budget.
fn checker_for(
    root: &Path,
    cases: &[Case],
    offline: Option<&Options>,
) -> anyhow::Result<(Checker, Vec<File>)> {
    let files: Vec<File> = [File::DynamicEvents, File::KprobeEvents, File::UprobeEvents]
        .into_iter()
        .filter(|f| root.join(f.name()).exists())
        .collect();
    let first = *files.first().context("no probe file in tracefs")?;
    let lines: Vec<String> = cases
        .iter()
        .filter(|c| files.contains(&c.file))
        .map(|c| c.line.clone())
        .collect();
    let base = offline.cloned().unwrap_or_default();
    let opts = Options {
        interface: interface_of(first),
        frozen: offline.is_none(),
        no_suggestions: true,
        ..base
    };
    Ok((Checker::with_options(&opts, &lines)?, files))
}

/// The interface a probe file is written through.
fn interface_of(file: File) -> Interface {
    match file {
        File::DynamicEvents => Interface::DynamicEvents,
        File::KprobeEvents => Interface::KprobeEvents,
        File::UprobeEvents => Interface::UprobeEvents,
    }
}

/// Each case written to the kernel and its answer held against ktrace's:
/// the tallies, the seconds ktrace's checks took and when the comparing
/// started.
fn compare_all(
    args: &Args,
    cases: &[Case],
    (mut checker, files): (Checker, Vec<File>),
    features: ktrace_probe::kernel::Features,
    kernel_side: &mut Kernel<'_>,
) -> anyhow::Result<(Tally, f64, Instant)> {
    let mut check_secs = 0.0;
    let mut tally = Tally::default();
    let mut report = match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            Some(std::fs::File::create(dir.join("disagreements.txt"))?)
        }
        None => None,
    };
    let mut shown = 0;
    let mut last_progress = Instant::now();
    let checking = Instant::now();
    // ktrace's answers are computed on a thread of their own while this one
    // asks the kernel: the two halves overlap on a guest's two CPUs. The
    // kernel is left as it was after each definition, but not during one,
    // so the checkers answer from the events as they were at set-up
    // (`Options::frozen`). The answers come in case order. A tracepoint
    // probe's answer also depends on a stub that an earlier case's
    // registration can leave on its tracepoint (tracepoint_stub_registered,
    // read live): its check waits until the kernel has answered every case
    // before it.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(Answer, bool, f64)>(256);
    let to_check: Vec<(File, String)> = cases.iter().map(|c| (c.file, c.line.clone())).collect();
    let asked = Asked::default();
    let asked_by_checker = asked.clone();
    // (an error below returns early: the checking thread is let go then too)
    let _release = Release(asked.clone());
    let offline = args.offline.is_some();
    let checker_thread = std::thread::spawn(move || {
        for (i, (file, line)) in to_check.into_iter().enumerate() {
            if names_a_tracepoint(&line) {
                asked_by_checker.wait_for(i);
            }
            let t0 = Instant::now();
            let (ours, second) = if files.contains(&file) {
                let r = checker.check_as(interface_of(file), &line);
                let mut a = answer_of(&r, checker.arch, features);
                a.offline = offline;
                (a, r.ktrace.is_some())
            } else {
                (Answer::default(), false)
            };
            if tx.send((ours, second, t0.elapsed().as_secs_f64())).is_err() {
                return;
            }
        }
    });
    for case in cases {
        if args.budget > 0.0
            && tally.total >= args.min_count
            && checking.elapsed().as_secs_f64() >= args.budget
        {
            break;
        }
        let Ok((ours, second, secs)) = rx.recv() else {
            bail!("the checking thread ended early");
        };
        check_secs += secs;
        *tally.check_by_family.entry(case.family).or_default() += secs;
        keep_slowest(&mut tally.slowest_checks, (secs, case.family, &case.line));
        let (kernel, captured) = kernel_side.ask(case)?;
        asked.advance();
        tally.total += 1;
        let found = ktrace_conform::compare(&kernel, &ours);
        // an answer that only the target decides is left open when it
        // differs; when it is the kernel's, it agrees
        if !found.is_empty()
            && let Some(why) = ktrace_conform::compare::left_open(&kernel, &ours)
        {
            *tally.open.entry(why).or_default() += 1;
            continue;
        }
        tally.kernel_accepted += u64::from(kernel.accepted);
        tally.ktrace_second += u64::from(second);
        tally.filter_undecided += u64::from(ours.filter_undecided);
        tally.filter_by_chance += u64::from(ours.filter_by_chance);
        let fam = tally.by_family.entry(case.family).or_default();
        fam.0 += 1;
        if found.is_empty() {
            tally.agree += 1;
            continue;
        }
        fam.1 += 1;
        let level = found.iter().map(|d| d.level).max().unwrap_or(Level::Syntax);
        *tally.by_level.entry(level.name()).or_default() += 1;
        for d in &found {
            *tally
                .by_field
                .entry((d.level.name(), d.field.name()))
                .or_default() += 1;
        }
        let detail: Vec<String> = found
            .iter()
            .map(|d| format!("{} ({}): {}", d.field.name(), d.level.name(), d.detail))
            .collect();
        if shown < args.show {
            shown += 1;
            crate::eline!(
                "DISAGREE seed={} index={} file={} family={} level={}\n  line: {}\n  {}",
                case.seed,
                case.index,
                case.file.name(),
                case.family,
                level.name(),
                case.line,
                detail.join("\n  ")
            );
        }
        if let Some(f) = report.as_mut() {
            writeln!(
                f,
                "# seed={} index={} file={} family={} level={}\n# {}",
                case.seed,
                case.index,
                case.file.name(),
                case.family,
                level.name(),
                detail.join("\n# ").replace('\n', "\n# ")
            )?;
            f.write_all(block(&captured).as_bytes())?;
        }
        if last_progress.elapsed().as_secs() >= 30 {
            last_progress = Instant::now();
            crate::say!(
                "conform: {}/{} definitions, {} disagreements ({:.0} s)",
                tally.total,
                cases.len(),
                tally.disagree(),
                checking.elapsed().as_secs_f64()
            );
        }
    }
    drop(rx);
    asked.finish();
    let _ = checker_thread.join();
    Ok((tally, check_secs, checking))
}

/// Finishes an [`Asked`] when dropped.
struct Release(Asked);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// A tracepoint probe (`t:`, fprobe.rs's tracepoint_taken): its answer reads
/// the tracepoint's live state, which earlier cases change.
fn names_a_tracepoint(line: &str) -> bool {
    line.trim_start().starts_with('t')
}

/// How many cases the kernel has answered, for the checking thread to wait
/// on. Dropped or finished, it lets every wait go (an error or the budget
/// ends the comparing before every case is asked).
#[derive(Clone, Default)]
struct Asked(std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>);

impl Asked {
    /// Blocks until at least `n` cases have been answered (or the
    /// comparing ended).
    fn wait_for(&self, n: usize) {
        let (count, cv) = &*self.0;
        let mut g = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *g < n {
            g = cv
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn set(&self, f: impl FnOnce(usize) -> usize) {
        let (count, cv) = &*self.0;
        let mut g = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = f(*g);
        cv.notify_all();
    }

    /// One more case answered.
    fn advance(&self) {
        self.set(|n| n.saturating_add(1));
    }

    /// No more cases will be answered: every wait ends.
    fn finish(&self) {
        self.set(|_| usize::MAX);
    }
}

fn summary_text(
    t: &Tally,
    (seed, offline): (u64, bool),
    secs: f64,
    check: f64,
    kernel: f64,
) -> String {
    let mut s = format!(
        "conform: seed {seed}: {} definitions, {} agree, {} disagree ({} syntax, {} registration); \
         kernel accepted {}; ktrace's own reading differs on {}; {:.1} s (ktrace {:.1} s, kernel {:.1} s); \
         {} event probe filters left to the kernel, {} decided by the kernel by chance\n",
        t.total,
        t.agree,
        t.disagree(),
        t.by_level.get("syntax").copied().unwrap_or(0),
        t.by_level.get("registration").copied().unwrap_or(0),
        t.kernel_accepted,
        t.ktrace_second,
        secs,
        check,
        kernel,
        t.filter_undecided,
        t.filter_by_chance
    );
    if !t.open.is_empty() {
        let open: u64 = t.open.values().sum();
        let by: Vec<String> = t.open.iter().map(|(why, n)| format!("{why} {n}")).collect();
        s.push_str(&format!(
            "  left open {} {open} (neither agree nor disagree: decided by {})\n",
            if offline { "offline" } else { "live" },
            by.join(", ")
        ));
    }
    for ((level, field), n) in &t.by_field {
        s.push_str(&format!("  {level:<12} {field:<9} {n}\n"));
    }
    for (family, (n, bad)) in &t.by_family {
        s.push_str(&format!(
            "  family {family:<10} {n:>7} generated {bad:>6} disagree\n"
        ));
    }
    s.trim_end().to_string()
}

/// What ktrace's "not checked" left to the kernel, in the comparison's
/// terms.
fn undone_of(unchecked: &[ktrace_probe::Unchecked]) -> ktrace_conform::Undone {
    use ktrace_probe::Unchecked as U;
    let any = |kinds: &[U]| unchecked.iter().any(|u| kinds.contains(u));
    ktrace_conform::Undone {
        state: any(&[
            U::SymbolExists,
            U::FunctionEntry,
            U::InsnBoundary,
            U::Probeable,
            U::ArgSymbols,
            U::EventName,
            U::RemoveTarget,
        ]),
        btf: any(&[U::Btf, U::StructLayout]),
        entry: any(&[U::FunctionEntry]),
        build: any(&[U::Build]),
        event: any(&[U::AttachedEvent]),
        code: any(&[U::InsnBoundary]),
    }
}

/// ktrace's answer, in the comparison's terms.
fn answer_of(
    r: &super::check::Report,
    arch: Arch,
    features: ktrace_probe::kernel::Features,
) -> Answer {
    let accepted = r.kernel.accepted();
    let (message, caret, command) = match &r.kernel.definition {
        Err(e) if e.kind.is_logged() => {
            (Some(e.message.to_string()), e.pos, Some(e.command.clone()))
        }
        _ => (None, None, None),
    };
    let readback = match (&r.kernel.definition, r.normalized(arch)) {
        (Ok(ktrace_probe::Definition::Remove(_)) | Ok(ktrace_probe::Definition::Empty), _) => {
            Vec::new()
        }
        (_, Some(line)) => vec![line],
        (_, None) => Vec::new(),
    };
    Answer {
        accepted,
        message,
        caret,
        command,
        readback,
        format: accepted.then(|| r.format(arch, features)).flatten(),
        errno: None,
        // an address probe's name and listing show hashed pointers
        readback_unknown: r
            .kernel
            .unchecked
            .contains(&ktrace_probe::Unchecked::AddressName),
        filter_undecided: r
            .kernel
            .unchecked
            .contains(&ktrace_probe::Unchecked::Filter),
        filter_by_chance: r
            .kernel
            .unchecked
            .contains(&ktrace_probe::Unchecked::FilterByChance),
        caret_unknown: r
            .kernel
            .unchecked
            .contains(&ktrace_probe::Unchecked::ErrorPosition),
        location: None,
        offline: false,
        undone: undone_of(&r.kernel.unchecked),
    }
}

/// Keeps the eight slowest of what it is given, slowest first.
fn keep_slowest(
    slowest: &mut Vec<(f64, &'static str, String)>,
    (secs, family, line): (f64, &'static str, &str),
) {
    if slowest.len() < 8 || secs > slowest[slowest.len() - 1].0 {
        slowest.push((secs, family, line.to_string()));
        slowest.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
        slowest.truncate(8);
    }
}

/// The kernel side of the comparison: writes each case's line raw and
/// reads the kernel's answer, then removes whatever the write created.
struct Kernel<'a> {
    dynevents: &'a DynEvents,
    /// The probe files and the error_log, each opened once for the run.
    writer: RawWriter,
    root: &'a Path,
    log: OpenErrorLog,
    /// The error_log's end after the last read: entries after it are new.
    mark: Mark,
    /// Seconds spent writing, reading back and removing, split: the
    /// writes of the lines, the error_log reads after refusals, and the
    /// readback, format and removal after acceptances.
    split: [f64; 3],
    /// The slowest cases: (seconds, family, line).
    slowest: Vec<(f64, &'static str, String)>,
    /// Per family: seconds, cases, cases the kernel accepted.
    by_family: BTreeMap<&'static str, (f64, u64, u64)>,
}

impl Kernel<'_> {
    fn ask(&mut self, case: &Case) -> anyhow::Result<(Answer, Captured)> {
        let t0 = Instant::now();
        let r = self.ask_timed(case);
        let took = t0.elapsed().as_secs_f64();
        let f = self.by_family.entry(case.family).or_default();
        f.0 += took;
        f.1 += 1;
        f.2 += u64::from(r.as_ref().is_ok_and(|(a, _)| a.accepted));
        keep_slowest(&mut self.slowest, (took, case.family, &case.line));
        r
    }

    fn ask_timed(&mut self, case: &Case) -> anyhow::Result<(Answer, Captured)> {
        let t0 = Instant::now();
        let result = self.writer.write(case.file.name(), &case.line);
        let written = t0.elapsed().as_secs_f64();
        self.split[0] += written;
        let mut answer = Answer {
            accepted: result.is_ok(),
            errno: result.as_ref().err().and_then(|e| e.raw_os_error()),
            ..Answer::default()
        };
        let mut captured = Captured {
            def: case.line.clone(),
            accepted: result.is_ok(),
            ..Captured::default()
        };
        if result.is_err() {
            // Only a refused write logs; the log is read then, and what is
            // after the previous read's end is this write's.
            let entries = self.log.read()?;
            let entry = entries_since(&entries, &self.mark).last().cloned();
            self.mark = Mark::after(&entries);
            if let Some(e) = entry {
                let mut t = format!(
                    "[{:>5}.{:06}] {}: error: {}\n  Command: {}\n",
                    e.secs, e.usecs, e.location, e.message, e.command
                );
                if let Some(pos) = e.caret {
                    t.push_str(&format!("{}^\n", " ".repeat("  Command: ".len() + pos)));
                }
                captured.error_log = t;
                answer.message = Some(e.message);
                answer.location = Some(e.location.clone());
                answer.caret = e.caret;
                answer.command = Some(e.command);
            }
            self.split[1] += t0.elapsed().as_secs_f64() - written;
            return Ok((answer, captured));
        }
        // What the write created: at most one event (or nothing: a comment,
        // a removal of what is not there).
        let listing = self.dynevents.listing()?;
        captured.listing = listing.clone();
        for line in &listing {
            let head = ktrace_probe::head(line);
            let Some((name, Some(group), Some(event))) =
                head.and_then(|h| Some((h.name?, h.group, h.event)))
            else {
                continue;
            };
            if answer.format.is_none()
                && let Ok(Some(t)) =
                    ktrace_tracefs::tables::read_event_format(self.root, group, event)
            {
                answer.format = Some(strip_id(&t));
                captured.format = Some((name.to_string(), t));
            }
            answer.readback.push(line.clone());
            self.writer
                .write("dynamic_events", &format!("-:{group}/{event}"))
                .with_context(|| {
                    format!("cannot remove {group}/{event}, created by {:?}", case.line)
                })?;
        }
        self.split[2] += t0.elapsed().as_secs_f64() - written;
        Ok((answer, captured))
    }
}

/// Names from the running kernel for the generator.
fn gather_pool(arch: Arch, view: &KernelView, root: &Path) -> Pool {
    let mut pool = Pool {
        arch: arch.name().to_string(),
        ..Pool::default()
    };
    add_kallsyms(&mut pool, view);
    // Blacklisted functions.
    if let Some(Ok(list)) = view.blacklist() {
        pool.other_symbols
            .extend(list.iter().step_by(50).map(|e| e.name.clone()));
    }
    add_btf_params(&mut pool, view);
    add_tracepoints(&mut pool, root);
    for path in [
        "/bin/busybox",
        "/usr/bin/ktrace",
        "/bin/sh",
        "/bin/true",
        "/usr/bin/env",
        "/proc/self/exe",
    ] {
        if let Ok(m) = std::fs::metadata(path)
            && m.is_file()
        {
            pool.files.push((path.to_string(), m.len()));
        }
    }
    pool
}

/// kallsyms: text symbols that are unique (probe-able candidates), some
/// that are not, data symbols, module functions and a few addresses.
fn add_kallsyms(pool: &mut Pool, view: &KernelView) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    if let Ok(k) = view.kallsyms() {
        for s in k.symbols() {
            *counts.entry(s.name.as_str()).or_default() += 1;
        }
        let mut texts = Vec::new();
        for (i, s) in k.symbols().iter().enumerate() {
            let unique = counts.get(s.name.as_str()) == Some(&1);
            match (&s.module, s.is_text()) {
                (Some(m), true) if i % 7 == 0 => pool
                    .module_functions
                    .push((m.to_string(), s.name.to_string())),
                // the compiler's padding and static-call symbols and cold
                // parts are not functions anyone probes by name
                (None, true)
                    if unique
                        && !s.name.starts_with("__pfx_")
                        && !s.name.starts_with("__SCT__")
                        && !s.name.contains('.') =>
                {
                    texts.push(s.name.clone())
                }
                (None, _) if i % 97 == 0 => pool.other_symbols.push(s.name.to_string()),
                _ => {}
            }
            if s.module.is_none() && s.is_text() && i % 1009 == 0 && !k.addresses_hidden() {
                pool.addresses.push(s.addr);
            }
        }
        // A deterministic sample (every n-th): enough to draw from, small
        // enough to keep BTF lookups quick.
        let step = (texts.len() / 3000).max(1);
        pool.functions = texts
            .into_iter()
            .step_by(step)
            .map(|name| Function {
                name: name.to_string(),
                ..Function::default()
            })
            .collect();
        pool.module_functions.truncate(200);
        pool.other_symbols.truncate(400);
    }
    for name in [
        "vfs_read",
        "do_sys_openat2",
        "kfree",
        "schedule",
        "do_filp_open",
    ] {
        if counts.get(name) == Some(&1) && !pool.functions.iter().any(|f| f.name == name) {
            pool.functions.push(Function {
                name: name.to_string(),
                ..Function::default()
            });
        }
    }
}

/// BTF parameters and members.
fn add_btf_params(pool: &mut Pool, view: &KernelView) {
    if let Ok(btf) = view.btf() {
        use ktrace_probe::btfarg::{BtfKind, BtfTypes};
        let members_of = |id: u32, depth: u32| -> Vec<String> {
            let mut out = Vec::new();
            let Some((_, BtfKind::Ptr { target })) = BtfTypes::resolve(btf, id) else {
                return out;
            };
            let Some((sid, BtfKind::Struct | BtfKind::Union)) = BtfTypes::resolve(btf, target)
            else {
                return out;
            };
            for m in BtfTypes::members(btf, sid)
                .unwrap_or_default()
                .iter()
                .take(12)
            {
                if m.name.is_empty() {
                    continue;
                }
                out.push(m.name.clone());
                if depth == 0 {
                    continue;
                }
                // one level deeper, through a pointer (`->`) or an embedded
                // struct (`.`)
                match BtfTypes::resolve(btf, m.type_id) {
                    Some((_, BtfKind::Ptr { target })) => {
                        if let Some((inner, BtfKind::Struct)) = BtfTypes::resolve(btf, target) {
                            for n in BtfTypes::members(btf, inner)
                                .unwrap_or_default()
                                .iter()
                                .take(3)
                            {
                                if !n.name.is_empty() {
                                    out.push(format!("{}->{}", m.name, n.name));
                                }
                            }
                        }
                    }
                    Some((inner, BtfKind::Struct)) => {
                        for n in BtfTypes::members(btf, inner)
                            .unwrap_or_default()
                            .iter()
                            .take(3)
                        {
                            if !n.name.is_empty() {
                                out.push(format!("{}.{}", m.name, n.name));
                            }
                        }
                    }
                    _ => {}
                }
            }
            out
        };
        for f in &mut pool.functions {
            let Some(proto) = BtfTypes::function(btf, None, &f.name) else {
                continue;
            };
            f.params = proto
                .params
                .iter()
                .map(|(name, ty)| Param {
                    name: name.clone(),
                    members: members_of(*ty, 1),
                })
                .collect();
            f.ret_members = members_of(proto.ret, 0);
        }
    }
}

/// Tracepoints (a sample) with their fields.
fn add_tracepoints(pool: &mut Pool, root: &Path) {
    let events = ktrace_tracefs::tables::list_events(root);
    let step = (events.len() / 150).max(1);
    for (system, event) in events.into_iter().step_by(step) {
        if matches!(
            system.as_str(),
            "ftrace" | "kprobes" | "uprobes" | "synthetic"
        ) {
            continue;
        }
        let Ok(Some(text)) = ktrace_tracefs::tables::read_event_format(root, &system, &event)
        else {
            continue;
        };
        let fields = crate::resolve::live::format_fields(&text)
            .into_iter()
            .filter(|f| !f.starts_with("common_"))
            .collect();
        pool.tracepoints.push(Tracepoint {
            system,
            event,
            fields,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracepoint_check_waits_for_the_cases_before_it() {
        let asked = Asked::default();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (a, s) = (asked.clone(), seen.clone());
        let t = std::thread::spawn(move || {
            a.wait_for(2);
            s.store(1, std::sync::atomic::Ordering::SeqCst);
        });
        asked.advance();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "one of two asked"
        );
        asked.advance();
        t.join().unwrap();
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
        // a guard dropped early (an error) lets a waiting check go
        let asked = Asked::default();
        let a = asked.clone();
        let t = std::thread::spawn(move || a.wait_for(1000));
        drop(Release(asked));
        t.join().unwrap();
        assert!(names_a_tracepoint("  t:g/e sched_switch"));
        assert!(!names_a_tracepoint("p:g/e vfs_read"));
    }

    /// The one checker of a run answers each case as its own file's
    /// interface: `uprobe_events` refuses a kprobe that `dynamic_events`
    /// and `kprobe_events` take, whichever file the checker was set up
    /// for.
    #[test]
    fn one_checker_answers_each_file_as_its_own() {
        let opts = Options {
            arch: Some("x86_64".into()),
            kernel: Some("6.12".into()),
            offline: true,
            interface: Interface::DynamicEvents,
            ..Options::default()
        };
        let line = "p:kk/k vfs_read";
        let mut c = Checker::with_options(&opts, &[line.to_string()]).unwrap();
        let taken = |c: &mut Checker, i| c.check_as(i, line).kernel.accepted();
        assert!(taken(&mut c, Interface::DynamicEvents));
        assert!(taken(&mut c, Interface::KprobeEvents));
        assert!(!taken(&mut c, Interface::UprobeEvents));
        // the file it was set up for is kept for a plain check
        assert!(c.check(line).kernel.accepted());
        assert_eq!(c.target.interface, Interface::DynamicEvents);
    }

    #[test]
    fn lines_name_their_file_and_line_number() {
        let dir = std::env::temp_dir().join(format!("ktrace-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lines.txt");
        std::fs::write(
            &path,
            "p vfs_read\n\nkprobe_events\tr:ev vfs_read\nuprobe_events\tp /bin/sh:0x10\n",
        )
        .unwrap();
        let cases = cases_from_lines(&path).unwrap();
        let got: Vec<_> = cases
            .iter()
            .map(|c| (c.index, c.file, c.line.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, File::DynamicEvents, "p vfs_read"),
                (3, File::KprobeEvents, "r:ev vfs_read"),
                (4, File::UprobeEvents, "p /bin/sh:0x10"),
            ]
        );
        std::fs::write(&path, "kprobe_event\tp vfs_read\n").unwrap();
        let err = cases_from_lines(&path).unwrap_err().to_string();
        assert!(
            err.contains("lines.txt:1: \"kprobe_event\" is not"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
