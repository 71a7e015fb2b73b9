//! The logical snapshot of a recovered tree: names, kinds, inode numbers, link counts,
//! sizes and, for the files the checks need, their content classified sector by sector
//! from the stamps. The model uses the same [`Content`] type for what it expects.

use crate::stamp;
use crate::workload::{Workload, DRAIN_FILE};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What one 512-byte sector of a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum SectorClass {
    /// All zeros (a hole, or an allocated block never written).
    Zero,
    /// A valid stamp for this offset: data of model file `file` written by op `op`
    /// (`None`: setup or drain data, i.e. "old" data). When `file` is not the file it
    /// was found in, the checks treat it as foreign data.
    Data { file: u32, op: Option<u32> },
    /// A valid stamp for another offset (of `file`): data that belongs elsewhere.
    Foreign { file: u32, offset: u64 },
    /// Anything else.
    Garbage,
}

impl SectorClass {
    /// Short human name, for stories.
    pub fn describe(self) -> String {
        match self {
            SectorClass::Zero => "zeros".into(),
            SectorClass::Data { file, op: None } => format!("old data of file {file}"),
            SectorClass::Data { file, op: Some(op) } => format!("data of file {file} from op {op}"),
            SectorClass::Foreign { file, offset } => {
                format!("foreign data (file {file} @{offset})")
            }
            SectorClass::Garbage => "garbage".into(),
        }
    }
}

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
}

/// Files at most this large have their content read whatever the workload touches.
pub const SMALL_FILE_BYTES: u64 = 64 * 1024;
/// Content of files larger than this is never read (a recovered inode may claim any
/// size); such a file gets `read_error` instead.
pub const MAX_READ_BYTES: u64 = 1 << 30;

/// Classifies a whole file's bytes.
pub fn classify_bytes(bytes: &[u8]) -> Content {
    Content::from_classes(
        bytes
            .chunks(stamp::SECTOR)
            .enumerate()
            .map(|(i, s)| stamp::classify(s, (i * stamp::SECTOR) as u64)),
    )
}

/// Walks the tree under `root` (lstat only, never following symlinks, skipping
/// "/lost+found") and reads and classifies the content of regular files that (a) have a
/// name the model ever gives to a file whose data an op of `w.ops` writes or syncs, or
/// (b) are at most [`SMALL_FILE_BYTES`]; never the drain file. Other files get
/// `content: None`. A failure to read a file's content is recorded in `read_error`;
/// a failure to walk the tree is returned.
pub fn take_snapshot(root: &Path, w: &Workload) -> std::io::Result<Snapshot> {
    let wanted: BTreeSet<String> = crate::model::content_paths(w);
    // The detection family judges every access: a name that lists but does not stat, or a
    // directory that does not list, is an error the file system returned (a detection),
    // kept in the snapshot instead of failing the walk.
    let tolerant = w.property.map(|p| p.family()) == Some(crate::Family::Detection);
    let failed = |ino, e: std::io::Error| Node {
        ino,
        kind: NodeKind::Other,
        nlink: 0,
        size: 0,
        content: None,
        read_error: Some(e.to_string()),
    };
    let mut snap = Snapshot::default();
    let mut stack = vec![String::from("/")];
    while let Some(path) = stack.pop() {
        let fs_path = if path == "/" { root.to_path_buf() } else { root.join(&path[1..]) };
        let md = match std::fs::symlink_metadata(&fs_path) {
            Ok(md) => md,
            Err(e) if tolerant && path != "/" => {
                snap.entries.insert(path, failed(0, e));
                continue;
            }
            Err(e) => return Err(at_path(&path, "stat", e)),
        };
        let ft = md.file_type();
        let kind = if ft.is_file() {
            NodeKind::File
        } else if ft.is_dir() {
            NodeKind::Dir
        } else if ft.is_symlink() {
            NodeKind::Symlink
        } else {
            NodeKind::Other
        };
        let mut node = Node {
            ino: md.ino(),
            kind,
            nlink: md.nlink(),
            size: md.size(),
            content: None,
            read_error: None,
        };
        if kind == NodeKind::File
            && path != DRAIN_FILE
            && (wanted.contains(&path) || md.size() <= SMALL_FILE_BYTES)
        {
            match read_file(&fs_path, md.size()) {
                Ok(_) | Err(_) if md.size() > MAX_READ_BYTES => {
                    node.read_error = Some(format!("size {} exceeds the read limit", md.size()))
                }
                Ok(bytes) => node.content = Some(classify_bytes(&bytes)),
                Err(e) => node.read_error = Some(e.to_string()),
            }
        }
        if kind == NodeKind::Dir {
            let listed = std::fs::read_dir(&fs_path)
                .and_then(|d| d.map(|e| e.map(|e| e.file_name())).collect::<Result<Vec<_>, _>>());
            let listed = match listed {
                Ok(l) => l,
                Err(e) if tolerant => {
                    node.read_error = Some(format!("readdir: {e}"));
                    Vec::new()
                }
                Err(e) => return Err(at_path(&path, "readdir", e)),
            };
            for name in listed {
                let name = name.to_string_lossy().into_owned();
                if path == "/" && name == "lost+found" {
                    continue;
                }
                let child = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
                stack.push(child);
            }
        }
        snap.entries.insert(path, node);
    }
    Ok(snap)
}

/// `e` with the path and the call that failed in front ("/A/f0: stat: Bad message (os
/// error 74)"), keeping its kind: a walk that fails says where.
fn at_path(path: &str, call: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{path}: {call}: {e}"))
}

fn read_file(path: &Path, size: u64) -> std::io::Result<Vec<u8>> {
    if size > MAX_READ_BYTES {
        return Ok(Vec::new());
    }
    let f = std::fs::File::open(path)?;
    let mut bytes = Vec::with_capacity(size.min(1 << 30) as usize);
    f.take(size).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
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
