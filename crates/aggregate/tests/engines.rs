//! Both engines, the same numbers: the kernel engine's plans read the
//! `hist` tables captured on a 6.1 guest (fixtures/guest-x86_64-6.1), and
//! the user engine is fed the same values (taken from the raw-value tables
//! captured in the same run); histograms, counts and sums must be equal,
//! and the rendered rows identical.

use ktrace_aggregate::kernel::{
    ChainDrops, Features, LatencyProbe, ProbeEvent, Step, find_table, plan_count, plan_hist,
    plan_latency,
};
use ktrace_aggregate::khist::{KeyText, parse_hist};
use ktrace_aggregate::render::histogram_text;
use ktrace_aggregate::{
    Aggregation, FieldInfo, FieldKind, HistAgg, KeySpec, KeyValue, LatencyAgg, LatencyPair, Report,
    Sample, Scale, Unit, UserAgg, Value,
};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/guest-x86_64-6.1")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn features() -> Features {
    Features::from_readme(&fixture("README.txt"))
}

fn rd() -> ProbeEvent {
    ProbeEvent {
        system: "ktagg".into(),
        event: "rd".into(),
        func: "ksys_read".into(),
        fields: vec![
            FieldInfo::new("fd", FieldKind::Signed),
            FieldInfo::new("count", FieldKind::Unsigned),
        ],
        user: false,
    }
}

fn rows_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("count "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The raw `keys=lat,lat1` table as latencies.
fn latencies(file: &str) -> Vec<u64> {
    let tables = parse_hist(&fixture(file)).unwrap();
    let t = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=lat,lat1:"))
        .unwrap();
    let mut out = Vec::new();
    for e in &t.entries {
        let KeyText::Num(v) = e.keys[0].1 else {
            panic!()
        };
        for _ in 0..e.hitcount() {
            out.push(v);
        }
    }
    out
}

#[test]
fn latency_log2_kernel_equals_user() {
    for (file, unit, scale_ns) in [
        ("lat1.hist", Unit::Us, 1000u64),
        ("latns.hist", Unit::Ns, 1),
    ] {
        let f = features();
        let probe = LatencyProbe {
            system: "ktagg".into(),
            entry_event: "ns".into(),
            return_event: "nsret".into(),
            func: "hrtimer_nanosleep".into(),
        };
        let plan = plan_latency(&probe, "ktagg", unit, Scale::Log2, &[], &f, false).unwrap();
        let tables = parse_hist(&fixture(file)).unwrap();
        // (captured with the histogram alone: no min twin, no onmax)
        let table = find_table(&tables, &plan.main.command).expect("our table");
        let kernel = plan
            .report(table, None, Some(12), Some(0), ChainDrops::default())
            .unwrap();

        let pair = LatencyPair {
            func: "hrtimer_nanosleep".into(),
            entry_event: "e".into(),
            return_event: "r".into(),
        };
        let mut user = LatencyAgg::new(vec![pair], unit, Scale::Log2, vec![]);
        for (i, lat) in latencies(file).iter().enumerate() {
            let tid = i as u32;
            let s = |event, ts| Sample {
                ts_ns: ts,
                cpu: 0,
                pid: tid,
                tid,
                comm: "usleep",
                event,
                func: None,
                stack: None,
                fields: &[],
            };
            user.add(&s("e", 0));
            user.add(&s("r", lat * scale_ns));
        }
        let user = user.report();
        let (kh, uh) = (&kernel.hist.groups[0].1, &user.hist.groups[0].1);
        assert_eq!(kh.buckets, uh.buckets, "{file}");
        assert_eq!(
            (kh.stats.count, kh.stats.sum),
            (uh.stats.count, uh.stats.sum),
            "{file}"
        );
        assert_eq!(kh.stats.count, 12);
        assert_eq!(kernel.unmatched_returns, 0);
        let (mut a, mut b) = (String::new(), String::new());
        histogram_text(&mut a, kh, Some(unit), 40);
        histogram_text(&mut b, uh, Some(unit), 40);
        assert_eq!(rows_only(&a), rows_only(&b), "{file}");
    }
}

#[test]
fn hist_of_read_sizes_raw_and_buckets() {
    let f = features();
    let tables = parse_hist(&fixture("rd.hist")).unwrap();
    // the raw-value table of the same run, with the filter fd == 0
    let raw = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=count:"))
        .unwrap();
    let mut user_log2 = HistAgg::new("count", Scale::Log2, vec![]);
    let mut user_lin = HistAgg::new("count", Scale::Linear { step: 512 }, vec![]);
    for e in &raw.entries {
        let KeyText::Num(v) = e.keys[0].1 else {
            panic!()
        };
        let fields = [("fd", Value::S64(0)), ("count", Value::U64(v))];
        for _ in 0..e.hitcount() {
            let s = Sample {
                ts_ns: 0,
                cpu: 0,
                pid: 1,
                tid: 1,
                comm: "dd",
                event: "ktagg/rd",
                func: None,
                stack: None,
                fields: &fields,
            };
            user_log2.add(&s);
            user_lin.add(&s);
        }
    }
    // log2: the kernel engine keys on the raw value
    let plan = plan_hist(&rd(), "count", Scale::Log2, &[], &f, false)
        .unwrap()
        .unwrap();
    let kernel = plan.report(raw).unwrap();
    assert_eq!(kernel.groups, user_log2.report().groups);
    let h = &kernel.groups[0].1;
    // dd: 7 x 1, 100 x 1000, 50 x 4096 (+2 other reads of 4096), 3 x 65536 (+5)
    let want: Vec<(i128, u64)> = vec![(1, 7), (10, 100), (13, 52), (17, 8)];
    assert_eq!(
        h.buckets.iter().map(|(a, b)| (*a, *b)).collect::<Vec<_>>(),
        want
    );
    assert_eq!((h.stats.min, h.stats.max), (Some(1), Some(65536)));
    // linear: .buckets=512 in the kernel
    let plan = plan_hist(&rd(), "count", Scale::Linear { step: 512 }, &[], &f, false)
        .unwrap()
        .unwrap();
    let table = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=count.buckets=512:"))
        .unwrap();
    let kernel = plan.report(table).unwrap();
    let (kh, uh) = (&kernel.groups[0].1, &user_lin.report().groups[0].1);
    assert_eq!(kh.buckets, uh.buckets);
    assert_eq!(
        (kh.stats.count, kh.stats.sum),
        (uh.stats.count, uh.stats.sum)
    );
}

#[test]
fn hist_of_signed_return_values() {
    let f = features();
    let tables = parse_hist(&fixture("rdret.hist")).unwrap();
    let ev = ProbeEvent {
        event: "rdret".into(),
        fields: vec![FieldInfo::new("ret", FieldKind::Signed)],
        ..rd()
    };
    let plan = plan_hist(&ev, "ret", Scale::Log2, &[], &f, false)
        .unwrap()
        .unwrap();
    let raw = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=ret:"))
        .unwrap();
    let r = plan.report(raw).unwrap();
    let h = &r.groups[0].1;
    // five reads of a closed stdin returned -EBADF
    assert_eq!(h.buckets.get(&-1), Some(&5));
    assert_eq!(h.stats.min, Some(-9));
}

#[test]
fn count_by_comm_merges_threads() {
    let f = features();
    let tables = parse_hist(&fixture("rd.hist")).unwrap();
    let plan = plan_count(&[rd()], &[KeySpec::Comm], &f, None).unwrap();
    let t = &tables[0];
    assert!(t.trigger.starts_with("hist:keys=common_pid.execname:"));
    let r = plan.report(&[t]).unwrap();
    assert_eq!(r.rows[0], (vec![KeyValue::Str("dd".into())], 160));
    assert_eq!(r.total, t.hits);
    // by comm and cpu, through the compound key
    let plan = plan_count(&[rd()], &[KeySpec::Comm, KeySpec::Cpu], &f, None).unwrap();
    let Step::Trigger { command, .. } = &plan.plan.setup[0] else {
        panic!()
    };
    let t = find_table(&tables, command).unwrap();
    let r = plan.report(&[t]).unwrap();
    let dd: Vec<&(Vec<KeyValue>, u64)> = r
        .rows
        .iter()
        .filter(|r| r.0[0] == KeyValue::Str("dd".into()))
        .collect();
    assert!(dd.len() <= 2, "{dd:?}");
    assert_eq!(dd.iter().map(|r| r.1).sum::<u64>(), 160);
    assert!(dd.iter().all(|r| matches!(r.0[1], KeyValue::U64(0 | 1))));
    // by func and tid
    let plan = plan_count(&[rd()], &[KeySpec::Func, KeySpec::Tid], &f, None).unwrap();
    let r = plan.report(&[&tables[0]]).unwrap();
    let KeyText::Execname { comm, pid } = &tables[0].entries[0].keys[0].1 else {
        panic!()
    };
    assert_eq!(comm, "dd");
    assert_eq!(
        r.rows[0],
        (
            vec![KeyValue::Str("ksys_read".into()), KeyValue::U64(*pid)],
            100
        )
    );
    // by stack
    let plan = plan_count(&[rd()], &[KeySpec::Stack], &f, None).unwrap();
    let st = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=stacktrace:"))
        .unwrap();
    let r = plan.report(&[st]).unwrap();
    let KeyValue::Stack(frames) = &r.rows[0].0[0] else {
        panic!()
    };
    assert!(frames.iter().any(|f| f.starts_with("ksys_read+")));
}

/// The lines of metric family `name` (its samples, not its comments).
fn family<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(name)).collect()
}

/// The `le` bounds of the series whose labels start with `labels`.
fn les<'a>(lines: &[&'a str], labels: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|l| l.contains(&format!("_bucket{{{labels}")))
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect()
}

/// Regression (issue 21 item 8): Prometheus got the scale of the text
/// (linear buckets: a ladder from 0 to the highest bucket seen, which grows
/// during a run) and series labelled by function only. Both engines now
/// serve the same text: power-of-two buckets on the whole fixed ladder
/// (latency in nanoseconds), every series labelled with its probe and its
/// function, whatever `--linear`.
#[test]
fn prometheus_text_is_the_same_from_both_engines() {
    let f = features();
    // a field's histogram with --linear 512: the kernel engine reads a
    // raw-value table for Prometheus
    let tables = parse_hist(&fixture("rd.hist")).unwrap();
    let plan = plan_hist(&rd(), "count", Scale::Linear { step: 512 }, &[], &f, true)
        .unwrap()
        .unwrap();
    let prom = plan.prom.as_ref().expect("a table for Prometheus");
    assert_eq!(
        prom.command,
        "hist:keys=count:vals=hitcount,count:size=8192"
    );
    assert_eq!(plan.plan.setup.len(), 2);
    let raw = find_table(&tables, &prom.command).unwrap();
    assert!(
        raw.trigger.starts_with("hist:keys=count:"),
        "{}",
        raw.trigger
    );
    let kernel = Report::Hist(plan.prom_report(raw).unwrap()).prometheus(Some("count"));
    let mut user = UserAgg::new(
        Aggregation::Hist {
            field: "count",
            scale: Scale::Linear { step: 512 },
        },
        vec![],
        &[],
        8192,
        true,
    );
    for e in &raw.entries {
        let KeyText::Num(v) = e.keys[0].1 else {
            panic!()
        };
        let fields = [("fd", Value::S64(0)), ("count", Value::U64(v))];
        for _ in 0..e.hitcount() {
            user.add(&Sample {
                ts_ns: 0,
                cpu: 0,
                pid: 1,
                tid: 1,
                comm: "dd",
                event: "ktagg/rd",
                func: Some("ksys_read"),
                stack: None,
                fields: &fields,
            });
        }
    }
    let user = user.report(None).prometheus(Some("count"));
    assert_eq!(kernel, user);
    let lines = family(&kernel, "ktrace_count_");
    let series = "probe=\"rd\",func=\"ksys_read\",";
    let ladder = les(&lines, series);
    // -1, 0, then [2^k, 2^(k+1)) for k = 0..63, then +Inf
    assert_eq!(ladder.len(), 66 + 1, "{kernel}");
    assert_eq!(ladder[..4], ["-1", "0", "1", "3"]);
    assert!(
        kernel.contains("ktrace_count_bucket{probe=\"rd\",func=\"ksys_read\",le=\"1023\"} 107\n"),
        "{kernel}"
    );

    // latency with --linear 1000 (ns): a log2 table of nanoseconds
    let probe = LatencyProbe {
        system: "ktagg".into(),
        entry_event: "ns".into(),
        return_event: "nsret".into(),
        func: "hrtimer_nanosleep".into(),
    };
    let plan = plan_latency(
        &probe,
        "ktagg",
        Unit::Us,
        Scale::Linear { step: 1000 },
        &[],
        &f,
        true,
    )
    .unwrap();
    let prom = plan.prom_table();
    assert_eq!(
        prom.command,
        "hist:keys=lat1.log2:vals=hitcount,lat:size=8192"
    );
    let tables = parse_hist(&fixture("latns.hist")).unwrap();
    let table = find_table(&tables, &prom.command).expect("our table");
    let kernel = plan
        .prom_report(table, Some(12), None, ChainDrops::default())
        .unwrap();
    let kernel = Report::Latency(kernel).prometheus(None);
    let pair = LatencyPair {
        func: "hrtimer_nanosleep".into(),
        entry_event: "ktagg/ns".into(),
        return_event: "ktagg/nsret".into(),
    };
    let mut user = UserAgg::new(
        Aggregation::Latency {
            scale: Scale::Linear { step: 1000 },
            unit: Unit::Us,
        },
        vec![pair],
        &[],
        8192,
        true,
    );
    for (i, lat) in latencies("latns.hist").iter().enumerate() {
        let tid = i as u32;
        let s = |event, ts| Sample {
            ts_ns: ts,
            cpu: 0,
            pid: tid,
            tid,
            comm: "usleep",
            event,
            func: Some("hrtimer_nanosleep"),
            stack: None,
            fields: &[],
        };
        user.add(&s("ktagg/ns", 0));
        user.add(&s("ktagg/nsret", *lat));
    }
    let user = user.report(None).prometheus(None);
    let (k, u) = (
        family(&kernel, "ktrace_latency_seconds"),
        family(&user, "ktrace_latency_seconds"),
    );
    assert_eq!(k, u);
    let ladder = les(&k, "probe=\"ns\",func=\"hrtimer_nanosleep\",");
    assert_eq!(ladder.len(), 65 + 1, "{kernel}");
    assert_eq!(
        ladder[..4],
        ["0", "0.000000001", "0.000000003", "0.000000007"]
    );
    assert!(
        kernel
            .contains("ktrace_latency_seconds_count{probe=\"ns\",func=\"hrtimer_nanosleep\"} 12\n"),
        "{kernel}"
    );
}
