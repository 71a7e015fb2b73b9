//! `bob replay`: rebuild a witness's crash image and, with `--check`, check it again.

use std::sync::atomic::Ordering;

use bob_core::run::{self, ReplayOptions};

use crate::cli::ReplayArgs;
use crate::error::CliError;
use crate::exit::Conclusion;
use crate::print;
use crate::signals::CANCEL;

/// Runs `bob replay`.
pub fn run(args: ReplayArgs) -> Result<Conclusion, CliError> {
    let report = run::replay_witness(&ReplayOptions {
        witness: args.witness,
        to: args.to,
        state: args.state,
        check: args.check,
        scratch: None,
    })?;
    print::result(args.format, &report, || report.to_text())?;
    if CANCEL.load(Ordering::Relaxed) {
        return Err(CliError::Interrupted);
    }
    Ok(Conclusion::Named(report.verdict()))
}
