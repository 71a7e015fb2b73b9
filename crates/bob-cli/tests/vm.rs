//! Other kernels: bob's checks in a virtual machine booted from Debian's kernels
//! (`--kernel debian:6.12`). Sized for emulation (TCG: a boot takes 15-45 s here and
//! kernel work runs 20-35x slower), one boot per test. `scripts/setup-vm.sh` installs
//! what they need; under CI=true a missing piece fails them, elsewhere they say so and
//! pass nothing off as tested.

mod util;

use std::path::Path;

/// One guest at a time: two cores emulate one guest slowly enough, and "no qemu left"
/// is only a fact about this test when no other test's guest is running.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_guest() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the VM backend's tools are here: under CI=true their absence is a failure.
fn vm_tools() -> bool {
    let vng = std::env::var_os("BOB_VNG").is_some()
        || Path::new("/opt/bob-vm-venv/bin/vng").exists()
        || std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("vng").exists()));
    let qemu = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("qemu-system-x86_64").exists()));
    if vng && qemu {
        return true;
    }
    let missing = "virtme-ng (vng) or qemu-system-x86_64 is missing: run scripts/setup-vm.sh";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{missing}");
    }
    eprintln!("NOT TESTED: {missing}");
    false
}

/// qemu processes still running for a control directory of bob's (shared with the guest
/// as a 9p directory `TMP/bob-vm-*`).
fn guests_left() -> Vec<String> {
    let control = format!("path={}/bob-vm-", std::env::temp_dir().display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("qemu-system") && c.contains(&control))
        .collect()
}

#[test]
fn a_cell_checked_in_a_debian_guest_pins_a_kernel_crash_on_its_state_and_goes_on() {
    if !vm_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    // A research design needs no kernel file system, so the guest's work is the engine's
    // alone; the hook panics the guest kernel as the second distinct state recovers.
    let run = guest_run(
        &dir,
        // One recording: the hook would crash each recording of the violated schedule.
        &["--vm-accel", "auto", "--fs", "orderless", "--recordings", "1"],
        &[("BOB_TEST_CRASH_KERNEL_AT", "1")],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("checked on 6.12."), "the guest's kernel is named: {stderr}");
    // One boot, then one after the crash; with another state in flight at the crash,
    // one more: both become suspects, and the one recovered alone crashes again.
    assert!(
        stderr.contains(" 2 boot(s)") || stderr.contains(" 3 boot(s)"),
        "one boot, then one or two after the crash: {stderr}"
    );
    let cell: serde_json::Value = serde_json::from_slice(&run.stdout).expect("the cell's JSON");
    assert_eq!(cell["counts"]["kernel_crash"], 1, "{cell}");
    assert_eq!(run.status.code(), Some(1), "a kernel crash is a failure of a state");
    let witness = cell["kernel_crash_witness"]
        .as_str()
        .map(Path::new)
        .or_else(|| cell["witness"].as_str().map(Path::new))
        .expect("a witness of the crash");
    let console = std::fs::read_to_string(witness.join("console.log")).expect("console log");
    assert!(console.contains("sysrq triggered crash"), "the panic is in the console log");
    let story = std::fs::read_to_string(witness.join("story.txt")).unwrap();
    assert!(story.starts_with("kernel-crash: recovering it crashed the kernel"), "{story}");
    assert!(guests_left().is_empty(), "qemu left running: {:?}", guests_left());
}

/// `bob run --kernel debian:6.12 ... --format json` of single-block-append, one drain
/// schedule, output in `dir`, with `extra` arguments and `env`.
fn guest_run(dir: &util::Dir, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let out = dir.out();
    let mut args = vec![
        "run",
        "--kernel",
        "debian:6.12",
        "--property",
        "single-block-append",
        "--schedules",
        "sync",
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    util::run_with_env(&args, env)
}

/// [`guest_run`] under emulation (the probe is the crash test's); the exit code, the cell
/// and bob's stderr.
fn guest_cell(dir: &util::Dir, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut args = vec!["--vm-accel", "tcg"];
    args.extend_from_slice(extra);
    let run = guest_run(dir, &args, &[]);
    let cell = serde_json::from_slice(&run.stdout).unwrap_or_default();
    (run.status.code(), cell, String::from_utf8_lossy(&run.stderr).into_owned())
}

/// What every cell checked in a guest says: the guest's kernel, counts that add up, and a
/// verdict that is a conclusion about the file system, confirmed by an independent replay
/// inside the guest when it is a failure.
fn judged_in_the_guest(code: Option<i32>, cell: &serde_json::Value, stderr: &str) {
    assert!(matches!(code, Some(0) | Some(1)), "a verdict, not an error: {stderr}");
    assert!(cell["kernel"].as_str().is_some_and(|k| k.starts_with("6.12.")), "{cell}");
    let counts = cell["counts"].as_object().expect("counts");
    let sum: u64 = counts.values().filter_map(|v| v.as_u64()).sum();
    assert_eq!(sum, cell["states_explored"].as_u64().unwrap(), "{cell}");
    assert!(cell["states_mounted"].as_u64().unwrap() > 0, "states were recovered: {cell}");
    if cell["witness"].is_string() {
        assert_eq!(cell["confirmed"], true, "a failure is replayed independently: {cell}");
    }
    assert!(guests_left().is_empty(), "qemu left running: {:?}", guests_left());
}

#[test]
fn an_f2fs_cell_is_judged_on_debian_6_12() {
    if !vm_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let (mut code, mut cell, mut stderr) = guest_cell(&dir, &["--fs", "f2fs"]);
    // Seen once in three runs here, under emulation only: the guest kernel oopsed on an
    // int3 outside the recovery of any state (mkfs or the recording), so bob ended with
    // exit 2 as it must. Not yet understood (emulated text patching is suspect): the
    // console is printed for the record and the cell tried once more.
    if stderr.contains("guest kernel crashed outside the recovery") {
        let console = dir.out().join("kernel-crashes/console-last.log");
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        eprintln!("NOTE: the guest kernel crashed; its console's end:");
        for line in tail.into_iter().rev() {
            eprintln!("  {line}");
        }
        (code, cell, stderr) = guest_cell(&dir, &["--fs", "f2fs"]);
    }
    judged_in_the_guest(code, &cell, &stderr);
    assert_eq!(cell["config"], "f2fs");
}

#[test]
fn a_cell_recorded_through_the_kernels_dm_log_writes_is_judged_on_debian_6_12() {
    if !vm_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let (code, cell, stderr) =
        guest_cell(&dir, &["--fs", "ext4-ordered", "--backend", "dm-log-writes"]);
    judged_in_the_guest(code, &cell, &stderr);
    assert_eq!(cell["config"], "ext4-ordered");
}
