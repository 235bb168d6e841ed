# Return probes through raw tracefs writes: $retval, maxactive.
. "$KTEST_LIB"

ktest retval_openat2
# a return probe is a kprobe on the function's entry too
need_entry_probe && {
kprobe_add "r4:ktest/openret do_sys_openat2 ret=\$retval:s32" || exit 0
# the listing keeps the maxactive the kernel accepted
expect_match "kprobe_events listing" "$(tfs_read kprobe_events)" '^r4:ktest/openret do_sys_openat2 ret=\$retval:s32$'
inst=$(instance_new ret)
event_enable "$inst" ktest/openret
cat /ktest/env >/dev/null
cat /ktest/no-such-file 2>/dev/null
event_enable "$inst" ktest/openret 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/openret
expect_match "successful open returns an fd" "$out" \
    "$(task_col cat)"'.* openret: \([a-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+ <- do_sys_openat2\) ret=[0-9]+$' &&
    expect_match "missing file returns -ENOENT" "$out" \
        "$(task_col cat)"'.* openret: \([a-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+ <- do_sys_openat2\) ret=-2$' &&
    pass
}

# maxactive above the kernel's limit (KRETPROBE_MAXACTIVE_MAX = 4096) is refused
ktest maxactive_limit
out=$(tfs_write kprobe_events "r9999:ktest/toomany do_sys_openat2")
rc=$?
expect_ne "r9999 accepted" "$rc" 0 &&
    expect_match "error_log names maxactive" "$out" '[Mm]axactive' &&
    expect_empty "nothing created" "$(tfs_read dynamic_events)" &&
    pass
