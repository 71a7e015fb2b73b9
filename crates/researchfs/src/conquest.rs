//! Conquest (Wang et al., USENIX 2002) on the researchfs core: metadata and small files
//! in persistent memory, large files' data on the disk. [`ConquestDevice`] is the
//! [`BlockDevice`] the core writes to for the designs [`Design::Conquest`] and
//! [`Design::ConquestNofence`]; it places each block and commits each operation.
//!
//! Placement: the PM region mirrors the core's block address space. A data block of a
//! file larger than [`PM_THRESHOLD`] goes to the disk (a per-block placement bit in PM says
//! so; a block keeps its place until it is written as something else); every other block
//! (superblock, bitmaps, inodes, directories, indirect blocks, small files' data) lives in
//! PM. The paper's threshold is 1 MB, with migration when a file crosses it; here it is
//! one block, so that bob's small workloads exercise both devices, and nothing migrates.
//!
//! Commit: the paper relies on "atomic pointer commits" so that a crash leaves the system
//! intact but for leaks of in-transit allocations. The core's operations touch several
//! structures (a rename: two directory blocks and an inode), so each operation's PM
//! changes, staged as 8-byte words while it runs, commit through one 8-byte atomic store:
//! the words go to a redo area (store, `clwb`, fence), then the area's count word is
//! stored (the commit, `clwb`, fence), then the words in place (`clwb`, fence), then the
//! count is cleared (`clwb`, fence). Recovery (at open) replays a non-zero count. Large
//! file data is flushed on the disk before the commit that points to it. The negative
//! control `conquest-nofence` does the same stores with no write-back and no fence.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::BLOCK;
use crate::persistent_memory::{PersistentMemory, LINE, WORD};
use crate::Design;

/// Files larger than this (bytes) keep their data on the disk.
pub const PM_THRESHOLD: u64 = BLOCK as u64;

/// Words one operation may change (the redo area holds this many records of 16 bytes).
pub const REDO_WORDS: u64 = 1 << 16;

const B: u64 = BLOCK as u64;

/// Where things are in the PM region of a device of `disk_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmLayout {
    /// The mirror of the block address space: `0..disk_size`.
    pub mirror: u64,
    /// The placement bitmap (a set bit: the block is on the disk).
    pub placement: u64,
    /// The redo area's count word (the commit word).
    pub commit: u64,
    /// The redo records ((offset, value) pairs of little-endian u64).
    pub records: u64,
    /// Size of the whole region.
    pub size: u64,
}

impl PmLayout {
    /// The layout for a disk of `disk_size` bytes.
    pub fn of(disk_size: u64) -> PmLayout {
        let mirror = disk_size.div_ceil(B) * B;
        let placement = mirror;
        let bitmap = (disk_size.div_ceil(B)).div_ceil(8).div_ceil(B).max(1) * B;
        let commit = placement + bitmap;
        let records = commit + LINE;
        PmLayout { mirror, placement, commit, records, size: records + REDO_WORDS * 16 }
    }
}

#[derive(Default)]
struct Staged {
    /// Word offset -> new value, of the running operation.
    words: BTreeMap<u64, u64>,
    /// The core is writing a file above the threshold.
    large: bool,
    /// The operation wrote to the disk (flushed before its commit).
    disk_dirty: bool,
}

/// The block device of the Conquest designs: PM for metadata and small files, the disk for
/// large files' data, each operation committed atomically (see the module documentation).
pub struct ConquestDevice {
    disk: Arc<dyn BlockDevice>,
    pm: Arc<dyn PersistentMemory>,
    fenced: bool,
    layout: PmLayout,
    st: Mutex<Staged>,
}

fn word_of(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(w)
}

impl ConquestDevice {
    /// The device of `design` over `disk` and `pm`; runs recovery (a committed operation
    /// whose words were not all in place is finished). Fails when `pm` is too small or the
    /// design keeps nothing in PM.
    pub fn open(
        design: Design,
        disk: Arc<dyn BlockDevice>,
        pm: Arc<dyn PersistentMemory>,
    ) -> io::Result<Arc<ConquestDevice>> {
        let Some(fenced) = design.pm_fenced() else {
            return Err(io::Error::other(format!("design {design} keeps nothing in PM")));
        };
        let layout = PmLayout::of(disk.size());
        if pm.size() < layout.size {
            return Err(io::Error::other(format!(
                "PM region of {} bytes is smaller than the {} bytes a {} byte disk needs",
                pm.size(),
                layout.size,
                disk.size()
            )));
        }
        let dev = ConquestDevice { disk, pm, fenced, layout, st: Mutex::new(Staged::default()) };
        dev.recover()?;
        Ok(Arc::new(dev))
    }

    /// Size of the PM region a disk of `disk_size` bytes needs.
    pub fn pm_size(disk_size: u64) -> u64 {
        PmLayout::of(disk_size).size
    }

    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.fenced {
            self.pm.clwb(offset, len)?;
        }
        Ok(())
    }

    fn fence(&self) -> io::Result<()> {
        if self.fenced {
            self.pm.fence()?;
        }
        Ok(())
    }

    fn pm_word(&self, off: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.pm.load(off, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn recover(&self) -> io::Result<()> {
        let n = self.pm_word(self.layout.commit)?;
        if n == 0 {
            return Ok(());
        }
        // A count beyond the area cannot come from a commit: replay what fits.
        let n = n.min(REDO_WORDS);
        let mut recs = vec![0u8; (n * 16) as usize];
        self.pm.load(self.layout.records, &mut recs)?;
        for r in recs.chunks_exact(16) {
            let (off, val) = (word_of(&r[..8]), word_of(&r[8..]));
            // Only the mirror and the placement bitmap are ever logged.
            if off % WORD == 0 && off + WORD <= self.layout.commit {
                self.pm.store(off, &val.to_le_bytes())?;
                self.persist(off, WORD)?;
            }
        }
        self.fence()?;
        self.pm.store(self.layout.commit, &0u64.to_le_bytes())?;
        self.persist(self.layout.commit, WORD)?;
        self.fence()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Staged> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn word(&self, st: &Staged, off: u64) -> io::Result<u64> {
        match st.words.get(&off) {
            Some(&v) => Ok(v),
            None => self.pm_word(off),
        }
    }

    fn on_disk(&self, st: &Staged, block: u64) -> io::Result<bool> {
        let off = self.layout.placement + block / 64 * WORD;
        Ok(self.word(st, off)? & (1 << (block % 64)) != 0)
    }

    fn set_placement(&self, st: &mut Staged, block: u64, disk: bool) -> io::Result<()> {
        let off = self.layout.placement + block / 64 * WORD;
        let old = self.word(st, off)?;
        let new = if disk { old | 1 << (block % 64) } else { old & !(1 << (block % 64)) };
        if new != old {
            st.words.insert(off, new);
        }
        Ok(())
    }

    /// Stages `data` at PM offset `off` (within one block) as changed words.
    fn stage(&self, st: &mut Staged, off: u64, data: &[u8]) -> io::Result<()> {
        let start = off - off % WORD;
        let end = (off + data.len() as u64).div_ceil(WORD) * WORD;
        let mut cur = vec![0u8; (end - start) as usize];
        self.read_pm(st, start, &mut cur)?;
        let old = cur.clone();
        cur[(off - start) as usize..(off - start) as usize + data.len()].copy_from_slice(data);
        for (i, (n, o)) in cur.chunks_exact(8).zip(old.chunks_exact(8)).enumerate() {
            if n != o {
                st.words.insert(start + i as u64 * WORD, word_of(n));
            }
        }
        Ok(())
    }

    /// PM bytes with the running operation's staged words over them.
    fn read_pm(&self, st: &Staged, off: u64, buf: &mut [u8]) -> io::Result<()> {
        self.pm.load(off, buf)?;
        let end = off + buf.len() as u64;
        for (&w, &v) in st.words.range(off.saturating_sub(WORD - 1)..end) {
            let bytes = v.to_le_bytes();
            for (i, b) in bytes.iter().enumerate() {
                let at = w + i as u64;
                if at >= off && at < end {
                    buf[(at - off) as usize] = *b;
                }
            }
        }
        Ok(())
    }

    /// Commits the running operation: the disk's data first (a flush), then the PM words
    /// through the redo area's one atomic count store.
    fn commit(&self) -> io::Result<()> {
        let mut st = self.lock();
        if st.disk_dirty {
            self.disk.flush()?;
            st.disk_dirty = false;
        }
        let words = std::mem::take(&mut st.words);
        drop(st);
        if words.is_empty() {
            return Ok(());
        }
        let n = words.len() as u64;
        if n > REDO_WORDS {
            return Err(io::Error::other(format!(
                "an operation changed {n} PM words, the redo area holds {REDO_WORDS}"
            )));
        }
        let mut recs = Vec::with_capacity(words.len() * 16);
        for (&off, &val) in &words {
            recs.extend_from_slice(&off.to_le_bytes());
            recs.extend_from_slice(&val.to_le_bytes());
        }
        let l = self.layout;
        self.pm.store(l.records, &recs)?;
        self.persist(l.records, recs.len() as u64)?;
        self.fence()?;
        // The commit: one aligned 8-byte store.
        self.pm.store(l.commit, &n.to_le_bytes())?;
        self.persist(l.commit, WORD)?;
        self.fence()?;
        // In place, in runs of adjacent words.
        let mut run: Option<(u64, Vec<u8>)> = None;
        for (&off, &val) in &words {
            run = match run {
                Some((s, mut bytes)) if s + bytes.len() as u64 == off => {
                    bytes.extend_from_slice(&val.to_le_bytes());
                    Some((s, bytes))
                }
                Some((s, bytes)) => {
                    self.pm.store(s, &bytes)?;
                    self.persist(s, bytes.len() as u64)?;
                    Some((off, val.to_le_bytes().to_vec()))
                }
                None => Some((off, val.to_le_bytes().to_vec())),
            };
        }
        if let Some((s, bytes)) = run {
            self.pm.store(s, &bytes)?;
            self.persist(s, bytes.len() as u64)?;
        }
        self.fence()?;
        self.pm.store(l.commit, &0u64.to_le_bytes())?;
        self.persist(l.commit, WORD)?;
        self.fence()
    }
}

impl BlockDevice for ConquestDevice {
    fn size(&self) -> u64 {
        self.disk.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let st = self.lock();
        let mut pos = 0usize;
        while pos < buf.len() {
            let at = offset + pos as u64;
            let n = ((B - at % B) as usize).min(buf.len() - pos);
            let out = &mut buf[pos..pos + n];
            if self.on_disk(&st, at / B)? {
                self.disk.read_at(at, out)?;
            } else {
                self.read_pm(&st, at, out)?;
            }
            pos += n;
        }
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8], info: WriteInfo) -> io::Result<()> {
        if offset.checked_add(data.len() as u64).is_none_or(|e| e > self.disk.size()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("range {offset}+{} is past the device end", data.len()),
            ));
        }
        let mut st = self.lock();
        let mut pos = 0usize;
        while pos < data.len() {
            let at = offset + pos as u64;
            let n = ((B - at % B) as usize).min(data.len() - pos);
            let block = at / B;
            let chunk = &data[pos..pos + n];
            let disk = info.role == Role::Data && (st.large || self.on_disk(&st, block)?);
            if disk {
                self.disk.write_at(at, chunk, info)?;
                st.disk_dirty = true;
                self.set_placement(&mut st, block, true)?;
            } else {
                self.set_placement(&mut st, block, false)?;
                self.stage(&mut st, at, chunk)?;
            }
            pos += n;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.disk.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.disk.discard(offset, len)
    }
    fn end_op(&self) -> io::Result<()> {
        self.commit()
    }
    fn hint_large_file(&self, large: bool) {
        self.lock().large = large;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use crate::persistent_memory::MemPm;
    use crate::{layout::ROOT, mkfs, Fs, Options};

    fn made(design: Design) -> (Arc<MemDevice>, Arc<MemPm>, Arc<ConquestDevice>) {
        let disk = Arc::new(MemDevice::new(4 << 20));
        let pm = Arc::new(MemPm::new(ConquestDevice::pm_size(4 << 20)));
        let dev = ConquestDevice::open(design, disk.clone(), pm.clone()).unwrap();
        mkfs(design, dev.as_ref(), 4 << 20).unwrap();
        dev.end_op().unwrap();
        (disk, pm, dev)
    }

    #[test]
    fn metadata_and_small_files_live_in_pm_large_data_on_disk() {
        let (disk, pm, dev) = made(Design::Conquest);
        let fs = Fs::open(Design::Conquest, dev.clone(), Options::default()).unwrap();
        let small = fs.create(ROOT, "small").unwrap();
        fs.write(small, 0, b"tiny").unwrap();
        let big = fs.create(ROOT, "big").unwrap();
        fs.write(big, 0, &vec![7u8; 3 * BLOCK]).unwrap();
        fs.shutdown().unwrap();
        // The disk holds the large file's bytes, nothing else was written to it.
        let image = disk.snapshot();
        assert_eq!(image.iter().filter(|&&b| b == 7).count(), 3 * BLOCK);
        assert!(!image.windows(4).any(|w| w == b"tiny"));
        let region = pm.snapshot();
        assert!(region.windows(4).any(|w| w == b"tiny"));
        // Reopened from the two devices alone, the files read back.
        let dev = ConquestDevice::open(Design::Conquest, disk, pm).unwrap();
        let fs = Fs::open(Design::Conquest, dev.clone(), Options::default()).unwrap();
        let big = fs.lookup(ROOT, "big").unwrap();
        assert_eq!(fs.read(big, 0, 3 * BLOCK).unwrap(), vec![7u8; 3 * BLOCK]);
        assert_eq!(fs.read(fs.lookup(ROOT, "small").unwrap(), 0, 10).unwrap(), b"tiny");
        assert!(crate::fsck(Design::Conquest, dev.as_ref()).unwrap().damage().is_empty());
    }

    #[test]
    fn a_committed_redo_area_is_replayed_at_open() {
        let (disk, pm, dev) = made(Design::Conquest);
        let l = PmLayout::of(disk.size());
        drop(dev);
        // A commit whose in-place stores never happened: one word of the superblock block.
        let mut recs = Vec::new();
        recs.extend_from_slice(&(B + 8).to_le_bytes());
        recs.extend_from_slice(&0xABCDu64.to_le_bytes());
        pm.store(l.records, &recs).unwrap();
        pm.store(l.commit, &1u64.to_le_bytes()).unwrap();
        let _dev = ConquestDevice::open(Design::Conquest, disk, pm.clone()).unwrap();
        let mut w = [0u8; 8];
        pm.load(B + 8, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), 0xABCD);
        pm.load(l.commit, &mut w).unwrap();
        assert_eq!(u64::from_le_bytes(w), 0, "the commit word is cleared after replay");
    }
}
