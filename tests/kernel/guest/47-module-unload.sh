# A probed module unloaded while `ktrace trace` runs. The kernel keeps the
# kprobe event (still in dynamic_events, still enabled) but marks its kprobe
# gone ([GONE] in debugfs kprobes/list): it never fires again and nothing in
# tracefs says so. ktrace must keep the events before the unload, say that
# the module went and which probes died with it, exit 0 (the trace is
# complete up to then) and leave nothing behind.
# The module comes from the kernel's own Debian package (the rig reads this
# line and ships it as /ktest/modules/romfs.ko):
# ktest-modules: romfs
# What it holds is ktrace's own handling (sessions, cleanup, readers)
# more than one kernel's text or one architecture's: CI runs it on the
# newest 64-bit cells, x86_64 and arm64 7.2, and the oldest, x86_64 5.10
# (tests/kernel/README.md, "Which cells run what"); --script or
# KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:5.10 x86_64:7.2 arm64:7.2
. "$KTEST_LIB"

ktest probed_module_unloaded_while_tracing
ko=/ktest/modules/romfs.ko
if [ ! -f "$ko" ]; then
    skip "no $ko (the rig ships it for '# ktest-modules: romfs')"
elif ! out=$(insmod "$ko" 2>&1); then
    # the rig ships romfs.ko alone: where this build's romfs needs another
    # module (riscv64 7.2: an unknown symbol), it cannot load here
    case $out in
        *"unknown symbol"*) skip "romfs.ko needs a module the rig does not ship: $out; $(dmesg | grep -i 'unknown symbol' | tail -n 1)" ;;
        *) fail "insmod romfs.ko: $out" ;;
    esac
elif ! grep -q ' romfs_init_fs_context[[:space:]]*\[romfs\]' /proc/kallsyms; then
    rmmod romfs
    skip "romfs.ko has no romfs_init_fs_context in kallsyms"
elif need_entry_probe; then
    mkdir -p /tmp/mnt
    # mount -t romfs calls romfs_init_fs_context before it looks for the
    # device, so each attempt is one hit
    kt 'p:rm romfs_init_fs_context' -d 120
    mount -t romfs none /tmp/mnt 2>/dev/null
    mount -t romfs none /tmp/mnt 2>/dev/null
    sleep 0.5
    rmmod romfs
    rm_rc=$?
    gone=$(grep -c 'GONE' /sys/kernel/debug/kprobes/list 2>/dev/null)
    during=$(grep -c "ktrace_p${kpid}_.*/rm romfs_init_fs_context" "$TRACEFS/dynamic_events")
    mount -t romfs none /tmp/mnt 2>/dev/null
    ktwait
    n=$(grep -c ' rm: ' /tmp/kt.out)
    expect_eq "rmmod while the probe is enabled" "$rm_rc" 0 &&
        expect_eq "the kernel keeps the probe event after the unload" "$during" 1 &&
        expect_eq "exit status" "$code" 0 &&
        expect_eq "events before the unload kept" "$n" 2 &&
        expect_match "the unload reported" "$(cat /tmp/kt.err)" '^ktrace: warning: module romfs was unloaded while tracing: the kernel marked the kprobes of rm gone' &&
        expect_match "cleanup" "$(cat /tmp/kt.err)" 'cleanup removed 1 probe\(s\) and the instance' &&
        pass "$n events; kprobes/list [GONE] lines: ${gone:-no debugfs}; $(grep -E 'warning|cleanup' /tmp/kt.err | tr '\n' ';')"
fi
