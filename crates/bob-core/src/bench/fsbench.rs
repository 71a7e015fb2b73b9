//! `bob bench --latency MODEL`: the file systems' own speed on bob's recording disk with
//! its latency model, as the OptFS thesis measured it: a Varmail-like flow, OptFS with
//! `osync()` against `journal-flush` with fsync (`optfs_vs_fsync_flush`).
//!
//! In process (no FUSE), so only the file system and the disk model are measured.
//! Filebench's varmail.f flow, scaled down: one directory of [`FILES`] files of 16 KiB;
//! each iteration deletes a file, creates it, appends 16 KiB and syncs; reads another
//! whole, appends 16 KiB and syncs; reads a third whole. Varmail runs 16 threads;
//! researchfs serialises every operation on one lock, so one thread issues the same
//! requests in the same order.

use std::sync::Arc;
use std::time::Instant;

use researchfs::{layout::ROOT, mkfs, Design, Fs, Options};
use serde::{Deserialize, Serialize};

use crate::record::latency::Latency;
use crate::record::{RecordingDisk, RoleRecorder};

/// Files in the mail directory.
pub const FILES: usize = 100;
/// Bytes of each file and of each append (varmail's mean sizes).
pub const APPEND: usize = 16 << 10;
/// Iterations of the flow (two syncs each).
pub const ITERATIONS: usize = 200;
const IMAGE: u64 = 64 << 20;

/// One design's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsRun {
    /// Configuration name.
    pub config: String,
    /// The sync the flow calls (`osync` or `fsync`).
    pub sync: String,
    /// Syncs per second (two per iteration).
    pub syncs_per_s: f64,
    /// Seconds of the timed flow.
    pub seconds: f64,
    /// Flushes the journal issued.
    pub flushes: u64,
}

/// `bob bench --latency MODEL`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsBenchReport {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The latency model (`hdd`, `ssd`, `none`).
    pub latency: Latency,
    /// Iterations of the flow.
    pub iterations: usize,
    /// Files in the directory.
    pub files: usize,
    /// OptFS with osync.
    pub optfs: FsRun,
    /// journal-flush with fsync.
    pub journal_flush: FsRun,
    /// `optfs.syncs_per_s / journal_flush.syncs_per_s`.
    pub optfs_vs_fsync_flush: f64,
}

/// Errors of the file-system benchmark.
#[derive(Debug, thiserror::Error)]
pub enum FsBenchError {
    /// bob's own files.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file system failed.
    #[error("{design}: {source}")]
    Fs {
        /// The design.
        design: Design,
        /// Its error.
        source: researchfs::Error,
    },
    /// The recording disk failed.
    #[error(transparent)]
    Record(#[from] crate::record::Error),
}

fn flow(design: Design, latency: Latency, iterations: usize) -> Result<FsRun, FsBenchError> {
    let fs_err = |source| FsBenchError::Fs { design, source };
    let tmp = tempfile::tempdir()?;
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), IMAGE)?);
    disk.set_adn(design.adn_requests());
    let dev = Arc::new(RoleRecorder(disk.clone()));
    mkfs(design, dev.as_ref(), IMAGE).map_err(fs_err)?;
    let fs = Fs::open(design, dev, Options::default()).map_err(fs_err)?;
    let data = vec![7u8; APPEND];
    let mut inos = Vec::with_capacity(FILES);
    for i in 0..FILES {
        let f = fs.create(ROOT, format!("m{i}")).map_err(fs_err)?;
        fs.write(f, 0, &data).map_err(fs_err)?;
        inos.push(f);
    }
    fs.dsync().map_err(fs_err)?;
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log"))?;
    let before = fs.journal_stats().map_or(0, |s| s.flushes);
    let osync = design == Design::Optfs;
    let sync = |f: u32| if osync { fs.osync() } else { fs.fsync(f) };
    let started = Instant::now();
    let mut run = || -> researchfs::Result<()> {
        for it in 0..iterations {
            let (a, b, c) = (it % FILES, (it * 7 + 3) % FILES, (it * 13 + 5) % FILES);
            fs.unlink(ROOT, format!("m{a}"))?;
            let f = fs.create(ROOT, format!("m{a}"))?;
            inos[a] = f;
            fs.write(f, 0, &data)?;
            sync(f)?;
            let g = inos[b];
            let size = fs.getattr(g)?.size;
            fs.read(g, 0, size as usize)?;
            fs.write(g, size, &data)?;
            sync(g)?;
            let h = inos[c];
            fs.read(h, 0, fs.getattr(h)?.size as usize)?;
        }
        Ok(())
    };
    let done = run();
    let seconds = started.elapsed().as_secs_f64();
    let flushes = fs.journal_stats().map_or(0, |s| s.flushes) - before;
    fs.crash();
    disk.stop()?;
    done.map_err(fs_err)?;
    Ok(FsRun {
        config: design.name().into(),
        sync: if osync { "osync" } else { "fsync" }.into(),
        syncs_per_s: (2 * iterations) as f64 / seconds.max(1e-9),
        seconds,
        flushes,
    })
}

/// Runs the Varmail-like flow on optfs and journal-flush under `latency`.
pub fn run_fs_bench(latency: Latency, iterations: usize) -> Result<FsBenchReport, FsBenchError> {
    let optfs = flow(Design::Optfs, latency, iterations)?;
    let journal_flush = flow(Design::JournalFlush, latency, iterations)?;
    Ok(FsBenchReport {
        schema_version: crate::SCHEMA_VERSION,
        latency,
        iterations,
        files: FILES,
        optfs_vs_fsync_flush: optfs.syncs_per_s / journal_flush.syncs_per_s,
        optfs,
        journal_flush,
    })
}

impl FsBenchReport {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let row = |r: &FsRun| {
            format!(
                "{:<14} ({}): {:9.1} syncs/s, {:.2} s, {} flushes\n",
                r.config, r.sync, r.syncs_per_s, r.seconds, r.flushes
            )
        };
        format!(
            "Varmail-like flow, latency model {}, {} iterations, {} files of 16 KiB\n{}{}optfs_vs_fsync_flush: {:.2}\n",
            self.latency,
            self.iterations,
            self.files,
            row(&self.optfs),
            row(&self.journal_flush),
            self.optfs_vs_fsync_flush
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_shape() {
        let run = |config: &str, sync: &str, s: f64, flushes| FsRun {
            config: config.into(),
            sync: sync.into(),
            syncs_per_s: 400.0 / s,
            seconds: s,
            flushes,
        };
        let report = FsBenchReport {
            schema_version: crate::SCHEMA_VERSION,
            latency: Latency::Hdd,
            iterations: 200,
            files: FILES,
            optfs: run("optfs", "osync", 1.25, 4),
            journal_flush: run("journal-flush", "fsync", 25.0, 800),
            optfs_vs_fsync_flush: 20.0,
        };
        insta::assert_json_snapshot!("fs_bench", report);
    }

    #[test]
    fn osync_beats_fsync_on_the_hdd_model_and_flushes_tell_why() {
        let r = run_fs_bench(Latency::Hdd, 10).unwrap();
        assert_eq!(r.optfs.flushes, 0, "osync never flushes: {r:?}");
        assert!(r.journal_flush.flushes >= 40, "two flushes per fsync: {r:?}");
        assert!(r.optfs_vs_fsync_flush > 2.0, "{r:?}");
    }
}
