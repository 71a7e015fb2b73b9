//! External commands (mkfs, fsck, recovery tools, user checkers) run with a timeout:
//! [`Cmd`] is the one place bob starts a program, whether it must end by a deadline
//! ([`Cmd::run`]), runs beside bob until bob stops it ([`Cmd::spawn_logged`],
//! [`Cmd::spawn_piped`]), or is the user's own command on bob's terminal
//! ([`Cmd::run_attached`]).
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
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// Exit code (`None` if killed by a signal).
    pub code: Option<i32>,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

/// How a program ended (`code`: its exit code, `None` if a signal killed it), as a report
/// says it: `exit 1`, or `killed by a signal`.
pub fn exit_text(code: Option<i32>) -> String {
    match code {
        Some(code) => format!("exit {code}"),
        None => "killed by a signal".into(),
    }
}

impl Output {
    /// How the program ended: [`exit_text`] of its code.
    pub fn exit_text(&self) -> String {
        exit_text(self.code)
    }

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
pub(crate) fn package_of(program: &str) -> &'static str {
    match program {
        p if p.starts_with("mkfs.xfs") || p.starts_with("xfs_") => "xfsprogs",
        p if p.starts_with("mkfs.btrfs") || p.starts_with("btrfs") => "btrfs-progs",
        p if p.starts_with("mkfs.ext") || p.starts_with("e2fsck") || p.starts_with("mke2fs") => {
            "e2fsprogs"
        }
        p if p.ends_with(".f2fs") => "f2fs-tools",
        p if p.ends_with(".nilfs2") || p.starts_with("nilfs") => "nilfs-tools",
        p if p.ends_with(".jfs") || p.starts_with("jfs_") => "jfsutils",
        p if p.contains("reiserfs") => "reiserfsprogs",
        "modprobe" => "kmod",
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
    Cmd::new(program, timeout).args(args).run()
}

/// One external command to run: bob's single way of starting a program that must end
/// (mkfs, fsck, repair tools, a user's checker). The program runs with no stdin, in its
/// own process group, its output captured; when `timeout` passes the whole group is
/// killed.
#[derive(Debug)]
pub struct Cmd {
    program: String,
    command: Command,
    timeout: Duration,
    keep_last: Option<usize>,
    reap_after_kill: bool,
    input: Option<&'static str>,
}

impl Cmd {
    /// `program` (a name on PATH or a path), killed after `timeout`.
    pub fn new(program: &str, timeout: Duration) -> Cmd {
        Cmd {
            program: program.to_owned(),
            command: Command::new(program),
            timeout,
            keep_last: None,
            reap_after_kill: false,
            input: None,
        }
    }

    /// Appends arguments.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: &[S]) -> Cmd {
        self.command.args(args);
        self
    }

    /// Runs it in `dir`.
    pub fn current_dir(mut self, dir: &std::path::Path) -> Cmd {
        self.command.current_dir(dir);
        self
    }

    /// Sets an environment variable for it.
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.command.env(key, value);
        self
    }

    /// Keeps only the last `bytes` of each output stream, so that a chatty program (a
    /// user's checker, run once per crash state) cannot grow bob's memory.
    pub(crate) fn keep_last(mut self, bytes: usize) -> Cmd {
        self.keep_last = Some(bytes);
        self
    }

    /// Gives it `text` on its standard input, then end of file (without it, standard
    /// input is empty): the answers a repair tool reads from the terminal when it asks
    /// before acting (`reiserfsck --rebuild-tree` wants `Yes`).
    pub(crate) fn stdin(mut self, text: &'static str) -> Cmd {
        self.input = Some(text);
        self
    }

    /// On timeout, waits until the killed group has closed its output and the program is
    /// reaped, and returns what it printed ([`Finished::TimedOut`]). For a program that
    /// runs inside a mount bob unmounts next (a user checker): its processes must be gone
    /// first. Without it a timeout returns at once, because a process stuck in the kernel
    /// (D state, as a hung mkfs can be) may take its time to die.
    pub(crate) fn reap_after_kill(mut self) -> Cmd {
        self.reap_after_kill = true;
        self
    }

    /// Runs it to the end; a timeout is an error ([`CmdError::Timeout`]).
    pub fn run(self) -> Result<Output, CmdError> {
        let (program, timeout) = (self.program.clone(), self.timeout);
        match self.finish()? {
            Finished::Exited(out) => Ok(out),
            Finished::TimedOut(_) => {
                Err(CmdError::Timeout { program, seconds: timeout.as_secs_f64() })
            }
        }
    }

    /// Runs it to the end or to its timeout, and says which.
    pub fn finish(mut self) -> Result<Finished, CmdError> {
        let program = self.program;
        self.command
            .stdin(if self.input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills helpers it forked too, and a
            // Ctrl-C meant for bob reaches bob, which then cleans up in order.
            .process_group(0);
        default_signals(&mut self.command);
        let mut child = self.command.spawn().map_err(|source| not_started(&program, source))?;
        let pid = child.id() as i32;
        if let (Some(text), Some(mut pipe)) = (self.input, child.stdin.take()) {
            // A few bytes, far below a pipe's buffer: the write does not wait for the
            // program to read. A program that exits without reading gives EPIPE, which
            // says nothing about it; dropping the pipe is the end of file.
            let _ = std::io::Write::write_all(&mut pipe, text.as_bytes());
        }
        let keep = self.keep_last;
        // Each pipe is drained on its own thread so neither can fill and block the child.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || pipe.map(|p| read_tail(p, keep)).unwrap_or_default())
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let out = stdout.join().unwrap_or_default();
            let err = stderr.join().unwrap_or_default();
            let status = child.wait();
            let _ = tx.send(());
            Output {
                code: status.ok().and_then(|s| s.code()),
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            }
        });
        match rx.recv_timeout(self.timeout) {
            Ok(()) => Ok(Finished::Exited(waiter.join().unwrap_or_else(|_| Output::default()))),
            Err(_) => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                // Without reap_after_kill the waiter reaps the child once the kill lands;
                // it is not joined here.
                let out = match self.reap_after_kill {
                    true => waiter.join().unwrap_or_else(|_| Output::default()),
                    false => Output::default(),
                };
                Ok(Finished::TimedOut(Output { code: None, ..out }))
            }
        }
    }
}

impl Cmd {
    /// Starts it in the background with both output streams appended to `log`, for a
    /// program that runs as long as its caller decides (a virtual machine): no timeout
    /// of its own; the returned [`Background`] kills its process group when dropped.
    pub(crate) fn spawn_logged(mut self, log: &std::path::Path) -> Result<Background, CmdError> {
        let program = self.program;
        let spawn_error =
            |source: std::io::Error| CmdError::Spawn { program: program.clone(), source };
        let file =
            std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(spawn_error)?;
        let err = file.try_clone().map_err(spawn_error)?;
        self.command.stdin(Stdio::null()).stdout(file).stderr(err).process_group(0);
        default_signals(&mut self.command);
        let child = self.command.spawn().map_err(|source| not_started(&program, source))?;
        Ok(Background { child, program })
    }

    /// Starts it in the background with its output streams piped to bob
    /// ([`Background::take_stdout`], [`Background::take_stderr`]), for a program whose
    /// output bob reads while it runs (a live blktrace): no timeout of its own.
    pub(crate) fn spawn_piped(mut self) -> Result<Background, CmdError> {
        let program = self.program;
        self.command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        default_signals(&mut self.command);
        let child = self.command.spawn().map_err(|source| not_started(&program, source))?;
        Ok(Background { child, program })
    }

    /// Runs it attached to bob's terminal and returns its exit code (`None`: killed by a
    /// signal). It inherits standard input, output and error and stays in bob's process
    /// group, so a Ctrl-C reaches it as it reaches bob: for a command the user gave
    /// (`bob record -- CMD`, replay-log's fsck command), which may run as long as they
    /// like when given [`UNBOUNDED`]. At the timeout the program alone is killed.
    pub fn run_attached(self) -> Result<Option<i32>, CmdError> {
        self.attached(false).map(|(code, _)| code)
    }

    /// As [`Cmd::run_attached`], with its standard output kept instead of passed on
    /// (another bob whose JSON the caller reads; its standard error still reaches the
    /// terminal).
    pub fn run_attached_keeping_stdout(self) -> Result<(Option<i32>, Vec<u8>), CmdError> {
        self.attached(true)
    }

    fn attached(mut self, keep_stdout: bool) -> Result<(Option<i32>, Vec<u8>), CmdError> {
        let program = self.program;
        if keep_stdout {
            self.command.stdout(Stdio::piped());
        }
        let mut child = self.command.spawn().map_err(|source| not_started(&program, source))?;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let mut stdout = Vec::new();
            if let Some(mut pipe) = child.stdout.take() {
                // Read to its end before waiting, so a full pipe never stalls the child;
                // a read error leaves what was read.
                let _ = std::io::Read::read_to_end(&mut pipe, &mut stdout);
            }
            let status = child.wait();
            let _ = tx.send(());
            (status.ok().and_then(|s| s.code()), stdout)
        });
        match rx.recv_timeout(self.timeout) {
            Ok(()) => Ok(waiter.join().unwrap_or((None, Vec::new()))),
            Err(_) => {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = waiter.join();
                Err(CmdError::Timeout { program, seconds: self.timeout.as_secs_f64() })
            }
        }
    }
}

/// The timeout of a program that has none: the user's own command, which they end.
pub const UNBOUNDED: Duration = Duration::MAX;

/// A program started with [`Cmd::spawn_logged`] or [`Cmd::spawn_piped`]. Dropping it
/// kills its whole process group and reaps it, so an error, a panic or Ctrl-C in bob
/// leaves no program behind.
#[derive(Debug)]
pub struct Background {
    child: std::process::Child,
    program: String,
}

impl Background {
    /// Its standard output, once ([`Cmd::spawn_piped`]).
    pub(crate) fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Its standard error, once ([`Cmd::spawn_piped`]).
    pub(crate) fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// Sends SIGINT to its process group: asks it to stop as a person at a terminal
    /// would, so it flushes what it holds.
    pub fn interrupt(&self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
    }

    /// Its exit code once it has ended (`Some(None)`: killed by a signal), `None` while
    /// it runs.
    pub(crate) fn try_wait(&mut self) -> Option<Option<i32>> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code()),
            Ok(None) => None,
            Err(_) => Some(None),
        }
    }

    /// Waits for its end and gives its exit code (`None`: killed by a signal).
    pub fn wait(&mut self) -> Option<i32> {
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// Kills its process group and waits for it.
    pub fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }

    /// The program's name, for messages.
    pub fn program(&self) -> &str {
        &self.program
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Why `program` did not start: not installed (with the package that has it), or another
/// OS error.
fn not_started(program: &str, source: std::io::Error) -> CmdError {
    if source.kind() == std::io::ErrorKind::NotFound {
        CmdError::NotFound { package: package_of(program).to_owned(), program: program.to_owned() }
    } else {
        CmdError::Spawn { program: program.to_owned(), source }
    }
}

/// How a [`Cmd`] ended.
#[derive(Debug, Clone)]
pub enum Finished {
    /// It exited (or was killed by a signal not of bob's).
    Exited(Output),
    /// The timeout passed and bob killed its process group; what it printed until then
    /// (empty unless [`Cmd::reap_after_kill`]).
    TimedOut(Output),
}

/// Reads `pipe` to its end, keeping only the last `keep` bytes when a limit is given.
fn read_tail(mut pipe: impl Read, keep: Option<usize>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(keep) = keep else {
        let _ = pipe.read_to_end(&mut kept);
        return kept;
    };
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        // Trimmed at twice the limit, so a long stream is not shifted on every read.
        if kept.len() > 2 * keep {
            kept.drain(..kept.len() - keep);
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
    kept
}

/// Runs a blocking call that is not a program (a mount(2), a research design's mount) on
/// its own thread, and gives up on it after `timeout`: `None` then. The call itself cannot
/// be killed; when it returns late, its result is dropped on that thread, so a guard it
/// made (a mount) is released there.
pub(crate) fn call_within<T: Send + 'static>(
    timeout: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call());
    });
    rx.recv_timeout(timeout).ok()
}

/// Gives the program the default actions for SIGINT and SIGTERM. A process started in
/// the background by a non-interactive shell (`bob ... &`, nohup) has SIGINT ignored, and
/// an ignored signal stays ignored across exec: without this, `Background::interrupt`
/// would not end a program bob started there. A signal this process handles (bob's CLI
/// handles both) is reset by exec anyway, so the hook is added only while one of them is
/// ignored here: with a `pre_exec` hook std forks the whole process instead of using
/// posix_spawn, and copying bob's page tables for every e2fsck, then tearing them down
/// at its exec, was a fifth of the CPU of a table run.
fn default_signals(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    if !ignored(libc::SIGINT) && !ignored(libc::SIGTERM) {
        return;
    }
    // SAFETY: signal(2) is async-signal-safe, which is all a pre_exec hook may call.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// Whether this process ignores `signal` (its action is SIG_IGN).
fn ignored(signal: libc::c_int) -> bool {
    // SAFETY: sigaction(2) with no new action only reads the current one into `current`,
    // a zeroed struct it owns.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_captured_and_a_missing_program_is_named() {
        let out =
            run("sh", &["-c", "echo out; echo err >&2; exit 3"], Duration::from_secs(10)).unwrap();
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
        assert_eq!(out.last_line(), "err");
        let err = run("bob-no-such-program", &[], Duration::from_secs(1)).unwrap_err();
        assert!(err.to_string().starts_with("bob-no-such-program: not found"), "{err}");
    }

    #[test]
    fn a_timeout_kills_the_group_and_reaping_keeps_the_tail_of_the_output() {
        let err = run("sh", &["-c", "sleep 30"], Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, CmdError::Timeout { .. }), "{err}");
        assert!(err.to_string().starts_with("sh timed out after 0.1s"), "{err}");
        let started = std::time::Instant::now();
        // A forked helper (the subshell's sleep) holds the pipe: it must die too.
        let finished = Cmd::new("sh", Duration::from_millis(200))
            .args(&["-c", "head -c 5000 /dev/zero | tr '\\0' a; echo; echo last; (sleep 30)"])
            .keep_last(10)
            .reap_after_kill()
            .finish()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        match finished {
            Finished::TimedOut(out) => assert_eq!(out.stdout, "aaaa\nlast\n"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_attached_program_gives_its_exit_code_and_a_piped_one_its_output() {
        let code = Cmd::new("sh", UNBOUNDED).args(&["-c", "exit 4"]).run_attached().unwrap();
        assert_eq!(code, Some(4));
        let err = Cmd::new("sh", Duration::from_millis(100))
            .args(&["-c", "sleep 30"])
            .run_attached()
            .unwrap_err();
        assert!(matches!(err, CmdError::Timeout { .. }), "{err}");
        let mut bg = Cmd::new("sh", UNBOUNDED)
            .args(&["-c", "echo up; exec sleep 30"])
            .spawn_piped()
            .unwrap();
        let mut line = [0u8; 3];
        bg.take_stdout().unwrap().read_exact(&mut line).unwrap();
        assert_eq!(&line, b"up\n");
        assert_eq!(bg.try_wait(), None, "still running");
        bg.interrupt();
        // SIGINT ends sleep; the exit is awaited without a clock.
        assert_eq!(bg.wait(), None, "ended by the signal");
    }

    /// Started from a process that ignores SIGINT (`bob ... &` in a script), a program
    /// still ends on the SIGINT [`Background::interrupt`] sends: the hook that resets it
    /// is added while the signal is ignored here.
    #[test]
    fn a_program_started_while_sigint_is_ignored_still_ends_on_sigint() {
        // SAFETY: setting a signal's action to SIG_IGN and back; no handler runs.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        assert!(ignored(libc::SIGINT));
        let started =
            Cmd::new("sh", UNBOUNDED).args(&["-c", "echo up; exec sleep 30"]).spawn_piped();
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
        assert!(!ignored(libc::SIGINT));
        let mut bg = started.unwrap();
        let mut line = [0u8; 3];
        bg.take_stdout().unwrap().read_exact(&mut line).unwrap();
        bg.interrupt();
        assert_eq!(bg.wait(), None, "ended by the signal");
    }

    #[test]
    fn stdin_text_is_read_then_end_of_file() {
        let out = Cmd::new("sh", Duration::from_secs(10))
            .args(&["-c", "read a; echo \"got $a\"; if read b; then echo more; else echo eof; fi"])
            .stdin("Yes\n")
            .run()
            .unwrap();
        assert_eq!(out.stdout, "got Yes\neof\n");
        // Without text, standard input is empty.
        let out = run(
            "sh",
            &["-c", "if read a; then echo line; else echo eof; fi"],
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, "eof\n");
        // A program that never reads its input still runs to its end.
        let out = Cmd::new("true", Duration::from_secs(10)).stdin("n\n").run().unwrap();
        assert_eq!(out.code, Some(0));
    }
}
