//! A progress line on stderr for a setup or teardown phase that takes
//! long: `ktrace: PHASE N/TOTAL (S s)`, once the phase has run for a
//! second, redrawn in place on a terminal, else one line a second and the
//! last one at the end (the convention of "created N/M probes").
//!
//! Not a progress bar for output: stdout is never touched, and a phase
//! that ends within the second prints nothing. The second can be changed
//! with `KTRACE_PROGRESS_AFTER_MS` (0 announces every phase; the guest
//! tests use it to see each phase named whatever the machine's speed).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How long a phase runs before it is announced.
fn announce_after() -> Duration {
    std::env::var("KTRACE_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(1))
}

/// One phase's progress: [`Progress::step`] after each unit of work,
/// [`Progress::finish`] (or drop) at the end.
pub(crate) struct Progress {
    phase: String,
    total: usize,
    done: usize,
    started: Instant,
    after: Duration,
    terminal: bool,
    /// When the last line was printed and the count it showed (`None`:
    /// nothing printed yet).
    shown: Option<(Instant, usize)>,
    finished: bool,
}

impl Progress {
    /// Starts phase `phase` (lowercase: "writing hist triggers" is
    /// printed "ktrace: writing hist triggers 12/400 (1.0 s)") of `total`
    /// units.
    pub(crate) fn new(phase: impl Into<String>, total: usize) -> Progress {
        Progress {
            phase: phase.into(),
            total,
            done: 0,
            started: Instant::now(),
            after: announce_after(),
            terminal: std::io::stderr().is_terminal(),
            shown: None,
            finished: false,
        }
    }

    fn line(&self) -> String {
        format!(
            "ktrace: {} {}/{} ({:.1} s)",
            self.phase,
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64()
        )
    }

    /// `n` more units done.
    pub(crate) fn step(&mut self, n: usize) {
        self.set(self.done + n, self.total);
    }

    /// `done` units of `total` (a total learnt on the way) done.
    pub(crate) fn set(&mut self, done: usize, total: usize) {
        self.total = total;
        self.done = done.min(total);
        let now = Instant::now();
        if now.duration_since(self.started) < self.after {
            return;
        }
        if self.terminal {
            crate::eput!("\r{}", self.line());
            self.shown = Some((now, self.done));
        } else if self
            .shown
            .is_none_or(|(t, _)| now.duration_since(t) >= Duration::from_secs(1))
        {
            crate::eline!("{}", self.line());
            self.shown = Some((now, self.done));
        }
    }

    /// The end of the phase: its last line, when it ran long enough to be
    /// announced (with the count reached: short of the total on an error).
    pub(crate) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.shown.is_none() && self.started.elapsed() < self.after {
            return;
        }
        if self.terminal {
            crate::eline!("\r{}", self.line());
        } else if self.shown.is_none_or(|(_, d)| d != self.done) {
            crate::eline!("{}", self.line());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
