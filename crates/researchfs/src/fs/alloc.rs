//! Block and inode allocation: the in-memory maps, the on-disk bitmaps (where the
//! design keeps them), and NoFS' "maybe owned" answer while its scan runs.

use super::soft::Free;
use super::{io_err, Core, Tx, FREE, UNKNOWN, USED};
use crate::device::Role;
use crate::layout::{u32_at, Kind, BLOCK};
use crate::{Error, Result};

impl Core {
    pub(super) fn set_bit(&mut self, inode_map: bool, idx: u64, used: bool) {
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

    pub(super) fn write_bitmaps(&mut self) -> Result<()> {
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
    pub(super) fn maybe_owned(&mut self, b: u64) -> Result<bool> {
        let mut head = [0u8; 12];
        self.dev.read_at(b * BLOCK as u64, &mut head).map_err(io_err(b))?;
        let owner = u32_at(&head, 0);
        if owner == 0 || owner >= self.sb.inodes {
            return Ok(false);
        }
        let i = self.get_inode(owner)?;
        Ok(i.kind != Kind::Free && i.generation == u32_at(&head, 8))
    }

    pub(super) fn alloc_block(&mut self, tx: &mut Tx) -> Result<u32> {
        let (start, end) = (self.sb.data_start, self.sb.blocks);
        let mut found = None;
        let mut b = self.bhint.max(start);
        while b < end {
            // Reuse after notification: a block freed by a transaction not yet durable
            // stays unused.
            let blocked = self.jnl.as_ref().is_some_and(|j| j.borrow().reuse_blocked(b));
            if self.balloc[b as usize] == FREE && !blocked {
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
        let Some(b) = found else {
            return self.soft_retry(|c| c.alloc_block(tx));
        };
        self.balloc[b as usize] = USED;
        self.bfree -= 1;
        self.bhint = b + 1;
        self.set_bit(false, b, true);
        if let Some(j) = &self.jnl {
            j.borrow_mut().note_alloc(b);
        }
        tx.allocated = true;
        Ok(b as u32)
    }

    pub(super) fn free_block(&mut self, b: u32) {
        if !self.in_data(b) || self.balloc[b as usize] == FREE {
            return;
        }
        if self.defers_frees() {
            // Soft updates: free only once the pointer's removal is durable.
            return self.defer_free(Free::Block(b));
        }
        self.balloc[b as usize] = FREE;
        self.bfree += 1;
        self.bhint = self.bhint.min(u64::from(b));
        self.set_bit(false, u64::from(b), false);
        if let Some(j) = &self.jnl {
            j.borrow_mut().note_free(u64::from(b));
        }
    }

    pub(super) fn alloc_inode(&mut self) -> Result<u32> {
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
        let Some(i) = found else {
            return self.soft_retry(|c| c.alloc_inode());
        };
        self.ialloc[i as usize] = USED;
        self.ifree -= 1;
        self.ihint = i + 1;
        self.set_bit(true, u64::from(i), true);
        self.accounted.insert(i);
        self.verified.insert(i);
        Ok(i)
    }

    pub(super) fn free_inode(&mut self, ino: u32) {
        if self.defers_frees() {
            return self.defer_free(Free::Inode(ino));
        }
        if self.ialloc[ino as usize] != FREE {
            self.ialloc[ino as usize] = FREE;
            self.ifree += 1;
        }
        self.ihint = self.ihint.min(ino);
        self.set_bit(true, u64::from(ino), false);
        self.verified.remove(&ino);
        self.accounted.remove(&ino);
    }

    /// Out of space: on soft updates with frees waiting, write back (which releases them)
    /// and try once more; otherwise ENOSPC.
    fn soft_retry<T>(&mut self, again: impl FnOnce(&mut Core) -> Result<T>) -> Result<T> {
        let waiting = self.soft.as_ref().is_some_and(|s| s.borrow().waiting_frees() != (0, 0));
        if !waiting || self.soft_releasing {
            return Err(Error::NoSpace);
        }
        self.soft_writeback()?;
        again(self)
    }

    /// An inode reached through a checked lookup is live: the scan must not reclaim it.
    pub(super) fn mark_live(&mut self, ino: u32) {
        if self.ialloc[ino as usize] == UNKNOWN {
            self.ialloc[ino as usize] = USED;
        }
    }
}
