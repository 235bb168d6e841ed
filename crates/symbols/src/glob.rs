//! Shell-style wildcards for symbol names: `*`, `?`, `[abc]`, `[a-z]`,
//! `[!abc]` / `[^abc]`.
//!
//! Semantics follow the kernel's lib/glob.c `glob_match()` (used by ftrace
//! filters and `set_event`): `*` matches any run of bytes including none,
//! `?` exactly one byte, a bracket expression one byte from the set; a `]`
//! right after `[` or `[!` is a literal member. There is no escaping and no
//! special meaning for `/`. This is not a regular expression engine.

/// Whether `pattern` contains any wildcard character.
pub fn is_glob(pattern: &str) -> bool {
    pattern.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Matches `text` against `pattern`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0usize, 0usize);
    // Backtrack point: position after the last `*`, and the text position it
    // is currently assumed to have consumed up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let matched = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi + 1, ti));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => bracket(p, pi, t[ti]),
            Some(&c) => (c == t[ti]).then_some(pi + 1),
            None => None,
        };
        match matched {
            Some(next) => {
                pi = next;
                ti += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    pi = sp;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// Matches one byte against the bracket expression at `p[start]` (`[`);
/// returns the pattern index after it on a match. An unterminated bracket is
/// a literal `[`.
fn bracket(p: &[u8], start: usize, c: u8) -> Option<usize> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    // The set runs to the first `]` that is not its first member.
    let close = match p
        .get(i + 1..)
        .and_then(|r| r.iter().position(|&b| b == b']'))
    {
        Some(k) => i + 1 + k,
        None => return (c == b'[').then_some(start + 1),
    };
    let set = &p[i..close];
    let mut hit = false;
    let mut k = 0;
    while k < set.len() {
        if k + 2 < set.len() && set[k + 1] == b'-' {
            hit |= set[k] <= c && c <= set[k + 2];
            k += 3;
        } else {
            hit |= set[k] == c;
            k += 1;
        }
    }
    (hit != negate).then_some(close + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, &str, bool)] = &[
            ("vfs_*", "vfs_read", true),
            ("vfs_*", "vfs_", true),
            ("vfs_*", "do_vfs_read", false),
            ("*read", "vfs_read", true),
            ("*read", "vfs_readv", false),
            ("*_read*", "ksys_read_x", true),
            ("do_sys_open?t2", "do_sys_openat2", true),
            ("do_sys_open?t2", "do_sys_opent2", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("[abc]x", "bx", true),
            ("[abc]x", "dx", false),
            ("[!abc]x", "dx", true),
            ("[^abc]x", "ax", false),
            ("[a-c]1", "b1", true),
            ("[a-c]1", "d1", false),
            ("[]]", "]", true),
            ("[!]]", "a", true),
            ("[-a]", "-", true),
            ("[a-]", "-", true),
            ("[abc", "[abc", true),
            ("", "", true),
            ("", "a", false),
            ("*", "", true),
            ("**", "anything", true),
            ("exact", "exact", true),
            ("exact", "exact2", false),
        ];
        for &(p, t, want) in cases {
            assert_eq!(glob_match(p, t), want, "{p:?} vs {t:?}");
        }
    }

    #[test]
    fn detects_wildcards() {
        assert!(is_glob("vfs_*"));
        assert!(is_glob("a?"));
        assert!(is_glob("[ab]"));
        assert!(!is_glob("vfs_read"));
    }
}
