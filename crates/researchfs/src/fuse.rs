//! FUSE glue (fuser 0.18): serves an [`Fs`] at a mount point. Inode numbers are the file
//! system's own (the root is 1 on both sides). [`MountedFs`] unmounts on drop, so a test
//! that fails or panics still leaves no mount behind; [`MountedFs::unmount`] reports
//! errors instead.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyStatfs, ReplyWrite, Request, WriteFlags,
};

use crate::design::{Design, Options};
use crate::device::BlockDevice;
use crate::fs::{Attr, Fs};
use crate::layout::{Kind, BLOCK, NAME_MAX};
use crate::{Error, Result};

// Attributes change behind the kernel's back only through this process, but NoFS corrects
// link counts on first access; a short TTL keeps what stat shows close to the inode.
const TTL: Duration = Duration::from_secs(1);

fn errno(e: &Error) -> Errno {
    Errno::from_i32(e.errno())
}

fn ino32(ino: INodeNo) -> std::result::Result<u32, Errno> {
    u32::try_from(u64::from(ino)).map_err(|_| Errno::ENOENT)
}

fn file_attr(a: &Attr) -> FileAttr {
    let kind = if a.kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile };
    FileAttr {
        ino: INodeNo(u64::from(a.ino)),
        size: a.size,
        blocks: a.blocks * (BLOCK as u64 / 512),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: UNIX_EPOCH,
        kind,
        perm: if kind == FileType::Directory { 0o755 } else { 0o644 },
        nlink: a.nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: BLOCK as u32,
    }
}

/// The control file through which programs on a mounted journaling design call
/// `osync()` and `dsync()`: at the root, never listed by readdir, writable by anyone.
/// Writing `osync` to it ends the running transaction and returns once it is in the disk
/// cache; writing `dsync` (or fsync of the control file) also flushes. Any other text is
/// EINVAL. On designs without osync it does not exist (ENOENT). fsync of any file is
/// `dsync()` on those designs.
pub const SYNC_CONTROL: &str = ".researchfs-sync";

/// The control file's inode number (past every real inode, which are 32-bit slots of a
/// far smaller table).
const CTL: u32 = u32::MAX;

/// The control file through which programs on a mounted Valor design call the paper's
/// transaction calls: at the root, never listed by readdir, writable by anyone. Writing
/// `begin` begins a transaction (every later write on the mount is part of it and must
/// overwrite existing pages), `commit` commits it (non-durably: ordered, atomic, may be
/// lost), `commit-durable` commits it durably (the paper's Transaction Sync), `abort`
/// rolls it back. A call out of turn (begin while a transaction is open, commit or abort
/// with none) and any other text is EINVAL. On designs without transactions it does not
/// exist (ENOENT).
pub const TXN_CONTROL: &str = ".researchfs-txn";

/// The transaction control file's inode number.
const TXN_CTL: u32 = u32::MAX - 1;

/// xsyncfs' output file: what a program writes to it is its *output* (what the paper's
/// xsyncfs buffers on its way to the screen or the network). At the root of the xsyncfs
/// designs only, never listed by readdir, writable by anyone, reads as empty; each write
/// is one output, held or released as [`crate::Design::output`] says
/// ([`crate::Fs::output`]); bob logs a released output as a mark in the trace.
pub const OUTPUT_FILE: &str = ".researchfs-output";

/// The output file's inode number.
const OUT: u32 = u32::MAX - 2;

fn ctl_attr() -> FileAttr {
    ctl_attr_of(CTL)
}

fn ctl_attr_of(ino: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(u64::from(ino)),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0o666,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: BLOCK as u32,
    }
}

struct FuseFs {
    fs: Arc<Fs>,
}

impl FuseFs {
    fn entry(&self, ino: u32, reply: ReplyEntry) {
        match self.fs.getattr(ino) {
            Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

macro_rules! ino {
    ($x:expr, $reply:ident) => {
        match ino32($x) {
            Ok(i) => i,
            Err(e) => return $reply.error(e),
        }
    };
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn destroy(&mut self) {
        // The session ends (unmount): a clean shutdown.
        let _ = self.fs.shutdown();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let parent = ino!(parent, reply);
        if parent == crate::layout::ROOT
            && name.as_bytes() == SYNC_CONTROL.as_bytes()
            && self.fs.design().has_osync()
        {
            return reply.entry(&TTL, &ctl_attr(), Generation(0));
        }
        if parent == crate::layout::ROOT
            && name.as_bytes() == TXN_CONTROL.as_bytes()
            && self.fs.design().has_txn()
        {
            return reply.entry(&TTL, &ctl_attr_of(TXN_CTL), Generation(0));
        }
        if parent == crate::layout::ROOT
            && name.as_bytes() == OUTPUT_FILE.as_bytes()
            && self.fs.design().output().is_some()
        {
            return reply.entry(&TTL, &ctl_attr_of(OUT), Generation(0));
        }
        match self.fs.lookup(parent, name.as_bytes()) {
            Ok(ino) => self.entry(ino, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let ino = ino!(ino, reply);
        if ino == CTL || ino == TXN_CTL || ino == OUT {
            return reply.attr(&TTL, &ctl_attr_of(ino));
        }
        match self.fs.getattr(ino) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
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
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let ino = ino!(ino, reply);
        if ino == CTL || ino == TXN_CTL || ino == OUT {
            return reply.attr(&TTL, &ctl_attr_of(ino));
        }
        // Only the size is stored; modes, owners and times are accepted and not kept.
        if let Some(size) = size {
            if let Err(e) = self.fs.truncate(ino, size) {
                return reply.error(errno(&e));
            }
        }
        match self.fs.getattr(ino) {
            Ok(a) => reply.attr(&TTL, &file_attr(&a)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let parent = ino!(parent, reply);
        match self.fs.mkdir(parent, name.as_bytes()) {
            Ok(ino) => self.entry(ino, reply),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let parent = ino!(parent, reply);
        match self.fs.unlink(parent, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let parent = ino!(parent, reply);
        match self.fs.rmdir(parent, name.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let parent = ino!(parent, reply);
        let newparent = ino!(newparent, reply);
        if !flags.is_empty() {
            // RENAME_NOREPLACE / EXCHANGE would need atomicity none of the designs has.
            return reply.error(Errno::EINVAL);
        }
        match self.fs.rename(parent, name.as_bytes(), newparent, newname.as_bytes()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let ino = ino!(ino, reply);
        let newparent = ino!(newparent, reply);
        match self.fs.link(ino, newparent, newname.as_bytes()) {
            Ok(()) => self.entry(ino, reply),
            Err(Error::IsDir) => reply.error(Errno::EPERM),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        // The core has regular files and directories only: say so (fuser's default is
        // EPERM, which reads as a permission problem).
        reply.error(Errno::EOPNOTSUPP);
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
        let ino = ino!(ino, reply);
        if ino == CTL || ino == TXN_CTL || ino == OUT {
            return reply.data(&[]);
        }
        match self.fs.read(ino, offset, size as usize) {
            Ok(d) => reply.data(&d),
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
        let ino = ino!(ino, reply);
        if ino == CTL {
            let done = match std::str::from_utf8(data).map(str::trim) {
                Ok("osync") => self.fs.osync(),
                Ok("dsync") => self.fs.dsync(),
                _ => return reply.error(Errno::EINVAL),
            };
            return match done {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno(&e)),
            };
        }
        if ino == OUT {
            let text = String::from_utf8_lossy(data);
            return match self.fs.output(text.trim_end_matches('\n')) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno(&e)),
            };
        }
        if ino == TXN_CTL {
            let done = match std::str::from_utf8(data).map(str::trim) {
                Ok("begin") => self.fs.txn_begin().map(drop),
                Ok("commit") => self.fs.txn_commit(false),
                Ok("commit-durable") => self.fs.txn_commit(true),
                Ok("abort") => self.fs.txn_abort(),
                _ => return reply.error(Errno::EINVAL),
            };
            return match done {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno(&e)),
            };
        }
        match self.fs.write(ino, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2): every write already reached the device.
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
        let ino = ino!(ino, reply);
        let done = match ino {
            CTL => self.fs.dsync(),
            TXN_CTL | OUT => Ok(()),
            _ => self.fs.fsync(ino),
        };
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let ino = ino!(ino, reply);
        match self.fs.fsync(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dir = ino!(ino, reply);
        let list = match self.fs.readdir(dir) {
            Ok(l) => l,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut entries: Vec<(u64, FileType, Vec<u8>)> = vec![
            (u64::from(dir), FileType::Directory, b".".to_vec()),
            (u64::from(dir), FileType::Directory, b"..".to_vec()),
        ];
        entries.extend(list.into_iter().map(|(name, ino, kind)| {
            let t = if kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile };
            (u64::from(ino), t, name)
        }));
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, OsStr::from_bytes(&name)) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let u = self.fs.statfs();
        reply.statfs(
            u.blocks,
            u.bfree,
            u.bfree,
            u.files,
            u.ffree,
            BLOCK as u32,
            NAME_MAX as u32,
            BLOCK as u32,
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let parent = ino!(parent, reply);
        let made = self.fs.create(parent, name.as_bytes()).and_then(|ino| self.fs.getattr(ino));
        match made {
            Ok(a) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// A researchfs file system mounted with FUSE; unmounted (and shut down cleanly) on drop.
pub struct MountedFs {
    mountpoint: PathBuf,
    fs: Arc<Fs>,
    session: Option<fuser::BackgroundSession>,
    /// A fuseblk mount's relay between `/dev/fuse` and fuser ([`crate::fuseblk`]).
    relay: Option<crate::fuseblk::Relay>,
}

/// Opens `design` on `dev` (running its recovery) and mounts it at `mountpoint`, an
/// existing empty directory. Root mounts directly, without fusermount.
pub fn mount(design: Design, dev: Arc<dyn BlockDevice>, mountpoint: &Path) -> Result<MountedFs> {
    mount_with(design, dev, mountpoint, Options::default())
}

/// [`mount`] with options.
pub fn mount_with(
    design: Design,
    dev: Arc<dyn BlockDevice>,
    mountpoint: &Path,
    opts: Options,
) -> Result<MountedFs> {
    let fs = Fs::open(design, dev, opts)?;
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(format!("researchfs-{}", design.name())),
        fuser::MountOption::Subtype("researchfs".into()),
        fuser::MountOption::NoAtime,
        fuser::MountOption::DefaultPermissions,
    ];
    // One thread: the core serialises on one lock anyway.
    config.n_threads = Some(1);
    let session = match fuser::spawn_mount(FuseFs { fs: fs.clone() }, mountpoint, &config) {
        Ok(s) => s,
        Err(source) => {
            fs.crash();
            return Err(Error::Mount { path: mountpoint.to_owned(), source });
        }
    };
    Ok(MountedFs { mountpoint: mountpoint.to_owned(), fs, session: Some(session), relay: None })
}

/// [`mount_with`] as a *fuseblk* mount whose source is `blkdev`, a block device the
/// design never reads or writes (a loop device over a small file serves): the kernel
/// then forwards sync(2) and syncfs(2) to the design (Linux 6.18 and later; see
/// [`crate::fuseblk`]), which an ordinary FUSE mount never gets. Whether it did on this
/// kernel, [`MountedFs::sync_reaches_design`] tells.
pub fn mount_on_block_device(
    design: Design,
    dev: Arc<dyn BlockDevice>,
    mountpoint: &Path,
    opts: Options,
    blkdev: &Path,
) -> Result<MountedFs> {
    let fs = Fs::open(design, dev, opts)?;
    let failed = |fs: &Fs, source| {
        fs.crash();
        Error::Mount { path: mountpoint.to_owned(), source }
    };
    let (fd, relay) = match crate::fuseblk::mount(fs.clone(), blkdev, mountpoint) {
        Ok(r) => r,
        Err(source) => return Err(failed(&fs, source)),
    };
    let mut config = fuser::Config::default();
    config.n_threads = Some(1);
    let acl = config.acl;
    let session = fuser::Session::from_fd(FuseFs { fs: fs.clone() }, fd, acl, config)
        .and_then(fuser::Session::spawn);
    match session {
        Ok(session) => Ok(MountedFs {
            mountpoint: mountpoint.to_owned(),
            fs,
            session: Some(session),
            relay: Some(relay),
        }),
        Err(source) => {
            if let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) {
                // SAFETY: umount2 with a valid path; the mount was made above.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
            drop(relay);
            Err(failed(&fs, source))
        }
    }
}

impl MountedFs {
    /// The mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The file system being served (for [`Fs::wait_scan`], [`Fs::detections`], ...).
    pub fn fs(&self) -> &Arc<Fs> {
        &self.fs
    }

    /// Whether sync(2) and syncfs(2) reach the design: a fuseblk mount
    /// ([`mount_on_block_device`]) on a kernel that forwards them. Asked once, by a
    /// syncfs(2) of the mount (which the design serves like any other when it arrives).
    pub fn sync_reaches_design(&self) -> bool {
        let Some(relay) = &self.relay else { return false };
        let before = relay.syncs();
        crate::fuseblk::syncfs(&self.mountpoint).is_ok() && relay.syncs() > before
    }

    /// Unmounts and shuts the file system down cleanly, reporting failures (a busy mount
    /// is detached lazily so it cannot outlive this call's owner, and reported).
    pub fn unmount(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        let path = self.mountpoint.clone();
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Mount {
            path: path.clone(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        // SAFETY: umount2 with a valid NUL-terminated path.
        let rc = unsafe { libc::umount2(c.as_ptr(), 0) };
        if rc != 0 {
            let source = std::io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            drop(session);
            self.fs.crash();
            return Err(Error::Mount { path, source });
        }
        // The kernel closed the session: the serving thread ends (calling destroy, which
        // shuts the file system down) and is joined here, then a fuseblk mount's relay.
        let joined = session.join();
        if let Some(relay) = self.relay.take() {
            relay.join();
        }
        joined.map_err(|source| Error::Mount { path, source })?;
        self.fs.shutdown()
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        let _ = self.release();
    }
}
