//! The sidecar of a finished recording.
//!
//! What was recorded, on what, and where each op's marks are in the trace.

use std::path::PathBuf;

use workloads::{Observed, Workload};

use super::{io_err, tracefs, Error, RecordRequest, Recording, SetupSource};
use crate::trace::sidecar::{BaseImageInfo, OpSpan, RoleNote, Sidecar, SIDECAR_FORMAT};
use crate::trace::{EntryKind, Trace};

/// The sidecar of a finished recording.
pub(super) fn finish(
    req: &RecordRequest<'_>,
    trace: Trace,
    observed: Observed,
    base_path: PathBuf,
    fua: Option<tracefs::FuaMarking>,
    setup: SetupSource,
) -> Result<Recording, Error> {
    let config = req.config;
    let ops = op_spans(&trace, req.workload);
    let blake3 = crate::files::file_digest(&base_path).map_err(io_err(&base_path))?;
    let sidecar = Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: crate::host::kernel_release(),
        config: config.name.into(),
        property: req.workload.property.map(|p| p.name().to_owned()),
        workload: json_value("workload", req.workload)?,
        observed: json_value("observed tree", &observed)?,
        base_image: BaseImageInfo {
            file: "base.img".into(),
            size_bytes: config.image_bytes,
            blake3,
        },
        ops,
        roles: crate::fs::roles::role_list(&trace)
            .into_iter()
            .map(|(entry, role)| RoleNote { entry, role: role.name().into() })
            .collect(),
        // The caller that chose a drain schedule for the workload names it.
        schedule: None,
        recording: None,
        fua,
    };
    Ok(Recording { trace, sidecar, observed, base_image: base_path, setup })
}

/// Where each workload op's begin and end marks are in the trace.
fn op_spans(trace: &Trace, workload: &Workload) -> Vec<OpSpan> {
    let mut spans = Vec::new();
    for (index, op) in workload.ops.iter().enumerate() {
        let find = |what: &str| {
            let text = format!("op {index} {what}: {op}");
            trace
                .entries
                .iter()
                .position(|e| e.kind() == EntryKind::Mark && e.data == text.as_bytes())
        };
        if let (Some(begin_entry), Some(end_entry)) = (find("begin"), find("end")) {
            spans.push(OpSpan { index, text: op.to_string(), begin_entry, end_entry });
        }
    }
    spans
}

/// `value` as a JSON value for the sidecar, or the error that names `what` it was.
pub(super) fn json_value<T: serde::Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value).map_err(|source| Error::Json { what, source })
}
