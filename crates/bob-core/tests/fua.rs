//! FUA in kernel recordings, on the real kernel: the loop device has no FUA, so the block
//! layer sends a FUA write as write + flush; the `block_bio_queue` tracepoint shows which
//! writes were FUA, and the disk model decides whether the emulation's flush is a barrier.

mod common;

use bob_core::crash::{DiskModel, FuaModel, StateId};
use bob_core::trace::EntryKind;
use workloads::Property;

const REAL: DiskModel = DiskModel { atomic_write_unit: 4096, fua: FuaModel::Real };
const BARRIER: DiskModel = DiskModel { atomic_write_unit: 4096, fua: FuaModel::Barrier };

/// ext4's fsync commits with a PREFLUSH|FUA commit block: the recording marks it, and
/// under real FUA the flush that only emulated it closes no epoch; the fsync is durable in
/// exactly the states that hold the commit block.
#[test]
fn ext4_commit_blocks_are_fua_and_their_emulation_is_no_barrier_under_real_fua() {
    let dir = tempfile::tempdir().unwrap();
    let (mut subject, sidecar) = common::record_subject_and_sidecar(
        dir.path(),
        "ext4-ordered",
        Property::FsyncDurable,
        REAL,
    );
    let fua = sidecar.fua.expect("tracefs ran: the sidecar says what FUA it found");
    assert!(fua.skipped.is_none(), "{fua:?}");
    assert!(fua.fua_entries > 0 && fua.postflushes > 0, "jbd2 commits with FUA: {fua:?}");
    let trace = subject.trace.clone();
    let entries = &trace.entries;
    let marked = entries.iter().filter(|e| e.is_fua_postflush()).count();
    assert_eq!(marked, fua.postflushes, "the log carries the marks");

    // Every marked flush follows a FUA write with no real barrier in between.
    for (i, _) in entries.iter().enumerate().filter(|(_, e)| e.is_fua_postflush()) {
        let before = entries[..i]
            .iter()
            .rev()
            .find(|e| {
                matches!(e.kind(), EntryKind::Write { fua: true, .. })
                    || (e.kind() == EntryKind::Flush && !e.is_fua_postflush())
            })
            .expect("something before the post-flush");
        assert!(
            matches!(before.kind(), EntryKind::Write { fua: true, .. }),
            "entry {i}: an emulation flush right after a barrier, not after a FUA write"
        );
    }

    // Real FUA: no epoch ends at an emulation flush, and some FUA write stays inside its
    // epoch; barrier FUA cuts more epochs from the same trace.
    let real = subject.epochs.clone();
    assert!(real.iter().all(|e| e.end_flush.is_none_or(|f| !entries[f].is_fua_postflush())));
    let (epoch, pos) = real
        .iter()
        .find_map(|e| e.fua_writes.first().map(|&p| (e.index, p)))
        .expect("a FUA write inside an epoch under real FUA");
    subject.set_disk(BARRIER);
    assert!(subject.epochs.len() > real.len(), "{} vs {}", subject.epochs.len(), real.len());
    assert!(subject.epochs.iter().all(|e| e.fua_writes.is_empty()));
    subject.set_disk(REAL);

    // The fsync whose commit block that is: durable with the block, not without it.
    let with = StateId::whole(epoch as u32, 0..=pos);
    let without = StateId::whole(epoch as u32, 0..pos);
    assert!(with.is_legal_in(&real[epoch]) && without.is_legal_in(&real[epoch]));
    let durable_with = subject.durable_ops(&with);
    let durable_without = subject.durable_ops(&without);
    assert!(
        durable_with.len() > durable_without.len(),
        "the commit block completes a promise: with {durable_with:?}, without {durable_without:?}"
    );
    // A state that applies a write after the FUA write but not the FUA write itself was
    // cut before the FUA write completed: no disk produces it.
    if real[epoch].writes.len() > pos as usize + 1 {
        let skips = StateId::whole(epoch as u32, [pos + 1]);
        assert!(!skips.is_legal_in(&real[epoch]));
    }
}
