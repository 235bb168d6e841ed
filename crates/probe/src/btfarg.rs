//! BTF arguments: the kernel's own names-instead-of-offsets syntax for kprobe
//! events (`vfs_read file->f_path.dentry->d_name.name:string count`, `$arg*`,
//! `$argN`, typed `$retval`, `$retval->member`, `:%pd`/`:%pD`), checked against a
//! kernel's BTF and, for kernels that do not read it themselves (5.10, 6.1),
//! compiled into the classic fetch language (`+OFF(%reg):TYPE`).
//!
//! Mirrors kernel/trace/trace_probe.c of Linux 6.12: `traceprobe_expand_meta_args`
//! (`$arg*`, `$argN` → parameter names), `traceprobe_expand_dentry_args` (`%pd`,
//! `%pD`), `generate_probe_arg_name` (a plain name names its field), `parse_btf_arg`,
//! `parse_btf_field` (`->` dereferences, `.` accumulates offsets, anonymous members
//! searched as `btf_find_struct_member` does), `fetch_type_from_btf_type` (enum →
//! s32, pointer → x64/x32, ints by size and sign), `check_prepare_btf_string_fetch`
//! (`char *` gets one more dereference, `char[]` none) and `parse_btf_bitfield` —
//! with the same error_log messages and caret positions. The compiled form fetches
//! the same bytes with the same field names and print types, so a trace line reads
//! the same on both routes.
//!
//! Not here: reading BTF (see the [`BtfTypes`] trait, implemented over
//! ktrace-symbols' reader), deciding whether the running kernel takes BTF arguments
//! itself (its tracefs README says so), or any I/O. Uprobe and event-probe
//! definitions pass through untouched.
//!
//! Known differences from the kernel, on purpose: a `char *` or `char[]` counts as a
//! string whether `char` is signed or not (6.1's x86 BTF has a signed `char`, which
//! 6.12's check would refuse); `$arg0` is "This variable is not found" (the kernel
//! reads before its parameter array there).

use std::fmt::Write as _;

use crate::Arch;
use crate::error::{ErrorKind, ProbeError, Silent, TpErr};
use crate::fetch::{MAX_ARG_NAME_LEN, MAX_ARGSTR_LEN, good_name};
use crate::parse::Checked;

mod compile;
pub use compile::compile;

/// A BTF type id (0 is `void`).
pub type TypeId = u32;

/// What a type is, once typedefs and qualifiers are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BtfKind {
    /// `void` (type id 0).
    Void,
    /// An integer: width in bits, signedness, and `BTF_INT_OFFSET` (old-style
    /// bitfields).
    Int {
        /// `BTF_INT_BITS`.
        bits: u32,
        /// `BTF_INT_SIGNED`.
        signed: bool,
        /// `BTF_INT_OFFSET`.
        offset: u32,
    },
    /// A pointer to `target`.
    Ptr {
        /// The pointed-to type.
        target: TypeId,
    },
    /// An array of `len` elements of `elem`.
    Array {
        /// The element type.
        elem: TypeId,
        /// The element count.
        len: u32,
    },
    /// A struct.
    Struct,
    /// A union.
    Union,
    /// A 32-bit-or-smaller enum.
    Enum,
    /// A 64-bit enum.
    Enum64,
    /// Anything else (float, function prototype, forward declaration, ...).
    Other,
}

/// One member of a struct or union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfMember {
    /// The name, empty for an anonymous struct or union member.
    pub name: String,
    /// Offset in bits from the start of the aggregate.
    pub bit_offset: u32,
    /// Bitfield width, 0 for a normal member.
    pub bitfield_size: u32,
    /// The member's type.
    pub type_id: TypeId,
}

/// A function's prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfFunc {
    /// The return type (0 for `void`).
    pub ret: TypeId,
    /// The parameters, in order: name and type.
    pub params: Vec<(String, TypeId)>,
}

/// The questions this module asks of a kernel's BTF (vmlinux, plus a module's
/// split BTF for `MOD:function`).
pub trait BtfTypes {
    /// The prototype of function `name` (in `module`'s BTF first when given).
    fn function(&self, module: Option<&str>, name: &str) -> Option<BtfFunc>;
    /// The type `id` is, after typedefs, `const`, `volatile`, `restrict` and type
    /// tags: the resolved id and its kind.
    fn resolve(&self, id: TypeId) -> Option<(TypeId, BtfKind)>;
    /// The members of struct or union `id` (already resolved); `None` when `id` is
    /// not one.
    fn members(&self, id: TypeId) -> Option<Vec<BtfMember>>;
    /// The struct named `name`.
    fn find_struct(&self, name: &str) -> Option<TypeId>;
    /// A C spelling of type `id`, for explanations.
    fn type_name(&self, id: TypeId) -> String;
    /// The raw `size`/`type` word of type `id` as the kernel's `struct
    /// btf_type` holds it: the size of an integer, struct, union, enum or
    /// float, the referred type of a pointer, typedef or qualifier, 0 for
    /// an array. `None` when not known.
    fn size_or_type(&self, _id: TypeId) -> Option<u32> {
        None
    }
}

/// Where the names of a definition's arguments come from: a kernel's BTF
/// today (ktrace-symbols' route), another source (DWARF for user space)
/// the same way.
pub trait NameSource {
    /// Whether the kernel reads these names itself: the line is then
    /// written (and checked) as it is.
    fn native(&self) -> bool;
    /// The types naming the arguments of the function `line` probes;
    /// `None` when none can be read.
    fn types_for(&mut self, line: &str) -> Option<&dyn BtfTypes>;
}

/// One argument as the kernel reads it and as ktrace compiled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgForm {
    /// The event field name (the same on both routes).
    pub name: String,
    /// The argument after `$arg*`/`%pd` expansion, as a kernel with BTF arguments
    /// reads it back (`count`, `file->f_flags`).
    pub native: String,
    /// The classic fetch argument with the same meaning (`%si:u64`).
    pub classic: String,
    /// How it was derived (`size_t count: parameter 3 in %dx; u64`), empty when the
    /// argument has no BTF part.
    pub note: String,
}

/// A definition after BTF processing.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The line to write: the original when the kernel reads BTF arguments itself
    /// (`native`), otherwise the classic form.
    pub text: String,
    /// The classic form (equal to the joined input when nothing needed BTF).
    pub classic: String,
    /// Whether any argument used BTF.
    pub uses_btf: bool,
    /// Every argument, in order, after expansion.
    pub args: Vec<ArgForm>,
    /// The classic form's check (definition, readback, unchecked items).
    pub checked: Checked,
    /// What the kernel reads back from `kprobe_events` for the line written.
    pub readback: Option<String>,
}

impl Compiled {
    /// The explanation `ktrace check --explain` prints: one line per argument that
    /// used BTF, then the classic definition.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        for a in &self.args {
            if a.note.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "  {}={}  =>  {}={}   ({})",
                a.name, a.native, a.name, a.classic, a.note
            );
        }
        let _ = write!(s, "  classic: {}", self.classic);
        s
    }
}

const SUBSYSTEM: &str = "trace_kprobe";

/// `reserved_field_names[]` of trace_probe.c.
const RESERVED: &[&str] = &[
    "common_type",
    "common_flags",
    "common_preempt_count",
    "common_pid",
    "common_tgid",
    "__probe_ip",
    "__probe_func",
    "__probe_ret_ip",
];

/// The words of a command and where each starts in the joined command.
struct Words {
    joined: String,
    starts: Vec<usize>,
}

impl Words {
    fn new(words: &[String]) -> Words {
        let mut starts = Vec::new();
        let mut pos = 0;
        for w in words {
            starts.push(pos);
            pos += w.len() + 1;
        }
        Words {
            joined: words.join(" "),
            starts,
        }
    }

    fn pos(&self, index: usize, offset: usize) -> usize {
        match self.starts.get(index) {
            Some(s) => s + offset,
            None => self.joined.len() + 1,
        }
    }
}

/// The state of one definition's processing.
struct Ctx<'a> {
    btf: Option<&'a dyn BtfTypes>,
    arch: Arch,
    native: bool,
    module: Option<String>,
    func: Option<String>,
    entry: bool,
    ret: bool,
    proto: Option<Option<BtfFunc>>,
    orig: Words,
    /// The log index (`trace_probe_log_set_index`): a word of the original command.
    index: usize,
    /// `ctx->offset`: bytes into the current word.
    offset: usize,
    /// What the current argument's BTF part resolved to, for typing.
    last: Option<Last>,
    note: String,
    /// Whether a construct only BTF gives meaning to was seen (a name, `->`,
    /// `$arg*`, `%pd`); `$argN` and `$retval` alone are classic too.
    strong: bool,
    /// What kallsyms says of the probed function (`Environment`), for a
    /// missing prototype's hint: `None` when it cannot tell.
    symbol: Option<SymbolState>,
    /// Nearby kernel function names, for a function that does not exist.
    similar: Vec<String>,
}

/// What kallsyms says of a probed function whose prototype BTF lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SymbolState {
    /// It exists (so BTF lacks it: static, inlined, or not described).
    Exists,
    /// No such function (in its module, when one was named).
    Missing,
    /// The named module is not loaded.
    ModuleNotLoaded,
}

#[derive(Debug, Clone, Copy)]
struct Last {
    ty: TypeId,
    kind: BtfKind,
    bitoffs: u32,
    bitsize: u32,
}

type R<T> = Result<T, ProbeError>;

impl Ctx<'_> {
    fn err(&self, e: TpErr, offset: usize) -> ProbeError {
        ProbeError {
            kind: ErrorKind::Logged(e),
            message: e.message(),
            subsystem: Some(SUBSYSTEM),
            pos: Some(self.orig.pos(self.index, offset)),
            command: self.orig.joined.clone(),
            hint: None,
        }
    }

    fn err_hint(&self, e: TpErr, offset: usize, hint: String) -> ProbeError {
        let mut p = self.err(e, offset);
        p.hint = Some(hint);
        p
    }

    fn no_classic(&self, offset: usize, hint: String) -> ProbeError {
        ProbeError {
            kind: ErrorKind::Silent(Silent::BtfCompile),
            message: Silent::BtfCompile.message(),
            subsystem: None,
            pos: Some(self.orig.pos(self.index, offset)),
            command: self.orig.joined.clone(),
            hint: Some(hint),
        }
    }

    /// `query_btf_context()`: the probed function's prototype, looked up once.
    fn proto(&mut self) -> Option<BtfFunc> {
        if self.proto.is_none() {
            let p = match (self.btf, &self.func) {
                // The kernel looks the probed symbol up in BTF as it is
                // written: `MOD:FUNC` is no function name there
                // (query_btf_context(): "No BTF entry for this probe point").
                _ if self.native && self.module.is_some() => None,
                (Some(b), Some(f)) => b.function(self.module.as_deref(), f),
                _ => None,
            };
            self.proto = Some(p);
        }
        self.proto.clone().flatten()
    }

    fn missing_btf_hint(&self) -> String {
        match (self.btf, &self.func) {
            (None, _) => "no BTF to resolve names with: this kernel has no \
                /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF) and no --btf FILE was given; \
                write the raw form instead, e.g. +OFFSET(%REG):TYPE"
                .to_string(),
            (Some(_), Some(f)) if self.symbol == Some(SymbolState::ModuleNotLoaded) => format!(
                "module {m} is not loaded, so neither its BTF nor its symbols know {f}; \
                 load it first (modprobe {m})",
                m = self.module.as_deref().unwrap_or_default()
            ),
            (Some(_), Some(f)) if self.symbol == Some(SymbolState::Missing) => {
                let place = match &self.module {
                    Some(m) => format!("module {m} has no function {f}"),
                    None => format!("this kernel has no function {f}"),
                };
                match self.similar.as_slice() {
                    [] => format!("{place} (kallsyms lists none)"),
                    near => format!(
                        "{place} (kallsyms lists none); did you mean {}?",
                        near.join(", ")
                    ),
                }
            }
            (Some(_), Some(f)) if self.native && self.module.is_some() => format!(
                "this kernel reads BTF names itself and looks the probe point up as written: \
                 {}:{f} is no function name in BTF; write {f} without the module (the kernel \
                 finds the function in its module's BTF)",
                self.module.as_deref().unwrap_or_default()
            ),
            (Some(_), Some(f)) => format!(
                "the BTF has no prototype for {f} (static or inlined functions often have none); \
                 write the raw form instead, e.g. {}:x64",
                self.reg_text(0).unwrap_or_else(|| "%REG".to_string())
            ),
            (Some(_), None) => "BTF names need a probe on a function symbol".to_string(),
        }
    }

    /// Where parameter `n` (0-based) is at function entry, as the kernel's
    /// `regs_get_kernel_argument()` reads it.
    fn reg_text(&self, n: usize) -> Option<String> {
        let regs = self.arch.arg_registers();
        if let Some(r) = regs.get(n) {
            return Some(format!("%{r}"));
        }
        match self.arch {
            // regs_get_kernel_stack_nth(regs, n - NR_REG_ARGUMENTS + 1)
            Arch::X86_64 | Arch::I386 => Some(format!("$stack{}", n - regs.len() + 1)),
            _ => None,
        }
    }

    fn fetch_type(&mut self, last: &mut Last) -> Option<String> {
        match last.kind {
            BtfKind::Enum => Some("s32".into()),
            BtfKind::Enum64 => Some("s64".into()),
            BtfKind::Ptr { .. } => Some(format!("x{}", self.arch.bits())),
            BtfKind::Int {
                bits,
                signed,
                offset,
            } => match (signed, bits) {
                (true, 8 | 16 | 32 | 64) => Some(format!("s{bits}")),
                (true, _) => None,
                (false, 8 | 16 | 32 | 64) => Some(format!("u{bits}")),
                (false, _) => {
                    last.bitsize = bits;
                    last.bitoffs += offset;
                    Some("u64".into())
                }
            },
            _ => None,
        }
    }

    fn is_char(&self, id: TypeId) -> bool {
        let Some(b) = self.btf else { return false };
        matches!(b.resolve(id), Some((_, BtfKind::Int { bits: 8, .. })))
    }

    /// `split_next_field()`: `Ok(Some((sep_at, next_at, is_arrow)))`.
    fn split_next(&self, s: &str, base: usize) -> R<Option<(usize, usize, bool)>> {
        let Some(i) = s.find(['.', '-']) else {
            return Ok(None);
        };
        if s[i..].starts_with("->") {
            Ok(Some((i, i + 2, true)))
        } else if s[i..].starts_with('.') {
            Ok(Some((i, i + 1, false)))
        } else {
            Err(self.err(TpErr::BAD_HYPHEN, base + i))
        }
    }

    fn find_member(&self, ty: TypeId, name: &str) -> R<Option<(u32, BtfMember)>> {
        let b = self.btf.expect("btf checked by caller");
        find_struct_member(b, ty, name).ok_or_else(|| self.err(TpErr::BAD_BTF_TID, self.offset))
    }

    /// `parse_btf_field()`: `fields` starts at `self.offset`; `ty` is the pointer
    /// the first `->` goes through. Returns the fetch with one `+OFF(...)` per
    /// dereference.
    fn parse_field(&mut self, fields: &str, mut ty: (TypeId, BtfKind), inner: String) -> R<String> {
        let b = self.btf.expect("btf checked by caller");
        let mut out = inner;
        let mut rest = Some(fields.to_string());
        let mut names = Vec::new();
        while let Some(fieldname) = rest.take() {
            let BtfKind::Ptr { target } = ty.1 else {
                return Err(self.err(TpErr::NO_PTR_STRCT, self.offset));
            };
            let Some(mut cur) = b.resolve(target) else {
                return Err(self.err(TpErr::BAD_BTF_TID, self.offset));
            };
            let mut bitoffs = 0u32;
            let mut bitsize;
            let mut field = fieldname;
            loop {
                let split = self.split_next(&field, self.offset)?;
                let (name, next, arrow) = match split {
                    Some((sep, next, arrow)) => (
                        field[..sep].to_string(),
                        Some(field[next..].to_string()),
                        arrow,
                    ),
                    None => (field.clone(), None, false),
                };
                let Some((anon, m)) = self.find_member(cur.0, &name)? else {
                    let agg = b.type_name(cur.0);
                    return Err(self.err_hint(
                        TpErr::NO_BTF_FIELD,
                        self.offset,
                        format!("{agg} has no member {name:?} (see: ktrace syms --btf '{agg}')"),
                    ));
                };
                bitoffs = bitoffs.saturating_add(anon).saturating_add(m.bit_offset);
                bitsize = m.bitfield_size;
                names.push(name);
                let Some(t) = b.resolve(m.type_id) else {
                    return Err(self.err(TpErr::BAD_BTF_TID, self.offset));
                };
                cur = t;
                match next {
                    Some(n) => {
                        self.offset += field.len() - n.len();
                        field = n;
                        if arrow {
                            rest = Some(field.clone());
                            break;
                        }
                    }
                    None => break,
                }
            }
            out = format!("+{}({out})", bitoffs / 8);
            self.last = Some(Last {
                ty: cur.0,
                kind: cur.1,
                bitoffs: bitoffs % 8,
                bitsize,
            });
            ty = cur;
        }
        Ok(out)
    }

    /// `parse_btf_arg()` on `var` (which starts at `self.offset`).
    fn btf_arg(&mut self, var: &str) -> R<String> {
        let base = self.offset;
        self.strong |= var != "$retval";
        let split = self.split_next(var, base)?;
        let (name, field) = match split {
            Some((_, next, false)) => {
                return Err(self.err(TpErr::NOSUP_DAT_ARG, base + next));
            }
            Some((sep, next, true)) => (&var[..sep], Some((next, &var[next..]))),
            None => (var, None),
        };
        let (fetch, tid) = if self.ret && name == "$retval" {
            match self.proto() {
                Some(p) if p.ret == 0 => return Err(self.err(TpErr::NO_RETVAL, base)),
                Some(p) => {
                    self.note = format!(
                        "returns {}",
                        self.btf.map(|b| b.type_name(p.ret)).unwrap_or_default()
                    );
                    ("$retval".to_string(), p.ret)
                }
                None => {
                    if let Some((next, _)) = field {
                        return Err(self.err_hint(
                            TpErr::NO_BTF_ENTRY,
                            base + next,
                            self.missing_btf_hint(),
                        ));
                    }
                    return Ok(var.to_string());
                }
            }
        } else {
            let Some(p) = self.proto().filter(|p| !p.params.is_empty()) else {
                return Err(self.err_hint(TpErr::NO_BTF_ENTRY, base, self.missing_btf_hint()));
            };
            let Some(i) = p.params.iter().position(|(n, _)| n == name) else {
                let names: Vec<&str> = p.params.iter().map(|(n, _)| n.as_str()).collect();
                return Err(self.err_hint(
                    TpErr::NO_BTFARG,
                    base,
                    format!(
                        "{} takes: {}",
                        self.func.as_deref().unwrap_or("the function"),
                        names.join(", ")
                    ),
                ));
            };
            let tid = p.params[i].1;
            if self.ret {
                if !self.native {
                    return Err(self.no_classic(
                        base,
                        format!(
                            "{name} is an entry argument read in a return probe; kernels before \
                             6.10 cannot keep it until the function returns: read it in a \
                             separate entry probe"
                        ),
                    ));
                }
                // The kernel keeps the entry value (FETCH_OP_EDATA, one fetch
                // instruction like $retval); the classic checker, which models
                // 6.1, validates the rest of the chain on $retval.
                ("$retval".to_string(), tid)
            } else {
                let Some(reg) = self.reg_text(i) else {
                    return Err(self.no_classic(
                        base,
                        format!(
                            "{name} is parameter {} of {}, passed on the stack on {}; no register holds it",
                            i + 1,
                            self.func.as_deref().unwrap_or("?"),
                            self.arch
                        ),
                    ));
                };
                let tn = self.btf.map(|b| b.type_name(tid)).unwrap_or_default();
                self.note = format!("{tn} {name}: parameter {} in {reg}", i + 1);
                (reg, tid)
            }
        };
        let b = self.btf.expect("a prototype implies btf");
        let Some(t) = b.resolve(tid) else {
            return Err(self.err(TpErr::BAD_BTF_TID, base));
        };
        self.last = Some(Last {
            ty: t.0,
            kind: t.1,
            bitoffs: 0,
            bitsize: 0,
        });
        match field {
            Some((next, rest)) => {
                self.offset = base + next;
                self.parse_field(rest, t, fetch)
            }
            None => Ok(fetch),
        }
    }

    /// `parse_probe_arg()`: compiles the BTF parts of one fetch argument.
    fn fetcharg(&mut self, arg: &str) -> R<String> {
        let first = arg.as_bytes().first().copied().unwrap_or(0);
        match first {
            b'$' => {
                let var = &arg[1..];
                if var.starts_with("retval") {
                    if !self.ret || self.btf.is_none() {
                        return Ok(arg.to_string());
                    }
                    return self.btf_arg(arg);
                }
                if let Some(n) = var.strip_prefix("arg")
                    && let Ok(n) = n.parse::<usize>()
                    && n >= 1
                {
                    if self.entry {
                        if self.native {
                            return Ok(arg.to_string());
                        }
                        return match self.reg_text(n - 1) {
                            Some(r) => Ok(r),
                            None => Ok(arg.to_string()),
                        };
                    }
                    if self.ret && !self.native {
                        return Err(self.no_classic(
                            self.offset,
                            format!(
                                "{arg} in a return probe reads the entry value, which kernels \
                                 before 6.10 do not keep: read it in a separate entry probe"
                            ),
                        ));
                    }
                }
                Ok(arg.to_string())
            }
            b'+' | b'-' => {
                let (Some(open), Some(close)) = (arg.find('('), arg.rfind(')')) else {
                    return Ok(arg.to_string());
                };
                if close < open {
                    return Ok(arg.to_string());
                }
                let save = self.offset;
                self.offset += open + 1;
                let inner = self.fetcharg(&arg[open + 1..close])?;
                self.offset = save;
                self.last = None;
                Ok(format!("{}{inner}{}", &arg[..=open], &arg[close..]))
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                if !self.entry && !self.ret {
                    return Err(self.err_hint(
                        TpErr::NOSUP_BTFARG,
                        self.offset,
                        "BTF names are read only at a function's entry (offset 0) or in a return probe"
                            .to_string(),
                    ));
                }
                if self.btf.is_none() {
                    return Err(self.err_hint(
                        TpErr::NO_BTF_ENTRY,
                        self.offset,
                        self.missing_btf_hint(),
                    ));
                }
                self.btf_arg(arg)
            }
            _ => Ok(arg.to_string()),
        }
    }

    /// `traceprobe_parse_probe_arg()` for argument `i` (word `index` of the
    /// original command): the field name, the native body and the classic body.
    fn argument(&mut self, i: usize, word: &str, used: &[String]) -> R<(String, String, String)> {
        self.offset = 0;
        self.last = None;
        self.note.clear();
        let (name, body, body_at) = match word.find('=') {
            Some(eq) => {
                if eq > MAX_ARG_NAME_LEN {
                    return Err(self.err(TpErr::ARG_NAME_TOO_LONG, 0));
                }
                if eq == 0 {
                    return Err(self.err(TpErr::NO_ARG_NAME, 0));
                }
                (word[..eq].to_string(), &word[eq + 1..], eq + 1)
            }
            None => {
                let end = word.find(':').unwrap_or(word.len());
                let n = &word[..end];
                let name = if good_name(n) {
                    n.to_string()
                } else {
                    format!("arg{}", i + 1)
                };
                (name, word, 0)
            }
        };
        if !good_name(&name) {
            return Err(self.err(TpErr::BAD_ARG_NAME, 0));
        }
        if RESERVED.contains(&name.as_str()) || used.contains(&name) {
            return Err(self.err(TpErr::USED_ARG_NAME, 0));
        }
        self.offset = body_at;
        if body.len() > MAX_ARGSTR_LEN {
            return Err(self.err(TpErr::ARG_TOO_LONG, body_at));
        }
        if body.is_empty() {
            return Err(self.err(TpErr::NO_ARG_BODY, body_at));
        }
        let (expr, ty) = match body.find(':') {
            Some(c) => (&body[..c], Some(&body[c + 1..])),
            None => (body, None),
        };
        if expr == "$comm" || expr == "$COMM" || expr.starts_with("\\\"") {
            return Ok((name, body.to_string(), body.to_string()));
        }
        let mut fetch = self.fetcharg(expr)?;
        let mut ty_out = ty.map(str::to_string);
        if let Some(mut last) = self.last {
            match ty {
                None => {
                    ty_out = self.fetch_type(&mut last);
                    if last.bitsize % 8 != 0 || last.bitoffs != 0 {
                        let base = ty_out.as_deref().map(type_bits).unwrap_or(64);
                        let c = if last.bitsize + last.bitoffs <= base {
                            base
                        } else {
                            64
                        };
                        ty_out = Some(format!("b{}@{}/{c}", last.bitsize, last.bitoffs));
                    }
                }
                Some(t) if t.contains("string") => {
                    let char_array =
                        matches!(last.kind, BtfKind::Array { elem, .. } if self.is_char(elem));
                    let char_ptr =
                        matches!(last.kind, BtfKind::Ptr { target } if self.is_char(target));
                    if char_ptr {
                        let d = if t.starts_with('u') { "+u0" } else { "+0" };
                        fetch = format!("{d}({fetch})");
                    } else if !char_array {
                        let tn = self.btf.map(|b| b.type_name(last.ty)).unwrap_or_default();
                        return Err(self.err_hint(
                            TpErr::BAD_TYPE4STR,
                            self.offset,
                            format!("{tn} is not a char pointer or char array"),
                        ));
                    }
                }
                Some(_) => {}
            }
            if !self.note.is_empty()
                && let Some(t) = &ty_out
            {
                let _ = write!(self.note, "; {t}");
            }
        }
        let classic = match &ty_out {
            Some(t) => format!("{fetch}:{t}"),
            None => fetch,
        };
        Ok((name, body.to_string(), classic))
    }
}

fn type_bits(t: &str) -> u32 {
    t[1..].parse().unwrap_or(64)
}

/// Whether `line` may use BTF syntax (a cheap test before loading BTF): a kprobe
/// definition with an argument that names something, uses `$arg`/`$retval`, or
/// `%pd`/`%pD`.
pub fn may_use_btf(line: &str) -> bool {
    let words = split_words(line);
    if words.len() < 3 || !matches!(words[0].as_bytes()[0], b'p' | b'r') {
        return false;
    }
    words[2..].iter().any(|w| {
        let body = w.split_once('=').map_or(w.as_str(), |(_, b)| b);
        let named = |s: &str| s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        named(body)
            || body.split('(').skip(1).any(named)
            || w.contains("$arg")
            || w.contains("$retval")
            || w.ends_with(":%pd")
            || w.ends_with(":%pD")
    })
}

/// Splits like the kernel's `argv_split()`.
fn split_words(line: &str) -> Vec<String> {
    line.split([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The byte offset of `path` inside `struct NAME` (`offsetof()`).
fn member_path(b: &dyn BtfTypes, name: &str, path: &[&str]) -> Option<u32> {
    let mut ty = b.find_struct(name)?;
    let mut bits = 0u32;
    for p in path {
        let (anon, m) = find_struct_member(b, ty, p)??;
        bits = bits.checked_add(anon)?.checked_add(m.bit_offset)?;
        ty = b.resolve(m.type_id)?.0;
    }
    Some(bits / 8)
}

/// Members one member search looks at, at most, anonymous ones' included
/// (the kernel's biggest structs, with everything nested in them, have a
/// few thousand).
pub const MEMBER_VISITS: usize = 1 << 16;

/// `btf_find_struct_member()`: named members first, then anonymous members from
/// a stack (last pushed first), accumulating their offsets. `None` when `ty` is
/// not a struct or union; `Some(None)` when it has no such member, or when
/// more than [`MEMBER_VISITS`] members were looked at (the kernel
/// trusts its BTF to have no anonymous member that contains its own struct;
/// a damaged file can, and the stack would never empty).
pub fn find_struct_member(
    b: &dyn BtfTypes,
    ty: TypeId,
    name: &str,
) -> Option<Option<(u32, BtfMember)>> {
    let mut members = b.members(ty)?;
    let mut stack: Vec<(TypeId, u32)> = Vec::new();
    let mut cur = 0u32;
    let mut visits = 0usize;
    loop {
        visits += members.len();
        if visits > MEMBER_VISITS {
            return Some(None);
        }
        for m in &members {
            if m.name.is_empty() {
                if let Some((tid, _)) = b.resolve(m.type_id)
                    && stack.len() < 32
                {
                    stack.push((tid, cur.saturating_add(m.bit_offset)));
                }
            } else if m.name == name {
                return Some(Some((cur, m.clone())));
            }
        }
        let Some((tid, off)) = stack.pop() else {
            return Some(None);
        };
        cur = off;
        members = b.members(tid)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, Offline, Target};

    /// Regression (fuzz target btf_args): `%return` alone as the probe
    /// point left an empty place, which was indexed.
    #[test]
    fn percent_return_alone_is_not_a_panic() {
        for line in ["p} %return", "r %return", "p %return x=%di", "p:e %return"] {
            let _ = compile(line, None, Target::new(Arch::X86_64), &Offline, false);
        }
    }

    /// A BTF that describes no function at all.
    struct NoFunctions;
    impl BtfTypes for NoFunctions {
        fn function(&self, _m: Option<&str>, _name: &str) -> Option<BtfFunc> {
            None
        }
        fn resolve(&self, _id: TypeId) -> Option<(TypeId, BtfKind)> {
            None
        }
        fn members(&self, _id: TypeId) -> Option<Vec<BtfMember>> {
            None
        }
        fn find_struct(&self, _name: &str) -> Option<TypeId> {
            None
        }
        fn type_name(&self, id: TypeId) -> String {
            format!("t{id}")
        }
    }

    /// Regression (issue 21 item 5): a module function that does not exist
    /// was blamed on "static or inlined functions often have none".
    #[test]
    fn a_module_function_that_does_not_exist_was_blamed_on_static_or_inlined() {
        let env = crate::Kallsyms::parse(
            "ffffffffc0001000 t ext4_file_open\t[ext4]\n\
             ffffffffc0002000 t ext4_file_read_iter\t[ext4]\n\
             ffffffff81000000 T vfs_read\n\
             ffffffff81000100 t static_helper\n",
        );
        let hint = |line: &str| {
            compile(
                line,
                Some(&NoFunctions),
                Target::new(Arch::X86_64),
                &env,
                false,
            )
            .unwrap_err()
            .hint
            .unwrap()
        };
        let h = hint("p ext4:ext4_fil_open file");
        assert!(
            h.starts_with("module ext4 has no function ext4_fil_open"),
            "{h}"
        );
        assert!(h.contains("did you mean ext4_file_open"), "{h}");
        assert!(!h.contains("static or inlined"), "{h}");
        let h = hint("p xfs:xfs_file_open file");
        assert!(h.starts_with("module xfs is not loaded"), "{h}");
        let h = hint("p no_such_function file");
        assert!(
            h.starts_with("this kernel has no function no_such_function"),
            "{h}"
        );
        // A function kallsyms has, BTF not: the old advice stays.
        let h = hint("p static_helper file");
        assert!(h.contains("static or inlined"), "{h}");
        // Nothing known of the symbols (offline without kallsyms): the same.
        let e = compile(
            "p ext4:nope file",
            Some(&NoFunctions),
            Target::new(Arch::X86_64),
            &Offline,
            false,
        )
        .unwrap_err();
        assert!(e.hint.unwrap().contains("static or inlined"));
        // A kernel that reads BTF names itself: a missing module function is
        // still named as missing, not as a spelling to drop the module from.
        let e = compile(
            "p ext4:ext4_fil_open file",
            Some(&NoFunctions),
            Target::new(Arch::X86_64),
            &env,
            true,
        )
        .unwrap_err();
        let h = e.hint.unwrap();
        assert!(h.starts_with("module ext4 has no function"), "{h}");
    }
}
