# The seed examples, created with `ktrace trace` in this guest's own registers
# (argreg: %di… on x86_64, %x0… on arm64, %r0… on arm, %a0… on riscv64):
# - Documentation/trace/kprobetrace.rst's first example
#     p:myprobe do_sys_open dfd=%ax filename=%dx flags=%cx mode=+4($stack)
#     r:myretprobe do_sys_open $retval
#   on do_sys_openat2(int dfd, const char __user *filename, struct open_how *how)
#   (do_sys_open's successor: the mode is how->mode at +8, the flags how->flags
#   at +0), and the same return probe written with the %return suffix;
# - the ARMv8 kprobes article's
#     p:wait_p do_wait wo_type=+0(%x0):u32 wo_flags=+4(%x0):u32
#   with %r0 / %a0 / %di for %x0.
# The printed values are checked against what is known: `cat /ktest/env`
# opens with dfd AT_FDCWD (-100), the path "/ktest/env", O_RDONLY and mode 0,
# and gets a small descriptor; a missing file returns -ENOENT (-2); a shell's
# `wait` reaches do_wait with wo_flags holding WEXITED (4).
. "$KTEST_LIB"
entry_probes_or_skip doc_kprobe_entry doc_kretprobe doc_return_suffix armv8_do_wait

a1=$(argreg 1)
a2=$(argreg 2)
a3=$(argreg 3)
bits=$(long_bits)
# AT_FDCWD in the default type (x32 / x64): -100 as the kernel prints it
# (dfd is an int: on a 64-bit kernel the caller may have left the register's
# upper half zero, as x86_64 5.10's __x64_sys_openat does, so the x64 value
# is 0xffffff9c there and sign-extended elsewhere)
if [ "$bits" = 32 ]; then fdcwd=0xffffff9c enoent=0xfffffffe; else fdcwd='(0xffffffffffffff9c|0xffffff9c)' enoent=0xfffffffffffffffe; fi

ktest doc_kprobe_entry
kt "p:myprobe do_sys_openat2 dfd=$a1 filename=$a2 flags=$a3 mode=+8($a3):x64 oflags=+0($a3):x64 path=+0($a2):ustring" -d 60
cat /ktest/env >/dev/null
ktwait
line=$(grep ' myprobe: .*path="/ktest/env"' /tmp/kt.out | head -n 1)
expect_eq "exit status" "$code" 0 &&
    expect_match "the open of /ktest/env" "$line" \
        " myprobe: $(at_entry do_sys_openat2) dfd=$fdcwd filename=0x[0-9a-f]+ flags=0x[0-9a-f]+ mode=0x0 oflags=0x[0-9a-f]*[048c] path=\"/ktest/env\"$" &&
    pass "$(echo "$line" | tr -s ' ')"

ktest doc_kretprobe
# The untyped $retval is the default x32/x64, printed in hex; a kernel with BTF
# arguments types it from the function's BTF (do_sys_openat2 returns long:
# s64, printed in decimal), as riscv64 7.2 does.
small='0x[0-9a-f]{1,2}'
if grep -q '<argname>' "$TRACEFS/README"; then
    small='[0-9]{1,3}' enoent=-2
fi
kt 'r:myretprobe do_sys_openat2 $retval' -d 60
cat /ktest/env >/dev/null
cat /ktest/no-such-file 2>/dev/null
ktwait
out=$(grep ' myretprobe: ' /tmp/kt.out)
expect_eq "exit status" "$code" 0 &&
    expect_match "a descriptor returned" "$out" " myretprobe: \(.+ <- do_sys_openat2\) arg1=($small)$" &&
    expect_match "ENOENT returned" "$out" " myretprobe: \(.+ <- do_sys_openat2\) arg1=($enoent)$" &&
    pass "$(echo "$out" | grep -m1 -E "arg1=($enoent)$" | tr -s ' ')"

ktest doc_return_suffix
kt 'p:myretprobe do_sys_openat2%return ret=$retval:s32' -d 60
cat /ktest/env >/dev/null
cat /ktest/no-such-file 2>/dev/null
ktwait
out=$(grep ' myretprobe: ' /tmp/kt.out)
expect_eq "exit status" "$code" 0 &&
    expect_match "a descriptor returned" "$out" " myretprobe: \(.+ <- do_sys_openat2\) ret=[0-9]+$" &&
    expect_match "ENOENT returned" "$out" " myretprobe: \(.+ <- do_sys_openat2\) ret=-2$" &&
    pass "$(echo "$out" | grep -m1 'ret=-2' | tr -s ' ')"

ktest armv8_do_wait
if ! grep -q ' do_wait$' /proc/kallsyms; then
    skip "no do_wait in kallsyms (inlined)"
else
    kt "p:wait_p do_wait wo_type=+0($a1):u32 wo_flags=+4($a1):u32" -d 60
    sh -c 'true' &
    wait $!
    ktwait
    line=$(grep -m1 ' wait_p: ' /tmp/kt.out)
    # enum pid_type: PIDTYPE_PID 0 (waitpid(pid)), PIDTYPE_MAX 4 (waitpid(-1));
    # wo_flags = the options | WEXITED (include/uapi/linux/wait.h: 4)
    flags=$(echo "$line" | sed -n 's/.* wo_flags=\([0-9]*\)$/\1/p')
    expect_eq "exit status" "$code" 0 &&
        expect_match "do_wait fields" "$line" " wait_p: $(at_entry do_wait) wo_type=[04] wo_flags=[0-9]+$" &&
        expect_eq "WEXITED in wo_flags" "$((${flags:-0} & 4))" 4 &&
        pass "$(echo "$line" | tr -s ' ')"
fi
