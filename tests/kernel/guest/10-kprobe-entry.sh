# Entry kprobes through raw tracefs writes: argument registers, a user
# string, a kernel string behind a pointer, $comm.
. "$KTEST_LIB"

ktest entry_openat2_filename
need_entry_probe && {
kprobe_add "p:ktest/open do_sys_openat2 dfd=$(argreg 1):s32 path=+0($(argreg 2)):ustring comm=\$comm" || exit 0
inst=$(instance_new entry) || { fail "cannot create instance"; exit 0; }
event_enable "$inst" ktest/open || fail "cannot enable ktest/open"
cat /ktest/env >/dev/null
event_enable "$inst" ktest/open 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/open
expect_match "trace has the opened path" "$out" \
    ' open: '"$(at_entry do_sys_openat2)"' dfd=-100 path="/ktest/env" comm="cat"$' &&
    pass
}

# $comm is the task's comm, the same name ftrace prints in the line prefix
ktest comm_fetcharg
need_entry_probe && {
kprobe_add "p:ktest/comm do_sys_openat2 comm=\$comm" || exit 0
inst=$(instance_new comm)
event_enable "$inst" ktest/comm
head -n 1 /ktest/env >/dev/null
event_enable "$inst" ktest/comm 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/comm
expect_match "comm of head" "$out" "$(task_col head)"'.* comm: '"$(at_entry do_sys_openat2)"' comm="head"$' &&
    pass
}

# `string` reads kernel memory: do_filp_open(dfd, struct filename *name, ...)
# where struct filename starts with `const char *name` (include/linux/fs.h)
ktest string_kernel_pointer
if ! need_entry_probe; then
    :
elif ! grep -q ' do_filp_open$' /proc/kallsyms; then
    skip "do_filp_open not in /proc/kallsyms"
else
    kprobe_add "p:ktest/filp do_filp_open name=+0(+0($(argreg 2))):string uname=+0(+0($(argreg 2))):ustring" || exit 0
    inst=$(instance_new filp)
    event_enable "$inst" ktest/filp
    cat /ktest/env >/dev/null
    event_enable "$inst" ktest/filp 0
    out=$(trace_lines "$inst")
    teardown "$inst" ktest/filp
    # `ustring` on a kernel address must not produce the string: it faults
    expect_match "kernel string and faulting ustring" "$out" \
        ' filp: '"$(at_entry do_filp_open)"' name="/ktest/env" uname=\(fault\)$' &&
        pass
fi
