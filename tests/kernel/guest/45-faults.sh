# Faults while `ktrace trace` runs on a kernel with kprobes: a CPU taken
# offline and back online, and someone else trying to remove ktrace's
# instance or its probes. Each: events before and after the fault are
# kept, ktrace ends normally (exit 0) and leaves nothing behind.
# What it holds is ktrace's own handling (sessions, cleanup, readers)
# more than one kernel's text or one architecture's: CI runs it on the
# newest 64-bit cells, x86_64 and arm64 7.2, and the oldest, x86_64 5.10
# (tests/kernel/README.md, "Which cells run what"); --script or
# KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:5.10 x86_64:7.2 arm64:7.2
. "$KTEST_LIB"

opens() { # CPU N — N opens of /ktest/env pinned to CPU
    i=0
    while [ $i -lt "$2" ]; do taskset -c "$1" cat /ktest/env >/dev/null; i=$((i + 1)); done
}

ktest cpu_offline_and_online
if [ ! -w /sys/devices/system/cpu/cpu1/online ]; then
    skip "cpu1 cannot be taken offline here"
elif need_entry_probe; then
    kt 'p:op do_sys_openat2 path=+0(arg2):ustring' -f 'path == "/ktest/env"'
    opens 1 3
    echo 0 >/sys/devices/system/cpu/cpu1/online
    opens 0 3
    echo 1 >/sys/devices/system/cpu/cpu1/online
    sleep 0.5
    opens 1 3
    sleep 0.5
    ktwait
    on1=$(grep -c ' \[001\] .* op: ' /tmp/kt.out)
    on0=$(grep -c ' \[000\] .* op: ' /tmp/kt.out)
    expect_eq "exit status" "$code" 0 &&
        expect_eq "events on cpu1, before and after" "$on1" 6 &&
        expect_eq "events on cpu0 while cpu1 was offline" "$on0" 3 &&
        pass "cpu0 $on0, cpu1 $on1 events; $(grep 'event(s)' /tmp/kt.err)"
fi

ktest others_cannot_remove_the_session
if need_entry_probe; then
    kt 'p:op do_sys_openat2 path=+0(arg2):ustring' -f 'path == "/ktest/env"'
    sess=$(sed -n 's/.*in session \([^;]*\);.*/\1/p' /tmp/kt.err)
    cat /ktest/env >/dev/null
    rmdir "$TRACEFS/instances/$sess" 2>/dev/null
    rm_inst=$?
    echo "-:$sess/op" >>"$TRACEFS/dynamic_events" 2>/dev/null
    rm_probe=$?
    cat /ktest/env >/dev/null
    sleep 0.5
    ktwait
    n=$(grep -c ' op: ' /tmp/kt.out)
    expect_ne "instance removal refused while ktrace reads it" "$rm_inst" 0 &&
        expect_ne "probe removal refused while enabled" "$rm_probe" 0 &&
        expect_eq "exit status" "$code" 0 &&
        expect_eq "events before and after" "$n" 2 &&
        pass "$(grep 'cleanup' /tmp/kt.err)"
fi
