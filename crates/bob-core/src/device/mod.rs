//! Devices bob creates and must give back: loop devices ([`loopdev`]), kernel mounts
//! ([`mount`]), bob's FUSE disk that serves recording disks and crash-state views
//! ([`fusedisk`]), external commands run under a timeout ([`cmd`]), and the kernel's
//! tables of mounts and loop backing files ([`mounts`]).
//!
//! Every resource is an RAII guard whose `Drop` releases it, so success, error, panic
//! (unwinding) and Ctrl-C (a flag the workers poll, then ordinary returns) all clean up.
//! Guards must be dropped in reverse order of creation: mount, then loop, then FUSE.

pub mod cmd;
pub mod fusedisk;
pub mod loopdev;
pub mod mount;
pub mod mounts;
pub mod registry;

use std::path::PathBuf;

/// Errors of the device layer; each names the device, path or command involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An ioctl or open on a loop device failed.
    #[error("loop device {path}: {what}: {source}")]
    Loop {
        /// The device node.
        path: PathBuf,
        /// What bob was doing.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The device given with `--device` is unusable.
    #[error("{path}: {reason}")]
    Refused {
        /// The device node.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// mount(2) or umount(2) failed.
    #[error("mount {what} {target}: {source}")]
    Mount {
        /// `mount` or `umount` and the device.
        what: String,
        /// The mount point.
        target: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The FUSE disk could not be mounted or served.
    #[error("FUSE disk at {path}: {source}")]
    Fuse {
        /// The FUSE mount point.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An external command failed to start, failed, or timed out.
    #[error(transparent)]
    Cmd(#[from] cmd::CmdError),
    /// Any other I/O error with its path.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Result of the device layer.
pub type Result<T> = std::result::Result<T, Error>;
