# Differential test of `ktrace check` against this kernel (issue 22): the
# seeded generator of crates/conform draws definitions with this kernel's
# names (functions and their BTF parameters, tracepoints, files); each is
# checked by ktrace exactly as `ktrace check --file FILE` does live, then
# written raw into that file, and the kernel's verdict, error_log message
# and caret, readback and format file are held against ktrace's. Every
# disagreement is printed with the seed and index that regenerate it and
# saved as a corpus block in $KTEST_OUT/conform/disagreements.txt.
#   KTEST_CONFORM_COUNT: that many definitions, however long they take
#   (scripts/conform's long runs). Unset (CI): 20,000 on every cell
#   (issue 22), within a safety budget of KTEST_CONFORM_BUDGET seconds of
#   comparing (default 720) but never fewer than 2,000, so that a slow
#   day cannot take the matrix past its limit; the summary says where the
#   budget stopped a run. The kernel side costs 1 ms (x86_64 6.1) to 25 ms
#   (x86_64 5.10, whose kallsyms lookups scan the whole table for every
#   symbol a kprobe names) per write under TCG: 20,000 take 30 s on
#   x86_64 6.1 and 500-560 s on x86_64 5.10 (until 2 Dec 2026 the budget
#   was 15 s, which left most cells at 2,000-10,000). KTEST_CONFORM_SEED
#   (default 1). KTEST_CONFORM_OFFLINE=bare|files: ktrace's offline check
#   instead of its live one (scripts/conform's KTRACE_CONFORM_OFFLINE).
#
# The bar is zero disagreements; not every cell is there yet. Until it is,
# each cell has a floor: agreement below it fails the test (a regression),
# at or above it passes with the tally. The floors are 99.8% (4 of 2,000,
# 40 of 20,000): the 200,000-definition runs of 28-29 Nov 2026 measured
# 99.967-100% on every cell before their fixes (tests/kernel/README.md,
# "The differential tester"), and the margin absorbs the definitions a
# newer kernel package's names change; a cell without one is held to 100%.
#
# Loaded modules' functions are part of the generator's pool (`MOD:SYM`,
# bare module names, offsets into module code) when a module is loaded.
# In CI's main boot none is: 81-check-code.sh unloads the autofs4 it
# loads, and 82-btf-module.sh its romfs (the pool line says "0 module
# functions"; x86_64 6.12, 30 Nov 2026).
# (Loading romfs and autofs4 here on every cell, tried on 30 Nov 2026, is
# not done: see tests/kernel/README.md, "With modules loaded".)
# ktest-timeout: 1200
. "$KTEST_LIB"

loaded=$(for m in romfs autofs4; do grep -q "[[:space:]]\[$m\]" /proc/kallsyms && printf ' %s' "$m"; done)

# A filter ending in `&&`/`||` whose program runs backwards trips a
# WARN_ON in process_preds() on the kernels that take dangling operators
# (x86_64 and arm64 7.2: `prev_pid >= -64 || next_pid == 35 &&`): a kernel
# bug any user can reach, which this script provokes on purpose; /init lets
# it through (and counts it) instead of failing kernel_log.
echo 'trace_events_filter\.c:[0-9]+ (at )?process_preds' >/tmp/ktest-expected-warnings

if [ -n "${KTEST_CONFORM_COUNT:-}" ]; then
    volume="--count $KTEST_CONFORM_COUNT"
    [ -n "${KTEST_CONFORM_BUDGET:-}" ] && volume="$volume --budget $KTEST_CONFORM_BUDGET"
else
    volume="--count 20000 --budget ${KTEST_CONFORM_BUDGET:-720} --min-count 2000"
fi
seed=${KTEST_CONFORM_SEED:-1}
[ -n "${KTEST_CONFORM_OFFLINE:-}" ] && volume="$volume --offline $KTEST_CONFORM_OFFLINE"
out=$KTEST_OUT/conform
mkdir -p "$out"

# ARCH:SERIES FLOOR (percent agreement)
floors='
x86_64:5.10 99.8
x86_64:6.1 99.8
x86_64:6.12 99.8
x86_64:7.2 99.8
arm64:5.10 99.8
arm64:6.1 99.8
arm64:6.12 99.8
arm64:7.2 99.8
arm:6.12 99.8
arm:7.2 99.8
riscv64:6.12 99.8
riscv64:7.2 99.8
'

ktest check_against_kernel
if [ -n "$(cat "$TRACEFS/dynamic_events" 2>/dev/null)" ]; then
    fail "dynamic_events is not empty before the run: $(head -n 3 "$TRACEFS/dynamic_events")"
    exit 0
fi
ktrace conform --seed "$seed" $volume --out "$out" --show 25 >"$out/stdout.txt" 2>"$out/stderr.txt"
rc=$?
cat "$out/stderr.txt"
cat "$out/stdout.txt"
summary=$(head -n 1 "$out/stdout.txt")
series=$(ktest_series)
floor=$(printf '%s\n' "$floors" | awk -v c="$KTEST_ARCH:$series" '$1 == c { print $2 }')
floor=${floor:-100}
agree=$(printf '%s\n' "$summary" | sed -n 's/.* definitions, \([0-9]*\) agree, .*/\1/p')
disagree=$(printf '%s\n' "$summary" | sed -n 's/.* agree, \([0-9]*\) disagree .*/\1/p')
# what only the target's unreadable text decides (no /proc/kcore: the
# instruction at a kprobe's offset, which ktrace says it did not check)
# is left open, neither agreeing nor disagreeing; the floor is over the rest
open=$(sed -n 's/^  left open live \([0-9]*\) .*/\1/p' "$out/stdout.txt")
case $rc in
    0|1)
        if [ -z "$agree" ] || [ -z "$disagree" ] || [ "$((agree + disagree))" = 0 ]; then
            fail "no tally in ktrace conform's summary: $summary"
        elif awk -v a="$agree" -v d="$disagree" -v f="$floor" 'BEGIN { exit !(100 * a / (a + d) < f) }'; then
            fail "$summary (agreement $(awk -v a="$agree" -v d="$disagree" 'BEGIN { printf "%.2f", 100 * a / (a + d) }')% under the floor of $floor% on $KTEST_ARCH $series; ${open:-0} left open)"
        else
            pass "$summary (agreement $(awk -v a="$agree" -v d="$disagree" 'BEGIN { printf "%.2f", 100 * a / (a + d) }')% of those compared, floor $floor% on $KTEST_ARCH $series; ${open:-0} left open; modules loaded:${loaded:- none})"
        fi
        ;;
    *) fail "ktrace conform failed (exit $rc): $(tail -n 3 "$out/stderr.txt")" ;;
esac

# The same kernel against ktrace's offline check, as on another machine
# with copies of this kernel's kallsyms and BTF (`ktrace check --offline
# --arch A --kernel RELEASE --kallsyms F --btf F`), or with neither (odd
# seeds: `--offline bare`; issue 22, category 6):
# what only the target shows (its files, events, text and state, the
# build's probe kinds) is left open, counted apart, and the rest is held
# to the same floor. In CI only (scripts/conform's long runs choose their
# own mode), a few seconds of it (3, never fewer than 300 definitions),
# a seed of its own. CI's time (20-40 s a cell under TCG on a slow day):
# on the oldest cell of each 64-bit architecture, x86_64 6.1, and every
# cell of arm and riscv64 (scripts/conform's runs cover the others;
# KTEST_EVERY_CELL=1 runs it everywhere).
if [ -z "${KTEST_CONFORM_COUNT:-}" ]; then
    ktest check_offline_against_kernel
fi
if [ -n "${KTEST_CONFORM_COUNT:-}" ]; then
    :
elif ! on_cells x86_64:5.10 x86_64:6.1 arm64:5.10 'arm:*' 'riscv64:*'; then
    cells_skip "x86_64 5.10 and 6.1, arm64 5.10, arm and riscv64"
else
    off=$out/offline
    mkdir -p "$off"
    # with copies of the kernel's files on even seeds, with nothing but
    # the architecture and release on odd ones (the symbols and BTF
    # unknown; CI's seed is HEAD's hash, so the two take turns from commit
    # to commit). Bare was tried here in stop 57 and taken out after 5
    # disagreements on riscv64 6.12; stop 59's bare runs of 20,000 on five
    # BTF cells (tests/kernel/README.md) brought it back.
    mode=files
    [ "$((seed % 2))" = 1 ] && mode=bare
    ktrace conform --offline "$mode" --seed "$((seed + 1))" --count 20000 \
        --budget 3 --min-count 300 --out "$off" --show 10 \
        >"$off/stdout.txt" 2>"$off/stderr.txt"
    rc=$?
    cat "$off/stderr.txt"
    cat "$off/stdout.txt"
    summary=$(head -n 1 "$off/stdout.txt")
    agree=$(printf '%s\n' "$summary" | sed -n 's/.* definitions, \([0-9]*\) agree, .*/\1/p')
    disagree=$(printf '%s\n' "$summary" | sed -n 's/.* agree, \([0-9]*\) disagree .*/\1/p')
    open=$(sed -n 's/^  left open offline \([0-9]*\) .*/\1/p' "$off/stdout.txt")
    case $rc in
        0|1)
            if [ -z "$agree" ] || [ -z "$disagree" ] || [ "$((agree + disagree))" = 0 ]; then
                fail "no tally in ktrace conform --offline's summary: $summary"
            else
                pct=$(awk -v a="$agree" -v d="$disagree" 'BEGIN { printf "%.2f", 100 * a / (a + d) }')
                # the floor, but never fewer than 1 allowed: a few hundred
                # definitions would otherwise fail on one where the live
                # floor allows several (each one found is fixed: 32-bit
                # arm's bare names, 4 of 3,000 with seed 1205, were the
                # last, answered since with --no-btf)
                allowed=$(awk -v a="$agree" -v d="$disagree" -v f="$floor" 'BEGIN { n = int((a + d) * (100 - f) / 100); print (n < 1 ? 1 : n) }')
                if [ "$disagree" -gt "$allowed" ]; then
                    fail "$summary (offline ($mode) agreement $pct% of those compared: $disagree disagreements, more than the $allowed the floor of $floor% allows on $KTEST_ARCH $series; ${open:-0} left open)"
                else
                    pass "$summary (offline ($mode) agreement $pct% of those compared, floor $floor% on $KTEST_ARCH $series; ${open:-0} left open)"
                fi
            fi
            ;;
        *) fail "ktrace conform --offline failed (exit $rc): $(tail -n 3 "$off/stderr.txt")" ;;
    esac
fi
