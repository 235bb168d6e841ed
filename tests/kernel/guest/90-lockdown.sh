# ktrace on a kernel locked down for confidentiality: the kernel mounts
# tracefs and lists its files but refuses to open them, to root too
# (LOCKDOWN_TRACEFS; kprobes are LOCKDOWN_KPROBES). ktrace must say so,
# naming lockdown, exit 1 and change nothing. Needs its own boot:
#   tests/kernel/run --append lockdown=confidentiality --script tests/kernel/guest/90-lockdown.sh
# (in a normal boot the tests skip).
. "$KTEST_LIB"

locked() { grep -q 'lockdown=confidentiality' /proc/cmdline; }
groups() { ls "$TRACEFS/events" | grep '^ktrace_'; ls "$TRACEFS/instances" | grep '^ktrace_'; }

ktest lockdown_named_with_securityfs
if ! locked; then
    skip "booted without lockdown=confidentiality"
else
    mount -t securityfs none /sys/kernel/security 2>/dev/null
    mode=$(cat /sys/kernel/security/lockdown 2>&1)
    ktrace trace do_sys_openat2 -d 2 >/tmp/kt.out 2>/tmp/kt.err
    code=$?
    err=$(cat /tmp/kt.err)
    expect_match "lockdown active" "$mode" '\[confidentiality\]' &&
        expect_eq "exit status" "$code" 1 &&
        expect_match "lockdown named" "$err" 'the kernel is locked down \(confidentiality, /sys/kernel/security/lockdown\)' &&
        expect_empty "no events" "$(cat /tmp/kt.out)" &&
        expect_empty "nothing created" "$(groups)" &&
        pass "$(tr '\n' ' ' </tmp/kt.err)"
    umount /sys/kernel/security 2>/dev/null
fi

ktest lockdown_guessed_without_securityfs
if ! locked; then
    skip "booted without lockdown=confidentiality"
elif [ -r /sys/kernel/security/lockdown ]; then
    skip "securityfs stays mounted"
else
    ktrace trace do_sys_openat2 -d 2 >/tmp/kt.out 2>/tmp/kt.err
    code=$?
    expect_eq "exit status" "$code" 1 &&
        expect_match "lockdown named" "$(cat /tmp/kt.err)" 'probably locked down' &&
        expect_empty "nothing created" "$(groups)" &&
        pass "$(tr '\n' ' ' </tmp/kt.err)"
fi

ktest lockdown_clean_and_list
if ! locked; then
    skip "booted without lockdown=confidentiality"
else
    ktrace clean >/tmp/kt.out 2>/tmp/kt.err
    c1=$?
    ktrace list --probes >>/tmp/kt.out 2>>/tmp/kt.err
    c2=$?
    expect_eq "clean exit status" "$c1" 1 &&
        expect_eq "list --probes exit status" "$c2" 1 &&
        expect_match "lockdown named" "$(cat /tmp/kt.err)" 'locked down' &&
        expect_nomatch "not 'not mounted'" "$(cat /tmp/kt.err)" 'not mounted' &&
        pass "$(tr '\n' ' ' </tmp/kt.err | cut -c1-300)"
fi
