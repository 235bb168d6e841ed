//! Property tests: every parser of tracefs text takes any input without
//! panicking, and the session-name parser accepts exactly what it prints.

use ktrace_tracefs::discover::{mount_points, parse_lockdown};
use ktrace_tracefs::instance::parse_choice;
use ktrace_tracefs::owner::parse_start_time;
use ktrace_tracefs::{CpuStats, Features, ProbeKind, SessionName, dynevent, error_log, profile};
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
        let _ = dynevent::split_head(&s);
        let _ = dynevent::kind_of_place(&s);
        let _ = profile::parse(&s, ProbeKind::Kprobe);
        let _ = profile::parse(&s, ProbeKind::Uprobe);
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
        let _ = dynevent::split_head(&s);
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

    #[test]
    fn split_head_round_trips_through_render(
        kind in "(p|r|r[1-9][0-9]{0,2}|e|f|t)",
        group in "[a-z_][a-z0-9_]{0,20}",
        event in "[a-z_][a-z0-9_]{0,20}",
        rest in "[a-z/][a-z0-9_/:.]{0,30}( [a-z]+=%[a-z]+){0,3}",
    ) {
        let def = dynevent::render(&kind, &group, &event, &rest);
        let (h, r) = dynevent::split_head(&def).unwrap();
        prop_assert_eq!(h.kind, kind);
        prop_assert_eq!(h.group.as_deref(), Some(group.as_str()));
        prop_assert_eq!(h.event.as_deref(), Some(event.as_str()));
        prop_assert_eq!(r, rest.as_str());
    }
}
