//! The trace: the ordered requests the recorded device received.
//!
//! The model is the dm-log-writes entry itself (sector, sector count, flags, data), so a
//! log from the kernel target or from xfstests round-trips byte for byte; [`EntryKind`]
//! is the interpreted view the permuter works with. On disk a trace is a dm-log-writes
//! log ([`log`]) plus a JSON sidecar ([`sidecar`]) for what the format cannot carry,
//! side by side in a trace directory ([`TraceDir`]).

pub mod blktrace;
pub mod dir;
pub mod log;
pub mod sidecar;

pub use dir::{TraceDir, TraceDirError};

/// Size of the simulated disk's atomic unit and of the log's addressing unit.
pub const SECTOR_SIZE: u64 = 512;

/// dm-log-writes entry flags (`LOG_*_FLAG` in drivers/md/dm-log-writes.c).
pub mod flags {
    /// A cache flush; with data, a flush that precedes the write (REQ_PREFLUSH).
    pub const FLUSH: u64 = 1 << 0;
    /// Forced unit access: durable when it completes.
    pub const FUA: u64 = 1 << 1;
    /// A discard of `nr_sectors` sectors at `sector`.
    pub const DISCARD: u64 = 1 << 2;
    /// A mark: `data` holds its text.
    pub const MARK: u64 = 1 << 3;
    /// The write carries file-system metadata (REQ_META).
    pub const METADATA: u64 = 1 << 4;
}

/// One logged request, exactly as dm-log-writes stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First 512-byte sector addressed.
    pub sector: u64,
    /// Number of 512-byte sectors addressed (0 for flushes and marks).
    pub nr_sectors: u64,
    /// `flags::*` bits.
    pub flags: u64,
    /// Write payload (`nr_sectors * 512` bytes) or mark text; empty otherwise.
    pub data: Vec<u8>,
}

/// What an entry means to the permuter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// Data written at `sector`; `preflush` and `fua` carry the barrier semantics.
    Write {
        /// A flush precedes this write.
        preflush: bool,
        /// Durable on completion.
        fua: bool,
    },
    /// An empty cache flush.
    Flush,
    /// Sectors discarded (read back as zeros on the simulated disk).
    Discard,
    /// A workload annotation.
    Mark,
}

impl Entry {
    /// A write of `data` (a whole number of sectors) at `sector`.
    pub fn write(sector: u64, data: Vec<u8>) -> Self {
        debug_assert_eq!(data.len() as u64 % SECTOR_SIZE, 0);
        Entry { sector, nr_sectors: data.len() as u64 / SECTOR_SIZE, flags: 0, data }
    }
    /// An empty cache flush.
    pub fn flush() -> Self {
        Entry { sector: 0, nr_sectors: 0, flags: flags::FLUSH, data: Vec::new() }
    }
    /// A discard of `nr_sectors` sectors at `sector`.
    pub fn discard(sector: u64, nr_sectors: u64) -> Self {
        Entry { sector, nr_sectors, flags: flags::DISCARD, data: Vec::new() }
    }
    /// A mark with `text`.
    pub fn mark(text: &str) -> Self {
        Entry { sector: 0, nr_sectors: 0, flags: flags::MARK, data: text.as_bytes().to_vec() }
    }
    /// The interpreted kind.
    pub fn kind(&self) -> EntryKind {
        if self.flags & flags::MARK != 0 {
            EntryKind::Mark
        } else if self.flags & flags::DISCARD != 0 {
            EntryKind::Discard
        } else if self.nr_sectors == 0 && self.flags & flags::FLUSH != 0 {
            EntryKind::Flush
        } else {
            EntryKind::Write {
                preflush: self.flags & flags::FLUSH != 0,
                fua: self.flags & flags::FUA != 0,
            }
        }
    }
    /// The mark's text, if this is a mark.
    pub fn mark_text(&self) -> Option<String> {
        (self.kind() == EntryKind::Mark).then(|| String::from_utf8_lossy(&self.data).into_owned())
    }
    /// Whether this write carries metadata (REQ_META).
    pub fn is_metadata(&self) -> bool {
        self.flags & flags::METADATA != 0
    }
}

/// A whole trace in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The log's sector size (512 for every log bob writes).
    pub sector_size: u32,
    /// The requests in the order the device received them.
    pub entries: Vec<Entry>,
}
