//! What `ktrace count`, `ktrace hist` and `ktrace latency` share: their
//! common options, the checks of keys and fields against the probes'
//! fields (before anything is written), the choice of engine — the
//! kernel's hist triggers and synthetic events where the instance's README
//! lists them and the kernel can key as asked, else ktrace's own
//! aggregation of the decoded stream, with the reason said — and the run:
//! per-interval blocks with their time, the final result on Ctrl-C, JSON,
//! Prometheus.
//!
//! The lifecycle (probes, instance, pid lists, teardown on every exit) is
//! crate::live's; the aggregation, the kernel's trigger text and the
//! rendering are ktrace-aggregate's. The three command modules only turn
//! their arguments into a [`Job`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use ktrace_aggregate::kernel::{
    self, CountPlan, Features, HistPlan, LatencyPlan, LatencyProbe, ProbeEvent, Step, Unsupported,
};
use ktrace_aggregate::{
    CountAgg, CountReport, FieldInfo, FieldKind, HistAgg, HistReport, KeySpec, LatencyAgg,
    LatencyPair, LatencyReport, Sample, Scale, Unit, Value, folded, khist, prom, render,
};
use ktrace_stream::{Flow, Missed, Role, Sink};
use ktrace_symbols::KernelView;

use crate::live::{self, RunArgs, Stop};
use crate::session::{self, Probe, Session, Signals};

/// Which engine aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
    /// The kernel when it can (hist triggers), else ktrace.
    Auto,
    /// The kernel's hist triggers and synthetic events; an error when the
    /// kernel cannot do what was asked.
    Kernel,
    /// ktrace's own aggregation of the event stream.
    User,
}

/// How `ktrace count` attaches to its functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Route {
    /// The function tracer when it can do the job, else kprobes.
    Auto,
    /// The function tracer in ktrace's own instance (one glob write).
    Ftrace,
    /// One kprobe per function.
    Kprobe,
}

/// Options shared by the three commands.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Print (and with --json, emit a document) every SECONDS, each block
    /// headed by its time; numbers restart each interval.
    #[arg(short = 'i', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub interval: Option<f64>,
    /// One JSON document per interval (units and bucket bounds included)
    /// instead of the terminal tables.
    #[arg(long)]
    pub json: bool,
    /// Serve the aggregates (since the start) at http://ADDR/metrics in the
    /// Prometheus text format, bound to exactly ADDR (e.g. 127.0.0.1:9100;
    /// `0.0.0.0` or `[::]` serve every network, with a warning). Every series
    /// has a `func` label; latency is in seconds, measured in nanoseconds.
    #[arg(long, value_name = "ADDR", value_parser = socket_addr)]
    pub prometheus: Option<SocketAddr>,
    /// Distinct keys kept: ktrace keeps the first N it sees and counts
    /// what later keys bring together as "other" (exactly, and says so);
    /// the kernel engine's tables hold N each (rounded up to a power of
    /// two, at most 131072) and count what does not fit as dropped.
    /// Memory stays bounded by it, with --top too.
    #[arg(long, value_name = "N", default_value_t = ktrace_aggregate::agg::DEFAULT_MAX_KEYS as u64,
          value_parser = crate::cli::count)]
    pub max_keys: u64,
    /// Who aggregates: the kernel (hist triggers), ktrace (from the
    /// stream), or auto (the kernel when it can).
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    /// Width of the histogram bars (default: fit the terminal).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub width: Option<u16>,
    /// The options of the run (filter, -d, -p, the command...).
    #[command(flatten)]
    pub run: RunArgs,
}

/// `IP:PORT` (no host names: the endpoint binds exactly what is given).
pub fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not IP:PORT (e.g. 127.0.0.1:9100 or [::1]:9100)"))
}

/// `ns`, `us` or `ms`.
pub fn unit(text: &str) -> Result<Unit, String> {
    Unit::parse(text).map_err(|e| e.to_string())
}

/// The bucket scheme of `--linear STEP` (power of two without).
pub fn scale(linear: Option<u64>) -> Scale {
    match linear {
        Some(step) => Scale::Linear { step },
        None => Scale::Log2,
    }
}

/// What a command aggregates.
#[derive(Debug, Clone)]
pub enum Job {
    /// Hits per key.
    Count {
        /// `--by`.
        by: Vec<String>,
        /// `--top`.
        top: Option<u64>,
        /// `--route`.
        route: Route,
        /// `--folded`: the counts as folded stacks.
        folded: bool,
    },
    /// Distribution of a field.
    Hist {
        /// The field.
        field: String,
        /// Buckets.
        scale: Scale,
        /// `--by`.
        by: Vec<String>,
    },
    /// Entry-to-return time of functions.
    Latency {
        /// Buckets.
        scale: Scale,
        /// Unit.
        unit: Unit,
        /// `--by`.
        by: Vec<String>,
    },
}

/// The fields of a probe as the aggregation sees them (arrays left out).
fn fields_of(p: &Probe) -> Vec<FieldInfo> {
    use ktrace_probe::types::BaseType;
    p.def
        .args
        .iter()
        .filter(|a| a.ty.count.is_none())
        .map(|a| {
            let kind = match a.ty.base {
                BaseType::String | BaseType::UString | BaseType::SymStr => FieldKind::String,
                BaseType::S(_) => FieldKind::Signed,
                _ => FieldKind::Unsigned,
            };
            FieldInfo::new(&a.name, kind)
        })
        .collect()
}

/// The function a probe is on: the kernel symbol; for a uprobe named by
/// ktrace (`p_SYMBOL`, `r_SYMBOL`), the symbol; else the event's name.
fn func_of(p: &Probe) -> String {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe {
            place: ktrace_probe::ast::KprobePlace::Symbol { symbol, .. },
            ..
        } => symbol.clone(),
        ktrace_probe::ProbeKind::Uprobe { .. } if p.def.auto_event => p
            .event()
            .strip_prefix("p_")
            .or_else(|| p.event().strip_prefix("r_"))
            .unwrap_or(p.event())
            .to_string(),
        _ => p.event().to_string(),
    }
}

fn is_return(p: &Probe) -> bool {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe { is_return, .. }
        | ktrace_probe::ProbeKind::Uprobe { is_return, .. } => *is_return,
        ktrace_probe::ProbeKind::Eprobe { .. } => false,
    }
}

/// Where a probe is, return or not (pairs entry and return probes).
fn place_of(p: &Probe) -> String {
    match p.kind() {
        ktrace_probe::ProbeKind::Kprobe { place, .. } => format!("{place:?}"),
        ktrace_probe::ProbeKind::Uprobe { path, offset, .. } => format!("{path}:{offset}"),
        ktrace_probe::ProbeKind::Eprobe { system, event, .. } => format!("{system}.{event}"),
    }
}

/// The checked input: probes (built, nothing written), keys, and for
/// latency the entry/return pairs (indexes into the probes).
struct Checked {
    keys: Vec<KeySpec>,
    /// (entry, return) probe indexes.
    pairs: Vec<(usize, usize)>,
}

/// Checks keys and the field against every probe they apply to.
fn check(job: &Job, probes: &[Probe], group: &str) -> anyhow::Result<Checked> {
    let ev = |p: &Probe| format!("{group}/{}", p.event());
    match job {
        Job::Count { by, .. } => {
            let mut keys = Vec::new();
            for p in probes {
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
            }
            Ok(Checked {
                keys,
                pairs: Vec::new(),
            })
        }
        Job::Hist { field, by, .. } => {
            let mut keys = Vec::new();
            for p in probes {
                kernel::check_hist_field(field, &ev(p), &fields_of(p))?;
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
            }
            Ok(Checked {
                keys,
                pairs: Vec::new(),
            })
        }
        Job::Latency { by, .. } => {
            let mut pairs = Vec::new();
            let mut keys = Vec::new();
            for (i, p) in probes.iter().enumerate() {
                if is_return(p) {
                    continue;
                }
                let place = place_of(p);
                let Some(r) = probes
                    .iter()
                    .position(|q| is_return(q) && place_of(q) == place)
                else {
                    bail!("no return probe for {} (internal)", p.event());
                };
                keys = KeySpec::parse_all(by, &ev(p), &fields_of(p))?;
                pairs.push((i, r));
            }
            Ok(Checked { keys, pairs })
        }
    }
}

/// The kernel engine's plan for the job.
enum KPlan {
    Count(CountPlan),
    Hist(HistPlan),
    Latency(Vec<LatencyPlan>),
}

impl KPlan {
    fn steps_mut(&mut self) -> Vec<&mut Vec<Step>> {
        match self {
            KPlan::Count(p) => vec![&mut p.plan.setup],
            KPlan::Hist(p) => vec![&mut p.plan.setup],
            KPlan::Latency(ps) => ps.iter_mut().map(|p| &mut p.plan.setup).collect(),
        }
    }

    fn steps(&self) -> Vec<&Step> {
        match self {
            KPlan::Count(p) => p.plan.setup.iter().collect(),
            KPlan::Hist(p) => p.plan.setup.iter().collect(),
            KPlan::Latency(ps) => ps.iter().flat_map(|p| &p.plan.setup).collect(),
        }
    }
}

/// The kernel engine's plan, or why not.
fn plan(
    job: &Job,
    checked: &Checked,
    probes: &[Probe],
    group: &str,
    f: &Features,
    args: &RunArgs,
    prometheus: bool,
) -> anyhow::Result<Result<KPlan, Unsupported>> {
    let no = |r: &str| Ok(Err(Unsupported { reason: r.into() }));
    if !f.hist {
        return no("this kernel has no hist triggers (its tracefs README lists none)");
    }
    if args.count.is_some() {
        return no("-n counts events in the stream");
    }
    if args.trigger.is_some() {
        return no("--trigger applies to the event stream");
    }
    let event = |p: &Probe| ProbeEvent {
        system: group.to_string(),
        event: p.event().to_string(),
        func: func_of(p),
        fields: fields_of(p),
        user: p.kind().is_uprobe(),
    };
    Ok(match job {
        Job::Count { .. } => {
            let evs: Vec<ProbeEvent> = probes.iter().map(event).collect();
            kernel::plan_count(&evs, &checked.keys, f, None).map(KPlan::Count)
        }
        Job::Hist { field, scale, .. } => {
            if probes.len() != 1 {
                return no(&format!(
                    "the kernel makes one histogram per event and the probe names {} events",
                    probes.len()
                ));
            }
            kernel::plan_hist(&event(&probes[0]), field, *scale, &checked.keys, f)?.map(KPlan::Hist)
        }
        Job::Latency { scale, unit, .. } => {
            let mut plans = Vec::new();
            for (n, (e, r)) in checked.pairs.iter().enumerate() {
                let lp = LatencyProbe {
                    system: group.to_string(),
                    entry_event: probes[*e].event().to_string(),
                    return_event: probes[*r].event().to_string(),
                    func: func_of(&probes[*e]),
                };
                let prefix = ktrace_tracefs::owner::synthetic_name(group, &n.to_string());
                match kernel::plan_latency(
                    &lp,
                    &prefix,
                    *unit,
                    *scale,
                    &checked.keys,
                    f,
                    prometheus,
                ) {
                    Ok(p) => plans.push(p),
                    Err(u) => return Ok(Err(u)),
                }
            }
            Ok(KPlan::Latency(plans))
        }
    })
}

/// Hist-table entries all of a run's triggers may have together: the
/// kernel preallocates every entry of a table when the trigger is written
/// (measured on a 6.1 x86_64 guest with 1 GB: 630 tables of 8192 entries,
/// `ktrace count 'ext4_*'`, ran the kernel out of memory).
const TABLE_BUDGET: usize = 65_536;

/// The largest hist table the kernel makes (`TRACING_MAP_BITS_MAX` 17).
const MAX_TABLE: usize = 1 << 17;

/// The size of each table for `--max-keys want`: a power of two from 128
/// (the kernel's least) to [`MAX_TABLE`].
fn table_size(want: u64) -> usize {
    (want.clamp(128, MAX_TABLE as u64) as usize).next_power_of_two()
}

/// Sizes the tables: `want` entries each ([`table_size`]), unless
/// together they would pass [`TABLE_BUDGET`] (or the one table asked
/// for, if larger), in which case each gets an equal share, a power of
/// two from 128. Returns the size each got and whether the budget made
/// them smaller. Keys beyond a table's size are counted by the kernel as
/// dropped, and reported.
fn fit_tables(kp: &mut KPlan, want: u64) -> (usize, bool) {
    let tables = kp
        .steps()
        .into_iter()
        .filter(|s| matches!(s, Step::Trigger { .. }))
        .count();
    let full = table_size(want);
    let budget = TABLE_BUDGET.max(full);
    let over = tables * full > budget;
    let size = if over {
        let each = (budget / tables.max(1)).max(128);
        (1usize << (usize::BITS - 1 - each.leading_zeros())).clamp(128, full)
    } else {
        full
    };
    let planned = format!(":size={}", kernel::TABLE_SIZE);
    let sized = format!(":size={size}");
    for steps in kp.steps_mut() {
        for step in steps.iter_mut() {
            let Step::Trigger { command, .. } = step else {
                continue;
            };
            if command.contains(&planned) {
                *command = command.replace(&planned, &sized);
            } else if over && !command.contains(":size=") {
                // right after the keys (the kernel takes attributes in any order)
                let keys_end = command
                    .strip_prefix("hist:keys=")
                    .and_then(|rest| rest.find([':', ' ']))
                    .map(|i| i + "hist:keys=".len());
                match keys_end {
                    Some(i) => command.insert_str(i, &sized),
                    None if command.starts_with("hist:keys=") => command.push_str(&sized),
                    None => {}
                }
            }
        }
    }
    (size, over)
}

/// Adds the run's filter to the triggers on the session's probes: the
/// user's `-f` and ktrace's own threads left out. A latency's return
/// trigger gets only the latter (the user's fields are the entry's).
fn add_filters(kp: &mut KPlan, group: &str, user: Option<&str>, own: &str) {
    let latency = matches!(kp, KPlan::Latency(_));
    for steps in kp.steps_mut() {
        for step in steps.iter_mut() {
            if let Step::Trigger {
                system, command, ..
            } = step
                && system == group
                && !command.contains(" if ")
            {
                let is_return = command.contains("onmatch(");
                let f = match user {
                    Some(u) if !(latency && is_return) => format!("({u}) && {own}"),
                    _ => own.to_string(),
                };
                command.push_str(&format!(" if {f}"));
            }
        }
    }
}

/// One report of any job.
#[derive(Debug, Clone)]
enum Report {
    Count(CountReport),
    Hist(HistReport),
    Latency(LatencyReport),
}

impl Report {
    /// The kernel engine's report, stating its tables' size as the cap
    /// (the user engine's reports carry their own).
    fn sized(mut self, entries: usize) -> Report {
        match &mut self {
            Report::Count(r) => r.max_keys = entries,
            Report::Hist(r) => r.max_keys = entries,
            Report::Latency(r) => r.hist.max_keys = entries,
        }
        self
    }

    fn since(&self, earlier: &Report) -> Report {
        match (self, earlier) {
            (Report::Count(a), Report::Count(b)) => Report::Count(a.since(b)),
            (Report::Hist(a), Report::Hist(b)) => Report::Hist(a.since(b)),
            (Report::Latency(a), Report::Latency(b)) => Report::Latency(a.since(b)),
            (a, _) => a.clone(),
        }
    }

    fn text(&self, out: &mut String, width: usize, top: Option<u64>) {
        match self {
            Report::Count(r) => match top {
                Some(n) => render::count_text(out, &r.clone().top(n as usize)),
                None => render::count_text(out, r),
            },
            Report::Hist(r) => render::hist_text(out, r, width),
            Report::Latency(r) => render::latency_text(out, r, width),
        }
    }

    fn json(&self, out: &mut String, unix_ns: u64, interval_ns: Option<u64>, top: Option<u64>) {
        match self {
            Report::Count(r) => match top {
                Some(n) => {
                    render::count_json(out, &r.clone().top(n as usize), unix_ns, interval_ns)
                }
                None => render::count_json(out, r, unix_ns, interval_ns),
            },
            Report::Hist(r) => render::hist_json(out, r, unix_ns, interval_ns),
            Report::Latency(r) => render::latency_json(out, r, unix_ns, interval_ns),
        }
    }

    fn prometheus(&self, field: Option<&str>) -> String {
        let mut out = String::new();
        let losses = match self {
            Report::Count(r) => {
                prom::count_metrics(&mut out, "ktrace_hits_total", "probe hits", r);
                prom::Losses::of_count(r)
            }
            Report::Hist(r) => {
                let f = field.unwrap_or("value");
                prom::hist_metrics(
                    &mut out,
                    &prom::hist_name(f),
                    &format!("distribution of {f}"),
                    r,
                );
                prom::Losses::of_hist(r)
            }
            Report::Latency(r) => {
                prom::latency_metrics(&mut out, r);
                prom::Losses::of_latency(r)
            }
        };
        prom::loss_metrics(&mut out, &losses);
        out
    }
}

/// The user engine's aggregator.
#[derive(Debug, Clone)]
enum UserAgg {
    Count(CountAgg),
    Hist(HistAgg),
    Latency(LatencyAgg),
}

impl UserAgg {
    /// The aggregator of `job` by `keys` keeping `max_keys`; with `prom`,
    /// the one Prometheus serves: keyed by function first (every series
    /// names its function) and latency measured in nanoseconds (its
    /// bounds below 16 us are then not whole microseconds apart).
    fn new(
        job: &Job,
        pairs: Vec<LatencyPair>,
        keys: &[KeySpec],
        max_keys: usize,
        prom: bool,
    ) -> UserAgg {
        let mut keys = keys.to_vec();
        if prom && !keys.contains(&KeySpec::Func) {
            keys.insert(0, KeySpec::Func);
        }
        match job {
            Job::Count { .. } => UserAgg::Count(CountAgg::new(keys).with_max_keys(max_keys)),
            Job::Hist { field, scale, .. } => {
                UserAgg::Hist(HistAgg::new(field, *scale, keys).with_max_keys(max_keys))
            }
            Job::Latency { scale, unit, .. } => {
                let (unit, scale) = match (prom, *scale) {
                    (false, s) => (*unit, s),
                    (true, Scale::Log2) => (Unit::Ns, Scale::Log2),
                    (true, Scale::Linear { step }) => (
                        Unit::Ns,
                        Scale::Linear {
                            step: step.saturating_mul(unit.nanos()),
                        },
                    ),
                };
                UserAgg::Latency(LatencyAgg::new(pairs, unit, scale, keys).with_max_keys(max_keys))
            }
        }
    }

    fn overflowed(&self) -> bool {
        match self {
            UserAgg::Count(a) => a.overflowed(),
            UserAgg::Hist(a) => a.overflowed(),
            UserAgg::Latency(a) => a.overflowed(),
        }
    }

    fn add(&mut self, s: &Sample<'_>) {
        match self {
            UserAgg::Count(a) => a.add(s),
            UserAgg::Hist(a) => a.add(s),
            UserAgg::Latency(a) => a.add(s),
        }
    }

    fn lost(&mut self, n: u64) {
        match self {
            UserAgg::Count(a) => a.lost(n),
            UserAgg::Hist(a) => a.lost(n),
            UserAgg::Latency(a) => a.lost(n),
        }
    }

    fn report(&mut self, misses: Option<u64>) -> Report {
        match self {
            UserAgg::Count(a) => Report::Count(a.report()),
            UserAgg::Hist(a) => Report::Hist(a.report()),
            UserAgg::Latency(a) => {
                if let Some(m) = misses {
                    a.set_kretprobe_misses(m);
                }
                Report::Latency(a.report())
            }
        }
    }

    fn reset(&mut self) {
        match self {
            UserAgg::Count(a) => a.reset(),
            UserAgg::Hist(a) => a.reset(),
            UserAgg::Latency(a) => a.reset(),
        }
    }
}

/// Where reports go: the terminal or JSON on stdout, and the Prometheus
/// text the server hands out.
struct Printer {
    json: bool,
    /// Counts as folded stacks (ktrace_aggregate::folded).
    folded: bool,
    width: usize,
    top: Option<u64>,
    field: Option<String>,
    interval: Option<Duration>,
    metrics: Option<Arc<Mutex<String>>>,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Printer {
    /// Prints one block: headed by its time with `-i`.
    fn print(&self, r: &Report) -> io::Result<()> {
        let now = unix_ns();
        let mut out = String::new();
        if let (true, Report::Count(c)) = (self.folded, r) {
            match self.top {
                Some(n) => folded::count_folded(&mut out, &c.clone().top(n as usize)),
                None => folded::count_folded(&mut out, c),
            }
        } else if self.json {
            r.json(
                &mut out,
                now,
                self.interval.map(|d| d.as_nanos() as u64),
                self.top,
            );
            if !out.ends_with('\n') {
                out.push('\n');
            }
        } else {
            if self.interval.is_some() {
                render::interval_header(&mut out, now);
            }
            r.text(&mut out, self.width, self.top);
            out.push('\n');
        }
        let mut so = io::stdout().lock();
        so.write_all(out.as_bytes())?;
        so.flush()
    }

    fn publish(&self, total: &Report) {
        if let Some(m) = &self.metrics {
            let text = total.prometheus(self.field.as_deref());
            *m.lock().unwrap_or_else(|p| p.into_inner()) = text;
        }
    }
}

/// Bar width: `--width`, else what `COLUMNS` leaves beside the labels.
fn bar_width(opt: Option<u16>) -> usize {
    if let Some(w) = opt {
        return usize::from(w);
    }
    // the shell's COLUMNS when exported, else a classic 80-column terminal
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| *c > 0)
        .map_or(40, |c| c.saturating_sub(40).clamp(10, 100))
}

/// Runs one of the three commands: `defs` are the probe specs (for latency
/// already the entry and return of each function).
pub fn run(defs: Vec<String>, job: Job, common: &Common) -> anyhow::Result<ExitCode> {
    let signals = Signals::catch()?;
    let root = session::open_tracefs()?;
    let view = KernelView::running(Some(&root));
    let sess = Session::new(&root)?;
    let globs = match &job {
        Job::Count { by, route, .. } => function_route(&defs, by, common, *route, &root)?,
        _ => None,
    };
    let (probes, checked) = match &globs {
        Some(_) => {
            let Job::Count { by, .. } = &job else {
                bail!("the function tracer counts only (internal)");
            };
            let keys = KeySpec::parse_all(by, FUNCTION_EVENT, &[])?;
            (
                Vec::new(),
                Checked {
                    keys,
                    pairs: Vec::new(),
                },
            )
        }
        None => {
            let probes = crate::resolve::build(&sess, &defs, common.run.pid, &view)?;
            let checked = check(&job, &probes, sess.name())?;
            (probes, checked)
        }
    };
    let group = sess.name().to_string();
    // What the README says of hist triggers: the view's one reading of it
    // (the definitions' checks read it there too).
    let features = view.features().map(|f| f.hist).unwrap_or_default();
    let planned = match common.engine {
        EngineChoice::User => None,
        _ if globs.is_some() => None,
        _ => Some(plan(
            &job,
            &checked,
            &probes,
            &group,
            &features,
            &common.run,
            common.prometheus.is_some(),
        )?),
    };
    // (the kernel engine's table size, said in its reports as max_keys)
    let mut table_entries = 0;
    let kplan = match (common.engine, planned) {
        (EngineChoice::User, _) | (_, None) => None,
        (EngineChoice::Kernel, Some(Err(u))) => {
            bail!("the kernel engine cannot do this: {}", u.reason)
        }
        (_, Some(Ok(mut p))) => {
            let (size, over) = fit_tables(&mut p, common.max_keys);
            table_entries = size;
            if over {
                crate::eline!(
                    "ktrace: {} hist tables of {size} entries each (the kernel allocates them \
                     up front); keys beyond that are counted as dropped",
                    p.steps()
                        .iter()
                        .filter(|s| matches!(s, Step::Trigger { .. }))
                        .count()
                );
            }
            Some(p)
        }
        (_, Some(Err(u))) => {
            crate::eline!("ktrace: aggregating in ktrace (user engine): {}", u.reason);
            None
        }
    };
    let interval = common.interval.map(Duration::from_secs_f64);
    let metrics = common
        .prometheus
        .map(|_| Arc::new(Mutex::new(String::new())));
    let server = match (common.prometheus, &metrics) {
        (Some(addr), Some(m)) => {
            let m = Arc::clone(m);
            let s = ktrace_aggregate::server::MetricsServer::start(addr, move || {
                m.lock().unwrap_or_else(|p| p.into_inner()).clone()
            })
            .with_context(|| format!("cannot serve Prometheus metrics on {addr}"))?;
            crate::eline!(
                "ktrace: Prometheus metrics at http://{}/metrics",
                s.local_addr()
            );
            if addr.ip().is_unspecified() {
                crate::say!(
                    "warning: {} serves the metrics to every network this machine is on, \
                     unauthenticated: they hold what the probes saw (task names, traced strings, \
                     stacks); bind 127.0.0.1 or a private address to keep them local",
                    s.local_addr()
                );
            }
            Some(s)
        }
        _ => None,
    };
    let printer = Printer {
        json: common.json,
        folded: matches!(job, Job::Count { folded: true, .. }),
        width: bar_width(common.width),
        top: match &job {
            Job::Count { top, .. } => *top,
            _ => None,
        },
        field: match &job {
            Job::Hist { field, .. } => Some(field.clone()),
            _ => None,
        },
        interval,
        metrics,
    };
    let code = match kplan {
        Some(kp) => run_kernel(
            sess,
            probes,
            kp,
            &common.run,
            &signals,
            &printer,
            &root,
            table_entries,
        ),
        None => run_user(
            sess,
            probes,
            globs.as_deref(),
            &job,
            checked,
            &common.run,
            &signals,
            &printer,
            &root,
            &view,
            usize::try_from(common.max_keys).unwrap_or(usize::MAX),
        ),
    };
    if let Some(s) = server {
        s.stop();
    }
    code
}

/// The event the function tracer's records are (system/name).
const FUNCTION_EVENT: &str = "ftrace/function";

/// A `func_stack_trace` stack from the traced function `func` outwards:
/// the tracer's own frames before it (`ftrace_caller+0x6c` on arm64 7.2)
/// are left out, as a kprobe's stack starts at its function.
fn from_function<'f>(frames: &'f [String], func: &str) -> &'f [String] {
    let own = |f: &String| {
        f.strip_prefix(func)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('+'))
    };
    match frames.iter().position(own) {
        Some(i) => &frames[i..],
        None => frames,
    }
}

/// The keys the function tracer's records can give (no probe fields; the
/// stack with its `func_stack_trace` option).
const FUNCTION_KEYS: [&str; 6] = ["func", "comm", "pid", "tid", "cpu", "stack"];

/// A bare kernel function name or glob (`vfs_*`, `ext4_?et*`, `tcp_v4_rcv`):
/// the characters of symbol names and the kernel's glob (`*`, `?`), and
/// nothing of the probe syntax (no place, argument, `%return`, path).
pub(crate) fn bare_glob(def: &str) -> bool {
    !def.is_empty()
        && def.len() <= 256
        && !def.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && def
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '*' | '?' | '.'))
        && def.chars().any(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why the function tracer cannot do this count (`None`: it can), before
/// asking the kernel.
fn function_route_refusal(defs: &[String], by: &[String], common: &Common) -> Option<String> {
    if let Some(d) = defs.iter().find(|d| !bare_glob(d)) {
        return Some(format!(
            "{d:?} is not a bare function name or glob (arguments, return probes, offsets, \
             user probes and events need probes)"
        ));
    }
    if let Some(k) = by.iter().find(|k| !FUNCTION_KEYS.contains(&k.as_str())) {
        return Some(format!(
            "--by {k} needs a probe (the function tracer gives func, comm, pid, tid, cpu, stack)"
        ));
    }
    if common.engine == EngineChoice::Kernel {
        return Some("--engine kernel needs probe events for its hist triggers".into());
    }
    if common.run.filter.is_some() {
        return Some("-f filters probe events".into());
    }
    if common.run.trigger.is_some() {
        return Some("--trigger applies to probe events".into());
    }
    None
}

/// The route of `ktrace count`: the function tracer's globs, or `None`
/// for per-function probes; says which and why on stderr. `--route
/// ftrace` when the function tracer cannot do the job is an error, before
/// anything is written.
fn function_route(
    defs: &[String],
    by: &[String],
    common: &Common,
    route: Route,
    root: &Path,
) -> anyhow::Result<Option<Vec<String>>> {
    if route == Route::Kprobe {
        crate::eline!("ktrace: route: one kprobe per function (--route kprobe)");
        return Ok(None);
    }
    let named = |d: &String| d.split_whitespace().next().is_some_and(bare_glob);
    if route == Route::Auto && !defs.iter().any(named) {
        // no kernel function named (user probes, events): nothing to choose
        return Ok(None);
    }
    let refusal = function_route_refusal(defs, by, common).or_else(|| {
        (!ktrace_tracefs::features::function_tracer(root)).then(|| {
            "this kernel offers no function tracer (no `function` in available_tracers)".into()
        })
    });
    match (refusal, route) {
        (None, _) => {
            crate::eline!(
                "ktrace: route: the function tracer in ktrace's own instance (one glob write \
                 for all the functions of available_filter_functions that match; \
                 --route kprobe for one kprobe per function)"
            );
            let mut globs = defs.to_vec();
            globs.dedup();
            Ok(Some(globs))
        }
        (Some(why), Route::Ftrace) => bail!("--route ftrace cannot do this: {why}"),
        (Some(why), _) => {
            crate::eline!("ktrace: route: one kprobe per function: {why}");
            Ok(None)
        }
    }
}

/// What the kernel's tables say, totals since the triggers went in: the
/// report as asked, and with `prom` the one Prometheus serves (keyed by
/// function first; latency in nanoseconds). With `gone_is_empty` (someone
/// removed triggers of ours: their tables went with them) a missing table
/// reads as empty, so what is left is still reported.
fn read_kernel(
    kp: &KPlan,
    inst: &ktrace_tracefs::Instance,
    root: &Path,
    group: &str,
    prom: bool,
    gone_is_empty: bool,
) -> anyhow::Result<(Report, Option<Report>)> {
    // each event's hist file read once; our table in it found by command
    let mut files: HashMap<(String, String), Vec<khist::HistTable>> = HashMap::new();
    let mut table = |system: &str, event: &str, cmd: &str| -> anyhow::Result<khist::HistTable> {
        let key = (system.to_string(), event.to_string());
        if !files.contains_key(&key) {
            let tables = match inst.read_hist(system, event) {
                Ok(text) => khist::parse_hist(&text)?,
                Err(_) if gone_is_empty => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            files.insert(key.clone(), tables);
        }
        let found = files
            .get(&key)
            .and_then(|t| kernel::find_table(t, cmd))
            .cloned();
        match found {
            Some(t) => Ok(t),
            None if gone_is_empty => Ok(khist::HistTable {
                trigger: cmd.to_string(),
                keys: khist::trigger_keys(cmd).unwrap_or_default(),
                entries: Vec::new(),
                hits: 0,
                n_entries: 0,
                dropped: 0,
            }),
            None => anyhow::bail!("the kernel shows no table of ours on {system}/{event}"),
        }
    };
    let triggers = |steps: &[Step]| -> Vec<(String, String, String)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Trigger {
                    system,
                    event,
                    command,
                } => Some((system.clone(), event.clone(), command.clone())),
                Step::Synthetic { .. } => None,
            })
            .collect()
    };
    Ok(match kp {
        KPlan::Count(p) => {
            let mut ts = Vec::new();
            for (sy, ev, cmd) in triggers(&p.plan.setup) {
                ts.push(table(&sy, &ev, &cmd)?);
            }
            let ts: Vec<&khist::HistTable> = ts.iter().collect();
            let by_func = if prom {
                Some(Report::Count(p.by_func().report(&ts)?))
            } else {
                None
            };
            (Report::Count(p.report(&ts)?), by_func)
        }
        KPlan::Hist(p) => {
            let (sy, ev, cmd) = triggers(&p.plan.setup)
                .into_iter()
                .next()
                .context("no trigger in the plan (internal)")?;
            let t = table(&sy, &ev, &cmd)?;
            let by_func = if prom {
                Some(Report::Hist(p.by_func().report(&t)?))
            } else {
                None
            };
            (Report::Hist(p.report(&t)?), by_func)
        }
        KPlan::Latency(ps) => {
            let profile = ktrace_tracefs::profile::read_group(root, group).unwrap_or_default();
            let mut all: Option<LatencyReport> = None;
            let mut all_prom: Option<LatencyReport> = None;
            let on = |t: &kernel::TableRef| (t.system.clone(), t.event.clone(), t.command.clone());
            for p in ps {
                let mut get = |t: &kernel::TableRef| {
                    let (sy, ev, cmd) = on(t);
                    table(&sy, &ev, &cmd)
                };
                let main = get(&p.main)?;
                let min = get(&p.min)?;
                // The returns that reached the return trigger (after the
                // pid lists and the filter, unlike kprobe_profile's hits):
                // its own table's hit count.
                let ret_t = get(&p.ret)?;
                let drops = kernel::ChainDrops {
                    entry: get(&p.entry)?.dropped,
                    ret: ret_t.dropped,
                    derive: match &p.derive {
                        Some(d) => get(d)?.dropped,
                        None => 0,
                    },
                };
                let misses = profile
                    .iter()
                    .find(|x| x.event == p.return_event.1)
                    .and_then(|x| x.misses);
                let r = p.report(&main, Some(&min), Some(ret_t.hits), misses, drops)?;
                all = Some(merge_latency(all, r));
                if prom {
                    let t = get(p.prom_table())?;
                    let r = p.prom_report(&t, Some(ret_t.hits), misses, drops)?;
                    all_prom = Some(merge_latency(all_prom, r));
                }
            }
            (
                Report::Latency(all.context("no function to time")?),
                all_prom.map(Report::Latency),
            )
        }
    })
}

/// Two functions' latency reports as one.
fn merge_latency(a: Option<LatencyReport>, r: LatencyReport) -> LatencyReport {
    let Some(mut a) = a else {
        return r;
    };
    let mut groups = std::mem::take(&mut a.hist.groups);
    groups.extend(r.hist.groups);
    a.hist.set_groups(groups);
    a.hist.dropped += r.hist.dropped;
    a.unmatched_returns += r.unmatched_returns;
    a.kretprobe_misses = match (a.kretprobe_misses, r.kretprobe_misses) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    a
}

/// What someone else did to a kernel-engine session that makes its
/// numbers short: the instance or the probes' group gone, one of our
/// triggers removed or paused, the instance's pid lists rewritten. (Not
/// a write of `0` to the events' `enable`: a hist trigger holds its event
/// in soft mode, and the kernel keeps counting — measured on 6.1, 6.12 and
/// 7.2.) `triggers` are the commands as written. One line per kind.
fn kernel_disturbance(run: &live::KernelRun, triggers: &[Step]) -> Vec<String> {
    if let Some(m) = run.sess.disturbance(true) {
        return vec![m];
    }
    let mut removed = Vec::new();
    let mut paused = Vec::new();
    for step in triggers {
        let Step::Trigger {
            system,
            event,
            command,
        } = step
        else {
            continue;
        };
        let Ok(text) = run.inst.read_triggers(system, event) else {
            removed.push(format!("{system}/{event}"));
            continue;
        };
        match kernel::trigger_state(&text, command) {
            kernel::TriggerState::Active => {}
            kernel::TriggerState::Paused => paused.push(format!("{system}/{event}")),
            kernel::TriggerState::Missing => removed.push(format!("{system}/{event}")),
        }
    }
    let mut parts = Vec::new();
    if !removed.is_empty() {
        parts.push(format!(
            "ktrace's hist triggers were removed by someone else while aggregating: {}",
            removed.join(", ")
        ));
    }
    if !paused.is_empty() {
        parts.push(format!(
            "ktrace's hist triggers were paused by someone else while aggregating: {}",
            paused.join(", ")
        ));
    }
    if let Some(m) = live::kernel_pids_disturbed(run) {
        parts.push(m);
    }
    parts
}

/// Warns of what [`kernel_disturbance`] finds that was not said yet.
fn say_disturbance(found: Vec<String>, said: &mut Vec<String>) {
    for m in found {
        if !said.contains(&m) {
            crate::say!("warning: {m}; the numbers above are short");
            said.push(m);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_kernel(
    sess: Session,
    probes: Vec<Probe>,
    mut kp: KPlan,
    args: &RunArgs,
    signals: &Signals,
    printer: &Printer,
    root: &Path,
    table_entries: usize,
) -> anyhow::Result<ExitCode> {
    let group = sess.name().to_string();
    // (latency's synthetic events time entries with common_timestamp)
    let timestamps = matches!(kp, KPlan::Latency(_));
    let legacy = !ktrace_tracefs::DynEvents::new(root).uses_dynamic_events();
    let dynev = ktrace_tracefs::DynEvents::new(root);
    // What was written, so exactly that is removed (in reverse).
    let written: RefCell<Vec<Step>> = RefCell::new(Vec::new());
    let mut install =
        |inst: &ktrace_tracefs::Instance, user: Option<&str>, own: &str| -> anyhow::Result<()> {
            add_filters(&mut kp, &group, user, own);
            for step in kp.steps() {
                match step {
                    Step::Synthetic { name, fields } => dynev
                        .create_synthetic(name, fields, legacy)
                        .with_context(|| format!("synthetic event {name}"))?,
                    Step::Trigger {
                        system,
                        event,
                        command,
                    } => inst
                        .add_trigger(system, event, command)
                        .with_context(|| format!("hist trigger on {system}/{event}: {command}"))?,
                }
                written.borrow_mut().push(step.clone());
            }
            Ok(())
        };
    let mut remove = |inst: &ktrace_tracefs::Instance| -> anyhow::Result<()> {
        let mut first_err = None;
        for step in written.borrow_mut().drain(..).rev() {
            let r = match &step {
                Step::Synthetic { name, .. } => dynev.destroy_synthetic(name),
                Step::Trigger {
                    system,
                    event,
                    command,
                } => inst.remove_trigger(system, event, command).or_else(|e| {
                    // removed by someone else already (reported): nothing to undo
                    match inst.read_triggers(system, event) {
                        Ok(text)
                            if kernel::trigger_state(&text, command)
                                == kernel::TriggerState::Missing =>
                        {
                            Ok(())
                        }
                        _ => Err(e),
                    }
                }),
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    };
    let mut run = match live::setup_kernel(sess, probes, args, signals, timestamps, &mut install) {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    let deadline = args.deadline();
    let prom = printer.metrics.is_some();
    // Someone else's changes are looked for every second (one read of
    // each trigger file: every 10 s beyond 64 of them).
    let n_triggers = written
        .borrow()
        .iter()
        .filter(|s| matches!(s, Step::Trigger { .. }))
        .count();
    let check_every = Duration::from_secs(if n_triggers <= 64 { 1 } else { 10 });
    let mut next_check = Instant::now() + check_every;
    let mut next_publish = Instant::now() + Duration::from_secs(1);
    let mut next_print = printer.interval.map(|i| Instant::now() + i);
    let mut printed: Option<Report> = None;
    let mut failure = None;
    // what someone else did, as said
    let mut disturbed: Vec<String> = Vec::new();
    let stop = loop {
        let now = Instant::now();
        let mut wake = next_check;
        if prom {
            wake = wake.min(next_publish);
        }
        if let Some(n) = next_print {
            wake = wake.min(n);
        }
        let wait = wake.saturating_duration_since(now);
        let stop = match live::kernel_wait(&mut run, args, signals, deadline, wait) {
            Ok(s) => s,
            Err(e) => {
                failure = Some(e);
                break Stop::ReadFailed;
            }
        };
        if let Some(stop) = stop {
            break stop;
        }
        let now = Instant::now();
        if now >= next_check {
            say_disturbance(kernel_disturbance(&run, &written.borrow()), &mut disturbed);
            next_check = now + check_every;
        }
        let publish = prom && now >= next_publish;
        let print = next_print.is_some_and(|n| now >= n);
        if !publish && !print {
            continue;
        }
        let (total, by_func) =
            match read_kernel(&kp, &run.inst, root, &group, prom, !disturbed.is_empty()) {
                Ok((t, p)) => (t.sized(table_entries), p),
                Err(e) => {
                    failure = Some(e);
                    break Stop::ReadFailed;
                }
            };
        if let Some(p) = &by_func {
            printer.publish(p);
            next_publish = now + Duration::from_secs(1);
        }
        if print {
            let block = match &printed {
                Some(p) => total.since(p),
                None => total.clone(),
            };
            if printer.print(&block).is_err() {
                break Stop::OutputClosed;
            }
            printed = Some(total);
            next_print = printer.interval.map(|i| Instant::now() + i);
        }
    };
    if failure.is_none() {
        // the last look, before our triggers go
        say_disturbance(kernel_disturbance(&run, &written.borrow()), &mut disturbed);
    }
    if failure.is_none() && stop != Stop::OutputClosed {
        match read_kernel(&kp, &run.inst, root, &group, prom, !disturbed.is_empty()) {
            Ok((total, by_func)) => {
                let total = total.sized(table_entries);
                if let Some(p) = &by_func {
                    printer.publish(p);
                }
                let block = match &printed {
                    Some(p) => total.since(p),
                    None => total,
                };
                let _ = printer.print(&block);
            }
            Err(e) => failure = Some(e),
        }
    }
    let code = live::conclude_kernel(run, stop, &mut remove)?;
    match failure {
        Some(e) => Err(e.context("cannot read the kernel's histograms")),
        None if !disturbed.is_empty() => {
            anyhow::bail!("{}; the numbers above are short", disturbed.join("; "))
        }
        None => Ok(code),
    }
}

/// The warning when keys pass `--max-keys` (said once per run).
fn say_overflow(max_keys: usize) {
    crate::say!(
        "warning: more than {max_keys} distinct keys: ktrace keeps the first {max_keys} and \
         counts the rest together as other (exactly); --max-keys N keeps more"
    );
}

/// The user engine's sink: each decoded record becomes a [`Sample`]. With
/// a `stack` key, a probe's sample waits for the stack record the kernel
/// writes right after it (`stacktrace` trigger, `userstacktrace` option).
struct AggSink<'s> {
    state: Rc<RefCell<UserState>>,
    /// `GROUP/EVENT` → the function.
    funcs: HashMap<String, String>,
    tgids: HashMap<u32, u32>,
    /// The last (tid, tgid) looked up: a burst of one task hashes nothing.
    last_tgid: Option<(u32, u32)>,
    /// `GROUP/EVENT` and its function, by event id (a record costs an
    /// index, not a hash of its name).
    names: Vec<Option<(String, Option<String>)>>,
    /// Key by stack: samples wait for their stack record.
    stacks: bool,
    pending: Option<Pending>,
    symbols: &'s dyn ktrace_printer::Symbolizer,
    /// The fields the keys and the histogram read: only these are decoded
    /// (none for a count by func/comm/pid, so a record costs no allocation).
    wanted: Vec<String>,
    /// Counting the function tracer's records (`ftrace/function`).
    function: bool,
    /// The function tracer's `ip` → its function.
    ips: HashMap<u64, String>,
    /// Processes from /proc (live); a recording's threads are their own.
    proc: bool,
}

/// A field value that outlives its record.
#[derive(Debug, Clone)]
enum Owned {
    Num(Value<'static>),
    Text(String),
}

/// A sample waiting for its stack.
#[derive(Debug, Clone)]
struct Pending {
    ts_ns: u64,
    cpu: u32,
    pid: u32,
    tid: u32,
    comm: String,
    event: String,
    /// The function: the probe's (looked up once per event id) or the one
    /// the function tracer's record is in.
    func: Option<String>,
    fields: Vec<(String, Owned)>,
}

impl Pending {
    /// The sample of record `ev` of process `pid`, waiting for its stack.
    fn of(
        ev: &ktrace_stream::Event<'_>,
        pid: u32,
        event: &str,
        func: Option<String>,
        fields: Vec<(String, Owned)>,
    ) -> Pending {
        Pending {
            ts_ns: ev.ts,
            cpu: ev.cpu as u32,
            pid,
            tid: ev.pid() as u32,
            comm: ev.comm().to_string(),
            event: event.to_string(),
            func,
            fields,
        }
    }
}

struct UserState {
    agg: UserAgg,
    /// Never reset: what Prometheus serves.
    total: Option<UserAgg>,
}

/// A field value borrowed from its record.
enum Field<'a> {
    Num(Value<'static>),
    Text(std::borrow::Cow<'a, str>),
}

impl UserState {
    fn add_sample(&mut self, s: &Sample<'_>) {
        self.agg.add(s);
        if let Some(t) = &mut self.total {
            t.add(s);
        }
    }

    fn add(&mut self, p: &Pending, func: Option<&str>, stack: Option<&[String]>) {
        let fields: Vec<(&str, Value<'_>)> = p
            .fields
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str(),
                    match v {
                        Owned::Num(x) => *x,
                        Owned::Text(t) => Value::Str(t.as_str()),
                    },
                )
            })
            .collect();
        let s = Sample {
            ts_ns: p.ts_ns,
            cpu: p.cpu,
            pid: p.pid,
            tid: p.tid,
            comm: &p.comm,
            event: &p.event,
            func,
            stack,
            fields: &fields,
        };
        self.add_sample(&s);
    }
}

fn tgid_of(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

impl AggSink<'_> {
    /// The process of thread `tid` (looked up once per thread).
    fn tgid(&mut self, tid: u32) -> u32 {
        if !self.proc {
            return tid;
        }
        if let Some((t, p)) = self.last_tgid
            && t == tid
        {
            return p;
        }
        let p = *self.tgids.entry(tid).or_insert_with(|| tgid_of(tid));
        self.last_tgid = Some((tid, p));
        p
    }

    /// The pending sample goes in (with `stack`, or without one).
    fn settle(&mut self, stack: Option<&[String]>) {
        if let Some(p) = self.pending.take() {
            let func = p.func.as_deref();
            let stack = match (p.event.as_str(), func, stack) {
                (FUNCTION_EVENT, Some(f), Some(frames)) => Some(from_function(frames, f)),
                (_, _, stack) => stack,
            };
            self.state.borrow_mut().add(&p, func, stack);
        }
    }

    /// The frames of a `kernel_stack` / `user_stack` record
    /// ([`ktrace_event::Stack`]'s, innermost first): kernel addresses as
    /// `sym+0xoff`, user addresses (and unknown kernel ones) in hex.
    fn frames(&self, ev: &ktrace_stream::Event<'_>) -> Vec<String> {
        let Some(stack) = ev.stack() else {
            return Vec::new();
        };
        stack
            .frames()
            .map(|addr| match (stack.user, self.symbols.lookup(addr)) {
                (false, Some(sym)) => format!("{}+0x{:x}", sym.name, sym.offset),
                _ => format!("0x{addr:x}"),
            })
            .collect()
    }
}

impl AggSink<'_> {
    /// One record of the function tracer: counted for the function its
    /// `ip` is in (the traced function: ftrace's call site is in its
    /// first instructions).
    fn function_hit(&mut self, ev: &ktrace_stream::Event<'_>) {
        let ip = ev
            .fields()
            .find(|(_, f)| f.name == "ip")
            .and_then(|(i, _)| match ev.int(i, 0) {
                Some(ktrace_stream::Int::U(v)) => Some(v),
                Some(ktrace_stream::Int::S(v)) => Some(v as u64),
                None => None,
            });
        let Some(ip) = ip else {
            return;
        };
        let tid = ev.pid() as u32;
        let pid = self.tgid(tid);
        let symbols = self.symbols;
        let func = self.ips.entry(ip).or_insert_with(|| {
            symbols
                .lookup(ip)
                .map_or_else(|| format!("0x{ip:x}"), |s| s.name.to_string())
        });
        if self.stacks {
            // `func_stack_trace`: the stack record follows
            let func = Some(func.clone());
            self.pending = Some(Pending::of(ev, pid, FUNCTION_EVENT, func, Vec::new()));
            return;
        }
        let s = Sample {
            ts_ns: ev.ts,
            cpu: ev.cpu as u32,
            pid,
            tid,
            comm: ev.comm(),
            event: FUNCTION_EVENT,
            func: Some(func.as_str()),
            stack: None,
            fields: &[],
        };
        self.state.borrow_mut().add_sample(&s);
    }
}

impl Sink for AggSink<'_> {
    fn event(&mut self, ev: &ktrace_stream::Event<'_>) -> io::Result<Flow> {
        match ev.info.role {
            Role::Probe => {}
            Role::Stack { .. } => {
                if self.pending.is_some() {
                    let frames = self.frames(ev);
                    self.settle(Some(&frames));
                }
                return Ok(Flow::Continue);
            }
            Role::Kernel => {
                if self.function && ev.info.system() == "ftrace" && ev.info.name() == "function" {
                    self.function_hit(ev);
                }
                return Ok(Flow::Continue);
            }
        }
        // a sample still waiting had no stack record
        self.settle(None);
        let tid = ev.pid() as u32;
        let pid = self.tgid(tid);
        let mut vals: Vec<(&str, Field<'_>)> = Vec::new();
        for (i, f) in ev.fields() {
            if !self.wanted.contains(&f.name) {
                continue;
            }
            if f.name.starts_with("__probe_")
                || (f.is_array && !matches!(f.kind, FieldKind2::DataLoc { .. }))
            {
                continue;
            }
            let v = match f.kind {
                FieldKind2::Int => match ev.int(i, 0) {
                    Some(ktrace_stream::Int::U(v)) => Field::Num(Value::U64(v)),
                    Some(ktrace_stream::Int::S(v)) => Field::Num(Value::S64(v)),
                    None => continue,
                },
                FieldKind2::DataLoc { .. } => match ev.str(i, 0) {
                    ktrace_stream::StrValue::Ok(b) => Field::Text(String::from_utf8_lossy(b)),
                    _ => continue,
                },
                FieldKind2::Bytes => continue,
            };
            vals.push((f.name.as_str(), v));
        }
        let id = usize::from(ev.info.id);
        if self.names.len() <= id {
            self.names.resize(id + 1, None);
        }
        let (event, func) = self.names[id].get_or_insert_with(|| {
            let name = format!("{}/{}", ev.info.system(), ev.info.name());
            let func = self.funcs.get(&name).cloned();
            (name, func)
        });
        if self.stacks {
            let fields = vals
                .into_iter()
                .map(|(n, v)| {
                    let v = match v {
                        Field::Num(x) => Owned::Num(x),
                        Field::Text(t) => Owned::Text(t.into_owned()),
                    };
                    (n.to_string(), v)
                })
                .collect();
            self.pending = Some(Pending::of(ev, pid, event, func.clone(), fields));
            return Ok(Flow::Continue);
        }
        let fields: Vec<(&str, Value<'_>)> = vals
            .iter()
            .map(|(n, v)| {
                (
                    *n,
                    match v {
                        Field::Num(x) => *x,
                        Field::Text(t) => Value::Str(t),
                    },
                )
            })
            .collect();
        let sample = Sample {
            ts_ns: ev.ts,
            cpu: ev.cpu as u32,
            pid,
            tid,
            comm: ev.comm(),
            event,
            func: func.as_deref(),
            stack: None,
            fields: &fields,
        };
        self.state.borrow_mut().add_sample(&sample);
        Ok(Flow::Continue)
    }

    fn lost(&mut self, _cpu: usize, missed: Missed) -> io::Result<()> {
        self.settle(None);
        let n = missed.count().max(1);
        let mut st = self.state.borrow_mut();
        st.agg.lost(n);
        if let Some(t) = &mut st.total {
            t.lost(n);
        }
        Ok(())
    }

    fn finish(&mut self, _end: &ktrace_stream::EndOfRun) -> io::Result<()> {
        self.settle(None);
        Ok(())
    }
}

type FieldKind2 = ktrace_event::FieldKind;

/// Counts the probe hits of a recording by stack (`ktrace report
/// --folded`) with the sink `count --by stack` runs live: an event's stack
/// is the first stack record the stream pairs with it, its frames named as
/// the live table names them. Keeps [`ktrace_aggregate::agg::DEFAULT_MAX_KEYS`] stacks (the
/// rest counted together as other, with a warning).
pub(crate) fn count_recording_by_stack(
    decoder: &mut ktrace_stream::Decoder,
    streams: Vec<ktrace_stream::CpuPages>,
    symbols: &dyn ktrace_printer::Symbolizer,
) -> Result<(CountReport, ktrace_stream::EndOfRun), ktrace_stream::Error> {
    let max_keys = ktrace_aggregate::agg::DEFAULT_MAX_KEYS;
    let keys = [KeySpec::Stack];
    let state = Rc::new(RefCell::new(UserState {
        agg: UserAgg::Count(CountAgg::new(keys.to_vec()).with_max_keys(max_keys)),
        total: None,
    }));
    let mut sink = AggSink {
        state: Rc::clone(&state),
        funcs: HashMap::new(),
        tgids: HashMap::new(),
        last_tgid: None,
        names: Vec::new(),
        stacks: true,
        pending: None,
        symbols,
        wanted: Vec::new(),
        function: false,
        ips: HashMap::new(),
        proc: false,
    };
    let end = ktrace_stream::replay(decoder, streams, &mut sink)?;
    drop(sink);
    let st = state.borrow_mut();
    if st.agg.overflowed() {
        say_overflow(max_keys);
    }
    let r = match &st.agg {
        UserAgg::Count(a) => a.report(),
        // (a count job makes a count aggregator)
        _ => CountReport::new(vec!["stack".into()], []),
    };
    Ok((r, end))
}

#[allow(clippy::too_many_arguments)]
fn run_user(
    sess: Session,
    probes: Vec<Probe>,
    globs: Option<&[String]>,
    job: &Job,
    checked: Checked,
    args: &RunArgs,
    signals: &Signals,
    printer: &Printer,
    root: &Path,
    view: &KernelView,
    max_keys: usize,
) -> anyhow::Result<ExitCode> {
    let symbols = crate::kview::KernelSymbols::new(view);
    let symbols: &dyn ktrace_printer::Symbolizer = &symbols;
    let group = sess.name().to_string();
    let ev = |p: &Probe| format!("{group}/{}", p.event());
    let stacks = checked.keys.contains(&KeySpec::Stack);
    let funcs: HashMap<String, String> = probes.iter().map(|p| (ev(p), func_of(p))).collect();
    let kernel_returns = probes.iter().any(|p| is_return(p) && !p.kind().is_uprobe());
    let pairs: Vec<LatencyPair> = checked
        .pairs
        .iter()
        .map(|(e, r)| LatencyPair {
            func: func_of(&probes[*e]),
            entry_event: ev(&probes[*e]),
            return_event: ev(&probes[*r]),
        })
        .collect();
    let agg = UserAgg::new(job, pairs.clone(), &checked.keys, max_keys, false);
    let state = Rc::new(RefCell::new(UserState {
        total: printer
            .metrics
            .as_ref()
            .map(|_| UserAgg::new(job, pairs, &checked.keys, max_keys, true)),
        agg,
    }));
    let mut sink = AggSink {
        state: Rc::clone(&state),
        funcs,
        tgids: HashMap::new(),
        last_tgid: None,
        names: Vec::new(),
        stacks,
        pending: None,
        symbols,
        wanted: checked
            .keys
            .iter()
            .filter_map(|k| match k {
                KeySpec::Field(name) => Some(name.clone()),
                _ => None,
            })
            .chain(match job {
                Job::Hist { field, .. } => Some(field.clone()),
                _ => None,
            })
            .collect(),
        function: globs.is_some(),
        ips: HashMap::new(),
        proc: true,
    };
    let setup = match globs {
        Some(g) => {
            live::setup_function(sess, g, stacks, args, root, view, signals).map(|(r, funcs)| {
                live::say_functions("counting", &funcs, g);
                r
            })
        }
        None => live::setup_built(sess, probes, stacks, args, root, view, signals),
    };
    let mut run = match setup {
        Ok(r) => r,
        Err(e) => return live::setup_failed(e),
    };
    let misses = || -> Option<u64> {
        if !kernel_returns {
            return None;
        }
        let p = ktrace_tracefs::profile::read_group(root, &group).ok()?;
        Some(p.iter().filter_map(|x| x.misses).sum())
    };
    let deadline = args.deadline();
    let mut next_print = printer.interval.map(|i| Instant::now() + i);
    let mut next_publish = Instant::now();
    let mut warned = false;
    let mut tick = || -> io::Result<()> {
        let now = Instant::now();
        if !warned {
            let st = state.borrow();
            if st.agg.overflowed() || st.total.as_ref().is_some_and(UserAgg::overflowed) {
                warned = true;
                say_overflow(max_keys);
            }
        }
        if printer.metrics.is_some() && now >= next_publish {
            let mut st = state.borrow_mut();
            if let Some(t) = &mut st.total {
                printer.publish(&t.report(misses()));
            }
            next_publish = now + Duration::from_millis(500);
        }
        if next_print.is_some_and(|n| now >= n) {
            let mut st = state.borrow_mut();
            let r = st.agg.report(misses());
            st.agg.reset();
            drop(st);
            printer.print(&r)?;
            next_print = printer.interval.map(|i| now + i);
        }
        Ok(())
    };
    let (mut stop, mut error) =
        live::stream_loop_ticking(args, signals, deadline, &mut run, &mut sink, &mut tick);
    let end = live::finish(&mut run, &mut sink, &mut stop, &mut error);
    {
        let mut st = state.borrow_mut();
        if !warned && (st.agg.overflowed() || st.total.as_ref().is_some_and(UserAgg::overflowed)) {
            say_overflow(max_keys);
        }
        if let Some(t) = &mut st.total {
            printer.publish(&t.report(misses()));
        }
        if !matches!(stop, Stop::OutputClosed | Stop::OutputFailed) {
            let r = st.agg.report(misses());
            let _ = printer.print(&r);
        }
    }
    live::conclude(run, end, stop, error, None, "stdout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_stacks_start_at_the_function() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // arm64 7.2, func_stack_trace on ksys_sync
        let arm = f(&[
            "ftrace_caller+0x6c",
            "ksys_sync+0x8",
            "__arm64_sys_sync+0x18",
        ]);
        assert_eq!(from_function(&arm, "ksys_sync"), &arm[1..]);
        // already starting there; a longer name sharing the prefix is not it
        let x = f(&["ksys_sync_helper+0x4", "ksys_sync+0x5", "x+0x1"]);
        assert_eq!(from_function(&x, "ksys_sync"), &x[1..]);
        assert_eq!(from_function(&x[1..], "ksys_sync"), &x[1..]);
        // not found: the stack as the kernel wrote it
        assert_eq!(from_function(&arm, "vfs_read"), &arm[..]);
    }

    fn count_plan(n: usize) -> KPlan {
        let evs: Vec<ProbeEvent> = (0..n)
            .map(|i| ProbeEvent {
                system: "ktrace_p1_s2_n3".into(),
                event: format!("p_f{i}"),
                func: format!("f{i}"),
                fields: vec![],
                user: false,
            })
            .collect();
        let f = Features {
            hist: true,
            max_keys: 3,
            ..Features::default()
        };
        KPlan::Count(kernel::plan_count(&evs, &[], &f, None).unwrap())
    }

    #[test]
    fn bare_globs_are_function_names_and_globs_only() {
        for ok in [
            "vfs_*",
            "ext4_?et*",
            "tcp_v4_rcv",
            "*sync*",
            "foo.isra.0",
            "_x",
        ] {
            assert!(bare_glob(ok), "{ok}");
        }
        for bad in [
            "",
            "*",
            "vfs_read a=%di",
            "vfs_read%return",
            "vfs_read+4",
            "r:vfs_read",
            "/bin/true:main",
            "sched:sched_switch",
            "0abc",
            "vfs_\nread",
            "vfs_[ab]*",
        ] {
            assert!(!bare_glob(bad), "{bad:?}");
        }
    }

    #[test]
    fn many_tables_are_made_smaller() {
        let mut few = count_plan(8);
        assert_eq!(fit_tables(&mut few, 8192), (8192, false));
        let mut many = count_plan(630);
        assert_eq!(fit_tables(&mut many, 8192), (128, true));
        for s in many.steps() {
            let Step::Trigger { command, .. } = s else {
                panic!()
            };
            assert!(
                command.contains(":size=128") && !command.contains("8192"),
                "{command}"
            );
        }
        let mut some = count_plan(20);
        assert_eq!(fit_tables(&mut some, 8192), (2048, true));
        // --max-keys: rounded up to a power of two, within the kernel's
        // limits; one large table is what was asked for
        let mut one = count_plan(1);
        assert_eq!(fit_tables(&mut one, 100_000), (131_072, false));
        assert!(
            matches!(&one.steps()[0], Step::Trigger { command, .. } if command.contains(":size=131072"))
        );
        let mut small = count_plan(2);
        assert_eq!(fit_tables(&mut small, 1000), (1024, false));
        assert_eq!(table_size(1), 128);
        assert_eq!(table_size(u64::MAX), 131_072);
    }

    #[test]
    fn size_goes_after_the_keys_when_absent() {
        let mut kp = KPlan::Count(kernel::CountPlan::clone(match &count_plan(1) {
            KPlan::Count(c) => c,
            _ => unreachable!(),
        }));
        for steps in kp.steps_mut() {
            steps.push(Step::Trigger {
                system: "s".into(),
                event: "e".into(),
                command: "hist:keys=common_pid:ts0=common_timestamp".into(),
            });
            for _ in 0..20 {
                steps.push(steps[0].clone());
            }
        }
        fit_tables(&mut kp, 8192);
        assert!(
            kp.steps()
                .iter()
                .any(|s| matches!(s, Step::Trigger { command, .. }
            if command == "hist:keys=common_pid:size=2048:ts0=common_timestamp"))
        );
    }
}
