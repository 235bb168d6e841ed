//! Never panic on input: every parser of this crate fed arbitrary and
//! mutated input (property tests; the fuzz targets go further).

use ktrace_symbols::btf::Btf;
use ktrace_symbols::elf::{ElfImage, SymbolSpec};
use ktrace_symbols::kallsyms::{Kallsyms, SymbolCounts};
use ktrace_symbols::probeable::{self, FtraceLocations, Rules};
use ktrace_symbols::{blacklist, glob, ldcache, maps};
use proptest::prelude::*;

fn small_elf() -> Vec<u8> {
    // A real ELF to mutate: the smallest of a few system binaries.
    ["/bin/true", "/usr/bin/true", "/bin/ls"]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .min_by_key(Vec::len)
        .unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn elf_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut d = b"\x7fELF\x02\x01\x01\0".to_vec();
        d.extend(data);
        if let Ok(img) = ElfImage::parse("x", &d) {
            let _ = img.resolve("main");
            let _ = img.symbolize(0x1000);
        }
    }

    #[test]
    fn elf_mutated(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)) {
        let mut d = small_elf();
        prop_assume!(!d.is_empty());
        for (i, b) in flips {
            let at = i.index(d.len().min(8192));
            d[at] = b;
        }
        if let Ok(img) = ElfImage::parse("x", &d) {
            for s in img.symbols.iter().take(50) {
                let _ = img.resolve(&s.display_name());
            }
        }
    }

    #[test]
    fn ldcache_random(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut d = b"glibc-ld.so.cache1.1".to_vec();
        d.extend(&data);
        let _ = ldcache::parse(&d);
        let mut o = b"ld.so-1.7.0\0".to_vec();
        o.extend(&data);
        let _ = ldcache::parse(&o);
    }

    #[test]
    fn btf_random(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut d = vec![0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
        d.extend(data);
        if let Ok(b) = Btf::parse(&d) {
            for id in 0..b.len() as u32 {
                let _ = b.type_name(id);
            }
            let _ = b.member_offset("a", "b.c");
        }
    }

    #[test]
    fn text_tables(text in "[0-9a-fx \\t\\[\\]A-Za-z_.:/-]{0,200}(\\n[0-9a-fx \\t\\[\\]A-Za-z_.:/-]{0,80}){0,8}") {
        let words: Vec<&str> = text.split_whitespace().collect();
        let counts = SymbolCounts::scan(&text, words.iter().copied());
        if let Ok(ks) = Kallsyms::parse(&text) {
            // The counting mode agrees with the table on whatever parses.
            prop_assert_eq!(&counts, &SymbolCounts::from_table(&ks, words.iter().copied()));
            let _ = ks.lookup(0xffff_ffff_8100_0000);
            let ft = FtraceLocations::parse(&text);
            let bl = blacklist::parse(&text).unwrap_or_default();
            let rules = Rules { blacklist: Some(&bl), ftrace: Some(&ft), notrace_refused: true, refused_areas: &[] };
            let _ = probeable::expand(&ks, &rules, "*");
        }
        let _ = maps::parse(&text);
        let _ = SymbolSpec::parse(&text);
    }

    #[test]
    fn glob_anything(p in ".{0,20}", t in ".{0,40}") {
        let _ = glob::glob_match(&p, &t);
    }

    #[test]
    fn glob_star_matches_everything(t in "[a-z_]{0,30}") {
        prop_assert!(glob::glob_match("*", &t));
        prop_assert!(glob::glob_match(&t, &t) || glob::is_glob(&t));
    }
}
