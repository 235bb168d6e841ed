//! A reader for BTF, the kernel's compact type information
//! (`/sys/kernel/btf/vmlinux`, `/sys/kernel/btf/<module>`).
//!
//! Mirrors the layout in include/uapi/linux/btf.h and
//! Documentation/bpf/btf.rst: a header (`magic 0xeb9f`, version, flags,
//! hdr_len, then type and string section offsets/lengths relative to the end
//! of the header), a string section, and a type section of `struct btf_type`
//! records (`name_off`, `info` = vlen | kind << 24 | kind_flag << 31,
//! `size`/`type`) each followed by kind-specific data. Type ids start at 1
//! (0 is `void`) in section order.
//!
//! What it answers: struct/union member offsets (for `+OFF(%reg)` fetch
//! arguments), function parameter names and types (for `$argN`-style
//! conveniences), and the values of enum constants ([`enumerators`]: the
//! names a tracepoint's print fmt keeps when the kernel did not export
//! them with `TRACE_DEFINE_ENUM()`, such as `HRTIMER_MODE_ABS`). It does not read split (module) BTF on top of vmlinux,
//! and does not resolve BTF-ID relocations. Never panics on input: every
//! read is bounds-checked.

use std::collections::HashMap;

use crate::error::{Error, Result};

const MAGIC: u16 = 0xeb9f;

/// `BTF_KIND_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Kind {
    Int,
    Ptr,
    Array,
    Struct,
    Union,
    Enum,
    Fwd,
    Typedef,
    Volatile,
    Const,
    Restrict,
    Func,
    FuncProto,
    Var,
    Datasec,
    Float,
    DeclTag,
    TypeTag,
    Enum64,
}

impl Kind {
    fn from_raw(k: u32) -> Option<Kind> {
        use Kind::*;
        Some(match k {
            1 => Int,
            2 => Ptr,
            3 => Array,
            4 => Struct,
            5 => Union,
            6 => Enum,
            7 => Fwd,
            8 => Typedef,
            9 => Volatile,
            10 => Const,
            11 => Restrict,
            12 => Func,
            13 => FuncProto,
            14 => Var,
            15 => Datasec,
            16 => Float,
            17 => DeclTag,
            18 => TypeTag,
            19 => Enum64,
            _ => return None,
        })
    }
}

/// One member of a struct or union, or one parameter of a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// The name, as [`Btf::name`] spells it (empty for anonymous members).
    pub name_off: u32,
    /// The type id.
    pub type_id: u32,
    /// Offset in bits from the start of the aggregate (0 for parameters).
    pub bit_offset: u32,
    /// Bitfield size in bits, 0 for a normal member.
    pub bitfield_size: u32,
}

/// One type record. Its name and members are kept in the [`Btf`] it came
/// from ([`Btf::name`], [`Btf::members`]): a vmlinux BTF holds some 100,000
/// types and as many members, and a string or a vector each was most of a
/// command's start on a small board (and of its exit, freeing them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Type {
    /// The kind.
    pub kind: Kind,
    /// The name, as [`Btf::name`] spells it ("" for anonymous).
    pub name_off: u32,
    /// `size` for sized kinds (int, struct, union, enum, float, datasec).
    pub size: u32,
    /// `type` for reference kinds (ptr, typedef, const, func, var, ...),
    /// the element type for arrays, the return type for func protos.
    pub ref_id: u32,
    /// Array element count.
    pub nelems: u32,
    /// Where its members (struct/union) or parameters (func proto) start
    /// in [`Btf::members`]'s table; `vlen` of them.
    members_at: u32,
    /// For `Func`: the linkage (0 static, 1 global, 2 extern).
    pub vlen: u16,
    /// For `Int`: the raw `BTF_INT_*` word (encoding << 24 | offset << 16 | bits).
    pub int_data: u32,
}

/// A parsed BTF blob.
#[derive(Debug, Clone, Default)]
pub struct Btf {
    types: Vec<Type>,
    /// Every type's members, in type order ([`Type::members_at`]).
    members: Vec<Member>,
    /// The string section (split BTF: the base's, then its own, so that
    /// the blob's offsets index it as they are), as text: a section that
    /// is not UTF-8 has its bytes from 0x80 on read as `?` (names are C
    /// identifiers).
    strings: String,
    /// Ids of named types sorted by (name, id): one allocation, no hashing,
    /// built at the first question by name after [`NAME_SCANS`] scans (a
    /// one-line `ktrace check` asks one or two; the sort costs as much as
    /// some 60 scans, a tenth of a check's start).
    by_name: std::sync::OnceLock<Vec<u32>>,
    /// Questions by name answered by a scan.
    name_scans: crate::kallsyms::Tally,
}

/// The offset [`Btf::name`] reads as `void` (type 0 has no record).
const VOID_NAME: u32 = u32::MAX;

/// Questions by name a [`Btf`] answers by scanning its types before it
/// sorts their names.
const NAME_SCANS: u32 = 16;

fn u32_at(d: &[u8], at: usize, big: bool) -> Option<u32> {
    let b: [u8; 4] = d.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

fn cstr(strings: &[u8], off: u32) -> Option<String> {
    let rest = strings.get(off as usize..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The NUL-terminated string at `off` of a string section kept as text.
fn str_at(strings: &str, off: u32) -> Option<&str> {
    let rest = strings.get(off as usize..)?;
    Some(&rest[..rest.find('\0')?])
}

/// A string section as text: itself when it is UTF-8 (every offset the
/// types give is then checked to be a character boundary), else with each
/// byte from 0x80 on read as `?`, so that the offsets keep their meaning.
fn section_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes
            .iter()
            .map(|&b| if b < 0x80 { b as char } else { '?' })
            .collect(),
    }
}

impl Btf {
    /// Parses a BTF blob (either endianness).
    pub fn parse(data: &[u8]) -> Result<Btf> {
        Self::parse_on(data, None)
    }

    /// Parses split BTF (`/sys/kernel/btf/MODULE`) on top of its base
    /// (`/sys/kernel/btf/vmlinux`): the split blob's type ids continue after
    /// the base's, and its string offsets continue after the base's string
    /// section. The result holds the base's types and the module's.
    pub fn parse_split(base: &[u8], split: &[u8]) -> Result<Btf> {
        let base_btf = Self::parse_on(base, None)?;
        Self::parse_on(split, Some(base_btf))
    }

    /// The names of the functions (`BTF_KIND_FUNC`) a module's split BTF
    /// defines, read without parsing the base's types (its strings only, for
    /// the names the split blob takes from them): an index of which module
    /// has which function.
    pub fn split_function_names(base: &[u8], split: &[u8]) -> Result<Vec<String>> {
        let strings_only = Btf {
            strings: section_text(Self::sections(base)?.1),
            ..Btf::default()
        };
        let names = Self::parse_on(split, Some(strings_only))?;
        Ok(names
            .types
            .iter()
            .filter(|t| t.kind == Kind::Func)
            .map(|t| names.name(t.name_off).to_string())
            .collect())
    }

    /// The type and string sections of a blob, and its byte order.
    fn sections(data: &[u8]) -> Result<(&[u8], &[u8], bool)> {
        let err = |at: usize, reason: &str| Error::parse("btf", format!("byte {at}"), reason);
        let magic_le = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let big = match magic_le {
            Some(MAGIC) => false,
            Some(m) if m.swap_bytes() == MAGIC => true,
            _ => return Err(err(0, "bad magic (not btf)")),
        };
        let hdr_len = u32_at(data, 4, big).ok_or_else(|| err(4, "truncated header"))? as usize;
        let field = |i: usize| {
            u32_at(data, 8 + 4 * i, big).ok_or_else(|| err(8 + 4 * i, "truncated header"))
        };
        let (type_off, type_len, str_off, str_len) = (field(0)?, field(1)?, field(2)?, field(3)?);
        let section = |off: u32, len: u32, what: &str| {
            let start = hdr_len.checked_add(off as usize);
            let end = start.and_then(|s| s.checked_add(len as usize));
            match (start, end) {
                (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
                _ => Err(err(hdr_len, &format!("{what} section out of range"))),
            }
        };
        Ok((
            section(type_off, type_len, "type")?,
            section(str_off, str_len, "string")?,
            big,
        ))
    }

    fn parse_on(data: &[u8], base: Option<Btf>) -> Result<Btf> {
        let err = |at: usize, reason: &str| Error::parse("btf", format!("byte {at}"), reason);
        let (types_raw, strings, big) = Self::sections(data)?;
        let base = base.unwrap_or_else(|| Btf {
            types: vec![Type {
                kind: Kind::Int,
                name_off: VOID_NAME,
                size: 0,
                ref_id: 0,
                nelems: 0,
                members_at: 0,
                vlen: 0,
                int_data: 0,
            }],
            ..Btf::default()
        });
        let Btf {
            mut types,
            mut members,
            strings: mut all_strings,
            ..
        } = base;
        let base_len = all_strings.len();
        all_strings.push_str(&section_text(strings));
        // Every name must be a string of the sections (checked here, so
        // that `name` never meets a bad offset). When each section ends
        // with its NUL, as the kernel requires, any offset inside them
        // starts one: no search for its end (that search was a third of
        // the parse).
        let b = all_strings.as_bytes();
        let terminated = b.last() == Some(&0) && (base_len == 0 || b.get(base_len - 1) == Some(&0));
        let name = |off: u32, at: usize| {
            let found = if terminated {
                (off as usize) < all_strings.len() && all_strings.is_char_boundary(off as usize)
            } else {
                str_at(&all_strings, off).is_some()
            };
            match found {
                true => Ok(off),
                false => Err(err(at, "name offset out of range")),
            }
        };
        let mut at = 0usize;
        while at < types_raw.len() {
            let (t, next) = Self::parse_type(types_raw, at, big, &name, &mut members)?;
            at = next;
            types.push(t);
        }
        Ok(Btf {
            types,
            members,
            strings: all_strings,
            by_name: std::sync::OnceLock::new(),
            name_scans: Default::default(),
        })
    }

    /// The name at string offset `off` (a [`Type`]'s or [`Member`]'s).
    pub fn name(&self, off: u32) -> &str {
        if off == VOID_NAME {
            return "void";
        }
        str_at(&self.strings, off).unwrap_or_default()
    }

    /// The members of a struct or union, the parameters of a function
    /// prototype; none for other kinds.
    pub fn members(&self, t: &Type) -> &[Member] {
        match t.kind {
            Kind::Struct | Kind::Union | Kind::FuncProto => {
                let at = t.members_at as usize;
                self.members
                    .get(at..at + usize::from(t.vlen))
                    .unwrap_or_default()
            }
            _ => &[],
        }
    }

    /// One type record at byte `at` of the type section (`struct btf_type`
    /// and the data its kind appends): the type, and where the next record
    /// starts.
    fn parse_type(
        types_raw: &[u8],
        mut at: usize,
        big: bool,
        name: &dyn Fn(u32, usize) -> Result<u32>,
        members: &mut Vec<Member>,
    ) -> Result<(Type, usize)> {
        let err = |at: usize, reason: &str| Error::parse("btf", format!("byte {at}"), reason);
        let rd =
            |at: usize| u32_at(types_raw, at, big).ok_or_else(|| err(at, "truncated type record"));
        let name_off = rd(at)?;
        let info = rd(at + 4)?;
        let size_or_type = rd(at + 8)?;
        let vlen = (info & 0xffff) as usize;
        let kind_flag = info >> 31 != 0;
        let kind = Kind::from_raw((info >> 24) & 0x1f).ok_or_else(|| err(at, "unknown kind"))?;
        let mut t = Type {
            kind,
            name_off: name(name_off, at)?,
            size: 0,
            ref_id: 0,
            nelems: 0,
            members_at: members.len() as u32,
            vlen: vlen as u16,
            int_data: 0,
        };
        let body = at + 12;
        at = body;
        match kind {
            Kind::Int => {
                t.size = size_or_type;
                t.int_data = rd(body)?;
                at += 4;
            }
            Kind::Float => t.size = size_or_type,
            Kind::Ptr
            | Kind::Fwd
            | Kind::Typedef
            | Kind::Volatile
            | Kind::Const
            | Kind::Restrict
            | Kind::Func
            | Kind::TypeTag => t.ref_id = size_or_type,
            Kind::Var | Kind::DeclTag => {
                t.ref_id = size_or_type;
                at += 4;
            }
            Kind::Array => {
                t.ref_id = rd(body)?;
                t.nelems = rd(body + 8)?;
                at += 12;
            }
            Kind::Struct | Kind::Union => {
                t.size = size_or_type;
                for i in 0..vlen {
                    let m = body + i * 12;
                    let off = rd(m + 8)?;
                    let (bit_offset, bitfield_size) = if kind_flag {
                        (off & 0xff_ffff, off >> 24)
                    } else {
                        (off, 0)
                    };
                    members.push(Member {
                        name_off: name(rd(m)?, m)?,
                        type_id: rd(m + 4)?,
                        bit_offset,
                        bitfield_size,
                    });
                }
                at += vlen * 12;
            }
            Kind::Enum => {
                t.size = size_or_type;
                at += vlen * 8;
            }
            Kind::Enum64 => {
                t.size = size_or_type;
                at += vlen * 12;
            }
            Kind::FuncProto => {
                t.ref_id = size_or_type;
                for i in 0..vlen {
                    let m = body + i * 8;
                    members.push(Member {
                        name_off: name(rd(m)?, m)?,
                        type_id: rd(m + 4)?,
                        bit_offset: 0,
                        bitfield_size: 0,
                    });
                }
                at += vlen * 8;
            }
            Kind::Datasec => {
                t.size = size_or_type;
                at += vlen * 12;
            }
        }
        if at > types_raw.len() {
            return Err(err(body, "type record runs past the type section"));
        }
        Ok((t, at))
    }

    /// The number of types, `void` included.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether only `void` is present.
    pub fn is_empty(&self) -> bool {
        self.types.len() <= 1
    }

    /// The type with this id.
    pub fn get(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// The first type of this kind and name.
    pub fn find(&self, kind: Kind, name: &str) -> Option<(u32, &Type)> {
        self.named(name)
            .iter()
            .map(|&id| (id, &self.types[id as usize]))
            .find(|(_, t)| t.kind == kind)
    }

    /// The ids of the types named `name`, in id order.
    fn named(&self, name: &str) -> std::borrow::Cow<'_, [u32]> {
        let is_named = |t: &Type| {
            let at = t.name_off as usize;
            let b = self.strings.as_bytes();
            t.name_off != VOID_NAME
                && b.get(at..at + name.len()) == Some(name.as_bytes())
                && b.get(at + name.len()) == Some(&0)
        };
        if name.is_empty() {
            return std::borrow::Cow::Borrowed(&[]);
        }
        let named_types = self.types.get(1..).unwrap_or_default();
        if self.by_name.get().is_none() && self.name_scans.next() < NAME_SCANS {
            return (1u32..)
                .zip(named_types)
                .filter(|(_, t)| is_named(t))
                .map(|(id, _)| id)
                .collect();
        }
        let index = self.by_name.get_or_init(|| {
            crate::names::sorted_ids(
                (1u32..)
                    .zip(named_types)
                    .map(|(id, t)| (id, self.name(t.name_off)))
                    .filter(|(_, n)| !n.is_empty()),
            )
        });
        let name_of = |id: u32| self.name(self.types[id as usize].name_off);
        let from = index.partition_point(|&id| name_of(id) < name);
        let len = index[from..].partition_point(|&id| name_of(id) == name);
        std::borrow::Cow::Borrowed(&index[from..from + len])
    }

    /// The last type of this kind and name (a module's own type over vmlinux's
    /// in split BTF).
    pub fn find_last(&self, kind: Kind, name: &str) -> Option<(u32, &Type)> {
        self.named(name)
            .iter()
            .rev()
            .map(|&id| (id, &self.types[id as usize]))
            .find(|(_, t)| t.kind == kind)
    }

    /// Skips typedefs and qualifiers.
    pub fn resolve(&self, mut id: u32) -> Option<(u32, &Type)> {
        for _ in 0..64 {
            let t = self.get(id)?;
            match t.kind {
                Kind::Typedef | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag => {
                    id = t.ref_id
                }
                _ => return Some((id, t)),
            }
        }
        None
    }

    /// The byte offset and type of `path` (`a.b.c`) inside `struct NAME` (or
    /// union), descending into nested and anonymous members.
    pub fn member_offset(&self, aggregate: &str, path: &str) -> Option<(u32, Member)> {
        let (mut id, _) = self
            .find(Kind::Struct, aggregate)
            .or_else(|| self.find(Kind::Union, aggregate))?;
        let mut bits = 0u32;
        let mut last = None;
        for part in path.split('.') {
            let mut budget = MEMBER_SEARCH_BUDGET;
            let (bit, m) = self.find_member(id, part, 0, &mut budget)?;
            bits = bits.checked_add(bit)?;
            id = m.type_id;
            last = Some(m);
        }
        let mut m = last?;
        m.bit_offset = bits;
        Some((bits / 8, m))
    }

    /// `budget`: members left to look at; a damaged file whose anonymous
    /// members lead back to their struct would otherwise be searched
    /// exponentially long.
    fn find_member(
        &self,
        id: u32,
        name: &str,
        depth: u32,
        budget: &mut usize,
    ) -> Option<(u32, Member)> {
        if depth > 16 {
            return None;
        }
        let (_, t) = self.resolve(id)?;
        if !matches!(t.kind, Kind::Struct | Kind::Union) {
            return None;
        }
        let members = self.members(t);
        *budget = budget.checked_sub(members.len())?;
        for m in members {
            let m_name = self.name(m.name_off);
            if m_name == name {
                return Some((m.bit_offset, *m));
            }
            if m_name.is_empty()
                && let Some((b, inner)) = self.find_member(m.type_id, name, depth + 1, budget)
            {
                return Some((m.bit_offset.checked_add(b)?, inner));
            }
        }
        None
    }

    /// A C-like spelling of a type (`const char *`, `struct file *`,
    /// `unsigned int[4]`).
    pub fn type_name(&self, id: u32) -> String {
        self.type_name_depth(id, 0)
    }

    fn type_name_depth(&self, id: u32, depth: u32) -> String {
        if depth > 32 {
            return "...".to_string();
        }
        let Some(t) = self.get(id) else {
            return format!("<bad type {id}>");
        };
        if id == 0 {
            return "void".to_string();
        }
        let inner = |r: u32| self.type_name_depth(r, depth + 1);
        match t.kind {
            Kind::Int | Kind::Float | Kind::Typedef => self.name(t.name_off).to_string(),
            Kind::Struct => format!("struct {}", self.name(t.name_off)),
            Kind::Union => format!("union {}", self.name(t.name_off)),
            Kind::Enum | Kind::Enum64 => format!("enum {}", self.name(t.name_off)),
            Kind::Fwd => format!("struct {}", self.name(t.name_off)),
            Kind::Ptr => match self.get(t.ref_id).map(|r| r.kind) {
                Some(Kind::FuncProto) => "void (*)()".to_string(),
                _ => format!("{} *", inner(t.ref_id)),
            },
            Kind::Const => format!("const {}", inner(t.ref_id)),
            Kind::Volatile => format!("volatile {}", inner(t.ref_id)),
            Kind::Restrict => format!("{} restrict", inner(t.ref_id)),
            Kind::TypeTag => inner(t.ref_id),
            Kind::Array => format!("{}[{}]", inner(t.ref_id), t.nelems),
            Kind::FuncProto => "function".to_string(),
            Kind::Func | Kind::Var | Kind::Datasec | Kind::DeclTag => {
                self.name(t.name_off).to_string()
            }
        }
    }

    /// A function's return type and parameters (name, type spelling).
    pub fn func_params(&self, func: &str) -> Option<(String, Vec<(String, String)>)> {
        let (_, f) = self.find(Kind::Func, func)?;
        let proto = self.get(f.ref_id).filter(|p| p.kind == Kind::FuncProto)?;
        Some((
            self.type_name(proto.ref_id),
            self.members(proto)
                .iter()
                .map(|m| (self.name(m.name_off).to_string(), self.type_name(m.type_id)))
                .collect(),
        ))
    }
}

/// Members one member search may look at, those of nested anonymous structs
/// and unions included (the kernel's biggest structs have a few thousand).
const MEMBER_SEARCH_BUDGET: usize = 1 << 16;

/// Reads and parses a BTF file (the only I/O in this module, with
/// [`open_enumerators`]).
pub fn open(path: &std::path::Path) -> Result<Btf> {
    Btf::parse(&crate::read_table(path)?)
}

/// The enum constants of a BTF file by name (see [`enumerators`]).
pub fn open_enumerators(path: &std::path::Path) -> Result<HashMap<String, i64>> {
    enumerators(&crate::read_table(path)?)
}

/// Every enum constant of a BTF blob and its value (`BTF_KIND_ENUM`
/// values are signed when the kind flag says so, `BTF_KIND_ENUM64` ones
/// 64-bit), the first of a name when two enums share one. Walks the type
/// section without building the types: a vmlinux BTF holds tens of
/// thousands of records, and only these are wanted.
pub fn enumerators(data: &[u8]) -> Result<HashMap<String, i64>> {
    let err = |at: usize, reason: &str| Error::parse("btf", format!("byte {at}"), reason);
    let (types, strings, big) = Btf::sections(data)?;
    let rd = |at: usize| u32_at(types, at, big).ok_or_else(|| err(at, "truncated type record"));
    let mut out = HashMap::new();
    let mut at = 0usize;
    while at < types.len() {
        let info = rd(at + 4)?;
        let vlen = (info & 0xffff) as usize;
        let signed = info >> 31 != 0;
        let kind = Kind::from_raw((info >> 24) & 0x1f).ok_or_else(|| err(at, "unknown kind"))?;
        let body = at + 12;
        let (each, fixed) = match kind {
            Kind::Int | Kind::Var | Kind::DeclTag => (0, 4),
            Kind::Array => (0, 12),
            Kind::Struct | Kind::Union | Kind::Datasec | Kind::Enum64 => (12, 0),
            Kind::Enum | Kind::FuncProto => (8, 0),
            _ => (0, 0),
        };
        if matches!(kind, Kind::Enum | Kind::Enum64) {
            for i in 0..vlen {
                let m = body + i * each;
                let Some(name) = cstr(strings, rd(m)?) else {
                    return Err(err(m, "name offset out of range"));
                };
                let lo = rd(m + 4)?;
                let v = match kind {
                    Kind::Enum64 => (u64::from(rd(m + 8)?) << 32 | u64::from(lo)) as i64,
                    _ if signed => i64::from(lo as i32),
                    _ => i64::from(lo),
                };
                out.entry(name).or_insert(v);
            }
        }
        at = body + fixed + vlen * each;
        if at > types.len() {
            return Err(err(body, "type record runs past the type section"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a little-endian BTF blob from (name, info, size_or_type, extra words).
    fn blob(strings: &[u8], types: &[(u32, u32, u32, Vec<u32>)]) -> Vec<u8> {
        let mut t = Vec::new();
        for (n, info, st, extra) in types {
            for w in [*n, *info, *st].iter().chain(extra) {
                t.extend_from_slice(&w.to_le_bytes());
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&24u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        out.extend(t);
        out.extend_from_slice(strings);
        out
    }

    fn info(kind: u32, vlen: u32, flag: bool) -> u32 {
        vlen | kind << 24 | (flag as u32) << 31
    }

    // strings: 0 "", 1 "int", 5 "how", 9 "flags", 15 "mode", 20 "f", 22 "char", 27 "name", 32 "u"
    const STR: &[u8] = b"\0int\0how\0flags\0mode\0f\0char\0name\0u\0";

    fn sample() -> Vec<u8> {
        blob(
            STR,
            &[
                (1, info(1, 0, false), 4, vec![32]),       // 1 int
                (22, info(1, 0, false), 1, vec![8]),       // 2 char
                (0, info(10, 0, false), 2, vec![]),        // 3 const char
                (0, info(2, 0, false), 3, vec![]),         // 4 const char *
                (0, info(4, 1, false), 4, vec![15, 1, 0]), // 5 anon struct { int mode; }
                (5, info(4, 3, false), 16, vec![9, 1, 0, 0, 5, 32, 27, 4, 64]), // 6 struct how
                (0, info(2, 0, false), 6, vec![]),         // 7 struct how *
                (0, info(13, 2, false), 1, vec![27, 4, 5, 7]), // 8 int (const char *name, struct how *how)
                (20, info(12, 0, false) | 1, 8, vec![]),       // 9 func f
                (32, info(4, 1, true), 4, vec![9, 1, (3 << 24) | 5]), // 10 struct u { int flags:3 @5 }
            ],
        )
    }

    #[test]
    fn members_params_and_names() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.len(), 11);
        let (off, m) = btf.member_offset("how", "flags").unwrap();
        assert_eq!((off, btf.type_name(m.type_id).as_str()), (0, "int"));
        // Through the anonymous struct at bit 32.
        assert_eq!(btf.member_offset("how", "mode").unwrap().0, 4);
        assert_eq!(btf.member_offset("how", "name").unwrap().0, 8);
        assert!(btf.member_offset("how", "nosuch").is_none());
        let (_, m) = btf.member_offset("u", "flags").unwrap();
        assert_eq!((m.bit_offset, m.bitfield_size), (5, 3));
        let (ret, params) = btf.func_params("f").unwrap();
        assert_eq!(ret, "int");
        assert_eq!(
            params,
            vec![
                ("name".to_string(), "const char *".to_string()),
                ("how".to_string(), "struct how *".to_string())
            ]
        );
    }

    /// Enum constants among other records, signed (kind flag), unsigned
    /// and 64-bit; a truncated blob is an error, not a panic.
    #[test]
    fn enum_constants_by_name() {
        // strings: 0 "", 1 "A", 3 "B", 5 "C", 7 "D", 9 "e"
        let strs = b"\0A\0B\0C\0D\0e\0";
        let b = blob(
            strs,
            &[
                (0, info(1, 0, false), 4, vec![32]),                     // int
                (9, info(6, 2, true), 4, vec![1, 0, 3, (-2i32) as u32]), // enum e { A, B = -2 }
                (0, info(4, 1, false), 4, vec![1, 1, 0]),                // struct { int A; }
                (0, info(6, 1, false), 4, vec![5, 0x8000_0000]),         // enum { C = 1u << 31 }
                (0, info(19, 1, false), 8, vec![7, 1, 2]), // enum64 { D = 2 << 32 | 1 }
            ],
        );
        let e = enumerators(&b).unwrap();
        assert_eq!(e.get("A"), Some(&0));
        assert_eq!(e.get("B"), Some(&-2));
        assert_eq!(e.get("C"), Some(&0x8000_0000));
        assert_eq!(e.get("D"), Some(&(2 << 32 | 1)));
        assert_eq!(e.len(), 4);
        for n in 0..b.len() {
            let _ = enumerators(&b[..n]);
        }
    }

    #[test]
    fn split_btf_continues_ids_and_strings() {
        // A module's split BTF: its type ids start after the base's 10 types,
        // its name offsets after the base's string section.
        let base_len = STR.len() as u32;
        let split_str = b"\0modf\0";
        let split = blob(
            split_str,
            &[
                // 11: pointer to the base's struct how (id 6)
                (0, info(2, 0, false), 6, vec![]),
                // 12: int (struct how *p), param name "how" from the base strings
                (0, info(13, 1, false), 1, vec![5, 11]),
                // 13: func modf, a name in the split strings
                (base_len + 1, info(12, 0, false) | 1, 12, vec![]),
            ],
        );
        let btf = Btf::parse_split(&sample(), &split).unwrap();
        assert_eq!(btf.len(), 14);
        let (ret, params) = btf.func_params("modf").unwrap();
        assert_eq!(ret, "int");
        assert_eq!(
            params,
            vec![("how".to_string(), "struct how *".to_string())]
        );
        // A string offset past both sections is an error, not a panic.
        let mut bad = split.clone();
        let at = 24 + 12 + 12; // type 12's parameter name offset
        bad[at..at + 4].copy_from_slice(&(base_len + 99).to_le_bytes());
        assert!(Btf::parse_split(&sample(), &bad).is_err());
    }

    /// Runs `f` on a thread; a result later than `secs` fails the test (a
    /// hang becomes a failure).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .expect("hung: no result in time")
    }

    /// A struct whose anonymous members are the struct itself (a cycle no
    /// compiler writes, but a damaged or hostile file can): the member
    /// search descended into every anonymous member to depth 16, 65535^17
    /// visits for a name that is not there. Now the search has a budget.
    #[test]
    fn anonymous_member_cycles_end() {
        // strings: 0 "", 1 "x", 3 "int"
        let anon: Vec<u32> = (0..0xffff).flat_map(|i| [0, 1, i * 32]).collect();
        let data = blob(
            b"\0x\0int\0",
            &[
                (1, info(4, 0xffff, false), 32, anon), // 1 struct x { struct x; x 65535 }
                (3, info(1, 0, false), 4, vec![32]),   // 2 int
            ],
        );
        let btf = Btf::parse(&data).unwrap();
        let b2 = btf.clone();
        let found = within(20, move || b2.member_offset("x", "nosuch"));
        assert!(found.is_none());
        // the BTF-argument compiler's walk (the kernel's
        // btf_find_struct_member(), a stack of anonymous members) went round
        // the cycle forever
        let found = within(20, move || {
            ktrace_probe::btfarg::find_struct_member(&btf, 1, "nosuch")
        });
        assert_eq!(found, Some(None));
    }

    /// The first questions by name scan the types, the later ones ask the
    /// sorted index: both answer with the same ids, in id order (names
    /// repeat across kinds, and a prefix is not a name).
    #[test]
    fn scans_and_the_name_index_answer_alike() {
        let data = blob(
            STR,
            &[
                (1, info(1, 0, false), 4, vec![32]), // 1 int
                (5, info(4, 0, false), 0, vec![]),   // 2 struct how {}
                (5, info(8, 0, false), 2, vec![]),   // 3 typedef struct how how
                (20, info(7, 0, false), 0, vec![]),  // 4 struct f;
                (5, info(5, 0, false), 0, vec![]),   // 5 union how {}
                (0, info(2, 0, false), 1, vec![]),   // 6 int *
            ],
        );
        let btf = Btf::parse(&data).unwrap();
        let names = ["how", "int", "f", "ho", "hows", "", "void", "nosuch"];
        let ask = |btf: &Btf| -> Vec<Vec<u32>> {
            names.iter().map(|n| btf.named(n).into_owned()).collect()
        };
        let scanned = ask(&btf);
        assert!(btf.by_name.get().is_none(), "the first questions scan");
        assert_eq!(scanned[0], vec![2, 3, 5]);
        assert_eq!(scanned[1], vec![1]);
        assert!(scanned[3..].iter().all(Vec::is_empty), "{scanned:?}");
        while btf.by_name.get().is_none() {
            btf.named("int");
        }
        assert_eq!(ask(&btf), scanned);
        assert_eq!(btf.find(Kind::Union, "how").map(|(id, _)| id), Some(5));
        assert_eq!(
            btf.find_last(Kind::Struct, "how").map(|(id, _)| id),
            Some(2)
        );
        // a default (empty) BTF answers nothing, without a panic
        assert!(Btf::default().find(Kind::Struct, "how").is_none());
    }

    /// A string section that is not UTF-8 keeps its offsets (its bytes from
    /// 0x80 on read as `?`); an offset inside a UTF-8 character is out of
    /// range, not a panic.
    #[test]
    fn names_that_are_not_plain_text() {
        let btf = Btf::parse(&blob(
            b"\0in\xfft\0",
            &[(1, info(1, 0, false), 4, vec![32])],
        ))
        .unwrap();
        assert_eq!(btf.name(btf.get(1).unwrap().name_off), "in?t");
        let mid_char = blob(
            "\0\u{e9}t\0".as_bytes(),
            &[(2, info(1, 0, false), 4, vec![32])],
        );
        assert!(Btf::parse(&mid_char).is_err());
        let whole = blob(
            "\0\u{e9}t\0".as_bytes(),
            &[(1, info(1, 0, false), 4, vec![32])],
        );
        let btf = Btf::parse(&whole).unwrap();
        assert_eq!(btf.name(btf.get(1).unwrap().name_off), "\u{e9}t");
        assert_eq!(btf.name(btf.get(0).unwrap().name_off), "void");
    }

    #[test]
    fn damaged_blobs_error() {
        let good = sample();
        for cut in [0, 3, 10, 30, good.len() - STR.len() - 3] {
            assert!(Btf::parse(&good[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = good.clone();
        bad[24 + 4 + 3] = 0x1f; // kind 31 in the first record
        assert!(Btf::parse(&bad).is_err());
        let mut bad = good.clone();
        bad[24..28].copy_from_slice(&0xffffu32.to_le_bytes()); // name offset out of range
        assert!(Btf::parse(&bad).is_err());
    }
}
