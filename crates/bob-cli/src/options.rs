//! The second stage of arguments: parsed syntax ([`crate::cli`]) into bob-core options.
//! Nothing here touches the machine; what only the machine or the trace can refuse is the
//! library's to refuse.

use std::time::Duration;

use bob_core::crash::{Limits, Strategy};
use bob_core::fs::{FsConfig, Timeouts};
use bob_core::run::{self, RunOptions};
use workloads::{Property, Schedule};

use crate::cli::{CellArgs, ExploreArgs, StrategySet};
use crate::error::CliError;

/// The strategies `--strategy` names, in order, without repeats.
pub fn strategies(sets: &[StrategySet]) -> Vec<Strategy> {
    let mut out: Vec<Strategy> = sets.iter().flat_map(|s| s.0.iter().copied()).collect();
    out.dedup();
    out
}

/// Default workers per core. A worker spends much of a state waiting on I/O (mount,
/// journal replay, unmount, fsck), so more workers than cores overlap those waits:
/// measured on 2 cores over 1,500 states (docs/performance.md, "How many workers"), xfs
/// took 66 s at 2 workers, 49 s at 4 and 44 s at 6 (medians of 3); ext4-ordered 32, 30
/// and 33 s (flat within the noise). Twice the cores takes most of xfs's gain without
/// more loop devices and mounts than that buys.
const JOBS_PER_CORE: usize = 2;

/// `--jobs`, or [`JOBS_PER_CORE`] times the number of cores.
pub fn jobs(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| JOBS_PER_CORE * bob_core::host::cores())
}

/// Step timeouts with `--recovery-timeout`, stretched in a guest under emulation
/// (`bob_core::vm::step_time_factor`): the flag is in a host's seconds.
pub fn timeouts(recovery_seconds: u64) -> Timeouts {
    let host = Timeouts { recovery: Duration::from_secs(recovery_seconds), ..Timeouts::default() };
    let factor = bob_core::vm::step_time_factor();
    Timeouts {
        mkfs: host.mkfs * factor,
        recovery: host.recovery * factor,
        fsck: host.fsck * factor,
    }
}

/// The options of one cell from the shared exploration arguments.
pub fn run_options(
    config: FsConfig,
    property: Property,
    explore: &ExploreArgs,
    cell: &CellArgs,
    schedules: &[Schedule],
) -> Result<RunOptions, CliError> {
    let disk_models =
        run::disk_models(&explore.atomic_write_unit, explore.fua.into(), config.block_size())
            .map_err(|e| crate::error::usage(format!("--atomic-write-unit: {e}")))?;
    Ok(RunOptions {
        config,
        property,
        device: None,
        recorder: Default::default(),
        explore: exploration(explore),
        trace: None,
        save_trace: None,
        shard: cell.shard.map(|s| (s.index, s.count)),
        workload: None,
        resume: cell.resume,
        disk_models,
        schedules: schedules.to_vec(),
        recordings: cell.recordings,
        flip_history: cell
            .flip_history
            .as_deref()
            .map(run::FlipHistory::load)
            .transpose()
            .map_err(|e| CliError::Environment(e.to_string()))?
            .map(std::sync::Arc::new),
        setup_cache: None,
    })
}

/// What `bob run`, `bob table` and `bob check` share of their options.
pub fn exploration(explore: &ExploreArgs) -> run::Exploration {
    run::Exploration {
        strategies: strategies(&explore.strategy),
        limits: limits(explore),
        jobs: jobs(explore.jobs),
        timeouts: timeouts(explore.recovery_timeout),
        out_dir: explore.out.clone(),
        scratch: explore.scratch.clone(),
        speed: explore.speedups(),
    }
}

/// `--max-states` and `--seed`.
pub fn limits(explore: &ExploreArgs) -> Limits {
    Limits { max_states: explore.max_states, seed: explore.seed, ..Limits::default() }
}

/// Adds a finished run's recordings to `--flip-history`, when this process made them: not
/// a guest's share of a run (the process that booted the guests adds the whole table) nor
/// a check of saved recordings (`checked_saved`: `--trace`, `--traces`, a shard), which
/// an earlier run has counted already.
pub fn add_to_flip_history(
    cell: &CellArgs,
    kernel: &str,
    cells: &[bob_core::report::Cell],
    checked_saved: bool,
) -> Result<(), CliError> {
    let Some(path) = &cell.flip_history else { return Ok(()) };
    if checked_saved || cell.shard.is_some() || std::env::var_os(bob_core::vm::GUEST_ENV).is_some()
    {
        return Ok(());
    }
    let fail = |e: bob_core::run::flip_history::Error| CliError::Environment(e.to_string());
    let mut history = run::FlipHistory::load(path).map_err(fail)?;
    history.add_run(kernel, cells);
    history.save(path).map_err(fail)?;
    let flipping = history.flipping().len();
    eprintln!(
        "bob: flip history {}: this run's recordings added; {flipping} schedule(s) seen flipping",
        path.display()
    );
    Ok(())
}
