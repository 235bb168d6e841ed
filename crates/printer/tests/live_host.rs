//! Live end-to-end run on the host kernel (tier 3): a uprobe in a private
//! instance, the per-CPU readers in a [`Pipeline`], the [`Merger`] and the
//! text printer, checking that every hit is either printed or counted lost,
//! and that the losses match the kernel's counters.
//!
//! Needs root, tracefs at /sys/kernel/tracing and gcc; without them the test
//! says so on stderr and returns. `KTRACE_LIVE_HITS` (default 200000) sets
//! the number of hits; the CPU time of this process is printed.
//! Creates `instances/ktrace_live_<pid>` and group `ktrace_live_<pid>` and
//! removes both.

use ktrace_event::{Events, ProbeKind};
use ktrace_printer::{Comms, FlagStyle, LostSummary, NoSymbols, TextPrinter};
use ktrace_ring::{CpuStats, Merged, Merger, PageLayout, Pipeline, PipelineMsg, Reader};
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

    let layout = PageLayout::from_tracefs(Path::new(T)).unwrap();
    let mut events = Events::new(layout.long_size);
    let fmt =
        ktrace_ring::read_whole(Path::new(&format!("{T}/events/{group}/hit/format"))).unwrap();
    events
        .add_with_kind(&group, &fmt, ProbeKind::from_dynamic_event(&def))
        .unwrap();
    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let mut printer = TextPrinter::new(
        &events,
        layout.endian,
        FlagStyle::for_release(&release),
        &NoSymbols,
        Comms::new().with_proc(true),
    );

    let reader = Reader::open(&inst, layout).unwrap();
    let cpus = reader.cpus();
    let pipeline = Pipeline::spawn(reader, 256, 64, Duration::from_millis(100));
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

    let mut merger = Merger::new(layout);
    let mut out = Vec::with_capacity(1 << 20);
    let mut summary = LostSummary::new();
    let mut printed_bytes = 0u64;
    let last_hit = format!("hit: (0x{addr:x}) a={} s=", hits - 1);
    let mut saw_last_hit = false;
    let mut prev_ts = 0u64;
    let mut out_of_order = 0u64;
    let mut stopped = false;
    let mut child_wall = Duration::ZERO;
    loop {
        if !stopped && child.try_wait().unwrap().is_some() && second.try_wait().unwrap().is_some() {
            child_wall = start.elapsed();
            std::fs::write(inst.join(format!("events/{group}/enable")), "0").unwrap();
            pipeline.stop();
            stopped = true;
        }
        match pipeline.rx.recv_timeout(Duration::from_millis(50)) {
            Ok(PipelineMsg::Page(p)) => merger.push(p.cpu, p.bytes),
            Ok(PipelineMsg::Round { complete_to }) => {
                merger.flush_until(complete_to.unwrap_or(u64::MAX), &mut |m| match m {
                    Merged::Record { cpu, ts, data } => {
                        summary.events += 1;
                        out_of_order += u64::from(ts < prev_ts);
                        prev_ts = ts;
                        printer.write_record(&mut out, cpu, ts, data);
                    }
                    Merged::Lost { cpu, missed } => {
                        summary.add_missed(cpu, missed);
                        printer.write_lost(&mut out, cpu, missed);
                    }
                    Merged::Bad { cpu, error } => panic!("cpu {cpu}: {error}"),
                });
                printed_bytes += out.len() as u64;
                saw_last_hit |= out
                    .windows(last_hit.len())
                    .any(|w| w == last_hit.as_bytes());
                out.clear();
            }
            Ok(PipelineMsg::Failed(e)) => panic!("reader: {e}"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    pipeline.join();
    let wall = start.elapsed();
    let cpu = cpu_time() - cpu0;
    for c in cpus {
        summary.add_stats(c, &CpuStats::read(&inst, c).unwrap());
    }
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
        "{last_hit:?} not printed"
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
