#!/bin/bash
# Host side of guest/72-tracepoints.sh (issue 21 item 1): the guest's
# `ktrace record -e '*:*'` file (every tracepoint of that kernel, the
# recording whose `ktrace report` the guest held against the kernel's own
# `trace`) read by `trace-cmd report` on the host, against the host's
# `ktrace report` of the same file. Run by tests/kernel/run with the
# guest's $KTEST_OUT as $1; prints KTEST lines like a guest script, and
# nothing when the guest left no recording.
#
# trace-cmd prints some things its own way, by design, so the verdict is
# a figure plus three hard facts:
# - both read the same records: as many lines, in the same order (task,
#   CPU, time stamp and event name equal line by line);
# - where trace-cmd reads the print fmt itself (`-N`, no plugins), the
#   events whose helpers issue 21 names (sched_switch's __print_flags and
#   task state, softirq_raise's __print_symbolic, irq_handler_exit) print
#   alike, line for line;
# - the figures: lines equal to `trace-cmd report` and to `trace-cmd
#   report -N`; the first differing line of the ten events that differ
#   most, so a reader sees why (trace-cmd prints `%p` as 0x..., `%pS`
#   without /size, syscalls its own way).
out=$1
dat=$out/tp-all.dat
[ -f "$dat" ] || exit 0
id=tracepoints/tracecmd_reads_the_recording_alike
echo "KTEST-BEGIN $id"
bin=${KTRACE_HOST_BIN:-$(cd "$(dirname "$0")/../../.." && pwd)/target/debug/ktrace}
if ! command -v trace-cmd >/dev/null; then
    if [ -n "${CI:-}" ]; then echo "KTEST $id FAIL trace-cmd is not installed (scripts/setup installs it)"; else echo "KTEST $id SKIP trace-cmd is not installed"; fi
    exit 0
fi
[ -x "$bin" ] || { echo "KTEST $id FAIL no host ktrace at $bin (cargo build, or set KTRACE_HOST_BIN)"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" report "$dat" >"$tmp/k" 2>"$tmp/k.err" || { echo "KTEST $id FAIL ktrace report: $(tail -1 "$tmp/k.err")"; exit 0; }
trace-cmd report -i "$dat" >"$tmp/t" 2>/dev/null
trace-cmd report -N -i "$dat" >"$tmp/tn" 2>/dev/null
trace-cmd dump --cmd-lines -i "$dat" >"$tmp/cmdlines" 2>/dev/null
# the comparison (python3: lines hold tabs and any byte)
python3 - "$tmp" <<'PY' >"$tmp/verdict"
import collections, re, sys
d = sys.argv[1]
def lines(name):
    with open(f"{d}/{name}", encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")[:-1]
def kform(l):
    # ktrace (the kernel's form): `task-pid [cpu] flags ts: event: text`
    m = re.match(r"^(.*?) \[(\d+)\] +\S+ +([0-9.]+): (.*)$", l)
    return m and f"{m[1].strip()} [{m[2]}] {m[3]} {m[4].rstrip()}"
def tform(l):
    # trace-cmd: `[NAME: ]task-pid [cpu] ts: event:   text`
    m = re.match(r"^(.*?) \[(\d+)\] +([0-9.]+): ([^:]*)(?::(.*))?$", l)
    if not m:
        return None
    task = m[1].rsplit(": ", 1)[-1].strip()
    return f"{task} [{m[2]}] {m[3]} {m[4]}: {(m[5] or '').strip()}".rstrip()
def head(l, tc=False):
    w = l.split(" ", 4)
    ev = re.split(r"[:(]", w[3])[0] if len(w) > 3 else ""
    # a syscall: sys_read(...) / sys_read -> x in the kernel's form,
    # sys_enter_read / sys_exit_read in trace-cmd's
    if tc:
        ev = re.sub(r"^sys_(enter|exit)_", "sys_", ev)
    return (w[0], w[1], w[2], ev)
def same_head(a, b):
    # the task's name: ktrace (as the kernel's own trace) prints the
    # recording's saved_cmdlines, `<...>` for a pid missing there, while
    # trace-cmd also learns names from the sched_switch events it has
    # printed (`migration/1-20` on x86_64 6.1, rehearsal of 28 Nov 2026;
    # `sh-3243` before its exec where saved_cmdlines holds `grep`, arm64
    # 5.10, CI of 29 Nov 2026): where the names differ, ktrace's must be
    # the saved_cmdlines name, and the pids are held alike
    ha, hb = head(a), head(b, True)
    if ha == hb:
        return True
    ka, pa = ha[0].rsplit("-", 1) if "-" in ha[0] else (ha[0], "")
    pb = hb[0].rsplit("-", 1)[-1]
    want = cmdlines.get(pa, "<idle>" if pa == "0" else "<...>")
    return pa == pb and ka == want and ha[1:] == hb[1:]
cmdlines = {}
with open(f"{d}/cmdlines", encoding="utf-8", errors="replace") as f:
    for l in f:
        w = l.rstrip("\n").split(" ", 1)
        if len(w) == 2 and w[0].isdigit():
            cmdlines[w[0]] = w[1]
k = [x for x in map(kform, lines("k")) if x]
t = [x for x in map(tform, lines("t")) if x]
tn = [x for x in map(tform, lines("tn")) if x]
heads = sum(not same_head(a, b) for a, b in zip(k, t))
equal = sum(a == b for a, b in zip(k, t))
equal_n = sum(a == b for a, b in zip(k, tn))
helper = re.compile(r" (sched_switch|softirq_raise|softirq_entry|softirq_exit|irq_handler_exit): ")
hl = [(a, b) for a, b in zip(k, tn) if helper.search(a)]
hbad = [(a, b) for a, b in hl if a != b]
fig = (f"lines {len(k)} (trace-cmd {len(t)}), equal to trace-cmd report {equal}, "
       f"to trace-cmd report -N {equal_n}; helper events {len(hl)} lines, unlike {len(hbad)}")
print(fig)
print("--- where trace-cmd prints otherwise (the ten events with most such lines, first line each):")
c = collections.Counter(); ex = {}
for a, b in zip(k, t):
    if a != b:
        e = head(a)[3]; c[e] += 1; ex.setdefault(e, (a, b))
for e, n in c.most_common(10):
    print(f"{n} {e}\n  ktrace:    {ex[e][0][:200]}\n  trace-cmd: {ex[e][1][:200]}")
for a, b in hbad[:3]:
    print(f"  helper event unlike -N:\n  ktrace:    {a[:200]}\n  trace-cmd: {b[:200]}")
verdict = ("FAIL only %d lines in the recording" % len(k) if len(k) < 100
    else f"FAIL ktrace and trace-cmd read other records: {len(k)} against {len(t)} lines, {heads} heads differ ({fig})" if len(k) != len(t) or heads
    else f"FAIL {len(hbad)} helper-event lines unlike trace-cmd report -N ({fig})" if hbad
    else f"PASS {fig}")
print("VERDICT " + verdict)
PY
sed '/^VERDICT /d' "$tmp/verdict"
echo "KTEST $id $(sed -n 's/^VERDICT //p' "$tmp/verdict")"
