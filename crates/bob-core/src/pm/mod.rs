//! The second device: an emulated persistent-memory (PM) region, for designs that keep
//! state in byte-addressable persistent memory (researchfs' Conquest). This machine has no
//! pmem or DAX, so the region is bob's: [`crate::record::pm_recorder::PmRecorder`] implements
//! [`researchfs::PersistentMemory`] (stores, cache-line write-backs, fences) and logs each
//! call in order into a log of its own beside the disk's dm-log-writes log ([`PmTrace`]:
//! `pm.log` and the region's base image `pm-base.img`, next to `base.img`).
//!
//! The two logs are tied by position, not by a device field the dm-log-writes format lacks:
//! every PM entry carries `disk`, the number of entries the disk's log had when it was
//! made, and every mark the disk's log gets (the workload's op begin and end) is copied
//! into the PM log with that number. The disk's log is unchanged, so `replay-log` still
//! reads it.
//!
//! Crash states ([`PmCut`]): the model is x86's with `clwb`/`sfence`, as Chipmunk and
//! Vinter test. At a crash point (a position in the PM log) every line written back before
//! a fence is persistent with its content at the write-back; every other line whose
//! content differs from what is persistent is *pending* and may have persisted (evicted)
//! with its latest content, whole, or torn at the 8-byte atomic unit: a torn line keeps an
//! in-order prefix of its changed 8-byte words. The bound, per crash point, deterministic,
//! at most [`SUBSETS_PER_POINT`] cuts: none of the pending lines; each alone; each
//! in-order prefix (by last store); all but one; each pair among the first [`PAIR_LINES`];
//! then each line torn alone after each of its changed words. Crash points: right before
//! every fence (the most lines pending), at every mark, and at the end.
//!
//! Combined with the disk ([`crate::crash::pm_states::combined`]): every disk state of the usual strategies gets
//! the PM as persisted at its crash time (fenced lines only); every PM cut gets the disk
//! as durable at its crash time (the epochs closed before it, none of the one in flight,
//! `e<k>:-`). So the product is bounded by the sum of the two, not the product, and each
//! combined state is one a crash could leave: the other device at its most conservative.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A cache line, the unit a write-back or an eviction persists.
pub(crate) const LINE: u64 = researchfs::persistent_memory::LINE;
/// The atomic store unit.
pub(crate) const WORD: u64 = researchfs::persistent_memory::WORD;
/// File name of the PM log in a trace directory.
pub(crate) const PM_LOG_FILE: &str = "pm.log";
/// File name of the PM region's base image in a trace directory.
pub(crate) const PM_BASE_FILE: &str = "pm-base.img";
/// The PM log's format line.
const PM_LOG_FORMAT: &str = "bob-pm-log/1";
/// At most this many cuts per crash point.
pub(crate) const SUBSETS_PER_POINT: usize = 32;
/// Pairs of pending lines are taken among the first this many (in store order).
const PAIR_LINES: usize = 6;

/// Errors of the PM device's logs and crash states.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a PM file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A PM log that does not parse or names bytes past the region.
    #[error("{path}: line {line}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A PM cut that does not fit its log.
    #[error("PM cut {cut}: {reason}")]
    Cut {
        /// The cut as given.
        cut: String,
        /// What is wrong.
        reason: String,
    },
}

/// One request the PM region received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum PmEntry {
    /// A store of `data` at `offset`.
    Store {
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
        /// Entries in the disk's log when it was made.
        disk: u64,
    },
    /// A write-back of the lines overlapping `offset..offset + len`.
    Clwb {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        len: u64,
        /// Entries in the disk's log when it was made.
        disk: u64,
    },
    /// A fence.
    Fence {
        /// Entries in the disk's log when it was made.
        disk: u64,
    },
    /// A mark copied from the disk's log (it is that log's entry `disk - 1`).
    Mark {
        /// The mark's text.
        text: String,
        /// Entries in the disk's log once the mark was in it.
        disk: u64,
    },
}

impl PmEntry {
    /// Entries the disk's log had when this one was made.
    pub fn disk(&self) -> u64 {
        match self {
            PmEntry::Store { disk, .. }
            | PmEntry::Clwb { disk, .. }
            | PmEntry::Fence { disk }
            | PmEntry::Mark { disk, .. } => *disk,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    size: u64,
}

/// A recorded PM region: its base image and its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmTrace {
    /// The region when recording started.
    pub base: Vec<u8>,
    /// What it received since, in order.
    pub entries: Vec<PmEntry>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

impl PmTrace {
    /// Writes `pm-base.img` (sparse) and `pm.log` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        let base = dir.join(PM_BASE_FILE);
        let f = std::fs::File::create(&base).map_err(io(&base))?;
        f.set_len(self.base.len() as u64).map_err(io(&base))?;
        use std::os::unix::fs::FileExt;
        for (i, chunk) in self.base.chunks(4096).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                f.write_all_at(chunk, i as u64 * 4096).map_err(io(&base))?;
            }
        }
        let log = dir.join(PM_LOG_FILE);
        let mut w = std::io::BufWriter::new(std::fs::File::create(&log).map_err(io(&log))?);
        let header = Header { format: PM_LOG_FORMAT.into(), size: self.base.len() as u64 };
        let line = |v: serde_json::Result<String>| v.map_err(std::io::Error::other);
        writeln!(w, "{}", line(serde_json::to_string(&header)).map_err(io(&log))?)
            .map_err(io(&log))?;
        for e in &self.entries {
            writeln!(w, "{}", line(serde_json::to_string(e)).map_err(io(&log))?)
                .map_err(io(&log))?;
        }
        w.flush().map_err(io(&log))
    }

    /// Reads the PM trace in `dir`, `None` when there is none (a disk-only recording).
    /// Every entry is checked against the region's size, so that a hostile log fails here
    /// with its line number rather than later.
    pub fn load(dir: &Path) -> Result<Option<PmTrace>, Error> {
        let log = dir.join(PM_LOG_FILE);
        if !log.exists() {
            return Ok(None);
        }
        let parse =
            |line: usize, message: String| Error::Parse { path: log.clone(), line, message };
        let file = std::fs::File::open(&log).map_err(io(&log))?;
        let mut lines = std::io::BufReader::new(file).lines();
        let first =
            lines.next().ok_or_else(|| parse(1, "empty PM log".into()))?.map_err(io(&log))?;
        let header: Header = serde_json::from_str(&first).map_err(|e| parse(1, e.to_string()))?;
        if header.format != PM_LOG_FORMAT {
            return Err(parse(1, format!("format {:?}, expected {PM_LOG_FORMAT}", header.format)));
        }
        let base_path = dir.join(PM_BASE_FILE);
        let meta = std::fs::metadata(&base_path).map_err(io(&base_path))?;
        if meta.len() != header.size {
            return Err(parse(
                1,
                format!("{PM_BASE_FILE} has {} bytes, the log says {}", meta.len(), header.size),
            ));
        }
        let base = std::fs::read(&base_path).map_err(io(&base_path))?;
        let mut entries = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line.map_err(io(&log))?;
            let e: PmEntry =
                serde_json::from_str(&line).map_err(|e| parse(i + 2, e.to_string()))?;
            let (offset, len) = match &e {
                PmEntry::Store { offset, data, .. } => (*offset, data.len() as u64),
                PmEntry::Clwb { offset, len, .. } => (*offset, *len),
                _ => (0, 0),
            };
            if offset.checked_add(len).is_none_or(|end| end > header.size) {
                return Err(parse(i + 2, format!("{offset}+{len} is past the region's end")));
            }
            entries.push(e);
        }
        Ok(Some(PmTrace { base, entries }))
    }

    /// The PM trace beside a base disk image (in the same directory), if there is one.
    pub(crate) fn load_beside(base_image: &Path) -> Result<Option<PmTrace>, Error> {
        match base_image.parent() {
            Some(dir) => PmTrace::load(dir),
            None => Ok(None),
        }
    }

    fn base_line(&self, line: u64) -> [u8; LINE as usize] {
        let mut out = [0u8; LINE as usize];
        let start = (line * LINE) as usize;
        let end = (start + LINE as usize).min(self.base.len());
        if start < end {
            out[..end - start].copy_from_slice(&self.base[start..end]);
        }
        out
    }

    /// The cache-line state after the first `pos` entries.
    fn simulate(&self, pos: usize) -> Lines {
        let mut s = Lines::default();
        for (i, e) in self.entries.iter().take(pos).enumerate() {
            match e {
                PmEntry::Store { offset, data, .. } => {
                    let mut at = *offset;
                    let end = offset + data.len() as u64;
                    while at < end {
                        let line = at / LINE;
                        let n = (LINE - at % LINE).min(end - at);
                        let cur = s.cur.entry(line).or_insert_with(|| self.base_line(line));
                        let from = (at - offset) as usize;
                        let into = (at % LINE) as usize;
                        cur[into..into + n as usize]
                            .copy_from_slice(&data[from..from + n as usize]);
                        s.stored.insert(line, i);
                        at += n;
                    }
                }
                PmEntry::Clwb { offset, len, .. } => {
                    if *len == 0 {
                        continue;
                    }
                    for line in offset / LINE..=(offset + len - 1) / LINE {
                        let content =
                            s.cur.get(&line).copied().unwrap_or_else(|| self.base_line(line));
                        s.written_back.insert(line, content);
                    }
                }
                PmEntry::Fence { .. } => {
                    let wb = std::mem::take(&mut s.written_back);
                    s.durable.extend(wb);
                }
                PmEntry::Mark { .. } => {}
            }
        }
        s
    }

    /// Lines that may yet persist at crash point `pos`, in store order, each with its
    /// latest content and its changed word indices.
    fn pending(&self, s: &Lines) -> Vec<Pending> {
        let mut out: Vec<Pending> = s
            .cur
            .iter()
            .filter_map(|(&line, cur)| {
                let durable = s.durable.get(&line).copied().unwrap_or_else(|| self.base_line(line));
                let words: Vec<u8> = (0..(LINE / WORD) as u8)
                    .filter(|&w| {
                        let r = (w as usize * 8)..(w as usize * 8 + 8);
                        cur[r.clone()] != durable[r]
                    })
                    .collect();
                (!words.is_empty()).then(|| Pending {
                    line,
                    content: *cur,
                    words,
                    order: s.stored.get(&line).copied().unwrap_or(0),
                })
            })
            .collect();
        out.sort_by_key(|p| (p.order, p.line));
        out
    }

    /// The crash points: right before each fence, at each mark, and at the end.
    pub(crate) fn crash_points(&self) -> Vec<usize> {
        let mut points: BTreeSet<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, PmEntry::Fence { .. } | PmEntry::Mark { .. }))
            .map(|(i, _)| i)
            .collect();
        points.insert(self.entries.len());
        points.into_iter().collect()
    }

    /// The cuts of crash point `pos`, within the bound the module documentation gives.
    pub(crate) fn cuts_at(&self, pos: usize) -> Vec<PmCut> {
        let s = self.simulate(pos);
        let pending = self.pending(&s);
        let lines: Vec<u64> = pending.iter().map(|p| p.line).collect();
        let n = lines.len();
        let mut seen: BTreeSet<(Vec<u64>, Torn)> = BTreeSet::new();
        let mut out = Vec::new();
        let mut push = |mut set: Vec<u64>, torn: Torn| {
            if out.len() >= SUBSETS_PER_POINT {
                return;
            }
            set.sort_unstable();
            if seen.insert((set.clone(), torn)) {
                out.push(PmCut { pos: pos as u64, lines: set, torn });
            }
        };
        push(Vec::new(), None);
        for &l in &lines {
            push(vec![l], None);
        }
        for k in 2..=n {
            push(lines[..k].to_vec(), None);
        }
        for skip in 0..n {
            push(
                lines.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, &l)| l).collect(),
                None,
            );
        }
        let m = n.min(PAIR_LINES);
        for i in 0..m {
            for j in i + 1..m {
                push(vec![lines[i], lines[j]], None);
            }
        }
        for p in &pending {
            for k in 1..p.words.len() {
                push(Vec::new(), Some((p.line, k as u32)));
            }
        }
        out
    }

    /// Checks that `cut` is one this trace can produce: its position in the log, each
    /// line pending there, a torn line torn inside its changed words.
    pub fn validate(&self, cut: &PmCut) -> Result<(), Error> {
        let bad = |reason: String| Error::Cut { cut: cut.to_string(), reason };
        let pos = usize::try_from(cut.pos).unwrap_or(usize::MAX);
        if pos > self.entries.len() {
            return Err(bad(format!("the PM log has {} entries", self.entries.len())));
        }
        let pending = self.pending(&self.simulate(pos));
        let find = |line: u64| pending.iter().find(|p| p.line == line);
        for &l in &cut.lines {
            if find(l).is_none() {
                return Err(bad(format!("line {l} is not pending at position {pos}")));
            }
        }
        if let Some((l, k)) = cut.torn {
            let p = find(l).ok_or_else(|| bad(format!("torn line {l} is not pending")))?;
            if k == 0 || k as usize >= p.words.len() {
                return Err(bad(format!(
                    "line {l} has {} changed words; a tear keeps 1 to {}",
                    p.words.len(),
                    p.words.len().saturating_sub(1)
                )));
            }
            if cut.lines.contains(&l) {
                return Err(bad(format!("line {l} is both whole and torn")));
            }
        }
        Ok(())
    }

    /// The persisted lines of `cut` over the base: (line, content), sorted.
    fn cut_lines(&self, cut: &PmCut) -> BTreeMap<u64, [u8; LINE as usize]> {
        let pos = (cut.pos as usize).min(self.entries.len());
        let s = self.simulate(pos);
        let pending = self.pending(&s);
        let mut out = s.durable.clone();
        for p in &pending {
            if cut.lines.contains(&p.line) {
                out.insert(p.line, p.content);
            } else if let Some((l, k)) = cut.torn.filter(|(l, _)| *l == p.line) {
                let _ = l;
                let mut content =
                    out.get(&p.line).copied().unwrap_or_else(|| self.base_line(p.line));
                for &w in p.words.iter().take(k as usize) {
                    let r = (w as usize * 8)..(w as usize * 8 + 8);
                    content[r.clone()].copy_from_slice(&p.content[r]);
                }
                out.insert(p.line, content);
            }
        }
        out
    }

    /// The region as `cut` leaves it.
    pub fn image(&self, cut: &PmCut) -> Vec<u8> {
        let mut img = self.base.clone();
        for (line, content) in self.cut_lines(cut) {
            let start = (line * LINE) as usize;
            let end = (start + LINE as usize).min(img.len());
            if start < end {
                img[start..end].copy_from_slice(&content[..end - start]);
            }
        }
        img
    }

    /// A digest of the region `cut` leaves (of its lines over the base, so that equal
    /// images digest equal without hashing the region).
    pub fn digest(&self, cut: &PmCut) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        for (line, content) in self.cut_lines(cut) {
            if content != self.base_line(line) {
                h.update(&line.to_le_bytes());
                h.update(&content);
            }
        }
        *h.finalize().as_bytes()
    }

    /// The PM position of a crash right before the disk's log entry `disk_entry` is
    /// issued: every PM entry made before it.
    pub(crate) fn position_before_disk(&self, disk_entry: u64) -> u64 {
        self.entries.iter().take_while(|e| e.disk() <= disk_entry).count() as u64
    }
}

/// A torn line: (line, changed words persisted).
type Torn = Option<(u64, u32)>;

#[derive(Default)]
struct Lines {
    /// Latest content of every line stored to.
    cur: BTreeMap<u64, [u8; LINE as usize]>,
    /// Persistent content of lines fenced (others: the base).
    durable: BTreeMap<u64, [u8; LINE as usize]>,
    /// Written back, not yet fenced: the content at the write-back.
    written_back: BTreeMap<u64, [u8; LINE as usize]>,
    /// Entry index of each line's last store.
    stored: BTreeMap<u64, usize>,
}

struct Pending {
    line: u64,
    content: [u8; LINE as usize],
    /// Indices (0..8) of the 8-byte words that differ from the persistent content.
    words: Vec<u8>,
    order: usize,
}

/// The PM half of a crash state: a crash point in the PM log and the pending lines that
/// persisted. Printed `p<pos>`, `p<pos>:<line>,<line>` or with one torn line
/// `p<pos>:<line>,<line>[<words>]` (its first `<words>` changed 8-byte words persisted).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PmCut {
    /// Entries of the PM log before the crash.
    pub pos: u64,
    /// Pending lines persisted whole (line numbers: byte offset / 64), sorted.
    pub lines: Vec<u64>,
    /// One pending line torn: (line, changed words persisted in order).
    pub torn: Option<(u64, u32)>,
}

impl fmt::Display for PmCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.pos)?;
        let mut items: Vec<String> = self.lines.iter().map(u64::to_string).collect();
        if let Some((l, k)) = self.torn {
            items.push(format!("{l}[{k}]"));
        }
        if !items.is_empty() {
            write!(f, ":{}", items.join(","))?;
        }
        Ok(())
    }
}

impl FromStr for PmCut {
    type Err = String;
    fn from_str(s: &str) -> Result<PmCut, String> {
        let rest = s.strip_prefix('p').ok_or("a PM cut starts with `p`")?;
        let (pos, list) = match rest.split_once(':') {
            Some((p, l)) => (p, Some(l)),
            None => (rest, None),
        };
        let num = |t: &str| -> Result<u64, String> {
            if t.is_empty()
                || (t.len() > 1 && t.starts_with('0'))
                || !t.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(format!("`{t}` is not a number"));
            }
            t.parse().map_err(|e| format!("`{t}`: {e}"))
        };
        let pos = num(pos)?;
        let mut lines = Vec::new();
        let mut torn = None;
        for item in list.map(|l| l.split(',').collect::<Vec<_>>()).unwrap_or_default() {
            if let Some((l, k)) = item.strip_suffix(']').and_then(|i| i.split_once('[')) {
                if torn.is_some() {
                    return Err("at most one torn line".into());
                }
                let k = u32::try_from(num(k)?).map_err(|e| e.to_string())?;
                torn = Some((num(l)?, k));
            } else {
                let l = num(item)?;
                if lines.last().is_some_and(|&p| p >= l) {
                    return Err("lines must be strictly increasing".into());
                }
                lines.push(l);
            }
        }
        Ok(PmCut { pos, lines, torn })
    }
}

#[cfg(test)]
mod tests;
