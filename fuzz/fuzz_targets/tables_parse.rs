//! The other text tables ktrace reads from the kernel must parse or fail,
//! never panic nor hang: the kprobe blacklist, the ftrace function lists
//! (`available_filter_functions[_addrs]`), a CPU's `stats`, the tracefs
//! `error_log`, README features, `dynamic_events`, `kprobe_profile` and
//! choice files, the definitions `ktrace list` reads back, and wildcard
//! expansion over a kallsyms table built from the same text.
#![no_main]
use ktrace_symbols::probeable::{self, FtraceLocations, Rules};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // the first 16 KiB: enough for every structure, fast enough to fuzz
    let text = String::from_utf8_lossy(&data[..data.len().min(16 << 10)]);
    let bl = ktrace_symbols::blacklist::parse(&text).unwrap_or_default();
    let ft = FtraceLocations::parse(&text);
    if let Ok(ks) = ktrace_symbols::kallsyms::Kallsyms::parse(&text) {
        let rules = Rules {
            blacklist: Some(&bl),
            ftrace: Some(&ft),
            notrace_refused: true,
            refused_areas: probeable::ARM_REFUSED_AREAS,
        };
        for pat in ["vfs_*", "a*b*c", "[mod]:*", "*_read"] {
            let _ = probeable::expand(&ks, &rules, pat);
        }
    }
    let _ = ktrace_tracefs::CpuStats::parse(&text);
    let _ = ktrace_tracefs::error_log::parse(&text);
    let _ = ktrace_tracefs::features::Features::from_readme(&text);
    let _ = ktrace_tracefs::dynevent::parse_list(&text);
    let _ = ktrace_tracefs::profile::parse(&text, ktrace_tracefs::ProbeFile::KprobeEvents);
    let _ = ktrace_tracefs::instance::parse_choice(&text);
    // a definition per line is checked in full: the first 64 lines
    for line in text.lines().take(64) {
        let _ = ktrace_probe::parse_listed(line);
    }
});
