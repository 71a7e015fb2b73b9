//! The project's own file systems under bob: `bob run` records a researchfs design in
//! process (real FUSE mount, every block write with its role), checks every crash state by
//! mounting it in process (the design's recovery), and judges "detects its own
//! inconsistency". Every test also asserts that no FUSE mount or loop device is left.

mod util;

use util::{run, run_cell, Dir};

fn silent_states(cell: &serde_json::Value) -> u64 {
    cell["counts"]["violated"].as_u64().expect("counts.violated in the cell")
}

/// No researchfs FUSE mount of this test's own runs is left. Scoped to the test's
/// directory: the tests run in parallel, and another test's live mount is not a leak.
fn no_researchfs_mounts(dir: &Dir) {
    let root = dir.path().to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let left: Vec<&str> =
        mounts.lines().filter(|l| l.contains("researchfs") && l.contains(&root)).collect();
    assert!(left.is_empty(), "researchfs mounts left: {left:#?}");
}

#[test]
fn list_shows_the_research_designs_and_the_detection_property() {
    let out = run(&["list", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["orderless", "nofs", "ordered-core"] {
        let c = v["configs"].as_array().unwrap().iter().find(|c| c["name"] == name);
        assert_eq!(c.map(|c| c["available"].clone()), Some(true.into()), "{name}");
    }
    assert!(v["properties"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "detects-inconsistency"));
}

/// The negative control: the ext2-like design returns wrong results silently, and bob
/// sees it (a silent inconsistency, with the thesis' kind, replayed independently).
#[test]
fn orderless_shows_silent_inconsistencies() {
    let dir = Dir::new();
    let (code, cell) = run_cell(&dir, "orderless", "detects-inconsistency", &[]);
    assert_eq!(code, 1, "{cell}");
    assert_eq!(cell["verdict"], "violated");
    assert!(silent_states(&cell) > 0);
    let story = cell["story"].as_str().unwrap();
    assert!(
        ["BD", "HL", "GD", "TP"].iter().any(|k| story.starts_with(&format!("silent {k}"))),
        "{story}"
    );
    assert_eq!(cell["confirmed"], true);
    no_researchfs_mounts(&dir);
}

/// NoFS on the same workload and crash states: its checks turn most of what orderless
/// returns silently into errors.
#[test]
fn nofs_detects_what_orderless_returns_silently() {
    let dir = Dir::new();
    let (_, orderless) = run_cell(&dir, "orderless", "detects-inconsistency", &[]);
    let (_, nofs) = run_cell(&dir, "nofs", "detects-inconsistency", &[]);
    assert!(nofs["states_explored"].as_u64().unwrap() > 0, "{nofs}");
    assert!(
        silent_states(&nofs) * 10 < silent_states(&orderless),
        "nofs {} silent states vs orderless {}",
        silent_states(&nofs),
        silent_states(&orderless)
    );
    no_researchfs_mounts(&dir);
}

/// The claim for NoFS: no silent inconsistency in any explored state. It first
/// failed (a reused inode passed the backpointer checks: a silent TP in delete-create);
/// generation numbers in entries, back links and backpointers fixed it (docs/researchfs.md).
#[test]
fn nofs_shows_no_silent_inconsistency() {
    let dir = Dir::new();
    let (code, cell) = run_cell(&dir, "nofs", "detects-inconsistency", &[]);
    assert_eq!(silent_states(&cell), 0, "{cell}");
    assert_eq!(code, if cell["verdict"] == "held" { 0 } else { 1 });
    no_researchfs_mounts(&dir);
}
