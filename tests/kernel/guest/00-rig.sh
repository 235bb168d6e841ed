# The rig itself: the static ktrace runs on the guest architecture, and the
# kernel has what the other suites rely on.
. "$KTEST_LIB"

ktest ktrace_version
v=$(ktrace --version 2>&1)
rc=$?
expect_eq "ktrace --version exit status" "$rc" 0 &&
    expect_match "ktrace --version output" "$v" '^ktrace [0-9]+\.[0-9]+\.[0-9]+' &&
    pass "$v"

ktest tracefs_mounted
expect_match "mounts" "$(cat /proc/mounts)" '^[^ ]+ /sys/kernel/tracing tracefs ' &&
    expect_ok "kprobe_events readable" cat "$TRACEFS/kprobe_events" &&
    expect_empty "dynamic_events at boot" "$(cat "$TRACEFS/dynamic_events")" &&
    pass

ktest kernel_arch
want=$KTEST_ARCH
[ "$want" = arm64 ] && want=aarch64
expect_eq "uname -m" "$(uname -m)" "$want" && pass "$(uname -r) $KTEST_KERNEL_VERSION"
