//! The part of a researchfs file system that differs between designs: where flushes go,
//! whether allocation bitmaps are persisted, whether blocks and inodes carry backpointers,
//! and what mount-time recovery does. The core in [`crate::fs`] asks these questions; it
//! never matches on a design's name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A researchfs design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// ext2-like: no ordering, no flushes except on fsync, persisted bitmaps, no checks
    /// beyond a directory block's structure, no recovery. The negative control.
    Orderless,
    /// The No-Order File System (thesis ch. 5): backpointers in every data and indirect
    /// block, a "." entry in every directory block, back links in every inode, a
    /// mutual-agreement check on every access, allocation rebuilt by a background scan,
    /// and no flushes at all unless mounted with [`Options::durable`].
    Nofs,
    /// The core with flush-ordered writes: a flush between every pair of dependent writes
    /// and bitmaps rebuilt at mount after an unclean shutdown. The benchmark's
    /// comparison point.
    #[serde(rename = "ordered-core")]
    Ordered,
    /// The core over a journal with ext4-style pessimistic commits: a flush before and
    /// after each commit block, no checksums, checkpoint right after; fsync = commit +
    /// flush. The baseline of OptFS.
    JournalFlush,
    /// The Optimistic File System (thesis ch. 6): the same journal with transactional
    /// checksums and no flushes, checkpoints and block reuse delayed until the disk's
    /// durability notifications, selective data journaling, `osync()` and `dsync()`.
    Optfs,
    /// OptFS without checksums, still without flushes: the negative control.
    OptfsNocsum,
    /// Soft updates (the journaling-vs-soft-updates paper, §4): a write-back cache whose
    /// updates carry their dependencies, written back with not-yet-safe updates rolled
    /// back; an update counts as durable only after a flush that follows its write, so
    /// each write-back round ends with a flush. Frees wait until the pointer is durably
    /// gone; after a crash only leaks remain (left for a later fsck), link counts too high
    /// are lowered at mount.
    Softupdates,
    /// Soft updates ordered by write completion only, as on the paper's disks (no
    /// flushes in write-back): on a disk with a volatile cache, the negative control.
    SoftupdatesCompletion,
    /// Valor (valor.txt): the ordered core plus a transactional file API (begin, commit,
    /// abort; durable and non-durable commit) over a write-ahead undo log in its own
    /// region of the image: every undo record is durable before its in-place overwrite,
    /// the commit record follows the transaction's data, and recovery at mount rolls
    /// back every transaction without a commit or abort record.
    Valor,
    /// Valor without the flush between the undo records and the in-place data: the
    /// negative control.
    ValorNologOrder,
    /// Conquest (Wang et al. 2002): metadata and small files in persistent memory, each
    /// operation committed by one atomic 8-byte store, large files' data on the disk
    /// ([`crate::conquest`]).
    Conquest,
    /// Conquest with no cache-line write-backs and no fences: the negative control.
    ConquestNofence,
    /// The journal with asynchronous commits (the journaling-vs-soft-updates paper's
    /// async logging; ext3 mounted async): a commit (flush, commit block, flush) every
    /// [`JOURNAL_ASYNC_COMMIT_OPS`] operations, at a full transaction and at unmount;
    /// fsync = commit + flush. Ops may be lost after a crash, never reordered or half
    /// done.
    JournalAsync,
    /// The journal with synchronous commits: every mutating operation commits and
    /// flushes before it returns (ext3 mounted sync with barriers; issue 14's
    /// "journal-flush mounted sync").
    JournalSync,
    /// External synchrony (Nightingale et al., "Rethink the sync"): fsync returns at
    /// once; commits are grouped (a timer of [`JOURNAL_ASYNC_COMMIT_OPS`] operations, and
    /// a commit triggered by output); output written to [`crate::fuse::OUTPUT_FILE`] is
    /// held until the commit covering every write before it is durable.
    Xsyncfs,
    /// xsyncfs releasing output at once (negative control).
    XsyncfsEager,
    /// xsyncfs' asynchronous baseline: fsync returns at once, commits on the timer only,
    /// output never held (ext3 mounted async).
    XsyncfsAsync,
}

/// The commit timer of the asynchronous journaling designs (`journal-async`, the
/// xsyncfs family), in mutating operations: ext3's 5 s timer made deterministic so that
/// recordings replay.
pub const JOURNAL_ASYNC_COMMIT_OPS: u32 = 8;

/// How a design treats output written to [`crate::fuse::OUTPUT_FILE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputRelease {
    /// Held until the commit covering every earlier write is durable (xsyncfs); the
    /// output triggers that commit.
    Held,
    /// Released at once, but still triggering a commit (xsyncfs-eager).
    EagerTriggered,
    /// Released at once, no commit triggered (xsyncfs-async).
    Eager,
}

/// OptFS' durability timeout T_D in write requests: the disk under it notifies after
/// every 16 write requests that all it received is durable. The prototype's T_D was 30 s
/// (thesis §6.3.1); bob's disk counts requests so that recordings replay, and 16 makes
/// the notifications land inside the small workloads bob explores.
pub const OPTFS_T_D: u32 = 16;

/// Mount options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Options {
    /// NoFS only: make fsync flush (the thesis' "unless the user asks for durability").
    pub durable: bool,
    /// The designs with a commit timer (`journal-async`, the xsyncfs family): its period
    /// in mutating operations instead of [`JOURNAL_ASYNC_COMMIT_OPS`]. `bob bench` sets
    /// it to stand for ext3's 5 s at the benchmark's rate; crash tests keep the default,
    /// which commits inside bob's small workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_timer_ops: Option<u32>,
}

impl Design {
    /// Every design.
    pub const ALL: [Design; 17] = [
        Design::Orderless,
        Design::Nofs,
        Design::Ordered,
        Design::JournalFlush,
        Design::Optfs,
        Design::OptfsNocsum,
        Design::JournalAsync,
        Design::JournalSync,
        Design::Xsyncfs,
        Design::XsyncfsEager,
        Design::XsyncfsAsync,
        Design::Softupdates,
        Design::SoftupdatesCompletion,
        Design::Valor,
        Design::ValorNologOrder,
        Design::Conquest,
        Design::ConquestNofence,
    ];

    /// The name on bob's command line.
    pub fn name(self) -> &'static str {
        match self {
            Design::Orderless => "orderless",
            Design::Nofs => "nofs",
            Design::Ordered => "ordered-core",
            Design::JournalFlush => "journal-flush",
            Design::Optfs => "optfs",
            Design::OptfsNocsum => "optfs-nocsum",
            Design::Softupdates => "softupdates",
            Design::SoftupdatesCompletion => "softupdates-completion",
            Design::Valor => "valor",
            Design::ValorNologOrder => "valor-nolog-order",
            Design::Conquest => "conquest",
            Design::ConquestNofence => "conquest-nofence",
            Design::JournalAsync => "journal-async",
            Design::JournalSync => "journal-sync",
            Design::Xsyncfs => "xsyncfs",
            Design::XsyncfsEager => "xsyncfs-eager",
            Design::XsyncfsAsync => "xsyncfs-async",
        }
    }

    /// The id stored in the superblock.
    pub fn id(self) -> u8 {
        match self {
            Design::Orderless => 1,
            Design::Nofs => 2,
            Design::Ordered => 3,
            Design::JournalFlush => 4,
            Design::Optfs => 5,
            Design::OptfsNocsum => 6,
            Design::Softupdates => 12,
            Design::SoftupdatesCompletion => 13,
            Design::Valor => 14,
            Design::ValorNologOrder => 15,
            Design::Conquest => 16,
            Design::ConquestNofence => 17,
            Design::JournalAsync => 7,
            Design::JournalSync => 8,
            Design::Xsyncfs => 9,
            Design::XsyncfsEager => 10,
            Design::XsyncfsAsync => 11,
        }
    }

    /// The design whose superblock id is `id`.
    pub fn from_id(id: u8) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.id() == id)
    }

    /// Blocks and inodes carry backpointers and every access checks them.
    pub fn backpointers(self) -> bool {
        self == Design::Nofs
    }

    /// Allocation bitmaps are written to disk (NoFS keeps them in memory only).
    pub fn persistent_bitmaps(self) -> bool {
        self != Design::Nofs
    }

    /// A flush separates dependent writes.
    pub fn ordered(self) -> bool {
        // Valor runs on an ordinary ordered file system (ext3 in the paper).
        matches!(self, Design::Ordered | Design::Valor | Design::ValorNologOrder)
    }

    /// How the design logs transactions (Valor), if it does.
    pub fn valor(self) -> Option<ValorMode> {
        match self {
            Design::Valor => Some(ValorMode { log_before_data: true }),
            Design::ValorNologOrder => Some(ValorMode { log_before_data: false }),
            _ => None,
        }
    }

    /// Whether programs can begin, commit and abort transactions on it (Valor: through
    /// the control file [`crate::fuse::TXN_CONTROL`], or [`crate::Fs::txn_begin`]).
    pub fn has_txn(self) -> bool {
        self.valor().is_some()
    }

    /// Whether fsync issues a flush (a journaling design's fsync is its dsync: commit,
    /// then flush).
    pub fn fsync_flushes(self, opts: Options) -> bool {
        match self {
            Design::Nofs => opts.durable,
            _ => true,
        }
    }

    /// How the design journals, if it does.
    pub fn journal(self) -> Option<JournalMode> {
        let pessimistic = JournalMode {
            checksums: false,
            commit_flushes: true,
            selective_data: false,
            commit_every_ops: None,
            sync_ops: false,
        };
        let optimistic = JournalMode { commit_flushes: false, selective_data: true, ..pessimistic };
        let timer = JournalMode { commit_every_ops: Some(JOURNAL_ASYNC_COMMIT_OPS), ..pessimistic };
        match self {
            Design::JournalFlush => Some(pessimistic),
            Design::Optfs => Some(JournalMode { checksums: true, ..optimistic }),
            Design::OptfsNocsum => Some(optimistic),
            Design::JournalAsync
            | Design::Xsyncfs
            | Design::XsyncfsEager
            | Design::XsyncfsAsync => Some(timer),
            Design::JournalSync => Some(JournalMode { sync_ops: true, ..pessimistic }),
            Design::Orderless
            | Design::Nofs
            | Design::Ordered
            | Design::Softupdates
            | Design::SoftupdatesCompletion
            | Design::Valor
            | Design::ValorNologOrder
            | Design::Conquest
            | Design::ConquestNofence => None,
        }
    }

    /// How the design's soft updates decide that a written update is durable, if it
    /// uses soft updates.
    pub fn soft_updates(self) -> Option<SoftMode> {
        match self {
            Design::Softupdates => Some(SoftMode::Flush),
            Design::SoftupdatesCompletion => Some(SoftMode::Completion),
            _ => None,
        }
    }

    /// Whether programs can call `osync()` and `dsync()` on it (the journaling designs:
    /// through the control file [`crate::fuse::SYNC_CONTROL`], or [`crate::Fs::osync`]).
    pub fn has_osync(self) -> bool {
        self.journal().is_some()
    }

    /// Whether fsync returns at once without committing (the xsyncfs family: the
    /// commit is grouped with others and output waits for it instead of the program).
    pub fn fsync_returns_at_once(self) -> bool {
        self.output().is_some()
    }

    /// How the design treats output written to [`crate::fuse::OUTPUT_FILE`]; `None`:
    /// the design has no output file.
    pub fn output(self) -> Option<OutputRelease> {
        match self {
            Design::Xsyncfs => Some(OutputRelease::Held),
            Design::XsyncfsEager => Some(OutputRelease::EagerTriggered),
            Design::XsyncfsAsync => Some(OutputRelease::Eager),
            _ => None,
        }
    }

    /// The durability timeout T_D, in write requests, of the disk this design wants under
    /// it: it checkpoints and reuses freed blocks after the disk's asynchronous durability
    /// notifications (OptFS). `None`: the design never asks the disk.
    pub fn adn_requests(self) -> Option<u32> {
        match self {
            Design::Optfs | Design::OptfsNocsum => Some(OPTFS_T_D),
            _ => None,
        }
    }

    /// Whether the superblock's clean flag is maintained (NoFS writes no superblock at
    /// all after mkfs: nothing in it changes).
    pub fn keeps_clean_flag(self) -> bool {
        self != Design::Nofs && self.journal().is_none() && self.pm_fenced().is_none()
    }

    /// Whether the design keeps metadata in persistent memory ([`crate::conquest`]):
    /// `Some(true)` when it writes back and fences its cache lines, `Some(false)` when it
    /// does neither (the negative control); `None`: a disk-only design.
    pub fn pm_fenced(self) -> Option<bool> {
        match self {
            Design::Conquest => Some(true),
            Design::ConquestNofence => Some(false),
            _ => None,
        }
    }

    /// Bytes of file data per data block.
    pub fn payload(self) -> usize {
        if self.backpointers() {
            crate::layout::BLOCK - crate::layout::BACKPOINTER
        } else {
            crate::layout::BLOCK
        }
    }

    /// Bytes reserved at the start of data and indirect blocks.
    pub fn header(self) -> usize {
        crate::layout::BLOCK - self.payload()
    }

    /// Pointers per indirect block.
    pub fn ptrs_per_block(self) -> usize {
        self.payload() / 4
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = String;
    fn from_str(s: &str) -> Result<Design, String> {
        Design::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Design::ALL.iter().map(|d| d.name()).collect();
            format!("unknown researchfs design `{s}` (expected one of: {})", names.join(", "))
        })
    }
}

/// How a journaling design commits and recovers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalMode {
    /// Transactional checksums (metadata CRC in the commit block, data CRCs in the
    /// descriptor) verified at recovery.
    pub checksums: bool,
    /// A flush before and after the commit block (pessimistic journaling).
    pub commit_flushes: bool,
    /// Overwrites of blocks allocated before the running transaction go to the journal.
    pub selective_data: bool,
    /// The commit timer: the running transaction ends after this many mutating
    /// operations (`journal-async`, the xsyncfs family); `None`: no timer.
    pub commit_every_ops: Option<u32>,
    /// Every mutating operation commits (and, with `commit_flushes`, flushes) before it
    /// returns (`journal-sync`).
    pub sync_ops: bool,
}

/// When a written update counts as durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SoftMode {
    /// At the flush after the write (`softupdates`).
    Flush,
    /// When the write completes, as the paper's disks ordered (`softupdates-completion`).
    Completion,
}

/// How a Valor design orders its log and its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValorMode {
    /// A flush between a write's undo records and its in-place data (the paper's simple
    /// write ordering); `false` in the negative control.
    pub log_before_data: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>().unwrap(), d);
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{}\"", d.name()));
            assert_eq!(Design::from_id(d.id()), Some(d));
        }
        assert!("ext2".parse::<Design>().is_err());
    }

    #[test]
    fn only_nofs_skips_fsync_flushes_by_default() {
        assert!(!Design::Nofs.fsync_flushes(Options::default()));
        assert!(Design::Nofs.fsync_flushes(Options { durable: true, ..Options::default() }));
        assert!(Design::Orderless.fsync_flushes(Options::default()));
    }
}
