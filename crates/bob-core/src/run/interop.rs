//! Traces that come from outside the property workloads: a dm-log-writes log imported as
//! a trace directory (`bob import`), blktrace output decoded into block-request
//! annotations, and any command's block I/O recorded (`bob record`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{environment, scratch_dir, Error};
use crate::fs::{FsConfig, Timeouts};
use crate::output::{AnnotationCounts, BlktraceReport, ImportReport, TraceSummary};
use crate::record::custom::{self, Annotate, Backend, CommandRequest};
use crate::trace::blktrace::{self, Annotation, BlockRequest};
use crate::trace::log::{read_log_file, write_log_file};
use crate::trace::sidecar::{BaseImageInfo, Sidecar, SIDECAR_FORMAT};
use crate::trace::TraceDir;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// What the sidecar keeps for a log imported without a workload: no ops to judge.
#[derive(Serialize)]
struct ImportedWorkload {
    name: String,
    property: Option<String>,
    setup: [(); 0],
    ops: [(); 0],
    drain: [(); 0],
}

/// Imports the dm-log-writes log `log` as the trace directory `out`, with a sparse copy
/// of `base` (the image the log applies to) when given, recorded on `config` (if known).
pub fn import_log(
    log: &Path,
    out: &Path,
    base: Option<&Path>,
    config: Option<&FsConfig>,
) -> Result<ImportReport, Error> {
    let trace = read_log_file(log)?;
    std::fs::create_dir_all(out).map_err(io(out))?;
    let base_image = match base {
        Some(base) => {
            let dest = out.join("base.img");
            crate::files::copy_sparse(base, &dest)
                .map_err(|e| Error::Invalid(format!("{}: {e}", base.display())))?;
            BaseImageInfo {
                file: "base.img".into(),
                size_bytes: std::fs::metadata(&dest).map_err(io(&dest))?.len(),
                blake3: crate::files::file_digest(&dest).map_err(io(&dest))?,
            }
        }
        // An empty file name says the log came without its base image: `bob log --replay`
        // works on it, `bob check` asks for --base.
        None => BaseImageInfo { file: String::new(), size_bytes: 0, blake3: String::new() },
    };
    let workload = ImportedWorkload {
        name: format!("imported: {}", log.display()),
        property: None,
        setup: [],
        ops: [],
        drain: [],
    };
    let sidecar = Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: crate::host::kernel_release(),
        config: config.map_or("unknown", |c| c.name).to_owned(),
        property: None,
        workload: serde_json::to_value(workload).map_err(|e| {
            Error::Invalid(format!("{}: the sidecar's workload: {e}", out.display()))
        })?,
        observed: serde_json::json!({ "inos": {} }),
        base_image,
        ops: Vec::new(),
        roles: Vec::new(),
        schedule: None,
        recording: None,
        fua: None,
    };
    TraceDir::write(out, &trace, &sidecar)?;
    Ok(ImportReport {
        schema_version: crate::report::SCHEMA_VERSION,
        summary: TraceSummary::of(&trace),
        out: out.display().to_string(),
        base_image: !sidecar.base_image.file.is_empty(),
    })
}

/// Decodes blktrace output `src` (per-CPU files, one file, or blkparse text). With `out`:
/// annotates the trace directory there (METADATA flags, and the requests in its sidecar),
/// or, where `out` holds no trace, writes the requests to `out/block-requests.json`.
pub fn import_blktrace(src: &Path, out: Option<&Path>) -> Result<BlktraceReport, Error> {
    let requests = blktrace::read_source(src)?;
    let mut annotated = None;
    if let Some(out) = out {
        if TraceDir::log_path(out).is_file() {
            let mut td = TraceDir::open(out)?;
            let a = blktrace::annotate(&mut td.trace, &requests);
            write_log_file(&TraceDir::log_path(out), &td.trace)?;
            save_block_requests(out, "blktrace", &requests, &a)?;
            annotated = Some(AnnotationCounts::from(&a));
        } else {
            std::fs::create_dir_all(out).map_err(io(out))?;
            let path = out.join("block-requests.json");
            write_json(&path, &requests)?;
        }
    }
    Ok(BlktraceReport {
        schema_version: crate::report::SCHEMA_VERSION,
        requests,
        annotated,
        source: src.display().to_string(),
    })
}

fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text + "\n").map_err(io(path))
}

/// The sidecar's `block_requests`: the requests and which entry each write matched.
#[derive(Serialize)]
struct BlockRequestsSection<'a> {
    source: &'a str,
    matched_writes: usize,
    unmatched_writes: usize,
    metadata_writes: usize,
    entry_request: Vec<[usize; 2]>,
    requests: &'a [BlockRequest],
}

/// Adds the block requests and their mapping onto entries to the sidecar of the trace
/// directory `dir`, under `block_requests` (the sidecar's reader ignores keys it does not
/// know, so the sidecar stays readable by every bob).
fn save_block_requests(
    dir: &Path,
    source: &str,
    requests: &[BlockRequest],
    annotation: &Annotation,
) -> Result<(), Error> {
    let path = TraceDir::sidecar_path(dir);
    let invalid = |e: serde_json::Error| Error::Invalid(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(invalid)?;
    let section = BlockRequestsSection {
        source,
        matched_writes: annotation.matched,
        unmatched_writes: annotation.unmatched,
        metadata_writes: annotation.metadata,
        entry_request: annotation
            .request_of_entry
            .iter()
            .enumerate()
            .filter_map(|(e, r)| r.map(|r| [e, r]))
            .collect(),
        requests,
    };
    value["block_requests"] = serde_json::to_value(section).map_err(invalid)?;
    write_json(&path, &value)
}

/// What `bob record` asks for.
#[derive(Clone, Debug)]
pub struct RecordCommandOptions {
    /// The configuration to make and mount.
    pub config: FsConfig,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The trace directory to write.
    pub out: PathBuf,
    /// A free loop device to record on, else one is taken.
    pub device: Option<PathBuf>,
    /// The recorder.
    pub backend: Backend,
    /// Block-tracepoint annotations.
    pub annotate: Annotate,
    /// Where scratch directories go (default: the system temp dir).
    pub scratch: Option<PathBuf>,
    /// The recording disk's latency model (`--latency`).
    pub latency: crate::record::latency::Latency,
}

/// What `bob record` recorded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedCommand {
    /// The trace's counts.
    pub summary: TraceSummary,
    /// Seconds the recording took.
    pub seconds: f64,
    /// Block requests the tracepoints saw (when annotation ran).
    pub requests: Option<usize>,
    /// How they matched the trace's writes.
    pub annotated: Option<AnnotationCounts>,
    /// The command's exit code (`None`: killed by a signal). The trace is written either way.
    pub exit_code: Option<i32>,
}

/// Records `opts.command`'s block I/O on a fresh `opts.config` and writes the trace
/// directory (log, sidecar, base image, block requests).
pub fn record_command(opts: &RecordCommandOptions) -> Result<RecordedCommand, Error> {
    if let Some(dev) = &opts.device {
        crate::device::loopdev::vet_user_device(dev, false)
            .map_err(|e| Error::Invalid(e.to_string()))?;
    }
    environment::check(&opts.config)?;
    let work = scratch_dir(opts.scratch.as_deref())?;
    let started = Instant::now();
    let rec = custom::record_command(&CommandRequest {
        config: &opts.config,
        command: &opts.command,
        device: opts.device.as_deref(),
        work_dir: work.path(),
        timeouts: Timeouts::default(),
        annotate: opts.annotate,
        backend: opts.backend.clone(),
        latency: opts.latency,
    })?;
    TraceDir::write(&opts.out, &rec.trace, &rec.sidecar)?;
    let base = opts.out.join("base.img");
    crate::files::copy_sparse(&rec.base_image, &base).map_err(io(&base))?;
    if let (Some(r), Some(a)) = (&rec.requests, &rec.annotation) {
        save_block_requests(&opts.out, "tracefs", r, a)?;
    }
    Ok(RecordedCommand {
        summary: TraceSummary::of(&rec.trace),
        seconds: started.elapsed().as_secs_f64(),
        requests: rec.requests.as_ref().map(Vec::len),
        annotated: rec.annotation.as_ref().map(AnnotationCounts::from),
        exit_code: rec.exit_code,
    })
}

/// Sends a mark to the running `bob record` through its control file.
pub fn send_mark(file: &Path, text: &str) -> Result<(), Error> {
    custom::send_mark(file, text, Duration::from_secs(10))
        .map_err(|e| Error::Invalid(format!("{}: {e}", file.display())))
}
