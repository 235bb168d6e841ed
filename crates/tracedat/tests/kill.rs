//! A recorder killed with SIGKILL leaves a file that reads up to the last
//! page written: a child process (this test binary again) records the pages
//! of a real trace-cmd fixture into a real file with the default chunked
//! layout, over and over, until the parent kills it with SIGKILL in the
//! middle of the appends. The file must then be about as long as its data
//! (no sparse regions far out), open, and every CPU must yield only whole
//! pages that ktrace-ring parses, at least the pages the child said it had
//! written; `trace-cmd report` must refuse it (it is not yet a version 6
//! file) and, once `Writer::recover` has finished it, print every record.
//! The same for a finished file cut at every 512-byte boundary: a clear
//! error or the pages before the cut, never a panic.

use ktrace_ring::{Page, PageLayout};
use ktrace_tracedat::{Header, TraceDat, Writer, WriterOptions};
use std::io::{BufRead, Cursor, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn fixture_pages() -> (Header, Vec<Vec<Vec<u8>>>, Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tc-v6.dat");
    let mut dat = TraceDat::open(std::fs::File::open(path).unwrap()).unwrap();
    let header = Header::from_meta(&dat.meta);
    let stats = dat.meta.cpu_stats().iter().map(|s| s.to_string()).collect();
    let mut cpus = Vec::new();
    for i in 0..dat.meta.buffers[0].cpus.len() {
        cpus.push(dat.pages(0, i).unwrap().map(Result::unwrap).collect());
    }
    (header, cpus, stats)
}

/// The child: records until killed (or 20 s).
fn child(path: &str) {
    let (header, cpus, _) = fixture_pages();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap();
    let mut w = Writer::create(f, &header, cpus.len(), WriterOptions::default()).unwrap();
    let mut out = std::io::stdout().lock();
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(20) {
        for (cpu, pages) in cpus.iter().enumerate() {
            for p in pages {
                w.append_pages(cpu, p).unwrap();
                n += 1;
            }
        }
        // the parent kills after reading this many pages
        writeln!(out, "{n}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_leaves_a_readable_file() {
    if let Ok(path) = std::env::var("KTRACE_TRACEDAT_KILL_CHILD") {
        child(&path);
        return;
    }
    let dir = std::env::temp_dir().join(format!("ktrace-tracedat-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("killed.dat");
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigkill_leaves_a_readable_file",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KTRACE_TRACEDAT_KILL_CHILD", &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(c.stdout.take().unwrap()).lines();
    let mut written = 0u64;
    for l in lines.by_ref() {
        let l = l.unwrap();
        if let Ok(n) = l.trim().parse::<u64>() {
            written = n;
            if n >= 2000 {
                break;
            }
        }
    }
    // SIGKILL while the child is still appending
    sigkill(c.id());
    let status = c.wait().unwrap();
    assert!(!status.success(), "the child was killed");
    assert!(written >= 2000, "child reported {written} pages");

    let (header, _, _) = fixture_pages();
    let layout =
        PageLayout::from_header_page(&String::from_utf8_lossy(&header.header_page), header.endian)
            .unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let mut dat = TraceDat::open(std::fs::File::open(&path).unwrap()).unwrap();
    assert!(dat.meta.cpu_stats().is_empty(), "no stats before finish");
    assert!(dat.meta.unfinished.is_some());
    let page_size = u64::from(dat.meta.page_size);
    let mut pages = 0u64;
    let mut records = 0usize;
    for i in 0..dat.meta.buffers[0].cpus.len() {
        for p in dat.pages(0, i).unwrap() {
            let p = p.expect("only whole pages are in the chunks");
            records += Page::parse(layout, &p).unwrap().records().count();
            pages += 1;
        }
    }
    assert!(
        pages >= written,
        "{pages} pages read, child wrote at least {written}"
    );
    assert!(records > 0);
    // each CPU's last chunk may be partly empty, at most 4 MiB each
    let cpus = dat.meta.buffers[0].cpus.len() as u64;
    assert!(
        len <= pages * page_size + cpus * (4 << 20) + (1 << 20),
        "the recording grows with its data: {len} bytes for {pages} pages"
    );
    let have_trace_cmd = Command::new("trace-cmd").arg("--version").output().is_ok();
    if have_trace_cmd {
        let out = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "trace-cmd refuses an unfinished recording: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    } else {
        eprintln!("SKIPPED trace-cmd part: trace-cmd is not installed");
    }
    // the killed recording finished afterwards: compact, same records,
    // every one of them in trace-cmd's report
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    Writer::recover(f).unwrap().finish(None, &[]).unwrap();
    let len2 = std::fs::metadata(&path).unwrap().len();
    assert!(
        len2 < (pages + 64) * page_size,
        "compact after recovery: {len2} bytes for {pages} pages"
    );
    let mut again = TraceDat::open(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(again.meta.unfinished, None);
    let mut records2 = 0;
    for i in 0..again.meta.buffers[0].cpus.len() {
        for p in again.pages(0, i).unwrap() {
            records2 += Page::parse(layout, &p.unwrap()).unwrap().records().count();
        }
    }
    assert_eq!(records2, records);
    if have_trace_cmd {
        let out = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(": ent:") || l.contains(": ret:"))
            .count();
        assert_eq!(
            lines, records,
            "trace-cmd reports every record of the recovered file"
        );
    }
    // a finished file is not reopened for recording
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap()
    };
    let done = std::fs::read(&path).unwrap();
    let e = Writer::recover(open()).unwrap_err().to_string();
    assert!(
        e.starts_with("bad trace.dat: not an unfinished ktrace recording"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), done, "and left as it is");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn sigkill(pid: u32) {
    let st = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn finished_file_cut_anywhere_reads_or_errors() {
    let (header, cpus, stats) = fixture_pages();
    let opts = WriterOptions::default();
    let mut w = Writer::create(Cursor::new(Vec::new()), &header, cpus.len(), opts).unwrap();
    for (cpu, pages) in cpus.iter().enumerate() {
        for p in pages {
            w.append_pages(cpu, p).unwrap();
        }
    }
    let full = w.finish(None, &stats).unwrap().into_inner();
    let total: usize = cpus.iter().map(Vec::len).sum();
    for cut in (0..full.len()).step_by(512) {
        let Ok(mut dat) = TraceDat::open(Cursor::new(full[..cut].to_vec())) else {
            continue;
        };
        let mut whole = 0;
        for i in 0..dat.meta.buffers[0].cpus.len() {
            for p in dat.pages(0, i).unwrap() {
                match p {
                    Ok(p) => {
                        assert_eq!(p.len(), header.page_size as usize);
                        whole += 1;
                    }
                    Err(e) => assert!(e.to_string().contains("truncated"), "{e}"),
                }
            }
        }
        assert!(
            whole < total || cut >= full.len() - 1,
            "cut at {cut}: {whole} pages"
        );
    }
}

#[test]
fn recording_file_cut_mid_page_reads_whole_pages() {
    // the file as the kernel's page cache holds it after a crash in the
    // middle of a page write: table says N pages, the last one is cut
    let (header, cpus, _) = fixture_pages();
    let opts = WriterOptions::default();
    let mut w = Writer::create(Cursor::new(Vec::new()), &header, 1, opts).unwrap();
    for p in &cpus[0] {
        w.append_pages(0, p).unwrap();
    }
    let bytes = w.finish(None, &[]).unwrap().into_inner();
    let cut = bytes.len() - 100;
    let mut dat = TraceDat::open(Cursor::new(bytes[..cut].to_vec())).unwrap();
    let got: Vec<_> = dat.pages(0, 0).unwrap().collect();
    assert_eq!(got.len(), cpus[0].len(), "whole pages, then the error");
    assert!(got[..got.len() - 1].iter().all(Result::is_ok));
    let e = got.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(e.starts_with("cpu 0: data truncated"), "{e}");
}
