//! Regression (issue 23 row 19): messages that did not say what was wrong.
//! Each case was met in the hostile trial; each now names the cause in the
//! user's words, with the fix, before anything is written to the kernel.
//! Real uprobes on the fixture program (root and tracefs), as a new user
//! would type the commands.

mod common;

use std::path::Path;
use std::process::Output;

use common::{Prog, ktrace, serial, state, tracefs};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// No probe of this run's files is left in the kernel.
fn nothing_left(root: &Path, p: &Prog) {
    let st = state(root);
    let d = p.dir.display().to_string();
    let left: Vec<_> = st
        .dynamic_events
        .iter()
        .chain(&st.uprobe_events)
        .filter(|l| l.contains(&d))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// An offset past the end of the file was accepted, and the kernel then
/// refused to switch the event on: "cannot switch event (…/enable):
/// Invalid argument".
#[test]
fn an_offset_past_the_end_of_the_file_failed_at_enable() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let p = Prog::build("past_eof");
    let size = std::fs::metadata(&p.bin).unwrap().len();
    let out = ktrace()
        .arg("trace")
        .arg(format!("{}:{:#x}", p.bin.display(), size + 0x1000))
        .arg("--")
        .arg(&p.bin)
        .arg("1")
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("is past the end of") && t.contains(&format!("({size} bytes)")),
        "{t}"
    );
    assert!(!t.contains("cannot switch event"), "{t}");
    nothing_left(&root, &p);
}

/// An event named `enable` was created, then "Is a directory" when it was
/// switched on (tracefs keeps a file `enable` in every group directory).
#[test]
fn an_event_named_enable_failed_with_is_a_directory() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let p = Prog::build("named_enable");
    for name in ["enable", "filter"] {
        let out = ktrace()
            .arg("trace")
            .arg(format!("p:{name} {}", p.place()))
            .arg("--")
            .arg(&p.bin)
            .arg("1")
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{t}");
        assert!(
            t.contains(&format!("an event named \"{name}\" clashes")),
            "{t}"
        );
        assert!(
            !t.contains("Is a directory") && !t.contains("Not a directory"),
            "{t}"
        );
    }
    nothing_left(&root, &p);
}

/// `nosuchmod:vfs_read` was read as a library only: "cannot read
/// /etc/ld.so.cache" / "not found in /etc/ld.so.cache", as if no kernel
/// module were meant.
#[test]
fn a_module_that_is_not_loaded_was_called_a_library() {
    if tracefs().is_none() {
        return;
    }
    let out = ktrace()
        .args(["trace", "ktrace_nosuchmod:vfs_read", "-d", "1"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("neither a loaded kernel module"), "{t}");
    assert!(t.contains("modprobe ktrace_nosuchmod"), "{t}");
}

/// A path holding a space was split by the kernel's syntax and refused
/// with an unrelated BTF error ("No BTF entry for this probe point").
#[test]
fn a_path_with_a_space_got_a_btf_error() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let p = Prog::build("space");
    let spaced = p.dir.join("with space");
    std::fs::create_dir_all(&spaced).unwrap();
    let bin = spaced.join("target");
    std::fs::copy(&p.bin, &bin).unwrap();
    let out = ktrace()
        .arg("trace")
        .arg(format!("{}:{:#x}", bin.display(), p.off))
        .arg("--")
        .arg(&bin)
        .arg("1")
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("holds a space"), "{t}");
    assert!(!t.contains("BTF"), "{t}");
    nothing_left(&root, &p);
}

/// `-p PID -- CMD` traced both without a word.
#[test]
fn pid_and_command_traced_the_union_silently() {
    let Some(root) = tracefs() else { return };
    let _g = serial();
    let p = Prog::build("union");
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let out = ktrace()
        .arg("trace")
        .arg(p.place())
        .arg("-p")
        .arg(other.id().to_string())
        .arg("--")
        .arg(&p.bin)
        .arg("1")
        .output()
        .unwrap();
    let _ = other.kill();
    let _ = other.wait();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains(&format!("tracing both process {} (-p)", other.id())),
        "{t}"
    );
    nothing_left(&root, &p);
}

/// As a user who cannot read tracefs, `list --probes` said tracefs was not
/// mounted.
#[test]
fn a_user_who_cannot_read_tracefs_was_told_it_is_not_mounted() {
    if tracefs().is_none() {
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_ktrace"));
    // nobody must be able to run the binary (it may sit under /root)
    let copy = std::env::temp_dir().join(format!("ktrace_nobody_{}", std::process::id()));
    std::fs::copy(bin, &copy).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args(["list", "--probes"])
        .output();
    let _ = std::fs::remove_file(&copy);
    let Ok(out) = out else { return };
    let t = text(&out);
    assert_ne!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("cannot read it (it belongs to root)"), "{t}");
    assert!(!t.contains("not mounted"), "{t}");
}

/// Issue 21 item 5: a misspelt function of the traced program got only
/// "symbol not found".
#[test]
fn a_misspelt_user_symbol_had_no_suggestion() {
    if tracefs().is_none() {
        return;
    }
    let p = Prog::build("misspelt");
    let out = ktrace()
        .arg("trace")
        .arg(format!("{}:probe_mee", p.bin.display()))
        .arg("--")
        .arg(&p.bin)
        .arg("1")
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("did you mean probe_me?"), "{t}");
}
