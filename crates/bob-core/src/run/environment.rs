//! Whether this machine can run a configuration: root, /dev/fuse, the configuration's
//! programs and its kernel driver. One place, so every command names what is missing the
//! same way (the CLI had three copies).

use crate::fs::{self, FsConfig};

/// What this machine lacks for a run; nothing was concluded about the file system. The
/// one enum of [`crate::fs`], under the name the commands know.
pub use crate::fs::Unavailable as Missing;

/// Root, then /dev/fuse, then each of the configuration's programs: the first missing.
pub fn check(config: &FsConfig) -> Result<(), Missing> {
    fs::privileges()?;
    config.programs_installed()
}

/// [`check`], and also that the configuration can run on this kernel at all (for commands
/// that run one named configuration and have no cell to mark `unavailable`).
pub fn check_runnable(config: &FsConfig) -> Result<(), Missing> {
    check(config)?;
    config.runs_here()
}

/// Why a configuration cannot run on this machine, if it cannot (its own reason, the
/// kernel driver, a missing program), as a `bob table` cell says it.
pub fn unavailable_here(config: &FsConfig) -> Option<String> {
    config.availability().err().map(|e| e.reason())
}
