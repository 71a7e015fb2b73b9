//! What each configuration promises: its guarantee profile, declared once here beside the
//! configurations and read by everything that judges one. The oracle's promises
//! ([`crate::check::Subject::durable_ops`] counts a persistence point only where the
//! profile says it promises durability), the read-only fsck's verdict (findings a
//! design leaves by design are not damage), the read-error verdict (a design whose paper
//! detects damage by returning an error), `bob explore` (the guarantees a workload is
//! held to, the operations it skips, the output written after a persistence point of an
//! externally synchronous design) and docs/researchfs.md all take it from [`profile`].
//! So a failure bob reports on a design is a departure from the design's own paper.
//!
//! A kernel configuration promises POSIX plus what its file system documents
//! ([`Guarantee`]). A research design promises what its paper says; a negative control
//! claims what its design claims (it is the design less one mechanism, and its failures
//! are the point).

use researchfs::{Design, ErrorKind};
use workloads::enumerate::CoreOp;
use workloads::{Guarantee, Op};

use super::FsConfig;

/// What a call promises when it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Promise {
    /// What it covers is durable once it returned (POSIX's fsync).
    Durable,
    /// Durable before the next output leaves the program, not at the return (external
    /// synchrony): judged at the output.
    BeforeOutput,
    /// Order only: everything before it persists before anything after it, eventually.
    Ordered,
    /// Nothing becomes durable because of it.
    Nothing,
    /// The configuration has no such call.
    Absent,
}

impl Promise {
    /// The word the docs and `bob list` use.
    pub fn name(self) -> &'static str {
        match self {
            Promise::Durable => "durable",
            Promise::BeforeOutput => "before output",
            Promise::Ordered => "ordered",
            Promise::Nothing => "nothing",
            Promise::Absent => "-",
        }
    }
}

/// A configuration's guarantee profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Profile {
    /// fsync(2) of a file.
    pub fsync: Promise,
    /// fdatasync(2) of a file.
    pub fdatasync: Promise,
    /// fsync(2) (or fdatasync) of a directory: the names in it.
    pub dir_fsync: Promise,
    /// sync(2).
    pub sync: Promise,
    /// syncfs(2).
    pub syncfs: Promise,
    /// OptFS' `osync()` (the journaling designs' control file).
    pub osync: Promise,
    /// OptFS' `dsync()`.
    pub dsync: Promise,
    /// A transaction's commit (Valor's `Log Resolve`).
    pub txn_commit: Promise,
    /// A transaction's durable commit (Valor's Transaction Sync).
    pub txn_commit_durable: Promise,
    /// Promises beyond POSIX the file system documents.
    pub guarantees: Vec<Guarantee>,
    /// Kinds of the read-only fsck's findings the design leaves after a crash by design
    /// (soft updates' leaks): not damage.
    pub accepted_fsck: Vec<ErrorKind>,
    /// A read that fails is the design detecting damage, as its paper says it does (NoFS
    /// returns an error instead of wrong data): not a failure of the crash state.
    pub detects_by_error: bool,
    /// Generated operations the configuration does not have: `bob explore` skips (and
    /// counts) the workloads that use them.
    pub unsupported: Vec<CoreOp>,
    /// Where the profile comes from, in a few words (the paper and section).
    pub source: &'static str,
}

impl Profile {
    fn posix(source: &'static str) -> Profile {
        use Promise::*;
        Profile {
            fsync: Durable,
            fdatasync: Durable,
            dir_fsync: Durable,
            sync: Durable,
            syncfs: Durable,
            osync: Absent,
            dsync: Absent,
            txn_commit: Absent,
            txn_commit_durable: Absent,
            guarantees: Vec::new(),
            accepted_fsck: Vec::new(),
            detects_by_error: false,
            unsupported: Vec::new(),
            source,
        }
    }

    /// What op `op` promises here; `dir`: its path is a directory (fsync of a directory).
    /// Ops that are no persistence point promise [`Promise::Nothing`] of their own.
    pub(crate) fn promise_of(&self, op: &Op, dir: bool) -> Promise {
        match op {
            Op::Fsync { .. }
            | Op::Fdatasync { .. }
            | Op::FdFsync { .. }
            | Op::FdFdatasync { .. }
                if dir =>
            {
                self.dir_fsync
            }
            Op::Fsync { .. } | Op::FdFsync { .. } => self.fsync,
            Op::Fdatasync { .. } | Op::FdFdatasync { .. } => self.fdatasync,
            Op::Sync => self.sync,
            Op::Syncfs => self.syncfs,
            Op::Dsync => self.dsync,
            Op::Osync => self.osync,
            Op::TxnCommit { durable: true } => self.txn_commit_durable,
            Op::TxnCommit { durable: false } => self.txn_commit,
            // O_SYNC plus fsync of the file and of its directory.
            Op::Creat { sync: true, .. } => self.fsync,
            // The kernel runs a synchronous write's end as a fsync (O_SYNC) or a
            // fdatasync (O_DSYNC) of the range written.
            Op::SyncWrite { flag: workloads::SyncFlag::Sync, .. } => self.fsync,
            Op::SyncWrite { flag: workloads::SyncFlag::Dsync, .. } => self.fdatasync,
            _ => Promise::Nothing,
        }
    }

    /// Where the profile departs from POSIX, one phrase each ("sync: nothing", "fsck
    /// accepts OB,OI"): what `bob explore` reports beside a configuration.
    pub(crate) fn departures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let calls = [
            ("fsync", self.fsync),
            ("fdatasync", self.fdatasync),
            ("dir fsync", self.dir_fsync),
            ("sync", self.sync),
            ("syncfs", self.syncfs),
        ];
        let mut by_promise: Vec<(Promise, Vec<&str>)> = Vec::new();
        for (name, promise) in calls.into_iter().filter(|(_, p)| *p != Promise::Durable) {
            match by_promise.iter_mut().find(|(p, _)| *p == promise) {
                Some((_, names)) => names.push(name),
                None => by_promise.push((promise, vec![name])),
            }
        }
        for (promise, names) in by_promise {
            out.push(format!("{}: {}", names.join(", "), promise.name()));
        }
        if !self.accepted_fsck.is_empty() {
            let kinds: Vec<&str> = self.accepted_fsck.iter().map(|k| k.code()).collect();
            out.push(format!("fsck accepts {}", kinds.join(",")));
        }
        if self.detects_by_error {
            out.push("a read error is its detection".into());
        }
        if !self.unsupported.is_empty() {
            // Lacking every operation beyond Ace's is said once, not as eleven names.
            let beyond = CoreOp::BEYOND_ACE.iter().all(|o| self.unsupported.contains(o));
            let ops: Vec<&str> = self
                .unsupported
                .iter()
                .filter(|o| !(beyond && CoreOp::BEYOND_ACE.contains(o)))
                .map(|o| o.name())
                .collect();
            out.push(match (beyond, ops.is_empty()) {
                (true, true) => "no operation beyond Ace's".to_owned(),
                (true, false) => format!("no {}, nor any operation beyond Ace's", ops.join(",")),
                (false, _) => format!("no {}", ops.join(",")),
            });
        }
        out
    }

    /// Whether a workload on this configuration writes an output after each persistence
    /// point, so that what the point promises is judged where the design keeps it.
    pub(crate) fn output_after_persistence(&self) -> bool {
        [self.fsync, self.fdatasync, self.dir_fsync, self.sync, self.syncfs]
            .contains(&Promise::BeforeOutput)
    }
}

impl FsConfig {
    /// Why this configuration cannot run `w`: an operation its guarantee profile says it
    /// does not have (the research designs have no symlinks, extended attributes or
    /// fallocate). Such a run is skipped and counted as unsupported, never recorded.
    pub(crate) fn unsupported_op(&self, w: &workloads::Workload) -> Option<String> {
        let missing = profile(self).unsupported;
        let op = w
            .setup
            .iter()
            .chain(&w.ops)
            .find(|op| CoreOp::of(op).is_some_and(|k| missing.contains(&k)))?;
        Some(format!("{} does not support {} ({op})", self.name, op.kind().name()))
    }
}

/// The guarantee profile of `config`.
pub(crate) fn profile(config: &FsConfig) -> Profile {
    match config.design() {
        Some(design) => research(design),
        None => kernel(config),
    }
}

/// POSIX plus the promises the kernel file system documents: ext3/ext4 (a fsync commits
/// the jbd2 transaction holding the new entry) and btrfs (the log tree logs the new name
/// with the inode) persist a file's names with it.
fn kernel(config: &FsConfig) -> Profile {
    let mut p = Profile::posix("POSIX, and the file system's documentation");
    if matches!(config.fstype, "ext3" | "ext4" | "btrfs") {
        p.guarantees.push(Guarantee::FsyncPersistsName);
    }
    p
}

/// What the papers promise (docs/researchfs.md quotes them, section "Guarantee
/// profiles").
fn research(design: Design) -> Profile {
    use Promise::*;
    let mut p = Profile::posix("");
    // The core has regular files and directories only: no symbolic links, no extended
    // attributes, no fallocate (the FUSE glue answers EOPNOTSUPP).
    p.unsupported = vec![CoreOp::Symlink, CoreOp::Setxattr, CoreOp::Removexattr, CoreOp::Falloc];
    // Nor modes, owners and times (the FUSE glue accepts and drops them), reflinks,
    // renameat2's flags or O_TMPFILE: none of the operations beyond Ace's.
    p.unsupported.extend_from_slice(CoreOp::BEYOND_ACE);
    if design.has_osync() {
        p.osync = Ordered;
        p.dsync = Durable;
    }
    if design.has_txn() {
        p.txn_commit = Ordered;
        p.txn_commit_durable = Durable;
    }
    let every_sync = |p: &mut Profile, promise| {
        p.fsync = promise;
        p.fdatasync = promise;
        p.dir_fsync = promise;
        p.sync = promise;
        p.syncfs = promise;
    };
    p.source = match design {
        Design::Orderless => "ext2 (the thesis' ch. 5 comparison): fsync flushes",
        Design::Ordered => "the core with a flush at each dependency: fsync flushes",
        Design::Nofs => {
            // "Disk flushes or barriers should not be issued" (§5.1, goal 1); "any access
            // of a corrupt file or block will return an error" (§5.3.2).
            every_sync(&mut p, Nothing);
            p.detects_by_error = true;
            // What its fsck lists after a crash is what an access detects ("NoFS detects
            // all inconsistencies and reports an error", Table 5.6); orphans its scan
            // reclaims are not listed as damage at all.
            p.accepted_fsck = vec![ErrorKind::Bd, ErrorKind::Hl, ErrorKind::Gd, ErrorKind::Tp];
            "the OptFS thesis ch. 5: no flushes, detection by an error on access"
        }
        Design::JournalFlush => "ext4-style journaling: fsync commits and flushes",
        Design::Optfs | Design::OptfsNocsum => {
            "the OptFS thesis ch. 6: fsync and dsync durable, osync ordered"
        }
        Design::JournalAsync => "ext3 mounted async: fsync commits and flushes",
        Design::JournalSync => "ext3 mounted sync with barriers: every op durable",
        Design::Xsyncfs | Design::XsyncfsEager => {
            // "it creates a commit dependency between the calling process and the active
            // transaction ... the return from the synchronization call is almost
            // instantaneous" (§3.4); output waits for the commit instead (§3.2).
            every_sync(&mut p, BeforeOutput);
            "Rethink the Sync §3.2-3.4: sync and fsync return at once, output waits"
        }
        Design::XsyncfsAsync => {
            every_sync(&mut p, Nothing);
            "ext3 mounted async as xsyncfs' baseline: fsync returns at once"
        }
        Design::Softupdates | Design::SoftupdatesCompletion => {
            // "the only inconsistencies that can appear on the disk are blocks and inodes
            // that are marked as allocated when they are actually free" (§4).
            p.accepted_fsck = vec![ErrorKind::Ob, ErrorKind::Oi];
            "journaling vs soft updates §4: fsync writes back; leaks after a crash"
        }
        Design::Valor | Design::ValorNologOrder => {
            "Valor §3: transactions over an undo log, commit-durable durable"
        }
        Design::Conquest | Design::ConquestNofence => {
            // "the system integrity can remain intact, at the cost of potential memory
            // leaks ... for in-transit memory allocations" (§3.5).
            p.accepted_fsck = vec![ErrorKind::Ob, ErrorKind::Oi];
            "Conquest §3.5: each op committed when it returns; leaks allowed"
        }
    };
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str) -> FsConfig {
        super::super::by_name(name).unwrap()
    }

    #[test]
    fn kernel_configurations_promise_posix_and_what_they_document() {
        let ext4 = profile(&config("ext4-ordered"));
        assert_eq!(ext4.fsync, Promise::Durable);
        assert_eq!(ext4.sync, Promise::Durable);
        assert_eq!(ext4.guarantees, vec![Guarantee::FsyncPersistsName]);
        assert!(ext4.unsupported.is_empty() && ext4.accepted_fsck.is_empty());
        assert!(profile(&config("xfs")).guarantees.is_empty());
    }

    #[test]
    fn designs_promise_what_their_papers_say() {
        let nofs = profile(&config("nofs"));
        assert_eq!(nofs.promise_of(&Op::Sync, false), Promise::Nothing);
        assert!(nofs.detects_by_error);
        let x = profile(&config("xsyncfs"));
        assert_eq!(x.promise_of(&Op::Fsync { path: "/f".into() }, false), Promise::BeforeOutput);
        assert!(x.output_after_persistence());
        assert!(!profile(&config("xsyncfs-async")).output_after_persistence());
        let su = profile(&config("softupdates"));
        assert_eq!(su.accepted_fsck, vec![ErrorKind::Ob, ErrorKind::Oi]);
        assert_eq!(su.promise_of(&Op::Syncfs, false), Promise::Durable);
        let jf = profile(&config("journal-flush"));
        assert_eq!(jf.promise_of(&Op::Osync, false), Promise::Ordered);
        assert_eq!(jf.promise_of(&Op::Dsync, false), Promise::Durable);
        assert_eq!(jf.txn_commit, Promise::Absent);
        assert_eq!(
            nofs.departures(),
            vec![
                "fsync, fdatasync, dir fsync, sync, syncfs: nothing",
                "fsck accepts BD,HL,GD,TP",
                "a read error is its detection",
                "no symlink,setxattr,removexattr,falloc, nor any operation beyond Ace's",
            ]
        );
        assert!(jf.departures().iter().all(|d| !d.contains("nothing")));
        let valor = profile(&config("valor"));
        assert_eq!(valor.promise_of(&Op::TxnCommit { durable: true }, false), Promise::Durable);
        for c in super::super::research() {
            assert!(profile(&c).unsupported.contains(&CoreOp::Symlink), "{}", c.name);
            assert!(!profile(&c).source.is_empty(), "{}", c.name);
        }
    }
}
