//! x86_64: decoding with iced-x86 (AT&T syntax, as `objdump -d` prints it)
//! and the instructions the kernel refuses to kprobe.
//!
//! The rules are those of arch/x86/kernel/kprobes/core.c (Linux 6.1 and
//! later), written again here from what the kernel does, not copied:
//! - `can_probe()` decodes from the symbol to the probe address; an address
//!   between two instructions fails with `-EILSEQ`, which trace_kprobe.c
//!   reports as "Probe point is not an instruction boundary". Since 6.0 an
//!   `int3` on the way no longer stops it (only a kgdb breakpoint does).
//! - `__copy_instruction()` refuses, at the probe address itself, an `int3`
//!   (another debugger's breakpoint, or padding), an instruction with a
//!   Xen/KVM "emulate" prefix (`ud2` followed by `xen`/`kvm`, which the
//!   kernel's decoder counts as part of the next instruction), and the
//!   exception-masking `mov ..,%ss` / `pop %ss`.
//! - `prepare_emulation()` refuses far calls and jumps (`9a`, `ea`, `ff /3`,
//!   `ff /5`), `int3` and `iret`.
//! - `check_kprobe_address_safe()` refuses a `ud2` that is a `BUG()`/`WARN()`
//!   site (`find_bug()`); every `ud2` in kernel text is taken to be one.
//!
//! Not known from the bytes: jump-label and static-call sites, alternatives,
//! the blacklist; an `int3` in /proc/kcore may be another kprobe's.

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Formatter, GasFormatter, Instruction, Mnemonic,
    OpKind, Register,
};

use crate::{Flow, Insn, Refusal};

/// The Xen and KVM "emulate prefixes": `ud2` then the ASCII name.
const EMULATE_PREFIXES: [[u8; 5]; 2] = [
    [0x0f, 0x0b, b'x', b'e', b'n'],
    [0x0f, 0x0b, b'k', b'v', b'm'],
];

/// Decodes x86_64 code loaded at `address`.
pub fn decode(bytes: &[u8], address: u64) -> Vec<Insn> {
    let mut out = Vec::new();
    let mut formatter = GasFormatter::new();
    formatter.options_mut().set_first_operand_char_index(7);
    let o = formatter.options_mut();
    o.set_space_after_operand_separator(false);
    o.set_uppercase_hex(false);
    o.set_small_hex_numbers_in_decimal(false);
    o.set_branch_leading_zeros(false);
    o.set_rip_relative_addresses(true);
    let mut pos = 0usize;
    while pos < bytes.len() {
        let at = address.wrapping_add(pos as u64);
        let prefix = EMULATE_PREFIXES
            .iter()
            .find(|p| bytes[pos..].starts_with(&p[..]))
            .map(|p| p.len())
            .unwrap_or(0);
        let (instr, len) = decode_one(&bytes[pos + prefix..], at.wrapping_add(prefix as u64));
        let Some(instr) = instr else {
            out.push(Insn {
                offset: pos as u64,
                len: 1,
                text: "(bad)".to_string(),
                flow: Flow::Stop,
                target: None,
                valid: false,
                refusal: Some(Refusal {
                    reason: "bytes that do not decode (the kernel's decoder fails too)",
                }),
            });
            pos += 1;
            continue;
        };
        let mut text = String::new();
        formatter.format(&instr, &mut text);
        let text = text.trim_end().to_string();
        let total = prefix + len;
        let mut refusal = refusal(&instr);
        let text = if prefix > 0 {
            refusal = Some(Refusal {
                reason: "an instruction with a xen/kvm emulate prefix (__copy_instruction)",
            });
            format!("(emulate prefix) {text}")
        } else {
            text
        };
        out.push(Insn {
            offset: pos as u64,
            len: u8::try_from(total).unwrap_or(u8::MAX),
            text,
            flow: flow(&instr),
            target: target(&instr),
            valid: true,
            refusal,
        });
        pos += total;
    }
    out
}

/// One instruction at the start of `bytes`, or None when it does not decode.
fn decode_one(bytes: &[u8], ip: u64) -> (Option<Instruction>, usize) {
    if bytes.is_empty() {
        return (None, 0);
    }
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let instr = decoder.decode();
    if instr.is_invalid() || instr.len() == 0 {
        return (None, 0);
    }
    (Some(instr), instr.len())
}

fn flow(instr: &Instruction) -> Flow {
    match instr.flow_control() {
        FlowControl::Next | FlowControl::XbeginXabortXend => Flow::Next,
        FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => Flow::Jump,
        FlowControl::ConditionalBranch => Flow::CondJump,
        FlowControl::Call | FlowControl::IndirectCall => Flow::Call,
        FlowControl::Return => Flow::Return,
        FlowControl::Interrupt | FlowControl::Exception => Flow::Stop,
    }
}

fn target(instr: &Instruction) -> Option<u64> {
    match instr.op0_kind() {
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
            return Some(instr.near_branch_target());
        }
        _ => {}
    }
    instr
        .is_ip_rel_memory_operand()
        .then(|| instr.ip_rel_memory_address())
}

fn refusal(instr: &Instruction) -> Option<Refusal> {
    let reason = match instr.mnemonic() {
        Mnemonic::Int3 => {
            "int3: another debugger's breakpoint or padding (__copy_instruction, prepare_emulation)"
        }
        Mnemonic::Iret | Mnemonic::Iretd | Mnemonic::Iretq => {
            "iret: in-kernel iret is not emulated (prepare_emulation)"
        }
        Mnemonic::Ud2 => "ud2: a BUG()/WARN() site (find_bug in check_kprobe_address_safe)",
        _ => match instr.code() {
            Code::Call_ptr1616
            | Code::Call_ptr1632
            | Code::Jmp_ptr1616
            | Code::Jmp_ptr1632
            | Code::Call_m1616
            | Code::Call_m1632
            | Code::Call_m1664
            | Code::Jmp_m1616
            | Code::Jmp_m1632
            | Code::Jmp_m1664 => {
                "a far call or jump: segments are not emulated (prepare_emulation)"
            }
            Code::Popw_SS | Code::Popd_SS => {
                "pop %ss masks exceptions for one instruction (__copy_instruction)"
            }
            Code::Mov_Sreg_rm16 | Code::Mov_Sreg_r32m16 | Code::Mov_Sreg_r64m16
                if instr.op0_register() == Register::SS =>
            {
                "mov to %ss masks exceptions for one instruction (__copy_instruction)"
            }
            _ => return None,
        },
    };
    Some(Refusal { reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Insn {
        let v = decode(bytes, 0x1000);
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap()
    }

    #[test]
    fn table() {
        // (bytes, text, len, refused)
        let cases: &[(&[u8], &str, bool)] = &[
            (&[0x0f, 0x1f, 0x44, 0x00, 0x00], "nopl   (%rax,%rax)", false),
            (&[0x41, 0x57], "push   %r15", false),
            (&[0x49, 0x89, 0xf4], "mov    %rsi,%r12", false),
            (&[0xc3], "ret", false),
            (&[0xcc], "int3", true),
            (&[0x0f, 0x0b], "ud2", true),
            (&[0x48, 0xcf], "iretq", true),
            (&[0xff, 0x1c, 0x24], "lcalll *(%rsp)", true),
            (&[0xff, 0x2c, 0x24], "ljmpl  *(%rsp)", true),
            (&[0x8e, 0xd0], "mov    %eax,%ss", true),
            (&[0x8e, 0xd8], "mov    %eax,%ds", false),
            (&[0xfa], "cli", false),
            (&[0x9c], "pushf", false),
        ];
        for (bytes, text, refused) in cases {
            let i = one(bytes);
            assert_eq!(i.len as usize, bytes.len(), "{text}");
            assert!(i.valid);
            assert_eq!(i.text.replace("pushfq", "pushf"), *text, "{bytes:02x?}");
            assert_eq!(i.refusal.is_some(), *refused, "{text}: {:?}", i.refusal);
        }
    }

    #[test]
    fn branch_targets_are_absolute() {
        // call rel32 to 0x1000 + 5 + 0x10; jne rel8 back to 0x1005.
        let v = decode(&[0xe8, 0x10, 0, 0, 0, 0x75, 0xfe], 0x1000);
        assert_eq!(v[0].target, Some(0x1015));
        assert_eq!(v[0].flow, Flow::Call);
        assert_eq!(v[1].target, Some(0x1005));
        assert_eq!(v[1].flow, Flow::CondJump);
        // lea 0x10(%rip),%rax at 0x2000: 0x2000 + 7 + 0x10.
        let v = decode(&[0x48, 0x8d, 0x05, 0x10, 0, 0, 0], 0x2000);
        assert_eq!(v[0].target, Some(0x2017));
        assert_eq!(v[0].flow, Flow::Next);
    }

    #[test]
    fn emulate_prefix_is_one_refused_instruction() {
        let v = decode(&[0x0f, 0x0b, b'x', b'e', b'n', 0x0f, 0xa2, 0x90], 0);
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0].len, 7);
        assert!(v[0].text.ends_with("cpuid"), "{}", v[0].text);
        assert!(v[0].refusal.is_some());
        assert_eq!(v[1].offset, 7);
    }

    #[test]
    fn truncated_instruction_is_bad() {
        let v = decode(&[0x90, 0xe8, 0x00], 0);
        assert_eq!(v[0].text, "nop");
        assert!(!v[1].valid);
        assert_eq!(v[1].text, "(bad)");
    }
}
