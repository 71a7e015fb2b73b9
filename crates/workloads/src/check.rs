//! The property checks: a recovered [`Snapshot`] against the model ([`ModelState`]s of
//! the workload), with the inode numbers the real run [`Observed`].
//!
//! * Each effect-bearing op has an *effect* decidable on a snapshot ("persisted"): creat
//!   and mkdir: the name holds the observed inode; write/append: the file (found by
//!   inode under any name the model ever gave it) reaches the end of the range and every
//!   sector of the range is this op's data; otrunc-write: the same for its range and no
//!   setup data beyond it; link: the new name holds the inode; unlink/rmdir: the name
//!   no longer holds it; rename: the destination holds it and the source does not.
//!   Partial persistence is "not persisted".
//! * Atomicity: the state of what the op touches equals the model just before or just
//!   after the op: the whole file (size and every sector) for data ops, the names the
//!   op names (inode, kind, file link count) for directory ops. The prefix-append rule
//!   also accepts old content + a prefix of the appended data.
//! * Ordering: violated iff some op j persisted while an earlier op i < j did not.
//! * Durability, in every workload: for each persistence point in
//!   [`CrashContext::durable_ops`], what it promised holds except where later ops
//!   (index > the point) touch the same names or data: fsync/fdatasync of a file: its
//!   size and every sector as of the call (the file is looked up by inode; its name is
//!   promised only by a directory fsync, so a file found under no name is not judged);
//!   fsync of a directory: every name in it as of the call holds the right inode and
//!   names it lost before the call no longer do; synchronous creat: the name; sync: all
//!   of that for every directory and file.

use crate::model::{parent, History, ModelNode, ModelState};
use crate::op::Op;
use crate::property::{Family, Property};
use crate::snapshot::{Node, NodeKind, SectorClass, Snapshot};
use crate::workload::{Workload, DRAIN_FILE};
use crate::{Observed, SECTOR};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What is durable in the crash state being checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashContext {
    /// Indices into `w.ops` of persistence-point ops whose completing flush is durable.
    pub durable_ops: Vec<usize>,
}

/// The verdict on one crash state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    Held,
    /// `story`: one line saying what persisted and what did not.
    Violated {
        story: String,
    },
}

/// One violation found in a crash state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Which family of check found it (durability findings occur in any workload).
    pub family: Family,
    /// The op (index in `w.ops`) the finding is about.
    pub op: usize,
    /// One line.
    pub story: String,
}

/// The checks of one workload with the model precomputed (build once, check many states).
pub struct Oracle<'w> {
    w: &'w Workload,
    h: History,
}

/// Checks `snap` against the workload's properties: the property's own family first
/// (atomicity of each op, or ordering), then durability; the first finding's story.
/// A workload the model cannot apply gives `Violated` with the model's error.
pub fn check(w: &Workload, observed: &Observed, snap: &Snapshot, ctx: &CrashContext) -> Verdict {
    Oracle::new(w).check(observed, snap, ctx)
}

/// Every finding, in the order [`check`] considers them.
pub fn check_all(
    w: &Workload,
    observed: &Observed,
    snap: &Snapshot,
    ctx: &CrashContext,
) -> Vec<Finding> {
    Oracle::new(w).findings(observed, snap, ctx)
}

struct View<'a> {
    o: &'a Oracle<'a>,
    obs: &'a Observed,
    snap: &'a Snapshot,
}

type Effect = Option<Result<(), String>>;

impl<'w> Oracle<'w> {
    pub fn new(w: &'w Workload) -> Oracle<'w> {
        Oracle { w, h: History::new(w) }
    }

    /// See [`check`].
    pub fn check(&self, observed: &Observed, snap: &Snapshot, ctx: &CrashContext) -> Verdict {
        match self.findings(observed, snap, ctx).into_iter().next() {
            None => Verdict::Held,
            Some(f) => Verdict::Violated { story: f.story },
        }
    }

    /// For each op of the workload, whether its whole effect is visible in `snap`:
    /// `Some(Ok(()))` persisted, `Some(Err(why))` not (or only partly), `None` for ops
    /// without a judgeable effect (fsync, sync, or content that was not read). This is
    /// what `bob explain` tells a person.
    pub fn persisted(
        &self,
        observed: &Observed,
        snap: &Snapshot,
    ) -> Vec<Option<Result<(), String>>> {
        if self.h.error.is_some() {
            return vec![None; self.w.ops.len()];
        }
        let v = View { o: self, obs: observed, snap };
        (0..self.w.ops.len()).map(|k| v.effect(k)).collect()
    }

    /// For the `detects-inconsistency` workload, what `snap` did to each scenario of the
    /// reliability table (empty for every other workload).
    pub fn scenario_marks(
        &self,
        observed: &Observed,
        snap: &Snapshot,
        ctx: &CrashContext,
    ) -> Vec<crate::detect::ScenarioMark> {
        if self.h.error.is_some()
            || self.w.property.map(Property::family) != Some(Family::Detection)
        {
            return Vec::new();
        }
        crate::detect::scenario_marks(&self.h, self.w, observed, snap, ctx)
    }

    /// See [`check_all`].
    pub fn findings(
        &self,
        observed: &Observed,
        snap: &Snapshot,
        ctx: &CrashContext,
    ) -> Vec<Finding> {
        if let Some(e) = &self.h.error {
            return vec![Finding {
                family: Family::Ordering,
                op: self.h.op_ids.len(),
                story: format!("the workload does not model: {e}"),
            }];
        }
        let v = View { o: self, obs: observed, snap };
        let mut out = Vec::new();
        let family = self.w.property.map(Property::family);
        match family {
            Some(Family::Atomicity) => {
                let prefix = self.w.property == Some(Property::MultiBlockPrefixAppend);
                for k in 0..self.w.ops.len() {
                    if let Some(story) = v.atomic(k, prefix) {
                        out.push(Finding { family: Family::Atomicity, op: k, story });
                    }
                }
            }
            Some(Family::Ordering) => out.extend(v.ordering()),
            Some(Family::Detection) => {
                return crate::detect::findings(&self.h, self.w, observed, snap, ctx);
            }
            _ => {}
        }
        let mut durable: Vec<usize> = ctx.durable_ops.clone();
        durable.sort_unstable();
        durable.dedup();
        for d in durable {
            if let Some(story) = v.durability(d) {
                let story = if family == Some(Family::Durability) {
                    story
                } else {
                    format!("durability: {story}")
                };
                out.push(Finding { family: Family::Durability, op: d, story });
            }
        }
        out
    }
}

/// "all zeros", "a mix of 3 new and 5 old sectors", ...: the classes of a range written
/// by op `k` of file `id`.
fn summarize(classes: &[SectorClass], id: u32, k: usize) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for &c in classes {
        let name = match c {
            SectorClass::Data { file, op } if file == id => match op {
                Some(o) if o as usize == k => "new".to_string(),
                None => "old".to_string(),
                Some(o) => format!("op-{o}"),
            },
            SectorClass::Data { .. } | SectorClass::Foreign { .. } => "foreign".to_string(),
            SectorClass::Zero => "zero".to_string(),
            SectorClass::Garbage => "garbage".to_string(),
        };
        *counts.entry(name).or_default() += 1;
    }
    let label = |name: &str, all: bool| -> String {
        match name {
            "new" => if all { "the new data" } else { "new" }.to_string(),
            "old" => if all { "the old data" } else { "old" }.to_string(),
            "zero" => if all { "zeros" } else { "zero" }.to_string(),
            "garbage" => "garbage".to_string(),
            "foreign" => {
                if all { "foreign data (stamped for another file or offset)" } else { "foreign" }
                    .to_string()
            }
            other => format!("data of {}", other.replace('-', " ")),
        }
    };
    match counts.len() {
        0 => "empty".to_string(),
        1 => {
            let (name, _) = counts.iter().next().unwrap();
            format!("all {}", label(name, true))
        }
        _ => {
            let mut parts: Vec<(usize, String)> =
                counts.iter().map(|(n, &c)| (c, label(n, false))).collect();
            parts.sort_by_key(|p| std::cmp::Reverse(p.0));
            let list: Vec<String> = parts.iter().map(|(c, l)| format!("{c} {l}")).collect();
            format!("a mix of {} sectors", list.join(", "))
        }
    }
}

impl View<'_> {
    fn w(&self) -> &Workload {
        self.o.w
    }
    fn states(&self) -> &[ModelState] {
        &self.o.h.states
    }

    fn kind_of(&self, id: u32) -> NodeKind {
        self.o.h.final_state.nodes.get(&id).map(|n| n.kind).unwrap_or(NodeKind::File)
    }

    /// Whether `path` names model node `id` in the snapshot (same inode where observed).
    fn entry_is(&self, path: &str, id: u32) -> bool {
        self.snap.entries.get(path).is_some_and(|n| self.node_is(n, id))
    }

    fn node_is(&self, n: &Node, id: u32) -> bool {
        n.kind == self.kind_of(id) && self.obs.ino(id).is_none_or(|ino| ino == n.ino)
    }

    fn ino_text(&self, id: u32) -> String {
        match self.obs.ino(id) {
            Some(i) => format!("inode {i}"),
            None => format!("model node {id}"),
        }
    }

    /// File `id` in the snapshot, under any name the model ever gave it.
    fn find_file(&self, id: u32) -> Option<(&str, &Node)> {
        self.o.h.ever_names.get(&id)?.iter().find_map(|p| {
            let (p, n) = self.snap.entries.get_key_value(p.as_str())?;
            self.node_is(n, id).then_some((p.as_str(), n))
        })
    }

    fn name_desc(&self, path: &str, id: u32) -> String {
        match self.snap.entries.get(path) {
            None => format!("{path} is absent"),
            Some(n) if n.kind != self.kind_of(id) => format!("{path} is a {:?}", n.kind),
            Some(n) => format!("{path} is inode {}, not {}", n.ino, self.ino_text(id)),
        }
    }

    fn first_name(&self, id: u32) -> String {
        self.o
            .h
            .ever_names
            .get(&id)
            .and_then(|s| s.iter().next().cloned())
            .unwrap_or_else(|| format!("node {id}"))
    }

    /// Whether op `k`'s data range is entirely its data in the snapshot.
    fn data_effect(&self, k: usize, id: u32, offset: u64, len: u64, trunc: bool) -> Effect {
        let Some((name, node)) = self.find_file(id) else {
            return Some(Err(format!(
                "{} ({}) is not found under any of its names",
                self.first_name(id),
                self.ino_text(id)
            )));
        };
        // A file the file system refuses to read (EIO, EBADMSG) cannot be judged here: the
        // state's outcome is `read-error`, not a reordering. (A durability promise is
        // different: see `file_promise`.)
        if node.read_error.is_some() {
            return None;
        }
        if node.size < offset + len {
            return Some(Err(format!("{name} has size {}, short of {}", node.size, offset + len)));
        }
        let content = node.content.as_ref()?;
        let classes = content.range(offset / SECTOR, len / SECTOR);
        let want = SectorClass::Data { file: id, op: Some(k as u32) };
        if classes.iter().any(|&c| c != want) {
            return Some(Err(format!("{name} @{offset}+{len} is {}", summarize(&classes, id, k))));
        }
        if trunc {
            let tail = content.range(len / SECTOR, u64::MAX);
            if tail.contains(&SectorClass::Data { file: id, op: None }) {
                return Some(Err(format!(
                    "{name} has size {} with old data beyond {len}: not truncated",
                    node.size
                )));
            }
        }
        Some(Ok(()))
    }

    /// Whether op `k`'s whole effect is visible; `None`: not an effect-bearing op, or not
    /// judgeable (content not read).
    fn effect(&self, k: usize) -> Effect {
        let op = &self.w().ops[k];
        let id = (*self.o.h.op_ids.get(k)?)?;
        match op {
            Op::Creat { path, .. } | Op::Mkdir { path } => {
                Some(if self.entry_is(path, id) { Ok(()) } else { Err(self.name_desc(path, id)) })
            }
            Op::Write { offset, len, .. } | Op::Append { offset, len, .. } => {
                self.data_effect(k, id, *offset, *len, false)
            }
            Op::OtruncWrite { len, .. } => self.data_effect(k, id, 0, *len, true),
            Op::Link { to, .. } => {
                Some(if self.entry_is(to, id) { Ok(()) } else { Err(self.name_desc(to, id)) })
            }
            Op::Unlink { path } | Op::Rmdir { path } => Some(if self.entry_is(path, id) {
                Err(format!("{path} still names {}", self.ino_text(id)))
            } else {
                Ok(())
            }),
            Op::Rename { from, to } => Some(if !self.entry_is(to, id) {
                Err(self.name_desc(to, id))
            } else if self.entry_is(from, id) {
                Err(format!("{from} still names {} too", self.ino_text(id)))
            } else {
                Ok(())
            }),
            Op::Fsync { .. } | Op::Fdatasync { .. } | Op::Sync => None,
        }
    }

    fn ordering(&self) -> Option<Finding> {
        let judged: Vec<(usize, Result<(), String>)> =
            (0..self.w().ops.len()).filter_map(|k| self.effect(k).map(|r| (k, r))).collect();
        let (pos_i, (i, why)) = judged
            .iter()
            .enumerate()
            .find(|(_, (_, r))| r.is_err())
            .map(|(p, (i, r))| (p, (*i, r.clone().unwrap_err())))?;
        let (j, _) = judged[pos_i + 1..].iter().rev().find(|(_, r)| r.is_ok())?;
        let ops = &self.w().ops;
        Some(Finding {
            family: Family::Ordering,
            op: *j,
            story: format!("{} persisted (op {j}), {} not (op {i}): {why}", ops[*j], ops[i]),
        })
    }

    /// Projection of `path` in a model state: (id, kind, file link count).
    fn proj_model(s: &ModelState, path: &str) -> Option<(u32, NodeKind, Option<u64>)> {
        let id = s.id(path)?;
        let n = &s.nodes[&id];
        Some((id, n.kind, (n.kind == NodeKind::File).then_some(n.nlink)))
    }

    fn proj_matches(
        &self,
        want: Option<(u32, NodeKind, Option<u64>)>,
        found: Option<&Node>,
    ) -> bool {
        match (want, found) {
            (None, None) => true,
            (Some((id, kind, nlink)), Some(n)) => {
                n.kind == kind
                    && self.obs.ino(id).is_none_or(|i| i == n.ino)
                    && nlink.is_none_or(|l| l == n.nlink)
            }
            _ => false,
        }
    }

    fn proj_desc(&self, want: Option<(u32, NodeKind, Option<u64>)>) -> String {
        match want {
            None => "absent".into(),
            Some((id, kind, nlink)) => {
                let l = nlink.map(|l| format!(", nlink {l}")).unwrap_or_default();
                format!("{} ({kind:?}{l})", self.ino_text(id))
            }
        }
    }

    fn found_desc(found: Option<&Node>) -> String {
        match found {
            None => "absent".into(),
            Some(n) if n.kind == NodeKind::File => {
                format!("inode {} (File, nlink {})", n.ino, n.nlink)
            }
            Some(n) => format!("inode {} ({:?})", n.ino, n.kind),
        }
    }

    fn names_with_ino(&self, ino: u64) -> usize {
        self.snap.entries.values().filter(|n| n.ino == ino).count()
    }

    /// Atomicity of op `k`: `Some(story)` if violated.
    fn atomic(&self, k: usize, prefix: bool) -> Option<String> {
        let op = &self.w().ops[k];
        if !op.has_effect() {
            return None;
        }
        let id = (*self.o.h.op_ids.get(k)?)?;
        let (before, after) = (&self.states()[k], &self.states()[k + 1]);
        let story = match op.data_range() {
            Some((offset, len)) => self.atomic_data(
                op,
                k,
                id,
                offset,
                len,
                &before.nodes[&id],
                &after.nodes[&id],
                prefix,
            )?,
            None => self.atomic_names(op, id, before, after)?,
        };
        Some(format!("{op} (op {k}): {story}"))
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic_data(
        &self,
        op: &Op,
        k: usize,
        id: u32,
        offset: u64,
        len: u64,
        before: &ModelNode,
        after: &ModelNode,
        prefix: bool,
    ) -> Option<String> {
        let Some((name, node)) = self.find_file(id) else {
            return Some(format!("{} ({}) is missing", self.first_name(id), self.ino_text(id)));
        };
        // Unreadable: not judgeable as torn or whole; the state's outcome is `read-error`.
        if node.read_error.is_some() {
            return None;
        }
        let content = node.content.as_ref()?;
        let sectors = |size: u64| size.div_ceil(SECTOR);
        let same = |m: &ModelNode| {
            node.size == m.size && content.first_diff(&m.content, sectors(m.size)).is_none()
        };
        if same(before) || same(after) {
            return None;
        }
        let (r0, rn) = (offset / SECTOR, len / SECTOR);
        let new = SectorClass::Data { file: id, op: Some(k as u32) };
        let appends = matches!(op, Op::Append { .. });
        if prefix && appends && node.size > before.size && node.size <= after.size {
            let old_ok = content.first_diff(&before.content, sectors(before.size)).is_none();
            let tail =
                content.range(sectors(before.size), sectors(node.size) - sectors(before.size));
            if old_ok && tail.iter().all(|&c| c == new) {
                return None;
            }
        }
        // Damage outside the op's range (before and after agree there).
        let outside = (0..sectors(node.size).min(sectors(before.size.max(after.size))))
            .filter(|s| *s < r0 || *s >= r0 + rn)
            .find(|&s| content.class_at(s) != after.content.class_at(s));
        if let Some(s) = outside {
            let c = content.class_at(s).unwrap_or(SectorClass::Zero);
            return Some(format!(
                "{name}: data outside the written range damaged at offset {}: {}",
                s * SECTOR,
                c.describe()
            ));
        }
        let in_file = rn.min(sectors(node.size).saturating_sub(r0));
        let classes = content.range(r0, in_file);
        let what = if len == SECTOR {
            "sector"
        } else if len == 4096 {
            "block"
        } else {
            "data"
        };
        if node.size != before.size && node.size != after.size {
            let mut s = format!(
                "{name} has size {}, neither {} (before) nor {} (after)",
                node.size, before.size, after.size
            );
            if !classes.is_empty() {
                s += &format!("; the new {what} within it is {}", summarize(&classes, id, k));
            }
            if prefix {
                s += " (not old content + a prefix of the append)";
            }
            return Some(s);
        }
        let s = summarize(&classes, id, k);
        Some(if appends && node.size == after.size {
            format!("{name} size grew to {} but the new {what} is {s}", node.size)
        } else {
            format!("{name} @{offset}+{len} is {s} (neither all old nor all new)")
        })
    }

    fn atomic_names(
        &self,
        op: &Op,
        id: u32,
        before: &ModelState,
        after: &ModelState,
    ) -> Option<String> {
        let paths = op.paths();
        let ok = |s: &ModelState| {
            paths
                .iter()
                .all(|p| self.proj_matches(Self::proj_model(s, p), self.snap.entries.get(*p)))
        };
        if ok(before) || ok(after) {
            return None;
        }
        if let Op::Rename { from, to } = op {
            let (f, t) = (self.entry_is(from, id), self.entry_is(to, id));
            if f && t {
                return Some(format!("{from} and {to} both name {}", self.ino_text(id)));
            }
            if !f && !t && self.find_file(id).is_none() {
                return Some(format!("{} is missing from both {from} and {to}", self.ino_text(id)));
            }
        }
        // A file link count that disagrees with the names found.
        for p in &paths {
            if let Some(n) = self.snap.entries.get(*p) {
                if n.kind == NodeKind::File {
                    let names = self.names_with_ino(n.ino);
                    if n.nlink as usize != names {
                        return Some(format!(
                            "{p} (inode {}) has link count {} but {} found",
                            n.ino,
                            n.nlink,
                            if names == 1 {
                                "1 name was".to_string()
                            } else {
                                format!("{names} names were")
                            }
                        ));
                    }
                }
            }
        }
        let p = paths
            .iter()
            .find(|p| !self.proj_matches(Self::proj_model(after, p), self.snap.entries.get(**p)))
            .unwrap_or(&paths[0]);
        Some(format!(
            "{p} is {}, expected {} (before) or {} (after)",
            Self::found_desc(self.snap.entries.get(*p)),
            self.proj_desc(Self::proj_model(before, p)),
            self.proj_desc(Self::proj_model(after, p)),
        ))
    }

    /// Durability of persistence point `d`: `Some(story)` if what it promised is missing.
    fn durability(&self, d: usize) -> Option<String> {
        let op = self.w().ops.get(d)?;
        if !op.is_persistence_point() {
            return None;
        }
        let s = self.states().get(d + 1)?;
        let later = &self.w().ops[d + 1..];
        let later_paths: BTreeSet<&str> =
            later.iter().filter(|o| o.has_effect()).flat_map(|o| o.paths()).collect();
        let touched = |p: &str| {
            later_paths.iter().any(|lp| {
                p == *lp || (p.starts_with(lp) && p.as_bytes().get(lp.len()) == Some(&b'/'))
            })
        };
        let prefix = format!("{op} (op {d}) is durable here, but");
        let fail = |why: String| Some(format!("{prefix} {why}"));
        match op {
            Op::Fsync { path } | Op::Fdatasync { path } => {
                let id = s.id(path)?;
                if s.nodes[&id].kind == NodeKind::Dir {
                    self.dir_promise(d, path, &touched).and_then(fail)
                } else {
                    self.file_promise(d, id, s).and_then(fail)
                }
            }
            Op::Creat { path, sync: true } => {
                let id = s.id(path)?;
                (!touched(path) && !self.entry_is(path, id))
                    .then(|| self.name_desc(path, id))
                    .and_then(fail)
            }
            Op::Sync => {
                for (p, &id) in s.names.iter().filter(|(p, _)| *p != DRAIN_FILE) {
                    let n = &s.nodes[&id];
                    let why = if n.kind == NodeKind::Dir {
                        self.dir_promise(d, p, &touched)
                    } else {
                        self.file_promise(d, id, s)
                    };
                    if let Some(why) = why {
                        return fail(why);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Names in directory `dir` as of op `d`.
    fn dir_promise(&self, d: usize, dir: &str, touched: &dyn Fn(&str) -> bool) -> Option<String> {
        let s = &self.states()[d + 1];
        let in_dir = |p: &str| p != "/" && parent(p) == dir && p != DRAIN_FILE;
        for (p, &id) in s.names.iter().filter(|(p, _)| in_dir(p)) {
            if !touched(p) && !self.entry_is(p, id) {
                return Some(self.name_desc(p, id));
            }
        }
        for earlier in &self.states()[..=d] {
            for (p, &id) in earlier.names.iter().filter(|(p, _)| in_dir(p)) {
                if s.id(p) != Some(id) && !touched(p) && self.entry_is(p, id) {
                    return Some(format!(
                        "{p} still names {} (gone before the call)",
                        self.ino_text(id)
                    ));
                }
            }
        }
        None
    }

    /// File `id`'s size and data as of op `d`, allowing later ops' data.
    fn file_promise(&self, d: usize, id: u32, s: &ModelState) -> Option<String> {
        let later: Vec<(usize, &Op)> = self
            .w()
            .ops
            .iter()
            .enumerate()
            .skip(d + 1)
            .filter(|(j, o)| {
                o.data_range().is_some() && self.o.h.op_ids.get(*j).copied().flatten() == Some(id)
            })
            .collect();
        if later.iter().any(|(_, o)| matches!(o, Op::OtruncWrite { .. })) {
            return None;
        }
        let (name, node) = self.find_file(id)?;
        // Data an fsync promised that now reads as an error: the promise is broken, if
        // loudly. A violation, not a read-error.
        if let Some(e) = &node.read_error {
            return Some(format!("reading {name} failed: {e}"));
        }
        let want = &s.nodes[&id];
        if node.size < want.size || (later.is_empty() && node.size != want.size) {
            return Some(format!("{name} has size {}, not {}", node.size, want.size));
        }
        let content = node.content.as_ref()?;
        let later_ops: BTreeSet<u32> = later.iter().map(|(j, _)| *j as u32).collect();
        let sectors = want.size.div_ceil(SECTOR);
        let mut found = content.iter();
        for (i, expect) in want.content.iter().take(sectors as usize).enumerate() {
            let got = found.next().unwrap_or(SectorClass::Zero);
            let later_ok = matches!(got, SectorClass::Data { file, op: Some(o) } if file == id && later_ops.contains(&o));
            if got != expect && !later_ok {
                let what = match expect {
                    SectorClass::Data { op: Some(o), .. } => format!("the data of op {o}"),
                    SectorClass::Data { op: None, .. } => "the old data".into(),
                    other => other.describe(),
                };
                let got = match got {
                    SectorClass::Data { file, op: None } if file == id => {
                        "the old data".to_string()
                    }
                    SectorClass::Data { file, op: Some(o) } if file == id => {
                        format!("the data of op {o}")
                    }
                    other => other.describe(),
                };
                return Some(format!("{name} @{} is {got}, not {what}", i as u64 * SECTOR));
            }
        }
        None
    }
}
