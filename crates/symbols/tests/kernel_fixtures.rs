//! The probe-able rules against a real kernel's verdicts: for every text
//! symbol of a kallsyms window captured from Debian's 6.1 cloud kernel, the
//! kernel was asked to take a kprobe (tests/kernel/guest/55-symbols.sh); our rules,
//! fed the same boot's blacklist and available_filter_functions, must give
//! the same answer for each one. The kernel was built without
//! CONFIG_KPROBE_EVENTS_ON_NOTRACE (its config says "is not set").

use ktrace_symbols::blacklist;
use ktrace_symbols::kallsyms::Kallsyms;
use ktrace_symbols::probeable::{self, Exclusion, FtraceLocations, Rules};

fn fixture(name: &str) -> String {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn rules_agree_with_the_6_1_kernel_on_every_window_symbol() {
    // 6.1 has no available_filter_functions_addrs: the by-name rule.
    window_agrees("6.1", "available_filter_functions");
}

#[test]
fn rules_agree_with_the_6_12_kernel_on_every_window_symbol() {
    // 6.12: ftrace locations by address, __pfx_ preambles, the range rule.
    window_agrees("6.12", "available_filter_functions_addrs");
}

fn window_agrees(ver: &str, ftrace_file: &str) {
    let ks = Kallsyms::parse(fixture(&format!("kallsyms-{ver}-x86_64-window.txt"))).unwrap();
    let bl = blacklist::parse(&fixture(&format!("kprobes-blacklist-{ver}-x86_64.txt"))).unwrap();
    let ft = FtraceLocations::parse(&fixture(&format!("{ftrace_file}-{ver}-x86_64-window.txt")));
    let rules = Rules {
        blacklist: Some(&bl),
        ftrace: Some(&ft),
        notrace_refused: true,
        refused_areas: &[],
    };
    let verdicts = fixture(&format!("kprobe-verdicts-{ver}-x86_64-window.txt"));
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    let mut wrong = Vec::new();
    for line in verdicts.lines() {
        let (name, verdict) = line.split_once(' ').unwrap();
        // The window's own line for the name (the first one in table order).
        let sym = ks.by_name(name, None)[0];
        let ours = probeable::check(&ks, &rules, sym, false);
        let kernel_accepts = verdict == "accepted";
        let key = match &ours {
            None => "accepted".to_string(),
            Some(Exclusion::Blacklisted(_)) => "blacklisted".to_string(),
            Some(e) => format!("{e:?}").split('(').next().unwrap().to_string(),
        };
        *tally
            .entry(format!("{key} / kernel {verdict}"))
            .or_default() += 1;
        if ours.is_none() != kernel_accepts {
            wrong.push(format!("{name}: kernel {verdict}, ours {ours:?}"));
        }
    }
    eprintln!("{ver}: {tally:#?}");
    assert!(verdicts.lines().count() >= 200);
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // The window exercises every rule the 6.1 kernel has.
    for k in [
        "accepted / kernel accepted",
        "blacklisted / kernel refused",
        "Notrace / kernel refused",
    ] {
        assert!(tally.contains_key(k), "no case of {k}");
    }
}

#[test]
fn rules_agree_with_the_6_1_kernel_on_a_sample_of_every_reason() {
    sample_agrees("6.1", "x86_64", "available_filter_functions");
    sample_agrees("6.1", "arm64", "available_filter_functions");
    sample_agrees("6.12", "x86_64", "available_filter_functions_addrs");
}

fn sample_agrees(ver: &str, arch: &str, ftrace_file: &str) {
    // The same boot's tables, cut down to the sampled names (6.1: by name;
    // 6.12: by address, with each symbol's next line kept for its size).
    let ks = Kallsyms::parse(fixture(&format!("kallsyms-{ver}-{arch}-sample.txt"))).unwrap();
    let bl = blacklist::parse(&fixture(&format!("kprobes-blacklist-{ver}-{arch}.txt"))).unwrap();
    let ft = FtraceLocations::parse(&fixture(&format!("{ftrace_file}-{ver}-{arch}-sample.txt")));
    let rules = Rules {
        blacklist: Some(&bl),
        ftrace: Some(&ft),
        notrace_refused: true,
        refused_areas: &[],
    };
    let mut tally = std::collections::BTreeMap::<String, usize>::new();
    let mut wrong = Vec::new();
    for line in fixture(&format!("kprobe-verdicts-{ver}-{arch}-sample.txt")).lines() {
        let name = line.rsplit(' ').next().unwrap();
        // "accepted ok f" / "excluded(notrace) ok f": the kernel agreed with
        // what ktrace list said in the guest; REFUSED/TAKEN would be a
        // disagreement recorded there.
        let kernel_accepts = match (line.starts_with("accepted"), line.contains(" ok ")) {
            (true, true) | (false, false) => true,
            (true, false) | (false, true) => false,
        };
        let sym = ks.by_name(name, None)[0];
        let ours = probeable::check(&ks, &rules, sym, false);
        let reason = line.split(' ').next().unwrap().to_string();
        *tally.entry(reason).or_default() += 1;
        if ours.is_none() != kernel_accepts {
            wrong.push(format!("{line}: ours {ours:?}"));
        }
        if let Some(Exclusion::NotUnique(n)) = ours {
            assert_eq!(n, ks.by_name(name, None).len());
        }
    }
    eprintln!("{tally:#?}");
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        tally.get("excluded(not") >= Some(&20),
        "not-unique cases: {tally:?}"
    );
}

#[test]
fn real_blacklist_parses_and_covers_its_own_names() {
    for arch in ["x86_64", "arm64"] {
        let bl = blacklist::parse(&fixture(&format!("kprobes-blacklist-6.1-{arch}.txt"))).unwrap();
        assert!(bl.len() > 100);
        assert!(bl.iter().all(|e| e.start != 0 && e.end > e.start));
    }
}

#[test]
fn sym_off_size_matches_what_the_6_1_kernel_printed() {
    for (ver, arch) in [("6.1", "x86_64"), ("6.1", "arm64"), ("6.12", "x86_64")] {
        sym_off_size(ver, arch);
    }
}

fn sym_off_size(ver: &str, arch: &str) {
    let ks = Kallsyms::parse(fixture(&format!("kallsyms-{ver}-{arch}-stack.txt"))).unwrap();
    let trace = fixture(&format!("kernel-stack-{ver}-{arch}.txt"));
    let mut compared = 0;
    for word in trace.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        // SYM+0xOFF/0xSIZE as the kernel printed it.
        let Some((sym, rest)) = word.split_once('+') else {
            continue;
        };
        let Some((off, _size)) = rest.split_once('/') else {
            continue;
        };
        let off = u64::from_str_radix(off.trim_start_matches("0x"), 16).unwrap();
        let s = ks.by_name(sym, None)[0];
        let ours = ks.lookup(s.addr + off).unwrap().to_kernel_string();
        assert_eq!(ours, word);
        compared += 1;
    }
    eprintln!("{ver} {arch}: {compared} kernel-printed addresses reproduced");
    assert!(compared >= 5);
}

#[test]
fn module_symbols_print_and_scope_like_the_6_1_kernel() {
    let ks = Kallsyms::parse(fixture("kallsyms-6.1-x86_64-module-dummy.txt")).unwrap();
    let trace = fixture("kernel-trace-6.1-x86_64-module-dummy.txt");
    // "(dummy_xmit+0x0/0x70 [dummy])" as the kernel printed the kprobe's ip.
    let printed = trace
        .lines()
        .find_map(|l| {
            l.split_once("xmit: (")
                .map(|(_, r)| r.trim_end_matches(')'))
        })
        .unwrap();
    let sym = ks.by_name("dummy_xmit", Some("dummy"))[0];
    assert_eq!(ks.lookup(sym.addr).unwrap().to_kernel_string(), printed);
    // Every function the kernel accepted as dummy:NAME is one symbol in
    // its module (MOD:SYM uniqueness is counted in the module only).
    let mut accepted = 0;
    let raw = std::fs::read_to_string(format!(
        "{}/tests/fixtures/kernel-trace-6.1-x86_64-module-dummy.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for line in raw.lines() {
        if let Some(rest) = line.strip_prefix("# verdict: accepted ok dummy:") {
            assert_eq!(ks.count_same(rest, Some("dummy")), 1, "{rest}");
            let s = ks.by_name(rest, Some("dummy"))[0];
            assert!(s.is_text());
            assert_eq!(
                probeable::check(&ks, &Rules::default(), s, true),
                None,
                "{rest}"
            );
            accepted += 1;
        }
    }
    assert!(accepted >= 5);
}

/// Two kallsyms parsers stay (see ktrace_probe::env::Kallsyms): on the
/// kernel's own lines — every captured table, module symbols included —
/// the probe crate's offline counts are the kernel view's, name by name.
#[test]
fn offline_kallsyms_counts_agree_with_the_kernel_views() {
    use ktrace_probe::Environment;
    for name in [
        "kallsyms-6.1-x86_64-window.txt",
        "kallsyms-6.1-x86_64-module-dummy.txt",
        "kallsyms-6.1-arm64-sample.txt",
        "kallsyms-6.12-x86_64-window.txt",
        "kallsyms-6.18-x86_64-dups.txt",
        "kallsyms-6.18-x86_64-vfs.txt",
    ] {
        let text = fixture(name);
        let view = Kallsyms::parse(&text).unwrap();
        let offline = ktrace_probe::Kallsyms::parse(&text);
        assert_eq!(offline.len(), view.symbols().len(), "{name}");
        for s in view.symbols() {
            assert_eq!(
                offline.symbol_count(&s.name),
                Some(view.count_same(&s.name, None)),
                "{name}: {}",
                s.name
            );
            if let Some(m) = &s.module {
                assert_eq!(
                    offline.module_symbol(m, &s.name),
                    Some(Some(true)),
                    "{name}: {m}:{}",
                    s.name
                );
            }
        }
    }
}
