# `ktrace check` and `ktrace trace` decide the checks the kernel makes only
# when it registers a kprobe at SYM+OFF (issue 13 item 3): "not an
# instruction boundary" (x86: BAD_INSN_BNDRY from the decoder; arm64: a
# misaligned address, "Failed to register probe event") and "retprobe must
# be at function entry" (BAD_RETPROBE), from the function's code in
# /proc/kcore. The kernel's verdict on each sampled offset is taken by
# writing the raw definition in a scratch group (ktcheck) and reading
# error_log; ktrace must agree on every offset it decides, with the same
# message and caret, and refuse before writing anything.
# ktest-modules: autofs4
. "$KTEST_LIB"

BOUNDARY_TESTS="agree_do_sys_openat2 agree_vfs_read agree_async_run_entry_fn jump_label_sites_compared module_sites_agree trace_refuses_before_writing trace_takes_a_boundary"
case $KTEST_ARCH in
    x86_64) boundary_msg="Probe point is not an instruction boundary" ;;
    arm64) boundary_msg="Failed to register probe event" ;;
    riscv64)
        # ktrace walks riscv64's 2- and 4-byte instructions as
        # arch_check_kprobe() does: its verdict on vfs_read+2 is the kernel's
        ktest riscv_boundary_agrees
        out=$(ktrace check "p:ktcheck/k vfs_read+2" 2>&1)
        case $out in ok:*) ours=accepted ;; *"not an instruction boundary"*) ours=boundary ;; *) ours=other ;; esac
        echo >"$TRACEFS/error_log"
        if echo "p:ktcheck/k vfs_read+2" >>"$TRACEFS/kprobe_events" 2>/dev/null; then
            kern=accepted
            echo "-:ktcheck/k" >>"$TRACEFS/kprobe_events"
        elif grep -q "not an instruction boundary" "$TRACEFS/error_log"; then
            kern=boundary
        else
            kern="other: $(grep -m1 'error:' "$TRACEFS/error_log")"
        fi
        case $kern in
            other*) skip "the kernel refuses vfs_read+2 for another reason ($kern)" ;;
            *) expect_eq "ktrace's verdict is the kernel's" "$ours" "$kern" && pass "vfs_read+2: $kern" ;;
        esac
        for t in $BOUNDARY_TESTS; do
            ktest "$t"
            skip "the x86_64/arm64 boundary suite (riscv_boundary_agrees compares riscv64's)"
        done
        exit 0
        ;;
    *)
        ktest not_checked_named
        # (+8: 32-bit arm refuses an offset that is not a multiple of 4,
        # and so does ktrace; the word at +8 is judged from the code, which
        # Debian's arm kernels, without /proc/kcore, do not show: the check
        # stays open and says why. The rules themselves are held against
        # these kernels' verdicts in crates/disasm/tests/arm_kprobe_verdicts.rs.)
        out=$(ktrace check "p:ktcheck/k vfs_read+8" 2>&1)
        if [ -r /proc/kcore ]; then
            expect_nomatch "decides the word from the code" "$out" "not checked: .*instruction boundary" &&
                pass "$(printf '%s\n' "$out" | head -n 1)"
        else
            expect_match "says the word is not checked, and why" "$out" "not checked: .*instruction boundary of the offset \\(.*kcore" &&
                pass "$(printf '%s\n' "$out" | grep 'not checked')"
        fi
        for t in $BOUNDARY_TESTS; do
            ktest "$t"
            skip "the x86_64/arm64 boundary suite (arm's rules: crates/disasm/tests/arm_kprobe_verdicts.rs)"
        done
        exit 0
        ;;
esac
if [ ! -r /proc/kcore ]; then
    ktest not_checked_named
    out=$(ktrace check "p:ktcheck/k vfs_read+2" 2>&1)
    if [ "$KTEST_ARCH" = x86_64 ]; then
        expect_match "names why" "$out" "not checked: .*instruction boundary of the offset \\(.*kcore" && pass
    else
        pass "arm64 needs no code"
    fi
    for t in $BOUNDARY_TESTS; do
        ktest "$t"
        skip "no /proc/kcore in this kernel (CONFIG_PROC_KCORE): ktrace cannot read the code"
    done
    exit 0
fi

# kernel_verdict DEF — "ok" when the kernel takes DEF (removed at once),
# else the error_log message; $kcaret is the caret's column in the command
kernel_verdict() {
    : >"$TRACEFS/error_log"
    if (echo "$1" >>"$TRACEFS/kprobe_events") 2>/dev/null; then
        echo "-:ktcheck/k" >>"$TRACEFS/kprobe_events"
        kmsg=ok kcaret=
        return
    fi
    kmsg=$(sed -n 's/.*error: //p' "$TRACEFS/error_log" | tail -n 1)
    kcaret=$(awk '/Command: / { c = index($0, "Command: ") + 8; next } c && /\^/ { print index($0, "^") - 1 - c; exit }' "$TRACEFS/error_log")
}

# ktrace_verdicts < DEFS — one `ktrace check` of every definition (one
# process: reading the kernel's symbols and code once, not once per
# definition); prints a line per definition, in order: MESSAGE<TAB>CARET
# ("ok" and no caret when accepted)
ktrace_verdicts() {
    ktrace check 2>&1 | awk '
        function out() { if (n) printf "%s\t%s\n", m, c }
        /^ok: / { out(); n = 1; m = "ok"; c = ""; k = 0; next }
        # a module function past its text, or past its last function
        # where nothing bounds the text (x86_64 7.2, whose module text is
        # the highest memory): left to the kernel, said why
        n && m == "ok" && /not checked: .*past the end of .*(text|is in no kernel symbol)/ { m = "open"; next }
        /^rejected: / { out(); n = 1; m = "unexpected"; c = ""; k = 0; next }
        n && m != "ok" {
            k++
            if (k == 2) c = index($0, "^") - 3
            if (m == "unexpected" && match($0, /^  [a-z_]*: error: /)) m = substr($0, RLENGTH + 1)
        }
        END { out() }'
}

agree() { # FUNC
    f=$1
    ktest "agree_$f"
    if ! list=$(ktrace disasm "$f" --offsets 2>&1); then
        fail "ktrace disasm $f --offsets: $(_kt_short "$list")"
        return
    fi
    # the first 8 instructions: each boundary and one byte inside each; a
    # return probe at the first two (each definition costs a kernel write;
    # ktrace checks them all in one run)
    defs=$(printf '%s\n' "$list" | head -n 8 | while read -r off len verdict; do
        echo "p:ktcheck/k $f+$off"
        [ "$len" -gt 1 ] && echo "p:ktcheck/k $f+$(printf '0x%x' $((off + len / 2)))"
    done)
    defs="$defs
$(printf '%s\n' "$list" | head -n 2 | while read -r off len verdict; do echo "r:ktcheck/k $f+$off"; done)"
    # up to 12 instructions anywhere in the function that ktrace disasm
    # marks refused (arm64: autiasp, brk, msr, ...; both: the jump label
    # and static call sites the kernel patches itself, read from its own
    # tables, and one byte inside each on x86_64): ktrace check decides
    # those the bytes decide alike on every kernel, "Failed to register
    # probe event" at the probe point
    refused_list=$(printf '%s\n' "$list" | awk '$3 != "ok"' | head -n 12)
    defs="$defs
$(printf '%s\n' "$refused_list" | while read -r off len verdict; do
        [ -n "$off" ] || continue
        echo "p:ktcheck/k $f+$off"
        [ "$KTEST_ARCH" = x86_64 ] && [ "$len" -gt 1 ] && echo "p:ktcheck/k $f+$(printf '0x%x' $((off + len - 1)))"
    done)"
    sites=$(ktrace disasm "$f" 2>&1 | grep -c '; a \(jump label\|static call\)')
    site_words=$((site_words + sites))
    # +4 (the entry after endbr64 on an IBT kernel, else inside an x86
    # instruction) as a return probe, whatever the listing says
    defs="$defs
r:ktcheck/k $f+4"
    # x86_64: the second and third instructions by raw address, at their
    # boundary and one byte in (ktrace judges an address as the function
    # and offset it falls in)
    if [ "$KTEST_ARCH" = x86_64 ]; then
        base=$(ktrace disasm "$f" 2>/dev/null | sed -n '1s/.* at 0x\([0-9a-f]*\),.*/\1/p')
        # (in 32-bit halves: shell arithmetic is signed 64-bit)
        hi=${base%????????} lo=${base#"${base%????????}"}
        [ ${#base} -eq 16 ] && defs="$defs
$(printf '%s\n' "$list" | sed -n 2,3p | while read -r off len verdict; do
            printf 'p:ktcheck/k 0x%s%08x\n' "$hi" $((0x$lo + off))
            [ "$len" -gt 1 ] && printf 'p:ktcheck/k 0x%s%08x\n' "$hi" $((0x$lo + off + 1))
        done)"
    fi
    printf '%s\n' "$defs" | grep -v '^$' >/tmp/check-defs.txt
    ktrace_verdicts </tmp/check-defs.txt >/tmp/check-verdicts.txt
    n=0 decided=0 refused=0 bad=""
    while read -r def; do
        [ -n "$def" ] || continue
        n=$((n + 1))
        kernel_verdict "$def"
        v=$(sed -n "${n}p" /tmp/check-verdicts.txt)
        tmsg=${v%%	*} tcaret=${v#*	}
        if [ "$tmsg" = "$kmsg" ]; then
            if [ "$kmsg" != ok ]; then
                refused=$((refused + 1))
                [ "$tcaret" = "$kcaret" ] || bad="$bad $def: caret at $tcaret, kernel's at $kcaret;"
            fi
            decided=$((decided + 1))
        elif [ "$tmsg" = ok ] && [ "$kmsg" = "Failed to register probe event" ] &&
            printf '%s\n' "$list" | grep -q "^${def##*+} [0-9]* refused"; then
            # a boundary ktrace disasm marks refused that ktrace check
            # leaves to the kernel (a word kernels differ on: an exclusive
            # sequence only the older load/store-exclusive masks see)
            :
        else
            bad="$bad $def: kernel '$kmsg', ktrace '$tmsg' ($(ktrace check "$def" 2>&1 | grep -m1 -E 'hint|not checked'); $f starts: $(ktrace disasm "$f" 2>&1 | grep -m1 '+0x0 '));"
        fi
    done </tmp/check-defs.txt
    echo "$f: $n definitions, $decided verdicts equal ($refused refusals)" >>"$KTEST_OUT/check-code.txt"
    expect_empty "disagreements with the kernel" "$bad" &&
        expect_gt "refusals ktrace made itself" "$refused" 3 &&
        pass "$n definitions: $decided verdicts equal to the kernel's, $refused of them refusals with its message and caret"
}
site_words=0
agree do_sys_openat2
agree vfs_read
# a function with a static branch on x86_64 6.12 (seed 171454892 of the
# differential tester: `p async_run_entry_fn+0x34` refused by the kernel
# at its 5-byte nop, accepted by ktrace before it read the jump table)
agree async_run_entry_fn

ktest jump_label_sites_compared
if ktrace disasm vfs_read 2>&1 | grep -q 'jump label sites read'; then
    expect_gt "jump label / static call sites among the compared words" "$site_words" 0 &&
        pass "$site_words site instructions in do_sys_openat2, vfs_read, async_run_entry_fn"
else
    skip "the kernel's jump table is not readable ($(ktrace disasm vfs_read 2>&1 | grep -m1 'jump label'))"
fi

# arm64 without CONFIG_KALLSYMS_ALL (Debian's 5.10, 6.1): ktrace finds the
# jump table and the exception table by their shape in the kernel image
# (crates/symbols reserved.rs), and the agree_* tests above hold their
# sites against the kernel's refusals. Where kallsyms names the tables,
# KTRACE_SCAN_TABLES=1 makes ktrace scan for them anyway: the scans must
# find the named tables' sites.
ktest table_scan_matches_the_named_tables
# "jump label sites read (N), ..., exception table instructions (M)"
sites_counts() {
    _sc=$(cat)
    echo "$(printf '%s\n' "$_sc" | sed -n 's/.*jump label sites read (\([0-9]*\)).*/\1/p')" \
        "$(printf '%s\n' "$_sc" | sed -n 's/.*exception table instructions (\([0-9]*\)).*/\1/p')"
}
named_note=$(ktrace disasm vfs_read 2>&1 | grep -m1 'jump label sites')
if [ "$KTEST_ARCH" != arm64 ]; then
    skip "the scan is for arm64 (this is $KTEST_ARCH)"
elif ! on_cells arm64:5.10 arm64:6.1 arm64:7.2; then
    cells_skip "arm64 5.10, 6.1 and 7.2 (7.2 scans where kallsyms names the tables)"
elif printf '%s\n' "$named_note" | grep -q 'found by their shape'; then
    set -- $(printf '%s\n' "$named_note" | sites_counts)
    expect_gt "jump label sites found by the scan" "${1:-}" 1000 &&
        expect_gt "exception table instructions found by the scan" "${2:-}" 100 &&
        pass "kallsyms names neither table here; the scan found them: $named_note"
elif ! printf '%s\n' "$named_note" | grep -q 'jump label sites read'; then
    skip "the kernel's jump table is not readable ($named_note)"
else
    scan_note=$(KTRACE_SCAN_TABLES=1 ktrace disasm vfs_read 2>&1 | grep -m1 'jump label sites')
    named=$(printf '%s\n' "$named_note" | sites_counts)
    scanned=$(printf '%s\n' "$scan_note" | sites_counts)
    diffs="" refused_words=0
    # (two functions: each listing costs a scan of the image, about 4 s
    # under TCG; the counts above cover the whole table)
    for f in vfs_read strncpy_from_user; do
        a=$(ktrace disasm "$f" --offsets 2>/dev/null)
        b=$(KTRACE_SCAN_TABLES=1 ktrace disasm "$f" --offsets 2>/dev/null)
        [ -n "$a" ] && [ "$a" = "$b" ] || diffs="$diffs $f"
        refused_words=$((refused_words + $(printf '%s\n' "$a" | grep -c ' refused')))
    done
    expect_match "the forced scan's note" "$scan_note" "found by their shape" &&
        expect_eq "jump label sites and exception table instructions found by the scans" "$scanned" "$named" &&
        expect_empty "functions whose listing differs between the two" "$diffs" &&
        pass "the scan found the named tables' sites, $named (jump labels, exception table instructions); listings of vfs_read and strncpy_from_user equal ($refused_words refused words)"
fi

# A loaded module's own tables (issue 22, registration level): the kernel
# refuses a probe on a module's jump label or static call site, and on
# arm64 on an instruction of its exception table, as on vmlinux's. ktrace
# reads them through /sys/module/NAME/sections and /proc/kcore. autofs4
# (no dependencies) has 32 jump entries on every amd64 kernel here, static
# call sites from 6.1 and, on arm64, an exception table. Compared with the
# kernel: every instruction ktrace marks a site in the module's functions,
# and every instruction that could be one whatever the tables say
# (x86_64: jmp and nop; arm64: nop, b and the unprivileged loads and
# stores of user accesses), and the first byte past each function (past
# the last one, the module's text ends: the kernel refuses it).
# autofs4 is unloaded at the end (95-conform's pool then has no module
# functions: a module's mapping symbols once made `romfs:$d` "not unique"
# there, arm 7.2 with romfs loaded, seed 258342346).
# On the 5.10 and 7.2 cells (the oldest and newest code of each
# architecture): CI's time (KTEST_EVERY_CELL=1 runs it everywhere).
ktest module_sites_agree
ko=/ktest/modules/autofs4.ko
if ! on_cells '*:5.10' '*:7.2'; then
    cells_skip "the 5.10 and 7.2 cells"
elif [ ! -f "$ko" ]; then
    skip "no $ko (the rig ships it for '# ktest-modules: autofs4')"
elif ! grep -q '\[autofs4\]' /proc/kallsyms && ! out=$(insmod "$ko" 2>&1); then
    fail "insmod autofs4.ko: $out"
else
    note=$(ktrace disasm autofs4:autofs_fill_super 2>&1 | grep -m1 'jump label sites')
    # the functions by address (not the __pfx_/__cfi_ preambles before
    # them, nor arm64's `$x` mapping symbols)
    grep ' [tT] [^ ]*[[:space:]]*\[autofs4\]' /proc/kallsyms | grep -v ' __pfx_\| __cfi_\| \$' | sort >/tmp/mod-syms.txt
    awk '{ print "autofs4:" $3 }' /tmp/mod-syms.txt | awk '!seen[$0]++' >/tmp/mod-funcs.txt
    last=$(tail -n 1 /tmp/mod-syms.txt | awk '{ print $3 }')
    # __exit functions (notrace: the kernel refuses them) at +0
    : >/tmp/check-exit.txt
    exit_at=$(cat /sys/module/autofs4/sections/.exit.text 2>/dev/null | sed 's/^0x//')
    [ -n "$exit_at" ] && awk -v e="$exit_at" '$1 >= e { print "p:ktcheck/k autofs4:" $3 }' /tmp/mod-syms.txt | head -n 2 >/tmp/check-exit.txt
    # ... and inside the first, kprobe and return probe: since 6.4 its
    # text is the module's highest memory and exit_autofs_fs its last
    # symbol, whose size kallsyms does not give (x86_64 7.2: `p
    # exit_autofs_fs+0x40` is notrace, `r ...+1` not at an entry, `r
    # ...+4` after its endbr64 notrace, through the end of its page);
    # +0x1000 is the next page: past the text region, in the guard page
    # before the module's data on arm64 6.12 and 7.2 ("Invalid probed
    # address or symbol"), in no module on x86_64 7.2, whose text is the
    # highest (ktrace leaves that to the kernel)
    exit_fn=$(head -n 1 /tmp/check-exit.txt | sed 's/^p:ktcheck\/k //')
    if [ -n "$exit_fn" ]; then
        for off in 1 4 8 0x10 0x40 0x100 0x400 0x1000; do
            echo "p:ktcheck/k $exit_fn+$off"
            echo "r:ktcheck/k $exit_fn+$off"
        done >>/tmp/check-exit.txt
    fi
    # (one ktrace disasm for all the functions: the kernel's symbols and
    # tables read once)
    : >/tmp/check-could.txt
    ktrace disasm $(cat /tmp/mod-funcs.txt) 2>/dev/null | awk -v arch="$KTEST_ARCH" -v last="$last" '
        # a header: the function; past the last one, the module text ends
        # (the kernel refuses it)
        / bytes from / && match($0, /, 0x[0-9a-f]+ bytes/) {
            f = $1
            if (f == last) printf "p:ktcheck/k autofs4:%s+%s\n", f, substr($0, RSTART + 2, RLENGTH - 8)
            next
        }
        ($1 != "*" && $1 != "-") || $2 !~ /^\+0x/ { next }
        {
            # the mnemonic: the first word after the code bytes
            m = ""; len = 0
            for (i = 3; i <= NF; i++) {
                if ($i ~ /^[0-9a-f]+$/ && (length($i) == 2 || length($i) == 8)) { len += length($i) / 2; continue }
                m = $i; break
            }
            if (arch == "x86_64")
                site = m ~ /^(jmp|nop|xchg)/ && (len == 2 || len == 5) && $2 != "+0x0"
            else
                site = (m == "nop" && $2 != "+0x0" && $2 != "+0x4") || m == "b" || m ~ /^(ldtr|sttr)/
            # (of the instructions ktrace refuses, those of the tables: the
            # int3 padding and the like are the other agree tests)
            ours = $1 == "-" && $0 ~ /; an? (jump label|static call|instruction of the exception table)/
            if (ours) printf "p:ktcheck/k autofs4:%s%s\n", f, $2
            else if (site) printf "p:ktcheck/k autofs4:%s%s\n", f, $2 >"/tmp/check-could.txt"
        }' >/tmp/check-defs.txt
    # of the instructions that could be sites (hundreds of jumps), 60
    # spread over the module: each accepted one costs a registration and
    # a removal, about a third of a second under TCG
    could=$(wc -l </tmp/check-could.txt)
    every=$(((could + 59) / 60))
    [ "$every" -ge 1 ] || every=1
    awk -v k="$every" 'NR % k == 0' /tmp/check-could.txt >>/tmp/check-defs.txt
    cat /tmp/check-exit.txt >>/tmp/check-defs.txt 2>/dev/null
    ktrace_verdicts </tmp/check-defs.txt >/tmp/check-verdicts.txt
    n=0 refused=0 opened=0 bad=""
    while read -r def && read -r v <&3; do
        n=$((n + 1))
        kernel_verdict "$def"
        tmsg=${v%%	*} tcaret=${v#*	}
        if [ "$tmsg" = open ]; then
            # past the module's text: ktrace says the kernel refuses it
            # (how differs by kernel) and leaves the verdict to it
            opened=$((opened + 1))
            [ "$kmsg" != ok ] || bad="$bad $def: kernel 'ok', ktrace 'past the end of the text';"
        elif [ "$tmsg" = "$kmsg" ]; then
            [ "$kmsg" = ok ] || { refused=$((refused + 1)); [ "$tcaret" = "$kcaret" ] || bad="$bad $def: caret at $tcaret, kernel's at $kcaret;"; }
        else
            bad="$bad $def: kernel '$kmsg', ktrace '$tmsg';"
        fi
    done </tmp/check-defs.txt 3</tmp/check-verdicts.txt
    echo "autofs4: $n definitions ($(wc -l </tmp/mod-funcs.txt) functions; of $could instructions that could be sites, every ${every}th), $refused refused by both, $opened past the text left to the kernel (which refused them); $note" >>"$KTEST_OUT/check-code.txt"
    expect_empty "disagreements with the kernel" "$bad" &&
        expect_match "the module's tables were read" "$note" "in loaded modules' tables: [1-9]" &&
        expect_gt "refusals the kernel made" "$refused" 0 &&
        pass "$n definitions in autofs4's functions, $refused refused by the kernel and by ktrace with its message and caret, $opened past the module's text left to the kernel; $note"
    rmmod autofs4 2>/dev/null
fi

state() { cat "$TRACEFS/dynamic_events"; ls "$TRACEFS/instances"; }

ktest trace_refuses_before_writing
# one byte into vfs_read's second instruction
second=$(ktrace disasm vfs_read --offsets | sed -n 2p)
set -- $second
mid=$(printf '0x%x' $(($1 + $2 / 2)))
[ "$KTEST_ARCH" = arm64 ] && mid=$(printf '0x%x' $(($1 + 2)))
before=$(state)
: >"$TRACEFS/error_log"
ktrace trace "p:mid vfs_read+$mid" -d 5 >/tmp/kt.out 2>/tmp/kt.err
code=$?
after=$(state)
log=$(cat "$TRACEFS/error_log")
expect_eq "exit status" "$code" 1 &&
    expect_match "the kernel's message" "$(cat /tmp/kt.err)" "trace_kprobe: error: $boundary_msg" &&
    expect_match "refused before writing" "$(cat /tmp/kt.err)" "rejected before anything was written" &&
    expect_match "a caret" "$(cat /tmp/kt.err)" '^ +\^$' &&
    expect_match "the nearest boundaries" "$(cat /tmp/kt.err)" "hint: .*nearest boundaries (are )?vfs_read\\+0x[0-9a-f]+ and vfs_read\\+0x[0-9a-f]+" &&
    expect_eq "tracefs as before" "$after" "$before" &&
    expect_empty "nothing in error_log (the kernel was not asked)" "$log" &&
    pass "$(grep -m1 hint /tmp/kt.err)"

ktest trace_takes_a_boundary
if need_kprobe_records; then
    # the first boundary after the entry that ktrace disasm marks probe-able
    off=$(ktrace disasm vfs_read --offsets | awk '$1 != "0x0" && $3 == "ok" { print $1; exit }')
    kt "p:mid vfs_read+$off"
    cat /ktest/env >/dev/null
    ktwait
    expect_eq "exit status" "$code" 0 &&
        expect_match "an event at vfs_read+$off" "$(cat /tmp/kt.out)" "mid: \\(vfs_read\\+$off/0x[0-9a-f]+\\)" &&
        pass "vfs_read+$off traced"
fi
