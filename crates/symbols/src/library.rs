//! `LIB:SYMBOL` → the library file: through the traced process's maps when a
//! pid is known, else through ld.so.cache.
//!
//! A process's maps are the truth (it may have loaded a library from
//! `LD_LIBRARY_PATH` or an rpath); the cache is what a new process would get
//! from the default search. Paths are compared after resolving symbolic
//! links, so `libreadline.so` and `libreadline.so.8` naming one file count
//! once. This module does not emulate rpath/runpath search.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::{ldcache, maps};

/// Whether `lib` should be taken as a path rather than a library name.
pub fn is_path(lib: &str) -> bool {
    lib.contains('/')
}

/// Picks one file from candidate paths, merging those that are the same
/// file. `canon` maps a path to its canonical form (pure in tests).
pub fn choose(
    name: &str,
    candidates: &[String],
    canon: impl Fn(&str) -> String,
) -> Result<Option<String>> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for c in candidates {
        let key = canon(c);
        if !seen.iter().any(|(k, _)| *k == key) {
            seen.push((key, c.clone()));
        }
    }
    match seen.len() {
        0 => Ok(None),
        1 => Ok(Some(seen.remove(0).1)),
        _ => Err(Error::Ambiguous {
            path: "library search".to_string(),
            symbol: name.to_string(),
            candidates: seen.into_iter().map(|(_, p)| p).collect(),
        }),
    }
}

/// Finds the file for `lib` (`libc`, `libc.so.6`, or a path).
pub fn find(lib: &str, pid: Option<u32>, cache: &Path) -> Result<PathBuf> {
    if is_path(lib) {
        return Ok(PathBuf::from(lib));
    }
    let canon = |p: &str| {
        std::fs::canonicalize(p)
            .map(|c| c.display().to_string())
            .unwrap_or_else(|_| p.to_string())
    };
    let mut searched = Vec::new();
    if let Some(pid) = pid {
        let entries = maps::open(pid)?;
        let found: Vec<String> = maps::libraries(&entries, lib)
            .into_iter()
            .map(|p| p.trim_end_matches(" (deleted)").to_string())
            .collect();
        // The process's own view: no canonicalisation across its namespace.
        if let Some(p) = choose(lib, &found, |p| p.to_string())? {
            return Ok(PathBuf::from(p));
        }
        searched.push(format!("/proc/{pid}/maps"));
    }
    let entries = ldcache::open(cache)?;
    let found = ldcache::lookup(&entries, lib, ldcache::host_flags());
    if let Some(p) = choose(lib, &found, canon)? {
        return Ok(PathBuf::from(p));
    }
    searched.push(cache.display().to_string());
    Err(Error::LibraryNotFound {
        name: lib.to_string(),
        searched: searched.join(" and "),
    })
}

/// A user probe location resolved from `PATH:SYMBOL[+OFF]` or
/// `LIB:SYMBOL[+OFF]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserProbe {
    /// The file the uprobe goes on.
    pub path: PathBuf,
    /// The symbol and the file offset.
    pub target: crate::elf::UprobeTarget,
}

impl UserProbe {
    /// The kernel's `PATH:0xOFFSET` form.
    pub fn to_kernel_location(&self) -> String {
        format!("{}:{:#x}", self.path.display(), self.target.file_offset)
    }
}

/// Resolves `FILE:SYMBOL[@VER][+OFF]` where FILE is a path (contains `/`) or
/// a library name (`libc`, `libc.so.6`, found through the maps of `pid` when
/// given, else ld.so.cache at `cache`). A path may hold `:` itself
/// (`/tmp/a:b/hot:main`): the split is at the last `:` whose left side is an
/// existing file, as the kernel splits `PATH:OFFSET` at the last `:`;
/// library names split at the first.
pub fn resolve_user_probe(spec: &str, pid: Option<u32>, cache: &Path) -> Result<UserProbe> {
    let (file, symbol) = split_file_symbol(spec).ok_or_else(|| Error::BadSpec {
        spec: spec.to_string(),
        reason: "expected FILE:SYMBOL".to_string(),
    })?;
    if file.is_empty() {
        return Err(Error::BadSpec {
            spec: spec.to_string(),
            reason: "empty file name".to_string(),
        });
    }
    let path = find(file, pid, cache)?;
    let target = crate::elf::open_with_debug(&path)?.resolve(symbol)?;
    Ok(UserProbe { path, target })
}

/// Splits `FILE:SYMBOL`: for a path (with `/`), at the last `:` whose
/// left side is a file, else at the first `:`.
fn split_file_symbol(spec: &str) -> Option<(&str, &str)> {
    let first = spec.split_once(':')?;
    if !first.0.contains('/') && !spec.starts_with('/') {
        return Some(first);
    }
    spec.match_indices(':')
        .rev()
        .map(|(i, _)| (&spec[..i], &spec[i + 1..]))
        .find(|(f, _)| f.contains('/') && Path::new(f).is_file())
        .or(Some(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 14 #11: a path holding `:` was cut at its first `:` ("cannot
    /// read /tmp/adv/a").
    #[test]
    fn path_with_colon_splits_at_the_last_colon_naming_a_file() {
        let dir = std::env::temp_dir().join(format!("ktrace_colon_{}/a:b", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hot");
        std::fs::write(&file, b"").unwrap();
        let spec = format!("{}:main", file.display());
        let want = file.display().to_string();
        assert_eq!(split_file_symbol(&spec), Some((want.as_str(), "main")));
        assert_eq!(split_file_symbol("libc:getenv"), Some(("libc", "getenv")));
        assert_eq!(
            split_file_symbol("/nonexistent/x:sym"),
            Some(("/nonexistent/x", "sym"))
        );
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    #[test]
    fn choose_merges_same_files() {
        let canon = |p: &str| {
            p.replace("libreadline.so.8", "libreadline.so.8.2")
                .replace("libreadline.so", "libreadline.so.8.2")
                .replace(".8.2.8.2", ".8.2")
        };
        let two = vec![
            "/lib/libreadline.so.8".to_string(),
            "/lib/libreadline.so".to_string(),
        ];
        assert_eq!(
            choose("libreadline", &two, canon).unwrap().as_deref(),
            Some("/lib/libreadline.so.8")
        );
        assert_eq!(choose("x", &[], |p: &str| p.to_string()).unwrap(), None);
        let diff = vec!["/a/libfoo.so.1".to_string(), "/a/libfoo.so.2".to_string()];
        let e = choose("libfoo", &diff, |p: &str| p.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("libfoo.so.1") && e.contains("libfoo.so.2"),
            "{e}"
        );
        assert!(is_path("./a.out") && !is_path("libc"));
    }

    #[test]
    fn user_probe_specs_need_a_file() {
        let cache = Path::new("/nonexistent/ld.so.cache");
        for bad in ["getenv", ":getenv"] {
            let e = resolve_user_probe(bad, None, cache).unwrap_err();
            assert!(matches!(e, Error::BadSpec { .. }), "{bad}: {e}");
        }
    }
}
