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

use super::machine::{load_average, machine};
use super::stats::{per_s, ratio};
use super::{io_err, Error, Machine};
use crate::check::Speedups;
use crate::report::table::Grid;
use crate::report::Cell;
use crate::run::{self, Progress, TableOptions, TableProgress, WorkDir};

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
    /// `states_explored / seconds`.
    pub states_per_s: f64,
    /// Recordings whose file system was made by mkfs.
    pub setup_made: usize,
    /// Recordings that started from a copy of a file system made earlier in the run.
    pub setup_reused: usize,
}

/// Runs `table` twice, with its shortcuts on and all off (its own `speed` is ignored),
/// each writing its tables into a scratch directory of its own.
pub fn run_table_bench(
    table: &TableOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<TableBenchReport, Error> {
    let load_start = load_average();
    let scratch = table.cell.explore.scratch.clone();
    let work = WorkDir::new(scratch.as_deref())
        .map_err(io_err(&scratch.clone().unwrap_or_else(std::env::temp_dir)))?;
    let run_with = |name: &'static str, speedups: Speedups| -> Result<_, Error> {
        let mut opts = table.clone();
        opts.cell.explore.speed = speedups;
        opts.cell.explore.out_dir = work.path().join(name);
        opts.cell.resume = false;
        opts.cell.setup_cache = None;
        let started = Instant::now();
        let grid = run::run_table(&opts, &Phases { progress, name }, cancel).map_err(|e| {
            if e.is_interrupted() {
                Error::Interrupted
            } else {
                Error::Table(Box::new(e))
            }
        })?;
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
        machine: machine(),
        load_average: [load_start, load_average()],
    })
}

impl TableRun {
    fn of(grid: &Grid, speedups: Speedups, seconds: f64) -> TableRun {
        let states_explored = grid.cells.iter().map(|c| c.states_explored).sum();
        TableRun {
            speedups,
            seconds,
            cells: grid.cells.len(),
            states_explored,
            states_mounted: grid.cells.iter().map(|c| c.states_mounted).sum(),
            states_reads_reused: grid.cells.iter().map(|c| c.reads_reused).sum(),
            states_per_s: per_s(states_explored, seconds),
            setup_made: grid.cells.iter().map(|c| c.setup_made).sum(),
            setup_reused: grid.cells.iter().map(|c| c.setup_reused).sum(),
        }
    }
}

/// The cells, matched by configuration, property and disk model, whose verdicts differ.
fn differing_verdicts(a: &[Cell], b: &[Cell]) -> Vec<String> {
    let key = |c: &Cell| (c.config.clone(), c.property.clone(), c.disk_model);
    let mut out = Vec::new();
    for x in a {
        let y = b.iter().find(|y| key(y) == key(x));
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
            format!(
                "{name}: {:.1} s, {} cells, {} states explored ({} mounted, {} of them reusing an \
                 earlier state's check by reads), {:.1} states/s; mkfs {} times, reused {}\n",
                r.seconds,
                r.cells,
                r.states_explored,
                r.states_mounted,
                r.states_reads_reused,
                r.states_per_s,
                r.setup_made,
                r.setup_reused
            )
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
            machine: machine(),
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
}
