//! Helpers for the host tests that run the `ktrace` binary against the real
//! kernel (uprobes). Every test works on its own copy of /bin/true, so its
//! probes fire only when it runs that copy, and names everything it creates
//! uniquely. Without root the tests print a loud SKIP and pass.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Serialises tests that reap or compare global tracefs state.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the serialisation lock (surviving a poisoned one).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The ktrace binary under test.
pub fn ktrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ktrace"))
}

/// The tracefs root, mounting it if needed; `None` (after a loud message)
/// when not root.
pub fn tracefs() -> Option<PathBuf> {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "\n!!!!!! SKIP: ktrace host session tests need root (uprobes on the host) !!!!!!\n"
        );
        return None;
    }
    let root = Path::new("/sys/kernel/tracing");
    // On a fresh machine tracefs is not mounted, and the tests of one binary
    // run in parallel: one mount at a time, and a mount that fails because
    // another test (or another test binary) got there first is fine (this
    // raced on a fresh clone: "nodev already mounted on /sys/kernel/tracing").
    static MOUNT: Mutex<()> = Mutex::new(());
    let _g = MOUNT.lock().unwrap_or_else(|p| p.into_inner());
    if !root.join("README").exists() {
        let st = Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status()
            .unwrap();
        assert!(
            st.success() || root.join("README").exists(),
            "cannot mount tracefs"
        );
    }
    Some(root.to_path_buf())
}

/// A private copy of /bin/true and the file offset of its entry point,
/// computed independently with `readelf`.
pub struct Target {
    pub dir: PathBuf,
    pub path: PathBuf,
    pub offset: u64,
}

impl Target {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ktrace_host_{}_{tag}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("true");
        fs::copy("/bin/true", &path).unwrap();
        let out = Command::new("readelf")
            .args(["-lhW"])
            .arg(&path)
            .output()
            .expect("readelf");
        let text = String::from_utf8(out.stdout).unwrap();
        let entry = text
            .lines()
            .find(|l| l.contains("Entry point address"))
            .unwrap();
        let entry = u64::from_str_radix(entry.rsplit("0x").next().unwrap().trim(), 16).unwrap();
        // Map the entry vaddr to a file offset through the LOAD segment
        // holding it: offset = vaddr - p_vaddr + p_offset.
        let mut offset = None;
        for l in text.lines().filter(|l| l.trim_start().starts_with("LOAD")) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let (off, vaddr, memsz) = (hex(f[1]), hex(f[2]), hex(f[5]));
            if (vaddr..vaddr + memsz).contains(&entry) {
                offset = Some(entry - vaddr + off);
            }
        }
        Self {
            dir,
            path,
            offset: offset.expect("entry in a LOAD segment"),
        }
    }

    /// A uprobe definition on the entry point, with the given head.
    pub fn def(&self, head: &str, args: &str) -> String {
        format!("{head} {}:{:#x} {args}", self.path.display(), self.offset)
            .trim_end()
            .to_string()
    }

    /// Runs the copy `n` times.
    pub fn hit(&self, n: usize) {
        for _ in 0..n {
            Command::new(&self.path).status().unwrap();
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// File offset of the dynamic symbol `name` (e.g. `read`) in `lib`,
/// computed with `readelf` (vaddr mapped through its LOAD segment).
pub fn symbol_offset(lib: &Path, name: &str) -> u64 {
    let syms = Command::new("readelf")
        .arg("-Ws")
        .arg(lib)
        .output()
        .unwrap();
    let syms = String::from_utf8(syms.stdout).unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let vaddr = syms
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 8 && f[3] == "FUNC" && f[7].split('@').next() == Some(name))
        .map(|f| hex(f[1]))
        .expect("symbol");
    let segs = Command::new("readelf")
        .arg("-lW")
        .arg(lib)
        .output()
        .unwrap();
    let segs = String::from_utf8(segs.stdout).unwrap();
    for l in segs.lines().filter(|l| l.trim_start().starts_with("LOAD")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (off, va, filesz) = (hex(f[1]), hex(f[2]), hex(f[4]));
        if (va..va + filesz).contains(&vaddr) {
            return vaddr - va + off;
        }
    }
    panic!("{name} is in no LOAD segment of {}", lib.display());
}

/// The C library `/bin/true` is linked with.
pub fn libc() -> PathBuf {
    let out = Command::new("ldd").arg("/bin/true").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("libc.so"))
        .expect("libc in ldd output");
    PathBuf::from(
        line.split("=>")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap(),
    )
}

/// Everything of tracefs a ktrace session could touch: probe listings,
/// instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub dynamic_events: Vec<String>,
    pub uprobe_events: Vec<String>,
    pub instances: Vec<String>,
}

pub fn state(root: &Path) -> State {
    let lines = |f: &str| -> Vec<String> {
        let mut v: Vec<String> = fs::read_to_string(root.join(f))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    let mut instances: Vec<String> = fs::read_dir(root.join("instances"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    instances.sort();
    State {
        dynamic_events: lines("dynamic_events"),
        uprobe_events: lines("uprobe_events"),
        instances,
    }
}

impl State {
    /// Entries that belong to the ktrace process `pid`.
    /// (`uprobe_events` repeats the uprobes of `dynamic_events`; each
    /// entry counts once.)
    pub fn of_pid(&self, pid: u32) -> Vec<String> {
        let tag = format!("ktrace_p{pid}_");
        let set: std::collections::BTreeSet<String> = self
            .dynamic_events
            .iter()
            .chain(&self.uprobe_events)
            .map(|l| format!("event {l}"))
            .chain(self.instances.iter().map(|i| format!("instance {i}")))
            .filter(|l| l.contains(&tag))
            .collect();
        set.into_iter().collect()
    }
}

/// A running `ktrace trace`, with its stderr read until the "tracing" line.
pub struct Running {
    pub child: Child,
    pub stderr: BufReader<std::process::ChildStderr>,
    pub early_stderr: String,
}

/// Starts `ktrace trace ARGS` and waits until its probes are enabled.
pub fn start_trace(args: &[String], stdout: Stdio, env: &[(&str, &str)]) -> Running {
    let mut cmd = ktrace();
    cmd.arg("trace")
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut early = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).unwrap();
        early.push_str(&line);
        if n == 0 || line.contains("Ctrl-C to stop") {
            break;
        }
        assert!(Instant::now() < deadline, "ktrace did not start: {early}");
    }
    Running {
        child,
        stderr,
        early_stderr: early,
    }
}

impl Drop for Running {
    /// A failing test must not leave ktrace running: ask it to stop (it
    /// cleans up on SIGTERM).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(self.child.id() as i32).unwrap(),
                rustix::process::Signal::TERM,
            );
            let _ = self.child.wait();
        }
    }
}

impl Running {
    /// Waits for the exit; returns the code (or -signal) and all of stderr.
    pub fn finish(mut self) -> (i32, String) {
        use std::io::Read;
        use std::os::unix::process::ExitStatusExt;
        let mut rest = String::new();
        let _ = self.stderr.read_to_string(&mut rest);
        let st = self.child.wait().unwrap();
        let code = st.code().unwrap_or_else(|| -st.signal().unwrap_or(0));
        (code, format!("{}{rest}", self.early_stderr))
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }
}

/// The fixture program, built with gcc, and the file offset of `probe_me`.
pub struct Prog {
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub off: u64,
}

impl Prog {
    pub fn build(tag: &str) -> Prog {
        let dir = std::env::temp_dir().join(format!("ktrace_out_{}_{tag}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("target");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/ring/fixtures/target.c");
        let st = Command::new("gcc")
            .args(["-O1", "-fno-inline", "-no-pie", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(st.success());
        // Independent offset: nm's address minus the non-PIE base, mapped
        // through the LOAD segment (readelf) holding it.
        let nm = Command::new("nm").arg(&bin).output().unwrap();
        let nm = String::from_utf8(nm.stdout).unwrap();
        let vaddr = nm
            .lines()
            .find(|l| l.ends_with(" probe_me"))
            .map(|l| u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap())
            .expect("probe_me in nm");
        let segs = Command::new("readelf")
            .arg("-lW")
            .arg(&bin)
            .output()
            .unwrap();
        let segs = String::from_utf8(segs.stdout).unwrap();
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let off = segs
            .lines()
            .filter(|l| l.trim_start().starts_with("LOAD"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| (hex(f[2])..hex(f[2]) + hex(f[4])).contains(&vaddr))
            .map(|f| vaddr - hex(f[2]) + hex(f[1]))
            .expect("probe_me in a LOAD segment");
        Prog { dir, bin, off }
    }

    pub fn place(&self) -> String {
        format!("{}:{:#x}", self.bin.display(), self.off)
    }

    pub fn run(&self, hits: u64) {
        let st = Command::new(&self.bin)
            .arg(hits.to_string())
            .status()
            .unwrap();
        assert!(st.code().is_some());
    }
}

impl Drop for Prog {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The pid in the session name `ktrace_p<PID>_…` that ktrace printed.
pub fn session_pid(stderr: &str) -> u32 {
    stderr
        .split("ktrace_p")
        .nth(1)
        .and_then(|r| r.split('_').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no session name in: {stderr}"))
}

/// `ktrace trace` of one entry probe `p:ev` on `t`, up to a minute long,
/// stdout discarded: the session the lifecycle tests signal or kill.
pub fn start_minute_session(t: &Target) -> Running {
    start_trace(
        &[t.def("p:ev", ""), "-d".into(), "60".into()],
        Stdio::null(),
        &[],
    )
}

/// Whether trace-cmd can be run. Its `--version` exits 255 (trace-cmd 3.1)
/// with the version on stdout, so the exit status tells nothing: a test
/// that asked for success skipped every time. In CI (`CI` set) a missing
/// trace-cmd is an error, not a skip: scripts/setup installs it.
#[allow(dead_code)]
pub fn have_trace_cmd() -> bool {
    let ok = std::process::Command::new("trace-cmd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stdout.is_empty());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "trace-cmd is not installed (scripts/setup installs it)"
        );
        eprintln!("\n!!!!!! SKIP: trace-cmd is not installed (scripts/setup) !!!!!!\n");
    }
    ok
}
