//! The journal of the journaling designs (`journal-flush`, `optfs`, `optfs-nocsum`): a
//! block-level write-ahead log under the core.
//!
//! The core keeps writing through [`Core::write_block`]; for a journaling design those
//! writes land in the *running transaction* instead of the device. Metadata blocks
//! (superblock, bitmaps, inode table, directory and indirect blocks) are journaled; file
//! data is written in place at commit (ordered mode), except that OptFS journals an
//! overwrite of a block not allocated in the running transaction (selective data
//! journaling, thesis §6.2.3). A transaction ends at osync, dsync (fsync), unmount, or
//! when it grows past a quarter of the journal; ending it writes, in this order: the
//! in-place data, a descriptor block, the journaled blocks, a commit block.
//!
//! What differs between the designs ([`JournalMode`]):
//! * `journal-flush` (ext4-style pessimistic journaling): a flush before the commit block
//!   and one after it; no checksums; checkpoint (in-place metadata) right after the
//!   second flush.
//! * `optfs` (optimistic journaling, §6.2-6.3): no flush; the commit block holds a CRC32
//!   over the descriptor and journaled blocks (metadata transactional checksum) and the
//!   descriptor a CRC32 per in-place data block (data transactional checksums);
//!   checkpoint only once the disk's durability notifications cover the commit block,
//!   in transaction order (delayed checkpointing, in-order release); a freed block is
//!   reused only once the freeing transaction is durable (reuse after notification).
//!   Recovery replays the longest prefix of transactions whose checksums verify.
//! * `optfs-nocsum`: optfs without any checksum (the negative control): recovery trusts
//!   any commit block, so a commit that reached the disk before its transaction did
//!   replays garbage.
//!
//! Layout: the journal is the `JOURNAL_BLOCKS` blocks after the file system's own (the
//! superblock's `blocks` ends before it): a journal superblock (magic, the sequence number
//! and position of the first transaction to replay), then transactions laid end to end.
//! When the next transaction does not fit, the journal is emptied with flushes (the
//! thesis' prototype also falls back to a flush when its journal runs out of space):
//! flush, checkpoint everything, flush, point the journal superblock at its start.
//! Blocks freed in a transaction are revoked in its descriptor, so that recovery does not
//! replay an older copy of a block since reused for file data (jbd2's revoke records).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use crate::design::JournalMode;
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::{u32_at, u64_at, BLOCK};
use crate::{Error, Result};

/// Blocks of the journal region (journal superblock included): 4 MiB.
pub const JOURNAL_BLOCKS: u64 = 1024;

const JSB_MAGIC: u64 = u64::from_le_bytes(*b"RFSJRNL1");
const DESC_MAGIC: u64 = u64::from_le_bytes(*b"RFSJDESC");
const COMMIT_MAGIC: u64 = u64::from_le_bytes(*b"RFSJCMIT");
/// Descriptor header: magic, seq, counts of journaled blocks, data tags and revokes,
/// and of descriptor blocks (the tags continue in the blocks after the first).
const DESC_HEADER: usize = 32;

/// CRC-32 (IEEE 802.3, reflected, as jbd2's and OptFS' crc32), table-driven.
pub fn crc32(mut crc: u32, data: &[u8]) -> u32 {
    const fn table() -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    }
    const TABLE: [u32; 256] = table();
    crc = !crc;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

fn role_code(r: Role) -> u32 {
    Role::ALL.iter().position(|&x| x == r).unwrap_or(Role::ALL.len() - 1) as u32
}

fn role_of(code: u32) -> Role {
    Role::ALL.get(code as usize).copied().unwrap_or(Role::Other)
}

fn io(block: u64) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { block, source }
}

fn read(dev: &dyn BlockDevice, b: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; BLOCK];
    dev.read_at(b * BLOCK as u64, &mut buf).map_err(io(b))?;
    Ok(buf)
}

fn write(dev: &dyn BlockDevice, b: u64, data: &[u8], role: Role) -> Result<()> {
    dev.write_at(b * BLOCK as u64, data, WriteInfo::new(role)).map_err(io(b))
}

fn jsb(start_seq: u64, start_pos: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[0..8].copy_from_slice(&JSB_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&start_seq.to_le_bytes());
    b[16..24].copy_from_slice(&start_pos.to_le_bytes());
    b
}

/// Writes an empty journal at `start` (mkfs).
pub fn format(dev: &dyn BlockDevice, start: u64) -> Result<()> {
    write(dev, start, &jsb(1, 1), Role::Journal)
}

/// The transaction being built.
#[derive(Default)]
struct Running {
    /// Journaled blocks: target -> (content, role).
    meta: BTreeMap<u64, (Vec<u8>, Role)>,
    /// Data blocks written in place at commit.
    data: BTreeMap<u64, Vec<u8>>,
    /// Blocks allocated in this transaction (their data is new, not an overwrite).
    new: HashSet<u64>,
    /// Blocks freed in this transaction.
    freed: BTreeSet<u64>,
}

impl Running {
    fn is_empty(&self) -> bool {
        self.meta.is_empty() && self.data.is_empty() && self.freed.is_empty()
    }
    /// Descriptor blocks the tags need.
    fn desc_blocks(&self) -> u64 {
        let bytes = DESC_HEADER + 8 * self.meta.len() + 8 * self.data.len() + 4 * self.freed.len();
        bytes.div_ceil(BLOCK) as u64
    }
}

/// A committed transaction whose journaled blocks are not yet checkpointed.
struct Committed {
    seq: u64,
    /// The device's write-request number of the commit block (for notifications).
    commit_write: Option<u64>,
    /// Known durable (a flush came after its commit block).
    durable: bool,
    meta: BTreeMap<u64, (Vec<u8>, Role)>,
}

/// The journal's in-memory state.
pub(super) struct Journal {
    mode: JournalMode,
    /// First block of the journal region.
    start: u64,
    /// Next free position in the region (relative; 0 is the journal superblock).
    head: u64,
    /// Sequence number of the running transaction.
    seq: u64,
    running: Running,
    committed: VecDeque<Committed>,
    /// Blocks freed by transaction `seq`, not yet durably free.
    pending_free: Vec<(u64, u64)>,
    /// Every transaction up to this one is durable.
    durable_seq: u64,
    /// Mutating operations since the last commit (the commit timer's clock).
    ops_since_commit: u32,
    /// Statistics: commits, journal resets, flushes issued by the journal.
    pub(super) stats: JournalStats,
}

/// What the journal did since mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    /// Transactions committed.
    pub commits: u64,
    /// Flushes the journal issued (commit flushes, dsync, journal-full).
    pub flushes: u64,
    /// Times the journal filled and was emptied with flushes.
    pub resets: u64,
    /// Transactions replayed by recovery at mount.
    pub replayed: u64,
}

impl Journal {
    /// The journal of a freshly recovered region at `start` (recovery left it empty,
    /// starting at `seq`).
    pub(super) fn new(mode: JournalMode, start: u64, seq: u64, replayed: u64) -> Journal {
        Journal {
            mode,
            start,
            head: 1,
            seq,
            running: Running::default(),
            committed: VecDeque::new(),
            pending_free: Vec::new(),
            durable_seq: seq - 1,
            ops_since_commit: 0,
            stats: JournalStats { replayed, ..JournalStats::default() },
        }
    }

    /// Stages a write of the core (`data` spans whole blocks from `b`).
    pub(super) fn stage(&mut self, b: u64, data: &[u8], role: Role) {
        for (i, chunk) in data.chunks(BLOCK).enumerate() {
            let blk = b + i as u64;
            let journaled = match role {
                Role::Data => self.mode.selective_data && !self.running.new.contains(&blk),
                _ => true,
            };
            if journaled {
                self.running.data.remove(&blk);
                self.running.meta.insert(blk, (chunk.to_vec(), role));
            } else {
                self.running.meta.remove(&blk);
                self.running.data.insert(blk, chunk.to_vec());
            }
        }
    }

    /// The newest content of block `b` the device does not hold yet, if any.
    pub(super) fn lookup(&self, b: u64) -> Option<&[u8]> {
        if let Some((d, _)) = self.running.meta.get(&b) {
            return Some(d);
        }
        if let Some(d) = self.running.data.get(&b) {
            return Some(d);
        }
        self.committed.iter().rev().find_map(|c| c.meta.get(&b).map(|(d, _)| d.as_slice()))
    }

    /// Block `b` was allocated in the running transaction.
    pub(super) fn note_alloc(&mut self, b: u64) {
        self.running.new.insert(b);
    }

    /// Block `b` was freed in the running transaction.
    pub(super) fn note_free(&mut self, b: u64) {
        self.running.new.remove(&b);
        self.running.data.remove(&b);
        self.running.freed.insert(b);
        self.pending_free.push((self.seq, b));
    }

    /// Whether block `b` is freed but not durably free (reuse after notification).
    pub(super) fn reuse_blocked(&self, b: u64) -> bool {
        self.pending_free.iter().any(|&(_, x)| x == b)
    }

    /// Whether the running transaction should end now (its descriptor or the journal
    /// would not hold more).
    pub(super) fn wants_commit(&self) -> bool {
        self.running.meta.len() as u64 + self.running.desc_blocks() + 1 > JOURNAL_BLOCKS / 4
    }

    /// After a mutating operation: `journal-sync` commits it now; the commit timer ends
    /// the transaction after `commit_every_ops` operations; a transaction that grew too
    /// large ends; otherwise checkpoint what the disk says is durable.
    pub(super) fn after_op(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        self.ops_since_commit = self.ops_since_commit.saturating_add(1);
        let timer = self.mode.commit_every_ops.is_some_and(|n| self.ops_since_commit >= n);
        if self.mode.sync_ops {
            // With commit_flushes the flush after the commit block makes it durable;
            // without, a flush here.
            let dsync = !self.mode.commit_flushes;
            self.commit(dev, dsync)
        } else if timer || self.wants_commit() {
            self.commit(dev, false)
        } else {
            self.poll(dev)
        }
    }

    /// Whether every change so far is durable: nothing in the running transaction and
    /// every committed transaction durable (xsyncfs releases held output then).
    pub(super) fn all_durable(&self) -> bool {
        self.running.is_empty() && self.committed.iter().all(|c| c.durable)
    }

    fn flush(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        dev.flush().map_err(io(0))?;
        self.stats.flushes += 1;
        for c in &mut self.committed {
            c.durable = true;
        }
        if let Some(last) = self.committed.back() {
            self.durable_seq = self.durable_seq.max(last.seq);
        }
        Ok(())
    }

    /// Checkpoints, in order, every committed transaction now known durable (a flush
    /// came after it, or the disk's notifications cover its commit block), and releases
    /// the blocks freed by durable transactions.
    pub(super) fn poll(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        let notified = dev.durability().map(|d| d.durable);
        while let Some(c) = self.committed.front() {
            let durable = c.durable || c.commit_write.zip(notified).is_some_and(|(w, d)| w <= d);
            if !durable {
                break;
            }
            let c = self.committed.pop_front().expect("front exists");
            self.durable_seq = self.durable_seq.max(c.seq);
            for (b, (data, role)) in &c.meta {
                write(dev, *b, data, *role)?;
            }
        }
        let durable_seq = self.durable_seq;
        self.pending_free.retain(|&(seq, _)| seq > durable_seq);
        Ok(())
    }

    /// Ends the running transaction: in-place data, descriptor, journaled blocks,
    /// commit block (with flushes around it for `journal-flush`); returns once all of it
    /// is in the disk cache (osync). `dsync` adds a flush, so that everything committed
    /// is durable when it returns.
    pub(super) fn commit(&mut self, dev: &dyn BlockDevice, dsync: bool) -> Result<()> {
        let mut flushed = false;
        self.ops_since_commit = 0;
        if !self.running.is_empty() {
            let tx = std::mem::take(&mut self.running);
            let n = tx.meta.len() as u64;
            let k = tx.desc_blocks();
            if k + n + 1 > JOURNAL_BLOCKS - 1 {
                // One operation changed more than the journal holds.
                return Err(Error::NoSpace);
            }
            if self.head + k + n + 1 > JOURNAL_BLOCKS {
                self.make_room(dev)?;
            }
            let pos = self.start + self.head;
            let mut desc = Vec::with_capacity(k as usize * BLOCK);
            desc.extend_from_slice(&DESC_MAGIC.to_le_bytes());
            desc.extend_from_slice(&self.seq.to_le_bytes());
            for v in [tx.meta.len(), tx.data.len(), tx.freed.len(), k as usize] {
                desc.extend_from_slice(&(v as u32).to_le_bytes());
            }
            let put = |desc: &mut Vec<u8>, v: u32| desc.extend_from_slice(&v.to_le_bytes());
            for (b, (_, role)) in &tx.meta {
                put(&mut desc, *b as u32);
                put(&mut desc, role_code(*role));
            }
            // Data first, in place (the thesis: the commit is issued after the data and
            // journal writes were acknowledged).
            for (b, data) in &tx.data {
                write(dev, *b, data, Role::Data)?;
                put(&mut desc, *b as u32);
                put(&mut desc, if self.mode.checksums { crc32(0, data) } else { 0 });
            }
            for b in &tx.freed {
                put(&mut desc, *b as u32);
            }
            desc.resize(k as usize * BLOCK, 0);
            write(dev, pos, &desc, Role::Journal)?;
            let mut csum = crc32(0, &desc);
            for (i, (data, _)) in tx.meta.values().enumerate() {
                write(dev, pos + k + i as u64, data, Role::Journal)?;
                csum = crc32(csum, data);
            }
            if self.mode.commit_flushes {
                self.flush(dev)?;
            }
            let mut commit = vec![0u8; BLOCK];
            commit[0..8].copy_from_slice(&COMMIT_MAGIC.to_le_bytes());
            commit[8..16].copy_from_slice(&self.seq.to_le_bytes());
            if self.mode.checksums {
                commit[16..20].copy_from_slice(&csum.to_le_bytes());
            }
            write(dev, pos + k + n, &commit, Role::Journal)?;
            let commit_write = dev.durability().map(|d| d.received);
            self.committed.push_back(Committed {
                seq: self.seq,
                commit_write,
                durable: false,
                meta: tx.meta,
            });
            self.head += k + n + 1;
            self.seq += 1;
            self.stats.commits += 1;
            if self.mode.commit_flushes {
                self.flush(dev)?;
                flushed = true;
            }
        }
        // journal-flush's flush after the commit block already made everything durable;
        // with nothing committed since the last flush there is nothing to make durable.
        if dsync && !flushed && !self.all_durable() {
            self.flush(dev)?;
        }
        self.poll(dev)
    }

    /// Empties the journal: flush (every committed transaction durable), checkpoint,
    /// flush (the checkpoint durable), point the journal superblock at the start.
    fn make_room(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        self.flush(dev)?;
        self.poll(dev)?;
        self.flush(dev)?;
        write(dev, self.start, &jsb(self.seq, 1), Role::Journal)?;
        self.flush(dev)?;
        self.head = 1;
        self.stats.resets += 1;
        Ok(())
    }

    /// Clean unmount: commit, make everything durable, checkpoint, empty the journal.
    pub(super) fn shutdown(&mut self, dev: &dyn BlockDevice) -> Result<()> {
        self.commit(dev, true)?;
        self.make_room(dev)
    }
}

/// One transaction found in the journal.
struct Found {
    seq: u64,
    meta: Vec<(u64, Role, Vec<u8>)>,
    data: Vec<(u64, u32)>,
    revoked: Vec<u64>,
}

/// What recovery did: transactions replayed and the sequence number to continue at.
pub(super) struct Recovered {
    pub(super) replayed: u64,
    pub(super) next_seq: u64,
}

/// Mount-time recovery of the journal at `start`: scans transactions in order from the
/// journal superblock, stops at the first whose descriptor or commit block is missing
/// or (with checksums) whose metadata checksum fails, then cuts the prefix before the
/// earliest transaction with an in-place data block whose checksum fails and that no
/// later valid transaction rewrites (the thesis' two-pass recovery, §6.3.3); replays the
/// newest copy of each block of that prefix unless a transaction at or after it revoked
/// the block; then empties the journal, continuing past every sequence number found in
/// it, so that a stale transaction can never pass for a new one.
/// The first of `found` (an index) with an in-place data block whose checksum fails and
/// that no later transaction of `found` rewrites (journals it, or tags it again with a
/// checksum that matches) or frees. A block freed since its tag may hold anything: once
/// the free is durable it is reused, and its new owner's data, written in place, fails
/// the old tag without saying anything about the tagging transaction.
fn first_mismatch(dev: &dyn BlockDevice, found: &[Found]) -> Result<Option<usize>> {
    let mut mismatched: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, tx) in found.iter().enumerate() {
        for (b, _, _) in &tx.meta {
            mismatched.remove(b);
        }
        for b in &tx.revoked {
            mismatched.remove(b);
        }
        for &(b, crc) in &tx.data {
            if crc32(0, &read(dev, b)?) == crc {
                mismatched.remove(&b);
            } else {
                mismatched.entry(b).or_insert(i);
            }
        }
    }
    Ok(mismatched.values().min().copied())
}

pub(super) fn recover(dev: &dyn BlockDevice, start: u64, mode: JournalMode) -> Result<Recovered> {
    let bad = |reason: &str| Error::Inconsistent { kind: None, what: format!("journal: {reason}") };
    let sb = read(dev, start)?;
    if u64_at(&sb, 0) != JSB_MAGIC {
        return Err(bad("no journal superblock"));
    }
    let (start_seq, start_pos) = (u64_at(&sb, 8), u64_at(&sb, 16));
    let mut found: Vec<Found> = Vec::new();
    let (mut pos, mut seq) = (start_pos.max(1), start_seq);
    while pos + 2 <= JOURNAL_BLOCKS {
        let mut desc = read(dev, start + pos)?;
        if u64_at(&desc, 0) != DESC_MAGIC || u64_at(&desc, 8) != seq {
            break;
        }
        let (nm, nd, nr, k) = (
            u32_at(&desc, 16) as usize,
            u32_at(&desc, 20) as usize,
            u32_at(&desc, 24) as usize,
            u64::from(u32_at(&desc, 28)),
        );
        let tags = DESC_HEADER + 8 * nm + 8 * nd + 4 * nr;
        if k == 0 || tags.div_ceil(BLOCK) as u64 != k || pos + k + nm as u64 + 1 > JOURNAL_BLOCKS {
            break;
        }
        for i in 1..k {
            desc.extend_from_slice(&read(dev, start + pos + i)?);
        }
        let word = |i: usize| u32_at(&desc, DESC_HEADER + 4 * i);
        let mut csum = crc32(0, &desc);
        let mut meta = Vec::with_capacity(nm);
        for i in 0..nm {
            let data = read(dev, start + pos + k + i as u64)?;
            csum = crc32(csum, &data);
            meta.push((u64::from(word(2 * i)), role_of(word(2 * i + 1)), data));
        }
        let commit = read(dev, start + pos + k + nm as u64)?;
        if u64_at(&commit, 0) != COMMIT_MAGIC || u64_at(&commit, 8) != seq {
            break;
        }
        if mode.checksums && u32_at(&commit, 16) != csum {
            break;
        }
        let data = (0..nd).map(|i| (u64::from(word(2 * nm + 2 * i)), word(2 * nm + 2 * i + 1)));
        let revoked = (0..nr).map(|i| u64::from(word(2 * nm + 2 * nd + i))).collect();
        found.push(Found { seq, meta, data: data.collect(), revoked });
        pos += k + nm as u64 + 1;
        seq += 1;
    }
    if mode.checksums {
        // Replay only the transactions before the first whose data failed its checksum.
        // Dropping transactions can bring back a mismatch a dropped one had cleared (by
        // rewriting or freeing the block), so until nothing more is dropped.
        while let Some(first) = first_mismatch(dev, &found)? {
            found.truncate(first);
        }
    }
    let mut newest: BTreeMap<u64, (u64, Role, &[u8])> = BTreeMap::new();
    let mut revoked: BTreeMap<u64, u64> = BTreeMap::new();
    for tx in &found {
        for (b, role, data) in &tx.meta {
            newest.insert(*b, (tx.seq, *role, data));
        }
        for &b in &tx.revoked {
            revoked.insert(b, tx.seq);
        }
    }
    for (b, (seq, role, data)) in &newest {
        if revoked.get(b).is_some_and(|&r| r >= *seq) {
            continue;
        }
        write(dev, *b, data, *role)?;
    }
    // Every descriptor in the region, valid or stale: the next sequence number passes
    // them all.
    let mut max_seen = start_seq.saturating_sub(1);
    for p in 1..JOURNAL_BLOCKS {
        let blk = read(dev, start + p)?;
        if u64_at(&blk, 0) == DESC_MAGIC || u64_at(&blk, 0) == COMMIT_MAGIC {
            max_seen = max_seen.max(u64_at(&blk, 8));
        }
    }
    let next_seq = max_seen.saturating_add(1);
    if !found.is_empty() || next_seq != start_seq || start_pos != 1 {
        dev.flush().map_err(io(0))?;
        write(dev, start, &jsb(next_seq, 1), Role::Journal)?;
        dev.flush().map_err(io(0))?;
    }
    Ok(Recovered { replayed: found.len() as u64, next_seq })
}

#[cfg(test)]
mod tests {
    use super::crc32;

    #[test]
    fn crc32_matches_the_ieee_check_value() {
        assert_eq!(crc32(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(crc32(0, b"1234"), b"56789"), 0xCBF4_3926);
    }
}
