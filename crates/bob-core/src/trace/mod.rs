//! The trace: the ordered requests the recorded device received.
//!
//! The model is the dm-log-writes entry itself (sector, sector count, flags, data), so a
//! log from the kernel target or from xfstests round-trips byte for byte; [`EntryKind`]
//! is the interpreted view the permuter works with. On disk a trace is a dm-log-writes
//! log ([`log`]) plus a JSON sidecar ([`sidecar`]) for what the format cannot carry,
//! side by side in a trace directory ([`TraceDir`]).
//!
//! Payloads are [`Bytes`]: cloning an entry or a trace never copies write data. A trace
//! read from a log file, or recorded (the recorder streams every request into a log file
//! as it arrives, [`file::LogStream`]), is that file mapped into memory once, and each
//! entry's data is a slice of the mapping ([`file::LogFile`]): memory holds the index
//! (one small [`Entry`] per request), the page cache holds the payloads, shared by every
//! crash state and every process that maps the same file.

pub mod blktrace;
pub(crate) mod dir;
pub mod file;
mod format;
pub(crate) mod fua;
pub mod log;
pub mod replay_log;
pub mod sidecar;

use std::sync::Arc;

pub use bytes::Bytes;
pub use dir::{TraceDir, TraceDirError};

/// Size of the simulated disk's atomic unit and of the log's addressing unit.
pub(crate) const SECTOR_SIZE: u64 = 512;

/// The reserved prefix of an asynchronous durability notification (ADN): a mark bob's
/// disk appends when every write it received before the mark is durable without a flush
/// (see [`crate::record::RecordingDisk::set_adn`]). It stays a plain dm-log-writes mark, so
/// replay-log and any other reader of the log still read the trace; bob's epochs treat it
/// as a barrier for the writes before it ([`crate::crash::epochs`]). A program's mark
/// that starts with it is logged with `program ` in front.
pub(crate) const ADN_PREFIX: &str = "bob-adn: ";

/// The reserved prefix of a released output: a mark a file system with external
/// synchrony (researchfs' xsyncfs family) logs when it lets a program's output leave the
/// machine, e.g. `bob-output: o1`. A plain mark too (not a barrier); the property
/// `output-durable` reads which outputs a crash state had released from them
/// ([`crate::check::Subject::released_outputs`]).
pub(crate) const OUTPUT_PREFIX: &str = "bob-output: ";

/// The mark text of a released output.
pub(crate) fn output_mark(text: &str) -> String {
    format!("{OUTPUT_PREFIX}{text}")
}

/// dm-log-writes entry flags (`LOG_*_FLAG` in drivers/md/dm-log-writes.c).
///
/// [`Entry::flags`] stays the raw `u64` the log stores, so that bits bob does not name
/// (the role field of [`crate::fs::roles`], a newer kernel's flags) survive a round trip;
/// the constants test and set bits on it. [`flags::EntryFlags`] is the same bits as a typed
/// set, for naming them ([`flags::names`]).
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
    /// bob's own bit, on a flush: the block layer issued it only to emulate the FUA of an
    /// earlier write, because the recorded device (a loop device) has no FUA. A disk with
    /// real FUA issues no such flush, so under the `real` FUA model it is no barrier. The
    /// FLUSH bit stays, so replay-log and dm-log-writes readers see what was recorded.
    pub const FUA_POSTFLUSH: u64 = 1 << 5;

    bitflags::bitflags! {
        /// The named entry flags as a typed set. Built with
        /// [`EntryFlags::from_bits_retain`], it keeps every other bit too.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct EntryFlags: u64 {
            /// [`FLUSH`].
            const FLUSH = FLUSH;
            /// [`FUA`].
            const FUA = FUA;
            /// [`DISCARD`].
            const DISCARD = DISCARD;
            /// [`MARK`].
            const MARK = MARK;
            /// [`METADATA`].
            const METADATA = METADATA;
            /// [`FUA_POSTFLUSH`].
            const FUA_POSTFLUSH = FUA_POSTFLUSH;
        }
    }

    /// The flags dm-log-writes defines, the ones replay-log names: all but bob's own
    /// [`FUA_POSTFLUSH`].
    pub const KERNEL: EntryFlags = EntryFlags::FLUSH
        .union(EntryFlags::FUA)
        .union(EntryFlags::DISCARD)
        .union(EntryFlags::MARK)
        .union(EntryFlags::METADATA);

    /// The flags of `bits` that are among `named`, by name in bit order, and the other
    /// bits of `bits`.
    pub(crate) fn split_names(bits: u64, named: EntryFlags) -> (Vec<&'static str>, u64) {
        let known = EntryFlags::from_bits_retain(bits) & named;
        (known.iter_names().map(|(name, _)| name).collect(), bits & !named.bits())
    }

    /// The flags of `bits` by name, in bit order and joined by `|` (`FLUSH|FUA`), the
    /// bits without a name as one hex number at the end (`METADATA|0x300`); `-` for none.
    pub fn names(bits: u64) -> String {
        let (mut out, unnamed) = split_names(bits, EntryFlags::all());
        let unnamed = format!("{unnamed:#x}");
        if unnamed != "0x0" {
            out.push(&unnamed);
        }
        if out.is_empty() {
            "-".into()
        } else {
            out.join("|")
        }
    }
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
    /// Write payload (`nr_sectors * 512` bytes) or mark text; empty otherwise. A shared
    /// buffer (often a slice of a mapped log file): clones do not copy it.
    pub data: Bytes,
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
    /// A write of `data` (a whole number of sectors) at `sector`. A `Vec<u8>` is taken
    /// over without a copy.
    pub fn write(sector: u64, data: impl Into<Bytes>) -> Self {
        let data = data.into();
        debug_assert_eq!(data.len() as u64 % SECTOR_SIZE, 0);
        Entry { sector, nr_sectors: data.len() as u64 / SECTOR_SIZE, flags: 0, data }
    }
    /// An empty cache flush.
    pub fn flush() -> Self {
        Entry { sector: 0, nr_sectors: 0, flags: flags::FLUSH, data: Bytes::new() }
    }
    /// A discard of `nr_sectors` sectors at `sector`.
    pub fn discard(sector: u64, nr_sectors: u64) -> Self {
        Entry { sector, nr_sectors, flags: flags::DISCARD, data: Bytes::new() }
    }
    /// A mark with `text`.
    pub fn mark(text: &str) -> Self {
        Entry {
            sector: 0,
            nr_sectors: 0,
            flags: flags::MARK,
            data: Bytes::copy_from_slice(text.as_bytes()),
        }
    }
    /// An asynchronous durability notification: the first `writes` write requests the disk
    /// received since recording started are durable (every one before this entry).
    pub(crate) fn adn(writes: u64) -> Self {
        Entry::mark(&format!("{ADN_PREFIX}durable through write {writes}"))
    }
    /// Whether this entry is an asynchronous durability notification ([`ADN_PREFIX`]).
    pub(crate) fn is_adn(&self) -> bool {
        self.flags & flags::MARK != 0 && self.data.starts_with(ADN_PREFIX.as_bytes())
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
    /// Whether this flush only emulated an earlier write's FUA ([`flags::FUA_POSTFLUSH`]).
    pub fn is_fua_postflush(&self) -> bool {
        self.kind() == EntryKind::Flush && self.flags & flags::FUA_POSTFLUSH != 0
    }
    /// Whether this write carries metadata (REQ_META).
    pub(crate) fn is_metadata(&self) -> bool {
        self.flags & flags::METADATA != 0
    }
}

/// A whole trace: the index in memory, the payloads shared (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The log's sector size (512 for every log bob writes).
    pub sector_size: u32,
    /// The requests in the order the device received them.
    pub entries: Vec<Entry>,
    /// The log file the entries were read from or streamed into, when there is one.
    /// Saving copies that file instead of encoding the entries again, as long as they
    /// are still exactly its entries ([`file::LogFile::holds`]); edit `entries` freely,
    /// a trace that no longer matches its file is simply encoded. Not part of equality.
    pub file: Option<Arc<file::LogFile>>,
}

impl Trace {
    /// A trace of `entries` in memory, with no log file behind it.
    pub fn new(sector_size: u32, entries: Vec<Entry>) -> Self {
        Trace { sector_size, entries, file: None }
    }

    /// blake3 of the entries (sector, length, flags and data of each, in order), lowercase
    /// hex: equal for equal traces wherever their payloads live, so that two recordings
    /// (say, of one workload under two drain schedules) can be told apart or matched.
    pub fn digest(&self) -> String {
        let mut h = blake3::Hasher::new();
        h.update(&self.sector_size.to_le_bytes());
        for e in &self.entries {
            h.update(&e.sector.to_le_bytes());
            h.update(&e.nr_sectors.to_le_bytes());
            h.update(&e.flags.to_le_bytes());
            h.update(&(e.data.len() as u64).to_le_bytes());
            h.update(&e.data);
        }
        h.finalize().to_hex().to_string()
    }
}

/// Two traces are equal when their sector sizes and entries are (payloads compared by
/// content), wherever the payloads live.
impl PartialEq for Trace {
    fn eq(&self, other: &Self) -> bool {
        self.sector_size == other.sector_size && self.entries == other.entries
    }
}

impl Eq for Trace {}

#[cfg(test)]
mod tests {
    use super::flags::{self, names, EntryFlags};

    #[test]
    fn flags_are_named_and_unnamed_bits_survive() {
        assert_eq!(names(0), "-");
        assert_eq!(names(flags::FUA | flags::FLUSH), "FLUSH|FUA");
        // A role in bits 8..12 and a bit no kernel has yet: kept, shown as hex.
        let raw = flags::METADATA | 3 << 8 | 1 << 40;
        assert_eq!(names(raw), format!("METADATA|{:#x}", 3u64 << 8 | 1 << 40));
        assert_eq!(EntryFlags::from_bits_retain(raw).bits(), raw);
        assert!(EntryFlags::from_bits_retain(raw).contains(EntryFlags::METADATA));
        assert_eq!(names(flags::FLUSH | flags::FUA_POSTFLUSH), "FLUSH|FUA_POSTFLUSH");
        let (kernel, rest) = flags::split_names(flags::MARK | flags::FUA_POSTFLUSH, flags::KERNEL);
        assert_eq!((kernel, rest), (vec!["MARK"], flags::FUA_POSTFLUSH));
    }
}
