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
    /// open(path) kept open as descriptor `fd` (a name the workload chooses) until
    /// `close` or the end of the phase: O_RDWR for a file, O_RDONLY for a directory. The
    /// `fd-*` ops act through it, whatever happens to its names meanwhile (an unlink, a
    /// rename, an rmdir).
    Open { path: String, fd: String },
    /// close(fd).
    Close { fd: String },
    /// fsync(2) through descriptor `fd`: the inode, under whatever names it has then
    /// (or none).
    FdFsync { fd: String },
    /// fdatasync(2) through descriptor `fd` (a file).
    FdFdatasync { fd: String },
    /// One pwrite of stamped data through descriptor `fd` (a file, named or not).
    FdWrite { fd: String, offset: u64, len: u64 },
    /// sync(): everything.
    Sync,
    /// syncfs(2) on the mount: everything of this file system (a drain schedule).
    Syncfs,
    /// `echo 2 > /proc/sys/vm/drop_caches`: the kernel frees the dentries and inodes no one
    /// holds, so the next op on a file loads its inode from the disk (and, on btrfs,
    /// finds no in-memory record of what its log already holds), as fstests' generic/106
    /// does between an unlink and a fsync. It writes nothing back and promises nothing;
    /// the whole machine's caches are dropped (the kernel has no per-mount knob).
    DropCaches,
    /// sync_file_range(path, 0, 0, SYNC_FILE_RANGE_WRITE): start writeback of the file's
    /// dirty data without waiting for it or committing metadata (a drain schedule).
    WritebackStart { path: String },
    /// `osync()` (OptFS): ends the file system's running transaction without making it
    /// durable: every op before it persists before any op after it. Reached by writing
    /// `osync` to the control file [`crate::SYNC_CONTROL`] at the mount's root; only
    /// configurations with osync run it.
    Osync,
    /// `dsync()` (OptFS): osync, then durable when it returns (a persistence point that
    /// promises what sync does).
    Dsync,
    /// Output leaving the program (xsyncfs): one write of `output` to the output file
    /// [`crate::OUTPUT_FILE`] at the mount's root; only configurations with one run it.
    /// Once released it promises what sync does (`output-durable`).
    Output,
    /// fallocate(path, mode, offset, len).
    Falloc { path: String, mode: FallocMode, offset: u64, len: u64 },
    /// One pwrite of stamped data through O_DIRECT (offset and length 4 KiB-aligned in
    /// the generated workloads; the buffer is page-aligned).
    DirectWrite { path: String, offset: u64, len: u64 },
    /// open(path, O_WRONLY | `flag` [| O_DIRECT]), one pwrite of stamped data, close: a
    /// synchronous write, a persistence point of its own. When it returns, O_DSYNC
    /// promises the range's data and what reading it needs (the size grown to cover it);
    /// O_SYNC the inode as well (its attributes), as a fsync of that range would
    /// (Linux runs both as `vfs_fsync_range` over the written bytes).
    SyncWrite {
        path: String,
        offset: u64,
        len: u64,
        flag: SyncFlag,
        /// O_DIRECT as well (the buffer page-aligned; the range should be block-aligned).
        #[serde(default)]
        direct: bool,
    },
    /// ftruncate up to `offset + len` if the file is shorter, mmap, a copy of stamped data
    /// into the mapping, msync(MS_SYNC) of it, munmap. The model judges no promise of the
    /// msync (the persistence point after the op is what is judged).
    MmapWrite { path: String, offset: u64, len: u64 },
    /// symlink(target, path).
    Symlink { target: String, path: String },
    /// truncate(path, size).
    Truncate { path: String, size: u64 },
    /// lsetxattr(path, name, value, 0): an extended attribute (the `user.` namespace in
    /// generated workloads) created or replaced. The value names the op that set it, so a
    /// crash state's value tells which op persisted.
    Setxattr { path: String, name: String, value: String },
    /// lremovexattr(path, name).
    Removexattr { path: String, name: String },
    /// renameat2(from, to, flags) with one of its flags (see [`RenameHow`]).
    Rename2 { from: String, to: String, how: RenameHow },
    /// chmod(path, mode): the permission bits only (a metadata-only change).
    Chmod { path: String, mode: u32 },
    /// lchown(path, uid, gid) (a metadata-only change).
    Chown { path: String, uid: u32, gid: u32 },
    /// utimensat(path, {mtime, mtime}): access and modification time set to `mtime`
    /// seconds (a metadata-only change; the time is chosen, not the clock's).
    Utimes { path: String, mtime: i64 },
    /// open(parent(path), O_TMPFILE|O_WRONLY), one pwrite of `len` bytes of stamped data
    /// at 0, then linkat(fd, "", path, AT_EMPTY_PATH): a file born with its data and
    /// given its name last.
    TmpfileLink { path: String, len: u64 },
    /// ioctl(FICLONE): `to` becomes a reflinked copy of all of `from` (data and size).
    Clone { from: String, to: String },
    /// ioctl(FICLONERANGE): `from`'s bytes `offset..offset + len` reflinked into `to` at
    /// the same offset (block-aligned; inside `from`).
    CloneRange { from: String, to: String, offset: u64, len: u64 },
    /// copy_file_range(from, offset, to, offset, len): the bytes copied (a reflink where
    /// the file system shares extents) to the same offset; fewer past `from`'s end.
    CopyRange { from: String, to: String, offset: u64, len: u64 },
    /// ioctl(FIDEDUPERANGE): `from`'s bytes `offset..offset + len` shared with `to`'s at
    /// the same offset where the two are equal; either way nothing a reader sees changes.
    DedupeRange { from: String, to: String, offset: u64, len: u64 },
    /// Valor's `Log Begin`: begins a transaction; the writes until its commit or abort
    /// are part of it. Reached by writing `begin` to the control file
    /// [`crate::TXN_CONTROL`] at the mount's root; only configurations with transactions
    /// run it.
    TxnBegin,
    /// Valor's `Log Resolve` (commit): `commit` to the control file, or with `durable`
    /// `commit-durable` (the paper's Transaction Sync: durable when it returns, a
    /// persistence point).
    TxnCommit {
        #[serde(default)]
        durable: bool,
    },
    /// Valor's `Log Resolve` (abort): `abort` to the control file; the transaction's
    /// writes are undone.
    TxnAbort,
}

/// fallocate(2)'s modes as generated workloads use them (Ace's set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FallocMode {
    /// 0: allocate, extending the size.
    Default,
    /// FALLOC_FL_KEEP_SIZE.
    KeepSize,
    /// FALLOC_FL_ZERO_RANGE.
    ZeroRange,
    /// FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE.
    ZeroRangeKeepSize,
    /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
    PunchHole,
    /// FALLOC_FL_COLLAPSE_RANGE: the range is removed and what follows moves down
    /// (block-aligned, ending before the end of the file).
    CollapseRange,
    /// FALLOC_FL_INSERT_RANGE: a hole is inserted and what follows moves up
    /// (block-aligned, starting before the end of the file).
    InsertRange,
    /// FALLOC_FL_UNSHARE_RANGE: shared (reflinked) blocks of the range get copies of
    /// their own; allocates like mode 0 otherwise.
    UnshareRange,
}

impl FallocMode {
    /// Ace's modes, in Ace's order.
    pub const ACE: &'static [FallocMode] = &[
        FallocMode::ZeroRange,
        FallocMode::ZeroRangeKeepSize,
        FallocMode::PunchHole,
        FallocMode::KeepSize,
        FallocMode::Default,
    ];

    /// The modes beyond Ace's: they move data or unshare it.
    pub const BEYOND_ACE: &'static [FallocMode] =
        &[FallocMode::CollapseRange, FallocMode::InsertRange, FallocMode::UnshareRange];

    /// Every mode: Ace's, then the others.
    pub fn all() -> Vec<FallocMode> {
        [FallocMode::ACE, FallocMode::BEYOND_ACE].concat()
    }

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            FallocMode::Default => "default",
            FallocMode::KeepSize => "keep-size",
            FallocMode::ZeroRange => "zero-range",
            FallocMode::ZeroRangeKeepSize => "zero-range-keep-size",
            FallocMode::PunchHole => "punch-hole",
            FallocMode::CollapseRange => "collapse-range",
            FallocMode::InsertRange => "insert-range",
            FallocMode::UnshareRange => "unshare-range",
        }
    }

    /// The mode bits fallocate(2) takes.
    pub fn bits(self) -> i32 {
        match self {
            FallocMode::Default => 0,
            FallocMode::KeepSize => libc::FALLOC_FL_KEEP_SIZE,
            FallocMode::ZeroRange => libc::FALLOC_FL_ZERO_RANGE,
            FallocMode::ZeroRangeKeepSize => libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            FallocMode::PunchHole => libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            FallocMode::CollapseRange => libc::FALLOC_FL_COLLAPSE_RANGE,
            FallocMode::InsertRange => libc::FALLOC_FL_INSERT_RANGE,
            FallocMode::UnshareRange => libc::FALLOC_FL_UNSHARE_RANGE,
        }
    }

    /// Whether the mode moves data within the file (collapse and insert): such a mode
    /// needs a block-aligned range inside the file.
    pub fn shifts(self) -> bool {
        matches!(self, FallocMode::CollapseRange | FallocMode::InsertRange)
    }

    /// Whether the mode leaves the file's size alone.
    pub fn keeps_size(self) -> bool {
        matches!(self, FallocMode::KeepSize | FallocMode::ZeroRangeKeepSize | FallocMode::PunchHole)
    }

    /// Whether the mode makes the range read as zeros.
    pub fn zeroes(self) -> bool {
        matches!(
            self,
            FallocMode::ZeroRange | FallocMode::ZeroRangeKeepSize | FallocMode::PunchHole
        )
    }
}

impl std::str::FromStr for FallocMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let all = FallocMode::all();
        all.iter().copied().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|m| m.name()).collect();
            format!("unknown fallocate mode {s:?} (known: {})", names.join(", "))
        })
    }
}

/// The synchronous open flag of a [`Op::SyncWrite`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SyncFlag {
    /// O_SYNC: file integrity completion (data and all the inode's metadata).
    #[serde(rename = "o-sync")]
    Sync,
    /// O_DSYNC: data integrity completion (data and the metadata needed to read it).
    #[serde(rename = "o-dsync")]
    Dsync,
}

impl SyncFlag {
    /// The name workload files use.
    pub fn name(self) -> &'static str {
        match self {
            SyncFlag::Sync => "o-sync",
            SyncFlag::Dsync => "o-dsync",
        }
    }

    /// The open(2) flag.
    pub fn bits(self) -> i32 {
        match self {
            SyncFlag::Sync => libc::O_SYNC,
            SyncFlag::Dsync => libc::O_DSYNC,
        }
    }
}

/// renameat2(2)'s flags, one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenameHow {
    /// RENAME_EXCHANGE: both names exist and swap what they name, atomically.
    Exchange,
    /// RENAME_NOREPLACE: a rename that fails if the target exists.
    Noreplace,
    /// RENAME_WHITEOUT: a rename that leaves a whiteout (a character device 0:0, as
    /// overlayfs uses) at the source name.
    Whiteout,
}

impl RenameHow {
    /// Every flag.
    pub const ALL: &'static [RenameHow] =
        &[RenameHow::Exchange, RenameHow::Noreplace, RenameHow::Whiteout];

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            RenameHow::Exchange => "exchange",
            RenameHow::Noreplace => "noreplace",
            RenameHow::Whiteout => "whiteout",
        }
    }

    /// The flag renameat2(2) takes.
    pub fn flag(self) -> libc::c_uint {
        match self {
            RenameHow::Exchange => libc::RENAME_EXCHANGE,
            RenameHow::Noreplace => libc::RENAME_NOREPLACE,
            RenameHow::Whiteout => libc::RENAME_WHITEOUT,
        }
    }
}

/// What kind of operation an op is, for every source of workloads (the property
/// workloads, generated and imported ones): the name reports use for it. Extensible:
/// later workload sources add kinds here, never a second list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// A write at the end of a file.
    Append,
    /// A write inside a file (it may also extend it).
    Overwrite,
    /// open(O_TRUNC), writes from offset 0, close.
    OtruncWrite,
    /// rename(2).
    Rename,
    /// open(O_CREAT) (with or without O_SYNC).
    Creat,
    /// link(2).
    Link,
    /// unlink(2).
    Unlink,
    /// mkdir(2).
    Mkdir,
    /// rmdir(2).
    Rmdir,
    /// A file cut to length zero (open(O_TRUNC) without writes).
    Truncate,
    /// fsync(2).
    Fsync,
    /// fdatasync(2).
    Fdatasync,
    /// open(2) of a descriptor kept open.
    Open,
    /// close(2) of a kept descriptor.
    Close,
    /// fsync(2) through a kept descriptor.
    FdFsync,
    /// fdatasync(2) through a kept descriptor.
    FdFdatasync,
    /// A pwrite through a kept descriptor.
    FdWrite,
    /// sync(2).
    Sync,
    /// syncfs(2).
    Syncfs,
    /// sync_file_range(SYNC_FILE_RANGE_WRITE): writeback started, nothing waited for.
    WritebackStart,
    /// Unused dentries and inodes evicted (drop_caches).
    DropCaches,
    /// Begin of a transaction (Valor).
    TxnBegin,
    /// Commit of a transaction, durable or not (Valor).
    TxnCommit,
    /// Abort of a transaction (Valor).
    TxnAbort,
    /// osync() (OptFS).
    Osync,
    /// dsync() (OptFS).
    Dsync,
    /// Output to the output file (xsyncfs).
    Output,
    /// fallocate(2), any mode.
    Falloc,
    /// A pwrite through O_DIRECT.
    DirectWrite,
    /// A pwrite through O_SYNC or O_DSYNC (buffered or direct).
    SyncWrite,
    /// A write through mmap, then msync.
    MmapWrite,
    /// symlink(2).
    Symlink,
    /// setxattr(2).
    Setxattr,
    /// removexattr(2).
    Removexattr,
    /// renameat2(RENAME_EXCHANGE).
    RenameExchange,
    /// renameat2(RENAME_NOREPLACE).
    RenameNoreplace,
    /// renameat2(RENAME_WHITEOUT).
    RenameWhiteout,
    /// chmod(2).
    Chmod,
    /// chown(2).
    Chown,
    /// utimensat(2).
    Utimes,
    /// open(O_TMPFILE), a write, linkat(2).
    TmpfileLink,
    /// ioctl(FICLONE).
    Clone,
    /// ioctl(FICLONERANGE).
    CloneRange,
    /// copy_file_range(2).
    CopyRange,
    /// ioctl(FIDEDUPERANGE).
    DedupeRange,
}

impl OpKind {
    /// The kebab-case name reports and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Append => "append",
            OpKind::Overwrite => "overwrite",
            OpKind::OtruncWrite => "otrunc-write",
            OpKind::Rename => "rename",
            OpKind::Creat => "creat",
            OpKind::Link => "link",
            OpKind::Unlink => "unlink",
            OpKind::Mkdir => "mkdir",
            OpKind::Rmdir => "rmdir",
            OpKind::Truncate => "truncate",
            OpKind::Fsync => "fsync",
            OpKind::Fdatasync => "fdatasync",
            OpKind::Open => "open",
            OpKind::Close => "close",
            OpKind::FdFsync => "fd-fsync",
            OpKind::FdFdatasync => "fd-fdatasync",
            OpKind::FdWrite => "fd-write",
            OpKind::Sync => "sync",
            OpKind::Syncfs => "syncfs",
            OpKind::WritebackStart => "writeback-start",
            OpKind::DropCaches => "drop-caches",
            OpKind::TxnBegin => "txn-begin",
            OpKind::TxnCommit => "txn-commit",
            OpKind::TxnAbort => "txn-abort",
            OpKind::Osync => "osync",
            OpKind::Dsync => "dsync",
            OpKind::Output => "output",
            OpKind::Falloc => "falloc",
            OpKind::DirectWrite => "direct-write",
            OpKind::SyncWrite => "sync-write",
            OpKind::MmapWrite => "mmap-write",
            OpKind::Symlink => "symlink",
            OpKind::Setxattr => "setxattr",
            OpKind::Removexattr => "removexattr",
            OpKind::RenameExchange => "rename-exchange",
            OpKind::RenameNoreplace => "rename-noreplace",
            OpKind::RenameWhiteout => "rename-whiteout",
            OpKind::Chmod => "chmod",
            OpKind::Chown => "chown",
            OpKind::Utimes => "utimes",
            OpKind::TmpfileLink => "tmpfile-link",
            OpKind::Clone => "clone",
            OpKind::CloneRange => "clone-range",
            OpKind::CopyRange => "copy-range",
            OpKind::DedupeRange => "dedupe-range",
        }
    }

    /// Whether ops of this kind are the metadata ops `metadata-op-durable` promises:
    /// creat, mkdir, link, unlink, rmdir and rename.
    pub fn is_metadata_op(self) -> bool {
        matches!(
            self,
            OpKind::Creat
                | OpKind::Mkdir
                | OpKind::Link
                | OpKind::Unlink
                | OpKind::Rmdir
                | OpKind::Rename
        )
    }

    /// Whether the op delimits osync groups (osync and dsync).
    pub fn is_osync(self) -> bool {
        matches!(self, OpKind::Osync | OpKind::Dsync)
    }

    /// Whether ops of this kind change a directory (create, remove or move a name).
    pub fn is_dir_op(self) -> bool {
        matches!(
            self,
            OpKind::Rename
                | OpKind::Creat
                | OpKind::Link
                | OpKind::Unlink
                | OpKind::Mkdir
                | OpKind::Rmdir
                | OpKind::Symlink
                | OpKind::RenameExchange
                | OpKind::RenameNoreplace
                | OpKind::RenameWhiteout
                | OpKind::TmpfileLink
        )
    }

    /// Whether ops of this kind change only an inode's attributes (mode, owner, times).
    pub fn is_attr_op(self) -> bool {
        matches!(self, OpKind::Chmod | OpKind::Chown | OpKind::Utimes)
    }
}

/// One op of a workload as reports name it: its index in the workload's ops, its kind and
/// every path it names (rename and link carry both).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRef {
    /// Index in the workload's ops.
    pub index: usize,
    /// Its kind.
    pub kind: OpKind,
    /// Every path the op names, in order.
    pub paths: Vec<String>,
}

impl Op {
    /// The op's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Mkdir { .. } => OpKind::Mkdir,
            Op::Rmdir { .. } => OpKind::Rmdir,
            Op::Creat { .. } => OpKind::Creat,
            Op::Write { .. } => OpKind::Overwrite,
            Op::Append { .. } => OpKind::Append,
            Op::OtruncWrite { len: 0, .. } => OpKind::Truncate,
            Op::OtruncWrite { .. } => OpKind::OtruncWrite,
            Op::Link { .. } => OpKind::Link,
            Op::Unlink { .. } => OpKind::Unlink,
            Op::Rename { .. } => OpKind::Rename,
            Op::Fsync { .. } => OpKind::Fsync,
            Op::Fdatasync { .. } => OpKind::Fdatasync,
            Op::Open { .. } => OpKind::Open,
            Op::Close { .. } => OpKind::Close,
            Op::FdFsync { .. } => OpKind::FdFsync,
            Op::FdFdatasync { .. } => OpKind::FdFdatasync,
            Op::FdWrite { .. } => OpKind::FdWrite,
            Op::Sync => OpKind::Sync,
            Op::Syncfs => OpKind::Syncfs,
            Op::WritebackStart { .. } => OpKind::WritebackStart,
            Op::DropCaches => OpKind::DropCaches,
            Op::TxnBegin => OpKind::TxnBegin,
            Op::TxnCommit { .. } => OpKind::TxnCommit,
            Op::TxnAbort => OpKind::TxnAbort,
            Op::Osync => OpKind::Osync,
            Op::Dsync => OpKind::Dsync,
            Op::Output => OpKind::Output,
            Op::Falloc { .. } => OpKind::Falloc,
            Op::DirectWrite { .. } => OpKind::DirectWrite,
            Op::SyncWrite { .. } => OpKind::SyncWrite,
            Op::MmapWrite { .. } => OpKind::MmapWrite,
            Op::Symlink { .. } => OpKind::Symlink,
            Op::Truncate { .. } => OpKind::Truncate,
            Op::Setxattr { .. } => OpKind::Setxattr,
            Op::Removexattr { .. } => OpKind::Removexattr,
            Op::Rename2 { how: RenameHow::Exchange, .. } => OpKind::RenameExchange,
            Op::Rename2 { how: RenameHow::Noreplace, .. } => OpKind::RenameNoreplace,
            Op::Rename2 { how: RenameHow::Whiteout, .. } => OpKind::RenameWhiteout,
            Op::Chmod { .. } => OpKind::Chmod,
            Op::Chown { .. } => OpKind::Chown,
            Op::Utimes { .. } => OpKind::Utimes,
            Op::TmpfileLink { .. } => OpKind::TmpfileLink,
            Op::Clone { .. } => OpKind::Clone,
            Op::CloneRange { .. } => OpKind::CloneRange,
            Op::CopyRange { .. } => OpKind::CopyRange,
            Op::DedupeRange { .. } => OpKind::DedupeRange,
        }
    }

    /// The op as reports name it, at `index` in its workload.
    pub fn op_ref(&self, index: usize) -> OpRef {
        OpRef {
            index,
            kind: self.kind(),
            paths: self.paths().into_iter().map(str::to_owned).collect(),
        }
    }

    /// Whether the op returns only after a flush makes something durable: fsync,
    /// fdatasync (of files or directories), sync, a synchronous creat and a synchronous
    /// write.
    pub fn is_persistence_point(&self) -> bool {
        matches!(
            self,
            Op::Fsync { .. }
                | Op::FdFsync { .. }
                | Op::FdFdatasync { .. }
                | Op::SyncWrite { .. }
                | Op::Fdatasync { .. }
                | Op::Sync
                | Op::Syncfs
                | Op::Dsync
                | Op::TxnCommit { durable: true }
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
                | Op::DropCaches
                | Op::Open { .. }
                | Op::Close { .. }
                | Op::FdFsync { .. }
                | Op::FdFdatasync { .. }
                | Op::Osync
                | Op::Dsync
                | Op::TxnBegin
                | Op::TxnCommit { .. }
                | Op::TxnAbort
                | Op::Output
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
            | Op::WritebackStart { path }
            | Op::Falloc { path, .. }
            | Op::DirectWrite { path, .. }
            | Op::SyncWrite { path, .. }
            | Op::MmapWrite { path, .. }
            | Op::Truncate { path, .. }
            | Op::Setxattr { path, .. }
            | Op::Removexattr { path, .. }
            | Op::Chmod { path, .. }
            | Op::Chown { path, .. }
            | Op::Utimes { path, .. }
            | Op::Open { path, .. }
            | Op::TmpfileLink { path, .. } => vec![path],
            Op::Link { from, to }
            | Op::Rename { from, to }
            | Op::Rename2 { from, to, .. }
            | Op::Clone { from, to }
            | Op::CloneRange { from, to, .. }
            | Op::CopyRange { from, to, .. }
            | Op::DedupeRange { from, to, .. } => vec![from, to],
            // The target is a string stored in the link, not a name the op touches.
            Op::Symlink { path, .. } => vec![path],
            Op::Sync | Op::Syncfs | Op::Osync | Op::Dsync | Op::Output | Op::DropCaches => {
                vec![]
            }
            // A descriptor names no path: what it acts on is the inode it was opened on.
            Op::Close { .. } | Op::FdFsync { .. } | Op::FdFdatasync { .. } | Op::FdWrite { .. } => {
                vec![]
            }
            Op::TxnBegin | Op::TxnCommit { .. } | Op::TxnAbort => vec![],
        }
    }

    /// The descriptor the op names (open, close and the `fd-*` ops).
    pub fn fd(&self) -> Option<&str> {
        match self {
            Op::Open { fd, .. }
            | Op::Close { fd }
            | Op::FdFsync { fd }
            | Op::FdFdatasync { fd }
            | Op::FdWrite { fd, .. } => Some(fd),
            _ => None,
        }
    }

    /// The byte range the op writes, for data ops.
    pub fn data_range(&self) -> Option<(u64, u64)> {
        match self {
            Op::Write { offset, len, .. }
            | Op::Append { offset, len, .. }
            | Op::DirectWrite { offset, len, .. }
            | Op::SyncWrite { offset, len, .. }
            | Op::FdWrite { offset, len, .. }
            | Op::MmapWrite { offset, len, .. } => Some((*offset, *len)),
            Op::OtruncWrite { len, .. } | Op::TmpfileLink { len, .. } => Some((0, *len)),
            _ => None,
        }
    }

    /// Whether the op sets or removes an extended attribute.
    pub fn is_xattr(&self) -> bool {
        matches!(self, Op::Setxattr { .. } | Op::Removexattr { .. })
    }

    /// Whether the op changes a file's size, bytes or where they live (data ops,
    /// truncate, fallocate, clones, copies and dedupes into it).
    pub fn changes_data(&self) -> bool {
        self.data_range().is_some()
            || matches!(
                self,
                Op::Truncate { .. }
                    | Op::Falloc { .. }
                    | Op::Clone { .. }
                    | Op::CloneRange { .. }
                    | Op::CopyRange { .. }
                    | Op::DedupeRange { .. }
            )
    }

    /// Whether the op may leave its file shorter or with zeros where data was: a later
    /// such op excuses a shorter size or zeros in what an earlier point promised.
    pub fn may_cut(&self) -> bool {
        matches!(self, Op::OtruncWrite { .. } | Op::Truncate { .. } | Op::Falloc { .. })
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
            Op::Open { path, fd } => write!(f, "open {path} {fd}"),
            Op::Close { fd } => write!(f, "close {fd}"),
            Op::FdFsync { fd } => write!(f, "fd-fsync {fd}"),
            Op::FdFdatasync { fd } => write!(f, "fd-fdatasync {fd}"),
            Op::FdWrite { fd, offset, len } => write!(f, "fd-write {fd} {len}@{offset}"),
            Op::Sync => write!(f, "sync"),
            Op::Syncfs => write!(f, "syncfs"),
            Op::WritebackStart { path } => write!(f, "writeback-start {path}"),
            Op::DropCaches => write!(f, "drop-caches"),
            Op::Osync => write!(f, "osync"),
            Op::Dsync => write!(f, "dsync"),
            Op::Output => write!(f, "output"),
            Op::Falloc { path, mode, offset, len } => {
                write!(f, "falloc {path} {} {len}@{offset}", mode.name())
            }
            Op::DirectWrite { path, offset, len } => {
                write!(f, "direct-write {path} {len}@{offset}")
            }
            Op::SyncWrite { path, offset, len, flag, direct } => {
                let d = if *direct { "-direct" } else { "" };
                write!(f, "sync-write{d} {path} {} {len}@{offset}", flag.name())
            }
            Op::MmapWrite { path, offset, len } => write!(f, "mmap-write {path} {len}@{offset}"),
            Op::Symlink { target, path } => write!(f, "symlink {target} {path}"),
            Op::Truncate { path, size } => write!(f, "truncate {path} {size}"),
            Op::Setxattr { path, name, value } => write!(f, "setxattr {path} {name}={value}"),
            Op::Removexattr { path, name } => write!(f, "removexattr {path} {name}"),
            Op::Rename2 { from, to, how } => write!(f, "rename-{} {from} {to}", how.name()),
            Op::Chmod { path, mode } => write!(f, "chmod {path} {mode:04o}"),
            Op::Chown { path, uid, gid } => write!(f, "chown {path} {uid}:{gid}"),
            Op::Utimes { path, mtime } => write!(f, "utimes {path} {mtime}"),
            Op::TmpfileLink { path, len } => write!(f, "tmpfile-link {path} {len}"),
            Op::Clone { from, to } => write!(f, "clone {from} {to}"),
            Op::CloneRange { from, to, offset, len } => {
                write!(f, "clone-range {from} {to} {len}@{offset}")
            }
            Op::CopyRange { from, to, offset, len } => {
                write!(f, "copy-range {from} {to} {len}@{offset}")
            }
            Op::DedupeRange { from, to, offset, len } => {
                write!(f, "dedupe-range {from} {to} {len}@{offset}")
            }
            Op::TxnBegin => write!(f, "txn-begin"),
            Op::TxnCommit { durable: false } => write!(f, "txn-commit"),
            Op::TxnCommit { durable: true } => write!(f, "txn-commit-durable"),
            Op::TxnAbort => write!(f, "txn-abort"),
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
        let r = op.op_ref(4);
        assert_eq!(r.kind, OpKind::Rename);
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"index":4,"kind":"rename","paths":["/A/f0","/B/g0"]}"#
        );
        assert_eq!(
            Op::OtruncWrite { path: "/t".into(), len: 0, chunk: 4096 }.kind(),
            OpKind::Truncate
        );
    }
}
