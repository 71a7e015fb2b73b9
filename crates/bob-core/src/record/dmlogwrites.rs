//! The live dm-log-writes backend: build the kernel's `log-writes` target over a data
//! device and a log device with dmsetup, insert marks with `dmsetup message`, tear the
//! target down, then read the log device as a dm-log-writes log.
//!
//! The dmsetup command lines are built by [`DmLogWrites`] as argv vectors (the same lines
//! xfstests' `common/dmlogwrites` runs), so they are unit-tested without running them;
//! [`DmTarget`] runs them and removes the target on every exit path (drop). Where the
//! kernel has no device-mapper, [`super::dm_log_writes_available`] says so before any of
//! this runs.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::device::cmd;
use crate::trace::log::read_log;
use crate::trace::Trace;

/// dm-log-writes backend errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel cannot offer the target.
    #[error("{0}")]
    Unavailable(String),
    /// A device given is not usable.
    #[error("{path}: {reason}")]
    BadDevice {
        /// The device.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// dmsetup failed.
    #[error("{command}: {line}")]
    Dmsetup {
        /// The command line.
        command: String,
        /// Its last line of output.
        line: String,
    },
    /// dmsetup could not be run.
    #[error(transparent)]
    Cmd(#[from] cmd::CmdError),
    /// The log device does not hold a readable log.
    #[error(transparent)]
    Log(#[from] crate::trace::log::LogError),
    /// I/O on a device.
    #[error("{path}: {source}")]
    Io {
        /// The device.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The dmsetup command lines of one dm-log-writes target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DmLogWrites {
    /// Target name (`/dev/mapper/<name>`).
    pub name: String,
    /// The data device the file system is written to.
    pub data_dev: PathBuf,
    /// The device the log is written to.
    pub log_dev: PathBuf,
    /// Size of the data device in 512-byte sectors.
    pub sectors: u64,
}

impl DmLogWrites {
    /// The target's table line: `0 <sectors> log-writes <dev> <logdev>`.
    pub fn table(&self) -> String {
        format!(
            "0 {} log-writes {} {}",
            self.sectors,
            self.data_dev.display(),
            self.log_dev.display()
        )
    }
    /// `dmsetup create <name> --table "<table>"`.
    pub fn create(&self) -> Vec<String> {
        vec!["dmsetup".into(), "create".into(), self.name.clone(), "--table".into(), self.table()]
    }
    /// `dmsetup message <name> 0 mark <text>`: the target logs a MARK entry.
    pub fn mark(&self, text: &str) -> Vec<String> {
        vec![
            "dmsetup".into(),
            "message".into(),
            self.name.clone(),
            "0".into(),
            "mark".into(),
            text.into(),
        ]
    }
    /// `dmsetup remove <name>`: the target logs its end mark and writes the super block.
    pub fn remove(&self) -> Vec<String> {
        vec!["dmsetup".into(), "remove".into(), self.name.clone()]
    }
    /// The mapped device the file system is made on.
    pub fn mapped_device(&self) -> PathBuf {
        Path::new("/dev/mapper").join(&self.name)
    }
}

/// Size of a block device (or file) in 512-byte sectors.
pub fn device_sectors(path: &Path) -> Result<u64, Error> {
    use std::io::{Seek, SeekFrom};
    let mut f =
        std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    let len =
        f.seek(SeekFrom::End(0)).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    Ok(len / 512)
}

fn run_argv(argv: &[String], timeout: Duration) -> Result<(), Error> {
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let out = cmd::run(&argv[0], &args, timeout)?;
    if out.code != Some(0) {
        return Err(Error::Dmsetup { command: argv.join(" "), line: out.last_line() });
    }
    Ok(())
}

/// A live dm-log-writes target; removed on drop if [`DmTarget::finish`] was not called.
pub struct DmTarget {
    lines: DmLogWrites,
    removed: bool,
}

const DMSETUP_TIMEOUT: Duration = Duration::from_secs(60);

impl DmTarget {
    /// Creates the target named `name` over `data_dev`, logging to `log_dev`. Both must be
    /// block devices; the log device's first sector is zeroed first so that a log left
    /// there by an earlier run is never mistaken for this one.
    pub fn create(name: &str, data_dev: &Path, log_dev: &Path) -> Result<DmTarget, Error> {
        super::dm_log_writes_available().map_err(Error::Unavailable)?;
        for dev in [data_dev, log_dev] {
            let meta = std::fs::metadata(dev)
                .map_err(|source| Error::Io { path: dev.to_owned(), source })?;
            if !meta.file_type().is_block_device() {
                return Err(Error::BadDevice {
                    path: dev.to_owned(),
                    reason: "not a block device".into(),
                });
            }
        }
        if data_dev == log_dev {
            return Err(Error::BadDevice {
                path: log_dev.to_owned(),
                reason: "the log device must differ from the data device".into(),
            });
        }
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(log_dev)
                .map_err(|source| Error::Io { path: log_dev.to_owned(), source })?;
            f.write_all_at(&[0u8; 4096], 0)
                .and_then(|()| f.sync_all())
                .map_err(|source| Error::Io { path: log_dev.to_owned(), source })?;
        }
        let lines = DmLogWrites {
            name: name.to_owned(),
            data_dev: data_dev.to_owned(),
            log_dev: log_dev.to_owned(),
            sectors: device_sectors(data_dev)?,
        };
        run_argv(&lines.create(), DMSETUP_TIMEOUT)?;
        Ok(DmTarget { lines, removed: false })
    }

    /// The mapped device to make and mount the file system on.
    pub fn device(&self) -> PathBuf {
        self.lines.mapped_device()
    }

    /// Inserts a mark into the log.
    pub fn mark(&self, text: &str) -> Result<(), Error> {
        run_argv(&self.lines.mark(text), DMSETUP_TIMEOUT)
    }

    /// Removes the target and reads the log it wrote.
    pub fn finish(mut self) -> Result<Trace, Error> {
        run_argv(&self.lines.remove(), DMSETUP_TIMEOUT)?;
        self.removed = true;
        let f = std::fs::File::open(&self.lines.log_dev)
            .map_err(|source| Error::Io { path: self.lines.log_dev.clone(), source })?;
        Ok(read_log(std::io::BufReader::new(f))?)
    }
}

impl Drop for DmTarget {
    fn drop(&mut self) {
        if !self.removed {
            let _ = run_argv(&self.lines.remove(), DMSETUP_TIMEOUT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DmLogWrites {
        DmLogWrites {
            name: "bob-log-1234".into(),
            data_dev: "/dev/loop3".into(),
            log_dev: "/dev/loop4".into(),
            sectors: 262_144,
        }
    }

    #[test]
    fn table_and_create_line_match_xfstests() {
        let d = sample();
        assert_eq!(d.table(), "0 262144 log-writes /dev/loop3 /dev/loop4");
        assert_eq!(
            d.create(),
            [
                "dmsetup",
                "create",
                "bob-log-1234",
                "--table",
                "0 262144 log-writes /dev/loop3 /dev/loop4"
            ]
        );
        assert_eq!(d.mapped_device(), Path::new("/dev/mapper/bob-log-1234"));
    }

    #[test]
    fn mark_is_one_argument_even_with_spaces() {
        assert_eq!(
            sample().mark("op 3 end: rename /a /b"),
            ["dmsetup", "message", "bob-log-1234", "0", "mark", "op 3 end: rename /a /b"]
        );
    }

    #[test]
    fn teardown_removes_the_target() {
        assert_eq!(sample().remove(), ["dmsetup", "remove", "bob-log-1234"]);
    }

    #[test]
    fn sectors_of_a_file_count_512_byte_units() {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().set_len(1 << 20).unwrap();
        assert_eq!(device_sectors(f.path()).unwrap(), 2048);
    }

    #[test]
    fn create_says_why_where_device_mapper_is_missing() {
        if Path::new("/dev/mapper/control").exists() {
            return;
        }
        let Err(e) = DmTarget::create("bob-test", Path::new("/dev/loop0"), Path::new("/dev/loop1"))
        else {
            panic!("created a target without device-mapper");
        };
        assert!(e.to_string().contains("device-mapper is not available"), "{e}");
    }
}
