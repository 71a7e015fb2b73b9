//! The oracle: a pure in-memory model of the file system a workload builds. Paths map to
//! node ids (also the file ids in stamps); nodes carry kind, size, link count and the
//! expected class of every sector. `apply(op)` gives the next state. No file system is
//! involved, so the model is what the checks trust.

use crate::op::Op;
use crate::op::{FallocMode, RenameHow};
use crate::stamp::SectorClass;
use crate::stamp::{DRAIN_OP, SETUP_OP};
use crate::tree::{Content, InodeMeta, Node, NodeKind, Observed, Snapshot};
use crate::workload::Workload;
use crate::SECTOR;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Id of the root directory.
pub const ROOT_ID: u32 = 0;

/// A file or directory of the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelNode {
    pub kind: NodeKind,
    /// Bytes (0 for directories).
    pub size: u64,
    /// Names that refer to it (files); directories keep 1.
    pub nlink: u64,
    /// Expected class of every sector (files).
    pub content: Content,
    /// Extended attributes (name to value) the workload set on it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub xattrs: BTreeMap<String, String>,
    /// The attributes the workload set on it (mode, owner, mtime); a data change forgets
    /// a set mtime, as the kernel sets the clock's.
    #[serde(default, skip_serializing_if = "is_unset")]
    pub meta: InodeMeta,
    /// Byte ranges (start, end) a fallocate with keep-size allocated, sorted and
    /// disjoint: the part past the size is allocation no reader sees, which a fsync
    /// promises all the same (see [`ModelNode::allocated_past_eof`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prealloc: Vec<(u64, u64)>,
}

/// The block size allocation is counted in: every file system bob runs allocates 4 KiB
/// blocks (mkfs' defaults on 4 KiB pages).
pub const ALLOC_BLOCK: u64 = 4096;

fn is_unset(m: &InodeMeta) -> bool {
    *m == InodeMeta::default()
}

impl ModelNode {
    fn new(kind: NodeKind, size: u64) -> ModelNode {
        ModelNode {
            kind,
            size,
            nlink: 1,
            content: Content::new(),
            xattrs: BTreeMap::new(),
            meta: InodeMeta::default(),
            prealloc: Vec::new(),
        }
    }

    /// Bytes of whole blocks a keep-size fallocate allocated at or past the size rounded
    /// up to a block: what a file system must still have allocated there. Blocks only
    /// partly inside a range are left out (a file system may allocate finer).
    pub fn allocated_past_eof(&self) -> u64 {
        let eof = self.size.div_ceil(ALLOC_BLOCK) * ALLOC_BLOCK;
        self.prealloc
            .iter()
            .map(|&(a, b)| {
                let a = a.max(eof).div_ceil(ALLOC_BLOCK) * ALLOC_BLOCK;
                (b / ALLOC_BLOCK * ALLOC_BLOCK).saturating_sub(a)
            })
            .sum()
    }

    /// What `op` (acting on this node) does to the allocation past its end: a keep-size
    /// allocation adds its range, a hole punched removes its range, writes and a
    /// size-changing allocation leave it; anything else that changes the file (a
    /// truncate, an O_TRUNC, a shift, a clone over it) may free it, and the model then
    /// claims nothing.
    fn track_prealloc(&mut self, op: &Op) {
        let cut = |ranges: &mut Vec<(u64, u64)>, o: u64, e: u64| {
            let mut out = Vec::new();
            for &(a, b) in ranges.iter() {
                if a < o.min(b) {
                    out.push((a, o.min(b)));
                }
                if e.max(a) < b {
                    out.push((e.max(a), b));
                }
            }
            *ranges = out;
        };
        match op {
            Op::Falloc {
                mode: FallocMode::KeepSize | FallocMode::ZeroRangeKeepSize,
                offset,
                len,
                ..
            } => {
                let (o, e) = (*offset, offset + len);
                cut(&mut self.prealloc, o, e);
                self.prealloc.push((o, e));
                self.prealloc.sort_unstable();
                // Adjacent ranges become one.
                let mut merged: Vec<(u64, u64)> = Vec::new();
                for (a, b) in std::mem::take(&mut self.prealloc) {
                    match merged.last_mut() {
                        Some(last) if last.1 >= a => last.1 = last.1.max(b),
                        _ => merged.push((a, b)),
                    }
                }
                self.prealloc = merged;
            }
            Op::Falloc { mode: FallocMode::PunchHole, offset, len, .. } => {
                cut(&mut self.prealloc, *offset, offset + len)
            }
            Op::Falloc { mode: FallocMode::Default | FallocMode::UnshareRange, .. }
            | Op::Write { .. }
            | Op::Append { .. }
            | Op::DirectWrite { .. }
            | Op::SyncWrite { .. }
            | Op::FdWrite { .. } => {}
            o if o.changes_data() => self.prealloc.clear(),
            _ => {}
        }
    }
}

/// The model's state at one point of program order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelState {
    /// The op of `Workload::ops` this state follows; `None`: before the first op (after setup).
    pub after_op: Option<usize>,
    /// Every path, "/" included, and the node it names.
    pub names: BTreeMap<String, u32>,
    /// Every node ever created (files whose last name went keep `nlink` 0).
    pub nodes: BTreeMap<u32, ModelNode>,
    /// The id the next created node gets.
    pub next_id: u32,
    /// Descriptors the workload keeps open (`open`), by the name it gave them, and the
    /// node each was opened on: it stays that node's across unlinks and renames.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handles: BTreeMap<String, u32>,
}

/// An op the model cannot apply (a path that does not exist, an unaligned write, ...).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {reason}")]
pub struct ModelError {
    pub op: String,
    pub reason: String,
}

/// The parent path of an absolute path ("/A/f0" -> "/A", "/A" -> "/").
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Whether `path` is absolute, normal ("/a/b": no empty, "." or ".." components) and not "/".
pub fn valid_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() > 1
        && path[1..].split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

impl Default for ModelState {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelState {
    /// An empty file system: just the root directory.
    pub fn new() -> ModelState {
        let root = ModelNode::new(NodeKind::Dir, 0);
        ModelState {
            after_op: None,
            names: BTreeMap::from([("/".to_string(), ROOT_ID)]),
            nodes: BTreeMap::from([(ROOT_ID, root)]),
            next_id: ROOT_ID + 1,
            handles: BTreeMap::new(),
        }
    }

    /// The node id `path` names.
    pub fn id(&self, path: &str) -> Option<u32> {
        self.names.get(path).copied()
    }

    /// The node `path` names.
    pub fn node(&self, path: &str) -> Option<&ModelNode> {
        self.nodes.get(&self.id(path)?)
    }

    /// Names of node `id` in this state.
    pub fn names_of(&self, id: u32) -> impl Iterator<Item = &str> {
        self.names.iter().filter(move |(_, &i)| i == id).map(|(p, _)| p.as_str())
    }

    /// Applies `op`; `stamp_op` is the op index its data is stamped with (or
    /// SETUP_OP/DRAIN_OP). Returns the id of the node the op acts on (the new node for
    /// creat/mkdir, the source for link/rename), `None` for sync.
    pub fn apply(&mut self, op: &Op, stamp_op: u32) -> Result<Option<u32>, ModelError> {
        let id = self.apply_op(op, stamp_op)?;
        if let (true, Some(node)) = (op.changes_data(), id.and_then(|i| self.nodes.get_mut(&i))) {
            node.track_prealloc(op);
        }
        // A change of the data sets the modification time from the clock: a time the
        // workload set is no longer what the file shows.
        if let (true, Some(id)) = (op.changes_data(), id) {
            if let Some(node) = self.nodes.get_mut(&id) {
                node.meta.mtime = None;
            }
        }
        Ok(id)
    }

    /// The node `p` names (of `kind`, if given), or why `op` cannot apply.
    fn need(&self, op: &Op, p: &str, kind: Option<NodeKind>) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let id = self.id(p).ok_or_else(|| err(format!("{p} does not exist")))?;
        match kind {
            Some(k) if self.nodes[&id].kind != k => Err(err(format!("{p} is not a {k:?}"))),
            _ => Ok(id),
        }
    }

    /// The node descriptor `fd` was opened on (of `kind`, if given), or why `op` cannot
    /// apply.
    fn need_fd(&self, op: &Op, fd: &str, kind: Option<NodeKind>) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let id =
            *self.handles.get(fd).ok_or_else(|| err(format!("descriptor {fd} is not open")))?;
        match kind {
            Some(k) if self.nodes[&id].kind != k => {
                Err(err(format!("descriptor {fd} is not a {k:?}")))
            }
            _ => Ok(id),
        }
    }

    /// Whether `p` is free in an existing directory, or why `op` cannot apply.
    fn need_absent_in_dir(&self, op: &Op, p: &str) -> Result<(), ModelError> {
        if self.id(p).is_some() {
            return Err(ModelError { op: op.to_string(), reason: format!("{p} exists") });
        }
        self.need(op, parent(p), Some(NodeKind::Dir)).map(|_| ())
    }

    /// Adds a node named `path` and returns its id.
    fn add_node(&mut self, path: &str, node: ModelNode) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        self.nodes.insert(id, node);
        self.names.insert(path.to_owned(), id);
        id
    }

    /// Every name at or below `path`, with the node it names.
    fn subtree(&self, path: &str) -> Vec<(String, u32)> {
        let prefix = format!("{path}/");
        self.names
            .range(path.to_owned()..)
            .take_while(|(p, _)| *p == path || p.starts_with(&prefix))
            .map(|(p, &i)| (p.clone(), i))
            .collect()
    }

    /// renameat2 with `how`: the moved node's id.
    fn rename2(
        &mut self,
        op: &Op,
        from: &str,
        to: &str,
        how: RenameHow,
    ) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let id = self.id(from).ok_or_else(|| err(format!("{from} does not exist")))?;
        if self.node(parent(to)).map(|n| n.kind) != Some(NodeKind::Dir) {
            return Err(err(format!("{} is not a directory", parent(to))));
        }
        if to.starts_with(&format!("{from}/")) || from.starts_with(&format!("{to}/")) {
            return Err(err(format!("{to} and {from} are one inside the other")));
        }
        let a = self.subtree(from);
        match how {
            RenameHow::Exchange => {
                if self.id(to).is_none() {
                    return Err(err(format!("{to} does not exist")));
                }
                let b = self.subtree(to);
                for (p, _) in a.iter().chain(&b) {
                    self.names.remove(p);
                }
                for (p, i) in a {
                    self.names.insert(format!("{to}{}", &p[from.len()..]), i);
                }
                for (p, i) in b {
                    self.names.insert(format!("{from}{}", &p[to.len()..]), i);
                }
            }
            RenameHow::Noreplace | RenameHow::Whiteout => {
                if self.id(to).is_some() {
                    return Err(err(format!("{to} exists")));
                }
                if how == RenameHow::Whiteout && self.nodes[&id].kind != NodeKind::File {
                    return Err(err(format!("{from}: whiteouts are made for files here")));
                }
                for (p, i) in a {
                    self.names.remove(&p);
                    self.names.insert(format!("{to}{}", &p[from.len()..]), i);
                }
                if how == RenameHow::Whiteout {
                    self.add_node(from, ModelNode::new(NodeKind::Whiteout, 0));
                }
            }
        }
        Ok(id)
    }

    /// The operations beyond Ace's, as [`ModelState::apply_op`] applies the others.
    fn apply_beyond_ace(&mut self, op: &Op, stamp_op: u32) -> Result<Option<u32>, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let need = |s: &ModelState, p: &str, kind| s.need(op, p, kind);
        let need_absent_in_dir = |s: &ModelState, p: &str| s.need_absent_in_dir(op, p);
        let aligned = |v: u64| v % SECTOR == 0;
        match op {
            Op::Rename2 { from, to, how } => self.rename2(op, from, to, *how).map(Some),
            Op::Chmod { path, mode } => {
                let id = need(self, path, Some(NodeKind::File))?;
                self.nodes.get_mut(&id).unwrap().meta.mode = Some(*mode & 0o7777);
                Ok(Some(id))
            }
            Op::Chown { path, uid, gid } => {
                let id = need(self, path, Some(NodeKind::File))?;
                self.nodes.get_mut(&id).unwrap().meta.owner = Some((*uid, *gid));
                Ok(Some(id))
            }
            Op::Utimes { path, mtime } => {
                let id = need(self, path, Some(NodeKind::File))?;
                self.nodes.get_mut(&id).unwrap().meta.mtime = Some(*mtime);
                Ok(Some(id))
            }
            Op::TmpfileLink { path, len } => {
                need_absent_in_dir(self, path)?;
                if !aligned(*len) {
                    return Err(err("the length must be a multiple of 512".into()));
                }
                let id = self.next_id;
                let mut node = ModelNode::new(NodeKind::File, *len);
                node.content = Content::filled(data_class(id, stamp_op), len / SECTOR);
                Ok(Some(self.add_node(path, node)))
            }
            Op::Clone { from, to }
            | Op::CloneRange { from, to, .. }
            | Op::CopyRange { from, to, .. }
            | Op::DedupeRange { from, to, .. } => {
                let src = need(self, from, Some(NodeKind::File))?;
                let dst = need(self, to, Some(NodeKind::File))?;
                if src == dst {
                    return Err(err(format!("{from} and {to} are one file")));
                }
                let source = self.nodes[&src].clone();
                let node = self.nodes.get_mut(&dst).unwrap();
                copy_between(op, &source, node).map_err(err)?;
                Ok(Some(dst))
            }
            _ => Ok(None),
        }
    }

    fn apply_op(&mut self, op: &Op, stamp_op: u32) -> Result<Option<u32>, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        for p in op.paths() {
            // The root may be fsynced (its entries' promise), never created or moved.
            let root_fsync = p == "/" && matches!(op, Op::Fsync { .. });
            if !valid_path(p) && !root_fsync {
                return Err(err(format!("{p}: not an absolute normal path below the root")));
            }
        }
        let need = |s: &ModelState, p: &str, kind| s.need(op, p, kind);
        let need_absent_in_dir = |s: &ModelState, p: &str| s.need_absent_in_dir(op, p);
        let aligned = |v: u64| v % SECTOR == 0;
        match op {
            Op::Mkdir { path } | Op::Creat { path, .. } => {
                need_absent_in_dir(self, path)?;
                let kind =
                    if matches!(op, Op::Mkdir { .. }) { NodeKind::Dir } else { NodeKind::File };
                Ok(Some(self.add_node(path, ModelNode::new(kind, 0))))
            }
            Op::Rmdir { path } => self.rmdir(op, path).map(Some),
            Op::Write { path, offset, len }
            | Op::Append { path, offset, len }
            | Op::DirectWrite { path, offset, len }
            | Op::SyncWrite { path, offset, len, .. }
            | Op::MmapWrite { path, offset, len } => {
                let id = need(self, path, Some(NodeKind::File))?;
                let size = self.nodes[&id].size;
                if matches!(op, Op::Append { .. }) && size != *offset {
                    return Err(err(format!("{path} has size {size}, not {offset}")));
                }
                self.write_range(op, path, id, (*offset, *len), stamp_op).map(Some)
            }
            Op::OtruncWrite { path, len, chunk } => {
                let id = need(self, path, Some(NodeKind::File))?;
                if !aligned(*len) || *chunk == 0 || !aligned(*chunk) || len % chunk != 0 {
                    return Err(err(
                        "length and chunk must be multiples of 512, chunk dividing length".into(),
                    ));
                }
                let node = self.nodes.get_mut(&id).unwrap();
                node.content = Content::filled(data_class(id, stamp_op), len / SECTOR);
                node.size = *len;
                Ok(Some(id))
            }
            Op::Link { from, to } => self.link(op, from, to).map(Some),
            Op::Unlink { path } => self.unlink(op, path).map(Some),
            Op::Rename { from, to } => self.rename(op, from, to).map(Some),
            Op::Fsync { path } => need(self, path, None).map(Some),
            Op::Open { path, fd } => self.open(op, path, fd).map(Some),
            Op::Close { fd } => {
                let id = self.need_fd(op, fd, None)?;
                self.handles.remove(fd);
                Ok(Some(id))
            }
            Op::FdFsync { fd } => self.need_fd(op, fd, None).map(Some),
            Op::FdFdatasync { fd } => self.need_fd(op, fd, Some(NodeKind::File)).map(Some),
            Op::FdWrite { fd, offset, len } => {
                // A write as `write` makes, to the node whatever its names are now.
                let id = self.need_fd(op, fd, Some(NodeKind::File))?;
                let what = format!("descriptor {fd}");
                self.write_range(op, &what, id, (*offset, *len), stamp_op).map(Some)
            }
            Op::Fdatasync { path } => need(self, path, Some(NodeKind::File)).map(Some),
            Op::Sync | Op::Syncfs | Op::Osync | Op::Dsync | Op::Output => Ok(None),
            // Evicting cached inodes changes nothing a reader sees.
            Op::DropCaches => Ok(None),
            // The rollback of an abort is the history's (see `History::new`).
            Op::TxnBegin | Op::TxnCommit { .. } | Op::TxnAbort => Ok(None),
            Op::WritebackStart { path } => need(self, path, Some(NodeKind::File)).map(Some),
            Op::Truncate { path, size } => {
                let id = need(self, path, Some(NodeKind::File))?;
                if !aligned(*size) {
                    return Err(err("the size must be a multiple of 512".into()));
                }
                let node = self.nodes.get_mut(&id).unwrap();
                node.content.resize(size / SECTOR);
                node.size = *size;
                Ok(Some(id))
            }
            Op::Falloc { path, mode, offset, len } => {
                let id = need(self, path, Some(NodeKind::File))?;
                self.falloc(op, id, *mode, *offset, *len).map(Some)
            }
            Op::Setxattr { path, name, value } => self.set_xattr(op, path, name, value).map(Some),
            Op::Removexattr { path, name } => self.remove_xattr(op, path, name).map(Some),
            Op::Rename2 { .. }
            | Op::Chmod { .. }
            | Op::Chown { .. }
            | Op::Utimes { .. }
            | Op::TmpfileLink { .. }
            | Op::Clone { .. }
            | Op::CloneRange { .. }
            | Op::CopyRange { .. }
            | Op::DedupeRange { .. } => self.apply_beyond_ace(op, stamp_op),
            Op::Symlink { target, path } => {
                need_absent_in_dir(self, path)?;
                Ok(Some(
                    self.add_node(path, ModelNode::new(NodeKind::Symlink, target.len() as u64)),
                ))
            }
        }
    }

    /// `rmdir path`: an empty directory loses its name.
    fn rmdir(&mut self, op: &Op, path: &str) -> Result<u32, ModelError> {
        let id = self.need(op, path, Some(NodeKind::Dir))?;
        let prefix = format!("{path}/");
        if self.names.keys().any(|p| p.starts_with(&prefix)) {
            return Err(ModelError { op: op.to_string(), reason: format!("{path} is not empty") });
        }
        self.names.remove(path);
        self.nodes.get_mut(&id).unwrap().nlink = 0;
        Ok(id)
    }

    /// `link from to`: a file, or a symlink (link(2) links the symlink itself, not its
    /// target: the special files' log-replay bugs linked them so).
    fn link(&mut self, op: &Op, from: &str, to: &str) -> Result<u32, ModelError> {
        let id = self.need(op, from, None)?;
        if !matches!(self.nodes[&id].kind, NodeKind::File | NodeKind::Symlink) {
            let reason = format!("{from}: links are made to files and symlinks");
            return Err(ModelError { op: op.to_string(), reason });
        }
        self.need_absent_in_dir(op, to)?;
        self.names.insert(to.to_owned(), id);
        self.nodes.get_mut(&id).unwrap().nlink += 1;
        Ok(id)
    }

    /// `unlink path`: a file's or a symlink's name goes.
    fn unlink(&mut self, op: &Op, path: &str) -> Result<u32, ModelError> {
        let id = self.need(op, path, None)?;
        if !matches!(self.nodes[&id].kind, NodeKind::File | NodeKind::Symlink) {
            let reason = format!("{path}: unlink removes files and symlinks");
            return Err(ModelError { op: op.to_string(), reason });
        }
        self.names.remove(path);
        self.nodes.get_mut(&id).unwrap().nlink -= 1;
        Ok(id)
    }

    /// `setxattr path name value`: a user attribute of a file or directory.
    fn set_xattr(
        &mut self,
        op: &Op,
        path: &str,
        name: &str,
        value: &str,
    ) -> Result<u32, ModelError> {
        let id = self.need(op, path, None)?;
        if self.nodes[&id].kind == NodeKind::Symlink {
            let reason = format!("{path} is a symlink (user xattrs need a file or directory)");
            return Err(ModelError { op: op.to_string(), reason });
        }
        self.nodes.get_mut(&id).unwrap().xattrs.insert(name.to_owned(), value.to_owned());
        Ok(id)
    }

    /// `removexattr path name`: an attribute the node has.
    fn remove_xattr(&mut self, op: &Op, path: &str, name: &str) -> Result<u32, ModelError> {
        let id = self.need(op, path, None)?;
        if self.nodes.get_mut(&id).unwrap().xattrs.remove(name).is_none() {
            let reason = format!("{path} has no attribute {name}");
            return Err(ModelError { op: op.to_string(), reason });
        }
        Ok(id)
    }

    /// A write of `(offset, len)` to node `id` (`what` names it in an error): the range
    /// holds `stamp_op`'s data and the size reaches its end.
    fn write_range(
        &mut self,
        op: &Op,
        what: &str,
        id: u32,
        (offset, len): (u64, u64),
        stamp_op: u32,
    ) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        if offset % SECTOR != 0 || len % SECTOR != 0 {
            return Err(err("offset and length must be multiples of 512".into()));
        }
        let node = self.nodes.get_mut(&id).unwrap();
        if node.size % SECTOR != 0 {
            return Err(err(format!("{what} has an unaligned size {}", node.size)));
        }
        node.content.set(offset / SECTOR, len / SECTOR, data_class(id, stamp_op));
        node.size = node.size.max(offset + len);
        Ok(id)
    }

    /// `rename from to`: a file may replace a file; a directory moves with every name
    /// below it.
    fn rename(&mut self, op: &Op, from: &str, to: &str) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let id = self.need(op, from, None)?;
        self.need(op, parent(to), Some(NodeKind::Dir))?;
        if to.starts_with(&format!("{from}/")) {
            return Err(err(format!("{to} is inside {from}")));
        }
        match self.id(to) {
            Some(t) if t == id => return Ok(id),
            Some(t)
                if self.nodes[&t].kind == NodeKind::File
                    && self.nodes[&id].kind == NodeKind::File =>
            {
                self.names.remove(to);
                self.nodes.get_mut(&t).unwrap().nlink -= 1;
            }
            Some(_) => {
                return Err(err(format!("{to} exists and is not a file replaced by a file")))
            }
            None => {}
        }
        let prefix = format!("{from}/");
        let moved: Vec<(String, u32)> = self
            .names
            .range(from.to_owned()..)
            .take_while(|(p, _)| *p == from || p.starts_with(&prefix))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (p, i) in moved {
            self.names.remove(&p);
            self.names.insert(format!("{to}{}", &p[from.len()..]), i);
        }
        Ok(id)
    }

    /// A fallocate of `mode` over `(offset, len)` of file `id`, as a reader sees it.
    fn falloc(
        &mut self,
        op: &Op,
        id: u32,
        mode: FallocMode,
        offset: u64,
        len: u64,
    ) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        if offset % SECTOR != 0 || len % SECTOR != 0 || len == 0 {
            return Err(err("offset and length must be multiples of 512".into()));
        }
        let node = self.nodes.get_mut(&id).unwrap();
        let end = offset + len;
        if mode.shifts() {
            return shift(node, mode, offset, len).map(|()| id).map_err(err);
        }
        // What a reader sees: zeroing modes zero the range (within the size when the size
        // is kept); allocation past the end reads as zeros once the size covers it; a kept
        // size hides whatever lies beyond it.
        let visible_end = if mode.keeps_size() { end.min(node.size) } else { end };
        if mode.zeroes() && visible_end > offset {
            node.content.set(offset / SECTOR, (visible_end - offset) / SECTOR, SectorClass::Zero);
        }
        if !mode.keeps_size() && end > node.size {
            node.content.resize(end / SECTOR);
            node.size = end;
        }
        Ok(id)
    }

    /// `open path` as descriptor `fd`: kept for a file or a directory, under a name not
    /// in use.
    fn open(&mut self, op: &Op, path: &str, fd: &str) -> Result<u32, ModelError> {
        let err = |reason: String| ModelError { op: op.to_string(), reason };
        let id = self.need(op, path, None)?;
        if !matches!(self.nodes[&id].kind, NodeKind::File | NodeKind::Dir) {
            return Err(err(format!("{path}: descriptors are kept for files and directories")));
        }
        if fd.is_empty() || self.handles.contains_key(fd) {
            return Err(err(format!("descriptor {fd:?} is empty or already open")));
        }
        self.handles.insert(fd.to_owned(), id);
        Ok(id)
    }

    /// The snapshot a file system that persisted exactly this state would give: inode
    /// numbers from `observed` (or `1_000_000 + id` where none was observed), contents
    /// for every file. Directories get nlink 2 and size 4096. For tests and witnesses.
    pub fn to_snapshot(&self, observed: &Observed) -> Snapshot {
        let entries = self
            .names
            .iter()
            .map(|(p, &id)| {
                let n = &self.nodes[&id];
                let ino = observed.ino(id).unwrap_or(1_000_000 + u64::from(id));
                let node = match n.kind {
                    NodeKind::Dir => Node {
                        ino,
                        kind: NodeKind::Dir,
                        nlink: 2,
                        size: 4096,
                        content: None,
                        read_error: None,
                        xattrs: n.xattrs.clone(),
                        meta: (!is_unset(&n.meta)).then_some(n.meta),
                        allocated_past_eof: None,
                    },
                    k => Node {
                        ino,
                        kind: k,
                        nlink: n.nlink,
                        size: n.size,
                        content: (k != NodeKind::Whiteout).then(|| n.content.clone()),
                        read_error: None,
                        xattrs: n.xattrs.clone(),
                        meta: (!is_unset(&n.meta)).then_some(n.meta),
                        allocated_past_eof: (!n.prealloc.is_empty())
                            .then(|| n.allocated_past_eof()),
                    },
                };
                (p.clone(), node)
            })
            .collect();
        Snapshot { entries, not_creatable: BTreeMap::new() }
    }
}

/// What the sector found at sector `from` reads as once moved to sector `to`: a stamp
/// names the offset it was written for, so moved data classifies as data that belongs
/// elsewhere, and as its own file's data again where a later shift brings it back (zeros
/// stay zeros).
fn moved(class: SectorClass, from: u64, to: u64) -> SectorClass {
    let (file, written_at, op) = match class {
        SectorClass::Data { file, op } => (file, from * SECTOR, op),
        SectorClass::Foreign { file, offset, op } => (file, offset, op),
        other => return other,
    };
    if written_at == to * SECTOR {
        SectorClass::Data { file, op }
    } else {
        SectorClass::Foreign { file, offset: written_at, op }
    }
}

/// fallocate's collapse (the range removed, what follows moved down) and insert (a hole
/// opened, what follows moved up) on `node`.
fn shift(node: &mut ModelNode, mode: FallocMode, offset: u64, len: u64) -> Result<(), String> {
    let block = 4096;
    if offset % block != 0 || len % block != 0 {
        return Err("collapse and insert need a block-aligned range".into());
    }
    let (first, n) = (offset / SECTOR, len / SECTOR);
    let total = node.size / SECTOR;
    let classes: Vec<SectorClass> = node.content.iter().collect();
    let at = |i: u64, to: u64| {
        moved(classes.get(i as usize).copied().unwrap_or(SectorClass::Zero), i, to)
    };
    let mut out = Content::new();
    for i in 0..first {
        out.push(classes.get(i as usize).copied().unwrap_or(SectorClass::Zero), 1);
    }
    if mode == FallocMode::CollapseRange {
        if offset + len >= node.size {
            return Err("a collapse must end before the end of the file".into());
        }
        for i in first + n..total {
            out.push(at(i, i - n), 1);
        }
        node.size -= len;
    } else {
        if offset >= node.size {
            return Err("an insert must start before the end of the file".into());
        }
        out.push(SectorClass::Zero, n);
        for i in first..total {
            out.push(at(i, i + n), 1);
        }
        node.size += len;
    }
    node.content = out;
    Ok(())
}

/// The effect of a clone, copy or dedupe from `source` on `node`: same offsets, so the
/// copied sectors keep the classes (and stamps) they had.
fn copy_between(op: &Op, source: &ModelNode, node: &mut ModelNode) -> Result<(), String> {
    let aligned = |v: u64| v % SECTOR == 0;
    let (offset, len) = match op {
        // The whole source over the start of the target, which keeps what lies beyond
        // (FICLONE remaps the source's length and never shrinks the target).
        Op::Clone { .. } => (0, source.size),
        Op::CloneRange { offset, len, .. }
        | Op::CopyRange { offset, len, .. }
        | Op::DedupeRange { offset, len, .. } => (*offset, *len),
        _ => return Ok(()),
    };
    if !aligned(offset) || !aligned(len) || !aligned(source.size) || !aligned(node.size) {
        return Err("offsets, lengths and sizes must be multiples of 512".into());
    }
    match op {
        Op::Clone { .. } if !aligned(source.size) => {
            Err(format!("the source's size {} is not a multiple of 512", source.size))
        }
        Op::CloneRange { .. } | Op::DedupeRange { .. } if offset + len > source.size => {
            Err(format!("{len}@{offset} reaches past the source's end ({})", source.size))
        }
        Op::DedupeRange { .. } if offset + len > node.size => {
            Err(format!("{len}@{offset} reaches past the target's end ({})", node.size))
        }
        // What a reader sees does not change: equal bytes are shared or nothing is done.
        Op::DedupeRange { .. } => Ok(()),
        _ => {
            let n = len.min(source.size.saturating_sub(offset));
            let classes = source.content.range(offset / SECTOR, n / SECTOR);
            let mut content = node.content.clone();
            for (i, class) in classes.into_iter().enumerate() {
                content.set(offset / SECTOR + i as u64, 1, class);
            }
            node.content = content;
            if n > 0 {
                node.size = node.size.max(offset + n);
            }
            Ok(())
        }
    }
}

/// The class of data op `stamp_op` writes to file `id`.
pub fn data_class(id: u32, stamp_op: u32) -> SectorClass {
    SectorClass::Data {
        file: id,
        op: (stamp_op != SETUP_OP && stamp_op != DRAIN_OP).then_some(stamp_op),
    }
}

/// The model run over a whole workload.
#[derive(Clone, Debug)]
pub(crate) struct History {
    /// `states[0]`: after setup; `states[k + 1]`: after op k. Shorter if the model
    /// rejected an op.
    pub states: Vec<ModelState>,
    /// The node each op acts on (see [`ModelState::apply`]).
    pub op_ids: Vec<Option<u32>>,
    /// Every name each node ever had, through setup, ops and drain.
    pub ever_names: BTreeMap<u32, BTreeSet<String>>,
    /// The state after the drain.
    pub final_state: ModelState,
    /// The first op the model rejected, if any.
    pub error: Option<ModelError>,
}

impl History {
    pub fn new(w: &Workload) -> History {
        let mut s = ModelState::new();
        let mut ever: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        let note = |s: &ModelState, ever: &mut BTreeMap<u32, BTreeSet<String>>| {
            for (p, &id) in &s.names {
                ever.entry(id).or_default().insert(p.clone());
            }
        };
        let mut error = None;
        for op in &w.setup {
            if let Err(e) = s.apply(op, SETUP_OP) {
                error.get_or_insert(e);
            }
            note(&s, &mut ever);
        }
        // Descriptors live in one phase (each phase runs in its own call).
        s.handles.clear();
        let mut states = vec![s.clone()];
        let mut op_ids = Vec::new();
        // The state at the open transaction's begin: an abort returns to it (a
        // transaction holds only writes, so nothing else is rolled back with them).
        let mut txn_begin: Option<ModelState> = None;
        for (k, op) in w.ops.iter().enumerate() {
            if error.is_some() {
                break;
            }
            match op {
                Op::TxnBegin => txn_begin = Some(s.clone()),
                Op::TxnAbort => {
                    if let Some(b) = txn_begin.take() {
                        s = b;
                    }
                }
                Op::TxnCommit { .. } => txn_begin = None,
                _ => {}
            }
            match s.apply(op, k as u32) {
                Ok(id) => {
                    s.after_op = Some(k);
                    op_ids.push(id);
                    note(&s, &mut ever);
                    states.push(s.clone());
                }
                Err(e) => error = Some(e),
            }
        }
        s.handles.clear();
        for op in &w.drain {
            if error.is_none() {
                if let Err(e) = s.apply(op, DRAIN_OP) {
                    error = Some(e);
                }
                note(&s, &mut ever);
            }
        }
        History { states, op_ids, ever_names: ever, final_state: s, error }
    }
}

/// The oracle's state before the first op and after each op of `w.ops` (the model stops
/// at an op it cannot apply, so the list is shorter for such a workload).
pub fn model_states(w: &Workload) -> Vec<ModelState> {
    History::new(w).states
}

/// The paths whose content [`crate::take_snapshot`] reads: every name ever given to a
/// file whose data an op of `w.ops` writes, fsyncs or fdatasyncs.
pub(crate) fn content_paths(w: &Workload) -> BTreeSet<String> {
    let h = History::new(w);
    let mut out = BTreeSet::new();
    for (k, op) in w.ops.iter().enumerate() {
        let data = op.changes_data()
            || matches!(
                op,
                Op::Fsync { .. }
                    | Op::Fdatasync { .. }
                    | Op::FdFsync { .. }
                    | Op::FdFdatasync { .. }
            );
        if let (true, Some(Some(id))) = (data, h.op_ids.get(k)) {
            if h.states[k].nodes.get(id).is_some_and(|n| n.kind == NodeKind::File) {
                out.extend(h.ever_names.get(id).into_iter().flatten().cloned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workload_for, Params, Property};

    #[test]
    fn every_workload_models_cleanly() {
        for &p in Property::EVERY {
            let w = workload_for(p, &Params::default());
            let h = History::new(&w);
            assert!(h.error.is_none(), "{p}: {:?}", h.error);
            assert_eq!(h.states.len(), w.ops.len() + 1);
        }
    }

    fn file_with_old_data(s: &mut ModelState, path: &str) -> u32 {
        let id = s.apply(&Op::Creat { path: path.into(), sync: false }, SETUP_OP).unwrap().unwrap();
        s.apply(&Op::Write { path: path.into(), offset: 0, len: 16384 }, SETUP_OP).unwrap();
        id
    }

    #[test]
    fn collapse_and_insert_move_data_as_stamps_read_it() {
        let mut s = ModelState::new();
        let f = file_with_old_data(&mut s, "/f");
        let mode = FallocMode::CollapseRange;
        s.apply(&Op::Falloc { path: "/f".into(), mode, offset: 8192, len: 4096 }, 0).unwrap();
        let n = s.node("/f").unwrap();
        assert_eq!(n.size, 12288);
        // Sector 16 (byte 8192) now holds what was at 12288: data stamped for elsewhere.
        assert_eq!(n.content.class_at(15), Some(data_class(f, SETUP_OP)));
        assert_eq!(
            n.content.class_at(16),
            Some(SectorClass::Foreign { file: f, offset: 12288, op: None })
        );
        let mode = FallocMode::InsertRange;
        s.apply(&Op::Falloc { path: "/f".into(), mode, offset: 4096, len: 4096 }, 1).unwrap();
        let n = s.node("/f").unwrap();
        assert_eq!(n.size, 16384);
        assert_eq!(n.content.class_at(8), Some(SectorClass::Zero));
        assert_eq!(
            n.content.class_at(16),
            Some(SectorClass::Foreign { file: f, offset: 4096, op: None })
        );
        // Collapsing the inserted hole moves every sector back where it was written:
        // its own data again (the sample's false positive on ext4 and xfs).
        let before_insert = {
            let mut t = ModelState::new();
            let f2 = file_with_old_data(&mut t, "/f");
            assert_eq!(f2, f);
            let mode = FallocMode::CollapseRange;
            t.apply(&Op::Falloc { path: "/f".into(), mode, offset: 8192, len: 4096 }, 0).unwrap();
            t.node("/f").unwrap().content.clone()
        };
        let back = FallocMode::CollapseRange;
        let mut u = s.clone();
        u.apply(&Op::Falloc { path: "/f".into(), mode: back, offset: 4096, len: 4096 }, 2).unwrap();
        assert_eq!(u.node("/f").unwrap().content, before_insert);
        // Unaligned, or reaching the end: refused, as the kernel does (EINVAL).
        let bad = |offset, len| Op::Falloc { path: "/f".into(), mode, offset, len };
        assert!(s.clone().apply(&bad(512, 4096), 2).is_err());
        let collapse = FallocMode::CollapseRange;
        let to_end = Op::Falloc { path: "/f".into(), mode: collapse, offset: 12288, len: 4096 };
        assert!(s.clone().apply(&to_end, 2).is_err());
    }

    #[test]
    fn clones_and_copies_carry_the_source_data_and_dedupes_nothing_visible() {
        let mut s = ModelState::new();
        let a = file_with_old_data(&mut s, "/a");
        let b = file_with_old_data(&mut s, "/b");
        s.apply(&Op::Write { path: "/a".into(), offset: 8192, len: 4096 }, 0).unwrap();
        let before = s.clone();
        let dedupe = Op::DedupeRange { from: "/a".into(), to: "/b".into(), offset: 0, len: 4096 };
        assert_eq!(s.apply(&dedupe, 1).unwrap(), Some(b));
        assert_eq!(s, before, "a dedupe changes nothing a reader sees");
        let copy = Op::CopyRange { from: "/a".into(), to: "/b".into(), offset: 14848, len: 4096 };
        s.apply(&copy, 2).unwrap();
        let n = s.node("/b").unwrap();
        assert_eq!(n.size, 16384, "the copy stops at the source's end");
        assert_eq!(n.content.class_at(28), Some(data_class(b, SETUP_OP)));
        assert_eq!(n.content.class_at(29), Some(data_class(a, SETUP_OP)));
        s.apply(&Op::Utimes { path: "/b".into(), mtime: 5 }, 3).unwrap();
        assert_eq!(s.node("/b").unwrap().meta.mtime, Some(5));
        s.apply(&Op::Clone { from: "/a".into(), to: "/b".into() }, 4).unwrap();
        let n = s.node("/b").unwrap();
        assert_eq!(n.content, s.node("/a").unwrap().content);
        assert_eq!(n.content.class_at(16), Some(data_class(a, 0)));
        assert_eq!(n.meta.mtime, None, "a data change forgets the time set");
        // A clone of a shorter file over a longer one keeps the rest (the sample's
        // false positive on xfs and btrfs: the model had shrunk the target).
        let t = Op::TmpfileLink { path: "/short".into(), len: 4096 };
        let short = s.apply(&t, 5).unwrap().unwrap();
        s.apply(&Op::Clone { from: "/short".into(), to: "/b".into() }, 6).unwrap();
        let n = s.node("/b").unwrap();
        assert_eq!(n.size, 16384);
        assert_eq!(n.content.class_at(7), Some(data_class(short, 5)));
        assert_eq!(n.content.class_at(8), Some(data_class(a, SETUP_OP)));
        let past = Op::CloneRange { from: "/a".into(), to: "/b".into(), offset: 16384, len: 4096 };
        assert!(s.apply(&past, 5).is_err(), "a clone past the source's end");
    }

    #[test]
    fn renameat2_flags() {
        let mut s = ModelState::new();
        let a = file_with_old_data(&mut s, "/a");
        s.apply(&Op::Mkdir { path: "/D".into() }, SETUP_OP).unwrap();
        let b = file_with_old_data(&mut s, "/D/b");
        let how = RenameHow::Exchange;
        s.apply(&Op::Rename2 { from: "/a".into(), to: "/D".into(), how }, 0).unwrap();
        assert_eq!(s.id("/D"), Some(a));
        assert_eq!(s.id("/a/b"), Some(b), "the directory moved whole");
        let how = RenameHow::Noreplace;
        assert!(s
            .clone()
            .apply(&Op::Rename2 { from: "/D".into(), to: "/a".into(), how }, 1)
            .is_err());
        let how = RenameHow::Whiteout;
        s.apply(&Op::Rename2 { from: "/D".into(), to: "/c".into(), how }, 1).unwrap();
        assert_eq!(s.id("/c"), Some(a));
        assert_eq!(s.node("/D").unwrap().kind, NodeKind::Whiteout);
        let t = Op::TmpfileLink { path: "/a/t".into(), len: 4096 };
        let id = s.apply(&t, 2).unwrap().unwrap();
        assert_eq!(s.node("/a/t").unwrap().content, Content::filled(data_class(id, 2), 8));
    }

    #[test]
    fn rename_link_unlink() {
        let mut s = ModelState::new();
        s.apply(&Op::Mkdir { path: "/A".into() }, SETUP_OP).unwrap();
        let f =
            s.apply(&Op::Creat { path: "/A/f".into(), sync: false }, SETUP_OP).unwrap().unwrap();
        s.apply(&Op::Append { path: "/A/f".into(), offset: 0, len: 1024 }, 0).unwrap();
        assert_eq!(
            s.node("/A/f").unwrap().content,
            Content::filled(SectorClass::Data { file: f, op: Some(0) }, 2)
        );
        s.apply(&Op::Link { from: "/A/f".into(), to: "/A/g".into() }, 1).unwrap();
        assert_eq!(s.node("/A/f").unwrap().nlink, 2);
        s.apply(&Op::Rename { from: "/A".into(), to: "/B".into() }, 2).unwrap();
        assert_eq!(s.id("/B/g"), Some(f));
        assert_eq!(s.id("/A/f"), None);
        s.apply(&Op::Unlink { path: "/B/f".into() }, 3).unwrap();
        assert_eq!(s.nodes[&f].nlink, 1);
        assert!(s.apply(&Op::Append { path: "/B/g".into(), offset: 0, len: 512 }, 4).is_err());
        assert!(s.apply(&Op::Creat { path: "/B/../x".into(), sync: false }, 4).is_err());
        assert!(s.apply(&Op::Rmdir { path: "/B".into() }, 4).is_err());
    }
}
