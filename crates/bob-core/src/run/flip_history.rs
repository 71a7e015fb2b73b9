//! The flip history (`--flip-history FILE`): for each cell's drain schedule, how many
//! recordings were made of it over earlier runs and in how many of them a violation
//! appeared. A schedule seen violated in some recordings and held in others is a race in
//! the file system's timing, and a verdict from a few recordings of it flips from one run
//! to the next.
//!
//! `--recordings auto` records a schedule a second and third time only after a violation,
//! so a race whose first recording held goes unseen in that run (the ext4 `syncfs`
//! writeback race: violated in all 3 recordings of one whole-table run and in the one
//! recording of the next). The history is what lets a run know better: a schedule it
//! names as racy is recorded from the start as many times as its measured rate needs for
//! both outcomes to show with 99% confidence ([`settling_recordings`]), and its cell is
//! marked racy on the same kernel even when this run's recordings happen to agree, so
//! `bob diff` reports it as racy, never as a change. Each run adds its own recordings,
//! so the rates sharpen as a CI job or a developer keeps running the table.
//!
//! The file is plain JSON, one entry per kernel release, configuration, cell, disk model
//! and schedule. The kernel is kept because a race is a kernel's: the number of
//! recordings comes from any kernel's history of the schedule (another kernel's race is
//! reason enough to record more), but a cell is marked racy only from its own kernel's.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::report::{Cell, CellVerdict, EarlierRuns};

use super::recordings::AUTO_RECORDINGS;

/// The file's schema version.
const SCHEMA_VERSION: u32 = 1;

/// The chance, at most, that every recording of a racy schedule agrees (so that its race
/// goes unseen in a run): 1%.
const UNSEEN_AT_MOST: f64 = 0.01;

/// The most recordings the history asks for one schedule, however rare its race.
pub(crate) const MOST_SETTLING_RECORDINGS: usize = 20;

/// Errors reading or writing a flip history.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read or written.
    #[error("flip history {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a flip history bob wrote.
    #[error("flip history {path}: not a flip history bob can read: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// One schedule of one cell on one kernel: what earlier runs saw of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleHistory {
    /// The kernel release (`uname -r`, with "(user-mode Linux)" for a UML guest).
    pub kernel: String,
    /// The configuration.
    pub config: String,
    /// The cell's row: the property (or a workload's name).
    pub property: String,
    /// The disk model's label (`awu-4096`).
    pub disk_model: String,
    /// The drain schedule.
    pub schedule: String,
    /// The runs that added to this entry.
    pub runs: usize,
    /// Recordings made of the schedule over those runs.
    pub recordings: usize,
    /// Of them, the recordings whose states included a violation.
    pub violated: usize,
}

impl ScheduleHistory {
    /// Whether both outcomes were seen: violated in some recordings, not in all.
    pub fn flips(&self) -> bool {
        crate::report::ScheduleCell::is_racy(self.violated, self.recordings)
    }

    /// The share of recordings that showed a violation.
    pub fn rate(&self) -> f64 {
        self.violated as f64 / self.recordings.max(1) as f64
    }
}

/// A flip history: the file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlipHistory {
    /// The file's schema version.
    pub schema_version: u32,
    /// Each schedule seen, in the order first seen.
    pub schedules: Vec<ScheduleHistory>,
}

impl FlipHistory {
    /// Reads the history at `path`; a file that does not exist yet is an empty history.
    pub fn load(path: &Path) -> Result<FlipHistory, Error> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(FlipHistory { schema_version: SCHEMA_VERSION, schedules: Vec::new() })
            }
            Err(source) => return Err(Error::Io { path: path.to_owned(), source }),
        };
        let history: FlipHistory = serde_json::from_str(&text)
            .map_err(|e| Error::Corrupt { path: path.to_owned(), why: e.to_string() })?;
        if history.schema_version != SCHEMA_VERSION {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                why: format!(
                    "schema version {} (this bob reads {SCHEMA_VERSION})",
                    history.schema_version
                ),
            });
        }
        Ok(history)
    }

    /// Writes the history to `path`, whole or not at all (a temporary file renamed over
    /// it), so a run killed while writing leaves the earlier history.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let io = |source| Error::Io { path: path.to_owned(), source };
        let text = serde_json::to_string_pretty(self).expect("a history serializes");
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        std::io::Write::write_all(&mut tmp, format!("{text}\n").as_bytes()).map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Adds one run's cells (each checked on the kernel it names, else `kernel`): each
    /// schedule's recordings and how many of them showed a violation. Cells not run
    /// (unavailable, not applicable) and schedules with states bob could not check add
    /// nothing.
    pub fn add_run(&mut self, kernel: &str, cells: &[Cell]) {
        for cell in cells {
            let kernel = cell.kernel.as_deref().unwrap_or(kernel);
            if matches!(cell.verdict, CellVerdict::Unavailable | CellVerdict::NotApplicable) {
                continue;
            }
            for s in cell.schedules.iter().filter(|s| s.counts.infra_error == 0) {
                let recordings = s.recordings.max(1);
                let violated = match recordings {
                    1 => usize::from(s.verdict == CellVerdict::Violated),
                    _ => s.violated_in.len(),
                };
                let key = ScheduleHistory {
                    kernel: kernel.to_owned(),
                    config: cell.config.clone(),
                    property: cell.property.clone(),
                    disk_model: cell.disk_model.slug(),
                    schedule: s.schedule.clone(),
                    ..ScheduleHistory::default()
                };
                let entry = match self.schedules.iter().position(|e| same_key(e, &key)) {
                    Some(i) => &mut self.schedules[i],
                    None => {
                        self.schedules.push(key);
                        self.schedules.last_mut().expect("just pushed")
                    }
                };
                entry.runs += 1;
                entry.recordings += recordings;
                entry.violated += violated;
            }
        }
        self.schema_version = SCHEMA_VERSION;
    }

    /// How many recordings `--recordings auto` makes of `schedule` of the cell from the
    /// start: [`settling_recordings`] of the highest-needing rate any kernel's history
    /// of it shows, over its disk models; `None` where no history of it flips.
    pub fn recordings_for(&self, config: &str, property: &str, schedule: &str) -> Option<usize> {
        self.schedules
            .iter()
            .filter(|e| e.config == config && e.property == property && e.schedule == schedule)
            .filter(|e| e.flips())
            .map(|e| settling_recordings(e.rate()))
            .max()
    }

    /// What earlier runs on `kernel` saw of the schedule under `disk_model`, when they saw
    /// it flip.
    pub fn flipped_before(
        &self,
        kernel: &str,
        config: &str,
        property: &str,
        disk_model: &str,
        schedule: &str,
    ) -> Option<EarlierRuns> {
        self.schedules
            .iter()
            .find(|e| {
                e.kernel == kernel
                    && e.config == config
                    && e.property == property
                    && e.disk_model == disk_model
                    && e.schedule == schedule
            })
            .filter(|e| e.flips())
            .map(|e| EarlierRuns { runs: e.runs, recordings: e.recordings, violated: e.violated })
    }

    /// The schedules that flip, most racy first (the rate nearest one half).
    pub fn flipping(&self) -> Vec<&ScheduleHistory> {
        let mut out: Vec<&ScheduleHistory> = self.schedules.iter().filter(|e| e.flips()).collect();
        out.sort_by(|a, b| (a.rate() - 0.5).abs().total_cmp(&(b.rate() - 0.5).abs()));
        out
    }
}

fn same_key(a: &ScheduleHistory, b: &ScheduleHistory) -> bool {
    (&a.kernel, &a.config, &a.property, &a.disk_model, &a.schedule)
        == (&b.kernel, &b.config, &b.property, &b.disk_model, &b.schedule)
}

/// The recordings a schedule violated at rate `p` needs for both outcomes to show with
/// 99% confidence: the least `n` with `p^n + (1-p)^n <= 1%` (every recording agreeing is
/// the one way a race goes unseen), at least [`AUTO_RECORDINGS`] and at most
/// [`MOST_SETTLING_RECORDINGS`]. p = 0.5 needs 8, 0.4 needs 10, 0.2 needs 20.
pub(crate) fn settling_recordings(p: f64) -> usize {
    let p = p.clamp(0.0, 1.0);
    (AUTO_RECORDINGS..MOST_SETTLING_RECORDINGS)
        .find(|&n| p.powi(n as i32) + (1.0 - p).powi(n as i32) <= UNSEEN_AT_MOST)
        .unwrap_or(MOST_SETTLING_RECORDINGS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_recordings_grow_as_a_race_gets_rarer() {
        assert_eq!(settling_recordings(0.5), 8);
        assert_eq!(settling_recordings(0.4), 10);
        assert_eq!(settling_recordings(0.6), 10, "symmetric: a rare hold is as hard to see");
        assert_eq!(settling_recordings(0.2), MOST_SETTLING_RECORDINGS);
        assert_eq!(settling_recordings(0.01), MOST_SETTLING_RECORDINGS);
    }

    fn entry(kernel: &str, disk: &str, recordings: usize, violated: usize) -> ScheduleHistory {
        ScheduleHistory {
            kernel: kernel.into(),
            config: "ext4-ordered".into(),
            property: "single-block-append".into(),
            disk_model: disk.into(),
            schedule: "syncfs".into(),
            runs: 1,
            recordings,
            violated,
        }
    }

    #[test]
    fn recordings_come_from_any_kernel_and_racy_marks_from_the_same_one() {
        let history = FlipHistory {
            schema_version: SCHEMA_VERSION,
            schedules: vec![entry("6.18", "awu-4096", 4, 3), entry("7.2", "awu-512", 10, 5)],
        };
        // 3 of 4 (p = 0.75) needs 17; 5 of 10 (p = 0.5) needs 8: the larger wins.
        let at = |s| history.recordings_for("ext4-ordered", "single-block-append", s);
        assert_eq!(at("syncfs"), Some(settling_recordings(0.75)));
        assert_eq!(at("sync"), None);
        let before =
            |k, d| history.flipped_before(k, "ext4-ordered", "single-block-append", d, "syncfs");
        assert_eq!(
            before("6.18", "awu-4096"),
            Some(EarlierRuns { runs: 1, recordings: 4, violated: 3 })
        );
        assert_eq!(before("6.18", "awu-512"), None, "another disk model's race is its own");
        assert_eq!(before("6.1", "awu-4096"), None, "another kernel's race is its own");
    }

    #[test]
    fn a_steady_schedule_asks_for_nothing() {
        let history = FlipHistory {
            schema_version: SCHEMA_VERSION,
            schedules: vec![entry("6.18", "awu-4096", 5, 5), entry("6.18", "awu-512", 3, 0)],
        };
        assert_eq!(history.recordings_for("ext4-ordered", "single-block-append", "syncfs"), None);
        assert!(history.flipping().is_empty());
    }

    #[test]
    fn a_history_survives_a_round_trip_and_a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flips.json");
        assert_eq!(FlipHistory::load(&path).unwrap().schedules, vec![]);
        let history = FlipHistory {
            schema_version: SCHEMA_VERSION,
            schedules: vec![entry("6.18", "awu-4096", 4, 1)],
        };
        history.save(&path).unwrap();
        assert_eq!(FlipHistory::load(&path).unwrap(), history);
        std::fs::write(&path, "{\"schedules\": 3}").unwrap();
        let err = FlipHistory::load(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("flip history {}: not a flip history", path.display())));
    }
}
