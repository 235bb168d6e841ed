//! ELF images (symbols, segments, versions) must parse or fail, never panic;
//! resolving and symbolizing through whatever parsed must not panic either.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = ktrace_symbols::elf::ElfImage::parse("fuzz", data) {
        let _ = img.resolve("main");
        let _ = img.resolve("getenv@GLIBC_2.2.5+4");
        for addr in [0u64, 0x1000, 0x401000, u64::MAX] {
            let _ = img.symbolize(addr);
            let _ = img.vaddr_to_file_offset(addr);
            let _ = img.file_offset_to_vaddr(addr);
        }
    }
});
