//! How many times a cell records each drain schedule (`--recordings`), and the extra
//! recordings `auto` makes.
//!
//! One recording is one timing of the kernel, and some file systems race under some
//! timings: the same binary on the same kernel lost an ext4-ordered single-block append
//! under the `syncfs` drain in 3 of 8 recordings, and broke btrfs'
//! otrunc-append-then-close in 2 of 5. A verdict from one recording can flip between two
//! runs. A schedule recorded `n` times contributes the union of its recordings' crash
//! states (each recording checked as the engine checks any: its identical states mounted
//! once; two recordings' traces differ, so their states are checked apart), and says in
//! how many of the `n` a violation appeared (`k of n`); with 0 < k < n the schedule, and
//! its cell, are racy.
//!
//! The default, `auto`, records each schedule once and records a schedule whose first
//! recording shows a violation [`AUTO_RECORDINGS`] times in all. Why only those: the
//! flips seen are violations some recordings show and others do not, a violation is what
//! a verdict change and `bob diff` turn on, and most cells hold, so they pay nothing; a
//! violated schedule pays two more recordings, which tell a steady violation (3 of 3)
//! from a race (1 or 2 of 3). A racy schedule whose one recording held is not caught
//! this way (finding it would take a second recording of every schedule, doubling the
//! table's cost), but a run that sees the race marks the cell racy, and `bob diff`
//! treats a cell racy in either table as racy. `--recordings N` records every schedule
//! `N` times, for a verdict that must settle whatever it costs.
//!
//! A later recording's state ids carry its number after the schedule (`syncfs.2/e3:0-4`),
//! its scratch and journal directories are named so, and `--save-trace` writes it beside
//! the first (`DIR/syncfs.2`), where `--trace DIR` finds it again.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use workloads::Schedule;

use super::{
    check_schedule, record_schedule, Error, Part, Progress, RunOptions, ScheduleRecording, Target,
};
use crate::check::{recording_label, OutcomeKind};

/// How many recordings `auto` makes of a schedule whose first recording shows a
/// violation (the first included).
pub(crate) const AUTO_RECORDINGS: usize = 3;

/// The most recordings `--recordings N` accepts.
const MAX_RECORDINGS: usize = 100;

/// How many times a cell records each drain schedule (`--recordings auto|N`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Recordings {
    /// Once each; a schedule whose recording shows a violation is recorded
    /// [`AUTO_RECORDINGS`] times in all (see the module documentation).
    #[default]
    Auto,
    /// Exactly this many times each (at least 1).
    Exactly(usize),
}

/// A `--recordings` value that is neither `auto` nor a count from 1 to 100.
#[derive(Debug, thiserror::Error)]
#[error("{0:?}: expected auto or a number of recordings from 1 to {MAX_RECORDINGS}")]
pub struct ParseRecordingsError(String);

impl std::str::FromStr for Recordings {
    type Err = ParseRecordingsError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "auto" {
            return Ok(Recordings::Auto);
        }
        match text.parse::<usize>() {
            Ok(n) if (1..=MAX_RECORDINGS).contains(&n) => Ok(Recordings::Exactly(n)),
            _ => Err(ParseRecordingsError(text.to_owned())),
        }
    }
}

impl std::fmt::Display for Recordings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recordings::Auto => f.write_str("auto"),
            Recordings::Exactly(n) => write!(f, "{n}"),
        }
    }
}

/// One recording a cell will make or load: its schedule (none: a saved trace's own), its
/// number (1 and up) and the saved trace directory to load it from.
pub(crate) struct Planned {
    pub schedule: Option<Schedule>,
    pub recording: usize,
    pub saved: Option<PathBuf>,
}

/// The recordings a cell makes afresh of `schedules`: each schedule's, in order. Under
/// `auto`, a schedule for which `settle` gives a count (a flip history's: the schedule
/// flipped in earlier runs) is recorded that many times from the start, any other once.
pub(crate) fn fresh(
    schedules: &[Schedule],
    recordings: Recordings,
    settle: impl Fn(Schedule) -> Option<usize>,
) -> Vec<Planned> {
    let each = |s: Schedule| {
        let n = match recordings {
            Recordings::Auto => settle(s).unwrap_or(1),
            Recordings::Exactly(n) => n,
        };
        (1..=n.max(1)).map(move |r| Planned { schedule: Some(s), recording: r, saved: None })
    };
    schedules.iter().copied().flat_map(each).collect()
}

/// The recordings saved in `dir` (`--trace`): one trace directory (`dir/trace.json`), or
/// one per schedule (`dir/syncfs`), each with the later recordings `--save-trace` wrote
/// beside it (`dir/syncfs.2`, ...).
pub(crate) fn saved(dir: &Path, schedules: &[Schedule]) -> Vec<Planned> {
    let exists = |d: &Path| d.join("trace.json").exists();
    let later = |s: Schedule| {
        (2..)
            .map(move |r| (r, dir.join(recording_label(s.name(), r))))
            .take_while(move |(_, d)| exists(d))
            .map(move |(r, d)| Planned { schedule: Some(s), recording: r, saved: Some(d) })
    };
    let whole = Planned { schedule: None, recording: 1, saved: Some(dir.to_owned()) };
    if exists(dir) {
        // A saved trace is one recording, under whatever schedule its sidecar names.
        return std::iter::once(whole).chain(schedules.iter().flat_map(|&s| later(s))).collect();
    }
    // What `--save-trace` writes for several recordings: one directory each.
    let found: Vec<Planned> = schedules
        .iter()
        .filter(|s| exists(&dir.join(s.name())))
        .flat_map(|&s| {
            let first =
                Planned { schedule: Some(s), recording: 1, saved: Some(dir.join(s.name())) };
            std::iter::once(first).chain(later(s))
        })
        .collect();
    if found.is_empty() {
        // Let loading the directory itself say what is missing.
        vec![whole]
    } else {
        found
    }
}

/// Whether a checked recording shows a violation.
pub(crate) fn violated(part: &Part) -> bool {
    part.results.iter().any(|r| r.check.outcome.kind() == OutcomeKind::Violated)
}

/// `--recordings auto`: each schedule whose first recording (`recs`, checked as `parts`)
/// shows a violation is recorded again until it has [`AUTO_RECORDINGS`], each new
/// recording checked and added; then recordings are put in schedule order, each
/// schedule's by number. A cell checked from saved traces records nothing.
pub(crate) fn settle(
    opts: &RunOptions,
    recs: &mut Vec<ScheduleRecording>,
    parts: &mut Vec<Part>,
    at: &Target,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<(), Error> {
    if opts.recordings != Recordings::Auto || opts.trace.is_some() {
        return Ok(());
    }
    // A schedule recorded several times from the start (its flip history asked for it)
    // has what it needs already.
    let once = |s: Option<Schedule>| recs.iter().filter(|r| r.subject.schedule == s).count() == 1;
    let again: Vec<Schedule> = recs
        .iter()
        .zip(parts.iter())
        .filter(|(r, p)| r.subject.recording == 1 && once(r.subject.schedule) && violated(p))
        .filter_map(|(r, _)| r.subject.schedule)
        .collect();
    for schedule in again {
        for recording in 2..=AUTO_RECORDINGS {
            let planned = Planned { schedule: Some(schedule), recording, saved: None };
            let rec = record_schedule(opts, planned, at, progress, cancel)?;
            parts.push(check_schedule(opts, &rec, true, progress, cancel)?);
            recs.push(rec);
        }
    }
    // Each schedule's recordings side by side, as `--recordings N` makes them.
    let key = |r: &ScheduleRecording| {
        let s = Schedule::ALL.iter().position(|&s| Some(s) == r.subject.schedule);
        (s, r.subject.recording)
    };
    let mut both: Vec<(ScheduleRecording, Part)> = recs.drain(..).zip(parts.drain(..)).collect();
    both.sort_by_key(|(r, _)| key(r));
    for (r, p) in both {
        recs.push(r);
        parts.push(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_parse_auto_or_a_count() {
        assert_eq!("auto".parse::<Recordings>().unwrap(), Recordings::Auto);
        assert_eq!("5".parse::<Recordings>().unwrap(), Recordings::Exactly(5));
        for bad in ["0", "-1", "many", "101", ""] {
            let e = bad.parse::<Recordings>().unwrap_err().to_string();
            assert!(e.contains("auto or a number"), "{bad}: {e}");
        }
        assert_eq!(Recordings::default().to_string(), "auto");
    }

    #[test]
    fn fresh_recordings_are_each_schedules_side_by_side() {
        let none = |_| None;
        let plan = fresh(&[Schedule::Sync, Schedule::Syncfs], Recordings::Exactly(2), none);
        let got: Vec<(Option<Schedule>, usize)> =
            plan.iter().map(|p| (p.schedule, p.recording)).collect();
        use Schedule::*;
        assert_eq!(got, [(Some(Sync), 1), (Some(Sync), 2), (Some(Syncfs), 1), (Some(Syncfs), 2)]);
        assert_eq!(fresh(&[Sync], Recordings::Auto, none).len(), 1, "auto starts with one");
        // A schedule a flip history settles is recorded as often as it asks, under auto
        // only: an exact count is the user's.
        let history = |s| (s == Syncfs).then_some(8);
        let counts = |r| {
            let plan = fresh(&[Sync, Syncfs], r, history);
            [Sync, Syncfs].map(|s| plan.iter().filter(|p| p.schedule == Some(s)).count())
        };
        assert_eq!(counts(Recordings::Auto), [1, 8]);
        assert_eq!(counts(Recordings::Exactly(2)), [2, 2]);
    }

    #[test]
    fn saved_recordings_are_found_beside_the_first() {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["syncfs", "syncfs.2", "syncfs.3", "sync", "sync.3"] {
            let d = tmp.path().join(d);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("trace.json"), "{}").unwrap();
        }
        let plan = saved(tmp.path(), &[Schedule::Sync, Schedule::Syncfs]);
        let got: Vec<(Option<Schedule>, usize)> =
            plan.iter().map(|p| (p.schedule, p.recording)).collect();
        use Schedule::*;
        // sync.3 without sync.2 is not a recording of the set: numbers run without gaps.
        assert_eq!(got, [(Some(Sync), 1), (Some(Syncfs), 1), (Some(Syncfs), 2), (Some(Syncfs), 3)]);
        assert_eq!(plan[2].saved.as_deref(), Some(tmp.path().join("syncfs.2").as_path()));
    }
}
