//! OptFS and its baselines under bob (issue 14's table, small): each cell is recorded
//! in process on bob's disk (with durability notifications for OptFS), every crash state
//! is checked by mounting it (journal recovery), and each cross is replayed from its
//! witness with `bob replay --check`. `--max-states` keeps each cell to a sample spread
//! over its epochs; docs/researchfs.md has the full runs.

mod util;

use util::{cell, replays, run_json, Dir};

#[test]
fn optfs_holds_osync_prefix_where_nocsum_breaks_and_ext4_does_not_apply() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "optfs,optfs-nocsum,ext4-ordered",
        "osync-prefix",
        &["--schedules", "sync", "--max-states", "400"],
    );
    assert_eq!(code, 1, "optfs-nocsum fails: {grid}");
    let optfs = cell(&grid, "optfs", "osync-prefix");
    assert_eq!(optfs["verdict"], "held", "{optfs}");
    // Every state of the recording (190 explored since the setup is committed before
    // recording starts, so the trace holds the workload only).
    assert!(optfs["states_mounted"].as_u64().unwrap() >= 150, "{optfs}");
    let ext4 = cell(&grid, "ext4-ordered", "osync-prefix");
    assert_eq!(ext4["verdict"], "not-applicable", "{ext4}");
    assert_eq!(ext4["states_explored"], 0, "{ext4}");
    // The negative control: without checksums recovery replays a transaction whose
    // journaled blocks never reached the disk. The sample finds the damage (the root
    // directory unreadable); the full exploration also finds the property violated
    // outright (docs/researchfs.md).
    let nocsum = cell(&grid, "optfs-nocsum", "osync-prefix");
    let failed = ["violated", "read-error", "fsck-failed", "unrecoverable"];
    assert!(failed.contains(&nocsum["verdict"].as_str().unwrap()), "{nocsum}");
    replays(&dir, nocsum);
}

#[test]
fn ext4_without_barriers_loses_what_ext4_ordered_keeps_and_journal_flush_keeps_fsync() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "journal-flush,ext4-nobarrier,ext4-ordered",
        "fsync-durable,append-then-rename",
        &["--schedules", "sync", "--max-states", "60"],
    );
    assert_eq!(code, 1, "ext4-nobarrier fails: {grid}");
    for p in ["fsync-durable", "append-then-rename"] {
        assert_eq!(cell(&grid, "journal-flush", p)["verdict"], "held", "{grid}");
        assert_eq!(cell(&grid, "ext4-ordered", p)["verdict"], "held", "{grid}");
    }
    let nobarrier = cell(&grid, "ext4-nobarrier", "append-then-rename");
    assert_eq!(nobarrier["verdict"], "violated", "{nobarrier}");
    replays(&dir, nobarrier);
}
