//! Mount once, walk many: the file data a state's walk read, mapped back to the files it
//! belongs to, so that a later state which differs from it only there takes its mount
//! and reads those sectors from its own bytes instead of mounting (`--no-patch-file-data`
//! turns it off).
//!
//! Reuse by reads ([`super::reads`]) gives a state an earlier state's recovery, walk and
//! fsck when the two agree on every sector that check read. States of the multi-block
//! cells rarely do: they differ in which sectors of a large append reached the disk, and
//! the walk reads all of them. Yet those sectors decide nothing but what the walk saw in
//! the file: recovery and fsck never read them, and the tree the walk found (names,
//! sizes, which device sectors hold which file bytes) comes from metadata the states
//! share. So a state that agrees with a donor on every sector the donor's recovery, fsck
//! and walk read, except sectors that (a) only the walk read, first, before anything
//! wrote them, (b) lie in an extent of a file whose content the walk classified, where
//! reading the file reads exactly the device's bytes (FIEMAP: no inline, encoded,
//! unwritten or delayed extent), and (c) the read-only fsck did not read, gets the
//! donor's snapshot with each such sector's class computed again from its own bytes,
//! exactly as the walk would have computed it (`workloads::stamp::classify` of the bytes
//! up to the end of the file, at the sector's offset in it).
//!
//! Only where that argument holds: kernel configurations without data checksums (ext2,
//! ext3, ext4; btrfs verifies data against checksums in metadata, so other bytes would
//! read as an error), views served without the page cache (every read reaches the view's
//! log), and a read-only fsck whose reads were logged (`--fsck once` with the fsck by
//! reads) or taken from an earlier fsck with its reads.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use workloads::{stamp, Content, SectorClass, Snapshot};

use crate::image::SectorSet;
use crate::trace::SECTOR_SIZE;

/// Where a device sector's bytes went in the walk: the file (an index into
/// [`FileData::paths`], the path as the snapshot names it), the sector's index in the
/// file, and how many of its bytes lie before the end of the file (the last sector of a
/// file is classified from those only). Small: a donor of a multi-block cell keeps
/// thousands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileSector {
    file: u32,
    index: u32,
    bytes: u16,
}

/// The sectors of a mounted state's walk that a later state may differ in: each with
/// where it lies in a file, sorted by device sector.
#[derive(Debug, Default)]
pub(crate) struct FileData {
    paths: Vec<Arc<str>>,
    sectors: Vec<(u64, FileSector)>,
}

/// Whether a configuration's file data can be read back from the device's bytes alone:
/// no data checksums, no inline or compressed data in bob's images.
pub(crate) fn applies_to(fstype: &str) -> bool {
    matches!(fstype, "ext2" | "ext3" | "ext4")
}

impl FileData {
    /// The device sectors of the files of `snapshot` whose content the walk of the tree
    /// mounted at `mnt` classified, each where its extent reads exactly the device's
    /// bytes, kept only if in `only_walk` (the sectors the walk alone read first). A file
    /// FIEMAP cannot map adds nothing: its sectors must then match as any other.
    pub(crate) fn of_walk(mnt: &Path, snapshot: &Snapshot, only_walk: &SectorSet) -> FileData {
        let mut out = FileData::default();
        for (name, node) in &snapshot.entries {
            let Some(content) = &node.content else { continue };
            let classified = content.sectors();
            let on_host = mnt.join(name.trim_start_matches('/'));
            let Ok(extents) = workloads::file_extents(&on_host) else { continue };
            let file = out.paths.len() as u32;
            let before = out.sectors.len();
            for e in extents.iter().filter(|e| e.reads_the_device()) {
                if e.logical % SECTOR_SIZE != 0 || e.physical % SECTOR_SIZE != 0 {
                    continue;
                }
                let end = e.logical.saturating_add(e.length).min(node.size);
                let mut at = e.logical;
                while at < end {
                    let index = at / SECTOR_SIZE;
                    let device = (e.physical + (at - e.logical)) / SECTOR_SIZE;
                    let kept = index < classified && index <= u64::from(u32::MAX);
                    if kept && only_walk.contains(&device) {
                        let bytes = (end - at).min(SECTOR_SIZE) as u16;
                        let place = FileSector { file, index: index as u32, bytes };
                        out.sectors.push((device, place));
                    }
                    at += SECTOR_SIZE;
                }
            }
            if out.sectors.len() > before {
                out.paths.push(Arc::from(name.as_str()));
            }
        }
        out.sectors.sort_unstable_by_key(|&(s, _)| s);
        // A device sector in two files' extents (none in these file systems) is left out.
        out.sectors = out
            .sectors
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|same| same.len() == 1)
            .map(|one| one[0])
            .collect();
        out
    }

    /// Keeps only the sectors `keep` says (what the read-only fsck did not read, what
    /// the crash epoch wrote).
    pub(crate) fn only(&self, keep: impl Fn(u64) -> bool) -> FileData {
        let sectors = self.sectors.iter().filter(|&&(s, _)| keep(s)).copied().collect();
        FileData { paths: self.paths.clone(), sectors }
    }

    fn place(&self, s: u64) -> Option<FileSector> {
        let at = self.sectors.binary_search_by_key(&s, |&(d, _)| d).ok()?;
        Some(self.sectors[at].1)
    }

    /// Whether a later state may differ from the donor at device sector `s`.
    pub(crate) fn covers(&self, s: u64) -> bool {
        self.place(s).is_some()
    }

    /// Whether there is any such sector.
    pub(crate) fn is_empty(&self) -> bool {
        self.sectors.is_empty()
    }

    /// The donor's `snapshot` as a state's walk would have found it, given the state's
    /// own bytes (`bytes_at`) at each sector of `differing`, every one of which
    /// [`FileData::covers`]. `None` if a sector's bytes cannot be read.
    pub(crate) fn patched(
        &self,
        snapshot: &Snapshot,
        differing: &[u64],
        mut bytes_at: impl FnMut(u64, &mut [u8; SECTOR_SIZE as usize]) -> std::io::Result<()>,
    ) -> Option<Snapshot> {
        // Each file's classes once as a list, patched, then folded back into runs:
        // setting sectors one at a time would rebuild the runs for each of thousands.
        let mut classes: HashMap<u32, Vec<SectorClass>> = HashMap::new();
        let mut buf = [0u8; SECTOR_SIZE as usize];
        for &s in differing {
            let place = self.place(s)?;
            bytes_at(s, &mut buf).ok()?;
            let index = u64::from(place.index);
            let class = stamp::classify(&buf[..usize::from(place.bytes)], index * SECTOR_SIZE);
            let file = match classes.entry(place.file) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let node = snapshot.entries.get(&**self.paths.get(place.file as usize)?)?;
                    e.insert(node.content.as_ref()?.iter().collect())
                }
            };
            *file.get_mut(place.index as usize)? = class;
        }
        let mut out = snapshot.clone();
        for (file, patched) in classes {
            let node = out.entries.get_mut(&*self.paths[file as usize])?;
            node.content = Some(Content::from_classes(patched));
        }
        Some(out)
    }
}

/// [`FileData`] shared by a check and the donor it becomes.
pub(crate) type SharedFileData = Arc<FileData>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_systems_without_data_checksums_or_inline_data_apply() {
        for fs in ["ext2", "ext3", "ext4"] {
            assert!(applies_to(fs), "{fs}");
        }
        for fs in ["btrfs", "xfs", "f2fs", "reiserfs", "nilfs2", "jfs", "researchfs"] {
            assert!(!applies_to(fs), "{fs}");
        }
    }
}
