//! The recorder's overhead: a write-heavy workload on bob's recording disk against the
//! same workload on a plain loop device.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::report::RecorderBench;
use super::stats::median;
use super::{io_err, BenchOptions, Error, RECORDER_FILES, RECORDER_ROUNDS};
use crate::device::fusedisk::DiskServer;
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::fs::FsConfig;
use crate::host::{peak_rss_kib, reset_hwm, rss_kib};
use crate::record::RecordingDisk;
use crate::run::Progress;

/// The write-heavy workload: `bytes` spread over [`RECORDER_FILES`] files in 1 MiB
/// writes, then every file fsynced. Returns its wall time.
pub(super) fn write_heavy(dir: &Path, bytes: u64) -> Result<Duration, Error> {
    let per_file = bytes.div_ceil(RECORDER_FILES);
    // Not zeros and not one repeated byte, so that nothing on the way can shortcut it.
    let chunk: Vec<u8> =
        (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let started = Instant::now();
    let mut files = Vec::new();
    for f in 0..RECORDER_FILES {
        let path = dir.join(format!("heavy-{f}"));
        let file = std::fs::File::create(&path).map_err(io_err(&path))?;
        let mut off = 0;
        while off < per_file {
            let n = (per_file - off).min(chunk.len() as u64) as usize;
            file.write_all_at(&chunk[..n], off).map_err(io_err(&path))?;
            off += n as u64;
        }
        files.push((path, file));
    }
    for (path, file) in &files {
        file.sync_all().map_err(io_err(path))?;
    }
    Ok(started.elapsed())
}

/// Times the write-heavy workload on a plain loop device over a sparse file and on bob's
/// recording disk (FUSE disk + loop, recording as [`record::record`] does), alternating.
pub(super) fn recorder_bench(
    config: &FsConfig,
    work: &Path,
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<RecorderBench, Error> {
    let mnt = work.join("recorder-mnt");
    let fuse_dir = work.join("recorder-disk");
    for d in [&mnt, &fuse_dir] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    let (mut plain, mut recording) = (Vec::new(), Vec::new());
    let (mut log_bytes, mut rss_growth) = (0, 0);
    for round in 0..RECORDER_ROUNDS {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        // Plain: a loop device over a sparse file.
        let image = work.join("plain.img");
        let file = std::fs::File::create(&image).map_err(io_err(&image))?;
        file.set_len(config.image_bytes).map_err(io_err(&image))?;
        drop(file);
        {
            let dev = LoopDevice::attach_free(&image)?;
            config.mkfs_on(dev.path(), options.timeouts.mkfs)?;
            let m = mount::mount(dev.path(), &mnt, config.fstype, config.mount_options)?;
            plain.push(write_heavy(&mnt, options.recorder_bytes)?.as_secs_f64());
            m.unmount()?;
            dev.detach()?;
        }
        // The benchmark's scratch files, in its work directory (removed with it).
        let _ = std::fs::remove_file(&image);
        progress.state_done(round * 2 + 1, RECORDER_ROUNDS * 2);

        // bob's recording disk, as record::record sets it up.
        let base = work.join("recorder-base.img");
        let disk =
            Arc::new(RecordingDisk::create(&base, config.image_bytes).map_err(io_err(&base))?);
        {
            let server = DiskServer::start(&fuse_dir, 1)?;
            let file = server.add("record.img", disk.clone());
            let dev = LoopDevice::attach_free(&file)?;
            config.mkfs_on(dev.path(), options.timeouts.mkfs)?;
            let m = mount::mount(dev.path(), &mnt, config.fstype, config.mount_options)?;
            mount::syncfs(&mnt)?;
            let log = work.join("recorder.log");
            disk.start(&log)?;
            // From here on, what the recorder holds (the FUSE disk's buffers exist already).
            let rss_at_start = rss_kib();
            reset_hwm();
            let timed = write_heavy(&mnt, options.recorder_bytes);
            let unmounted = m.unmount();
            let trace = disk.stop();
            rss_growth = rss_growth.max(peak_rss_kib().saturating_sub(rss_at_start));
            let detached = dev.detach();
            drop(server);
            recording.push(timed?.as_secs_f64());
            unmounted?;
            detached?;
            // Sealed and mapped, as a recording's trace is; not needed further.
            log_bytes = trace?.file.as_ref().map_or(0, |f| f.byte_len());
            // Scratch, as above.
            let _ = std::fs::remove_file(&log);
        }
        drop(disk);
        // Scratch, as above.
        let _ = std::fs::remove_file(&base);
        progress.state_done(round * 2 + 2, RECORDER_ROUNDS * 2);
    }
    Ok(RecorderBench {
        bytes: options.recorder_bytes,
        rounds: RECORDER_ROUNDS,
        recording_seconds: median(recording),
        plain_seconds: median(plain),
        log_bytes,
        recording_rss_growth_kib: rss_growth,
    })
}
