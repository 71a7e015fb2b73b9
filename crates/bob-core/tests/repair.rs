//! The repair ladder on real images, with the real kernel, mkfs and repair tools (root):
//!
//! * a crash state whose only persisted write is a torn superblock (built explicitly from
//!   a real ext4 recording, whatever the default strategies tear) does not mount, mounts
//!   after `e2fsck -f -y`, and its property is still judged there: `needs-repair` (or a
//!   violation whose story names the repair), with the cause saying the tear hit the
//!   superblock;
//! * an image whose every superblock is zeroed stays unmountable after the ladder:
//!   `unrecoverable`, with the kernel's error kept;
//! * a violating state whose superblock is also damaged is still `violated` after repair,
//!   its story naming the step ("after e2fsck -f -y: ...");
//! * a damaged primary superblock on xfs and btrfs is repaired by the ladder's first step
//!   (xfs_repair, btrfs rescue super-recover) from a backup: `needs-repair`;
//! * a btrfs state whose file data fails its checksum mounts but cannot be read:
//!   `read-error`, with the path and the errno.

mod common;

use bob_core::check::{self, EngineOptions, Outcome, OutcomeKind, Subject};
use bob_core::crash::{self, Applied, CrashState, StateId, Strategy};
use bob_core::fs::regions::{RegionRole, Regions};
use bob_core::fs::{self, Timeouts};
use bob_core::image::CrashView;
use bob_core::report;
use workloads::Property;

/// One real recording of `property` on `config`, in a private scratch directory, on the
/// 512n disk: a superblock write can tear inside its 4 KiB block.
fn record(dir: &std::path::Path, config: &str, property: Property) -> Subject {
    common::record_subject(dir, config, property, crash::DiskModel::STUDY)
}

/// Crash states whose one persisted write is a write of the primary superblock (bytes
/// 1024..2048) torn so that only the superblock's first sector is new: a 512 B tear
/// inside a 1 KiB superblock whose checksum lives in its second sector.
fn torn_superblock_states(subject: &Subject) -> Vec<CrashState> {
    let mut out = Vec::new();
    for epoch in &subject.epochs {
        for (w, &entry) in epoch.writes.iter().enumerate() {
            let e = &subject.trace.entries[entry];
            let (first, count) = (e.sector, e.nr_sectors);
            if e.data.is_empty() || first > 2 || first + count < 4 {
                continue;
            }
            let k = (2 - first) as u32;
            out.push(CrashState {
                id: StateId {
                    epoch: epoch.index as u32,
                    applied: vec![Applied::torn(w as u32, vec![(k, k)])],
                    pm: None,
                },
                strategy: Strategy::Torn,
            });
        }
    }
    out
}

#[test]
fn a_torn_ext4_superblock_needs_repair_and_the_property_is_judged_after_it() {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), "ext4-ordered", Property::SingleBlockAppend);
    let regions = Regions::of_image(&subject.config, subject.base.path(), Timeouts::default().fsck);
    let role_at = |byte: u64| {
        regions.regions.iter().find(|r| r.start <= byte && byte < r.end).map(|r| r.role)
    };
    assert_eq!(role_at(1024), Some(RegionRole::Superblock), "{regions:?}");
    assert!(
        regions.regions.iter().any(|r| r.role == RegionRole::JournalSuperblock),
        "the journal superblock (first block of inode 8) is known: {regions:?}"
    );

    let states = torn_superblock_states(&subject);
    assert!(!states.is_empty(), "ext4 writes its superblock while the workload runs");
    for s in &states {
        s.id.validate(&subject.epochs, &subject.trace).expect("a valid state id");
    }
    let results = check_states(dir.path(), &subject, &states);

    // Every such state failed the kernel mount, was repaired by e2fsck, and was judged.
    let repaired: Vec<_> = results.iter().filter(|r| r.check.repair.is_some()).collect();
    eprintln!(
        "{} torn-superblock states, {} needed repair: {:?}",
        results.len(),
        repaired.len(),
        results
            .iter()
            .map(|r| (r.state.id.to_string(), r.check.outcome.name()))
            .collect::<Vec<_>>()
    );
    assert!(
        !repaired.is_empty(),
        "some torn superblock stops the mount: {:?}",
        results
            .iter()
            .map(|r| (r.state.id.to_string(), r.check.outcome.clone()))
            .collect::<Vec<_>>()
    );
    for r in &repaired {
        let rep = r.check.repair.as_ref().unwrap();
        assert!(rep.mount_error.starts_with("mount -t ext4"), "{rep:?}");
        assert_eq!(rep.fixed_by.as_deref(), Some("e2fsck -f -y"), "{rep:?}");
        assert!(r.check.did_mount());
        match &r.check.outcome {
            Outcome::NeedsRepair { repaired_by, message } => {
                assert_eq!(repaired_by, "e2fsck -f -y");
                assert_eq!(message, &rep.mount_error);
            }
            Outcome::Violated { story } => {
                assert!(story.starts_with("after e2fsck -f -y: "), "{story}")
            }
            other => panic!("a repaired state is judged, not {other:?}"),
        }
    }
    assert!(
        repaired.iter().any(|r| r.check.outcome.kind() == OutcomeKind::NeedsRepair),
        "single-block-append holds in some repaired state"
    );
    // The kernel's error is the checksum's: EBADMSG.
    assert!(
        repaired.iter().any(|r| r
            .check
            .repair
            .as_ref()
            .unwrap()
            .mount_error
            .contains("Bad message")),
        "{:?}",
        repaired.iter().map(|r| &r.check.repair).collect::<Vec<_>>()
    );

    // The cell's causes group them by the kernel's error and say the tear hit the
    // superblock.
    let positions: Vec<usize> = (0..results.len()).collect();
    let mounts = report::summarize_causes(&results, &positions, &subject, &regions).mounts;
    let needing: usize = mounts.iter().filter(|f| f.repaired_by.is_some()).map(|f| f.count).sum();
    assert_eq!(needing, repaired.len(), "{mounts:?}");
    assert!(mounts.iter().all(|f| f.torn_write_role == Some(RegionRole::Superblock)), "{mounts:?}");
    let (cell, _) = report::Cell::of_results("ext4-ordered", "single-block-append", &results);
    assert!(cell.states_mounted >= repaired.len(), "repaired states mounted: {cell:?}");
    assert_eq!(
        cell.counts.needs_repair
            + cell.counts.violated
            + cell.counts.held
            + cell.counts.unrecoverable
            + cell.counts.read_error
            + cell.counts.fsck_failed
            + cell.counts.timeout,
        results.len()
    );
}

#[test]
fn an_image_without_any_superblock_is_unrecoverable_and_keeps_the_kernels_error() {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), "ext4-ordered", Property::SingleBlockAppend);
    let regions = Regions::of_image(&subject.config, subject.base.path(), Timeouts::default().fsck);
    // The state after the last epoch, written out as a plain image file.
    let image = dir.path().join("no-superblock.img");
    last_state_image(&subject, &image);
    // Zero the primary superblock and every backup.
    let sbs: Vec<_> = regions
        .regions
        .iter()
        .filter(|r| matches!(r.role, RegionRole::Superblock | RegionRole::BackupSuperblock))
        .collect();
    assert!(!sbs.is_empty());
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
        for r in &sbs {
            f.write_all_at(&vec![0u8; (r.end - r.start) as usize], r.start).unwrap();
        }
        f.sync_all().unwrap();
    }
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let checked = check::check_image(&subject, &image, &mnt, Vec::new(), &Timeouts::default())
        .expect("check");
    let Outcome::Unrecoverable { message } = &checked.outcome else {
        panic!("no superblock anywhere: {checked:?}")
    };
    assert!(message.starts_with("mount -t ext4"), "the kernel's error is kept: {message}");
    assert!(!checked.did_mount());
    let rep = checked.repair.as_ref().expect("the ladder ran");
    assert_eq!(rep.fixed_by, None);
    assert_eq!(rep.steps.len(), 1, "e2fsck -f -y, once: {rep:?}");
    assert!(rep.steps[0].starts_with("e2fsck -f -y (exit "), "{rep:?}");
    assert_eq!(checked.outcome.kind().exit_code(), 1);
}

/// The last crash state of `subject` (every epoch applied) as a plain image file.
fn last_state_image(subject: &Subject, path: &std::path::Path) {
    let last = subject.epochs.len() - 1;
    let id = StateId::whole(last as u32, 0..subject.epochs[last].writes.len() as u32);
    let overlay = crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&id);
    CrashView::new(subject.base.clone(), subject.trace.clone(), overlay).materialize(path).unwrap();
}

fn sh(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_btrfs_state_whose_data_fails_its_checksum_is_a_read_error_with_path_and_errno() {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), "btrfs", Property::SingleBlockAppend);
    let workloads::Op::Append { path, .. } = &subject.workload.ops[0] else {
        panic!("single-block-append appends first: {:?}", subject.workload.ops[0])
    };
    let image = dir.path().join("bad-data.img");
    last_state_image(&subject, &image);
    let image_str = image.to_str().unwrap();

    // Where the file's first block lives: btrfs's logical address (filefrag, on a
    // read-only mount), then the device offset (btrfs-map-logical).
    let mnt = dir.path().join("look");
    std::fs::create_dir_all(&mnt).unwrap();
    let mnt_str = mnt.to_str().unwrap();
    sh("mount", &["-t", "btrfs", "-o", "ro,loop", image_str, mnt_str]);
    let frag = std::process::Command::new("filefrag")
        .args(["-v", "-b4096", &format!("{mnt_str}{path}")])
        .output()
        .unwrap();
    sh("umount", &[mnt_str]);
    let frag = String::from_utf8_lossy(&frag.stdout).into_owned();
    // " 0:        0..       0:       3328..      3328:      1:"
    let logical_block: u64 = frag
        .lines()
        .find(|l| l.trim_start().starts_with("0:"))
        .and_then(|l| l.split(':').nth(2))
        .and_then(|f| f.split("..").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("filefrag of {path}: {frag}"));
    let map = sh("btrfs-map-logical", &["-l", &(logical_block * 4096).to_string(), image_str]);
    let physical: u64 = map
        .split_whitespace()
        .skip_while(|w| *w != "physical")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("btrfs-map-logical: {map}"));
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
        f.write_all_at(&[0xAA; 4096], physical).unwrap();
        f.sync_all().unwrap();
    }

    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let checked = check::check_image(&subject, &image, &mnt, Vec::new(), &Timeouts::default())
        .expect("check");
    let Outcome::ReadError { path: failed, error } = &checked.outcome else {
        panic!("a data block that fails its checksum reads as an error: {:?}", checked.outcome)
    };
    assert_eq!(failed, path);
    assert!(error.contains("os error 5"), "EIO: {error}");
    assert!(checked.did_mount());
    assert_eq!(checked.outcome.kind(), OutcomeKind::ReadError);
}

/// A fresh image of `config`, made by its own mkfs.
fn made_image(dir: &std::path::Path, config: &fs::FsConfig) -> std::path::PathBuf {
    let image = dir.join(format!("{}.img", config.name));
    let f = std::fs::File::create(&image).unwrap();
    f.set_len(config.image_bytes).unwrap();
    drop(f);
    let mut args: Vec<&str> = config.mkfs[1..].to_vec();
    args.push(image.to_str().unwrap());
    sh(config.mkfs[0], &args);
    image
}

#[test]
fn superblock_and_log_regions_come_from_each_configurations_real_image() {
    let dir = tempfile::Builder::new().prefix("bob-regions-test-").tempdir().unwrap();
    let timeout = Timeouts::default().fsck;
    let role_at = |r: &Regions, byte: u64| {
        r.regions.iter().find(|x| x.start <= byte && byte < x.end).map(|x| x.role)
    };

    let ext4 = fs::by_name("ext4-ordered").unwrap();
    let r = Regions::of_image(&ext4, &made_image(dir.path(), &ext4), timeout);
    assert_eq!(role_at(&r, 1024), Some(RegionRole::Superblock), "{r:?}");
    // 160 MiB of 4 KiB blocks: two groups, the backup at block 32768.
    assert_eq!(role_at(&r, 32768 * 4096), Some(RegionRole::BackupSuperblock), "{r:?}");
    assert_eq!(r.regions.iter().filter(|x| x.role == RegionRole::JournalSuperblock).count(), 1);

    let xfs = fs::by_name("xfs").unwrap();
    let r = Regions::of_image(&xfs, &made_image(dir.path(), &xfs), timeout);
    assert_eq!(role_at(&r, 0), Some(RegionRole::Superblock), "{r:?}");
    assert!(r.regions.iter().filter(|x| x.role == RegionRole::BackupSuperblock).count() >= 1);
    let log = r.regions.iter().find(|x| x.role == RegionRole::LogStart).expect("the log");
    assert!(log.start > 0 && log.end <= xfs.image_bytes, "{r:?}");

    let btrfs = fs::by_name("btrfs").unwrap();
    let r = Regions::of_image(&btrfs, &made_image(dir.path(), &btrfs), timeout);
    assert_eq!(role_at(&r, 64 << 10), Some(RegionRole::Superblock), "{r:?}");
    assert_eq!(role_at(&r, 64 << 20), Some(RegionRole::BackupSuperblock), "{r:?}");
    assert_eq!(r.regions.len(), 2, "256 GiB is past the image: {r:?}");
}

#[test]
fn an_ext4_state_whose_inode_fails_its_checksum_is_a_read_error_at_that_path() {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), "ext4-ordered", Property::SingleBlockAppend);
    let workloads::Op::Append { path, .. } = &subject.workload.ops[0] else {
        panic!("single-block-append appends first: {:?}", subject.workload.ops[0])
    };
    let image = dir.path().join("bad-inode.img");
    last_state_image(&subject, &image);
    let image_str = image.to_str().unwrap();
    // Where the file's inode lives (debugfs, read-only), then flip a byte of it
    // (i_generation) so that its metadata_csum no longer matches.
    let stat = sh("debugfs", &["-R", &format!("stat {path}"), image_str]);
    let ino: u64 = stat
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("debugfs stat {path}: {stat}"));
    let imap = sh("debugfs", &["-R", &format!("imap <{ino}>"), image_str]);
    // "\tlocated at block 49, offset 0x0b00"
    let word_after = |key: &str, n: usize| {
        imap.split_whitespace()
            .skip_while(|w| *w != key)
            .nth(n)
            .map(|w| w.trim_end_matches(','))
            .unwrap_or_else(|| panic!("debugfs imap: {imap}"))
            .to_owned()
    };
    let block: u64 = word_after("located", 3).parse().unwrap();
    let offset = u64::from_str_radix(word_after("offset", 1).trim_start_matches("0x"), 16).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&image).unwrap();
        let at = block * 4096 + offset + 0x64; // i_generation
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0xff], at).unwrap();
        f.sync_all().unwrap();
    }

    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let checked = check::check_image(&subject, &image, &mnt, Vec::new(), &Timeouts::default())
        .expect("check");
    let Outcome::ReadError { path: failed, error } = &checked.outcome else {
        panic!("an inode that fails its checksum cannot be read: {:?}", checked.outcome)
    };
    assert_eq!(failed, path, "{error}");
    assert!(error.contains("os error 74"), "EBADMSG: {error}");
    assert!(checked.did_mount());
}

/// The last state of a real recording on `config` with its primary superblock damaged
/// (`len` bytes at `at` overwritten), checked: the ladder's first step repairs it from a
/// backup, and the property is judged in the repaired state.
fn damaged_primary_superblock_needs(config: &str, at: u64, len: usize, fixed_by: &str) {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), config, Property::SingleBlockAppend);
    let image = dir.path().join("bad-sb.img");
    last_state_image(&subject, &image);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
        f.write_all_at(&vec![0xff; len], at).unwrap();
        f.sync_all().unwrap();
    }
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let checked = check::check_image(&subject, &image, &mnt, Vec::new(), &Timeouts::default())
        .expect("check");
    let rep = checked.repair.as_ref().unwrap_or_else(|| panic!("{config}: {checked:?}"));
    assert_eq!(rep.fixed_by.as_deref(), Some(fixed_by), "{config}: {rep:?}");
    assert!(rep.mount_error.starts_with(&format!("mount -t {}", subject.config.fstype)), "{rep:?}");
    assert!(checked.snapshot.is_some(), "{config}: judged in the repaired state");
    assert!(
        matches!(&checked.outcome, Outcome::NeedsRepair { repaired_by, .. } if repaired_by == fixed_by),
        "{config}: single-block-append holds in the last state: {:?}",
        checked.outcome
    );
}

#[test]
fn a_damaged_xfs_superblock_needs_xfs_repair() {
    // Bytes 100..108 of AG 0's superblock sector: the checksum no longer matches.
    damaged_primary_superblock_needs("xfs", 100, 8, "xfs_repair");
}

#[test]
fn a_damaged_btrfs_superblock_needs_super_recover() {
    // The primary superblock at 64 KiB, its checksum area; the mirror at 64 MiB is intact.
    damaged_primary_superblock_needs("btrfs", 64 << 10, 32, "btrfs rescue super-recover -y");
}

#[test]
fn a_violation_found_after_repair_is_a_violation_whose_story_names_the_repair() {
    let dir = tempfile::Builder::new().prefix("bob-repair-test-").tempdir().unwrap();
    let subject = record(dir.path(), "ext4-ordered", Property::SingleBlockOverwrite);
    let states = crash::generate(
        &subject.trace,
        &subject.epochs,
        Strategy::DEFAULT,
        &crash::Limits::default(),
    )
    .states;
    let results = check_states(dir.path(), &subject, &states);
    let violated = results
        .iter()
        .find(|r| r.check.outcome.kind() == OutcomeKind::Violated && r.check.repair.is_none())
        .expect("a single-block overwrite is not atomic on ext4-ordered");
    let Outcome::Violated { story: before } = &violated.check.outcome else { unreachable!() };

    // The same state with its primary superblock's checksum broken (a field in its first
    // sector changed): the kernel refuses it, e2fsck repairs it from the backup, and the
    // torn block is still there to be found.
    let image = dir.path().join("violated-bad-sb.img");
    let overlay =
        crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&violated.state.id);
    CrashView::new(subject.base.clone(), subject.trace.clone(), overlay)
        .materialize(&image)
        .unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&image).unwrap();
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 1024 + 0x0C).unwrap(); // s_free_blocks_count_lo
        f.write_all_at(&[b[0] ^ 0x01], 1024 + 0x0C).unwrap();
        f.sync_all().unwrap();
    }
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let durable = subject.durable_ops(&violated.state.id);
    let checked =
        check::check_image(&subject, &image, &mnt, durable, &Timeouts::default()).expect("check");
    let Outcome::Violated { story } = &checked.outcome else {
        panic!("still violated after repair: {:?}", checked.outcome)
    };
    assert_eq!(story, &format!("after e2fsck -f -y: {before}"));
    assert_eq!(checked.repair.as_ref().unwrap().fixed_by.as_deref(), Some("e2fsck -f -y"));
}

/// Every state of `states` through the engine, one worker, scratch under `dir`.
fn check_states(
    dir: &std::path::Path,
    subject: &check::Subject,
    states: &[crash::CrashState],
) -> Vec<check::StateResult> {
    let work_dir = dir.join("check");
    std::fs::create_dir_all(&work_dir).unwrap();
    check::run_states(subject, states.iter().cloned(), &EngineOptions::new(work_dir))
        .expect("check")
}
