//! bob as xfstests' replay-log: every case in fixtures/replay-log/cases/ (what the real
//! replay-log answered, recorded by scripts/replay-log-fixtures.sh) replayed through
//! `bob log` and through a `replay-log` symlink to bob, on nothing, on image files and on
//! real loop devices; stdout, exit status and the resulting image's digest must match.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;

use bob_core::device::loopdev::LoopDevice;
use util::Dir;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/replay-log")
}

/// One recorded case: the command line (with placeholders), the target kind, and what the
/// real replay-log answered.
struct Case {
    name: String,
    target: String,
    args: Vec<String>,
    stdout: Vec<u8>,
    status: i32,
    digest: Option<String>,
}

fn cases(filter: impl Fn(&str) -> bool) -> Vec<Case> {
    let dir = fixtures().join("cases");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures/replay-log/cases")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let d = dir.join(&name);
            let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
            let target = read("target").trim().to_owned();
            filter(&target).then(|| Case {
                args: read("args").lines().map(str::to_owned).collect(),
                stdout: std::fs::read(d.join("stdout")).unwrap(),
                status: read("status").trim().parse().unwrap(),
                digest: std::fs::read_to_string(d.join("digest")).ok().map(|s| s.trim().to_owned()),
                name,
                target,
            })
        })
        .collect()
}

/// How bob is run: as `bob log ARGS`, or as `replay-log ARGS` through a symlink.
#[derive(Clone, Copy, Debug)]
enum Mode {
    BobLog,
    Symlink,
}

/// Where the ext4 log's base image is unpacked once per test.
fn ext4_base(dir: &Dir) -> PathBuf {
    let p = dir.path().join("ext4-base.img");
    if !p.exists() {
        let gz = fixtures().join("logs/ext4-base.img.gz");
        let out = Command::new("gzip").arg("-dc").arg(&gz).output().expect("gzip");
        assert!(out.status.success(), "gzip -dc {}", gz.display());
        std::fs::write(&p, out.stdout).unwrap();
    }
    p
}

fn size_of(spec: &str) -> u64 {
    let (n, unit) = spec.split_at(spec.len() - 1);
    let n: u64 = n.parse().unwrap();
    match unit {
        "M" => n << 20,
        "G" => n << 30,
        _ => panic!("size {spec}"),
    }
}

/// Runs `case` in `mode`; `Err` describes the first difference from the real tool.
fn check(dir: &Dir, case: &Case, mode: Mode) -> Result<(), String> {
    let work = dir.path().join(format!("{}-{mode:?}", case.name));
    std::fs::create_dir_all(&work).unwrap();
    let img = work.join("target.img");
    let mut lo = None;
    match case.target.as_str() {
        "none" => {}
        "file" => std::fs::write(&img, b"").unwrap(),
        "file:ext4-base" => {
            std::fs::copy(ext4_base(dir), &img).unwrap();
        }
        t => {
            let size = t.strip_prefix("loop:").expect("target kind");
            if size == "ext4-base" {
                std::fs::copy(ext4_base(dir), &img).unwrap();
            } else {
                std::fs::File::create(&img).unwrap().set_len(size_of(size)).unwrap();
            }
            lo = Some(LoopDevice::attach_free(&img).expect("a free loop device"));
        }
    }
    let target = lo.as_ref().map(|l| l.path().to_owned()).unwrap_or_else(|| img.clone());
    let args: Vec<String> = case
        .args
        .iter()
        .map(|a| {
            let mut a = a
                .replace("@TARGET@", target.to_str().unwrap())
                .replace("@TMP@", work.to_str().unwrap());
            while let Some(start) = a.find("@LOG:") {
                let end = start + a[start..][1..].find('@').unwrap() + 1;
                let name = &a[start + 5..end];
                let path = fixtures().join("logs").join(name);
                a.replace_range(start..=end, path.to_str().unwrap());
            }
            a
        })
        .collect();
    let mut cmd = match mode {
        Mode::BobLog => {
            let mut c = util::bob();
            c.arg("log");
            c
        }
        Mode::Symlink => {
            let link = dir.path().join("replay-log");
            if !link.exists() {
                std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bob"), &link).unwrap();
            }
            Command::new(link)
        }
    };
    let out = cmd.args(&args).current_dir(&work).output().unwrap();
    if let Some(l) = lo {
        l.detach().unwrap();
    }
    let what = format!("{} ({mode:?}: {})", case.name, args.join(" "));
    if out.status.code() != Some(case.status) {
        return Err(format!(
            "{what}: exit {:?}, replay-log exited {}; stderr: {}",
            out.status.code(),
            case.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if out.stdout != case.stdout {
        return Err(format!(
            "{what}: stdout differs:\n--- bob\n{}--- replay-log\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&case.stdout)
        ));
    }
    if let Some(want) = &case.digest {
        let got = bob_core::files::file_digest(&img).unwrap();
        if &got != want {
            return Err(format!("{what}: image digest {got}, replay-log's {want}"));
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
    Ok(())
}

/// Runs every case whose target kind passes `filter`, in both modes, and reports all
/// differences at once. Cases about getopt's syntax (abbreviations, `--opt=value`,
/// its messages) are replay-log's command line only: `bob log` parses with clap.
fn run_cases(filter: impl Fn(&str) -> bool) {
    let dir = Dir::new();
    let have_e2fsck = Command::new("e2fsck").arg("-V").output().is_ok();
    let cases = cases(filter);
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        if case.args.iter().any(|a| a.contains("e2fsck")) && !have_e2fsck {
            eprintln!("skipping {}: no e2fsck", case.name);
            continue;
        }
        for mode in [Mode::BobLog, Mode::Symlink] {
            if matches!(mode, Mode::BobLog) && case.name.starts_with("getopt-") {
                continue;
            }
            if let Err(e) = check(&dir, case, mode) {
                failures.push(e);
            }
        }
    }
    let leaks = util::leaks_under(dir.path());
    assert!(leaks.is_empty(), "loop devices or mounts left behind: {leaks:?}");
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn replay_log_cases_without_a_target_match_the_real_tool() {
    run_cases(|t| t == "none");
}

#[test]
fn replay_log_cases_on_image_files_match_the_real_tool() {
    run_cases(|t| t.starts_with("file"));
}

#[test]
fn replay_log_cases_on_loop_devices_match_the_real_tool() {
    run_cases(|t| t.starts_with("loop"));
}

/// Under the name replay-log bob writes to any device, but never to a mounted one (nor to
/// the image file under a mounted loop device), in one line with exit status 1.
#[test]
fn replay_log_refuses_a_mounted_device() {
    let dir = Dir::new();
    let img = dir.path().join("m.img");
    std::fs::copy(ext4_base(&dir), &img).unwrap();
    let lo = LoopDevice::attach_free(&img).unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let m = bob_core::device::mount::mount(lo.path(), &mnt, "ext4", "").unwrap();
    let log = fixtures().join("logs/ext4.log");
    let link = dir.path().join("replay-log");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bob"), &link).unwrap();
    let dev = lo.path().to_str().unwrap().to_owned();
    let outs = [
        Command::new(&link)
            .args(["--log", log.to_str().unwrap(), "--replay", &dev])
            .output()
            .unwrap(),
        util::bob().args(["log", log.to_str().unwrap(), "--replay", &dev]).output().unwrap(),
        // The image under the mounted loop device is just as live.
        Command::new(&link)
            .args(["--log", log.to_str().unwrap(), "--replay", img.to_str().unwrap()])
            .output()
            .unwrap(),
    ];
    m.unmount().unwrap();
    lo.detach().unwrap();
    assert!(util::leaks_under(dir.path()).is_empty());
    for o in outs {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("mounted on"), "{err}");
    }
}
