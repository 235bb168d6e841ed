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
        assert_eq!(
            hint("p vfs_read+6", Arch::Arm64).as_deref(),
            Some(
                "+0x6 is not an instruction boundary: arm64 instructions are 4 bytes; \
                 the nearest boundaries are vfs_read+0x4 and vfs_read+0x8"
            )
        );
    }
}
