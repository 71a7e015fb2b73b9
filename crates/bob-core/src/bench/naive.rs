//! The naive pipeline bob is compared with: a whole (or sparse) copy of the image per
//! state, the state's sectors written into it, the copy checked and deleted.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::report::NaiveBreakdown;
use super::stats::ms;
use super::{io_err, BenchOptions, Error};
use crate::check::{self, Outcome, Subject};
use crate::crash::{CrashState, Overlay, OverlayBuilder};
use crate::run::Progress;
use crate::trace::{Trace, SECTOR_SIZE};

/// Writes the sectors `overlay` sets into `file`, one `pwrite` per run of consecutive
/// sectors (at most 1 MiB), which is how a careful naive tool would do it.
pub(crate) fn write_overlay(
    overlay: &Overlay,
    trace: &Trace,
    file: &std::fs::File,
) -> std::io::Result<()> {
    const MAX_RUN: u64 = (1 << 20) / SECTOR_SIZE;
    let mut buf = Vec::new();
    let mut run: Option<(u64, u64)> = None; // (first sector, count)
    let flush = |buf: &mut Vec<u8>, (first, count): (u64, u64)| -> std::io::Result<()> {
        buf.clear();
        buf.resize((count * SECTOR_SIZE) as usize, 0);
        overlay.read_into(trace, first * SECTOR_SIZE, buf);
        file.write_all_at(buf, first * SECTOR_SIZE)
    };
    for (sector, _) in overlay.iter() {
        run = match run {
            Some((first, count)) if first + count == sector && count < MAX_RUN => {
                Some((first, count + 1))
            }
            Some(r) => {
                flush(&mut buf, r)?;
                Some((sector, 1))
            }
            None => Some((sector, 1)),
        };
    }
    if let Some(r) = run {
        flush(&mut buf, r)?;
    }
    Ok(())
}

/// The naive pipeline over every state, serially; returns the outcomes, the wall time and
/// where it went.
#[allow(clippy::too_many_arguments)]
pub(super) fn naive_pipeline(
    subject: &Subject,
    base_path: &Path,
    states: &[&CrashState],
    copy_image: fn(&Path, &Path) -> std::io::Result<()>,
    work: &Path,
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<(Vec<Outcome>, f64, NaiveBreakdown), Error> {
    let mnt = work.join("naive-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    let copy = work.join("naive.img");
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    let (mut copy_t, mut write_t, mut check_t, mut delete_t) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut outcomes = Vec::with_capacity(states.len());
    let started = Instant::now();
    for (i, state) in states.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            // The benchmark's scratch copy, in its work directory (removed with it).
            let _ = std::fs::remove_file(&copy);
            return Err(Error::Interrupted);
        }
        let t0 = Instant::now();
        copy_image(base_path, &copy).map_err(io_err(&copy))?;
        let t1 = Instant::now();
        let overlay = builder.state(&state.id);
        let file = std::fs::OpenOptions::new().write(true).open(&copy).map_err(io_err(&copy))?;
        write_overlay(&overlay, &subject.trace, &file).map_err(io_err(&copy))?;
        drop(file);
        let t2 = Instant::now();
        let checked = check::check_image(
            subject,
            &copy,
            &mnt,
            subject.durable_ops(&state.id),
            &options.timeouts,
        );
        let t3 = Instant::now();
        let removed = std::fs::remove_file(&copy);
        let t4 = Instant::now();
        outcomes.push(checked?.outcome);
        removed.map_err(io_err(&copy))?;
        copy_t += t1 - t0;
        write_t += t2 - t1;
        check_t += t3 - t2;
        delete_t += t4 - t3;
        progress.state_done(i + 1, states.len());
    }
    let seconds = started.elapsed().as_secs_f64();
    let n = states.len().max(1) as f64;
    let breakdown = NaiveBreakdown {
        copy_ms: ms(copy_t) / n,
        write_ms: ms(write_t) / n,
        check_ms: ms(check_t) / n,
        delete_ms: ms(delete_t) / n,
    };
    Ok((outcomes, seconds, breakdown))
}
