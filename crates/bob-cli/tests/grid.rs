//! The property table on the real kernel: a reduced grid that covers every configuration,
//! every cross replayed independently, and shards that merge into the unsharded result.

mod util;

use util::{assert_no_leaks, run, run_json, Dir};

const ALL_CONFIGS: &str = "ext2,ext2-sync,ext3-writeback,ext3-ordered,ext3-journal,ext4-writeback,\
ext4-ordered,ext4-nodelalloc,ext4-journal,btrfs,xfs,xfs-wsync,reiserfs,f2fs,nilfs2,jfs";

#[test]
fn reduced_grid_covers_every_configuration_and_every_cross_replays() {
    let dir = Dir::new();
    let out = dir.out();
    let (code, grid) =
        run_json(&dir, "table", ALL_CONFIGS, "single-block-append", &["--max-states", "24"]);
    for key in ["kernel", "tool_version", "configs", "properties", "cells"] {
        assert!(grid.get(key).is_some(), "missing {key}");
    }
    let cells = grid["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 16);
    let mut any_failure = false;
    let mut any_capped = false;
    for cell in cells {
        let name = cell["config"].as_str().unwrap();
        // Whether this kernel has the driver (loading its module if it can) is the
        // configuration's question; where it has none the cell says so and runs nothing.
        let config = bob_core::fs::by_name(name).unwrap();
        if let Err(missing) = config.runs_here() {
            assert_eq!(cell["verdict"], "unavailable", "{name} is listed, not passed");
            assert_eq!(cell["unavailable"], missing.reason().as_str(), "{cell}");
            continue;
        }
        let verdict = cell["verdict"].as_str().unwrap();
        assert!(
            [
                "violated",
                "held",
                "needs-repair",
                "unrecoverable",
                "read-error",
                "fsck-failed",
                "timeout"
            ]
            .contains(&verdict),
            "{cell}"
        );
        assert!(cell["states_explored"].as_u64().unwrap() > 0, "{name} explored nothing: {cell}");
        assert!(cell["seconds"].as_f64().unwrap() > 0.0);
        any_capped |= cell["states_left_out"].as_u64().unwrap_or(0) > 0;
        if let Some(witness) = cell["witness"].as_str() {
            any_failure = true;
            let image = dir.path().join(format!("{name}.img"));
            let replay = run(&[
                "replay",
                "--force",
                witness,
                "--to",
                image.to_str().unwrap(),
                "--check",
                "--format",
                "json",
            ]);
            let v: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
            assert_eq!(
                v["reproduced"], true,
                "{name}: the witness must replay to the same outcome: {v}"
            );
            assert_eq!(v["outcome"], cell["verdict"], "{name}: {v}");
        }
    }
    assert!(any_failure, "ext2 loses an append's data in some state: the grid must show it");
    assert!(any_capped, "a cap of 24 states leaves some out of btrfs' recordings: cells say so");
    assert_eq!(code, 1);
    let html = std::fs::read_to_string(out.join("table.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("single-block-append"));
    assert!(html.contains("href=\"#w1\""), "each cross links to its story");
    let md = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(md.contains("| single-block-append |"));
}

fn as_grid(cell: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "kernel": "k", "tool_version": "v",
        "configs": [cell["config"]], "properties": [cell["property"]],
        "cells": [cell],
    })
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let trace = dir.path().join("trace");
    let s = scratch.to_str().unwrap();
    let base = [
        "--fs",
        "ext4-ordered",
        "--property",
        "single-block-overwrite",
        "--format",
        "json",
        "--scratch",
        s,
    ];
    let cell_of = |extra: &[&str], out: &str| -> serde_json::Value {
        let o = dir.path().join(out);
        let mut args = vec!["run"];
        args.extend_from_slice(&base);
        args.extend_from_slice(&["--out", o.to_str().unwrap()]);
        args.extend_from_slice(extra);
        serde_json::from_slice(&run(&args).stdout).expect("cell json")
    };
    // Record once, so every shard sees the same trace.
    let whole = cell_of(&["--save-trace", trace.to_str().unwrap()], "whole");
    let again = cell_of(&["--trace", trace.to_str().unwrap()], "again");
    assert_eq!(whole["states_explored"], again["states_explored"]);
    let t = trace.to_str().unwrap();
    let mut files = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let cell = cell_of(&["--trace", t, "--shard", &shard], &format!("s{i}"));
        assert_eq!(cell["shard"], shard);
        let f = dir.path().join(format!("shard{i}.json"));
        std::fs::write(&f, as_grid(&cell).to_string()).unwrap();
        files.push(f);
    }
    let mut args = vec!["merge", "--format", "json"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let merged: serde_json::Value = serde_json::from_slice(&run(&args).stdout).unwrap();
    let m = &merged["cells"][0];
    for key in [
        "verdict",
        "states_explored",
        "states_unique",
        "counts",
        "witness_state",
        "witness_position",
    ] {
        assert_eq!(m[key], again[key], "{key}: merged {m} vs unsharded {again}");
    }
    // Per drain schedule too: the saved traces (one directory per schedule) load back as
    // the same recordings, and the shards' shares add up to each schedule's.
    let schedules = again["schedules"].as_array().unwrap();
    assert_eq!(schedules.len(), 3, "{again}");
    assert_eq!(whole["schedules"], again["schedules"], "the same traces, the same states");
    for (a, b) in schedules.iter().zip(m["schedules"].as_array().unwrap()) {
        for key in ["schedule", "trace_digest", "states_explored", "states_unique", "counts"] {
            assert_eq!(a[key], b[key], "{key}: merged {b} vs unsharded {a}");
        }
    }
    assert_no_leaks(&scratch);
}

#[test]
fn merge_rejects_what_is_not_a_table() {
    let dir = Dir::new();
    let f = dir.path().join("x.json");
    std::fs::write(&f, "{\"not\": 1}").unwrap();
    let out = run(&["merge", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("x.json") && err.contains("not a bob table"), "{err}");
}

#[test]
fn explain_tells_what_persisted() {
    let dir = Dir::new();
    let (_, cell) = util::run_cell(&dir, "ext2", "single-block-append", &[]);
    let witness = cell["witness"].as_str().expect("ext2 loses the append in some state");
    let out = run(&["explain", witness, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ops"][0]["state"], "not persisted", "{v}");
    assert!(
        !v["writes_applied_in_crash_epoch"].as_array().unwrap().is_empty()
            || v["earlier_epochs_applied"].as_u64().unwrap() > 0
    );
    let text = run(&["explain", witness]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("not persisted"));
}

/// `bob table` in `dir` with scratch `scratch`, output `out`, JSON on stdout; its exit
/// code and document.
fn table_json(dir: &Dir, out: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let (o, scratch) = (dir.path().join(out), dir.scratch());
    let mut all = vec![
        "table",
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        o.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let res = run(&all);
    let doc = serde_json::from_slice(&res.stdout).unwrap_or(serde_json::Value::Null);
    (res.status.code().unwrap_or(-1), doc)
}

/// Small cells of one recording: one configuration and property, the sync schedule.
const SMALL: [&str; 4] = ["--schedules", "sync", "--max-states", "30"];

#[test]
fn shards_of_one_recorded_set_merge_into_the_unsharded_run() {
    let dir = Dir::new();
    let (fs, property) = ("ext2", "single-block-append");
    let set = dir.path().join("set");
    let s = set.to_str().unwrap();
    // Record once: a trace set, and nothing checked.
    let mut args = vec!["--record-only", "--fs", fs, "--property", property];
    args.extend_from_slice(&SMALL);
    let (code, recorded) = table_json(&dir, "set", &args);
    assert_eq!(code, 0, "{recorded}");
    let digest = recorded["cells"][0]["schedules"][0]["trace_digest"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64, "{recorded}");
    assert!(set.join("traces.json").is_file());
    let trace = set.join("traces/ext2/single-block-append/sync");
    for f in ["trace.log", "trace.json", "base.img"] {
        assert!(trace.join(f).is_file(), "{f} in {}", trace.display());
    }
    assert!(!set.join("table.md").exists(), "record-only checks nothing");

    // The set's cells are the default table; unsharded, then three shards.
    let mut args = vec!["--traces", s];
    args.extend_from_slice(&SMALL);
    let (_, whole) = table_json(&dir, "whole", &args);
    let w = &whole["cells"][0];
    assert_eq!((w["config"].as_str(), w["property"].as_str()), (Some(fs), Some(property)));
    assert_eq!(w["schedules"][0]["trace_digest"], digest.as_str(), "{w}");
    let mut files = Vec::new();
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let mut args = vec!["--traces", s, "--shard", &shard];
        args.extend_from_slice(&SMALL);
        let (_, grid) = table_json(&dir, &format!("s{i}"), &args);
        assert_eq!(grid["cells"][0]["shard"], shard.as_str(), "{grid}");
        let f = dir.path().join(format!("shard{i}.json"));
        std::fs::write(&f, grid.to_string()).unwrap();
        files.push(f);
    }
    let mut args = vec!["merge", "--format", "json"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let merged = run(&args);
    let merged: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    let m = &merged["cells"][0];
    for key in [
        "verdict",
        "states_explored",
        "states_unique",
        "counts",
        "witness_state",
        "witness_position",
        "schedules",
    ] {
        assert_eq!(m[key], w[key], "{key}: merged {m} vs unsharded {w}");
    }
    if w["verdict"] != "held" {
        assert!(m["witness_state"].is_string(), "{m}");
    }

    // `bob run --traces` checks the same recording.
    let mut args = vec!["--traces", s];
    args.extend_from_slice(&SMALL);
    let (_, cell) = util::run_cell(&dir, fs, property, &args);
    for key in ["states_explored", "states_unique", "counts", "schedules"] {
        assert_eq!(cell[key], w[key], "{key}: bob run {cell} vs bob table {w}");
    }

    // A shard of another recording does not merge with these.
    let mut args = vec!["--record-only", "--fs", fs, "--property", property];
    args.extend_from_slice(&SMALL);
    let (code, other) = table_json(&dir, "set2", &args);
    assert_eq!(code, 0, "{other}");
    let other_digest = other["cells"][0]["schedules"][0]["trace_digest"].as_str().unwrap();
    assert_ne!(other_digest, digest, "two recordings of a workload differ (times, ids)");
    let set2 = dir.path().join("set2");
    let mut args = vec!["--traces", set2.to_str().unwrap(), "--shard", "2/3"];
    args.extend_from_slice(&SMALL);
    let (_, foreign) = table_json(&dir, "foreign", &args);
    let f = dir.path().join("foreign.json");
    std::fs::write(&f, foreign.to_string()).unwrap();
    let refused = run(&["merge", files[0].to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for part in ["ext2 / single-block-append", "schedule sync", &digest, other_digest] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(refused.stdout.is_empty(), "nothing merged");
    assert_no_leaks(&dir.scratch());
}

#[test]
fn a_shard_that_would_record_afresh_is_refused() {
    let dir = Dir::new();
    let (code, _) = table_json(&dir, "out", &["--fs", "ext2", "--shard", "1/2"]);
    assert_eq!(code, 2);
    let out = run(&["table", "--fs", "ext2", "--shard", "1/2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--record-only") && err.contains("--traces"), "{err}");
    let out = run(&["run", "--fs", "ext2", "--property", "single-block-append", "--shard", "1/2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trace DIR"));
    assert_no_leaks(&dir.scratch());
}

/// The configurations outside the study's grid where crash bugs of the last decade
/// cluster (ext4 fast commits and asynchronous commits, btrfs nodatacow and zstd, xfs
/// with a minimal log): each records, recovers and is judged, and every cross it shows
/// replays to the same outcome from a fresh image.
#[test]
fn the_configurations_where_crash_bugs_live_run_and_their_crosses_replay() {
    let dir = Dir::new();
    let configs = "ext4-fast-commit,ext4-async-commit,btrfs-nodatacow,btrfs-zstd,xfs-minlog";
    let (_, grid) = run_json(
        &dir,
        "table",
        configs,
        "fsync-durable",
        &["--schedules", "sync", "--max-states", "40"],
    );
    let cells = grid["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5, "{grid}");
    for cell in cells {
        let name = cell["config"].as_str().unwrap();
        let verdict = cell["verdict"].as_str().unwrap();
        assert!(
            ["violated", "held", "needs-repair", "unrecoverable", "read-error", "fsck-failed"]
                .contains(&verdict),
            "{name}: {cell}"
        );
        assert!(cell["states_explored"].as_u64().unwrap() > 0, "{name} explored nothing");
        if let Some(witness) = cell["witness"].as_str() {
            let image = dir.path().join(format!("{name}.img"));
            let args = ["replay", "--force", witness, "--to", image.to_str().unwrap(), "--check"];
            let replay = run(&[&args[..], &["--format", "json"]].concat());
            let v: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
            assert_eq!(v["reproduced"], true, "{name}: {v}");
            assert_eq!(v["outcome"], cell["verdict"], "{name}: {v}");
        }
    }
    assert_no_leaks(&dir.scratch());
}
