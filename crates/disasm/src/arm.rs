//! 32-bit arm: decoding with yaxpeax-arm's ARMv7 decoder, in ARM (A32) or
//! Thumb (T32) state.
//!
//! Boundaries only: ARM-state instructions are 4 bytes, Thumb ones 2 or 4
//! (a 32-bit Thumb instruction starts with `0b11101`, `0b11110` or
//! `0b11111` in its first halfword). In ARM state every instruction is
//! also marked with the kernel's kprobe verdict ([`kprobe_refusal`], the
//! decode table of arch/arm/probes/decode-arm.c); the Thumb tables are not
//! reproduced (callers say so: [`crate::Isa::knows_kprobe_rules`]).
//! Debian's armmp kernel is built in ARM state; its user space (armhf) is
//! mostly Thumb-2.

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
                    refusal: if thumb || len != 4 {
                        None
                    } else {
                        let word = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
                        kprobe_refusal(word).map(|reason| Refusal { reason })
                    },
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

/// What 32-bit arm kprobes may take at an ARM-state (A32) word:
/// `arm_probes_decode_insn()` (arch/arm/probes/decode-arm.c) walks a table
/// of masks; a word that reaches a "reject" row or falls off the end of a
/// table is refused (`INSN_REJECTED`, `arch_prepare_kprobe()` answers
/// `-EINVAL`: "Failed to register probe event"), and so is a row whose
/// register fields break its constraint (PC where it may not be) or a store
/// below the stack pointer the kprobe's own frame could overwrite
/// (`arm_check_stack()`: a register offset from SP, or `#-n` past 64
/// bytes). The rows below follow the kernel's table in its order and with
/// its semantics (an "or" row hands the word to the next row unchecked).
/// Held against the verdicts of real kernels (arm 6.12 and 7.2, Debian
/// armmp) word by word in tests/arm_kprobe_verdicts.rs.
pub fn kprobe_refusal(word: u32) -> Option<&'static str> {
    walk(word, TOP)
}

/// A register field's constraint (the kernel's `REG_TYPE_*`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum R {
    /// Not checked.
    Any,
    /// Must not be PC (r15).
    NoPc,
    /// Must not be PC when the instruction writes back its base.
    NoPcWb,
}

/// Register fields at bits 16, 12, 8, 4 and 0.
type Regs = [R; 5];

const FREE: Regs = [R::Any; 5];

/// One row of a decode table.
enum Row {
    /// Words matching go on in the sub-table.
    Table(u32, u32, &'static [Row]),
    /// Words matching are refused, for this reason.
    Reject(u32, u32, &'static str),
    /// Words matching are taken (emulated or simulated) when their
    /// registers pass; `true` when the stack checker runs (stores).
    Take(u32, u32, Regs, bool),
    /// Words matching are taken by the next row, whatever its mask.
    Or(u32, u32),
}

use R::{Any as A, NoPc as N, NoPcWb as W};
use Row::{Or, Reject, Table, Take};

const fn regs(r16: R, r12: R, r8: R, r4: R, r0: R) -> Regs {
    [r16, r12, r8, r4, r0]
}

const UNSUPPORTED: &str = "an instruction arm kprobes neither emulate nor simulate \
     (coprocessor, system, exclusive or privileged)";
const USES_PC: &str = "it uses PC where arm kprobes cannot emulate it";
const STACK: &str = "a store below the stack pointer that the kprobe's own frame could overwrite";

/// `1111 xxxx ...`: unconditional instructions; only preloads and
/// BLX (immediate) are taken (barriers, CPS, SRS/RFE and the coprocessor's
/// `2` forms are not).
const UNCOND: &[Row] = &[
    Take(0xfe30_0000, 0xf410_0000, FREE, false),
    Take(0xfe30_0010, 0xf610_0000, FREE, false),
    Take(0xfe00_0000, 0xfa00_0000, FREE, false),
];

/// `cccc 0001 0xx0 .... .... .... 0xxx ....`: MRS, BX, BLX (register),
/// CLZ, saturating arithmetic; BXJ, MSR, BKPT and SMC are not.
const MISC: &[Row] = &[
    Take(0x0ff0_00f0, 0x0100_0000, regs(A, N, A, A, A), false),
    Take(0x0ff0_00f0, 0x0120_0010, FREE, false),
    Take(0x0ff0_00f0, 0x0120_0030, regs(A, A, A, A, N), false),
    Take(0x0ff0_00f0, 0x0160_0010, regs(A, N, A, A, N), false),
    Take(0x0f90_00f0, 0x0100_0050, regs(N, N, A, A, N), false),
];

/// Halfword multiplies.
const HALF_MUL: &[Row] = &[
    Take(0x0ff0_0090, 0x0140_0080, regs(N, N, N, A, N), false),
    Or(0x0ff0_00b0, 0x0120_00a0),
    Take(0x0ff0_0090, 0x0160_0080, regs(N, A, N, A, N), false),
    Or(0x0ff0_0090, 0x0100_0080),
    Take(0x0ff0_00b0, 0x0120_0080, regs(N, N, N, A, N), false),
];

/// Multiplies.
const MUL: &[Row] = &[
    Take(0x0fe0_00f0, 0x0000_0090, regs(N, A, N, A, N), false),
    Or(0x0fe0_00f0, 0x0020_0090),
    Take(0x0ff0_00f0, 0x0060_0090, regs(N, N, N, A, N), false),
    Or(0x0ff0_00f0, 0x0040_0090),
    Take(0x0f80_00f0, 0x0080_0090, regs(N, N, N, A, N), false),
];

/// Synchronisation primitives (LDREX/STREX and friends): none is taken on
/// ARMv6 and later.
const SYNC: &[Row] = &[];

/// Extra loads and stores (halfword, signed byte, doubleword).
const EXTRA_LS: &[Row] = &[
    Reject(0x0f20_0090, 0x0020_0090, UNSUPPORTED),
    Reject(0x0e10_e0d0, 0x0000_e0d0, USES_PC),
    Take(0x0e50_00d0, 0x0000_00d0, regs(W, N, A, A, N), true),
    Take(0x0e50_00d0, 0x0040_00d0, regs(W, N, A, A, A), true),
    Take(0x0e50_00f0, 0x0000_00b0, regs(W, N, A, A, N), true),
    Take(0x0e50_0090, 0x0010_0090, regs(W, N, A, A, N), false),
    Take(0x0e50_00f0, 0x0040_00b0, regs(W, N, A, A, A), true),
    Take(0x0e50_0090, 0x0050_0090, regs(W, N, A, A, A), false),
];

/// Data processing with register operands.
const DP_REG: &[Row] = &[
    Reject(0x0e10_f000, 0x0010_f000, USES_PC),
    Take(0xffff_ffff, 0xe1a0_c00d, FREE, false),
    Take(0x0f90_0010, 0x0110_0000, FREE, false),
    Take(0x0fa0_0010, 0x01a0_0000, FREE, false),
    Take(0x0e00_0010, 0x0000_0000, FREE, false),
    Take(0x0f90_0090, 0x0110_0010, regs(N, A, N, A, N), false),
    Take(0x0fa0_0090, 0x01a0_0010, regs(A, N, N, A, N), false),
    Take(0x0e00_0090, 0x0000_0010, regs(N, N, N, A, N), false),
];

/// Data processing with an immediate, MOVW/MOVT and the hints.
const DP_IMM: &[Row] = &[
    Take(0x0fb0_0000, 0x0300_0000, regs(A, N, A, A, A), false),
    Or(0x0fff_00ff, 0x0320_0001),
    Take(0x0fff_00ff, 0x0320_0004, FREE, false),
    Take(0x0fff_00fc, 0x0320_0000, FREE, false),
    Reject(0x0fb0_0000, 0x0320_0000, UNSUPPORTED),
    Reject(0x0e10_f000, 0x0210_f000, USES_PC),
    Take(0x0f90_0000, 0x0310_0000, FREE, false),
    Take(0x0fa0_0000, 0x03a0_0000, FREE, false),
    Take(0x0e00_0000, 0x0200_0000, FREE, false),
];

/// Media instructions, `cccc 0110 .... .... .... .... xxx1 ....`.
const MEDIA_6: &[Row] = &[
    Take(0x0ff0_00f0, 0x0680_00b0, regs(N, N, A, A, N), false),
    Or(0x0fa0_0030, 0x06a0_0010),
    Take(0x0fb0_00f0, 0x06a0_0030, regs(A, N, A, A, N), false),
    Take(0x0fb0_0070, 0x06b0_0030, regs(A, N, A, A, N), false),
    Reject(0x0fb0_0010, 0x0600_0010, UNSUPPORTED),
    Reject(0x0f80_00f0, 0x0600_00b0, UNSUPPORTED),
    Reject(0x0f80_00f0, 0x0600_00d0, UNSUPPORTED),
    Take(0x0f80_0010, 0x0600_0010, regs(N, N, A, A, N), false),
    Take(0x0ff0_0030, 0x0680_0010, regs(N, N, A, A, N), false),
    Reject(0x0fb0_00f0, 0x0690_0070, UNSUPPORTED),
    Take(0x0f8f_00f0, 0x068f_0070, regs(A, N, A, A, N), false),
    Take(0x0f80_00f0, 0x0680_0070, regs(N, N, A, A, N), false),
];

/// Media instructions, `cccc 0111 .... .... .... .... xxx1 ....`.
const MEDIA_7: &[Row] = &[
    Reject(0x0ff0_00f0, 0x07f0_00f0, UNSUPPORTED),
    Take(0x0ff0_0090, 0x0740_0010, regs(N, N, N, A, N), false),
    Or(0x0ff0_f090, 0x0700_f010),
    Or(0x0ff0_f0d0, 0x0750_f010),
    Take(0x0ff0_f0f0, 0x0780_f010, regs(N, A, N, A, N), false),
    Or(0x0ff0_0090, 0x0700_0010),
    Or(0x0ff0_00d0, 0x0750_0010),
    Take(0x0ff0_00f0, 0x0780_0010, regs(N, N, N, A, N), false),
    Take(0x0ff0_00d0, 0x0750_00d0, regs(N, N, N, A, N), false),
    Take(0x0fa0_0070, 0x07a0_0050, regs(A, N, A, A, N), false),
    Take(0x0fe0_007f, 0x07c0_001f, regs(A, N, A, A, A), false),
    Take(0x0fe0_0070, 0x07c0_0010, regs(A, N, A, A, N), false),
];

/// Word and unsigned byte loads and stores.
const LOAD_STORE: &[Row] = &[
    Reject(0x0c40_f000, 0x0440_f000, USES_PC),
    Reject(0x0d20_0000, 0x0420_0000, UNSUPPORTED),
    Take(0x0e10_0000, 0x0400_0000, regs(W, A, A, A, A), true),
    Take(0x0e10_0000, 0x0410_0000, regs(W, A, A, A, A), false),
    Take(0x0e10_0000, 0x0600_0000, regs(W, A, A, A, N), true),
    Take(0x0e10_0000, 0x0610_0000, regs(W, A, A, A, N), false),
];

/// LDM/STM (not the user-register and exception-return forms).
const BLOCK: &[Row] = &[Take(0x0e40_0000, 0x0800_0000, FREE, true)];

/// The top-level table, in the kernel's order.
const TOP: &[Row] = &[
    Table(0xf000_0000, 0xf000_0000, UNCOND),
    Table(0x0f90_0080, 0x0100_0000, MISC),
    Table(0x0f90_0090, 0x0100_0080, HALF_MUL),
    Table(0x0f00_00f0, 0x0000_0090, MUL),
    Table(0x0f00_00f0, 0x0100_0090, SYNC),
    Table(0x0e00_0090, 0x0000_0090, EXTRA_LS),
    Table(0x0e00_0000, 0x0000_0000, DP_REG),
    Table(0x0e00_0000, 0x0200_0000, DP_IMM),
    Table(0x0f00_0010, 0x0600_0010, MEDIA_6),
    Table(0x0f00_0010, 0x0700_0010, MEDIA_7),
    Table(0x0c00_0000, 0x0400_0000, LOAD_STORE),
    Table(0x0e00_0000, 0x0800_0000, BLOCK),
    Take(0x0e00_0000, 0x0a00_0000, FREE, false),
    Reject(0x0c00_0000, 0x0c00_0000, UNSUPPORTED),
];

fn walk(word: u32, mut table: &'static [Row]) -> Option<&'static str> {
    'tables: loop {
        let mut matched = false;
        for row in table {
            let (mask, value) = match row {
                Table(m, v, _) | Reject(m, v, _) | Take(m, v, ..) | Or(m, v) => (*m, *v),
            };
            if !matched && word & mask != value {
                continue;
            }
            match row {
                Table(_, _, sub) => {
                    table = sub;
                    continue 'tables;
                }
                Reject(_, _, why) => return Some(why),
                Or(..) => matched = true,
                Take(_, _, fields, stores) => {
                    if !registers_pass(word, fields) {
                        return Some(USES_PC);
                    }
                    if *stores && stack_space(word).is_none_or(|n| n > 64) {
                        return Some(STACK);
                    }
                    return None;
                }
            }
        }
        return Some(UNSUPPORTED);
    }
}

/// Whether the register fields meet the row's constraints.
fn registers_pass(word: u32, fields: &Regs) -> bool {
    // Post-indexed (P = 0) or with writeback (W = 1).
    let writeback = word & (1 << 24) == 0 || word & (1 << 21) != 0;
    fields.iter().zip([16, 12, 8, 4, 0]).all(|(r, shift)| {
        let pc = (word >> shift) & 0xf == 15;
        match r {
            R::Any => true,
            R::NoPc => !pc,
            R::NoPcWb => !(pc && writeback),
        }
    })
}

/// The bytes below SP a store may write (`arm_check_stack()`): None for a
/// register offset from SP (unknown); 0 when the store does not go below
/// SP.
fn stack_space(word: u32) -> Option<u32> {
    // STR{,B} with SP as base or offset register, STR{D,H} (register) with SP.
    if word & 0x0e10_000f == 0x0600_000d
        || word & 0x0e1f_0000 == 0x060d_0000
        || word & 0x0e50_00bf == 0x0000_00bd
        || word & 0x0e5f_00b0 == 0x000d_00b0
    {
        return None;
    }
    // STMDx SP: at most 16 registers, 64 bytes.
    if word & 0x0edf_0000 == 0x080d_0000 {
        return Some((word & 0xffff).count_ones() * 4);
    }
    // STR{,B} Rt, [SP, #-n] (P = 1, U = 0).
    if word & 0x0f9f_0000 == 0x050d_0000 {
        return Some(word & 0xfff);
    }
    // STR{D,H} Rt, [SP, #-n].
    if word & 0x0fdf_00b0 == 0x014d_00b0 {
        return Some(((word & 0xf00) >> 4) | (word & 0xf));
    }
    Some(0)
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
