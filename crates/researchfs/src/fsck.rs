//! A read-only checker: walks the tree from the root and lists every problem it finds,
//! labelled with the thesis' kinds where one fits. It never writes. Ordered-core's
//! mount-time recovery reuses its walk to rebuild bitmaps.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::design::Design;
use crate::device::BlockDevice;
use crate::layout::{
    parse_dir_block, pos_dind_child, u32_at, BackLink, Backpointer, Inode, Kind, Superblock, BLOCK,
    INODE_SIZE, NDIRECT, POS_DIND, POS_IND, ROOT,
};
use crate::{Error, ErrorKind, Result};

/// One problem fsck found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The thesis' kind, when one fits.
    pub kind: Option<ErrorKind>,
    /// What is wrong, naming the inode or block.
    pub what: String,
    /// The design repairs it at every mount by itself (NoFS: the allocation scan treats
    /// an unreachable inode or block as free), so it is not damage.
    #[serde(default)]
    pub repaired_at_mount: bool,
}

/// What fsck found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FsckReport {
    /// The design checked.
    pub design: Design,
    /// Every problem, in walk order.
    pub problems: Vec<Problem>,
    /// Inodes reachable from the root (the root included).
    pub inodes_reachable: usize,
    /// Blocks reachable from the root (data, directory and indirect).
    pub blocks_reachable: usize,
}

impl FsckReport {
    /// The problems the design does not repair by itself at mount.
    pub fn damage(&self) -> Vec<&Problem> {
        self.problems.iter().filter(|p| !p.repaired_at_mount).collect()
    }

    /// The distinct kinds among the problems.
    pub fn kinds(&self) -> Vec<ErrorKind> {
        let mut k: Vec<ErrorKind> = self.problems.iter().filter_map(|p| p.kind).collect();
        k.sort();
        k.dedup();
        k
    }
}

/// What the walk reached.
pub(crate) struct Walk {
    /// Names found per inode (the root excluded).
    pub names: HashMap<u32, usize>,
    /// Reachable blocks and the inode that points to each.
    pub blocks: HashMap<u64, u32>,
    pub problems: Vec<Problem>,
}

struct Walker<'a> {
    design: Design,
    dev: &'a dyn BlockDevice,
    sb: &'a Superblock,
    inodes: HashMap<u32, Inode>,
    walk: Walk,
}

impl Walker<'_> {
    fn block(&self, b: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; BLOCK];
        self.dev
            .read_at(b * BLOCK as u64, &mut buf)
            .map_err(|source| Error::Io { block: b, source })?;
        Ok(buf)
    }

    fn inode(&mut self, ino: u32) -> Result<Option<Inode>> {
        if ino == 0 || ino >= self.sb.inodes {
            return Ok(None);
        }
        if let Some(i) = self.inodes.get(&ino) {
            return Ok(Some(i.clone()));
        }
        let (b, off) = self.sb.inode_location(ino);
        let i = Inode::decode(&self.block(b)?[off..off + INODE_SIZE]);
        self.inodes.insert(ino, i.clone());
        Ok(Some(i))
    }

    fn problem(&mut self, kind: Option<ErrorKind>, what: String) {
        self.walk.problems.push(Problem { kind, what, repaired_at_mount: false });
    }

    fn in_data(&self, b: u32) -> bool {
        u64::from(b) >= self.sb.data_start && u64::from(b) < self.sb.blocks
    }

    /// Records `owner` pointing at `b`; false if `b` cannot be used.
    fn claim(&mut self, owner: u32, b: u32) -> bool {
        if !self.in_data(b) {
            self.problem(
                Some(ErrorKind::Gd),
                format!("inode {owner}: pointer {b} outside the data region"),
            );
            return false;
        }
        if let Some(o) = self.walk.blocks.insert(u64::from(b), owner) {
            if o != owner {
                self.problem(
                    Some(ErrorKind::Tp),
                    format!("block {b} is pointed to by inodes {o} and {owner}"),
                );
            }
        }
        true
    }

    /// Checks a NoFS backpointer; true if it agrees.
    fn check_bp(&mut self, owner: u32, gen: u32, pos: u32, b: u32, blk: &[u8]) -> Result<bool> {
        if !self.design.backpointers() {
            return Ok(true);
        }
        let bp = Backpointer::read(blk);
        if bp == (Backpointer { ino: owner, offset: pos, gen }) {
            return Ok(true);
        }
        let live = bp.ino != owner && self.inode(bp.ino)?.is_some_and(|i| i.kind != Kind::Free);
        self.problem(
            Some(if live { ErrorKind::Tp } else { ErrorKind::Gd }),
            format!(
                "inode {owner} (generation {gen}): block {b} at {pos} has backpointer ({}, {}, \
                 generation {})",
                bp.ino, bp.offset, bp.gen
            ),
        );
        Ok(false)
    }

    /// (logical block, block) for every data pointer, checking indirect blocks.
    fn tree(&mut self, ino: u32, inode: &Inode) -> Result<Vec<(u64, u32)>> {
        let mut data: Vec<(u64, u32)> = inode
            .direct
            .iter()
            .enumerate()
            .filter(|(_, &b)| b != 0)
            .map(|(i, &b)| (i as u64, b))
            .collect();
        let p = self.design.ptrs_per_block();
        let hdr = self.design.header();
        let load = |w: &mut Self, b: u32, pos: u32| -> Result<Option<Vec<u8>>> {
            if !w.claim(ino, b) {
                return Ok(None);
            }
            let blk = w.block(u64::from(b))?;
            Ok(w.check_bp(ino, inode.generation, pos, b, &blk)?.then_some(blk))
        };
        if inode.ind != 0 {
            if let Some(blk) = load(self, inode.ind, POS_IND)? {
                for i in 0..p {
                    let b = u32_at(&blk, hdr + 4 * i);
                    if b != 0 {
                        data.push(((NDIRECT + i) as u64, b));
                    }
                }
            }
        }
        if inode.dind != 0 {
            if let Some(top) = load(self, inode.dind, POS_DIND)? {
                for ci in 0..p {
                    let c = u32_at(&top, hdr + 4 * ci);
                    if c == 0 {
                        continue;
                    }
                    if let Some(blk) = load(self, c, pos_dind_child(ci))? {
                        for i in 0..p {
                            let b = u32_at(&blk, hdr + 4 * i);
                            if b != 0 {
                                data.push(((NDIRECT + p + ci * p + i) as u64, b));
                            }
                        }
                    }
                }
            }
        }
        Ok(data)
    }

    fn run(&mut self) -> Result<()> {
        let mut queue = vec![ROOT];
        let mut seen_dirs = HashSet::from([ROOT]);
        while let Some(d) = queue.pop() {
            let Some(dinode) = self.inode(d)? else { continue };
            for (_, b) in self.tree(d, &dinode)? {
                if !self.claim(d, b) {
                    continue;
                }
                let blk = self.block(u64::from(b))?;
                let entries = match parse_dir_block(&blk) {
                    Ok(e) => e,
                    Err(why) => {
                        self.problem(
                            Some(ErrorKind::Bd),
                            format!("directory {d} block {b} is not a directory block: {why}"),
                        );
                        continue;
                    }
                };
                if self.design.backpointers()
                    && !entries
                        .first()
                        .is_some_and(|e| e.name == b"." && e.ino == d && e.gen == dinode.generation)
                {
                    self.problem(
                        Some(ErrorKind::Bd),
                        format!("directory {d} block {b}: \".\" does not name it"),
                    );
                    continue;
                }
                for e in entries.iter().filter(|e| e.name != b"." && e.name != b"..") {
                    let name = String::from_utf8_lossy(&e.name);
                    let child = match self.inode(e.ino)? {
                        Some(c) if c.kind != Kind::Free => c,
                        _ => {
                            self.problem(
                                Some(ErrorKind::Bd),
                                format!(
                                    "entry {name:?} of directory {d} names free inode {}",
                                    e.ino
                                ),
                            );
                            continue;
                        }
                    };
                    if self.design.backpointers() && child.generation != e.gen {
                        self.problem(
                            Some(ErrorKind::Bd),
                            format!(
                                "entry {name:?} of directory {d} names generation {} of inode \
                                 {}, which is at generation {}",
                                e.gen, e.ino, child.generation
                            ),
                        );
                        continue;
                    }
                    if self.design.backpointers()
                        && !child.backlinks.contains(&BackLink::new(d, &e.name))
                    {
                        self.problem(
                            Some(ErrorKind::Bd),
                            format!(
                                "entry {name:?} of directory {d}: inode {} has no back link to it",
                                e.ino
                            ),
                        );
                        continue;
                    }
                    let n = self.walk.names.entry(e.ino).or_insert(0);
                    *n += 1;
                    if *n > 1 {
                        continue;
                    }
                    if child.kind == Kind::Dir {
                        if seen_dirs.insert(e.ino) {
                            queue.push(e.ino);
                        }
                    } else {
                        for (l, b) in self.tree(e.ino, &child)? {
                            if self.claim(e.ino, b) {
                                let blk = self.block(u64::from(b))?;
                                self.check_bp(e.ino, child.generation, l as u32, b, &blk)?;
                            }
                        }
                    }
                }
            }
        }
        let names: Vec<(u32, usize)> = self.walk.names.iter().map(|(&i, &n)| (i, n)).collect();
        for (ino, n) in names {
            if let Some(i) = self.inode(ino)? {
                if i.kind == Kind::File && usize::from(i.nlink) != n {
                    self.problem(
                        Some(ErrorKind::Hl),
                        format!("inode {ino}: link count {} but {n} names", i.nlink),
                    );
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn walk(design: Design, dev: &dyn BlockDevice, sb: &Superblock) -> Result<Walk> {
    let mut w = Walker {
        design,
        dev,
        sb,
        inodes: HashMap::new(),
        walk: Walk { names: HashMap::new(), blocks: HashMap::new(), problems: Vec::new() },
    };
    w.run()?;
    Ok(w.walk)
}

/// Checks the `design` image on `dev` without writing; lists every problem found.
pub fn fsck(design: Design, dev: &dyn BlockDevice) -> Result<FsckReport> {
    let bad = |reason: String| Error::BadImage { design, reason };
    let mut blk = vec![0u8; BLOCK];
    dev.read_at(0, &mut blk).map_err(|source| Error::Io { block: 0, source })?;
    let sb = Superblock::decode(&blk).map_err(bad)?;
    if sb.design != design.id() {
        return Err(bad("the image was made for another design".into()));
    }
    let mut w = Walker {
        design,
        dev,
        sb: &sb,
        inodes: HashMap::new(),
        walk: Walk { names: HashMap::new(), blocks: HashMap::new(), problems: Vec::new() },
    };
    w.run()?;
    if design.persistent_bitmaps() {
        let read = |start: u64, n: u64| -> Result<Vec<u8>> {
            let mut v = vec![0u8; n as usize * BLOCK];
            dev.read_at(start * BLOCK as u64, &mut v)
                .map_err(|source| Error::Io { block: start, source })?;
            Ok(v)
        };
        let bb = read(sb.bbitmap_start, sb.bbitmap_blocks)?;
        let ib = read(sb.ibitmap_start, sb.ibitmap_blocks)?;
        let bit = |m: &[u8], i: u64| m[(i / 8) as usize] & (1 << (i % 8)) != 0;
        for i in 2..sb.inodes {
            let reach = w.walk.names.contains_key(&i);
            match (bit(&ib, u64::from(i)), reach) {
                (true, false) => w.problem(
                    Some(ErrorKind::Oi),
                    format!("inode {i} is marked used but no directory names it"),
                ),
                (false, true) => w.problem(None, format!("inode {i} is in use but marked free")),
                _ => {}
            }
        }
        for b in sb.data_start..sb.blocks {
            match (bit(&bb, b), w.walk.blocks.contains_key(&b)) {
                (true, false) => w.problem(
                    Some(ErrorKind::Ob),
                    format!("block {b} is marked used but nothing points to it"),
                ),
                (false, true) => w.problem(None, format!("block {b} is in use but marked free")),
                _ => {}
            }
        }
    } else {
        for i in 2..sb.inodes {
            if !w.walk.names.contains_key(&i) && w.inode(i)?.is_some_and(|n| n.kind != Kind::Free) {
                w.walk.problems.push(Problem {
                    kind: Some(ErrorKind::Oi),
                    what: format!(
                        "inode {i} is initialised but unreachable (the scan reclaims it)"
                    ),
                    repaired_at_mount: true,
                });
            }
        }
        for b in sb.data_start..sb.blocks {
            if w.walk.blocks.contains_key(&b) {
                continue;
            }
            let mut head = [0u8; 4];
            dev.read_at(b * BLOCK as u64, &mut head)
                .map_err(|source| Error::Io { block: b, source })?;
            let owner = u32::from_le_bytes(head);
            if w.inode(owner)?.is_some_and(|n| n.kind != Kind::Free) {
                w.walk.problems.push(Problem {
                    kind: Some(ErrorKind::Ob),
                    what: format!(
                        "block {b} names inode {owner}, which does not point to it (the scan reclaims it)"
                    ),
                    repaired_at_mount: true,
                });
            }
        }
    }
    Ok(FsckReport {
        design,
        inodes_reachable: w.walk.names.len() + 1,
        blocks_reachable: w.walk.blocks.len(),
        problems: w.walk.problems,
    })
}
