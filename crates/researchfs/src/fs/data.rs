//! File data: reads, writes and truncation over the block map, committed in dependency
//! order (data and bitmaps, then indirect blocks, then the inode).

use super::{Action, Core, Tx};
use crate::device::Role;
use crate::layout::{Backpointer, Inode, Kind, BLOCK, NDIRECT, POS_DIND};
use crate::{Error, ErrorKind, Result};

impl Core {
    pub(super) fn read_data(&mut self, ino: u32, gen: u32, l: u64, b: u32) -> Result<Vec<u8>> {
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

    pub(super) fn commit(&mut self, ino: u32, inode: &Inode, tx: Tx) -> Result<()> {
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

    pub(super) fn write(&mut self, ino: u32, off: u64, data: &[u8]) -> Result<usize> {
        let mut inode = self.get_inode(ino)?;
        match inode.kind {
            Kind::Dir => return Err(Error::IsDir),
            Kind::Free => return Err(Error::NotFound),
            Kind::File => {}
        }
        if data.is_empty() {
            return Ok(0);
        }
        let end = off.checked_add(data.len() as u64).ok_or(Error::TooBig)?;
        if self.txn_open() {
            return self.txn_write(ino, &inode, off, end, data);
        }
        let mut tx = Tx::default();
        // Conquest keeps a large file's data on the disk; the device hears which writes
        // those are.
        let large = end.max(inode.size) > crate::conquest::PM_THRESHOLD;
        self.dev.hint_large_file(large);
        let written = self.write_run(ino, &mut inode, off, end, data, &mut tx);
        self.dev.hint_large_file(false);
        written?;
        inode.size = inode.size.max(end);
        Core::touch(&mut inode);
        self.commit(ino, &inode, tx)?;
        Ok(data.len())
    }

    /// The data blocks of [`Core::write`], allocated and written in runs.
    fn write_run(
        &mut self,
        ino: u32,
        inode: &mut Inode,
        off: u64,
        end: u64,
        data: &[u8],
        tx: &mut Tx,
    ) -> Result<()> {
        let (pl, hdr) = (self.pl() as u64, self.hdr());
        let mut run: Option<(u32, Vec<u8>)> = None;
        let mut pos = off;
        while pos < end {
            let l = pos / pl;
            let inb = (pos % pl) as usize;
            let n = ((pl - pos % pl).min(end - pos)) as usize;
            let slot = self.slot(ino, inode, l, true, tx)?.ok_or(Error::TooBig)?;
            let mut b = self.get_slot(inode, tx, slot);
            let mut buf = if b == 0 {
                b = self.alloc_block(tx)?;
                self.set_slot(inode, tx, slot, b);
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
        Ok(())
    }

    pub(super) fn read(&mut self, ino: u32, off: u64, len: usize) -> Result<Vec<u8>> {
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
    pub(super) fn release_data(
        &mut self,
        ino: u32,
        inode: &Inode,
        l: u64,
        b: u32,
        tx: &mut Tx,
    ) -> Result<()> {
        if self.owns(ino, inode.generation, l, b, inode.kind == Kind::Dir)? {
            tx.freed.push(b);
        }
        Ok(())
    }

    pub(super) fn truncate(&mut self, ino: u32, size: u64) -> Result<()> {
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
}
