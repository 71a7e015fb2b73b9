//! The floor: what mounting an unchanged image costs, and the parts of that cost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::report::FloorBreakdown;
use super::stats::{median, ms};
use super::{io_err, BenchOptions, Error, BREAKDOWN_ROUNDS, FUSE_FLOOR_RUNS};
use crate::check::Subject;
use crate::crash::{OverlayBuilder, StateId};
use crate::device::fusedisk::{DiskServer, Flushes};
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::image::CrashView;
use crate::run::Progress;

/// The floor: mean mount + umount time of an unchanged copy of the base image on one loop
/// device (after one untimed mount that replays its journal), plus the fsck and loop
/// attach times alone.
pub(super) fn floor(
    subject: &Subject,
    base_path: &Path,
    work: &Path,
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<(f64, FloorBreakdown), Error> {
    let config = &subject.config;
    let image = work.join("floor.img");
    let mnt = work.join("floor-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    std::fs::copy(base_path, &image).map_err(io_err(&image))?;
    let opts = config.check_mount_options();
    let dev = LoopDevice::attach_free(&image)?;
    mount::mount(dev.path(), &mnt, config.fstype, &opts)?.unmount()?;

    let mut rounds = Vec::with_capacity(options.floor_runs);
    let mut total = Duration::ZERO;
    for r in 0..options.floor_runs {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        let t = Instant::now();
        mount::mount(dev.path(), &mnt, config.fstype, &opts)?.unmount()?;
        let d = t.elapsed();
        total += d;
        rounds.push(ms(d));
        progress.state_done(r + 1, options.floor_runs);
    }

    let mut fsck = Vec::new();
    for _ in 0..BREAKDOWN_ROUNDS {
        let t = Instant::now();
        config.fsck_on(dev.path(), options.timeouts.fsck).map_err(crate::device::Error::from)?;
        fsck.push(ms(t.elapsed()));
    }
    dev.detach()?;

    // The same rounds with the unchanged image served by bob's FUSE disk (a view with an
    // empty overlay), to separate what FUSE costs from what recovery and fsck cost.
    let fuse_dir = work.join("floor-disk");
    std::fs::create_dir_all(&fuse_dir).map_err(io_err(&fuse_dir))?;
    // Served as the engine serves crash states: cached where the configuration prefers
    // it, flushes refused.
    let server = DiskServer::start_with(&fuse_dir, 2, Flushes::Refuse)?;
    let unchanged = StateId { epoch: 0, applied: Vec::new(), pm: None };
    let overlay = OverlayBuilder::new(&subject.trace, &subject.epochs).state(&unchanged);
    let view = Arc::new(
        CrashView::new(subject.base.clone(), subject.trace.clone(), overlay)
            .page_cache(config.prefers_cached_views()),
    );
    let file = server.add("floor.img", view);
    let fuse_dev = LoopDevice::attach_free(&file)?;
    mount::mount(fuse_dev.path(), &mnt, config.fstype, &opts)?.unmount()?;
    let mut fuse_rounds = Vec::new();
    for _ in 0..options.floor_runs.min(FUSE_FLOOR_RUNS) {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        let t = Instant::now();
        mount::mount(fuse_dev.path(), &mnt, config.fstype, &opts)?.unmount()?;
        fuse_rounds.push(ms(t.elapsed()));
    }
    fuse_dev.detach()?;
    drop(server);

    let mut attach = Vec::new();
    for _ in 0..BREAKDOWN_ROUNDS {
        let t = Instant::now();
        LoopDevice::attach_free(&image)?.detach()?;
        attach.push(ms(t.elapsed()));
    }
    // The benchmark's scratch image, in its work directory (removed with it).
    let _ = std::fs::remove_file(&image);
    Ok((
        total.as_secs_f64(),
        FloorBreakdown {
            runs: options.floor_runs,
            mount_umount_ms_median: median(rounds),
            fuse_mount_umount_ms_median: median(fuse_rounds),
            fsck_ms: median(fsck),
            loop_attach_detach_ms: median(attach),
        },
    ))
}
