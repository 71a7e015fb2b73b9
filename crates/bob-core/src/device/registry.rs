//! Ownership of what bob creates, across processes: each bob process registers its
//! scratch directories in a state directory (`/run/bob`, or `$BOB_STATE_DIR`) with its pid
//! and start time. Everything bob binds or mounts lives below a scratch directory (mount
//! points, the FUSE disk, the files loop devices are bound to), so a scratch directory is
//! a complete key for what to release.
//!
//! A process that exits normally, errors, panics or is interrupted releases its own
//! resources with guards and removes its record. After SIGKILL nothing runs, so the next
//! bob start (and `bob cleanup`) reclaims the scratch directories of records whose process
//! is gone: kernel mounts below them, loop devices bound to files below them, the FUSE
//! mount, the directory. It never touches a live process's resources, nor anything that
//! no record names.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::mounts;
use serde::{Deserialize, Serialize};

impl Reclaimed {
    /// What was released, counted.
    fn counts(&self) -> String {
        format!(
            "{} mounts, {} dm targets, {} loop devices, {} scratch dirs, {} tracefs instances",
            self.mounts.len(),
            self.dm_targets.len(),
            self.loop_devices.len(),
            self.dirs.len(),
            self.tracefs_instances.len()
        )
    }

    /// One line to say before a command starts, if dead processes had left anything.
    pub fn notice(&self) -> Option<String> {
        let any = !self.processes.is_empty() || !self.tracefs_instances.is_empty();
        any.then(|| {
            format!(
                "reclaimed what {} killed bob process(es) left: {}",
                self.processes.len(),
                self.counts()
            )
        })
    }
}

impl std::fmt::Display for Reclaimed {
    /// What `bob cleanup` says in text: the counts, then each failure.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "reclaimed {} dead bob process(es): {}", self.processes.len(), self.counts())?;
        for failure in &self.failures {
            writeln!(f, "  could not release: {failure}")?;
        }
        Ok(())
    }
}

/// One process's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The bob process.
    pub pid: u32,
    /// Its start time (clock ticks since boot, /proc/PID/stat field 22), so a reused pid
    /// is not mistaken for the process that wrote the record.
    pub start_time: u64,
    /// Scratch directories it owns.
    pub work_dirs: Vec<PathBuf>,
}

/// What a reclaim released.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reclaimed {
    /// Dead processes whose records were processed.
    pub processes: Vec<u32>,
    /// Kernel and FUSE mounts unmounted.
    pub mounts: Vec<PathBuf>,
    /// Loop devices unbound.
    pub loop_devices: Vec<PathBuf>,
    /// Device-mapper targets removed (the dm-log-writes recorder's), by name.
    pub dm_targets: Vec<String>,
    /// Scratch directories removed.
    pub dirs: Vec<PathBuf>,
    /// Block-tracepoint instances removed (see `record::tracefs::reclaim_dead_instances`).
    pub tracefs_instances: Vec<PathBuf>,
    /// What could not be released, one line each.
    pub failures: Vec<String>,
}

/// The state directory.
pub fn state_dir() -> PathBuf {
    std::env::var_os("BOB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/bob"))
}

/// Start time of `pid`, if it is running.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn record_path(pid: u32) -> PathBuf {
    state_dir().join(format!("{pid}.json"))
}

fn read_record(path: &Path) -> Option<Record> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn write_record(record: &Record) -> std::io::Result<()> {
    let dir = state_dir();
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{}.tmp", record.pid));
    std::fs::write(&tmp, serde_json::to_vec_pretty(record)?)?;
    std::fs::rename(&tmp, record_path(record.pid))
}

/// Serializes this process's read-modify-write of its record: several runs (threads)
/// of one process share it, and they would race on the temporary file.
static RECORD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Adds `dir` to this process's record.
pub(crate) fn register(dir: &Path) -> std::io::Result<()> {
    let _guard = RECORD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    let path = record_path(pid);
    let mut record = read_record(&path).unwrap_or(Record {
        pid,
        start_time: start_time(pid).unwrap_or(0),
        work_dirs: Vec::new(),
    });
    if !record.work_dirs.iter().any(|d| d == dir) {
        record.work_dirs.push(dir.to_owned());
    }
    write_record(&record)
}

/// Removes `dir` from this process's record (the record goes when it is empty).
pub(crate) fn unregister(dir: &Path) {
    let _guard = RECORD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    let path = record_path(pid);
    if let Some(mut record) = read_record(&path) {
        record.work_dirs.retain(|d| d != dir);
        if record.work_dirs.is_empty() {
            // A record left behind names a process that is gone: `bob cleanup` removes it.
            let _ = std::fs::remove_file(&path);
        } else {
            let _ = write_record(&record);
        }
    }
}

/// Whether the record's process is running. A process whose main thread has exited
/// (zombie leader) counts as dead: after SIGKILL, a thread of it can stay blocked on I/O
/// to its own loop devices, which its dead FUSE threads will never answer; only aborting
/// its FUSE connection (which reclaiming does first) lets it finish dying.
fn alive(record: &Record) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", record.pid)) else {
        return false;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { return false };
    let mut fields = rest.split_whitespace();
    let state = fields.next().unwrap_or("X");
    let started: Option<u64> = fields.nth(18).and_then(|f| f.parse().ok());
    let same = record.start_time == 0 || started == Some(record.start_time);
    same && !matches!(state, "Z" | "X" | "x") && !kill_pending(record.pid)
}

/// Whether SIGKILL is pending for the process: its leader may sit in uninterruptible I/O
/// to the process's own dead FUSE disk, dying but unable to finish.
fn kill_pending(pid: u32) -> bool {
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.status())
        .is_ok_and(|s| (s.shdpnd | s.sigpnd) & SIGKILL_BIT != 0)
}

/// Waits until no thread of `pid` other than its (zombie) leader is left, or `timeout`.
fn wait_for_threads_to_exit(pid: u32, timeout: Duration) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        let threads = match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(tasks) => {
                tasks.flatten().filter(|t| t.file_name().to_str() != Some(&pid.to_string())).count()
            }
            Err(_) => 0,
        };
        if threads == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// FUSE mounts at or below `dir` with their connection numbers (the mount's minor device
/// number names its directory in /sys/fs/fuse/connections).
fn fuse_connections_below(dir: &Path) -> Vec<(PathBuf, u32)> {
    mounts::mountinfo()
        .into_iter()
        .filter(|m| m.fstype.starts_with("fuse") && m.mount_point.starts_with(dir))
        .map(|m| (m.mount_point, m.dev.1))
        .collect()
}

/// Where the kernel's FUSE control file system lives.
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Aborts FUSE connection `minor`: every request pending on it fails at once, so I/O
/// stuck on a dead server completes (with an error) instead of hanging. The abort file
/// lives in fusectl, which not every machine mounts (this VM does not): then it is
/// mounted for the abort and unmounted afterwards, so the machine is left as found.
/// Without this, a SIGKILLed bob's thread stuck on its own disk held an ext4 lock and
/// every `sync()` on the machine blocked until fusectl was mounted by hand.
pub fn abort_fuse_connection(minor: u32) -> std::io::Result<()> {
    let abort = PathBuf::from(format!("{FUSECTL}/{minor}/abort"));
    let mounted_here = if abort.exists() {
        false
    } else {
        nix::mount::mount(
            Some("fusectl"),
            FUSECTL,
            Some("fusectl"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(std::io::Error::from)?;
        true
    };
    let written = std::fs::write(&abort, "1");
    if mounted_here {
        let _ = nix::mount::umount2(FUSECTL, nix::mount::MntFlags::MNT_DETACH);
    }
    match written {
        // The connection is already gone: nothing to abort.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The FUSE connection number of the mount at exactly `target`, if one is there now.
/// Connection numbers are reused as soon as a connection ends, so an abort by number is
/// safe only while the mount it was taken from is still in place.
pub(crate) fn fuse_connection_at(target: &Path) -> Option<u32> {
    fuse_connections_below(target).into_iter().find(|(t, _)| t == target).map(|(_, n)| n)
}

/// Aborts the FUSE connections below `dir` (see [`abort_fuse_connection`]).
fn abort_fuse_below(dir: &Path, out: &mut Reclaimed) {
    for (target, minor) in fuse_connections_below(dir) {
        if let Err(e) = abort_fuse_connection(minor) {
            out.failures.push(format!(
                "{}: abort FUSE connection {minor} ({FUSECTL}): {e}",
                target.display()
            ));
        }
    }
}

/// Device-mapper devices (by name) built over a loop device whose backing file lies below
/// `dir`: the targets of the dm-log-writes recorder, which hold its loop devices.
fn dm_targets_below(dir: &Path) -> Vec<String> {
    let loops: Vec<String> = mounts::loops_below(dir)
        .iter()
        .filter_map(|l| l.device.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let mut v = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/sys/block") {
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("dm-") {
                continue;
            }
            let over_ours = std::fs::read_dir(e.path().join("slaves")).is_ok_and(|slaves| {
                slaves.flatten().any(|s| loops.contains(&s.file_name().to_string_lossy().into()))
            });
            if let (true, Ok(name)) = (over_ours, std::fs::read_to_string(e.path().join("dm/name")))
            {
                v.push(name.trim().to_owned());
            }
        }
    }
    v
}

/// Removes the device-mapper device `name` (and its node, where no udev does).
fn remove_dm_target(name: &str) -> Result<(), String> {
    let timeout = Duration::from_secs(60);
    let out = super::cmd::run("dmsetup", &["remove", name], timeout).map_err(|e| e.to_string())?;
    if out.code != Some(0) {
        return Err(format!("dmsetup remove {name}: {}", out.last_line()));
    }
    if Path::new("/dev/mapper").join(name).exists() {
        let _ = super::cmd::run("dmsetup", &["mknodes", name], timeout);
    }
    Ok(())
}

/// Releases everything below `dir`: kernel mounts, then device-mapper targets over its
/// loop devices, then loop devices, then the FUSE mount, then the directory itself.
pub(crate) fn release_dir(dir: &Path, out: &mut Reclaimed) {
    let is_fuse = |m: &Path| {
        mounts::mountinfo().iter().any(|e| e.mount_point == m && e.fstype.starts_with("fuse"))
    };
    // Kernel mounts of states first: they hold the loop devices.
    for m in mounts::mounts_below(dir).into_iter().filter(|m| !is_fuse(m)) {
        match super::mount::unmount_path(&m) {
            Ok(()) => out.mounts.push(m),
            Err(e) => out.failures.push(e.to_string()),
        }
    }
    for name in dm_targets_below(dir) {
        match remove_dm_target(&name) {
            Ok(()) => out.dm_targets.push(name),
            Err(e) => out.failures.push(e),
        }
    }
    for dev in mounts::loops_below(dir).into_iter().map(|l| l.device) {
        match super::loopdev::clear_device(&dev) {
            Ok(()) => out.loop_devices.push(dev),
            Err(e) => out.failures.push(e.to_string()),
        }
    }
    for m in mounts::mounts_below(dir) {
        match super::mount::unmount_path(&m) {
            Ok(()) => out.mounts.push(m),
            Err(e) => out.failures.push(e.to_string()),
        }
    }
    if dir.exists() {
        if mounts::mounts_below(dir).is_empty() {
            match std::fs::remove_dir_all(dir) {
                Ok(()) => out.dirs.push(dir.to_owned()),
                Err(e) => out.failures.push(format!("{}: {e}", dir.display())),
            }
        } else {
            out.failures
                .push(format!("{}: still has mounts below it; left in place", dir.display()));
        }
    }
}

/// Reclaims the resources of every registered bob process that is no longer running.
pub fn reclaim_dead() -> Reclaimed {
    let mut out = Reclaimed::default();
    let Ok(entries) = std::fs::read_dir(state_dir()) else { return out };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Some(record) = read_record(&path) else { continue };
        if alive(&record) {
            continue;
        }
        for dir in &record.work_dirs {
            abort_fuse_below(dir, &mut out);
        }
        // Once its FUSE connections fail, the process's blocked threads finish their
        // system calls and die; one of those calls may be a mount that still lands, so
        // release only after they are gone, and go over the directories again if
        // something appeared meanwhile.
        wait_for_threads_to_exit(record.pid, Duration::from_secs(10));
        for round in 0..5 {
            let mut pass = Reclaimed::default();
            for dir in &record.work_dirs {
                release_dir(dir, &mut pass);
            }
            let settled = pass.failures.is_empty() && record.work_dirs.iter().all(|d| !d.exists());
            out.mounts.append(&mut pass.mounts);
            out.loop_devices.append(&mut pass.loop_devices);
            out.dm_targets.append(&mut pass.dm_targets);
            out.dirs.append(&mut pass.dirs);
            if settled || round == 4 {
                out.failures.append(&mut pass.failures);
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        out.processes.push(record.pid);
        // What it held is reclaimed; a record left behind is reclaimed again, to no effect.
        let _ = std::fs::remove_file(&path);
    }
    out
}
