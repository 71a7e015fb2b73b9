//! A recording sees every flush even on a loop device whose queue says it has no
//! volatile cache (`/sys/block/loopN/queue/write_cache` = `write through`, a setting the
//! kernel keeps across bindings): the block layer would complete each flush without
//! sending it down, and the trace would have no barriers at all. bob turns the cache
//! setting on for the recording and puts back what it found when it unbinds the device.
//!
//! Mounts a real image with the real kernel on a loop device of the test's own (added
//! through /dev/loop-control far above the numbers others take, removed at the end).

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use bob_core::fs::{self, Timeouts};
use bob_core::record::{self, RecordRequest};
use bob_core::trace::EntryKind;
use workloads::Property;

const LOOP_CTL_ADD: libc::c_ulong = 0x4C80;
const LOOP_CTL_REMOVE: libc::c_ulong = 0x4C81;

/// A loop device added for this test, removed on drop.
struct OwnLoop {
    number: libc::c_int,
}

impl OwnLoop {
    fn add() -> OwnLoop {
        let ctl = File::open("/dev/loop-control").expect("/dev/loop-control");
        for number in (700 + (std::process::id() % 100) as libc::c_int)..1000 {
            // SAFETY: LOOP_CTL_ADD takes the device number and returns it.
            if unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_ADD, number) } == number {
                return OwnLoop { number };
            }
        }
        panic!("no loop device number free to add between 700 and 999");
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/loop{}", self.number))
    }

    fn write_cache(&self) -> PathBuf {
        PathBuf::from(format!("/sys/block/loop{}/queue/write_cache", self.number))
    }
}

impl Drop for OwnLoop {
    fn drop(&mut self) {
        let Ok(ctl) = File::open("/dev/loop-control") else { return };
        // The kernel finishes an unbind at the device's last close: busy for a moment.
        for _ in 0..100 {
            // SAFETY: LOOP_CTL_REMOVE takes the device number.
            if unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_REMOVE, self.number) } == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn a_recording_on_a_write_through_loop_device_still_sees_its_flushes() {
    common::require_root();
    let dev = OwnLoop::add();
    // The node appears with the device (devtmpfs); wait for it briefly.
    for _ in 0..100 {
        if dev.path().exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(dev.write_cache(), "write through").expect("set the queue to write through");

    let dir = tempfile::tempdir().unwrap();
    let config = fs::by_name("ext4-ordered").expect("config");
    let workload = workloads::workload_for(Property::FsyncDurable, &config.workload_params());
    let path = dev.path();
    let recording = record::record(&RecordRequest {
        config: &config,
        workload: &workload,
        device: Some(&path),
        work_dir: dir.path(),
        timeouts: Timeouts::default(),
        setup: None,
        recorder: record::Recorder::Fuse,
    })
    .expect("record");

    let barriers = recording
        .trace
        .entries
        .iter()
        .filter(|e| matches!(e.kind(), EntryKind::Flush | EntryKind::Write { preflush: true, .. }))
        .count();
    assert!(barriers > 0, "ext4's fsync and journal commits flush: the trace must show it");
    let setting = std::fs::read_to_string(dev.write_cache()).unwrap();
    assert_eq!(setting.trim(), "write through", "the setting found is put back at unbind");
    let path = dev.path();
    drop(dev);
    assert!(!path.exists(), "the test's own loop device is removed");
}
