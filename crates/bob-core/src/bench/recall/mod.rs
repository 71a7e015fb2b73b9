//! `bob bench --recall`: bob's measured recall on the published crash-consistency bugs of
//! the recall catalog (`docs/recall/catalog.json`, [`Catalog`]).
//!
//! On one kernel, [`run_recall`] runs each expressible entry's workload file as one cell
//! on the entry's configuration, with the cell machinery of `bob run --fs CONFIG
//! --workload FILE` ([`crate::run::run_cell`]), and sets the outcomes its crash states
//! reached against what the catalog knows of that kernel ([`Entry::known_on`]):
//!
//! * a kernel known to have the bug: **found** when some state reached one of the
//!   entry's expected outcomes, **found (other outcome)** when states failed otherwise,
//!   **missed** when every state held; recall is found over those run;
//! * a kernel known to have the fix: **held**, or a **false alarm** when any state
//!   failed; precision is held over those run;
//! * any other kernel: the verdict, **not known for this kernel**.
//!
//! An entry whose configuration this kernel cannot run (f2fs without its driver) is
//! **unavailable on this kernel**, with the reason, and counts in neither figure.
//! Several kernels are several runs, each in its own guest (the CLI's `guest.rs`), whose
//! reports [`RecallReport::merge`] sets side by side.

mod catalog;

pub use catalog::{matches, Catalog, CatalogError, Entry, Known};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::check::OutcomeKind;
use crate::crash::{AtomicWriteUnits, FuaModel};
use crate::report::Cell;
use crate::run::{self, environment, RunOptions, TableProgress};

/// Why `bob bench --recall` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    /// The catalog could not be read or names an unknown entry.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// This machine cannot run bob at all (root, /dev/fuse).
    #[error("{0}")]
    Environment(String),
    /// Interrupted (SIGINT, SIGTERM).
    #[error("interrupted")]
    Interrupted,
}

/// What `bob bench --recall` runs on this kernel.
#[derive(Clone, Debug)]
pub struct RecallOptions {
    /// The catalog.
    pub catalog: Catalog,
    /// The ids to run (every entry when empty).
    pub entries: Vec<String>,
    /// Leave out the entries the catalog knows nothing of on this kernel.
    pub known_only: bool,
    /// Each cell's options (configuration, workload and output directory are the
    /// entry's; witnesses go below `explore.out_dir/ID`).
    pub cell: RunOptions,
    /// The disk models' atomic write units, resolved per configuration's block size.
    pub atomic_write_unit: AtomicWriteUnits,
    /// The disk models' FUA.
    pub fua: FuaModel,
}

/// What an entry came to on one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecallResult {
    /// Buggy kernel: a crash state reached an expected outcome.
    Found,
    /// Buggy kernel: states failed, none with an expected outcome.
    FoundOther,
    /// Buggy kernel: every state held.
    Missed,
    /// Fixed kernel: every state held.
    Held,
    /// Fixed kernel: some state failed.
    FalseAlarm,
    /// The catalog knows neither bug nor fix on this kernel.
    NotKnown,
    /// The configuration cannot run on this kernel.
    Unavailable,
    /// bob could not run or check it (a bad workload file, `infra-error`).
    Error,
}

impl RecallResult {
    /// The result in words.
    pub fn words(self) -> &'static str {
        match self {
            RecallResult::Found => "found",
            RecallResult::FoundOther => "found (other outcome)",
            RecallResult::Missed => "missed",
            RecallResult::Held => "held",
            RecallResult::FalseAlarm => "false alarm",
            RecallResult::NotKnown => "not known for this kernel",
            RecallResult::Unavailable => "unavailable on this kernel",
            RecallResult::Error => "error",
        }
    }
}

/// One entry on one kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryResult {
    /// The catalog's id.
    pub id: String,
    /// The configuration.
    pub fs: String,
    /// What the catalog knows of the entry on this kernel.
    pub known: Known,
    /// What it came to.
    pub result: RecallResult,
    /// The outcomes that count as finding the bug.
    pub expected: Vec<OutcomeKind>,
    /// The cell's verdict (none when not run).
    pub verdict: Option<OutcomeKind>,
    /// The failing outcomes some crash state reached.
    pub seen: Vec<OutcomeKind>,
    /// Crash states explored.
    pub states_explored: usize,
    /// Wall time of the cell, s.
    pub seconds: f64,
    /// The first failure's story.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<String>,
    /// Its witness directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
    /// Why it is unavailable or an error, or that `--known-only` left it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One kernel's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecallSummary {
    /// Entries run on a kernel known to have their bug.
    pub expected: usize,
    /// ... of which found.
    pub found: usize,
    /// ... failed with another outcome than expected.
    pub found_other: usize,
    /// ... held everywhere.
    pub missed: usize,
    /// Found over expected (none when nothing was expected).
    pub recall: Option<f64>,
    /// Entries run on a kernel known to have their fix.
    pub fixed: usize,
    /// ... of which some state failed.
    pub false_alarms: usize,
    /// Held over fixed (none when no fixed entry ran).
    pub precision: Option<f64>,
    /// Entries the catalog knows nothing of on this kernel.
    pub not_known: usize,
    /// Entries whose configuration this kernel cannot run.
    pub unavailable: usize,
    /// Entries bob could not run or check.
    pub errors: usize,
}

impl RecallSummary {
    fn of(entries: &[EntryResult]) -> RecallSummary {
        let n = |r: RecallResult| entries.iter().filter(|e| e.result == r).count();
        let mut s = RecallSummary {
            found: n(RecallResult::Found),
            found_other: n(RecallResult::FoundOther),
            missed: n(RecallResult::Missed),
            false_alarms: n(RecallResult::FalseAlarm),
            not_known: n(RecallResult::NotKnown),
            unavailable: n(RecallResult::Unavailable),
            errors: n(RecallResult::Error),
            ..RecallSummary::default()
        };
        s.expected = s.found + s.found_other + s.missed;
        s.fixed = n(RecallResult::Held) + s.false_alarms;
        let share = |a: usize, b: usize| (b > 0).then(|| a as f64 / b as f64);
        s.recall = share(s.found, s.expected);
        s.precision = share(s.fixed - s.false_alarms, s.fixed);
        s
    }
}

/// One kernel's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRecall {
    /// The kernel as named (`host`, `uml:7.2`, a path).
    pub kernel: String,
    /// Its release, as the cells name it.
    pub release: String,
    /// Every entry run (or said unavailable), in the catalog's order.
    pub entries: Vec<EntryResult>,
    /// The figures.
    pub summary: RecallSummary,
}

/// An entry bob cannot express, and what it lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotExpressible {
    /// The catalog's id.
    pub id: String,
    /// What bob lacks (the catalog's gaps).
    pub missing: String,
}

/// `bob bench --recall`'s report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecallReport {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The catalog file.
    pub catalog: PathBuf,
    /// The drain schedules each workload was recorded under.
    pub schedules: Vec<String>,
    /// Each kernel's run.
    pub kernels: Vec<KernelRecall>,
    /// The selected entries bob cannot express.
    pub not_expressible: Vec<NotExpressible>,
}

/// Runs the selected entries on this kernel. `kernel` names it in the report (`host`).
pub fn run_recall(
    opts: &RecallOptions,
    kernel: &str,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<RecallReport, RecallError> {
    crate::fs::privileges().map_err(|e| RecallError::Environment(e.to_string()))?;
    let selected = opts.catalog.select(&opts.entries)?;
    let release = crate::host::kernel_release();
    let runnable: Vec<&Entry> = selected.iter().copied().filter(|e| e.expressible).collect();
    let mut entries = Vec::with_capacity(runnable.len());
    for (index, entry) in runnable.iter().enumerate() {
        progress.cell_started(index, &format!("{} ({})", entry.id, entry.fs));
        let known = entry.known_on(&release);
        let result = if opts.known_only && known == Known::Unknown {
            not_run(entry, known, "left out: --known-only")
        } else {
            run_entry(opts, entry, known, progress, cancel)?
        };
        entries.push(result);
    }
    let summary = RecallSummary::of(&entries);
    Ok(RecallReport {
        schema_version: crate::SCHEMA_VERSION,
        catalog: opts.catalog.path.clone(),
        schedules: opts.cell.schedules.iter().map(|s| s.name().to_owned()).collect(),
        kernels: vec![KernelRecall { kernel: kernel.into(), release, entries, summary }],
        not_expressible: selected
            .iter()
            .filter(|e| !e.expressible)
            .map(|e| NotExpressible {
                id: e.id.clone(),
                missing: e.missing.clone().unwrap_or_default(),
            })
            .collect(),
    })
}

/// An entry that was not run, with why.
fn not_run(entry: &Entry, known: Known, note: &str) -> EntryResult {
    EntryResult {
        id: entry.id.clone(),
        fs: entry.fs.clone(),
        known,
        result: RecallResult::NotKnown,
        expected: entry.expected.clone(),
        verdict: None,
        seen: Vec::new(),
        states_explored: 0,
        seconds: 0.0,
        story: None,
        witness: None,
        note: Some(note.into()),
    }
}

/// One entry's cell on this kernel, judged against what is known of it.
fn run_entry(
    opts: &RecallOptions,
    entry: &Entry,
    known: Known,
    progress: &dyn TableProgress,
    cancel: &AtomicBool,
) -> Result<EntryResult, RecallError> {
    let failed = |result: RecallResult, note: String| EntryResult {
        result,
        note: Some(note),
        ..not_run(entry, known, "")
    };
    let Some(config) = crate::fs::by_name(&entry.fs) else {
        return Ok(failed(RecallResult::Error, format!("unknown configuration {}", entry.fs)));
    };
    if let Some(why) = environment::unavailable_here(&config) {
        return Ok(failed(RecallResult::Unavailable, why));
    }
    let Some(path) = opts.catalog.workload_path(entry) else {
        return Ok(failed(RecallResult::Error, "no workload file".into()));
    };
    let workload = match run::load_workload(&path) {
        Ok(w) => w,
        Err(e) => return Ok(failed(RecallResult::Error, e.to_string())),
    };
    let mut cell = opts.cell.clone();
    cell.disk_models =
        match run::disk_models(&opts.atomic_write_unit, opts.fua, config.block_size()) {
            Ok(models) => models,
            Err(e) => return Ok(failed(RecallResult::Error, e.to_string())),
        };
    cell.config = config;
    cell.workload = Some(workload);
    cell.explore.out_dir = opts.cell.explore.out_dir.join(&entry.id);
    // A run that fails for bob's own reasons (a loop device taken from under mkfs on a
    // busy machine) is tried once more; the result says so.
    let mut retried = None;
    let cells = loop {
        match run::run_cell(&cell, progress, cancel) {
            Ok(cells) => break cells,
            Err(e) if e.is_interrupted() => return Err(RecallError::Interrupted),
            Err(e) => match retried {
                None => retried = Some(e.to_string()),
                Some(first) => {
                    let why = format!("{e} (a first attempt failed too: {first})");
                    return Ok(failed(RecallResult::Error, why));
                }
            },
        }
    };
    for c in &cells {
        progress.cell_finished(c);
    }
    let mut result = judge(entry, known, &cells);
    if let Some(first) = retried {
        let retry = format!("run twice: the first attempt failed ({first})");
        result.note = Some(match result.note.take() {
            Some(note) => format!("{note}; {retry}"),
            None => retry,
        });
    }
    Ok(result)
}

/// What an entry's cells came to on a kernel of which `known` is known.
fn judge(entry: &Entry, known: Known, cells: &[Cell]) -> EntryResult {
    let seen: BTreeSet<OutcomeKind> = cells
        .iter()
        .flat_map(|c| {
            OutcomeKind::ALL.into_iter().filter(|k| k.exit_code() == 1 && c.counts.get(*k) > 0)
        })
        .collect();
    let verdict = OutcomeKind::worst(cells.iter().map(|c| c.verdict));
    let first_failure = cells.iter().find(|c| c.verdict.exit_code() == 1);
    let infra = verdict == OutcomeKind::InfraError;
    let result = match (known, seen.is_empty()) {
        _ if infra => RecallResult::Error,
        (Known::Buggy, _) if entry.expected.iter().any(|k| seen.contains(k)) => RecallResult::Found,
        (Known::Buggy, false) => RecallResult::FoundOther,
        (Known::Buggy, true) => RecallResult::Missed,
        (Known::Fixed, true) => RecallResult::Held,
        (Known::Fixed, false) => RecallResult::FalseAlarm,
        (Known::Unknown, _) => RecallResult::NotKnown,
    };
    // A violation seen in some recordings of a schedule and not others is said as such:
    // another run may miss it.
    let racy: Vec<String> = cells.iter().flat_map(Cell::racy_text).collect();
    let note = if infra {
        Some("bob could not check every crash state (infra-error)".into())
    } else if !racy.is_empty() {
        Some(racy.join("; "))
    } else {
        cells.iter().find_map(|c| c.not_exercised.clone())
    };
    EntryResult {
        id: entry.id.clone(),
        fs: entry.fs.clone(),
        known,
        result,
        expected: entry.expected.clone(),
        verdict: Some(verdict),
        seen: seen.into_iter().collect(),
        states_explored: cells.iter().map(|c| c.states_explored).sum(),
        seconds: cells.iter().map(|c| c.seconds).sum(),
        story: expected_story(entry, result, cells)
            .or_else(|| first_failure.and_then(|c| c.story.clone())),
        witness: first_failure.and_then(|c| c.witness.clone()),
        note,
    }
}

/// For an entry found through an expected outcome that is not its cells' worst (a
/// `btrfs check` complaint beside a lost file), the story of that outcome: the loss the
/// bug report describes, not another one. `None` when the cells' own story already tells
/// an expected outcome.
fn expected_story(entry: &Entry, result: RecallResult, cells: &[Cell]) -> Option<String> {
    let worst = OutcomeKind::worst(cells.iter().map(|c| c.verdict));
    if result != RecallResult::Found || entry.expected.contains(&worst) {
        return None;
    }
    entry.expected.iter().find_map(|kind| match kind {
        OutcomeKind::FsckFailed => cells
            .iter()
            .flat_map(|c| &c.fsck_failures)
            .next()
            .map(|f| format!("{} ({} state(s), first {})", f.message, f.count, f.first_state)),
        OutcomeKind::Unrecoverable | OutcomeKind::NeedsRepair => cells
            .iter()
            .flat_map(|c| &c.mount_failures)
            .find(|f| f.repaired_by.is_some() == (*kind == OutcomeKind::NeedsRepair))
            .map(|f| {
                let fate = match &f.repaired_by {
                    Some(step) => format!("mounted after {step}"),
                    None => "never mounted".into(),
                };
                format!("{}; {fate} ({} state(s), first {})", f.error, f.count, f.first_state)
            }),
        _ => cells.iter().find(|c| c.verdict == *kind).and_then(|c| c.story.clone()),
    })
}

impl RecallReport {
    /// Each kernel's report side by side (the catalog, schedules and inexpressible
    /// entries of the first). `None` when there is none.
    pub fn merge(reports: Vec<RecallReport>) -> Option<RecallReport> {
        let mut reports = reports.into_iter();
        let mut first = reports.next()?;
        for r in reports {
            first.kernels.extend(r.kernels);
        }
        Some(first)
    }

    /// Entries that did not come out as the catalog expects (missed, another outcome
    /// than expected, false alarms) and entries bob could not run, over every kernel.
    pub fn misses_and_errors(&self) -> (usize, usize) {
        self.kernels.iter().fold((0, 0), |(m, e), k| {
            let s = &k.summary;
            (m + s.missed + s.found_other + s.false_alarms, e + s.errors)
        })
    }
}

mod render;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            id: "cm-x".into(),
            fs: "btrfs".into(),
            workload: Some("workloads/cm-x.json".into()),
            expressible: true,
            expected: vec![OutcomeKind::FsckFailed, OutcomeKind::Violated],
            buggy: vec!["4.16".into()],
            fixed: vec![">=5.10".into()],
            missing: None,
        }
    }

    /// A cell whose states came to `outcomes` (kind, count).
    fn cell(outcomes: &[(OutcomeKind, usize)]) -> Cell {
        let mut c = Cell::of_results("btrfs", "cm-x", &[]).0;
        for (kind, n) in outcomes {
            c.counts.add(*kind, *n);
        }
        c.verdict = OutcomeKind::worst(outcomes.iter().filter(|(_, n)| *n > 0).map(|(k, _)| *k));
        c.states_explored = outcomes.iter().map(|(_, n)| n).sum();
        c
    }

    #[test]
    fn each_result_follows_what_is_known_and_what_the_states_came_to() {
        let e = entry();
        let held = [cell(&[(OutcomeKind::Held, 9)])];
        let violated = [cell(&[(OutcomeKind::Held, 8), (OutcomeKind::Violated, 1)])];
        let repaired = [cell(&[(OutcomeKind::Held, 8), (OutcomeKind::NeedsRepair, 1)])];
        let infra = [cell(&[(OutcomeKind::Held, 8), (OutcomeKind::InfraError, 1)])];
        let cases = [
            (Known::Buggy, &violated, RecallResult::Found),
            (Known::Buggy, &repaired, RecallResult::FoundOther),
            (Known::Buggy, &held, RecallResult::Missed),
            (Known::Fixed, &held, RecallResult::Held),
            (Known::Fixed, &repaired, RecallResult::FalseAlarm),
            (Known::Unknown, &violated, RecallResult::NotKnown),
            (Known::Buggy, &infra, RecallResult::Error),
        ];
        for (known, cells, want) in cases {
            let r = judge(&e, known, cells);
            assert_eq!(r.result, want, "{known:?} {:?}", r.seen);
            assert_eq!(r.states_explored, 9);
        }
        assert_eq!(judge(&e, Known::Buggy, &violated).seen, [OutcomeKind::Violated]);
    }

    #[test]
    fn a_find_through_an_expected_outcome_that_is_not_the_worst_tells_that_outcome() {
        let e = Entry { expected: vec![OutcomeKind::FsckFailed], ..entry() };
        let mut both = cell(&[(OutcomeKind::Violated, 1), (OutcomeKind::FsckFailed, 2)]);
        both.story = Some("fsync /a (op 1) is durable here, but /a is absent".into());
        both.fsck_failures = vec![crate::report::FsckFailure {
            message: "btrfs check --readonly --force exit 1: root dir 256 error".into(),
            count: 2,
            first_state: "sync.3/e4:0".into(),
            first_position: Some(7),
        }];
        let r = judge(&e, Known::Buggy, &[both.clone()]);
        assert_eq!(r.result, RecallResult::Found);
        assert_eq!(
            r.story.as_deref(),
            Some("btrfs check --readonly --force exit 1: root dir 256 error (2 state(s), first sync.3/e4:0)")
        );
        // When the worst outcome is an expected one, its own story stands.
        let e = Entry { expected: vec![OutcomeKind::Violated, OutcomeKind::FsckFailed], ..entry() };
        let r = judge(&e, Known::Buggy, &[both]);
        assert_eq!(r.story.as_deref(), Some("fsync /a (op 1) is durable here, but /a is absent"));
    }

    #[test]
    fn the_figures_count_the_results() {
        let e = entry();
        let held = [cell(&[(OutcomeKind::Held, 3)])];
        let violated = [cell(&[(OutcomeKind::Violated, 3)])];
        let results = [
            judge(&e, Known::Buggy, &violated),
            judge(&e, Known::Buggy, &violated),
            judge(&e, Known::Buggy, &held),
            judge(&e, Known::Fixed, &held),
            judge(&e, Known::Fixed, &violated),
            judge(&e, Known::Unknown, &held),
        ];
        let s = RecallSummary::of(&results);
        assert_eq!((s.expected, s.found, s.missed), (3, 2, 1));
        assert_eq!((s.fixed, s.false_alarms, s.not_known), (2, 1, 1));
        assert_eq!(s.recall, Some(2.0 / 3.0));
        assert_eq!(s.precision, Some(0.5));
        assert!(s.line().starts_with("recall 2/3 (67%); precision 1/2 (50%)"), "{}", s.line());
        assert_eq!(RecallSummary::of(&[]).recall, None);
    }
}
