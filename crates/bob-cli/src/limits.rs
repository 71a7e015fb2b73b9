//! The process's limit on open files, checked against `--jobs` before a command starts
//! anything: each worker holds a few descriptors at once (a loop device, its backing
//! file, a mount's, a program's pipes), and a worker that cannot open one does not fail
//! cleanly everywhere (a FUSE server thread that never starts leaves the main thread
//! waiting on bob's own mount for good). The soft limit is raised to the hard
//! one first, as any process may; what still does not fit is refused in one line saying
//! the limit and how to raise it.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

use crate::error::CliError;

/// Descriptors one worker holds at most at once, with room to spare: measured on ext2 /
/// single-block-append with `--strategy default,exhaustive`, 34 open at 4 workers and 140
/// at 32 (about 3.8 a worker).
pub const FILES_PER_JOB: u64 = 5;

/// Descriptors of the process beside its workers (the recorder, the FUSE disk, the
/// journal, the terminal, the progress bar), with room to spare (about 20 measured).
pub const FILES_BESIDE_JOBS: u64 = 64;

/// Raises the soft limit on open files to the hard limit, then refuses `jobs` workers
/// that would not fit under it.
pub fn open_files_for(jobs: usize) -> Result<(), CliError> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| CliError::Environment(format!("getrlimit(RLIMIT_NOFILE): {e}")))?;
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let needed = needed(jobs);
    if needed > limit {
        return Err(CliError::Usage(format!(
            "--jobs {jobs} needs about {needed} open files ({FILES_PER_JOB} per worker and \
             {FILES_BESIDE_JOBS} beside them), over this process's limit of {limit} (RLIMIT_NOFILE, \
             hard limit {hard}); give --jobs {} or fewer, or raise the limit (ulimit -Hn, \
             limits.conf, systemd's LimitNOFILE)",
            most_jobs(limit)
        )));
    }
    Ok(())
}

/// Open files `jobs` workers need.
pub fn needed(jobs: usize) -> u64 {
    (jobs as u64).saturating_mul(FILES_PER_JOB).saturating_add(FILES_BESIDE_JOBS)
}

/// The most workers that fit under `limit` open files (at least 1).
pub fn most_jobs(limit: u64) -> u64 {
    (limit.saturating_sub(FILES_BESIDE_JOBS) / FILES_PER_JOB).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_jobs_fit_and_one_more_does_not() {
        for limit in [1024, 20_000, 1 << 20] {
            let most = most_jobs(limit);
            assert!(needed(most as usize) <= limit);
            assert!(needed(most as usize + 1) > limit);
        }
        assert_eq!(needed(usize::MAX), u64::MAX);
    }
}
