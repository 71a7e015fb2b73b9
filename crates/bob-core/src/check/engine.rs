//! The checking engine: dedup of states by content and due promises, then parallel
//! workers over one FUSE disk, each with its own loop device and mount point.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::reads::ReadsMemo;
use super::speed::Speedups;
use super::{
    check_image_with, AfterRecovery, Error, Journal, Judge, Outcome, RecoveredCache, StateCheck,
    StateToCheck, Subject,
};
use crate::crash::{CrashState, Overlay, OverlayBuilder};
use crate::device::fusedisk::{DiskServer, Flushes};
use crate::fs::Timeouts;
use crate::image::{CrashView, SectorSet};

/// Options of one run of the checking engine: how it works (workers, timeouts, scratch,
/// shortcuts), how a state is judged, where its results are journaled, who hears of its
/// progress and what stops it. [`EngineOptions::new`] gives the defaults; a caller sets
/// what it needs with struct update syntax.
pub struct EngineOptions<'a> {
    /// Parallel workers (loop devices and mounts at once).
    pub jobs: usize,
    /// Timeouts of external steps.
    pub timeouts: Timeouts,
    /// Scratch directory for the FUSE disk and mount points.
    pub work_dir: PathBuf,
    /// Which of the engine's shortcuts are on (all by default).
    pub speed: Speedups,
    /// How a state is judged (the oracle by default).
    pub judge: &'a Judge,
    /// States already checked, skipped, and where each new result is appended (none by
    /// default). Memory stays flat in the number of states but for one [`StateResult`]
    /// per state: a snapshot is kept only for the earliest state of each failing outcome
    /// (the one a witness shows).
    pub journal: Option<&'a Journal>,
    /// Called after each distinct state is done with (distinct states done, distinct
    /// states taken so far: the second grows until the stream ends).
    pub progress: &'a (dyn Fn(usize, usize) + Sync),
    /// Once set, the run stops early with [`Error::Interrupted`].
    pub cancel: &'a AtomicBool,
    /// Stop at the first violated state: the results are the stream's states up to the
    /// first violated one, for a recording whose only question is whether it shows a
    /// violation at all (a schedule's second and later recordings, see
    /// `run::recordings`). A run that finds none checks every state.
    pub until_violation: bool,
}

/// The default judge, cancel flag and progress of [`EngineOptions::new`].
static ORACLE: Judge = Judge::Oracle;
static NEVER: AtomicBool = AtomicBool::new(false);
fn unheard(_: usize, _: usize) {}

impl<'a> EngineOptions<'a> {
    /// The defaults, working in `work_dir`: one worker, default timeouts, every shortcut,
    /// the oracle, no journal, no progress, never cancelled.
    pub fn new(work_dir: impl Into<PathBuf>) -> EngineOptions<'a> {
        EngineOptions {
            jobs: 1,
            timeouts: Timeouts::default(),
            work_dir: work_dir.into(),
            speed: Speedups::default(),
            judge: &ORACLE,
            journal: None,
            progress: &unheard,
            cancel: &NEVER,
            until_violation: false,
        }
    }
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

// A subject's method, here beside the results it reads, so that `subject` does not
// import the engine that imports it.
impl Subject {
    /// The regions of the base image (see [`crate::fs::regions::Regions::of_image`],
    /// which runs `debugfs` or `xfs_db` under `timeout`) when some of `results` failed to
    /// mount, else none: what a report needs to name the region a torn write tore,
    /// probed once per cell and only when it can matter.
    pub(crate) fn regions_if_unmountable(
        &self,
        results: &[StateResult],
        timeout: std::time::Duration,
    ) -> crate::fs::regions::Regions {
        use super::OutcomeKind;
        let any_mount_failure = results.iter().any(|r| {
            r.check.repair.is_some() || r.check.outcome.kind() == OutcomeKind::Unrecoverable
        });
        match any_mount_failure {
            true => crate::fs::regions::Regions::of_image(&self.config, self.base.path(), timeout),
            false => crate::fs::regions::Regions::default(),
        }
    }
}

/// The key a state is checked (and journaled) under: its content digest, and the
/// persistence points due in it when there are any.
pub(crate) fn check_key(digest: &[u8; 32], durable_ops: &[usize]) -> [u8; 32] {
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

/// A state's content digest as the engine keys it: the disk's overlay over the trace,
/// and the persistent-memory cut where the subject has a second device.
fn state_digest(subject: &Subject, builder: &OverlayBuilder, state: &CrashState) -> [u8; 32] {
    crate::crash::pm_states::digest(
        builder.state(&state.id).digest(&subject.trace),
        subject.pm.as_deref(),
        state.id.pm.as_ref(),
    )
}

/// The tag a subject's states are logged under in a guest's crash log.
fn guest_tag(subject: &Subject) -> String {
    crate::vm::crash_log::subject_tag(
        subject.config.name,
        &subject.workload.name,
        subject.schedule.map(|s| s.name()),
    )
}

/// In a guest bob booted, before a state (checked under `key`) recovers: a state the
/// host pinned a kernel crash on is not recovered again (`Err`: that crash is its
/// outcome), and any other is logged as in flight until the guard drops, so that a crash
/// or hang while it recovers is pinned on it.
fn guest_begin(
    guest: &'static crate::vm::crash_log::GuestLog,
    tag: &str,
    key: &[u8; 32],
    state: &CrashState,
    rank: usize,
) -> Result<crate::vm::crash_log::Recovering<'static>, Box<StateCheck>> {
    let key = super::journal::hex(key);
    if let Some(crash) = guest.known_crash(tag, &key) {
        return Err(Box::new(StateCheck::failed(Outcome::KernelCrash {
            message: crash.message.clone(),
            console: crash.console.display().to_string(),
        })));
    }
    Ok(guest.begin(tag, &key, &state.id.to_string(), rank))
}

/// [`guest_begin`] for a check of `state` outside the engine (the independent replay
/// that confirms a witness), so that it is pinned as one in the engine would be. On the
/// host, `Ok(None)`.
pub(crate) fn guest_turn(
    subject: &Subject,
    state: &CrashState,
) -> Result<Option<crate::vm::crash_log::Recovering<'static>>, Box<StateCheck>> {
    let Some(guest) = crate::vm::crash_log::guest() else { return Ok(None) };
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    let digest = state_digest(subject, &builder, state);
    let key = check_key(&digest, &subject.durable_ops(&state.id));
    // Past every rank the engine gives, so the test hook that crashes the kernel at a
    // rank never fires here.
    guest_begin(guest, &guest_tag(subject), &key, state, usize::MAX).map(Some)
}

/// How many times a state is tried again after bob's own machinery failed on it (see
/// [`Error::is_infrastructure`]) before it is recorded as `infra-error`. One: a transient
/// failure (a loop device taken under us, an aborted FUSE connection) does not repeat on
/// fresh devices, and a failure that does is worth reporting rather than hammering.
const INFRA_RETRIES: usize = 1;

/// A new mount point for `worker` after an infrastructure failure at `old` (which may
/// still be mounted or busy: it is removed only if it can be, and the work directory's
/// drop releases whatever is left below it).
fn fresh_mount_point(
    work_dir: &Path,
    worker: usize,
    retry: usize,
    old: &Path,
) -> Result<PathBuf, Error> {
    // Busy or mounted, it stays: the fresh mount point is what the worker uses.
    let _ = std::fs::remove_dir(old);
    let fresh = work_dir.join(format!("mnt-{worker}.{retry}"));
    std::fs::create_dir_all(&fresh).map_err(|source| Error::Io { path: fresh.clone(), source })?;
    Ok(fresh)
}

/// Test only: `BOB_TEST_FAIL_STATE=K[:TIMES]` makes the check of the K-th distinct state
/// (0-based, in the engine's order, in every engine run of the process) fail with an
/// infrastructure error on its first TIMES attempts (default 1), before anything is
/// attached, so that the CLI tests can show a retry (TIMES 1) and an `infra-error`
/// (TIMES 2) deterministically on the real machine. Unset in normal use.
struct InjectedFailure {
    state: Option<usize>,
    times: usize,
}

impl InjectedFailure {
    fn from_env() -> InjectedFailure {
        let spec = std::env::var("BOB_TEST_FAIL_STATE").unwrap_or_default();
        let (state, times) = spec.split_once(':').unwrap_or((&spec, "1"));
        InjectedFailure {
            state: state.trim().parse().ok(),
            times: times.trim().parse().unwrap_or(1),
        }
    }

    /// The error the `attempt`-th try (0-based) of the `k`-th distinct state is to fail
    /// with, if it is to fail: a FUSE connection abort on its file, as a killed bob's
    /// cleanup could cause.
    fn fails(&self, k: usize, attempt: usize, file: &Path) -> Option<Error> {
        (self.state == Some(k) && attempt < self.times).then(|| {
            Error::Device(crate::device::Error::Fuse {
                path: file.to_owned(),
                source: std::io::Error::other(
                    "connection aborted (injected by BOB_TEST_FAIL_STATE, a test hook)",
                ),
            })
        })
    }
}

/// What every attempt at checking a state of one engine run shares.
struct Attempts<'a> {
    subject: &'a Subject,
    judge: &'a Judge,
    server: &'a DiskServer,
    options: &'a EngineOptions<'a>,
    recovered: &'a RecoveredCache,
    stamps: Vec<std::ops::Range<u64>>,
    cached_views: bool,
    /// Whether views log their first reads (for reuse by reads).
    track_reads: bool,
    /// Where an ext3/ext4 base image keeps its journal, when reuse by reads leaves out
    /// what jbd2 read ahead and did not use (`check::recovery_used`).
    journal: Option<super::recovery_used::JournalLayout>,
    injected: &'a InjectedFailure,
    cancel: &'a AtomicBool,
}

/// One distinct state to check, as [`Attempts::check`] needs it.
struct Attempt<'a> {
    /// Its rank among the distinct states.
    rank: usize,
    /// Its index in the stream (names its FUSE file).
    index: usize,
    overlay: &'a Overlay,
    pm_image: Option<&'a [u8]>,
    due: &'a [usize],
    acked: &'a [String],
}

impl Attempts<'_> {
    /// Checks `state` on a view of its own, served as a FUSE file and mounted at `mnt`
    /// (`worker`'s). A failure of bob's own machinery is retried, up to [`INFRA_RETRIES`]
    /// times, from scratch: a fresh view (the failed attempt's recovery writes are in the
    /// old one's overlay), a fresh FUSE file, loop device and mount point (the old mount
    /// point may still be busy; `mnt` becomes the new one, which the worker keeps).
    /// Returns the check, the sectors its view read first (when tracked) and the retries.
    fn check(
        &self,
        state: &Attempt,
        worker: usize,
        mnt: &mut PathBuf,
    ) -> (Result<StateCheck, Error>, Option<SectorSet>, usize) {
        let subject = self.subject;
        let mut retries = 0;
        loop {
            let view = Arc::new(
                CrashView::new(subject.base.clone(), subject.trace.clone(), state.overlay.clone())
                    .page_cache(self.cached_views)
                    .track_reads(self.track_reads),
            );
            let name = format!("state-{}.{retries}.img", state.index);
            let file = self.server.add(&name, view.clone());
            let checked = match self.injected.fails(state.rank, retries, &file) {
                Some(e) => Err(e),
                None => check_image_with(
                    subject,
                    self.judge,
                    StateToCheck {
                        disk_file: &file,
                        pm_image: state.pm_image,
                        mnt,
                        durable_ops: state.due.to_vec(),
                        acked_marks: state.acked,
                    },
                    &self.options.timeouts,
                    Some(&AfterRecovery {
                        view: &view,
                        cache: self.recovered,
                        speed: self.options.speed,
                        stamps: &self.stamps,
                        journal: self.journal.as_ref(),
                    }),
                ),
            };
            self.server.remove(&name);
            match checked {
                // An interrupt stops at once: no retry.
                Err(e)
                    if e.is_infrastructure()
                        && retries < INFRA_RETRIES
                        && !self.cancel.load(Ordering::Relaxed) =>
                {
                    retries += 1;
                    match fresh_mount_point(&self.options.work_dir, worker, retries, mnt) {
                        Ok(fresh) => *mnt = fresh,
                        Err(e) => return (Err(e), None, retries),
                    }
                }
                other => {
                    let checked = other.map(|mut c| {
                        c.recovery_writes = view.recovery_writes();
                        c
                    });
                    return (checked, view.first_reads(), retries);
                }
            }
        }
    }
}

/// A distinct state on its way from the stream to a worker.
struct Job {
    /// Its rank among the distinct states (the order they are checked in).
    rank: usize,
    /// Its index in the stream.
    index: usize,
    state: CrashState,
    /// Its check key (content digest and due promises).
    key: [u8; 32],
    /// Its content digest.
    digest: [u8; 32],
    /// The persistence points due in it.
    due: Vec<usize>,
}

/// Distinct states queued per worker ahead of the mounts: enough that a worker never
/// waits on the stream while the next overlays are digested, few enough to hold nothing.
const QUEUED_PER_WORKER: usize = 2;

/// Checks the states of `subject` taken one at a time from `states` (a list's
/// `iter().cloned()`, or a [`crate::crash::stream`]): each state's overlay is digested
/// as it is taken, states identical in content and due promises are checked once, and
/// the distinct ones go to `options.jobs` workers in parallel through a queue of
/// [`QUEUED_PER_WORKER`] per worker, each with its own loop device and mount point over
/// one FUSE disk. The results are in stream order. Stops early with
/// [`Error::Interrupted`] when `options.cancel` is set.
pub fn run_states(
    subject: &Subject,
    states: impl IntoIterator<Item = CrashState>,
    options: &EngineOptions,
) -> Result<Vec<StateResult>, Error> {
    run_stream(subject, &mut states.into_iter(), options)
}

/// [`run_states`], not generic: the stream on this thread, the workers in a scope.
fn run_stream(
    subject: &Subject,
    states: &mut dyn Iterator<Item = CrashState>,
    options: &EngineOptions,
) -> Result<Vec<StateResult>, Error> {
    let fuse_dir = options.work_dir.join("states-disk");
    std::fs::create_dir_all(&fuse_dir)
        .map_err(|source| Error::Io { path: fuse_dir.clone(), source })?;
    let jobs = options.jobs.max(1);
    let flushes = match options.speed.flushless_views {
        true => Flushes::Refuse,
        false => Flushes::Forward,
    };
    let server = DiskServer::start_with(&fuse_dir, jobs + 1, flushes)?;
    let no_journal = Journal::default();
    let recovered = RecoveredCache::default();
    let memo = ReadsMemo::default();
    let injected = InjectedFailure::from_env();
    let run = Run::new(subject, options, &server, &no_journal, &recovered, &memo, &injected);
    let listed = run.stream_to_workers(states, jobs);
    run.results(listed)
}

/// What the stream and the workers of one engine run share.
struct Run<'a> {
    subject: &'a Subject,
    options: &'a EngineOptions<'a>,
    journal: &'a Journal,
    builder: OverlayBuilder<'a>,
    attempts: Attempts<'a>,
    /// Reuse by reads, when it applies to this run (see [`Run::new`]).
    reads_memo: Option<&'a ReadsMemo>,
    /// In a guest bob booted: its log of the states in flight, and this subject's tag.
    guest: Option<&'static crate::vm::crash_log::GuestLog>,
    guest_tag: String,
    /// Each distinct state's check, by its index in the stream.
    results: Mutex<HashMap<usize, StateCheck>>,
    /// Earliest distinct state per failing outcome: the only snapshots worth keeping.
    keep: Mutex<HashMap<&'static str, usize>>,
    done: AtomicUsize,
    distinct: AtomicUsize,
    first_error: Mutex<Option<Error>>,
    /// A state was violated under [`EngineOptions::until_violation`]: no new state is
    /// taken.
    violation_found: AtomicBool,
}

/// The receiving end of the queue, shared by the workers; the last one to stop drops it,
/// so that the stream never waits on a queue nobody reads.
struct Inbox {
    receiver: Mutex<Option<std::sync::mpsc::Receiver<Job>>>,
    alive: AtomicUsize,
}

/// A worker's place at the [`Inbox`]: leaving it (also when unwinding from a panic)
/// closes the queue if it was the last.
struct Leave<'a>(&'a Inbox);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if self.0.alive.fetch_sub(1, Ordering::SeqCst) == 1 {
            drop(self.0.receiver.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
    }
}

impl Inbox {
    /// The next job, or `None` once the stream has ended.
    fn next(&self) -> Option<Job> {
        let receiver = self.receiver.lock().unwrap_or_else(|p| p.into_inner());
        receiver.as_ref().and_then(|r| r.recv().ok())
    }
}

impl<'a> Run<'a> {
    fn new(
        subject: &'a Subject,
        options: &'a EngineOptions<'a>,
        server: &'a DiskServer,
        no_journal: &'a Journal,
        recovered: &'a RecoveredCache,
        memo: &'a ReadsMemo,
        injected: &'a InjectedFailure,
    ) -> Run<'a> {
        // Reuse by reads, where a state's check is a program of its disk's bytes alone:
        // not for a user's checker (it is told the state's marks), nor for a PM region
        // (not read through the view), nor for a research design (recovered in process by
        // bob's own code, not by the kernel and its tools that the argument in
        // `check::reads` is about).
        let reads_memo = (options.speed.reuse_by_reads
            && matches!(options.judge, Judge::Oracle)
            && subject.pm.is_none()
            && subject.config.design().is_none())
        .then_some(memo);
        let attempts = Attempts {
            subject,
            judge: options.judge,
            server,
            options,
            recovered,
            // What mounting stamps is the configuration's: one list for the run, not one
            // per state.
            stamps: subject.config.mount_stamps(),
            cached_views: options.speed.cached_views && subject.config.prefers_cached_views(),
            track_reads: reads_memo.is_some(),
            // The journal's place is the base image's, read once per run. Only where the
            // kernel's mount is the recovery and the views are not cached (a cached view's
            // page cache would answer reads after recovery the view never logs).
            journal: (reads_memo.is_some()
                && options.speed.recovery_used
                && matches!(subject.config.fstype, "ext3" | "ext4")
                && matches!(subject.config.recovery, crate::fs::Recovery::Mount)
                && !(options.speed.cached_views && subject.config.prefers_cached_views()))
            .then(|| super::recovery_used::JournalLayout::of_image(subject.base.path()))
            .flatten(),
            injected,
            cancel: options.cancel,
        };
        Run {
            subject,
            options,
            journal: options.journal.unwrap_or(no_journal),
            builder: OverlayBuilder::new(&subject.trace, &subject.epochs),
            attempts,
            reads_memo,
            guest: crate::vm::crash_log::guest(),
            guest_tag: guest_tag(subject),
            results: Mutex::new(HashMap::new()),
            keep: Mutex::new(HashMap::new()),
            done: AtomicUsize::new(0),
            distinct: AtomicUsize::new(0),
            first_error: Mutex::new(None),
            violation_found: AtomicBool::new(false),
        }
    }

    /// Whether to stop: a cancel, an error of bob's (or a poisoned lock), or a violation
    /// under [`EngineOptions::until_violation`].
    fn stop(&self) -> bool {
        self.options.cancel.load(Ordering::Relaxed)
            || self.violation_found.load(Ordering::Relaxed)
            || self.first_error.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    fn fail(&self, e: Error) {
        *self.first_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// Keeps the check of the state at `index`, with its snapshot only if it is the
    /// earliest state of a failing outcome so far, and tells the progress.
    fn finish(&self, index: usize, mut c: StateCheck) {
        if self.options.until_violation && c.outcome.kind() == super::OutcomeKind::Violated {
            self.violation_found.store(true, Ordering::Relaxed);
        }
        {
            let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
            let mut keep = self.keep.lock().unwrap_or_else(|p| p.into_inner());
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
        }
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        (self.options.progress)(n, self.distinct.load(Ordering::Relaxed));
    }

    /// The stream, on this thread: digest, dedup, queue, with one worker spawned per
    /// distinct state until there are `jobs`. Two states are checked once when their
    /// blocks are identical and the same promises are due in them: the same disk right
    /// before and right after a flush owes different fsyncs, and sharing one verdict would
    /// skip the promises of the later. Returns, per state of the stream, the state, its
    /// content digest and the index of the state mounted for it.
    fn stream_to_workers(
        &self,
        states: &mut dyn Iterator<Item = CrashState>,
        jobs: usize,
    ) -> Vec<(CrashState, [u8; 32], usize)> {
        let (queue, receiver) = std::sync::mpsc::sync_channel::<Job>(jobs * QUEUED_PER_WORKER);
        let inbox = Inbox { receiver: Mutex::new(Some(receiver)), alive: AtomicUsize::new(0) };
        let mut listed: Vec<(CrashState, [u8; 32], usize)> = Vec::new();
        std::thread::scope(|scope| {
            let mut first_of: HashMap<[u8; 32], usize> = HashMap::new();
            let mut spawned = 0;
            for state in states {
                if self.stop() {
                    break;
                }
                let index = listed.len();
                let digest = state_digest(self.subject, &self.builder, &state);
                let due = self.subject.durable_ops(&state.id);
                let key = check_key(&digest, &due);
                let mounted_as = *first_of.entry(key).or_insert(index);
                listed.push((state, digest, mounted_as));
                if mounted_as != index {
                    continue;
                }
                let rank = self.distinct.fetch_add(1, Ordering::Relaxed);
                if spawned < jobs {
                    inbox.alive.fetch_add(1, Ordering::SeqCst);
                    let (inbox, worker) = (&inbox, spawned);
                    scope.spawn(move || self.work(worker, inbox));
                    spawned += 1;
                }
                let job = Job { rank, index, state: listed[index].0.clone(), key, digest, due };
                if queue.send(job).is_err() {
                    break; // every worker has stopped (an error, a cancel, a panic)
                }
            }
            drop(queue);
        });
        listed
    }

    /// One worker: takes jobs from the inbox until the stream ends or the run stops.
    fn work(&self, worker: usize, inbox: &Inbox) {
        let _leave = Leave(inbox);
        let mut mnt = self.options.work_dir.join(format!("mnt-{worker}"));
        if let Err(source) = std::fs::create_dir_all(&mnt) {
            return self.fail(Error::Io { path: mnt, source });
        }
        while !self.stop() {
            let Some(job) = inbox.next() else { return };
            if let Err(e) = self.check_job(job, worker, &mut mnt) {
                return self.fail(e);
            }
        }
    }

    /// Checks one distinct state: from the journal, from a kernel crash the host pinned
    /// on it, from an earlier state's reads, or on a mount of its own. An error is one
    /// that ends the run.
    fn check_job(&self, job: Job, worker: usize, mnt: &mut PathBuf) -> Result<(), Error> {
        let subject = self.subject;
        let Job { rank, index, state, key, digest, due } = job;
        if let Some(c) = self.journal.get(&key) {
            self.finish(index, c);
            return Ok(());
        }
        // In a guest bob booted: a state the host pinned a kernel crash on is not
        // recovered again, and every other is logged while it recovers.
        let turn = self.guest.map(|g| guest_begin(g, &self.guest_tag, &key, &state, rank));
        let recovering = match turn.transpose() {
            Ok(recovering) => recovering,
            Err(crashed) => {
                self.journal.record(&key, &crashed);
                self.finish(index, *crashed);
                return Ok(());
            }
        };
        let acked = match self.options.judge {
            Judge::Oracle => Vec::new(),
            Judge::Checker(_) => subject.acked_marks(&state.id),
        };
        let pm_image = match (&subject.pm, &state.id.pm) {
            (Some(pm), Some(cut)) => Some(pm.image(cut)),
            _ => None,
        };
        let started = std::time::Instant::now();
        let overlay = self.builder.state(&state.id);
        let reused = self.reads_memo.and_then(|m| {
            let (donor, differing) = m.find(state.id.epoch, &digest, &overlay, &subject.trace)?;
            donor.check_for(subject, due.clone(), &differing, &overlay)
        });
        let (checked, reads, retries) = match reused {
            Some(c) => (Ok(c), None, 0),
            None => {
                let on = Attempt {
                    rank,
                    index,
                    overlay: &overlay,
                    pm_image: pm_image.as_deref(),
                    due: &due,
                    acked: &acked,
                };
                self.attempts.check(&on, worker, mnt)
            }
        };
        drop(recovering);
        match checked {
            Ok(mut c) => {
                if let (Some(memo), Some(reads)) = (self.reads_memo, reads) {
                    memo.donate(subject, (state.id.epoch, digest, &overlay), reads, &c);
                }
                // The donor keeps what it needs of it; the result list need not.
                c.file_data = None;
                c.infra_retries = retries;
                if let Some(steps) = c.steps.as_mut() {
                    steps.total_ms = started.elapsed().as_secs_f64() * 1e3;
                }
                if c.outcome == Outcome::Held {
                    c.snapshot = None;
                }
                self.journal.record(&key, &c);
                self.finish(index, c);
                Ok(())
            }
            // Not journaled: it is no verdict, and `--resume` must try again.
            Err(e) if e.is_infrastructure() => {
                let message = format!(
                    "{} (also after a retry on a fresh loop device and mount point)",
                    e.to_string().replace('\n', " ")
                );
                let c = StateCheck {
                    infra_retries: retries,
                    ..StateCheck::failed(Outcome::InfraError { message })
                };
                self.finish(index, c);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Every state's result in stream order, each sharing the check of the state mounted
    /// for it; the run's error or interrupt if it stopped.
    fn results(
        self,
        listed: Vec<(CrashState, [u8; 32], usize)>,
    ) -> Result<Vec<StateResult>, Error> {
        if let Some(e) = self.first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        if self.options.cancel.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        let results: HashMap<usize, Arc<StateCheck>> = self
            .results
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .map(|(i, c)| (i, Arc::new(c)))
            .collect();
        let mut out = Vec::with_capacity(listed.len());
        let stopped_at_violation = self.violation_found.into_inner();
        for (state, digest, mounted_as) in listed {
            // Every distinct state has a result unless the run stopped: on an error or a
            // cancel, which returned above, or at a violation under `until_violation`.
            // Workers take states in stream order and finish what they took, so the
            // states checked then are a prefix of the stream, every state before the
            // first violation in it.
            let Some(check) = results.get(&mounted_as).cloned() else {
                if stopped_at_violation {
                    break;
                }
                return Err(Error::Interrupted);
            };
            out.push(StateResult { state, digest, mounted_as, check });
        }
        if stopped_at_violation {
            // Up to the first violation in stream order, whatever else the workers had
            // taken by then: the same prefix on every run of the same trace.
            let first =
                out.iter().position(|r| r.check.outcome.kind() == super::OutcomeKind::Violated);
            out.truncate(first.map_or(out.len(), |i| i + 1));
        }
        Ok(out)
    }
}
