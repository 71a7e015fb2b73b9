//! Recording: make the file system on bob's recording disk, prepare the base image, then
//! run the workload while every write, flush and discard the loop driver sends is logged
//! in order, with a mark at each op's begin and end.
//!
//! The log streams to a file in the work directory as requests arrive
//! ([`crate::trace::file::LogStream`]); the recorder keeps no payload in memory, only
//! where each written sector's content lies in that file, so its memory does
//! not grow with what the workload writes. When recording stops the file is sealed and
//! mapped, and the [`Trace`] is that file.
//!
//! Backends: the FUSE disk ([`RecordingDisk`], the default, which works without
//! device-mapper) and dm-log-writes ([`dm_log_writes_available`] tells whether this kernel
//! can offer it; where it cannot, bob says so and points to the FUSE disk).

pub mod blktrace_live;
pub mod custom;
pub mod dmlogwrites;
pub mod latency;
mod live;
pub mod pm;
pub mod setup;
pub mod tracefs;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use workloads::{Observed, OpEvent, Phase, Workload};

use crate::device::fusedisk::{Disk, DiskServer};
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::fs::{FsConfig, Timeouts};
use crate::trace::file::LogStream;
use crate::trace::log::LogError;
use crate::trace::sidecar::{BaseImageInfo, OpSpan, RoleNote, Sidecar, SIDECAR_FORMAT};
use crate::trace::{Entry, EntryKind, Trace, SECTOR_SIZE};
use live::{LiveMap, Source};
pub use setup::{SetupCache, SetupSource};

const SECTOR: usize = SECTOR_SIZE as usize;

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

/// The in-process disk the file system under test is made on. Before [`start`] it writes
/// through to the base image file (mkfs and setup); from [`start`] on, the base image is
/// frozen and every request is appended to the log file as it arrives; reads of sectors
/// written since are served from the log file.
///
/// [`start`]: RecordingDisk::start
pub struct RecordingDisk {
    base: File,
    base_path: PathBuf,
    size: u64,
    state: Mutex<RecState>,
    /// The PM region recorded beside this disk, which gets a copy of every mark.
    pm: Mutex<Option<Arc<pm::PmRecorder>>>,
}

#[derive(Default)]
struct RecState {
    /// The log being recorded into; `Some` exactly while recording.
    log: Option<LogStream>,
    /// Where the sectors written since `start` are in the log.
    live: LiveMap,
    /// The first failure to log a request: the recording is lost, `stop` reports it.
    failed: Option<LogError>,
    /// The disk's durability clock (see [`RecordingDisk::set_adn`]).
    adn: AdnClock,
    /// The latency model while recording (see [`RecordingDisk::set_latency`]).
    latency: Option<latency::Costs>,
    /// Write requests made since the last flush or notification (what a flush must
    /// write to the media).
    dirty: u64,
}

/// The deterministic clock of asynchronous durability notifications: it counts write
/// requests (writes and discards), never time, so a recording replays.
#[derive(Clone, Copy, Debug, Default)]
struct AdnClock {
    /// T_D in write requests; `None`: the disk sends no notifications.
    every: Option<u32>,
    /// Write requests received in the disk's lifetime.
    received: u64,
    /// Of those, the ones known durable (a flush, a notification, the base image).
    durable: u64,
    /// Write requests received while recording since the last notification.
    since: u32,
    /// `received` when recording started (a notification counts the trace's writes).
    at_start: u64,
}

impl RecState {
    /// Logs one request with `append`; on failure remembers the error for `stop` and
    /// fails the request, so that the file system sees an I/O error rather than a device
    /// that silently dropped a write.
    fn log<T>(
        &mut self,
        append: impl FnOnce(&mut LogStream) -> Result<T, LogError>,
    ) -> std::io::Result<Option<T>> {
        if self.failed.is_some() {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        let Some(log) = self.log.as_mut() else { return Ok(None) };
        match append(log) {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                self.failed = Some(e);
                Err(std::io::Error::from_raw_os_error(libc::EIO))
            }
        }
    }
}

impl RecState {
    /// Counts a logged write request on the durability clock and, when T_D requests
    /// have arrived since the last notification, appends the next one.
    fn tick(&mut self) -> std::io::Result<()> {
        self.adn.received += 1;
        self.dirty += 1;
        let Some(every) = self.adn.every else { return Ok(()) };
        self.adn.since += 1;
        if self.adn.since >= every {
            let (received, traced) = (self.adn.received, self.adn.received - self.adn.at_start);
            self.log(|log| log.append(&Entry::adn(traced)))?;
            self.adn.durable = received;
            self.adn.since = 0;
            // The disk wrote its cache back on its own: nothing left for a flush.
            self.dirty = 0;
        }
        Ok(())
    }
}

impl RecordingDisk {
    /// Creates (or truncates) `path` as a sparse image of `size` bytes.
    pub fn create(path: &Path, size: u64) -> std::io::Result<RecordingDisk> {
        let base = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        base.set_len(size)?;
        let state = Mutex::new(RecState::default());
        Ok(RecordingDisk { base, base_path: path.to_owned(), size, state, pm: Mutex::new(None) })
    }

    /// Opens the image already at `path` (a made file system) as the base, which must be
    /// `size` bytes long.
    pub fn open(path: &Path, size: u64) -> std::io::Result<RecordingDisk> {
        let base = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
        let len = base.metadata()?.len();
        if len != size {
            return Err(std::io::Error::other(format!("{len} bytes, not the {size} expected")));
        }
        let state = Mutex::new(RecState::default());
        Ok(RecordingDisk { base, base_path: path.to_owned(), size, state, pm: Mutex::new(None) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Freezes the base image and starts logging into a new log file at `log_path`.
    pub fn start(&self, log_path: &Path) -> Result<(), Error> {
        self.base.sync_all().map_err(io_err(&self.base_path))?;
        let log = LogStream::create(log_path, SECTOR_SIZE as u32)?;
        let mut st = self.lock();
        // The base image is synced: every write so far is durable.
        let adn =
            AdnClock { durable: st.adn.received, since: 0, at_start: st.adn.received, ..st.adn };
        let latency = st.latency;
        *st = RecState { log: Some(log), adn, latency, ..RecState::default() };
        Ok(())
    }

    /// Sets the latency model applied while recording (`--latency`): every write, discard
    /// and flush then takes the model's time before it completes ([`latency`]).
    pub fn set_latency(&self, model: latency::Latency) {
        self.lock().latency = model.costs();
    }

    /// Turns asynchronous durability notifications on (`Some(t_d)`) or off. With them on,
    /// the disk writes back its cache on a deterministic clock: once `t_d` write requests
    /// arrived since the last notification, every write received so far is durable, and
    /// the disk appends an [`Entry::adn`] mark to the log saying so. A write received at
    /// request T is so durable by request T + T_D, the thesis' durability timeout
    /// (OptFS, §6.3.1) counted in requests instead of seconds.
    pub fn set_adn(&self, t_d: Option<u32>) {
        self.lock().adn.every = t_d.filter(|&t| t > 0);
    }

    /// (write requests received, of which durable) since the disk was made: what a file
    /// system listening for notifications knows.
    pub fn durability(&self) -> (u64, u64) {
        let st = self.lock();
        (st.adn.received, st.adn.durable)
    }

    /// Whether requests are being logged.
    pub fn is_recording(&self) -> bool {
        self.lock().log.is_some()
    }

    /// Appends a mark (program-order annotation) to the log. A mark that cannot be
    /// logged (too long for a log header, say) fails the recording at [`stop`].
    ///
    /// [`stop`]: RecordingDisk::stop
    pub fn mark(&self, text: &str) {
        let logged = {
            let mut st = self.lock();
            let _ = st.log(|log| log.append(&Entry::mark(text)));
            st.log.as_ref().map_or(0, |l| l.nr_entries() as u64)
        };
        // Outside the disk's lock: the PM recorder asks the disk for its position.
        let pm = self.pm.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(pm) = pm {
            pm.mark(text, logged);
        }
    }

    /// Entries in the log so far (0 before [`RecordingDisk::start`]): the position the
    /// PM log ties its entries to.
    pub fn logged_entries(&self) -> u64 {
        self.lock().log.as_ref().map_or(0, |l| l.nr_entries() as u64)
    }

    /// Copies every later mark into `pm`'s log ([`crate::pm`]).
    pub fn tie_pm(&self, pm: Arc<pm::PmRecorder>) {
        *self.pm.lock().unwrap_or_else(|p| p.into_inner()) = Some(pm);
    }

    /// Stops logging and returns the trace: the sealed log file, mapped. An empty trace
    /// if logging never started; the first logging failure if one happened.
    pub fn stop(&self) -> Result<Trace, Error> {
        let mut st = self.lock();
        let RecState { log, failed, .. } = std::mem::take(&mut *st);
        drop(st);
        if let Some(e) = failed {
            return Err(e.into());
        }
        match log {
            Some(log) => Ok(log.finish()?),
            None => Ok(Trace::new(SECTOR_SIZE as u32, Vec::new())),
        }
    }
}

impl Disk for RecordingDisk {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.base.read_exact_at(buf, offset)?;
        let mut st = self.lock();
        if st.live.is_empty() {
            return Ok(());
        }
        let end = offset + buf.len() as u64;
        let runs = st.live.covering(offset / SECTOR_SIZE, end.div_ceil(SECTOR_SIZE));
        for (s, n, source) in runs {
            let run_start = s * SECTOR_SIZE;
            let from = run_start.max(offset);
            let to = (run_start + n * SECTOR_SIZE).min(end);
            let out = &mut buf[(from - offset) as usize..(to - offset) as usize];
            match source {
                Source::Zero => out.fill(0),
                Source::Log(at) => {
                    let at = at + (from - run_start);
                    if let Some(Err(e)) = st.log.as_mut().map(|log| log.read_at(at, out)) {
                        return Err(std::io::Error::other(e.to_string()));
                    }
                }
            }
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.write_flagged(offset, data, 0)
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut st = self.lock();
        st.log(|log| log.append(&Entry::flush()))?;
        st.adn.durable = st.adn.received;
        let delay = st.latency.filter(|_| st.log.is_some()).map(|c| c.flush(st.dirty));
        st.dirty = 0;
        drop(st);
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        Ok(())
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.discard_at(offset, len)
    }
}

impl RecordingDisk {
    /// A write whose log entry carries `extra` flags besides the write itself (FUA, the
    /// role bits of [`crate::fs::roles`]).
    pub fn write_flagged(&self, offset: u64, data: &[u8], extra: u64) -> std::io::Result<()> {
        if offset % SECTOR_SIZE != 0 || data.len() % SECTOR != 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut st = self.lock();
        let first = offset / SECTOR_SIZE;
        match st.log(|log| log.append_write(first, extra, data))? {
            Some(at) => {
                st.live.insert(first, (data.len() / SECTOR) as u64, Source::Log(at));
                let delay = st.latency.map(|c| c.write(data.len() as u64));
                st.tick()?;
                drop(st);
                if let Some(d) = delay {
                    std::thread::sleep(d);
                }
                Ok(())
            }
            None => {
                st.adn.received += 1;
                st.adn.durable = st.adn.received;
                drop(st);
                self.base.write_all_at(data, offset)
            }
        }
    }

    fn discard_at(&self, offset: u64, len: u64) -> std::io::Result<()> {
        let mut st = self.lock();
        let first = offset / SECTOR_SIZE;
        let count = len.div_ceil(SECTOR_SIZE);
        if st.log(|log| log.append(&Entry::discard(first, count)))?.is_some() {
            st.live.insert(first, count, Source::Zero);
            let delay = st.latency.map(|c| c.write(0));
            st.tick()?;
            drop(st);
            if let Some(d) = delay {
                std::thread::sleep(d);
            }
            return Ok(());
        }
        st.adn.received += 1;
        st.adn.durable = st.adn.received;
        drop(st);
        // Zeros, not a punched hole: the base image must read back exactly as the
        // device did, and holes read as zeros anyway.
        let zeros = vec![0u8; (len.min(1 << 20)) as usize];
        let mut off = offset;
        while off < offset + len {
            let n = ((offset + len - off) as usize).min(zeros.len());
            self.base.write_all_at(&zeros[..n], off)?;
            off += n as u64;
        }
        Ok(())
    }
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

/// `value` as a JSON value for the sidecar, or the error that names `what` it was.
fn json_value<T: serde::Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value).map_err(|source| Error::Json { what, source })
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// The file system under test made on bob's recording disk and mounted: where both the
/// property recorder ([`record`]) and `bob record` ([`custom`]) start. Dropping it
/// unmounts, detaches and stops the FUSE disk, in that order.
pub struct MountedDisk {
    /// The recording disk (base image until [`RecordingDisk::start`], then logging).
    pub disk: Arc<RecordingDisk>,
    /// The loop device the file system is on.
    pub dev: PathBuf,
    /// Where it is mounted.
    pub mnt: PathBuf,
    /// The base image file.
    pub base_path: PathBuf,
    /// Where the log streams once recording starts (`<work_dir>/record.log`).
    pub log_path: PathBuf,
    // Drop order matters: the mount before the loop device before the FUSE server.
    fs_mount: Option<mount::Mount>,
    loopdev: Option<LoopDevice>,
    _server: DiskServer,
}

/// Checks the configuration can run here, then makes the file system on a fresh
/// recording disk (`<work_dir>/base.img`) attached to `device` (or a free loop device)
/// and mounts it at `<work_dir>/record-mnt`.
pub fn make_and_mount(
    config: &FsConfig,
    device: Option<&Path>,
    work_dir: &Path,
    timeouts: Timeouts,
) -> Result<MountedDisk, Error> {
    make_or_copy_and_mount(config, device, work_dir, timeouts, None).map(|(md, _)| md)
}

/// [`make_and_mount`], with the file system copied from `setup`'s made image when given.
fn make_or_copy_and_mount(
    config: &FsConfig,
    device: Option<&Path>,
    work_dir: &Path,
    timeouts: Timeouts,
    setup: Option<&SetupCache>,
) -> Result<(MountedDisk, SetupSource), Error> {
    config
        .availability()
        .map_err(|e| Error::Unavailable { config: config.name.into(), reason: e.reason() })?;
    let base_path = work_dir.join("base.img");
    let fuse_dir = work_dir.join("record-disk");
    let mnt = work_dir.join("record-mnt");
    for d in [&fuse_dir, &mnt] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    let (disk, source) = match setup {
        Some(cache) => {
            let source = cache.copy_made(config, &base_path, timeouts)?;
            (RecordingDisk::open(&base_path, config.image_bytes), source)
        }
        None => (RecordingDisk::create(&base_path, config.image_bytes), SetupSource::Made),
    };
    let disk = Arc::new(disk.map_err(io_err(&base_path))?);
    // One FUSE thread: requests are handled strictly in the order the loop driver sends them.
    let server = DiskServer::start(&fuse_dir, 1)?;
    let disk_file = server.add("record.img", disk.clone());
    let mut loopdev = match device {
        Some(dev) => LoopDevice::attach(dev, &disk_file)?,
        None => LoopDevice::attach_free(&disk_file)?,
    };
    // Every flush must reach the recording disk: it is what delimits the crash epochs.
    loopdev.pass_flushes()?;
    let dev = loopdev.path().to_owned();
    if setup.is_none() {
        config.mkfs_on(&dev, timeouts.mkfs)?;
    }
    let fs_mount = mount::mount(&dev, &mnt, config.fstype, config.mount_options)?;
    let mounted = MountedDisk {
        disk,
        dev,
        mnt,
        base_path,
        log_path: work_dir.join(LOG_FILE),
        fs_mount: Some(fs_mount),
        loopdev: Some(loopdev),
        _server: server,
    };
    Ok((mounted, source))
}

impl MountedDisk {
    /// Marks `umount`, unmounts, and stops logging: the recorded trace, or why it was
    /// lost (a failure to write the log comes first: it explains the others) or why the
    /// unmount failed. Logging is stopped either way.
    pub fn unmount(&mut self) -> Result<Trace, Error> {
        self.disk.mark("umount");
        let unmounted = match self.fs_mount.take() {
            Some(m) => m.unmount(),
            None => Ok(()),
        };
        let trace = self.disk.stop()?;
        unmounted?;
        Ok(trace)
    }

    /// Detaches the loop device and stops the FUSE disk.
    pub fn release(mut self) -> Result<(), Error> {
        if let Some(m) = self.fs_mount.take() {
            m.unmount()?;
        }
        if let Some(l) = self.loopdev.take() {
            l.detach()?;
        }
        Ok(())
    }
}

/// Starts the block-tracepoint annotator on `dev` (the default of every recording), on
/// tracefs where it is mounted, else on a private mount of it for the session (a fresh
/// machine often has it unmounted, and without it the FUA marks that the real-FUA disk
/// model needs would be missing); `None` where the kernel has no tracefs or it cannot
/// start, which only costs the annotations.
pub fn default_tracing(dev: &Path) -> Option<tracefs::TracefsSession> {
    // `start` mounts tracefs privately when it is not mounted, and refuses a kernel
    // without it.
    tracefs::TracefsSession::start(dev).ok()
}

/// [`RecordingDisk`] as the [`researchfs::BlockDevice`] a research design writes to: each
/// write is logged in process, in order, with its role (and FUA) in the entry's flags.
pub struct RoleRecorder(pub Arc<RecordingDisk>);

impl researchfs::BlockDevice for RoleRecorder {
    fn size(&self) -> u64 {
        self.0.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        Disk::read_at(self.0.as_ref(), offset, buf)
    }
    fn write_at(
        &self,
        offset: u64,
        data: &[u8],
        info: researchfs::WriteInfo,
    ) -> std::io::Result<()> {
        let fua = if info.fua { crate::trace::flags::FUA } else { 0 };
        self.0.write_flagged(offset, data, crate::fs::roles::role_flags(info.role) | fua)
    }
    fn flush(&self) -> std::io::Result<()> {
        Disk::flush(self.0.as_ref())
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.0.discard_at(offset, len)
    }
    fn durability(&self) -> Option<researchfs::Durability> {
        let st = self.0.lock();
        st.adn.every?;
        Some(researchfs::Durability { received: st.adn.received, durable: st.adn.durable })
    }
    fn release_output(&self, text: &str) {
        self.0.mark(&crate::trace::output_mark(text));
    }
}

fn research_err(config: &FsConfig) -> impl Fn(researchfs::Error) -> Error + '_ {
    move |e| Error::Unavailable { config: config.name.into(), reason: e.to_string() }
}

/// Records a research design: no kernel file system. mkfs and the file system itself run
/// in this process over [`RoleRecorder`]; the FUSE mount at `<work_dir>/record-mnt` (a
/// fuseblk mount on a loop device that only stands for the mount's source) is where the
/// workload runs, exactly as on a kernel file system.
fn record_research(
    req: &RecordRequest<'_>,
    design: researchfs::Design,
) -> Result<(Trace, Observed, PathBuf), Error> {
    let config = req.config;
    let base_path = req.work_dir.join("base.img");
    let mnt = req.work_dir.join("record-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    let disk = Arc::new(
        RecordingDisk::create(&base_path, config.image_bytes).map_err(io_err(&base_path))?,
    );
    disk.set_adn(config.disk_features().adn_requests);
    let role_dev: Arc<dyn researchfs::BlockDevice> = Arc::new(RoleRecorder(disk.clone()));
    // A PM design gets the second device: bob's PM region, its log tied to the disk's.
    let pm = design.pm_fenced().map(|_| {
        let size = researchfs::ConquestDevice::pm_size(config.image_bytes);
        let pm = Arc::new(pm::PmRecorder::new(disk.clone(), size));
        disk.tie_pm(pm.clone());
        pm
    });
    let dev: Arc<dyn researchfs::BlockDevice> = match &pm {
        Some(pm) => researchfs::ConquestDevice::open(design, role_dev, pm.clone())
            .map_err(|e| Error::Io { path: base_path.clone(), source: e })?,
        None => role_dev,
    };
    researchfs::mkfs(design, dev.as_ref(), config.image_bytes)
        .and_then(|()| dev.end_op().map_err(|source| researchfs::Error::Io { block: 0, source }))
        .map_err(|e| crate::fs::MkfsError::Failed {
            program: format!("researchfs::mkfs({design})"),
            device: base_path.clone(),
            code: None,
            line: e.to_string(),
        })?;
    // A fuseblk mount, on a loop device over a small file the design never touches, so
    // that the workload's sync(2) and syncfs(2) reach the design: the kernel forwards
    // them to no ordinary FUSE mount (`researchfs::mount_on_block_device`).
    let token = req.work_dir.join("fuseblk.img");
    File::create(&token).and_then(|f| f.set_len(1 << 20)).map_err(io_err(&token))?;
    let (_blk, mounted) = mount_fuseblk(design, dev, &mnt, &token).map_err(research_err(config))?;
    if let Some((index, op)) = unforwarded_sync(req.workload, &mounted) {
        drop(mounted);
        return Err(Error::Workload {
            config: config.name.into(),
            source: workloads::ExecError::Io {
                phase: Phase::Workload,
                index,
                op: format!(
                    "{op}: this kernel forwards sync(2) and syncfs(2) to no FUSE file \
                     system (Linux does to fuseblk mounts from 6.18 on)"
                ),
                path: mnt,
                source: std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            },
        });
    }
    // NoFS rebuilds allocation in the background; let it finish so the recorded ops
    // allocate as they would on a long-mounted file system, the same on every run.
    mounted.fs().wait_scan();

    let mut observed = Observed::default();
    let workload_err = |source| Error::Workload { config: config.name.into(), source };
    let setup = workloads::execute(req.workload, Phase::Setup, &mnt, &mut observed, &mut |_| {});
    if let Err(e) = setup {
        drop(mounted);
        return Err(workload_err(e));
    }
    // Every researchfs write reaches the device when the call returns, so the image file
    // already holds the setup, except on a design that keeps it in memory: soft updates
    // hold it in their cache until written back, and a journaling design's running
    // transaction is in memory until it commits (xsyncfs' fsync does not commit at all):
    // write it back, or commit it and flush, as the kernel's setup ends with sync(2), so
    // that the base image holds the whole setup and the trace only the workload.
    if let Err(e) = mounted.fs().writeback() {
        drop(mounted);
        return Err(research_err(config)(e));
    }
    if design.journal().is_some() {
        if let Err(e) = mounted.fs().dsync() {
            drop(mounted);
            return Err(research_err(config)(e));
        }
    }
    if let Err(e) = disk.start(&req.work_dir.join(LOG_FILE)) {
        drop(mounted);
        return Err(e);
    }
    if let Some(pm) = &pm {
        pm.start();
    }
    let run = run_marked(req.workload, &mnt, &mut observed, &|text| disk.mark(text));
    disk.mark("umount");
    let unmounted = mounted.unmount();
    // A failure to write the log comes first: it explains the others.
    let trace = disk.stop()?;
    if let Some(pm) = &pm {
        // Beside base.img, where the trace directory's readers look for it.
        pm.stop().save(req.work_dir).map_err(|e| Error::Io {
            path: req.work_dir.join(crate::pm::PM_LOG_FILE),
            source: std::io::Error::other(e.to_string()),
        })?;
    }
    run.map_err(workload_err)?;
    unmounted.map_err(research_err(config))?;
    Ok((trace, observed, base_path))
}

/// Mounts `design` as fuseblk at `mnt` on a loop device bound to `token`. The kernel
/// refuses the mount with EBUSY, rarely (about one recording in 5,000, on a machine where
/// other processes bind and mount loop devices too; the cause was not pinned down): then
/// again on another device, after a pause that grows, up to eight times.
fn mount_fuseblk(
    design: researchfs::Design,
    dev: Arc<dyn researchfs::BlockDevice>,
    mnt: &Path,
    token: &Path,
) -> Result<(LoopDevice, researchfs::MountedFs), researchfs::Error> {
    let mut tries = 0;
    loop {
        tries += 1;
        let blk = LoopDevice::attach_free(token).map_err(|e| researchfs::Error::Mount {
            path: mnt.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let opts = researchfs::Options::default();
        match researchfs::mount_on_block_device(design, dev.clone(), mnt, opts, blk.path()) {
            Ok(m) => return Ok((blk, m)),
            Err(researchfs::Error::Mount { source, .. })
                if tries < 8 && source.raw_os_error() == Some(libc::EBUSY) =>
            {
                drop(blk);
                std::thread::sleep(std::time::Duration::from_millis(25 << tries));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The workload's first sync(2) or syncfs(2) (its index and text) if the design does not
/// get them on this kernel (asked by one syncfs(2) before anything is recorded): a sync
/// that reaches nothing would be judged as a promise the design never heard of.
fn unforwarded_sync(
    workload: &Workload,
    mounted: &researchfs::MountedFs,
) -> Option<(usize, String)> {
    let (index, op) = workload
        .ops
        .iter()
        .enumerate()
        .find(|(_, op)| matches!(op, workloads::Op::Sync | workloads::Op::Syncfs))?;
    (!mounted.sync_reaches_design()).then(|| (index, op.to_string()))
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
        let (trace, observed, base_path) = record_research(req, design)?;
        return finish(req, trace, observed, base_path, None, SetupSource::Made);
    }
    if req.recorder == Recorder::DmLogWrites {
        return dmlogwrites::record(req);
    }
    let (mut md, setup) =
        make_or_copy_and_mount(config, req.device, req.work_dir, req.timeouts, req.setup)?;
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
    finish(req, trace, observed, base_path, fua, setup)
}

/// The sidecar of a finished recording.
fn finish(
    req: &RecordRequest<'_>,
    trace: Trace,
    observed: Observed,
    base_path: PathBuf,
    fua: Option<tracefs::FuaMarking>,
    setup: SetupSource,
) -> Result<Recording, Error> {
    let config = req.config;
    let ops = op_spans(&trace, req.workload);
    let blake3 = crate::image::file_digest(&base_path).map_err(io_err(&base_path))?;
    let sidecar = Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: crate::host::kernel_release(),
        config: config.name.into(),
        property: req.workload.property.map(|p| p.name().to_owned()),
        workload: json_value("workload", req.workload)?,
        observed: json_value("observed tree", &observed)?,
        base_image: BaseImageInfo {
            file: "base.img".into(),
            size_bytes: config.image_bytes,
            blake3,
        },
        ops,
        roles: crate::fs::roles::role_list(&trace)
            .into_iter()
            .map(|(entry, role)| RoleNote { entry, role: role.name().into() })
            .collect(),
        // The caller that chose a drain schedule for the workload names it.
        schedule: None,
        recording: None,
        fua,
    };
    Ok(Recording { trace, sidecar, observed, base_image: base_path, setup })
}

/// Where each workload op's begin and end marks are in the trace.
fn op_spans(trace: &Trace, workload: &Workload) -> Vec<OpSpan> {
    let mut spans = Vec::new();
    for (index, op) in workload.ops.iter().enumerate() {
        let find = |what: &str| {
            let text = format!("op {index} {what}: {op}");
            trace
                .entries
                .iter()
                .position(|e| e.kind() == EntryKind::Mark && e.data == text.as_bytes())
        };
        if let (Some(begin_entry), Some(end_entry)) = (find("begin"), find("end")) {
            spans.push(OpSpan { index, text: op.to_string(), begin_entry, end_entry });
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::flags;

    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    fn read(disk: &RecordingDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        Disk::read_at(disk, offset, &mut buf).unwrap();
        buf
    }

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

    #[test]
    fn recording_streams_to_the_log_and_reads_back_from_it() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("base.img");
        let log = tmp.path().join(LOG_FILE);
        let disk = RecordingDisk::create(&base, 1 << 20).unwrap();
        Disk::write_at(&disk, 0, &[1; 4096]).unwrap();
        disk.start(&log).unwrap();
        assert!(disk.is_recording());

        // A model of the device: what every read must return.
        let mut model = vec![0u8; 16384];
        model[..4096].fill(1);
        let a = pattern(1, 8192);
        Disk::write_at(&disk, 4096, &a).unwrap();
        model[4096..12288].copy_from_slice(&a);
        let b = pattern(2, 1024);
        disk.write_flagged(512, &b, flags::FUA).unwrap();
        model[512..1536].copy_from_slice(&b);
        disk.mark("op 0 begin: x");
        Disk::discard(&disk, 4608, 1024).unwrap();
        model[4608..5632].fill(0);
        Disk::flush(&disk).unwrap();
        let c = pattern(3, 512);
        Disk::write_at(&disk, 5120, &c).unwrap();
        model[5120..5632].copy_from_slice(&c);
        // Reads of any alignment see the writes, whatever they overlap.
        assert_eq!(read(&disk, 0, 16384), model);
        assert_eq!(read(&disk, 4000, 1700), model[4000..5700]);
        assert_eq!(read(&disk, 5121, 3), model[5121..5124]);
        // The base image stays frozen.
        let frozen = std::fs::read(&base).unwrap();
        assert_eq!(&frozen[..4096], &[1; 4096][..]);
        assert!(frozen[4096..].iter().all(|&x| x == 0));

        let trace = disk.stop().unwrap();
        assert!(!disk.is_recording());
        let mut fua = Entry::write(1, b);
        fua.flags |= flags::FUA;
        let expected = vec![
            Entry::write(8, a),
            fua,
            Entry::mark("op 0 begin: x"),
            Entry::discard(9, 2),
            Entry::flush(),
            Entry::write(10, c),
        ];
        assert_eq!(trace, Trace::new(512, expected));
        let file = trace.file.as_ref().unwrap();
        assert!(trace.entries.iter().all(|e| e.data.is_empty() || file.contains(&e.data)));
        let mut encoded = Vec::new();
        crate::trace::log::write_log(&mut encoded, &trace).unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), encoded);
        // Stopped, the disk is its base image again.
        assert_eq!(read(&disk, 4096, 512), vec![0; 512]);
    }

    #[test]
    fn durability_notifications_are_marks_that_cut_epochs_and_cover_earlier_writes() {
        use crate::crash::{self, Barrier, DiskModel, Limits, Strategy};
        use researchfs::BlockDevice;
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join(LOG_FILE);
        let disk = Arc::new(RecordingDisk::create(&tmp.path().join("base.img"), 1 << 20).unwrap());
        disk.set_adn(Some(3));
        let dev = RoleRecorder(disk.clone());
        // mkfs-time writes land in the base image: durable once recording starts.
        dev.write_at(0, &[9; 4096], researchfs::WriteInfo::new(researchfs::Role::Other)).unwrap();
        disk.start(&log).unwrap();
        assert_eq!(dev.durability(), Some(researchfs::Durability { received: 1, durable: 1 }));
        // Seven block writes, one per 4 KiB block, block k filled with byte k.
        for k in 1..=7u8 {
            let info = researchfs::WriteInfo::new(researchfs::Role::Data);
            dev.write_at(u64::from(k) * 4096, &[k; 4096], info).unwrap();
            let d = dev.durability().unwrap();
            assert_eq!(d.received, 1 + u64::from(k));
            // Every third write the disk notifies: all received so far are durable.
            let expect = if k >= 6 {
                7
            } else if k >= 3 {
                4
            } else {
                1
            };
            assert_eq!(d.durable, expect, "after write {k}");
        }
        let trace = disk.stop().unwrap();
        let adn: Vec<usize> =
            (0..trace.entries.len()).filter(|&i| trace.entries[i].is_adn()).collect();
        assert_eq!(adn, vec![3, 7]);
        assert_eq!(
            trace.entries[3].mark_text().unwrap(),
            format!("{}durable through write 3", crate::trace::ADN_PREFIX)
        );
        // The log stays a dm-log-writes log: the notification reads back as a mark.
        let reread = crate::trace::log::read_log_file(&log).unwrap();
        assert_eq!(reread.entries[7].kind(), EntryKind::Mark);
        assert!(reread.entries[7].is_adn());

        let epochs = crash::epochs(&trace, &DiskModel::default());
        let shape: Vec<Vec<usize>> = epochs.iter().map(|e| e.writes.clone()).collect();
        assert_eq!(shape, vec![vec![0, 1, 2], vec![4, 5, 6], vec![8]]);
        assert_eq!(epochs[1].barrier_before(&trace), Some((3, Barrier::Adn)));
        let states = crash::generate(&trace, &epochs, Strategy::ALL, &Limits::default()).states;
        let mut later = 0;
        for st in &states {
            let overlay = crash::overlay(&trace, &epochs, &st.id);
            let mut block = vec![0u8; 4096];
            let holds = |k: u8, block: &mut Vec<u8>| {
                overlay.read_into(&trace, u64::from(k) * 4096, block);
                block.iter().all(|&b| b == k)
            };
            // A state that applies any write after a notification holds every write the
            // notification covers; no state holds a write of a later epoch.
            let covered = match st.id.epoch {
                0 => 0,
                1 => 3,
                _ => 6,
            };
            if covered > 0 {
                later += 1;
            }
            for k in 1..=covered {
                assert!(holds(k, &mut block), "{}: covered write {k} missing", st.id);
            }
            let epoch_end = match st.id.epoch {
                0 => 3,
                1 => 6,
                _ => 7,
            };
            for k in epoch_end + 1..=7 {
                assert!(!holds(k, &mut block), "{}: write {k} of a later epoch", st.id);
            }
        }
        assert!(later > 0);
    }

    #[test]
    fn the_latency_model_charges_flushes_per_dirty_request_and_notifications_clear_them() {
        use std::time::{Duration, Instant};
        let tmp = tempfile::tempdir().unwrap();
        let disk = RecordingDisk::create(&tmp.path().join("base.img"), 1 << 20).unwrap();
        disk.set_latency(latency::Latency::Hdd);
        // T_D = 7 write requests, counted from the last notification (flushes do not
        // reset the disk's clock).
        disk.set_adn(Some(7));
        // Not recording (mkfs, setup): no latency. What is charged is read from the
        // disk's state, not from the clock: an upper bound on a sleep fails on a busy
        // machine, a lower bound never does.
        Disk::write_at(&disk, 0, &[1; 4096]).unwrap();
        assert!(disk.lock().log.is_none(), "nothing is charged before the recording starts");
        Disk::flush(&disk).unwrap();
        disk.start(&tmp.path().join(LOG_FILE)).unwrap();
        for k in 0..3u64 {
            Disk::write_at(&disk, k * 4096, &[1; 4096]).unwrap();
        }
        assert_eq!(disk.lock().dirty, 3);
        let t = Instant::now();
        Disk::flush(&disk).unwrap();
        // 8.5 ms + 3 x 4 ms.
        assert!(t.elapsed() >= Duration::from_micros(20_500), "{:?}", t.elapsed());
        assert_eq!(disk.lock().dirty, 0, "a flush leaves nothing dirty");
        // Four more writes: the notification after the seventh leaves nothing dirty, so
        // the next flush costs the bare 8.5 ms.
        for k in 0..4u64 {
            Disk::write_at(&disk, k * 4096, &[2; 4096]).unwrap();
        }
        assert_eq!(disk.lock().dirty, 0, "the notification after the 7th request cleared them");
        let t = Instant::now();
        Disk::flush(&disk).unwrap();
        assert!(t.elapsed() >= Duration::from_micros(8_500));
        disk.stop().unwrap();
    }

    #[test]
    fn a_failed_log_fails_requests_and_the_recording_with_one_line() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let disk = RecordingDisk::create(&tmp.path().join("base.img"), 4 << 20).unwrap();
        disk.start(full).unwrap();
        let data = pattern(4, 64 << 10);
        let failed = (0..16).find_map(|i| Disk::write_at(&disk, i * (64 << 10), &data).err());
        let failed = failed.expect("writes to /dev/full fail");
        assert_eq!(failed.raw_os_error(), Some(libc::EIO));
        // Later requests fail too: the recording is lost, not silently shortened.
        assert!(Disk::flush(&disk).is_err());
        let e = disk.stop().unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::Log(_)), "{text}");
        assert!(text.starts_with("recording the trace: /dev/full: "), "{text}");
        assert!(text.contains("No space left on device") && !text.contains('\n'), "{text}");
    }
}
