//! Whether a tracepoint already carries its own `__probestub_TP`: the state
//! a failed tracepoint probe leaves behind on kernels that register
//! `t:` probes when they are created (6.12). `__register_trace_fprobe()`
//! puts the stub on the tracepoint first and then registers the fprobe on
//! it; when ftrace cannot attach to the stub (notrace: the power and rpm
//! tracepoints of kernel/trace/), the error path leaves the stub on the
//! tracepoint, and every later `t:` probe of that tracepoint is `-EEXIST`
//! from `tracepoint_probe_register_prio_may_exist()`, which nothing logs
//! (x86_64 6.12.118, seed 20261201: `t:grp792/ev69291
//! wakeup_source_deactivate` and `t:grp806/ cpu_frequency`, each after an
//! earlier line of the run had failed on the same tracepoint).
//!
//! Read from the running kernel: `struct tracepoint`'s `funcs` (its offset
//! from vmlinux BTF) at `__tracepoint_TP` (kallsyms, with
//! `CONFIG_KALLSYMS_ALL`), then the `struct tracepoint_func` array it points
//! to (`{func, data, prio}`, ended by a null `func`), through /proc/kcore.
//! Nothing here writes to the kernel.

use std::path::Path;

use crate::KernelView;

/// Most probes one tracepoint's array is read for (an array is a handful;
/// a damaged read must not run on).
const MAX_FUNCS: usize = 256;

/// Whether `__probestub_TRACEPOINT` is among the probes on the tracepoint
/// `tracepoint`, read through `view` and the core file `core`; `None` when
/// that cannot be read (no such symbols, no BTF, no kcore, hidden
/// addresses).
pub fn stub_registered(view: &KernelView, core: &Path, tracepoint: &str) -> Option<bool> {
    let table = view.kallsyms().ok()?;
    if table.addresses_hidden() {
        return None;
    }
    let tp = *table
        .by_name(&format!("__tracepoint_{tracepoint}"), None)
        .first()?;
    let stub = *table
        .by_name(&format!("__probestub_{tracepoint}"), None)
        .first()?;
    let btf = view.btf().ok()?;
    let (funcs_at, _) = btf.member_offset("tracepoint", "funcs")?;
    let (_, entry) = btf.find(crate::btf::Kind::Struct, "tracepoint_func")?;
    let width = usize::try_from(ktrace_probe::Arch::native()?.bits() / 8).ok()?;
    let read = |addr: u64, len: usize| ktrace_disasm::kcore::read(core, addr, len).ok();
    let funcs = word(
        &read(tp.addr.checked_add(u64::from(funcs_at))?, width)?,
        width,
    )?;
    if funcs == 0 {
        return Some(false);
    }
    let size = usize::try_from(entry.size).ok()?;
    if size < width {
        return None;
    }
    let mut at = funcs;
    for _ in 0..MAX_FUNCS {
        let f = word(&read(at, width)?, width)?;
        if f == 0 {
            return Some(false);
        }
        if f == stub.addr {
            return Some(true);
        }
        at = at.checked_add(size as u64)?;
    }
    None
}

/// A little-endian pointer of `width` bytes.
fn word(bytes: &[u8], width: usize) -> Option<u64> {
    match width {
        4 => Some(u64::from(u32::from_le_bytes(
            bytes.get(..4)?.try_into().ok()?,
        ))),
        8 => Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_of_both_widths() {
        let b = 0xffff_ffff_8123_4567u64.to_le_bytes();
        assert_eq!(word(&b, 8), Some(0xffff_ffff_8123_4567));
        assert_eq!(word(&b, 4), Some(0x8123_4567));
        assert_eq!(word(&b[..3], 4), None);
        assert_eq!(word(&b, 2), None);
    }
}
