//! recovery-idempotent on the real kernel: a crash state's recovery (the mount's journal
//! or log replay) recorded through bob's FUSE disk as a trace of its own, and every crash
//! state inside it recovered again and judged by the oracle, on ext4 and xfs.

mod util;

use util::{assert_no_leaks, run, Dir};

const WORKLOAD: &str = r#"{"name":"recover-twice","property":null,
 "setup":[{"op":"creat","path":"/drain"},{"op":"mkdir","path":"/A"},
          {"op":"creat","path":"/A/foo"},{"op":"write","path":"/A/foo","offset":0,"len":16384}],
 "ops":[{"op":"creat","path":"/A/bar"},{"op":"write","path":"/A/foo","offset":16384,"len":4096},
        {"op":"fsync","path":"/A/foo"},{"op":"rename","from":"/A/bar","to":"/bar"},{"op":"fsync","path":"/"}],
 "drain":[{"op":"append","path":"/drain","offset":0,"len":4096},{"op":"fsync","path":"/drain"},{"op":"sync"}]}"#;

/// Records `WORKLOAD` on `fs` (sync drain, a few states), keeping its trace in `dir`;
/// returns the trace directory and asserts the run held.
fn record_workload(dir: &Dir, fs: &str, max_states: &str) -> std::path::PathBuf {
    let scratch = dir.scratch();
    let file = dir.path().join("w.json");
    std::fs::write(&file, WORKLOAD).unwrap();
    let trace = dir.path().join("trace");
    let out = run(&[
        "run",
        "--fs",
        fs,
        "--workload",
        file.to_str().unwrap(),
        "--schedules",
        "sync",
        "--save-trace",
        trace.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        dir.out().to_str().unwrap(),
        "--max-states",
        max_states,
    ]);
    assert_eq!(out.status.code(), Some(0), "the workload holds on {fs}");
    trace
}

fn recover_twice(fs: &str) {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let trace = record_workload(&dir, fs, "5");
    // Crash right after each barrier (no write of the epoch applied): some of those
    // states need recovery to replay what was committed.
    let mut replayed = 0;
    for epoch in 1..12 {
        let state = format!("e{epoch}:-");
        let o = run(&[
            "replay",
            trace.to_str().unwrap(),
            "--state",
            &state,
            "--recovery-crashes",
            "--max-states",
            "8",
            "--format",
            "json",
        ]);
        if o.status.code() == Some(2) && String::from_utf8_lossy(&o.stderr).contains("no epoch") {
            break;
        }
        assert_eq!(o.status.code(), Some(0), "{fs} {state}: every second recovery held");
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["verdict"], "held", "{r}");
        assert_eq!(r["first_recovery"], "held", "{r}");
        if r["recovery_writes"].as_u64().unwrap() > 0 {
            assert!(r["states"].as_u64().unwrap() > 0, "{r}");
            replayed += 1;
        }
        if replayed >= 2 {
            break;
        }
    }
    assert!(replayed > 0, "{fs}: no crash state whose recovery wrote anything");
    assert_no_leaks(&scratch);
}

#[test]
fn ext4_recovers_again_from_a_crash_inside_its_journal_replay() {
    recover_twice("ext4-ordered");
}

#[test]
fn xfs_recovers_again_from_a_crash_inside_its_log_replay() {
    recover_twice("xfs");
}

#[test]
fn ext2_has_no_recovery_to_interrupt() {
    let dir = Dir::new();
    let trace = record_workload(&dir, "ext2", "3");
    let o = run(&["replay", trace.to_str().unwrap(), "--state", "e1:-", "--recovery-crashes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("journaling configurations"));
}
