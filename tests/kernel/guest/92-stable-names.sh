# Names that stay put (issue 21 item 2) on real kprobes: the kernel holds
# each session's probes in its own group (ktrace_p<PID>_..., checked in
# dynamic_events while tracing), but what ktrace shows and writes names the
# stable system `ktrace` (or --group NAME): JSON's "system" of two runs,
# --raw, the report of a recording with stacks, and the kernel engine of
# `count` with --group. The recordings are shipped in $KTEST_OUT
# (stable-<arch>-N.dat) for trace-cmd on the host.
. "$KTEST_LIB"
entry_probes_or_skip json_system_is_stable group_names_raw_and_record count_kernel_engine_with_group

ktest json_system_is_stable
kt --json 'p:op do_sys_openat2' -d 60
during=$(cat "$TRACEFS/dynamic_events")
cat /ktest/env >/dev/null
ktwait
first=$(sed -n 's/.*"system":"\([^"]*\)","event":"\([^"]*\)".*/\1\/\2/p' /tmp/kt.out | sort -u)
kt --json 'p:op do_sys_openat2' -d 60
cat /ktest/env >/dev/null
ktwait
second=$(sed -n 's/.*"system":"\([^"]*\)","event":"\([^"]*\)".*/\1\/\2/p' /tmp/kt.out | sort -u)
expect_eq "exit status" "$code" 0 &&
    expect_match "kernel group is the session's" "$during" "^p:ktrace_p[0-9]+_s[0-9]+_n[0-9]+/op do_sys_openat2" &&
    expect_eq "first run" "$first" "ktrace/op" &&
    expect_eq "second run" "$second" "ktrace/op" &&
    expect_nomatch "no session group shown" "$(cat /tmp/kt.out /tmp/kt.err)" '"system":"ktrace_p' &&
    pass "both runs: $first"

ktest group_names_raw_and_record
kt --raw --group app 'p:op do_sys_openat2' 'p:mine/op2 do_sys_openat2' -d 60
cat /ktest/env >/dev/null
ktwait
raw=$(cat /tmp/kt.out)
mkdir -p "$KTEST_OUT"
ok=1
for n in 1 2; do
    rm -f /tmp/rec.dat
    ktrace record --stack --group app 'p:op do_sys_openat2' -d 60 -o /tmp/rec.dat >/dev/null 2>/tmp/rec.err &
    kpid=$!
    wait_tracing /tmp/rec.err $kpid
    cat /ktest/env >/dev/null
    ktwait
    [ "$code" = 0 ] || ok=0
    cp /tmp/rec.dat "$KTEST_OUT/stable-$KTEST_ARCH-$n.dat"
    ktrace report --json /tmp/rec.dat >/tmp/rep$n.json 2>/tmp/rep.err || ok=0
done
expect_eq "exit status" "$code" 0 &&
    expect_eq "both recordings" "$ok" 1 &&
    expect_match "raw: --group" "$raw" ' app:op ' &&
    expect_match "raw: the definition's group" "$raw" ' mine:op2 ' &&
    expect_nomatch "raw: no session group" "$raw" 'ktrace_p' &&
    expect_match "report 1" "$(cat /tmp/rep1.json)" '"system":"app","event":"op"' &&
    expect_match "report 2" "$(cat /tmp/rep2.json)" '"system":"app","event":"op"' &&
    expect_nomatch "reports: no session group" "$(cat /tmp/rep1.json /tmp/rep2.json)" 'ktrace_p' &&
    pass "$(grep -c '"system":"app"' /tmp/rep1.json) and $(grep -c '"system":"app"' /tmp/rep2.json) app/op records"

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
