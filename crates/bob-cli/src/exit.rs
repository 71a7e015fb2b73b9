//! Exit codes, in one place, and the one exhaustive mapping from errors to them.

use std::process::ExitCode;

/// Every property held over every state explored.
pub const HELD: u8 = 0;
/// A violation, or a failure of a crash state (needs-repair, unrecoverable, read-error,
/// fsck-failed, timeout): every kind whose `OutcomeKind::exit_code` is 1.
pub const VIOLATION: u8 = 1;
/// Usage or environment error: nothing was concluded about the file system.
pub const ERROR: u8 = 2;

/// Maps a library error to its exit code and prints it as one line.
pub fn report(err: &(dyn std::error::Error + 'static)) -> ExitCode {
    eprintln!("bob: error: {err}");
    ExitCode::from(ERROR)
}
