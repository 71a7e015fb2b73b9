//! `bob bench --table`: the wall time of a whole `bob table` with the engine's shortcuts
//! on against the same table with every one of them off ([`Speedups::NONE`]: no
//! recovered-image dedup, fsck for every state, mkfs for every recording, no recording
//! ahead of checking), one run each in this process, and the ratio of the two as
//! `table_speedup`.
//!
//! The shortcuts run first: whatever the first run pays for cold caches (programs,
//! directory entries) then counts against them, so the ratio errs low rather than high.
//! Each run records its own traces, so the two tables explore states of different
//! recordings; their cell verdicts are compared and any difference is reported, not
//! treated as an error (a recording's timing can change a cell: see `verdicts_agree`).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::stats::{per_s, ratio};
use super::Error;
use crate::check::Speedups;
use crate::host::{load_average, Machine};
use crate::report::table::Grid;
use crate::report::Cell;
use crate::run::{self, Progress, TableOptions, TableProgress, WorkDir};

/// The whole default table's wall-time target (issue: "the whole table in under half an
/// hour" on the project's 2-core machine).
pub(crate) const FULL_TABLE_TARGET_SECONDS: f64 = 1800.0;

/// Both runs' figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableBenchReport {
    /// `baseline.seconds / optimised.seconds`: how many times faster the table runs with
    /// the shortcuts on.
    pub table_speedup: f64,
    /// Whether every cell reached the same verdict in both runs.
    pub verdicts_agree: bool,
    /// The table with the engine's shortcuts on (the defaults).
    pub optimised: TableRun,
    /// The same table with every shortcut off.
    pub baseline: TableRun,
    /// The cells whose verdicts differ (`config / property / disk model: a vs b`).
    pub differing_cells: Vec<String>,
    /// Configurations (columns).
    pub configs: Vec<String>,
    /// Properties (rows).
    pub properties: Vec<String>,
    /// Drain schedules each cell recorded.
    pub schedules: Vec<String>,
    /// `--max-states`, if the states were capped.
    pub max_states: Option<usize>,
    /// Engine workers.
    pub jobs: usize,
    /// The machine.
    pub machine: Machine,
    /// The 1-minute load average at the start and at the end.
    pub load_average: [f64; 2],
}

/// One run of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRun {
    /// The shortcuts it ran with.
    pub speedups: Speedups,
    /// Wall time of the whole table, seconds.
    pub seconds: f64,
    /// Cells (one per configuration x property x disk model).
    pub cells: usize,
    /// States explored over all cells.
    pub states_explored: usize,
    /// States mounted over all cells.
    pub states_mounted: usize,
    /// Of those, states the kernel never mounted (reuse by reads). Absent in reports made
    /// before it: 0.
    #[serde(default)]
    pub states_reads_reused: usize,
    /// Of those, states checked already under the table's earlier disk model (the same
    /// state of the same recording): taken from the cell's journal, not mounted again.
    /// Absent in reports made before it: 0.
    #[serde(default)]
    pub states_journal_reused: usize,
    /// `states_explored / seconds`.
    pub states_per_s: f64,
    /// Recordings whose file system was made by mkfs.
    pub setup_made: usize,
    /// Recordings that started from a copy of a file system made earlier in the run.
    pub setup_reused: usize,
}

/// A scratch directory for a table benchmark's runs, in the table's `--scratch`.
fn bench_work_dir(table: &TableOptions) -> Result<WorkDir, Error> {
    let scratch = table.cell.explore.scratch.clone();
    WorkDir::new(scratch.as_deref()).map_err(super::work_dir_err)
}

/// `table` as one timed run of a benchmark takes it: with `speedups`, writing into its
/// own directory `name` of `work`, from scratch (no resume, no setup cache of its own).
fn run_options(
    table: &TableOptions,
    work: &WorkDir,
    name: &str,
    speedups: Speedups,
) -> TableOptions {
    let mut opts = table.clone();
    opts.cell.explore.speed = speedups;
    opts.cell.explore.out_dir = work.path().join(name);
    opts.cell.resume = false;
    opts.cell.setup_cache = None;
    opts
}

/// A table's failure as the benchmark's: an interrupt stays one.
fn table_failed(e: crate::run::Error) -> Error {
    if e.is_interrupted() {
        Error::Interrupted
    } else {
        Error::Table(Box::new(e))
    }
}

/// Runs `table` twice, with its shortcuts on and all off (its own `speed` is ignored),
/// each writing its tables into a scratch directory of its own.
pub fn run_table_bench(
    table: &TableOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<TableBenchReport, Error> {
    let load_start = load_average();
    let work = bench_work_dir(table)?;
    let run_with = |name: &'static str, speedups: Speedups| -> Result<_, Error> {
        let opts = run_options(table, &work, name, speedups);
        let started = Instant::now();
        let grid =
            run::run_table(&opts, &Phases { progress, name }, cancel).map_err(table_failed)?;
        let seconds = started.elapsed().as_secs_f64();
        Ok((TableRun::of(&grid, speedups, seconds), grid))
    };
    let (optimised, fast_grid) = run_with("optimised", Speedups::default())?;
    let (baseline, slow_grid) = run_with("baseline", Speedups::NONE)?;
    let differing_cells = differing_verdicts(&fast_grid.cells, &slow_grid.cells);
    Ok(TableBenchReport {
        table_speedup: ratio(baseline.seconds, optimised.seconds),
        verdicts_agree: differing_cells.is_empty(),
        optimised,
        baseline,
        differing_cells,
        configs: fast_grid.configs,
        properties: fast_grid.properties,
        schedules: table.cell.schedules.iter().map(|s| s.name().to_owned()).collect(),
        max_states: table.cell.explore.limits.max_states,
        jobs: table.cell.explore.jobs,
        machine: Machine::here(),
        load_average: [load_start, load_average()],
    })
}

/// `bob bench --table --full`: the whole table as a user waits for it, timed four ways.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FullTableReport {
    /// Configurations timed (the table's, less those this kernel cannot run).
    pub configs: Vec<String>,
    /// Configurations left out, each with why (`reiserfs: this kernel has no ...`).
    pub skipped: Vec<String>,
    /// Properties (rows).
    pub properties: Vec<String>,
    /// The disk models every cell is judged under (`512 B atomic writes, real FUA`).
    pub disk_models: Vec<String>,
    /// Drain schedules each cell recorded.
    pub schedules: Vec<String>,
    /// Recording every cell's traces once (`bob table --record-only`).
    pub recording: RecordingRun,
    /// Checking those recordings with every shortcut on (`bob table --traces`).
    pub from_recordings: TableRun,
    /// The table as `bob table` runs it: recording each cell while checking the one
    /// before, every shortcut on.
    pub with_recording: TableRun,
    /// A sample of cells from the same recordings checked with every shortcut off
    /// against the same cells of `from_recordings`.
    pub sample: SampleRun,
    /// [`FULL_TABLE_TARGET_SECONDS`].
    pub target_seconds: f64,
    /// Whether `with_recording` finished within the target.
    pub target_met: bool,
    /// Engine workers.
    pub jobs: usize,
    /// The machine.
    pub machine: Machine,
    /// The 1-minute load average at the start and end of each phase: recording, checking
    /// the recordings, the sample without shortcuts, the table with recording.
    pub load_average: Vec<[f64; 2]>,
}

/// The recording phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordingRun {
    /// Wall time, seconds.
    pub seconds: f64,
    /// Recordings made (one per cell and drain schedule).
    pub recordings: usize,
}

/// The shortcuts-off sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRun {
    /// The properties sampled (every one of the table's configurations and disk models).
    pub properties: Vec<String>,
    /// Cells in the sample.
    pub cells: usize,
    /// The sample's cells' seconds with every shortcut on (their share of
    /// `from_recordings`).
    pub shortcuts_on_seconds: f64,
    /// The same cells' seconds with every shortcut off ([`Speedups::NONE`]).
    pub shortcuts_off_seconds: f64,
    /// `shortcuts_off_seconds / shortcuts_on_seconds`.
    pub speedup: f64,
    /// The cells whose verdicts differ between the two (none expected: the same
    /// recordings and exact shortcuts).
    pub differing_cells: Vec<String>,
}

/// Options of [`run_full_table_bench`].
#[derive(Clone, Debug)]
pub struct FullTableOptions {
    /// The table (configurations that run here, properties, disk models, schedules).
    pub table: TableOptions,
    /// Configurations of the table left out, each with why.
    pub skipped: Vec<String>,
    /// The shortcuts-off sample takes every `sample_every`-th property, from the first.
    pub sample_every: usize,
}

/// Runs the whole table four ways, in this order: recording every cell's traces; checking
/// them with every shortcut on; a sample of their cells with every shortcut off; and the
/// table as `bob table` runs it, recording as it checks.
pub fn run_full_table_bench(
    opts: &FullTableOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FullTableReport, Error> {
    let table = &opts.table;
    let work = bench_work_dir(table)?;
    let mut loads = Vec::new();
    let base = |name: &str, speedups: Speedups| run_options(table, &work, name, speedups);

    let recordings = work.path().join("recordings");
    let load = load_average();
    let started = Instant::now();
    let set = run::record_table(
        &base("record", Speedups::default()),
        &recordings,
        &Phases { progress, name: "recording" },
        cancel,
    )
    .map_err(table_failed)?;
    let recording = RecordingRun {
        seconds: started.elapsed().as_secs_f64(),
        recordings: set.cells.iter().map(|c| c.schedules.len()).sum(),
    };
    loads.push([load, load_average()]);

    let timed = |name: &'static str, o: TableOptions, loads: &mut Vec<[f64; 2]>| {
        let load = load_average();
        let started = Instant::now();
        let grid = run::run_table(&o, &Phases { progress, name }, cancel).map_err(table_failed)?;
        let seconds = started.elapsed().as_secs_f64();
        loads.push([load, load_average()]);
        Ok::<_, Error>((TableRun::of(&grid, o.cell.explore.speed, seconds), grid))
    };
    let mut checking = base("from-recordings", Speedups::default());
    checking.traces = Some(recordings.clone());
    let (from_recordings, checked) = timed("checking the recordings", checking, &mut loads)?;

    let sampled: Vec<_> =
        table.properties.iter().copied().step_by(opts.sample_every.max(1)).collect();
    let mut off = base("shortcuts-off", Speedups::NONE);
    off.traces = Some(recordings);
    off.properties = sampled.clone();
    let (_, off_grid) = timed("sample, shortcuts off", off, &mut loads)?;
    let on_cells: Vec<Cell> = checked
        .cells
        .iter()
        .filter(|c| off_grid.cells.iter().any(|o| cell_key(o) == cell_key(c)))
        .cloned()
        .collect();
    let shortcuts_on_seconds = on_cells.iter().map(|c| c.seconds).sum();
    let shortcuts_off_seconds = off_grid.cells.iter().map(|c| c.seconds).sum();
    let sample = SampleRun {
        properties: sampled.iter().map(|p| p.name().to_owned()).collect(),
        cells: off_grid.cells.len(),
        shortcuts_on_seconds,
        shortcuts_off_seconds,
        speedup: ratio(shortcuts_off_seconds, shortcuts_on_seconds),
        differing_cells: differing_verdicts(&on_cells, &off_grid.cells),
    };

    let (with_recording, grid) =
        timed("table with recording", base("with-recording", Speedups::default()), &mut loads)?;
    let mut disk_models: Vec<String> = Vec::new();
    for c in &grid.cells {
        let name = c.disk_model.to_string();
        if !disk_models.contains(&name) {
            disk_models.push(name);
        }
    }
    Ok(FullTableReport {
        configs: grid.configs,
        skipped: opts.skipped.clone(),
        properties: grid.properties,
        disk_models,
        schedules: table.cell.schedules.iter().map(|s| s.name().to_owned()).collect(),
        recording,
        target_met: with_recording.seconds <= FULL_TABLE_TARGET_SECONDS,
        from_recordings,
        with_recording,
        sample,
        target_seconds: FULL_TABLE_TARGET_SECONDS,
        jobs: table.cell.explore.jobs,
        machine: Machine::here(),
        load_average: loads,
    })
}

impl FullTableReport {
    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let run = |name: &str, r: &TableRun| format!("{}\n", r.text(name));
        let loads: Vec<String> =
            self.load_average.iter().map(|[a, b]| format!("{a:.2} -> {b:.2}")).collect();
        let mut s = format!(
            "bench full table: {} configurations x {} properties x {} disk models ({}), \
             schedules {}; jobs {}, {} cores; load per phase {}\n",
            self.configs.len(),
            self.properties.len(),
            self.disk_models.len(),
            self.disk_models.join("; "),
            self.schedules.join(","),
            self.jobs,
            self.machine.cores,
            loads.join(", ")
        );
        if !self.skipped.is_empty() {
            s += &format!("left out (cannot run on this kernel): {}\n", self.skipped.join("; "));
        }
        s += &format!(
            "the table with recording: {:.1} s against a target of {:.0} s: {}\n",
            self.with_recording.seconds,
            self.target_seconds,
            if self.target_met { "met" } else { "NOT met" }
        );
        s += &format!(
            "recording alone: {:.1} s, {} recordings\n",
            self.recording.seconds, self.recording.recordings
        );
        s += &run("checking the recordings", &self.from_recordings);
        s += &run("with recording (bob table)", &self.with_recording);
        s += &format!(
            "sample ({} cells: {}), from the same recordings: {:.1} s of cell time with every \
             shortcut on, {:.1} s with every one off: {:.2}x\n",
            self.sample.cells,
            self.sample.properties.join(","),
            self.sample.shortcuts_on_seconds,
            self.sample.shortcuts_off_seconds,
            self.sample.speedup
        );
        if self.sample.differing_cells.is_empty() {
            s += "sample verdicts agree\n";
        } else {
            s += &format!("sample verdicts DIFFER: {}\n", self.sample.differing_cells.join("; "));
        }
        s
    }
}

impl TableRun {
    /// The run in one line, named `name`, as both table benchmarks print it.
    fn text(&self, name: &str) -> String {
        format!(
            "{name}: {:.1} s, {} cells, {} states explored ({} mounted, {} of them reusing an \
             earlier state's check by reads, {} checked already under the earlier disk \
             model), {:.1} states/s",
            self.seconds,
            self.cells,
            self.states_explored,
            self.states_mounted,
            self.states_reads_reused,
            self.states_journal_reused,
            self.states_per_s
        )
    }

    fn of(grid: &Grid, speedups: Speedups, seconds: f64) -> TableRun {
        let states_explored = grid.cells.iter().map(|c| c.states_explored).sum();
        TableRun {
            speedups,
            seconds,
            cells: grid.cells.len(),
            states_explored,
            states_mounted: grid.cells.iter().map(|c| c.states_mounted).sum(),
            states_reads_reused: grid.cells.iter().map(|c| c.reads_reused).sum(),
            states_journal_reused: grid.cells.iter().map(|c| c.journal_reused).sum(),
            states_per_s: per_s(states_explored, seconds),
            setup_made: grid.cells.iter().map(|c| c.setup_made).sum(),
            setup_reused: grid.cells.iter().map(|c| c.setup_reused).sum(),
        }
    }
}

/// What matches a cell of one run of a table with the same cell of another.
fn cell_key(c: &Cell) -> (&str, &str, crate::crash::DiskModel) {
    (&c.config, &c.property, c.disk_model)
}

/// The cells, matched by configuration, property and disk model, whose verdicts differ;
/// a cell racy in either run (violated in some of its recordings and not in others) is
/// not counted: two runs that record afresh may see its race go either way.
fn differing_verdicts(a: &[Cell], b: &[Cell]) -> Vec<String> {
    let mut out = Vec::new();
    for x in a {
        let y = b.iter().find(|y| cell_key(y) == cell_key(x));
        if x.racy || y.is_some_and(|y| y.racy) {
            continue;
        }
        let other = y.map_or("missing", |y| y.verdict.name());
        if other != x.verdict.name() {
            out.push(format!(
                "{} / {} / {}: {} vs {other}",
                x.config,
                x.property,
                x.disk_model.slug(),
                x.verdict.name()
            ));
        }
    }
    out
}

/// The table's progress as bench phases, each named after its run (`optimised: ...`).
struct Phases<'a> {
    progress: &'a dyn Progress,
    name: &'static str,
}

impl Progress for Phases<'_> {
    fn phase(&self, name: &str, total: usize) {
        self.progress.phase(&format!("{}: {name}", self.name), total);
    }
    fn state_done(&self, done: usize, total: usize) {
        self.progress.state_done(done, total);
    }
}

impl TableProgress for Phases<'_> {
    fn cell_started(&self, _: usize, label: &str) {
        self.progress.phase(&format!("{}: {label}", self.name), 0);
    }
    fn cell_finished(&self, _: &Cell) {}
}

impl TableBenchReport {
    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let run = |name: &str, r: &TableRun| {
            format!("{}; mkfs {} times, reused {}\n", r.text(name), r.setup_made, r.setup_reused)
        };
        let mut s = format!(
            "bench table {} x {} (schedules {}{}; jobs {}, {} cores, load {:.2} -> {:.2})\n",
            self.configs.join(","),
            self.properties.join(","),
            self.schedules.join(","),
            self.max_states.map_or(String::new(), |n| format!(", at most {n} states each")),
            self.jobs,
            self.machine.cores,
            self.load_average[0],
            self.load_average[1]
        );
        s += &format!(
            "table_speedup: {:.2}x (baseline wall time over optimised)\n",
            self.table_speedup
        );
        s += &run("optimised (all shortcuts on)", &self.optimised);
        s += &run(
            "baseline (--no-recovered-dedup --fsck always --no-shared-setup --no-record-ahead \
             --no-cached-views --no-flushless-views)",
            &self.baseline,
        );
        if self.verdicts_agree {
            s += "cell verdicts agree\n";
        } else {
            s += &format!(
                "cell verdicts differ (each run recorded its own traces): {}\n",
                self.differing_cells.join("; ")
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CellVerdict;

    fn cell(property: &str, verdict: CellVerdict) -> Cell {
        Cell { verdict, ..Cell::of_results("ext2", property, &[]).0 }
    }

    fn run(speedups: Speedups, seconds: f64) -> TableRun {
        let grid = Grid {
            schema_version: crate::report::SCHEMA_VERSION,
            kernel: "k".into(),
            tool_version: "v".into(),
            configs: vec!["ext2".into()],
            properties: vec!["a".into()],
            notes: Vec::new(),
            cells: vec![Cell { states_explored: 10, ..cell("a", CellVerdict::Held) }],
        };
        TableRun::of(&grid, speedups, seconds)
    }

    #[test]
    fn cells_are_matched_by_configuration_property_and_disk_model() {
        let a = [cell("a", CellVerdict::Held), cell("b", CellVerdict::Violated)];
        let b = [cell("b", CellVerdict::Violated), cell("a", CellVerdict::Violated)];
        let differ = differing_verdicts(&a, &b);
        assert_eq!(differ.len(), 1, "{differ:?}");
        assert!(differ[0].starts_with("ext2 / a / ") && differ[0].ends_with("held vs violated"));
        assert!(differing_verdicts(&a, &a).is_empty());
        assert!(differing_verdicts(&a, &b[..1])[0].ends_with("held vs missing"));
    }

    #[test]
    fn the_summary_names_the_speedup_and_both_runs() {
        let optimised = run(Speedups::default(), 2.0);
        assert_eq!(optimised.states_per_s, 5.0);
        let baseline = run(Speedups::NONE, 5.0);
        let report = TableBenchReport {
            table_speedup: ratio(baseline.seconds, optimised.seconds),
            verdicts_agree: true,
            optimised,
            baseline,
            differing_cells: Vec::new(),
            configs: vec!["ext2".into()],
            properties: vec!["a".into()],
            schedules: vec!["sync".into()],
            max_states: Some(5),
            jobs: 2,
            machine: Machine::here(),
            load_average: [1.0, 1.0],
        };
        assert_eq!(report.table_speedup, 2.5);
        let text = report.to_text();
        assert!(text.contains("table_speedup: 2.50x"), "{text}");
        assert!(text.contains("--no-recovered-dedup --fsck always --no-shared-setup"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["baseline"]["speedups"]["fsck"], "always");
        assert_eq!(json["optimised"]["seconds"], 2.0);
    }

    #[test]
    fn the_full_summary_names_the_target_every_phase_and_the_sample() {
        let sample = SampleRun {
            properties: vec!["a".into()],
            cells: 2,
            shortcuts_on_seconds: 4.0,
            shortcuts_off_seconds: 10.0,
            speedup: ratio(10.0, 4.0),
            differing_cells: Vec::new(),
        };
        let report = FullTableReport {
            configs: vec!["ext2".into()],
            skipped: vec!["jfs: no driver".into()],
            properties: vec!["a".into()],
            disk_models: vec!["512 B".into(), "4096 B".into()],
            schedules: vec!["sync".into()],
            recording: RecordingRun { seconds: 3.0, recordings: 3 },
            from_recordings: run(Speedups::default(), 2.0),
            with_recording: run(Speedups::default(), 2000.0),
            sample,
            target_seconds: FULL_TABLE_TARGET_SECONDS,
            target_met: false,
            jobs: 2,
            machine: Machine::here(),
            load_average: vec![[1.0, 2.0]; 4],
        };
        let text = report.to_text();
        assert!(text.contains("2000.0 s against a target of 1800 s: NOT met"), "{text}");
        assert!(text.contains("left out (cannot run on this kernel): jfs: no driver"), "{text}");
        assert!(text.contains("4.0 s of cell time with every shortcut on, 10.0 s"), "{text}");
        assert!(text.contains("2.50x"), "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["sample"]["speedup"], 2.5);
        assert_eq!(json["target_met"], false);
    }
}
