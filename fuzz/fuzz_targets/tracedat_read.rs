//! Fuzz target: the trace.dat reader must never panic, on metadata or on
//! pages (versions 6 and 7, compressed or not), and the pages of every CPU
//! must merge by time stamp to an end (ktrace-ring's `merge_streams`, the
//! loop two corrupted trace-cmd files made spin forever). Seeds:
//! crates/tracedat/fixtures/*.dat (scripts/fuzz copies them in).
#![no_main]

use ktrace_ring::{Merged, PageLayout, merge_streams};
use ktrace_tracedat::TraceDat;
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(mut dat) = TraceDat::open(Cursor::new(data)) else {
        return;
    };
    let _ = (dat.meta.clock(), dat.meta.uname(), dat.meta.cpu_stats());
    let layout = PageLayout::from_header_page(
        &String::from_utf8_lossy(&dat.meta.header_page),
        dat.meta.endian,
    )
    .ok();
    for b in 0..dat.meta.buffers.len() {
        let mut streams: Vec<(usize, Box<dyn std::io::Read>)> = Vec::new();
        for i in 0..dat.meta.buffers[b].cpus.len() {
            let cpu = dat.meta.buffers[b].cpus[i].cpu as usize;
            if let Ok(pages) = dat.pages(b, i) {
                let bytes: Vec<u8> = pages.take(256).flatten().flatten().collect();
                streams.push((cpu % 64, Box::new(Cursor::new(bytes))));
            }
        }
        let Some(layout) = layout else { continue };
        let layout = layout.with_subbuf_size(dat.meta.buffers[b].page_size as usize);
        let mut n = 0u64;
        let _ = merge_streams(layout, streams, &mut |m| {
            if let Merged::Record { ts, .. } = m {
                n = n.wrapping_add(ts);
            }
        });
    }
});
