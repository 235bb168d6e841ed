# Boot-time probes (issue 20). The rig booted this kernel with the
# kprobe_event= that the host's `ktrace boot` printed offline for this arch
# and kernel release (tests/kernel/run --boot-defs
# tests/kernel/guest/boot-defs.txt). Held against the kernel: which of the
# definitions the kernel created at boot (= ktrace's live verdict on each),
# the events `ktrace report --boot` prints (= the kernel's own `trace` file),
# `ktrace clean --boot` (removes them, nothing else), and `ktrace boot` run
# live here (= the offline parameter). Runs first: the other scripts expect
# a kernel without dynamic events, so everything is gathered before any
# verdict (a verdict checks for leftovers) and the probes are removed.
. "$KTEST_LIB"

param=$(tr ' ' '\n' </proc/cmdline | grep '^kprobe_event=')
if [ -z "$param" ]; then
    ktest boot_probes
    skip "not booted with kprobe_event= (tests/kernel/run --boot-defs FILE)"
    exit 0
fi
# the definitions, as the kernel reads the parameter (commas are spaces,
# semicolons end a definition)
printf '%s\n' "${param#kprobe_event=}" | tr ';' '\n' | tr ',' ' ' >/tmp/boot-defs

# --- gathered while the boot probes are there
listing=$(cat "$TRACEFS/kprobe_events")
# (x86_64 6.1 and arm 6.12, now and then: a boot probe listed whose
# events/ directory the kernel never made, a race in its tracefs setup; no
# reader can decode its records: ktrace report --boot says so and leaves
# them out, and they are left out of the comparison below)
for _w in 1 2 3 4; do
    missing=$(printf '%s\n' "$listing" | sed -n 's/^[pr][0-9]*:\([^ ]*\) .*/\1/p' |
        while read -r ge; do [ -e "$TRACEFS/events/$ge/format" ] || echo "$ge"; done)
    [ -z "$missing" ] && break
    echo "waiting for the format files of: $missing"
    sleep 0.5
done
[ -d "$TRACEFS/events/ktrace_boot" ] && echo 0 >"$TRACEFS/events/ktrace_boot/enable"
# (arm64 6.1 once made none of the four directories: a probe enabled at boot
# whose events/ directory is missing cannot be switched off through it, and
# the kernel refuses to remove an enabled probe. Nothing but the boot probes
# is enabled yet in this first script: the top-level switch turns them off.)
[ -n "$missing" ] && echo 0 >"$TRACEFS/events/enable"
kernel_text=$(grep -v '^#' "$TRACEFS/trace")
for ge in $missing; do
    kernel_text=$(printf '%s\n' "$kernel_text" | grep -v " ${ge#*/}: (")
done
ktrace report --boot >/tmp/report-boot.out 2>/tmp/report-boot.err
report_rc=$?
# --perfetto: the probes on again for a few known events (what the read
# above consumed is gone), then off; the kernel's lines of them and the
# Perfetto trace go back to the host, which decodes it with protoc and
# holds it against them (tests/kernel/host/perfetto.sh: host/perfetto_boot)
# (a probe whose events/ directory the kernel never made stays off: the
# group's switch reaches only the events it has files for)
pf_rc=skipped
if [ -d "$TRACEFS/events/ktrace_boot" ]; then
    mkdir -p "$KTEST_OUT/perfetto"
    echo 1 >"$TRACEFS/events/ktrace_boot/enable"
    for f in /proc/version /proc/cmdline /etc/hostname; do cat "$f" >/dev/null 2>&1; done
    sh -c 'cat /proc/uptime' >/dev/null
    echo 0 >"$TRACEFS/events/ktrace_boot/enable"
    pf_text=$(grep -v '^#' "$TRACEFS/trace")
    for ge in $missing; do
        pf_text=$(printf '%s\n' "$pf_text" | grep -v " ${ge#*/}: (")
    done
    printf '%s\n' "$pf_text" | grep . >"$KTEST_OUT/perfetto/boot.trace"
    ktrace report --boot --perfetto "$KTEST_OUT/perfetto/boot.pftrace" >/tmp/report-pf.out 2>/tmp/report-pf.err
    pf_rc=$?
fi
clean_out=$(ktrace clean --boot 2>&1)
clean_rc=$?
after=$(cat "$TRACEFS/kprobe_events")
again=$(ktrace report --boot 2>&1)
again_rc=$?
echo "boot listing: $(_kt_short "$listing")"

# Each definition of the parameter exists after the boot exactly when
# ktrace's live check accepts the line (now that the events are gone).
ktest boot_verdict_equals_live_check
bad=""
n=0
while IFS= read -r def; do
    [ -n "$def" ] || continue
    n=$((n + 1))
    place=${def%% *}
    place=${place#*:}
    if printf '%s\n' "$listing" | grep -q "^[pr][0-9]*:$place "; then kernel=accepted; else kernel=refused; fi
    if ktrace check --file kprobe_events "$def" >/tmp/boot-check.out 2>&1; then ours=accepted; else ours=refused; fi
    [ "$kernel" = "$ours" ] || bad="$bad [$def: kernel $kernel at boot, ktrace check $ours: $(_kt_short "$(cat /tmp/boot-check.out)")]"
done </tmp/boot-defs
expect_ge "definitions in the parameter" "$n" 1 &&
    expect_empty "disagreements" "$bad" &&
    pass "$n definition(s); created at boot: $(printf '%s\n' "$listing" | grep -c ':ktrace_boot/')"

ktest report_boot_equals_kernel_trace
if [ -z "$kernel_text" ]; then
    skip "the boot probes recorded nothing (none created: $(_kt_short "$listing"))"
else
    expect_eq "ktrace report --boot exit status ($(_kt_short "$(cat /tmp/report-boot.err)"))" "$report_rc" 0 &&
        expect_eq "events (ktrace report --boot vs the kernel's trace)" "$(cat /tmp/report-boot.out)" "$kernel_text" &&
        { [ -z "$missing" ] || expect_match "missing formats said" "$(cat /tmp/report-boot.err)" 'made no events/.* directory'; } &&
        pass "$(printf '%s\n' "$kernel_text" | wc -l) event(s)${missing:+ (no format made by the kernel, left out: $missing)}; $(tail -n 1 /tmp/report-boot.err)"
fi

ktest report_boot_perfetto
if [ "$pf_rc" = skipped ]; then
    skip "no events/ktrace_boot directory (the kernel made none of the boot probes' directories): not armed again"
else
    pf_lines=$(grep -c . "$KTEST_OUT/perfetto/boot.trace")
    expect_eq "ktrace report --boot --perfetto exit status ($(_kt_short "$(cat /tmp/report-pf.err)"))" "$pf_rc" 0 &&
        expect_empty "standard output" "$(cat /tmp/report-pf.out)" &&
        expect_ge "the kernel's lines" "$pf_lines" 1 &&
        expect_match "events written (the kernel's trace: $pf_lines lines)" "$(cat /tmp/report-pf.err)" "^ktrace: $pf_lines event\\(s\\), 0 lost" &&
        expect_ok "no partial file left" test ! -e "$KTEST_OUT/perfetto/boot.pftrace.partial" &&
        pass "$pf_lines events, $(wc -c <"$KTEST_OUT/perfetto/boot.pftrace") bytes (decoded on the host: host/perfetto_boot)${missing:+; not armed (no format made by the kernel): $missing}"
fi

ktest clean_boot_removes_them
expect_eq "ktrace clean --boot exit status" "$clean_rc" 0 &&
    expect_nomatch "kprobe_events after clean --boot" "$after" 'ktrace_boot/' &&
    expect_ok "group directory gone" test ! -d "$TRACEFS/events/ktrace_boot" &&
    pass "$clean_out"

ktest report_boot_says_why_nothing
expect_eq "exit status" "$again_rc" 1 &&
    expect_match "message" "$again" 'command line has kprobe_event=, but no kprobe event is present' &&
    pass "$(_kt_short "$again")"

# `ktrace boot` here, live (this kernel's README, kallsyms and code), prints
# the parameter the host printed offline
ktest boot_live_equals_offline
set --
while IFS= read -r def; do [ -n "$def" ] && set -- "$@" "$def"; done </tmp/boot-defs
live=$(ktrace boot "$@" 2>/tmp/boot-live.err)
rc=$?
if [ "$(printf '%s\n' "$listing" | grep -c ':ktrace_boot/')" = "$#" ]; then
    expect_eq "exit status" "$rc" 0 &&
        expect_eq "parameter" "$live" "$param" &&
        pass "$(tail -n 2 /tmp/boot-live.err | head -n 1)"
else
    # some were refused at boot (and by the live check above): all or nothing
    expect_eq "exit status (a definition refused)" "$rc" 1 &&
        expect_empty "nothing printed" "$live" &&
        pass "refused live as at boot: $(tail -n 1 /tmp/boot-live.err)"
fi
