# ktrace's session lifecycle on a kernel with kprobes: every exit path leaves
# nothing behind (normal end, SIGINT, SIGTERM, SIGHUP, broken pipe, SIGKILL
# then a reaping run), a concurrent raw-tracefs user is untouched, a rejected
# definition leaves tracefs as it was and shows the kernel's caret, profiles
# report hits and kretprobe misses.
# What it holds is ktrace's own handling (sessions, cleanup, readers)
# more than one kernel's text or one architecture's: CI runs it on the
# newest and the oldest x86_64 cells, 7.2 and 5.10 (arm64 7.2 too until 1
# Dec 2026: the matrix's longest cell, emulated arm64 costs about 1.5x
# x86_64's time; tests/kernel/README.md, "Which cells run what"); --script
# or KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:5.10 x86_64:7.2
. "$KTEST_LIB"
# every test here places a kprobe on a function entry
entry_probes_or_skip normal_end_events_and_summary sigINT_cleans_up sigTERM_cleans_up sigHUP_cleans_up broken_pipe_cleans_up sigkill_then_next_run_reaps sigkill_then_clean_reaps concurrent_raw_user_untouched two_sessions_at_once rejected_definition_leaves_nothing rejected_filter_leaves_nothing rejected_hist_trigger_shows_kernel_message kretprobe_profile_misses kprobes_disabled_globally_is_explained finds_tracefs_in_debugfs_and_mounts_it_when_absent features_and_kprobes_switch

OPEN="p:open do_sys_openat2 path=+0($(argreg 2)):ustring"

# Runs ktrace in the background until it says it is tracing; sets $kpid.
# Output goes to /tmp/kt.out and /tmp/kt.err.
kt_start() {
    rm -f /tmp/kt.out /tmp/kt.err
    ktrace trace "$@" >/tmp/kt.out 2>/tmp/kt.err &
    kpid=$!
    wait_tracing /tmp/kt.err $kpid 100
}

state() { cat "$TRACEFS/dynamic_events"; ls "$TRACEFS/instances"; }

ktest normal_end_events_and_summary
ktrace trace "$OPEN" -d 2 >/tmp/kt.out 2>/tmp/kt.err &
kpid=$!
wait_tracing /tmp/kt.err $kpid
cat /ktest/env >/dev/null
wait $kpid
code=$?
expect_eq "exit status" "$code" 0 &&
    expect_match "event with path" "$(cat /tmp/kt.out)" ' open: \(do_sys_openat2\+0x0/0x[0-9a-f]+\) path="/ktest/env"' &&
    expect_match "summary" "$(cat /tmp/kt.err)" 'event\(s\), 0 lost \(duration reached\)' &&
    expect_match "profile line" "$(cat /tmp/kt.err)" '^  open +hits +[1-9][0-9]* +misses +0' &&
    pass "$(grep -E 'event|hits' /tmp/kt.err | tr -s ' ' | tr '\n' ';')"

for sig in INT TERM HUP; do
    ktest "sig${sig}_cleans_up"
    kt_start "$OPEN" -d 120
    expect_match "tracing" "$(cat /tmp/kt.err)" 'Ctrl-C to stop' &&
        expect_match "probe present while running" "$(cat $TRACEFS/dynamic_events)" "ktrace_p${kpid}_" &&
        kill -$sig $kpid && wait $kpid
    expect_empty "leftovers after SIG$sig" "$(state | grep "ktrace_p${kpid}_")" &&
        expect_match "summary" "$(cat /tmp/kt.err)" "\(signal " &&
        pass
done

ktest broken_pipe_cleans_up
rm -f /tmp/kt.err
( ktrace trace "$OPEN" -d 120 2>/tmp/kt.err; echo "rc=$?" >/tmp/kt.rc ) | head -n 1 >/tmp/kt.out &
i=0
while [ ! -s /tmp/kt.rc ] && [ $i -lt 100 ]; do
    cat /ktest/env >/dev/null
    sleep 0.1
    i=$((i + 1))
done
expect_match "first line" "$(cat /tmp/kt.out)" ' open: ' &&
    expect_match "stopped on EPIPE" "$(cat /tmp/kt.err)" '\(output closed\)' &&
    expect_empty "leftovers" "$(state | grep ktrace_p)" && pass
rm -f /tmp/kt.rc

ktest sigkill_then_next_run_reaps
kt_start "$OPEN" -d 120
kill -KILL $kpid
wait $kpid 2>/dev/null
left=$(state | grep "ktrace_p${kpid}_")
expect_ne "SIGKILL leaves the session behind" "$left" "" &&
    expect_match "ktrace profile reaps it" "$(ktrace profile 2>&1)" "removed leftovers of dead session ktrace_p${kpid}_" &&
    expect_empty "nothing left" "$(state | grep "ktrace_p${kpid}_")" && pass

ktest sigkill_then_clean_reaps
kt_start "$OPEN" -d 120
kill -KILL $kpid
wait $kpid 2>/dev/null
expect_match "clean --list sees it dead" "$(ktrace clean --list)" "ktrace_p${kpid}_.*dead" &&
    expect_match "ktrace clean reaps it" "$(ktrace clean 2>&1)" "removed leftovers of dead session ktrace_p${kpid}_" &&
    expect_empty "nothing left" "$(state | grep "ktrace_p${kpid}_")" && pass

ktest concurrent_raw_user_untouched
kprobe_add "p:othertool/open do_sys_openat2" || exit 0
other=$(instance_new other)
tfs_set "$other/buffer_size_kb" 300
tfs_set "$other/trace_clock" global
event_enable "$other" othertool/open
cat /ktest/env >/dev/null
snap() {
    cat "$other/trace" "$other/buffer_size_kb" "$other/trace_clock" "$other/events/othertool/open/enable"
    grep othertool "$TRACEFS/dynamic_events"
    cat "$TRACEFS/buffer_size_kb" "$TRACEFS/trace_clock" "$TRACEFS/tracing_on"
}
event_enable "$other" othertool/open 0
before=$(snap)
ktrace trace "$OPEN" -d 1 >/dev/null 2>/tmp/kt.err
after=$(snap)
teardown "$other" othertool/open
expect_match "other trace has its event" "$before" ' open: \(do_sys_openat2' &&
    expect_eq "other tool's state" "$after" "$before" && pass

ktest two_sessions_at_once
ktrace trace "$OPEN" -d 3 >/tmp/kt.a 2>/tmp/kt.ae &
a=$!
ktrace trace "$OPEN" -d 3 >/tmp/kt.b 2>/tmp/kt.be &
b=$!
wait_tracing /tmp/kt.ae $a
wait_tracing /tmp/kt.be $b
cat /ktest/env >/dev/null
wait $a; ra=$?
wait $b; rb=$?
expect_eq "both succeed" "$ra $rb" "0 0" &&
    expect_match "a saw it" "$(cat /tmp/kt.a)" 'path="/ktest/env"' &&
    expect_match "b saw it" "$(cat /tmp/kt.b)" 'path="/ktest/env"' && pass

ktest rejected_definition_leaves_nothing
before=$(state)
ktrace trace "$OPEN" "p:bad do_sys_openat2 x=%nosuchreg" "p:three do_sys_openat2" >/tmp/kt.out 2>/tmp/kt.err
code=$?
after=$(state)
expect_eq "exit status" "$code" 1 &&
    expect_match "kernel message (from ktrace's check before any write, or the kernel)" "$(cat /tmp/kt.err)" '(kernel|trace_kprobe): .*(register|argument)' &&
    expect_match "caret" "$(cat /tmp/kt.err)" '^ +\^$' &&
    expect_eq "tracefs as before" "$after" "$before" && pass

ktest rejected_filter_leaves_nothing
before=$(state)
ktrace trace "$OPEN" -f 'nosuchfield == 1' >/tmp/kt.out 2>/tmp/kt.err
code=$?
expect_eq "exit status" "$code" 1 &&
    expect_match "kernel message" "$(cat /tmp/kt.err)" 'kernel: Field not found' &&
    expect_eq "tracefs as before" "$(state)" "$before" && pass

ktest rejected_hist_trigger_shows_kernel_message
if ! grep -q 'hist:keys' "$TRACEFS/README"; then
    skip "kernel without hist triggers"
else
    before=$(state)
    ktrace trace "$OPEN" --trigger 'hist:keys=nosuchfield' >/tmp/kt.out 2>/tmp/kt.err
    code=$?
    expect_eq "exit status" "$code" 1 &&
        expect_match "kernel message" "$(cat /tmp/kt.err)" '^kernel: .*[Ff]ield' &&
        expect_match "caret" "$(cat /tmp/kt.err)" '^ +\^$' &&
        expect_nomatch "the user's trigger shown, not ktrace's condition" "$(cat /tmp/kt.err)" 'common_pid !=' &&
        expect_eq "tracefs as before" "$(state)" "$before" &&
        pass "$(grep -A2 '^kernel:' /tmp/kt.err | tr '\n' '|')"
fi

ktest kretprobe_profile_misses
# maxactive 1 on a return probe of a sleeping function: concurrent sleepers
# find no free return instance, which kprobe_profile counts as misses.
ktrace trace 'r1:nap hrtimer_nanosleep ret=$retval' 'p:napin hrtimer_nanosleep' -d 4 >/tmp/kt.out 2>/tmp/kt.err &
kpid=$!
wait_tracing /tmp/kt.err $kpid
for i in 1 2 3 4 5 6; do sleep 1 & done
wait
expect_match "entries" "$(cat /tmp/kt.err)" '^  napin +hits +([7-9]|[1-9][0-9])' &&
    expect_match "return hits" "$(cat /tmp/kt.err)" '^  nap +hits +[1-9]' &&
    expect_match "miss warning" "$(cat /tmp/kt.err)" 'warning: .*nap: [1-9][0-9]* return\(s\) missed.*maxactive' &&
    pass "$(grep -E 'hits|warning' /tmp/kt.err | tr -s ' ' | tr '\n' ';')"
mkdir -p "$KTEST_OUT" && cp /tmp/kt.err "$KTEST_OUT/session-kretprobe.err"

ktest kprobes_disabled_globally_is_explained
KP=/sys/kernel/debug/kprobes/enabled
if [ ! -w $KP ]; then
    skip "no $KP"
else
    echo 0 >$KP
    out=$(ktrace trace "$OPEN" -d 1 2>&1)
    code=$?
    echo 1 >$KP
    expect_eq "exit status" "$code" 1 &&
        expect_match "explained" "$out" 'kprobes are disabled globally' &&
        expect_match "what to do" "$out" "echo 1 > $KP" &&
        expect_empty "leftovers" "$(state | grep ktrace_p)" && pass
fi

ktest finds_tracefs_in_debugfs_and_mounts_it_when_absent
umount /sys/kernel/tracing
out1=$(ktrace clean --list 2>&1)
code1=$?
m1=$(grep ' tracefs ' /proc/mounts | cut -d' ' -f2 | tr '\n' ' ')
umount /sys/kernel/debug/tracing 2>/dev/null
umount /sys/kernel/debug
out2=$(ktrace trace "$OPEN" -d 1 2>&1)
code2=$?
m2=$(grep ' tracefs ' /proc/mounts | cut -d' ' -f2 | tr '\n' ' ')
mount -t debugfs nodev /sys/kernel/debug
grep -q ' /sys/kernel/tracing tracefs' /proc/mounts || mount -t tracefs nodev /sys/kernel/tracing
expect_eq "clean without /sys/kernel/tracing" "$code1" 0 &&
    expect_match "used the debugfs place" "$m1" '/sys/kernel/debug/tracing' &&
    expect_eq "trace with nothing mounted" "$code2" 0 &&
    expect_match "mounted tracefs itself" "$m2" '^/sys/kernel/tracing ' &&
    expect_empty "leftovers" "$(state | grep ktrace_p)" && pass "$m1 / $m2"

ktest features_and_kprobes_switch
expect_ok "kprobes enabled" grep -q 1 /sys/kernel/debug/kprobes/enabled && pass
