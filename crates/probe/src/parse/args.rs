//! A probe's arguments as its kind's parser hands them to
//! `traceprobe_parse_probe_arg()`: the `$arg…` meta-arguments expanded first
//! (`traceprobe_expand_meta_args()`), `:%pd`/`:%pD` rewritten
//! (`traceprobe_expand_dentry_args()`), the argument count checked, each word
//! parsed by [`crate::fetch`]; and, at registration, their `@SYM`s resolved
//! (`traceprobe_update_arg()`).

use super::{Argv, Ctx, Fail, Unchecked, silent};
use crate::arch::Arch;
use crate::btfvar::BtfScope;
use crate::error::{Silent, TpErr};
use crate::fetch::{ArgCtx, ArgError, ArgsState, MAX_TRACE_ARGS, parse_arg_with};
use crate::kernel::KernelVersion;
use crate::kstrtox::kstrtol;

/// The event field an argument fetches, if any (at the bottom of its
/// dereferences).
fn first_field(f: &crate::ast::Fetch) -> Option<&str> {
    match f {
        crate::ast::Fetch::Field(name) => Some(name),
        crate::ast::Fetch::Deref { inner, .. } => first_field(inner),
        _ => None,
    }
}

/// The offsets `:%pd`/`:%pD` expand to, `offsetof(struct dentry, d_name.name)`
/// and `offsetof(struct file, f_path.dentry)`, as the readback of Debian's
/// kernels shows them (corpus fixtures); `None` where not seen.
fn dentry_offsets(arch: Arch, kernel: KernelVersion) -> Option<(u64, u64)> {
    let series = kernel.series();
    if series != KernelVersion::new(6, 12) && series != KernelVersion::new(7, 2) {
        return None;
    }
    match arch {
        // arm-7.2: `+0x0(+0x20(+0x2c(%r0))):string` (6.12's struct file is
        // laid out as 7.2's: the 64-bit readbacks of both agree).
        Arch::Arm => Some((0x20, 0x2c)),
        // riscv64-7.2: `+0x0(+0x28(+0x48(%a0))):string`; the same on x86_64
        // 6.12, arm64 6.12 and 7.2 (conform seed 7: `+224(\-1):%pD`,
        // `%ip:%pD`, `$retval:%pD` read back with +0x48).
        Arch::Riscv64 | Arch::X86_64 | Arch::Arm64 => Some((0x28, 0x48)),
        Arch::I386 => None,
    }
}

/// `traceprobe_expand_dentry_args()` (6.9+): a `NAME=ARG:%pd` word becomes
/// `NAME=+0x0(+0xD(ARG)):string` and `:%pD` `+0x0(+0xD(+0xF(ARG))):string`, with
/// D and F the offsets of `struct dentry`'s name and `struct file`'s dentry in
/// the target's build. The kernel rewrites the words in place, so later errors
/// show the rewritten command. `None` when no word has such a type.
///
/// `unexpanded_star`: a `$arg*…` word is still in `words` because the
/// function's BTF is not known here; with it, the expansion before this
/// would have replaced the word whole, type and all (riscv64 7.2 offline:
/// `f:ev43613 tcp_sendmsg $arg*->pid:%pd` is taken), so it is left alone.
fn expand_dentry_args(
    words: &[String],
    ctx: &mut Ctx,
    unexpanded_star: bool,
) -> Option<Vec<String>> {
    let rewrites = |w: &String| {
        (w.ends_with(":%pd") || w.ends_with(":%pD")) && !(unexpanded_star && w.starts_with("$arg*"))
    };
    if !ctx.target.features().dentry_types || !words.iter().any(rewrites) {
        return None;
    }
    let (d_name, f_dentry) = match dentry_offsets(ctx.target.arch, ctx.target.kernel) {
        Some(o) => o,
        None => {
            // The layout of the target's build is not known here: the offsets
            // below are a 64-bit guess, and the readback is not checked.
            ctx.note(Unchecked::StructLayout);
            (0x28, 0x40)
        }
    };
    let words = words
        .iter()
        .map(|w| {
            if !rewrites(w) {
                return w.to_string();
            }
            let is_d = w.ends_with(":%pd");
            let w = &w[..w.len() - 4];
            let (name, body) = match w.split_once('=') {
                Some((n, b)) => (format!("{n}="), b),
                None => (String::new(), w),
            };
            if is_d {
                format!("{name}+0x0(+0x{d_name:x}({body})):string")
            } else {
                format!("{name}+0x0(+0x{d_name:x}(+0x{f_dentry:x}({body}))):string")
            }
        })
        .collect();
    Some(words)
}

/// The arguments from word `first` on, each through `traceprobe_parse_probe_arg()`,
/// and how many past `MAX_TRACE_ARGS` were dropped.
pub(super) fn parse_args<'e>(
    argv: &Argv,
    first: usize,
    actx: &ArgCtx,
    ctx: &mut Ctx<'e>,
    mut btf: Option<&mut BtfScope<'e>>,
) -> Result<(Vec<crate::ast::ProbeArg>, usize), Fail> {
    let features = ctx.target.features();
    let expanded = meta_args(argv, first, actx, ctx, btf.as_deref_mut())?;
    // The words parsed: the expanded ones, or the command's own.
    let mut words: Vec<String> = match &expanded {
        Some(w) => w.clone(),
        None => argv.words[first..].iter().map(|w| w.to_string()).collect(),
    };
    // Newer kernels refuse what older ones silently cut at MAX_TRACE_ARGS
    // (counted after the expansion).
    if features.too_many_args_error && words.len() > MAX_TRACE_ARGS {
        return Err(ctx.logged(argv, TpErr::TOO_MANY_ARGS, first, 0));
    }
    if features.too_many_args_silent && words.len() > MAX_TRACE_ARGS {
        return Err(Fail::Err(silent(Silent::TooManyArgs, &argv.joined)));
    }
    // `%pd`/`%pD` rewrite the words in place: in the command the log shows
    // too, unless the meta-argument expansion made a copy of them.
    let rewritten;
    // (kprobes and fprobes only: event probes and uprobes keep the words)
    let dentry = if actx.flags.kernel && !actx.flags.tpoint {
        let unexpanded_star = expanded.is_none() && btf.as_deref().is_some_and(BtfScope::unknown);
        expand_dentry_args(&words, ctx, unexpanded_star)
    } else {
        None
    };
    let rewrote = dentry.is_some();
    let log = match dentry {
        Some(new) => {
            words = new;
            if expanded.is_none() {
                let mut all: Vec<String> =
                    argv.words[..first].iter().map(|w| w.to_string()).collect();
                all.extend(words.iter().cloned());
                rewritten = all;
                Argv::split_words(&rewritten)
            } else {
                Argv::split_words_from(argv)
            }
        }
        None => Argv::split_words_from(argv),
    };
    let mut state = ArgsState::default();
    let mut args = Vec::new();
    let unknown_btf = btf.as_deref().is_some_and(BtfScope::unknown);
    // the command the log shows has the `%pd`/`%pD` words rewritten,
    // unless the expansion with BTF for the function made a copy first,
    // which is not known here (riscv64 6.12 offline, seed 59103: `p f
    // @dev_pm_qos_remove_notifier:%pD ... $arg2:s8`, caret 82, not 105)
    let mut after_meta = unknown_btf
        && rewrote
        && expanded.is_none()
        && argv.words[first..].iter().any(|w| w.starts_with("$arg"));
    for (i, w) in words.iter().enumerate().take(MAX_TRACE_ARGS) {
        let index = first + i;
        let span = if index < log.words.len() {
            log.span(index)
        } else {
            Default::default()
        };
        // `$arg…` words whose expansion needed BTF this check does not have
        let opaque = unknown_btf && w.starts_with("$arg");
        let parsed = if opaque {
            ctx.note(Unchecked::Btf);
            crate::fetch::opaque_arg(w, i, span, actx, &mut state)
        } else {
            parse_arg_with(w, i, span, actx, &mut state, btf.as_deref_mut())
        };
        match parsed {
            // 6.1 trace_eprobe_tp_arg_update(): the field is looked up after
            // the argument parsed, before the next one.
            Ok(a)
                if !opaque
                    && actx.flags.tpoint
                    && !features.btf_parser
                    && first_field(&a.fetch).is_some_and(|f| {
                        f != "comm"
                            && f != "COMM"
                            && btf.as_deref().and_then(|b| b.has_event_field(f)) == Some(false)
                    }) =>
            {
                return Err(ctx.logged(&log, TpErr::BAD_ATTACH_ARG, index, 0));
            }
            Ok(a) => args.push(a),
            Err(ArgError::Logged(e, off)) => {
                // in a `$argN` word too: the kernel reads the type after the
                // parameter's name, and logs its offset there in the word
                // it prints (x86_64 7.2 offline, seed 57002: `p kstrtoull
                // $arg2:b8@1/7`, "Unknown type is specified" at 17, `base`
                // one byte shorter than `$arg2`)
                if after_meta || opaque {
                    ctx.note(Unchecked::ErrorPosition);
                }
                if btf.as_deref().is_some_and(BtfScope::unknown) {
                    ctx.note(Unchecked::Btf);
                }
                return Err(ctx.arg_logged(&log, e, index, off));
            }
            Err(ArgError::Silent(s)) => return Err(Fail::Err(silent(s, &log.joined))),
        }
        if btf.as_deref().is_some_and(BtfScope::unknown) {
            ctx.note(Unchecked::Btf);
        }
        // the kernel logs a later word's error at its index among the
        // expanded words, which the command it prints does not have: the
        // caret moves by as many parameters as `$arg*` became, or past the
        // command (riscv64 6.12 offline, seed 57002: `r4096:_e38
        // phy_configure $arg* %epc:x`, at 38 of 37 bytes)
        after_meta |= opaque && w.starts_with("$arg*");
    }
    Ok((args, words.len().saturating_sub(MAX_TRACE_ARGS)))
}

/// The `$arg…` words checked, and expanded where BTF names them: the words
/// parsed in their place, or `None` when they stay the command's.
fn meta_args<'e>(
    argv: &Argv,
    first: usize,
    actx: &ArgCtx,
    ctx: &mut Ctx<'e>,
    btf: Option<&mut BtfScope<'e>>,
) -> Result<Option<Vec<String>>, Fail> {
    let features = ctx.target.features();
    let btf_era = features.btf_args && ctx.target.arch.has_arg_access();
    // traceprobe_expand_meta_args() (6.5+, kernel probes): `$arg…` words are
    // checked first, then, with BTF, `$argN` and `$arg*` become parameter names.
    let mut expanded: Option<Vec<String>> = None;
    if features.btf_parser && actx.flags.kernel && !actx.flags.tpoint {
        if btf_era || features.meta_args_without_btf {
            let mut own;
            let scope = match btf {
                Some(s) => s,
                None => {
                    own = BtfScope::new(ctx.env, ctx.target.arch, None);
                    &mut own
                }
            };
            let entry_or_exit = crate::fetch::function_entry(actx.flags)
                || crate::fetch::function_return(actx.flags);
            match crate::btfvar::expand_meta_args(
                &argv.words[first..],
                entry_or_exit,
                btf_era,
                scope,
            ) {
                Ok(crate::btfvar::Expanded::Same) => {}
                Ok(crate::btfvar::Expanded::Words(w)) => expanded = Some(w),
                Err((i, e)) => {
                    // refused before any argument as with BTF for the
                    // function; without it an earlier argument's error
                    // would come first
                    if scope.unknown() {
                        ctx.note(Unchecked::Btf);
                    }
                    return Err(match e {
                        ArgError::Logged(e, off) => ctx.arg_logged(argv, e, first + i, off),
                        ArgError::Silent(s) => Fail::Err(silent(s, &argv.joined)),
                    });
                }
            }
        } else if let Err((i, e)) = crate::fetch::scan_meta_args(&argv.words[first..], actx) {
            return Err(match e {
                ArgError::Logged(e, off) => ctx.arg_logged(argv, e, first + i, off),
                ArgError::Silent(s) => Fail::Err(silent(s, &argv.joined)),
            });
        }
    }
    Ok(expanded)
}

/// `traceprobe_update_arg()` at registration: `@SYM` must resolve. Kprobes report a
/// failure against the probe point; event probes return it without a log entry.
pub(super) fn check_arg_symbols(
    ctx: &mut Ctx,
    argv: &Argv,
    args: &[crate::ast::ProbeArg],
    logged: bool,
) -> Result<(), Fail> {
    let fail = |ctx: &Ctx, err: TpErr| {
        if logged {
            ctx.logged(argv, err, 1, 0)
        } else {
            Fail::Err(silent(Silent::Other, &argv.joined))
        }
    };
    for s in arg_symbol_names(args) {
        let Some(name) = symbol_of(ctx, s) else {
            return Err(fail(ctx, TpErr::FAIL_REG_PROBE));
        };
        match ctx.env.symbol_count(name) {
            Some(0) => return Err(fail(ctx, TpErr::BAD_PROBE_ADDR)),
            // kallsyms_lookup_name() gives 0, which is "not found" (x86_64
            // 6.12, conform seed 20261213, index 56386: `e:... a23=-0(
            // @fixed_percpu_data)`, ENOENT and nothing logged)
            Some(_) if ctx.env.symbol_at_zero(name) == Some(true) => {
                return Err(fail(ctx, TpErr::BAD_PROBE_ADDR));
            }
            Some(_) => {}
            None => ctx.note(Unchecked::ArgSymbols),
        }
    }
    Ok(())
}

/// The `@SYM[+OFFS]` of the arguments, as written.
fn arg_symbol_names(args: &[crate::ast::ProbeArg]) -> Vec<&str> {
    fn walk<'a>(f: &'a crate::ast::Fetch, out: &mut Vec<&'a str>) {
        match f {
            crate::ast::Fetch::Symbol(s) => out.push(s),
            crate::ast::Fetch::Deref { inner, .. } => walk(inner, out),
            _ => {}
        }
    }
    let mut syms = Vec::new();
    for a in args {
        walk(&a.fetch, &mut syms);
    }
    syms
}

/// The symbol of `SYM[+OFFS]`, or `None` when the offset is not a number
/// to traceprobe_split_symbol_offset(): traceprobe_update_arg() then fails
/// with -EINVAL at registration.
fn symbol_of<'a>(ctx: &Ctx, s: &'a str) -> Option<&'a str> {
    match s.find(['+', '-']) {
        Some(p) => kstrtol(&s[p..], 0, ctx.target.arch.bits())
            .is_ok()
            .then_some(&s[..p]),
        None => Some(s),
    }
}

/// Whether every `@SYM+OFFS` offset of the arguments parses: a probe that
/// waits for its module still has its arguments updated at creation, and a
/// bad offset is -EINVAL there, not the -ENOENT that lets it wait (x86_64
/// 6.1, conform seed 20261128: `p nosuchmod:vfs_read a6=@sym+2'8` refused
/// with "Failed to register probe event").
pub(super) fn arg_offsets_parse(ctx: &Ctx, args: &[crate::ast::ProbeArg]) -> bool {
    arg_symbol_names(args)
        .into_iter()
        .all(|s| symbol_of(ctx, s).is_some())
}
