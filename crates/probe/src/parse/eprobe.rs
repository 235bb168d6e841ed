//! `e` event probes: `__trace_eprobe_create()` (kernel/trace/trace_eprobe.c):
//! the event name, the attached event, the filter (parsed before the
//! arguments), the arguments and their `@SYM`s.

use super::args::{check_arg_symbols, parse_args};
use super::names::{parse_event_name, truncate_name};
use super::{Argv, Ctx, Fail, Unchecked};
use crate::ast::{ProbeDef, ProbeKind};
use crate::btfvar::BtfScope;
use crate::error::{ErrorKind, ProbeError, TpErr};
use crate::fetch::{ArgCtx, ArgFlags};

/// `__trace_eprobe_create()`: `e[:[GRP/][EVENT]] SYSTEM/EVENT [ARGS] [if FILTER]`.
pub(super) fn eprobe(argv: &Argv, ctx: &mut Ctx) -> Result<ProbeDef, Fail> {
    let w0 = argv.words[0];
    if argv.words.len() < 2 || !w0.starts_with('e') {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "event_probe";
    let (group, event) = match w0[1..].find(':') {
        Some(c) => parse_event_name(ctx, argv, 0, &w0[c + 2..], c + 2)?,
        None => (None, None),
    };
    let (system, sys_event) = match parse_event_name(ctx, argv, 1, argv.words[1], 0) {
        Ok((Some(s), Some(e))) => (s, e),
        _ => return Err(ctx.logged(argv, TpErr::NO_EVENT_INFO, 1, 0)),
    };
    let group = group.unwrap_or_else(|| "eprobes".to_string());
    let auto_event = event.is_none();
    let event = event.unwrap_or_else(|| truncate_name(sys_event.clone()));
    let (argc, filter) = split_filter(argv, ctx, &system, &sys_event)?;
    let fields = ctx.env.event_fields(&system, &sys_event);
    match &fields {
        Some(None) => return Err(ctx.logged(argv, TpErr::BAD_ATTACH_EVENT, 1, 0)),
        Some(Some(_)) => {}
        None => ctx.note(Unchecked::AttachedEvent),
    }
    check_filter(ctx, filter.as_ref(), &system, &sys_event)?;
    let (args, ignored_args) = arguments(argv, ctx, argc, &fields)?;
    check_arg_symbols(ctx, argv, &args, false)?;
    // trace_probe_register_event_call() last: an event probe is never
    // appended to, so any event of that name (a tracepoint's, another
    // dynamic event's) is -EEXIST, logged as "already used"
    match ctx.env.event_exists(&group, &event) {
        Some(true) => return Err(ctx.logged(argv, TpErr::EVENT_EXIST, 0, 0)),
        Some(false) => {}
        None => ctx.note(Unchecked::EventName),
    }
    Ok(ProbeDef {
        group,
        event,
        auto_event,
        kind: ProbeKind::Eprobe {
            system,
            event: sys_event,
            filter,
        },
        args,
        ignored_args,
    })
}

/// The words before `if` (how many) and the filter after it.
fn split_filter(
    argv: &Argv,
    ctx: &mut Ctx,
    system: &str,
    sys_event: &str,
) -> Result<(usize, Option<String>), Fail> {
    let mut argc = argv.words.len();
    let mut filter = None;
    if let Some(i) = argv.words.iter().skip(2).position(|w| *w == "if") {
        let idx = i + 2;
        let words = &argv.words[idx + 1..];
        if words.is_empty() {
            match ctx.env.event_fields(system, sys_event) {
                Some(None) => return Err(ctx.logged(argv, TpErr::BAD_ATTACH_EVENT, 1, 0)),
                _ => return Err(ctx.logged(argv, TpErr::NO_EP_FILTER, idx + 1, 0)),
            }
        }
        filter = Some(words.join(" "));
        argc = idx;
    }
    Ok((argc, filter))
}

/// trace_eprobe_parse_filter(): the filter is parsed before the
/// arguments, by the event filter parser, which logs its own error.
/// (quotes, parentheses and a first predicate without a field name are
/// decided without the event's fields)
fn check_filter(
    ctx: &mut Ctx,
    filter: Option<&String>,
    system: &str,
    sys_event: &str,
) -> Result<(), Fail> {
    let Some(text) = filter else {
        return Ok(());
    };
    let decls = ctx.env.event_field_decls(system, sys_event);
    let features = ctx.target.features();
    let env = ctx.env;
    let symbol_count = |name: &str| env.symbol_count(name);
    let dialect = crate::filter::Dialect::new(
        &features,
        ctx.target.arch.bits() / 8,
        ctx.target.possible_cpus,
        &symbol_count,
    );
    let verdict = match &decls {
        Some(decls) => crate::filter::check(text, decls, &dialect),
        None => crate::filter::no_field_name(text).map(Err),
    };
    // what the kernel cannot reach (a line refused before its filter is
    // parsed) is not reported as left open: noted only here
    match verdict {
        None if decls
            .as_ref()
            .is_some_and(|d| crate::filter::reads_before_program(text, d, &dialect)) =>
        {
            ctx.note(Unchecked::FilterByChance)
        }
        None => ctx.note(Unchecked::Filter),
        Some(Ok(())) => {}
        Some(Err((e, pos))) => {
            return Err(Fail::Err(ProbeError {
                kind: ErrorKind::Logged(e),
                message: e.message(),
                subsystem: Some("event filter parse error"),
                pos: Some(pos),
                command: text.clone(),
                hint: None,
            }));
        }
    }
    Ok(())
}

/// The arguments (the words before any `if`), parsed with the event's fields;
/// when one fails, a missing `@SYM` in an earlier one fails first.
fn arguments(
    argv: &Argv,
    ctx: &mut Ctx,
    argc: usize,
    fields: &Option<Option<Vec<String>>>,
) -> Result<(Vec<crate::ast::ProbeArg>, usize), Fail> {
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: false,
            kernel: true,
            fentry: false,
            tpoint: true,
            fprobe: false,
        },
    };
    let sub = Argv {
        words: argv.words[..argc].to_vec(),
        starts: argv.starts[..argc].to_vec(),
        joined: argv.joined.clone(),
    };
    let env = ctx.env;
    let mut scope = BtfScope::new(env, ctx.target.arch, None);
    if let Some(Some(fields)) = fields {
        scope.set_event_fields(fields);
    }
    let (args, ignored_args) = match parse_args(&sub, 2, &actx, ctx, Some(&mut scope)) {
        Ok(parsed) => parsed,
        Err(e) => {
            // trace_eprobe_tp_update_arg(): each argument's `@SYM` is
            // resolved as soon as it is parsed, so a symbol that does not
            // resolve in an earlier argument fails first, silently (x86_64
            // 6.1, seed 23: `+0(@no_such_fn) … $nlink:b43@14/128`).
            let failing = match &e {
                Fail::Err(pe) => pe
                    .pos
                    .map(|pos| sub.starts.iter().take_while(|s| **s <= pos).count()),
                _ => None,
            };
            if let Some(k) = failing.filter(|k| *k > 3 && *k <= sub.words.len()) {
                let prefix = Argv {
                    words: sub.words[..k - 1].to_vec(),
                    starts: sub.starts[..k - 1].to_vec(),
                    joined: sub.joined.clone(),
                };
                let mut scope = BtfScope::new(env, ctx.target.arch, None);
                if let Some(Some(fields)) = fields {
                    scope.set_event_fields(fields);
                }
                let unchecked = ctx.unchecked.clone();
                let earlier = parse_args(&prefix, 2, &actx, ctx, Some(&mut scope));
                ctx.unchecked = unchecked;
                if let Ok((earlier, _)) = earlier {
                    check_arg_symbols(ctx, argv, &earlier, false)?;
                }
            }
            return Err(e);
        }
    };
    Ok((args, ignored_args))
}
