//! ktrace's own decoding of trace.dat files (pages from this crate,
//! ktrace-ring's page parser and merge, ktrace-event formats, ktrace-printer
//! text: the wiring of examples/report.rs) against `trace-cmd report` of the
//! same file: the same records, in the same order, with the same task, pid,
//! CPU, time stamp, event and fields. trace-cmd prints its own layout (no
//! flag column, probe addresses without 0x, return probes as `(func <-
//! ret)` from the print fmt where the kernel prints `(0xret <- 0xfunc)`), so
//! lines are compared field by field after that normalisation. The
//! reference is the report captured with the fixture and, when trace-cmd is
//! installed, trace-cmd's report of the file ktrace rewrote.

use ktrace_event::Events;
use ktrace_printer::{Comms, FlagStyle, NoSymbols, TextPrinter};
use ktrace_ring::{Merged, PageLayout, merge_streams};
use ktrace_tracedat::{Header, TraceDat, Writer, WriterOptions};
use std::io::Cursor;
use std::path::Path;
use std::process::Command;

/// Kernel-style text of every record of the file.
fn ktrace_text(bytes: Vec<u8>) -> String {
    let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
    let meta = dat.meta.clone();
    let buf = &meta.buffers[0];
    let layout =
        PageLayout::from_header_page(&String::from_utf8_lossy(&meta.header_page), meta.endian)
            .unwrap()
            .with_subbuf_size(buf.page_size as usize);
    let mut events = Events::new(layout.long_size);
    for s in &meta.systems {
        for f in &s.formats {
            events.add(&s.name, &String::from_utf8_lossy(f)).unwrap();
        }
    }
    let comms = Comms::from_saved_cmdlines(&String::from_utf8_lossy(&meta.cmdlines));
    let style = FlagStyle::for_release(meta.kernel_release().unwrap());
    let mut text = TextPrinter::new(&events, layout.endian, style, &NoSymbols, comms);
    let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
    for (i, c) in buf.cpus.iter().enumerate() {
        let bytes: Vec<u8> = dat.pages(0, i).unwrap().flat_map(Result::unwrap).collect();
        streams.push((c.cpu as usize, Box::new(Cursor::new(bytes))));
    }
    let mut out = Vec::new();
    merge_streams(layout, streams, &mut |m| match m {
        Merged::Record { cpu, ts, data } => text.write_record(&mut out, cpu, ts, data),
        Merged::Lost { cpu, missed } => text.write_lost(&mut out, cpu, missed),
        Merged::Bad { cpu, error } => panic!("cpu {cpu}: {error}"),
    })
    .unwrap();
    String::from_utf8(out).unwrap()
}

/// (comm, pid, cpu, time stamp, event, probe addresses sorted, fields)
type Row = (String, u32, u32, String, String, Vec<String>, String);

fn row(line: &str) -> Option<Row> {
    let (task, after) = line.split_once('[')?;
    let (comm, pid) = task.trim().rsplit_once('-')?;
    let (cpu, rest) = after.split_once(']')?;
    let mut words = rest.split_whitespace().peekable();
    // the kernel's flag column, when present, comes before the time stamp
    let ts = loop {
        let w = words.next()?;
        if let Some(t) = w.strip_suffix(':')
            && t.contains('.')
            && t.parse::<f64>().is_ok()
        {
            break t.to_string();
        }
    };
    let event = words.next()?.strip_suffix(':')?.to_string();
    let rest: Vec<&str> = words.collect();
    let rest = rest.join(" ");
    let (head, fields) = rest.strip_prefix('(')?.split_once(')')?;
    let mut addrs: Vec<String> = head
        .split("<-")
        .map(|a| a.trim().trim_start_matches("0x").to_string())
        .collect();
    addrs.sort();
    Some((
        comm.to_string(),
        pid.parse().ok()?,
        cpu.trim().parse().ok()?,
        ts,
        event,
        addrs,
        fields.trim().to_string(),
    ))
}

fn rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.contains('['))
        .map(|l| row(l).unwrap_or_else(|| panic!("unparsed line {l:?}")))
        .collect()
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

#[test]
fn ktrace_decoding_equals_trace_cmd_report() {
    for name in ["tc-v6", "tc-v7", "tc-v7-none", "tc-v7-zstd"] {
        let ours = ktrace_text(std::fs::read(fixture(&format!("{name}.dat"))).unwrap());
        let theirs = std::fs::read_to_string(fixture(&format!("{name}.report.txt"))).unwrap();
        let (a, b) = (rows(&ours), rows(&theirs));
        assert_eq!(a.len(), 80, "{name}: 40 entries and 40 returns");
        assert_eq!(a, b, "{name}");
    }
}

#[test]
fn trace_cmd_reports_a_ktrace_written_file_like_ktrace_decodes_it() {
    if Command::new("trace-cmd").arg("--version").output().is_err() {
        eprintln!("SKIPPED: trace-cmd is not installed (apt-get install trace-cmd)");
        return;
    }
    let mut dat = TraceDat::open(std::fs::File::open(fixture("tc-v7.dat")).unwrap()).unwrap();
    let h = Header::from_meta(&dat.meta);
    let path =
        std::env::temp_dir().join(format!("ktrace-tracedat-report-{}.dat", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let mut w = Writer::create(f, &h, 2, WriterOptions::default()).unwrap();
    for i in 0..2 {
        let pages: Vec<Vec<u8>> = dat.pages(0, i).unwrap().map(Result::unwrap).collect();
        for p in pages {
            w.append_pages(i, &p).unwrap();
        }
    }
    w.finish(None, &[]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() < 64 << 10,
        "the finished file is compact: {}",
        bytes.len()
    );
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "trace-cmd warned: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    assert_eq!(rows(&ktrace_text(bytes)), rows(&theirs));
}

/// Two trace-cmd zstd files corrupted by the hostile trial of issue 23
/// (fixtures/hang*-report-tc-v7-zstd.dat: tc-v7-zstd.dat with four or
/// eight bytes of CPU 0's pages set to 0xff) made the time stamps of CPU 0
/// go backwards, and merging its pages spun forever. Now the merge ends,
/// with the records before the damage, within a time limit.
#[test]
fn merging_corrupt_zstd_recordings_ends() {
    for name in ["hang-report-tc-v7-zstd", "hang2-report-tc-v7-zstd"] {
        let bytes = std::fs::read(fixture(&format!("{name}.dat"))).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut dat = TraceDat::open(Cursor::new(bytes)).unwrap();
            let meta = dat.meta.clone();
            let buf = &meta.buffers[0];
            let layout = PageLayout::from_header_page(
                &String::from_utf8_lossy(&meta.header_page),
                meta.endian,
            )
            .unwrap()
            .with_subbuf_size(buf.page_size as usize);
            let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
            for (i, c) in buf.cpus.iter().enumerate() {
                let bytes: Vec<u8> = dat.pages(0, i).unwrap().flatten().flatten().collect();
                streams.push((c.cpu as usize, Box::new(Cursor::new(bytes))));
            }
            let (mut records, mut bad) = (0, 0);
            let n = merge_streams(layout, streams, &mut |m| match m {
                Merged::Record { .. } => records += 1,
                Merged::Bad { .. } => bad += 1,
                Merged::Lost { .. } => {}
            });
            let _ = tx.send((n.map_err(|e| e.to_string()), records, bad));
        });
        let (n, records, bad) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{name}: merging hung"));
        assert_eq!(n, Ok(records), "{name}");
        assert!(records > 40 && records < 80, "{name}: {records} records");
        assert_eq!(bad, 1, "{name}: the damaged page is reported");
    }
}
