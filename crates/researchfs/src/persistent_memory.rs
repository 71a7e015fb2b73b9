//! The persistent-memory seam: a byte-addressable region behind the API a PM design calls
//! (stores, cache-line write-backs, fences), as [`crate::BlockDevice`] is the seam for
//! disks. bob implements it over its PM recorder (every call logged in order, beside the
//! disk's log); [`MemPm`] is the plain in-memory region tests and crash-state checks use.
//!
//! The model is x86's with `clwb` and `sfence` (what Chipmunk and Vinter test against): a
//! store is visible to later loads at once but sits in a volatile CPU cache; a
//! [`PersistentMemory::clwb`] asks for its 64-byte line to be written back, and only a
//! later [`PersistentMemory::fence`] guarantees that every line written back before it is
//! persistent. A crash may also persist any line not yet written back (eviction), and a
//! store is atomic only per aligned 8 bytes.

use std::io;
use std::sync::RwLock;

/// A cache line: the unit a write-back persists.
pub const LINE: u64 = 64;
/// The atomic store unit: an aligned 8-byte store never tears.
pub const WORD: u64 = 8;

/// A byte-addressable persistent-memory region with a volatile CPU cache in front.
pub trait PersistentMemory: Send + Sync {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Loads `buf.len()` bytes at `offset` (sees every store so far).
    fn load(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Stores `data` at `offset` (into the cache: not persistent yet).
    fn store(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Writes back every cache line overlapping `offset..offset + len` (`clwb`): persistent
    /// once a later [`PersistentMemory::fence`] completes.
    fn clwb(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Waits until every line written back so far is persistent (`sfence`).
    fn fence(&self) -> io::Result<()>;
}

fn check(size: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("PM range {offset}+{len} is past the region's end ({size} bytes)"),
        )),
    }
}

/// A PM region in memory; write-backs and fences only count (its contents are what a
/// crash state says persisted, so there is nothing volatile to lose).
pub struct MemPm {
    data: RwLock<Vec<u8>>,
}

impl MemPm {
    /// A zero-filled region of `size` bytes.
    pub fn new(size: u64) -> MemPm {
        MemPm::from_bytes(vec![0; size as usize])
    }
    /// A region holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> MemPm {
        MemPm { data: RwLock::new(bytes) }
    }
    /// A copy of the region.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().map(|d| d.clone()).unwrap_or_default()
    }
}

impl PersistentMemory for MemPm {
    fn size(&self) -> u64 {
        self.data.read().map(|d| d.len() as u64).unwrap_or(0)
    }
    fn load(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let d = self.data.read().map_err(|_| io::Error::other("poisoned"))?;
        check(d.len() as u64, offset, buf.len() as u64)?;
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn store(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = self.data.write().map_err(|_| io::Error::other("poisoned"))?;
        check(d.len() as u64, offset, data.len() as u64)?;
        d[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn clwb(&self, offset: u64, len: u64) -> io::Result<()> {
        check(self.size(), offset, len)
    }
    fn fence(&self) -> io::Result<()> {
        Ok(())
    }
}
