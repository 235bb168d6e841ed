//! /proc/PID/maps text must parse or fail, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(maps) = ktrace_symbols::maps::parse(text) {
        let _ = ktrace_symbols::maps::find(&maps, 0x7f00_0000_0000);
        let _ = ktrace_symbols::maps::libraries(&maps, "libc");
    }
});
