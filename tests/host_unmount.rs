//! Host test: tracefs lazily unmounted (`umount -l`) while ktrace traces,
//! in a private mount namespace. ktrace must end with an error (not exit 0
//! and "cleanup removed 0 probe(s)") and still remove its probe and its
//! instance, which the real tracefs keeps.

mod common;

use std::process::Command;

use common::{Target, serial, state, tracefs};

/// In a private mount namespace: starts ktrace, waits until it traces,
/// unmounts tracefs lazily, then Ctrl-C's it; its exit status and stderr.
fn trace_then_unmount(t: &Target) -> String {
    let ktrace = env!("CARGO_BIN_EXE_ktrace");
    let script = format!(
        "set -u
        {ktrace} trace '{def}' -d 60 2>err &
        k=$!
        i=0
        while ! grep -q 'Ctrl-C to stop' err; do i=$((i+1)); [ $i -gt 400 ] && exit 90; sleep 0.05; done
        umount -l /sys/kernel/tracing || exit 91
        kill -INT $k
        wait $k
        echo \"exit=$?\"
        cat err",
        def = t.def("p:ev", ""),
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .current_dir(&t.dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn lazily_unmounted_tracefs_is_cleaned_through_the_held_mount() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("umount");
    let text = trace_then_unmount(&t);
    assert!(text.contains("exit=1"), "an error, not exit 0: {text}");
    assert!(text.contains("was unmounted or replaced"), "{text}");
    let pid = common::session_pid(&text);
    assert!(
        state(&root).of_pid(pid).is_empty(),
        "left behind: {:?}\n{text}",
        state(&root).of_pid(pid)
    );
}

/// Regression (issue 23, row 19): "cleanup failed" was printed although
/// the cleanup through the held mount succeeded.
#[test]
fn cleanup_through_the_held_mount_was_called_failed() {
    let Some(_root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("umount_ok");
    let text = trace_then_unmount(&t);
    assert!(!text.contains("cleanup failed"), "{text}");
    assert!(
        text.contains("cleanup removed 1 probe(s) and the instance in")
            && text.contains("(through the tracefs mount ktrace held open)"),
        "{text}"
    );
}

#[test]
fn a_user_without_privileges_is_told_why_and_nothing_changes() {
    // Regression: as `nobody`, ktrace said "tracefs is not mounted" (it is,
    // mode 0700).
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("nobody");
    let before = state(&root);
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_ktrace"))
        .arg("trace")
        .arg(t.def("p:ev", ""))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tracefs is mounted at") && err.contains("run ktrace as root"),
        "{err}"
    );
    assert!(!err.contains("not mounted"), "{err}");
    assert_eq!(state(&root), before);
}
