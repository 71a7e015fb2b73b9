//! The logical snapshot of a recovered tree: names, kinds, inode numbers, link counts,
//! sizes and, for the files the checks need, their content classified sector by sector
//! from the stamps ([`crate::tree`] holds the types, which the model shares).

use crate::stamp;
use crate::tree::{Content, Node, NodeKind, Snapshot};
use crate::workload::{Workload, DRAIN_FILE};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Files at most this large have their content read whatever the workload touches.
pub const SMALL_FILE_BYTES: u64 = 64 * 1024;
/// Content of files larger than this is never read (a recovered inode may claim any
/// size); such a file gets `read_error` instead.
pub const MAX_READ_BYTES: u64 = 1 << 30;

/// At most this many names are read from one directory, and this many entries walked in
/// all: no workload makes more than a few hundred, and a damaged directory whose pages
/// link in a cycle could list names forever. More is a damaged listing, reported as the
/// directory's read error rather than walked without end.
pub const MAX_DIR_ENTRIES: usize = 1 << 16;

/// Walks the tree under `root` (lstat only, never following symlinks, skipping
/// "/lost+found") and reads and classifies the content of regular files that (a) have a
/// name the model ever gives to a file whose data an op of `w.ops` writes or syncs, or
/// (b) are at most [`SMALL_FILE_BYTES`]; never the drain file. Other files get
/// `content: None`. A failure to read a file's content is recorded in `read_error`;
/// a failure to walk the tree is returned.
pub fn take_snapshot(root: &Path, w: &Workload) -> std::io::Result<Snapshot> {
    take_snapshot_with(root, w, false)
}

/// [`take_snapshot`], and with `detects` (a file system that detects damage by returning
/// an error, as NoFS does) a name that does not stat or a directory that does not list is
/// kept in the snapshot with its `read_error`, as the detection family always does,
/// instead of failing the walk.
pub fn take_snapshot_with(root: &Path, w: &Workload, detects: bool) -> std::io::Result<Snapshot> {
    let wanted: BTreeSet<String> = crate::model::content_paths(w);
    // The detection family judges every access: a name that lists but does not stat, or a
    // directory that does not list, is an error the file system returned (a detection),
    // kept in the snapshot instead of failing the walk.
    let tolerant = detects || w.property.map(|p| p.family()) == Some(crate::Family::Detection);
    let failed = |ino, e: std::io::Error| Node {
        ino,
        kind: NodeKind::Other,
        nlink: 0,
        size: 0,
        content: None,
        read_error: Some(e.to_string()),
        xattrs: Default::default(),
        meta: None,
    };
    // Reading extended attributes costs a listxattr per name: only when the workload
    // sets or removes any.
    let with_xattrs = w.setup.iter().chain(&w.ops).any(|o| o.is_xattr());
    let with_meta = w.setup.iter().chain(&w.ops).any(|o| o.kind().is_attr_op());
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
        } else if std::os::unix::fs::FileTypeExt::is_char_device(&ft) && md.rdev() == 0 {
            NodeKind::Whiteout
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
            xattrs: Default::default(),
            meta: with_meta.then_some(crate::tree::InodeMeta {
                mode: Some(md.mode() & 0o7777),
                owner: Some((md.uid(), md.gid())),
                mtime: Some(md.mtime()),
            }),
        };
        if with_xattrs && matches!(kind, NodeKind::File | NodeKind::Dir) {
            match read_user_xattrs(&fs_path) {
                Ok(x) => node.xattrs = x,
                Err(e) if tolerant => node.read_error = Some(format!("listxattr: {e}")),
                Err(e) => return Err(at_path(&path, "listxattr", e)),
            }
        }
        if kind == NodeKind::File
            && path != DRAIN_FILE
            && (wanted.contains(&path) || md.size() <= SMALL_FILE_BYTES)
        {
            if md.size() > MAX_READ_BYTES {
                node.read_error = Some(format!("size {} exceeds the read limit", md.size()))
            } else {
                match classify_file(&fs_path, md.size()) {
                    Ok(content) => node.content = Some(content),
                    Err(e) => node.read_error = Some(e.to_string()),
                }
            }
        }
        if kind == NodeKind::Dir {
            let listed = std::fs::read_dir(&fs_path)
                .and_then(|d| {
                    d.take(MAX_DIR_ENTRIES + 1)
                        .map(|e| e.map(|e| e.file_name()))
                        .collect::<Result<Vec<_>, _>>()
                })
                .and_then(|names| match names.len() + snap.entries.len() > MAX_DIR_ENTRIES {
                    true => Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("lists more than {MAX_DIR_ENTRIES} names (a damaged listing)"),
                    )),
                    false => Ok(names),
                });
            let listed = match listed {
                Ok(l) => l,
                Err(e) if tolerant => {
                    node.read_error = Some(format!("readdir: {e}"));
                    Vec::new()
                }
                Err(e) => return Err(at_path(&path, "readdir", e)),
            };
            // A name no directory may hold (empty, "." or "..", or with a '/' or NUL: a
            // damaged directory block served as it is) would walk a directory again, or
            // forever ("" joins to the directory itself).
            let invalid = |n: &str| matches!(n, "" | "." | "..") || n.contains(['/', '\0']);
            if let Some(bad) = listed.iter().find(|n| invalid(&n.to_string_lossy())) {
                let e = std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("lists an invalid name {:?}", bad),
                );
                if !tolerant {
                    return Err(at_path(&path, "readdir", e));
                }
                node.read_error = Some(format!("readdir: {e}"));
            }
            for name in listed {
                let name = name.to_string_lossy().into_owned();
                if (path == "/" && name == "lost+found") || invalid(&name) {
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

/// The `user.` extended attributes of `path` (not following a symlink), values as text
/// (generated workloads set ASCII values; other bytes are shown escaped).
fn read_user_xattrs(path: &Path) -> std::io::Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    for name in xattr::list(path)? {
        let Some(n) = name.to_str().filter(|n| n.starts_with("user.")) else { continue };
        // A name listed and gone by the time it is read is a race the crash state cannot
        // have (nothing else touches it): treat it as absent.
        if let Some(v) = xattr::get(path, &name)? {
            out.insert(n.to_owned(), String::from_utf8_lossy(&v).into_owned());
        }
    }
    Ok(out)
}

/// Bytes of a file read and classified at a time: a multiple of the sector size, so
/// that only the file's last sector can be partial.
const CLASSIFY_CHUNK: usize = 256 * 1024;

/// The classified content of the first `size` bytes of the file at `path` (fewer if it
/// is shorter), read a chunk at a time: the classes of each sector at its offset, as
/// if the whole were read at once, without holding the whole (a crash state's walk
/// reads megabytes per file, and a fresh buffer of that size per file costs page faults
/// and zeroing for every state).
fn classify_file(path: &Path, size: u64) -> std::io::Result<Content> {
    let mut file = std::fs::File::open(path)?.take(size);
    let mut buf = vec![0u8; CLASSIFY_CHUNK.min(size as usize)];
    let mut content = Content::new();
    let mut offset = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        for (i, sector) in buf[..filled].chunks(stamp::SECTOR).enumerate() {
            content.push(stamp::classify(sector, offset + (i * stamp::SECTOR) as u64), 1);
        }
        offset += filled as u64;
        if filled < buf.len() || filled == 0 {
            return Ok(content);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Classifies a whole file's bytes, as the walk did before it read in chunks.
    fn classify_bytes(bytes: &[u8]) -> Content {
        Content::from_classes(
            bytes
                .chunks(stamp::SECTOR)
                .enumerate()
                .map(|(i, s)| stamp::classify(s, (i * stamp::SECTOR) as u64)),
        )
    }

    /// Classifying a file a chunk at a time gives the classes of the whole: stamped data,
    /// zeros, a stamp out of place and garbage across chunk boundaries, a partial last
    /// sector, a shorter file than asked for, and an empty one.
    #[test]
    fn a_file_classified_in_chunks_is_classified_as_a_whole() {
        let dir = tempfile::tempdir().unwrap();
        let sectors = CLASSIFY_CHUNK / stamp::SECTOR * 2 + 3;
        let mut bytes = vec![0u8; sectors * stamp::SECTOR];
        stamp::fill(&mut bytes[..(sectors - 40) * stamp::SECTOR], 3, 0, 1, 9);
        bytes[CLASSIFY_CHUNK - stamp::SECTOR..CLASSIFY_CHUNK].fill(0);
        let moved = bytes[..stamp::SECTOR].to_vec();
        bytes[CLASSIFY_CHUNK..CLASSIFY_CHUNK + stamp::SECTOR].copy_from_slice(&moved);
        bytes[CLASSIFY_CHUNK * 2 + 5] ^= 0xFF;
        let path = dir.path().join("f");
        for len in [bytes.len() - 100, bytes.len(), CLASSIFY_CHUNK, 700, 0] {
            std::fs::write(&path, &bytes[..len]).unwrap();
            let whole = classify_bytes(&bytes[..len]);
            assert_eq!(classify_file(&path, len as u64).unwrap(), whole, "{len} bytes");
            assert_eq!(classify_file(&path, len as u64 + 4096).unwrap(), whole, "shorter file");
        }
        assert!(classify_file(&dir.path().join("missing"), 1).is_err());
    }
}
