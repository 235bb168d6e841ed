//! The options `ktrace count`, `ktrace hist` and `ktrace latency` share
//! ([`Common`]), their value parsers, and what a command asks for ([`Job`]).
//!
//! Flags only: nothing here checks a probe or writes to the kernel; the
//! three command modules fill a [`Job`] and hand it to [`super::run`].

use std::net::SocketAddr;

use ktrace_aggregate::{Aggregation, Scale, Unit};

use crate::live::RunArgs;

/// Which engine aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
    /// The kernel when it can (hist triggers), else ktrace.
    Auto,
    /// The kernel's hist triggers and synthetic events; an error when the
    /// kernel cannot do what was asked.
    Kernel,
    /// ktrace's own aggregation of the event stream.
    User,
}

/// How `ktrace count` attaches to its functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Route {
    /// The function tracer when it can do the job, else kprobes.
    Auto,
    /// The function tracer in ktrace's own instance (one glob write).
    Ftrace,
    /// One kprobe per function.
    Kprobe,
}

/// Options shared by the three commands.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Print (and with --json, emit a document) every SECONDS, each block
    /// headed by its time; numbers restart each interval.
    #[arg(short = 'i', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub interval: Option<f64>,
    /// One JSON document per interval (units and bucket bounds included)
    /// instead of the terminal tables.
    #[arg(long)]
    pub json: bool,
    /// Serve the aggregates (since the start) at http://ADDR/metrics in the
    /// Prometheus text format, bound to exactly ADDR (e.g. 127.0.0.1:9100;
    /// `0.0.0.0` or `[::]` serve every network, with a warning). Every series
    /// has `probe` (the event) and `func` labels, each probe's from the
    /// first scrape; histograms use the fixed power-of-two ladder whatever
    /// --linear says; latency is in seconds, measured in nanoseconds.
    #[arg(long, value_name = "ADDR", value_parser = socket_addr)]
    pub prometheus: Option<SocketAddr>,
    /// Distinct keys kept: ktrace keeps the first N it sees and counts
    /// what later keys bring together as "other" (exactly, and says so);
    /// the kernel engine's tables hold N each (rounded up to a power of
    /// two, at most 131072) and count what does not fit as dropped.
    /// Memory stays bounded by it, with --top too.
    #[arg(long, value_name = "N", default_value_t = ktrace_aggregate::agg::DEFAULT_MAX_KEYS as u64,
          value_parser = crate::cli::count)]
    pub max_keys: u64,
    /// Who aggregates: the kernel (hist triggers), ktrace (from the
    /// stream), or auto (the kernel when it can).
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    /// Width of the histogram bars (default: fit the terminal).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub width: Option<u16>,
    /// The options of the run (filter, -d, -p, the command...).
    #[command(flatten)]
    pub run: RunArgs,
}

/// `IP:PORT` (no host names: the endpoint binds exactly what is given).
pub fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not IP:PORT (e.g. 127.0.0.1:9100 or [::1]:9100)"))
}

/// `ns`, `us` or `ms`.
pub fn unit(text: &str) -> Result<Unit, String> {
    Unit::parse(text).map_err(|e| e.to_string())
}

/// The bucket scheme of `--linear STEP` (power of two without).
pub fn scale(linear: Option<u64>) -> Scale {
    match linear {
        Some(step) => Scale::Linear { step },
        None => Scale::Log2,
    }
}

/// What a command aggregates.
#[derive(Debug, Clone)]
pub enum Job {
    /// Hits per key.
    Count {
        /// `--by`.
        by: Vec<String>,
        /// `--top`.
        top: Option<u64>,
        /// `--route`.
        route: Route,
        /// `--folded`: the counts as folded stacks.
        folded: bool,
    },
    /// Distribution of a field.
    Hist {
        /// The field.
        field: String,
        /// Buckets.
        scale: Scale,
        /// `--by`.
        by: Vec<String>,
    },
    /// Entry-to-return time of functions.
    Latency {
        /// Buckets.
        scale: Scale,
        /// Unit.
        unit: Unit,
        /// `--by`.
        by: Vec<String>,
    },
}

impl Job {
    /// What the user engine's aggregator aggregates.
    pub(super) fn aggregation(&self) -> Aggregation<'_> {
        match self {
            Job::Count { .. } => Aggregation::Count,
            Job::Hist { field, scale, .. } => Aggregation::Hist {
                field,
                scale: *scale,
            },
            Job::Latency { scale, unit, .. } => Aggregation::Latency {
                scale: *scale,
                unit: *unit,
            },
        }
    }
}
