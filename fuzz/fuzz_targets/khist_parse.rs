//! Fuzz the parser of the kernel's `hist` files and `kprobe_profile`: no
//! input may panic, and what parses must write back and parse to the same
//! tables.
#![no_main]

use ktrace_aggregate::khist::{parse_hist, parse_kprobe_profile, write_hist};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_kprobe_profile(&text);
    if let Ok(tables) = parse_hist(&text) {
        let again = write_hist(&tables);
        if let Ok(back) = parse_hist(&again) {
            assert_eq!(back.len(), tables.len());
        }
    }
});
