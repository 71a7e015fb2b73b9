//! Exit codes, in one place, and the one exhaustive match from a command's end (a
//! conclusion or a [`CliError`]) to them. Verdicts map through bob-core's table of
//! outcomes ([`OutcomeKind`]); docs/outcomes.md documents this file.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | every property held (or was not exercised, or a table's column cannot run here) |
//! | 1 | a violation, or any failure of a crash state (the outcomes with exit 1); `bob explore`: a signature not listed as known; `bob bench --recall`: a known bug missed, or a false alarm on a fixed kernel |
//! | 2 | usage or environment error, or bob failed (also `infra-error`: a crash state bob could not check, and no failure found elsewhere): nothing concluded about the file system |
//! | 130 | interrupted (SIGINT, SIGTERM): nothing concluded |
//!
//! `bob diff` exits 0 when no verdict changed and 1 when one did (2 on error).
//!
//! The documented exception: `bob log` (and bob invoked as `replay-log`) exits as
//! xfstests' replay-log does, so that scripts written for it see the same statuses.

use bob_core::check::OutcomeKind;

use crate::error::CliError;

/// Every property held over every state explored.
pub const HELD: u8 = 0;
/// A violation, or a failure of a crash state (needs-repair, unrecoverable, read-error,
/// fsck-failed, timeout).
pub const FOUND: u8 = 1;
/// Usage or environment error, or bob could not check every crash state (`infra-error`):
/// nothing was concluded about the file system.
pub const ERROR: u8 = 2;
/// Interrupted by SIGINT or SIGTERM (128 + 2, as a shell reports a SIGINT death).
pub const INTERRUPTED: u8 = 130;

/// What a command that ran to its end concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conclusion {
    /// A command that judges nothing (list, import, explain, ...) succeeded.
    Done,
    /// The verdict of what the user named (`bob run`, `bob check`, `bob replay --check`):
    /// a configuration that cannot run here is an environment error.
    Named(OutcomeKind),
    /// The worst verdict of a table (`bob table`, `bob merge`): a column that cannot run
    /// here is listed, not failed.
    Table(OutcomeKind),
    /// replay-log's own exit status (`bob log`).
    ReplayLog(u8),
    /// `bob diff`: whether some cell's verdict changed (exit 1, so that CI can gate on it).
    Changed(bool),
    /// The same command run on other kernels (`--kernel`): the highest exit code of its
    /// runs, each already mapped by the bob that ran it.
    Guest(u8),
    /// `bob bench --recall`: entries that did not come out as the recall catalog expects
    /// (a known bug missed or found with another outcome, a false alarm on a fixed
    /// kernel), and entries bob could not run.
    Recall {
        /// Entries against the catalog's expectation.
        misses: usize,
        /// Entries bob could not run or check.
        errors: usize,
    },
    /// `bob explore`: signatures found, and runs bob could not complete.
    Explored {
        /// Signatures.
        signatures: usize,
        /// Runs that failed for bob's own reasons.
        errors: usize,
    },
}

impl Conclusion {
    /// A table's conclusion: its worst cell.
    pub fn of_table(grid: &bob_core::report::table::Grid) -> Conclusion {
        Conclusion::Table(OutcomeKind::worst(grid.cells.iter().map(|c| c.verdict)))
    }
}

/// The exit code of a command's end.
pub fn code(end: &Result<Conclusion, CliError>) -> u8 {
    match end {
        Ok(Conclusion::Done) => HELD,
        Ok(Conclusion::Named(OutcomeKind::Unavailable)) => ERROR,
        Ok(Conclusion::Named(kind) | Conclusion::Table(kind)) => of_outcome(*kind),
        Ok(Conclusion::ReplayLog(status)) => *status,
        Ok(Conclusion::Guest(code)) => *code,
        Ok(Conclusion::Changed(changed)) => u8::from(*changed),
        Ok(
            Conclusion::Explored { signatures: misses, errors }
            | Conclusion::Recall { misses, errors },
        ) => match (misses, errors) {
            (0, 0) => HELD,
            (0, _) => ERROR,
            _ => FOUND,
        },
        Err(CliError::Interrupted) => INTERRUPTED,
        Err(
            CliError::Usage(_)
            | CliError::Environment(_)
            | CliError::Run(_)
            | CliError::Witness(_)
            | CliError::Site(_)
            | CliError::Device(_)
            | CliError::Bench(_)
            | CliError::Io { .. }
            | CliError::Output(_)
            | CliError::Log(_)
            | CliError::BenchDisagreement { .. }
            | CliError::CleanupIncomplete(_)
            | CliError::CommandFailed { .. },
        ) => ERROR,
    }
}

/// The exit code of a verdict: its row of the outcome table.
fn of_outcome(kind: OutcomeKind) -> u8 {
    kind.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's codes are the outcome table's own column, and each is one of its codes.
    #[test]
    fn verdicts_exit_as_the_outcome_table_says() {
        for kind in OutcomeKind::ALL {
            assert!([HELD, FOUND, ERROR].contains(&of_outcome(kind)), "{kind}");
            assert_eq!(code(&Ok(Conclusion::Table(kind))), kind.exit_code(), "{kind}");
        }
        assert_eq!(code(&Ok(Conclusion::Named(OutcomeKind::Unavailable))), ERROR);
        assert_eq!(code(&Err(CliError::Interrupted)), INTERRUPTED);
        assert_eq!(code(&Err(CliError::Usage("x".into()))), ERROR);
        assert_eq!(code(&Ok(Conclusion::ReplayLog(1))), 1);
    }
}
