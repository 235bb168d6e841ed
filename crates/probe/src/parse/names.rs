//! Event and group names: `traceprobe_parse_event_name()`'s checks of a
//! written `[GROUP/]EVENT`, the names the kernel makes for a probe given none
//! (truncated, `sanitize_event_name()`), and whether a name is already taken by
//! another event (trace_probe.c, trace_kprobe.c).

use super::{Argv, Ctx, Fail, MAX_EVENT_NAME_LEN};
use crate::error::TpErr;
use crate::fetch::{good_name, good_system_name};
use crate::kernel::Features;

/// Whether `group/event` names an event that is not a dynamic event of
/// that name (a tracepoint's own, another kind's): `register_*_event()`
/// then fails with -EEXIST, "already used"; a dynamic event of that name
/// is appended to instead, with its own checks.
pub(super) fn name_taken_by_another_event(ctx: &Ctx, group: &str, event: &str) -> bool {
    ctx.env.event_exists(group, event) == Some(true)
        && ctx
            .env
            .dynamic_events()
            .is_some_and(|l| !l.iter().any(|l| listed_name(l) == Some((group, event))))
}

/// `(group, event)` of a listed dynamic event line.
pub(super) fn listed_name(line: &str) -> Option<(&str, &str)> {
    let head = line.split_whitespace().next()?;
    head.split_once(':')?.1.split_once('/')
}

/// `traceprobe_parse_event_name()`: returns (group, event or None for auto).
pub(super) fn parse_event_name(
    ctx: &Ctx,
    argv: &Argv,
    index: usize,
    name: &str,
    offset: usize,
) -> Result<(Option<String>, Option<String>), Fail> {
    let mut offset = offset;
    let newer = ctx.target.features().newer_event_names;
    let slash = if newer {
        name.find('/').or_else(|| name.find('.'))
    } else {
        name.find('/')
    };
    let mut group = None;
    let mut event = name;
    if let Some(s) = slash {
        if s == 0 {
            return Err(ctx.logged(argv, TpErr::NO_GROUP_NAME, index, offset));
        }
        if s + 1 > MAX_EVENT_NAME_LEN {
            return Err(ctx.logged(argv, TpErr::GROUP_TOO_LONG, index, offset));
        }
        let good = if newer {
            good_system_name(&name[..s])
        } else {
            good_name(&name[..s])
        };
        if !good {
            return Err(ctx.logged(argv, TpErr::BAD_GROUP_NAME, index, offset));
        }
        group = Some(name[..s].to_string());
        event = &name[s + 1..];
        offset += s + 1;
    }
    if event.is_empty() {
        if slash.is_some() && newer {
            return Ok((group, None));
        }
        return Err(ctx.logged(argv, TpErr::NO_EVENT_NAME, index, offset));
    }
    let limit = if ctx.target.features().name_and_imm_fixes {
        MAX_EVENT_NAME_LEN
    } else {
        MAX_EVENT_NAME_LEN + 1
    };
    if event.len() >= limit {
        return Err(ctx.logged(argv, TpErr::EVENT_TOO_LONG, index, offset));
    }
    if !good_name(event) {
        return Err(ctx.logged(argv, TpErr::BAD_EVENT_NAME, index, offset));
    }
    Ok((group, Some(event.to_string())))
}

pub(super) fn truncate_name(mut s: String) -> String {
    if s.len() > MAX_EVENT_NAME_LEN - 1 {
        let mut cut = MAX_EVENT_NAME_LEN - 1;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// `sanitize_event_name()`: ':' and '.' (and '*' where the kernel has
/// the fix) become '_', never the first byte.
pub(super) fn sanitize_event_name(name: &str, features: Features) -> String {
    name.char_indices()
        .map(|(i, ch)| {
            if i > 0 && (ch == ':' || ch == '.' || (ch == '*' && features.sanitize_star)) {
                '_'
            } else {
                ch
            }
        })
        .collect()
}
