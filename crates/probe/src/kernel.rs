//! Kernel versions and the probe-language features that depend on them.
//!
//! The reference is Linux 6.1 as Debian bookworm ships it (6.1.192 sources read for
//! this crate), which already carries the `symstr` type, the non-unique-symbol check
//! and the 3072-byte event size limit. Gates for other versions are recorded from
//! upstream history as understood by the authors; only 6.1 was verified against
//! source and a running kernel.

use std::fmt;
use std::str::FromStr;

/// A kernel version, `MAJOR.MINOR[.SUBLEVEL]`.
///
/// The sublevel matters within a long-term series, whose stable updates carry
/// fixes back (Debian's 5.10.223 still spells "valiable" and has no
/// non-unique-symbol check, 5.10.262 has both); without one the newest of the
/// series is meant ([`KernelVersion::LATEST`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelVersion {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Stable sublevel, [`KernelVersion::LATEST`] when not given.
    pub sublevel: u32,
}

/// Behaviour switches derived from a [`KernelVersion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `symstr` type.
    pub symstr: bool,
    /// `%return` suffix on probe points.
    pub return_suffix: bool,
    /// Immediate values `\IMM` and `\"string"`.
    pub immediates: bool,
    /// Event probes (`e:`).
    pub eprobes: bool,
    /// "The symbol is not unique" check.
    pub non_unique_symbol: bool,
    /// 3072-byte limit on an event's argument data.
    pub event_size_limit: bool,
    /// `BAD_VAR` message spelled "variable" (older kernels: "valiable").
    pub bad_var_spelling_fixed: bool,
    /// `char` type.
    pub char_type: bool,
    /// `%pd`/`%pD` types (recorded only; this crate does not implement them).
    pub dentry_types: bool,
    /// `$argN` outside a function entry is refused with "$arg* can be used only on
    /// function entry or exit" (seen on uprobes of 6.18; 6.1 says "Invalid
    /// $-variable specified"). Gate at 6.5, when BTF arguments arrived (unverified).
    pub nofentry_args_error: bool,
    /// `symbol`/`symstr` are unknown types for uprobes (seen on 6.18; gate at 6.10,
    /// unverified).
    pub uprobe_rejects_symbol_types: bool,
    /// `$comm`/immediate strings with another type are logged ("$comm and
    /// immediate-string only accepts string type") and `pN` reads "Maxactive is only
    /// for function exit" (seen on 6.12; 6.1 rejects the first silently). Gated at
    /// 6.12, the earliest version where it was observed.
    pub newer_messages: bool,
    /// More than `MAX_TRACE_ARGS` (128) arguments are refused with "Too many
    /// arguments are specified" (logged at the first argument); older kernels
    /// keep the first 128 and ignore the rest without a word. The logged error
    /// came with "tracing: probe-events: Log error for exceeding the number of
    /// arguments" (merged for 6.15); seen on the 6.18 host, and 6.1 guests keep
    /// 128 silently.
    pub too_many_args_error: bool,
    /// The BTF-era argument parser (`CONFIG_PROBE_EVENTS_BTF_ARGS`, Debian's
    /// kernels from 6.5 on; the README lists `<argname>`): `$argN` words are
    /// expanded to the function's BTF parameter names (`p:e vfs_read $arg1`
    /// reads back `file=file`), `$argN` also on return probes, bare names are
    /// BTF variables ("This variable is not found at this probe point"),
    /// `$retval` is typed from BTF, `$arg*` outside a function entry or exit is
    /// "$arg* can be used only on function entry or exit", an event probe's
    /// unknown field is "Invalid $-variable specified". Seen on Debian's 6.12.
    pub btf_args: bool,
    /// The parser generation that knows BTF names at all (6.5+), whether or not
    /// the kernel was built with BTF arguments: a bare name is a BTF variable
    /// ("BTF is not available or not supported" where there is none, and on
    /// uprobes), `$arg…` words are looked at before anything else, and `$argN`
    /// reads entry arguments from return probes too.
    pub btf_parser: bool,
    /// The caret of type errors after a dereference lands past the
    /// dereference's `+OFFS(` (the parse context's offset is not restored):
    /// `+0(%di):b8@1/8` is reported 3 bytes later than on 6.1. Seen on 6.12;
    /// gated with the parse context rework (6.5).
    pub deref_caret_drift: bool,
    /// More than 128 arguments are refused without a log entry (6.12; older
    /// kernels cut silently, 6.15 and later log "Too many arguments").
    pub too_many_args_silent: bool,
    /// A `dynamic_events` line no kind of event takes is logged by `dynevent`
    /// ("No matching dynamic event type", caret at the start). Seen on 7.2; the
    /// 6.18 host logs nothing. Gated at 7.0 (estimate between the two).
    pub no_match_error: bool,
    /// Event names of the newer form: `.` also separates group and event, a
    /// group may contain `-`, and `GRP/` with no event takes the default event
    /// name. Debian's 5.10 has none of these (seen); 6.1 has all. Gated at 6.0.
    pub newer_event_names: bool,
    /// A return probe's default maxactive is `max(10, 2 × CPUs)`; older kernels
    /// built without `CONFIG_PREEMPTION` (Debian's 5.10) take the number of
    /// possible CPUs. Gated at 6.0.
    pub maxactive_default_10: bool,
    /// Array fields are listed without their length in the format file
    /// (`u8 arg1[]`); Debian's 5.10 writes `u8 arg1[4]`. Gated at 6.0.
    pub array_fields_unsized: bool,
    /// Event names of 64 bytes are refused ("Event name is too long") and an
    /// empty immediate string `\"` is "String is not closed with '\"'";
    /// Debian's 5.10.223 takes both (seen), 5.10.262 refuses both (seen).
    pub name_and_imm_fixes: bool,
    /// fprobe and tracepoint probe events (`f`, `t` in `dynamic_events`; the
    /// README lists `f[:[<group>/][<event>]]`), from 6.5.
    pub fprobes: bool,
    /// fprobes take no maxactive (`fN` is "Invalid maxactive number") and an
    /// fprobe fetching `$retval` becomes an exit probe: seen on 7.2; gated at
    /// 6.16 (estimate, between 6.12 and 7.2).
    pub fprobe_no_maxactive: bool,
    /// See `fprobe_no_maxactive`.
    pub fprobe_auto_return: bool,
    /// An fprobe whose symbol ftrace cannot attach to fails with -ENOENT,
    /// "Invalid probed address or symbol" (fprobe on fgraph, 6.14: seen on
    /// 7.2); before, `ftrace_set_filter()`'s -EINVAL is "Failed to register
    /// probe event" (seen on x86_64 6.12, for init functions, notrace ones
    /// and names that no function has). Gated with `fprobe_no_maxactive`.
    pub fprobe_no_match_enoent: bool,
    /// `$arg…` words are scanned ("$arg* can be used only on function entry or
    /// exit", "BTF is not available or not supported" for `$arg*`) also on
    /// kernels without BTF arguments: seen on arm 7.2 and arm 6.12.117; arm
    /// 6.12.95 leaves them to the classic parser. Gated at 6.16 (estimate) and
    /// at 6.12 after .95 (a stable backport).
    pub meta_args_without_btf: bool,
    /// An automatic event name has `*` made `_` as well as `:` and `.`
    /// (`sanitize_event_name()`, a stable fix: seen on 6.12.117 and 7.2,
    /// `f kbd*` is `kbd___entry`, `r nosuchmod:vfs_re*d` is
    /// `r_nosuchmod_vfs_re_d_0`). Gated at 6.12 (estimate for older series).
    pub sanitize_star: bool,
    /// An fprobe or tracepoint probe (`f:`, `t:`) is registered when it is
    /// created: a tracepoint probe is an fprobe on the tracepoint's
    /// `__probestub_TP`, and a stub ftrace cannot attach to (notrace: the
    /// power and rpm tracepoints of kernel/trace/) fails to register
    /// (x86_64 6.12, seed 23: cpu_frequency refused); the arguments' `@SYM`
    /// are resolved then. Later kernels register fprobe events only when
    /// they are enabled, so both lines are taken (seed 23 on 7.2: `t:ev
    /// cpu_frequency_limits`, `t ma_write`, `f gnet_stats_copy_queue
    /// @update_wall_tie`). Gated at 6.16 (estimate: the matrix has 6.12 and
    /// 7.2).
    pub fprobe_registered_at_creation: bool,
    /// x86 `can_probe()` refuses an INT or UD instruction at the probe
    /// address as no instruction boundary (`is_exception_insn()`): x86_64
    /// 6.12.x and 7.2, `p do_sys_open+0x65` on an int3 of the padding after
    /// `ret`. 6.1.192 and 5.10 take it there and fail to copy it ("Failed to
    /// register probe event"). Gated at 6.12 (estimate).
    pub can_probe_refuses_exceptions: bool,
    /// An event filter that ends in `&&` or `||` after predicates that
    /// parse is "Meaningless filter expression" at the filter's end
    /// (x86_64 6.1.192 and 6.12.118: `prev_pid == 1 &&`, seed 59's
    /// `state & 90 && !!(cpu_id > 81) &&`); 7.2.13 takes it. Gated at 6.16
    /// (estimate: the matrix has 6.12 and 7.2).
    pub filter_dangling_op_refused: bool,
    /// The event filter takes `CPUS{LIST}` values (on the CPU fields and
    /// on scalar fields, with `==`, `!=` and `&`): seen on 6.12.118 and
    /// 7.2.13; 6.1.192 reads `CPUS` as "Invalid value". Gated at 6.6 (the
    /// series that brought them).
    pub filter_cpus: bool,
    /// The event filter reads a `.function` suffix (a field compared with
    /// a function's name or address): seen on 6.12.118 and 7.2.13; 6.1.192
    /// reads the `.` as "Invalid operator". Gated at 6.2 (estimate).
    pub filter_function: bool,
    /// The event filter knows the generic field `STACKTRACE` (unsigned):
    /// seen on 6.12.118 and 7.2.13; 6.1.192 says "Field not found". Gated
    /// at 6.5 (estimate).
    pub filter_stacktrace: bool,
    /// `_kprobe_addr()` looks the address up in kallsyms (with
    /// `arch_adjust_kprobe_addr()`, 5.18): an address kallsyms cannot place
    /// is -ENOENT ("Invalid probed address or symbol", or deferred for a raw
    /// address). Before (arm64 5.10.223), `check_kprobe_address_safe()`
    /// refuses it as no kernel text, -EINVAL ("Failed to register probe
    /// event").
    pub kprobe_addr_lookup: bool,
    /// Typecasts `(STRUCT)FIELD` in fetch arguments (event probes): other
    /// probes get "Typecasts are only for eprobe fields", or "BTF is not
    /// available or not supported" without BTF arguments (seen on the 6.18
    /// host; 6.12 reads `(` as an invalid fetch argument). Gated at 6.16
    /// (estimate, between the two).
    pub typecasts: bool,
    /// A removal that names a group and no event (`-:grp/`) removes the
    /// group's events: `dyn_event_release()` refuses an empty event name
    /// only without a group since 6.0 (Linyu Yuan, June 2022); 5.10 refuses
    /// it with `EINVAL` and nothing logged (offline, conform seed 1204).
    pub remove_whole_group: bool,
    /// `validate_probe_symbol()` (no symbol, or more than one) before the
    /// function-entry check of a return probe: seen in 6.12 and 7.2's
    /// sources; 6.1 counts the symbol after that check. Gated at 6.12.
    pub validate_symbol_early: bool,
    /// arm64's `is_probed_address_atomic()` finds a load-exclusive with the
    /// older, wider `aarch64_insn_is_load_ex()` masks, which match `ldar`
    /// too: 6.12.118 and 6.1.192 refuse `p psi_trigger_poll+0x80`, 0x5c
    /// past an `ldar` with no exclusive pair between (conform seed
    /// 20261128 at 200,000; `ktrace disasm` marks it). Later kernels
    /// narrowed the masks. Gated at 6.16 (estimate).
    pub arm64_wide_exclusive_masks: bool,
    /// Synthetic events in `dynamic_events` (`s:`, CONFIG_SYNTH_EVENTS; the
    /// README lists `s:[synthetic/]`): Debian's 5.10 and riscv64 6.12 have
    /// none and refuse every `s:` line without a log entry.
    pub synthetic_events: bool,
    /// The error_log keeps a caret position in a byte (`u8 pos`), and a
    /// command of more than 255 bytes cut (5.10): positions wrap at 256.
    pub error_pos_u8: bool,
    /// Kprobe events (CONFIG_KPROBE_EVENTS). A kernel built without them
    /// (the 6.18 host: uprobes only) has no kprobe parser behind
    /// `dynamic_events`: a `p`/`r` line that is no uprobe is a line no kind
    /// of event takes (nothing logged, or "No matching dynamic event type"
    /// where that is logged), however it is spelled. Live, from the
    /// missing `kprobe_events` file; every version has them otherwise.
    pub kprobes: bool,
}

impl KernelVersion {
    /// The conformance target: Linux 6.1 (Debian bookworm).
    pub const DEFAULT: KernelVersion = KernelVersion::new(6, 1);

    /// The sublevel meaning "the newest of the series".
    pub const LATEST: u32 = u32::MAX;

    /// A version from its numbers (the newest sublevel of the series).
    pub const fn new(major: u32, minor: u32) -> Self {
        KernelVersion {
            major,
            minor,
            sublevel: Self::LATEST,
        }
    }

    /// A version with its stable sublevel.
    pub const fn with_sublevel(major: u32, minor: u32, sublevel: u32) -> Self {
        KernelVersion {
            major,
            minor,
            sublevel,
        }
    }

    /// The series, without the sublevel.
    pub const fn series(self) -> KernelVersion {
        KernelVersion::new(self.major, self.minor)
    }

    /// Later than `major.minor.sublevel` (a later series, or the same series
    /// with a later sublevel).
    fn after(self, major: u32, minor: u32, sublevel: u32) -> bool {
        (self.major, self.minor, self.sublevel) > (major, minor, sublevel)
    }

    /// Whether this is `major.minor` or later.
    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }

    /// The features of this version.
    pub fn features(self) -> Features {
        Features {
            symstr: self.at_least(6, 1),
            return_suffix: self.at_least(5, 10),
            immediates: self.at_least(5, 7),
            eprobes: self.at_least(5, 15),
            remove_whole_group: self.at_least(6, 0),
            non_unique_symbol: self.after(5, 10, 223),
            event_size_limit: self.after(5, 10, 223),
            // Carried back late: Debian's 5.10.223 and 6.12.95 still have the
            // typo, 5.10.262, 6.1.192 and 6.12.117 do not (corpus fixtures).
            bad_var_spelling_fixed: self.at_least(5, 10)
                && (self.series() != KernelVersion::new(5, 10) || self.after(5, 10, 223))
                && (self.series() != KernelVersion::new(6, 12) || self.after(6, 12, 95)),
            char_type: self.at_least(6, 5),
            dentry_types: self.at_least(6, 9),
            nofentry_args_error: self.at_least(6, 5),
            uprobe_rejects_symbol_types: self.at_least(6, 10),
            newer_messages: self.at_least(6, 12),
            too_many_args_error: self.at_least(6, 15),
            btf_args: self.at_least(6, 5),
            btf_parser: self.at_least(6, 5),
            deref_caret_drift: self.at_least(6, 5),
            too_many_args_silent: self.at_least(6, 5) && !self.at_least(6, 15),
            no_match_error: self.at_least(7, 0),
            newer_event_names: self.at_least(6, 0),
            maxactive_default_10: self.at_least(6, 0),
            array_fields_unsized: self.at_least(6, 0),
            name_and_imm_fixes: self.after(5, 10, 223),
            fprobes: self.at_least(6, 5),
            fprobe_no_maxactive: self.at_least(6, 16),
            fprobe_auto_return: self.at_least(6, 16),
            fprobe_no_match_enoent: self.at_least(6, 16),
            // A stable backport reached 6.12 between .95 (corpus fixtures:
            // classic parser) and .117 (CI's arm 6.12 guest: `$arg*` refused
            // as "BTF is not available or not supported").
            meta_args_without_btf: self.at_least(6, 16)
                || (self.series() == KernelVersion::new(6, 12) && self.after(6, 12, 95)),
            typecasts: self.at_least(6, 16),
            sanitize_star: self.at_least(6, 12),
            fprobe_registered_at_creation: !self.at_least(6, 16),
            can_probe_refuses_exceptions: self.at_least(6, 12),
            filter_dangling_op_refused: !self.at_least(6, 16),
            filter_cpus: self.at_least(6, 6),
            filter_function: self.at_least(6, 2),
            filter_stacktrace: self.at_least(6, 5),
            kprobe_addr_lookup: self.at_least(5, 18),
            validate_symbol_early: self.at_least(6, 12),
            arm64_wide_exclusive_masks: !self.at_least(6, 16),
            synthetic_events: self.at_least(5, 15),
            error_pos_u8: !self.at_least(5, 15),
            kprobes: true,
        }
    }
}

impl KernelVersion {
    /// The kernel series ktrace is checked against on real kernels (Debian's
    /// bullseye, bookworm, trixie and sid kernels; see the corpus fixtures).
    pub const SERIES: &'static [KernelVersion] = &[
        KernelVersion::new(5, 10),
        KernelVersion::new(6, 1),
        KernelVersion::new(6, 12),
        KernelVersion::new(7, 2),
    ];

    /// The newest of [`KernelVersion::SERIES`].
    pub const NEWEST: KernelVersion = KernelVersion::new(7, 2);

    /// The version an offline check targets when none is given: the running
    /// kernel's series when it is one of [`KernelVersion::SERIES`], else the newest.
    pub fn offline_default(running: Option<KernelVersion>) -> KernelVersion {
        running
            .map(KernelVersion::series)
            .filter(|r| Self::SERIES.contains(r))
            .unwrap_or(Self::NEWEST)
    }
}

impl Default for KernelVersion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if self.sublevel != Self::LATEST {
            write!(f, ".{}", self.sublevel)?;
        }
        Ok(())
    }
}

/// A version string that is not `MAJOR.MINOR[.PATCH][-suffix]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad kernel version {0:?}: expected MAJOR.MINOR, e.g. 6.1")]
pub struct BadVersion(pub String);

impl FromStr for KernelVersion {
    type Err = BadVersion;

    /// Accepts `6.1`, `6.1.0-13-amd64` (the `uname -r` form) and the like.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(s.to_string());
        let mut parts = s.split(|c: char| !c.is_ascii_digit());
        let major = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let minor = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        if !s.starts_with(|c: char| c.is_ascii_digit()) || !s[major_len(s)..].starts_with('.') {
            return Err(bad());
        }
        // `5.10.223` (or `6.18.44-fc`) names a stable update; `6.1` and
        // `5.10.0-32-cloud-arm64` (Debian's ABI: the sublevel is in
        // /proc/version, see [`KernelVersion::from_proc_version`]) the newest
        // of the series.
        let rest = &s[major_len(s) + 1..];
        let rest = &rest[rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len())..];
        let sublevel = rest
            .strip_prefix('.')
            .map(|sub| &sub[..sub.find(|c: char| !c.is_ascii_digit()).unwrap_or(sub.len())])
            .and_then(|d| d.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(Self::LATEST);
        Ok(KernelVersion {
            major,
            minor,
            sublevel,
        })
    }
}

impl KernelVersion {
    /// The version `/proc/version` names: Debian's `… Debian 5.10.223-1 (…)`
    /// carries the stable sublevel its `uname -r` (`5.10.0-32-cloud-arm64`)
    /// does not; otherwise the release after `Linux version`.
    pub fn from_proc_version(text: &str) -> Option<KernelVersion> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "Debian")
            && let Some(v) = words.get(i + 1).and_then(|w| w.parse().ok())
        {
            return Some(v);
        }
        let i = words.iter().position(|w| *w == "version")?;
        words.get(i + 1)?.parse().ok()
    }
}

fn major_len(s: &str) -> usize {
    s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_versions() {
        assert_eq!("6.1".parse(), Ok(KernelVersion::new(6, 1)));
        assert_eq!("6.1.0-13-cloud-amd64".parse(), Ok(KernelVersion::new(6, 1)));
        assert_eq!("5.15.0".parse(), Ok(KernelVersion::new(5, 15)));
        assert_eq!(
            "5.10.223".parse(),
            Ok(KernelVersion::with_sublevel(5, 10, 223))
        );
        assert_eq!(
            "5.10.0-32-cloud-arm64".parse(),
            Ok(KernelVersion::new(5, 10))
        );
        assert_eq!(
            KernelVersion::with_sublevel(5, 10, 223).to_string(),
            "5.10.223"
        );
        assert_eq!(
            "6.18.44-fc-v769".parse(),
            Ok(KernelVersion::with_sublevel(6, 18, 44))
        );
        // The layout of Debian's /proc/version (an example line: the compiler's
        // own "(Debian …)" must not be taken for the kernel's).
        let debian = "Linux version 5.10.0-32-cloud-arm64 (debian-kernel@lists.debian.org) \
            (gcc-10 (Debian 10.2.1-6) 10.2.1 20210110, GNU ld (GNU Binutils for Debian) \
            2.35.2) #1 SMP Debian 5.10.223-1 (2024-08-10)";
        assert_eq!(
            KernelVersion::from_proc_version(debian),
            Some(KernelVersion::with_sublevel(5, 10, 223))
        );
        assert!(
            !KernelVersion::with_sublevel(5, 10, 223)
                .features()
                .non_unique_symbol
        );
        assert!(KernelVersion::new(5, 10).features().non_unique_symbol);
        assert!("6".parse::<KernelVersion>().is_err());
        assert!("v6.1".parse::<KernelVersion>().is_err());
        assert!("6-1".parse::<KernelVersion>().is_err());
    }

    #[test]
    fn offline_default_is_a_known_series() {
        let v = |s: &str| s.parse::<KernelVersion>().ok();
        assert_eq!(
            KernelVersion::offline_default(v("6.12.117+deb13-cloud-arm64")),
            KernelVersion::new(6, 12)
        );
        assert_eq!(
            KernelVersion::offline_default(v("5.10.0-46-cloud-amd64")),
            KernelVersion::new(5, 10)
        );
        assert_eq!(
            KernelVersion::offline_default(v("6.18.44")),
            KernelVersion::new(7, 2)
        );
        assert_eq!(KernelVersion::offline_default(None), KernelVersion::NEWEST);
    }

    #[test]
    fn gates() {
        assert!(KernelVersion::new(6, 1).features().symstr);
        assert!(!KernelVersion::new(5, 15).features().symstr);
        assert!(!KernelVersion::new(6, 1).features().char_type);
        assert!(KernelVersion::new(6, 6).features().char_type);
    }
}
