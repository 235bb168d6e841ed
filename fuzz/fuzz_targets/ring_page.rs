//! Fuzz target: sub-buffer page decoding and merging must never panic.
//! The first byte picks byte order and long size; the rest is the page.
#![no_main]

use ktrace_ring::{Endian, Merged, Merger, Page, PageLayout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, page)) = data.split_first() else {
        return;
    };
    let long_size = if sel & 1 == 0 { 8 } else { 4 };
    let layout = PageLayout {
        endian: if sel & 2 == 0 { Endian::Little } else { Endian::Big },
        long_size,
        commit_offset: 8,
        data_offset: 8 + long_size,
        subbuf_size: 4096,
    };
    if let Ok(p) = Page::parse(layout, page) {
        let _ = p.missed.count();
        for r in p.records() {
            if r.is_err() {
                break;
            }
        }
    }
    let mut m = Merger::new(layout);
    let half = page.len() / 2;
    m.push(0, page[..half].to_vec());
    m.push(1, page[half..].to_vec());
    let mut n = 0u64;
    m.flush(&mut |it| {
        if let Merged::Record { ts, .. } = it {
            n = n.wrapping_add(ts);
        }
    });
});
