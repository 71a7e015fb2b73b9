//! xsyncfs and the journal's sync/async variants under bob (issues 14 and 15): each cell
//! is recorded in process on bob's disk through a real FUSE mount, every crash state is
//! checked by mounting it (journal recovery), and each cross is replayed from its witness
//! with `bob replay --check`. docs/researchfs.md has the full table.

mod util;

use util::{cell, replays, run, run_json, Dir};

/// A violated cell, confirmed, replaying to the same outcome.
fn replays_violated(dir: &Dir, c: &serde_json::Value) {
    assert_eq!(c["verdict"], "violated", "{c}");
    replays(dir, c);
}

/// xsyncfs holds output until what precedes it is durable, and its fsync returns at
/// once: its guarantee profile says fsync promises durability before the next output,
/// not at its return, so fsync-durable is never due there (not-exercised; it was
/// violated before the profile); releasing output at once (xsyncfs-eager) is caught; on
/// a kernel file system there is no output file (not-applicable).
#[test]
fn xsyncfs_holds_output_durable_eager_breaks_it_and_fsync_returns_early() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "xsyncfs,xsyncfs-eager,ext4-ordered",
        "output-durable,fsync-durable",
        &["--schedules", "sync"],
    );
    assert_eq!(code, 1, "violations expected: {grid}");
    let held = cell(&grid, "xsyncfs", "output-durable");
    assert_eq!(held["verdict"], "held", "{held}");
    assert!(held["states_mounted"].as_u64().unwrap() >= 40, "{held}");
    // Both outputs were released in some explored state (else the cell is not-exercised).
    let promises = held["promises"].as_array().expect("promises");
    assert_eq!(promises.len(), 2, "{held}");
    assert!(promises.iter().all(|p| p["states"].as_u64().unwrap() > 0), "{held}");
    replays_violated(&dir, cell(&grid, "xsyncfs-eager", "output-durable"));
    let fsync = cell(&grid, "xsyncfs", "fsync-durable");
    assert_eq!(fsync["verdict"], "not-exercised", "{fsync}");
    assert_eq!(fsync["counts"]["violated"], 0, "{fsync}");
    let ext4 = cell(&grid, "ext4-ordered", "output-durable");
    assert_eq!(ext4["verdict"], "not-applicable", "{ext4}");
    assert_eq!(ext4["states_explored"], 0, "{ext4}");
    assert_eq!(cell(&grid, "ext4-ordered", "fsync-durable")["verdict"], "held", "{grid}");
}

/// journal-sync makes every metadata op durable before it returns; journal-async
/// (commits on a timer) loses ops that returned.
#[test]
fn journal_sync_holds_metadata_op_durable_and_journal_async_does_not() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "journal-sync,journal-async",
        "metadata-op-durable",
        &["--schedules", "sync"],
    );
    assert_eq!(code, 1, "journal-async fails: {grid}");
    let sync = cell(&grid, "journal-sync", "metadata-op-durable");
    assert_eq!(sync["verdict"], "held", "{sync}");
    let promises = sync["promises"].as_array().expect("promises");
    assert_eq!(promises.len(), 5, "creat, mkdir, link, rename, unlink: {sync}");
    assert!(promises.iter().all(|p| p["states"].as_u64().unwrap() > 0), "{sync}");
    let not = cell(&grid, "journal-async", "metadata-op-durable");
    assert!(not["story"].as_str().unwrap_or("").contains("returned, but"), "{not}");
    replays_violated(&dir, not);
}

/// `bob list` names the five designs and the two properties.
#[test]
fn list_shows_the_journal_variants_xsyncfs_and_their_properties() {
    let out = run(&["list", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let configs = v["configs"].as_array().unwrap();
    for name in ["journal-async", "journal-sync", "xsyncfs", "xsyncfs-eager", "xsyncfs-async"] {
        let c = configs.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(c["available"], true, "{c}");
        assert_eq!(c["disk"]["adn_requests"], serde_json::Value::Null, "{c}");
    }
    let props = v["properties"].as_array().unwrap();
    for p in ["metadata-op-durable", "output-durable"] {
        let p = props.iter().find(|x| x["name"] == p).unwrap_or_else(|| panic!("{p}"));
        assert_eq!(p["family"], "durability", "{p}");
    }
}
