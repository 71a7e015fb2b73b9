//! Crash states of a recording with a persistent-memory region: the disk's states paired
//! with PM cuts, bounded by the sum of the two (see [`crate::pm`]).

use super::{CrashState, Epoch, StateId, Strategy};
use crate::pm::{PmCut, PmEntry, PmTrace};

/// The combined crash states of a recording with a PM region (see the module
/// documentation): the disk's states from `disk`, each with the PM persisted at its
/// crash time, then every PM cut with the disk durable at its crash time; with
/// `max_pm`, at most that many PM cuts, evenly spaced over the list (as `--max-states`
/// spreads the disk's).
pub(crate) fn combined<'a>(
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
            strategy: Strategy::PmCacheLines,
        })
    });
    let mut pm_states: Vec<CrashState> = pm_states.collect();
    if let Some(max) = max_pm.filter(|&m| m < pm_states.len()) {
        let n = pm_states.len();
        pm_states = (0..max).map(|i| pm_states[i * n / max].clone()).collect();
    }
    disk_states.chain(pm_states)
}

/// The content digest of a state on two devices: the disk overlay's `disk` digest with
/// the PM lines of `cut` (equal states are equal on both); `disk` alone without a PM half.
pub fn digest(disk: [u8; 32], pm: Option<&PmTrace>, cut: Option<&PmCut>) -> [u8; 32] {
    match (pm, cut) {
        (Some(pm), Some(cut)) => {
            let mut h = blake3::Hasher::new();
            h.update(&disk);
            h.update(&pm.digest(cut));
            *h.finalize().as_bytes()
        }
        _ => disk,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::{epochs, stream, DiskModel, Limits};
    use crate::trace::{Entry, Trace};

    #[test]
    fn disk_states_get_the_fenced_pm_and_pm_cuts_get_the_durable_disk() {
        // Disk: a write, a flush, a write. PM: a line stored and fenced before the flush,
        // another stored (never written back) after it.
        let trace = Trace::new(
            512,
            vec![Entry::write(0, vec![1; 512]), Entry::flush(), Entry::write(8, vec![2; 512])],
        );
        let ep = epochs(&trace, &DiskModel::default());
        let pm = PmTrace {
            base: vec![0; 256],
            entries: vec![
                PmEntry::Store { offset: 0, data: vec![7; 8], disk: 1 },
                PmEntry::Clwb { offset: 0, len: 8, disk: 1 },
                PmEntry::Fence { disk: 1 },
                PmEntry::Store { offset: 64, data: vec![9; 8], disk: 2 },
            ],
        };
        let disk = stream(&trace, &ep, Strategy::DEFAULT, &Limits::default());
        let all: Vec<String> =
            combined(&pm, &trace, &ep, disk, None).map(|s| s.id.to_string()).collect();
        // Disk states: epoch 0 without its write sees no PM entry yet; with it, the PM up to
        // the flush (the fence included); epoch 1 with its write sees every PM entry.
        assert!(all.contains(&"e0:-+p0".to_owned()), "{all:?}");
        assert!(all.contains(&"e0:0+p3".to_owned()), "{all:?}");
        assert!(all.contains(&"e1:0+p4".to_owned()), "{all:?}");
        // PM cuts: before the fence (disk epoch 0 in flight: none of it), and at the end
        // (epoch 1 in flight), where line 1 may or may not have persisted; line 0 is fenced.
        for id in ["e0:-+p2", "e0:-+p2:0", "e1:-+p4", "e1:-+p4:1"] {
            assert!(all.contains(&id.to_owned()), "{id} in {all:?}");
        }
        assert!(!all.iter().any(|id| id.starts_with("e1:-+p4:0")), "fenced: never pending");
        let capped: Vec<CrashState> = combined(
            &pm,
            &trace,
            &ep,
            stream(&trace, &ep, Strategy::DEFAULT, &Limits::default()),
            Some(1),
        )
        .filter(|s| s.id.applied.is_empty() && s.id.pm.as_ref().is_some_and(|c| c.pos > 0))
        .collect();
        assert!(capped.len() <= 2, "--max-states spreads the PM cuts: {capped:?}");
    }
}
