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
        allocated_past_eof: None,
    };
    // Reading extended attributes costs a listxattr per name: only when the workload
    // sets or removes any.
    let with_xattrs = w.setup.iter().chain(&w.ops).any(|o| o.is_xattr());
    let with_meta = w.setup.iter().chain(&w.ops).any(|o| o.kind().is_attr_op());
    // Extents cost a FIEMAP per file: only when the workload allocates past an end.
    let with_extents = w.setup.iter().chain(&w.ops).any(|o| {
        matches!(
            o,
            crate::Op::Falloc {
                mode: crate::FallocMode::KeepSize | crate::FallocMode::ZeroRangeKeepSize,
                ..
            }
        )
    });
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
        let kind = node_kind(&md);
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
            allocated_past_eof: None,
        };
        if with_extents && kind == NodeKind::File && wanted.contains(&path) {
            // A file system without FIEMAP (or a file it refuses to map) leaves the
            // allocation unjudged rather than failing the walk.
            let eof = md.size().div_ceil(crate::model::ALLOC_BLOCK) * crate::model::ALLOC_BLOCK;
            node.allocated_past_eof = allocated_from(&fs_path, eof).ok();
        }
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
            let listed = list_dir(&fs_path, snap.entries.len(), tolerant, &mut node)
                .map_err(|e| at_path(&path, "readdir", e))?;
            for name in listed {
                let child = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
                if child != "/lost+found" {
                    stack.push(child);
                }
            }
        }
        snap.entries.insert(path, node);
    }
    Ok(snap)
}

/// The kind of inode `md` describes (a character device numbered 0:0 is an overlay
/// whiteout).
fn node_kind(md: &std::fs::Metadata) -> NodeKind {
    let ft = md.file_type();
    if ft.is_file() {
        NodeKind::File
    } else if ft.is_dir() {
        NodeKind::Dir
    } else if ft.is_symlink() {
        NodeKind::Symlink
    } else if std::os::unix::fs::FileTypeExt::is_char_device(&ft) && md.rdev() == 0 {
        NodeKind::Whiteout
    } else {
        NodeKind::Other
    }
}

/// The names directory `fs_path` lists that the walk descends into, given `seen` entries
/// already walked. A listing that fails, is implausibly long or holds a name no directory
/// may hold is an error, or with `tolerant` the directory's `read_error` (and what valid
/// names it listed).
fn list_dir(
    fs_path: &Path,
    seen: usize,
    tolerant: bool,
    node: &mut Node,
) -> std::io::Result<Vec<String>> {
    let listed = std::fs::read_dir(fs_path)
        .and_then(|d| {
            d.take(MAX_DIR_ENTRIES + 1)
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<Vec<_>, _>>()
        })
        .and_then(|names| match names.len() + seen > MAX_DIR_ENTRIES {
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
        Err(e) => return Err(e),
    };
    // A name no directory may hold (empty, "." or "..", or with a '/' or NUL: a damaged
    // directory block served as it is) would walk a directory again, or forever (""
    // joins to the directory itself).
    let invalid = |n: &str| matches!(n, "" | "." | "..") || n.contains(['/', '\0']);
    if let Some(bad) = listed.iter().find(|n| invalid(&n.to_string_lossy())) {
        let e = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("lists an invalid name {:?}", bad),
        );
        if !tolerant {
            return Err(e);
        }
        node.read_error = Some(format!("readdir: {e}"));
    }
    Ok(listed
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !invalid(n))
        .collect())
}

/// The name of the file and of the directory [`create_after_recovery`] makes in each
/// directory (no workload uses them).
pub const NEW_FILE: &str = "bob-new-file";
/// See [`NEW_FILE`].
pub const NEW_DIR: &str = "bob-new-dir";
/// At most this many names are created after recovery (a workload with thousands of
/// removed names would otherwise create thousands per crash state).
pub const MAX_CREATED: usize = 64;

/// Creates new names on the recovered, judged and writable tree under `root` (its
/// snapshot `snap`): a file and a directory in every directory the workload ever named
/// that the snapshot shows, and every name the model ever gave that the snapshot does not
/// show (a removed or lost name) in a directory it shows, as what it was (a directory for
/// a directory, else a file). Each name that cannot be made is returned with its error
/// (EEXIST where the snapshot shows no such name, ENOSPC, EIO, EUCLEAN...). What it
/// makes stays: the crash state's writes go to its private overlay, discarded after.
pub fn create_after_recovery(
    root: &Path,
    w: &Workload,
    snap: &Snapshot,
) -> std::collections::BTreeMap<String, String> {
    let h = crate::model::History::new(w);
    let is_dir = |p: &str| snap.entries.get(p).is_some_and(|n| n.kind == NodeKind::Dir);
    let join = |dir: &str, name: &str| match dir {
        "/" => format!("/{name}"),
        d => format!("{d}/{name}"),
    };
    // Every name the model ever gave, with whether it named a directory.
    let mut ever: std::collections::BTreeMap<&str, bool> = std::collections::BTreeMap::new();
    for (id, names) in &h.ever_names {
        let dir = h.final_state.nodes.get(id).is_some_and(|n| n.kind == NodeKind::Dir)
            || h.states.iter().any(|s| s.nodes.get(id).is_some_and(|n| n.kind == NodeKind::Dir));
        for n in names {
            ever.insert(n.as_str(), dir);
        }
    }
    let mut wanted: Vec<(String, bool)> = Vec::new();
    let dirs: BTreeSet<&str> = ever
        .iter()
        .filter(|(p, d)| **d && is_dir(p))
        .map(|(p, _)| *p)
        .chain(std::iter::once("/"))
        .collect();
    for d in &dirs {
        wanted.push((join(d, NEW_FILE), false));
        wanted.push((join(d, NEW_DIR), true));
    }
    for (p, d) in &ever {
        let parent = crate::model::parent(p);
        if *p != "/" && *p != DRAIN_FILE && !snap.entries.contains_key(*p) && is_dir(parent) {
            wanted.push((p.to_string(), *d));
        }
    }
    let mut failed = std::collections::BTreeMap::new();
    for (p, dir) in wanted.into_iter().take(MAX_CREATED) {
        // A name the snapshot already shows is no test of creation.
        if snap.entries.contains_key(&p) {
            continue;
        }
        let host = root.join(p.trim_start_matches('/'));
        let res = if dir {
            std::fs::create_dir(&host)
        } else {
            std::fs::OpenOptions::new().write(true).create_new(true).open(&host).map(drop)
        };
        if let Err(e) = res {
            failed.insert(p, e.to_string());
        }
    }
    failed
}

/// FS_IOC_FIEMAP, `_IOWR('f', 11, struct fiemap)` (linux/fs.h); the libc crate lacks it.
const FS_IOC_FIEMAP: libc::c_ulong = 0xc020_660b;
/// fiemap_extent.fe_flags: the file's last extent.
const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// Extents asked for per call.
const FIEMAP_BATCH: usize = 32;

/// struct fiemap_extent.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

/// struct fiemap with room for [`FIEMAP_BATCH`] extents after it.
#[repr(C)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    fm_extents: [FiemapExtent; FIEMAP_BATCH],
}

/// Bytes of the extents of the file at `path` at or past byte `from` (FIEMAP, without
/// FIEMAP_FLAG_SYNC: a recovered, read-only tree has nothing to write back), unwritten
/// (preallocated) extents included.
fn allocated_from(path: &Path, from: u64) -> std::io::Result<u64> {
    // FIEMAP asked from `from` on, not from the start: mapping the whole file would read
    // an indirect-mapped file's indirect blocks, which the walk otherwise never reads.
    let past =
        |e: &FileExtent| e.logical.saturating_add(e.length).saturating_sub(e.logical.max(from));
    Ok(extents_from(path, from)?.iter().map(past).sum())
}

/// One extent of a file as FIEMAP reports it: `length` bytes at byte `logical` of the
/// file lie at byte `physical` of the device, with FIEMAP's `flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileExtent {
    /// Byte offset in the file.
    pub logical: u64,
    /// Byte offset on the device.
    pub physical: u64,
    /// Bytes.
    pub length: u64,
    /// `fe_flags`.
    pub flags: u32,
}

impl FileExtent {
    /// Whether reading the file there reads exactly the device's bytes there, and
    /// nothing else decides them: not unknown or delayed, not encoded, encrypted,
    /// inline, a packed tail or unaligned, and not unwritten (which reads as zeros).
    pub fn reads_the_device(&self) -> bool {
        // FIEMAP_EXTENT_UNKNOWN 0x2, DELALLOC 0x4, ENCODED 0x8, DATA_ENCRYPTED 0x80,
        // NOT_ALIGNED 0x100, DATA_INLINE 0x200, DATA_TAIL 0x400, UNWRITTEN 0x800.
        const NOT_PLAIN: u32 = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800;
        self.flags & NOT_PLAIN == 0
    }
}

/// Every extent of the file at `path` (FIEMAP, without FIEMAP_FLAG_SYNC: a recovered,
/// mounted tree has nothing to write back), in file order.
pub fn file_extents(path: &Path) -> std::io::Result<Vec<FileExtent>> {
    extents_from(path, 0)
}

/// The extents of the file at `path` that end past byte `from`, in file order.
fn extents_from(path: &Path, from: u64) -> std::io::Result<Vec<FileExtent>> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut start = from;
    loop {
        let mut map = Fiemap {
            fm_start: start,
            fm_length: u64::MAX - start,
            fm_flags: 0,
            fm_mapped_extents: 0,
            fm_extent_count: FIEMAP_BATCH as u32,
            fm_reserved: 0,
            fm_extents: [FiemapExtent::default(); FIEMAP_BATCH],
        };
        // SAFETY: a valid descriptor and a struct fiemap with room for the extent count
        // it declares, alive across the call.
        let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP as _, &mut map) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = (map.fm_mapped_extents as usize).min(FIEMAP_BATCH);
        out.extend(map.fm_extents[..n].iter().map(|e| FileExtent {
            logical: e.fe_logical,
            physical: e.fe_physical,
            length: e.fe_length,
            flags: e.fe_flags,
        }));
        let Some(last) = map.fm_extents[..n].last() else { return Ok(out) };
        let next = last.fe_logical.saturating_add(last.fe_length);
        if last.fe_flags & FIEMAP_EXTENT_LAST != 0 || next <= start {
            return Ok(out);
        }
        start = next;
    }
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

    /// FIEMAP counts a keep-size allocation past the end (unwritten extents) and only
    /// what lies past the offset asked, on the file system the tests' directory is on.
    #[test]
    fn allocation_past_the_end_is_counted_from_the_extents() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = std::fs::File::create(&p).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 4096], 0).unwrap();
        // SAFETY: a valid descriptor; the kernel checks the mode and range.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 8192, 8192) };
        if rc != 0 {
            eprintln!("no fallocate here: {}", std::io::Error::last_os_error());
            return;
        }
        f.sync_all().unwrap();
        match allocated_from(&p, 4096) {
            Ok(n) => assert!((8192..=12288).contains(&n), "{n} bytes past 4096"),
            Err(e) => eprintln!("no FIEMAP here: {e}"),
        }
        assert_eq!(allocated_from(&p, 1 << 20).unwrap_or(0), 0);
    }

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
