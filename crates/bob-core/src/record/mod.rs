//! Recording: make the file system on bob's recording disk, prepare the base image, then
//! run the workload while every write, flush and discard the loop driver sends is logged
//! in order, with a mark at each op's begin and end.
//!
//! By job: [`recording_disk`] is the recording disk ([`RecordingDisk`]), [`mounted`]
//! makes (or copies) the file system on it and mounts it ([`make_and_mount`]),
//! [`research`] records the research designs in process, [`finish`] writes a finished
//! recording's sidecar, [`tracefs`] adds the block-tracepoint annotations every recording
//! has by default ([`default_tracing`]); this module holds the request, its errors and
//! [`record`], which ties them together.
//!
//! Backends: the FUSE disk ([`RecordingDisk`], the default, which works without
//! device-mapper) and dm-log-writes ([`dm_log_writes_available`] tells whether this kernel
//! can offer it; where it cannot, bob says so and points to the FUSE disk).

pub(crate) mod blktrace_live;
pub mod custom;
pub mod dmlogwrites;
mod finish;
pub mod latency;
mod live;
mod mounted;
pub(crate) mod pm_recorder;
mod recording_disk;
mod research;
pub(crate) mod setup;
pub(crate) mod tracefs;

use std::path::{Path, PathBuf};

use workloads::{Observed, OpEvent, Phase, Workload};

use crate::device::mount;
use crate::fs::{FsConfig, Timeouts};
use crate::trace::log::LogError;
use crate::trace::sidecar::Sidecar;
use crate::trace::{Entry, EntryKind, Trace};
pub use mounted::{make_and_mount, MountedDisk};
pub use recording_disk::RecordingDisk;
pub(crate) use research::RoleRecorder;
pub use setup::{SetupCache, SetupSource};
pub(crate) use tracefs::default_tracing;

/// File name of the log a recording streams into, in its work directory.
pub const LOG_FILE: &str = "record.log";

/// Recording errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device-layer failure.
    #[error(transparent)]
    Device(#[from] crate::device::Error),
    /// mkfs failed.
    #[error(transparent)]
    Mkfs(#[from] crate::fs::MkfsError),
    /// The workload failed on the real file system.
    #[error("workload on {config}: {source}")]
    Workload {
        /// Configuration name.
        config: String,
        /// What failed.
        source: workloads::ExecError,
    },
    /// The configuration cannot run on this machine.
    #[error("{config}: {reason}")]
    Unavailable {
        /// Configuration name.
        config: String,
        /// Why.
        reason: String,
    },
    /// I/O on bob's own files.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A part of the sidecar would not serialize (never expected: the types are bob's own).
    #[error("the sidecar's {what}: {source}")]
    Json {
        /// Which part.
        what: &'static str,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// Streaming the trace to its log file failed (disk full, ...); names the file.
    #[error("recording the trace: {0}")]
    Log(#[from] LogError),
    /// A kernel file system with barriers on was recorded without a single flush: they
    /// were lost below it, and the trace's crash states would be ones no disk leaves.
    #[error(
        "{config}: the recording on {} saw no flush, though {config} flushes at every \
         unmount; something between the file system and bob's disk drops them (a loop \
         device whose queue/write_cache says write through?), so its crash states would \
         be ones no disk could leave",
        device.display()
    )]
    NoFlushes {
        /// Configuration name.
        config: String,
        /// The device recorded on.
        device: PathBuf,
    },
    /// The dm-log-writes recorder failed (dmsetup, the target, its log).
    #[error("dm-log-writes: {0}")]
    DmLogWrites(#[from] dmlogwrites::Error),
}

/// Whether `trace`, a recording of `config` on `device`, can be what `config` did: one
/// that [`FsConfig::flushes_at_unmount`] holds a flush, as every recording includes the
/// unmount.
fn check_flushes_seen(config: &FsConfig, trace: &Trace, device: &Path) -> Result<(), Error> {
    let barrier = |e: &Entry| match e.kind() {
        EntryKind::Flush => true,
        EntryKind::Write { preflush, fua } => preflush || fua,
        _ => false,
    };
    if !config.flushes_at_unmount() || trace.entries.iter().any(barrier) {
        return Ok(());
    }
    Err(Error::NoFlushes { config: config.name.into(), device: device.to_owned() })
}

/// What to record.
pub struct RecordRequest<'a> {
    /// The configuration.
    pub config: &'a FsConfig,
    /// The workload (setup, ops, drain).
    pub workload: &'a Workload,
    /// A user-chosen free loop device, else a free one is taken.
    pub device: Option<&'a Path>,
    /// Scratch directory (the base image and mount points live here).
    pub work_dir: &'a Path,
    /// External step timeouts.
    pub timeouts: Timeouts,
    /// Where the run's made file systems are kept, to start from a copy instead of
    /// running mkfs (`None`: mkfs on the recording disk). Research designs ignore it.
    pub setup: Option<&'a SetupCache>,
    /// Which recorder logs the workload's requests.
    pub recorder: Recorder,
}

/// The recorder of a property workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Recorder {
    /// bob's FUSE disk under a loop device ([`RecordingDisk`]).
    #[default]
    Fuse,
    /// The kernel's dm-log-writes target over a loop device, logging to another loop
    /// device that bob makes ([`dmlogwrites::record`]).
    DmLogWrites,
}

/// A finished recording.
pub struct Recording {
    /// The trace.
    pub trace: Trace,
    /// Its sidecar (base image file name relative to `work_dir`).
    pub sidecar: Sidecar,
    /// What the workload observed (inode numbers).
    pub observed: Observed,
    /// Path of the base image.
    pub base_image: PathBuf,
    /// Whether mkfs ran for it or it started from a copy of a made image.
    pub setup: SetupSource,
}

/// Whether this kernel has device-mapper (for the dm-log-writes backend). Where
/// device-mapper is a module not yet loaded, the first call loads dm-log-writes (and with
/// it dm-mod) with `modprobe -q` before concluding it is absent.
pub fn dm_log_writes_available() -> Result<(), String> {
    static MODPROBE: std::sync::Once = std::sync::Once::new();
    let control = Path::new("/dev/mapper/control");
    if !control.exists() {
        MODPROBE.call_once(|| {
            let timeout = std::time::Duration::from_secs(60);
            let _ = crate::device::cmd::run("modprobe", &["-q", "dm-log-writes"], timeout);
        });
    }
    if control.exists() {
        Ok(())
    } else {
        Err("device-mapper is not available on this kernel (no /dev/mapper/control); \
             use the default FUSE-disk recorder (--backend fuse)"
            .into())
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// Runs the workload's ops and then its drain on the mounted file system, with a mark in
/// the log at each op's begin and end ("op 3 begin: ...", "drain 0 end: ...").
fn run_marked(
    workload: &workloads::Workload,
    mnt: &Path,
    observed: &mut Observed,
    mark: &dyn Fn(&str),
) -> Result<(), workloads::ExecError> {
    let marks = |prefix: &str, ev: OpEvent<'_>| match ev {
        OpEvent::Begin { index, op } => mark(&format!("{prefix} {index} begin: {op}")),
        OpEvent::End { index, op } => mark(&format!("{prefix} {index} end: {op}")),
    };
    workloads::execute(workload, Phase::Workload, mnt, observed, &mut |ev| marks("op", ev))?;
    workloads::execute(workload, Phase::Drain, mnt, observed, &mut |ev| marks("drain", ev))
}

/// Makes the file system, prepares the base image, and records the workload.
pub fn record(req: &RecordRequest<'_>) -> Result<Recording, Error> {
    let config = req.config;
    if let Some(design) = config.design() {
        if req.recorder == Recorder::DmLogWrites {
            return Err(Error::Unavailable {
                config: config.name.into(),
                reason: "a research design runs in bob's process on bob's own disk, below no \
                         kernel block layer; record it with the FUSE disk (--backend fuse)"
                    .into(),
            });
        }
        let (trace, observed, base_path) = research::record_research(req, design)?;
        return finish::finish(req, trace, observed, base_path, None, SetupSource::Made);
    }
    if req.recorder == Recorder::DmLogWrites {
        return dmlogwrites::record(req);
    }
    let (mut md, setup) =
        mounted::make_or_copy_and_mount(config, req.device, req.work_dir, req.timeouts, req.setup)?;
    let (disk, mnt, base_path) = (md.disk.clone(), md.mnt.clone(), md.base_path.clone());

    let mut observed = Observed::default();
    let workload_err = |source| Error::Workload { config: config.name.into(), source };
    workloads::execute(req.workload, Phase::Setup, &mnt, &mut observed, &mut |_| {})
        .map_err(workload_err)?;
    mount::syncfs(&mnt)?;
    disk.start(&md.log_path)?;
    let tracing = default_tracing(&md.dev);

    let run = run_marked(req.workload, &mnt, &mut observed, &|text| disk.mark(text));
    let unmounted = md.unmount();
    let traced = tracing.and_then(|t| t.stop().ok());
    // A failure to write the log comes first: it explains a failing workload.
    let unmounted = match unmounted {
        Err(e @ Error::Log(_)) => return Err(e),
        other => other,
    };
    run.map_err(workload_err)?;
    let mut trace = unmounted?;
    check_flushes_seen(config, &trace, &md.dev)?;
    md.release()?;

    let fua = match &traced {
        Some(traced) => {
            let (_, fua) = traced.annotate(&mut trace);
            // The annotation's METADATA and FUA bits go into the log file too, so that
            // saving the trace still copies the file.
            trace.write_flags_to_file()?;
            Some(fua)
        }
        None => None,
    };
    finish::finish(req, trace, observed, base_path, fua, setup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::flags;

    /// A kernel file system with barriers on always flushes at unmount: a recording of one
    /// without any barrier is refused; one with barriers off, or a research design, is not.
    #[test]
    fn a_recording_without_any_flush_is_refused_where_barriers_are_on() {
        let dev = Path::new("/dev/loop9");
        let writes = || vec![Entry::mark("umount"), Entry::write(8, vec![1u8; 4096])];
        let trace = |entries| Trace::new(512, entries);
        let ext4 = crate::fs::by_name("ext4-ordered").unwrap();
        let err = check_flushes_seen(&ext4, &trace(writes()), dev).unwrap_err();
        assert!(matches!(err, Error::NoFlushes { .. }), "{err}");
        assert!(err.to_string().contains("/dev/loop9"), "names the device: {err}");
        let mut flushed = writes();
        flushed.push(Entry::flush());
        assert!(check_flushes_seen(&ext4, &trace(flushed), dev).is_ok());
        let mut fua = Entry::write(16, vec![2u8; 512]);
        fua.flags |= flags::FUA;
        let mut with_fua = writes();
        with_fua.push(fua);
        assert!(check_flushes_seen(&ext4, &trace(with_fua), dev).is_ok(), "a FUA write");
        let nobarrier = crate::fs::by_name("ext4-nobarrier").unwrap();
        assert!(check_flushes_seen(&nobarrier, &trace(writes()), dev).is_ok());
        let design = crate::fs::by_name("nofs").unwrap();
        assert!(check_flushes_seen(&design, &trace(writes()), dev).is_ok());
    }

    /// A research design has no kernel block layer for the target to sit in: asking for
    /// dm-log-writes is refused in one line before anything is made.
    #[test]
    fn a_research_design_is_not_recorded_through_dm_log_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let config = crate::fs::by_name("nofs").unwrap();
        let workload = workloads::workload_for(
            workloads::Property::SingleBlockAppend,
            &config.workload_params(),
        );
        let Err(e) = record(&RecordRequest {
            config: &config,
            workload: &workload,
            device: None,
            work_dir: tmp.path(),
            timeouts: Timeouts::default(),
            setup: None,
            recorder: Recorder::DmLogWrites,
        }) else {
            panic!("recorded a research design through dm-log-writes");
        };
        let text = e.to_string();
        assert!(text.starts_with("nofs: a research design runs in bob's process"), "{text}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "nothing made");
    }
}
