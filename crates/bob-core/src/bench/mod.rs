//! Benchmarks: bob's engine against the naive per-state pipeline and the mount floor,
//! measured in one process on one list of crash states.
//!
//! [`run`] records the workload once and generates its states once (the default
//! strategies), then times, in this order:
//!
//! 1. the naive pipeline, one state at a time and no dedup: copy the base image file
//!    whole, write the state's sectors into the copy, [`check::check_image`] it (loop
//!    device, recovery mount, snapshot, umount, fsck, detach), delete the copy;
//!    A second, kinder naive variant copies only the image's data (holes stay holes, see
//!    [`crate::image::copy_sparse`]) on an evenly spaced sample of the states, so that the
//!    engine is also compared with a naive tool that does not write the whole image;
//! 2. the engine, [`check::run_states`] with its default behaviour (dedup, parallel
//!    workers over copy-on-write views), timed on all states, then once more on every
//!    other state, each with the peak-RSS mark reset, to show whether memory grows with
//!    the number of states (glibc's mmap threshold is pinned for the whole run, see
//!    `pin_mmap_threshold`, so that freed buffers do not count as memory in use);
//! 3. the floor: mount + umount of one unchanged image on one loop device, repeated,
//!    after one untimed mount that replays whatever the base image's journal holds (plus,
//!    to explain the gap, the read-only fsck and a loop attach + detach alone);
//! 4. the recorder's overhead: a write-heavy workload on bob's recording disk (recording
//!    mode) over the same workload on a plain loop device over a sparse file, and how far
//!    the recorder raises the process's peak RSS while it streams the trace to disk.
//!
//! The naive and engine verdicts must agree state by state (outcome name, and the story
//! of a violation); [`BenchReport::first_disagreement`] names the first state where they
//! do not. Every loop device, mount and FUSE disk is a guard from [`crate::device`], so
//! each phase gives everything back on every exit path.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use workloads::Property;

use crate::check::{self, EngineOptions, Outcome, StateResult, Subject};
use crate::crash::{self, CrashState, Limits, Overlay, OverlayBuilder, StateId, Strategy};
use crate::device::fusedisk::DiskServer;
use crate::device::loopdev::LoopDevice;
use crate::device::{cmd, mount};
use crate::fs::{FsConfig, Timeouts};
use crate::image::CrashView;
use crate::record::{self, RecordRequest, RecordingDisk};
use crate::run::{Progress, WorkDir};
use crate::trace::{EntryKind, Trace, SECTOR_SIZE};

/// Mount + umount rounds of the floor unless told otherwise.
pub const DEFAULT_FLOOR_RUNS: usize = 50;

/// Bytes the recorder-overhead workload writes unless told otherwise (64 MiB).
pub const DEFAULT_RECORDER_BYTES: u64 = 64 << 20;

/// Files the recorder-overhead workload spreads its bytes over.
const RECORDER_FILES: u64 = 16;

/// Rounds of each side of the recorder comparison; the median is reported.
const RECORDER_ROUNDS: usize = 3;

/// At most this many states are run through the sparse-copy naive variant.
const SPARSE_SAMPLE: usize = 50;

/// At most this many mount + umount rounds of the floor over bob's FUSE disk.
const FUSE_FLOOR_RUNS: usize = 20;

/// Rounds of the fsck and loop attach timings that explain the floor gap.
const BREAKDOWN_ROUNDS: usize = 10;

/// Benchmark errors: the environment failed, not the file system under test.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Recording the workload failed.
    #[error(transparent)]
    Record(#[from] record::Error),
    /// Checking a state failed (naive pipeline or engine).
    #[error(transparent)]
    Check(#[from] check::Error),
    /// A device-layer failure (floor, recorder overhead).
    #[error(transparent)]
    Device(#[from] crate::device::Error),
    /// mkfs failed in the recorder-overhead phase.
    #[error(transparent)]
    Mkfs(#[from] crate::fs::MkfsError),
    /// The options do not fit.
    #[error("bench options: {0}")]
    Options(String),
    /// The run was interrupted (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// I/O on bob's own scratch files.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The configuration.
    pub config: FsConfig,
    /// The property whose workload is recorded.
    pub property: Property,
    /// Overrides the workload's multi-block size (bytes, a multiple of the block size),
    /// to measure how the cost grows with the trace.
    pub multi_block_bytes: Option<u64>,
    /// Run the naive pipeline on at most this many states, evenly spaced over the list
    /// (its rate is per state, so a sample estimates it); `None` runs it on every state.
    pub naive_sample: Option<usize>,
    /// Mount + umount rounds of the floor (at least 1).
    pub floor_runs: usize,
    /// The engine's parallel workers.
    pub jobs: usize,
    /// Bytes the recorder-overhead workload writes; 0 skips that phase.
    pub recorder_bytes: u64,
    /// External step timeouts (the same for the naive pipeline and the engine).
    pub timeouts: Timeouts,
    /// Where the scratch directory goes (default: the system temp dir).
    pub scratch: Option<PathBuf>,
}

impl BenchOptions {
    /// The defaults for `config` and `property`: jobs = number of cores.
    pub fn new(config: FsConfig, property: Property) -> BenchOptions {
        BenchOptions {
            config,
            property,
            multi_block_bytes: None,
            naive_sample: None,
            floor_runs: DEFAULT_FLOOR_RUNS,
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            recorder_bytes: DEFAULT_RECORDER_BYTES,
            timeouts: Timeouts::default(),
            scratch: None,
        }
    }
}

/// The machine the figures come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Cores available to bob.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// MemTotal of /proc/meminfo, KiB.
    pub mem_total_kib: u64,
}

/// Where the naive pipeline's time goes, per state on average.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NaiveBreakdown {
    /// Copying the base image file whole (`std::fs::copy`).
    pub copy_ms: f64,
    /// Writing the state's sectors into the copy.
    pub write_ms: f64,
    /// [`check::check_image`]: attach, recovery mount, snapshot, umount, fsck, detach.
    pub check_ms: f64,
    /// Deleting the copy.
    pub delete_ms: f64,
}

/// The naive pipeline with a sparse copy of the base image (only its data, holes kept),
/// run on an evenly spaced sample of the states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NaiveSparse {
    /// States in the sample.
    pub states: usize,
    /// States per second.
    pub states_per_s: f64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Where the time goes.
    pub breakdown: NaiveBreakdown,
    /// Engine covered/s over this variant's states/s.
    pub ratio_covered: f64,
    /// Engine mounted/s over this variant's states/s.
    pub ratio_mounted: f64,
}

/// The engine run with one worker on a sample of the states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineSerial {
    /// States in the sample.
    pub states: usize,
    /// States mounted (after dedup).
    pub states_mounted: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Wall time per mounted state, ms.
    pub ms_per_mounted_state: f64,
}

/// The floor and the single steps that explain the engine's cost above it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FloorBreakdown {
    /// Timed mount + umount rounds.
    pub runs: usize,
    /// Median mount + umount, ms.
    pub mount_umount_ms_median: f64,
    /// Median mount + umount of the same unchanged image served through bob's FUSE disk
    /// (a crash-state view with nothing applied), ms.
    pub fuse_mount_umount_ms_median: f64,
    /// The configuration's read-only fsck of the unchanged image, median ms.
    pub fsck_ms: f64,
    /// Binding a free loop device to the image and unbinding it, median ms.
    pub loop_attach_detach_ms: f64,
}

/// The recorder comparison (medians of a few rounds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecorderBench {
    /// Bytes written (spread over files, then each fsynced).
    pub bytes: u64,
    /// Rounds per side.
    pub rounds: usize,
    /// Median wall time on bob's recording disk (FUSE disk + loop, recording), seconds.
    pub recording_seconds: f64,
    /// Median wall time on a plain loop device over a sparse file, seconds.
    pub plain_seconds: f64,
    /// Size of the log the recording streamed to disk (the last round), bytes.
    #[serde(default)]
    pub log_bytes: u64,
    /// How much the process's peak RSS rose above its RSS at the start of recording,
    /// through the workload, the unmount and sealing the trace (the largest of the
    /// rounds), KiB. What the recorder holds in memory; the payloads are on disk.
    #[serde(default)]
    pub recording_rss_growth_kib: u64,
}

/// Peak resident memory around the engine phase (from /proc/self/status).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// VmHWM just before the engine phase (recording and the naive pipeline included).
    pub peak_rss_before_engine_kib: u64,
    /// VmHWM after the engine ran all states. When `hwm_reset` is set the mark was reset
    /// just before, so this is the engine's own peak.
    pub peak_rss_after_engine_kib: u64,
    /// The engine's peak over every other state only (mark reset before).
    pub peak_rss_engine_half_kib: u64,
    /// States in that half.
    pub half_states: usize,
    /// Whether the kernel let bob reset the peak mark (`/proc/self/clear_refs`).
    pub hwm_reset: bool,
    /// Whether glibc's mmap threshold was pinned for the run (see [`run`]).
    pub malloc_pinned: bool,
}

/// The first state whose naive and engine verdicts differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Position in the state list.
    pub index: usize,
    /// The state id.
    pub state: String,
    /// The naive pipeline's outcome and detail.
    pub naive: String,
    /// The engine's outcome and detail.
    pub engine: String,
}

/// Everything `bob bench` measures. The first nine fields are the stable keys the issue
/// names; the rest explain them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Naive pipeline: states per second.
    pub naive_states_per_s: f64,
    /// Engine: states covered (duplicates included) per second of wall time.
    pub engine_states_covered_per_s: f64,
    /// Engine: states actually mounted (after dedup) per second of wall time.
    pub engine_states_mounted_per_s: f64,
    /// Floor: mount + umount rounds per second.
    pub floor_mounts_per_s: f64,
    /// `engine_states_covered_per_s / naive_states_per_s`.
    pub ratio_covered: f64,
    /// `engine_states_mounted_per_s / naive_states_per_s`.
    pub ratio_mounted: f64,
    /// Engine wall time per mounted state over the floor's mean mount + umount time.
    pub cost_vs_floor: f64,
    /// Recording-disk wall time over plain-loop wall time of the write-heavy workload
    /// (0 when that phase was skipped).
    pub recorder_overhead: f64,
    /// Whether naive and engine reached the same verdict on every state.
    pub verdicts_agree: bool,

    /// The configuration.
    pub config: String,
    /// The property.
    pub property: String,
    /// The workload's multi-block size, bytes.
    pub multi_block_bytes: u64,
    /// The machine.
    pub machine: Machine,
    /// Engine workers.
    pub jobs: usize,
    /// Trace entries (writes, flushes, discards, marks).
    pub trace_entries: usize,
    /// Bytes of write data in the trace.
    pub trace_write_bytes: u64,
    /// Flush-delimited epochs.
    pub epochs: usize,
    /// States checked by both sides.
    pub states: usize,
    /// States the engine mounted (distinct contents).
    pub states_mounted: usize,
    /// States the naive pipeline ran (all of them unless sampled).
    pub naive_states: usize,
    /// Naive wall time, seconds.
    pub naive_seconds: f64,
    /// Where the naive time goes.
    pub naive_breakdown: NaiveBreakdown,
    /// The naive pipeline with a sparse copy, on a sample of the states.
    pub naive_sparse: NaiveSparse,
    /// Engine wall time over all states, seconds.
    pub engine_seconds: f64,
    /// Engine wall time per mounted state, ms.
    pub engine_ms_per_mounted_state: f64,
    /// Engine worker time per mounted state (wall x jobs) over the floor: the cost with
    /// the parallel speed-up taken out.
    pub cost_vs_floor_per_worker: f64,
    /// Building every state's overlay and digest once, as the engine does before it
    /// mounts anything (part of `engine_seconds`), seconds.
    pub engine_dedup_seconds: f64,
    /// The engine with one worker on the sparse-copy sample.
    pub engine_serial: EngineSerial,
    /// Floor mean mount + umount, ms.
    pub floor_ms: f64,
    /// The floor and the single steps above it.
    pub floor: FloorBreakdown,
    /// The recorder comparison, if run.
    pub recorder: Option<RecorderBench>,
    /// Peak memory around the engine.
    pub memory: MemoryReport,
    /// The 1-minute load average of the machine at the start and at the end: other work
    /// on the machine slows every phase, the ratios less than the rates.
    pub load_average: [f64; 2],
    /// The engine's outcomes by name, over all states.
    pub outcomes: BTreeMap<String, usize>,
    /// States whose verdicts differ.
    pub disagreements: usize,
    /// The first of them.
    pub first_disagreement: Option<Disagreement>,
}

impl BenchReport {
    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let m = &self.memory;
        let mut s = String::new();
        let mut line = |l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        line(format!(
            "bench {} / {} (multi-block {} KiB): {} states, {} distinct after dedup, {} epochs, \
             {} trace entries ({} KiB written)",
            self.config,
            self.property,
            self.multi_block_bytes >> 10,
            self.states,
            self.states_mounted,
            self.epochs,
            self.trace_entries,
            self.trace_write_bytes >> 10
        ));
        line(format!(
            "machine: {} cores, kernel {}, {} MiB memory; engine jobs {}",
            self.machine.cores,
            self.machine.kernel,
            self.machine.mem_total_kib >> 10,
            self.jobs
        ));
        let nb = &self.naive_breakdown;
        line(format!(
            "naive:  {:8.1} states/s  ({} states in {:.1} s; per state: copy {:.1} ms, write {:.2} ms, \
             check {:.1} ms, delete {:.1} ms)",
            self.naive_states_per_s,
            self.naive_states,
            self.naive_seconds,
            nb.copy_ms,
            nb.write_ms,
            nb.check_ms,
            nb.delete_ms
        ));
        let sp = &self.naive_sparse;
        line(format!(
            "naive, sparse copy: {:.1} states/s over {} sampled states (copy {:.1} ms, check {:.1} ms); \
             engine/this: {:.2}x covered, {:.2}x mounted",
            sp.states_per_s,
            sp.states,
            sp.breakdown.copy_ms,
            sp.breakdown.check_ms,
            sp.ratio_covered,
            sp.ratio_mounted
        ));
        line(format!(
            "engine: {:8.1} states/s covered, {:.1} mounted/s  ({:.2} s, of which overlays and \
             digests {:.2} s; {:.1} ms per mounted state)",
            self.engine_states_covered_per_s,
            self.engine_states_mounted_per_s,
            self.engine_seconds,
            self.engine_dedup_seconds,
            self.engine_ms_per_mounted_state
        ));
        line(format!(
            "floor:  {:8.1} mount+umount/s  ({:.2} ms mean, {:.2} ms median over {}; \
             over bob's FUSE disk {:.2} ms median; fsck {:.1} ms, loop attach+detach {:.2} ms)",
            self.floor_mounts_per_s,
            self.floor_ms,
            self.floor.mount_umount_ms_median,
            self.floor.runs,
            self.floor.fuse_mount_umount_ms_median,
            self.floor.fsck_ms,
            self.floor.loop_attach_detach_ms
        ));
        line(format!(
            "ratio engine/naive: {:.2}x covered, {:.2}x mounted; cost per mounted state: \
             {:.2}x floor ({:.2}x per worker)",
            self.ratio_covered,
            self.ratio_mounted,
            self.cost_vs_floor,
            self.cost_vs_floor_per_worker
        ));
        line(format!(
            "engine, one worker: {:.1} ms per mounted state ({} of {} sampled states mounted)",
            self.engine_serial.ms_per_mounted_state,
            self.engine_serial.states_mounted,
            self.engine_serial.states
        ));
        match &self.recorder {
            Some(r) => line(format!(
                "recorder overhead: {:.2}x ({} MiB over {} files + fsync: recording disk {:.2} s, \
                 plain loop {:.2} s; medians of {}); recorder peak RSS +{} KiB, log {} KiB on disk",
                self.recorder_overhead,
                r.bytes >> 20,
                RECORDER_FILES,
                r.recording_seconds,
                r.plain_seconds,
                r.rounds,
                r.recording_rss_growth_kib,
                r.log_bytes >> 10
            )),
            None => line("recorder overhead: not measured".into()),
        }
        line(format!(
            "peak RSS: {} KiB before the engine; engine alone {} KiB over all {} states, \
             {} KiB over {} states{}",
            m.peak_rss_before_engine_kib,
            m.peak_rss_after_engine_kib,
            self.states,
            m.peak_rss_engine_half_kib,
            m.half_states,
            if m.hwm_reset { "" } else { " (peak mark could not be reset: process peaks)" }
        ));
        line(format!(
            "load average (1 min): {:.2} at the start, {:.2} at the end",
            self.load_average[0], self.load_average[1]
        ));
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        line(format!("outcomes: {}", outcomes.join(", ")));
        match &self.first_disagreement {
            None => line(format!("verdicts agree on all {} states", self.states)),
            Some(d) => line(format!(
                "VERDICTS DISAGREE on {} states; first: state {} (#{}): naive {}, engine {}",
                self.disagreements, d.state, d.index, d.naive, d.engine
            )),
        }
        s
    }
}

/// Whether two outcomes are the same verdict: the same outcome, and for a violation the
/// same story. Mount and fsck messages name the loop device, so only their kind counts.
pub fn same_verdict(a: &Outcome, b: &Outcome) -> bool {
    a.kind() == b.kind() && (!matches!(a, Outcome::Violated { .. }) || a.detail() == b.detail())
}

fn describe(o: &Outcome) -> String {
    if o.detail().is_empty() {
        o.name().to_owned()
    } else {
        format!("{}: {}", o.name(), o.detail())
    }
}

/// Reads a `Vm*:` line of /proc/self/status, in KiB.
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Resets the peak-RSS mark to the current RSS (Linux 4.0+: `5 > clear_refs`).
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Pins glibc's mmap threshold at its initial 128 KiB. Left dynamic, glibc raises it to
/// the size of the largest mmapped block freed so far: once the first FUSE session ends,
/// the 16 MiB per-thread buffers of every later session come from the malloc arenas,
/// are zeroed there (every page touched) and stay resident after they are freed, so the
/// process's RSS grows by tens of MiB with each engine run whatever its number of states.
/// Pinned, such buffers are mapped and unmapped, and peak RSS measures live memory.
fn pin_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a malloc parameter; 128 KiB is glibc's own default.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The 1-minute load average (/proc/loadavg).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn machine() -> Machine {
    let mem_total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    Machine {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        kernel: record::kernel_release(),
        mem_total_kib,
    }
}

/// At most `n` indices of `0..len`, evenly spaced, starting at 0.
fn spaced(len: usize, n: usize) -> Vec<usize> {
    let stride = len.div_ceil(n.max(1)).max(1);
    (0..len).step_by(stride).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn per_s(count: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Writes the sectors `overlay` sets into `file`, one `pwrite` per run of consecutive
/// sectors (at most 1 MiB), which is how a careful naive tool would do it.
pub fn write_overlay(
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

/// Runs the whole benchmark (see the module documentation). `progress` hears one phase
/// per step (`recording`, `naive`, `naive-sparse`, `engine`, `engine-half`,
/// `engine-serial`, `floor`, `recorder`); `cancel`
/// stops it between states with [`Error::Interrupted`].
pub fn run(
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<BenchReport, Error> {
    let config = &options.config;
    if options.floor_runs == 0 {
        return Err(Error::Options("the floor needs at least one run".into()));
    }
    let mut params = config.workload_params();
    if let Some(m) = options.multi_block_bytes {
        if m == 0 || m % params.block_size != 0 {
            return Err(Error::Options(format!(
                "multi-block size {m} is not a positive multiple of the block size {}",
                params.block_size
            )));
        }
        params.multi_block_bytes = m;
    }
    let malloc_pinned = pin_mmap_threshold();
    let load_start = load_average();
    let scratch_parent = options.scratch.clone().unwrap_or_else(std::env::temp_dir);
    let work = WorkDir::new(options.scratch.as_deref()).map_err(io_err(&scratch_parent))?;
    let interrupted = || cancel.load(Ordering::Relaxed);

    progress.phase("recording", 0);
    let workload = workloads::workload_for(options.property, &params);
    let record_dir = work.path().join("record");
    std::fs::create_dir_all(&record_dir).map_err(io_err(&record_dir))?;
    let recording = record::record(&RecordRequest {
        config,
        workload: &workload,
        device: None,
        work_dir: &record_dir,
        timeouts: options.timeouts,
    })?;
    if interrupted() {
        return Err(Error::Interrupted);
    }
    let base_path = recording.base_image.clone();
    let (subject, _) = Subject::of_recording(
        config.clone(),
        workload,
        recording,
        None,
        crash::DiskModel::default(),
    )?;
    let states =
        crash::generate(&subject.trace, &subject.epochs, Strategy::DEFAULT, &Limits::default())
            .states;
    if states.is_empty() {
        return Err(Error::Options(format!(
            "{} on {} has no crash states to check",
            options.property.name(),
            config.name
        )));
    }

    // 1. Naive.
    let naive_indices = spaced(states.len(), options.naive_sample.unwrap_or(usize::MAX));
    progress.phase("naive", naive_indices.len());
    let naive_states: Vec<&CrashState> = naive_indices.iter().map(|&i| &states[i]).collect();
    let whole_copy = |from: &Path, to: &Path| std::fs::copy(from, to).map(drop);
    let (naive, naive_seconds, naive_breakdown) = naive_pipeline(
        &subject,
        &base_path,
        &naive_states,
        whole_copy,
        work.path(),
        options,
        progress,
        cancel,
    )?;
    let sample = spaced(states.len(), SPARSE_SAMPLE);
    progress.phase("naive-sparse", sample.len());
    let sampled: Vec<&CrashState> = sample.iter().map(|&i| &states[i]).collect();
    let (sparse, sparse_seconds, sparse_breakdown) = naive_pipeline(
        &subject,
        &base_path,
        &sampled,
        crate::image::copy_sparse,
        work.path(),
        options,
        progress,
        cancel,
    )?;

    // 2. Engine. First what it does before it mounts anything: every state's overlay and
    // digest (the dedup key), timed alone to show how it grows with the trace.
    let started = Instant::now();
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    for state in &states {
        std::hint::black_box(builder.state(&state.id).digest(&subject.trace));
    }
    drop(builder);
    let dedup_seconds = started.elapsed().as_secs_f64();

    // Then all states (timed), then every other state, each with the peak mark reset
    // first. The half spans the same epochs (and overlay sizes) as the whole list and
    // differs from it only in the number of states.
    let peak_rss_before_engine_kib = status_kib("VmHWM:");
    progress.phase("engine", states.len());
    let mut hwm_reset = reset_hwm();
    let started = Instant::now();
    let results =
        engine(&subject, &states, work.path(), "engine", options.jobs, options, progress, cancel)?;
    let engine_seconds = started.elapsed().as_secs_f64();
    let peak_rss_after_engine_kib = status_kib("VmHWM:");
    let half: Vec<CrashState> = states.iter().step_by(2).cloned().collect();
    progress.phase("engine-half", half.len());
    hwm_reset &= reset_hwm();
    engine(&subject, &half, work.path(), "engine-half", options.jobs, options, progress, cancel)?;
    let peak_rss_engine_half_kib = status_kib("VmHWM:");

    // The engine with one worker on the sparse-copy sample: its cost per mounted state
    // without the parallel speed-up.
    let sampled_states: Vec<CrashState> = sample.iter().map(|&i| states[i].clone()).collect();
    progress.phase("engine-serial", sampled_states.len());
    let started = Instant::now();
    let serial = engine(
        &subject,
        &sampled_states,
        work.path(),
        "engine-serial",
        1,
        options,
        progress,
        cancel,
    )?;
    let serial_seconds = started.elapsed().as_secs_f64();
    let serial_mounted = serial.iter().enumerate().filter(|(i, r)| r.mounted_as == *i).count();
    let states_mounted = results.iter().enumerate().filter(|(i, r)| r.mounted_as == *i).count();

    let mut disagreements = 0;
    let mut first_disagreement = None;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for e in &results {
        *outcomes.entry(e.check.outcome.name().to_owned()).or_default() += 1;
    }
    for (&i, n) in naive_indices.iter().zip(&naive) {
        let e = &results[i];
        if !same_verdict(n, &e.check.outcome) {
            disagreements += 1;
            first_disagreement.get_or_insert_with(|| Disagreement {
                index: i,
                state: states[i].id.to_string(),
                naive: describe(n),
                engine: describe(&e.check.outcome),
            });
        }
    }
    for (&i, n) in sample.iter().zip(&sparse) {
        let e = &results[i].check.outcome;
        if !same_verdict(n, e) {
            disagreements += 1;
            if first_disagreement.as_ref().is_none_or(|d| d.index > i) {
                first_disagreement = Some(Disagreement {
                    index: i,
                    state: states[i].id.to_string(),
                    naive: format!("(sparse copy) {}", describe(n)),
                    engine: describe(e),
                });
            }
        }
    }

    // 3. Floor.
    progress.phase("floor", options.floor_runs);
    let (floor_seconds, floor) =
        floor(&subject, &base_path, work.path(), options, progress, cancel)?;

    // 4. Recorder overhead.
    let recorder = if options.recorder_bytes > 0 {
        progress.phase("recorder", RECORDER_ROUNDS * 2);
        Some(recorder_bench(config, work.path(), options, progress, cancel)?)
    } else {
        None
    };

    let naive_states_per_s = per_s(naive_indices.len(), naive_seconds);
    let sparse_per_s = per_s(sample.len(), sparse_seconds);
    let engine_states_covered_per_s = per_s(states.len(), engine_seconds);
    let engine_states_mounted_per_s = per_s(states_mounted, engine_seconds);
    let floor_ms = floor_seconds * 1e3 / options.floor_runs as f64;
    let engine_ms_per_mounted_state = engine_seconds * 1e3 / states_mounted.max(1) as f64;
    Ok(BenchReport {
        naive_states_per_s,
        engine_states_covered_per_s,
        engine_states_mounted_per_s,
        floor_mounts_per_s: per_s(options.floor_runs, floor_seconds),
        ratio_covered: ratio(engine_states_covered_per_s, naive_states_per_s),
        ratio_mounted: ratio(engine_states_mounted_per_s, naive_states_per_s),
        cost_vs_floor: ratio(engine_ms_per_mounted_state, floor_ms),
        recorder_overhead: recorder
            .as_ref()
            .map_or(0.0, |r| ratio(r.recording_seconds, r.plain_seconds)),
        verdicts_agree: disagreements == 0,
        config: config.name.into(),
        property: options.property.name().into(),
        multi_block_bytes: params.multi_block_bytes,
        machine: machine(),
        jobs: options.jobs.max(1),
        trace_entries: subject.trace.entries.len(),
        trace_write_bytes: subject
            .trace
            .entries
            .iter()
            .filter(|e| matches!(e.kind(), EntryKind::Write { .. }))
            .map(|e| e.data.len() as u64)
            .sum(),
        epochs: subject.epochs.len(),
        states: states.len(),
        states_mounted,
        naive_states: naive_indices.len(),
        naive_seconds,
        naive_breakdown,
        naive_sparse: NaiveSparse {
            states: sample.len(),
            states_per_s: sparse_per_s,
            seconds: sparse_seconds,
            breakdown: sparse_breakdown,
            ratio_covered: ratio(engine_states_covered_per_s, sparse_per_s),
            ratio_mounted: ratio(engine_states_mounted_per_s, sparse_per_s),
        },
        engine_seconds,
        engine_ms_per_mounted_state,
        cost_vs_floor_per_worker: ratio(
            engine_ms_per_mounted_state * options.jobs.max(1) as f64,
            floor_ms,
        ),
        engine_dedup_seconds: dedup_seconds,
        engine_serial: EngineSerial {
            states: sampled_states.len(),
            states_mounted: serial_mounted,
            seconds: serial_seconds,
            ms_per_mounted_state: serial_seconds * 1e3 / serial_mounted.max(1) as f64,
        },
        floor_ms,
        floor,
        recorder,
        memory: MemoryReport {
            peak_rss_before_engine_kib,
            peak_rss_after_engine_kib,
            peak_rss_engine_half_kib,
            half_states: half.len(),
            hwm_reset,
            malloc_pinned,
        },
        load_average: [load_start, load_average()],
        outcomes,
        disagreements,
        first_disagreement,
    })
}

/// The naive pipeline over every state, serially; returns the outcomes, the wall time and
/// where it went.
#[allow(clippy::too_many_arguments)]
fn naive_pipeline(
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

/// bob's engine with its defaults over `states`, in its own scratch subdirectory.
#[allow(clippy::too_many_arguments)]
fn engine(
    subject: &Subject,
    states: &[CrashState],
    work: &Path,
    name: &str,
    jobs: usize,
    options: &BenchOptions,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<Vec<StateResult>, Error> {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let engine = EngineOptions { jobs: jobs.max(1), timeouts: options.timeouts, work_dir: dir };
    check::run_states(subject, states, &engine, &|d, t| progress.state_done(d, t), cancel).map_err(
        |e| match e {
            check::Error::Interrupted => Error::Interrupted,
            e => e.into(),
        },
    )
}

/// The floor: mean mount + umount time of an unchanged copy of the base image on one loop
/// device (after one untimed mount that replays its journal), plus the fsck and loop
/// attach times alone.
fn floor(
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

    let dev_str = dev.path().to_string_lossy().into_owned();
    let mut args = config.fsck[1..].to_vec();
    args.push(&dev_str);
    let mut fsck = Vec::new();
    for _ in 0..BREAKDOWN_ROUNDS {
        let t = Instant::now();
        cmd::run(config.fsck[0], &args, options.timeouts.fsck)
            .map_err(crate::device::Error::from)?;
        fsck.push(ms(t.elapsed()));
    }
    dev.detach()?;

    // The same rounds with the unchanged image served by bob's FUSE disk (a view with an
    // empty overlay), to separate what FUSE costs from what recovery and fsck cost.
    let fuse_dir = work.join("floor-disk");
    std::fs::create_dir_all(&fuse_dir).map_err(io_err(&fuse_dir))?;
    let server = DiskServer::start(&fuse_dir, 2)?;
    let unchanged = StateId { epoch: 0, applied: Vec::new() };
    let overlay = OverlayBuilder::new(&subject.trace, &subject.epochs).state(&unchanged);
    let view = Arc::new(CrashView::new(subject.base.clone(), subject.trace.clone(), overlay));
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

/// The write-heavy workload: `bytes` spread over [`RECORDER_FILES`] files in 1 MiB
/// writes, then every file fsynced. Returns its wall time.
fn write_heavy(dir: &Path, bytes: u64) -> Result<Duration, Error> {
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
fn recorder_bench(
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
            let rss_at_start = status_kib("VmRSS:");
            reset_hwm();
            let timed = write_heavy(&mnt, options.recorder_bytes);
            let unmounted = m.unmount();
            let trace = disk.stop();
            rss_growth = rss_growth.max(status_kib("VmHWM:").saturating_sub(rss_at_start));
            let detached = dev.detach();
            drop(server);
            recording.push(timed?.as_secs_f64());
            unmounted?;
            detached?;
            // Sealed and mapped, as a recording's trace is; not needed further.
            log_bytes = trace?.file.as_ref().map_or(0, |f| f.byte_len());
            let _ = std::fs::remove_file(&log);
        }
        drop(disk);
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
