# Differential test of `ktrace check` against this kernel (issue 22): the
# seeded generator of crates/conform draws definitions with this kernel's
# names (functions and their BTF parameters, tracepoints, files); each is
# checked by ktrace exactly as `ktrace check --file FILE` does live, then
# written raw into that file, and the kernel's verdict, error_log message
# and caret, readback and format file are held against ktrace's. Every
# disagreement is printed with the seed and index that regenerate it and
# saved as a corpus block in $KTEST_OUT/conform/disagreements.txt.
#   KTEST_CONFORM_COUNT (default 20000), KTEST_CONFORM_SEED (default 1)
. "$KTEST_LIB"

count=${KTEST_CONFORM_COUNT:-20000}
seed=${KTEST_CONFORM_SEED:-1}
out=$KTEST_OUT/conform
mkdir -p "$out"

ktest check_against_kernel
if [ -n "$(cat "$TRACEFS/dynamic_events" 2>/dev/null)" ]; then
    fail "dynamic_events is not empty before the run: $(head -n 3 "$TRACEFS/dynamic_events")"
    exit 0
fi
ktrace conform --seed "$seed" --count "$count" --out "$out" --show 25 >"$out/stdout.txt" 2>"$out/stderr.txt"
rc=$?
cat "$out/stderr.txt"
cat "$out/stdout.txt"
summary=$(head -n 1 "$out/stdout.txt")
case $rc in
    0) pass "$summary" ;;
    1) fail "$summary" ;;
    *) fail "ktrace conform failed (exit $rc): $(tail -n 3 "$out/stderr.txt")" ;;
esac
