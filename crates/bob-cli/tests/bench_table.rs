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
