//! Reading and writing traces in the on-disk format of the Linux dm-log-writes target.
//!
//! A log written here is read by xfstests' `replay-log`, and a log written by the kernel
//! target (or by `replay-log`'s test suites) imports as a [`Trace`].
//!
//! # The format
//!
//! Verified against `drivers/md/dm-log-writes.c` (kernel 6.x: `log_writes_ctr`,
//! `log_writes_kthread`, `log_one_block`, `write_metadata`, `log_mark`, `log_writes_map`)
//! and xfstests' `src/log-writes/log-writes.{c,h}` and `replay-log.c` (`log_open`,
//! `log_seek_entry`, `log_seek_next_entry`, `log_replay_next_entry`, `log_entry_valid`,
//! `should_stop`). All integers are little-endian. `S` below is the log's sector size, the
//! logical block size of the recorded device (512 or 4096 in practice).
//!
//! * **Super block**, the first `S` bytes: `u64 magic = 0x6a736677736872`, `u64 version = 1`,
//!   `u64 nr_entries`, `u32 sectorsize` (= `S`), then padding to `S`. The kernel copies the
//!   32-byte C struct from the stack, so bytes 28..32 may hold garbage in a kernel log;
//!   bob writes zeros and ignores them on read.
//! * **Entries** start at byte `S` (the kernel's `next_sector = sectorsize >> SECTOR_SHIFT`
//!   in 512-byte units; `replay-log` seeks to `sectorsize`). Each entry is one header block of
//!   `S` bytes: `u64 sector`, `u64 nr_sectors`, `u64 flags`, `u64 data_len`, then, for a mark
//!   only, the mark text (`data_len` bytes, no terminating NUL counted), then zeros to `S`.
//! * **Write data** follows the header block directly: `nr_sectors * S` bytes, already a whole
//!   number of blocks. For a write, `data_len` is 0.
//! * `sector` and `nr_sectors` count **units of `S`**, not 512-byte sectors (the kernel's
//!   `bio_to_dev_sectors`; `replay-log` multiplies both by `sectorsize`). bob's [`Entry`]
//!   counts 512-byte sectors, so the reader multiplies by `S / 512` and the writer divides
//!   (and refuses entries not aligned to `S`). With `S = 512` the two agree.
//! * The next entry starts at `header + S + nr_sectors * S` for writes, and at `header + S`
//!   for flushes, marks **and discards**: a discard has `nr_sectors` set to the discarded
//!   length but carries no data (the kernel only advances `next_sector` by `nr_sectors` when
//!   the DISCARD flag is clear; `replay-log` skips data the same way).
//!
//! | kind    | flags                       | sector / nr_sectors | data_len    | after header |
//! |---------|-----------------------------|---------------------|-------------|--------------|
//! | write   | 0, FUA, FLUSH, META, ...    | target range        | 0           | data         |
//! | flush   | FLUSH                       | 0 / 0               | 0           | nothing      |
//! | discard | DISCARD                     | discarded range     | 0           | nothing      |
//! | mark    | MARK (exactly)              | 0 / 0               | text length | nothing      |
//!
//! # Where the kernel and xfstests disagree, and other sharp edges
//!
//! * `replay-log`'s `log_entry_valid` calls an entry with `flags == 0 && nr_sectors == 0`
//!   malformed, and calls any entry whose flags are not *exactly* `MARK` malformed when the
//!   byte right after the 32-byte header is non-zero. The kernel never produces either, so
//!   bob rejects both (on write and on read): marks carry exactly the MARK flag.
//! * `replay-log` compares mark text with `strncmp(.., data_len + 1)`, relying on a NUL after
//!   the text inside the header block. The kernel guarantees it by truncating marks to
//!   `S - 32 - 1` bytes (`kstrndup(data, maxsize - 1)`); bob enforces the same limit
//!   ([`max_mark_len`]) and refuses NUL bytes inside mark text.
//! * Older kernels (until DAX support was dropped from the target) also logged DAX writes
//!   with inline data: `data_len` = byte count, `nr_sectors = ALIGN(data_len, S) / S`, data
//!   zero-padded after the header. `replay-log` ignores `data_len` for writes and replays
//!   `nr_sectors * S` bytes. bob reads such entries the same way; the padded data is kept
//!   and `data_len` is not (it is written back as 0).
//! * The kernel rewrites the super block (and so `nr_entries`) only after FUA and mark
//!   entries and when the target is removed (it logs a final mark `dm-log-writes-end`), so a
//!   log device may hold more entries than `nr_entries` says, plus stale bytes after them.
//!   Like `replay-log`, bob reads exactly `nr_entries` entries and ignores trailing bytes.
//! * Old `replay-log` (2017) truncated `flags`/`nr_sectors` to 32 bits in
//!   `log_seek_next_entry`; current xfstests reads all 64 bits.
//!
//! # Robustness
//!
//! Nothing read from the file is trusted: every size is checked against the file's real
//! remaining length (and [`MAX_WRITE_BYTES`]) before anything is allocated, and every
//! failure is a [`LogError`] naming the file, the entry index and the byte offset.
//!
//! # Files
//!
//! [`read_log_file`] and [`LogReader::open`] map a regular file into memory (see
//! [`super::file`]): entries slice the mapping, nothing is copied, only headers are read.
//! A reader over any other `Read + Seek` ([`LogReader::new`], [`read_log`]) copies. [`write_log_file`] and every other writer of a whole
//! file here write a new file and rename it over the old one, never truncating a file in
//! place, because a file some trace still maps must keep its bytes.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{flags, Entry, Trace, SECTOR_SIZE};

/// `WRITE_LOG_MAGIC`: the super block's first field.
pub const LOG_MAGIC: u64 = 0x006a_7366_7773_6872;
/// `WRITE_LOG_VERSION`: the only format version there is.
pub const LOG_VERSION: u64 = 1;
/// Bytes of the super block's fields (`magic`, `version`, `nr_entries`, `sectorsize`).
pub const SUPER_FIELDS_LEN: usize = 28;
/// Bytes of an entry header's fields (`sector`, `nr_sectors`, `flags`, `data_len`).
pub const ENTRY_HEADER_LEN: usize = 32;
/// Smallest sector size a log may declare (the kernel's `SECTOR_SIZE`).
pub const MIN_SECTOR_SIZE: u32 = 512;
/// Largest sector size a log may declare (the block layer's largest logical block size).
pub const MAX_SECTOR_SIZE: u32 = 64 * 1024;
/// Largest write payload accepted in one entry. A bio's size is a `u32` byte count, so a
/// real log never comes close; anything larger is treated as corruption.
pub const MAX_WRITE_BYTES: u64 = 1 << 30;

/// Longest mark text a log with `sector_size` can carry: the header block minus the
/// 32-byte header minus the NUL that `replay-log` relies on (the kernel's `maxsize - 1`).
pub fn max_mark_len(sector_size: u32) -> usize {
    (sector_size as usize).saturating_sub(ENTRY_HEADER_LEN + 1)
}

/// What went wrong, without where (see [`LogError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogErrorKind {
    /// The underlying file or stream failed.
    #[error("I/O error: {0}")]
    Io(#[source] io::Error),
    /// The log ends before a structure it declares.
    #[error("log is truncated: {what} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// The super block does not start with [`LOG_MAGIC`].
    #[error("not a dm-log-writes log: magic is {found:#x}, expected {LOG_MAGIC:#x}")]
    BadMagic {
        /// The magic found.
        found: u64,
    },
    /// The super block's version is not [`LOG_VERSION`].
    #[error("unsupported dm-log-writes version {found} (only {LOG_VERSION} exists)")]
    UnsupportedVersion {
        /// The version found.
        found: u64,
    },
    /// The sector size is zero, not a power of two, or outside 512..=65536.
    #[error(
        "invalid sector size {found}: must be a power of two in \
         {MIN_SECTOR_SIZE}..={MAX_SECTOR_SIZE}"
    )]
    BadSectorSize {
        /// The sector size found (or requested).
        found: u32,
    },
    /// The super block claims more entries than the file has room for.
    #[error(
        "super block claims {nr_entries} entries but the file can hold at most {capacity} \
         (one {sector_size}-byte header block each)"
    )]
    TooManyEntries {
        /// Entries claimed.
        nr_entries: u64,
        /// Entries the file's length allows.
        capacity: u64,
        /// The log's sector size.
        sector_size: u32,
    },
    /// A write's payload exceeds [`MAX_WRITE_BYTES`] or overflows.
    #[error("write of {nr_sectors} log sectors is too large (limit {MAX_WRITE_BYTES} bytes)")]
    WriteTooLarge {
        /// `nr_sectors` in log units.
        nr_sectors: u64,
    },
    /// `data_len` does not fit the entry's kind and `nr_sectors`.
    #[error(
        "data_len {data_len} is inconsistent with flags {flags:#x} and nr_sectors {nr_sectors}"
    )]
    DataLenMismatch {
        /// Entry flags.
        flags: u64,
        /// `nr_sectors` in log units.
        nr_sectors: u64,
        /// `data_len` as stored.
        data_len: u64,
    },
    /// Mark text longer than the header block can carry.
    #[error("mark text of {len} bytes exceeds the limit of {max} for this sector size")]
    MarkTooLong {
        /// Text length (as stored or requested; may be absurd).
        len: u64,
        /// [`max_mark_len`] for the log.
        max: usize,
    },
    /// Mark text containing a NUL byte (the kernel's marks are C strings).
    #[error("mark text contains a NUL byte at {at}")]
    MarkContainsNul {
        /// Index of the NUL in the text.
        at: usize,
    },
    /// A mark with flags other than exactly `MARK`.
    #[error("mark has flags {flags:#x}; a mark carries exactly the MARK flag (0x8)")]
    MarkFlags {
        /// The flags found.
        flags: u64,
    },
    /// A mark addressing sectors.
    #[error("mark addresses {nr_sectors} sectors; marks address none")]
    MarkHasSectors {
        /// `nr_sectors` found.
        nr_sectors: u64,
    },
    /// A discard, flush or other non-write entry carrying data.
    #[error("{kind} entry carries {len} bytes of data; it must carry none")]
    UnexpectedData {
        /// "discard" or similar.
        kind: &'static str,
        /// Bytes of data.
        len: usize,
    },
    /// An entry with neither flags nor sectors (`replay-log`'s "all zeroes entry").
    #[error("entry has no flags and no sectors (replay-log rejects it as malformed)")]
    EmptyEntry,
    /// Non-zero bytes in the header block after the header (and mark text).
    #[error("header block padding is not zero at byte {at} of the block")]
    NonZeroPadding {
        /// Offset inside the header block.
        at: usize,
    },
    /// `sector + nr_sectors`, in bytes, does not fit in a `u64`.
    #[error("sector range {sector}+{nr_sectors} overflows")]
    SectorOverflow {
        /// First sector (512-byte units).
        sector: u64,
        /// Sector count (512-byte units).
        nr_sectors: u64,
    },
    /// An entry not aligned to the log's sector size (writer only).
    #[error(
        "sector range {sector}+{nr_sectors} (512-byte units) is not aligned to the log's \
         {sector_size}-byte sectors"
    )]
    Unaligned {
        /// First sector (512-byte units).
        sector: u64,
        /// Sector count (512-byte units).
        nr_sectors: u64,
        /// The log's sector size.
        sector_size: u32,
    },
    /// A write whose data length is not `nr_sectors * 512` (writer only).
    #[error(
        "write of {nr_sectors} sectors carries {len} bytes of data, expected nr_sectors * 512"
    )]
    DataSizeMismatch {
        /// `nr_sectors` (512-byte units).
        nr_sectors: u64,
        /// Bytes of data.
        len: usize,
    },
    /// The writer failed earlier and its output is in an unknown state.
    #[error("the log writer failed earlier; the log is incomplete")]
    WriterPoisoned,
}

/// A log could not be read or written: where (file, entry, byte offset) and what.
///
/// Displays as one line, e.g.
/// `trace.log: entry 3 at byte 2048: log is truncated: write data needs 4096 bytes but only
/// 1000 remain`. [`std::error::Error::source`] is the underlying I/O error, if any.
#[derive(Debug)]
pub struct LogError {
    /// The log file, if the log is a file.
    pub path: Option<PathBuf>,
    /// The entry's index, if the error concerns one entry.
    pub entry: Option<u64>,
    /// Byte offset in the log of the structure at fault (the entry header, or 0 for the
    /// super block).
    pub offset: u64,
    /// What went wrong.
    pub kind: LogErrorKind,
}

impl LogError {
    pub(super) fn new(
        path: Option<&Path>,
        entry: Option<u64>,
        offset: u64,
        kind: LogErrorKind,
    ) -> Self {
        LogError { path: path.map(Path::to_path_buf), entry, offset, kind }
    }

    /// An I/O error on the file at `path`, at byte `offset` (0: the super block).
    pub(super) fn io(path: &Path, offset: u64, e: io::Error) -> Self {
        LogError::new(Some(path), None, offset, LogErrorKind::Io(e))
    }
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: ", p.display())?,
            None => f.write_str("dm-log-writes log: ")?,
        }
        match self.entry {
            Some(e) => write!(f, "entry {e} at byte {}: {}", self.offset, self.kind),
            None if self.offset == 0 => write!(f, "super block: {}", self.kind),
            None => write!(f, "byte {}: {}", self.offset, self.kind),
        }
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The kind is already part of Display; expose what lies beneath it.
        std::error::Error::source(&self.kind)
    }
}

pub(super) fn check_sector_size(sector_size: u32) -> Result<(), LogErrorKind> {
    if sector_size.is_power_of_two() && (MIN_SECTOR_SIZE..=MAX_SECTOR_SIZE).contains(&sector_size) {
        Ok(())
    } else {
        Err(LogErrorKind::BadSectorSize { found: sector_size })
    }
}

/// The sector size a trace is written with: [`Trace::sector_size`], or 512 when it is 0
/// (so that `Trace::default()` writes a valid log).
pub(super) fn effective_sector_size(trace: &Trace) -> u32 {
    if trace.sector_size == 0 {
        SECTOR_SIZE as u32
    } else {
        trace.sector_size
    }
}

/// An entry's fields with its data borrowed: what the checks and the encoder need, so that
/// the recorder can log a write straight from the request's buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct EntryRef<'a> {
    pub(super) sector: u64,
    pub(super) nr_sectors: u64,
    pub(super) flags: u64,
    pub(super) data: &'a [u8],
}

impl Entry {
    pub(super) fn view(&self) -> EntryRef<'_> {
        EntryRef {
            sector: self.sector,
            nr_sectors: self.nr_sectors,
            flags: self.flags,
            data: &self.data,
        }
    }
}

/// Checks an entry against the format's rules for a log with `sector_size`. Shared by the
/// reader (after decoding) and the writer (before encoding), so whatever one accepts the
/// other does too.
pub(super) fn check_entry(e: EntryRef<'_>, sector_size: u32) -> Result<(), LogErrorKind> {
    // The byte range [sector * 512, (sector + nr_sectors) * 512) must be representable.
    e.sector
        .checked_add(e.nr_sectors)
        .and_then(|end| end.checked_mul(SECTOR_SIZE))
        .ok_or(LogErrorKind::SectorOverflow { sector: e.sector, nr_sectors: e.nr_sectors })?;
    let factor = u64::from(sector_size) / SECTOR_SIZE;
    if e.flags & flags::MARK != 0 {
        if e.flags != flags::MARK {
            return Err(LogErrorKind::MarkFlags { flags: e.flags });
        }
        if e.nr_sectors != 0 {
            return Err(LogErrorKind::MarkHasSectors { nr_sectors: e.nr_sectors });
        }
        let max = max_mark_len(sector_size);
        if e.data.len() > max {
            return Err(LogErrorKind::MarkTooLong { len: e.data.len() as u64, max });
        }
        if let Some(at) = e.data.iter().position(|&b| b == 0) {
            return Err(LogErrorKind::MarkContainsNul { at });
        }
        if e.sector % factor != 0 {
            return Err(LogErrorKind::Unaligned { sector: e.sector, nr_sectors: 0, sector_size });
        }
        return Ok(());
    }
    if e.sector % factor != 0 || e.nr_sectors % factor != 0 {
        return Err(LogErrorKind::Unaligned {
            sector: e.sector,
            nr_sectors: e.nr_sectors,
            sector_size,
        });
    }
    if e.flags & flags::DISCARD != 0 {
        if !e.data.is_empty() {
            return Err(LogErrorKind::UnexpectedData { kind: "discard", len: e.data.len() });
        }
        return Ok(());
    }
    if e.flags == 0 && e.nr_sectors == 0 {
        return Err(LogErrorKind::EmptyEntry);
    }
    let want = e.nr_sectors.checked_mul(SECTOR_SIZE);
    match want {
        Some(w) if w > MAX_WRITE_BYTES => {
            Err(LogErrorKind::WriteTooLarge { nr_sectors: e.nr_sectors / factor })
        }
        Some(w) if w == e.data.len() as u64 => Ok(()),
        _ => Err(LogErrorKind::DataSizeMismatch { nr_sectors: e.nr_sectors, len: e.data.len() }),
    }
}

pub(super) fn super_block(sector_size: u32, nr_entries: u64) -> Vec<u8> {
    let mut b = vec![0u8; sector_size as usize];
    b[0..8].copy_from_slice(&LOG_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&LOG_VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&nr_entries.to_le_bytes());
    b[24..28].copy_from_slice(&sector_size.to_le_bytes());
    b
}

/// Encodes a checked entry's header block into `block` (exactly `sector_size` bytes).
fn encode_header(e: EntryRef<'_>, sector_size: u32, block: &mut Vec<u8>) {
    let factor = u64::from(sector_size) / SECTOR_SIZE;
    let is_mark = e.flags & flags::MARK != 0;
    let data_len = if is_mark { e.data.len() as u64 } else { 0 };
    block.clear();
    block.resize(sector_size as usize, 0);
    block[0..8].copy_from_slice(&(e.sector / factor).to_le_bytes());
    block[8..16].copy_from_slice(&(e.nr_sectors / factor).to_le_bytes());
    block[16..24].copy_from_slice(&e.flags.to_le_bytes());
    block[24..32].copy_from_slice(&data_len.to_le_bytes());
    if is_mark {
        block[ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + e.data.len()].copy_from_slice(e.data);
    }
}

/// Bytes an entry occupies in the log (header block plus data).
pub(super) fn entry_len(e: EntryRef<'_>, sector_size: u32) -> u64 {
    let data = if e.flags & (flags::MARK | flags::DISCARD) != 0 { 0 } else { e.data.len() };
    u64::from(sector_size) + data as u64
}

/// Writes one checked entry.
fn write_entry<W: Write>(
    w: &mut W,
    e: EntryRef<'_>,
    sector_size: u32,
    block: &mut Vec<u8>,
) -> io::Result<()> {
    encode_header(e, sector_size, block);
    w.write_all(block)?;
    if e.flags & (flags::MARK | flags::DISCARD) == 0 {
        w.write_all(e.data)?;
    }
    Ok(())
}

/// Writes `trace` as a complete dm-log-writes log to `w`.
///
/// Every entry is checked first (see the module docs for the rules), so nothing is written
/// when one is invalid. [`Trace::sector_size`] 0 means 512.
pub fn write_log<W: Write>(w: W, trace: &Trace) -> Result<(), LogError> {
    write_log_inner(w, trace, None)
}

/// Checks every entry of `trace` (see the module docs for the rules); its sector size.
fn check_trace(trace: &Trace, path: Option<&Path>) -> Result<u32, LogError> {
    let sector_size = effective_sector_size(trace);
    check_sector_size(sector_size).map_err(|k| LogError::new(path, None, 0, k))?;
    let mut offset = u64::from(sector_size);
    for (i, e) in trace.entries.iter().enumerate() {
        check_entry(e.view(), sector_size)
            .map_err(|k| LogError::new(path, Some(i as u64), offset, k))?;
        offset += entry_len(e.view(), sector_size);
    }
    Ok(sector_size)
}

fn write_log_inner<W: Write>(mut w: W, trace: &Trace, path: Option<&Path>) -> Result<(), LogError> {
    let sector_size = check_trace(trace, path)?;
    let io_err = |entry, offset, e| LogError::new(path, entry, offset, LogErrorKind::Io(e));
    w.write_all(&super_block(sector_size, trace.entries.len() as u64))
        .map_err(|e| io_err(None, 0, e))?;
    let mut block = Vec::with_capacity(sector_size as usize);
    let mut offset = u64::from(sector_size);
    for (i, e) in trace.entries.iter().enumerate() {
        write_entry(&mut w, e.view(), sector_size, &mut block)
            .map_err(|err| io_err(Some(i as u64), offset, err))?;
        offset += entry_len(e.view(), sector_size);
    }
    w.flush().map_err(|e| io_err(None, offset, e))
}

/// Writes `trace` as a dm-log-writes log to the file at `path`. A regular file there is
/// replaced (a new file renamed over it, so a trace mapping the old one keeps its bytes);
/// a device or pipe is written in place. Nothing changes at `path` on error.
pub fn write_log_file(path: &Path, trace: &Trace) -> Result<(), LogError> {
    // Checked before a temporary file is made, so an invalid trace leaves nothing behind.
    check_trace(trace, Some(path))?;
    replace_file(path, |file| write_log_inner(BufWriter::new(file), trace, Some(path)))
}

/// Writes a whole file at `path` with `write`: into a new file next to it that is then
/// renamed over `path`, unless `path` exists and is not a regular file (a device, a
/// pipe), which is opened and written in place. The temporary file is removed on error.
pub(super) fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut File) -> Result<(), LogError>,
) -> Result<(), LogError> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| LogError::io(path, 0, e))?;
        return write(&mut file);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // 0o666 before the umask: the permissions File::create gives.
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| LogError::io(path, 0, e))?;
    write(tmp.as_file_mut())?;
    tmp.persist(path).map_err(|e| LogError::io(path, 0, e.error))?;
    Ok(())
}

/// Streams entries into a log as they happen, the way the recorder produces them.
///
/// The super block is written at creation with `nr_entries = 0`; [`LogWriter::sync_super`]
/// rewrites it with the current count (the kernel does this after every FUA or mark
/// entry), and [`LogWriter::finish`] does so a last time and flushes. A writer dropped
/// without `finish` leaves a valid log holding the entries counted at the last sync.
#[derive(Debug)]
pub struct LogWriter<W: Write + Seek> {
    w: W,
    path: Option<PathBuf>,
    sector_size: u32,
    base: u64,
    offset: u64,
    nr_entries: u64,
    block: Vec<u8>,
    poisoned: bool,
}

impl LogWriter<BufWriter<File>> {
    /// Creates the log file at `path` (readable and writable) for a log with
    /// `sector_size`. A regular file already there is unlinked first rather than truncated,
    /// so that a trace still mapping it keeps its bytes.
    pub fn create(path: &Path, sector_size: u32) -> Result<Self, LogError> {
        let io = |e| LogError::io(path, 0, e);
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(path).map_err(io)?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        let mut w = LogWriter::new(BufWriter::new(file), sector_size).map_err(|mut e| {
            e.path = Some(path.to_path_buf());
            e
        })?;
        w.path = Some(path.to_path_buf());
        Ok(w)
    }

    /// The log file, e.g. to read back what [`LogWriter::flush`] wrote (positioned reads
    /// leave the writer's position alone).
    pub fn file(&self) -> &File {
        self.w.get_ref()
    }
}

impl<W: Write + Seek> LogWriter<W> {
    /// Starts a log at `w`'s current position, writing an empty super block.
    pub fn new(mut w: W, sector_size: u32) -> Result<Self, LogError> {
        check_sector_size(sector_size).map_err(|k| LogError::new(None, None, 0, k))?;
        let io = |e| LogError::new(None, None, 0, LogErrorKind::Io(e));
        let base = w.stream_position().map_err(io)?;
        w.write_all(&super_block(sector_size, 0)).map_err(io)?;
        Ok(LogWriter {
            w,
            path: None,
            sector_size,
            base,
            offset: u64::from(sector_size),
            nr_entries: 0,
            block: Vec::with_capacity(sector_size as usize),
            poisoned: false,
        })
    }

    fn err(&self, entry: Option<u64>, kind: LogErrorKind) -> LogError {
        LogError::new(self.path.as_deref(), entry, self.offset, kind)
    }

    /// Appends one entry and returns its index. An invalid entry is refused without
    /// writing anything; after an I/O error the writer refuses everything.
    pub fn append(&mut self, entry: &Entry) -> Result<usize, LogError> {
        self.append_ref(entry.view())
    }

    pub(super) fn append_ref(&mut self, entry: EntryRef<'_>) -> Result<usize, LogError> {
        let index = self.nr_entries;
        if self.poisoned {
            return Err(self.err(Some(index), LogErrorKind::WriterPoisoned));
        }
        check_entry(entry, self.sector_size).map_err(|k| self.err(Some(index), k))?;
        if let Err(e) = write_entry(&mut self.w, entry, self.sector_size, &mut self.block) {
            self.poisoned = true;
            return Err(self.err(Some(index), LogErrorKind::Io(e)));
        }
        self.offset += entry_len(entry, self.sector_size);
        self.nr_entries += 1;
        Ok(index as usize)
    }

    /// Pushes what is buffered to the underlying writer, so that it can be read back.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if self.poisoned {
            return Err(self.err(None, LogErrorKind::WriterPoisoned));
        }
        self.w.flush().map_err(|e| {
            self.poisoned = true;
            self.err(None, LogErrorKind::Io(e))
        })
    }

    /// Rewrites the super block with the current entry count and flushes, so that the
    /// log on disk is complete up to here.
    pub fn sync_super(&mut self) -> Result<(), LogError> {
        if self.poisoned {
            return Err(self.err(None, LogErrorKind::WriterPoisoned));
        }
        let block = super_block(self.sector_size, self.nr_entries);
        let end = self.base + self.offset;
        let res = (|| {
            self.w.seek(SeekFrom::Start(self.base))?;
            self.w.write_all(&block)?;
            self.w.seek(SeekFrom::Start(end))?;
            self.w.flush()
        })();
        res.map_err(|e| {
            self.poisoned = true;
            LogError::new(self.path.as_deref(), None, 0, LogErrorKind::Io(e))
        })
    }

    /// Entries appended so far.
    pub fn nr_entries(&self) -> u64 {
        self.nr_entries
    }

    /// The log's sector size.
    pub fn sector_size(&self) -> u32 {
        self.sector_size
    }

    /// Byte offset (from the super block) at which the next entry will be written.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Writes the final entry count into the super block, flushes, and returns the
    /// underlying writer (e.g. to `sync_all` the file).
    pub fn finish(mut self) -> Result<W, LogError> {
        self.sync_super()?;
        Ok(self.w)
    }
}

/// Reads a log's entries one at a time from any `Read + Seek`.
///
/// Created by [`LogReader::new`] (or [`LogReader::open`]), which reads and checks the
/// super block; then iterate. The iterator yields exactly `nr_entries` entries, or stops
/// after the first error. [`LogReader::entry_offset`] tells where the next entry's header
/// lies, so a caller can index a log and come back with [`LogReader::seek_entry`].
#[derive(Debug)]
pub struct LogReader<R: Read + Seek> {
    r: R,
    path: Option<PathBuf>,
    sector_size: u32,
    nr_entries: u64,
    /// Total length of the log (from the super block's start).
    len: u64,
    /// Where the log starts in `r`.
    base: u64,
    /// Offset of the next entry's header, relative to `base`.
    offset: u64,
    next_index: u64,
    block: Vec<u8>,
    done: bool,
    /// When set, the whole of `r` mapped (from offset 0, not the log's base): payloads
    /// and mark text are slices of it and the reader skips over write data.
    map: Option<Bytes>,
    /// An entry with a non-zero `data_len` that is not a mark was read (the DAX era's
    /// inline writes): the log is valid but not what the writer would produce.
    saw_write_data_len: bool,
}

impl LogReader<PositionedFile> {
    /// Opens the log file at `path` and checks its super block. A regular file is mapped
    /// into memory and the entries' data are slices of the mapping (only headers are
    /// read; see [`super::file`] for what mapping implies); a device is read as it goes.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        let io = |e| LogError::io(path, 0, e);
        let mut file = File::open(path).map_err(io)?;
        let map = if file.metadata().map_err(io)?.is_file() {
            // SAFETY: a read-only shared mapping of a log file; see "The mapping" in the
            // docs of `trace::file` for why its bytes do not change under the slices.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
            Some(Bytes::from_owner(map))
        } else {
            None
        };
        let len = match &map {
            Some(m) => m.len() as u64,
            None => file.seek(SeekFrom::End(0)).map_err(io)?,
        };
        let mut reader = Self::with_path(PositionedFile { file, pos: 0, len }, Some(path))?;
        reader.map = map;
        Ok(reader)
    }

    /// The mapping (when the file is regular) and the file, once reading is done.
    pub(super) fn into_parts(self) -> (Option<Bytes>, File) {
        (self.map, self.r.file)
    }
}

fn read_le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl<R: Read + Seek> LogReader<R> {
    /// Starts reading a log at `r`'s current position and checks its super block.
    pub fn new(r: R) -> Result<Self, LogError> {
        Self::with_path(r, None)
    }

    /// Like [`LogReader::new`], naming `path` in errors.
    pub fn with_path(mut r: R, path: Option<&Path>) -> Result<Self, LogError> {
        let err = |k| LogError::new(path, None, 0, k);
        let io = |e| err(LogErrorKind::Io(e));
        let base = r.stream_position().map_err(io)?;
        let end = r.seek(SeekFrom::End(0)).map_err(io)?;
        let len = end.saturating_sub(base);
        r.seek(SeekFrom::Start(base)).map_err(io)?;

        if len < SUPER_FIELDS_LEN as u64 {
            return Err(err(LogErrorKind::Truncated {
                what: "super block",
                needed: SUPER_FIELDS_LEN as u64,
                available: len,
            }));
        }
        let mut sb = [0u8; SUPER_FIELDS_LEN];
        r.read_exact(&mut sb).map_err(io)?;
        let magic = read_le64(&sb, 0);
        if magic != LOG_MAGIC {
            return Err(err(LogErrorKind::BadMagic { found: magic }));
        }
        let version = read_le64(&sb, 8);
        if version != LOG_VERSION {
            return Err(err(LogErrorKind::UnsupportedVersion { found: version }));
        }
        let nr_entries = read_le64(&sb, 16);
        let sector_size = u32::from_le_bytes([sb[24], sb[25], sb[26], sb[27]]);
        check_sector_size(sector_size).map_err(err)?;
        let ss = u64::from(sector_size);
        if len < ss {
            return Err(err(LogErrorKind::Truncated {
                what: "super block",
                needed: ss,
                available: len,
            }));
        }
        let capacity = (len - ss) / ss;
        if nr_entries > capacity {
            return Err(err(LogErrorKind::TooManyEntries { nr_entries, capacity, sector_size }));
        }
        r.seek(SeekFrom::Start(base + ss)).map_err(io)?;
        Ok(LogReader {
            r,
            path: path.map(Path::to_path_buf),
            sector_size,
            nr_entries,
            len,
            base,
            offset: ss,
            next_index: 0,
            block: vec![0u8; sector_size as usize],
            done: false,
            map: None,
            saw_write_data_len: false,
        })
    }

    /// Whether payloads are slices of a mapping of the file rather than read copies.
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Whether a write with a non-zero `data_len` was read (see the module docs).
    pub(super) fn saw_write_data_len(&self) -> bool {
        self.saw_write_data_len
    }

    /// Total length of the log from the super block's start.
    pub(super) fn log_len(&self) -> u64 {
        self.len
    }

    /// The log's sector size (the `sectorsize` field of the super block).
    pub fn sector_size(&self) -> u32 {
        self.sector_size
    }

    /// The number of entries the super block declares.
    pub fn nr_entries(&self) -> u64 {
        self.nr_entries
    }

    /// Byte offset (from the super block) of the header of the entry the next call to
    /// `next()` reads. Record it before `next()` to index entries.
    pub fn entry_offset(&self) -> u64 {
        self.offset
    }

    /// Index of the entry the next call to `next()` reads.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Positions the reader at entry `index`, whose header lies at byte `offset` (as
    /// reported by [`LogReader::entry_offset`] earlier). Nothing is checked until `next()`.
    pub fn seek_entry(&mut self, index: u64, offset: u64) -> Result<(), LogError> {
        let target = self.base.checked_add(offset);
        let res = match target {
            Some(t) => self.r.seek(SeekFrom::Start(t)).map(|_| ()),
            None => Err(io::Error::new(io::ErrorKind::InvalidInput, "offset overflows")),
        };
        res.map_err(|e| {
            LogError::new(self.path.as_deref(), Some(index), offset, LogErrorKind::Io(e))
        })?;
        self.offset = offset;
        self.next_index = index;
        self.done = false;
        Ok(())
    }

    fn read_next(&mut self) -> Result<Entry, LogErrorKind> {
        let ss = u64::from(self.sector_size);
        let factor = ss / SECTOR_SIZE;
        let remaining = self.len.saturating_sub(self.offset);
        if remaining < ss {
            return Err(LogErrorKind::Truncated {
                what: "entry header",
                needed: ss,
                available: remaining,
            });
        }
        self.r.read_exact(&mut self.block).map_err(LogErrorKind::Io)?;
        let b = &self.block;
        let sector = read_le64(b, 0);
        let nr_sectors = read_le64(b, 8);
        let flags = read_le64(b, 16);
        let data_len = read_le64(b, 24);
        let is_mark = flags & flags::MARK != 0;
        let is_discard = flags & flags::DISCARD != 0;

        let mismatch = LogErrorKind::DataLenMismatch { flags, nr_sectors, data_len };
        let text_end = if is_mark {
            let max = max_mark_len(self.sector_size);
            if data_len > max as u64 {
                return Err(LogErrorKind::MarkTooLong { len: data_len, max });
            }
            ENTRY_HEADER_LEN + data_len as usize
        } else {
            // data_len is 0, except for the DAX-era inline writes: nr_sectors = ceil(data_len / S).
            if data_len != 0 && (is_discard || data_len.div_ceil(ss) != nr_sectors) {
                return Err(mismatch);
            }
            self.saw_write_data_len |= data_len != 0;
            ENTRY_HEADER_LEN
        };
        if let Some(p) = b[text_end..].iter().position(|&x| x != 0) {
            return Err(LogErrorKind::NonZeroPadding { at: text_end + p });
        }
        let (sector512, nr512) = match (sector.checked_mul(factor), nr_sectors.checked_mul(factor))
        {
            (Some(s), Some(n)) => (s, n),
            _ => {
                return Err(LogErrorKind::SectorOverflow { sector, nr_sectors });
            }
        };
        // Where the header lies in `map`, which starts at offset 0 of `r`.
        let header_at = self.base + self.offset;
        let map_slice = |map: &Bytes, at: u64, len: u64| {
            let (at, end) = (usize::try_from(at).ok()?, usize::try_from(at + len).ok()?);
            (end <= map.len()).then(|| map.slice(at..end))
        };
        let data = if is_mark {
            let text = b[ENTRY_HEADER_LEN..text_end].as_ref();
            match &self.map {
                Some(map) => map_slice(map, header_at + ENTRY_HEADER_LEN as u64, text.len() as u64)
                    .ok_or(LogErrorKind::Truncated {
                        what: "mapped mark text",
                        needed: text_end as u64,
                        available: remaining,
                    })?,
                None => Bytes::copy_from_slice(text),
            }
        } else if is_discard || nr_sectors == 0 {
            Bytes::new()
        } else {
            let bytes = nr_sectors
                .checked_mul(ss)
                .filter(|&n| n <= MAX_WRITE_BYTES)
                .ok_or(LogErrorKind::WriteTooLarge { nr_sectors })?;
            let available = remaining - ss;
            if bytes > available {
                return Err(LogErrorKind::Truncated {
                    what: "write data",
                    needed: bytes,
                    available,
                });
            }
            match &self.map {
                Some(map) => {
                    let data =
                        map_slice(map, header_at + ss, bytes).ok_or(LogErrorKind::Truncated {
                            what: "mapped write data",
                            needed: bytes,
                            available,
                        })?;
                    self.r.seek(SeekFrom::Current(bytes as i64)).map_err(LogErrorKind::Io)?;
                    data
                }
                None => {
                    let mut data = vec![0u8; bytes as usize];
                    self.r.read_exact(&mut data).map_err(LogErrorKind::Io)?;
                    Bytes::from(data)
                }
            }
        };
        let entry = Entry { sector: sector512, nr_sectors: nr512, flags, data };
        // A mark's text is checked in the header block already read, not in the mapping.
        let text = if is_mark { &self.block[ENTRY_HEADER_LEN..text_end] } else { &entry.data[..] };
        check_entry(EntryRef { data: text, ..entry.view() }, self.sector_size)?;
        Ok(entry)
    }
}

impl<R: Read + Seek> Iterator for LogReader<R> {
    type Item = Result<Entry, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.next_index >= self.nr_entries {
            return None;
        }
        match self.read_next() {
            Ok(entry) => {
                self.offset += entry_len(entry.view(), self.sector_size);
                self.next_index += 1;
                Some(Ok(entry))
            }
            Err(kind) => {
                self.done = true;
                Some(Err(LogError::new(
                    self.path.as_deref(),
                    Some(self.next_index),
                    self.offset,
                    kind,
                )))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.done { 0 } else { self.nr_entries.saturating_sub(self.next_index) };
        (0, usize::try_from(left).ok())
    }
}

/// Reads a whole log from `r` into a [`Trace`].
pub fn read_log<R: Read + Seek>(r: R) -> Result<Trace, LogError> {
    collect(LogReader::new(r)?)
}

/// Reads the log file at `path` into a [`Trace`]. A regular file is mapped into memory
/// once and the entries' data are slices of the mapping, with the file behind the trace
/// ([`Trace::file`]; no payload is copied); a device is read into memory.
pub fn read_log_file(path: &Path) -> Result<Trace, LogError> {
    let reader = LogReader::open(path)?;
    if reader.is_mapped() {
        return super::file::index_mapped(reader, path);
    }
    collect(reader)
}

fn collect<R: Read + Seek>(reader: LogReader<R>) -> Result<Trace, LogError> {
    let sector_size = reader.sector_size();
    // nr_entries is bounded by the file length, but each entry is small in memory; still,
    // reserve modestly and let the Vec grow with what is actually read.
    let mut entries = Vec::with_capacity(reader.nr_entries().min(4096) as usize);
    for e in reader {
        entries.push(e?);
    }
    Ok(Trace::new(sector_size, entries))
}

/// A log file read by [`LogReader::open`]: positioned reads (`pread`) at a position of
/// its own, up to the length the file had when opened. No buffer, so that reading only
/// the headers of a mapped log copies nothing else and touches no page of the mapping.
#[derive(Debug)]
pub struct PositionedFile {
    file: File,
    pos: u64,
    len: u64,
}

impl Read for PositionedFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        let n = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for PositionedFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (from, delta) = match to {
            SeekFrom::Start(p) => (p, 0),
            SeekFrom::End(d) => (self.len, d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        self.pos = from.checked_add_signed(delta).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "seek before the start or past 2^64")
        })?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};
    use std::io::Cursor;

    // ---- hand-built logs, following the kernel layout literally (no code shared with the
    // ---- writer: magic, flags and offsets are spelled out here).

    fn put64(buf: &mut [u8], at: usize, v: u64) {
        buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// A log under construction: the super block, then entries appended block by block.
    struct Fixture {
        ss: usize,
        bytes: Vec<u8>,
        count: u64,
    }

    impl Fixture {
        fn new(ss: usize) -> Self {
            let mut bytes = vec![0u8; ss];
            put64(&mut bytes, 0, 0x6a736677736872);
            put64(&mut bytes, 8, 1);
            bytes[24..28].copy_from_slice(&(ss as u32).to_le_bytes());
            Fixture { ss, bytes, count: 0 }
        }
        /// One header block; `text` goes right after the 32-byte header.
        fn header(&mut self, sector: u64, nr: u64, flags: u64, data_len: u64, text: &[u8]) {
            let at = self.bytes.len();
            self.bytes.resize(at + self.ss, 0);
            put64(&mut self.bytes, at, sector);
            put64(&mut self.bytes, at + 8, nr);
            put64(&mut self.bytes, at + 16, flags);
            put64(&mut self.bytes, at + 24, data_len);
            self.bytes[at + 32..at + 32 + text.len()].copy_from_slice(text);
            self.count += 1;
        }
        fn mark(&mut self, text: &str) {
            self.header(0, 0, 8, text.len() as u64, text.as_bytes());
        }
        fn write(&mut self, sector: u64, flags: u64, data: &[u8]) {
            assert_eq!(data.len() % self.ss, 0);
            self.header(sector, (data.len() / self.ss) as u64, flags, 0, b"");
            self.bytes.extend_from_slice(data);
        }
        fn finish(mut self) -> Vec<u8> {
            put64(&mut self.bytes, 16, self.count);
            self.bytes
        }
    }

    fn pattern_a() -> Vec<u8> {
        (0..1024).map(|i| (i % 251) as u8).collect()
    }
    fn pattern_b() -> Vec<u8> {
        vec![0xab; 512]
    }
    fn pattern_c() -> Vec<u8> {
        b"bob!".iter().copied().cycle().take(512).collect()
    }

    /// The committed fixture `fixtures/logs/small.log`: a 512-byte-sector log.
    fn small_log_bytes() -> Vec<u8> {
        let mut f = Fixture::new(512);
        f.mark("mkfs done"); // entry 0 at 512
        f.write(16, 16, &pattern_a()); // entry 1 at 1024, METADATA, data 1536..2560
        f.write(40, 0, &pattern_b()); // entry 2 at 2560, data 3072..3584
        f.header(0, 0, 1, 0, b""); // entry 3 at 3584: flush
        f.header(64, 8, 4, 0, b""); // entry 4 at 4096: discard, no data
        f.write(16, 1 | 2, &pattern_c()); // entry 5 at 4608: FLUSH|FUA write, data 5120..5632
        f.mark("dm-log-writes-end"); // entry 6 at 5632
        let bytes = f.finish();
        assert_eq!(bytes.len(), 6144);
        bytes
    }

    fn small_expected() -> (Vec<Entry>, Vec<u64>) {
        let entries = vec![
            Entry::mark("mkfs done"),
            Entry { sector: 16, nr_sectors: 2, flags: flags::METADATA, data: pattern_a().into() },
            Entry::write(40, pattern_b()),
            Entry::flush(),
            Entry::discard(64, 8),
            Entry {
                sector: 16,
                nr_sectors: 1,
                flags: flags::FLUSH | flags::FUA,
                data: pattern_c().into(),
            },
            Entry::mark("dm-log-writes-end"),
        ];
        (entries, vec![512, 1024, 2560, 3584, 4096, 4608, 5632])
    }

    fn read_bytes(bytes: &[u8]) -> Result<Trace, LogError> {
        read_log(Cursor::new(bytes))
    }

    fn write_bytes(trace: &Trace) -> Vec<u8> {
        let mut out = Vec::new();
        write_log(&mut out, trace).unwrap();
        out
    }

    #[test]
    fn hand_built_512_log_decodes_and_reencodes() {
        let bytes = small_log_bytes();
        let (expected, offsets) = small_expected();
        let mut reader = LogReader::new(Cursor::new(&bytes)).unwrap();
        assert_eq!((reader.sector_size(), reader.nr_entries()), (512, 7));
        for (want, off) in expected.iter().zip(&offsets) {
            assert_eq!(reader.entry_offset(), *off);
            assert_eq!(&reader.next().unwrap().unwrap(), want);
        }
        assert!(reader.next().is_none());
        assert_eq!(reader.entry_offset(), bytes.len() as u64);

        let trace = Trace::new(512, expected);
        assert_eq!(write_bytes(&trace), bytes);
        let kinds: Vec<_> = trace.entries.iter().map(Entry::kind).collect();
        use crate::trace::EntryKind::*;
        assert_eq!(
            kinds,
            [
                Mark,
                Write { preflush: false, fua: false },
                Write { preflush: false, fua: false },
                Flush,
                Discard,
                Write { preflush: true, fua: true },
                Mark
            ]
        );
        assert!(trace.entries[1].is_metadata());
        assert_eq!(trace.entries[6].mark_text().as_deref(), Some("dm-log-writes-end"));
    }

    #[test]
    fn hand_built_4096_log_uses_log_sector_units() {
        let mut f = Fixture::new(4096);
        f.mark("begin"); // at 4096
        f.write(2, 2, &vec![0x5a; 4096]); // at 8192: 4K-sector 2 = 512-sector 16; data 12288..16384
        f.header(10, 4, 4, 0, b""); // at 16384: discard of 4K-sectors 10..14
        f.header(0, 0, 1, 0, b""); // at 20480: flush
        let bytes = f.finish();
        assert_eq!(bytes.len(), 24576);
        let trace = read_bytes(&bytes).unwrap();
        assert_eq!(trace.sector_size, 4096);
        assert_eq!(
            trace.entries,
            vec![
                Entry::mark("begin"),
                Entry {
                    sector: 16,
                    nr_sectors: 8,
                    flags: flags::FUA,
                    data: vec![0x5a; 4096].into()
                },
                Entry::discard(80, 32),
                Entry::flush(),
            ]
        );
        assert_eq!(write_bytes(&trace), bytes);

        let mut bad = trace.clone();
        bad.entries[1].sector = 17;
        let e = write_log(Vec::new(), &bad).unwrap_err();
        assert!(matches!(e.kind, LogErrorKind::Unaligned { .. }), "{e}");
        assert_eq!((e.entry, e.offset), (Some(1), 8192));
    }

    #[test]
    fn kernel_quirks_are_accepted() {
        // Garbage in the super block's struct padding (bytes 28..32) and stale bytes after
        // the last counted entry, both of which a kernel log may have.
        let mut bytes = small_log_bytes();
        bytes[28..32].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        bytes.extend_from_slice(&[0x77; 1000]);
        assert_eq!(read_bytes(&bytes).unwrap().entries, small_expected().0);

        // A DAX-era inline write: data_len = bytes, nr_sectors = ALIGN(data_len, S) / S.
        let mut f = Fixture::new(512);
        f.header(8, 2, 0, 700, b"");
        let mut data = vec![9u8; 700];
        data.resize(1024, 0);
        f.bytes.extend_from_slice(&data);
        let trace = read_bytes(&f.finish()).unwrap();
        assert_eq!(
            trace.entries,
            vec![Entry { sector: 8, nr_sectors: 2, flags: 0, data: data.into() }]
        );
    }

    // ---- the committed fixture

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct ExpectedLog {
        sector_size: u32,
        nr_entries: usize,
        entries: Vec<ExpectedEntry>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct ExpectedEntry {
        index: usize,
        offset: u64,
        sector: u64,
        nr_sectors: u64,
        flags: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data_hex: Option<String>,
    }

    fn hex(data: &[u8]) -> String {
        data.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn describe(trace: &Trace, offsets: &[u64]) -> ExpectedLog {
        let entries = trace
            .entries
            .iter()
            .zip(offsets)
            .enumerate()
            .map(|(index, (e, &offset))| ExpectedEntry {
                index,
                offset,
                sector: e.sector,
                nr_sectors: e.nr_sectors,
                flags: e.flags,
                text: e.mark_text(),
                data_hex: (e.mark_text().is_none() && !e.data.is_empty()).then(|| hex(&e.data)),
            })
            .collect();
        ExpectedLog { sector_size: trace.sector_size, nr_entries: trace.entries.len(), entries }
    }

    fn fixture_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/logs")
    }

    /// Regenerates `fixtures/logs/small.{log,expected.json}` from the hand-built layout:
    /// `cargo test -p bob-core regenerate_small_fixture -- --ignored`.
    #[test]
    #[ignore]
    fn regenerate_small_fixture() {
        let dir = fixture_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = small_log_bytes();
        std::fs::write(dir.join("small.log"), &bytes).unwrap();
        let (entries, offsets) = small_expected();
        let expected = describe(&Trace::new(512, entries), &offsets);
        let mut json = serde_json::to_string_pretty(&expected).unwrap();
        json.push('\n');
        std::fs::write(dir.join("small.expected.json"), json).unwrap();
    }

    #[test]
    fn committed_small_fixture_decodes() {
        let dir = fixture_dir();
        let path = dir.join("small.log");
        assert_eq!(std::fs::read(&path).unwrap(), small_log_bytes(), "fixture drifted from layout");
        let json = std::fs::read_to_string(dir.join("small.expected.json")).unwrap();
        let expected: ExpectedLog = serde_json::from_str(&json).unwrap();

        let mut reader = LogReader::open(&path).unwrap();
        let mut offsets = Vec::new();
        let mut entries = Vec::new();
        loop {
            let off = reader.entry_offset();
            match reader.next() {
                Some(e) => {
                    offsets.push(off);
                    entries.push(e.unwrap());
                }
                None => break,
            }
        }
        let trace = Trace::new(reader.sector_size(), entries);
        assert_eq!(describe(&trace, &offsets), expected);
        assert_eq!(read_log_file(&path).unwrap(), trace);
    }

    // ---- writer behaviour

    #[test]
    fn streaming_writer_matches_write_log() {
        let (entries, offsets) = small_expected();
        let mut w = LogWriter::new(Cursor::new(Vec::new()), 512).unwrap();
        for (i, (e, off)) in entries.iter().zip(&offsets).enumerate() {
            assert_eq!(w.offset(), *off);
            assert_eq!(w.append(e).unwrap(), i);
        }
        assert_eq!(w.nr_entries(), 7);
        let bytes = w.finish().unwrap().into_inner();
        assert_eq!(bytes, small_log_bytes());
    }

    #[test]
    fn streaming_writer_file_and_sync_super() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("trace.log");
        let (entries, _) = small_expected();
        let mut w = LogWriter::create(&path, 512).unwrap();
        w.append(&entries[0]).unwrap();
        w.append(&entries[1]).unwrap();
        w.sync_super().unwrap();
        // Readable mid-stream: the synced prefix.
        assert_eq!(read_log_file(&path).unwrap().entries, entries[..2]);
        w.append(&entries[2]).unwrap();
        // An invalid entry is refused and leaves the writer usable.
        let e = w
            .append(&Entry { sector: 0, nr_sectors: 0, flags: 0, data: vec![].into() })
            .unwrap_err();
        assert!(matches!(e.kind, LogErrorKind::EmptyEntry), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: entry 3 at byte 3584: ", path.display())),
            "{e}"
        );
        for e in &entries[3..] {
            w.append(e).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), small_log_bytes());
    }

    #[test]
    fn writer_refuses_invalid_entries() {
        type Check = fn(&LogErrorKind) -> bool;
        let cases: Vec<(Entry, Check)> = vec![
            (Entry { sector: 0, nr_sectors: 2, flags: 0, data: vec![0; 512].into() }, |k| {
                matches!(k, LogErrorKind::DataSizeMismatch { .. })
            }),
            (Entry::mark(&"x".repeat(480)), |k| {
                matches!(k, LogErrorKind::MarkTooLong { len: 480, max: 479 })
            }),
            (Entry::mark("a\0b"), |k| matches!(k, LogErrorKind::MarkContainsNul { at: 1 })),
            (Entry { flags: flags::MARK | flags::FUA, ..Entry::mark("m") }, |k| {
                matches!(k, LogErrorKind::MarkFlags { .. })
            }),
            (Entry { nr_sectors: 1, ..Entry::mark("m") }, |k| {
                matches!(k, LogErrorKind::MarkHasSectors { .. })
            }),
            (Entry { data: vec![0; 512].into(), ..Entry::discard(0, 1) }, |k| {
                matches!(k, LogErrorKind::UnexpectedData { .. })
            }),
            (Entry { sector: 0, nr_sectors: 0, flags: 0, data: vec![].into() }, |k| {
                matches!(k, LogErrorKind::EmptyEntry)
            }),
            (Entry::discard(u64::MAX, 1), |k| matches!(k, LogErrorKind::SectorOverflow { .. })),
            (Entry::discard(u64::MAX / 512 + 1, 0), |k| {
                matches!(k, LogErrorKind::SectorOverflow { .. })
            }),
            (
                Entry {
                    sector: 0,
                    nr_sectors: (MAX_WRITE_BYTES / 512) + 1,
                    flags: 0,
                    data: vec![].into(),
                },
                |k| matches!(k, LogErrorKind::WriteTooLarge { .. }),
            ),
        ];
        for (entry, ok) in cases {
            let trace = Trace::new(512, vec![Entry::flush(), entry.clone()]);
            let mut out = Vec::new();
            let e = write_log(&mut out, &trace).unwrap_err();
            assert!(ok(&e.kind), "{entry:?}: {e}");
            assert_eq!((e.entry, e.offset), (Some(1), 1024), "{e}");
            assert!(out.is_empty(), "nothing is written when an entry is invalid");
        }
        // The longest mark that fits is fine.
        let trace = Trace::new(512, vec![Entry::mark(&"y".repeat(479))]);
        assert_eq!(read_bytes(&write_bytes(&trace)).unwrap(), trace);

        for ss in [0u32, 256, 1000, 1 << 17] {
            let e = LogWriter::new(Cursor::new(Vec::new()), ss).unwrap_err();
            assert!(matches!(e.kind, LogErrorKind::BadSectorSize { .. }), "{e}");
        }
        // sector_size 0 in a Trace means 512.
        let bytes = write_bytes(&Trace::default());
        assert_eq!(bytes.len(), 512);
        assert_eq!(read_bytes(&bytes).unwrap(), Trace::new(512, vec![]));
    }

    /// A writer that fails after `budget` bytes.
    struct Failing {
        inner: Cursor<Vec<u8>>,
        budget: usize,
    }
    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if buf.len() > self.budget {
                return Err(io::Error::other("disk full"));
            }
            self.budget -= buf.len();
            self.inner.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl Seek for Failing {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn writer_io_error_poisons() {
        let mut w =
            LogWriter::new(Failing { inner: Cursor::new(Vec::new()), budget: 1024 }, 512).unwrap();
        w.append(&Entry::flush()).unwrap();
        let e = w.append(&Entry::write(0, vec![1; 512])).unwrap_err();
        assert!(matches!(e.kind, LogErrorKind::Io(_)), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        let e = w.append(&Entry::flush()).unwrap_err();
        assert!(matches!(e.kind, LogErrorKind::WriterPoisoned), "{e}");
        assert!(w.finish().is_err());
    }

    // ---- reader indexing

    #[test]
    fn seek_entry_returns_to_recorded_offsets() {
        let bytes = small_log_bytes();
        let mut reader = LogReader::new(Cursor::new(&bytes)).unwrap();
        let mut index = Vec::new();
        loop {
            let (i, off) = (reader.next_index(), reader.entry_offset());
            let Some(e) = reader.next() else { break };
            index.push((i, off, e.unwrap()));
        }
        for (i, off, e) in index.iter().rev() {
            reader.seek_entry(*i, *off).unwrap();
            assert_eq!(&reader.next().unwrap().unwrap(), e);
        }
        // A bogus offset gives an error, not a panic.
        reader.seek_entry(2, 700).unwrap();
        let e = reader.next().unwrap().unwrap_err();
        assert_eq!((e.entry, e.offset), (Some(2), 700));
    }

    // ---- corruption

    fn kind_of(bytes: &[u8]) -> LogErrorKind {
        read_bytes(bytes).unwrap_err().kind
    }

    #[test]
    fn every_truncation_fails_cleanly() {
        let bytes = small_log_bytes();
        for len in 0..bytes.len() {
            let e = read_bytes(&bytes[..len]).unwrap_err();
            assert!(
                matches!(
                    e.kind,
                    LogErrorKind::Truncated { .. } | LogErrorKind::TooManyEntries { .. }
                ),
                "len {len}: {e}"
            );
        }
        // Claiming one entry more than present, with room for its header but not its data.
        let mut f = Fixture::new(512);
        f.write(0, 0, &[1; 1024]);
        let mut bytes = f.finish();
        bytes.truncate(512 + 512 + 600);
        let e = read_bytes(&bytes).unwrap_err();
        assert!(
            matches!(
                e.kind,
                LogErrorKind::Truncated { what: "write data", needed: 1024, available: 600 }
            ),
            "{e}"
        );
        assert_eq!(e.to_string(), "dm-log-writes log: entry 0 at byte 512: log is truncated: write data needs 1024 bytes but only 600 remain");
    }

    #[test]
    fn super_block_corruptions() {
        let good = small_log_bytes();
        let with = |at: usize, v: &[u8]| {
            let mut b = good.clone();
            b[at..at + v.len()].copy_from_slice(v);
            b
        };
        assert!(matches!(kind_of(&with(0, &[0x73])), LogErrorKind::BadMagic { .. }));
        assert!(matches!(
            kind_of(&with(8, &2u64.to_le_bytes())),
            LogErrorKind::UnsupportedVersion { found: 2 }
        ));
        for ss in [0u32, 1, 511, 513, 768, 1 << 17, u32::MAX] {
            assert!(
                matches!(kind_of(&with(24, &ss.to_le_bytes())), LogErrorKind::BadSectorSize { .. }),
                "{ss}"
            );
        }
        // A valid but different sector size: the file is too short for it.
        assert!(matches!(
            kind_of(&with(24, &65536u32.to_le_bytes())),
            LogErrorKind::Truncated { .. }
        ));
        assert!(matches!(
            kind_of(&with(24, &4096u32.to_le_bytes())),
            LogErrorKind::TooManyEntries { .. }
        ));
        for n in [12u64, 1 << 40, u64::MAX] {
            let k = kind_of(&with(16, &n.to_le_bytes()));
            assert!(matches!(k, LogErrorKind::TooManyEntries { capacity: 11, .. }), "{n}: {k}");
        }
        // Fewer entries than present is fine: the rest is ignored, as replay-log does.
        assert_eq!(
            read_bytes(&with(16, &3u64.to_le_bytes())).unwrap().entries,
            small_expected().0[..3]
        );
    }

    #[test]
    fn entry_corruptions() {
        let good = small_log_bytes();
        let with = |at: usize, v: u64| {
            let mut b = good.clone();
            put64(&mut b, at, v);
            b
        };
        let err = |b: &[u8]| read_bytes(b).unwrap_err();
        // Entry 1 (write of 2 sectors) has its header at 1024.
        let e = err(&with(1024 + 8, u64::MAX));
        assert!(matches!(e.kind, LogErrorKind::WriteTooLarge { .. }), "{e}");
        assert_eq!((e.entry, e.offset), (Some(1), 1024));
        let e = err(&with(1024 + 8, 1 << 20)); // 512 MiB: within the cap, beyond the file
        assert!(matches!(e.kind, LogErrorKind::Truncated { what: "write data", .. }), "{e}");
        let e = err(&with(1024 + 24, 5)); // data_len on a 2-sector write
        assert!(matches!(e.kind, LogErrorKind::DataLenMismatch { .. }), "{e}");
        let e = err(&with(1024 + 24, u64::MAX));
        assert!(matches!(e.kind, LogErrorKind::DataLenMismatch { .. }), "{e}");
        let e = err(&with(1024, u64::MAX)); // sector overflows
        assert!(matches!(e.kind, LogErrorKind::SectorOverflow { .. }), "{e}");
        // Flags 0 is a plain write: still valid.
        assert_eq!(read_bytes(&with(1024 + 16, 0)).unwrap().entries[1].flags, 0);
        // Entry 0 (mark) at 512.
        let e = err(&with(512 + 24, 1 << 40));
        assert!(matches!(e.kind, LogErrorKind::MarkTooLong { max: 479, .. }), "{e}");
        let e = err(&with(512 + 24, 480));
        assert!(matches!(e.kind, LogErrorKind::MarkTooLong { len: 480, .. }), "{e}");
        let e = err(&with(512 + 24, 3)); // shorter than the text: the rest is non-zero padding
        assert!(matches!(e.kind, LogErrorKind::NonZeroPadding { at: 35 }), "{e}");
        let e = err(&with(512 + 16, 8 | 2));
        assert!(matches!(e.kind, LogErrorKind::MarkFlags { .. }), "{e}");
        let e = err(&with(512 + 8, 1));
        assert!(matches!(e.kind, LogErrorKind::MarkHasSectors { .. }), "{e}");
        // Entry 3 (flush) at 3584: zero flags gives the all-zeroes entry.
        let e = err(&with(3584 + 16, 0));
        assert!(matches!(e.kind, LogErrorKind::EmptyEntry), "{e}");
        assert_eq!((e.entry, e.offset), (Some(3), 3584));
        // Entry 4 (discard) at 4096: data_len must be 0; padding must be zero.
        let e = err(&with(4096 + 24, 512));
        assert!(matches!(e.kind, LogErrorKind::DataLenMismatch { .. }), "{e}");
        let e = err(&with(4096 + 100, 1));
        assert!(matches!(e.kind, LogErrorKind::NonZeroPadding { at: 100 }), "{e}");
        // A NUL inside mark text.
        let mut b = good.clone();
        b[512 + 32 + 2] = 0;
        let e = err(&b);
        assert!(matches!(e.kind, LogErrorKind::MarkContainsNul { at: 2 }), "{e}");
    }

    #[test]
    fn every_single_byte_flip_is_handled() {
        let good = small_log_bytes();
        for at in 0..good.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = good.clone();
                b[at] ^= x;
                // Ok (e.g. a flipped data byte) or Err, never a panic.
                if let Ok(t) = read_bytes(&b) {
                    assert!(t.entries.len() <= 7); // a smaller nr_entries is valid
                }
            }
        }
    }

    #[test]
    fn file_errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("broken.log");
        let mut bytes = small_log_bytes();
        put64(&mut bytes, 2560 + 16, 0); // entry 2: flags 0 with 1 sector is a valid write...
        put64(&mut bytes, 2560 + 8, 0); // ...with 0 sectors it is the all-zeroes entry
        std::fs::write(&path, &bytes).unwrap();
        let e = read_log_file(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: entry 2 at byte 2560: entry has no flags and no sectors (replay-log rejects it as malformed)",
                path.display()
            )
        );
        let e = read_log_file(&tmp.path().join("absent.log")).unwrap_err();
        assert!(e.to_string().contains("absent.log: super block: I/O error"), "{e}");
        let e = write_log_file(&tmp.path().join("no/such/dir.log"), &Trace::default()).unwrap_err();
        assert!(e.to_string().contains("no/such/dir.log"), "{e}");
    }

    // ---- property tests

    fn fill(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// An entry in log-sector units, scaled to 512-byte units by `factor`.
    fn arb_entry(factor: u64) -> impl Strategy<Value = Entry> {
        let ss = 512 * factor as usize;
        let write_flags = prop::sample::select(vec![
            0,
            flags::FUA,
            flags::FLUSH,
            flags::FLUSH | flags::FUA,
            flags::METADATA,
            flags::METADATA | flags::FUA,
            flags::METADATA | flags::FLUSH | flags::FUA,
        ]);
        prop_oneof![
            4 => (0u64..1 << 24, 1u64..=16, write_flags, any::<u64>()).prop_map(move |(s, n, f, seed)| Entry {
                sector: s * factor,
                nr_sectors: n * factor,
                flags: f,
                data: fill(seed, n as usize * ss).into(),
            }),
            1 => prop::sample::select(vec![flags::FLUSH, flags::FLUSH | flags::FUA, flags::FLUSH | flags::METADATA])
                .prop_map(|f| Entry { flags: f, ..Entry::flush() }),
            1 => (0u64..1 << 30, 0u64..1 << 20).prop_map(move |(s, n)| Entry::discard(s * factor, n * factor)),
            2 => "[a-zA-Z0-9 _/:.é→-]{0,150}".prop_map(|t| Entry::mark(&t)),
        ]
    }

    fn arb_trace() -> impl Strategy<Value = Trace> {
        prop::sample::select(vec![512u32, 512, 4096]).prop_flat_map(|ss| {
            prop::collection::vec(arb_entry(u64::from(ss) / 512), 0..24)
                .prop_map(move |entries| Trace::new(ss, entries))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn round_trip(trace in arb_trace()) {
            let bytes = write_bytes(&trace);
            let back = read_bytes(&bytes).unwrap();
            prop_assert_eq!(&back, &trace);
            prop_assert_eq!(write_bytes(&back), bytes.clone());

            let mut w = LogWriter::new(Cursor::new(Vec::new()), trace.sector_size).unwrap();
            for e in &trace.entries {
                w.append(e).unwrap();
            }
            prop_assert_eq!(w.finish().unwrap().into_inner(), bytes);
        }

        #[test]
        fn mutations_never_panic(
            trace in arb_trace(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
            words in prop::collection::vec((any::<prop::sample::Index>(), any::<u64>()), 0..3),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            let mut bytes = write_bytes(&trace);
            for (i, v) in edits {
                let at = i.index(bytes.len());
                bytes[at] = v;
            }
            // Hostile 64-bit fields at 8-aligned offsets (where header fields live).
            for (i, v) in words {
                let at = i.index(bytes.len() / 8) * 8;
                put64(&mut bytes, at, v);
            }
            if let Some(c) = cut {
                let len = c.index(bytes.len() + 1);
                bytes.truncate(len);
            }
            let _ = read_bytes(&bytes);
            if let Ok(reader) = LogReader::new(Cursor::new(&bytes)) {
                let n = reader.nr_entries();
                let mut seen = 0u64;
                for e in reader {
                    seen += 1;
                    if e.is_err() { break; }
                }
                prop_assert!(seen <= n);
            }
        }
    }

    // ---- cross-check against xfstests' replay-log, when one is available

    /// Set `BOB_REPLAY_LOG` to a built `replay-log` (xfstests src/log-writes) to replay a
    /// bob-written log with it and compare the image with bob's own reading of the log.
    #[test]
    fn replay_log_agrees_when_available() {
        let Some(tool) = std::env::var_os("BOB_REPLAY_LOG") else {
            return;
        };
        let mut entries = small_expected().0;
        entries.insert(1, Entry::write(60, fill(7, 4096)));
        entries.insert(2, Entry::mark("after big write"));
        replay_and_compare(&tool, Trace::new(512, entries));
        let entries = vec![
            Entry::mark("begin"),
            Entry { sector: 16, nr_sectors: 8, flags: flags::FUA, data: fill(3, 4096).into() },
            Entry::mark("after big write"),
            Entry::write(64, fill(5, 8192)),
            Entry::discard(80, 32),
            Entry::flush(),
        ];
        replay_and_compare(&tool, Trace::new(4096, entries));
    }

    fn replay_and_compare(tool: &std::ffi::OsStr, trace: Trace) {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("t.log");
        let img = tmp.path().join("t.img");
        write_log_file(&log, &trace).unwrap();

        let mut image = fill(99, 256 * 512);
        std::fs::write(&img, &image).unwrap();
        for e in &trace.entries {
            let at = (e.sector * 512) as usize;
            match e.kind() {
                crate::trace::EntryKind::Write { .. } => {
                    image[at..at + e.data.len()].copy_from_slice(&e.data)
                }
                crate::trace::EntryKind::Discard => {
                    image[at..at + e.nr_sectors as usize * 512].fill(0)
                }
                _ => {}
            }
        }
        let run = |args: &[&std::ffi::OsStr]| {
            let out = std::process::Command::new(tool).args(args).output().unwrap();
            assert!(
                out.status.success(),
                "replay-log failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let n = run(&["--log".as_ref(), log.as_os_str(), "--num-entries".as_ref()]);
        assert_eq!(n.trim(), trace.entries.len().to_string());
        // --find prints "<entry>@<position after the entry, in log sectors>".
        let found = run(&[
            "--log".as_ref(),
            log.as_os_str(),
            "--find".as_ref(),
            "--end-mark".as_ref(),
            "after big write".as_ref(),
        ]);
        let mut reader = LogReader::open(&log).unwrap();
        reader.by_ref().take(3).for_each(|e| drop(e.unwrap()));
        assert_eq!(
            found.trim(),
            format!("2@{}", reader.entry_offset() / u64::from(trace.sector_size))
        );
        run(&["--log".as_ref(), log.as_os_str(), "--replay".as_ref(), img.as_os_str()]);
        assert!(std::fs::read(&img).unwrap() == image, "replayed image differs");
    }
}
