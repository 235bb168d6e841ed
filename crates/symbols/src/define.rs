//! One definition line's way to a checked probe, the same for every command
//! that creates probes and for `ktrace check`: text → names → check → code.
//!
//! The names come from a [`NameSource`] (the kernel's BTF today,
//! [`crate::route::Route`]; a second source, such as DWARF for user space,
//! plugs in the same way): either the kernel reads them itself
//! ([`NameSource::native`]) and the line is checked as written
//! ([`check_line`]), or they are compiled into the classic fetch language
//! ([`btfarg::compile`]) and the classic form is checked. A kprobe at
//! `SYM+OFF` is then checked against its function's code
//! ([`crate::code::check`], from the running kernel's memory or a vmlinux).

use ktrace_probe::btfarg::{self, Compiled, NameSource};
use ktrace_probe::{Checked, Environment, ProbeError, Target, check_line};

use crate::code;

/// A definition that made it through [`define`].
#[derive(Debug)]
pub struct Defined {
    /// The check of what is written: the line itself, or its classic form.
    pub checked: Checked,
    /// The classic form BTF names were compiled into, when any were.
    pub compiled_with_btf: Option<String>,
}

/// The names compiled: `None` when `line` names no BTF argument, else the
/// compiled line (with `names`' types for its function) or why it cannot be.
/// The code is not checked (see [`compiled`]).
pub fn compile(
    line: &str,
    target: Target,
    env: &dyn Environment,
    names: &mut dyn NameSource,
) -> Option<Result<Compiled, ProbeError>> {
    if !btfarg::may_use_btf(line) {
        return None;
    }
    let native = names.native();
    let types = names.types_for(line);
    Some(btfarg::compile(line, types, target, env, native))
}

/// [`compile`], then the code checks of an accepted classic form.
pub fn compiled(
    line: &str,
    target: Target,
    env: &dyn Environment,
    names: &mut dyn NameSource,
    source: &code::Source<'_>,
) -> Option<Result<Compiled, ProbeError>> {
    compile(line, target, env, names).map(|r| {
        r.map(|mut c| {
            if c.checked.accepted() {
                code::check(&mut c.checked, target, source);
            }
            c
        })
    })
}

/// The definition `line` as ktrace writes it for `target`: checked as
/// written where the kernel reads its names (or it names none), else
/// compiled with `names` and its classic form checked; then the code checks
/// with `source`. `Err` when the names cannot be compiled; a rejected check
/// is in [`Defined::checked`].
pub fn define(
    line: &str,
    target: Target,
    env: &dyn Environment,
    names: &mut dyn NameSource,
    source: &code::Source<'_>,
) -> Result<Defined, ProbeError> {
    let compiled = match names.native() {
        true => None,
        false => compiled(line, target, env, names, source),
    };
    match compiled {
        Some(c) => c.map(|c| Defined {
            compiled_with_btf: c.uses_btf.then_some(c.classic),
            checked: c.checked,
        }),
        None => {
            let mut checked = check_line(line, target, env);
            code::check(&mut checked, target, source);
            Ok(Defined {
                checked,
                compiled_with_btf: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ktrace_probe::btfarg::{BtfFunc, BtfKind, BtfMember, BtfTypes, TypeId};
    use ktrace_probe::{Arch, Offline, Unchecked};

    /// One function, `unsigned long vfs_read(unsigned long count)`.
    struct OneFunc;

    impl BtfTypes for OneFunc {
        fn function(&self, _: Option<&str>, name: &str) -> Option<BtfFunc> {
            (name == "vfs_read").then(|| BtfFunc {
                ret: 1,
                params: vec![("count".to_string(), 1)],
            })
        }
        fn resolve(&self, id: TypeId) -> Option<(TypeId, BtfKind)> {
            (id == 1).then_some((
                1,
                BtfKind::Int {
                    bits: 64,
                    signed: false,
                    offset: 0,
                },
            ))
        }
        fn members(&self, _: TypeId) -> Option<Vec<BtfMember>> {
            None
        }
        fn find_struct(&self, _: &str) -> Option<TypeId> {
            None
        }
        fn type_name(&self, _: TypeId) -> String {
            "unsigned long".to_string()
        }
        fn size_or_type(&self, id: TypeId) -> Option<u32> {
            (id == 1).then_some(8)
        }
    }

    struct Names(bool);

    impl NameSource for Names {
        fn native(&self) -> bool {
            self.0
        }
        fn types_for(&mut self, _: &str) -> Option<&dyn BtfTypes> {
            Some(&OneFunc)
        }
    }

    /// An `endbr64` then a 3-byte instruction: +4 is a boundary, +5 not.
    const CODE: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xe5, 0xc3];

    #[test]
    fn names_the_kernel_does_not_read_are_compiled_then_code_checked() {
        let t = Target::new(Arch::X86_64);
        let code = code::Source::Code(CODE);
        let line = "p:k/a vfs_read count";
        let d = define(line, t, &Offline, &mut Names(false), &code).unwrap();
        assert_eq!(
            d.compiled_with_btf.as_deref(),
            Some("p:k/a vfs_read count=%di:u64")
        );
        assert!(d.checked.accepted());
        let line = "r:k/a vfs_read+4 $retval";
        let d = define(line, t, &Offline, &mut Names(false), &code).unwrap();
        assert!(d.checked.accepted());
        assert!(!d.checked.unchecked.contains(&Unchecked::FunctionEntry));
        // no endbr64: +4 is no entry, and the code says so
        let code = code::Source::Code(&CODE[4..]);
        let d = define(line, t, &Offline, &mut Names(false), &code).unwrap();
        assert!(!d.checked.accepted());
    }

    #[test]
    fn names_the_kernel_reads_are_checked_as_written_then_code_checked() {
        let t = Target::new(Arch::X86_64);
        let code = code::Source::Code(CODE);
        let d = define("p:k/a vfs_read+5 %di", t, &Offline, &mut Names(true), &code).unwrap();
        assert_eq!(d.compiled_with_btf, None);
        assert!(!d.checked.accepted());
        let d = define("p:k/a vfs_read %di", t, &Offline, &mut Names(false), &code).unwrap();
        assert_eq!(d.compiled_with_btf, None);
        assert!(d.checked.accepted());
    }

    #[test]
    fn a_name_the_types_lack_is_refused() {
        let t = Target::new(Arch::X86_64);
        let code = code::Source::None("no code".to_string());
        let e = define("p:k/a vfs_read nope", t, &Offline, &mut Names(false), &code).unwrap_err();
        assert!(!e.message.is_empty());
    }
}
