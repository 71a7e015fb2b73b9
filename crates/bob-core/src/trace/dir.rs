//! A trace directory: the log (`trace.log`) and its sidecar (`trace.json`) side by side.
//!
//! Opening one maps the log (entries slice the mapping, see [`super::file`]); writing one
//! copies the trace's own log file when the trace still holds exactly its entries, and
//! encodes the entries otherwise. Either way the log written is byte for byte
//! [`write_log`](super::log::write_log) of the entries.

use std::path::{Path, PathBuf};

use super::log::{read_log_file, write_log_file, LogError};
use super::sidecar::{Sidecar, SidecarError};
use super::Trace;

/// A trace directory loaded into memory.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceDir {
    /// The directory it was loaded from.
    pub dir: PathBuf,
    /// The entries of `trace.log`.
    pub trace: Trace,
    /// The contents of `trace.json`.
    pub sidecar: Sidecar,
}

/// A trace directory could not be loaded or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceDirError {
    /// The log is unreadable or invalid.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The sidecar is unreadable, invalid or of another format.
    #[error(transparent)]
    Sidecar(#[from] SidecarError),
    /// The directory could not be created.
    #[error("{}: cannot create trace directory: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An op span in the sidecar points outside the log or runs backwards.
    #[error(
        "{}: op {index} spans entries {begin}..={end} but the log has {nr_entries} entries",
        path.display()
    )]
    OpOutOfRange {
        /// The sidecar file.
        path: PathBuf,
        /// The op's index.
        index: usize,
        /// Its begin entry.
        begin: usize,
        /// Its end entry.
        end: usize,
        /// Entries in the log.
        nr_entries: usize,
    },
}

impl TraceDir {
    /// File name of the dm-log-writes log inside a trace directory.
    pub const LOG_FILE: &'static str = "trace.log";
    /// File name of the JSON sidecar inside a trace directory.
    pub const SIDECAR_FILE: &'static str = "trace.json";

    /// Path of the log in `dir`.
    pub fn log_path(dir: &Path) -> PathBuf {
        dir.join(Self::LOG_FILE)
    }

    /// Path of the sidecar in `dir`.
    pub(crate) fn sidecar_path(dir: &Path) -> PathBuf {
        dir.join(Self::SIDECAR_FILE)
    }

    /// Loads both files of `dir`, checking the sidecar's format and that its op spans lie
    /// inside the log.
    pub fn open(dir: &Path) -> Result<TraceDir, TraceDirError> {
        let sidecar_path = Self::sidecar_path(dir);
        let sidecar = Sidecar::load(&sidecar_path)?;
        let trace = read_log_file(&Self::log_path(dir))?;
        check_ops(&sidecar_path, &trace, &sidecar)?;
        Ok(TraceDir { dir: dir.to_path_buf(), trace, sidecar })
    }

    /// Writes `trace` and `sidecar` into `dir` (created if missing), replacing any
    /// previous trace there. The op spans are checked first. A trace backed by a log file
    /// it still matches ([`LogFile::holds`](super::file::LogFile::holds)) is saved by
    /// copying that file, without reading a payload; any other is encoded.
    pub fn write(dir: &Path, trace: &Trace, sidecar: &Sidecar) -> Result<(), TraceDirError> {
        let sidecar_path = Self::sidecar_path(dir);
        check_ops(&sidecar_path, trace, sidecar)?;
        std::fs::create_dir_all(dir)
            .map_err(|source| TraceDirError::CreateDir { path: dir.to_path_buf(), source })?;
        let log_path = Self::log_path(dir);
        match &trace.file {
            Some(file) if file.holds(trace) => file.copy_to(&log_path)?,
            _ => write_log_file(&log_path, trace)?,
        }
        sidecar.save(&sidecar_path)?;
        Ok(())
    }
}

fn check_ops(path: &Path, trace: &Trace, sidecar: &Sidecar) -> Result<(), TraceDirError> {
    let n = trace.entries.len();
    for op in &sidecar.ops {
        if op.begin_entry > op.end_entry || op.end_entry >= n {
            return Err(TraceDirError::OpOutOfRange {
                path: path.to_path_buf(),
                index: op.index,
                begin: op.begin_entry,
                end: op.end_entry,
                nr_entries: n,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::sidecar::{BaseImageInfo, OpSpan, SIDECAR_FORMAT};
    use crate::trace::Entry;

    fn sample() -> (Trace, Sidecar) {
        let trace = Trace::new(
            512,
            vec![
                Entry::mark("op 0 begin: creat /a"),
                Entry::write(8, vec![7u8; 1024]),
                Entry::flush(),
                Entry::mark("op 0 end"),
            ],
        );
        let sidecar = Sidecar {
            format: SIDECAR_FORMAT.into(),
            tool_version: "0.1.0".into(),
            kernel: "6.18.0".into(),
            config: "ext4-ordered".into(),
            property: None,
            workload: serde_json::Value::Null,
            observed: serde_json::Value::Null,
            base_image: BaseImageInfo {
                file: "base.img".into(),
                size_bytes: 4096,
                blake3: "00".into(),
            },
            ops: vec![OpSpan { index: 0, text: "creat /a".into(), begin_entry: 0, end_entry: 3 }],
            roles: Vec::new(),
            schedule: None,
            recording: None,
            fua: None,
        };
        (trace, sidecar)
    }

    #[test]
    fn write_then_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t1");
        let (trace, sidecar) = sample();
        TraceDir::write(&dir, &trace, &sidecar).unwrap();
        assert!(dir.join("trace.log").is_file() && dir.join("trace.json").is_file());
        let td = TraceDir::open(&dir).unwrap();
        assert_eq!(td.trace, trace);
        assert_eq!(td.sidecar, sidecar);
        assert_eq!(td.dir, dir);
    }

    #[test]
    fn rejects_bad_ops_and_formats() {
        let tmp = tempfile::tempdir().unwrap();
        let (trace, mut sidecar) = sample();
        sidecar.ops[0].end_entry = 4;
        let e = TraceDir::write(tmp.path(), &trace, &sidecar).unwrap_err();
        assert!(matches!(e, TraceDirError::OpOutOfRange { .. }), "{e}");

        sidecar.ops[0].end_entry = 3;
        sidecar.format = "bob-trace/0".into();
        TraceDir::write(tmp.path(), &trace, &sidecar).unwrap();
        let e = TraceDir::open(tmp.path()).unwrap_err();
        assert!(matches!(e, TraceDirError::Sidecar(SidecarError::UnsupportedFormat { .. })), "{e}");

        let e = TraceDir::open(&tmp.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
