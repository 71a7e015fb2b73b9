//! The live dm-log-writes backend: build the kernel's `log-writes` target over a data
//! device and a log device with dmsetup, insert marks with `dmsetup message`, tear the
//! target down, then read the log device as a dm-log-writes log; and a property workload
//! recorded through it ([`record`], `bob run --backend dm-log-writes`).
//!
//! The dmsetup command lines are built by [`DmLogWrites`] as argv vectors (the same lines
//! xfstests' `common/dmlogwrites` runs), so they are unit-tested without running them;
//! [`DmTarget`] runs them and removes the target on every exit path (drop). Where the
//! kernel has no device-mapper, [`super::dm_log_writes_available`] says so before any of
//! this runs.
//!
//! What the kernel target logs differs from what bob's FUSE disk sees (docs/dm-log-writes.md):
//! it logs a plain write only once a flush covers it (at that flush, in completion order),
//! while a FUA write and a mark go to the log at once, so a mark or FUA write may precede
//! plain writes that completed before it; a `REQ_PREFLUSH | REQ_FUA` write arrives split by
//! device-mapper into an empty flush and a FUA write, and FUA stays a flag (no emulating
//! flush); `REQ_META` is logged as the METADATA flag.

use std::cell::RefCell;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use workloads::{Observed, Phase};

use super::{check_flushes_seen, io_err, run_marked, RecordRequest, Recording, SetupSource};
use crate::device::cmd;
use crate::device::loopdev::LoopDevice;
use crate::device::mount;
use crate::trace::log::read_log;
use crate::trace::{Entry, EntryKind, Trace, SECTOR_SIZE};

/// dm-log-writes backend errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel cannot offer the target.
    #[error("{0}")]
    Unavailable(String),
    /// A device given is not usable.
    #[error("{path}: {reason}")]
    BadDevice {
        /// The device.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// dmsetup failed.
    #[error("{command}: {line}")]
    Dmsetup {
        /// The command line.
        command: String,
        /// Its last line of output.
        line: String,
    },
    /// The target stopped logging (its log device filled up, or it could not allocate):
    /// the log is incomplete, and a trace cut from it would miss writes.
    #[error(
        "{name}: the target stopped logging after {entries} entries, at sector {sectors} of \
         the log device {}: the log device is too small (or the kernel ran out of memory)",
        log_dev.display()
    )]
    LoggingDisabled {
        /// The target.
        name: String,
        /// Entries logged before it stopped.
        entries: u64,
        /// Log device sectors used.
        sectors: u64,
        /// The log device.
        log_dev: PathBuf,
    },
    /// `dmsetup status` said something bob does not understand.
    #[error("dmsetup status {name}: cannot read {line:?}")]
    Status {
        /// The target.
        name: String,
        /// What it printed.
        line: String,
    },
    /// The log lacks the mark bob inserted where recording starts.
    #[error("{0}: the log has no start mark {START_MARK:?}; the target lost it")]
    NoStartMark(PathBuf),
    /// dmsetup could not be run.
    #[error(transparent)]
    Cmd(#[from] cmd::CmdError),
    /// The log device does not hold a readable log.
    #[error(transparent)]
    Log(#[from] crate::trace::log::LogError),
    /// I/O on a device.
    #[error("{path}: {source}")]
    Io {
        /// The device.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The mark bob inserts once the workload's setup is durable: what the log holds before
/// it is the base image, what follows is the trace.
const START_MARK: &str = "bob: recording starts";

/// The mark the kernel target logs last, when it is removed (`log_writes_dtr`).
pub const END_MARK: &str = "dm-log-writes-end";

/// `text` as one argument of a device-mapper message. The kernel splits a message at
/// white space and takes a backslash as quoting the character after it
/// (`dm_split_args`), and the log-writes target takes exactly two arguments (`mark`,
/// the text), so a mark with a space would be refused unless quoted this way.
fn message_arg(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\\' || c.is_ascii_whitespace() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The dmsetup command lines of one dm-log-writes target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmLogWrites {
    /// Target name (`/dev/mapper/<name>`).
    pub name: String,
    /// The data device the file system is written to.
    pub data_dev: PathBuf,
    /// The device the log is written to.
    pub log_dev: PathBuf,
    /// Size of the data device in 512-byte sectors.
    pub sectors: u64,
}

impl DmLogWrites {
    /// The target's table line: `0 <sectors> log-writes <dev> <logdev>`.
    pub fn table(&self) -> String {
        format!(
            "0 {} log-writes {} {}",
            self.sectors,
            self.data_dev.display(),
            self.log_dev.display()
        )
    }
    fn dmsetup(&self, args: &[&str]) -> Vec<String> {
        std::iter::once("dmsetup").chain(args.iter().copied()).map(str::to_owned).collect()
    }
    /// `dmsetup create <name> --table "<table>"`.
    pub fn create(&self) -> Vec<String> {
        self.dmsetup(&["create", &self.name, "--table", &self.table()])
    }
    /// `dmsetup mknodes <name>`: makes `/dev/mapper/<name>` where no udev does (a
    /// virtme-ng guest, a container).
    pub(crate) fn mknodes(&self) -> Vec<String> {
        self.dmsetup(&["mknodes", &self.name])
    }
    /// `dmsetup message <name> 0 mark <text>`: the target logs a MARK entry. The text is
    /// quoted ([`message_arg`]) so that it stays one argument.
    pub fn mark(&self, text: &str) -> Vec<String> {
        self.dmsetup(&["message", &self.name, "0", "mark", &message_arg(text)])
    }
    /// `dmsetup status <name>`: entries logged, log sectors used, whether logging stopped.
    pub fn status(&self) -> Vec<String> {
        self.dmsetup(&["status", &self.name])
    }
    /// `dmsetup remove <name>`: the target logs its end mark and writes the super block.
    pub fn remove(&self) -> Vec<String> {
        self.dmsetup(&["remove", &self.name])
    }
    /// The mapped device the file system is made on.
    pub(crate) fn mapped_device(&self) -> PathBuf {
        Path::new("/dev/mapper").join(&self.name)
    }
}

/// What `dmsetup status` says of a log-writes target (`log_writes_status`:
/// `<start> <len> log-writes <logged entries> <highest log sector> [logging_disabled]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogStatus {
    /// Entries logged so far.
    pub entries: u64,
    /// The last log-device sector (512-byte) in use.
    pub sectors: u64,
    /// Whether the target still logs (it stops for good when its log device is full).
    pub logging: bool,
}

/// Reads `dmsetup status` output of a one-line log-writes table.
fn parse_status(line: &str) -> Option<LogStatus> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "log-writes")?;
    let entries = words.get(at + 1)?.parse().ok()?;
    let sectors = words.get(at + 2)?.parse().ok()?;
    let logging = match words.get(at + 3) {
        None => true,
        Some(&"logging_disabled") => false,
        Some(_) => return None,
    };
    Some(LogStatus { entries, sectors, logging })
}

/// Size of a block device (or file) in 512-byte sectors.
fn device_sectors(path: &Path) -> Result<u64, Error> {
    use std::io::{Seek, SeekFrom};
    let mut f =
        std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    let len =
        f.seek(SeekFrom::End(0)).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    Ok(len / 512)
}

fn run_argv(argv: &[String], timeout: Duration) -> Result<cmd::Output, Error> {
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let out = cmd::run(&argv[0], &args, timeout)?;
    if out.code != Some(0) {
        return Err(Error::Dmsetup { command: argv.join(" "), line: out.last_line() });
    }
    Ok(out)
}

/// Drops the page cache of the block device `dev` (BLKFLSBUF): the target writes the log
/// with bios below any cache, so a read through a cache filled earlier (bob zeroes the
/// super block through it) would see the old bytes.
fn drop_cache(dev: &Path) -> Result<(), Error> {
    const BLKFLSBUF: libc::c_ulong = 0x1261;
    let f =
        std::fs::File::open(dev).map_err(|source| Error::Io { path: dev.to_owned(), source })?;
    // SAFETY: BLKFLSBUF takes no argument.
    if unsafe { libc::ioctl(f.as_raw_fd(), BLKFLSBUF, 0) } != 0 {
        let source = std::io::Error::last_os_error();
        return Err(Error::Io { path: dev.to_owned(), source });
    }
    Ok(())
}

/// A live dm-log-writes target; removed on drop if [`DmTarget::finish`] was not called.
pub(crate) struct DmTarget {
    lines: DmLogWrites,
    removed: bool,
}

const DMSETUP_TIMEOUT: Duration = Duration::from_secs(60);

impl DmTarget {
    /// Creates the target named `name` over `data_dev`, logging to `log_dev`. Both must be
    /// block devices; the log device's first block is zeroed first so that a log left
    /// there by an earlier run is never mistaken for this one.
    pub fn create(name: &str, data_dev: &Path, log_dev: &Path) -> Result<DmTarget, Error> {
        super::dm_log_writes_available().map_err(Error::Unavailable)?;
        for dev in [data_dev, log_dev] {
            let meta = std::fs::metadata(dev)
                .map_err(|source| Error::Io { path: dev.to_owned(), source })?;
            if !meta.file_type().is_block_device() {
                return Err(Error::BadDevice {
                    path: dev.to_owned(),
                    reason: "not a block device".into(),
                });
            }
        }
        if data_dev == log_dev {
            return Err(Error::BadDevice {
                path: log_dev.to_owned(),
                reason: "the log device must differ from the data device".into(),
            });
        }
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(log_dev)
                .map_err(|source| Error::Io { path: log_dev.to_owned(), source })?;
            f.write_all_at(&[0u8; 4096], 0)
                .and_then(|()| f.sync_all())
                .map_err(|source| Error::Io { path: log_dev.to_owned(), source })?;
        }
        let lines = DmLogWrites {
            name: name.to_owned(),
            data_dev: data_dev.to_owned(),
            log_dev: log_dev.to_owned(),
            sectors: device_sectors(data_dev)?,
        };
        run_argv(&lines.create(), DMSETUP_TIMEOUT)?;
        let target = DmTarget { lines, removed: false };
        if !target.device().exists() {
            // No udev made the node (a guest or container without it): dmsetup makes it.
            run_argv(&target.lines.mknodes(), DMSETUP_TIMEOUT)?;
        }
        Ok(target)
    }

    /// The mapped device to make and mount the file system on.
    pub fn device(&self) -> PathBuf {
        self.lines.mapped_device()
    }

    /// Sends a cache flush through the target (fsync of the mapped device: it writes the
    /// device's own dirty pages, then issues an empty flush), which logs every write
    /// completed so far, then the flush.
    pub fn flush(&self) -> Result<(), Error> {
        let dev = self.device();
        std::fs::File::open(&dev)
            .and_then(|f| f.sync_all())
            .map_err(|source| Error::Io { path: dev, source })
    }

    /// Inserts a mark into the log.
    pub fn mark(&self, text: &str) -> Result<(), Error> {
        run_argv(&self.lines.mark(text), DMSETUP_TIMEOUT).map(drop)
    }

    /// What the target says of its log so far.
    pub fn status(&self) -> Result<LogStatus, Error> {
        let out = run_argv(&self.lines.status(), DMSETUP_TIMEOUT)?;
        let line = out.stdout.trim();
        parse_status(line)
            .ok_or_else(|| Error::Status { name: self.lines.name.clone(), line: line.into() })
    }

    /// Removes the target and reads the log it wrote; refuses a log the target stopped
    /// writing (its device full).
    pub fn finish(mut self) -> Result<Trace, Error> {
        let status = self.status()?;
        if !status.logging {
            return Err(Error::LoggingDisabled {
                name: self.lines.name.clone(),
                entries: status.entries,
                sectors: status.sectors,
                log_dev: self.lines.log_dev.clone(),
            });
        }
        self.remove()?;
        let log_dev = self.lines.log_dev.clone();
        drop_cache(&log_dev)?;
        let f = std::fs::File::open(&log_dev)
            .map_err(|source| Error::Io { path: log_dev.clone(), source })?;
        Ok(read_log(std::io::BufReader::new(f))?)
    }
}

impl DmTarget {
    /// Removes the target, and its node where no udev does: `dmsetup mknodes` drops the
    /// node of a device that no longer exists.
    fn remove(&mut self) -> Result<(), Error> {
        run_argv(&self.lines.remove(), DMSETUP_TIMEOUT)?;
        self.removed = true;
        if self.device().exists() {
            run_argv(&self.lines.mknodes(), DMSETUP_TIMEOUT)?;
        }
        Ok(())
    }
}

impl Drop for DmTarget {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.remove();
        }
    }
}

/// Drops the kernel's closing [`END_MARK`] from the end of `trace`: it says only that
/// the target was removed, after the unmount that every recording ends with.
pub fn drop_end_mark(trace: &mut Trace) {
    if trace.entries.last().and_then(Entry::mark_text).as_deref() == Some(END_MARK) {
        trace.entries.pop();
    }
}

/// Splits a recorded log at its [`START_MARK`]: the entries before it (what the device
/// held durably when recording started, to apply to the image the target was built
/// over) and the trace after it. `None` when the log has no such mark.
fn split_at_start(log: Trace) -> Option<(Vec<Entry>, Trace)> {
    let at = log.entries.iter().position(|e| e.mark_text().as_deref() == Some(START_MARK))?;
    let mut entries = log.entries;
    let after = entries.split_off(at + 1);
    entries.pop();
    Some((entries, Trace::new(log.sector_size, after)))
}

/// Applies `entries` (writes and discards; flushes and marks mean nothing to an image) to
/// the image file at `path`, as the device would hold them: a discarded range reads as
/// zeros, as bob's recording disk and replay-log on a file make it.
fn apply_entries(path: &Path, entries: &[Entry]) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    let zeros = vec![0u8; 1 << 20];
    for e in entries {
        match e.kind() {
            EntryKind::Write { .. } => f.write_all_at(&e.data, e.sector * SECTOR_SIZE)?,
            EntryKind::Discard => {
                let (mut at, end) =
                    (e.sector * SECTOR_SIZE, (e.sector + e.nr_sectors) * SECTOR_SIZE);
                while at < end {
                    let n = ((end - at) as usize).min(zeros.len());
                    f.write_all_at(&zeros[..n], at)?;
                    at += n as u64;
                }
            }
            EntryKind::Flush | EntryKind::Mark => {}
        }
    }
    f.sync_all()
}

/// The sparse log device image's size for a configuration: the log holds every write of
/// the setup, the workload and the unmount with a header block each, which for bob's
/// workloads is far below the image's size; four times it leaves room for a journal
/// that wraps. Sparse, so only what is logged takes space.
pub(crate) fn log_bytes(image_bytes: u64) -> u64 {
    4 * image_bytes
}

fn dm_err(e: Error) -> super::Error {
    super::Error::DmLogWrites(e)
}

/// Records `req`'s workload through the kernel's dm-log-writes target: the file system
/// is made (or copied from the run's cache) on a loop device over `data.img`, a copy of
/// it taken, the target built over it logging to a loop device over the sparse
/// `log.img`, and the file system mounted through the target. The setup phase runs and
/// is synced, bob marks [`START_MARK`], runs the workload with a mark at each op's begin
/// and end (`dmsetup message`), unmounts and removes the target. The log before the
/// start mark, applied to the copy, is the base image; the log after it is the trace.
pub(super) fn record(req: &RecordRequest<'_>) -> Result<Recording, super::Error> {
    let config = req.config;
    config.availability().map_err(|e| super::Error::Unavailable {
        config: config.name.into(),
        reason: e.reason(),
    })?;
    super::dm_log_writes_available()
        .map_err(|reason| super::Error::Unavailable { config: config.name.into(), reason })?;
    let work = req.work_dir;
    let (data_path, base_path, log_path) =
        (work.join("data.img"), work.join("base.img"), work.join("log.img"));
    let mnt = work.join("record-mnt");
    std::fs::create_dir_all(&mnt).map_err(io_err(&mnt))?;
    let setup = match req.setup {
        Some(cache) => cache.copy_made(config, &data_path, req.timeouts)?,
        None => {
            let f = std::fs::File::create(&data_path).map_err(io_err(&data_path))?;
            f.set_len(config.image_bytes).map_err(io_err(&data_path))?;
            SetupSource::Made
        }
    };
    let log_file = std::fs::File::create(&log_path).map_err(io_err(&log_path))?;
    log_file.set_len(log_bytes(config.image_bytes)).map_err(io_err(&log_path))?;
    drop(log_file);

    let mut data_dev = match req.device {
        Some(dev) => LoopDevice::attach(dev, &data_path)?,
        None => LoopDevice::attach_free(&data_path)?,
    };
    // A device-mapper device passes flushes down only if the device below takes them.
    data_dev.pass_flushes()?;
    let log_dev = LoopDevice::attach_free(&log_path)?;
    if req.setup.is_none() {
        config.mkfs_on(data_dev.path(), req.timeouts.mkfs)?;
    }
    // What the data device holds before the target exists; the log's prefix goes on it.
    crate::files::copy_sparse(&data_path, &base_path).map_err(io_err(&base_path))?;

    let name = format!("bob-log-{}-{}", std::process::id(), unique());
    let target = DmTarget::create(&name, data_dev.path(), log_dev.path()).map_err(dm_err)?;
    let mut fs_mount =
        Some(mount::mount(&target.device(), &mnt, config.fstype, config.mount_options)?);

    let mut observed = Observed::default();
    let workload_err = |source| super::Error::Workload { config: config.name.into(), source };
    workloads::execute(req.workload, Phase::Setup, &mnt, &mut observed, &mut |_| {})
        .map_err(workload_err)?;
    mount::syncfs(&mnt)?;
    // syncfs ends by writing the block device's dirty buffers (ext4's checkpointed
    // metadata, say) with no flush after them: the target would log those only at the
    // workload's first flush, inside the trace, where bob's FUSE disk has them in the
    // base image. A flush of the device makes them durable before the start mark, so
    // that both recorders start from the same durable image.
    target.flush().map_err(dm_err)?;
    target.mark(START_MARK).map_err(dm_err)?;
    // The first mark that fails ends the recording once the workload has run: the trace
    // would lack it, and the ops' spans with it.
    let mark_failed: RefCell<Option<Error>> = RefCell::new(None);
    let mark = |text: &str| {
        if mark_failed.borrow().is_none() {
            if let Err(e) = target.mark(text) {
                *mark_failed.borrow_mut() = Some(e);
            }
        }
    };
    let run = run_marked(req.workload, &mnt, &mut observed, &mark);
    mark("umount");
    let unmounted = fs_mount.take().map_or(Ok(()), |m| m.unmount());
    run.map_err(workload_err)?;
    unmounted?;
    if let Some(e) = mark_failed.into_inner() {
        return Err(dm_err(e));
    }
    let log = target.finish().map_err(dm_err)?;
    log_dev.detach()?;
    let (prefix, mut trace) =
        split_at_start(log).ok_or_else(|| dm_err(Error::NoStartMark(log_path.clone())))?;
    drop_end_mark(&mut trace);
    apply_entries(&base_path, &prefix).map_err(io_err(&base_path))?;
    check_flushes_seen(config, &trace, data_dev.path())?;
    data_dev.detach()?;
    // Scratch in the recording's work directory, which goes with it if this fails.
    let _ = std::fs::remove_file(&data_path);
    super::finish::finish(req, trace, observed, base_path, None, setup)
}

/// A number no other recording of this process uses at the same time (targets are
/// named per process, and a process may record several cells at once).
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DmLogWrites {
        DmLogWrites {
            name: "bob-log-1234".into(),
            data_dev: "/dev/loop3".into(),
            log_dev: "/dev/loop4".into(),
            sectors: 262_144,
        }
    }

    #[test]
    fn table_and_create_line_match_xfstests() {
        let d = sample();
        assert_eq!(d.table(), "0 262144 log-writes /dev/loop3 /dev/loop4");
        assert_eq!(
            d.create(),
            [
                "dmsetup",
                "create",
                "bob-log-1234",
                "--table",
                "0 262144 log-writes /dev/loop3 /dev/loop4"
            ]
        );
        assert_eq!(d.mapped_device(), Path::new("/dev/mapper/bob-log-1234"));
        assert_eq!(d.mknodes(), ["dmsetup", "mknodes", "bob-log-1234"]);
        assert_eq!(d.status(), ["dmsetup", "status", "bob-log-1234"]);
    }

    /// The kernel splits a message at white space and the target wants exactly two
    /// arguments: an unquoted `mark op 3 end` is refused ("expect 2 arguments, got 5",
    /// seen on 6.12). Quoted, it is one argument that the kernel unquotes.
    #[test]
    fn a_mark_with_spaces_is_quoted_into_one_argument() {
        assert_eq!(
            sample().mark("op 3 end: rename /a /b"),
            ["dmsetup", "message", "bob-log-1234", "0", "mark", r"op\ 3\ end:\ rename\ /a\ /b"]
        );
        assert_eq!(message_arg(r"a\b	c"), r"a\\b\	c");
        assert_eq!(message_arg("mkfs"), "mkfs");
        // What dm_split_args makes of the quoted text: the original again.
        let unquote = |s: &str| {
            let mut out = String::new();
            let mut chars = s.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    out.extend(chars.next());
                } else {
                    assert!(!c.is_ascii_whitespace(), "unquoted white space in {s:?}");
                    out.push(c);
                }
            }
            out
        };
        for text in ["op 0 begin: write /A/log 0+4096", r"x\ y", " lead and trail "] {
            assert_eq!(unquote(&message_arg(text)), text);
        }
    }

    #[test]
    fn teardown_removes_the_target() {
        assert_eq!(sample().remove(), ["dmsetup", "remove", "bob-log-1234"]);
    }

    #[test]
    fn status_lines_say_whether_the_target_still_logs() {
        // As 6.12 printed them (the second after its log device filled).
        assert_eq!(
            parse_status("0 131072 log-writes 4 4"),
            Some(LogStatus { entries: 4, sectors: 4, logging: true })
        );
        assert_eq!(
            parse_status("0 327680 log-writes 9113 65535 logging_disabled\n"),
            Some(LogStatus { entries: 9113, sectors: 65535, logging: false })
        );
        assert_eq!(parse_status("0 131072 linear 7:0 0"), None);
        assert_eq!(parse_status("0 131072 log-writes 4"), None);
        assert_eq!(parse_status("0 131072 log-writes 4 4 something_else"), None);
    }

    #[test]
    fn sectors_of_a_file_count_512_byte_units() {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(1 << 20).unwrap();
        assert_eq!(device_sectors(f.path()).unwrap(), 2048);
    }

    #[test]
    fn the_log_splits_at_the_start_mark_and_loses_the_end_mark() {
        let log = Trace::new(
            512,
            vec![
                Entry::write(8, vec![1; 4096]),
                Entry::flush(),
                Entry::mark(START_MARK),
                Entry::mark("op 0 begin: x"),
                Entry::write(16, vec![2; 512]),
                Entry::flush(),
                Entry::mark(END_MARK),
            ],
        );
        let (prefix, mut trace) = split_at_start(log.clone()).unwrap();
        assert_eq!(prefix, log.entries[..2]);
        assert_eq!(trace.entries, log.entries[3..]);
        drop_end_mark(&mut trace);
        assert_eq!(trace.entries, log.entries[3..6]);
        drop_end_mark(&mut trace);
        assert_eq!(trace.entries.len(), 3, "only the kernel's own end mark goes");
        assert!(split_at_start(Trace::new(512, vec![Entry::flush()])).is_none());
    }

    #[test]
    fn entries_apply_to_an_image_as_the_device_holds_them() {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().write_all_at(&[7u8; 8192], 0).unwrap();
        let entries = vec![
            Entry::write(2, vec![1; 1024]),
            Entry::flush(),
            Entry::discard(8, 4),
            Entry::mark("m"),
            Entry::write(9, vec![3; 512]),
        ];
        apply_entries(f.path(), &entries).unwrap();
        let got = std::fs::read(f.path()).unwrap();
        let mut want = vec![7u8; 8192];
        want[1024..2048].fill(1);
        want[4096..6144].fill(0);
        want[4608..5120].fill(3);
        assert_eq!(got, want);
    }

    #[test]
    fn create_says_why_where_device_mapper_is_missing() {
        if Path::new("/dev/mapper/control").exists() {
            return;
        }
        let Err(e) = DmTarget::create("bob-test", Path::new("/dev/loop0"), Path::new("/dev/loop1"))
        else {
            panic!("created a target without device-mapper");
        };
        assert!(e.to_string().contains("device-mapper is not available"), "{e}");
    }
}
