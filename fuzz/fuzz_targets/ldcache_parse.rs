//! /etc/ld.so.cache (old and new formats) must parse or fail, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = ktrace_symbols::ldcache::parse(data) {
        let _ = ktrace_symbols::ldcache::lookup(&entries, "libc", ktrace_symbols::ldcache::host_flags());
    }
});
