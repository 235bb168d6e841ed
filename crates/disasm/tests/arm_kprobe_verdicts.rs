//! 32-bit arm's kprobe rules against real kernels: every distinct ARM-state
//! word on which a Debian armmp kernel answered a raw kprobe write, with its
//! verdict (fixtures/arm-kprobe-verdicts.txt; its header says how it was
//! captured: the kernel's answers in a guest, the words from the same
//! kernel's boot image). `kprobe_refusal` must refuse exactly the words the
//! kernel refused, and `decode` must mark exactly those.

use ktrace_disasm::arm::kprobe_refusal;
use ktrace_disasm::{Isa, decode};

fn verdicts() -> Vec<(u32, bool, String)> {
    let path = format!(
        "{}/tests/fixtures/arm-kprobe-verdicts.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let word = u32::from_str_radix(f[0], 16).unwrap();
            let refused = match f[1] {
                "ok" => false,
                "refused" => true,
                v => panic!("verdict {v}"),
            };
            (word, refused, f[2..].join(" "))
        })
        .collect()
}

#[test]
fn every_word_as_the_kernel_decided_it() {
    let all = verdicts();
    let refused = all.iter().filter(|v| v.1).count();
    // both kinds, from real code (not a handful)
    assert!(
        all.len() > 12_000 && refused > 600,
        "{} words, {refused} refused",
        all.len()
    );
    let wrong: Vec<String> = all
        .iter()
        .filter(|(w, r, _)| kprobe_refusal(*w).is_some() != *r)
        .map(|(w, r, at)| {
            let text = decode(Isa::Arm, &w.to_le_bytes(), 0)[0].text.clone();
            let kernel = if *r { "refused" } else { "took" };
            format!("{w:08x} `{text}` at {at}: the kernel {kernel} it")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        all.len(),
        wrong.join("\n")
    );
}

#[test]
fn decode_marks_the_refused_words() {
    for (w, refused, at) in verdicts() {
        let insn = &decode(Isa::Arm, &w.to_le_bytes(), 0)[0];
        if insn.valid {
            assert_eq!(
                insn.refusal.is_some(),
                refused,
                "{w:08x} at {at}: {}",
                insn.text
            );
        }
        // Thumb state has no rules: nothing marked there
        for i in decode(Isa::Thumb, &w.to_le_bytes(), 0) {
            assert!(i.valid || i.refusal.is_some());
            if i.valid {
                assert_eq!(i.refusal, None);
            }
        }
    }
}
