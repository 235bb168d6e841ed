# A probe at a non-zero offset inside a function, and kprobe_profile hit
# counts. x86_64 rejects offsets that are not instruction boundaries, so try
# offsets upwards until the kernel accepts one; arm64 instructions are 4 bytes.
. "$KTEST_LIB"

profile_hits() { # EVENT -> nhit column of kprobe_profile (it names events
    # without their group: "  NAME  NHIT  NMISSED")
    awk -v e="$1" '$1 == e { print $2 }' "$TRACEFS/kprobe_profile"
}

ktest offset_in_function
need_kprobe_records || exit 0
step=$(insn_step)
off=$step
accepted=
rejected=0
while [ "$off" -le 32 ]; do
    if tfs_write kprobe_events "p:ktest/off do_sys_openat2+$off" >/dev/null; then
        accepted=$off
        break
    fi
    rejected=$((rejected + 1))
    off=$((off + step))
done
if [ -z "$accepted" ]; then
    fail "no offset in 1..32 of do_sys_openat2 accepted"
    exit 0
fi
expect_match "listing" "$(tfs_read kprobe_events)" "^p:ktest/off do_sys_openat2\+$accepted\$"
inst=$(instance_new off)
event_enable "$inst" ktest/off
cat /ktest/env >/dev/null
event_enable "$inst" ktest/off 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/off
hex=$(printf '%x' "$accepted")
expect_match "fires at the offset" "$out" "$(task_col cat).* off: \\(do_sys_openat2\\+0x$hex/0x[0-9a-f]+\\)\$" &&
    pass "+$accepted accepted after $rejected rejected"

ktest kprobe_profile_hits
need_entry_probe || exit 0
kprobe_add "p:ktest/prof do_sys_openat2" || exit 0
inst=$(instance_new prof)
before=$(profile_hits prof)
expect_eq "hits before enabling" "$before" 0
event_enable "$inst" ktest/prof
for i in 1 2 3 4 5; do cat /ktest/env >/dev/null; done
mid=$(profile_hits prof)
event_enable "$inst" ktest/prof 0
# (the disabling write itself opens a file, so count from here)
off_hits=$(profile_hits prof)
for i in 1 2 3; do cat /ktest/env >/dev/null; done
after=$(profile_hits prof)
n=$(trace_lines "$inst" | grep -c ' prof: ')
teardown "$inst" ktest/prof
expect_ge "hits after 5 opens" "$mid" 5 &&
    expect_eq "hits while disabled do not grow" "$after" "$off_hits" &&
    expect_ge "events recorded" "$n" 5 &&
    pass "$mid hits"
