//! What this kernel's tracing supports, read from tracefs itself.
//!
//! The tracefs `README` (kernel/trace/trace.c, `readme_msg`) lists the probe
//! syntax the kernel was built with: definition forms, fetch arguments and
//! types; the files present tell which interfaces exist. This is detection
//! only: it never writes to tracefs and never guesses from version numbers.

use std::fs;
use std::path::Path;

/// Features of one kernel's tracing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    /// `dynamic_events` exists (kernel 4.20+).
    pub dynamic_events: bool,
    /// `kprobe_events` exists (CONFIG_KPROBE_EVENTS).
    pub kprobe_events: bool,
    /// `uprobe_events` exists (CONFIG_UPROBE_EVENTS).
    pub uprobe_events: bool,
    /// `instances/` exists.
    pub instances: bool,
    /// `error_log` exists (5.2+).
    pub error_log: bool,
    /// Hist triggers are available, by the trigger syntax the README lists
    /// (`hist:keys` or a `hist` trigger line). The kernel engine of
    /// `ktrace count/hist/latency` goes by [`HistFeatures::hist`] instead
    /// (`hist trigger` documented); every README seen has both or neither
    /// (the 6.1 guest's both, the 6.18 host's neither).
    pub hist_triggers: bool,
    /// The `snapshot` trigger is available.
    pub snapshot: bool,
    /// Event probes (`e:`) are available.
    pub eprobes: bool,
    /// Fprobes (`f:`) are available.
    pub fprobes: bool,
    /// Tracepoint probes (`t:`) are available.
    pub tprobes: bool,
    /// Synthetic events (`s:` in `dynamic_events`, CONFIG_SYNTH_EVENTS).
    pub synthetic: bool,
    /// `$arg<N>` fetch arguments (BTF or arch ABI) are accepted.
    pub arg_n: bool,
    /// `$comm` is accepted.
    pub comm: bool,
    /// Immediate values (`\imm`) are accepted.
    pub immediates: bool,
    /// Uprobe reference counters (`(ref_ctr_offset)`) are accepted.
    pub ref_ctr_offset: bool,
    /// `maxactive` for return probes is accepted.
    pub maxactive: bool,
    /// BTF argument names (`<argname>[->field...]`, 6.5+ with
    /// CONFIG_PROBE_EVENTS_BTF_ARGS) are accepted in probe definitions.
    pub btf_args: bool,
    /// Fetch types the README lists, expanded (`u8`, `u16`, …, `string`).
    pub types: Vec<String>,
    /// What the README says of hist triggers, as the kernel engine plans
    /// with it.
    pub hist: HistFeatures,
}

/// Hist-trigger features of a kernel, from its tracefs README
/// (Documentation/trace/histogram.rst; the README's `hist` section): what
/// the kernel engine of `ktrace count/hist/latency` (ktrace-aggregate)
/// plans with. Never from the version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistFeatures {
    /// Hist triggers at all (`hist trigger` documented).
    pub hist: bool,
    /// `.buckets=size` modifier.
    pub buckets: bool,
    /// `common_cpu` as a key (older kernels say `cpu`).
    pub common_cpu: bool,
    /// Arithmetic with numeric literals in expressions.
    pub constants: bool,
    /// Synthetic events through `dynamic_events` (`s:[synthetic/]`).
    pub synthetic_dynamic: bool,
    /// The `synthetic_events` file.
    pub synthetic_file: bool,
    /// `onmatch(...).trace(...)` (the generic `trace` action).
    pub onmatch_trace: bool,
    /// `stacktrace` as a key.
    pub stacktrace: bool,
    /// How many fields a compound key may have.
    pub max_keys: usize,
}

impl HistFeatures {
    /// Read the features from the README text.
    pub fn from_readme(readme: &str) -> HistFeatures {
        let has = |s: &str| readme.contains(s);
        let hist = has("hist trigger");
        HistFeatures {
            hist,
            buckets: hist && has(".buckets="),
            common_cpu: hist && has("common_cpu"),
            constants: hist && (has("numeric_literal") || has("numeric literal")),
            synthetic_dynamic: has("s:[synthetic/]"),
            synthetic_file: has("synthetic_events"),
            onmatch_trace: has("onmatch(") && has("trace(<synthetic_event>"),
            stacktrace: hist && has("'stacktrace'"),
            max_keys: if !hist {
                0
            } else if has("up to two fields") {
                2
            } else {
                3
            },
        }
    }

    /// Whether synthetic events can be made at all.
    pub fn synthetic(&self) -> bool {
        self.synthetic_dynamic || self.synthetic_file
    }
}

/// Whether the kernel offers the function tracer (`function` in the
/// tracefs root's `available_tracers`, and a `set_ftrace_filter`): read
/// before anything is created; ktrace's own instance is asked again once
/// it exists ([`crate::Instance::has_function_tracer`]).
pub fn function_tracer(root: &Path) -> bool {
    std::fs::read_to_string(root.join("available_tracers"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|t| t == "function")
        && root.join("set_ftrace_filter").exists()
}

/// The text of the tracefs `README` at `root` (what the running kernel says
/// it supports), or an empty string when it cannot be read.
pub fn readme(root: &Path) -> String {
    fs::read_to_string(root.join("README")).unwrap_or_default()
}

impl Features {
    /// Detects the features of the tracefs at `root`.
    pub fn detect(root: &Path) -> Self {
        let mut f = Self::from_readme(&readme(root));
        f.dynamic_events = root.join("dynamic_events").exists();
        f.kprobe_events = root.join("kprobe_events").exists();
        f.uprobe_events = root.join("uprobe_events").exists();
        f.instances = root.join("instances").is_dir();
        f.error_log = root.join("error_log").exists();
        f
    }

    /// The features a README text announces (file presence left false).
    pub fn from_readme(readme: &str) -> Self {
        Self {
            hist_triggers: readme.contains("hist:keys") || readme.contains("\t    hist"),
            snapshot: readme.contains("snapshot"),
            eprobes: readme.contains("e[:[<group>/][<event>]]"),
            fprobes: readme.contains("f[:[<group>/][<event>]]"),
            tprobes: readme.contains("t[:[<group>/][<event>]]"),
            synthetic: readme.contains("s:[synthetic/]"),
            arg_n: readme.contains("$arg<N>"),
            btf_args: readme.contains("<argname>"),
            comm: readme.contains("$comm"),
            immediates: readme.contains("\\imm-value"),
            ref_ctr_offset: readme.contains("(ref_ctr_offset)"),
            maxactive: readme.contains("r[maxactive]"),
            types: parse_types(readme),
            hist: HistFeatures::from_readme(readme),
            ..Self::default()
        }
    }

    /// Whether the fetch type `ty` (e.g. `u32`, `string`, `symstr`) is listed.
    pub fn has_type(&self, ty: &str) -> bool {
        self.types.iter().any(|t| t == ty)
    }
}

/// Expands the README's `type:` list: `s8/16/32/64` becomes `s8 s16 s32 s64`
/// and `%pd/%pD` becomes `%pd %pD`;
/// templates with `<...>` (bitfields, arrays) are kept verbatim.
fn parse_types(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("type:") else {
            continue;
        };
        let mut text = rest.to_string();
        // Continuation lines are indented and hold no `key:` of their own.
        for next in lines.by_ref() {
            let t = next.trim();
            if t.is_empty() || t.contains(": ") || t.ends_with(':') {
                break;
            }
            text.push(' ');
            text.push_str(t);
        }
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            expand_type(item, &mut out);
        }
        break;
    }
    out
}

fn expand_type(item: &str, out: &mut Vec<String>) {
    if item.contains('<') || !item.contains('/') {
        out.push(item.to_string());
        return;
    }
    // "s8/16/32/64": a letter prefix then sizes.
    let mut parts = item.split('/');
    let first = parts.next().unwrap_or_default();
    let prefix: String = first
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    out.push(first.to_string());
    for size in parts {
        out.push(format!("{prefix}{size}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // cat /sys/kernel/tracing/README on the 6.18 host (uprobes, no kprobes).
    const README_618: &str = include_str!("../fixtures/README.6.18.txt");

    #[test]
    fn host_618_readme() {
        let f = Features::from_readme(README_618);
        assert!(f.eprobes);
        assert!(f.arg_n);
        assert!(f.comm);
        assert!(f.immediates);
        assert!(f.ref_ctr_offset);
        assert!(!f.hist_triggers, "the host kernel has no hist triggers");
        assert_eq!(f.hist, HistFeatures::default());
        for t in [
            "s8", "s64", "u16", "x32", "char", "string", "ustring", "symstr", "symbol", "%pd",
            "%pD",
        ] {
            assert!(f.has_type(t), "missing {t} in {:?}", f.types);
        }
        assert!(f.types.iter().any(|t| t.starts_with("b<bit-width>")));
        assert!(!f.has_type("u128"));
    }

    #[test]
    fn expand_type_table() {
        for (item, want) in [
            ("s8/16/32/64", vec!["s8", "s16", "s32", "s64"]),
            ("string", vec!["string"]),
            ("%pd/%pD", vec!["%pd", "%pD"]),
            ("<type>\\[<array-size>\\]", vec!["<type>\\[<array-size>\\]"]),
        ] {
            let mut out = Vec::new();
            expand_type(item, &mut out);
            assert_eq!(out, want, "{item}");
        }
    }

    #[test]
    fn empty_readme_has_nothing() {
        assert_eq!(Features::from_readme(""), Features::default());
    }
}
