//! Crash states of a recording with a persistent-memory region: the disk's states paired
//! with PM cuts, bounded by the sum of the two (see [`crate::pm`]).

use super::{CrashState, Epoch, StateId, Strategy};
use crate::pm::{PmCut, PmEntry, PmTrace};

/// The combined crash states of a recording with a PM region (see the module
/// documentation): the disk's states from `disk`, each with the PM persisted at its
/// crash time, then every PM cut with the disk durable at its crash time; with
/// `max_pm`, at most that many PM cuts, evenly spaced over the list (as `--max-states`
/// spreads the disk's).
pub fn combined<'a>(
    pm: &'a PmTrace,
    trace: &'a crate::trace::Trace,
    epochs: &'a [Epoch],
    disk: impl Iterator<Item = CrashState> + 'a,
    max_pm: Option<usize>,
) -> impl Iterator<Item = CrashState> + 'a {
    let disk_states = disk.map(move |mut state| {
        // The crash is right after the last write the state applies (or its epoch's
        // start), before the next disk entry: the PM made before that entry, fenced only.
        let next = epochs
            .get(state.id.epoch as usize)
            .map(|e| match state.id.applied.last() {
                Some(a) => e.writes.get(a.write as usize).map_or(e.start_entry, |&w| w + 1),
                None => e.start_entry,
            })
            .unwrap_or(trace.entries.len());
        state.id.pm = Some(PmCut {
            pos: pm.position_before_disk(next as u64),
            lines: Vec::new(),
            torn: None,
        });
        state
    });
    let pm_states = pm.crash_points().into_iter().flat_map(move |pos| {
        let disk_at = pm.entries.get(pos).map_or(trace.entries.len() as u64, PmEntry::disk);
        // The epoch in flight at that disk position: the last one starting at or before
        // it whose closing barrier is not yet behind it; none of its writes persisted.
        let epoch = epochs
            .iter()
            .position(|e| {
                e.end_flush.is_none_or(|b| b as u64 >= disk_at) && e.start_entry as u64 <= disk_at
            })
            .unwrap_or_else(|| epochs.iter().filter(|e| (e.start_entry as u64) <= disk_at).count());
        pm.cuts_at(pos).into_iter().map(move |cut| CrashState {
            id: StateId { epoch: epoch as u32, applied: Vec::new(), pm: Some(cut) },
            strategy: Strategy::PersistencePoints,
        })
    });
    let mut pm_states: Vec<CrashState> = pm_states.collect();
    if let Some(max) = max_pm.filter(|&m| m < pm_states.len()) {
        let n = pm_states.len();
        pm_states = (0..max).map(|i| pm_states[i * n / max].clone()).collect();
    }
    disk_states.chain(pm_states)
}
