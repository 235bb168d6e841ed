//! Regression: a definition, filter or trigger holding a newline or another
//! control character is rejected and nothing reaches tracefs. Before the fix,
//! `ktrace trace $'p:x PATH:OFF\nx=%ax'` joined the two lines into one
//! definition and created it.

mod common;

use common::{Target, serial, state, tracefs};

#[test]
fn control_characters_are_rejected_and_nothing_is_written() {
    let Some(root) = tracefs() else { return };
    let _guard = serial();
    let target = Target::new("ctlchars");
    let good = target.def("p:ev", "");
    let cases: Vec<Vec<String>> = vec![
        vec![format!("{good}\nx=%ax")],
        vec![format!("{good}\n-:someone/else")],
        vec![format!("{good}\tx=%ax")],
        vec![
            good.clone(),
            "-f".into(),
            "common_pid == 1\ncommon_pid == 2".into(),
        ],
        vec![
            good.clone(),
            "--trigger".into(),
            "traceoff\nstacktrace".into(),
        ],
    ];
    for args in cases {
        let before = state(&root);
        let out = common::ktrace()
            .arg("trace")
            .args(&args)
            .args(["-d", "1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("control character"),
            "{args:?}: no control-character message in: {stderr}"
        );
        // Nothing of this run is left, and nobody else's state changed.
        let after = state(&root);
        assert_eq!(before, after, "{args:?}: tracefs changed\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&target.dir);
}
