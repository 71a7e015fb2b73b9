//! The checking engine: dedup of states by content and due promises, then parallel
//! workers over one FUSE disk, each with its own loop device and mount point.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::reads::ReadsMemo;
use super::{
    check_image_with, AfterRecovery, Error, Journal, Judge, Outcome, RecoveredCache, StateCheck,
    Subject,
};
use crate::crash::{CrashState, Overlay, OverlayBuilder};
use crate::device::fusedisk::{DiskServer, Flushes};
use crate::fs::Timeouts;
use crate::image::{CrashView, SectorSet};

/// Options of the checking engine.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Parallel workers (loop devices and mounts at once).
    pub jobs: usize,
    /// Timeouts of external steps.
    pub timeouts: Timeouts,
    /// Scratch directory for the FUSE disk and mount points.
    pub work_dir: PathBuf,
    /// Which of the engine's shortcuts are on (all by default).
    pub speed: Speedups,
}

/// The shortcuts that make checking fast, each exact and each switchable off, so that
/// `bob bench --table` can measure what it gains and a doubt about one can be ruled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Speedups {
    /// States whose recovered images are identical but for mount stamps share the
    /// snapshot and fsck result of the first (`--no-recovered-dedup` turns it off).
    pub recovered_dedup: bool,
    /// When the read-only fsck runs (`--fsck once|always`).
    pub fsck: FsckPolicy,
    /// mkfs and the base image are made once per configuration and reused by every cell
    /// of a run (`--no-shared-setup` turns it off).
    pub shared_setup: bool,
    /// A table records the next cell's workload while it checks the current cell's
    /// states (`--no-record-ahead` turns it off). Absent in documents written before it:
    /// read as off, as those tables ran.
    #[serde(default)]
    pub record_ahead: bool,
    /// Crash-state views of a configuration that prefers it
    /// ([`crate::fs::FsConfig::prefers_cached_views`]: xfs) are served through the
    /// kernel's page cache, so that small reads (xfs_repair reads its log 1 KiB at a
    /// time) come from readahead instead of one FUSE request each (`--no-cached-views`
    /// turns it off for every configuration). Absent in older documents: off.
    #[serde(default)]
    pub cached_views: bool,
    /// The FUSE disk serving crash-state views refuses the kernel's fsyncs, which a view
    /// has nothing to do for, so that the loop driver's flushes and FUA writes during
    /// recovery and unmount are not a FUSE round trip each (`--no-flushless-views` turns
    /// it off). Absent in older documents: off.
    #[serde(default)]
    pub flushless_views: bool,
    /// A state whose bytes equal an earlier checked state's on every sector that state's
    /// check read reuses its recovery, walk and fsck, unmounted (`check::reads`;
    /// `--no-reuse-by-reads` turns it off). Absent in older documents: off.
    #[serde(default)]
    pub reuse_by_reads: bool,
    /// A mounted state whose image after unmount equals an earlier state's on every
    /// sector that state's read-only fsck read takes its fsck result (`check::reads`;
    /// with [`FsckPolicy::Once`] only; `--no-fsck-by-reads` turns it off). Absent in
    /// older documents: off.
    #[serde(default)]
    pub fsck_by_reads: bool,
}

impl Default for Speedups {
    fn default() -> Self {
        Speedups {
            recovered_dedup: true,
            fsck: FsckPolicy::Once,
            shared_setup: true,
            record_ahead: true,
            cached_views: true,
            flushless_views: true,
            reuse_by_reads: true,
            fsck_by_reads: true,
        }
    }
}

impl Speedups {
    /// Every shortcut off: the engine as it was before them.
    pub const NONE: Speedups = Speedups {
        recovered_dedup: false,
        fsck: FsckPolicy::Always,
        shared_setup: false,
        record_ahead: false,
        cached_views: false,
        flushless_views: false,
        reuse_by_reads: false,
        fsck_by_reads: false,
    };
}

/// When a mounted state's read-only fsck runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsckPolicy {
    /// Once per distinct recovered image; states that recover to an image already checked
    /// reuse its result (counted as `fsck_reused`).
    Once,
    /// For every mounted state.
    Always,
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
    options: &'a EngineOptions,
    recovered: &'a RecoveredCache,
    stamps: &'a [std::ops::Range<u64>],
    cached_views: bool,
    /// Whether views log their first reads (for reuse by reads).
    track_reads: bool,
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
                    &file,
                    state.pm_image,
                    mnt,
                    state.due.to_vec(),
                    state.acked,
                    &self.options.timeouts,
                    Some(&AfterRecovery {
                        view: &view,
                        cache: self.recovered,
                        speed: self.options.speed,
                        stamps: self.stamps,
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
/// result to it. Memory stays flat in the number of states but for one [`StateResult`]
/// per state: a snapshot is kept only for the earliest state of each failing outcome (the
/// one a witness shows).
pub fn run_states_journaled(
    subject: &Subject,
    judge: &Judge,
    states: &[CrashState],
    options: &EngineOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    cancel: &AtomicBool,
    journal: &Journal,
) -> Result<Vec<StateResult>, Error> {
    let mut states = states.iter().cloned();
    run_state_stream(subject, judge, &mut states, options, progress, cancel, journal)
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

/// [`run_states_journaled`] over states taken one at a time from `states` (for example a
/// [`crate::crash::stream`]): each state's overlay is digested as it is taken, while the
/// workers mount the distinct states before it; a distinct state goes to the workers
/// through a queue of [`QUEUED_PER_WORKER`] per worker. The results are in stream order,
/// as [`run_states_journaled`] gives them for a list. `progress` hears (distinct states
/// done, distinct states taken so far): the second grows until the stream ends.
pub fn run_state_stream(
    subject: &Subject,
    judge: &Judge,
    states: &mut dyn Iterator<Item = CrashState>,
    options: &EngineOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    cancel: &AtomicBool,
    journal: &Journal,
) -> Result<Vec<StateResult>, Error> {
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    let fuse_dir = options.work_dir.join("states-disk");
    std::fs::create_dir_all(&fuse_dir)
        .map_err(|source| Error::Io { path: fuse_dir.clone(), source })?;
    let jobs = options.jobs.max(1);
    let flushes = match options.speed.flushless_views {
        true => Flushes::Refuse,
        false => Flushes::Forward,
    };
    let server = DiskServer::start_with(&fuse_dir, jobs + 1, flushes)?;
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
    let recovered = &RecoveredCache::default();
    // Reuse by reads, where a state's check is a program of its disk's bytes alone: not
    // for a user's checker (it is told the state's marks), nor for a PM region (not read
    // through the view), nor for a research design (recovered in process by bob's own
    // code, not by the kernel and its tools that the argument in `check::reads` is about).
    let memo = ReadsMemo::default();
    let reads_memo = (options.speed.reuse_by_reads
        && matches!(judge, Judge::Oracle)
        && subject.pm.is_none()
        && subject.config.design().is_none())
    .then_some(&memo);
    let cached_views = options.speed.cached_views && subject.config.prefers_cached_views();
    // What mounting stamps is the configuration's: one list for the run, not one per state.
    let stamps = &subject.config.mount_stamps();
    let guest = crate::vm::crash_log::guest();
    let guest_tag = &crate::vm::crash_log::subject_tag(
        subject.config.name,
        &subject.workload.name,
        subject.schedule.map(|s| s.name()),
    );
    let done = AtomicUsize::new(0);
    let distinct = AtomicUsize::new(0);
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let injected = &InjectedFailure::from_env();
    let attempts = &Attempts {
        subject,
        judge,
        server: &server,
        options,
        recovered,
        stamps,
        cached_views,
        track_reads: reads_memo.is_some(),
        injected,
        cancel,
    };
    let (queue, inbox) = std::sync::mpsc::sync_channel::<Job>(jobs * QUEUED_PER_WORKER);
    // The workers share the receiving end; the last one to stop drops it, so that the
    // stream never waits on a queue nobody reads.
    let inbox = Mutex::new(Some(inbox));
    let alive = AtomicUsize::new(0);
    // Per state of the stream: the state, its content digest and the index of the state
    // mounted for it.
    let mut listed: Vec<(CrashState, [u8; 32], usize)> = Vec::new();
    let stop = || {
        cancel.load(Ordering::Relaxed) || first_error.lock().map(|e| e.is_some()).unwrap_or(true)
    };

    std::thread::scope(|scope| {
        let worker = |worker: usize| {
            let (store, done, distinct, first_error, inbox, alive) =
                (&store, &done, &distinct, &first_error, &inbox, &alive);
            let builder = &builder;
            let stop = &stop;
            move || {
                // Leaves the queue to the others; the last worker out closes it (also
                // when it unwinds from a panic).
                struct Leave<'a> {
                    alive: &'a AtomicUsize,
                    inbox: &'a Mutex<Option<std::sync::mpsc::Receiver<Job>>>,
                }
                impl Drop for Leave<'_> {
                    fn drop(&mut self) {
                        if self.alive.fetch_sub(1, Ordering::SeqCst) == 1 {
                            drop(self.inbox.lock().unwrap_or_else(|p| p.into_inner()).take());
                        }
                    }
                }
                let _leave = Leave { alive, inbox };
                let mut mnt = options.work_dir.join(format!("mnt-{worker}"));
                if let Err(source) = std::fs::create_dir_all(&mnt) {
                    *first_error.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(Error::Io { path: mnt, source });
                    return;
                }
                loop {
                    if stop() {
                        return;
                    }
                    let job = {
                        let inbox = inbox.lock().unwrap_or_else(|p| p.into_inner());
                        match inbox.as_ref().map(|r| r.recv()) {
                            Some(Ok(job)) => job,
                            _ => return,
                        }
                    };
                    let Job { rank: k, index, state, key, digest, due } = job;
                    if let Some(c) = journal.prior.get(&key) {
                        store(index, c.clone());
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        progress(n, distinct.load(Ordering::Relaxed));
                        continue;
                    }
                    // In a guest bob booted: a state the host pinned a kernel crash on is
                    // not recovered again, and every other is logged while it recovers.
                    let key_hex = guest.map(|_| super::journal::hex(&key)).unwrap_or_default();
                    if let Some(crash) = guest.and_then(|g| g.known_crash(guest_tag, &key_hex)) {
                        let c = StateCheck::failed(Outcome::KernelCrash {
                            message: crash.message.clone(),
                            console: crash.console.display().to_string(),
                        });
                        journal.record(&key, &c);
                        store(index, c);
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        progress(n, distinct.load(Ordering::Relaxed));
                        continue;
                    }
                    let recovering =
                        guest.map(|g| g.begin(guest_tag, &key_hex, &state.id.to_string(), k));
                    let acked = match judge {
                        Judge::Oracle => Vec::new(),
                        Judge::Checker(_) => subject.acked_marks(&state.id),
                    };
                    let pm_image = match (&subject.pm, &state.id.pm) {
                        (Some(pm), Some(cut)) => Some(pm.image(cut)),
                        _ => None,
                    };
                    let started = std::time::Instant::now();
                    let overlay = builder.state(&state.id);
                    let reused = reads_memo.and_then(|m| {
                        m.find(state.id.epoch, &digest, &overlay, &subject.trace)
                            .map(|r| r.check_for(subject, due.clone()))
                    });
                    let (checked, reads, retries) = match reused {
                        Some(c) => (Ok(c), None, 0),
                        None => {
                            let on = Attempt {
                                rank: k,
                                index,
                                overlay: &overlay,
                                pm_image: pm_image.as_deref(),
                                due: &due,
                                acked: &acked,
                            };
                            attempts.check(&on, worker, &mut mnt)
                        }
                    };
                    drop(recovering);
                    match checked {
                        Ok(mut c) => {
                            if let (Some(memo), Some(reads)) = (reads_memo, reads) {
                                let at = (state.id.epoch, digest, &overlay);
                                memo.donate(subject, at, reads, &c);
                            }
                            c.infra_retries = retries;
                            if let Some(steps) = c.steps.as_mut() {
                                steps.total_ms = started.elapsed().as_secs_f64() * 1e3;
                            }
                            if c.outcome == Outcome::Held {
                                c.snapshot = None;
                            }
                            journal.record(&key, &c);
                            store(index, c);
                            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(n, distinct.load(Ordering::Relaxed));
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
                            store(index, c);
                            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(n, distinct.load(Ordering::Relaxed));
                        }
                        Err(e) => {
                            *first_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            return;
                        }
                    }
                }
            }
        };

        // The stream, on this thread: digest, dedup, queue. Two states are checked once
        // when their blocks are identical and the same promises are due in them: the same
        // disk right before and right after a flush owes different fsyncs, and sharing
        // one verdict would skip the promises of the later.
        let mut first_of: HashMap<[u8; 32], usize> = HashMap::new();
        let mut spawned = 0;
        for state in states {
            if stop() {
                break;
            }
            let index = listed.len();
            let digest = crate::crash::pm::digest(
                builder.state(&state.id).digest(&subject.trace),
                subject.pm.as_deref(),
                state.id.pm.as_ref(),
            );
            let due = subject.durable_ops(&state.id);
            let key = check_key(&digest, &due);
            let mounted_as = *first_of.entry(key).or_insert(index);
            listed.push((state, digest, mounted_as));
            if mounted_as != index {
                continue;
            }
            let rank = distinct.fetch_add(1, Ordering::Relaxed);
            // One worker per distinct state until there are `jobs`.
            if spawned < jobs {
                alive.fetch_add(1, Ordering::SeqCst);
                scope.spawn(worker(spawned));
                spawned += 1;
            }
            let job = Job { rank, index, state: listed[index].0.clone(), key, digest, due };
            if queue.send(job).is_err() {
                break; // every worker has stopped (an error, a cancel, a panic)
            }
        }
        drop(queue);
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
    let mut out = Vec::with_capacity(listed.len());
    for (state, digest, mounted_as) in listed {
        // Every distinct state has a result unless the run stopped, which returned above.
        let Some(check) = results.get(&mounted_as).cloned() else {
            return Err(Error::Interrupted);
        };
        out.push(StateResult { state, digest, mounted_as, check });
    }
    Ok(out)
}
