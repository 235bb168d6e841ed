//! `p`/`r` probes on kernel code: `__trace_kprobe_create()` and what
//! `register_trace_kprobe()` checks at registration (kernel/trace/trace_kprobe.c):
//! maxactive, the probed symbol or address and its offset, the event name, the
//! arguments, and whether the kernel would refuse or defer the probe point.

use super::args::{arg_offsets_parse, check_arg_symbols, parse_args};
use super::names::{
    name_taken_by_another_event, parse_event_name, sanitize_event_name, truncate_name,
};
use super::{Argv, Ctx, Fail, Unchecked, maxactive_digits, symbol_exists};
use crate::arch::Arch;
use crate::ast::{KprobePlace, ProbeDef, ProbeKind};
use crate::btfvar::BtfScope;
use crate::error::{ErrorKind, TpErr};
use crate::fetch::{ArgCtx, ArgFlags};
use crate::kstrtox::{kstrtol, kstrtoul};

pub(super) fn kprobe(argv: &Argv, ctx: &mut Ctx) -> Result<ProbeDef, Fail> {
    let (mut is_return, event_at, maxactive) = prefix(argv, ctx)?;

    let (place, fentry, missing_symbol) = probe_place(argv, ctx, &mut is_return)?;
    ctx.note(Unchecked::Probeable);

    let (group, event, auto_event) = event_name(argv, ctx, event_at, is_return, &place)?;
    let (args, ignored_args) = arguments(argv, ctx, &place, is_return, fentry)?;
    // A probe on a module that is not loaded waits for it: registration
    // (and its -ENOENT for an argument's symbol) comes when it loads.
    let deferred = deferred(ctx, &place, is_return);
    let unresolved = unresolved(ctx, &place, missing_symbol);
    // register_trace_kprobe(): a name another event (a tracepoint) has is
    // taken ("already used"); then __register_trace_kprobe() refuses a
    // notrace function before it resolves the arguments' symbols, and
    // register_kprobe() an address that is not kernel text or blacklisted.
    // A probe that waits is not registered now: nothing refuses it yet
    // (arm64 7.2, seed 168729981 #1391: `__builtin__kprobes:kprobe_insn_page`
    // names no module, so the kernel defers it, notrace or not).
    let mut refusal = match deferred {
        true => Some(None),
        false => refusal(ctx, &place, is_return),
    };
    if name_taken_by_another_event(ctx, &group, &event) {
        return Err(ctx.logged(argv, TpErr::EVENT_EXIST, 0, 0));
    }
    if let Some(Some(crate::env::Refusal::Notrace(why))) = &refusal {
        let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
        if let Fail::Err(e) = &mut e {
            e.hint = Some(why.clone());
        }
        return Err(e);
    }
    let waits_for_arg_symbol = arg_symbols(argv, ctx, &place, &args, deferred)?;
    // (__register_trace_kprobe() resolves the arguments before
    // register_kprobe() sees the address: a raw address whose argument
    // symbol is missing waits, whatever the address)
    if waits_for_arg_symbol && matches!(place, KprobePlace::Address(_)) {
        refusal = None;
    }
    if unresolved {
        let near = match &place {
            KprobePlace::Symbol { symbol, .. } if !symbol.contains(':') => {
                ctx.env.similar_symbols(symbol)
            }
            _ => Vec::new(),
        };
        return Err(with_suggestion(
            ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0),
            near,
        ));
    }
    refused(argv, ctx, refusal, is_return)?;
    aligned(argv, ctx, &place)?;
    ctx.note(Unchecked::EventName);
    let shown_maxactive = shown_maxactive(ctx, is_return, maxactive, deferred);
    Ok(ProbeDef {
        group,
        event,
        auto_event,
        kind: ProbeKind::Kprobe {
            place,
            is_return,
            maxactive,
            shown_maxactive,
        },
        args,
        ignored_args,
    })
}

/// The first word's `p`/`r`, the maxactive of `rN` and where the event name
/// starts: (is_return, event_at, maxactive).
fn prefix(argv: &Argv, ctx: &mut Ctx) -> Result<(bool, Option<usize>, u32), Fail> {
    let w0 = argv.words[0];
    let b0 = w0.as_bytes();
    let is_return = match b0[0] {
        b'r' => true,
        b'p' => false,
        _ => return Err(Fail::Cancel),
    };
    if argv.words.len() < 2 {
        return Err(Fail::Cancel);
    }
    ctx.subsystem = "trace_kprobe";
    let event_at = w0[1..].find(':').map(|c| c + 2);
    let mut maxactive = 0u32;
    if b0.get(1).is_some_and(|c| c.is_ascii_digit()) {
        if !is_return {
            let e = if ctx.target.features().newer_messages {
                TpErr::MAXACT_NO_RETURN
            } else {
                TpErr::MAXACT_NO_KPROBE
            };
            return Err(ctx.logged(argv, e, 0, 1));
        }
        maxactive = maxactive_digits(argv, ctx, w0, event_at)?;
    }
    Ok((is_return, event_at, maxactive))
}

/// The probed address, or symbol and offset (a `%return` suffix makes
/// `is_return`): (place, fentry, missing_symbol).
fn probe_place(
    argv: &Argv,
    ctx: &mut Ctx,
    is_return: &mut bool,
) -> Result<(KprobePlace, bool, bool), Fail> {
    let bits = ctx.target.arch.bits();
    let w1 = argv.words[1];
    let mut fentry = false;
    let mut missing_symbol = false;
    let place = match kstrtoul(w1, 0, bits) {
        Ok(addr) => {
            ctx.note(Unchecked::AddressName);
            KprobePlace::Address(addr)
        }
        Err(_) => {
            let (sym, offset) = symbol_offset(argv, ctx, is_return)?;
            symbol_place(
                argv,
                ctx,
                sym,
                offset,
                *is_return,
                &mut fentry,
                &mut missing_symbol,
            )?
        }
    };
    Ok((place, fentry, missing_symbol))
}

/// `SYM[+|-OFFS][%return]` split, the offset checked.
fn symbol_offset<'a>(
    argv: &Argv<'a>,
    ctx: &Ctx,
    is_return: &mut bool,
) -> Result<(&'a str, i64), Fail> {
    let bits = ctx.target.arch.bits();
    let w1 = argv.words[1];
    if w1.contains('/') && w1.contains(':') {
        return Err(Fail::Cancel);
    }
    let mut symbol = w1;
    if let Some(pct) = w1.find('%') {
        if &w1[pct..] == "%return" && ctx.target.features().return_suffix {
            symbol = &w1[..pct];
            *is_return = true;
        } else {
            return Err(ctx.logged(argv, TpErr::BAD_ADDR_SUFFIX, 1, pct));
        }
    }
    let (sym, offset) = match symbol.find(['+', '-']) {
        Some(p) => match kstrtol(&symbol[p..], 0, bits) {
            Ok(o) => (&symbol[..p], o),
            Err(_) => return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0)),
        },
        None => (symbol, 0),
    };
    if offset < 0 || offset > i64::from(u32::MAX) {
        return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
    }
    Ok((sym, offset))
}

/// The symbol's checks: it exists and is unique (`validate_probe_symbol()`),
/// and a return probe is on its entry (`kprobe_on_func_entry()`).
fn symbol_place(
    argv: &Argv,
    ctx: &mut Ctx,
    sym: &str,
    offset: i64,
    is_return: bool,
    fentry: &mut bool,
    missing_symbol: &mut bool,
) -> Result<KprobePlace, Fail> {
    // validate_probe_symbol() (6.12 and later: before the entry check;
    // 6.1 counts after it): no symbol, or more than one, is refused.
    // Without the count (5.10.223), a symbol that does not exist
    // fails at registration, after the event name and the arguments.
    let counts = ctx.target.features().non_unique_symbol;
    // No symbol has an empty name, nor one starting with a digit (kallsyms
    // names are C identifiers, perhaps with '.' suffixes): the kernel's
    // lookup and count both fail (arm64 5.10: `r:kprobes/ 54x/ev` is
    // refused for its empty event name first).
    // A `MOD:SYM` is no such case: a module of that name is not loaded,
    // so validate_probe_symbol() defers it (arm 6.12, seed 41:
    // `0xc045c364[=\:symstr` was taken and its arguments parsed).
    let impossible = !sym.contains(':') && (sym.is_empty() || sym.as_bytes()[0].is_ascii_digit());
    if impossible && counts {
        return Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0));
    }
    *missing_symbol |= impossible;
    let validate = |ctx: &mut Ctx, missing: &mut bool| -> Result<(), Fail> {
        if let Some((module, name)) = sym.split_once(':') {
            return validate_module_symbol(argv, ctx, module, name);
        }
        match ctx.env.symbol_count(sym) {
            Some(0) if !counts => {
                *missing = true;
                Ok(())
            }
            Some(0) => Err(with_suggestion(
                ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0),
                ctx.env.similar_symbols(sym),
            )),
            Some(n) if n > 1 && ctx.target.features().non_unique_symbol => {
                Err(ctx.logged(argv, TpErr::NON_UNIQ_SYMBOL, 1, 0))
            }
            Some(_) => Ok(()),
            None => {
                ctx.note(Unchecked::SymbolExists);
                Ok(())
            }
        }
    };
    if ctx.target.features().validate_symbol_early {
        validate(ctx, missing_symbol)?;
    }
    // kprobe_on_func_entry(): -ENOENT (unknown symbol) is deferred, -EINVAL
    // (known symbol, not at its entry) rejects a return probe.
    let exists = symbol_exists(ctx, sym);
    if exists.is_none() {
        // no table says (offline without --kallsyms): the answer below
        // is the one for a symbol that exists; for one that does not
        // (a module that is not loaded), the kernel defers the entry
        // check and reads `$argN` as off the entry (x86_64 6.1, offline:
        // `r ext4:ext4_file_open+8 file->f_flags` is "Invalid fetch
        // argument" from the kernel, whose ext4 is built in)
        ctx.note(Unchecked::SymbolExists);
    }
    if exists != Some(false) {
        let at_entry = match ctx.env.kprobe_entry(sym, offset as u64) {
            Some(known) => Some(known),
            None => entry_offset(ctx, offset as u64).map(Some),
        };
        match at_entry {
            Some(Some(true)) => *fentry = true,
            Some(Some(false)) => {
                if is_return {
                    return Err(ctx.logged(argv, TpErr::BAD_RETPROBE, 1, 0));
                }
            }
            // -ENOENT: the registration decides
            Some(None) => {}
            None => ctx.note(Unchecked::FunctionEntry),
        }
    }
    if !ctx.target.features().validate_symbol_early {
        validate(ctx, missing_symbol)?;
    }
    // x86 decodes the function up to the offset (-EILSEQ); riscv64
    // walks instruction lengths; 32-bit arm checks alignment by the
    // instruction set; arm64's alignment is checked below.
    if offset != 0 && ctx.target.arch != Arch::Arm64 {
        ctx.note(Unchecked::InsnBoundary);
    }
    Ok(KprobePlace::Symbol {
        symbol: sym.to_string(),
        offset: offset as u64,
    })
}

/// The group and event names, written or made from the place:
/// (group, event, auto_event).
fn event_name(
    argv: &Argv,
    ctx: &mut Ctx,
    event_at: Option<usize>,
    is_return: bool,
    place: &KprobePlace,
) -> Result<(String, String, bool), Fail> {
    let w0 = argv.words[0];
    let (group, event) = match event_at {
        Some(at) => parse_event_name(ctx, argv, 0, &w0[at..], at)?,
        None => (None, None),
    };
    let group = group.unwrap_or_else(|| "kprobes".to_string());
    let auto_event = event.is_none();
    let event = match event {
        Some(e) => e,
        None => {
            let c = if is_return { 'r' } else { 'p' };
            let name = match place {
                KprobePlace::Symbol { symbol, offset } => format!("{c}_{symbol}_{offset}"),
                KprobePlace::Address(a) => {
                    ctx.note(Unchecked::AddressName);
                    format!("{c}_0x{a:x}")
                }
            };
            sanitize_event_name(&truncate_name(name), ctx.target.features())
        }
    };
    Ok((group, event, auto_event))
}

/// The arguments, parsed with the probed function's BTF.
fn arguments(
    argv: &Argv,
    ctx: &mut Ctx,
    place: &KprobePlace,
    is_return: bool,
    fentry: bool,
) -> Result<(Vec<crate::ast::ProbeArg>, usize), Fail> {
    // TPARG_FL_RETURN is set for a probe on a symbol only: the arguments of
    // a return probe on a raw address are parsed as a plain kprobe's.
    let symbol_return = is_return && matches!(place, KprobePlace::Symbol { .. });
    let actx = ArgCtx {
        arch: ctx.target.arch,
        features: ctx.target.features(),
        flags: ArgFlags {
            ret: symbol_return,
            kernel: true,
            fentry,
            tpoint: false,
            fprobe: false,
        },
    };
    // ctx->funcname: the symbol as written (an address probe has none)
    let func = match place {
        KprobePlace::Symbol { symbol, .. } => Some(symbol.clone()),
        KprobePlace::Address(_) => None,
    };
    let env = ctx.env;
    let mut scope = BtfScope::new(env, ctx.target.arch, func.as_deref());
    parse_args(argv, 2, &actx, ctx, Some(&mut scope))
}

/// validate_probe_symbol() on `MOD:SYM`: where the kernel counts before
/// the entry check (6.12 and later), a loaded module's symbols of that name
/// are counted, its mapping symbols (`$a`, `$d`, `$x`) among them, and
/// none or more than one is refused (arm 7.2 with romfs loaded: `p
/// romfs:$d`, "The symbol is not unique"). A module that is not loaded
/// defers the probe. 6.1's count skips `MOD:SYM` altogether.
fn validate_module_symbol(
    argv: &Argv,
    ctx: &mut Ctx,
    module: &str,
    name: &str,
) -> Result<(), Fail> {
    if !ctx.target.features().validate_symbol_early {
        return Ok(());
    }
    match ctx.env.module_symbol_count(module, name) {
        Some(Some(0)) => Err(ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0)),
        Some(Some(n)) if n > 1 => Err(ctx.logged(argv, TpErr::NON_UNIQ_SYMBOL, 1, 0)),
        Some(_) => Ok(()),
        None => {
            ctx.note(Unchecked::SymbolExists);
            Ok(())
        }
    }
}

/// Whether the probe waits for its module (or, for an address, for a
/// module to come).
fn deferred(ctx: &Ctx, place: &KprobePlace, is_return: bool) -> bool {
    match place {
        KprobePlace::Symbol { symbol, .. } => symbol
            .split_once(':')
            .is_some_and(|(m, n)| ctx.env.module_symbol(m, n) == Some(None)),
        // (5.10's register_kretprobe() looks the address up first, in
        // kprobe_on_func_entry(): a return probe waits there too)
        KprobePlace::Address(a) => {
            *a != 0
                && (ctx.target.features().kprobe_addr_lookup || is_return)
                && ctx.env.kprobe_address(*a, is_return) == Some(crate::env::AddressFate::Deferred)
        }
    }
}

/// register_trace_kprobe(): a symbol of a loaded module that does not exist fails
/// with -ENOENT (after the event's name and the arguments' symbols); a
/// module that is not loaded defers the probe. So does a core symbol that
/// does not exist on kernels that do not count symbols up front.
fn unresolved(ctx: &mut Ctx, place: &KprobePlace, missing_symbol: bool) -> bool {
    let mut unresolved = missing_symbol;
    if let KprobePlace::Symbol { symbol, .. } = place
        && let Some((module, name)) = symbol.split_once(':')
    {
        match ctx.env.module_symbol(module, name) {
            Some(Some(false)) => unresolved = true,
            Some(_) => {}
            None => ctx.note(Unchecked::SymbolExists),
        }
    }
    unresolved
}

/// What the kernel says of the probe point: `Some(Some(_))` a refusal,
/// `Some(None)` none, `None` not known here.
fn refusal(ctx: &Ctx, place: &KprobePlace, is_return: bool) -> Option<Option<crate::env::Refusal>> {
    match place {
        // (`MOD:SYM` too: a loaded module's function is refused as a core
        // one is, its notrace `__exit` functions among them; a module not
        // loaded is not known here, and the kernel defers the probe)
        KprobePlace::Symbol { symbol, offset } => ctx.env.kprobe_refusal(symbol, *offset),
        // _kprobe_addr(): neither a symbol nor an address is -EINVAL, on
        // every kernel, whatever the kernel holds (x86_64 7.2, seed 59: `r:ev
        // 0`; the corpora's `p:addrev 0`)
        KprobePlace::Address(0) => Some(Some(crate::env::Refusal::Address(
            "address 0 is no probe point: register_kprobe() needs a symbol or an address"
                .to_string(),
        ))),
        KprobePlace::Address(a) => match ctx.env.kprobe_address(*a, is_return) {
            Some(crate::env::AddressFate::Refused(r)) => Some(Some(r)),
            // before _kprobe_addr() looked addresses up (5.10), an address in
            // no symbol is not deferred: it is no kernel text, -EINVAL (arm64
            // 5.10, seed 23: `p 0xffff`)
            Some(crate::env::AddressFate::Deferred)
                if !ctx.target.features().kprobe_addr_lookup && !is_return =>
            {
                Some(Some(crate::env::Refusal::Address(format!(
                    "{a:#x} is in no function of the kernel or a loaded module: kprobes go on \
                     kernel text"
                ))))
            }
            Some(_) => Some(None),
            None => None,
        },
    }
}

/// The arguments' `@SYM`s, unless the probe waits: whether a missing one
/// makes the probe wait.
fn arg_symbols(
    argv: &Argv,
    ctx: &mut Ctx,
    place: &KprobePlace,
    args: &[crate::ast::ProbeArg],
    deferred: bool,
) -> Result<bool, Fail> {
    // -ENOENT from an argument's symbol is taken as "the module is not
    // loaded yet" for a probe not on a core symbol (trace_kprobe_module_exist()
    // is false without a symbol): the probe is accepted and waits.
    let on_core_symbol =
        matches!(place, KprobePlace::Symbol { symbol, .. } if !symbol.contains(':'));
    let mut waits_for_arg_symbol = false;
    if deferred && !arg_offsets_parse(ctx, args) {
        return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0));
    }
    if !deferred {
        match check_arg_symbols(ctx, argv, args, true) {
            Err(Fail::Err(e))
                if !on_core_symbol && e.kind == ErrorKind::Logged(TpErr::BAD_PROBE_ADDR) =>
            {
                waits_for_arg_symbol = true;
            }
            other => other?,
        }
    }
    Ok(waits_for_arg_symbol)
}

/// What the probe point's refusal (if any) makes of the probe.
fn refused(
    argv: &Argv,
    ctx: &mut Ctx,
    refusal: Option<Option<crate::env::Refusal>>,
    is_return: bool,
) -> Result<(), Fail> {
    match refusal {
        // (5.10's _kprobe_addr() does not look the address up: it is
        // check_kprobe_address_safe() that refuses it, -EINVAL; but its
        // register_kretprobe() calls kprobe_on_func_entry() first, whose
        // lookup fails with -ENOENT: arm64 5.10, seed 41,
        // `r acpi_install_table+0x100000`)
        Some(Some(crate::env::Refusal::Unresolved(why)))
            if ctx.target.features().kprobe_addr_lookup || is_return =>
        {
            let mut e = ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0);
            if let Fail::Err(e) = &mut e {
                e.hint = Some(why);
            }
            return Err(e);
        }
        // (x86_64 5.10, seed 20261130: `p fixed_percpu_data+0`)
        Some(Some(crate::env::Refusal::NotFound(why))) => {
            let mut e = ctx.logged(argv, TpErr::BAD_PROBE_ADDR, 1, 0);
            if let Fail::Err(e) = &mut e {
                e.hint = Some(why);
            }
            return Err(e);
        }
        Some(Some(crate::env::Refusal::Address(why) | crate::env::Refusal::Unresolved(why))) => {
            let mut e = ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0);
            if let Fail::Err(e) = &mut e {
                e.hint = Some(why);
            }
            return Err(e);
        }
        Some(_) => {
            ctx.unchecked.retain(|u| *u != Unchecked::Probeable);
        }
        None => {}
    }
    Ok(())
}

/// register_kprobe() -> arch_prepare_kprobe(): arm64 instructions are 4-byte
/// aligned; a misaligned offset into a function fails with -EINVAL. (An address
/// outside kernel text is not looked at: the kernel defers it as if it were in a
/// module not loaded yet.)
/// 32-bit arm kernels built in ARM mode (Debian's armmp: no
/// CONFIG_THUMB2_KERNEL) refuse a misaligned address the same way (arm
/// 6.12: `p fn_show_mem+0x1a`, `vfs_read+0x2`). A probe that waits for
/// its module is not looked at (`nosuchmod:vfs_read+0x21` is accepted).
/// (a probe on a module known to be loaded is; one on a module of unknown
/// state is left to the kernel, which accepts it when the module is not)
fn aligned(argv: &Argv, ctx: &Ctx, place: &KprobePlace) -> Result<(), Fail> {
    let aligned_check = match place {
        KprobePlace::Symbol { symbol, .. } => match symbol.split_once(':') {
            Some((m, n)) => ctx.env.module_symbol(m, n) == Some(Some(true)),
            None => true,
        },
        KprobePlace::Address(_) => false,
    };
    if matches!(ctx.target.arch, Arch::Arm64 | Arch::Arm)
        && aligned_check
        && let KprobePlace::Symbol { offset, .. } = place
        && offset % 4 != 0
    {
        return Err(ctx.logged(argv, TpErr::FAIL_REG_PROBE, 1, 0));
    }
    // riscv64 instructions are 2 or 4 bytes, 2-byte aligned: an odd offset is
    // never an instruction boundary (riscv64-7.2 corpus: `vfs_read+1`, `+3`).
    if ctx.target.arch == Arch::Riscv64
        && aligned_check
        && let KprobePlace::Symbol { offset, .. } = place
        && offset % 2 != 0
    {
        return Err(ctx.logged(argv, TpErr::BAD_INSN_BNDRY, 1, 0));
    }
    Ok(())
}

/// register_kretprobe(): maxactive 0 becomes max(10, 2 * num_possible_cpus()),
/// unless the probe waits for its module (nothing registered yet).
/// A maxactive of 2^31 or more is a negative `int` to the kernel: it reads
/// back as written while the probe waits (`r-1056583448:`), and as the
/// default once registered (x86_64 5.10, 6.12 and 7.2: `r3000000000:g/h
/// vfs_read` reads back `r2:` and `r10:`).
fn shown_maxactive(ctx: &mut Ctx, is_return: bool, maxactive: u32, deferred: bool) -> Option<u32> {
    match (is_return, maxactive, ctx.target.possible_cpus) {
        (false, _, _) => Some(0),
        (true, m, _) if deferred => Some(m),
        (true, m, _) if m as i32 > 0 => Some(m),
        (true, _, Some(cpus)) if ctx.target.features().maxactive_default_10 => {
            Some(10.max(2 * cpus))
        }
        (true, _, Some(cpus)) => Some(cpus),
        (true, _, None) => {
            ctx.note(Unchecked::DefaultMaxactive);
            None
        }
    }
}

/// Whether `offset` is at the function entry (`arch_adjust_kprobe_addr()`), or
/// `None` when that depends on the code at the address (x86 `endbr64` at +0).
fn entry_offset(ctx: &Ctx, offset: u64) -> Option<bool> {
    match (ctx.target.arch, offset) {
        (_, 0) => Some(true),
        (Arch::X86_64 | Arch::I386, 4) => None,
        _ => Some(false),
    }
}

/// A refusal for a symbol no table has, with the names near it.
fn with_suggestion(mut fail: Fail, near: Vec<String>) -> Fail {
    if let Fail::Err(e) = &mut fail
        && !near.is_empty()
    {
        let s = crate::similar::did_you_mean(&near);
        e.hint = Some(s.trim_start_matches("; ").to_string());
    }
    fail
}
