//! ktrace-symbols: kernel and user-space symbols.
//!
//! kallsyms, ELF symbols turned into uprobe file offsets, BTF types, and
//! address → `sym+off/size` lookups.
