//! The typed discrepancy the oracle carries on each [`super::Finding`]: what is wrong in
//! the recovered tree (a lost file, stale data, a wrong size, ...), the ops and paths it
//! is about and, for data, the sector that reads wrong. A finding's story says the same
//! in words, for people; programs read this (`bob explore` groups failures by its kind,
//! never by the story's text).

use crate::stamp::SectorClass;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The kind of a discrepancy. Its kebab-case name is what explore's signatures and their
/// slugs say (`xfs--falloc+fsync+sync--stale-data`), so a name never changes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DiscrepancyKind {
    /// A promised file or name is gone (under none of its names, or the name is absent).
    LostFile,
    /// A name removed before the promise still names its old inode.
    StaleName,
    /// A file's size is not the promised one.
    WrongSize,
    /// A sector of a file reads other data than promised (old data, zeros, another op's).
    StaleData,
    /// A promised name holds another inode.
    WrongInode,
    /// A promised name holds another kind of node (a file where a directory was).
    WrongKind,
    /// st_nlink is not the number of names that hold the file.
    WrongLinkCount,
    /// An extended attribute lost, stale or back.
    WrongXattr,
    /// A mode, owner or mtime set and lost.
    WrongAttr,
    /// Reading promised data failed.
    ReadError,
    /// Blocks allocated past the end of a file (fallocate with keep-size) and promised
    /// are no longer allocated.
    LostAllocation,
    /// A new file or directory could not be created on the recovered file system.
    NotCreatable,
    /// A durably committed transaction's write is not there after its commit returned.
    TxnLost,
    /// A transaction is partly there, or an aborted or unfinished one left a trace.
    TxnNotAtomic,
    /// One op's effect is half there: its data neither all old nor all new, its names
    /// half renamed.
    NotAtomic,
    /// Anything else (a workload the model cannot apply).
    #[default]
    Other,
}

impl DiscrepancyKind {
    /// Every kind.
    pub const ALL: &'static [DiscrepancyKind] = &[
        DiscrepancyKind::LostFile,
        DiscrepancyKind::StaleName,
        DiscrepancyKind::WrongSize,
        DiscrepancyKind::StaleData,
        DiscrepancyKind::WrongInode,
        DiscrepancyKind::WrongKind,
        DiscrepancyKind::WrongLinkCount,
        DiscrepancyKind::WrongXattr,
        DiscrepancyKind::WrongAttr,
        DiscrepancyKind::ReadError,
        DiscrepancyKind::LostAllocation,
        DiscrepancyKind::NotCreatable,
        DiscrepancyKind::TxnLost,
        DiscrepancyKind::TxnNotAtomic,
        DiscrepancyKind::NotAtomic,
        DiscrepancyKind::Other,
    ];

    /// The kebab-case name (the same as its serialization).
    pub fn name(self) -> &'static str {
        match self {
            DiscrepancyKind::LostFile => "lost-file",
            DiscrepancyKind::StaleName => "stale-name",
            DiscrepancyKind::WrongSize => "wrong-size",
            DiscrepancyKind::StaleData => "stale-data",
            DiscrepancyKind::WrongInode => "wrong-inode",
            DiscrepancyKind::WrongKind => "wrong-kind",
            DiscrepancyKind::WrongLinkCount => "wrong-link-count",
            DiscrepancyKind::WrongXattr => "wrong-xattr",
            DiscrepancyKind::WrongAttr => "wrong-attr",
            DiscrepancyKind::ReadError => "read-error",
            DiscrepancyKind::LostAllocation => "lost-allocation",
            DiscrepancyKind::NotCreatable => "not-creatable",
            DiscrepancyKind::TxnLost => "txn-lost",
            DiscrepancyKind::TxnNotAtomic => "txn-not-atomic",
            DiscrepancyKind::NotAtomic => "not-atomic",
            DiscrepancyKind::Other => "other",
        }
    }
}

impl fmt::Display for DiscrepancyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DiscrepancyKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DiscrepancyKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown discrepancy {s:?}"))
    }
}

/// A sector that reads other data than expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectorMismatch {
    /// Its byte offset in the file.
    pub offset: u64,
    /// What it reads.
    pub found: SectorClass,
    /// What the promise (or the op's effect) says it should read.
    pub expected: SectorClass,
}

/// What one finding is about, typed: the kind, the ops and paths involved, the sector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discrepancy {
    /// What is wrong.
    pub kind: DiscrepancyKind,
    /// The ops (indices into the workload's ops) involved: the promise or op judged
    /// first, then the op whose effect is missing where that is another one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<usize>,
    /// The paths the discrepancy is seen on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// For data: the first sector that reads wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector: Option<SectorMismatch>,
}

/// Why a check failed, as the oracle builds it: the story for people and the typed
/// discrepancy for programs, made together at the one place that knows both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Why {
    pub(crate) story: String,
    pub(crate) discrepancy: Discrepancy,
}

impl Why {
    /// A discrepancy of `kind` on `path`, told by `story`.
    pub(crate) fn at(kind: DiscrepancyKind, path: &str, story: String) -> Why {
        Why {
            story,
            discrepancy: Discrepancy { kind, paths: vec![path.to_owned()], ..Default::default() },
        }
    }

    /// A discrepancy of `kind` seen on no one path.
    pub(crate) fn new(kind: DiscrepancyKind, story: String) -> Why {
        Why { story, discrepancy: Discrepancy { kind, ..Default::default() } }
    }

    /// The same, with the sector that reads wrong.
    pub(crate) fn sector(mut self, offset: u64, found: SectorClass, expected: SectorClass) -> Why {
        self.discrepancy.sector = Some(SectorMismatch { offset, found, expected });
        self
    }

    /// The same, about op `k` too (after the ops it names already).
    pub(crate) fn op(mut self, k: usize) -> Why {
        if !self.discrepancy.ops.contains(&k) {
            self.discrepancy.ops.push(k);
        }
        self
    }

    /// The same, about op `k` first (the promise or op judged, before the ops it names).
    pub(crate) fn first_op(mut self, k: usize) -> Why {
        self.discrepancy.ops.retain(|&o| o != k);
        self.discrepancy.ops.insert(0, k);
        self
    }

    /// The same, told by `tell(story)`.
    pub(crate) fn retold(mut self, tell: impl FnOnce(&str) -> String) -> Why {
        self.story = tell(&self.story);
        self
    }

    /// The same, with `kind` instead.
    pub(crate) fn kind(mut self, kind: DiscrepancyKind) -> Why {
        self.discrepancy.kind = kind;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for &k in DiscrepancyKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
            assert_eq!(serde_json::from_str::<DiscrepancyKind>(&json).unwrap(), k);
            assert_eq!(k.name().parse::<DiscrepancyKind>(), Ok(k));
        }
        assert!("lost".parse::<DiscrepancyKind>().is_err());
    }
}
