//! "Detects its own inconsistency": after recovery, every name that lists, every inode it
//! stats to and every sector it reads must be what some model state allows (any state from
//! the last durable point to the end), or the access must fail. Failed accesses (a read or
//! stat error in the snapshot) are detections; silently wrong results are violations,
//! named with the NoFS thesis' kinds:
//!
//! - BD: a name that lists but no allowed state has, or that names the wrong kind or
//!   another file's inode;
//! - HL: a file whose link count disagrees with the names that reach it;
//! - GD: content no allowed state has (zeros where data was written, garbage, stale data);
//! - TP: content that is another file's data (two files share a block).
//!
//! OI and OB (orphan inodes and blocks) are invisible to accesses; the read-only fsck
//! reports them. Each path is judged on its own, since no design makes a multi-block
//! operation atomic.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{CrashContext, DiscrepancyKind, Finding, Why};
use crate::model::{History, ModelState};
use crate::property::Family;
use crate::stamp::SectorClass;
use crate::tree::{NodeKind, Observed, Snapshot};
use crate::workload::{detection_scenario, DETECTION_SCENARIOS, DRAIN_FILE};
use crate::SECTOR;

/// What one crash state did to one scenario of the reliability table: the silent kinds
/// found on the paths its ops touched, and how many accesses to them returned an error
/// (the file system noticed and refused).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioMark {
    /// The scenario's name (a [`DETECTION_SCENARIOS`] entry).
    pub scenario: String,
    /// Thesis kinds returned silently, sorted, distinct.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent: Vec<String>,
    /// Accesses (stat, read, readdir) on the scenario's paths that returned an error.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: usize,
    /// The first silent result, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One mark per scenario of [`DETECTION_SCENARIOS`], in the table's order.
pub(crate) fn scenario_marks(
    h: &History,
    w: &crate::Workload,
    obs: &Observed,
    snap: &Snapshot,
    ctx: &CrashContext,
) -> Vec<ScenarioMark> {
    let mut marks: Vec<ScenarioMark> = DETECTION_SCENARIOS
        .iter()
        .map(|(name, _, _)| ScenarioMark { scenario: name.to_string(), ..Default::default() })
        .collect();
    let index_of = |op: usize| -> Option<usize> {
        let name = detection_scenario(op)?;
        DETECTION_SCENARIOS.iter().position(|(n, _, _)| *n == name)
    };
    for f in silent(h, w, obs, snap, ctx) {
        if let Some(i) = index_of(f.op) {
            marks[i].silent.push(f.kind.to_string());
            marks[i].story.get_or_insert_with(|| format!("silent {}: {}", f.kind, f.why.story));
        }
    }
    for (path, node) in &snap.entries {
        if node.read_error.is_some() && path != DRAIN_FILE {
            if let Some(i) = index_of(op_of(w, path)) {
                marks[i].errors += 1;
            }
        }
    }
    for m in &mut marks {
        m.silent.sort();
        m.silent.dedup();
    }
    marks
}

/// The op that last touched a path, to name the scenario of a finding; `usize::MAX` for
/// a path only the setup made (it belongs to no scenario).
fn op_of(w: &crate::Workload, path: &str) -> usize {
    w.ops.iter().rposition(|op| op.paths().contains(&path)).unwrap_or(usize::MAX)
}

/// A silent result: the op whose paths it is on, the thesis kind, what was read (`why`:
/// in words and typed).
struct Silent {
    op: usize,
    kind: &'static str,
    why: Why,
}

/// The silent inconsistencies of `snap`, first per path in path order, then link counts.
pub(crate) fn findings(
    h: &History,
    w: &crate::Workload,
    obs: &Observed,
    snap: &Snapshot,
    ctx: &CrashContext,
) -> Vec<Finding> {
    silent(h, w, obs, snap, ctx)
        .into_iter()
        .map(|f| {
            let scenario = detection_scenario(f.op).map(|s| format!(" ({s})")).unwrap_or_default();
            // A path only the setup made is about no op; op 0 as before.
            let op = if f.op == usize::MAX { 0 } else { f.op };
            let why = f.why.retold(|what| format!("silent {}{scenario}: {what}", f.kind)).op(op);
            Finding::of(Family::Detection, op, why)
        })
        .collect()
}

fn silent(
    h: &History,
    w: &crate::Workload,
    obs: &Observed,
    snap: &Snapshot,
    ctx: &CrashContext,
) -> Vec<Silent> {
    // States from the last durable persistence point on: states[k + 1] follows op k.
    let from = ctx.durable_ops.iter().max().map_or(0, |&d| d + 1).min(h.states.len());
    let mut allowed: Vec<&ModelState> = h.states[from..].iter().collect();
    allowed.push(&h.final_state);
    let mut out = Vec::new();
    let finding = |op: usize, kind: &'static str, discrepancy, path: &str, what: String| Silent {
        op,
        kind,
        why: Why::at(discrepancy, path, what),
    };
    let op_of = |path: &str| op_of(w, path);
    for (path, node) in &snap.entries {
        if path == "/" || path == DRAIN_FILE || node.read_error.is_some() {
            continue;
        }
        if node.kind == NodeKind::Other {
            continue;
        }
        let op = op_of(path);
        let cands: Vec<(&ModelState, u32)> =
            allowed.iter().filter_map(|s| Some((*s, *s.names.get(path)?))).collect();
        if cands.is_empty() {
            out.push(finding(
                op,
                "BD",
                DiscrepancyKind::StaleName,
                path,
                format!(
                    "{path} lists (inode {}) but no state since the last durable point has it",
                    node.ino
                ),
            ));
            continue;
        }
        let same_kind: Vec<(&ModelState, u32)> =
            cands.iter().copied().filter(|(s, id)| s.nodes[id].kind == node.kind).collect();
        if same_kind.is_empty() {
            out.push(finding(
                op,
                "BD",
                DiscrepancyKind::WrongKind,
                path,
                format!("{path} lists as a {:?}, which no state has", node.kind),
            ));
            continue;
        }
        if node.kind != NodeKind::File {
            continue;
        }
        let mine: Vec<(&ModelState, u32)> = same_kind
            .iter()
            .copied()
            .filter(|(_, id)| obs.ino(*id).is_none_or(|i| i == node.ino))
            .collect();
        if mine.is_empty() {
            let other = obs.inos.iter().find(|(_, &i)| i == node.ino).map(|(id, _)| *id);
            let what = match other {
                Some(o) => format!("{path} names inode {}, which is model file {o}'s", node.ino),
                None => {
                    format!("{path} names inode {}, which no file of the workload has", node.ino)
                }
            };
            out.push(finding(op, "BD", DiscrepancyKind::WrongInode, path, what));
            continue;
        }
        out.extend(silent_content(op, path, node, &mine));
    }
    out.extend(silent_link_counts(w, snap));
    out
}

/// The first sector of file `path` (`node`) that none of the model files it may be
/// (`mine`: a state and its node) holds there, as TP (another file's data) or GD.
fn silent_content(
    op: usize,
    path: &str,
    node: &crate::tree::Node,
    mine: &[(&ModelState, u32)],
) -> Option<Silent> {
    let content = node.content.as_ref()?;
    let ids: BTreeSet<u32> = mine.iter().map(|(_, id)| *id).collect();
    for k in 0..content.sectors() {
        let class = content.class_at(k)?;
        let ok = mine.iter().any(|(s, id)| s.nodes[id].content.class_at(k) == Some(class));
        if ok {
            continue;
        }
        let (kind, what) = match class {
            SectorClass::Data { file, .. } if !ids.contains(&file) => (
                "TP",
                format!(
                    "{path} reads file {file}'s data at byte {} (two files share a block)",
                    k * SECTOR
                ),
            ),
            c => (
                "GD",
                format!(
                    "{path} reads {} at byte {}, which no state has there",
                    c.describe(),
                    k * SECTOR
                ),
            ),
        };
        let expected = mine
            .iter()
            .find_map(|(s, id)| s.nodes[id].content.class_at(k))
            .unwrap_or(SectorClass::Zero);
        let why = Why::at(DiscrepancyKind::StaleData, path, what);
        return Some(Silent { op, kind, why: why.sector(k * SECTOR, class, expected) });
    }
    None
}

/// Link counts: each file's names in the snapshot against what it says (HL).
fn silent_link_counts(w: &crate::Workload, snap: &Snapshot) -> Vec<Silent> {
    let mut out = Vec::new();
    let mut names: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (path, node) in &snap.entries {
        if node.kind == NodeKind::File && node.read_error.is_none() {
            names.entry(node.ino).or_default().push(path);
        }
    }
    for paths in names.values() {
        let node = &snap.entries[paths[0]];
        if node.nlink != paths.len() as u64 {
            let story = format!(
                "{} has link count {} but {} name(s) reach it",
                paths.join(" and "),
                node.nlink,
                paths.len()
            );
            let mut why = Why::new(DiscrepancyKind::WrongLinkCount, story);
            why.discrepancy.paths = paths.iter().map(|p| p.to_string()).collect();
            out.push(Silent { op: op_of(w, paths[0]), kind: "HL", why });
        }
    }
    out
}
