# Tracing across a reboot (issue 20 item 3): the boot-time probes' events in
# the boot-mapped instance of `ktrace boot --persistent` outlive a reset that
# keeps RAM, and `ktrace report --previous-boot` prints them on the next boot
# as the kernel's own instances/ktrace/trace does. Not in a cell's default
# list: it needs a reboot and its own command line, so scripts/test runs it
# as a job of its own on arm64 7.2 —
#   tests/kernel/run --arch arm64 --kernel 7.2 \
#     --boot-defs tests/kernel/guest/persistent-defs.txt --boot-persistent 8M \
#     --script tests/kernel/guest/97-persistent.sh
# The line below has the rig start QEMU without -no-reboot. This script runs
# on three boots: the first arms the probes in the instance and resets; the
# second compares the text of `report --previous-boot` with the kernel's
# trace (the probe events and the trace_marker line), arms them again and
# resets; the third compares `--json` and resets once more; the fourth
# writes `--perfetto` to $KTEST_OUT with the kernel's lines beside it, for
# the host to decode (tests/kernel/host/perfetto.sh: host/perfetto_previous-boot). It tells
# them apart by the kernel's own word (a kept buffer's boot logs "Ring buffer
# meta [N] is from previous boot!") and by the marker the previous boot wrote
# before its reset. A reset that loses the memory (or a reservation that
# KASLR moved, now and then on x86_64) looks like a first boot again: the
# boots start over, and the run ends in the rig's timeout if that keeps
# happening. It passes on x86_64 7.2 as well (same command, --arch x86_64),
# where the kernel's text moves at each boot (see print_fmt_form below).
# ktest-allow-reboot
. "$KTEST_LIB"

I=$TRACEFS/instances/ktrace
if ! grep -q 'trace_instance=ktrace@' /proc/cmdline || [ "$KTEST_ALLOW_REBOOT" != 1 ]; then
    ktest persistent_instance
    skip "not booted with ktrace boot --persistent and a reboot allowed (see the head of this script)"
    exit 0
fi
klog=$(timeout 1 cat /dev/kmsg 2>/dev/null | cut -d';' -f2-)
echo "kernel log on the instance: $(printf '%s\n' "$klog" | grep -E 'boot instance|Ring buffer' | tr '\n' '|')"
echo "last_boot_info: $(tr '\n' '|' <"$I/last_boot_info" 2>&1)"

# arm N: the boot probes into the instance (the kernel enables them in the
# top-level buffer only: the instance's event list is read in trace_init(),
# before kprobe_event= makes the probes), the marker "before reset N", known
# events; prints how many probe events the instance holds
arm() {
    echo 1 >"$I/events/ktrace_boot/enable"
    echo "ktrace persistent test: before reset $1" >"$I/trace_marker"
    for f in /proc/version /proc/cmdline /etc/hostname; do cat "$f" >/dev/null 2>&1; done
    sh -c 'cat /proc/uptime' >/dev/null
    grep -v '^#' "$I/trace" | tail -n 3 >&2
    grep -v '^#' "$I/trace" | grep -cE ' (clone|openat): '
}
reset() {
    sync
    echo b >/proc/sysrq-trigger
    sleep 30
    exit 1
}
# print_fmt_form: the kernel's lines of the two probes as their print
# format prints them. When the kernel's text moved since the previous boot
# (x86_64: KASLR draws a new offset at each boot; arm64 -M virt: the same
# kaslr-seed after QEMU's reset, no move), the kernel prints a previous
# boot's dynamic events by their fields instead (kernel/trace/trace.c
# print_trace_fmt(): tr->text_delta, print_event_fields()): every field as
# NAME=VALUE, an integer as 0xHEX (DECIMAL), the probe address as
# __probe_ip=SYM+OFF/SIZE (DECIMAL), a string bare. Only the form changes,
# every value is kept: the symbol, dfd's decimal, flags' hex, the strings.
print_fmt_form() {
    sed 's/: \(clone\|openat\): __probe_ip=\([^ ]*\) (-\{0,1\}[0-9]*) /: \1: (\2) /
        s/\(: openat: ([^)]*)\) dfd=0x[0-9a-f]* (\(-\{0,1\}[0-9]*\)) path=\(.*\)$/\1 dfd=\2 path="\3"/
        s/\(: clone: ([^)]*)\) flags=\(0x[0-9a-f]*\) ([0-9]*) comm=\(.*\)$/\1 flags=\2 comm="\3"/'
}
previous=$(grep -v '^#' "$I/trace" | sed -n 's/.*tracing_mark_write: ktrace persistent test: before reset \([0-9]\).*/\1/p' | tail -n 1)
printf '%s\n' "$klog" | grep -q 'is from previous boot' || previous=0
[ -n "$previous" ] || previous=0

if [ "$previous" = 0 ]; then
    # --- first boot
    ktest persistent_first_boot
    if [ ! -d "$I/events/ktrace_boot" ]; then
        fail "no ktrace_boot events in instances/ktrace: $(_kt_short "$(cat "$TRACEFS/kprobe_events")")"
        exit 0
    fi
    en=$(cat "$I/events/ktrace_boot/enable")
    n=$(arm 1)
    # the probes stay armed to the reset: the verdict without the leftover check
    if [ "$n" -gt 0 ] && [ "$en" = 0 ]; then
        _kt_verdict PASS "enabled at boot in the instance: $en (set by hand); $n probe events in instances/ktrace; now echo b >/proc/sysrq-trigger"
    else
        _kt_verdict FAIL "probe events in the instance: $n; enabled at boot there: $en"
    fi
    reset
fi

# --- second and third boot: what the previous one left. Everything is gathered
# first, the boot probes are then removed (they are this boot's kprobe_event=
# again), and the verdicts come last (each checks for leftovers).
# The top-level boot probes stop first, so that saved_cmdlines (the names
# both readers give pids) stays as it is between the two reads.
echo 0 >"$TRACEFS/events/ktrace_boot/enable" 2>/dev/null
info=$(cat "$I/last_boot_info")
kernel_all=$(grep -v '^#' "$I/trace")
kernel_text=$(printf '%s\n' "$kernel_all" | grep -E ' (clone|openat): |tracing_mark_write: ' | print_fmt_form)
fields=$(printf '%s\n' "$kernel_all" | grep -c ': \(clone\|openat\): __probe_ip=')
marker=$(printf '%s\n' "$kernel_all" | grep -c "tracing_mark_write: ktrace persistent test: before reset $previous")
if [ "$previous" = 1 ]; then
    ktrace report --previous-boot >/tmp/prev.out 2>/tmp/prev.err
elif [ "$previous" = 2 ]; then
    ktrace report --previous-boot --json >/tmp/prev.out 2>/tmp/prev.err
else
    mkdir -p "$KTEST_OUT/perfetto"
    # (the two probes' lines as their print format prints them, as on a
    # boot whose kernel did not move: see print_fmt_form)
    printf '%s\n' "$kernel_all" | print_fmt_form >"$KTEST_OUT/perfetto/previous-boot.trace"
    ktrace report --previous-boot --perfetto "$KTEST_OUT/perfetto/previous-boot.pftrace" >/tmp/prev.out 2>/tmp/prev.err
fi
rc=$?
info_after=$(cat "$I/last_boot_info")
after_text=$(grep -v '^#' "$I/trace" | grep -cE ' (clone|openat): ')
ktrace report --previous-boot --json >/tmp/prev.json 2>/tmp/prev-json.err
json_rc=$?
if [ "$previous" = 3 ]; then
    echo 0 >"$I/events/enable"
    clean_out=$(ktrace clean --boot 2>&1)
fi
echo "previous boot, kernel's trace: $(printf '%s\n' "$kernel_all" | wc -l) lines, $(printf '%s\n' "$kernel_text" | wc -l) probe events, $fields of them printed by the kernel by fields (as it does once its text moved)"
printf '%s\n' "$kernel_all" | head -n 3
printf '%s\n' "$kernel_all" | tail -n 3
echo "ktrace report --previous-boot: $(_kt_short "$(cat /tmp/prev.err)")"
head -n 3 /tmp/prev.out
echo "last_boot_info after the read: $(_kt_short "$info_after"); a second read (--json): rc $json_rc, $(_kt_short "$(cat /tmp/prev-json.err)")"
echo "boot after reset $previous; ktrace clean --boot: ${clean_out:-(not yet)}"

# on the second boot the probes stay for the next reset: verdicts without
# the leftover check (a failure cleans up, and the run ends in the timeout)
ok() { if [ "$previous" != 3 ]; then _kt_verdict PASS "$1"; else pass "$1"; fi; }

ktest previous_boot_kept_$previous
# (7.x: the previous kernel's address, ADDR [kernel]; 6.12 prints
# 'text delta:' on every boot, kept buffer or fresh)
expect_match "last_boot_info" "$info" '\[kernel\]|^text delta:' &&
    expect_eq "the marker written before the reset" "$marker" 1 &&
    expect_ge "probe events kept" "$(printf '%s\n' "$kernel_text" | grep -c .)" 1 &&
    ok "$(printf '%s\n' "$kernel_text" | wc -l) probe events and the marker; last_boot_info: $(_kt_short "$info")"

if [ "$previous" = 1 ]; then
    ktest report_previous_boot_equals_kernel_trace
    expect_eq "exit status" "$rc" 0 &&
        expect_eq "events and the marker (ktrace report --previous-boot vs the kernel's instances/ktrace/trace)" "$(grep -E ' (clone|openat): |tracing_mark_write: ' /tmp/prev.out)" "$kernel_text" &&
        expect_match "clone's flags and comm decoded" "$(cat /tmp/prev.out)" ' clone: \(kernel_clone\+0x[0-9a-f]+/0x[0-9a-f]+\) flags=0x[0-9a-f]+ comm="' &&
        expect_eq "the marker line" "$(grep -c ': tracing_mark_write: ktrace persistent test: before reset 1$' /tmp/prev.out)" 1 &&
        ok "$(printf '%s\n' "$kernel_text" | wc -l) lines equal (the marker among them; $fields printed by the kernel by fields); $(tail -n 1 /tmp/prev.err)"
elif [ "$previous" = 3 ]; then
    ktest report_previous_boot_perfetto
    expect_eq "exit status ($(_kt_short "$(cat /tmp/prev.err)"))" "$rc" 0 &&
        expect_empty "standard output" "$(cat /tmp/prev.out)" &&
        expect_match "events written (the kernel's trace: $(printf '%s\n' "$kernel_all" | grep -c .) lines)" "$(cat /tmp/prev.err)" "^ktrace: $(printf '%s\n' "$kernel_all" | grep -c .) event\\(s\\), 0 lost" &&
        ok "$(wc -c <"$KTEST_OUT/perfetto/previous-boot.pftrace") bytes (decoded on the host: host/perfetto_previous-boot)"
else
    ktest report_previous_boot_json_equals_kernel_trace
    # each record's pid, cpu, event and path (openat) / flags (clone) against
    # the kernel's line
    want=$(printf '%s\n' "$kernel_text" | sed -n 's/^ *.*-\([0-9][0-9]*\) *\[0*\([0-9][0-9]*\)\].*: \(clone\|openat\): ([^)]*) \(.*\)$/\1 \2 \3 \4/p' |
        sed 's/dfd=\(-*[0-9]*\) path=\(".*"\)$/\1 \2/; s/flags=0x\([0-9a-f]*\) comm=\(".*"\)$/\1 \2/')
    got=$(grep '"system":"ktrace_boot"' /tmp/prev.out | sed 's/"__probe_ip":{[^}]*},//' | sed -n 's/.*"cpu":\([0-9]*\),"pid":\([0-9]*\),.*"event":"\([a-z]*\)".*"fields":{\(.*\)}}$/\2 \1 \3 \4/p' |
        sed 's/"dfd":\(-*[0-9]*\),"path":\(".*"\)$/\1 \2/; s/"flags":\([0-9]*\),"comm":\(".*"\)$/\1 \2/' |
        while read -r pid cpu ev a b; do
            [ "$ev" = clone ] && a=$(printf '%x' "$a")
            echo "$pid $cpu $ev $a $b"
        done)
    echo "json, first record: $(head -n 1 /tmp/prev.out)"
    echo "json, the marker: $(grep '"event":"print"' /tmp/prev.out | head -n 1)"
    expect_eq "exit status" "$rc" 0 &&
        expect_eq "the marker record" "$(grep '"event":"print"' /tmp/prev.out | grep -c '"buf":"ktrace persistent test: before reset 2\\n"')" 1 &&
        expect_ge "records" "$(printf '%s\n' "$want" | grep -c .)" 1 &&
        expect_eq "records (pid cpu event values) of --json vs the kernel's trace" "$got" "$want" &&
        ok "$(printf '%s\n' "$want" | wc -l) records equal; $(tail -n 1 /tmp/prev.err)"
fi

ktest report_previous_boot_once_$previous
# reading them out consumes them (trace_pipe_raw); a kernel that says which
# boot the buffer is (7.x) then takes it for this boot's (# Current), and a
# second read is refused; 6.12's last_boot_info does not say, and a second
# read finds no event
expect_eq "probe events left in the kernel's trace after the read" "$after_text" 0 || exit 0
case $info in
    'text delta:'*)
        expect_eq "a second read's exit status" "$json_rc" 0 &&
            expect_eq "events of a second read" "$(grep -c . /tmp/prev.json)" 0 &&
            ok "6.12: $(_kt_short "$(cat /tmp/prev-json.err)")" ;;
    *)
        expect_match "last_boot_info after the read" "$info_after" '^# Current' &&
            expect_eq "a second read's exit status" "$json_rc" 1 &&
            expect_match "a second read says why" "$(cat /tmp/prev-json.err)" 'holds no previous boot' &&
            ok "$(_kt_short "$(cat /tmp/prev-json.err)")" ;;
esac

if [ "$previous" = 1 ] || [ "$previous" = 2 ]; then
    # arm again, for the --json (then --perfetto) read after the next reset
    ktest persistent_boot_$((previous + 1))
    n=$(arm $((previous + 1)))
    if [ "$n" -gt 0 ]; then _kt_verdict PASS "$n probe events in instances/ktrace; echo b again"; else _kt_verdict FAIL "no probe events after arming again"; fi
    reset
fi
