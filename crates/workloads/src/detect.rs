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

use crate::check::{CrashContext, Finding};
use crate::model::{History, ModelState};
use crate::property::Family;
use crate::snapshot::{NodeKind, SectorClass, Snapshot};
use crate::workload::{detection_scenario, DRAIN_FILE};
use crate::{Observed, SECTOR};

/// The silent inconsistencies of `snap`, first per path in path order, then link counts.
pub(crate) fn findings(
    h: &History,
    w: &crate::Workload,
    obs: &Observed,
    snap: &Snapshot,
    ctx: &CrashContext,
) -> Vec<Finding> {
    // States from the last durable persistence point on: states[k + 1] follows op k.
    let from = ctx.durable_ops.iter().max().map_or(0, |&d| d + 1).min(h.states.len());
    let mut allowed: Vec<&ModelState> = h.states[from..].iter().collect();
    allowed.push(&h.final_state);
    let mut out = Vec::new();
    let finding = |op: usize, kind: &str, what: String| {
        let scenario = detection_scenario(op).map(|s| format!(" ({s})")).unwrap_or_default();
        Finding { family: Family::Detection, op, story: format!("silent {kind}{scenario}: {what}") }
    };
    // The op that last touched a path, to name the scenario of a finding.
    let op_of = |path: &str| -> usize {
        w.ops.iter().rposition(|op| op.paths().contains(&path)).unwrap_or(0)
    };
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
            out.push(finding(op, "BD", what));
            continue;
        }
        let Some(content) = &node.content else { continue };
        let ids: BTreeSet<u32> = mine.iter().map(|(_, id)| *id).collect();
        for k in 0..content.sectors() {
            let Some(class) = content.class_at(k) else { break };
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
            out.push(finding(op, kind, what));
            break;
        }
    }
    // Link counts: a file's names in the snapshot against what it says.
    let mut names: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (path, node) in &snap.entries {
        if node.kind == NodeKind::File && node.read_error.is_none() {
            names.entry(node.ino).or_default().push(path);
        }
    }
    for paths in names.values() {
        let node = &snap.entries[paths[0]];
        if node.nlink != paths.len() as u64 {
            out.push(finding(
                op_of(paths[0]),
                "HL",
                format!(
                    "{} has link count {} but {} name(s) reach it",
                    paths.join(" and "),
                    node.nlink,
                    paths.len()
                ),
            ));
        }
    }
    out
}
