//! Property tests: any bytes, on every architecture, decode without a
//! panic into instructions that tile the input exactly, and the boundary
//! check agrees with the boundaries; the kcore header parsers take any
//! bytes too.

use ktrace_disasm::{Isa, boundaries, boundary, decode, kcore};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decoders_tile_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..96), addr in any::<u64>()) {
        for arch in Isa::ALL {
            let insns = decode(arch, &bytes, addr);
            let mut next = 0u64;
            for i in &insns {
                prop_assert_eq!(i.offset, next, "{} {:02x?}", arch, bytes);
                prop_assert!(i.len > 0);
                prop_assert_eq!(i.bytes(&bytes).len(), i.len as usize);
                next += u64::from(i.len);
            }
            prop_assert_eq!(next, bytes.len() as u64);
            let b = boundaries(arch, &bytes);
            prop_assert!(b.windows(2).all(|w| w[0] < w[1]));
            for off in 0..bytes.len() as u64 + 2 {
                let verdict = boundary(arch, &bytes, off);
                prop_assert_eq!(verdict.is_ok(), b.contains(&off));
                if let Err(e) = verdict {
                    prop_assert!(e.nearest_before.is_none_or(|x| x < off));
                    prop_assert!(e.nearest_after.is_none_or(|x| x > off));
                }
            }
        }
    }

    #[test]
    fn kcore_headers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = kcore::parse_header(&bytes);
        let h = kcore::Header { phoff: 0, phentsize: 56, phnum: 4 };
        if let Ok(segs) = kcore::parse_segments(&bytes, &h) {
            let _ = kcore::file_offset(&segs, u64::MAX - 1, 16);
        }
    }

    #[test]
    fn kcore_header_with_elf_magic(rest in proptest::collection::vec(any::<u8>(), 0..80)) {
        let mut b = b"\x7fELF\x02\x01".to_vec();
        b.extend(rest);
        let _ = kcore::parse_header(&b);
    }
}
