//! The tree both sides of a check speak in: what names a recovered (or modelled) tree
//! holds, their kinds and contents sector by sector, and the inode numbers the real run
//! observed. Nothing here reads a file system or runs the model, so the snapshot, the
//! model and the executor all build on it without importing each other.

use crate::stamp::SectorClass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A file's content as runs of equal sector classes: `[(class, count), ...]`, adjacent
/// runs always differ (so two `Content`s are equal iff their sectors are).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Content {
    runs: Vec<(SectorClass, u64)>,
}

impl Content {
    /// Empty content.
    pub fn new() -> Content {
        Content::default()
    }

    /// `n` sectors of `class`.
    pub fn filled(class: SectorClass, n: u64) -> Content {
        let mut c = Content::new();
        c.push(class, n);
        c
    }

    /// Builds content from one class per sector.
    pub fn from_classes(classes: impl IntoIterator<Item = SectorClass>) -> Content {
        let mut c = Content::new();
        for class in classes {
            c.push(class, 1);
        }
        c
    }

    /// Appends `n` sectors of `class`.
    pub fn push(&mut self, class: SectorClass, n: u64) {
        if n == 0 {
            return;
        }
        match self.runs.last_mut() {
            Some((c, count)) if *c == class => *count += n,
            _ => self.runs.push((class, n)),
        }
    }

    /// The runs.
    pub fn runs(&self) -> &[(SectorClass, u64)] {
        &self.runs
    }

    /// Number of sectors.
    pub fn sectors(&self) -> u64 {
        self.runs.iter().map(|r| r.1).sum()
    }

    /// The class of sector `i`, or `None` past the end.
    pub fn class_at(&self, i: u64) -> Option<SectorClass> {
        let mut start = 0;
        for &(c, n) in &self.runs {
            if i < start + n {
                return Some(c);
            }
            start += n;
        }
        None
    }

    /// Every sector's class, in order.
    pub fn iter(&self) -> impl Iterator<Item = SectorClass> + '_ {
        self.runs.iter().flat_map(|&(c, n)| std::iter::repeat_n(c, n as usize))
    }

    /// The classes of sectors `start..start + n` (shorter if the content is).
    pub fn range(&self, start: u64, n: u64) -> Vec<SectorClass> {
        self.iter().skip(start as usize).take(n as usize).collect()
    }

    /// Sets sectors `start..start + n` to `class`, extending with zeros if needed.
    pub fn set(&mut self, start: u64, n: u64, class: SectorClass) {
        let end = start + n;
        let mut out = Content::new();
        let mut pos = 0;
        for &(c, len) in &self.runs {
            if pos < start {
                out.push(c, (pos + len).min(start) - pos);
            }
            pos += len;
        }
        let have = out.sectors();
        out.push(SectorClass::Zero, start - have);
        out.push(class, n);
        pos = 0;
        for &(c, len) in &self.runs {
            if pos + len > end {
                out.push(c, pos + len - pos.max(end));
            }
            pos += len;
        }
        *self = out;
    }

    /// Cuts or zero-extends to `n` sectors.
    pub fn resize(&mut self, n: u64) {
        let total = self.sectors();
        if n >= total {
            self.push(SectorClass::Zero, n - total);
            return;
        }
        let mut out = Content::new();
        let mut left = n;
        for &(c, len) in &self.runs {
            if left == 0 {
                break;
            }
            let take = len.min(left);
            out.push(c, take);
            left -= take;
        }
        *self = out;
    }

    /// The first sector below `upto` where `self` and `other` differ (a missing sector
    /// differs from any present one).
    pub fn first_diff(&self, other: &Content, upto: u64) -> Option<u64> {
        let (mut a, mut b) = (self.iter(), other.iter());
        (0..upto).find(|_| a.next() != b.next())
    }
}

/// What kind of object a name refers to (from lstat; symlinks are not followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    File,
    Dir,
    Symlink,
    /// A whiteout: a character device 0:0 (what renameat2's RENAME_WHITEOUT leaves).
    Whiteout,
    Other,
}

/// One name in the recovered tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// st_ino.
    pub ino: u64,
    pub kind: NodeKind,
    /// st_nlink.
    pub nlink: u64,
    /// st_size.
    pub size: u64,
    /// Classified content (ceil(size / 512) sectors) if the checks need this file.
    pub content: Option<Content>,
    /// Why reading the content failed (e.g. EIO on a damaged file system), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_error: Option<String>,
    /// Its `user.` extended attributes (name to value), read when the workload sets or
    /// removes any.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub xattrs: BTreeMap<String, String>,
    /// Its mode, owner and modification time, read when the workload changes any
    /// (chmod, chown, utimensat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<InodeMeta>,
    /// Bytes of its extents (FIEMAP) at or past its size rounded up to a 4 KiB block,
    /// read when the workload allocates past a file's end (fallocate with keep-size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_past_eof: Option<u64>,
}

/// The attributes of an inode the attribute ops set: permission bits, owner, and the
/// modification time in whole seconds. In the model, `None` is "not set by the workload,
/// nothing promised".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeMeta {
    /// Permission bits (st_mode & 0o7777).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    /// (st_uid, st_gid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<(u32, u32)>,
    /// st_mtime (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<i64>,
}

impl Node {
    /// The class of sector `i`, if the content was read and has that sector.
    pub fn class_at(&self, i: u64) -> Option<SectorClass> {
        self.content.as_ref()?.class_at(i)
    }
}

/// The recovered tree: every path ("/" is the root, "/A/f0" a file) and what it names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub entries: BTreeMap<String, Node>,
    /// Names that could not be created on the recovered state after it was judged (the
    /// `creatable-after-recovery` guarantee), with the error: empty where none was tried
    /// or every one was made.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_creatable: BTreeMap<String, String>,
}

/// What the real run observed: the st_ino of every file and directory the model knows,
/// keyed by model node id (root is 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub inos: BTreeMap<u32, u64>,
}

impl Observed {
    /// The inode number observed for model node `id`.
    pub fn ino(&self, id: u32) -> Option<u64> {
        self.inos.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::SectorClass;
    use proptest::prelude::*;

    fn d(op: u32) -> SectorClass {
        SectorClass::Data { file: 1, op: Some(op) }
    }

    proptest! {
        #[test]
        fn set_matches_a_vector(ops in proptest::collection::vec((0u64..40, 0u64..20, 0u32..4), 1..12)) {
            let mut c = Content::new();
            let mut v: Vec<SectorClass> = Vec::new();
            for (start, n, op) in ops {
                c.set(start, n, d(op));
                if v.len() < (start + n) as usize { v.resize((start + n) as usize, SectorClass::Zero); }
                for s in &mut v[start as usize..(start + n) as usize] { *s = d(op); }
                prop_assert_eq!(&c, &Content::from_classes(v.iter().copied()));
            }
            let half = v.len() as u64 / 2;
            c.resize(half);
            prop_assert_eq!(c, Content::from_classes(v[..half as usize].iter().copied()));
        }
    }

    #[test]
    fn class_at_and_diff() {
        let mut c = Content::filled(d(0), 8);
        c.set(2, 2, SectorClass::Zero);
        assert_eq!(c.class_at(2), Some(SectorClass::Zero));
        assert_eq!(c.class_at(4), Some(d(0)));
        assert_eq!(c.class_at(8), None);
        assert_eq!(c.first_diff(&Content::filled(d(0), 8), 8), Some(2));
    }
}
