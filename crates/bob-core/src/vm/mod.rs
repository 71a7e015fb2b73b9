//! Other kernels: bob's checks run inside a virtual machine booted from a chosen kernel
//! (Debian's 6.1 or 6.12, or a developer's own build), so a run sees file systems the
//! machine's kernel lacks (reiserfs, f2fs, nilfs2, jfs), device-mapper's real
//! dm-log-writes, and a kernel bug hit on a crash state ends the guest, not the machine.
//!
//! The machine is booted by virtme-ng (the kernel community's runner, over qemu) with the
//! host's root shared read-only, one writable directory per output bob writes, and bob
//! itself (the same binary) run as root inside with the same arguments. One boot per
//! command, never one per state: the guest runs the whole engine with its workers.
//!
//! * [`kernel`]: which kernel (`--kernel`), fetched into and found in bob's kernel cache.
//! * [`boot`]: one boot: acceleration (KVM where it works, emulation where not), the
//!   command, its output, and how the guest ended (exit, kernel crash, hang).
//! * [`crash_log`]: the guest's record of the crash state each worker is recovering, so a
//!   kernel crash is pinned on the state that caused it.

pub(crate) mod boot;
pub(crate) mod crash_log;
pub mod kernel;
pub mod uml;

use std::path::{Path, PathBuf};

pub use boot::{Accel, GuestCommand, GuestEnd, GuestPhase, GuestRun, VmOptions};
pub use kernel::{BootKernel, BootMachine, DebianSeries, KernelSpec};
pub use uml::UmlSeries;

/// The environment variable that tells bob it runs inside a guest bob booted (its value:
/// the guest's control directory), so it never boots another and records the states it
/// recovers for [`crash_log`].
pub const GUEST_ENV: &str = "BOB_VM_CONTROL";

/// The kernel parameter every guest bob boots carries (`bob.guest=<control directory>`,
/// on qemu's command line and on user-mode Linux's): with [`GUEST_ENV`], how a process
/// knows the kernel under it is one bob booted ([`in_own_guest`]). A dotted parameter
/// that no module owns is left on the command line and not handed to init.
pub(crate) const GUEST_MARK: &str = "bob.guest";

/// The [`GUEST_MARK`] word for a guest whose control directory is `ctl`.
pub(crate) fn guest_mark(ctl: &Path) -> String {
    format!("{GUEST_MARK}={}", ctl.display())
}

/// Whether this process runs in a guest bob booted itself: its kernel's command line
/// carries [`GUEST_MARK`] naming the control directory that [`GUEST_ENV`] names. The
/// environment alone is not enough (anyone can set a variable), and a machine's own
/// kernel is booted by its boot loader, which writes no such word.
pub(crate) fn in_own_guest() -> bool {
    let Some(ctl) = std::env::var_os(GUEST_ENV) else { return false };
    marked(&crate::host::kernel_command_line(), Path::new(&ctl))
}

/// Whether the kernel command line `words` carries the mark of the guest of `ctl`.
fn marked(words: &[String], ctl: &Path) -> bool {
    let mark = guest_mark(ctl);
    words.contains(&mark)
}

/// Set in a guest whose steps run slower than on a host: how many times longer a step
/// may take there ([`step_time_factor`]).
pub(crate) const TIME_FACTOR_ENV: &str = "BOB_VM_TIME_FACTOR";

/// How many times longer a step (mkfs, a recovery mount, an fsck) may take here before
/// bob calls it hung: 1 on a host or under KVM, what the host set in a slower guest
/// ([`EMULATION_TIME_FACTOR`] under emulation, [`UML_TIME_FACTOR`] under user-mode
/// Linux), so that a mount that takes 40 s there is a slow mount, not a `timeout`.
pub fn step_time_factor() -> u32 {
    if std::env::var_os(GUEST_ENV).is_none() {
        return 1;
    }
    std::env::var(TIME_FACTOR_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

/// The step-time factor under emulation, for the 20-35x slowdown of kernel work under TCG:
/// a 30 s recovery limit becomes 10 minutes, still short of the 15 minutes without
/// progress after which the host stops a guest as hung.
pub(crate) const EMULATION_TIME_FACTOR: u32 = 20;

/// The step-time factor under user-mode Linux: its kernel work runs at the host's speed,
/// but every process start and system call of its user space costs several times the
/// host's (mkfs, fsck and mount(8) are processes), and it has one CPU.
pub(crate) const UML_TIME_FACTOR: u32 = 5;

/// Why a virtual machine could not run bob's command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program the VM backend needs is missing.
    #[error("{program} not found: {hint}")]
    Missing {
        /// The program.
        program: String,
        /// How to get it.
        hint: String,
    },
    /// `host` was asked to boot.
    #[error("the host kernel is not booted in a virtual machine")]
    HostKernel,
    /// An external program failed to start or hung.
    #[error(transparent)]
    Cmd(#[from] crate::device::cmd::CmdError),
    /// apt does not know the package.
    #[error("apt-cache depends {package}: no kernel package found ({line}); run apt-get update")]
    NoPackage {
        /// The metapackage.
        package: String,
        /// apt's last line.
        line: String,
    },
    /// Fetching or unpacking the package failed.
    #[error("fetching {package} failed: {line}")]
    Fetch {
        /// The package.
        package: String,
        /// The failing tool's last line.
        line: String,
    },
    /// The kernel cache cannot be used.
    #[error("kernel cache {path}: {reason}")]
    Cache {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A kernel image given with `--kernel PATH` cannot be booted.
    #[error("{path}: {reason}")]
    Image {
        /// The image.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The guest's control directory could not be made or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Interrupted (SIGINT, SIGTERM): the guest was stopped.
    #[error("interrupted")]
    Interrupted,
    /// The guest never ran bob's command.
    #[error("the {kernel} guest did not start bob (console log: {console}): {line}")]
    NoStart {
        /// The kernel.
        kernel: String,
        /// The guest's console log.
        console: PathBuf,
        /// The console's last meaningful line.
        line: String,
    },
}

/// A command run in a guest to its end, through any kernel crashes on the way.
#[derive(Debug)]
pub struct Session {
    /// The last boot, the one that ended the command.
    pub last: GuestRun,
    /// States pinned as crashing the kernel, each with its console log.
    pub crashes: Vec<crash_log::KnownCrash>,
    /// Boots it took.
    pub boots: usize,
}

/// At most this many boots for one command: each kernel crash on a crash state costs one
/// (two when several states were in flight), and a kernel that crashes on everything is
/// better reported than rebooted all day.
const MAX_BOOTS: usize = 24;

/// Runs `command` in a guest of `kernel`, booting again after each kernel crash on a crash
/// state: the state is pinned ([`crash_log`]), the crash's console log kept in `keep`, and
/// the command continues from its journal (`resume`: the argument that makes it resume,
/// `None` for a command that cannot, which then ends at the first crash). Setting
/// `cancel` stops the guest ([`Error::Interrupted`]).
pub fn run_session(
    kernel: &BootKernel,
    command: &GuestCommand,
    resume: Option<&str>,
    options: &VmOptions,
    keep: &Path,
    cancel: &std::sync::atomic::AtomicBool,
    mut progress: impl FnMut(&GuestPhase),
) -> Result<Session, Error> {
    let mut known = crash_log::Known::default();
    let mut command = command.clone();
    let mut boots = 0;
    loop {
        boots += 1;
        let run = boot::run(kernel, &command, options, &known, cancel, &mut progress)?;
        // A guest that stopped moving while states were in flight hung on one of them,
        // as a kernel that crashed did: both are pinned the same way (`kernel-crash`).
        let line = match &run.end {
            GuestEnd::KernelCrash(line) => line.clone(),
            GuestEnd::Hung(after) if !crash_log::in_flight(run.control.path()).is_empty() => {
                format!(
                    "the guest made no progress for {}s (hung); its console's last line: {}",
                    after.as_secs(),
                    boot::last_console_line(&run.console_log())
                )
            }
            _ => return Ok(Session { last: run, crashes: known.crashes, boots }),
        };
        let line = &line;
        let open = crash_log::in_flight(run.control.path());
        let can_go_on = resume.is_some() && !open.is_empty() && boots < MAX_BOOTS;
        if !can_go_on {
            return Ok(Session { last: run, crashes: known.crashes, boots });
        }
        let kept = keep_console_log(&run, keep, boots)?;
        let alone = open.len() == 1;
        for state in open {
            let was_suspect = known.suspects.contains(&state);
            if alone || was_suspect {
                known.suspects.retain(|s| s != &state);
                known.crashes.push(crash_log::KnownCrash {
                    subject: state.subject,
                    key: state.key,
                    state: state.state,
                    message: line.clone(),
                    console: kept.clone(),
                });
            } else {
                known.suspects.push(state);
            }
        }
        if let Some(flag) = resume {
            if !command.args.iter().any(|a| a == flag) {
                command.args.push(flag.into());
            }
        }
    }
}

/// Copies a crashed boot's console log into `keep` (which the next boot sees read-write).
fn keep_console_log(run: &GuestRun, keep: &Path, boot: usize) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(keep).map_err(|source| Error::Io { path: keep.to_owned(), source })?;
    let kept = keep.join(format!("console-boot{boot}.log"));
    std::fs::copy(run.console_log(), &kept)
        .map_err(|source| Error::Io { path: kept.clone(), source })?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the exact word for this control directory marks a guest of bob's: a host's
    /// command line, another guest's mark or a prefix of it does not.
    #[test]
    fn a_guest_is_known_by_its_exact_mark() {
        let ctl = Path::new("/tmp/bob-vm-abc");
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(marked(&words(&["ro", "oops=panic", "bob.guest=/tmp/bob-vm-abc"]), ctl));
        assert!(!marked(&words(&["BOOT_IMAGE=/vmlinuz", "root=/dev/vda1", "ro"]), ctl));
        assert!(!marked(&words(&["bob.guest=/tmp/bob-vm-xyz"]), ctl));
        assert!(!marked(&words(&["bob.guest=/tmp/bob-vm-ab"]), ctl));
        assert!(!in_own_guest() || std::env::var_os(GUEST_ENV).is_some());
    }
}
