//! Block tracepoints while recording: the kernel's `block_rq_issue` and
//! `block_rq_complete` events of the recording loop device, read from a tracefs instance
//! of bob's own, annotate the trace with true request boundaries and META/SYNC flags; its
//! `block_bio_queue` events show which writes the file system sent with FUA before the
//! block layer emulated it (see [`crate::trace::fua`]).
//!
//! The session works in `instances/bob-<pid>-<n>` under tracefs, never in the global
//! buffer, with both events filtered to the device's `dev_t`. It reads `trace_pipe`
//! while recording (so a long workload cannot overflow the buffer), and on every exit path
//! (stop, error, drop) turns its events off and removes the instance. Where tracefs is not
//! mounted, [`TracefsSession::start`] mounts it on a private directory for the session and
//! unmounts it afterwards, so the machine is left as it was found.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use crate::trace::blktrace::{annotate, Annotation, BlockRequest};
use crate::trace::blktrace::{pair_events, parse_rwbs, ReqEvent};
pub use crate::trace::fua::FuaMarking;
pub(crate) use crate::trace::fua::{mark_fua, QueuedBio};

/// Where tracefs is mounted by default.
const DEFAULT_TRACEFS: &str = "/sys/kernel/tracing";

const EVENTS: [&str; 3] = ["block_rq_issue", "block_rq_complete", "block_bio_queue"];

/// What a session saw: the driver's requests, and the bios as queued.
#[derive(Clone, Debug, Default)]
pub(crate) struct Traced {
    /// Requests in issue order (see [`pair_events`]).
    pub requests: Vec<BlockRequest>,
    /// Bios in queue order.
    pub bios: Vec<QueuedBio>,
}

impl Traced {
    /// Annotates `trace` (request boundaries, METADATA) and marks its FUA writes and the
    /// flushes that only emulated them.
    pub fn annotate(&self, trace: &mut crate::trace::Trace) -> (Annotation, FuaMarking) {
        let a = annotate(trace, &self.requests);
        let fua = mark_fua(trace, &self.requests, &self.bios, &a.request_of_entry);
        (a, fua)
    }
}

/// One event line of the pipe.
enum Line {
    Req(ReqEvent),
    Bio(QueuedBio),
}

/// Tracing errors, naming the tracefs file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// tracefs is not available on this kernel.
    #[error("tracefs is not available: {0}")]
    Unavailable(String),
    /// A tracefs file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The device to trace is not a block device.
    #[error("{path}: not a block device")]
    NotBlock {
        /// The path.
        path: PathBuf,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// Prefix of the private tracefs mount a recording makes when tracefs is mounted nowhere.
const PRIVATE_PREFIX: &str = "bob-tracefs-";

/// The mount point of tracefs in this process's mount namespace, if mounted anywhere but
/// in another recording's private mount point, which goes away when that recording ends
/// (two recordings at once, as in the tests, took each other's for their own).
fn mounted_tracefs() -> Option<PathBuf> {
    let found: Vec<PathBuf> = crate::device::mounts::mountinfo()
        .into_iter()
        .filter(|m| m.fstype == "tracefs")
        .map(|m| m.mount_point)
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(PRIVATE_PREFIX)))
        .collect();
    found.iter().find(|p| p.as_path() == Path::new(DEFAULT_TRACEFS)).or(found.first()).cloned()
}

/// Removes the tracefs instances (`instances/bob-<pid>-<n>`) of bob processes that no
/// longer exist: a SIGKILLed recording cannot remove its own, and the kernel keeps
/// tracing block requests into it until someone does. A pid that exists again (reused)
/// keeps its instances: better one left over than another process's removed. Returns the
/// instances removed and, one line each, those that could not be.
pub(crate) fn reclaim_dead_instances() -> (Vec<PathBuf>, Vec<String>) {
    let (mut removed, mut failures) = (Vec::new(), Vec::new());
    let Some(root) = mounted_tracefs() else { return (removed, failures) };
    let Ok(entries) = std::fs::read_dir(root.join("instances")) else {
        return (removed, failures);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("bob-")
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        // A dead process's instance: the remove_dir below says whether it went.
        let _ = std::fs::write(path.join("tracing_on"), "0");
        match std::fs::remove_dir(&path) {
            Ok(()) => removed.push(path),
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    (removed, failures)
}

/// Whether the kernel has tracefs with block events (mounted or mountable).
fn kernel_has_tracefs() -> bool {
    crate::fs::kernel_has("tracefs")
}

static INSTANCE_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A running tracefs session on one device.
pub(crate) struct TracefsSession {
    instance: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Result<Vec<Line>, Error>>>,
    cleaned: bool,
    // Declared last: dropped after the instance is gone.
    _private: Option<(crate::device::mount::Mount, tempfile::TempDir)>,
}

impl TracefsSession {
    /// Starts tracing block requests of the block device `dev`.
    pub fn start(dev: &Path) -> Result<TracefsSession, Error> {
        let meta = std::fs::metadata(dev).map_err(io(dev))?;
        if !std::os::unix::fs::FileTypeExt::is_block_device(&meta.file_type()) {
            return Err(Error::NotBlock { path: dev.to_owned() });
        }
        let rdev = meta.rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        // The tracepoints' dev field is the kernel's dev_t: major << 20 | minor.
        let kdev = (u64::from(major) << 20) | u64::from(minor);

        let (root, private) = match mounted_tracefs() {
            Some(root) => (root, None),
            None => {
                if !kernel_has_tracefs() {
                    return Err(Error::Unavailable("no tracefs in /proc/filesystems".into()));
                }
                let dir = tempfile::Builder::new()
                    .prefix(PRIVATE_PREFIX)
                    .tempdir()
                    .map_err(io(Path::new("/tmp")))?;
                let m =
                    crate::device::mount::mount(Path::new("tracefs"), dir.path(), "tracefs", "")
                        .map_err(|e| Error::Unavailable(e.to_string()))?;
                (dir.path().to_owned(), Some((m, dir)))
            }
        };
        if !root.join("events/block/block_rq_issue").is_dir() {
            return Err(Error::Unavailable(format!(
                "{}: this kernel has no block_rq_issue tracepoint",
                root.display()
            )));
        }
        let name =
            format!("bob-{}-{}", std::process::id(), INSTANCE_SEQ.fetch_add(1, Ordering::Relaxed));
        let instance = root.join("instances").join(name);
        std::fs::create_dir(&instance).map_err(io(&instance))?;
        let mut session = TracefsSession {
            instance,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            cleaned: false,
            _private: private,
        };
        // From here on, drop removes the instance whatever fails.
        let write = |rel: &str, value: &str| -> Result<(), Error> {
            let p = session.instance.join(rel);
            std::fs::write(&p, value).map_err(io(&p))
        };
        // Room for a burst while the reader sleeps; the reader drains continuously.
        write("buffer_size_kb", "4096")?;
        for ev in EVENTS {
            // A kernel without block_bio_queue still gets request annotations.
            if ev == "block_bio_queue" && !session.instance.join("events/block").join(ev).is_dir() {
                continue;
            }
            write(&format!("events/block/{ev}/filter"), &format!("dev == {kdev}"))?;
        }
        let pipe_path = session.instance.join("trace_pipe");
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe_path)
            .map_err(io(&pipe_path))?;
        for ev in EVENTS {
            if session.instance.join("events/block").join(ev).is_dir() {
                write(&format!("events/block/{ev}/enable"), "1")?;
            }
        }
        write("tracing_on", "1")?;
        let stop = session.stop.clone();
        session.reader = Some(std::thread::spawn(move || read_pipe(pipe, &pipe_path, &stop)));
        Ok(session)
    }

    /// Stops tracing and returns the device's requests (in issue order) and bios.
    pub(crate) fn stop(mut self) -> Result<Traced, Error> {
        self.disable();
        self.stop.store(true, Ordering::Relaxed);
        let events = match self.reader.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Unavailable("trace reader panicked".into())),
            None => Ok(Vec::new()),
        };
        self.cleanup();
        let mut req_events = Vec::new();
        let mut bios = Vec::new();
        for line in events? {
            match line {
                Line::Req(e) => req_events.push(e),
                Line::Bio(b) => bios.push(b),
            }
        }
        Ok(Traced { requests: pair_events(req_events), bios })
    }

    /// Best effort, on every exit path: removing the instance (its drop) stops it anyway,
    /// and a failure here has no caller to tell.
    fn disable(&self) {
        for ev in EVENTS {
            let _ = std::fs::write(self.instance.join(format!("events/block/{ev}/enable")), "0");
        }
        let _ = std::fs::write(self.instance.join("tracing_on"), "0");
    }

    fn cleanup(&mut self) {
        if self.cleaned {
            return;
        }
        self.disable();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        // rmdir fails while a file of the instance is open; the reader has closed it.
        for _ in 0..50 {
            match std::fs::remove_dir(&self.instance) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => break,
            }
        }
        self.cleaned = true;
    }
}

impl Drop for TracefsSession {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn read_pipe(mut pipe: std::fs::File, path: &Path, stop: &AtomicBool) -> Result<Vec<Line>, Error> {
    let mut events = Vec::new();
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    let line = String::from_utf8_lossy(&line);
                    if let Some(e) = parse_line(&line) {
                        events.push(Line::Req(e));
                    } else if let Some(b) = parse_bio_line(&line) {
                        events.push(Line::Bio(b));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Stop only once the buffer is drained after the events were turned off.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(path)(e)),
        }
    }
    Ok(events)
}

/// Parses one `trace_pipe` line of `block_bio_queue`, e.g.
/// `jbd2/loop0-8-1234 [001] ..... 13.000000: block_bio_queue: 7,0 FWFSM 98324 + 2 [jbd2/loop0-8]`.
fn parse_bio_line(line: &str) -> Option<QueuedBio> {
    let at = line.find(": block_bio_queue: ")?;
    let time_ns = parse_stamp(line[..at].split_whitespace().last()?)?;
    let t: Vec<&str> = line[at + ": block_bio_queue: ".len()..].split_whitespace().collect();
    let (op, flags) = parse_rwbs(t.get(1)?)?;
    let plus = t.iter().position(|&x| x == "+")?;
    let sector: u64 = t.get(plus.checked_sub(1)?)?.parse().ok()?;
    let nr: u64 = t.get(plus + 1)?.parse().ok()?;
    Some(QueuedBio { time_ns, sector, bytes: nr.checked_mul(512)?, op, flags })
}

/// A trace_pipe time stamp (`12.345678`, seconds) in ns.
fn parse_stamp(time: &str) -> Option<u64> {
    let (sec, frac) = time.split_once('.')?;
    let frac_ns: u64 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
    sec.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parses one `trace_pipe` line of `block_rq_issue` or `block_rq_complete`, e.g.
/// `kworker/u8:2-91 [001] ..... 12.345678: block_rq_issue: 7,0 WSM 4096 () 2048 + 8 none,0,0 [kworker/u8:2]`.
pub(crate) fn parse_line(line: &str) -> Option<ReqEvent> {
    let (complete, at) = if let Some(i) = line.find(": block_rq_issue: ") {
        (false, i)
    } else {
        (true, line.find(": block_rq_complete: ")?)
    };
    let time_ns = parse_stamp(line[..at].split_whitespace().last()?)?;
    let rest = &line[at..];
    let rest = &rest[rest.find(": ").map(|i| i + 2)?..];
    let rest = &rest[rest.find(": ").map(|i| i + 2)?..];
    let t: Vec<&str> = rest.split_whitespace().collect();
    let (major, minor) = t.first()?.split_once(',')?;
    let rwbs = (*t.get(1)?).to_owned();
    let plus = t.iter().position(|&x| x == "+")?;
    let sector: u64 = t.get(plus.checked_sub(1)?)?.parse().ok()?;
    let nr: u64 = t.get(plus + 1)?.parse().ok()?;
    let error = if complete {
        t.last().and_then(|x| x.strip_prefix('[')?.strip_suffix(']')?.parse().ok()).unwrap_or(0)
    } else {
        0
    };
    Some(ReqEvent {
        complete,
        time_ns,
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        sector,
        bytes: nr.checked_mul(512)?,
        rwbs,
        error,
    })
}

/// Starts the block-tracepoint annotator on `dev` (the default of every recording), on
/// tracefs where it is mounted, else on a private mount of it for the session (a fresh
/// machine often has it unmounted, and without it the FUA marks that the real-FUA disk
/// model needs would be missing); `None` where the kernel has no tracefs or it cannot
/// start, which only costs the annotations.
pub(crate) fn default_tracing(dev: &Path) -> Option<TracefsSession> {
    // `start` mounts tracefs privately when it is not mounted, and refuses a kernel
    // without it.
    TracefsSession::start(dev).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root and tracefs, which these tests need: missing under CI=true is a failure;
    /// elsewhere the test says it tested nothing.
    fn prerequisites() -> bool {
        let missing = match (nix::unistd::geteuid().is_root(), kernel_has_tracefs()) {
            (false, _) => "root",
            (_, false) => "tracefs block events",
            _ => return true,
        };
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("this test needs {missing}");
        }
        eprintln!("NOT TESTED: this test needs {missing}");
        false
    }
    use crate::trace::blktrace::ReqOp;

    #[test]
    fn parses_issue_and_complete_lines_of_this_kernel() {
        let issue = "  kworker/u8:2-91      [001] ..... 12.345678: block_rq_issue: 7,0 WSM 4096 () 2048 + 8 none,0,0 [kworker/u8:2]";
        let e = parse_line(issue).unwrap();
        assert!(!e.complete);
        assert_eq!((e.major, e.minor, e.sector, e.bytes), (7, 0, 2048, 4096));
        assert_eq!(e.rwbs, "WSM");
        assert_eq!(e.time_ns, 12_345_678_000);
        let done =
            "  <idle>-0   [000] ..s1. 12.400000: block_rq_complete: 7,0 WSM () 2048 + 8 none,0,0 [0]";
        let c = parse_line(done).unwrap();
        assert!(c.complete);
        assert_eq!(c.time_ns, 12_400_000_000);
        let flush =
            "jbd2-1 [000] ..... 13.000001: block_rq_issue: 7,0 FF 0 () 0 + 0 none,0,0 [jbd2]";
        let reqs = pair_events([e, c, parse_line(flush).unwrap()]);
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].complete_ns, Some(12_400_000_000));
        assert!(reqs[0].flags.meta);
        assert_eq!(reqs[1].op, ReqOp::Flush);
        assert!(parse_line("some other: event: line").is_none());
        let bio = parse_bio_line(
            "jbd2/loop0-8-77 [001] ..... 13.5: block_bio_queue: 7,0 FWFSM 98324 + 2 [jbd2/loop0-8]",
        )
        .unwrap();
        assert_eq!((bio.time_ns, bio.sector, bio.bytes), (13_500_000_000, 98324, 1024));
        assert!(bio.flags.preflush && bio.flags.fua && bio.flags.meta);
        assert_eq!(bio.op, ReqOp::Write);
        assert!(parse_line(
            "jbd2-77 [001] ..... 13.5: block_bio_queue: 7,0 FWFSM 98324 + 2 [jbd2/loop0-8]"
        )
        .is_none());
        assert!(parse_line("x 1.5: block_rq_issue: 7,0 WS 4096 () nope + 8").is_none());
    }

    /// Real kernel, real loop device: writes with O_DIRECT and a metadata-free file
    /// appear as write requests of the traced device only; the instance is removed.
    #[test]
    fn traces_a_real_loop_device_and_leaves_no_instance() {
        if !prerequisites() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::File::create(&img).unwrap().set_len(8 << 20).unwrap();
        let lo = crate::device::loopdev::LoopDevice::attach_free(&img).unwrap();
        let session = TracefsSession::start(lo.path()).unwrap();
        let instance = session.instance.clone();
        assert!(instance.is_dir());
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(lo.path())
                .unwrap();
            let mut buf = vec![0u8; 8192];
            // O_DIRECT wants an aligned buffer.
            let off = buf.as_ptr().align_offset(4096);
            let block = &mut buf[off..off + 4096];
            block.fill(7);
            f.write_all_at(block, 1 << 20).unwrap();
            f.sync_all().unwrap();
        }
        let traced = session.stop().unwrap();
        let reqs = traced.requests;
        assert!(!instance.exists(), "instance left behind");
        assert!(
            traced.bios.iter().any(|b| b.sector == 2048 && b.bytes == 4096),
            "block_bio_queue saw the write: {:?}",
            traced.bios
        );
        let w: Vec<_> = reqs.iter().filter(|r| r.op == ReqOp::Write).collect();
        assert!(
            w.iter().any(|r| r.sector == 2048 && r.bytes == 4096 && r.complete_ns.is_some()),
            "{reqs:?}"
        );
        let rdev = std::fs::metadata(lo.path()).unwrap().rdev();
        assert!(reqs.iter().all(|r| r.major == libc::major(rdev) && r.minor == libc::minor(rdev)));
        lo.detach().unwrap();
    }

    /// Another recording's private tracefs mount is never taken for this one's: it goes
    /// away when that recording ends.
    #[test]
    fn another_recordings_private_mount_is_not_taken() {
        if !prerequisites() {
            return;
        }
        let dir = tempfile::Builder::new().prefix(PRIVATE_PREFIX).tempdir().unwrap();
        let m = crate::device::mount::mount(Path::new("tracefs"), dir.path(), "tracefs", "")
            .expect("mount tracefs");
        assert!(dir.path().join("events").is_dir(), "the private mount is tracefs");
        assert_ne!(mounted_tracefs().as_deref(), Some(dir.path()));
        drop(m);
    }
}
