//! Throughput of parse + check (+ readback rendering) over the conformance corpus
//! definitions and over one typical definition.

use ktrace_probe::{Arch, Definition, Kallsyms, Offline, Target, check_line, render};

fn main() {
    divan::main();
}

fn corpus_defs() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/corpus/x86_64/corpus.txt"
    );
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut defs = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l == "=== DEF"
            && let Some(d) = lines.next()
        {
            defs.push(d.to_string());
        }
    }
    defs
}

#[divan::bench]
fn corpus_offline(bencher: divan::Bencher) {
    let defs = corpus_defs();
    let target = Target::new(Arch::X86_64);
    bencher
        .counter(divan::counter::ItemsCount::new(defs.len()))
        .bench(|| {
            let mut accepted = 0usize;
            for d in &defs {
                accepted +=
                    usize::from(check_line(divan::black_box(d), target, &Offline).accepted());
            }
            accepted
        });
}

#[divan::bench]
fn corpus_with_kallsyms(bencher: divan::Bencher) {
    let defs = corpus_defs();
    let k = Kallsyms::parse(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/corpus/x86_64/kallsyms.txt"
        ))
        .unwrap_or_default(),
    );
    let target = Target::new(Arch::X86_64);
    bencher
        .counter(divan::counter::ItemsCount::new(defs.len()))
        .bench(|| {
            defs.iter()
                .filter(|d| check_line(divan::black_box(d), target, &k).accepted())
                .count()
        });
}

#[divan::bench]
fn typical_definition_and_readback() -> String {
    let def = "p:ktrace/open do_sys_openat2 dfd=%di:s32 path=+0(%si):string flags=+8(%dx):x64 mode=+16(%dx):u16";
    let c = check_line(divan::black_box(def), Target::new(Arch::X86_64), &Offline);
    match &c.definition {
        Ok(Definition::Probe(p)) => render::readback(p, Arch::X86_64),
        _ => String::new(),
    }
}
