# Attach + detach of many kernel functions, side by side in one guest:
# ktrace count 'ext4_*' (one kprobe per function; kernel and user engine)
# against the function tracer in a private instance (set_ftrace_filter +
# current_tracer=function) on the same functions. A measurement, not a test
# (every figure is printed; nothing is asserted). Run it with the rig:
#   tests/kernel/run --arch x86_64 --kernel 6.1 --script scripts/guest-attach-bench.sh
. "$KTEST_LIB"

T=$TRACEFS
now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

ktest attach_detach_bench
PAT=${BENCH_PATTERN:-ext4_*}
for engine in kernel user; do
    t0=$(now)
    ktrace count "$PAT" --engine $engine -d 1 >/tmp/b.out 2>/tmp/b.err
    rc=$?
    t1=$(now)
    probes=$(sed -n 's/.* \([0-9]*\) probe(s).*Ctrl-C.*/\1/p' /tmp/b.err)
    echo "BENCH ktrace count '$PAT' --engine $engine -d 1: exit $rc, $probes kprobes, $(elapsed "$t0" "$t1") s wall (1 s of it counting)"
    grep -E 'cleanup|hits' /tmp/b.err | head -3
    head -3 /tmp/b.out
done
# the function tracer in an instance, with the pattern as one glob (the
# kernel matches it in one pass over its function list), then with the
# functions listed one by one (a pass per name)
for how in glob list; do
    mkdir "$T/instances/ktest_bench"
    I=$T/instances/ktest_bench
    grep -E "^${PAT%\*}" "$T/available_filter_functions" | grep -v '\[' | cut -d' ' -f1 | sort -u >/tmp/funcs
    t0=$(now)
    if [ $how = glob ]; then
        echo "$PAT" >"$I/set_ftrace_filter"
    else
        tr '\n' ' ' </tmp/funcs >"$I/set_ftrace_filter"
    fi
    echo function >"$I/current_tracer"
    t1=$(now)
    n=$(wc -l <"$I/set_ftrace_filter")
    sleep 1
    t2=$(now)
    echo nop >"$I/current_tracer"
    echo >"$I/set_ftrace_filter"
    rmdir "$I"
    t3=$(now)
    echo "BENCH function tracer in an instance ($how): $n functions: attach $(elapsed "$t0" "$t1") s, detach $(elapsed "$t2" "$t3") s"
done
pass "figures above"
