//! The part of a researchfs file system that differs between designs: where flushes go,
//! whether allocation bitmaps are persisted, whether blocks and inodes carry backpointers,
//! and what mount-time recovery does. The core in [`crate::fs`] asks these questions; it
//! never matches on a design's name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A researchfs design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// ext2-like: no ordering, no flushes except on fsync, persisted bitmaps, no checks
    /// beyond a directory block's structure, no recovery. The negative control.
    Orderless,
    /// The No-Order File System (thesis ch. 5): backpointers in every data and indirect
    /// block, a "." entry in every directory block, back links in every inode, a
    /// mutual-agreement check on every access, allocation rebuilt by a background scan,
    /// and no flushes at all unless mounted with [`Options::durable`].
    Nofs,
    /// The core with flush-ordered writes: a flush between every pair of dependent writes
    /// and bitmaps rebuilt at mount after an unclean shutdown. The benchmark's
    /// comparison point.
    #[serde(rename = "ordered-core")]
    Ordered,
}

/// Mount options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Options {
    /// NoFS only: make fsync flush (the thesis' "unless the user asks for durability").
    pub durable: bool,
}

impl Design {
    /// Every design.
    pub const ALL: [Design; 3] = [Design::Orderless, Design::Nofs, Design::Ordered];

    /// The name on bob's command line.
    pub fn name(self) -> &'static str {
        match self {
            Design::Orderless => "orderless",
            Design::Nofs => "nofs",
            Design::Ordered => "ordered-core",
        }
    }

    /// The id stored in the superblock.
    pub fn id(self) -> u8 {
        match self {
            Design::Orderless => 1,
            Design::Nofs => 2,
            Design::Ordered => 3,
        }
    }

    /// The design whose superblock id is `id`.
    pub fn from_id(id: u8) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.id() == id)
    }

    /// Blocks and inodes carry backpointers and every access checks them.
    pub fn backpointers(self) -> bool {
        self == Design::Nofs
    }

    /// Allocation bitmaps are written to disk (NoFS keeps them in memory only).
    pub fn persistent_bitmaps(self) -> bool {
        self != Design::Nofs
    }

    /// A flush separates dependent writes.
    pub fn ordered(self) -> bool {
        self == Design::Ordered
    }

    /// Whether fsync issues a flush.
    pub fn fsync_flushes(self, opts: Options) -> bool {
        match self {
            Design::Nofs => opts.durable,
            Design::Orderless | Design::Ordered => true,
        }
    }

    /// The durability timeout T_D, in write requests, of the disk this design wants under
    /// it: it checkpoints and reuses freed blocks after the disk's asynchronous durability
    /// notifications (OptFS). `None`: the design never asks the disk.
    pub fn adn_requests(self) -> Option<u32> {
        None
    }

    /// Whether the superblock's clean flag is maintained (NoFS writes no superblock at
    /// all after mkfs: nothing in it changes).
    pub fn keeps_clean_flag(self) -> bool {
        self != Design::Nofs
    }

    /// Bytes of file data per data block.
    pub fn payload(self) -> usize {
        if self.backpointers() {
            crate::layout::BLOCK - crate::layout::BACKPOINTER
        } else {
            crate::layout::BLOCK
        }
    }

    /// Bytes reserved at the start of data and indirect blocks.
    pub fn header(self) -> usize {
        crate::layout::BLOCK - self.payload()
    }

    /// Pointers per indirect block.
    pub fn ptrs_per_block(self) -> usize {
        self.payload() / 4
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = String;
    fn from_str(s: &str) -> Result<Design, String> {
        Design::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            format!("unknown researchfs design `{s}` (expected orderless, nofs or ordered-core)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>().unwrap(), d);
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{}\"", d.name()));
            assert_eq!(Design::from_id(d.id()), Some(d));
        }
        assert!("ext2".parse::<Design>().is_err());
    }

    #[test]
    fn only_nofs_skips_fsync_flushes_by_default() {
        assert!(!Design::Nofs.fsync_flushes(Options::default()));
        assert!(Design::Nofs.fsync_flushes(Options { durable: true }));
        assert!(Design::Orderless.fsync_flushes(Options::default()));
    }
}
