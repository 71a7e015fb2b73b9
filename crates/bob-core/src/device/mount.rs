//! Kernel mounts of the device under test, unmounted on drop.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use nix::mount::{MntFlags, MsFlags};

use super::{Error, Result};

/// A mounted file system; unmounted on drop.
#[derive(Debug)]
pub struct Mount {
    target: PathBuf,
    active: bool,
    /// Held while mounted where the kernel mounts one btrfs of an fsid at a time.
    _one_btrfs: Option<BtrfsTurn>,
}

/// Crash states of one recording (and the recordings of one shared setup) are copies of
/// one btrfs: the same fsid and device id. A kernel before 6.7 (no `temp_fsid` feature)
/// refuses to mount a second device of a mounted fsid ("File exists"), which would read as
/// an unrecoverable crash state; there, btrfs mounts of this process take turns.
static ONE_BTRFS_AT_A_TIME: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// A btrfs mount's turn; the next waiting mount goes when it drops. (Not a `MutexGuard`:
/// a mount may be made on one thread and dropped on another.)
#[derive(Debug)]
struct BtrfsTurn;

impl BtrfsTurn {
    /// Waits for the turn; `None` after [`BTRFS_TURN_WAIT`]: a mount that hung in the
    /// kernel keeps its turn forever, and the others then try without one (and fail as
    /// that kernel makes them) rather than hang behind it.
    fn take() -> Option<BtrfsTurn> {
        let (taken, freed) = &ONE_BTRFS_AT_A_TIME;
        let deadline = std::time::Instant::now() + BTRFS_TURN_WAIT;
        let mut taken = taken.lock().unwrap_or_else(|p| p.into_inner());
        while *taken {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            taken = freed.wait_timeout(taken, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        *taken = true;
        Some(BtrfsTurn)
    }
}

/// How long a btrfs mount waits for its turn (see [`BtrfsTurn::take`]).
const BTRFS_TURN_WAIT: Duration = Duration::from_secs(600);

impl Drop for BtrfsTurn {
    fn drop(&mut self) {
        let (taken, freed) = &ONE_BTRFS_AT_A_TIME;
        *taken.lock().unwrap_or_else(|p| p.into_inner()) = false;
        freed.notify_one();
    }
}

/// Makes the kernel forget every btrfs device it registered that is not mounted
/// (`btrfs device scan --forget`, the `BTRFS_IOC_FORGET_DEV` ioctl with no name). A kernel
/// before 6.7 keeps the device of a copy of an fsid registered after its unmount and then
/// refuses a copy of an older generation ("already registered with a higher generation":
/// File exists), which every crash state before the recording's end is. Errors are
/// ignored: the mount that follows reports what matters.
fn forget_unmounted_btrfs_devices() {
    /// `struct btrfs_ioctl_vol_args`.
    #[repr(C)]
    struct VolArgs {
        fd: i64,
        name: [u8; 4088],
    }
    nix::ioctl_write_ptr!(btrfs_forget_dev, 0x94, 5, VolArgs);
    let Ok(control) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/btrfs-control")
    else {
        return;
    };
    let args = VolArgs { fd: 0, name: [0; 4088] };
    // SAFETY: `args` is a valid `btrfs_ioctl_vol_args` that outlives the call, and the
    // descriptor is btrfs' control device, which reads only that structure.
    let _ = unsafe { btrfs_forget_dev(std::os::fd::AsRawFd::as_raw_fd(&control), &args) };
}

/// Whether this kernel's btrfs must mount one device of an fsid at a time (see
/// [`ONE_BTRFS_AT_A_TIME`]). Read after btrfs is loaded (its sysfs directory exists).
fn btrfs_mounts_take_turns() -> bool {
    let features = Path::new("/sys/fs/btrfs/features");
    features.is_dir() && !features.join("temp_fsid").exists()
}

/// Mounts `device` on `target` as `fstype` with `options` (the comma-separated data string;
/// `ro` is turned into the read-only flag).
pub fn mount(device: &Path, target: &Path, fstype: &str, options: &str) -> Result<Mount> {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for opt in options.split(',').filter(|o| !o.is_empty()) {
        match opt {
            "ro" => flags |= MsFlags::MS_RDONLY,
            "sync" => flags |= MsFlags::MS_SYNCHRONOUS,
            "dirsync" => flags |= MsFlags::MS_DIRSYNC,
            "noatime" => flags |= MsFlags::MS_NOATIME,
            other => data.push(other),
        }
    }
    let data = data.join(",");
    let one_btrfs =
        if fstype == "btrfs" && btrfs_mounts_take_turns() { BtrfsTurn::take() } else { None };
    let call = || nix::mount::mount(Some(device), target, Some(fstype), flags, Some(data.as_str()));
    let mounted = match &one_btrfs {
        // Another copy of this fsid registered earlier (a crash state checked before, the
        // recording) is forgotten first; a tool that scanned one in between is forgotten
        // on a second try.
        Some(_) => {
            forget_unmounted_btrfs_devices();
            call().or_else(|e| match e {
                nix::errno::Errno::EEXIST => {
                    forget_unmounted_btrfs_devices();
                    call()
                }
                e => Err(e),
            })
        }
        None => call(),
    };
    mounted.map_err(|e| Error::Mount {
        what: format!("-t {fstype} -o {options} {}", device.display()),
        target: target.to_owned(),
        source: e.into(),
    })?;
    Ok(Mount { target: target.to_owned(), active: true, _one_btrfs: one_btrfs })
}

/// [`mount`] that gives up after `timeout` (`None`): a mount of a damaged image can hang in
/// the kernel. A mount that succeeds after bob gave up is unmounted as soon as it returns.
pub(crate) fn mount_within(
    device: &Path,
    target: &Path,
    fstype: &str,
    options: &str,
    timeout: Duration,
) -> Option<Result<Mount>> {
    let (device, target, fstype, options) =
        (device.to_owned(), target.to_owned(), fstype.to_owned(), options.to_owned());
    super::cmd::call_within(timeout, move || mount(&device, &target, &fstype, &options))
}

impl Mount {
    /// The mount point.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Unmounts now, reporting failure.
    pub fn unmount(mut self) -> Result<()> {
        self.active = false;
        unmount_path(&self.target)
        // The turn (if any) ends as `self` drops, after the unmount.
    }
}

/// Unmounts `target`, retrying briefly while it is busy, then detaching lazily so that
/// nothing stays mounted.
pub(crate) fn unmount_path(target: &Path) -> Result<()> {
    let mut last = None;
    for attempt in 0..20 {
        match nix::mount::umount2(target, MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EBUSY) => {
                last = Some(nix::errno::Errno::EBUSY);
                std::thread::sleep(Duration::from_millis(5 << attempt.min(5)));
            }
            Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => return Ok(()),
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    // Still busy: detach it from the tree so it is gone for everyone; the kernel finishes
    // the unmount when the last user lets go.
    nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(|_| Error::Mount {
        what: "umount".into(),
        target: target.to_owned(),
        source: last.unwrap_or(nix::errno::Errno::EBUSY).into(),
    })
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.active {
            let _ = unmount_path(&self.target);
        }
    }
}

/// Flushes dirty data of the file system mounted at `path` (syncfs(2)).
pub fn syncfs(path: &Path) -> Result<()> {
    let dir =
        std::fs::File::open(path).map_err(|e| Error::Io { path: path.to_owned(), source: e })?;
    nix::unistd::syncfs(&dir).map_err(|e| Error::Io { path: path.to_owned(), source: e.into() })
}
