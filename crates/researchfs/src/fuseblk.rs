//! A fuseblk mount, so that sync(2) and syncfs(2) reach a design.
//!
//! The kernel forwards sync(2) and syncfs(2) to a FUSE daemon as `FUSE_SYNCFS` only where
//! the connection allows it (`fc->sync_fs`): virtiofs, and since Linux 6.18 every
//! *fuseblk* mount (a FUSE mount whose source is a block device, which only root can
//! make). An ordinary FUSE mount gets nothing: sync returns before the design did
//! anything. So [`crate::fuse::mount_on_block_device`] mounts as fuseblk, on a block
//! device the caller provides (the design never touches it; it is the mount's token,
//! and a loop device over a small file serves).
//!
//! fuser 0.18 does not know `FUSE_SYNCFS` (opcode 50): it answers ENOSYS, and the kernel
//! then stops asking for the life of the connection. So fuser does not read `/dev/fuse`
//! itself: a [`Relay`] reads every request, answers `FUSE_SYNCFS` by calling
//! [`Fs::sync`], and passes everything else to fuser over a `SOCK_SEQPACKET` socket pair
//! (one message per request, as a read of `/dev/fuse` gives), and fuser's replies back.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::fs::Fs;

/// The kernel's opcode for sync(2)/syncfs(2) (`include/uapi/linux/fuse.h`).
const FUSE_SYNCFS: u32 = 50;
/// Bytes of `struct fuse_out_header` (len, error, unique).
const OUT_HEADER: usize = 16;
/// The largest request: a write of fuser's negotiated `max_write` (1 MiB, see
/// `FuseFs::init`) plus its headers, with room to spare.
const REQUEST_BUF: usize = (1 << 20) + (64 << 10);
/// Socket buffers big enough for one such request (a seqpacket message must fit whole).
const SOCKET_BUF: libc::c_int = 8 << 20;
/// How often the reading thread looks at its stop flag while the kernel sends nothing.
const POLL_MS: libc::c_int = 200;

/// The two threads between `/dev/fuse` and fuser.
pub(crate) struct Relay {
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    syncs: Arc<AtomicU64>,
}

impl Relay {
    /// How many `FUSE_SYNCFS` requests reached the design.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    /// Stops the threads (after the kernel ended the connection they stop by themselves)
    /// and waits for them.
    pub(crate) fn join(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Threads not joined (a failed unmount): they end at their next wake-up, and
        // closing /dev/fuse then aborts the connection.
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn cstring(p: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Opens `/dev/fuse`, mounts it at `mountpoint` as fuseblk on `blkdev`, and starts the
/// relay. Returns the descriptor fuser serves (its end of the socket pair) and the
/// relay. The kernel's `FUSE_INIT` waits in the relay until fuser reads it.
pub(crate) fn mount(fs: Arc<Fs>, blkdev: &Path, mountpoint: &Path) -> io::Result<(OwnedFd, Relay)> {
    let fuse = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/fuse")?;
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let data = format!(
        "fd={},rootmode=40000,user_id={uid},group_id={gid},blksize={},default_permissions",
        fuse.as_raw_fd(),
        crate::layout::BLOCK
    );
    let (src, dst) = (cstring(blkdev)?, cstring(mountpoint)?);
    let (fstype, data) = (c"fuseblk", std::ffi::CString::new(data).map_err(io::Error::other)?);
    // SAFETY: every pointer is a valid NUL-terminated string for the call's duration.
    check(unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOATIME,
            data.as_ptr().cast(),
        )
    })?;
    let started = start(fs, fuse);
    if started.is_err() {
        // SAFETY: umount2 with a valid path; the mount is ours.
        unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) };
    }
    started
}

fn start(fs: Arc<Fs>, fuse: File) -> io::Result<(OwnedFd, Relay)> {
    let mut pair: [RawFd; 2] = [-1; 2];
    // SAFETY: socketpair writes two descriptors into `pair`.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just made and are owned by nothing else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    for fd in [&ours, &theirs] {
        set_buffers(fd.as_raw_fd());
    }
    let fuse = Arc::new(fuse);
    let ours = Arc::new(ours);
    let stop = Arc::new(AtomicBool::new(false));
    let syncs = Arc::new(AtomicU64::new(0));
    let down = {
        let (fuse, ours, stop, syncs) = (fuse.clone(), ours.clone(), stop.clone(), syncs.clone());
        std::thread::Builder::new()
            .name("researchfs-relay-in".into())
            .spawn(move || kernel_to_fuser(&fs, &fuse, &ours, &stop, &syncs))?
    };
    let up = std::thread::Builder::new()
        .name("researchfs-relay-out".into())
        .spawn(move || fuser_to_kernel(&fuse, &ours))?;
    Ok((theirs, Relay { threads: vec![down, up], stop, syncs }))
}

/// Socket buffers that hold the largest request; root may exceed `wmem_max`.
fn set_buffers(fd: RawFd) {
    for (force, plain) in
        [(libc::SO_SNDBUFFORCE, libc::SO_SNDBUF), (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)]
    {
        let size = SOCKET_BUF;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let ptr = (&size as *const libc::c_int).cast();
        // SAFETY: setsockopt reads one c_int from `ptr`.
        if unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, force, ptr, len) } != 0 {
            // SAFETY: as above.
            unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, plain, ptr, len) };
        }
    }
}

/// Reads requests from the kernel: `FUSE_SYNCFS` is answered here, every other request
/// goes to fuser. Ends when the kernel ends the connection (ENODEV, at unmount) or when
/// told to stop, and then shuts the socket so that fuser's side ends too.
fn kernel_to_fuser(fs: &Fs, fuse: &File, ours: &OwnedFd, stop: &AtomicBool, syncs: &AtomicU64) {
    let mut buf = vec![0u8; REQUEST_BUF];
    while !stop.load(Ordering::SeqCst) {
        let mut pfd = libc::pollfd { fd: fuse.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
        if ready == 0
            || (ready < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted)
        {
            continue;
        }
        // SAFETY: read into a buffer of `buf.len()` bytes.
        let n = unsafe { libc::read(fuse.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Interrupted, or the request was aborted before it was read: next one.
                Some(libc::EINTR | libc::EAGAIN | libc::ENOENT) => continue,
                // ENODEV: the connection ended (unmount); anything else ends it too.
                _ => break,
            }
        }
        let req = &buf[..n as usize];
        if req.len() >= 16
            && u32::from_ne_bytes(req[4..8].try_into().unwrap_or_default()) == FUSE_SYNCFS
        {
            syncs.fetch_add(1, Ordering::SeqCst);
            let error = match fs.sync() {
                Ok(()) => 0,
                Err(e) => -e.errno(),
            };
            let mut reply = [0u8; OUT_HEADER];
            reply[0..4].copy_from_slice(&(OUT_HEADER as u32).to_ne_bytes());
            reply[4..8].copy_from_slice(&error.to_ne_bytes());
            reply[8..16].copy_from_slice(&req[8..16]);
            // SAFETY: write of a 16-byte buffer; a failure (the request was interrupted
            // meanwhile) needs no answer.
            unsafe { libc::write(fuse.as_raw_fd(), reply.as_ptr().cast(), reply.len()) };
            continue;
        }
        // SAFETY: send of `req`, one seqpacket message.
        let sent = unsafe {
            libc::send(ours.as_raw_fd(), req.as_ptr().cast(), req.len(), libc::MSG_NOSIGNAL)
        };
        if sent < 0 {
            break;
        }
    }
    // SAFETY: shutdown of our own socket: fuser's next read sees the end.
    unsafe { libc::shutdown(ours.as_raw_fd(), libc::SHUT_RDWR) };
}

/// Passes fuser's replies to the kernel until fuser closes its end (its session ended)
/// or the other thread shut the socket.
fn fuser_to_kernel(fuse: &File, ours: &OwnedFd) {
    let mut buf = vec![0u8; REQUEST_BUF];
    loop {
        // SAFETY: recv into a buffer of `buf.len()` bytes.
        let n = unsafe { libc::recv(ours.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n == 0 {
            return;
        }
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // SAFETY: write of the `n` bytes received. ENOENT (the request was interrupted
        // and needs no answer any more) is not an error of the relay.
        unsafe { libc::write(fuse.as_raw_fd(), buf.as_ptr().cast(), n as usize) };
    }
}

/// syncfs(2) on the file system mounted at `mountpoint`.
pub(crate) fn syncfs(mountpoint: &Path) -> io::Result<()> {
    let dir = File::open(mountpoint)?;
    // SAFETY: syncfs on a valid descriptor.
    check(unsafe { libc::syncfs(dir.as_raw_fd()) }).map(drop)
}
