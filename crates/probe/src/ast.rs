//! The syntax tree of one probe definition, with byte spans into the command as the
//! kernel re-joins it (words separated by single spaces).
//!
//! Built by [`crate::parse`]; rendered back by [`crate::render`]. Holds what the kernel
//! keeps: for every argument both the parsed fetch and the argument text verbatim
//! (the kernel shows the verbatim text when `kprobe_events` is read back).

use crate::types::BaseType;

/// A byte range in the joined command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// Where a fetch argument reads its value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fetch {
    /// `%REG`.
    Reg(String),
    /// `$stackN`.
    Stack(u64),
    /// `$stack`.
    StackPtr,
    /// `$retval`.
    Retval,
    /// `$comm` (or `$COMM`).
    Comm,
    /// `$argN` (1-based, as written).
    Arg(u64),
    /// `$FIELD` of the attached event (event probes).
    Field(String),
    /// `@ADDR`.
    Mem(u64),
    /// `@+OFFSET` (uprobes: an offset in the probed file).
    FileOffset(i64),
    /// `@SYM[+|-offs]`, kept as written.
    Symbol(String),
    /// `\IMM`, as the value the kernel stores.
    Imm(u64),
    /// `\"string"`.
    ImmString(String),
    /// `[+|-][u]OFFS(FETCHARG)`.
    Deref {
        /// The offset added to the inner value before loading.
        offset: i64,
        /// `u`: dereference user-space memory.
        user: bool,
        /// The address expression.
        inner: Box<Fetch>,
    },
    /// A BTF variable of a kernel that reads BTF names itself: the probed
    /// function's parameter at its entry, a parameter's entry value in a
    /// return probe, or the typed return value; then one dereference per
    /// `->` (the byte offsets of the members it goes through).
    Btf {
        /// Where the value comes from.
        var: BtfVar,
        /// The member offsets, one dereference each.
        derefs: Vec<u64>,
    },
}

/// What a BTF variable reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BtfVar {
    /// Parameter N (0-based) at the function's entry (`FETCH_OP_ARG`).
    Param(u32),
    /// Parameter N's value at entry, kept for the return probe (`FETCH_OP_EDATA`).
    EntryParam(u32),
    /// The return value, typed from BTF.
    Retval,
    /// Not resolved: the target's BTF was not known to the check.
    Unknown,
}

/// `b<width>@<offset>/<container>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bitfield {
    /// Width in bits.
    pub width: u64,
    /// Offset of the lowest bit.
    pub offset: u64,
    /// Container size in bits.
    pub container: u32,
}

/// The resolved type of an argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArgType {
    /// Base type (bitfields resolve to their container's unsigned type).
    pub base: BaseType,
    /// Bitfield, if written as one.
    pub bitfield: Option<Bitfield>,
    /// Array length `[N]`, if any.
    pub count: Option<u32>,
    /// Whether the type was written out (otherwise the default applied).
    pub explicit: bool,
}

/// One fetch argument, `[NAME=]FETCHARG[:TYPE]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeArg {
    /// Field name (written, or the automatic `argN`).
    pub name: String,
    /// Whether the name was written.
    pub named: bool,
    /// The argument text after `NAME=` exactly as written (what readback shows).
    pub body: String,
    /// The fetch expression.
    pub fetch: Fetch,
    /// The type.
    pub ty: ArgType,
    /// Where the whole word sits in the command.
    pub span: Span,
    /// Byte offset of the value in the record's argument area.
    pub offset: u32,
}

/// Where a kprobe is placed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KprobePlace {
    /// `[MOD:]SYM[+offs]`.
    Symbol {
        /// The symbol, `MOD:SYM` included.
        symbol: String,
        /// Byte offset into it.
        offset: u64,
    },
    /// A raw kernel address.
    Address(u64),
}

/// What kind of definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `p`/`r` on a kernel place.
    Kprobe {
        /// Where.
        place: KprobePlace,
        /// `r` or `%return`.
        is_return: bool,
        /// `rN`: maxactive, 0 when not given.
        maxactive: u32,
        /// The maxactive a return probe reads back with: the written one, or the
        /// kernel's default `max(10, 2 * possible CPUs)`; `None` when unknown.
        shown_maxactive: Option<u32>,
    },
    /// `p`/`r` on `PATH:OFFSET`.
    Uprobe {
        /// The file path as written.
        path: String,
        /// Offset in the file.
        offset: u64,
        /// `(REF_CTR_OFFSET)`, 0 when absent.
        ref_ctr_offset: u64,
        /// `r` or `%return`.
        is_return: bool,
    },
    /// `e:` on `SYSTEM.EVENT`.
    Eprobe {
        /// Attached event's system.
        system: String,
        /// Attached event's name.
        event: String,
        /// The filter after `if`, re-joined with spaces.
        filter: Option<String>,
    },
}

impl ProbeKind {
    /// Whether this is a uprobe (`PATH:OFFSET`): it goes to `uprobe_events`.
    pub fn is_uprobe(&self) -> bool {
        matches!(self, ProbeKind::Uprobe { .. })
    }

    /// Whether this is a kprobe or kretprobe: it goes to `kprobe_events`.
    pub fn is_kprobe(&self) -> bool {
        matches!(self, ProbeKind::Kprobe { .. })
    }

    /// Whether this is a return probe (`r`, `rN` or `%return`).
    pub fn is_return(&self) -> bool {
        match self {
            ProbeKind::Kprobe { is_return, .. } | ProbeKind::Uprobe { is_return, .. } => *is_return,
            ProbeKind::Eprobe { .. } => false,
        }
    }
}

/// An accepted (or syntactically valid) probe definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProbeDef {
    /// Group (system) name.
    pub group: String,
    /// Event name.
    pub event: String,
    /// Whether the event name was generated by the kernel.
    pub auto_event: bool,
    /// The kind and place.
    pub kind: ProbeKind,
    /// Fetch arguments.
    pub args: Vec<ProbeArg>,
    /// Words beyond the 128th argument, which the kernel ignores.
    pub ignored_args: usize,
}

/// A removal command, `-:[GRP/]EVENT [ARGS]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoveDef {
    /// Group, if given.
    pub group: Option<String>,
    /// Event name, may be empty when a group is given (all events of the group).
    pub event: String,
    /// Further words (argument filter).
    pub args: Vec<String>,
}

/// An fprobe (`f`: a function's entry or exit through ftrace) or a tracepoint
/// probe (`t`: a tracepoint's raw arguments), kernels 6.5 and later.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FprobeDef {
    /// `t` (tracepoint) rather than `f`.
    pub tracepoint: bool,
    /// The function (`[MOD:]SYM`) or tracepoint name.
    pub symbol: String,
    /// `%return`.
    pub is_return: bool,
    /// `fN`: maxactive, 0 when not given.
    pub maxactive: u32,
    /// The event as a probe: group, event name, arguments (laid out and
    /// printed as a kprobe's at `symbol`).
    pub probe: ProbeDef,
}

/// A synthetic event (`s:[synthetic/]NAME TYPE FIELD[; TYPE FIELD]…`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SynthDef {
    /// Event name (the group is always `synthetic`).
    pub name: String,
    /// Fields as the kernel lists them: (type, name), an array's length moved
    /// to the type (`char comm[16]` is `("char[16]", "comm")`).
    pub fields: Vec<(String, String)>,
}

/// Any line the probe files accept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Definition {
    /// A probe to create.
    Probe(ProbeDef),
    /// Remove probes.
    Remove(RemoveDef),
    /// An fprobe or tracepoint probe to create (`dynamic_events` only).
    Fprobe(FprobeDef),
    /// A synthetic event to create (`dynamic_events` only).
    Synthetic(SynthDef),
    /// Nothing (blank or comment-only line).
    Empty,
}
