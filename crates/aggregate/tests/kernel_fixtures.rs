//! The parser against `hist` files captured from a real 6.1 x86_64 guest
//! (fixtures/guest-x86_64-6.1, captured by fixtures/capture-hist.sh; see
//! fixtures/README.md): exact values known from the workload, and the
//! byte-exact round trip through `write_hist`.

use ktrace_aggregate::khist::{KeyText, parse_hist, parse_kprobe_profile, write_hist};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/guest-x86_64-6.1")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_fixture_round_trips() {
    for name in [
        "rd.hist",
        "rdret.hist",
        "lat.hist",
        "lat1.hist",
        "latns.hist",
        "ns.hist",
        "nsret.hist",
    ] {
        let text = fixture(name);
        let tables = parse_hist(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!tables.is_empty(), "{name}");
        for t in &tables {
            assert_eq!(t.entries.len() as u64, t.n_entries, "{name}: {}", t.trigger);
        }
        assert_eq!(write_hist(&tables), text, "{name}");
    }
}

#[test]
fn read_sizes_of_dd() {
    // dd bs=1000 count=100, bs=4096 count=50, bs=1 count=7, bs=65536 count=3
    let tables = parse_hist(&fixture("rd.hist")).unwrap();
    let log2 = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=count.log2:"))
        .unwrap();
    let got: Vec<(KeyText, u64, Option<u64>)> = log2
        .entries
        .iter()
        .map(|e| (e.keys[0].1.clone(), e.hitcount(), e.val("count")))
        .collect();
    // the kernel rounds up: 1000 is 2^10, 4096 is 2^12, 1 is 2^0
    assert_eq!(got[0], (KeyText::Log2(0), 7, Some(7)));
    assert_eq!(got[1], (KeyText::Log2(10), 100, Some(100_000)));
    assert_eq!(got[2].0, KeyText::Log2(12));
    let raw = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=count:"))
        .unwrap();
    assert!(
        raw.entries
            .iter()
            .any(|e| e.keys[0].1 == KeyText::Num(1000) && e.hitcount() == 100)
    );
    let buckets = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=count.buckets=512:"))
        .unwrap();
    assert_eq!(buckets.entries[1].keys[0].1, KeyText::Bucket(512));
    assert_eq!(buckets.entries[1].hitcount(), 100);
    let comm = &tables[0];
    let dd: u64 = comm
        .entries
        .iter()
        .filter(|e| matches!(&e.keys[0].1, KeyText::Execname { comm, .. } if comm == "dd"))
        .map(|e| e.hitcount())
        .sum();
    assert_eq!(dd, 160);
    let stack = tables
        .iter()
        .find(|t| t.trigger.starts_with("hist:keys=stacktrace:"))
        .unwrap();
    let KeyText::Stack(frames) = &stack.entries[0].keys[0].1 else {
        panic!("no stack")
    };
    assert!(
        frames.iter().any(|f| f.starts_with("ksys_read+")),
        "{frames:?}"
    );
}

#[test]
fn negative_return_values_print_as_u64() {
    let tables = parse_hist(&fixture("rdret.hist")).unwrap();
    let raw = &tables[0];
    // five reads of a closed stdin: -EBADF (-9)
    let ebadf = raw
        .entries
        .iter()
        .find(|e| e.keys[0].1 == KeyText::Num(-9i64 as u64))
        .unwrap();
    assert_eq!(ebadf.hitcount(), 5);
    assert_eq!(ebadf.val("ret"), Some((-45i64) as u64));
    // the kernel's log2 of a negative value is 2^64
    assert!(
        tables[1]
            .entries
            .iter()
            .any(|e| e.keys[0].1 == KeyText::Log2(64))
    );
}

#[test]
fn latency_lat1_is_lat_plus_one() {
    for name in ["lat1.hist", "latns.hist"] {
        let tables = parse_hist(&fixture(name)).unwrap();
        let pairs = tables
            .iter()
            .find(|t| t.trigger.starts_with("hist:keys=lat,lat1:"))
            .unwrap();
        assert_eq!(pairs.entries.len(), 12, "{name}");
        for e in &pairs.entries {
            let (KeyText::Num(lat), KeyText::Num(lat1)) = (&e.keys[0].1, &e.keys[1].1) else {
                panic!()
            };
            assert_eq!(*lat1, lat + 1, "{name}");
        }
    }
}

#[test]
fn kretprobe_misses_in_kprobe_profile() {
    let p = parse_kprobe_profile(&fixture("kprobe_profile.lat.txt")).unwrap();
    let r1 = p.iter().find(|l| l.event == "nsret1").unwrap();
    // maxactive 1, four concurrent sleepers (and whatever else slept then):
    // one return traced, the others missed
    assert_eq!(r1.hits, 1);
    assert!(r1.misses >= 3, "{r1:?}");
    let r = p.iter().find(|l| l.event == "nsret").unwrap();
    assert_eq!(r.misses, 0);
}

#[test]
fn damaged_fixtures_never_panic() {
    // every prefix, every line removed, every line doubled: an error or
    // tables, never a panic; what parses writes back and parses the same
    for name in ["rd.hist", "lat1.hist"] {
        let text = fixture(name);
        let check = |t: &str| {
            if let Ok(tables) = parse_hist(t) {
                assert_eq!(parse_hist(&write_hist(&tables)).unwrap(), tables);
            }
        };
        for (i, _) in text.char_indices().step_by(7) {
            check(&text[..i]);
        }
        let lines: Vec<&str> = text.lines().collect();
        for i in 0..lines.len() {
            let mut v = lines.clone();
            v.remove(i);
            check(&v.join("\n"));
            let mut v = lines.clone();
            v.insert(i, lines[i]);
            check(&v.join("\n"));
        }
    }
}
