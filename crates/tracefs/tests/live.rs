//! Live tests against the host's real tracefs (uprobes on /bin/true).
//! They need root; without it they print a loud SKIP and pass.

use std::fs;
use std::path::{Path, PathBuf};

use ktrace_tracefs::{
    DynEvents, ErrorKind, Instance, NewEvent, ProbeFile, SessionName, discover, owner, profile,
};

/// A uprobe `GROUP/EVENT` on /bin/true with `rest` after the place.
fn uprobe(group: &str, event: &str, place_and_args: String) -> NewEvent {
    NewEvent {
        group: group.to_string(),
        event: event.to_string(),
        file: ProbeFile::UprobeEvents,
        line: format!("p:{group}/{event} {place_and_args}"),
    }
}

fn root() -> Option<PathBuf> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP: live tracefs tests need root");
        return None;
    }
    Some(discover::find_or_mount().expect("tracefs"))
}

/// File offset of the entry point of /bin/true: a place every uprobe accepts.
fn true_offset() -> u64 {
    let out = std::process::Command::new("readelf")
        .args(["-h", "/bin/true"])
        .output()
        .expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Entry point address"))
        .expect("entry");
    let hex = line.rsplit("0x").next().unwrap().trim();
    // /bin/true is PIE with its text mapped at file offset == vaddr.
    u64::from_str_radix(hex, 16).unwrap()
}

/// Tears the named session down even when an assertion fails.
struct Guard(PathBuf, String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = owner::teardown(&self.0, &self.1);
    }
}

fn snapshot(root: &Path, name: &str) -> (String, Vec<String>) {
    let dynev = fs::read_to_string(root.join("dynamic_events")).unwrap();
    let mut inst: Vec<String> = fs::read_dir(root.join("instances"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    inst.sort();
    // Only this test's session: other tests run at the same time.
    let group = format!(":{name}/");
    (
        dynev
            .lines()
            .filter(|l| l.contains(&group))
            .collect::<Vec<_>>()
            .join("\n"),
        inst.into_iter().filter(|s| s == name).collect(),
    )
}

#[test]
fn rejected_second_definition_leaves_nothing_and_has_caret() {
    let Some(root) = root() else { return };
    let name = SessionName::for_this_process().unwrap().to_string();
    let _guard = Guard(root.clone(), name.clone());
    let before = snapshot(&root, &name);
    let off = true_offset();
    let defs = vec![
        uprobe(&name, "one", format!("/bin/true:{off:#x}")),
        uprobe(&name, "two", format!("/bin/true:{off:#x} a=%nosuchreg")),
        uprobe(&name, "three", format!("/bin/true:{off:#x}")),
    ];
    let err = DynEvents::new(&root).create(&defs).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    let entry = err.kernel_entry().expect("error_log entry attached");
    assert_eq!(entry.message, "Invalid register name");
    let caret = entry.caret.expect("caret");
    assert_eq!(&entry.command[caret..], "%nosuchreg");
    assert!(err.to_string().contains("^"), "{err}");
    assert_eq!(snapshot(&root, &name), before, "session {name}");
}

#[test]
fn filter_and_trigger_errors_come_from_the_instance_log() {
    let Some(root) = root() else { return };
    let name = SessionName::for_this_process().unwrap().to_string();
    let _guard = Guard(root.clone(), name.clone());
    let off = true_offset();
    DynEvents::new(&root)
        .create(&[uprobe(&name, "ev", format!("/bin/true:{off:#x} x=%ax"))])
        .unwrap();
    let inst = Instance::create(&root, &name).unwrap();
    let err = inst.set_filter(&name, "ev", "x == ").unwrap_err();
    let entry = err.kernel_entry().expect("filter error_log entry");
    assert!(
        entry.message.contains("Missing operand") || !entry.message.is_empty(),
        "{entry:?}"
    );
    assert!(err.to_string().contains('^'), "{err}");
    inst.set_filter(&name, "ev", "x == 1").unwrap();
    let err = inst.add_trigger(&name, "ev", "nosuchtrigger").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    inst.add_trigger(&name, "ev", "traceoff").unwrap();
    inst.set_enabled(&name, Some("ev"), true).unwrap();
    inst.set_buffer_size_kb(64).unwrap();
    // The kernel rounds up to whole sub-buffers (64 -> 67 on the 6.18 host).
    let kb = inst.buffer_size_kb().unwrap();
    assert!((64..128).contains(&kb), "{kb}");
    inst.set_trace_clock("mono").unwrap();
    assert_eq!(inst.trace_clocks().unwrap().1.as_deref(), Some("mono"));
    assert_eq!(
        inst.set_trace_clock("sundial").unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    std::process::Command::new("/bin/true").status().unwrap();
    let prof = profile::read_group(&root, &name).unwrap();
    assert_eq!(prof.len(), 1);
    assert!(prof[0].hits >= 1, "{prof:?}");
    let t = owner::teardown(&root, &name).unwrap();
    assert!(t.instance_removed);
    assert_eq!(t.events_removed, 1);
    assert!(!inst.exists());
    assert!(DynEvents::new(&root).list_group(&name).unwrap().is_empty());
    // Already gone: still fine.
    assert_eq!(
        owner::teardown(&root, &name).unwrap(),
        owner::Teardown::default()
    );
}

#[test]
fn reap_takes_dead_owners_only() {
    let Some(root) = root() else { return };
    let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let me = SessionName::for_this_process().unwrap();
    let dead = SessionName {
        pid: dead_pid,
        seq: 0,
        ..me
    }
    .to_string();
    let alive = me.to_string();
    let foreign = format!("ktrace_foreign{}", std::process::id());
    let off = true_offset();
    let dynev = DynEvents::new(&root);
    let _guards: Vec<Guard> = [&dead, &alive, &foreign]
        .iter()
        .map(|g| Guard(root.clone(), g.to_string()))
        .collect();
    for g in [&dead, &alive, &foreign] {
        dynev
            .create(&[uprobe(g, "ev", format!("/bin/true:{off:#x}"))])
            .unwrap();
        Instance::create(&root, g).unwrap();
    }
    let reaped = owner::reap(&root).unwrap();
    assert!(
        reaped.iter().any(|r| r.name == dead && r.result.is_ok()),
        "{reaped:?}"
    );
    assert!(!reaped.iter().any(|r| r.name == alive || r.name == foreign));
    assert!(dynev.list_group(&dead).unwrap().is_empty());
    assert!(!Instance::open(&root, &dead).exists());
    for g in [&alive, &foreign] {
        assert_eq!(dynev.list_group(g).unwrap().len(), 1);
        assert!(Instance::open(&root, g).exists());
        owner::teardown(&root, g).unwrap();
    }
}

#[test]
fn teardown_copes_with_our_event_enabled_in_a_foreign_instance() {
    let Some(root) = root() else { return };
    let name = SessionName::for_this_process().unwrap().to_string();
    let _guard = Guard(root.clone(), name.clone());
    let foreign = format!("ktrace_foreign_busy{}", std::process::id());
    let off = true_offset();
    DynEvents::new(&root)
        .create(&[uprobe(&name, "ev", format!("/bin/true:{off:#x}"))])
        .unwrap();
    Instance::create(&root, &name).unwrap();
    // Someone else's instance switches our event on (as `echo 1 > events/enable` would).
    let other = Instance::create(&root, &foreign).unwrap();
    other.set_enabled(&name, Some("ev"), true).unwrap();
    let direct = DynEvents::new(&root).destroy_group(&name).unwrap_err();
    assert_eq!(direct.kind(), ErrorKind::Busy, "{direct}");
    let t = owner::teardown(&root, &name).unwrap();
    assert_eq!(
        t,
        owner::Teardown {
            instance_removed: true,
            events_removed: 1
        }
    );
    assert!(DynEvents::new(&root).list_group(&name).unwrap().is_empty());
    assert!(other.exists(), "the foreign instance stays");
    other.remove().unwrap();
}
