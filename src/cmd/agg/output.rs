//! Where reports go ([`Printer`]): the terminal tables or JSON on stdout,
//! counts as folded stacks with `--folded`, each block headed by its time
//! with `-i`, and the Prometheus text the metrics server hands out; the
//! bar width from `--width` or the terminal.
//!
//! The rendering itself is ktrace-aggregate's ([`Report`]'s); this only
//! chooses and writes.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ktrace_aggregate::{Key, Report, folded, render};

/// Where reports go: the terminal or JSON on stdout, and the Prometheus
/// text the server hands out.
pub(super) struct Printer {
    pub(super) json: bool,
    /// Counts as folded stacks (ktrace_aggregate::folded).
    pub(super) folded: bool,
    pub(super) width: usize,
    pub(super) top: Option<u64>,
    pub(super) field: Option<String>,
    pub(super) interval: Option<Duration>,
    pub(super) metrics: Option<Arc<Mutex<String>>>,
    /// The series Prometheus lists from the first scrape, hits or not
    /// (probe and function of each probe, when those are all the keys).
    pub(super) series: Vec<Key>,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Printer {
    /// Prints one block: headed by its time with `-i`.
    pub(super) fn print(&self, r: &Report) -> io::Result<()> {
        let now = unix_ns();
        let mut out = String::new();
        if let (true, Report::Count(c)) = (self.folded, r) {
            match self.top {
                Some(n) => folded::count_folded(&mut out, &c.clone().top(n as usize)),
                None => folded::count_folded(&mut out, c),
            }
        } else if self.json {
            r.json(
                &mut out,
                now,
                self.interval.map(|d| d.as_nanos() as u64),
                self.top,
            );
            if !out.ends_with('\n') {
                out.push('\n');
            }
        } else {
            if self.interval.is_some() {
                render::interval_header(&mut out, now);
            }
            r.text(&mut out, self.width, self.top);
            out.push('\n');
        }
        let mut so = io::stdout().lock();
        so.write_all(out.as_bytes())?;
        so.flush()
    }

    pub(super) fn publish(&self, total: &Report) {
        if let Some(m) = &self.metrics {
            let text = total
                .clone()
                .with_series(&self.series)
                .prometheus(self.field.as_deref());
            *m.lock().unwrap_or_else(|p| p.into_inner()) = text;
        }
    }
}

/// Bar width: `--width`, else what `COLUMNS` leaves beside the labels.
pub(super) fn bar_width(opt: Option<u16>) -> usize {
    if let Some(w) = opt {
        return usize::from(w);
    }
    // the shell's COLUMNS when exported, else a classic 80-column terminal
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| *c > 0)
        .map_or(40, |c| c.saturating_sub(40).clamp(10, 100))
}
