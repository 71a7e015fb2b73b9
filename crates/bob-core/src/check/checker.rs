//! User checkers: a shell command judges a recovered crash state instead of the oracle.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, Outcome, StateCheck, Subject};
use crate::device::cmd;
use crate::fs::Timeouts;

/// Who decides whether a recovered crash state is consistent.
#[derive(Clone, Debug)]
pub enum Judge {
    /// The workload's in-memory oracle, from the logical snapshot (property workloads).
    Oracle,
    /// A user command run in the recovered mount (`bob check --checker`).
    Checker(UserChecker),
}

/// A user checker: a shell command run with the recovered mount as its working directory.
/// Exit 0 means consistent; anything else is a violation, with the output as evidence.
///
/// Its environment names the mount (`BOB_MOUNT`) and the marks the recorded program had
/// made by the time of the crash (`BOB_ACKED_MARKS`, a file with one mark per line;
/// `BOB_LAST_MARK`, the last of them), so that it can check that every acknowledged
/// operation survived.
#[derive(Clone, Debug)]
pub struct UserChecker {
    /// The command, run by `sh -c`.
    pub command: String,
    /// Killed (a timeout outcome) after this long.
    pub timeout: Duration,
}

/// Bytes of checker output kept per state.
const CHECKER_OUTPUT_MAX: usize = 16 * 1024;

/// What a checker run gave.
pub(super) struct CheckerRun {
    pub(super) code: Option<i32>,
    pub(super) output: String,
    pub(super) timed_out: bool,
}

pub(super) fn run_checker(
    checker: &UserChecker,
    mnt: &Path,
    acked: &[String],
) -> Result<CheckerRun, Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    // The marks file lives next to the mount point, never inside the crash state.
    let marks_path = mnt.with_extension("acked-marks");
    let mut text = acked.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(&marks_path, text).map_err(io(&marks_path))?;
    let script = format!("exec 2>&1\n{}", checker.command);
    let finished = cmd::Cmd::new("sh", checker.timeout)
        .args(&["-c", &script])
        .current_dir(mnt)
        .env("BOB_MOUNT", mnt)
        .env("BOB_ACKED_MARKS", &marks_path)
        .env("BOB_LAST_MARK", acked.last().map(String::as_str).unwrap_or(""))
        .keep_last(CHECKER_OUTPUT_MAX)
        // The mount is unmounted next: the checker's processes must be gone by then.
        .reap_after_kill()
        .finish();
    // Scratch in the check's work directory, which goes with it.
    let _ = std::fs::remove_file(&marks_path);
    let sh_failed = |source| Error::Io { path: PathBuf::from("sh"), source };
    Ok(match finished {
        Ok(cmd::Finished::Exited(out)) => {
            CheckerRun { code: out.code, output: out.stdout, timed_out: false }
        }
        Ok(cmd::Finished::TimedOut(out)) => {
            CheckerRun { code: None, output: out.stdout, timed_out: true }
        }
        Err(cmd::CmdError::Spawn { source, .. }) => return Err(sh_failed(source)),
        Err(e) => return Err(sh_failed(std::io::Error::other(e.to_string()))),
    })
}

/// The read-only fsck after a user checker ran, and the outcome from both.
pub(super) fn finish_checked(
    subject: &Subject,
    dev_str: &str,
    run: CheckerRun,
    checker: &UserChecker,
    timeouts: &Timeouts,
) -> Result<StateCheck, Error> {
    let config = &subject.config;
    let fsck = match config.fsck_on(Path::new(dev_str), timeouts.fsck) {
        Ok(complaint) => complaint,
        Err(cmd::CmdError::Timeout { .. }) => {
            return Ok(StateCheck {
                checker_output: Some(run.output),
                mounted: true,
                ..StateCheck::failed(Outcome::Timeout {
                    step: format!("fsck: {}", config.fsck.join(" ")),
                })
            })
        }
        Err(e) => return Err(crate::device::Error::from(e).into()),
    };
    Ok(checker_verdict(run, checker, fsck))
}

/// The verdict of a state a user checker judged, from its run and the read-only fsck's
/// complaint (if any), for kernel configurations and research designs alike.
pub(super) fn checker_verdict(
    run: CheckerRun,
    checker: &UserChecker,
    fsck: Option<String>,
) -> StateCheck {
    let last_line = run.output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let outcome = if run.timed_out {
        Outcome::Timeout {
            step: format!(
                "checker {:?} after {:.0}s",
                checker.command,
                checker.timeout.as_secs_f64()
            ),
        }
    } else if run.code == Some(0) {
        match &fsck {
            Some(msg) => Outcome::FsckFailed { message: msg.clone() },
            None => Outcome::Held,
        }
    } else {
        let how = match run.code {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".into(),
        };
        Outcome::Violated { story: format!("checker {how}: {last_line}") }
    };
    // Memory stays flat over many states: only failures keep what the checker said.
    let checker_output = (outcome != Outcome::Held).then_some(run.output);
    StateCheck { fsck, checker_output, mounted: true, ..StateCheck::failed(outcome) }
}
