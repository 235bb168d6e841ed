//! Print the kernel engine's setup and teardown for one request, one write
//! per line (`WHERE<TAB>FILE<TAB>TEXT`, WHERE = `top` for the tracefs root
//! or `inst` for ktrace's instance), so a guest script can install exactly
//! what the crate generates (fixtures/plan-check.sh).
//!
//! Usage:
//!   plan README latency UNIT log2|STEP SYSTEM ENTRY RETURN FUNC PREFIX [KEY...] [--prometheus]
//!   plan README count SYSTEM EVENT FUNC [KEY...]
//!   plan README hist SYSTEM EVENT FUNC FIELD:KIND log2|STEP [KEY...]
//! then `--teardown` as the last argument for the removal lines (after
//! `--prometheus`, which adds a latency's nanosecond table).

use ktrace_aggregate::kernel::{
    Features, KernelPlan, LatencyProbe, ProbeEvent, Step, plan_count, plan_hist, plan_latency,
};
use ktrace_aggregate::{FieldInfo, FieldKind, KeySpec, Scale, Unit};
use std::process::ExitCode;

fn scale(s: &str) -> Result<Scale, String> {
    if s == "log2" {
        return Ok(Scale::Log2);
    }
    let step: u64 = s.parse().map_err(|_| format!("bad scale '{s}'"))?;
    Scale::linear(step).map_err(|e| e.to_string())
}

fn keys(args: &[String], fields: &[FieldInfo]) -> Result<Vec<KeySpec>, String> {
    KeySpec::parse_all(args, "probe", fields).map_err(|e| e.to_string())
}

fn print(plan: &KernelPlan, teardown: bool, file_api: bool) {
    let steps = if teardown {
        plan.teardown()
    } else {
        plan.setup.clone()
    };
    for s in &steps {
        let text = if teardown {
            s.remove_text(file_api)
        } else {
            s.install_text(file_api)
        };
        match s {
            Step::Synthetic { .. } => {
                let file = if file_api {
                    "synthetic_events"
                } else {
                    "dynamic_events"
                };
                println!("top\t{file}\t{text}");
            }
            Step::Trigger { system, event, .. } => {
                println!("inst\tevents/{system}/{event}/trigger\t{text}")
            }
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let teardown = args.last().is_some_and(|a| a == "--teardown");
    if teardown {
        args.pop();
    }
    let prometheus = args.last().is_some_and(|a| a == "--prometheus");
    if prometheus {
        args.pop();
    }
    let readme =
        std::fs::read_to_string(args.first().ok_or("no README")?).map_err(|e| e.to_string())?;
    let f = Features::from_readme(&readme);
    let file_api = !f.synthetic_dynamic;
    let a = &args[1..];
    match a.first().map(String::as_str) {
        Some("latency") if a.len() >= 8 => {
            let unit = Unit::parse(&a[1]).map_err(|e| e.to_string())?;
            let p = LatencyProbe {
                system: a[3].clone(),
                entry_event: a[4].clone(),
                return_event: a[5].clone(),
                func: a[6].clone(),
            };
            let plan = plan_latency(
                &p,
                &a[7],
                unit,
                scale(&a[2])?,
                &keys(&a[8..], &[])?,
                &f,
                prometheus,
            )
            .map_err(|u| u.reason)?;
            print(&plan.plan, teardown, file_api);
        }
        Some("count") if a.len() >= 4 => {
            let ev = ProbeEvent {
                system: a[1].clone(),
                event: a[2].clone(),
                func: a[3].clone(),
                fields: vec![],
                user: false,
            };
            let plan = plan_count(&[ev], &keys(&a[4..], &[])?, &f, None).map_err(|u| u.reason)?;
            print(&plan.plan, teardown, file_api);
        }
        Some("hist") if a.len() >= 6 => {
            let (name, kind) = a[4].split_once(':').ok_or("FIELD:KIND")?;
            let kind = match kind {
                "u" => FieldKind::Unsigned,
                "s" => FieldKind::Signed,
                _ => FieldKind::String,
            };
            let fields = vec![FieldInfo::new(name, kind)];
            let ev = ProbeEvent {
                system: a[1].clone(),
                event: a[2].clone(),
                func: a[3].clone(),
                fields: fields.clone(),
                user: false,
            };
            let plan = plan_hist(
                &ev,
                name,
                scale(&a[5])?,
                &keys(&a[6..], &fields)?,
                &f,
                false,
            )
            .map_err(|e| e.to_string())?
            .map_err(|u| u.reason)?;
            print(&plan.plan, teardown, file_api);
        }
        _ => return Err("usage: see the source".into()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plan: {e}");
            ExitCode::FAILURE
        }
    }
}
