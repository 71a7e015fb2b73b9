//! Fixture layer for the CLI tests: run the real `bob` binary against real loop devices
//! and mounts, each run in its own scratch and output directory, and check afterwards
//! that it left nothing behind.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A test's private directories; removed on drop.
pub struct Dir {
    pub root: tempfile::TempDir,
}

impl Default for Dir {
    fn default() -> Self {
        Self::new()
    }
}

impl Dir {
    pub fn new() -> Dir {
        assert!(
            nix_is_root(),
            "these tests bind loop devices and mount images: run them as root (scripts/test.sh)"
        );
        Dir { root: tempfile::Builder::new().prefix("bob-test-").tempdir().expect("tempdir") }
    }
    pub fn scratch(&self) -> PathBuf {
        let p = self.root.path().join("scratch");
        std::fs::create_dir_all(&p).unwrap();
        p
    }
    pub fn out(&self) -> PathBuf {
        self.root.path().join("out")
    }
    pub fn path(&self) -> &Path {
        self.root.path()
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The `bob` binary under test.
pub fn bob() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bob"))
}

/// `bob run --fs FS --property PROPERTY --format json` with scratch and output in `dir`,
/// plus `extra`, as a command to spawn (stdout discarded), with `BOB_STATE_DIR` set to
/// `state_dir` if given: for tests that signal or kill bob mid-run.
pub fn run_command(
    dir: &Dir,
    fs: &str,
    property: &str,
    extra: &[&str],
    state_dir: Option<&Path>,
) -> Command {
    let mut cmd = bob();
    if let Some(state) = state_dir {
        cmd.env("BOB_STATE_DIR", state);
    }
    cmd.args(["run", "--fs", fs, "--property", property, "--format", "json", "--scratch"])
        .arg(dir.scratch())
        .arg("--out")
        .arg(dir.out())
        .args(extra)
        .stdout(std::process::Stdio::null());
    cmd
}

/// Polls `done` every `every` until it holds or `timeout` has passed; whether it held.
pub fn wait_until(
    timeout: std::time::Duration,
    every: std::time::Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(every);
    }
    done()
}

/// Whether bob is checking crash states under `scratch` (a loop device bound to a state
/// view): the moment the interruption tests wait for.
pub fn checking_states(scratch: &Path) -> bool {
    leaks_under(scratch).iter().any(|l| l.contains("state-"))
}

/// Runs bob, printing everything on failure of the caller's assertions.
pub fn run(args: &[&str]) -> Output {
    run_with_env(args, &[])
}

/// [`run`] with environment variables set (the test-only hooks, `BOB_TEST_FAIL_STATE`).
pub fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = bob().args(args).envs(env.iter().copied()).output().expect("run bob");
    shown(&format!("bob {}", args.join(" ")), out)
}

/// `out` of the command `what`, after printing both for the caller's failed assertions.
pub fn shown(what: &str, out: Output) -> Output {
    eprintln!(
        "$ {what}\n-- exit {:?}\n-- stdout\n{}\n-- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `bob run --format json` of one cell in `dir`; returns the exit code and the cell.
pub fn run_cell(dir: &Dir, fs: &str, property: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    run_json(dir, "run", fs, property, extra)
}

/// `bob <command> --fs FS --property PROPERTY --format json` with scratch and output in
/// `dir` (`run` or `table`); returns the exit code and the printed JSON, after checking
/// that nothing is left in the scratch directory.
pub fn run_json(
    dir: &Dir,
    command: &str,
    fs: &str,
    property: &str,
    extra: &[&str],
) -> (i32, serde_json::Value) {
    run_json_with_env(dir, command, fs, property, extra, &[])
}

/// [`run_json`] with environment variables set.
pub fn run_json_with_env(
    dir: &Dir,
    command: &str,
    fs: &str,
    property: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, serde_json::Value) {
    let scratch = dir.scratch();
    let out_dir = dir.out();
    let mut args = vec![
        command,
        "--fs",
        fs,
        "--property",
        property,
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_with_env(&args, env);
    let code = out.status.code().unwrap_or(-1);
    let cell = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    assert_no_leaks(&scratch);
    (code, cell)
}

/// Loop devices whose backing file lies under `dir`, and mounts at or below it.
pub fn leaks_under(dir: &Path) -> Vec<String> {
    use bob_core::device::mounts;
    let loops = mounts::loops_below(dir)
        .into_iter()
        .map(|l| format!("{} -> {}", l.device.display(), l.backing.display()));
    let mounted = mounts::mountinfo().into_iter().filter(|m| m.mount_point.starts_with(dir));
    loops
        .chain(mounted.map(|m| {
            format!("mount {} on {}", m.source.to_string_lossy(), m.mount_point.display())
        }))
        .collect()
}

pub fn assert_no_leaks(dir: &Path) {
    let leaks = leaks_under(dir);
    assert!(leaks.is_empty(), "bob left these behind under {}: {leaks:#?}", dir.display());
    // The scratch dir itself must be empty: bob removes its bob-XXXX work dirs.
    if let Ok(rd) = std::fs::read_dir(dir) {
        let left: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "bob left scratch files: {left:?}");
    }
}

/// The cell of `config` and `property` in a table's JSON.
pub fn cell<'a>(
    grid: &'a serde_json::Value,
    config: &str,
    property: &str,
) -> &'a serde_json::Value {
    grid["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .find(|c| c["config"] == config && c["property"] == property)
        .unwrap_or_else(|| panic!("no cell {config} / {property} in {grid}"))
}

/// A crossed cell is confirmed by bob and replays from its witness to the same outcome;
/// the replay's JSON.
pub fn replays(dir: &Dir, c: &serde_json::Value) -> serde_json::Value {
    assert_eq!(c["confirmed"], true, "{c}");
    let witness = c["witness"].as_str().expect("witness");
    let state = c["witness_state"].as_str().expect("witness_state");
    let img = dir.path().join("replayed.img");
    let out = run(&[
        "replay",
        "--force",
        witness,
        "--state",
        state,
        "--to",
        img.to_str().unwrap(),
        "--check",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["recorded_outcome"], c["verdict"], "{v}");
    v
}
