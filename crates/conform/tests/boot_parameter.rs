//! The `kprobe_event=` encoding (ktrace-probe's `boot`) over the
//! generator's definitions: every generated kprobe or kretprobe line the
//! checker accepts and the parameter can carry comes back from the kernel's
//! reading of the parameter (`setup_boot_kprobe_events()`: commas to
//! spaces, split at `;`) as the same words, with the same verdict and
//! readback; what the parameter cannot carry holds `,`, `;` or `"`.

use ktrace_conform::generate::{Function, Gen, Param, Pool};
use ktrace_probe::boot::{self, BootRefusal};
use ktrace_probe::{
    Arch, Checked, Definition, KernelVersion, Offline, ProbeKind, Target, check_line,
};

fn pool() -> Pool {
    Pool {
        arch: "x86_64".into(),
        functions: vec![Function {
            name: "do_sys_openat2".into(),
            params: vec![
                Param {
                    name: "dfd".into(),
                    members: vec![],
                },
                Param {
                    name: "filename".into(),
                    members: vec![],
                },
            ],
            ret_members: vec![],
        }],
        other_symbols: vec!["jiffies".into(), "kernel_clone".into()],
        module_functions: vec![("romfs".into(), "romfs_fill_super".into())],
        tracepoints: vec![],
        files: vec![("/bin/busybox".into(), 900_000)],
        addresses: vec![0xffff_ffff_8100_0000],
    }
}

fn is_kprobe(c: &Checked) -> bool {
    matches!(&c.definition, Ok(Definition::Probe(p)) if matches!(p.kind, ProbeKind::Kprobe { .. }))
}

#[test]
fn generated_kprobes_survive_the_kernels_reading_of_the_parameter() {
    let p = pool();
    let mut target = Target::new(Arch::X86_64);
    target.kernel = KernelVersion::new(7, 2);
    let (mut carried, mut refused) = (0, 0);
    for seed in [1, 2, 3] {
        let g = Gen::new(&p, seed);
        let mut lines = Vec::new();
        for i in 0..4000 {
            let line = g.case(i).line;
            let c = check_line(&line, target, &Offline);
            if !c.accepted() || !is_kprobe(&c) {
                continue;
            }
            match boot::encode_line(&line) {
                Ok(e) => {
                    carried += 1;
                    lines.push((line, c, e));
                }
                Err(why) => {
                    refused += 1;
                    let quoteless = !line.contains([',', ';', '"']);
                    assert!(
                        !quoteless || why == BootRefusal::Space,
                        "{line:?} refused ({why}) without , ; or \""
                    );
                }
            }
        }
        // all of them in one parameter, as the kernel splits it
        let encoded: Vec<String> = lines.iter().map(|(_, _, e)| e.clone()).collect();
        let back = boot::decode(&boot::parameter(&encoded));
        assert_eq!(back.len(), lines.len());
        for ((line, c, _), words) in lines.iter().zip(&back) {
            assert_eq!(
                &line.split_ascii_whitespace().collect::<Vec<_>>(),
                words,
                "{line:?}"
            );
            let again = check_line(&words.join(" "), target, &Offline);
            assert_eq!(again.accepted(), c.accepted(), "{line:?}");
            assert_eq!(
                again.normalized(Arch::X86_64),
                c.normalized(Arch::X86_64),
                "{line:?}"
            );
        }
    }
    assert!(carried > 300, "only {carried} generated kprobes carried");
    println!("{carried} carried, {refused} refused for , ; or \"");
}
