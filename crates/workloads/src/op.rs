//! The file-system operations a workload is made of, their one-line text (used in trace
//! marks) and which of them are persistence points.
//!
//! Every op opens and closes what it needs itself; data written by `write`, `append`
//! and `otrunc-write` is stamped (see [`crate::stamp`]) with the model's file id, the
//! byte offset and the op's index, so its sectors are recognisable after a crash.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One operation. Paths are absolute within the file system under test ("/A/f0").
/// Offsets and lengths are multiples of 512.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// mkdir(path).
    Mkdir { path: String },
    /// rmdir(path).
    Rmdir { path: String },
    /// open(path, O_CREAT|O_EXCL|O_WRONLY), close. With `sync`: also O_SYNC, fsync of
    /// the file and fsync of its parent directory before returning, so that the new
    /// name is durable when the op returns (a persistence point).
    Creat {
        path: String,
        #[serde(default)]
        sync: bool,
    },
    /// One pwrite(path, offset, len) of stamped data (an overwrite, or an extension).
    Write { path: String, offset: u64, len: u64 },
    /// One pwrite at `offset` == the file's current size (checked when executed).
    Append { path: String, offset: u64, len: u64 },
    /// open(path, O_WRONLY|O_TRUNC), `len / chunk` sequential pwrites of `chunk`
    /// bytes from offset 0, then close: the replace-via-truncate idiom in one op.
    OtruncWrite { path: String, len: u64, chunk: u64 },
    /// link(from, to).
    Link { from: String, to: String },
    /// unlink(path).
    Unlink { path: String },
    /// rename(from, to); `to` may exist (a file), and is then replaced.
    Rename { from: String, to: String },
    /// fsync of a file or a directory (opened read-only).
    Fsync { path: String },
    /// fdatasync of a file.
    Fdatasync { path: String },
    /// sync(): everything.
    Sync,
    /// syncfs(2) on the mount: everything of this file system (a drain schedule).
    Syncfs,
    /// sync_file_range(path, 0, 0, SYNC_FILE_RANGE_WRITE): start writeback of the file's
    /// dirty data without waiting for it or committing metadata (a drain schedule).
    WritebackStart { path: String },
}

impl Op {
    /// Whether the op returns only after a flush makes something durable: fsync,
    /// fdatasync (of files or directories), sync, and a synchronous creat.
    pub fn is_persistence_point(&self) -> bool {
        matches!(
            self,
            Op::Fsync { .. }
                | Op::Fdatasync { .. }
                | Op::Sync
                | Op::Syncfs
                | Op::Creat { sync: true, .. }
        )
    }

    /// Whether the op changes the file-system state (everything but fsync, fdatasync,
    /// sync, syncfs and writeback); these are the ops the atomicity and ordering checks
    /// judge.
    pub fn has_effect(&self) -> bool {
        !matches!(
            self,
            Op::Fsync { .. }
                | Op::Fdatasync { .. }
                | Op::Sync
                | Op::Syncfs
                | Op::WritebackStart { .. }
        )
    }

    /// Every path the op names, in order.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Op::Mkdir { path }
            | Op::Rmdir { path }
            | Op::Creat { path, .. }
            | Op::Write { path, .. }
            | Op::Append { path, .. }
            | Op::OtruncWrite { path, .. }
            | Op::Unlink { path }
            | Op::Fsync { path }
            | Op::Fdatasync { path }
            | Op::WritebackStart { path } => vec![path],
            Op::Link { from, to } | Op::Rename { from, to } => vec![from, to],
            Op::Sync | Op::Syncfs => vec![],
        }
    }

    /// The byte range the op writes, for data ops.
    pub fn data_range(&self) -> Option<(u64, u64)> {
        match self {
            Op::Write { offset, len, .. } | Op::Append { offset, len, .. } => Some((*offset, *len)),
            Op::OtruncWrite { len, .. } => Some((0, *len)),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Mkdir { path } => write!(f, "mkdir {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Creat { path, sync: false } => write!(f, "creat {path}"),
            Op::Creat { path, sync: true } => write!(f, "creat-osync {path}"),
            Op::Write { path, offset, len } => write!(f, "write {path} {len}@{offset}"),
            Op::Append { path, offset, len } => write!(f, "append {path} {len}@{offset}"),
            Op::OtruncWrite { path, len, chunk } => {
                write!(f, "otrunc-write {path} {}x{chunk} close", len / (*chunk).max(1))
            }
            Op::Link { from, to } => write!(f, "link {from} {to}"),
            Op::Unlink { path } => write!(f, "unlink {path}"),
            Op::Rename { from, to } => write!(f, "rename {from} {to}"),
            Op::Fsync { path } => write!(f, "fsync {path}"),
            Op::Fdatasync { path } => write!(f, "fdatasync {path}"),
            Op::Sync => write!(f, "sync"),
            Op::Syncfs => write!(f, "syncfs"),
            Op::WritebackStart { path } => write!(f, "writeback-start {path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_serde() {
        let op = Op::Rename { from: "/A/f0".into(), to: "/B/g0".into() };
        assert_eq!(op.to_string(), "rename /A/f0 /B/g0");
        let j = serde_json::to_string(&op).unwrap();
        assert_eq!(j, r#"{"op":"rename","from":"/A/f0","to":"/B/g0"}"#);
        assert_eq!(serde_json::from_str::<Op>(&j).unwrap(), op);
        assert!(Op::Sync.is_persistence_point());
        assert!(Op::Creat { path: "/a".into(), sync: true }.is_persistence_point());
        assert!(!Op::Creat { path: "/a".into(), sync: false }.is_persistence_point());
    }
}
