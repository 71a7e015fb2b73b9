//! `bob check`: explore and check the crash states of a saved trace directory (recorded
//! by `bob record`, imported by `bob import --base`, or saved by `bob run --save-trace`),
//! judged by the user's checker or by recovery and fsck alone, and write the witness of
//! the first failure. The same generate -> engine -> cell -> witness steps as
//! [`super::run_cell`], over one recording and one disk model, with a user's judge.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::{environment, scratch_dir, Error, Exploration, Progress};
use crate::check::{self, EngineOptions, Judge, UserChecker};
use crate::crash::{self, FuaModel};
use crate::output::CheckReport;
use crate::report::{self, witness, Cell};
use crate::trace::sidecar::Sidecar;
use crate::trace::TraceDir;

/// What `bob check` checks, and how.
#[derive(Clone, Debug)]
pub struct CheckTraceOptions {
    /// The trace directory.
    pub dir: PathBuf,
    /// Shell command run in each recovered mount (exit 0 = consistent); `None`: recovery
    /// and the read-only fsck alone judge.
    pub checker: Option<String>,
    /// A checker run is killed (a timeout outcome) after this long.
    pub checker_timeout: Duration,
    /// Strategies, budget, workers, timeouts, output and scratch directories, shortcuts:
    /// as a cell's.
    pub explore: Exploration,
    /// The atomic write unit: exactly one.
    pub atomic_write_unit: crash::AtomicWriteUnits,
    /// What a FUA write means.
    pub fua: FuaModel,
}

/// Checks the crash states of the trace in `opts.dir` and writes the witness of the
/// first failure; stops with [`check::Error::Interrupted`] when `cancel` is set.
pub fn check_trace(
    opts: &CheckTraceOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<CheckReport, Error> {
    let started = Instant::now();
    let sidecar = Sidecar::load(&TraceDir::sidecar_path(&opts.dir))
        .map_err(|e| Error::Invalid(e.to_string()))?;
    if sidecar.base_image.file.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: the trace has no base image; import it with --base IMAGE",
            opts.dir.display()
        )));
    }
    if opts.checker.as_ref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::Invalid("the checker command is empty".into()));
    }
    let (mut subject, sidecar) = witness::load_subject(&opts.dir)?;
    environment::check(&subject.config)?;
    let block_size = subject.config.block_size();
    let models = super::disk_models(&opts.atomic_write_unit, opts.fua, block_size)?;
    match models.as_slice() {
        [model] => subject.set_disk(*model),
        _ => {
            return Err(Error::Invalid(
                "a trace is checked under one disk model at a time: give one atomic write unit"
                    .into(),
            ))
        }
    }
    let judge = match &opts.checker {
        Some(command) => Judge::Checker(UserChecker {
            command: command.clone(),
            timeout: opts.checker_timeout.max(Duration::from_secs(1)),
        }),
        None => Judge::Oracle,
    };
    let work = scratch_dir(opts.explore.scratch.as_deref())?;
    let engine = EngineOptions {
        jobs: opts.explore.jobs,
        timeouts: opts.explore.timeouts,
        speed: opts.explore.speed,
        judge: &judge,
        progress: &|d, t| progress.state_done(d, t),
        cancel,
        ..EngineOptions::new(work.path())
    };
    // The states are streamed into the engine; the bar grows until the stream ends.
    progress.phase("checking", 0);
    // A trace with a persistent-memory region: its states name both devices.
    let states = subject.crash_states(&opts.explore.strategies, &opts.explore.limits).states;
    let results = check::run_states(&subject, states, &engine)?;
    let label = match &opts.checker {
        Some(c) => format!("checker: {c}"),
        None => "fsck only".to_owned(),
    };
    let (mut cell, witness_index): (Cell, _) =
        Cell::of_results(subject.config.name, &label, &results);
    cell.disk_model = subject.disk;
    let positions: Vec<usize> = (0..results.len()).collect();
    let regions = subject.regions_if_unmountable(&results, opts.explore.timeouts.fsck);
    report::summarize_causes(&results, &positions, &subject, &regions).add_to(&mut cell);
    let mut report = CheckReport { cell, witness_description: None, checker_output: None };
    let dir = opts.explore.out_dir.join(subject.config.name).join("check");
    // The directory's witness is this run's (or none): an earlier one is removed, unless
    // the trace checked is read from there.
    let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    if real(&dir) != real(&opts.dir) {
        witness::remove_stale(&dir)?;
    }
    if let Some(i) = witness_index {
        let r = &results[i];
        let record = witness::StateRecord::of(r, &subject, None);
        witness::write(&dir, &subject, &sidecar, &record, &r.check)?;
        let io = |path: PathBuf| move |source| Error::Io { path, source };
        if let Some(out) = &r.check.checker_output {
            std::fs::write(dir.join("checker.txt"), out).map_err(io(dir.join("checker.txt")))?;
        }
        let acked = subject.acked_marks(&r.state.id).join("\n") + "\n";
        std::fs::write(dir.join("acked-marks.txt"), acked)
            .map_err(io(dir.join("acked-marks.txt")))?;
        report.cell.witness = Some(dir.display().to_string());
        report.cell.story = Some(format!("{} (state {})", record.story, record.id));
        report.cell.discrepancy = r.check.discrepancy.clone();
        report.cell.witness_state = Some(record.id.clone());
        report.witness_description = Some(record.description);
        report.checker_output = r.check.checker_output.clone();
    }
    report.cell.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
