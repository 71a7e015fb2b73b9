//! Soft updates (Ganger and Patt; the journaling-vs-soft-updates paper, §4): a write-back
//! block cache under the core whose every change is an *update* of a byte range of one
//! block, with the updates it depends on. The core keeps writing through and keeps
//! calling [`Core::barrier`] at each dependency point (inode before the entry that names
//! it, bitmap and data before the pointer, pointer gone before the free, new name before
//! the old one goes); here a barrier does not flush: it makes every later update of the
//! operation depend on every earlier one. A block is written back with each update whose
//! dependencies are not yet durable *rolled back* (its old bytes put back in the copy
//! sent to the disk), and written again later with the update rolled forward.
//!
//! What is durable: in [`SoftMode::Flush`] (`softupdates`) an update becomes durable at
//! the flush after the write that carried it, so the write-back runs in rounds (write
//! every dirty block with what is safe, flush, release) until nothing is left; in
//! [`SoftMode::Completion`] (`softupdates-completion`) it is durable as soon as the write
//! completes, as on the paper's disks, and no flush is issued: on a disk with a volatile
//! cache that is wrong, which bob shows.
//!
//! Frees wait: a block or inode the core frees is marked free (in memory and in its
//! bitmap) only once the updates that removed every pointer to it are durable (the
//! paper's background deletion), so nothing is reused while an old pointer to it may
//! still be on the disk.
//!
//! Simplifications against FreeBSD's implementation: dependencies are between updates
//! (byte ranges) rather than typed per-pointer structures; two updates of one block whose
//! byte ranges overlap go to the disk in order (a later one is rolled back whenever an
//! earlier overlapping one is); the syncer is a dirty-block limit checked after each
//! operation, not a 30 s timer; fsync writes back the whole cache.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::design::SoftMode;
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::BLOCK;
use crate::{Error, Result};

/// The syncer: a write-back pass starts after an operation that leaves more dirty blocks
/// than this in the cache (the paper's syncer runs every 30 s; a count keeps recordings
/// the same on every run).
pub const SYNC_DIRTY_BLOCKS: usize = 256;

/// Blocks the cache keeps: past this, a write-back pass drops the blocks it holds no
/// update for (they are on the disk; a later read fetches them again).
pub const CACHE_BLOCKS: usize = 16384;

/// What the soft-updates cache did since mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftStats {
    /// Write-back passes (fsync, syncer, unmount).
    pub passes: u64,
    /// Rounds inside them (a round writes every dirty block once).
    pub rounds: u64,
    /// Block writes sent to the disk.
    pub writes: u64,
    /// Updates rolled back in a block as it was written.
    pub rollbacks: u64,
    /// Flushes issued by write-back.
    pub flushes: u64,
    /// Frees released after their pointers were gone.
    pub frees_released: u64,
}

/// An object freed by the core, released once `after` are durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Free {
    Block(u32),
    Inode(u32),
}

struct Update {
    id: u64,
    off: usize,
    len: usize,
    /// The bytes before the update; `None` for a block never read (a freshly allocated
    /// block written whole): rolling it back means not writing the block at all.
    old: Option<Vec<u8>>,
    /// Updates (of other blocks, or earlier of this one) that must be durable first.
    after: Vec<u64>,
    /// Carried by a write not yet durable (flush mode).
    written: bool,
}

struct Cached {
    data: Vec<u8>,
    role: Role,
    /// Updates not yet durable, oldest first.
    updates: Vec<Update>,
}

/// The cache and its dependencies.
pub(crate) struct SoftDeps {
    mode: SoftMode,
    blocks: BTreeMap<u64, Cached>,
    /// Blocks holding an update no write has carried yet.
    dirty: BTreeSet<u64>,
    next_id: u64,
    /// Ids of updates not yet durable.
    pending: HashSet<u64>,
    /// This operation's updates before its last barrier, and since.
    before: Vec<u64>,
    current: Vec<u64>,
    frees: Vec<(Vec<u64>, Free)>,
    pub stats: SoftStats,
}

impl SoftDeps {
    pub fn new(mode: SoftMode) -> SoftDeps {
        SoftDeps {
            mode,
            blocks: BTreeMap::new(),
            dirty: BTreeSet::new(),
            next_id: 1,
            pending: HashSet::new(),
            before: Vec::new(),
            current: Vec::new(),
            frees: Vec::new(),
            stats: SoftStats::default(),
        }
    }

    /// A new operation: its updates depend on nothing of earlier operations but what
    /// shares bytes with them.
    pub fn begin_op(&mut self) {
        self.before.clear();
        self.current.clear();
    }

    /// A dependency point: what the operation writes from now on waits for what it wrote
    /// before.
    pub fn barrier(&mut self) {
        let cur = std::mem::take(&mut self.current);
        self.before.extend(cur);
        let pending = &self.pending;
        self.before.retain(|id| pending.contains(id));
    }

    /// The current contents of block `b` (the cache's, rolled forward).
    pub fn read(&mut self, dev: &dyn BlockDevice, b: u64) -> Result<Vec<u8>> {
        if let Some(c) = self.blocks.get(&b) {
            return Ok(c.data.clone());
        }
        let mut buf = vec![0u8; BLOCK];
        dev.read_at(b * BLOCK as u64, &mut buf).map_err(|source| Error::Io { block: b, source })?;
        self.blocks.insert(b, Cached { data: buf.clone(), role: Role::Other, updates: Vec::new() });
        Ok(buf)
    }

    /// Records the change of block `b` to `data` as an update depending on the
    /// operation's updates before its last barrier.
    pub fn write(&mut self, b: u64, data: &[u8], role: Role) {
        debug_assert_eq!(data.len(), BLOCK);
        let after: Vec<u64> = self.before.clone();
        let id = self.next_id;
        let update = match self.blocks.get(&b) {
            Some(c) => {
                let Some((lo, hi)) = changed(&c.data, data) else { return };
                Update {
                    id,
                    off: lo,
                    len: hi - lo,
                    old: Some(c.data[lo..hi].to_vec()),
                    after,
                    written: false,
                }
            }
            None => Update { id, off: 0, len: BLOCK, old: None, after, written: false },
        };
        self.next_id += 1;
        self.pending.insert(id);
        self.current.push(id);
        let c = self.blocks.entry(b).or_insert_with(|| Cached {
            data: vec![0u8; BLOCK],
            role,
            updates: Vec::new(),
        });
        c.data.copy_from_slice(data);
        c.role = role;
        c.updates.push(update);
        self.dirty.insert(b);
    }

    /// Frees `what` once every update of this operation before its last barrier (the
    /// removal of the pointers to it) is durable.
    pub fn defer_free(&mut self, what: Free) {
        let after = self.before.iter().copied().filter(|id| self.pending.contains(id)).collect();
        self.frees.push((after, what));
    }

    /// The frees whose pointers are durably gone, taken out of the waiting list.
    pub fn ready_frees(&mut self) -> Vec<Free> {
        let pending = &self.pending;
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.frees)
            .into_iter()
            .partition(|(after, _)| after.iter().all(|id| !pending.contains(id)));
        self.frees = wait;
        ready.into_iter().map(|(_, f)| f).collect()
    }

    /// Blocks with an update no write has carried yet.
    pub fn dirty_blocks(&self) -> usize {
        self.dirty.len()
    }

    /// Whether anything waits: an update not yet durable or a free not yet released.
    pub fn busy(&self) -> bool {
        !self.pending.is_empty() || !self.frees.is_empty()
    }

    /// The image of block `b` to write now: the cached contents with every update that
    /// is not yet safe rolled back; `None` when every update must wait and the block was
    /// never on the disk. Also the ids the image carries.
    fn image(&self, b: u64) -> Option<(Vec<u8>, Vec<u64>, usize)> {
        let c = &self.blocks[&b];
        let mut included: Vec<bool> = Vec::with_capacity(c.updates.len());
        // The byte ranges of the updates kept out so far, merged (a directory block
        // rewritten many times keeps one range here, not one per update).
        let mut out: Vec<(usize, usize)> = Vec::new();
        for u in &c.updates {
            let (lo, hi) = (u.off, u.off + u.len);
            let deps_durable = u.after.iter().all(|id| !self.pending.contains(id));
            // An earlier update of the same bytes that stays out keeps this one out too:
            // rolling back in reverse order is then exact.
            let overlap_out = out.iter().any(|&(a, z)| a < hi && lo < z);
            let inc = deps_durable && !overlap_out;
            included.push(inc);
            if !inc {
                let (mut a, mut z) = (lo, hi);
                out.retain(|&(x, y)| {
                    let touches = x <= z && a <= y;
                    if touches {
                        (a, z) = (a.min(x), z.max(y));
                    }
                    !touches
                });
                out.push((a, z));
            }
        }
        let mut img = c.data.clone();
        let mut rolled = 0;
        for (u, &inc) in c.updates.iter().zip(&included).rev() {
            if inc {
                continue;
            }
            match &u.old {
                Some(old) => img[u.off..u.off + u.len].copy_from_slice(old),
                None => return None,
            }
            rolled += 1;
        }
        let ids = c.updates.iter().zip(&included).filter(|(_, &i)| i).map(|(u, _)| u.id).collect();
        Some((img, ids, rolled))
    }

    /// One round: writes every block holding an update no write carried yet, oldest
    /// update first, each with what is not yet safe rolled back. Completion mode counts
    /// an update durable when its write returns; flush mode after the round's flush.
    /// Returns whether anything was written.
    pub fn round(&mut self, dev: &dyn BlockDevice) -> Result<bool> {
        self.stats.rounds += 1;
        let mut order: Vec<(u64, u64)> = self
            .dirty
            .iter()
            .filter_map(|&b| self.blocks[&b].updates.iter().find(|u| !u.written).map(|u| (u.id, b)))
            .collect();
        order.sort_unstable();
        let mut wrote = false;
        let mut written = Vec::new();
        for (_, b) in order {
            let Some((img, ids, rolled)) = self.image(b) else { continue };
            let c = self.blocks.get_mut(&b).expect("cached");
            // Nothing new in it: every carried update was written before, the rest wait.
            if ids.iter().all(|id| c.updates.iter().any(|u| u.id == *id && u.written)) {
                continue;
            }
            dev.write_at(b * BLOCK as u64, &img, WriteInfo::new(c.role))
                .map_err(|source| Error::Io { block: b, source })?;
            self.stats.writes += 1;
            self.stats.rollbacks += rolled as u64;
            wrote = true;
            let c = self.blocks.get_mut(&b).expect("cached");
            for u in c.updates.iter_mut().filter(|u| ids.contains(&u.id)) {
                u.written = true;
            }
            if c.updates.iter().all(|u| u.written) {
                self.dirty.remove(&b);
            }
            written.push(b);
            if self.mode == SoftMode::Completion {
                self.settle(b);
            }
        }
        if self.mode == SoftMode::Flush && wrote {
            dev.flush().map_err(|source| Error::Io { block: 0, source })?;
            self.stats.flushes += 1;
            for b in written {
                self.settle(b);
            }
        }
        Ok(wrote)
    }

    /// Drops the blocks with no update not yet durable once the cache holds more than
    /// [`CACHE_BLOCKS`].
    pub fn trim(&mut self) {
        if self.blocks.len() > CACHE_BLOCKS {
            self.blocks.retain(|_, c| !c.updates.is_empty());
        }
    }

    /// The written updates of block `b` are durable: drop them.
    fn settle(&mut self, b: u64) {
        let c = self.blocks.get_mut(&b).expect("cached");
        let pending = &mut self.pending;
        c.updates.retain(|u| {
            if u.written {
                pending.remove(&u.id);
            }
            !u.written
        });
    }

    /// Blocks and inodes waiting to be freed: free space as statfs counts it (FreeBSD
    /// counts its pending frees as free too).
    pub fn waiting_frees(&self) -> (u64, u64) {
        let blocks = self.frees.iter().filter(|(_, f)| matches!(f, Free::Block(_))).count();
        (blocks as u64, (self.frees.len() - blocks) as u64)
    }

    /// The mode.
    pub fn mode(&self) -> SoftMode {
        self.mode
    }
}

/// The first and one past the last byte where `old` and `new` differ (compared in
/// 64-byte pieces first: this runs on every cached write).
fn changed(old: &[u8], new: &[u8]) -> Option<(usize, usize)> {
    const PIECE: usize = 64;
    let first = old.chunks(PIECE).zip(new.chunks(PIECE)).position(|(a, b)| a != b)?;
    let last = old.chunks(PIECE).zip(new.chunks(PIECE)).rposition(|(a, b)| a != b)?;
    let lo = (first * PIECE..).find(|&i| old[i] != new[i]).expect("the piece differs");
    let end = ((last + 1) * PIECE).min(old.len());
    let hi = (last * PIECE..end).rev().find(|&i| old[i] != new[i]).map_or(end, |i| i + 1);
    Some((lo, hi))
}

impl super::Core {
    fn sd(&self) -> std::cell::RefMut<'_, SoftDeps> {
        self.soft.as_ref().expect("a soft-updates design").borrow_mut()
    }

    /// A soft-updates operation begins (see [`SoftDeps::begin_op`]).
    pub(super) fn soft_begin(&self) {
        if let Some(s) = &self.soft {
            s.borrow_mut().begin_op();
        }
    }

    /// Whether frees wait for write-back (soft updates, outside a write-back pass).
    pub(super) fn defers_frees(&self) -> bool {
        self.soft.is_some() && !self.soft_releasing
    }

    /// Soft updates: defers the free of `what` until its pointers are durably gone.
    pub(super) fn defer_free(&self, what: Free) {
        self.sd().defer_free(what);
    }

    /// A write-back pass: rounds until every update is durable (flush mode) or written
    /// (completion mode) and every waiting free released. Nothing without soft updates.
    pub(super) fn soft_writeback(&mut self) -> Result<()> {
        if self.soft.is_none() {
            return Ok(());
        }
        let saved = {
            let mut s = self.sd();
            s.stats.passes += 1;
            // What the pass writes itself (released frees) depends on nothing; an
            // operation in progress (one that ran out of space) keeps its dependencies.
            (std::mem::take(&mut s.before), std::mem::take(&mut s.current))
        };
        let r = self.soft_passes();
        let mut s = self.sd();
        (s.before, s.current) = saved;
        r
    }

    fn soft_passes(&mut self) -> Result<()> {
        loop {
            let ready = self.sd().ready_frees();
            if !ready.is_empty() {
                self.soft_releasing = true;
                for f in &ready {
                    match *f {
                        Free::Block(b) => self.free_block(b),
                        Free::Inode(i) => self.free_inode(i),
                    }
                }
                self.soft_releasing = false;
                self.write_bitmaps()?;
                self.sd().stats.frees_released += ready.len() as u64;
                continue;
            }
            if !self.sd().busy() {
                self.sd().trim();
                return Ok(());
            }
            let dev = self.dev.clone();
            if !self.sd().round(dev.as_ref())? {
                // Every dependency points to an earlier update, so a round always makes
                // progress; this is a bug, not a disk state.
                return Err(Error::Io {
                    block: 0,
                    source: std::io::Error::other("soft updates: write-back made no progress"),
                });
            }
        }
    }

    /// After an operation: the syncer writes back once too many blocks are dirty.
    pub(super) fn soft_tick(&mut self) -> Result<()> {
        match &self.soft {
            Some(s) if s.borrow().dirty_blocks() > SYNC_DIRTY_BLOCKS => self.soft_writeback(),
            _ => Ok(()),
        }
    }

    /// fsync on soft updates: write everything back; durable at the last round's flush,
    /// or (completion mode, which orders without flushing) at one flush after it.
    pub(super) fn soft_fsync(&mut self) -> Result<()> {
        self.soft_writeback()?;
        if self.sd().mode() == SoftMode::Completion {
            self.dev.flush().map_err(super::io_err(0))?;
        }
        Ok(())
    }
}

impl super::Core {
    /// Mount after an unclean shutdown. Soft updates leave only two kinds of damage, both
    /// leaks: link counts too high (a count is raised before a new name is written and
    /// lowered after the name is gone) and inodes and blocks marked used that nothing
    /// points to. The first are lowered here, from a walk of the tree, before the file
    /// system is used (a count too high would keep a file alive after its last unlink);
    /// the second are left: the file system mounts at once with less free space, as in
    /// the paper, where a background fsck reclaims them later (not built here).
    pub(super) fn soft_recover(&mut self) -> Result<()> {
        let walk = crate::fsck::walk(self.design, self.dev.as_ref(), &self.sb)?;
        self.soft_begin();
        let lowered = self.lower_link_counts(&walk.names)?;
        if lowered > 0 {
            self.soft_writeback()?;
        }
        Ok(())
    }
}
