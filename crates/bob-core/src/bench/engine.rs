//! bob's engine as the benchmark runs it.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::{io_err, BenchOptions, Error};
use crate::check::{self, EngineOptions, StateResult, Subject};
use crate::crash::CrashState;
use crate::run::Progress;

/// bob's engine with its defaults over `states`, in its own scratch subdirectory.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_states(
    subject: &Subject,
    states: &[CrashState],
    work: &Path,
    name: &str,
    jobs: usize,
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Vec<StateResult>, Error> {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let engine = EngineOptions {
        jobs: jobs.max(1),
        timeouts: options.timeouts,
        progress: &|d, t| progress.state_done(d, t),
        cancel,
        ..EngineOptions::new(dir)
    };
    check::run_states(subject, states.iter().cloned(), &engine).map_err(|e| match e {
        check::Error::Interrupted => Error::Interrupted,
        e => e.into(),
    })
}
