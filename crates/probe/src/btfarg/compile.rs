//! The definition-level stages of BTF argument compilation, in the kernel's
//! order: the probe point (which function, entry or return), what kallsyms
//! says of it, `traceprobe_expand_meta_args()` (`$arg*`, `$argN`),
//! `traceprobe_expand_dentry_args()` (`%pd`, `%pD`), each argument through the
//! parent module's `Ctx`, then the classic form's check, with a refusal mapped
//! back to the BTF expression it came from.
//!
//! Not here: the BTF type model and one argument's parsing (the parent module,
//! [`super`]).

use super::{ArgForm, BtfTypes, Compiled, Ctx, R, SymbolState, Words, member_path, split_words};
use crate::error::{ProbeError, TpErr};
use crate::fetch::MAX_TRACE_ARGS;
use crate::parse::{Target, check_line};
use crate::{Definition, Environment};

/// Processes one definition's BTF arguments and checks the classic form.
///
/// `btf` is the target kernel's BTF (`None` when it has none); `native` says the
/// target kernel reads BTF arguments itself (its tracefs README lists
/// `<argname>`), so the line is written as it is; otherwise the classic form is
/// written. `target` and `env` check the classic form as [`check_line`] does; a
/// limit the classic form exceeds (fetch-instruction budget, argument length or
/// count) is reported against the BTF expression it came from.
pub fn compile(
    line: &str,
    btf: Option<&dyn BtfTypes>,
    target: Target,
    env: &dyn Environment,
    native: bool,
) -> Result<Compiled, ProbeError> {
    let words = split_words(line);
    let is_kprobe = words.len() >= 2
        && matches!(words[0].as_bytes()[0], b'p' | b'r')
        && !(words[1].contains('/') && words[1].contains(':'));
    if !is_kprobe || line.chars().any(|c| c.is_control() && c != '\t') {
        return Ok(passthrough(line, &words, target, env));
    }
    let Some(mut ctx) = probe_point(&words, btf, target, native) else {
        // `%return` alone: nothing to resolve; the checker says what is wrong
        return Ok(passthrough(line, &words, target, env));
    };
    symbol_state(&mut ctx, env);
    let args: Vec<String> = words[2..].to_vec();
    let (mut expanded, from_argn, found) = expand_meta_args(&mut ctx, &args)?;
    expand_dentry_args(&mut ctx, &mut expanded)?;
    let (forms, uses_btf) = arguments(&mut ctx, &args, &expanded, &from_argn, found)?;
    // `$argN` and `$retval` in an otherwise classic definition mean what the
    // running kernel makes of them (6.1: the raw register, x64): only a
    // definition that needs BTF is rewritten.
    if !uses_btf || !ctx.strong {
        return Ok(passthrough(line, &words, target, env));
    }
    let mut classic_words: Vec<String> = words[..2].to_vec();
    for (f, orig) in forms.iter().zip(&expanded) {
        if f.note.is_empty() && f.classic == f.native {
            classic_words.push(orig.clone());
        } else {
            classic_words.push(format!("{}={}", f.name, f.classic));
        }
    }
    let classic = classic_words.join(" ");
    let checked = check_line(&classic, target, env);
    if let Err(e) = &checked.definition {
        return Err(classic_error(&mut ctx, e, &classic_words, &forms));
    }
    let readback = match &checked.definition {
        Ok(Definition::Probe(p)) if native => {
            let mut p = p.clone();
            for (a, f) in p.args.iter_mut().zip(&forms) {
                a.body = f.native.clone();
            }
            Some(crate::render::readback(&p, target.arch))
        }
        _ => checked.normalized(target.arch),
    };
    Ok(Compiled {
        text: if native {
            line.to_string()
        } else {
            classic.clone()
        },
        classic,
        uses_btf: true,
        args: forms,
        checked,
        readback,
    })
}

/// The definition as it is, checked as [`check_line`] does: nothing in it for
/// BTF to compile.
fn passthrough(line: &str, words: &[String], target: Target, env: &dyn Environment) -> Compiled {
    let joined = words.join(" ");
    let checked = check_line(line, target, env);
    let readback = checked.normalized(target.arch);
    Compiled {
        text: line.to_string(),
        classic: joined,
        uses_btf: false,
        args: Vec::new(),
        checked,
        readback,
    }
}

/// The probe point (`words[1]`): the function probed, at its entry or on
/// return, as the processing state starts from; `None` for `%return` alone.
fn probe_point<'a>(
    words: &[String],
    btf: Option<&'a dyn BtfTypes>,
    target: Target,
    native: bool,
) -> Option<Ctx<'a>> {
    let orig = Words::new(words);
    let place = words[1].as_str();
    let (place, pct_return) = match place.strip_suffix("%return") {
        Some(p) => (p, true),
        None => (place, false),
    };
    if place.is_empty() {
        return None;
    }
    let is_return = words[0].starts_with('r') || pct_return;
    let is_addr = place.as_bytes()[0].is_ascii_digit();
    let (sym, offset) = match place.find(['+', '-']) {
        Some(i) => (
            &place[..i],
            crate::kstrtox::kstrtol(&place[i..], 0, 64).unwrap_or(-1),
        ),
        None => (place, 0),
    };
    let (module, func) = match sym.split_once(':') {
        Some((m, f)) => (Some(m.to_string()), f.to_string()),
        None => (None, sym.to_string()),
    };
    Some(Ctx {
        btf,
        arch: target.arch,
        native,
        module,
        func: (!is_addr).then_some(func),
        entry: !is_return && !is_addr && offset == 0,
        ret: is_return,
        proto: None,
        orig,
        index: 0,
        offset: 0,
        last: None,
        note: String::new(),
        strong: false,
        symbol: None,
        similar: Vec::new(),
    })
}

/// What kallsyms says of the probed function (and nearby names when it has
/// none), for a missing prototype's hint.
fn symbol_state(ctx: &mut Ctx<'_>, env: &dyn Environment) {
    if let Some(f) = &ctx.func {
        ctx.symbol = match &ctx.module {
            Some(m) => match env.module_symbol(m, f) {
                Some(Some(true)) => Some(SymbolState::Exists),
                Some(Some(false)) => Some(SymbolState::Missing),
                Some(None) => Some(SymbolState::ModuleNotLoaded),
                None => None,
            },
            None => env.symbol_count(f).map(|n| match n {
                0 => SymbolState::Missing,
                _ => SymbolState::Exists,
            }),
        };
        if ctx.symbol == Some(SymbolState::Missing) {
            ctx.similar = env.similar_symbols(f);
        }
    }
}

/// `traceprobe_expand_meta_args()`: the arguments with `$arg*` and `$argN`
/// replaced by parameter names, which of them came from `$argN`, and whether
/// either was used.
fn expand_meta_args(ctx: &mut Ctx<'_>, args: &[String]) -> R<(Vec<String>, Vec<bool>, bool)> {
    // traceprobe_expand_meta_args(): $arg* and $argN at the start of a word.
    let mut args_idx = None;
    let mut found = false;
    for (i, a) in args.iter().enumerate() {
        if let Some(rest) = a.strip_prefix("$arg") {
            ctx.index = i + 2;
            if !ctx.entry && !ctx.ret {
                return Err(ctx.err(TpErr::NOFENTRY_ARGS, 0));
            }
            if rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                found = true;
                continue;
            }
            if !rest.starts_with('*') {
                return Err(ctx.err(TpErr::BAD_VAR, 0));
            }
            if args_idx.is_some() {
                return Err(ctx.err(TpErr::DOUBLE_ARGS, 0));
            }
            found = true;
            ctx.strong = true;
            args_idx = Some(i);
        }
    }
    let mut expanded = args.to_vec();
    let mut from_argn = vec![false; args.len()];
    if found {
        match ctx.proto().filter(|p| !p.params.is_empty()) {
            None => {
                if args_idx.is_some() {
                    let hint = ctx.missing_btf_hint();
                    return Err(ctx.err_hint(TpErr::NOSUP_BTFARG, 0, hint));
                }
            }
            Some(p) => {
                expanded.clear();
                from_argn.clear();
                for (i, a) in args.iter().enumerate() {
                    ctx.index = i + 2;
                    if Some(i) == args_idx {
                        expanded.extend(p.params.iter().map(|(n, _)| n.clone()));
                        from_argn.extend(p.params.iter().map(|_| false));
                    } else if let Some(rest) = a.strip_prefix("$arg") {
                        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                        let ty = &rest[digits..];
                        if !(ty.is_empty() || ty.starts_with(':')) {
                            return Err(ctx.err(TpErr::BAD_VAR, 0));
                        }
                        let n: usize = rest[..digits].parse().unwrap_or(0);
                        match n.checked_sub(1).and_then(|n| p.params.get(n)) {
                            Some((name, _)) => {
                                expanded.push(format!("{name}{ty}"));
                                from_argn.push(true);
                            }
                            None => {
                                return Err(ctx.err_hint(
                                    TpErr::NO_BTFARG,
                                    0,
                                    format!(
                                        "{} has {} parameters",
                                        ctx.func.as_deref().unwrap_or("?"),
                                        p.params.len()
                                    ),
                                ));
                            }
                        }
                    } else {
                        expanded.push(a.clone());
                        from_argn.push(false);
                    }
                }
            }
        }
    }
    if expanded.len() > MAX_TRACE_ARGS {
        ctx.index = 2;
        return Err(ctx.err(TpErr::TOO_MANY_ARGS, 0));
    }
    Ok((expanded, from_argn, found))
}

/// `traceprobe_expand_dentry_args()`: `%pd` and `%pD` become the string fetch
/// of the dentry's name.
fn expand_dentry_args(ctx: &mut Ctx<'_>, expanded: &mut [String]) -> R<()> {
    // traceprobe_expand_dentry_args(): NAME=ARG:%pd and :%pD.
    for a in expanded.iter_mut() {
        let Some(stem) = a.strip_suffix(":%pd").or_else(|| a.strip_suffix(":%pD")) else {
            continue;
        };
        let file = a.ends_with('D');
        ctx.strong = true;
        let b = ctx.btf.ok_or_else(|| {
            ctx.err_hint(
                TpErr::NO_BTF_ENTRY,
                0,
                "%pd and %pD need BTF for the offsets of struct dentry and struct file".to_string(),
            )
        })?;
        let name_off = member_path(b, "dentry", &["d_name", "name"]);
        let dentry_off = member_path(b, "file", &["f_path", "dentry"]);
        let (Some(name_off), Some(dentry_off)) = (name_off, dentry_off) else {
            return Err(ctx.no_classic(
                0,
                "the BTF lacks struct dentry.d_name.name or struct file.f_path.dentry".to_string(),
            ));
        };
        let (label, inner) = match stem.split_once('=') {
            Some((n, e)) => (format!("{n}="), e.to_string()),
            None => (String::new(), stem.to_string()),
        };
        *a = if file {
            format!("{label}+0x0(+0x{name_off:x}(+0x{dentry_off:x}({inner}))):string")
        } else {
            format!("{label}+0x0(+0x{name_off:x}({inner})):string")
        };
    }
    Ok(())
}

/// Each argument through [`Ctx::argument`]: its forms, and whether any used BTF.
fn arguments(
    ctx: &mut Ctx<'_>,
    args: &[String],
    expanded: &[String],
    from_argn: &[bool],
    found: bool,
) -> R<(Vec<ArgForm>, bool)> {
    let mut forms = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut uses_btf = found;
    for (i, a) in expanded.iter().enumerate() {
        ctx.index = i + 2;
        let strong = ctx.strong;
        let (name, native_body, classic) = ctx.argument(i, a, &names)?;
        if from_argn.get(i) == Some(&true) {
            ctx.strong = strong;
        }
        let changed = classic != native_body || !ctx.note.is_empty();
        uses_btf |= changed || a != args.get(i).map(String::as_str).unwrap_or("");
        names.push(name.clone());
        forms.push(ArgForm {
            name,
            native: native_body,
            classic,
            note: if changed && ctx.note.is_empty() {
                "expanded".to_string()
            } else {
                ctx.note.clone()
            },
        });
    }
    Ok((forms, uses_btf))
}

/// The classic form's refusal `e`, pointed at the BTF expression whose
/// classic form the kernel would refuse when there is one.
fn classic_error(
    ctx: &mut Ctx<'_>,
    e: &ProbeError,
    classic_words: &[String],
    forms: &[ArgForm],
) -> ProbeError {
    // Point at the BTF expression whose classic form the kernel would refuse.
    let cw = Words::new(classic_words);
    if let Some(pos) = e.pos
        && let Some(k) = (2..classic_words.len())
            .rev()
            .find(|&k| cw.starts[k] <= pos)
        && !forms[k - 2].note.is_empty()
    {
        let f = &forms[k - 2];
        ctx.index = k;
        let mut mapped = e.clone();
        mapped.command = ctx.orig.joined.clone();
        mapped.pos = Some(ctx.orig.pos(k, 0));
        mapped.hint = Some(format!(
            "the classic form of {}={} is {}={} (at byte {} of it), which the kernel refuses",
            f.name,
            f.native,
            f.name,
            f.classic,
            pos - cw.starts[k]
        ));
        return mapped;
    }
    e.clone()
}
