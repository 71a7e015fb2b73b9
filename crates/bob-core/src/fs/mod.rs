//! File-system configurations: how to make, mount, recover and read-only check each one.
//!
//! Names follow persistence-properties.md. ext2 and ext3 are served by the ext4 driver on
//! current kernels (CONFIG_EXT4_USE_FOR_EXT2); reports say so. After the study's grid
//! come f2fs, nilfs2 and jfs; docs/filesystems.md says what each of reiserfs, f2fs, nilfs2
//! and jfs promises across a crash and why each is made, recovered and checked as here.
//!
//! Whether a configuration runs is the running kernel's answer, not a list: its file
//! system type must be in /proc/filesystems, after one attempt to load its module (a
//! Debian kernel has ext4, xfs, btrfs, f2fs, nilfs2, jfs and, up to 6.12, reiserfs as
//! modules, listed only once loaded; 6.1 and 6.12 have all of them). reiserfs left Linux in 6.13; on such a kernel its
//! reason says so.
//!
//! Besides the kernel's, bob knows the project's own file systems ([`research`]): the
//! researchfs designs, which run in bob's process over FUSE and store their image through
//! a [`researchfs::BlockDevice`] bob implements, so they need no loop device, kernel
//! driver, mkfs or fsck program. [`Driver`] says which kind a configuration is.

mod profile;
pub(crate) use profile::{profile, Promise};
pub mod regions;
pub(crate) mod roles;

use std::time::Duration;

use serde::Serialize;

/// How a crashed image is brought back before it is inspected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// Mounting replays the journal or log.
    Mount,
    /// Run this repairing fsck first (ext2: `e2fsck -y`), then mount.
    FsckThenMount(&'static [&'static str]),
}

/// One rung of a configuration's repair ladder: what an administrator runs when the
/// kernel will not mount the file system, before trying the mount again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RepairStep {
    /// Program and arguments; the device is appended.
    pub argv: &'static [&'static str],
    /// Run this step only when the previous step exited with this code (`xfs_repair -L`
    /// only after `xfs_repair` exited 2: a dirty log it cannot replay); `None`: whenever
    /// the mount still fails.
    pub only_after_exit: Option<i32>,
}

impl RepairStep {
    /// The step as one line (`xfs_repair -L`), without the device.
    pub fn text(&self) -> String {
        self.argv.join(" ")
    }
}

/// ext2/3/4: a forced, repairing e2fsck.
const REPAIR_EXT: &[RepairStep] =
    &[RepairStep { argv: &["e2fsck", "-f", "-y"], only_after_exit: None }];
/// f2fs: a forced, repairing fsck.f2fs (`-f`: check the whole file system and fix what it
/// finds). Its one question, whether to copy unreachable files into `./lost_found` of the
/// current directory, is answered no ([`answers`]).
const REPAIR_F2FS: &[RepairStep] =
    &[RepairStep { argv: &["fsck.f2fs", "-f"], only_after_exit: None }];
/// jfs: the routine `fsck.jfs -p` (log replay) is its [`Recovery`]; when the kernel still
/// refuses the state, a forced full check and repair (`-f`), and as the manual's last
/// resort, the same without replaying the log (`--omit_journal_replay`: "the log has been
/// severely corrupted and replaying it causes further problems").
const REPAIR_JFS: &[RepairStep] = &[
    RepairStep { argv: &["fsck.jfs", "-f"], only_after_exit: None },
    RepairStep { argv: &["fsck.jfs", "-f", "--omit_journal_replay"], only_after_exit: None },
];
/// reiserfs: what reiserfsck(8) tells an administrator: `--fix-fixable` first, then
/// `--rebuild-tree` (it ignores `--yes`; the `Yes` it asks for is typed, [`answers`]).
/// Not `--rebuild-sb`, which asks for the geometry interactively.
const REPAIR_REISERFS: &[RepairStep] = &[
    RepairStep {
        argv: &["reiserfsck", "--fix-fixable", "--yes", "--quiet"],
        only_after_exit: None,
    },
    RepairStep { argv: &["reiserfsck", "--rebuild-tree", "--quiet"], only_after_exit: None },
];
/// xfs: `xfs_repair`, and zeroing the log (`-L`, which loses its transactions) only when
/// it refused because of a dirty log it cannot replay (exit 2).
const REPAIR_XFS: &[RepairStep] = &[
    RepairStep { argv: &["xfs_repair"], only_after_exit: None },
    RepairStep { argv: &["xfs_repair", "-L"], only_after_exit: Some(2) },
];
/// btrfs: restore the superblock from a good copy, then clear the tree log. Never
/// `btrfs check --repair`, which its manual calls dangerous.
const REPAIR_BTRFS: &[RepairStep] = &[
    RepairStep { argv: &["btrfs", "rescue", "super-recover", "-y"], only_after_exit: None },
    RepairStep { argv: &["btrfs", "rescue", "zero-log"], only_after_exit: None },
];

/// Who implements a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "design")]
pub enum Driver {
    /// A kernel file system on a loop device, made and checked by its own programs.
    Kernel,
    /// A researchfs design served by bob's process over FUSE (mkfs, recovery at mount and
    /// fsck in process).
    Research(researchfs::Design),
}

/// One configuration of the study.
#[derive(Clone, Debug, Serialize)]
pub struct FsConfig {
    /// Name on the command line and in reports.
    pub name: &'static str,
    /// Kernel or research design.
    pub driver: Driver,
    /// One line on what it is.
    pub description: &'static str,
    /// Kernel file-system type passed to mount(2).
    pub fstype: &'static str,
    /// mkfs program and arguments; the device is appended.
    pub mkfs: &'static [&'static str],
    /// Mount options while the workload runs.
    pub mount_options: &'static str,
    /// Extra mount options when crash states are mounted (e.g. xfs `nouuid`, because
    /// every state of one trace carries the same file-system UUID and they are mounted
    /// side by side).
    pub check_mount_extra: &'static str,
    /// Recovery procedure.
    pub recovery: Recovery,
    /// Read-only fsck program and arguments; the device is appended.
    pub fsck: &'static [&'static str],
    /// What an administrator runs, in order, when the kernel will not mount a crash state
    /// (after each step bob mounts again). Empty for the research designs, which have no
    /// repair tool. ext2's routine `e2fsck -y` before mounting is its [`Recovery`], not a
    /// repair.
    pub repair: &'static [RepairStep],
    /// Image size in bytes.
    pub image_bytes: u64,
    /// Journal bytes (where the configuration has a journal sized by bob), which bounds a
    /// transaction and so the multi-block workloads' size.
    pub journal_bytes: Option<u64>,
}

const MIB: u64 = 1 << 20;

const E2FSCK_YES: &[&str] = &["e2fsck", "-f", "-y"];
const E2FSCK_RO: &[&str] = &["e2fsck", "-f", "-n"];
// Lazy init would zero inode tables and the journal in the background while recording,
// polluting the trace; discards at mkfs time are pointless on a fresh image. `-T default`:
// mke2fs gives a file system under 512 MiB the `small` usage type, with four times the
// inodes of any larger one (40,960 here against 10,240); bob's images are small only to be
// fast, so they take the geometry of a normal-sized disk. ext2 and ext3 have no
// uninitialised block groups, so every e2fsck reads every inode table: a quarter of them
// is a quarter of that read.
const MKFS_EXT2: &[&str] = &[
    "mke2fs",
    "-q",
    "-F",
    "-t",
    "ext2",
    "-T",
    "default",
    "-b",
    "4096",
    "-E",
    "nodiscard,lazy_itable_init=0",
];
const MKFS_EXT3: &[&str] = &[
    "mke2fs",
    "-q",
    "-F",
    "-t",
    "ext3",
    "-T",
    "default",
    "-b",
    "4096",
    "-J",
    "size=4",
    "-E",
    "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
];
const MKFS_EXT4: &[&str] = &[
    "mke2fs",
    "-q",
    "-F",
    "-t",
    "ext4",
    "-T",
    "default",
    "-b",
    "4096",
    "-J",
    "size=4",
    "-E",
    "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
];
const MKFS_XFS: &[&str] = &["mkfs.xfs", "-q", "-f", "-K"];
const MKFS_BTRFS: &[&str] = &["mkfs.btrfs", "-q", "-f", "-K"];

/// ext image size: 160 MiB, so that with 4 KiB blocks the file system has a second block
/// group, and in it a backup superblock at block 32768, where `e2fsck` looks for one when
/// the primary is damaged, as on any real ext4. At 128 MiB it had a single group and no
/// backup: a torn primary superblock was beyond any repair.
const EXT_IMAGE_BYTES: u64 = 160 * MIB;

const fn ext(
    name: &'static str,
    description: &'static str,
    fstype: &'static str,
    mkfs: &'static [&'static str],
    mount_options: &'static str,
) -> FsConfig {
    let journaled = !matches!(fstype.as_bytes(), b"ext2");
    FsConfig {
        name,
        driver: Driver::Kernel,
        description,
        fstype,
        mkfs,
        mount_options,
        check_mount_extra: "",
        recovery: if journaled { Recovery::Mount } else { Recovery::FsckThenMount(E2FSCK_YES) },
        fsck: E2FSCK_RO,
        repair: REPAIR_EXT,
        image_bytes: EXT_IMAGE_BYTES,
        journal_bytes: if journaled { Some(4 * MIB) } else { None },
    }
}

/// Every configuration bob knows, in the study's order.
pub fn all() -> Vec<FsConfig> {
    let mut all = ext_family();
    all.push(btrfs());
    all.extend(xfs_family());
    all.extend([reiserfs(), f2fs(), nilfs2(), jfs()]);
    all
}

/// ext2, ext3 and ext4 under the ext4 driver, in their journaling modes.
fn ext_family() -> Vec<FsConfig> {
    vec![
        ext("ext2", "ext2 (ext4 driver), recovery = e2fsck -y then mount", "ext2", MKFS_EXT2, ""),
        ext("ext2-sync", "ext2 mounted -o sync", "ext2", MKFS_EXT2, "sync"),
        ext(
            "ext3-writeback",
            "ext3 (ext4 driver), data=writeback",
            "ext3",
            MKFS_EXT3,
            "data=writeback",
        ),
        ext("ext3-ordered", "ext3 (ext4 driver), data=ordered", "ext3", MKFS_EXT3, "data=ordered"),
        ext("ext3-journal", "ext3 (ext4 driver), data=journal", "ext3", MKFS_EXT3, "data=journal"),
        ext("ext4-writeback", "ext4 data=writeback", "ext4", MKFS_EXT4, "data=writeback"),
        ext("ext4-ordered", "ext4 data=ordered (the default)", "ext4", MKFS_EXT4, "data=ordered"),
        ext(
            "ext4-nodelalloc",
            "ext4 data=ordered without delayed allocation",
            "ext4",
            MKFS_EXT4,
            "data=ordered,nodelalloc",
        ),
        ext("ext4-journal", "ext4 data=journal", "ext4", MKFS_EXT4, "data=journal"),
    ]
}

/// xfs, with its default options and with synchronous namespace operations.
fn xfs_family() -> Vec<FsConfig> {
    let xfs = |name, description, mount_options| FsConfig {
        name,
        driver: Driver::Kernel,
        description,
        fstype: "xfs",
        mkfs: MKFS_XFS,
        mount_options,
        check_mount_extra: "nouuid",
        recovery: Recovery::Mount,
        fsck: &["xfs_repair", "-n"],
        repair: REPAIR_XFS,
        // mkfs.xfs refuses file systems under 300 MB.
        image_bytes: 320 * MIB,
        journal_bytes: None,
    };
    vec![
        xfs("xfs", "xfs, default options", ""),
        xfs("xfs-wsync", "xfs mounted -o wsync (synchronous namespace ops)", "wsync"),
    ]
}

/// btrfs with its default options.
fn btrfs() -> FsConfig {
    FsConfig {
        name: "btrfs",
        driver: Driver::Kernel,
        description: "btrfs, default options",
        fstype: "btrfs",
        mkfs: MKFS_BTRFS,
        mount_options: "",
        check_mount_extra: "",
        recovery: Recovery::Mount,
        // --force skips btrfs check's mount-status probe, which scans every device of
        // the file system's fsid: the other workers' loop devices hold states of the
        // same file system and come and go, and a device detached mid-scan made the probe
        // fail ("could not check mount status: No such device or address") on a state
        // that was fine. bob unmounted the device itself; nothing else mounts it.
        fsck: &["btrfs", "check", "--readonly", "--force"],
        repair: REPAIR_BTRFS,
        image_bytes: 256 * MIB,
        journal_bytes: None,
    }
}

/// reiserfs 3.6, as in the original study.
fn reiserfs() -> FsConfig {
    FsConfig {
        name: "reiserfs",
        driver: Driver::Kernel,
        description: "reiserfs 3.6, data=ordered (the default; in the original study)",
        fstype: "reiserfs",
        // Twice -f: a whole device, no question asked.
        mkfs: &["mkfs.reiserfs", "-q", "-f", "-f"],
        mount_options: "",
        check_mount_extra: "",
        recovery: Recovery::Mount,
        // --yes: no "Do you want to run this program?"; it replays a journal it finds
        // (none, after bob's mount and unmount) and marks the superblock checked.
        fsck: &["reiserfsck", "--check", "--yes", "--quiet"],
        repair: REPAIR_REISERFS,
        // The default journal (8193 blocks, 32 MiB) needs 40 MiB; 64 MiB leaves 32 MiB
        // for the base layout's 16 MiB and the workloads.
        image_bytes: 64 * MIB,
        journal_bytes: None,
    }
}

/// f2fs with its roll-forward recovery.
fn f2fs() -> FsConfig {
    FsConfig {
        name: "f2fs",
        driver: Driver::Kernel,
        description: "f2fs, default options (fsync_mode=posix, roll-forward recovery)",
        fstype: "f2fs",
        // -t 0: no discard of the whole device at mkfs time, pointless on a fresh image.
        mkfs: &["mkfs.f2fs", "-q", "-f", "-t", "0"],
        mount_options: "",
        check_mount_extra: "",
        recovery: Recovery::Mount,
        fsck: &["fsck.f2fs", "--dry-run"],
        repair: REPAIR_F2FS,
        // 2 MiB segments. At 64 MiB mkfs.f2fs leaves 16 MiB to users, less than the base
        // layout; at 96 MiB 36 MiB, and the workloads bring the free sections down to the
        // GC reserve (16 segments), where foreground GC would run during a workload;
        // 128 MiB leaves 62 MiB.
        image_bytes: 128 * MIB,
        journal_bytes: None,
    }
}

/// nilfs2: a log, with no cleaner and no fsck.
fn nilfs2() -> FsConfig {
    FsConfig {
        name: "nilfs2",
        driver: Driver::Kernel,
        description: "nilfs2, default options (order=relaxed), no cleaner running",
        fstype: "nilfs2",
        // -K: no discard at mkfs time.
        mkfs: &["mkfs.nilfs2", "-q", "-f", "-K"],
        mount_options: "",
        check_mount_extra: "",
        recovery: Recovery::Mount,
        // nilfs-utils has no fsck (the kernel's nilfs2.rst lists fsck as unsupported);
        // the mount's own checks (superblock and segment summary checksums) are all.
        fsck: &[],
        repair: &[],
        // The default 8 MiB segments: mkfs.nilfs2 needs 16 (128 MiB and a block). With
        // no cleaner (bob mounts with mount(2), not mount.nilfs2, which would start
        // nilfs_cleanerd) the log only grows, and the kernel keeps 8 segments in
        // reserve; 160 MiB (19 segments) leaves 48 MiB of log after the base layout.
        image_bytes: 160 * MIB,
        journal_bytes: None,
    }
}

/// jfs, its log replayed by fsck.jfs before the mount.
fn jfs() -> FsConfig {
    FsConfig {
        name: "jfs",
        driver: Driver::Kernel,
        description: "jfs, default options (integrity), log replayed by fsck.jfs",
        fstype: "jfs",
        mkfs: &["mkfs.jfs", "-q"],
        mount_options: "",
        check_mount_extra: "",
        // The kernel refuses to mount a dirty jfs read-write (chkSuper: "File System
        // Dirty"); its log is replayed by fsck.jfs, as at boot (fsck -a from fstab).
        recovery: Recovery::FsckThenMount(&["fsck.jfs", "-p"]),
        fsck: &["fsck.jfs", "-n"],
        repair: REPAIR_JFS,
        // mkfs.jfs needs 16 MiB; 48 MiB leaves 46 MiB to users.
        image_bytes: 48 * MIB,
        journal_bytes: None,
    }
}

/// The project's own file systems, the researchfs designs: `orderless` (ext2-like, the
/// negative control), `nofs` (the No-Order File System) and `ordered-core` (the core with
/// flush-ordered writes). They are not in [`all`], which is the default `bob table`: the
/// study's kernel grid stays what it was, and a research design is a row one asks for.
pub(crate) fn research() -> Vec<FsConfig> {
    researchfs::Design::ALL
        .into_iter()
        .map(|design| FsConfig {
            name: design.name(),
            driver: Driver::Research(design),
            description: match design {
                researchfs::Design::Orderless => {
                    "researchfs orderless: ext2-like, no ordering, flush only on fsync (negative control)"
                }
                researchfs::Design::Nofs => {
                    "researchfs NoFS: backpointers, no flushes, allocation rebuilt by a scan"
                }
                researchfs::Design::Ordered => {
                    "researchfs ordered-core: a flush between dependent writes"
                }
                researchfs::Design::JournalFlush => {
                    "researchfs journal-flush: journaling, a flush before and after each commit (ext4-style)"
                }
                researchfs::Design::Optfs => {
                    "researchfs OptFS: optimistic journaling, checksums, no flushes, osync/dsync, ADN"
                }
                researchfs::Design::OptfsNocsum => {
                    "researchfs optfs-nocsum: OptFS without checksums (negative control)"
                }
                researchfs::Design::Softupdates => {
                    "researchfs soft updates: write-back with per-update dependencies and roll-back, a flush where a dependency is released"
                }
                researchfs::Design::SoftupdatesCompletion => {
                    "researchfs soft updates ordered by write completion only, no flushes (negative control)"
                }
                researchfs::Design::Valor => {
                    "researchfs Valor: transactions (begin/commit/abort) over an undo log flushed before the data"
                }
                researchfs::Design::ValorNologOrder => {
                    "researchfs valor-nolog-order: Valor without the flush between log and data (negative control)"
                }
                researchfs::Design::Conquest => {
                    "researchfs Conquest: metadata and small files in persistent memory (atomic 8-byte commits), large data on disk"
                }
                researchfs::Design::ConquestNofence => {
                    "researchfs conquest-nofence: Conquest without cache-line write-backs or fences (negative control)"
                }
                researchfs::Design::JournalAsync => {
                    "researchfs journal-async: the journal, commits on a timer of 8 ops (ext3 async)"
                }
                researchfs::Design::JournalSync => {
                    "researchfs journal-sync: every op commits and flushes before it returns (ext3 sync)"
                }
                researchfs::Design::Xsyncfs => {
                    "researchfs xsyncfs: fsync returns at once, output held until durable"
                }
                researchfs::Design::XsyncfsEager => {
                    "researchfs xsyncfs-eager: xsyncfs releasing output at once (negative control)"
                }
                researchfs::Design::XsyncfsAsync => {
                    "researchfs xsyncfs-async: fsync returns at once, timer commits, output never held"
                }
            },
            fstype: "fuse.researchfs",
            mkfs: &[],
            mount_options: "",
            check_mount_extra: "",
            recovery: Recovery::Mount,
            fsck: &[],
            repair: &[],
            image_bytes: RESEARCH_IMAGE_BYTES,
            journal_bytes: None,
            })
        .collect()
}

/// Image size of the research designs: room for the base layout (four 1 MiB files) with
/// space to spare; NoFS scans the whole image at every mount, so smaller is faster.
const RESEARCH_IMAGE_BYTES: u64 = 16 * MIB;

/// Kernel configurations outside the study's grid (not in [`all`], so not in the
/// default `bob table`; named with `--fs`): `ext4-nobarrier`, ext4 data=ordered with
/// barriers off (`barrier=0`: jbd2 issues no flush and no FUA), the OptFS thesis'
/// "ext4 without flushes" (ch. 3 and Table 6.9).
///
/// And the options where crash bugs of the last decade cluster: ext4's fast commits
/// (`ext4-fast-commit`) and asynchronous, checksummed commits (`ext4-async-commit`: jbd2
/// writes the commit block without waiting for the transaction's blocks, trusting the
/// checksum; the kernel allows it only with data=writeback), btrfs without copy-on-write
/// of data (`btrfs-nodatacow`) and with zstd compression (`btrfs-zstd`), and xfs with the
/// smallest log mkfs makes (`xfs-minlog`).
pub fn extra() -> Vec<FsConfig> {
    let mut v = vec![
        ext(
            "ext4-nobarrier",
            "ext4 data=ordered with barrier=0 (no flushes, no FUA)",
            "ext4",
            MKFS_EXT4,
            "data=ordered,barrier=0",
        ),
        ext(
            "ext4-fast-commit",
            "ext4 data=ordered with fast commits (mkfs -O fast_commit)",
            "ext4",
            MKFS_EXT4_FAST_COMMIT,
            "data=ordered",
        ),
        ext(
            "ext4-async-commit",
            "ext4 data=writeback,journal_checksum,journal_async_commit",
            "ext4",
            MKFS_EXT4,
            "data=writeback,journal_checksum,journal_async_commit",
        ),
    ];
    let b = btrfs();
    v.push(FsConfig {
        name: "btrfs-nodatacow",
        description: "btrfs mounted -o nodatacow (data overwritten in place, no data checksums)",
        mount_options: "nodatacow",
        ..b.clone()
    });
    v.push(FsConfig {
        name: "btrfs-zstd",
        description: "btrfs mounted -o compress=zstd",
        mount_options: "compress=zstd",
        ..b
    });
    // The original study's other reiserfs modes, beside the default (`reiserfs`,
    // data=ordered). `nolog` still journals in memory but writes no journal blocks (its
    // documentation calls it a work in progress), so a crash leaves what the metadata
    // writes in place left.
    let r = reiserfs();
    for (name, description, mount_options) in [
        ("reiserfs-nolog", "reiserfs 3.6 mounted -o nolog (no journal writes)", "nolog"),
        ("reiserfs-writeback", "reiserfs 3.6, data=writeback", "data=writeback"),
        ("reiserfs-journal", "reiserfs 3.6, data=journal", "data=journal"),
    ] {
        v.push(FsConfig { name, description, mount_options, ..r.clone() });
    }
    let x = xfs_family().remove(0);
    v.push(FsConfig {
        name: "xfs-minlog",
        description: "xfs with the smallest log mkfs.xfs makes here (1368 blocks, 5.3 MiB)",
        mkfs: MKFS_XFS_MINLOG,
        ..x
    });
    v
}

/// ext4 with the fast-commit area in its journal.
const MKFS_EXT4_FAST_COMMIT: &[&str] = &[
    "mke2fs",
    "-q",
    "-F",
    "-t",
    "ext4",
    "-T",
    "default",
    "-b",
    "4096",
    "-J",
    "size=4",
    "-O",
    "fast_commit",
    "-E",
    "nodiscard,lazy_itable_init=0,lazy_journal_init=0",
];

/// mkfs.xfs refuses logs under 64 MiB (and file systems under 300 MB) unless it runs
/// under fstests, which it knows by these three variables; 1368 blocks is the smallest
/// log it then makes for bob's 320 MiB image.
const MKFS_XFS_MINLOG: &[&str] = &[
    "env",
    "TEST_DIR=/nonexistent",
    "TEST_DEV=/nonexistent",
    "QA_CHECK_FS=1",
    "mkfs.xfs",
    "-q",
    "-f",
    "-K",
    "-l",
    "size=1368b",
];

/// Every configuration: [`all`], [`extra`], then [`research`].
pub fn every() -> Vec<FsConfig> {
    let mut v = all();
    v.extend(extra());
    v.extend(research());
    v
}

/// Looks a configuration up by name (kernel or research).
pub fn by_name(name: &str) -> Option<FsConfig> {
    every().into_iter().find(|c| c.name == name)
}

/// Names of every configuration, for error messages.
pub fn names() -> Vec<&'static str> {
    every().iter().map(|c| c.name).collect()
}

/// What bob's disk offers a configuration while it is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiskFeatures {
    /// Cache flushes (every configuration).
    pub flush: bool,
    /// Forced unit access writes. A kernel file system on bob's loop device sees no FUA
    /// (the block layer follows each FUA write with a flush, which the `real` FUA model
    /// undoes); a research design passes FUA straight to the disk.
    pub fua: bool,
    /// Asynchronous durability notifications: the durability timeout T_D in write
    /// requests ([`crate::record::RecordingDisk::set_adn`]); `None`: none sent.
    pub adn_requests: Option<u32>,
}

impl FsConfig {
    /// The disk features bob's recording disk offers this configuration: notifications
    /// only to a design that listens for them (they are barriers in its traces; every
    /// other configuration's traces stay what they were).
    pub(crate) fn disk_features(&self) -> DiskFeatures {
        DiskFeatures {
            flush: true,
            fua: true,
            adn_requests: self.design().and_then(researchfs::Design::adn_requests),
        }
    }

    /// Options used when mounting a crash state: the configuration's, its extra ones for
    /// checks, and `noatime` for a kernel file system: the walk reads files, and their
    /// access times written back at unmount would make the image fsck reads differ from
    /// state to state by the clock alone (see `check::reads::FsckMemo`).
    pub(crate) fn check_mount_options(&self) -> String {
        let noatime = if self.design().is_none() { "noatime" } else { "" };
        [self.mount_options, self.check_mount_extra, noatime]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Workload sizes for this configuration: multi-block runs exceed one journal
    /// transaction (a quarter of the journal for jbd2), with room to spare.
    pub fn workload_params(&self) -> workloads::Params {
        let mut params = workloads::Params::default();
        if self.design().is_some() {
            // The large files only need to span indirect blocks here; 1 MiB does, and
            // keeps the in-process setup (every byte through FUSE) quick.
            params.large_file_bytes = 1 << 20;
        }
        if let Some(journal) = self.journal_bytes {
            params.multi_block_bytes = params.multi_block_bytes.max(journal / 4 * 2);
        }
        // Only a journal that carries file data (data=journal) splits a large write into
        // several commits by its size (measured: a 2 MiB append spans 6 barriers on
        // ext4-journal). Everywhere else the write's data goes out in one epoch at
        // writeback, whatever the journal or log size (measured: one epoch on
        // ext4-ordered, xfs and btrfs), so the op meets a sync(2) halfway instead.
        params.commit_midway = !self.mount_options.contains("data=journal");
        params
    }

    /// The drain schedules this configuration is recorded under. Kernel file systems:
    /// all of them. The research designs run in bob's process and every write reaches
    /// the device when its call returns: there is no page cache whose writeback
    /// `writeback-commit` could start early, so that schedule records what `sync` does
    /// and is left out; `sync` and `syncfs` are both recorded.
    pub fn schedules(&self) -> Vec<workloads::Schedule> {
        use workloads::Schedule;
        if self.design().is_some() {
            vec![Schedule::Sync, Schedule::Syncfs]
        } else {
            Schedule::ALL.to_vec()
        }
    }

    /// Whether programs can call `osync()`/`dsync()` on it (the journaling research
    /// designs).
    pub(crate) fn has_osync(&self) -> bool {
        self.design().is_some_and(researchfs::Design::has_osync)
    }

    /// Whether programs can begin, commit and abort transactions on it (Valor).
    pub(crate) fn has_txn(&self) -> bool {
        self.design().is_some_and(researchfs::Design::has_txn)
    }

    /// Whether `property` applies to this configuration: the osync/dsync properties only
    /// where programs can call them, the transaction properties only where programs can
    /// run transactions, `output-durable` only where there is an output file.
    pub fn applies(&self, property: workloads::Property) -> bool {
        (!property.needs_osync() || self.has_osync())
            && (!property.needs_txn() || self.has_txn())
            && (!property.needs_output() || self.has_output())
    }

    /// Whether programs can write output to an output file that the file system holds
    /// or releases (researchfs' xsyncfs family, `researchfs::fuse::OUTPUT_FILE`).
    pub(crate) fn has_output(&self) -> bool {
        self.design().is_some_and(|d| d.output().is_some())
    }

    /// The researchfs design, when this is one.
    pub fn design(&self) -> Option<researchfs::Design> {
        match self.driver {
            Driver::Research(d) => Some(d),
            Driver::Kernel => None,
        }
    }

    /// The file system's block size: the largest atomic write unit a disk model may have
    /// for it. Every configuration bob makes uses 4096-byte blocks (mke2fs `-b 4096`, the
    /// xfs and btrfs defaults, researchfs's block).
    pub fn block_size(&self) -> u64 {
        4096
    }

    /// Whether crash-state views of this configuration are served through the kernel's
    /// page cache ([`crate::check::Speedups::cached_views`]). Only xfs: `xfs_repair -n`
    /// reads the last 2 MiB of the log 1 KiB at a time with O_DIRECT, one FUSE round trip
    /// each without the cache's readahead. Elsewhere that readahead costs more than it
    /// saves: it reads up to 128 KiB around each block the check asks for, and every
    /// sector it reads joins the state's reads, so fewer later states agree with it on
    /// them (reuse by reads). Measured (docs/performance.md, "Cached views per file
    /// system"): btrfs cells 4.5x faster without the cache, an ext4 table 1.28x; xfs
    /// cells equal, small xfs runs 1.28x faster with it. reiserfs too: every mount reads
    /// its whole 32 MiB journal a block at a time, so its reads are the journal whatever
    /// readahead adds, and one FUSE request per block costs most where a request is
    /// dearest (a reiserfs-journal cell in a UML 6.1 guest: 166 s without, 105 s with).
    pub(crate) fn prefers_cached_views(&self) -> bool {
        self.fstype == "xfs" || self.fstype == "reiserfs"
    }

    /// Whether the file system flushes its device at least once when it is unmounted (a
    /// cache flush or a FUA write): every kernel file system does, with barriers on;
    /// `barrier=0` and `nobarrier` turn them off on purpose, and the research designs
    /// write as their own designs say. jfs never does: its log pages go out as plain
    /// synchronous writes (`REQ_OP_WRITE | REQ_SYNC` in fs/jfs/jfs_logmgr.c, lbmStartIO)
    /// and nothing in fs/jfs asks for a cache flush, at fsync, sync or unmount; a jfs
    /// recording without flushes is what jfs does, not a flush lost below it.
    pub(crate) fn flushes_at_unmount(&self) -> bool {
        let barriers_off =
            self.mount_options.split(',').any(|o| o == "barrier=0" || o == "nobarrier");
        self.design().is_none() && !barriers_off && self.fstype != "jfs"
    }

    /// Disk byte ranges that mounting (and the routine fsck before it) stamps whatever the
    /// state: times, mount counts, the mount point, and the checksum over them. Dedup
    /// after recovery leaves them out of the recovered image's key
    /// ([`crate::image::CrashView::recovered_digest`]); nothing a snapshot or fsck reads
    /// depends on them. Offsets are the ext4 superblock's (`struct ext4_super_block`, at
    /// byte 1024 for every ext2/3/4 image); xfs and btrfs stamp no times at mount, so
    /// their lists are empty and only byte-identical recoveries merge.
    pub(crate) fn mount_stamps(&self) -> Vec<std::ops::Range<u64>> {
        const SB: u64 = 1024;
        let field = |offset: u64, len: u64| SB + offset..SB + offset + len;
        match self.fstype {
            "ext2" | "ext3" | "ext4" => vec![
                field(0x2C, 4),  // s_mtime
                field(0x30, 4),  // s_wtime
                field(0x34, 2),  // s_mnt_count
                field(0x40, 4),  // s_lastcheck (e2fsck before an ext2 mount)
                field(0x88, 64), // s_last_mounted: each worker mounts elsewhere
                field(0x178, 8), // s_kbytes_written
                field(0x274, 2), // s_wtime_hi, s_mtime_hi
                field(0x277, 1), // s_lastcheck_hi
                field(0x3FC, 4), // s_checksum (over the fields above too)
            ],
            _ => Vec::new(),
        }
    }

    /// Whether the kernel has this file system (per /proc/filesystems, after one attempt
    /// to load its module, [`kernel_has_or_loads`]); for a research design, whether FUSE
    /// is there.
    pub(crate) fn kernel_supports(&self) -> bool {
        if self.design().is_some() {
            return std::path::Path::new("/dev/fuse").exists();
        }
        kernel_has_or_loads(self.fstype)
    }

    /// The Linux release whose tree no longer has this file system, if it left: reiserfs
    /// was removed in 6.13. Said beside a missing driver, on kernels from that release on.
    pub(crate) fn left_linux_in(&self) -> Option<&'static str> {
        (self.fstype == "reiserfs").then_some("6.13")
    }

    /// Makes this configuration's file system on `dev` (a block device or image file),
    /// killing mkfs after `timeout`. A research design is made in process.
    pub(crate) fn mkfs_on(
        &self,
        dev: &std::path::Path,
        timeout: Duration,
    ) -> Result<(), MkfsError> {
        let failed = |program: String, code, line| MkfsError::Failed {
            program,
            device: dev.to_owned(),
            code,
            line,
        };
        if let Some(design) = self.design() {
            let program = format!("researchfs::mkfs({design})");
            let file = researchfs::FileDevice::open(dev)
                .map_err(|e| failed(program.clone(), None, e.to_string()))?;
            return researchfs::mkfs(design, &file, self.image_bytes)
                .map_err(|e| failed(program, None, e.to_string()));
        }
        let dev_str = dev.to_string_lossy();
        let mut args: Vec<&str> = self.mkfs[1..].to_vec();
        args.extend(self.options_for_kernel(crate::host::running_version()));
        args.push(&dev_str);
        let out = crate::device::cmd::run(self.mkfs[0], &args, timeout)?;
        match out.code {
            Some(0) => Ok(()),
            code => Err(failed(self.mkfs[0].to_owned(), code, out.last_line())),
        }
    }

    /// mkfs options that an older kernel than today's mkfs assumes needs (`release`, its
    /// `major.minor`): mkfs.xfs makes bigtime and inobtcount file systems, which kernels
    /// before 5.10 refuse to mount read-write ("SB validate failed"). mkfs.btrfs makes a
    /// free-space tree (a 4.5 feature, a runtime feature to mkfs: `-R`) and no-holes
    /// (3.14), each of which an older kernel refuses to mount.
    fn options_for_kernel(&self, release: (u32, u32)) -> Vec<&'static str> {
        match self.fstype {
            "xfs" if release < (5, 10) => vec!["-m", "bigtime=0,inobtcount=0"],
            "btrfs" if release < (3, 14) => vec!["-R", "^free-space-tree", "-O", "^no-holes"],
            "btrfs" if release < (4, 5) => vec!["-R", "^free-space-tree"],
            _ => Vec::new(),
        }
    }

    /// Gives the file system in `image` (an unmounted image file, fresh from mkfs) a new
    /// random UUID, so that copies of one made image do not share one: a table records
    /// one cell while it mounts crash states of another, and xfs refuses a second mount
    /// of a UUID (without `nouuid`, which recordings do not use) while btrfs takes devices
    /// of one fsid for one file system. ext2/3/4: `tune2fs -U random`; xfs: `xfs_admin -U
    /// generate`; btrfs: `btrfstune -f -u` (it rewrites the metadata's fsid); jfs:
    /// `jfs_tune -U random`; reiserfs: `reiserfstune -u random`. Nothing for researchfs
    /// (no UUID), f2fs (no f2fs-tools program sets one after mkfs) and nilfs2 (nilfs-tune
    /// -U opens only block devices, "cannot open NILFS" on an image file); neither kernel
    /// driver minds two mounted file systems sharing a UUID.
    pub(crate) fn fresh_uuid(
        &self,
        image: &std::path::Path,
        timeout: Duration,
    ) -> Result<(), MkfsError> {
        if self.design().is_some() {
            return Ok(());
        }
        let path = image.to_string_lossy();
        let (program, args): (&str, Vec<&str>) = match self.fstype {
            "ext2" | "ext3" | "ext4" => ("tune2fs", vec!["-U", "random", &path]),
            "xfs" => ("xfs_admin", vec!["-U", "generate", &path]),
            "btrfs" => ("btrfstune", vec!["-f", "-u", &path]),
            "jfs" => ("jfs_tune", vec!["-U", "random", &path]),
            "reiserfs" => ("reiserfstune", vec!["-u", "random", &path]),
            _ => return Ok(()),
        };
        let out = crate::device::cmd::run(program, &args, timeout)?;
        match out.code {
            Some(0) => Ok(()),
            code => Err(MkfsError::Failed {
                program: program.to_owned(),
                device: image.to_owned(),
                code,
                line: out.last_line(),
            }),
        }
    }

    /// Runs the configuration's read-only fsck on `dev`, killed after `timeout`: `None`
    /// when it found nothing (or the configuration has no fsck: nilfs2), else one line
    /// with its exit code and what it complained of (`e2fsck -fn exit 4: ...`).
    pub(crate) fn fsck_on(
        &self,
        dev: &std::path::Path,
        timeout: Duration,
    ) -> Result<Option<String>, crate::device::cmd::CmdError> {
        if self.fsck.is_empty() {
            return Ok(None);
        }
        let out = run_tool(self.fsck, dev, timeout)?;
        Ok((out.code != Some(0)).then(|| {
            format!(
                "{} {}: {}",
                self.fsck.join(" "),
                out.exit_text(),
                complaint(self.fsck[0], &out)
            )
        }))
    }

    /// Whether this machine can run the configuration: [`FsConfig::runs_here`], then
    /// [`FsConfig::programs_installed`]. What bob itself needs (root, /dev/fuse) is
    /// [`privileges`]'s question.
    pub(crate) fn availability(&self) -> Result<(), Unavailable> {
        self.runs_here()?;
        self.programs_installed()
    }

    /// Whether the configuration can run on this kernel at all: it is not retired, and the
    /// kernel has its driver (FUSE, for a research design).
    pub fn runs_here(&self) -> Result<(), Unavailable> {
        match (self.kernel_supports(), self.design()) {
            (true, _) => Ok(()),
            (false, Some(_)) => Err(Unavailable::NoFuse),
            (false, None) => Err(Unavailable::NoDriver {
                config: self.name,
                fstype: self.fstype,
                left_in: self
                    .left_linux_in()
                    .filter(|&v| crate::host::running_version() >= crate::host::release_version(v)),
            }),
        }
    }

    /// Whether the programs the configuration runs (mkfs, fsck, repair tools) are
    /// installed: the first missing one.
    pub(crate) fn programs_installed(&self) -> Result<(), Unavailable> {
        match self.programs().into_iter().find(|p| !crate::device::cmd::available(p)) {
            Some(program) => Err(Unavailable::MissingProgram {
                program,
                package: crate::device::cmd::package_of(program),
            }),
            None => Ok(()),
        }
    }

    /// Programs this configuration needs, for the environment check.
    pub(crate) fn programs(&self) -> Vec<&'static str> {
        if self.design().is_some() {
            return Vec::new();
        }
        // Past `env` and its assignments (`xfs-minlog`), the program itself.
        let mkfs = match self.mkfs {
            ["env", rest @ ..] => rest.iter().find(|a| !a.contains('=')).copied(),
            argv => argv.first().copied(),
        };
        let mut p: Vec<&'static str> = mkfs.into_iter().collect();
        p.extend(self.fsck.first().copied());
        if let Recovery::FsckThenMount(cmd) = self.recovery {
            p.push(cmd[0]);
        }
        for step in self.repair {
            if !p.contains(&step.argv[0]) {
                p.push(step.argv[0]);
            }
        }
        p.dedup();
        p
    }
}

/// The mount option that mounts a crash image of file system type `fstype` read-only
/// without replaying its journal or log (what the crash left, before recovery), where
/// the type has one: a read-only loop device cannot take recovery's writes, and xfs,
/// ext3/ext4 and btrfs refuse to mount a dirty one read-only without it. ext2 has no
/// journal to replay (`None`), nor do the types without such an option (reiserfs, jfs:
/// look at a copy mounted read-write).
pub(crate) fn norecovery_option(fstype: &str) -> Option<&'static str> {
    match fstype {
        "xfs" | "f2fs" | "nilfs2" => Some("norecovery"),
        "ext3" | "ext4" => Some("noload"),
        "btrfs" => Some("rescue=nologreplay"),
        _ => None,
    }
}

/// Whether the running kernel has file system type `fstype` (built in or as a loaded
/// module), per /proc/filesystems. Read by hand: procfs has no parser for this file, and
/// its format is one `[nodev]\tNAME` per line.
pub(crate) fn kernel_has(fstype: &str) -> bool {
    std::fs::read_to_string("/proc/filesystems")
        .map(|s| s.lines().any(|l| l.split_whitespace().last() == Some(fstype)))
        .unwrap_or(false)
}

/// [`kernel_has`], after asking the kernel once per process to load the type's module
/// when it is not listed: a module file system appears in /proc/filesystems only once
/// loaded (mount(2) would load it on demand, but bob asks before it mounts). The module
/// is named by the alias the kernel itself requests for a type it lacks, `fs-<type>`
/// (MODULE_ALIAS_FS, which is also how the ext4 module answers for ext2 and ext3).
/// Where modprobe fails (a kernel without modules, no kmod), the type stays missing.
fn kernel_has_or_loads(fstype: &str) -> bool {
    static TRIED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if kernel_has(fstype) {
        return true;
    }
    let first = {
        let mut tried = TRIED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = !tried.iter().any(|t| t == fstype);
        if first {
            tried.push(fstype.to_owned());
        }
        first
    };
    if first {
        let alias = format!("fs-{fstype}");
        let _ = crate::device::cmd::run("modprobe", &["-q", &alias], Duration::from_secs(10));
    }
    kernel_has(fstype)
}

/// What bob types at a program's questions, as an administrator at its terminal would
/// (its standard input; without answers it is empty). fsck.f2fs asks whether to copy
/// unreachable files into `./lost_found` of the current directory, outside the image;
/// with nothing to read it stops on a failed assertion instead of going on to check or
/// fix (its maintainer's advice is to answer N). reiserfsck --rebuild-tree ignores
/// `--yes` and waits for a typed `Yes`.
pub(crate) fn answers(argv: &[&str]) -> Option<&'static str> {
    match argv {
        ["fsck.f2fs", ..] => Some("n\n"),
        ["reiserfsck", rest @ ..] if rest.contains(&"--rebuild-tree") => Some("Yes\n"),
        _ => None,
    }
}

/// Runs `argv`, one of a configuration's programs (fsck, recovery, a repair step), on
/// `dev` (appended), with its [`answers`], killed after `timeout`.
pub(crate) fn run_tool(
    argv: &[&str],
    dev: &std::path::Path,
    timeout: Duration,
) -> Result<crate::device::cmd::Output, crate::device::cmd::CmdError> {
    let mut cmd = crate::device::cmd::Cmd::new(argv[0], timeout).args(&argv[1..]).args(&[dev]);
    if let Some(text) = answers(argv) {
        cmd = cmd.stdin(text);
    }
    cmd.run()
}

/// The line of a failed fsck's output that says what it found. fsck.f2fs prints one line
/// per check, `[Ok..]` or `[Fail]`, then the time it took: its first failed check.
/// fsck.jfs reports findings inside its phases ("Errors detected in the Fileset
/// File/Directory Allocation Map control information. (F)") and ends with a warning
/// about using the device: its first finding. reiserfsck ends with a banner and the
/// time; its verdict is the last line naming corruptions ("1 found corruptions can be
/// fixed when running with --fix-fixable"). Elsewhere the last line
/// ([`crate::device::cmd::Output::last_line`]).
pub(crate) fn complaint(program: &str, out: &crate::device::cmd::Output) -> String {
    let mut lines = out.stdout.lines().chain(out.stderr.lines());
    let line = match program {
        "fsck.f2fs" => lines.find(|l| l.contains("[Fail]")),
        "fsck.jfs" => lines.find(|l| l.contains(" detected ")),
        "reiserfsck" => lines.rev().find(|l| l.contains("corruptions")),
        // Its last line only sums up ("ERROR: errors found in fs roots"); the first error
        // names what is wrong ("root 5 inode 257 errors 200, dir isize wrong").
        "btrfs" => {
            let all = || out.stdout.lines().chain(out.stderr.lines());
            all().find(|l| is_btrfs_inode_error(l)).or_else(|| all().find(|l| l.contains("ERROR:")))
        }
        _ => None,
    };
    match line {
        Some(line) => line.split_whitespace().collect::<Vec<_>>().join(" "),
        None => out.last_line(),
    }
}

/// Whether `line` is `btrfs check`'s report of an inode's errors: `root 5 inode 257
/// errors 200, dir isize wrong`.
fn is_btrfs_inode_error(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    matches!(words.as_slice(), ["root", _, "inode", _, "errors", ..])
}

/// The line in which a routine recovery tool says it did not replay the journal though it
/// exits as if it had recovered the state: fsck.jfs prints "logredo failed (rc=...).
/// fsck continuing.", then reformats the log (dropping every committed transaction in
/// it) and exits 0. Debian bookworm's jfsutils 1.1.15-5 does so on logs the kernel wrote
/// that upstream's 1.1.15 replays (docs/filesystems.md); a state recovered so is not the
/// kernel's crash state, and a lost fsync in it is the tool's, not the kernel's.
pub(crate) fn journal_not_replayed(
    program: &str,
    out: &crate::device::cmd::Output,
) -> Option<String> {
    let line = match program {
        "fsck.jfs" => {
            out.stdout.lines().chain(out.stderr.lines()).find(|l| l.contains("logredo failed"))
        }
        _ => None,
    }?;
    Some(line.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Why a file system could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MkfsError {
    /// mkfs could not run or hung.
    #[error(transparent)]
    Cmd(#[from] crate::device::cmd::CmdError),
    /// mkfs ran and failed.
    #[error("{program} failed on {device} ({}): {line}", crate::device::cmd::exit_text(*.code))]
    Failed {
        /// The mkfs program.
        program: String,
        /// The device.
        device: std::path::PathBuf,
        /// Exit code.
        code: Option<i32>,
        /// Its last line of output.
        line: String,
    },
}

/// Why a configuration, or bob itself, cannot run on this machine. Nothing was concluded
/// about the file system.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The running kernel lacks the driver (not built in, no module that loads).
    #[error("{config}: {}", no_driver(fstype, *left_in))]
    NoDriver {
        /// Configuration name.
        config: &'static str,
        /// The kernel's name of the file system.
        fstype: &'static str,
        /// The release whose tree no longer has it, when this kernel is that one or later.
        left_in: Option<&'static str>,
    },
    /// A program the configuration runs is not installed.
    #[error("{program} not found; install it (Debian: apt-get install {package})")]
    MissingProgram {
        /// The program.
        program: &'static str,
        /// The Debian package that has it.
        package: &'static str,
    },
    /// Not running as root: loop devices and mounts need CAP_SYS_ADMIN.
    #[error(
        "bob needs root (CAP_SYS_ADMIN) to bind loop devices and mount file systems; run it with sudo"
    )]
    NotRoot,
    /// No /dev/fuse: bob's FUSE disk (recording disk, crash states, research designs)
    /// cannot serve.
    #[error("/dev/fuse is missing: the FUSE disk recorder needs the fuse module")]
    NoFuse,
}

impl Unavailable {
    /// What is missing without the configuration's name, as a table cell or a recording
    /// error that names the configuration itself says it.
    pub fn reason(&self) -> String {
        match self {
            Unavailable::NoDriver { fstype, left_in, .. } => no_driver(fstype, *left_in),
            Unavailable::MissingProgram { program, package } => {
                format!("{program} not found (Debian: apt-get install {package})")
            }
            other => other.to_string(),
        }
    }
}

/// "this kernel has no reiserfs driver (reiserfs left Linux in 6.13)".
fn no_driver(fstype: &str, left_in: Option<&str>) -> String {
    match left_in {
        Some(release) => {
            format!("this kernel has no {fstype} driver ({fstype} left Linux in {release})")
        }
        None => format!("this kernel has no {fstype} driver"),
    }
}

/// Whether this process may do what every run needs: root (loop devices, mounts) and
/// /dev/fuse (bob's disk).
pub(crate) fn privileges() -> Result<(), Unavailable> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Unavailable::NotRoot);
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        return Err(Unavailable::NoFuse);
    }
    Ok(())
}

/// Default timeouts of external steps.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// mkfs.
    pub mkfs: Duration,
    /// Recovery: repairing fsck or mount.
    pub recovery: Duration,
    /// Read-only fsck.
    pub fsck: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            mkfs: Duration::from_secs(120),
            recovery: Duration::from_secs(30),
            fsck: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_btrfs_check_complaint_names_the_first_error_not_the_summary() {
        let out = crate::device::cmd::Output {
            code: Some(1),
            stdout: "[1/7] checking root items\n[4/7] checking fs roots\n\
                     root 5 inode 257 errors 200, dir isize wrong\n\
                     ERROR: errors found in fs roots\nfound 131072 bytes used\n"
                .into(),
            stderr: "Opening filesystem to check...\n".into(),
        };
        assert_eq!(complaint("btrfs", &out), "root 5 inode 257 errors 200, dir isize wrong");
        let summary_only = crate::device::cmd::Output {
            stdout: "[4/7] checking fs roots\nERROR: errors found in fs roots\n".into(),
            ..out.clone()
        };
        assert_eq!(complaint("btrfs", &summary_only), "ERROR: errors found in fs roots");
        assert_eq!(crate::device::cmd::exit_text(Some(4)), "exit 4");
        assert_eq!(crate::device::cmd::exit_text(None), "killed by a signal");
    }

    #[test]
    fn osync_properties_apply_only_where_programs_can_call_osync() {
        // The workloads crate and researchfs name the control file separately.
        assert_eq!(workloads::SYNC_CONTROL, researchfs::fuse::SYNC_CONTROL);
        assert_eq!(workloads::OUTPUT_FILE, researchfs::fuse::OUTPUT_FILE);
        let with: Vec<&str> = every().iter().filter(|c| c.has_osync()).map(|c| c.name).collect();
        assert_eq!(
            with,
            [
                "journal-flush",
                "optfs",
                "optfs-nocsum",
                "journal-async",
                "journal-sync",
                "xsyncfs",
                "xsyncfs-eager",
                "xsyncfs-async"
            ]
        );
        let output: Vec<&str> = every().iter().filter(|c| c.has_output()).map(|c| c.name).collect();
        assert_eq!(output, ["xsyncfs", "xsyncfs-eager", "xsyncfs-async"]);
        let ext4 = by_name("ext4-nobarrier").unwrap();
        assert_eq!(ext4.mount_options, "data=ordered,barrier=0");
        assert!(!all().iter().any(|c| c.name == "ext4-nobarrier"), "not in the default grid");
        for p in workloads::Property::EVERY {
            assert_eq!(
                ext4.applies(*p),
                !p.needs_osync() && !p.needs_txn() && !p.needs_output(),
                "{p}"
            );
            assert_eq!(
                by_name("optfs").unwrap().applies(*p),
                !p.needs_txn() && !p.needs_output(),
                "{p}"
            );
            assert_eq!(by_name("xsyncfs").unwrap().applies(*p), !p.needs_txn(), "{p}");
        }
        assert_eq!(by_name("optfs").unwrap().disk_features().adn_requests, Some(16));
        assert_eq!(by_name("journal-flush").unwrap().disk_features().adn_requests, None);
    }

    #[test]
    fn transaction_properties_apply_only_where_programs_can_run_transactions() {
        // The workloads crate and researchfs name the control file separately.
        assert_eq!(workloads::TXN_CONTROL, researchfs::fuse::TXN_CONTROL);
        let with: Vec<&str> = every().iter().filter(|c| c.has_txn()).map(|c| c.name).collect();
        assert_eq!(with, ["valor", "valor-nolog-order"]);
        let valor = by_name("valor").unwrap();
        for p in workloads::Property::EVERY {
            assert_eq!(valor.applies(*p), !p.needs_osync() && !p.needs_output(), "{p}");
            assert_eq!(
                by_name("ext4-ordered").unwrap().applies(*p),
                !p.needs_osync() && !p.needs_txn() && !p.needs_output()
            );
        }
    }

    #[test]
    fn a_missing_driver_names_itself_and_says_when_reiserfs_left_linux() {
        let no_driver =
            Unavailable::NoDriver { config: "ext4-ordered", fstype: "ext4", left_in: None };
        assert_eq!(no_driver.to_string(), "ext4-ordered: this kernel has no ext4 driver");
        assert_eq!(no_driver.reason(), "this kernel has no ext4 driver");
        let gone =
            Unavailable::NoDriver { config: "reiserfs", fstype: "reiserfs", left_in: Some("6.13") };
        assert_eq!(
            gone.to_string(),
            "reiserfs: this kernel has no reiserfs driver (reiserfs left Linux in 6.13)"
        );
        let missing = Unavailable::MissingProgram { program: "mkfs.xfs", package: "xfsprogs" };
        assert_eq!(
            missing.to_string(),
            "mkfs.xfs not found; install it (Debian: apt-get install xfsprogs)"
        );
        assert_eq!(missing.reason(), "mkfs.xfs not found (Debian: apt-get install xfsprogs)");
        let xfs = by_name("xfs").unwrap();
        assert_eq!(xfs.options_for_kernel((4, 16)), ["-m", "bigtime=0,inobtcount=0"]);
        assert!(xfs.options_for_kernel((5, 10)).is_empty());
        assert!(by_name("ext4-ordered").unwrap().options_for_kernel((4, 16)).is_empty());
        let btrfs = by_name("btrfs").unwrap();
        assert_eq!(
            btrfs.options_for_kernel((3, 13)),
            ["-R", "^free-space-tree", "-O", "^no-holes"]
        );
        assert_eq!(btrfs.options_for_kernel((4, 4)), ["-R", "^free-space-tree"]);
        assert!(btrfs.options_for_kernel((4, 5)).is_empty());
    }

    /// Availability is the running kernel's: a kernel configuration runs here exactly
    /// when its type is in /proc/filesystems once `runs_here` has tried to load its
    /// module, and otherwise says which driver is missing (and, for reiserfs on 6.13 or
    /// later, that it left Linux). On a kernel without the four newer file systems (this
    /// host's), they are unavailable with that reason.
    #[test]
    fn availability_is_asked_of_the_running_kernel() {
        for c in all() {
            let here = c.runs_here();
            assert_eq!(here.is_ok(), kernel_has(c.fstype), "{}: {here:?}", c.name);
            if let Err(e) = here {
                let reason = e.reason();
                assert!(
                    reason.starts_with(&format!("this kernel has no {} driver", c.fstype)),
                    "{reason}"
                );
                let note = c.fstype == "reiserfs" && crate::host::running_version() >= (6, 13);
                assert_eq!(reason.ends_with("(reiserfs left Linux in 6.13)"), note, "{reason}");
            }
        }
        // Asking twice loads nothing new and answers the same.
        let jfs = by_name("jfs").unwrap();
        assert_eq!(jfs.runs_here().is_ok(), jfs.runs_here().is_ok());
    }

    #[test]
    fn the_newer_file_systems_follow_the_study_and_run_their_tools_as_an_administrator_would() {
        let names: Vec<&str> = all().iter().map(|c| c.name).collect();
        assert_eq!(names[names.len() - 5..], ["xfs-wsync", "reiserfs", "f2fs", "nilfs2", "jfs"]);
        let texts = |c: &FsConfig| c.repair.iter().map(RepairStep::text).collect::<Vec<_>>();

        let f2fs = by_name("f2fs").unwrap();
        assert_eq!(f2fs.mkfs, ["mkfs.f2fs", "-q", "-f", "-t", "0"]);
        assert_eq!(f2fs.recovery, Recovery::Mount);
        assert_eq!(f2fs.fsck, ["fsck.f2fs", "--dry-run"]);
        assert_eq!(texts(&f2fs), ["fsck.f2fs -f"]);
        assert_eq!(answers(f2fs.fsck), Some("n\n"));
        assert_eq!(answers(f2fs.repair[0].argv), Some("n\n"));

        let nilfs2 = by_name("nilfs2").unwrap();
        assert_eq!(nilfs2.mkfs, ["mkfs.nilfs2", "-q", "-f", "-K"]);
        assert!(nilfs2.fsck.is_empty() && nilfs2.repair.is_empty());
        assert_eq!(nilfs2.programs(), ["mkfs.nilfs2"]);
        let none = nilfs2.fsck_on(std::path::Path::new("/nonexistent"), Duration::from_secs(1));
        assert_eq!(none.unwrap(), None, "no fsck: nothing run, nothing found");

        let jfs = by_name("jfs").unwrap();
        assert_eq!(jfs.mkfs, ["mkfs.jfs", "-q"]);
        assert_eq!(jfs.recovery, Recovery::FsckThenMount(&["fsck.jfs", "-p"]));
        assert_eq!(jfs.fsck, ["fsck.jfs", "-n"]);
        assert_eq!(texts(&jfs), ["fsck.jfs -f", "fsck.jfs -f --omit_journal_replay"]);
        assert!(!jfs.flushes_at_unmount(), "jfs issues no cache flush");

        let reiserfs = by_name("reiserfs").unwrap();
        assert_eq!(reiserfs.mkfs, ["mkfs.reiserfs", "-q", "-f", "-f"]);
        assert_eq!(reiserfs.fsck, ["reiserfsck", "--check", "--yes", "--quiet"]);
        assert_eq!(
            texts(&reiserfs),
            ["reiserfsck --fix-fixable --yes --quiet", "reiserfsck --rebuild-tree --quiet"]
        );
        assert_eq!(answers(reiserfs.repair[0].argv), None, "--yes is enough there");
        assert_eq!(answers(reiserfs.repair[1].argv), Some("Yes\n"));
        for c in [&f2fs, &nilfs2, &jfs, &reiserfs] {
            assert_eq!(c.left_linux_in().is_some(), c.name == "reiserfs");
            assert!(c.flushes_at_unmount() || c.name == "jfs", "{}", c.name);
            assert_eq!((c.journal_bytes, c.block_size()), (None, 4096), "{}", c.name);
        }
        for c in every().iter().filter(|c| c.design().is_none()) {
            for program in c.programs() {
                let package = crate::device::cmd::package_of(program);
                assert_ne!(package, "the package that provides it", "{}: {program}", c.name);
            }
        }
    }

    #[test]
    fn a_journal_fsck_jfs_did_not_replay_is_seen_though_it_exits_0() {
        // What Debian bookworm's fsck.jfs -p printed on a crash state of Linux 7.2.8.
        let printed = "**Phase 0 - Replay Journal Log\n\
                       logredo failed (rc=-274).  fsck continuing.\n\
                       **Phase 1 - Check Blocks, Files/Directories, and  Directory Entries\n\
                       **Phase 9 - Reformat File System Log\nFilesystem is clean.\n";
        let out = |stdout: &str| crate::device::cmd::Output {
            code: Some(0),
            stdout: stdout.into(),
            stderr: String::new(),
        };
        assert_eq!(
            journal_not_replayed("fsck.jfs", &out(printed)).as_deref(),
            Some("logredo failed (rc=-274). fsck continuing.")
        );
        let replayed =
            "**Phase 0 - Replay Journal Log\n**Phase 1 - Check Blocks\nFilesystem is clean.\n";
        assert_eq!(journal_not_replayed("fsck.jfs", &out(replayed)), None);
        assert_eq!(journal_not_replayed("e2fsck", &out(printed)), None);
    }

    #[test]
    fn a_failed_fsck_is_reported_by_the_line_that_says_what_it_found() {
        let out = |stdout: &str, stderr: &str| crate::device::cmd::Output {
            code: Some(4),
            stdout: stdout.into(),
            stderr: stderr.into(),
        };
        let f2fs = "[FSCK] SIT valid block bitmap checking                [Ok..]\n\
                    [FSCK] valid_inode_count matched with CP              [Fail] [0x0]\n\
                    [FSCK] other corrupted bugs                           [Fail]\n\nDone: 0.000000 secs\n";
        assert_eq!(
            complaint("fsck.f2fs", &out(f2fs, "")),
            "[FSCK] valid_inode_count matched with CP [Fail] [0x0]"
        );
        let reiserfsck = "Checking internal tree..  finished\n\
                          1 found corruptions can be fixed when running with --fix-fixable\n\
                          ###########\nreiserfsck finished at Thu Nov 26 21:59:27 2026\n###########\n";
        assert_eq!(
            complaint("reiserfsck", &out("", reiserfsck)),
            "1 found corruptions can be fixed when running with --fix-fixable"
        );
        let jfs = "**Phase 6 - Perform Approved Corrections\n\
                   **Phase 7 - Verify File/Directory Allocation Maps\n\
                   Errors detected in the Fileset File/Directory Allocation Map control information. (F)\n\
                   **Phase 8 - Verify Disk Allocation Maps\n\
                   Incorrect data detected in disk allocation control structures.\n\
                   File system checked READ ONLY.\nFilesystem is dirty.\n\
                   the results of accessing /dev/loop0 (except by this utility) are undefined.\n";
        assert_eq!(
            complaint("fsck.jfs", &out(jfs, "")),
            "Errors detected in the Fileset File/Directory Allocation Map control information. (F)"
        );
        assert_eq!(
            complaint("e2fsck", &out("", "e2fsck: Bad magic number\n")),
            "e2fsck: Bad magic number"
        );
    }

    #[test]
    fn a_research_design_is_made_in_process_on_an_image_file() {
        let config = research().into_iter().next().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("research.img");
        std::fs::File::create(&image).unwrap().set_len(config.image_bytes).unwrap();
        config.mkfs_on(&image, Duration::from_secs(10)).unwrap();
        let dev = researchfs::FileDevice::open(&image).unwrap();
        let design = config.design().unwrap();
        assert!(researchfs::fsck(design, &dev).unwrap().damage().is_empty());
    }

    /// Every ext image has a normal-sized disk's inode density (`-T default`), not the
    /// `small` type's four times as many, which every e2fsck of ext2 and ext3 reads.
    #[test]
    fn ext_images_have_a_normal_disks_inode_density() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["ext2", "ext3-ordered", "ext4-ordered"] {
            let config = by_name(name).unwrap();
            let image = dir.path().join(format!("{name}.img"));
            std::fs::File::create(&image).unwrap().set_len(config.image_bytes).unwrap();
            config.mkfs_on(&image, Duration::from_secs(60)).unwrap();
            let out =
                std::process::Command::new("dumpe2fs").arg("-h").arg(&image).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let inodes = text
                .lines()
                .find_map(|l| l.strip_prefix("Inode count:"))
                .unwrap_or_else(|| panic!("{name}: no inode count in {text}"));
            // 160 MiB at one inode per 16 KiB.
            assert_eq!(inodes.trim(), "10240", "{name}");
        }
    }
}
