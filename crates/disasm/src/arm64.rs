//! arm64 (AArch64): decoding with yaxpeax-arm and the instructions the
//! kernel refuses to kprobe.
//!
//! Every instruction is 4 bytes; an address that is not a multiple of 4 is
//! refused by `arch_prepare_kprobe()` (arch/arm64/kernel/probes/kprobes.c)
//! with `-EINVAL`, which error_log shows as "Failed to register probe
//! event", not as the boundary message. The refusals mirror
//! arch/arm64/kernel/probes/decode-insn.c (`aarch64_insn_is_steppable()`,
//! `arm_probe_decode_insn()`, `is_probed_address_atomic()`) with the
//! encodings of arch/arm64/include/asm/insn.h, written again here:
//! - in the branch/exception/system class, everything is stepped except
//!   branches that are not simulated, `msr`, exception generation (`svc`,
//!   `brk`, ...), `eret`/`eretaa`, `mrs` of `daif` (the one system register
//!   whose value stepping would change), and hints
//!   other than `nop`, the PAC `paci*`/`xpaclri` and `bti` forms;
//!   branches the kernel simulates (`b`, `bl`, `b.cond`, `cbz`, `tbz`,
//!   `br`, `blr`, `ret`) are taken, their pointer-auth forms are not;
//! - pc-relative literal loads are taken only as `ldr`/`ldrsw` literal (and
//!   `adr`/`adrp`, simulated); `prfm` literal is refused;
//! - exclusive loads and stores are refused, and so is every instruction
//!   inside an exclusive sequence: one of the up to 32 instructions before
//!   it (not before the symbol) is a load-exclusive with no
//!   store-exclusive after it. Linux 6.1 and 6.12 test this with masks that
//!   also match `ldar`/`stlr`; later kernels narrowed them (we keep the
//!   wider, older masks: a refusal too many, never one too few);
//! - the memory copy/set (MOPS) instructions are refused (6.12 stable).
//!
//! Not known from the bytes: the ftrace patch site (see
//! [`ftrace_site`] for the usual prologue), the blacklist, and a `brk` in
//! /proc/kcore that is another kprobe.

use yaxpeax_arch::{Decoder, U8Reader};
use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode, Operand};

use crate::{Flow, Insn, Refusal};

/// `(insn & mask) == value`.
fn is(insn: u32, mask: u32, value: u32) -> bool {
    insn & mask == value
}

fn is_b(i: u32) -> bool {
    is(i, 0xfc00_0000, 0x1400_0000)
}
fn is_bl(i: u32) -> bool {
    is(i, 0xfc00_0000, 0x9400_0000)
}
fn is_cbz_cbnz(i: u32) -> bool {
    is(i, 0x7e00_0000, 0x3400_0000)
}
fn is_tbz_tbnz(i: u32) -> bool {
    is(i, 0x7e00_0000, 0x3600_0000)
}
fn is_bcond(i: u32) -> bool {
    is(i, 0xff00_0010, 0x5400_0000)
}
fn is_br(i: u32) -> bool {
    is(i, 0xffff_fc1f, 0xd61f_0000)
}
fn is_blr(i: u32) -> bool {
    is(i, 0xffff_fc1f, 0xd63f_0000)
}
fn is_ret(i: u32) -> bool {
    is(i, 0xffff_fc1f, 0xd65f_0000)
}
fn is_branch_auth(i: u32) -> bool {
    // braa/brab/braaz/brabz, blraa..., retaa/retab.
    is(i, 0xfeff_f800, 0xd61f_0800)
        || is(i, 0xfeff_f800, 0xd63f_0800)
        || is(i, 0xffff_fbff, 0xd65f_0bff)
}
fn is_eret(i: u32) -> bool {
    i == 0xd69f_03e0 || is(i, 0xffff_fbff, 0xd69f_0bff)
}
fn is_exception(i: u32) -> bool {
    is(i, 0xff00_0000, 0xd400_0000)
}
fn is_msr(i: u32) -> bool {
    is(i, 0xfff8_f01f, 0xd500_401f) || is(i, 0xfff0_0000, 0xd510_0000)
}
fn is_mrs(i: u32) -> bool {
    is(i, 0xfff0_0000, 0xd530_0000)
}
fn is_hint(i: u32) -> bool {
    is(i, 0xffff_f01f, 0xd503_201f)
}
fn is_adr_adrp(i: u32) -> bool {
    is(i, 0x1f00_0000, 0x1000_0000)
}
fn is_ldr_lit(i: u32) -> bool {
    is(i, 0xbf00_0000, 0x1800_0000)
}
fn is_ldrsw_lit(i: u32) -> bool {
    is(i, 0xff00_0000, 0x9800_0000)
}
fn is_prfm_lit(i: u32) -> bool {
    is(i, 0xff00_0000, 0xd800_0000)
}
fn is_exclusive(i: u32) -> bool {
    is(i, 0x3f80_0000, 0x0800_0000)
}
/// The 6.1/6.12 `load_ex` test (it also matches `ldar`).
fn is_load_ex(i: u32) -> bool {
    is(i, 0x3f40_0000, 0x0840_0000)
}
/// The 6.1/6.12 `store_ex` test (it also matches `stlr`).
fn is_store_ex(i: u32) -> bool {
    is(i, 0x3f40_0000, 0x0800_0000)
}
fn is_mops(i: u32) -> bool {
    is(i, 0x3b20_0c00, 0x1900_0400)
}
fn is_class_branch_sys(i: u32) -> bool {
    is(i, 0x1c00_0000, 0x1400_0000)
}

/// The hints the kernel single-steps: `nop`, `xpaclri`, `pacia1716`,
/// `pacib1716`, `paciaz`, `paciasp`, `pacibz`, `pacibsp`, `bti` (all four).
fn is_steppable_hint(i: u32) -> bool {
    is_hint(i)
        && matches!(
            (i & 0xfe0) >> 5,
            0x00 | 0x07 | 0x08 | 0x0a | 0x18 | 0x19 | 0x1a | 0x1b | 0x20 | 0x22 | 0x24 | 0x26
        )
}

/// `mrs xN, daif`: op0=3 op1=3 CRn=4 CRm=2 op2=1, the field `0xda11`.
fn is_mrs_daif(i: u32) -> bool {
    is_mrs(i) && (i & 0x1f_ffe0) >> 5 == 0xda11
}

/// Why the kernel refuses to probe this instruction word on its own (the
/// exclusive-sequence rule needs the neighbours: [`mark_atomic_sequences`]).
pub fn refusal_of(i: u32) -> Option<&'static str> {
    let simulated = is_bcond(i)
        || is_cbz_cbnz(i)
        || is_tbz_tbnz(i)
        || is_adr_adrp(i)
        || is_b(i)
        || is_bl(i)
        || is_br(i)
        || is_blr(i)
        || is_ret(i)
        || is_ldr_lit(i)
        || is_ldrsw_lit(i);
    if simulated {
        return None;
    }
    if is_class_branch_sys(i) {
        if is_branch_auth(i) {
            return Some("a pointer-authenticated branch: not simulated (arm_probe_decode_insn)");
        }
        if is_msr(i) {
            return Some("msr: not single-stepped (aarch64_insn_is_steppable)");
        }
        if is_exception(i) {
            return Some(
                "an exception-generating instruction (svc/hvc/brk/...): not single-stepped",
            );
        }
        if is_eret(i) {
            return Some("eret: not single-stepped (aarch64_insn_is_steppable)");
        }
        if is_mrs_daif(i) {
            return Some("mrs of daif: not single-stepped (aarch64_insn_is_steppable)");
        }
        if is_hint(i) && !is_steppable_hint(i) {
            return Some("a hint the kernel does not single-step (aarch64_insn_is_steppable_hint)");
        }
        return None;
    }
    if is_prfm_lit(i) {
        return Some("a pc-relative literal prefetch: not simulated (aarch64_insn_uses_literal)");
    }
    if is_exclusive(i) {
        return Some("an exclusive load/store: the sequence would not complete when stepped");
    }
    if is_mops(i) {
        return Some("a memory copy/set (mops) instruction: its three parts run together");
    }
    None
}

/// The kernel's `MAX_ATOMIC_CONTEXT_SIZE`: 128 bytes of instructions.
const ATOMIC_CONTEXT: usize = 32;

/// Refuses every instruction inside an exclusive sequence, as
/// `is_probed_address_atomic()` does: looking back at most 32 instructions
/// and never before offset 0, a load-exclusive seen before any
/// store-exclusive means the probe would break the sequence.
pub fn mark_atomic_sequences(insns: &mut [Insn], bytes: &[u8]) {
    let words: Vec<Option<u32>> = insns
        .iter()
        .map(|i| {
            let b = i.bytes(bytes);
            <[u8; 4]>::try_from(b).ok().map(u32::from_le_bytes)
        })
        .collect();
    for (n, insn) in insns.iter_mut().enumerate() {
        if insn.refusal.is_some() || !insn.valid {
            continue;
        }
        let from = n.saturating_sub(ATOMIC_CONTEXT);
        for w in words[from..n].iter().rev() {
            let Some(w) = *w else { break };
            if is_store_ex(w) {
                break;
            }
            if is_load_ex(w) {
                insn.refusal = Some(Refusal {
                    reason: "inside an exclusive load/store sequence (is_probed_address_atomic)",
                });
                break;
            }
        }
    }
}

/// The kernel's answer for a kprobe on the word at `offset` of a
/// function's code (`bytes` from the function's first byte), where the
/// bytes alone decide it on every arm64 kernel ktrace knows: a word that
/// `arm_kprobe_decode_insn()` rejects on its own, or one inside an
/// exclusive sequence under both the older (6.1, 6.12: `ldar`/`stlr`
/// match too) and the narrowed (later) `load_ex`/`store_ex` masks.
/// `Ok(None)`: taken by the decoder. `Err`: the bytes cannot tell (the
/// offset is misaligned or past the code, the two mask generations differ, the word is another kprobe's
/// `brk #0x4`, which the kernel probes through, or a MOPS word, refused
/// only from 6.12's stable updates on). For the checker: the kernel
/// refuses a rejected word with "Failed to register probe event".
pub fn kprobe_refusal_at(bytes: &[u8], offset: u64) -> Result<Option<&'static str>, &'static str> {
    kprobe_refusal_with(bytes, offset, None)
}

/// [`kprobe_refusal_at`] for a kernel whose load/store-exclusive masks are
/// known: `Some(true)` the older, wider ones (`ldar`/`stlr` match too),
/// `Some(false)` the narrowed ones; `None` decides only where both agree.
pub fn kprobe_refusal_with(
    bytes: &[u8],
    offset: u64,
    wide_masks: Option<bool>,
) -> Result<Option<&'static str>, &'static str> {
    let word = |n: usize| {
        bytes
            .get(n * 4..n * 4 + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
    };
    if !offset.is_multiple_of(4) {
        return Err("not a multiple of 4");
    }
    let n = usize::try_from(offset / 4).map_err(|_| "past the function's code")?;
    let w = word(n).ok_or("past the function's code")?;
    /// `brk #KPROBES_BRK_IMM` (0x004): a kprobe already there.
    const KPROBE_BRK: u32 = 0xd420_0080;
    if w == KPROBE_BRK {
        return Err("another kprobe's brk hides the instruction there");
    }
    if is_mops(w) {
        return Err("a memory copy/set (mops) instruction: refused only by some kernels");
    }
    if let Some(why) = refusal_of(w) {
        return Ok(Some(why));
    }
    let atomic = |load_ex: fn(u32) -> bool, store_ex: fn(u32) -> bool| {
        for k in (n.saturating_sub(ATOMIC_CONTEXT)..n).rev() {
            let Some(p) = word(k) else { return false };
            if store_ex(p) {
                return false;
            }
            if load_ex(p) {
                return true;
            }
        }
        false
    };
    let narrow_load = |i| is(i, 0x3fc0_0000, 0x0840_0000);
    let narrow_store = |i| is(i, 0x3fc0_0000, 0x0800_0000);
    const INSIDE: &str = "inside an exclusive load/store sequence (is_probed_address_atomic)";
    match (
        atomic(is_load_ex, is_store_ex),
        atomic(narrow_load, narrow_store),
        wide_masks,
    ) {
        (true, true, _) => Ok(Some(INSIDE)),
        (false, false, _) => Ok(None),
        (wide, _, Some(true)) | (_, wide, Some(false)) => Ok(wide.then_some(INSIDE)),
        _ => Err(
            "inside a sequence only one generation of the kernel's load/store-exclusive masks sees",
        ),
    }
}

/// The offset of the ftrace patch site in a function that starts with
/// the patchable-function-entry prologue (`[bti c;] mov x9, x30; nop` or
/// `... bl ftrace_caller` when tracing is on): the instruction after
/// `mov x9, x30`. Kernels without `KPROBES_ON_FTRACE` on arm64 (6.1,
/// 6.12) refuse it with "Failed to register probe event".
pub fn ftrace_site(bytes: &[u8]) -> Option<u64> {
    let word = |off: usize| {
        bytes
            .get(off..off + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
    };
    const MOV_X9_X30: u32 = 0xaa1e_03e9;
    const NOP: u32 = 0xd503_201f;
    for start in [0usize, 4] {
        if start == 4 && word(0).is_none_or(|w| !is_hint(w)) {
            break;
        }
        if word(start) == Some(MOV_X9_X30) {
            let next = word(start + 4)?;
            if next == NOP || is_bl(next) {
                return Some(start as u64 + 4);
            }
        }
    }
    None
}

/// Decodes arm64 code loaded at `address` (little-endian words; a trailing
/// partial word is `(bad)`).
pub fn decode(bytes: &[u8], address: u64) -> Vec<Insn> {
    let decoder = InstDecoder::default();
    let mut out = Vec::with_capacity(bytes.len() / 4);
    let mut off = 0usize;
    while off < bytes.len() {
        let chunk = &bytes[off..(off + 4).min(bytes.len())];
        let pc = address.wrapping_add(off as u64);
        let word = <[u8; 4]>::try_from(chunk).ok().map(u32::from_le_bytes);
        let decoded = word.and_then(|_| {
            let mut reader = U8Reader::new(chunk);
            decoder.decode(&mut reader).ok()
        });
        let insn = match (word, decoded) {
            (Some(w), Some(inst)) => {
                let target = inst.operands.iter().find_map(|op| match op {
                    Operand::PCOffset(o) if inst.opcode == Opcode::ADRP => {
                        Some((pc & !0xfff).wrapping_add(*o as u64))
                    }
                    Operand::PCOffset(o) => Some(pc.wrapping_add(*o as u64)),
                    _ => None,
                });
                Insn {
                    offset: off as u64,
                    len: 4,
                    text: inst.to_string(),
                    flow: flow(w),
                    target,
                    valid: true,
                    refusal: refusal_of(w).map(|reason| Refusal { reason }),
                }
            }
            (w, _) => Insn {
                offset: off as u64,
                len: chunk.len() as u8,
                text: match w {
                    Some(w) => format!("(bad) .inst {w:#010x}"),
                    None => "(bad)".to_string(),
                },
                flow: Flow::Stop,
                target: None,
                valid: false,
                // A whole word the decoder does not know is refused as the
                // kernel's masks refuse it, whatever it encodes: data after
                // a function's code (arm64 7.2 ends do_sys_openat2 and
                // vfs_read with an 8-byte kernel address, whose low word
                // KASLR makes `0x08330428` on one boot, an exclusive store
                // to aarch64_insn_is_exclusive(), "Failed to register probe
                // event"), and taken otherwise (6.12 and 7.2 took such words
                // at functions' ends); a partial word is not an instruction
                // at all.
                refusal: match w {
                    Some(w) => refusal_of(w).map(|reason| Refusal { reason }),
                    None => Some(Refusal {
                        reason: "a partial word, not an instruction",
                    }),
                },
            },
        };
        out.push(insn);
        off += 4;
    }
    out
}

fn flow(i: u32) -> Flow {
    if is_bl(i) || is_blr(i) || is(i, 0xfeff_f800, 0xd63f_0800) {
        Flow::Call
    } else if is_ret(i) || is(i, 0xffff_fbff, 0xd65f_0bff) || is_eret(i) {
        Flow::Return
    } else if is_b(i) || is_br(i) || is(i, 0xfeff_f800, 0xd61f_0800) {
        Flow::Jump
    } else if is_bcond(i) || is_cbz_cbnz(i) || is_tbz_tbnz(i) {
        Flow::CondJump
    } else if is_exception(i) {
        Flow::Stop
    } else {
        Flow::Next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn an_undecodable_word_is_refused_by_the_kernels_masks() {
        // the last 8 bytes of do_sys_openat2 on arm64 7.2 (7.2.13-1, one
        // boot of the CI rehearsal): a kernel address, 0xffffd79c08330428;
        // the kernel refused +0x100 and took +0x104
        let code = [0x28, 0x04, 0x33, 0x08, 0x9c, 0xd7, 0xff, 0xff];
        let insns = decode(&code, 0);
        assert!(!insns[0].valid && !insns[1].valid);
        assert!(insns[0].refusal.is_some(), "{:?}", insns[0]);
        assert!(insns[1].refusal.is_none(), "{:?}", insns[1]);
        assert_eq!(
            kprobe_refusal_at(&code, 0).map(|r| r.is_some()),
            Ok(true),
            "the checker's answer is the same"
        );
    }

    #[test]
    fn kprobe_refusal_at_decides_only_what_every_kernel_decides() {
        let nop = 0xd503_201f;
        let code = words(&[
            0xd503_233f, // paciasp
            nop,
            0xd503_23bf, // autiasp
            0xd65f_03c0, // ret
        ]);
        assert_eq!(kprobe_refusal_at(&code, 0), Ok(None));
        assert_eq!(kprobe_refusal_at(&code, 4), Ok(None));
        assert!(matches!(kprobe_refusal_at(&code, 8), Ok(Some(_))));
        assert_eq!(kprobe_refusal_at(&code, 12), Ok(None));
        assert!(kprobe_refusal_at(&code, 2).is_err());
        assert!(kprobe_refusal_at(&code, 16).is_err());
        // another kprobe's brk: the kernel probes the original word
        assert!(kprobe_refusal_at(&words(&[nop, 0xd420_0080]), 4).is_err());
        // a BUG() brk is refused
        assert!(matches!(
            kprobe_refusal_at(&words(&[nop, 0xd420_0000 | (0x800 << 5)]), 4),
            Ok(Some(_))
        ));
        // after ldxr, before stxr: refused under both masks
        let ldxr = 0x885f_7c01;
        let stxr = 0x8802_7c01;
        let seq = words(&[ldxr, nop, stxr, nop]);
        assert!(matches!(kprobe_refusal_at(&seq, 4), Ok(Some(_))));
        assert_eq!(kprobe_refusal_at(&seq, 12), Ok(None));
        // after ldar only the older masks see a sequence: not decided
        let ldar = 0x88df_fc01;
        assert!(kprobe_refusal_at(&words(&[ldar, nop]), 4).is_err());
        // a kernel with the older masks refuses it (6.12: psi_trigger_poll
        // +0x80), one with the narrowed masks takes it
        let after_ldar = words(&[ldar, nop]);
        assert!(matches!(
            kprobe_refusal_with(&after_ldar, 4, Some(true)),
            Ok(Some(_))
        ));
        assert_eq!(kprobe_refusal_with(&after_ldar, 4, Some(false)), Ok(None));
        assert!(matches!(
            kprobe_refusal_with(&seq, 4, Some(false)),
            Ok(Some(_))
        ));
        // more than 32 words back: out of the kernel's window
        let mut far = vec![ldxr];
        far.extend(std::iter::repeat_n(nop, 32));
        far.push(nop);
        assert_eq!(kprobe_refusal_at(&words(&far), 33 * 4), Ok(None));
        assert!(matches!(
            kprobe_refusal_at(&words(&far), 32 * 4),
            Ok(Some(_))
        ));
    }

    #[test]
    fn table() {
        // (word, text, refused)
        let cases: &[(u32, &str, bool)] = &[
            (0xd503_201f, "nop", false),
            (0xaa1e_03e9, "mov x9, x30", false),
            (0xd503_233f, "paciasp", false),
            (0xd503_245f, "hint #0x22", false),
            (0xd503_23bf, "autiasp", true),
            (0xa9bf_7bfd, "stp x29, x30, [sp, #-0x10]!", false),
            (0xd65f_03c0, "ret", false),
            (0xd65f_0bff, "retaa", true),
            (0x9400_0010, "bl $+0x40", false),
            (0xd420_0000, "brk #0x0", true),
            (0xd400_0001, "svc #0x0", true),
            (0xd69f_03e0, "eret", true),
            (0xd51b_4220, "msr daif, x0", true),
            (0xd53b_4220, "mrs x0, daif", true),
            (0xd538_d080, "mrs x0, tpidr_el1", false),
            (0xd538_4103, "mrs x3, sp_el0", false),
            (0x885f_7c01, "ldxr w1, [x0]", true),
            (0x8802_7c01, "stxr w2, w1, [x0]", true),
            (0x58000040, "ldr x0, $+0x8", false),
            (0xd800_0040, "prfm pldl1keep, $+0x8", true),
            (0x9000_0000, "adrp x0, $+0x0", false),
            (0xd503_203f, "yield", true),
        ];
        for &(w, text, refused) in cases {
            let v = decode(&w.to_le_bytes(), 0x1000);
            assert_eq!(v.len(), 1);
            assert!(v[0].valid, "{w:#x}");
            assert_eq!(
                refusal_of(w).is_some(),
                refused,
                "{w:#010x} {}: {:?}",
                v[0].text,
                refusal_of(w)
            );
            // yaxpeax's text: checked loosely (its spelling of pc-relative
            // operands differs from objdump's).
            let head = text.split_whitespace().next().unwrap();
            assert!(
                v[0].text.starts_with(head),
                "{w:#x}: {} vs {text}",
                v[0].text
            );
        }
    }

    #[test]
    fn branch_targets() {
        // bl +0x40 at 0x1000, adrp x0 at 0x1234 with page offset +1.
        let v = decode(&words(&[0x9400_0010, 0xb000_0000]), 0x1000);
        assert_eq!(v[0].target, Some(0x1040));
        assert_eq!(v[0].flow, Flow::Call);
        assert_eq!(v[1].target, Some(0x2000));
    }

    #[test]
    fn exclusive_sequences_are_refused_inside() {
        // ldxr; add; stxr; cbnz; add
        let code = words(&[
            0x885f_7c01,
            0x1100_0421,
            0x8802_7c01,
            0x3500_0002,
            0x1100_0421,
        ]);
        let v = crate::decode(crate::Isa::Arm64, &code, 0);
        let refused: Vec<bool> = v.iter().map(|i| i.refusal.is_some()).collect();
        assert_eq!(refused, vec![true, true, true, false, false]);
    }

    #[test]
    fn ftrace_prologue() {
        let plain = words(&[0xaa1e_03e9, 0xd503_201f, 0xa9bf_7bfd]);
        assert_eq!(ftrace_site(&plain), Some(4));
        let bti = words(&[0xd503_245f, 0xaa1e_03e9, 0xd503_201f]);
        assert_eq!(ftrace_site(&bti), Some(8));
        let none = words(&[0xa9bf_7bfd, 0xaa1e_03e9, 0xd503_201f]);
        assert_eq!(ftrace_site(&none), None);
        assert_eq!(ftrace_site(&[0xe9, 0x03]), None);
    }

    #[test]
    fn partial_word_is_bad() {
        let v = decode(&[0x1f, 0x20, 0x03, 0xd5, 0x00, 0x00], 0);
        assert_eq!(v.len(), 2);
        assert!(!v[1].valid);
        assert_eq!(v[1].len, 2);
    }
}
