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
//!   `bio_to_dev_sectors`; `replay-log` multiplies both by `sectorsize`). bob's [`Entry`](super::Entry)
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
//! A reader over any other `Read + Seek` ([`LogReader::new`], [`read_log`]) copies.
//! [`write_log_file`] and every other writer of a whole file here write a new file and
//! rename it over the old one, never truncating a file in place, because a file some
//! trace still maps must keep its bytes.
//!
//! # Modules
//!
//! The entry-level format (constants, checks, [`LogWriter`], [`LogReader`]) lives in
//! `format.rs`, which both this module (whole traces) and [`super::file`] (log files
//! behind traces) build on, so that neither imports the other's internals.

use std::io::{BufWriter, Read, Seek, Write};
use std::path::Path;

use super::format::{
    check_entry, check_sector_size, effective_sector_size, entry_len, replace_file, super_block,
    write_entry,
};
pub(crate) use super::format::{max_mark_len, LOG_MAGIC, LOG_VERSION};
pub use super::format::{LogError, LogErrorKind, LogReader, PositionedFile};
use super::Trace;

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
pub(crate) fn write_log_file(path: &Path, trace: &Trace) -> Result<(), LogError> {
    // Checked before a temporary file is made, so an invalid trace leaves nothing behind.
    check_trace(trace, Some(path))?;
    replace_file(path, |file| write_log_inner(BufWriter::new(file), trace, Some(path)))
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

#[cfg(test)]
mod tests {
    use super::super::format::{LogWriter, MAX_WRITE_BYTES};
    use super::*;
    use crate::trace::{flags, Entry};
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};
    use std::io::Cursor;
    use std::io::{self, SeekFrom};
    use std::path::PathBuf;

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
    #[ignore = "needs BOB_REPLAY_LOG: a replay-log built from xfstests' src/log-writes"]
    fn replay_log_agrees_when_available() {
        let tool = std::env::var_os("BOB_REPLAY_LOG")
            .expect("BOB_REPLAY_LOG names a built replay-log (xfstests src/log-writes)");
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
            let tool = tool.to_str().unwrap();
            let timeout = std::time::Duration::from_secs(60);
            let out = crate::device::cmd::Cmd::new(tool, timeout).args(args).run().unwrap();
            assert_eq!(out.code, Some(0), "replay-log failed: {}", out.stderr);
            out.stdout
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
