# ktrace record + ktrace report on a kernel with kprobes: the report of a
# recording (entry probe with registers and the filename, a kretprobe, and
# --stack) equals the kernel's own `trace` lines of the same events, taken
# in a reference instance enabled on the recording session's events (the
# lines compared byte for byte except the timestamp and the need-resched
# flag, which each instance stamps on its own copy, as in 70-trace-output).
# Both formats: the first recording is the default (trace.dat version 7,
# zstd), the one with stacks --uncompressed (version 6).
# The recording and both reports are shipped in $KTEST_OUT
# (record-<arch>.dat, report-<arch>.txt) so the host can compare them with
# `trace-cmd report`.
. "$KTEST_LIB"
entry_probes_or_skip report_equals_kernel_trace report_stack_equals_kernel_trace

OPEN="p:op do_sys_openat2 dfd=$(argreg 1):s32 path=+0($(argreg 2)):ustring flags=+0($(argreg 3)):x64"
RET='r:opr do_sys_openat2 ret=$retval:s32'

# rec_ref ARGS... — ktrace record with ARGS and a reference instance; opens
# /ktest/env 3 times; leaves /tmp/ours (the report) and /tmp/kernel
# (timestamps and need-resched masked), the file in /tmp/rec.dat
rec_ref() {
    rm -f /tmp/rec.dat /tmp/kt.err
    ktrace record "$@" -d 60 -o /tmp/rec.dat >/dev/null 2>/tmp/kt.err &
    kpid=$!
    wait_tracing /tmp/kt.err $kpid 100
    sess=$(sed -n 's/.*in session \([^;]*\);.*/\1/p' /tmp/kt.err)
    ref=$(instance_new ref)
    case " $* " in *" --stack "*) echo 'stacktrace if common_pid >= 0' >"$ref/events/$sess/op/trigger" ;; esac
    event_enable "$ref" "$sess"
    for n in 1 2 3; do cat /ktest/env >/dev/null; done
    sleep 1
    cat /ktest/rec-ref-end 2>/dev/null
    trace_lines "$ref" | awk -v t='path="/ktest/rec-ref-end"' 'index($0, t) { exit }
        /^ *ktrace-[0-9]/ { skip = 1; next } /^ => / && skip { next } { skip = 0; print }' >/tmp/kernel.raw
    echo '!stacktrace' >"$ref/events/$sess/op/trigger" 2>/dev/null
    event_enable "$ref" "$sess" 0
    rmdir "$ref"
    kill -INT $kpid; wait $kpid
    ktrace report /tmp/rec.dat >/tmp/ours.raw 2>/tmp/rep.err
    mask='s/^\(.*\] [^ ]* *\)[0-9]*\.[0-9]\{6\}: /\1TS: /; s/^\([^]]*\] \)\(.\)[^ ]\([^ ]* \)/\1\2?\3/'
    sed "$mask" /tmp/kernel.raw >/tmp/kernel
    sed "$mask" /tmp/ours.raw >/tmp/ours
}

# same — the kernel's lines appear in the report as one contiguous run
same() {
    awk 'NR == FNR { k[FNR] = $0; n = FNR; next } { o[FNR] = $0; m = FNR }
        END { for (s = 1; s + n - 1 <= m; s++) { ok = 1
                  for (i = 1; i <= n; i++) if (o[s + i - 1] != k[i]) { ok = 0; break }
                  if (ok) { print "same"; exit } }
              print "differ" }' /tmp/kernel /tmp/ours
}

ktest report_equals_kernel_trace
rec_ref "$OPEN" "$RET"
mkdir -p "$KTEST_OUT"
cp /tmp/rec.dat "$KTEST_OUT/record-$KTEST_ARCH.dat"
cp /tmp/ours.raw "$KTEST_OUT/report-$KTEST_ARCH.txt"
n=$(grep -c ' op: ' /tmp/kernel)
expect_ge "kernel lines" "$n" 3 &&
    expect_match "recorded" "$(cat /tmp/kt.err)" '^ktrace: wrote [0-9]+ event\(s\) in [0-9]+ page\(s\) to /tmp/rec.dat \(trace.dat version 7, zstd: ' &&
    expect_match "symbolized entry" "$(cat /tmp/ours)" " op: $(at_entry do_sys_openat2) dfd=-100 path=\"/ktest/env\"" &&
    expect_match "return arrow" "$(cat /tmp/ours)" ' opr: \([a-z_0-9.]+\+0x[0-9a-f]+/0x[0-9a-f]+ <- do_sys_openat2\) ret=' &&
    expect_eq "report == kernel" "$(same)" same &&
    pass "$n open events, report of $(wc -l </tmp/ours) lines holds the kernel's"
[ "$(same)" = same ] || { echo "--- ours"; cat /tmp/ours; echo "--- kernel"; cat /tmp/kernel; cat /tmp/rep.err; }

ktest report_stack_equals_kernel_trace
rec_ref "$OPEN" --stack --uncompressed
cp /tmp/rec.dat "$KTEST_OUT/record-stack-$KTEST_ARCH.dat"
cp /tmp/ours.raw "$KTEST_OUT/report-stack-$KTEST_ARCH.txt"
expect_match "recorded" "$(cat /tmp/kt.err)" '^ktrace: wrote [0-9]+ event\(s\) in [0-9]+ page\(s\) to /tmp/rec.dat \(trace.dat version 6, uncompressed\)' &&
    expect_match "stack header" "$(cat /tmp/ours)" ': <stack trace>$' &&
    expect_match "stack frame" "$(cat /tmp/ours)" '^ => [a-z_]' &&
    expect_eq "report == kernel" "$(same)" same &&
    pass "$(grep -c 'stack trace' /tmp/ours) stacks identical"
[ "$(same)" = same ] || { echo "--- ours"; head -12 /tmp/ours; echo "--- kernel"; head -12 /tmp/kernel; cat /tmp/rep.err; }
