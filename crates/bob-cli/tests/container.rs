//! bob's container image (the Containerfile's host stage, with the bob cargo just built),
//! made and run here by scripts/container.sh with podman, where no container registry is
//! reachable: the base from Debian's mirror (cached under ~/.cache/bob/container), the
//! containers privileged with the host's /dev. A cell gives the host's verdict and its
//! witness replays; two shards of a trace set in two containers merge into the
//! unsharded table; two pods played from the Kubernetes Job's own template merge into
//! the unsharded exploration, and the Job passes the Kubernetes schema.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use util::{assert_no_leaks, run, Dir};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/container.sh");
const JOB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/explore/explore-job.yaml");
const MERGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/explore/explore-merge.yaml");
/// The script's podman configuration, for the test's own podman calls.
const CONF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/containers.conf");
/// The volume the Job's pods share: a `persistentVolumeClaim`, which podman plays as the
/// named volume of the claim.
const RESULTS: &str = "bob-explore-results";

/// Whether podman and what the script needs are here. Missing under CI=true is a failure;
/// elsewhere the test is skipped with a message.
fn prerequisites() -> bool {
    let missing: Vec<&str> = ["podman", "runc", "mmdebstrap", "python3"]
        .into_iter()
        .filter(|p| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let what =
        format!("the container tests need {} (scripts/test.sh installs them)", missing.join(", "));
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{what}");
    eprintln!("skipped: {what}");
    false
}

/// `scripts/container.sh ARGS` in `cwd`, output captured and shown.
fn script(cwd: &Path, args: &[&str]) -> Output {
    let out =
        Command::new("bash").arg(SCRIPT).args(args).current_dir(cwd).output().expect("run bash");
    util::shown(&format!("scripts/container.sh {}", args.join(" ")), out)
}

/// A test's directory once the image is built; None (skipped) without the prerequisites.
fn setup() -> Option<Dir> {
    if !prerequisites() {
        return None;
    }
    image();
    Some(Dir::new())
}

/// Builds localhost/bob:latest with the bob under test, once for every test here.
fn image() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let start = std::time::Instant::now();
        let out = script(Path::new("/"), &["build", env!("CARGO_BIN_EXE_bob")]);
        eprintln!("image built in {:.0?}", start.elapsed());
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    });
    if let Err(e) = built {
        panic!("podman build of the Containerfile failed: {e}");
    }
}

/// `bob ARGS` in a privileged container, `dir` mounted at its own path as the working
/// directory (so paths in the output mean the same on the host).
fn in_container(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["run", "bob"];
    all.extend_from_slice(args);
    script(dir, &all)
}

/// `podman volume NAME...` with the script's configuration.
fn podman_volume(args: &[&str]) -> Output {
    Command::new("podman").arg("volume").args(args).env("CONTAINERS_CONF", CONF).output().unwrap()
}

/// A podman volume, removed first (a failed run's) and on drop.
struct Volume(&'static str);

impl Volume {
    fn fresh(name: &'static str) -> Volume {
        podman_volume(&["rm", "--force", name]);
        Volume(name)
    }
    fn mountpoint(&self) -> PathBuf {
        let out = podman_volume(&["inspect", "--format", "{{.Mountpoint}}", self.0]);
        assert!(out.status.success(), "no volume {}", self.0);
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        podman_volume(&["rm", "--force", self.0]);
    }
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every configuration the host can run, the container can (its mkfs, fsck and repair
/// tools are in the image); then one cell in a container gives the host's verdict, and
/// its witness replays in a container (and on the host) to the same violation.
#[test]
fn a_cell_in_a_container_gives_the_hosts_verdict_and_its_witness_replays() {
    let Some(dir) = setup() else { return };
    let listed = in_container(dir.path(), &["list"]);
    assert_eq!(listed.status.code(), Some(0));
    let host_list = run(&["list"]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout), String::from_utf8_lossy(&host_list.stdout));
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("not found"), "a program is missing");

    let scratch = dir.scratch();
    let out = dir.path().join("out-container");
    let cell_args = ["--fs", "xfs", "--property", "append-then-rename", "--schedules", "sync"];
    let mut args = vec!["run", "--format", "json", "--scratch", s(&scratch), "--out", s(&out)];
    args.extend_from_slice(&cell_args);
    let c = in_container(dir.path(), &args);
    let cell = json(&c);
    let (host_code, host) = util::run_cell(&dir, "xfs", "append-then-rename", &cell_args[4..]);
    assert_eq!(c.status.code(), Some(host_code), "container {cell}\nhost {host}");
    assert_eq!(cell["verdict"], host["verdict"], "container {cell}\nhost {host}");
    assert_eq!(cell["verdict"], "violated", "xfs reorders the append after the rename: {cell}");
    assert_no_leaks(&scratch);

    let witness = cell["witness"].as_str().expect("a violated cell has a witness");
    let state = cell["witness_state"].as_str().unwrap();
    let img = dir.path().join("crash.img");
    let replay = ["replay", "--force", witness, "--state", state, "--to", s(&img), "--check"];
    let again = in_container(dir.path(), &replay);
    assert_eq!(again.status.code(), Some(1), "the witness replays as a violation");
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains(&format!("crash state {state}")) && text.contains("replayed: violated"),
        "{text}"
    );
    std::fs::remove_file(&img).unwrap();
    let on_host = run(&replay);
    assert_eq!(on_host.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&on_host.stdout).contains("replayed: violated"));
}

/// A trace set recorded in one container, its two shards checked in two containers at
/// once and merged in a third, is the table the host prints unsharded over the same set:
/// the same states, counts, verdicts and witness.
#[test]
fn two_shards_in_two_containers_merge_into_the_unsharded_table() {
    let Some(dir) = setup() else { return };
    let scratch = dir.scratch();
    let set = dir.path().join("set");
    let small = ["--schedules", "sync", "--max-states", "40", "--scratch", s(&scratch)];
    let table = |extra: &[&str], out: &Path| -> Vec<String> {
        let mut a: Vec<String> =
            ["table", "--format", "json", "--out", s(out)].map(String::from).to_vec();
        a.extend(small.iter().chain(extra).map(|x| x.to_string()));
        a
    };
    // ext2 loses the append in some state (a witness to merge), btrfs holds.
    let cells = ["--fs", "ext2,btrfs", "--property", "single-block-append"];
    let mut record = table(&cells, &set);
    record.push("--record-only".into());
    let rec = in_container(dir.path(), &record.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(rec.status.code(), Some(0));
    assert!(set.join("traces.json").is_file());

    let shards: Vec<(std::process::Child, PathBuf)> = (1..=2)
        .map(|i| {
            let mut a = table(
                &["--traces", s(&set), "--shard", &format!("{i}/2")],
                &dir.path().join(format!("s{i}")),
            );
            a.insert(0, "bob".into());
            a.insert(0, "run".into());
            let file = dir.path().join(format!("shard-{i}.json"));
            let child = Command::new("bash")
                .arg(SCRIPT)
                .args(&a)
                .current_dir(dir.path())
                .stdout(std::fs::File::create(&file).unwrap())
                .spawn()
                .unwrap();
            (child, file)
        })
        .collect();
    let mut files = Vec::new();
    for (mut child, file) in shards {
        let status = child.wait().unwrap();
        assert!(status.code().is_some_and(|c| c <= 1), "shard {}: {status}", file.display());
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert!(doc["cells"][0]["shard"].as_str().unwrap().ends_with("/2"), "{doc}");
        files.push(file);
    }
    let mut merge = vec!["merge", "--format", "json"];
    merge.extend(files.iter().map(|f| s(f)));
    let merged = json(&in_container(dir.path(), &merge));

    let whole_args = table(&["--traces", s(&set)], &dir.path().join("whole"));
    let whole = json(&run(&whole_args.iter().map(String::as_str).collect::<Vec<_>>()));
    let (m, w) = (merged["cells"].as_array().unwrap(), whole["cells"].as_array().unwrap());
    assert_eq!(m.len(), 2);
    assert_eq!(m.len(), w.len());
    for (m, w) in m.iter().zip(w) {
        for key in [
            "config",
            "property",
            "verdict",
            "states_explored",
            "states_unique",
            "counts",
            "witness_state",
            "schedules",
        ] {
            assert_eq!(m[key], w[key], "{key}: merged {m}\nunsharded {w}");
        }
        assert!(m["states_explored"].as_u64().unwrap() > 0, "{m}");
    }
    assert_eq!(m[0]["verdict"], "violated", "{}", m[0]);
    assert!(m[0]["witness_state"].is_string(), "{}", m[0]);
    assert_no_leaks(&scratch);
}

/// The Kubernetes Job as far as this machine allows: it and the merge pod pass the
/// Kubernetes schema (and a broken copy does not); two of its pods, its pod template with
/// the index set, played by `podman kube play` with narrow bounds and two shards, write
/// their reports to the claim, and the merge pod played after them merges those into the
/// unsharded run's workloads and signatures.
#[test]
fn two_pods_of_the_jobs_template_merge_into_the_unsharded_exploration() {
    let Some(dir) = setup() else { return };
    let valid = script(dir.path(), &["validate", JOB, MERGE]);
    assert_eq!(valid.status.code(), Some(0), "the Job, its claim and the merge pod");
    let broken = dir.path().join("broken.yaml");
    let text = std::fs::read_to_string(JOB)
        .unwrap()
        .replace("completionMode: Indexed", "completionMode: [Indexed]");
    std::fs::write(&broken, text).unwrap();
    assert_ne!(
        script(dir.path(), &["validate", s(&broken)]).status.code(),
        Some(0),
        "the validator validates"
    );

    // creat of /A/foo, then fsync or sync, on ext4-ordered with a 512 B atomic write unit:
    // a torn superblock in every workload (tests/explore.rs).
    let bounds = "--fs ext4-ordered --ops creat --files /A/foo --persist fsync,sync --atomic-write-unit 512 --no-shrink";
    let volume = Volume::fresh(RESULTS);
    let pods: Vec<std::process::Child> = (0..2)
        .map(|i| {
            Command::new("bash")
                .arg(SCRIPT)
                .args(["play", JOB, &i.to_string(), "SHARDS=2", &format!("BOUNDS={bounds}")])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut p in pods {
        let status = p.wait().unwrap();
        assert!(status.success(), "a pod of the Job failed: {status}");
    }
    // The merge pod reads the claim the Job's pods wrote.
    let merged = script(dir.path(), &["play", MERGE]);
    assert_eq!(merged.status.code(), Some(0), "the merge pod");
    let log = String::from_utf8_lossy(&merged.stdout);
    assert!(log.contains("ext4-ordered"), "its log has the table: {log}");
    let results = volume.mountpoint();
    let mut listing: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listing.sort();
    assert_eq!(listing, ["merged.json", "shard-1", "shard-1.json", "shard-2", "shard-2.json"]);
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results.join("merged.json")).unwrap()).unwrap();

    let (scratch, out) = (dir.scratch(), dir.out());
    let mut args = vec!["explore"];
    args.extend(bounds.split(' '));
    args.extend(["--format", "json", "--scratch", s(&scratch), "--out", s(&out)]);
    let whole = run(&args);
    let w = json(&whole);
    assert_eq!(m["complete"], true, "{m}");
    for key in ["workloads", "distinct_workloads"] {
        assert_eq!(m[key], w[key], "{key}");
    }
    let keys = |v: &serde_json::Value| -> Vec<(String, u64)> {
        let sigs = v["signatures"].as_array().unwrap().iter();
        sigs.map(|s| (s["key"].to_string(), s["count"].as_u64().unwrap())).collect()
    };
    assert!(!keys(&w).is_empty(), "the torn superblock gives a signature: {w}");
    assert_eq!(keys(&m), keys(&w));
    assert_no_leaks(&scratch);
}
