//! The namespace operations (lookup, create, mkdir, link, unlink, rmdir, rename,
//! getattr) and NoFS' verification of an inode on first use.

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use super::{check_name, now, Action, Attr, Core, Detection, Tx, Usage};
use crate::device::Role;
use crate::layout::{build_dir_block, BackLink, DirEntry, Inode, Kind, BLOCK, MAX_BACKLINKS, ROOT};
use crate::{Error, ErrorKind, Result};

impl Core {
    pub(super) fn lookup(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
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
    pub(super) fn verify(&mut self, ino: u32) -> Result<()> {
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

    pub(super) fn getattr(&mut self, ino: u32) -> Result<Attr> {
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
    pub(super) fn new_inode(
        &mut self,
        ino: u32,
        kind: Kind,
        parent: u32,
        name: &[u8],
    ) -> Result<Inode> {
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
    pub(super) fn gen_of(&mut self, ino: u32) -> Result<u32> {
        Ok(self.get_inode(ino)?.generation)
    }

    pub(super) fn check_new(&mut self, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        if self.dir_find(parent, name)?.is_some() {
            return Err(Error::Exists);
        }
        Ok(())
    }

    pub(super) fn create(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
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

    pub(super) fn mkdir(&mut self, parent: u32, name: &[u8]) -> Result<u32> {
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

    pub(super) fn link(&mut self, ino: u32, parent: u32, name: &[u8]) -> Result<()> {
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
    pub(super) fn release_inode(&mut self, ino: u32, inode: &Inode) -> Result<()> {
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

    pub(super) fn unlink(&mut self, parent: u32, name: &[u8]) -> Result<()> {
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

    pub(super) fn rmdir(&mut self, parent: u32, name: &[u8]) -> Result<()> {
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

    pub(super) fn rename(&mut self, op: u32, oname: &[u8], np: u32, nname: &[u8]) -> Result<()> {
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
        let mut replaced = None;
        // Soft updates and the flush-ordered core keep a crash from leaving more names
        // than the link count says (FFS' rule, which their recovery relies on).
        let counted = self.soft.is_some() || self.design.ordered();
        // An existing target: gone first, except where the rename is counted (a file over
        // a file is replaced in place there).
        if let Some(t) = self.dir_find(np, nname)? {
            if t.ino == ino {
                return Ok(());
            }
            let target = self.get_inode(t.ino)?;
            if counted && !is_dir && target.kind == Kind::File {
                replaced = Some(t.ino);
            } else {
                match (is_dir, target.kind == Kind::Dir) {
                    (true, true) => self.rmdir(np, nname)?,
                    (false, false) => self.unlink(np, nname)?,
                    (true, false) => return Err(Error::NotDir),
                    (false, true) => return Err(Error::IsDir),
                }
            }
        }
        if counted {
            return self.rename_counted(op, oname, np, nname, ino, replaced);
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
                self.move_dir_parent(ino, gen, inode.direct[0], op, np)?;
            }
            self.barrier()?;
        }
        self.dir_remove(op, oname)?;
        Ok(())
    }

    /// Rename on soft updates and on the flush-ordered core: the file's link count is
    /// raised before the new name is written and lowered after the old one is gone; an
    /// existing target's entry is pointed at the file in place (its name never
    /// disappears) and its link count lowered after that; within one directory block the
    /// whole rename is one write. Across blocks a crash can still leave both names (with
    /// a link count of 2), as the paper says of soft updates; never two names with a
    /// count of 1, which a later unlink of either would turn into a name of a free inode.
    fn rename_counted(
        &mut self,
        op: u32,
        oname: &[u8],
        np: u32,
        nname: &[u8],
        ino: u32,
        replaced: Option<u32>,
    ) -> Result<()> {
        let inode = self.get_inode(ino)?;
        let (gen, kind) = (inode.generation, inode.kind);
        let is_dir = kind == Kind::Dir;
        let entry = DirEntry { ino, gen, kind, name: nname.to_vec() };
        if op == np && self.dir_rename_in_block(op, oname, entry.clone())? {
            self.barrier()?;
            return self.drop_replaced(replaced);
        }
        if !is_dir {
            let mut i = self.get_inode(ino)?;
            i.nlink = i.nlink.saturating_add(1);
            self.put_inode(ino, &i)?;
            self.barrier()?;
        }
        match replaced {
            Some(_) => self.dir_replace(np, entry)?,
            None => self.dir_add(np, entry)?,
        }
        self.barrier()?;
        if op != np {
            let mut inode = self.get_inode(ino)?;
            Core::touch(&mut inode);
            self.put_inode(ino, &inode)?;
            if is_dir {
                self.move_dir_parent(ino, gen, inode.direct[0], op, np)?;
            }
            self.barrier()?;
        }
        self.dir_remove(op, oname)?;
        self.barrier()?;
        if !is_dir {
            let mut i = self.get_inode(ino)?;
            i.nlink = i.nlink.saturating_sub(1);
            self.put_inode(ino, &i)?;
        }
        self.drop_replaced(replaced)
    }

    /// After an unclean shutdown: lowers every file's link count that is higher than the
    /// names a walk of the tree found for it (`names`: inode to names), as FFS' fsck and
    /// soft updates' mount do; a count too high would keep a file alive after its last
    /// unlink. Each is noted as a repaired HL. Returns how many were lowered.
    pub(super) fn lower_link_counts(&mut self, names: &HashMap<u32, usize>) -> Result<u32> {
        let mut inos: Vec<(u32, usize)> = names.iter().map(|(&i, &n)| (i, n)).collect();
        inos.sort_unstable();
        let mut lowered = 0u32;
        for (ino, n) in inos {
            let mut inode = self.get_inode(ino)?;
            if inode.kind == Kind::File && usize::from(inode.nlink) > n {
                self.events.push(Detection {
                    kind: Some(ErrorKind::Hl),
                    action: Action::Repaired,
                    what: format!("inode {ino}: link count {} but {n} names", inode.nlink),
                });
                inode.nlink = n as u16;
                self.put_inode(ino, &inode)?;
                lowered += 1;
            }
        }
        Ok(lowered)
    }

    /// A directory `ino` (generation `gen`, first block `block`) moved from parent `op` to
    /// `np`: its ".." names `np`, `op` loses the link ".." gave it and `np` gains one.
    fn move_dir_parent(&mut self, ino: u32, gen: u32, block: u32, op: u32, np: u32) -> Result<()> {
        let npgen = self.gen_of(np)?;
        let mut entries = self.dir_block(ino, gen, block)?;
        for e in entries.iter_mut().filter(|e| e.name == b"..") {
            e.ino = np;
            e.gen = npgen;
        }
        let blk = build_dir_block(&entries).expect("same entries fit");
        self.write_block(u64::from(block), &blk, Role::Directory)?;
        let mut o = self.get_inode(op)?;
        o.nlink = o.nlink.saturating_sub(1).max(2);
        self.put_inode(op, &o)?;
        let mut n = self.get_inode(np)?;
        n.nlink = n.nlink.saturating_add(1);
        self.put_inode(np, &n)?;
        Ok(())
    }

    /// The link count of a file whose name a rename took over goes down (after that
    /// name's new entry, which the caller has put before a barrier).
    fn drop_replaced(&mut self, replaced: Option<u32>) -> Result<()> {
        let Some(t) = replaced else { return Ok(()) };
        let mut inode = self.get_inode(t)?;
        inode.nlink = inode.nlink.saturating_sub(1);
        if inode.nlink == 0 {
            self.release_inode(t, &inode)
        } else {
            self.put_inode(t, &inode)
        }
    }

    pub(super) fn usage(&self) -> Usage {
        let (wb, wi) = self.soft.as_ref().map_or((0, 0), |s| s.borrow().waiting_frees());
        Usage {
            blocks: self.sb.blocks - self.sb.data_start,
            bfree: self.bfree + wb,
            files: u64::from(self.sb.inodes) - 1,
            ffree: self.ifree + wi,
        }
    }
}
