//! The researchfs core: block and inode allocation, the inode table, directories, file
//! data with direct, single- and double-indirect blocks, [`mkfs`], recovery at mount, and
//! NoFS' checks and background scan. The [`Design`] decides where flushes go, whether
//! bitmaps reach the disk, and whether backpointers are written and checked.
//!
//! The core writes through: every operation sends its blocks to the [`BlockDevice`] before
//! it returns, in dependency order (data and bitmaps, then indirect blocks, then the inode
//! that points to them; frees after the pointer is gone), with [`Design::ordered`]
//! inserting a flush at each of those points. There is no block cache, so what a crash can
//! lose is exactly what the device's volatile cache can lose, which is what bob explores.
//!
//! One mutex guards the state; the NoFS scan thread takes it one step at a time so the file
//! system stays usable while allocation is being rediscovered.
//!
//! Simplifications, each chosen to keep the designs comparable rather than fast: a file
//! unlinked while open loses its data at once; directory mtimes change only when their
//! size does; a rename is not atomic in any design (the new name is added before the old
//! one is removed, as the thesis defines NoFS' rename).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::design::{Design, Options};
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::{
    build_dir_block, parse_dir_block, pos_dind_child, u32_at, BackLink, Backpointer, DirEntry,
    Inode, Kind, Superblock, BLOCK, INODE_SIZE, MAX_BACKLINKS, NAME_MAX, NDIRECT, POS_DIND,
    POS_IND, ROOT,
};
use crate::{Error, ErrorKind, Result};

const UNKNOWN: u8 = 0;
const FREE: u8 = 1;
const USED: u8 = 2;

/// Attributes of an inode as the file system reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u32,
    /// File or directory (a free inode reached through a stale entry reads as a file).
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
    /// Link count.
    pub nlink: u32,
    /// 4 KiB blocks allocated (data, directory and indirect).
    pub blocks: u64,
    /// Modification time.
    pub mtime: SystemTime,
}

/// Space accounting as statfs reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Blocks of the data region.
    pub blocks: u64,
    /// Of which known free.
    pub bfree: u64,
    /// Usable inode slots.
    pub files: u64,
    /// Of which known free.
    pub ffree: u64,
}

/// What the file system did about an inconsistency it noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Returned EIO to the caller.
    ErrorReturned,
    /// Corrected the object (link count, block count) on access.
    Repaired,
    /// Reclaimed an orphan inode or block during the scan.
    Reclaimed,
}

/// One inconsistency the file system itself noticed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detection {
    /// The thesis' kind, when one fits.
    pub kind: Option<ErrorKind>,
    /// What was done.
    pub action: Action,
    /// Which object and what disagreed.
    pub what: String,
}

/// Blocks an operation touched in the pointer tree, written at commit.
#[derive(Default)]
struct Tx {
    /// Indirect blocks read or created during the operation (full block contents).
    ind: BTreeMap<u32, Vec<u8>>,
    /// Of those, the ones modified.
    dirty: BTreeSet<u32>,
    /// Blocks to free once nothing points to them.
    freed: Vec<u32>,
    /// A block was allocated (so bitmaps must precede pointers).
    allocated: bool,
}

/// (logical block, block) data pointers and (block, position) indirect blocks of an inode.
type Tree = (Vec<(u64, u32)>, Vec<(u32, u32)>);

/// Where the pointer for a logical block lives.
#[derive(Clone, Copy)]
enum Slot {
    Direct(usize),
    In(u32, usize),
}

struct Core {
    design: Design,
    opts: Options,
    dev: Arc<dyn BlockDevice>,
    sb: Superblock,
    inodes: HashMap<u32, Inode>,
    balloc: Vec<u8>,
    ialloc: Vec<u8>,
    bfree: u64,
    ifree: u64,
    bhint: u64,
    ihint: u32,
    bbitmap: Vec<u8>,
    ibitmap: Vec<u8>,
    dirty_bitmaps: BTreeSet<u64>,
    /// NoFS: inodes whose link and block counts were checked since mount.
    verified: HashSet<u32>,
    /// NoFS: inodes whose blocks the scan (or allocation) has marked used.
    accounted: HashSet<u32>,
    scanning: bool,
    events: Vec<Detection>,
}

/// A mounted-in-process researchfs file system (no FUSE needed).
pub struct Fs {
    design: Design,
    core: Mutex<Core>,
    scan_cv: Condvar,
    stop: AtomicBool,
    closed: AtomicBool,
    scan: Mutex<Option<JoinHandle<()>>>,
}

fn now() -> (i64, u32) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.subsec_nanos())
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty()
        || name.len() > NAME_MAX
        || name.contains(&b'/')
        || name.contains(&0)
        || name == b"."
        || name == b".."
    {
        return Err(Error::BadName);
    }
    Ok(())
}

fn io_err(block: u64) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { block, source }
}

/// Creates an empty file system of `design` in the first `size` bytes of `dev` and flushes.
pub fn mkfs(design: Design, dev: &dyn BlockDevice, size: u64) -> Result<()> {
    let bad = |reason: String| Error::BadImage { design, reason };
    if size > dev.size() {
        return Err(bad(format!("size {size} exceeds the device ({} bytes)", dev.size())));
    }
    let sb = Superblock::compute(design.id(), size / BLOCK as u64).map_err(bad)?;
    let w = |block: u64, data: &[u8], role: Role| {
        dev.write_at(block * BLOCK as u64, data, WriteInfo::new(role)).map_err(io_err(block))
    };
    // Bitmaps and inode table start zeroed (the data region is left as found: stale
    // contents there are exactly what backpointers must catch).
    let zeros = vec![0u8; BLOCK * 64];
    let mut b = sb.bbitmap_start;
    while b < sb.data_start {
        let n = (sb.data_start - b).min(64);
        w(b, &zeros[..n as usize * BLOCK], Role::Other)?;
        b += n;
    }
    let root_block = sb.data_start as u32;
    if design.persistent_bitmaps() {
        let mut bb = vec![0u8; sb.bbitmap_blocks as usize * BLOCK];
        for i in 0..=sb.data_start as usize {
            bb[i / 8] |= 1 << (i % 8);
        }
        w(sb.bbitmap_start, &bb, Role::Bitmap)?;
        let mut ib = vec![0u8; sb.ibitmap_blocks as usize * BLOCK];
        ib[0] |= 0b11; // slot 0 (unused) and the root
        w(sb.ibitmap_start, &ib, Role::Bitmap)?;
    }
    let dir = build_dir_block(&[
        DirEntry { ino: ROOT, gen: 0, kind: Kind::Dir, name: b".".to_vec() },
        DirEntry { ino: ROOT, gen: 0, kind: Kind::Dir, name: b"..".to_vec() },
    ])
    .expect("two entries fit");
    w(u64::from(root_block), &dir, Role::Directory)?;
    let (mtime, mtime_ns) = now();
    let mut root = Inode {
        kind: Kind::Dir,
        nlink: 2,
        size: BLOCK as u64,
        mtime,
        mtime_ns,
        blocks: 1,
        ..Inode::default()
    };
    root.direct[0] = root_block;
    let (ib, off) = sb.inode_location(ROOT);
    let mut blk = vec![0u8; BLOCK];
    root.encode_into(&mut blk[off..off + INODE_SIZE]);
    w(ib, &blk, Role::Inode)?;
    w(0, &sb.encode(), Role::Superblock)?;
    dev.flush().map_err(io_err(0))
}

impl Core {
    fn pl(&self) -> usize {
        self.design.payload()
    }
    fn hdr(&self) -> usize {
        self.design.header()
    }
    fn ptrs(&self) -> usize {
        self.design.ptrs_per_block()
    }

    fn read_block(&self, b: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; BLOCK];
        self.dev.read_at(b * BLOCK as u64, &mut buf).map_err(io_err(b))?;
        Ok(buf)
    }

    fn write_block(&self, b: u64, data: &[u8], role: Role) -> Result<()> {
        self.dev.write_at(b * BLOCK as u64, data, WriteInfo::new(role)).map_err(io_err(b))
    }

    fn barrier(&self) -> Result<()> {
        if self.design.ordered() {
            self.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    fn detect(&mut self, kind: Option<ErrorKind>, action: Action, what: String) -> Error {
        self.events.push(Detection { kind, action, what: what.clone() });
        Error::Inconsistent { kind, what }
    }

    fn in_data(&self, b: u32) -> bool {
        u64::from(b) >= self.sb.data_start && u64::from(b) < self.sb.blocks
    }

    // ---- inodes ----

    fn get_inode(&mut self, ino: u32) -> Result<Inode> {
        if ino == 0 || ino >= self.sb.inodes {
            return Err(Error::Inconsistent {
                kind: Some(ErrorKind::Bd),
                what: format!("inode number {ino} out of range"),
            });
        }
        if let Some(i) = self.inodes.get(&ino) {
            return Ok(i.clone());
        }
        let (b, off) = self.sb.inode_location(ino);
        let blk = self.read_block(b)?;
        let i = Inode::decode(&blk[off..off + INODE_SIZE]);
        self.inodes.insert(ino, i.clone());
        Ok(i)
    }

    fn put_inode(&mut self, ino: u32, inode: &Inode) -> Result<()> {
        let (b, off) = self.sb.inode_location(ino);
        let mut blk = self.read_block(b)?;
        inode.encode_into(&mut blk[off..off + INODE_SIZE]);
        self.write_block(b, &blk, Role::Inode)?;
        self.inodes.insert(ino, inode.clone());
        Ok(())
    }

    fn touch(inode: &mut Inode) {
        let (s, ns) = now();
        inode.mtime = s;
        inode.mtime_ns = ns;
    }

    // ---- allocation ----

    fn set_bit(&mut self, inode_map: bool, idx: u64, used: bool) {
        if !self.design.persistent_bitmaps() {
            return;
        }
        let (map, start) = if inode_map {
            (&mut self.ibitmap, self.sb.ibitmap_start)
        } else {
            (&mut self.bbitmap, self.sb.bbitmap_start)
        };
        let byte = (idx / 8) as usize;
        if used {
            map[byte] |= 1 << (idx % 8);
        } else {
            map[byte] &= !(1 << (idx % 8));
        }
        self.dirty_bitmaps.insert(start + (byte / BLOCK) as u64);
    }

    fn write_bitmaps(&mut self) -> Result<()> {
        for b in std::mem::take(&mut self.dirty_bitmaps) {
            let (map, start) = if b >= self.sb.ibitmap_start {
                (&self.ibitmap, self.sb.ibitmap_start)
            } else {
                (&self.bbitmap, self.sb.bbitmap_start)
            };
            let i = (b - start) as usize * BLOCK;
            self.write_block(b, &map[i..i + BLOCK], Role::Bitmap)?;
        }
        Ok(())
    }

    /// Whether an unexamined block may belong to a live inode (its first word names one
    /// and bytes 8..12, the generation in a backpointer and in a "." entry alike, match).
    fn maybe_owned(&mut self, b: u64) -> Result<bool> {
        let mut head = [0u8; 12];
        self.dev.read_at(b * BLOCK as u64, &mut head).map_err(io_err(b))?;
        let owner = u32_at(&head, 0);
        if owner == 0 || owner >= self.sb.inodes {
            return Ok(false);
        }
        let i = self.get_inode(owner)?;
        Ok(i.kind != Kind::Free && i.generation == u32_at(&head, 8))
    }

    fn alloc_block(&mut self, tx: &mut Tx) -> Result<u32> {
        let (start, end) = (self.sb.data_start, self.sb.blocks);
        let mut found = None;
        let mut b = self.bhint.max(start);
        while b < end {
            if self.balloc[b as usize] == FREE {
                found = Some(b);
                break;
            }
            b += 1;
        }
        if found.is_none() && self.scanning {
            // The thesis' sequential block scanner: claim an unexamined block whose
            // backpointer cannot name a live inode.
            for b in start..end {
                if self.balloc[b as usize] == UNKNOWN && !self.maybe_owned(b)? {
                    found = Some(b);
                    self.bfree += 1;
                    break;
                }
            }
        }
        let b = found.ok_or(Error::NoSpace)?;
        self.balloc[b as usize] = USED;
        self.bfree -= 1;
        self.bhint = b + 1;
        self.set_bit(false, b, true);
        tx.allocated = true;
        Ok(b as u32)
    }

    fn free_block(&mut self, b: u32) {
        if !self.in_data(b) || self.balloc[b as usize] == FREE {
            return;
        }
        self.balloc[b as usize] = FREE;
        self.bfree += 1;
        self.bhint = self.bhint.min(u64::from(b));
        self.set_bit(false, u64::from(b), false);
    }

    fn alloc_inode(&mut self) -> Result<u32> {
        let n = self.sb.inodes;
        let mut found = (self.ihint.max(2)..n).find(|&i| self.ialloc[i as usize] == FREE);
        if found.is_none() && self.scanning {
            for i in 2..n {
                if self.ialloc[i as usize] == UNKNOWN && self.get_inode(i)?.kind == Kind::Free {
                    self.ialloc[i as usize] = FREE;
                    self.ifree += 1;
                    found = Some(i);
                    break;
                }
            }
        }
        let i = found.ok_or(Error::NoSpace)?;
        self.ialloc[i as usize] = USED;
        self.ifree -= 1;
        self.ihint = i + 1;
        self.set_bit(true, u64::from(i), true);
        self.accounted.insert(i);
        self.verified.insert(i);
        Ok(i)
    }

    fn free_inode(&mut self, ino: u32) {
        if self.ialloc[ino as usize] != FREE {
            self.ialloc[ino as usize] = FREE;
            self.ifree += 1;
        }
        self.ihint = self.ihint.min(ino);
        self.set_bit(true, u64::from(ino), false);
        self.verified.remove(&ino);
        self.accounted.remove(&ino);
    }

    /// An inode reached through a checked lookup is live: the scan must not reclaim it.
    fn mark_live(&mut self, ino: u32) {
        if self.ialloc[ino as usize] == UNKNOWN {
            self.ialloc[ino as usize] = USED;
        }
    }

    // ---- pointer tree ----

    fn new_ind(&mut self, owner: u32, gen: u32, pos: u32, tx: &mut Tx) -> Result<u32> {
        let b = self.alloc_block(tx)?;
        let mut blk = vec![0u8; BLOCK];
        if self.design.backpointers() {
            Backpointer { ino: owner, offset: pos, gen }.write(&mut blk);
        }
        tx.ind.insert(b, blk);
        tx.dirty.insert(b);
        Ok(b)
    }

    fn load_ind(&mut self, owner: u32, gen: u32, b: u32, pos: u32, tx: &mut Tx) -> Result<()> {
        if tx.ind.contains_key(&b) {
            return Ok(());
        }
        if !self.in_data(b) {
            return Err(self.detect(
                Some(ErrorKind::Gd),
                Action::ErrorReturned,
                format!("inode {owner}: indirect pointer {b} outside the data region"),
            ));
        }
        let blk = self.read_block(u64::from(b))?;
        if self.design.backpointers() {
            let bp = Backpointer::read(&blk);
            if bp != (Backpointer { ino: owner, offset: pos, gen }) {
                return Err(self.mismatch(owner, gen, pos, b, bp, "indirect"));
            }
        }
        tx.ind.insert(b, blk);
        Ok(())
    }

    /// A backpointer disagreed with the pointer to its block: another file's block (TP:
    /// another live inode's, or another generation of this inode number's) or a block
    /// never written for this one (GD).
    fn mismatch(
        &mut self,
        owner: u32,
        gen: u32,
        pos: u32,
        b: u32,
        bp: Backpointer,
        what: &str,
    ) -> Error {
        let reused = bp.ino == owner && bp.gen != gen && bp.gen != 0;
        let other_live = bp.ino != owner
            && bp.ino != 0
            && bp.ino < self.sb.inodes
            && self.get_inode(bp.ino).map(|i| i.kind != Kind::Free).unwrap_or(false);
        let kind = if other_live || reused { ErrorKind::Tp } else { ErrorKind::Gd };
        self.detect(
            Some(kind),
            Action::ErrorReturned,
            format!(
                "inode {owner} (generation {gen}): {what} block {b} at {pos} has backpointer \
                 ({}, {}, generation {})",
                bp.ino, bp.offset, bp.gen
            ),
        )
    }

    fn ptr_in(&self, tx: &Tx, b: u32, idx: usize) -> u32 {
        u32_at(&tx.ind[&b], self.hdr() + 4 * idx)
    }

    fn set_ptr_in(&self, tx: &mut Tx, b: u32, idx: usize, v: u32) {
        let at = self.hdr() + 4 * idx;
        if let Some(blk) = tx.ind.get_mut(&b) {
            blk[at..at + 4].copy_from_slice(&v.to_le_bytes());
            tx.dirty.insert(b);
        }
    }

    fn slot(
        &mut self,
        ino: u32,
        inode: &mut Inode,
        l: u64,
        create: bool,
        tx: &mut Tx,
    ) -> Result<Option<Slot>> {
        let p = self.ptrs() as u64;
        let gen = inode.generation;
        if l < NDIRECT as u64 {
            return Ok(Some(Slot::Direct(l as usize)));
        }
        let l = l - NDIRECT as u64;
        if l < p {
            if inode.ind == 0 {
                if !create {
                    return Ok(None);
                }
                inode.ind = self.new_ind(ino, gen, POS_IND, tx)?;
                inode.blocks += 1;
            }
            self.load_ind(ino, gen, inode.ind, POS_IND, tx)?;
            return Ok(Some(Slot::In(inode.ind, l as usize)));
        }
        let l = l - p;
        if l >= p * p {
            return Err(Error::TooBig);
        }
        if inode.dind == 0 {
            if !create {
                return Ok(None);
            }
            inode.dind = self.new_ind(ino, gen, POS_DIND, tx)?;
            inode.blocks += 1;
        }
        self.load_ind(ino, gen, inode.dind, POS_DIND, tx)?;
        let ci = (l / p) as usize;
        let mut child = self.ptr_in(tx, inode.dind, ci);
        if child == 0 {
            if !create {
                return Ok(None);
            }
            child = self.new_ind(ino, gen, pos_dind_child(ci), tx)?;
            self.set_ptr_in(tx, inode.dind, ci, child);
            inode.blocks += 1;
        }
        self.load_ind(ino, gen, child, pos_dind_child(ci), tx)?;
        Ok(Some(Slot::In(child, (l % p) as usize)))
    }

    fn get_slot(&self, inode: &Inode, tx: &Tx, s: Slot) -> u32 {
        match s {
            Slot::Direct(i) => inode.direct[i],
            Slot::In(b, i) => self.ptr_in(tx, b, i),
        }
    }

    fn set_slot(&self, inode: &mut Inode, tx: &mut Tx, s: Slot, v: u32) {
        match s {
            Slot::Direct(i) => inode.direct[i] = v,
            Slot::In(b, i) => self.set_ptr_in(tx, b, i, v),
        }
    }

    /// The block for logical block `l` of `ino` (0 for a hole), read-only.
    fn bmap(&mut self, ino: u32, inode: &Inode, l: u64, tx: &mut Tx) -> Result<u32> {
        let mut copy = inode.clone();
        Ok(match self.slot(ino, &mut copy, l, false, tx)? {
            Some(s) => self.get_slot(&copy, tx, s),
            None => 0,
        })
    }

    /// Every data pointer (logical block, block) and indirect block (block, position)
    /// of an inode, by walking the tree; NoFS skips indirect blocks that fail their check.
    fn all_blocks(&mut self, ino: u32, inode: &Inode) -> Tree {
        let mut data = Vec::new();
        let mut ind = Vec::new();
        for (i, &b) in inode.direct.iter().enumerate() {
            if b != 0 {
                data.push((i as u64, b));
            }
        }
        let p = self.ptrs();
        let gen = inode.generation;
        let mut tx = Tx::default();
        if inode.ind != 0 && self.quiet_load(ino, gen, inode.ind, POS_IND, &mut tx) {
            ind.push((inode.ind, POS_IND));
            for i in 0..p {
                let b = self.ptr_in(&tx, inode.ind, i);
                if b != 0 {
                    data.push(((NDIRECT + i) as u64, b));
                }
            }
        }
        if inode.dind != 0 && self.quiet_load(ino, gen, inode.dind, POS_DIND, &mut tx) {
            ind.push((inode.dind, POS_DIND));
            for ci in 0..p {
                let c = self.ptr_in(&tx, inode.dind, ci);
                if c != 0 && self.quiet_load(ino, gen, c, pos_dind_child(ci), &mut tx) {
                    ind.push((c, pos_dind_child(ci)));
                    for i in 0..p {
                        let b = self.ptr_in(&tx, c, i);
                        if b != 0 {
                            data.push(((NDIRECT + p + ci * p + i) as u64, b));
                        }
                    }
                }
            }
        }
        (data, ind)
    }

    /// `load_ind` that records no detection (scans and frees are not accesses).
    fn quiet_load(&mut self, owner: u32, gen: u32, b: u32, pos: u32, tx: &mut Tx) -> bool {
        let n = self.events.len();
        let ok = self.load_ind(owner, gen, b, pos, tx).is_ok();
        self.events.truncate(n);
        ok
    }

    /// Whether block `b` carries the backpointer of generation `gen` of `ino` for logical
    /// block `l` (a "." entry naming both for a directory). Always true without
    /// backpointers.
    fn owns(&self, ino: u32, gen: u32, l: u64, b: u32, dir: bool) -> Result<bool> {
        if !self.design.backpointers() {
            return Ok(true);
        }
        if !self.in_data(b) {
            return Ok(false);
        }
        let mut head = [0u8; 13];
        self.dev.read_at(u64::from(b) * BLOCK as u64, &mut head).map_err(io_err(u64::from(b)))?;
        Ok(if dir {
            u32_at(&head, 0) == ino && head[6] == 1 && head[12] == b'.' && u32_at(&head, 8) == gen
        } else {
            Backpointer::read(&head) == Backpointer { ino, offset: l as u32, gen }
        })
    }

    // ---- file data ----

    fn read_data(&mut self, ino: u32, gen: u32, l: u64, b: u32) -> Result<Vec<u8>> {
        if !self.in_data(b) {
            return Err(self.detect(
                Some(ErrorKind::Gd),
                Action::ErrorReturned,
                format!("inode {ino}: block pointer {b} outside the data region"),
            ));
        }
        let blk = self.read_block(u64::from(b))?;
        if self.design.backpointers() {
            let bp = Backpointer::read(&blk);
            if bp != (Backpointer { ino, offset: l as u32, gen }) {
                return Err(self.mismatch(ino, gen, l as u32, b, bp, "data"));
            }
        }
        Ok(blk)
    }

    fn commit(&mut self, ino: u32, inode: &Inode, tx: Tx) -> Result<()> {
        self.write_bitmaps()?;
        if tx.allocated {
            self.barrier()?;
        }
        if !tx.dirty.is_empty() {
            for b in &tx.dirty {
                self.write_block(u64::from(*b), &tx.ind[b], Role::Indirect)?;
            }
            self.barrier()?;
        }
        self.put_inode(ino, inode)?;
        if !tx.freed.is_empty() {
            self.barrier()?;
            for b in tx.freed {
                self.free_block(b);
            }
            self.write_bitmaps()?;
        }
        Ok(())
    }

    fn write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize> {
        let mut inode = self.get_inode(ino)?;
        match inode.kind {
            Kind::Dir => return Err(Error::IsDir),
            Kind::Free => return Err(Error::NotFound),
            Kind::File => {}
        }
        if data.is_empty() {
            return Ok(0);
        }
        let (pl, hdr) = (self.pl() as u64, self.hdr());
        let end = off.checked_add(data.len() as u64).ok_or(Error::TooBig)?;
        let mut tx = Tx::default();
        let mut run: Option<(u32, Vec<u8>)> = None;
        let mut pos = off;
        while pos < end {
            let l = pos / pl;
            let inb = (pos % pl) as usize;
            let n = ((pl - pos % pl).min(end - pos)) as usize;
            let slot = self.slot(ino, &mut inode, l, true, &mut tx)?.ok_or(Error::TooBig)?;
            let mut b = self.get_slot(&inode, &tx, slot);
            let mut buf = if b == 0 {
                b = self.alloc_block(&mut tx)?;
                self.set_slot(&mut inode, &mut tx, slot, b);
                inode.blocks += 1;
                vec![0u8; BLOCK]
            } else if n as u64 == pl && !self.design.backpointers() {
                vec![0u8; BLOCK]
            } else {
                // Partial overwrites, and every NoFS overwrite: the block must be checked
                // to belong here before it is written over.
                self.read_data(ino, inode.generation, l, b)?
            };
            if self.design.backpointers() {
                Backpointer { ino, offset: l as u32, gen: inode.generation }.write(&mut buf);
            }
            let src = (pos - off) as usize;
            buf[hdr + inb..hdr + inb + n].copy_from_slice(&data[src..src + n]);
            run = match run {
                Some((start, mut bytes)) if start as usize + bytes.len() / BLOCK == b as usize => {
                    bytes.extend_from_slice(&buf);
                    Some((start, bytes))
                }
                Some((start, bytes)) => {
                    self.write_block(u64::from(start), &bytes, Role::Data)?;
                    Some((b, buf))
                }
                None => Some((b, buf)),
            };
            pos += n as u64;
        }
        if let Some((start, bytes)) = run {
            self.write_block(u64::from(start), &bytes, Role::Data)?;
        }
        inode.size = inode.size.max(end);
        Core::touch(&mut inode);
        self.commit(ino, &inode, tx)?;
        Ok(data.len())
    }

    fn read(&mut self, ino: u32, off: u64, len: usize) -> Result<Vec<u8>> {
        let inode = self.get_inode(ino)?;
        if inode.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        let end = (off + len as u64).min(inode.size);
        let mut out = Vec::with_capacity(end.saturating_sub(off) as usize);
        let (pl, hdr) = (self.pl() as u64, self.hdr());
        let mut tx = Tx::default();
        let mut pos = off;
        while pos < end {
            let l = pos / pl;
            let inb = (pos % pl) as usize;
            let n = ((pl - pos % pl).min(end - pos)) as usize;
            let b = self.bmap(ino, &inode, l, &mut tx)?;
            if b == 0 {
                out.resize(out.len() + n, 0);
            } else {
                let blk = self.read_data(ino, inode.generation, l, b)?;
                out.extend_from_slice(&blk[hdr + inb..hdr + inb + n]);
            }
            pos += n as u64;
        }
        Ok(out)
    }

    /// Drops the pointer at `l` and schedules the block's free. NoFS frees only a block
    /// that carries this inode's backpointer: a stale pointer must not free another file's
    /// block.
    fn release_data(&mut self, ino: u32, inode: &Inode, l: u64, b: u32, tx: &mut Tx) -> Result<()> {
        if self.owns(ino, inode.generation, l, b, inode.kind == Kind::Dir)? {
            tx.freed.push(b);
        }
        Ok(())
    }

    fn truncate(&mut self, ino: u32, size: u64) -> Result<()> {
        let mut inode = self.get_inode(ino)?;
        match inode.kind {
            Kind::Dir => return Err(Error::IsDir),
            Kind::Free => return Err(Error::NotFound),
            Kind::File => {}
        }
        let (pl, hdr) = (self.pl() as u64, self.hdr());
        let p = self.ptrs() as u64;
        if size.div_ceil(pl) > NDIRECT as u64 + p + p * p {
            return Err(Error::TooBig);
        }
        let mut tx = Tx::default();
        if size < inode.size {
            if size % pl != 0 {
                let l = size / pl;
                let b = self.bmap(ino, &inode, l, &mut tx)?;
                if b != 0 {
                    let mut blk = self.read_data(ino, inode.generation, l, b)?;
                    blk[hdr + (size % pl) as usize..].fill(0);
                    self.write_block(u64::from(b), &blk, Role::Data)?;
                }
            }
            let keep = size.div_ceil(pl);
            let (data, _) = self.all_blocks(ino, &inode);
            for (l, b) in data {
                if l >= keep {
                    if let Some(s) = self.slot(ino, &mut inode, l, false, &mut tx)? {
                        self.set_slot(&mut inode, &mut tx, s, 0);
                    }
                    inode.blocks = inode.blocks.saturating_sub(1);
                    let owner = inode.clone();
                    self.release_data(ino, &owner, l, b, &mut tx)?;
                }
            }
            if keep <= NDIRECT as u64 && inode.ind != 0 {
                tx.dirty.remove(&inode.ind);
                tx.freed.push(inode.ind);
                inode.ind = 0;
                inode.blocks = inode.blocks.saturating_sub(1);
            }
            if inode.dind != 0 {
                let needed = keep.saturating_sub(NDIRECT as u64 + p).div_ceil(p) as usize;
                self.load_ind(ino, inode.generation, inode.dind, POS_DIND, &mut tx)?;
                for ci in needed..p as usize {
                    let c = self.ptr_in(&tx, inode.dind, ci);
                    if c != 0 {
                        self.set_ptr_in(&mut tx, inode.dind, ci, 0);
                        tx.dirty.remove(&c);
                        tx.freed.push(c);
                        inode.blocks = inode.blocks.saturating_sub(1);
                    }
                }
                if needed == 0 {
                    tx.dirty.remove(&inode.dind);
                    tx.freed.push(inode.dind);
                    inode.dind = 0;
                    inode.blocks = inode.blocks.saturating_sub(1);
                }
            }
        }
        inode.size = size;
        Core::touch(&mut inode);
        self.commit(ino, &inode, tx)
    }

    // ---- directories ----

    fn dir_block(&mut self, dir: u32, gen: u32, b: u32) -> Result<Vec<DirEntry>> {
        if !self.in_data(b) {
            return Err(self.detect(
                Some(ErrorKind::Bd),
                Action::ErrorReturned,
                format!("directory {dir}: block pointer {b} outside the data region"),
            ));
        }
        let blk = self.read_block(u64::from(b))?;
        let entries = match parse_dir_block(&blk) {
            Ok(e) => e,
            Err(why) => {
                return Err(self.detect(
                    Some(ErrorKind::Bd),
                    Action::ErrorReturned,
                    format!("directory {dir} block {b} is not a directory block: {why}"),
                ))
            }
        };
        if self.design.backpointers() {
            match entries.first() {
                Some(e) if e.name == b"." && e.ino == dir && e.gen == gen => {}
                other => {
                    let (found, fgen) = other.map_or((0, 0), |e| (e.ino, e.gen));
                    return Err(self.detect(
                        Some(ErrorKind::Bd),
                        Action::ErrorReturned,
                        format!(
                            "directory {dir} (generation {gen}) block {b}: \".\" names inode \
                             {found} generation {fgen}"
                        ),
                    ));
                }
            }
        }
        Ok(entries)
    }

    /// (block, entries) of every directory block.
    fn dir_blocks(&mut self, dir: u32) -> Result<Vec<(u32, Vec<DirEntry>)>> {
        let inode = self.get_inode(dir)?;
        if inode.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let mut tx = Tx::default();
        let mut out = Vec::new();
        for l in 0..inode.size / BLOCK as u64 {
            let b = self.bmap(dir, &inode, l, &mut tx)?;
            if b == 0 {
                continue;
            }
            let e = self.dir_block(dir, inode.generation, b)?;
            out.push((b, e));
        }
        Ok(out)
    }

    fn dir_find(&mut self, dir: u32, name: &[u8]) -> Result<Option<DirEntry>> {
        for (_, entries) in self.dir_blocks(dir)? {
            if let Some(e) = entries.into_iter().find(|e| e.name == name) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    fn dir_list(&mut self, dir: u32) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for (_, entries) in self.dir_blocks(dir)? {
            out.extend(entries.into_iter().filter(|e| e.name != b"." && e.name != b".."));
        }
        Ok(out)
    }

    fn dir_add(&mut self, dir: u32, entry: DirEntry) -> Result<()> {
        for (b, mut entries) in self.dir_blocks(dir)? {
            entries.push(entry.clone());
            if let Some(blk) = build_dir_block(&entries) {
                return self.write_block(u64::from(b), &blk, Role::Directory);
            }
        }
        let mut inode = self.get_inode(dir)?;
        let mut tx = Tx::default();
        let l = inode.size / BLOCK as u64;
        let slot = self.slot(dir, &mut inode, l, true, &mut tx)?.ok_or(Error::TooBig)?;
        let b = self.alloc_block(&mut tx)?;
        self.set_slot(&mut inode, &mut tx, slot, b);
        inode.blocks += 1;
        let mut entries = Vec::new();
        if self.design.backpointers() {
            entries.push(DirEntry {
                ino: dir,
                gen: inode.generation,
                kind: Kind::Dir,
                name: b".".to_vec(),
            });
        }
        entries.push(entry);
        let blk = build_dir_block(&entries).expect("a fresh block holds one entry");
        self.write_block(u64::from(b), &blk, Role::Directory)?;
        inode.size += BLOCK as u64;
        Core::touch(&mut inode);
        self.commit(dir, &inode, tx)
    }

    fn dir_remove(&mut self, dir: u32, name: &[u8]) -> Result<DirEntry> {
        for (b, mut entries) in self.dir_blocks(dir)? {
            if let Some(i) = entries.iter().position(|e| e.name == name) {
                let e = entries.remove(i);
                let blk = build_dir_block(&entries).expect("fewer entries fit");
                self.write_block(u64::from(b), &blk, Role::Directory)?;
                return Ok(e);
            }
        }
        Err(Error::NotFound)
    }

    /// Entries of `link.dir` naming generation `gen` of `ino` under a name whose hash is
    /// `link.name`, without recording detections (used by checks).
    fn names_in(&mut self, link: BackLink, ino: u32, gen: u32) -> usize {
        let n = self.events.len();
        let count = match self.dir_blocks(link.dir) {
            Ok(blocks) => blocks
                .iter()
                .flat_map(|(_, e)| e.iter())
                .filter(|e| {
                    e.ino == ino
                        && e.gen == gen
                        && e.name != b"."
                        && e.name != b".."
                        && BackLink::new(link.dir, &e.name) == link
                })
                .count(),
            Err(_) => 0,
        };
        self.events.truncate(n);
        count
    }

    // ---- namespace operations ----

    fn lookup(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
        let e = self.dir_find(parent, name)?.ok_or(Error::NotFound)?;
        if name == b"." || name == b".." {
            return Ok(e.ino);
        }
        let child = self.get_inode(e.ino)?;
        if self.design.backpointers() {
            let shown = String::from_utf8_lossy(name).into_owned();
            if child.kind == Kind::Free {
                return Err(self.detect(
                    Some(ErrorKind::Bd),
                    Action::ErrorReturned,
                    format!("entry {shown:?} of directory {parent} names free inode {}", e.ino),
                ));
            }
            if child.generation != e.gen {
                return Err(self.detect(
                    Some(ErrorKind::Bd),
                    Action::ErrorReturned,
                    format!(
                        "entry {shown:?} of directory {parent} names generation {} of inode {}, \
                         which is at generation {}",
                        e.gen, e.ino, child.generation
                    ),
                ));
            }
            if !child.backlinks.contains(&BackLink::new(parent, name)) {
                return Err(self.detect(
                    Some(ErrorKind::Bd),
                    Action::ErrorReturned,
                    format!(
                        "entry {shown:?} of directory {parent}: inode {} has no back link to it",
                        e.ino
                    ),
                ));
            }
            self.mark_live(e.ino);
        }
        Ok(e.ino)
    }

    /// NoFS: checks an inode's link count against the entries its back links identify, and
    /// its block count against the blocks whose backpointers agree; repairs both.
    fn verify(&mut self, ino: u32) -> Result<()> {
        let mut inode = self.get_inode(ino)?;
        let mut changed = false;
        if inode.kind == Kind::File {
            let mut links: Vec<BackLink> = inode.backlinks.clone();
            links.sort_unstable();
            links.dedup();
            let mut kept = Vec::new();
            for link in links {
                let claimed = inode.backlinks.iter().filter(|&&x| x == link).count();
                let named = self.names_in(link, ino, inode.generation);
                kept.extend(std::iter::repeat_n(link, claimed.min(named)));
            }
            if kept.len() != inode.backlinks.len() || kept.len() != inode.nlink as usize {
                self.events.push(Detection {
                    kind: Some(ErrorKind::Hl),
                    action: Action::Repaired,
                    what: format!(
                        "inode {ino}: link count {} but {} entries confirm it",
                        inode.nlink,
                        kept.len()
                    ),
                });
                inode.nlink = kept.len() as u16;
                inode.backlinks = kept;
                changed = true;
            }
        }
        let (data, ind) = self.all_blocks(ino, &inode);
        let dir = inode.kind == Kind::Dir;
        let mut count = ind.len() as u32;
        for (l, b) in data {
            if self.owns(ino, inode.generation, l, b, dir)? {
                count += 1;
            }
        }
        if count != inode.blocks {
            self.events.push(Detection {
                kind: None,
                action: Action::Repaired,
                what: format!(
                    "inode {ino}: block count {} but {count} blocks confirm it",
                    inode.blocks
                ),
            });
            inode.blocks = count;
            changed = true;
        }
        if changed {
            self.put_inode(ino, &inode)?;
        }
        self.verified.insert(ino);
        Ok(())
    }

    fn getattr(&mut self, ino: u32) -> Result<Attr> {
        let mut inode = self.get_inode(ino)?;
        if self.design.backpointers() && inode.kind != Kind::Free && !self.verified.contains(&ino) {
            self.verify(ino)?;
            inode = self.get_inode(ino)?;
        }
        Ok(Attr {
            ino,
            kind: if inode.kind == Kind::Free { Kind::File } else { inode.kind },
            size: inode.size,
            nlink: u32::from(inode.nlink),
            blocks: u64::from(inode.blocks),
            mtime: UNIX_EPOCH
                + Duration::new(inode.mtime.max(0) as u64, inode.mtime_ns.min(999_999_999)),
        })
    }

    /// A fresh inode for slot `ino`, one generation past whatever the slot held (read from
    /// the table: a free slot keeps its generation, so a reused number never matches the
    /// entries and backpointers of its previous life).
    fn new_inode(&mut self, ino: u32, kind: Kind, parent: u32, name: &[u8]) -> Result<Inode> {
        let (mtime, mtime_ns) = now();
        let generation = self.get_inode(ino)?.generation.wrapping_add(1);
        Ok(Inode {
            kind,
            nlink: if kind == Kind::Dir { 2 } else { 1 },
            mtime,
            mtime_ns,
            generation,
            backlinks: if self.design.backpointers() {
                vec![BackLink::new(parent, name)]
            } else {
                vec![]
            },
            ..Inode::default()
        })
    }

    /// The generation entries naming `ino` record.
    fn gen_of(&mut self, ino: u32) -> Result<u32> {
        Ok(self.get_inode(ino)?.generation)
    }

    fn check_new(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        if self.dir_find(parent, name)?.is_some() {
            return Err(Error::Exists);
        }
        Ok(())
    }

    fn create(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
        self.check_new(parent, name)?;
        let ino = self.alloc_inode()?;
        let inode = self.new_inode(ino, Kind::File, parent, name)?;
        self.put_inode(ino, &inode)?;
        self.write_bitmaps()?;
        self.barrier()?;
        let gen = inode.generation;
        self.dir_add(parent, DirEntry { ino, gen, kind: Kind::File, name: name.to_vec() })?;
        Ok(ino)
    }

    fn mkdir(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
        self.check_new(parent, name)?;
        let ino = self.alloc_inode()?;
        let mut tx = Tx::default();
        let b = self.alloc_block(&mut tx)?;
        let mut inode = self.new_inode(ino, Kind::Dir, parent, name)?;
        let (gen, pgen) = (inode.generation, self.gen_of(parent)?);
        let blk = build_dir_block(&[
            DirEntry { ino, gen, kind: Kind::Dir, name: b".".to_vec() },
            DirEntry { ino: parent, gen: pgen, kind: Kind::Dir, name: b"..".to_vec() },
        ])
        .expect("two entries fit");
        self.write_block(u64::from(b), &blk, Role::Directory)?;
        inode.size = BLOCK as u64;
        inode.blocks = 1;
        inode.direct[0] = b;
        self.put_inode(ino, &inode)?;
        self.write_bitmaps()?;
        self.barrier()?;
        self.dir_add(parent, DirEntry { ino, gen, kind: Kind::Dir, name: name.to_vec() })?;
        let mut p = self.get_inode(parent)?;
        p.nlink = p.nlink.saturating_add(1);
        self.put_inode(parent, &p)?;
        Ok(ino)
    }

    fn link(&mut self, ino: u32, parent: u32, name: &[u8]) -> Result<()> {
        self.check_new(parent, name)?;
        let mut inode = self.get_inode(ino)?;
        match inode.kind {
            Kind::Dir => return Err(Error::IsDir),
            Kind::Free => return Err(Error::NotFound),
            Kind::File => {}
        }
        if inode.nlink as usize >= MAX_BACKLINKS {
            return Err(Error::TooManyLinks);
        }
        inode.nlink += 1;
        if self.design.backpointers() {
            inode.backlinks.push(BackLink::new(parent, name));
        }
        self.put_inode(ino, &inode)?;
        self.barrier()?;
        let gen = inode.generation;
        self.dir_add(parent, DirEntry { ino, gen, kind: Kind::File, name: name.to_vec() })
    }

    /// Frees every block of a dead inode (after its zeroed inode, which keeps only the
    /// generation, is written).
    fn release_inode(&mut self, ino: u32, inode: &Inode) -> Result<()> {
        let (data, ind) = self.all_blocks(ino, inode);
        let mut tx = Tx::default();
        for (l, b) in data {
            self.release_data(ino, inode, l, b, &mut tx)?;
        }
        tx.freed.extend(ind.into_iter().map(|(b, _)| b));
        self.put_inode(ino, &Inode { generation: inode.generation, ..Inode::default() })?;
        self.barrier()?;
        for b in tx.freed {
            self.free_block(b);
        }
        self.free_inode(ino);
        self.write_bitmaps()
    }

    fn unlink(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let ino = self.lookup(parent, name)?;
        let mut inode = self.get_inode(ino)?;
        if inode.kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        self.dir_remove(parent, name)?;
        self.barrier()?;
        inode.nlink = inode.nlink.saturating_sub(1);
        let link = BackLink::new(parent, name);
        if let Some(i) = inode.backlinks.iter().position(|&p| p == link) {
            inode.backlinks.remove(i);
        }
        if inode.nlink == 0 {
            self.release_inode(ino, &inode)
        } else {
            self.put_inode(ino, &inode)
        }
    }

    fn rmdir(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let ino = self.lookup(parent, name)?;
        let inode = self.get_inode(ino)?;
        if inode.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        if !self.dir_list(ino)?.is_empty() {
            return Err(Error::NotEmpty);
        }
        self.dir_remove(parent, name)?;
        self.barrier()?;
        let mut p = self.get_inode(parent)?;
        p.nlink = p.nlink.saturating_sub(1).max(2);
        self.put_inode(parent, &p)?;
        self.release_inode(ino, &inode)
    }

    fn rename(&mut self, op: u32, oname: &[u8], np: u32, nname: &[u8]) -> Result<()> {
        check_name(oname)?;
        check_name(nname)?;
        let ino = self.lookup(op, oname)?;
        let inode = self.get_inode(ino)?;
        let is_dir = inode.kind == Kind::Dir;
        if self.get_inode(np)?.kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        if is_dir {
            // Refuse to move a directory under itself.
            let mut at = np;
            for _ in 0..4096 {
                if at == ino {
                    return Err(Error::BadName);
                }
                if at == ROOT {
                    break;
                }
                at = self.dir_find(at, b"..")?.map_or(ROOT, |e| e.ino);
            }
        }
        if let Some(t) = self.dir_find(np, nname)? {
            if t.ino == ino {
                return Ok(());
            }
            let target = self.get_inode(t.ino)?;
            match (is_dir, target.kind == Kind::Dir) {
                (true, true) => self.rmdir(np, nname)?,
                (false, false) => self.unlink(np, nname)?,
                (true, false) => return Err(Error::NotDir),
                (false, true) => return Err(Error::IsDir),
            }
        }
        // Link under the new name, move the back link, unlink the old name.
        let gen = inode.generation;
        self.dir_add(np, DirEntry { ino, gen, kind: inode.kind, name: nname.to_vec() })?;
        self.barrier()?;
        if self.design.backpointers() {
            // The back link identifies the entry, so it moves even within one directory.
            let mut inode = self.get_inode(ino)?;
            let old = BackLink::new(op, oname);
            if let Some(i) = inode.backlinks.iter().position(|&p| p == old) {
                inode.backlinks[i] = BackLink::new(np, nname);
            }
            if op != np {
                Core::touch(&mut inode);
            }
            self.put_inode(ino, &inode)?;
        }
        if op != np {
            let mut inode = self.get_inode(ino)?;
            Core::touch(&mut inode);
            self.put_inode(ino, &inode)?;
            if is_dir {
                let b = inode.direct[0];
                let npgen = self.gen_of(np)?;
                let mut entries = self.dir_block(ino, gen, b)?;
                for e in entries.iter_mut().filter(|e| e.name == b"..") {
                    e.ino = np;
                    e.gen = npgen;
                }
                let blk = build_dir_block(&entries).expect("same entries fit");
                self.write_block(u64::from(b), &blk, Role::Directory)?;
                let mut o = self.get_inode(op)?;
                o.nlink = o.nlink.saturating_sub(1).max(2);
                self.put_inode(op, &o)?;
                let mut n = self.get_inode(np)?;
                n.nlink = n.nlink.saturating_add(1);
                self.put_inode(np, &n)?;
            }
            self.barrier()?;
        }
        self.dir_remove(op, oname)?;
        Ok(())
    }

    fn usage(&self) -> Usage {
        Usage {
            blocks: self.sb.blocks - self.sb.data_start,
            bfree: self.bfree,
            files: u64::from(self.sb.inodes) - 1,
            ffree: self.ifree,
        }
    }
}

impl Fs {
    /// Opens the file system of `design` on `dev`, runs the design's recovery, and (NoFS)
    /// starts the background scan. Fails if the image is not a `design` image.
    pub fn open(design: Design, dev: Arc<dyn BlockDevice>, opts: Options) -> Result<Arc<Fs>> {
        let bad = |reason: String| Error::BadImage { design, reason };
        if dev.size() < BLOCK as u64 {
            return Err(bad(format!("device of {} bytes holds no superblock", dev.size())));
        }
        let mut blk = vec![0u8; BLOCK];
        dev.read_at(0, &mut blk).map_err(io_err(0))?;
        let sb = Superblock::decode(&blk).map_err(bad)?;
        if sb.design != design.id() {
            let found = Design::from_id(sb.design).map_or("unknown".to_string(), |d| d.to_string());
            return Err(bad(format!("the image was made for design {found}")));
        }
        if sb.blocks * BLOCK as u64 > dev.size() {
            return Err(bad(format!("superblock says {} blocks, device is smaller", sb.blocks)));
        }
        let nblocks = sb.blocks as usize;
        let ninodes = sb.inodes as usize;
        let mut core = Core {
            design,
            opts,
            dev: dev.clone(),
            sb: sb.clone(),
            inodes: HashMap::new(),
            balloc: vec![UNKNOWN; nblocks],
            ialloc: vec![UNKNOWN; ninodes],
            bfree: 0,
            ifree: 0,
            bhint: sb.data_start,
            ihint: 2,
            bbitmap: Vec::new(),
            ibitmap: Vec::new(),
            dirty_bitmaps: BTreeSet::new(),
            verified: HashSet::new(),
            accounted: HashSet::new(),
            scanning: false,
            events: Vec::new(),
        };
        core.balloc[..sb.data_start as usize].fill(USED);
        core.ialloc[0] = USED;
        core.ialloc[ROOT as usize] = USED;
        if design.persistent_bitmaps() {
            let read = |start: u64, n: u64| -> Result<Vec<u8>> {
                let mut v = vec![0u8; n as usize * BLOCK];
                dev.read_at(start * BLOCK as u64, &mut v).map_err(io_err(start))?;
                Ok(v)
            };
            core.bbitmap = read(sb.bbitmap_start, sb.bbitmap_blocks)?;
            core.ibitmap = read(sb.ibitmap_start, sb.ibitmap_blocks)?;
            if !sb.clean && design.ordered() {
                // Recovery: ordered writes leave at worst leaks; rebuild the bitmaps from
                // what is reachable.
                let walk = crate::fsck::walk(design, dev.as_ref(), &sb)?;
                core.bbitmap.fill(0);
                core.ibitmap.fill(0);
                for i in 0..=sb.data_start {
                    core.bbitmap[(i / 8) as usize] |= 1 << (i % 8);
                }
                for &b in walk.blocks.keys() {
                    core.bbitmap[(b / 8) as usize] |= 1 << (b % 8);
                }
                core.ibitmap[0] |= 1;
                for &i in walk.names.keys().chain([&ROOT]) {
                    core.ibitmap[(i / 8) as usize] |= 1 << (i % 8);
                }
                for b in sb.bbitmap_start..sb.data_start.min(sb.itable_start) {
                    core.dirty_bitmaps.insert(b);
                }
                core.write_bitmaps()?;
            }
            for b in sb.data_start..sb.blocks {
                let used = core.bbitmap[(b / 8) as usize] & (1 << (b % 8)) != 0;
                core.balloc[b as usize] = if used { USED } else { FREE };
                core.bfree += u64::from(!used);
            }
            for i in 2..sb.inodes {
                let used = core.ibitmap[(i / 8) as usize] & (1 << (i % 8)) != 0;
                core.ialloc[i as usize] = if used { USED } else { FREE };
                core.ifree += u64::from(!used);
            }
        } else {
            core.scanning = true;
        }
        if design.keeps_clean_flag() {
            let dirty = Superblock { clean: false, ..sb };
            core.write_block(0, &dirty.encode(), Role::Superblock)?;
            core.barrier()?;
        }
        let fs = Arc::new(Fs {
            design,
            core: Mutex::new(core),
            scan_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            scan: Mutex::new(None),
        });
        if !design.persistent_bitmaps() {
            let f = fs.clone();
            let handle = std::thread::Builder::new()
                .name("researchfs-scan".into())
                .spawn(move || f.scan())
                .map_err(|source| Error::Io { block: 0, source })?;
            *fs.scan.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        }
        Ok(fs)
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic inside an operation leaves the state as consistent as a crash would;
        // keep serving rather than poisoning every later request.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The design.
    pub fn design(&self) -> Design {
        self.design
    }

    /// NoFS' background scan: examine every inode (its back links against its parents'
    /// entries), reclaim orphans, mark the blocks whose backpointers agree with a live
    /// inode, then declare every other block free. Each step takes the lock briefly.
    fn scan(&self) {
        let n = self.lock().sb.inodes;
        let mut cands: Vec<(u32, u32, Vec<BackLink>)> = Vec::new();
        for start in (2..n).step_by(64) {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let mut c = self.lock();
            for ino in start..(start + 64).min(n) {
                if c.ialloc[ino as usize] != UNKNOWN {
                    continue;
                }
                match c.get_inode(ino) {
                    Ok(i) if i.kind != Kind::Free => {
                        let mut bl = i.backlinks.clone();
                        bl.sort_unstable();
                        bl.dedup();
                        cands.push((ino, i.generation, bl));
                    }
                    _ => {
                        c.ialloc[ino as usize] = FREE;
                        c.ifree += 1;
                    }
                }
            }
        }
        let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
        for (ino, gen, bl) in &cands {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let mut c = self.lock();
            let vp =
                bl.iter().filter(|l| l.dir < n && c.names_in(**l, *ino, *gen) > 0).map(|l| l.dir);
            let vp = vp.collect();
            parents.insert(*ino, vp);
        }
        {
            let mut c = self.lock();
            let mut live: HashSet<u32> = (1..n).filter(|&i| c.ialloc[i as usize] == USED).collect();
            loop {
                let before = live.len();
                for (ino, vp) in &parents {
                    if !live.contains(ino) && vp.iter().any(|p| live.contains(p)) {
                        live.insert(*ino);
                    }
                }
                if live.len() == before {
                    break;
                }
            }
            for (ino, _, _) in &cands {
                if c.ialloc[*ino as usize] != UNKNOWN {
                    continue;
                }
                if live.contains(ino) {
                    c.ialloc[*ino as usize] = USED;
                } else {
                    c.ialloc[*ino as usize] = FREE;
                    c.ifree += 1;
                    c.events.push(Detection {
                        kind: Some(ErrorKind::Oi),
                        action: Action::Reclaimed,
                        what: format!("inode {ino}: no directory confirms its back links"),
                    });
                }
            }
        }
        for ino in 1..n {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let mut c = self.lock();
            if c.ialloc[ino as usize] != USED || c.accounted.contains(&ino) {
                continue;
            }
            let Ok(inode) = c.get_inode(ino) else { continue };
            let (data, ind) = c.all_blocks(ino, &inode);
            let dir = inode.kind == Kind::Dir;
            for (b, _) in ind {
                if c.balloc[b as usize] == UNKNOWN {
                    c.balloc[b as usize] = USED;
                }
            }
            for (l, b) in data {
                if c.owns(ino, inode.generation, l, b, dir).unwrap_or(false)
                    && c.balloc[b as usize] == UNKNOWN
                {
                    c.balloc[b as usize] = USED;
                }
            }
            c.accounted.insert(ino);
        }
        let (start, end) = {
            let c = self.lock();
            (c.sb.data_start, c.sb.blocks)
        };
        let mut b = start;
        while b < end {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let mut c = self.lock();
            for x in b..(b + 1024).min(end) {
                if c.balloc[x as usize] != UNKNOWN {
                    continue;
                }
                // A block whose backpointer names a live inode that does not point to it
                // is an orphan (allocated by an update that never reached its inode).
                if c.maybe_owned(x).unwrap_or(false) {
                    c.events.push(Detection {
                        kind: Some(ErrorKind::Ob),
                        action: Action::Reclaimed,
                        what: format!("block {x}: its owner does not point to it"),
                    });
                }
                c.balloc[x as usize] = FREE;
                c.bfree += 1;
            }
            b += 1024;
        }
        let mut c = self.lock();
        c.scanning = false;
        c.bhint = start;
        c.ihint = 2;
        drop(c);
        self.scan_cv.notify_all();
    }

    /// Whether allocation information is complete (always, except during NoFS' scan).
    pub fn scan_done(&self) -> bool {
        !self.lock().scanning
    }

    /// Blocks until NoFS' background scan has finished (returns at once otherwise).
    pub fn wait_scan(&self) {
        let mut c = self.lock();
        while c.scanning && !self.stop.load(Ordering::Relaxed) {
            c = self
                .scan_cv
                .wait_timeout(c, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn stop_scan(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.scan.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Clean shutdown: stops the scan, marks the superblock clean and flushes (NoFS writes
    /// nothing and flushes only when mounted durable).
    pub fn shutdown(&self) -> Result<()> {
        self.stop_scan();
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let c = self.lock();
        if c.design.keeps_clean_flag() {
            c.write_block(
                0,
                &Superblock { clean: true, ..c.sb.clone() }.encode(),
                Role::Superblock,
            )?;
        }
        if c.design.persistent_bitmaps() || c.opts.durable {
            c.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    /// Stops without writing anything more, as a crash would (the scan thread is stopped).
    pub fn crash(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.stop_scan();
    }

    /// The entry `name` of directory `parent` (NoFS: checks the child's back link).
    pub fn lookup(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.lock().lookup(parent, name.as_ref())
    }

    /// The inode of `path` ("a/b/c", relative to the root; "" is the root).
    pub fn resolve(&self, path: &str) -> Result<u32> {
        let mut c = self.lock();
        let mut ino = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            ino = c.lookup(ino, part.as_bytes())?;
        }
        Ok(ino)
    }

    /// Attributes (NoFS: the first call after mount verifies and repairs the inode).
    pub fn getattr(&self, ino: u32) -> Result<Attr> {
        self.lock().getattr(ino)
    }

    /// Creates an empty file.
    pub fn create(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.lock().create(parent, name.as_ref())
    }

    /// Creates a directory.
    pub fn mkdir(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<u32> {
        self.lock().mkdir(parent, name.as_ref())
    }

    /// Adds the name `name` in `parent` for file `ino`.
    pub fn link(&self, ino: u32, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.lock().link(ino, parent, name.as_ref())
    }

    /// Removes a file name (and the file with its last name).
    pub fn unlink(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.lock().unlink(parent, name.as_ref())
    }

    /// Removes an empty directory.
    pub fn rmdir(&self, parent: u32, name: impl AsRef<[u8]>) -> Result<()> {
        self.lock().rmdir(parent, name.as_ref())
    }

    /// Renames (not atomic: the new name is added before the old one is removed).
    pub fn rename(
        &self,
        parent: u32,
        name: impl AsRef<[u8]>,
        newparent: u32,
        newname: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.lock().rename(parent, name.as_ref(), newparent, newname.as_ref())
    }

    /// Up to `len` bytes from `off` (NoFS: EIO for a block whose backpointer disagrees).
    pub fn read(&self, ino: u32, off: u64, len: usize) -> Result<Vec<u8>> {
        self.lock().read(ino, off, len)
    }

    /// Writes `data` at `off`; returns the bytes written.
    pub fn write(&self, ino: u32, off: u64, data: &[u8]) -> Result<usize> {
        self.lock().write(ino, off, data)
    }

    /// Sets the size.
    pub fn truncate(&self, ino: u32, size: u64) -> Result<()> {
        self.lock().truncate(ino, size)
    }

    /// Makes `ino` durable: a flush, except on NoFS mounted without durability.
    pub fn fsync(&self, _ino: u32) -> Result<()> {
        let c = self.lock();
        if c.design.fsync_flushes(c.opts) {
            c.dev.flush().map_err(io_err(0))?;
        }
        Ok(())
    }

    /// The entries of a directory (without "." and "..") as (name, inode, kind).
    pub fn readdir(&self, ino: u32) -> Result<Vec<(Vec<u8>, u32, Kind)>> {
        Ok(self.lock().dir_list(ino)?.into_iter().map(|e| (e.name, e.ino, e.kind)).collect())
    }

    /// Space accounting (NoFS during its scan counts unexamined blocks as used).
    pub fn statfs(&self) -> Usage {
        self.lock().usage()
    }

    /// Every inconsistency the file system noticed since it was opened.
    pub fn detections(&self) -> Vec<Detection> {
        self.lock().events.clone()
    }

    /// The inode-table block holding `ino`.
    pub fn inode_block(&self, ino: u32) -> u64 {
        self.lock().sb.inode_location(ino).0
    }

    /// The blocks `ino` points to, each with its role (directory or data, and indirect).
    pub fn blocks_of(&self, ino: u32) -> Result<Vec<(Role, u64)>> {
        let mut c = self.lock();
        let inode = c.get_inode(ino)?;
        let (data, ind) = c.all_blocks(ino, &inode);
        let role = if inode.kind == Kind::Dir { Role::Directory } else { Role::Data };
        let mut out: Vec<(Role, u64)> =
            data.into_iter().map(|(_, b)| (role, u64::from(b))).collect();
        out.extend(ind.into_iter().map(|(b, _)| (Role::Indirect, u64::from(b))));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    fn fresh(design: Design, mb: u64) -> (Arc<MemDevice>, Arc<Fs>) {
        let dev = Arc::new(MemDevice::new(mb << 20));
        mkfs(design, dev.as_ref(), dev.size()).unwrap();
        let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
        fs.wait_scan();
        (dev, fs)
    }

    fn reopen(design: Design, dev: &Arc<MemDevice>) -> Arc<Fs> {
        let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
        fs.wait_scan();
        fs
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn mkfs_then_fsck_is_clean_for_every_design() {
        for d in Design::ALL {
            let (dev, fs) = fresh(d, 4);
            fs.shutdown().unwrap();
            let r = crate::fsck(d, dev.as_ref()).unwrap();
            assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);
            assert_eq!(r.inodes_reachable, 1);
        }
    }

    #[test]
    fn round_trips_survive_remount_and_fsck_for_every_design() {
        for d in Design::ALL {
            let (dev, fs) = fresh(d, 64);
            let a = fs.mkdir(ROOT, "a").unwrap();
            let f = fs.create(a, "f").unwrap();
            // Past the direct blocks and into the double-indirect tree.
            let p = d.payload();
            let big = pattern((NDIRECT + d.ptrs_per_block() + 3) * p + 17, 3);
            fs.write(f, 0, &big).unwrap();
            fs.write(f, 5, b"hello").unwrap();
            let g = fs.create(ROOT, "g").unwrap();
            fs.write(g, 0, b"small").unwrap();
            fs.link(g, a, "g2").unwrap();
            fs.rename(ROOT, "g", a, "g3").unwrap();
            for i in 0..200 {
                fs.create(a, format!("many-{i:03}")).unwrap();
            }
            for i in 0..100 {
                fs.unlink(a, format!("many-{i:03}")).unwrap();
            }
            fs.shutdown().unwrap();
            let r = crate::fsck(d, dev.as_ref()).unwrap();
            assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);

            let fs = reopen(d, &dev);
            let f = fs.resolve("a/f").unwrap();
            let mut expect = big.clone();
            expect[5..10].copy_from_slice(b"hello");
            assert_eq!(fs.read(f, 0, expect.len() + 100).unwrap(), expect, "{d}");
            let g3 = fs.resolve("a/g3").unwrap();
            assert_eq!(fs.resolve("a/g2").unwrap(), g3);
            assert_eq!(fs.getattr(g3).unwrap().nlink, 2);
            assert!(matches!(fs.resolve("g"), Err(Error::NotFound)));
            assert_eq!(fs.readdir(fs.resolve("a").unwrap()).unwrap().len(), 3 + 100);
            let before = fs.statfs();
            fs.truncate(f, 10).unwrap();
            assert_eq!(fs.read(f, 0, 100).unwrap(), &expect[..10]);
            fs.truncate(f, 20).unwrap();
            assert_eq!(&fs.read(f, 0, 100).unwrap()[10..], &[0u8; 10]);
            assert!(fs.statfs().bfree > before.bfree);
            fs.unlink(a, "g2").unwrap();
            fs.unlink(a, "g3").unwrap();
            fs.unlink(a, "f").unwrap();
            for i in 100..200 {
                fs.unlink(a, format!("many-{i:03}")).unwrap();
            }
            assert!(matches!(fs.rmdir(ROOT, "nope"), Err(Error::NotFound)));
            fs.rmdir(ROOT, "a").unwrap();
            fs.shutdown().unwrap();
            let r = crate::fsck(d, dev.as_ref()).unwrap();
            assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);
            assert_eq!(r.inodes_reachable, 1, "{d}");
            let fs = reopen(d, &dev);
            let u = fs.statfs();
            assert_eq!(u.ffree, u.files - 1, "{d}: every inode but the root is free again");
            assert_eq!(u.bfree, u.blocks - 1, "{d}: every block but the root's is free again");
        }
    }

    #[test]
    fn namespace_errors() {
        let (_dev, fs) = fresh(Design::Nofs, 4);
        let a = fs.mkdir(ROOT, "a").unwrap();
        fs.create(a, "x").unwrap();
        assert!(matches!(fs.create(a, "x"), Err(Error::Exists)));
        assert!(matches!(fs.rmdir(ROOT, "a"), Err(Error::NotEmpty)));
        assert!(matches!(fs.create(a, "a/b"), Err(Error::BadName)));
        assert!(matches!(fs.rename(ROOT, "a", a, "inside"), Err(Error::BadName)));
        assert!(matches!(fs.unlink(ROOT, "a"), Err(Error::IsDir)));
    }

    #[test]
    fn nofs_issues_no_flush_even_on_fsync_unless_durable() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let base = dev.flushes();
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, b"x").unwrap();
        fs.fsync(f).unwrap();
        fs.shutdown().unwrap();
        assert_eq!(dev.flushes(), base);
        let fs = Fs::open(Design::Nofs, dev.clone(), Options { durable: true }).unwrap();
        fs.fsync(f).unwrap();
        assert_eq!(dev.flushes(), base + 1);
        fs.crash();
    }

    #[test]
    fn ordered_core_flushes_between_dependent_writes() {
        let (dev, fs) = fresh(Design::Ordered, 4);
        let base = dev.flushes();
        let f = fs.create(ROOT, "f").unwrap();
        assert!(dev.flushes() > base, "inode before entry");
        let mid = dev.flushes();
        fs.write(f, 0, b"x").unwrap();
        assert!(dev.flushes() > mid, "data before inode");
        fs.crash();
        let (dev, fs) = fresh(Design::Orderless, 4);
        let base = dev.flushes();
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, b"x").unwrap();
        assert_eq!(dev.flushes(), base);
        fs.fsync(f).unwrap();
        assert_eq!(dev.flushes(), base + 1);
        fs.crash();
    }

    #[test]
    fn wrong_design_is_refused_with_its_name() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        fs.shutdown().unwrap();
        let err = Fs::open(Design::Orderless, dev.clone(), Options::default()).err().unwrap();
        assert!(err.to_string().contains("made for design nofs"), "{err}");
        let blank = Arc::new(MemDevice::new(1 << 20));
        assert!(Fs::open(Design::Nofs, blank, Options::default()).is_err());
    }

    /// Corrupts the backpointer of the block at `role`/`index` of `path`'s blocks.
    fn corrupt(dev: &MemDevice, fs: &Fs, path: &str, role: Role, what: &[u8]) {
        let ino = fs.resolve(path).unwrap();
        let (_, b) = fs.blocks_of(ino).unwrap().into_iter().find(|(r, _)| *r == role).unwrap();
        dev.write_at(b * BLOCK as u64, what, WriteInfo::new(Role::Other)).unwrap();
    }

    #[test]
    fn nofs_data_backpointer_mismatch_is_eio_not_data() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let f = fs.create(ROOT, "f").unwrap();
        let other = fs.create(ROOT, "other").unwrap();
        fs.write(f, 0, b"secret").unwrap();
        // A backpointer naming another live file: two files claim one block (TP).
        let bp = [other.to_le_bytes(), 0u32.to_le_bytes()].concat();
        corrupt(&dev, &fs, "f", Role::Data, &bp);
        let err = fs.read(f, 0, 6).unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Tp), .. }), "{err}");
        // Wrong offset, right owner: garbage for this position (GD).
        let bp = [f.to_le_bytes(), 7u32.to_le_bytes()].concat();
        corrupt(&dev, &fs, "f", Role::Data, &bp);
        let err = fs.read(f, 0, 6).unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Gd), .. }), "{err}");
        assert_eq!(err.errno(), libc::EIO);
        // Overwriting is refused too: the block may be someone else's.
        assert!(fs.write(f, 0, b"x").is_err());
        // The same corruption on orderless reads back silently.
        let (dev, fs) = fresh(Design::Orderless, 4);
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, b"secret").unwrap();
        corrupt(&dev, &fs, "f", Role::Data, b"XX");
        assert_eq!(fs.read(f, 0, 6).unwrap(), b"XXcret");
    }

    #[test]
    fn nofs_indirect_backpointer_mismatch_is_eio() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let f = fs.create(ROOT, "f").unwrap();
        let p = Design::Nofs.payload();
        fs.write(f, 0, &pattern((NDIRECT + 2) * p, 1)).unwrap();
        assert_eq!(fs.read(f, (NDIRECT * p) as u64, 4).unwrap().len(), 4);
        corrupt(&dev, &fs, "f", Role::Indirect, &[f.to_le_bytes(), 0u32.to_le_bytes()].concat());
        let err = fs.read(f, (NDIRECT * p) as u64, 4).unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Gd), .. }), "{err}");
        // Direct blocks do not depend on the indirect block and still read.
        assert_eq!(fs.read(f, 0, 4).unwrap(), pattern(4, 1));
    }

    #[test]
    fn nofs_directory_dot_backpointer_mismatch_is_eio() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let d = fs.mkdir(ROOT, "d").unwrap();
        fs.create(d, "x").unwrap();
        // "." of d's block now names the root.
        corrupt(&dev, &fs, "d", Role::Directory, &ROOT.to_le_bytes());
        let err = fs.readdir(d).unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
        assert!(fs.lookup(d, "x").is_err());
    }

    #[test]
    fn nofs_backlink_mismatch_is_eio_and_link_count_is_repaired() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let a = fs.mkdir(ROOT, "a").unwrap();
        let b = fs.mkdir(ROOT, "b").unwrap();
        let f = fs.create(a, "f").unwrap();
        fs.link(f, b, "g").unwrap();
        fs.shutdown().unwrap();
        // Rewrite the inode with a back link to the root instead of b: b's entry no longer
        // agrees with the inode it names.
        let (blk, off) = fs.lock().sb.inode_location(f);
        let mut raw = vec![0u8; BLOCK];
        dev.read_at(blk * BLOCK as u64, &mut raw).unwrap();
        let mut inode = Inode::decode(&raw[off..off + INODE_SIZE]);
        inode.backlinks = vec![BackLink::new(a, b"f"), BackLink::new(ROOT, b"g")];
        inode.encode_into(&mut raw[off..off + INODE_SIZE]);
        dev.write_at(blk * BLOCK as u64, &raw, WriteInfo::new(Role::Other)).unwrap();
        let fs = reopen(Design::Nofs, &dev);
        let err = fs.resolve("b/g").unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
        // Through a, the file is fine, and its link count is corrected to the one
        // directory that confirms it.
        let f = fs.resolve("a/f").unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        assert!(fs
            .detections()
            .iter()
            .any(|d| d.kind == Some(ErrorKind::Hl) && d.action == Action::Repaired));
    }

    #[test]
    fn nofs_is_usable_during_its_scan_and_reclaims_orphans() {
        let (dev, fs) = fresh(Design::Nofs, 16);
        let a = fs.mkdir(ROOT, "a").unwrap();
        let f = fs.create(a, "f").unwrap();
        fs.write(f, 0, &pattern(20_000, 2)).unwrap();
        fs.shutdown().unwrap();
        // Orphan f: remove a's entry behind the file system's back.
        let ai = fs.lock().get_inode(a).unwrap();
        let d = ai.direct[0];
        let blk = build_dir_block(&[
            DirEntry { ino: a, gen: ai.generation, kind: Kind::Dir, name: b".".to_vec() },
            DirEntry { ino: ROOT, gen: 0, kind: Kind::Dir, name: b"..".to_vec() },
        ])
        .unwrap();
        dev.write_at(u64::from(d) * BLOCK as u64, &blk, WriteInfo::new(Role::Other)).unwrap();
        let fs = Fs::open(Design::Nofs, dev.clone(), Options::default()).unwrap();
        // Usable at once: create and write while the scan may still run.
        let g = fs.create(ROOT, "g").unwrap();
        fs.write(g, 0, b"during scan").unwrap();
        fs.wait_scan();
        assert!(fs.scan_done());
        assert_eq!(fs.read(g, 0, 100).unwrap(), b"during scan");
        let ev = fs.detections();
        assert!(ev.iter().any(|e| e.kind == Some(ErrorKind::Oi)), "{ev:?}");
        let u = fs.statfs();
        // Root + a + g remain; f and its 5 blocks were reclaimed.
        assert_eq!(u.files - u.ffree, 3);
        assert_eq!(u.blocks - u.bfree, 3);
    }

    /// The raw block `b` of `dev`.
    fn raw(dev: &MemDevice, b: u64) -> Vec<u8> {
        let mut v = vec![0u8; BLOCK];
        dev.read_at(b * BLOCK as u64, &mut v).unwrap();
        v
    }

    /// Puts back an earlier copy of block `b`, as if the writes since were lost.
    fn lose_writes(dev: &MemDevice, b: u64, old: &[u8]) {
        dev.write_at(b * BLOCK as u64, old, WriteInfo::new(Role::Other)).unwrap();
    }

    #[test]
    fn nofs_notices_a_lost_second_link_in_the_same_directory() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let a = fs.mkdir(ROOT, "a").unwrap();
        let f = fs.create(a, "f").unwrap();
        fs.write(f, 0, b"linked twice").unwrap();
        let (iblk, _) = fs.lock().sb.inode_location(f);
        let before = raw(&dev, iblk);
        fs.link(f, a, "g").unwrap();
        fs.shutdown().unwrap();
        // The inode write of the link is lost; the entry "g" reached the disk.
        lose_writes(&dev, iblk, &before);
        let fs = reopen(Design::Nofs, &dev);
        let err = fs.resolve("a/g").unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
        let f2 = fs.resolve("a/f").unwrap();
        assert_eq!(f2, f);
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        assert_eq!(fs.read(f, 0, 100).unwrap(), b"linked twice");
        let r = crate::check::classify(fs.as_ref(), &[]);
        assert!(r.silent().is_empty(), "{:?}", r.silent());
    }

    #[test]
    fn nofs_reused_inode_and_block_do_not_pass_for_the_deleted_file() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let b = fs.mkdir(ROOT, "b").unwrap();
        let old = fs.create(b, "old").unwrap();
        fs.write(old, 0, &pattern(3000, 1)).unwrap();
        let old_inode = fs.lock().get_inode(old).unwrap();
        let (iblk, _) = fs.lock().sb.inode_location(old);
        let dblk = u64::from(fs.lock().get_inode(b).unwrap().direct[0]);
        let (inode_before, dir_before) = (raw(&dev, iblk), raw(&dev, dblk));
        fs.unlink(b, "old").unwrap();
        let new = fs.create(b, "new").unwrap();
        fs.write(new, 0, &pattern(3000, 2)).unwrap();
        let new_inode = fs.lock().get_inode(new).unwrap();
        // The scenario needs the number and the block reused.
        assert_eq!(new, old);
        assert_eq!(new_inode.direct[0], old_inode.direct[0]);
        assert_eq!(new_inode.generation, old_inode.generation + 1);
        fs.shutdown().unwrap();
        // Only the new file's data block reached the disk.
        lose_writes(&dev, iblk, &inode_before);
        lose_writes(&dev, dblk, &dir_before);
        let fs = reopen(Design::Nofs, &dev);
        let ino = fs.resolve("b/old").unwrap();
        let err = fs.read(ino, 0, 3000).unwrap_err();
        assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Tp), .. }), "{err}");
        let r = crate::check::classify(fs.as_ref(), &[]);
        assert!(r.silent().is_empty(), "{:?}", r.silent());

        // And the other way round: the inode and data reached the disk, the directory
        // block did not; the old name now names a newer generation.
        let (dev, fs) = fresh(Design::Nofs, 4);
        let b = fs.mkdir(ROOT, "b").unwrap();
        let old = fs.create(b, "old").unwrap();
        fs.write(old, 0, &pattern(3000, 1)).unwrap();
        let dblk = u64::from(fs.lock().get_inode(b).unwrap().direct[0]);
        let other = fs.mkdir(ROOT, "c").unwrap();
        let dir_before = raw(&dev, dblk);
        fs.unlink(b, "old").unwrap();
        let new = fs.create(other, "new").unwrap();
        assert_eq!(new, old);
        fs.write(new, 0, &pattern(3000, 2)).unwrap();
        fs.shutdown().unwrap();
        lose_writes(&dev, dblk, &dir_before);
        let fs = reopen(Design::Nofs, &dev);
        let err = fs.resolve("b/old").unwrap_err();
        assert!(err.to_string().contains("generation"), "{err}");
        assert_eq!(fs.read(fs.resolve("c/new").unwrap(), 0, 3000).unwrap(), pattern(3000, 2));
    }

    #[test]
    fn rename_within_a_directory_moves_the_back_link() {
        let (dev, fs) = fresh(Design::Nofs, 4);
        let a = fs.mkdir(ROOT, "a").unwrap();
        let f = fs.create(a, "f").unwrap();
        fs.link(f, a, "g").unwrap();
        fs.rename(a, "f", a, "h").unwrap();
        fs.shutdown().unwrap();
        let r = crate::fsck(Design::Nofs, dev.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let fs = reopen(Design::Nofs, &dev);
        assert_eq!(fs.resolve("a/h").unwrap(), f);
        assert_eq!(fs.resolve("a/g").unwrap(), f);
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert!(fs.detections().is_empty(), "{:?}", fs.detections());
    }
}
