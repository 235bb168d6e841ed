# Names that stay put (issue 21 item 2) on real kprobes: the kernel holds
# each session's probes in its own group (ktrace_p<PID>_..., checked in
# dynamic_events while tracing), but what ktrace shows and writes names the
# stable system `ktrace` (or --group NAME, or the group a definition
# wrote): JSON's "system", the report of a recording with stacks, and the
# kernel engine of `count` with --group. The recording is shipped in
# $KTEST_OUT (stable-<arch>.dat) for trace-cmd on the host. (--raw and two
# recordings compared are the host's tests/host_stable_names.rs.)
# What it holds is ktrace's naming, not the kernel's: the two 7.2 cells
# of the 64-bit families prove it.
# ktest-cells: x86_64:7.2 arm64:7.2
. "$KTEST_LIB"
entry_probes_or_skip json_system_is_stable group_names_json_and_record count_kernel_engine_with_group

ktest json_system_is_stable
kt --json 'p:op do_sys_openat2' -d 60
during=$(cat "$TRACEFS/dynamic_events")
cat /ktest/env >/dev/null
ktwait
first=$(sed -n 's/.*"system":"\([^"]*\)","event":"\([^"]*\)".*/\1\/\2/p' /tmp/kt.out | sort -u)
expect_eq "exit status" "$code" 0 &&
    expect_match "kernel group is the session's" "$during" "^p:ktrace_p[0-9]+_s[0-9]+_n[0-9]+/op do_sys_openat2" &&
    expect_eq "shown" "$first" "ktrace/op" &&
    expect_nomatch "no session group shown" "$(cat /tmp/kt.out /tmp/kt.err)" 'ktrace_p[0-9]+_s[0-9]+_n[0-9]+/' &&
    pass "$first, kernel: $(_kt_short "$during")"

ktest group_names_json_and_record
kt --json --group app 'p:op do_sys_openat2' 'p:mine/op2 do_sys_openat2' -d 60
cat /ktest/env >/dev/null
ktwait
shown=$(sed -n 's/.*"system":"\([^"]*\)","event":"\([^"]*\)".*/\1\/\2/p' /tmp/kt.out | sort -u | tr '\n' ' ')
rm -f /tmp/rec.dat
ktrace record --stack --group app 'p:op do_sys_openat2' -d 60 -o /tmp/rec.dat >/dev/null 2>/tmp/rec.err &
kpid=$!
wait_tracing /tmp/rec.err $kpid
cat /ktest/env >/dev/null
ktwait
mkdir -p "$KTEST_OUT"
cp /tmp/rec.dat "$KTEST_OUT/stable-$KTEST_ARCH.dat"
ktrace report --json /tmp/rec.dat >/tmp/rep.json 2>/tmp/rep.err
rc=$?
expect_eq "record exit" "$code" 0 &&
    expect_eq "report exit" "$rc" 0 &&
    expect_eq "trace: --group and the definition's group" "$shown" "app/op mine/op2 " &&
    expect_match "report" "$(cat /tmp/rep.json)" '"system":"app","event":"op"' &&
    expect_match "report: stacks" "$(cat /tmp/rep.json)" '"system":"ftrace","event":"kernel_stack"' &&
    expect_nomatch "report: no session group" "$(cat /tmp/rep.json)" 'ktrace_p' &&
    pass "$shown; $(grep -c '"system":"app"' /tmp/rep.json) app/op records"

ktest count_kernel_engine_with_group
if ! has_hist; then
    skip "no hist triggers (README lists none): kernel engine unavailable"
else
    k=$(ktrace count ksys_sync --group app --by func --json --engine kernel -- sh -c 'sync; sync; sync' 2>/tmp/k.err)
    kc=$?
    expect_eq "exit ($(_kt_short "$(cat /tmp/k.err)"))" "$kc" 0 &&
        expect_match "kernel engine" "$(cat /tmp/k.err)" 'in the kernel' &&
        expect_match "3 calls" "$k" '"total":3,' &&
        pass "$(_kt_short "$k")"
fi
