# `ktrace bench` (issue 24 item 5) in the guest: every row's probe hit once
# per call by the kernel's own count (the bench refuses a row otherwise),
# every kind x argument count x stack cell present, nothing left behind.
# Only on the newest series of each architecture (CI time); the table is
# kept in $KTEST_OUT/bench.txt. Under TCG the figures are emulated.
. "$KTEST_LIB"

ktest bench_table
if ! on_cells '*:7.2'; then
    cells_skip "the 7.2 cells"
    exit 0
fi
kinds="--kind uprobe --kind uretprobe"
[ -z "$(entry_probe_refused)" ] && kinds="$kinds --kind kprobe --kind kretprobe"
# shellcheck disable=SC2086
ktrace bench $kinds --calls 2000 --runs 1 >/tmp/bench.txt 2>/tmp/bench.err
rc=$?
cp /tmp/bench.txt "$KTEST_OUT/bench.txt" 2>/dev/null
cat /tmp/bench.txt
rows=$(grep -cE '^(kprobe|kretprobe|uprobe|uretprobe) ' /tmp/bench.txt)
want=$(( $(echo "$kinds" | grep -o -- '--kind' | wc -l) * 6 ))
expect_eq "ktrace bench exit status ($(_kt_short "$(cat /tmp/bench.err)"))" "$rc" 0 &&
    expect_eq "rows" "$rows" "$want" &&
    expect_match "emulation said" "$(cat /tmp/bench.txt)" 'QEMU virtual machine' &&
    pass "$rows rows"
