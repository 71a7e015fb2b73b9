//! Witness directories: everything needed to rebuild one crash state exactly and to see
//! why it fails: the trace (dm-log-writes log + sidecar), the base image (sparse), the
//! state id, the recovered snapshot, the oracle's model states and a one-line story.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::check::{StateCheck, Subject};
use crate::crash::{DiskModel, OverlayBuilder};
use crate::files::copy_sparse;
use crate::image::CrashView;
use crate::trace::sidecar::Sidecar;
use crate::trace::TraceDir;

/// Witness errors, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// I/O on a witness file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A witness file does not parse.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file the witness's replay reads is not the one written with it (its digest in
    /// `state.json` differs): the crash state it would rebuild is not the one found.
    #[error(
        "{path}: changed since the witness was written (blake3 {now:.12}, recorded \
         {recorded:.12}); the witness no longer rebuilds its crash state: run the cell again"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// The digest `state.json` recorded.
        recorded: String,
        /// Its digest now.
        now: String,
    },
}

/// `state.json`: which state this witness is and what was found in it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateRecord {
    /// [`super::SCHEMA_VERSION`] of the document.
    #[serde(default = "super::schema_v1")]
    pub schema_version: u32,
    /// Printable state id (`e3:0-4,6`).
    pub id: String,
    /// Strategy that generated it.
    pub strategy: String,
    /// One-line description of the epoch and writes applied.
    pub description: String,
    /// Outcome name.
    pub outcome: String,
    /// The story or failure detail.
    pub story: String,
    /// Content digest of the state's writes (hex).
    pub digest: String,
    /// Configuration.
    pub config: String,
    /// Property, if any.
    pub property: Option<String>,
    /// The disk model the state is legal under (witnesses written before disk models were
    /// chosen used the study's: 512-byte units, FUA as a barrier).
    #[serde(default = "DiskModel::study")]
    pub disk_model: DiskModel,
    /// For an ordering violation: the earlier op of the property's pair (not persisted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_op: Option<workloads::OpRef>,
    /// ... and the later op (persisted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_op: Option<workloads::OpRef>,
    /// What the repair ladder did, when the kernel would not mount the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<crate::check::Repair>,
    /// The blake3 digest of each file the witness's replay reads (the trace, its sidecar,
    /// the base image, a PM region's log and image), by file name, taken when the witness
    /// was written; [`load`] checks them, so that a file changed since (overwritten by a
    /// careless `--to`, edited, truncated) is named instead of replayed. Empty in
    /// witnesses written before digests were recorded (nothing is checked then).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<String, String>,
}

impl StateRecord {
    /// The record of a checked state of `subject` (one place for what a witness says).
    pub fn of(
        result: &crate::check::StateResult,
        subject: &Subject,
        property: Option<String>,
    ) -> StateRecord {
        StateRecord {
            schema_version: super::SCHEMA_VERSION,
            id: subject.qualify(&result.state.id),
            strategy: result.state.strategy.to_string(),
            description: result.state.id.describe(&subject.trace, &subject.epochs),
            outcome: result.check.outcome.name().into(),
            story: result.check.outcome.detail(),
            digest: result.digest.iter().map(|b| format!("{b:02x}")).collect(),
            config: subject.config.name.into(),
            property,
            disk_model: subject.disk,
            earlier_op: result.check.pair.as_ref().map(|p| p.earlier_op.clone()),
            later_op: result.check.pair.as_ref().map(|p| p.later_op.clone()),
            repair: result.check.repair.clone(),
            files: Default::default(),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Invalid { path: path.to_owned(), message: e.to_string() })?;
    std::fs::write(path, text + "\n").map_err(io(path))
}

/// Writes a witness for one state into `dir` (created; existing files replaced).
pub fn write(
    dir: &Path,
    subject: &Subject,
    sidecar: &Sidecar,
    record: &StateRecord,
    check: &StateCheck,
) -> Result<(), Error> {
    save_trace(dir, subject, sidecar)?;
    let mut record = record.clone();
    for name in replay_inputs(dir, sidecar) {
        let path = dir.join(&name);
        record.files.insert(name, crate::files::file_digest(&path).map_err(io(&path))?);
    }
    let record = &record;
    write_json(&dir.join("state.json"), record)?;
    std::fs::write(dir.join("state.txt"), format!("{}\n", record.id)).map_err(io(dir))?;
    write_json(&dir.join("snapshot.json"), &check.snapshot)?;
    write_json(&dir.join("model.json"), &workloads::model_states(&subject.workload))?;
    let story = format!(
        "{}: {} [{} / {}, state {}]\n",
        record.outcome,
        record.story,
        record.config,
        record.property.as_deref().unwrap_or("-"),
        record.id
    );
    std::fs::write(dir.join("story.txt"), story).map_err(io(dir))?;
    // A kernel crash's evidence is the guest's console (the panic and its backtrace).
    if let crate::check::Outcome::KernelCrash { console, .. } = &check.outcome {
        let kept = dir.join("console.log");
        std::fs::copy(console, &kept).map_err(io(&kept))?;
    }
    Ok(())
}

/// The files of a witness directory that its replay reads (those present of them): the
/// trace, its sidecar, the base image and a PM region's log and image.
fn replay_inputs(dir: &Path, sidecar: &Sidecar) -> Vec<String> {
    let names = [
        TraceDir::LOG_FILE,
        TraceDir::SIDECAR_FILE,
        sidecar.base_image.file.as_str(),
        crate::pm::PM_LOG_FILE,
        crate::pm::PM_BASE_FILE,
    ];
    names.iter().filter(|n| dir.join(n).is_file()).map(|n| n.to_string()).collect()
}

/// Checks the files `record` has digests of against their digests now; the first that
/// differs (or cannot be read) is the error.
pub(crate) fn verify(dir: &Path, record: &StateRecord) -> Result<(), Error> {
    for (name, recorded) in &record.files {
        let path = dir.join(name);
        let now = crate::files::file_digest(&path).map_err(io(&path))?;
        if now != *recorded {
            return Err(Error::Changed { path, recorded: recorded.clone(), now });
        }
    }
    Ok(())
}

/// The files of a previous run's witness in a cell's directory, removed when the new run
/// of the cell has no witness there (a directory's witnesses are its last run's): the
/// state and its evidence (with `bob check`'s checker output and acked marks), the trace
/// and base image, a PM region's, the kernel-crash witness and the other schedules'
/// traces. The cell's journal (`run/`) is not touched.
pub(crate) fn remove_stale(dir: &Path) -> Result<(), Error> {
    let record = dir.join("state.json");
    if !record.is_file() {
        return Ok(());
    }
    // The base image's name is the sidecar's (base.img in every witness bob writes).
    let base = TraceDir::open(dir).ok().map(|t| t.sidecar.base_image.file);
    let mut files = vec![
        "state.json",
        "state.txt",
        "snapshot.json",
        "model.json",
        "story.txt",
        "console.log",
        "checker.txt",
        "acked-marks.txt",
        TraceDir::LOG_FILE,
        TraceDir::SIDECAR_FILE,
        crate::pm::PM_LOG_FILE,
        crate::pm::PM_BASE_FILE,
        "base.img",
    ];
    if let Some(b) = base.as_deref() {
        files.push(b);
    }
    for name in files {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Io { path, source: e });
            }
            _ => {}
        }
    }
    for sub in ["schedules", "kernel-crash"] {
        let path = dir.join(sub);
        match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Io { path, source: e });
            }
            _ => {}
        }
    }
    Ok(())
}

/// A witness loaded back: the subject to rebuild states of, and the recorded state.
pub struct Loaded {
    /// Trace, base image, workload and configuration.
    pub subject: Subject,
    /// The sidecar.
    pub sidecar: Sidecar,
    /// `state.json`.
    pub record: StateRecord,
}

/// Loads a trace directory (trace.log, trace.json, base image) as a [`Subject`] ready to
/// have its crash states rebuilt or checked, under the default disk model (change it with
/// [`Subject::set_disk`]).
pub(crate) fn load_subject(dir: &Path) -> Result<(Subject, Sidecar), Error> {
    let trace_dir = TraceDir::open(dir)
        .map_err(|e| Error::Invalid { path: dir.to_owned(), message: e.to_string() })?;
    let sidecar = trace_dir.sidecar.clone();
    let invalid = |path: &Path, message: String| Error::Invalid { path: path.to_owned(), message };
    let sidecar_path = dir.join("trace.json");
    let config = crate::fs::by_name(&sidecar.config).ok_or_else(|| {
        invalid(&sidecar_path, format!("unknown configuration {:?}", sidecar.config))
    })?;
    let workload: workloads::Workload = serde_json::from_value(sidecar.workload.clone())
        .map_err(|e| invalid(&sidecar_path, format!("workload: {e}")))?;
    let observed: workloads::Observed = serde_json::from_value(sidecar.observed.clone())
        .map_err(|e| invalid(&sidecar_path, format!("observed: {e}")))?;
    let base_path = dir.join(&sidecar.base_image.file);
    let size = std::fs::metadata(&base_path).map_err(io(&base_path))?.len();
    if size != sidecar.base_image.size_bytes {
        return Err(invalid(
            &base_path,
            format!("size {size} does not match the sidecar's {}", sidecar.base_image.size_bytes),
        ));
    }
    let schedule =
        match &sidecar.schedule {
            Some(name) => Some(name.parse().map_err(|e: workloads::ParseScheduleError| {
                invalid(&sidecar_path, e.to_string())
            })?),
            None => None,
        };
    let recorded = crate::check::SubjectParts {
        config,
        workload,
        observed,
        trace: trace_dir.trace,
        spans: sidecar.ops.clone(),
        schedule,
        base_image: base_path,
    };
    let mut subject =
        Subject::load(recorded, DiskModel::default()).map_err(|e| invalid(dir, e.to_string()))?;
    subject.recording = sidecar.recording.unwrap_or(1);
    Ok((subject, sidecar))
}

/// Writes a recorded trace directory: the log, the sidecar and a sparse copy of the base
/// image, so that it can be checked again (`--trace`), sharded, or imported elsewhere.
pub fn save_trace(dir: &Path, subject: &Subject, sidecar: &Sidecar) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    TraceDir::write(dir, &subject.trace, sidecar)
        .map_err(|e| Error::Invalid { path: dir.to_owned(), message: e.to_string() })?;
    let base = dir.join(&sidecar.base_image.file);
    if base != subject.base.path() {
        copy_sparse(subject.base.path(), &base).map_err(io(&base))?;
    }
    if let Some(pm) = &subject.pm {
        pm.save(dir)
            .map_err(|e| Error::Invalid { path: dir.to_owned(), message: e.to_string() })?;
    }
    Ok(())
}

/// A witness's `state.json` alone, without its trace or image.
pub(crate) fn load_record(dir: &Path) -> Result<StateRecord, Error> {
    let state_path = dir.join("state.json");
    let text = std::fs::read_to_string(&state_path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound && dir.is_dir() {
            Error::Invalid {
                path: state_path.clone(),
                message: "missing: no witness here (a cell whose last run found no failing \
                          state keeps none)"
                    .into(),
            }
        } else {
            Error::Io { path: state_path.clone(), source }
        }
    })?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Invalid { path: state_path.clone(), message: e.to_string() })
}

/// Loads a witness (a trace directory with a `state.json`).
///
/// The files its replay reads are checked first against the digests `state.json`
/// recorded ([`verify`]): a changed one is named, never replayed.
pub fn load(dir: &Path) -> Result<Loaded, Error> {
    let record = load_record(dir)?;
    verify(dir, &record)?;
    let (mut subject, sidecar) = load_subject(dir)?;
    subject.set_disk(record.disk_model);
    Ok(Loaded { subject, sidecar, record })
}

/// [`load`], and the recorded state's id parsed against the witness's trace.
pub(crate) fn load_with_state(dir: &Path) -> Result<(Loaded, crate::crash::StateId), Error> {
    let loaded = load(dir)?;
    let id = loaded
        .subject
        .state_id(&loaded.record.id)
        .map_err(|e| Error::Invalid { path: dir.join("state.json"), message: e.to_string() })?;
    Ok((loaded, id))
}

/// Where a witness keeps the traces of its cell's other drain schedules and recordings
/// (those with a failing state of their own to replay): `<witness>/schedules/<label>/`,
/// the label being the prefix of their state ids (`syncfs`, `syncfs.2`).
pub(crate) fn schedule_dir(witness: &Path, label: &str) -> PathBuf {
    witness.join("schedules").join(label)
}

/// Loads the witness in `dir` to rebuild state `id`: with its own trace, or, when `id`
/// names another drain schedule or recording (`syncfs/e3:0-4`, `syncfs.2/e3:0-4`) whose
/// trace the witness keeps (see [`schedule_dir`]), with that one. The state record stays
/// the witness's own.
pub(crate) fn load_for(dir: &Path, id: Option<&str>) -> Result<Loaded, Error> {
    let mut loaded = load(dir)?;
    if let Some((Some(name), _)) = id.map(crate::check::split_schedule) {
        let other = schedule_dir(dir, name);
        if loaded.subject.label().as_deref() != Some(name) && other.join("trace.json").exists() {
            let (subject, sidecar) = load_subject(&other)?;
            loaded.subject = subject;
            loaded.sidecar = sidecar;
        }
    }
    Ok(loaded)
}

/// Rebuilds the witness's crash image (before recovery) into the file `to`.
pub fn replay(loaded: &Loaded, to: &Path) -> Result<(), Error> {
    replay_state(loaded, &loaded.record.id, to)
}

/// Rebuilds crash state `id` of the witness's trace (any state, not only the recorded
/// one) into the file `to`.
fn replay_state(loaded: &Loaded, id: &str, to: &Path) -> Result<(), Error> {
    let subject = &loaded.subject;
    let id = subject.state_id(id).map_err(|e| Error::Invalid {
        path: PathBuf::from(if id == loaded.record.id { "state.json" } else { "--state" }),
        message: e.to_string(),
    })?;
    let overlay = OverlayBuilder::new(&subject.trace, &subject.epochs).state(&id);
    let view = CrashView::new(subject.base.clone(), subject.trace.clone(), overlay);
    view.materialize(to).map_err(io(to))?;
    if let (Some(pm), Some(cut)) = (&subject.pm, &id.pm) {
        // The second device's image, where checking an image looks for it.
        let pm_to = crate::check::pm_image_path(to);
        std::fs::write(&pm_to, pm.image(cut)).map_err(io(&pm_to))?;
    }
    Ok(())
}
