//! `bob table`: every configuration x property cell, each run as [`super::run_cell`] runs
//! one (or marked unavailable when the configuration cannot run here), gathered into a
//! [`Grid`]; and the resume cache that lets a killed table redo only unfinished cells.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use workloads::Property;

use super::{
    cell_dir, check_cell, environment, not_applicable_cell, record_cell, unavailable_cell,
    CellRecordings, Error, Progress, Quiet, RunOptions,
};
use crate::check;
use crate::crash::{AtomicWriteUnits, DiskModel, FuaModel};
use crate::fs::FsConfig;
use crate::output::TraceSet;
use crate::report::table::Grid;
use crate::report::Cell;

/// What a table covers; every cell is run with `cell`'s options (its configuration,
/// property and disk models replaced per cell).
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Configurations (columns).
    pub configs: Vec<FsConfig>,
    /// Properties (rows).
    pub properties: Vec<Property>,
    /// The options every cell shares.
    pub cell: RunOptions,
    /// The atomic write unit(s), checked against each configuration's block size.
    pub atomic_write_unit: AtomicWriteUnits,
    /// What a FUA write means.
    pub fua: FuaModel,
    /// Check the recordings of this trace set (`bob table --record-only`) instead of
    /// recording each cell (`--traces`), so that shards split the same recordings.
    pub traces: Option<PathBuf>,
}

impl TableOptions {
    /// Refuses a table that cannot be run as asked: shards of recordings made afresh
    /// rather than of a saved trace set ([`Error::ShardsNeedSavedTraces`]).
    pub fn validate(&self) -> Result<(), Error> {
        match (self.cell.shard, &self.traces) {
            (Some(_), None) => Err(Error::ShardsNeedSavedTraces),
            _ => Ok(()),
        }
    }
}

/// Progress of a table: the cell being run, and each cell as it finishes (with the
/// per-state progress of [`Progress`] within a cell).
pub trait TableProgress: Progress {
    /// Cell number `index` (from 0, one per configuration x property), `label`
    /// (`config / property`), starts.
    fn cell_started(&self, index: usize, label: &str);
    /// A cell (one per disk model) is done.
    fn cell_finished(&self, cell: &Cell);
    /// A phase of the cell that lane `lane` checks (lane 0 alone when cells are checked
    /// one at a time; see [`CELLS_AT_ONCE`]). By default the one bar of [`Progress`].
    fn lane_phase(&self, lane: usize, name: &str, total: usize) {
        let _ = lane;
        self.phase(name, total);
    }
    /// One more state of lane `lane`'s cell checked.
    fn lane_state_done(&self, lane: usize, done: usize, total: usize) {
        let _ = lane;
        self.state_done(done, total);
    }
}

/// One lane's view of a table's progress: its phases and states go to its own bar.
struct Lane<'a> {
    lane: usize,
    table: &'a dyn TableProgress,
}

impl Progress for Lane<'_> {
    fn phase(&self, name: &str, total: usize) {
        self.table.lane_phase(self.lane, name, total);
    }
    fn state_done(&self, done: usize, total: usize) {
        self.table.lane_state_done(self.lane, done, total);
    }
}

/// The disk models `units` and `fua` name for a configuration with this block size.
pub fn disk_models(
    units: &AtomicWriteUnits,
    fua: FuaModel,
    block_size: u64,
) -> Result<Vec<DiskModel>, Error> {
    DiskModel::list(units, fua, block_size).map_err(Error::Invalid)
}

/// Runs every cell of the table. The machine is checked first (root, /dev/fuse, the
/// programs of the first configuration that can run here); configurations that cannot
/// run here give `unavailable` cells.
pub fn run_table(
    opts: &TableOptions,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<Grid, Error> {
    opts.validate()?;
    if let Some(c) = opts.configs.iter().find(|c| environment::unavailable_here(c).is_none()) {
        environment::check(c)?;
    }
    // mkfs once per configuration for the whole table (see `record::setup`): the cache
    // lives in a scratch directory of the table's own, removed when the table ends.
    let setup_work = match opts.cell.explore.speed.shared_setup {
        true => Some(super::scratch_dir(opts.cell.explore.scratch.as_deref())?),
        false => None,
    };
    let setup_cache = setup_work
        .as_ref()
        .map(|w| std::sync::Arc::new(crate::record::SetupCache::new(w.path().join("setup"))));
    let plans = plan_cells(opts, setup_cache)?;
    let cells = run_plans(opts, plans, progress, cancel)?;
    Ok(Grid {
        schema_version: crate::report::SCHEMA_VERSION,
        kernel: crate::host::kernel_release(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        configs: opts.configs.iter().map(|c| c.name.to_owned()).collect(),
        properties: opts.properties.iter().map(|p| p.name().to_owned()).collect(),
        notes: super::table_notes_with(&opts.configs, &opts.cell.schedules),
        cells,
    })
}

/// What each cell of the table is to do, in table order, with its label.
fn plan_cells(
    opts: &TableOptions,
    setup_cache: Option<std::sync::Arc<crate::record::SetupCache>>,
) -> Result<Vec<(String, Plan)>, Error> {
    let set = opts.traces.as_deref().map(super::load_trace_set).transpose()?;
    let mut plans: Vec<(String, Plan)> = Vec::new();
    for config in &opts.configs {
        let reason = environment::unavailable_here(config);
        let models = disk_models(&opts.atomic_write_unit, opts.fua, config.block_size())?;
        for &property in &opts.properties {
            let label = format!("{} / {}", config.name, property.name());
            let plan = match &reason {
                None if !config.applies(property) => Plan::Done(
                    models
                        .iter()
                        .map(|&m| Cell { disk_model: m, ..not_applicable_cell(config, property) })
                        .collect(),
                ),
                Some(why) => Plan::Done(
                    models
                        .iter()
                        .map(|&m| Cell { disk_model: m, ..unavailable_cell(config, property, why) })
                        .collect(),
                ),
                None => {
                    let cell = RunOptions {
                        config: config.clone(),
                        property,
                        disk_models: models.clone(),
                        setup_cache: setup_cache.clone(),
                        ..opts.cell.clone()
                    };
                    plan_run(opts, set.as_ref(), cell)
                }
            };
            plans.push((label, plan));
        }
    }
    Ok(plans)
}

/// The plan of a cell that can run here: its recordings found in the trace set (with
/// `--traces`), and its cells from the resume cache when they are there.
fn plan_run(opts: &TableOptions, set: Option<&TraceSet>, mut cell: RunOptions) -> Plan {
    let traces = match (set, &opts.traces) {
        (Some(set), Some(dir)) => Some(
            super::cell_traces_in(
                set,
                dir,
                cell.config.name,
                cell.property.name(),
                &cell.schedules,
            )
            .map_err(|e| in_cell(&cell, e)),
        ),
        _ => None,
    };
    match traces {
        Some(Err(e)) => Plan::Failed(e),
        found => {
            cell.trace = found.and_then(Result::ok);
            match cached_cells(&cell) {
                Some(cells) => Plan::Done(cells),
                None => Plan::Run(Box::new(cell)),
            }
        }
    }
}

/// `e`, named with the cell it happened in.
fn in_cell(cell: &RunOptions, e: Error) -> Error {
    Error::Cell {
        config: cell.config.name.into(),
        property: cell.property.name().into(),
        source: Box::new(e),
    }
}

/// How many cells a table checks at once with [`crate::check::Speedups::parallel_cells`].
/// Two: each cell already runs `--jobs` workers, so a second cell is there only to fill
/// the first one's serial steps, and a third would add memory and loop devices for little.
pub const CELLS_AT_ONCE: usize = 2;

/// What a lane of [`run_plans`] takes next, in table order.
enum Next {
    /// A cell to check, with its recordings when the recorder made them ahead (`None`:
    /// the lane records it itself).
    Check {
        index: usize,
        label: String,
        cell: Box<RunOptions>,
        recorded: Option<Box<Result<CellRecordings, Error>>>,
    },
    /// A cell whose traces could not be found: the table stops with this error.
    Failed(Error),
}

/// Sets its flag when its lane ends, however it ends (an error, a panic, or no cell left,
/// when the other lanes find none either): the others then take no more cells.
struct StopOnExit<'a>(&'a AtomicBool);

impl Drop for StopOnExit<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Where the lanes take their cells from: the recorder thread's channel (with
/// `record_ahead`), or the list itself.
enum Feed {
    Ahead(Option<std::sync::mpsc::Receiver<Next>>),
    InLane(std::vec::IntoIter<Next>),
}

impl Feed {
    fn next(&mut self) -> Option<Next> {
        match self {
            Feed::Ahead(rx) => rx.as_ref()?.recv().ok(),
            Feed::InLane(list) => list.next(),
        }
    }
}

/// Carries out the plans, telling `progress` of each cell, and gives the cells in table
/// order. With `record_ahead`, one thread records the cells to run, in order, each while
/// the cells before it are checked: a rendezvous channel, so that at most one recorded
/// cell waits (its recordings report no progress; the bars show the cells being checked).
/// With `parallel_cells`, [`CELLS_AT_ONCE`] lanes each check a cell at a time, so cells
/// finish out of order; without it one lane checks them in order. The first error stops
/// the table: every lane finishes the cell it is on and takes no other.
fn run_plans(
    opts: &TableOptions,
    plans: Vec<(String, Plan)>,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<Vec<Cell>, Error> {
    let speed = opts.cell.explore.speed;
    let lanes = if speed.parallel_cells { CELLS_AT_ONCE } else { 1 };
    let started = AtomicUsize::new(0);
    let start = |label: &str| progress.cell_started(started.fetch_add(1, Ordering::Relaxed), label);
    let mut finished: Vec<Option<Vec<Cell>>> = Vec::with_capacity(plans.len());
    let mut to_run = Vec::new();
    for (index, (label, plan)) in plans.into_iter().enumerate() {
        match plan {
            Plan::Done(cells) => {
                start(&label);
                cells.iter().for_each(|c| progress.cell_finished(c));
                finished.push(Some(cells));
            }
            Plan::Run(cell) => {
                finished.push(None);
                to_run.push(Next::Check { index, label, cell, recorded: None });
            }
            Plan::Failed(e) => {
                finished.push(None);
                to_run.push(Next::Failed(e));
            }
        }
    }
    let finished = Mutex::new(finished);
    // Set by the first lane to end: the others and the recorder take no more cells.
    let stop = AtomicBool::new(false);
    let (ahead_tx, feed) = match speed.record_ahead {
        true => {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Next>(0);
            (Some(tx), Feed::Ahead(Some(rx)))
        }
        false => (None, Feed::InLane(std::mem::take(&mut to_run).into_iter())),
    };
    let feed = Mutex::new(feed);
    let lane = |lane: usize| -> Result<(), Error> {
        let _stop_the_others = StopOnExit(&stop);
        let own = &Lane { lane, table: progress };
        while !stop.load(Ordering::Relaxed) {
            let next = feed.lock().unwrap_or_else(|p| p.into_inner()).next();
            let (index, label, cell, recorded) = match next {
                None => break,
                Some(Next::Failed(e)) => return Err(e),
                Some(Next::Check { index, label, cell, recorded }) => {
                    (index, label, cell, recorded)
                }
            };
            start(&label);
            let made = match recorded {
                Some(made) => *made,
                None => record_cell(&cell, own, cancel),
            };
            let found = check_cell(made.map_err(|e| in_cell(&cell, e))?, own, cancel)
                .map_err(|e| in_cell(&cell, e))?;
            save_cells(&cell, &found)?;
            found.iter().for_each(|c| progress.cell_finished(c));
            finished.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(found);
        }
        Ok(())
    };
    std::thread::scope(|scope| -> Result<(), Error> {
        if let Some(tx) = ahead_tx {
            let (stop, to_run) = (&stop, to_run);
            scope.spawn(move || {
                for next in to_run {
                    let next = match next {
                        Next::Check { index, label, cell, .. } => {
                            let made = record_cell(&cell, &Quiet, cancel);
                            let recorded = Some(Box::new(made));
                            Next::Check { index, label, cell, recorded }
                        }
                        failed => failed,
                    };
                    let last = match &next {
                        Next::Check { recorded: Some(made), .. } => made.is_err(),
                        _ => true,
                    };
                    // The lanes stopped taking cells (an error, an interrupt): stop too.
                    if stop.load(Ordering::Relaxed) || tx.send(next).is_err() || last {
                        break;
                    }
                }
            });
        }
        let handles: Vec<_> = (0..lanes).map(|k| scope.spawn(move || lane(k))).collect();
        let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        // A recorder still waiting to hand over a cell is let go (before a lane's panic
        // goes on, or the scope would wait for the recorder for ever).
        if let Feed::Ahead(rx) = &mut *feed.lock().unwrap_or_else(|p| p.into_inner()) {
            rx.take();
        }
        let mut first_error = None;
        for done in joined {
            match done {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(Err(e)) if first_error.is_none() => first_error = Some(e),
                Ok(_) => {}
            }
        }
        first_error.map_or(Ok(()), Err)
    })?;
    let finished = finished.into_inner().unwrap_or_else(|p| p.into_inner());
    // A cell left unchecked with no error: the recorder stopped at an interrupt.
    let cells: Option<Vec<Vec<Cell>>> = finished.into_iter().collect();
    Ok(cells.ok_or(check::Error::Interrupted)?.into_iter().flatten().collect())
}

/// Where a finished cell is kept for `--resume`: `<cell dir>/cells.json`.
pub(crate) fn cached_cells_path(opts: &RunOptions) -> PathBuf {
    cell_dir(opts).join("cells.json")
}

/// The finished cells of an earlier run of this cell, if `opts.resume` asks for them and
/// they were judged under the same disk models. A cell with states bob could not check
/// (`infra-error`) is not finished: it runs again, from its journal.
pub(crate) fn cached_cells(opts: &RunOptions) -> Option<Vec<Cell>> {
    if !opts.resume {
        return None;
    }
    let text = std::fs::read_to_string(cached_cells_path(opts)).ok()?;
    let cells: Vec<Cell> = serde_json::from_str(&text).ok()?;
    let same_models = cells.iter().map(|c| c.disk_model).eq(opts.disk_models.iter().copied());
    let all_checked = cells.iter().all(|c| c.counts.infra_error == 0);
    (same_models && all_checked).then_some(cells)
}

/// What one cell of a table is to do.
enum Plan {
    /// Nothing: its cells are known (unavailable here, or finished by an earlier run).
    Done(Vec<Cell>),
    /// Record and check it.
    Run(Box<RunOptions>),
    /// Report this error when the table reaches it (its traces could not be found).
    Failed(Error),
}

/// Keeps a finished cell's cells as `cells.json`, for `--resume`.
fn save_cells(opts: &RunOptions, cells: &[Cell]) -> Result<(), Error> {
    let saved = cached_cells_path(opts);
    let io = |source| Error::Io { path: saved.clone(), source };
    if let Some(dir) = saved.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_string_pretty(cells)
        .map_err(|e| Error::Invalid(format!("{}: {e}", saved.display())))?;
    std::fs::write(&saved, text).map_err(io)?;
    Ok(())
}
