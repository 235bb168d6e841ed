//! The `kprobe_event=` boot parameter: how definitions travel on the kernel
//! command line, and how the kernel reads them back.
//!
//! Mirrors `setup_boot_kprobe_events()` of kernel/trace/trace_kprobe.c: the
//! parameter's value is copied into a `COMMAND_LINE_SIZE` buffer, every `,`
//! becomes a space, `;` separates definitions, and each one goes to
//! `create_or_delete_trace_kprobe()` — the parser of `kprobe_events`, so a
//! definition the boot parameter can carry is judged exactly as a write of
//! the same line (see [`crate::check_line`]). What the parameter cannot carry
//! is refused here with the reason: a word holding `,` (it would be split),
//! `;` (it would end the definition) or `"` (the command-line parser of
//! kernel/params.c, `next_arg()`, reads quotes), and kinds other than kprobes
//! and kretprobes (uprobes, fprobes, event probes and synthetic events have
//! no boot parameter). This module is pure text; checking the definitions is
//! the caller's.
//!
//! Across a reboot ([`persistent`]): `reserve_mem=SIZE:ALIGN:LABEL`
//! (mm/memblock.c, `reserve_mem()`: memory set aside at boot under a label)
//! and `trace_instance=NAME@LABEL` (kernel/trace/trace.c,
//! `enable_instances()`: an instance whose ring buffer lives in that memory
//! and is validated, not cleared, at the next boot: "Ring buffer meta \[N\]
//! is from previous boot!"). Both are from Linux 6.12.

use std::fmt;

use crate::Arch;

/// The group ktrace puts boot-time probes in when a definition names none,
/// so that `ktrace report --boot` and `ktrace clean --boot` find exactly
/// them (and never a probe somebody else set at boot).
pub const BOOT_GROUP: &str = "ktrace_boot";

/// The parameter's name on the command line.
pub const PARAM: &str = "kprobe_event=";

/// The instance `--persistent` asks the kernel for (`instances/ktrace`).
pub const PERSIST_INSTANCE: &str = "ktrace";

/// The `reserve_mem=` label of its memory.
pub const PERSIST_LABEL: &str = "ktrace";

/// The alignment ktrace asks of the reserved memory: 4096, as
/// Documentation/trace/debugging.rst does (a larger one can keep KASLR
/// from moving it between boots).
pub const PERSIST_ALIGN: u64 = 4096;

/// The first kernel series with `trace_instance=NAME@LABEL` on
/// `reserve_mem=` memory.
pub const PERSIST_SINCE: (u32, u32) = (6, 12);

/// Why the persistent instance's parameters cannot be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistRefusal {
    /// Not a size `memparse()` reads.
    Size,
    /// Not a whole number of pages: `enable_instances()` refuses a mapping
    /// whose size is not page aligned ("mapping size ... is not page
    /// aligned").
    NotPages,
    /// Smaller than one sub-buffer page per CPU and the meta page.
    TooSmall,
    /// The kernel is older than 6.12 (no boot-mapped instances).
    Kernel(u32, u32),
}

impl fmt::Display for PersistRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistRefusal::Size => f.write_str(
                "not a size the kernel reads (a number of bytes, optionally with K, M or G)",
            ),
            PersistRefusal::NotPages => f.write_str(
                "not a whole number of 4096-byte pages: the kernel refuses to map it \
                 (trace_instance=: 'mapping size is not page aligned')",
            ),
            PersistRefusal::TooSmall => f.write_str(
                "too small: the instance needs its meta page and a few sub-buffer pages per CPU \
                 (give at least 1M)",
            ),
            PersistRefusal::Kernel(a, b) => write!(
                f,
                "Linux {a}.{b} has no boot-mapped trace instances (trace_instance=NAME@LABEL on \
                 reserve_mem= memory came with 6.12): nothing survives a reboot there"
            ),
        }
    }
}

/// The parameters of a persistent instance of `size` bytes (as given:
/// `8M`, `16777216`): `reserve_mem=SIZE:4096:ktrace
/// trace_instance=ktrace@ktrace`, for a kernel of version `major.minor`.
/// No event list follows the instance name: the kernel enables that list
/// in `trace_init()`, from `start_kernel()`, before `kprobe_event=`
/// creates its probes (`fs_initcall`), and it enables boot probes in the
/// top-level buffer only (`enable_boot_kprobe_events()`), so they are
/// enabled in the instance after boot.
pub fn persistent(size: &str, major: u32, minor: u32) -> Result<String, PersistRefusal> {
    if (major, minor) < PERSIST_SINCE {
        return Err(PersistRefusal::Kernel(major, minor));
    }
    let bytes = buffer_size(size).ok_or(PersistRefusal::Size)?;
    if bytes % 4096 != 0 {
        return Err(PersistRefusal::NotPages);
    }
    if bytes < 1 << 20 {
        return Err(PersistRefusal::TooSmall);
    }
    Ok(format!(
        "reserve_mem={size}:{PERSIST_ALIGN}:{PERSIST_LABEL} \
         trace_instance={PERSIST_INSTANCE}@{PERSIST_LABEL}"
    ))
}

/// Why a definition cannot travel in `kprobe_event=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootRefusal {
    /// A word holds `,`: the kernel turns every comma into a space.
    Comma,
    /// A word holds `;`: the kernel splits definitions there.
    Semicolon,
    /// A word holds `"`: the command-line parser reads quotes.
    Quote,
    /// A word holds a character the command line ends a parameter at.
    Space,
    /// Not a kprobe or kretprobe.
    NotKprobe,
    /// A removal (`-:EVENT`).
    Removal,
}

impl fmt::Display for BootRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BootRefusal::Comma => {
                "a word holds ',', which kprobe_event= turns into a space (words are joined by commas there)"
            }
            BootRefusal::Semicolon => {
                "a word holds ';', which separates definitions in kprobe_event="
            }
            BootRefusal::Quote => {
                "a word holds '\"', which the kernel's command-line parser reads as quoting"
            }
            BootRefusal::Space => "a word holds a control character the command line cannot carry",
            BootRefusal::NotKprobe => {
                "kprobe_event= takes kprobes and kretprobes only (uprobes, fprobes, event probes \
                 and synthetic events have no boot parameter)"
            }
            BootRefusal::Removal => "kprobe_event= is for creating probes at boot, not removing them",
        })
    }
}

/// `COMMAND_LINE_SIZE` of `arch` (arch/*/include/asm/setup.h): the kernel
/// keeps at most this many bytes of its command line, the final NUL
/// included. riscv64 has 1024 from 6.6 on (512 before, not in the matrix).
pub fn command_line_size(arch: Arch) -> usize {
    match arch {
        Arch::X86_64 | Arch::I386 | Arch::Arm64 => 2048,
        Arch::Arm | Arch::Riscv64 => 1024,
    }
}

/// A definition without its comment: a write to `kprobe_events` ends the
/// text at the first `#` (`trace_parse_run_command()`, kernel/trace/trace.c,
/// `strchr(buf, '#')`, inside a word or a quoted string too), but
/// `kprobe_event=` hands each definition to
/// `create_or_delete_trace_kprobe()` as it is, where `#` and what follows
/// are arguments (x86_64 7.2 at boot: "Failed to add event(-22):
/// p:ktrace_boot/b83 vfs_read # a comment", which the same kernel takes
/// through kprobe_events). So the comment is left out of the parameter.
pub fn without_comment(def: &str) -> &str {
    def.split_once('#').map_or(def, |(d, _)| d).trim_end()
}

/// One definition in the parameter's form: its words joined by commas.
pub fn encode_line(line: &str) -> Result<String, BootRefusal> {
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    if words.first().is_some_and(|w| w.starts_with('-')) {
        return Err(BootRefusal::Removal);
    }
    for w in &words {
        if w.contains(',') {
            return Err(BootRefusal::Comma);
        }
        if w.contains(';') {
            return Err(BootRefusal::Semicolon);
        }
        if w.contains('"') {
            return Err(BootRefusal::Quote);
        }
        if w.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(BootRefusal::Space);
        }
    }
    Ok(words.join(","))
}

/// The whole parameter for definitions already encoded by [`encode_line`].
pub fn parameter(encoded: &[String]) -> String {
    format!("{PARAM}{}", encoded.join(";"))
}

/// The kernel's reading of a `kprobe_event=` value: each definition's words,
/// as `setup_boot_kprobe_events()` and then `argv_split()` produce them
/// (empty definitions are skipped: `create_or_delete_trace_kprobe()` of an
/// empty line does nothing).
pub fn decode(value: &str) -> Vec<Vec<String>> {
    let value = value.strip_prefix(PARAM).unwrap_or(value);
    value
        .replace(',', " ")
        .split(';')
        .map(|d| {
            d.split_ascii_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the head word of `line` (`p:GRP/EV`, `r4:GRP.EV`) names a group.
pub fn names_group(line: &str) -> bool {
    let head = line.split_ascii_whitespace().next().unwrap_or("");
    head.split_once(':')
        .is_some_and(|(_, place)| place.contains('/') || place.contains('.'))
}

/// `line` with its head rewritten to `PREFIX:GROUP/EVENT` (the kind prefix
/// and the rest of the words kept as written).
pub fn with_group(line: &str, group: &str, event: &str) -> String {
    let line = line.trim_start();
    let (head, rest) = line
        .split_once(|c: char| c.is_ascii_whitespace())
        .unwrap_or((line, ""));
    let prefix = head.split_once(':').map_or(head, |(p, _)| p);
    let rest = rest.trim_start();
    if rest.is_empty() {
        format!("{prefix}:{group}/{event}")
    } else {
        format!("{prefix}:{group}/{event} {rest}")
    }
}

/// A `trace_buf_size=` value (`memparse()`: a number with an optional
/// `K`, `M` or `G`), checked; the kernel takes it per CPU, in bytes.
pub fn buffer_size(text: &str) -> Option<u64> {
    let digits = text.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || text.len() - digits.len() > 1
    {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let shift = match text.as_bytes().last() {
        Some(b'k' | b'K') => 10,
        Some(b'm' | b'M') => 20,
        Some(b'g' | b'G') => 30,
        _ => 0,
    };
    n.checked_mul(1u64 << shift).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (tests/kernel/boot-corpus, x86_64 7.2): a definition
    /// with a comment went to kprobe_event= with the comment's words, which
    /// the boot-time parser takes as arguments and refuses.
    #[test]
    fn comments_end_the_definition_as_in_kprobe_events() {
        let cases = [
            ("p vfs_read # a comment", "p vfs_read"),
            ("p vfs_read#x", "p vfs_read"),
            ("p:e vfs_read s=\"a#b\":string", "p:e vfs_read s=\"a"),
            ("p vfs_read %di", "p vfs_read %di"),
            ("p vfs_read\t#", "p vfs_read"),
        ];
        for (def, want) in cases {
            assert_eq!(without_comment(def), want, "{def}");
        }
    }

    #[test]
    fn encode_then_the_kernels_reading_gives_the_words_back() {
        let lines = [
            "p:ktrace_boot/openat do_sys_openat2 dfd=%di:s32 path=+0(%si):ustring comm=$comm",
            "r4:ktrace_boot/ret\tdo_sys_openat2   ret=$retval:s32",
            "p:g/e vfs_read+4 b=+8(%x1):b4@2/32 s=$stack0 i=\\123",
        ];
        let encoded: Vec<String> = lines.iter().map(|l| encode_line(l).unwrap()).collect();
        let param = parameter(&encoded);
        assert!(!param.contains(' '), "{param}");
        let back = decode(&param);
        assert_eq!(back.len(), lines.len());
        for (l, w) in lines.iter().zip(&back) {
            assert_eq!(&l.split_ascii_whitespace().collect::<Vec<_>>(), w);
        }
    }

    #[test]
    fn what_the_parameter_cannot_carry_is_refused() {
        assert_eq!(
            encode_line("p vfs_read a=\\\"x,y\""),
            Err(BootRefusal::Comma)
        );
        assert_eq!(encode_line("p vfs_read a=x;y"), Err(BootRefusal::Semicolon));
        assert_eq!(
            encode_line("p vfs_read a=\\\"xy\""),
            Err(BootRefusal::Quote)
        );
        assert_eq!(encode_line("-:ev"), Err(BootRefusal::Removal));
        assert_eq!(encode_line("p vfs_read a=\x01"), Err(BootRefusal::Space));
    }

    #[test]
    fn groups() {
        assert!(!names_group("p vfs_read"));
        assert!(!names_group("r4:ev vfs_read"));
        assert!(names_group("p:g/ev vfs_read"));
        assert!(names_group("p:g.ev vfs_read"));
        assert_eq!(
            with_group("r4:ev vfs_read $retval", BOOT_GROUP, "ev"),
            "r4:ktrace_boot/ev vfs_read $retval"
        );
        assert_eq!(
            with_group("p vfs_read", BOOT_GROUP, "p_vfs_read_0"),
            "p:ktrace_boot/p_vfs_read_0 vfs_read"
        );
    }

    #[test]
    fn persistent_parameters() {
        assert_eq!(
            persistent("8M", 7, 2).unwrap(),
            "reserve_mem=8M:4096:ktrace trace_instance=ktrace@ktrace"
        );
        assert_eq!(
            persistent("16777216", 6, 12).unwrap(),
            "reserve_mem=16777216:4096:ktrace trace_instance=ktrace@ktrace"
        );
    }

    #[test]
    fn persistent_refusals() {
        assert_eq!(persistent("8M", 6, 11), Err(PersistRefusal::Kernel(6, 11)));
        assert_eq!(persistent("8M", 6, 1), Err(PersistRefusal::Kernel(6, 1)));
        assert_eq!(persistent("8MB", 7, 2), Err(PersistRefusal::Size));
        assert_eq!(persistent("", 7, 2), Err(PersistRefusal::Size));
        assert_eq!(persistent("1048577", 7, 2), Err(PersistRefusal::NotPages));
        assert_eq!(persistent("64K", 7, 2), Err(PersistRefusal::TooSmall));
        assert!(persistent("1M", 6, 12).is_ok());
        assert!(
            PersistRefusal::Kernel(6, 1)
                .to_string()
                .contains("came with 6.12")
        );
    }

    #[test]
    fn buffer_sizes() {
        assert_eq!(buffer_size("4M"), Some(4 << 20));
        assert_eq!(buffer_size("1408k"), Some(1408 << 10));
        assert_eq!(buffer_size("65536"), Some(65536));
        for bad in ["", "M", "4MB", "-1", "0", "4 M", "1.5M"] {
            assert_eq!(buffer_size(bad), None, "{bad:?}");
        }
    }
}
