//! Fuzz target: the trace.dat reader must never panic, on metadata or on
//! pages (versions 6 and 7, compressed or not). Seed the corpus with
//! crates/tracedat/fixtures/*.dat.
#![no_main]

use ktrace_tracedat::TraceDat;
use libfuzzer_sys::fuzz_target;
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Ok(mut dat) = TraceDat::open(Cursor::new(data)) else {
        return;
    };
    let _ = (dat.meta.clock(), dat.meta.uname(), dat.meta.cpu_stats());
    for b in 0..dat.meta.buffers.len() {
        for i in 0..dat.meta.buffers[b].cpus.len() {
            if let Ok(pages) = dat.pages(b, i) {
                for p in pages.take(1000) {
                    let _ = p;
                }
            }
        }
    }
});
