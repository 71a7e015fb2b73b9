//! The block map of a file: direct, single- and double-indirect pointers, loaded and
//! changed inside one operation's [`Tx`] and checked against backpointers in NoFS.

use super::{io_err, Action, Core, Slot, Tree, Tx};
use crate::layout::{
    pos_dind_child, u32_at, Backpointer, Inode, Kind, BLOCK, NDIRECT, POS_DIND, POS_IND,
};
use crate::{Error, ErrorKind, Result};

impl Core {
    pub(super) fn new_ind(&mut self, owner: u32, gen: u32, pos: u32, tx: &mut Tx) -> Result<u32> {
        let b = self.alloc_block(tx)?;
        let mut blk = vec![0u8; BLOCK];
        if self.design.backpointers() {
            Backpointer { ino: owner, offset: pos, gen }.write(&mut blk);
        }
        tx.ind.insert(b, blk);
        tx.dirty.insert(b);
        Ok(b)
    }

    pub(super) fn load_ind(
        &mut self,
        owner: u32,
        gen: u32,
        b: u32,
        pos: u32,
        tx: &mut Tx,
    ) -> Result<()> {
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
    pub(super) fn mismatch(
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

    pub(super) fn ptr_in(&self, tx: &Tx, b: u32, idx: usize) -> u32 {
        u32_at(&tx.ind[&b], self.hdr() + 4 * idx)
    }

    pub(super) fn set_ptr_in(&self, tx: &mut Tx, b: u32, idx: usize, v: u32) {
        let at = self.hdr() + 4 * idx;
        if let Some(blk) = tx.ind.get_mut(&b) {
            blk[at..at + 4].copy_from_slice(&v.to_le_bytes());
            tx.dirty.insert(b);
        }
    }

    pub(super) fn slot(
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

    pub(super) fn get_slot(&self, inode: &Inode, tx: &Tx, s: Slot) -> u32 {
        match s {
            Slot::Direct(i) => inode.direct[i],
            Slot::In(b, i) => self.ptr_in(tx, b, i),
        }
    }

    pub(super) fn set_slot(&self, inode: &mut Inode, tx: &mut Tx, s: Slot, v: u32) {
        match s {
            Slot::Direct(i) => inode.direct[i] = v,
            Slot::In(b, i) => self.set_ptr_in(tx, b, i, v),
        }
    }

    /// The block for logical block `l` of `ino` (0 for a hole), read-only.
    pub(super) fn bmap(&mut self, ino: u32, inode: &Inode, l: u64, tx: &mut Tx) -> Result<u32> {
        let mut copy = inode.clone();
        Ok(match self.slot(ino, &mut copy, l, false, tx)? {
            Some(s) => self.get_slot(&copy, tx, s),
            None => 0,
        })
    }

    /// Every data pointer (logical block, block) and indirect block (block, position)
    /// of an inode, by walking the tree; NoFS skips indirect blocks that fail their check.
    pub(super) fn all_blocks(&mut self, ino: u32, inode: &Inode) -> Tree {
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
    pub(super) fn quiet_load(
        &mut self,
        owner: u32,
        gen: u32,
        b: u32,
        pos: u32,
        tx: &mut Tx,
    ) -> bool {
        let n = self.events.len();
        let ok = self.load_ind(owner, gen, b, pos, tx).is_ok();
        self.events.truncate(n);
        ok
    }

    /// Whether block `b` carries the backpointer of generation `gen` of `ino` for logical
    /// block `l` (a "." entry naming both for a directory). Always true without
    /// backpointers.
    pub(super) fn owns(&self, ino: u32, gen: u32, l: u64, b: u32, dir: bool) -> Result<bool> {
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
}
