//! The file readers end and stay small on hostile files (issue 23, rows 4,
//! 9 and 10): each command runs under a time limit (a hang fails the test
//! instead of stalling it) and under `/usr/bin/time` for its peak RSS.
//! No tracefs and no root needed: the inputs are files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What a bounded run gave.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
    /// Peak resident set of the command, KiB.
    max_rss_kb: u64,
}

/// Runs `ktrace ARGS` under `/usr/bin/time -f %M` (its peak RSS) and a time
/// limit (`timeout`); past the limit the command is killed and the test
/// fails.
fn run_bounded(args: &[&std::ffi::OsStr], limit: Duration) -> Ran {
    let dir = std::env::temp_dir().join(format!(
        "ktrace_bounded_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err, rss) = (dir.join("out"), dir.join("err"), dir.join("rss"));
    assert!(
        Path::new("/usr/bin/time").exists(),
        "/usr/bin/time is needed to measure peak RSS (Debian package time; scripts/setup installs it)"
    );
    // timeout(1) signals the whole process group (time and ktrace): TERM
    // at the limit, KILL 5 s later; it then exits 124 (or 137)
    let status = Command::new("timeout")
        .args(["-k", "5"])
        .arg(limit.as_secs().to_string())
        .arg("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_ktrace"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    if matches!(status.code(), Some(124 | 137) | None) {
        let stderr = std::fs::read_to_string(&err).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        panic!("ktrace {args:?} hung: killed after {limit:?} ({status}); stderr: {stderr}");
    }
    let rss_text = std::fs::read_to_string(&rss).unwrap();
    let ran = Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err).unwrap()).into_owned(),
        // time writes "Command exited with non-zero status N" first then
        max_rss_kb: rss_text
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("no RSS from /usr/bin/time: {rss_text:?}")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    ran
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/tracedat/fixtures")
        .join(name)
}

/// Row 4: two trace-cmd v7 zstd files corrupted in the hostile trial
/// (CPU 0's time stamps go backwards) made `ktrace report` and `ktrace
/// export` spin at 100% CPU forever in the merge. Now both end, print or
/// export the records before the damage, and say what was wrong.
#[test]
fn report_and_export_of_corrupt_zstd_recordings_end() {
    for name in ["hang-report-tc-v7-zstd.dat", "hang2-report-tc-v7-zstd.dat"] {
        let f = fixture(name);
        let r = run_bounded(&["report".as_ref(), f.as_os_str()], Duration::from_secs(30));
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert!(
            r.stderr.contains("undecodable sub-buffer")
                && r.stderr
                    .contains("stamped earlier than the record before them"),
            "{name}: {}",
            r.stderr
        );
        let lines = r.stdout.lines().count();
        assert!((40..80).contains(&lines), "{name}: {lines} lines");
        assert!(r.max_rss_kb < 64 << 10, "{name}: {} KiB", r.max_rss_kb);
        let out = std::env::temp_dir().join(format!(
            "ktrace_bounded_{}_{name}.pftrace",
            std::process::id()
        ));
        let r = run_bounded(
            &[
                "export".as_ref(),
                f.as_os_str(),
                "--perfetto".as_ref(),
                "-o".as_ref(),
                out.as_os_str(),
            ],
            Duration::from_secs(30),
        );
        let _ = std::fs::remove_file(&out);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("stamped earlier than the record before them"),
            "{name}: {}",
            r.stderr
        );
    }
}
