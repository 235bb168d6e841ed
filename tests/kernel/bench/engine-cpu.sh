# What aggregating costs ktrace, kernel engine against user engine, on the
# same workload in one guest (issue 11: kernel engine ≈ 0; user engine
# ≤ 0.2 s CPU per million events on a real machine). Not part of the suite
# (a measurement; nothing timed is asserted); run it on a cell with
#   tests/kernel/run --arch x86_64 --kernel 6.1 --script tests/kernel/bench/engine-cpu.sh
# The workload: `dd bs=1` reading KTEST_HITS bytes of /dev/zero (default
# 1,000,000), one vfs_read each, under `ktrace count vfs_read --by comm`.
# ktrace's CPU (utime + stime of /proc/PID/stat) is read when it says it
# is tracing and again 2 s after dd ends (the user engine has drained by
# then): startup and teardown, which a TCG guest makes slow and noisy,
# are left out. An idle window of the same length is measured too. The
# counts are checked: each engine counted dd's reads exactly.
. "$KTEST_LIB"
HITS=${KTEST_HITS:-1000000}

# cpu_ticks PID — utime + stime of PID, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# run ENGINE HITS — "ticks dd_count wall_s lost": ktrace's CPU ticks from tracing
# to 2 s after dd's HITS reads (HITS 0: 5 s idle instead of dd)
run() {
    rm -f /tmp/e.out /tmp/e.err
    # one kprobe either way (the user engine would otherwise take the
    # function tracer's route); a buffer that holds a TCG burst
    ktrace count vfs_read --by comm --json --engine "$1" --route kprobe --buffer-size 32768 >/tmp/e.out 2>/tmp/e.err &
    _kp=$!
    wait_tracing /tmp/e.err "$_kp" 600
    _c0=$(cpu_ticks "$_kp")
    read -r _u0 _ </proc/uptime
    if [ "$2" = 0 ]; then
        sleep 5
    else
        dd if=/dev/zero of=/dev/null bs=1 count="$2" 2>/dev/null
    fi
    read -r _u1 _ </proc/uptime
    sleep 2
    _c1=$(cpu_ticks "$_kp")
    kill -INT "$_kp"
    wait $_kp
    cat /tmp/e.err >&2
    _n=$(sed -n 's/.*{"key":{"comm":"dd"},"count":\([0-9]*\)}.*/\1/p' /tmp/e.out | tail -n 1)
    _l=$(sed -n 's/^ktrace: [0-9]* event(s), \([0-9]*\) lost.*/\1/p' /tmp/e.err | tail -n 1)
    echo "$((_c1 - _c0)) ${_n:-0} $(awk -v a="$_u0" -v b="$_u1" 'BEGIN { printf "%.1f", b - a }') ${_l:-0}"
}

# secs TICKS — ticks as seconds
secs() { awk -v t="$1" -v h="$TCK" 'BEGIN { printf "%.2f", t / h }'; }

ktest engine_cpu_per_million
if ! has_hist; then
    skip "no hist triggers: no kernel engine to compare"
else
    for e in kernel user; do
        set -- $(run $e 0)
        eval "${e}_idle=$1"
        set -- $(run $e "$HITS")
        eval "${e}_t=$1 ${e}_n=$2 ${e}_w=$3 ${e}_l=$4"
        eval "echo \"FIGURES engine=$e hits=$HITS counted=\$${e}_n lost=\$${e}_l cpu_ticks=\$${e}_t idle_ticks=\$${e}_idle clk_tck=$TCK dd_wall_s=\$${e}_w\""
    done
    case $kernel_n in "$HITS" | "$((HITS + 1))") ;; *) fail "kernel engine counted $kernel_n reads by dd, want $HITS" ;; esac
    # the user engine's account: counted + lost (the reader fell behind a
    # TCG burst and said so) covers every read
    [ $((user_n + user_l)) -ge "$HITS" ] || fail "user engine counted $user_n reads by dd and lost $user_l, want $HITS in all"
    [ "$user_n" -le $((HITS + 1)) ] || fail "user engine counted $user_n reads by dd, more than $HITS"
    pass "ktrace CPU while $HITS hits were aggregated: kernel engine $(secs "$kernel_t") s (idle window $(secs "$kernel_idle") s), user engine $(secs "$user_t") s for $user_n counted, $user_l lost (idle $(secs "$user_idle") s); dd ran $kernel_w s under the kernel engine, $user_w s under the user engine (TCG)"
fi
