# Entry kprobes through raw tracefs writes: registers, a user string, $comm.
. "$KTEST_LIB"

ktest entry_openat2_filename
kprobe_add "p:ktest/open do_sys_openat2 dfd=$(argreg 1):s32 path=+0($(argreg 2)):ustring comm=\$comm" || exit 0
inst=$(instance_new entry) || { fail "cannot create instance"; exit 0; }
tfs_set instances/ktest_entry/events/ktest/open/enable 1 || fail "cannot enable ktest/open"
cat /ktest/env >/dev/null
tfs_set instances/ktest_entry/events/ktest/open/enable 0
out=$(trace_lines "$inst")
rmdir "$inst"
tfs_write kprobe_events "-:ktest/open"
expect_match "trace has the opened path" "$out" \
    ' open: \(do_sys_openat2\+0x0/0x[0-9a-f]+\) dfd=-100 path="/ktest/env" comm="cat"$' &&
    pass
