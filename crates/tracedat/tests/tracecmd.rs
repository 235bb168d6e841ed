//! trace.dat files written by the host's trace-cmd 3.1 (fixtures/, see
//! fixtures/capture.sh) read by this crate, written again by this crate's
//! version 6 writer, and printed by `trace-cmd report`: the output must be
//! byte-identical to trace-cmd's report of its own file (captured in
//! fixtures/*.report.txt at capture time). Without trace-cmd on the host
//! the tests that run it say so loudly and return.

use ktrace_tracedat::{Compress7, Header, TraceDat, Writer, WriterOptions, write_v7};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: [&str; 4] = ["tc-v6", "tc-v7", "tc-v7-none", "tc-v7-zstd"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn have_trace_cmd() -> bool {
    let ok = Command::new("trace-cmd").arg("--version").output().is_ok();
    if !ok {
        eprintln!("SKIPPED: trace-cmd is not installed (apt-get install trace-cmd)");
    }
    ok
}

/// `trace-cmd report -i FILE` stdout.
fn report(file: &Path) -> String {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(file)
        .output()
        .expect("run trace-cmd report");
    assert!(
        out.status.success(),
        "trace-cmd report {file:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 report")
}

/// Reads `name` with [`TraceDat`] and writes it again with [`Writer`].
fn rewrite(name: &str) -> (TraceDat<Cursor<Vec<u8>>>, Vec<u8>) {
    let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
    let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
    let header = Header::from_meta(&dat.meta);
    let ncpu = dat.meta.buffers[0].cpus.len();
    let opts = WriterOptions {
        first_chunk: 1 << 16,
        max_chunk: 1 << 20,
        slack: 4096,
    };
    let mut w = Writer::create(Cursor::new(Vec::new()), &header, ncpu, opts).unwrap();
    for i in 0..ncpu {
        let cpu = dat.meta.buffers[0].cpus[i].cpu as usize;
        for page in dat.pages(0, i).unwrap() {
            w.append_pages(cpu, &page.unwrap()).unwrap();
        }
    }
    let stats: Vec<String> = dat.meta.cpu_stats().iter().map(|s| s.to_string()).collect();
    let cmdlines = dat.meta.cmdlines.clone();
    let out = w.finish(Some(&cmdlines), &stats).unwrap().into_inner();
    (dat, out)
}

#[test]
fn reads_every_trace_cmd_fixture() {
    for name in FIXTURES {
        let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
        let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
        let m = &dat.meta;
        assert_eq!(m.version, if name == "tc-v6" { 6 } else { 7 }, "{name}");
        assert!(
            String::from_utf8_lossy(&m.header_page).contains("field: u64 timestamp;"),
            "{name}"
        );
        assert!(
            String::from_utf8_lossy(&m.header_event).contains("type_len"),
            "{name}"
        );
        assert_eq!(m.ftrace_formats.len(), 18, "{name}: ftrace formats");
        assert_eq!(m.systems.len(), 1, "{name}");
        assert!(m.systems[0].name.starts_with("ktdat_"), "{name}");
        assert_eq!(m.systems[0].formats.len(), 2, "{name}: ent and ret");
        assert_eq!(
            m.kallsyms
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count(),
            200,
            "{name}"
        );
        assert!(
            String::from_utf8_lossy(&m.cmdlines).contains("kfix_target"),
            "{name}"
        );
        assert_eq!(m.clock(), Some("local"), "{name}");
        assert!(m.uname().unwrap().contains("x86_64"), "{name}");
        assert_eq!(m.cpu_stats().len(), 2, "{name}");
        assert_eq!(m.buffers.len(), 1, "{name}");
        assert_eq!(m.buffers[0].cpus.len(), 2, "{name}");
        assert_eq!(
            m.compression.as_ref().map(|c| c.0.name()),
            match name {
                "tc-v7" | "tc-v7-zstd" => Some("zstd"),
                _ => None,
            }
        );
        let mut pages = 0;
        for i in 0..2 {
            for p in dat.pages(0, i).unwrap() {
                assert_eq!(p.unwrap().len(), 4096);
                pages += 1;
            }
        }
        assert!(pages >= 2, "{name}: {pages} pages");
        // the owned stream of a CPU reads the same bytes as its pages
        for i in 0..2 {
            let joined: Vec<u8> = dat.pages(0, i).unwrap().flat_map(Result::unwrap).collect();
            let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
            let mut r = TraceDat::open(Cursor::new(bytes))
                .unwrap()
                .into_pages(0, i)
                .unwrap();
            let mut streamed = Vec::new();
            std::io::Read::read_to_end(&mut r, &mut streamed).unwrap();
            assert_eq!(streamed, joined, "{name} cpu index {i}");
        }
    }
}

#[test]
fn trace_cmd_reports_rewritten_files_identically() {
    if !have_trace_cmd() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("ktrace-tracedat-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in FIXTURES {
        let (_, out) = rewrite(name);
        let path = dir.join(format!("{name}.ktrace.dat"));
        std::fs::write(&path, &out).unwrap();
        let ours = report(&path);
        let theirs = report(&fixture(&format!("{name}.dat")));
        let captured = std::fs::read_to_string(fixture(&format!("{name}.report.txt"))).unwrap();
        assert_eq!(
            theirs, captured,
            "{name}: trace-cmd's own report changed since capture"
        );
        assert_eq!(ours, theirs, "{name}: report of the rewritten file differs");
        assert!(
            ours.lines().filter(|l| l.contains(" ent: ")).count() == 40,
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rewritten_file_reads_back_the_same() {
    for name in FIXTURES {
        let (mut dat, out) = rewrite(name);
        let mut again = TraceDat::open(Cursor::new(out)).unwrap();
        assert_eq!(again.meta.version, 6);
        assert_eq!(again.meta.header_page, dat.meta.header_page);
        assert_eq!(again.meta.systems, dat.meta.systems);
        assert_eq!(again.meta.ftrace_formats, dat.meta.ftrace_formats);
        assert_eq!(again.meta.kallsyms, dat.meta.kallsyms);
        assert_eq!(again.meta.printk_formats, dat.meta.printk_formats);
        assert_eq!(again.meta.cmdlines, dat.meta.cmdlines);
        assert_eq!(again.meta.cpu_stats(), dat.meta.cpu_stats());
        assert_eq!(again.meta.clock(), dat.meta.clock());
        assert_eq!(again.meta.uname(), dat.meta.uname());
        for i in 0..2 {
            let a: Vec<_> = dat.pages(0, i).unwrap().map(Result::unwrap).collect();
            let b: Vec<_> = again.pages(0, i).unwrap().map(Result::unwrap).collect();
            assert_eq!(a, b, "{name}: cpu index {i}");
        }
    }
}

#[test]
fn trace_cmd_skips_ktrace_option_silently() {
    if !have_trace_cmd() {
        return;
    }
    let bytes = std::fs::read(fixture("tc-v6.dat")).unwrap();
    let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
    let mut header = Header::from_meta(&dat.meta);
    let defs = "p:ktrace_1/ent /bin/x:0x1136 a=%di\nr:ktrace_1/ret /bin/x:0x1136 rv=$retval\n";
    header.options.push(ktrace_tracedat::TraceOption::text(
        ktrace_tracedat::option::KTRACE_DYNAMIC_EVENTS,
        defs,
    ));
    let mut w = Writer::create(
        Cursor::new(Vec::new()),
        &header,
        2,
        WriterOptions {
            first_chunk: 1 << 16,
            max_chunk: 1 << 20,
            slack: 0,
        },
    )
    .unwrap();
    for i in 0..2 {
        let pages: Vec<_> = dat.pages(0, i).unwrap().map(Result::unwrap).collect();
        for p in pages {
            w.append_pages(i, &p).unwrap();
        }
    }
    let out = w.finish(None, &[]).unwrap().into_inner();
    let back = TraceDat::open(Cursor::new(out.clone())).unwrap();
    let opt = back
        .meta
        .options
        .iter()
        .find(|o| o.id == ktrace_tracedat::option::KTRACE_DYNAMIC_EVENTS)
        .unwrap();
    assert_eq!(opt.data, [defs.as_bytes(), b"\0"].concat());
    let path = std::env::temp_dir().join(format!("ktrace-tracedat-opt-{}.dat", std::process::id()));
    std::fs::write(&path, &out).unwrap();
    let r = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(r.status.success());
    assert!(
        r.stderr.is_empty(),
        "trace-cmd warned: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        String::from_utf8(r.stdout).unwrap(),
        report(&fixture("tc-v6.dat"))
    );
}

#[test]
fn version_7_written_here_reports_identically() {
    let dir = std::env::temp_dir().join(format!("ktrace-tracedat-v7-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tc = have_trace_cmd();
    for name in FIXTURES {
        let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
        let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
        let header = Header::from_meta(&dat.meta);
        let mut cpus = Vec::new();
        for i in 0..dat.meta.buffers[0].cpus.len() {
            let b: Vec<u8> = dat.pages(0, i).unwrap().flat_map(Result::unwrap).collect();
            cpus.push((dat.meta.buffers[0].cpus[i].cpu, b));
        }
        let stats: Vec<String> = dat.meta.cpu_stats().iter().map(|s| s.to_string()).collect();
        let refs: Vec<(u32, &[u8])> = cpus.iter().map(|(c, b)| (*c, &b[..])).collect();
        for (tag, comp) in [
            ("none", Compress7::None),
            ("zstd", Compress7::Zstd("1.5.4")),
            ("zlib", Compress7::Zlib("1.2.13")),
        ] {
            let out = write_v7(
                Cursor::new(Vec::new()),
                &header,
                &dat.meta.cmdlines,
                &stats,
                &refs,
                comp,
            )
            .unwrap()
            .into_inner();
            // our reader
            let mut back = TraceDat::open(Cursor::new(out.clone())).unwrap();
            assert_eq!(back.meta.version, 7);
            assert_eq!(
                back.meta
                    .compression
                    .as_ref()
                    .map_or("none", |c| c.0.name()),
                tag
            );
            assert_eq!(back.meta.systems, dat.meta.systems);
            assert_eq!(back.meta.kallsyms, dat.meta.kallsyms);
            assert_eq!(back.meta.cmdlines, dat.meta.cmdlines);
            assert_eq!(back.meta.cpu_stats(), dat.meta.cpu_stats());
            assert_eq!(back.meta.clock(), Some("local"));
            for (i, (_, b)) in cpus.iter().enumerate() {
                let got: Vec<u8> = back.pages(0, i).unwrap().flat_map(Result::unwrap).collect();
                assert_eq!(&got, b, "{name} {tag} cpu index {i}");
            }
            // Debian's trace-cmd 3.1.6 has no zlib: our reader is the check
            if tc && tag != "zlib" {
                let path = dir.join(format!("{name}-{tag}.dat"));
                std::fs::write(&path, &out).unwrap();
                let r = Command::new("trace-cmd")
                    .args(["report", "-i"])
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(
                    r.status.success(),
                    "{name} {tag}: {}",
                    String::from_utf8_lossy(&r.stderr)
                );
                assert!(
                    r.stderr.is_empty(),
                    "{name} {tag}: {}",
                    String::from_utf8_lossy(&r.stderr)
                );
                assert_eq!(
                    String::from_utf8(r.stdout).unwrap(),
                    report(&fixture(&format!("{name}.dat"))),
                    "{name} {tag}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording made with [`Writer`] and finished as version 7 with zstd
/// (`Writer::finish_v7`, what `ktrace record` does by default): trace-cmd
/// reports it exactly as it reports its own file.
#[test]
fn recording_finished_as_zstd_v7_reports_identically() {
    let dir = std::env::temp_dir().join(format!("ktrace-tracedat-f7-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tc = have_trace_cmd();
    for name in FIXTURES {
        let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
        let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
        let header = Header::from_meta(&dat.meta);
        let ncpu = dat.meta.buffers[0].cpus.len();
        let opts = WriterOptions {
            first_chunk: 4096,
            max_chunk: 1 << 16,
            slack: 0,
        };
        let mut w = Writer::create(Cursor::new(Vec::new()), &header, ncpu, opts).unwrap();
        // the CPUs' pages interleaved, one page at a time
        let mut per_cpu: Vec<Vec<Vec<u8>>> = (0..ncpu)
            .map(|i| dat.pages(0, i).unwrap().map(Result::unwrap).collect())
            .collect();
        while per_cpu.iter().any(|p| !p.is_empty()) {
            for (i, pages) in per_cpu.iter_mut().enumerate() {
                if !pages.is_empty() {
                    let cpu = dat.meta.buffers[0].cpus[i].cpu as usize;
                    w.append_pages(cpu, &pages.remove(0)).unwrap();
                }
            }
        }
        let stats: Vec<String> = dat.meta.cpu_stats().iter().map(|s| s.to_string()).collect();
        let (_, out) = w
            .finish_v7(
                Cursor::new(Vec::new()),
                Some(&dat.meta.cmdlines),
                &stats,
                Compress7::Zstd(ktrace_tracedat::ZSTD_VERSION),
            )
            .unwrap();
        let out = out.into_inner();
        let back = TraceDat::open(Cursor::new(out.clone())).unwrap();
        assert_eq!(back.meta.version, 7);
        if tc {
            let path = dir.join(format!("{name}.dat"));
            std::fs::write(&path, &out).unwrap();
            let r = Command::new("trace-cmd")
                .args(["report", "-i"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                r.status.success() && r.stderr.is_empty(),
                "{name}: {}",
                String::from_utf8_lossy(&r.stderr)
            );
            assert_eq!(
                String::from_utf8(r.stdout).unwrap(),
                report(&fixture(&format!("{name}.dat"))),
                "{name}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn larger_sub_buffers_report_identically() {
    // instances with buffer_subbuf_size_kb above the page size (6.8+) hand
    // out larger pages; the file's page size is then the sub-buffer size.
    // Real 4 KB pages padded to 8 KB stand for them (commit stays as the
    // kernel wrote it).
    if !have_trace_cmd() {
        return;
    }
    let bytes = std::fs::read(fixture("tc-v6.dat")).unwrap();
    let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
    let mut header = Header::from_meta(&dat.meta);
    header.page_size = 8192;
    let mut w = Writer::create(
        Cursor::new(Vec::new()),
        &header,
        2,
        WriterOptions {
            first_chunk: 1 << 16,
            max_chunk: 1 << 20,
            slack: 0,
        },
    )
    .unwrap();
    for i in 0..2 {
        let pages: Vec<_> = dat.pages(0, i).unwrap().map(Result::unwrap).collect();
        for mut p in pages {
            p.resize(8192, 0);
            w.append_pages(i, &p).unwrap();
        }
    }
    let out = w.finish(None, &[]).unwrap().into_inner();
    let path = std::env::temp_dir().join(format!("ktrace-tracedat-8k-{}.dat", std::process::id()));
    std::fs::write(&path, &out).unwrap();
    let r = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        String::from_utf8(r.stdout).unwrap(),
        report(&fixture("tc-v6.dat"))
    );
}
