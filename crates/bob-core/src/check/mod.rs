//! Checking crash states: serve each state as a copy-on-write view, attach it to a loop
//! device, run the configuration's recovery under a timeout, take the logical snapshot,
//! unmount, run the read-only fsck, and ask the oracle for the verdict.
//!
//! When the kernel will not mount a state, the configuration's repair ladder
//! ([`crate::fs::FsConfig::repair`]) runs one step at a time, each followed by another
//! mount: the state is `needs-repair` when a step made it mountable and the property held
//! there (a violation found there is `violated`, its story naming the step), and
//! `unrecoverable` when no step did. A state that mounts but cannot be read is
//! `read-error`. Every outcome's name, letter, precedence and exit code live in one table,
//! [`outcome`].
//!
//! States with identical resulting block contents are mounted once and the outcome is
//! counted for all of them. Unique states are checked by `jobs` workers in parallel, each
//! with its own loop device and mount point, over one multi-threaded FUSE disk.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use workloads::Snapshot;

mod checker;
mod engine;
mod file_data;
mod journal;
pub(crate) mod outcome;
mod reads;
mod recovery_used;
mod speed;
mod state;
mod subject;
mod verdict;

pub use checker::{Judge, UserChecker};
pub(crate) use engine::{check_key, guest_turn};
pub use engine::{run_states, EngineOptions, StateResult};
pub use journal::Journal;
pub use outcome::{JunitForm, Outcome, OutcomeKind};
pub use speed::{FsckPolicy, Speedups};
pub use state::check_image;
pub(crate) use state::pm_image_path;
use state::{check_image_with, AfterRecovery, RecoveredCache, StateToCheck};
pub(crate) use subject::{recording_label, split_schedule};
pub use subject::{CrashStates, Subject, SubjectParts};

/// Checking errors: the environment failed, not the file system under test.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device-layer failure.
    #[error(transparent)]
    Device(#[from] crate::device::Error),
    /// A state id does not fit the trace.
    #[error("state {id}: {reason}")]
    BadState {
        /// The id.
        id: String,
        /// Why.
        reason: String,
    },
    /// The run was interrupted (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// I/O on bob's own files.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    /// Whether this error is bob's own machinery failing on one state (the one place
    /// that decides it): the engine retries such a state once on a fresh loop device and
    /// mount point, and if it fails again records it as `infra-error` and goes on with
    /// the others. Loop devices, mounts, the FUSE disk, spawning a program and bob's own
    /// scratch files fail transiently (EBUSY from a loop device another process just
    /// took, a FUSE connection aborted under us, an unmount that raced a late reference,
    /// EAGAIN), and another attempt can succeed.
    ///
    /// Not retried, the run ends: an interrupt or cancel (the user asked to stop, at
    /// once); a missing program (the environment lacks it for every state: one line
    /// naming the package is more use than a table of `infra-error`); a device the user
    /// named that is refused, and a state id that does not fit its trace (input errors
    /// that no retry changes).
    pub(crate) fn is_infrastructure(&self) -> bool {
        use crate::device::{cmd::CmdError, Error as Device};
        match self {
            Error::Interrupted | Error::BadState { .. } => false,
            Error::Device(Device::Cmd(CmdError::NotFound { .. }) | Device::Refused { .. }) => false,
            Error::Device(
                Device::Loop { .. }
                | Device::Mount { .. }
                | Device::Fuse { .. }
                | Device::Io { .. }
                | Device::Cmd(CmdError::Spawn { .. } | CmdError::Timeout { .. }),
            ) => true,
            Error::Io { .. } => true,
        }
    }
}

/// What the repair ladder did to a state the kernel would not mount.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// The kernel's answer to the first mount.
    pub mount_error: String,
    /// Each step run, in order, with its exit code: `xfs_repair (exit 2)`.
    pub steps: Vec<String>,
    /// The step after which the state mounted; `None` when it never did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_by: Option<String>,
}

/// The full result of checking one state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateCheck {
    /// The outcome.
    pub outcome: Outcome,
    /// The recovered logical state, when recovery succeeded.
    pub snapshot: Option<Snapshot>,
    /// What the read-only fsck printed last, if it complained.
    pub fsck: Option<String>,
    /// Sectors recovery wrote (journal replay, repair).
    pub recovery_writes: usize,
    /// Whether the state mounted (by itself or after repair). Absent in journals of
    /// schema 1, read as mounted unless the outcome says otherwise.
    #[serde(default = "mounted_default")]
    pub mounted: bool,
    /// The repair ladder's work, when the kernel would not mount the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
    /// What a user checker printed (stdout and stderr, the last 16 KiB), when the judge is
    /// a [`Judge::Checker`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker_output: Option<String>,
    /// For the `detects-inconsistency` workload: per scenario of the reliability table,
    /// the kinds returned silently and the accesses that returned an error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<workloads::ScenarioMark>,
    /// For a violated ordering property: the earlier op that did not persist and the later
    /// op of the property's pair that did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<workloads::OpPair>,
    /// For a violation the oracle found: what its story tells, typed (kind, ops, paths,
    /// sector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discrepancy: Option<workloads::Discrepancy>,
    /// What the oracle found that belongs to other rows (a reordering outside the
    /// property's pair, a durability failure in a non-durability workload): reported
    /// beside the cell, never as its verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beside: Vec<workloads::Finding>,
    /// Digest (hex) of the image as recovery left it, mount stamps masked, when dedup
    /// after recovery or `--fsck once` computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_image: Option<String>,
    /// The snapshot came from an earlier state that recovered to the same image.
    #[serde(default, skip_serializing_if = "is_false")]
    pub snapshot_reused: bool,
    /// The fsck result came from an earlier state that recovered to the same image.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fsck_reused: bool,
    /// The whole check (recovery, walk, fsck) came from an earlier state whose check read
    /// no sector where this state's bytes differ (reuse by reads, `check::reads`); only
    /// the verdict was judged again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reads_reused: bool,
    /// The routine fsck before mounting (ext2's `e2fsck -y`) was not run: an earlier
    /// state's, whose reads this state's bytes equal, gave its answer and its writes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub routine_fsck_reused: bool,
    /// The whole check was taken from the cell's journal: the same state (same bytes,
    /// same promises due) was checked under an earlier disk model of the same recording,
    /// or by the run this one resumes. Not journaled itself.
    #[serde(default, skip_serializing_if = "is_false")]
    pub journal_reused: bool,
    /// The sectors read by the check that this one's snapshot or fsck result came from
    /// (dedup after recovery), which reuse by reads must count as this check's reads.
    #[serde(skip)]
    pub(crate) reads_behind: Option<std::sync::Arc<reads::SectorRuns>>,
    /// The file data only this check's walk read, which a later state may differ in and
    /// still take this check's mount (`check::file_data`); absent where it does not apply.
    #[serde(skip)]
    pub(crate) file_data: Option<file_data::SharedFileData>,
    /// This state was not mounted: an earlier state's check was taken, with the file data
    /// in which the two differ read from this state's own bytes (`check::file_data`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub file_data_patched: bool,
    /// Attempts that failed in bob's own machinery before this result (see
    /// [`Error::is_infrastructure`]): 1 when a retry on a fresh loop device succeeded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub infra_retries: usize,
    /// Where this check's time went, for a state that was attached to a loop device. A
    /// measurement of this run, not part of the result: not journaled, and a result
    /// reused from a journal has none.
    #[serde(skip)]
    pub steps: Option<StepTimes>,
}

/// Where one state's check spent its wall time, in milliseconds: what `bob bench` adds up
/// to show what a mounted state costs above the mount floor. A step that did not run (a
/// snapshot or fsck reused from an earlier state that recovered to the same image) is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimes {
    /// Binding a free loop device to the state's view.
    pub attach_ms: f64,
    /// Recovery: the mount (journal or log replay inside it), the configuration's
    /// fsck-before-mount and any repair ladder.
    pub recover_ms: f64,
    /// The recovered image's key (dedup after recovery).
    pub key_ms: f64,
    /// Walking the recovered tree (0 when reused).
    pub snapshot_ms: f64,
    /// The unmount.
    pub unmount_ms: f64,
    /// The read-only fsck (0 when reused).
    pub fsck_ms: f64,
    /// Unbinding the loop device.
    pub detach_ms: f64,
    /// The whole check as the engine's worker saw it: the steps above, the verdict, and
    /// serving the view (making it, adding it to and removing it from the FUSE disk).
    pub total_ms: f64,
}

impl StepTimes {
    /// The steps above added up: `total_ms` less what fell between them.
    pub fn steps_ms(&self) -> f64 {
        self.attach_ms
            + self.recover_ms
            + self.key_ms
            + self.snapshot_ms
            + self.unmount_ms
            + self.fsck_ms
            + self.detach_ms
    }
}

/// Times the steps of one check: each [`Laps::lap`] is the time since the one before.
pub(crate) struct Laps {
    last: std::time::Instant,
}

impl Laps {
    pub(crate) fn start() -> Laps {
        Laps { last: std::time::Instant::now() }
    }

    /// Milliseconds since the last lap (or the start).
    pub(crate) fn lap(&mut self) -> f64 {
        let now = std::time::Instant::now();
        let ms = now.duration_since(self.last).as_secs_f64() * 1e3;
        self.last = now;
        ms
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn mounted_default() -> bool {
    true
}

impl StateCheck {
    /// A check with nothing but its outcome: one that ended before there was anything to
    /// snapshot or fsck, or the base of one that adds what it has.
    fn failed(outcome: Outcome) -> StateCheck {
        StateCheck {
            outcome,
            snapshot: None,
            fsck: None,
            recovery_writes: 0,
            mounted: false,
            repair: None,
            checker_output: None,
            scenarios: Vec::new(),
            pair: None,
            discrepancy: None,
            beside: Vec::new(),
            recovered_image: None,
            snapshot_reused: false,
            fsck_reused: false,
            reads_reused: false,
            routine_fsck_reused: false,
            journal_reused: false,
            reads_behind: None,
            file_data: None,
            file_data_patched: false,
            infra_retries: 0,
            steps: None,
        }
    }

    /// Whether the state mounted (by itself or after repair).
    pub fn did_mount(&self) -> bool {
        self.mounted && self.outcome.kind() != OutcomeKind::Unrecoverable
    }

    /// This check of a state that mounted only after `repair`: a property that held
    /// there makes it `needs-repair`, a violation's story names the step first, and the
    /// repair is kept.
    fn after_repair(mut self, repair: Option<Repair>) -> StateCheck {
        let Some(repair) = repair else { return self };
        let fixed = repair.fixed_by.clone().unwrap_or_default();
        self.outcome = match self.outcome {
            Outcome::Held => Outcome::NeedsRepair {
                message: repair.mount_error.clone(),
                repaired_by: fixed.clone(),
            },
            Outcome::Violated { story } => {
                Outcome::Violated { story: format!("after {fixed}: {story}") }
            }
            Outcome::FsckFailed { message } => {
                Outcome::FsckFailed { message: format!("after {fixed}: {message}") }
            }
            other => other,
        };
        self.repair = Some(repair);
        self
    }
}
