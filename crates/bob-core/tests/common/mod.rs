//! What the integration tests that mount real images share: the root check and one real
//! recording turned into a [`Subject`].

use std::path::Path;

use bob_core::check::Subject;
use bob_core::crash::DiskModel;
use bob_core::fs::{self, Timeouts};
use bob_core::record::{self, RecordRequest};
use bob_core::trace::sidecar::Sidecar;
use workloads::Property;

/// These tests bind loop devices and mount images.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests bind loop devices and mount images: run them as root (scripts/test.sh)"
    );
}

/// One real recording of `property`'s workload on `config` (scratch under `dir`), cut
/// into epochs under `disk`.
#[allow(dead_code)] // each test file that shares this module uses one of the two
pub fn record_subject(dir: &Path, config: &str, property: Property, disk: DiskModel) -> Subject {
    record_subject_and_sidecar(dir, config, property, disk).0
}

/// [`record_subject`] with the recording's sidecar.
#[allow(dead_code)]
pub fn record_subject_and_sidecar(
    dir: &Path,
    config: &str,
    property: Property,
    disk: DiskModel,
) -> (Subject, Sidecar) {
    require_root();
    let config = fs::by_name(config).expect("config");
    let work = dir.join("record");
    std::fs::create_dir_all(&work).unwrap();
    let workload = workloads::workload_for(property, &config.workload_params());
    let recording = record::record(&RecordRequest {
        config: &config,
        workload: &workload,
        device: None,
        work_dir: &work,
        timeouts: Timeouts::default(),
        setup: None,
        recorder: record::Recorder::Fuse,
    })
    .expect("record");
    bob_core::run::subject_of(config, workload, recording, None, disk).expect("subject")
}
