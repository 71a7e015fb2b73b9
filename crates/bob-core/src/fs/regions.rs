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
}

impl RegionRole {
    /// kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            RegionRole::Superblock => "superblock",
            RegionRole::BackupSuperblock => "backup-superblock",
            RegionRole::JournalSuperblock => "journal-superblock",
            RegionRole::LogStart => "log-start",
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

/// The regions of one base image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regions {
    /// In no particular order; they do not overlap.
    pub regions: Vec<Region>,
}

const SECTOR: u64 = 512;

impl Regions {
    /// The regions of `config` in the image at `image` (the base image of a trace). Runs
    /// `debugfs` or `xfs_db` read-only, each under `timeout`.
    pub fn of_image(config: &FsConfig, image: &Path, timeout: Duration) -> Regions {
        let size = std::fs::metadata(image).map(|m| m.len()).unwrap_or(0);
        let regions = match config.fstype {
            "ext2" | "ext3" | "ext4" => ext_regions(image, timeout),
            "xfs" => xfs_regions(image, timeout),
            "btrfs" => [64 << 10, 64 << 20, 256u64 << 30]
                .iter()
                .enumerate()
                .map(|(i, &start)| Region {
                    start,
                    end: start + 4096,
                    role: if i == 0 {
                        RegionRole::Superblock
                    } else {
                        RegionRole::BackupSuperblock
                    },
                })
                .collect(),
            _ => Vec::new(),
        };
        Regions { regions: regions.into_iter().filter(|r| r.start < size).collect() }
    }

    /// The role of the first region (by role, primary superblock first) that a write of
    /// sectors `first..first + count` (512-byte units) tore: some of the region's sectors
    /// persisted (`persisted(k)` for the write's `k`-th sector) and some did not. A region
    /// the write left wholly old or wholly new was not torn.
    pub fn torn_role(
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
}
