//! Writes a large trace.dat for measurements: the pages of a trace.dat file
//! (e.g. fixtures/tc-v6.dat) appended N times per CPU with the Writer, each
//! copy's page time stamps shifted past the previous copy so the file stays
//! in time order. Prints the write rate.
//!
//!     cargo run --release -p ktrace-tracedat --example replicate -- IN OUT N

use ktrace_tracedat::{Header, TraceDat, Writer, WriterOptions};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let [_, input, output, n] = &a[..] else {
        return Err("usage: replicate IN OUT N".into());
    };
    let n: u64 = n.parse()?;
    let mut dat = TraceDat::open(std::fs::File::open(input)?)?;
    let header = Header::from_meta(&dat.meta);
    let e = dat.meta.endian;
    let ncpu = dat.meta.buffers[0].cpus.len();
    let mut cpus = Vec::new();
    for i in 0..ncpu {
        cpus.push(dat.pages(0, i)?.collect::<Result<Vec<_>, _>>()?);
    }
    let stamp = |p: &[u8]| e.u64(p);
    let first = cpus.iter().flatten().map(|p| stamp(p)).min().unwrap_or(0);
    let last = cpus.iter().flatten().map(|p| stamp(p)).max().unwrap_or(0);
    let span = last - first + 1_000_000_000;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(output)?;
    let mut w = Writer::create(f, &header, ncpu, WriterOptions::default())?;
    let t = Instant::now();
    let mut bytes = 0u64;
    for k in 0..n {
        for (c, pages) in cpus.iter().enumerate() {
            for p in pages {
                let mut p = p.clone();
                let ts = stamp(&p) + k * span;
                let b = match e {
                    ktrace_tracedat::Endian::Little => ts.to_le_bytes(),
                    ktrace_tracedat::Endian::Big => ts.to_be_bytes(),
                };
                p[..8].copy_from_slice(&b);
                w.append_pages(c, &p)?;
                bytes += p.len() as u64;
            }
        }
    }
    let appended = t.elapsed();
    let stats: Vec<String> = dat.meta.cpu_stats().iter().map(|s| s.to_string()).collect();
    w.finish(None, &stats)?;
    eprintln!(
        "{} MB of pages appended one page per call in {:.2} s ({:.0} MB/s), finished in {:.2} s total",
        bytes >> 20,
        appended.as_secs_f64(),
        (bytes >> 20) as f64 / appended.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
