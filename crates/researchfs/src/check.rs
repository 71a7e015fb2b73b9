//! "Detects its own inconsistency": after recovery, every access to every file and
//! directory must either return what the model allows or return an error. This module
//! walks a file system (mounted, through [`PathView`], or opened in process, through
//! [`Fs`]) and classifies each access as correct, error returned, or silently wrong,
//! labelling silent results with the thesis' kinds:
//!
//! - BD: an entry that lists and resolves but names a dead inode (link count 0), another
//!   file's inode, or a name no model state has;
//! - HL: a file whose link count disagrees with the names that resolve to it;
//! - GD: content no state allows and that is not another file's;
//! - TP: content that holds another file's data;
//! - OI / OB: statfs counts more inodes / blocks in use than the walk can reach.
//!
//! A model is a set of acceptable states (typically before and after each operation that
//! was interrupted); each path is judged on its own, since none of the designs makes a
//! multi-block operation atomic. With no states, only the model-free checks run
//! (HL, link count 0, OI, OB).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::Fs;
use crate::layout::Kind;
use crate::ErrorKind;

/// A node of a model state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Node {
    /// A directory.
    Dir,
    /// A file with its content.
    File(Vec<u8>),
}

/// One acceptable state: paths ("a/b", relative to the root) and what they hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    /// Every path but the root.
    pub nodes: BTreeMap<String, Node>,
}

impl Model {
    /// An empty file system.
    pub fn new() -> Model {
        Model::default()
    }
    /// With directory `path`.
    pub fn dir(mut self, path: &str) -> Model {
        self.nodes.insert(path.to_string(), Node::Dir);
        self
    }
    /// With file `path` holding `content`.
    pub fn file(mut self, path: &str, content: &[u8]) -> Model {
        self.nodes.insert(path.to_string(), Node::File(content.to_vec()));
        self
    }
    /// Without `path`.
    pub fn without(mut self, path: &str) -> Model {
        self.nodes.remove(path);
        self
    }
}

/// What `stat` says, as the checker needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u64,
    /// A directory.
    pub dir: bool,
    /// Link count.
    pub nlink: u64,
    /// Size in bytes.
    pub size: u64,
    /// 4 KiB blocks allocated.
    pub blocks: u64,
}

/// Inodes and blocks statfs counts as in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InUse {
    /// Inodes in use (the root included).
    pub inodes: u64,
    /// Blocks in use in the region files can use.
    pub blocks: u64,
}

/// The accesses the checker makes; paths are relative to the root ("" is the root).
pub trait View {
    /// Names in a directory (without "." and "..").
    fn readdir(&self, path: &str) -> io::Result<Vec<String>>;
    /// Attributes.
    fn stat(&self, path: &str) -> io::Result<Stat>;
    /// The whole content of a file.
    fn read(&self, path: &str) -> io::Result<Vec<u8>>;
    /// Space in use.
    fn in_use(&self) -> io::Result<InUse>;
}

fn io_of(e: crate::Error) -> io::Error {
    io::Error::from_raw_os_error(e.errno())
}

impl View for Fs {
    fn readdir(&self, path: &str) -> io::Result<Vec<String>> {
        let ino = self.resolve(path).map_err(io_of)?;
        Ok(Fs::readdir(self, ino)
            .map_err(io_of)?
            .into_iter()
            .map(|(n, _, _)| String::from_utf8_lossy(&n).into_owned())
            .collect())
    }
    fn stat(&self, path: &str) -> io::Result<Stat> {
        let ino = self.resolve(path).map_err(io_of)?;
        let a = self.getattr(ino).map_err(io_of)?;
        Ok(Stat {
            ino: u64::from(a.ino),
            dir: a.kind == Kind::Dir,
            nlink: u64::from(a.nlink),
            size: a.size,
            blocks: a.blocks,
        })
    }
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        let ino = self.resolve(path).map_err(io_of)?;
        let size = self.getattr(ino).map_err(io_of)?.size;
        Fs::read(self, ino, 0, size as usize).map_err(io_of)
    }
    fn in_use(&self) -> io::Result<InUse> {
        self.wait_scan();
        let u = self.statfs();
        Ok(InUse { inodes: u.files - u.ffree, blocks: u.blocks - u.bfree })
    }
}

/// A mounted file system seen through system calls.
pub struct PathView {
    root: PathBuf,
}

impl PathView {
    /// Accesses under the mount point `root`.
    pub fn new(root: &Path) -> PathView {
        PathView { root: root.to_owned() }
    }
    fn at(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(path)
        }
    }
}

impl View for PathView {
    fn readdir(&self, path: &str) -> io::Result<Vec<String>> {
        std::fs::read_dir(self.at(path))?
            .map(|e| e.map(|e| String::from_utf8_lossy(e.file_name().as_bytes()).into_owned()))
            .collect()
    }
    fn stat(&self, path: &str) -> io::Result<Stat> {
        let m = std::fs::symlink_metadata(self.at(path))?;
        Ok(Stat {
            ino: m.ino(),
            dir: m.is_dir(),
            nlink: m.nlink(),
            size: m.size(),
            blocks: m.blocks() / 8,
        })
    }
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.at(path))
    }
    fn in_use(&self) -> io::Result<InUse> {
        let c = std::ffi::CString::new(self.root.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: statvfs fills the zeroed struct we pass; the path is NUL-terminated.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(InUse {
            inodes: (s.f_files - s.f_ffree) as u64,
            blocks: (s.f_blocks - s.f_bfree) as u64,
        })
    }
}

/// How one access went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum Outcome {
    /// What some acceptable state says.
    Correct,
    /// The file system returned an error (it detected something, or failed).
    ErrorReturned {
        /// The errno.
        errno: i32,
    },
    /// A wrong result returned as if valid.
    Silent {
        /// The thesis' kind.
        kind: ErrorKind,
        /// What was wrong.
        detail: String,
    },
}

/// One classified access.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// The path (`""` is the root; `"<statfs>"` for the space check).
    pub path: String,
    /// readdir, stat, read, links or statfs.
    pub op: String,
    /// The classification.
    pub outcome: Outcome,
}

/// Every classified access of one check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// In walk order.
    pub accesses: Vec<Access>,
}

impl CheckReport {
    /// The distinct kinds of silent results.
    pub fn silent_kinds(&self) -> Vec<ErrorKind> {
        let mut k: Vec<ErrorKind> = self
            .accesses
            .iter()
            .filter_map(|a| match &a.outcome {
                Outcome::Silent { kind, .. } => Some(*kind),
                _ => None,
            })
            .collect();
        k.sort();
        k.dedup();
        k
    }

    /// The silent results.
    pub fn silent(&self) -> Vec<&Access> {
        self.accesses.iter().filter(|a| matches!(a.outcome, Outcome::Silent { .. })).collect()
    }

    /// Accesses that returned an error.
    pub fn errors(&self) -> usize {
        self.accesses.iter().filter(|a| matches!(a.outcome, Outcome::ErrorReturned { .. })).count()
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Walks `view` from the root and classifies every access against `states` (any state
/// may hold for any path; empty: model-free checks only).
pub fn classify(view: &dyn View, states: &[Model]) -> CheckReport {
    let mut r = CheckReport::default();
    let walk = walk(view, states, &mut r);
    // Content, judged once every file has been read (BD needs to know which names of a
    // shared inode are the right ones).
    judge_contents(states, &walk.files, &mut r);
    judge_link_counts(&walk.files, &mut r);
    judge_lost(states, &walk, &mut r);
    judge_space(view, &walk.reach, &mut r);
    r
}

impl CheckReport {
    fn push(&mut self, path: &str, op: &str, outcome: Outcome) {
        self.accesses.push(Access { path: path.to_string(), op: op.to_string(), outcome });
    }
}

fn silent(kind: ErrorKind, detail: String) -> Outcome {
    Outcome::Silent { kind, detail }
}

/// Whether some state has a node at `path` that `want` accepts.
fn node_in(states: &[Model], path: &str, want: &dyn Fn(&Node) -> bool) -> bool {
    states.iter().any(|m| m.nodes.get(path).is_some_and(want))
}

/// Whether some state has a node at `path` (never, without states).
fn modeled(states: &[Model], path: &str) -> bool {
    !states.is_empty() && states.iter().any(|m| m.nodes.contains_key(path))
}

/// What the walk from the root found.
struct Walk {
    /// Blocks per reachable inode, for the space check.
    reach: HashMap<u64, u64>,
    /// Every file read, with its stat and content.
    files: Vec<(String, Stat, Vec<u8>)>,
    /// The directories that listed.
    listed_dirs: HashSet<String>,
    /// Every path listed.
    seen: HashSet<String>,
}

/// Walks `view` from the root, classifying each stat (a directory against `states`, a
/// file with no links) and each error, and reading every file for [`judge_contents`].
fn walk(view: &dyn View, states: &[Model], r: &mut CheckReport) -> Walk {
    let mut w = Walk {
        reach: HashMap::new(),
        files: Vec::new(),
        listed_dirs: HashSet::new(),
        seen: HashSet::new(),
    };
    match view.stat("") {
        Ok(st) => {
            w.reach.insert(st.ino, st.blocks);
        }
        Err(e) => r.push("", "stat", Outcome::ErrorReturned { errno: errno(&e) }),
    }
    let mut stack = vec![String::new()];
    let mut dirs_seen: HashSet<u64> = HashSet::new();
    while let Some(dir) = stack.pop() {
        let names = match view.readdir(&dir) {
            Ok(n) => n,
            Err(e) => {
                r.push(&dir, "readdir", Outcome::ErrorReturned { errno: errno(&e) });
                continue;
            }
        };
        w.listed_dirs.insert(dir.clone());
        for name in names {
            let path = join(&dir, &name);
            w.seen.insert(path.clone());
            let st = match view.stat(&path) {
                Ok(st) => st,
                Err(e) => {
                    r.push(&path, "stat", Outcome::ErrorReturned { errno: errno(&e) });
                    continue;
                }
            };
            w.reach.insert(st.ino, st.blocks);
            if st.dir {
                r.push(&path, "stat", dir_outcome(states, &path));
                if dirs_seen.insert(st.ino) {
                    stack.push(path);
                }
                continue;
            }
            if st.nlink == 0 {
                let detail = format!("lists and resolves to inode {} with link count 0", st.ino);
                r.push(&path, "stat", silent(ErrorKind::Bd, detail));
                continue;
            }
            match view.read(&path) {
                Ok(data) => w.files.push((path, st, data)),
                Err(e) => r.push(&path, "read", Outcome::ErrorReturned { errno: errno(&e) }),
            }
        }
    }
    w
}

/// A directory at `path`: correct where a state has one there.
fn dir_outcome(states: &[Model], path: &str) -> Outcome {
    if states.is_empty() || node_in(states, path, &|n| *n == Node::Dir) {
        Outcome::Correct
    } else if modeled(states, path) {
        silent(ErrorKind::Bd, "a directory where every state has a file".into())
    } else {
        silent(ErrorKind::Bd, "a directory no state has".into())
    }
}

/// Each file's content against the states: correct, another name's inode (BD), another
/// file's data (TP), or bytes no state allows (GD).
fn judge_contents(states: &[Model], files: &[(String, Stat, Vec<u8>)], r: &mut CheckReport) {
    let correct = |path: &str, data: &[u8]| {
        states.is_empty() || node_in(states, path, &|n| *n == Node::File(data.to_vec()))
    };
    for (path, st, data) in files {
        let outcome = if correct(path, data) {
            Outcome::Correct
        } else if !modeled(states, path) {
            silent(
                ErrorKind::Bd,
                format!("lists and resolves (inode {}) but no state has it", st.ino),
            )
        } else if let Some((q, _, _)) =
            files.iter().find(|(q, s, d)| q != path && s.ino == st.ino && correct(q, d))
        {
            silent(ErrorKind::Bd, format!("names inode {}, which is {q}'s", st.ino))
        } else if let Some(q) =
            states.iter().flat_map(|m| m.nodes.iter()).find_map(|(q, n)| match n {
                Node::File(c)
                    if q != path && c.len() >= 8 && data.windows(c.len()).any(|w| w == c) =>
                {
                    Some(q.clone())
                }
                _ => None,
            })
        {
            silent(ErrorKind::Tp, format!("holds {q}'s data"))
        } else {
            silent(ErrorKind::Gd, format!("{} bytes no state allows", data.len()))
        };
        r.push(path, "read", outcome);
    }
}

/// Link counts against the names that resolve (HL).
fn judge_link_counts(files: &[(String, Stat, Vec<u8>)], r: &mut CheckReport) {
    let mut names: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (path, st, _) in files {
        names.entry(st.ino).or_default().push(path);
    }
    for (ino, paths) in &names {
        let nlink = files.iter().find(|(_, s, _)| s.ino == *ino).map_or(0, |(_, s, _)| s.nlink);
        if nlink != paths.len() as u64 {
            let detail = format!(
                "inode {ino} has link count {nlink} but {} names resolve to it",
                paths.len()
            );
            r.push(paths[0], "links", silent(ErrorKind::Hl, detail));
        }
    }
}

/// Paths every state has that vanished from a directory that lists fine: lost (OI).
fn judge_lost(states: &[Model], walk: &Walk, r: &mut CheckReport) {
    let Some(first) = states.first() else { return };
    for path in first.nodes.keys() {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        if !walk.seen.contains(path)
            && walk.listed_dirs.contains(parent)
            && states.iter().all(|m| m.nodes.contains_key(path))
        {
            r.push(path, "readdir", silent(ErrorKind::Oi, "missing from its directory".into()));
        }
    }
}

/// Space: what statfs counts in use beyond what can be reached is orphaned (OI, OB).
fn judge_space(view: &dyn View, reach: &HashMap<u64, u64>, r: &mut CheckReport) {
    match view.in_use() {
        Ok(u) => {
            let (ri, rb) = (reach.len() as u64, reach.values().sum::<u64>());
            if u.inodes > ri {
                let detail = format!("{} inodes in use, {ri} reachable", u.inodes);
                r.push("<statfs>", "statfs", silent(ErrorKind::Oi, detail));
            }
            if u.blocks > rb {
                let detail = format!("{} blocks in use, {rb} reachable", u.blocks);
                r.push("<statfs>", "statfs", silent(ErrorKind::Ob, detail));
            }
        }
        Err(e) => r.push("<statfs>", "statfs", Outcome::ErrorReturned { errno: errno(&e) }),
    }
}
