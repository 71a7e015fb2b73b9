//! Drain schedules on the real kernel: one workload recorded once per schedule (sync,
//! syncfs, writeback-commit), each its own trace; state ids name their schedule; a state
//! of a non-default schedule replays from its witness.

mod util;

use util::{run, run_cell, Dir};

const SCHEDULES: [&str; 3] = ["sync", "syncfs", "writeback-commit"];

/// States counted in a cell's `counts`, whatever their outcome.
fn counts_sum(c: &serde_json::Value) -> u64 {
    c.as_object()
        .unwrap_or_else(|| panic!("counts: {c}"))
        .values()
        .map(|v| v.as_u64().unwrap_or_else(|| panic!("a count: {v}")))
        .sum()
}

#[test]
fn every_schedule_is_its_own_recording_and_names_its_states() {
    let dir = Dir::new();
    let (_, cell) = run_cell(&dir, "ext4-ordered", "single-block-append", &[]);
    let schedules = cell["schedules"].as_array().expect("the cell lists its schedules");
    let names: Vec<&str> = schedules.iter().map(|s| s["schedule"].as_str().unwrap()).collect();
    assert_eq!(names, SCHEDULES, "the default is all three, in order: {cell}");

    let mut digests: Vec<&str> =
        schedules.iter().map(|s| s["trace_digest"].as_str().unwrap()).collect();
    assert!(digests.iter().all(|d| d.len() == 64), "{digests:?}");
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), 3, "three recordings, three distinct traces: {cell}");

    // Counts add up over the schedules, and each schedule's own counts cover its states.
    let explored: u64 = schedules.iter().map(|s| s["states_explored"].as_u64().unwrap()).sum();
    let unique: u64 = schedules.iter().map(|s| s["states_unique"].as_u64().unwrap()).sum();
    assert_eq!(explored, cell["states_explored"].as_u64().unwrap(), "{cell}");
    assert_eq!(unique, cell["states_unique"].as_u64().unwrap(), "{cell}");
    for s in schedules {
        assert_eq!(counts_sum(&s["counts"]), s["states_explored"].as_u64().unwrap(), "{s}");
        if let Some(first) = s["first_state"].as_str() {
            let prefix = format!("{}/e", s["schedule"].as_str().unwrap());
            assert!(first.starts_with(&prefix), "{first} names its schedule: {s}");
        }
    }
    assert_eq!(counts_sum(&cell["counts"]), explored, "{cell}");
    // sync(2) waits for the data before the commit: the append holds there.
    assert_eq!(schedules[0]["counts"]["violated"], 0, "{cell}");

    // The witness (if any: torn superblock writes fail to mount) names its schedule.
    if let Some(state) = cell["witness_state"].as_str() {
        let schedule = cell["witness_schedule"].as_str().expect("the witness's schedule");
        assert!(SCHEDULES.contains(&schedule), "{cell}");
        assert!(state.starts_with(&format!("{schedule}/e")), "{cell}");
        assert!(cell["story"].as_str().unwrap().contains(state), "{cell}");
        // Every schedule's first failing state replays from the witness, which keeps the
        // trace of each schedule that has one.
        let witness = cell["witness"].as_str().unwrap();
        let img = dir.path().join("replayed.img");
        for s in schedules {
            let Some(first) = s["first_state"].as_str() else { continue };
            let out = run(&[
                "replay",
                "--force",
                witness,
                "--state",
                first,
                "--to",
                img.to_str().unwrap(),
                "--check",
                "--format",
                "json",
            ]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("replay json");
            assert_eq!(v["state"], first, "{v}");
            assert_eq!(v["schedule"], s["schedule"], "{v}");
            assert_eq!(v["outcome"], s["verdict"], "{first} replays to its outcome: {v}");
        }
    }
}

#[test]
fn a_state_of_a_non_default_schedule_replays_from_its_witness() {
    let dir = Dir::new();
    // ext2 has no journal: the append's size and its block share one epoch under every
    // schedule, so some state always loses the block (ext4's syncfs loss is a race; see
    // below). The test needs a failing state, not a particular race.
    let (_, cell) = run_cell(&dir, "ext2", "single-block-append", &["--schedules", "syncfs"]);
    let schedules = cell["schedules"].as_array().unwrap();
    assert_eq!(schedules.len(), 1, "{cell}");
    assert_eq!(schedules[0]["schedule"], "syncfs");
    assert_eq!(cell["verdict"], "violated", "{cell}");
    // The witness is a syncfs state and holds the syncfs trace.
    let witness = cell["witness"].as_str().expect("a failing state to witness");
    let state = cell["witness_state"].as_str().unwrap();
    assert!(state.starts_with("syncfs/e"), "{cell}");
    assert_eq!(cell["witness_schedule"], "syncfs");
    let sidecar: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(witness).join("trace.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(sidecar["schedule"], "syncfs", "the witness saves its own schedule's trace");
    assert_eq!(
        schedules[0]["trace_digest"].as_str().unwrap().len(),
        64,
        "a digest of the recorded trace"
    );

    let image = dir.path().join("replayed.img");
    let img = image.to_str().unwrap();
    let out = run(&[
        "replay", "--force", witness, "--state", state, "--to", img, "--check", "--format", "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("replay json");
    assert_eq!(v["state"], state, "{v}");
    assert_eq!(v["schedule"], "syncfs", "{v}");
    assert_eq!(v["reproduced"], true, "{v}");
    assert_eq!(v["outcome"], cell["verdict"], "{v}");
    assert_eq!(out.status.code(), Some(1));

    // The bare id (as witnesses from before schedules have) is the witness's own schedule.
    let bare = state.trim_start_matches("syncfs/");
    let out =
        run(&["replay", "--force", witness, "--state", bare, "--to", img, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], state, "{v}");

    // A state of another schedule is another recording: one clear line, exit 2.
    let other = format!("sync/{bare}");
    let out = run(&["replay", "--force", witness, "--state", &other, "--to", img]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("syncfs") && err.trim().lines().count() == 1, "{err}");

    // bob explain tells the schedule too.
    let out = run(&["explain", witness, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schedule"], "syncfs", "{v}");
    assert_eq!(v["state"], state, "{v}");
}

/// syncfs(2) lets ext4-ordered commit an append's new size with a still-unwritten extent
/// before the extent conversion (measured: 36 states lose the block), while sync(2)
/// writes the data back first. Which of the two the kernel does is a race of its
/// writeback and commit threads, so a few recordings are allowed to find it. Under sync
/// the append is lost only when background writeback started before the drain's fsync
/// committed (seen once, on a machine at a load average of 14): then as the same zeros.
#[test]
fn syncfs_exposes_a_lost_append_that_sync_rarely_does() {
    let dir = Dir::new();
    for attempt in 0..10 {
        let (_, cell) = run_cell(
            &dir,
            "ext4-ordered",
            "single-block-append",
            &["--schedules", "sync,syncfs", "--strategy", "default", "-j", "2"],
        );
        let s = cell["schedules"].as_array().unwrap();
        assert_eq!(s[0]["schedule"], "sync");
        if s[0]["counts"]["violated"].as_u64().unwrap() > 0 {
            let d = &cell["discrepancy"];
            assert_eq!(d["kind"], "not-atomic", "only as zeros: {cell}");
            assert_eq!(d["sector"]["found"]["class"], "zero", "only as zeros: {cell}");
        }
        if s[1]["counts"]["violated"].as_u64().unwrap() > 0 {
            assert_eq!(cell["verdict"], "violated", "{cell}");
            assert_eq!(cell["witness_schedule"], "syncfs", "{cell}");
            assert!(cell["witness_state"].as_str().unwrap().starts_with("syncfs/"), "{cell}");
            assert_eq!(cell["confirmed"], true, "{cell}");
            eprintln!("syncfs lost the append on attempt {attempt}: {}", s[1]["counts"]);
            return;
        }
    }
    panic!("ten syncfs recordings never lost the append: the race never went that way");
}

/// A multi-block cell says how many barriers its op's own writes spanned: the op must
/// cross commits for the cell to test what it claims (else it is `not-exercised`).
fn multi_block_spans_barriers(fs: &str) {
    let dir = Dir::new();
    let (_, cell) = run_cell(
        &dir,
        fs,
        "multi-block-prefix-append",
        &["--schedules", "sync,syncfs", "--max-states", "25", "--strategy", "original"],
    );
    let barriers = cell["op_barriers"].as_u64().expect("the cell reports op_barriers");
    assert!(barriers >= 2, "{fs}: the append spanned {barriers} barrier(s): {cell}");
    assert_ne!(cell["verdict"], "not-exercised", "{cell}");
    assert!(cell.get("not_exercised").is_none(), "{cell}");
    for s in cell["schedules"].as_array().unwrap() {
        assert!(s["op_barriers"].as_u64().unwrap() >= 1, "{fs}: every schedule's op spans: {s}");
    }
    // The text form says it too.
    let out = run(&[
        "run",
        "--fs",
        fs,
        "--property",
        "multi-block-prefix-append",
        "--schedules",
        "sync",
        "--max-states",
        "5",
        "--scratch",
        dir.scratch().to_str().unwrap(),
        "--out",
        dir.out().to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("op barriers: the judged op's writes spanned"), "{text}");
    assert!(text.contains("schedule sync"), "{text}");
}

#[test]
fn multi_block_reports_barriers_on_ext4_ordered() {
    multi_block_spans_barriers("ext4-ordered");
}

#[test]
fn multi_block_reports_barriers_on_xfs() {
    multi_block_spans_barriers("xfs");
}
