//! researchfs: the project's own file systems, user-space FUSE file systems that store
//! everything in one image through a [`BlockDevice`], so that bob records their every block
//! write in process, in order, with a [`Role`].
//!
//! # Brief overview
//! - [`device`]: the [`BlockDevice`] trait, [`MemDevice`], [`FileDevice`], and
//!   [`RecordingDevice`].
//! - [`layout`]: the on-disk format shared by every design.
//! - [`design`]: what differs between [`Design::Orderless`] (ext2-like, the negative
//!   control), [`Design::Nofs`] (the thesis' No-Order File System) and [`Design::Ordered`]
//!   (the core with flush-ordered writes).
//! - [`pm`]: the [`PersistentMemory`] trait (stores, cache-line write-backs, fences) and
//!   [`MemPm`]; [`conquest`]: the Conquest designs' device over a disk and a PM region.
//! - [`fs`]: the core ([`Fs`]): allocation, inodes, directories, file data with indirect
//!   blocks, NoFS' checks and background scan, [`mkfs`], recovery at mount.
//! - [`fsck()`]: a read-only checker listing problems with the thesis' error kinds.
//! - [`fuse`]: the FUSE glue and [`mount`].
//! - [`check`]: "detects its own inconsistency": classifies every access as correct, error
//!   returned or silently wrong against a model.
//! - [`reliability`]: the thesis' reliability experiment (table 5.6) on [`MemDevice`].
//!
//! ```
//! use std::sync::Arc;
//! use researchfs::{mkfs, Design, Fs, MemDevice, Options};
//!
//! let dev = Arc::new(MemDevice::new(8 << 20));
//! mkfs(Design::Nofs, dev.as_ref(), dev.size()).unwrap();
//! let fs = Fs::open(Design::Nofs, dev.clone(), Options::default()).unwrap();
//! let f = fs.create(researchfs::layout::ROOT, "hello").unwrap();
//! fs.write(f, 0, b"world").unwrap();
//! assert_eq!(fs.read(f, 0, 100).unwrap(), b"world");
//! fs.shutdown().unwrap();
//! # use researchfs::BlockDevice;
//! ```

#![warn(missing_docs)]

pub mod check;
pub mod conquest;
pub mod design;
pub mod device;
pub mod fs;
pub mod fsck;
pub mod fuse;
mod fuseblk;
pub mod layout;
pub mod persistent_memory;
pub mod reliability;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use conquest::ConquestDevice;
pub use design::{Design, Options};
pub use device::{
    BlockDevice, Durability, FileDevice, MemDevice, RecordingDevice, Role, WriteInfo,
};
pub use fs::{mkfs, Attr, Fs};
pub use fsck::{fsck, FsckReport};
pub use fuse::{mount, mount_on_block_device, mount_with, MountedFs};
pub use persistent_memory::{MemPm, PersistentMemory};

/// The thesis' inconsistency kinds (table 5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ErrorKind {
    /// Bad directory entry: names a deleted or uninitialised file.
    #[serde(rename = "BD")]
    Bd,
    /// Orphan block: marked used but not referenced.
    #[serde(rename = "OB")]
    Ob,
    /// Orphan inode: marked used but not linked.
    #[serde(rename = "OI")]
    Oi,
    /// Wrong hard-link count.
    #[serde(rename = "HL")]
    Hl,
    /// Garbage data: a file points to an uninitialised block.
    #[serde(rename = "GD")]
    Gd,
    /// Two inodes refer to one block.
    #[serde(rename = "TP")]
    Tp,
}

impl ErrorKind {
    /// The two-letter code.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Bd => "BD",
            ErrorKind::Ob => "OB",
            ErrorKind::Oi => "OI",
            ErrorKind::Hl => "HL",
            ErrorKind::Gd => "GD",
            ErrorKind::Tp => "TP",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Errors of the file-system core; [`Error::errno`] maps each to what FUSE returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The device failed.
    #[error("device I/O at block {block}: {source}")]
    Io {
        /// The block involved.
        block: u64,
        /// The device's error.
        #[source]
        source: std::io::Error,
    },
    /// A mutual-agreement check failed: the file system refuses to return wrong data.
    #[error("inconsistency detected ({}): {what}", kind.map_or("structure", ErrorKind::code))]
    Inconsistent {
        /// The thesis' kind, when one fits.
        kind: Option<ErrorKind>,
        /// What disagreed with what.
        what: String,
    },
    /// The image is not a researchfs image of the requested design.
    #[error("not a usable {design} image: {reason}")]
    BadImage {
        /// The design asked for.
        design: Design,
        /// Why.
        reason: String,
    },
    /// No such entry.
    #[error("no such file or directory")]
    NotFound,
    /// The name exists.
    #[error("file exists")]
    Exists,
    /// A directory was needed.
    #[error("not a directory")]
    NotDir,
    /// A file was needed.
    #[error("is a directory")]
    IsDir,
    /// rmdir of a non-empty directory.
    #[error("directory not empty")]
    NotEmpty,
    /// No free block or inode.
    #[error("no space left on device")]
    NoSpace,
    /// More hard links than an inode has back links for.
    #[error("too many links")]
    TooManyLinks,
    /// A name that is empty, too long or contains `/`.
    #[error("invalid name")]
    BadName,
    /// Past the largest file size.
    #[error("file too large")]
    TooBig,
    /// The design has no such operation (osync/dsync without a journal).
    #[error("operation not supported by this design")]
    NotSupported,
    /// A transaction call out of turn (Valor: begin while one is open, commit or abort
    /// with none), or a transactional write Valor's page log cannot undo (one that
    /// allocates or grows the file).
    #[error("transaction: {0}")]
    Transaction(String),
    /// Mounting or unmounting with FUSE failed.
    #[error("FUSE mount at {path}: {source}")]
    Mount {
        /// The mount point.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The errno a system call should see.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::Inconsistent { .. } | Error::BadImage { .. } | Error::Mount { .. } => libc::EIO,
            Error::NotFound => libc::ENOENT,
            Error::Exists => libc::EEXIST,
            Error::NotDir => libc::ENOTDIR,
            Error::IsDir => libc::EISDIR,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::NoSpace => libc::ENOSPC,
            Error::TooManyLinks => libc::EMLINK,
            Error::BadName => libc::EINVAL,
            Error::TooBig => libc::EFBIG,
            Error::NotSupported => libc::EOPNOTSUPP,
            Error::Transaction(_) => libc::EINVAL,
        }
    }
}

/// Result of the core.
pub type Result<T> = std::result::Result<T, Error>;
