//! `ktrace bench`: what a probe costs the code it traces, measured on the
//! machine it runs on. A loop calls a target with no probe, then with one
//! probe event of each kind (kprobe and kretprobe on `vfs_read`, reached by
//! a one-byte `read(2)` of /dev/zero; uprobe and uretprobe on an empty
//! function of ktrace's own executable), with 0, 4 and 8 fetch arguments,
//! without and with stacks; the cost per hit is the difference of the time
//! per call. Every probe is created in a ktrace session of its own (its
//! group and instance, removed after) and records into that instance's
//! buffer with no reader attached, so what is measured is the traced code's
//! side only: the trap or ftrace entry, the fetches, the ring-buffer write
//! (and the stack walk). The kernel's hit count (`kprobe_profile`,
//! `uprobe_profile`) must equal the calls made, or the row is refused.
//!
//! Not a substitute for `scripts/bench-live` (the reader's cost) — this is
//! the other half. fprobes are not measured: ktrace does not trace them yet.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use ktrace_symbols::KernelView;

use crate::session::{self, Session};

/// Arguments of `ktrace bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each row: the time per call of the loop with the probe, the same loop \
without it (measured right before and after; the faster), and their difference, the cost of one \
hit. Best of --runs runs each. On a virtual machine that emulates its CPU \
(QEMU TCG) the figures are emulated: compare rows, not machines.

Examples:
  ktrace bench
  ktrace bench --calls 100000 --runs 5 --json")]
pub struct Args {
    /// Calls per run (kernel probes; user probes take a quarter as many,
    /// each hit costing a trap).
    #[arg(long, default_value = "200000", value_parser = crate::cli::count)]
    pub calls: u64,
    /// Runs per row; the fastest counts.
    #[arg(long, default_value = "3", value_parser = crate::cli::count)]
    pub runs: u64,
    /// Only these kinds (kprobe, kretprobe, uprobe, uretprobe; repeatable).
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<Kind>,
    /// One JSON object per row instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// A kind of probe event measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Entry of a kernel function (`p`).
    Kprobe,
    /// Return of a kernel function (`r`).
    Kretprobe,
    /// Entry of a user function (`p PATH:OFF`).
    Uprobe,
    /// Return of a user function (`r PATH:OFF`).
    Uretprobe,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Kprobe, Kind::Kretprobe, Kind::Uprobe, Kind::Uretprobe];

    fn name(self) -> &'static str {
        match self {
            Kind::Kprobe => "kprobe",
            Kind::Kretprobe => "kretprobe",
            Kind::Uprobe => "uprobe",
            Kind::Uretprobe => "uretprobe",
        }
    }

    fn user(self) -> bool {
        matches!(self, Kind::Uprobe | Kind::Uretprobe)
    }
}

/// The function user probes are placed on: it does next to nothing, and is
/// never inlined, so each call is one hit.
#[inline(never)]
pub extern "C" fn ktrace_bench_target(a: u64, b: u64, c: u64, d: u64) -> u64 {
    std::hint::black_box(a ^ b ^ c ^ d)
}

/// The probed spot of the user kinds: this executable and the file offset of
/// [`ktrace_bench_target`], from /proc/self/maps.
fn user_place() -> anyhow::Result<(String, u64)> {
    let addr = ktrace_bench_target as *const () as usize as u64;
    let exe = std::fs::read_link("/proc/self/exe").context("cannot read /proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps").context("cannot read /proc/self/maps")?;
    for line in maps.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi), Ok(off)) = (
            u64::from_str_radix(lo, 16),
            u64::from_str_radix(hi, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        if (lo..hi).contains(&addr) {
            return Ok((exe.display().to_string(), addr - lo + off));
        }
    }
    anyhow::bail!("ktrace_bench_target ({addr:#x}) is in no mapping of /proc/self/maps")
}

/// One row of the table.
#[derive(Debug, Clone)]
struct Row {
    kind: Kind,
    args: usize,
    stack: bool,
    calls: u64,
    probed_ns: f64,
    base_ns: f64,
    hits: u64,
}

/// The definition of a row's probe.
fn definition(kind: Kind, args: usize, place: &str) -> String {
    let mut words = vec![match kind {
        Kind::Kprobe => "p:bench vfs_read".to_string(),
        Kind::Kretprobe => "r:bench vfs_read".to_string(),
        Kind::Uprobe => format!("p:bench {place}"),
        Kind::Uretprobe => format!("r:bench {place}"),
    }];
    for i in 0..args {
        let fetch = match kind {
            Kind::Kretprobe | Kind::Uretprobe => "$retval".to_string(),
            _ => format!("arg{}", i % 4 + 1),
        };
        words.push(format!("a{i}={fetch}"));
    }
    words.join(" ")
}

/// The loop: `calls` calls of the kind's target; nanoseconds per call.
fn run_loop(user: bool, calls: u64, zero: &mut std::fs::File) -> anyhow::Result<f64> {
    let mut buf = [0u8; 1];
    let t = Instant::now();
    if user {
        let mut acc = 0u64;
        for i in 0..calls {
            acc = acc.wrapping_add(ktrace_bench_target(std::hint::black_box(i), 1, 2, 3));
        }
        std::hint::black_box(acc);
    } else {
        for _ in 0..calls {
            zero.read_exact(&mut buf).context("read of /dev/zero")?;
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / calls as f64)
}

/// The fastest of `runs` runs.
fn best(user: bool, calls: u64, runs: u64, zero: &mut std::fs::File) -> anyhow::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        best = best.min(run_loop(user, calls, zero)?);
    }
    Ok(best)
}

/// What every row is measured with.
struct Bench<'a> {
    root: &'a Path,
    view: &'a KernelView,
    zero: std::fs::File,
    runs: u64,
}

impl Bench<'_> {
    /// Measures one row in a session of its own: the probed time per call,
    /// the unprobed one (right before and after), and the kernel's hit count.
    fn measure(
        &mut self,
        def: &str,
        user: bool,
        stack: bool,
        calls: u64,
    ) -> anyhow::Result<(f64, f64, u64)> {
        let base = best(user, calls, self.runs, &mut self.zero)?;
        let mut sess = Session::new(self.root)?;
        let probes = crate::resolve::build(&sess, &[def.to_string()], None, self.view)?;
        sess.create(probes)?;
        sess.create_instance()?;
        if stack {
            let inst = ktrace_tracefs::Instance::open(self.root, sess.name());
            crate::resolve::enable_stacks(&sess, &inst, None)?;
        }
        sess.enable()?;
        let probed = best(user, calls, self.runs, &mut self.zero);
        sess.stop();
        let hits = sess.profile().map(|p| p.first().map_or(0, |p| p.hits));
        sess.destroy()?;
        let hits = hits.context("the kernel's hit count")?;
        // the unprobed loop again, after: the faster of the two is the
        // baseline (a busy machine slows one or the other)
        let after = best(user, calls, self.runs, &mut self.zero)?;
        Ok((probed?, base.min(after), hits))
    }
}

/// Whether this machine is a QEMU virtual machine (where TCG emulates the
/// CPU and the figures are emulated).
fn qemu_guest() -> bool {
    let dmi = std::fs::read_to_string("/sys/class/dmi/id/sys_vendor").unwrap_or_default();
    let dt = std::fs::read("/proc/device-tree/compatible").unwrap_or_default();
    is_qemu(&dmi, &dt)
}

/// QEMU from the DMI vendor (x86) or the device tree's `compatible`
/// (`linux,dummy-virt` of arm and arm64 `-M virt`, `riscv-virtio`).
fn is_qemu(dmi_vendor: &str, dt_compatible: &[u8]) -> bool {
    let dt = String::from_utf8_lossy(dt_compatible);
    dmi_vendor.contains("QEMU")
        || dt.contains("linux,dummy-virt")
        || dt.contains("riscv-virtio")
        || dt.contains("qemu")
}

/// Runs `ktrace bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = session::open_tracefs()?;
    let view = KernelView::running(Some(&root));
    let _signals = session::Signals::catch()?;
    let kinds: Vec<Kind> = if args.kinds.is_empty() {
        Kind::ALL.to_vec()
    } else {
        args.kinds.clone()
    };
    let zero = std::fs::File::open("/dev/zero").context("cannot open /dev/zero")?;
    let (path, off) = user_place()?;
    let place = format!("{path}:{off:#x}");
    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let arch = std::env::consts::ARCH;
    let kprobes = root.join("kprobe_events").exists();
    let uprobes = root.join("uprobe_events").exists();
    if !args.json {
        crate::oline!(
            "ktrace bench: the cost of one probe hit to the traced code, on {release} ({arch}); \
             best of {} run(s) each",
            args.runs
        );
        crate::oline!(
            "  kernel probes: vfs_read, {} one-byte reads of /dev/zero per run; user probes: \
             {place}, {} calls per run",
            args.calls,
            (args.calls / 4).max(1)
        );
        if qemu_guest() {
            crate::oline!(
                "  this is a QEMU virtual machine: under TCG the CPU is emulated and so are \
                 these figures (compare the rows, not machines)"
            );
        }
        crate::oline!(
            "{:<10} {:>4} {:>5} {:>12} {:>12} {:>12} {:>10}",
            "probe",
            "args",
            "stack",
            "ns/call",
            "unprobed",
            "cost/hit",
            "hits"
        );
    }
    let mut bench = Bench {
        root: &root,
        view: &view,
        zero,
        runs: args.runs,
    };
    let mut rows = 0usize;
    for kind in kinds {
        let available = if kind.user() { uprobes } else { kprobes };
        if !available {
            crate::say!(
                "{}: this kernel has no {} events: not measured",
                kind.name(),
                if kind.user() { "uprobe" } else { "kprobe" }
            );
            continue;
        }
        let calls = if kind.user() {
            (args.calls / 4).max(1)
        } else {
            args.calls
        };
        for stack in [false, true] {
            for nargs in [0usize, 4, 8] {
                let def = definition(kind, nargs, &place);
                let (probed, base, hits) = bench
                    .measure(&def, kind.user(), stack, calls)
                    .with_context(|| format!("{}: {def}", kind.name()))?;
                let made = calls * args.runs;
                // kernel probes see other tasks' reads too; user probes on
                // this executable only this process's calls
                let ok = if kind.user() {
                    hits == made
                } else {
                    hits >= made
                };
                if !ok {
                    anyhow::bail!(
                        "{}: the kernel counted {hits} hit(s) for {made} call(s): the figure \
                         would not be the cost of one hit",
                        kind.name()
                    );
                }
                let row = Row {
                    kind,
                    args: nargs,
                    stack,
                    calls,
                    probed_ns: probed,
                    base_ns: base,
                    hits,
                };
                print_row(&row, args.json);
                rows += 1;
            }
        }
    }
    if rows == 0 {
        anyhow::bail!("nothing measured: this kernel has neither kprobe nor uprobe events");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_row(r: &Row, json: bool) {
    let cost = r.probed_ns - r.base_ns;
    if json {
        let v = serde_json::json!({
            "probe": r.kind.name(),
            "args": r.args,
            "stack": r.stack,
            "calls": r.calls,
            "ns_per_call": (r.probed_ns * 10.0).round() / 10.0,
            "unprobed_ns_per_call": (r.base_ns * 10.0).round() / 10.0,
            "cost_ns_per_hit": (cost * 10.0).round() / 10.0,
            "hits": r.hits,
        });
        crate::oline!("{v}");
    } else {
        crate::oline!(
            "{:<10} {:>4} {:>5} {:>12.1} {:>12.1} {:>12.1} {:>10}",
            r.kind.name(),
            r.args,
            if r.stack { "yes" } else { "no" },
            r.probed_ns,
            r.base_ns,
            cost,
            r.hits
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_of_each_kind() {
        assert_eq!(definition(Kind::Kprobe, 0, "x"), "p:bench vfs_read");
        assert_eq!(
            definition(Kind::Kprobe, 4, "x"),
            "p:bench vfs_read a0=arg1 a1=arg2 a2=arg3 a3=arg4"
        );
        assert_eq!(
            definition(Kind::Uretprobe, 2, "/bin/k:0x10"),
            "r:bench /bin/k:0x10 a0=$retval a1=$retval"
        );
        assert_eq!(definition(Kind::Kprobe, 8, "x").split(' ').count(), 10);
    }

    #[test]
    fn qemu_machines() {
        // the device tree's compatible is NUL-separated strings
        assert!(is_qemu("", b"linux,dummy-virt\0"));
        assert!(is_qemu("", b"riscv-virtio\0"));
        assert!(is_qemu("QEMU\n", b""));
        assert!(!is_qemu(
            "Dell Inc.\n",
            b"raspberrypi,4-model-b\0brcm,bcm2711\0"
        ));
    }

    #[test]
    fn the_user_target_is_found_in_this_executable() {
        let (path, off) = user_place().unwrap();
        assert!(Path::new(&path).exists(), "{path}");
        assert!(off > 0);
    }
}
