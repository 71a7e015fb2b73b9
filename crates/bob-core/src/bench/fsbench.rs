//! `bob bench --latency MODEL`: the file systems' own speed on bob's recording disk with
//! its latency model, as the OptFS thesis measured it: a Varmail-like flow, OptFS with
//! `osync()` against `journal-flush` with fsync (`optfs_vs_fsync_flush`); and as the
//! xsyncfs paper did: a PostMark-like run ([`Postmark`]) on xsyncfs against
//! `xsyncfs-async` (`xsyncfs_vs_async`) and `journal-sync` (`xsyncfs_vs_sync_flush`).
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
pub(crate) const FILES: usize = 100;
/// Bytes of each file and of each append (varmail's mean sizes).
const APPEND: usize = 16 << 10;
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
    /// Flushes the journal issued (soft updates: their write-back passes').
    pub flushes: u64,
}

/// The PostMark-like run's parameters (PostMark 1.5's, scaled to run in seconds on the
/// hdd model; the xsyncfs paper ran 10,000 files and 10,000 transactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Postmark {
    /// Files created first, in one directory.
    pub files: usize,
    /// Smallest and largest file size in bytes (uniform, whole 512 B units).
    pub min_size: usize,
    /// Largest file size.
    pub max_size: usize,
    /// Transactions: each one read-or-append of a random file, then one create-or-delete.
    pub transactions: usize,
    /// Percent of the first half that are reads (PostMark's read/append bias 5: 50).
    pub read_percent: u32,
    /// Percent of the second half that are creates (create/delete bias 5: 50).
    pub create_percent: u32,
    /// Largest append in bytes (PostMark appends up to its write block size, 512 B each,
    /// until a random size is reached; here one write of 512 B to this).
    pub max_append: usize,
    /// The commit timer of xsyncfs and xsyncfs-async in operations, standing for ext3's
    /// 5 s at this run's rate (the crash tests use 8).
    pub commit_timer_ops: u32,
}

impl Default for Postmark {
    fn default() -> Postmark {
        Postmark {
            files: 100,
            min_size: 512,
            max_size: 16 << 10,
            transactions: 250,
            read_percent: 50,
            create_percent: 50,
            max_append: 4096,
            commit_timer_ops: 1000,
        }
    }
}

/// One design's PostMark-like run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PostmarkRun {
    /// Configuration name.
    pub config: String,
    /// Seconds from the first create to the last delete, made durable (unmount).
    pub seconds: f64,
    /// Flushes the journal issued.
    pub flushes: u64,
    /// Transactions the journal committed.
    pub commits: u64,
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
    /// The PostMark-like run's parameters.
    pub postmark: Postmark,
    /// xsyncfs (fsync returns at once, output held; PostMark writes one line at its end).
    pub xsyncfs: PostmarkRun,
    /// xsyncfs-async (ext3 mounted async).
    pub xsyncfs_async: PostmarkRun,
    /// journal-sync (ext3 mounted sync with barriers).
    pub journal_sync: PostmarkRun,
    /// `xsyncfs.seconds / xsyncfs_async.seconds` (the paper: within 7%, <= 1.07).
    pub xsyncfs_vs_async: f64,
    /// `journal_sync.seconds / xsyncfs.seconds` (the paper: up to two orders of
    /// magnitude; the goal >= 10).
    pub xsyncfs_vs_sync_flush: f64,
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

/// The project's one generator ([`workloads::rng::SplitMix64`]), so that every run and
/// every design issues the same operations.
struct Rng(workloads::rng::SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n.max(1) as u64) as usize
    }
}

/// PostMark's flow on `design`: create `files` files of random size, run the
/// transactions (read or append a random file; create or delete one), delete every
/// file, then unmount (everything durable). xsyncfs writes one line of output before the
/// unmount, as PostMark prints its report; no design is asked to fsync (PostMark does
/// not), so journal-sync's every operation commits and flushes.
pub(super) fn postmark(
    design: Design,
    latency: Latency,
    pm: &Postmark,
) -> Result<PostmarkRun, FsBenchError> {
    let fs_err = |source| FsBenchError::Fs { design, source };
    let tmp = tempfile::tempdir()?;
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), IMAGE)?);
    let dev = Arc::new(RoleRecorder(disk.clone()));
    mkfs(design, dev.as_ref(), IMAGE).map_err(fs_err)?;
    let opts = Options { commit_timer_ops: Some(pm.commit_timer_ops), ..Options::default() };
    let fs = Fs::open(design, dev, opts).map_err(fs_err)?;
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log"))?;
    let mut rng = Rng(workloads::rng::SplitMix64::new(0));
    let unit = 512;
    let size = |rng: &mut Rng| {
        let (lo, hi) = (pm.min_size / unit, pm.max_size / unit);
        (lo + rng.below(hi - lo + 1)) * unit
    };
    let data = vec![0x5au8; pm.max_size.max(pm.max_append)];
    let started = Instant::now();
    let mut run = || -> researchfs::Result<()> {
        // (name number, inode) of the live files.
        let mut live: Vec<(usize, u32)> = Vec::with_capacity(pm.files);
        let mut next = 0;
        let mut create = |rng: &mut Rng, live: &mut Vec<(usize, u32)>| -> researchfs::Result<()> {
            let f = fs.create(ROOT, format!("pm{next}"))?;
            fs.write(f, 0, &data[..size(rng)])?;
            live.push((next, f));
            next += 1;
            Ok(())
        };
        for _ in 0..pm.files {
            create(&mut rng, &mut live)?;
        }
        for _ in 0..pm.transactions {
            if !live.is_empty() {
                let (_, f) = live[rng.below(live.len())];
                let len = fs.getattr(f)?.size;
                if rng.below(100) < pm.read_percent as usize {
                    fs.read(f, 0, len as usize)?;
                } else {
                    let n = (1 + rng.below(pm.max_append / unit)) * unit;
                    fs.write(f, len, &data[..n])?;
                }
            }
            if live.is_empty() || rng.below(100) < pm.create_percent as usize {
                create(&mut rng, &mut live)?;
            } else {
                let (name, _) = live.swap_remove(rng.below(live.len()));
                fs.unlink(ROOT, format!("pm{name}"))?;
            }
        }
        for (name, _) in live {
            fs.unlink(ROOT, format!("pm{name}"))?;
        }
        if design.output().is_some() {
            fs.output("postmark: done")?;
        }
        fs.shutdown()
    };
    let done = run();
    let seconds = started.elapsed().as_secs_f64();
    let stats = fs.journal_stats().unwrap_or_default();
    // Soft updates keep no journal: their write-back passes' flushes.
    let soft_flushes = fs.soft_stats().map(|s| s.flushes);
    fs.crash();
    disk.stop()?;
    done.map_err(fs_err)?;
    Ok(PostmarkRun {
        config: design.name().into(),
        seconds,
        flushes: soft_flushes.unwrap_or(stats.flushes),
        commits: stats.commits,
    })
}

/// Runs the Varmail-like flow on optfs and journal-flush and the PostMark-like run
/// (`pm`) on xsyncfs, xsyncfs-async and journal-sync, under `latency`.
pub fn run_fs_bench(
    latency: Latency,
    iterations: usize,
    pm: &Postmark,
) -> Result<FsBenchReport, FsBenchError> {
    let optfs = flow(Design::Optfs, latency, iterations)?;
    let journal_flush = flow(Design::JournalFlush, latency, iterations)?;
    // The two issue the same requests here (PostMark writes its one output at the end,
    // and the commit it triggers is the one unmount would make) and a run takes well
    // under a second on the hdd model: the median of five runs each, so that one run's
    // noise on a shared machine does not make the ratio.
    let median = |design| -> Result<PostmarkRun, FsBenchError> {
        let mut runs =
            (0..5).map(|_| postmark(design, latency, pm)).collect::<Result<Vec<_>, _>>()?;
        runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        Ok(runs.swap_remove(2))
    };
    let xsyncfs = median(Design::Xsyncfs)?;
    let xsyncfs_async = median(Design::XsyncfsAsync)?;
    let journal_sync = postmark(Design::JournalSync, latency, pm)?;
    Ok(FsBenchReport {
        schema_version: crate::SCHEMA_VERSION,
        latency,
        iterations,
        files: FILES,
        optfs_vs_fsync_flush: optfs.syncs_per_s / journal_flush.syncs_per_s,
        optfs,
        journal_flush,
        postmark: *pm,
        xsyncfs_vs_async: xsyncfs.seconds / xsyncfs_async.seconds.max(1e-9),
        xsyncfs_vs_sync_flush: journal_sync.seconds / xsyncfs.seconds.max(1e-9),
        xsyncfs,
        xsyncfs_async,
        journal_sync,
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
        let pm = |r: &PostmarkRun| {
            format!(
                "{:<14}: {:.2} s, {} flushes, {} commits\n",
                r.config, r.seconds, r.flushes, r.commits
            )
        };
        let p = &self.postmark;
        format!(
            "Varmail-like flow, latency model {}, {} iterations, {} files of 16 KiB\n{}{}optfs_vs_fsync_flush: {:.2}\n\
             PostMark-like run: {} files of {}-{} B, {} transactions\n{}{}{}\
             xsyncfs_vs_async: {:.3}\nxsyncfs_vs_sync_flush: {:.1}\n",
            self.latency,
            self.iterations,
            self.files,
            row(&self.optfs),
            row(&self.journal_flush),
            self.optfs_vs_fsync_flush,
            p.files,
            p.min_size,
            p.max_size,
            p.transactions,
            pm(&self.xsyncfs),
            pm(&self.xsyncfs_async),
            pm(&self.journal_sync),
            self.xsyncfs_vs_async,
            self.xsyncfs_vs_sync_flush,
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
        let pm = |config: &str, seconds: f64, flushes| PostmarkRun {
            config: config.into(),
            seconds,
            flushes,
            commits: flushes / 2,
        };
        let report = FsBenchReport {
            schema_version: crate::SCHEMA_VERSION,
            latency: Latency::Hdd,
            iterations: 200,
            files: FILES,
            optfs: run("optfs", "osync", 1.25, 4),
            journal_flush: run("journal-flush", "fsync", 25.0, 800),
            optfs_vs_fsync_flush: 20.0,
            postmark: Postmark::default(),
            xsyncfs: pm("xsyncfs", 1.05, 2),
            xsyncfs_async: pm("xsyncfs-async", 1.0, 2),
            journal_sync: pm("journal-sync", 40.0, 1600),
            xsyncfs_vs_async: 1.05,
            xsyncfs_vs_sync_flush: 38.1,
        };
        insta::assert_json_snapshot!("fs_bench", report);
    }

    #[test]
    fn osync_beats_fsync_on_the_hdd_model_and_flushes_tell_why() {
        let pm = Postmark { files: 10, transactions: 10, ..Postmark::default() };
        let r = run_fs_bench(Latency::Hdd, 10, &pm).unwrap();
        assert_eq!(r.optfs.flushes, 0, "osync never flushes: {r:?}");
        assert!(r.journal_flush.flushes >= 40, "two flushes per fsync: {r:?}");
        assert!(r.optfs_vs_fsync_flush > 2.0, "{r:?}");
        // PostMark: journal-sync flushes around every operation's commit, xsyncfs only
        // at the end (its output and the unmount).
        assert!(r.journal_sync.flushes >= 2 * 30, "{r:?}");
        assert!(r.xsyncfs.flushes <= 8, "{r:?}");
        assert!(r.xsyncfs_vs_sync_flush > 3.0, "{r:?}");
    }
}
