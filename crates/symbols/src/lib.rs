//! ktrace-symbols: kernel and user-space symbols for probes and printing.
//!
//! - [`elf`]: ELF symbol → uprobe file offset (symtab and dynsym, GNU
//!   versions, PIE and non-PIE), and user address → symbol; [`elf_file`]
//!   reads only the parts of an ELF file those need.
//! - [`ldcache`], [`maps`], [`library`]: `LIB:SYMBOL` → library path through
//!   /etc/ld.so.cache and /proc/PID/maps.
//! - [`usersym`]: user addresses → `symbol+0xoff (file)` through maps.
//! - [`kallsyms`]: /proc/kallsyms and address → `sym+0xoff/0xsize [mod]`.
//! - [`btf`]: BTF types: struct member offsets, function parameters.
//! - [`kernel`]: the kernel view, every table above loaded lazily once.
//! - [`btf_types`]: the BTF argument compiler's questions, answered from [`btf`].
//! - [`blacklist`], [`probeable`], [`glob`]: which kernel functions a kprobe
//!   event can take, and wildcard expansion against them.
//! - [`route`]: which BTF names a definition's arguments, and whether the
//!   kernel reads them itself (the kernel's `NameSource`).
//! - [`code`]: a kprobe at `SYM+OFF` against its function's code (kcore,
//!   vmlinux), decoded by ktrace-disasm; [`reserved`]: the jump label and
//!   static call sites the kernel patches itself, which kprobes refuse.
//! - [`define`]: one definition line through names, check and code: the
//!   pipeline `ktrace check` and every command that creates probes share.
//!
//! Everything is pure parsing over bytes and strings; each module has one
//! clearly separated `open` function doing the file I/O. Nothing here
//! writes to the kernel (that is ktrace-tracefs).

pub mod blacklist;
pub mod btf;
pub mod btf_types;
pub mod code;
pub mod define;
pub mod elf;
pub mod elf_file;
mod error;
pub mod glob;
pub mod kallsyms;
pub mod kernel;
pub mod ldcache;
pub mod library;
pub mod maps;
pub mod modules;
mod names;
pub mod probeable;
pub mod reserved;
pub mod route;
pub mod symname;
pub mod tracepoint;
pub mod usersym;

pub use error::{Error, Result};
pub use kernel::KernelView;

/// The most bytes read from a table file (kallsyms, BTF, ld.so.cache, the
/// ftrace and blacklist lists): a distribution kernel's kallsyms is some
/// 10 MB and its BTF some 6 MB, so more is not one of them.
pub const MAX_TABLE: u64 = 64 << 20;

/// Opens `path` for reading without waiting: open(2) of a FIFO blocks
/// until a writer comes, and an ELF file, a vmlinux or a probed binary that
/// is a FIFO is refused after the open anyway (the callers look at what
/// was opened). Reads of a regular file are the same either way.
pub fn open_no_wait(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

/// Reads a table file whole: a regular file (those of /proc and /sys
/// included) or a pipe, at most [`MAX_TABLE`] bytes. A device such as
/// /dev/zero is refused before any byte is read, and a longer input is an
/// error rather than all of the memory.
pub fn read_table(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let refuse = |why: String| {
        Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
        )
    };
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let t = f.metadata().map_err(|e| Error::io(path, e))?.file_type();
    if t.is_dir() {
        return Err(refuse("a directory, not a table file".into()));
    }
    if !t.is_file() && !t.is_fifo() && !t.is_socket() {
        return Err(refuse("a device, not a table file".into()));
    }
    let mut data = Vec::new();
    f.take(MAX_TABLE + 1)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(path, e))?;
    if data.len() as u64 > MAX_TABLE {
        return Err(refuse(format!(
            "longer than {} MiB, more than a table ktrace reads",
            MAX_TABLE >> 20
        )));
    }
    Ok(data)
}

/// [`read_table`] as text (invalid UTF-8 is replaced, as the tables are
/// ASCII).
pub fn read_table_text(path: &std::path::Path) -> Result<String> {
    let b = read_table(path)?;
    Ok(String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}
