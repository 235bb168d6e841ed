//! Per-probe hit and miss counters from `kprobe_profile` / `uprobe_profile`.
//!
//! Mirrors `probes_profile_seq_show()` in kernel/trace/trace_kprobe.c
//! (`NAME HITS MISSES`, misses being kretprobe instances that were not
//! available, or kprobes skipped in recursion) and in trace_uprobe.c
//! (`FILE NAME HITS`). The profiles name events without their group, so
//! this module pairs each profile line with the line at the same position
//! of `kprobe_events` / `uprobe_events`, which the kernel prints from the
//! same list in the same order. It is read-only.

use std::path::Path;

use crate::discover::ProbeFile;
use crate::dynevent::{DynEvent, parse_list};
use crate::error::{Error, ErrorKind, Result};
use crate::io;

/// One line of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileLine {
    /// The probed file (uprobes only).
    pub file: Option<String>,
    /// The event name (without group).
    pub event: String,
    /// Times the probe was hit.
    pub hits: u64,
    /// Misses (kprobes only): for return probes, returns not caught
    /// because all maxactive instances were in use.
    pub misses: Option<u64>,
}

/// The counters of one probe, with its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeProfile {
    /// The probe's group.
    pub group: String,
    /// The probe's event name.
    pub event: String,
    /// The type prefix (`p`, `r`, `r16`…).
    pub kind: String,
    /// Times hit.
    pub hits: u64,
    /// Misses (kprobes only).
    pub misses: Option<u64>,
}

impl ProbeProfile {
    /// A warning for a return probe that missed returns, suggesting a larger
    /// maxactive; `None` when there is nothing to warn about.
    pub fn warning(&self) -> Option<String> {
        let misses = self.misses?;
        if misses == 0 {
            return None;
        }
        if self.kind.starts_with('r') {
            let current = self.kind[1..].parse::<u32>().ok();
            let suggest = current.map_or(64, |c| (c * 4).clamp(64, 4096));
            Some(format!(
                "{}/{}: {misses} return(s) missed because all return-probe instances were busy; \
                 use a larger maxactive, e.g. r{suggest}:",
                self.group, self.event
            ))
        } else {
            Some(format!(
                "{}/{}: {misses} hit(s) missed (probe hit while another kprobe ran)",
                self.group, self.event
            ))
        }
    }
}

/// Parses a `kprobe_profile` (`kind` Kprobe) or `uprobe_profile` text.
pub fn parse(text: &str, kind: ProbeFile) -> Vec<ProfileLine> {
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            match kind {
                ProbeFile::KprobeEvents if w.len() == 3 => Some(ProfileLine {
                    file: None,
                    event: w[0].to_string(),
                    hits: w[1].parse().ok()?,
                    misses: Some(w[2].parse().ok()?),
                }),
                ProbeFile::UprobeEvents if w.len() >= 3 => {
                    let n = w.len();
                    Some(ProfileLine {
                        file: Some(w[..n - 2].join(" ")),
                        event: w[n - 2].to_string(),
                        hits: w[n - 1].parse().ok()?,
                        misses: None,
                    })
                }
                _ => None,
            }
        })
        .collect()
}

/// Pairs profile lines with the probe listing of the same kind.
pub fn pair(list: &[DynEvent], lines: &[ProfileLine]) -> Option<Vec<ProbeProfile>> {
    if list.len() != lines.len() {
        return None;
    }
    list.iter()
        .zip(lines)
        .map(|(d, p)| {
            (d.event == p.event).then(|| ProbeProfile {
                group: d.group.clone(),
                event: d.event.clone(),
                kind: d.kind.clone(),
                hits: p.hits,
                misses: p.misses,
            })
        })
        .collect()
}

/// Reads the profiles of every probe of `kind` in the tracefs at `root`,
/// with groups. Retries for up to about a second if probes come and go
/// meanwhile (other tools creating and removing probes between the listing
/// and the profile: five immediate tries were not enough while several
/// sessions churned, and a summary then read as zero hits).
pub fn read(root: &Path, kind: ProbeFile) -> Result<Vec<ProbeProfile>> {
    let (events, profile) = match kind {
        ProbeFile::KprobeEvents => ("kprobe_events", "kprobe_profile"),
        ProbeFile::UprobeEvents => ("uprobe_events", "uprobe_profile"),
    };
    if !root.join(profile).exists() {
        return Ok(Vec::new());
    }
    for attempt in 0..50u64 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(attempt.min(40)));
        }
        let list = parse_list(&io::read(&root.join(events), "cannot list probes")?);
        let lines = parse(
            &io::read(&root.join(profile), "cannot read probe profile")?,
            kind,
        );
        let again = parse_list(&io::read(&root.join(events), "cannot list probes")?);
        if list == again
            && let Some(p) = pair(&list, &lines)
        {
            return Ok(p);
        }
    }
    Err(Error::new(
        ErrorKind::Parse,
        format!("{profile} does not match {events} (probes changing meanwhile?)"),
    ))
}

/// Reads the profiles of both kinds and keeps those of `group`.
pub fn read_group(root: &Path, group: &str) -> Result<Vec<ProbeProfile>> {
    let mut out = Vec::new();
    for kind in [ProbeFile::KprobeEvents, ProbeFile::UprobeEvents] {
        out.extend(read(root, kind)?.into_iter().filter(|p| p.group == group));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uprobe_profile_real() {
        // cat uprobe_profile on the 6.18 host after
        // echo 'p:ktrace_x/ev /bin/true:0x1000' >> dynamic_events
        let text = "  /bin/true ev                                                         0\n";
        let l = parse(text, ProbeFile::UprobeEvents);
        assert_eq!(
            l,
            vec![ProfileLine {
                file: Some("/bin/true".into()),
                event: "ev".into(),
                hits: 0,
                misses: None
            }]
        );
    }

    #[test]
    fn kprobe_profile_table() {
        // Layout of trace_kprobe.c: "  %-44s %15lu %15lu\n".
        let text = format!(
            "  {:<44} {:>15} {:>15}\n  {:<44} {:>15} {:>15}\nbroken line\n",
            "p_vfs_read_0", 12, 0, "r_x", 5, 3
        );
        let l = parse(&text, ProbeFile::KprobeEvents);
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[1].event.as_str(), l[1].hits, l[1].misses),
            ("r_x", 5, Some(3))
        );
    }

    #[test]
    fn pair_and_warn() {
        let list = parse_list("p:a/p_x vfs_read\nr4:ktrace_1/r_x vfs_read\n");
        let lines = parse("  p_x 1 0\n  r_x 5 3\n", ProbeFile::KprobeEvents);
        let p = pair(&list, &lines).unwrap();
        assert_eq!(p[1].group, "ktrace_1");
        assert!(p[0].warning().is_none());
        let w = p[1].warning().unwrap();
        assert!(w.contains("maxactive") && w.contains("r64:"), "{w}");
        // Out of step: no pairing rather than a wrong one.
        assert!(pair(&list, &lines[..1]).is_none());
        let swapped = parse("  r_x 5 3\n  p_x 1 0\n", ProbeFile::KprobeEvents);
        assert!(pair(&list, &swapped).is_none());
    }
}
