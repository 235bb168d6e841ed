//! What a check needs to know about the target kernel beyond the language itself:
//! symbols, files, existing events. Offline this comes from a `/proc/kallsyms` copy
//! ([`Kallsyms`]); a live implementation (tracefs, a temporary probe) can implement
//! [`Environment`] elsewhere. Every question may be answered "unknown" (`None`), and
//! the checker then records that the check was not done.
//!
//! Not an I/O layer: [`Kallsyms::parse`] takes the file's text.

use std::collections::HashMap;

/// Kind of a path on the target system (for uprobes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Does not exist.
    Missing,
    /// A regular file.
    Regular,
    /// Exists, not a regular file.
    Other,
}

/// Why the kernel refuses to register a kprobe the language allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A function without an ftrace location ("Could not probe notrace
    /// function"), refused before the arguments' symbols are resolved.
    Notrace(String),
    /// Not kernel text, or in the kprobe blacklist (`register_kprobe()`).
    Address(String),
    /// An address kallsyms cannot place (below the kernel image: x86_64's
    /// per-cpu variables): `register_kprobe()` fails with -ENOENT, "Invalid
    /// probed address or symbol", after the arguments' symbols.
    Unresolved(String),
    /// A symbol kallsyms lists at address 0 (x86_64's `fixed_percpu_data`):
    /// `kprobe_lookup_name()` returns 0, which `_kprobe_addr()` takes as not
    /// found on every kernel: -ENOENT, "Invalid probed address or symbol".
    NotFound(String),
}

/// What registration does with a kprobe on a raw address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressFate {
    /// In no kernel symbol: the kernel waits for a module to bring it
    /// (`-ENOENT` at registration is taken as "not loaded yet").
    Deferred,
    /// Refused at registration.
    Refused(Refusal),
    /// Registered.
    Registered,
}

/// Answers about the target kernel. `None` means "cannot tell".
pub trait Environment {
    /// How many symbols named exactly `name` (vmlinux and modules).
    fn symbol_count(&self, _name: &str) -> Option<usize> {
        None
    }
    /// Whether kallsyms_lookup_name(`name`), the first symbol of that
    /// name, is at address 0 (x86_64's per-CPU `fixed_percpu_data` until
    /// 6.15): an `@SYM` argument of it then fails as a missing symbol does,
    /// -ENOENT from traceprobe_update_arg(). `None` when not known.
    fn symbol_at_zero(&self, _name: &str) -> Option<bool> {
        None
    }

    /// How many symbols of module `module` are named `name`, as the kernel's
    /// `module_kallsyms_on_each_symbol()` counts them (arm's and arm64's
    /// mapping symbols `$a`, `$d`, `$x` included); `Some(None)` when the
    /// module is not loaded.
    fn module_symbol_count(&self, _module: &str, _name: &str) -> Option<Option<usize>> {
        None
    }
    /// Whether `MOD:SYM` resolves; `Some(None)` when the module is not loaded.
    fn module_symbol(&self, module: &str, name: &str) -> Option<Option<bool>> {
        self.module_symbol_count(module, name)
            .map(|loaded| loaded.map(|n| n > 0))
    }
    /// The kind of `path`.
    fn file_kind(&self, _path: &str) -> Option<FileKind> {
        None
    }
    /// Whether `group/event` exists already.
    fn event_exists(&self, _group: &str, _event: &str) -> Option<bool> {
        None
    }
    /// Names of kernel functions near `name` (a misspelling's "did you
    /// mean"); empty when not known.
    fn similar_symbols(&self, _name: &str) -> Vec<String> {
        Vec::new()
    }
    /// The fields of an existing event with their types (an event probe's
    /// filter); `None` when not known.
    fn event_field_decls(
        &self,
        _system: &str,
        _event: &str,
    ) -> Option<Vec<crate::filter::FieldDecl>> {
        None
    }
    /// Field names of an existing event (event probes).
    fn event_fields(&self, _system: &str, _event: &str) -> Option<Option<Vec<String>>> {
        None
    }
    /// Whether the tracepoint `name` already carries its own
    /// `__probestub_NAME` although no listed event put it there (what a
    /// failed tracepoint probe leaves behind on 6.12); `None` when that
    /// cannot be read here.
    fn tracepoint_stub_registered(&self, _name: &str) -> Option<bool> {
        None
    }
    /// The lines `dynamic_events` lists now (what a removal can match).
    fn dynamic_events(&self) -> Option<Vec<String>> {
        None
    }
    /// Why registering a kprobe at `symbol`+`offset` fails although the
    /// definition parses: the address is not kernel text (data, an init
    /// function freed after boot), it is in the kprobe blacklist, or the
    /// function is notrace. `Some(None)` when it registers, `None` when
    /// that cannot be told here.
    fn kprobe_refusal(&self, _symbol: &str, _offset: u64) -> Option<Option<Refusal>> {
        None
    }
    /// What registration does with a kprobe (a return probe when
    /// `is_return`) on raw address `addr`.
    fn kprobe_address(&self, _addr: u64, _is_return: bool) -> Option<AddressFate> {
        None
    }
    /// Whether ftrace can attach to a function `pattern` names (a name or a
    /// glob): what an fprobe's registration needs.
    fn ftrace_matches(&self, _pattern: &str) -> Option<bool> {
        None
    }
    /// The target's vmlinux BTF (a typecast's members are looked up in it);
    /// `None` when it is not known here.
    fn btf_vmlinux(&self) -> Option<&dyn crate::btfarg::BtfTypes> {
        None
    }
    /// Whether the target's vmlinux BTF has a struct or union named `name`
    /// (a typecast's `(STRUCT)`); `None` when its BTF is not known here.
    fn btf_struct(&self, _name: &str) -> Option<bool> {
        None
    }
    /// Whether kallsyms puts the function `name` at an address ftrace lists
    /// under another name (an alias of an attachable function). `None` when
    /// that cannot be told here.
    fn ftrace_alias(&self, _name: &str) -> Option<bool> {
        None
    }
    /// `kprobe_on_func_entry()` for `symbol`+`offset`: whether the address
    /// is the entry of the function it falls in (its start, or on x86 the
    /// `+4` after an `endbr64`, `arch_adjust_kprobe_addr()`); `Some(None)`
    /// when the address is in no symbol (`-ENOENT`, decided at
    /// registration); `None` when that cannot be told here.
    fn kprobe_entry(&self, _symbol: &str, _offset: u64) -> Option<Option<bool>> {
        None
    }
    /// The prototype of function `name` in the target's BTF as the kernel
    /// looks it up (`btf_find_func_proto()`: vmlinux, then every module's
    /// BTF, by the name as written), with the BTF that holds its types:
    /// `Some(None)` when no BTF has it, `None` when the target's BTF is not
    /// known here.
    #[allow(clippy::type_complexity)]
    fn btf_function(
        &self,
        _name: &str,
    ) -> Option<Option<(&dyn crate::btfarg::BtfTypes, crate::btfarg::BtfFunc)>> {
        None
    }
}

/// Knows nothing: every target-dependent check is reported as not done.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Environment for Offline {}

/// A parsed `/proc/kallsyms` (names, types and module tags; addresses optional).
///
/// Not the kernel view's parser (`ktrace_symbols::kallsyms`, which ktrace
/// itself uses): this crate sits below ktrace-symbols and cannot call it,
/// and this one is lenient where that one is strict — it also takes
/// `TYPE NAME` and bare `NAME` lines and a `[MODULE]` after a space (any
/// non-blank line names a symbol), while the view refuses such a table and
/// skips `#` comment lines this one would count. One parser serving both
/// would change what the offline corpus and benches count. On the kernel's
/// own lines the counts agree (ktrace-symbols'
/// `offline_kallsyms_counts_agree_with_the_kernel_views`).
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    counts: HashMap<String, usize>,
    modules: HashMap<String, Vec<String>>,
    /// The names in "did you mean" order ([`crate::similar::shape_order`]),
    /// built at the first misspelt name.
    by_shape: std::sync::OnceLock<Vec<String>>,
}

impl Kallsyms {
    /// Parses kallsyms text: `ADDR TYPE NAME [\[MODULE\]]` per line (also accepts
    /// `TYPE NAME` and bare `NAME` lines). Malformed lines are skipped.
    pub fn parse(text: &str) -> Kallsyms {
        let mut k = Kallsyms::default();
        for line in text.lines() {
            // `ADDR TYPE NAME\t[MODULE]`: a module's name ends at the tab
            // and may end in a space (riscv64's ".L0 " labels)
            if let Some((main, rest)) = line.split_once('\t')
                && let Some(m) = rest
                    .trim()
                    .strip_prefix('[')
                    .and_then(|r| r.strip_suffix(']'))
                && let [addr, kind, name] = main.splitn(3, ' ').collect::<Vec<_>>().as_slice()
                && !addr.is_empty()
                && addr.bytes().all(|c| c.is_ascii_hexdigit())
                && kind.len() == 1
                && !name.is_empty()
                && !name.starts_with(' ')
            {
                *k.counts.entry(name.to_string()).or_default() += 1;
                k.modules
                    .entry(m.to_string())
                    .or_default()
                    .push(name.to_string());
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let (name, module) = match words.as_slice() {
                [_, _, name, module, ..] => (
                    *name,
                    module.strip_prefix('[').and_then(|m| m.strip_suffix(']')),
                ),
                [_, _, name] => (*name, None),
                [_, name] => (*name, None),
                [name] => (*name, None),
                _ => continue,
            };
            *k.counts.entry(name.to_string()).or_default() += 1;
            if let Some(m) = module {
                k.modules
                    .entry(m.to_string())
                    .or_default()
                    .push(name.to_string());
            }
        }
        k
    }

    /// Number of distinct symbol entries read.
    pub fn len(&self) -> usize {
        self.counts.values().sum()
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

impl Environment for Kallsyms {
    fn symbol_count(&self, name: &str) -> Option<usize> {
        Some(self.counts.get(name).copied().unwrap_or(0))
    }

    fn similar_symbols(&self, name: &str) -> Vec<String> {
        let names = self.by_shape.get_or_init(|| {
            let names: Vec<&String> = self.counts.keys().collect();
            let order = crate::similar::shape_order(
                names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (i as u32, n.as_str())),
            );
            order
                .into_iter()
                .map(|i| names[i as usize].clone())
                .collect()
        });
        let run = crate::similar::shape_run(names, String::as_str, name);
        crate::similar::similar(name, names[run].iter().map(String::as_str))
    }

    fn module_symbol_count(&self, module: &str, name: &str) -> Option<Option<usize>> {
        Some(
            self.modules
                .get(module)
                .map(|syms| syms.iter().filter(|s| *s == name).count()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81001000 t dup_sym\nffffffff81002000 t dup_sym\n\
             ffffffffc0000000 t ext4_foo\t[ext4]\n\nbad\n",
        );
        assert_eq!(k.symbol_count("_stext"), Some(1));
        assert_eq!(k.symbol_count("dup_sym"), Some(2));
        assert_eq!(k.symbol_count("nope"), Some(0));
        assert_eq!(k.module_symbol("ext4", "ext4_foo"), Some(Some(true)));
        assert_eq!(k.module_symbol("ext4", "x"), Some(Some(false)));
        assert_eq!(k.module_symbol("xfs", "x"), Some(None));
        // riscv64's ".L0 " labels keep their space (the kernel's name)
        let k = Kallsyms::parse(
            "ffffffff01000010 t .L0 \t[autofs4]\nffffffff01000020 t .L0 \t[autofs4]\n",
        );
        assert_eq!(k.symbol_count(".L0"), Some(0));
        assert_eq!(k.module_symbol_count("autofs4", ".L0 "), Some(Some(2)));
        assert_eq!(Offline.symbol_count("x"), None);
    }
}
