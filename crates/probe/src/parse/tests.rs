//! Table tests of whole definition lines through [`super::check_line`].

use super::*;
use crate::env::{Kallsyms, Offline};

fn check(line: &str) -> Checked {
    check_line(line, Target::new(Arch::X86_64), &Offline)
}

fn err(line: &str, target: Target, env: &dyn Environment) -> (ErrorKind, Option<usize>) {
    let e = check_line(line, target, env).definition.unwrap_err();
    (e.kind, e.pos)
}

#[test]
fn newlines_and_nul_never_pass_other_control_characters_read_as_the_kernel() {
    for l in ["p foo\n-:someone_else", "p vfs_read\0"] {
        let c = check(l);
        assert_eq!(
            c.definition.unwrap_err().kind,
            ErrorKind::Silent(Silent::ControlChar),
            "{l:?}"
        );
    }
    // argv_split() splits at isspace(): \t, \v, \f and \r separate words
    // like a space; other control bytes are part of a word (a symbol
    // with ESC or DEL in it is no symbol; a line starting with DEL is no
    // kind of event: x86_64 7.2 logged "No matching dynamic event type").
    assert!(check("p\tvfs_read").accepted());
    assert!(check("p vfs_read\r").accepted());
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    let e = check_line("\x7fp vfs_read", t, &Offline)
        .definition
        .unwrap_err();
    assert_eq!(e.message, "No matching dynamic event type");
    assert!(check("p vfs\x1b[0m").accepted());
}

#[test]
fn pd_offsets_of_the_64_bit_6_12_and_7_2_builds() {
    // conform seed 7: x86_64 6.12 read `%ip:%pD` back with +0x48, the
    // offset of struct file's f_path.dentry (not the +0x40 guessed)
    for (arch, reg) in [(Arch::X86_64, "%ip"), (Arch::Arm64, "%lr")] {
        for k in [KernelVersion::new(6, 12), KernelVersion::new(7, 2)] {
            let mut t = Target::new(arch);
            t.kernel = k;
            let c = check_line(&format!("p:g/e vfs_read {reg}:%pD"), t, &Offline);
            assert_eq!(
                c.normalized(arch).as_deref(),
                Some(format!("p:g/e vfs_read arg1=+0x0(+0x28(+0x48({reg}))):string").as_str()),
                "{arch:?} {k:?}"
            );
        }
    }
}

#[test]
fn arg_star_without_btf_args_follows_the_6_12_backport() {
    // 32-bit arm has no BTF arguments. Debian's arm 6.12.95 (corpus
    // fixtures) leaves `$arg*` to the classic parser ("Invalid
    // $-valiable"); 6.12.117 (CI's conform run, seed 1 index 1562) scans
    // the `$arg` words first and refuses `$arg*` at the last of them.
    let at = |sub: u32, line: &str| {
        let mut t = Target::new(Arch::Arm);
        t.kernel = KernelVersion::with_sublevel(6, 12, sub);
        let e = check_line(line, t, &Offline).definition.unwrap_err();
        (e.message, e.pos)
    };
    let line = "p:ev vfs_read $arg1 x $arg*";
    assert_eq!(at(95, line).0, "Invalid $-valiable specified");
    assert_eq!(
        at(117, line),
        ("BTF is not available or not supported", Some(22))
    );
    assert_eq!(
        at(117, "r:ev vfs_read $arg0 a=\\0 $arg*").0,
        "BTF is not available or not supported"
    );
}

#[test]
fn comments_blank_lines_and_spacing() {
    assert!(matches!(check("").definition, Ok(Definition::Empty)));
    assert!(matches!(
        check("   # only a comment").definition,
        Ok(Definition::Empty)
    ));
    let c = check("  p   vfs_read   %di  # comment");
    assert_eq!(c.command, "p vfs_read %di");
    assert_eq!(
        c.normalized(Arch::X86_64).as_deref(),
        Some("p:kprobes/p_vfs_read_0 vfs_read arg1=%di")
    );
    let long = format!("p vfs_read {}", "x".repeat(MAX_LINE_LEN));
    assert_eq!(
        check(&long).definition.unwrap_err().kind,
        ErrorKind::Silent(Silent::LineTooLong)
    );
}

#[test]
fn removals() {
    for (l, ok) in [
        ("-:myev", true),
        ("-:grp/myev", true),
        ("-:grp/", true),
        ("-:", false),
        ("-myev", false),
        ("-:grp/ev arg1=%di", true),
    ] {
        assert_eq!(check(l).accepted(), ok, "{l}");
    }
    // 5.10 takes no group without an event (EINVAL, nothing logged)
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(5, 10);
    assert_eq!(
        err("-:grp/", t, &Offline).0,
        ErrorKind::Silent(Silent::BadRemove)
    );
    assert!(check_line("-:grp/ev", t, &Offline).accepted());
    match check("-:grp/ev x").definition {
        Ok(Definition::Remove(r)) => {
            assert_eq!((r.group.as_deref(), r.event.as_str()), (Some("grp"), "ev"));
            assert_eq!(r.args, vec!["x"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn dispatch_by_file() {
    let mut t = Target::new(Arch::X86_64);
    t.interface = Interface::KprobeEvents;
    assert_eq!(
        err("p /bin/ls:0x10", t, &Offline),
        (ErrorKind::Silent(Silent::WrongFile), None)
    );
    assert_eq!(
        err("e sched.sched_switch", t, &Offline).0,
        ErrorKind::Silent(Silent::WrongFile)
    );
    t.interface = Interface::UprobeEvents;
    assert_eq!(
        err("p vfs_read", t, &Offline).0,
        ErrorKind::Silent(Silent::WrongFile)
    );
    // uprobe_events has no maxactive: the digits are ignored with the name.
    assert!(check_line("r2 /bin/ls:0x10", t, &Offline).accepted());
    // dynamic_events asks the kprobe parser first, which rejects the digits.
    t.interface = Interface::DynamicEvents;
    assert_eq!(
        err("p2 /bin/ls:0x10", t, &Offline),
        (ErrorKind::Logged(TpErr::MAXACT_NO_KPROBE), Some(1))
    );
    assert_eq!(
        err("x vfs_read", t, &Offline).0,
        ErrorKind::Silent(Silent::NotAProbe)
    );
    assert_eq!(
        err("p:only", t, &Offline).0,
        ErrorKind::Silent(Silent::NotAProbe)
    );
    // Synthetic events are checked as trace_events_synth.c takes them
    // (arm-7.2 corpus).
    let c = check_line("s:syn int x; char comm[16]", t, &Offline);
    assert_eq!(
        c.normalized(Arch::X86_64).as_deref(),
        Some("s:synthetic/syn\tint x; char[16] comm")
    );
    assert_eq!(
        err("s:syn no_type x", t, &Offline),
        (ErrorKind::Logged(TpErr::SYNTH_INVALID_TYPE), Some(6))
    );
}

#[test]
fn kallsyms_decides_symbols() {
    let k = Kallsyms::parse(
        "ffffffff81000000 T vfs_read\nffffffff81000100 t name_show\nffffffff81000200 t name_show\n\
         ffffffff81000300 D jiffies\nffffffffc0000000 t ext4_sync_fs\t[ext4]\n",
    );
    let t = Target::new(Arch::X86_64);
    let ok = |l: &str| check_line(l, t, &k).accepted();
    assert!(ok("p vfs_read @jiffies"));
    assert!(ok("p ext4:ext4_sync_fs"));
    assert!(
        ok("p xfs:xfs_foo"),
        "a module that is not loaded defers the probe"
    );
    let logged = |e| ErrorKind::Logged(e);
    assert_eq!(
        err("p nope", t, &k),
        (logged(TpErr::BAD_PROBE_ADDR), Some(2))
    );
    assert_eq!(
        err("p name_show", t, &k),
        (logged(TpErr::NON_UNIQ_SYMBOL), Some(2))
    );
    assert_eq!(
        err("p ext4:nope", t, &k),
        (logged(TpErr::BAD_PROBE_ADDR), Some(2))
    );
    assert_eq!(
        err("p vfs_read @nope", t, &k),
        (logged(TpErr::BAD_PROBE_ADDR), Some(2))
    );
    assert_eq!(
        err("p vfs_read @jiffies+x", t, &k),
        (logged(TpErr::FAIL_REG_PROBE), Some(2))
    );
    let c = check_line("p vfs_read", t, &k);
    assert!(!c.unchecked.contains(&Unchecked::SymbolExists));
    let c = check_line("p vfs_read", t, &Offline);
    assert!(c.unchecked.contains(&Unchecked::SymbolExists));
}

#[test]
fn a_loaded_modules_symbol_is_counted_with_its_mapping_symbols() {
    // arm 7.2 with romfs loaded (conform seed 258342346): `p romfs:$d`
    // and `r romfs:$a%return` are "The symbol is not unique" first, its
    // mapping symbols counted like any other; 6.1 counts no `MOD:SYM`.
    let k = Kallsyms::parse(
        "c0008000 T vfs_read\nbf000000 t $a\t[romfs]\nbf000010 t romfs_fill\t[romfs]\n\
         bf000040 t $d\t[romfs]\nbf000050 t $a\t[romfs]\nbf000080 t $d\t[romfs]\n\
         bf000100 t romfs_once\t[romfs]\n",
    );
    let at = |kernel| Target {
        kernel,
        ..Target::new(Arch::Arm)
    };
    let logged = |e| ErrorKind::Logged(e);
    for kernel in [KernelVersion::new(6, 12), KernelVersion::new(7, 2)] {
        let t = at(kernel);
        for l in [
            "p romfs:$d",
            "p romfs:$a+4",
            "r romfs:$a",
            "p:e romfs:$d a=%r0",
        ] {
            assert_eq!(
                err(l, t, &k).0,
                logged(TpErr::NON_UNIQ_SYMBOL),
                "{kernel:?} {l}"
            );
        }
        assert_eq!(
            err("p romfs:nosuch", t, &k),
            (logged(TpErr::BAD_PROBE_ADDR), Some(2)),
            "{kernel:?}"
        );
        assert!(check_line("p romfs:romfs_fill", t, &k).accepted());
        assert!(check_line("p nosuchmod:$d", t, &k).accepted(), "deferred");
    }
    let t = at(KernelVersion::new(6, 1));
    assert_ne!(
        check_line("p romfs:$d", t, &k)
            .definition
            .err()
            .map(|e| e.kind),
        Some(logged(TpErr::NON_UNIQ_SYMBOL))
    );
}

#[test]
fn a_probe_that_waits_for_its_module_is_refused_by_nothing() {
    // arm64 7.2, seed 168729981 #1391: kallsyms lists `kprobe_insn_page`
    // under the pseudo-module `__builtin__kprobes`; no module has that
    // name, so the kernel defers the probe and takes the line
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(name == "kprobe_insn_page"))
        }
        fn module_symbol_count(&self, _: &str, _: &str) -> Option<Option<usize>> {
            Some(None)
        }
        fn kprobe_refusal(&self, _: &str, _: u64) -> Option<Option<crate::env::Refusal>> {
            Some(Some(crate::env::Refusal::Notrace("blacklisted".into())))
        }
    }
    let t = Target {
        kernel: KernelVersion::new(7, 2),
        ..Target::new(Arch::Arm64)
    };
    for l in [
        "p:ev.x __builtin__kprobes:kprobe_insn_page%return $stack",
        "p __builtin__kprobes:kprobe_insn_page",
    ] {
        let c = check_line(l, t, &Env);
        assert!(c.accepted(), "{l}: {:?}", c.definition.err());
    }
    // loaded or core, the same refusal stands
    assert!(!check_line("p kprobe_insn_page", t, &Env).accepted());
}

#[test]
fn module_symbol_starting_with_a_digit_waits_for_its_module() {
    // arm 6.12, seed 41: the kernel took the symbol (a module that is not
    // loaded defers it) and refused the immediate string's bitfield type.
    let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
    for kernel in [
        KernelVersion::new(5, 10),
        KernelVersion::new(6, 1),
        KernelVersion::new(6, 12),
        KernelVersion::new(7, 2),
    ] {
        let t = Target {
            kernel,
            ..Target::new(Arch::X86_64)
        };
        assert!(
            check_line("p 0xc045c364[=\\:symstr", t, &k).accepted(),
            "{kernel:?}"
        );
        assert!(
            check_line("p 1mod:vfs_read", t, &k).accepted(),
            "{kernel:?}"
        );
    }
    let t = Target {
        kernel: KernelVersion::new(6, 12),
        ..Target::new(Arch::Arm)
    };
    let l = r#"p:grp82/ 0xc045c364[=\:symstr a1=\"1234567":b26@38/64"#;
    assert_eq!(
        err(l, t, &k),
        (ErrorKind::Logged(TpErr::COMM_NOT_STRING), Some(44))
    );
}

#[test]
fn empty_symbol_is_no_symbol() {
    // Found by fuzzing: "%return" alone left an empty symbol that was accepted.
    let t = Target::new(Arch::X86_64);
    // Also found by fuzzing: "0+000" is not a number, so it is a symbol "0".
    for l in ["p %return", "r -0", "p -0%return", "p 0+000", "p 0xzz"] {
        assert_eq!(
            err(l, t, &Offline),
            (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(2)),
            "{l}"
        );
    }
}

#[test]
fn argument_limits() {
    let args: Vec<String> = (0..130).map(|i| format!("a{i}=%di:u8")).collect();
    let c = check(&format!("p vfs_read {}", args.join(" ")));
    match c.definition {
        Ok(Definition::Probe(p)) => assert_eq!((p.args.len(), p.ignored_args), (128, 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(
            "p vfs_read %di arg1=%si",
            Target::new(Arch::X86_64),
            &Offline
        ),
        (ErrorKind::Logged(TpErr::USED_ARG_NAME), Some(15))
    );
}

#[test]
fn arg_numbers_need_a_function_entry() {
    let t = Target::new(Arch::Arm64);
    assert!(check_line("p vfs_read $arg1 $arg8", t, &Offline).accepted());
    for l in ["r vfs_read $arg1", "p vfs_read+8 $arg1", "p 0x1000 $arg1"] {
        assert_eq!(
            err(l, t, &Offline).0,
            ErrorKind::Logged(TpErr::BAD_VAR),
            "{l}"
        );
    }
    // 32-bit arm has no $argN at all.
    let t = Target::new(Arch::Arm);
    assert_eq!(
        err("p vfs_read $arg1", t, &Offline).0,
        ErrorKind::Logged(TpErr::BAD_VAR)
    );
}

#[test]
fn arm64_offsets_are_word_aligned() {
    let t = Target::new(Arch::Arm64);
    assert_eq!(
        err("p vfs_read+2", t, &Offline),
        (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(2))
    );
    assert!(check_line("p vfs_read+8", t, &Offline).accepted());
}

#[test]
fn an_eprobe_argument_symbol_fails_before_later_arguments_parse() {
    // x86_64 6.1, conform seed 23: the kernel resolves `@SYM` as each
    // argument is parsed, so `@no_such_fn` fails (nothing logged)
    // before the bad bitfield of the next argument is read.
    let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
    let t = Target::new(Arch::X86_64);
    let line = "e:grp/ev ext4.ext4_evict_inode +0(@no_such_fn) $nlink:b43@14/128";
    assert!(matches!(err(line, t, &k).0, ErrorKind::Silent(_)));
    // the other way round the bitfield is reported
    let line = "e:grp/ev ext4.ext4_evict_inode $nlink:b43@14/128 +0(@no_such_fn)";
    assert_eq!(err(line, t, &k).0, ErrorKind::Logged(TpErr::BAD_TYPE));
    let line = "e:grp/ev ext4.ext4_evict_inode +0(@vfs_read) $nlink:b43@14/128";
    assert_eq!(err(line, t, &k).0, ErrorKind::Logged(TpErr::BAD_TYPE));
}

#[test]
fn a_tracepoint_to_come_does_not_resolve_its_arguments_symbols() {
    let k = Kallsyms::parse("ffffffff81000000 T __probestub_sched_switch\n");
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    assert!(check_line("t sys_exit_llistxattr foo=@pa[am_set:u64", t, &k).accepted());
    // 7.2 resolves no argument symbol before the probe is enabled
    // (x86_64 7.2: `t:a2 sched_switch @nosuchsym_x` taken, its enable
    // refused); 6.12 resolves them when the probe is created
    assert!(check_line("t sched_switch foo=@pa[am_set:u64", t, &k).accepted());
    t.kernel = KernelVersion::new(6, 12);
    assert!(!check_line("t sched_switch foo=@pa[am_set:u64", t, &k).accepted());
}

#[test]
fn address_zero_fails_to_register_unless_an_argument_symbol_makes_it_wait() {
    // x86_64 7.2, seed 59: `r:ev29611 0` refused ("Failed to register
    // probe event" at the address), as `p:addrev 0` in every corpus;
    // with kallsyms known, 0 is in no symbol, which made it wait
    let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
    for kernel in [KernelVersion::new(5, 10), KernelVersion::new(7, 2)] {
        let mut t = Target::new(Arch::X86_64);
        t.kernel = kernel;
        for line in ["r:ev29611 0", "p:addrev 0x0", "p 0 a=%ax"] {
            for env in [&Offline as &dyn Environment, &k] {
                let (kind, pos) = err(line, t, env);
                assert_eq!(
                    (kind, pos),
                    (
                        ErrorKind::Logged(TpErr::FAIL_REG_PROBE),
                        line.find(" 0").map(|p| p + 1)
                    ),
                    "{line} {kernel:?}"
                );
            }
        }
        // an argument's missing symbol fails first with -ENOENT, which a
        // probe without a symbol takes as a module to come
        assert!(
            check_line("p:ev 0 @no_such_sym_x", t, &k).accepted(),
            "{kernel:?}"
        );
    }
}

#[test]
fn a_tracepoint_whose_probestub_is_notrace_fails_to_register() {
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(
                name.contains("cpu_frequency") || name.contains("sched_switch"),
            ))
        }
        fn ftrace_matches(&self, pattern: &str) -> Option<bool> {
            Some(pattern == "__probestub_sched_switch")
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 12);
    let c = check_line("t:ev.x cpu_frequency", t, &Env);
    let e = c.definition.unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(7))
    );
    assert!(check_line("t:ev.y sched_switch", t, &Env).accepted());
    // 7.2 attaches it only when enabled (seed 23: taken)
    t.kernel = KernelVersion::new(7, 2);
    assert!(check_line("t:ev.x cpu_frequency", t, &Env).accepted());
}

#[test]
fn a_tracepoint_probe_named_as_an_existing_event_is_refused() {
    // x86_64 7.2, seed 23: `t:sched/ sched_stat_iowait` is named
    // sched/sched_stat_iowait, the tracepoint's own event.
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(name.contains("sched_stat_iowait")))
        }
        fn ftrace_matches(&self, _: &str) -> Option<bool> {
            Some(true)
        }
        fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
            Some((group, event) == ("sched", "sched_stat_iowait"))
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    let e = check_line("t:sched/ sched_stat_iowait a19=+0($arg10)", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::EVENT_EXIST), Some(0))
    );
    assert!(check_line("t:mine/ sched_stat_iowait", t, &Env).accepted());
    assert!(
        check_line("f:sched/sched_stat_iowait vfs_read", t, &Env)
            .definition
            .is_err()
    );
}

#[test]
fn fprobe_argument_symbols_are_resolved_only_where_registered_at_creation() {
    // arm64 7.2, seed 23: `f gnet_stats_copy_queue @update_wall_tie`
    // taken (the fprobe registers when enabled); 6.12 resolves it.
    let k = Kallsyms::parse("ffffffff81000000 T gnet_stats_copy_queue\n");
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    assert!(check_line("f gnet_stats_copy_queue @update_wall_tie", t, &k).accepted());
    t.kernel = KernelVersion::new(6, 12);
    assert!(!check_line("f gnet_stats_copy_queue @update_wall_tie", t, &k).accepted());
}

#[test]
fn automatic_names_make_a_star_an_underscore_where_the_kernel_does() {
    // 7.2 and 6.12.117: `f kbd*` is fprobes/kbd___entry; 6.1 keeps '*'
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    let d = format!(
        "{:?}",
        check_line("r nosuchmod:vfs_re*d", t, &Offline).definition
    );
    assert!(d.contains("\"r_nosuchmod_vfs_re_d_0\""), "{d}");
    let d = format!("{:?}", check_line("f kbd*", t, &Offline).definition);
    assert!(d.contains("\"kbd___entry\""), "{d}");
    let t = Target::new(Arch::X86_64);
    let d = format!(
        "{:?}",
        check_line("r nosuchmod:vfs_re*d", t, &Offline).definition
    );
    assert!(d.contains("\"r_nosuchmod_vfs_re*d_0\""), "{d}");
}

#[test]
fn before_the_address_lookup_an_address_in_no_symbol_is_not_text() {
    // arm64 5.10.223, seed 23: `p 0xffff` and `skip_pgd+0x100000` are
    // "Failed to register probe event"; 6.1 defers the first and calls
    // the second "Invalid probed address or symbol".
    struct Env;
    impl Environment for Env {
        fn kprobe_address(&self, _: u64, _: bool) -> Option<crate::env::AddressFate> {
            Some(crate::env::AddressFate::Deferred)
        }
        fn kprobe_refusal(&self, _: &str, _: u64) -> Option<Option<crate::env::Refusal>> {
            Some(Some(crate::env::Refusal::Unresolved(
                "outside the text".into(),
            )))
        }
        // in no symbol: -ENOENT, as the live view answers
        fn kprobe_entry(&self, _: &str, _: u64) -> Option<Option<bool>> {
            Some(None)
        }
    }
    let mut old = Target::new(Arch::Arm64);
    old.kernel = KernelVersion::with_sublevel(5, 10, 223);
    let new = Target::new(Arch::Arm64);
    let reg = ErrorKind::Logged(TpErr::FAIL_REG_PROBE);
    assert_eq!(err("p 0xffff", old, &Env).0, reg);
    assert!(check_line("p 0xffff", new, &Env).accepted());
    assert_eq!(err("p skip_pgd+0x100000", old, &Env).0, reg);
    assert_eq!(
        err("p skip_pgd+0x100000", new, &Env).0,
        ErrorKind::Logged(TpErr::BAD_PROBE_ADDR)
    );
    // ... but a return probe is looked up by register_kretprobe()'s
    // kprobe_on_func_entry() first (arm64 5.10.223, seed 41: `r:ip/ev
    // 0xfff` taken, waiting like a module's; `r
    // acpi_install_table+0x100000` "Invalid probed address or symbol")
    for t in [old, new] {
        let c = check_line("r:ip/ev 0xfff", t, &Env);
        assert!(c.accepted(), "{:?} {:?}", t.kernel, c.definition);
        assert_eq!(
            err("r acpi_install_table+0x100000", t, &Env).0,
            ErrorKind::Logged(TpErr::BAD_PROBE_ADDR)
        );
    }
}

#[test]
fn a_symbol_at_address_0_is_not_found_on_every_kernel() {
    // x86_64 5.10.262, seed 20261130: `p:ev fixed_percpu_data+0` (kallsyms
    // `0000000000000000 A fixed_percpu_data`) is "Invalid probed address or
    // symbol": kprobe_lookup_name() returns 0, which _kprobe_addr() calls
    // not found, before the address check 5.10 makes without a lookup.
    struct Env;
    impl Environment for Env {
        fn kprobe_refusal(&self, _: &str, _: u64) -> Option<Option<crate::env::Refusal>> {
            Some(Some(crate::env::Refusal::NotFound("at address 0".into())))
        }
    }
    let mut old = Target::new(Arch::X86_64);
    old.kernel = KernelVersion::with_sublevel(5, 10, 262);
    for t in [old, Target::new(Arch::X86_64)] {
        for line in ["p:ev fixed_percpu_data+0", "r fixed_percpu_data"] {
            // (the caret under the symbol, as the kernel logged it)
            let at = line.find('f');
            assert_eq!(
                err(line, t, &Env),
                (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), at),
                "{line} on {:?}",
                t.kernel
            );
        }
    }
}

#[test]
fn arm_kernels_in_arm_mode_take_word_aligned_offsets() {
    // arm 6.12 (Debian armmp, no CONFIG_THUMB2_KERNEL): `fn_show_mem+0x1a`
    // and `vfs_read+0x2` are refused at registration, `+0x100000` taken.
    let t = Target::new(Arch::Arm);
    assert_eq!(
        err("p vfs_read+0x1a", t, &Offline),
        (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(2))
    );
    assert!(check_line("p vfs_read+0x100000", t, &Offline).accepted());
}

#[test]
fn a_probe_waiting_for_its_module_is_not_aligned() {
    // arm64 5.10 and riscv64 6.12 accept `nosuchmod:vfs_read+0x21`: the
    // symbol is not found, the module is not loaded, the probe waits.
    let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
    for arch in [Arch::Arm64, Arch::Arm, Arch::Riscv64] {
        let t = Target::new(arch);
        assert!(
            check_line("p:ev nosuchmod:vfs_read+0x21", t, &k).accepted(),
            "{arch:?}"
        );
        assert!(check_line("p:ev nosuchmod:vfs_read+0x21", t, &Offline).accepted());
    }
}

#[test]
fn without_the_symbol_count_an_impossible_symbol_fails_late() {
    // arm64 5.10.223 (no validate_probe_symbol()): `54x` is looked up only
    // at registration, so the empty event name is refused first.
    let mut t = Target::new(Arch::Arm64);
    t.kernel = KernelVersion::with_sublevel(5, 10, 223);
    assert_eq!(
        err("r:kprobes/ 54x/ev25330 x", t, &Offline),
        (ErrorKind::Logged(TpErr::NO_EVENT_NAME), Some(10))
    );
    assert_eq!(
        err("p:e1 54x", t, &Offline),
        (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(5))
    );
    // 6.1 counts the symbol before the name.
    let t = Target::new(Arch::Arm64);
    assert_eq!(
        err("r:kprobes/ 54x/ev25330 x", t, &Offline),
        (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(11))
    );
}

#[test]
fn a_filter_ending_in_an_operator_is_meaningless_before_6_16() {
    // x86_64 6.1.192 and 6.12.118: `prev_pid == 1 &&` is "Meaningless
    // filter expression" at the filter's end (column 16); 7.2.13 takes it
    struct Env;
    const FORMAT: &str = "format:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";
    impl Environment for Env {
        fn event_fields(&self, _: &str, _: &str) -> Option<Option<Vec<String>>> {
            Some(Some(vec![
                "common_type".into(),
                "prev_pid".into(),
                "next_pid".into(),
            ]))
        }
        fn event_field_decls(&self, _: &str, _: &str) -> Option<Vec<crate::filter::FieldDecl>> {
            Some(crate::filter::parse_format(FORMAT))
        }
    }
    let mut t61 = Target::new(Arch::X86_64);
    t61.kernel = KernelVersion::new(6, 1);
    let mut t612 = Target::new(Arch::X86_64);
    t612.kernel = KernelVersion::new(6, 12);
    let mut t72 = Target::new(Arch::X86_64);
    t72.kernel = KernelVersion::new(7, 2);
    for f in ["prev_pid == 1 &&", "prev_pid == 1 && next_pid == 2 ||"] {
        let line = format!("e:k/a sched.sched_switch if {f}");
        for t in [t61, t612] {
            let c = check_line(&line, t, &Env);
            let Err(e) = &c.definition else {
                panic!("{line} taken on {:?}", t.kernel)
            };
            assert_eq!(
                e.kind,
                ErrorKind::Logged(TpErr::FILT_INVALID_FILTER),
                "{line}"
            );
            assert_eq!(e.message, "Meaningless filter expression");
            assert_eq!(e.pos, Some(f.len()), "{line}");
        }
        assert!(check_line(&line, t72, &Env).accepted(), "{line} on 7.2");
    }
    // 7.2 builds the program, and for `a || b &&` reads memory before it:
    // taken or "Error" at 0 by chance, which the answer says
    let c = check_line(
        "e:k/a sched.sched_switch if prev_pid == 1 || next_pid == 2 &&",
        t72,
        &Env,
    );
    assert!(c.accepted(), "{c:?}");
    assert!(c.unchecked.contains(&Unchecked::FilterByChance), "{c:?}");
    assert!(!c.unchecked.contains(&Unchecked::Filter), "{c:?}");
    assert!(Unchecked::FilterByChance.describe().contains("by chance"));
    // 6.12 refuses it before building anything
    let c = check_line(
        "e:k/a sched.sched_switch if prev_pid == 1 || next_pid == 2 &&",
        t612,
        &Env,
    );
    assert!(!c.accepted());
    assert!(!c.unchecked.contains(&Unchecked::FilterByChance), "{c:?}");
    // an error inside comes first (6.1: `(prev_pid == 1 &&)` is "Error" at 0)
    let c = check_line("e:k/a sched.sched_switch if (prev_pid == 1 &&)", t61, &Env);
    let Err(e) = &c.definition else { panic!() };
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::FILT_ERRNO));
    assert_eq!(e.pos, Some(0));
    // and a complete filter is taken everywhere
    for t in [t61, t612, t72] {
        assert!(
            check_line(
                "e:k/a sched.sched_switch if prev_pid == 1 && next_pid == 2",
                t,
                &Env
            )
            .accepted()
        );
    }
}

#[test]
fn an_event_probe_named_as_an_existing_event_is_refused_after_its_arguments() {
    // x86_64 7.2, the kernel's own eprobe selftest line: an event probe is
    // never appended to, so the name of any event that exists is "already
    // used", logged at 0 once the arguments parsed
    struct Env;
    impl Environment for Env {
        fn event_fields(&self, system: &str, event: &str) -> Option<Option<Vec<String>>> {
            let fields = ["dfd", "filename", "flags", "mode"]
                .map(String::from)
                .to_vec();
            Some(((system, event) == ("syscalls", "sys_enter_openat")).then_some(fields))
        }
        fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
            Some(group == "syscalls" && event.starts_with("sys_enter_open"))
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    let line = "e:syscalls/sys_enter_open syscalls/sys_enter_openat file=+0($filename):ustring";
    let e = check_line(line, t, &Env).definition.unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::EVENT_EXIST), Some(0))
    );
    // an argument's error comes first
    let e = check_line(
        "e:syscalls/sys_enter_open syscalls.sys_enter_openat $nope",
        t,
        &Env,
    )
    .definition
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::BAD_VAR));
    assert!(
        check_line(
            "e:mine/open syscalls/sys_enter_openat file=+0($filename):ustring",
            t,
            &Env
        )
        .accepted()
    );
    // unknown (offline): left to the kernel, not refused
    let c = check_line(line, t, &Offline);
    assert!(
        c.unchecked.contains(&Unchecked::EventName),
        "{:?}",
        c.unchecked
    );
    // an attached event that does not exist is refused before the filter
    // is parsed (trace_eprobe_parse_filter() comes after the lookup): the
    // filter is not reported as left open, whatever it holds
    for filter in ["dfd == 1", "nosuch == 1", "dfd.function == vfs_read"] {
        let c = check_line(
            &format!("e:mine/x syscalls.sys_enter_nosuch a=$dfd if {filter}"),
            t,
            &Env,
        );
        let Err(e) = &c.definition else {
            panic!("{c:?}")
        };
        assert_eq!(
            (e.kind, e.pos),
            (ErrorKind::Logged(TpErr::BAD_ATTACH_EVENT), Some(9)),
            "{filter}"
        );
        assert!(c.unchecked.is_empty(), "{filter}: {:?}", c.unchecked);
    }
}

#[test]
fn a_probe_waiting_for_its_module_still_fails_on_a_bad_argument_offset() {
    // x86_64 6.1, conform seed 20261128 index 4821: traceprobe_update_arg()
    // runs at creation for a probe on a module that is not loaded; a
    // missing symbol there is -ENOENT (the probe waits), an offset that is
    // not a number -EINVAL, "Failed to register probe event" at the place
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(name == "rcu_tasks_pregp_step"))
        }
        fn module_symbol_count(&self, _: &str, _: &str) -> Option<Option<usize>> {
            Some(None)
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let t = Target::new(Arch::X86_64);
    let line = "p:ev nosuchmod:vfs_read a6=@rcu_tasks_pregp_step+2'8:b17@30/64";
    let e = check_line(line, t, &Env).definition.unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(5))
    );
    for waits in [
        "p:ev nosuchmod:vfs_read a6=@rcu_tasks_pregp_step+28:b17@30/64",
        "p:ev nosuchmod:vfs_read a6=@no_such_sym_x+28",
    ] {
        assert!(check_line(waits, t, &Env).accepted(), "{waits}");
    }
}

#[test]
fn a_second_tracepoint_probe_on_one_tracepoint_is_file_exists_where_registered_at_creation() {
    // x86_64 6.12 (guest): beside `t:tracepoints/a1 sched_switch`, `t:a2
    // sched_switch` is EEXIST with nothing logged; 7.2 takes it; the same
    // name goes the append path
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(name.ends_with("sched_switch")))
        }
        fn ftrace_matches(&self, _: &str) -> Option<bool> {
            Some(true)
        }
        fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
            Some(group == "tracepoints" && event == "a1")
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(vec!["t:tracepoints/a1 sched_switch".into()])
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 12);
    let e = check_line("t:a2 sched_switch", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Silent(Silent::TracepointTaken));
    assert!(check_line("t:a2 sched_wakeup", t, &Env).accepted());
    assert!(!matches!(
        check_line("t:tracepoints/a1 sched_switch", t, &Env).definition,
        Err(ProbeError {
            kind: ErrorKind::Silent(Silent::TracepointTaken),
            ..
        })
    ));
    t.kernel = KernelVersion::new(7, 2);
    assert!(check_line("t:a2 sched_switch", t, &Env).accepted());
}

#[test]
fn a_stub_left_on_its_tracepoint_by_a_failed_probe_is_file_exists_where_registered_at_creation() {
    // x86_64 6.12.118, conform seed 20261201 at 20,000: after `t:...
    // cpu_frequency` failed to register (its stub is notrace), the stub
    // stays on the tracepoint and every later `t:` probe of it is EEXIST,
    // nothing logged, though no event lists it; 7.2 registers at enable
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(
                name.ends_with("cpu_frequency") || name.ends_with("sched_switch"),
            ))
        }
        fn ftrace_matches(&self, _: &str) -> Option<bool> {
            Some(true)
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
        fn tracepoint_stub_registered(&self, name: &str) -> Option<bool> {
            Some(name == "cpu_frequency")
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 12);
    let e = check_line("t:grp806/ cpu_frequency", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Silent(Silent::TracepointStubLeft));
    assert!(check_line("t:a2 sched_switch", t, &Env).accepted());
    t.kernel = KernelVersion::new(7, 2);
    assert!(check_line("t:grp806/ cpu_frequency", t, &Env).accepted());
}

#[test]
fn any_retval_prefix_is_the_return_value_of_a_return_uprobe_on_btf_era_parsers() {
    // parse_probe_vars() of 6.5+ takes `$retval…` with str_has_prefix():
    // the host's 6.18 took `r /bin/sh:0x10 $retvalx` (read back as written)
    // and refused `p … $retvalx` with "$retval is not available on probe";
    // x86_64 6.12 refused `p /usr/bin/env:212178 -0($retval])` so (conform
    // seed 20261128); 6.1 compares the whole name
    struct Env;
    impl Environment for Env {
        fn file_kind(&self, _: &str) -> Option<crate::FileKind> {
            Some(crate::FileKind::Regular)
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.interface = Interface::UprobeEvents;
    t.kernel = KernelVersion::new(6, 12);
    assert!(check_line("r /bin/sh:0x10 $retvalx", t, &Env).accepted());
    for line in ["p /bin/sh:0x10 $retvalx", "p /bin/sh:0x10 -0($retval])"] {
        let e = check_line(line, t, &Env).definition.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Logged(TpErr::RETVAL_ON_PROBE), "{line}");
    }
    t.kernel = KernelVersion::new(6, 1);
    let e = check_line("r /bin/sh:0x10 $retvalx", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::BAD_VAR));
}

#[test]
fn a_uprobe_named_as_an_existing_event_is_refused_after_its_arguments() {
    // x86_64 6.1, conform seed 41 with tracepoint names drawn:
    // `p:syscalls/sys_exit_openat /bin/true:0x8294b` is "already used"
    struct Env;
    impl Environment for Env {
        fn file_kind(&self, _: &str) -> Option<crate::FileKind> {
            Some(crate::FileKind::Regular)
        }
        fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
            Some(group == "syscalls" && event == "sys_exit_openat")
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.interface = Interface::UprobeEvents;
    let e = check_line("p:syscalls/sys_exit_openat /bin/true:0x8294b", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::EVENT_EXIST), Some(0))
    );
    // an argument's error comes first
    let e = check_line("p:syscalls/sys_exit_openat /bin/true:0x10 %nope", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::BAD_REG_NAME));
    assert!(check_line("p:mine/openat /bin/true:0x10", t, &Env).accepted());
}

#[test]
fn an_fprobe_named_as_an_existing_event_is_refused_before_its_function_is_looked_up_on_7_2() {
    // arm64 7.2, conform seed 20261128: `f:writeback/writeback_write_inode
    // trace_event_raw_event_regmap_block` is "already used" there
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, _: &str) -> Option<usize> {
            Some(1)
        }
        fn ftrace_matches(&self, _: &str) -> Option<bool> {
            Some(false)
        }
        fn event_exists(&self, group: &str, event: &str) -> Option<bool> {
            Some((group, event) == ("writeback", "writeback_write_inode"))
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let mut t = Target::new(Arch::Arm64);
    t.kernel = KernelVersion::new(7, 2);
    let e = check_line(
        "f:writeback/writeback_write_inode trace_event_raw_event_regmap_block",
        t,
        &Env,
    )
    .definition
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::EVENT_EXIST));
    let e = check_line("f:mine/wb trace_event_raw_event_regmap_block", t, &Env)
        .definition
        .unwrap_err();
    assert_ne!(e.kind, ErrorKind::Logged(TpErr::EVENT_EXIST));
}

#[test]
fn event_probe_typecasts_as_7_2_reads_them() {
    // x86_64 7.2.13, raw writes of `e:ez/a sched.sched_switch a=ARG`
    // (tests/kernel explore, 28 Nov 2026), and arm64 7.2, conform seed
    // 20261128, index 145378: `a41=(!|{:s8`, where ktrace had answered
    // "Typecasts are only for eprobe fields".
    use crate::btfarg::{BtfFunc, BtfKind, BtfMember, BtfTypes, TypeId};
    /// struct task_struct (1) { int pid; } with int (2)
    struct Types;
    impl BtfTypes for Types {
        fn function(&self, _: Option<&str>, _: &str) -> Option<BtfFunc> {
            None
        }
        fn resolve(&self, id: TypeId) -> Option<(TypeId, BtfKind)> {
            match id {
                1 => Some((1, BtfKind::Struct)),
                2 => Some((
                    2,
                    BtfKind::Int {
                        bits: 32,
                        signed: true,
                        offset: 0,
                    },
                )),
                _ => None,
            }
        }
        fn members(&self, id: TypeId) -> Option<Vec<BtfMember>> {
            (id == 1).then(|| {
                vec![BtfMember {
                    name: "pid".into(),
                    bit_offset: 0x9c0 * 8,
                    bitfield_size: 0,
                    type_id: 2,
                }]
            })
        }
        fn find_struct(&self, name: &str) -> Option<TypeId> {
            (name == "task_struct").then_some(1)
        }
        fn type_name(&self, _: TypeId) -> String {
            String::new()
        }
    }
    struct Env;
    impl Environment for Env {
        fn event_fields(&self, _: &str, _: &str) -> Option<Option<Vec<String>>> {
            Some(Some(vec!["prev_comm".into(), "prev_pid".into()]))
        }
        fn btf_struct(&self, name: &str) -> Option<bool> {
            Some(name == "task_struct")
        }
        fn btf_vmlinux(&self) -> Option<&dyn BtfTypes> {
            Some(&Types)
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(7, 2);
    let head = "e:ez/a sched.sched_switch ";
    let body = head.len() + 2;
    for (arg, want) in [
        ("a=(!|{:s8", Some((TpErr::DEREF_OPEN_BRACE, 4))),
        ("a=(task_struct", Some((TpErr::DEREF_OPEN_BRACE, 12))),
        ("a=(", Some((TpErr::DEREF_OPEN_BRACE, 1))),
        ("a=(foo)prev_pid", Some((TpErr::NO_PTR_STRCT, 1))),
        ("a=(!|{)", Some((TpErr::NO_PTR_STRCT, 1))),
        ("a=()x", Some((TpErr::BAD_ATTACH_ARG, 2))),
        ("a=()", Some((TpErr::BAD_ATTACH_ARG, 2))),
        ("a=(task_struct)x->pid", Some((TpErr::BAD_ATTACH_ARG, 13))),
        (
            "a=(task_struct)$comm->pid",
            Some((TpErr::BAD_ATTACH_ARG, 13)),
        ),
        (
            "a=(task_struct)(prev_pid)->pid",
            Some((TpErr::BAD_ATTACH_ARG, 13)),
        ),
        (
            "a=(task_struct)prev_pid.pid",
            Some((TpErr::NOSUP_DAT_ARG, 22)),
        ),
        // the split comes before the field (seed 777: `(file)__syscall_nr-&>`)
        ("a=(task_struct)x.pid", Some((TpErr::NOSUP_DAT_ARG, 15))),
        // no struct to find a member in (seed 778: `()sq_thread->len`)
        ("a=()prev_pid->len", Some((TpErr::NO_BTF_FIELD, 12))),
        ("a=(task_struct)prev_pid-&>", Some((TpErr::BAD_HYPHEN, 21))),
        ("a=(task_struct)prev_pid", None),
        ("a=(task_struct)prev_pid->pid", None),
        ("a=(task_struct)prev_comm->pid", None),
        ("a=(task_struct)prev_pid:u8", None),
        // an empty cast moves the offset past it too: a later error is
        // logged from the field (arm64 7.2, conform seed 20261223, index
        // 148430: `_x=()nr_tried:b4@8/8`, "Invalid bitfield" at the `@`)
        // (the field's offset plus the type's in the argument)
        ("a=()prev_pid:b4@8/8", Some((TpErr::BAD_BITFIELD, 2 + 11))),
        (
            "a=(task_struct)prev_pid:b4@8/8",
            Some((TpErr::BAD_BITFIELD, 13 + 22)),
        ),
        ("a=()prev_pid:b4@4/8", None),
    ] {
        let line = format!("{head}{arg}");
        let c = check_line(&line, t, &Env);
        match want {
            None => assert!(c.accepted(), "{line}: {:?}", c.definition),
            Some((e, at)) => {
                let Err(got) = &c.definition else {
                    panic!("{line} taken")
                };
                assert_eq!(
                    (got.kind, got.pos),
                    (ErrorKind::Logged(e), Some(body + at)),
                    "{line}"
                );
            }
        }
    }
    // riscv64 7.2, seed 20261128: no string fits the cast struct itself,
    // logged at the field after the cast (index 189337); nor an int member,
    // logged, like any later error of a member chain, at a garbage offset
    // (index 11578: 69 for a 68-byte command; index 36933, `:b31@12/32`:
    // "Invalid bitfield" at 62723), which ktrace gives as no caret
    for (arg, want, pos) in [
        (
            "a=(task_struct)prev_pid:string",
            TpErr::BAD_TYPE4STR,
            Some(body + 13),
        ),
        (
            "a=(task_struct)prev_pid:ustring",
            TpErr::BAD_TYPE4STR,
            Some(body + 13),
        ),
        (
            "a=(task_struct)prev_pid->pid:string",
            TpErr::BAD_TYPE4STR,
            None,
        ),
        (
            "a=(task_struct)prev_pid->pid:b31@12/32",
            TpErr::BAD_BITFIELD,
            None,
        ),
    ] {
        let e = check_line(&format!("{head}{arg}"), t, &Env)
            .definition
            .unwrap_err();
        assert_eq!((e.kind, e.pos), (ErrorKind::Logged(want), pos), "{arg}");
    }
    // an empty cast casts nothing: a string field stays one
    let c = check_line(&format!("{head}a=()prev_comm:string"), t, &Env);
    assert!(c.accepted(), "{:?}", c.definition);
    // the member gives the type (the kernel's format: `field:s32 a;`)
    let c = check_line(&format!("{head}a=(task_struct)prev_pid->pid"), t, &Env);
    let d = format!("{:?}", c.definition);
    assert!(d.contains("base: S(32)"), "{d}");
    let e = check_line(&format!("{head}a=(task_struct)prev_pid->nosuch"), t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Logged(TpErr::NO_BTF_FIELD));
    // 32-bit arm 7.2 has no BTF arguments: every cast is "BTF is not
    // available or not supported" at its `(` (CI seed 40267353, 5 lines)
    let mut arm = Target::new(Arch::Arm);
    arm.kernel = KernelVersion::new(7, 2);
    for arg in ["a=(task_struct)prev_pid->pid", "a=(!|{:s8", "a=()x"] {
        let e = check_line(&format!("{head}{arg}"), arm, &Env)
            .definition
            .unwrap_err();
        assert_eq!(
            (e.kind, e.pos),
            (ErrorKind::Logged(TpErr::NOSUP_BTFARG), Some(body)),
            "{arg}"
        );
    }
    // a kprobe's typecast is still "only for eprobe fields"
    let c = check_line("p vfs_read a=(task_struct)x", t, &Env);
    assert_eq!(
        c.definition.unwrap_err().kind,
        ErrorKind::Logged(TpErr::TYPECAST_NOT_EVENT)
    );
}

#[test]
fn an_argument_symbol_at_address_zero_is_not_found() {
    // x86_64 6.12, conform seed 20261213, index 56386: `@fixed_percpu_data`
    // (a per-CPU symbol at 0) is found by kallsyms_lookup_name() at 0,
    // which traceprobe_update_arg() takes for "not found": -ENOENT, logged
    // for a kprobe at the probed place, silent for an event probe
    struct Env;
    impl Environment for Env {
        fn symbol_count(&self, name: &str) -> Option<usize> {
            Some(usize::from(matches!(
                name,
                "vfs_read" | "fixed_percpu_data" | "jiffies"
            )))
        }
        fn symbol_at_zero(&self, name: &str) -> Option<bool> {
            Some(name == "fixed_percpu_data")
        }
        fn event_fields(&self, _: &str, _: &str) -> Option<Option<Vec<String>>> {
            Some(Some(vec!["prev_pid".into()]))
        }
        fn event_exists(&self, _: &str, _: &str) -> Option<bool> {
            Some(false)
        }
        fn dynamic_events(&self) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 12);
    let e = check_line("p vfs_read a=@fixed_percpu_data", t, &Env)
        .definition
        .unwrap_err();
    assert_eq!(
        (e.kind, e.pos),
        (ErrorKind::Logged(TpErr::BAD_PROBE_ADDR), Some(2))
    );
    let e = check_line("e:g/x sched.sched_switch a=-0(@fixed_percpu_data)", t, &Env)
        .definition
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Silent(_)), "{e:?}");
    // any other symbol is found
    assert!(check_line("p vfs_read a=@jiffies", t, &Env).accepted());
    assert!(check_line("e:g/x sched.sched_switch a=-0(@jiffies)", t, &Env).accepted());
}

/// A kernel built without kprobe events (the 6.18 host: uprobes only) has
/// no kprobe parser behind dynamic_events: a kprobe's line is one no kind
/// of event takes, and a uprobe's with maxactive digits goes to the uprobe
/// parser, which drops them with the name (the host took
/// `p2:zzt/a /bin/true:0x10` as `p:uprobes/p_true_0x10`). One built
/// without event probes, whose README lists `e:` all the same, takes no
/// `e:` line.
#[test]
fn a_kernel_without_kprobes_or_eprobes_takes_no_such_line() {
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 18);
    let mut f = t.kernel.features();
    f.kprobes = false;
    f.eprobes = false;
    t.features = Some(f);
    for l in [
        "p vfs_read",
        "r4:ev vfs_read",
        "p:g/e vfs_read+4 %di",
        "r vfs_read $retval",
    ] {
        let e = check_line(l, t, &Offline).definition.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Silent(Silent::NotAProbe), "{l}");
        assert_eq!(e.message, "this kernel has no kprobe events", "{l}");
        assert!(
            e.hint.is_some_and(|h| h.contains("CONFIG_KPROBE_EVENTS")),
            "{l}"
        );
    }
    let c = check_line("p2:zzt/a /bin/true:0x10", t, &Offline);
    assert!(c.accepted(), "{:?}", c.definition);
    assert_eq!(
        c.normalized(Arch::X86_64).as_deref(),
        Some("p:uprobes/p_true_0x10 /bin/true:0x0000000000000010")
    );
    let e = check_line("e:g/e sched.sched_switch", t, &Offline)
        .definition
        .unwrap_err();
    assert_eq!(e.message, "this kernel has no event probes (e:)");
    // a word that only starts with the kind's letter keeps the general
    // message
    let e = check_line("ext4_init+0x", t, &Offline)
        .definition
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Silent(Silent::NotAProbe));
    assert_ne!(e.message, "this kernel has no event probes (e:)");
    // with kprobes the same lines are kprobes again
    t.features = Some(t.kernel.features());
    assert!(check_line("p vfs_read", t, &Offline).accepted());
    assert_eq!(err("p2 /bin/ls:0x10", t, &Offline).1, Some(1));
    // 7.2 logs a line no kind takes: the hint still says why
    t.kernel = KernelVersion::new(7, 2);
    let mut f = t.kernel.features();
    f.kprobes = false;
    t.features = Some(f);
    let e = check_line("p vfs_read", t, &Offline)
        .definition
        .unwrap_err();
    assert_eq!(e.message, "No matching dynamic event type");
    assert!(e.hint.is_some_and(|h| h.contains("CONFIG_KPROBE_EVENTS")));
}

#[test]
fn offline_a_return_probe_off_the_entry_says_its_symbol_was_not_looked_up() {
    // x86_64 6.1, offline without --kallsyms: the kernel (ext4 built in,
    // no module of that name) defers the entry check of a symbol it does
    // not find and parses on: "Invalid fetch argument" at `file->`. Taken
    // as existing, the symbol gives "Retprobe address must be an function
    // entry", which the answer must say it assumed.
    for k in [
        KernelVersion::new(5, 10),
        KernelVersion::new(6, 1),
        KernelVersion::new(7, 2),
    ] {
        let mut t = Target::new(Arch::X86_64);
        t.kernel = k;
        for line in [
            "r ext4:ext4_file_open+8 file->f_flags",
            "r vfs_fsync+1000000 x=%di",
            "p:e ext4:ext4_file_open $arg6",
        ] {
            let c = check_line(line, t, &Offline);
            assert!(
                c.unchecked.contains(&Unchecked::SymbolExists),
                "{k:?} {line}: {:?}",
                c.unchecked
            );
        }
    }
}

#[test]
fn a_maxactive_of_2_31_and_more_is_the_kernels_negative_int() {
    // trace_kprobe's `int maxactive` filled by kstrtouint(): from 2^31 on
    // it is negative and passes the `> 4096` check. x86_64 5.10, 6.12 and
    // 7.2 guests (2 CPUs) took `r3000000000:g/h vfs_read %ax` and read it
    // back as `r2:` (5.10) and `r10:`; a probe waiting for its module
    // reads back the negative number (arm 7.2, conform seed 20261304 at
    // 200,000: `r0xc105d0e8 \x`)
    let k = Kallsyms::parse("ffffffff81000000 T vfs_read\n");
    for (kernel, default) in [
        (KernelVersion::new(5, 10), "r2"),
        (KernelVersion::new(6, 12), "r10"),
        (KernelVersion::new(7, 2), "r10"),
    ] {
        let mut t = Target::new(Arch::X86_64);
        t.kernel = kernel;
        t.possible_cpus = Some(2);
        let back = |l: &str| check_line(l, t, &k).normalized(Arch::X86_64);
        for m in ["2147483648", "0x80000000", "4294967295", "3000000000"] {
            assert_eq!(
                back(&format!("r{m}:g/h vfs_read %ax")).as_deref(),
                Some(format!("{default}:g/h vfs_read arg1=%ax").as_str()),
                "{kernel:?} r{m}"
            );
        }
        assert_eq!(
            back("r0xc105d0e8:g/e nosuchmod:foo").as_deref(),
            Some("r-1056583448:g/e nosuchmod:foo"),
            "{kernel:?}"
        );
        for (m, e) in [
            ("2147483647", TpErr::MAXACT_TOO_BIG),
            ("4097", TpErr::MAXACT_TOO_BIG),
            ("4294967296", TpErr::BAD_MAXACT),
        ] {
            assert_eq!(
                err(&format!("r{m} vfs_read"), t, &k),
                (ErrorKind::Logged(e), Some(1)),
                "{kernel:?} r{m}"
            );
        }
    }
    // an fprobe's (6.12): only for a function's exit, and its rethook
    // size then fails to register
    let mut t = Target::new(Arch::X86_64);
    t.kernel = KernelVersion::new(6, 12);
    assert_eq!(
        err("f2147483648:g/k vfs_read", t, &k),
        (ErrorKind::Logged(TpErr::MAXACT_NO_RETURN), Some(1))
    );
    assert_eq!(
        err("f2147483648:g/j vfs_read%return", t, &k),
        (ErrorKind::Logged(TpErr::FAIL_REG_PROBE), Some(16))
    );
}

#[test]
fn arg_words_without_the_kernels_btf() {
    // riscv64 6.12 offline without its BTF (seed 57002): a `$arg…` word is
    // taken as written, but what the kernel checks before its BTF is still
    // checked, and where `$arg*` became parameters the caret is unknown
    let t = Target {
        kernel: KernelVersion::new(6, 12),
        ..Target::new(Arch::Riscv64)
    };
    let l = "p:g/e parse_acpi_topology+0 %a2 $arg8:b34@3/128 =%a0:u64";
    assert_eq!(
        err(l, t, &Offline),
        (ErrorKind::Logged(TpErr::BAD_TYPE), Some(38))
    );
    // where, the parameter's name decides: said so
    assert!(
        check_line(l, t, &Offline)
            .unchecked
            .contains(&Unchecked::ErrorPosition)
    );
    let l = "p:g/e parse_acpi_topology+0 %a2:b34@3/128 $arg8";
    assert!(
        !check_line(l, t, &Offline)
            .unchecked
            .contains(&Unchecked::ErrorPosition)
    );
    for (l, e) in [
        ("p:g/e f $arg1:u8[0]", TpErr::BAD_ARRAY_NUM),
        ("p:g/e f $arg1:u8[2", TpErr::ARRAY_NO_CLOSE),
        ("p:g/e f $arg1:", TpErr::BAD_TYPE),
        ("p:g/e f $arg1 $arg2 x=%a0 x=$arg3", TpErr::USED_ARG_NAME),
    ] {
        assert_eq!(err(l, t, &Offline).0, ErrorKind::Logged(e), "{l}");
    }
    // a typed one keeps its type
    let c = check_line("p:g/e f $arg1:u8 $arg2:x16[2]", t, &Offline);
    let Ok(Definition::Probe(p)) = &c.definition else {
        panic!("{c:?}")
    };
    let sizes: Vec<u32> = p
        .args
        .iter()
        .map(|a| a.ty.base.size(Arch::Riscv64))
        .collect();
    assert_eq!(sizes, [1, 2]);
    assert!(c.unchecked.contains(&Unchecked::Btf));
    // a generated name is the parameter's with BTF: not held against `arg1=`
    assert!(check_line("p:g/e f $arg1:s8 arg1=%a0", t, &Offline).accepted());
    // after `$arg*`, a later word's error is logged at its index among the
    // parameters: the caret is not known
    let c = check_line("r4096:_e38 phy_configure $arg* %epc:x", t, &Offline);
    assert_eq!(
        c.definition.as_ref().unwrap_err().kind,
        ErrorKind::Logged(TpErr::BAD_TYPE)
    );
    assert!(c.unchecked.contains(&Unchecked::ErrorPosition));
    let c = check_line("r4096:_e38 phy_configure %epc:x $arg*", t, &Offline);
    assert!(!c.unchecked.contains(&Unchecked::ErrorPosition));
    // x86_64 6.12 offline, seed 59102: what is refused whatever the BTF
    let t = Target {
        kernel: KernelVersion::new(6, 12),
        ..Target::new(Arch::X86_64)
    };
    for (l, e, at) in [
        // a lone `-` in a member chain: that, or a BTF error before it
        ("p __aer_print_error info->x-y", TpErr::BAD_HYPHEN, 27),
        ("p f%return $retval->a->b-c", TpErr::BAD_HYPHEN, 24),
        // past the stack: without BTF for the function the number, with
        // it the parameter
        ("p f $arg10000:u32 $comm:ustring", TpErr::BAD_ARG_NUM, 4),
    ] {
        let c = check_line(l, t, &Offline);
        let got = c.definition.as_ref().unwrap_err();
        assert_eq!((got.kind, got.pos), (ErrorKind::Logged(e), Some(at)), "{l}");
        assert!(c.unchecked.contains(&Unchecked::Btf), "{l}");
    }
    // a member chain's array reads memory, whatever its types
    let c = check_line("f:g31/ev15417 trace_printk count->comm:u32[4]", t, &Offline);
    assert!(c.accepted(), "{c:?}");
    assert!(!check_line("f:g/e trace_printk count:u32[4]", t, &Offline).accepted());
    // a bitfield that fits no container, with BTF or without
    let c = check_line("p:g/e icmpv6_getfrag+0 $arg2:b25@12/32", t, &Offline);
    assert_eq!(
        c.definition.as_ref().unwrap_err().kind,
        ErrorKind::Logged(TpErr::BAD_BITFIELD)
    );
    assert!(check_line("p:g/e icmpv6_getfrag+0 $arg2:b20@12/32", t, &Offline).accepted());
    // past a member chain the kernel's caret is garbage: said so
    let c = check_line(
        "p:ev8918 led_trigger_set a28=trig->trigger_type trig->activate:b61*31/64",
        t,
        &Offline,
    );
    assert_eq!(
        c.definition.as_ref().unwrap_err().kind,
        ErrorKind::Logged(TpErr::BAD_BITFIELD)
    );
    assert!(c.unchecked.contains(&Unchecked::ErrorPosition), "{c:?}");
    // `%pD` rewrites the words the log shows, unless the expansion with
    // BTF copied them first
    let t_rv = Target {
        kernel: KernelVersion::new(6, 12),
        ..Target::new(Arch::Riscv64)
    };
    for (l, unknown) in [
        ("p:e f @g:%pD a38=\\123:x32[38] $arg2:s8", true),
        ("p:e f @g:%pD a38=\\123:x32[38]", false),
    ] {
        let c = check_line(l, t_rv, &Offline);
        assert!(!c.accepted(), "{l}");
        assert_eq!(
            c.unchecked.contains(&Unchecked::ErrorPosition),
            unknown,
            "{l}"
        );
    }
    // ... and before the `%pd` rewrite
    let c = check_line("f:ev43613 tcp_sendmsg $arg*->pid:%pd", t, &Offline);
    assert!(c.accepted(), "{c:?}");
    // `$arg*` drops what follows the `*`
    let c = check_line("p:a1 device_pm_move_to_tail%return $arg*:bool", t, &Offline);
    assert!(c.accepted(), "{c:?}");
    // `$arg0` is refused at the expansion, as with BTF: said to be BTF's
    let c = check_line("r f+0 a=@vfs_read:symstr[17] $arg0:s8", t, &Offline);
    assert!(c.unchecked.contains(&Unchecked::Btf), "{c:?}");
}

#[test]
fn an_empty_uprobe_path_is_the_working_directory() {
    // riscv64 6.12, conform seed 59201, index 7396; the 6.18 host alike:
    // kern_path("") is the writer's working directory
    for l in ["r :0g/ f regs->epc", "p:kt/x :0x1000/"] {
        assert_eq!(
            err(l, Target::new(Arch::X86_64), &Offline),
            // at the place, the second word
            (
                ErrorKind::Logged(TpErr::NO_REGULAR_FILE),
                Some(l.find(' ').unwrap() + 1)
            ),
            "{l}"
        );
    }
}
