//! The research designs' recording, in process over the recording disk.
//!
//! mkfs and the design itself run in this process, each write logged with its role; the
//! workload runs on a fuseblk mount of the design.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use workloads::{Observed, Phase, Workload};

use super::{io_err, pm_recorder, run_marked, Error, RecordRequest, RecordingDisk, LOG_FILE};
use crate::device::fusedisk::Disk;
use crate::device::loopdev::LoopDevice;
use crate::fs::FsConfig;
use crate::trace::Trace;

/// [`RecordingDisk`] as the [`researchfs::BlockDevice`] a research design writes to: each
/// write is logged in process, in order, with its role (and FUA) in the entry's flags.
pub(crate) struct RoleRecorder(pub Arc<RecordingDisk>);

impl researchfs::BlockDevice for RoleRecorder {
    fn size(&self) -> u64 {
        self.0.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        Disk::read_at(self.0.as_ref(), offset, buf)
    }
    fn write_at(
        &self,
        offset: u64,
        data: &[u8],
        info: researchfs::WriteInfo,
    ) -> std::io::Result<()> {
        let fua = if info.fua { crate::trace::flags::FUA } else { 0 };
        self.0.write_flagged(offset, data, crate::fs::roles::role_flags(info.role) | fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Disk::flush(self.0.as_ref())
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.0.discard_at(offset, len)
    }
    fn durability(&self) -> Option<researchfs::Durability> {
        let st = self.0.lock();
        st.adn.every?;
        Some(researchfs::Durability { received: st.adn.received, durable: st.adn.durable })
    }
    fn release_output(&self, text: &str) {
        self.0.mark(&crate::trace::output_mark(text));
    }
}

fn research_err(config: &FsConfig) -> impl Fn(researchfs::Error) -> Error + '_ {
    move |e| Error::Unavailable { config: config.name.into(), reason: e.to_string() }
}

/// Records a research design: no kernel file system. mkfs and the file system itself run
/// in this process over [`RoleRecorder`]; the FUSE mount at `<work_dir>/record-mnt` (a
/// fuseblk mount on a loop device that only stands for the mount's source) is where the
/// workload runs, exactly as on a kernel file system.
pub(super) fn record_research(
    req: &RecordRequest<'_>,
    design: researchfs::Design,
) -> Result<(Trace, Observed, PathBuf), Error> {
    let config = req.config;
    let base_path = req.work_dir.join("base.img");
    let mnt = req.work_dir.join("record-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    let disk = Arc::new(
        RecordingDisk::create(&base_path, config.image_bytes).map_err(io_err(&base_path))?,
    );
    disk.set_adn(config.disk_features().adn_requests);
    let role_dev: Arc<dyn researchfs::BlockDevice> = Arc::new(RoleRecorder(disk.clone()));
    // A PM design gets the second device: bob's PM region, its log tied to the disk's.
    let pm = design.pm_fenced().map(|_| {
        let size = researchfs::ConquestDevice::pm_size(config.image_bytes);
        let pm = Arc::new(pm_recorder::PmRecorder::new(disk.clone(), size));
        disk.tie_pm(pm.clone());
        pm
    });
    let dev: Arc<dyn researchfs::BlockDevice> = match &pm {
        Some(pm) => researchfs::ConquestDevice::open(design, role_dev, pm.clone())
            .map_err(|e| Error::Io { path: base_path.clone(), source: e })?,
        None => role_dev,
    };
    researchfs::mkfs(design, dev.as_ref(), config.image_bytes)
        .and_then(|()| dev.end_op().map_err(|source| researchfs::Error::Io { block: 0, source }))
        .map_err(|e| crate::fs::MkfsError::Failed {
            program: format!("researchfs::mkfs({design})"),
            device: base_path.clone(),
            code: None,
            line: e.to_string(),
        })?;
    // A fuseblk mount, on a loop device over a small file the design never touches, so
    // that the workload's sync(2) and syncfs(2) reach the design: the kernel forwards
    // them to no ordinary FUSE mount (`researchfs::mount_on_block_device`).
    let token = req.work_dir.join("fuseblk.img");
    File::create(&token).and_then(|f| f.set_len(1 << 20)).map_err(io_err(&token))?;
    let (_blk, mounted) = mount_fuseblk(design, dev, &mnt, &token).map_err(research_err(config))?;
    if let Some((index, op)) = unforwarded_sync(req.workload, &mounted) {
        drop(mounted);
        return Err(Error::Workload {
            config: config.name.into(),
            source: workloads::ExecError::Io {
                phase: Phase::Workload,
                index,
                op: format!(
                    "{op}: this kernel forwards sync(2) and syncfs(2) to no FUSE file \
                     system (Linux does to fuseblk mounts from 6.18 on)"
                ),
                path: mnt,
                source: std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            },
        });
    }
    // NoFS rebuilds allocation in the background; let it finish so the recorded ops
    // allocate as they would on a long-mounted file system, the same on every run.
    mounted.fs().wait_scan();

    let mut observed = Observed::default();
    let workload_err = |source| Error::Workload { config: config.name.into(), source };
    let setup = workloads::execute(req.workload, Phase::Setup, &mnt, &mut observed, &mut |_| {});
    if let Err(e) = setup {
        drop(mounted);
        return Err(workload_err(e));
    }
    // Every researchfs write reaches the device when the call returns, so the image file
    // already holds the setup, except on a design that keeps it in memory: soft updates
    // hold it in their cache until written back, and a journaling design's running
    // transaction is in memory until it commits (xsyncfs' fsync does not commit at all):
    // write it back, or commit it and flush, as the kernel's setup ends with sync(2), so
    // that the base image holds the whole setup and the trace only the workload.
    if let Err(e) = mounted.fs().writeback() {
        drop(mounted);
        return Err(research_err(config)(e));
    }
    if design.journal().is_some() {
        if let Err(e) = mounted.fs().dsync() {
            drop(mounted);
            return Err(research_err(config)(e));
        }
    }
    if let Err(e) = disk.start(&req.work_dir.join(LOG_FILE)) {
        drop(mounted);
        return Err(e);
    }
    if let Some(pm) = &pm {
        pm.start();
    }
    let run = run_marked(req.workload, &mnt, &mut observed, &|text| disk.mark(text));
    disk.mark("umount");
    let unmounted = mounted.unmount();
    // A failure to write the log comes first: it explains the others.
    let trace = disk.stop()?;
    if let Some(pm) = &pm {
        // Beside base.img, where the trace directory's readers look for it.
        pm.stop().save(req.work_dir).map_err(|e| Error::Io {
            path: req.work_dir.join(crate::pm::PM_LOG_FILE),
            source: std::io::Error::other(e.to_string()),
        })?;
    }
    run.map_err(workload_err)?;
    unmounted.map_err(research_err(config))?;
    Ok((trace, observed, base_path))
}

/// Mounts `design` as fuseblk at `mnt` on a loop device bound to `token`. The kernel
/// refuses the mount with EBUSY, rarely (about one recording in 5,000, on a machine where
/// other processes bind and mount loop devices too; the cause was not pinned down): then
/// again on another device, after a pause that grows, up to eight times.
fn mount_fuseblk(
    design: researchfs::Design,
    dev: Arc<dyn researchfs::BlockDevice>,
    mnt: &Path,
    token: &Path,
) -> Result<(LoopDevice, researchfs::MountedFs), researchfs::Error> {
    let mut tries = 0;
    loop {
        tries += 1;
        let blk = LoopDevice::attach_free(token).map_err(|e| researchfs::Error::Mount {
            path: mnt.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let opts = researchfs::Options::default();
        match researchfs::mount_on_block_device(design, dev.clone(), mnt, opts, blk.path()) {
            Ok(m) => return Ok((blk, m)),
            Err(researchfs::Error::Mount { source, .. })
                if tries < 8 && source.raw_os_error() == Some(libc::EBUSY) =>
            {
                drop(blk);
                std::thread::sleep(std::time::Duration::from_millis(25 << tries));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The workload's first sync(2) or syncfs(2) (its index and text) if the design does not
/// get them on this kernel (asked by one syncfs(2) before anything is recorded): a sync
/// that reaches nothing would be judged as a promise the design never heard of.
fn unforwarded_sync(
    workload: &Workload,
    mounted: &researchfs::MountedFs,
) -> Option<(usize, String)> {
    let (index, op) = workload
        .ops
        .iter()
        .enumerate()
        .find(|(_, op)| matches!(op, workloads::Op::Sync | workloads::Op::Syncfs))?;
    (!mounted.sync_reaches_design()).then(|| (index, op.to_string()))
}
