//! [`ktrace_probe::btfarg::BtfTypes`] over this crate's BTF reader: what the BTF
//! argument compiler asks of a kernel's BTF (function prototypes, types with
//! typedefs and qualifiers skipped, struct members), answered from a parsed
//! [`Btf`] — vmlinux alone, or vmlinux plus one module's split BTF
//! ([`Btf::parse_split`]).
//!
//! Mirrors `btf_type_skip_modifiers()`, `btf_find_func_proto()` and the member
//! walk of kernel/bpf/btf.c as trace_probe.c uses them. No I/O here: see
//! [`open_kernel`] for reading /sys/kernel/btf.

use std::path::Path;

use ktrace_probe::btfarg::{BtfFunc, BtfKind, BtfMember, BtfTypes, TypeId};

use crate::btf::{Btf, Kind};
use crate::error::Result;

/// `BTF_INT_SIGNED`.
const INT_SIGNED: u32 = 1;

impl BtfTypes for Btf {
    fn function(&self, _module: Option<&str>, name: &str) -> Option<BtfFunc> {
        // A module's split BTF is parsed on top of vmlinux, so one lookup covers
        // both; the module's own function wins when names repeat.
        let (_, f) = self.find_last(Kind::Func, name)?;
        let (_, proto) = self.resolve(f.ref_id)?;
        if proto.kind != Kind::FuncProto {
            return None;
        }
        Some(BtfFunc {
            ret: proto.ref_id,
            params: proto
                .members
                .iter()
                .map(|m| (m.name.clone(), m.type_id))
                .collect(),
        })
    }

    fn resolve(&self, id: TypeId) -> Option<(TypeId, BtfKind)> {
        if id == 0 {
            return Some((0, BtfKind::Void));
        }
        let (rid, t) = Btf::resolve(self, id)?;
        if rid == 0 {
            return Some((0, BtfKind::Void));
        }
        let kind = match t.kind {
            Kind::Int => BtfKind::Int {
                bits: t.int_data & 0xff,
                signed: (t.int_data >> 24) & INT_SIGNED != 0,
                offset: (t.int_data >> 16) & 0xff,
            },
            Kind::Ptr => BtfKind::Ptr { target: t.ref_id },
            Kind::Array => BtfKind::Array {
                elem: t.ref_id,
                len: t.nelems,
            },
            Kind::Struct => BtfKind::Struct,
            Kind::Union => BtfKind::Union,
            Kind::Enum => BtfKind::Enum,
            Kind::Enum64 => BtfKind::Enum64,
            _ => BtfKind::Other,
        };
        Some((rid, kind))
    }

    fn members(&self, id: TypeId) -> Option<Vec<BtfMember>> {
        let t = self.get(id)?;
        if !matches!(t.kind, Kind::Struct | Kind::Union) {
            return None;
        }
        Some(
            t.members
                .iter()
                .map(|m| BtfMember {
                    name: m.name.clone(),
                    bit_offset: m.bit_offset,
                    bitfield_size: m.bitfield_size,
                    type_id: m.type_id,
                })
                .collect(),
        )
    }

    fn find_struct(&self, name: &str) -> Option<TypeId> {
        self.find(Kind::Struct, name).map(|(id, _)| id)
    }

    fn type_name(&self, id: TypeId) -> String {
        Btf::type_name(self, id)
    }
}

/// Where the kernel publishes its BTF.
pub const SYSFS_BTF: &str = "/sys/kernel/btf";

/// Reads the kernel's BTF from `dir` (`/sys/kernel/btf` or a copy of it): vmlinux,
/// plus `module`'s split BTF on top when given.
pub fn open_kernel(dir: &Path, module: Option<&str>) -> Result<Btf> {
    let vmlinux = dir.join("vmlinux");
    let base = crate::read_table(&vmlinux)?;
    match module {
        None => Btf::parse(&base),
        Some(m) => {
            let path = dir.join(m);
            let split = crate::read_table(&path)?;
            Btf::parse_split(&base, &split)
        }
    }
}
