//! Bring your own workload: make the file system, run any command with the mount as its
//! working directory, log every request until the unmount, and let the command (or a
//! person) insert marks through a control file.
//!
//! The control file is a FIFO whose path is in the command's environment as
//! `BOB_MARK_FILE`: every line written to it becomes a mark at that point of the trace
//! (`bob mark TEXT` writes one and returns once bob has read it). The trace directory it
//! produces (trace.log, trace.json, base.img) is what `bob check` explores; the marks are
//! the program's persistence points ("commit 7 acknowledged").

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::finish::json_value;
use super::{io_err, make_and_mount, mount, Error};
use crate::device::cmd;
use crate::fs::{FsConfig, Timeouts};
use crate::trace::blktrace::{Annotation, BlockRequest};
use crate::trace::log::max_mark_len;
use crate::trace::sidecar::{BaseImageInfo, Sidecar, SIDECAR_FORMAT};
use crate::trace::{Trace, SECTOR_SIZE};

/// Environment variable naming the control file.
pub const MARK_FILE_ENV: &str = "BOB_MARK_FILE";
/// Environment variable naming the mount point (also the command's working directory).
const MOUNT_ENV: &str = "BOB_MOUNT";

/// Whether and how to annotate the trace with block tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Annotate {
    /// No annotations.
    Off,
    /// Where tracefs is mounted (the default).
    Auto,
    /// Always; mount tracefs privately if needed, fail if it cannot start.
    Tracefs,
    /// Live blktrace (needs debugfs and relay files); fails in one line where it cannot run.
    Blktrace,
}

/// A running annotation source.
enum Tracing {
    Tracefs(super::tracefs::TracefsSession),
    Blktrace(super::blktrace_live::BlktraceSession),
}

impl Tracing {
    fn stop(self) -> Result<super::tracefs::Traced, Error> {
        match self {
            Tracing::Tracefs(t) => t.stop().map_err(|e| Error::Unavailable {
                config: "--annotate tracefs".into(),
                reason: e.to_string(),
            }),
            // blktrace's Q events are not decoded: no bios, so no FUA marking.
            Tracing::Blktrace(b) => {
                Ok(super::tracefs::Traced { requests: b.stop()?, bios: Vec::new() })
            }
        }
    }
}

/// The recording backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// bob's FUSE disk under a loop device.
    Fuse,
    /// The kernel's dm-log-writes target logging to this block device.
    DmLogWrites {
        /// The log device.
        log_dev: PathBuf,
    },
}

/// What to record.
pub struct CommandRequest<'a> {
    /// The configuration to make and mount.
    pub config: &'a FsConfig,
    /// The program and its arguments.
    pub command: &'a [String],
    /// A free loop device to use, else one is taken.
    pub device: Option<&'a Path>,
    /// Scratch directory.
    pub work_dir: &'a Path,
    /// mkfs timeout and the like.
    pub timeouts: Timeouts,
    /// Block-tracepoint annotations.
    pub annotate: Annotate,
    /// The recorder.
    pub backend: Backend,
    /// The recording disk's latency model (FUSE disk only).
    pub latency: super::latency::Latency,
}

/// A finished recording of a command.
pub struct CommandRecording {
    /// The trace (marks from the control file included).
    pub trace: Trace,
    /// Its sidecar; the base image is `base.img` next to it.
    pub sidecar: Sidecar,
    /// The base image in the work directory.
    pub base_image: PathBuf,
    /// The command's exit code (`None`: killed by a signal).
    pub exit_code: Option<i32>,
    /// Block requests seen by the tracepoints, if annotation ran.
    pub requests: Option<Vec<BlockRequest>>,
    /// How the requests mapped onto the trace.
    pub annotation: Option<Annotation>,
    /// FUA writes and their emulating flushes found in the trace (FUSE recorder only:
    /// dm-log-writes logs FUA itself).
    pub fua: Option<super::tracefs::FuaMarking>,
}

/// The JSON the sidecar keeps under `workload` for a command: an empty op list (the
/// workload oracle has nothing to judge) plus the command line.
fn command_workload(command: &[String]) -> serde_json::Value {
    serde_json::json!({
        "name": format!("command: {}", command.join(" ")),
        "property": null,
        "setup": [],
        "ops": [],
        "drain": [],
        "command": command,
    })
}

/// Reads lines from the control FIFO until stopped, handing each non-empty one to
/// `mark`. Opened read-write so that it never sees end-of-file between writers.
struct MarkReader {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MarkReader {
    fn start(path: &Path, mark: Arc<dyn Fn(&str) + Send + Sync>) -> Result<MarkReader, Error> {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666))
            .map_err(|e| io_err(path)(e.into()))?;
        let mut fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io_err(path))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let max = max_mark_len(SECTOR_SIZE as u32);
        let thread = std::thread::spawn(move || {
            let mut pending: Vec<u8> = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let got = match fifo.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                    Err(_) => 0,
                };
                if got == 0 {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                pending.extend_from_slice(&buf[..got]);
                while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    let text = String::from_utf8_lossy(&line).replace('\0', " ");
                    let mut text = text.trim().to_owned();
                    if text.is_empty() {
                        continue;
                    }
                    // Only bob's disk may notify durability (and only a file system may
                    // release output): a program's mark that looks like either is logged
                    // as the program's.
                    if text.starts_with(crate::trace::ADN_PREFIX)
                        || text.starts_with(crate::trace::OUTPUT_PREFIX)
                    {
                        text.insert_str(0, "program ");
                    }
                    if text.len() > max {
                        let mut cut = max;
                        while !text.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        text.truncate(cut);
                    }
                    mark(&text);
                }
            }
        });
        Ok(MarkReader { stop, thread: Some(thread) })
    }

    fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MarkReader {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run_command(command: &[String], mnt: &Path, fifo: &Path) -> Result<Option<i32>, Error> {
    let program = command.first().ok_or_else(|| Error::Unavailable {
        config: "bob record".into(),
        reason: "no command given (bob record --fs CONFIG --out DIR -- CMD ARGS...)".into(),
    })?;
    cmd::Cmd::new(program, cmd::UNBOUNDED)
        .args(&command[1..])
        .current_dir(mnt)
        .env(MARK_FILE_ENV, fifo)
        .env(MOUNT_ENV, mnt)
        .run_attached()
        .map_err(|e| Error::Device(e.into()))
}

fn start_tracing(mode: Annotate, dev: &Path) -> Result<Option<Tracing>, Error> {
    Ok(match mode {
        Annotate::Off => None,
        Annotate::Auto => super::default_tracing(dev).map(Tracing::Tracefs),
        Annotate::Tracefs => {
            Some(Tracing::Tracefs(super::tracefs::TracefsSession::start(dev).map_err(|e| {
                Error::Unavailable { config: "--annotate tracefs".into(), reason: e.to_string() }
            })?))
        }
        Annotate::Blktrace => {
            Some(Tracing::Blktrace(super::blktrace_live::BlktraceSession::start(dev)?))
        }
    })
}

/// Makes the file system, runs the command in it, and records everything until the
/// unmount.
pub fn record_command(req: &CommandRequest<'_>) -> Result<CommandRecording, Error> {
    if let Backend::DmLogWrites { log_dev } = &req.backend {
        return record_command_dm(req, log_dev);
    }
    let config = req.config;
    let mut md = make_and_mount(config, req.device, req.work_dir, req.timeouts)?;
    mount::syncfs(&md.mnt)?;
    md.disk.set_latency(req.latency);
    md.disk.start(&md.log_path)?;
    let tracing = start_tracing(req.annotate, &md.dev)?;
    let fifo = req.work_dir.join("marks.fifo");
    let disk = md.disk.clone();
    let reader = MarkReader::start(&fifo, Arc::new(move |text: &str| disk.mark(text)))?;
    let exit_code = run_command(req.command, &md.mnt, &fifo);
    reader.stop();
    let unmounted = md.unmount();
    let traced = match tracing {
        Some(t) => Some(t.stop()?),
        None => None,
    };
    // A failure to write the log comes first: it explains a failing command.
    let unmounted = match unmounted {
        Err(e @ Error::Log(_)) => return Err(e),
        other => other,
    };
    let exit_code = exit_code?;
    let mut trace = unmounted?;
    super::check_flushes_seen(config, &trace, &md.dev)?;
    let base_path = md.base_path.clone();
    md.release()?;
    let (annotation, fua) = match traced.as_ref().map(|t| t.annotate(&mut trace)) {
        Some((a, f)) => (Some(a), Some(f)),
        None => (None, None),
    };
    if annotation.is_some() {
        // Keep the log file in step with the METADATA and FUA bits, so saving still
        // copies it.
        trace.write_flags_to_file()?;
    }
    let mut sidecar = command_sidecar(config, req.command, &base_path)?;
    sidecar.fua = fua.clone();
    let requests = traced.map(|t| t.requests);
    Ok(CommandRecording {
        trace,
        sidecar,
        base_image: base_path,
        exit_code,
        requests,
        annotation,
        fua,
    })
}

fn command_sidecar(
    config: &FsConfig,
    command: &[String],
    base_path: &Path,
) -> Result<Sidecar, Error> {
    let blake3 = crate::files::file_digest(base_path).map_err(io_err(base_path))?;
    Ok(Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: crate::host::kernel_release(),
        config: config.name.into(),
        property: None,
        workload: command_workload(command),
        observed: json_value("observed tree", &workloads::Observed::default())?,
        base_image: BaseImageInfo {
            file: "base.img".into(),
            size_bytes: config.image_bytes,
            blake3,
        },
        ops: Vec::new(),
        roles: Vec::new(),
        schedule: None,
        recording: None,
        fua: None,
    })
}

/// The same with the kernel's dm-log-writes target: mkfs on a loop device over the base
/// image, freeze a copy as the base image, build the target over it, mount, run, unmount,
/// remove the target, read the log device.
fn record_command_dm(req: &CommandRequest<'_>, log_dev: &Path) -> Result<CommandRecording, Error> {
    use super::dmlogwrites::DmTarget;
    let config = req.config;
    let dm_err = Error::DmLogWrites;
    super::dm_log_writes_available()
        .map_err(|reason| Error::Unavailable { config: "dm-log-writes".into(), reason })?;
    dm_annotation(req.annotate)?;
    let data_path = req.work_dir.join("data.img");
    let base_path = req.work_dir.join("base.img");
    let mnt = req.work_dir.join("record-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    let f = std::fs::File::create(&data_path).map_err(io_err(&data_path))?;
    f.set_len(config.image_bytes).map_err(io_err(&data_path))?;
    drop(f);
    let mut data_dev = match req.device {
        Some(d) => crate::device::loopdev::LoopDevice::attach(d, &data_path)?,
        None => crate::device::loopdev::LoopDevice::attach_free(&data_path)?,
    };
    // A device-mapper device above it passes flushes only if the device below takes them.
    data_dev.pass_flushes()?;
    config.mkfs_on(data_dev.path(), req.timeouts.mkfs)?;
    crate::files::copy_sparse(&data_path, &base_path).map_err(io_err(&base_path))?;
    let name = format!("bob-log-{}", std::process::id());
    let target = Arc::new(DmTarget::create(&name, data_dev.path(), log_dev).map_err(dm_err)?);
    let fs_mount = mount::mount(&target.device(), &mnt, config.fstype, config.mount_options)?;
    let fifo = req.work_dir.join("marks.fifo");
    let marker = target.clone();
    // A mark the target refused would be missing from the trace without a word: the
    // first such failure ends the recording once the command has run.
    let mark_failed: Arc<std::sync::Mutex<Option<super::dmlogwrites::Error>>> = Arc::default();
    let failed = mark_failed.clone();
    let reader = MarkReader::start(
        &fifo,
        Arc::new(move |text: &str| {
            if let Err(e) = marker.mark(text) {
                failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            }
        }),
    )?;
    let exit_code = run_command(req.command, &mnt, &fifo);
    reader.stop();
    let unmounted = fs_mount.unmount();
    let exit_code = exit_code?;
    unmounted?;
    if let Some(e) = mark_failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(dm_err(e));
    }
    let target = Arc::try_unwrap(target).map_err(|_| Error::Unavailable {
        config: "dm-log-writes".into(),
        reason: "mark reader still holds the target".into(),
    })?;
    let mut trace = target.finish().map_err(dm_err)?;
    super::dmlogwrites::drop_end_mark(&mut trace);
    super::check_flushes_seen(config, &trace, data_dev.path())?;
    data_dev.detach()?;
    let sidecar = command_sidecar(config, req.command, &base_path)?;
    Ok(CommandRecording {
        trace,
        sidecar,
        base_image: base_path,
        exit_code,
        requests: None,
        annotation: None,
        fua: None,
    })
}

/// Whether block-request annotations go with the dm-log-writes recorder: no. The target
/// logs FUA and REQ_META itself, and a device-mapper device is bio-based, so the block
/// tracepoints' requests (what annotations match entries to) never fire on it; the
/// default (`auto`) simply has none, an explicit request is refused.
fn dm_annotation(mode: Annotate) -> Result<(), Error> {
    match mode {
        Annotate::Off | Annotate::Auto => Ok(()),
        Annotate::Tracefs | Annotate::Blktrace => Err(Error::Unavailable {
            config: "--annotate".into(),
            reason: "the dm-log-writes target logs FUA and REQ_META itself, and a \
                     device-mapper device has no block requests to annotate with; use \
                     --annotate auto or none"
                .into(),
        }),
    }
}

/// Writes a mark line to the control FIFO at `path` and waits (up to `timeout`) until bob
/// has read it, so that the mark lands before whatever the caller does next.
pub fn send_mark(path: &Path, text: &str, timeout: Duration) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::io::AsRawFd;
    let meta = std::fs::metadata(path)?;
    if !std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not bob's control FIFO (is `bob record` running?)",
        ));
    }
    // Non-blocking open fails with ENXIO when no bob is reading, instead of hanging.
    let mut f =
        std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let line = format!("{}\n", text.replace('\n', " "));
    f.write_all(line.as_bytes())?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let mut pending: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int into `pending`, which we own.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), libc::FIONREAD, &mut pending) };
        if rc != 0 || pending == 0 {
            // Give the reader the moment between its read and the mark's insertion.
            std::thread::sleep(Duration::from_millis(1));
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "bob did not read the mark in time",
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dm_log_writes_takes_no_block_request_annotations() {
        assert!(dm_annotation(Annotate::Auto).is_ok());
        assert!(dm_annotation(Annotate::Off).is_ok());
        let e = dm_annotation(Annotate::Tracefs).unwrap_err().to_string();
        assert!(e.starts_with("--annotate: the dm-log-writes target logs FUA"), "{e}");
        assert!(dm_annotation(Annotate::Blktrace).is_err());
    }
}
