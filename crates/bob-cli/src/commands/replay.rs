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
    if args.recovery_crashes {
        // The state: the one named, or the witness's own.
        let state = match &args.state {
            Some(s) => s.clone(),
            None => run::witness_state(&args.witness)?,
        };
        let r = run::recovery::recovery_idempotent(&run::recovery::RecoveryOptions {
            trace: args.witness.clone(),
            state,
            max_states: args.max_states,
            timeouts: bob_core::fs::Timeouts::default(),
            scratch: None,
        })?;
        print::render(&r, args.format)?;
        if CANCEL.load(Ordering::Relaxed) {
            return Err(CliError::Interrupted);
        }
        return Ok(Conclusion::Named(r.verdict));
    }
    let Some(to) = args.to else {
        return Err(crate::error::usage("bob replay: --to IMAGE is required"));
    };
    let report = run::replay_witness(&ReplayOptions {
        witness: args.witness,
        to,
        force: args.force,
        state: args.state,
        check: args.check,
        scratch: None,
        pm_out: args.pm_out,
    })?;
    print::render(&report, args.format)?;
    if CANCEL.load(Ordering::Relaxed) {
        return Err(CliError::Interrupted);
    }
    Ok(Conclusion::Named(report.verdict()))
}
