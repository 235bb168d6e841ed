//! One definition line's way to a checked probe, the same for every command
//! that creates probes and for `ktrace check`: text → names → check → code.
//!
//! The names come from a [`NameSource`] (a kernel's BTF today, implemented
//! over ktrace-symbols' reader; a second source, such as DWARF for user
//! space, plugs in the same way): either the kernel reads them itself
//! ([`NameSource::native`]) and the line is checked as written, or they are
//! compiled into the classic fetch language ([`btfarg::compile`]) and the
//! classic form is checked. The function's code, for a kprobe at an offset,
//! comes from a [`CodeSource`] (the running kernel's memory or a vmlinux,
//! read by the caller). Pure code: every read is behind the two traits.

use crate::btfarg::{self, BtfTypes, Compiled};
use crate::env::Environment;
use crate::error::ProbeError;
use crate::parse::{Checked, Target, check_line};

/// Where the names of a definition's arguments come from.
pub trait NameSource {
    /// Whether the kernel reads these names itself: the line is then
    /// written (and checked) as it is.
    fn native(&self) -> bool;
    /// The types naming the arguments of the function `line` probes;
    /// `None` when none can be read.
    fn types_for(&mut self, line: &str) -> Option<&dyn BtfTypes>;
}

/// Where the code of a probed function comes from, for the checks of a
/// kprobe at `SYM+OFF` (instruction boundary, function entry).
pub trait CodeSource {
    /// Checks `checked`'s probe against its function's code, closing the
    /// items it could check; why the others stay open, when they do.
    fn check_code(&self, checked: &mut Checked, target: Target) -> Option<String>;
}

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
    code: &dyn CodeSource,
) -> Option<Result<Compiled, ProbeError>> {
    compile(line, target, env, names).map(|r| {
        r.map(|mut c| {
            if c.checked.accepted() {
                code.check_code(&mut c.checked, target);
            }
            c
        })
    })
}

/// The definition `line` as ktrace writes it for `target`: checked as
/// written where the kernel reads its names (or it names none), else
/// compiled with `names` and its classic form checked; then the code checks.
/// `Err` when the names cannot be compiled; a rejected check is in
/// [`Defined::checked`].
pub fn define(
    line: &str,
    target: Target,
    env: &dyn Environment,
    names: &mut dyn NameSource,
    code: &dyn CodeSource,
) -> Result<Defined, ProbeError> {
    let compiled = match names.native() {
        true => None,
        false => compiled(line, target, env, names, code),
    };
    match compiled {
        Some(c) => c.map(|c| Defined {
            compiled_with_btf: c.uses_btf.then_some(c.classic),
            checked: c.checked,
        }),
        None => {
            let mut checked = check_line(line, target, env);
            code.check_code(&mut checked, target);
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
    use crate::btfarg::{BtfFunc, BtfKind, BtfMember, TypeId};
    use crate::{Arch, Offline};

    /// One function, `vfs_read(unsigned long count)`.
    struct OneFunc;

    impl BtfTypes for OneFunc {
        fn function(&self, _: Option<&str>, name: &str) -> Option<BtfFunc> {
            (name == "vfs_read").then(|| BtfFunc {
                ret: 0,
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

    /// Counts the code checks it was asked for.
    struct Code(std::cell::Cell<usize>);

    impl CodeSource for Code {
        fn check_code(&self, _: &mut Checked, _: Target) -> Option<String> {
            self.0.set(self.0.get() + 1);
            None
        }
    }

    #[test]
    fn names_the_kernel_does_not_read_are_compiled_then_code_checked() {
        let code = Code(Default::default());
        let t = Target::new(Arch::X86_64);
        let d = define(
            "p:k/a vfs_read count",
            t,
            &Offline,
            &mut Names(false),
            &code,
        )
        .unwrap();
        assert!(d.checked.accepted());
        assert_eq!(
            d.compiled_with_btf.as_deref(),
            Some("p:k/a vfs_read count=%di:u64")
        );
        assert_eq!(code.0.get(), 1);
    }

    #[test]
    fn names_the_kernel_reads_are_checked_as_written() {
        let code = Code(Default::default());
        let t = Target::new(Arch::X86_64);
        let d = define("p:k/a vfs_read %di", t, &Offline, &mut Names(true), &code).unwrap();
        assert!(d.checked.accepted());
        assert_eq!(d.compiled_with_btf, None);
        assert_eq!(code.0.get(), 1);
    }

    #[test]
    fn a_name_the_types_lack_is_refused() {
        let code = Code(Default::default());
        let t = Target::new(Arch::X86_64);
        let e = define("p:k/a vfs_read nope", t, &Offline, &mut Names(false), &code).unwrap_err();
        assert!(!e.message.is_empty());
        assert_eq!(code.0.get(), 0);
    }
}
