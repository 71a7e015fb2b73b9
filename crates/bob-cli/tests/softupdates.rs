//! Soft updates under bob (issue 15): `softupdates` (write-back with per-update
//! dependencies and roll-back; an update is durable at the flush after its write) against
//! `softupdates-completion` (the same, ordered by write completion only, as on the
//! paper's disks). Each cell is recorded in process on bob's disk, every crash state is
//! mounted (recovery lowers link counts too high, leaks stay), and each cross replays
//! from its witness with `bob replay --check`. docs/researchfs.md has the full table.

mod util;

use util::{cell, replays, run, run_json, Dir};

#[test]
fn softupdates_leave_only_leaks_where_completion_order_breaks() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "softupdates,softupdates-completion",
        "dir-op-atomic,detects-inconsistency",
        &["--schedules", "sync"],
    );
    assert_eq!(code, 1, "softupdates-completion fails: {grid}");

    // The claim: after a crash soft updates leave only leaks. No access returns a wrong
    // result silently in any scenario, and what fsck lists are orphan blocks and inodes.
    let su = cell(&grid, "softupdates", "detects-inconsistency");
    assert!(su["states_mounted"].as_u64().unwrap() > 50, "{su}");
    assert_eq!(su["counts"]["violated"], 0, "{su}");
    let scenarios = su["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), workloads::DETECTION_SCENARIOS.len());
    for s in scenarios {
        assert_eq!(s["silent_states"], 0, "softupdates silent in {s}");
    }
    // The leaks are what the paper promises (soft updates' guarantee profile accepts OB
    // and OI), so the cell holds: an fsck finding of another kind would make it `F`.
    assert_eq!(su["verdict"], "held", "{su}");

    // The negative control: the same write-back without flushes, on a disk whose cache
    // reorders, returns wrong names, link counts and data silently.
    let sc = cell(&grid, "softupdates-completion", "detects-inconsistency");
    assert_eq!(sc["verdict"], "violated", "{sc}");
    let story = sc["story"].as_str().unwrap();
    assert!(
        ["BD", "HL", "GD", "TP"].iter().any(|k| story.starts_with(&format!("silent {k}"))),
        "{story}"
    );
    let silent = sc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["silent_states"].as_u64().unwrap() > 0)
        .count();
    assert!(silent >= 4, "completion order silent in only {silent} scenarios: {sc}");
    replays(&dir, sc);
    // Every per-scenario cross replays from the witness to a silent result.
    let witness = sc["witness"].as_str().unwrap();
    for s in sc["scenarios"].as_array().unwrap() {
        if s["silent_states"].as_u64().unwrap() == 0 {
            continue;
        }
        assert_eq!(s["confirmed"], true, "{s}");
        let id = s["witness_state"].as_str().unwrap();
        let img = dir.path().join("scenario.img");
        let out = run(&[
            "replay",
            "--force",
            witness,
            "--state",
            id,
            "--to",
            img.to_str().unwrap(),
            "--check",
            "--format",
            "json",
        ]);
        assert_eq!(out.status.code(), Some(1), "{s}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let again = v["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["scenario"] == s["scenario"])
            .unwrap()
            .clone();
        assert!(!again["silent"].as_array().cloned().unwrap_or_default().is_empty(), "{id}");
    }

    // dir-op-atomic: the completion-ordered write-back breaks it ...
    let sc = cell(&grid, "softupdates-completion", "dir-op-atomic");
    assert_eq!(sc["verdict"], "violated", "{sc}");
    replays(&dir, sc);
    // ... and soft updates break only the rename across directories, which can leave
    // both names (link count 2), as the paper says of soft updates (§6).
    let su = cell(&grid, "softupdates", "dir-op-atomic");
    assert_eq!(su["verdict"], "violated", "{su}");
    let story = su["story"].as_str().unwrap();
    assert!(story.starts_with("rename /A/f4 /B/r4 (op 4): "), "{story}");
    assert!(story.contains("both name"), "{story}");
    replays(&dir, su);

    // The same workload without that rename: soft updates hold every op atomic (fsck
    // may list leaks), completion order does not.
    let witness = su["witness"].as_str().unwrap();
    let sidecar: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{witness}/trace.json")).unwrap()).unwrap();
    let mut workload = sidecar["workload"].clone();
    let ops = workload["ops"].as_array_mut().unwrap();
    let before = ops.len();
    ops.retain(|o| !(o["op"] == "rename" && o["to"] == "/B/r4"));
    assert_eq!(ops.len(), before - 1);
    workload["name"] = "dir-op-atomic-without-cross-rename".into();
    let file = dir.path().join("workload.json");
    std::fs::write(&file, serde_json::to_vec(&workload).unwrap()).unwrap();
    for (fs, violated) in [("softupdates", false), ("softupdates-completion", true)] {
        let out = run(&[
            "run",
            "--fs",
            fs,
            "--workload",
            file.to_str().unwrap(),
            "--schedules",
            "sync",
            "--format",
            "json",
            "--scratch",
            dir.scratch().to_str().unwrap(),
            "--out",
            dir.path().join(format!("out-{fs}")).to_str().unwrap(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        assert!(v["states_mounted"].as_u64().unwrap() > 10, "{v}");
        if violated {
            assert_eq!(v["verdict"], "violated", "{fs}: {v}");
        } else {
            assert_eq!(v["verdict"], "held", "{fs}: leaks are accepted, nothing else: {v}");
        }
    }
}
