//! The generator: seeded random definitions in the kernel's dynamic-event
//! language, drawn from the grammar of Documentation/trace/kprobetrace.rst,
//! uprobetracer.rst, fprobetrace.rst, eprobes and synthetic events (every
//! kind, every fetch form, types, bitfields, arrays, `%pd`/`%pD`, BTF names and
//! members, `$arg*`, comments, quoting, maxactive, group and event names,
//! limits), plus mutations of such lines (a byte deleted, inserted or
//! replaced, a word duplicated, swapped or dropped, the line cut).
//!
//! It knows no verdicts: nothing here says whether a line is valid, so it
//! cannot share a blind spot with the checker it tests. Names come from a
//! [`Pool`] gathered from the kernel under test (its functions, their BTF
//! parameters and members, tracepoints and their fields, files for uprobes),
//! so most lines are close enough to valid to reach the kernel's deeper
//! checks. Register names are drawn from every architecture's table and
//! some that no architecture has, whatever the target.

use crate::rng::Rng;

/// A function of the kernel under test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Function {
    /// Its name in kallsyms.
    pub name: String,
    /// Its BTF parameters (empty without BTF).
    pub params: Vec<Param>,
    /// Member paths of what it returns, when BTF says it returns a pointer
    /// to a struct (`f_flags`, `f_path.dentry`).
    pub ret_members: Vec<String>,
}

/// A BTF parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Member paths reachable from it when it points to a struct, written as
    /// the kernel's BTF syntax continues them (`f_flags`, `f_inode->i_ino`,
    /// `f_path.dentry`).
    pub members: Vec<String>,
}

/// A tracepoint event of the kernel under test (for `e:` and `t:`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracepoint {
    /// Its system (`sched`).
    pub system: String,
    /// Its name (`sched_switch`).
    pub event: String,
    /// Its fields from the format file, without the `common_` ones.
    pub fields: Vec<String>,
}

/// What the generator draws names from.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    /// The target's kernel name of its architecture (`x86_64`, `arm64`,
    /// `arm`, `riscv`): only biases the choice of registers.
    pub arch: String,
    /// Functions, with BTF where the kernel has it.
    pub functions: Vec<Function>,
    /// Other kallsyms names: data, non-unique, blacklisted, notrace.
    pub other_symbols: Vec<String>,
    /// `(module, function)` pairs of loaded modules.
    pub module_functions: Vec<(String, String)>,
    /// Tracepoints with their fields.
    pub tracepoints: Vec<Tracepoint>,
    /// Regular files for uprobes, with their sizes.
    pub files: Vec<(String, u64)>,
    /// Raw addresses of some kernel functions.
    pub addresses: Vec<u64>,
}

/// The tracefs file a line is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum File {
    /// `dynamic_events`.
    DynamicEvents,
    /// `kprobe_events`.
    KprobeEvents,
    /// `uprobe_events`.
    UprobeEvents,
}

impl File {
    /// The file's name in tracefs.
    pub fn name(self) -> &'static str {
        match self {
            File::DynamicEvents => "dynamic_events",
            File::KprobeEvents => "kprobe_events",
            File::UprobeEvents => "uprobe_events",
        }
    }

    /// The file named `name`.
    pub fn from_name(name: &str) -> Option<File> {
        [File::DynamicEvents, File::KprobeEvents, File::UprobeEvents]
            .into_iter()
            .find(|f| f.name() == name)
    }
}

/// One generated definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The run's seed.
    pub seed: u64,
    /// Its index in the run: `(seed, index)` regenerates it.
    pub index: u64,
    /// The line, without a newline.
    pub line: String,
    /// Where it is written.
    pub file: File,
    /// The family it was drawn from (for the report's table).
    pub family: &'static str,
}

/// Register names of every architecture ktrace targets, and some of none.
const REGISTERS: &[&str] = &[
    // x86_64
    "di", "si", "dx", "cx", "r8", "r9", "ax", "bx", "bp", "sp", "ip", "r10", "r15", "orig_ax",
    "flags", "cs", "ss", // i386 only
    "ds", "es", "fs", "gs", // arm64
    "x0", "x1", "x2", "x7", "x8", "x19", "x29", "x30", "lr", "pc", "pstate", // arm
    "r0", "r1", "r3", "r4", "fp", "cpsr", "ORIG_r0", // riscv
    "a0", "a1", "a7", "ra", "epc", "s0", "s11", "t6", "gp", "tp", "status", "badaddr", "cause",
    "orig_a0", // no architecture
    "rdi", "eax", "x31", "x32", "r16", "a8", "zz", "DI", "Ax", "sp0", "",
];

/// Registers that matter most on `arch` (its argument registers).
fn arch_registers(arch: &str) -> &'static [&'static str] {
    match arch {
        "x86_64" => &["di", "si", "dx", "cx", "r8", "r9", "ax", "sp", "ip"],
        "arm64" => &["x0", "x1", "x2", "x3", "x7", "sp", "pc", "lr"],
        "arm" => &["r0", "r1", "r2", "r3", "sp", "pc", "lr"],
        "riscv" => &["a0", "a1", "a2", "a7", "sp", "epc", "ra"],
        _ => &["di", "x0", "r0", "a0"],
    }
}

const TYPES: &[&str] = &[
    "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64", "char",
    "string", "ustring", "symbol", "symstr", "%pd", "%pD",
];
const BAD_TYPES: &[&str] = &[
    "u7", "int", "s128", "x", "", "String", "u32 ", "b", "bool", "ptr", "%p", "%pS", "u08",
];
const WORDS: &[&str] = &[
    "foo",
    "_x",
    "a1",
    "9ab",
    "x-y",
    "x.y",
    "a/b",
    "CAPS",
    "common_pid",
    "__probe_ip",
    "comm",
    "ip",
    "arg1",
    "retval",
    "$comm",
];
const FILLER: &[u8] = b" \t#\"\\:/%$@+-()=.,;[]{}*&|!<>'0aZ_\x7f";

/// Draws definitions from `pool`.
pub struct Gen<'a> {
    pool: &'a Pool,
    seed: u64,
    /// The functions that have BTF parameters.
    typed: Vec<&'a Function>,
}

impl<'a> Gen<'a> {
    /// A generator over `pool` for the run `seed`.
    pub fn new(pool: &'a Pool, seed: u64) -> Gen<'a> {
        let typed = pool
            .functions
            .iter()
            .filter(|f| !f.params.is_empty())
            .collect();
        Gen { pool, seed, typed }
    }

    /// A function with BTF parameters when there are any (most of the time),
    /// else any function.
    fn typed_function(&self, r: &mut Rng) -> Option<&'a Function> {
        if !self.typed.is_empty() && r.chance(90) {
            return r.pick(&self.typed).copied();
        }
        self.function(r)
    }

    /// Case `index` of the run.
    pub fn case(&self, index: u64) -> Case {
        let mut r = Rng::for_case(self.seed, index);
        let family = r.weighted(&[26, 12, 10, 6, 6, 4, 4, 2, 3, 22, 5]);
        let (family, mut line, kind) = match family {
            0 => ("kprobe", self.kprobe(&mut r, false), Kind::K),
            1 => ("kretprobe", self.kprobe(&mut r, true), Kind::K),
            2 => ("btf", self.btf_probe(&mut r), Kind::K),
            3 => ("uprobe", self.uprobe(&mut r), Kind::U),
            4 => ("eprobe", self.eprobe(&mut r), Kind::D),
            5 => ("fprobe", self.fprobe(&mut r), Kind::D),
            6 => ("tprobe", self.tprobe(&mut r), Kind::D),
            7 => ("synthetic", self.synthetic(&mut r), Kind::D),
            8 => ("remove", self.remove(&mut r), Kind::K),
            9 => {
                let base = self.case_base(&mut r);
                ("mutated", mutate(&mut r, &base), Kind::K)
            }
            _ => ("limits", self.limits(&mut r), Kind::K),
        };
        if r.chance(6) {
            line = decorate(&mut r, &line);
        }
        let file = match kind {
            Kind::K if r.chance(35) => File::KprobeEvents,
            Kind::U if r.chance(35) => File::UprobeEvents,
            Kind::D if r.chance(4) => File::KprobeEvents,
            _ if r.chance(2) => File::UprobeEvents,
            _ => File::DynamicEvents,
        };
        Case {
            seed: self.seed,
            index,
            line,
            file,
            family,
        }
    }

    /// A line of any non-mutated family, to mutate.
    fn case_base(&self, r: &mut Rng) -> String {
        match r.weighted(&[40, 15, 15, 10, 8, 5, 5, 2]) {
            0 => self.kprobe(r, false),
            1 => self.kprobe(r, true),
            2 => self.btf_probe(r),
            3 => self.uprobe(r),
            4 => self.eprobe(r),
            5 => self.fprobe(r),
            6 => self.tprobe(r),
            _ => self.synthetic(r),
        }
    }

    fn function(&self, r: &mut Rng) -> Option<&'a Function> {
        r.pick(&self.pool.functions)
    }

    fn symbol(&self, r: &mut Rng) -> String {
        match r.weighted(&[70, 12, 8, 5, 5]) {
            0 => self
                .function(r)
                .map(|f| f.name.clone())
                .unwrap_or_else(|| "vfs_read".into()),
            1 => r
                .pick(&self.pool.other_symbols)
                .cloned()
                .unwrap_or_else(|| "jiffies".into()),
            2 => r
                .pick(&self.pool.module_functions)
                .map(|(m, f)| match r.chance(50) {
                    true => format!("{m}:{f}"),
                    false => f.clone(),
                })
                .unwrap_or_else(|| "nosuchmod:vfs_read".into()),
            3 => format!("no_such_fn_{}", r.below(1000)),
            _ => r
                .pick(&[
                    "_text",
                    "_stext",
                    "do_sys_open",
                    "kfree",
                    "schedule",
                    "printk",
                ])
                .map(|s| s.to_string())
                .unwrap_or_default(),
        }
    }

    fn head(&self, r: &mut Rng, kind: &str) -> String {
        let maxactive = match kind {
            "r" if r.chance(25) => match r.weighted(&[6, 1, 1, 1, 1, 1]) {
                0 => r.range(1, 64).to_string(),
                1 => "0".into(),
                2 => "4096".into(),
                3 => "4097".into(),
                // the kernel's `int`: negative from 2^31 on, past u32 too big
                4 => big_maxactive(r),
                _ => "x".into(),
            },
            "p" | "f" if r.chance(3) => "4".into(),
            "f" if r.chance(1) => big_maxactive(r),
            _ => String::new(),
        };
        let name = match r.weighted(&[25, 30, 30, 4, 4, 4, 3, 2]) {
            0 => return format!("{kind}{maxactive}"),
            1 => event_name(r),
            2 => format!("{}/{}", group_name(r), event_name(r)),
            3 => format!("{}/", group_name(r)),
            4 => format!("{}.{}", group_name(r), event_name(r)),
            5 => String::new(),
            6 => format!("{}/{}/{}", group_name(r), event_name(r), event_name(r)),
            // the name of an event that exists (a tracepoint's)
            _ => {
                let taken = self.tracepoint(r);
                format!("{}/{}", taken.system, taken.event)
            }
        };
        format!("{kind}{maxactive}:{name}")
    }

    fn kprobe(&self, r: &mut Rng, ret: bool) -> String {
        let kind = if ret { "r" } else { "p" };
        let head = if r.chance(8) {
            // The kernel's documentation also allows a bare place for `p`
            // in dynamic_events? No: every line starts with a kind; keep a
            // few without one to see how each file answers.
            String::new()
        } else {
            self.head(r, kind)
        };
        let place = self.kplace(r, ret);
        let n = arg_count(r);
        let mut words = vec![head, place];
        for _ in 0..n {
            words.push(self.arg(r, ArgCtx::Kprobe { ret }));
        }
        join(&words)
    }

    fn kplace(&self, r: &mut Rng, ret: bool) -> String {
        let sym = self.symbol(r);
        let off = |r: &mut Rng| -> String {
            match r.weighted(&[6, 4, 4, 3, 2, 1, 1, 1]) {
                0 => "0".into(),
                1 => "4".into(),
                2 => format!("{}", r.range(1, 64)),
                3 => format!("0x{:x}", r.range(1, 0x80)),
                4 => "0x100000".into(),
                5 => "-4".into(),
                6 => "0x".into(),
                _ => format!("{}", r.range(100, 100_000)),
            }
        };
        match r.weighted(&[45, 20, 8, 6, 5, 4, 3, 3, 3, 3]) {
            0 => sym,
            1 => format!("{sym}+{}", off(r)),
            2 => format!("{sym}%return"),
            3 => format!("{sym}+{}%return", off(r)),
            4 => match r.pick(&self.pool.addresses) {
                Some(a) => format!("0x{a:x}"),
                None => "0xffffffff81000000".into(),
            },
            5 => format!("\"{sym}\""),
            6 => format!("{sym}%{}", r.pick(&["ret", "RETURN", "return "]).unwrap()),
            7 => format!("{sym}+{}+{}", off(r), off(r)),
            8 if ret => format!("{sym}+0"),
            8 => format!("{sym}-{}", off(r)),
            _ => format!("{sym}{}", r.pick(&["+", "%", ":", "@", ""]).unwrap()),
        }
    }

    fn btf_probe(&self, r: &mut Rng) -> String {
        let f = self.typed_function(r).cloned().unwrap_or_default();
        let ret = r.chance(35);
        let kind = if ret && r.chance(50) { "r" } else { "p" };
        let place = match (ret, kind) {
            (true, "p") => format!("{}%return", f.name),
            _ => f.name.clone(),
        };
        let ret = ret || kind == "r";
        let mut words = vec![self.head(r, kind), place];
        let n = r.range(0, 4);
        for _ in 0..n {
            words.push(self.btf_arg(r, &f, ret));
        }
        join(&words)
    }

    fn btf_arg(&self, r: &mut Rng, f: &Function, ret: bool) -> String {
        let body = match r.weighted(&[30, 25, 8, 8, 8, 6, 5, 5, 5]) {
            0 => r
                .pick(&f.params)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| "x".into()),
            1 => match r.pick(&f.params) {
                Some(p) => match r.pick(&p.members) {
                    Some(m) => format!("{}->{m}", p.name),
                    None => format!("{}->nosuch", p.name),
                },
                None => "file->f_flags".into(),
            },
            2 => "$arg*".into(),
            3 => format!("$arg{}", r.range(0, (f.params.len() + 2) as u64)),
            4 if ret => match r.pick(&f.ret_members) {
                Some(m) => format!("$retval->{m}"),
                None => "$retval".into(),
            },
            4 => "$retval".into(),
            5 => match r.pick(&f.params) {
                Some(p) => format!(
                    "{}.{}",
                    p.name,
                    r.pick(&p.members).cloned().unwrap_or_default()
                ),
                None => "x.y".into(),
            },
            6 => format!(
                "{}->{}",
                r.pick(&f.params).map(|p| p.name.as_str()).unwrap_or("p"),
                r.pick(WORDS).unwrap()
            ),
            7 => r.pick(WORDS).unwrap().to_string(),
            _ => self.fetch(r, ArgCtx::Kprobe { ret }, 0),
        };
        let body = if r.chance(15) {
            format!("{body}:{}", self.any_type(r))
        } else {
            body
        };
        if r.chance(30) {
            format!("{}={body}", arg_name(r))
        } else {
            body
        }
    }

    fn uprobe(&self, r: &mut Rng) -> String {
        let ret = r.chance(30);
        let kind = if ret && r.chance(70) { "r" } else { "p" };
        let head = self.head(r, kind);
        let (path, size) = r
            .pick(&self.pool.files)
            .cloned()
            .unwrap_or(("/bin/busybox".into(), 1 << 20));
        let path = match r.weighted(&[80, 5, 5, 4, 3, 3, 2, 2, 1]) {
            0 => path,
            1 => "/no/such/file".into(),
            2 => "/bin".into(),
            3 => format!("{path} "),
            4 => "relative/path".into(),
            5 => format!("\"{path}\""),
            // paths kern_path() cannot walk: not a directory, a name
            // longer than NAME_MAX
            6 => format!("{path}/"),
            7 => format!("{path}/x"),
            _ => format!("/tmp/{}", "n".repeat(256)),
        };
        let offset = match r.weighted(&[50, 20, 10, 8, 6, 6]) {
            0 => format!("0x{:x}", r.range(0, size.max(1))),
            1 => format!("{}", r.range(0, size.max(1))),
            2 => format!("0x{:x}", size + r.range(0, 4096)),
            3 => "main".into(),
            4 => "-1".into(),
            _ => format!("0x{:x}", r.range(0, 64)),
        };
        let refctr = match r.weighted(&[85, 10, 5]) {
            0 => String::new(),
            1 => format!("(0x{:x})", r.range(0, size.max(1))),
            _ => format!("({})", r.pick(&["", "x", "0x", "-1"]).unwrap()),
        };
        let suffix = if ret && kind == "p" { "%return" } else { "" };
        let place = format!("{path}:{offset}{refctr}{suffix}");
        let mut words = vec![head, place];
        for _ in 0..arg_count(r) {
            words.push(self.arg(r, ArgCtx::Uprobe { ret }));
        }
        join(&words)
    }

    fn tracepoint(&self, r: &mut Rng) -> Tracepoint {
        r.pick(&self.pool.tracepoints)
            .cloned()
            .unwrap_or(Tracepoint {
                system: "sched".into(),
                event: "sched_switch".into(),
                fields: vec!["prev_comm".into(), "prev_pid".into(), "next_pid".into()],
            })
    }

    fn eprobe(&self, r: &mut Rng) -> String {
        let tp = self.tracepoint(r);
        let head = match r.weighted(&[56, 25, 10, 5, 4]) {
            0 => format!("e:{}/{}", group_name(r), event_name(r)),
            1 => format!("e:{}", event_name(r)),
            2 => "e".into(),
            3 => format!("e{}:{}", r.range(1, 9), event_name(r)),
            // the name of an event that exists (a tracepoint's)
            _ => {
                let taken = self.tracepoint(r);
                format!("e:{}/{}", taken.system, taken.event)
            }
        };
        let place = match r.weighted(&[50, 35, 5, 5, 5]) {
            0 => format!("{}.{}", tp.system, tp.event),
            1 => format!("{}/{}", tp.system, tp.event),
            2 => tp.event.clone(),
            3 => format!("{}.no_such_event", tp.system),
            _ => format!("no_such_sys/{}", tp.event),
        };
        let mut words = vec![head, place];
        for _ in 0..arg_count(r) {
            let body = match r.weighted(&[40, 15, 10, 10, 10, 5, 10, 5]) {
                0 => format!(
                    "${}",
                    r.pick(&tp.fields).map(String::as_str).unwrap_or("prev_pid")
                ),
                1 => format!(
                    "+{}(${})",
                    r.range(0, 16),
                    r.pick(&tp.fields).map(String::as_str).unwrap_or("prev_pid")
                ),
                2 => "$comm".into(),
                3 => format!("${}", r.pick(WORDS).unwrap()),
                4 => r
                    .pick(&tp.fields)
                    .cloned()
                    .unwrap_or_else(|| "prev_pid".into()),
                5 => format!("\\{}", r.range(0, 1000)),
                6 => self.fetch(r, ArgCtx::Eprobe, 0),
                _ => typecast(r, &tp.fields),
            };
            let body = if r.chance(30) {
                format!("{body}:{}", self.any_type(r))
            } else {
                body
            };
            words.push(if r.chance(50) {
                format!("{}={body}", arg_name(r))
            } else {
                body
            });
        }
        if r.chance(25) {
            words.push("if".into());
            words.push(crate::filtergen::filter(r, &tp.fields));
        }
        join(&words)
    }

    fn fprobe(&self, r: &mut Rng) -> String {
        let f = self.typed_function(r).cloned().unwrap_or_default();
        let ret = r.chance(35);
        let head = self.head(r, "f");
        let place = match r.weighted(&[60, 25, 5, 5, 5]) {
            0 if ret => format!("{}%return", f.name),
            0 => f.name.clone(),
            1 => f.name.clone(),
            2 => self.symbol(r),
            3 => format!("{}+4", f.name),
            4 => format!("{}*", f.name.get(..3).unwrap_or("vfs")),
            // a glob by its backslash (ftrace's filter_parse_regex()): the
            // name with one byte escaped, or a backslash at its end
            _ => {
                let at = r.below(f.name.len().max(1) + 1).min(f.name.len());
                format!("{}\\{}", &f.name[..at], &f.name[at..])
            }
        };
        let place = match (ret, place.ends_with("%return")) {
            (true, false) if r.chance(50) && !place.contains('+') => format!("{place}%return"),
            _ => place,
        };
        let mut words = vec![head, place];
        for _ in 0..r.range(0, 4) {
            words.push(match r.chance(50) {
                true => self.btf_arg(r, &f, ret),
                false => self.arg(r, ArgCtx::Fprobe { ret }),
            });
        }
        join(&words)
    }

    fn tprobe(&self, r: &mut Rng) -> String {
        let tp = self.tracepoint(r);
        let head = self.head(r, "t");
        let place = match r.weighted(&[60, 15, 10, 10, 5]) {
            0 => tp.event.clone(),
            1 => format!("{}/{}", tp.system, tp.event),
            2 => format!("{}:{}", tp.system, tp.event),
            3 => format!("{}%return", tp.event),
            _ => "no_such_tracepoint".into(),
        };
        let mut words = vec![head, place];
        for _ in 0..r.range(0, 3) {
            words.push(self.arg(r, ArgCtx::Fprobe { ret: false }));
        }
        join(&words)
    }

    fn synthetic(&self, r: &mut Rng) -> String {
        let name = event_name(r);
        let head = match r.weighted(&[80, 10, 10]) {
            0 => format!("s:{name}"),
            1 => format!("s:{}/{name}", group_name(r)),
            _ => format!("s {name}"),
        };
        let mut fields = Vec::new();
        for _ in 0..r.range(0, 4) {
            let ty = r
                .pick(&[
                    "u64",
                    "s32",
                    "pid_t",
                    "char[16]",
                    "char[]",
                    "unsigned int",
                    "int",
                    "u8",
                    "bool",
                    "long",
                    "xyz",
                    "char",
                    "u64[2]",
                ])
                .unwrap();
            fields.push(format!("{ty} {}", arg_name(r)));
        }
        let sep = if r.chance(80) { "; " } else { ";" };
        format!("{head} {}", fields.join(sep))
    }

    fn remove(&self, r: &mut Rng) -> String {
        match r.weighted(&[40, 20, 15, 10, 10, 5]) {
            0 => format!("-:{}/{}", group_name(r), event_name(r)),
            1 => format!("-:{}", event_name(r)),
            2 => format!("-:{}/", group_name(r)),
            3 => format!("-:{}/*", group_name(r)),
            4 => "-".into(),
            _ => format!("- {}", event_name(r)),
        }
    }

    /// Lines at the kernel's limits: 128 arguments and one more, names of
    /// 63 and 64 bytes, long argument expressions and strings, deep
    /// dereferences, big arrays.
    fn limits(&self, r: &mut Rng) -> String {
        let f = self
            .function(r)
            .map(|f| f.name.clone())
            .unwrap_or_else(|| "vfs_read".into());
        let reg = r.pick(arch_registers(&self.pool.arch)).unwrap();
        match r.weighted(&[10, 10, 10, 10, 10, 10, 10]) {
            0 => {
                let n = r.pick(&[127u64, 128, 129, 130]).copied().unwrap();
                let args: Vec<String> = (0..n).map(|i| format!("a{i}=%{reg}:u8")).collect();
                format!("p:{} {f} {}", event_name(r), args.join(" "))
            }
            1 => {
                let n = r.range(60, 66) as usize;
                format!("p:{} {f}", "e".repeat(n))
            }
            2 => {
                let n = r.range(60, 66) as usize;
                format!("p:{}/ev {f}", "g".repeat(n))
            }
            3 => {
                let n = r.range(28, 36) as usize;
                format!("p:{} {f} {}=%{reg}", event_name(r), "a".repeat(n))
            }
            4 => {
                let depth = r.range(8, 18) as usize;
                let mut e = format!("%{reg}");
                for _ in 0..depth {
                    e = format!("+0({e})");
                }
                format!("p:{} {f} x={e}", event_name(r))
            }
            5 => {
                let n = r.range(60, 70) as usize;
                format!("p:{} {f} s=\\\"{}\":string", event_name(r), "z".repeat(n))
            }
            _ => {
                let n = r.pick(&[1u64, 63, 64, 65, 0]).copied().unwrap();
                format!("p:{} {f} x=+0(%{reg}):u8[{n}]", event_name(r))
            }
        }
    }

    fn arg(&self, r: &mut Rng, ctx: ArgCtx) -> String {
        let body = self.fetch(r, ctx, 0);
        let body = match r.weighted(&[55, 30, 8, 4, 3]) {
            0 => body,
            1 => format!("{body}:{}", self.any_type(r)),
            2 => format!("{body}:{}", self.bitfield(r)),
            3 => format!("{body}:{}[{}]", r.pick(TYPES).unwrap(), r.range(0, 70)),
            _ => format!("{body}:"),
        };
        match r.weighted(&[45, 50, 5]) {
            0 => body,
            1 => format!("{}={body}", arg_name(r)),
            _ => format!("={body}"),
        }
    }

    fn any_type(&self, r: &mut Rng) -> String {
        match r.weighted(&[80, 10, 10]) {
            0 => r.pick(TYPES).unwrap().to_string(),
            1 => self.bitfield(r),
            _ => r.pick(BAD_TYPES).unwrap().to_string(),
        }
    }

    fn bitfield(&self, r: &mut Rng) -> String {
        let container = *r.pick(&[8u64, 16, 32, 64, 7, 128]).unwrap();
        let width = r.range(0, container.min(64) + 1);
        let offset = r.range(0, container.min(64));
        format!("b{width}@{offset}/{container}")
    }

    fn fetch(&self, r: &mut Rng, ctx: ArgCtx, depth: u32) -> String {
        let reg = |r: &mut Rng| -> String {
            if r.chance(75) {
                format!("%{}", r.pick(arch_registers(&self.pool.arch)).unwrap())
            } else {
                format!("%{}", r.pick(REGISTERS).unwrap())
            }
        };
        let ret = match ctx {
            ArgCtx::Kprobe { ret } | ArgCtx::Uprobe { ret } | ArgCtx::Fprobe { ret } => ret,
            ArgCtx::Eprobe => false,
        };
        let mut w = [30, 18, 10, 4, 8, 8, 8, 6, 6, 4, 4, 4, 2];
        if depth > 3 {
            w[1] = 0;
        }
        if ret {
            w[3] = 16;
        }
        match r.weighted(&w) {
            0 => reg(r),
            1 => {
                let sign = if r.chance(85) { "+" } else { "-" };
                let user = if r.chance(10) { "u" } else { "" };
                let off = match r.weighted(&[40, 30, 20, 10]) {
                    0 => "0".to_string(),
                    1 => format!("{}", r.range(1, 64) * 8),
                    2 => format!("0x{:x}", r.range(1, 0x200)),
                    _ => r
                        .pick(&["", "x", "0x", "99999999999999999999"])
                        .unwrap()
                        .to_string(),
                };
                format!("{sign}{user}{off}({})", self.fetch(r, ctx, depth + 1))
            }
            2 => format!(
                "$stack{}",
                r.pick(&["", "0", "1", "5", "2048", "2049", "x"]).unwrap()
            ),
            3 => "$retval".into(),
            4 => "$comm".into(),
            5 => format!(
                "$arg{}",
                r.pick(&["1", "2", "6", "8", "9", "10", "0", "*", "10000", ""])
                    .unwrap()
            ),
            6 => match r.weighted(&[50, 30, 20]) {
                0 => format!("@{}", self.symbol(r)),
                1 => format!("@{}+{}", self.symbol(r), r.range(0, 64)),
                _ => match r.pick(&self.pool.addresses) {
                    Some(a) => format!("@0x{a:x}"),
                    None => "@0x1000".into(),
                },
            },
            7 => format!(
                "\\{}",
                r.pick(&["0", "1", "-1", "0x10", "123456789", "x", ""])
                    .unwrap()
            ),
            8 => format!(
                "\\\"{}\"",
                r.pick(&["", "abc", "a b", "x\\\"y", "1234567"]).unwrap()
            ),
            9 => match ctx {
                ArgCtx::Eprobe => "$prev_pid".into(),
                _ => match self.function(r) {
                    Some(f) => f
                        .params
                        .first()
                        .map(|p| p.name.clone())
                        .unwrap_or_else(|| "file".into()),
                    None => "file".into(),
                },
            },
            10 => format!("${}", r.pick(WORDS).unwrap()),
            11 => r.pick(WORDS).unwrap().to_string(),
            _ => {
                let mut s = String::new();
                for _ in 0..r.range(1, 6) {
                    s.push(*r.pick(FILLER).unwrap() as char);
                }
                s
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    K,
    U,
    D,
}

#[derive(Debug, Clone, Copy)]
enum ArgCtx {
    Kprobe { ret: bool },
    Uprobe { ret: bool },
    Fprobe { ret: bool },
    Eprobe,
}

/// A maxactive at the edges of the kernel's `int` and `unsigned int`.
fn big_maxactive(r: &mut Rng) -> String {
    r.pick(&[
        "2147483647",
        "2147483648",
        "0x80000000",
        "0xffffffff",
        "4294967296",
    ])
    .unwrap()
    .to_string()
}

fn arg_count(r: &mut Rng) -> u64 {
    match r.weighted(&[20, 30, 25, 15, 10]) {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => r.range(3, 6),
        _ => r.range(6, 12),
    }
}

fn event_name(r: &mut Rng) -> String {
    match r.weighted(&[70, 5, 5, 5, 5, 5, 5]) {
        0 => format!("ev{}", r.below(100_000)),
        1 => format!("_e{}", r.below(100)),
        2 => format!("{}ev", r.below(10)),
        3 => "a-b".into(),
        4 => format!("E{}x", r.below(100)),
        5 => "ev.x".into(),
        _ => r.pick(WORDS).unwrap().to_string(),
    }
}

fn group_name(r: &mut Rng) -> String {
    match r.weighted(&[60, 10, 10, 5, 5, 5, 5]) {
        0 => format!("grp{}", r.below(1000)),
        1 => "kprobes".into(),
        2 => "uprobes".into(),
        3 => "g-x".into(),
        4 => format!("{}g", r.below(10)),
        5 => "sched".into(),
        _ => r.pick(WORDS).unwrap().to_string(),
    }
}

fn arg_name(r: &mut Rng) -> String {
    match r.weighted(&[75, 25]) {
        0 => format!("a{}", r.below(50)),
        _ => r.pick(WORDS).unwrap().to_string(),
    }
}

/// An event probe's typecast `(STRUCT)FIELD[->MEMBER]` (6.16+): structs the
/// kernel's BTF has and names it has not, an empty cast, no `)`, fields of
/// the event and others, a member, a `.` member.
fn typecast(r: &mut Rng, fields: &[String]) -> String {
    let st = [
        "task_struct",
        "file",
        "sk_buff",
        "page",
        "no_such_struct",
        "",
    ][r.weighted(&[30, 15, 10, 10, 25, 10])];
    let field = match r.weighted(&[70, 15, 15]) {
        0 => r.pick(fields).cloned().unwrap_or_else(|| "prev_pid".into()),
        1 => "no_such_field".into(),
        _ => "$comm".into(),
    };
    let member =
        ["", "->pid", "->f_flags", "->len", ".x", "->"][r.weighted(&[30, 25, 10, 10, 15, 10])];
    match r.weighted(&[90, 10]) {
        0 => format!("({st}){field}{member}"),
        _ => format!("({st}{field}"),
    }
}

fn join(words: &[String]) -> String {
    words
        .iter()
        .filter(|w| !w.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whitespace, comments and quoting around a line.
fn decorate(r: &mut Rng, line: &str) -> String {
    match r.weighted(&[25, 20, 15, 15, 10, 10, 5]) {
        0 => format!("{line} # comment"),
        1 => format!("{line}#x"),
        2 => format!("  {line}"),
        3 => line.replace(' ', "\t"),
        4 => format!("{line} "),
        5 => format!("# {line}"),
        _ => line.replacen(' ', "  ", 1),
    }
}

/// One mutation of `line`: deletes, inserts or replaces a byte, duplicates,
/// swaps or drops a word, or cuts the line.
pub fn mutate(r: &mut Rng, line: &str) -> String {
    let bytes = line.as_bytes();
    if bytes.is_empty() {
        return line.to_string();
    }
    let i = r.below(bytes.len());
    let filler = *r.pick(FILLER).unwrap();
    let mut words: Vec<&str> = line.split(' ').collect();
    let out: Vec<u8> = match r.weighted(&[20, 20, 20, 10, 10, 10, 10]) {
        0 => [&bytes[..i], &bytes[i + 1..]].concat(),
        1 => [&bytes[..i], &[filler][..], &bytes[i..]].concat(),
        2 => [&bytes[..i], &[filler][..], &bytes[i + 1..]].concat(),
        3 => {
            let w = r.below(words.len());
            words.insert(w, words[w]);
            words.join(" ").into_bytes()
        }
        4 => {
            let (a, b) = (r.below(words.len()), r.below(words.len()));
            words.swap(a, b);
            words.join(" ").into_bytes()
        }
        5 if words.len() > 1 => {
            words.remove(r.below(words.len()));
            words.join(" ").into_bytes()
        }
        _ => bytes[..i].to_vec(),
    };
    // Keep the line valid UTF-8 and on one line: the fillers are ASCII, and
    // a cut inside a multi-byte character is repaired by dropping it.
    String::from_utf8_lossy(&out).replace(['\n', '\u{fffd}'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool {
            arch: "x86_64".into(),
            functions: vec![Function {
                name: "vfs_read".into(),
                params: vec![
                    Param {
                        name: "file".into(),
                        members: vec!["f_flags".into(), "f_path.dentry".into()],
                    },
                    Param {
                        name: "count".into(),
                        members: vec![],
                    },
                ],
                ret_members: vec![],
            }],
            other_symbols: vec!["jiffies".into()],
            module_functions: vec![("romfs".into(), "romfs_fill_super".into())],
            tracepoints: vec![],
            files: vec![("/bin/busybox".into(), 900_000)],
            addresses: vec![0xffff_ffff_8100_0000],
        }
    }

    #[test]
    fn a_case_is_reproduced_from_seed_and_index() {
        let p = pool();
        let g = Gen::new(&p, 42);
        for i in 0..200 {
            assert_eq!(g.case(i), g.case(i));
        }
        let other = Gen::new(&p, 43);
        let differ = (0..50)
            .filter(|&i| g.case(i).line != other.case(i).line)
            .count();
        assert!(differ > 40, "{differ}");
    }

    #[test]
    fn every_family_and_file_is_drawn_and_lines_are_single_lines() {
        let p = pool();
        let g = Gen::new(&p, 1);
        let mut families = std::collections::BTreeSet::new();
        let mut files = std::collections::BTreeSet::new();
        for i in 0..5000 {
            let c = g.case(i);
            assert!(!c.line.contains('\n'), "{:?}", c.line);
            families.insert(c.family);
            files.insert(c.file);
        }
        assert_eq!(families.len(), 11, "{families:?}");
        assert_eq!(files.len(), 3);
    }

    #[test]
    fn mutations_change_the_line_and_stay_one_line() {
        let mut r = Rng::new(9);
        let base = "p:grp/ev vfs_read a=+8(%di):u32 b=\\\"x\"";
        let mut changed = 0;
        for _ in 0..500 {
            let m = mutate(&mut r, base);
            assert!(!m.contains('\n'));
            changed += usize::from(m != base);
        }
        assert!(changed > 400, "{changed}");
    }
}
