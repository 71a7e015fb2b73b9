//! Recordings made once and checked many times. `bob table --record-only` records every
//! cell's workload under every drain schedule and saves the traces as a trace set;
//! `bob table --traces` (and `bob run --traces`) check those traces instead of recording.
//! Shards must split one recording: a shard that records afresh explores the states of
//! another trace, and merging such shards gives a cell that is no partition of any trace.
//!
//! The layout of a trace set `DIR` (what CI uploads as one artifact):
//!
//! ```text
//! DIR/traces.json                                  the manifest (output::TraceSet)
//! DIR/traces/<config>/<property>/<schedule>/       one trace directory per drain schedule
//!     trace.log  trace.json  base.img              (as `bob run --save-trace` writes them)
//! ```
//!
//! Disk models share the recordings (a model only cuts a trace into epochs differently),
//! so a set holds one recording per cell and schedule whatever `--atomic-write-unit` is.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use workloads::Schedule;

use super::{
    cell_schedules, environment, record_fresh, scratch_dir, Error, RunOptions, TableOptions,
    TableProgress,
};
use crate::crash::DiskModel;
use crate::output::{RecordedCell, RecordedTrace, TraceSet};
use crate::report::witness;

/// File name of a trace set's manifest.
pub(crate) const MANIFEST: &str = "traces.json";
/// The directory of a trace set that holds the trace directories.
pub(crate) const TRACES: &str = "traces";

/// Where a cell's trace directories live in a trace set, relative to the set.
pub(crate) fn cell_traces(config: &str, property: &str) -> PathBuf {
    Path::new(TRACES).join(config).join(property)
}

/// Records every cell of the table (each configuration that can run here x each
/// property) under each of its drain schedules, without checking a state, and saves the
/// traces with their manifest into `dir` (replacing an earlier set there):
/// `dir/traces.json` and `dir/traces/<config>/<property>/<schedule>/` (a trace directory
/// with its base image, as `--save-trace` writes one).
pub fn record_table(
    opts: &TableOptions,
    dir: &Path,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<TraceSet, Error> {
    if let Some(c) = opts.configs.iter().find(|c| environment::unavailable_here(c).is_none()) {
        environment::check(c)?;
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    // An earlier set's cells must not linger beside this one's; a `traces` directory that
    // is no set's (no manifest beside it) is the user's, and stays.
    let traces = dir.join(TRACES);
    if traces.exists() && !dir.join(MANIFEST).is_file() {
        return Err(Error::Invalid(format!(
            "{}: exists and is not a trace set's (no {MANIFEST} beside it); choose another --out",
            traces.display()
        )));
    }
    match std::fs::remove_dir_all(&traces) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&traces)(e)),
        _ => {}
    }
    std::fs::create_dir_all(&traces).map_err(io(&traces))?;
    let work = scratch_dir(opts.cell.explore.scratch.as_deref())?;
    let mut set = TraceSet {
        schema_version: crate::report::SCHEMA_VERSION,
        kernel: crate::host::kernel_release(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        configs: opts.configs.iter().map(|c| c.name.to_owned()).collect(),
        properties: opts.properties.iter().map(|p| p.name().to_owned()).collect(),
        schedules: opts.cell.schedules.iter().map(|s| s.name().to_owned()).collect(),
        cells: Vec::new(),
    };
    // The manifest first (with no cell yet), so that an interrupted recording is still
    // known as a set (and replaced by the next), and lists only what was saved whole.
    let manifest = dir.join(MANIFEST);
    write_manifest(&manifest, &set)?;
    let mut started = 0;
    for config in &opts.configs {
        let unavailable = environment::unavailable_here(config);
        for &property in &opts.properties {
            progress.cell_started(started, &format!("{} / {}", config.name, property.name()));
            started += 1;
            let mut cell = RecordedCell {
                config: config.name.into(),
                property: property.name().into(),
                unavailable: unavailable.clone(),
                schedules: Vec::new(),
            };
            // A property that does not apply is not recorded: its cell is
            // `not-applicable` whatever the set holds.
            if unavailable.is_none() && config.applies(property) {
                let run = RunOptions { config: config.clone(), property, ..opts.cell.clone() };
                cell.schedules =
                    record_cell(&run, dir, &work, progress, cancel).map_err(|e| Error::Cell {
                        config: config.name.into(),
                        property: property.name().into(),
                        source: Box::new(e),
                    })?;
            }
            set.cells.push(cell);
        }
    }
    write_manifest(&manifest, &set)?;
    Ok(set)
}

fn write_manifest(path: &Path, set: &TraceSet) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(set)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(|source| Error::Io { path: path.to_owned(), source })
}

/// Records one cell under each of its schedules into the set `dir`.
fn record_cell(
    opts: &RunOptions,
    dir: &Path,
    work: &super::WorkDir,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<Vec<RecordedTrace>, Error> {
    let schedules = cell_schedules(&opts.config, &opts.schedules);
    if schedules.is_empty() {
        return Err(super::no_schedule(opts));
    }
    // `--recordings N` records each schedule N times (`<schedule>.2`, ... beside the
    // first, where `--trace` finds them); `auto` once, as it decides on checked states,
    // but as often as a flip history asks for a schedule it saw flip.
    let mut out = Vec::with_capacity(schedules.len());
    let settle = |s| opts.settling_recordings(s);
    for planned in super::recordings::fresh(&schedules, opts.recordings, settle) {
        let (Some(schedule), recording) = (planned.schedule, planned.recording) else { continue };
        if cancel.load(Ordering::Relaxed) {
            return Err(crate::check::Error::Interrupted.into());
        }
        // A scratch per recording, removed once its trace is saved: the set is what stays.
        let scratch = work.path().join("record");
        std::fs::create_dir_all(&scratch)
            .map_err(|source| Error::Io { path: scratch.clone(), source })?;
        let (subject, mut sidecar, _) =
            record_fresh(opts, Some(schedule), DiskModel::default(), &scratch, progress)?;
        sidecar.recording = (recording > 1).then_some(recording);
        let label = crate::check::recording_label(schedule.name(), recording);
        let rel = cell_traces(opts.config.name, opts.property.name()).join(label);
        witness::save_trace(&dir.join(&rel), &subject, &sidecar)?;
        out.push(RecordedTrace {
            schedule: schedule.name().into(),
            trace_digest: subject.trace.digest(),
            entries: subject.trace.entries.len(),
            dir: rel.display().to_string(),
        });
        drop(subject);
        // The recording is saved; its scratch copy is in the work directory, removed
        // with it.
        let _ = std::fs::remove_dir_all(&scratch);
    }
    Ok(out)
}

/// Reads the manifest of the trace set `dir`.
pub fn load_trace_set(dir: &Path) -> Result<TraceSet, Error> {
    let manifest = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        Error::Invalid(format!(
            "{}: {e}: not a trace set (record one with `bob table --record-only --out DIR`)",
            manifest.display()
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: not a trace set: {e}", manifest.display())))
}

/// The directory of a cell's recordings in the set `dir` (what `--trace` takes), after
/// checking that the set recorded the cell under at least one of the `asked` schedules
/// and holds every trace directory its manifest lists for them.
pub fn cell_traces_in(
    set: &TraceSet,
    dir: &Path,
    config: &str,
    property: &str,
    asked: &[Schedule],
) -> Result<PathBuf, Error> {
    let manifest = dir.join(MANIFEST);
    let cell = set.cells.iter().find(|c| c.config == config && c.property == property);
    let Some(cell) = cell.filter(|c| c.unavailable.is_none()) else {
        return Err(Error::Invalid(format!(
            "{}: no recording of {config} / {property}; record it with `bob table \
             --record-only --fs {config} --property {property} --out {}`",
            manifest.display(),
            dir.display()
        )));
    };
    let wanted: Vec<_> =
        cell.schedules.iter().filter(|r| asked.iter().any(|s| s.name() == r.schedule)).collect();
    if wanted.is_empty() {
        let recorded: Vec<&str> = cell.schedules.iter().map(|r| r.schedule.as_str()).collect();
        return Err(Error::Invalid(format!(
            "{}: {config} / {property} was recorded under the schedules {} only, none of those \
             asked",
            manifest.display(),
            recorded.join(",")
        )));
    }
    for r in wanted {
        let trace = dir.join(&r.dir);
        if !trace.join(crate::trace::TraceDir::SIDECAR_FILE).is_file() {
            return Err(Error::Invalid(format!(
                "{}: the manifest lists this trace of {config} / {property} ({}), but it is \
                 missing",
                trace.display(),
                r.schedule
            )));
        }
    }
    Ok(dir.join(cell_traces(config, property)))
}
