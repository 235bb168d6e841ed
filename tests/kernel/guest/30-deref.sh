# Pointer dereference: do_wait(struct wait_opts *wo) with +0(arg1):u32 (wo_type)
# and +4(arg1) (wo_flags). kernel_wait4(-1, ...) sets wo_type = PIDTYPE_MAX
# and wo_flags |= WEXITED (kernel/exit.c), so a shell `wait` after a child
# (busybox waits with waitpid(-1, ...)) shows both.
. "$KTEST_LIB"

ktest do_wait_deref
need_entry_probe || exit 0
if ! grep -q ' do_wait$' /proc/kallsyms; then
    fail "do_wait not in /proc/kallsyms"
    exit 0
fi
a=$(argreg 1)
kprobe_add "p:ktest/wait4 kernel_wait4 upid=$a:s32" || exit 0
kprobe_add "p:ktest/dowait do_wait type=+0($a):u32 flags=+4($a):x32" || exit 0
inst=$(instance_new deref)
event_enable "$inst" ktest/wait4
event_enable "$inst" ktest/dowait
/bin/true &
wait $!
event_enable "$inst" ktest/wait4 0
event_enable "$inst" ktest/dowait 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/wait4 ktest/dowait
# PIDTYPE_MAX is 4 in 6.1 and 6.12 (enum pid_type: PID, TGID, PGID, SID, MAX
# in include/linux/pid.h); WEXITED is 0x4 (include/uapi/linux/wait.h)
expect_match "wait4(-1) seen" "$out" ' wait4: '"$(at_entry kernel_wait4)"' upid=-1$' &&
    expect_match "do_wait deref" "$out" ' dowait: '"$(at_entry do_wait)"' type=4 flags=0x[0-9a-f]*[4567cdef]$' &&
    pass
