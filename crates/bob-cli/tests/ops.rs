//! The workload ops the recall catalog needed, recorded on real file systems on the host's
//! kernel through `bob run --workload`: each one's promise holds where the kernel keeps it
//! and is broken where the configuration cannot keep it (the negative controls).

mod util;

use std::path::{Path, PathBuf};
use util::*;

fn recall_workload(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../docs/recall/workloads/{id}.json"))
}

/// `bob run --fs FS --workload FILE --recordings 1 --format json` in `dir`: the exit code
/// and the cell.
fn run_workload(dir: &Dir, fs: &str, file: &Path, tag: &str) -> (i32, serde_json::Value) {
    let out = run(&[
        "run",
        "--fs",
        fs,
        "--workload",
        file.to_str().unwrap(),
        "--recordings",
        "1",
        "--format",
        "json",
        "--scratch",
        dir.scratch().to_str().unwrap(),
        "--out",
        dir.path().join(format!("out-{fs}-{tag}")).to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

/// How many crash states held op `index` to its promise.
fn promised_states(cell: &serde_json::Value, index: u64) -> u64 {
    cell["promises"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["op"]["index"] == index)
        .and_then(|p| p["states"].as_u64())
        .unwrap_or(0)
}

/// An O_SYNC direct write below a delayed buffered write past it (the catalog's cm-r23):
/// ext4 keeps the size the write needs, once it returned; ext4 without barriers does not
/// flush, so the crash states after it lack the write's size.
#[test]
fn a_synchronous_direct_write_is_durable_when_it_returns() {
    let dir = Dir::new();
    let file = recall_workload("cm-r23");
    let (code, held) = run_workload(&dir, "ext4-ordered", &file, "r23");
    assert_eq!((code, held["verdict"].as_str()), (0, Some("held")), "{held}");
    assert!(promised_states(&held, 1) > 0, "the write's promise was due somewhere: {held}");
    let (code, broken) = run_workload(&dir, "ext4-nobarrier", &file, "r23");
    assert_eq!((code, broken["verdict"].as_str()), (1, Some("violated")), "{broken}");
    assert_eq!(broken["discrepancy"]["kind"], "wrong-size", "{broken}");
    assert_eq!(broken["discrepancy"]["ops"], serde_json::json!([1]), "{broken}");
    assert_no_leaks(&dir.scratch());
}

/// A buffered O_DSYNC write that extends a file: its data and the size reaching it.
#[test]
fn a_buffered_o_dsync_write_extends_the_file_durably() {
    let dir = Dir::new();
    let file = dir.path().join("dsync.json");
    let w = serde_json::json!({
        "name": "dsync-append",
        "property": null,
        "setup": [{"op": "creat", "path": "/drain"}, {"op": "creat", "path": "/f"},
                  {"op": "write", "path": "/f", "offset": 0, "len": 4096}],
        "ops": [{"op": "sync-write", "path": "/f", "offset": 4096, "len": 8192,
                 "flag": "o-dsync"},
                {"op": "write", "path": "/f", "offset": 0, "len": 4096}],
        "drain": [{"op": "append", "path": "/drain", "offset": 0, "len": 4096},
                  {"op": "fsync", "path": "/drain"}, {"op": "sync"}]
    });
    std::fs::write(&file, serde_json::to_vec_pretty(&w).unwrap()).unwrap();
    for fs in ["ext4-ordered", "xfs", "btrfs"] {
        let (code, cell) = run_workload(&dir, fs, &file, "dsync");
        assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{fs}: {cell}");
        assert!(promised_states(&cell, 0) > 0, "{fs}: the promise was due: {cell}");
    }
    let (code, cell) = run_workload(&dir, "ext4-nobarrier", &file, "dsync");
    assert_eq!((code, cell["verdict"].as_str()), (1, Some("violated")), "{cell}");
    assert_eq!(cell["discrepancy"]["ops"], serde_json::json!([0]), "{cell}");
    assert_no_leaks(&dir.scratch());
}

/// An unlink, the inode evicted, a fsync (the catalog's cm-r09, fstests generic/106): the
/// eviction runs inside a recording and btrfs, which has the fix, keeps the fsync's
/// promise (the file with one name and one link).
#[test]
fn drop_caches_between_an_unlink_and_a_fsync() {
    let dir = Dir::new();
    let file = recall_workload("cm-r09");
    let (code, cell) = run_workload(&dir, "btrfs", &file, "r09");
    assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{cell}");
    assert!(promised_states(&cell, 4) > 0, "the fsync after the eviction was due: {cell}");
    assert_no_leaks(&dir.scratch());
}

/// Writes `w` (a workload's JSON) into `dir` as `NAME.json`.
fn workload_file(dir: &Dir, w: &serde_json::Value) -> PathBuf {
    let file = dir.path().join(format!("{}.json", w["name"].as_str().unwrap()));
    std::fs::write(&file, serde_json::to_vec_pretty(w).unwrap()).unwrap();
    file
}

fn drain() -> serde_json::Value {
    serde_json::json!([{"op": "append", "path": "/drain", "offset": 0, "len": 4096},
                       {"op": "fsync", "path": "/drain"}, {"op": "sync"}])
}

/// A descriptor kept open across the unlink of its only name, then fsynced through: the
/// name must not come back holding the inode. ext4, xfs and btrfs hold it; ext4 without
/// barriers, whose fsync flushes nothing, shows the name back (`stale-name`).
#[test]
fn a_fsync_through_a_descriptor_kept_across_an_unlink() {
    let dir = Dir::new();
    let file = workload_file(
        &dir,
        &serde_json::json!({
            "name": "fd-fsync-unlinked",
            "property": null,
            "setup": [{"op": "creat", "path": "/drain"}, {"op": "mkdir", "path": "/d"},
                      {"op": "creat", "path": "/d/dummy"},
                      {"op": "write", "path": "/d/dummy", "offset": 0, "len": 4096}],
            "ops": [{"op": "open", "path": "/d/dummy", "fd": "h"},
                    {"op": "unlink", "path": "/d/dummy"},
                    {"op": "fd-fsync", "fd": "h"},
                    {"op": "close", "fd": "h"}],
            "drain": drain()
        }),
    );
    for fs in ["ext4-ordered", "xfs", "btrfs"] {
        let (code, cell) = run_workload(&dir, fs, &file, "unlinked");
        assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{fs}: {cell}");
        assert!(promised_states(&cell, 2) > 0, "{fs}: the fsync was due: {cell}");
    }
    let (code, cell) = run_workload(&dir, "ext4-nobarrier", &file, "unlinked");
    assert_eq!((code, cell["verdict"].as_str()), (1, Some("violated")), "{cell}");
    assert_eq!(cell["discrepancy"]["kind"], "stale-name", "{cell}");
    assert_eq!(cell["discrepancy"]["paths"], serde_json::json!(["/d/dummy"]), "{cell}");
    assert_no_leaks(&dir.scratch());
}

/// Writes through a kept descriptor, a rename of its file, then a fsync through it: the
/// promise follows the inode to its new name.
#[test]
fn a_fsync_through_a_descriptor_follows_a_rename() {
    let dir = Dir::new();
    let file = workload_file(
        &dir,
        &serde_json::json!({
            "name": "fd-fsync-renamed",
            "property": null,
            "setup": [{"op": "creat", "path": "/drain"}, {"op": "mkdir", "path": "/d"},
                      {"op": "creat", "path": "/d/foo"}],
            "ops": [{"op": "open", "path": "/d/foo", "fd": "h"},
                    {"op": "fd-write", "fd": "h", "offset": 0, "len": 8192},
                    {"op": "rename", "from": "/d/foo", "to": "/d/bar"},
                    {"op": "fd-fsync", "fd": "h"},
                    {"op": "close", "fd": "h"}],
            "drain": drain()
        }),
    );
    for fs in ["ext4-ordered", "xfs", "btrfs"] {
        let (code, cell) = run_workload(&dir, fs, &file, "renamed");
        assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{fs}: {cell}");
        assert!(promised_states(&cell, 3) > 0, "{fs}: the fsync was due: {cell}");
    }
    let (code, cell) = run_workload(&dir, "ext4-nobarrier", &file, "renamed");
    assert_eq!((code, cell["verdict"].as_str()), (1, Some("violated")), "{cell}");
    assert_eq!(cell["discrepancy"]["ops"][0], 3, "{cell}");
    assert_no_leaks(&dir.scratch());
}

/// fallocate(KEEP_SIZE) past the end, then fdatasync (the catalog's cm-r22-ext4, fstests
/// generic/468): ext4, xfs and btrfs keep the blocks; ext4 without barriers loses them
/// in the states after the fdatasync (`lost-allocation`), read from the extents.
#[test]
fn blocks_allocated_past_the_end_survive_a_fdatasync() {
    let dir = Dir::new();
    let file = recall_workload("cm-r22-ext4");
    for fs in ["ext4-ordered", "xfs", "btrfs"] {
        let (code, cell) = run_workload(&dir, fs, &file, "r22");
        assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{fs}: {cell}");
        assert!(promised_states(&cell, 3) > 0, "{fs}: the fdatasync was due: {cell}");
    }
    let (code, cell) = run_workload(&dir, "ext4-nobarrier", &file, "r22");
    assert_eq!((code, cell["verdict"].as_str()), (1, Some("violated")), "{cell}");
    assert_eq!(cell["discrepancy"]["kind"], "lost-allocation", "{cell}");
    assert_no_leaks(&dir.scratch());
}

/// Files made, written and removed with no persistence point, under the
/// `creatable-after-recovery` guarantee: ext4 keeps every crash state able to take new
/// names; ext4 without barriers leaves torn metadata in some, where a new directory
/// fails (EBADMSG from a checksum, ENOSPC from a torn bitmap): `not-creatable`, the
/// only promise this workload makes.
#[test]
fn a_crash_state_that_refuses_new_names_is_not_creatable() {
    let dir = Dir::new();
    let mut ops = Vec::new();
    for i in 0..6 {
        ops.push(serde_json::json!({"op": "creat", "path": format!("/d/f{i}")}));
        ops.push(
            serde_json::json!({"op": "write", "path": format!("/d/f{i}"), "offset": 0, "len": 4096}),
        );
    }
    ops.push(serde_json::json!({"op": "mkdir", "path": "/d/sub"}));
    for i in 0..3 {
        ops.push(serde_json::json!({"op": "unlink", "path": format!("/d/f{i}")}));
    }
    let file = workload_file(
        &dir,
        &serde_json::json!({
            "name": "create-after-crash",
            "property": null,
            "setup": [{"op": "creat", "path": "/drain"}, {"op": "mkdir", "path": "/d"}],
            "ops": ops,
            "drain": drain(),
            "guarantees": ["creatable-after-recovery"]
        }),
    );
    let (code, cell) = run_workload(&dir, "ext4-ordered", &file, "create");
    assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{cell}");
    let (code, cell) = run_workload(&dir, "ext4-nobarrier", &file, "create");
    assert_eq!((code, cell["verdict"].as_str()), (1, Some("violated")), "{cell}");
    assert_eq!(cell["discrepancy"]["kind"], "not-creatable", "{cell}");
    let story = cell["story"].as_str().unwrap_or_default();
    assert!(story.starts_with("after recovery, "), "{story}");
    assert_no_leaks(&dir.scratch());
}

/// A file created and fsynced, then, on every recovered state, new files and directories
/// created where the workload's were (the catalog's cm-r26, fstests generic/481, under
/// the `creatable-after-recovery` guarantee): ext4, xfs and btrfs, all with the fix,
/// accept them (`a_crash_state_that_refuses_new_names_is_not_creatable` is the
/// negative control).
#[test]
fn new_names_can_be_created_after_recovery() {
    let dir = Dir::new();
    let file = recall_workload("cm-r26");
    for fs in ["btrfs", "ext4-ordered", "xfs"] {
        let (code, cell) = run_workload(&dir, fs, &file, "r26");
        assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{fs}: {cell}");
        assert!(cell["states_mounted"].as_u64().unwrap_or(0) > 0, "{fs}: {cell}");
    }
    assert_no_leaks(&dir.scratch());
}

/// A symlink renamed and linked back, a descriptor of a file fsynced after its unlink (the
/// catalog's cm-r25, its symlink variant, fstests generic/479): btrfs, with the fix,
/// replays its log and keeps the fsyncs' promises.
#[test]
fn a_linked_symlink_and_a_fsync_through_an_unlinked_descriptor() {
    let dir = Dir::new();
    let (code, cell) = run_workload(&dir, "btrfs", &recall_workload("cm-r25"), "r25");
    assert_eq!((code, cell["verdict"].as_str()), (0, Some("held")), "{cell}");
    assert!(promised_states(&cell, 6) > 0, "the fsync after the unlink was due: {cell}");
    assert_no_leaks(&dir.scratch());
}
