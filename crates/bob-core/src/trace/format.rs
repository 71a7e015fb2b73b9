//! The dm-log-writes format, entry by entry: its constants and rules, the errors that
//! name where a log breaks them, and the streaming [`LogWriter`] and [`LogReader`]. Both
//! [`super::log`] (whole traces) and [`super::file`] (log files behind traces) build on
//! it; the format itself is described in [`super::log`].

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{flags, Entry, Trace, SECTOR_SIZE};

/// `WRITE_LOG_MAGIC`: the super block's first field.
pub(crate) const LOG_MAGIC: u64 = 0x006a_7366_7773_6872;
/// `WRITE_LOG_VERSION`: the only format version there is.
pub(crate) const LOG_VERSION: u64 = 1;
/// Bytes of the super block's fields (`magic`, `version`, `nr_entries`, `sectorsize`).
pub(crate) const SUPER_FIELDS_LEN: usize = 28;
/// Bytes of an entry header's fields (`sector`, `nr_sectors`, `flags`, `data_len`).
pub(crate) const ENTRY_HEADER_LEN: usize = 32;
/// Smallest sector size a log may declare (the kernel's `SECTOR_SIZE`).
pub(crate) const MIN_SECTOR_SIZE: u32 = 512;
/// Largest sector size a log may declare (the block layer's largest logical block size).
pub(crate) const MAX_SECTOR_SIZE: u32 = 64 * 1024;
/// Largest write payload accepted in one entry. A bio's size is a `u32` byte count, so a
/// real log never comes close; anything larger is treated as corruption.
pub(crate) const MAX_WRITE_BYTES: u64 = 1 << 30;

/// Longest mark text a log with `sector_size` can carry: the header block minus the
/// 32-byte header minus the NUL that `replay-log` relies on (the kernel's `maxsize - 1`).
pub(crate) fn max_mark_len(sector_size: u32) -> usize {
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
pub(super) fn write_entry<W: Write>(
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
pub(crate) struct LogWriter<W: Write + Seek> {
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

    /// Appends one entry and returns its index (tests; the recorder appends views).
    #[cfg(test)]
    pub(crate) fn append(&mut self, entry: &Entry) -> Result<usize, LogError> {
        self.append_ref(entry.view())
    }

    /// Entries appended so far (tests).
    #[cfg(test)]
    pub(crate) fn nr_entries(&self) -> u64 {
        self.nr_entries
    }

    /// Appends one entry and returns its index. An invalid entry is refused without
    /// writing anything; after an I/O error the writer refuses everything.
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
    pub(crate) fn sync_super(&mut self) -> Result<(), LogError> {
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
    pub(crate) fn with_path(mut r: R, path: Option<&Path>) -> Result<Self, LogError> {
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
    pub(crate) fn is_mapped(&self) -> bool {
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
    pub(crate) fn entry_offset(&self) -> u64 {
        self.offset
    }

    /// Index of the entry the next call to `next()` reads.
    #[cfg(test)]
    pub(crate) fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Positions the reader at entry `index`, whose header lies at byte `offset` (as
    /// reported by [`LogReader::entry_offset`] earlier). Nothing is checked until `next()`.
    #[cfg(test)]
    pub(crate) fn seek_entry(&mut self, index: u64, offset: u64) -> Result<(), LogError> {
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
