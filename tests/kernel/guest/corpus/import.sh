#!/bin/sh
# Host side of the corpus capture: copies a capture.sh result into the probe crate's
# fixtures, keeping only the /proc/kallsyms lines whose symbol name occurs as a word
# in the corpus definitions (the full file is megabytes; the checks only ever ask
# about names the definitions mention).
#   tests/kernel/guest/corpus/import.sh /tmp/corpus-x86_64 x86_64
set -eu
src=$1 arch=$2
dst=crates/probe/fixtures/corpus/$arch
mkdir -p "$dst"
cp "$src/corpus.txt" "$dst/corpus.txt"
cp "$src/uname.txt" "$dst/uname.txt"
[ -f "$src/version.txt" ] && cp "$src/version.txt" "$dst/version.txt"
[ -f "$src/sched_switch.format" ] && cp "$src/sched_switch.format" "$dst/sched_switch.format"
awk '/^=== DEF$/ { getline; print }' "$src/corpus.txt" |
    tr -c 'A-Za-z0-9_\n' '\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$dst/.names"
gzip -dc "$src/kallsyms.gz" | awk 'NR == FNR { want[$1] = 1; next } ($3 in want)' "$dst/.names" - > "$dst/kallsyms.txt"
rm -f "$dst/.names"
echo "$dst: $(grep -c '^=== DEF$' "$dst/corpus.txt") definitions, $(wc -l < "$dst/kallsyms.txt") kallsyms lines"
