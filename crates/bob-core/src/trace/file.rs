//! Log files behind traces: streamed to while recording, mapped into memory for reading,
//! copied when saved.
//!
//! A [`LogStream`] appends each request to a dm-log-writes log file the moment it
//! arrives and keeps only an index in memory (where each entry lies in the file), so the
//! recorder's memory does not grow with what the workload writes. Finishing the stream
//! writes the final super block and maps the file once: the [`Trace`] it returns has
//! every entry's data as a slice of that mapping, and the [`LogFile`] it points to knows
//! where each entry lies. [`read_log_file`](super::log::read_log_file) does the same for
//! a log on disk, reading only the headers (positioned reads, so that the mapping's pages
//! are touched only when a payload is used).
//!
//! Saving a trace whose entries are still exactly its file's ([`LogFile::holds`]: same
//! fields, and every payload the very slice of the mapping the file has there) copies the
//! file instead of encoding the entries again ([`LogFile::copy_to`]); the copy is byte
//! for byte what [`write_log`](super::log::write_log) would produce, because only files
//! in that canonical form are copied (a kernel log with stale bytes after its last entry
//! is encoded afresh, as before).
//!
//! # The mapping
//!
//! A file mapping reflects later changes to the file. bob never truncates or rewrites a
//! log file in place: whole files are replaced by rename
//! ([`write_log_file`](super::log::write_log_file), [`LogFile::copy_to`],
//! [`LogWriter::create`] unlinks before creating), and the one in-place write,
//! [`Trace::write_flags_to_file`], rewrites only the flags field of entry headers, which
//! no slice covers. Another process truncating a mapped log while bob runs would make
//! reads of the lost pages fault (SIGBUS); like every tool that maps its input, bob
//! accepts that.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::format::{
    check_entry, effective_sector_size, entry_len, replace_file, EntryRef, LogError, LogErrorKind,
    LogReader, LogWriter, PositionedFile, ENTRY_HEADER_LEN, SUPER_FIELDS_LEN,
};
use super::{flags, Entry, Trace};

/// Where one entry lies in its log file: what [`LogFile::holds`] compares a trace with.
#[derive(Clone, Copy, Debug)]
struct Indexed {
    /// Byte offset of the entry's header block.
    header: u64,
    sector: u64,
    nr_sectors: u64,
    flags: u64,
    /// Byte offset and length of the entry's data (write payload or mark text).
    data_at: u64,
    data_len: u64,
}

impl Indexed {
    fn of(e: EntryRef<'_>, header: u64, sector_size: u32) -> Indexed {
        let is_mark = e.flags & flags::MARK != 0;
        let has_data = e.flags & flags::DISCARD == 0;
        Indexed {
            header,
            sector: e.sector,
            nr_sectors: e.nr_sectors,
            flags: e.flags,
            data_at: header
                + if is_mark { ENTRY_HEADER_LEN as u64 } else { u64::from(sector_size) },
            data_len: if has_data { e.data.len() as u64 } else { 0 },
        }
    }
}

/// A dm-log-writes log file mapped into memory, with the index of its entries.
///
/// Held by the [`Trace`] read from or streamed into it ([`Trace::file`]); its entries'
/// payloads are slices of the mapping, which lives as long as any of them.
pub struct LogFile {
    /// The mapped file (read-write for a file bob streamed, read-only otherwise).
    file: File,
    path: PathBuf,
    map: Bytes,
    sector_size: u32,
    index: Vec<Indexed>,
    /// The file is byte for byte what the writer would produce for its entries.
    canonical: bool,
    /// `file` is open for writing (the recorder's own file).
    writable: bool,
}

impl fmt::Debug for LogFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogFile")
            .field("path", &self.path)
            .field("bytes", &self.map.len())
            .field("entries", &self.index.len())
            .field("canonical", &self.canonical)
            .finish()
    }
}

impl LogFile {
    /// Where the file was when it was mapped (it may have been renamed or removed since;
    /// the mapping and [`LogFile::copy_to`] do not depend on the name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length of the mapped file in bytes.
    pub fn byte_len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Number of entries in the file.
    pub fn nr_entries(&self) -> usize {
        self.index.len()
    }

    /// Whether the file is exactly what [`write_log`](super::log::write_log) produces for
    /// its entries (always so for a recorded file; a kernel log may carry stale bytes).
    #[cfg(test)]
    pub(crate) fn is_canonical(&self) -> bool {
        self.canonical
    }

    /// Whether `data` lies inside the mapping (a payload served from the file, not a copy).
    pub fn contains(&self, data: &[u8]) -> bool {
        let (start, end) =
            (self.map.as_ptr() as usize, self.map.as_ptr() as usize + self.map.len());
        let p = data.as_ptr() as usize;
        start <= p && p + data.len() <= end
    }

    /// Whether `data` is the slice of the mapping at `at..at + len`.
    fn is_slice(&self, data: &Bytes, at: u64, len: u64) -> bool {
        data.len() as u64 == len
            && (len == 0 || data.as_ptr() as usize == self.map.as_ptr() as usize + at as usize)
    }

    fn matches(&self, e: &Entry, i: &Indexed) -> bool {
        e.sector == i.sector
            && e.nr_sectors == i.nr_sectors
            && self.is_slice(&e.data, i.data_at, i.data_len)
    }

    /// Whether `trace` holds exactly this file's entries, in order, and the file is in
    /// canonical form: then the file is byte for byte the encoding of `trace`. Compares
    /// fields and payload addresses, never payload bytes, so it touches no mapped page.
    pub fn holds(&self, trace: &Trace) -> bool {
        self.canonical
            && effective_sector_size(trace) == self.sector_size
            && trace.entries.len() == self.index.len()
            && trace
                .entries
                .iter()
                .zip(&self.index)
                .all(|(e, i)| e.flags == i.flags && self.matches(e, i))
    }

    /// Copies the file to `dst` (a new file renamed over it; nothing to do when `dst` is
    /// this very file). Copies from the open file, in the kernel where it can
    /// (`copy_file_range`), whatever has become of the name it was opened by.
    pub(crate) fn copy_to(&self, dst: &Path) -> Result<(), LogError> {
        if let (Ok(a), Ok(b)) = (self.file.metadata(), std::fs::metadata(dst)) {
            if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
                return Ok(());
            }
        }
        let len = self.byte_len();
        replace_file(dst, |out| {
            copy_range(&self.file, out, len).map_err(|e| LogError::io(dst, 0, e))
        })
    }
}

/// Copies the first `len` bytes of `src` to `dst` from offset 0, with explicit offsets so
/// that concurrent copies of one file do not share a position.
fn copy_range(src: &File, dst: &File, len: u64) -> io::Result<()> {
    let (mut off_in, mut off_out): (libc::loff_t, libc::loff_t) = (0, 0);
    while (off_in as u64) < len {
        let want = (len - off_in as u64).min(1 << 30) as usize;
        // SAFETY: both descriptors stay open for the call (borrowed `File`s) and the
        // offsets point to live locals.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                &mut off_in,
                dst.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the log file ended at byte {off_in} while being copied ({len} bytes)"),
                ))
            }
            n if n > 0 => {}
            _ => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    // No in-kernel copy between these files (old kernel, other file
                    // system types): copy through a buffer from where it stopped.
                    Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => {
                        return copy_by_reads(src, dst, off_in as u64, len)
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(())
}

fn copy_by_reads(src: &File, dst: &File, mut at: u64, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        src.read_exact_at(&mut buf[..n], at)?;
        dst.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Reads every entry of a mapped log (opened from `path`): entries whose data slice the
/// mapping, and the index of the [`LogFile`] behind the trace.
pub(super) fn index_mapped(
    mut reader: LogReader<PositionedFile>,
    path: &Path,
) -> Result<Trace, LogError> {
    let sector_size = reader.sector_size();
    let capacity = reader.nr_entries().min(4096) as usize;
    let (mut entries, mut index) = (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
    loop {
        let header = reader.entry_offset();
        let Some(entry) = reader.next() else { break };
        let entry = entry?;
        index.push(Indexed::of(entry.view(), header, sector_size));
        entries.push(entry);
    }
    let ends_at_last_entry = reader.entry_offset() == reader.log_len();
    let clean_entries = !reader.saw_write_data_len();
    let (map, file) = reader.into_parts();
    let Some(map) = map else { return Ok(Trace::new(sector_size, entries)) };
    // The kernel copies its super block struct from the stack: bytes after the fields may
    // hold garbage, which the writer does not reproduce.
    let mut sb = vec![0u8; sector_size as usize];
    file.read_exact_at(&mut sb, 0).map_err(|e| LogError::io(path, 0, e))?;
    let clean_super = sb[SUPER_FIELDS_LEN..].iter().all(|&b| b == 0);
    let log = LogFile {
        file,
        path: path.to_owned(),
        map,
        sector_size,
        index,
        canonical: ends_at_last_entry && clean_entries && clean_super,
        writable: false,
    };
    Ok(Trace { sector_size, entries, file: Some(Arc::new(log)) })
}

/// A log file being written entry by entry, readable as it grows (see the module docs).
///
/// The recorder's log: [`LogStream::append_write`] logs a write straight from the
/// request's buffer and says where its payload lies, [`LogStream::read_at`] reads
/// payloads back (to serve reads of sectors written since recording started), and
/// [`LogStream::finish`] seals the file and returns it as a mapped [`Trace`].
pub struct LogStream {
    writer: LogWriter<BufWriter<File>>,
    path: PathBuf,
    index: Vec<Indexed>,
}

impl fmt::Debug for LogStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStream")
            .field("path", &self.path)
            .field("entries", &self.index.len())
            .field("bytes", &self.writer.offset())
            .finish()
    }
}

impl LogStream {
    /// Creates the log file at `path` (a file already there is replaced, see
    /// [`LogWriter::create`]) for a log with `sector_size`.
    pub fn create(path: &Path, sector_size: u32) -> Result<LogStream, LogError> {
        let writer = LogWriter::create(path, sector_size)?;
        Ok(LogStream { writer, path: path.to_owned(), index: Vec::new() })
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entries appended so far.
    pub fn nr_entries(&self) -> usize {
        self.index.len()
    }

    /// Bytes the log holds so far (super block included).
    pub fn byte_len(&self) -> u64 {
        self.writer.offset()
    }

    fn append_ref(&mut self, e: EntryRef<'_>) -> Result<Indexed, LogError> {
        let header = self.writer.offset();
        self.writer.append_ref(e)?;
        let indexed = Indexed::of(e, header, self.writer.sector_size());
        debug_assert_eq!(header + entry_len(e, self.writer.sector_size()), self.writer.offset());
        self.index.push(indexed);
        Ok(indexed)
    }

    /// Appends `entry` (checked as [`LogWriter::append`] checks it) and returns its index.
    pub fn append(&mut self, entry: &Entry) -> Result<usize, LogError> {
        self.append_ref(entry.view())?;
        Ok(self.index.len() - 1)
    }

    /// Appends a write of `data` (whole sectors) at `sector` with `flags` (besides being a
    /// write: FUA, FLUSH, METADATA, role bits) and returns the byte offset of its payload
    /// in the file.
    pub fn append_write(&mut self, sector: u64, flags: u64, data: &[u8]) -> Result<u64, LogError> {
        let nr_sectors = data.len() as u64 / super::SECTOR_SIZE;
        Ok(self.append_ref(EntryRef { sector, nr_sectors, flags, data })?.data_at)
    }

    /// Reads `buf.len()` bytes of the file at byte `offset` (e.g. a payload, at the
    /// offset [`LogStream::append_write`] returned), including everything appended so far.
    pub fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), LogError> {
        self.writer.flush()?;
        self.writer
            .file()
            .read_exact_at(buf, offset)
            .map_err(|e| LogError::io(&self.path, offset, e))
    }

    /// Writes the final super block, flushes, and maps the file: a trace of every entry
    /// appended, each payload a slice of the mapping.
    pub fn finish(self) -> Result<Trace, LogError> {
        let LogStream { writer, path, index } = self;
        let sector_size = writer.sector_size();
        let expected = writer.offset();
        let file = writer
            .finish()?
            .into_inner()
            .map_err(|e| LogError::io(&path, expected, e.into_error()))?;
        // SAFETY: see "The mapping" in the module docs.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| LogError::io(&path, 0, e))?;
        if map.len() as u64 != expected {
            let e = io::Error::other(format!(
                "the log file is {} bytes long, {expected} were written",
                map.len()
            ));
            return Err(LogError::io(&path, 0, e));
        }
        let map = Bytes::from_owner(map);
        // Every offset below was written through this stream, so lies inside the mapping.
        let slice = |at: u64, len: u64| {
            if len == 0 {
                Bytes::new()
            } else {
                map.slice(at as usize..(at + len) as usize)
            }
        };
        let entries = index
            .iter()
            .map(|i| Entry {
                sector: i.sector,
                nr_sectors: i.nr_sectors,
                flags: i.flags,
                data: slice(i.data_at, i.data_len),
            })
            .collect();
        let log = LogFile { file, path, map, sector_size, index, canonical: true, writable: true };
        Ok(Trace { sector_size, entries, file: Some(Arc::new(log)) })
    }
}

impl Trace {
    /// Writes into this trace's log file the flags of entries changed in memory since it
    /// was streamed (annotation sets METADATA after recording), so that the file still
    /// holds exactly these entries and saving keeps copying it. Only the flags field of
    /// those headers is written. A trace that differs from its file in more than flags,
    /// or whose file is not a recording's own (read-only) or is shared with another
    /// trace, is detached from it instead: saving then encodes the entries.
    pub(crate) fn write_flags_to_file(&mut self) -> Result<(), LogError> {
        let Some(mut arc) = self.file.take() else { return Ok(()) };
        let Some(log) = Arc::get_mut(&mut arc) else { return Ok(()) };
        let same_but_flags = log.writable
            && log.canonical
            && effective_sector_size(self) == log.sector_size
            && self.entries.len() == log.index.len()
            && self.entries.iter().zip(&log.index).all(|(e, i)| log.matches(e, i));
        if !same_but_flags {
            return Ok(());
        }
        for (n, (e, i)) in self.entries.iter().zip(log.index.iter_mut()).enumerate() {
            if e.flags == i.flags {
                continue;
            }
            let at = Some(n as u64);
            check_entry(e.view(), log.sector_size)
                .map_err(|k| LogError::new(Some(&log.path), at, i.header, k))?;
            log.file.write_all_at(&e.flags.to_le_bytes(), i.header + 16).map_err(|err| {
                LogError::new(Some(&log.path), at, i.header, LogErrorKind::Io(err))
            })?;
            i.flags = e.flags;
        }
        self.file = Some(arc);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::log::{read_log, read_log_file, write_log, write_log_file};
    use crate::trace::sidecar::{BaseImageInfo, Sidecar, SIDECAR_FORMAT};
    use crate::trace::TraceDir;

    fn payload(seed: u8, sectors: usize) -> Vec<u8> {
        (0..sectors * 512).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    fn sample_entries() -> Vec<Entry> {
        let mut fua = Entry::write(64, payload(3, 1));
        fua.flags |= flags::FUA | flags::FLUSH;
        vec![
            Entry::mark("op 0 begin: write /a"),
            Entry::write(16, payload(1, 2)),
            Entry::flush(),
            Entry::discard(32, 8),
            fua,
            Entry::write(8, payload(2, 8)),
            Entry::mark("op 0 end: write /a"),
        ]
    }

    fn encoded(trace: &Trace) -> Vec<u8> {
        let mut bytes = Vec::new();
        write_log(&mut bytes, trace).unwrap();
        bytes
    }

    fn streamed(path: &Path, entries: &[Entry]) -> Trace {
        let mut s = LogStream::create(path, 512).unwrap();
        for e in entries {
            s.append(e).unwrap();
        }
        s.finish().unwrap()
    }

    fn assert_mapped(trace: &Trace) {
        let file = trace.file.as_ref().expect("a log file behind the trace");
        for e in &trace.entries {
            assert!(e.data.is_empty() || file.contains(&e.data), "{e:?} is not in the mapping");
        }
        assert!(file.holds(trace));
    }

    fn sidecar() -> Sidecar {
        Sidecar {
            format: SIDECAR_FORMAT.into(),
            tool_version: "0".into(),
            kernel: "k".into(),
            config: "c".into(),
            property: None,
            workload: serde_json::Value::Null,
            observed: serde_json::Value::Null,
            base_image: BaseImageInfo { file: String::new(), size_bytes: 0, blake3: String::new() },
            ops: Vec::new(),
            roles: Vec::new(),
            schedule: None,
            recording: None,
            fua: None,
        }
    }

    #[test]
    fn a_stream_is_the_encoding_and_its_trace_slices_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rec.log");
        let entries = sample_entries();
        let mut s = LogStream::create(&path, 512).unwrap();
        let mut payload_at = Vec::new();
        for e in &entries {
            match e.kind() {
                crate::trace::EntryKind::Write { .. } => {
                    payload_at.push((s.append_write(e.sector, e.flags, &e.data).unwrap(), e));
                }
                _ => drop(s.append(e).unwrap()),
            }
        }
        assert_eq!(s.nr_entries(), entries.len());
        // Payloads read back while the stream is open, from where append_write said.
        for (at, e) in &payload_at {
            let mut buf = vec![0u8; e.data.len()];
            s.read_at(*at, &mut buf).unwrap();
            assert_eq!(buf, e.data);
        }
        let trace = s.finish().unwrap();
        assert_eq!(trace, Trace::new(512, entries.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), encoded(&trace));
        assert_mapped(&trace);
        assert_eq!(
            trace.file.as_ref().unwrap().byte_len(),
            std::fs::metadata(&path).unwrap().len()
        );
    }

    #[test]
    fn reading_a_file_maps_it_and_saving_copies_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.log");
        let trace = Trace::new(512, sample_entries());
        write_log_file(&path, &trace).unwrap();
        let back = read_log_file(&path).unwrap();
        assert_eq!(back, trace);
        assert_mapped(&back);
        assert!(back.file.as_ref().unwrap().is_canonical());

        // Saved by copying: byte for byte the encoding, even after the source is gone.
        std::fs::remove_file(&path).unwrap();
        TraceDir::write(&tmp.path().join("out"), &back, &sidecar()).unwrap();
        let saved = std::fs::read(TraceDir::log_path(&tmp.path().join("out"))).unwrap();
        assert_eq!(saved, encoded(&trace));
        // Onto itself: nothing to do, nothing lost.
        let out = TraceDir::open(&tmp.path().join("out")).unwrap();
        TraceDir::write(&tmp.path().join("out"), &out.trace, &sidecar()).unwrap();
        assert_eq!(std::fs::read(TraceDir::log_path(&tmp.path().join("out"))).unwrap(), saved);
        assert_eq!(out.trace, trace);
    }

    #[test]
    fn a_changed_trace_is_encoded_not_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let mut trace = streamed(&tmp.path().join("rec.log"), &sample_entries());
        trace.entries.remove(2);
        trace.entries[3].data = Bytes::from(payload(9, 1));
        assert!(!trace.file.as_ref().unwrap().holds(&trace));
        let out = tmp.path().join("out");
        TraceDir::write(&out, &trace, &sidecar()).unwrap();
        assert_eq!(std::fs::read(TraceDir::log_path(&out)).unwrap(), encoded(&trace));
        // The same bytes at the same address count; equal bytes elsewhere do not.
        let mut copy = streamed(&tmp.path().join("rec2.log"), &sample_entries());
        copy.entries[1].data = Bytes::from(copy.entries[1].data.to_vec());
        assert!(!copy.file.as_ref().unwrap().holds(&copy));
    }

    #[test]
    fn kernel_logs_are_not_copied_verbatim() {
        let tmp = tempfile::tempdir().unwrap();
        let trace = Trace::new(512, sample_entries());
        let clean = encoded(&trace);
        // Super block padding garbage, then stale bytes after the last entry.
        let mut garbage = clean.clone();
        garbage[28..32].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let mut stale = clean.clone();
        stale.extend_from_slice(&[0x77; 700]);
        for (name, bytes) in [("garbage", garbage), ("stale", stale)] {
            let path = tmp.path().join(format!("{name}.log"));
            std::fs::write(&path, &bytes).unwrap();
            let back = read_log_file(&path).unwrap();
            assert_eq!(back, trace, "{name}");
            assert!(!back.file.as_ref().unwrap().is_canonical(), "{name}");
            let out = tmp.path().join(name);
            TraceDir::write(&out, &back, &sidecar()).unwrap();
            assert_eq!(std::fs::read(TraceDir::log_path(&out)).unwrap(), clean, "{name}");
        }
    }

    #[test]
    fn rewriting_a_mapped_file_keeps_the_old_mapping_intact() {
        // `bob import --blktrace` opens a trace directory, annotates and writes the log
        // back to the same path while the entries still slice the old file.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.log");
        write_log_file(&path, &Trace::new(512, sample_entries())).unwrap();
        let mut trace = read_log_file(&path).unwrap();
        trace.entries[1].flags |= flags::METADATA;
        write_log_file(&path, &trace).unwrap();
        assert_eq!(trace.entries[5].data, payload(2, 8));
        assert_eq!(read_log_file(&path).unwrap(), trace);
        // The streaming writer does not truncate a mapped file either.
        let w = crate::trace::format::LogWriter::create(&path, 512).unwrap();
        drop(w);
        assert_eq!(trace.entries[1].data, payload(1, 2));
    }

    #[test]
    fn flags_written_back_keep_the_file_in_step() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rec.log");
        let mut trace = streamed(&path, &sample_entries());
        trace.entries[1].flags |= flags::METADATA;
        trace.entries[5].flags |= flags::METADATA;
        assert!(!trace.file.as_ref().unwrap().holds(&trace));
        trace.write_flags_to_file().unwrap();
        assert_mapped(&trace);
        assert_eq!(std::fs::read(&path).unwrap(), encoded(&trace));

        // Shared with a clone: detached instead (the clone still describes the file).
        let clone = trace.clone();
        trace.entries[1].flags |= flags::FUA;
        trace.write_flags_to_file().unwrap();
        assert!(trace.file.is_none());
        assert!(clone.file.as_ref().unwrap().holds(&clone));

        // A read-only (read, not recorded) file is never written: detached.
        let mut read = read_log_file(&path).unwrap();
        read.entries[1].flags &= !flags::METADATA;
        read.write_flags_to_file().unwrap();
        assert!(read.file.is_none());
        assert_eq!(std::fs::read(&path).unwrap(), encoded(&clone));
    }

    #[test]
    fn a_full_disk_is_one_error_naming_the_file() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let mut s = LogStream::create(full, 512).unwrap();
        let big = payload(5, 64);
        let e = (0..8).find_map(|_| s.append_write(0, 0, &big).err()).expect("ENOSPC");
        let text = e.to_string();
        assert!(text.starts_with("/dev/full: entry "), "{text}");
        assert!(text.contains("No space left on device") && !text.contains('\n'), "{text}");
    }

    #[test]
    fn pipes_give_one_error_and_generic_readers_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("log.fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let bytes = encoded(&Trace::new(512, sample_entries()));
        // A FIFO cannot seek: the copying reader refuses it with one clear error.
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            move || {
                use std::io::Write;
                // The reader refuses the FIFO, so this write may fail on a closed pipe.
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&fifo)
                    .and_then(|mut f| f.write_all(&bytes));
            }
        });
        let e = read_log_file(&fifo).unwrap_err();
        assert!(e.to_string().starts_with(&format!("{}: super block:", fifo.display())), "{e}");
        writer.join().unwrap();
        // A generic reader copies, and carries no file.
        let back =
            read_log(std::io::Cursor::new(encoded(&Trace::new(512, sample_entries())))).unwrap();
        assert!(back.file.is_none());
    }
}
