//! Host test: `ktrace bench` on real uprobes — every row's probe was hit
//! exactly once per call (the kernel's own uprobe_profile count, which the
//! bench refuses a row without), every kind × argument count × stack cell
//! is there, and nothing is left in tracefs.

mod common;

use common::{serial, state, tracefs};

#[test]
fn bench_rows_are_counted_by_the_kernel_and_leave_nothing() {
    let Some(root) = tracefs() else { return };
    let _s = serial();
    let child = common::ktrace()
        .args([
            "bench",
            "--kind",
            "uprobe",
            "--kind",
            "uretprobe",
            "--calls",
            "400",
            "--runs",
            "2",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 12, "{rows:?}");
    let mut cells = std::collections::BTreeSet::new();
    for r in &rows {
        // user probes take a quarter of --calls; two runs each
        assert_eq!(r["calls"], 100, "{r}");
        assert_eq!(r["hits"], 200, "{r}");
        let per_call = r["ns_per_call"].as_f64().unwrap();
        let base = r["unprobed_ns_per_call"].as_f64().unwrap();
        assert!(per_call > 0.0 && base > 0.0, "{r}");
        cells.insert((
            r["probe"].as_str().unwrap().to_string(),
            r["args"].as_u64().unwrap(),
            r["stack"].as_bool().unwrap(),
        ));
    }
    assert_eq!(cells.len(), 12);
    // its sessions are named after its pid (other tests may run meanwhile)
    let left = format!("{:?}", state(&root));
    assert!(
        !left.contains(&format!("ktrace_p{pid}_")),
        "bench left something in tracefs: {left}"
    );
}
