//! `f` function-entry/exit probes and `t` tracepoint probes:
//! `__trace_fprobe_create()` and `register_trace_fprobe()`
//! (kernel/trace/trace_fprobe.c): maxactive, the symbol or tracepoint and
//! `%return`, the event name, the arguments, and whether ftrace can attach.

use super::args::{check_arg_symbols, parse_args};
use super::names::{
    listed_name, name_taken_by_another_event, parse_event_name, sanitize_event_name, truncate_name,
};
use super::{Argv, Ctx, Fail, Unchecked, maxactive_digits, silent, symbol_exists};
use crate::ast::{FprobeDef, KprobePlace, ProbeDef, ProbeKind};
use crate::btfvar::BtfScope;
use crate::error::{Silent, TpErr};
use crate::fetch::{ArgCtx, ArgFlags};

/// `__trace_fprobe_create()` (kernel/trace/trace_fprobe.c, 6.12) and
/// `trace_fprobe_create_internal()` (7.2): `f[N][:[GRP/][EVENT]]
/// [MOD:]SYM[%return] [ARGS]` and `t[:[GRP/][EVENT]] TRACEPOINT [ARGS]`.
pub(super) fn fprobe(argv: &Argv, ctx: &mut Ctx) -> Result<FprobeDef, Fail> {
    let (tracepoint, event_at, maxactive) = prefix(argv, ctx)?;
    let (symbol, is_return) = symbol_and_return(argv, ctx, tracepoint, maxactive)?;
    let (group, event, auto_event) =
        event_name(argv, ctx, event_at, tracepoint, symbol, is_return)?;
    if tracepoint {
        // Whether the tracepoint exists only the running kernel knows.
        ctx.note(Unchecked::SymbolExists);
    }
    let stub = tracepoint.then(|| format!("__probestub_{symbol}"));
    // The arguments' BTF: a tracepoint's stub, or, for a tracepoint the
    // kernel does not have (taken as one of a module to come), the
    // function of that name (`ctx->funcname = symbol`; x86_64 6.12, conform
    // seed 1130: `tr:u64 action_parse $arg9` is "not found at this probe
    // point" by action_parse's own parameters).
    let btf_func = match &stub {
        Some(stub) if !tracepoint_absent(ctx, symbol, stub) => stub.as_str(),
        _ => symbol,
    };
    let (args, ignored_args) = arguments(argv, ctx, btf_func, tracepoint, is_return)?;
    let registered_now = ctx.target.features().fprobe_registered_at_creation;
    // A tracepoint the kernel does not have is taken as one of a module to
    // come (TRACEPOINT_STUB): where registration waits for the enable
    // (7.2), its arguments' symbols are not looked up (arm64 7.2, seed 23:
    // `t sys_exit_llistxattr foo=@pa[am_set_copystring` accepted); where it
    // happens now (6.12), they are, before the stub is left waiting.
    // register_trace_fprobe(): a name another event has (a tracepoint's
    // own, `t:sched/ sched_stat_iowait`) is taken when no fprobe event of
    // that name is there to append to (x86_64 7.2, seed 23).
    if name_taken_by_another_event(ctx, &group, &event) {
        return Err(ctx.logged(argv, TpErr::EVENT_EXIST, 0, 0));
    }
    // (7.2, which registers at enable, looks the function up after the
    // event's name: arm64 7.2, conform seed 20261128 at 200,000:
    // `f:writeback/writeback_write_inode trace_event_raw_event_regmap_block`
    // is "already used", not "Invalid probed address or symbol")
    if !tracepoint && !registered_now {
        attachable(argv, ctx, symbol)?;
    }
    // __register_trace_fprobe() (kernels that register at creation): the
    // arguments' symbols first (traceprobe_update_arg(): -ENOENT, logged
    // as "Invalid probed address or symbol" at the probed symbol), before
    // a tracepoint not loaded yet is left waiting and before
    // register_fprobe() looks the function up (x86_64 6.12, seed 41:
    // `t:uprobes/ sys_enter_time a36=@no_such_fn_27:x64` and `f
    // snapshot_write_finalize+4 @__blo` both refused so)
    if registered_now {
        check_arg_symbols(ctx, argv, &args, true)?;
        if !tracepoint {
            attachable(argv, ctx, symbol)?;
        }
        // a maxactive of 2^31 or more passed the parser as a negative
        // `int`, and register_fprobe() refuses its rethook size (x86_64
        // 6.12: `f2147483648:g/j vfs_read%return`)
        if is_return && (maxactive as i32) < 0 {
            return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0));
        }
    }
    // A tracepoint probe is an fprobe on the tracepoint's `__probestub_TP`:
    // a stub ftrace cannot attach to fails to register (the tracepoints
    // defined in kernel/trace/, built without -pg: power-traces.c and
    // rpm-traces.c; x86_64 6.12, seed 23: cpu_frequency, pm_qos_add_request,
    // wakeup_source_deactivate).
    if tracepoint && registered_now {
        tracepoint_taken(argv, ctx, symbol, (&group, &event))?;
    }
    notrace_stub(argv, ctx, stub.as_deref(), symbol)?;
    ctx.note(Unchecked::EventName);
    Ok(FprobeDef {
        tracepoint,
        symbol: symbol.to_string(),
        is_return,
        maxactive,
        probe: ProbeDef {
            group,
            event,
            auto_event,
            kind: ProbeKind::Kprobe {
                place: KprobePlace::Symbol {
                    symbol: symbol.to_string(),
                    offset: 0,
                },
                is_return,
                maxactive,
                shown_maxactive: Some(maxactive),
            },
            args,
            ignored_args,
        },
    })
}

/// The first word's `f`/`t`, the maxactive of `fN` and where the event name
/// starts: (tracepoint, event_at, maxactive).
fn prefix(argv: &Argv, ctx: &mut Ctx) -> Result<(bool, Option<usize>, u32), Fail> {
    let w0 = argv.words[0];
    let tracepoint = match w0.as_bytes()[0] {
        b'f' => false,
        b't' => true,
        _ => return Err(Fail::Cancel),
    };
    if argv.words.len() < 2 {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "trace_fprobe";
    let event_at = w0[1..].find(':').map(|c| c + 2);
    let mut maxactive = 0u32;
    if ctx.target.features().fprobe_no_maxactive {
        // 7.2: anything between the kind and `:` is a bad maxactive.
        if w0.len() > 1 && w0.as_bytes()[1] != b':' {
            return Err(ctx.logged(argv, TpErr::BAD_MAXACT, 0, 1));
        }
    } else if w0.as_bytes().get(1).is_some_and(|c| c.is_ascii_digit()) {
        maxactive = maxactive_digits(argv, ctx, w0, event_at)?;
    }
    Ok((tracepoint, event_at, maxactive))
}

/// `parse_symbol_and_return()`: the symbol or tracepoint, and whether the
/// probe is on the exit (`%return`, a `$retval` argument).
fn symbol_and_return<'a>(
    argv: &Argv<'a>,
    ctx: &Ctx,
    tracepoint: bool,
    maxactive: u32,
) -> Result<(&'a str, bool), Fail> {
    let w1 = argv.words[1];
    let mut symbol = w1;
    let mut is_return = false;
    if let Some(pct) = w1.find('%') {
        if !tracepoint && &w1[pct..] == "%return" {
            symbol = &w1[..pct];
            is_return = true;
        } else {
            return Err(ctx.logged(argv, TpErr::BAD_ADDR_SUFFIX, 1, pct));
        }
    }
    if !is_return {
        if tracepoint
            && let Some(bad) = symbol.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(ctx.logged(argv, TpErr::BAD_TP_NAME, 1, bad));
        }
        // A `$retval` (not followed by a name character) makes it an exit
        // probe; a tracepoint has none.
        for (i, w) in argv.words.iter().enumerate().skip(2) {
            if let Some(at) = w.find("$retval")
                && !w[at + 7..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            {
                if tracepoint {
                    return Err(ctx.logged(argv, TpErr::RETVAL_ON_PROBE, i, at));
                }
                is_return = true;
                break;
            }
        }
    }
    if !is_return && maxactive != 0 {
        return Err(ctx.logged(argv, TpErr::MAXACT_NO_RETURN, 0, 1));
    }
    Ok((symbol, is_return))
}

/// The group and event names, written or made from the symbol:
/// (group, event, auto_event).
fn event_name(
    argv: &Argv,
    ctx: &Ctx,
    event_at: Option<usize>,
    tracepoint: bool,
    symbol: &str,
    is_return: bool,
) -> Result<(String, String, bool), Fail> {
    let w0 = argv.words[0];
    let (group, event) = match event_at {
        Some(at) => parse_event_name(ctx, argv, 0, &w0[at..], at)?,
        None => (None, None),
    };
    let group =
        group.unwrap_or_else(|| if tracepoint { "tracepoints" } else { "fprobes" }.to_string());
    let auto_event = event.is_none();
    let event = match event {
        Some(e) => e,
        None => {
            let name = if tracepoint {
                let lead = if symbol.starts_with(|c: char| c.is_ascii_digit()) {
                    "_"
                } else {
                    ""
                };
                format!("{lead}{symbol}")
            } else {
                format!("{symbol}__{}", if is_return { "exit" } else { "entry" })
            };
            sanitize_event_name(&truncate_name(name), ctx.target.features())
        }
    };
    Ok((group, event, auto_event))
}

/// Whether the kernel has no tracepoint `symbol`: kallsyms lists neither
/// its `__tracepoint_TP` nor its stub (`find_tracepoint()` finds none);
/// `false` when that cannot be told.
fn tracepoint_absent(ctx: &Ctx, symbol: &str, stub: &str) -> bool {
    ctx.env.symbol_count(stub) == Some(0)
        && ctx.env.symbol_count(&format!("__tracepoint_{symbol}")) == Some(0)
}

/// The arguments, parsed with the BTF of function `btf_func` (for a
/// tracepoint, its stub's, the first parameter hidden).
fn arguments(
    argv: &Argv,
    ctx: &mut Ctx,
    btf_func: &str,
    tracepoint: bool,
    is_return: bool,
) -> Result<(Vec<crate::ast::ProbeArg>, usize), Fail> {
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: is_return,
            kernel: true,
            fentry: !is_return,
            tpoint: false,
            fprobe: true,
        },
    };
    let env = ctx.env;
    let mut scope = BtfScope::new(env, ctx.target.arch, Some(btf_func));
    scope.set_tracepoint(tracepoint);
    parse_args(argv, 2, &actx, ctx, Some(&mut scope))
}

/// register_fprobe(): the symbol (or glob) must name functions ftrace
/// can attach to.
///
/// The fprobe on fgraph (`fprobe_no_match_enoent`) looks a name up in
/// kallsyms, so a name that shares its address with a function ftrace lists
/// under another name attaches too (arm64 7.2, conform seed 20261128:
/// `f thermal_genl_event_threshold_up`, an alias of
/// thermal_genl_event_threshold_down, taken and enabled); ftrace's filter
/// before it matches the listed name only.
fn attachable(argv: &Argv, ctx: &mut Ctx, symbol: &str) -> Result<(), Fail> {
    let mut exists = (!symbol.contains(':'))
        .then(|| ctx.env.ftrace_matches(symbol))
        .flatten()
        .or_else(|| symbol_exists(ctx, symbol));
    if exists == Some(false)
        && ctx.target.features().fprobe_no_match_enoent
        && !symbol.contains(':')
        && ctx.env.ftrace_alias(symbol) == Some(true)
    {
        exists = Some(true);
    }
    match exists {
        Some(false) if ctx.target.features().fprobe_no_match_enoent => {
            return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
        }
        Some(false) => return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0)),
        Some(true) => {}
        None => ctx.note(Unchecked::SymbolExists),
    }
    ctx.note(Unchecked::Probeable);
    Ok(())
}

/// __regsiter_tracepoint_fprobe() (kernels that register at creation) puts
/// the tracepoint's `__probestub_TP` on the tracepoint with
/// tracepoint_probe_register_prio_may_exist(), which is -EEXIST when a
/// tracepoint probe already put it there; trace_fprobe_create() does not
/// log -EEXIST (x86_64 6.12: `t:a2 sched_switch` beside `t:a1
/// sched_switch` is "File exists", nothing logged; 7.2, which registers at
/// enable, takes it). A probe of the same name goes the append path instead.
/// The stub also stays there after a tracepoint probe failed to register
/// on a stub ftrace cannot attach to (x86_64 6.12, seed 20261201: every
/// later `t:` probe of `cpu_frequency` was "File exists", nothing logged),
/// which only the tracepoint's own probe array shows.
fn tracepoint_taken(
    argv: &Argv,
    ctx: &Ctx,
    tracepoint: &str,
    (group, event): (&str, &str),
) -> Result<(), Fail> {
    let Some(listing) = ctx.env.dynamic_events() else {
        return Ok(());
    };
    let same_name = listing
        .iter()
        .any(|l| listed_name(l) == Some((group, event)));
    let taken = listing.iter().any(|l| {
        let mut words = l.split_whitespace();
        words.next().is_some_and(|h| h.starts_with("t:")) && words.next() == Some(tracepoint)
    });
    if same_name {
        return Ok(());
    }
    if taken {
        return Err(Fail::Err(silent(Silent::TracepointTaken, &argv.joined)));
    }
    if ctx.env.tracepoint_stub_registered(tracepoint) == Some(true) {
        return Err(Fail::Err(silent(Silent::TracepointStubLeft, &argv.joined)));
    }
    Ok(())
}

/// A tracepoint probe's stub ftrace cannot attach to (notrace) fails to
/// register.
fn notrace_stub(argv: &Argv, ctx: &Ctx, stub: Option<&str>, symbol: &str) -> Result<(), Fail> {
    if let Some(stub) = stub
        && ctx.target.features().fprobe_registered_at_creation
        && symbol_exists(ctx, stub) == Some(true)
        && ctx.env.ftrace_matches(stub) == Some(false)
    {
        let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
        if let Fail::Err(e) = &mut e {
            e.hint = Some(format!(
                "{stub} has no ftrace location (notrace), so the tracepoint cannot be probed \
                 this way; enable the tracepoint itself (events/…/{symbol})"
            ));
        }
        return Err(e);
    }
    Ok(())
}
