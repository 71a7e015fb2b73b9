//! One cell end to end: record the property's workload on the configuration, generate
//! crash states, check them, and write the witness of the first failure. The CLI's other
//! pipelines live beside it: a saved trace checked with the user's checker
//! ([`check_trace`]), a witness replayed ([`replay_witness`]), a whole table
//! ([`run_table`]), and what a machine needs to run a configuration ([`environment`]).

mod check_trace;
pub mod environment;
pub mod explore;
pub mod flip_history;
mod grid;
pub mod interop;
mod recordings;
pub mod recovery;
mod replay;
pub(crate) mod reproducer;
mod traces;
pub(crate) mod xfstests_lint;

pub use check_trace::{check_trace, CheckTraceOptions};
pub use flip_history::FlipHistory;
pub use grid::{disk_models, run_table, TableOptions, TableProgress, CELLS_AT_ONCE};
pub use recordings::Recordings;
pub use replay::{replay_witness, witness_state, ReplayOptions};
pub use traces::{cell_traces_in, load_trace_set, record_table};

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use workloads::{Property, Schedule};

use crate::check::{self, EngineOptions, Subject};
use crate::crash::{self, Limits, Strategy};
use crate::device::registry;
use crate::fs::{FsConfig, Timeouts};
use crate::record::{self, RecordRequest};
use crate::report::{self, witness, Cell, CellVerdict, ScheduleCell};
use crate::trace::EntryKind;

/// Errors of a run: the environment or bob failed, not the file system under test.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Recording failed.
    #[error(transparent)]
    Record(#[from] record::Error),
    /// Checking failed.
    #[error(transparent)]
    Check(#[from] check::Error),
    /// Writing the witness failed.
    #[error(transparent)]
    Witness(#[from] witness::Error),
    /// None of the asked drain schedules applies to the configuration.
    #[error("{config}: none of the drain schedules {asked} applies (it supports {supported})")]
    NoSchedule {
        /// Configuration name.
        config: String,
        /// The schedules asked for.
        asked: String,
        /// The schedules it supports.
        supported: String,
    },
    /// Reading or writing a dm-log-writes log.
    #[error(transparent)]
    Log(#[from] crate::trace::log::LogError),
    /// Reading or writing a trace directory.
    #[error(transparent)]
    TraceDir(#[from] crate::trace::dir::TraceDirError),
    /// Decoding blktrace output.
    #[error(transparent)]
    Blktrace(#[from] crate::trace::blktrace::BlktraceError),
    /// The machine cannot run the configuration.
    #[error(transparent)]
    Environment(#[from] environment::Missing),
    /// The request does not fit the trace or the configuration (no base image, several
    /// disk models where one is needed, an empty checker command).
    #[error("{0}")]
    Invalid(String),
    /// Shards asked of a cell or table that would record afresh: each shard would split
    /// the states of a recording of its own, and no merge of such shards is a partition
    /// of one recording.
    #[error("shards must split one saved recording, and none is given")]
    ShardsNeedSavedTraces,
    /// A cell of a table failed (not its file system: bob or the machine).
    #[error("{config} / {property}: {source}")]
    Cell {
        /// Configuration.
        config: String,
        /// Property.
        property: String,
        /// What failed.
        source: Box<Error>,
    },
    /// `bob replay --to` names a file bob will not write: one that exists (without
    /// `--force`) or one inside the witness directory.
    #[error("{}: {why}", path.display())]
    RefusedTarget {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// bob's scratch directory.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the run stopped because it was interrupted (SIGINT, SIGTERM), not because
    /// something failed.
    pub fn is_interrupted(&self) -> bool {
        match self {
            Error::Check(check::Error::Interrupted) => true,
            Error::Cell { source, .. } => source.is_interrupted(),
            _ => false,
        }
    }
}

/// How crash states are chosen and checked and where results and scratch files go: what
/// a cell ([`RunOptions`]) and `bob check` ([`CheckTraceOptions`]) share.
#[derive(Clone, Debug)]
pub struct Exploration {
    /// Crash-state strategies.
    pub strategies: Vec<Strategy>,
    /// Budget and seed.
    pub limits: Limits,
    /// Parallel workers.
    pub jobs: usize,
    /// External step timeouts.
    pub timeouts: Timeouts,
    /// Where witnesses go (a cell's: `<out>/<config>/<property>/`; `bob check`'s:
    /// `<out>/<config>/check`).
    pub out_dir: PathBuf,
    /// Where scratch directories go (default: the system temp dir).
    pub scratch: Option<PathBuf>,
    /// The engine's shortcuts (all on by default).
    pub speed: check::Speedups,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The configuration.
    pub config: FsConfig,
    /// The property.
    pub property: Property,
    /// A user-chosen free loop device for recording.
    pub device: Option<PathBuf>,
    /// Which recorder records the workload (the FUSE disk, or the kernel's dm-log-writes).
    pub recorder: record::Recorder,
    /// Strategies, budget, workers, timeouts, output and scratch directories, shortcuts.
    pub explore: Exploration,
    /// Check this recorded trace directory instead of recording (`--trace`).
    pub trace: Option<PathBuf>,
    /// Also save the recorded trace directory here (`--save-trace`).
    pub save_trace: Option<PathBuf>,
    /// Check only shard `I` of `N` (0-based `I`) of the crash states (`--shard I/N`).
    pub shard: Option<(usize, usize)>,
    /// Record this workload instead of the property's own (`bob run --workload FILE`,
    /// `bob explore`). The cell is then named after the workload, and the workload's own
    /// `property` (none: every durability promise) judges it; `property` is ignored.
    pub workload: Option<workloads::Workload>,
    /// Continue an interrupted run of this cell from its journal (`--resume`).
    pub resume: bool,
    /// Drain schedules to record the workload under (each its own recording); those the
    /// configuration does not support are skipped (see [`FsConfig::schedules`]).
    pub schedules: Vec<Schedule>,
    /// How many times each drain schedule is recorded (`--recordings`): the cell's states
    /// are the union of every recording's, and each schedule says in how many of its
    /// recordings a violation appeared.
    pub recordings: Recordings,
    /// What earlier runs saw of each schedule (`--flip-history`): under `--recordings
    /// auto`, a schedule it shows flipping is recorded as many times as its rate needs,
    /// and marked racy on the kernel it flipped on (see [`flip_history`]).
    pub flip_history: Option<std::sync::Arc<FlipHistory>>,
    /// The disk models to judge the cell under (at least one; all with the same FUA
    /// model): one cell each, from the same recordings, with states common to several
    /// models mounted once.
    pub disk_models: Vec<crash::DiskModel>,
    /// The made file systems of the run this cell belongs to (a table's), when
    /// `explore.speed.shared_setup`; `None`: the cell keeps its own, shared by its
    /// schedules.
    pub setup_cache: Option<std::sync::Arc<record::SetupCache>>,
}

impl RunOptions {
    /// Refuses options that cannot be run as asked: shards of a recording made afresh
    /// ([`Error::ShardsNeedSavedTraces`]).
    pub fn validate(&self) -> Result<(), Error> {
        match (self.shard, &self.trace) {
            (Some(_), None) => Err(Error::ShardsNeedSavedTraces),
            _ => Ok(()),
        }
    }

    /// How many recordings `--recordings auto` makes of `schedule` from the start: what
    /// the flip history asks for a schedule it saw flip; `None`, once.
    pub(crate) fn settling_recordings(&self, schedule: Schedule) -> Option<usize> {
        let history = self.flip_history.as_deref()?;
        history.recordings_for(self.config.name, self.cell_name(), schedule.name())
    }

    /// The name of the cell's row: the workload's (with `workload`) or the property's.
    pub(crate) fn cell_name(&self) -> &str {
        match &self.workload {
            Some(w) => &w.name,
            None => self.property.name(),
        }
    }
}

/// Reads a workload file (the JSON of a [`workloads::Workload`], as `bob explore` writes
/// them and every witness's sidecar holds) and checks that the model can run it: setup,
/// ops and drain.
pub fn load_workload(path: &Path) -> Result<workloads::Workload, Error> {
    let bad = |why: String| Error::Invalid(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::Io { path: path.to_owned(), source })?;
    let w: workloads::Workload =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a workload: {e}")))?;
    if w.name.is_empty() || w.name.contains('/') || w.name.starts_with('.') {
        return Err(bad(format!("{:?}: the name must be a plain file name", w.name)));
    }
    let states = workloads::model_states(&w);
    if states.len() != w.ops.len() + 1 {
        return Err(bad(format!("op {} does not model", states.len() - 1)));
    }
    Ok(w)
}

/// Parses `I/N` (1-based I, as CI matrices number jobs) into a 0-based shard.
pub fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("{text:?}: expected I/N with 1 <= I <= N, e.g. 2/4");
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if n == 0 || i == 0 || i > n {
        return Err(bad());
    }
    Ok((i - 1, n))
}

/// Which shard a state with this content digest belongs to. Sharding by content (not by
/// position) sends identical states to the same shard, so shards' unique counts add up to
/// the unsharded run's.
fn shard_of(digest: &[u8; 32], count: usize) -> usize {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(first) % count as u64) as usize
}

/// Releases what killed bob processes left: what they registered (mounts, loop devices,
/// FUSE disks, scratch directories: [`registry::reclaim_dead`]) and their block-tracepoint
/// instances, which live in tracefs rather than under a scratch directory.
pub fn reclaim_dead() -> registry::Reclaimed {
    let mut reclaimed = registry::reclaim_dead();
    let (instances, failures) = record::tracefs::reclaim_dead_instances();
    reclaimed.tracefs_instances = instances;
    reclaimed.failures.extend(failures);
    reclaimed
}

/// Progress callbacks for long work.
pub trait Progress: Sync {
    /// A new phase starts (`recording`, `checking`).
    fn phase(&self, name: &str, total: usize);
    /// One more unique state checked.
    fn state_done(&self, done: usize, total: usize);
}

/// Progress that reports nothing.
pub struct Quiet;
impl Progress for Quiet {
    fn phase(&self, _: &str, _: usize) {}
    fn state_done(&self, _: usize, _: usize) {}
}

/// A scratch directory, registered as this process's (see
/// [`crate::device::registry`]) while it exists. On drop everything below it is released
/// (normally the guards already did) and it is removed.
pub(crate) struct WorkDir {
    dir: Option<PathBuf>,
}

/// Why a [`WorkDir`] could not be made: the path that failed (the scratch directory's
/// parent, or bob's state directory where it is registered) and the OS error.
#[derive(Debug)]
pub(crate) struct WorkDirError {
    /// The directory that could not be made or written.
    pub path: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

impl WorkDir {
    /// Creates `bob-XXXX` under `parent` (default: the temp dir) and registers it. A
    /// directory that cannot be registered is removed again.
    pub fn new(parent: Option<&Path>) -> Result<WorkDir, WorkDirError> {
        let parent_path = || parent.map_or_else(std::env::temp_dir, Path::to_owned);
        let mut b = tempfile::Builder::new();
        b.prefix("bob-");
        let dir = match parent {
            Some(p) => b.tempdir_in(p),
            None => b.tempdir(),
        }
        .map_err(|source| WorkDirError { path: parent_path(), source })?;
        registry::register(dir.path())
            .map_err(|source| WorkDirError { path: registry::state_dir(), source })?;
        Ok(WorkDir { dir: Some(dir.keep()) })
    }
    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.as_deref().unwrap_or(Path::new("/nonexistent"))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let mut out = registry::Reclaimed::default();
            registry::release_dir(&dir, &mut out);
            for failure in &out.failures {
                eprintln!("bob: cleanup: {failure}");
            }
            if out.failures.is_empty() {
                registry::unregister(&dir);
            }
        }
    }
}

/// A [`WorkDir`] under `scratch` (default: the temp dir), failing as a run error that
/// names the directory.
fn scratch_dir(scratch: Option<&Path>) -> Result<WorkDir, Error> {
    WorkDir::new(scratch).map_err(|e| Error::Io { path: e.path, source: e.source })
}

/// One drain schedule's recording of a cell: its subject (cut under the disk model being
/// judged), its journal and its scratch directory.
struct ScheduleRecording {
    subject: Subject,
    sidecar: crate::trace::sidecar::Sidecar,
    journal: check::Journal,
    scratch: PathBuf,
    /// Its label: the schedule, numbered from its second recording on (`syncfs.2`), or
    /// `trace` for a trace without one.
    name: String,
    trace_digest: String,
    /// Where its file system came from; `None` when the trace was loaded, not recorded.
    setup: Option<record::SetupSource>,
}

/// One recording's crash states under one disk model, checked: the results and their
/// positions in its full (unsharded) state list.
struct Part {
    results: Vec<check::StateResult>,
    positions: Vec<usize>,
    /// Length of its full state list (before sharding).
    generated: usize,
    /// Distinct states the state cap left out of that list.
    left_out: usize,
    /// States of that list not checked: a second or later recording of a schedule is
    /// checked only until its first violation (see [`check_schedule`]).
    unchecked: usize,
}

/// The schedules a cell records: those asked for that the configuration supports, in
/// [`Schedule::ALL`]'s order.
pub(crate) fn cell_schedules(config: &FsConfig, asked: &[Schedule]) -> Vec<Schedule> {
    let supported = config.schedules();
    Schedule::ALL.iter().copied().filter(|s| asked.contains(s) && supported.contains(s)).collect()
}

/// The error of a cell none of whose asked schedules its configuration supports.
fn no_schedule(opts: &RunOptions) -> Error {
    let names = |list: &[Schedule]| list.iter().map(|s| s.name()).collect::<Vec<_>>().join(",");
    Error::NoSchedule {
        config: opts.config.name.into(),
        asked: names(&opts.schedules),
        supported: names(&opts.config.schedules()),
    }
}

/// Records (or loads), explores and checks one cell, once per drain schedule, under each
/// of `opts.disk_models`, and writes the witness of each model's first failure over the
/// union of the schedules' states. One cell per disk model, in order.
pub fn run_cell(
    opts: &RunOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Vec<Cell>, Error> {
    opts.validate()?;
    let recorded = record_cell(opts, progress, cancel)?;
    let mut cells = check_cell(recorded, progress, cancel)?;
    // Each cell names the kernel its states were checked on, so a cell read on its own
    // (`bob run --format json`, a witness's report) says it, in a guest as on the host.
    let kernel = crate::host::kernel_release();
    for cell in &mut cells {
        cell.kernel = Some(kernel.clone());
    }
    Ok(cells)
}

/// A cell whose recordings are made (or loaded): what checking it needs. A table makes
/// the next cell's while it checks the current one (see [`record_cell`]).
pub(crate) struct CellRecordings {
    /// The cell's options, with the setup cache it uses.
    opts: RunOptions,
    /// Its scratch directory (released when the cell is checked).
    work: WorkDir,
    recs: Vec<ScheduleRecording>,
    models: Vec<crash::DiskModel>,
    cell_dir: PathBuf,
    run_dir: PathBuf,
    /// How long recording took.
    recorded: std::time::Duration,
}

impl CellRecordings {
    /// The cell's options.
    pub(crate) fn options(&self) -> &RunOptions {
        &self.opts
    }
}

/// The first half of [`run_cell`]: the cell's scratch directory and journal, and each
/// drain schedule's recording (or saved trace, or the trace of its journal).
pub(crate) fn record_cell(
    opts: &RunOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<CellRecordings, Error> {
    let started = Instant::now();
    let models: Vec<crash::DiskModel> = if opts.disk_models.is_empty() {
        vec![crash::DiskModel::default()]
    } else {
        opts.disk_models.clone()
    };
    let work = scratch_dir(opts.explore.scratch.as_deref())?;
    // Without a run's cache the cell keeps one of its own: its schedules share mkfs.
    let opts = if opts.explore.speed.shared_setup && opts.setup_cache.is_none() {
        let cache = record::SetupCache::new(work.path().join("setup"));
        RunOptions { setup_cache: Some(std::sync::Arc::new(cache)), ..opts.clone() }
    } else {
        opts.clone()
    };

    // The cell's journal: per schedule, its trace and every result as it is reached, so
    // that a killed run resumes (`--resume`) without recording again or losing a verdict.
    // Removed when the cell completes with every state checked.
    let cell_dir = cell_dir(&opts);
    let run_dir = cell_dir.join("run");
    if !opts.resume || opts.trace.is_some() {
        // An old journal left in place would be resumed as if it were this run's.
        match std::fs::remove_dir_all(&run_dir) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Io { path: run_dir, source });
            }
            _ => {}
        }
    }
    // Each recording: its schedule, its number, and the saved trace to load instead of
    // recording, if any.
    let planned = match &opts.trace {
        Some(dir) => recordings::saved(dir, &cell_schedules(&opts.config, &opts.schedules)),
        None => {
            let s = cell_schedules(&opts.config, &opts.schedules);
            if s.is_empty() {
                return Err(no_schedule(&opts));
            }
            recordings::fresh(&s, opts.recordings, |s| opts.settling_recordings(s))
        }
    };
    let several = planned.len() > 1;
    let mut recs = Vec::new();
    for p in planned {
        let at = Target { several, disk: models[0], work: &work, run_dir: &run_dir };
        recs.push(record_schedule(&opts, p, &at, progress, cancel)?);
    }
    Ok(CellRecordings { opts, work, recs, models, cell_dir, run_dir, recorded: started.elapsed() })
}

/// The second half of [`run_cell`]: the recorded cell's states checked under each disk
/// model, one cell each.
pub(crate) fn check_cell(
    recorded: CellRecordings,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Vec<Cell>, Error> {
    let CellRecordings { opts, work, mut recs, models, cell_dir, run_dir, recorded } = recorded;
    let opts = &opts;
    // A cell's time: the recordings (shared) and its own model's checking.
    let mut cells = Vec::with_capacity(models.len());
    // A cell directory's witnesses are its last run's: a witness of an earlier run that
    // this one does not write again (a verdict that now holds, a disk model no longer
    // asked) is removed, never left for `bob explain` to tell as this run's. A directory
    // the run reads its trace from is left alone.
    let own_trace = |dir: &Path| opts.trace.as_deref().is_some_and(|t| same_dir(t, dir));
    let dirs: Vec<PathBuf> = models
        .iter()
        .map(|d| if models.len() > 1 { cell_dir.join(d.slug()) } else { cell_dir.clone() })
        .collect();
    for stale in stale_model_dirs(&cell_dir, &dirs) {
        if !own_trace(&stale) {
            witness::remove_stale(&stale)?;
            // Only if empty: what else is in it is not bob's to remove.
            let _ = std::fs::remove_dir(&stale);
        }
    }
    if models.len() > 1 && !own_trace(&cell_dir) {
        witness::remove_stale(&cell_dir)?;
    }
    for (m, &disk) in models.iter().enumerate() {
        let checking = Instant::now();
        let mut parts = Vec::with_capacity(recs.len());
        for k in 0..recs.len() {
            let schedule = recs[k].subject.schedule;
            let later = recs[..k].iter().any(|r| r.subject.schedule == schedule);
            let rec = &mut recs[k];
            rec.subject.set_disk(disk);
            parts.push(check_schedule(opts, rec, later, progress, cancel)?);
        }
        if m == 0 {
            // The schedules `--recordings auto` records again, judged by the first
            // model's verdicts; the later models check every recording from the start.
            let at = Target { several: true, disk, work: &work, run_dir: &run_dir };
            recordings::settle(opts, &mut recs, &mut parts, &at, progress, cancel)?;
        }
        let dir = if models.len() > 1 { cell_dir.join(disk.slug()) } else { cell_dir.clone() };
        let mut cell = assemble(opts, &recs, &parts, &dir, &work)?;
        cell.seconds = (recorded + checking.elapsed()).as_secs_f64();
        cells.push(cell);
    }
    drop(recs);
    // A cell with states bob could not check keeps its traces and journal, so that
    // `--resume` checks only those states, of the same recordings.
    if cells.iter().all(|c| c.counts.infra_error == 0) {
        // Disk space only: a journal left behind is removed by the next run, and a
        // `--resume` of it finds every state already checked.
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    drop(work);
    Ok(cells)
}

/// One cell from the checked parts of its recordings under one disk model (`recs[k]`'s
/// subject is cut under it): the union's verdict and counts, each schedule's share, what
/// was seen beside the verdict, the promises judged, and the witness written into `dir`.
fn assemble(
    opts: &RunOptions,
    recs: &[ScheduleRecording],
    parts: &[Part],
    dir: &Path,
    work: &WorkDir,
) -> Result<Cell, Error> {
    let cell = Assembly { opts, recs, parts, union: Union::of(parts), dir, work };
    if !opts.trace.as_deref().is_some_and(|t| same_dir(t, dir)) {
        witness::remove_stale(dir)?;
    }
    let (mut c, witness_index) =
        Cell::of_results(opts.config.name, opts.cell_name(), &cell.union.results);
    cell.summarize(&mut c);
    c.states_left_out = parts.iter().map(|p| p.left_out).sum();
    c.states_unchecked = parts.iter().map(|p| p.unchecked).sum();
    cell.add_causes(&mut c);
    cell.add_promises_and_scenarios(&mut c);
    cell.add_schedules(&mut c);
    if let Some(i) = witness_index {
        cell.add_witness(&mut c, i)?;
    }
    cell.add_kernel_crash(&mut c, witness_index)?;
    cell.keep_schedule_traces(&c)?;
    cell.confirm_scenarios(&mut c)?;
    Ok(c)
}

/// The states of a cell's parts as one list: results in schedule order, each state's
/// position offset by the full lists of the schedules before it (the same in every
/// shard).
struct Union {
    results: Vec<check::StateResult>,
    positions: Vec<usize>,
    /// The part each state is of.
    owner: Vec<usize>,
    /// Where each part's states are in the union.
    spans: Vec<std::ops::Range<usize>>,
}

impl Union {
    fn of(parts: &[Part]) -> Union {
        let mut union = Union {
            results: Vec::new(),
            positions: Vec::new(),
            owner: Vec::new(),
            spans: Vec::new(),
        };
        let mut position_base = 0;
        for (k, part) in parts.iter().enumerate() {
            let result_base = union.results.len();
            for (r, &p) in part.results.iter().zip(&part.positions) {
                let mut r = r.clone();
                r.mounted_as += result_base;
                union.results.push(r);
                union.positions.push(position_base + p);
                union.owner.push(k);
            }
            union.spans.push(result_base..union.results.len());
            position_base += part.generated;
        }
        union
    }

    /// The index of the state at `position` in the full list.
    fn at(&self, position: usize) -> Option<usize> {
        self.positions.iter().position(|&q| q == position)
    }
}

/// What assembling one cell reads.
struct Assembly<'a> {
    opts: &'a RunOptions,
    recs: &'a [ScheduleRecording],
    parts: &'a [Part],
    union: Union,
    dir: &'a Path,
    work: &'a WorkDir,
}

impl Assembly<'_> {
    /// The recording of the union's `i`-th state.
    fn rec(&self, i: usize) -> &ScheduleRecording {
        &self.recs[self.union.owner[i]]
    }

    /// The union's `i`-th state's id, named with its schedule.
    fn qualified(&self, i: usize) -> String {
        self.rec(i).subject.qualify(&self.union.results[i].state.id)
    }

    /// The made file systems, the first state bob could not check, and what was seen
    /// beside the verdict.
    fn summarize(&self, cell: &mut Cell) {
        let (results, positions) = (&self.union.results, &self.union.positions);
        cell.disk_model = self.recs.first().map(|r| r.subject.disk).unwrap_or_default();
        let setups = |source| self.recs.iter().filter(|r| r.setup == Some(source)).count();
        cell.setup_made = setups(record::SetupSource::Made);
        cell.setup_reused = setups(record::SetupSource::Reused);
        cell.infra_error = report::first_infra_error(results, |i, _| self.qualified(i));
        for (slot, family) in [
            (&mut cell.other_reorderings, workloads::Family::Ordering),
            (&mut cell.other_durability, workloads::Family::Durability),
        ] {
            *slot = report::BesideFindings::of(results, Some(positions), family);
            // Name the first state with its schedule, as every state id of a cell is named.
            if let Some(b) = slot.as_mut() {
                if let Some(i) = b.first_position.and_then(|p| self.union.at(p)) {
                    b.first_state = self.qualified(i);
                }
            }
        }
    }

    /// Mount failures and read errors by cause, each schedule's against its own image.
    fn add_causes(&self, cell: &mut Cell) {
        for ((rec, part), span) in self.recs.iter().zip(self.parts).zip(&self.union.spans) {
            let regions =
                rec.subject.regions_if_unmountable(&part.results, self.opts.explore.timeouts.fsck);
            let mut causes = report::summarize_causes(
                &part.results,
                &self.union.positions[span.clone()],
                &rec.subject,
                &regions,
            );
            if let Some(s) = rec.subject.label() {
                causes.label_states(&s);
            }
            causes.add_to(cell);
        }
    }

    /// The promises judged (merged over the schedules) and the scenarios seen.
    fn add_promises_and_scenarios(&self, cell: &mut Cell) {
        for (k, (rec, part)) in self.recs.iter().zip(self.parts).enumerate() {
            let due = report::PromiseCoverage::of(&rec.subject.workload, &part.results, |r| {
                rec.subject.durable_ops(&r.state.id)
            });
            if k == 0 {
                cell.promises = due;
            } else {
                report::PromiseCoverage::merge(&mut cell.promises, &due);
            }
        }
        cell.apply_promise_coverage();
        cell.shard = self.opts.shard.map(|(i, n)| format!("{}/{}", i + 1, n));
        cell.scenarios = report::summarize_scenarios(&self.union.results, &self.union.positions);
        for sc in &mut cell.scenarios {
            if let Some(i) = sc.witness_position.and_then(|p| self.union.at(p)) {
                sc.witness_state = Some(self.qualified(i));
            }
        }
    }

    /// Each schedule's share of the cell (the union of its recordings, and in how many
    /// of them a violation appeared), and the barriers the judged ops' writes spanned
    /// (the most over the schedules).
    fn add_schedules(&self, cell: &mut Cell) {
        let opts = self.opts;
        let mut barriers: Option<(usize, Option<String>)> = None;
        for group in self.schedule_groups() {
            let mut exercised: Option<(usize, Option<String>)> = None;
            for &k in &group {
                let rec = &self.recs[k];
                let e = if opts.workload.is_some() {
                    None
                } else {
                    exercise(opts.property, &rec.subject)
                };
                if let Some((n, why)) = e {
                    if exercised.as_ref().is_none_or(|(m, _)| n > *m) {
                        exercised = Some((n, why));
                    }
                }
            }
            if let Some(share) = self.schedule_share(&group, exercised.as_ref().map(|e| e.0)) {
                cell.schedules.push(share);
            }
            if let Some((n, why)) = exercised {
                if barriers.as_ref().is_none_or(|(m, _)| n > *m) {
                    barriers = Some((n, why));
                }
            }
        }
        if let Some((n, why)) = barriers {
            cell.apply_exercise(Some(n), why);
        }
        cell.update_racy();
    }

    /// The recordings of each schedule, as indices of `recs` (side by side, in order).
    fn schedule_groups(&self) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (k, rec) in self.recs.iter().enumerate() {
            match groups.last_mut() {
                Some(g) if self.recs[g[0]].subject.schedule == rec.subject.schedule => g.push(k),
                _ => groups.push(vec![k]),
            }
        }
        groups
    }

    /// One schedule's share over its recordings `group` (none for a trace without a
    /// schedule): the union's verdict and counts, its first failing state, and with more
    /// than one recording, which of them showed a violation.
    fn schedule_share(&self, group: &[usize], op_barriers: Option<usize>) -> Option<ScheduleCell> {
        let first = &self.recs[group[0]];
        let schedule = first.subject.schedule?.name().to_owned();
        // The group's states as one list: results re-based, positions offset by the full
        // lists of its recordings before.
        let (mut results, mut positions, mut owner) = (Vec::new(), Vec::new(), Vec::new());
        let mut position_base = 0;
        for &k in group {
            let (part, base) = (&self.parts[k], results.len());
            for (r, &p) in part.results.iter().zip(&part.positions) {
                let mut r = r.clone();
                r.mounted_as += base;
                results.push(r);
                positions.push(position_base + p);
                owner.push(k);
            }
            position_base += part.generated;
        }
        let (c, first_index) =
            Cell::of_results(self.opts.config.name, self.opts.cell_name(), &results);
        let several = group.len() > 1;
        let violated_in: Vec<usize> = group
            .iter()
            .filter(|&&k| recordings::violated(&self.parts[k]))
            .map(|&k| self.recs[k].subject.recording)
            .collect();
        let earlier_runs = self.opts.flip_history.as_deref().and_then(|history| {
            history.flipped_before(
                &crate::host::kernel_release(),
                self.opts.config.name,
                self.opts.cell_name(),
                &first.subject.disk.slug(),
                &schedule,
            )
        });
        let mut share = ScheduleCell {
            schedule,
            trace_digest: first.trace_digest.clone(),
            verdict: c.verdict,
            states_explored: c.states_explored,
            states_unique: c.states_unique,
            counts: c.counts.clone(),
            first_state: first_index
                .map(|i| self.recs[owner[i]].subject.qualify(&results[i].state.id)),
            first_position: first_index.map(|i| positions[i]),
            op_barriers,
            fua_writes: count_entries(&first.subject.trace, |e| {
                matches!(e.kind(), EntryKind::Write { fua: true, .. }) && e.nr_sectors > 0
            }),
            fua_postflushes: count_entries(&first.subject.trace, |e| e.is_fua_postflush()),
            recordings: group.len(),
            racy: false,
            violated_in: if several { violated_in } else { Vec::new() },
            more_trace_digests: group[1..]
                .iter()
                .map(|&k| self.recs[k].trace_digest.clone())
                .collect(),
            earlier_runs,
        };
        share.update_racy();
        Some(share)
    }

    /// The witness of the cell's verdict, the union's `i`-th state: replayed
    /// independently, and written into the cell's directory.
    fn add_witness(&self, cell: &mut Cell, i: usize) -> Result<(), Error> {
        let (opts, dir) = (self.opts, self.dir);
        let rec = self.rec(i);
        let r = &self.union.results[i];
        match confirm(&rec.subject, &r.state, opts, self.work)? {
            Ok(replayed) => cell.confirmed = Some(replayed == r.check.outcome.name()),
            Err(why) => cell.confirm_error = Some(why),
        }
        let record = witness::StateRecord::of(r, &rec.subject, Some(opts.cell_name().into()));
        witness::write(dir, &rec.subject, &rec.sidecar, &record, &r.check)?;
        cell.witness = Some(dir.display().to_string());
        cell.story = Some(format!("{} (state {})", record.story, record.id));
        cell.discrepancy = r.check.discrepancy.clone();
        cell.witness_state = Some(record.id);
        cell.witness_position = Some(self.union.positions[i]);
        cell.witness_schedule = rec.subject.schedule.map(|s| s.name().to_owned());
        if let Some(pair) = &r.check.pair {
            cell.earlier_op = Some(pair.earlier_op.clone());
            cell.later_op = Some(pair.later_op.clone());
        }
        Ok(())
    }

    /// A kernel crash is evidence of its own (the console's panic), whatever else the
    /// cell shows: its first state gets a witness beside the cell's. It is not replayed
    /// again here: recovering it is what crashes the kernel, and the guest already saw it
    /// twice when other states were in flight.
    fn add_kernel_crash(&self, cell: &mut Cell, witness_index: Option<usize>) -> Result<(), Error> {
        let crashed = self
            .union
            .results
            .iter()
            .position(|r| r.check.outcome.kind() == check::OutcomeKind::KernelCrash)
            .filter(|&i| Some(i) != witness_index);
        if let Some(i) = crashed {
            let (rec, r) = (self.rec(i), &self.union.results[i]);
            let to = self.dir.join("kernel-crash");
            let cell_name = Some(self.opts.cell_name().into());
            let record = witness::StateRecord::of(r, &rec.subject, cell_name);
            witness::write(&to, &rec.subject, &rec.sidecar, &record, &r.check)?;
            cell.kernel_crash_witness = Some(to.display().to_string());
        }
        Ok(())
    }

    /// The witness keeps the traces of the other schedules with a failing state of their
    /// own (a schedule's first state, a scenario's first silent state), so that each
    /// replays from it with `--state`.
    fn keep_schedule_traces(&self, cell: &Cell) -> Result<(), Error> {
        let dir = self.dir;
        // An earlier run's traces would sit beside this witness as if they were its own.
        let old = dir.join("schedules");
        match std::fs::remove_dir_all(&old) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Io { path: old, source });
            }
            _ => {}
        }
        // Traces are named by their states' prefix: the schedule, and the recording from
        // the second on (`syncfs.2`).
        let label = |id: Option<&str>| match id.map(check::split_schedule) {
            Some((Some(label), _)) => Some(label.to_owned()),
            _ => None,
        };
        let Some(own) = cell.witness.as_ref().and(label(cell.witness_state.as_deref())) else {
            return Ok(());
        };
        let mut wanted: Vec<String> =
            cell.schedules.iter().filter_map(|s| label(s.first_state.as_deref())).collect();
        wanted.extend(cell.scenarios.iter().filter_map(|sc| label(sc.witness_state.as_deref())));
        for rec in self.recs {
            let Some(name) = rec.subject.label() else { continue };
            if name != own && wanted.contains(&name) {
                let to = witness::schedule_dir(dir, &name);
                witness::save_trace(&to, &rec.subject, &rec.sidecar)?;
            }
        }
        Ok(())
    }

    /// Each scenario's first silent state is replayed independently too: the
    /// per-scenario table prints only crosses that reproduce.
    fn confirm_scenarios(&self, cell: &mut Cell) -> Result<(), Error> {
        for sc in &mut cell.scenarios {
            let Some(i) = sc.witness_position.and_then(|p| self.union.at(p)) else {
                continue;
            };
            // A replay that could not run leaves the scenario unconfirmed (`None`), not
            // denied.
            let state = &self.union.results[i].state;
            let again = confirm_check(&self.rec(i).subject, state, self.opts, self.work)?;
            sc.confirmed = again.ok().map(|again| {
                again.scenarios.iter().any(|m| m.scenario == sc.scenario && !m.silent.is_empty())
            });
        }
        Ok(())
    }
}

/// Where a cell's recordings go: whether it has several (`--save-trace` then writes one
/// directory each), the disk model they are first cut under, the cell's scratch
/// directory and its journal's.
pub(crate) struct Target<'a> {
    several: bool,
    disk: crash::DiskModel,
    work: &'a WorkDir,
    run_dir: &'a Path,
}

/// Records (or loads from the journal, or from a `--trace` directory) one recording of the
/// cell's workload under its drain schedule, cut under `at.disk`.
fn record_schedule(
    opts: &RunOptions,
    planned: recordings::Planned,
    at: &Target,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<ScheduleRecording, Error> {
    let recordings::Planned { schedule, recording, saved } = planned;
    let name = match schedule {
        Some(s) => check::recording_label(s.name(), recording),
        None => "trace".to_owned(),
    };
    // Each recording its own scratch (base image, mounts) and journal.
    let scratch = at.work.path().join(&name);
    std::fs::create_dir_all(&scratch)
        .map_err(|source| Error::Io { path: scratch.clone(), source })?;
    let journal_dir = at.run_dir.join(&name);
    let resuming = opts.resume && journal_dir.join("trace.json").exists() && saved.is_none();
    let trace_source = if resuming { Some(journal_dir.clone()) } else { saved };
    let mut setup = None;
    let (mut subject, sidecar) = match &trace_source {
        Some(dir) => {
            let (subject, sidecar) = witness::load_subject(dir)?;
            // The directory name chose the schedule; the sidecar must agree.
            if let (Some(s), Some(named)) = (schedule, subject.schedule) {
                if s != named {
                    return Err(witness::Error::Invalid {
                        path: dir.join("trace.json"),
                        message: format!("recorded under the {named} schedule, not {s}"),
                    }
                    .into());
                }
            }
            (subject, sidecar)
        }
        None => {
            let (mut subject, mut sidecar, made) =
                record_fresh(opts, schedule, at.disk, &scratch, progress)?;
            subject.recording = recording;
            sidecar.recording = (recording > 1).then_some(recording);
            setup = Some(made);
            (subject, sidecar)
        }
    };
    if let Some(dir) = &opts.save_trace {
        // One recording saves where asked; several save one directory each below it.
        let dir = match schedule {
            Some(_) if at.several => dir.join(&name),
            _ => dir.clone(),
        };
        witness::save_trace(&dir, &subject, &sidecar)?;
    }
    if !resuming {
        witness::save_trace(&journal_dir, &subject, &sidecar)?;
    }
    subject.set_disk(at.disk);
    let journal = check::Journal::open(&journal_dir.join("results.jsonl"))?;
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(check::Error::Interrupted.into());
    }
    let trace_digest = subject.trace.digest();
    Ok(ScheduleRecording { subject, sidecar, journal, scratch, name, trace_digest, setup })
}

/// Records the cell's workload (the property's, or `opts.workload`) under one drain
/// schedule on a fresh file system in `scratch`, cut under `disk`.
fn record_fresh(
    opts: &RunOptions,
    schedule: Option<Schedule>,
    disk: crash::DiskModel,
    scratch: &Path,
    progress: &dyn Progress,
) -> Result<(Subject, crate::trace::sidecar::Sidecar, record::SetupSource), Error> {
    let base_workload = match &opts.workload {
        Some(w) => w.clone(),
        None => workloads::workload_for(opts.property, &opts.config.workload_params()),
    };
    let workload = match schedule {
        Some(s) => s.apply(&base_workload),
        None => base_workload,
    };
    let name = schedule.map(|s| s.name()).unwrap_or("trace");
    progress.phase(&format!("recording {name}"), 0);
    let mut recording = record::record(&RecordRequest {
        config: &opts.config,
        workload: &workload,
        device: opts.device.as_deref(),
        work_dir: scratch,
        timeouts: opts.explore.timeouts,
        setup: opts.setup_cache.as_deref().filter(|_| opts.explore.speed.shared_setup),
        recorder: opts.recorder,
    })?;
    recording.sidecar.schedule = schedule.map(|s| s.name().to_owned());
    let made = recording.setup;
    let (subject, sidecar) = subject_of(opts.config.clone(), workload, recording, schedule, disk)?;
    Ok((subject, sidecar, made))
}

/// Generates the crash states of one recording under its subject's disk model and checks
/// them (this shard's); its journal skips what an earlier disk model already mounted.
/// A schedule's second and later recordings in the cell (`later_recording`) are there to
/// say whether the violation of the first comes back (`violated in k of n recordings`),
/// so each is checked only until its first violation: the rest of its states could add
/// to the counts, never to the verdict or to k. Unsharded runs only: shards would each
/// stop at a violation of their own.
fn check_schedule(
    opts: &RunOptions,
    rec: &ScheduleRecording,
    later_recording: bool,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Part, Error> {
    let (subject, name) = (&rec.subject, rec.name.as_str());

    // The states are streamed into the engine; this shard's are those whose content
    // digest falls to it. Positions in the full list are kept through sharding so that
    // witnesses compare across shards.
    let mut generated = 0;
    let mut positions: Vec<usize> = Vec::new();
    let shard_builder =
        opts.shard.map(|_| crash::OverlayBuilder::new(&subject.trace, &subject.epochs));
    let all_states = subject.crash_states(&opts.explore.strategies, &opts.explore.limits);
    let left_out = all_states.left_out;
    let mut states = all_states.states.enumerate().filter_map(|(position, state)| {
        generated = position + 1;
        if let (Some((index, count)), Some(builder)) = (opts.shard, &shard_builder) {
            let digest = crash::pm_states::digest(
                builder.state(&state.id).digest(&subject.trace),
                subject.pm.as_deref(),
                state.id.pm.as_ref(),
            );
            if shard_of(&digest, count) != index {
                return None;
            }
        }
        positions.push(position);
        Some(state)
    });

    // The number of states is known once the stream ends: the bar grows until then.
    progress.phase(&format!("checking {name}"), 0);
    let until_violation = later_recording && opts.shard.is_none();
    let engine = EngineOptions {
        jobs: opts.explore.jobs,
        timeouts: opts.explore.timeouts,
        speed: opts.explore.speed,
        journal: Some(&rec.journal),
        progress: &|d, t| progress.state_done(d, t),
        cancel,
        until_violation,
        ..EngineOptions::new(&rec.scratch)
    };
    let results = check::run_states(subject, &mut states, &engine)?;
    // After a stop at a violation: the rest of the stream is generated (not checked), so
    // that the positions of the recordings after this one are those of a full run.
    states.by_ref().for_each(drop);
    drop(states);
    positions.truncate(results.len());
    let unchecked = if until_violation { generated - results.len() } else { 0 };
    Ok(Part { results, positions, generated, left_out, unchecked })
}

/// For the properties that claim to test an op crossing commits (the multi-block ones):
/// how many barriers the judged ops' own writes spanned in `subject`'s trace (the least
/// over those ops), and when that is none, which op and why. `None` for other properties.
pub(crate) fn exercise(property: Property, subject: &Subject) -> Option<(usize, Option<String>)> {
    exercise_of(property, &subject.workload, &subject.trace, &subject.epochs)
}

/// [`exercise`] of a workload's trace and its epochs.
fn exercise_of(
    property: Property,
    workload: &workloads::Workload,
    trace: &crate::trace::Trace,
    epochs: &[crash::Epoch],
) -> Option<(usize, Option<String>)> {
    if !matches!(property, Property::MultiBlockAppend | Property::MultiBlockPrefixAppend) {
        return None;
    }
    let gen = workload.gen();
    let mut least: Option<(usize, Option<String>)> = None;
    for (k, op) in workload.ops.iter().enumerate() {
        if op.data_range().is_none() {
            continue;
        }
        let found = crash::op_epochs(trace, epochs, gen, k as u32);
        let (n, why) = match found {
            Some(e) if e.barriers() > 0 => (e.barriers(), None),
            Some(e) => (
                0,
                Some(format!(
                    "op {k} ({op}): its {} write(s) all fell into epoch {} of {}; it crossed \
                     no commit, so the crash states cannot test it",
                    e.writes,
                    e.first,
                    epochs.len()
                )),
            ),
            None => (
                0,
                Some(format!(
                    "op {k} ({op}): no write of the trace carries its data; it crossed no commit"
                )),
            ),
        };
        if least.as_ref().is_none_or(|(m, _)| n < *m) {
            least = Some((n, why));
        }
    }
    least
}

/// Whether two paths name the same directory (both resolved; a path that does not
/// resolve is compared as written).
fn same_dir(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    real(a) == real(b)
}

/// The witness directories of disk models (`awu-512`, `awu-4096-fua-barrier`) below
/// `cell_dir`, and `cell_dir` itself, that hold a witness and are not among `dirs`, the
/// ones this run writes.
fn stale_model_dirs(cell_dir: &Path, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if cell_dir.join("state.json").is_file() {
        found.push(cell_dir.to_owned());
    }
    if let Ok(entries) = std::fs::read_dir(cell_dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with("awu-") && e.path().join("state.json").is_file() {
                found.push(e.path());
            }
        }
    }
    found.retain(|d| !dirs.contains(d));
    found
}

/// Where a cell's witness and journal live: `<out>/<config>/<property>[/shard-I-of-N]`.
pub(crate) fn cell_dir(opts: &RunOptions) -> PathBuf {
    let mut dir = opts.explore.out_dir.join(opts.config.name).join(opts.cell_name());
    if let Some((i, n)) = opts.shard {
        dir = dir.join(format!("shard-{}-of-{n}", i + 1));
    }
    dir
}

/// Checks the witness state again, independently of the engine: a fresh image file
/// written from the trace (not the COW view), a fresh loop device and mount. Returns the
/// outcome's name, which must equal the engine's for the cross to stand; `Err(why)` inside
/// when bob's own machinery failed twice (the cross then stands unconfirmed, and says so).
fn confirm(
    subject: &Subject,
    state: &crash::CrashState,
    opts: &RunOptions,
    work: &WorkDir,
) -> Result<Result<&'static str, String>, Error> {
    Ok(confirm_check(subject, state, opts, work)?.map(|c| c.outcome.name()))
}

/// [`confirm`]'s whole check of the state. An infrastructure failure (see
/// [`check::Error::is_infrastructure`]) is retried once on a fresh image, loop device and
/// mount point, as the engine retries a state; a second one is returned as its message,
/// so that one replay that cannot run never ends a table.
fn confirm_check(
    subject: &Subject,
    state: &crash::CrashState,
    opts: &RunOptions,
    work: &WorkDir,
) -> Result<Result<check::StateCheck, String>, Error> {
    let mut attempt = 0;
    loop {
        match confirm_once(subject, state, opts, work, attempt) {
            Ok(c) => return Ok(Ok(c)),
            Err(Error::Check(e)) if e.is_infrastructure() => {
                if attempt == 1 {
                    return Ok(Err(e.to_string()));
                }
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

fn confirm_once(
    subject: &Subject,
    state: &crash::CrashState,
    opts: &RunOptions,
    work: &WorkDir,
    attempt: usize,
) -> Result<check::StateCheck, Error> {
    let image = work.path().join(format!("confirm-{attempt}.img"));
    let mnt = work.path().join(format!("confirm-mnt-{attempt}"));
    std::fs::create_dir_all(&mnt).map_err(|source| Error::Io { path: mnt.clone(), source })?;
    let overlay = crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&state.id);
    crate::image::CrashView::new(subject.base.clone(), subject.trace.clone(), overlay)
        .materialize(&image)
        .map_err(|source| Error::Io { path: image.clone(), source })?;
    let pm_image = check::pm_image_path(&image);
    if let (Some(pm), Some(cut)) = (&subject.pm, &state.id.pm) {
        // The second device, rebuilt as independently as the disk's image.
        std::fs::write(&pm_image, pm.image(cut))
            .map_err(|source| Error::Io { path: pm_image.clone(), source })?;
    }
    let durable = subject.durable_ops(&state.id);
    // In a guest: a state pinned as crashing the kernel is not replayed again, and the
    // replay is logged as in flight (a crash or hang during it is pinned on the state).
    let turn = match check::guest_turn(subject, state) {
        Ok(turn) => turn,
        Err(crashed) => {
            // Scratch in the work directory, as below.
            let _ = std::fs::remove_file(&image);
            let _ = std::fs::remove_file(&pm_image);
            return Ok(*crashed);
        }
    };
    let checked = check::check_image(subject, &image, &mnt, durable, &opts.explore.timeouts);
    drop(turn);
    // Scratch in the work directory, which goes with it if these fail.
    let _ = std::fs::remove_file(&image);
    let _ = std::fs::remove_file(&pm_image);
    Ok(checked?)
}

/// Header notes every table carries, saying which drain schedules each cell's states came
/// from.
pub(crate) fn table_notes_with(configs: &[FsConfig], schedules: &[Schedule]) -> Vec<String> {
    let mut notes = Vec::new();
    if !schedules.is_empty() {
        let names: Vec<&str> = schedules.iter().map(|s| s.name()).collect();
        let research = if configs.iter().any(|c| c.design().is_some()) {
            " The research designs record sync and syncfs only (no page cache to write back)."
        } else {
            ""
        };
        notes.push(format!(
            "Each cell is the union of the crash states of its workload recorded under the \
             drain schedules {} (each its own recording; a state id names its schedule, \
             `syncfs/e3:0-4`; see docs/schedules.md).{research}",
            names.join(", ")
        ));
    }
    if !crate::device::fusedisk::loop_over_direct_io_works() {
        notes.push(
            "This kernel (before 4.16) is recorded through the page cache, as its loop device \
             hangs on a FUSE file opened for direct I/O: a block written twice between two \
             flushes is seen once, with its last contents, so its cells have fewer crash \
             states than a later kernel's would (docs/kernel-build.md)."
                .to_owned(),
        );
    }
    if configs.iter().any(|c| matches!(c.fstype, "ext2" | "ext3")) {
        notes.push(
            "ext2 and ext3 are served by the ext4 driver on this kernel (CONFIG_EXT4_USE_FOR_EXT2)."
                .to_owned(),
        );
    }
    for c in configs {
        if let Err(why) = c.runs_here() {
            notes.push(format!(
                "{}: not available ({}); listed, not passed.",
                c.name,
                why.reason()
            ));
        }
    }
    notes
}

/// The cell for a configuration that cannot run here.
pub fn unavailable_cell(config: &FsConfig, property: Property, reason: &str) -> Cell {
    Cell {
        verdict: CellVerdict::Unavailable,
        unavailable: Some(reason.into()),
        ..Cell::of_results(config.name, property.name(), &[]).0
    }
}

/// The cell of a property that does not apply to a configuration (an osync/dsync
/// property on a file system without them): `not-applicable`, never `held`.
pub fn not_applicable_cell(config: &FsConfig, property: Property) -> Cell {
    Cell {
        verdict: CellVerdict::NotApplicable,
        unavailable: Some(if property.needs_txn() {
            format!(
                "{} has no transactions (begin/commit/abort), which the {} workload runs",
                config.name,
                property.name()
            )
        } else {
            format!(
                "{} has no osync()/dsync(), which the {} workload calls",
                config.name,
                property.name()
            )
        }),
        ..Cell::of_results(config.name, property.name(), &[]).0
    }
}

fn count_entries(
    trace: &crate::trace::Trace,
    pick: impl Fn(&crate::trace::Entry) -> bool,
) -> usize {
    trace.entries.iter().filter(|e| pick(e)).count()
}

/// The subject of a fresh recording of `workload` on `config` (under drain `schedule`,
/// if any), its trace cut under `disk`; and the recording's sidecar. Here rather than in
/// `check`, so that checking never depends on how a trace was recorded.
pub fn subject_of(
    config: FsConfig,
    workload: workloads::Workload,
    recording: record::Recording,
    schedule: Option<Schedule>,
    disk: crash::DiskModel,
) -> Result<(Subject, crate::trace::sidecar::Sidecar), check::Error> {
    let recorded = check::SubjectParts {
        config,
        workload,
        observed: recording.observed,
        trace: recording.trace,
        spans: recording.sidecar.ops.clone(),
        schedule,
        base_image: recording.base_image,
    };
    let subject = Subject::load(recorded, disk)?;
    Ok((subject, recording.sidecar))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::BaseImage;
    use crate::trace::{Entry, Trace};
    use std::sync::Arc;
    use workloads::{Params, Property};

    /// A stamped write of op `op`'s data: `len` bytes of file 7 at byte `offset`.
    fn op_write(w: &workloads::Workload, sector: u64, op: u32, offset: u64, len: usize) -> Entry {
        let mut buf = vec![0u8; len];
        workloads::stamp::fill(&mut buf, 7, offset, op, w.gen());
        Entry::write(sector, buf)
    }

    fn held_cell() -> Cell {
        Cell::of_results("ext4-ordered", "multi-block-prefix-append", &[]).0
    }

    #[test]
    fn an_op_whose_writes_fall_in_one_epoch_is_not_exercised() {
        let p = Property::MultiBlockPrefixAppend;
        let w = workloads::workload_for(p, &Params::default());
        // The append's data in two requests, then unrelated writes, all before the first
        // flush: the op never crossed a barrier.
        let trace = Trace::new(
            512,
            vec![
                Entry::mark("op 0 begin"),
                op_write(&w, 1000, 0, 40960, 8192),
                op_write(&w, 1016, 0, 49152, 4096),
                Entry::write(8, vec![1; 4096]),
                Entry::mark("op 0 end"),
                Entry::flush(),
                Entry::write(16, vec![2; 4096]),
                Entry::flush(),
            ],
        );
        let epochs = crash::epochs(&trace, &crash::DiskModel::STUDY);
        let (n, why) = exercise_of(p, &w, &trace, &epochs).expect("a multi-block property");
        assert_eq!(n, 0);
        let why = why.expect("a reason");
        assert!(
            why.contains("op 0") && why.contains("2 write(s)") && why.contains("epoch 0"),
            "{why}"
        );
        let mut cell = held_cell();
        assert_eq!(cell.verdict, CellVerdict::Held);
        cell.apply_exercise(Some(n), Some(why.clone()));
        assert_eq!(cell.verdict, CellVerdict::NotExercised, "never held");
        assert_eq!(cell.verdict.name(), "not-exercised");
        assert_eq!(cell.verdict.letter(), "N");
        assert_eq!(cell.op_barriers, Some(0));
        assert_eq!(cell.not_exercised.as_deref(), Some(why.as_str()));
        let json = serde_json::to_value(&cell).unwrap();
        assert_eq!(json["verdict"], "not-exercised");
        assert_eq!(json["op_barriers"], 0);
        assert!(cell.to_text().contains("not exercised: op 0"), "{}", cell.to_text());

        // A violation found anyway stays a violation.
        let mut violated = held_cell();
        violated.verdict = CellVerdict::Violated;
        violated.apply_exercise(Some(0), None);
        assert_eq!(violated.verdict, CellVerdict::Violated);
    }

    #[test]
    fn state_ids_name_their_schedule_and_bare_ids_mean_the_traces_own() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base.img");
        std::fs::write(&base, vec![0u8; 1 << 16]).unwrap();
        let trace = Arc::new(Trace::new(
            512,
            vec![Entry::write(0, vec![1; 1024]), Entry::flush(), Entry::write(8, vec![2; 512])],
        ));
        let p = Property::SingleBlockAppend;
        let subject = |schedule| Subject {
            config: crate::fs::by_name("ext4-ordered").unwrap(),
            workload: workloads::workload_for(p, &Params::default()),
            observed: Default::default(),
            epochs: crash::epochs(&trace, &crash::DiskModel::STUDY),
            trace: trace.clone(),
            spans: Vec::new(),
            schedule,
            recording: 1,
            disk: crash::DiskModel::STUDY,
            pm: None,
            base: Arc::new(BaseImage::open(&base).unwrap()),
        };
        let syncfs = subject(Some(Schedule::Syncfs));
        let id = syncfs.state_id("syncfs/e0:0").unwrap();
        assert_eq!(id, crash::StateId::whole(0, [0]));
        assert_eq!(syncfs.qualify(&id), "syncfs/e0:0");
        assert_eq!(syncfs.state_id("e0:0").unwrap(), id, "a bare id is the trace's own");
        let other = syncfs.state_id("sync/e0:0").unwrap_err().to_string();
        assert!(other.contains("syncfs") && other.contains("sync/e0:0"), "{other}");
        assert!(syncfs.state_id("fsync/e0:0").is_err());
        assert!(syncfs.state_id("syncfs/e5:0").is_err(), "still validated against the trace");
        // A later recording of the schedule names its number; the first's ids do not.
        let mut second = subject(Some(Schedule::Syncfs));
        second.recording = 2;
        assert_eq!(second.qualify(&id), "syncfs.2/e0:0");
        assert_eq!(second.state_id("syncfs.2/e0:0").unwrap(), id);
        assert_eq!(second.state_id("e0:0").unwrap(), id, "a bare id is the trace's own");
        let first = second.state_id("syncfs/e0:0").unwrap_err().to_string();
        assert!(first.contains("recording 2") && first.contains("not recording 1"), "{first}");
        assert!(syncfs.state_id("syncfs.2/e0:0").is_err(), "recording 1 is not recording 2");
        assert!(syncfs.state_id("syncfs.1/e0:0").is_err(), "recordings are numbered from 2");
        assert!(syncfs.state_id("syncfs.x/e0:0").is_err());
        // A trace without a schedule (bob record, imports, old witnesses) prints bare ids.
        let none = subject(None);
        assert_eq!(none.qualify(&id), "e0:0");
        assert_eq!(none.state_id("e0:0").unwrap(), id);
        assert!(none.state_id("syncfs/e0:0").is_err());
    }

    #[test]
    fn an_op_across_barriers_counts_them() {
        let p = Property::MultiBlockPrefixAppend;
        let w = workloads::workload_for(p, &Params::default());
        let trace = Trace::new(
            512,
            vec![
                op_write(&w, 1000, 0, 40960, 4096),
                Entry::flush(),
                Entry::write(8, vec![1; 4096]),
                Entry::flush(),
                op_write(&w, 1008, 0, 45056, 4096),
                Entry::flush(),
                // Another op's and the setup's data do not count.
                op_write(&w, 1016, 1, 0, 4096),
                Entry::flush(),
                op_write(&w, 1024, workloads::stamp::SETUP_OP, 0, 4096),
            ],
        );
        let epochs = crash::epochs(&trace, &crash::DiskModel::STUDY);
        let found = crash::op_epochs(&trace, &epochs, w.gen(), 0).unwrap();
        assert_eq!((found.first, found.last, found.epochs, found.writes), (0, 2, 2, 2));
        assert_eq!(exercise_of(p, &w, &trace, &epochs), Some((2, None)));
        let mut cell = held_cell();
        cell.apply_exercise(Some(2), None);
        assert_eq!(cell.verdict, CellVerdict::Held);
        assert_eq!(cell.op_barriers, Some(2));
        // Another generation's stamps (another workload's data) are not this op's.
        assert_eq!(crash::op_epochs(&trace, &epochs, w.gen() ^ 1, 0), None);
        // Properties that claim no multi-block op are not judged this way.
        let other = workloads::workload_for(Property::SingleBlockAppend, &Params::default());
        assert_eq!(exercise_of(Property::SingleBlockAppend, &other, &trace, &epochs), None);
    }
}
