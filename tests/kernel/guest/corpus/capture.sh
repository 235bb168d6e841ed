#!/bin/sh
# Conformance corpus capture for ktrace-probe (not run by default: it lives outside
# tests/kernel/guest/*.sh). Writes every definition of /ktest/bin/defs.txt, alone,
# to dynamic_events on the guest kernel and records: the write's exit status, the
# dynamic_events readback, the error_log, and the event's format file. Also saves
# /proc/kallsyms (gzip) for offline symbol checks.
#
# Run from the repository root (one architecture at a time):
#   cargo run -q -p ktrace-probe --example corpus_gen -- x86_64 > /tmp/defs.txt
#   tests/kernel/run --arch x86_64 --script tests/kernel/guest/corpus/capture.sh \
#       --file /tmp/defs.txt --out /tmp/corpus-x86_64
#   -> /tmp/corpus-x86_64/corpus.txt, kallsyms.gz, sched_switch.format, uname.txt
. "$KTEST_LIB"

ktest capture
T=$TRACEFS
DEFS=/ktest/bin/defs.txt
OUT=$KTEST_OUT/corpus.txt
mkdir -p "$KTEST_OUT"
[ -r "$DEFS" ] || { fail "no $DEFS"; exit 0; }
uname -r > "$KTEST_OUT/uname.txt"
cat /proc/version > "$KTEST_OUT/version.txt"
gzip -c /proc/kallsyms > "$KTEST_OUT/kallsyms.gz"
cat "$T/events/sched/sched_switch/format" > "$KTEST_OUT/sched_switch.format"
: > "$OUT"
n=0
while IFS= read -r def; do
    n=$((n + 1))
    : > "$T/dynamic_events"
    echo > "$T/error_log"
    printf '%s\n' "$def" >> "$T/dynamic_events" 2>/dev/null
    rc=$?
    {
        echo "=== DEF"
        printf '%s\n' "$def"
        echo "--- RC $rc"
        echo "--- DYNAMIC_EVENTS"
        cat "$T/dynamic_events"
        echo "--- ERROR_LOG"
        cat "$T/error_log"
        line=$(head -n 1 "$T/dynamic_events")
        if [ -n "$line" ]; then
            ge=${line%% *}
            ge=${ge#*:}
            echo "--- FORMAT $ge"
            cat "$T/events/$ge/format" 2>&1
        fi
        echo "=== END"
    } >> "$OUT"
done < "$DEFS"
: > "$T/dynamic_events"
echo > "$T/error_log"
echo "captured $n definitions"
pass "$n definitions"
