//! Rendering a definition back to text: the line `cat dynamic_events` (and
//! `kprobe_events`, `uprobe_events`) prints once the kernel accepted it, the
//! `kprobe_event=` boot-parameter form, a canonical form built from the syntax tree,
//! and the event's `format` file.
//!
//! Mirrors `trace_kprobe_show()`, `trace_uprobe_show()`, `eprobe_dyn_event_show()`,
//! `__set_print_fmt()` and `traceprobe_define_arg_fields()` (Linux 6.1), and
//! `f_show()` of kernel/trace/trace_events.c for the field lines.

use std::fmt::Write as _;

use crate::arch::Arch;
use crate::ast::{
    ArgType, Definition, Fetch, FprobeDef, KprobePlace, ProbeArg, ProbeDef, ProbeKind, RemoveDef,
    SynthDef,
};

/// Appends ` SYMBOL`, ` SYMBOL+OFFSET` or ` 0xADDR` (hex zero-padded to
/// `addr_width` digits; 0 for none).
fn push_place(s: &mut String, place: &KprobePlace, addr_width: usize) {
    let _ = match place {
        KprobePlace::Symbol { symbol, offset: 0 } => write!(s, " {symbol}"),
        KprobePlace::Symbol { symbol, offset } => write!(s, " {symbol}+{offset}"),
        KprobePlace::Address(a) => write!(s, " 0x{a:0addr_width$x}"),
    };
}

/// The line the kernel prints when the probe files are read back.
///
/// Arguments appear as `NAME=TEXT` with TEXT exactly as written (the kernel keeps it
/// verbatim). Address probes print the address as `0x` and 16 (or 8) hex digits;
/// kernels that hash `%p` print a hashed value there instead.
pub fn readback(def: &ProbeDef, arch: Arch) -> String {
    let mut s = String::new();
    match &def.kind {
        ProbeKind::Kprobe {
            place,
            is_return,
            maxactive,
            shown_maxactive,
        } => {
            s.push(if *is_return { 'r' } else { 'p' });
            // `%d` of the kernel's int (negative from 2^31 on)
            let shown = shown_maxactive.unwrap_or(*maxactive) as i32;
            if *is_return && shown != 0 {
                let _ = write!(s, "{shown}");
            }
            let _ = write!(s, ":{}/{}", def.group, def.event);
            // the kernel shows an address as a full-width pointer (%p-like)
            push_place(&mut s, place, (arch.bits() / 4) as usize);
        }
        ProbeKind::Uprobe {
            path,
            offset,
            ref_ctr_offset,
            is_return,
        } => {
            let _ = write!(
                s,
                "{}:{}/{} {}:0x{:0w$x}",
                if *is_return { 'r' } else { 'p' },
                def.group,
                def.event,
                path,
                offset,
                w = (arch.bits() / 4) as usize
            );
            if *ref_ctr_offset != 0 {
                let _ = write!(s, "(0x{ref_ctr_offset:x})");
            }
        }
        ProbeKind::Eprobe { system, event, .. } => {
            let _ = write!(s, "e:{}/{} {}.{}", def.group, def.event, system, event);
        }
    }
    for a in &def.args {
        let _ = write!(s, " {}={}", a.name, a.body);
    }
    s
}

/// The line to write to the kernel to create `def` as it stands (its group,
/// event, place and arguments): the written maxactive, the uprobe offset in
/// hex, and each argument as the user wrote it (`NAME=` only when a name was
/// written, so the kernel's automatic `argN` names stay the same). Arguments
/// past [`crate::fetch::MAX_TRACE_ARGS`] were dropped by the parser and are
/// not written.
pub fn definition(def: &ProbeDef) -> String {
    let mut s = String::new();
    match &def.kind {
        ProbeKind::Kprobe {
            place,
            is_return,
            maxactive,
            ..
        } => {
            s.push(if *is_return { 'r' } else { 'p' });
            if *maxactive != 0 {
                let _ = write!(s, "{maxactive}");
            }
            let _ = write!(s, ":{}/{}", def.group, def.event);
            push_place(&mut s, place, 0);
        }
        ProbeKind::Uprobe {
            path,
            offset,
            ref_ctr_offset,
            is_return,
        } => {
            let r = if *is_return { 'r' } else { 'p' };
            let _ = write!(s, "{r}:{}/{} {path}:0x{offset:x}", def.group, def.event);
            if *ref_ctr_offset != 0 {
                let _ = write!(s, "(0x{ref_ctr_offset:x})");
            }
        }
        ProbeKind::Eprobe { system, event, .. } => {
            let _ = write!(s, "e:{}/{} {system}.{event}", def.group, def.event);
        }
    }
    for a in &def.args {
        s.push(' ');
        if a.named {
            let _ = write!(s, "{}=", a.name);
        }
        s.push_str(&a.body);
    }
    if let ProbeKind::Eprobe {
        filter: Some(f), ..
    } = &def.kind
    {
        let _ = write!(s, " if {f}");
    }
    s
}

/// The fetch expression written canonically (decimal offsets, explicit `+`).
pub fn fetch_text(f: &Fetch) -> String {
    match f {
        Fetch::Reg(r) => format!("%{r}"),
        Fetch::Stack(n) => format!("$stack{n}"),
        Fetch::StackPtr => "$stack".into(),
        Fetch::Retval => "$retval".into(),
        Fetch::Comm => "$comm".into(),
        Fetch::Arg(n) => format!("$arg{n}"),
        Fetch::Field(f) => format!("${f}"),
        Fetch::Mem(a) => format!("@0x{a:x}"),
        Fetch::FileOffset(o) => format!("@+{o}"),
        Fetch::Symbol(s) => format!("@{s}"),
        Fetch::Imm(v) => format!("\\{v}"),
        Fetch::ImmString(s) => format!("\\\"{s}\""),
        Fetch::Btf { var, derefs } => {
            let mut s = match var {
                crate::ast::BtfVar::Param(n) | crate::ast::BtfVar::EntryParam(n) => {
                    format!("$arg{}", n + 1)
                }
                crate::ast::BtfVar::Retval => "$retval".into(),
                crate::ast::BtfVar::Unknown => "?".into(),
            };
            for d in derefs {
                s = format!("+{d}({s})");
            }
            s
        }
        Fetch::Deref {
            offset,
            user,
            inner,
        } => {
            let u = if *user { "u" } else { "" };
            if *offset < 0 {
                format!("-{u}{}({})", offset.unsigned_abs(), fetch_text(inner))
            } else {
                format!("+{u}{offset}({})", fetch_text(inner))
            }
        }
    }
}

/// The type suffix written canonically (without the `:`), or `None` for the default.
pub fn type_text(t: &ArgType) -> Option<String> {
    if !t.explicit {
        return None;
    }
    let mut s = match t.bitfield {
        Some(b) => format!("b{}@{}/{}", b.width, b.offset, b.container),
        None => t.base.name(),
    };
    if let Some(n) = t.count {
        let _ = write!(s, "[{n}]");
    }
    Some(s)
}

fn canonical_arg(a: &ProbeArg) -> String {
    let mut s = String::new();
    if a.named {
        let _ = write!(s, "{}=", a.name);
    }
    if let Fetch::Btf { .. } = a.fetch {
        // BTF names have no canonical spelling but their own
        s.push_str(&a.body);
        return s;
    }
    s.push_str(&fetch_text(&a.fetch));
    if let Some(t) = type_text(&a.ty) {
        let _ = write!(s, ":{t}");
    }
    s
}

/// The line `dynamic_events` lists for an fprobe or tracepoint probe
/// (`trace_fprobe_show()`): `f[N]:GRP/EVENT SYM[%return] NAME=TEXT…`.
pub fn fprobe_readback(f: &FprobeDef) -> String {
    let mut s = String::from(if f.tracepoint { "t" } else { "f" });
    if f.is_return && f.maxactive != 0 {
        let _ = write!(s, "{}", f.maxactive as i32);
    }
    let _ = write!(s, ":{}/{} {}", f.probe.group, f.probe.event, f.symbol);
    if f.is_return {
        s.push_str("%return");
    }
    for a in &f.probe.args {
        let _ = write!(s, " {}={}", a.name, a.body);
    }
    s
}

/// The line `dynamic_events` lists for a synthetic event
/// (`synth_event_show()`): `s:synthetic/NAME<TAB>TYPE FIELD; TYPE FIELD`.
pub fn synth_readback(d: &SynthDef) -> String {
    let fields: Vec<String> = d.fields.iter().map(|(t, n)| format!("{t} {n}")).collect();
    format!("s:synthetic/{}\t{}", d.name, fields.join("; "))
}

/// The definition rebuilt from its syntax tree (what a user could have typed).
pub fn canonical(def: &Definition, arch: Arch) -> String {
    match def {
        Definition::Empty => String::new(),
        Definition::Synthetic(d) => {
            let fields: Vec<String> = d.fields.iter().map(|(t, n)| format!("{t} {n}")).collect();
            format!("s:{} {}", d.name, fields.join("; "))
        }
        Definition::Fprobe(f) => {
            let mut s = String::from(if f.tracepoint { "t" } else { "f" });
            if f.maxactive != 0 {
                let _ = write!(s, "{}", f.maxactive);
            }
            if !f.probe.auto_event {
                let _ = write!(s, ":{}/{}", f.probe.group, f.probe.event);
            }
            let _ = write!(s, " {}", f.symbol);
            if f.is_return {
                s.push_str("%return");
            }
            for a in &f.probe.args {
                let _ = write!(s, " {}", canonical_arg(a));
            }
            s
        }
        Definition::Remove(RemoveDef { group, event, args }) => {
            let mut s = String::from("-:");
            if let Some(g) = group {
                let _ = write!(s, "{g}/");
            }
            s.push_str(event);
            for a in args {
                let _ = write!(s, " {a}");
            }
            s
        }
        Definition::Probe(p) => {
            let mut s = String::new();
            let name = if p.auto_event {
                String::new()
            } else {
                format!(":{}/{}", p.group, p.event)
            };
            match &p.kind {
                ProbeKind::Kprobe {
                    place,
                    is_return,
                    maxactive,
                    ..
                } => {
                    s.push(if *is_return { 'r' } else { 'p' });
                    if *maxactive != 0 {
                        let _ = write!(s, "{maxactive}");
                    }
                    if p.auto_event && p.group != "kprobes" {
                        let _ = write!(s, ":{}/", p.group);
                    }
                    s.push_str(&name);
                    push_place(&mut s, place, 0);
                }
                ProbeKind::Uprobe {
                    path,
                    offset,
                    ref_ctr_offset,
                    is_return,
                } => {
                    s.push(if *is_return { 'r' } else { 'p' });
                    if p.auto_event && p.group != "uprobes" {
                        let _ = write!(s, ":{}/", p.group);
                    }
                    s.push_str(&name);
                    let _ = write!(s, " {path}:0x{offset:x}");
                    if *ref_ctr_offset != 0 {
                        let _ = write!(s, "(0x{ref_ctr_offset:x})");
                    }
                }
                ProbeKind::Eprobe {
                    system,
                    event,
                    filter,
                } => {
                    s.push('e');
                    if p.auto_event && p.group != "eprobes" {
                        let _ = write!(s, ":{}/", p.group);
                    }
                    s.push_str(&name);
                    let _ = write!(s, " {system}.{event}");
                    for a in &p.args {
                        let _ = write!(s, " {}", canonical_arg(a));
                    }
                    if let Some(f) = filter {
                        let _ = write!(s, " if {f}");
                    }
                    return s;
                }
            }
            let _ = arch;
            for a in &p.args {
                let _ = write!(s, " {}", canonical_arg(a));
            }
            s
        }
    }
}

/// The `kprobe_event=` boot parameter form of a kprobe: its readback line with the
/// words joined by commas (the kernel turns commas back into spaces). `None` for
/// other kinds, and when a word itself holds a comma, which that form cannot carry.
pub fn boot_param(def: &ProbeDef, arch: Arch) -> Option<String> {
    if !matches!(def.kind, ProbeKind::Kprobe { .. }) {
        return None;
    }
    let line = readback(def, arch);
    if line.contains(',') {
        return None;
    }
    Some(line.replace(' ', ","))
}

/// One field of the event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// C type as the format file names it (`u64`, `__data_loc char[]`, `u8[4]`).
    pub ty: String,
    /// Field name.
    pub name: String,
    /// Byte offset in the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// `signed:` flag.
    pub signed: bool,
}

/// The record layout: common fields, probe fields, argument fields.
pub fn fields(def: &ProbeDef, arch: Arch) -> Vec<Field> {
    let long = arch.bits() / 8;
    let ulong = "unsigned long".to_string();
    let mut v = vec![
        Field {
            ty: "unsigned short".into(),
            name: "common_type".into(),
            offset: 0,
            size: 2,
            signed: false,
        },
        Field {
            ty: "unsigned char".into(),
            name: "common_flags".into(),
            offset: 2,
            size: 1,
            signed: false,
        },
        Field {
            ty: "unsigned char".into(),
            name: "common_preempt_count".into(),
            offset: 3,
            size: 1,
            signed: false,
        },
        Field {
            ty: "int".into(),
            name: "common_pid".into(),
            offset: 4,
            size: 4,
            signed: true,
        },
    ];
    let is_return = match &def.kind {
        ProbeKind::Kprobe { is_return, .. } | ProbeKind::Uprobe { is_return, .. } => {
            Some(*is_return)
        }
        ProbeKind::Eprobe { .. } => None,
    };
    // struct trace_entry is 8 bytes; the probe head follows, aligned to long.
    let mut head = 8u32.next_multiple_of(long);
    match is_return {
        Some(false) => {
            v.push(Field {
                ty: ulong.clone(),
                name: "__probe_ip".into(),
                offset: head,
                size: long,
                signed: false,
            });
            head += long;
        }
        Some(true) => {
            v.push(Field {
                ty: ulong.clone(),
                name: "__probe_func".into(),
                offset: head,
                size: long,
                signed: false,
            });
            v.push(Field {
                ty: ulong,
                name: "__probe_ret_ip".into(),
                offset: head + long,
                size: long,
                signed: false,
            });
            head += 2 * long;
        }
        None => {}
    }
    for a in &def.args {
        let base = a.ty.base;
        let mut ty = base.fmttype(arch);
        let mut size = base.size(arch);
        if let Some(n) = a.ty.count {
            let _ = write!(ty, "[{n}]");
            size *= n;
        }
        v.push(Field {
            ty,
            name: a.name.clone(),
            offset: head + a.offset,
            size,
            signed: base.is_signed(),
        });
    }
    v
}

/// The `print fmt:` value.
pub fn print_fmt(def: &ProbeDef) -> String {
    let (fmt, rec) = match &def.kind {
        ProbeKind::Kprobe {
            is_return: false, ..
        }
        | ProbeKind::Uprobe {
            is_return: false, ..
        } => ("(%lx)", ", REC->__probe_ip"),
        ProbeKind::Kprobe {
            is_return: true, ..
        }
        | ProbeKind::Uprobe {
            is_return: true, ..
        } => ("(%lx <- %lx)", ", REC->__probe_func, REC->__probe_ret_ip"),
        ProbeKind::Eprobe { .. } => ("", ""),
    };
    let mut s = format!("\"{fmt}");
    for a in &def.args {
        let f = a.ty.base.print_fmt();
        let _ = write!(s, " {}=", a.name);
        match a.ty.count {
            Some(n) => {
                s.push('{');
                s.push_str(&vec![f; n as usize].join(","));
                s.push('}');
            }
            None => s.push_str(f),
        }
    }
    let _ = write!(s, "\"{rec}");
    for a in &def.args {
        let string = a.ty.base.is_string();
        match a.ty.count {
            Some(n) => {
                for j in 0..n {
                    if string {
                        let _ = write!(s, ", __get_str({}[{j}])", a.name);
                    } else {
                        let _ = write!(s, ", REC->{}[{j}]", a.name);
                    }
                }
            }
            None => {
                if string {
                    let _ = write!(s, ", __get_str({})", a.name);
                } else {
                    let _ = write!(s, ", REC->{}", a.name);
                }
            }
        }
    }
    s
}

/// The event's `format` file as Linux 6.1 writes it, without the `ID:` line.
pub fn format_file(def: &ProbeDef, arch: Arch) -> String {
    format_file_for(def, arch, crate::KernelVersion::DEFAULT.features())
}

/// The event's `format` file as a kernel with `features` writes it, without the
/// `ID:` line.
pub fn format_file_for(def: &ProbeDef, arch: Arch, features: crate::kernel::Features) -> String {
    let mut s = format!("name: {}\nformat:\n", def.event);
    for (i, f) in fields(def, arch).iter().enumerate() {
        if i == 4 {
            s.push('\n');
        }
        let (ty, name) = match f.ty.find('[') {
            // Probe fields are defined without a length, so f_show() prints `[]`.
            // (Debian's 5.10 keeps the length: `u8 arg1[4]`.)
            Some(p) if !f.ty.starts_with("__data_loc") => {
                let len = if features.array_fields_unsized {
                    "[]"
                } else {
                    &f.ty[p..]
                };
                (f.ty[..p].to_string(), format!("{}{len}", f.name))
            }
            _ => (f.ty.clone(), f.name.clone()),
        };
        let _ = writeln!(
            s,
            "\tfield:{ty} {name};\toffset:{};\tsize:{};\tsigned:{};",
            f.offset,
            f.size,
            u8::from(f.signed)
        );
    }
    if fields(def, arch).len() == 4 {
        s.push('\n');
    }
    let _ = write!(s, "\nprint fmt: {}\n", print_fmt(def));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Offline, Target, check_line};

    fn probe(def: &str, arch: Arch) -> ProbeDef {
        let mut t = Target::new(arch);
        t.possible_cpus = Some(8);
        match check_line(def, t, &Offline).definition {
            Ok(Definition::Probe(p)) => p,
            other => panic!("{def}: {other:?}"),
        }
    }

    #[test]
    fn readback_lines() {
        let a = Arch::X86_64;
        let cases = [
            ("p vfs_read", "p:kprobes/p_vfs_read_0 vfs_read"),
            ("r vfs_read", "r16:kprobes/r_vfs_read_0 vfs_read"),
            ("r3:g/e vfs_read $retval", "r3:g/e vfs_read arg1=$retval"),
            ("p vfs_read%return", "r16:kprobes/r_vfs_read_0 vfs_read"),
            (
                "p vfs_read+0x10 x=%di:u8",
                "p:kprobes/p_vfs_read_16 vfs_read+16 x=%di:u8",
            ),
            (
                "p:g. ext4:ext4_sync_fs",
                "p:g/p_ext4_ext4_sync_fs_0 ext4:ext4_sync_fs",
            ),
            ("p foo.isra.0", "p:kprobes/p_foo_isra_0_0 foo.isra.0"),
            (
                "p /bin/ls:0x10(0x20)",
                "p:uprobes/p_ls_0x10 /bin/ls:0x0000000000000010(0x20)",
            ),
            (
                "r /usr/lib/libc.so.6:16",
                "r:uprobes/p_libc_0x10 /usr/lib/libc.so.6:0x0000000000000010",
            ),
            (
                "e:x sched.sched_switch p=$prev_pid",
                "e:eprobes/x sched.sched_switch p=$prev_pid",
            ),
        ];
        for (def, want) in cases {
            assert_eq!(readback(&probe(def, a), a), want, "{def}");
        }
        assert_eq!(
            readback(&probe("p /bin/ls:0x10", Arch::Arm), Arch::Arm),
            "p:uprobes/p_ls_0x10 /bin/ls:0x00000010"
        );
    }

    #[test]
    fn definitions_written_parse_back_to_the_same_probe() {
        for line in [
            "p:g/e vfs_read+4 a=%di b=+0(%si):u32 %dx @jiffies",
            "r16:g/e do_sys_openat2 ret=$retval:s64",
            "r:g/e ext4:ext4_sync_fs",
            "p:g/e 0xffffffff81000000",
            "p:g/x /tmp/adv/a:b/hot:0x1250 which=\\1 s=+0(%di):string",
            "r:g/y /bin/true:0x10(0x20) $retval",
            "e:g/z sched.sched_switch prev=$prev_pid:u32 if prev_pid > 1",
        ] {
            let d = probe(line, Arch::X86_64);
            let text = definition(&d);
            assert_eq!(probe(&text, Arch::X86_64), d, "{line} -> {text}");
        }
        let d = probe("p:g/e /bin/true:4096 %ax", Arch::X86_64);
        assert_eq!(definition(&d), "p:g/e /bin/true:0x1000 %ax");
    }

    #[test]
    fn boot_param_form() {
        let a = Arch::Arm64;
        assert_eq!(
            boot_param(&probe("p:g/e vfs_read x=%x0:u32 +8(%x1)", a), a).as_deref(),
            Some("p:g/e,vfs_read,x=%x0:u32,arg2=+8(%x1)")
        );
        assert_eq!(boot_param(&probe("p /bin/ls:1", a), a), None);
    }

    #[test]
    fn format_layout() {
        let a = Arch::X86_64;
        let p = probe(
            "r:g/e vfs_read s=+0(%di):string c=$comm v=+0(%si):u16[3] b=%ax:b3@2/32",
            a,
        );
        let f = fields(&p, a);
        let got: Vec<(&str, &str, u32, u32, bool)> = f[4..]
            .iter()
            .map(|f| (f.ty.as_str(), f.name.as_str(), f.offset, f.size, f.signed))
            .collect();
        assert_eq!(
            got,
            vec![
                ("unsigned long", "__probe_func", 8, 8, false),
                ("unsigned long", "__probe_ret_ip", 16, 8, false),
                ("__data_loc char[]", "s", 24, 4, true),
                ("__data_loc char[]", "c", 28, 4, true),
                ("u16[3]", "v", 32, 6, false),
                ("u32", "b", 38, 4, false),
            ]
        );
        assert_eq!(
            print_fmt(&p),
            "\"(%lx <- %lx) s=\\\"%s\\\" c=\\\"%s\\\" v={%u,%u,%u} b=%u\", REC->__probe_func, \
             REC->__probe_ret_ip, __get_str(s), __get_str(c), REC->v[0], REC->v[1], REC->v[2], REC->b"
        );
        assert!(format_file(&p, a).contains("\tfield:u16 v[];\toffset:32;\tsize:6;\tsigned:0;\n"));
    }
}
