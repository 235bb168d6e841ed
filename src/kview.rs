//! The kernel view as the printers' `Symbolizer`: kernel addresses →
//! `func+off/size [mod]` columns from the view's kallsyms table, which is
//! parsed at the first lookup (parsing takes seconds on a slow board and
//! must not delay enabling the probes, nor compete with it for the CPU),
//! and kernel strings (`%s` of a `tracepoint_string()` pointer, as
//! `rcu_utilization` prints) from tracefs `printk_formats`, read at the
//! first such `%s`.
//!
//! It mirrors the kernel's own `%pS` lookup (see `ktrace_symbols::kallsyms`);
//! it reads nothing itself but through ktrace-tracefs.

use std::path::PathBuf;
use std::sync::{Once, OnceLock};

use ktrace_event::printfmt::KernelStrings;
use ktrace_printer::{Symbol, Symbolizer};
use ktrace_symbols::KernelView;

/// Kernel symbols for the printers, from a [`KernelView`].
pub struct KernelSymbols<'v> {
    view: &'v KernelView,
    warned: Once,
    /// The tracefs whose `printk_formats` names kernel strings.
    root: Option<PathBuf>,
    strings: OnceLock<KernelStrings>,
    /// Added to every address before it is looked up (wrapping): the
    /// distance the kernel image moved since the boot whose records are
    /// read (KASLR), 0 for this boot's own.
    text_delta: u64,
}

impl<'v> KernelSymbols<'v> {
    /// Symbols of the kernel `view` shows.
    pub fn new(view: &'v KernelView) -> Self {
        Self {
            view,
            warned: Once::new(),
            root: None,
            strings: OnceLock::new(),
            text_delta: 0,
        }
    }

    /// The same, for records of a boot whose kernel image lay `delta`
    /// bytes lower (wrapping) than this boot's: each address is moved by
    /// `delta` before the lookup, as the kernel's `trace_adjust_address()`
    /// moves a persistent instance's previous-boot addresses by its
    /// `text_delta` (this boot's `_text` minus the previous boot's).
    pub fn with_text_delta(self, delta: u64) -> Self {
        Self {
            text_delta: delta,
            ..self
        }
    }

    /// The same, with kernel strings from the tracefs at `root`.
    pub fn with_strings(view: &'v KernelView, root: &std::path::Path) -> Self {
        Self {
            root: Some(root.to_path_buf()),
            ..Self::new(view)
        }
    }
}

impl Symbolizer for KernelSymbols<'_> {
    fn string(&self, addr: u64) -> Option<&[u8]> {
        let root = self.root.as_deref()?;
        self.strings
            .get_or_init(|| {
                let text = ktrace_tracefs::buffers::printk_formats(root).unwrap_or_default();
                KernelStrings::parse(text.as_bytes())
            })
            .get(addr.wrapping_add(self.text_delta))
    }

    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let addr = addr.wrapping_add(self.text_delta);
        let table = match self.view.kallsyms() {
            Ok(t) => t,
            Err(e) => {
                self.warned.call_once(|| {
                    crate::say!("kernel symbols unavailable ({e}); addresses print as hex");
                });
                return None;
            }
        };
        symbol_at(table, addr)
    }
}

/// The kernel's `%pS` rule over a kallsyms table.
fn symbol_at(table: &ktrace_symbols::kallsyms::Kallsyms, addr: u64) -> Option<Symbol<'_>> {
    let l = table.lookup(addr)?;
    // Past the last symbol of the core kernel (e.g. a kprobe's ftrace
    // trampoline page) the kernel finds nothing and prints the address.
    // Only code symbols cover code addresses (a linker-script data
    // symbol such as __init_scratch_end must not claim them).
    if (l.size.is_none() && l.offset > 0) || !l.symbol.is_text() {
        return None;
    }
    Some(Symbol {
        name: &l.symbol.name,
        offset: l.offset,
        size: l.size.unwrap_or(0),
        module: l.symbol.module.as_deref(),
    })
}

/// Kernel symbols from kallsyms text kept in a recording, parsed at the
/// first lookup of an address that may be code (a report of uprobes never
/// parses it, even where the format cannot say user from kernel), and the
/// kernel strings of its `printk_formats`.
pub struct SavedSymbols {
    text: Vec<u8>,
    table: std::sync::OnceLock<Option<ktrace_symbols::kallsyms::Kallsyms>>,
    /// Below this address no lookup finds code (one scan of `text`, the
    /// first lookup's): user-space addresses need no table.
    lowest_text: OnceLock<u64>,
    printk: Vec<u8>,
    strings: OnceLock<KernelStrings>,
}

impl SavedSymbols {
    /// Symbols of the kallsyms `text` (empty: none).
    pub fn new(text: Vec<u8>) -> Self {
        Self {
            text,
            table: std::sync::OnceLock::new(),
            lowest_text: OnceLock::new(),
            printk: Vec::new(),
            strings: OnceLock::new(),
        }
    }

    /// The same, with the kernel strings of `printk_formats` text.
    pub fn with_strings(text: Vec<u8>, printk: Vec<u8>) -> Self {
        Self {
            printk,
            ..Self::new(text)
        }
    }
}

impl Symbolizer for SavedSymbols {
    fn string(&self, addr: u64) -> Option<&[u8]> {
        self.strings
            .get_or_init(|| KernelStrings::parse(&self.printk))
            .get(addr)
    }

    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let lowest = *self
            .lowest_text
            .get_or_init(|| ktrace_symbols::kallsyms::lowest_text(&self.text).unwrap_or(0));
        if addr < lowest {
            return None;
        }
        let table = self.table.get_or_init(|| {
            if self.text.is_empty() {
                return None;
            }
            ktrace_symbols::kallsyms::Kallsyms::parse(String::from_utf8_lossy(&self.text)).ok()
        });
        symbol_at(table.as_ref()?, addr)
    }
}

/// Enum constants of the running kernel's BTF, for print fmts that keep
/// them by name (`mode=%s` of `hrtimer_start` names `HRTIMER_MODE_ABS`
/// when the kernel did not export it): read from
/// /sys/kernel/btf/vmlinux at the first name asked, once. Without BTF no
/// name is known, and the argument prints as `[FAILED TO PARSE]`.
pub fn btf_names() -> ktrace_event::printfmt::Names {
    let table: std::sync::Arc<OnceLock<std::collections::HashMap<String, i64>>> =
        std::sync::Arc::default();
    ktrace_event::printfmt::Names::new(move |name| {
        table
            .get_or_init(|| {
                ktrace_symbols::btf::open_enumerators(std::path::Path::new(
                    ktrace_symbols::kernel::VMLINUX_BTF,
                ))
                .unwrap_or_default()
            })
            .get(name)
            .copied()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_follow_the_kernels_rules() {
        let dir = std::env::temp_dir().join(format!("ktrace_kview_sym_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = dir.join("kallsyms");
        // Lines as /proc/kallsyms prints them (6.1 x86_64 layout).
        std::fs::write(
            &ks,
            "ffffffff81100000 T vfs_read\nffffffff81100100 T vfs_write\n\
             ffffffff81200000 D __init_scratch_end\n",
        )
        .unwrap();
        let view = KernelView::running(None).with_kallsyms_file(&ks);
        let s = KernelSymbols::new(&view);
        let got = s.lookup(0xffffffff81100010).unwrap();
        assert_eq!((got.name, got.offset, got.size), ("vfs_read", 0x10, 0x100));
        assert!(s.lookup(0xffffffff81200010).is_none(), "data symbol");
        let none = KernelView::running(None).with_kallsyms_file(&dir.join("nope"));
        assert!(
            KernelSymbols::new(&none)
                .lookup(0xffffffff81100010)
                .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
