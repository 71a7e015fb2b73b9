//! `recovery-idempotent`: a crash during recovery. One crash state of a recorded trace
//! is rebuilt, and its recovery (the mount that replays the journal or log) is recorded
//! through bob's own FUSE disk as a trace of its own: every write and flush recovery
//! issued, in order. That trace's crash states (recovery interrupted, under the same disk
//! model) are each recovered again and judged by the oracle with the promises durable in
//! the original state: the second recovery must reach a state the oracle allows, as the
//! first one did.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{scratch_dir, Error};
use crate::check::{self, OutcomeKind};
use crate::crash::{self, Limits, Strategy};
use crate::device::fusedisk::DiskServer;
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::fs::{Recovery, Timeouts};
use crate::image::CrashView;
use crate::output::RecoveryReport;
use crate::record::RecordingDisk;
use crate::report::witness;

/// What to check.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// A trace directory (`--save-trace`) or a witness.
    pub trace: PathBuf,
    /// The crash state whose recovery is interrupted.
    pub state: String,
    /// At most this many crash states inside recovery.
    pub max_states: Option<usize>,
    /// Step timeouts.
    pub timeouts: Timeouts,
    /// Scratch directory parent.
    pub scratch: Option<PathBuf>,
}

/// Records the recovery of `opts.state` and checks every crash state inside it.
pub fn recovery_idempotent(opts: &RecoveryOptions) -> Result<RecoveryReport, Error> {
    let (subject, _sidecar) = witness::load_subject(&opts.trace)?;
    let config = subject.config.clone();
    if !matches!(config.recovery, Recovery::Mount) {
        return Err(Error::Invalid(format!(
            "{}: recovery is a repairing fsck before the mount, not the mount's own journal \
             replay; recovery-idempotent applies to journaling configurations",
            config.name
        )));
    }
    let id = subject.state_id(&opts.state)?;
    let durable = subject.durable_ops(&id);
    let work = scratch_dir(opts.scratch.as_deref())?;
    let io = |p: &Path| {
        let p = p.to_owned();
        move |source| Error::Io { path: p, source }
    };
    // The crash state before recovery: the base of the recovery's trace.
    let pre = work.path().join("pre-recovery.img");
    let overlay = crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&id);
    CrashView::new(subject.base.clone(), subject.trace.clone(), overlay)
        .materialize(&pre)
        .map_err(io(&pre))?;
    let first = {
        let mnt = work.path().join("first-mnt");
        std::fs::create_dir_all(&mnt).map_err(io(&mnt))?;
        check::check_image(&subject, &pre, &mnt, durable.clone(), &opts.timeouts)?
    };
    // The materialized image is checked in place above; make it again for recording.
    CrashView::new(
        subject.base.clone(),
        subject.trace.clone(),
        crash::OverlayBuilder::new(&subject.trace, &subject.epochs).state(&id),
    )
    .materialize(&pre)
    .map_err(io(&pre))?;
    let disk_img = work.path().join("recovering.img");
    crate::files::copy_sparse(&pre, &disk_img).map_err(io(&disk_img))?;
    let trace = record_recovery(&config, &disk_img, work.path(), &opts.timeouts)?;
    let writes = trace.entries.iter().filter(|e| e.nr_sectors > 0).count();
    let flushes =
        trace.entries.iter().filter(|e| matches!(e.kind(), crate::trace::EntryKind::Flush)).count();
    // Recovery's own writes are recorded on the disk only: no persistent-memory log lies
    // beside the pre-recovery image in the scratch directory.
    let recorded = check::SubjectParts {
        config: subject.config.clone(),
        workload: subject.workload.clone(),
        observed: subject.observed.clone(),
        trace,
        spans: Vec::new(),
        schedule: None,
        base_image: pre.clone(),
    };
    let rsubject = check::Subject::load(recorded, subject.disk)?;
    let limits = Limits { max_states: opts.max_states.or(Some(200)), ..Limits::default() };
    let states = crash::generate(&rsubject.trace, &rsubject.epochs, Strategy::DEFAULT, &limits);
    let builder = crash::OverlayBuilder::new(&rsubject.trace, &rsubject.epochs);
    let mut failed = 0;
    let mut first_failure = None;
    let mut worst = OutcomeKind::Held;
    let img = work.path().join("interrupted.img");
    let mnt = work.path().join("second-mnt");
    std::fs::create_dir_all(&mnt).map_err(io(&mnt))?;
    for st in &states.states {
        let view =
            CrashView::new(rsubject.base.clone(), rsubject.trace.clone(), builder.state(&st.id));
        view.materialize(&img).map_err(io(&img))?;
        let checked = check::check_image(&rsubject, &img, &mnt, durable.clone(), &opts.timeouts)?;
        let kind = checked.outcome.kind();
        if kind.is_failure() {
            failed += 1;
            first_failure.get_or_insert_with(|| format!("{}: {}", st.id, checked.outcome.detail()));
        }
        worst = OutcomeKind::worst([worst, kind]);
    }
    Ok(RecoveryReport {
        schema_version: crate::SCHEMA_VERSION,
        config: config.name.to_owned(),
        state: subject.qualify(&id),
        verdict: worst,
        first_recovery: first.outcome.kind(),
        recovery_writes: writes,
        recovery_flushes: flushes,
        states: states.states.len(),
        failed,
        first_failure,
    })
}

/// Mounts `image` (a crash state) through a logging FUSE disk, so that the mount's
/// journal replay is recorded, and unmounts it: recovery's trace.
fn record_recovery(
    config: &crate::fs::FsConfig,
    image: &Path,
    work: &Path,
    timeouts: &Timeouts,
) -> Result<crate::trace::Trace, Error> {
    let _ = timeouts;
    let fuse_dir = work.join("recovery-disk");
    let mnt = work.join("recovery-mnt");
    for d in [&fuse_dir, &mnt] {
        std::fs::create_dir_all(d).map_err(|source| Error::Io { path: d.clone(), source })?;
    }
    let size = std::fs::metadata(image)
        .map_err(|source| Error::Io { path: image.to_owned(), source })?
        .len();
    let disk = Arc::new(
        RecordingDisk::open(image, size)
            .map_err(|source| Error::Io { path: image.to_owned(), source })?,
    );
    let server = DiskServer::start(&fuse_dir, 1).map_err(crate::record::Error::from)?;
    let file = server.add("recovering.img", disk.clone());
    let mut loopdev = LoopDevice::attach_free(&file).map_err(crate::record::Error::from)?;
    // Recovery's flushes delimit its own crash epochs: each must reach the recording.
    loopdev.pass_flushes().map_err(crate::record::Error::from)?;
    disk.start(&work.join("recovery.log"))?;
    let mounted = mount::mount(loopdev.path(), &mnt, config.fstype, config.mount_options)
        .map_err(crate::record::Error::from);
    let unmounted = mounted.and_then(|m| m.unmount().map_err(crate::record::Error::from));
    let trace = disk.stop();
    let detached = loopdev.detach().map_err(crate::record::Error::from);
    drop(server);
    unmounted?;
    detached?;
    Ok(trace?)
}
