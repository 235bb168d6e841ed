//! `perfetto-vs-trace PFTRACE TRACE`: holds a Perfetto trace that ktrace
//! wrote against the kernel's own `trace` text of the same events, for the
//! real-kernel rig (tests/kernel/run runs it on the host for every
//! `$KTEST_OUT/perfetto/NAME.pftrace` a guest script brings back beside
//! `NAME.trace`, the guest kernel's lines).
//!
//! The trace is decoded by `protoc --decode` against tests/perfetto.proto
//! (Perfetto's field numbers; nothing of ktrace's reader), its interning
//! expanded ([`ktrace_perfetto::protoc_text`]). Each event becomes `NAME
//! field=value ...` (a return probe's event, the end of its entry's slice
//! or an instant named by the entry: `(return) field=value ...`), each
//! kernel line the same (`EVENT: (header)
//! field=value ...`; a trace_marker line `tracing_mark_write: TEXT` is the
//! `print` event with `buf` TEXT and its newline); numbers compare by value
//! (the kernel prints hex for `x` types), strings as bytes. The probe's
//! return address (`__probe_ret_ip`, printed symbolically by the kernel)
//! and a print event's `ip` are left out. The two lists must be equal as
//! multisets (events of two CPUs at the same microsecond may come in
//! either order). Prints `PASS ...` or `FAIL ...` and exits 0, 1 (a
//! disagreement) or 2 (cannot check: no protoc, unreadable input).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pf, txt] = args.as_slice() else {
        eprintln!("usage: perfetto-vs-trace PFTRACE TRACE");
        return ExitCode::from(2);
    };
    let kernel = match std::fs::read(txt) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            println!("SKIP cannot read {txt}: {e}");
            return ExitCode::from(2);
        }
    };
    let decoded = match decode(Path::new(pf)) {
        Ok(t) => t,
        Err(e) => {
            println!("SKIP {e}");
            return ExitCode::from(2);
        }
    };
    if decoded
        .lines()
        .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
    {
        println!("FAIL protoc found fields unknown to Perfetto's schema");
        return ExitCode::from(1);
    }
    let ours = perfetto_events(&decoded);
    let theirs: Vec<String> = kernel.lines().filter_map(kernel_event).collect();
    let count = |v: &[String]| {
        let mut m: BTreeMap<&str, usize> = BTreeMap::new();
        for e in v {
            *m.entry(e.split(' ').next().unwrap_or("")).or_default() += 1;
        }
        m.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (mut a, mut b) = (ours.clone(), theirs.clone());
    a.sort();
    b.sort();
    if theirs.is_empty() {
        println!("FAIL the kernel's trace holds no event");
        return ExitCode::from(1);
    }
    if a != b {
        let only_ours: Vec<&String> = a.iter().filter(|e| !b.contains(e)).take(3).collect();
        let only_theirs: Vec<&String> = b.iter().filter(|e| !a.contains(e)).take(3).collect();
        println!(
            "FAIL {} Perfetto event(s) ({}), {} kernel line(s) ({}); only in Perfetto: \
             {only_ours:?}; only in the kernel's trace: {only_theirs:?}",
            ours.len(),
            count(&ours),
            theirs.len(),
            count(&theirs)
        );
        return ExitCode::from(1);
    }
    println!(
        "PASS {} events, names and values equal to the kernel's trace ({})",
        ours.len(),
        count(&ours)
    );
    ExitCode::SUCCESS
}

/// `protoc --decode` of `pf`, expanded.
fn decode(pf: &Path) -> Result<String, String> {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let input =
        std::fs::File::open(pf).map_err(|e| format!("cannot open {}: {e}", pf.display()))?;
    let out = Command::new("protoc")
        .arg(format!("-I{}", proto.display()))
        .args(["--decode=perfetto.protos.Trace", "perfetto.proto"])
        .stdin(input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("protoc (Debian protobuf-compiler) cannot run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "protoc cannot decode {}: {}",
            pf.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(ktrace_perfetto::protoc_text::expand(
        &String::from_utf8_lossy(&out.stdout),
    ))
}

/// The track events of the expanded text, as `NAME field=value ...`.
fn perfetto_events(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut in_event: Option<usize> = None;
    let (mut name, mut kind) = (String::new(), String::new());
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut ann: Option<(String, String)> = None;
    for l in text.lines() {
        let t = l.trim();
        if let Some(b) = t.strip_suffix(" {") {
            depth += 1;
            if b == "track_event" {
                in_event = Some(depth);
                name.clear();
                kind.clear();
                fields.clear();
            } else if b == "debug_annotations" && in_event.is_some() {
                ann = Some((String::new(), String::new()));
            }
            continue;
        }
        if t == "}" {
            if let Some((k, v)) = ann.take() {
                fields.push((k, v));
            } else if in_event == Some(depth) {
                in_event = None;
                if kind != "TYPE_SLICE_END" || !fields.is_empty() {
                    // a return probe's event: the end of its entry's slice
                    // (no name of its own), or an instant named by the
                    // entry when no slice was open (its entry not among the
                    // events); either way the fields are its own
                    let head = if kind == "TYPE_SLICE_END"
                        || fields.iter().any(|(k, _)| k == "__probe_ret_ip")
                    {
                        "(return)".to_string()
                    } else {
                        name.clone()
                    };
                    out.push(render(&head, &fields));
                }
            }
            depth = depth.saturating_sub(1);
            continue;
        }
        if in_event.is_none() {
            continue;
        }
        let Some((k, v)) = t.split_once(": ") else {
            continue;
        };
        match (&mut ann, k) {
            (Some(a), "name") => a.0 = unquote(v),
            (Some(a), "string_value") => a.1 = unquote(v),
            (Some(a), "int_value" | "uint_value") => a.1 = v.to_string(),
            (Some(a), "bool_value") => a.1 = v.to_string(),
            (None, "name") => name = unquote(v),
            (None, "type") => kind = v.to_string(),
            _ => {}
        }
    }
    out
}

/// One kernel `trace` line as `NAME field=value ...` (`None` for
/// comments and blank lines).
fn kernel_event(line: &str) -> Option<String> {
    if line.trim().is_empty() || line.starts_with('#') {
        return None;
    }
    // `comm-pid [cpu] flags ts: EVENT: rest`: the time stamp ends in ": "
    let after_ts = line.find("]").map(|i| &line[i..])?;
    let (_, rest) = after_ts.split_once(": ")?;
    let (event, body) = rest.split_once(": ").unwrap_or((rest, ""));
    if event == "tracing_mark_write" {
        return Some(render("print", &[("buf".into(), format!("{body}\n"))]));
    }
    // the probe header `(sym+off/size)` or, of a return probe, `(caller
    // <- func)`
    let (header, args) = match body.strip_prefix('(') {
        Some(b) => b
            .split_once(')')
            .map_or(("", ""), |(h, a)| (h, a.trim_start())),
        None => ("", body),
    };
    let event = if header.contains(" <- ") {
        "(return)"
    } else {
        event
    };
    let mut fields = Vec::new();
    let mut s = args;
    while !s.is_empty() {
        let Some((k, v)) = s.split_once('=') else {
            break;
        };
        let (val, next) = if let Some(q) = v.strip_prefix('"') {
            // a quoted string: to the quote before a space or the end
            let end = q
                .match_indices("\" ")
                .map(|(i, _)| i)
                .next()
                .unwrap_or(q.len().saturating_sub(1));
            (q[..end].to_string(), q.get(end + 2..).unwrap_or(""))
        } else {
            let (a, b) = v.split_once(' ').unwrap_or((v, ""));
            (a.to_string(), b)
        };
        fields.push((k.trim().to_string(), val));
        s = next.trim_start();
    }
    Some(render(event, &fields))
}

/// `NAME k=v ...`, numbers as unsigned 64-bit decimal, the fields left
/// out that the two sides show differently.
fn render(name: &str, fields: &[(String, String)]) -> String {
    let mut s = name.to_string();
    for (k, v) in fields {
        if k == "__probe_ret_ip" || (name == "print" && k == "ip") {
            continue;
        }
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(&number(v).map_or_else(|| format!("{v:?}"), |n| n.to_string()));
    }
    s
}

/// A decimal or `0x` hexadecimal number, as the u64 it stores.
fn number(v: &str) -> Option<u64> {
    if let Some(h) = v.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Some(n) = v.strip_prefix('-') {
        return n.parse::<u64>().ok().map(u64::wrapping_neg);
    }
    v.parse().ok()
}

/// A string as protoc prints it (`"..."`, C escapes, octal for other
/// bytes), unescaped.
fn unquote(v: &str) -> String {
    let v = v.strip_prefix('"').unwrap_or(v);
    let v = v.strip_suffix('"').unwrap_or(v);
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = b[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'0'..=b'7' => {
                let mut n = u32::from(c - b'0');
                for _ in 0..2 {
                    if let Some(d @ b'0'..=b'7') = b.get(i) {
                        n = n * 8 + u32::from(d - b'0');
                        i += 1;
                    }
                }
                out.push(n as u8);
            }
            other => out.push(other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
