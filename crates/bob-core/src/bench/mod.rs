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
//!    [`crate::files::copy_sparse`]) on an evenly spaced sample of the states, so that the
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
//! The headline ratios (`ratio_covered`, `ratio_mounted`, `naive_states_per_s`) are
//! against the sparse-copy naive pipeline, the one a competent engineer would script;
//! the whole-copy variant is reported apart as the strawman it is (`naive_full_copy`).
//! `bob bench --table` ([`run_table_bench`]) times a whole table instead, and `bob bench
//! --stream-states N` ([`run_stream_bench`]) streams N states of one trace without
//! mounting, to show memory flat in the number of states.
//!
//! The naive and engine verdicts must agree state by state (outcome name, and the story
//! of a violation); [`BenchReport::first_disagreement`] names the first state where they
//! do not. Every loop device, mount and FUSE disk is a guard from [`crate::device`], so
//! each phase gives everything back on every exit path.

mod conquest;
mod engine;
mod floor;
mod fsbench;
mod kernels;
mod metabench;
mod naive;
pub mod recall;
mod recorder;
mod report;
mod stats;
mod stream;
mod table;
mod valorbench;

pub use conquest::{
    run_conquest_bench, ConquestBenchReport, SmallFileRun, FILES as CONQUEST_FILES,
};
pub use fsbench::{
    run_fs_bench, FsBenchError, FsBenchReport, FsRun, Postmark, PostmarkRun, ITERATIONS,
};
pub use kernels::{KernelBench, KernelBenchReport, KernelRatio};
pub(crate) use metabench::meta_bench_designs;
pub use metabench::{run_meta_bench, MetaBenchReport, MetaRun, FILES as META_FILES};
pub use report::*;
pub use stream::{run_stream_bench, StreamOptions};
pub use table::{
    run_full_table_bench, run_table_bench, FullTableOptions, FullTableReport, RecordingRun,
    SampleRun, TableBenchReport, TableRun,
};
pub use valorbench::{run_valor_bench, ValorBenchReport, ValorRun, VALOR_PAGES};

// Each report prints as text or JSON (`bob bench --format`).
crate::output::text_and_json!(
    BenchReport: "a benchmark",
    TableBenchReport: "a table benchmark",
    FullTableReport: "a whole-table benchmark",
    FsBenchReport: "a file-system benchmark",
    MetaBenchReport: "a metadata benchmark",
    ValorBenchReport: "a transaction benchmark",
    ConquestBenchReport: "a Conquest benchmark",
    KernelBenchReport: "a benchmark of several kernels",
);

use crate::host::{load_average, peak_rss_kib, pin_mmap_threshold, reset_hwm, Machine};
use floor::floor;
use naive::naive_pipeline;
use recorder::recorder_bench;
use report::describe;
use stats::{per_s, ratio, spaced};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use workloads::Property;

use crate::check::{self, Outcome, StateResult, Subject};
use crate::crash::{self, CrashState, Limits, OverlayBuilder, Strategy};
use crate::fs::{FsConfig, Timeouts};
use crate::record::{self, RecordRequest};
use crate::report::mounted_checks;
use crate::run::{Progress, WorkDir};
use crate::trace::EntryKind;

/// Mount + umount rounds of the floor unless told otherwise.
pub const DEFAULT_FLOOR_RUNS: usize = 50;

/// Which benchmark of the file systems' own speed under a latency model measures a set
/// of configurations: a property of the configurations asked for, not of their names'
/// spelling at the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LatencyBench {
    /// Conquest against its all-disk control ([`run_conquest_bench`]).
    Conquest,
    /// The soft-updates paper's metadata microbenchmarks on these designs
    /// ([`run_meta_bench`]).
    Metadata(Vec<researchfs::Design>),
    /// Valor's serial overwrite with and without transactions ([`run_valor_bench`]).
    Valor,
    /// PostMark-like runs of the journaling designs ([`run_fs_bench`]).
    Journaling,
}

/// The configurations [`LatencyBench::Journaling`] measures.
const JOURNALING_MEASURED: [&str; 5] =
    ["optfs", "journal-flush", "xsyncfs", "xsyncfs-async", "journal-sync"];

impl LatencyBench {
    /// The benchmark that measures `configs`: Conquest's if Conquest is among them, the
    /// metadata benchmarks if a soft-updates design is (with every other research design
    /// named added to the usual ones), Valor's if Valor alone is named, else the
    /// journaling designs', which measures only [`JOURNALING_MEASURED`].
    pub fn of(configs: &[crate::fs::FsConfig]) -> Result<LatencyBench, String> {
        if configs.iter().any(|c| c.name == "conquest") {
            return Ok(LatencyBench::Conquest);
        }
        if configs.iter().any(|c| c.name.starts_with("softupdates")) {
            let mut designs = meta_bench_designs();
            for c in configs {
                match c.design() {
                    Some(d) if !designs.contains(&d) => designs.push(d),
                    Some(_) => {}
                    None => {
                        return Err(format!(
                            "the metadata benchmarks measure researchfs designs; {} is a \
                             kernel configuration",
                            c.name
                        ))
                    }
                }
            }
            return Ok(LatencyBench::Metadata(designs));
        }
        if !configs.is_empty() && configs.iter().all(|c| c.name == "valor") {
            return Ok(LatencyBench::Valor);
        }
        match configs.iter().find(|c| !JOURNALING_MEASURED.contains(&c.name)) {
            Some(c) => Err(format!(
                "the latency benchmarks measure {}; {} is not one of them",
                JOURNALING_MEASURED.join(", "),
                c.name
            )),
            None => Ok(LatencyBench::Journaling),
        }
    }
}

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
    /// A table of `bob bench --table` failed (bob or the machine, not a file system).
    #[error(transparent)]
    Table(Box<crate::run::Error>),
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

/// A scratch directory that could not be made, as the error naming the path that failed.
fn work_dir_err(e: crate::run::WorkDirError) -> Error {
    Error::Io { path: e.path, source: e.source }
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
            jobs: crate::host::cores(),
            recorder_bytes: DEFAULT_RECORDER_BYTES,
            timeouts: Timeouts::default(),
            scratch: None,
        }
    }
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
    let params = workload_params(options)?;
    let malloc_pinned = pin_mmap_threshold();
    let load_start = load_average();
    let work = WorkDir::new(options.scratch.as_deref()).map_err(work_dir_err)?;
    let ctx = Phase { options, work: work.path(), progress, cancel };

    let recorded = record_states(&ctx, &params)?;
    let naive = naive_phase(&ctx, &recorded)?;
    let engine = engine_phase(&ctx, &recorded, &naive.sparse_sample)?;

    // Phase 3, the floor.
    progress.phase("floor", options.floor_runs);
    let (floor_seconds, floor) =
        floor(&recorded.subject, &recorded.base_path, work.path(), options, progress, cancel)?;

    // Phase 4, the recorder's overhead.
    let recorder = if options.recorder_bytes > 0 {
        progress.phase("recorder", RECORDER_ROUNDS * 2);
        Some(recorder_bench(&options.config, work.path(), options, progress, cancel)?)
    } else {
        None
    };

    let measured = Measured { recorded, naive, engine, floor_seconds, floor, recorder };
    Ok(measured.report(options, &params, malloc_pinned, load_start))
}

/// Everything the phases measured, before it becomes the report.
struct Measured {
    recorded: BenchRecording,
    naive: NaiveRuns,
    engine: EngineRuns,
    floor_seconds: f64,
    floor: FloorBreakdown,
    recorder: Option<RecorderBench>,
}

impl Measured {
    /// The report: the figures, the rates and ratios derived from them, the verdicts
    /// compared state by state, and what the machine was like.
    fn report(
        self,
        options: &BenchOptions,
        params: &workloads::Params,
        malloc_pinned: bool,
        load_start: f64,
    ) -> BenchReport {
        let Measured { recorded, naive, engine, floor_seconds, floor, recorder } = self;
        let (disagreements, first_disagreement) =
            compare_verdicts(&recorded.states, &naive, &engine);
        let BenchRecording { subject, states, .. } = recorded;
        let figures = Figures {
            naive: per_s(naive.indices.len(), naive.seconds),
            sparse: per_s(naive.sparse_sample.len(), naive.sparse_seconds),
            covered: per_s(states.len(), engine.seconds),
            mounted: per_s(engine.states_mounted, engine.seconds),
            floor_ms: floor_seconds * 1e3 / options.floor_runs as f64,
            ms_per_mounted: engine.seconds * 1e3 / engine.states_mounted.max(1) as f64,
        };
        BenchReport {
            engine_states_covered_per_s: figures.covered,
            engine_states_mounted_per_s: figures.mounted,
            floor_mounts_per_s: per_s(options.floor_runs, floor_seconds),
            // The headline baseline is the sparse-copy naive pipeline.
            naive_states_per_s: figures.sparse,
            ratio_covered: ratio(figures.covered, figures.sparse),
            ratio_mounted: ratio(figures.mounted, figures.sparse),
            cost_vs_floor: ratio(figures.ms_per_mounted, figures.floor_ms),
            cost_vs_fuse_floor: ratio(figures.ms_per_mounted, floor.fuse_mount_umount_ms_median),
            recorder_overhead: recorder
                .as_ref()
                .map_or(0.0, |r| ratio(r.recording_seconds, r.plain_seconds)),
            verdicts_agree: disagreements == 0,
            config: options.config.name.into(),
            property: options.property.name().into(),
            multi_block_bytes: params.multi_block_bytes,
            machine: Machine::here(),
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
            states_mounted: engine.states_mounted,
            states_reads_reused: engine.states_reads_reused,
            engine_ms_per_kernel_mount: engine.seconds * 1e3
                / (engine.states_mounted - engine.states_reads_reused).max(1) as f64,
            naive_states: naive.sparse_sample.len(),
            naive_seconds: naive.sparse_seconds,
            naive_breakdown: naive.sparse_breakdown.clone(),
            naive_sparse: NaiveRun::of(
                naive.sparse_sample.len(),
                naive.sparse_seconds,
                figures.sparse,
                naive.sparse_breakdown,
                figures.covered,
                figures.mounted,
            ),
            naive_full_copy: NaiveRun::of(
                naive.indices.len(),
                naive.seconds,
                figures.naive,
                naive.breakdown,
                figures.covered,
                figures.mounted,
            ),
            engine_seconds: engine.seconds,
            engine_ms_per_mounted_state: figures.ms_per_mounted,
            cost_vs_floor_per_worker: ratio(
                figures.ms_per_mounted * options.jobs.max(1) as f64,
                figures.floor_ms,
            ),
            engine_dedup_seconds: engine.dedup_seconds,
            engine_serial: engine.serial,
            floor_ms: figures.floor_ms,
            floor,
            recorder,
            memory: MemoryReport { hwm_reset: engine.hwm_reset, malloc_pinned, ..engine.memory },
            load_average: [load_start, load_average()],
            outcomes: engine.outcomes,
            disagreements,
            first_disagreement,
        }
    }
}

/// What every phase of one benchmark run shares.
struct Phase<'a> {
    options: &'a BenchOptions,
    /// The run's scratch directory.
    work: &'a Path,
    progress: &'a dyn Progress,
    cancel: &'a AtomicBool,
}

impl Phase<'_> {
    fn interrupted(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// The workload's parameters, with the options' multi-block size; the options checked.
fn workload_params(options: &BenchOptions) -> Result<workloads::Params, Error> {
    if options.floor_runs == 0 {
        return Err(Error::Options("the floor needs at least one run".into()));
    }
    params_with_multi_block(&options.config, options.multi_block_bytes)
}

/// The configuration's workload parameters with `--multi-block-bytes` applied, checked to be
/// a positive multiple of the block size.
pub(crate) fn params_with_multi_block(
    config: &crate::fs::FsConfig,
    multi_block_bytes: Option<u64>,
) -> Result<workloads::Params, Error> {
    let mut params = config.workload_params();
    if let Some(m) = multi_block_bytes {
        if m == 0 || m % params.block_size != 0 {
            return Err(Error::Options(format!(
                "multi-block size {m} is not a positive multiple of the block size {}",
                params.block_size
            )));
        }
        params.multi_block_bytes = m;
    }
    Ok(params)
}

/// The recorded workload and its crash states, which every phase measures.
struct BenchRecording {
    subject: Subject,
    base_path: PathBuf,
    states: Vec<CrashState>,
}

/// Records `property`'s workload on `config` once, in `work/record`: the one recording a
/// benchmark measures (the engine bench and `--stream-states` share it). Returns the
/// workload with its recording.
pub(crate) fn record_property(
    config: &crate::fs::FsConfig,
    property: workloads::Property,
    params: &workloads::Params,
    work: &std::path::Path,
    timeouts: crate::fs::Timeouts,
) -> Result<(workloads::Workload, record::Recording), Error> {
    let workload = workloads::workload_for(property, params);
    let record_dir = work.join("record");
    std::fs::create_dir_all(&record_dir).map_err(io_err(&record_dir))?;
    let recording = record::record(&RecordRequest {
        config,
        workload: &workload,
        device: None,
        work_dir: &record_dir,
        timeouts,
        setup: None,
        recorder: record::Recorder::Fuse,
    })?;
    Ok((workload, recording))
}

/// Records the workload once and generates its states once (the default strategies).
fn record_states(ctx: &Phase<'_>, params: &workloads::Params) -> Result<BenchRecording, Error> {
    let options = ctx.options;
    ctx.progress.phase("recording", 0);
    let (workload, recording) =
        record_property(&options.config, options.property, params, ctx.work, options.timeouts)?;
    if ctx.interrupted() {
        return Err(Error::Interrupted);
    }
    let base_path = recording.base_image.clone();
    let (subject, _) = crate::run::subject_of(
        options.config.clone(),
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
            options.config.name
        )));
    }
    Ok(BenchRecording { subject, base_path, states })
}

/// What the two naive variants found and took.
struct NaiveRuns {
    /// The states the whole-copy variant checked (all, or an evenly spaced sample).
    indices: Vec<usize>,
    outcomes: Vec<Outcome>,
    seconds: f64,
    breakdown: NaiveBreakdown,
    /// The states the sparse-copy variant checked.
    sparse_sample: Vec<usize>,
    sparse_outcomes: Vec<Outcome>,
    sparse_seconds: f64,
    sparse_breakdown: NaiveBreakdown,
}

/// Phase 1, the naive pipeline: whole copies on the sample the options ask for, then
/// sparse copies on at most [`SPARSE_SAMPLE`] states.
fn naive_phase(ctx: &Phase<'_>, rec: &BenchRecording) -> Result<NaiveRuns, Error> {
    let (states, options) = (&rec.states, ctx.options);
    let indices = spaced(states.len(), options.naive_sample.unwrap_or(usize::MAX));
    ctx.progress.phase("naive", indices.len());
    let naive_states: Vec<&CrashState> = indices.iter().map(|&i| &states[i]).collect();
    let whole_copy = |from: &Path, to: &Path| std::fs::copy(from, to).map(drop);
    let (outcomes, seconds, breakdown) = naive_pipeline(
        &rec.subject,
        &rec.base_path,
        &naive_states,
        whole_copy,
        ctx.work,
        options,
        ctx.progress,
        ctx.cancel,
    )?;
    let sparse_sample = spaced(states.len(), SPARSE_SAMPLE);
    ctx.progress.phase("naive-sparse", sparse_sample.len());
    let sampled: Vec<&CrashState> = sparse_sample.iter().map(|&i| &states[i]).collect();
    let (sparse_outcomes, sparse_seconds, sparse_breakdown) = naive_pipeline(
        &rec.subject,
        &rec.base_path,
        &sampled,
        crate::files::copy_sparse,
        ctx.work,
        options,
        ctx.progress,
        ctx.cancel,
    )?;
    Ok(NaiveRuns {
        indices,
        outcomes,
        seconds,
        breakdown,
        sparse_sample,
        sparse_outcomes,
        sparse_seconds,
        sparse_breakdown,
    })
}

/// What the engine's runs found and took.
struct EngineRuns {
    results: Vec<StateResult>,
    seconds: f64,
    states_mounted: usize,
    /// Distinct states that reuse by reads kept from the kernel.
    states_reads_reused: usize,
    dedup_seconds: f64,
    serial: EngineSerial,
    /// The peak-RSS figures (`hwm_reset` and `malloc_pinned` are filled in by the caller).
    memory: MemoryReport,
    hwm_reset: bool,
    outcomes: BTreeMap<String, usize>,
}

/// Phase 2, the engine: first what it does before it mounts anything (every state's
/// overlay and digest, the dedup key), timed alone to show how it grows with the trace;
/// then all states, then every other state, each with the peak mark reset first; then
/// one worker on the sparse-copy sample.
fn engine_phase(
    ctx: &Phase<'_>,
    rec: &BenchRecording,
    sparse_sample: &[usize],
) -> Result<EngineRuns, Error> {
    let (subject, states, options) = (&rec.subject, &rec.states, ctx.options);
    let started = Instant::now();
    let builder = OverlayBuilder::new(&subject.trace, &subject.epochs);
    for state in states {
        std::hint::black_box(builder.state(&state.id).digest(&subject.trace));
    }
    drop(builder);
    let dedup_seconds = started.elapsed().as_secs_f64();

    // The half spans the same epochs (and overlay sizes) as the whole list and differs
    // from it only in the number of states.
    let check = |states: &[CrashState], name: &str, jobs: usize| {
        engine::check_states(
            subject,
            states,
            ctx.work,
            name,
            jobs,
            options,
            ctx.progress,
            ctx.cancel,
        )
    };
    let peak_rss_before_engine_kib = peak_rss_kib();
    ctx.progress.phase("engine", states.len());
    let mut hwm_reset = reset_hwm();
    let started = Instant::now();
    let results = check(states, "engine", options.jobs)?;
    let seconds = started.elapsed().as_secs_f64();
    let peak_rss_after_engine_kib = peak_rss_kib();
    let half: Vec<CrashState> = states.iter().step_by(2).cloned().collect();
    ctx.progress.phase("engine-half", half.len());
    hwm_reset &= reset_hwm();
    check(&half, "engine-half", options.jobs)?;
    let peak_rss_engine_half_kib = peak_rss_kib();

    // Its cost per mounted state without the parallel speed-up.
    let sampled: Vec<CrashState> = sparse_sample.iter().map(|&i| states[i].clone()).collect();
    ctx.progress.phase("engine-serial", sampled.len());
    let started = Instant::now();
    let serial = check(&sampled, "engine-serial", 1)?;
    let serial_seconds = started.elapsed().as_secs_f64();
    let serial_mounted = mounted(&serial);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for e in &results {
        *outcomes.entry(e.check.outcome.name().to_owned()).or_default() += 1;
    }
    Ok(EngineRuns {
        states_mounted: mounted(&results),
        states_reads_reused: mounted_checks(&results).filter(|c| c.reads_reused).count(),
        results,
        seconds,
        dedup_seconds,
        serial: EngineSerial {
            states: sampled.len(),
            states_mounted: serial_mounted,
            seconds: serial_seconds,
            ms_per_mounted_state: serial_seconds * 1e3 / serial_mounted.max(1) as f64,
            steps: report::StepMeans::of(serial.iter().filter_map(|r| r.check.steps.as_ref())),
        },
        memory: MemoryReport {
            peak_rss_before_engine_kib,
            peak_rss_after_engine_kib,
            peak_rss_engine_half_kib,
            half_states: half.len(),
            hwm_reset: false,
            malloc_pinned: false,
        },
        hwm_reset,
        outcomes,
    })
}

/// How many of `results` were mounted (the others shared a mounted state's verdict).
fn mounted(results: &[StateResult]) -> usize {
    mounted_checks(results).count()
}

/// The states where a naive variant and the engine disagree: how many, and the earliest.
fn compare_verdicts(
    states: &[CrashState],
    naive: &NaiveRuns,
    engine: &EngineRuns,
) -> (usize, Option<Disagreement>) {
    let results = &engine.results;
    let mut disagreements = 0;
    let mut first_disagreement = None;
    for (&i, n) in naive.indices.iter().zip(&naive.outcomes) {
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
    for (&i, n) in naive.sparse_sample.iter().zip(&naive.sparse_outcomes) {
        let e = &results[i].check.outcome;
        if !same_verdict(n, e) {
            disagreements += 1;
            if first_disagreement.as_ref().is_none_or(|d: &Disagreement| d.index > i) {
                first_disagreement = Some(Disagreement {
                    index: i,
                    state: states[i].id.to_string(),
                    naive: format!("(sparse copy) {}", describe(n)),
                    engine: describe(e),
                });
            }
        }
    }
    (disagreements, first_disagreement)
}

/// The rates and costs the report derives from the phases.
struct Figures {
    /// States per second: whole-copy naive, sparse-copy naive, engine (covered and
    /// mounted).
    naive: f64,
    sparse: f64,
    covered: f64,
    mounted: f64,
    /// Milliseconds: one floor mount + umount, one engine-mounted state.
    floor_ms: f64,
    ms_per_mounted: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(names: &[&str]) -> Vec<crate::fs::FsConfig> {
        names.iter().map(|n| crate::fs::by_name(n).unwrap_or_else(|| panic!("{n}"))).collect()
    }

    #[test]
    fn the_latency_bench_is_the_one_of_the_configurations_named() {
        let of = |names: &[&str]| LatencyBench::of(&configs(names));
        assert_eq!(of(&["conquest", "optfs"]), Ok(LatencyBench::Conquest));
        let Ok(LatencyBench::Metadata(designs)) = of(&["softupdates", "valor"]) else {
            panic!("{:?}", of(&["softupdates", "valor"]))
        };
        assert!(designs.contains(&researchfs::Design::Valor), "{designs:?}");
        assert!(designs.contains(&researchfs::Design::Softupdates), "{designs:?}");
        let kernel = of(&["softupdates", "ext4-ordered"]).unwrap_err();
        assert!(kernel.contains("ext4-ordered is a kernel configuration"), "{kernel}");
        assert_eq!(of(&["valor"]), Ok(LatencyBench::Valor));
        assert_eq!(of(&["optfs", "journal-flush"]), Ok(LatencyBench::Journaling));
        assert_eq!(of(&[]), Ok(LatencyBench::Journaling));
        let other = of(&["optfs", "ext2"]).unwrap_err();
        assert!(other.contains("ext2 is not one of them") && !other.contains("--"), "{other}");
    }
}
