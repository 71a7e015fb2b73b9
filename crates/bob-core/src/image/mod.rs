//! Crash states served as copy-on-write views: the base image file, the overlay of the
//! writes the state applies (references into the trace, never copies), and a private
//! overlay that absorbs what recovery writes. Nothing here copies the image; building a
//! view costs the size of its overlay.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::crash::overlay::{content_hash, mask, Sum};
use crate::crash::Overlay;
use crate::device::fusedisk::Disk;
use crate::trace::{Trace, SECTOR_SIZE};

/// Sectors, as merged runs of 512-byte sector numbers: what a view logs of its reads.
pub(crate) type SectorSet = rangemap::RangeSet<u64>;

const SECTOR: usize = SECTOR_SIZE as usize;

/// A read-only base image file shared by every view of one trace.
#[derive(Debug)]
pub struct BaseImage {
    path: PathBuf,
    file: File,
    size: u64,
}

impl BaseImage {
    /// Opens the base image at `path` read-only.
    pub fn open(path: &Path) -> std::io::Result<BaseImage> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        Ok(BaseImage { path: path.to_owned(), file, size })
    }
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Path of the image file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Fills `buf` from `offset` (zeros past the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        if offset >= self.size {
            return Ok(());
        }
        let n = ((self.size - offset) as usize).min(buf.len());
        self.file.read_exact_at(&mut buf[..n], offset)
    }
}

/// Sector-granular private overlay for writes made to a view (recovery writes).
#[derive(Debug, Default)]
pub(crate) struct PrivateOverlay {
    sectors: BTreeMap<u64, Box<[u8; SECTOR]>>,
}

impl PrivateOverlay {
    /// Stores `data` (whole sectors) at byte `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let first = offset / SECTOR_SIZE;
        for (i, chunk) in data.chunks(SECTOR).enumerate() {
            let mut sector = Box::new([0u8; SECTOR]);
            sector[..chunk.len()].copy_from_slice(chunk);
            self.sectors.insert(first + i as u64, sector);
        }
    }
    /// Zeroes `len` bytes at `offset`.
    pub fn discard(&mut self, offset: u64, len: u64) {
        let first = offset / SECTOR_SIZE;
        for s in first..first + len.div_ceil(SECTOR_SIZE) {
            self.sectors.insert(s, Box::new([0u8; SECTOR]));
        }
    }
    /// Patches this overlay's sectors into `buf`, which holds bytes from `offset`.
    pub(crate) fn read_into(&self, offset: u64, buf: &mut [u8]) {
        if self.sectors.is_empty() || buf.is_empty() {
            return;
        }
        let end = offset + buf.len() as u64;
        for (&s, data) in self.sectors.range(offset / SECTOR_SIZE..end.div_ceil(SECTOR_SIZE)) {
            let s_start = s * SECTOR_SIZE;
            let from = s_start.max(offset);
            let to = (s_start + SECTOR_SIZE).min(end);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&data[(from - s_start) as usize..(to - s_start) as usize]);
        }
    }
    /// The runs of `range` (sectors) this overlay has not written: what a read of it
    /// took from the state's own bytes.
    fn unwritten(&self, range: std::ops::Range<u64>) -> Vec<std::ops::Range<u64>> {
        let mut runs = Vec::new();
        let mut from = range.start;
        for &written in self.sectors.range(range.clone()).map(|(s, _)| s) {
            if from < written {
                runs.push(from..written);
            }
            from = written + 1;
        }
        if from < range.end {
            runs.push(from..range.end);
        }
        runs
    }

    /// Number of sectors written.
    pub fn len(&self) -> usize {
        self.sectors.len()
    }
}

/// One crash state as a disk: base + state overlay + private recovery overlay.
pub struct CrashView {
    base: Arc<BaseImage>,
    trace: Arc<Trace>,
    overlay: Overlay,
    private: Mutex<PrivateOverlay>,
    cached: bool,
    /// Sectors read before this view wrote them: all of the state's own content that
    /// anything run on the view could have seen (for reuse by reads), when tracked.
    first_reads: Option<Mutex<SectorSet>>,
    /// Every sector read since [`CrashView::log_reads`], written or not, until taken.
    read_log: Mutex<Option<SectorSet>>,
    /// Set once recovery has mounted the state, when part of what it read was read
    /// ahead and not used (see [`CrashView::mark_recovered`]).
    recovered: Mutex<Option<RecoveredMark>>,
}

/// What recovery read and did not use, and what was read first after it.
#[derive(Debug)]
struct RecoveredMark {
    /// Sectors recovery read that its result does not depend on.
    unused: SectorSet,
    /// The first reads up to the end of recovery.
    during: SectorSet,
    /// The first reads since.
    after: SectorSet,
}

impl CrashView {
    /// A view of `overlay` (built from `trace`) over `base`.
    pub fn new(base: Arc<BaseImage>, trace: Arc<Trace>, overlay: Overlay) -> CrashView {
        CrashView {
            base,
            trace,
            overlay,
            private: Mutex::new(PrivateOverlay::default()),
            cached: true,
            first_reads: None,
            read_log: Mutex::new(None),
            recovered: Mutex::new(None),
        }
    }

    /// Whether the kernel may cache the view's file (the default here; the engine asks
    /// for it only where the configuration prefers it,
    /// [`crate::fs::FsConfig::prefers_cached_views`], and `--no-cached-views` never).
    pub(crate) fn page_cache(mut self, cached: bool) -> CrashView {
        self.cached = cached;
        self
    }

    /// Logs the sectors read before the view wrote them (see [`CrashView::first_reads`]).
    pub(crate) fn track_reads(mut self, track: bool) -> CrashView {
        self.first_reads = track.then(Mutex::default);
        self
    }

    /// Writes the state's image (without recovery writes) to `out`, sparsely: only the
    /// base image's data and the overlay are written.
    pub fn materialize(&self, out: &Path) -> std::io::Result<()> {
        crate::files::copy_sparse(self.base.path(), out)?;
        let file = std::fs::OpenOptions::new().write(true).open(out)?;
        for (sector, _) in self.overlay.iter() {
            let mut buf = [0u8; SECTOR];
            let off = sector * SECTOR_SIZE;
            self.base.read_at(off, &mut buf)?;
            self.overlay.read_into(&self.trace, off, &mut buf);
            file.write_all_at(&buf, off)?;
        }
        file.sync_all()
    }

    /// The digest of the image as recovery left it, mount stamps masked (see
    /// [`Overlay::recovered_digest`]): states that recover to the same image share it.
    /// `hashes` holds the sector hashes of earlier states' recoveries in the same run.
    pub(crate) fn recovered_digest(
        &self,
        stamps: &[std::ops::Range<u64>],
        hashes: &crate::crash::overlay::RecoveryHashes,
    ) -> [u8; 32] {
        let private = self.private.lock().unwrap_or_else(|p| p.into_inner());
        self.overlay.recovered_digest(
            &self.trace,
            private.sectors.iter().map(|(&s, data)| (s, &**data)),
            stamps,
            hashes,
        )
    }

    /// Starts a log of every sector read from now on (what the read-only fsck reads,
    /// for [`crate::check`]'s reuse of it), replacing any log not taken.
    pub(crate) fn log_reads(&self) {
        *self.read_log.lock().unwrap_or_else(|p| p.into_inner()) = Some(SectorSet::new());
    }

    /// The sectors read since [`CrashView::log_reads`], ending the log.
    pub(crate) fn take_read_log(&self) -> Option<SectorSet> {
        self.read_log.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The hash of each sector of `runs` (sorted, disjoint `[start, end)` sector ranges)
    /// as the view holds it now, recovery's writes included, with the bytes of `stamps`
    /// (disk byte ranges) zeroed, sorted by sector: the sector hashes of
    /// [`Overlay::recovered_digest`], so that a set of them sums to a set hash. Reads
    /// nothing into the view's logs. A sector the view takes from the base image is hashed
    /// once per `base` (shared by the views of one run), as most of what fsck reads is
    /// metadata no state changed.
    /// With `own`, the state's own bytes, without what the check wrote since.
    pub(crate) fn sector_hashes(
        &self,
        runs: &[(u64, u64)],
        stamps: &[std::ops::Range<u64>],
        base: &Mutex<HashMap<u64, Sum>>,
        own: bool,
    ) -> std::io::Result<Vec<(u64, Sum)>> {
        let written: BTreeSet<u64> = match own {
            true => BTreeSet::new(),
            false => {
                let private = self.private.lock().unwrap_or_else(|p| p.into_inner());
                private.sectors.keys().copied().collect()
            }
        };
        let mut hashes = Vec::with_capacity(runs.iter().map(|&(a, b)| (b - a) as usize).sum());
        let mut content = [0u8; SECTOR];
        // Held throughout: one lock a state rather than one a sector.
        let mut base = base.lock().unwrap_or_else(|p| p.into_inner());
        for s in runs.iter().flat_map(|&(start, end)| start..end) {
            let from_base = self.overlay.get(s).is_none() && !written.contains(&s);
            if from_base {
                if let Some(&h) = base.get(&s) {
                    hashes.push((s, h));
                    continue;
                }
            }
            match own {
                true => self.read_state(s * SECTOR_SIZE, &mut content)?,
                false => self.read_content(s * SECTOR_SIZE, &mut content)?,
            }
            mask(s, &mut content, stamps);
            let h = content_hash(s, &content);
            if from_base {
                base.insert(s, h);
            }
            hashes.push((s, h));
        }
        Ok(hashes)
    }

    /// The view's bytes at `offset`: base image, crash state, recovery's writes.
    fn read_content(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.overlay.read_over(&self.trace, offset, buf, |at, part| self.base.read_at(at, part))?;
        let private = self.private.lock().unwrap_or_else(|p| p.into_inner());
        private.read_into(offset, buf);
        Ok(())
    }

    /// Sectors read before this view wrote them, when [`CrashView::track_reads`] is on:
    /// what the state's check depended on. Sectors recovery read without using them
    /// (named by [`CrashView::mark_recovered`]) are left out unless read again after it.
    pub(crate) fn first_reads(&self) -> Option<SectorSet> {
        let reads = self.first_reads.as_ref()?;
        let mut reads = reads.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(mark) = self.recovered.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            for unused in mark.unused.iter() {
                for read in mark.during.overlapping(unused) {
                    let both = read.start.max(unused.start)..read.end.min(unused.end);
                    // What was not read again after recovery.
                    for gap in mark.after.gaps(&both) {
                        reads.remove(gap);
                    }
                }
            }
        }
        Some(reads)
    }

    /// Every sector read first so far, as logged ([`CrashView::first_reads`] without
    /// leaving out what recovery did not use): a set that only grows, so that the
    /// difference of two of them is what was read first in between.
    pub(crate) fn first_reads_so_far(&self) -> Option<SectorSet> {
        let reads = self.first_reads.as_ref()?;
        Some(reads.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Marks the end of recovery: of what was read so far, the sectors of `unused` did
    /// not decide anything (jbd2's readahead past the end of its scan,
    /// `check::recovery_used`); [`CrashView::first_reads`] leaves them out unless they
    /// are read again from now on. Nothing is marked when recovery read none of them
    /// (without [`CrashView::track_reads`], nothing ever).
    pub(crate) fn mark_recovered(&self, unused: SectorSet) {
        let Some(reads) = &self.first_reads else { return };
        let during = reads.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if unused.iter().any(|u| during.overlaps(u)) {
            *self.recovered.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(RecoveredMark { unused, during, after: SectorSet::new() });
        }
    }

    /// Whether [`CrashView::mark_recovered`] left something out.
    pub(crate) fn recovery_marked(&self) -> bool {
        self.recovered.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// The state's own bytes at `offset` (base image and crash state), without what
    /// recovery wrote since, and without logging a read.
    pub(crate) fn read_state(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.overlay.read_over(&self.trace, offset, buf, |at, part| self.base.read_at(at, part))
    }

    /// The base image's bytes at `offset`.
    pub(crate) fn read_base(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.base.read_at(offset, buf)
    }

    /// Every sector the check wrote to this view so far, with its bytes.
    pub(crate) fn written_sectors(&self) -> Vec<(u64, Box<[u8; SECTOR]>)> {
        let private = self.private.lock().unwrap_or_else(|p| p.into_inner());
        private.sectors.iter().map(|(&s, d)| (s, d.clone())).collect()
    }

    /// Takes `sectors` as written by the check, as if a program run on the view had
    /// written them (an earlier state's routine fsck, reused by what it read), and
    /// `reads` as read first: that program's reads, which this view never served.
    pub(crate) fn write_as_read(&self, sectors: &[(u64, Box<[u8; SECTOR]>)], reads: &SectorSet) {
        let mut private = self.private.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(first) = &self.first_reads {
            let mut first = first.lock().unwrap_or_else(|p| p.into_inner());
            // Only sectors nothing has written yet are the state's own.
            for run in reads.iter().flat_map(|r| private.unwritten(r.clone())) {
                first.insert(run);
            }
        }
        for (s, data) in sectors {
            private.sectors.insert(*s, data.clone());
        }
    }

    /// Sectors recovery wrote to this view.
    pub fn recovery_writes(&self) -> usize {
        self.private.lock().map(|p| p.len()).unwrap_or(0)
    }
}

impl Disk for CrashView {
    fn size(&self) -> u64 {
        self.base.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.read_content(offset, buf)?;
        let (first, end) =
            (offset / SECTOR_SIZE, (offset + buf.len() as u64).div_ceil(SECTOR_SIZE));
        if first == end {
            // Nothing read (a range set takes no empty run).
            return Ok(());
        }
        if let Some(log) = self.read_log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            log.insert(first..end);
        }
        if let Some(reads) = &self.first_reads {
            // The runs between the sectors recovery wrote before this read.
            let own = self.private.lock().unwrap_or_else(|p| p.into_inner()).unwritten(first..end);
            let mut reads = reads.lock().unwrap_or_else(|p| p.into_inner());
            let mut mark = self.recovered.lock().unwrap_or_else(|p| p.into_inner());
            for run in own {
                if let Some(mark) = mark.as_mut() {
                    mark.after.insert(run.clone());
                }
                reads.insert(run);
            }
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.private.lock().map_err(|_| std::io::Error::other("poisoned"))?.write(offset, data);
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn cached(&self) -> bool {
        self.cached
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.private.lock().map_err(|_| std::io::Error::other("poisoned"))?.discard(offset, len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view logs what it read as merged runs: the fsck log every sector since it began,
    /// the first reads only sectors read before the view itself wrote them.
    #[test]
    fn a_view_logs_reads_as_runs_leaving_out_what_it_wrote_first() {
        use crate::crash::{DiskModel, OverlayBuilder, StateId};
        use crate::trace::Entry;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.img");
        File::create(&path).unwrap().set_len(64 * SECTOR_SIZE).unwrap();
        let trace = Trace::new(512, vec![Entry::write(2, vec![1u8; 512])]);
        let epochs = crate::crash::epochs(&trace, &DiskModel::STUDY);
        let overlay = OverlayBuilder::new(&trace, &epochs).state(&StateId::whole(0, [0]));
        let base = Arc::new(BaseImage::open(&path).unwrap());
        let view = CrashView::new(base, Arc::new(trace), overlay).track_reads(true);
        let mut buf = vec![0u8; 8 * SECTOR];
        view.read_at(0, &mut buf).unwrap();
        assert_eq!(buf[2 * SECTOR], 1, "the crash state's sector");
        view.write_at(20 * SECTOR_SIZE, &[5u8; SECTOR]).unwrap();
        view.write_at(22 * SECTOR_SIZE, &[5u8; SECTOR]).unwrap();
        view.log_reads();
        view.read_at(16 * SECTOR_SIZE, &mut buf).unwrap();
        view.read_at(4 * SECTOR_SIZE, &mut buf[..SECTOR]).unwrap();
        view.read_at(30 * SECTOR_SIZE, &mut []).unwrap();
        let runs = |set: SectorSet| set.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>();
        assert_eq!(runs(view.first_reads().unwrap()), vec![(0, 8), (16, 20), (21, 22), (23, 24)]);
        assert_eq!(runs(view.take_read_log().unwrap()), vec![(4, 5), (16, 24)]);
        assert!(view.take_read_log().is_none(), "taking the log ends it");
    }
}
