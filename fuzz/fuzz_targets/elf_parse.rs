//! ELF images (symbols, segments, versions) must parse or fail, never panic;
//! resolving and symbolizing through whatever parsed must not panic either.
//! The file is also read as `ktrace` reads files, in pieces
//! (ktrace_symbols::elf_file), which must give what the whole bytes give.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // an aligned copy: ELF structures are read in place
    let data = data.to_vec();
    let whole = ktrace_symbols::elf::ElfImage::parse("fuzz", &data);
    let pieces = ktrace_symbols::elf::ElfImage::parse_in_pieces("fuzz", &data);
    assert_eq!(whole.as_ref().ok(), pieces.as_ref().ok());
    if let Ok(img) = whole {
        let _ = img.resolve("main");
        let _ = img.resolve("getenv@GLIBC_2.2.5+4");
        for addr in [0u64, 0x1000, 0x401000, u64::MAX] {
            let _ = img.symbolize(addr);
            let _ = img.vaddr_to_file_offset(addr);
            let _ = img.file_offset_to_vaddr(addr);
        }
    }
});
