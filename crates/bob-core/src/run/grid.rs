//! `bob table`: every configuration x property cell, each run as [`super::run_cell`] runs
//! one (or marked unavailable when the configuration cannot run here), gathered into a
//! [`Grid`]; and the resume cache that lets a killed table redo only unfinished cells.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

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

/// Carries out the plans in order, telling `progress` of each cell. With `record_ahead`,
/// one thread records the cells to run, in order, each while the cell before it is
/// checked: a rendezvous channel, so that at most one recorded cell waits. Its
/// recordings report no progress (the bars show the cell being checked).
fn run_plans(
    opts: &TableOptions,
    plans: Vec<(String, Plan)>,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<Vec<Cell>, Error> {
    let ahead = opts.cell.explore.speed.record_ahead;
    let to_record: Vec<RunOptions> = match ahead {
        true => plans
            .iter()
            .filter_map(|(_, p)| match p {
                Plan::Run(cell) => Some((**cell).clone()),
                _ => None,
            })
            .collect(),
        false => Vec::new(),
    };
    let mut cells = Vec::new();
    std::thread::scope(|scope| -> Result<(), Error> {
        let (recorded_tx, recorded) =
            std::sync::mpsc::sync_channel::<Result<CellRecordings, Error>>(0);
        if ahead {
            scope.spawn(move || {
                for cell in &to_record {
                    let made = record_cell(cell, &Quiet, cancel);
                    let failed = made.is_err();
                    // The table stopped taking cells (an error, an interrupt): stop too.
                    if recorded_tx.send(made).is_err() || failed {
                        break;
                    }
                }
            });
        } else {
            drop(recorded_tx);
        }
        for (started, (label, plan)) in plans.into_iter().enumerate() {
            progress.cell_started(started, &label);
            let found = match plan {
                Plan::Done(cells) => cells,
                Plan::Failed(e) => return Err(e),
                Plan::Run(cell) => {
                    let made = match ahead {
                        // The recorder stops only after sending its error, or when told to.
                        true => recorded.recv().unwrap_or(Err(check::Error::Interrupted.into())),
                        false => record_cell(&cell, progress, cancel),
                    };
                    let found = check_cell(made.map_err(|e| in_cell(&cell, e))?, progress, cancel)
                        .map_err(|e| in_cell(&cell, e))?;
                    save_cells(&cell, &found)?;
                    found
                }
            };
            for cell in found {
                progress.cell_finished(&cell);
                cells.push(cell);
            }
        }
        Ok(())
    })?;
    Ok(cells)
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
