//! Decodes a directory of captured sub-buffers to kernel-style text (or
//! `--json`, `--raw`) on stdout, streaming with about one page per CPU in
//! memory. The directory holds `header_page`, `cpuN.raw` (pages from
//! `per_cpu/cpuN/trace_pipe_raw`), one `<event>.format` per event,
//! optionally `saved_cmdlines`, and `info.txt` with `uname -r: ...` and the
//! probe definitions (as in crates/ring/fixtures/ and the capture scripts).
//!
//!     cargo run --release -p ktrace-printer --example decode_dir -- DIR [--json|--raw]

use ktrace_event::{Endian, Events, ProbeKind};
use ktrace_printer::{
    Comms, FlagStyle, JsonPrinter, LostSummary, NoSymbols, SyscallStyle, TextPrinter, write_raw,
};
use ktrace_ring::{Merged, PageLayout, merge_streams};
use std::io::Write;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: decode_dir DIR [--json|--raw]")?);
    let mode = args.next().unwrap_or_default();
    // decided once, not per record
    let (json_mode, raw_mode) = (mode == "--json", mode == "--raw");
    let info = std::fs::read_to_string(dir.join("info.txt")).unwrap_or_default();
    let release = info
        .lines()
        .find_map(|l| l.strip_prefix("uname -r: "))
        .unwrap_or("6.18")
        .to_string();
    let layout = PageLayout::from_header_page(
        &std::fs::read_to_string(dir.join("header_page"))?,
        Endian::Little,
    )?;
    let mut events = Events::new(layout.long_size);
    let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
    for e in std::fs::read_dir(&dir)? {
        let path = e?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if let Some(ev) = name.strip_suffix(".format") {
            let def = info.lines().find(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|h| h.ends_with(&format!("/{ev}")))
            });
            let (system, kind) = match def {
                Some(d) => (
                    d.split(':')
                        .nth(1)
                        .and_then(|s| s.split('/').next())
                        .unwrap_or(""),
                    ProbeKind::from_dynamic_event(d),
                ),
                None => ("", ProbeKind::Other),
            };
            events.add_with_kind(system, &std::fs::read_to_string(&path)?, kind)?;
        } else if let Some(cpu) = name
            .strip_prefix("cpu")
            .and_then(|n| n.strip_suffix(".raw"))
        {
            let f = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(&path)?);
            streams.push((cpu.parse()?, Box::new(f)));
        }
    }
    let comms = Comms::from_saved_cmdlines(
        &std::fs::read_to_string(dir.join("saved_cmdlines")).unwrap_or_default(),
    );
    let style = FlagStyle::for_release(&release);
    let mut text = TextPrinter::new(&events, layout.endian, style, &NoSymbols, comms.clone());
    text.syscall_style = SyscallStyle::for_release(&release);
    let mut json = JsonPrinter::new(&events, layout.endian, &NoSymbols, comms);
    // `buf` is the only buffer: it is handed to stdout whole (stdout's
    // line buffering passes writes that end in a newline straight through)
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut buf = Vec::with_capacity(1 << 17);
    let mut summary = LostSummary::new();
    let mut err = None;
    merge_streams(layout, streams, &mut |m| {
        match m {
            Merged::Record { cpu, ts, data } => {
                summary.events += 1;
                if json_mode {
                    json.write_record(&mut buf, cpu, ts, data);
                } else if raw_mode {
                    write_raw(&mut buf, &events, layout.endian, cpu, ts, data);
                } else {
                    text.write_record(&mut buf, cpu, ts, data);
                }
            }
            Merged::Lost { cpu, missed } => {
                summary.add_missed(cpu, missed);
                text.write_lost(&mut buf, cpu, missed);
            }
            Merged::Bad { cpu, error } => eprintln!("cpu {cpu}: {error}"),
        }
        if buf.len() > 120_000 {
            if let Err(e) = w.write_all(&buf) {
                err = Some(e);
            }
            buf.clear();
        }
    })?;
    w.write_all(&buf)?;
    w.flush()?;
    if let Some(e) = err {
        return Err(e.into());
    }
    eprintln!("{}", summary.line());
    Ok(())
}
