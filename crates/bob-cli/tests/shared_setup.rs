//! Shared setup on the real kernel: the cells of one configuration in one `bob table` run
//! make the file system once, and turning the sharing off changes no verdict.

mod util;

use util::{run_json, Dir};

/// `(property, verdict, setup_made, setup_reused)` of each cell of a table.
fn setups(grid: &serde_json::Value) -> Vec<(String, String, u64, u64)> {
    let count = |c: &serde_json::Value, key: &str| c.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
    grid["cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no cells: {grid}"))
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_owned();
            (text("property"), text("verdict"), count(c, "setup_made"), count(c, "setup_reused"))
        })
        .collect()
}

#[test]
fn two_cells_of_one_configuration_make_the_file_system_once() {
    // ext2 loses an unsynced append's data in some state on every run: a verdict that does
    // not depend on the recording's timing, as a held ext4 cell's syncfs recording can.
    // One recording a schedule: a violated schedule is otherwise recorded again (racy
    // cells), and these counts are of the setup, not of the recordings.
    let args = ["--schedules", "sync,syncfs", "--max-states", "12", "--recordings", "1"];
    let properties = "single-block-append,append-then-append";

    let shared_dir = Dir::new();
    let (_, shared) = run_json(&shared_dir, "table", "ext2", properties, &args);
    let shared = setups(&shared);
    assert_eq!(shared.len(), 2, "{shared:?}");
    // Four recordings (two cells x two schedules), one mkfs.
    assert_eq!(shared.iter().map(|c| c.2).sum::<u64>(), 1, "{shared:?}");
    assert_eq!(shared.iter().map(|c| c.3).sum::<u64>(), 3, "{shared:?}");
    assert_eq!((shared[0].2, shared[0].3), (1, 1), "the first cell makes it: {shared:?}");
    assert_eq!((shared[1].2, shared[1].3), (0, 2), "the second reuses it: {shared:?}");

    let own_dir = Dir::new();
    let mut off = args.to_vec();
    off.push("--no-shared-setup");
    let (_, own) = run_json(&own_dir, "table", "ext2", properties, &off);
    let own = setups(&own);
    assert!(own.iter().all(|c| (c.2, c.3) == (2, 0)), "mkfs for every recording: {own:?}");
    let verdicts = |cells: &[(String, String, u64, u64)]| {
        cells.iter().map(|c| (c.0.clone(), c.1.clone())).collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&shared), verdicts(&own));
}

/// A table records the next cell while it checks the current one (record ahead): Ctrl-C
/// in the middle stops both, exits 130 and leaves no loop device, mount or FUSE disk
/// behind. xfs, whose recordings and checked states would share a file system UUID
/// without a fresh one per recording.
#[test]
fn a_table_interrupted_while_recording_ahead_leaves_nothing_behind() {
    use std::time::Duration;
    let dir = Dir::new();
    let scratch = dir.scratch();
    let properties = "single-block-append,append-then-append,single-block-overwrite";
    let mut child = util::bob()
        .args(["table", "--fs", "xfs", "--property", properties, "--format", "json"])
        .args(["--schedules", "sync", "--scratch"])
        .arg(&scratch)
        .arg("--out")
        .arg(dir.out())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        util::wait_until(Duration::from_secs(180), Duration::from_millis(20), || {
            util::checking_states(&scratch)
        }),
        "the table never reached its first cell's states"
    );
    let _ = std::process::Command::new("kill").arg("-2").arg(child.id().to_string()).status();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "an interrupted table is not a verdict");
    util::wait_until(Duration::from_secs(20), Duration::from_millis(50), || {
        util::leaks_under(&scratch).is_empty()
    });
    util::assert_no_leaks(&scratch);
}

/// Record ahead on or off, and two cells checked at once or one at a time (each lane
/// recording its own cells when nothing records ahead), a table reaches the same cells, in
/// table order, on one configuration whose verdicts do not depend on a recording's timing.
#[test]
fn recording_ahead_and_parallel_cells_change_no_verdict() {
    // Every state (39 for append-then-append): a cap of 12 once missed ext2's reordering
    // in a recording made under a load of 12, where writeback came at other times.
    let args = ["--schedules", "sync"];
    // Three cells for two lanes: one lane takes a second cell while the other checks.
    let properties = "single-block-append,append-then-append,single-block-overwrite";
    let verdicts = |grid: &serde_json::Value| -> Vec<(String, String)> {
        setups(grid).into_iter().map(|c| (c.0, c.1)).collect()
    };
    let run = |extra: &[&'static str]| {
        let dir = Dir::new();
        let mut all = args.to_vec();
        all.extend_from_slice(extra);
        let (_, grid) = run_json(&dir, "table", "ext2", properties, &all);
        verdicts(&grid)
    };
    let default = run(&[]);
    let order: Vec<&str> = default.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(order, properties.split(',').collect::<Vec<_>>(), "table order: {default:?}");
    assert_eq!(default, run(&["--no-parallel-cells"]), "one cell at a time");
    assert_eq!(default, run(&["--no-record-ahead"]), "two lanes recording their own cells");
    assert_eq!(
        default,
        run(&["--no-record-ahead", "--no-parallel-cells"]),
        "one cell at a time, each recorded in turn"
    );
}
