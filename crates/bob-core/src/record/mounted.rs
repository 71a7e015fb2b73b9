//! The file system under test made (or copied) on a fresh recording disk and mounted.
//!
//! Where the property recorder and `bob record` start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{io_err, Error, RecordingDisk, SetupCache, SetupSource, LOG_FILE};
use crate::device::fusedisk::DiskServer;
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::fs::{FsConfig, Timeouts};
use crate::trace::Trace;

/// The file system under test made on bob's recording disk and mounted: where both the
/// property recorder ([`record`]) and `bob record` ([`custom`]) start. Dropping it
/// unmounts, detaches and stops the FUSE disk, in that order.
pub struct MountedDisk {
    /// The recording disk (base image until [`RecordingDisk::start`], then logging).
    pub disk: Arc<RecordingDisk>,
    /// The loop device the file system is on.
    pub dev: PathBuf,
    /// Where it is mounted.
    pub mnt: PathBuf,
    /// The base image file.
    pub base_path: PathBuf,
    /// Where the log streams once recording starts (`<work_dir>/record.log`).
    pub log_path: PathBuf,
    // Drop order matters: the mount before the loop device before the FUSE server.
    fs_mount: Option<mount::Mount>,
    loopdev: Option<LoopDevice>,
    _server: DiskServer,
}

/// Checks the configuration can run here, then makes the file system on a fresh
/// recording disk (`<work_dir>/base.img`) attached to `device` (or a free loop device)
/// and mounts it at `<work_dir>/record-mnt`.
pub fn make_and_mount(
    config: &FsConfig,
    device: Option<&Path>,
    work_dir: &Path,
    timeouts: Timeouts,
) -> Result<MountedDisk, Error> {
    make_or_copy_and_mount(config, device, work_dir, timeouts, None).map(|(md, _)| md)
}

/// [`make_and_mount`], with the file system copied from `setup`'s made image when given.
pub(super) fn make_or_copy_and_mount(
    config: &FsConfig,
    device: Option<&Path>,
    work_dir: &Path,
    timeouts: Timeouts,
    setup: Option<&SetupCache>,
) -> Result<(MountedDisk, SetupSource), Error> {
    config
        .availability()
        .map_err(|e| Error::Unavailable { config: config.name.into(), reason: e.reason() })?;
    let base_path = work_dir.join("base.img");
    let fuse_dir = work_dir.join("record-disk");
    let mnt = work_dir.join("record-mnt");
    for d in [&fuse_dir, &mnt] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    let (disk, source) = match setup {
        Some(cache) => {
            let source = cache.copy_made(config, &base_path, timeouts)?;
            (RecordingDisk::open(&base_path, config.image_bytes), source)
        }
        None => (RecordingDisk::create(&base_path, config.image_bytes), SetupSource::Made),
    };
    let disk = Arc::new(disk.map_err(io_err(&base_path))?);
    // One FUSE thread: requests are handled strictly in the order the loop driver sends them.
    let server = DiskServer::start(&fuse_dir, 1)?;
    let disk_file = server.add("record.img", disk.clone());
    let mut loopdev = match device {
        Some(dev) => LoopDevice::attach(dev, &disk_file)?,
        None => LoopDevice::attach_free(&disk_file)?,
    };
    // Every flush must reach the recording disk: it is what delimits the crash epochs.
    loopdev.pass_flushes()?;
    let dev = loopdev.path().to_owned();
    if setup.is_none() {
        config.mkfs_on(&dev, timeouts.mkfs)?;
    }
    let fs_mount = mount::mount(&dev, &mnt, config.fstype, config.mount_options)?;
    let mounted = MountedDisk {
        disk,
        dev,
        mnt,
        base_path,
        log_path: work_dir.join(LOG_FILE),
        fs_mount: Some(fs_mount),
        loopdev: Some(loopdev),
        _server: server,
    };
    Ok((mounted, source))
}

impl MountedDisk {
    /// Marks `umount`, unmounts, and stops logging: the recorded trace, or why it was
    /// lost (a failure to write the log comes first: it explains the others) or why the
    /// unmount failed. Logging is stopped either way.
    pub fn unmount(&mut self) -> Result<Trace, Error> {
        self.disk.mark("umount");
        let unmounted = match self.fs_mount.take() {
            Some(m) => m.unmount(),
            None => Ok(()),
        };
        let trace = self.disk.stop()?;
        unmounted?;
        Ok(trace)
    }

    /// Detaches the loop device and stops the FUSE disk.
    pub fn release(mut self) -> Result<(), Error> {
        if let Some(m) = self.fs_mount.take() {
            m.unmount()?;
        }
        if let Some(l) = self.loopdev.take() {
            l.detach()?;
        }
        Ok(())
    }
}
