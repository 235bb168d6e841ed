# Every tracepoint of the kernel printed as the kernel's own `trace` prints
# it (issue 21 item 1): all events are switched on for a moment in ktrace's
# own instance (a `ktrace trace` session with one kprobe) and in a
# reference instance, and each line ktrace prints must be one of the
# reference's lines (a multiset: ktrace leaves out its own threads, and
# the reference saw a little more time on both sides). Masked: the time
# stamp and the need-resched flag (each instance's copy is stamped on its
# own), the task's name (the kernel names tasks from its small
# saved_cmdlines cache when `trace` is read, ktrace when it printed them),
# and 16-digit hex words: the reference prints `%p` hashed (`hash-ptr` on,
# the default; with it off the x86_64 6.1 kernel prints `%s` arguments
# empty or garbled: trace_event_format()'s rewritten format and
# trace_check_vprintf() share iter->fmt), ktrace prints the address. An
# argument computed from a kernel variable (`vmemmap_base`,
# `memstart_addr`, `jiffies`: `page=%p` of the mm events) cannot be known
# to a reader of the buffer: ktrace prints `[FAILED TO PARSE]` there, and
# the rest of such a line must match. The verdict line carries the
# figures: tracepoints enabled, lines compared, equal, equal but for
# kernel-variable arguments.
. "$KTEST_LIB"
entry_probes_or_skip tracepoints_equal_kernel_trace

ktest tracepoints_equal_kernel_trace
rm -f /tmp/tp.out /tmp/tp.err /tmp/tp.kernel /tmp/tp.unlike
ktrace trace 'p:anchor do_sys_openat2' -d 120 -o /tmp/tp.out 2>/tmp/tp.err &
kpid=$!
wait_tracing /tmp/tp.err $kpid 100
sess=$(sed -n 's/.*in session \([^;]*\);.*/\1/p' /tmp/tp.err)
ours=$TRACEFS/instances/$sess
ref=$(instance_new tpref)
echo 8192 >"$ref/buffer_size_kb"
# the reference first and last: it holds everything ktrace's instance saw
echo 1 >"$ref/events/enable"
echo 1 >"$ours/events/enable"
enabled=$(cat "$ours"/events/*/*/enable 2>/dev/null | grep -c 1)
ls / >/dev/null; cat /ktest/env >/dev/null; echo x >/tmp/tp.x; sleep 0.3
echo 0 >"$ours/events/enable"
echo 0 >"$ref/events/enable"
sleep 1
trace_lines "$ref" >/tmp/tp.kernel
written=$(sed -n 's/^# entries-in-buffer\/entries-written: \([0-9]*\)\/\([0-9]*\).*/\1 \2/p' "$ref/trace")
rmdir "$ref"
kill -INT $kpid; wait $kpid
# events whose print fmt reads a kernel variable
allow=$(grep -l 'vmemmap_base\|memstart_addr\|jiffies\|page_offset_base' "$TRACEFS"/events/*/*/format 2>/dev/null |
    sed 's|.*/events/[^/]*/\([^/]*\)/format|\1|' | tr '\n' ' ')
res=$(awk -v allow="$allow" '
function mask(l,   pc, rest, fl, sp) {
    if (!match(l, /-[0-9]+ +\[[0-9]+\] /)) return ""
    pc = substr(l, RSTART + 1, RLENGTH - 2); gsub(/ +/, " ", pc)
    rest = substr(l, RSTART + RLENGTH)
    sp = index(rest, " "); fl = substr(rest, 1, sp - 1); rest = substr(rest, sp)
    if (!sub(/^ *[0-9]+\.[0-9]+: /, "", rest)) return ""
    fl = substr(fl, 1, 1) "?" substr(fl, 3)
    gsub(/[0-9a-f]{16}/, "P", rest)
    return pc " " fl " " rest
}
function evname(k,   r) { r = k; sub(/^[^ ]* [^ ]* [^ ]* /, "", r); sub(/[:(].*/, "", r); return r }
function gapmatch(o, k,   n, p, i, at, rest) {
    n = split(o, p, /\[FAILED TO PARSE\]/); rest = k
    if (substr(rest, 1, length(p[1])) != p[1]) return 0
    rest = substr(rest, length(p[1]) + 1)
    for (i = 2; i < n; i++) { at = index(rest, p[i]); if (!at) return 0; rest = substr(rest, at + length(p[i])) }
    return length(rest) >= length(p[n]) && substr(rest, length(rest) - length(p[n]) + 1) == p[n]
}
BEGIN { na = split(allow, a, " "); for (i = 1; i <= na; i++) A[a[i]] = 1 }
NR == FNR { k = mask($0); if (k != "") { K[k]++; e = evname(k); E[e, ++EN[e]] = k }; next }
{
    o = mask($0); if (o == "") next
    n++
    if (K[o] > 0) { K[o]--; eq++; next }
    e = evname(o)
    if (index(o, "[FAILED TO PARSE]") && (e in A))
        for (i = 1; i <= EN[e]; i++) if (K[E[e, i]] > 0 && gapmatch(o, E[e, i])) { K[E[e, i]]--; gaps++; next }
    bad++; print $0 >"/tmp/tp.unlike"
}
END { printf "%d %d %d %d\n", n, eq, gaps, bad }' /tmp/tp.kernel /tmp/tp.out)
set -- $res
compared=$1 equal=$2 gaps=$3 unlike=$4
figures="tracepoints enabled $enabled, lines compared $compared, equal $equal (+$gaps but for kernel-variable arguments), unlike $unlike; reference kept/written ${written:-?}"
echo "$figures"
expect_gt "lines compared" "$compared" 100 &&
    expect_eq "lines unlike the kernel's" "$unlike" 0 &&
    pass "$figures"
[ "$unlike" = 0 ] || { echo "--- unlike (first 20)"; head -20 /tmp/tp.unlike; }
