//! `bob bench --table` on the real kernel: a one-cell table timed with the engine's
//! shortcuts on and off. Speed is measured, never asserted: only that both runs were
//! timed and the ratio is a positive number.

mod util;

use util::{assert_no_leaks, run, Dir};

#[test]
fn a_small_table_reports_both_timings_and_a_speedup() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out = run(&[
        "bench",
        "--table",
        "--fs",
        "ext2",
        "--property",
        "single-block-append",
        "--max-states",
        "5",
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert!(report["table_speedup"].as_f64().unwrap() > 0.0, "{report}");
    for (run, made, reused) in [("optimised", 1, 2), ("baseline", 3, 0)] {
        let r = &report[run];
        assert!(r["seconds"].as_f64().unwrap() > 0.0, "{run}: {r}");
        assert!(r["states_per_s"].as_f64().unwrap() > 0.0, "{run}: {r}");
        assert_eq!(r["cells"], 1, "{run}: {r}");
        // Three drain schedules, one recording each.
        assert_eq!(
            (r["setup_made"].as_u64(), r["setup_reused"].as_u64()),
            (Some(made), Some(reused))
        );
    }
    assert_eq!(report["baseline"]["speedups"]["fsck"], "always");
    assert_eq!(report["optimised"]["speedups"]["shared_setup"], true);
    assert_eq!(report["max_states"], 5);
    assert_no_leaks(&scratch);
}

#[test]
fn several_configurations_need_the_table() {
    let out = run(&["bench", "--fs", "ext2,xfs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--table"));
}

/// Issue 30: `--full` times the table four ways over both disk models, and names the
/// configurations this kernel cannot run instead of failing on them (reiserfs left Linux
/// in 6.13). A tiny table: one configuration that runs, one property, 5 states a cell.
#[test]
fn the_full_table_times_four_phases_over_both_disk_models() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out = run(&[
        "bench",
        "--table",
        "--full",
        "--fs",
        "ext2,reiserfs",
        "--property",
        "single-block-append",
        "--max-states",
        "5",
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["configs"], serde_json::json!(["ext2"]), "{report}");
    let skipped = report["skipped"].as_array().unwrap();
    assert!(skipped.len() == 1 && skipped[0].as_str().unwrap().starts_with("reiserfs: "));
    assert_eq!(report["disk_models"].as_array().unwrap().len(), 2, "{report}");
    // Three drain schedules, one recording each.
    assert_eq!(report["recording"]["recordings"], 3, "{report}");
    assert!(report["recording"]["seconds"].as_f64().unwrap() > 0.0);
    for phase in ["from_recordings", "with_recording"] {
        let r = &report[phase];
        assert_eq!(r["cells"], 2, "{phase}: one cell per disk model: {r}");
        assert!(r["seconds"].as_f64().unwrap() > 0.0, "{phase}: {r}");
        assert!(r["states_explored"].as_u64().unwrap() > 0, "{phase}: {r}");
    }
    let sample = &report["sample"];
    assert_eq!(sample["cells"], 2, "{sample}");
    assert!(sample["speedup"].as_f64().unwrap() > 0.0, "{sample}");
    assert_eq!(sample["differing_cells"], serde_json::json!([]), "same recordings: {sample}");
    assert_eq!(report["load_average"].as_array().unwrap().len(), 4);
    assert_eq!(report["target_met"], true, "a one-cell table takes seconds: {report}");
    assert_no_leaks(&scratch);
}
