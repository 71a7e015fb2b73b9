//! Results a person or a machine reads: a cell (one configuration x one property) with its
//! verdict and counts, witness directories that replay exactly, and the text/JSON forms.

pub mod diff;
pub mod document;
pub mod explain;
pub(crate) mod junit;
pub mod site;
pub mod table;
pub(crate) mod timeline;
pub mod witness;

pub use document::document;
pub use explain::explain;

use serde::{Deserialize, Serialize};

pub use crate::check::OutcomeKind;
use crate::check::{Outcome, StateCheck, StateResult, Subject};
use crate::crash::disk::FuaModel;
use crate::crash::StateId;
use crate::fs::regions::{RegionRole, Regions};

pub use crate::SCHEMA_VERSION;

/// What documents without `schema_version` are.
pub(crate) fn schema_v1() -> u32 {
    1
}

/// A cell's verdict: a row of the one outcome table ([`OutcomeKind`]), the first in
/// precedence order that any of its states reached.
pub(crate) type CellVerdict = OutcomeKind;

/// One drain schedule's share of a cell: its own recordings, traces and states.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleCell {
    /// The schedule (`sync`, `syncfs`, `writeback-commit`).
    pub schedule: String,
    /// blake3 of the schedule's recorded trace (see `Trace::digest`).
    pub trace_digest: String,
    /// Its verdict over its own states (the cell's is over the union).
    pub verdict: CellVerdict,
    /// Crash states generated from its trace (within this shard, if sharded).
    pub states_explored: usize,
    /// Distinct states of its trace mounted.
    pub states_unique: usize,
    /// Outcome counts over its states.
    pub counts: OutcomeCounts,
    /// The first state of its verdict's outcome (`syncfs/e3:0-4`), if not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_state: Option<String>,
    /// That state's position in the schedule's full (unsharded) state list, so that
    /// merged shards name the state an unsharded run would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_position: Option<usize>,
    /// For the multi-block properties: barriers (epoch boundaries) the judged op's own
    /// writes spanned in this trace (the least over the judged ops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_barriers: Option<usize>,
    /// Write entries of its trace marked FUA (for kernel recordings: from the
    /// `block_bio_queue` tracepoint), which the disk model's FUA setting judges.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fua_writes: usize,
    /// Flushes of its trace that only emulated a FUA on the loop device: barriers under
    /// `--fua barrier`, none under `--fua real`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fua_postflushes: usize,
    /// How many times the schedule was recorded for this cell (`--recordings`): its
    /// states, counts and verdict are the union of every recording's. Absent when once.
    #[serde(default, skip_serializing_if = "at_most_one")]
    pub recordings: usize,
    /// When recorded more than once: the recordings (numbered from 1, in the order they
    /// were made) whose states included a violation, so `k of n` is this list's length of
    /// `recordings`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violated_in: Vec<usize>,
    /// The trace digests of the recordings after the first, in order (`trace_digest` is
    /// the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_trace_digests: Vec<String>,
    /// A violation appeared in some of the schedule's recordings and not in others (`k`
    /// of `n` with 0 < k < n): the file system's behaviour under this timing is a race,
    /// and one recording's verdict could have gone either way.
    #[serde(default, skip_serializing_if = "is_false")]
    pub racy: bool,
    /// What earlier runs on the same kernel saw of this schedule, when they saw it flip
    /// (`--flip-history`): the schedule is then racy whatever this run's recordings gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_runs: Option<EarlierRuns>,
}

/// What earlier runs saw of a schedule, as a cell reports it beside its own recordings
/// (from a flip history: `run::flip_history`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierRuns {
    /// Earlier runs on this kernel.
    pub runs: usize,
    /// Their recordings of the schedule.
    pub recordings: usize,
    /// Of them, those that showed a violation.
    pub violated: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn at_most_one(n: &usize) -> bool {
    *n <= 1
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ScheduleCell {
    /// Whether a violation appeared in some of `recordings` and not in all: `k` of `n`
    /// with 0 < k < n.
    pub(crate) fn is_racy(violated: usize, recordings: usize) -> bool {
        violated > 0 && violated < recordings
    }

    /// In how many recordings a violation appeared, in words, when the schedule was
    /// recorded more than once: "violated in 2 of 5 recordings: racy", "violated in 3 of
    /// 3 recordings", "violated in 0 of 3 recordings".
    pub(crate) fn recordings_text(&self) -> Option<String> {
        let here = match self.recordings {
            0 | 1 if self.earlier_runs.is_none() => return None,
            0 | 1 => format!(
                "{} in its one recording",
                if self.verdict == CellVerdict::Violated { "violated" } else { "not violated" }
            ),
            n => format!("violated in {} of {n} recordings", self.violated_in.len()),
        };
        let earlier = self.earlier_runs.as_ref().map(|e| {
            format!(
                "; in {} earlier run(s) on this kernel, {} of {}",
                e.runs, e.violated, e.recordings
            )
        });
        Some(format!(
            "{here}{}{}",
            earlier.unwrap_or_default(),
            if self.racy { ": racy" } else { "" }
        ))
    }

    /// Whether the schedule is racy: this run's recordings disagree, or earlier runs on
    /// the same kernel saw it flip.
    pub(crate) fn update_racy(&mut self) {
        self.racy =
            Self::is_racy(self.violated_in.len(), self.recordings) || self.earlier_runs.is_some();
    }

    /// Folds another shard's share of the same schedule into this one.
    pub fn merge(&mut self, b: &ScheduleCell) {
        // Shards split the states of the same recordings: a recording violated in either
        // shard is violated in the whole.
        self.recordings = self.recordings.max(b.recordings);
        self.violated_in.extend(&b.violated_in);
        self.violated_in.sort_unstable();
        self.violated_in.dedup();
        self.earlier_runs = self.earlier_runs.take().or_else(|| b.earlier_runs.clone());
        self.update_racy();
        self.states_explored += b.states_explored;
        self.states_unique += b.states_unique;
        self.counts.merge(&b.counts);
        let own = self.verdict;
        self.verdict = self.counts.verdict();
        let b_earlier = earlier(b.first_position, self.first_position);
        let take = b.verdict == self.verdict && (own != self.verdict || b_earlier);
        if take {
            self.first_state = b.first_state.clone();
            self.first_position = b.first_position;
        } else if own != self.verdict {
            self.first_state = None;
            self.first_position = None;
        }
    }
}

/// How many explored states ended in each outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// Held.
    pub held: usize,
    /// Violated.
    pub violated: usize,
    /// Mounted only after repair, and the property held.
    #[serde(default)]
    pub needs_repair: usize,
    /// Did not mount even after repair (schema 1: `mount_failed`).
    #[serde(default, alias = "mount_failed")]
    pub unrecoverable: usize,
    /// Mounted, but a read failed.
    #[serde(default)]
    pub read_error: usize,
    /// fsck complained.
    pub fsck_failed: usize,
    /// Timed out.
    pub timeout: usize,
    /// Not checked: bob's own machinery failed on them twice (`infra-error`).
    #[serde(default)]
    pub infra_error: usize,
    /// Recovering them crashed the kernel of the virtual machine (`kernel-crash`); absent
    /// from documents where none did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_crash: usize,
}

impl OutcomeCounts {
    fn slot(&mut self, kind: OutcomeKind) -> Option<&mut usize> {
        Some(match kind {
            OutcomeKind::Held => &mut self.held,
            OutcomeKind::Violated => &mut self.violated,
            OutcomeKind::KernelCrash => &mut self.kernel_crash,
            OutcomeKind::NeedsRepair => &mut self.needs_repair,
            OutcomeKind::Unrecoverable => &mut self.unrecoverable,
            OutcomeKind::ReadError => &mut self.read_error,
            OutcomeKind::FsckFailed => &mut self.fsck_failed,
            OutcomeKind::Timeout => &mut self.timeout,
            OutcomeKind::InfraError => &mut self.infra_error,
            OutcomeKind::NotExercised | OutcomeKind::NotApplicable | OutcomeKind::Unavailable => {
                return None
            }
        })
    }

    /// Adds `n` states of `kind` (kinds no state can have are ignored).
    pub fn add(&mut self, kind: OutcomeKind, n: usize) {
        if let Some(slot) = self.slot(kind) {
            *slot += n;
        }
    }

    /// States of `kind`.
    pub fn get(&self, kind: OutcomeKind) -> usize {
        self.clone().slot(kind).map_or(0, |s| *s)
    }

    /// Adds another shard's counts.
    pub fn merge(&mut self, other: &OutcomeCounts) {
        for k in OutcomeKind::STATE {
            self.add(k, other.get(k));
        }
    }

    /// The verdict these counts make: the first kind in precedence order with a state.
    pub fn verdict(&self) -> OutcomeKind {
        OutcomeKind::worst(OutcomeKind::STATE.into_iter().filter(|&k| self.get(k) > 0))
    }

    /// The counts as `3 held, 1 needs-repair`, every state kind, in precedence order
    /// (`infra-error` only when a state has it: it is bob's trouble, not a result;
    /// `kernel-crash` only when a state has it: only a virtual machine can show it).
    pub fn text(&self) -> String {
        OutcomeKind::ALL
            .into_iter()
            .filter(|k| OutcomeKind::STATE.contains(k))
            .filter(|&k| k != OutcomeKind::InfraError || self.infra_error > 0)
            .filter(|&k| k != OutcomeKind::KernelCrash || self.kernel_crash > 0)
            .map(|k| format!("{} {}", self.get(k), k.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// States whose kernel mount failed, grouped by the kernel's error, what repaired them
/// and what their torn write hit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountFailure {
    /// The kernel's answer to the first mount.
    pub error: String,
    /// The repair step after which the states mounted; absent: they never did
    /// (unrecoverable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired_by: Option<String>,
    /// Explored states in this group.
    pub count: usize,
    /// Id of the first of them (in the cell's full state order).
    pub first_state: String,
    /// Its position in the cell's full state list (merging shards keeps the earliest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_position: Option<usize>,
    /// What the states' torn write tore, when it tore a superblock, a journal superblock
    /// or the log's start; absent when no write was torn there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torn_write_role: Option<RegionRole>,
}

/// States that mounted but where a read failed, grouped by path and error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadErrorCause {
    /// The path whose read failed (empty: the walk of the tree).
    pub path: String,
    /// The error, with its errno.
    pub error: String,
    /// Explored states in this group.
    pub count: usize,
    /// Id of the first of them.
    pub first_state: String,
    /// Its position in the cell's full state list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_position: Option<usize>,
}

/// States that recovered but whose read-only fsck complained (and broke no promise the
/// oracle judges), grouped by the complaint: what the fsck-failed count is made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsckFailure {
    /// The fsck's command, exit code and first complaint.
    pub message: String,
    /// Explored states in this group.
    pub count: usize,
    /// Id of the first of them.
    pub first_state: String,
    /// Its position in the cell's full state list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_position: Option<usize>,
}

/// Whether a state at position `pos` in a cell's full state list comes before the one
/// kept so far (`than`; `None`: none kept yet). Merged shards keep the earliest state,
/// the one an unsharded run would name.
fn earlier(pos: Option<usize>, than: Option<usize>) -> bool {
    match (pos, than) {
        (Some(a), Some(b)) => a < b,
        (Some(_), None) => true,
        _ => false,
    }
}

/// A group of states by cause (mount failures, read errors, fsck complaints): how many,
/// and the earliest of them.
trait StateGroup: Clone {
    /// Whether `other` is a group of the same cause.
    fn same_cause(&self, other: &Self) -> bool;
    /// Its count, its first state's id and that state's position.
    fn tally(&mut self) -> (&mut usize, &mut String, &mut Option<usize>);
}

impl StateGroup for MountFailure {
    fn same_cause(&self, o: &Self) -> bool {
        self.error == o.error
            && self.repaired_by == o.repaired_by
            && self.torn_write_role == o.torn_write_role
    }
    fn tally(&mut self) -> (&mut usize, &mut String, &mut Option<usize>) {
        (&mut self.count, &mut self.first_state, &mut self.first_position)
    }
}

impl StateGroup for ReadErrorCause {
    fn same_cause(&self, o: &Self) -> bool {
        self.path == o.path && self.error == o.error
    }
    fn tally(&mut self) -> (&mut usize, &mut String, &mut Option<usize>) {
        (&mut self.count, &mut self.first_state, &mut self.first_position)
    }
}

impl StateGroup for FsckFailure {
    fn same_cause(&self, o: &Self) -> bool {
        self.message == o.message
    }
    fn tally(&mut self) -> (&mut usize, &mut String, &mut Option<usize>) {
        (&mut self.count, &mut self.first_state, &mut self.first_position)
    }
}

/// Folds `b`'s groups into `a` (shards of one cell, or one state at a time): counts add
/// up, and each group keeps its earliest state.
fn merge_groups<G: StateGroup>(a: &mut Vec<G>, b: &[G]) {
    for f in b {
        match a.iter_mut().find(|x| x.same_cause(f)) {
            Some(x) => {
                let mut f = f.clone();
                let (count, state, position) = f.tally();
                let (x_count, x_state, x_position) = x.tally();
                *x_count += *count;
                if earlier(*position, *x_position) {
                    *x_state = std::mem::take(state);
                    *x_position = *position;
                }
            }
            None => a.push(f.clone()),
        }
    }
}

/// Folds `b`'s mount-failure groups into `a` (shards of one cell).
pub(crate) fn merge_mount_failures(a: &mut Vec<MountFailure>, b: &[MountFailure]) {
    merge_groups(a, b)
}

/// Folds `b`'s read-error groups into `a`.
pub(crate) fn merge_read_errors(a: &mut Vec<ReadErrorCause>, b: &[ReadErrorCause]) {
    merge_groups(a, b)
}

/// Folds `b`'s fsck-failure groups into `a`.
pub(crate) fn merge_fsck_failures(a: &mut Vec<FsckFailure>, b: &[FsckFailure]) {
    merge_groups(a, b)
}

/// The role of the region (superblock, journal superblock, ...) that `id`'s torn write
/// tore, if any.
pub fn torn_write_role(subject: &Subject, regions: &Regions, id: &StateId) -> Option<RegionRole> {
    let epoch = subject.epochs.get(id.epoch as usize)?;
    id.applied
        .iter()
        .filter(|a| a.sectors.is_some())
        .filter_map(|a| {
            let entry = subject.trace.entries.get(*epoch.writes.get(a.write as usize)?)?;
            regions.torn_role(entry.sector, entry.nr_sectors, |k| a.has_sector(k as u32))
        })
        .min()
}

/// A cell's failed states by cause: what [`summarize_causes`] gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Causes {
    /// States whose kernel mount failed, repaired or not.
    pub mounts: Vec<MountFailure>,
    /// States that mounted and could not be read.
    pub reads: Vec<ReadErrorCause>,
    /// States whose read-only fsck complained.
    pub fscks: Vec<FsckFailure>,
}

impl Causes {
    /// Every group's first state named as `label`'s (a drain schedule's), as a cell of
    /// several schedules names its states.
    pub fn label_states(&mut self, label: &str) {
        fn prefix<G: StateGroup>(groups: &mut [G], label: &str) {
            for g in groups {
                let (_, state, _) = g.tally();
                *state = format!("{label}/{state}");
            }
        }
        prefix(&mut self.mounts, label);
        prefix(&mut self.reads, label);
        prefix(&mut self.fscks, label);
    }

    /// Folds these groups into `cell`'s.
    pub fn add_to(&self, cell: &mut Cell) {
        merge_groups(&mut cell.mount_failures, &self.mounts);
        merge_groups(&mut cell.read_errors, &self.reads);
        merge_groups(&mut cell.fsck_failures, &self.fscks);
    }
}

/// Per cause, over `results` (explored states, duplicates included; `positions[i]` is
/// `results[i]`'s position in the cell's full list): the states whose kernel mount failed
/// (repaired or not) by kernel error, repair step and torn region, the states with a
/// read error by path and error, and the states whose read-only fsck complained, by
/// complaint. `regions` are the image's regions ([`Subject::regions_if_unmountable`]),
/// which name the region a torn write tore.
pub fn summarize_causes(
    results: &[StateResult],
    positions: &[usize],
    subject: &Subject,
    regions: &Regions,
) -> Causes {
    let mut mounts: Vec<MountFailure> = Vec::new();
    let mut reads: Vec<ReadErrorCause> = Vec::new();
    let mut fscks: Vec<FsckFailure> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let position = Some(positions.get(i).copied().unwrap_or(i));
        let first_state = r.state.id.to_string();
        let mount_error = match (&r.check.repair, &r.check.outcome) {
            (Some(rep), _) => Some((rep.mount_error.clone(), rep.fixed_by.clone())),
            (None, Outcome::Unrecoverable { message }) => Some((message.clone(), None)),
            _ => None,
        };
        if let Some((error, repaired_by)) = mount_error {
            let torn_write_role = torn_write_role(subject, regions, &r.state.id);
            merge_mount_failures(
                &mut mounts,
                &[MountFailure {
                    error,
                    repaired_by,
                    count: 1,
                    first_state: first_state.clone(),
                    first_position: position,
                    torn_write_role,
                }],
            );
        }
        if let Outcome::ReadError { path, error } = &r.check.outcome {
            merge_read_errors(
                &mut reads,
                &[ReadErrorCause {
                    path: path.clone(),
                    error: error.clone(),
                    count: 1,
                    first_state: first_state.clone(),
                    first_position: position,
                }],
            );
        }
        if let Outcome::FsckFailed { message } = &r.check.outcome {
            merge_fsck_failures(
                &mut fscks,
                &[FsckFailure {
                    message: message.clone(),
                    count: 1,
                    first_state,
                    first_position: position,
                }],
            );
        }
    }
    Causes { mounts, reads, fscks }
}

/// One configuration x property result, as `bob run` and `bob table` print it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// [`SCHEMA_VERSION`] of the document.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// Configuration name.
    pub config: String,
    /// Property name.
    pub property: String,
    /// The disk model the crash states were generated under (tables written before disk
    /// models were chosen used the study's: 512-byte units, FUA as a barrier).
    #[serde(default = "crate::crash::DiskModel::study")]
    pub disk_model: crate::crash::DiskModel,
    /// The verdict.
    pub verdict: CellVerdict,
    /// Crash states covered (every state generated, duplicates included).
    pub states_explored: usize,
    /// Distinct states (after content dedup), whether they mounted or not.
    pub states_unique: usize,
    /// Distinct states that mounted (by themselves or after repair).
    #[serde(default)]
    pub states_mounted: usize,
    /// Distinct images the mounted states recovered to (mount stamps masked), where dedup
    /// after recovery or `--fsck once` computed them; summed over shards, so an upper
    /// bound for a merged cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states_recovered_unique: Option<usize>,
    /// Mounted states whose snapshot and fsck result came from an earlier state that
    /// recovered to the same image (dedup after recovery).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub snapshot_reused: usize,
    /// Mounted states whose fsck result came from an earlier state that recovered to the
    /// same image (`--fsck once`); every state keeps a result.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fsck_reused: usize,
    /// Distinct states not mounted at all: their bytes equal an earlier state's on every
    /// sector that state's recovery, walk and fsck read, so they share its check and only
    /// their verdict is judged (reuse by reads). Counted in `states_mounted`: they mount.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reads_reused: usize,
    /// Of `reads_reused`, the states that differed from the state whose mount they took
    /// in file data only its walk read, classified from their own bytes (mount once, walk
    /// many: `check::file_data`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub file_data_patched: usize,
    /// Distinct states whose whole check was taken from the cell's journal: the same
    /// state was checked under an earlier disk model of the same recording (or by the run
    /// this one resumes). Counted in `states_mounted`: they mount.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub journal_reused: usize,
    /// Wall time of the cell, recording included.
    pub seconds: f64,
    /// Recordings of this cell whose file system was made by mkfs for them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_made: usize,
    /// Recordings of this cell that started from a copy of a file system the run had
    /// already made (shared setup), instead of running mkfs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub setup_reused: usize,
    /// Witness directory of the first violation (or first failure), if any.
    pub witness: Option<String>,
    /// `uname -r` of the kernel the states were checked on (absent in cells written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Witness directory of the first state whose recovery crashed the kernel of the
    /// virtual machine, with the guest's console log, when that is not the cell's own
    /// witness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_crash_witness: Option<String>,
    /// Distinct crash states a state cap (`--max-states`) left out of this cell: when not
    /// zero, a `held` says only that no checked state broke the property.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub states_left_out: usize,
    /// Crash states of a schedule's second and later recordings left unchecked: each of
    /// those recordings is checked only until its first violation, which is all that the
    /// verdict and the racy count (`violated in k of n recordings`) need. Not counted in
    /// `states_explored`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub states_unchecked: usize,
    /// The first violation's (or failure's) one-line story.
    pub story: Option<String>,
    /// What the witness's story tells, typed, when the oracle found a violation there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discrepancy: Option<workloads::Discrepancy>,
    /// Id of the witness's crash state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_state: Option<String>,
    /// Position of the witness's state in the cell's full (unsharded) state list, so that
    /// merged shards pick the same witness an unsharded run would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_position: Option<usize>,
    /// Whether an independent replay of the witness (fresh image, loop device and mount)
    /// reached the same outcome; a cross that does not is marked, never silently printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    /// Why the independent replay of the witness could not run (bob's own machinery
    /// failed twice); the cross stands, unconfirmed, and the table marks it `x?`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_error: Option<String>,
    /// `I/N` when this cell covers one shard of its crash states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Outcome counts over explored states.
    pub counts: OutcomeCounts,
    /// States whose kernel mount failed, by cause (repaired or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_failures: Vec<MountFailure>,
    /// States that mounted but where a read failed, by path and error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_errors: Vec<ReadErrorCause>,
    /// States whose read-only fsck complained, by complaint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fsck_failures: Vec<FsckFailure>,
    /// Why the configuration is unavailable, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// For `detects-inconsistency`: one entry per scenario of the reliability table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioCell>,
    /// For an ordering property's cross: the earlier op of the property's pair, which did
    /// not persist in the witness state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_op: Option<workloads::OpRef>,
    /// ... and the later op of the pair, which did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_op: Option<workloads::OpRef>,
    /// Reorderings of ops outside the property's pair seen in the explored states: worth
    /// knowing, but another row's finding, never this cell's verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_reorderings: Option<BesideFindings>,
    /// Durability failures seen in a workload whose property is not about durability
    /// (e.g. the O_SYNC creat of append-then-dir-op): the durability rows' business.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_durability: Option<BesideFindings>,
    /// Each promise of the workload (fsync, fdatasync, sync, synchronous creat) and in how
    /// many explored crash states it was due (its call had returned): a promise due in
    /// none was not judged, and a durability cell says so (`not-exercised`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub promises: Vec<PromiseCoverage>,
    /// The drain schedule whose recording produced the witness (its state id carries it
    /// as a prefix too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_schedule: Option<String>,
    /// Per drain schedule: its trace digest, states and outcome counts (they add up to
    /// the cell's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleCell>,
    /// Some schedule of the cell is racy (see [`ScheduleCell::racy`]): a violation
    /// appeared in some of its recordings and not in others, so the cell's verdict is not
    /// one recording's to give, and `bob diff` reports a change of it as racy, not as a
    /// change.
    #[serde(default, skip_serializing_if = "is_false")]
    pub racy: bool,
    /// For the multi-block properties: how many barriers the judged op's own writes
    /// spanned (the most over the schedules; each schedule's is in `schedules`). Below 1
    /// the op never crossed a commit and the cell is `not-exercised`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_barriers: Option<usize>,
    /// Why the cell is `not-exercised`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_exercised: Option<String>,
    /// Distinct states retried on a fresh loop device and mount point after bob's own
    /// machinery failed on them (each retried once; `counts.infra_error` are those whose
    /// retry failed too).
    #[serde(default)]
    pub infra_retries: usize,
    /// The first state not checked (`counts.infra_error`) and why: `sync/e3:0-4: loop
    /// device /dev/loop7: ...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_error: Option<String>,
}

/// One promise of a workload and how often it was judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromiseCoverage {
    /// The op that made the promise.
    pub op: workloads::OpRef,
    /// Explored states in which it was due.
    pub states: usize,
}

impl PromiseCoverage {
    /// The promises of `results`' workload and the states each was due in;
    /// `durable_ops(i)` gives the promises due in `results[i]`.
    pub fn of(
        workload: &workloads::Workload,
        results: &[StateResult],
        durable_ops: impl Fn(&StateResult) -> Vec<usize>,
    ) -> Vec<PromiseCoverage> {
        let mut out: Vec<PromiseCoverage> = workload
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| {
                // Released output promises too, and under metadata-op-durable each
                // directory op (`check::Subject::durable_ops`).
                op.is_persistence_point()
                    || **op == workloads::Op::Output
                    || (workload.property == Some(workloads::Property::MetadataOpDurable)
                        && op.kind().is_metadata_op())
            })
            .map(|(i, op)| PromiseCoverage { op: op.op_ref(i), states: 0 })
            .collect();
        for r in results {
            for d in durable_ops(r) {
                if let Some(p) = out.iter_mut().find(|p| p.op.index == d) {
                    p.states += 1;
                }
            }
        }
        out
    }

    /// Folds another shard's coverage of the same workload into `a`.
    pub fn merge(a: &mut Vec<PromiseCoverage>, b: &[PromiseCoverage]) {
        for p in b {
            match a.iter_mut().find(|x| x.op.index == p.op.index) {
                Some(x) => x.states += p.states,
                None => a.push(p.clone()),
            }
        }
    }
}

impl Cell {
    /// A held durability cell with a promise due in no state is `not-exercised`: its
    /// "held" would say nothing about that promise.
    pub(crate) fn apply_promise_coverage(&mut self) {
        let durability = self
            .property
            .parse::<workloads::Property>()
            .is_ok_and(|p| p.family() == workloads::Family::Durability);
        if durability
            && self.verdict == CellVerdict::Held
            && self.promises.iter().any(|p| p.states == 0)
        {
            self.verdict = CellVerdict::NotExercised;
        }
    }

    /// Promises due in no explored state, as text ("fsync /A/f0 (op 1)").
    pub(crate) fn unexercised_promises(&self) -> Vec<String> {
        self.promises
            .iter()
            .filter(|p| p.states == 0)
            .map(|p| format!("{} {} (op {})", p.op.kind.name(), p.op.paths.join(" "), p.op.index))
            .collect()
    }
}

/// Findings of other rows seen in a cell's states: how many states, and the first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BesideFindings {
    /// Explored states with such a finding.
    pub count: usize,
    /// The first of them (a state id of the cell's trace).
    pub first_state: String,
    /// Its position in the cell's full state list (merging shards keeps the earliest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_position: Option<usize>,
    /// Its story.
    pub first_story: String,
    /// For a reordering: the two ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<workloads::OpPair>,
}

impl BesideFindings {
    /// Folds another shard's findings of the same kind into these.
    pub fn merge(a: &mut Option<BesideFindings>, b: &Option<BesideFindings>) {
        match (a.as_mut(), b) {
            (_, None) => {}
            (None, Some(b)) => *a = Some(b.clone()),
            (Some(x), Some(y)) => {
                let count = x.count + y.count;
                if earlier(y.first_position, x.first_position) {
                    *x = y.clone();
                }
                x.count = count;
            }
        }
    }

    /// The findings of `family` beside the verdict in `results`; `positions[i]` is the
    /// position of `results[i]`'s state in the cell's full list.
    pub fn of(
        results: &[StateResult],
        positions: Option<&[usize]>,
        family: workloads::Family,
    ) -> Option<BesideFindings> {
        let mut out: Option<BesideFindings> = None;
        for (i, r) in results.iter().enumerate() {
            let Some(f) = r.check.beside.iter().find(|f| f.family == family) else { continue };
            match &mut out {
                Some(b) => b.count += 1,
                None => {
                    out = Some(BesideFindings {
                        count: 1,
                        first_state: r.state.id.to_string(),
                        first_position: Some(
                            positions.and_then(|p| p.get(i).copied()).unwrap_or(i),
                        ),
                        first_story: f.story.clone(),
                        pair: f.pair.clone(),
                    })
                }
            }
        }
        out
    }

    /// One line: "12 states, first e3:0-4: append ... persisted (op 4), ...".
    pub fn to_text(&self) -> String {
        format!("{} state(s), first {}: {}", self.count, self.first_state, self.first_story)
    }
}

/// One scenario of the reliability table (mkdir, link, ...) in one cell: what the crash
/// states did to the paths its operations touched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioCell {
    /// The scenario's name.
    pub scenario: String,
    /// Thesis kinds (BD, HL, GD, TP) some state returned silently on its paths.
    pub silent_kinds: Vec<String>,
    /// Explored states with a silent result on its paths.
    pub silent_states: usize,
    /// Explored states in which an access to its paths returned an error (detected).
    pub error_states: usize,
    /// The first state (in the cell's full state order) with a silent result: replay it
    /// with `bob replay <witness> --state <id> --check`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_state: Option<String>,
    /// That state's position in the cell's full state list (merging shards keeps the
    /// earliest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_position: Option<usize>,
    /// What was silently wrong in that state, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<String>,
    /// Whether an independent replay of that state found the same silent kinds here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
}

impl ScenarioCell {
    /// Folds another shard's (or rerun's) entry for the same scenario into this one.
    pub fn merge(&mut self, b: &ScenarioCell) {
        self.silent_states += b.silent_states;
        self.error_states += b.error_states;
        self.silent_kinds.extend(b.silent_kinds.iter().cloned());
        self.silent_kinds.sort();
        self.silent_kinds.dedup();
        if earlier(b.witness_position, self.witness_position) {
            self.witness_state = b.witness_state.clone();
            self.witness_position = b.witness_position;
            self.story = b.story.clone();
            self.confirmed = b.confirmed;
        }
    }
}

/// Per scenario of the `detects-inconsistency` workload, over `results` (explored states,
/// duplicates included, so that counts cover every state); `positions[i]` is the position
/// of `results[i]`'s state in the cell's full list. Empty for every other workload.
pub(crate) fn summarize_scenarios(
    results: &[StateResult],
    positions: &[usize],
) -> Vec<ScenarioCell> {
    let mut out: Vec<ScenarioCell> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        for mark in &r.check.scenarios {
            let cell = match out.iter().position(|c| c.scenario == mark.scenario) {
                Some(k) => &mut out[k],
                None => {
                    out.push(ScenarioCell {
                        scenario: mark.scenario.clone(),
                        ..Default::default()
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            if mark.errors > 0 {
                cell.error_states += 1;
            }
            if !mark.silent.is_empty() {
                cell.silent_states += 1;
                cell.silent_kinds.extend(mark.silent.iter().cloned());
                cell.silent_kinds.sort();
                cell.silent_kinds.dedup();
                let position = positions.get(i).copied().unwrap_or(i);
                if cell.witness_position.is_none_or(|p| position < p) {
                    cell.witness_state = Some(r.state.id.to_string());
                    cell.witness_position = Some(position);
                    cell.story = mark.story.clone();
                }
            }
        }
    }
    out
}

/// Folds per-state results into counts, the verdict, and the index of the state whose
/// witness the cell shows (the first violation, else the first failure of the category
/// the verdict names; none for `infra-error`).
pub(crate) fn summarize(results: &[StateResult]) -> (CellVerdict, OutcomeCounts, Option<usize>) {
    let mut counts = OutcomeCounts::default();
    for r in results {
        counts.add(r.check.outcome.kind(), 1);
    }
    let verdict = counts.verdict();
    // A state bob could not check has nothing to replay.
    let witness = results.iter().position(|r| {
        r.check.outcome.kind() == verdict
            && !matches!(verdict, CellVerdict::Held | CellVerdict::InfraError)
    });
    (verdict, counts, witness)
}

/// The first of `results` that bob could not check, as `<its id>: <why>` (`id(i, r)`
/// names `results[i]`: with its schedule in a cell of several).
pub(crate) fn first_infra_error(
    results: &[StateResult],
    id: impl Fn(usize, &StateResult) -> String,
) -> Option<String> {
    results.iter().enumerate().find_map(|(i, r)| match &r.check.outcome {
        Outcome::InfraError { message } => Some(format!("{}: {message}", id(i, r))),
        _ => None,
    })
}

impl Cell {
    /// The cell of `results` (the explored states, in order): verdict, outcome counts,
    /// states explored and mounted, nothing else yet; and the index of the state whose
    /// witness it shows (see [`summarize`]).
    pub fn of_results(
        config: &str,
        property: &str,
        results: &[StateResult],
    ) -> (Cell, Option<usize>) {
        let (verdict, counts, witness_index) = summarize(results);
        let distinct = |i: usize, r: &StateResult| r.mounted_as == i;
        let cell = Cell {
            schema_version: SCHEMA_VERSION,
            config: config.into(),
            property: property.into(),
            disk_model: crate::crash::DiskModel::default(),
            verdict,
            states_explored: results.len(),
            states_unique: results.iter().enumerate().filter(|&(i, r)| distinct(i, r)).count(),
            states_mounted: results
                .iter()
                .enumerate()
                .filter(|&(i, r)| distinct(i, r) && r.check.did_mount())
                .count(),
            states_recovered_unique: recovered_unique(results),
            snapshot_reused: mounted_checks(results).filter(|c| c.snapshot_reused).count(),
            fsck_reused: mounted_checks(results).filter(|c| c.fsck_reused).count(),
            reads_reused: mounted_checks(results).filter(|c| c.reads_reused).count(),
            file_data_patched: mounted_checks(results).filter(|c| c.file_data_patched).count(),
            journal_reused: mounted_checks(results).filter(|c| c.journal_reused).count(),
            seconds: 0.0,
            setup_made: 0,
            setup_reused: 0,
            witness: None,
            kernel: None,
            kernel_crash_witness: None,
            states_left_out: 0,
            states_unchecked: 0,
            story: None,
            discrepancy: None,
            witness_state: None,
            witness_position: None,
            confirmed: None,
            confirm_error: None,
            shard: None,
            counts,
            mount_failures: Vec::new(),
            read_errors: Vec::new(),
            fsck_failures: Vec::new(),
            unavailable: None,
            scenarios: Vec::new(),
            earlier_op: None,
            later_op: None,
            other_reorderings: BesideFindings::of(results, None, workloads::Family::Ordering),
            other_durability: BesideFindings::of(results, None, workloads::Family::Durability),
            promises: Vec::new(),
            witness_schedule: None,
            schedules: Vec::new(),
            racy: false,
            op_barriers: None,
            not_exercised: None,
            infra_retries: results
                .iter()
                .enumerate()
                .filter(|&(i, r)| distinct(i, r))
                .map(|(_, r)| r.check.infra_retries)
                .sum(),
            infra_error: first_infra_error(results, |_, r| r.state.id.to_string()),
        };
        (cell, witness_index)
    }

    /// The racy schedules, each in words: "syncfs violated in 2 of 5 recordings: racy".
    pub(crate) fn racy_text(&self) -> Vec<String> {
        self.schedules
            .iter()
            .filter(|s| s.racy)
            .filter_map(|s| s.recordings_text().map(|t| format!("{} {t}", s.schedule)))
            .collect()
    }

    /// Sets [`Cell::racy`] from its schedules.
    pub(crate) fn update_racy(&mut self) {
        self.racy = self.schedules.iter().any(|s| s.racy);
    }

    /// Folds the speed counters of another part of the same cell (a shard, a schedule).
    pub(crate) fn add_speed_counts(&mut self, b: &Cell) {
        self.states_recovered_unique =
            match (self.states_recovered_unique, b.states_recovered_unique) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
            };
        self.snapshot_reused += b.snapshot_reused;
        self.fsck_reused += b.fsck_reused;
        self.reads_reused += b.reads_reused;
        self.file_data_patched += b.file_data_patched;
        self.journal_reused += b.journal_reused;
    }

    /// Applies what the recording exercised: `op_barriers` is how many barriers the judged
    /// op's writes spanned (`None`: the property makes no such claim). A cell whose op
    /// spanned none cannot have tested what it claims, so a `held` becomes
    /// `not-exercised`, with `why`; a violation found anyway stays one.
    pub(crate) fn apply_exercise(&mut self, op_barriers: Option<usize>, why: Option<String>) {
        self.op_barriers = op_barriers;
        if op_barriers == Some(0) {
            self.not_exercised = why.or_else(|| Some("the op's writes fell into one epoch".into()));
            if self.verdict == CellVerdict::Held {
                self.verdict = CellVerdict::NotExercised;
            }
        }
    }

    /// Human-readable lines for the terminal.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        self.text_summary(&mut s);
        self.text_causes(&mut s);
        self.text_coverage(&mut s);
        self.text_machinery(&mut s);
        self.text_schedules(&mut s);
        self.text_witness(&mut s);
        s
    }

    /// How the distinct states were checked, in numbers that add up to them: mounted
    /// here, judged from an earlier state's mount (reuse by reads), taken from the check
    /// of the same state under an earlier disk model (both counted as mounted in
    /// `states_mounted`, though this cell never mounted them), and never mounted.
    pub fn how_checked(&self) -> String {
        let mounted_here = self
            .states_mounted
            .saturating_sub(self.reads_reused)
            .saturating_sub(self.journal_reused);
        let mut parts = vec![format!("{mounted_here} mounted")];
        if self.reads_reused > 0 {
            parts.push(format!("{} judged from an earlier state's mount", self.reads_reused));
        }
        if self.journal_reused > 0 {
            parts.push(format!(
                "{} checked already under an earlier disk model (or by the resumed run)",
                self.journal_reused
            ));
        }
        let never = self.states_unique.saturating_sub(self.states_mounted);
        if never > 0 {
            parts.push(format!("{never} never mounted"));
        }
        parts.join(", ")
    }

    /// The verdict, the states, the outcomes, and what recovery and reads shared.
    fn text_summary(&self, s: &mut String) {
        s.push_str(&format!(
            "{} / {} [{}]: {}{} ({} explored, {} distinct: {}; {:.1}s)\n",
            self.config,
            self.property,
            self.disk_model,
            self.verdict.name().to_uppercase(),
            if self.racy { ", RACY" } else { "" },
            self.states_explored,
            self.states_unique,
            self.how_checked(),
            self.seconds
        ));
        s.push_str(&format!("  outcomes: {}\n", self.counts.text()));
        let racy = self.racy_text();
        if !racy.is_empty() {
            s.push_str(&format!(
                "  racy:    {}; the verdict is the union's, and another run may see the race \
                 go the other way\n",
                racy.join("; ")
            ));
        }
        if self.states_unchecked > 0 {
            s.push_str(&format!(
                "  recordings: after a schedule's first recording, each later one was checked \
                 until its first violation, all that `violated in k of n` needs; {} of their \
                 states were not checked and are not counted above\n",
                self.states_unchecked
            ));
        }
        if let Some(n) = self.states_recovered_unique {
            s.push_str(&format!(
                "  recovery: the mounted states recovered to {n} distinct image(s); {} reused \
                 an earlier state's snapshot and fsck, {} its fsck alone\n",
                self.snapshot_reused,
                self.fsck_reused.saturating_sub(self.snapshot_reused)
            ));
        }
        if self.reads_reused > 0 {
            s.push_str(&format!(
                "  reuse by reads: {} state(s) were not mounted, as their bytes equal an \
                 earlier state's on every sector its recovery, walk and fsck read; only \
                 their verdicts were judged{}\n",
                self.reads_reused,
                match self.file_data_patched {
                    0 => String::new(),
                    n => format!(
                        " ({n} of them differed from it in file data only its walk read, \
                         read from their own bytes)"
                    ),
                }
            ));
        }
    }

    /// Why states did not mount or read, and the story and pair of the verdict.
    fn text_causes(&self, s: &mut String) {
        for f in &self.mount_failures {
            let fate = match &f.repaired_by {
                Some(step) => format!("mounted after {step}"),
                None => "unrecoverable".into(),
            };
            let torn =
                f.torn_write_role.map(|r| format!(", torn {}", r.name())).unwrap_or_default();
            s.push_str(&format!(
                "  mount failed in {} state(s) ({fate}{torn}; first {}): {}\n",
                f.count, f.first_state, f.error
            ));
        }
        for f in &self.read_errors {
            s.push_str(&format!(
                "  read error in {} state(s) (first {}): {}: {}\n",
                f.count,
                f.first_state,
                if f.path.is_empty() { "the tree" } else { &f.path },
                f.error
            ));
        }
        for f in &self.fsck_failures {
            s.push_str(&format!(
                "  fsck failed in {} state(s) (first {}): {}\n",
                f.count, f.first_state, f.message
            ));
        }
        if let Some(story) = &self.story {
            s.push_str(&format!("  story:   {story}\n"));
        }
        if let (Some(a), Some(b)) = (&self.earlier_op, &self.later_op) {
            s.push_str(&format!(
                "  pair:    op {} ({}) did not persist, op {} ({}) did\n",
                a.index,
                a.kind.name(),
                b.index,
                b.kind.name(),
            ));
        }
    }

    /// What the workload exercised, and what was seen beside the verdict.
    fn text_coverage(&self, s: &mut String) {
        let unexercised = self.unexercised_promises();
        if !unexercised.is_empty() {
            s.push_str(&format!(
                "  not exercised: no crash state after {} returned\n",
                unexercised.join(", ")
            ));
        }
        if let Some(o) = &self.other_reorderings {
            s.push_str(&format!(
                "  beside:  other reorderings (not this row's pair): {}\n",
                o.to_text()
            ));
        }
        if let Some(o) = &self.other_durability {
            s.push_str(&format!(
                "  beside:  durability failures (the durability rows'): {}\n",
                o.to_text()
            ));
        }
        if let Some(n) = self.op_barriers {
            s.push_str(&format!("  op barriers: the judged op's writes spanned {n} barrier(s)\n"));
        }
        if let Some(why) = &self.not_exercised {
            s.push_str(&format!("  not exercised: {why}\n"));
        }
    }

    /// States bob's own machinery failed on: retried, or left unchecked; and the drain schedules that found no violation.
    fn text_machinery(&self, s: &mut String) {
        if self.infra_retries > 0 {
            s.push_str(&format!(
                "  retried: {} state(s) on a fresh loop device and mount point after bob's own \
                 machinery failed on them (not the file system's doing)\n",
                self.infra_retries
            ));
        }
        if self.counts.infra_error > 0 {
            s.push_str(&format!(
                "  NOT CHECKED: {} state(s): bob's own machinery failed on them twice, so \
                 nothing is concluded about them; run again with --resume to check only \
                 them (first {})\n",
                self.counts.infra_error,
                self.infra_error.as_deref().unwrap_or("?")
            ));
        }
        if self.schedules.len() > 1 && self.counts.violated == 0 {
            let names: Vec<&str> = self.schedules.iter().map(|s| s.schedule.as_str()).collect();
            s.push_str(&format!(
                "  no drain schedule ({}) produced a violation\n",
                names.join(", ")
            ));
        }
    }

    /// Each drain schedule's share.
    fn text_schedules(&self, s: &mut String) {
        for sc in &self.schedules {
            let fua = match (sc.fua_writes, sc.fua_postflushes, self.disk_model.fua) {
                (0, _, _) => String::new(),
                (w, 0, _) => format!(", {w} FUA writes"),
                (w, p, FuaModel::Real) => {
                    format!(", {w} FUA writes ({p} flushes that emulated them: no barriers)")
                }
                (w, p, FuaModel::Barrier) => {
                    format!(", {w} FUA writes ({p} flushes that emulated them: barriers)")
                }
            };
            let recordings = sc.recordings_text().map(|t| format!(" ({t})")).unwrap_or_default();
            s.push_str(&format!(
                "  schedule {:<16} {:<13} {} explored, {} distinct{recordings}: {}{}{}{fua} \
                 (trace {})\n",
                sc.schedule,
                sc.verdict.name(),
                sc.states_explored,
                sc.states_unique,
                sc.counts.text(),
                sc.first_state.as_deref().map(|f| format!(", first {f}")).unwrap_or_default(),
                sc.op_barriers.map(|b| format!(", op barriers {b}")).unwrap_or_default(),
                &sc.trace_digest[..sc.trace_digest.len().min(12)],
            ));
        }
    }

    /// The witness and its replay, a kernel crash's witness, why the cell could not run,
    /// and each scenario.
    fn text_witness(&self, s: &mut String) {
        if let Some(w) = &self.witness {
            let confirmed = match (self.confirmed, &self.confirm_error) {
                (Some(true), _) => " (confirmed by an independent replay)".to_owned(),
                (Some(false), _) => {
                    " (NOT confirmed: an independent replay reached another outcome)".to_owned()
                }
                (None, Some(why)) => {
                    format!(" (NOT confirmed: the independent replay could not run: {why})")
                }
                (None, None) => String::new(),
            };
            let state = self
                .witness_state
                .as_deref()
                .map(|id| format!(" --state {id}"))
                .unwrap_or_default();
            s.push_str(&format!(
                "  witness: {w}{confirmed}\n  replay:  bob replay {w}{state} --to crash.img --check\n"
            ));
        }
        if let Some(k) = &self.kernel_crash_witness {
            s.push_str(&format!(
                "  kernel crash: {k} (the guest's console log is {k}/console.log)\n"
            ));
        }
        if let Some(u) = &self.unavailable {
            s.push_str(&format!("  unavailable: {u}\n"));
        }
        for sc in &self.scenarios {
            s.push_str(&format!("  {:<15} {}\n", sc.scenario, scenario_text(sc)));
        }
    }
}

/// One scenario's result in words: "silent HL in 3 states (e0:0-6)", "detected: an error
/// in 12 states", or "nothing wrong".
fn scenario_text(sc: &ScenarioCell) -> String {
    if sc.silent_states > 0 {
        let unconfirmed = if sc.confirmed == Some(false) { ", NOT confirmed" } else { "" };
        format!(
            "silent {} in {} state(s) (first: {}{unconfirmed})",
            sc.silent_kinds.join(", "),
            sc.silent_states,
            sc.witness_state.as_deref().unwrap_or("?")
        )
    } else if sc.error_states > 0 {
        format!("detected: an access returned an error in {} state(s)", sc.error_states)
    } else {
        "nothing wrong".to_owned()
    }
}

/// The checks of the states that were mounted (not deduplicated before mounting).
pub(crate) fn mounted_checks(results: &[StateResult]) -> impl Iterator<Item = &StateCheck> + '_ {
    results.iter().enumerate().filter(|(i, r)| r.mounted_as == *i).map(|(_, r)| r.check.as_ref())
}

/// Distinct recovered images among the mounted states, if any was keyed.
fn recovered_unique(results: &[StateResult]) -> Option<usize> {
    let keys: std::collections::HashSet<&str> =
        mounted_checks(results).filter_map(|c| c.recovered_image.as_deref()).collect();
    (!keys.is_empty()).then_some(keys.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first line's numbers add up: of the distinct states, those mounted here, those
    /// judged from an earlier state's mount, and those that never mounted.
    #[test]
    fn a_cells_first_line_says_how_many_states_were_mounted_here() {
        let cell = Cell {
            config: "btrfs".into(),
            property: "single-block-append".into(),
            states_explored: 298,
            states_unique: 296,
            states_mounted: 294,
            reads_reused: 284,
            ..Default::default()
        };
        let first = cell.to_text().lines().next().unwrap().to_owned();
        assert!(
            first.contains("(298 explored, 296 distinct: 10 mounted, 284 judged from an earlier state's mount, 2 never mounted;"),
            "{first}"
        );
        let plain = Cell { reads_reused: 0, states_unique: 294, ..cell.clone() };
        let first = plain.to_text().lines().next().unwrap().to_owned();
        assert!(first.contains("294 distinct: 294 mounted;"), "{first}");
        let second_model = Cell { reads_reused: 4, journal_reused: 280, ..cell };
        let first = second_model.to_text().lines().next().unwrap().to_owned();
        assert!(
            first.contains("296 distinct: 10 mounted, 4 judged from an earlier state's mount, 280 checked already under an earlier disk model (or by the resumed run), 2 never mounted;"),
            "{first}"
        );
    }

    fn share(held: usize, violated: usize, first: Option<(&str, usize)>) -> ScheduleCell {
        let counts = OutcomeCounts { held, violated, ..Default::default() };
        ScheduleCell {
            schedule: "syncfs".into(),
            trace_digest: "ab".repeat(32),
            verdict: counts.verdict(),
            states_explored: held + violated,
            states_unique: held + violated,
            counts,
            first_state: first.map(|f| f.0.to_owned()),
            first_position: first.map(|f| f.1),
            op_barriers: Some(3),
            fua_writes: 0,
            fua_postflushes: 0,
            ..Default::default()
        }
    }

    #[test]
    fn schedule_shares_of_shards_merge_to_the_unsharded_share() {
        // Shard 1 saw only held states; shards 2 and 3 violations at positions 9 and 4.
        let mut a = share(10, 0, None);
        a.merge(&share(5, 2, Some(("syncfs/e3:1", 9))));
        assert_eq!(a.verdict, CellVerdict::Violated);
        assert_eq!(a.first_state.as_deref(), Some("syncfs/e3:1"));
        a.merge(&share(6, 1, Some(("syncfs/e2:0", 4))));
        assert_eq!((a.states_explored, a.counts.violated), (24, 3));
        assert_eq!(a.first_state.as_deref(), Some("syncfs/e2:0"), "the earliest state");
        assert_eq!(a.first_position, Some(4));
        a.merge(&share(3, 0, None));
        assert_eq!(a.first_position, Some(4));
    }

    #[test]
    fn a_schema_1_cell_reads_with_mount_failed_as_unrecoverable() {
        let old = r#"{"config":"ext4-ordered","property":"single-block-append",
            "verdict":"mount-failed","states_explored":12,"states_unique":9,"seconds":1.0,
            "witness":null,"story":null,
            "counts":{"held":10,"violated":0,"mount_failed":2,"fsck_failed":0,"timeout":0}}"#;
        let cell: Cell = serde_json::from_str(old).unwrap();
        assert_eq!(cell.schema_version, 1);
        assert_eq!(cell.verdict, OutcomeKind::Unrecoverable);
        assert_eq!(cell.counts.unrecoverable, 2);
        assert_eq!(cell.counts.verdict(), OutcomeKind::Unrecoverable);
        let again = serde_json::to_value(Cell { schema_version: SCHEMA_VERSION, ..cell }).unwrap();
        assert_eq!(again["schema_version"], SCHEMA_VERSION);
        assert_eq!(again["verdict"], "unrecoverable");
        assert_eq!(again["counts"]["unrecoverable"], 2);
    }

    #[test]
    fn a_schema_1_state_check_reads_with_mount_failed_as_unrecoverable() {
        let old = r#"{"outcome":{"outcome":"mount-failed","message":"mount -t ext4: Bad message"},
            "snapshot":null,"fsck":null,"recovery_writes":0}"#;
        let c: crate::check::StateCheck = serde_json::from_str(old).unwrap();
        assert_eq!(c.outcome.kind(), OutcomeKind::Unrecoverable);
        assert!(!c.did_mount());
    }

    #[test]
    fn counts_follow_the_outcome_table() {
        let mut c = OutcomeCounts::default();
        c.add(OutcomeKind::Held, 5);
        assert_eq!(c.verdict(), OutcomeKind::Held);
        c.add(OutcomeKind::NeedsRepair, 2);
        assert_eq!(c.verdict(), OutcomeKind::NeedsRepair);
        c.add(OutcomeKind::ReadError, 1);
        assert_eq!(c.verdict(), OutcomeKind::ReadError);
        c.add(OutcomeKind::Unrecoverable, 1);
        assert_eq!(c.verdict(), OutcomeKind::Unrecoverable);
        c.add(OutcomeKind::Violated, 1);
        assert_eq!(c.verdict(), OutcomeKind::Violated);
        c.add(OutcomeKind::Unavailable, 3);
        let mut d = c.clone();
        d.merge(&c);
        assert_eq!(d.get(OutcomeKind::Held), 10);
        assert_eq!(d.get(OutcomeKind::NeedsRepair), 4);
        assert_eq!(
            c.text(),
            "1 violated, 1 unrecoverable, 1 read-error, 0 fsck-failed, 0 timeout, 2 needs-repair, 5 held"
        );
    }

    #[test]
    fn states_bob_could_not_check_are_counted_and_said_in_words() {
        let mut cell = Cell::of_results("ext4-ordered", "single-block-append", &[]).0;
        cell.counts.add(OutcomeKind::Held, 4);
        cell.counts.add(OutcomeKind::InfraError, 1);
        cell.verdict = cell.counts.verdict();
        cell.infra_retries = 2;
        cell.infra_error = Some("sync/e1:0: loop device /dev/loop7: attach: busy".into());
        assert_eq!(cell.verdict, OutcomeKind::InfraError, "a held cell with a hole is not held");
        assert!(cell.counts.text().ends_with("1 infra-error, 4 held"), "{}", cell.counts.text());
        let text = cell.to_text();
        assert!(text.contains("retried: 2 state(s) on a fresh loop device"), "{text}");
        assert!(text.contains("NOT CHECKED: 1 state(s)"), "{text}");
        assert!(text.contains("--resume") && text.contains("sync/e1:0: loop device"), "{text}");
        cell.counts.add(OutcomeKind::Violated, 1);
        assert_eq!(cell.counts.verdict(), OutcomeKind::Violated, "a violation found stands");
    }

    #[test]
    fn mount_failure_causes_merge_by_error_repair_and_role_keeping_the_earliest_state() {
        let f = |error: &str, repaired: Option<&str>, count, state: &str, pos| MountFailure {
            error: error.into(),
            repaired_by: repaired.map(Into::into),
            count,
            first_state: state.into(),
            first_position: Some(pos),
            torn_write_role: Some(RegionRole::Superblock),
        };
        let mut a = vec![f("EBADMSG", Some("e2fsck -f -y"), 3, "e5:0[2]", 40)];
        merge_mount_failures(
            &mut a,
            &[
                f("EBADMSG", Some("e2fsck -f -y"), 2, "e1:0[2]", 7),
                f("EBADMSG", None, 1, "e9:0[3]", 90),
            ],
        );
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].count, a[0].first_state.as_str(), a[0].first_position),
            (5, "e1:0[2]", Some(7))
        );
        assert_eq!(a[1].repaired_by, None);
        let json = serde_json::to_value(&a[0]).unwrap();
        assert_eq!(json["torn_write_role"], "superblock");
        assert_eq!(json["repaired_by"], "e2fsck -f -y");
    }

    #[test]
    fn fsck_complaints_merge_by_message_keeping_the_earliest_state_and_print_a_line() {
        let f = |message: &str, count, state: &str, pos| FsckFailure {
            message: message.into(),
            count,
            first_state: state.into(),
            first_position: Some(pos),
        };
        let isize =
            "btrfs check --readonly --force exit 1: root 5 inode 258 errors 200, dir isize wrong";
        let mut a = vec![f(isize, 4, "sync.3/e4:0", 30)];
        merge_fsck_failures(&mut a, &[f(isize, 2, "sync/e3:0", 5), f("other", 1, "sync/e9:0", 90)]);
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].count, a[0].first_state.as_str()), (6, "sync/e3:0"));
        let mut cell = Cell::of_results("btrfs", "cm-r01", &[]).0;
        cell.fsck_failures = a;
        let mut text = String::new();
        cell.text_causes(&mut text);
        assert!(
            text.contains(&format!("fsck failed in 6 state(s) (first sync/e3:0): {isize}")),
            "{text}"
        );
    }
}
