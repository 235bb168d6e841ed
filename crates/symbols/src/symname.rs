//! Names that share their table's text.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A symbol's (or a module's) name read from a table: a slice of the
/// table's whole text, which all of its names share. One allocation for a
/// table of 100,000 names instead of one each: on an emulated x86_64 7.2,
/// the per-name allocations and the pages they touched were a fifth of a
/// `ktrace check`'s start. It reads as a `str` (`Deref`), compares, orders
/// and hashes as one.
#[derive(Clone)]
pub struct SymName {
    text: Arc<String>,
    start: u32,
    len: u32,
}

impl SymName {
    /// `part`, a slice of `text`, as a name sharing `text`; a `part`
    /// elsewhere (or past 4 GiB into it) gets its own copy.
    pub fn within(text: &Arc<String>, part: &str) -> Self {
        let start = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
        match (u32::try_from(start), u32::try_from(part.len())) {
            (Ok(s), Ok(l))
                if start
                    .checked_add(part.len())
                    .is_some_and(|end| end <= text.len())
                    && text
                        .get(start..start + part.len())
                        .is_some_and(|p| p.as_ptr() == part.as_ptr()) =>
            {
                SymName {
                    text: Arc::clone(text),
                    start: s,
                    len: l,
                }
            }
            _ => SymName::from(part),
        }
    }

    /// Whether both are slices of the same text (one table's).
    pub fn shares_text(&self, other: &SymName) -> bool {
        Arc::ptr_eq(&self.text, &other.text)
    }

    /// The name as a `str`.
    pub fn as_str(&self) -> &str {
        let s = self.start as usize;
        self.text.get(s..s + self.len as usize).unwrap_or_default()
    }
}

impl Deref for SymName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SymName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SymName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for SymName {
    fn from(s: &str) -> Self {
        SymName::from(s.to_string())
    }
}

impl From<String> for SymName {
    fn from(s: String) -> Self {
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
        let mut s = s;
        s.truncate(len as usize);
        SymName {
            text: Arc::new(s),
            start: 0,
            len,
        }
    }
}

impl Default for SymName {
    fn default() -> Self {
        SymName::from(String::new())
    }
}

impl fmt::Display for SymName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for SymName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for SymName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SymName {}

impl Hash for SymName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for SymName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SymName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

macro_rules! eq_with {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for SymName {
            fn eq(&self, other: &$t) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }
        impl PartialEq<SymName> for $t {
            fn eq(&self, other: &SymName) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}
eq_with!(str, &str, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_shares_its_text_and_reads_as_itself() {
        let text = Arc::new("ffff T vfs_read\nffff t kfree\t[m]\n".to_string());
        let name = SymName::within(&text, &text[7..15]);
        let module = SymName::within(&text, &text[30..31]);
        assert_eq!(name, "vfs_read");
        assert_eq!(module.as_str(), "m");
        assert_eq!(Arc::strong_count(&text), 3);
        // equal, hashed and ordered as its text, wherever it lives
        let own = SymName::from("vfs_read");
        assert_eq!(name, own);
        let h = |s: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s(&mut h);
            h.finish()
        };
        assert_eq!(h(&|st| name.hash(st)), h(&|st| "vfs_read".hash(st)));
        let (a, w) = (SymName::from("a"), SymName::from("w"));
        assert!(a < name && name < w && a.cmp(&w).is_lt());
        assert_eq!(format!("{name} {name:?}"), "vfs_read \"vfs_read\"");
        // a str from elsewhere is copied, not taken as an offset
        let other = String::from("kfree");
        let copied = SymName::within(&text, &other);
        assert_eq!(copied, "kfree");
        assert_eq!(Arc::strong_count(&text), 3);
    }
}
