//! Live end-to-end run on the host kernel (tier 3): a uprobe in a private
//! instance, read by a [`Stream`] (per-CPU readers, merge, decode) into the
//! [`TextSink`], checking that every hit is either printed or counted lost,
//! and that the losses match the kernel's counters.
//!
//! Needs root, tracefs at /sys/kernel/tracing and gcc; without them the test
//! says so on stderr and returns. `KTRACE_LIVE_HITS` (default 200000) sets
//! the number of hits; the CPU time of this process is printed.
//! Creates `instances/ktrace_live_<pid>` and group `ktrace_live_<pid>` and
//! removes both.

use ktrace_event::ProbeKind;
use ktrace_printer::{FlagStyle, NoSymbols, TextSink};
use ktrace_stream::{Event, EventTable, Flow, Options, ProbeSpec, Sink, Status, Stream};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const T: &str = "/sys/kernel/tracing";

struct Guard {
    group: String,
    inst: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = std::fs::write(self.inst.join(format!("events/{}/enable", self.group)), "0");
        let _ = std::fs::remove_dir(&self.inst);
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .open(format!("{T}/uprobe_events"))
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, format!("-:{}/hit\n", self.group).as_bytes())
            });
    }
}

fn append(path: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(text.as_bytes())
}

/// Counts the text written and looks for one line in it (the sink writes
/// whole lines per chunk).
struct Scan {
    bytes: u64,
    want: Vec<u8>,
    seen: bool,
}

impl Write for Scan {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.bytes += b.len() as u64;
        self.seen |= b.windows(self.want.len()).any(|w| w == self.want);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The text sink, checking the time order of what it is handed.
struct Ordered<'a> {
    text: TextSink<'a, ktrace_printer::Buffered<&'a mut Scan>>,
    prev_ts: u64,
    out_of_order: u64,
}

impl Sink for Ordered<'_> {
    fn begin(&mut self, table: &EventTable) -> std::io::Result<()> {
        self.text.begin(table)
    }
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<Flow> {
        self.out_of_order += u64::from(ev.ts < self.prev_ts);
        self.prev_ts = ev.ts;
        self.text.event(ev)
    }
    fn lost(&mut self, cpu: usize, missed: ktrace_stream::Missed) -> std::io::Result<()> {
        self.text.lost(cpu, missed)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.text.flush()
    }
}

/// User + system CPU time of this process (all threads), from
/// /proc/self/stat (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    // fields 14 and 15 (utime, stime) are at 11 and 12 after the comm
    Duration::from_millis((f[11] + f[12]) * 10)
}

#[test]
fn live_uprobe_hits_are_printed_or_counted_lost() {
    if !Path::new(T).join("instances").is_dir() || !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root and tracefs at {T}");
        return;
    }
    let hits: u64 = std::env::var("KTRACE_LIVE_HITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let pid = std::process::id();
    let group = format!("ktrace_live_{pid}");
    let work = std::env::temp_dir().join(&group);
    std::fs::create_dir_all(&work).unwrap();
    let bin = work.join("kfix_target");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ring/fixtures/target.c");
    let ok = Command::new("gcc")
        .args(["-O1", "-fno-inline", "-no-pie", "-o"])
        .arg(&bin)
        .arg(&src)
        .status();
    if !ok.is_ok_and(|s| s.success()) {
        eprintln!("skipped: gcc could not build {}", src.display());
        return;
    }
    // file offset of probe_me: the target is linked -no-pie at 0x400000 with
    // the text segment at file offset 0x1000 / vaddr 0x401000
    let nm = Command::new("nm").arg(&bin).output().unwrap();
    let addr = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" probe_me"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .expect("probe_me in nm output");
    let off = addr - 0x400000;
    let inst = PathBuf::from(format!("{T}/instances/{group}"));
    let guard = Guard {
        group: group.clone(),
        inst: inst.clone(),
    };
    let def = format!(
        "p:{group}/hit {}:{off:#x} a=%cx:s64 s=+0(%si):string",
        bin.display()
    );
    append(&format!("{T}/uprobe_events"), &format!("{def}\n")).unwrap();
    std::fs::create_dir(&inst).unwrap();
    std::fs::write(inst.join("buffer_size_kb"), "4096").unwrap();
    std::fs::write(inst.join("buffer_percent"), "25").unwrap();

    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let root = Path::new(T);
    let instance = ktrace_tracefs::Instance::open(root, &group);
    let probes = [ProbeSpec {
        group: group.clone(),
        system: group.clone(),
        event: "hit".into(),
        kind: ProbeKind::from_dynamic_event(&def),
        target: None,
    }];
    let mut stream = Stream::open(root, &instance, &probes, Options::default()).unwrap();
    let mut scan = Scan {
        bytes: 0,
        want: format!("hit: (0x{addr:x}) a={} s=", hits - 1).into_bytes(),
        seen: false,
    };
    let mut sink = Ordered {
        text: TextSink::new(
            &mut scan,
            FlagStyle::for_release(&release),
            &NoSymbols,
            true,
        ),
        prev_ts: 0,
        out_of_order: 0,
    };
    stream.begin(&mut sink).unwrap();
    std::fs::write(inst.join(format!("events/{group}/enable")), "1").unwrap();
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut child = Command::new(&bin).arg(hits.to_string()).spawn().unwrap();
    // a second writer at the same time, on another CPU when there is one,
    // so the merge has records of several CPUs to put in order
    let hits2 = hits / 2;
    let cpus_online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut second = if cpus_online > 1 {
        Command::new("taskset")
            .args(["-c", "1"])
            .arg(&bin)
            .arg(hits2.to_string())
            .spawn()
    } else {
        Command::new(&bin).arg(hits2.to_string()).spawn()
    }
    .unwrap();

    let mut stopped = false;
    let mut child_wall = Duration::ZERO;
    loop {
        if !stopped && child.try_wait().unwrap().is_some() && second.try_wait().unwrap().is_some() {
            child_wall = start.elapsed();
            std::fs::write(inst.join(format!("events/{group}/enable")), "0").unwrap();
            stream.stop();
            stopped = true;
        }
        match stream.poll(Duration::from_millis(50), &mut sink).unwrap() {
            Status::Running => {}
            Status::Finished => break,
            Status::Stopped => panic!("stopped without a limit"),
        }
        let warnings = stream.take_warnings();
        assert!(warnings.is_empty(), "{warnings:?}");
    }
    let end = stream.finish(&mut sink).unwrap();
    let summary = end.summary;
    let out_of_order = sink.out_of_order;
    drop(sink);
    let (printed_bytes, saw_last_hit) = (scan.bytes, scan.seen);
    let wall = start.elapsed();
    let cpu = cpu_time() - cpu0;
    drop(guard);
    let _ = std::fs::remove_dir_all(&work);
    eprintln!(
        "live: {hits} + {hits2} hits, {} printed ({} bytes), {}; reader+printer CPU {:.3}s, wall {:.3}s, traced program wall {:.3}s",
        summary.events,
        printed_bytes,
        summary.line(),
        cpu.as_secs_f64(),
        wall.as_secs_f64(),
        child_wall.as_secs_f64()
    );
    assert!(
        saw_last_hit || summary.lost() > 0,
        "the last hit was not printed"
    );
    assert_eq!(
        summary.events + summary.lost(),
        hits + hits2,
        "{}",
        summary.line()
    );
    // live output is in time order across CPUs, as the kernel's `trace`
    assert_eq!(out_of_order, 0, "records printed out of time order");
}
