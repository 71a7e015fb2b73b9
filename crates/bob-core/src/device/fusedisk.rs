//! bob's FUSE disk: a flat FUSE file system whose files are disks served from memory and
//! a base image, so that a loop device attached to one of them sends bob every block
//! request the file system under test issues.
//!
//! A file here is anything implementing [`Disk`]: the recording disk (which logs each
//! write, flush and discard) or a crash-state view (base image + overlay + a private
//! overlay for what recovery writes). A recording disk's file is opened with
//! `FOPEN_DIRECT_IO`, so the loop driver's requests bypass the page cache and reach the
//! daemon in order, one for one; a crash-state view's file may be cached
//! ([`Disk::cached`]: xfs's), as only its contents matter: xfs_repair's 1 KiB reads of
//! the log are then served by the kernel's readahead, not one FUSE request each. A
//! server of views alone also refuses the kernel's fsyncs ([`Flushes::Refuse`]): a view
//! has nothing to flush, and every flush or FUA write of recovery would otherwise be a
//! round trip. The daemon only touches memory and files outside any device it serves:
//! it must never do I/O that depends on a loop device it backs.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, KernelConfig,
    LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, WriteFlags,
};

use super::{Error, Result};

/// A block device as bob serves it: byte-addressed, with explicit flush and discard.
///
/// Offsets and lengths from the loop driver are multiples of 512.
pub trait Disk: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// Writes `data` at `offset`.
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// A cache flush (the backing file's fsync).
    fn flush(&self) -> std::io::Result<()>;
    /// Discards (reads back as zeros) `len` bytes at `offset`.
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()>;
    /// Whether the kernel may cache this disk's file (reads through the page cache, with
    /// readahead; writes still reach the daemon at once, in order, as FUSE writes through).
    /// Only for disks whose requests need not arrive one for one: a recording must see
    /// each block request as the file system issued it, so the default is no.
    fn cached(&self) -> bool {
        false
    }
}

/// Served files by inode number: (file name, disk).
type Files = BTreeMap<u64, (String, Arc<dyn Disk>)>;

struct Registry {
    files: RwLock<Files>,
    next_ino: AtomicU64,
}

impl Registry {
    fn get(&self, ino: u64) -> Option<Arc<dyn Disk>> {
        self.files.read().ok()?.get(&ino).map(|(_, d)| d.clone())
    }
    fn by_name(&self, name: &OsStr) -> Option<(u64, Arc<dyn Disk>)> {
        let files = self.files.read().ok()?;
        files.iter().find(|(_, (n, _))| OsStr::new(n) == name).map(|(i, (_, d))| (*i, d.clone()))
    }
}

const ROOT: u64 = 1;
// Zero TTLs: files come and go as crash states are served, and a stale cached
// attribute or dentry would hand the kernel the wrong disk.
const TTL: Duration = Duration::ZERO;

fn attr(ino: u64, size: u64, kind: FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: if kind == FileType::Directory { 0o755 } else { 0o600 },
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

fn errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

struct DiskFs {
    registry: Arc<Registry>,
    flushes: Flushes,
}

/// What a FUSE disk server does with the kernel's fsyncs of its files: a loop device
/// turns each flush, and each FUA write, into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushes {
    /// Each reaches the disk's [`Disk::flush`]: a recording disk logs it as a barrier.
    Forward,
    /// The first is answered ENOSYS, and the kernel, which remembers that for the
    /// connection, sends none after it (it still writes back and waits first). Only for
    /// servers of disks with nothing to flush, such as crash-state views: every write is
    /// in the view when the write returns, as FUSE writes through.
    Refuse,
}

/// Whether the running kernel's loop driver can use a FUSE file opened with
/// `FOPEN_DIRECT_IO`. 4.4.1's cannot: its loop thread and the writers to the device block
/// for ever on the first writes (4.16.13 and every later kernel tried serve it). On such
/// a kernel a recording disk goes through the page cache instead. The loop thread takes
/// requests one at a time and a flush is an fsync of the file, which writes back every
/// page dirtied before it, so bob still sees each flush after the writes it covers and
/// none after it; what is lost is a block written twice between two flushes, of which
/// only the last contents arrive. Crash states are then fewer, never ones a disk could
/// not leave. The releases between 4.4 and 4.16 were not tried; they are treated as 4.4.
pub(crate) fn loop_over_direct_io_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| crate::host::running_version() >= (4, 16))
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large writes keep one block request in one FUSE request (up to the kernel's cap).
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if u64::from(parent) != ROOT {
            return reply.error(Errno::ENOENT);
        }
        match self.registry.by_name(name) {
            Some((ino, disk)) => reply.entry(
                &TTL,
                &attr(ino, disk.size(), FileType::RegularFile),
                fuser::Generation(0),
            ),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let ino = u64::from(ino);
        if ino == ROOT {
            return reply.attr(&TTL, &attr(ROOT, 0, FileType::Directory));
        }
        match self.registry.get(ino) {
            Some(disk) => reply.attr(&TTL, &attr(ino, disk.size(), FileType::RegularFile)),
            None => reply.error(Errno::ENOENT),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Disks have a fixed size; attribute changes are accepted and ignored.
        self.getattr(_req, ino, None, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let Some(disk) = self.registry.get(u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        // Without FOPEN_KEEP_CACHE the kernel drops the file's cached pages at each open,
        // and every served disk has an inode number of its own, so no cache outlives its
        // disk.
        let flags = match disk.cached() {
            true => FopenFlags::empty(),
            false if !loop_over_direct_io_works() => FopenFlags::empty(),
            false => FopenFlags::FOPEN_DIRECT_IO,
        };
        reply.opened(FileHandle(0), flags);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(disk) = self.registry.get(u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        let end = (offset + u64::from(size)).min(disk.size());
        if offset >= end {
            return reply.data(&[]);
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        match disk.read_at(offset, &mut buf) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(disk) = self.registry.get(u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        if offset + data.len() as u64 > disk.size() {
            return reply.error(Errno::from_i32(libc::ENOSPC));
        }
        match disk.write_at(offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lo: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2), not a cache flush: nothing to do.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if self.flushes == Flushes::Refuse {
            return reply.error(Errno::ENOSYS);
        }
        let Some(disk) = self.registry.get(u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        match disk.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(disk) = self.registry.get(u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        // The loop driver turns REQ_OP_DISCARD into PUNCH_HOLE and REQ_OP_WRITE_ZEROES into
        // ZERO_RANGE (or PUNCH_HOLE); both read back as zeros on bob's disk.
        if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
            let end = (offset + length).min(disk.size());
            if offset < end {
                if let Err(e) = disk.discard(offset, end - offset) {
                    return reply.error(errno(&e));
                }
            }
        }
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if u64::from(ino) != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut entries: Vec<(u64, FileType, String)> =
            vec![(ROOT, FileType::Directory, ".".into()), (ROOT, FileType::Directory, "..".into())];
        if let Ok(files) = self.registry.files.read() {
            entries.extend(files.iter().map(|(i, (n, _))| (*i, FileType::RegularFile, n.clone())));
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096);
    }
}

/// A mounted FUSE disk; files are added and removed while it runs. Unmounted on drop.
pub struct DiskServer {
    mountpoint: PathBuf,
    registry: Arc<Registry>,
    session: Option<fuser::BackgroundSession>,
    /// The FUSE connection's number in /sys/fs/fuse/connections (the mount's minor).
    connection: Option<u32>,
}

impl DiskServer {
    /// Mounts an empty FUSE disk at `mountpoint` (an existing empty directory), served by
    /// `threads` threads, every flush forwarded to its disk.
    pub fn start(mountpoint: &Path, threads: usize) -> Result<DiskServer> {
        DiskServer::start_with(mountpoint, threads, Flushes::Forward)
    }

    /// [`DiskServer::start`], with a choice of what happens to flushes.
    pub fn start_with(mountpoint: &Path, threads: usize, flushes: Flushes) -> Result<DiskServer> {
        let registry =
            Arc::new(Registry { files: RwLock::new(BTreeMap::new()), next_ino: AtomicU64::new(2) });
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("bob-disk".into()),
            fuser::MountOption::Subtype("bob".into()),
            fuser::MountOption::NoAtime,
        ];
        config.n_threads = Some(threads.max(1));
        // A thread of its own /dev/fuse descriptor each (FUSE_DEV_IOC_CLONE) where the
        // kernel has the ioctl (4.2); before it, fuser's session fails after the mount
        // and leaves every request unanswered (3.13.10 hung so), so the threads share one
        // descriptor, as libfuse's did before 4.2.
        config.clone_fd = threads > 1 && crate::host::running_version() >= (4, 2);
        let fs = DiskFs { registry: registry.clone(), flushes };
        let session = fuser::spawn_mount(fs, mountpoint, &config)
            .map_err(|source| Error::Fuse { path: mountpoint.to_owned(), source })?;
        let connection = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(mountpoint).ok().map(|m| libc::minor(m.dev()))
        };
        Ok(DiskServer {
            mountpoint: mountpoint.to_owned(),
            registry,
            session: Some(session),
            connection,
        })
    }

    /// Serves `disk` as file `name`; returns its path.
    pub fn add(&self, name: &str, disk: Arc<dyn Disk>) -> PathBuf {
        let ino = self.registry.next_ino.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut files) = self.registry.files.write() {
            files.retain(|_, (n, _)| n != name);
            files.insert(ino, (name.to_owned(), disk));
        }
        self.mountpoint.join(name)
    }

    /// Stops serving `name`.
    pub fn remove(&self, name: &str) {
        if let Ok(mut files) = self.registry.files.write() {
            files.retain(|_, (n, _)| n != name);
        }
    }

    /// The FUSE connection's number (see [`super::registry::abort_fuse_connection`]).
    pub fn connection(&self) -> Option<u32> {
        self.connection
    }

    /// Its mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for DiskServer {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            // Normally the loop devices are gone by now; if one still holds a file (a
            // guard leaked), a plain unmount fails with EBUSY and we detach lazily so the
            // mount point is released anyway.
            if nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::empty()).is_err() {
                // Something still uses a disk (a mount that timed out and finished late
                // holds its loop device). Abort the connection before the serving threads
                // go: otherwise I/O still in flight would wait for a reply forever, and a
                // thread of ours blocked on it would keep this process from ever exiting.
                // Only while our mount is still there: its number may already belong to
                // another FUSE mount (numbers are reused), which must not be aborted.
                if let Some(n) = self.connection {
                    if super::registry::fuse_connection_at(&self.mountpoint) == Some(n) {
                        let _ = super::registry::abort_fuse_connection(n);
                    }
                }
                let _ = nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH);
            }
            drop(session);
        }
    }
}
