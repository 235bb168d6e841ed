//! Measures the zstd compressor on a trace.dat's CPU pages as
//! `--compress` cuts them (ten pages per frame, each CPU's data on its
//! own), ROUNDS times, printing each round's time, MB/s and size; with
//! `--whole`, also its kallsyms text as one frame (the chain strategy
//! unless `--fast`, then streamed with the fast one).
//!
//!     cargo run --release -p ktrace-tracedat --example zbench -- FILE [ROUNDS] [--fast|--chain] [--whole] [--no-pages]

use ktrace_tracedat::TraceDat;
use ktrace_tracedat::zstd::Compressor;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let path = a
        .get(1)
        .ok_or("usage: zbench FILE [ROUNDS] [--fast|--chain] [--whole] [--no-pages]")?;
    let rounds: usize = a.get(2).map_or(Ok(3), |s| s.parse())?;
    let mut dat = TraceDat::open(std::fs::File::open(path)?)?;
    let ps = dat.meta.buffers[0].page_size as usize;
    let ncpu = dat.meta.buffers[0].cpus.len();
    let mut cpus: Vec<Vec<u8>> = Vec::new();
    for i in 0..ncpu {
        cpus.push(dat.pages(0, i)?.collect::<Result<Vec<_>, _>>()?.concat());
    }
    let kallsyms = dat.meta.kallsyms.clone();
    let total: usize = cpus.iter().map(Vec::len).sum();
    let mut c = Compressor::new();
    let mut z = Vec::new();
    let fast_only = a.iter().any(|x| x == "--fast");
    let chain_only = a.iter().any(|x| x == "--chain");
    let no_pages = a.iter().any(|x| x == "--no-pages");
    for r in 0..rounds {
        for fast in [false, true] {
            if (fast && chain_only) || (!fast && fast_only) || no_pages {
                continue;
            }
            let t = Instant::now();
            let mut size = 0;
            for d in &cpus {
                for chunk in d.chunks(ps * 10) {
                    z.clear();
                    if fast {
                        c.compress_fast(chunk, &mut z);
                    } else {
                        c.compress(chunk, &mut z);
                    }
                    size += z.len();
                }
            }
            let s = t.elapsed().as_secs_f64();
            let name = if fast { "fast" } else { "chain" };
            println!(
                "round {r} cpu pages {name}: {total} -> {size} bytes in {s:.3} s ({:.1} MB/s)",
                total as f64 / s / 1e6
            );
        }
    }
    if a.iter().any(|x| x == "--whole") {
        for r in 0..rounds {
            if !fast_only {
                let t = Instant::now();
                z.clear();
                c.compress(&kallsyms, &mut z);
                let s = t.elapsed().as_secs_f64();
                println!(
                    "round {r} kallsyms: {} -> {} bytes in {s:.3} s ({:.1} MB/s)",
                    kallsyms.len(),
                    z.len(),
                    kallsyms.len() as f64 / s / 1e6
                );
            }
            let t = Instant::now();
            z.clear();
            let mut at = 0;
            let Ok(()) = c.compress_stream_fast(
                kallsyms.len(),
                |buf| {
                    buf.copy_from_slice(&kallsyms[at..at + buf.len()]);
                    at += buf.len();
                    Ok::<(), std::convert::Infallible>(())
                },
                |b| {
                    z.extend_from_slice(b);
                    Ok(())
                },
            );
            let s = t.elapsed().as_secs_f64();
            println!(
                "round {r} kallsyms fast: {} -> {} bytes in {s:.3} s ({:.1} MB/s)",
                kallsyms.len(),
                z.len(),
                kallsyms.len() as f64 / s / 1e6
            );
        }
    }
    Ok(())
}
