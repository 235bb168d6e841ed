//! BTF-argument definitions compiled over a BTF blob built from the input:
//! never a panic, whatever the text or the types.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ktrace_probe::{Arch, Offline, Target, btfarg};

fuzz_target!(|data: &[u8]| {
    let cut = data.first().copied().unwrap_or(0) as usize;
    let (text, blob) = data.get(1..).unwrap_or(&[]).split_at(cut.min(data.len().saturating_sub(1)));
    let line = String::from_utf8_lossy(text);
    let btf = ktrace_symbols::btf::Btf::parse(blob).ok();
    let _ = btfarg::compile(
        &line,
        btf.as_ref().map(|b| b as &dyn btfarg::BtfTypes),
        Target::new(Arch::X86_64),
        &Offline,
        false,
    );
});
