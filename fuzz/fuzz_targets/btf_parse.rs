//! BTF blobs (vmlinux and split module BTF) must parse or fail, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ktrace_symbols::btf::Btf::parse(data);
    let (a, b) = data.split_at(data.len() / 2);
    let _ = ktrace_symbols::btf::Btf::parse_split(a, b);
});
