//! Sorting many short names fast (kallsyms, BTF): an 8-byte big-endian
//! prefix that decides most comparisons without following a pointer, and
//! a comparison that reads eight bytes at a time. Both agree with
//! `str::cmp`.

/// A name's first eight bytes as a big-endian number (zero-padded): two
/// names' prefixes compare as the names do, up to a tie.
pub(crate) fn prefix(name: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

/// `a.cmp(b)` for names, eight bytes at a time: sorting ~100k names is
/// most of building a kallsyms or BTF name index, and musl's `memcmp`
/// (what `str::cmp` calls in the static binary) compares a byte at a time.
pub(crate) fn order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (
            u64::from_be_bytes(x.try_into().unwrap_or_default()),
            u64::from_be_bytes(y.try_into().unwrap_or_default()),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    let n = a.len().min(b.len()) / 8 * 8;
    a[n..].iter().cmp(b[n..].iter())
}

/// The ids sorted by (name, id), a total order on distinct ids: the
/// unstable sort gives the stable sort's answer, faster. Each entry
/// carries its name's [`prefix`], which decides most comparisons without
/// following the name's pointer.
pub(crate) fn sorted_ids<'a>(named: impl Iterator<Item = (u32, &'a str)>) -> Vec<u32> {
    let mut keyed: Vec<(u64, u32, &str)> = named.map(|(id, n)| (prefix(n), id, n)).collect();
    keyed.sort_unstable_by(|&(pa, a, na), &(pb, b, nb)| {
        pa.cmp(&pb).then_with(|| order(na, nb).then(a.cmp(&b)))
    });
    keyed.into_iter().map(|(_, id, _)| id).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_and_order_agree_with_str_cmp() {
        let names = [
            "",
            "a",
            "ab",
            "abcdefgh",
            "abcdefghi",
            "abcdefgh\u{1}",
            "__pfx_vfs_read",
            "__pfx_vfs_reada",
            "__pfx_vfs_write",
            "vfs_read",
            "vfs_rea",
            "zz",
            "é",
            "\u{0}",
        ];
        let ids = super::sorted_ids(names.iter().enumerate().map(|(i, n)| (i as u32, *n)));
        let mut want: Vec<(&str, u32)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, i as u32))
            .collect();
        want.sort();
        assert_eq!(ids, want.iter().map(|w| w.1).collect::<Vec<_>>());
        for a in names {
            for b in names {
                assert_eq!(super::order(a, b), a.cmp(b), "{a:?} {b:?}");
                let (pa, pb) = (super::prefix(a), super::prefix(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }
}
