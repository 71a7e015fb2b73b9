//! What the integration tests that mount real images share: the root check and one real
//! recording turned into a [`Subject`].

use std::path::Path;
use std::sync::Arc;

use bob_core::check::Subject;
use bob_core::crash::{self, DiskModel};
use bob_core::fs::{self, Timeouts};
use bob_core::image::BaseImage;
use bob_core::record::{self, RecordRequest};
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
pub fn record_subject(dir: &Path, config: &str, property: Property, disk: DiskModel) -> Subject {
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
    })
    .expect("record");
    let trace = Arc::new(recording.trace);
    let epochs = crash::epochs(&trace, &disk);
    Subject {
        config,
        workload,
        observed: recording.observed,
        trace,
        epochs,
        spans: recording.sidecar.ops.clone(),
        schedule: None,
        base: Arc::new(BaseImage::open(&recording.base_image).expect("base")),
        disk,
    }
}
