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
expect_eq "uname -m" "$(uname -m)" "$(uname_m)" && pass "$(uname -r) $KTEST_KERNEL_VERSION"

# what the other suites decide from (a test that needs a missing one skips)
ktest kernel_features
pass "hist=$(has_hist && echo y || echo n) argN=$(has_argN && echo y || echo n) btf=$(has_btf && echo y || echo n) entry_kprobe=$([ -z "$(entry_probe_refused)" ] && echo y || echo "n: $(entry_probe_refused)") records=$([ -z "$(kprobe_records_missing)" ] && echo y || echo "n: $(kprobe_records_missing)")"
