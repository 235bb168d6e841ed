# A tracepoint probe whose `__probestub_TP` ftrace cannot attach to (the
# notrace power and rpm tracepoints of kernel/trace/) fails to register on
# kernels that register `t:` probes when they are created (6.12), and the
# failure leaves the stub on the tracepoint: every later `t:` probe of it
# is EEXIST with nothing logged, until the next boot (x86_64 6.12.118,
# conform seed 20261201 at 20,000: the two disagreements of that cell).
# ktrace reads the tracepoint's probe array (kallsyms, BTF, /proc/kcore).
# Both writes are held against `ktrace check --json` of the same line,
# taken just before each.
. "$KTEST_LIB"

ktest stub_left_is_file_exists
D=$TRACEFS/dynamic_events
[ -f "$D" ] || { skip "no dynamic_events"; exit 0; }
# (without /proc/kcore ktrace cannot read the tracepoint's probes: 32-bit arm)
[ -r /proc/kcore ] || { skip "no /proc/kcore: ktrace cannot read a tracepoint's probes here"; exit 0; }
raw() { # LINE -> "ok" or the shell's write error; error_log cleared first
    echo >"$TRACEFS/error_log"
    r=$({ echo "$1" >>"$D"; } 2>&1) && r=ok
    printf '%s' "$r" | sed 's/.*write error: //'
}
for tp in cpu_frequency wakeup_source_deactivate cpu_idle rpm_idle; do
    grep -qx "[a-z_]*:$tp" "$TRACEFS/available_events" 2>/dev/null || continue
    first=$(ktrace check --json --file dynamic_events "t:ktstub/a $tp" 2>&1)
    r1=$(raw "t:ktstub/a $tp")
    if [ "$r1" = ok ]; then
        echo "-:ktstub/a" >>"$D"
        case $first in *'"accepted":true'*) continue ;; esac
        fail "$tp: the kernel took t:ktstub/a $tp, ktrace: $(_kt_short "$first")"
        exit 0
    fi
    logged=$(sed -n 's/.*error: //p' "$TRACEFS/error_log" | head -n 1)
    if [ -z "$logged" ]; then
        # no tracepoint probes here (arm64 and riscv64 6.12: not a probe)
        case $first in
            *'"accepted":false'*'"logged":false'*) skip "t: refused with nothing logged by both ($r1): no tracepoint probes on this kernel" ;;
            *) fail "$tp: the kernel refused the first ($r1, nothing logged), ktrace: $(_kt_short "$first")" ;;
        esac
        exit 0
    fi
    case $first in
        *'"accepted":false'*"\"message\":\"$logged\""*) ;;
        *) fail "$tp: the kernel refused the first ($r1, logged '$logged'), ktrace: $(_kt_short "$first")"; exit 0 ;;
    esac
    second=$(ktrace check --json --file dynamic_events "t:ktstub/b $tp" 2>&1)
    r2=$(raw "t:ktstub/b $tp")
    [ "$r2" = ok ] && echo "-:ktstub/b" >>"$D"
    logged2=$(sed -n 's/.*error: //p' "$TRACEFS/error_log" | head -n 1)
    case $second in
        *'"accepted":false'*'"logged":false'*) ours=refused-silently ;;
        *'"accepted":false'*) ours=refused-logged ;;
        *) ours=accepted ;;
    esac
    if [ "$r2" = ok ]; then kern=accepted; elif [ -z "$logged2" ]; then kern=refused-silently; else kern=refused-logged; fi
    if [ "$ours" = "$kern" ]; then
        pass "$tp: first refused by both ('$logged'); the second $kern by both (kernel: $r2)"
    else
        fail "$tp: the second is $kern to the kernel ($r2${logged2:+, logged '$logged2'}), $ours to ktrace: $(_kt_short "$second")"
    fi
    exit 0
done
skip "every tracepoint probe tried registered (this kernel registers them when enabled, or ftrace attaches to their stubs)"
