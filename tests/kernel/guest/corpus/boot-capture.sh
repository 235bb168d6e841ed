# The kernel's own reading of a kprobe_event= parameter, for
# tests/kernel/boot-corpus (issue 20: the encoder against the kernel's
# boot-time parser for every kprobe form of the corpus). The host boots the
# guest with one chunk of the corpus as kprobe_event= (--append); this
# script only gathers what the kernel made of it at boot — kprobe_events,
# the kernel log's "Failed to add event" lines, error_log — into $KTEST_OUT
# and removes the probes. The host compares (it knows what ktrace said).
. "$KTEST_LIB"

ktest boot_corpus_capture
param=$(tr ' ' '\n' </proc/cmdline | grep '^kprobe_event=')
if [ -z "$param" ]; then
    skip "not booted with kprobe_event= (run by tests/kernel/boot-corpus)"
    exit 0
fi
mkdir -p "$KTEST_OUT"
printf '%s\n' "$param" >"$KTEST_OUT/param.txt"
cat "$TRACEFS/kprobe_events" >"$KTEST_OUT/listing.txt"
# (setup_boot_kprobe_events(): pr_warn("Failed to add event(%d): %s"))
timeout 1 cat /dev/kmsg 2>/dev/null | cut -d';' -f2- | grep 'Failed to add event' >"$KTEST_OUT/failures.txt"
cat "$TRACEFS/error_log" >"$KTEST_OUT/error_log.txt" 2>/dev/null
echo "listed $(grep -c . "$KTEST_OUT/listing.txt"), refused $(grep -c . "$KTEST_OUT/failures.txt")"
ktest_cleanup
echo >"$TRACEFS/error_log" 2>/dev/null
pass "listed $(grep -c . "$KTEST_OUT/listing.txt"); refused at boot $(grep -c . "$KTEST_OUT/failures.txt")"
