//! The oracle's verdict on one recovered state: the one place where a snapshot, the
//! read-only fsck's complaint and the promises due become an outcome. Both ways a state
//! is checked reach it: on a mount of its own (`state`) and by an earlier state's reads
//! (`reads`).

use workloads::{CrashContext, Snapshot};

use super::{Outcome, StateCheck, Subject};

/// The oracle's verdict on a recovered snapshot, with the read-only fsck's complaint (if
/// any) as its own category when the property held.
pub(super) fn oracle_verdict(
    subject: &Subject,
    snapshot: Snapshot,
    fsck: Option<String>,
    durable_ops: Vec<usize>,
) -> StateCheck {
    let oracle = workloads::Oracle::new(&subject.workload);
    let ctx = CrashContext { durable_ops };
    let judgement = oracle.judge(&subject.observed, &snapshot, &ctx);
    let scenarios = oracle.scenario_marks(&subject.observed, &snapshot, &ctx);
    let first = judgement.findings.into_iter().next();
    let pair = first.as_ref().and_then(|f| f.pair.clone());
    let discrepancy = first.as_ref().map(|f| f.discrepancy.clone());
    // A read that failed is the file system detecting damage: its own outcome, unless
    // the oracle found a violation (a promise broken loudly is still broken). The
    // detection workloads judge such errors themselves (as detections).
    let detection =
        subject.workload.property.map(|p| p.family()) == Some(workloads::Family::Detection);
    // A design that detects damage by returning an error (NoFS) does what its paper
    // says when a read fails: that is no failure of the state (a broken promise still is).
    let detects = crate::fs::profile(&subject.config).detects_by_error;
    let read_error = (!detection && !detects)
        .then(|| {
            snapshot.entries.iter().find_map(|(p, n)| Some((p.clone(), n.read_error.clone()?)))
        })
        .flatten();
    let outcome = match (first, read_error, &fsck) {
        (Some(f), _, _) => Outcome::Violated { story: f.story },
        (None, Some((path, error)), _) => Outcome::ReadError { path, error },
        (None, None, Some(msg)) => Outcome::FsckFailed { message: msg.clone() },
        (None, None, None) => Outcome::Held,
    };
    StateCheck {
        outcome,
        snapshot: Some(snapshot),
        fsck,
        mounted: true,
        scenarios,
        pair,
        discrepancy,
        beside: judgement.beside,
        ..StateCheck::failed(Outcome::Held)
    }
}
