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
//! * Ordering: each property names a pair A -> B ([`Oracle::is_pair`]); it is violated iff
//!   some op j of kind B persisted while an earlier op i < j of kind A, as the property
//!   defines the pair, did not. Any other reordering (i not persisted, a later j
//!   persisted, not the pair) is reported beside the verdict, never as it.
//! * Durability, in every workload: for each persistence point in
//!   [`CrashContext::durable_ops`], what it promised holds except where later ops
//!   (index > the point) touch the same names or data: fsync/fdatasync of a file: its
//!   size and every sector as of the call (the file is looked up by inode; its name is
//!   promised by the base image, a sync or a directory fsync: a file whose name was
//!   durable and that is found under no name at all is a violation); fsync of a
//!   directory: every name in it as of the call whose inode was durable too (the base
//!   image's, a sync's, a fsynced file's, or a directory) holds the right inode, and names
//!   it lost before the call no longer do; synchronous creat: the name; sync: all of that
//!   for every directory and file. A later O_TRUNC of a fsynced file lets its data go,
//!   but never lets it show data older than the promise.
//! * A finding of another family than the property's (a durability failure in an ordering
//!   workload) is reported beside the verdict too: a cross means what its row says.

mod detect;
mod discrepancy;
mod txn;

pub use detect::ScenarioMark;
pub use discrepancy::{Discrepancy, DiscrepancyKind, SectorMismatch};

use discrepancy::Why;

use crate::model::{parent, History, ModelNode, ModelState};
use crate::op::{Op, OpKind, OpRef, RenameHow};
use crate::property::{Family, Property};
use crate::stamp::SectorClass;
use crate::tree::{Content, InodeMeta, Node, NodeKind, Observed, Snapshot};
use crate::workload::{Guarantee, Workload, DRAIN_FILE};
use crate::SECTOR;
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
    /// One line, for people.
    pub story: String,
    /// What the story tells, typed: its kind, ops, paths and sector (absent in findings
    /// journaled before it was carried: `other`).
    #[serde(default)]
    pub discrepancy: Discrepancy,
    /// For an ordering finding: the earlier op that did not persist and the later op that
    /// did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<OpPair>,
}

impl Finding {
    /// The finding of `family` about op `op` that `why` tells.
    pub(crate) fn of(family: Family, op: usize, why: Why) -> Finding {
        Finding { family, op, story: why.story, discrepancy: why.discrepancy, pair: None }
    }
}

/// The two ops of an ordering violation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpPair {
    /// The earlier op, which did not persist.
    pub earlier_op: OpRef,
    /// The later op, which did.
    pub later_op: OpRef,
}

/// Everything the oracle says about one crash state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    /// Findings of the property's own kind, in the order [`check`] considers them: these
    /// make the verdict. (Without a property, every durability finding.)
    pub findings: Vec<Finding>,
    /// Findings that belong to other rows, at most one per kind: the first reordering of
    /// ops outside the property's pair, the first durability failure in a workload whose
    /// property is not about durability.
    pub beside: Vec<Finding>,
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

type Effect = Option<Result<(), Why>>;

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

    /// Whether ops `i < j` of the workload are the pair its ordering property judges:
    ///
    /// | property                   | earlier op `i`            | later op `j`                                  |
    /// |----------------------------|---------------------------|-----------------------------------------------|
    /// | `overwrite-then-any`       | an overwrite              | any op that changes the file system           |
    /// | `append-then-rename`       | an append to file f       | a rename of f                                 |
    /// | `otrunc-append-then-close` | O_TRUNC + writes + close  | any op that changes the file system           |
    /// | `append-then-append`       | an append to file f       | an append to f                                |
    /// | `append-then-dir-op`       | an append                 | link, mkdir or a synchronous creat            |
    /// | `dir-op-then-any`          | a directory op            | any op elsewhere: other directories and files |
    ///
    /// Files are model nodes, so "the same file" survives renames. Always false for a
    /// workload whose property is not an ordering property.
    pub fn is_pair(&self, i: usize, j: usize) -> bool {
        use OpKind as K;
        let ops = &self.w.ops;
        let (Some(a), Some(b)) = (ops.get(i), ops.get(j)) else { return false };
        if i >= j {
            return false;
        }
        let node = |k: usize| self.h.op_ids.get(k).copied().flatten();
        let same_file = node(i).is_some() && node(i) == node(j);
        let (ka, kb) = (a.kind(), b.kind());
        match self.w.property {
            Some(Property::OverwriteThenAny) => ka == K::Overwrite && b.has_effect(),
            Some(Property::AppendThenRename) => ka == K::Append && kb == K::Rename && same_file,
            Some(Property::OtruncAppendThenClose) => {
                matches!(ka, K::OtruncWrite | K::Truncate) && b.has_effect()
            }
            Some(Property::AppendThenAppend) => ka == K::Append && kb == K::Append && same_file,
            Some(Property::AppendThenDirOp) => {
                ka == K::Append
                    && (matches!(kb, K::Link | K::Mkdir)
                        || matches!(b, Op::Creat { sync: true, .. }))
            }
            Some(Property::OsyncPrefix) => {
                // An osync between them, both change the file system, and no later op
                // renames or removes a name `a` made (its effect, "the name holds the
                // inode", is then not decidable: the file lives on under another name).
                let group = |k: usize| ops[..k].iter().filter(|o| o.kind().is_osync()).count();
                let superseded = ka.is_dir_op()
                    && ops[i + 1..].iter().any(|o| {
                        matches!(o.kind(), K::Rename | K::Unlink | K::Rmdir)
                            && a.paths().iter().any(|p| o.paths().first() == Some(p))
                    });
                a.has_effect() && b.has_effect() && group(i) < group(j) && !superseded
            }
            Some(Property::DirOpThenAny) => {
                let dirs = |o: &Op| -> BTreeSet<String> {
                    o.paths().iter().map(|p| parent(p).to_owned()).collect()
                };
                ka.is_dir_op() && b.has_effect() && !same_file && dirs(a).is_disjoint(&dirs(b))
            }
            _ => false,
        }
    }

    /// The oracle's whole judgement of `snap`: the findings that make the verdict and
    /// those that belong beside it (see [`Judgement`]).
    pub fn judge(&self, observed: &Observed, snap: &Snapshot, ctx: &CrashContext) -> Judgement {
        let all = self.all_findings(observed, snap, ctx);
        let own_family = self.w.property.map(Property::family).unwrap_or(Family::Durability);
        let mut judgement = Judgement::default();
        for f in all {
            // Without a property every finding makes the verdict: durability, and the
            // transactions' own promises where the workload runs any.
            let own = self.w.property.is_none()
                || f.family == own_family
                    && (f.family != Family::Ordering
                        || f.pair
                            .as_ref()
                            .is_some_and(|p| self.is_pair(p.earlier_op.index, p.later_op.index)));
            if own {
                judgement.findings.push(f);
            } else if !judgement.beside.iter().any(|b| b.family == f.family) {
                judgement.beside.push(f);
            }
        }
        judgement
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
        (0..self.w.ops.len()).map(|k| v.effect(k).map(|r| r.map_err(|why| why.story))).collect()
    }

    /// For the `detects-inconsistency` workload, what `snap` did to each scenario of the
    /// reliability table (empty for every other workload).
    pub fn scenario_marks(
        &self,
        observed: &Observed,
        snap: &Snapshot,
        ctx: &CrashContext,
    ) -> Vec<detect::ScenarioMark> {
        if self.h.error.is_some()
            || self.w.property.map(Property::family) != Some(Family::Detection)
        {
            return Vec::new();
        }
        detect::scenario_marks(&self.h, self.w, observed, snap, ctx)
    }

    /// See [`check_all`]: the findings that make the verdict ([`Judgement::findings`]).
    pub fn findings(
        &self,
        observed: &Observed,
        snap: &Snapshot,
        ctx: &CrashContext,
    ) -> Vec<Finding> {
        self.judge(observed, snap, ctx).findings
    }

    /// Every finding of every family, own and beside.
    fn all_findings(
        &self,
        observed: &Observed,
        snap: &Snapshot,
        ctx: &CrashContext,
    ) -> Vec<Finding> {
        if let Some(e) = &self.h.error {
            let family = self.w.property.map(Property::family).unwrap_or(Family::Durability);
            let why = Why::new(DiscrepancyKind::Other, format!("the workload does not model: {e}"));
            return vec![Finding::of(family, self.h.op_ids.len(), why)];
        }
        let v = View { o: self, obs: observed, snap };
        if matches!(self.w.property, Some(Property::TxnAtomic | Property::TxnDurable)) {
            // Transactions are judged whole, not op by op (see `txn`).
            return v.txn_findings(ctx);
        }
        let mut out = Vec::new();
        let family = self.w.property.map(Property::family);
        match family {
            Some(Family::Atomicity) => {
                let prefix = self.w.property == Some(Property::MultiBlockPrefixAppend);
                for k in 0..self.w.ops.len() {
                    if let Some(why) = v.atomic(k, prefix) {
                        out.push(Finding::of(Family::Atomicity, k, why));
                    }
                }
            }
            Some(Family::Ordering) => {
                let (pair, other) = v.ordering();
                out.extend(pair);
                out.extend(other);
            }
            Some(Family::Detection) => {
                return detect::findings(&self.h, self.w, observed, snap, ctx);
            }
            _ => {}
        }
        let mut durable: Vec<usize> = ctx.durable_ops.clone();
        durable.sort_unstable();
        durable.dedup();
        for &d in &durable {
            if let Some(why) = v.durability(d, &durable) {
                let why = if family == Some(Family::Durability) {
                    why
                } else {
                    why.retold(|story| format!("durability: {story}"))
                };
                out.push(Finding::of(Family::Durability, d, why));
            }
        }
        if let Some((path, error)) = snap.not_creatable.iter().next() {
            // After everything else: the state was judged before anything was created.
            let story = format!(
                "after recovery, {path} could not be created: {error}{}",
                match snap.not_creatable.len() {
                    1 => String::new(),
                    n => format!(" (and {} other name(s))", n - 1),
                }
            );
            let mut why = Why::new(DiscrepancyKind::NotCreatable, story);
            why.discrepancy.paths = snap.not_creatable.keys().cloned().collect();
            out.push(Finding::of(Family::Durability, self.w.ops.len(), why));
        }
        if family.is_none() && self.w.ops.contains(&Op::TxnBegin) {
            // A transaction promises to be all or nothing and a durable commit to be
            // durable, whatever the workload's property: judged whole (`txn`).
            out.extend(v.txn_findings(ctx));
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

    fn name_desc(&self, path: &str, id: u32) -> Why {
        match self.snap.entries.get(path) {
            None => Why::at(DiscrepancyKind::LostFile, path, format!("{path} is absent")),
            Some(n) if n.kind != self.kind_of(id) => {
                Why::at(DiscrepancyKind::WrongKind, path, format!("{path} is a {:?}", n.kind))
            }
            Some(n) => Why::at(
                DiscrepancyKind::WrongInode,
                path,
                format!("{path} is inode {}, not {}", n.ino, self.ino_text(id)),
            ),
        }
    }

    /// File `id` is under none of the names the model ever gave it.
    fn not_found(&self, id: u32) -> Why {
        let name = self.first_name(id);
        let story = format!("{name} ({}) is not found under any of its names", self.ino_text(id));
        Why::at(DiscrepancyKind::LostFile, &name, story)
    }

    /// Name `path` still holds node `id`, which an op removed from it.
    fn still_names(&self, path: &str, id: u32, tail: &str) -> Why {
        let story = format!("{path} still names {}{tail}", self.ino_text(id));
        Why::at(DiscrepancyKind::StaleName, path, story)
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
            return Some(Err(self.not_found(id)));
        };
        // A file the file system refuses to read (EIO, EBADMSG) cannot be judged here: the
        // state's outcome is `read-error`, not a reordering. (A durability promise is
        // different: see `file_promise`.)
        if node.read_error.is_some() {
            return None;
        }
        if node.size < offset + len {
            let story = format!("{name} has size {}, short of {}", node.size, offset + len);
            return Some(Err(Why::at(DiscrepancyKind::WrongSize, name, story).op(k)));
        }
        let content = node.content.as_ref()?;
        let classes = content.range(offset / SECTOR, len / SECTOR);
        let want = SectorClass::Data { file: id, op: Some(k as u32) };
        if let Some(i) = classes.iter().position(|&c| c != want) {
            let story = format!("{name} @{offset}+{len} is {}", summarize(&classes, id, k));
            let why = Why::at(DiscrepancyKind::StaleData, name, story);
            return Some(Err(why.sector(offset + i as u64 * SECTOR, classes[i], want).op(k)));
        }
        if trunc {
            let tail = content.range(len / SECTOR, u64::MAX);
            if tail.contains(&SectorClass::Data { file: id, op: None }) {
                let story = format!(
                    "{name} has size {} with old data beyond {len}: not truncated",
                    node.size
                );
                return Some(Err(Why::at(DiscrepancyKind::WrongSize, name, story).op(k)));
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
            Op::Write { offset, len, .. }
            | Op::Append { offset, len, .. }
            | Op::DirectWrite { offset, len, .. }
            | Op::SyncWrite { offset, len, .. }
            | Op::MmapWrite { offset, len, .. } => self.data_effect(k, id, *offset, *len, false),
            // A write to a file with no name left is nothing a reader can find.
            Op::FdWrite { offset, len, .. } => {
                self.states()[k + 1].names_of(id).next()?;
                self.data_effect(k, id, *offset, *len, false)
            }
            Op::Symlink { path, .. } => {
                Some(if self.entry_is(path, id) { Ok(()) } else { Err(self.name_desc(path, id)) })
            }
            Op::Truncate { size, .. } => Some(match self.find_file(id) {
                None => Err(self.not_found(id)),
                Some((_, n)) if n.size == *size => Ok(()),
                Some((name, n)) => Err(Why::at(
                    DiscrepancyKind::WrongSize,
                    name,
                    format!("{name} has size {}, not {size}", n.size),
                )),
            }),
            Op::OtruncWrite { len, .. } => self.data_effect(k, id, 0, *len, true),
            Op::Link { to, .. } => {
                Some(if self.entry_is(to, id) { Ok(()) } else { Err(self.name_desc(to, id)) })
            }
            Op::Unlink { path } | Op::Rmdir { path } => Some(if self.entry_is(path, id) {
                Err(self.still_names(path, id, ""))
            } else {
                Ok(())
            }),
            Op::Rename { from, to } => Some(if !self.entry_is(to, id) {
                Err(self.name_desc(to, id))
            } else if self.entry_is(from, id) {
                Err(self.still_names(from, id, " too"))
            } else {
                Ok(())
            }),
            Op::Setxattr { name, .. } | Op::Removexattr { name, .. } => {
                let want = match op {
                    Op::Setxattr { value, .. } => Some(value.as_str()),
                    _ => None,
                };
                Some(match self.find_file(id) {
                    None => Err(self.not_found(id)),
                    Some((_, n)) if n.read_error.is_some() => return None,
                    Some((p, n)) => match n.xattrs.get(name).map(String::as_str) {
                        got if got == want => Ok(()),
                        got => Err(xattr_story(p, name, got, want)),
                    },
                })
            }
            Op::TmpfileLink { path, len } => {
                if !self.entry_is(path, id) {
                    return Some(Err(self.name_desc(path, id)));
                }
                self.data_effect(k, id, 0, *len, false)
            }
            Op::Rename2 { from, to, how } => Some(if !self.entry_is(to, id) {
                Err(self.name_desc(to, id))
            } else if *how == RenameHow::Exchange {
                // The other node now named `from`.
                match self.states()[k + 1].id(from) {
                    Some(other) if !self.entry_is(from, other) => Err(self.name_desc(from, other)),
                    _ => Ok(()),
                }
            } else if self.entry_is(from, id) {
                Err(self.still_names(from, id, " too"))
            } else {
                Ok(())
            }),
            Op::Chmod { .. } | Op::Chown { .. } | Op::Utimes { .. } => {
                let want = self.states()[k + 1].nodes.get(&id)?.meta;
                Some(match self.find_file(id) {
                    None => Err(self.not_found(id)),
                    Some((p, n)) => match meta_mismatch(p, &want, n, op.kind()) {
                        Some(why) => Err(why),
                        None => Ok(()),
                    },
                })
            }
            Op::Fsync { .. }
            | Op::Fdatasync { .. }
            | Op::Sync
            | Op::Syncfs
            | Op::Osync
            | Op::Dsync
            | Op::Output
            | Op::WritebackStart { .. }
            | Op::DropCaches
            | Op::Open { .. }
            | Op::Close { .. }
            | Op::FdFsync { .. }
            | Op::FdFdatasync { .. }
            | Op::Falloc { .. }
            | Op::Clone { .. }
            | Op::CloneRange { .. }
            | Op::CopyRange { .. }
            | Op::DedupeRange { .. }
            | Op::TxnBegin
            | Op::TxnCommit { .. }
            | Op::TxnAbort => None,
        }
    }

    /// The first violation of the property's own pair, and the first other reordering
    /// (an earlier op not persisted, a later one persisted, not the pair): earliest
    /// earlier op first, and for it the latest later op.
    fn ordering(&self) -> (Option<Finding>, Option<Finding>) {
        let judged: Vec<(usize, Result<(), Why>)> =
            (0..self.w().ops.len()).filter_map(|k| self.effect(k).map(|r| (k, r))).collect();
        let mut pair = None;
        let mut other = None;
        for (pos, (i, why)) in judged.iter().enumerate() {
            let Err(why) = why else { continue };
            for (j, r) in judged[pos + 1..].iter().rev() {
                if r.is_err() {
                    continue;
                }
                let slot = if self.o.is_pair(*i, *j) { &mut pair } else { &mut other };
                if slot.is_none() {
                    *slot = Some(self.reordering(*i, *j, why));
                }
            }
            if pair.is_some() && other.is_some() {
                break;
            }
        }
        (pair, other)
    }

    /// The finding "op `j` persisted, op `i` not".
    fn reordering(&self, i: usize, j: usize, why: &Why) -> Finding {
        let ops = &self.w().ops;
        let why = why
            .clone()
            .retold(|why| format!("{} persisted (op {j}), {} not (op {i}): {why}", ops[j], ops[i]))
            .first_op(j)
            .op(i);
        Finding {
            pair: Some(OpPair { earlier_op: ops[i].op_ref(i), later_op: ops[j].op_ref(j) }),
            ..Finding::of(Family::Ordering, j, why)
        }
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
    fn atomic(&self, k: usize, prefix: bool) -> Option<Why> {
        let op = &self.w().ops[k];
        if !op.has_effect() {
            return None;
        }
        let id = (*self.o.h.op_ids.get(k)?)?;
        let (before, after) = (&self.states()[k], &self.states()[k + 1]);
        let why = match op.data_range() {
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
        Some(why.retold(|story| format!("{op} (op {k}): {story}")).first_op(k))
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
    ) -> Option<Why> {
        let Some((name, node)) = self.find_file(id) else {
            let first = self.first_name(id);
            let story = format!("{first} ({}) is missing", self.ino_text(id));
            return Some(Why::at(DiscrepancyKind::LostFile, &first, story));
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
            let story = format!(
                "{name}: data outside the written range damaged at offset {}: {}",
                s * SECTOR,
                c.describe()
            );
            let expected = after.content.class_at(s).unwrap_or(SectorClass::Zero);
            let why = Why::at(DiscrepancyKind::StaleData, name, story);
            return Some(why.sector(s * SECTOR, c, expected));
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
            return Some(Why::at(DiscrepancyKind::WrongSize, name, s));
        }
        let s = summarize(&classes, id, k);
        let story = if appends && node.size == after.size {
            format!("{name} size grew to {} but the new {what} is {s}", node.size)
        } else {
            format!("{name} @{offset}+{len} is {s} (neither all old nor all new)")
        };
        let why = Why::at(DiscrepancyKind::NotAtomic, name, story);
        Some(match classes.iter().position(|&c| c != new) {
            Some(i) => why.sector((r0 + i as u64) * SECTOR, classes[i], new),
            None => why,
        })
    }

    fn atomic_names(
        &self,
        op: &Op,
        id: u32,
        before: &ModelState,
        after: &ModelState,
    ) -> Option<Why> {
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
            let both = |kind, story| {
                let mut why = Why::at(kind, from, story);
                why.discrepancy.paths.push(to.clone());
                why
            };
            if f && t {
                let story = format!("{from} and {to} both name {}", self.ino_text(id));
                return Some(both(DiscrepancyKind::NotAtomic, story));
            }
            if !f && !t && self.find_file(id).is_none() {
                let story = format!("{} is missing from both {from} and {to}", self.ino_text(id));
                return Some(both(DiscrepancyKind::LostFile, story));
            }
        }
        // A file link count that disagrees with the names found.
        for p in &paths {
            if let Some(n) = self.snap.entries.get(*p) {
                if n.kind == NodeKind::File {
                    let names = self.names_with_ino(n.ino);
                    if n.nlink as usize != names {
                        let story = format!(
                            "{p} (inode {}) has link count {} but {} found",
                            n.ino,
                            n.nlink,
                            if names == 1 {
                                "1 name was".to_string()
                            } else {
                                format!("{names} names were")
                            }
                        );
                        return Some(Why::at(DiscrepancyKind::WrongLinkCount, p, story));
                    }
                }
            }
        }
        // Name the entry that is wrong: one that matches neither side. When each entry
        // matches one side but not the same one, the op is half done: say which half.
        let matches = |s: &ModelState, p: &str| {
            self.proj_matches(Self::proj_model(s, p), self.snap.entries.get(p))
        };
        if let Some(p) = paths.iter().find(|p| !matches(before, p) && !matches(after, p)) {
            let found = self.snap.entries.get(*p);
            let story = format!(
                "{p} is {}, expected {} (before) or {} (after)",
                Self::found_desc(found),
                self.proj_desc(Self::proj_model(before, p)),
                self.proj_desc(Self::proj_model(after, p)),
            );
            let kinds = [before, after].map(|s| Self::proj_model(s, p).map(|m| m.1));
            let kind = match found {
                None => DiscrepancyKind::LostFile,
                Some(_) if kinds == [None, None] => DiscrepancyKind::StaleName,
                Some(n) if !kinds.contains(&Some(n.kind)) => DiscrepancyKind::WrongKind,
                Some(_) => DiscrepancyKind::WrongInode,
            };
            return Some(Why::at(kind, p, story));
        }
        let as_before: Vec<&str> = paths.iter().copied().filter(|p| !matches(after, p)).collect();
        let as_after: Vec<&str> = paths.iter().copied().filter(|p| !matches(before, p)).collect();
        let story = format!(
            "half done: {} as before the op, {} as after it",
            as_before.join(", "),
            as_after.join(", ")
        );
        let mut why = Why::new(DiscrepancyKind::NotAtomic, story);
        why.discrepancy.paths = as_before.iter().chain(&as_after).map(|p| p.to_string()).collect();
        Some(why)
    }

    /// Whether node `id`'s inode is durable at persistence point `d`, so that a name of it
    /// may be promised: it existed in the base image (set up and synced before the
    /// workload), or a durable point `q <= d` synced everything, fsynced it, or created it
    /// synchronously.
    fn inode_durable(&self, id: u32, d: usize, durable: &[usize]) -> bool {
        if self.states()[0].nodes.contains_key(&id) {
            return true;
        }
        durable.iter().filter(|&&q| q <= d).any(|&q| {
            let s = &self.states()[q + 1];
            match &self.w().ops[q] {
                Op::Sync | Op::Syncfs | Op::Dsync | Op::Output => s.nodes.contains_key(&id),
                Op::Fsync { path }
                | Op::Fdatasync { path }
                | Op::Creat { path, sync: true }
                | Op::SyncWrite { path, .. } => s.id(path) == Some(id),
                Op::FdFsync { .. } | Op::FdFdatasync { .. } => {
                    self.o.h.op_ids.get(q).copied().flatten() == Some(id)
                }
                _ => false,
            }
        })
    }

    /// Whether some name of `id` as of point `d` was durable by then: a name the base image
    /// had, or one a durable sync, directory fsync or synchronous creat `q <= d` covered.
    fn name_durable(&self, id: u32, d: usize, durable: &[usize]) -> bool {
        let now = &self.states()[d + 1];
        now.names_of(id).any(|p| {
            self.states()[0].id(p) == Some(id)
                || durable.iter().filter(|&&q| q <= d).any(|&q| {
                    let s = &self.states()[q + 1];
                    s.id(p) == Some(id)
                        && match &self.w().ops[q] {
                            Op::Sync | Op::Syncfs | Op::Dsync | Op::Output => true,
                            Op::Fsync { path }
                                if self.w().guarantees.contains(&Guarantee::FsyncPersistsName)
                                    && s.id(path) == Some(id) =>
                            {
                                true
                            }
                            // Through a descriptor: the file itself under the guarantee,
                            // or the directory the name is in.
                            Op::FdFsync { .. } => {
                                let target = self.o.h.op_ids.get(q).copied().flatten();
                                let guaranteed =
                                    self.w().guarantees.contains(&Guarantee::FsyncPersistsName);
                                (guaranteed && target == Some(id))
                                    || (target.is_some() && target == s.id(parent(p)))
                            }
                            Op::Fsync { path } => path == parent(p),
                            Op::Creat { path, sync: true } => path == p,
                            _ => false,
                        }
                })
        })
    }

    /// Durability of persistence point `d`: `Some(story)` if what it promised is missing.
    /// `durable`: every persistence point durable in this crash state.
    fn durability(&self, d: usize, durable: &[usize]) -> Option<Why> {
        let op = self.w().ops.get(d)?;
        // A released output promises what sync does (`output-durable`); under
        // `metadata-op-durable` a directory op promises its own effect once it returned.
        let metadata_op =
            self.w().property == Some(Property::MetadataOpDurable) && op.kind().is_metadata_op();
        if !op.is_persistence_point() && *op != Op::Output && !metadata_op {
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
        let prefix = if *op == Op::Output {
            format!("{op} (op {d}) was released before the crash, but")
        } else {
            format!("{op} (op {d}) is durable here, but")
        };
        let fail = |why: Why| Some(why.retold(|why| format!("{prefix} {why}")).first_op(d));
        if metadata_op {
            // Its names, unless a later op changes them again.
            if op.paths().iter().any(|p| touched(p)) {
                return None;
            }
            return match self.effect(d)? {
                Ok(()) => None,
                Err(why) => {
                    Some(why.retold(|why| format!("{op} (op {d}) returned, but {why}")).first_op(d))
                }
            };
        }
        match op {
            Op::Fsync { .. }
            | Op::Fdatasync { .. }
            | Op::FdFsync { .. }
            | Op::FdFdatasync { .. } => self.fsync_promise(d, op, &touched, durable).and_then(fail),
            Op::SyncWrite { path, offset, len, flag, .. } => {
                // A synchronous write is a fsync (O_SYNC) or fdatasync (O_DSYNC) of its
                // own range, as Linux runs it (`generic_write_sync`: `vfs_fsync_range`
                // over the bytes written): the range's data and a size that reaches its
                // end, nothing about the file's other dirty data; O_SYNC also the
                // inode's attributes. Its name is promised as a fsync's is (not at all,
                // unless something else made it durable).
                let id = s.id(path)?;
                if let Some(why) = self.range_promise(d, id, s, durable, (*offset, *len)) {
                    return fail(why);
                }
                let metadata = *flag == crate::op::SyncFlag::Sync;
                if let Some(why) = metadata.then(|| self.xattr_promise(d, id, s)).flatten() {
                    return fail(why);
                }
                metadata.then(|| self.meta_promise(d, id, s)).flatten().and_then(fail)
            }
            Op::Creat { path, sync: true } => {
                let id = s.id(path)?;
                (!touched(path) && !self.entry_is(path, id))
                    .then(|| self.name_desc(path, id))
                    .and_then(fail)
            }
            Op::Sync | Op::Syncfs | Op::Dsync | Op::Output => {
                self.sync_promise(d, &touched, durable).and_then(fail)
            }
            _ => None,
        }
    }

    /// What fsync or fdatasync (op `d`, by path or through a descriptor) promised that this
    /// crash state lacks, untold.
    fn fsync_promise(
        &self,
        d: usize,
        op: &Op,
        touched: &dyn Fn(&str) -> bool,
        durable: &[usize],
    ) -> Option<Why> {
        let s = self.states().get(d + 1)?;
        // fsync promises the inode's metadata, extended attributes included;
        // fdatasync only what reading the data needs.
        let metadata = matches!(op, Op::Fsync { .. } | Op::FdFsync { .. });
        let (id, path) = match op {
            Op::Fsync { path } | Op::Fdatasync { path } => (s.id(path)?, path.as_str()),
            // Through a descriptor the promise is the inode's, under the names it
            // has at the call: a rename before it moves the promise with the
            // inode. With no name left (unlinked, or an rmdir'ed directory) see
            // `unnamed_promise`.
            _ => {
                let id = self.o.h.op_ids.get(d).copied().flatten()?;
                match s.names_of(id).next() {
                    Some(path) => (id, path),
                    None => return self.unnamed_promise(d, id, metadata),
                }
            }
        };
        if s.nodes[&id].kind == NodeKind::Dir {
            return self
                .dir_promise(d, path, &touched, durable)
                .or_else(|| metadata.then(|| self.xattr_promise(d, id, s)).flatten());
        }
        if let Some(why) = self.file_promise(d, id, s, durable) {
            return Some(why);
        }
        if let Some(why) = self.alloc_promise(d, id, s) {
            return Some(why);
        }
        if let Some(why) = metadata.then(|| self.xattr_promise(d, id, s)).flatten() {
            return Some(why);
        }
        if let Some(why) = metadata.then(|| self.meta_promise(d, id, s)).flatten() {
            return Some(why);
        }
        // Under fsync-persists-name, a fsync promises every name the file has at
        // the call (its own and other hard links), unless a later op moves it.
        let names = metadata && self.w().guarantees.contains(&Guarantee::FsyncPersistsName);
        if names {
            for p in s.names_of(id) {
                if !touched(p) && !self.entry_is(p, id) {
                    return Some(self.name_desc(p, id));
                }
            }
        }
        None
    }

    /// What sync, syncfs, a dsync point or a released output (op `d`) promised that this
    /// crash state lacks, untold: every name's file, directory, attributes.
    fn sync_promise(
        &self,
        d: usize,
        touched: &dyn Fn(&str) -> bool,
        durable: &[usize],
    ) -> Option<Why> {
        let s = self.states().get(d + 1)?;
        for (p, &id) in s.names.iter().filter(|(p, _)| *p != DRAIN_FILE) {
            let n = &s.nodes[&id];
            let why = if n.kind == NodeKind::Dir {
                self.dir_promise(d, p, touched, durable)
            } else if matches!(n.kind, NodeKind::Symlink | NodeKind::Whiteout) {
                // Its name is its parent directory's promise.
                None
            } else {
                self.file_promise(d, id, s, durable).or_else(|| self.alloc_promise(d, id, s))
            };
            let why = why.or_else(|| {
                (n.kind != NodeKind::Symlink).then(|| self.xattr_promise(d, id, s)).flatten()
            });
            let why = why.or_else(|| self.meta_promise(d, id, s));
            if let Some(why) = why {
                return Some(why);
            }
        }
        None
    }

    /// What a fsync (`metadata`) or fdatasync through a descriptor promises of node `id`
    /// when no name holds it at the call (op `d`). POSIX: fsync makes the file's data and
    /// attributes durable, and a link count of 0 is one of them; the name is gone, so
    /// nothing is promised about any name, but none may come back holding the inode (a
    /// name to an inode durably counted as unlinked would resurrect a removed file: the
    /// log-replay bugs that fsync an evicted or unlinked inode did that). fdatasync
    /// promises only what reading the data needs, which for a nameless file is nothing
    /// a reader can reach. A directory removed before the fsync was empty: nothing to
    /// promise. The removal is not promised as such (no directory was synced: the old
    /// name may come back holding another inode, a reused number included), but a name
    /// holding this inode contradicts the link count of 0 the fsync made durable.
    fn unnamed_promise(&self, d: usize, id: u32, metadata: bool) -> Option<Why> {
        if !metadata || self.kind_of(id) != NodeKind::File {
            return None;
        }
        let names = self.o.h.ever_names.get(&id)?;
        for p in names {
            // A later file at that name that the file system gave the same inode number
            // is that file, not this one back.
            let reused = self.states()[d + 1..]
                .iter()
                .chain(std::iter::once(&self.o.h.final_state))
                .filter_map(|s| s.id(p))
                .any(|other| other != id && self.entry_is(p, other));
            if !reused && self.entry_is(p, id) {
                let tail = " (unlinked before the fsync through its descriptor)";
                return Some(self.still_names(p, id, tail));
            }
        }
        None
    }

    /// Names in directory `dir` as of op `d`: each whose inode was durable by then holds
    /// it, and no name it lost before the call still does.
    fn dir_promise(
        &self,
        d: usize,
        dir: &str,
        touched: &dyn Fn(&str) -> bool,
        durable: &[usize],
    ) -> Option<Why> {
        let s = &self.states()[d + 1];
        let in_dir = |p: &str| p != "/" && parent(p) == dir && p != DRAIN_FILE;
        for (p, &id) in s.names.iter().filter(|(p, _)| in_dir(p)) {
            if !touched(p) && self.inode_durable(id, d, durable) && !self.entry_is(p, id) {
                return Some(self.name_desc(p, id));
            }
        }
        for earlier in &self.states()[..=d] {
            for (p, &id) in earlier.names.iter().filter(|(p, _)| in_dir(p)) {
                // The inode now named there may have the old one's number (file systems
                // reuse a freed inode number at once: ext4 gives a file created right
                // after an unlink the unlinked one's): the entry is then the new file's.
                let reused = s.id(p).is_some_and(|now| self.entry_is(p, now));
                if s.id(p) != Some(id) && !touched(p) && !reused && self.entry_is(p, id) {
                    return Some(self.still_names(p, id, " (gone before the call)"));
                }
            }
        }
        None
    }

    /// File `id`'s size and data as of op `d`, allowing later ops' data. A later O_TRUNC
    /// of the file may legally have dropped the data (zeros, a shorter size), but the file
    /// may never show data older than what was promised.
    fn file_promise(&self, d: usize, id: u32, s: &ModelState, durable: &[usize]) -> Option<Why> {
        self.promise_over(d, id, s, durable, None)
    }

    /// What a synchronous write of `range` (offset, length) promised of file `id` as of
    /// op `d`: [`View::file_promise`] narrowed to the range, the size at least its end.
    fn range_promise(
        &self,
        d: usize,
        id: u32,
        s: &ModelState,
        durable: &[usize],
        range: (u64, u64),
    ) -> Option<Why> {
        self.promise_over(d, id, s, durable, Some(range))
    }

    /// [`View::file_promise`] over the whole file (`range` None) or over one range.
    fn promise_over(
        &self,
        d: usize,
        id: u32,
        s: &ModelState,
        durable: &[usize],
        range: Option<(u64, u64)>,
    ) -> Option<Why> {
        let later: Vec<(usize, &Op)> = self
            .w()
            .ops
            .iter()
            .enumerate()
            .skip(d + 1)
            .filter(|(j, o)| {
                o.changes_data() && self.o.h.op_ids.get(*j).copied().flatten() == Some(id)
            })
            .collect();
        // A later truncate or fallocate may cut, grow or zero what was promised.
        let truncated_later = later.iter().any(|(_, o)| o.may_cut());
        // What each later op left the file holding: a sector may show any of these (a
        // later clone, copy or shift brings data an earlier point did not promise).
        let later_contents: Vec<&Content> = later
            .iter()
            .filter_map(|(j, _)| self.states().get(j + 1)?.nodes.get(&id))
            .map(|n| &n.content)
            .collect();
        let Some((name, node)) = self.find_file(id) else {
            // Later unlinks or renames over it may remove it legally.
            let removed_later = self.w().ops[d + 1..].iter().enumerate().any(|(k, o)| {
                matches!(o, Op::Unlink { .. } | Op::Rename { .. } | Op::Rmdir { .. })
                    && self.states()[d + 1 + k].nodes.get(&id).map(|n| n.nlink)
                        != self.states()[d + 2 + k].nodes.get(&id).map(|n| n.nlink)
            });
            if removed_later || !self.name_durable(id, d, durable) {
                return None;
            }
            let names: Vec<&str> = s.names_of(id).collect();
            let story = format!(
                "{} ({}) is found under none of its names ({})",
                self.first_name(id),
                self.ino_text(id),
                names.join(", ")
            );
            let mut why = Why::new(DiscrepancyKind::LostFile, story);
            why.discrepancy.paths = names.iter().map(|p| p.to_string()).collect();
            return Some(why);
        };
        // Data an fsync promised that now reads as an error: the promise is broken, if
        // loudly. A violation, not a read-error.
        if let Some(e) = &node.read_error {
            let story = format!("reading {name} failed: {e}");
            return Some(Why::at(DiscrepancyKind::ReadError, name, story));
        }
        let want = &s.nodes[&id];
        // A range promises a size that reaches its end (more may be there: other dirty
        // data of the file, written back or not); the whole file its size exactly.
        let (first, end) = match range {
            Some((offset, len)) => (offset / SECTOR, (offset + len).min(want.size)),
            None => (0, want.size),
        };
        let short = node.size < end;
        let exact = range.is_none() && later.is_empty() && node.size != want.size;
        if !truncated_later && (short || exact) {
            let story = match range {
                Some(_) => format!("{name} has size {}, short of {end}", node.size),
                None => format!("{name} has size {}, not {}", node.size, want.size),
            };
            return Some(Why::at(DiscrepancyKind::WrongSize, name, story));
        }
        let content = node.content.as_ref()?;
        let later_ops: BTreeSet<u32> = later.iter().map(|(j, _)| *j as u32).collect();
        let sectors = end.div_ceil(SECTOR);
        let mut found = content.iter().skip(first as usize);
        let expected = want.content.iter().take(sectors as usize).enumerate().skip(first as usize);
        for (i, expect) in expected {
            let got = found.next().unwrap_or(SectorClass::Zero);
            let later_ok = matches!(got, SectorClass::Data { file, op: Some(o) } if file == id && later_ops.contains(&o))
                || (truncated_later && got == SectorClass::Zero)
                || later_contents.iter().any(|c| c.class_at(i as u64) == Some(got));
            if got != expect && !later_ok {
                return Some(self.stale_sector(id, name, i as u64 * SECTOR, got, expect));
            }
        }
        self.link_count_promise(d, id, name, node)
    }

    /// The blocks a keep-size fallocate allocated past file `id`'s end, as of op `d` (a
    /// fsync, fdatasync or sync). No reader sees them, but the file system made them
    /// part of the inode (its block count, its extents), so a fsync persists them, and
    /// fdatasync too: Linux treats an allocation as metadata needed to read the file
    /// later (ext4's fix for fdatasync after fallocate, btrfs' for prealloc extents past
    /// i_size lost at log replay, fstests generic/468 and generic/483 hold it). Judged
    /// only when no later op changes the file (a write may fill them, a truncate free
    /// them) and the size is the promised one (a wrong size is its own finding); at
    /// least the promised bytes must be allocated past the end (more is speculative
    /// preallocation or a coarser block).
    fn alloc_promise(&self, d: usize, id: u32, s: &ModelState) -> Option<Why> {
        let want = s.nodes.get(&id)?;
        let promised = want.allocated_past_eof();
        if promised == 0 {
            return None;
        }
        let changed_later = self.w().ops.iter().enumerate().skip(d + 1).any(|(j, o)| {
            o.changes_data() && self.o.h.op_ids.get(j).copied().flatten() == Some(id)
        });
        let (name, node) = self.find_file(id)?;
        let found = node.allocated_past_eof?;
        if changed_later || node.size != want.size || found >= promised {
            return None;
        }
        let story = format!(
            "{name} has {found} bytes allocated past its end ({}), not the {promised} a keep-size fallocate left",
            node.size
        );
        Some(Why::at(DiscrepancyKind::LostAllocation, name, story))
    }

    /// Sector `offset` of file `id` (found as `name`) reads `got` where `expect` was
    /// promised.
    fn stale_sector(
        &self,
        id: u32,
        name: &str,
        offset: u64,
        got: SectorClass,
        expect: SectorClass,
    ) -> Why {
        // Data a clone or copy brought from another file says which file.
        let what = match expect {
            SectorClass::Data { file, op: Some(o) } if file == id => {
                format!("the data of op {o}")
            }
            SectorClass::Data { file, op: None } if file == id => "the old data".into(),
            SectorClass::Data { file, op: Some(o) } => {
                format!("the data of op {o} (of file {file})")
            }
            SectorClass::Data { file, op: None } => format!("the old data of file {file}"),
            other => other.describe(),
        };
        let got_text = match got {
            SectorClass::Data { file, op: None } if file == id => "the old data".to_string(),
            SectorClass::Data { file, op: Some(o) } if file == id => {
                format!("the data of op {o}")
            }
            other => other.describe(),
        };
        let story = format!("{name} @{offset} is {got_text}, not {what}");
        let why = Why::at(DiscrepancyKind::StaleData, name, story);
        match expect {
            SectorClass::Data { op: Some(o), .. } => why.op(o as usize),
            _ => why,
        }
        .sector(offset, got, expect)
    }

    /// The link count of file `id` (found as `name`) against its names in the tree, when
    /// no later op adds or removes a name of it: a file the promise covers whose st_nlink
    /// differs from the names that hold it is damaged (an unlink of one name would free
    /// an inode another still names, or the inode is never freed).
    fn link_count_promise(&self, d: usize, id: u32, name: &str, node: &Node) -> Option<Why> {
        let names_change_later = self.w().ops.iter().enumerate().skip(d + 1).any(|(k, o)| {
            matches!(o, Op::Link { .. } | Op::Unlink { .. } | Op::Rename { .. })
                && self.states()[k].nodes.get(&id).map(|n| n.nlink)
                    != self.states()[k + 1].nodes.get(&id).map(|n| n.nlink)
        });
        let names = self.names_with_ino(node.ino) as u64;
        (!names_change_later && node.kind == NodeKind::File && node.nlink != names).then(|| {
            let story = format!(
                "{name} has link count {}, but {names} name(s) hold {}",
                node.nlink,
                self.ino_text(id)
            );
            Why::at(DiscrepancyKind::WrongLinkCount, name, story)
        })
    }

    /// Extended attributes of node `id` as of op `d` (fsync and sync promise them,
    /// fdatasync does not): every one the model holds has its value, and none removed
    /// before the call is back, unless a later op sets or removes the same name (its
    /// outcome is then allowed too). A node not found is the name promise's business.
    fn xattr_promise(&self, d: usize, id: u32, s: &ModelState) -> Option<Why> {
        let want = &s.nodes.get(&id)?.xattrs;
        let (name, node) = self.find_file(id)?;
        if node.read_error.is_some() {
            return None;
        }
        let later: Vec<(&str, Option<&str>)> = self
            .w()
            .ops
            .iter()
            .enumerate()
            .skip(d + 1)
            .filter(|(j, _)| self.o.h.op_ids.get(*j).copied().flatten() == Some(id))
            .filter_map(|(_, o)| match o {
                Op::Setxattr { name, value, .. } => Some((name.as_str(), Some(value.as_str()))),
                Op::Removexattr { name, .. } => Some((name.as_str(), None)),
                _ => None,
            })
            .collect();
        let names: BTreeSet<&String> = want.keys().chain(node.xattrs.keys()).collect();
        for n in names {
            let got = node.xattrs.get(n).map(String::as_str);
            let expect = want.get(n).map(String::as_str);
            if got != expect && !later.iter().any(|&(ln, lv)| ln == n && lv == got) {
                return Some(xattr_story(name, n, got, expect));
            }
        }
        None
    }

    /// The attributes (mode, owner, mtime) the workload set on node `id`, as of op `d`
    /// (fsync and sync promise them, fdatasync does not): each one the model holds is
    /// what the file shows, unless a later op sets the same attribute (or, for the
    /// mtime, changes the data) and the file shows what that op left.
    fn meta_promise(&self, d: usize, id: u32, s: &ModelState) -> Option<Why> {
        let mut want = s.nodes.get(&id)?.meta;
        if want == InodeMeta::default() {
            return None;
        }
        let (name, node) = self.find_file(id)?;
        if node.read_error.is_some() || node.meta.is_none() {
            return None;
        }
        let got = node.meta.unwrap_or_default();
        for (j, o) in self.w().ops.iter().enumerate().skip(d + 1) {
            if self.o.h.op_ids.get(j).copied().flatten() != Some(id) {
                continue;
            }
            let after = self.states().get(j + 1).and_then(|t| t.nodes.get(&id));
            let later = after.map(|n| n.meta).unwrap_or_default();
            match o {
                Op::Chmod { .. } if got.mode == later.mode => want.mode = None,
                Op::Chown { .. } if got.owner == later.owner => want.owner = None,
                Op::Utimes { .. } if got.mtime == later.mtime => want.mtime = None,
                // The clock's time, whatever it was.
                o if o.changes_data() => want.mtime = None,
                _ => {}
            }
        }
        meta_mismatch(name, &want, node, OpKind::Sync)
    }
}

/// How file `n` (found as `path`) differs from the attributes `want` the model holds
/// (only those the workload set; `kind` narrows to one attribute op's), if it does.
fn meta_mismatch(path: &str, want: &InodeMeta, n: &Node, kind: OpKind) -> Option<Why> {
    let got = n.meta.unwrap_or_default();
    let check = |k: OpKind| kind == k || !kind.is_attr_op();
    let wrong = |story: String| Some(Why::at(DiscrepancyKind::WrongAttr, path, story));
    if let (true, Some(w)) = (check(OpKind::Chmod), want.mode) {
        if got.mode != Some(w) {
            return wrong(format!("{path} has mode {:04o}, not {w:04o}", got.mode.unwrap_or(0)));
        }
    }
    if let (true, Some((u, g))) = (check(OpKind::Chown), want.owner) {
        if got.owner != Some((u, g)) {
            let (gu, gg) = got.owner.unwrap_or_default();
            return wrong(format!("{path} has owner {gu}:{gg}, not {u}:{g}"));
        }
    }
    if let (true, Some(t)) = (check(OpKind::Utimes), want.mtime) {
        if got.mtime != Some(t) {
            return wrong(format!("{path} has mtime {}, not {t}", got.mtime.unwrap_or(0)));
        }
    }
    None
}

/// "/foo has the attribute user.a=op2, not op4" and the like: what a crash state shows of
/// one extended attribute against what was expected (`None`: absent).
fn xattr_story(path: &str, name: &str, got: Option<&str>, want: Option<&str>) -> Why {
    let story = match (got, want) {
        (None, Some(v)) => format!("{path} lacks the attribute {name} (={v})"),
        (Some(g), None) => format!("{path} has the attribute {name}={g}, which was removed"),
        (Some(g), Some(v)) => format!("{path} has the attribute {name}={g}, not {v}"),
        (None, None) => format!("{path} lacks the attribute {name}"),
    };
    Why::at(DiscrepancyKind::WrongXattr, path, story)
}
