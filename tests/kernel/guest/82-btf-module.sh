# BTF argument names on a module's function, with the module's split BTF
# (/sys/kernel/btf/romfs over /sys/kernel/btf/vmlinux): issue 10. romfs.ko
# comes from the kernel's own Debian package; `mount -t romfs` calls
# romfs_init_fs_context(struct fs_context *fc) before it looks for a device,
# with fc->fs_type pointing at romfs's own file_system_type (name "romfs")
# and fc->purpose FS_CONTEXT_FOR_MOUNT (0). On a kernel that reads BTF
# names itself (README lists <argname>) the definition goes through as it
# is; elsewhere ktrace compiles it with the split BTF into +OFF(%reg).
# The rig ships the module for this line (or give it with --file romfs.ko):
# ktest-modules: romfs
# CI runs it on x86_64 and arm64 7.2, whose kernels have module BTF
# (tests/kernel/README.md, "Which
# cells run what"); --script or KTEST_EVERY_CELL=1 runs it anywhere.
# ktest-cells: x86_64:7.2 arm64:7.2
. "$KTEST_LIB"

DEF='romfs_init_fs_context fs=fc->fs_type->name:string purpose=fc->purpose'
ko=
for k in /ktest/modules/romfs.ko /ktest/bin/romfs.ko; do [ -f "$k" ] && ko=$k && break; done

ktest module_btf_check
if [ -z "$ko" ]; then
    skip "no romfs.ko shipped (the rig's '# ktest-modules: romfs', or --file romfs.ko from the kernel's package)"
    for t in module_btf_mod_prefix module_btf_trace; do ktest $t; skip "no romfs.ko shipped"; done
    exit 0
fi
if ! out=$(insmod "$ko" 2>&1); then
    # the rig ships romfs.ko alone: where this build's romfs needs another
    # module (riscv64 7.2: an unknown symbol), it cannot load here
    case $out in
        *"unknown symbol"*) skip "romfs.ko needs a module the rig does not ship: $out; $(dmesg | grep -i 'unknown symbol' | tail -n 1)" ;;
        *) fail "insmod $ko: $out" ;;
    esac
    for t in module_btf_mod_prefix module_btf_trace; do ktest $t; skip "romfs.ko did not load"; done
    exit 0
fi
if [ ! -r /sys/kernel/btf/romfs ]; then
    skip "no /sys/kernel/btf/romfs (CONFIG_DEBUG_INFO_BTF_MODULES unset, or the module's BTF was refused: $(dmesg | grep -i btf | tail -n 1))"
    for t in module_btf_mod_prefix module_btf_trace; do ktest $t; skip "no split BTF for romfs"; done
    rmmod romfs
    exit 0
fi
if grep -q '<argname>' "$TRACEFS/README"; then route=native; else route=compiled; fi
# kverdict DEF — what ktrace check says it writes for DEF, written to the
# kernel: "ok", or ktrace's refusal, or the kernel's error_log message
kverdict() {
    _w=$(ktrace_write_form "$1")
    if [ -z "$_w" ]; then
        echo "ktrace: $(ktrace check "$1" 2>&1 | sed -n 's/^  [a-z_]*: error: //p')"
    elif _o=$(tfs_write kprobe_events "$_w" 2>&1); then
        tfs_write dynamic_events "-:ktest/rfs" >/dev/null
        echo ok
    else
        echo "kernel: $(echo "$_o" | sed -n 's/.*error_log: .*error: *//p' | head -n 1)"
    fi
}
out=$(ktrace check --explain "p:ktest/rfs $DEF" 2>&1)
echo "$out" >"$KTEST_OUT/btf-module-explain.txt"
v=$(kverdict "p:ktest/rfs $DEF")
expect_match "route" "$out" "btf route: $route" &&
    expect_match "readback" "$(ktrace_readback "p:ktest/rfs $DEF")" '^p:ktest/rfs romfs_init_fs_context fs=' &&
    expect_eq "the kernel takes what ktrace writes" "$v" ok &&
    pass "$route: $(ktrace_write_form "p:ktest/rfs $DEF")"

ktest module_btf_mod_prefix
# MOD:FUNC with BTF names: compiled with the module's split BTF; where the
# kernel reads the names itself it looks "romfs:romfs_init_fs_context" up
# in BTF as written and finds nothing (7.2): ktrace must say the same.
mdef="p:ktest/rfs romfs:$DEF"
ours=$(ktrace check "$mdef" 2>&1)
if [ $route = native ]; then
    : >"$TRACEFS/error_log"
    if (echo "$mdef" >>"$TRACEFS/kprobe_events") 2>/dev/null; then
        tfs_write dynamic_events "-:ktest/rfs" >/dev/null
        kmsg=ok
    else
        kmsg=$(sed -n 's/.*error: //p' "$TRACEFS/error_log" | head -n 1)
    fi
    omsg=$(printf '%s\n' "$ours" | sed -n 's/^  [a-z_]*: error: //p')
    [ -n "$omsg" ] || omsg=ok
    expect_eq "ktrace's verdict on $mdef" "$omsg" "$kmsg" &&
        pass "both: $kmsg; $(printf '%s\n' "$ours" | grep -m1 hint)"
else
    v=$(kverdict "$mdef")
    expect_eq "the kernel takes what ktrace writes" "$v" ok && pass "compiled: $(printf '%s\n' "$ours" | sed -n 1p)"
fi

ktest module_btf_trace
if need_entry_probe; then
    mkdir -p /tmp/mnt
    kt "$DEF" -d 30
    mount -t romfs none /tmp/mnt 2>/dev/null
    ktwait
    line=$(grep ' fs="romfs"' /tmp/kt.out | head -n 1)
    expect_eq "exit status" "$code" 0 &&
        expect_match "the module's type by name, the enum" "$line" \
            '\(romfs_init_fs_context\+0x[04]/0x[0-9a-f]+ \[romfs\]\) fs="romfs" purpose=(0|0x0)$' &&
        pass "$route: $(echo "$line" | sed 's/.*) //') | $(grep -m1 BTF /tmp/kt.err)"
fi
rmmod romfs
