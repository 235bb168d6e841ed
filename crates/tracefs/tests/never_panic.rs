//! Property tests: every parser of tracefs text takes any input without
//! panicking, and the session-name parser accepts exactly what it prints.

use ktrace_tracefs::discover::{mount_points, parse_lockdown};
use ktrace_tracefs::instance::parse_choice;
use ktrace_tracefs::owner::parse_start_time;
use ktrace_tracefs::{CpuStats, Features, ProbeFile, SessionName, dynevent, error_log, profile};
use proptest::prelude::*;

/// Text made of the characters tracefs files are made of, so the parsers'
/// interesting paths are reached often.
fn tracefs_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r"[\[\]\(\) :/_a-z0-9\.\^\n\t%\-+=$]{0,200}").unwrap()
}

proptest! {
    #[test]
    fn parsers_never_panic(s in tracefs_text()) {
        let _ = error_log::parse(&s);
        let _ = dynevent::parse_list(&s);
        let _ = profile::parse(&s, ProbeFile::KprobeEvents);
        let _ = profile::parse(&s, ProbeFile::UprobeEvents);
        let _ = Features::from_readme(&s);
        let _ = CpuStats::parse(&s);
        let _ = parse_start_time(&s);
        let _ = SessionName::parse(&s);
        let _ = mount_points(&s, "tracefs");
        let _ = parse_lockdown(&s);
        let _ = parse_choice(&s);
    }

    #[test]
    fn any_str_never_panics(s in any::<String>()) {
        let _ = error_log::parse(&s);
        let _ = SessionName::parse(&s);
        let _ = parse_start_time(&s);
    }

    #[test]
    // pid_max is at most 2^22 and a namespace inode is an unsigned int, so
    // even extreme names stay under the kernel's 64-byte group name limit.
    fn session_names_round_trip(
        pid in 1u32..=4_194_304,
        start in any::<u64>(),
        pidns in 0..=u64::from(u32::MAX),
        seq in any::<u32>(),
    ) {
        let n = SessionName { pid, start, pidns, seq };
        let text = n.to_string();
        prop_assert!(text.len() < 64);
        prop_assert_eq!(SessionName::parse(&text), Some(n));
    }
}
