//! riscv64: instruction boundaries from the length encoding alone.
//!
//! No RISC-V disassembler is a dependency yet: crates.io has `raki` (MIT,
//! a decoder) and `riscv-decode` (MIT/Apache-2.0, 0.2, small), neither
//! evaluated against objdump so far, so instructions are shown as `.insn`
//! words. Boundaries are
//! exact: the RISC-V base encoding says a parcel whose low two bits are not
//! `11` is a 16-bit compressed instruction, otherwise 32 bits (the 48- and
//! 64-bit encodings are reserved and unused by Linux).
//!
//! The kernel's probe rules (`riscv_probe_decode_insn()`,
//! arch/riscv/kernel/probes/decode-insn.c, since branches and the
//! compressed jumps are simulated, as in 6.12 and 7.2) reject three
//! kinds of instruction, which [`kprobe_refusal`] names: the SYSTEM opcode
//! (ecall, ebreak, CSR accesses, wfi, sret, sfence.vma), the MISC-MEM
//! opcode (fence, fence.i, the cbo.* cache operations) and c.ebreak.
//! `arch_prepare_kprobe()` returns -EINVAL for them, which the trace event
//! reports as "Failed to register probe event".

use crate::{Flow, Insn, Refusal};

/// Decodes riscv64 code into boundaries and raw words.
pub fn decode(bytes: &[u8], _address: u64) -> Vec<Insn> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < bytes.len() {
        let rest = &bytes[off..];
        let len = if rest[0] & 0b11 == 0b11 { 4 } else { 2 };
        if rest.len() < len {
            out.push(Insn {
                offset: off as u64,
                len: rest.len() as u8,
                text: "(bad)".to_string(),
                flow: Flow::Stop,
                target: None,
                valid: false,
                refusal: Some(Refusal {
                    reason: "a truncated instruction",
                }),
            });
            break;
        }
        let refusal = kprobe_refusal(rest).map(|reason| Refusal { reason });
        let text = if len == 2 {
            format!(".insn 2, {:#06x}", u16::from_le_bytes([rest[0], rest[1]]))
        } else {
            format!(
                ".insn 4, {:#010x}",
                u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]])
            )
        };
        out.push(Insn {
            offset: off as u64,
            len: len as u8,
            text,
            flow: Flow::Next,
            target: None,
            valid: true,
            refusal,
        });
        off += len;
    }
    out
}

/// Why `riscv_probe_decode_insn()` rejects the instruction at the start
/// of `code` (one parcel or two), if it does. The kernel matches its masks
/// against the 32-bit word at the address even for a compressed
/// instruction, but the opcode masks need the low two bits `11` that no
/// compressed instruction has, and c.ebreak's mask is the low half alone.
pub fn kprobe_refusal(code: &[u8]) -> Option<&'static str> {
    let half = u16::from_le_bytes([*code.first()?, *code.get(1)?]);
    if half & 0b11 != 0b11 {
        return (half == 0x9002).then_some("c.ebreak: riscv kprobes reject it");
    }
    match half & 0x7f {
        0x73 => Some(
            "a SYSTEM instruction (ecall, ebreak, CSR access, wfi, sret, sfence.vma): riscv \
             kprobes reject it",
        ),
        0x0f => {
            Some("a fence (fence, fence.i or a cbo.* cache operation): riscv kprobes reject it")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_and_full() {
        // c.addi sp,sp,-16 (0x1141); sd ra,8(sp) (0x00113423); c.ret (0x8082)
        let v = decode(&[0x41, 0x11, 0x23, 0x34, 0x11, 0x00, 0x82, 0x80], 0);
        let offs: Vec<u64> = v.iter().map(|i| i.offset).collect();
        assert_eq!(offs, vec![0, 2, 6]);
        assert_eq!(v[1].text, ".insn 4, 0x00113423");
        assert!(v.iter().all(|i| i.refusal.is_none()));
    }

    #[test]
    fn refused_instructions() {
        let refused = |b: &[u8]| kprobe_refusal(b).is_some();
        // csrr a5,sstatus (0x100027f3), ecall, ebreak, wfi, sfence.vma
        for w in [0x1000_27f3u32, 0x73, 0x0010_0073, 0x1050_0073, 0x1200_0073] {
            assert!(refused(&w.to_le_bytes()), "{w:#x}");
        }
        // fence rw,rw (0x0330000f), fence.i (0x0000100f), cbo.zero (a0)
        for w in [0x0330_000fu32, 0x0000_100f, 0x0045_200f] {
            assert!(refused(&w.to_le_bytes()), "{w:#x}");
        }
        // c.ebreak alone, and before anything
        assert!(refused(&[0x02, 0x90]));
        assert!(refused(&[0x02, 0x90, 0x73, 0x00]));
        // taken (simulated or stepped): sd ra,8(sp), auipc, jal, beq, c.j,
        // c.jr ra (0x8082), c.addiw, c.nop; and a compressed instruction
        // followed by a SYSTEM word is judged by its own parcel
        for b in [
            &0x0011_3423u32.to_le_bytes()[..],
            &0x0000_0097u32.to_le_bytes(),
            &0x0000_00efu32.to_le_bytes(),
            &0x0000_0063u32.to_le_bytes(),
            &[0x01, 0xa0],
            &[0x82, 0x80],
            &[0x05, 0x25],
            &[0x01, 0x00],
            &[0x82, 0x80, 0x73, 0x00, 0x00, 0x00],
        ] {
            assert!(!refused(b), "{b:x?}");
        }
        assert!(!refused(&[0x73]), "one byte is no instruction");
        let v = decode(&[0x82, 0x80, 0x73, 0x00, 0x00, 0x00], 0);
        assert!(v[0].refusal.is_none() && v[1].refusal.is_some());
    }
}
