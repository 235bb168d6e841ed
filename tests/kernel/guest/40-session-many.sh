# Many kprobes through one ktrace session: created in one batch, enabled in
# the session's instance, removed without leftovers; the cleanup time is
# reported (and kept in $KTEST_OUT) for comparison with uprobes on the host.
# What it holds is ktrace's own handling (sessions, cleanup, readers)
# more than one kernel's text or one architecture's: CI runs it on the
# newest and the oldest x86_64 cells, 7.2 and 5.10 (arm64 7.2 too until 1
# Dec 2026: the matrix's longest cell, emulated arm64 costs about 1.5x
# x86_64's time; tests/kernel/README.md, "Which cells run what"); --script
# or KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:5.10 x86_64:7.2
. "$KTEST_LIB"
# every test here places a kprobe on a function entry
entry_probes_or_skip fifty_kprobes_created_and_removed

ktest fifty_kprobes_created_and_removed
funcs=$(grep -E '^vfs_[a-z_]+$' "$TRACEFS/available_filter_functions" | sort -u | head -n 50)
n=$(echo "$funcs" | wc -l)
set --
for f in $funcs; do set -- "$@" "p:$f $f"; done
ktrace trace "$@" -d 2 >/tmp/many.out 2>/tmp/many.err &
kpid=$!
wait_tracing /tmp/many.err $kpid
cat /ktest/env >/dev/null
ls / >/dev/null
during=$(grep -c "ktrace_p${kpid}_" "$TRACEFS/dynamic_events")
wait $kpid
code=$?
mkdir -p "$KTEST_OUT" && cp /tmp/many.err "$KTEST_OUT/session-many.err"
expect_ge "functions found" "$n" 50 &&
    expect_eq "exit status" "$code" 0 &&
    expect_eq "probes while running" "$during" "$n" &&
    expect_match "some events" "$(cat /tmp/many.err)" '^ktrace: [1-9][0-9]* event\(s\), 0 lost' &&
    expect_match "cleanup line" "$(cat /tmp/many.err)" "^ktrace: cleanup removed $n probe\\(s\\) and the instance in [0-9]+ ms" &&
    pass "$(grep -E 'event\(s\)|cleanup' /tmp/many.err | tr '\n' ';')"
