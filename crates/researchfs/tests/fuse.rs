//! Each design mounted with the kernel's FUSE on a temporary directory, driven through
//! std::fs, unmounted, remounted and read back; every mount must be gone afterwards.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use researchfs::check::{classify, Model, PathView};
use researchfs::{mkfs, mount, BlockDevice, Design, FileDevice};

/// The two tests mount and unmount FUSE file systems and scan /proc/self/mounts; running
/// them one at a time keeps one test's mounts out of the other's checks (a rare failure
/// under CI load).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn mounted_here(dir: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let dir = dir.canonicalize().unwrap_or(dir.to_owned());
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
}

/// A made file system on a fresh image file, with an empty mount point beside it; both
/// live in a temporary directory that goes with the value.
struct Made {
    _tmp: tempfile::TempDir,
    mnt: std::path::PathBuf,
    dev: Arc<dyn BlockDevice>,
}

/// `design` made on a fresh image of `bytes`.
fn made(design: Design, bytes: u64) -> Made {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let dev: Arc<dyn BlockDevice> =
        Arc::new(FileDevice::create(&tmp.path().join("image"), bytes).unwrap());
    mkfs(design, dev.as_ref(), dev.size()).unwrap();
    Made { _tmp: tmp, mnt, dev }
}

fn big(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

#[test]
fn every_design_round_trips_through_fuse_and_leaves_no_mount() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for design in Design::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let image = tmp.path().join("image");
        let mnt = tmp.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let mut dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::create(&image, 32 << 20).unwrap());
        if design.pm_fenced().is_some() {
            // Conquest: the image file is its disk, a PM region in memory the rest.
            let pm =
                Arc::new(researchfs::MemPm::new(researchfs::ConquestDevice::pm_size(32 << 20)));
            dev = researchfs::ConquestDevice::open(design, dev, pm).unwrap();
        }
        mkfs(design, dev.as_ref(), dev.size()).unwrap();
        dev.end_op().unwrap();

        let m = mount(design, dev.clone(), &mnt).unwrap();
        assert!(mounted_here(&mnt), "{design}: not mounted");
        fs::create_dir(mnt.join("d")).unwrap();
        fs::write(mnt.join("d/small"), b"hello").unwrap();
        let data = big(3 << 20);
        {
            let mut f = fs::File::create(mnt.join("big")).unwrap();
            f.write_all(&data).unwrap();
            f.sync_all().unwrap();
        }
        fs::write(mnt.join("gone"), b"bye").unwrap();
        fs::remove_file(mnt.join("gone")).unwrap();
        fs::hard_link(mnt.join("d/small"), mnt.join("d/link")).unwrap();
        fs::write(mnt.join("tmp"), b"new content").unwrap();
        fs::rename(mnt.join("tmp"), mnt.join("d/renamed")).unwrap();
        fs::write(mnt.join("trunc"), b"0123456789").unwrap();
        fs::OpenOptions::new().write(true).open(mnt.join("trunc")).unwrap().set_len(4).unwrap();
        fs::create_dir(mnt.join("empty")).unwrap();
        fs::remove_dir(mnt.join("empty")).unwrap();
        assert_eq!(fs::metadata(mnt.join("d/small")).unwrap().nlink(), 2, "{design}");
        assert!(fs::remove_dir(mnt.join("d")).is_err(), "{design}: rmdir of a non-empty dir");
        let mut names: Vec<String> = fs::read_dir(mnt.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["link", "renamed", "small"], "{design}");
        m.unmount().unwrap();
        assert!(!mounted_here(&mnt), "{design}: still mounted after unmount");

        let m = mount(design, dev.clone(), &mnt).unwrap();
        m.fs().wait_scan();
        assert_eq!(fs::read(mnt.join("d/small")).unwrap(), b"hello", "{design}");
        assert_eq!(fs::read(mnt.join("d/renamed")).unwrap(), b"new content", "{design}");
        assert_eq!(fs::read(mnt.join("trunc")).unwrap(), b"0123", "{design}");
        assert!(fs::read(mnt.join("big")).unwrap() == data, "{design}: big file differs");
        assert!(!mnt.join("gone").exists());
        // The checker sees a clean, complete tree through the mount.
        let model = Model::new()
            .dir("d")
            .file("d/small", b"hello")
            .file("d/link", b"hello")
            .file("d/renamed", b"new content")
            .file("trunc", b"0123")
            .file("big", &data);
        let report = classify(&PathView::new(&mnt), &[model]);
        assert!(
            report.silent().is_empty() && report.errors() == 0,
            "{design}: {:?}",
            report.accesses
        );
        drop(m); // unmount on drop
        assert!(!mounted_here(&mnt), "{design}: still mounted after drop");

        let r = researchfs::fsck(design, dev.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{design}: {:?}", r.problems);
    }
}

#[test]
fn checker_through_fuse_sees_orderless_garbage_and_nofs_eio() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Zero a written data block behind the file system's back (a lost write): orderless
    // reads zeros as data, NoFS returns EIO.
    for design in [Design::Orderless, Design::Nofs] {
        let Made { _tmp, mnt, dev } = made(design, 8 << 20);
        let m = mount(design, dev.clone(), &mnt).unwrap();
        fs::write(mnt.join("f"), b"precious data").unwrap();
        let ino = fs::metadata(mnt.join("f")).unwrap().ino() as u32;
        let blocks = m.fs().blocks_of(ino).unwrap();
        m.unmount().unwrap();
        dev.discard(blocks[0].1 * 4096, 4096).unwrap();

        let m = mount(design, dev.clone(), &mnt).unwrap();
        let report = classify(&PathView::new(&mnt), &[Model::new().file("f", b"precious data")]);
        match design {
            Design::Nofs => {
                assert!(report.silent().is_empty(), "{:?}", report.accesses);
                assert_eq!(report.errors(), 1);
                let err = fs::read(mnt.join("f")).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(libc::EIO));
            }
            _ => assert_eq!(report.silent_kinds(), [researchfs::ErrorKind::Gd]),
        }
        m.unmount().unwrap();
        assert!(!mounted_here(&mnt));
    }
}

#[test]
fn programs_reach_osync_and_dsync_through_the_control_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for design in [Design::Optfs, Design::JournalFlush, Design::Orderless] {
        let Made { _tmp, mnt, dev } = made(design, 16 << 20);
        let m = mount(design, dev.clone(), &mnt).unwrap();
        let ctl = mnt.join(researchfs::fuse::SYNC_CONTROL);
        fs::write(mnt.join("f"), b"one").unwrap();
        if !design.has_osync() {
            assert!(!ctl.exists(), "{design}: a control file without osync");
            assert!(fs::write(&ctl, b"osync").is_ok(), "{design}: an ordinary file then");
            m.unmount().unwrap();
            continue;
        }
        let commits = || m.fs().journal_stats().unwrap().commits;
        assert_eq!(commits(), 0, "{design}");
        fs::write(&ctl, b"osync").unwrap();
        assert_eq!(commits(), 1, "{design}: osync ends the transaction");
        fs::write(mnt.join("g"), b"two").unwrap();
        let flushes = m.fs().journal_stats().unwrap().flushes;
        fs::write(&ctl, b"dsync\n").unwrap();
        assert_eq!(commits(), 2, "{design}");
        assert!(m.fs().journal_stats().unwrap().flushes > flushes, "{design}: dsync flushes");
        let e = fs::write(&ctl, b"sync please").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{design}");
        let names: Vec<String> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names.iter().any(|n| n.as_str() == researchfs::fuse::SYNC_CONTROL), "{names:?}");
        m.unmount().unwrap();
        assert!(!mounted_here(&mnt));
    }
}

#[test]
fn programs_run_valor_transactions_through_the_control_file() {
    use std::os::unix::fs::FileExt;
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for design in [Design::Valor, Design::JournalFlush] {
        let Made { _tmp, mnt, dev } = made(design, 16 << 20);
        let m = mount(design, dev.clone(), &mnt).unwrap();
        let ctl = mnt.join(researchfs::fuse::TXN_CONTROL);
        let call = |word: &str| {
            fs::OpenOptions::new()
                .write(true)
                .open(&ctl)
                .and_then(|mut f| f.write_all(word.as_bytes()))
        };
        if !design.has_txn() {
            assert!(!ctl.exists(), "{design}: a transaction control file without transactions");
            m.unmount().unwrap();
            continue;
        }
        let old = big(3 * 4096);
        fs::write(mnt.join("a"), &old).unwrap();
        let a = fs::OpenOptions::new().write(true).open(mnt.join("a")).unwrap();
        // Committed: the new page stays.
        call("begin").unwrap();
        a.write_all_at(&[9u8; 4096], 0).unwrap();
        call("commit-durable").unwrap();
        // Aborted: the old page comes back.
        call("begin").unwrap();
        a.write_all_at(&[8u8; 4096], 4096).unwrap();
        assert_eq!(
            fs::read(mnt.join("a")).unwrap()[4096],
            8,
            "the open transaction's write reads back"
        );
        call("abort\n").unwrap();
        let now = fs::read(mnt.join("a")).unwrap();
        assert_eq!(&now[..4096], &[9u8; 4096][..]);
        assert_eq!(&now[4096..], &old[4096..]);
        // Out of turn, unknown words, and a growing write inside a transaction: EINVAL.
        let einval = |r: std::io::Result<()>| r.unwrap_err().raw_os_error();
        assert_eq!(einval(call("commit")), Some(libc::EINVAL));
        assert_eq!(einval(call("rollback")), Some(libc::EINVAL));
        call("begin").unwrap();
        assert_eq!(einval(call("begin")), Some(libc::EINVAL));
        assert_eq!(einval(a.write_all_at(b"grow", 3 * 4096)), Some(libc::EINVAL));
        call("commit").unwrap();
        let stats = m.fs().valor_stats().unwrap();
        assert_eq!((stats.commits, stats.aborts, stats.records), (2, 1, 2), "{stats:?}");
        let names: Vec<String> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["a"]);
        drop(a);
        m.unmount().unwrap();
        assert!(!mounted_here(&mnt));
    }
}

/// xsyncfs' output file through FUSE: a program's write to it is held while the file it
/// wrote before is not durable, fsync of that file returns without a commit, and the
/// next request releases the output; other designs have no output file.
#[test]
fn programs_write_output_to_xsyncfs_and_it_is_held_until_durable() {
    use researchfs::device::{RecordingDevice, Request};
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for design in [Design::Xsyncfs, Design::JournalFlush] {
        let Made { _tmp, mnt, dev: file } = made(design, 16 << 20);
        let dev = Arc::new(RecordingDevice::new(file));
        let m = mount(design, dev.clone(), &mnt).unwrap();
        let out = mnt.join(researchfs::fuse::OUTPUT_FILE);
        if design.output().is_none() {
            assert!(!out.exists(), "{design}: an output file without external synchrony");
            m.unmount().unwrap();
            continue;
        }
        let mut f = fs::File::create(mnt.join("f")).unwrap();
        f.write_all(b"data").unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(m.fs().journal_stats().unwrap().commits, 0, "fsync returned at once");
        let mut o = fs::OpenOptions::new().write(true).open(&out).unwrap();
        o.write_all(b"hello\n").unwrap();
        drop(o);
        assert_eq!(m.fs().held_output(), ["hello"], "held: f is not durable");
        fs::write(mnt.join("g"), b"more").unwrap();
        assert!(m.fs().held_output().is_empty(), "released after the triggered commit");
        let log = dev.log();
        let at = log.iter().position(|r| matches!(r, Request::Output { text } if text == "hello"));
        let flush = log.iter().position(|r| *r == Request::Flush);
        assert!(at.is_some() && flush < at, "released after a flush: {at:?} {flush:?}");
        let names: Vec<String> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names.iter().any(|n| n.as_str() == researchfs::fuse::OUTPUT_FILE), "{names:?}");
        m.unmount().unwrap();
        assert!(!mounted_here(&mnt));
    }
}

/// A loop device over a small file, detached on drop: the token a fuseblk mount needs.
struct Loop(String);

impl Loop {
    /// `None` (after saying why) where the machine cannot bind one; with `CI=true` that
    /// fails the test instead, as every missing prerequisite does.
    fn new(backing: &Path) -> Option<Loop> {
        fs::write(backing, vec![0u8; 1 << 20]).unwrap();
        let out =
            std::process::Command::new("losetup").arg("-f").arg("--show").arg(backing).output();
        match out {
            Ok(o) if o.status.success() => {
                Some(Loop(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
            }
            other => {
                let why = format!("no loop device (losetup: {other:?})");
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
                eprintln!("skipped: {why}");
                None
            }
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

#[test]
fn sync_and_syncfs_reach_a_design_mounted_as_fuseblk() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Made { _tmp, mnt, dev } = made(Design::JournalFlush, 16 << 20);
    let Some(blk) = Loop::new(&_tmp.path().join("token")) else { return };
    let m = researchfs::mount_on_block_device(
        Design::JournalFlush,
        dev.clone(),
        &mnt,
        researchfs::Options::default(),
        Path::new(&blk.0),
    )
    .unwrap();
    assert!(mounted_here(&mnt));
    // Linux forwards sync(2) to fuseblk servers from 6.18 on ("fuse: enable FUSE_SYNCFS
    // for all fuseblk servers"); before, the mount works and sync reaches nothing.
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>());
    let (major, minor) = (v.next().unwrap().unwrap(), v.next().unwrap().unwrap());
    if (major, minor) < (6, 18) {
        assert!(!m.sync_reaches_design(), "Linux {release} forwards it after all: update the doc");
        let why = format!("Linux {release} does not forward syncfs(2) to a fuseblk mount");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("skipped: {why}");
        return;
    }
    assert!(m.sync_reaches_design(), "syncfs(2) did not reach the design on Linux {release}");
    let stats = || m.fs().journal_stats().unwrap();
    fs::write(mnt.join("f"), b"one").unwrap();
    let before = stats();
    // SAFETY: sync(2) takes nothing and cannot fail.
    unsafe { libc::sync() };
    let after = stats();
    assert_eq!(after.commits, before.commits + 1, "sync(2) commits the running transaction");
    assert!(after.flushes > before.flushes, "and flushes");
    fs::write(mnt.join("g"), b"two").unwrap();
    let dir = fs::File::open(&mnt).unwrap();
    // SAFETY: syncfs on a valid descriptor.
    assert_eq!(unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) }, 0);
    drop(dir);
    assert_eq!(stats().commits, after.commits + 1, "syncfs(2) commits too");
    // Everything else still goes through fuser, and the mount goes away cleanly.
    assert_eq!(fs::read(mnt.join("g")).unwrap(), b"two");
    m.unmount().unwrap();
    assert!(!mounted_here(&mnt));
    let m = mount(Design::JournalFlush, dev, &mnt).unwrap();
    assert_eq!(fs::read(mnt.join("f")).unwrap(), b"one");
    m.unmount().unwrap();
}
