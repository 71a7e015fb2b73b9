//! External commands (mkfs, fsck, recovery tools) run with a timeout.
//!
//! A waiter thread blocks in `wait()` while the caller waits on a channel with a deadline,
//! so a fast command costs no polling latency and a hung one is killed (its whole process
//! group) when the deadline passes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What a finished command produced.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit code (`None` if killed by a signal).
    pub code: Option<i32>,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// The last non-empty line of stderr, else of stdout: what a one-line report shows.
    pub fn last_line(&self) -> String {
        let pick = |s: &str| s.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_owned);
        pick(&self.stderr).or_else(|| pick(&self.stdout)).unwrap_or_default()
    }
}

/// Why a command did not give an [`Output`].
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    /// The program is not installed.
    #[error("{program}: not found; install it (Debian: apt-get install {package})")]
    NotFound {
        /// Program name.
        program: String,
        /// Debian package that provides it.
        package: String,
    },
    /// Spawning failed for another reason.
    #[error("{program}: cannot start: {source}")]
    Spawn {
        /// Program name.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The deadline passed; the process group was killed.
    #[error("{program} timed out after {seconds:.1}s and was killed")]
    Timeout {
        /// Program name.
        program: String,
        /// The deadline.
        seconds: f64,
    },
}

/// The Debian package that provides `program`, for error messages.
pub fn package_of(program: &str) -> &'static str {
    match program {
        p if p.starts_with("mkfs.xfs") || p.starts_with("xfs_") => "xfsprogs",
        p if p.starts_with("mkfs.btrfs") || p.starts_with("btrfs") => "btrfs-progs",
        p if p.starts_with("mkfs.ext") || p.starts_with("e2fsck") || p.starts_with("mke2fs") => {
            "e2fsprogs"
        }
        "sqlite3" => "sqlite3",
        _ => "the package that provides it",
    }
}

/// Whether `program` is on PATH (or an existing path).
pub fn available(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// Runs `program args` with no stdin, capturing output, killing it after `timeout`.
pub fn run(program: &str, args: &[&str], timeout: Duration) -> Result<Output, CmdError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout kills helpers it forked too, and a Ctrl-C
        // meant for bob reaches bob, which then cleans up in order.
        .process_group(0);
    let mut child = command.spawn().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            CmdError::NotFound {
                program: program.to_owned(),
                package: package_of(program).to_owned(),
            }
        } else {
            CmdError::Spawn { program: program.to_owned(), source }
        }
    })?;
    let pid = child.id() as i32;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        // stderr is read on a second thread so neither pipe can fill and block the child.
        let err_reader = stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = e.read_to_end(&mut buf);
                buf
            })
        });
        if let Some(o) = stdout.as_mut() {
            let _ = o.read_to_end(&mut out);
        }
        if let Some(h) = err_reader {
            err = h.join().unwrap_or_default();
        }
        let status = child.wait();
        let _ = tx.send((status, out, err));
    });
    match rx.recv_timeout(timeout) {
        Ok((status, out, err)) => {
            let _ = waiter.join();
            let code = status.ok().and_then(|s| s.code());
            Ok(Output {
                code,
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            })
        }
        Err(_) => {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            // The waiter reaps the child once the kill lands; it is not joined here, because a
            // process stuck in the kernel (D state) may take its time to die.
            Err(CmdError::Timeout { program: program.to_owned(), seconds: timeout.as_secs_f64() })
        }
    }
}
