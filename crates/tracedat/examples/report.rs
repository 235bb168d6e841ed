//! Prints a trace.dat file (trace-cmd's or ktrace's) as the kernel's `trace`
//! text, through ktrace's own decoding, streaming: pages from [`ktrace_tracedat`], page
//! layout from the file's header_page (ktrace-ring), formats from the file
//! (ktrace-event), lines from ktrace-printer's TextPrinter, CPUs merged by
//! time stamp. A wiring sketch for `ktrace report`, not the command itself.
//!
//!     cargo run -p ktrace-tracedat --example report -- FILE

use ktrace_event::Events;
use ktrace_printer::{Comms, FlagStyle, NoSymbols, TextPrinter};
use ktrace_ring::{Merged, PageLayout, merge_streams};
use ktrace_tracedat::TraceDat;
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: report FILE")?;
    let dat = TraceDat::open(std::io::BufReader::new(std::fs::File::open(&path)?))?;
    let meta = dat.meta.clone();
    let buffer = meta
        .buffers
        .first()
        .ok_or("the file has no flyrecord buffer")?;
    let layout =
        PageLayout::from_header_page(&String::from_utf8_lossy(&meta.header_page), meta.endian)?
            .with_subbuf_size(buffer.page_size as usize);
    let mut events = Events::new(layout.long_size);
    for f in &meta.ftrace_formats {
        // ftrace's own events (function, kernel_stack, ...): best effort
        let _ = events.add("ftrace", &String::from_utf8_lossy(f));
    }
    for s in &meta.systems {
        for f in &s.formats {
            events.add(&s.name, &String::from_utf8_lossy(f))?;
        }
    }
    let comms = Comms::from_saved_cmdlines(&String::from_utf8_lossy(&meta.cmdlines));
    let style = FlagStyle::for_release(meta.kernel_release().unwrap_or(""));
    let mut text = TextPrinter::new(&events, layout.endian, style, &NoSymbols, comms);
    text.time_in_ns = ktrace_printer::clock_in_ns(meta.clock().unwrap_or("local"));
    // one stream per CPU, each its own handle on the file, read lazily
    // (about one page per CPU in memory)
    let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
    for (i, c) in buffer.cpus.iter().enumerate() {
        let f = TraceDat::open(std::io::BufReader::with_capacity(
            1 << 16,
            std::fs::File::open(&path)?,
        ))?;
        streams.push((c.cpu as usize, Box::new(f.into_pages(0, i)?)));
    }
    drop(dat);
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut out = Vec::with_capacity(1 << 17);
    let mut err = None;
    merge_streams(layout, streams, &mut |m| {
        match m {
            Merged::Record { cpu, ts, data } => text.write_record(&mut out, cpu, ts, data),
            Merged::Lost { cpu, missed } => text.write_lost(&mut out, cpu, missed),
            Merged::Bad { cpu, error } => eprintln!("cpu {cpu}: {error}"),
        }
        if out.len() > 120_000 {
            if let Err(e) = w.write_all(&out) {
                err = Some(e);
            }
            out.clear();
        }
    })?;
    w.write_all(&out)?;
    w.flush()?;
    if let Some(e) = err {
        return Err(e.into());
    }
    Ok(())
}
