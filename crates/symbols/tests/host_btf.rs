//! Host test: our BTF reader against bpftool's raw dump of the running
//! kernel's /sys/kernel/btf/vmlinux — every type's kind and name, every
//! struct/union member's name and bit offset, every function prototype's
//! parameter names. Skips loudly without the file or bpftool.

use std::path::Path;
use std::process::Command;

use ktrace_symbols::btf::{self, Kind};

#[test]
fn vmlinux_btf_matches_bpftool() {
    let path = Path::new(ktrace_symbols::kernel::VMLINUX_BTF);
    if !path.exists() {
        return eprintln!("SKIP: no {}", path.display());
    }
    let Ok(out) = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(path)
        .args(["format", "raw"])
        .output()
    else {
        return eprintln!("SKIP: bpftool not installed (apt-get install bpftool)");
    };
    assert!(out.status.success());
    let dump = String::from_utf8_lossy(&out.stdout).into_owned();
    let btf = btf::open(path).unwrap();
    let mut types = 0;
    let mut members = 0;
    let mut current: Option<(u32, usize)> = None; // (type id, member index)
    for line in dump.lines() {
        if let Some(rest) = line.strip_prefix('[') {
            // [ID] KIND 'name' ...
            let (id, rest) = rest.split_once("] ").unwrap();
            let id: u32 = id.parse().unwrap();
            let (kind, rest) = rest.split_once(' ').unwrap();
            let name = rest.split('\'').nth(1).unwrap();
            let t = btf.get(id).unwrap_or_else(|| panic!("no type {id}"));
            let want = match kind {
                "INT" => Kind::Int,
                "PTR" => Kind::Ptr,
                "ARRAY" => Kind::Array,
                "STRUCT" => Kind::Struct,
                "UNION" => Kind::Union,
                "ENUM" => Kind::Enum,
                "FWD" => Kind::Fwd,
                "TYPEDEF" => Kind::Typedef,
                "VOLATILE" => Kind::Volatile,
                "CONST" => Kind::Const,
                "RESTRICT" => Kind::Restrict,
                "FUNC" => Kind::Func,
                "FUNC_PROTO" => Kind::FuncProto,
                "VAR" => Kind::Var,
                "DATASEC" => Kind::Datasec,
                "FLOAT" => Kind::Float,
                "DECL_TAG" => Kind::DeclTag,
                "TYPE_TAG" => Kind::TypeTag,
                "ENUM64" => Kind::Enum64,
                other => panic!("unknown kind {other}"),
            };
            assert_eq!(t.kind, want, "type {id}");
            let ours = match btf.name(t.name_off) {
                "" => "(anon)",
                n => n,
            };
            assert_eq!(ours, name, "type {id}");
            types += 1;
            current =
                matches!(want, Kind::Struct | Kind::Union | Kind::FuncProto).then_some((id, 0));
        } else if let Some((id, i)) = current.as_mut() {
            // \t'name' type_id=N [bits_offset=B [bitfield_size=S]]
            let t = btf.get(*id).unwrap();
            let m = &btf.members(t)[*i];
            let name = line.split('\'').nth(1).unwrap();
            assert_eq!(
                match btf.name(m.name_off) {
                    "" => "(anon)",
                    n => n,
                },
                name,
                "type {id} member {i}"
            );
            let field = |k: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .map(|v| v.parse::<u32>().unwrap())
            };
            assert_eq!(
                Some(m.type_id),
                field("type_id="),
                "type {id} member {name}"
            );
            if t.kind != Kind::FuncProto {
                assert_eq!(
                    Some(m.bit_offset),
                    field("bits_offset="),
                    "type {id} member {name}"
                );
                assert_eq!(
                    m.bitfield_size,
                    field("bitfield_size=").unwrap_or(0),
                    "type {id} member {name}"
                );
            }
            *i += 1;
            members += 1;
        }
    }
    eprintln!("bpftool and ktrace agree on {types} types and {members} members/parameters");
    assert_eq!(types + 1, btf.len());
    // The conveniences on top.
    let (ret, params) = btf.func_params("do_sys_openat2").unwrap();
    eprintln!("do_sys_openat2: {ret} ({params:?})");
    assert_eq!(params.len(), 3);
    let (off, _) = btf.member_offset("open_how", "mode").unwrap();
    assert_eq!(off, 8);
}
