//! "Did you mean …?": the names nearest to a misspelt one (edit distance,
//! with a transposition counting as one edit), for the errors that name a
//! symbol no table has.

/// Up to three of `names` within a small edit distance of `wanted` (one edit
/// for names up to 6 bytes, two beyond), nearest first, each once. Only
/// names with the same first byte are compared: a kernel has some 100,000
/// symbols, and a guest under emulation checks thousands of definitions.
pub fn similar<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let limit = if wanted.len() <= 6 { 1 } else { 2 };
    let first = wanted.as_bytes().first().copied();
    let mut found: Vec<(usize, &str)> = names
        .filter(|n| n.as_bytes().first().copied() == first)
        .filter(|n| n.len().abs_diff(wanted.len()) <= limit && *n != wanted)
        .filter_map(|n| distance(wanted.as_bytes(), n.as_bytes(), limit).map(|d| (d, n)))
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.1 == b.1);
    found
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// The optimal-string-alignment distance of `a` and `b`, or `None` when it
/// is above `limit`.
fn distance(a: &[u8], b: &[u8], limit: usize) -> Option<usize> {
    let (n, m) = (a.len(), b.len());
    let mut prev2 = vec![0usize; m + 1];
    let mut prev: Vec<usize> = (0..=m).collect();
    let mut cur = vec![0usize; m + 1];
    for i in 1..=n {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
            row_min = row_min.min(v);
        }
        if row_min > limit {
            return None;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    (prev[m] <= limit).then_some(prev[m])
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
