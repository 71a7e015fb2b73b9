//! Valor's transactions (`valor`, `valor-nolog-order`): begin, commit (durable or not),
//! abort, over a write-ahead undo log in its own region of the image.
//!
//! The paper keeps its log on a separate "log partition" and relies on *simple write
//! ordering*: a page's log record reaches the disk before the page does. bob records one
//! device per researchfs file system (one dm-log-writes-style trace), so the log is a
//! region of the image instead: the `VALOR_LOG_BLOCKS` blocks after the file system's own
//! (the superblock's `blocks` ends before it), like the journal designs' journal. The
//! ordering the paper needs is then a flush on that one device.
//!
//! Like the paper's evaluated prototype, only the *page-value log* exists: a write inside
//! a transaction must overwrite pages the file already has (no hole, no growth); other
//! operations run untransacted. One transaction is open at a time per file system (the
//! mount's, whichever process writes); the paper's per-process transactions and its
//! locking (isolation) are out of scope: bob tests crash atomicity, not isolation.
//!
//! The core writes through (no page cache), so where the paper's `pdflush` writes a
//! batch of log records before the dirty pages, here each transactional `write` does, in
//! this order: its undo records (the old page images) in one request, a **flush**, then
//! the new pages in place. Commit: a **flush** (the transaction's data is on the disk), then
//! the commit record; a durable commit (the paper's `Transaction Sync`) flushes once more.
//! Since the commit record follows durable data, the log needs no redo images (the
//! paper's transition pages carry redo for its No-Force cache; a write-through core has
//! nothing to redo). Abort: the undo images are written back in place, a flush, then an
//! abort record. Recovery at mount rolls back every transaction of the log's current
//! epoch that has neither a commit nor an abort record, in reverse LSN order, flushes, and
//! starts a new epoch. `valor-nolog-order` omits the flush between the undo records and
//! the data, so a crash can keep an overwrite whose undo record never reached the disk:
//! recovery cannot roll that page back, and the transaction is left half done.
//!
//! Layout of the region: slot 0 the log superblock (magic, epoch); then records laid end
//! to end, each tagged with the epoch (a record of an older epoch is stale): an update
//! record is a header block (magic, epoch, kind, transaction, LSN, target block, CRC-32
//! over the header and the undo image) followed by the undo image; commit and abort
//! records are one header block (CRC over the header, which sits in the first sector so
//! a torn write cannot half-write it). The log starts a new epoch (a flush, then the log
//! superblock) at `begin` once more than half of it is used.

use crate::design::ValorMode;
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::{u64_at, BLOCK};
use crate::{Error, Result};

use super::crc32;

/// Blocks of the undo-log region (log superblock included): 4 MiB, room for a
/// transaction of about 500 pages.
pub const VALOR_LOG_BLOCKS: u64 = 1024;

const LSB_MAGIC: u64 = u64::from_le_bytes(*b"RFSVLOG1");
const REC_MAGIC: u64 = u64::from_le_bytes(*b"RFSVREC1");
/// Bytes of a record header the CRC covers (the CRC follows them).
const HEADER: usize = 48;

const UPDATE: u64 = 1;
const COMMIT: u64 = 2;
const ABORT: u64 = 3;

/// What the transaction log did since mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ValorStats {
    /// Transactions committed.
    pub commits: u64,
    /// Transactions aborted.
    pub aborts: u64,
    /// Undo records written.
    pub records: u64,
    /// Flushes the log issued.
    pub flushes: u64,
    /// Transactions rolled back by recovery at mount.
    pub rolled_back: u64,
}

fn io(block: u64) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { block, source }
}

fn header(epoch: u64, kind: u64, txn: u64, lsn: u64, target: u64, undo: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    for (i, v) in [REC_MAGIC, epoch, kind, txn, lsn, target].into_iter().enumerate() {
        b[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    let crc = crc32(crc32(0, &b[..HEADER]), undo);
    b[HEADER..HEADER + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

fn lsb(epoch: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[0..8].copy_from_slice(&LSB_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&epoch.to_le_bytes());
    b
}

/// Writes an empty log at `start` (mkfs).
pub(super) fn format(dev: &dyn BlockDevice, start: u64) -> Result<()> {
    dev.write_at(start * BLOCK as u64, &lsb(1), WriteInfo::new(Role::Journal)).map_err(io(start))
}

/// The open transaction.
struct Open {
    id: u64,
    /// (block, old image) of every overwrite, in order: what abort writes back.
    undo: Vec<(u64, Vec<u8>)>,
}

/// The log's in-memory state.
pub(super) struct Log {
    mode: ValorMode,
    /// First block of the region.
    start: u64,
    epoch: u64,
    /// Next free slot (relative; 0 is the log superblock).
    tail: u64,
    lsn: u64,
    next_txn: u64,
    open: Option<Open>,
    pub(super) stats: ValorStats,
}

/// One valid record found by recovery.
struct Found {
    kind: u64,
    txn: u64,
    lsn: u64,
    target: u64,
    undo: Vec<u8>,
}

/// Recovery at mount: reads the log at `start`, rolls back every transaction of the
/// current epoch without a commit or abort record (undo images applied in reverse LSN
/// order, only to blocks of the file system's data region `data`), flushes, and starts a
/// new epoch. Returns the log, ready for transactions.
pub(super) fn recover(
    design: crate::Design,
    dev: &dyn BlockDevice,
    start: u64,
    data: std::ops::Range<u64>,
    mode: ValorMode,
) -> Result<Log> {
    let mut region = vec![0u8; VALOR_LOG_BLOCKS as usize * BLOCK];
    dev.read_at(start * BLOCK as u64, &mut region).map_err(io(start))?;
    let slot = |i: u64| &region[i as usize * BLOCK..(i as usize + 1) * BLOCK];
    if u64_at(slot(0), 0) != LSB_MAGIC {
        return Err(Error::BadImage { design, reason: "no Valor log superblock".into() });
    }
    let epoch = u64_at(slot(0), 8);
    let mut found = Vec::new();
    // Every slot is examined (not only up to the first bad one): a record is valid on
    // its own (epoch, CRC), and positions only grow within an epoch.
    let mut i = 1;
    while i < VALOR_LOG_BLOCKS {
        let h = slot(i);
        if u64_at(h, 0) != REC_MAGIC || u64_at(h, 8) != epoch {
            i += 1;
            continue;
        }
        let kind = u64_at(h, 16);
        let crc = u32::from_le_bytes([h[HEADER], h[HEADER + 1], h[HEADER + 2], h[HEADER + 3]]);
        let undo: &[u8] =
            if kind == UPDATE && i + 1 < VALOR_LOG_BLOCKS { slot(i + 1) } else { &[] };
        if crc32(crc32(0, &h[..HEADER]), undo) == crc && (kind != UPDATE || !undo.is_empty()) {
            found.push(Found {
                kind,
                txn: u64_at(h, 24),
                lsn: u64_at(h, 32),
                target: u64_at(h, 40),
                undo: undo.to_vec(),
            });
            i += if kind == UPDATE { 2 } else { 1 };
        } else {
            i += 1;
        }
    }
    let resolved: std::collections::HashSet<u64> =
        found.iter().filter(|f| f.kind == COMMIT || f.kind == ABORT).map(|f| f.txn).collect();
    let mut undo: Vec<&Found> = found
        .iter()
        .filter(|f| f.kind == UPDATE && !resolved.contains(&f.txn) && data.contains(&f.target))
        .collect();
    undo.sort_by_key(|f| std::cmp::Reverse(f.lsn));
    let mut rolled: Vec<u64> = undo.iter().map(|f| f.txn).collect();
    rolled.sort_unstable();
    rolled.dedup();
    let next_txn = found.iter().map(|f| f.txn).max().unwrap_or(0) + 1;
    let mut stats = ValorStats { rolled_back: rolled.len() as u64, ..ValorStats::default() };
    for f in &undo {
        dev.write_at(f.target * BLOCK as u64, &f.undo, WriteInfo::new(Role::Data))
            .map_err(io(f.target))?;
    }
    if !undo.is_empty() {
        // The rollback is durable before the log forgets the transactions.
        dev.flush().map_err(io(0))?;
        stats.flushes += 1;
    }
    // A new epoch: the old records are stale from here on. No flush is needed: the first
    // update record's flush makes this durable before any data it protects is written.
    dev.write_at(start * BLOCK as u64, &lsb(epoch + 1), WriteInfo::new(Role::Journal))
        .map_err(io(start))?;
    Ok(Log { mode, start, epoch: epoch + 1, tail: 1, lsn: 1, next_txn, open: None, stats })
}

impl Log {
    fn flush(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        self.stats.flushes += 1;
        dev.flush().map_err(io(0))
    }

    fn txn_err(what: &str) -> Error {
        Error::Transaction(what.to_string())
    }

    /// Whether a transaction is open.
    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Begins a transaction (starting a new epoch first when the log is half used).
    pub(super) fn begin(&mut self, dev: &dyn BlockDevice) -> Result<u64> {
        if self.open.is_some() {
            return Err(Self::txn_err("a transaction is already open"));
        }
        if self.tail > VALOR_LOG_BLOCKS / 2 {
            // Every resolved transaction's records are durable before they are dropped.
            self.flush(dev)?;
            self.epoch += 1;
            dev.write_at(
                self.start * BLOCK as u64,
                &lsb(self.epoch),
                WriteInfo::new(Role::Journal),
            )
            .map_err(io(self.start))?;
            self.tail = 1;
        }
        let id = self.next_txn;
        self.next_txn += 1;
        self.open = Some(Open { id, undo: Vec::new() });
        Ok(id)
    }

    /// Logs the old images of `pages` (block, old image) before they are overwritten:
    /// the records in one request, then (unless the negative control) a flush.
    pub(super) fn log_undo(
        &mut self,
        dev: &dyn BlockDevice,
        pages: &[(u64, Vec<u8>)],
    ) -> Result<()> {
        let Some(open) = self.open.as_mut() else {
            return Err(Self::txn_err("no transaction is open"));
        };
        let need = 2 * pages.len() as u64;
        // One slot stays free for the commit or abort record.
        if self.tail + need + 1 > VALOR_LOG_BLOCKS {
            return Err(Error::NoSpace);
        }
        let mut buf = Vec::with_capacity(need as usize * BLOCK);
        for (b, old) in pages {
            buf.extend_from_slice(&header(self.epoch, UPDATE, open.id, self.lsn, *b, old));
            buf.extend_from_slice(old);
            self.lsn += 1;
            open.undo.push((*b, old.clone()));
        }
        let at = self.start + self.tail;
        dev.write_at(at * BLOCK as u64, &buf, WriteInfo::new(Role::Journal)).map_err(io(at))?;
        self.tail += need;
        self.stats.records += pages.len() as u64;
        if self.mode.log_before_data {
            self.flush(dev)?;
        }
        Ok(())
    }

    fn resolve(&mut self, dev: &dyn BlockDevice, kind: u64, id: u64) -> Result<()> {
        let rec = header(self.epoch, kind, id, self.lsn, 0, &[]);
        self.lsn += 1;
        let at = self.start + self.tail;
        dev.write_at(at * BLOCK as u64, &rec, WriteInfo::new(Role::Journal)).map_err(io(at))?;
        self.tail += 1;
        Ok(())
    }

    /// Commits the open transaction: a flush (its data is on the disk), the commit
    /// record, and with `durable` a flush after it.
    pub(super) fn commit(&mut self, dev: &dyn BlockDevice, durable: bool) -> Result<()> {
        let Some(open) = self.open.take() else {
            return Err(Self::txn_err("no transaction is open"));
        };
        if !open.undo.is_empty() {
            self.flush(dev)?;
            self.resolve(dev, COMMIT, open.id)?;
            if durable {
                self.flush(dev)?;
            }
        } else if durable {
            // Nothing written: durable means what came before is.
            self.flush(dev)?;
        }
        self.stats.commits += 1;
        Ok(())
    }

    /// Aborts the open transaction: its old images back in place (newest first), a
    /// flush, then the abort record.
    pub(super) fn abort(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        let Some(open) = self.open.take() else {
            return Err(Self::txn_err("no transaction is open"));
        };
        if !open.undo.is_empty() {
            for (b, old) in open.undo.iter().rev() {
                dev.write_at(b * BLOCK as u64, old, WriteInfo::new(Role::Data)).map_err(io(*b))?;
            }
            self.flush(dev)?;
            self.resolve(dev, ABORT, open.id)?;
        }
        self.stats.aborts += 1;
        Ok(())
    }
}

impl super::Core {
    /// Whether a Valor transaction is open (then `write` goes through [`Core::txn_write`]).
    pub(super) fn txn_open(&self) -> bool {
        self.valor.as_ref().is_some_and(Log::is_open)
    }

    /// A write inside the open transaction: every page it touches must exist (no hole,
    /// no growth: the page log has no record for an allocation); their old images are
    /// logged, then the new pages written in place. The inode is not rewritten (its
    /// mtime stays), so nothing but logged pages changes. `inode` is file `ino`, already
    /// checked by [`Core::write`], and `end` the write's end (`data` is not empty).
    pub(super) fn txn_write(
        &mut self,
        ino: u32,
        inode: &super::Inode,
        off: u64,
        end: u64,
        data: &[u8],
    ) -> Result<usize> {
        if end > inode.size {
            return Err(Error::Transaction(format!(
                "a transactional write must overwrite: {end} is past the size {}",
                inode.size
            )));
        }
        let (pl, hdr) = (self.pl() as u64, self.hdr());
        let mut tx = super::Tx::default();
        let mut pages: Vec<(u64, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut pos = off;
        while pos < end {
            let l = pos / pl;
            let inb = (pos % pl) as usize;
            let n = ((pl - pos % pl).min(end - pos)) as usize;
            let b = self.bmap(ino, inode, l, &mut tx)?;
            if b == 0 {
                return Err(Error::Transaction(format!(
                    "a transactional write must overwrite: page {l} is a hole"
                )));
            }
            let old = self.read_data(ino, inode.generation, l, b)?;
            let mut new = old.clone();
            let src = (pos - off) as usize;
            new[hdr + inb..hdr + inb + n].copy_from_slice(&data[src..src + n]);
            pages.push((u64::from(b), old, new));
            pos += n as u64;
        }
        let undo: Vec<(u64, Vec<u8>)> = pages.iter().map(|(b, old, _)| (*b, old.clone())).collect();
        let dev = self.dev.clone();
        let log = self.valor.as_mut().ok_or(Error::NotSupported)?;
        log.log_undo(dev.as_ref(), &undo)?;
        // The new pages, contiguous runs in one request each.
        let mut i = 0;
        while i < pages.len() {
            let start = pages[i].0;
            let mut bytes = pages[i].2.clone();
            let mut j = i + 1;
            while j < pages.len() && pages[j].0 == start + (j - i) as u64 {
                bytes.extend_from_slice(&pages[j].2);
                j += 1;
            }
            self.write_block(start, &bytes, Role::Data)?;
            i = j;
        }
        Ok(data.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::device::{MemDevice, RecordingDevice, Request};
    use crate::layout::{BLOCK, ROOT};
    use crate::{mkfs, BlockDevice, Design, Error, Fs, Options};

    const PAGES: usize = 4;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed)).collect()
    }

    /// A fresh image with files `a` and `b` of `PAGES` pages (seeds 1 and 2), cleanly
    /// unmounted.
    fn setup(design: Design) -> Arc<MemDevice> {
        let dev = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, dev.as_ref(), dev.size()).unwrap();
        let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
        for (name, seed) in [("a", 1), ("b", 2)] {
            let f = fs.create(ROOT, name).unwrap();
            fs.write(f, 0, &pattern(PAGES * BLOCK, seed)).unwrap();
        }
        fs.shutdown().unwrap();
        dev
    }

    fn contents(fs: &Fs, name: &str) -> Vec<u8> {
        fs.read(fs.resolve(name).unwrap(), 0, PAGES * BLOCK).unwrap()
    }

    /// `old` with pages [from, to) replaced by `seed`'s pattern.
    fn with_pages(old: &[u8], from: usize, to: usize, seed: u8) -> Vec<u8> {
        let mut v = old.to_vec();
        v[from * BLOCK..to * BLOCK].copy_from_slice(&pattern((to - from) * BLOCK, seed));
        v
    }

    #[test]
    fn abort_writes_the_old_pages_back_and_recovery_rolls_back_an_unfinished_transaction() {
        let dev = setup(Design::Valor);
        let (a0, b0) = (pattern(PAGES * BLOCK, 1), pattern(PAGES * BLOCK, 2));
        let fs = Fs::open(Design::Valor, dev.clone(), Options::default()).unwrap();
        let (a, b) = (fs.resolve("a").unwrap(), fs.resolve("b").unwrap());
        fs.txn_begin().unwrap();
        fs.write(a, 0, &pattern(2 * BLOCK, 10)).unwrap();
        fs.write(b, BLOCK as u64, &pattern(BLOCK, 11)).unwrap();
        fs.txn_commit(true).unwrap();
        let (a1, b1) = (with_pages(&a0, 0, 2, 10), with_pages(&b0, 1, 2, 11));
        assert_eq!((contents(&fs, "a"), contents(&fs, "b")), (a1.clone(), b1.clone()));
        // Abort: the same page twice, then both undone.
        fs.txn_begin().unwrap();
        fs.write(a, 0, &pattern(BLOCK, 20)).unwrap();
        fs.write(a, 0, &pattern(BLOCK, 21)).unwrap();
        fs.txn_abort().unwrap();
        assert_eq!(contents(&fs, "a"), a1);
        // Calls out of turn, and writes the page log cannot undo.
        assert!(matches!(fs.txn_commit(false), Err(Error::Transaction(_))));
        fs.txn_begin().unwrap();
        assert!(matches!(fs.txn_begin(), Err(Error::Transaction(_))));
        let grow = fs.write(a, (PAGES * BLOCK) as u64, b"past the end");
        assert!(matches!(grow, Err(Error::Transaction(_))), "{grow:?}");
        // Unfinished at the crash: every page it wrote is rolled back at mount.
        fs.write(a, BLOCK as u64, &pattern(3 * BLOCK, 30)).unwrap();
        fs.write(b, 0, &pattern(BLOCK, 31)).unwrap();
        fs.crash();
        let fs = Fs::open(Design::Valor, dev.clone(), Options::default()).unwrap();
        assert_eq!(fs.valor_stats().unwrap().rolled_back, 1);
        assert_eq!((contents(&fs, "a"), contents(&fs, "b")), (a1, b1));
        fs.shutdown().unwrap();
        let fs = Fs::open(Design::Valor, dev.clone(), Options::default()).unwrap();
        assert_eq!(fs.valor_stats().unwrap().rolled_back, 0, "the new epoch forgot it");
        fs.shutdown().unwrap();
        assert!(crate::fsck(Design::Valor, dev.as_ref()).unwrap().problems.is_empty());
        let (_, plain) = {
            let d = Arc::new(MemDevice::new(8 << 20));
            mkfs(Design::Ordered, d.as_ref(), d.size()).unwrap();
            let fs = Fs::open(Design::Ordered, d.clone(), Options::default()).unwrap();
            (d, fs)
        };
        assert!(matches!(plain.txn_begin(), Err(Error::NotSupported)));
    }

    /// The base image, and the log of: T1 (pages 0-1 of `a` and `b`, committed
    /// non-durably), then T2 (pages 2-3 of both), unfinished at the crash.
    fn record(design: Design) -> (Vec<u8>, Vec<Request>) {
        let mem = setup(design);
        let base = mem.snapshot();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        let (a, b) = (fs.resolve("a").unwrap(), fs.resolve("b").unwrap());
        fs.txn_begin().unwrap();
        fs.write(a, 0, &pattern(2 * BLOCK, 10)).unwrap();
        fs.write(b, 0, &pattern(2 * BLOCK, 11)).unwrap();
        fs.txn_commit(false).unwrap();
        fs.txn_begin().unwrap();
        fs.write(a, 2 * BLOCK as u64, &pattern(2 * BLOCK, 20)).unwrap();
        fs.write(b, 2 * BLOCK as u64, &pattern(2 * BLOCK, 21)).unwrap();
        fs.crash();
        (base, rec.log())
    }

    /// After recovery: `Some(true)` if T1 is there whole, `Some(false)` if nothing of it
    /// is, and in both cases nothing of T2; `None` for anything else.
    fn outcome(design: Design, dev: &Arc<MemDevice>) -> Option<bool> {
        let fs = Fs::open(design, dev.clone(), Options::default()).ok()?;
        let (a0, b0) = (pattern(PAGES * BLOCK, 1), pattern(PAGES * BLOCK, 2));
        let got = (contents(&fs, "a"), contents(&fs, "b"));
        let t1 = (with_pages(&a0, 0, 2, 10), with_pages(&b0, 0, 2, 11));
        fs.shutdown().ok()?;
        if got == t1 {
            Some(true)
        } else if got == (a0, b0) {
            Some(false)
        } else {
            None
        }
    }

    /// Every crash state of the log of one kind: each prefix, and each prefix less one
    /// write issued after its last flush (the disk's volatile cache lost just that one).
    fn crash_states(base: &[u8], log: &[Request]) -> Vec<(String, Arc<MemDevice>)> {
        let image = |keep: &dyn Fn(usize) -> bool| {
            let dev = Arc::new(MemDevice::from_bytes(base.to_vec()));
            for (i, r) in log.iter().enumerate() {
                if let (true, Request::Write { offset, info, data }) = (keep(i), r) {
                    dev.write_at(*offset, data, *info).unwrap();
                }
            }
            dev
        };
        let mut out = Vec::new();
        for cut in 0..=log.len() {
            out.push((format!("prefix {cut}"), image(&|i| i < cut)));
            let flushed =
                log[..cut].iter().rposition(|r| *r == Request::Flush).map_or(0, |f| f + 1);
            for (lost, r) in log.iter().enumerate().take(cut).skip(flushed) {
                if matches!(r, Request::Write { .. }) {
                    out.push((
                        format!("prefix {cut} less {lost}"),
                        image(&|i| i < cut && i != lost),
                    ));
                }
            }
        }
        out
    }

    #[test]
    fn valor_recovers_every_crash_state_to_all_or_nothing_and_nolog_order_does_not() {
        let (base, log) = record(Design::Valor);
        // The ordering itself: every data write follows a flush that follows its records.
        for (i, r) in log.iter().enumerate() {
            if let Request::Write { info, .. } = r {
                if info.role == crate::Role::Data {
                    let prev = log[..i].iter().rev().find(|r| !matches!(r, Request::Write { info, .. } if info.role == crate::Role::Data));
                    assert_eq!(prev, Some(&Request::Flush), "data write {i} not behind a flush");
                }
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (what, dev) in crash_states(&base, &log) {
            let got = outcome(Design::Valor, &dev);
            assert!(got.is_some(), "valor: {what} recovers to a half transaction");
            seen.insert(got.unwrap());
        }
        assert_eq!(seen, [false, true].into(), "both outcomes of T1 occur");

        let (base, log) = record(Design::ValorNologOrder);
        let bad: Vec<String> = crash_states(&base, &log)
            .into_iter()
            .filter(|(_, dev)| outcome(Design::ValorNologOrder, dev).is_none())
            .map(|(what, _)| what)
            .collect();
        assert!(!bad.is_empty(), "valor-nolog-order: every crash state was all or nothing");
    }
}
