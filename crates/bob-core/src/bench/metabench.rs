//! `bob bench --fs softupdates,... --latency MODEL`: the metadata-intensive
//! microbenchmarks of the journaling-vs-soft-updates paper (§7.2) on bob's recording
//! disk with its latency model, in process (no FUSE), so only the file system and the
//! disk model are measured.
//!
//! Scaled down from the paper (512 files of each size, 50 per directory; 50,000 0-length
//! files created and deleted): [`FILES`] files of [`FILE_BYTES`] each, [`PER_DIR`] per
//! directory, created (create + one write each), then deleted; then [`FILES`] 0-length
//! files each created and deleted at once. Each phase ends with what makes it durable (an
//! fsync, which on every design here writes back or commits everything and flushes) and
//! is timed with it: the paper's systems get their metadata to the disk eventually too,
//! and a benchmark that stopped the clock with everything still in memory would time the
//! cache, not the design.
//!
//! Ratios are of elapsed time over the three phases: `softupdates_vs_X` = X's seconds /
//! softupdates' seconds (above 1: soft updates faster); `journal_sync_vs_async` =
//! journal-async's seconds / journal-sync's (below 1: synchronous metadata costs).
//! `journal-async` and `journal-sync` are the paper's LFFS-style asynchronous and
//! synchronous journals on researchfs' journal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use researchfs::{layout::ROOT, mkfs, BlockDevice, Design, Durability, Fs, Options, WriteInfo};
use serde::{Deserialize, Serialize};

use super::FsBenchError;
use crate::record::latency::Latency;
use crate::record::{RecordingDisk, RoleRecorder};

/// Files created, then deleted, then created and deleted one at a time.
pub const FILES: usize = 256;
/// Bytes written to each file of the create phase (one block: a small file).
pub(crate) const FILE_BYTES: usize = 4096;
/// Files per directory (the paper's 50).
const PER_DIR: usize = 50;
/// The name of the paper's asynchronous journaling design in this project.
pub(crate) const JOURNAL_ASYNC: &str = "journal-async";
const IMAGE: u64 = 64 << 20;

/// One design's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetaRun {
    /// Configuration name.
    pub config: String,
    /// Files per second of the create phase (create + write, then fsync).
    pub create_files_per_s: f64,
    /// Files per second of the delete phase (unlink, then fsync).
    pub delete_files_per_s: f64,
    /// Files per second of the 0-length create/delete phase.
    pub create_delete_files_per_s: f64,
    /// Seconds of the three phases.
    pub seconds: f64,
    /// Write requests the disk received during them.
    pub writes: u64,
    /// Flushes the disk received during them.
    pub flushes: u64,
}

/// `bob bench --fs softupdates,... --latency MODEL`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetaBenchReport {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The latency model.
    pub latency: Latency,
    /// Files per phase.
    pub files: usize,
    /// Bytes per file of the create phase.
    pub file_bytes: usize,
    /// Files per directory.
    pub per_dir: usize,
    /// Every design run, in order.
    pub runs: Vec<MetaRun>,
    /// ordered-core's seconds / softupdates' (when both ran).
    pub softupdates_vs_ordered_core: Option<f64>,
    /// journal-flush's seconds / softupdates'.
    pub softupdates_vs_journal_flush: Option<f64>,
    /// journal-async's seconds / softupdates' (the paper finds them close); `None` until
    /// the design exists and ran.
    pub softupdates_vs_journal_async: Option<f64>,
    /// journal-async's seconds / journal-sync's: below 1 when synchronous metadata costs
    /// (the paper finds synchronous logging well behind); `None` unless both ran.
    #[serde(default)]
    pub journal_sync_vs_async: Option<f64>,
    /// The PostMark-like run ([`super::Postmark`], the xsyncfs benchmark's parameters) on
    /// softupdates, journal-async and journal-sync, those of them that ran.
    #[serde(default)]
    pub postmark: Vec<super::PostmarkRun>,
    /// PostMark: journal-async's seconds / softupdates'.
    #[serde(default)]
    pub postmark_softupdates_vs_journal_async: Option<f64>,
    /// PostMark: journal-async's seconds / journal-sync's.
    #[serde(default)]
    pub postmark_journal_sync_vs_async: Option<f64>,
}

/// The recording disk with a count of what reached it.
struct Counting {
    inner: RoleRecorder,
    writes: AtomicU64,
    flushes: AtomicU64,
}

impl BlockDevice for Counting {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8], info: WriteInfo) -> std::io::Result<()> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.write_at(offset, data, info)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn durability(&self) -> Option<Durability> {
        self.inner.durability()
    }
}

/// The three phases on `design` with `files` files.
fn phases(design: Design, latency: Latency, files: usize) -> Result<MetaRun, FsBenchError> {
    let fs_err = |source| FsBenchError::Fs { design, source };
    let tmp = tempfile::tempdir()?;
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), IMAGE)?);
    disk.set_adn(design.adn_requests());
    let dev = Arc::new(Counting {
        inner: RoleRecorder(disk.clone()),
        writes: AtomicU64::new(0),
        flushes: AtomicU64::new(0),
    });
    mkfs(design, dev.as_ref(), IMAGE).map_err(fs_err)?;
    // journal-async's commit timer as the PostMark run sets it (ext3's 5 s at this rate;
    // the crash tests' 8 ops would commit, with two flushes, every 8 creates here).
    let opts = Options { commit_timer_ops: Some(BENCH_COMMIT_TIMER_OPS), ..Options::default() };
    let fs = Fs::open(design, dev.clone(), opts).map_err(fs_err)?;
    let dirs: Vec<u32> = (0..files.div_ceil(PER_DIR))
        .map(|d| fs.mkdir(ROOT, format!("d{d}")))
        .collect::<researchfs::Result<_>>()
        .map_err(fs_err)?;
    fs.fsync(ROOT).map_err(fs_err)?;
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log"))?;
    let (w0, f0) = (dev.writes.load(Ordering::Relaxed), dev.flushes.load(Ordering::Relaxed));
    let data = vec![0x5au8; FILE_BYTES];
    let name = |i: usize| format!("f{i}");
    let timed = |phase: &mut dyn FnMut() -> researchfs::Result<()>| {
        let t = Instant::now();
        phase().and_then(|()| fs.fsync(ROOT)).map(|()| t.elapsed().as_secs_f64())
    };
    let run = || -> researchfs::Result<(f64, f64, f64)> {
        let create = timed(&mut || {
            for i in 0..files {
                let f = fs.create(dirs[i / PER_DIR], name(i))?;
                fs.write(f, 0, &data)?;
            }
            Ok(())
        })?;
        let delete = timed(&mut || {
            for i in 0..files {
                fs.unlink(dirs[i / PER_DIR], name(i))?;
            }
            Ok(())
        })?;
        let churn = timed(&mut || {
            for i in 0..files {
                fs.create(dirs[0], format!("t{i}"))?;
                fs.unlink(dirs[0], format!("t{i}"))?;
            }
            Ok(())
        })?;
        Ok((create, delete, churn))
    };
    let done = run();
    let (writes, flushes) =
        (dev.writes.load(Ordering::Relaxed) - w0, dev.flushes.load(Ordering::Relaxed) - f0);
    fs.crash();
    disk.stop()?;
    let (create, delete, churn) = done.map_err(fs_err)?;
    let per_s = |s: f64| files as f64 / s.max(1e-9);
    Ok(MetaRun {
        config: design.name().into(),
        create_files_per_s: per_s(create),
        delete_files_per_s: per_s(delete),
        create_delete_files_per_s: per_s(churn),
        seconds: create + delete + churn,
        writes,
        flushes,
    })
}

/// The hook for the paper's asynchronous journal: the design named [`JOURNAL_ASYNC`],
/// once this tree has it.
pub(crate) fn journal_async() -> Option<Design> {
    JOURNAL_ASYNC.parse().ok()
}

/// The commit timer, in operations, of the timer-committing designs (journal-async) in
/// this benchmark: the PostMark run's (`super::Postmark::commit_timer_ops`), standing for
/// ext3's 5 s; soft updates' syncer is its own count of dirty blocks.
pub(crate) const BENCH_COMMIT_TIMER_OPS: u32 = 1000;

/// The designs `bob bench --fs softupdates --latency MODEL` compares: softupdates,
/// ordered-core, journal-flush and, when they exist, journal-async and journal-sync.
pub(crate) fn meta_bench_designs() -> Vec<Design> {
    let mut v = vec![Design::Softupdates, Design::Ordered, Design::JournalFlush];
    v.extend(journal_async());
    v.extend("journal-sync".parse::<Design>().ok());
    v
}

/// Runs the three phases on each design (in order) under `latency`, `files` files each.
pub fn run_meta_bench(
    designs: &[Design],
    latency: Latency,
    files: usize,
) -> Result<MetaBenchReport, FsBenchError> {
    let runs: Vec<MetaRun> =
        designs.iter().map(|&d| phases(d, latency, files)).collect::<Result<_, _>>()?;
    let pm = super::Postmark::default();
    let postmark: Vec<super::PostmarkRun> = designs
        .iter()
        .filter(|d| matches!(d.name(), "softupdates" | "journal-async" | "journal-sync"))
        .map(|&d| super::fsbench::postmark(d, latency, &pm))
        .collect::<Result<_, _>>()?;
    let pm_seconds = |name: &str| postmark.iter().find(|r| r.config == name).map(|r| r.seconds);
    let pm_ratio = |num: &str, den: &str| Some(pm_seconds(num)? / pm_seconds(den)?.max(1e-9));
    let seconds = |name: &str| runs.iter().find(|r| r.config == name).map(|r| r.seconds);
    let vs = |other: Option<&str>| {
        let su = seconds(Design::Softupdates.name())?;
        Some(seconds(other?)? / su.max(1e-9))
    };
    Ok(MetaBenchReport {
        schema_version: crate::SCHEMA_VERSION,
        latency,
        files,
        file_bytes: FILE_BYTES,
        per_dir: PER_DIR,
        softupdates_vs_ordered_core: vs(Some(Design::Ordered.name())),
        softupdates_vs_journal_flush: vs(Some(Design::JournalFlush.name())),
        softupdates_vs_journal_async: vs(journal_async().map(Design::name)),
        journal_sync_vs_async: seconds("journal-sync")
            .zip(seconds(JOURNAL_ASYNC))
            .map(|(sync, asynchronous)| asynchronous / sync.max(1e-9)),
        postmark_softupdates_vs_journal_async: pm_ratio(JOURNAL_ASYNC, "softupdates"),
        postmark_journal_sync_vs_async: pm_ratio(JOURNAL_ASYNC, "journal-sync"),
        postmark,
        runs,
    })
}

impl MetaBenchReport {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "Metadata microbenchmarks (journaling vs soft updates, §7.2), latency model {}: \
             {} files of {} B, {} per directory; files/s per phase\n",
            self.latency, self.files, self.file_bytes, self.per_dir
        );
        for r in &self.runs {
            out += &format!(
                "{:<24} create {:8.1}  delete {:8.1}  create/delete {:8.1}  {:.2} s, {} writes, {} flushes\n",
                r.config,
                r.create_files_per_s,
                r.delete_files_per_s,
                r.create_delete_files_per_s,
                r.seconds,
                r.writes,
                r.flushes
            );
        }
        for r in &self.postmark {
            out += &format!(
                "{:<24} PostMark-like run: {:.3} s, {} flushes, {} commits\n",
                r.config, r.seconds, r.flushes, r.commits
            );
        }
        for (k, v) in [
            ("softupdates_vs_ordered_core", self.softupdates_vs_ordered_core),
            ("softupdates_vs_journal_flush", self.softupdates_vs_journal_flush),
            ("softupdates_vs_journal_async", self.softupdates_vs_journal_async),
            ("journal_sync_vs_async", self.journal_sync_vs_async),
            ("postmark_softupdates_vs_journal_async", self.postmark_softupdates_vs_journal_async),
            ("postmark_journal_sync_vs_async", self.postmark_journal_sync_vs_async),
        ] {
            match v {
                Some(v) => out += &format!("{k}: {v:.2}\n"),
                None => out += &format!("{k}: not measured (a design it compares did not run)\n"),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_shape() {
        let run = |config: &str, s: f64, flushes| MetaRun {
            config: config.into(),
            create_files_per_s: 256.0 / s,
            delete_files_per_s: 512.0 / s,
            create_delete_files_per_s: 128.0 / s,
            seconds: s,
            writes: 1000,
            flushes,
        };
        let report = MetaBenchReport {
            schema_version: crate::SCHEMA_VERSION,
            latency: Latency::Hdd,
            files: FILES,
            file_bytes: FILE_BYTES,
            per_dir: PER_DIR,
            runs: vec![run("softupdates", 1.0, 12), run("ordered-core", 30.0, 2000)],
            softupdates_vs_ordered_core: Some(30.0),
            softupdates_vs_journal_flush: None,
            softupdates_vs_journal_async: None,
            journal_sync_vs_async: None,
            postmark: Vec::new(),
            postmark_softupdates_vs_journal_async: None,
            postmark_journal_sync_vs_async: None,
        };
        insta::assert_json_snapshot!("meta_bench", report);
    }

    /// On the hdd model soft updates beat flush-ordered writes, and the flush counts say
    /// why: ordered-core flushes at every dependency, soft updates once per write-back
    /// round.
    #[test]
    fn soft_updates_beat_ordered_writes_on_the_hdd_model() {
        let r = run_meta_bench(&[Design::Softupdates, Design::Ordered], Latency::Hdd, 20).unwrap();
        let (su, ord) = (&r.runs[0], &r.runs[1]);
        assert!(su.flushes < ord.flushes / 4, "{r:?}");
        assert!(r.softupdates_vs_ordered_core.unwrap() > 2.0, "{r:?}");
        // journal-async exists now, but this run did not include it.
        assert!(journal_async().is_some());
        assert_eq!(r.softupdates_vs_journal_async, None);
        assert_eq!(r.journal_sync_vs_async, None);
    }
}
