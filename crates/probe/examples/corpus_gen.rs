//! Generates the conformance corpus: probe definitions covering every form of the
//! language systematically, plus the kernel selftests' syntax-error cases, one per
//! line, for one architecture. The capture script
//! (tests/kernel/guest/corpus/capture.sh) writes each to a real kernel.
//!
//! Usage: `cargo run -p ktrace-probe --example corpus_gen -- x86_64|arm64|arm|riscv64 > defs.txt`

use ktrace_probe::Arch;

fn main() {
    let arch: Arch = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "x86_64".into())
        .parse()
        .unwrap_or_else(|e| {
            eprintln!("corpus_gen: {e}");
            std::process::exit(2)
        });
    for d in generate(arch) {
        println!("{d}");
    }
}

fn generate(arch: Arch) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let a0 = format!("%{}", arch.arg_registers()[0]);
    let a1 = format!("%{}", arch.arg_registers()[1]);
    let sp = "%sp";
    probe_points(&mut v, &a0);
    names(&mut v);
    fetch_args(&mut v, arch, &a0, &a1, sp);
    types(&mut v, &a0);
    arg_names(&mut v, &a0, &a1);
    uprobes(&mut v, &a0);
    event_probes(&mut v);
    newer_kinds(&mut v, &a0);
    selftest_errors(&mut v);
    let mut seen = std::collections::HashSet::new();
    v.retain(|d| seen.insert(d.clone()));
    v
}

/// Probe points, commands, maxactive, suffixes.
fn probe_points(v: &mut Vec<String>, a0: &str) {
    for sym in [
        "vfs_read",
        "do_exit",
        "kernel_clone",
        "schedule",
        "non_exist_func",
        "name_show",
        "type_show",
    ] {
        v.push(format!("p {sym}"));
        v.push(format!("r {sym}"));
        v.push(format!("p {sym}%return"));
    }
    for off in [
        "+0",
        "+4",
        "+8",
        "+1",
        "+3",
        "+0x10",
        "+16",
        "-1",
        "+0x",
        "+1000-1000",
        "+4294967296",
        "+010",
        "+08",
    ] {
        v.push(format!("p vfs_read{off}"));
        v.push(format!("r vfs_read{off}"));
    }
    for suffix in [
        "%return",
        "%hoge",
        "%",
        "+0%return",
        "+4%return",
        "%return%return",
        "%RETURN",
    ] {
        v.push(format!("p vfs_read{suffix}"));
    }
    for cmd in [
        "r0",
        "r1",
        "r2",
        "r4096",
        "r4097",
        "r100000",
        "r1a",
        "r0x10",
        "r010",
        "p1",
        "p0",
        "r1:myev",
        "r16:grp/ev",
        "r1:",
        "r-1",
        "pfoo",
        "rfoo",
        "x",
        "P",
        "R",
    ] {
        v.push(format!("{cmd} vfs_read"));
    }
    for addr in ["0", "0x0", "12345", "0xffffffff"] {
        v.push(format!("p:addrev {addr}"));
    }
    for m in [
        "nosuchmod:foo",
        "nosuchmod:foo+8",
        "ext4:ext4_file_open",
        "a:b:c",
    ] {
        v.push(format!("p:modev {m}"));
    }
    v.push("p".into());
    v.push("p:onlyname".into());
    v.push("r".into());
    v.push("p    vfs_read    ".into());
    v.push("p vfs_read # a comment".into());
    v.push("p vfs_read\t%s".replace("%s", a0));
}

/// Event and group names.
fn names(v: &mut Vec<String>) {
    let long63 = "e".repeat(63);
    let long64 = "e".repeat(64);
    let g63 = "g".repeat(63);
    let g64 = "g".repeat(64);
    for name in [
        "myev".to_string(),
        "grp/ev".into(),
        "grp.ev".into(),
        "/ev".into(),
        ".ev".into(),
        "grp/".into(),
        "grp.".into(),
        "".into(),
        "_ev".into(),
        "ev1".into(),
        "1ev".into(),
        "ev-1".into(),
        "grp-1/ev".into(),
        "-grp/ev".into(),
        "1grp/ev".into(),
        "grp/ev/x".into(),
        "grp.ev.x".into(),
        "grp/ev.x".into(),
        "kprobes/ev".into(),
        "ftrace/ev".into(),
        "EV".into(),
        long63.clone(),
        long64.clone(),
        format!("grp/{long63}"),
        format!("grp/{long64}"),
        format!("{g63}/ev"),
        format!("{g64}/ev"),
        "grp/ev$".into(),
        "g@/ev".into(),
    ] {
        v.push(format!("p:{name} vfs_read"));
    }
}

/// Fetch arguments on an entry probe and a return probe.
fn fetch_args(v: &mut Vec<String>, arch: Arch, a0: &str, a1: &str, sp: &str) {
    let mut fetches: Vec<String> = Vec::new();
    for r in arch.registers() {
        fetches.push(format!("%{r}"));
    }
    for r in [
        "rdi", "eax", "x31", "w0", "r0", "a0", "DI", "", "ip0", "pc0",
        // Names other architectures' tables use, to see each kernel's own
        // regs_query_register_offset() answer (arm, riscv64).
        "r11", "r12", "r13", "r14", "r15", "psr", "spsr", "orig_r0", "ORIG_r0", "pc", "fp", "zero",
        "x0", "s0", "status", "badaddr", "cause", "orig_a0", "ra", "lr", "epc",
    ] {
        if !arch.has_register(r) {
            fetches.push(format!("%{r}"));
        }
    }
    for f in [
        "$stack",
        "$stack0",
        "$stack1",
        "$stack2048",
        "$stack2049",
        "$stack10000",
        "$stack01",
        "$stack1a",
        "$stack-1",
        "$stacks",
        "$retval",
        "$retval1",
        "$comm",
        "$COMM",
        "$Comm",
        "$arg0",
        "$arg1",
        "$arg2",
        "$arg8",
        "$arg2048",
        "$arg2049",
        "$arg10000",
        "$arg",
        "$arga",
        "$args",
        "$none_var",
        "$",
        "@jiffies",
        "@jiffies+8",
        "@jiffies-8",
        "@jiffies+0x10",
        "@non_exist_sym",
        "@jiffies+x",
        "@0",
        "@0x1000",
        "@12345678abcde",
        "@0x",
        "@+10",
        "@+0x10",
        "@-10",
        "@",
        "\\1",
        "\\0x10",
        "\\-1",
        "\\+5",
        "\\010",
        "\\08",
        "\\x",
        "\\",
        "\\\"abc\"",
        "\\\"abcd",
        "\\\"\"",
        "\\\"",
        "&1",
        "1",
        "foo",
        "+0(@0)",
        "+0@0)",
        "+0ab1(@0)",
        "+0(+0(@0)",
        "+0($comm)",
        "+0(\\\"a\")",
        "+0(\\1)",
        "-8($stack)",
        "+u0($stack)",
        "-u8($stack)",
        "+u8($stack",
        "+(@0)",
        "-(@0)",
        "+-8($stack)",
        "+0($stack)trailing",
        "+0()",
        "+0(%nope)",
        "+0($retval)",
    ] {
        fetches.push(f.to_string());
    }
    fetches.push(format!("+0({a0})"));
    fetches.push(format!("+8({a1})"));
    fetches.push(format!("-8({sp})"));
    fetches.push(format!("+0(+0({a0}))"));
    fetches.push(format!("+u0({a0})"));
    fetches.push(format!("+0x10(+0x8(+0({a0})))"));
    let nest = |n: usize| format!("{}@0{}", "+0(".repeat(n), ")".repeat(n));
    for n in [11, 12, 13, 14] {
        fetches.push(nest(n));
    }
    for f in &fetches {
        v.push(format!("p vfs_read {f}"));
        v.push(format!("r vfs_read {f}"));
    }
    v.push(format!("p vfs_read+8 $arg1 {a0}"));
    v.push("p vfs_read%return $arg1".into());
}

/// Types on representative fetches.
fn types(v: &mut Vec<String>, a0: &str) {
    let types = [
        "u8",
        "u16",
        "u32",
        "u64",
        "s8",
        "s16",
        "s32",
        "s64",
        "x8",
        "x16",
        "x32",
        "x64",
        "string",
        "ustring",
        "symbol",
        "symstr",
        "char",
        "int",
        "U8",
        "",
        "b4@0/8",
        "b8@0/8",
        "b8@1/8",
        "b1@63/64",
        "b1@64/64",
        "b0@0/8",
        "b4@a/16",
        "b4@/8",
        "b4@0/12",
        "b4@0",
        "b4/8",
        "bx@0/8",
        "b0x4@0x2/0x10",
        "u8[1]",
        "u8[4]",
        "u8[64]",
        "u8[65]",
        "u8[0]",
        "u8[",
        "u8[4]x",
        "u8[x]",
        "string[2]",
        "ustring[2]",
        "symstr[2]",
        "symbol[2]",
        "b4@0/8[2]",
        "x64[64]",
        "u8[0x10]",
        "u8[]",
    ];
    let typed_fetches = [
        a0.to_string(),
        format!("+0({a0})"),
        "$stack0".into(),
        "@jiffies".into(),
        "\\1".into(),
        "$comm".into(),
        "\\\"str\"".into(),
        format!("+u0({a0})"),
    ];
    for f in &typed_fetches {
        for t in types {
            v.push(format!("p vfs_read {f}:{t}"));
        }
    }
    for t in ["string", "u32", "symstr", "symbol"] {
        v.push(format!("r vfs_read $retval:{t}"));
    }
}

/// Argument names.
fn arg_names(v: &mut Vec<String>, a0: &str, a1: &str) {
    for w in [
        format!("x={a0}"),
        format!("_x={a0}"),
        format!("X1={a0}"),
        format!("1x={a0}"),
        format!("x.1={a0}"),
        format!("={a0}"),
        "x=".into(),
        format!("{}={a0}", "n".repeat(32)),
        format!("{}={a0}", "n".repeat(33)),
        format!("common_pid={a0}"),
        format!("__probe_ip={a0}"),
        format!("__probe_func={a0}"),
        format!("common_foo={a0}"),
        format!("x=y={a0}"),
        format!("arg1={a0} {a1}"),
        format!("arg2={a0} {a1}"),
        format!("x={a0} x={a1}"),
        format!("x={a0} X={a1}"),
        format!("x={}", "+1234567(".repeat(5) + "@1234" + &")".repeat(5)),
        format!("x={}", "+1234567(".repeat(6) + "@1234" + &")".repeat(6)),
    ] {
        v.push(format!("p vfs_read {w}"));
    }
    // Many arguments and the event size limit.
    let many: Vec<String> = (0..129).map(|i| format!("a{i}={a0}:u8")).collect();
    v.push(format!("p:many vfs_read {}", many[..128].join(" ")));
    v.push(format!("p:many vfs_read {}", many.join(" ")));
    let big: Vec<String> = (0..7).map(|i| format!("b{i}=+0({a0}):x64[64]")).collect();
    v.push(format!("p:big vfs_read {}", big[..6].join(" ")));
    v.push(format!("p:big vfs_read {}", big.join(" ")));
}

/// Uprobes on files present in the guest.
fn uprobes(v: &mut Vec<String>, a0: &str) {
    for place in [
        "/bin/busybox:0x100",
        "/bin/busybox:256",
        "/bin/busybox:0",
        "/bin/busybox:0x100%return",
        "/bin/busybox:0x100(0x10)",
        "/bin/busybox:0x100(0x10)%return",
        "/bin/busybox:0x100%return(0x10)",
        "/bin/busybox:10a",
        "/bin/busybox:10(1a)",
        "/bin/busybox:10(10",
        "/bin/busybox:10(10)a",
        "/bin/busybox:10%hoge",
        "/bin/busybox:10(0)",
        "/bin/busybox:0x",
        "/bin/busybox:0x7fffffff",
        "/ktest/env:0x10",
        "/non_exist_file:100",
        "/sys:100",
        "/bin/busybox:",
        "/bin/busybox",
        "/bin/../bin/busybox:0x10",
    ] {
        v.push(format!("p {place}"));
        v.push(format!("r {place}"));
    }
    for name in ["uev", "ugrp/uev", "/uev", "ugrp/", "u-grp/uev"] {
        v.push(format!("p:{name} /bin/busybox:0x100"));
    }
    v.push("p2:uev /bin/busybox:0x100".into());
    for f in [
        a0,
        "$stack",
        "$stack0",
        "$stack10000",
        "$retval",
        "$comm",
        "$arg1",
        "@+0x10",
        "@+ab",
        "@symbol",
        "@0x1000",
        "+0($stack):string",
        "+0($stack):ustring",
        "+u0($stack):string",
        "\\1",
        "\\\"s\"",
        "$comm:string",
        "%none_reg",
        "+0(@+0x10):u32",
        "$stack0:symstr",
    ] {
        v.push(format!("p /bin/busybox:0x100 {f}"));
        v.push(format!("r /bin/busybox:0x100 {f}"));
    }
}

/// Event probes.
fn event_probes(v: &mut Vec<String>) {
    for e in [
        "e:eev sched.sched_switch",
        "e sched.sched_switch",
        "e:egrp/eev sched.sched_switch prev=$prev_pid",
        "e:eev sched.sched_switch prev=$prev_pid:u32 comm=$next_comm:string",
        "e:eev sched.sched_switch x=$no_such_field",
        "e:eev sched.sched_switch x=$comm",
        "e:eev sched.no_such_event",
        "e:eev no_such_sys.sched_switch",
        "e:eev sched_switch",
        "e:eev sched/sched_switch",
        "e:eev sched.",
        "e:eev sched.sched_switch x=%ax",
        "e:eev sched.sched_switch if",
        "e:eev sched.sched_switch if prev_pid == 1",
        "e:eev sched.sched_switch if no_field == 1",
        "e:eev sched.sched_switch p=$prev_pid if prev_pid > 0",
        "e:eev sched.sched_switch x=+0($prev_pid):u8",
        "e:eev sched.sched_switch x=@jiffies",
        "e:eev",
        "e: sched.sched_switch",
        "e:/eev sched.sched_switch",
    ] {
        v.push(e.to_string());
    }
}

/// Newer dynamic_events kinds and types: fprobes (`f`), tracepoint probes (`t`),
/// event-probe type casts, synthetic events (`s`), `%pd`/`%pD`. Captured from
/// the arm and riscv64 cells on (generated after the x86_64/arm64 captures).
fn newer_kinds(v: &mut Vec<String>, a0: &str) {
    for d in [
        "f vfs_read".to_string(),
        "f:fev vfs_read".into(),
        "f:fgrp/fev vfs_read".into(),
        "f vfs_read%return".into(),
        "f:fev vfs_read%return $retval".into(),
        "f:fev vfs_read $arg1".into(),
        "f:fev vfs_read $arg1:x32 $arg2".into(),
        "f:fev vfs_read%return $arg1".into(),
        "f:fev vfs_read $retval".into(),
        "f:fev vfs_read $stack0".into(),
        "f:fev vfs_read $comm".into(),
        format!("f:fev vfs_read {a0}"),
        "f:fev vfs_read+4".into(),
        "f:fev vfs_read%hoge".into(),
        "f:fev non_exist_func".into(),
        "f:fev vfs_read file".into(),
        "f:fev vfs_read no_such_param".into(),
        "f2:fev vfs_read%return".into(),
        "f2:fev vfs_read".into(),
        "f:fev vfs_read @jiffies:u32".into(),
        "f:fev vfs_read +0($arg1):u64".into(),
        "t sched_switch".into(),
        "t:tev sched_switch".into(),
        "t:tgrp/tev sched_switch".into(),
        "t:tev sched_switch prev".into(),
        "t:tev sched_switch $arg1".into(),
        "t:tev sched_switch $arg2".into(),
        "t:tev sched_switch prev->pid".into(),
        format!("t:tev sched_switch {a0}"),
        "t:tev no_such_tracepoint".into(),
        "t:tev sched_switch%return".into(),
        "t:tev sched_switch $comm".into(),
        "e:eev sched.sched_switch pid=$prev_pid:u16".into(),
        "e:eev sched.sched_switch pid=$prev_pid:x32".into(),
        "e:eev sched.sched_switch pid=$prev_pid:s64".into(),
        "e:eev sched.sched_switch c=$prev_comm:string".into(),
        "e:eev sched.sched_switch c=$prev_comm".into(),
        "e:eev sched.sched_switch c=+0($prev_comm):u8".into(),
        "e:eev sched.sched_switch $prev_pid".into(),
        "e:eev sched.sched_switch pid=$prev_pid:u8[2]".into(),
        "s:sev u64 lat".into(),
        "s:synthetic/sev u64 lat".into(),
        "s:sev u64 lat; char comm[16]".into(),
        "s:sev pid_t pid; unsigned int prio".into(),
        "s:sev no_such_type x".into(),
        "s:sev".into(),
        "s:sev u64".into(),
        "s:grp/sev u64 lat".into(),
        "s sev u64 lat".into(),
        format!("p vfs_read {a0}:%pD"),
        format!("p vfs_read f={a0}:%pD"),
        "p vfs_read $arg1:%pD".into(),
        format!("p vfs_read {a0}:%pd"),
        format!("p vfs_read {a0}:%pX"),
        "p vfs_read $arg*".into(),
        "p vfs_read $arg1 $arg*".into(),
        "r vfs_read $arg*".into(),
        "p vfs_read file->f_flags".into(),
        "p vfs_read file->f_flags:x32".into(),
        "r vfs_read $retval:x64".into(),
        "r vfs_read $retval:s32".into(),
        "p vfs_read $arg1:x32".into(),
        "p vfs_read $arg1x".into(),
        "p vfs_read x=$arg1".into(),
        "r vfs_read x=$arg1".into(),
        "p vfs_read+4 x=$arg1".into(),
        "p vfs_read count".into(),
        "r vfs_read count".into(),
    ] {
        v.push(d);
    }
}

/// The selftests' error cases (kprobe_syntax_errors.tc, uprobe_syntax_errors.tc).
fn selftest_errors(v: &mut Vec<String>) {
    for s in [
        "p100 vfs_read",
        "r1a111 vfs_read",
        "r100000 vfs_read",
        "p non_exist_func",
        "p hoge-fuga",
        "p hoge+1000-1000",
        "r vfs_read+10",
        "p:/bar vfs_read",
        "p:12345678901234567890123456789012345678901234567890123456789012345/bar vfs_read",
        "p:foo.1/bar vfs_read",
        "p: vfs_read",
        "p:foo/12345678901234567890123456789012345678901234567890123456789012345 vfs_read",
        "p:foo/bar.1 vfs_read",
        "p vfs_read $retval",
        "p vfs_read $stack10000",
        "p vfs_read $arg10000",
        "p vfs_read $none_var",
        "p vfs_read %none_reg",
        "p vfs_read @12345678abcde",
        "p vfs_read @+10",
        "p vfs_read arg1=\\x",
        "p vfs_read arg1=\\\"abcd",
        "p vfs_read +0@0)",
        "p vfs_read +0ab1(@0)",
        "p vfs_read +0(+0(@0)",
        "p vfs_read +0($comm)",
        "p vfs_read &1",
        "p vfs_read +0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(@0))))))))))))))",
        "p vfs_read +0(@11):u8[10",
        "p vfs_read +0(@11):u8[10]a",
        "p vfs_read +0(@11):u8[10a]",
        "p vfs_read +0(@11):u8[256]",
        "p vfs_read @11:unknown_type",
        "p vfs_read $stack0:string",
        "p vfs_read @11:b10@a/16",
        "p vfs_read arg123456789012345678901234567890=@11",
        "p vfs_read =@11",
        "p vfs_read var.1=@11",
        "p vfs_read var1=@11 var1=@12",
        "p vfs_read +1234567(+1234567(+1234567(+1234567(+1234567(+1234567(@1234))))))",
        "p vfs_read arg1=",
        "p vfs_read+3",
        "p vfs_read%hoge",
        "p vfs_read+10%return",
        "p /non_exist_file:100",
        "p /sys:100",
        "p /bin/sh:10a",
        "p /bin/sh:10(1a)",
        "p /bin/sh:10(10",
        "p /bin/sh:10(10)a",
        "p /bin/sh:10 @+ab",
        "p /bin/sh:10 @symbol",
        "p /bin/sh:10%hoge",
        "p /bin/sh:10(10)%return",
    ] {
        v.push(s.to_string());
    }
}
