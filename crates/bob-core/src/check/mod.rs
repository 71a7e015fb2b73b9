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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workloads::{CrashContext, Observed, Snapshot, Workload};

pub mod outcome;

pub use outcome::OutcomeKind;

use crate::crash::{CrashState, DiskModel, Epoch, OverlayBuilder, StateId};
use crate::device::fusedisk::DiskServer;
use crate::device::loopdev::LoopDevice;
use crate::device::{cmd, mount};
use crate::fs::{FsConfig, Recovery, RepairStep, Timeouts};
use crate::image::{BaseImage, CrashView};
use crate::trace::sidecar::OpSpan;
use crate::trace::{EntryKind, Trace};

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

/// What checking one crash state found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Recovered, fsck clean, property held.
    Held,
    /// The property failed; the story says how (and, when the state needed repair first,
    /// after which repair step: "after xfs_repair -L: ...").
    Violated {
        /// One line a person understands.
        story: String,
    },
    /// The kernel would not mount the state; a step of the configuration's repair ladder
    /// made it mountable, and the property held in the repaired state.
    NeedsRepair {
        /// The kernel's answer to the first mount.
        message: String,
        /// The repair step after which it mounted (`e2fsck -f -y`).
        repaired_by: String,
    },
    /// The state does not mount, even after the repair ladder. Journals of schema 1
    /// called it `mount-failed`.
    #[serde(alias = "mount-failed")]
    Unrecoverable {
        /// The kernel's answer to the first mount (or what the routine fsck said).
        message: String,
    },
    /// The state mounted, but reading it failed: the file system detected damage.
    ReadError {
        /// The path whose read failed (empty when a failed walk of the tree did not say
        /// where).
        path: String,
        /// The error (with its errno).
        error: String,
    },
    /// The property held but the read-only fsck found damage.
    FsckFailed {
        /// What fsck said.
        message: String,
    },
    /// An external step hung and was killed.
    Timeout {
        /// Which step.
        step: String,
    },
}

impl Outcome {
    /// Its row of the outcome table.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Held => OutcomeKind::Held,
            Outcome::Violated { .. } => OutcomeKind::Violated,
            Outcome::NeedsRepair { .. } => OutcomeKind::NeedsRepair,
            Outcome::Unrecoverable { .. } => OutcomeKind::Unrecoverable,
            Outcome::ReadError { .. } => OutcomeKind::ReadError,
            Outcome::FsckFailed { .. } => OutcomeKind::FsckFailed,
            Outcome::Timeout { .. } => OutcomeKind::Timeout,
        }
    }
    /// Short kebab-case name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// The one-line explanation (story, error, step).
    pub fn detail(&self) -> String {
        match self {
            Outcome::Held => String::new(),
            Outcome::Violated { story } => story.clone(),
            Outcome::NeedsRepair { message, repaired_by } => {
                format!("{message}; mounted after {repaired_by}, the property held")
            }
            Outcome::Unrecoverable { message } | Outcome::FsckFailed { message } => message.clone(),
            Outcome::ReadError { path, error } if path.is_empty() => {
                format!("reading the recovered tree: {error}")
            }
            Outcome::ReadError { path, error } => format!("reading {path}: {error}"),
            Outcome::Timeout { step } => step.clone(),
        }
    }
}

/// The outcome of a walk of the recovered tree that failed: `read-error` at the path the
/// walk names in front of its error (`/A/f0: stat: Bad message (os error 74)`).
fn walk_failed(e: &std::io::Error) -> Outcome {
    let text = e.to_string();
    match text.split_once(": ") {
        Some((path, error)) if path.starts_with('/') => {
            Outcome::ReadError { path: path.to_owned(), error: error.to_owned() }
        }
        _ => Outcome::ReadError { path: String::new(), error: text },
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
    /// What the oracle found that belongs to other rows (a reordering outside the
    /// property's pair, a durability failure in a non-durability workload): reported
    /// beside the cell, never as its verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beside: Vec<workloads::Finding>,
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
            beside: Vec::new(),
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

/// Who decides whether a recovered crash state is consistent.
#[derive(Clone, Debug)]
pub enum Judge {
    /// The workload's in-memory oracle, from the logical snapshot (property workloads).
    Oracle,
    /// A user command run in the recovered mount (`bob check --checker`).
    Checker(UserChecker),
}

/// A user checker: a shell command run with the recovered mount as its working directory.
/// Exit 0 means consistent; anything else is a violation, with the output as evidence.
///
/// Its environment names the mount (`BOB_MOUNT`) and the marks the recorded program had
/// made by the time of the crash (`BOB_ACKED_MARKS`, a file with one mark per line;
/// `BOB_LAST_MARK`, the last of them), so that it can check that every acknowledged
/// operation survived.
#[derive(Clone, Debug)]
pub struct UserChecker {
    /// The command, run by `sh -c`.
    pub command: String,
    /// Killed (a timeout outcome) after this long.
    pub timeout: Duration,
}

/// Bytes of checker output kept per state.
pub const CHECKER_OUTPUT_MAX: usize = 16 * 1024;

/// What a checker run gave.
struct CheckerRun {
    code: Option<i32>,
    output: String,
    timed_out: bool,
}

fn run_checker(checker: &UserChecker, mnt: &Path, acked: &[String]) -> Result<CheckerRun, Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    // The marks file lives next to the mount point, never inside the crash state.
    let marks_path = mnt.with_extension("acked-marks");
    let mut text = acked.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(&marks_path, text).map_err(io(&marks_path))?;
    let script = format!("exec 2>&1\n{}", checker.command);
    let finished = cmd::Cmd::new("sh", checker.timeout)
        .args(&["-c", &script])
        .current_dir(mnt)
        .env("BOB_MOUNT", mnt)
        .env("BOB_ACKED_MARKS", &marks_path)
        .env("BOB_LAST_MARK", acked.last().map(String::as_str).unwrap_or(""))
        .keep_last(CHECKER_OUTPUT_MAX)
        // The mount is unmounted next: the checker's processes must be gone by then.
        .reap_after_kill()
        .finish();
    let _ = std::fs::remove_file(&marks_path);
    let sh_failed = |source| Error::Io { path: PathBuf::from("sh"), source };
    Ok(match finished {
        Ok(cmd::Finished::Exited(out)) => {
            CheckerRun { code: out.code, output: out.stdout, timed_out: false }
        }
        Ok(cmd::Finished::TimedOut(out)) => {
            CheckerRun { code: None, output: out.stdout, timed_out: true }
        }
        Err(cmd::CmdError::Spawn { source, .. }) => return Err(sh_failed(source)),
        Err(e) => return Err(sh_failed(std::io::Error::other(e.to_string()))),
    })
}

/// Everything about one recorded trace that checking needs.
pub struct Subject {
    /// The configuration.
    pub config: FsConfig,
    /// The workload that was recorded.
    pub workload: Workload,
    /// What the workload observed.
    pub observed: Observed,
    /// The trace.
    pub trace: Arc<Trace>,
    /// Its epochs.
    pub epochs: Vec<Epoch>,
    /// Op positions in the trace.
    pub spans: Vec<OpSpan>,
    /// The drain schedule the trace was recorded under, if it was a property recording
    /// that knows it: state ids of this trace print with it as a prefix (`syncfs/e3:0-4`).
    pub schedule: Option<workloads::Schedule>,
    /// The base image.
    pub base: Arc<BaseImage>,
    /// The disk model the epochs (and so every state id) are cut under.
    pub disk: DiskModel,
}

impl Subject {
    /// The subject of a fresh recording of `workload` on `config` (under drain `schedule`,
    /// if any), its trace cut under `disk`; and the recording's sidecar.
    pub fn of_recording(
        config: FsConfig,
        workload: Workload,
        recording: crate::record::Recording,
        schedule: Option<workloads::Schedule>,
        disk: DiskModel,
    ) -> Result<(Subject, crate::trace::sidecar::Sidecar), Error> {
        let base = BaseImage::open(&recording.base_image)
            .map_err(|source| Error::Io { path: recording.base_image.clone(), source })?;
        let trace = Arc::new(recording.trace);
        let epochs = crate::crash::epochs(&trace, &disk);
        let subject = Subject {
            config,
            workload,
            observed: recording.observed,
            trace,
            epochs,
            spans: recording.sidecar.ops.clone(),
            schedule,
            base: Arc::new(base),
            disk,
        };
        Ok((subject, recording.sidecar))
    }

    /// Cuts the trace again under another disk model (state ids change meaning with it).
    pub fn set_disk(&mut self, disk: DiskModel) {
        if disk != self.disk || self.epochs.is_empty() {
            self.epochs = crate::crash::epochs(&self.trace, &disk);
            self.disk = disk;
        }
    }

    /// Persistence-point ops (fsync, fdatasync, sync, ...) whose completion is durable in
    /// crash state `id`. An op's completing barrier is the last flush or FUA write before
    /// its end mark. A flush (or a FUA write that closes an epoch, under the `barrier` FUA
    /// model) is durable once the crash epoch starts after it. Under the `real` FUA model
    /// a FUA write is durable in any later epoch, and in its own epoch in the states that
    /// apply it whole (a state that lacks it was cut before it completed, so before the
    /// op returned).
    pub fn durable_ops(&self, id: &StateId) -> Vec<usize> {
        let Some(crash) = self.epochs.get(id.epoch as usize) else {
            return Vec::new();
        };
        let is_barrier = |i: usize| match self.trace.entries[i].kind() {
            EntryKind::Flush => true,
            EntryKind::Write { fua, .. } => fua,
            _ => false,
        };
        let durable = |b: usize| -> bool {
            if b < crash.start_entry {
                return true;
            }
            // A FUA write inside the crash epoch (real FUA): durable if applied whole.
            crash.writes.iter().position(|&w| w == b).is_some_and(|p| {
                crash.fua_writes.contains(&(p as u32))
                    && id.applied.iter().any(|a| a.write == p as u32 && a.sectors.is_none())
            })
        };
        self.spans
            .iter()
            .filter(|s| self.workload.ops.get(s.index).is_some_and(|op| op.is_persistence_point()))
            .filter(|s| (0..s.end_entry).rev().find(|&i| is_barrier(i)).is_some_and(durable))
            .map(|s| s.index)
            .collect()
    }

    /// Text of the marks the recorded program had made by the time of a crash in epoch
    /// `epoch`: every mark before the epoch's closing barrier. A state of that epoch is what
    /// the disk may hold at its end, when all those marks had been made (acknowledged).
    pub fn acked_marks(&self, epoch: usize) -> Vec<String> {
        let end = match self.epochs.get(epoch) {
            Some(e) => e.end_entry(&self.trace),
            None => return Vec::new(),
        };
        self.trace.entries[..end.min(self.trace.entries.len())]
            .iter()
            .filter_map(|e| e.mark_text())
            .collect()
    }

    /// Parses and validates a state id against this trace. The id may name the trace's
    /// schedule as a prefix (`syncfs/e3:0-4`); a bare id (`e3:0-4`, as witnesses from
    /// before schedules have) means this trace's own. A prefix naming another schedule is
    /// an error: that state is a state of another recording.
    pub fn state_id(&self, text: &str) -> Result<StateId, Error> {
        let bad = |reason: String| Error::BadState { id: text.to_owned(), reason };
        let (schedule, bare) = split_schedule(text);
        if let Some(name) = schedule {
            let named: workloads::Schedule =
                name.parse().map_err(|e: workloads::ParseScheduleError| bad(e.to_string()))?;
            match self.schedule {
                Some(own) if own == named => {}
                Some(own) => {
                    return Err(bad(format!(
                        "this trace was recorded under the {own} drain schedule, not {named}; \
                         a {named} state replays from a witness of that schedule"
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "this trace names no drain schedule; give the bare id {bare}"
                    )))
                }
            }
        }
        let id: StateId = bare.parse().map_err(|e: crate::crash::Error| bad(e.to_string()))?;
        id.validate(&self.epochs, &self.trace).map_err(|e| bad(e.to_string()))?;
        Ok(id)
    }
}

impl Subject {
    /// The printable id of a state of this trace: prefixed with its schedule where the
    /// trace has one (`syncfs/e3:0-4`), bare otherwise.
    pub fn qualify(&self, id: &StateId) -> String {
        qualified_id(self.schedule, id)
    }
}

/// `schedule/id`, or the bare id without a schedule.
pub fn qualified_id(schedule: Option<workloads::Schedule>, id: &StateId) -> String {
    match schedule {
        Some(s) => format!("{s}/{id}"),
        None => id.to_string(),
    }
}

/// Splits `syncfs/e3:0-4` into its schedule prefix and the bare id.
pub fn split_schedule(text: &str) -> (Option<&str>, &str) {
    match text.split_once('/') {
        Some((schedule, bare)) => (Some(schedule), bare),
        None => (None, text),
    }
}

/// Options of the checking engine.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Parallel workers (loop devices and mounts at once).
    pub jobs: usize,
    /// Timeouts of external steps.
    pub timeouts: Timeouts,
    /// Scratch directory for the FUSE disk and mount points.
    pub work_dir: PathBuf,
}

/// One state's result within a run.
#[derive(Clone, Debug)]
pub struct StateResult {
    /// The state.
    pub state: CrashState,
    /// Content digest of its overlay (the dedup key).
    pub digest: [u8; 32],
    /// Index (into the run's states) of the state that was actually mounted for it.
    pub mounted_as: usize,
    /// What checking found (shared by duplicates).
    pub check: Arc<StateCheck>,
}

/// Recovers, snapshots and checks the image in `disk_file` (any file a loop device can
/// be attached to), mounting it at `mnt`.
pub fn check_image(
    subject: &Subject,
    disk_file: &Path,
    mnt: &Path,
    durable_ops: Vec<usize>,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    check_image_with(subject, &Judge::Oracle, disk_file, mnt, durable_ops, &[], timeouts)
}

/// [`check_image`] with a choice of [`Judge`]. `acked_marks` are the marks made by the
/// time of the crash (see [`Subject::acked_marks`]), handed to a user checker.
pub fn check_image_with(
    subject: &Subject,
    judge: &Judge,
    disk_file: &Path,
    mnt: &Path,
    durable_ops: Vec<usize>,
    acked_marks: &[String],
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    if let Some(design) = subject.config.design() {
        let state = ResearchState { design, disk_file, mnt, acked_marks };
        return check_research(subject, judge, &state, durable_ops, timeouts);
    }
    let config = &subject.config;
    let loopdev = LoopDevice::attach_free(disk_file)?;
    let dev = loopdev.path().to_owned();
    let dev_str = dev.to_string_lossy().into_owned();
    let done = |outcome| Ok(StateCheck::failed(outcome));

    if let Recovery::FsckThenMount(fsck) = config.recovery {
        let mut args = fsck[1..].to_vec();
        args.push(&dev_str);
        match cmd::run(fsck[0], &args, timeouts.recovery) {
            // e2fsck: 0 clean, 1 fixed, 2 fixed + reboot; 4 and up: errors left. The
            // configuration's own recovery failed: its repair tool is this same program,
            // so there is no ladder left to climb.
            Ok(out) if out.code.is_some_and(|c| c < 4) => {}
            Ok(out) => {
                return done(Outcome::Unrecoverable {
                    message: format!("{} exit {:?}: {}", fsck.join(" "), out.code, out.last_line()),
                })
            }
            Err(cmd::CmdError::Timeout { .. }) => {
                return done(Outcome::Timeout { step: format!("recovery: {}", fsck.join(" ")) })
            }
            Err(e) => return Err(crate::device::Error::from(e).into()),
        }
    }
    let options = config.check_mount_options();
    let try_mount =
        || match mount::mount_within(&dev, mnt, config.fstype, &options, timeouts.recovery) {
            Some(Ok(m)) => Ok(m),
            // The story names the options and the kernel's answer, not bob's scratch paths,
            // so that it reads the same in every report and on every machine.
            Some(Err(crate::device::Error::Mount { source, .. })) => Err(Some(format!(
                "mount -t {} -o {}: {source}",
                config.fstype,
                if options.is_empty() { "defaults" } else { &options }
            ))),
            Some(Err(other)) => Err(Some(other.to_string())),
            None => Err(None),
        };
    let mount_timeout = |loopdev: LoopDevice, repair: Option<Repair>| {
        // The hung mount still holds the device; dropping our handle asks the kernel to
        // unbind it (autoclear) once that mount lets go.
        drop(loopdev);
        Ok(StateCheck {
            repair,
            ..StateCheck::failed(Outcome::Timeout {
                step: format!("recovery: mount -t {}", config.fstype),
            })
        })
    };
    let mut repair: Option<Repair> = None;
    let fs_mount = match try_mount() {
        Ok(m) => m,
        Err(None) => return mount_timeout(loopdev, None),
        Err(Some(message)) => {
            // What an administrator would do: the configuration's repair ladder, one step
            // at a time, mounting again after each. Its writes go to the state's private
            // overlay like recovery's, so no other state sees them.
            let mut rep =
                Repair { mount_error: message.clone(), steps: Vec::new(), fixed_by: None };
            let run_step = |step: &RepairStep| {
                let mut args = step.argv[1..].to_vec();
                args.push(&dev_str);
                match cmd::run(step.argv[0], &args, timeouts.fsck) {
                    Ok(out) => Ok(Some(out.code)),
                    Err(cmd::CmdError::Timeout { .. }) => Ok(None),
                    Err(e) => Err(Error::from(crate::device::Error::from(e))),
                }
            };
            match climb_ladder(config.repair, &mut rep, run_step, try_mount)? {
                Climb::Mounted(m) => {
                    repair = Some(rep);
                    m
                }
                Climb::Exhausted => {
                    return Ok(StateCheck {
                        repair: Some(rep),
                        ..StateCheck::failed(Outcome::Unrecoverable { message })
                    })
                }
                Climb::StepTimedOut(step) => {
                    return Ok(StateCheck {
                        repair: Some(rep),
                        ..StateCheck::failed(Outcome::Timeout { step: format!("repair: {step}") })
                    })
                }
                Climb::MountTimedOut => return mount_timeout(loopdev, Some(rep)),
            }
        }
    };
    if let Judge::Checker(checker) = judge {
        let run = run_checker(checker, mnt, acked_marks);
        fs_mount.unmount()?;
        return finish_checked(subject, &dev_str, run?, checker, timeouts)
            .map(|c| c.after_repair(repair))
            .and_then(|c| loopdev.detach().map(|()| c).map_err(Error::from));
    }
    let snapshot = workloads::take_snapshot(mnt, &subject.workload);
    fs_mount.unmount()?;
    let snapshot = match snapshot {
        Ok(s) => s,
        Err(e) => {
            let check = StateCheck { mounted: true, ..StateCheck::failed(walk_failed(&e)) };
            return Ok(check.after_repair(repair));
        }
    };

    let mut args = config.fsck[1..].to_vec();
    args.push(&dev_str);
    let fsck = match cmd::run(config.fsck[0], &args, timeouts.fsck) {
        Ok(out) if out.code == Some(0) => None,
        Ok(out) => {
            Some(format!("{} exit {:?}: {}", config.fsck.join(" "), out.code, out.last_line()))
        }
        Err(cmd::CmdError::Timeout { .. }) => {
            let check = StateCheck {
                mounted: true,
                ..StateCheck::failed(Outcome::Timeout {
                    step: format!("fsck: {}", config.fsck.join(" ")),
                })
            };
            return Ok(check.after_repair(repair));
        }
        Err(e) => return Err(crate::device::Error::from(e).into()),
    };
    loopdev.detach()?;

    Ok(oracle_verdict(subject, snapshot, fsck, durable_ops).after_repair(repair))
}

/// Where climbing the repair ladder ended.
enum Climb<M> {
    /// A step made the state mountable; here is the mount.
    Mounted(M),
    /// Every step ran and the state still does not mount.
    Exhausted,
    /// This step hung and was killed.
    StepTimedOut(String),
    /// A mount after a step hung.
    MountTimedOut,
}

/// Climbs `steps`: runs each (`run_step` gives its exit code, `None` inside when it was
/// killed by a signal, or `Ok(None)` when it timed out), then mounts again (`try_mount`:
/// the mount, or `Err(None)` when the mount hung, `Err(Some(error))` when it failed). A
/// step with [`RepairStep::only_after_exit`] runs only when the previous step that ran
/// exited with that code. Records every step run, and the one that fixed it, in `rep`.
fn climb_ladder<M>(
    steps: &[RepairStep],
    rep: &mut Repair,
    mut run_step: impl FnMut(&RepairStep) -> Result<Option<Option<i32>>, Error>,
    mut try_mount: impl FnMut() -> Result<M, Option<String>>,
) -> Result<Climb<M>, Error> {
    let mut previous_exit: Option<i32> = None;
    for step in steps {
        if step.only_after_exit.is_some() && step.only_after_exit != previous_exit {
            continue;
        }
        let Some(code) = run_step(step)? else {
            return Ok(Climb::StepTimedOut(step.text()));
        };
        previous_exit = code;
        let code = code.map_or("signal".to_owned(), |c| c.to_string());
        rep.steps.push(format!("{} (exit {code})", step.text()));
        match try_mount() {
            Ok(m) => {
                rep.fixed_by = Some(step.text());
                return Ok(Climb::Mounted(m));
            }
            Err(None) => return Ok(Climb::MountTimedOut),
            Err(Some(_)) => {}
        }
    }
    Ok(Climb::Exhausted)
}

/// A crash state of a research design, as [`check_research`] gets it.
struct ResearchState<'a> {
    design: researchfs::Design,
    disk_file: &'a Path,
    mnt: &'a Path,
    acked_marks: &'a [String],
}

/// [`check_image_with`] for a research design: no loop device, no kernel mount. The
/// crash state's file is the design's block device; mounting it in process runs the
/// design's recovery (and, for NoFS, its allocation scan, waited for so that a state
/// always checks the same); then the same snapshot, judge and verdict as for a kernel
/// configuration, with `researchfs::fsck` as the read-only fsck.
fn check_research(
    subject: &Subject,
    judge: &Judge,
    st: &ResearchState<'_>,
    durable_ops: Vec<usize>,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    let design = st.design;
    let io = |source| Error::Io { path: st.disk_file.to_owned(), source };
    let dev: Arc<dyn researchfs::BlockDevice> =
        Arc::new(researchfs::FileDevice::open(st.disk_file).map_err(io)?);
    let done = |outcome| Ok(StateCheck::failed(outcome));
    let (mount_dev, target) = (dev.clone(), st.mnt.to_owned());
    // A mount that returns after the deadline is dropped on its thread, which unmounts it.
    let mounted = cmd::call_within(timeouts.recovery, move || {
        let mounted = researchfs::mount(design, mount_dev, &target);
        if let Ok(m) = &mounted {
            m.fs().wait_scan();
        }
        mounted
    });
    let mounted = match mounted {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            return done(Outcome::Unrecoverable { message: format!("researchfs {design}: {e}") })
        }
        None => {
            return done(Outcome::Timeout { step: format!("recovery: researchfs {design} mount") })
        }
    };
    let unmount = |m: researchfs::MountedFs| {
        m.unmount().map_err(|e| Error::Io {
            path: st.mnt.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })
    };
    if let Judge::Checker(checker) = judge {
        let run = run_checker(checker, st.mnt, st.acked_marks);
        unmount(mounted)?;
        let run = run?;
        let fsck = research_fsck(design, dev.as_ref());
        let last_line = run.output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        let outcome = match (run.timed_out, run.code, &fsck) {
            (true, _, _) => Outcome::Timeout { step: format!("checker {:?}", checker.command) },
            (false, Some(0), Some(msg)) => Outcome::FsckFailed { message: msg.clone() },
            (false, Some(0), None) => Outcome::Held,
            (false, code, _) => {
                Outcome::Violated { story: format!("checker exit {code:?}: {last_line}") }
            }
        };
        let checker_output = (outcome != Outcome::Held).then_some(run.output);
        return Ok(StateCheck {
            fsck,
            checker_output,
            mounted: true,
            ..StateCheck::failed(outcome)
        });
    }
    let snapshot = workloads::take_snapshot(st.mnt, &subject.workload);
    unmount(mounted)?;
    let snapshot = match snapshot {
        Ok(s) => s,
        Err(e) => return Ok(StateCheck { mounted: true, ..StateCheck::failed(walk_failed(&e)) }),
    };
    let fsck = research_fsck(design, dev.as_ref());
    Ok(oracle_verdict(subject, snapshot, fsck, durable_ops))
}

/// `researchfs::fsck` on the unmounted crash state: `None` when clean, else one line with
/// the problem count, the thesis' kinds and the first problem. Problems the design
/// repairs at every mount by itself (NoFS's scan frees unreachable inodes and blocks:
/// its allocation state is never persisted) are the design working, not damage.
fn research_fsck(design: researchfs::Design, dev: &dyn researchfs::BlockDevice) -> Option<String> {
    match researchfs::fsck(design, dev) {
        Ok(r) if r.damage().is_empty() => None,
        Ok(r) => {
            let damage = r.damage();
            let mut kinds: Vec<&str> =
                damage.iter().filter_map(|p| p.kind).map(|k| k.code()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            Some(format!(
                "researchfs fsck ({design}): {} problem(s) [{}]: {}",
                damage.len(),
                kinds.join(","),
                damage[0].what
            ))
        }
        Err(e) => Some(format!("researchfs fsck ({design}): {e}")),
    }
}

/// The read-only fsck after a user checker ran, and the outcome from both.
fn finish_checked(
    subject: &Subject,
    dev_str: &str,
    run: CheckerRun,
    checker: &UserChecker,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    let config = &subject.config;
    let mut args = config.fsck[1..].to_vec();
    args.push(dev_str);
    let fsck = match cmd::run(config.fsck[0], &args, timeouts.fsck) {
        Ok(out) if out.code == Some(0) => None,
        Ok(out) => {
            Some(format!("{} exit {:?}: {}", config.fsck.join(" "), out.code, out.last_line()))
        }
        Err(cmd::CmdError::Timeout { .. }) => {
            return Ok(StateCheck {
                checker_output: Some(run.output),
                mounted: true,
                ..StateCheck::failed(Outcome::Timeout {
                    step: format!("fsck: {}", config.fsck.join(" ")),
                })
            })
        }
        Err(e) => return Err(crate::device::Error::from(e).into()),
    };
    let last_line = run.output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let outcome = if run.timed_out {
        Outcome::Timeout {
            step: format!(
                "checker {:?} after {:.0}s",
                checker.command,
                checker.timeout.as_secs_f64()
            ),
        }
    } else if run.code == Some(0) {
        match &fsck {
            Some(msg) => Outcome::FsckFailed { message: msg.clone() },
            None => Outcome::Held,
        }
    } else {
        let how = match run.code {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".into(),
        };
        Outcome::Violated { story: format!("checker {how}: {last_line}") }
    };
    // Memory stays flat over many states: only failures keep what the checker said.
    let checker_output = (outcome != Outcome::Held).then_some(run.output);
    Ok(StateCheck { fsck, checker_output, mounted: true, ..StateCheck::failed(outcome) })
}

/// The oracle's verdict on a recovered snapshot, with the read-only fsck's complaint (if
/// any) as its own category when the property held.
fn oracle_verdict(
    subject: &Subject,
    snapshot: Snapshot,
    fsck: Option<String>,
    durable_ops: Vec<usize>,
) -> StateCheck {
    let oracle = workloads::Oracle::new(&subject.workload);
    let ctx = CrashContext { durable_ops };
    let judgement = oracle.judge(&subject.observed, &snapshot, &ctx);
    let scenarios = oracle.scenario_marks(&subject.observed, &snapshot, &ctx);
    let first = judgement.findings.into_iter().next();
    let pair = first.as_ref().and_then(|f| f.pair.clone());
    // A read that failed is the file system detecting damage: its own outcome, unless
    // the oracle found a violation (a promise broken loudly is still broken). The
    // detection workloads judge such errors themselves (as detections).
    let detection =
        subject.workload.property.map(|p| p.family()) == Some(workloads::Family::Detection);
    let read_error = (!detection)
        .then(|| {
            snapshot.entries.iter().find_map(|(p, n)| Some((p.clone(), n.read_error.clone()?)))
        })
        .flatten();
    let outcome = match (first, read_error, &fsck) {
        (Some(f), _, _) => Outcome::Violated { story: f.story },
        (None, Some((path, error)), _) => Outcome::ReadError { path, error },
        (None, None, Some(msg)) => Outcome::FsckFailed { message: msg.clone() },
        (None, None, None) => Outcome::Held,
    };
    StateCheck {
        outcome,
        snapshot: Some(snapshot),
        fsck,
        mounted: true,
        scenarios,
        pair,
        beside: judgement.beside,
        ..StateCheck::failed(Outcome::Held)
    }
}

/// The key a state is checked (and journaled) under: its content digest, and the
/// persistence points due in it when there are any.
fn check_key(digest: &[u8; 32], durable_ops: &[usize]) -> [u8; 32] {
    if durable_ops.is_empty() {
        return *digest;
    }
    let mut h = blake3::Hasher::new();
    h.update(b"bob check key v1\0");
    h.update(digest);
    for op in durable_ops {
        h.update(&(*op as u64).to_le_bytes());
    }
    *h.finalize().as_bytes()
}

/// Results of a cell already reached, and where new ones go, so that a killed run
/// resumes without losing a verdict (`--resume`). One JSON line per mounted state, keyed
/// by the state's content digest and the promises due in it (neither depends on state
/// order or sharding).
#[derive(Default)]
pub struct Journal {
    /// Checks already done, by content digest.
    pub prior: HashMap<[u8; 32], StateCheck>,
    sink: Option<Mutex<std::fs::File>>,
}

#[derive(Serialize, Deserialize)]
struct JournalLine {
    #[serde(default = "crate::report::schema_v1")]
    schema_version: u32,
    digest: String,
    check: StateCheck,
}

fn hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Journal {
    /// Opens (creating it if needed) the journal at `path`, reading what it already holds.
    /// A torn last line (the process was killed while writing it) is ignored.
    pub fn open(path: &Path) -> Result<Journal, Error> {
        let io = |source| Error::Io { path: path.to_owned(), source };
        let mut prior = HashMap::new();
        if let Ok(text) = std::fs::read_to_string(path) {
            for line in text.lines() {
                if let Ok(l) = serde_json::from_str::<JournalLine>(line) {
                    if let Some(d) = unhex(&l.digest) {
                        prior.insert(d, l.check);
                    }
                }
            }
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
        Ok(Journal { prior, sink: Some(Mutex::new(file)) })
    }

    fn record(&self, digest: &[u8; 32], check: &StateCheck) {
        use std::io::Write;
        if let Some(sink) = &self.sink {
            let line = JournalLine {
                schema_version: crate::report::SCHEMA_VERSION,
                digest: hex(digest),
                check: check.clone(),
            };
            if let Ok(text) = serde_json::to_string(&line) {
                let mut f = sink.lock().unwrap_or_else(|p| p.into_inner());
                let _ = f.write_all(format!("{text}\n").as_bytes());
            }
        }
    }
}

/// Checks `states` of `subject`: dedup by content, then `jobs` workers in parallel.
/// `progress` is called after each state mounted with (mounted so far, unique total).
/// Stops early with [`Error::Interrupted`] when `cancel` is set.
pub fn run_states(
    subject: &Subject,
    states: &[CrashState],
    options: &EngineOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    cancel: &AtomicBool,
) -> Result<Vec<StateResult>, Error> {
    run_states_with(subject, &Judge::Oracle, states, options, progress, cancel)
}

/// [`run_states`] with a choice of [`Judge`].
pub fn run_states_with(
    subject: &Subject,
    judge: &Judge,
    states: &[CrashState],
    options: &EngineOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    cancel: &AtomicBool,
) -> Result<Vec<StateResult>, Error> {
    run_states_journaled(subject, judge, states, options, progress, cancel, &Journal::default())
}

/// [`run_states_with`] that skips states the journal already holds and appends each new
/// result to it. Memory stays flat in the number of states: a snapshot is kept only for
/// the earliest state of each failing outcome (the one a witness shows).
pub fn run_states_journaled(
    subject: &Subject,
    judge: &Judge,
    states: &[CrashState],
    options: &EngineOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    cancel: &AtomicBool,
    journal: &Journal,
) -> Result<Vec<StateResult>, Error> {
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    let digests: Vec<[u8; 32]> =
        states.iter().map(|s| builder.state(&s.id).digest(&subject.trace)).collect();
    // Two states are checked once when their blocks are identical and the same promises
    // are due in them: the same disk right before and right after a flush owes different
    // fsyncs, and sharing one verdict would skip the promises of the later.
    let due: Vec<Vec<usize>> = states.iter().map(|s| subject.durable_ops(&s.id)).collect();
    let keys: Vec<[u8; 32]> = digests.iter().zip(&due).map(|(d, ops)| check_key(d, ops)).collect();
    let mut first_of: HashMap<[u8; 32], usize> = HashMap::new();
    let mounted_as: Vec<usize> =
        keys.iter().enumerate().map(|(i, d)| *first_of.entry(*d).or_insert(i)).collect();
    let unique: Vec<usize> = (0..states.len()).filter(|&i| mounted_as[i] == i).collect();

    let fuse_dir = options.work_dir.join("states-disk");
    std::fs::create_dir_all(&fuse_dir)
        .map_err(|source| Error::Io { path: fuse_dir.clone(), source })?;
    let jobs = options.jobs.max(1).min(unique.len().max(1));
    let server = DiskServer::start(&fuse_dir, jobs + 1)?;
    let results: Mutex<HashMap<usize, StateCheck>> = Mutex::new(HashMap::new());
    // Earliest unique state per failing outcome: the only snapshots worth keeping.
    let keep: Mutex<HashMap<&'static str, usize>> = Mutex::new(HashMap::new());
    let store = |index: usize, mut c: StateCheck| {
        let mut results = results.lock().unwrap_or_else(|p| p.into_inner());
        let mut keep = keep.lock().unwrap_or_else(|p| p.into_inner());
        let name = c.outcome.name();
        if name == "held" {
            c.snapshot = None;
        } else {
            match keep.get(name).copied() {
                Some(k) if k < index => c.snapshot = None,
                Some(k) => {
                    if let Some(old) = results.get_mut(&k) {
                        old.snapshot = None;
                    }
                    keep.insert(name, index);
                }
                None => {
                    keep.insert(name, index);
                }
            }
        }
        results.insert(index, c);
    };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let first_error: Mutex<Option<Error>> = Mutex::new(None);

    std::thread::scope(|scope| {
        for worker in 0..jobs {
            let (server, builder, unique, store, next, done, first_error, keys, due) =
                (&server, &builder, &unique, &store, &next, &done, &first_error, &keys, &due);
            scope.spawn(move || {
                let mnt = options.work_dir.join(format!("mnt-{worker}"));
                if let Err(source) = std::fs::create_dir_all(&mnt) {
                    *first_error.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(Error::Io { path: mnt, source });
                    return;
                }
                loop {
                    if cancel.load(Ordering::Relaxed)
                        || first_error.lock().map(|e| e.is_some()).unwrap_or(true)
                    {
                        return;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = unique.get(k) else { return };
                    if let Some(c) = journal.prior.get(&keys[index]) {
                        store(index, c.clone());
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        progress(n, unique.len());
                        continue;
                    }
                    let state = &states[index];
                    let view = Arc::new(CrashView::new(
                        subject.base.clone(),
                        subject.trace.clone(),
                        builder.state(&state.id),
                    ));
                    let name = format!("state-{index}.img");
                    let file = server.add(&name, view.clone());
                    let epoch = state.id.epoch as usize;
                    let durable = due[index].clone();
                    let acked = match judge {
                        Judge::Oracle => Vec::new(),
                        Judge::Checker(_) => subject.acked_marks(epoch),
                    };
                    let checked = check_image_with(
                        subject,
                        judge,
                        &file,
                        &mnt,
                        durable,
                        &acked,
                        &options.timeouts,
                    );
                    server.remove(&name);
                    match checked {
                        Ok(mut c) => {
                            c.recovery_writes = view.recovery_writes();
                            if c.outcome == Outcome::Held {
                                c.snapshot = None;
                            }
                            journal.record(&keys[index], &c);
                            store(index, c);
                            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(n, unique.len());
                        }
                        Err(e) => {
                            *first_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    drop(server);
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Interrupted);
    }
    let results: HashMap<usize, Arc<StateCheck>> = results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|(i, c)| (i, Arc::new(c)))
        .collect();
    Ok(states
        .iter()
        .enumerate()
        .map(|(i, state)| StateResult {
            state: state.clone(),
            digest: digests[i],
            mounted_as: mounted_as[i],
            check: results[&mounted_as[i]].clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xfs_ladder() -> &'static [RepairStep] {
        crate::fs::by_name("xfs").expect("xfs").repair
    }

    /// Climbs `steps` where step `i` exits with `codes[i]` and the mount succeeds after
    /// `mounts_after` steps ran (never, when `None`).
    fn climb(
        steps: &[RepairStep],
        codes: &[i32],
        mounts_after: Option<usize>,
    ) -> (Repair, Option<String>) {
        let mut rep = Repair { mount_error: "EUCLEAN".into(), steps: Vec::new(), fixed_by: None };
        let ran = std::cell::Cell::new(0usize);
        let result = climb_ladder(
            steps,
            &mut rep,
            |_| {
                ran.set(ran.get() + 1);
                Ok(Some(Some(codes[ran.get() - 1])))
            },
            || if Some(ran.get()) == mounts_after { Ok(()) } else { Err(Some("still".into())) },
        )
        .unwrap();
        let fixed = match result {
            Climb::Mounted(()) => rep.fixed_by.clone(),
            Climb::Exhausted => None,
            _ => panic!("no timeouts here"),
        };
        (rep, fixed)
    }

    #[test]
    fn xfs_repair_zeroes_the_log_only_after_reporting_a_dirty_log() {
        // xfs_repair fixed it: -L never runs.
        let (rep, fixed) = climb(xfs_ladder(), &[0], Some(1));
        assert_eq!(rep.steps, vec!["xfs_repair (exit 0)"]);
        assert_eq!(fixed.as_deref(), Some("xfs_repair"));
        // xfs_repair ran clean but the mount still fails: -L is not the answer.
        let (rep, fixed) = climb(xfs_ladder(), &[0], None);
        assert_eq!(rep.steps, vec!["xfs_repair (exit 0)"]);
        assert_eq!(fixed, None);
        // A dirty log it cannot replay (exit 2): then -L.
        let (rep, fixed) = climb(xfs_ladder(), &[2, 0], Some(2));
        assert_eq!(rep.steps, vec!["xfs_repair (exit 2)", "xfs_repair -L (exit 0)"]);
        assert_eq!(fixed.as_deref(), Some("xfs_repair -L"));
    }

    #[test]
    fn btrfs_climbs_super_recover_then_zero_log_and_never_check_repair() {
        let ladder = crate::fs::by_name("btrfs").unwrap().repair;
        assert!(ladder.iter().all(|s| !s.argv.contains(&"--repair")));
        let (rep, fixed) = climb(ladder, &[1, 0], Some(2));
        assert_eq!(
            rep.steps,
            vec!["btrfs rescue super-recover -y (exit 1)", "btrfs rescue zero-log (exit 0)"]
        );
        assert_eq!(fixed.as_deref(), Some("btrfs rescue zero-log"));
        let (rep, fixed) = climb(ladder, &[1, 1], None);
        assert_eq!(rep.steps.len(), 2);
        assert_eq!(fixed, None);
    }

    #[test]
    fn every_kernel_configuration_has_a_ladder_and_research_designs_none() {
        for c in crate::fs::all().into_iter().filter(|c| c.unavailable.is_none()) {
            assert!(!c.repair.is_empty(), "{}", c.name);
        }
        for c in crate::fs::research() {
            assert!(c.repair.is_empty(), "{}", c.name);
        }
        let ext4 = crate::fs::by_name("ext4-ordered").unwrap();
        assert_eq!(ext4.repair.iter().map(|s| s.text()).collect::<Vec<_>>(), vec!["e2fsck -f -y"]);
    }
}
