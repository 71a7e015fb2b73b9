//! Other kernels as user-mode Linux guests (`--kernel uml:6.1|uml:6.12|uml:7.2`): Debian's
//! UML packages fetched into bob's kernel cache on first use, each booted with no
//! virtualisation (a boot takes about 2 s), bob's checks run inside, and the guest's
//! kernel named in the output. One cell a kernel. `scripts/setup-vm.sh` installs what they
//! need (kmod, patchelf); under CI=true a missing piece fails them, elsewhere they say so
//! and pass nothing off as tested.

mod util;

use std::path::Path;

/// One guest at a time: "no UML kernel left" is only a fact about this test when no other
/// test's guest is running.
static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_guest() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether what a UML guest needs is here (apt to fetch the package, modprobe for its
/// modules, patchelf for a kernel linked against a newer glibc): under CI=true its
/// absence is a failure.
fn uml_tools() -> bool {
    let on_path = |program: &str| {
        std::env::var_os("PATH").is_some_and(|p| {
            std::env::split_paths(&p)
                .chain(["/usr/sbin".into(), "/sbin".into()])
                .any(|d| d.join(program).exists())
        })
    };
    let missing: Vec<&str> = ["apt-get", "dpkg-deb", "modprobe", "patchelf"]
        .into_iter()
        .filter(|p| !on_path(p))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let missing = format!("{} missing: run scripts/setup-vm.sh", missing.join(", "));
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{missing}");
    }
    eprintln!("NOT TESTED: {missing}");
    false
}

/// UML kernels still running for a control directory of this test's bob: their command
/// line names its init script, `TMPDIR/bob-vm-*/init.sh`, and each test gives its bob a
/// temp dir of its own ([`tmpdir`]), so other tests' guests (or a user's) do not count.
fn guests_left(dir: &util::Dir) -> Vec<String> {
    let control = format!("init={}/bob-vm-", tmpdir(dir).display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&control))
        .collect()
}

/// The temp dir of the bob a test runs (where its guests' control directories lie).
fn tmpdir(dir: &util::Dir) -> std::path::PathBuf {
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// `bob ARGS` with the test's own temp dir, and `env`.
fn bob(dir: &util::Dir, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let tmp = tmpdir(dir);
    let mut env = env.to_vec();
    env.push(("TMPDIR", tmp.to_str().unwrap()));
    util::run_with_env(args, &env)
}

/// `bob run --kernel KERNEL --fs FS --property PROPERTY --format json` with output in
/// `dir` and `extra` arguments and `env`: the exit code, the cell and bob's stderr.
fn uml_cell(
    dir: &util::Dir,
    kernel: &str,
    fs: &str,
    property: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, serde_json::Value, String) {
    let out = dir.out();
    let mut args = vec![
        "run",
        "--kernel",
        kernel,
        "--fs",
        fs,
        "--property",
        property,
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = bob(dir, &args, env);
    let cell = serde_json::from_slice(&run.stdout).unwrap_or_default();
    (run.status.code(), cell, String::from_utf8_lossy(&run.stderr).into_owned())
}

/// What every cell checked in a UML guest says: the guest's kernel of `series` by its
/// release and as user-mode Linux, counts that add up, states really recovered, a failure
/// confirmed by an independent replay, and no kernel left running.
fn judged_on(
    dir: &util::Dir,
    series: &str,
    code: Option<i32>,
    cell: &serde_json::Value,
    stderr: &str,
) {
    assert!(matches!(code, Some(0) | Some(1)), "a verdict, not an error: {stderr}");
    let kernel = cell["kernel"].as_str().unwrap_or_default();
    assert!(kernel.starts_with(&format!("{series}.")), "the guest's release: {cell}");
    assert!(kernel.ends_with("(user-mode Linux)"), "the cell says what ran it: {kernel}");
    assert!(
        stderr.contains(&format!("checked on {series}.")) && stderr.contains("user-mode Linux"),
        "the run names the kernel: {stderr}"
    );
    let counts = cell["counts"].as_object().expect("counts");
    let sum: u64 = counts.values().filter_map(|v| v.as_u64()).sum();
    assert_eq!(sum, cell["states_explored"].as_u64().unwrap(), "{cell}");
    assert!(cell["states_mounted"].as_u64().unwrap() > 0, "states were recovered: {cell}");
    if cell["witness"].is_string() {
        assert_eq!(cell["confirmed"], true, "a failure is replayed independently: {cell}");
    }
    assert!(guests_left(dir).is_empty(), "UML kernels left running: {:?}", guests_left(dir));
}

#[test]
fn a_btrfs_cell_is_judged_on_uml_7_2_the_newest_kernel() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let (code, cell, stderr) = uml_cell(&dir, "uml:7.2", "btrfs", "append-then-rename", &[], &[]);
    judged_on(&dir, "7.2", code, &cell, &stderr);
    assert_eq!(cell["config"], "btrfs");
    // Every drain schedule ran in the guest, each with its own recording.
    assert_eq!(cell["schedules"].as_array().map(Vec::len), Some(3), "{cell}");
}

#[test]
fn an_ext4_cell_is_judged_on_uml_6_12() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let (code, cell, stderr) = uml_cell(
        &dir,
        "uml:6.12",
        "ext4-ordered",
        "single-block-append",
        &["--schedules", "sync"],
        &[],
    );
    judged_on(&dir, "6.12", code, &cell, &stderr);
    assert_eq!(cell["config"], "ext4-ordered");
}

#[test]
fn a_reiserfs_cell_is_judged_on_uml_6_1_which_this_host_cannot_mount() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let (code, cell, stderr) =
        // Every reiserfs state's mount scans its 32 MiB journal through bob's FUSE disk,
        // about a second a state in a UML guest: a sample of the states shows that the
        // file system runs and is judged.
        uml_cell(
            &dir,
            "uml:6.1",
            "reiserfs",
            "single-block-append",
            &["--schedules", "sync", "--max-states", "6"],
            &[],
        );
    judged_on(&dir, "6.1", code, &cell, &stderr);
    assert_eq!(cell["config"], "reiserfs");
}

#[test]
fn a_uml_kernel_crash_is_pinned_on_its_state_and_the_cell_goes_on() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    // A research design needs no kernel file system; the hook panics the guest kernel as
    // the second distinct state recovers.
    let (code, cell, stderr) = uml_cell(
        &dir,
        "uml:7.2",
        "orderless",
        "single-block-append",
        // One recording: the hook would crash each recording of the violated schedule.
        &["--schedules", "sync", "--recordings", "1"],
        &[("BOB_TEST_CRASH_KERNEL_AT", "1")],
    );
    assert_eq!(code, Some(1), "a kernel crash is a failure of a state: {stderr}");
    assert!(stderr.contains(" 2 boot(s)") || stderr.contains(" 3 boot(s)"), "{stderr}");
    assert_eq!(cell["counts"]["kernel_crash"], 1, "{cell}");
    let witness = cell["kernel_crash_witness"]
        .as_str()
        .map(Path::new)
        .or_else(|| cell["witness"].as_str().map(Path::new))
        .expect("a witness of the crash");
    let console = std::fs::read_to_string(witness.join("console.log")).expect("console log");
    assert!(console.contains("sysrq triggered crash"), "the panic is in the console log");
    assert!(guests_left(&dir).is_empty(), "UML kernels left running: {:?}", guests_left(&dir));
}

#[test]
fn an_unknown_uml_series_is_refused_before_anything_is_fetched() {
    let out = util::run(&[
        "run",
        "--kernel",
        "uml:5.4",
        "--fs",
        "ext4-ordered",
        "--property",
        "single-block-append",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("known: uml:6.1, uml:6.12, uml:7.2"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

/// `bob table --kernel uml:6.12 --vm-guests 2 ... --format json --out OUT`, then the same
/// recordings checked whole in one guest (`--traces OUT/guest-traces`): each cell's
/// states must be the same, split or not.
#[test]
fn a_table_spread_over_two_uml_guests_merges_to_the_whole_tables_counts() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let out = dir.out();
    let doc = dir.path().join("doc.md");
    let cells = ["--fs", "ext4-ordered", "--property", "single-block-append,append-then-rename"];
    let mut args = vec!["table", "--kernel", "uml:6.12", "--vm-guests", "2", "--schedules", "sync"];
    args.extend(cells);
    args.extend([
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
        "--doc",
        doc.to_str().unwrap(),
    ]);
    let run = bob(&dir, &args, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(matches!(run.status.code(), Some(0) | Some(1)), "a verdict: {stderr}");
    assert!(stderr.contains("checking it in 2"), "{stderr}");
    let split: serde_json::Value = serde_json::from_slice(&run.stdout).expect("the merged table");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("table.json")).unwrap()).unwrap();
    assert_eq!(split, on_disk, "the printed table is the one written");
    assert!(split["kernel"].as_str().unwrap().ends_with("(user-mode Linux)"), "{split}");
    let text = std::fs::read_to_string(&doc).unwrap();
    assert!(text.contains("(user-mode Linux)"), "the document names the kernel: {text}");
    for shard in ["shard-1-of-2", "shard-2-of-2"] {
        assert!(out.join("ext4-ordered/single-block-append").join(shard).is_dir(), "{shard}");
    }
    let whole_out = dir.path().join("whole");
    let traces = out.join("guest-traces");
    let whole = bob(
        &dir,
        &[
            "table",
            "--kernel",
            "uml:6.12",
            "--traces",
            traces.to_str().unwrap(),
            "--format",
            "json",
            "--out",
            whole_out.to_str().unwrap(),
        ],
        &[],
    );
    let whole: serde_json::Value = serde_json::from_slice(&whole.stdout).expect("the whole table");
    let cells = |t: &serde_json::Value| {
        let mut v: Vec<(String, String, u64, u64, String)> = t["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["config"].as_str().unwrap().to_owned(),
                    c["property"].as_str().unwrap().to_owned(),
                    c["states_explored"].as_u64().unwrap(),
                    c["states_unique"].as_u64().unwrap(),
                    c["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(cells(&split), cells(&whole), "split and whole check the same states");
    assert_eq!(cells(&split).len(), 2);
    assert!(guests_left(&dir).is_empty(), "UML kernels left running: {:?}", guests_left(&dir));
}

/// A user-mode Linux binary of one's own (`--kernel PATH --modules DIR`): here Debian's
/// 6.1 binary and modules, taken from bob's kernel cache as a developer would give a
/// `make ARCH=um` build, are told from a bzImage by their bytes and check a cell.
#[test]
fn a_uml_binary_given_by_path_with_its_modules_checks_a_cell() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    // The package is fetched (or found) through uml:6.1 first.
    let list = bob(&dir, &["list", "--kernel", "uml:6.1", "--format", "json"], &[]);
    assert_eq!(list.status.code(), Some(0), "{}", String::from_utf8_lossy(&list.stderr));
    let cache =
        std::env::var_os("BOB_KERNEL_CACHE").map(std::path::PathBuf::from).unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap()).join(".cache/bob/kernels")
        });
    let package = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("user-mode-linux-6.1um"))
        .max()
        .expect("uml:6.1 in the kernel cache");
    // A copy elsewhere, as a developer's own build would lie.
    let binary = dir.path().join("linux");
    std::fs::copy(package.join("usr/bin/linux.uml"), &binary).unwrap();
    let modules = std::fs::read_dir(package.join("usr/lib/uml/modules"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .next()
        .expect("the modules directory");
    let (code, cell, stderr) = uml_cell(
        &dir,
        binary.to_str().unwrap(),
        "ext4-ordered",
        "single-block-append",
        &["--modules", modules.to_str().unwrap(), "--schedules", "sync"],
        &[],
    );
    judged_on(&dir, "6.1", code, &cell, &stderr);
}

/// Two signals 20 ms apart to a bob whose cell runs in a UML guest (a double Ctrl-C, or
/// `timeout` signalling the pid and then its group): the second no longer kills bob
/// before it has stopped its guest. A UML kernel's processes outlive their parent, so a
/// bob that died of it left the guest running (seen with `pkill -f`, which signalled both
/// bob and the `timeout` that forwarded it).
#[test]
fn a_second_signal_to_a_bob_running_a_uml_guest_leaves_no_kernel_running() {
    use std::time::{Duration, Instant};
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let out = dir.out();
    let child = util::bob()
        .env("TMPDIR", tmpdir(&dir))
        .args(["run", "--kernel", "uml:7.2", "--fs", "btrfs", "--property", "append-then-rename"])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let booted = util::wait_until(Duration::from_secs(300), Duration::from_millis(50), || {
        !guests_left(&dir).is_empty()
    });
    assert!(booted, "no guest kernel started");
    // Into the guest's work: past its boot.
    std::thread::sleep(Duration::from_secs(3));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let term = nix::sys::signal::Signal::SIGTERM;
    nix::sys::signal::kill(pid, term).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    nix::sys::signal::kill(pid, term).unwrap();
    let signalled = Instant::now();
    let run = util::shown("bob run --kernel uml:7.2", child.wait_with_output().unwrap());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(130), "stopped, not killed by the signal: {stderr}");
    assert!(stderr.contains("further signals are ignored"), "{stderr}");
    assert!(signalled.elapsed() < Duration::from_secs(60), "{stderr}");
    assert!(guests_left(&dir).is_empty(), "UML kernels left running: {:?}", guests_left(&dir));
}

/// The recall catalog's entries whose kernels boot in seconds, run as CI can: on Debian's
/// UML 7.2, bob's f2fs punch-hole finding (no kernel has its fix) is found, with the
/// story of its loss, and generic/468's f2fs bug, fixed before 5.10, holds.
#[test]
fn recall_on_uml_7_2_finds_the_open_f2fs_bug_and_holds_where_the_fix_is() {
    if !uml_tools() {
        return;
    }
    let _one = one_guest();
    let dir = util::Dir::new();
    let catalog =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/recall/catalog.json");
    let out = dir.out();
    let run = bob(
        &dir,
        &[
            "bench",
            "--recall",
            "--catalog",
            catalog.to_str().unwrap(),
            "--kernel",
            "uml:7.2",
            "--entry",
            "bob-f2fs-punch-past-eof,cm-r22-f2fs",
            "--format",
            "json",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "every entry as the catalog expects: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    let kernel = &report["kernels"][0];
    assert!(kernel["release"].as_str().unwrap_or_default().starts_with("7.2."), "{kernel}");
    let entry = |id: &str| {
        kernel["entries"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["id"] == id))
            .unwrap_or_else(|| panic!("{id} in {kernel}"))
            .clone()
    };
    let open = entry("bob-f2fs-punch-past-eof");
    assert_eq!((open["known"].as_str(), open["result"].as_str()), (Some("buggy"), Some("found")));
    let story = open["story"].as_str().unwrap_or_default();
    assert!(story.contains("is durable here, but /foo has size"), "the loss: {story}");
    let fixed = entry("cm-r22-f2fs");
    assert_eq!((fixed["known"].as_str(), fixed["result"].as_str()), (Some("fixed"), Some("held")));
    assert_eq!(kernel["summary"]["recall"], 1.0, "{kernel}");
    assert_eq!(kernel["summary"]["precision"], 1.0, "{kernel}");
    assert!(guests_left(&dir).is_empty(), "UML kernels left running: {:?}", guests_left(&dir));
}
