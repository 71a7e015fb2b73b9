//! Results a person or a machine reads: a cell (one configuration x one property) with its
//! verdict and counts, witness directories that replay exactly, and the text/JSON forms.

pub mod table;
pub mod witness;

use serde::{Deserialize, Serialize};

use crate::check::{Outcome, StateResult};

/// A cell's verdict; each failure category stays its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellVerdict {
    /// Some explored state violates the property.
    Violated,
    /// The property held in every state explored.
    Held,
    /// Some state could not be recovered (and none violated the property).
    MountFailed,
    /// Some state recovered with fsck complaints (and none violated or failed to mount).
    FsckFailed,
    /// Some external step hung.
    Timeout,
    /// The configuration cannot run here.
    Unavailable,
}

impl CellVerdict {
    /// kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            CellVerdict::Violated => "violated",
            CellVerdict::Held => "held",
            CellVerdict::MountFailed => "mount-failed",
            CellVerdict::FsckFailed => "fsck-failed",
            CellVerdict::Timeout => "timeout",
            CellVerdict::Unavailable => "unavailable",
        }
    }
}

/// How many explored states ended in each outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// Held.
    pub held: usize,
    /// Violated.
    pub violated: usize,
    /// Mount (recovery) failed.
    pub mount_failed: usize,
    /// fsck complained.
    pub fsck_failed: usize,
    /// Timed out.
    pub timeout: usize,
}

/// One configuration x property result, as `bob run` and `bob table` print it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Configuration name.
    pub config: String,
    /// Property name.
    pub property: String,
    /// The verdict.
    pub verdict: CellVerdict,
    /// Crash states covered (every state generated, duplicates included).
    pub states_explored: usize,
    /// Distinct states actually mounted (after content dedup).
    pub states_unique: usize,
    /// Wall time of the cell, recording included.
    pub seconds: f64,
    /// Witness directory of the first violation (or first failure), if any.
    pub witness: Option<String>,
    /// The first violation's (or failure's) one-line story.
    pub story: Option<String>,
    /// Id of the witness's crash state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_state: Option<String>,
    /// Position of the witness's state in the cell's full (unsharded) state list, so that
    /// merged shards pick the same witness an unsharded run would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_position: Option<usize>,
    /// Whether an independent replay of the witness (fresh image, loop device and mount)
    /// reached the same outcome; a cross that does not is marked, never silently printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    /// `I/N` when this cell covers one shard of its crash states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Outcome counts over explored states.
    pub counts: OutcomeCounts,
    /// Why the configuration is unavailable, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Folds per-state results into counts, the verdict, and the index of the state whose
/// witness the cell shows (the first violation, else the first failure of the category
/// the verdict names).
pub fn summarize(results: &[StateResult]) -> (CellVerdict, OutcomeCounts, Option<usize>) {
    let mut counts = OutcomeCounts::default();
    for r in results {
        match r.check.outcome {
            Outcome::Held => counts.held += 1,
            Outcome::Violated { .. } => counts.violated += 1,
            Outcome::MountFailed { .. } => counts.mount_failed += 1,
            Outcome::FsckFailed { .. } => counts.fsck_failed += 1,
            Outcome::Timeout { .. } => counts.timeout += 1,
        }
    }
    let verdict = if counts.violated > 0 {
        CellVerdict::Violated
    } else if counts.mount_failed > 0 {
        CellVerdict::MountFailed
    } else if counts.fsck_failed > 0 {
        CellVerdict::FsckFailed
    } else if counts.timeout > 0 {
        CellVerdict::Timeout
    } else {
        CellVerdict::Held
    };
    let witness = results
        .iter()
        .position(|r| r.check.outcome.name() == verdict.name() && verdict != CellVerdict::Held);
    (verdict, counts, witness)
}

impl Cell {
    /// Human-readable lines for the terminal.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{} / {}: {} ({} states explored, {} unique, {:.1}s)\n",
            self.config,
            self.property,
            self.verdict.name().to_uppercase(),
            self.states_explored,
            self.states_unique,
            self.seconds
        );
        let c = &self.counts;
        s.push_str(&format!(
            "  outcomes: {} held, {} violated, {} mount-failed, {} fsck-failed, {} timeout\n",
            c.held, c.violated, c.mount_failed, c.fsck_failed, c.timeout
        ));
        if let Some(story) = &self.story {
            s.push_str(&format!("  story:   {story}\n"));
        }
        if let Some(w) = &self.witness {
            let confirmed = match self.confirmed {
                Some(true) => " (confirmed by an independent replay)",
                Some(false) => " (NOT confirmed: an independent replay reached another outcome)",
                None => "",
            };
            s.push_str(&format!(
                "  witness: {w}{confirmed}\n  replay:  bob replay {w} --to crash.img --check\n"
            ));
        }
        if let Some(u) = &self.unavailable {
            s.push_str(&format!("  unavailable: {u}\n"));
        }
        s
    }
}
