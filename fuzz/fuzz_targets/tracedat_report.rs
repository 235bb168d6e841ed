//! Fuzz target: `ktrace report` end to end on any bytes: the trace.dat
//! reader, the event formats from the file, the per-CPU replay of
//! ktrace-stream (merge, decode, filters: the loop that spun forever on two
//! corrupted trace-cmd files) and the text and JSON sinks of
//! ktrace-printer. Nothing may panic and the replay must end. Seeds:
//! crates/tracedat/fixtures/*.dat (scripts/fuzz copies them in).
#![no_main]

use ktrace_event::ProbeKind;
use ktrace_printer::{FlagStyle, JsonSink, NoSymbols, TextSink};
use ktrace_ring::PageLayout;
use ktrace_stream::{Comms, CpuPages, Decoder, EventTable, Options, Role, TaskNames, replay};
use ktrace_tracedat::TraceDat;
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(mut dat) = TraceDat::open(Cursor::new(data)) else {
        return;
    };
    let meta = dat.meta.clone();
    let Some(buffer) = meta.buffers.first() else {
        return;
    };
    let Ok(layout) =
        PageLayout::from_header_page(&String::from_utf8_lossy(&meta.header_page), meta.endian)
    else {
        return;
    };
    let layout = layout.with_subbuf_size(buffer.page_size as usize);
    for json in [false, true] {
        let mut table = EventTable::new(usize::from(meta.long_size), None);
        for f in &meta.ftrace_formats {
            let _ = table.add(
                "ftrace",
                &String::from_utf8_lossy(f),
                ProbeKind::Other,
                None,
                Role::Kernel,
            );
        }
        for s in &meta.systems {
            for (k, f) in s.formats.iter().enumerate() {
                let kind = [ProbeKind::Uprobe, ProbeKind::Kretprobe, ProbeKind::Other][k % 3];
                let _ = table.add(
                    &s.name,
                    &String::from_utf8_lossy(f),
                    kind,
                    None,
                    Role::Probe,
                );
            }
        }
        let comms = Comms::from_saved_cmdlines(&String::from_utf8_lossy(&meta.cmdlines));
        let mut dec = Decoder::new(
            layout,
            table,
            TaskNames::fixed(comms),
            Options::default(),
            Vec::new(),
        );
        let mut streams: Vec<CpuPages> = Vec::new();
        for (i, c) in buffer.cpus.iter().enumerate() {
            if let Ok(pages) = dat.pages(0, i) {
                let bytes: Vec<u8> = pages.take(256).flatten().flatten().collect();
                streams.push(((c.cpu % 64) as usize, Box::new(Cursor::new(bytes))));
            }
        }
        let _ = if json {
            replay(
                &mut dec,
                streams,
                &mut JsonSink::new(std::io::sink(), &NoSymbols),
            )
        } else {
            replay(
                &mut dec,
                streams,
                &mut TextSink::new(std::io::sink(), FlagStyle::Lazy, &NoSymbols, true),
            )
        };
        let _ = dec.take_warnings();
    }
});
