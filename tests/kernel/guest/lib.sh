# tests/kernel/guest/lib.sh — helpers for guest test scripts (busybox sh).
# Source it first thing:   . "$KTEST_LIB"
# Reference: tests/kernel/README.md ("Writing a guest script").
#
# One test = `ktest NAME`, then checks, then `pass` (or `fail "why"` /
# `skip "why"`). Each verdict prints exactly one line
#     KTEST <suite>/<name> PASS|FAIL|SKIP <message>
# which the host turns into its report. `pass` fails the test instead when
# the test left a dynamic event or an instance behind (and removes it).

TRACEFS=${TRACEFS:-/sys/kernel/tracing}
KTEST_RESULTS=${KTEST_RESULTS:-/tmp/ktest-results}
KTEST_OUT=${KTEST_OUT:-/tmp/ktest-out}
if [ -z "${KTEST_SUITE:-}" ]; then
    KTEST_SUITE=${KTEST_SCRIPT:-${0##*/}}
    KTEST_SUITE=${KTEST_SUITE%.sh}
    KTEST_SUITE=$(echo "$KTEST_SUITE" | sed 's/^[0-9]*-//')
fi
_kt_name=
_kt_open=0
_kt_ntests=0

# ------------------------------------------------------------ verdicts
_kt_uptime() { read -r _kt_up _ </proc/uptime 2>/dev/null && echo "$_kt_up"; }
_kt_verdict() { # VERDICT MESSAGE
    # the test's duration goes to the console (KTEST-TIME: not a verdict),
    # for finding where a cell's minutes go
    echo "KTEST-TIME $KTEST_SUITE/$_kt_name $(awk -v a="${_kt_t0:-0}" -v b="$(_kt_uptime)" 'BEGIN { printf "%.1f", b - a }')"
    echo "KTEST $KTEST_SUITE/$_kt_name $1 $2"
    echo "$KTEST_SUITE/$_kt_name $1" >>"$KTEST_RESULTS"
    _kt_open=0
}

# ktest NAME — start a test (a still-open previous test fails: no verdict)
ktest() {
    if [ "$_kt_open" = 1 ]; then
        ktest_cleanup
        _kt_verdict FAIL "no verdict (test ended without pass/fail)"
    fi
    _kt_name=$1
    _kt_t0=$(_kt_uptime)
    _kt_open=1
    _kt_ntests=$((_kt_ntests + 1))
    echo "KTEST-BEGIN $KTEST_SUITE/$_kt_name"
}

# pass [MESSAGE] — the current test passed, unless it left something behind
pass() {
    [ "$_kt_open" = 1 ] || return 0
    _kt_left=$(ktest_leftovers)
    if [ -n "$_kt_left" ]; then
        ktest_cleanup
        _kt_verdict FAIL "left behind: $_kt_left"
        return 1
    fi
    _kt_verdict PASS "${1:-}"
}

# fail MESSAGE — the current test failed (cleans up; returns 1 so
# `... || return` stops a test function). Later failures in the same test
# are printed as notes only.
fail() {
    if [ "$_kt_open" != 1 ]; then
        echo "note: after the verdict: $1"
        return 1
    fi
    ktest_cleanup
    _kt_verdict FAIL "$1"
    return 1
}

# skip MESSAGE — the kernel lacks what the test needs (say what)
skip() {
    [ "$_kt_open" = 1 ] || return 0
    ktest_cleanup
    _kt_verdict SKIP "$1"
}

_kt_exit() {
    _kt_rc=$?
    if [ "$_kt_open" = 1 ]; then
        ktest_cleanup
        _kt_verdict FAIL "script ended (status $_kt_rc) before a verdict"
    fi
}
trap _kt_exit EXIT

# ------------------------------------------------------------ checks
# Each returns 0 on success; on failure it calls fail and returns 1.
_kt_short() { printf '%s' "$1" | tr '\n' '|' | cut -c1-300; }

expect_eq() { # DESC GOT WANT
    [ "$2" = "$3" ] || fail "$1: got '$(_kt_short "$2")', want '$(_kt_short "$3")'"
}
expect_ne() { # DESC GOT UNWANTED
    [ "$2" != "$3" ] || fail "$1: got '$(_kt_short "$2")', want anything else"
}
_kt_int() { case $1 in '' | *[!0-9-]*) return 1 ;; esac; }
expect_ge() { # DESC GOT MIN   (integers)
    _kt_int "$2" || { fail "$1: got '$(_kt_short "$2")', want an integer >= $3"; return 1; }
    [ "$2" -ge "$3" ] || fail "$1: got $2, want >= $3"
}
expect_gt() { # DESC GOT MIN   (integers)
    _kt_int "$2" || { fail "$1: got '$(_kt_short "$2")', want an integer > $3"; return 1; }
    [ "$2" -gt "$3" ] || fail "$1: got $2, want > $3"
}
# task_col COMM — an ERE for the start of a kernel trace line of a command
# the script just ran: the kernel prints the comm it saved for the pid
# (saved_cmdlines), recorded at a context switch, so an event the child
# hits after exec() but before its next switch shows the shell's comm, or
# <...> when none was saved (x86_64 5.10: "sh-1789 ... bits:" for cat's open)
task_col() {
    printf '^ *(%s|sh|<\\.\\.\\.>)-[0-9]+ ' "$1"
}
expect_match() { # DESC TEXT ERE — some line of TEXT matches the extended regex
    printf '%s\n' "$2" | grep -qE -- "$3" ||
        fail "$1: no line matches /$3/ in: $(_kt_short "$2")"
}
expect_nomatch() { # DESC TEXT ERE
    _kt_m=$(printf '%s\n' "$2" | grep -E -- "$3" | head -n 3)
    [ -z "$_kt_m" ] || fail "$1: unexpected /$3/: $(_kt_short "$_kt_m")"
}
expect_empty() { # DESC TEXT
    [ -z "$2" ] || fail "$1: want empty, got: $(_kt_short "$2")"
}
expect_ok() { # DESC CMD [ARGS...] — the command must succeed
    _kt_d=$1; shift
    _kt_o=$("$@" 2>&1) && return 0
    _kt_rc=$?
    fail "$_kt_d: '$*' exited $_kt_rc: $(_kt_short "$_kt_o")"
}
expect_fail() { # DESC CMD [ARGS...] — the command must fail
    _kt_d=$1; shift
    _kt_o=$("$@" 2>&1) || return 0
    fail "$_kt_d: '$*' succeeded, want failure: $(_kt_short "$_kt_o")"
}

# ------------------------------------------------------------ tracefs
# tfs_write FILE TEXT — append TEXT to $TRACEFS/FILE (like `echo TEXT >>`);
# on rejection prints the write error and the kernel's error_log tail.
tfs_write() {
    _kt_err=$( (echo "$2" >>"$TRACEFS/$1") 2>&1) && return 0
    echo "write '$2' to $1 failed: $_kt_err"
    [ -r "$TRACEFS/error_log" ] && tail -n 3 "$TRACEFS/error_log" | sed 's/^/  error_log: /'
    return 1
}
# tfs_set FILE TEXT — truncating write (`echo TEXT >`)
tfs_set() {
    _kt_err=$( (echo "$2" >"$TRACEFS/$1") 2>&1) && return 0
    echo "write '$2' to $1 failed: $_kt_err"
    [ -r "$TRACEFS/error_log" ] && tail -n 3 "$TRACEFS/error_log" | sed 's/^/  error_log: /'
    return 1
}
tfs_read() { cat "$TRACEFS/$1"; } # FILE

# kprobe_add DEFINITION — append to kprobe_events; on failure `fail`s the
# test with the kernel's error_log and returns 1
kprobe_add() {
    _kt_o=$(tfs_write kprobe_events "$1") || { fail "kernel rejected '$1': $(_kt_short "$_kt_o")"; return 1; }
}

# instance_new NAME — create instances/ktest_NAME; prints its path
instance_new() {
    mkdir "$TRACEFS/instances/ktest_$1" && echo "$TRACEFS/instances/ktest_$1"
}

# event_enable INSTANCE_DIR GROUP/EVENT [0|1] — (dis)able an event there
event_enable() {
    _kt_err=$( (echo "${3:-1}" >"$1/events/$2/enable") 2>&1) && return 0
    echo "enable=${3:-1} $2 in ${1##*/} failed: $_kt_err"
    return 1
}

# teardown INSTANCE_DIR GROUP/EVENT... — the normal end of a probe test:
# disable the events in the instance, remove it, delete the probes (each
# step reported on failure; leftovers then fail the test in `pass`)
teardown() {
    _kt_td=$1; shift
    for _kt_e in "$@"; do event_enable "$_kt_td" "$_kt_e" 0 >/dev/null; done
    rmdir "$_kt_td" 2>/dev/null || echo "rmdir ${_kt_td##*/} failed"
    for _kt_e in "$@"; do tfs_write dynamic_events "-:$_kt_e" >/dev/null || echo "delete $_kt_e failed"; done
}

# trace_lines INSTANCE_DIR — the trace buffer without comment lines
trace_lines() { grep -v '^#' "$1/trace"; }

# boot_instances — the names of the instances trace_instance= on this boot's
# command line made (one a line; NAME[^FLAGS][@PLACE][,EVENTS...])
boot_instances() {
    tr ' ' '\n' </proc/cmdline | sed -n 's/^trace_instance=\([^,^@]*\).*/\1/p'
}

# ktest_leftovers — what tests must not leave behind (empty when clean)
ktest_leftovers() {
    _kt_l=""
    _kt_de=$(cat "$TRACEFS/dynamic_events" 2>/dev/null)
    [ -n "$_kt_de" ] && _kt_l="dynamic_events: $(_kt_short "$_kt_de")"
    # (instances the command line made, trace_instance=NAME..., are the
    # kernel's: a boot-mapped one cannot be removed)
    _kt_bi=$(boot_instances)
    _kt_in=$(ls "$TRACEFS/instances" 2>/dev/null | if [ -n "$_kt_bi" ]; then grep -vxF "$_kt_bi"; else cat; fi | tr '\n' ' ')
    [ -n "$_kt_in" ] && _kt_l="$_kt_l instances: $_kt_in"
    echo "$_kt_l"
}

# ktest_cleanup — remove every instance and dynamic event (the guest has no
# other users), disabling events first so the deletes cannot fail with EBUSY
ktest_cleanup() {
    for _kt_i in "$TRACEFS"/instances/*; do
        [ -d "$_kt_i" ] || continue
        # (an instance of trace_instance= stays: removing a boot-mapped one
        # hands its reserve_mem memory back to the page allocator, and the
        # next boot finds it overwritten)
        boot_instances | grep -qxF "${_kt_i##*/}" && continue
        echo 0 >"$_kt_i/events/enable" 2>/dev/null
        rmdir "$_kt_i" 2>/dev/null
    done
    echo 0 >"$TRACEFS/events/enable" 2>/dev/null
    echo >"$TRACEFS/dynamic_events" 2>/dev/null
    echo >"$TRACEFS/kprobe_events" 2>/dev/null
    echo >"$TRACEFS/trace" 2>/dev/null
    return 0
}

# kconfig CONFIG_NAME — the booted kernel's config value (y, m, a string) or
# nothing when unset (from the package's /boot/config, copied to /ktest/config)
kconfig() {
    sed -n "s/^$1=//p" /ktest/config 2>/dev/null | sed 's/^"//; s/"$//'
}

# wait_tracing FILE PID [TENTHS] — waits until ktrace (PID, its stderr in
# FILE) says it is tracing, it exits, or TENTHS tenths of a second pass
# (default 300). Its startup (reading kallsyms for checks and names) takes
# over a second on a TCG guest, so a fixed sleep races it.
wait_tracing() {
    _w=0
    while ! grep -q 'Ctrl-C to stop' "$1" 2>/dev/null; do
        _w=$((_w + 1))
        [ $_w -gt "${3:-300}" ] && break
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
}

# kt ARGS... — runs `ktrace trace ARGS` in the background until it says it is
# tracing (or exits); output in /tmp/kt.out, /tmp/kt.err; sets $kpid.
kt() {
    rm -f /tmp/kt.out /tmp/kt.err
    ktrace trace "$@" >/tmp/kt.out 2>/tmp/kt.err &
    kpid=$!
    wait_tracing /tmp/kt.err $kpid
}
# ktwait — stops it with SIGINT (a normal end: exit status 0, the buffers
# drained) once the test has done what it traces, and waits; sets $code.
# A -d limit is only a backstop: a fixed tracing window missed events on a
# loaded TCG guest (x86_64 7.2 took 546 s for the suites).
ktwait() { kill -INT $kpid 2>/dev/null; wait $kpid; code=$?; }

# ------------------------------------------------------------ arch
# KTEST_ARCH is x86_64, arm64, arm (32-bit, armv7) or riscv64.
# argreg N — fetcharg register of the N-th (1-based) function argument
# (x86_64 %di %si %dx %cx %r8 %r9; arm64 %x0..%x7; arm %r0..%r3;
# riscv64 %a0..%a7: the names of each arch's regs_query_register_offset)
argreg() {
    case $KTEST_ARCH in
        arm64) echo "%x$(($1 - 1))" ;;
        arm) echo "%r$(($1 - 1))" ;;
        riscv64) echo "%a$(($1 - 1))" ;;
        *) set -- "$1" di si dx cx r8 r9; eval "echo %\${$(($1 + 1))}" ;;
    esac
}
# retreg — the return-value register
retreg() { case $KTEST_ARCH in arm64) echo "%x0" ;; arm) echo "%r0" ;; riscv64) echo "%a0" ;; *) echo "%ax" ;; esac; }
# ipreg — the instruction pointer register
ipreg() { case $KTEST_ARCH in arm64 | arm) echo "%pc" ;; riscv64) echo "%epc" ;; *) echo "%ip" ;; esac; }
# insn_step — the smallest instruction size: the step when trying offsets
# inside a function (x86_64 1; arm64 and arm 4; riscv64 2, compressed RVC)
insn_step() { case $KTEST_ARCH in arm64 | arm) echo 4 ;; riscv64) echo 2 ;; *) echo 1 ;; esac; }
# uname_m — what `uname -m` says on KTEST_ARCH
uname_m() { case $KTEST_ARCH in arm64) echo aarch64 ;; arm) echo armv7l ;; *) echo "$KTEST_ARCH" ;; esac; }
# ktest_series — the kernel series this guest runs (5.10, 6.1, 6.12, 7.2):
# the first two numbers of `uname -r`
ktest_series() { uname -r | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p'; }
# on_cells CELL... — true when this cell (ARCH:SERIES) matches one of the
# shell patterns given ('x86_64:5.10', 'arm:*', '*:7.2'), or when
# KTEST_EVERY_CELL=1: the form of a script's '# ktest-cells:' line for one
# test. A test it leaves out says so with `cells_skip`.
on_cells() {
    [ "${KTEST_EVERY_CELL:-0}" = 1 ] && return 0
    _kt_cell="$KTEST_ARCH:$(ktest_series)"
    for _kt_c in "$@"; do
        # shellcheck disable=SC2254
        case $_kt_cell in $_kt_c) return 0 ;; esac
    done
    return 1
}
# cells_skip CELLS — the verdict of a test `on_cells` leaves out here
cells_skip() {
    skip "run on $1 only, not on $KTEST_ARCH $(ktest_series) (CI time: tests/kernel/README.md, 'Which cells run what'; KTEST_EVERY_CELL=1 runs it here)"
}
# at_entry FUNC — ERE for the "(FUNC+0x0/0xSIZE)" a probe on FUNC prints.
# On x86_64 kernels built with IBT (Debian 6.12) the kernel places a probe on
# a function symbol after its 4-byte endbr64 and prints +0x4.
at_entry() {
    case $KTEST_ARCH in
        x86_64) echo "\\($1\\+0x[04]/0x[0-9a-f]+\\)" ;;
        *) echo "\\($1\\+0x0/0x[0-9a-f]+\\)" ;;
    esac
}

# ------------------------------------------------------------ kernel features
# Each says whether the running kernel has something a test needs, from what
# the kernel itself reports; a test without it must `skip` with the reason
# (the *_why helpers print one).
has_hist() { grep -q 'hist:keys' "$TRACEFS/README" 2>/dev/null; }
# $argN fetch args (CONFIG_HAVE_FUNCTION_ARG_ACCESS_API). The tracefs README
# is no guide here (Debian's armmp 7.2 lists $arg<N> there and refuses it),
# so ask the kernel: a probe with $arg1 on a function entry (once per boot).
# Where entry probes are refused, the README must do.
has_argN() {
    if [ ! -f /tmp/ktest-argN ]; then
        if [ -n "$(entry_probe_refused)" ]; then
            grep -q '\$arg<N>' "$TRACEFS/README" 2>/dev/null && echo y >/tmp/ktest-argN
        elif tfs_write kprobe_events 'p:ktest_detect/argn do_sys_openat2 a=$arg1' >/tmp/ktest-argN.err; then
            echo y >/tmp/ktest-argN
            echo "-:ktest_detect/argn" >>"$TRACEFS/kprobe_events" 2>/dev/null
        fi
        touch /tmp/ktest-argN
    fi
    [ -s /tmp/ktest-argN ]
}
# long_bits — the width of the kernel's long (what $retval holds)
long_bits() { case $KTEST_ARCH in arm) echo 32 ;; *) echo 64 ;; esac; }
has_btf() { [ -r /sys/kernel/btf/vmlinux ]; }
# entry_probe_refused — prints the kernel's refusal when a kprobe on a
# function's entry (do_sys_openat2+0) cannot be registered, nothing when it
# can. Riscv64 6.12 refuses with "Failed to register probe event" (see
# tests/kernel/README.md). Probed once per boot; the answer is kept in /tmp.
entry_probe_refused() {
    if [ ! -f /tmp/ktest-entry-probe ]; then
        if _kt_o=$(tfs_write kprobe_events "p:ktest_detect/entry do_sys_openat2"); then
            : >/tmp/ktest-entry-probe
            echo "-:ktest_detect/entry" >>"$TRACEFS/kprobe_events" 2>/dev/null
        else
            _kt_p=$(tfs_write kprobe_events "p:ktest_detect/entry4 do_sys_openat2+4" >/dev/null && echo "; +4 is accepted")
            echo "-:ktest_detect/entry4" >>"$TRACEFS/kprobe_events" 2>/dev/null
            echo "the kernel refuses a kprobe at do_sys_openat2+0 ($(echo "$_kt_o" | sed -n 's/.*error_log: .*error: *//p' | tail -n 1)$_kt_p)" >/tmp/ktest-entry-probe
        fi
    fi
    cat /tmp/ktest-entry-probe
}
# kprobe_records_missing — prints why, when a kprobe that fires records no
# event (riscv64 6.12: kprobe_profile counts the hits, the ring buffer holds
# nothing; see tests/kernel/README.md), nothing when events are recorded.
# Probes do_sys_openat2 at the first offset the kernel accepts, once per boot.
kprobe_records_missing() {
    if [ ! -f /tmp/ktest-records ]; then
        _kt_off=
        for _kt_o in 0 2 4 8; do
            if tfs_write kprobe_events "p:ktest_detect/rec do_sys_openat2+$_kt_o" >/dev/null; then _kt_off=$_kt_o; break; fi
        done
        if [ -z "$_kt_off" ]; then
            echo "no offset 0..8 of do_sys_openat2 accepted" >/tmp/ktest-records
        else
            mkdir "$TRACEFS/instances/ktest_detect"
            echo 1 >"$TRACEFS/instances/ktest_detect/events/ktest_detect/rec/enable"
            cat /ktest/env >/dev/null
            echo 0 >"$TRACEFS/instances/ktest_detect/events/ktest_detect/rec/enable"
            _kt_h=$(awk '$1 == "rec" { print $2 }' "$TRACEFS/kprobe_profile")
            _kt_n=$(grep -vc '^#' "$TRACEFS/instances/ktest_detect/trace")
            rmdir "$TRACEFS/instances/ktest_detect"
            echo "-:ktest_detect/rec" >>"$TRACEFS/kprobe_events" 2>/dev/null
            if [ "${_kt_n:-0}" -gt 0 ]; then
                : >/tmp/ktest-records
            else
                echo "kprobe events are not recorded: kprobe_profile counts ${_kt_h:-0} hit(s) of a probe at do_sys_openat2+$_kt_off, the ring buffer holds 0 events (CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG=$(kconfig CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG))" >/tmp/ktest-records
            fi
        fi
    fi
    cat /tmp/ktest-records
}
# need_entry_probe — true when entry kprobes work and record events;
# otherwise skips the current test with the kernel's reason and returns 1
need_entry_probe() {
    _kt_r=$(entry_probe_refused)
    [ -z "$_kt_r" ] && _kt_r=$(kprobe_records_missing)
    [ -z "$_kt_r" ] && return 0
    skip "$_kt_r"
    return 1
}
# need_kprobe_records — true when a kprobe that fires records its event;
# otherwise skips the current test with the reason and returns 1
need_kprobe_records() {
    _kt_r=$(kprobe_records_missing)
    [ -z "$_kt_r" ] && return 0
    skip "$_kt_r"
    return 1
}
need_argN() {
    has_argN && return 0
    skip "the kernel refuses \$argN fetch args ($(sed -n 's/.*error_log: .*error: *//p' /tmp/ktest-argN.err 2>/dev/null | tail -n 1))"
    return 1
}
need_hist() {
    has_hist && return 0
    skip "the kernel has no hist triggers (no hist:keys in tracefs README: CONFIG_HIST_TRIGGERS unset)"
    return 1
}
# entry_probes_or_skip TEST... — for a suite whose every test places an entry
# kprobe: when the kernel refuses those, report each named test as SKIP with
# the kernel's reason and end the script
entry_probes_or_skip() {
    _kt_r=$(entry_probe_refused)
    [ -z "$_kt_r" ] && _kt_r=$(kprobe_records_missing)
    [ -z "$_kt_r" ] && return 0
    for _kt_t in "$@"; do
        ktest "$_kt_t"
        skip "$_kt_r"
    done
    exit 0
}

# ktrace_write_form DEF — the line `ktrace trace` writes for DEF, as `ktrace
# check --json` reports it as "write" (the line itself where the kernel
# reads it as ktrace does, else ktrace's own compilation); empty when ktrace
# would refuse DEF
ktrace_write_form() {
    ktrace check --json "$1" | sed -n 's/.*"write":"\([^"]*\)".*/\1/p'
}

# ktrace_readback DEF — the readback `ktrace check` predicts for what is
# written for DEF: its "ok:" line, or, where the kernel does not read DEF's
# BTF names, the line ktrace compiles it to
ktrace_readback() {
    ktrace check "$1" 2>&1 | sed -n 's/^ok: //p; s/^  ktrace: `ktrace trace` compiles it .* to: //p' | head -n 1
}
