# `ktrace disasm` against the kernel's own verdicts (issue 13): every offset
# it marks probe-able in a few functions (a long one sampled, see
# check_function) is accepted by kprobe_events, every
# offset between instruction boundaries is refused with the kernel's message
# for that architecture, every boundary it marks refused is refused, and a
# probe placed with its help in the middle of a function reads a value that
# is known there. The listings go to $KTEST_OUT for the host-side
# comparison with objdump.
# What it holds is ktrace's decoder against the kernel's boundary check,
# which differ by architecture more than by series (95-conform.sh puts
# random offsets to the kernel on every cell): CI runs it on the newest
# series of each architecture and the oldest, x86_64 5.10
# (tests/kernel/README.md, "Which cells run what"); --script or
# KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:5.10 x86_64:7.2 arm64:7.2 arm:7.2 riscv64:7.2
. "$KTEST_LIB"

mkdir -p "$KTEST_OUT/disasm"
# ktrace disasm knows the kprobe rules of x86_64, arm64, riscv64 and 32-bit
# arm in ARM state, and reads a running kernel's code from /proc/kcore
# (which Debian's arm kernels do not have: their rules are held against
# those kernels' verdicts in crates/disasm/tests/arm_kprobe_verdicts.rs).
why=
[ -r /proc/kcore ] || why="no /proc/kcore in this kernel (CONFIG_PROC_KCORE)"
if [ -n "$why" ]; then
    for t in verdicts_do_sys_openat2 verdicts_vfs_read offset_check_exit_status mid_function_register; do
        ktest "$t"
        skip "$why"
    done
    exit 0
fi
case $KTEST_ARCH in
    arm64 | arm) boundary_msg="Failed to register probe event" ;;
    *) boundary_msg="Probe point is not an instruction boundary" ;;
esac

# try_probe FUNC+OFF — 0 when the kernel takes a kprobe there (removed at
# once); else 1 with the error_log message in $errmsg
try_probe() {
    : >"$TRACEFS/error_log"
    if (echo "p:ktest/dis $1" >>"$TRACEFS/kprobe_events") 2>/dev/null; then
        echo "-:ktest/dis" >>"$TRACEFS/kprobe_events"
        return 0
    fi
    errmsg=$(sed -n 's/.*error: //p' "$TRACEFS/error_log" | tail -n 1)
    return 1
}

check_function() { # FUNC
    f=$1
    ktest "verdicts_$f"
    if ! ktrace disasm "$f" >"$KTEST_OUT/disasm/$f.txt" 2>&1; then
        fail "ktrace disasm $f: $(_kt_short "$(cat "$KTEST_OUT/disasm/$f.txt")")"
        return
    fi
    if ! list=$(ktrace disasm "$f" --offsets 2>&1); then
        fail "ktrace disasm $f --offsets: $(_kt_short "$list")"
        return
    fi
    # A long function (vfs_read on 7.2: about 240 instructions, 475
    # kernel writes, 37 s of a TCG cell) is sampled: every instruction of
    # its first and last 24 and every 4th between, and every one ktrace
    # marks refused; a short one (do_sys_openat2) is tried whole.
    # 95-conform.sh puts random offsets to the kernel on every cell besides.
    n=$(printf '%s\n' "$list" | grep -c .)
    i=-1 ok=0 refused=0 inner=0 skipped=0 bad=""
    while read -r off len verdict; do
        i=$((i + 1))
        if [ "$verdict" = ok ] && [ "$n" -gt 96 ] && [ "$i" -ge 24 ] && [ "$i" -lt $((n - 24)) ] && [ $((i % 4)) != 0 ]; then
            skipped=$((skipped + 1))
            continue
        fi
        if [ "$verdict" = ok ]; then
            if try_probe "$f+$off"; then ok=$((ok + 1)); else bad="$bad $off marked ok, kernel: $errmsg;"; fi
        else
            if try_probe "$f+$off"; then
                bad="$bad $off marked '$verdict', kernel took it;"
            else
                # and the kernel's message is the one ktrace disasm names
                said=$(ktrace disasm "$f+$off" 2>&1 | sed -n 's/.*the kernel would answer "\(.*\)"$/\1/p')
                if [ "$said" != "$errmsg" ]; then
                    bad="$bad $off refused, kernel said '$errmsg', ktrace disasm '$said';"
                else
                    refused=$((refused + 1))
                fi
            fi
        fi
        # one byte inside each instruction (its middle; +2 on arm64): every
        # byte would take minutes of TCG time for the same answer
        if [ "$len" -gt 1 ]; then
            o=$(printf '0x%x' $((off + len / 2)))
            if try_probe "$f+$o"; then
                bad="$bad $o not a boundary, kernel took it;"
            elif [ "$errmsg" != "$boundary_msg" ]; then
                bad="$bad $o not a boundary, kernel said '$errmsg';"
            else
                inner=$((inner + 1))
            fi
        fi
    done <<END
$list
END
    echo "$f: $ok probe-able accepted, $refused refused as marked, $inner non-boundaries refused, $skipped of $n instructions not tried" >>"$KTEST_OUT/disasm/summary.txt"
    expect_empty "disagreements with the kernel" "$bad" &&
        expect_gt "probe-able offsets" "$ok" 5 &&
        expect_gt "non-boundaries tried" "$inner" 0 &&
        pass "$ok accepted, $refused refused as marked, $inner non-boundaries refused with '$boundary_msg'; $skipped of $n instructions not tried (sampled)"
}

check_function do_sys_openat2
check_function vfs_read

ktest offset_check_exit_status
# The second byte is never a boundary on x86 (do_sys_openat2 starts with a
# 5-byte instruction), on arm64 (4-byte instructions) nor on riscv64 (2- or
# 4-byte ones).
out=$(ktrace disasm do_sys_openat2+1 2>&1 >/dev/null)
st=$?
expect_eq "exit status for +1" "$st" 1 &&
    expect_match "says why and where to go" "$out" "is not an instruction boundary \\(nearest: \\+0x0 or \\+0x[2458]\\); the kernel would answer \"$boundary_msg\"" &&
    pass

ktest mid_function_register
# After `call getname` (x86) / `bl getname` (arm64) the return register
# holds the struct filename whose first member points at the kernel copy of
# the path: a probe at the next instruction reads it. 7.2 calls
# getname_flags there (getname became an inline wrapper), which returns the
# same struct.
listing=$(cat "$KTEST_OUT/disasm/do_sys_openat2.txt")
next=$(printf '%s\n' "$listing" | awk '
    found && $1 == "*" { print $2; exit }
    found && $1 != "*" { exit }
    /<getname(_flags)?\+0x0>/ { found = 1 }')
if ! printf '%s\n' "$listing" | grep -Eq '<getname(_flags)?\+0x0>'; then
    skip "do_sys_openat2 calls neither getname nor getname_flags on this kernel: $(_kt_short "$(printf '%s\n' "$listing" | grep -m3 'call\|bl\b')")"
elif [ -z "$next" ]; then
    after=$(printf '%s\n' "$listing" | awk 'found { print; exit } /<getname(_flags)?\+0x0>/ { found = 1 }')
    case $after in
        -*) skip "the instruction after the call to getname is refused here: $after" ;;
        *) fail "no probe-able instruction after a call to getname in do_sys_openat2: $(_kt_short "$listing")" ;;
    esac
else
    reg=$(retreg)
    kprobe_add "p:ktest/mid do_sys_openat2$next name=+0(+0($reg)):string" || exit 0
    inst=$(instance_new mid)
    event_enable "$inst" ktest/mid
    cat /ktest/env >/dev/null
    event_enable "$inst" ktest/mid 0
    out=$(trace_lines "$inst")
    teardown "$inst" ktest/mid
    expect_match "the path at do_sys_openat2$next" "$out" "mid: \\(do_sys_openat2\\+${next#+}/0x[0-9a-f]+\\) name=\"/ktest/env\"" &&
        pass "do_sys_openat2$next name=+0(+0($reg)):string read /ktest/env"
fi
