//! ktrace's own advice attached to a kernel error: what the user most likely meant.
//! Pure suggestions; never changes the verdict. Not kernel behaviour.

use crate::error::{ErrorKind, ProbeError, Silent, TpErr};
use crate::parse::Target;

/// A hint for `err`, given the command's words.
pub fn hint_for(err: &ProbeError, words: &[&str], target: Target) -> Option<String> {
    let arch = target.arch;
    let word_at = || -> Option<&str> {
        let pos = err.pos?;
        let mut start = 0;
        for w in words {
            if pos >= start && pos <= start + w.len() {
                return Some(w);
            }
            start += w.len() + 1;
        }
        None
    };
    let h = match err.kind {
        ErrorKind::Logged(TpErr::BAD_REG_NAME) => {
            let w = word_at()?;
            let reg = w[w.find('%')? + 1..].split([')', ':']).next()?;
            match arch.suggest_register(reg) {
                Some(r) => format!("{arch} calls this register %{r}"),
                None => format!("registers on {arch}: %{}", arch.registers().join(", %")),
            }
        }
        ErrorKind::Logged(TpErr::BAD_VAR) => {
            let w = word_at().unwrap_or("");
            if w.contains("$arg") {
                if arch.has_arg_access() {
                    "$argN works only on a kprobe at a function entry (not on return probes, offsets or uprobes)".to_string()
                } else {
                    format!("{arch} has no $argN; use the argument registers %{}", arch.arg_registers().join(", %"))
                }
            } else {
                "variables: $retval, $stack, $stackN, $comm, $argN".to_string()
            }
        }
        ErrorKind::Logged(TpErr::RETVAL_ON_PROBE) => {
            "use an r probe (or SYM%return) to read $retval".to_string()
        }
        ErrorKind::Logged(TpErr::BAD_TYPE) => {
            "types: u8..u64, s8..s64, x8..x64, string, ustring, symbol, symstr, b<width>@<offset>/<container>, TYPE[N]".to_string()
        }
        ErrorKind::Logged(TpErr::BAD_STRING) => {
            "a string is read from memory: dereference the pointer, e.g. +0(%reg):string".to_string()
        }
        ErrorKind::Logged(TpErr::ARG_TOO_LONG) => {
            "an argument expression may be at most 63 bytes".to_string()
        }
        ErrorKind::Logged(TpErr::EVENT_TOO_LONG) => "event names are at most 63 bytes".to_string(),
        ErrorKind::Logged(TpErr::NON_UNIQ_SYMBOL) => {
            "several symbols have this name; probe by address or MOD:SYM".to_string()
        }
        ErrorKind::Logged(TpErr::BAD_RETPROBE) => {
            "return probes must be placed on the function entry (offset 0)".to_string()
        }
        ErrorKind::Logged(TpErr::MAXACT_NO_KPROBE) => {
            "maxactive (a number after the letter) is only for r probes".to_string()
        }
        ErrorKind::Logged(TpErr::BAD_EVENT_NAME) | ErrorKind::Logged(TpErr::BAD_GROUP_NAME) => {
            "names are C identifiers: letters, digits and _, not starting with a digit".to_string()
        }
        ErrorKind::Logged(TpErr::FAIL_REG_PROBE) if arch == crate::Arch::Arm64 => {
            // arch_prepare_kprobe(): a misaligned address is -EINVAL.
            let w = words.get(1)?;
            let w = w.split('%').next().unwrap_or(w);
            let p = w.find('+')?;
            let off = crate::kstrtox::kstrtoul(&w[p + 1..], 0, 64).ok()?;
            if off % 4 == 0 {
                return None;
            }
            let sym = &w[..p];
            let below = off - off % 4;
            format!(
                "+{off:#x} is not an instruction boundary: arm64 instructions are 4 bytes; \
                 the nearest boundaries are {sym}+{below:#x} and {sym}+{:#x}",
                below + 4
            )
        }
        ErrorKind::Logged(TpErr::NOSUP_BTFARG | TpErr::BAD_FETCH_ARG)
            if words.get(1).is_some_and(|p| p.starts_with('/') && p.contains(':')) =>
        {
            // A bare name on a uprobe ("BTF is not available" where the
            // kernel reads BTF names, "Invalid fetch argument" before): the
            // kernel reads names only from its own BTF, which describes no
            // program.
            let w = word_at()?;
            let name = w.split_once('=').map_or(w, |(_, v)| v);
            let name = name.split([':', '-', '.', '[']).next().unwrap_or(name);
            if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return None;
            }
            let path = words[1].rsplit_once(':').map_or(words[1], |(p, _)| p);
            let regs = arch.arg_registers();
            let regs = regs
                .iter()
                .enumerate()
                .map(|(i, r)| format!("arg{}=%{r}", i + 1))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{name:?} names no argument of {path}: there is no debug info for it that the kernel \
                 reads (BTF describes only the kernel; ktrace reads no DWARF); use arg1..argN in \
                 ktrace trace, or the argument registers ({arch}: {regs})"
            )
        }
        ErrorKind::Silent(Silent::CommType) => "write $comm or $comm:string".to_string(),
        _ => return None,
    };
    Some(h)
}

#[cfg(test)]
mod tests {
    use crate::{Arch, Offline, Target, check_line};

    fn hint(line: &str, arch: Arch) -> Option<String> {
        check_line(line, Target::new(arch), &Offline)
            .definition
            .unwrap_err()
            .hint
    }

    #[test]
    fn hints() {
        assert_eq!(
            hint("p vfs_read %rdi", Arch::X86_64).as_deref(),
            Some("x86_64 calls this register %di")
        );
        assert_eq!(
            hint("p vfs_read +0(%w1)", Arch::Arm64).as_deref(),
            Some("arm64 calls this register %x1")
        );
        assert!(
            hint("p vfs_read %zz", Arch::Arm64)
                .unwrap()
                .starts_with("registers on arm64: %x0, %x1")
        );
        assert!(
            hint("r vfs_read $arg1", Arch::X86_64)
                .unwrap()
                .contains("function entry")
        );
        assert!(
            hint("p vfs_read $arg1", Arch::Arm)
                .unwrap()
                .contains("%r0, %r1, %r2, %r3")
        );
        assert!(
            hint("p vfs_read $retval", Arch::X86_64)
                .unwrap()
                .contains("%return")
        );
        assert!(
            hint("p vfs_read $comm:u8", Arch::X86_64)
                .unwrap()
                .contains("$comm:string")
        );
        assert_eq!(hint("p vfs_read &1", Arch::X86_64), None);
        // bare_name_on_a_uprobe_said_only_btf_is_not_available
        let h = hint("p /tmp/prog:0x1136 count=n", Arch::X86_64).unwrap();
        assert!(
            h.starts_with("\"n\" names no argument of /tmp/prog: there is no debug info"),
            "{h}"
        );
        assert!(h.contains("arg1..argN") && h.contains("arg4=%cx"), "{h}");
        let btf_era = Target {
            kernel: crate::KernelVersion::new(7, 2),
            ..Target::new(Arch::Arm64)
        };
        let e = check_line("p /tmp/prog:0x1136 n", btf_era, &Offline)
            .definition
            .unwrap_err();
        assert_eq!(e.message, "BTF is not available or not supported");
        assert!(e.hint.unwrap().contains("arg1=%x0"));
        assert_eq!(hint("p /tmp/prog:0x1136 x=+0(%di", Arch::X86_64), None);
        assert_eq!(
            hint("p vfs_read+6", Arch::Arm64).as_deref(),
            Some(
                "+0x6 is not an instruction boundary: arm64 instructions are 4 bytes; \
                 the nearest boundaries are vfs_read+0x4 and vfs_read+0x8"
            )
        );
    }
}
