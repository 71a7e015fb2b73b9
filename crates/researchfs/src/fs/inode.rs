//! The inode table: reading and writing inodes through the design's layout.

use super::{now, Core};
use crate::device::Role;
use crate::layout::{Inode, INODE_SIZE};
use crate::{Error, ErrorKind, Result};

impl Core {
    pub(super) fn get_inode(&mut self, ino: u32) -> Result<Inode> {
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

    pub(super) fn put_inode(&mut self, ino: u32, inode: &Inode) -> Result<()> {
        let (b, off) = self.sb.inode_location(ino);
        let mut blk = self.read_block(b)?;
        inode.encode_into(&mut blk[off..off + INODE_SIZE]);
        self.write_block(b, &blk, Role::Inode)?;
        self.inodes.insert(ino, inode.clone());
        Ok(())
    }

    pub(super) fn touch(inode: &mut Inode) {
        let (s, ns) = now();
        inode.mtime = s;
        inode.mtime_ns = ns;
    }
}
