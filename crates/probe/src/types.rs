//! The fetch types (`:u32`, `:string`, `:b4@3/8`, ...) and their layout in the event
//! record: size, signedness, `print fmt` conversion and the type name the `format`
//! file shows.
//!
//! Mirrors `probe_fetch_types[]` and `find_fetch_type()` in kernel/trace/trace_probe.c
//! (Linux 6.1). Parsing of the array suffix and bitfield bounds lives in
//! [`crate::parse`].

use crate::arch::Arch;
use crate::kernel::Features;
#[cfg(test)]
use crate::kernel::KernelVersion;
use crate::kstrtox::kstrtoul;

/// A base type of a fetch argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BaseType {
    /// u8, u16, u32, u64 (bits).
    U(u8),
    /// s8 .. s64.
    S(u8),
    /// x8 .. x64 (hexadecimal).
    X(u8),
    /// `symbol`: an address printed as `sym+off`.
    Symbol,
    /// `string`.
    String,
    /// `ustring`: a user-space string.
    UString,
    /// `symstr`: the symbol name of an address, as a string.
    SymStr,
    /// `char` (newer kernels).
    Char,
}

impl BaseType {
    /// The type name as written after `:`.
    pub fn name(self) -> String {
        match self {
            BaseType::U(b) => format!("u{b}"),
            BaseType::S(b) => format!("s{b}"),
            BaseType::X(b) => format!("x{b}"),
            BaseType::Symbol => "symbol".into(),
            BaseType::String => "string".into(),
            BaseType::UString => "ustring".into(),
            BaseType::SymStr => "symstr".into(),
            BaseType::Char => "char".into(),
        }
    }

    /// Whether the record holds a `__data_loc` string for it.
    pub fn is_string(self) -> bool {
        matches!(
            self,
            BaseType::String | BaseType::UString | BaseType::SymStr
        )
    }

    /// Bytes one value takes in the record.
    pub fn size(self, arch: Arch) -> u32 {
        match self {
            BaseType::U(b) | BaseType::S(b) | BaseType::X(b) => u32::from(b) / 8,
            BaseType::Symbol => arch.bits() / 8,
            BaseType::String | BaseType::UString | BaseType::SymStr => 4,
            BaseType::Char => 1,
        }
    }

    /// The `signed:` flag of its `format` field.
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            BaseType::S(_) | BaseType::String | BaseType::UString | BaseType::SymStr
        )
    }

    /// The type name in the `format` file.
    pub fn fmttype(self, arch: Arch) -> String {
        match self {
            BaseType::U(b) | BaseType::X(b) => format!("u{b}"),
            BaseType::S(b) => format!("s{b}"),
            BaseType::Symbol => format!("u{}", arch.bits()),
            BaseType::String | BaseType::UString | BaseType::SymStr => "__data_loc char[]".into(),
            BaseType::Char => "u8".into(),
        }
    }

    /// The conversion in the event's `print fmt`.
    pub fn print_fmt(self) -> &'static str {
        match self {
            BaseType::U(64) => "%Lu",
            BaseType::U(_) => "%u",
            BaseType::S(64) => "%Ld",
            BaseType::S(_) => "%d",
            BaseType::X(64) => "0x%Lx",
            BaseType::X(_) => "0x%x",
            BaseType::Symbol => "%pS",
            BaseType::String | BaseType::UString | BaseType::SymStr => "\\\"%s\\\"",
            BaseType::Char => "'%c'",
        }
    }

    /// The default type: `x64` or `x32` by word size.
    pub fn default_for(arch: Arch) -> BaseType {
        BaseType::X(arch.bits() as u8)
    }
}

/// `find_fetch_type()`: resolves a type name (without any `[N]`), bitfields to their
/// container's unsigned type. `None` means "Unknown type is specified".
pub fn find_fetch_type(name: &str, arch: Arch, f: Features) -> Option<BaseType> {
    if name.starts_with('b') {
        let slash = name.find('/')?;
        let bs = kstrtoul(&name[slash + 1..], 0, arch.bits()).ok()?;
        return match bs {
            8 | 16 | 32 | 64 => Some(BaseType::U(bs as u8)),
            _ => None,
        };
    }
    Some(match name {
        "string" => BaseType::String,
        "ustring" => BaseType::UString,
        "symstr" if f.symstr => BaseType::SymStr,
        "char" if f.char_type => BaseType::Char,
        "u8" => BaseType::U(8),
        "u16" => BaseType::U(16),
        "u32" => BaseType::U(32),
        "u64" => BaseType::U(64),
        "s8" => BaseType::S(8),
        "s16" => BaseType::S(16),
        "s32" => BaseType::S(32),
        "s64" => BaseType::S(64),
        "x8" => BaseType::X(8),
        "x16" => BaseType::X(16),
        "x32" => BaseType::X(32),
        "x64" => BaseType::X(64),
        "symbol" => BaseType::Symbol,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup() {
        let k = KernelVersion::DEFAULT;
        let a = Arch::X86_64;
        assert_eq!(find_fetch_type("u8", a, k.features()), Some(BaseType::U(8)));
        assert_eq!(
            find_fetch_type("b4@3/8", a, k.features()),
            Some(BaseType::U(8))
        );
        assert_eq!(
            find_fetch_type("b4@3/0x10", a, k.features()),
            Some(BaseType::U(16))
        );
        assert_eq!(find_fetch_type("b4@3/12", a, k.features()), None);
        assert_eq!(find_fetch_type("b4@3", a, k.features()), None);
        assert_eq!(
            find_fetch_type("symstr", a, k.features()),
            Some(BaseType::SymStr)
        );
        assert_eq!(
            find_fetch_type("symstr", a, KernelVersion::new(5, 10).features()),
            None
        );
        assert_eq!(find_fetch_type("char", a, k.features()), None);
        assert_eq!(find_fetch_type("int", a, k.features()), None);
        assert_eq!(find_fetch_type("U8", a, k.features()), None);
    }

    #[test]
    fn layout() {
        assert_eq!(BaseType::Symbol.size(Arch::Arm), 4);
        assert_eq!(BaseType::Symbol.fmttype(Arch::Arm64), "u64");
        assert_eq!(BaseType::X(32).fmttype(Arch::Arm64), "u32");
        assert!(BaseType::String.is_signed());
        assert!(!BaseType::X(8).is_signed());
        assert_eq!(BaseType::default_for(Arch::I386), BaseType::X(32));
    }
}
