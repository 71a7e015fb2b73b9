//! `workloads`: the property workloads of `bob` (the Block-Order Breaker), the ops they
//! run, the sector stamps that make every written byte recognisable, the pure in-memory
//! oracle (model), the logical snapshot of a recovered tree and the property checks.
//!
//! The flow, as `bob-core` drives it:
//! 1. [`workload_for`] builds the [`Workload`] of a [`Property`] from [`Params`].
//! 2. [`execute`] runs its `setup` (before recording), `ops` (recorded, with
//!    [`OpEvent`]s for trace marks) and `drain` on a mounted file system, filling an
//!    [`Observed`] with the inode number of every file and directory the model knows.
//! 3. For each crash state: [`take_snapshot`] of the recovered tree, then [`check`]
//!    against the model ([`model_states`]) with a [`CrashContext`] naming the
//!    persistence points whose flush is durable in that state.
//!
//! Nothing here depends on `bob-core`; nothing here needs root except what the caller's
//! mount needs. Paths in ops and snapshots are absolute within the file system under
//! test: `"/"` is its root, `"/A/f0"` a file in directory `A`.

mod check;
pub mod enumerate;
mod exec;
mod generate;
mod model;
mod op;
mod property;
pub mod rng;
mod schedule;
mod snapshot;
pub mod stamp;
mod tree;
mod workload;

pub use check::ScenarioMark;
pub use check::{
    check, check_all, CrashContext, Discrepancy, DiscrepancyKind, Finding, Judgement, OpPair,
    Oracle, SectorMismatch, Verdict,
};
pub use exec::{execute, ExecError, OpEvent, Phase};
pub use generate::random_synced;
pub use model::{model_states, ModelError, ModelNode, ModelState};
pub use op::{FallocMode, Op, OpKind, OpRef, RenameHow, SyncFlag};
pub use property::{Family, ParsePropertyError, Property};
pub use schedule::{ParseScheduleError, Schedule};
pub use snapshot::{
    create_after_recovery, file_extents, take_snapshot, take_snapshot_with, FileExtent,
};
pub use stamp::SectorClass;
pub use tree::{Content, InodeMeta, Node, NodeKind, Observed, Snapshot};
pub use workload::{
    detection_scenario, workload_for, Guarantee, Params, Workload, DETECTION_SCENARIOS, DRAIN_FILE,
};

/// The atomic unit of the simulated disk and of every stamp: 512 bytes.
pub const SECTOR: u64 = 512;

/// The control file through which [`Op::Osync`] and [`Op::Dsync`] reach the file system:
/// at the mount's root, written `osync` or `dsync` (researchfs' `fuse::SYNC_CONTROL`;
/// the two crates share no code, a bob-core test checks they agree).
pub const SYNC_CONTROL: &str = ".researchfs-sync";

/// The control file through which [`Op::TxnBegin`], [`Op::TxnCommit`] and
/// [`Op::TxnAbort`] reach the file system: at the mount's root, written `begin`,
/// `commit`, `commit-durable` or `abort` (researchfs' `fuse::TXN_CONTROL`; a bob-core
/// test checks they agree).
pub const TXN_CONTROL: &str = ".researchfs-txn";

/// The output file through which [`Op::Output`] reaches the file system: at the mount's
/// root, one write of `output` per op (researchfs' `fuse::OUTPUT_FILE`, xsyncfs' output).
pub const OUTPUT_FILE: &str = ".researchfs-output";
