//! # bob-core: the Block-Order Breaker library
//!
//! Data flows from a recording to a report:
//!
//! ```text
//! record -> trace -> crash -> image -> check -> report
//! ```
//!
//! The modules are layered (ARCHITECTURE.md states the rule and `tests/imports.rs`
//! checks it): a module uses only modules of lower layers, which is not the data flow's
//! order everywhere.
//!
//! * [`host`]: what the machine and this process say about themselves (kernel release,
//!   command line, cores, memory, load).
//! * [`files`]: whole image files, sparse: a copy that keeps holes, a digest that hashes
//!   them without reading them.
//! * [`device`]: loop devices, mounts and bob's FUSE disk, each released on every exit
//!   path, and [`device::cmd`], the one way bob runs a program.
//! * [`record`]: runs a workload on a recording disk and produces a [`trace::Trace`].
//! * [`trace`]: the dm-log-writes log format and its JSON sidecar.
//! * [`crash`]: flush-delimited epochs, crash-state strategies, state ids, dedup.
//! * [`image`]: a crash state served as a copy-on-write view over the base image.
//! * [`check`]: recovery, logical snapshot, fsck, and the property verdict.
//! * [`report`]: cells, witnesses, tables.
//! * `pm` (crate-private): the second device, an emulated persistent-memory region: its
//!   log beside the disk's, its crash states at cache-line granularity.
//! * [`fs`]: the file-system configurations (mkfs, mount options, recovery, fsck).
//! * [`run`]: the pipelines end to end: one configuration x property cell, a table, a
//!   saved trace under the user's checker, a witness replayed.
//! * [`output`]: the JSON documents the CLI prints, declared and versioned in one place.
//! * [`vm`]: other kernels: a command run inside a virtual machine booted from a chosen
//!   kernel, and a guest kernel crash pinned on the crash state that caused it.
//! * [`bench`](mod@bench): the engine and the file systems measured.
#![warn(missing_docs)]

/// The version of every JSON document bob writes (cells, tables, witnesses' state
/// records, journals). 2: outcomes from [`check::outcome::OutcomeKind`] (`mount-failed`
/// became `unrecoverable`, with `needs-repair` and `read-error` beside it), per-cell causes
/// (`mount_failures`, `read_errors`) and `states_mounted`. Documents without the field are
/// version 1 and still read. Here, at the root, because every stage writes documents and
/// none should import another for it.
pub const SCHEMA_VERSION: u32 = 2;

pub mod bench;
pub mod check;
pub mod crash;
pub mod device;
pub mod files;
pub mod fs;
pub mod host;
pub mod image;
pub mod output;
pub(crate) mod pm;
pub mod record;
pub mod report;
pub mod run;
pub mod trace;
pub mod vm;
