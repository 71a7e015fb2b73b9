//! `bob check`: the crash states of a recorded trace, judged by the user's checker.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bob_core::output::Format;
use bob_core::run::{self, CheckTraceOptions};

use crate::cli::CheckArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::options;
use crate::print;
use crate::progress::Bars;
use crate::signals::CANCEL;

/// Runs `bob check`.
pub fn run(args: CheckArgs) -> Result<Conclusion, CliError> {
    let explore = &args.explore;
    let opts = CheckTraceOptions {
        dir: args.dir.clone(),
        checker: args.checker.clone(),
        checker_timeout: Duration::from_secs(args.timeout),
        explore: options::exploration(explore),
        atomic_write_unit: explore.atomic_write_unit.clone(),
        fua: explore.fua.into(),
    };
    let bars = Bars::states(args.format == Format::Text && Bars::stderr_is_terminal());
    let report = run::check_trace(&opts, &bars, &CANCEL);
    bars.finish();
    let report = report?;
    print::render(&report, args.format)?;
    if CANCEL.load(Ordering::Relaxed) {
        return Err(CliError::Interrupted);
    }
    Ok(Conclusion::Named(report.cell.verdict))
}
