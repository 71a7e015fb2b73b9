//! `bob bench --fs conquest --latency MODEL`: Conquest's small-file speed against a
//! journaling design on bob's disk with its latency model, as the Conquest paper measured
//! it with the Sprite LFS small-file benchmark (§5.1.1: create, read and unlink 10,000
//! 1 KB files in three phases; here [`FILES`] files, scaled down for bob's 16 MiB image).
//!
//! In process (no FUSE). Conquest's metadata and small files live in PM: its operations
//! are durable when they return, at the cost of [`PM_FENCE`] per fence plus
//! [`PM_LINE`] per cache line written back (busy-waited, so they are real time). The
//! baseline is `journal-async` (its commit timer as in the other benchmarks,
//! [`super::metabench::BENCH_COMMIT_TIMER_OPS`]): run the paper's way (metadata
//! asynchronous as in its ext2, one fsync at the end of each phase, `conquest_vs_journal`)
//! and with an fsync after every operation, the durability conquest gives each operation
//! (`conquest_vs_journal_durable`).
//!
//! PM costs, and their source: Izraelevitz et al., "Basic Performance Measurements of the
//! Intel Optane DC Persistent Memory Module" (arXiv:1903.05714, 2019): idle latency 346 ns,
//! write bandwidth of one module 2.3 GB/s. A fence waits for the lines written back since
//! the last one: 346 ns (taken as the round trip, an upper bound: a write is persistent
//! once the memory controller's queue holds it) plus 64 B at 2.3 GB/s (28 ns) per line.
//! The paper's own prototype used battery-backed DRAM, faster still.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use researchfs::{
    layout::ROOT, mkfs, ConquestDevice, Design, Fs, MemPm, Options, PersistentMemory,
};
use serde::{Deserialize, Serialize};

use super::fsbench::FsBenchError;
use crate::record::latency::Latency;
use crate::record::{RecordingDisk, RoleRecorder};

/// Files per phase.
pub const FILES: usize = 300;
/// Bytes of each file (the benchmark's 1 KB).
pub(crate) const FILE_BYTES: usize = 1024;
/// A fence's fixed cost.
const PM_FENCE: Duration = Duration::from_nanos(346);
/// Per cache line written back since the previous fence.
const PM_LINE: Duration = Duration::from_nanos(28);
const IMAGE: u64 = 16 << 20;

/// One design's run of the three phases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmallFileRun {
    /// Configuration name.
    pub config: String,
    /// `none` (durable at return), `per-phase` or `per-op` fsyncs.
    pub fsync: String,
    /// Files created (with their 1 KiB) per second.
    pub create_per_s: f64,
    /// Files read whole per second.
    pub read_per_s: f64,
    /// Files unlinked per second.
    pub unlink_per_s: f64,
    /// Operations (3 per file) per second over the three phases.
    pub ops_per_s: f64,
    /// fsync calls made (each a journal commit with its flushes).
    pub fsyncs: u64,
    /// PM fences issued (0 for a disk-only design).
    pub fences: u64,
}

/// `bob bench --fs conquest --latency MODEL`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConquestBenchReport {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The disk's latency model.
    pub latency: Latency,
    /// Files per phase.
    pub files: usize,
    /// PM cost per fence, ns.
    pub pm_fence_ns: u64,
    /// PM cost per line written back, ns.
    pub pm_line_ns: u64,
    /// Conquest.
    pub conquest: SmallFileRun,
    /// journal-async, one fsync per phase (the paper's asynchronous-metadata baseline).
    pub journal: SmallFileRun,
    /// journal-async, an fsync after every operation.
    pub journal_durable: SmallFileRun,
    /// `conquest.ops_per_s / journal.ops_per_s`.
    pub conquest_vs_journal: f64,
    /// `conquest.ops_per_s / journal_durable.ops_per_s`.
    pub conquest_vs_journal_durable: f64,
}

/// A PM region in memory whose fences cost what the module documentation says.
struct CostedPm {
    inner: MemPm,
    lines: AtomicU64,
    fences: AtomicU64,
}

fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

impl PersistentMemory for CostedPm {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn load(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.load(offset, buf)
    }
    fn store(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.store(offset, data)
    }
    fn clwb(&self, offset: u64, len: u64) -> std::io::Result<()> {
        if len > 0 {
            let lines = (offset + len - 1) / 64 - offset / 64 + 1;
            self.lines.fetch_add(lines, Ordering::Relaxed);
        }
        self.inner.clwb(offset, len)
    }
    fn fence(&self) -> std::io::Result<()> {
        let lines = self.lines.swap(0, Ordering::Relaxed);
        self.fences.fetch_add(1, Ordering::Relaxed);
        spin(PM_FENCE + PM_LINE * lines as u32);
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Sync {
    None,
    PerPhase,
    PerOp,
}

fn small_files(
    design: Design,
    sync: Sync,
    latency: Latency,
    files: usize,
) -> Result<SmallFileRun, FsBenchError> {
    let fs_err = |source| FsBenchError::Fs { design, source };
    let tmp = tempfile::tempdir()?;
    let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), IMAGE)?);
    let role: Arc<dyn researchfs::BlockDevice> = Arc::new(RoleRecorder(disk.clone()));
    let pm = Arc::new(CostedPm {
        inner: MemPm::new(ConquestDevice::pm_size(IMAGE)),
        lines: AtomicU64::new(0),
        fences: AtomicU64::new(0),
    });
    let dev: Arc<dyn researchfs::BlockDevice> = if design.pm_fenced().is_some() {
        ConquestDevice::open(design, role, pm.clone())?
    } else {
        role
    };
    mkfs(design, dev.as_ref(), IMAGE).map_err(fs_err)?;
    dev.end_op()?;
    let opts = Options {
        commit_timer_ops: Some(super::metabench::BENCH_COMMIT_TIMER_OPS),
        ..Options::default()
    };
    let fs = Fs::open(design, dev, opts).map_err(fs_err)?;
    let d = fs.mkdir(ROOT, "bench").map_err(fs_err)?;
    fs.fsync(d).map_err(fs_err)?;
    disk.set_latency(latency);
    disk.start(&tmp.path().join("record.log"))?;
    let fences_before = pm.fences.load(Ordering::Relaxed);
    let data = vec![5u8; FILE_BYTES];
    let mut fsyncs = 0u64;
    let mut count_sync = |ino: u32, phase_end: bool| -> researchfs::Result<()> {
        if sync == Sync::PerOp || (sync == Sync::PerPhase && phase_end) {
            fs.fsync(ino)?;
            fsyncs += 1;
        }
        Ok(())
    };
    let phase = |op: &mut dyn FnMut(usize) -> researchfs::Result<u32>,
                 sync: &mut dyn FnMut(u32, bool) -> researchfs::Result<()>|
     -> researchfs::Result<f64> {
        let start = Instant::now();
        let mut last = d;
        for i in 0..files {
            last = op(i)?;
            sync(last, false)?;
        }
        sync(last, true)?;
        Ok(files as f64 / start.elapsed().as_secs_f64().max(1e-9))
    };
    let mut inos = vec![0u32; files];
    let run = (|| -> researchfs::Result<(f64, f64, f64)> {
        let create = phase(
            &mut |i| {
                let f = fs.create(d, format!("f{i}"))?;
                fs.write(f, 0, &data)?;
                inos[i] = f;
                Ok(f)
            },
            &mut count_sync,
        )?;
        let read = phase(
            &mut |i| {
                fs.read(inos[i], 0, FILE_BYTES)?;
                Ok(inos[i])
            },
            &mut |_, _| Ok(()),
        )?;
        let unlink = phase(
            &mut |i| {
                fs.unlink(d, format!("f{i}"))?;
                Ok(d)
            },
            &mut count_sync,
        )?;
        Ok((create, read, unlink))
    })();
    fs.crash();
    disk.stop()?;
    let (create, read, unlink) = run.map_err(fs_err)?;
    let ops_per_s = 3.0 / (1.0 / create + 1.0 / read + 1.0 / unlink);
    Ok(SmallFileRun {
        config: design.name().into(),
        fsync: match sync {
            Sync::None => "none",
            Sync::PerPhase => "per-phase",
            Sync::PerOp => "per-op",
        }
        .into(),
        create_per_s: create,
        read_per_s: read,
        unlink_per_s: unlink,
        ops_per_s,
        fsyncs,
        fences: pm.fences.load(Ordering::Relaxed) - fences_before,
    })
}

/// Runs the small-file benchmark on conquest and journal-async (both ways) under
/// `latency`, with `files` files per phase.
pub fn run_conquest_bench(
    latency: Latency,
    files: usize,
) -> Result<ConquestBenchReport, FsBenchError> {
    let conquest = small_files(Design::Conquest, Sync::None, latency, files)?;
    let journal = small_files(Design::JournalAsync, Sync::PerPhase, latency, files)?;
    let journal_durable = small_files(Design::JournalAsync, Sync::PerOp, latency, files)?;
    Ok(ConquestBenchReport {
        schema_version: crate::SCHEMA_VERSION,
        latency,
        files,
        pm_fence_ns: PM_FENCE.as_nanos() as u64,
        pm_line_ns: PM_LINE.as_nanos() as u64,
        conquest_vs_journal: conquest.ops_per_s / journal.ops_per_s,
        conquest_vs_journal_durable: conquest.ops_per_s / journal_durable.ops_per_s,
        conquest,
        journal,
        journal_durable,
    })
}

impl ConquestBenchReport {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let row = |r: &SmallFileRun| {
            format!(
                "{:<14} (fsync {:<9}): create {:9.1}/s  read {:10.1}/s  unlink {:9.1}/s  all {:9.1} ops/s, {} fsyncs, {} PM fences\n",
                r.config, r.fsync, r.create_per_s, r.read_per_s, r.unlink_per_s, r.ops_per_s, r.fsyncs, r.fences
            )
        };
        format!(
            "Sprite LFS small-file benchmark ({} files of 1 KiB), latency model {}, PM: {} ns per fence + {} ns per line\n{}{}{}conquest_vs_journal: {:.2}\nconquest_vs_journal_durable: {:.2}\n",
            self.files,
            self.latency,
            self.pm_fence_ns,
            self.pm_line_ns,
            row(&self.conquest),
            row(&self.journal),
            row(&self.journal_durable),
            self.conquest_vs_journal,
            self.conquest_vs_journal_durable
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conquest_beats_a_journal_that_makes_each_op_durable_and_fences_tell_why() {
        let r = run_conquest_bench(Latency::Hdd, 10).unwrap();
        assert_eq!(r.conquest.fsyncs, 0, "{r:?}");
        // Four fences per committed operation (redo records, commit, in place, clear).
        assert!(r.conquest.fences >= 4 * 20, "{r:?}");
        assert_eq!(r.journal.fences, 0, "{r:?}");
        assert!(r.journal_durable.fsyncs >= 20, "{r:?}");
        assert!(r.conquest_vs_journal_durable > 10.0, "{r:?}");
        insta::assert_json_snapshot!(
            "conquest_bench",
            ConquestBenchReport {
                conquest: SmallFileRun {
                    create_per_s: 0.0,
                    read_per_s: 0.0,
                    unlink_per_s: 0.0,
                    ops_per_s: 0.0,
                    ..r.conquest.clone()
                },
                journal: SmallFileRun {
                    create_per_s: 0.0,
                    read_per_s: 0.0,
                    unlink_per_s: 0.0,
                    ops_per_s: 0.0,
                    fences: 0,
                    ..r.journal.clone()
                },
                journal_durable: SmallFileRun {
                    create_per_s: 0.0,
                    read_per_s: 0.0,
                    unlink_per_s: 0.0,
                    ops_per_s: 0.0,
                    ..r.journal_durable.clone()
                },
                conquest_vs_journal: 0.0,
                conquest_vs_journal_durable: 0.0,
                ..r
            }
        );
    }
}
