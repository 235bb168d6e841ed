//! Property tests: for definitions built from the language's pieces, the readback
//! line the kernel would print is itself a definition that reads back identically
//! (render -> parse -> render is stable), and the canonical form rebuilt from the
//! syntax tree parses to the same tree.

use ktrace_probe::{Arch, Definition, Offline, Target, check_line, render};
use proptest::prelude::*;

fn arch() -> impl Strategy<Value = Arch> {
    prop_oneof![
        Just(Arch::X86_64),
        Just(Arch::Arm64),
        Just(Arch::Arm),
        Just(Arch::Riscv64),
        Just(Arch::I386)
    ]
}

fn fetch(arch: Arch, depth: u32) -> BoxedStrategy<String> {
    let regs: Vec<String> = arch.registers().iter().map(|r| format!("%{r}")).collect();
    let leaf = prop_oneof![
        proptest::sample::select(regs),
        (0u64..3000).prop_map(|n| format!("$stack{n}")),
        Just("$stack".to_string()),
        Just("$retval".to_string()),
        Just("$comm".to_string()),
        (0u64..10).prop_map(|n| format!("$arg{n}")),
        "[a-z_]{1,8}".prop_map(|s| format!("@{s}")),
        (0u64..u64::MAX).prop_map(|n| format!("@0x{n:x}")),
        (-100i64..100).prop_map(|n| format!("\\{n}")),
        "[a-z ]{0,5}".prop_map(|s| format!("\\\"{}\"", s.replace(' ', "_"))),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => (-64i64..64, any::<bool>(), fetch(arch, depth - 1)).prop_map(|(o, u, inner)| {
            let u = if u { "u" } else { "" };
            if o < 0 { format!("-{u}{}({inner})", -o) } else { format!("+{u}{o}({inner})") }
        }),
    ]
    .boxed()
}

fn ty() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        proptest::sample::select(vec![
            "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64",
            "string", "ustring", "symbol", "symstr",
        ])
        .prop_map(|t| format!(":{t}")),
        (
            1u64..70,
            0u64..70,
            proptest::sample::select(vec![8u32, 16, 32, 64])
        )
            .prop_map(|(w, o, c)| format!(":b{w}@{o}/{c}")),
        (
            proptest::sample::select(vec!["u8", "x32", "string"]),
            1u32..70
        )
            .prop_map(|(t, n)| format!(":{t}[{n}]")),
    ]
}

fn definition() -> impl Strategy<Value = (Arch, String)> {
    arch().prop_flat_map(|arch| {
        let args = proptest::collection::vec(
            (
                proptest::option::of("[a-z_][a-z0-9_]{0,6}"),
                fetch(arch, 3),
                ty(),
            ),
            0..5,
        );
        let head = prop_oneof![
            Just("p".to_string()),
            Just("r".to_string()),
            (1u32..5000).prop_map(|n| format!("r{n}")),
            "[a-z_][a-z0-9_]{0,10}".prop_map(|e| format!("p:{e}")),
            ("[a-z_][a-z0-9_-]{0,8}", "[a-z_][a-z0-9_]{0,8}")
                .prop_map(|(g, e)| format!("r:{g}/{e}")),
            "[a-z_][a-z0-9_]{0,8}".prop_map(|g| format!("p:{g}/")),
        ];
        let place = prop_oneof![
            ("[a-z_][a-z0-9_.]{0,20}", 0u32..64).prop_map(|(s, o)| if o == 0 {
                s
            } else {
                format!("{s}+{o}")
            }),
            "[a-z_][a-z0-9_]{0,20}".prop_map(|s| format!("{s}%return")),
            "[a-z]{1,6}:[a-z_]{1,10}".prop_map(|s| s),
            (0u64..0xffff_ffff).prop_map(|a| format!("/bin/x:0x{a:x}")),
            (0u64..0xffff, 1u64..0xffff).prop_map(|(a, r)| format!("/usr/lib/libc.so.6:{a}({r})")),
        ];
        (Just(arch), head, place, args).prop_map(|(arch, head, place, args)| {
            let mut s = format!("{head} {place}");
            for (name, f, t) in args {
                s.push(' ');
                if let Some(n) = name {
                    s.push_str(&n);
                    s.push('=');
                }
                s.push_str(&f);
                s.push_str(&t);
            }
            (arch, s)
        })
    })
}

fn strip_spans(d: &Definition) -> Definition {
    let mut d = d.clone();
    if let Definition::Probe(p) = &mut d {
        for a in &mut p.args {
            a.span = Default::default();
            a.body = String::new();
        }
    }
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn readback_is_a_fixpoint((arch, def) in definition()) {
        let t = Target::new(arch);
        let c = check_line(&def, t, &Offline);
        if let Ok(Definition::Probe(p)) = &c.definition {
            let line = render::readback(p, arch);
            let again = check_line(&line, t, &Offline);
            let d2 = again.definition.as_ref();
            prop_assert!(d2.is_ok(), "{def} -> {line} rejected: {:?}", d2.err());
            if let Ok(Definition::Probe(p2)) = d2 {
                prop_assert_eq!(render::readback(p2, arch), line);
            }
        }
    }

    #[test]
    fn canonical_parses_to_the_same_tree((arch, def) in definition()) {
        let t = Target::new(arch);
        let c = check_line(&def, t, &Offline);
        if let Ok(d) = &c.definition {
            let text = render::canonical(d, arch);
            let again = check_line(&text, t, &Offline);
            let d2 = again.definition.as_ref();
            prop_assert!(d2.is_ok(), "{def} -> {text} rejected: {:?}", d2.err());
            prop_assert_eq!(strip_spans(d2.unwrap()), strip_spans(d), "{} -> {}", def, text);
        }
    }

    #[test]
    fn never_panics(s in "\\PC{0,80}", arch in arch()) {
        let _ = check_line(&s, Target::new(arch), &Offline);
    }
}
