//! The JSON sidecar: what a dm-log-writes log cannot carry (workload, configuration,
//! base image identity, op boundaries, tool version).

use serde::{Deserialize, Serialize};

/// Sidecar format name; bumped on incompatible changes.
pub const SIDECAR_FORMAT: &str = "bob-trace/1";

/// Everything about a recorded trace besides its entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct Sidecar {
    /// Always [`SIDECAR_FORMAT`].
    pub format: String,
    /// bob's version that wrote it.
    pub tool_version: String,
    /// `uname -r` of the recording machine.
    pub kernel: String,
    /// Configuration name (`ext4-ordered`, ...).
    pub config: String,
    /// Property name the workload exercises, if it is a property workload.
    pub property: Option<String>,
    /// The workload as `workloads` serializes it (opaque to the trace module).
    pub workload: serde_json::Value,
    /// What the workload observed while it ran (inode numbers, ...), opaque here.
    pub observed: serde_json::Value,
    /// The image the trace applies to.
    pub base_image: BaseImageInfo,
    /// Where each workload op begins and ends in the log.
    pub ops: Vec<OpSpan>,
}

/// Identity of the base image a trace applies on top of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct BaseImageInfo {
    /// File name of the base image, relative to the sidecar's directory.
    pub file: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// blake3 of the whole image, lowercase hex.
    pub blake3: String,
}

/// One workload op's position in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct OpSpan {
    /// Op index in the workload.
    pub index: usize,
    /// Human-readable op (`rename /A/f /B/g`).
    pub text: String,
    /// Log entry index of the op's begin mark.
    pub begin_entry: usize,
    /// Log entry index of the op's end mark.
    pub end_entry: usize,
}
