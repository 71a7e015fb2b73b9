//! Pinning a guest kernel crash on the crash state that caused it.
//!
//! Inside a guest bob booted, each worker of the engine writes a `begin` line (the
//! subject, the state's check key, its id) to the control directory before it recovers a
//! state, and an `end` line after, each synced to the host. When the guest kernel panics
//! the host reads which states were in flight. One in flight: that state crashed the
//! kernel, and it becomes a known crash (outcome `kernel-crash`, with the console log
//! kept). Several (parallel workers): each becomes a suspect, and the next boot recovers
//! suspects alone, with no other state in flight, so the one that crashes again is pinned
//! and the others are checked normally. The host boots again with the known crashes and
//! suspects in `known-crashes.json`, and the command resumes from its journal.
//!
//! States are keyed by content (the engine's check key) under their subject (the
//! configuration, workload and drain schedule): the same bytes crash the same kernel.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};

/// The guest's log of states in flight, in the control directory.
pub const FILE: &str = "crash-log";
/// What the host tells the next boot, in the control directory.
pub(crate) const KNOWN_FILE: &str = "known-crashes.json";

/// A state that crashed the guest kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownCrash {
    /// Its subject ([`subject_tag`]).
    pub subject: String,
    /// Its check key, hex.
    pub key: String,
    /// Its state id.
    pub state: String,
    /// The console line that says how the kernel crashed.
    pub message: String,
    /// The guest's console log of that boot, kept.
    pub console: PathBuf,
}

/// A state that was in flight, with others, when the kernel crashed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct InFlight {
    /// Its subject.
    pub subject: String,
    /// Its check key, hex.
    pub key: String,
    /// Its state id.
    pub state: String,
}

/// What the host knows before a boot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    /// States pinned as crashing the kernel.
    pub crashes: Vec<KnownCrash>,
    /// States to recover alone.
    pub suspects: Vec<InFlight>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Line {
    Begin(InFlight),
    End { subject: String, key: String },
}

/// The subject part of a state's name in the crash log.
pub(crate) fn subject_tag(config: &str, workload: &str, schedule: Option<&str>) -> String {
    format!("{config}/{workload}/{}", schedule.unwrap_or("-"))
}

/// The guest side: present only in a guest bob booted.
pub(crate) struct GuestLog {
    file: Mutex<std::fs::File>,
    known: Known,
    alone: RwLock<()>,
}

/// The guest's log, if this process runs in a guest bob booted (its control directory in
/// [`super::GUEST_ENV`]); `None` on the host, where nothing is logged.
pub fn guest() -> Option<&'static GuestLog> {
    static LOG: OnceLock<Option<GuestLog>> = OnceLock::new();
    LOG.get_or_init(|| {
        let ctl = PathBuf::from(std::env::var_os(super::GUEST_ENV)?);
        let file =
            std::fs::OpenOptions::new().create(true).append(true).open(ctl.join(FILE)).ok()?;
        let known = std::fs::read(ctl.join(KNOWN_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Some(GuestLog { file: Mutex::new(file), known, alone: RwLock::new(()) })
    })
    .as_ref()
}

/// A state being recovered: logged as ended when dropped.
pub(crate) struct Recovering<'a> {
    log: &'a GuestLog,
    subject: String,
    key: String,
    _turn: Turn<'a>,
}

enum Turn<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl GuestLog {
    /// The known crash of this state, if the host pinned one on it.
    pub(crate) fn known_crash(&self, subject: &str, key: &str) -> Option<&KnownCrash> {
        self.known.crashes.iter().find(|c| c.subject == subject && c.key == key)
    }

    /// Logs that `state` (the `rank`-th distinct state of its run) is about to be
    /// recovered; a suspect waits until no other state is in flight and keeps the others
    /// out until it is done.
    pub fn begin(&self, subject: &str, key: &str, state: &str, rank: usize) -> Recovering<'_> {
        let suspect = self.known.suspects.iter().any(|s| s.subject == subject && s.key == key);
        let turn = match suspect {
            true => Turn::Alone(self.alone.write().unwrap_or_else(|p| p.into_inner())),
            false => Turn::Shared(self.alone.read().unwrap_or_else(|p| p.into_inner())),
        };
        self.write(&Line::Begin(InFlight {
            subject: subject.to_owned(),
            key: key.to_owned(),
            state: state.to_owned(),
        }));
        crash_kernel_for_test(rank);
        Recovering { log: self, subject: subject.to_owned(), key: key.to_owned(), _turn: turn }
    }

    /// Appends a line and syncs it, so the host reads it even if the kernel dies next.
    /// A line that cannot be written is said on stderr (which the host keeps): the
    /// check goes on, but a crash on that state could not be pinned on it.
    fn write(&self, line: &Line) {
        let written = serde_json::to_string(line).map_err(std::io::Error::from).and_then(|text| {
            let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
            (&*file).write_all(format!("{text}\n").as_bytes())?;
            file.sync_data()
        });
        if let Err(e) = written {
            eprintln!("bob: the guest's crash log ({FILE}): {e}");
        }
    }
}

/// Test only: `BOB_TEST_CRASH_KERNEL_AT=K` panics the guest kernel (sysrq `c`) as the
/// K-th distinct state (0-based, in the engine's order) begins recovery, so the tests can
/// show a `kernel-crash` deterministically. Refused (with a warning) unless the kernel is
/// one bob booted ([`super::in_own_guest`]: its command line says so, which no variable
/// set on a host can fake), so it can never panic a machine's own kernel; unset in
/// normal use.
fn crash_kernel_for_test(rank: usize) {
    let at = std::env::var("BOB_TEST_CRASH_KERNEL_AT").ok().and_then(|v| v.trim().parse().ok());
    if at != Some(rank) {
        return;
    }
    if !super::in_own_guest() {
        eprintln!(
            "bob: BOB_TEST_CRASH_KERNEL_AT ignored: this kernel was not booted by bob \
             (no {}= on its command line)",
            super::GUEST_MARK
        );
        return;
    }
    if let Err(e) = std::fs::write("/proc/sysrq-trigger", b"c") {
        eprintln!("bob: BOB_TEST_CRASH_KERNEL_AT: /proc/sysrq-trigger: {e}");
    }
}

impl Drop for Recovering<'_> {
    fn drop(&mut self) {
        self.log.write(&Line::End {
            subject: std::mem::take(&mut self.subject),
            key: std::mem::take(&mut self.key),
        });
    }
}

/// The host side: states the guest began and did not end, in the order begun.
pub(crate) fn in_flight(ctl: &Path) -> Vec<InFlight> {
    let text = std::fs::read(ctl.join(FILE)).unwrap_or_default();
    let mut open: Vec<InFlight> = Vec::new();
    for line in String::from_utf8_lossy(&text).lines() {
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Begin(state)) => open.push(state),
            Ok(Line::End { subject, key }) => {
                if let Some(i) = open.iter().position(|s| s.subject == subject && s.key == key) {
                    open.remove(i);
                }
            }
            // A line cut by the crash.
            Err(_) => {}
        }
    }
    let mut seen = HashSet::new();
    open.retain(|s| seen.insert(s.clone()));
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_states_begun_and_not_ended_are_in_flight_and_a_cut_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let log = GuestLog {
            file: Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.path().join(FILE))
                    .unwrap(),
            ),
            known: Known::default(),
            alone: RwLock::new(()),
        };
        let a = log.begin("ext4/w/sync", "aa", "sync/e0:-", 0);
        let b = log.begin("ext4/w/sync", "bb", "sync/e1:0", 1);
        drop(a);
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap()
            .write_all(b"{\"begin\":{\"subj")
            .unwrap();
        let open = in_flight(dir.path());
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].key.as_str(), open[0].state.as_str()), ("bb", "sync/e1:0"));
        drop(b);
    }
}
