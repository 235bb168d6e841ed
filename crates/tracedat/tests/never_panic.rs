//! Bad files never panic the reader: every fixture (trace-cmd's versions 6
//! and 7, zstd and uncompressed, and a file this crate wrote) cut at random
//! points, with random bytes flipped, and random bytes behind a valid magic
//! and version; each must give an error or metadata whose pages can all be
//! iterated (errors allowed). Deterministic (fixed-seed xorshift).

use ktrace_tracedat::{Header, TraceDat, Writer, WriterOptions};
use std::io::Cursor;
use std::path::Path;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Opens and walks everything; returns whether it opened.
fn exercise(bytes: Vec<u8>) -> bool {
    let Ok(mut dat) = TraceDat::open(Cursor::new(bytes)) else {
        return false;
    };
    let _ = (
        dat.meta.clock(),
        dat.meta.uname(),
        dat.meta.cpu_stats(),
        dat.meta.kernel_release(),
    );
    for b in 0..dat.meta.buffers.len() {
        for i in 0..dat.meta.buffers[b].cpus.len() {
            if let Ok(pages) = dat.pages(b, i) {
                for p in pages.take(10_000) {
                    let _ = p;
                }
            }
        }
    }
    true
}

fn inputs() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut v: Vec<(String, Vec<u8>)> = ["tc-v6", "tc-v7", "tc-v7-none", "tc-v7-zstd"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                std::fs::read(dir.join(format!("{n}.dat"))).unwrap(),
            )
        })
        .collect();
    let mut dat = TraceDat::open(Cursor::new(v[1].1.clone())).unwrap();
    let h = Header::from_meta(&dat.meta);
    let mut w = Writer::create(
        Cursor::new(Vec::new()),
        &h,
        2,
        WriterOptions {
            first_chunk: 1 << 16,
            max_chunk: 1 << 20,
            slack: 0,
        },
    )
    .unwrap();
    for i in 0..2 {
        let pages: Vec<_> = dat.pages(0, i).unwrap().map(Result::unwrap).collect();
        for p in pages {
            w.append_pages(i, &p).unwrap();
        }
    }
    v.push((
        "ktrace".into(),
        w.finish(None, &["CPU: 0\n".into()]).unwrap().into_inner(),
    ));
    v
}

#[test]
fn fixtures_open_intact() {
    for (name, b) in inputs() {
        assert!(exercise(b), "{name}");
    }
}

#[test]
fn truncated_files_never_panic() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for (_, b) in inputs() {
        for _ in 0..300 {
            let cut = rng.below(b.len());
            exercise(b[..cut].to_vec());
        }
        // every cut inside the metadata of the first 2 KB
        for cut in 0..2048.min(b.len()) {
            exercise(b[..cut].to_vec());
        }
    }
}

#[test]
fn bit_flipped_files_never_panic() {
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let mut opened = 0;
    for (_, b) in inputs() {
        for _ in 0..400 {
            let mut m = b.clone();
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(m.len());
                m[i] ^= 1 << rng.below(8);
            }
            opened += exercise(m) as usize;
        }
        // whole bytes replaced in the first 4 KB (lengths, counts, offsets)
        for _ in 0..400 {
            let mut m = b.clone();
            let i = rng.below(4096.min(m.len()));
            m[i] = rng.next() as u8;
            exercise(m);
        }
    }
    assert!(opened > 0, "some flips land in the data and still open");
}

#[test]
fn random_bytes_behind_the_magic_never_panic() {
    let mut rng = Rng(0xdeadbeefcafef00d);
    for v in [&b"6\0"[..], b"7\0", b"7\0\0\x08\x00\x10\0\0zstd\0x\0"] {
        for _ in 0..2000 {
            let mut m = b"\x17\x08Dtracing".to_vec();
            m.extend_from_slice(v);
            for _ in 0..rng.below(600) {
                m.push(rng.next() as u8);
            }
            exercise(m);
        }
    }
}

#[test]
fn foreign_files_are_refused_clearly() {
    for junk in [
        &b""[..],
        b"\x7fELF\x02\x01\x01",
        b"\x17\x08Dtracing",
        b"\x17\x08Dtracing8\0\0\x08",
    ] {
        let e = TraceDat::open(Cursor::new(junk.to_vec()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("not a trace.dat file")
                || e.contains("version")
                || e.contains("truncated"),
            "{e}"
        );
    }
    let e =
        TraceDat::open(Cursor::new(b"\x17\x08Dtracing8\0\0\x08\0\x10\0\0".to_vec())).unwrap_err();
    assert_eq!(
        e.to_string(),
        "trace.dat version \"8\" is not supported (versions 6 and 7 are)"
    );
}
