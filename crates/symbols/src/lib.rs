//! ktrace-symbols: kernel and user-space symbols for probes and printing.
//!
//! - [`elf`]: ELF symbol → uprobe file offset (symtab and dynsym, GNU
//!   versions, PIE and non-PIE), and user address → symbol.
//! - [`ldcache`], [`maps`], [`library`]: `LIB:SYMBOL` → library path through
//!   /etc/ld.so.cache and /proc/PID/maps.
//! - [`usersym`]: user addresses → `symbol+0xoff (file)` through maps.
//! - [`kallsyms`]: /proc/kallsyms and address → `sym+0xoff/0xsize [mod]`.
//! - [`btf`]: BTF types: struct member offsets, function parameters.
//! - [`kernel`]: the kernel view, every table above loaded lazily once.
//! - [`btf_types`]: the BTF argument compiler's questions, answered from [`btf`].
//! - [`blacklist`], [`probeable`], [`glob`]: which kernel functions a kprobe
//!   event can take, and wildcard expansion against them.
//!
//! Everything is pure parsing over bytes and strings; each module has one
//! clearly separated `open` function doing the file I/O. Nothing here
//! writes to the kernel (that is ktrace-tracefs).

pub mod blacklist;
pub mod btf;
pub mod btf_types;
pub mod elf;
mod error;
pub mod glob;
pub mod kallsyms;
pub mod kernel;
pub mod ldcache;
pub mod library;
pub mod maps;
pub mod probeable;
pub mod usersym;

pub use error::{Error, Result};
pub use kernel::KernelView;
