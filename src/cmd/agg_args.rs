//! Arguments of `ktrace count`, `ktrace hist` and `ktrace latency` (issue
//! 11), and the checks that need no kernel: which engine (the kernel's hist
//! triggers or ktrace's own aggregation of the stream) does the work, and a
//! clear error for a histogram of a string field or an unknown key. The
//! commands themselves (probe creation, the session, the stream sink) are
//! not here; the aggregation, rendering and Prometheus code is in
//! ktrace-aggregate.

use std::net::SocketAddr;

use ktrace_aggregate::kernel::{Unsupported, check_hist_field};
use ktrace_aggregate::{FieldInfo, FieldKind, KeySpec, Scale, Unit};

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

/// Options shared by the three commands.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Print (and with --json, emit a document) every SECONDS, each block
    /// headed by its time; counts restart each interval.
    #[arg(short = 'i', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub interval: Option<f64>,
    /// Stop after this many seconds (Ctrl-C also stops, printing the final
    /// result).
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = crate::cli::seconds)]
    pub duration: Option<f64>,
    /// One JSON document per interval (units and bucket bounds included)
    /// instead of the terminal tables.
    #[arg(long)]
    pub json: bool,
    /// Serve the aggregates at http://ADDR/metrics in the Prometheus text
    /// format, bound to exactly ADDR (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR", value_parser = socket_addr)]
    pub prometheus: Option<SocketAddr>,
    /// Who aggregates: the kernel (hist triggers), ktrace (from the
    /// stream), or auto (the kernel when it can).
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    /// Event filter applied to every probe (the kernel's filter language).
    #[arg(short = 'f', long)]
    pub filter: Option<String>,
    /// Only events of this process.
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// Width of the histogram bars (default: fit the terminal).
    #[arg(long, value_name = "COLUMNS", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub width: Option<u16>,
}

/// Arguments of `ktrace count`.
#[derive(Debug, Clone, clap::Args)]
pub struct CountArgs {
    /// Probes, as in `ktrace trace` (kernel and user probes, wildcards).
    #[arg(required = true, value_name = "PROBE")]
    pub probes: Vec<String>,
    /// Count per KEY: func, comm, pid, tid, cpu, stack, or a probe field
    /// (repeat for a compound key).
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    /// Show only the N keys with the most hits.
    #[arg(long, value_name = "N", value_parser = crate::cli::count)]
    pub top: Option<u64>,
    #[command(flatten)]
    pub common: Common,
}

/// Arguments of `ktrace hist`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistArgs {
    /// The probe, as in `ktrace trace`.
    #[arg(value_name = "PROBE")]
    pub probe: String,
    /// The numeric field whose distribution to show.
    #[arg(value_name = "FIELD")]
    pub field: String,
    /// Power-of-two buckets, bpftrace's [0], [1], [2, 4), ... (the
    /// default).
    #[arg(long, conflicts_with = "linear")]
    pub log2: bool,
    /// Linear buckets STEP wide.
    #[arg(long, value_name = "STEP", value_parser = crate::cli::count)]
    pub linear: Option<u64>,
    /// One histogram per KEY (see `ktrace count --by`).
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// Arguments of `ktrace latency`.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencyArgs {
    /// Functions to time (an entry and a return probe each).
    #[arg(required = true, value_name = "FUNC")]
    pub funcs: Vec<String>,
    /// One histogram per KEY: func, comm, pid, tid, cpu, stack, or an entry
    /// probe field.
    #[arg(long = "by", value_name = "KEY")]
    pub by: Vec<String>,
    /// Unit of the latencies.
    #[arg(long, value_name = "UNIT", default_value = "us", value_parser = unit)]
    pub unit: Unit,
    /// Linear buckets STEP units wide instead of powers of two.
    #[arg(long, value_name = "STEP", value_parser = crate::cli::count)]
    pub linear: Option<u64>,
    #[command(flatten)]
    pub common: Common,
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

impl HistArgs {
    /// The bucket scheme.
    pub fn scale(&self) -> Scale {
        match self.linear {
            Some(step) => Scale::Linear { step },
            None => Scale::Log2,
        }
    }

    /// Check the field against the probe's fields: its kind, or the error
    /// for an unknown or string field (before anything is written).
    pub fn check_field(
        &self,
        event: &str,
        fields: &[FieldInfo],
    ) -> Result<FieldKind, ktrace_aggregate::Error> {
        check_hist_field(&self.field, event, fields)
    }
}

impl LatencyArgs {
    /// The bucket scheme.
    pub fn scale(&self) -> Scale {
        match self.linear {
            Some(step) => Scale::Linear { step },
            None => Scale::Log2,
        }
    }
}

/// The `--by` keys, checked against the probe's fields.
pub fn keys(
    by: &[String],
    event: &str,
    fields: &[FieldInfo],
) -> Result<Vec<KeySpec>, ktrace_aggregate::Error> {
    KeySpec::parse_all(by, event, fields)
}

/// The engine that runs, given the choice and what the kernel engine's
/// planner said (`Ok(plan)` or why it cannot).
#[derive(Debug)]
pub enum Engine<P> {
    /// The kernel runs this plan.
    Kernel(P),
    /// ktrace aggregates; `reason` says why not the kernel (`None`: asked
    /// for).
    User {
        /// Why the kernel engine was not used.
        reason: Option<String>,
    },
}

/// Decide the engine: `auto` falls back to the user engine with the
/// kernel's reason (worth a note on stderr), `kernel` turns the reason into
/// an error, `user` never asks the kernel.
pub fn choose<P>(
    choice: EngineChoice,
    planned: impl FnOnce() -> Result<P, Unsupported>,
) -> Result<Engine<P>, String> {
    match choice {
        EngineChoice::User => Ok(Engine::User { reason: None }),
        EngineChoice::Auto => Ok(match planned() {
            Ok(p) => Engine::Kernel(p),
            Err(u) => Engine::User {
                reason: Some(u.reason),
            },
        }),
        EngineChoice::Kernel => planned()
            .map(Engine::Kernel)
            .map_err(|u| format!("the kernel engine cannot do this: {}", u.reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    enum Cli {
        Count(CountArgs),
        Hist(HistArgs),
        Latency(LatencyArgs),
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(std::iter::once("ktrace").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn count_args() {
        let Cli::Count(a) = parse(&[
            "count",
            "ksys_read",
            "--by",
            "comm",
            "--by",
            "fd",
            "--top",
            "5",
            "-i",
            "1",
            "--json",
            "--prometheus",
            "127.0.0.1:9100",
            "--engine",
            "user",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(a.by, ["comm", "fd"]);
        assert_eq!(a.top, Some(5));
        assert_eq!(a.common.interval, Some(1.0));
        assert!(a.common.json);
        assert_eq!(a.common.prometheus, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(a.common.engine, EngineChoice::User);
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let table: &[(&[&str], &str)] = &[
            (&["count"], "PROBE"),
            (&["count", "f", "--top", "0"], "at least 1"),
            (
                &["count", "f", "--prometheus", "localhost:9100"],
                "is not IP:PORT",
            ),
            (&["count", "f", "-i", "0"], "above zero"),
            (&["count", "f", "--engine", "bpf"], "bpf"),
            (
                &["hist", "f", "x", "--log2", "--linear", "8"],
                "cannot be used with",
            ),
            (&["hist", "f", "x", "--linear", "0"], "at least 1"),
            (&["hist", "f"], "FIELD"),
            (
                &["latency", "f", "--unit", "s"],
                "unknown unit 's': expected ns, us or ms",
            ),
            (&["latency", "f", "--width", "0"], "0"),
        ];
        for (args, want) in table {
            let e = parse(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn scales_and_units() {
        let Cli::Hist(h) = parse(&["hist", "f", "count", "--linear", "512"]).unwrap() else {
            panic!()
        };
        assert_eq!(h.scale(), Scale::Linear { step: 512 });
        let Cli::Hist(h) = parse(&["hist", "f", "count"]).unwrap() else {
            panic!()
        };
        assert_eq!(h.scale(), Scale::Log2);
        let Cli::Latency(l) = parse(&["latency", "f", "g"]).unwrap() else {
            panic!()
        };
        assert_eq!(
            (l.unit, l.scale(), l.funcs.len()),
            (Unit::Us, Scale::Log2, 2)
        );
        let Cli::Latency(l) = parse(&["latency", "f", "--unit", "ns", "--linear", "100"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((l.unit, l.scale()), (Unit::Ns, Scale::Linear { step: 100 }));
    }

    #[test]
    fn histogram_of_a_string_field_is_an_error() {
        let Cli::Hist(h) = parse(&["hist", "f", "path"]).unwrap() else {
            panic!()
        };
        let fields = [
            FieldInfo::new("path", FieldKind::String),
            FieldInfo::new("fd", FieldKind::Signed),
        ];
        assert_eq!(
            h.check_field("ktrace/f", &fields).unwrap_err().to_string(),
            "cannot make a histogram of 'path': it is a string field; count by it instead (--by path)"
        );
        let Cli::Hist(h) = parse(&["hist", "f", "fd"]).unwrap() else {
            panic!()
        };
        assert_eq!(
            h.check_field("ktrace/f", &fields).unwrap(),
            FieldKind::Signed
        );
        assert_eq!(
            keys(&["nope".into()], "ktrace/f", &fields)
                .unwrap_err()
                .to_string(),
            "unknown key 'nope': not a field of ktrace/f (fields: path, fd)"
        );
    }

    #[test]
    fn engine_choice() {
        let no = || {
            Err::<(), _>(Unsupported {
                reason: "the kernel's hist keys have the thread id".into(),
            })
        };
        let yes = || Ok::<u8, Unsupported>(7);
        assert!(matches!(
            choose(EngineChoice::Auto, yes),
            Ok(Engine::Kernel(7))
        ));
        assert!(
            matches!(choose(EngineChoice::Auto, no), Ok(Engine::User { reason: Some(r) }) if r.contains("thread id"))
        );
        assert!(matches!(
            choose(EngineChoice::User, yes),
            Ok(Engine::User { reason: None })
        ));
        assert_eq!(
            choose(EngineChoice::Kernel, no).unwrap_err(),
            "the kernel engine cannot do this: the kernel's hist keys have the thread id"
        );
        assert!(matches!(
            choose(EngineChoice::Kernel, yes),
            Ok(Engine::Kernel(7))
        ));
    }
}
