#!/bin/sh
# Host side of the corpus capture: copies a capture.sh result into the probe crate's
# fixtures, keeping only the /proc/kallsyms lines whose symbol name occurs as a word
# in the corpus definitions (the full file is megabytes; the checks only ever ask
# about names the definitions mention).
#   tests/kernel/guest/corpus/import.sh /tmp/corpus-x86_64 x86_64
# With --append, adds the capture's blocks to the cell's corpus.txt and the
# kallsyms lines of the names they mention that kallsyms.txt lacks (a few
# definitions captured again on the same cell, e.g. the differential
# tester's disagreements):
#   tests/kernel/guest/corpus/import.sh --append /tmp/cap/out-7.2 arm-7.2
set -eu
append=0
[ "${1:-}" = --append ] && { append=1; shift; }
src=$1 arch=$2
dst=crates/probe/fixtures/corpus/$arch
mkdir -p "$dst"
if [ $append = 1 ]; then
    [ -f "$dst/corpus.txt" ] || { echo "import.sh: no $dst/corpus.txt to append to" >&2; exit 1; }
    cat "$src/corpus.txt" >> "$dst/corpus.txt"
    awk '/^=== DEF$/ { getline; print }' "$src/corpus.txt" |
        tr -c 'A-Za-z0-9_\n' '\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$dst/.names"
    n=$(wc -l < "$dst/kallsyms.txt")
    gzip -dc "$src/kallsyms.gz" |
        awk 'FILENAME == ARGV[1] { have[$3] = 1; next } FILENAME == ARGV[2] { want[$1] = 1; next } ($3 in want) && !($3 in have)' \
            "$dst/kallsyms.txt" "$dst/.names" - >> "$dst/kallsyms.txt"
    rm -f "$dst/.names"
    echo "$dst: $(grep -c '^=== DEF$' "$src/corpus.txt") definitions appended ($(grep -c '^=== DEF$' "$dst/corpus.txt") now), $(($(wc -l < "$dst/kallsyms.txt") - n)) kallsyms lines added"
    exit 0
fi
cp "$src/corpus.txt" "$dst/corpus.txt"
cp "$src/uname.txt" "$dst/uname.txt"
[ -f "$src/version.txt" ] && cp "$src/version.txt" "$dst/version.txt"
[ -f "$src/sched_switch.format" ] && cp "$src/sched_switch.format" "$dst/sched_switch.format"
awk '/^=== DEF$/ { getline; print }' "$src/corpus.txt" |
    tr -c 'A-Za-z0-9_\n' '\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u > "$dst/.names"
gzip -dc "$src/kallsyms.gz" | awk 'NR == FNR { want[$1] = 1; next } ($3 in want)' "$dst/.names" - > "$dst/kallsyms.txt"
rm -f "$dst/.names"
echo "$dst: $(grep -c '^=== DEF$' "$dst/corpus.txt") definitions, $(wc -l < "$dst/kallsyms.txt") kallsyms lines"
