//! What jbd2's recovery used of the journal, as opposed to what it read: reuse by reads
//! with the journal's readahead taken out (`--no-recovery-used` turns it off).
//!
//! jbd2 reads the journal 128 KiB ahead of the block it needs during replay
//! (`do_readahead` in fs/jbd2/recovery.c), so a state's check logs every journal block of
//! that window, and states that differ only in an uncommitted transaction's blocks, which
//! recovery skips, are read apart and mounted apart. Recovery's path through the journal
//! is a deterministic sequential walk: from the journal superblock's `s_start`, each of
//! its three passes reads one block at a position fixed by the blocks before it, and the
//! scan stops at the first block whose magic or sequence does not follow; the other two
//! passes go no further than the scan. This module follows that walk over a state's own
//! bytes (the on-disk format of the kernel's Documentation/filesystems/ext4/journal.rst,
//! the rules of `do_one_pass`, `count_tags` and `wrap`) and counts every journal block
//! from `s_start` to the block the walk stops at, inclusive, as used; the ring's other
//! blocks are not. Where the kernel may stop early (a commit block's checksum or time
//! checks) the walk goes on, which only makes the used set larger, never smaller.
//!
//! So two states that agree on every sector their checks read, save the ring blocks
//! outside that walk which only recovery's readahead read, recover alike. The other
//! readers of the state are kept whole: before the walk the loop device's cache is
//! dropped, so every read after recovery reaches the view and is logged again, and the
//! mount's code outside jbd2 does not read journal blocks (ext4's `block_validity`,
//! on by default, holds the journal's blocks as a system zone that no inode may map).
//!
//! The kernel's own instruments would have been better, and were studied first: on this
//! host the function tracer cannot be filtered (`set_ftrace_filter` is refused) and
//! prints no arguments, kprobes and BPF are absent, jbd2 has no tracepoint in recovery,
//! and every block recovery reads arrives as a readahead bio (`jread` itself reads
//! through `do_readahead`), so the block layer's `RA` flag does not tell the two apart.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use crate::image::SectorSet;

const SECTOR: u64 = 512;
const JBD2_MAGIC: u32 = 0xC03B_3998;
const DESCRIPTOR_BLOCK: u32 = 1;
const COMMIT_BLOCK: u32 = 2;
const SUPERBLOCK_V1: u32 = 3;
const SUPERBLOCK_V2: u32 = 4;
const REVOKE_BLOCK: u32 = 5;
const INCOMPAT_64BIT: u32 = 0x2;
const INCOMPAT_CSUM_V2: u32 = 0x8;
const INCOMPAT_CSUM_V3: u32 = 0x10;
const INCOMPAT_FAST_COMMIT: u32 = 0x20;
const FLAG_SAME_UUID: u16 = 0x2;
const FLAG_LAST_TAG: u16 = 0x8;
const EXT4_JOURNAL_INODE: u32 = 8;
const EXT4_COMPAT_HAS_JOURNAL: u32 = 0x4;
const EXT4_COMPAT_FAST_COMMIT: u32 = 0x400;

/// Where an ext3/ext4 image keeps its internal journal, read once per run from the base
/// image with `debugfs` (the journal inode and its map are made by mkfs and no workload
/// changes them; a state whose copy of either differs from the base's is not refined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JournalLayout {
    /// The file system's block size in bytes.
    block_bytes: u64,
    /// The journal inode's extents: (first logical block, first physical block, blocks).
    extents: Vec<(u64, u64, u64)>,
    /// The bytes of the disk that say where the journal is: its inode, and the blocks of
    /// its map (ext3's indirect blocks, an extent tree's index and leaf blocks).
    guard: Vec<Range<u64>>,
}

impl JournalLayout {
    /// The layout of `image`'s journal, or `None` where there is none to refine: no
    /// journal, an external one, or fast commits (a second area recovery reads its own
    /// way).
    pub(crate) fn of_image(image: &Path) -> Option<JournalLayout> {
        let out = crate::device::cmd::Cmd::new("debugfs", Duration::from_secs(30))
            .args(&[std::ffi::OsStr::new("-f"), std::ffi::OsStr::new("-"), image.as_os_str()])
            .stdin("stats\nstat <8>\nimap <8>\n")
            .run()
            .ok()?;
        if out.code != Some(0) {
            return None;
        }
        JournalLayout::parse(&out.stdout)
    }

    /// [`JournalLayout::of_image`]'s reading of debugfs' answers to `stats`, `stat <8>`
    /// and `imap <8>`.
    fn parse(text: &str) -> Option<JournalLayout> {
        let field = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
        };
        let features = field("Filesystem features:")?;
        if !features.split_whitespace().any(|f| f == "has_journal")
            || features.split_whitespace().any(|f| f == "fast_commit")
            || field("Journal device:").is_some()
        {
            return None;
        }
        let block_bytes: u64 = field("Block size:")?.parse().ok()?;
        let inode_size: u64 = field("Inode size:")?.parse().ok()?;
        // "located at block 25, offset 0x0700"
        let located = text.lines().find_map(|l| l.trim().strip_prefix("located at block "))?;
        let (block, offset) = located.split_once(", offset ")?;
        let block: u64 = block.trim().parse().ok()?;
        let offset = u64::from_str_radix(offset.trim().trim_start_matches("0x"), 16).ok()?;
        let start = block * block_bytes + offset;
        let mut guard = Vec::new();
        guard.push(start..start + inode_size);
        // The map after "EXTENTS:" (ext4) or "BLOCKS:" (ext3's indirect blocks):
        // "(0-11):1299-1310, (IND):1311, (12-1023):1312-2323"; a label that is not a
        // logical range ("IND", "DIND", "ETB0") names a block of the map itself.
        let mut lines = text.lines().skip_while(|l| !matches!(l.trim(), "EXTENTS:" | "BLOCKS:"));
        lines.next()?;
        let range = |r: &str| -> Option<(u64, u64)> {
            match r.split_once('-') {
                Some((a, b)) => Some((a.trim().parse().ok()?, b.trim().parse().ok()?)),
                None => {
                    let a = r.trim().parse().ok()?;
                    Some((a, a))
                }
            }
        };
        let mut extents = Vec::new();
        for item in lines.take_while(|l| l.trim_start().starts_with('(')) {
            for entry in item.split(", ").map(str::trim).filter(|e| !e.is_empty()) {
                let (label, physical) = entry.strip_prefix('(')?.split_once("):")?;
                let (p, q) = range(physical)?;
                match range(label) {
                    Some((l, m)) if m >= l && q - p == m - l => extents.push((l, p, m - l + 1)),
                    Some(_) => return None,
                    None => guard.push(p * block_bytes..(q + 1) * block_bytes),
                }
            }
        }
        if extents.is_empty() {
            return None;
        }
        Some(JournalLayout { block_bytes, extents, guard })
    }

    /// The disk byte offset of the journal's logical block `block`.
    fn byte_of(&self, block: u64) -> Option<u64> {
        self.extents
            .iter()
            .find(|&&(l, _, n)| (l..l + n).contains(&block))
            .map(|&(l, p, _)| (p + block - l) * self.block_bytes)
    }

    /// The sectors of the journal's ring that recovery of the state whose bytes `read`
    /// gives (before recovery) does not use, or `None` when the state is not one this
    /// module can reason about (then nothing is taken out). `base` reads the base image,
    /// against which the state's journal inode is compared.
    pub(crate) fn unused_sectors(
        &self,
        read: &dyn Fn(u64, &mut [u8]) -> std::io::Result<()>,
        base: &dyn Fn(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<Option<SectorSet>> {
        // The ext4 superblock as the state has it: still this journal, no fast commits.
        let mut sb = [0u8; 1024];
        read(1024, &mut sb)?;
        let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let compat = le32(&sb, 0x5C);
        if u16::from_le_bytes([sb[0x38], sb[0x39]]) != 0xEF53
            || 1024u64 << le32(&sb, 0x18).min(16) != self.block_bytes
            || compat & EXT4_COMPAT_HAS_JOURNAL == 0
            || compat & EXT4_COMPAT_FAST_COMMIT != 0
            || le32(&sb, 0xE0) != EXT4_JOURNAL_INODE
            || le32(&sb, 0xE4) != 0
        {
            return Ok(None);
        }
        // The journal inode and its map as the base has them: the layout is the state's.
        for bytes in &self.guard {
            let len = (bytes.end - bytes.start) as usize;
            let (mut mine, mut theirs) = (vec![0u8; len], vec![0u8; len]);
            read(bytes.start, &mut mine)?;
            base(bytes.start, &mut theirs)?;
            if mine != theirs {
                return Ok(None);
            }
        }
        let Some(at) = self.byte_of(0) else { return Ok(None) };
        let mut jsb = vec![0u8; self.block_bytes as usize];
        read(at, &mut jsb)?;
        let Some(journal) = Journal::of_superblock(&jsb, self.block_bytes) else {
            return Ok(None);
        };
        if (0..journal.maxlen).any(|b| self.byte_of(b).is_none()) {
            return Ok(None);
        }
        let used = journal.walk(|b, buf| read(self.byte_of(b).expect("mapped above"), buf))?;
        let per_block = self.block_bytes / SECTOR;
        let mut unused = SectorSet::new();
        for b in journal.first..journal.maxlen {
            if !used.contains(&b) {
                let s = self.byte_of(b).expect("mapped above") / SECTOR;
                unused.insert(s..s + per_block);
            }
        }
        Ok(Some(unused))
    }
}

/// The journal superblock's facts the walk needs.
#[derive(Debug, Clone, Copy)]
struct Journal {
    first: u64,
    maxlen: u64,
    start: u64,
    sequence: u32,
    tag_bytes: usize,
    csum_v2or3: bool,
    block_bytes: usize,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

impl Journal {
    /// `None` for a superblock the walk does not model (fast commits, a size that is not
    /// the file system's block, a start outside the ring): such a state keeps its reads.
    fn of_superblock(jsb: &[u8], block_bytes: u64) -> Option<Journal> {
        if be32(jsb, 0) != JBD2_MAGIC {
            return None;
        }
        let v2 = match be32(jsb, 4) {
            SUPERBLOCK_V1 => false,
            SUPERBLOCK_V2 => true,
            _ => return None,
        };
        // The compat features need no reading: v1 checksums (`calc_chksums`) read a
        // descriptor's blocks, which the walk counts as used anyway.
        let incompat = if v2 { be32(jsb, 40) } else { 0 };
        if incompat & INCOMPAT_FAST_COMMIT != 0 || u64::from(be32(jsb, 12)) != block_bytes {
            return None;
        }
        let (first, maxlen, start) =
            (u64::from(be32(jsb, 20)), u64::from(be32(jsb, 16)), u64::from(be32(jsb, 28)));
        if first == 0 || first >= maxlen || (start != 0 && !(first..maxlen).contains(&start)) {
            return None;
        }
        let csum_v3 = incompat & INCOMPAT_CSUM_V3 != 0;
        let csum_v2 = incompat & INCOMPAT_CSUM_V2 != 0;
        // journal_tag_bytes()
        let tag_bytes = if csum_v3 {
            16
        } else {
            let sz = 12 + if csum_v2 { 2 } else { 0 };
            if incompat & INCOMPAT_64BIT != 0 {
                sz
            } else {
                sz - 4
            }
        };
        Some(Journal {
            first,
            maxlen,
            start,
            sequence: be32(jsb, 24),
            tag_bytes,
            csum_v2or3: csum_v2 || csum_v3,
            block_bytes: block_bytes as usize,
        })
    }

    /// `wrap()`: a position past the ring's end comes round to its start.
    fn wrap(&self, pos: u64) -> u64 {
        if pos >= self.maxlen {
            pos - (self.maxlen - self.first)
        } else {
            pos
        }
    }

    /// `count_tags()`: how many blocks a descriptor block describes.
    fn count_tags(&self, block: &[u8]) -> u64 {
        let size = self.block_bytes - if self.csum_v2or3 { 4 } else { 0 };
        let (mut at, mut n) = (12usize, 0u64);
        while at + self.tag_bytes <= size {
            let flags = u16::from_be_bytes([block[at + 6], block[at + 7]]);
            n += 1;
            at += self.tag_bytes;
            if flags & FLAG_SAME_UUID == 0 {
                at += 16;
            }
            if flags & FLAG_LAST_TAG != 0 {
                break;
            }
        }
        n
    }

    /// The journal blocks recovery may read: from `s_start` along the scan's path to the
    /// block it stops at, with every block a descriptor describes. `block(b)` reads
    /// logical block `b` of the journal.
    fn walk(
        &self,
        mut read: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<std::collections::BTreeSet<u64>> {
        let mut b = vec![0u8; self.block_bytes];
        let mut used = std::collections::BTreeSet::new();
        if self.start == 0 {
            // A clean journal: recovery reads nothing of the ring.
            return Ok(used);
        }
        let ring = self.maxlen - self.first;
        let (mut pos, mut sequence) = (self.start, self.sequence);
        loop {
            // Past the journal's end the kernel's read fails and so does the mount, after
            // which nothing is refined: a successful mount never got here.
            if used.len() as u64 >= ring || !(self.first..self.maxlen).contains(&pos) {
                break;
            }
            used.insert(pos);
            read(pos, &mut b)?;
            let (magic, kind, seq) = (be32(&b, 0), be32(&b, 4), be32(&b, 8));
            let tags = (kind == DESCRIPTOR_BLOCK).then(|| self.count_tags(&b));
            pos = self.wrap(pos + 1);
            if magic != JBD2_MAGIC || seq != sequence {
                break;
            }
            match (kind, tags) {
                (DESCRIPTOR_BLOCK, Some(n)) => {
                    // The blocks it describes, each wrapped as the replay pass reads them.
                    let mut p = pos;
                    for _ in 0..n {
                        used.insert(p);
                        p = self.wrap(p + 1);
                    }
                    pos = self.wrap(pos + n);
                }
                (COMMIT_BLOCK, _) => sequence = sequence.wrapping_add(1),
                (REVOKE_BLOCK, _) => {}
                _ => break,
            }
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: usize = 1024;

    fn header(kind: u32, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; BS];
        b[0..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&kind.to_be_bytes());
        b[8..12].copy_from_slice(&seq.to_be_bytes());
        b
    }

    /// A descriptor of `n` tags in the v3 format (16-byte tags, the first with a UUID).
    fn descriptor(seq: u32, n: usize) -> Vec<u8> {
        let mut b = header(DESCRIPTOR_BLOCK, seq);
        let mut at = 12;
        for i in 0..n {
            let mut flags = if i == 0 { 0 } else { FLAG_SAME_UUID as u32 };
            if i + 1 == n {
                flags |= FLAG_LAST_TAG as u32;
            }
            b[at + 4..at + 8].copy_from_slice(&flags.to_be_bytes());
            at += 16 + if i == 0 { 16 } else { 0 };
        }
        b
    }

    fn journal(start: u64, sequence: u32) -> Journal {
        Journal {
            first: 1,
            maxlen: 16,
            start,
            sequence,
            tag_bytes: 16,
            csum_v2or3: true,
            block_bytes: BS,
        }
    }

    fn walk(j: &Journal, blocks: &[(u64, Vec<u8>)]) -> Vec<u64> {
        let used = j
            .walk(|b, buf| {
                buf.fill(0);
                if let Some((_, d)) = blocks.iter().find(|(p, _)| *p == b) {
                    buf.copy_from_slice(d);
                }
                Ok(())
            })
            .unwrap();
        used.into_iter().collect()
    }

    #[test]
    fn the_walk_skips_described_blocks_and_stops_after_the_last_commit() {
        let j = journal(1, 7);
        // 7: descriptor of 2 + commit; 8: descriptor of 3, no commit; then stale garbage.
        let blocks = vec![
            (1, descriptor(7, 2)),
            (4, header(COMMIT_BLOCK, 7)),
            (5, descriptor(8, 3)),
            (9, header(DESCRIPTOR_BLOCK, 3)),
            (12, header(COMMIT_BLOCK, 8)),
        ];
        // The block after transaction 8's data (9) ends the scan; 10 to 15 are unused,
        // whatever they hold (12 holds what would be 8's commit if it were in place).
        assert_eq!(walk(&j, &blocks), (1..=9).collect::<Vec<_>>());
        assert_eq!(j.count_tags(&descriptor(8, 3)), 3);
    }

    #[test]
    fn the_walk_wraps_round_the_ring_and_a_clean_journal_uses_nothing() {
        let j = journal(14, 3);
        let blocks = vec![(14, descriptor(3, 2)), (1, header(COMMIT_BLOCK, 3))];
        assert_eq!(walk(&j, &blocks), vec![1, 2, 14, 15]);
        assert!(walk(&journal(0, 3), &blocks).is_empty());
        // A journal whose every block follows is used whole, and the walk ends.
        let full: Vec<_> = (1..16).map(|p| (p, header(REVOKE_BLOCK, 5))).collect();
        assert_eq!(walk(&journal(4, 5), &full).len(), 15);
    }

    #[test]
    fn tag_sizes_follow_the_journal_features() {
        let mut jsb = header(SUPERBLOCK_V2, 0);
        jsb[12..16].copy_from_slice(&(BS as u32).to_be_bytes());
        jsb[16..20].copy_from_slice(&1024u32.to_be_bytes());
        jsb[20..24].copy_from_slice(&1u32.to_be_bytes());
        let with = |incompat: u32| {
            let mut b = jsb.clone();
            b[40..44].copy_from_slice(&incompat.to_be_bytes());
            Journal::of_superblock(&b, BS as u64).map(|j| j.tag_bytes)
        };
        assert_eq!(with(0), Some(8));
        assert_eq!(with(INCOMPAT_64BIT), Some(12));
        assert_eq!(with(INCOMPAT_CSUM_V2), Some(10));
        assert_eq!(with(INCOMPAT_CSUM_V2 | INCOMPAT_64BIT), Some(14));
        assert_eq!(with(INCOMPAT_CSUM_V3), Some(16));
        assert_eq!(with(INCOMPAT_FAST_COMMIT), None);
    }

    /// The layout of images the configurations' own mkfs made: ext4's journal is one
    /// extent, ext3's has an indirect block, and both cover the journal's 1,024 blocks.
    #[test]
    fn real_ext3_and_ext4_images_give_their_journal_layout() {
        for config in ["ext4-ordered", "ext3-ordered", "ext2"] {
            let config = crate::fs::by_name(config).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let image = dir.path().join("fs.img");
            std::fs::File::create(&image).unwrap().set_len(config.image_bytes).unwrap();
            let out = crate::device::cmd::Cmd::new(config.mkfs[0], Duration::from_secs(60))
                .args(&config.mkfs[1..])
                .args(&[&image])
                .run()
                .unwrap();
            assert_eq!(out.code, Some(0), "{}: {}", config.name, out.stderr);
            let layout = JournalLayout::of_image(&image);
            if config.name == "ext2" {
                assert_eq!(layout, None, "ext2 has no journal");
                continue;
            }
            let layout = layout.unwrap_or_else(|| panic!("{}: no layout", config.name));
            let blocks: u64 = layout.extents.iter().map(|e| e.2).sum();
            assert_eq!(blocks, 1024, "{}: {layout:?}", config.name);
            assert_eq!(layout.guard.len(), if config.fstype == "ext3" { 2 } else { 1 });
        }
    }

    #[test]
    fn debugfs_output_gives_the_layout() {
        let text = "Filesystem features:      has_journal ext_attr extent 64bit metadata_csum\n\
                    Block size:               4096\n\
                    Inode size:\t          256\n\
                    EXTENTS:\n\
                    (0-1023):2591-3614\n\
                    Inode 8 is part of block group 0\n\
                    \tlocated at block 25, offset 0x0700\n";
        let layout = JournalLayout::parse(text).unwrap();
        assert_eq!(layout.extents, vec![(0, 2591, 1024)]);
        assert_eq!(layout.guard.len(), 1);
        assert_eq!(layout.guard[0], 25 * 4096 + 0x700..25 * 4096 + 0x800);
        assert_eq!(layout.byte_of(3), Some(2594 * 4096));
        let fast = text.replace("metadata_csum", "metadata_csum fast_commit");
        assert_eq!(JournalLayout::parse(&fast), None);
        // ext3: an indirect block, guarded with the inode.
        let ext3 = text.replace(
            "EXTENTS:\n(0-1023):2591-3614",
            "BLOCKS:\n(0-11):1299-1310, (IND):1311, (12-1023):1312-2323\nTOTAL: 1025\n",
        );
        let layout = JournalLayout::parse(&ext3).unwrap();
        assert_eq!(layout.extents, vec![(0, 1299, 12), (12, 1312, 1012)]);
        assert_eq!(layout.guard[1], 1311 * 4096..1312 * 4096);
        assert_eq!(layout.byte_of(12), Some(1312 * 4096));
    }
}
