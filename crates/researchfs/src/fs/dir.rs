//! Directories: their blocks of entries, lookup, adding and removing names, and the
//! back links NoFS checks names against.

use super::{Action, Core, Tx};
use crate::device::Role;
use crate::layout::{build_dir_block, parse_dir_block, BackLink, DirEntry, Kind, BLOCK};
use crate::{Error, ErrorKind, Result};

impl Core {
    pub(super) fn dir_block(&mut self, dir: u32, gen: u32, b: u32) -> Result<Vec<DirEntry>> {
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
    pub(super) fn dir_blocks(&mut self, dir: u32) -> Result<Vec<(u32, Vec<DirEntry>)>> {
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

    pub(super) fn dir_find(&mut self, dir: u32, name: &[u8]) -> Result<Option<DirEntry>> {
        for (_, entries) in self.dir_blocks(dir)? {
            if let Some(e) = entries.into_iter().find(|e| e.name == name) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    pub(super) fn dir_list(&mut self, dir: u32) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for (_, entries) in self.dir_blocks(dir)? {
            out.extend(entries.into_iter().filter(|e| e.name != b"." && e.name != b".."));
        }
        Ok(out)
    }

    pub(super) fn dir_add(&mut self, dir: u32, entry: DirEntry) -> Result<()> {
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

    pub(super) fn dir_remove(&mut self, dir: u32, name: &[u8]) -> Result<DirEntry> {
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
    pub(super) fn names_in(&mut self, link: BackLink, ino: u32, gen: u32) -> usize {
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
}

impl Core {
    /// Soft updates' rename inside one directory block: the old entry goes and the new
    /// name appears (or an existing entry `entry.name` is pointed at `entry.ino`) in one
    /// block write, which a crash keeps or loses whole. False when the old entry's block
    /// cannot hold the result or the target sits in another block.
    pub(super) fn dir_rename_in_block(
        &mut self,
        dir: u32,
        old: &[u8],
        entry: DirEntry,
    ) -> Result<bool> {
        for (b, mut entries) in self.dir_blocks(dir)? {
            let Some(i) = entries.iter().position(|e| e.name == old) else { continue };
            entries.remove(i);
            match entries.iter_mut().find(|e| e.name == entry.name) {
                Some(t) => *t = entry,
                None => {
                    if self.dir_find(dir, &entry.name)?.is_some() {
                        return Ok(false);
                    }
                    entries.push(entry);
                }
            }
            return match build_dir_block(&entries) {
                Some(blk) => self.write_block(u64::from(b), &blk, Role::Directory).map(|()| true),
                None => Ok(false),
            };
        }
        Err(Error::NotFound)
    }

    /// Points the existing entry `entry.name` of `dir` at `entry.ino` (soft updates'
    /// rename over an existing file: the target's name never disappears).
    pub(super) fn dir_replace(&mut self, dir: u32, entry: DirEntry) -> Result<()> {
        for (b, mut entries) in self.dir_blocks(dir)? {
            if let Some(t) = entries.iter_mut().find(|e| e.name == entry.name) {
                *t = entry;
                let blk = build_dir_block(&entries).expect("same footprint fits");
                return self.write_block(u64::from(b), &blk, Role::Directory);
            }
        }
        Err(Error::NotFound)
    }
}
