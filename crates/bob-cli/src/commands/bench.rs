//! `bob bench`: bob's engine against the naive per-state pipeline and the mount floor on
//! one list of crash states, plus the recorder's overhead (see `bob_core::bench`).
//! Exit 0 when both pipelines reach the same verdict on every state, 2 otherwise.

use bob_core::bench::{self, BenchOptions};
use bob_core::run::environment;

use crate::cli::BenchArgs;
use crate::error::{usage, CliError};
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// Runs `bob bench`.
pub fn run(args: BenchArgs) -> Result<Conclusion, CliError> {
    environment::check_runnable(&args.fs)?;
    let mut opts = BenchOptions::new(args.fs, args.property);
    opts.multi_block_bytes = args.multi_block_bytes.map(|b| b.0);
    opts.naive_sample = args.naive_sample.map(|n| n as usize);
    opts.floor_runs = args.floor_runs as usize;
    if let Some(j) = args.jobs {
        opts.jobs = j as usize;
    }
    opts.recorder_bytes = args
        .recorder_mib
        .checked_shl(20)
        .filter(|v| v >> 20 == args.recorder_mib)
        .ok_or_else(|| usage("--recorder-mib is too large"))?;
    opts.timeouts = options::timeouts(args.recovery_timeout);
    opts.scratch = args.scratch;

    let bars = Bars::phases(Bars::stderr_is_terminal());
    let report = bench::run(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::result(args.format, &report, || report.to_text())?;
    if let Some(d) = &report.first_disagreement {
        return Err(CliError::BenchDisagreement {
            count: report.disagreements,
            state: d.state.clone(),
            index: d.index,
            naive: d.naive.to_string(),
            engine: d.engine.to_string(),
        });
    }
    Ok(Conclusion::Done)
}
