//! `txn-atomic` and `txn-durable`: Valor's transactions judged whole on a snapshot.
//!
//! The workload's ops are split into transactions (begin .. commit/abort, or unfinished
//! at the end). The files the transactions write are compared with every *candidate*:
//! the state before the first transaction with the writes of some subset of the
//! committed transactions applied, in order (an aborted or unfinished transaction is in
//! no candidate). Atomicity holds iff some candidate matches every such file (size and
//! every sector). Durability holds iff, for every transaction whose durable commit is
//! durable in the crash state ([`CrashContext::durable_ops`]), each of its writes shows
//! its own data, except where a later transaction wrote the same range.
//!
//! A transaction holds only writes (a transactional write overwrites pages the file
//! already has); ops outside transactions are not judged here.

use super::{summarize, CrashContext, DiscrepancyKind, Finding, View, Why};
use crate::model::ModelState;
use crate::op::Op;
use crate::property::{Family, Property};
use crate::SECTOR;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Commit { durable: bool },
    Abort,
    Unfinished,
}

struct Txn {
    begin: usize,
    /// The commit or abort op; the last op for an unfinished one.
    end: usize,
    how: End,
    writes: Vec<usize>,
}

impl Txn {
    fn label(&self) -> String {
        let how = match self.how {
            End::Commit { durable: false } => "committed",
            End::Commit { durable: true } => "committed durably",
            End::Abort => "aborted",
            End::Unfinished => "unfinished at the crash",
        };
        format!("the transaction of ops {}-{} ({how})", self.begin, self.end)
    }
}

fn transactions(ops: &[Op]) -> Vec<Txn> {
    let mut out: Vec<Txn> = Vec::new();
    let mut open: Option<Txn> = None;
    for (k, op) in ops.iter().enumerate() {
        match op {
            Op::TxnBegin => {
                open = Some(Txn { begin: k, end: k, how: End::Unfinished, writes: Vec::new() })
            }
            Op::TxnCommit { durable } => {
                if let Some(mut t) = open.take() {
                    (t.end, t.how) = (k, End::Commit { durable: *durable });
                    out.push(t);
                }
            }
            Op::TxnAbort => {
                if let Some(mut t) = open.take() {
                    (t.end, t.how) = (k, End::Abort);
                    out.push(t);
                }
            }
            _ if op.data_range().is_some() => {
                if let Some(t) = open.as_mut() {
                    t.writes.push(k);
                }
            }
            _ => {}
        }
    }
    if let Some(mut t) = open {
        t.end = ops.len().saturating_sub(1);
        out.push(t);
    }
    out
}

impl View<'_> {
    /// The findings of both transaction properties, each in its family: the property's
    /// own make the verdict, the other's go beside it.
    pub(super) fn txn_findings(&self, ctx: &CrashContext) -> Vec<Finding> {
        let ops = &self.w().ops;
        let txns = transactions(ops);
        let Some(first) = txns.first() else { return Vec::new() };
        let ids: Vec<u32> = {
            let mut v: Vec<u32> = txns
                .iter()
                .flat_map(|t| &t.writes)
                .filter_map(|&k| self.o.h.op_ids.get(k).copied().flatten())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        // The snapshot's files; one it cannot read is not judgeable here (read-error).
        let mut files = Vec::new();
        for &id in &ids {
            match self.find_file(id) {
                Some((_, n)) if n.read_error.is_some() => return Vec::new(),
                Some((name, n)) => match &n.content {
                    Some(c) => files.push((id, name.to_string(), n.size, c)),
                    None => return Vec::new(),
                },
                None => {
                    let why = self.not_found(id).first_op(first.begin);
                    return vec![Finding::of(Family::Atomicity, first.begin, why)];
                }
            }
        }
        let committed: Vec<&Txn> =
            txns.iter().filter(|t| matches!(t.how, End::Commit { .. })).collect();
        let base = &self.states()[first.begin];
        let matches = |subset: usize| -> bool {
            let mut s: ModelState = base.clone();
            for (i, t) in committed.iter().enumerate() {
                if subset & (1 << i) != 0 {
                    for &k in &t.writes {
                        if s.apply(&ops[k], k as u32).is_err() {
                            return false;
                        }
                    }
                }
            }
            files.iter().all(|(id, _, size, content)| {
                s.nodes.get(id).is_some_and(|m| {
                    *size == m.size
                        && content.first_diff(&m.content, m.size.div_ceil(SECTOR)).is_none()
                })
            })
        };
        // At most a handful of committed transactions in a workload: every subset.
        let n = committed.len().min(12);
        let atomic = (0..1usize << n).any(matches);
        let mut out = Vec::new();
        if !atomic {
            out.push(self.txn_atomic_story(&txns, &files));
        }
        // Durability: each durably committed transaction whose commit is durable.
        let mut durable = ctx.durable_ops.clone();
        durable.sort_unstable();
        for t in txns.iter().filter(|t| {
            t.how == End::Commit { durable: true } && durable.binary_search(&t.end).is_ok()
        }) {
            for &k in &t.writes {
                let (Some((off, len)), Some(id)) =
                    (ops[k].data_range(), self.o.h.op_ids.get(k).copied().flatten())
                else {
                    continue;
                };
                // A later committed write of the same range may replace it.
                let later = |u: &&Txn| u.begin > t.end && matches!(u.how, End::Commit { .. });
                let replaced = txns.iter().filter(later).any(|u| {
                    u.writes.iter().any(|&j| {
                        self.o.h.op_ids.get(j).copied().flatten() == Some(id)
                            && ops[j]
                                .data_range()
                                .is_some_and(|(o, l)| o < off + len && off < o + l)
                    })
                });
                if replaced {
                    continue;
                }
                if let Some(Err(why)) = self.data_effect(k, id, off, len, false) {
                    let why = why
                        .retold(|why| {
                            let label = t.label();
                            format!("{label} is not durable after its commit returned: {} (op {k}): {why}", ops[k])
                        })
                        .kind(DiscrepancyKind::TxnLost)
                        .first_op(t.end);
                    out.push(Finding::of(Family::Durability, t.end, why));
                    break;
                }
            }
        }
        // The property's own findings first.
        let own = self.w().property.map(Property::family);
        out.sort_by_key(|f| Some(f.family) != own);
        out
    }

    /// Why no candidate matches: the first transaction that left a trace it must not
    /// (aborted, unfinished), else the first that is only partly there (committed).
    fn txn_atomic_story(
        &self,
        txns: &[Txn],
        files: &[(u32, String, u64, &crate::tree::Content)],
    ) -> Finding {
        let ops = &self.w().ops;
        // Per write op of a transaction: how its range reads (classes against its stamp).
        let shown = |k: usize| -> Option<(String, bool, bool)> {
            let id = self.o.h.op_ids.get(k).copied().flatten()?;
            let (off, len) = ops[k].data_range()?;
            let (_, name, _, content) = files.iter().find(|f| f.0 == id)?;
            let classes = content.range(off / SECTOR, len / SECTOR);
            let mine = crate::stamp::SectorClass::Data { file: id, op: Some(k as u32) };
            let all = classes.len() as u64 == len / SECTOR && classes.iter().all(|&c| c == mine);
            let any = classes.contains(&mine);
            Some((format!("{name} @{off}+{len} is {}", summarize(&classes, id, k)), all, any))
        };
        // Traces of aborted and unfinished transactions first: a later transaction's
        // trace over an earlier one's pages would otherwise read as the earlier half done.
        let resolved_last = |t: &&Txn| matches!(t.how, End::Commit { .. });
        let order =
            txns.iter().filter(|t| !resolved_last(t)).chain(txns.iter().filter(resolved_last));
        for t in order {
            let seen: Vec<(usize, (String, bool, bool))> =
                t.writes.iter().filter_map(|&k| shown(k).map(|s| (k, s))).collect();
            let story = match t.how {
                End::Abort | End::Unfinished => seen.iter().find(|(_, s)| s.2).map(|(k, s)| {
                    (*k, format!("{} left a trace: {} (op {k}): {}", t.label(), ops[*k], s.0))
                }),
                End::Commit { .. } => {
                    let whole = seen.iter().filter(|(_, s)| s.1).count();
                    let partial = seen.iter().find(|(_, s)| !s.1 && s.2);
                    match partial {
                        Some((k, s)) => Some((
                            *k,
                            format!("{} is half there: {} (op {k}): {}", t.label(), ops[*k], s.0),
                        )),
                        None if whole > 0 && whole < seen.len() => {
                            let (k, s) = seen.iter().find(|(_, s)| !s.1).unwrap();
                            Some((
                                *k,
                                format!(
                                    "{} is half there: {} of its {} writes whole, but {} (op {k}): {}",
                                    t.label(),
                                    whole,
                                    seen.len(),
                                    ops[*k],
                                    s.0
                                ),
                            ))
                        }
                        None => None,
                    }
                }
            };
            if let Some((k, story)) = story {
                let mut why = Why::new(DiscrepancyKind::TxnNotAtomic, story).op(t.begin).op(k);
                why.discrepancy.paths = ops[k].paths().iter().map(|p| p.to_string()).collect();
                return Finding::of(Family::Atomicity, t.begin, why);
            }
        }
        let list: Vec<String> = files.iter().map(|f| f.1.clone()).collect();
        let story =
            format!("{} match no combination of whole committed transactions", list.join(" and "));
        let begin = txns.first().map_or(0, |t| t.begin);
        let mut why = Why::new(DiscrepancyKind::TxnNotAtomic, story).op(begin);
        why.discrepancy.paths = list;
        Finding::of(Family::Atomicity, begin, why)
    }
}
