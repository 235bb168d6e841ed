# More fetch arguments through raw tracefs writes: $argN, user-space
# dereference +uOFF, a bitfield, @SYMBOL memory, the symbol type on the
# instruction pointer, and an event filter on a string field.
. "$KTEST_LIB"
# every test here places a kprobe on a function entry
entry_probes_or_skip argN_matches_register user_deref_and_bitfield at_symbol_memory symbol_type_on_ip filter_on_string_field

ktest argN_matches_register
if need_argN; then
    kprobe_add "p:ktest/args do_sys_openat2 a=+0(\$arg2):ustring r=+0($(argreg 2)):ustring" || exit 0
    inst=$(instance_new args)
    event_enable "$inst" ktest/args
    cat /ktest/env >/dev/null
    event_enable "$inst" ktest/args 0
    out=$(trace_lines "$inst")
    teardown "$inst" ktest/args
    expect_match "\$arg2 and $(argreg 2) agree" "$out" ' args: '"$(at_entry do_sys_openat2)"' a="/ktest/env" r="/ktest/env"$' &&
        pass
fi

# "/ktest/env" starts with the bytes 2f 6b 74 65: as a little-endian u32
# 0x65746b2f; bits 8..15 of it are 0x6b = 107 ('k')
ktest user_deref_and_bitfield
kprobe_add "p:ktest/bits do_sys_openat2 w=+u0($(argreg 2)):x32 k=+u0($(argreg 2)):b8@8/32" || exit 0
inst=$(instance_new bits)
event_enable "$inst" ktest/bits
cat /ktest/env >/dev/null
event_enable "$inst" ktest/bits 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/bits
expect_match "u32 and bitfield of the path" "$out" "$(task_col cat)"'.* bits: '"$(at_entry do_sys_openat2)"' w=0x65746b2f k=107$' &&
    pass

# linux_banner is "Linux version ...": its first four bytes as a LE u32.
# @SYMBOL needs the symbol in kallsyms: data symbols are there only with
# CONFIG_KALLSYMS_ALL (Debian 6.1 arm64 lacks it: then the kernel must refuse)
ktest at_symbol_memory
if [ "$(kconfig CONFIG_KALLSYMS_ALL)" = y ]; then
    kprobe_add "p:ktest/banner do_sys_openat2 b=@linux_banner:x32" || exit 0
    inst=$(instance_new banner)
    event_enable "$inst" ktest/banner
    cat /ktest/env >/dev/null
    event_enable "$inst" ktest/banner 0
    out=$(trace_lines "$inst")
    teardown "$inst" ktest/banner
    expect_match "@linux_banner:x32" "$out" ' banner: '"$(at_entry do_sys_openat2)"' b=0x756e694c$' &&
        pass "KALLSYMS_ALL=y"
else
    out=$(tfs_write kprobe_events "p:ktest/banner do_sys_openat2 b=@linux_banner:x32")
    rc=$?
    expect_ne "write status without KALLSYMS_ALL" "$rc" 0 &&
        expect_match "error_log" "$out" 'Invalid probed address or symbol' &&
        expect_nomatch "linux_banner in kallsyms" "$(cat /proc/kallsyms)" ' linux_banner$' &&
        expect_empty "nothing created" "$(tfs_read dynamic_events)" &&
        pass "KALLSYMS_ALL unset: refused"
fi

# what %ip/%pc holds in an entry probe is whatever the kprobe handler's
# pt_regs say: on x86_64 6.1 (ftrace-based probe at +0) it reads +0x1.
# Check it resolves inside the function and report the offset seen.
ktest symbol_type_on_ip
ip=$(ipreg)
kprobe_add "p:ktest/ip do_sys_openat2 ip=$ip:symbol" || exit 0
inst=$(instance_new ip)
event_enable "$inst" ktest/ip
cat /ktest/env >/dev/null
event_enable "$inst" ktest/ip 0
out=$(trace_lines "$inst")
teardown "$inst" ktest/ip
seen=$(echo "$out" | sed -n 's/.* ip=\(do_sys_openat2+0x[0-9a-f]*\)\/.*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
expect_match "$ip:symbol" "$out" " ip: $(at_entry do_sys_openat2) ip=do_sys_openat2\+0x[0-9a-f]+/0x[0-9a-f]+\$" &&
    pass "$ip=$seen"

ktest filter_on_string_field
kprobe_add "p:ktest/flt do_sys_openat2 path=+0($(argreg 2)):ustring" || exit 0
inst=$(instance_new flt)
if ! (echo 'path == "/ktest/env"' >"$inst/events/ktest/flt/filter") 2>/dev/null; then
    teardown "$inst" ktest/flt
    fail "filter rejected: $(tail -n 3 "$TRACEFS/error_log" | tr '\n' '|')"
else
    event_enable "$inst" ktest/flt
    cat /proc/version >/dev/null
    cat /ktest/env >/dev/null
    cat /proc/version >/dev/null
    event_enable "$inst" ktest/flt 0
    out=$(trace_lines "$inst")
    teardown "$inst" ktest/flt
    expect_match "the matching open" "$out" ' flt: .* path="/ktest/env"$' &&
        expect_nomatch "nothing else" "$out" 'path="/(proc|dev|etc|sys|bin)' &&
        expect_eq "exactly one event" "$(echo "$out" | grep -c ' flt: ')" 1 &&
        pass
fi
