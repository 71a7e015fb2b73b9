//! The JSON sidecar: what a dm-log-writes log cannot carry (workload, configuration,
//! base image identity, op boundaries, tool version).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Sidecar format name; bumped on incompatible changes.
pub(crate) const SIDECAR_FORMAT: &str = "bob-trace/1";

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
    /// The role of every write whose recorder knew it (the research designs say what each
    /// block holds); empty for kernel traces. The same roles ride in the entries' flags
    /// (see `fs::roles`), where the permuter reads them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleNote>,
    /// The drain schedule the workload was recorded under (`sync`, `syncfs`,
    /// `writeback-commit`); absent for traces recorded before schedules and for traces
    /// of other programs (`bob record`, imports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Which recording of its schedule this trace is, when the cell recorded the schedule
    /// more than once (`bob run --recordings`): 2 and up; absent for the first (and only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<usize>,
    /// How FUA was found in a kernel recording (the `block_bio_queue` tracepoint): the
    /// writes marked FUA and the flushes marked as its emulation. Absent where no
    /// tracepoint ran, and for logs that carry FUA themselves (dm-log-writes, the research
    /// designs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fua: Option<super::fua::FuaMarking>,
}

/// What one write of the log holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct RoleNote {
    /// Log entry index of the write.
    pub entry: usize,
    /// Its role: superblock, inode, directory, data, indirect, bitmap, journal, other.
    pub role: String,
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

/// A sidecar could not be loaded or saved. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SidecarError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The sidecar file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid sidecar JSON (syntax, or a missing or mistyped field).
    #[error("{}:{line}:{column}: invalid sidecar JSON: {source}", path.display())]
    Json {
        /// The sidecar file.
        path: PathBuf,
        /// 1-based line of the error (0 if not tied to a position).
        line: usize,
        /// 1-based column of the error (0 if not tied to a position).
        column: usize,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The sidecar's `format` is not [`SIDECAR_FORMAT`].
    #[error("{}: unsupported sidecar format {found:?} (expected {SIDECAR_FORMAT:?})", path.display())]
    UnsupportedFormat {
        /// The sidecar file.
        path: PathBuf,
        /// The `format` value found.
        found: String,
    },
}

impl Sidecar {
    /// Loads the sidecar at `path` and checks that its `format` is [`SIDECAR_FORMAT`].
    pub fn load(path: &Path) -> Result<Sidecar, SidecarError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SidecarError::Io { path: path.to_path_buf(), source })?;
        let sidecar: Sidecar =
            serde_json::from_str(&text).map_err(|source| SidecarError::Json {
                path: path.to_path_buf(),
                line: source.line(),
                column: source.column(),
                source,
            })?;
        if sidecar.format != SIDECAR_FORMAT {
            return Err(SidecarError::UnsupportedFormat {
                path: path.to_path_buf(),
                found: sidecar.format,
            });
        }
        Ok(sidecar)
    }

    /// Saves the sidecar to `path` as pretty-printed JSON with a trailing newline.
    pub fn save(&self, path: &Path) -> Result<(), SidecarError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|source| SidecarError::Json {
            path: path.to_path_buf(),
            line: 0,
            column: 0,
            source,
        })?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(|source| SidecarError::Io { path: path.to_path_buf(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sidecar {
        Sidecar {
            format: SIDECAR_FORMAT.to_string(),
            tool_version: "0.1.0".into(),
            kernel: "6.18.0".into(),
            config: "ext4-ordered".into(),
            property: Some("rename-atomic".into()),
            workload: serde_json::json!({"ops": ["creat /a", "rename /a /b"]}),
            observed: serde_json::json!({"ino": {"/a": 12}}),
            base_image: BaseImageInfo {
                file: "base.img".into(),
                size_bytes: 1 << 26,
                blake3: "ab".repeat(32),
            },
            ops: vec![OpSpan { index: 0, text: "creat /a".into(), begin_entry: 0, end_entry: 3 }],
            roles: vec![RoleNote { entry: 2, role: "inode".into() }],
            schedule: Some("syncfs".into()),
            recording: None,
            fua: None,
        }
    }

    #[test]
    fn save_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        let s = sample();
        s.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\n  \"format\": \"bob-trace/1\""), "pretty JSON: {text}");
        assert_eq!(Sidecar::load(&path).unwrap(), s);
    }

    #[test]
    fn errors_name_path_and_position() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();

        let missing = dir.join("missing.json");
        let e = Sidecar::load(&missing).unwrap_err();
        assert!(matches!(e, SidecarError::Io { .. }));
        assert!(e.to_string().contains("missing.json"), "{e}");

        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\n  \"format\": \"bob-trace/1\",\n  oops\n}").unwrap();
        let e = Sidecar::load(&bad).unwrap_err();
        match &e {
            SidecarError::Json { line, column, .. } => assert_eq!((*line, *column), (3, 3)),
            other => panic!("unexpected {other:?}"),
        }
        assert!(e.to_string().starts_with(&format!("{}:3:3: ", bad.display())), "{e}");

        let wrong = dir.join("wrong.json");
        let mut s = sample();
        s.format = "bob-trace/99".into();
        s.save(&wrong).unwrap();
        let e = Sidecar::load(&wrong).unwrap_err();
        assert!(matches!(e, SidecarError::UnsupportedFormat { .. }), "{e}");
        assert!(e.to_string().contains("bob-trace/99"), "{e}");
    }
}
