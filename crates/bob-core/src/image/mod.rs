//! Crash states served as copy-on-write views: the base image file, the overlay of the
//! writes the state applies (references into the trace, never copies), and a private
//! overlay that absorbs what recovery writes. Nothing here copies the image; building a
//! view costs the size of its overlay.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::crash::Overlay;
use crate::device::fusedisk::Disk;
use crate::trace::{Trace, SECTOR_SIZE};

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
pub struct PrivateOverlay {
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
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) {
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
    /// Number of sectors written.
    pub fn len(&self) -> usize {
        self.sectors.len()
    }
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.sectors.is_empty()
    }
}

/// One crash state as a disk: base + state overlay + private recovery overlay.
pub struct CrashView {
    base: Arc<BaseImage>,
    trace: Arc<Trace>,
    overlay: Overlay,
    private: Mutex<PrivateOverlay>,
}

impl CrashView {
    /// A view of `overlay` (built from `trace`) over `base`.
    pub fn new(base: Arc<BaseImage>, trace: Arc<Trace>, overlay: Overlay) -> CrashView {
        CrashView { base, trace, overlay, private: Mutex::new(PrivateOverlay::default()) }
    }

    /// Writes the state's image (without recovery writes) to `out`, sparsely: only the
    /// base image's data and the overlay are written.
    pub fn materialize(&self, out: &Path) -> std::io::Result<()> {
        copy_sparse(self.base.path(), out)?;
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
    pub fn recovered_digest(&self, stamps: &[std::ops::Range<u64>]) -> [u8; 32] {
        let private = self.private.lock().unwrap_or_else(|p| p.into_inner());
        self.overlay.recovered_digest(
            &self.trace,
            private.sectors.iter().map(|(&s, data)| (s, &**data)),
            stamps,
        )
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
        self.base.read_at(offset, buf)?;
        self.overlay.read_into(&self.trace, offset, buf);
        if let Ok(private) = self.private.lock() {
            private.read_into(offset, buf);
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
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.private.lock().map_err(|_| std::io::Error::other("poisoned"))?.discard(offset, len);
        Ok(())
    }
}

/// Copies `from` to `to` keeping holes (SEEK_DATA/SEEK_HOLE), so a mostly empty image
/// costs only its data.
pub fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    use nix::unistd::{lseek, Whence};
    use std::os::fd::AsFd;
    let src = File::open(from)?;
    let len = src.metadata()?.len();
    let dst = File::create(to)?;
    dst.set_len(len)?;
    let mut pos: i64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    while (pos as u64) < len {
        let data = match lseek(src.as_fd(), pos, Whence::SeekData) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(e) => return Err(e.into()),
        };
        let hole = lseek(src.as_fd(), data, Whence::SeekHole).map_err(std::io::Error::from)?;
        let mut off = data as u64;
        while off < hole as u64 {
            let n = ((hole as u64 - off) as usize).min(buf.len());
            src.read_exact_at(&mut buf[..n], off)?;
            dst.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
        pos = hole;
    }
    Ok(())
}

/// blake3 of a whole file, lowercase hex.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    let mut f = File::open(path)?;
    std::io::copy(&mut f, &mut hasher)?;
    Ok(hasher.finalize().to_hex().to_string())
}
