//! Whether this machine can run a configuration: root, /dev/fuse, the configuration's
//! programs and its kernel driver. One place, so every command names what is missing the
//! same way (the CLI had three copies).

use std::path::Path;

use crate::device::cmd;
use crate::fs::FsConfig;

/// What this machine lacks for a run; nothing was concluded about the file system.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// Not root: loop devices and mounts need CAP_SYS_ADMIN.
    #[error(
        "bob needs root (CAP_SYS_ADMIN) to bind loop devices and mount file systems; run it with sudo"
    )]
    Root,
    /// No /dev/fuse: the FUSE disk recorder cannot serve.
    #[error("/dev/fuse is missing: the FUSE disk recorder needs the fuse module")]
    Fuse,
    /// A program the configuration runs (mkfs, fsck, a repair tool) is not installed.
    #[error("{program} not found; install it (Debian: apt-get install {package})")]
    Program {
        /// The program.
        program: &'static str,
        /// Its Debian package.
        package: &'static str,
    },
    /// The configuration is marked unavailable (with why).
    #[error("{config}: {reason}")]
    Unavailable {
        /// The configuration.
        config: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The running kernel has no driver for the file system.
    #[error("{config}: this kernel has no {fstype} driver")]
    NoDriver {
        /// The configuration.
        config: &'static str,
        /// Its file-system type.
        fstype: &'static str,
    },
}

/// Root, then /dev/fuse, then each of the configuration's programs: the first missing.
pub fn check(config: &FsConfig) -> Result<(), Missing> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Missing::Root);
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(Missing::Fuse);
    }
    missing_program(config).map_or(Ok(()), Err)
}

/// [`check`], and also that the configuration can run on this kernel at all (for commands
/// that run one named configuration and have no cell to mark `unavailable`).
pub fn check_runnable(config: &FsConfig) -> Result<(), Missing> {
    check(config)?;
    unavailable(config).map_or(Ok(()), Err)
}

/// Why a configuration cannot run on this machine, if it cannot (its own reason, the
/// kernel driver, a missing program), as a `bob table` cell says it.
pub fn unavailable_here(config: &FsConfig) -> Option<String> {
    match unavailable(config) {
        Some(Missing::Unavailable { reason, .. }) => Some(reason.to_owned()),
        Some(Missing::NoDriver { fstype, .. }) => {
            Some(format!("this kernel has no {fstype} driver"))
        }
        Some(other) => Some(other.to_string()),
        None => missing_program(config).map(|m| match m {
            Missing::Program { program, package } => {
                format!("{program} not found (Debian: apt-get install {package})")
            }
            other => other.to_string(),
        }),
    }
}

fn unavailable(config: &FsConfig) -> Option<Missing> {
    if let Some(reason) = config.unavailable {
        return Some(Missing::Unavailable { config: config.name, reason });
    }
    if !config.kernel_supports() {
        return Some(Missing::NoDriver { config: config.name, fstype: config.fstype });
    }
    None
}

fn missing_program(config: &FsConfig) -> Option<Missing> {
    config
        .programs()
        .into_iter()
        .find(|p| !cmd::available(p))
        .map(|program| Missing::Program { program, package: cmd::package_of(program) })
}
