//! Host test: numbers on the command line are checked by the argument
//! parser — a bad duration, count or buffer size is a usage error (exit 2)
//! before anything is created in tracefs, never a panic (issue: `-d inf`
//! panicked after installing the probe; `-d nan` and `-d=-1` were silently
//! zero; `--buffer-size 18446744073709551615` wrapped to 7 KB).

mod common;

use common::{Target, serial, state, tracefs};

#[test]
fn bad_numbers_are_usage_errors_before_anything_is_created() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let t = Target::new("cli");
    let before = state(&root);
    for args in [
        ["-d=inf"].as_slice(),
        &["-d=1e400"],
        &["-d=nan"],
        &["-d=-1"],
        &["-d=0"],
        &["-n", "0"],
        &["--buffer-size", "18446744073709551615"],
        &["--buffer-size", "0"],
    ] {
        let out = common::ktrace()
            .arg("trace")
            .arg(t.def("p:ev", ""))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains("invalid value"), "{args:?}: {stderr}");
        assert_eq!(state(&root), before, "{args:?} changed tracefs");
    }
}

/// A bad `--arch` is a usage error like any other bad flag (exit 2, not 1);
/// so is a `ktrace boot --buffer-size` the kernel would not read (exit 1:
/// refused with the reason, nothing printed on stdout).
#[test]
fn bad_arch_is_a_usage_error() {
    for args in [
        ["check", "--arch", "sparc", "p vfs_read"].as_slice(),
        &["boot", "--arch", "sparc64", "p vfs_read"],
        &["syms", "--btf", "--arch", "mips", "vfs_read"],
    ] {
        let out = common::ktrace().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("unknown architecture"),
            "{args:?}: {stderr}"
        );
    }
    let out = common::ktrace()
        .args(["boot", "--offline", "--buffer-size", "4MB", "p vfs_read"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a size the kernel reads"));
}
