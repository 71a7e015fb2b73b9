//! The resume journal of a cell: one JSON line per checked state.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Error, StateCheck};

/// Results of a cell already reached, and where new ones go, so that a killed run
/// resumes without losing a verdict (`--resume`), and so that a recording checked under a
/// second disk model mounts only the states the first did not have. One JSON line per
/// mounted state, keyed by the state's content digest and the promises due in it (neither
/// depends on state order, sharding or the disk model that cut the state: a state's check
/// is a function of its bytes and its promises).
#[derive(Default)]
pub struct Journal {
    /// Checks done by the run this one resumes, by key.
    prior: HashMap<[u8; 32], StateCheck>,
    /// Checks done by this run, by key: a later disk model's states that an earlier
    /// model's run already checked are taken from here.
    this_run: Mutex<HashMap<[u8; 32], StateCheck>>,
    sink: Option<Mutex<std::fs::File>>,
}

#[derive(Serialize, Deserialize)]
struct JournalLine {
    #[serde(default = "schema_v1")]
    schema_version: u32,
    digest: String,
    check: StateCheck,
}

/// A digest as lowercase hex, as journals and recovered-image keys print it.
pub(super) fn hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

impl Journal {
    /// Opens (creating it if needed) the journal at `path`, reading what it already holds.
    /// A torn last line (the process was killed while writing it) is ignored.
    pub fn open(path: &Path) -> Result<Journal, Error> {
        let io = |source| Error::Io { path: path.to_owned(), source };
        let mut prior = HashMap::new();
        if let Ok(text) = std::fs::read_to_string(path) {
            for line in text.lines() {
                if let Ok(l) = serde_json::from_str::<JournalLine>(line) {
                    if let Some(d) = unhex(&l.digest) {
                        prior.insert(d, l.check);
                    }
                }
            }
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
        Ok(Journal { prior, this_run: Mutex::default(), sink: Some(Mutex::new(file)) })
    }

    /// The check already done for the state keyed `key`, by the resumed run or by this
    /// one under an earlier disk model, marked as taken from the journal: no step of it
    /// ran again, so none of its own reuse flags are this state's (the retries it needed
    /// are kept, as the run that made it reported them).
    pub(super) fn get(&self, key: &[u8; 32]) -> Option<StateCheck> {
        let this_run = self.this_run.lock().unwrap_or_else(|p| p.into_inner());
        let mut c = self.prior.get(key).or_else(|| this_run.get(key))?.clone();
        c.snapshot_reused = false;
        c.fsck_reused = false;
        c.reads_reused = false;
        c.file_data_patched = false;
        c.routine_fsck_reused = false;
        c.reads_behind = None;
        c.steps = None;
        c.journal_reused = true;
        Some(c)
    }

    pub(super) fn record(&self, digest: &[u8; 32], check: &StateCheck) {
        use std::io::Write;
        let Some(sink) = &self.sink else { return };
        let line = JournalLine {
            schema_version: crate::SCHEMA_VERSION,
            digest: hex(digest),
            check: check.clone(),
        };
        if let Ok(text) = serde_json::to_string(&line) {
            let mut f = sink.lock().unwrap_or_else(|p| p.into_inner());
            let _ = f.write_all(format!("{text}\n").as_bytes());
        }
        // The line's copy serves this run's later disk models too.
        let mut this_run = self.this_run.lock().unwrap_or_else(|p| p.into_inner());
        this_run.insert(*digest, line.check);
    }
}

/// Journals written before documents carried a version are version 1.
fn schema_v1() -> u32 {
    1
}
