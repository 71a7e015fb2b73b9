//! Loop devices through the kernel's ioctls (`/dev/loop-control`, `LOOP_CONFIGURE`, or
//! on a kernel before 5.8, which lacks it, `LOOP_SET_FD` then `LOOP_SET_STATUS64`).
//!
//! Written here rather than taken from the `loopdev` crate because that crate generates
//! its bindings with bindgen at build time (a libclang dependency on every build machine)
//! for five ioctls and two structs that are part of the stable kernel ABI.
//!
//! Every device bob binds is bound with `LO_FLAGS_AUTOCLEAR`: if bob is killed outright,
//! the kernel unbinds the device as soon as nothing holds it open, so even SIGKILL leaks
//! no loop device unless a mount still holds it.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::{Error, Result};

const LOOP_MAJOR: u64 = 7;
const LOOP_SET_FD: libc::c_ulong = 0x4C00;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_SET_STATUS64: libc::c_ulong = 0x4C04;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

#[repr(C)]
#[derive(Clone, Copy)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// `_IO(0x12, 97)`: write back and drop a block device's buffer cache.
const BLKFLSBUF: libc::c_ulong = 0x1261;

fn loop_err(path: &Path, what: &'static str, source: std::io::Error) -> Error {
    Error::Loop { path: path.to_owned(), what, source }
}

/// Whether `path` is a loop block device (major 7).
pub fn is_loop_device(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device() && libc::major(m.rdev()) as u64 == LOOP_MAJOR)
        .unwrap_or(false)
}

use std::os::unix::fs::MetadataExt;

/// Whether the loop device at `path` is bound to a backing file.
fn is_bound(path: &Path) -> Result<bool> {
    let dev = File::open(path).map_err(|e| loop_err(path, "open", e))?;
    let mut info = std::mem::MaybeUninit::<LoopInfo64>::zeroed();
    // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 into the buffer we own.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_GET_STATUS64, info.as_mut_ptr()) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENXIO) => Ok(false),
        _ => Err(loop_err(path, "get status", err)),
    }
}

/// Checks that `path` may be used as a recording or checking device: a free loop device,
/// or (with `force`) anything, which the caller must then handle.
pub fn vet_user_device(path: &Path, force: bool) -> Result<()> {
    if !path.exists() {
        return Err(Error::Refused { path: path.to_owned(), reason: "no such device".into() });
    }
    if !is_loop_device(path) {
        if force {
            return Ok(());
        }
        return Err(Error::Refused {
            path: path.to_owned(),
            reason: "not a loop device; bob refuses to write to it (pass --force if you mean it)"
                .into(),
        });
    }
    if is_bound(path)? {
        return Err(Error::Refused {
            path: path.to_owned(),
            reason: "loop device is in use (bound to a file); pick a free one (losetup -f)".into(),
        });
    }
    Ok(())
}

/// Unbinds the loop device at `path` whoever bound it (for reclaiming a dead process's
/// devices; live devices are unbound by their [`LoopDevice`] guard).
pub(crate) fn clear_device(path: &Path) -> Result<()> {
    let dev = OpenOptions::new().read(true).open(path).map_err(|e| loop_err(path, "open", e))?;
    // SAFETY: LOOP_CLR_FD takes no argument.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD, 0) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ENXIO) {
            return Err(loop_err(path, "unbind", err));
        }
    }
    Ok(())
}

/// A loop device bound to a backing file; unbound on drop.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    dev: File,
    cleared: bool,
    /// The queue's `write_cache` file and the setting to put back at unbind, when
    /// [`LoopDevice::pass_flushes`] changed it.
    restore_write_cache: Option<(PathBuf, String)>,
}

/// How many times [`LoopDevice::attach_free`] asks for a free device before it gives up.
const ATTACH_TRIES: usize = 64;

/// Whether the directory of a sysfs attribute exists (the device's queue is there, only
/// the attribute is not: an older kernel's).
fn attr_dir_exists(attr: &Path) -> bool {
    attr.parent().is_some_and(Path::is_dir)
}

impl LoopDevice {
    /// Binds a free loop device (asking `/dev/loop-control`, which creates one if needed)
    /// to `backing`.
    pub fn attach_free(backing: &Path) -> Result<LoopDevice> {
        let ctl_path = Path::new("/dev/loop-control");
        // Another process (or thread) may take the device between GET_FREE and CONFIGURE:
        // CONFIGURE then fails with EBUSY, or, when the other has already used it and is
        // unbinding it (autoclear at its last close), opening it fails with ENXIO. Either
        // way the device is someone else's: ask for a free one again.
        // Under heavy contention (several processes, each with several workers) a few
        // tries can all lose, so it tries up to ATTACH_TRIES times, pausing a millisecond
        // after the first few to let the others finish binding or unbinding.
        let mut last = None;
        for attempt in 0..ATTACH_TRIES {
            if attempt >= 4 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let ctl = File::open(ctl_path).map_err(|e| loop_err(ctl_path, "open", e))?;
            // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number.
            let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) };
            if n < 0 {
                return Err(loop_err(ctl_path, "get free", std::io::Error::last_os_error()));
            }
            let path = PathBuf::from(format!("/dev/loop{n}"));
            match Self::attach(&path, backing) {
                Ok(dev) => return Ok(dev),
                Err(Error::Loop { source, .. })
                    if matches!(source.raw_os_error(), Some(libc::EBUSY | libc::ENXIO)) =>
                {
                    last = Some(path);
                }
                Err(e) => return Err(e),
            }
        }
        Err(loop_err(
            &last.unwrap_or_else(|| ctl_path.to_owned()),
            "bind",
            std::io::Error::from_raw_os_error(libc::EBUSY),
        ))
    }

    /// Binds the loop device at `path` to `backing` (read-write, 512-byte logical blocks).
    pub fn attach(path: &Path, backing: &Path) -> Result<LoopDevice> {
        Self::attach_with(path, backing, false)
    }

    /// [`Self::attach`], with the pre-5.8 binding forced when `two_steps` (for its test on
    /// a kernel that has LOOP_CONFIGURE).
    fn attach_with(path: &Path, backing: &Path, two_steps: bool) -> Result<LoopDevice> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)
            .map_err(|e| Error::Io { path: backing.to_owned(), source: e })?;
        let dev = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| loop_err(path, "open", e))?;
        // SAFETY: all-zero is a valid loop_info64.
        let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
        info.lo_flags = LO_FLAGS_AUTOCLEAR;
        let name = backing.as_os_str().as_encoded_bytes();
        let n = name.len().min(63);
        info.lo_file_name[..n].copy_from_slice(&name[..n]);
        let config =
            LoopConfig { fd: file.as_raw_fd() as u32, block_size: 512, info, reserved: [0; 8] };
        // SAFETY: LOOP_CONFIGURE reads one loop_config from memory we own; the fd is open.
        let rc = match two_steps {
            true => -1,
            false => unsafe {
                libc::ioctl(dev.as_raw_fd(), LOOP_CONFIGURE, &config as *const LoopConfig)
            },
        };
        if rc != 0 {
            let err = match two_steps {
                true => std::io::Error::from_raw_os_error(libc::EINVAL),
                false => std::io::Error::last_os_error(),
            };
            // A kernel before 5.8 does not know LOOP_CONFIGURE (EINVAL or ENOTTY): bind
            // in two steps, as losetup did then.
            if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOTTY)) {
                return Err(loop_err(path, "bind", err));
            }
            Self::bind_in_two_steps(&dev, &file, &config.info)
                .map_err(|e| loop_err(path, "bind", e))?;
        }
        // The kernel holds its own reference to the backing file now.
        drop(file);
        Ok(LoopDevice { path: path.to_owned(), dev, cleared: false, restore_write_cache: None })
    }

    /// `LOOP_SET_FD`, then `LOOP_SET_STATUS64` for the flags and name (autoclear): the
    /// binding of kernels before 5.8. The device is unbound again if the second step
    /// fails, so no half-made binding is left.
    fn bind_in_two_steps(dev: &File, file: &File, info: &LoopInfo64) -> std::io::Result<()> {
        // SAFETY: LOOP_SET_FD takes the backing file's descriptor, which is open.
        let rc = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_SET_FD, file.as_raw_fd()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: LOOP_SET_STATUS64 reads one loop_info64 from memory we own.
        let rc =
            unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_SET_STATUS64, info as *const LoopInfo64) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            // SAFETY: LOOP_CLR_FD takes no argument.
            unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD, 0) };
            return Err(err);
        }
        Ok(())
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the device send every flush and FUA write on to its backing file, as a
    /// recording needs: a loop device's queue may say it has no volatile cache
    /// (`/sys/block/loopN/queue/write_cache` set to `write through` by an administrator,
    /// or by a tool, and kept across bindings), and then the block layer completes every
    /// flush at once without sending it down, so a recording would miss every barrier and
    /// take crash states no disk could leave for ones it could. The setting found is put
    /// back when bob unbinds the device (not after a SIGKILL: the device then keeps
    /// `write back`, the kernel's own default for a loop device on a file).
    pub(crate) fn pass_flushes(&mut self) -> Result<()> {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned());
        let attr =
            PathBuf::from(format!("/sys/block/{}/queue/write_cache", name.unwrap_or_default()));
        let found = match std::fs::read_to_string(&attr) {
            // Kernels before 4.7 have no such setting: their loop device always passes
            // flushes on to a file that takes fsync (and a FUA write as a write and a
            // flush after it, which the block layer makes of it for a queue without FUA).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attr_dir_exists(&attr) => {
                return Ok(());
            }
            found => found.map_err(|e| loop_err(&self.path, "read its write cache setting", e))?,
        };
        let found = found.trim();
        if found == "write back" {
            return Ok(());
        }
        std::fs::write(&attr, "write back").map_err(|e| {
            loop_err(&self.path, "turn on its write cache so that flushes reach bob", e)
        })?;
        self.restore_write_cache = Some((attr, found.to_owned()));
        Ok(())
    }

    /// Drops the device's page cache (BLKFLSBUF, after writing back what is dirty), so
    /// that the next reads of the device reach its backing file, every one of them.
    pub(crate) fn drop_cache(&self) -> Result<()> {
        // SAFETY: BLKFLSBUF takes no argument.
        let rc = unsafe { libc::ioctl(self.dev.as_raw_fd(), BLKFLSBUF, 0) };
        if rc != 0 {
            return Err(loop_err(&self.path, "drop the cache of", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Unbinds now, reporting failure (drop does the same silently).
    pub fn detach(mut self) -> Result<()> {
        let r = self.clear();
        self.cleared = true;
        let backing = self
            .path
            .file_name()
            .map(|name| Path::new("/sys/block").join(name).join("loop/backing_file"));
        let ours = backing.as_ref().and_then(|b| std::fs::read(b).ok());
        // Dropping closes our descriptor: the kernel finishes the unbind at the last close.
        drop(self);
        // A prober that opened the device after an unmount (udev's blkid) can hold it a
        // moment longer, and the unbind waits for it: wait that moment, so that a device
        // bob detached is gone when detach returns (a caller checking for leftovers must
        // not see it). A holder that stays only delays the unbind; autoclear still does it.
        // (Until the device is unbound or bound to another file: a device freed at once
        // may be taken by the next attach.)
        if let (Some(backing), Some(ours)) = (backing, ours) {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::fs::read(&backing).is_ok_and(|now| now == ours)
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        r
    }

    fn clear(&mut self) -> Result<()> {
        if let Some((attr, setting)) = self.restore_write_cache.take() {
            // Still ours: put back what was found before the device goes to anyone else.
            // Best effort in a drop: the next user of the device sets what it needs.
            let _ = std::fs::write(attr, setting);
        }
        // SAFETY: LOOP_CLR_FD takes no argument. On a device still held open elsewhere the
        // kernel defers the unbind to the last close (autoclear), which is what we want.
        let rc = unsafe { libc::ioctl(self.dev.as_raw_fd(), LOOP_CLR_FD, 0) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENXIO) {
                return Err(loop_err(&self.path, "unbind", err));
            }
        }
        Ok(())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if !self.cleared {
            let _ = self.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binding of kernels before 5.8, forced here: the device is bound to the file,
    /// with autoclear, and unbound by drop.
    #[test]
    fn the_two_step_binding_of_old_kernels_binds_with_autoclear() {
        if !nix::unistd::geteuid().is_root() {
            panic!("binding a loop device needs root (scripts/test.sh runs the tests as root)");
        }
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        std::fs::write(&image, vec![7u8; 1 << 20]).unwrap();
        let ctl = File::open("/dev/loop-control").unwrap();
        // SAFETY: LOOP_CTL_GET_FREE takes no argument.
        let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) };
        assert!(n >= 0);
        let path = PathBuf::from(format!("/dev/loop{n}"));
        let dev = LoopDevice::attach_with(&path, &image, true).unwrap();
        assert!(is_bound(&path).unwrap());
        let mut info = std::mem::MaybeUninit::<LoopInfo64>::uninit();
        // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 into memory we own.
        let rc = unsafe { libc::ioctl(dev.dev.as_raw_fd(), LOOP_GET_STATUS64, info.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: the ioctl succeeded and filled it.
        let info = unsafe { info.assume_init() };
        assert_ne!(info.lo_flags & LO_FLAGS_AUTOCLEAR, 0, "bound with autoclear");
        let mut first = [0u8; 4];
        std::io::Read::read_exact(&mut File::open(&path).unwrap(), &mut first).unwrap();
        assert_eq!(first, [7u8; 4], "the device reads its file");
        dev.detach().unwrap();
        assert!(!is_bound(&path).unwrap_or(false), "unbound");
    }
}
