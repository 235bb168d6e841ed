//! Host tests of `ktrace trace` with uprobes given by name (`PATH:SYMBOL`,
//! `LIB:SYMBOL`, `%return`, `argN`), on real uprobes of the host kernel.
//! A small C program is compiled with gcc twice, as PIE and non-PIE; every
//! offset ktrace reports is compared with one computed from `readelf`
//! (tests/common `symbol_offset`), and the traced values with what the
//! program passed. Each test runs its program with `-- CMD`. Register
//! names are x86_64's (the host).

#![cfg(target_arch = "x86_64")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{ktrace, serial, state, symbol_offset, tracefs};

/// What the program does: calls its own function 3 times with known
/// arguments and getenv once with a known name.
const PROGRAM: &str = r#"
#include <stdlib.h>
#include <stdio.h>
__attribute__((noinline)) int ktrace_probe_me(int a, const char *s) {
    __asm__ volatile("" ::: "memory");
    return a * 7 + (s[0] == 'h');
}
int main(void) {
    int sum = 0;
    for (int i = 1; i <= 3; i++) sum += ktrace_probe_me(i * 10, "hello");
    const char *v = getenv("KTRACE_NAMES_VAR");
    return (sum > 0 && v == 0) ? 0 : 1;
}
"#;

struct Program {
    dir: PathBuf,
    path: PathBuf,
}

impl Program {
    /// Compiles PROGRAM with gcc; `pie` selects -pie or -no-pie.
    fn build(tag: &str, pie: bool) -> Option<Program> {
        let dir = std::env::temp_dir().join(format!("ktrace_names_{}_{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let path = dir.join(if pie { "prog_pie" } else { "prog_nopie" });
        let st = Command::new("gcc")
            .args(["-O1", "-g0"])
            .arg(if pie { "-pie" } else { "-no-pie" })
            .arg(if pie { "-fPIE" } else { "-fno-pie" })
            .arg("-o")
            .arg(&path)
            .arg(&src)
            .status();
        match st {
            Ok(s) if s.success() => Some(Program { dir, path }),
            _ => {
                eprintln!("\n!!!!!! SKIP: gcc cannot build the test program !!!!!!\n");
                None
            }
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// ELF type from readelf -h (EXEC or DYN), independent of ktrace.
fn elf_type(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-hW")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find(|l| l.trim_start().starts_with("Type:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string()
}

/// Runs `ktrace trace ARGS` to its end and checks that it left nothing of
/// its own in tracefs (other tools may be using tracefs meanwhile, so only
/// entries named after this ktrace process are looked for).
fn run_trace(args: &[String]) -> (Output, String, String) {
    let root = tracefs().unwrap();
    let child = ktrace()
        .arg("trace")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let left = state(&root).of_pid(pid);
    assert!(left.is_empty(), "ktrace {pid} left {left:?}\n{stderr}");
    (out, stdout, stderr)
}

fn by_name(pie: bool) {
    let Some(_root) = tracefs() else { return };
    let _s = serial();
    let Some(prog) = Program::build(if pie { "pie" } else { "nopie" }, pie) else {
        return;
    };
    assert_eq!(
        elf_type(&prog.path),
        if pie { "DYN" } else { "EXEC" },
        "gcc built the wrong kind"
    );
    let want = symbol_offset(&prog.path, "ktrace_probe_me");
    let p = prog.path.display().to_string();
    let (out, stdout, stderr) = run_trace(&[
        format!("{p}:ktrace_probe_me"),
        "a=arg1:s32".into(),
        "s=+0(arg2):string".into(),
        format!("{p}:ktrace_probe_me%return"),
        "r=$retval:s32".into(),
        "--".into(),
        p.clone(),
    ]);
    assert!(out.status.success(), "{stderr}");
    let line = format!("{p}:ktrace_probe_me -> {p}:{want:#x} ");
    assert!(stderr.contains(&line), "want {line:?} in\n{stderr}");
    for i in 1..=3 {
        let a = " p_ktrace_probe_me: (0x";
        let args = format!(") a={} s=\"hello\"", i * 10);
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.contains(a) && l.ends_with(&args))
                .count(),
            1,
            "entry a={}:\n{stdout}",
            i * 10
        );
        let r = " r_ktrace_probe_me: (0x";
        let ret = format!(") r={}", i * 70 + 1);
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.contains(r) && l.ends_with(&ret))
                .count(),
            1,
            "return {}:\n{stdout}",
            i * 70 + 1
        );
    }
    assert!(
        stderr.contains("6 event(s), 0 lost (command exited)"),
        "{stderr}"
    );
}

#[test]
fn own_function_by_name_pie() {
    by_name(true);
}

#[test]
fn own_function_by_name_non_pie() {
    by_name(false);
}

#[test]
fn libc_getenv_with_its_string_argument() {
    let Some(_root) = tracefs() else { return };
    let _s = serial();
    let Some(prog) = Program::build("getenv", true) else {
        return;
    };
    let libc = common::libc();
    let want = symbol_offset(&libc, "getenv");
    // The same string through arg1 and through the kernel's own register.
    let (out, stdout, stderr) = run_trace(&[
        "libc:getenv".into(),
        "name=+0(arg1):string".into(),
        "raw=+0(%di):string".into(),
        "--".into(),
        prog.path.display().to_string(),
    ]);
    assert!(out.status.success(), "{stderr}");
    let canon = std::fs::canonicalize(&libc).unwrap();
    let reported = stderr
        .lines()
        .find(|l| l.starts_with("ktrace: libc:getenv -> "))
        .unwrap_or_else(|| panic!("no resolution line:\n{stderr}"));
    let (path, off) = reported["ktrace: libc:getenv -> ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .rsplit_once(':')
        .unwrap();
    assert_eq!(std::fs::canonicalize(path).unwrap(), canon, "{reported}");
    assert_eq!(off, format!("{want:#x}"), "{reported}");
    let hits: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("name=\"KTRACE_NAMES_VAR\" raw=\"KTRACE_NAMES_VAR\""))
        .collect();
    assert_eq!(hits.len(), 1, "{stdout}");
}

#[test]
fn rejected_definition_shows_caret_and_writes_nothing() {
    let Some(_root) = tracefs() else { return };
    let _s = serial();
    let (out, _stdout, stderr) = run_trace(&[
        "libc:getenv".into(),
        "x=%rdi".into(),
        "-d".into(),
        "1".into(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("definition rejected before anything was written: libc:getenv x=%rdi"),
        "{stderr}"
    );
    assert!(
        stderr.contains("trace_uprobe: error: Invalid register name"),
        "{stderr}"
    );
    // The caret stands under the '%' of %rdi in the printed command.
    let lines: Vec<&str> = stderr.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains(" x=%rdi") && (l.starts_with("  p:") || l.starts_with("  p ")))
        .unwrap_or_else(|| panic!("{stderr}"));
    let caret = lines[i + 1].find('^').unwrap();
    assert_eq!(&lines[i][caret..caret + 4], "%rdi", "{stderr}");
    // An unknown symbol and a wrong argN are refused before writing too.
    let (out, _, stderr) = run_trace(&["libc:ktrace_no_such_symbol".into()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("ktrace_no_such_symbol"), "{stderr}");
    let (out, _, stderr) = run_trace(&["libc:getenv".into(), "x=arg9".into()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("arg1..arg6"), "{stderr}");
}

#[test]
fn stack_gives_user_stacks_on_uprobes() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    if !root.join("options/userstacktrace").exists() {
        eprintln!("\n!!!!!! SKIP: this kernel has no options/userstacktrace !!!!!!\n");
        return;
    }
    let Some(prog) = Program::build("stack", true) else {
        return;
    };
    let p = prog.path.display().to_string();
    let (out, stdout, stderr) = run_trace(&[
        format!("{p}:ktrace_probe_me"),
        "--stack".into(),
        "--".into(),
        p.clone(),
    ]);
    assert!(out.status.success(), "{stderr}");
    // Each hit is followed by the user stack the kernel recorded; its first
    // frame is the probed address itself.
    let lines: Vec<&str> = stdout.lines().collect();
    let mut stacks = 0;
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.split_once(" p_ktrace_probe_me: (0x").map(|(_, r)| r) else {
            continue;
        };
        let addr = u64::from_str_radix(rest.trim_end_matches(')'), 16).unwrap();
        assert!(
            lines[i + 1].ends_with(": <user stack trace>"),
            "{}\n{stdout}",
            lines[i + 1]
        );
        assert_eq!(lines[i + 2], format!(" =>  <{addr:016x}>"), "{stdout}");
        stacks += 1;
    }
    assert_eq!(stacks, 3, "{stdout}");
}

#[test]
fn check_asks_the_live_kernel_unless_offline() {
    let Some(_root) = tracefs() else { return };
    let def = "p:ktrace_names_chk /ktrace/no/such/file:0x10";
    let live = ktrace().args(["check", def]).output().unwrap();
    let text = String::from_utf8_lossy(&live.stdout);
    assert_eq!(live.status.code(), Some(1), "{text}");
    assert!(text.contains("Failed to find the given file"), "{text}");
    let offline = ktrace().args(["check", "--offline", def]).output().unwrap();
    let text = String::from_utf8_lossy(&offline.stdout);
    assert!(offline.status.success(), "{text}");
    assert!(text.contains("existence of the probed file"), "{text}");
}

#[test]
fn lib_symbol_found_through_the_traced_process_maps() {
    let Some(_root) = tracefs() else { return };
    let _s = serial();
    // A shell that waits until ktrace traces, then calls getenv (printenv
    // is a child, so -p's event-fork follows it). It used to sleep one
    // second instead, which a loaded machine's slower setup outlasted: the
    // call came before the probe and the test failed.
    let go = std::env::temp_dir().join(format!("ktrace_libsym_go_{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let mut target = Command::new("/bin/sh")
        .args([
            "-c",
            &format!(
                "while [ ! -e {} ]; do sleep 0.02; done; printenv HOME",
                go.display()
            ),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = target.id();
    // The shell maps libc once the dynamic loader has run: wait for it.
    let mut libc_in_maps = None;
    for _ in 0..500 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        libc_in_maps = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .map(str::to_string);
        if libc_in_maps.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let libc_in_maps = libc_in_maps.expect("libc in the shell's maps");
    let mut running = common::start_trace(
        &[
            "libc:getenv".into(),
            "name=+0(arg1):string".into(),
            "-p".into(),
            pid.to_string(),
            "-d".into(),
            "120".into(),
        ],
        Stdio::piped(),
        &[],
    );
    std::fs::write(&go, "").unwrap();
    let _ = target.wait();
    let _ = std::fs::remove_file(&go);
    // -p ends the run when the process is gone
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut running.child.stdout.take().unwrap(), &mut stdout).unwrap();
    let (code, stderr) = running.finish();
    assert_eq!(code, 0, "{stderr}");
    let want = format!(
        "ktrace: libc:getenv -> {libc_in_maps}:{:#x} ",
        symbol_offset(Path::new(&libc_in_maps), "getenv")
    );
    assert!(stderr.contains(&want), "want {want:?} in\n{stderr}");
    // printenv (a child of the traced shell) asks for locale variables.
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("printenv-")
                && l.contains(" p_getenv: (0x")
                && l.contains(" name=\"LC_ALL\"")),
        "{stdout}"
    );
}
