//! xfstests' `replay-log`, reimplemented: its options, its walk over a dm-log-writes log,
//! its replay onto a file or device, its fsck checkpoints, its output and its exit status.
//!
//! `bob log` and bob run under the name `replay-log` both end here, so that a test suite
//! (xfstests' common/dmlogwrites) can point at bob unchanged. The reference is
//! `src/log-writes/{replay-log.c,log-writes.c}` in xfstests; function names in comments
//! (`log_seek_entry`, `should_stop`, ...) are theirs. Where replay-log's behaviour is
//! surprising it is kept on purpose, because scripts depend on it:
//!
//! * `--find` prints `ENTRY@SECTOR`, where SECTOR is the log position (in log sectors)
//!   *after* the found entry and its data: the next entry's header.
//! * `--end-mark` replays the mark entry itself (it carries no data) and stops after it;
//!   an end mark that never comes replays the whole log and still exits 0.
//! * `--start-mark` starts after the mark; `--start-entry` is ignored when it is given.
//! * A discard is never skipped by `--start-sector/--end-sector`. It is a BLKDISCARD
//!   ioctl; when that fails once (a regular file, a device without discard), every later
//!   discard writes zeros instead, except pieces over 128 MiB, which are left alone.
//! * Flushes do nothing during a replay; the target is fsynced before each fsck and at
//!   the end.
//! * An fsck killed by a signal counts as passing (replay-log takes `WEXITSTATUS` of
//!   `system()`, which is 0 then).
//! * Exit status: 0 done (also when the end condition never matched), 1 for usage errors,
//!   unreadable or malformed logs, failed writes and failed fsck checkpoints, 255 when
//!   `--find` meets an unreadable entry, 130 when bob is interrupted.
//!
//! One addition of bob's own: a target that is mounted (or held exclusively, or an image
//! file under a mounted loop device) is refused, see [`TargetRule`].
//!
//! Unlike [`super::log::LogReader`], which refuses anything the kernel would not write,
//! this reader checks exactly what replay-log checks, so that it answers the same on the
//! same logs. It never trusts a length: data is streamed in bounded chunks after checking
//! that the file holds it, and every error names the log file and the byte offset.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use super::flags;
use super::log::{LOG_MAGIC, LOG_VERSION};
use crate::device::cmd::{self, Cmd};
use crate::device::mounts;

/// `sizeof(struct log_write_entry)`: four `__le64` and `char data[1]`, padded to 8.
const C_ENTRY_SIZE: u64 = 40;
/// `sizeof(struct log_write_super)`: three `__le64` and one `__le32`, padded to 8.
const C_SUPER_SIZE: usize = 32;
/// replay-log keeps `4097 - sizeof(struct log_write_entry)` bytes of a mark argument.
const MAX_MARK_ARG: usize = 4097 - C_ENTRY_SIZE as usize;
/// `log->max_zero_size`: larger discard pieces are not emulated with zeros.
const MAX_ZERO_SIZE: u64 = 128 * 1024 * 1024;
/// `log_discard` issues discards in pieces of at most this size.
const MAX_DISCARD_CHUNK: u64 = 1024 * 1024 * 1024;
/// Bytes of a header block that can matter: the header, and mark text as far as the
/// longest mark argument and its NUL (`should_stop` compares no further). replay-log
/// reads the whole block (any `u32` size); bob checks the block is there and reads this.
const HEADER_READ: u64 = 32 + MAX_MARK_ARG as u64 + 1;
/// Data is copied from the log to the target in pieces of this size (replay-log
/// allocates the entry's whole claimed size at once).
const CHUNK: usize = 1 << 20;
/// `_IO(0x12, 119)` from linux/fs.h.
const BLKDISCARD: libc::c_ulong = 0x1277;
/// The most one read(2) returns on Linux (`MAX_RW_COUNT`, `INT_MAX & PAGE_MASK`).
const MAX_RW_COUNT: u64 = 0x7fff_f000;

/// Exit status: done.
const EXIT_OK: u8 = 0;
/// Exit status of usage errors and of every failure outside `--find`.
pub const EXIT_FAILED: u8 = 1;
/// Exit status of `--find` meeting an unreadable entry (`return -1` from main).
const EXIT_FIND_ERROR: u8 = 255;
/// Exit status when bob is interrupted (not replay-log's: it just dies).
const EXIT_INTERRUPTED: u8 = 130;

/// When `--fsck` runs (`--check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// After every N-th replayed entry.
    Every(u64),
    /// After each entry with the FLUSH flag.
    Flush,
    /// After each entry with the FUA flag.
    Fua,
    /// After each discard.
    Discard,
}

/// What to do with the replay target, beyond what replay-log does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetRule {
    /// bob as `replay-log`: write to whatever the caller named, unless it is mounted.
    AnyUnmounted,
    /// `bob log`: also refuse a block device that is not a loop device, unless `force`.
    LoopOnly {
        /// Accept any block device that is not mounted.
        force: bool,
    },
}

/// replay-log's options, as its `main` holds them after `getopt_long`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `--log`: the log file or device.
    pub log: Option<PathBuf>,
    /// `--replay`: the file or device to write to.
    pub replay: Option<PathBuf>,
    /// `--limit`: stop after this many entries (0: no limit).
    pub limit: u64,
    /// `--next-flush`: stop at (find) the next entry with FLUSH.
    pub next_flush: bool,
    /// `--next-fua`: stop at (find) the next entry with FUA.
    pub next_fua: bool,
    /// `--start-entry`.
    pub start_entry: u64,
    /// `--start-mark`: start after this mark (wins over `--start-entry`).
    pub start_mark: Option<Vec<u8>>,
    /// `--end-mark`: stop at (find) this mark. Only marks stop then, not flushes or FUAs.
    pub end_mark: Option<Vec<u8>>,
    /// `--find`.
    pub find: bool,
    /// `--num-entries`.
    pub num_entries: bool,
    /// `--no-discard`.
    pub no_discard: bool,
    /// `--fsck`: a shell command.
    pub fsck: Option<OsString>,
    /// `--check`.
    pub check: Option<Check>,
    /// `--start-sector`: skip writes that end at or before it.
    pub start_sector: u64,
    /// `--end-sector`: skip writes that start after it (default: none).
    pub end_sector: u64,
    /// `-v` count: 1 prints replayed entries, 2 also skipped and seeked-over ones.
    pub verbose: u32,
}

impl Options {
    /// Options with replay-log's defaults.
    pub fn new() -> Self {
        Options { end_sector: u64::MAX, ..Options::default() }
    }
}

/// Usage text, as replay-log prints it (typos included: scripts never parse it), without
/// the final newline.
const USAGE: &str = "Usage: replay-log --log <logfile> [options]
\t--replay <device> - replay onto a specific device
\t--limit <number> - number of entries to replay
\t--next-flush - replay to/find the next flush
\t--next-fua - replay to/find the next fua
\t--start-entry <entry> - start at the given entry #
\t--start-mark <mark> - mark to start from
\t--end-mark <mark> - replay to/find the given mark
\t--find - put replay-log in find mode, will search based on the other options
\t--number-entries - print the number of entries in the log
\t--no-discard - don't process discard entries
\t--fsck - the fsck command to run, must specify --check
\t--check [<number>|flush|fua|discard] when to check the file system, mush specify --fsck
\t--start-sector <sector> - replay ops on region from <sector> onto <device>
\t--end-sector <sector> - replay ops on region to <sector> onto <device>
\t-v or --verbose - print replayed ops
\t-vv - print also skipped ops";

/// A command line replay-log rejects (exit status 1). Displays as replay-log prints it
/// (a reason line, then the usage where replay-log prints the usage);
/// [`UsageError::reason`] is the one-line form.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UsageError {
    /// `getopt_long` complained (its message), then replay-log printed its usage.
    #[error("{0}\n{USAGE}")]
    Getopt(String),
    /// No `--log`.
    #[error("no log given (--log FILE)\n{USAGE}")]
    NoLog,
    /// `--fsck` without `--check`, or the reverse.
    #[error("--fsck and --check go together\n{USAGE}")]
    FsckWithoutCheck,
    /// A number replay-log's `strtoull` check refused (`--start-entry`, `--limit`,
    /// `--check N` with N = 0).
    #[error("Invalid entry number")]
    InvalidEntry,
    /// `--start-sector` or `--end-sector` not a number.
    #[error("Invalid sector number")]
    InvalidSector,
}

impl UsageError {
    /// The reason, in one line, without the usage text.
    pub fn reason(&self) -> String {
        self.to_string().lines().next().unwrap_or_default().to_owned()
    }
}

/// replay-log's long options, in its table's order (abbreviations resolve by it).
const LONG: &[(&str, bool)] = &[
    ("next-flush", false),
    ("next-fua", false),
    ("start-entry", true),
    ("end-mark", true),
    ("log", true),
    ("replay", true),
    ("limit", true),
    ("verbose", false),
    ("find", false),
    ("num-entries", false),
    ("no-discard", false),
    ("fsck", true),
    ("check", true),
    ("start-mark", true),
    ("start-sector", true),
    ("end-sector", true),
];

/// Parses a command line the way replay-log's `getopt_long(argc, argv, "v", ...)` loop
/// does: GNU permutation (other arguments are ignored), `--opt=value` or `--opt value`,
/// unambiguous prefixes (glibc takes the first of several matches that agree on taking
/// an argument), `-v` clusters, the first error ends parsing. `prog` is `argv[0]`, used in
/// getopt's messages.
pub fn parse_args<I>(prog: &str, args: I) -> Result<Options, UsageError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut o = Options::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        i += 1;
        if arg == b"--" {
            break;
        }
        if let Some(body) = arg.strip_prefix(b"--") {
            let (name, inline) = match body.iter().position(|&b| b == b'=') {
                Some(p) => (&body[..p], Some(&body[p + 1..])),
                None => (body, None),
            };
            let idx = resolve_long(prog, name, body)?;
            let (long, takes_arg) = LONG[idx];
            let value = if takes_arg {
                match inline {
                    Some(v) => Some(OsStr::from_bytes(v).to_owned()),
                    None if i < args.len() => {
                        i += 1;
                        Some(args[i - 1].clone())
                    }
                    None => {
                        return Err(UsageError::Getopt(format!(
                            "{prog}: option '--{long}' requires an argument"
                        )))
                    }
                }
            } else if inline.is_some() {
                return Err(UsageError::Getopt(format!(
                    "{prog}: option '--{long}' doesn't allow an argument"
                )));
            } else {
                None
            };
            apply(&mut o, long, value.as_deref())?;
        } else if arg.len() > 1 && arg[0] == b'-' {
            for &c in &arg[1..] {
                if c != b'v' {
                    return Err(UsageError::Getopt(format!(
                        "{prog}: invalid option -- '{}'",
                        char::from(c)
                    )));
                }
                o.verbose += 1;
            }
        }
        // Anything else is a non-option argument: getopt permutes it to the end and
        // replay-log never looks at it.
    }
    if o.log.is_none() {
        return Err(UsageError::NoLog);
    }
    Ok(o)
}

/// glibc's long-option lookup: an exact name, else the unique prefix match, where several
/// matches that all take (or all refuse) an argument are not ambiguous: the first wins.
fn resolve_long(prog: &str, name: &[u8], body: &[u8]) -> Result<usize, UsageError> {
    if let Some(i) = LONG.iter().position(|(n, _)| n.as_bytes() == name) {
        return Ok(i);
    }
    let matches: Vec<usize> =
        (0..LONG.len()).filter(|&i| LONG[i].0.as_bytes().starts_with(name)).collect();
    let Some(&first) = matches.first() else {
        return Err(UsageError::Getopt(format!(
            "{prog}: unrecognized option '--{}'",
            String::from_utf8_lossy(body)
        )));
    };
    // `--verbose` is the one entry with a different `val` ('v'), as in the C table.
    let same = |i: usize| {
        LONG[i].1 == LONG[first].1 && (LONG[i].0 == "verbose") == (LONG[first].0 == "verbose")
    };
    if matches.iter().all(|&i| same(i)) {
        return Ok(first);
    }
    let names: String = matches.iter().map(|&i| format!(" '--{}'", LONG[i].0)).collect();
    Err(UsageError::Getopt(format!(
        "{prog}: option '--{}' is ambiguous; possibilities:{names}",
        String::from_utf8_lossy(name)
    )))
}

/// One option's effect, as replay-log's `switch (opt_index)`.
fn apply(o: &mut Options, long: &str, value: Option<&OsStr>) -> Result<(), UsageError> {
    let v = value.map(OsStr::as_bytes).unwrap_or_default();
    let mark = || v[..v.len().min(MAX_MARK_ARG)].to_vec();
    match long {
        "next-flush" => o.next_flush = true,
        "next-fua" => o.next_fua = true,
        "start-entry" => o.start_entry = strtoull(v).ok_or(UsageError::InvalidEntry)?,
        "end-mark" => o.end_mark = Some(mark()),
        "start-mark" => o.start_mark = Some(mark()),
        "log" => o.log = Some(PathBuf::from(OsStr::from_bytes(v))),
        "replay" => o.replay = Some(PathBuf::from(OsStr::from_bytes(v))),
        "limit" => o.limit = strtoull(v).ok_or(UsageError::InvalidEntry)?,
        "verbose" => o.verbose += 1,
        "find" => o.find = true,
        "num-entries" => o.num_entries = true,
        "no-discard" => o.no_discard = true,
        "fsck" => o.fsck = Some(OsStr::from_bytes(v).to_owned()),
        "check" => {
            o.check = Some(match v {
                b"flush" => Check::Flush,
                b"fua" => Check::Fua,
                b"discard" => Check::Discard,
                _ => match strtoull(v) {
                    Some(n) if n != 0 => Check::Every(n),
                    _ => return Err(UsageError::InvalidEntry),
                },
            })
        }
        "start-sector" => o.start_sector = strtoull(v).ok_or(UsageError::InvalidSector)?,
        "end-sector" => o.end_sector = strtoull(v).ok_or(UsageError::InvalidSector)?,
        _ => return Err(UsageError::NoLog), // unreachable: `long` comes from LONG
    }
    Ok(())
}

/// C's `strtoull(s, &end, 0)` followed by replay-log's `*end == '\0'` test: leading white
/// space, a sign (a minus negates modulo 2^64), `0x` hex or `0` octal, saturation on
/// overflow; `None` when characters are left over. An empty string is 0, as in C.
fn strtoull(s: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut base = 10u32;
    if s.get(i) == Some(&b'0') {
        if matches!(s.get(i + 1), Some(b'x' | b'X'))
            && s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
        {
            base = 16;
            i += 2;
        } else {
            base = 8;
        }
    }
    let digits_start = i;
    let mut val: u64 = 0;
    let mut overflow = false;
    while let Some(d) = s.get(i).and_then(|&c| char::from(c).to_digit(base)) {
        match val.checked_mul(u64::from(base)).and_then(|v| v.checked_add(u64::from(d))) {
            Some(v) => val = v,
            None => overflow = true,
        }
        i += 1;
    }
    if i == digits_start {
        // No digits: strtoull leaves `end` at the start of the string, so only an empty
        // string passes replay-log's test.
        return s.is_empty().then_some(0);
    }
    if i != s.len() {
        return None;
    }
    let val = if overflow { u64::MAX } else { val };
    Some(if neg && !overflow { val.wrapping_neg() } else { val })
}

/// What replay-log answered (its stdout, beyond `-v` lines).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// `--find`: the entry found and the log sector after it.
    Found {
        /// Index of the entry.
        entry: u64,
        /// Log position after the entry and its data, in log sectors.
        next_sector: u64,
    },
    /// `--num-entries`.
    NumEntries {
        /// The super block's entry count.
        entries: u64,
    },
    /// Neither `--find`, `--num-entries` nor `--replay`: the super block.
    Info {
        /// Format version (1).
        version: u64,
        /// The log's sector size.
        sector_size: u64,
        /// The super block's entry count.
        entries: u64,
    },
    /// `--replay` finished.
    Replayed {
        /// Entries walked (replayed, skipped or discarded) from the start position.
        entries: u64,
        /// How many times the fsck command ran.
        fsck_runs: u64,
        /// Whether a stop condition (limit, mark, flush, FUA) ended the replay, rather
        /// than the end of the log.
        stopped: bool,
    },
}

impl fmt::Display for Answer {
    /// replay-log's stdout line for the answer; nothing for a replay.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Found { entry, next_sector } => writeln!(f, "{entry}@{next_sector}"),
            Answer::NumEntries { entries } => writeln!(f, "{entries}"),
            Answer::Info { version, sector_size, entries } => {
                writeln!(f, "Log version={version}, sectorsize={sector_size}, entries={entries}")
            }
            Answer::Replayed { .. } => Ok(()),
        }
    }
}

/// Why replay-log failed. Each displays as one line; those about the log name its file
/// and the byte offset, followed by replay-log's own wording.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command line (`usage()`).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The log could not be opened.
    #[error("Couldn't open log {}: {source}", path.display())]
    OpenLog {
        /// The log.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The replay target could not be opened.
    #[error("Couldn't open replay file {}: {source}", path.display())]
    OpenReplay {
        /// The target.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// bob's own refusal: the target is mounted, or in use, or not a loop device.
    #[error("{}: {reason}", path.display())]
    Refused {
        /// The target.
        path: PathBuf,
        /// Why bob will not write to it.
        reason: String,
    },
    /// The log is not a log, is truncated or malformed.
    #[error("{}: byte {offset}: {what}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// Byte offset of the structure at fault.
        offset: u64,
        /// replay-log's message, with what bob saw.
        what: String,
    },
    /// Writing, discarding or syncing the target failed.
    #[error("{}: byte {offset}: {what}: {source}", path.display())]
    Target {
        /// The target.
        path: PathBuf,
        /// Byte offset on the target.
        offset: u64,
        /// What was being done.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// `--start-entry` past the end (`log_seek_entry`).
    #[error("{}: Invalid entry number {entry}: the log has {entries} entries", path.display())]
    InvalidEntry {
        /// The log.
        path: PathBuf,
        /// The entry asked for.
        entry: u64,
        /// The super block's entry count.
        entries: u64,
    },
    /// `--start-mark` not in the log.
    #[error("{}: Couldn't find starting mark", path.display())]
    NoStartMark {
        /// The log.
        path: PathBuf,
    },
    /// `--find` walked the whole log.
    #[error("{}: Couldn't find entry", path.display())]
    NotFound {
        /// The log.
        path: PathBuf,
    },
    /// The fsck command failed (or could not run) at a checkpoint.
    #[error("Fsck errored out on entry {entry}")]
    Fsck {
        /// Index of the entry after which it ran.
        entry: u64,
    },
    /// `--find` could not read an entry (exit status 255).
    #[error(transparent)]
    WhileFinding(Box<Error>),
    /// SIGINT or SIGTERM.
    #[error("interrupted")]
    Interrupted,
}

/// What [`run`] ends with: the answer or the error, and the exit status replay-log uses.
#[derive(Debug)]
pub struct Outcome {
    /// The answer, or why there is none.
    pub result: Result<Answer, Error>,
    /// replay-log's exit status for it.
    pub exit_status: u8,
}

/// An open log, positioned like replay-log's `struct log`.
struct Log {
    file: File,
    path: PathBuf,
    len: u64,
    sector_size: u64,
    nr_entries: u64,
    cur_entry: u64,
    /// Byte offset of the next read (replay-log's `cur_pos`, kept in step with lseek).
    cur_pos: u64,
}

/// One entry header as read, with its header block (for the mark text).
struct Header {
    sector: u64,
    nr_sectors: u64,
    flags: u64,
    data_len: u64,
    block: Vec<u8>,
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Log {
    fn read_super(mut file: File, path: &Path) -> Result<Log, Error> {
        // Seeking to the end sizes block devices too (their metadata length is 0).
        let len = file
            .seek(SeekFrom::End(0))
            .map_err(|source| Error::OpenLog { path: path.to_owned(), source })?;
        let err = |offset, what: String| Error::Log { path: path.to_owned(), offset, what };
        let mut sb = [0u8; C_SUPER_SIZE];
        let n = read_at_most(&file, &mut sb, 0)
            .map_err(|e| err(0, format!("Error reading super: {e}")))?;
        if n < C_SUPER_SIZE {
            return Err(err(0, format!("Error reading super: {n} of {C_SUPER_SIZE} bytes")));
        }
        let magic = le64(&sb, 0);
        if magic != LOG_MAGIC {
            return Err(err(0, format!("Magic doesn't match ({magic:#x})")));
        }
        let version = le64(&sb, 8);
        if version != LOG_VERSION {
            return Err(err(
                8,
                format!("Version mismatch, wanted {LOG_VERSION}, have {}", version as i32),
            ));
        }
        let sector_size = u64::from(u32::from_le_bytes([sb[24], sb[25], sb[26], sb[27]]));
        // replay-log divides by it (0 crashes it) and reads the byte after the 32-byte
        // header as padding: a smaller block is no log.
        if sector_size < C_ENTRY_SIZE {
            return Err(err(24, format!("unusable sector size {sector_size}")));
        }
        Ok(Log {
            file,
            path: path.to_owned(),
            len,
            sector_size,
            nr_entries: le64(&sb, 16),
            cur_entry: 0,
            cur_pos: sector_size,
        })
    }

    fn err(&self, offset: u64, what: String) -> Error {
        Error::Log { path: self.path.clone(), offset, what }
    }

    /// Reads `size` header bytes at `cur_pos` and applies `log_entry_valid`.
    fn read_header(&self, size: u64) -> Result<Header, Error> {
        let mut block = vec![0u8; size.min(HEADER_READ) as usize];
        let n = read_at_most(&self.file, &mut block, self.cur_pos).map_err(|e| {
            self.err(self.cur_pos, format!("entry {}: Error reading entry: {e}", self.cur_entry))
        })?;
        // replay-log's read of the whole block comes up short when the log ends inside it.
        let n = if n == block.len() {
            self.len.saturating_sub(self.cur_pos).min(size)
        } else {
            n as u64
        };
        if n < size {
            return Err(self.err(
                self.cur_pos,
                format!(
                    "entry {}: Error reading entry: log ends after {n} of {size} header bytes",
                    self.cur_entry
                ),
            ));
        }
        let h = Header {
            sector: le64(&block, 0),
            nr_sectors: le64(&block, 8),
            flags: le64(&block, 16),
            data_len: le64(&block, 24),
            block,
        };
        // log_entry_valid: an all-zero entry, or a non-mark whose byte after the header
        // is not the zero padding.
        let reason = if h.flags == 0 && h.nr_sectors == 0 {
            Some("no flags and no sectors")
        } else if h.flags != flags::MARK && h.block[32] != 0 {
            Some("header padding is not zero")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(self.err(
                self.cur_pos,
                format!(
                    "entry {}: Malformed entry @{} ({reason})",
                    self.cur_entry,
                    self.cur_pos / self.sector_size
                ),
            ));
        }
        Ok(h)
    }

    /// `lseek(fd, delta, SEEK_CUR)` with the file position at `from`, done by the kernel
    /// itself: replay-log moves over data with lseek and a wrapped `off_t`, and the
    /// kernel's limits (no negative position, nothing past the file system's largest
    /// file) decide whether a corrupt length is an error or a jump.
    fn seek_by(&mut self, from: u64, delta: u64) -> Result<(), Error> {
        let to = self
            .file
            .seek(SeekFrom::Start(from))
            .and_then(|_| self.file.seek(SeekFrom::Current(delta as i64)));
        match to {
            Ok(p) => {
                self.cur_pos = p;
                Ok(())
            }
            Err(e) => Err(self.err(
                from,
                format!("entry {}: Error seeking in log: {e}", self.cur_entry.wrapping_sub(1)),
            )),
        }
    }

    /// `log_seek_entry`: walk from the first entry to `n`, reading headers only.
    fn seek_entry(&mut self, n: u64, verbose: u32, out: &mut dyn Write) -> Result<(), Error> {
        if n >= self.nr_entries {
            return Err(Error::InvalidEntry {
                path: self.path.clone(),
                entry: n,
                entries: self.nr_entries,
            });
        }
        self.cur_pos = self.sector_size;
        self.cur_entry = 0;
        for i in 0..n {
            let h = self.read_header(C_ENTRY_SIZE)?;
            if verbose > 1 {
                let _ = writeln!(
                    out,
                    "seek entry {}@{}: {}, size {}, flags {:#x}",
                    i as i32,
                    self.cur_pos / self.sector_size,
                    h.sector,
                    h.nr_sectors,
                    h.flags
                );
            }
            let mut skip = self.sector_size - C_ENTRY_SIZE;
            if h.flags & flags::DISCARD == 0 {
                skip = skip.wrapping_add(h.nr_sectors.wrapping_mul(self.sector_size));
            }
            self.cur_entry += 1;
            self.seek_by(self.cur_pos + C_ENTRY_SIZE, skip)?;
        }
        Ok(())
    }

    /// `log_seek_next_entry` (with `read_data`): `None` at the end of the log.
    fn seek_next_entry(
        &mut self,
        verbose: u32,
        out: &mut dyn Write,
    ) -> Result<Option<Header>, Error> {
        if self.cur_entry >= self.nr_entries {
            return Ok(None);
        }
        let h = self.read_header(self.sector_size)?;
        self.cur_entry += 1;
        self.cur_pos += self.sector_size;
        if verbose > 1 {
            let _ = writeln!(
                out,
                "seek entry {}@{}: {}, size {}, flags {:#x}({})",
                (self.cur_entry as i32).wrapping_sub(1),
                self.cur_pos / self.sector_size,
                h.sector,
                h.nr_sectors,
                h.flags,
                flag_names(h.flags)
            );
        }
        let size = h.nr_sectors.wrapping_mul(self.sector_size);
        if size != 0 && h.flags & flags::DISCARD == 0 {
            self.seek_by(self.cur_pos, size)?;
        }
        Ok(Some(h))
    }
}

/// `read` until `buf` is full or the file ends; the count read.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `entry_flags_to_str`: `FLUSH|FUA|...`, `UNKNOWN.0x..` for other bits, `NONE` for none.
pub(crate) fn flag_names(f: u64) -> String {
    // replay-log knows the kernel's flags only: bob's FUA_POSTFLUSH is unknown to it.
    let (names, rest) = flags::split_names(f, flags::KERNEL);
    let mut parts: Vec<String> = names.into_iter().map(str::to_owned).collect();
    if rest != 0 {
        parts.push(format!("UNKNOWN.{rest:#x}"));
    }
    if parts.is_empty() {
        "NONE".to_owned()
    } else {
        parts.join("|")
    }
}

/// `should_stop`: the entry has one of `stop_flags`; when those include MARK, only a
/// mark whose text matches does (`strncmp(mark, text, data_len + 1)` over the header
/// block, bytes past the block reading as NUL).
fn should_stop(h: &Header, stop_flags: u64, mark: Option<&[u8]>) -> bool {
    if h.flags & stop_flags == 0 {
        return false;
    }
    if stop_flags & flags::MARK == 0 {
        return true;
    }
    if h.flags & flags::MARK == 0 {
        return false;
    }
    let mark = mark.unwrap_or_default();
    let text = &h.block[32..];
    let n = h.data_len.wrapping_add(1);
    let mut i = 0u64;
    while i < n {
        let a = mark.get(i as usize).copied().unwrap_or(0);
        let b = text.get(i as usize).copied().unwrap_or(0);
        if a != b {
            return false;
        }
        if a == 0 {
            return true;
        }
        i += 1;
    }
    true
}

/// The replay target and replay-log's discard state.
struct Target {
    file: File,
    path: PathBuf,
    discard_unsupported: bool,
}

impl Target {
    fn err(&self, offset: u64, what: &'static str, source: io::Error) -> Error {
        Error::Target { path: self.path.clone(), offset, what, source }
    }

    /// `log_discard`: BLKDISCARD in pieces of at most 1 GiB, zeros once that fails.
    fn discard(
        &mut self,
        start: u64,
        size: u64,
        verbose: u32,
        out: &mut dyn Write,
    ) -> Result<(), Error> {
        let (mut start, mut size) = (start, size);
        while size > 0 {
            if self.discard_unsupported && verbose == 0 && size > MAX_DISCARD_CHUNK {
                // Every whole 1 GiB piece is over the zeroing limit and silently left
                // alone: jump to the last piece instead of looping over a corrupt length
                // (up to 2^34 pieces).
                let whole = (size - 1) / MAX_DISCARD_CHUNK * MAX_DISCARD_CHUNK;
                start = start.wrapping_add(whole);
                size -= whole;
                continue;
            }
            let len = size.min(MAX_DISCARD_CHUNK);
            if !self.discard_unsupported {
                let range = [start, len];
                // SAFETY: BLKDISCARD reads two u64 from the pointer, which outlives the call.
                let rc =
                    unsafe { libc::ioctl(self.file.as_raw_fd(), BLKDISCARD as _, range.as_ptr()) };
                if rc < 0 {
                    if verbose > 0 {
                        let _ = writeln!(
                            out,
                            "replay device doesn't support discard, switching to writing zeros"
                        );
                    }
                    self.discard_unsupported = true;
                }
            }
            if self.discard_unsupported {
                self.zero(start, len, verbose, out)?;
            }
            size -= len;
            start = start.wrapping_add(len);
        }
        Ok(())
    }

    /// `zero_range`: pieces over 128 MiB are skipped, as replay-log does.
    fn zero(&self, start: u64, len: u64, verbose: u32, out: &mut dyn Write) -> Result<(), Error> {
        if len > MAX_ZERO_SIZE {
            if verbose > 0 {
                let _ = writeln!(out, "discard len {len} larger than max {MAX_ZERO_SIZE}");
            }
            return Ok(());
        }
        let zeros = vec![0u8; (len as usize).min(CHUNK)];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(zeros.len() as u64) as usize;
            self.file
                .write_all_at(&zeros[..n], start.wrapping_add(off))
                .map_err(|e| self.err(start.wrapping_add(off), "Error zeroing file", e))?;
            off += n as u64;
        }
        Ok(())
    }
}

/// Refuses a target that is mounted or held exclusively (and, under `LoopOnly`, a block
/// device that is not a loop device). Regular files pass: replay-log writes images too.
fn vet_target(path: &Path, rule: TargetRule) -> Result<(), Error> {
    let refuse = |reason: String| Error::Refused { path: path.to_owned(), reason };
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(()); // opening it reports the error, as replay-log does
    };
    if meta.file_type().is_file() {
        // An image file is as live as the loop device over it when that one is mounted.
        if let Some((dev, mnt)) = mounted_loop_over(path) {
            return Err(refuse(format!(
                "backs {}, which is mounted on {}; refusing to replay onto a mounted device",
                dev.display(),
                mnt.display()
            )));
        }
        return Ok(());
    }
    if !meta.file_type().is_block_device() {
        return Ok(());
    }
    if let Some(mnt) = mounted_on(path, meta.rdev()) {
        return Err(refuse(format!(
            "is mounted on {}; refusing to replay onto a mounted device",
            mnt.display()
        )));
    }
    if let TargetRule::LoopOnly { force: false } = rule {
        if !crate::device::loopdev::is_loop_device(path) {
            return Err(refuse(
                "not a loop device; bob refuses to write to it (pass --force if you mean it)"
                    .to_owned(),
            ));
        }
    }
    // O_EXCL on a block device fails with EBUSY while a file system (or md, dm, swap)
    // holds it: this catches mounts mountinfo names by another device number (btrfs).
    // The probe is closed at once, so an fsck at a checkpoint can open it exclusively.
    match OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(refuse(
            "is in use (mounted or held by another device); refusing to replay onto it".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// The mount point of the block device `path` (device number `rdev`), if mounted.
fn mounted_on(path: &Path, rdev: u64) -> Option<PathBuf> {
    let want = (libc::major(rdev), libc::minor(rdev));
    let canon = std::fs::canonicalize(path).ok();
    mounts::mountinfo()
        .into_iter()
        .find(|m| {
            m.dev == want
                || std::fs::canonicalize(&m.source).ok().is_some_and(|s| Some(&s) == canon.as_ref())
        })
        .map(|m| m.mount_point)
}

/// The loop device backed by the regular file `path` that is mounted, and where.
fn mounted_loop_over(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let canon = std::fs::canonicalize(path).ok()?;
    mounts::loop_backings().into_iter().filter(|l| l.backing == canon).find_map(|l| {
        let rdev = std::fs::metadata(&l.device).ok()?.rdev();
        mounted_on(&l.device, rdev).map(|mnt| (l.device, mnt))
    })
}

/// Runs replay-log on `opts`, writing its `-v` lines to `out` as it goes (the answer is
/// returned, not printed; see [`Answer`]'s Display). `cancel`, when set, stops a replay
/// between entries. The fsck command inherits the process's stdout, so `out` is flushed
/// before it runs.
pub fn run(
    opts: &Options,
    rule: TargetRule,
    cancel: Option<&AtomicBool>,
    out: &mut dyn Write,
) -> Outcome {
    let result = run_inner(opts, rule, cancel, out);
    let exit_status = match &result {
        Ok(_) => EXIT_OK,
        Err(Error::Interrupted) => EXIT_INTERRUPTED,
        Err(Error::WhileFinding(_)) => EXIT_FIND_ERROR,
        Err(_) => EXIT_FAILED,
    };
    Outcome { result, exit_status }
}

fn run_inner(
    opts: &Options,
    rule: TargetRule,
    cancel: Option<&AtomicBool>,
    out: &mut dyn Write,
) -> Result<Answer, Error> {
    let log_path = opts.log.as_deref().ok_or(UsageError::NoLog)?;
    let v = opts.verbose;
    // log_open: the log, then the target, then the super block.
    let log_file = File::open(log_path)
        .map_err(|source| Error::OpenLog { path: log_path.to_owned(), source })?;
    let mut target = match &opts.replay {
        Some(p) => {
            vet_target(p, rule)?;
            let file = OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|source| Error::OpenReplay { path: p.clone(), source })?;
            Some(Target { file, path: p.clone(), discard_unsupported: false })
        }
        None => None,
    };
    let mut log = Log::read_super(log_file, log_path)?;

    if let Some(mark) = &opts.start_mark {
        // seek_to_mark: start after the mark.
        loop {
            match log.seek_next_entry(v, out)? {
                None => return Err(Error::NoStartMark { path: log.path.clone() }),
                Some(h) if should_stop(&h, flags::MARK, Some(mark)) => break,
                Some(_) => {}
            }
        }
    } else {
        log.seek_entry(opts.start_entry, v, out)?;
    }
    if opts.fsck.is_some() != opts.check.is_some() {
        return Err(UsageError::FsckWithoutCheck.into());
    }
    let mut stop_flags = 0;
    if opts.next_flush {
        stop_flags |= flags::FLUSH;
    }
    if opts.next_fua {
        stop_flags |= flags::FUA;
    }
    if opts.end_mark.is_some() {
        stop_flags |= flags::MARK;
    }
    let end_mark = opts.end_mark.as_deref();

    if opts.find {
        let mut n = 0u64;
        // replay-log's main returns the -1 of a failed read here: exit status 255.
        let finding = |e| Error::WhileFinding(Box::new(e));
        while let Some(h) = log.seek_next_entry(v, out).map_err(finding)? {
            n += 1;
            if (opts.limit != 0 && n == opts.limit) || should_stop(&h, stop_flags, end_mark) {
                return Ok(Answer::Found {
                    entry: log.cur_entry - 1,
                    next_sector: log.cur_pos / log.sector_size,
                });
            }
        }
        return Err(Error::NotFound { path: log.path.clone() });
    }
    if opts.num_entries {
        return Ok(Answer::NumEntries { entries: log.nr_entries });
    }
    let Some(target) = target.as_mut() else {
        return Ok(Answer::Info {
            version: LOG_VERSION,
            sector_size: log.sector_size,
            entries: log.nr_entries,
        });
    };

    let mut n = 0u64;
    let mut fsck_runs = 0u64;
    let mut stopped = false;
    let mut buf = Vec::new();
    let result = loop {
        if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
            break Err(Error::Interrupted);
        }
        let h = match replay_next_entry(&mut log, target, opts, &mut buf, out) {
            Ok(Some(h)) => h,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        n += 1;
        if let (Some(cmd), Some(check)) = (&opts.fsck, opts.check) {
            let due = match check {
                // `Options` is public, so Every(0) can get here: never due, not a panic.
                Check::Every(k) => n.checked_rem(k) == Some(0),
                Check::Fua => h.flags & flags::FUA != 0,
                Check::Flush => h.flags & flags::FLUSH != 0,
                Check::Discard => h.flags & flags::DISCARD != 0,
            };
            if due {
                fsck_runs += 1;
                if !run_fsck(target, cmd, out) {
                    break Err(Error::Fsck { entry: log.cur_entry - 1 });
                }
            }
        }
        if (opts.limit != 0 && n == opts.limit) || should_stop(&h, stop_flags, end_mark) {
            stopped = true;
            break Ok(());
        }
    };
    // replay-log fsyncs at the end whatever happened, and ignores the result.
    let _ = target.file.sync_all();
    result.map(|()| Answer::Replayed { entries: n, fsck_runs, stopped })
}

/// `run_fsck`: fsync the target, then `sh -c CMD`; true when it exited 0 (or was killed
/// by a signal: `WEXITSTATUS` of that is 0).
fn run_fsck(target: &Target, command: &OsStr, out: &mut dyn Write) -> bool {
    if target.file.sync_all().is_err() {
        return false;
    }
    let _ = out.flush();
    let sh = Cmd::new("/bin/sh", cmd::UNBOUNDED).args(&[OsStr::new("-c"), command]);
    sh.run_attached().is_ok_and(|code| code.unwrap_or(0) == 0)
}

/// `log_replay_next_entry`: `None` at the end of the log.
fn replay_next_entry(
    log: &mut Log,
    target: &mut Target,
    opts: &Options,
    buf: &mut Vec<u8>,
    out: &mut dyn Write,
) -> Result<Option<Header>, Error> {
    if log.cur_entry >= log.nr_entries {
        return Ok(None);
    }
    let h = log.read_header(log.sector_size)?;
    let at = log.cur_pos;
    log.cur_entry += 1;
    // Printed and tested for zero as replay-log computes it (wrapping); used only once
    // checked, below.
    let size = h.nr_sectors.wrapping_mul(log.sector_size);
    log.cur_pos += log.sector_size;
    // log_should_skip: only entries that address sectors, wholly outside the range (with
    // C's wrapping addition).
    let skip = h.nr_sectors != 0
        && (h.sector.wrapping_add(h.nr_sectors) <= opts.start_sector || h.sector > opts.end_sector);
    if opts.verbose > 1 || (opts.verbose > 0 && !skip) {
        let _ = writeln!(
            out,
            "{} {}@{}: sector {}, size {}, flags {:#x}({})",
            if skip { "skipping" } else { "replaying" },
            (log.cur_entry as i32).wrapping_sub(1),
            log.cur_pos / log.sector_size,
            h.sector,
            size,
            h.flags,
            flag_names(h.flags)
        );
    }
    if size == 0 {
        return Ok(Some(h));
    }
    // Offsets wrap as replay-log's do; the kernel refuses the ones that end up negative.
    let offset = h.sector.wrapping_mul(log.sector_size);
    if h.flags & flags::DISCARD != 0 {
        if !opts.no_discard {
            target.discard(offset, size, opts.verbose, out)?;
        }
        return Ok(Some(h));
    }
    if skip {
        log.seek_by(log.cur_pos, size)?;
        return Ok(Some(h));
    }
    // replay-log reads the whole payload before writing any of it: check it is all there
    // first (one read(2) returns at most MAX_RW_COUNT, so a larger payload is a short read
    // for replay-log too), then stream it in bounded pieces.
    let data_at = log.cur_pos;
    if log.len.saturating_sub(data_at) < size || size > MAX_RW_COUNT {
        return Err(log.err(
            at,
            format!(
                "entry {}: Error reading data: {size} bytes claimed, {} remain",
                log.cur_entry - 1,
                log.len.saturating_sub(data_at)
            ),
        ));
    }
    buf.resize(CHUNK.min(size as usize), 0);
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(buf.len() as u64) as usize;
        let got = read_at_most(&log.file, &mut buf[..n], data_at + done)
            .map_err(|e| log.err(data_at + done, format!("Error reading data: {e}")))?;
        if got < n {
            return Err(log.err(data_at + done, "Error reading data: log shrank".to_owned()));
        }
        target
            .file
            .write_all_at(&buf[..n], offset.wrapping_add(done))
            .map_err(|e| target.err(offset.wrapping_add(done), "Error writing data", e))?;
        done += n as u64;
    }
    log.cur_pos += size;
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoull_matches_c() {
        assert_eq!(strtoull(b"12"), Some(12));
        assert_eq!(strtoull(b"0x10"), Some(16));
        assert_eq!(strtoull(b"010"), Some(8));
        assert_eq!(strtoull(b""), Some(0));
        assert_eq!(strtoull(b"  7"), Some(7));
        assert_eq!(strtoull(b"7 "), None);
        assert_eq!(strtoull(b"08"), None);
        assert_eq!(strtoull(b"0x"), None);
        assert_eq!(strtoull(b"abc"), None);
        assert_eq!(strtoull(b"-1"), Some(u64::MAX));
        assert_eq!(strtoull(b"99999999999999999999999"), Some(u64::MAX));
    }

    #[test]
    fn getopt_prefixes_and_errors() {
        let o =
            parse_args("replay-log", ["--log=x", "--num", "-vv", "stray", "--start", "3"]).unwrap();
        assert_eq!(o.log.as_deref(), Some(Path::new("x")));
        assert!(o.num_entries);
        assert!(
            parse_args("r", ["--log", "x", "--n"]).unwrap().next_flush,
            "first of agreeing matches"
        );
        assert_eq!(o.start_entry, 3);
        assert_eq!(o.verbose, 2);
        assert!(matches!(parse_args("r", ["--log", "x", "--f"]), Err(UsageError::Getopt(_))));
        assert!(matches!(parse_args("r", ["--log"]), Err(UsageError::Getopt(_))));
        assert_eq!(parse_args("r", ["--find"]), Err(UsageError::NoLog));
        assert_eq!(parse_args("r", ["--log", "x", "--check", "0"]), Err(UsageError::InvalidEntry));
    }

    /// Corrupt logs (bytes of a valid log flipped, or cut short) give errors, never a
    /// panic, in every mode.
    #[test]
    fn corrupt_logs_never_panic() {
        let dir = tempfile::tempdir().unwrap();
        let ss = 512usize;
        let mut good = Vec::new();
        let sb = |n: u64| {
            let mut b = vec![0u8; ss];
            b[..8].copy_from_slice(&LOG_MAGIC.to_le_bytes());
            b[8..16].copy_from_slice(&LOG_VERSION.to_le_bytes());
            b[16..24].copy_from_slice(&n.to_le_bytes());
            b[24..28].copy_from_slice(&(ss as u32).to_le_bytes());
            b
        };
        let entry = |sector: u64, nr: u64, fl: u64, text: &[u8]| {
            let mut b = vec![0u8; ss];
            for (i, v) in [sector, nr, fl, text.len() as u64].into_iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            b[32..32 + text.len()].copy_from_slice(text);
            b
        };
        good.extend(sb(6));
        good.extend(entry(8, 2, 0, b""));
        good.extend(vec![0xab; 2 * ss]);
        good.extend(entry(0, 0, flags::MARK, b"m"));
        good.extend(entry(0, 0, flags::FLUSH, b""));
        good.extend(entry(16, 4, flags::DISCARD, b""));
        good.extend(entry(24, 1, flags::FUA, b""));
        good.extend(vec![0xcd; ss]);
        good.extend(entry(0, 0, flags::MARK, b"end"));
        let log = dir.path().join("x.log");
        let img = dir.path().join("x.img");
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..400 {
            let mut bytes = good.clone();
            for _ in 0..1 + next() % 4 {
                // Mostly header fields, where lengths and counts live.
                let block = (next() % 6) as usize * ss;
                let at = (block + (next() % 40) as usize).min(bytes.len() - 1);
                bytes[at] = next() as u8;
            }
            if round % 5 == 0 {
                bytes.truncate((next() as usize) % bytes.len());
            }
            std::fs::write(&log, &bytes).unwrap();
            std::fs::write(&img, b"").unwrap();
            let variants: [&[&str]; 5] = [
                &["--num-entries"],
                &["--find", "--end-mark", "end"],
                &["--find", "--start-entry", "3", "-vv"],
                &["--replay", img.to_str().unwrap(), "--no-discard", "--end-sector", "4096", "-vv"],
                &["--replay", img.to_str().unwrap(), "--start-mark", "m", "--limit", "2"],
            ];
            for extra in variants {
                let mut args = vec!["--log", log.to_str().unwrap()];
                args.extend_from_slice(extra);
                let o = parse_args("replay-log", args).unwrap();
                let mut out = Vec::new();
                let outcome = run(&o, TargetRule::AnyUnmounted, None, &mut out);
                if let Err(e) = &outcome.result {
                    assert!(!e.to_string().is_empty());
                    assert_ne!(outcome.exit_status, EXIT_OK);
                }
            }
        }
    }

    /// `bob log --format json` prints an [`Answer`]: its shape is an interface.
    #[test]
    fn answers_serialize_as_documented() {
        let json = |a: Answer| serde_json::to_string(&a).unwrap();
        assert_eq!(
            json(Answer::Found { entry: 9, next_sector: 163 }),
            r#"{"answer":"found","entry":9,"next_sector":163}"#
        );
        assert_eq!(
            json(Answer::NumEntries { entries: 3 }),
            r#"{"answer":"num_entries","entries":3}"#
        );
        assert_eq!(
            json(Answer::Info { version: 1, sector_size: 512, entries: 3 }),
            r#"{"answer":"info","version":1,"sector_size":512,"entries":3}"#
        );
        assert_eq!(
            json(Answer::Replayed { entries: 5, fsck_runs: 1, stopped: true }),
            r#"{"answer":"replayed","entries":5,"fsck_runs":1,"stopped":true}"#
        );
        assert_eq!(Answer::Found { entry: 9, next_sector: 163 }.to_string(), "9@163\n");
        assert_eq!(
            Answer::Info { version: 1, sector_size: 512, entries: 3 }.to_string(),
            "Log version=1, sectorsize=512, entries=3\n"
        );
    }

    #[test]
    fn flag_names_like_replay_log() {
        assert_eq!(flag_names(0), "NONE");
        assert_eq!(flag_names(3), "FLUSH|FUA");
        assert_eq!(flag_names(0x48), "MARK|UNKNOWN.0x40");
    }
}
