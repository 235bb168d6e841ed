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
            stderr.contains("invalid value") && stderr.contains("possible values"),
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

/// `ktrace check … | head -1`: a reader that goes away ends the run
/// quietly, as with every other command (it printed "Broken pipe" and
/// exited 1).
#[test]
fn check_into_a_closed_pipe_is_a_quiet_end() {
    use std::io::{BufRead, BufReader};
    let defs: Vec<String> = (0..2000).map(|i| format!("p:e{i} vfs_read %di")).collect();
    let mut child = common::ktrace()
        .args(["check", "--offline", "--arch", "x86_64"])
        .args(&defs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("ok: "), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// `ktrace boot` refuses a parameter longer than the target kernel keeps of
/// its command line (COMMAND_LINE_SIZE - 1: 1,023 bytes on arm), printing
/// nothing; the same definitions fit an x86_64 kernel's 2,047.
#[test]
fn boot_parameter_longer_than_the_command_line_is_refused() {
    let defs: Vec<String> = (0..40)
        .map(|i| format!("p:probe_number_{i:02} vfs_read"))
        .collect();
    let run = |arch: &str| {
        common::ktrace()
            .args(["boot", "--arch", arch, "--kernel", "7.2"])
            .args(&defs)
            .output()
            .unwrap()
    };
    let out = run("arm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("more than the 1023"), "{stderr}");
    let out = run("x86_64");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.starts_with("kprobe_event=") && line.trim_end().len() > 1023);
}

/// `ktrace boot --persistent SIZE` (issue 20 item 3) adds the reserved
/// memory and the boot-mapped instance on kernels from 6.12, and refuses
/// with the reason — nothing on stdout — an older kernel or a size the
/// kernel would not map.
#[test]
fn boot_persistent_parameters_and_refusals() {
    let run = |kernel: &str, size: &str| {
        common::ktrace()
            .args(["boot", "--arch", "arm64", "--kernel", kernel])
            .args(["--persistent", size, "p:clone kernel_clone"])
            .output()
            .unwrap()
    };
    let out = run("7.2", "8M");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "kprobe_event=p:ktrace_boot/clone,kernel_clone \
         reserve_mem=8M:4096:ktrace trace_instance=ktrace@ktrace"
    );
    for (kernel, size, why) in [
        ("6.1", "8M", "no boot-mapped trace instances"),
        ("5.10", "8M", "no boot-mapped trace instances"),
        ("6.12", "4097K", "not a whole number of 4096-byte pages"),
        ("6.12", "8MB", "not a size the kernel reads"),
    ] {
        let out = run(kernel, size);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{kernel} {size}: {stderr}");
        assert!(out.stdout.is_empty(), "{kernel} {size}");
        assert!(stderr.contains(why), "{kernel} {size}: {stderr}");
    }
    // --previous-boot reads no file and goes with neither --boot nor --folded
    for args in [
        ["report", "--previous-boot", "--boot"].as_slice(),
        &["report", "--previous-boot", "--folded"],
        &["report", "--previous-boot", "some.dat"],
    ] {
        let out = common::ktrace().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// Regression (tests/kernel/boot-corpus, x86_64 7.2): `ktrace boot` put a
/// definition's comment into kprobe_event= (`...,vfs_read,#,a,comment`),
/// whose words the kernel's boot-time parser takes as arguments ("Failed
/// to add event(-22)"); a write to kprobe_events ends at the `#`, and so
/// does the parameter now.
#[test]
fn boot_leaves_a_comment_out_of_the_parameter() {
    let out = common::ktrace()
        .args(["boot", "--arch", "x86_64", "--kernel", "7.2"])
        .args(["p vfs_read # a comment", "p:c kernel_clone%return#x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "kprobe_event=p:ktrace_boot/p_vfs_read_0,vfs_read;p:ktrace_boot/c,kernel_clone%return\n"
    );
}

/// `ktrace list --tracefs DIR` names a tracefs mount: a directory without
/// a probe events file is an error, not "0 dynamic events in /dev/zero";
/// a `--filter-functions` file that cannot be read says why.
#[test]
fn list_refuses_what_is_not_a_tracefs_or_a_table() {
    for args in [
        ["list", "--probes", "--tracefs", "/dev/zero"].as_slice(),
        &["list", "--probes", "--tracefs", "/etc"],
        &["list", "--tracefs", "/etc", "vfs_*"],
    ] {
        let out = common::ktrace().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("not a tracefs mount (it has no dynamic_events"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = common::ktrace()
        .args(["list", "--filter-functions", "/dev/urandom", "vfs_*"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read /dev/urandom: a device, not a table file"),
        "{stderr}"
    );
}
