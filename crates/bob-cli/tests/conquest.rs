//! Conquest on bob's emulated persistent memory (issue 15): each cell is recorded in
//! process with two devices (bob's disk and its PM region, two logs), every combined
//! crash state (disk states x PM cache-line cuts, bounded) is checked by mounting it, and
//! the cross replays from its witness with `bob replay --check`, which writes both
//! images. `--max-states` keeps each cell small; docs/researchfs.md has the full runs.

mod util;

use util::{cell, run, run_json, Dir};

#[test]
fn conquest_holds_dir_op_atomic_where_nofence_breaks_it_and_the_witness_replays_both_images() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "conquest,conquest-nofence",
        "dir-op-atomic",
        &["--schedules", "sync", "--max-states", "150"],
    );
    assert_eq!(code, 1, "conquest-nofence fails: {grid}");
    let conquest = cell(&grid, "conquest", "dir-op-atomic");
    assert_eq!(conquest["verdict"], "held", "{conquest}");
    assert!(conquest["states_mounted"].as_u64().unwrap() >= 100, "{conquest}");
    let nofence = cell(&grid, "conquest-nofence", "dir-op-atomic");
    assert_eq!(nofence["verdict"], "violated", "{nofence}");
    assert_eq!(nofence["confirmed"], true, "{nofence}");
    // The witness names a PM cut: the crash is in the PM log, not the disk's.
    let state = nofence["witness_state"].as_str().expect("witness_state");
    assert!(state.contains("+p"), "{state}");
    let witness = nofence["witness"].as_str().expect("witness");
    let wdir = std::path::Path::new(witness);
    assert!(wdir.join("pm.log").exists() && wdir.join("pm-base.img").exists());

    let img = dir.path().join("replayed.img");
    let pm = dir.path().join("replayed.pm");
    let out = run(&[
        "replay",
        "--force",
        witness,
        "--to",
        img.to_str().unwrap(),
        "--pm-out",
        pm.to_str().unwrap(),
        "--check",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "violated", "{v}");
    assert_eq!(v["reproduced"], true, "{v}");
    assert_eq!(v["pm_image"], pm.to_str().unwrap(), "{v}");
    // Both images are written: the PM region is larger than the disk (mirror, placement,
    // redo area) and differs from the recorded base where the cut persisted lines.
    let pm_len = std::fs::metadata(&pm).unwrap().len();
    assert!(pm_len > std::fs::metadata(&img).unwrap().len(), "{pm_len}");
    let base = std::fs::read(wdir.join("pm-base.img")).unwrap();
    assert_ne!(std::fs::read(&pm).unwrap(), base, "the cut persisted some lines");

    // A cut with a line the log never stored is refused, not guessed at.
    let out = run(&[
        "replay",
        "--force",
        witness,
        "--to",
        img.to_str().unwrap(),
        "--state",
        "sync/e0:-+p0:999999",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
