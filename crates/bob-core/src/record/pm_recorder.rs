//! The PM region recorded beside bob's disk (see [`crate::pm`]).

use std::sync::{Arc, Mutex};

use super::RecordingDisk;
use crate::pm::{PmEntry, PmTrace};

/// [`researchfs::PersistentMemory`] over bob's recorder: the region in memory, written
/// through until [`PmRecorder::start`] (mkfs and setup), then every call logged with the
/// disk's log position. Marks reach it from the disk ([`RecordingDisk::mark`]).
pub struct PmRecorder {
    disk: Arc<RecordingDisk>,
    st: Mutex<RecState>,
}

struct RecState {
    mem: Vec<u8>,
    base: Option<Vec<u8>>,
    entries: Vec<PmEntry>,
}

impl PmRecorder {
    /// A zero-filled region of `size` bytes beside `disk`.
    pub fn new(disk: Arc<RecordingDisk>, size: u64) -> PmRecorder {
        PmRecorder {
            disk,
            st: Mutex::new(RecState {
                mem: vec![0; size as usize],
                base: None,
                entries: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Freezes the base image; logs from now on.
    pub fn start(&self) {
        let mut st = self.lock();
        st.base = Some(st.mem.clone());
        st.entries.clear();
    }

    /// Copies a mark of the disk's log (made when it had `disk` entries).
    pub fn mark(&self, text: &str, disk: u64) {
        let mut st = self.lock();
        if st.base.is_some() {
            st.entries.push(PmEntry::Mark { text: text.to_owned(), disk });
        }
    }

    /// Stops logging: the base image and the log (an empty log over the current region
    /// if logging never started).
    pub(crate) fn stop(&self) -> PmTrace {
        let mut st = self.lock();
        let base = st.base.take().unwrap_or_else(|| st.mem.clone());
        PmTrace { base, entries: std::mem::take(&mut st.entries) }
    }

    fn log(&self, entry: impl FnOnce(u64) -> PmEntry) {
        let disk = self.disk.logged_entries();
        let mut st = self.lock();
        if st.base.is_some() {
            st.entries.push(entry(disk));
        }
    }
}

fn range_check(size: usize, offset: u64, len: u64) -> std::io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size as u64 => Ok(()),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("PM range {offset}+{len} is past the region's end ({size} bytes)"),
        )),
    }
}

impl researchfs::PersistentMemory for PmRecorder {
    fn size(&self) -> u64 {
        self.lock().mem.len() as u64
    }
    fn load(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let st = self.lock();
        range_check(st.mem.len(), offset, buf.len() as u64)?;
        buf.copy_from_slice(&st.mem[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn store(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        {
            let mut st = self.lock();
            range_check(st.mem.len(), offset, data.len() as u64)?;
            st.mem[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        }
        self.log(|disk| PmEntry::Store { offset, data: data.to_vec(), disk });
        Ok(())
    }
    fn clwb(&self, offset: u64, len: u64) -> std::io::Result<()> {
        range_check(self.lock().mem.len(), offset, len)?;
        self.log(|disk| PmEntry::Clwb { offset, len, disk });
        Ok(())
    }
    fn fence(&self) -> std::io::Result<()> {
        self.log(|disk| PmEntry::Fence { disk });
        Ok(())
    }
}
