//! Making an empty file system of a design.

use super::{io_err, now};
use crate::design::Design;
use crate::device::{BlockDevice, Role, WriteInfo};
use crate::layout::{build_dir_block, DirEntry, Inode, Kind, Superblock, BLOCK, INODE_SIZE, ROOT};
use crate::{Error, Result};

/// Creates an empty file system of `design` in the first `size` bytes of `dev` and flushes.
pub fn mkfs(design: Design, dev: &dyn BlockDevice, size: u64) -> Result<()> {
    let bad = |reason: String| Error::BadImage { design, reason };
    if size > dev.size() {
        return Err(bad(format!("size {size} exceeds the device ({} bytes)", dev.size())));
    }
    // A journaling design's journal follows the file system's own blocks.
    let journal = if design.journal().is_some() {
        super::JOURNAL_BLOCKS
    } else if design.valor().is_some() {
        // Valor's undo log, likewise.
        super::VALOR_LOG_BLOCKS
    } else {
        0
    };
    let blocks = (size / BLOCK as u64).saturating_sub(journal);
    let sb = Superblock::compute(design.id(), blocks).map_err(bad)?;
    if design.journal().is_some() {
        super::journal::format(dev, sb.blocks)?;
    }
    if design.valor().is_some() {
        super::valor::format(dev, sb.blocks)?;
    }
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
