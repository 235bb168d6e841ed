//! Latency in the kernel: hist triggers on each function's entry and return
//! probes feeding synthetic events whose histograms count (one set of
//! tables per function, or shared by every function of the run, keyed by
//! the function's number), and the report read back from those tables.

use super::*;

/// One function to time in the kernel: its entry and return probes
/// (created by the caller in `system`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyProbe {
    /// The probes' system.
    pub system: String,
    /// The entry probe's event.
    pub entry_event: String,
    /// The return probe's event.
    pub return_event: String,
    /// The function (the `func` key).
    pub func: String,
}

/// A trigger of a plan: the event it is on and the command that installs
/// it (its table is found in the event's `hist` with [`find_table`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    /// The event's system.
    pub system: String,
    /// The event.
    pub event: String,
    /// The command.
    pub command: String,
}

/// The kernel engine's latency of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyPlan {
    /// What to write.
    pub plan: KernelPlan,
    /// The synthetic event whose `hist` holds the latencies (system
    /// `synthetic`).
    pub read: String,
    /// The histogram table, with the largest latency per entry (`onmax`).
    pub main: TableRef,
    /// Its twin tracking the smallest latency per entry (`onmax` of
    /// [`MIN_BASE`] less the latency).
    pub min: TableRef,
    /// The power-of-two nanosecond histogram for Prometheus, its fixed
    /// ladder whatever the unit and scale (asked for with `prometheus`);
    /// in ns with log2 buckets it is [`LatencyPlan::main`].
    pub prom: Option<TableRef>,
    /// The entry's trigger (its stamp per thread). This table and the
    /// next two carry each call to the histogram; what they drop (full)
    /// is never measured, and is reported ([`ChainDrops`]).
    pub entry: TableRef,
    /// The return's trigger (its hits are the returns seen).
    pub ret: TableRef,
    /// The conversion to the unit (µs, ms), on `{prefix}_lat`.
    pub derive: Option<TableRef>,
    /// The return probe (its hit count less the measured calls is the
    /// number of unmatched returns).
    pub return_event: (String, String),
    unit: Unit,
    scale: Scale,
    mode: ValueKey,
    prom_mode: ValueKey,
    func: String,
    /// The entry probe's event (the `probe` key).
    probe: String,
    keys: Vec<String>,
    slots: Vec<Slot>,
    /// With the tables shared by several functions ([`plan_latencies`]):
    /// this function's `id`, the first key of the shared tables.
    id: Option<u64>,
}

/// The base the smallest latency is tracked from: the kernel's `onmax`
/// keeps the largest `MIN_BASE - lat`, that is the smallest `lat`.
pub const MIN_BASE: u64 = i64::MAX as u64;

/// Latency of `p` in `unit`, bucketed by `scale`, by `keys`, in the kernel:
/// the entry stamps `ts0` per thread (nanoseconds), the return computes
/// `lat` and `lat + 1` and fires synthetic event `{prefix}_lat` through
/// `onmatch().trace()`. In nanoseconds its histogram does the counting; in
/// microseconds and milliseconds a trigger on it divides (`lat/1000`,
/// truncating the measured time as the user engine does, see
/// [`Unit::delta`]) and fires `{prefix}_lat1`, whose histogram counts.
/// The histogram table tracks the largest latency of each entry and a
/// twin the smallest (`onmax`, which takes one variable per trigger), so
/// the report has exact extremes. With `prometheus`, unless the unit is ns
/// and the scale log2, a power-of-two nanosecond histogram of
/// `{prefix}_lat` is kept too (Prometheus gets the same fixed ladder of
/// nanosecond bounds whatever the unit and scale). `prefix` must be unique on
/// the system (synthetic events are global), e.g. `ktrace_PID_N`.
///
/// The kernel keeps one `ts0` per thread: a recursive call overwrites the
/// outer entry's stamp, so the outer return finds none and counts as
/// unmatched (the user engine pairs recursion correctly).
pub fn plan_latency(
    p: &LatencyProbe,
    prefix: &str,
    unit: Unit,
    scale: Scale,
    keys: &[KeySpec],
    f: &Features,
    prometheus: bool,
) -> Result<LatencyPlan, Unsupported> {
    check_latency_features(f)?;
    let mode_of = |scale: Scale| match scale {
        Scale::Log2 => ValueKey::Log2Shifted,
        Scale::Linear { step } if f.buckets => ValueKey::Buckets(step),
        Scale::Linear { .. } => ValueKey::Raw,
    };
    let mode = mode_of(scale);
    // Prometheus' fixed ladder: power-of-two buckets of nanoseconds,
    // whatever the scale and unit of the text
    let prom_mode = ValueKey::Log2Shifted;
    let ev = ProbeEvent {
        system: "synthetic".into(),
        event: String::new(),
        func: p.func.clone(),
        fields: vec![],
        user: false,
    };
    let (kk, slots) = kernel_keys(keys, &ev, f, true)?;
    let value_key = |mode: ValueKey| match mode {
        ValueKey::Log2Shifted => "lat1.log2".to_string(),
        ValueKey::Buckets(step) => format!("lat.buckets={step}"),
        ValueKey::Raw => "lat".to_string(),
    };
    let mut table_keys = kk.clone();
    table_keys.push(value_key(mode));
    if table_keys.len() > f.max_keys {
        return unsupported(format!(
            "the kernel's compound keys have at most {} fields, the latency included",
            f.max_keys
        ));
    }
    let lat = format!("{prefix}_lat");
    let lat1 = format!("{prefix}_lat1");
    let read = if unit == Unit::Ns {
        lat.clone()
    } else {
        lat1.clone()
    };
    let trigger = |event: &str, command: HistCommand| TableRef {
        system: "synthetic".into(),
        event: event.to_string(),
        command: command.to_string(),
    };
    let (main, min) = counting_tables(&read, table_keys);
    let prom = (prometheus && (unit != Unit::Ns || mode != prom_mode)).then(|| {
        let mut k = kk.clone();
        k.push(value_key(prom_mode));
        trigger(
            &lat,
            HistCommand {
                keys: k,
                vals: vec!["hitcount".into(), "lat".into()],
                size: Some(TABLE_SIZE),
                ..Default::default()
            },
        )
    });
    let entry = entry_trigger(p);
    let ret = return_trigger(p, &lat, None);
    let derive = derive_trigger(unit, &lat, &lat1, false);
    // synthetic events, then the tables that count, then the triggers
    // that feed them, from the last link of the chain to the first (a
    // call is measured whole or not at all)
    let mut setup = synthetic_steps(unit, &lat, &lat1, false);
    setup.push(step(&main));
    setup.push(step(&min));
    setup.extend(prom.iter().map(step));
    setup.extend(derive.iter().map(step));
    setup.push(step(&entry));
    setup.push(step(&ret));
    Ok(LatencyPlan {
        plan: KernelPlan { setup },
        read,
        main,
        min,
        prom,
        entry,
        ret,
        derive,
        return_event: (p.system.clone(), p.return_event.clone()),
        unit,
        scale,
        mode,
        prom_mode,
        func: p.func.clone(),
        probe: p.entry_event.clone(),
        keys: keys.iter().map(|k| k.name().to_string()).collect(),
        slots,
        id: None,
    })
}

/// Latency of every function of `ps`, as [`plan_latency`] does for one,
/// with the synthetic events and the counting tables shared: each
/// function keeps its entry and return triggers, its return sends its
/// `id` (its index in `ps`, a constant variable) with the latency, and
/// the tables key on `id` first. The kernel frees each trigger after a
/// grace period (x86_64 7.2 under TCG: tens of ms each, the writer
/// holding `event_mutex`), so for `ktrace latency 'vfs_*'` (80
/// functions) 165 triggers and 2 synthetic events instead of 400 and
/// 160. Where the extra key does not fit the kernel's compound keys
/// (`--by comm` on a kernel of two), or for one function, one
/// [`plan_latency`] per function, its synthetic events named by
/// `prefix(index)`; shared ones are named by `prefix(0)`. The plans come
/// in the order of `ps`; the first holds the shared steps, first in its
/// setup, and carries the shared tables' totals (what they dropped).
#[allow(clippy::too_many_arguments)]
pub fn plan_latencies(
    ps: &[LatencyProbe],
    prefix: &dyn Fn(usize) -> String,
    unit: Unit,
    scale: Scale,
    keys: &[KeySpec],
    f: &Features,
    prometheus: bool,
) -> Result<Vec<LatencyPlan>, Unsupported> {
    let mut plans = Vec::new();
    for (n, p) in ps.iter().enumerate() {
        plans.push(plan_latency(
            p,
            &prefix(n),
            unit,
            scale,
            keys,
            f,
            prometheus,
        )?);
    }
    let Some(first) = plans.first() else {
        return Ok(plans);
    };
    // `id` before the keys and the latency
    let fits = first
        .main
        .command
        .strip_prefix("hist:keys=")
        .and_then(|r| r.split(':').next())
        .is_some_and(|k| k.split(',').count() < f.max_keys);
    if ps.len() < 2 || !fits {
        return Ok(plans);
    }
    let lat = format!("{}_lat", prefix(0));
    let lat1 = format!("{}_lat1", prefix(0));
    let with_id = |t: &TableRef, event: &str| TableRef {
        system: t.system.clone(),
        event: event.to_string(),
        command: t.command.replacen("hist:keys=", "hist:keys=id,", 1),
    };
    let read = if unit == Unit::Ns {
        lat.clone()
    } else {
        lat1.clone()
    };
    let main = with_id(&first.main, &read);
    let min = with_id(&first.min, &read);
    let prom = first.prom.as_ref().map(|t| with_id(t, &lat));
    let derive = derive_trigger(unit, &lat, &lat1, true);
    let mut shared = synthetic_steps(unit, &lat, &lat1, true);
    shared.push(step(&main));
    shared.push(step(&min));
    shared.extend(prom.iter().map(step));
    shared.extend(derive.iter().map(step));
    for (n, (plan, p)) in plans.iter_mut().zip(ps).enumerate() {
        let ret = return_trigger(p, &lat, Some(n));
        let mut setup = if n == 0 {
            std::mem::take(&mut shared)
        } else {
            Vec::new()
        };
        setup.push(step(&plan.entry));
        setup.push(step(&ret));
        plan.plan = KernelPlan { setup };
        plan.read = read.clone();
        plan.main = main.clone();
        plan.min = min.clone();
        plan.prom = prom.clone();
        plan.ret = ret;
        plan.derive = derive.clone();
        plan.id = Some(n as u64);
    }
    Ok(plans)
}

/// What the kernel engine's latency needs of the kernel: hist triggers,
/// synthetic events fired by `onmatch().trace()`, constants in
/// expressions.
fn check_latency_features(f: &Features) -> Result<(), Unsupported> {
    check_hist(f)?;
    if !f.synthetic() || !f.onmatch_trace {
        return unsupported("this kernel has no synthetic events with onmatch().trace()");
    }
    if !f.constants {
        return unsupported(
            "this kernel's hist expressions take no constants, needed for the buckets, the unit \
             and the smallest latency",
        );
    }
    Ok(())
}

/// The install step of a trigger.
fn step(t: &TableRef) -> Step {
    Step::Trigger {
        system: t.system.clone(),
        event: t.event.clone(),
        command: t.command.clone(),
    }
}

/// The tables that count, on `read`: the histogram with the largest
/// latency of each entry (`onmax`), and its twin with the smallest
/// (`onmax` of [`MIN_BASE`] less the latency).
fn counting_tables(read: &str, table_keys: Vec<String>) -> (TableRef, TableRef) {
    let trigger = |command: HistCommand| TableRef {
        system: "synthetic".into(),
        event: read.to_string(),
        command: command.to_string(),
    };
    let main = trigger(HistCommand {
        keys: table_keys.clone(),
        vars: vec!["m=lat".into()],
        vals: vec!["hitcount".into(), "lat".into()],
        size: Some(TABLE_SIZE),
        actions: vec!["onmax($m).save(lat)".into()],
        ..Default::default()
    });
    let min = trigger(HistCommand {
        keys: table_keys,
        vars: vec![format!("n={MIN_BASE}-lat")],
        vals: vec!["hitcount".into()],
        size: Some(TABLE_SIZE),
        actions: vec!["onmax($n).save(lat)".into()],
        ..Default::default()
    });
    (main, min)
}

/// The entry's trigger: its time stamp per thread.
fn entry_trigger(p: &LatencyProbe) -> TableRef {
    TableRef {
        system: p.system.clone(),
        event: p.entry_event.clone(),
        command: HistCommand {
            keys: vec!["common_pid".into()],
            vars: vec!["ts0=common_timestamp".into()],
            ..Default::default()
        }
        .to_string(),
    }
}

/// The return's trigger: the latency since the entry's stamp, and the
/// latency plus one (for log2 buckets that count zero), sent to `lat`;
/// with `id`, the function's number too (tables shared by functions).
fn return_trigger(p: &LatencyProbe, lat: &str, id: Option<usize>) -> TableRef {
    let mut vars = vec![
        "lat=common_timestamp-$ts0".to_string(),
        "lat1=common_timestamp-$ts0+1".to_string(),
    ];
    vars.extend(id.map(|n| format!("id={n}")));
    let id_arg = if id.is_some() { ",$id" } else { "" };
    TableRef {
        system: p.system.clone(),
        event: p.return_event.clone(),
        command: HistCommand {
            keys: vec!["common_pid".into()],
            vars,
            actions: vec![format!(
                "onmatch({}.{}).trace({lat},$lat,$lat1{id_arg})",
                p.system, p.entry_event
            )],
            ..Default::default()
        }
        .to_string(),
    }
}

/// In µs and ms, the trigger on `lat` that divides into `lat1` (passing
/// the function's `id` on when the tables are shared).
fn derive_trigger(unit: Unit, lat: &str, lat1: &str, with_id: bool) -> Option<TableRef> {
    let per = unit.nanos();
    let id_arg = if with_id { ",id" } else { "" };
    (unit != Unit::Ns).then(|| TableRef {
        system: "synthetic".into(),
        event: lat.to_string(),
        command: HistCommand {
            keys: vec!["common_pid".into()],
            vars: vec![format!("l1=lat/{per}+1"), format!("l=lat/{per}")],
            actions: vec![format!(
                "onmatch(synthetic.{lat}).trace({lat1},$l1,$l{id_arg})"
            )],
            ..Default::default()
        }
        .to_string(),
    })
}

/// The synthetic events of the chain: `lat`, and in µs and ms `lat1`
/// (with an `id` field when the tables are shared).
fn synthetic_steps(unit: Unit, lat: &str, lat1: &str, with_id: bool) -> Vec<Step> {
    let id = if with_id { "; u64 id" } else { "" };
    let mut steps = vec![Step::Synthetic {
        name: lat.to_string(),
        fields: format!("u64 lat; u64 lat1{id}"),
    }];
    if unit != Unit::Ns {
        steps.push(Step::Synthetic {
            name: lat1.to_string(),
            fields: format!("u64 lat1; u64 lat{id}"),
        });
    }
    steps
}

/// The smallest and largest value of a key, where known.
type Extremes = (Option<i128>, Option<i128>);

/// The largest and smallest value of each key from the latency tables'
/// `onmax` (`max:` of the main table; [`MIN_BASE`] less `max:` of the min
/// table), over the key's entries (one per bucket).
fn extremes(
    t: &HistTable,
    min: Option<&HistTable>,
    slots: &[Slot],
    func: &str,
    probe: &str,
) -> Result<HashMap<Key, Extremes>> {
    let mut out: HashMap<Key, Extremes> = HashMap::new();
    for (table, is_min) in std::iter::once((t, false)).chain(min.map(|m| (m, true))) {
        for e in &table.entries {
            let key = read_key(slots, &e.keys, func, probe)
                .ok_or_else(|| table_error(table, "keys do not match the plan"))?;
            let Some(m) = e.max else { continue };
            let slot = out.entry(key).or_default();
            if is_min {
                let v = i128::from(MIN_BASE) - i128::from(m);
                slot.0 = Some(slot.0.map_or(v, |x: i128| x.min(v)));
            } else {
                let v = i128::from(m);
                slot.1 = Some(slot.1.map_or(v, |x: i128| x.max(v)));
            }
        }
    }
    Ok(out)
}

/// What the tables carrying each call to a latency histogram dropped
/// because they were full ([`LatencyPlan::entry`], `ret`, `derive`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainDrops {
    /// Entries not stamped: their returns find no stamp.
    pub entry: u64,
    /// Returns not handled.
    pub ret: u64,
    /// Matched calls not converted to the unit.
    pub derive: u64,
}

impl ChainDrops {
    fn total(&self) -> u64 {
        self.entry + self.ret + self.derive
    }
}

impl LatencyPlan {
    /// The table Prometheus reads ([`LatencyPlan::prom`], else the main).
    pub fn prom_table(&self) -> &TableRef {
        self.prom.as_ref().unwrap_or(&self.main)
    }

    /// Whether this plan carries the totals of its tables: a plan with
    /// tables of its own, or the first of those sharing them
    /// ([`plan_latencies`]), so that what a shared table (or the shared
    /// conversion to the unit) dropped is counted once.
    pub fn owns_shared(&self) -> bool {
        self.id.is_none_or(|i| i == 0)
    }

    /// This function's rows of table `t`: all of them, or of a shared
    /// table those keyed by its `id`, that key left out (its hits are
    /// theirs; its dropped count goes with [`LatencyPlan::owns_shared`]).
    fn own_rows<'a>(&self, t: &'a HistTable) -> Cow<'a, HistTable> {
        let Some(id) = self.id else {
            return Cow::Borrowed(t);
        };
        let entries: Vec<HistEntry> = t
            .entries
            .iter()
            .filter(|e| matches!(e.keys.first(), Some((_, KeyText::Num(v))) if *v == id))
            .map(|e| HistEntry {
                keys: e.keys[1..].to_vec(),
                ..e.clone()
            })
            .collect();
        Cow::Owned(HistTable {
            trigger: t.trigger.clone(),
            keys: t.keys.iter().skip(1).cloned().collect(),
            hits: entries.iter().map(HistEntry::hitcount).sum(),
            n_entries: entries.len() as u64,
            dropped: if self.owns_shared() { t.dropped } else { 0 },
            entries,
        })
    }

    /// The triggers that carry each call, in order.
    pub fn chain(&self) -> Vec<&TableRef> {
        let mut v = vec![&self.entry, &self.ret];
        v.extend(self.derive.as_ref());
        v
    }

    /// The report from the histogram table `t`, its min twin, the hits of
    /// the return's trigger in the same span (`None`: unknown), the
    /// kretprobe misses (`kprobe_profile`), and what the chain dropped.
    /// Unmatched returns are the returns handled less the calls that
    /// reached the histogram (counted or dropped there) and less the
    /// entries that could not be stamped (reported as dropped).
    pub fn report(
        &self,
        t: &HistTable,
        min: Option<&HistTable>,
        return_hits: Option<u64>,
        kretprobe_misses: Option<u64>,
        chain_dropped: ChainDrops,
    ) -> Result<LatencyReport> {
        let t = &*self.own_rows(t);
        let min = min.map(|m| self.own_rows(m));
        let min = min.as_deref();
        let mut r = self.report_of(
            t,
            self.unit,
            self.scale,
            self.mode,
            &self.slots,
            &self.keys,
            return_hits,
            kretprobe_misses,
            chain_dropped,
        )?;
        let ex = extremes(t, min, &self.slots, &self.func, &self.probe)?;
        for (key, h) in &mut r.hist.groups {
            if let Some((lo, hi)) = ex.get(key) {
                // both or neither: an extreme of a partial read is not one
                if lo.is_some() && hi.is_some() {
                    h.stats.min = *lo;
                    h.stats.max = *hi;
                }
            }
        }
        Ok(r)
    }

    /// The report for Prometheus: from [`LatencyPlan::prom`]'s table (or
    /// the main one when measuring in ns), keyed by function first.
    pub fn prom_report(
        &self,
        t: &HistTable,
        return_hits: Option<u64>,
        kretprobe_misses: Option<u64>,
        chain_dropped: ChainDrops,
    ) -> Result<LatencyReport> {
        let t = &*self.own_rows(t);
        let (slots, keys) = func_first(&self.slots, &self.keys);
        // the main table when it is in ns and log2 already
        let (unit, scale, mode) = (Unit::Ns, Scale::Log2, self.prom_mode);
        self.report_of(
            t,
            unit,
            scale,
            mode,
            &slots,
            &keys,
            return_hits,
            kretprobe_misses,
            chain_dropped,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn report_of(
        &self,
        t: &HistTable,
        unit: Unit,
        scale: Scale,
        mode: ValueKey,
        slots: &[Slot],
        keys: &[String],
        return_hits: Option<u64>,
        kretprobe_misses: Option<u64>,
        chain: ChainDrops,
    ) -> Result<LatencyReport> {
        let mut hist = HistReport::new("latency", Some(unit), scale, keys.to_vec());
        hist.set_groups(hist_groups(
            t,
            slots,
            &self.func,
            &self.probe,
            mode,
            FieldKind::Unsigned,
            "lat",
            scale,
        )?);
        hist.dropped = t.dropped + chain.total();
        let reached = t.hits + t.dropped + chain.derive + chain.entry;
        Ok(LatencyReport {
            hist,
            unmatched_returns: return_hits.map_or(0, |h| h.saturating_sub(reached)),
            discarded_entries: None,
            backwards: None,
            in_flight: None,
            kretprobe_misses,
        })
    }
}
