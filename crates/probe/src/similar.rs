//! "Did you mean …?": the names nearest to a misspelt one (edit distance,
//! with a transposition counting as one edit), for the errors that name a
//! symbol no table has.

/// Up to three of `names` within a small edit distance of `wanted` (one edit
/// for names up to 6 bytes, two beyond), nearest first, each once. Only
/// names with the same first byte are compared: a kernel has some 100,000
/// symbols, and a guest under emulation checks thousands of definitions.
/// With many names, pass only the run [`shape_run`] picks out of a
/// [`shape_order`] index: the same answer without scanning the rest.
pub fn similar<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let limit = limit_for(wanted);
    let first = wanted.as_bytes().first().copied();
    let mut rows = Vec::new();
    let bytes = signature(wanted.as_bytes());
    let mut found: Vec<(usize, &str)> = names
        .filter(|n| n.as_bytes().first().copied() == first)
        .filter(|n| n.len().abs_diff(wanted.len()) <= limit && *n != wanted)
        .filter(|n| (signature(n.as_bytes()) ^ bytes).count_ones() as usize <= 2 * limit)
        .filter_map(|n| distance(wanted.as_bytes(), n.as_bytes(), limit, &mut rows).map(|d| (d, n)))
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.1 == b.1);
    found
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Which kinds of byte `name` holds, one bit each (letters, digits and `_`
/// apart, all else shared). An edit changes at most two bits (a
/// substitution drops one kind and adds another; a transposition none), so
/// names `d` edits apart differ in at most `2 * d` bits: most names of the
/// same first byte and length are ruled out here instead of by
/// [`distance`] (a guest's check of a misspelt name compares thousands).
fn signature(name: &[u8]) -> u64 {
    name.iter().fold(0, |m, &c| {
        let bit = match c {
            b'a'..=b'z' => c - b'a',
            b'A'..=b'Z' => c - b'A' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'_' => 62,
            _ => 63,
        };
        m | 1 << bit
    })
}

/// A name's signature (the kinds of byte it holds, one bit each), for an index to keep beside its names
/// ([`may_be_near`]).
pub fn signature_of(name: &str) -> u64 {
    signature(name.as_bytes())
}

/// Whether a name whose [`signature_of`] is `sig` can be near enough to
/// `wanted` for [`similar`] to take it: an index that keeps the signatures
/// beside its names rules out most of a shape run without reading a name
/// (the names of a kernel's table lie all over memory, and reading them was
/// a fifth of `ktrace conform --check-only`'s time on the 6.18 host).
pub fn may_be_near(wanted: &str) -> impl Fn(u64) -> bool + use<> {
    let bytes = signature(wanted.as_bytes());
    let limit = limit_for(wanted);
    move |sig| (sig ^ bytes).count_ones() as usize <= 2 * limit
}

/// How many edits [`similar`] allows for `wanted`.
fn limit_for(wanted: &str) -> usize {
    if wanted.len() <= 6 { 1 } else { 2 }
}

/// A name's shape: its first byte, then its length.
fn shape(name: &str) -> (Option<u8>, usize) {
    (name.as_bytes().first().copied(), name.len())
}

/// The ids of `named` in shape order: by first byte, then length, then
/// name. The names [`similar`] compares with a wanted one (same first byte,
/// length within the limit) are then one contiguous run ([`shape_run`]):
/// a few hundred of a kernel's 100,000 symbols, where one first byte alone
/// leaves thousands to scan for every misspelt name.
pub fn shape_order<'a>(named: impl Iterator<Item = (u32, &'a str)>) -> Vec<u32> {
    let mut keyed: Vec<(u32, &str)> = named.collect();
    keyed.sort_unstable_by(|a, b| (shape(a.1), a.1).cmp(&(shape(b.1), b.1)));
    keyed.into_iter().map(|(id, _)| id).collect()
}

/// The run of `sorted` (in [`shape_order`]; `name_of` gives an item's
/// name) that [`similar`] compares `wanted` with.
pub fn shape_run<'n, T>(
    sorted: &'n [T],
    name_of: impl Fn(&'n T) -> &'n str,
    wanted: &str,
) -> std::ops::Range<usize> {
    let (first, len) = shape(wanted);
    let limit = limit_for(wanted);
    let at = |k: usize| shape(name_of(&sorted[k]));
    // (slice::partition_point lends each item for less than 'n)
    let partition = |below: &dyn Fn(usize) -> bool| {
        let (mut lo, mut hi) = (0, sorted.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid) { lo = mid + 1 } else { hi = mid }
        }
        lo
    };
    let from = partition(&|k| at(k) < (first, len.saturating_sub(limit)));
    let to = partition(&|k| at(k) <= (first, len + limit));
    from..to.max(from)
}

/// The optimal-string-alignment distance of `a` and `b`, or `None` when it
/// is above `limit`. Only the band of cells within `limit` of the diagonal
/// is computed (a cell further off is at least its distance from the
/// diagonal), values are capped at `limit + 1`, and the three rows live in
/// `rows`, reused from call to call: a guest checks misspelt names against
/// thousands of kernel symbols each.
fn distance(a: &[u8], b: &[u8], limit: usize, rows: &mut Vec<usize>) -> Option<usize> {
    let (n, m) = (a.len(), b.len());
    if n.abs_diff(m) > limit {
        return None;
    }
    let inf = limit + 1;
    let w = m + 1;
    rows.clear();
    rows.resize(3 * w, inf);
    // offsets of the rows i - 2, i - 1 and i
    let (mut p2, mut p, mut c) = (0, w, 2 * w);
    for j in 0..=m {
        rows[p + j] = j.min(inf);
    }
    for i in 1..=n {
        rows[c..c + w].fill(inf);
        rows[c] = i.min(inf);
        let mut row_min = rows[c];
        for j in i.saturating_sub(limit).max(1)..=(i + limit).min(m) {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (rows[p + j] + 1)
                .min(rows[c + j - 1] + 1)
                .min(rows[p + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(rows[p2 + j - 2] + 1);
            }
            let v = v.min(inf);
            rows[c + j] = v;
            row_min = row_min.min(v);
        }
        if row_min > limit {
            return None;
        }
        (p2, p, c) = (p, c, p2);
    }
    (rows[p + m] <= limit).then_some(rows[p + m])
}

/// `; did you mean A, B?` for an error's hint, or nothing.
pub fn did_you_mean(found: &[String]) -> String {
    match found {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full optimal-string-alignment table, uncapped: the reference
    /// the banded [`distance`] must agree with wherever it is within limit.
    fn full_osa(a: &[u8], b: &[u8]) -> usize {
        let (n, m) = (a.len(), b.len());
        let mut d = vec![vec![0usize; m + 1]; n + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        d[0] = (0..=m).collect();
        for i in 1..=n {
            for j in 1..=m {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[n][m]
    }

    /// A seeded xorshift: `next(n)` draws below `n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// [`similar`] (signature, band, shape run) against the full table
    /// over every name: seeded names over a small alphabet, so that near
    /// names abound.
    #[test]
    fn similar_and_its_shape_run_agree_with_the_full_table() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let alphabet = b"ab_c1Z";
        let word = |next: &mut dyn FnMut(u64) -> u64| -> String {
            let len = 1 + next(10) as usize;
            (0..len)
                .map(|_| alphabet[next(6) as usize] as char)
                .collect()
        };
        let names: Vec<String> = (0..3000).map(|_| word(&mut next)).collect();
        let index = shape_order(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as u32, n.as_str())),
        );
        let mut nonempty = 0;
        for _ in 0..400 {
            let wanted = word(&mut next);
            let limit = limit_for(&wanted);
            let mut want: Vec<(usize, &str)> = names
                .iter()
                .filter(|n| n.as_bytes()[0] == wanted.as_bytes()[0] && **n != wanted)
                .map(|n| (full_osa(wanted.as_bytes(), n.as_bytes()), n.as_str()))
                .filter(|&(d, _)| d <= limit)
                .collect();
            want.sort();
            want.dedup_by(|a, b| a.1 == b.1);
            let want: Vec<String> = want
                .into_iter()
                .take(3)
                .map(|(_, n)| n.to_string())
                .collect();
            assert_eq!(
                similar(&wanted, names.iter().map(String::as_str)),
                want,
                "{wanted}"
            );
            let run = shape_run(&index, |&i| names[i as usize].as_str(), &wanted);
            let ran = similar(
                &wanted,
                index[run].iter().map(|&i| names[i as usize].as_str()),
            );
            assert_eq!(ran, want, "{wanted} (shape run)");
            nonempty += usize::from(!want.is_empty());
        }
        assert!(nonempty > 100, "only {nonempty} names had near ones");
    }

    #[test]
    fn banded_distance_agrees_with_the_full_table() {
        // seeded edits of kernel-like names over a small alphabet (so
        // transpositions and repeats happen), limits 0 to 3
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = b"abc_de";
        let mut rows = Vec::new();
        let mut within = 0;
        for _ in 0..20_000 {
            let len = next(12) as usize;
            let a: Vec<u8> = (0..len).map(|_| alphabet[next(6) as usize]).collect();
            let mut b = a.clone();
            for _ in 0..next(4) {
                let at = next(b.len() as u64 + 1) as usize;
                match next(4) {
                    0 if at < b.len() => b[at] = alphabet[next(6) as usize],
                    1 => b.insert(at, alphabet[next(6) as usize]),
                    2 if at < b.len() => {
                        b.remove(at);
                    }
                    _ if at + 1 < b.len() => b.swap(at, at + 1),
                    _ => {}
                }
            }
            let limit = next(4) as usize;
            let want = full_osa(&a, &b);
            let got = distance(&a, &b, limit, &mut rows);
            assert_eq!(
                got,
                (want <= limit).then_some(want),
                "{a:?} {b:?} limit {limit}"
            );
            within += usize::from(got.is_some());
        }
        assert!(
            within > 5_000,
            "the edits stay within the limits often enough: {within}"
        );
    }

    #[test]
    fn misspellings_find_the_name() {
        let names = [
            "do_sys_openat2",
            "do_sys_open",
            "vfs_read",
            "vfs_write",
            "ksys_read",
        ];
        let s = |w: &str| similar(w, names.iter().copied());
        assert_eq!(s("do_sys_opnat2"), ["do_sys_openat2"]);
        assert_eq!(s("vfs_raed"), ["vfs_read"]);
        assert_eq!(s("vfs_reed"), ["vfs_read"]);
        assert!(s("completely_else").is_empty());
        assert!(s("vfs_read").is_empty(), "the name itself is no suggestion");
        assert_eq!(
            did_you_mean(&s("do_sys_opnat2")),
            "; did you mean do_sys_openat2?"
        );
    }
}
