//! Fuzz target: format-file and print-fmt parsing (C expressions and the
//! kernel's print helpers), then decoding and printing a record against
//! the parsed format (as a probe, an eprobe, a tracepoint and a syscall
//! event), must never panic. Input: format text, a NUL byte, record bytes.
#![no_main]

use ktrace_event::{Endian, Events, ProbeKind};
use ktrace_printer::{Comms, FlagStyle, JsonPrinter, NoSymbols, TextPrinter, write_raw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (text, record) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    for (system, kind) in [
        ("fuzz", ProbeKind::Uprobe),
        ("fuzz", ProbeKind::Kretprobe),
        ("fuzz", ProbeKind::Eprobe),
        ("fuzz", ProbeKind::Other),
        ("syscalls", ProbeKind::Other),
    ] {
        let mut events = Events::new(8);
        let Ok(ev) = events.add_with_kind(system, text, kind) else {
            return;
        };
        let id = ev.format.id.to_le_bytes();
        let mut rec = record.to_vec();
        if rec.len() >= 2 {
            rec[..2].copy_from_slice(&id);
        }
        let mut out = Vec::new();
        let mut tp = TextPrinter::new(&events, Endian::Little, FlagStyle::Lazy, &NoSymbols, Comms::new());
        tp.write_record(&mut out, 0, 1, &rec);
        let mut jp = JsonPrinter::new(&events, Endian::Little, &NoSymbols, Comms::new());
        jp.write_record(&mut out, 0, 1, &rec);
        write_raw(&mut out, &events, Endian::Little, 0, 1, &rec);
    }
});
