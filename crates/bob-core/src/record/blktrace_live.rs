//! Live blktrace as an annotation source (`--annotate blktrace`): runs `blktrace -d DEV -o -`
//! while the workload runs and turns its binary stream into block requests with the same
//! parser `bob import --blktrace` uses. blktrace needs debugfs and relay files; where the
//! kernel cannot give them (this project's CI machine among them) it exits at once, and
//! bob says so in one line and points to tracefs, which carries the same events.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Error;
use crate::device::cmd;
use crate::trace::blktrace::{read_events, requests_from_events, BlockRequest};

/// A running blktrace of one device.
pub(crate) struct BlktraceSession {
    child: cmd::Background,
    reader: Option<JoinHandle<Vec<u8>>>,
    dev: PathBuf,
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable { config: "--annotate blktrace".into(), reason }
}

/// How long blktrace gets to fail at start (it fails within milliseconds when debugfs or
/// relay files are missing) before bob takes it as running.
const START_GRACE: Duration = Duration::from_millis(300);

impl BlktraceSession {
    /// Starts tracing `dev`.
    pub fn start(dev: &Path) -> Result<BlktraceSession, Error> {
        if !cmd::available("blktrace") {
            return Err(unavailable(
                "blktrace not found (Debian: apt-get install blktrace); or use --annotate tracefs"
                    .into(),
            ));
        }
        let mut child = cmd::Cmd::new("blktrace", cmd::UNBOUNDED)
            .args(&[OsStr::new("-d"), dev.as_os_str(), OsStr::new("-o"), OsStr::new("-")])
            .spawn_piped()
            .map_err(|e| unavailable(format!("cannot start blktrace: {e}")))?;
        let mut stdout = child.take_stdout();
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(out) = stdout.as_mut() {
                let _ = out.read_to_end(&mut buf);
            }
            buf
        });
        let started = Instant::now();
        while started.elapsed() < START_GRACE {
            if child.try_wait().is_some() {
                let mut err = String::new();
                if let Some(mut e) = child.take_stderr() {
                    let _ = e.read_to_string(&mut err);
                }
                let _ = reader.join();
                let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                return Err(unavailable(format!(
                    "blktrace cannot trace {} on this kernel ({}); use --annotate tracefs, \
                     which carries the same block events",
                    dev.display(),
                    line.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(BlktraceSession { child, reader: Some(reader), dev: dev.to_owned() })
    }

    /// Stops tracing (SIGINT, as a person would) and returns the paired requests.
    pub(crate) fn stop(mut self) -> Result<Vec<BlockRequest>, Error> {
        self.interrupt();
        let bytes = self.reader.take().map(|r| r.join().unwrap_or_default()).unwrap_or_default();
        let source = PathBuf::from(format!("blktrace -d {} -o -", self.dev.display()));
        let events = read_events(std::io::Cursor::new(bytes), &source)
            .map_err(|e| unavailable(e.to_string()))?;
        Ok(requests_from_events(events))
    }

    fn interrupt(&mut self) {
        self.child.interrupt();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill();
    }
}

impl Drop for BlktraceSession {
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.interrupt();
            if let Some(r) = self.reader.take() {
                let _ = r.join();
            }
        }
    }
}
