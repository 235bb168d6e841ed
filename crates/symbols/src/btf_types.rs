//! [`ktrace_probe::btfarg::BtfTypes`] over this crate's BTF reader: what the BTF
//! argument compiler asks of a kernel's BTF (function prototypes, types with
//! typedefs and qualifiers skipped, struct members), answered from a parsed
//! [`Btf`] — vmlinux alone, or vmlinux plus one module's split BTF
//! ([`Btf::parse_split`]).
//!
//! Mirrors `btf_type_skip_modifiers()`, `btf_find_func_proto()` and the member
//! walk of kernel/bpf/btf.c as trace_probe.c uses them. No I/O here: see
//! [`open_kernel`] for reading /sys/kernel/btf
//! ([`crate::kernel::SYSFS_BTF`]).

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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
            params: self
                .members(proto)
                .iter()
                .map(|m| (self.name(m.name_off).to_string(), m.type_id))
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

    fn size_or_type(&self, id: TypeId) -> Option<u32> {
        let t = self.get(id)?;
        Some(match t.kind {
            Kind::Int
            | Kind::Struct
            | Kind::Union
            | Kind::Enum
            | Kind::Enum64
            | Kind::Float
            | Kind::Datasec => t.size,
            Kind::Array => 0,
            _ => t.ref_id,
        })
    }

    fn members(&self, id: TypeId) -> Option<Vec<BtfMember>> {
        let t = self.get(id)?;
        if !matches!(t.kind, Kind::Struct | Kind::Union) {
            return None;
        }
        Some(
            Btf::members(self, t)
                .iter()
                .map(|m| BtfMember {
                    name: self.name(m.name_off).to_string(),
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

/// Reads the kernel's BTF from `dir` (`/sys/kernel/btf` or a copy of it): vmlinux,
/// plus `module`'s split BTF on top when given.
/// A module without BTF there is refused before vmlinux's (megabytes) is
/// read: the checker asks for every `MOD:` a definition names.
pub fn open_kernel(dir: &Path, module: Option<&str>) -> Result<Btf> {
    let split = module
        .map(|m| crate::read_table(&dir.join(m)))
        .transpose()?;
    let base = crate::read_table(&dir.join("vmlinux"))?;
    match split {
        None => Btf::parse(&base),
        Some(split) => Btf::parse_split(&base, &split),
    }
}

/// The running kernel's BTF as `btf_find_func_proto()` searches it: vmlinux
/// first, then every loaded module's split BTF, by the function's name as
/// written. Blobs are read when first needed, each once; modules are indexed
/// by the functions they define without parsing them, and only the module
/// that has the function asked for is parsed whole.
pub struct KernelBtf {
    dir: PathBuf,
    base: OnceCell<Option<(Vec<u8>, Btf)>>,
    index: OnceCell<HashMap<String, usize>>,
    modules: Vec<(String, OnceCell<Option<Btf>>)>,
}

impl KernelBtf {
    /// The BTF under `dir` (`/sys/kernel/btf`, or a copy holding `vmlinux`
    /// and module blobs); `None` when there is no `vmlinux` there.
    pub fn open(dir: &Path) -> Option<KernelBtf> {
        if !dir.join("vmlinux").is_file() {
            return None;
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n != "vmlinux")
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Some(KernelBtf {
            dir: dir.to_path_buf(),
            base: OnceCell::new(),
            index: OnceCell::new(),
            modules: names.into_iter().map(|n| (n, OnceCell::new())).collect(),
        })
    }

    /// The running kernel's BTF ([`crate::kernel::SYSFS_BTF`]); `None`
    /// without `vmlinux` there.
    pub fn running() -> Option<KernelBtf> {
        Self::open(Path::new(crate::kernel::SYSFS_BTF))
    }

    /// A single BTF file (`--btf FILE`, a copy of a target's vmlinux BTF),
    /// with the module blobs beside it when there are any. An error when it
    /// cannot be read (a device, a directory, past the table limit) or is
    /// not BTF.
    pub fn open_file(file: &Path) -> crate::Result<KernelBtf> {
        let dir = file.parent().unwrap_or(Path::new("."));
        let mut k = KernelBtf {
            dir: dir.to_path_buf(),
            base: OnceCell::new(),
            index: OnceCell::new(),
            modules: Vec::new(),
        };
        let data = crate::read_table(file)?;
        let btf = Btf::parse(&data)
            .map_err(|e| crate::Error::Code(format!("{}: not BTF: {e}", file.display())))?;
        let _ = k.base.set(Some((data, btf)));
        k.dir = dir.to_path_buf();
        Ok(k)
    }

    fn base(&self) -> Option<&(Vec<u8>, Btf)> {
        self.base
            .get_or_init(|| {
                let data = crate::read_table(&self.dir.join("vmlinux")).ok()?;
                let btf = Btf::parse(&data).ok()?;
                Some((data, btf))
            })
            .as_ref()
    }

    /// vmlinux's BTF.
    pub fn vmlinux(&self) -> Option<&Btf> {
        self.base().map(|(_, b)| b)
    }

    /// Module `name`'s split BTF on top of vmlinux's.
    pub fn module(&self, name: &str) -> Option<&Btf> {
        let i = self.modules.iter().position(|(n, _)| n == name)?;
        self.module_at(i)
    }

    fn module_at(&self, i: usize) -> Option<&Btf> {
        let (name, cell) = &self.modules[i];
        cell.get_or_init(|| {
            let (base, _) = self.base()?;
            let split = crate::read_table(&self.dir.join(name)).ok()?;
            Btf::parse_split(base, &split).ok()
        })
        .as_ref()
    }

    fn index(&self) -> &HashMap<String, usize> {
        self.index.get_or_init(|| {
            let mut map = HashMap::new();
            let Some((base, _)) = self.base() else {
                return map;
            };
            for (i, (name, _)) in self.modules.iter().enumerate() {
                let Ok(split) = crate::read_table(&self.dir.join(name)) else {
                    continue;
                };
                for f in Btf::split_function_names(base, &split).unwrap_or_default() {
                    map.entry(f).or_insert(i);
                }
            }
            map
        })
    }

    /// `btf_find_func_proto()`: the prototype of `name` and the BTF holding
    /// its types; `None` when vmlinux's BTF cannot be read, `Some(None)` when
    /// no BTF defines the function.
    #[allow(clippy::type_complexity)]
    pub fn function(&self, name: &str) -> Option<Option<(&dyn BtfTypes, BtfFunc)>> {
        let vmlinux = self.vmlinux()?;
        if let Some(f) = first_function(vmlinux, name) {
            return Some(Some((vmlinux as &dyn BtfTypes, f)));
        }
        let Some(&i) = self.index().get(name) else {
            return Some(None);
        };
        let module = self.module_at(i)?;
        Some(BtfTypes::function(module, None, name).map(|f| (module as &dyn BtfTypes, f)))
    }
}

/// The first function named `name` (the kernel's lookup order in vmlinux).
fn first_function(btf: &Btf, name: &str) -> Option<BtfFunc> {
    let (_, f) = btf.find(Kind::Func, name)?;
    let (_, proto) = btf.resolve(f.ref_id)?;
    if proto.kind != Kind::FuncProto {
        return None;
    }
    Some(BtfFunc {
        ret: proto.ref_id,
        params: btf
            .members(proto)
            .iter()
            .map(|m| (btf.name(m.name_off).to_string(), m.type_id))
            .collect(),
    })
}
