//! 32-bit arm: decoding with yaxpeax-arm's ARMv7 decoder, in ARM (A32) or
//! Thumb (T32) state.
//!
//! Boundaries only: ARM-state instructions are 4 bytes, Thumb ones 2 or 4
//! (a 32-bit Thumb instruction starts with `0b11101`, `0b11110` or
//! `0b11111` in its first halfword). The 32-bit kernel's own probe rules
//! (arch/arm/probes/kprobes/actions-*.c and the decode tables of
//! arch/arm/probes/decode-*.c) are large tables this crate does not
//! reproduce: no instruction is marked refused here, and callers say so
//! ([`crate::Isa::knows_kprobe_rules`]). Debian's armmp kernel is built in
//! ARM state; its user space (armhf) is mostly Thumb-2.

use yaxpeax_arch::{Decoder, LengthedInstruction, U8Reader};
use yaxpeax_arm::armv7::{InstDecoder, Operand};

use crate::{Flow, Insn, Refusal};

/// Decodes 32-bit arm code loaded at `address`, in Thumb state when
/// `thumb`.
pub fn decode(bytes: &[u8], address: u64, thumb: bool) -> Vec<Insn> {
    let decoder = if thumb {
        InstDecoder::default_thumb()
    } else {
        InstDecoder::default()
    };
    let unit = if thumb { 2 } else { 4 };
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < bytes.len() {
        let pc = address.wrapping_add(off as u64);
        let rest = &bytes[off..];
        let decoded = if rest.len() >= unit {
            decode_one(&decoder, rest)
        } else {
            None
        };
        match decoded {
            Some(inst) => {
                let len = (inst.len().to_const() as usize)
                    .clamp(unit, 4)
                    .min(rest.len());
                let target = if thumb {
                    None
                } else {
                    inst.operands.iter().find_map(|op| match op {
                        Operand::BranchOffset(o) => {
                            Some(pc.wrapping_add((i64::from(*o) * 4) as u64))
                        }
                        _ => None,
                    })
                };
                let text = inst.to_string();
                let lower = text.to_ascii_lowercase();
                let flow = if lower.starts_with("bl") {
                    Flow::Call
                } else if lower.starts_with("b ") || lower.starts_with("bx") {
                    Flow::Jump
                } else if lower.starts_with('b') && target.is_some() {
                    Flow::CondJump
                } else {
                    Flow::Next
                };
                out.push(Insn {
                    offset: off as u64,
                    len: len as u8,
                    text,
                    flow,
                    target,
                    valid: true,
                    refusal: None,
                });
                off += len;
            }
            None => {
                let len = unit.min(rest.len());
                out.push(Insn {
                    offset: off as u64,
                    len: len as u8,
                    text: "(bad)".to_string(),
                    flow: Flow::Stop,
                    target: None,
                    valid: false,
                    refusal: Some(Refusal {
                        reason: "an undefined instruction",
                    }),
                });
                off += len;
            }
        }
    }
    out
}

thread_local! {
    /// Set while the decoder runs: a panic then is the decoder's, caught
    /// below, and must not be reported by the panic hook.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the process's panic hook once so that panics of the decoder,
/// which [`decode_one`] catches, print nothing (nor abort, under a fuzzer's
/// hook); every other panic goes to the hook as before.
fn quiet_decoder_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// One instruction, or None when it does not decode. yaxpeax-arm 0.5's
/// ARMv7 decoder panics ("register number out of range") on some byte
/// sequences (found by tests/never_panic.rs); a panic is taken as bytes
/// that do not decode, so no input can bring ktrace down, and it prints
/// nothing (a caught panic used to print "thread panicked" under `ktrace
/// disasm`, and the fuzzer's hook aborted on it).
fn decode_one(decoder: &InstDecoder, bytes: &[u8]) -> Option<yaxpeax_arm::armv7::Instruction> {
    quiet_decoder_panics();
    DECODING.with(|d| d.set(true));
    let decoded = std::panic::catch_unwind(|| {
        let mut reader = U8Reader::new(bytes);
        decoder.decode(&mut reader).ok()
    });
    DECODING.with(|d| d.set(false));
    decoded.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_and_thumb_lengths() {
        // ARM: push {r4, lr}; bl +8 (target pc + 8 + 8).
        let v = decode(
            &[0x10, 0x40, 0x2d, 0xe9, 0x02, 0x00, 0x00, 0xeb],
            0x1000,
            false,
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].text, "push {r4, lr}");
        assert_eq!(v[1].target, Some(0x1004 + 8 + 8));
        // Thumb: push {r4, lr} (2 bytes), bl (4 bytes), nop (2 bytes).
        let v = decode(&[0x10, 0xb5, 0x00, 0xf0, 0x02, 0xf8, 0x00, 0xbf], 0, true);
        let offs: Vec<u64> = v.iter().map(|i| i.offset).collect();
        assert_eq!(offs, vec![0, 2, 6], "{v:?}");
    }

    #[test]
    fn decoder_panics_become_bad_bytes() {
        // Words on which yaxpeax-arm 0.5's ARMv7 decoder panics (found by
        // scanning): the raw decoder panics, ours says (bad).
        for w in [0xc14d_fef6u32, 0x218c_f5f6, 0x70cb_fdfd, 0xc16c_fddd] {
            let bytes = w.to_le_bytes();
            let raw = std::panic::catch_unwind(|| {
                let mut r = U8Reader::new(&bytes);
                let _ = InstDecoder::default().decode(&mut r);
            });
            assert!(raw.is_err(), "{w:#x} no longer panics in yaxpeax-arm");
            let v = decode(&bytes, 0, false);
            assert_eq!(v.len(), 1);
            assert!(!v[0].valid);
            assert_eq!(v[0].text, "(bad)");
        }
    }
}
