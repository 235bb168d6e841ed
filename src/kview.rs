//! The kernel view as the printers' `Symbolizer`: kernel addresses →
//! `func+off/size [mod]` columns from the view's kallsyms table, which is
//! parsed at the first lookup (parsing takes seconds on a slow board and
//! must not delay enabling the probes, nor compete with it for the CPU).
//!
//! It mirrors the kernel's own `%pS` lookup (see `ktrace_symbols::kallsyms`);
//! it reads nothing itself.

use std::sync::Once;

use ktrace_printer::{Symbol, Symbolizer};
use ktrace_symbols::KernelView;

/// Kernel symbols for the printers, from a [`KernelView`].
pub struct KernelSymbols<'v> {
    view: &'v KernelView,
    warned: Once,
}

impl<'v> KernelSymbols<'v> {
    /// Symbols of the kernel `view` shows.
    pub fn new(view: &'v KernelView) -> Self {
        Self {
            view,
            warned: Once::new(),
        }
    }
}

impl Symbolizer for KernelSymbols<'_> {
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
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
/// first lookup (a report of uprobes never parses it).
pub struct SavedSymbols {
    text: Vec<u8>,
    table: std::sync::OnceLock<Option<ktrace_symbols::kallsyms::Kallsyms>>,
}

impl SavedSymbols {
    /// Symbols of the kallsyms `text` (empty: none).
    pub fn new(text: Vec<u8>) -> Self {
        Self {
            text,
            table: std::sync::OnceLock::new(),
        }
    }
}

impl Symbolizer for SavedSymbols {
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let table = self.table.get_or_init(|| {
            if self.text.is_empty() {
                return None;
            }
            ktrace_symbols::kallsyms::Kallsyms::parse(&String::from_utf8_lossy(&self.text)).ok()
        });
        symbol_at(table.as_ref()?, addr)
    }
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
