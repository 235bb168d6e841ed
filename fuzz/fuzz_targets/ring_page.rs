//! Fuzz target: sub-buffer page decoding and merging must never panic,
//! and merging per-CPU streams of pages must end (a CPU whose time stamps
//! go backwards once made it spin forever). The first byte picks byte
//! order, long size and sub-buffer size; the rest is the page, then the
//! two halves are two CPUs' streams of pages.
#![no_main]

use ktrace_ring::{Endian, Merged, Merger, Page, PageLayout, merge_streams};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, page)) = data.split_first() else {
        return;
    };
    let long_size = if sel & 1 == 0 { 8 } else { 4 };
    let layout = PageLayout {
        endian: if sel & 2 == 0 {
            Endian::Little
        } else {
            Endian::Big
        },
        long_size,
        commit_offset: 8,
        data_offset: 8 + long_size,
        subbuf_size: [4096, 64, 128, 256][usize::from(sel >> 2 & 3)],
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
    let _ = merge_streams(
        layout,
        vec![
            (0, Box::new(std::io::Cursor::new(page[..half].to_vec()))),
            (1, Box::new(std::io::Cursor::new(page[half..].to_vec()))),
        ],
        &mut |it| {
            if let Merged::Record { ts, .. } = it {
                n = n.wrapping_add(ts);
            }
        },
    );
});
