//! The one table of outcomes: every way a crash state, or a cell of the property table,
//! can end, with its JSON/CLI name, its table letter, its precedence and its exit code.
//!
//! A state's [`super::Outcome`] (which carries its data: the story, the kernel's error,
//! the repair steps) and a cell's verdict both map to an [`OutcomeKind`]; everything that
//! summarizes, merges, prints, colours or exits asks this table ([`ROWS`]: name, letter,
//! exit code, colour on a page and on a terminal, JUnit form, legend) instead of comparing
//! strings or keeping a list of its own. A new outcome joins by adding a variant here and
//! its row to [`ROWS`], at the variant's position (checked when compiling);
//! [`OutcomeKind::ALL`] is read from it, and the unit tests below keep names and letters
//! distinct.
//!
//! | kind | letter | exit | meaning |
//! |---|---|---|---|
//! | `violated` | `x` | 1 | a state violates the property (after repair, if one was needed) |
//! | `kernel-crash` | `K` | 1 | recovering a state crashed the kernel (panic, oops, BUG, a hang), in a virtual machine |
//! | `unrecoverable` | `U` | 1 | a state does not mount even after the repair ladder |
//! | `read-error` | `E` | 1 | a state mounts but reading it fails (the file system detected damage) |
//! | `fsck-failed` | `F` | 1 | the property held but the read-only fsck found damage |
//! | `timeout` | `T` | 1 | an external step hung and was killed |
//! | `needs-repair` | `R` | 1 | the kernel would not mount a state; the repair tool made it mountable and the property held there |
//! | `infra-error` | `I` | 2 | bob's own machinery (loop device, mount, FUSE disk) failed on a state twice: that state was not checked |
//! | `not-exercised` | `N` | 0 | no state tested what the property is about (nothing failed, nothing was shown) |
//! | `held` | (empty) | 0 | held in every state explored |
//! | `not-applicable` | `-` | 0 | the configuration cannot run this property |
//! | `unavailable` | `n/a` | 0 | the configuration cannot run on this machine |
//!
//! Precedence is the table's row order: a cell whose states differ shows the first kind
//! any of them reached. Exit codes: 0 when nothing failed (held, and the kinds that say a
//! cell was not run or not exercised: a table with unavailable configurations is not a
//! failed run), 1 for a violation or any failure of a crash state, 2 for `infra-error`:
//! bob could not check every state, which says nothing about the file system. It ranks
//! below every failure a state showed (a violation found is a conclusion, whatever else
//! went unchecked) and above what says "nothing failed" (a held cell with an unchecked
//! state is not held). `bob run` of a single unavailable configuration still exits 2 (an
//! environment error): see the CLI.

use serde::{Deserialize, Serialize};

/// What a crash state, or a cell, came to. Fieldless: the data lives in
/// [`super::Outcome`] and in the cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// Some state violates the property.
    Violated,
    /// Recovering some state crashed the kernel (inside a virtual machine, which bob
    /// booted again to check the rest).
    KernelCrash,
    /// Some state still does not mount after the repair ladder. Tables and journals
    /// written before schema 2 called it `mount-failed`.
    #[serde(alias = "mount-failed")]
    Unrecoverable,
    /// Some state mounted but a read failed (EIO, EBADMSG, ...).
    ReadError,
    /// The property held but the read-only fsck complained.
    FsckFailed,
    /// An external step hung.
    Timeout,
    /// The kernel mount failed, repair made the state mountable, the property held.
    NeedsRepair,
    /// bob's own machinery failed on a state, and again on a fresh loop device and mount
    /// point: the state was not checked.
    InfraError,
    /// Nothing in the explored states exercised the property.
    NotExercised,
    /// Held in every state explored.
    Held,
    /// The property cannot be run on this configuration.
    NotApplicable,
    /// The configuration cannot run here.
    Unavailable,
}

/// How a CI test reporter sees a cell of a kind (JUnit XML, `report::junit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JunitForm {
    /// A passing test case.
    Pass,
    /// `<skipped>`: not run, or nothing to judge.
    Skipped,
    /// `<failure>`: the file system failed it.
    Failure,
    /// `<error>`: bob could not check it.
    Error,
}

/// One row of the outcome table: everything bob shows or decides about a kind.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// The kind.
    pub kind: OutcomeKind,
    /// The kebab-case name used in JSON, on the command line and as the HTML class.
    pub name: &'static str,
    /// The letter a table cell shows (empty for held).
    pub letter: &'static str,
    /// The process exit code it asks for: 0 when nothing failed, 1 for a violation or a
    /// failure of a crash state, 2 when bob could not check a state.
    pub exit: u8,
    /// Whether a single checked crash state can have it (the others describe cells).
    pub state: bool,
    /// The CSS declarations of its class on every HTML page bob writes (a background; a
    /// grey text for a configuration that cannot run here).
    pub css: &'static str,
    /// Its colour on a terminal (an SGR code, as near the page's colour as ANSI gets).
    pub ansi: &'static str,
    /// Its JUnit form.
    pub junit: JunitForm,
    /// One line for the table's legend.
    pub legend: &'static str,
}

/// The outcome table, in precedence order (the first one a cell's states reached is the
/// cell's verdict), which is also the order the variants are declared in.
pub(crate) const ROWS: [Row; 12] = {
    use JunitForm::{Error, Failure, Pass, Skipped};
    use OutcomeKind as K;
    const fn row(
        kind: OutcomeKind,
        (name, letter, exit, state): (&'static str, &'static str, u8, bool),
        (css, ansi, junit): (&'static str, &'static str, JunitForm),
        legend: &'static str,
    ) -> Row {
        Row { kind, name, letter, exit, state, css, ansi, junit, legend }
    }
    [
        row(K::Violated, ("violated", "x", 1, true), ("background:#f4b8b8", "1;31", Failure),
            "a crash state that bob found and can replay violates the property (after repair, if the state needed one)"),
        row(K::KernelCrash, ("kernel-crash", "K", 1, true), ("background:#e8c0e8", "1;35", Failure),
            "recovering a crash state crashed the kernel (panic, oops, BUG or hang) in the virtual machine bob booted; its console log is kept beside the witness"),
        row(K::Unrecoverable, ("unrecoverable", "U", 1, true), ("background:#f8dca0", "1;35", Failure),
            "no violation, but a crash state does not mount even after the file system's repair tool"),
        row(K::ReadError, ("read-error", "E", 1, true), ("background:#f6cfb0", "1;35", Failure),
            "no violation, but a crash state mounts and a read fails (the file system detected damage)"),
        row(K::FsckFailed, ("fsck-failed", "F", 1, true), ("background:#eeeea0", "33", Failure),
            "no violation, but the read-only fsck complained"),
        row(K::Timeout, ("timeout", "T", 1, true), ("background:#dcc8f0", "33", Failure),
            "no violation, but a step hung"),
        row(K::NeedsRepair, ("needs-repair", "R", 1, true), ("background:#fff0c8", "33", Failure),
            "the property held, but some crash state mounted only after the file system's repair tool"),
        row(K::InfraError, ("infra-error", "I", 2, true), ("background:#c8d8f0", "1;34", Error),
            "not checked: bob's own loop device, mount or FUSE disk failed on a crash state twice (nothing concluded about it; run again with --resume)"),
        row(K::NotExercised, ("not-exercised", "N", 0, false), ("background:#e4e4e4", "2", Skipped),
            "no explored state exercised the property"),
        row(K::Held, ("held", "", 0, true), ("background:#d4f0d4", "32", Pass),
            "held in every state explored"),
        row(K::NotApplicable, ("not-applicable", "-", 0, false), ("background:#f4f4f4", "2", Skipped),
            "the property does not apply to this configuration"),
        row(K::Unavailable, ("unavailable", "n/a", 0, false), ("color:#888", "2", Skipped),
            "the configuration cannot run on this machine"),
    ]
};

// Each kind's row sits at the kind's own position, so `row` is an index.
const _: () = {
    let mut i = 0;
    while i < ROWS.len() {
        assert!(ROWS[i].kind as usize == i, "ROWS must list the kinds in declaration order");
        i += 1;
    }
};

impl OutcomeKind {
    /// Every kind, in precedence order: the kinds of [`ROWS`].
    pub const ALL: [OutcomeKind; 12] = {
        let mut all = [OutcomeKind::Held; 12];
        let mut i = 0;
        while i < ROWS.len() {
            all[i] = ROWS[i].kind;
            i += 1;
        }
        all
    };

    /// The kinds a single checked crash state can have (the others describe cells): those
    /// of [`ROWS`] marked `state`, in precedence order.
    pub const STATE: [OutcomeKind; 9] = {
        let mut kinds = [OutcomeKind::Held; 9];
        let mut n = 0;
        let mut i = 0;
        while i < ROWS.len() {
            if ROWS[i].state {
                kinds[n] = ROWS[i].kind;
                n += 1;
            }
            i += 1;
        }
        assert!(n == kinds.len(), "STATE's length is the number of rows marked state");
        kinds
    };

    /// Its row of [`ROWS`].
    pub fn row(self) -> &'static Row {
        &ROWS[self as usize]
    }

    /// The kebab-case name used in JSON and on the command line.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// The kind named `name` (also the names older documents used: `mount-failed`).
    pub(crate) fn from_name(name: &str) -> Option<OutcomeKind> {
        match name {
            "mount-failed" => Some(OutcomeKind::Unrecoverable),
            _ => OutcomeKind::ALL.into_iter().find(|k| k.name() == name),
        }
    }

    /// The letter a table cell shows (empty for held).
    pub fn letter(self) -> &'static str {
        self.row().letter
    }

    /// Position in precedence order: lower wins when a cell's states differ.
    pub(crate) fn precedence(self) -> usize {
        self as usize
    }

    /// The process exit code this kind asks for: 0 when nothing failed, 1 for a violation
    /// or a failure of a crash state, 2 when bob could not check a state.
    pub fn exit_code(self) -> u8 {
        self.row().exit
    }

    /// Whether a cell of this kind counts as failed (its exit code is not 0).
    pub(crate) fn is_failure(self) -> bool {
        self.exit_code() != 0
    }

    /// One line for the table's legend.
    pub(crate) fn legend(self) -> &'static str {
        self.row().legend
    }

    /// The style rules of every kind's class (`.violated{background:...}`), for the
    /// style sheet of each HTML page bob writes.
    pub(crate) fn stylesheet() -> String {
        ROWS.iter().map(|r| format!(".{}{{{}}}", r.name, r.css)).collect()
    }

    /// The kind a cell shows when its states reached `kinds`: the first in precedence
    /// order, [`OutcomeKind::Held`] when there are none.
    pub fn worst(kinds: impl IntoIterator<Item = OutcomeKind>) -> OutcomeKind {
        kinds.into_iter().min_by_key(|k| k.precedence()).unwrap_or(OutcomeKind::Held)
    }
}

impl Default for OutcomeKind {
    /// [`OutcomeKind::Held`]: a cell before any state is counted.
    fn default() -> Self {
        OutcomeKind::Held
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What checking one crash state found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Recovered, fsck clean, property held.
    Held,
    /// The property failed; the story says how (and, when the state needed repair first,
    /// after which repair step: "after xfs_repair -L: ...").
    Violated {
        /// One line a person understands.
        story: String,
    },
    /// Recovering the state crashed the guest kernel bob booted it in.
    KernelCrash {
        /// The console line that says how (`Kernel panic - not syncing: ...`).
        message: String,
        /// The guest's console log of that boot.
        console: String,
    },
    /// The kernel would not mount the state; a step of the configuration's repair ladder
    /// made it mountable, and the property held in the repaired state.
    NeedsRepair {
        /// The kernel's answer to the first mount.
        message: String,
        /// The repair step after which it mounted (`e2fsck -f -y`).
        repaired_by: String,
    },
    /// The state does not mount, even after the repair ladder. Journals of schema 1
    /// called it `mount-failed`.
    #[serde(alias = "mount-failed")]
    Unrecoverable {
        /// The kernel's answer to the first mount (or what the routine fsck said).
        message: String,
    },
    /// The state mounted, but reading it failed: the file system detected damage.
    ReadError {
        /// The path whose read failed (empty when a failed walk of the tree did not say
        /// where).
        path: String,
        /// The error (with its errno).
        error: String,
    },
    /// The property held but the read-only fsck found damage.
    FsckFailed {
        /// What fsck said.
        message: String,
    },
    /// An external step hung and was killed.
    Timeout {
        /// Which step.
        step: String,
    },
    /// bob's own machinery failed on this state, and again when retried on a fresh loop
    /// device and mount point: the state was not checked. Never journaled as a verdict.
    InfraError {
        /// What failed and where, one line (`loop device /dev/loop7: attach: ...`).
        message: String,
    },
}

impl Outcome {
    /// Its row of the outcome table.
    pub fn kind(&self) -> OutcomeKind {
        match self {
            Outcome::Held => OutcomeKind::Held,
            Outcome::Violated { .. } => OutcomeKind::Violated,
            Outcome::KernelCrash { .. } => OutcomeKind::KernelCrash,
            Outcome::NeedsRepair { .. } => OutcomeKind::NeedsRepair,
            Outcome::Unrecoverable { .. } => OutcomeKind::Unrecoverable,
            Outcome::ReadError { .. } => OutcomeKind::ReadError,
            Outcome::FsckFailed { .. } => OutcomeKind::FsckFailed,
            Outcome::Timeout { .. } => OutcomeKind::Timeout,
            Outcome::InfraError { .. } => OutcomeKind::InfraError,
        }
    }
    /// Short kebab-case name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// The one-line explanation (story, error, step).
    pub fn detail(&self) -> String {
        match self {
            Outcome::Held => String::new(),
            Outcome::Violated { story } => story.clone(),
            Outcome::KernelCrash { message, console } => {
                format!("recovering it crashed the kernel: {message} (console log: {console})")
            }
            Outcome::NeedsRepair { message, repaired_by } => {
                format!("{message}; mounted after {repaired_by}, the property held")
            }
            Outcome::Unrecoverable { message } | Outcome::FsckFailed { message } => message.clone(),
            Outcome::ReadError { path, error } if path.is_empty() => {
                format!("reading the recovered tree: {error}")
            }
            Outcome::ReadError { path, error } => format!("reading {path}: {error}"),
            Outcome::Timeout { step } => step.clone(),
            Outcome::InfraError { message } => format!("not checked: {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_name_and_letter_and_its_json_is_its_name() {
        let mut names = std::collections::HashSet::new();
        let mut letters = std::collections::HashSet::new();
        for k in OutcomeKind::ALL {
            assert!(names.insert(k.name()), "name {} twice", k.name());
            assert!(letters.insert(k.letter()), "letter {:?} twice", k.letter());
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            let back: OutcomeKind = serde_json::from_value(k.name().into()).unwrap();
            assert_eq!(back, k);
            assert_eq!(OutcomeKind::from_name(k.name()), Some(k));
            assert!(!k.legend().is_empty());
            assert_eq!(k.row().kind, k);
        }
        assert_eq!(names.len(), OutcomeKind::ALL.len());
    }

    /// The tables written for people (this module's and docs/outcomes.md's) list the
    /// rows as [`ROWS`] has them: name, letter and exit code, in precedence order.
    #[test]
    fn the_written_tables_match_the_rows() {
        let rows: Vec<(String, String, String)> = ROWS
            .iter()
            .map(|r| {
                let letter =
                    if r.letter.is_empty() { "(empty)".into() } else { format!("`{}`", r.letter) };
                (format!("`{}`", r.name), letter, r.exit.to_string())
            })
            .collect();
        let table = |text: &str, prefix: &str| -> Vec<(String, String, String)> {
            text.lines()
                .filter_map(|l| l.strip_prefix(prefix))
                .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
                .filter(|cells| cells.len() > 3 && cells[0].starts_with('`'))
                .map(|cells| (cells[0].to_owned(), cells[1].to_owned(), cells[2].to_owned()))
                .collect()
        };
        let here = table(include_str!("outcome.rs"), "//! | ");
        assert_eq!(here, rows, "check/outcome.rs's table");
        let docs = table(include_str!("../../../../docs/outcomes.md"), "| ");
        assert_eq!(docs[..rows.len()], rows[..], "docs/outcomes.md's table");
    }

    #[test]
    fn old_mount_failed_reads_as_unrecoverable() {
        let k: OutcomeKind = serde_json::from_str("\"mount-failed\"").unwrap();
        assert_eq!(k, OutcomeKind::Unrecoverable);
        assert_eq!(OutcomeKind::from_name("mount-failed"), Some(OutcomeKind::Unrecoverable));
        assert_eq!(OutcomeKind::from_name("nonsense"), None);
    }

    #[test]
    fn precedence_puts_violations_first_and_held_after_every_failure() {
        use OutcomeKind::*;
        assert_eq!(Violated.precedence(), 0);
        let order: Vec<usize> = OutcomeKind::ALL.iter().map(|k| k.precedence()).collect();
        assert_eq!(order, (0..OutcomeKind::ALL.len()).collect::<Vec<_>>());
        assert_eq!(OutcomeKind::worst([Held, NeedsRepair, Unrecoverable, Violated]), Violated);
        assert_eq!(OutcomeKind::worst([Held, NeedsRepair, Unrecoverable]), Unrecoverable);
        assert_eq!(OutcomeKind::worst([Held, NeedsRepair]), NeedsRepair);
        assert_eq!(OutcomeKind::worst([ReadError, FsckFailed, Timeout]), ReadError);
        // An unchecked state hides no failure found elsewhere, and no held cell hides it.
        assert_eq!(OutcomeKind::worst([Held, InfraError, NeedsRepair]), NeedsRepair);
        assert_eq!(OutcomeKind::worst([Held, InfraError, NotExercised]), InfraError);
        assert_eq!(OutcomeKind::worst([]), Held);
        for k in OutcomeKind::ALL.into_iter().filter(|k| k.is_failure()) {
            assert!(k.precedence() < Held.precedence(), "{k} must outrank held");
        }
    }

    #[test]
    fn exit_codes_fail_on_violations_and_state_failures_and_2_on_unchecked_states() {
        use OutcomeKind::*;
        for k in [Held, NotExercised, NotApplicable, Unavailable] {
            assert_eq!(k.exit_code(), 0, "{k}");
        }
        for k in [Violated, Unrecoverable, ReadError, FsckFailed, Timeout, NeedsRepair] {
            assert_eq!(k.exit_code(), 1, "{k}");
        }
        assert_eq!(InfraError.exit_code(), 2, "bob could not check everything");
        for k in OutcomeKind::STATE {
            assert!(OutcomeKind::ALL.contains(&k));
        }
    }
}
