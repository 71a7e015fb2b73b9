//! Where a configuration keeps the few sectors whose tearing stops a mount: superblocks
//! (and their backups), the journal's superblock, the start of the xfs log. Found once per
//! trace from the configuration and its base image, so that a report can say that a
//! crash state failed to mount because its torn write hit one of them.
//!
//! - ext2/3/4: the primary superblock (bytes 1024..2048), its backups (groups 0, 1 and the
//!   powers of 3, 5 and 7 with `sparse_super`, every group without it), and the journal
//!   superblock, the first block of inode 8 (`debugfs -R "bmap <8> 0"`).
//! - xfs: sector 0 of every allocation group (the primary superblock in AG 0, backups in
//!   the others) and the log's first block (`xfs_db -r -c "sb 0" -c "p ..."`).
//! - btrfs: the superblock at 64 KiB and its mirrors at 64 MiB and 256 GiB.
//! - f2fs: the superblock at byte 1024 of block 0 and its copy at byte 1024 of block 1
//!   (each to the end of its block), and the first block of each of the two checkpoint
//!   packs (`cp_blkaddr`, one segment apart), whose checksum covers the whole block.
//! - nilfs2: the superblock at 1024 and its copy in the last 4 KiB block of the device
//!   (`NILFS_SB2_OFFSET_BYTES`), each the `s_bytes` its checksum covers.
//! - jfs: the superblock at 32 KiB and its copy at 60 KiB (184 bytes each), and the log's
//!   superblock, the second page of the inline log (`s_logpxd`).
//! - reiserfs: the superblock at 64 KiB (204 bytes) and the journal header, the block
//!   after the journal (`jp_journal_1st_block + jp_journal_size`).
//!
//! These four are read from the image's bytes; a region is the structure's bytes rounded
//! up to whole sectors, so one that fits in a sector (jfs', reiserfs') is never torn.
//!
//! Finding them is best effort: a tool that fails leaves its regions out; nothing else
//! depends on them.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::FsConfig;
use crate::device::cmd;

/// What a region of the image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegionRole {
    /// The primary superblock.
    Superblock,
    /// A backup copy of the superblock.
    BackupSuperblock,
    /// The journal's superblock (jbd2).
    JournalSuperblock,
    /// The first block of the xfs log.
    LogStart,
    /// The first block of a checkpoint pack (f2fs).
    Checkpoint,
}

impl RegionRole {
    /// kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            RegionRole::Superblock => "superblock",
            RegionRole::BackupSuperblock => "backup-superblock",
            RegionRole::JournalSuperblock => "journal-superblock",
            RegionRole::LogStart => "log-start",
            RegionRole::Checkpoint => "checkpoint",
        }
    }
}

/// A byte range of the image and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// What it holds.
    pub role: RegionRole,
}

/// btrfs' superblock and its mirrors, at fixed offsets whatever the image (the mirrors
/// past the image's end are never written).
fn btrfs_regions() -> Vec<Region> {
    [64 << 10, 64 << 20, 256u64 << 30]
        .iter()
        .enumerate()
        .map(|(i, &start)| Region {
            start,
            end: start + 4096,
            role: if i == 0 { RegionRole::Superblock } else { RegionRole::BackupSuperblock },
        })
        .collect()
}

/// The regions of one base image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regions {
    /// In no particular order; they do not overlap.
    pub regions: Vec<Region>,
}

const SECTOR: u64 = 512;

impl Regions {
    /// The regions of `config` in the image at `image` (the base image of a trace). Runs
    /// `debugfs` or `xfs_db` read-only, each under `timeout`; the others' are read from
    /// the image itself.
    pub fn of_image(config: &FsConfig, image: &Path, timeout: Duration) -> Regions {
        let size = std::fs::metadata(image).map(|m| m.len()).unwrap_or(0);
        let regions = match config.fstype {
            "ext2" | "ext3" | "ext4" => ext_regions(image, timeout),
            "xfs" => xfs_regions(image, timeout),
            "btrfs" => btrfs_regions(),
            "f2fs" => f2fs_regions(image),
            "nilfs2" => nilfs2_regions(image, size),
            "jfs" => jfs_regions(image),
            "reiserfs" => reiserfs_regions(image),
            _ => Vec::new(),
        };
        Regions { regions: regions.into_iter().filter(|r| r.start < size).collect() }
    }

    /// The role of the first region (by role, primary superblock first) that a write of
    /// sectors `first..first + count` (512-byte units) tore: some of the region's sectors
    /// persisted (`persisted(k)` for the write's `k`-th sector) and some did not. A region
    /// the write left wholly old or wholly new was not torn.
    pub(crate) fn torn_role(
        &self,
        first: u64,
        count: u64,
        persisted: impl Fn(u64) -> bool,
    ) -> Option<RegionRole> {
        let mut hit: Option<RegionRole> = None;
        for r in &self.regions {
            let lo = (r.start / SECTOR).max(first);
            let hi = r.end.div_ceil(SECTOR).min(first + count);
            if lo >= hi {
                continue;
            }
            let new = (lo..hi).filter(|&s| persisted(s - first)).count() as u64;
            if new > 0 && new < hi - lo && hit.is_none_or(|h| r.role < h) {
                hit = Some(r.role);
            }
        }
        hit
    }
}

fn le32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
}

fn le16(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// `len` bytes of `image` at `offset`, or `None` past its end.
fn bytes_at(image: &Path, offset: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    std::fs::File::open(image).ok()?.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// `[start, start + len)` rounded up to whole sectors.
fn region(start: u64, len: u64, role: RegionRole) -> Region {
    Region { start, end: start + len.div_ceil(SECTOR) * SECTOR, role }
}

/// f2fs (`struct f2fs_super_block` at byte 1024 of blocks 0 and 1; magic 0xF2F52010).
fn f2fs_regions(image: &Path) -> Vec<Region> {
    let Some(sb) = bytes_at(image, 1024, 96).filter(|sb| le32(sb, 0) == 0xF2F5_2010) else {
        return Vec::new();
    };
    let block = 1u64 << le32(&sb, 16).min(16); // log_blocksize
    let per_segment = 1u64 << le32(&sb, 20).min(16); // log_blocks_per_seg
    let cp = le32(&sb, 76); // cp_blkaddr
    vec![
        region(1024, block - 1024, RegionRole::Superblock),
        region(block + 1024, block - 1024, RegionRole::BackupSuperblock),
        region(cp * block, block, RegionRole::Checkpoint),
        region((cp + per_segment) * block, block, RegionRole::Checkpoint),
    ]
}

/// nilfs2 (`struct nilfs_super_block`; magic 0x3434 at byte 6, `s_bytes` at 8). The copy
/// is at `((size >> 12) - 1) << 12` of the device's `size`.
fn nilfs2_regions(image: &Path, size: u64) -> Vec<Region> {
    let Some(sb) = bytes_at(image, 1024, 16).filter(|sb| le16(sb, 6) == 0x3434) else {
        return Vec::new();
    };
    let len = le16(&sb, 8).clamp(1, 1024);
    let mut out = vec![region(1024, len, RegionRole::Superblock)];
    if size >= 2 << 12 {
        out.push(region(((size >> 12) - 1) << 12, len, RegionRole::BackupSuperblock));
    }
    out
}

/// jfs (`struct jfs_superblock`, 184 bytes, "JFS1" at 32 KiB and 60 KiB). The inline log
/// is `s_logpxd` (a `pxd_t` at byte 72: 24-bit length, then a 40-bit block address); its
/// superblock (`struct logsuper`, 2116 bytes) is the log's page 1.
fn jfs_regions(image: &Path) -> Vec<Region> {
    const SUPER1: u64 = 32 << 10;
    const SUPER2: u64 = 60 << 10;
    let Some(sb) = bytes_at(image, SUPER1, 184).filter(|sb| &sb[..4] == b"JFS1") else {
        return Vec::new();
    };
    let mut out = vec![
        region(SUPER1, 184, RegionRole::Superblock),
        region(SUPER2, 184, RegionRole::BackupSuperblock),
    ];
    let block = le32(&sb, 16); // s_bsize
    let len_addr = le32(&sb, 72);
    let address = ((len_addr >> 24) << 32) | le32(&sb, 76);
    let inline_log = le32(&sb, 36) & 0x0000_0800 != 0; // JFS_INLINELOG in s_flag
    if inline_log && address != 0 && (len_addr & 0x00FF_FFFF) > 1 {
        out.push(region((address + 1) * block, 2116, RegionRole::JournalSuperblock));
    }
    out
}

/// reiserfs (`struct reiserfs_super_block`, 204 bytes at 64 KiB: `s_blocksize` at 44, the
/// journal's first block and size at 12 and 20, magic "ReIsEr" at 52). The journal
/// header (`struct reiserfs_journal_header`, 44 bytes) follows the journal's blocks.
fn reiserfs_regions(image: &Path) -> Vec<Region> {
    const SB: u64 = 64 << 10;
    let Some(sb) = bytes_at(image, SB, 204).filter(|sb| sb[52..58] == *b"ReIsEr") else {
        return Vec::new();
    };
    let block = le16(&sb, 44);
    let header = le32(&sb, 12) + le32(&sb, 20);
    let mut out = vec![region(SB, 204, RegionRole::Superblock)];
    if le32(&sb, 16) == 0 {
        // The journal is on this device (jp_journal_dev 0), as mkfs makes it.
        out.push(region(header * block, 44, RegionRole::JournalSuperblock));
    }
    out
}

/// Whether group `g` holds a superblock backup under `sparse_super`.
fn sparse_group(g: u64) -> bool {
    if g <= 1 {
        return true;
    }
    [3u64, 5, 7].iter().any(|&base| {
        let mut p = base;
        while p < g {
            p *= base;
        }
        p == g
    })
}

fn ext_regions(image: &Path, timeout: Duration) -> Vec<Region> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::new();
    let mut sb = [0u8; 1024];
    let Ok(file) = std::fs::File::open(image) else { return out };
    if file.read_exact_at(&mut sb, 1024).is_err() || sb[0x38..0x3a] != [0x53, 0xef] {
        return out;
    }
    out.push(Region { start: 1024, end: 2048, role: RegionRole::Superblock });
    let first_data_block = le32(&sb, 0x14);
    let block_size = 1024u64 << le32(&sb, 0x18).min(16);
    let per_group = le32(&sb, 0x20).max(1);
    let mut blocks = le32(&sb, 0x04);
    let incompat = le32(&sb, 0x60);
    if incompat & 0x80 != 0 {
        blocks |= le32(&sb, 0x150) << 32;
    }
    let sparse = le32(&sb, 0x64) & 1 != 0;
    let groups = (blocks.saturating_sub(first_data_block)).div_ceil(per_group);
    for g in 1..groups {
        if sparse && !sparse_group(g) {
            continue;
        }
        let start = (first_data_block + g * per_group) * block_size;
        out.push(Region { start, end: start + 1024, role: RegionRole::BackupSuperblock });
    }
    let journal_inum = le32(&sb, 0xE0);
    if journal_inum != 0 {
        let req = format!("bmap <{journal_inum}> 0");
        let path = image.to_string_lossy();
        if let Ok(o) = cmd::run("debugfs", &["-R", &req, &path], timeout) {
            if let Some(block) =
                o.stdout.split_whitespace().next().and_then(|w| w.parse::<u64>().ok())
            {
                if block != 0 {
                    let start = block * block_size;
                    out.push(Region {
                        start,
                        end: start + 1024,
                        role: RegionRole::JournalSuperblock,
                    });
                }
            }
        }
    }
    out
}

fn xfs_regions(image: &Path, timeout: Duration) -> Vec<Region> {
    let path = image.to_string_lossy();
    let Ok(o) = cmd::run(
        "xfs_db",
        &[
            "-r",
            "-c",
            "sb 0",
            "-c",
            "p agcount agblocks blocksize sectsize logstart agblklog",
            &path,
        ],
        timeout,
    ) else {
        return Vec::new();
    };
    let field = |name: &str| {
        o.stdout.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == name).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    let (Some(agcount), Some(agblocks), Some(bs), Some(sect), Some(logstart), Some(agblklog)) = (
        field("agcount"),
        field("agblocks"),
        field("blocksize"),
        field("sectsize"),
        field("logstart"),
        field("agblklog"),
    ) else {
        return Vec::new();
    };
    let mut out: Vec<Region> = (0..agcount)
        .map(|ag| {
            let start = ag * agblocks * bs;
            let role = if ag == 0 { RegionRole::Superblock } else { RegionRole::BackupSuperblock };
            Region { start, end: start + sect, role }
        })
        .collect();
    if logstart != 0 && agblklog < 64 {
        let (ag, agbno) = (logstart >> agblklog, logstart & ((1u64 << agblklog) - 1));
        let start = (ag * agblocks + agbno) * bs;
        out.push(Region { start, end: start + bs, role: RegionRole::LogStart });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_super_groups_are_0_1_and_powers_of_3_5_7() {
        let groups: Vec<u64> = (0..100).filter(|&g| sparse_group(g)).collect();
        assert_eq!(groups, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81]);
    }

    #[test]
    fn a_region_is_torn_only_when_some_but_not_all_of_its_sectors_persisted() {
        let r = Regions {
            regions: vec![
                Region { start: 1024, end: 2048, role: RegionRole::Superblock },
                Region { start: 8192, end: 9216, role: RegionRole::JournalSuperblock },
            ],
        };
        // A 4 KiB write of block 0 (sectors 0..8): the superblock is its sectors 2 and 3.
        assert_eq!(r.torn_role(0, 8, |k| k == 2), Some(RegionRole::Superblock));
        assert_eq!(r.torn_role(0, 8, |k| k == 3 || k == 0), Some(RegionRole::Superblock));
        assert_eq!(r.torn_role(0, 8, |k| k < 2), None, "superblock wholly old");
        assert_eq!(r.torn_role(0, 8, |k| k == 2 || k == 3), None, "superblock wholly new");
        assert_eq!(r.torn_role(16, 8, |k| k == 0), Some(RegionRole::JournalSuperblock));
        assert_eq!(r.torn_role(24, 8, |_| false), None, "write misses every region");
    }

    /// An image of `name` made by its own mkfs on an image file (the four programs work
    /// without the kernel driver), or `None` when its programs are missing here, which
    /// fails the test under CI=true.
    fn made(dir: &Path, name: &str) -> Option<(crate::fs::FsConfig, std::path::PathBuf)> {
        let config = crate::fs::by_name(name).unwrap();
        if let Err(missing) = config.programs_installed() {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{name}: {missing}");
            eprintln!("skipped {name}: {missing}");
            return None;
        }
        let image = dir.join(format!("{name}.img"));
        std::fs::File::create(&image).unwrap().set_len(config.image_bytes).unwrap();
        config.mkfs_on(&image, Duration::from_secs(120)).unwrap();
        Some((config, image))
    }

    fn role_at(r: &Regions, byte: u64) -> Option<RegionRole> {
        r.regions.iter().find(|x| x.start <= byte && byte < x.end).map(|x| x.role)
    }

    fn count(r: &Regions, role: RegionRole) -> usize {
        r.regions.iter().filter(|x| x.role == role).count()
    }

    /// A number `fsck.f2fs -l` prints for the image (`cp_blkaddr:  512`).
    fn f2fs_field(image: &Path, name: &str) -> u64 {
        let path = image.to_str().unwrap();
        let out = cmd::run("fsck.f2fs", &["-l", path], Duration::from_secs(30)).unwrap();
        let prefix = format!("{name}:");
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("fsck.f2fs -l prints {name}: {}", out.stdout))
    }

    #[test]
    fn f2fs_regions_are_both_superblocks_and_both_checkpoint_packs_of_a_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let Some((config, image)) = made(dir.path(), "f2fs") else { return };
        let r = Regions::of_image(&config, &image, Duration::from_secs(30));
        assert_eq!(role_at(&r, 1024), Some(RegionRole::Superblock), "{r:?}");
        assert_eq!(role_at(&r, 4095), Some(RegionRole::Superblock), "{r:?}");
        assert_eq!(role_at(&r, 4096 + 1024), Some(RegionRole::BackupSuperblock), "{r:?}");
        assert_eq!(role_at(&r, 0), None, "the first KiB is not the superblock");
        let packs: Vec<&Region> =
            r.regions.iter().filter(|x| x.role == RegionRole::Checkpoint).collect();
        assert_eq!(packs.len(), 2, "{r:?}");
        assert_eq!(packs[1].start - packs[0].start, 2 << 20, "one 2 MiB segment apart");
        // What fsck.f2fs says the checkpoint's address is.
        assert_eq!(packs[0].start, f2fs_field(&image, "cp_blkaddr") * 4096);
        // The regions read and the read-only fsck pass on the fresh image.
        assert_eq!(config.fsck_on(&image, Duration::from_secs(60)).unwrap(), None);
    }

    #[test]
    fn a_damaged_f2fs_image_fails_the_read_only_fsck_on_its_failed_check_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let Some((config, image)) = made(dir.path(), "f2fs") else { return };
        // Zero the root inode, the first node block of the main area: fsck.f2fs finds
        // unreachable nodes and asks whether to copy them out, which `answers` declines.
        let main = f2fs_field(&image, "main_blkaddr");
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&image).unwrap();
            f.write_all_at(&[0u8; 4096], main * 4096).unwrap();
        }
        let before = std::fs::read(&image).unwrap();
        let complaint = config.fsck_on(&image, Duration::from_secs(60)).unwrap().expect("found");
        assert!(complaint.starts_with("fsck.f2fs --dry-run exit 4: [FSCK]"), "{complaint}");
        assert!(complaint.contains("[Fail]"), "{complaint}");
        assert!(std::fs::read(&image).unwrap() == before, "--dry-run wrote to the image");
    }

    #[test]
    fn nilfs2_regions_are_the_superblock_and_its_copy_at_the_end_of_a_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let Some((config, image)) = made(dir.path(), "nilfs2") else { return };
        let r = Regions::of_image(&config, &image, Duration::from_secs(30));
        // s_bytes (280) rounded up to a sector.
        let sb = r.regions.iter().find(|x| x.role == RegionRole::Superblock).unwrap();
        assert_eq!((sb.start, sb.end), (1024, 1536), "{r:?}");
        let copy = config.image_bytes - 4096;
        assert_eq!(role_at(&r, copy), Some(RegionRole::BackupSuperblock), "{r:?}");
        let bytes = bytes_at(&image, copy, 8).unwrap();
        assert_eq!(le16(&bytes, 6), 0x3434, "the copy is a nilfs2 superblock");
        assert_eq!(r.regions.len(), 2);
    }

    #[test]
    fn jfs_regions_are_both_superblocks_and_the_log_superblock_of_a_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let Some((config, image)) = made(dir.path(), "jfs") else { return };
        let r = Regions::of_image(&config, &image, Duration::from_secs(30));
        assert_eq!(role_at(&r, 32 << 10), Some(RegionRole::Superblock), "{r:?}");
        assert_eq!(role_at(&r, 60 << 10), Some(RegionRole::BackupSuperblock), "{r:?}");
        assert_eq!(bytes_at(&image, 60 << 10, 4).unwrap(), b"JFS1", "the copy is one");
        let log = r.regions.iter().find(|x| x.role == RegionRole::JournalSuperblock).unwrap();
        // struct logsuper starts with LOGMAGIC, 0x87654321.
        assert_eq!(le32(&bytes_at(&image, log.start, 4).unwrap(), 0), 0x8765_4321, "{r:?}");
        assert_eq!(log.end - log.start, 2560, "2116 bytes in whole sectors");
        assert_eq!(config.fsck_on(&image, Duration::from_secs(60)).unwrap(), None);
    }

    #[test]
    fn reiserfs_regions_are_the_superblock_and_the_journal_header_of_a_real_image() {
        let dir = tempfile::tempdir().unwrap();
        let Some((config, image)) = made(dir.path(), "reiserfs") else { return };
        let r = Regions::of_image(&config, &image, Duration::from_secs(30));
        assert_eq!(role_at(&r, 64 << 10), Some(RegionRole::Superblock), "{r:?}");
        let header = r.regions.iter().find(|x| x.role == RegionRole::JournalSuperblock).unwrap();
        // The default journal: 8192 blocks from block 18, its header after them, which
        // repeats the journal's parameters (first block, device, size) from byte 12.
        assert_eq!(header.start, (18 + 8192) * 4096, "{r:?}");
        let h = bytes_at(&image, header.start, 44).unwrap();
        assert_eq!((le32(&h, 12), le32(&h, 16), le32(&h, 20)), (18, 0, 8192));
        assert_eq!(count(&r, RegionRole::BackupSuperblock), 0, "reiserfs keeps no copy");
        assert_eq!(config.fsck_on(&image, Duration::from_secs(60)).unwrap(), None);
    }

    #[test]
    fn jfs_and_reiserfs_images_get_a_fresh_uuid() {
        let dir = tempfile::tempdir().unwrap();
        // (configuration, where its 16-byte UUID is)
        for (name, at) in [("jfs", (32 << 10) + 136), ("reiserfs", (64 << 10) + 84)] {
            let Some((config, image)) = made(dir.path(), name) else { continue };
            let before = bytes_at(&image, at, 16).unwrap();
            config.fresh_uuid(&image, Duration::from_secs(30)).unwrap();
            let after = bytes_at(&image, at, 16).unwrap();
            assert_ne!(before, after, "{name}");
            assert_ne!(after, vec![0u8; 16], "{name}");
            assert_eq!(config.fsck_on(&image, Duration::from_secs(60)).unwrap(), None, "{name}");
        }
    }
}
