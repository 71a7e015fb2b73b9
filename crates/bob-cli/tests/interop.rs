//! Interop end to end, on the real kernel: dm-log-writes logs in and out of bob
//! byte-exactly, replay-log's verbs, blktrace/blkparse decoding, the dm-log-writes backend's
//! refusal where device-mapper is absent, and bring-your-own-workload recording and
//! checking with the SQLite and rename examples in reduced form. Everything is asserted
//! through what bob reports or writes.

mod util;

use std::path::{Path, PathBuf};

use util::{assert_no_leaks, run, Dir};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bob_path() -> &'static str {
    env!("CARGO_BIN_EXE_bob")
}

/// `bob record --fs ext4-ordered` of a shell command into `dir/name`.
fn record(dir: &Dir, name: &str, script: &str, extra: &[&str]) -> PathBuf {
    let out = dir.path().join(name);
    let scratch = dir.scratch();
    let mut args = vec![
        "record",
        "--fs",
        "ext4-ordered",
        "--out",
        out.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let o = util::bob().env("BOB", bob_path()).args(&args).output().unwrap();
    eprintln!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "bob record failed");
    assert_no_leaks(&scratch);
    out
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("json output")
}

const SMALL_WORKLOAD: &str = "echo hello > a; sync; \"$BOB\" mark 'commit 1'; \
     echo world > b; sync b; sync; \"$BOB\" mark 'commit 2'; echo more > c";

#[test]
fn round_trip_bob_log_bob_is_byte_exact() {
    let dir = Dir::new();
    let t = record(&dir, "t", SMALL_WORKLOAD, &[]);
    let again = dir.path().join("again");
    let base = t.join("base.img");
    let o = run(&[
        "import",
        t.join("trace.log").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "--base",
        base.to_str().unwrap(),
        "--fs",
        "ext4-ordered",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read(t.join("trace.log")).unwrap(),
        std::fs::read(again.join("trace.log")).unwrap(),
        "the imported log differs from the one bob wrote"
    );
    let v = json(&o);
    assert!(v["marks"].as_u64().unwrap() >= 3, "{v}");
    assert!(v["flushes"].as_u64().unwrap() >= 1, "{v}");
    // And the re-imported trace is checkable as it is (same base, same config).
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("trace.json")).unwrap()).unwrap();
    assert_eq!(sidecar["config"], "ext4-ordered");
    assert_eq!(
        sidecar["base_image"]["blake3"],
        bob_core::files::file_digest(&base).unwrap().as_str()
    );
}

#[test]
fn kernel_format_fixture_imports_and_lists_as_expected() {
    let dir = Dir::new();
    let fixture = root().join("fixtures/logs/small.log");
    let out = dir.path().join("imp");
    let o = run(&["import", fixture.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no base image"));
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("trace.json")).unwrap()).unwrap();
    assert_eq!(sidecar["base_image"]["file"], "", "the sidecar says the base is absent");
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/logs/small.expected.json")).unwrap(),
    )
    .unwrap();
    let listed = json(&run(&["log", out.to_str().unwrap(), "--list", "--format", "json"]));
    let want = expected["entries"].as_array().unwrap();
    let got = listed.as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        for k in ["index", "sector", "nr_sectors", "flags"] {
            assert_eq!(g[k], w[k], "{k}: {g} vs {w}");
        }
        assert_eq!(g["mark"].as_str(), w["text"].as_str(), "{g} vs {w}");
    }
    let n = run(&["log", fixture.to_str().unwrap(), "--num-entries"]);
    assert_eq!(String::from_utf8_lossy(&n.stdout).trim(), expected["nr_entries"].to_string());
    // bob check refuses a trace without its base image, in one line.
    let c = run(&["check", out.to_str().unwrap()]);
    assert_eq!(c.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&c.stderr).contains("no base image"));
}

/// The entry number of `bob log --find`'s `ENTRY@SECTOR` answer (replay-log's format).
fn found_entry(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout);
    s.trim().split('@').next().unwrap().to_owned()
}

/// The fixture's image, built by hand from the expected entries (not through bob's replay
/// code): writes from the start through entry `last` applied onto zeros.
fn fixture_image(last: usize) -> Vec<u8> {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/logs/small.expected.json")).unwrap(),
    )
    .unwrap();
    let mut img = vec![0u8; 64 * 1024];
    for e in expected["entries"].as_array().unwrap().iter().take(last + 1) {
        let sector = e["sector"].as_u64().unwrap() as usize;
        if let Some(hex) = e["data_hex"].as_str() {
            let data: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            img[sector * 512..sector * 512 + data.len()].copy_from_slice(&data);
        }
        if e["flags"].as_u64().unwrap() & 4 != 0 {
            let n = e["nr_sectors"].as_u64().unwrap() as usize;
            img[sector * 512..(sector + n) * 512].fill(0);
        }
    }
    img
}

/// blake3 of `bytes`, as bob computes image digests.
fn digest_of(dir: &Dir, bytes: &[u8]) -> String {
    let p = dir.path().join("expected.img");
    std::fs::write(&p, bytes).unwrap();
    bob_core::files::file_digest(&p).unwrap()
}

#[test]
fn replay_to_mark_and_next_flush_reproduces_the_expected_image() {
    let dir = Dir::new();
    let fixture = root().join("fixtures/logs/small.log");
    let f = fixture.to_str().unwrap();
    // The first flush of the fixture, found by bob, is the first entry with FLUSH set.
    let found = run(&["log", f, "--find", "--next-flush"]);
    let flush: usize = found_entry(&found).parse().unwrap();
    let img = dir.path().join("to-flush.img");
    std::fs::write(&img, vec![0u8; 64 * 1024]).unwrap();
    let o = run(&["log", f, "--replay", img.to_str().unwrap(), "--next-flush"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(bob_core::files::file_digest(&img).unwrap(), digest_of(&dir, &fixture_image(flush)));
    let end = run(&["log", f, "--find", "--end-mark", "dm-log-writes-end"]);
    let end: usize = found_entry(&end).parse().unwrap();
    let img2 = dir.path().join("to-mark.img");
    std::fs::write(&img2, vec![0u8; 64 * 1024]).unwrap();
    let o = run(&["log", f, "--replay", img2.to_str().unwrap(), "--end-mark", "dm-log-writes-end"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        bob_core::files::file_digest(&img2).unwrap(),
        digest_of(&dir, &fixture_image(end - 1))
    );
    assert_ne!(fixture_image(flush), fixture_image(end - 1), "the two stops must differ");
}

#[test]
fn replay_of_a_recorded_trace_to_a_mark_mounts_with_the_acknowledged_file() {
    let dir = Dir::new();
    let t = record(&dir, "t", SMALL_WORKLOAD, &[]);
    let log = t.join("trace.log");
    let l = log.to_str().unwrap();
    let img = dir.path().join("replayed.img");
    bob_core::files::copy_sparse(&t.join("base.img"), &img).unwrap();
    let o = run(&["log", l, "--replay", img.to_str().unwrap(), "--end-mark", "commit 2"]);
    assert_eq!(o.status.code(), Some(0));
    let by_mark = bob_core::files::file_digest(&img).unwrap();
    // Same entries by count: the index --find reports (the mark itself carries no data).
    let idx = run(&["log", l, "--find", "--end-mark", "commit 2"]);
    let idx = found_entry(&idx);
    let img2 = dir.path().join("limit.img");
    bob_core::files::copy_sparse(&t.join("base.img"), &img2).unwrap();
    assert_eq!(
        run(&["log", l, "--replay", img2.to_str().unwrap(), "--limit", &idx]).status.code(),
        Some(0)
    );
    assert_eq!(bob_core::files::file_digest(&img2).unwrap(), by_mark);
    // The kernel agrees: the replayed image mounts and holds what was synced before the mark.
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let lo = bob_core::device::loopdev::LoopDevice::attach_free(&img).unwrap();
    let m = bob_core::device::mount::mount(lo.path(), &mnt, "ext4", "ro").unwrap();
    assert_eq!(std::fs::read_to_string(mnt.join("a")).unwrap(), "hello\n");
    assert_eq!(std::fs::read_to_string(mnt.join("b")).unwrap(), "world\n");
    m.unmount().unwrap();
    lo.detach().unwrap();
    // A block device that is not a loop device (or is mounted) is refused in one line,
    // with replay-log's failure status.
    if Path::new("/dev/vda").exists() {
        let o = run(&["log", l, "--replay", "/dev/vda", "--limit", "1"]);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("refus") && err.lines().count() == 1, "{err}");
    }
}

#[test]
fn blktrace_and_blkparse_fixtures_decode_to_the_expected_requests() {
    let fx = root().join("fixtures/blktrace");
    for (src, expected) in
        [("loop0", "loop0.expected.json"), ("loop0.blkparse.txt", "loop0.blkparse.expected.json")]
    {
        let o = run(&["import", "--blktrace", fx.join(src).to_str().unwrap(), "--format", "json"]);
        assert_eq!(o.status.code(), Some(0));
        let want: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fx.join(expected)).unwrap()).unwrap();
        assert_eq!(json(&o)["requests"], want, "{src}");
    }
    let dir = Dir::new();
    let junk = dir.path().join("junk.blktrace.0");
    let mut bytes = 0x6561_7407u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 20]);
    std::fs::write(&junk, bytes).unwrap();
    let o = run(&["import", "--blktrace", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("truncated") && err.contains("junk.blktrace.0"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn dm_log_writes_backend_says_why_it_cannot_run_here() {
    if Path::new("/dev/mapper/control").exists() {
        return;
    }
    let dir = Dir::new();
    let out = dir.path().join("t");
    let o = run(&[
        "record",
        "--fs",
        "ext4-ordered",
        "--out",
        out.to_str().unwrap(),
        "--backend",
        "dm-log-writes",
        "--log-dev",
        "/dev/loop7",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("device-mapper is not available"), "{err}");
    let o = run(&[
        "run",
        "--fs",
        "ext4-ordered",
        "--property",
        "single-block-append",
        "--backend",
        "dm-log-writes",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("device-mapper is not available"));
}

/// The kernel target's own log (fixtures/dm-log-writes: Linux 6.12, plain dmsetup, no
/// bob in the loop), imported with the image it was recorded over, explores and checks as
/// it did in the guest: 85 crash states, 80 distinct, all held, the same as bob's own
/// dm-log-writes recording (`bob record --backend dm-log-writes`) of the same command.
#[test]
fn kernel_written_log_imports_and_checks() {
    let dir = Dir::new();
    let unpack = |name: &str| {
        let gz = root().join("fixtures/dm-log-writes").join(format!("{name}.gz"));
        let o = std::process::Command::new("gzip").arg("-dc").arg(&gz).output().expect("gzip");
        assert!(o.status.success(), "gzip -dc {}", gz.display());
        let to = dir.path().join(name);
        std::fs::write(&to, o.stdout).unwrap();
        to
    };
    let (log, base) = (unpack("ext4-kernel.log"), unpack("ext4-kernel-base.img"));
    let t = dir.path().join("imported");
    let o = run(&[
        "import",
        log.to_str().unwrap(),
        "--base",
        base.to_str().unwrap(),
        "--fs",
        "ext4-ordered",
        "--out",
        t.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v = json(&o);
    let counts: Vec<u64> = ["entries", "writes", "flushes", "fua", "marks"]
        .iter()
        .map(|k| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}")))
        .collect();
    assert_eq!(counts, [48, 34, 9, 7, 5], "{v}");
    let scratch = dir.scratch();
    let o = run(&[
        "check",
        t.to_str().unwrap(),
        "--jobs",
        "2",
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        dir.out().to_str().unwrap(),
    ]);
    assert_no_leaks(&scratch);
    let v = json(&o);
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert_eq!(v["verdict"], "held", "{v}");
    assert_eq!((v["states_explored"].as_u64(), v["states_unique"].as_u64()), (Some(85), Some(80)));
}

#[test]
fn tracefs_annotation_marks_metadata_writes() {
    let dir = Dir::new();
    let t = record(&dir, "t", SMALL_WORKLOAD, &["--annotate", "tracefs"]);
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.join("trace.json")).unwrap()).unwrap();
    let br = &sidecar["block_requests"];
    assert_eq!(br["source"], "tracefs");
    assert!(br["matched_writes"].as_u64().unwrap() > 0, "{br}");
    assert!(br["metadata_writes"].as_u64().unwrap() > 0, "ext4 writes metadata: {br}");
    let listed = json(&run(&["log", t.to_str().unwrap(), "--list", "--format", "json"]));
    let meta = listed.as_array().unwrap().iter().filter(|e| e["flags"].as_u64().unwrap() & 16 != 0);
    assert_eq!(meta.count() as u64, br["metadata_writes"].as_u64().unwrap());
    let instances = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("bob-")).count()
        })
        .unwrap_or(0);
    assert_eq!(instances, 0, "a tracefs instance was left behind");
}

fn check(dir: &Dir, trace: &Path, checker: &str, max: &str) -> (i32, serde_json::Value) {
    let scratch = dir.scratch();
    let out = dir.path().join("witness");
    let o = run(&[
        "check",
        trace.to_str().unwrap(),
        "--checker",
        checker,
        "--max-states",
        max,
        "--format",
        "json",
        "--scratch",
        scratch.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_no_leaks(&scratch);
    (o.status.code().unwrap_or(-1), json(&o))
}

fn example(name: &str) -> String {
    root().join("examples").join(name).to_str().unwrap().to_owned()
}

#[test]
fn sqlite_wal_commits_survive_every_crash_state() {
    let dir = Dir::new();
    let script = format!("sh {} wal 3", example("sqlite/workload.sh"));
    let t = record(&dir, "wal", &script, &[]);
    let (code, cell) = check(&dir, &t, &format!("sh {}", example("sqlite/check.sh")), "60");
    assert_eq!(cell["counts"]["violated"], 0, "{cell}");
    assert!(cell["counts"]["held"].as_u64().unwrap() > 10, "{cell}");
    assert!(code == 0 || code == 1, "{cell}");
}

#[test]
fn sqlite_checker_catches_acknowledged_commits_that_were_never_synced() {
    // Negative control: synchronous=OFF acknowledges commits that no flush made durable.
    let dir = Dir::new();
    let script = "sqlite3 app.db 'PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);' >/dev/null; \
         for i in 1 2 3; do sqlite3 app.db \"PRAGMA synchronous=OFF; INSERT INTO t VALUES($i, 'x');\"; \"$BOB\" mark \"commit $i\"; done";
    let t = record(&dir, "off", script, &[]);
    let (code, cell) = check(&dir, &t, &format!("sh {}", example("sqlite/check.sh")), "60");
    assert_eq!(cell["verdict"], "violated", "{cell}");
    assert_eq!(code, 1);
    assert!(cell["story"].as_str().unwrap().contains("acknowledged"), "{cell}");
    let witness = PathBuf::from(cell["witness"].as_str().unwrap());
    let out = std::fs::read_to_string(witness.join("checker.txt")).unwrap();
    assert!(out.contains("acknowledged"), "the witness keeps the checker's output: {out}");
}

#[test]
fn rename_without_fsync_is_violated_and_with_fsync_holds() {
    let dir = Dir::new();
    let checker = format!("sh {}", example("rename/check.sh"));
    let t =
        record(&dir, "nofsync", &format!("sh {} nofsync 2", example("rename/workload.sh")), &[]);
    let (code, cell) = check(&dir, &t, &checker, "80");
    assert_eq!(cell["verdict"], "violated", "{cell}");
    assert_eq!(code, 1);
    let t = record(&dir, "fsync", &format!("sh {} fsync 2", example("rename/workload.sh")), &[]);
    let (_, cell) = check(&dir, &t, &checker, "80");
    assert_eq!(cell["counts"]["violated"], 0, "{cell}");
    assert!(cell["counts"]["held"].as_u64().unwrap() > 10, "{cell}");
}

#[test]
fn mark_outside_bob_record_is_one_clear_line() {
    let o = util::bob().env_remove("BOB_MARK_FILE").args(["mark", "hello"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("BOB_MARK_FILE"), "{err}");
}

/// Live blktrace where it works; here (no debugfs, no relay files) one clear line that
/// points to tracefs, and nothing left behind. Where blktrace works, the recording must
/// carry block requests.
#[test]
fn blktrace_live_annotation_runs_or_says_why_not() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out = dir.path().join("t");
    let o = run(&[
        "record",
        "--fs",
        "ext4-ordered",
        "--out",
        out.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
        "--annotate",
        "blktrace",
        "--",
        "true",
    ]);
    assert_no_leaks(&scratch);
    if o.status.code() == Some(2) {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("blktrace") && err.contains("--annotate tracefs"), "{err}");
    } else {
        assert_eq!(o.status.code(), Some(0));
        let sidecar = std::fs::read_to_string(out.join("trace.json")).unwrap();
        assert!(sidecar.contains("block_requests"), "blktrace must annotate the trace");
    }
}
