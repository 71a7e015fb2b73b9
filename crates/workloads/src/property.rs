//! The persistence properties of the BOB study (thesis ch. 4.5) plus the durability
//! properties bob adds, with their command-line/JSON names (spec "Names" section).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What kind of guarantee a property is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// The recovered state equals the state before the op or after it.
    Atomicity,
    /// The set of persisted ops is a prefix of program order.
    Ordering,
    /// What fsync/fdatasync/sync promised holds once their flush is durable.
    Durability,
    /// After recovery every access returns what the model allows or an error: the file
    /// system detects its own inconsistency instead of returning wrong results.
    Detection,
}

impl Family {
    /// Lower-case name: `atomicity`, `ordering`, `durability`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Atomicity => "atomicity",
            Family::Ordering => "ordering",
            Family::Durability => "durability",
            Family::Detection => "detection",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One persistence property; docs/properties.md describes each workload and check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    SingleSectorOverwrite,
    SingleSectorAppend,
    SingleBlockOverwrite,
    SingleBlockAppend,
    MultiBlockAppend,
    MultiBlockPrefixAppend,
    DirOpAtomic,
    OverwriteThenAny,
    AppendThenRename,
    OtruncAppendThenClose,
    AppendThenAppend,
    AppendThenDirOp,
    DirOpThenAny,
    FsyncDurable,
    FdatasyncDurable,
    SyncDurable,
    DirFsyncDurable,
    /// "Detects its own inconsistency" (the NoFS thesis' reliability experiment as a
    /// property); not in [`Property::ALL`], see [`Property::EVERY`].
    DetectsInconsistency,
    /// OptFS' prefix semantics (thesis §6.2.4): after a crash the file system holds a
    /// prefix of the osync-delimited groups of ops. Only on configurations with osync.
    OsyncPrefix,
    /// What `dsync()` promised (everything before it) is durable once it returned. Only
    /// on configurations with dsync.
    DsyncDurable,
    /// Valor's atomicity: after a crash each transaction is all or nothing; aborted and
    /// unfinished ones leave no trace after recovery. Only on configurations with
    /// transactions.
    TxnAtomic,
    /// Valor's durability: a transaction whose durable commit returned survives a crash.
    /// Only on configurations with transactions.
    TxnDurable,
    /// A create, link, unlink, rename or mkdir is durable when it returns, with no fsync
    /// (synchronous metadata: the journaling-vs-soft-updates paper's journal-sync, ext3
    /// or a kernel file system mounted `-o sync`). Every configuration.
    MetadataOpDurable,
    /// External synchrony (xsyncfs): every output released before the crash implies
    /// that every write before it is durable. Only on configurations with an output file.
    OutputDurable,
}

impl Property {
    /// Every property bob knows: [`Property::ALL`] (the study's grid, the default of
    /// `bob table`) and the detection family, which is a row one asks for by name.
    pub const EVERY: &'static [Property] = &[
        Property::SingleSectorOverwrite,
        Property::SingleSectorAppend,
        Property::SingleBlockOverwrite,
        Property::SingleBlockAppend,
        Property::MultiBlockAppend,
        Property::MultiBlockPrefixAppend,
        Property::DirOpAtomic,
        Property::OverwriteThenAny,
        Property::AppendThenRename,
        Property::OtruncAppendThenClose,
        Property::AppendThenAppend,
        Property::AppendThenDirOp,
        Property::DirOpThenAny,
        Property::FsyncDurable,
        Property::FdatasyncDurable,
        Property::SyncDurable,
        Property::DirFsyncDurable,
        Property::DetectsInconsistency,
        Property::OsyncPrefix,
        Property::DsyncDurable,
        Property::TxnAtomic,
        Property::TxnDurable,
        Property::MetadataOpDurable,
        Property::OutputDurable,
    ];

    /// Every property of the study's grid, in the order of the spec's table: the first
    /// seventeen of [`EVERY`], without the detection family and the osync/dsync
    /// properties (rows one asks for by name).
    ///
    /// [`EVERY`]: Property::EVERY
    pub const ALL: &'static [Property] = Property::EVERY.split_at(17).0;

    /// Whether the property's workload calls `osync()`/`dsync()`: it applies only to
    /// configurations that have them (elsewhere its cell is `not-applicable`).
    pub fn needs_osync(self) -> bool {
        matches!(self, Property::OsyncPrefix | Property::DsyncDurable)
    }

    /// Whether the property's workload runs transactions (Valor's begin, commit, abort):
    /// it applies only to configurations that have them (elsewhere `not-applicable`).
    pub fn needs_txn(self) -> bool {
        matches!(self, Property::TxnAtomic | Property::TxnDurable)
    }

    /// Whether the property's workload writes output to the file system's output file
    /// (external synchrony): it applies only to configurations that have one.
    pub fn needs_output(self) -> bool {
        self == Property::OutputDurable
    }

    /// The kebab-case name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Property::SingleSectorOverwrite => "single-sector-overwrite",
            Property::SingleSectorAppend => "single-sector-append",
            Property::SingleBlockOverwrite => "single-block-overwrite",
            Property::SingleBlockAppend => "single-block-append",
            Property::MultiBlockAppend => "multi-block-append",
            Property::MultiBlockPrefixAppend => "multi-block-prefix-append",
            Property::DirOpAtomic => "dir-op-atomic",
            Property::OverwriteThenAny => "overwrite-then-any",
            Property::AppendThenRename => "append-then-rename",
            Property::OtruncAppendThenClose => "otrunc-append-then-close",
            Property::AppendThenAppend => "append-then-append",
            Property::AppendThenDirOp => "append-then-dir-op",
            Property::DirOpThenAny => "dir-op-then-any",
            Property::FsyncDurable => "fsync-durable",
            Property::FdatasyncDurable => "fdatasync-durable",
            Property::SyncDurable => "sync-durable",
            Property::DirFsyncDurable => "dir-fsync-durable",
            Property::DetectsInconsistency => "detects-inconsistency",
            Property::OsyncPrefix => "osync-prefix",
            Property::DsyncDurable => "dsync-durable",
            Property::TxnAtomic => "txn-atomic",
            Property::TxnDurable => "txn-durable",
            Property::MetadataOpDurable => "metadata-op-durable",
            Property::OutputDurable => "output-durable",
        }
    }

    /// Atomicity, ordering or durability.
    pub fn family(self) -> Family {
        use Property::*;
        match self {
            SingleSectorOverwrite
            | SingleSectorAppend
            | SingleBlockOverwrite
            | SingleBlockAppend
            | MultiBlockAppend
            | MultiBlockPrefixAppend
            | DirOpAtomic
            | TxnAtomic => Family::Atomicity,
            OverwriteThenAny
            | AppendThenRename
            | OtruncAppendThenClose
            | AppendThenAppend
            | AppendThenDirOp
            | DirOpThenAny
            | OsyncPrefix => Family::Ordering,
            FsyncDurable | FdatasyncDurable | SyncDurable | DirFsyncDurable | DsyncDurable
            | MetadataOpDurable | OutputDurable => Family::Durability,
            TxnDurable => Family::Durability,
            DetectsInconsistency => Family::Detection,
        }
    }

    /// One line saying what the property asserts.
    pub fn summary(self) -> &'static str {
        use Property::*;
        match self {
            SingleSectorOverwrite => "overwriting one aligned 512 B sector is atomic",
            SingleSectorAppend => "appending one 512 B sector is atomic (size and data together)",
            SingleBlockOverwrite => "overwriting one aligned 4096 B block is atomic",
            SingleBlockAppend => "appending one 4096 B block is atomic (size and data together)",
            MultiBlockAppend => {
                "appending or overwriting more than one journal transaction is atomic"
            }
            MultiBlockPrefixAppend => {
                "a multi-block append persists as old content + a prefix of the new data"
            }
            DirOpAtomic => "creat, link, unlink and rename (also across directories) are atomic",
            OverwriteThenAny => "a block overwrite persists before later appends and dir ops",
            AppendThenRename => "an append persists before a later rename of the same file",
            OtruncAppendThenClose => "open(O_TRUNC) + appends + close persist before later ops",
            AppendThenAppend => "appends to one file persist in program order",
            AppendThenDirOp => "an append persists before later link, mkdir and synchronous creat",
            DirOpThenAny => "directory ops persist before later writes and dir ops elsewhere",
            FsyncDurable => "after fsync(f) returns, f's data and size are durable",
            FdatasyncDurable => "after fdatasync(f) returns, f's data is durable",
            SyncDurable => "after sync() returns, every earlier op is durable",
            DirFsyncDurable => {
                "after fsync of the parent directory, a created or renamed name is durable"
            }
            DetectsInconsistency => {
                "after a crash every access returns what some state allows or an error, never wrong data"
            }
            OsyncPrefix => "the ops persist as a prefix of the osync-delimited groups (OptFS)",
            DsyncDurable => "after dsync() returns, every earlier op is durable (OptFS)",
            TxnAtomic => {
                "each transaction is all or nothing after a crash; aborted and unfinished ones leave no trace (Valor)"
            }
            TxnDurable => "a transaction whose durable commit returned survives a crash (Valor)",
            MetadataOpDurable => {
                "creat, link, unlink, rename and mkdir are durable when they return (no fsync)"
            }
            OutputDurable => {
                "output released before a crash implies every earlier write is durable (xsyncfs)"
            }
        }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A property name that is not one of [`Property::ALL`]; its message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown property `{given}`; valid names: {}", Property::EVERY.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "))]
pub struct ParsePropertyError {
    /// What was given.
    pub given: String,
}

impl FromStr for Property {
    type Err = ParsePropertyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Property::EVERY
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| ParsePropertyError { given: s.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_str_and_serde() {
        for &p in Property::EVERY {
            assert_eq!(p.name().parse::<Property>().unwrap(), p);
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.name()));
            assert!(!p.summary().contains('\n'));
        }
        let err = "nope".parse::<Property>().unwrap_err().to_string();
        assert!(err.contains("single-sector-overwrite") && err.contains("dir-fsync-durable"));
    }
}
