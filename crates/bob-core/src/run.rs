//! One cell end to end: record the property's workload on the configuration, generate
//! crash states, check them, and write the witness of the first failure.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use workloads::Property;

use crate::check::{self, EngineOptions, Subject};
use crate::crash::{self, Limits, Strategy};
use crate::device::registry;
use crate::fs::{FsConfig, Timeouts};
use crate::image::BaseImage;
use crate::record::{self, RecordRequest};
use crate::report::{self, witness, Cell, CellVerdict};

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
    /// bob's scratch directory.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
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
    /// Crash-state strategies.
    pub strategies: Vec<Strategy>,
    /// Budget and seed.
    pub limits: Limits,
    /// Parallel workers.
    pub jobs: usize,
    /// External step timeouts.
    pub timeouts: Timeouts,
    /// Where witnesses go (`<out>/<config>/<property>/`).
    pub out_dir: PathBuf,
    /// Where scratch directories go (default: the system temp dir).
    pub scratch: Option<PathBuf>,
    /// Check this recorded trace directory instead of recording (`--trace`).
    pub trace: Option<PathBuf>,
    /// Also save the recorded trace directory here (`--save-trace`).
    pub save_trace: Option<PathBuf>,
    /// Check only shard `I` of `N` (0-based `I`) of the crash states (`--shard I/N`).
    pub shard: Option<(usize, usize)>,
    /// Record this workload instead of the property's own (generated workloads).
    pub workload: Option<workloads::Workload>,
    /// Continue an interrupted run of this cell from its journal (`--resume`).
    pub resume: bool,
}

/// Parses `I/N` (1-based I, as CI matrices number jobs) into a 0-based shard.
pub fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {text:?}: expected I/N with 1 <= I <= N, e.g. 2/4");
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
pub fn shard_of(digest: &[u8; 32], count: usize) -> usize {
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(first) % count as u64) as usize
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
pub struct WorkDir {
    dir: Option<PathBuf>,
}

impl WorkDir {
    /// Creates `bob-XXXX` under `parent` (default: the temp dir) and registers it.
    pub fn new(parent: Option<&Path>) -> std::io::Result<WorkDir> {
        let mut b = tempfile::Builder::new();
        b.prefix("bob-");
        let dir = match parent {
            Some(p) => b.tempdir_in(p)?,
            None => b.tempdir()?,
        };
        let path = dir.keep();
        registry::register(&path)?;
        Ok(WorkDir { dir: Some(path) })
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

/// Records (or loads), explores and checks one cell; writes the witness of the first
/// failure.
pub fn run_cell(
    opts: &RunOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Cell, Error> {
    let started = Instant::now();
    let work = WorkDir::new(opts.scratch.as_deref()).map_err(|source| Error::Io {
        path: opts.scratch.clone().unwrap_or_else(std::env::temp_dir),
        source,
    })?;

    // The cell's journal: its trace and every result as it is reached, so that a killed
    // run resumes (`--resume`) without recording again or losing a verdict. Removed when
    // the cell completes.
    let cell_dir = cell_dir(opts);
    let run_dir = cell_dir.join("run");
    let resuming = opts.resume && run_dir.join("trace.json").exists() && opts.trace.is_none();
    if !resuming {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    let trace_source = if resuming { Some(run_dir.clone()) } else { opts.trace.clone() };
    let (subject, sidecar) = match &trace_source {
        Some(dir) => witness::load_subject(dir)?,
        None => {
            let workload = match &opts.workload {
                Some(w) => w.clone(),
                None => workloads::workload_for(opts.property, &opts.config.workload_params()),
            };
            progress.phase("recording", 0);
            let recording = record::record(&RecordRequest {
                config: &opts.config,
                workload: &workload,
                device: opts.device.as_deref(),
                work_dir: work.path(),
                timeouts: opts.timeouts,
            })?;
            let base = BaseImage::open(&recording.base_image)
                .map_err(|source| Error::Io { path: recording.base_image.clone(), source })?;
            let trace = Arc::new(recording.trace);
            let epochs = crash::epochs(&trace);
            let subject = Subject {
                config: opts.config.clone(),
                workload,
                observed: recording.observed,
                trace,
                epochs,
                spans: recording.sidecar.ops.clone(),
                base: Arc::new(base),
            };
            (subject, recording.sidecar)
        }
    };
    if let Some(dir) = &opts.save_trace {
        witness::save_trace(dir, &subject, &sidecar)?;
    }
    if !resuming {
        witness::save_trace(&run_dir, &subject, &sidecar)?;
    }
    let journal = check::Journal::open(&run_dir.join("results.jsonl"))?;
    if cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(check::Error::Interrupted.into());
    }
    let generated =
        crash::generate(&subject.trace, &subject.epochs, &opts.strategies, &opts.limits);
    // Positions in the full list, kept through sharding so witnesses compare across shards.
    let mut states: Vec<(usize, crash::CrashState)> =
        generated.states.into_iter().enumerate().collect();
    if let Some((index, count)) = opts.shard {
        let builder = crash::OverlayBuilder::new(&subject.trace, &subject.epochs);
        states.retain(|(_, s)| {
            shard_of(&builder.state(&s.id).digest(&subject.trace), count) == index
        });
    }
    let (positions, states): (Vec<usize>, Vec<crash::CrashState>) = states.into_iter().unzip();

    progress.phase("checking", states.len());
    let engine = EngineOptions {
        jobs: opts.jobs,
        timeouts: opts.timeouts,
        work_dir: work.path().to_owned(),
    };
    let results = check::run_states_journaled(
        &subject,
        &check::Judge::Oracle,
        &states,
        &engine,
        &|d, t| progress.state_done(d, t),
        cancel,
        &journal,
    )?;
    drop(journal);
    let (mut cell, witness_index) =
        Cell::of_results(opts.config.name, opts.property.name(), &results);
    cell.shard = opts.shard.map(|(i, n)| format!("{}/{}", i + 1, n));
    cell.scenarios = report::summarize_scenarios(&results, &positions);
    (cell.mount_failures, cell.read_errors) =
        report::cell_causes(&results, &positions, &subject, opts.timeouts.fsck);
    if let Some(i) = witness_index {
        let r = &results[i];
        let replayed = confirm(&subject, &r.state, opts, &work)?;
        cell.confirmed = Some(replayed == r.check.outcome.name());
        let dir = cell_dir.clone();
        let record = witness::StateRecord::of(r, &subject, Some(opts.property.name().into()));
        witness::write(&dir, &subject, &sidecar, &record, &r.check)?;
        cell.witness = Some(dir.display().to_string());
        cell.story = Some(format!("{} (state {})", record.story, record.id));
        cell.witness_state = Some(record.id);
        cell.witness_position = Some(positions[i]);
    }
    // Each scenario's first silent state is replayed independently too: the per-scenario
    // table prints only crosses that reproduce.
    for sc in &mut cell.scenarios {
        let Some(i) = sc.witness_position.and_then(|p| positions.iter().position(|&q| q == p))
        else {
            continue;
        };
        let again = confirm_check(&subject, &results[i].state, opts, &work)?;
        sc.confirmed =
            Some(again.scenarios.iter().any(|m| m.scenario == sc.scenario && !m.silent.is_empty()));
    }
    cell.seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&run_dir);
    Ok(cell)
}

/// Where a cell's witness and journal live: `<out>/<config>/<property>[/shard-I-of-N]`.
pub fn cell_dir(opts: &RunOptions) -> PathBuf {
    let mut dir = opts.out_dir.join(opts.config.name).join(opts.property.name());
    if let Some((i, n)) = opts.shard {
        dir = dir.join(format!("shard-{}-of-{n}", i + 1));
    }
    dir
}

/// Checks the witness state again, independently of the engine: a fresh image file
/// written from the trace (not the COW view), a fresh loop device and mount. Returns the
/// outcome's name, which must equal the engine's for the cross to stand.
fn confirm(
    subject: &Subject,
    state: &crash::CrashState,
    opts: &RunOptions,
    work: &WorkDir,
) -> Result<&'static str, Error> {
    Ok(confirm_check(subject, state, opts, work)?.outcome.name())
}

/// [`confirm`]'s whole check of the state.
fn confirm_check(
    subject: &Subject,
    state: &crash::CrashState,
    opts: &RunOptions,
    work: &WorkDir,
) -> Result<check::StateCheck, Error> {
    let image = work.path().join("confirm.img");
    let mnt = work.path().join("confirm-mnt");
    std::fs::create_dir_all(&mnt).map_err(|source| Error::Io { path: mnt.clone(), source })?;
    let overlay = crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&state.id);
    crate::image::CrashView::new(subject.base.clone(), subject.trace.clone(), overlay)
        .materialize(&image)
        .map_err(|source| Error::Io { path: image.clone(), source })?;
    let durable = subject.durable_ops(state.id.epoch as usize);
    let checked = check::check_image(subject, &image, &mnt, durable, &opts.timeouts)?;
    let _ = std::fs::remove_file(&image);
    Ok(checked)
}

/// Header notes every table carries.
pub fn table_notes(configs: &[FsConfig]) -> Vec<String> {
    let mut notes = Vec::new();
    if configs.iter().any(|c| matches!(c.fstype, "ext2" | "ext3")) {
        notes.push(
            "ext2 and ext3 are served by the ext4 driver on this kernel (CONFIG_EXT4_USE_FOR_EXT2)."
                .to_owned(),
        );
    }
    for c in configs {
        if let Some(why) = c.unavailable {
            notes.push(format!("{}: not available ({why}); listed, not passed.", c.name));
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
