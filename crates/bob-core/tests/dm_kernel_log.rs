//! A log the kernel's dm-log-writes target wrote (Linux 6.12, plain dmsetup, no bob; see
//! fixtures/dm-log-writes/README.md) reads as the kernel logged it, and bob's readings of
//! it hold: device-mapper's split of a preflush FUA write is one flush and one FUA write,
//! plain writes wait for the next flush, marks keep their spaces, and the crash model
//! treats FUA as real FUA says.

use std::path::{Path, PathBuf};
use std::process::Command;

use bob_core::crash::{self, DiskModel, FuaModel, Limits, Strategy};
use bob_core::output::TraceSummary;
use bob_core::record::dmlogwrites::{drop_end_mark, END_MARK};
use bob_core::trace::log::read_log;
use bob_core::trace::{flags, EntryKind, Trace};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/dm-log-writes").join(name)
}

fn kernel_log() -> Trace {
    let gz = fixture("ext4-kernel.log.gz");
    let out = Command::new("gzip").arg("-dc").arg(&gz).output().expect("gzip runs");
    assert!(out.status.success(), "gzip -dc {}", gz.display());
    assert_eq!(out.stdout.len(), 393 * 512, "the fixture is the log's 393 used sectors");
    read_log(std::io::Cursor::new(out.stdout)).expect("the kernel's log reads")
}

fn marks(trace: &Trace) -> Vec<String> {
    trace.entries.iter().filter_map(|e| e.mark_text()).collect()
}

#[test]
fn the_kernel_log_reads_with_its_marks_whole() {
    let trace = kernel_log();
    assert_eq!(trace.sector_size, 512);
    assert_eq!(trace.entries.len(), 48, "the super block's nr_entries after the end mark");
    assert_eq!(
        marks(&trace),
        [
            "op 0 begin: append /A/log 4096@40960",
            "op 0 end: append /A/log 4096@40960",
            "op 1 begin: fsync /A/log",
            "op 1 end: fsync /A/log",
            END_MARK,
        ]
    );
    let mut trimmed = trace.clone();
    drop_end_mark(&mut trimmed);
    assert_eq!(trimmed.entries.len(), 47);
    assert_eq!(trimmed.entries[..], trace.entries[..47]);
}

/// dm core splits a `REQ_PREFLUSH | REQ_FUA` write into an empty flush (which keeps the
/// bio's FUA and META flags and its sector) and the write with FUA alone; the target
/// logs both. bob reads the first as a flush, the second as a FUA write, and counts FUA
/// writes, not entries with the FUA bit.
#[test]
fn a_preflush_fua_write_is_a_flush_then_a_fua_write() {
    let trace = kernel_log();
    let split: Vec<usize> = (0..trace.entries.len())
        .filter(|&i| {
            let e = &trace.entries[i];
            e.nr_sectors == 0 && e.flags == flags::FLUSH | flags::FUA | flags::METADATA
        })
        .collect();
    assert_eq!(split, [12, 30, 44], "jbd2's two commits and the unmount's");
    for &i in &split {
        assert_eq!(trace.entries[i].kind(), EntryKind::Flush);
        let next = &trace.entries[i + 1];
        assert_eq!(next.kind(), EntryKind::Write { preflush: false, fua: true });
        assert_eq!(next.sector, trace.entries[i].sector, "the flush carries the write's sector");
    }
    // No write carries a preflush of its own, and no flush is bob's FUA emulation. The
    // split flushes keep METADATA too, which the summary does not count as writes.
    assert!(trace
        .entries
        .iter()
        .all(|e| e.kind() != EntryKind::Write { preflush: true, fua: true }));
    assert!(trace.entries.iter().all(|e| !e.is_fua_postflush()));
    let s = TraceSummary::of(&trace);
    assert_eq!((s.writes, s.flushes, s.fua, s.marks, s.metadata), (34, 9, 7, 5, 31));
}

/// The target logs a plain write only when a flush covers it: the append op 0 wrote (the
/// one data write outside the setup's, sector 266320) is in op 1's stretch, after its
/// begin mark; no plain write lies between op 0's marks.
#[test]
fn plain_writes_wait_for_the_next_flush() {
    let trace = kernel_log();
    let at = |text: &str| trace.entries.iter().position(|e| e.mark_text().as_deref() == Some(text));
    let op0 = at("op 0 begin: append /A/log 4096@40960").unwrap();
    let op1 = at("op 1 begin: fsync /A/log").unwrap();
    let op1_end = at("op 1 end: fsync /A/log").unwrap();
    assert_eq!(op1, op0 + 2, "nothing logged while op 0 ran");
    let append = trace.entries.iter().position(|e| e.sector == 266_320 && e.nr_sectors == 8);
    let append = append.expect("op 0's data write");
    assert!(op1 < append && append < op1_end);
    // Logged at the flush dm split from the commit block's preflush write.
    let flush = (append..op1_end).find(|&i| trace.entries[i].kind() == EntryKind::Flush);
    assert!(flush.is_some_and(|f| trace.entries[f + 1].flags & flags::FUA != 0));
    // Bios, not merged requests: the setup's 40 KiB file is one 80-sector write.
    assert_eq!((trace.entries[1].sector, trace.entries[1].nr_sectors), (266_240, 80));
}

/// Real FUA: a FUA write is durable alone and closes no epoch; as a barrier (write +
/// flush) each FUA write that is not last in its epoch closes one more.
#[test]
fn fua_writes_close_epochs_only_under_the_barrier_model() {
    let trace = kernel_log();
    let real = crash::epochs(&trace, &DiskModel::default());
    let barrier =
        crash::epochs(&trace, &DiskModel { fua: FuaModel::Barrier, ..DiskModel::default() });
    let fua_inside: usize = real.iter().map(|e| e.fua_writes.len()).sum();
    assert_eq!(fua_inside, 7, "every FUA write stays inside its epoch");
    assert!(barrier.iter().all(|e| e.fua_writes.is_empty()));
    assert!(barrier.len() > real.len(), "{} vs {}", barrier.len(), real.len());
    // The states bob explores of it (bob check in the guest explored as many, of the
    // import and of bob's own dm-log-writes recording of the same command alike).
    let states = crash::stream(&trace, &real, Strategy::DEFAULT, &Limits::default()).count();
    assert_eq!(states, 85);
}
