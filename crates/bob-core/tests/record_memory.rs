//! The recorder's memory does not grow with what the workload writes: ext4 on bob's FUSE
//! disk under a loop device, recording as `record::record` does, while 64 MiB are written
//! and fsynced; the process's peak RSS from the start of recording to the sealed trace
//! rises by a small fraction of that.
//!
//! A test binary of its own with a single test, so that nothing else runs in the process
//! while its resident memory is measured. Mounts real images with the real kernel: root.

use std::os::unix::fs::FileExt;

use bob_core::fs::{self, Timeouts};
use bob_core::record;
use bob_core::trace::EntryKind;

/// What the workload writes.
const WRITTEN: u64 = 64 << 20;

/// A `Vm*:` line of /proc/self/status, in KiB.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(key)).expect("status line");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number")
}

#[test]
fn recording_64_mib_keeps_the_recorder_small() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test binds loop devices and mounts images: run it as root (scripts/test.sh)"
    );
    let tmp = tempfile::Builder::new().prefix("bob-memory-test-").tempdir().unwrap();
    let config = fs::by_name("ext4-ordered").expect("config");
    let mut md = record::make_and_mount(&config, None, tmp.path(), Timeouts::default())
        .expect("make and mount");
    // The workload's buffer: 1 MiB, not a byte pattern anything could shortcut.
    let chunk: Vec<u8> =
        (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    bob_core::device::mount::syncfs(&md.mnt).expect("syncfs");
    md.disk.start(&md.log_path).expect("start recording");

    // Everything from here to the sealed trace counts: the FUSE disk and its buffers
    // exist already, so the growth is what recording costs.
    let rss_at_start = status_kib("VmRSS:");
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS mark");
    for f in 0..16u64 {
        let path = md.mnt.join(format!("f{f}"));
        let file = std::fs::File::create(&path).unwrap();
        for off in (0..WRITTEN / 16).step_by(chunk.len()) {
            file.write_all_at(&chunk, off).unwrap();
        }
        file.sync_all().unwrap();
    }
    let trace = md.unmount().expect("unmount and seal");
    let peak = status_kib("VmHWM:");
    md.release().expect("release");

    let written: u64 = trace
        .entries
        .iter()
        .filter(|e| matches!(e.kind(), EntryKind::Write { .. }))
        .map(|e| e.data.len() as u64)
        .sum();
    assert!(written >= WRITTEN, "the trace holds {written} bytes of writes");
    let file = trace.file.as_ref().expect("the trace is its log file");
    assert!(file.byte_len() > WRITTEN);
    let growth_kib = peak.saturating_sub(rss_at_start);
    eprintln!(
        "recorded {} entries, {} MiB of writes, log {} MiB; peak RSS {} KiB at start, {} KiB \
         peak: +{} KiB",
        trace.entries.len(),
        written >> 20,
        file.byte_len() >> 20,
        rss_at_start,
        peak,
        growth_kib
    );
    // Holding the payloads would cost at least the 64 MiB itself (the recorder before
    // streaming also kept a second copy per sector); an eighth of it is far from either.
    assert!(
        growth_kib < (WRITTEN >> 10) / 8,
        "recording {} MiB raised the peak RSS by {growth_kib} KiB",
        WRITTEN >> 20
    );
}
