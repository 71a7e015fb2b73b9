//! Checking one crash state: recovery (and the repair ladder), snapshot, read-only fsck
//! and the verdict, for a kernel configuration on a loop device or a research design in
//! process.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use workloads::Snapshot;

use super::checker::{checker_verdict, finish_checked, run_checker};
use super::journal::hex;
use super::speed::{FsckPolicy, Speedups};
use super::verdict::oracle_verdict;
use super::{Error, Judge, Laps, Outcome, Repair, StateCheck, StepTimes, Subject};
use crate::device::loopdev::LoopDevice;
use crate::device::{cmd, mount};
use crate::fs::{complaint, Recovery, RepairStep, Timeouts};
use crate::image::{CrashView, SectorSet};

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

/// Recovers, snapshots and checks the image in `disk_file` (any file a loop device can
/// be attached to), mounting it at `mnt`.
pub fn check_image(
    subject: &Subject,
    disk_file: &Path,
    mnt: &Path,
    durable_ops: Vec<usize>,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    // A recording with a PM region: the state's PM image is beside the disk's.
    let pm = match &subject.pm {
        Some(_) => {
            let path = pm_image_path(disk_file);
            Some(std::fs::read(&path).map_err(|source| Error::Io { path, source })?)
        }
        None => None,
    };
    let state =
        StateToCheck { disk_file, pm_image: pm.as_deref(), mnt, durable_ops, acked_marks: &[] };
    check_image_with(subject, &Judge::Oracle, state, timeouts, None)
}

/// Where the PM image of a crash state's disk image `disk_file` is (`<disk_file>.pm`):
/// what `bob replay` writes and [`check_image`] reads.
pub(crate) fn pm_image_path(disk_file: &Path) -> std::path::PathBuf {
    let mut s = disk_file.as_os_str().to_owned();
    s.push(".pm");
    s.into()
}

/// What one recovered image gave: every state that recovers to it shares this.
#[derive(Debug)]
struct Recovered {
    snapshot: Snapshot,
    fsck: Option<String>,
    /// The sectors its check read (when tracked): what a state reusing this result has
    /// read, for reuse by reads.
    reads: Option<Arc<super::reads::SectorRuns>>,
}

/// The recovered images of one run already checked, by
/// [`CrashView::recovered_digest`] (mount stamps masked): dedup after recovery. Journal
/// replay converges many crash states into one image; the first to reach it is walked
/// and fsck'd, the others reuse that, and each is still judged against its own
/// expectations (the promises due in it differ).
#[derive(Debug, Default)]
pub(super) struct RecoveredCache {
    seen: Mutex<HashMap<[u8; 32], Arc<Recovered>>>,
    /// The hashes of sectors recovery wrote, which the keys of later states reuse.
    sector_hashes: crate::crash::overlay::RecoveryHashes,
    /// Fsck results by what each fsck read (reuse of the fsck by reads).
    fsck_memo: super::reads::FsckMemo,
    /// The routine fsck's answers and writes by what it read, on the states' own bytes
    /// (ext2's `e2fsck -y` before mounting; with the fsck by reads).
    routine_memo: super::reads::FsckMemo<Arc<super::reads::RoutineFsck>>,
}

/// Images kept at most (each with its snapshot): past that, new images are checked but
/// not remembered, so memory stays bounded on the largest cells.
const RECOVERED_KEPT: usize = 4096;

impl RecoveredCache {
    fn get(&self, key: &[u8; 32]) -> Option<Arc<Recovered>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }
    fn insert(&self, key: [u8; 32], recovered: Recovered) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() < RECOVERED_KEPT {
            seen.entry(key).or_insert_with(|| Arc::new(recovered));
        }
    }
}

/// Dedup after recovery, as a worker hands it to [`check_image_with`]: the state's view
/// (it holds recovery's writes), the run's cache and the shortcuts that are on.
pub(super) struct AfterRecovery<'a> {
    /// The view the state is served from.
    pub view: &'a CrashView,
    /// The run's recovered images.
    pub cache: &'a RecoveredCache,
    /// Which shortcuts are on.
    pub speed: Speedups,
    /// The configuration's [`crate::fs::FsConfig::mount_stamps`], computed once per run
    /// rather than per state.
    pub stamps: &'a [std::ops::Range<u64>],
    /// Where the base image keeps its jbd2 journal, when what recovery read ahead of it
    /// and did not use is left out of the view's reads (`check::recovery_used`).
    pub(crate) journal: Option<&'a super::recovery_used::JournalLayout>,
}

/// One crash state to check, as a worker (or [`check_image`]) hands it over.
pub(super) struct StateToCheck<'a> {
    /// Its image: any file a loop device can be attached to.
    pub disk_file: &'a Path,
    /// Its PM region's image, for a recording with one.
    pub pm_image: Option<&'a [u8]>,
    /// Where it is mounted.
    pub mnt: &'a Path,
    /// The persistence points due in it.
    pub durable_ops: Vec<usize>,
    /// The marks made by the time of the crash (see [`Subject::acked_marks`]), handed to
    /// a user checker.
    pub acked_marks: &'a [String],
}

/// [`check_image`] with a choice of [`Judge`], and dedup after recovery when `after` is
/// given.
pub(super) fn check_image_with(
    subject: &Subject,
    judge: &Judge,
    state: StateToCheck<'_>,
    timeouts: &Timeouts,
    after: Option<&AfterRecovery<'_>>,
) -> Result<StateCheck, Error> {
    match subject.config.design() {
        Some(design) => check_research(subject, judge, design, state, timeouts),
        None => check_kernel(subject, judge, state, timeouts, after),
    }
}

/// Where recovery (and the repair ladder after it) left a state.
enum RecoveryEnd<M> {
    /// It mounted, after these repairs if any.
    Mounted(M, Option<Repair>),
    /// It did not (or a step timed out): the state's check as it stands.
    Failed(Box<StateCheck>),
}

/// The times of one state's steps, as they are taken.
struct Clock {
    laps: Laps,
    steps: StepTimes,
}

/// [`check_image_with`] for a kernel configuration: attach, recover, then the check
/// after recovery, each shortcut of `after` taken where it applies.
fn check_kernel(
    subject: &Subject,
    judge: &Judge,
    state: StateToCheck<'_>,
    timeouts: &Timeouts,
    after: Option<&AfterRecovery<'_>>,
) -> Result<StateCheck, Error> {
    let mut clock = Clock { laps: Laps::start(), steps: StepTimes::default() };
    let loopdev = LoopDevice::attach_free(state.disk_file)?;
    clock.steps.attach_ms = clock.laps.lap();
    let dev = loopdev.path().to_owned();
    let routine =
        after.filter(|a| a.speed.fsck_by_reads && !crate::device::fusedisk::Disk::cached(a.view));
    let mut routine_reused = false;
    let end = recover(&subject.config, &dev, state.mnt, timeouts, routine, &mut routine_reused)?;
    let reused = |mut c: StateCheck| {
        c.routine_fsck_reused = routine_reused;
        c
    };
    let (fs_mount, repair) = match end {
        RecoveryEnd::Mounted(m, repair) => (m, repair),
        // A hung mount still holds the device; dropping our handle asks the kernel to
        // unbind it (autoclear) once that mount lets go.
        RecoveryEnd::Failed(check) => return Ok(reused(*check)),
    };
    // What recovery read of the journal past the end of its scan did not decide the
    // state: left out of its reads (only after a plain mount; a repair reads its own way).
    if let (Some(a), None) = (after, &repair) {
        if let Some(layout) = a.journal {
            let unused = layout
                .unused_sectors(&|at, buf| a.view.read_state(at, buf), &|at, buf| {
                    a.view.read_base(at, buf)
                })
                .map_err(|source| Error::Io { path: state.disk_file.to_owned(), source })?;
            if let Some(unused) = unused {
                a.view.mark_recovered(unused);
            }
        }
    }
    if let Judge::Checker(checker) = judge {
        let run = run_checker(checker, state.mnt, state.acked_marks);
        fs_mount.unmount()?;
        let dev_str = dev.to_string_lossy().into_owned();
        return finish_checked(subject, &dev_str, run?, checker, timeouts)
            .map(|c| reused(c.after_repair(repair)))
            .and_then(|c| loopdev.detach().map(|()| c).map_err(Error::from));
    }
    clock.steps.recover_ms = clock.laps.lap();
    let marked = after.is_some_and(|a| a.view.recovery_marked());
    let mounted = MountedState { subject, state, timeouts, loopdev, repair, marked };
    mounted.check(fs_mount, after, clock).map(reused)
}

/// The routine fsck before mounting, by what it reads: taken from an earlier state that
/// agrees with this one on every sector that state's run read (on the states' own
/// bytes: the view is fresh, nothing has written it), its writes applied to this view;
/// else run with its reads logged and remembered. Exact as the read-only fsck by reads
/// is: the loop device was attached for this state, so its cache is empty and every
/// sector the fsck reads reaches the view's log.
fn routine_fsck(
    fsck: &[&str],
    dev: &Path,
    timeouts: &Timeouts,
    memo: Option<&AfterRecovery<'_>>,
    reused: &mut bool,
) -> Result<Result<cmd::Output, cmd::CmdError>, Error> {
    let io_err = |source| Error::Io { path: dev.to_owned(), source };
    if let Some(a) = memo {
        if let Some(hit) = a.cache.routine_memo.find(a.view, &[], true).map_err(io_err)? {
            let mut reads = crate::image::SectorSet::new();
            hit.reads.add_to(&mut reads);
            a.view.write_as_read(&hit.fsck.writes, &reads);
            *reused = true;
            return Ok(Ok(hit.fsck.output.clone()));
        }
        a.view.log_reads();
    }
    let ran = crate::fs::run_tool(fsck, dev, timeouts.recovery);
    if let Some(a) = memo {
        let read = a.view.take_read_log();
        if let (Ok(out), Some(read)) = (&ran, read) {
            let routine =
                super::reads::RoutineFsck { output: out.clone(), writes: a.view.written_sectors() };
            a.cache
                .routine_memo
                .add(a.view, &[], &read, &Arc::new(routine), true)
                .map_err(io_err)?;
        }
    }
    Ok(ran)
}

/// Recovers the state on `dev`: the configuration's routine fsck before mounting (or,
/// with `memo`, an earlier state's, by what it read, which sets `routine_reused`), the
/// mount, and when the kernel will not mount it, the repair ladder.
fn recover(
    config: &crate::fs::FsConfig,
    dev: &Path,
    mnt: &Path,
    timeouts: &Timeouts,
    memo: Option<&AfterRecovery<'_>>,
    routine_reused: &mut bool,
) -> Result<RecoveryEnd<mount::Mount>, Error> {
    let done = |outcome| Ok(RecoveryEnd::Failed(Box::new(StateCheck::failed(outcome))));
    // The routine fsck before mounting (ext2's e2fsck -y, jfs' log replay), when the
    // configuration has one. If it leaves errors, the state goes to the repair ladder as
    // a state the kernel would not mount does, with the steps that are not this same
    // command: none for ext2, whose repair tool is its recovery, so it is unrecoverable.
    let mut recovery_failed: Option<String> = None;
    let mut ladder: Vec<RepairStep> = config.repair.to_vec();
    if let Recovery::FsckThenMount(fsck) = config.recovery {
        let ran = routine_fsck(fsck, dev, timeouts, memo, routine_reused)?;
        // No repair step can bring back a journal the tool has dropped, whatever its exit
        // code: what the state would show after it is the tool's loss, so it is not judged.
        if let Some(line) =
            ran.as_ref().ok().and_then(|out| crate::fs::journal_not_replayed(fsck[0], out))
        {
            let message =
                format!("{} did not replay the journal ({line}) and dropped it", fsck.join(" "));
            return done(Outcome::Unrecoverable { message });
        }
        match ran {
            // e2fsck and fsck.jfs alike: 0 clean, 1 fixed, 2 fixed + reboot; 4 and up:
            // errors left.
            Ok(out) if out.code.is_some_and(|c| c < 4) => {}
            Ok(out) => {
                let message =
                    format!("{} {}: {}", fsck.join(" "), out.exit_text(), complaint(fsck[0], &out));
                ladder = ladder_after_failed_recovery(config.repair, fsck);
                if ladder.is_empty() {
                    return done(Outcome::Unrecoverable { message });
                }
                recovery_failed = Some(message);
            }
            Err(cmd::CmdError::Timeout { .. }) => {
                return done(Outcome::Timeout { step: format!("recovery: {}", fsck.join(" ")) })
            }
            Err(e) => return Err(crate::device::Error::from(e).into()),
        }
    }
    let options = config.check_mount_options();
    let try_mount =
        || match mount::mount_within(dev, mnt, config.fstype, &options, timeouts.recovery) {
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
    let mount_timeout = |repair: Option<Repair>| {
        Ok(RecoveryEnd::Failed(Box::new(StateCheck {
            repair,
            ..StateCheck::failed(Outcome::Timeout {
                step: format!("recovery: mount -t {}", config.fstype),
            })
        })))
    };
    let first = match recovery_failed {
        Some(message) => Err(Some(message)),
        None => try_mount(),
    };
    let message = match first {
        Ok(m) => return Ok(RecoveryEnd::Mounted(m, None)),
        Err(None) => return mount_timeout(None),
        Err(Some(message)) => message,
    };
    // What an administrator would do: the configuration's repair ladder, one step at a
    // time, mounting again after each. Its writes go to the state's private overlay like
    // recovery's, so no other state sees them.
    let mut rep = Repair { mount_error: message.clone(), steps: Vec::new(), fixed_by: None };
    let run_step = |step: &RepairStep| match crate::fs::run_tool(step.argv, dev, timeouts.fsck) {
        Ok(out) => Ok(Some(out.code)),
        Err(cmd::CmdError::Timeout { .. }) => Ok(None),
        Err(e) => Err(Error::from(crate::device::Error::from(e))),
    };
    let climb = climb_ladder(&ladder, &mut rep, run_step, try_mount)?;
    let failed = |rep, outcome| {
        let check = StateCheck { repair: Some(rep), ..StateCheck::failed(outcome) };
        Ok(RecoveryEnd::Failed(Box::new(check)))
    };
    match climb {
        Climb::Mounted(m) => Ok(RecoveryEnd::Mounted(m, Some(rep))),
        Climb::Exhausted => failed(rep, Outcome::Unrecoverable { message }),
        Climb::StepTimedOut(step) => {
            failed(rep, Outcome::Timeout { step: format!("repair: {step}") })
        }
        Climb::MountTimedOut => mount_timeout(Some(rep)),
    }
}

/// What the read-only fsck gave (its complaint, or the check of a state whose fsck timed
/// out), and the sectors it read when they were logged.
type FsckRan = (Result<Option<String>, StateCheck>, Option<SectorSet>);

/// A kernel configuration's state, recovered and mounted: what the check after recovery
/// shares.
struct MountedState<'a> {
    subject: &'a Subject,
    state: StateToCheck<'a>,
    timeouts: &'a Timeouts,
    loopdev: LoopDevice,
    repair: Option<Repair>,
    /// Whether the view was told what recovery read and did not use.
    marked: bool,
}

impl MountedState<'_> {
    /// The check after recovery: the recovered image's key, then its snapshot and fsck,
    /// each reused from an earlier state where `after` allows, and the oracle's verdict.
    fn check(
        self,
        fs_mount: mount::Mount,
        after: Option<&AfterRecovery<'_>>,
        mut clock: Clock,
    ) -> Result<StateCheck, Error> {
        // The recovered image's key, taken now that recovery has written (journal recovery
        // syncs the device before the mount returns).
        let after = after.filter(|a| a.speed.recovered_dedup || a.speed.fsck == FsckPolicy::Once);
        let key = after.map(|a| a.view.recovered_digest(a.stamps, &a.cache.sector_hashes));
        clock.steps.key_ms = clock.laps.lap();
        let seen = after.zip(key.as_ref()).and_then(|(a, k)| a.cache.get(k));
        if let (Some(hit), Some(a)) = (&seen, after) {
            if a.speed.recovered_dedup {
                fs_mount.unmount()?;
                clock.steps.unmount_ms = clock.laps.lap();
                return self.reusing(hit, hit.snapshot.clone(), key, clock, true);
            }
        }
        // What recovery read first, to tell the walk's own first reads from it.
        let patching = after.filter(|a| self.patches_file_data(a));
        let before_walk = patching.and_then(|a| a.view.first_reads_so_far());
        let snapshot = workloads::take_snapshot(self.state.mnt, &self.subject.workload);
        let file_data = match (&snapshot, patching, before_walk) {
            (Ok(s), Some(a), Some(before)) => a.view.first_reads_so_far().map(|mut walk| {
                for r in before.iter() {
                    walk.remove(r.clone());
                }
                super::file_data::FileData::of_walk(self.state.mnt, s, &walk)
            }),
            _ => None,
        };
        let snapshot = snapshot.map(|mut s| {
            s.not_creatable = self.create_after_recovery(&s);
            s
        });
        clock.steps.snapshot_ms = clock.laps.lap();
        fs_mount.unmount()?;
        clock.steps.unmount_ms = clock.laps.lap();
        let snapshot = match snapshot {
            Ok(s) => s,
            Err(e) => {
                let check = StateCheck { mounted: true, ..StateCheck::failed(walk_failed(&e)) };
                return Ok(check.after_repair(self.repair));
            }
        };
        let reuse_fsck = seen.filter(|_| after.is_some_and(|a| a.speed.fsck == FsckPolicy::Once));
        if let Some(hit) = reuse_fsck {
            return self.reusing(&hit, snapshot, key, clock, false);
        }
        self.fsck_and_judge(snapshot, after, key, clock, file_data)
    }

    /// Whether a state this check donates to may differ from it in file data only its
    /// walk read (`check::file_data`): on a configuration whose file data reads back from
    /// the device's bytes alone, a view whose every read reaches its log (no page cache),
    /// and a read-only fsck whose reads are logged or known (fsck by reads, `--fsck once`),
    /// so that what fsck read is left out.
    fn patches_file_data(&self, a: &AfterRecovery<'_>) -> bool {
        a.speed.patch_file_data
            && a.speed.reuse_by_reads
            && a.speed.fsck == FsckPolicy::Once
            && a.speed.fsck_by_reads
            && !crate::device::fusedisk::Disk::cached(a.view)
            && super::file_data::applies_to(self.subject.config.fstype)
    }

    /// The verdict with an earlier state's fsck (`hit`, of the same recovered image), and
    /// its snapshot too when `snapshot_reused`.
    fn reusing(
        self,
        hit: &Recovered,
        snapshot: Snapshot,
        key: Option<[u8; 32]>,
        mut clock: Clock,
        snapshot_reused: bool,
    ) -> Result<StateCheck, Error> {
        self.loopdev.detach()?;
        clock.steps.detach_ms = clock.laps.lap();
        // The same recovered image: what could be created on it is the earlier state's.
        let mut snapshot = snapshot;
        snapshot.not_creatable = hit.snapshot.not_creatable.clone();
        let durable_ops = self.state.durable_ops;
        let mut check = oracle_verdict(self.subject, snapshot, hit.fsck.clone(), durable_ops)
            .after_repair(self.repair);
        check.recovered_image = key.map(|k| hex(&k));
        check.snapshot_reused = snapshot_reused;
        check.fsck_reused = true;
        check.reads_behind = hit.reads.clone();
        check.steps = Some(clock.steps);
        Ok(check)
    }

    /// The read-only fsck (or an earlier state's, by what it read), the recovered image
    /// remembered for the states after, and the verdict.
    fn fsck_and_judge(
        self,
        snapshot: Snapshot,
        after: Option<&AfterRecovery<'_>>,
        key: Option<[u8; 32]>,
        mut clock: Clock,
        file_data: Option<super::file_data::FileData>,
    ) -> Result<StateCheck, Error> {
        // Reuse of the read-only fsck by what it read (with `--fsck once`): not through a
        // cached view, whose page cache would answer reads the view never logs.
        let by_reads = after
            .filter(|a| a.speed.fsck == FsckPolicy::Once && a.speed.fsck_by_reads)
            .filter(|a| !crate::device::fusedisk::Disk::cached(a.view));
        let io_err = |source| Error::Io { path: self.state.disk_file.to_owned(), source };
        let found = match by_reads {
            Some(a) => {
                let found = a.cache.fsck_memo.find(a.view, a.stamps, false).map_err(io_err)?;
                // The lookup is a key's work, as the recovered image's.
                clock.steps.key_ms += clock.laps.lap();
                found
            }
            None => None,
        };
        // What an fsck taken from an earlier state read: this state has read it too.
        let mut fsck_behind = None;
        // What the fsck read (run here with its reads logged, or taken with its reads):
        // a later state may not differ there, whatever else read it.
        let (fsck, fsck_read) = match found {
            Some(hit) => {
                let mut read = SectorSet::new();
                hit.reads.add_to(&mut read);
                fsck_behind = Some(hit.reads);
                (hit.fsck, Some(read))
            }
            None => match self.fsck(by_reads, &mut clock)? {
                (Ok(fsck), read) => (fsck, read),
                (Err(timed_out), _) => return Ok(timed_out.after_repair(self.repair)),
            },
        };
        let file_data =
            file_data.zip(fsck_read).map(|(data, read)| data.only(|s| !read.contains(&s)));
        self.loopdev.detach()?;
        clock.steps.detach_ms = clock.laps.lap();

        if let (Some(a), Some(k)) = (after, key) {
            let reads = a.view.first_reads().map(|mut r| {
                if let Some(behind) = &fsck_behind {
                    behind.add_to(&mut r);
                }
                Arc::new(super::reads::SectorRuns::of(&r))
            });
            a.cache.insert(k, Recovered { snapshot: snapshot.clone(), fsck: fsck.clone(), reads });
        }
        let durable_ops = self.state.durable_ops;
        let mut check =
            oracle_verdict(self.subject, snapshot, fsck, durable_ops).after_repair(self.repair);
        check.recovered_image = key.map(|k| hex(&k));
        check.fsck_reused = fsck_behind.is_some();
        check.reads_behind = fsck_behind;
        check.file_data = file_data.filter(|d| !d.is_empty()).map(Arc::new);
        check.steps = Some(clock.steps);
        Ok(check)
    }

    /// Under the workload's `creatable-after-recovery` guarantee: new names created on the
    /// recovered tree ([`workloads::create_after_recovery`]) in the mount that recovered
    /// it, once its snapshot is taken; the names that could not be made. In that mount,
    /// not a later one: a file system may recover its tree and not its allocator (btrfs
    /// from 4.4 until its fix, in 4.16.13 and not in 4.15.1, left its next inode number
    /// stale after replaying a log, so a new file collided, EBUSY or EEXIST, while a
    /// mount after reads the number afresh). The writes go to the state's private
    /// overlay; the fsck after sees the new names, which a consistent file system keeps
    /// consistent.
    fn create_after_recovery(
        &self,
        snapshot: &Snapshot,
    ) -> std::collections::BTreeMap<String, String> {
        let wanted = workloads::Guarantee::CreatableAfterRecovery;
        if !self.subject.workload.guarantees.contains(&wanted) {
            return Default::default();
        }
        workloads::create_after_recovery(self.state.mnt, &self.subject.workload, snapshot)
    }

    /// Runs the configuration's read-only fsck on the unmounted state: its complaint, or
    /// the check of a state whose fsck timed out. With `by_reads`, what it read is
    /// logged and remembered for the states after.
    fn fsck(
        &self,
        by_reads: Option<&AfterRecovery<'_>>,
        clock: &mut Clock,
    ) -> Result<FsckRan, Error> {
        let config = &self.subject.config;
        if let Some(a) = by_reads {
            // Every sector fsck reads must reach the view and its log.
            self.loopdev.drop_cache()?;
            a.view.log_reads();
        } else if self.marked {
            // What recovery read and did not use must reach the view if fsck reads it,
            // so that the view counts it as read after all.
            self.loopdev.drop_cache()?;
        }
        let fsck = match config.fsck_on(self.loopdev.path(), self.timeouts.fsck) {
            Ok(complaint) => complaint,
            Err(cmd::CmdError::Timeout { .. }) => {
                let check = StateCheck {
                    mounted: true,
                    ..StateCheck::failed(Outcome::Timeout {
                        step: format!("fsck: {}", config.fsck.join(" ")),
                    })
                };
                return Ok((Err(check), None));
            }
            Err(e) => return Err(crate::device::Error::from(e).into()),
        };
        clock.steps.fsck_ms = clock.laps.lap();
        let mut logged = None;
        if let Some((a, read)) = by_reads.and_then(|a| Some((a, a.view.take_read_log()?))) {
            let io_err = |source| Error::Io { path: self.state.disk_file.to_owned(), source };
            a.cache.fsck_memo.add(a.view, a.stamps, &read, &fsck, false).map_err(io_err)?;
            logged = Some(read);
        }
        Ok((Ok(fsck), logged))
    }
}

/// The steps of `repair` left to try when the configuration's routine fsck before
/// mounting (`recovery`) left errors: every step but that same command, which has just
/// failed (ext2's ladder is its recovery again, so nothing is left; jfs' forced check and
/// its last resort are).
fn ladder_after_failed_recovery(repair: &[RepairStep], recovery: &[&str]) -> Vec<RepairStep> {
    repair.iter().filter(|step| step.argv != recovery).copied().collect()
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

/// [`check_image_with`] for a research design: no loop device, no kernel mount. The
/// crash state's file is the design's block device; mounting it in process runs the
/// design's recovery (and, for NoFS, its allocation scan, waited for so that a state
/// always checks the same); then the same snapshot, judge and verdict as for a kernel
/// configuration, with `researchfs::fsck` as the read-only fsck.
fn check_research(
    subject: &Subject,
    judge: &Judge,
    design: researchfs::Design,
    st: StateToCheck<'_>,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    let io = |source| Error::Io { path: st.disk_file.to_owned(), source };
    let mut dev: Arc<dyn researchfs::BlockDevice> =
        Arc::new(researchfs::FileDevice::open(st.disk_file).map_err(io)?);
    if design.pm_fenced().is_some() {
        // Conquest: the disk and the PM region together are the file system's device;
        // opening it runs the PM half of recovery (the redo area).
        let Some(image) = st.pm_image else {
            return Err(Error::Io {
                path: st.disk_file.to_owned(),
                source: std::io::Error::other(format!("{design} needs the state's PM image")),
            });
        };
        let pm = Arc::new(researchfs::MemPm::from_bytes(image.to_vec()));
        dev = match researchfs::ConquestDevice::open(design, dev, pm) {
            Ok(d) => d,
            Err(e) => {
                return Ok(StateCheck::failed(Outcome::Unrecoverable {
                    message: format!("researchfs {design}: {e}"),
                }))
            }
        };
    }
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
        let fsck = research_fsck(subject, design, dev.as_ref());
        return Ok(checker_verdict(run, checker, fsck));
    }
    let detects = crate::fs::profile(&subject.config).detects_by_error;
    let snapshot = workloads::take_snapshot_with(st.mnt, &subject.workload, detects);
    unmount(mounted)?;
    let snapshot = match snapshot {
        Ok(s) => s,
        Err(e) => return Ok(StateCheck { mounted: true, ..StateCheck::failed(walk_failed(&e)) }),
    };
    let fsck = research_fsck(subject, design, dev.as_ref());
    Ok(oracle_verdict(subject, snapshot, fsck, st.durable_ops))
}

/// `researchfs::fsck` on the unmounted crash state: `None` when clean, else one line with
/// the problem count, the thesis' kinds and the first problem. Problems the design
/// repairs at every mount by itself (NoFS's scan frees unreachable inodes and blocks:
/// its allocation state is never persisted) are the design working, not damage, and so
/// are the kinds its paper accepts after a crash (soft updates' leaks: the profile's
/// `accepted_fsck`, [`crate::fs::profile`]).
fn research_fsck(
    subject: &Subject,
    design: researchfs::Design,
    dev: &dyn researchfs::BlockDevice,
) -> Option<String> {
    let accepted = crate::fs::profile(&subject.config).accepted_fsck;
    match researchfs::fsck(design, dev) {
        Ok(r) => {
            let damage: Vec<&researchfs::fsck::Problem> = r
                .damage()
                .into_iter()
                .filter(|p| p.kind.is_none_or(|k| !accepted.contains(&k)))
                .collect();
            if damage.is_empty() {
                return None;
            }
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
    fn a_failed_routine_fsck_leaves_the_other_steps_of_the_ladder() {
        let jfs = vec!["fsck.jfs -f", "fsck.jfs -f --omit_journal_replay"];
        for (name, left) in [("ext2", vec![]), ("jfs", jfs)] {
            let c = crate::fs::by_name(name).unwrap();
            let Recovery::FsckThenMount(fsck) = c.recovery else { panic!("{name}: no fsck") };
            let steps = ladder_after_failed_recovery(c.repair, fsck);
            assert_eq!(steps.iter().map(RepairStep::text).collect::<Vec<_>>(), left, "{name}");
        }
    }

    #[test]
    fn every_kernel_configuration_has_a_ladder_and_research_designs_none() {
        // But nilfs2: nilfs-utils has no fsck and no repair tool of any kind.
        for c in crate::fs::all() {
            assert_eq!(c.repair.is_empty(), c.fstype == "nilfs2", "{}", c.name);
        }
        for c in crate::fs::research() {
            assert!(c.repair.is_empty(), "{}", c.name);
        }
        let ext4 = crate::fs::by_name("ext4-ordered").unwrap();
        assert_eq!(ext4.repair.iter().map(|s| s.text()).collect::<Vec<_>>(), vec!["e2fsck -f -y"]);
    }
}
