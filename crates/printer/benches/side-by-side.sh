#!/bin/sh
# The same 1,000,000-hit uprobe run (`a=%di s=+0(%si):string`) read by
# `cat trace_pipe` and by `trace-cmd record` + `trace-cmd report`, each in a
# private instance; prints the traced program's wall time and the reader's
# CPU time and peak memory. (ktrace's own numbers: the live_host test with
# KTRACE_LIVE_HITS=1000000 in release mode.) Cleans up after itself.
#   sh crates/printer/benches/side-by-side.sh [HITS]
set -u
HITS=${1:-1000000}
HERE=$(dirname "$(realpath "$0")")
T=/sys/kernel/tracing
G=ktrace_sbs_$$
I=$T/instances/$G
W=/tmp/$G
mkdir -p "$W"
BIN=$W/kfix_target
gcc -O1 -fno-inline -no-pie -o "$BIN" "$HERE/../../ring/fixtures/target.c"
OFF=$(printf '0x%x' $((0x$(nm "$BIN" | awk '$3 == "probe_me" { print $1 }') - 0x400000)))
cleanup() {
	[ -d "$I" ] && echo 0 > "$I/events/$G/enable" && rmdir "$I"
	[ -d "$T/instances/${G}_tc" ] && rmdir "$T/instances/${G}_tc"
	echo "-:$G/hit" >> $T/uprobe_events
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
printf '%s\n' "p:$G/hit $BIN:$OFF a=%di s=+0(%si):string" >> $T/uprobe_events

mkdir "$I"
echo 4096 > "$I/buffer_size_kb"
/usr/bin/time -f 'cat trace_pipe: %U user %S sys, %M KB maxrss' -o "$W/cat.time" cat "$I/trace_pipe" > "$W/pipe.txt" &
CAT=$!
echo 1 > "$I/events/$G/enable"
/usr/bin/time -f '%e' -o "$W/wall" "$BIN" "$HITS"
echo 0 > "$I/events/$G/enable"
sleep 2
kill $(pgrep -P $CAT cat) 2>/dev/null
wait $CAT 2>/dev/null
echo "cat trace_pipe: traced program wall $(cat "$W/wall") s, lines $(grep -c 'hit:' "$W/pipe.txt"), lost lines $(grep -c LOST "$W/pipe.txt")"
cat "$W/cat.time"
echo 0 > "$I/events/$G/enable"; rmdir "$I"

if command -v trace-cmd >/dev/null; then
	# trace-cmd writes ftrace_enabled and set_ftrace_*: EPERM in this
	# sandbox, so give it plain files there, in a private mount namespace
	# (the instance is made here first so its files can be covered too)
	mkdir "$T/instances/${G}_tc"
	TI=$T/instances/${G}_tc
	unshare -m sh -c "
		for f in /proc/sys/kernel/ftrace_enabled $T/set_ftrace_filter $T/set_ftrace_notrace $T/set_ftrace_pid $T/set_ftrace_notrace_pid $T/set_graph_function $T/set_graph_notrace $TI/set_ftrace_filter $TI/set_ftrace_notrace $TI/set_ftrace_pid $TI/set_ftrace_notrace_pid; do
			[ -e \$f ] || continue
			b=$W/\$(echo \$f | tr / _)
			cp \$f \$b 2>/dev/null || : > \$b
			mount --bind \$b \$f
		done
		/usr/bin/time -f 'trace-cmd record: %U user %S sys, %M KB maxrss, wall %e' -o $W/rec.time \
			trace-cmd record -q -B ${G}_tc -b 4096 -e $G:hit -o $W/trace.dat -- /usr/bin/time -f %e -o $W/wall $BIN $HITS > $W/rec.log 2>&1
	"
	echo "trace-cmd record: traced program wall $(cat "$W/wall") s"
	cat "$W/rec.time"
	tail -3 "$W/rec.log"
	/usr/bin/time -f 'trace-cmd report: %U user %S sys, %M KB maxrss, wall %e' -o "$W/rep.time" trace-cmd report -i "$W/trace.dat" > "$W/rep.txt" 2>/dev/null
	cat "$W/rep.time"
	echo "trace-cmd report lines: $(grep -c 'hit:' "$W/rep.txt")"
fi
