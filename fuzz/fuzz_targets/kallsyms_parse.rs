//! /proc/kallsyms text must parse or fail, never panic, line by line too.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ktrace_symbols::kallsyms::Kallsyms::parse(text);
    for line in text.lines() {
        let _ = ktrace_symbols::kallsyms::parse_line(line);
    }
    let _ = ktrace_symbols::kallsyms::SymbolCounts::scan(text, ["vfs_read", "do_sys_openat2"]);
});
