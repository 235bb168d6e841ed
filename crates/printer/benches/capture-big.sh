#!/bin/sh
# A 1,000,000-hit uprobe capture (`a=%di s=+0(%si):string` on a tight loop,
# as in issue 5) for the decode benchmark and the trace-cmd comparison.
# Writes OUTDIR/{header_page,header_event,hit.format,info.txt,saved_cmdlines,
# cpuN.raw,cpuN.stats,trace.txt} and, when trace-cmd is installed, a
# trace.dat built from the very same raw pages with `trace-cmd restore`.
# Creates instances/ktrace_big_<pid> and group ktrace_big_<pid>, removes both.
#   sh crates/printer/benches/capture-big.sh /work/targets/ring/big [HITS]
set -eu
OUT=$(realpath -m "${1:?usage: capture-big.sh OUTDIR [HITS]}")
HITS=${2:-1000000}
HERE=$(dirname "$(realpath "$0")")
T=/sys/kernel/tracing
G=ktrace_big_$$
I=$T/instances/$G
W=/tmp/$G
mkdir -p "$W" "$OUT"
rm -f "$OUT"/cpu*.raw "$OUT"/cpu*.stats
BIN=$W/kfix_target
gcc -O1 -fno-inline -no-pie -o "$BIN" "$HERE/../../ring/fixtures/target.c"
# -no-pie: text at vaddr 0x401000 / file offset 0x1000
OFF=$(printf '0x%x' $((0x$(nm "$BIN" | awk '$3 == "probe_me" { print $1 }') - 0x400000)))
cleanup() {
	set +e
	[ -d "$I" ] && echo 0 > "$I/events/$G/enable"
	[ -d "$I" ] && rmdir "$I"
	echo "-:$G/hit" >> $T/uprobe_events
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
printf '%s\n' "p:$G/hit $BIN:$OFF a=%di s=+0(%si):string" >> $T/uprobe_events
mkdir "$I"
echo 100000 > "$I/buffer_size_kb"
echo 1 > "$I/events/$G/enable"
# wall time of the traced program with the probe on and no reader
/usr/bin/time -f '%e' -o "$W/wall" "$BIN" "$HITS"
echo 0 > "$I/events/$G/enable"
{
	echo "uname -r: $(uname -r)"
	echo "hits: $HITS"
	echo "target wall with probe, no reader: $(cat "$W/wall") s"
	grep "$G" $T/dynamic_events
} > "$OUT/info.txt"
cp $T/events/header_page $T/events/header_event "$OUT/"
cp $T/events/$G/hit/format "$OUT/hit.format"
cp $T/saved_cmdlines "$OUT/saved_cmdlines"
cp "$I/trace" "$OUT/trace.txt"
for c in "$I"/per_cpu/cpu*; do
	n=${c##*/}
	cp "$c/stats" "$OUT/$n.stats"
	dd if="$c/trace_pipe_raw" of="$OUT/$n.raw" bs=4096 iflag=nonblock status=none 2>/dev/null || true
	[ -s "$OUT/$n.raw" ] || rm -f "$OUT/$n.raw"
done
if command -v trace-cmd >/dev/null; then
	trace-cmd restore -c -o "$OUT/head.dat"
	trace-cmd restore -i "$OUT/head.dat" -o "$OUT/trace.dat" "$OUT"/cpu*.raw
fi
ls -l "$OUT"
