//! `bob explore` on the real kernel: generated workloads recorded through bob's own disk,
//! their crash states recovered and judged, failures grouped into signatures whose
//! minimal witnesses replay; and the generator's counts, shards and samples through the
//! CLI (`--list`, no root needed).

mod util;

use std::collections::BTreeSet;

use util::{assert_no_leaks, bob, run, Dir};

/// The narrow bounds of the real runs: creat of /A/foo, then fsync or sync, on
/// ext4-ordered with 512 B atomic writes (its torn superblock makes a failure certain).
const NARROW: &[&str] = &[
    "--fs",
    "ext4-ordered",
    "--ops",
    "creat",
    "--files",
    "/A/foo",
    "--persist",
    "fsync,sync",
    "--atomic-write-unit",
    "512",
];

fn listed(args: &[&str]) -> Vec<String> {
    let mut all = vec!["explore", "--fs", "ext2", "--list"];
    all.extend_from_slice(args);
    let out = bob().args(&all).output().expect("run bob");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn seq1_over_aces_bounds_is_310_workloads_and_shards_partition_them() {
    let all = listed(&["--seq", "1"]);
    assert_eq!(all.len(), 310);
    let a = listed(&["--seq", "1", "--shard", "1/2"]);
    let b = listed(&["--seq", "1", "--shard", "2/2"]);
    assert_eq!(a.len() + b.len(), all.len());
    let union: BTreeSet<&String> = a.iter().chain(&b).collect();
    assert_eq!(union, all.iter().collect(), "disjoint, and together every workload");
    // The same seed draws the same workloads; another draws others.
    let s1 = listed(&["--seq", "2", "--sample", "12", "--seed", "5"]);
    assert_eq!(s1.len(), 12);
    assert_eq!(s1, listed(&["--seq", "2", "--sample", "12", "--seed", "5"]));
    assert_ne!(s1, listed(&["--seq", "2", "--sample", "12", "--seed", "6"]));
    // The issue's seq-2 sample of 10,000: its three shards partition it exactly.
    let sample = listed(&["--seq", "2", "--sample", "10000"]);
    assert_eq!(sample.len(), 10000);
    let shards: Vec<Vec<String>> = (1..=3)
        .map(|i| listed(&["--seq", "2", "--sample", "10000", "--shard", &format!("{i}/3")]))
        .collect();
    assert_eq!(shards.iter().map(Vec::len).sum::<usize>(), 10000);
    let union: BTreeSet<&String> = shards.iter().flatten().collect();
    assert_eq!(union, sample.iter().collect(), "the shards of the sample are the sample");
    // Narrowed: creat of /A/foo with sync only.
    let one = listed(&["--ops", "creat", "--files", "/A/foo", "--persist", "sync"]);
    assert_eq!(one.len(), 1);
    assert!(one[0].ends_with("creat /A/foo; sync"), "{one:?}");
}

#[test]
fn bad_bounds_are_one_line_usage_errors() {
    for args in [
        vec!["explore", "--fs", "ext2", "--ops", "remove", "--list"],
        vec!["explore", "--fs", "ext2", "--budget", "0s", "--list"],
        vec!["explore", "--fs", "ext2", "--files", "foo", "--list"],
        vec!["explore", "--fs", "ext2", "--guarantee", "strong", "--list"],
        vec!["explore", "--fs", "ext2", "--seq", "0", "--list"],
    ] {
        let out = bob().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// On a 512n disk ext4 tears its 4 KiB superblock write (the checksum then fails, and the
/// kernel refuses the mount until e2fsck repairs it): certain in every workload, whose
/// drain syncs. Three workloads (creat, then fsync of the file or its directory, or sync),
/// two signatures (creat + fsync, creat + sync); the sync one
/// shrinks to the sync alone. Every witness replays with `bob replay --check`, the shell
/// reproducer fails as the witness says, and `--resume` of the finished run adds nothing.
#[test]
fn a_small_exploration_finds_signatures_whose_witnesses_replay() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out_dir = dir.out();
    let xfstests = dir.path().join("xfstests");
    let mut args = vec!["explore"];
    args.extend_from_slice(NARROW);
    args.extend_from_slice(&[
        "--format",
        "json",
        "--out",
        out_dir.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
        "--export-xfstests",
        xfstests.to_str().unwrap(),
    ]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "a signature found exits 1");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    // creat /A/foo, then fsync /A/foo, fsync /A or sync.
    assert_eq!(report["workloads"], 3, "{report}");
    assert!(report["seconds_per_workload"].as_f64().unwrap() > 0.0);
    assert_eq!(report["complete"], true);
    let sigs = report["signatures"].as_array().unwrap();
    let keys: BTreeSet<String> = sigs
        .iter()
        .map(|s| {
            let k = &s["key"];
            format!(
                "{}/{}/{}",
                k["config"].as_str().unwrap(),
                k["ops"],
                k["discrepancy"].as_str().unwrap()
            )
        })
        .collect();
    assert!(keys.contains("ext4-ordered/[\"creat\",\"sync\"]/needs-repair"), "{keys:?}");
    for s in sigs {
        assert!(s["count"].as_u64().unwrap() >= 1);
        assert!(s["story"].as_str().unwrap().contains("e2fsck"), "{s}");
        let w = &s["witness"];
        let replay = w["replay"].as_str().unwrap();
        assert!(replay.starts_with("bob replay "), "{replay}");
        // The witness replays: a fresh image of the same crash state, recovered and
        // checked again, reaches the same outcome.
        let img = dir.path().join("crash.img");
        let again = run(&[
            "replay",
            "--force",
            w["dir"].as_str().unwrap(),
            "--state",
            w["state"].as_str().unwrap(),
            "--to",
            img.to_str().unwrap(),
            "--check",
        ]);
        assert_eq!(again.status.code(), Some(1), "the witness replays as a failure");
        assert!(String::from_utf8_lossy(&again.stdout).contains("replayed: needs-repair"));
        // The test's scratch image; its directory goes with the test's anyway.
        let _ = std::fs::remove_file(&img);
        // The minimal workload is a file `bob run --workload` takes.
        let file = w["workload"].as_str().unwrap();
        let parsed: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(parsed["ops"].as_array().unwrap().len(), w["ops"].as_array().unwrap().len());
    }
    // The creat + sync workload shrank to the sync alone: the tear is the drain's.
    let sync =
        sigs.iter().find(|s| s["key"]["ops"] == serde_json::json!(["creat", "sync"])).unwrap();
    assert_eq!(sync["witness"]["ops"], serde_json::json!(["sync"]), "{sync}");
    assert_eq!(sync["witness"]["dropped_ops"], 1);
    // Its standalone reproducer records the minimal workload afresh, replays the failing
    // crash image and checks it: it fails (exit 1) as the witness says.
    let script = sync["witness"]["reproducer"].as_str().unwrap();
    let repro = std::process::Command::new("sh")
        .arg(script)
        .env("BOB", env!("CARGO_BIN_EXE_bob"))
        .env("OUT", dir.path().join("repro"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&repro.stdout);
    eprintln!("{text}\n{}", String::from_utf8_lossy(&repro.stderr));
    assert_eq!(repro.status.code(), Some(1));
    assert!(text.contains("replayed: needs-repair"), "{text}");
    // The xfstests export: one generic test and its golden output per signature.
    let tests = xfstests.join("tests/generic");
    let n = std::fs::read_dir(&tests).unwrap().count();
    assert_eq!(n, 2 * sigs.len());
    let t = std::fs::read_to_string(tests.join("900")).unwrap();
    assert!(t.contains("_log_writes_replay_log") && t.contains("_require_log_writes"), "{t}");
    // Replayed onto a thin volume (a zeroed start on any disk), never onto the device
    // dm-log-writes wrote through.
    assert!(t.contains("_log_writes_replay_log bob_op1 $DMTHIN_VOL_DEV"), "{t}");
    assert!(t.contains("_require_no_logdev") && !t.contains("$SCRATCH_DEV"), "{t}");
    // The tables are left under --out.
    for f in ["explore.md", "explore.html", "explore-report.json"] {
        assert!(out_dir.join(f).exists(), "{f}");
    }
    // Resuming the finished run runs nothing again and reports the same signatures.
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let mut resume: Vec<&str> = args.to_vec();
    resume.push("--resume");
    let again = run(&resume);
    assert_eq!(again.status.code(), Some(1));
    let second: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(second["signatures"], report["signatures"]);
    assert_eq!(std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap(), journal);
    // Every signature triaged in --known: reported as known, and the exit code is 0; one
    // left out keeps it 1.
    let slugs: Vec<String> = std::fs::read_dir(out_dir.join("signatures"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(slugs.len(), sigs.len());
    let known = dir.path().join("known.txt");
    let mut list = String::from("# triaged\n");
    for s in &slugs {
        list.push_str(&format!("{s} torn superblock on a 512n disk\n"));
    }
    std::fs::write(&known, &list).unwrap();
    let mut with_known = resume.clone();
    with_known.extend(["--known", known.to_str().unwrap()]);
    let triaged = run(&with_known);
    assert_eq!(triaged.status.code(), Some(0), "only known signatures");
    let t: serde_json::Value = serde_json::from_slice(&triaged.stdout).unwrap();
    assert!(t["signatures"].as_array().unwrap().iter().all(|s| s["known"] == true), "{t}");
    std::fs::write(&known, format!("{}\n", slugs[0])).unwrap();
    assert_eq!(run(&with_known).status.code(), Some(1), "a new one remains");
    std::fs::write(&known, "not-a-signature\n").unwrap();
    assert_eq!(run(&with_known).status.code(), Some(2));
    assert_no_leaks(&scratch);
}

/// Two shards of an exploration, merged with `bob merge`, give the unsharded run's
/// workloads and signatures (keys and counts; recordings differ from run to run, so not
/// state counts or witness paths).
#[test]
fn shards_merge_into_the_unsharded_run() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let explore = |name: &str, extra: &[&str]| -> (i32, std::path::PathBuf) {
        let out = dir.path().join(name);
        let mut args = vec!["explore"];
        args.extend_from_slice(NARROW);
        args.extend_from_slice(&[
            "--no-shrink",
            "--format",
            "json",
            "--scratch",
            scratch.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        let o = run(&args);
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, &o.stdout).unwrap();
        (o.status.code().unwrap_or(-1), file)
    };
    let (whole_code, whole) = explore("whole", &[]);
    let (_, s1) = explore("s1", &["--shard", "1/2"]);
    // The second shard records each run itself instead of ahead of its check: the same
    // runs and signatures either way.
    let (_, s2) = explore("s2", &["--shard", "2/2", "--no-record-ahead"]);
    let merged = run(&["merge", s1.to_str().unwrap(), s2.to_str().unwrap(), "--format", "json"]);
    assert_eq!(merged.status.code(), Some(whole_code));
    let m: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    let w: serde_json::Value = serde_json::from_slice(&std::fs::read(&whole).unwrap()).unwrap();
    assert_eq!(m["workloads"], w["workloads"]);
    assert_eq!(m["distinct_workloads"], w["distinct_workloads"]);
    assert_eq!(m["complete"], true);
    let keys = |v: &serde_json::Value| -> Vec<(String, u64)> {
        v["signatures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["key"].to_string(), s["count"].as_u64().unwrap()))
            .collect()
    };
    assert!(!keys(&w).is_empty());
    assert_eq!(keys(&m), keys(&w));
    // A shard given twice is refused.
    let twice = run(&["merge", s1.to_str().unwrap(), s1.to_str().unwrap()]);
    assert_eq!(twice.status.code(), Some(2));
    assert_no_leaks(&scratch);
}

/// The engine definitions in docs/explore/ (no cluster is reachable here;
/// tests/container.rs plays the Job's pods with podman): valid YAML (parsed by python3's
/// yaml), a matrix of shards whose command is `bob explore --shard I/N` and a merge job
/// running `bob merge`, both in bob's image; an Indexed Job whose pods are privileged and
/// turn JOB_COMPLETION_INDEX into the shard.
#[test]
fn the_cluster_definitions_have_their_form() {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/explore");
    let check = r#"
import sys, yaml
a = yaml.safe_load(open(sys.argv[1] + "/explore-matrix.yml"))
shard = a["jobs"]["shard"]
n = int(a["env"]["SHARDS"])
assert shard["strategy"]["matrix"]["shard"] == list(range(1, n + 1))
runs = "\n".join(s.get("run", "") for s in shard["steps"])
assert "bob explore" in runs and "--shard ${{ matrix.shard }}/$SHARDS" in runs, runs
merge = "\n".join(s.get("run", "") for s in a["jobs"]["merge"]["steps"])
assert "shard" in a["jobs"]["merge"]["needs"] and "bob merge explore-shard-*.json" in merge
# Both run in bob's image, as .github/workflows/image.yml builds and pushes it.
assert a["jobs"]["image"]["uses"] == "./.github/workflows/image.yml"
for job in (shard, a["jobs"]["merge"]):
    assert job["container"]["image"] == "${{ needs.image.outputs.image }}", job
    assert "--privileged -v /dev:/dev" in job["container"]["options"], job
docs = list(yaml.safe_load_all(open(sys.argv[1] + "/explore-job.yaml")))
assert [d["kind"] for d in docs] == ["PersistentVolumeClaim", "Job"], docs
claim, k = docs
assert k["spec"]["completionMode"] == "Indexed"
c = k["spec"]["template"]["spec"]["containers"][0]
shards = [e["value"] for e in c["env"] if e["name"] == "SHARDS"][0]
assert k["spec"]["completions"] == int(shards)
assert c["securityContext"]["privileged"] is True
# The image `podman build -t bob .` makes (docs/container.md), which tests/container.rs plays.
assert c["image"] == "localhost/bob:latest", c["image"]
script = c["args"][0]
assert "JOB_COMPLETION_INDEX + 1" in script and "--shard $I/$SHARDS" in script, script
# The report goes beside the --out directory: inside it, explore.json is the run's header.
assert "--out /results/shard-$I" in script and "> /results/shard-$I.json" in script, script
# The claim is the one the pods mount, and the merge pod reads it with the same image.
vols = k["spec"]["template"]["spec"]["volumes"]
assert claim["metadata"]["name"] in [v.get("persistentVolumeClaim", {}).get("claimName") for v in vols]
assert "ReadWriteMany" in claim["spec"]["accessModes"]
m = yaml.safe_load(open(sys.argv[1] + "/explore-merge.yaml"))
assert m["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
assert m["spec"]["containers"][0]["image"] == c["image"]
assert "bob merge /results/shard-*.json" in m["spec"]["containers"][0]["args"][0]
print("ok")
"#;
    let out = std::process::Command::new("python3").args(["-c", check, docs]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

/// `--recovery-crashes`: after each run that held, the recovery of a crash state right
/// after a barrier is recorded and interrupted, and every crash state inside it is
/// recovered again and judged (recovery-idempotent), on ext4 and xfs. The kernels'
/// journal and log replays are idempotent, so every run holds; what is asserted is that
/// states inside recovery were checked on both and counted per configuration.
#[test]
fn explore_crashes_during_recovery_on_ext4_and_xfs() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out_dir = dir.out();
    let out = run(&[
        "explore",
        "--fs",
        "ext4-ordered,xfs",
        "--ops",
        "creat",
        "--files",
        "/A/foo",
        "--persist",
        "fsync",
        "--recovery-crashes",
        "1",
        "--recovery-max-states",
        "4",
        "--format",
        "json",
        "--out",
        out_dir.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert!(report["selection"].as_str().unwrap().contains("recovery crashes 1 per run"));
    for c in report["configs"].as_array().unwrap() {
        let n = c["recovery_states"].as_u64().unwrap_or(0);
        assert!(n > 0 && n <= 4 * c["workloads"].as_u64().unwrap(), "{c}");
    }
    assert_no_leaks(&scratch);
}

/// `bob explore` over the research designs reads each one's guarantee profile
/// (`bob_core::fs::profile`). journal-flush and softupdates hold a link, an overwrite and
/// a truncate followed by sync (sync reaches them through their fuseblk mount: before,
/// `link /foo /bar; sync` lost /bar on journal-flush), nofs promises nothing on sync and
/// shows nothing (its EIOs are its detection), a symlink is counted unsupported, not an
/// error; and the negative controls of the two designs whose promises explore judges
/// through the profile fail as their papers predict: xsyncfs-eager releases output
/// before the data is durable, valor-nolog-order leaves a durably committed transaction
/// half done.
#[test]
fn research_designs_hold_their_profiles_and_controls_fail_as_predicted() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out_dir = dir.out();
    let out = run(&[
        "explore",
        "--fs",
        "journal-flush,softupdates,nofs,xsyncfs,xsyncfs-eager,valor,valor-nolog-order",
        "--ops",
        "link,write,truncate,symlink",
        "--files",
        "/foo",
        "--second-files",
        "/bar",
        "--ranges",
        "overlap-unaligned",
        "--truncate",
        "aligned",
        "--persist",
        "sync",
        "--format",
        "json",
        "--out",
        out_dir.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(report["errors"].as_array().map_or(0, Vec::len), 0, "{report}");
    // link /foo /bar, write /foo 4096@7680, truncate /foo 8192, symlink /foo /bar; sync.
    assert_eq!(report["distinct_workloads"], 4, "{report}");
    for c in report["configs"].as_array().unwrap() {
        assert_eq!(c["unsupported"], 1, "the symlink: {c}");
    }
    let configs: BTreeSet<&str> = report["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"]["config"].as_str().unwrap())
        .collect();
    assert_eq!(configs, BTreeSet::from(["valor-nolog-order", "xsyncfs-eager"]), "{report}");
    for s in report["signatures"].as_array().unwrap() {
        let (config, d) = (s["key"]["config"].as_str().unwrap(), &s["key"]["discrepancy"]);
        match config {
            "valor-nolog-order" => assert_eq!(d, "txn-not-atomic", "{s}"),
            _ => assert!(s["story"].as_str().unwrap().contains("was released before the crash")),
        }
        assert_eq!(s["witness"]["confirmed"], true, "{s}");
    }
    assert_no_leaks(&scratch);
}

/// The bounds of the operations beyond Ace's, narrowed to one file, one second file, fsync
/// and one range of each kind: 41 workloads, every new kind (clone, clone-range,
/// copy-range, dedupe-range, renameat2's three flags, O_TMPFILE + linkat, chmod, chown,
/// utimensat, fallocate collapse, insert and unshare).
const BEYOND_ACE_NARROW: &[&str] = &[
    "--op-set",
    "beyond-ace",
    "--files",
    "/foo",
    "--second-files",
    "/bar",
    "--persist",
    "fsync",
    "--ranges",
    "overlap-unaligned",
    "--direct-ranges",
    "overlap-aligned",
];

/// Each run of an exploration's journal: (workload's first op, outcome).
fn journal_runs(out_dir: &std::path::Path) -> Vec<(String, String)> {
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).expect("a journal");
    let workloads = out_dir.join("workloads");
    journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["kind"] == "run")
        .map(|r| {
            let name = r["workload"].as_str().unwrap().to_owned();
            let w = std::fs::read_to_string(workloads.join(format!("{name}.json")))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let w: serde_json::Value = serde_json::from_str(&w).unwrap();
            (w["ops"][0]["op"].as_str().unwrap().to_owned(), r["outcome"].as_str().unwrap().into())
        })
        .collect()
}

/// The operations beyond Ace's on file systems that keep their promises: xfs runs every
/// one of them (reflink, dedupe, renameat2's flags, O_TMPFILE, collapse, insert and
/// unshare are all xfs's) and every crash state of every workload holds; ext4 refuses
/// reflinks, dedupes and unshares, and says so as `unsupported`, never as a failure.
/// (Every kind can fail its promise: `workloads::enumerate`'s
/// `every_operation_beyond_ace_can_fail_its_promise`.)
#[test]
fn operations_beyond_ace_hold_on_xfs_and_ext4_refuses_reflinks_as_unsupported() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out_dir = dir.out();
    let mut args = vec!["explore", "--fs", "xfs,ext4-ordered"];
    args.extend_from_slice(BEYOND_ACE_NARROW);
    args.extend_from_slice(&[
        "--format",
        "json",
        "--out",
        out_dir.to_str().unwrap(),
        "--scratch",
        scratch.to_str().unwrap(),
    ]);
    let out = run(&args);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert_eq!(out.status.code(), Some(0), "every promise holds: {report}");
    assert_eq!(report["distinct_workloads"], 41, "{report}");
    let runs = journal_runs(&out_dir);
    assert_eq!(runs.len(), 82, "{runs:?}");
    let configs = report["configs"].as_array().unwrap();
    let xfs = configs.iter().find(|c| c["config"] == "xfs").unwrap();
    assert_eq!(xfs["unsupported"], 0, "xfs runs every operation: {xfs}");
    assert_eq!(xfs["failed"], 0, "{xfs}");
    let ext4 = configs.iter().find(|c| c["config"] == "ext4-ordered").unwrap();
    // clone (3), clone-range (3), dedupe-range (3), unshare-range (2).
    assert_eq!(ext4["unsupported"], 11, "{ext4}");
    let kinds: BTreeSet<&str> = runs.iter().map(|(k, _)| k.as_str()).collect();
    for kind in [
        "clone",
        "clone-range",
        "copy-range",
        "dedupe-range",
        "rename2",
        "chmod",
        "chown",
        "utimes",
        "tmpfile-link",
        "falloc",
    ] {
        assert!(kinds.contains(kind), "{kind} ran: {kinds:?}");
    }
    for (kind, outcome) in &runs {
        let refused = matches!(kind.as_str(), "clone" | "clone-range" | "dedupe-range");
        assert!(
            outcome == "held" || (refused && outcome == "unsupported") || kind == "falloc",
            "{kind}: {outcome}"
        );
    }
    assert_no_leaks(&scratch);
}
