#!/bin/bash
# Host side of the guest scripts that write Perfetto traces (00-boot.sh,
# 97-persistent.sh): each $KTEST_OUT/perfetto/NAME.pftrace that ktrace
# wrote in the guest is decoded here with protoc and held against
# NAME.trace, the guest kernel's own lines of the same events
# (crates/perfetto/examples/perfetto-vs-trace.rs). Run by tests/kernel/run
# with the guest's $KTEST_OUT as $1; prints KTEST lines like a guest
# script, nothing when the guest wrote no trace.
out=$1
repo=$(cd "$(dirname "$0")/../../.." && pwd)
for pf in "$out"/perfetto/*.pftrace; do
    [ -f "$pf" ] || continue
    name=$(basename "$pf" .pftrace)
    id=host/perfetto_$name
    echo "KTEST-BEGIN $id"
    if [ ! -f "${pf%.pftrace}.trace" ]; then
        echo "KTEST $id FAIL no ${name}.trace beside ${name}.pftrace"
        continue
    fi
    verdict=$(cd "$repo" && cargo run -q -p ktrace-perfetto --example perfetto-vs-trace -- "$pf" "${pf%.pftrace}.trace" 2>&1 | tail -n 5)
    case $verdict in
        PASS*) echo "KTEST $id PASS ${verdict#PASS }" ;;
        SKIP*) echo "KTEST $id SKIP ${verdict#SKIP }" ;;
        *) printf '%s\n' "$verdict"; echo "KTEST $id FAIL $(printf '%s' "$verdict" | tail -n 1)" ;;
    esac
done
