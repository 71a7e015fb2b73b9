//! bob's recording disk, which logs every request in order while recording.
//!
//! A kernel file system (through a loop device) or a research design (in process) is
//! recorded on it.
//!
//! The log streams to a file in the work directory as requests arrive
//! ([`crate::trace::file::LogStream`]); the disk keeps no payload in memory, only where
//! each written sector's content lies in that file, so its memory does not grow with what
//! the workload writes. When recording stops the file is sealed and mapped, and the
//! [`Trace`] is that file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::live::{LiveMap, Source};
use super::{io_err, latency, pm_recorder, Error};
use crate::device::fusedisk::Disk;
use crate::trace::file::LogStream;
use crate::trace::log::LogError;
use crate::trace::{Entry, Trace, SECTOR_SIZE};

const SECTOR: usize = SECTOR_SIZE as usize;

/// The in-process disk the file system under test is made on. Before [`start`] it writes
/// through to the base image file (mkfs and setup); from [`start`] on, the base image is
/// frozen and every request is appended to the log file as it arrives; reads of sectors
/// written since are served from the log file.
///
/// [`start`]: RecordingDisk::start
pub struct RecordingDisk {
    base: File,
    base_path: PathBuf,
    pub(super) size: u64,
    state: Mutex<RecState>,
    /// The PM region recorded beside this disk, which gets a copy of every mark.
    pm: Mutex<Option<Arc<pm_recorder::PmRecorder>>>,
}

#[derive(Default)]
pub(super) struct RecState {
    /// The log being recorded into; `Some` exactly while recording.
    log: Option<LogStream>,
    /// Where the sectors written since `start` are in the log.
    live: LiveMap,
    /// The first failure to log a request: the recording is lost, `stop` reports it.
    failed: Option<LogError>,
    /// The disk's durability clock (see [`RecordingDisk::set_adn`]).
    pub(super) adn: AdnClock,
    /// The latency model while recording (see [`RecordingDisk::set_latency`]).
    latency: Option<latency::Costs>,
    /// Write requests made since the last flush or notification (what a flush must
    /// write to the media).
    dirty: u64,
}

/// The deterministic clock of asynchronous durability notifications: it counts write
/// requests (writes and discards), never time, so a recording replays.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AdnClock {
    /// T_D in write requests; `None`: the disk sends no notifications.
    pub(super) every: Option<u32>,
    /// Write requests received in the disk's lifetime.
    pub(super) received: u64,
    /// Of those, the ones known durable (a flush, a notification, the base image).
    pub(super) durable: u64,
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, RecState> {
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
    pub(crate) fn set_latency(&self, model: latency::Latency) {
        self.lock().latency = model.costs();
    }

    /// Turns asynchronous durability notifications on (`Some(t_d)`) or off. With them on,
    /// the disk writes back its cache on a deterministic clock: once `t_d` write requests
    /// arrived since the last notification, every write received so far is durable, and
    /// the disk appends an [`Entry::adn`] mark to the log saying so. A write received at
    /// request T is so durable by request T + T_D, the thesis' durability timeout
    /// (OptFS, §6.3.1) counted in requests instead of seconds.
    pub(crate) fn set_adn(&self, t_d: Option<u32>) {
        self.lock().adn.every = t_d.filter(|&t| t > 0);
    }

    /// (write requests received, of which durable) since the disk was made: what a file
    /// system listening for notifications knows.
    pub fn durability(&self) -> (u64, u64) {
        let st = self.lock();
        (st.adn.received, st.adn.durable)
    }

    /// Whether requests are being logged.
    #[cfg(test)]
    pub(crate) fn is_recording(&self) -> bool {
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
    pub(crate) fn logged_entries(&self) -> u64 {
        self.lock().log.as_ref().map_or(0, |l| l.nr_entries() as u64)
    }

    /// Copies every later mark into `pm`'s log ([`crate::pm`]).
    pub(crate) fn tie_pm(&self, pm: Arc<pm_recorder::PmRecorder>) {
        *self.pm.lock().unwrap_or_else(|p| p.into_inner()) = Some(pm);
    }

    /// Stops logging and returns the trace: the sealed log file, mapped. An empty trace
    /// if logging never started; the first logging failure if one happened.
    pub(crate) fn stop(&self) -> Result<Trace, Error> {
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
    pub(crate) fn write_flagged(
        &self,
        offset: u64,
        data: &[u8],
        extra: u64,
    ) -> std::io::Result<()> {
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

    pub(super) fn discard_at(&self, offset: u64, len: u64) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RoleRecorder;
    use crate::record::LOG_FILE;
    use crate::trace::flags;
    use crate::trace::EntryKind;

    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    fn read(disk: &RecordingDisk, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xee; len];
        Disk::read_at(disk, offset, &mut buf).unwrap();
        buf
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
