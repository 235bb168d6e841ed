//! riscv64: instruction boundaries from the length encoding alone.
//!
//! No RISC-V disassembler is a dependency yet: crates.io has `raki` (MIT,
//! a decoder) and `riscv-decode` (MIT/Apache-2.0, 0.2, small), neither
//! evaluated against objdump so far, so instructions are shown as `.insn`
//! words. Boundaries are
//! exact: the RISC-V base encoding says a parcel whose low two bits are not
//! `11` is a 16-bit compressed instruction, otherwise 32 bits (the 48- and
//! 64-bit encodings are reserved and unused by Linux). The kernel's probe
//! rules (arch/riscv/kernel/probes/decode-insn.c) are not reproduced.

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
            refusal: None,
        });
        off += len;
    }
    out
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
    }
}
