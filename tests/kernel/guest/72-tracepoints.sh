# Every tracepoint of the kernel printed as the kernel's own `trace` prints
# it (issue 21 item 1). `ktrace record -e '*:*'` (one kprobe, and every
# event of the kernel switched on in its instance) is stopped (SIGSTOP) so
# that it reads nothing more; a workload runs, tracing_on goes to 0, and
# the kernel's `trace` file of that instance is read; then ktrace
# continues, writes the rest of the buffer to its file, and `ktrace report`
# prints it. Every line of the kernel's must be one of ktrace's, time
# stamps and flags included. The recording is left in $KTEST_OUT
# (tp-all.dat): on the host, tests/kernel/host/72-tracecmd.sh holds
# `trace-cmd report` of that same file against `ktrace report`. Masked: the task's name (the kernel names tasks from its small
# saved_cmdlines cache when `trace` is read, ktrace when it printed them),
# and hex words of a pointer's width: the kernel prints `%p` hashed (`hash-ptr` on, the
# default; with it off the x86_64 6.1 kernel prints `%s` arguments empty or
# garbled: trace_event_format()'s rewritten format and
# trace_check_vprintf() share iter->fmt), ktrace the address. An argument
# computed from a kernel variable (`vmemmap_base`, `memstart_addr`,
# `jiffies`: `page=%p` of the mm events) cannot be known to a reader of the
# buffer: ktrace prints `[FAILED TO PARSE]` there, and the rest of such a
# line must match; so it does for enum constants a print fmt keeps by name
# (hrtimer_start's `mode=`) on a kernel without BTF (arm's armmp), where
# ktrace cannot know them. One instance only: switching an event off while another
# instance has it on costs a synchronize_rcu() each (75 s for the ~1,300
# events of x86_64 7.2 under TCG; the last instance's takes 3 s, which
# ktrace's teardown does in one write). The
# verdict line carries the figures: tracepoints enabled, lines compared,
# equal, equal but for kernel-variable arguments.
. "$KTEST_LIB"
entry_probes_or_skip tracepoints_equal_kernel_trace

ktest tracepoints_equal_kernel_trace
rm -f /tmp/tp.*
mkdir -p "$KTEST_OUT"
dat=$KTEST_OUT/tp-all.dat
# 128 KiB a CPU keeps the lines (and CI's time) down; 32-bit arm under TCG
# gets 1 MiB: there the flood of every event laps a reader of so small a
# buffer inside one page swap, and the kernel warns and switches that
# CPU's buffer off (arm 7.2: WARNING in __rb_get_reader_page, then an empty
# `trace`)
kb=128
[ "$(long_bits)" = 32 ] && kb=1024
echo "phase: start at $(cut -d' ' -f1 /proc/uptime)"
ktrace record 'p:anchor do_sys_openat2' -e '*:*' --buffer-size $kb -d 300 -o "$dat" 2>/tmp/tp.err &
kpid=$!
wait_tracing /tmp/tp.err $kpid 300
sess=$(sed -n 's/.*in session \([^;]*\);.*/\1/p' /tmp/tp.err)
ours=$TRACEFS/instances/$sess
kill -STOP $kpid
echo "phase: tracing at $(cut -d' ' -f1 /proc/uptime)"
enabled=$(grep -c . "$ours/set_event")
ls / >/dev/null; cat /ktest/env >/dev/null; echo x >/tmp/tp.x; sleep 0.3
echo 0 >"$ours/tracing_on"
trace_lines "$ours" >/tmp/tp.kernel
echo "phase: kernel trace read at $(cut -d' ' -f1 /proc/uptime)"
kill -CONT $kpid
kill -INT $kpid; wait $kpid
echo "phase: recorded at $(cut -d' ' -f1 /proc/uptime)"
ktrace report "$dat" >/tmp/tp.out 2>/tmp/tp.rep.err || { cat /tmp/tp.rep.err; fail "ktrace report of $dat failed"; }
echo "recording: $(wc -c <"$dat") bytes, $(wc -l </tmp/tp.out) lines; reported at $(cut -d' ' -f1 /proc/uptime)"
# the comparison: both sides masked (sed), and the kernel's lines not
# among ktrace's (a multiset difference: ktrace may have read a page
# before it was stopped, so it may have more); what is left may still
# match ktrace's `[FAILED TO PARSE]` lines of events whose print fmt reads
# a kernel variable
# (a hashed pointer has the digits of a long: 8 on 32-bit arm)
digits=16
[ "$(long_bits)" = 32 ] && digits=8
mask() { sed -E "s/^[^[]*-([0-9]+ +\\[)/\\1/; s/[0-9a-f]{$digits}/P/g" "$1"; }
mask /tmp/tp.out >/tmp/tp.ours.m
mask /tmp/tp.kernel >/tmp/tp.kernel.m
compared=$(wc -l </tmp/tp.kernel.m | tr -d ' ')
# the kernel's lines not among ktrace's (a multiset difference), and, in
# the same pass (a pass over 50,000 lines is 7-14 s on arm under TCG), the
# names of the events the kernel's lines show
awk -v seen=/tmp/tp.seen '
    NR == FNR { O[$0]++; next }
    $4 ~ /^[0-9]+\.[0-9]+:$/ && match($5, /^[a-z0-9_]*[:(]/) { S[substr($5, 1, RLENGTH - 1)] = 1 }
    O[$0] > 0 { O[$0]--; next }
    { print }
    END { n = 0; for (e in S) n++; print n >seen }' /tmp/tp.ours.m /tmp/tp.kernel.m >/tmp/tp.missing
seen=$(cat /tmp/tp.seen)
# (the kernel variables: x86_64's vmemmap_base and page_offset_base,
# arm64's memstart_addr, arm's mem_map and __pv_phys_pfn_offset, riscv64's
# phys_ram_base and vmemmap_start_pfn, jiffies; enum constants the kernel
# left by name are known to ktrace through BTF only)
vars='vmemmap_base\|page_offset_base\|memstart_addr\|mem_map\|__pv_phys_pfn_offset\|phys_ram_base\|vmemmap_start_pfn\|jiffies'
allow=
for e in $(sed -E -n 's/^[0-9]+ +\[[0-9]+\] [^ ]* +[0-9]+\.[0-9]+: ([a-z0-9_]*): .*FAILED TO PARSE.*/\1/p' /tmp/tp.ours.m | sort -u); do
    f=$(ls "$TRACEFS"/events/*/"$e"/format 2>/dev/null)
    [ -n "$f" ] || continue
    if grep -q "$vars" $f || { ! has_btf && grep -q '{ *[A-Z][A-Z0-9_]* *,' $f; }; then
        allow="$allow $e"
    fi
done
res=$(grep -F '[FAILED TO PARSE]' /tmp/tp.ours.m | awk -v allow="$allow" '
function evname(k,   r) { r = k; sub(/^[0-9]+ +\[[0-9]+\] [^ ]* +[0-9]+\.[0-9]+: /, "", r); sub(/[:(].*/, "", r); return r }
function head(k) { return match(k, /^[0-9]+ +\[[0-9]+\] [^ ]* +[0-9]+\.[0-9]+: /) ? substr(k, 1, RLENGTH) : k }
function gapmatch(o, k,   n, p, i, at, rest) {
    n = split(o, p, /\[FAILED TO PARSE\]/); rest = k
    if (substr(rest, 1, length(p[1])) != p[1]) return 0
    rest = substr(rest, length(p[1]) + 1)
    for (i = 2; i < n; i++) { at = index(rest, p[i]); if (!at) return 0; rest = substr(rest, at + length(p[i])) }
    return length(rest) >= length(p[n]) && substr(rest, length(rest) - length(p[n]) + 1) == p[n]
}
BEGIN { na = split(allow, a, " "); for (i = 1; i <= na; i++) A[a[i]] = 1 }
NR == FNR { if (evname($0) in A) { h = head($0); G[h, ++GN[h]] = $0 }; next }
{
    h = head($0)
    for (i = 1; i <= GN[h]; i++) if (G[h, i] != "" && gapmatch(G[h, i], $0)) { G[h, i] = ""; gaps++; next }
    bad++; print $0 >"/tmp/tp.unlike"
}
END { printf "%d %d\n", gaps, bad }' - /tmp/tp.missing)
set -- $res
gaps=$1 unlike=$2 equal=$((compared - $(wc -l </tmp/tp.missing)))
echo "phase: compared at $(cut -d' ' -f1 /proc/uptime)"
figures="tracepoints enabled $enabled (seen $seen), lines compared $compared, equal $equal (+$gaps but for kernel variables$(has_btf || echo ' and enum names without BTF')), unlike $unlike"
echo "$figures"
expect_gt "lines compared" "$compared" 100 &&
    expect_eq "lines unlike the kernel's" "$unlike" 0 &&
    pass "$figures"
[ "$unlike" = 0 ] || { echo "--- kernel lines unlike ktrace's (first 20)"; head -20 /tmp/tp.unlike; }
