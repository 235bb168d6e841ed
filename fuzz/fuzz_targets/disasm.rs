//! Fuzz target: any bytes as machine code on every architecture ktrace
//! decodes. Decoding, the boundary list and the boundary check of every
//! offset must never panic, and the instructions must tile the input.
#![no_main]

use ktrace_disasm::{Isa, boundary, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for arch in Isa::ALL {
        let insns = decode(arch, data, 0xffff_ffff_8100_0000);
        let covered: u64 = insns.iter().map(|i| u64::from(i.len)).sum();
        assert_eq!(covered, data.len() as u64);
        for off in 0..data.len().min(64) as u64 {
            let _ = boundary(arch, data, off);
        }
    }
    let _ = ktrace_disasm::kcore::parse_header(data);
});
