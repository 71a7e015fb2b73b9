//! The property table: configurations x properties, as Markdown, JSON or one
//! self-contained HTML file, and the merge of tables (CI matrix jobs, shards).

use std::collections::BTreeMap;

use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde::{Deserialize, Serialize};

use super::{
    merge_fsck_failures, merge_mount_failures, merge_read_errors, Cell, CellVerdict, OutcomeKind,
};

/// A whole table, as `bob table --format json` prints it and `bob merge` reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// [`super::SCHEMA_VERSION`] of the document.
    #[serde(default = "super::schema_v1")]
    pub schema_version: u32,
    /// `uname -r` of the machine that ran it.
    pub kernel: String,
    /// bob's version.
    pub tool_version: String,
    /// Configuration names, in column order.
    pub configs: Vec<String>,
    /// Property names, in row order.
    pub properties: Vec<String>,
    /// The cells.
    pub cells: Vec<Cell>,
    /// Notes for the header (which driver serves ext2/ext3, unavailable configurations).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Merge errors.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// Two inputs come from different kernels.
    #[error("tables from different kernels: {0} and {1}")]
    KernelMismatch(String, String),
    /// Two results of one cell were checked from different recordings of a schedule
    /// (shards that each recorded afresh): their states are no partition of one trace.
    #[error(
        "{config} / {property}: schedule {schedule} was recorded twice (trace {first} and \
         {second}); shards must check one recording: record once with `bob table \
         --record-only --out DIR` and check shards with `--traces DIR`"
    )]
    TraceMismatch {
        /// Configuration.
        config: String,
        /// Property.
        property: String,
        /// The drain schedule.
        schedule: String,
        /// The trace digest of the first input with the cell.
        first: String,
        /// The other input's.
        second: String,
    },
    /// Two shards of one cell split its states differently (`1/3` and `2/4`), or one
    /// shard came twice: their sum would not be the cell's states once each.
    #[error(
        "{config} / {property}: shards {first} and {second} do not split the cell's states \
         once each; merge one of each shard I/N of the same N"
    )]
    ShardMismatch {
        /// Configuration.
        config: String,
        /// Property.
        property: String,
        /// The shard seen first (`1/3`).
        first: String,
        /// The one that does not fit with it.
        second: String,
    },
}

fn symbol(v: CellVerdict) -> &'static str {
    v.letter()
}

/// The small note beside a cell's numbers: states that needed repair (`r3`), states that
/// stayed unmountable (`u1`), states that mounted but could not be read (`e2`) and states
/// bob could not check (`i1`); empty when there were none.
fn repair_note(cell: &Cell) -> String {
    let repaired: usize =
        cell.mount_failures.iter().filter(|f| f.repaired_by.is_some()).map(|f| f.count).sum();
    let lost: usize =
        cell.mount_failures.iter().filter(|f| f.repaired_by.is_none()).map(|f| f.count).sum();
    // Cells of schema 1 have counts but no causes.
    let lost = lost.max(cell.counts.unrecoverable);
    let repaired = repaired.max(cell.counts.needs_repair);
    let mut parts = Vec::new();
    if repaired > 0 {
        parts.push(format!("r{repaired}"));
    }
    if lost > 0 {
        parts.push(format!("u{lost}"));
    }
    if cell.counts.read_error > 0 {
        parts.push(format!("e{}", cell.counts.read_error));
    }
    if cell.counts.infra_error > 0 {
        parts.push(format!("i{}", cell.counts.infra_error));
    }
    parts.join(" ")
}

/// What a footnote says of a cell's states bob could not check, if it has any.
fn infra_note(cell: &Cell) -> Option<String> {
    (cell.counts.infra_error > 0).then(|| {
        format!(
            "{} state(s) not checked, bob's own machinery failed on them twice (first {})",
            cell.counts.infra_error,
            cell.infra_error.as_deref().unwrap_or("?")
        )
    })
}

/// What a footnote says of a racy cell: in how many of its recordings each racy schedule
/// was violated.
fn racy_note(cell: &Cell) -> Option<String> {
    let racy = cell.racy_text();
    (!racy.is_empty()).then(|| racy.join(", "))
}

/// What a cell of a table shows when the table has no result for it (a cell that never
/// ran, a shard or job left out of a merge): never blank, which is held's mark in
/// Markdown, nor `-`, which is not-applicable's.
pub(crate) const MISSING_MARK: &str = "?";

/// The legend of [`MISSING_MARK`].
pub(crate) const MISSING_LEGEND: &str = "not run: the table has no result for this cell";

/// The mark a held cell shows where marks are not text alone (the HTML table and the
/// site): a check mark, so that colour is never the only sign of a verdict.
pub(crate) const HELD_MARK: &str = "\u{2713}";

/// The mark a cell shows in HTML (the table's page and the site): its letter, a check
/// mark for held, `x?` for a cross no independent replay confirmed.
pub(crate) fn html_mark(c: &Cell) -> &'static str {
    if c.confirmed == Some(false) || c.confirm_error.is_some() {
        return "x?";
    }
    match c.verdict.letter() {
        "" => HELD_MARK,
        l => l,
    }
}

/// The legend under a table: every letter that can appear, from the outcome table, and
/// the mark of a missing cell; `held` is what a held cell shows (empty in Markdown).
fn legend(held: &str) -> String {
    OutcomeKind::ALL
        .into_iter()
        .map(|k| {
            let letter = match k.letter() {
                "" if held.is_empty() => "empty",
                "" => held,
                l => l,
            };
            format!("{letter} = {}", k.legend())
        })
        .chain(std::iter::once(format!("{MISSING_MARK} = {MISSING_LEGEND}")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the numbers of a cell are.
const NUMBERS: &str =
    "Numbers: states mounted / distinct / explored (mounted: distinct states that \
     mounted, by themselves or after repair; distinct: after merging states with identical \
     contents; explored: every crash state generated); rN: N states mounted only after \
     repair; uN: N states never mounted; eN: N states mounted but a read failed; iN: N \
     states not checked because bob's own loop device, mount or FUSE disk failed on them \
     twice (run again with --resume).";

/// What `racy` beside a cell's numbers means, said under a table that has one.
const RACY: &str =
    "racy: a drain schedule recorded more than once was violated in some of its recordings \
     and not in others (the footnote says k of n), or was in earlier runs on this kernel \
     (--flip-history), so another run may give the other verdict; bob diff reports such a \
     cell as racy, not as a change.";

/// Merges two results for the same cell (two shards of it, or a rerun of the same
/// recordings); refuses results of different recordings of a schedule.
fn merge_cell(a: &mut Cell, b: &Cell) -> Result<(), MergeError> {
    if b.verdict == CellVerdict::Unavailable {
        return Ok(());
    }
    if a.verdict == CellVerdict::Unavailable {
        *a = b.clone();
        return Ok(());
    }
    same_recordings(a, b)?;
    a.counts.merge(&b.counts);
    a.states_explored += b.states_explored;
    a.states_unique += b.states_unique;
    a.states_mounted += b.states_mounted;
    // Every shard counts what the cap left out of the whole list, not of its share.
    a.states_left_out = a.states_left_out.max(b.states_left_out);
    a.add_speed_counts(b);
    a.seconds += b.seconds;
    a.infra_retries += b.infra_retries;
    a.infra_error = a.infra_error.take().or_else(|| b.infra_error.clone());
    a.verdict = a.counts.verdict();
    merge_mount_failures(&mut a.mount_failures, &b.mount_failures);
    merge_read_errors(&mut a.read_errors, &b.read_errors);
    merge_fsck_failures(&mut a.fsck_failures, &b.fsck_failures);
    super::PromiseCoverage::merge(&mut a.promises, &b.promises);
    a.apply_promise_coverage();
    super::BesideFindings::merge(&mut a.other_reorderings, &b.other_reorderings);
    super::BesideFindings::merge(&mut a.other_durability, &b.other_durability);
    for sc in &b.schedules {
        match a.schedules.iter_mut().find(|x| x.schedule == sc.schedule) {
            Some(x) => x.merge(sc),
            None => a.schedules.push(sc.clone()),
        }
    }
    a.update_racy();
    // Shards of one cell share its traces, so the op spanned the same barriers in each.
    a.op_barriers = match (a.op_barriers, b.op_barriers) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    if a.op_barriers.unwrap_or(1) > 0 {
        a.not_exercised = None;
    } else {
        a.not_exercised = a.not_exercised.take().or_else(|| b.not_exercised.clone());
        if a.verdict == CellVerdict::Held {
            a.verdict = CellVerdict::NotExercised;
        }
    }
    for sc in &b.scenarios {
        match a.scenarios.iter_mut().find(|x| x.scenario == sc.scenario) {
            Some(x) => x.merge(sc),
            None => a.scenarios.push(sc.clone()),
        }
    }
    // The witness an unsharded run would show: of the verdict's category, earliest state.
    let mut candidates: Vec<&Cell> = Vec::new();
    for c in [&*a, b] {
        if c.witness.is_some() && c.verdict == a.verdict {
            candidates.push(c);
        }
    }
    if let Some(best) =
        candidates.into_iter().min_by_key(|c| c.witness_position.unwrap_or(usize::MAX)).cloned()
    {
        a.witness = best.witness;
        a.story = best.story;
        a.discrepancy = best.discrepancy;
        a.witness_state = best.witness_state;
        a.witness_position = best.witness_position;
        a.confirmed = best.confirmed;
        a.confirm_error = best.confirm_error;
        a.earlier_op = best.earlier_op;
        a.later_op = best.later_op;
        a.witness_schedule = best.witness_schedule;
    }
    a.shard = None;
    Ok(())
}

/// Whether `a` and `b` were checked from the same recording of every schedule both have
/// (one trace digest per schedule; an empty digest is unknown and compares with any).
fn same_recordings(a: &Cell, b: &Cell) -> Result<(), MergeError> {
    for x in &a.schedules {
        let Some(y) = b.schedules.iter().find(|y| y.schedule == x.schedule) else { continue };
        if !x.trace_digest.is_empty()
            && !y.trace_digest.is_empty()
            && x.trace_digest != y.trace_digest
        {
            return Err(MergeError::TraceMismatch {
                config: a.config.clone(),
                property: a.property.clone(),
                schedule: x.schedule.clone(),
                first: x.trace_digest.clone(),
                second: y.trace_digest.clone(),
            });
        }
    }
    Ok(())
}

impl Grid {
    /// Merges tables: cells of the same configuration and property (shards, or the same
    /// cell run twice) are combined; row and column order follow first appearance.
    pub fn merge(grids: Vec<Grid>) -> Result<Grid, MergeError> {
        let mut iter = grids.into_iter();
        let mut out = iter.next().ok_or(MergeError::Empty)?;
        out.schema_version = super::SCHEMA_VERSION;
        let mut index: BTreeMap<(String, String, crate::crash::DiskModel), usize> = BTreeMap::new();
        let mut cells: Vec<Cell> = Vec::new();
        // The shards (`I/N`) seen of each cell, so that each is merged once and all of one N.
        let mut shards: BTreeMap<(String, String, crate::crash::DiskModel), Vec<String>> =
            BTreeMap::new();
        let mut add = |cell: Cell, cells: &mut Vec<Cell>| {
            let key = (cell.config.clone(), cell.property.clone(), cell.disk_model);
            if let Some(shard) = cell.shard.clone() {
                let seen = shards.entry(key.clone()).or_default();
                let count = |s: &str| s.split_once('/').map(|(_, n)| n.to_owned());
                if let Some(clash) = seen.iter().find(|s| **s == shard || count(s) != count(&shard))
                {
                    return Err(MergeError::ShardMismatch {
                        config: cell.config.clone(),
                        property: cell.property.clone(),
                        first: clash.clone(),
                        second: shard,
                    });
                }
                seen.push(shard);
            }
            match index.get(&key) {
                Some(&i) => merge_cell(&mut cells[i], &cell)?,
                None => {
                    index.insert(key, cells.len());
                    let mut cell = cell;
                    cell.shard = None;
                    cells.push(cell);
                }
            }
            Ok::<(), MergeError>(())
        };
        for c in std::mem::take(&mut out.cells) {
            add(c, &mut cells)?;
        }
        for g in iter {
            if g.kernel != out.kernel {
                return Err(MergeError::KernelMismatch(out.kernel, g.kernel));
            }
            for name in g.configs {
                if !out.configs.contains(&name) {
                    out.configs.push(name);
                }
            }
            for name in g.properties {
                if !out.properties.contains(&name) {
                    out.properties.push(name);
                }
            }
            for note in g.notes {
                if !out.notes.contains(&note) {
                    out.notes.push(note);
                }
            }
            for c in g.cells {
                add(c, &mut cells)?;
            }
        }
        // What this bob writes is of its schema, whatever the inputs were.
        for c in &mut cells {
            c.schema_version = super::SCHEMA_VERSION;
        }
        out.cells = cells;
        Ok(out)
    }

    fn cell(&self, config: &str, property: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.config == config && c.property == property)
    }

    /// The disk models of the cells, in the order they first appear.
    pub fn disk_models(&self) -> Vec<crate::crash::DiskModel> {
        let mut out = Vec::new();
        for c in &self.cells {
            if !out.contains(&c.disk_model) {
                out.push(c.disk_model);
            }
        }
        out
    }

    /// The table of one disk model: the same header, only that model's cells.
    pub(crate) fn for_model(&self, model: crate::crash::DiskModel) -> Grid {
        Grid {
            cells: self.cells.iter().filter(|c| c.disk_model == model).cloned().collect(),
            ..self.clone()
        }
    }

    /// "Disk model: 4096 B atomic writes, real FUA." for a table of one model.
    fn model_line(&self) -> String {
        match self.disk_models().as_slice() {
            [m] => format!(" Disk model: {m}."),
            _ => String::new(),
        }
    }

    /// Cells whose verdict differs between disk models, each with the state that makes
    /// the difference (the witness of the model where it failed): what tearing changes.
    pub(crate) fn model_differences(&self) -> Vec<String> {
        let models = self.disk_models();
        let mut out = Vec::new();
        for p in &self.properties {
            for c in &self.configs {
                let cells: Vec<&Cell> = models
                    .iter()
                    .filter_map(|m| {
                        self.cells
                            .iter()
                            .find(|x| &x.config == c && &x.property == p && x.disk_model == *m)
                    })
                    .collect();
                if cells.len() < 2 || cells.iter().all(|x| x.verdict == cells[0].verdict) {
                    continue;
                }
                let verdicts: Vec<String> = cells
                    .iter()
                    .map(|x| format!("{} B: {}", x.disk_model.atomic_write_unit, x.verdict.name()))
                    .collect();
                let why: Vec<String> = cells
                    .iter()
                    .filter(|x| x.witness.is_some())
                    .map(|x| {
                        format!(
                            "under {} B, {}",
                            x.disk_model.atomic_write_unit,
                            x.story.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                out.push(format!("{p} / {c}: {} — {}", verdicts.join(", "), why.join("; ")));
            }
        }
        out
    }

    /// Crosses and other failures, in table order, numbered as the table's footnotes (a
    /// cell with states bob could not check among them, saying which).
    fn failures(&self) -> Vec<&Cell> {
        let mut v = Vec::new();
        for p in &self.properties {
            for c in &self.configs {
                if let Some(cell) = self.cell(c, p) {
                    if cell.witness.is_some()
                        || cell.racy
                        || cell.verdict == CellVerdict::NotExercised
                        || cell.counts.infra_error > 0
                    {
                        v.push(cell);
                    }
                }
            }
        }
        v
    }

    /// Totals over all cells: (explored, distinct, seconds).
    pub fn totals(&self) -> (usize, usize, f64) {
        self.cells.iter().fold((0, 0, 0.0), |(e, u, s), c| {
            (e + c.states_explored, u + c.states_unique, s + c.seconds)
        })
    }

    /// Distinct states that mounted, over all cells.
    pub(crate) fn total_mounted(&self) -> usize {
        self.cells.iter().map(|c| c.states_mounted).sum()
    }

    /// The table as Markdown: properties as rows, configurations as columns; each cell
    /// shows its symbol and `unique/explored` states, each failure a footnote number. With
    /// cells of several disk models, one table per model, then what tearing changes.
    pub(crate) fn to_markdown(&self) -> String {
        let models = self.disk_models();
        if models.len() <= 1 {
            return self.model_markdown();
        }
        let mut s = String::new();
        for m in models {
            s.push_str(&format!("## Disk model: {m}\n\n"));
            s.push_str(&self.for_model(m).model_markdown());
            s.push('\n');
        }
        s.push_str("## What the disk model changes\n\n");
        let diffs = self.model_differences();
        if diffs.is_empty() {
            s.push_str("No cell's verdict differs between the disk models.\n");
        }
        for d in diffs {
            s.push_str(&format!("- {d}\n"));
        }
        s
    }

    /// [`Grid::to_markdown`] of a table of one disk model.
    fn model_markdown(&self) -> String {
        let failures = self.failures();
        let note_of = |cell: &Cell| {
            failures.iter().position(|f| f.config == cell.config && f.property == cell.property)
        };
        let mut s = String::new();
        s.push_str(&format!(
            "Kernel {}, bob {}.{}\n\n",
            self.kernel,
            self.tool_version,
            self.model_line()
        ));
        for n in &self.notes {
            s.push_str(&format!("- {n}\n"));
        }
        if !self.notes.is_empty() {
            s.push('\n');
        }
        s.push_str(&self.md_header(&["property"], ""));
        for p in &self.properties {
            s.push_str(&format!("| {p} |"));
            for c in &self.configs {
                let text = match self.cell(c, p) {
                    None => MISSING_MARK.to_owned(),
                    Some(cell) if cell.verdict == CellVerdict::Unavailable => "n/a".into(),
                    Some(cell) => {
                        let mark = if cell.confirmed == Some(false) || cell.confirm_error.is_some()
                        {
                            "x?"
                        } else if cell.verdict == CellVerdict::Held && cell.states_left_out > 0 {
                            "*"
                        } else {
                            symbol(cell.verdict)
                        };
                        let note =
                            note_of(cell).map(|i| format!(" [{}]", i + 1)).unwrap_or_default();
                        let repairs = repair_note(cell);
                        format!(
                            "{mark}{}{}/{}/{}{}{repairs}{}{note}",
                            if mark.is_empty() { "" } else { " " },
                            cell.states_mounted,
                            cell.states_unique,
                            cell.states_explored,
                            if repairs.is_empty() { "" } else { " " },
                            if cell.racy { " racy" } else { "" },
                        )
                    }
                };
                s.push_str(&format!(" {text} |"));
            }
            s.push('\n');
        }
        let (e, u, secs) = self.totals();
        s.push_str(&format!(
            "\n{}. {NUMBERS} Totals: {} states mounted, {u} distinct, {e} explored, {secs:.0} s.\n",
            legend(""),
            self.total_mounted()
        ));
        if self.cells.iter().any(|c| c.racy) {
            s.push_str(&format!("\n{RACY}\n"));
        }
        s.push_str(&self.capped_note());
        if !failures.is_empty() {
            s.push('\n');
            for (i, cell) in failures.iter().enumerate() {
                let mut what = match (&cell.witness, &cell.not_exercised) {
                    (Some(w), _) => {
                        format!("{} — witness `{w}`", cell.story.as_deref().unwrap_or(""))
                    }
                    (None, Some(why)) => why.clone(),
                    (None, None) => String::new(),
                };
                if let Some(unchecked) = infra_note(cell) {
                    what = if what.is_empty() { unchecked } else { format!("{what}; {unchecked}") };
                }
                if let Some(racy) = racy_note(cell) {
                    what = if what.is_empty() { racy } else { format!("{what}; {racy}") };
                }
                s.push_str(&format!(
                    "{}. {} / {} ({}): {what}\n",
                    i + 1,
                    cell.property,
                    cell.config,
                    cell.verdict.name(),
                ));
            }
        }
        s.push_str(&self.beside_markdown());
        s.push_str(&self.scenarios_markdown());
        s
    }

    /// What a state cap left out, when it left anything: a capped `held` (`*`) says only
    /// that no checked state broke the property.
    fn capped_note(&self) -> String {
        let capped: Vec<&Cell> = self.cells.iter().filter(|c| c.states_left_out > 0).collect();
        if capped.is_empty() {
            return String::new();
        }
        let left: usize = capped.iter().map(|c| c.states_left_out).sum();
        let held = capped.iter().filter(|c| c.verdict == CellVerdict::Held).count();
        format!(
            "\nA state cap (`--max-states`) left {left} distinct crash states out of {} cells, \
             evenly over each recording's epochs; `*` marks the {held} of them that held: no \
             state checked broke the property, which does not say that none of those left out \
             would.\n",
            capped.len()
        )
    }

    /// Findings of other rows seen in cells' states (a reordering outside the row's pair,
    /// a durability failure in a non-durability workload): listed, never crossed.
    fn beside_markdown(&self) -> String {
        let mut lines = Vec::new();
        for p in &self.properties {
            for c in &self.configs {
                let Some(cell) = self.cell(c, p) else { continue };
                for (what, b) in [
                    ("reorderings outside the row's pair", &cell.other_reorderings),
                    ("durability failures", &cell.other_durability),
                ] {
                    if let Some(b) = b {
                        lines.push(format!("- {p} / {c}: {what}: {}\n", b.to_text()));
                    }
                }
            }
        }
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\nSeen beside the table (another row's finding, not these cells' verdict):\n\n{}",
            lines.concat()
        )
    }

    /// A Markdown header row: the `leading` columns, then one per configuration (its name
    /// and `suffix`), and the separator row.
    fn md_header(&self, leading: &[&str], suffix: &str) -> String {
        let mut s = String::from("|");
        for l in leading {
            s.push_str(&format!(" {l} |"));
        }
        for c in &self.configs {
            s.push_str(&format!(" {c}{suffix} |"));
        }
        s.push_str("\n|");
        s.push_str(&"---|".repeat(leading.len() + self.configs.len()));
        s.push('\n');
        s
    }

    /// Properties whose cells carry per-scenario results, in row order.
    fn scenario_properties(&self) -> Vec<&str> {
        self.properties
            .iter()
            .filter(|p| self.cells.iter().any(|c| &c.property == *p && !c.scenarios.is_empty()))
            .map(String::as_str)
            .collect()
    }

    /// Scenario names of `property`, in the order the cells list them.
    fn scenario_names(&self, property: &str) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for c in self.cells.iter().filter(|c| c.property == property) {
            for sc in &c.scenarios {
                if !names.contains(&sc.scenario) {
                    names.push(sc.scenario.clone());
                }
            }
        }
        names
    }

    /// The row's "error found": every kind some configuration returned silently.
    fn scenario_error(&self, property: &str, scenario: &str) -> String {
        let mut kinds: Vec<&str> = Vec::new();
        let mut caught = false;
        for c in self.cells.iter().filter(|c| c.property == property) {
            for sc in c.scenarios.iter().filter(|x| x.scenario == scenario) {
                kinds.extend(sc.silent_kinds.iter().map(String::as_str));
                caught |= sc.error_states > 0;
            }
        }
        kinds.sort_unstable();
        kinds.dedup();
        match (kinds.is_empty(), caught) {
            (false, _) => kinds.join(", "),
            (true, true) => "only errors returned".into(),
            (true, false) => "none".into(),
        }
    }

    /// Per property with scenarios (`detects-inconsistency`): one row per scenario of the
    /// NoFS thesis' reliability table, the error bob found, and whether each configuration
    /// detected it (no silent result in any state) or not (with the state to replay).
    fn scenarios_markdown(&self) -> String {
        let mut s = String::new();
        let mut notes: Vec<String> = Vec::new();
        for p in self.scenario_properties() {
            s.push_str(&format!(
                "\n{p}, per scenario of the NoFS thesis' reliability table (table 5.6): \
                 \"detected?\" is yes when no crash state returned a wrong result silently on \
                 the scenario's paths (accesses failing with an error count as detection).\n\n"
            ));
            s.push_str(
                &self.md_header(&["scenario", "thesis' error", "error found"], " detected?"),
            );
            for name in self.scenario_names(p) {
                s.push_str(&format!(
                    "| {name} | {} | {} |",
                    thesis_error(&name),
                    self.scenario_error(p, &name)
                ));
                for c in &self.configs {
                    let sc = self
                        .cell(c, p)
                        .and_then(|cell| cell.scenarios.iter().find(|x| x.scenario == name));
                    let text = match sc {
                        None => String::new(),
                        Some(sc) if sc.silent_states > 0 => {
                            notes.push(format!(
                                "{p} / {c} / {name}: {} (state {}) — `bob replay {} --state {} --to crash.img --check`",
                                sc.story.as_deref().unwrap_or(""),
                                sc.witness_state.as_deref().unwrap_or("?"),
                                self.cell(c, p).and_then(|x| x.witness.as_deref()).unwrap_or("?"),
                                sc.witness_state.as_deref().unwrap_or("?"),
                            ));
                            let mark = if sc.confirmed == Some(false) { "no?" } else { "no" };
                            format!(
                                "{mark}: silent {} in {} [s{}]",
                                sc.silent_kinds.join(", "),
                                sc.silent_states,
                                notes.len()
                            )
                        }
                        Some(sc) if sc.error_states > 0 => {
                            format!("yes: error returned in {}", sc.error_states)
                        }
                        Some(_) => "yes: nothing wrong".into(),
                    };
                    s.push_str(&format!(" {text} |"));
                }
                s.push('\n');
            }
        }
        if !notes.is_empty() {
            s.push('\n');
            for (i, n) in notes.iter().enumerate() {
                s.push_str(&format!("s{}. {n}\n", i + 1));
            }
        }
        s
    }

    /// One self-contained HTML page: the table, each failure a link to its story below;
    /// with cells of several disk models, one page section per model, each headed by it,
    /// then what the disk model changes. maud escapes every interpolated string by
    /// construction (stories quote paths and kernel messages).
    pub(crate) fn to_html(&self) -> String {
        let models = self.disk_models();
        let body = if models.len() <= 1 {
            self.model_html(true)
        } else {
            html! {
                @for m in &models {
                    section {
                        h1 { "Disk model: " (m.to_string()) }
                        (self.for_model(*m).model_html(false))
                    }
                }
                h1 { "What the disk model changes" }
                ul { @for d in self.model_differences() { li { (d) } } }
            }
        };
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    title { "bob: persistence properties" }
                    style { (PreEscaped(STYLE)) (PreEscaped(OutcomeKind::stylesheet())) }
                }
                body { (body) }
            }
        }
        .into_string()
    }

    /// The body of [`Grid::to_html`] for a table of one disk model; `top` when it is the
    /// page's only section (its heading is then the page's `h1`).
    fn model_html(&self, top: bool) -> Markup {
        let failures = self.failures();
        let failure_index = |cell: &Cell| {
            failures.iter().position(|f| f.config == cell.config && f.property == cell.property)
        };
        let intro =
            format!("Kernel {}, bob {}.{}", self.kernel, self.tool_version, self.model_line());
        html! {
            @if top { h1 { "Persistence properties" } } @else { h2 { "Persistence properties" } }
            p { (intro) }
            @if !self.notes.is_empty() {
                ul { @for n in &self.notes { li { (n) } } }
            }
            table {
                tr {
                    th.p { "property" }
                    @for c in &self.configs { th { (c) } }
                }
                @for p in &self.properties {
                    tr {
                        td.p { (p) }
                        @for c in &self.configs {
                            @match self.cell(c, p) {
                                None => td.missing title=(MISSING_LEGEND) { (MISSING_MARK) },
                                Some(cell) => td class=(cell.verdict.name()) {
                                    @if let Some(i) = failure_index(cell) {
                                        a href={ "#w" (i + 1) } title=(cell.story.as_deref().unwrap_or("")) {
                                            (html_mark(cell))
                                        }
                                        " "
                                    } @else {
                                        (html_mark(cell)) " "
                                    }
                                    span.n {
                                        (cell.states_mounted) "/" (cell.states_unique) "/"
                                        (cell.states_explored)
                                    }
                                    @let repairs = repair_note(cell);
                                    @if !repairs.is_empty() { " " small.n { (repairs) } }
                                    @if let Some(racy) = racy_note(cell) {
                                        " " small.racy title=(racy) { "racy" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p.n {
                (legend(HELD_MARK)) ". " (NUMBERS)
                @if self.cells.iter().any(|c| c.racy) { " " (RACY) }
            }
            @if !failures.is_empty() {
                h2 { "Witnesses" }
                ol {
                    @for (i, cell) in failures.iter().enumerate() {
                        li id={ "w" (i + 1) } {
                            b { (cell.property) " / " (cell.config) }
                            " (" (cell.verdict.name()) "): " (cell.story.as_deref().unwrap_or(""))
                            @if let Some(unchecked) = infra_note(cell) { " " (unchecked) }
                            @if let Some(racy) = racy_note(cell) { " " (racy) "." }
                            @if let Some(w) = &cell.witness {
                                br;
                                code { "bob replay " (w) " --to crash.img" }
                            }
                        }
                    }
                }
            }
            @for p in self.scenario_properties() {
                h2 { (p) ", per scenario of the reliability table" }
                table {
                    tr {
                        th.p { "scenario" }
                        th { "thesis' error" }
                        th { "error found" }
                        @for c in &self.configs { th { (c) " detected?" } }
                    }
                    @for name in self.scenario_names(p) {
                        tr {
                            td.p { (name) }
                            td { (thesis_error(&name)) }
                            td { (self.scenario_error(p, &name)) }
                            @for c in &self.configs {
                                @let cell = self.cell(c, p);
                                @let sc = cell.and_then(|x| x.scenarios.iter().find(|y| y.scenario == name));
                                @match sc {
                                    None => td {},
                                    Some(sc) if sc.silent_states > 0 => td.violated title=(sc.story.as_deref().unwrap_or("")) {
                                        "no: silent " (sc.silent_kinds.join(", ")) " in " (sc.silent_states)
                                        br;
                                        code {
                                            "bob replay " (cell.and_then(|x| x.witness.as_deref()).unwrap_or("?"))
                                            " --state " (sc.witness_state.as_deref().unwrap_or("?"))
                                            " --to crash.img --check"
                                        }
                                    },
                                    Some(sc) => td {
                                        "yes"
                                        @if sc.error_states > 0 { ": error returned in " (sc.error_states) }
                                    },
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The page's style sheet: inline, so the page is one self-contained file (the outcomes'
/// colours follow, from the outcome table).
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3em .6em;text-align:center}\
th.p,td.p{text-align:left;font-family:monospace}\
.n{color:#777;font-size:.8em}.racy{color:#a60;font-weight:bold}.missing{color:#999;font-style:italic}\
a{color:#900;font-weight:bold;text-decoration:none}li{margin:.4em 0}code{background:#f4f4f4}";

/// The thesis' errors for every row of table 5.6 with this system call.
fn thesis_error(scenario: &str) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for row in researchfs::reliability::scenarios().into_iter().filter(|r| r.op == scenario) {
        for k in row.thesis_error.split(", ") {
            if !kinds.iter().any(|x| x == k) {
                kinds.push(k.to_owned());
            }
        }
    }
    if kinds.is_empty() {
        "-".into()
    } else {
        kinds.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::super::{OutcomeCounts, ScenarioCell};
    use super::*;

    fn cell(config: &str, property: &str, verdict: CellVerdict, pos: Option<usize>) -> Cell {
        let failed = !matches!(verdict, CellVerdict::Held | CellVerdict::Unavailable);
        let mut counts = OutcomeCounts { held: 10, ..Default::default() };
        match verdict {
            CellVerdict::Violated => counts.violated = 2,
            CellVerdict::Unrecoverable => counts.unrecoverable = 1,
            _ => {}
        }
        Cell {
            schema_version: super::super::SCHEMA_VERSION,
            config: config.into(),
            property: property.into(),
            verdict,
            states_explored: counts.held + counts.violated + counts.unrecoverable,
            states_unique: 9,
            states_mounted: 8,
            seconds: 1.5,
            witness: failed.then(|| format!("out/{config}/{property}")),
            story: failed.then(|| format!("story of {config} {property}")),
            witness_state: failed.then(|| "e1:0".into()),
            witness_position: if failed { pos } else { None },
            shard: None,
            confirmed: failed.then_some(true),
            counts,
            mount_failures: Vec::new(),
            read_errors: Vec::new(),
            fsck_failures: Vec::new(),
            unavailable: (verdict == CellVerdict::Unavailable).then(|| "gone".into()),
            ..Default::default()
        }
    }

    fn grid(cells: Vec<Cell>) -> Grid {
        Grid {
            schema_version: super::super::SCHEMA_VERSION,
            kernel: "6.18.0-test".into(),
            tool_version: "0.1.0".into(),
            configs: vec!["ext2".into(), "ext4-ordered".into(), "reiserfs".into()],
            properties: vec!["single-block-append".into(), "append-then-rename".into()],
            cells,
            notes: vec!["ext2 and ext3 are served by the ext4 driver.".into()],
        }
    }

    #[test]
    fn a_cross_whose_replay_could_not_run_stands_unconfirmed_and_says_why() {
        let mut g = sample();
        let i = g.cells.iter().position(|c| c.verdict == CellVerdict::Violated).unwrap();
        g.cells[i].confirmed = None;
        g.cells[i].confirm_error = Some("loop device: no free device".into());
        assert!(g.to_markdown().contains("x?"), "{}", g.to_markdown());
        let text = g.cells[i].to_text();
        assert!(text.contains("NOT confirmed: the independent replay could not run: loop device"));
    }

    #[test]
    fn html_escapes_what_file_systems_and_users_wrote() {
        let mut g = sample();
        g.cells[0].story = Some("/A/<script>alert(1)</script> & \"quoted\"".into());
        g.notes.push("<i>note</i>".into());
        let html = g.to_html();
        assert!(!html.contains("<script>") && !html.contains("<i>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;"));
    }

    fn sample() -> Grid {
        // A cross whose cell also had states that needed repair: the table still says so.
        let mut repaired = cell("ext2", "single-block-append", CellVerdict::Violated, Some(3));
        repaired.counts.needs_repair = 2;
        repaired.mount_failures = vec![super::super::MountFailure {
            error: "mount -t ext2 -o defaults: Bad message (os error 74)".into(),
            repaired_by: Some("e2fsck -f -y".into()),
            count: 2,
            first_state: "e2:0[2]".into(),
            first_position: Some(5),
            torn_write_role: Some(crate::fs::regions::RegionRole::Superblock),
        }];
        grid(vec![
            repaired,
            cell("ext4-ordered", "single-block-append", CellVerdict::Held, None),
            cell("reiserfs", "single-block-append", CellVerdict::Unavailable, None),
            cell("ext2", "append-then-rename", CellVerdict::Violated, Some(1)),
            cell("ext4-ordered", "append-then-rename", CellVerdict::Unrecoverable, Some(7)),
        ])
    }

    #[test]
    fn a_cell_with_states_bob_could_not_check_says_so_in_the_table() {
        let mut g = sample();
        let c = &mut g.cells[1];
        c.counts.held -= 1;
        c.counts.infra_error = 1;
        c.verdict = c.counts.verdict();
        c.infra_error = Some("sync/e1:0: FUSE disk at /x: aborted".into());
        let md = g.to_markdown();
        assert!(md.contains("| I 8/9/10 i1 [2] |"), "{md}");
        assert!(
            md.contains(
                "2. single-block-append / ext4-ordered (infra-error): 1 state(s) not checked"
            ),
            "{md}"
        );
        assert!(md.contains("iN: N states not checked"), "{md}");
        let html = g.to_html();
        assert!(html.contains("(infra-error): ") && html.contains("sync/e1:0: FUSE disk"));
    }

    #[test]
    fn markdown_rendering() {
        insta::assert_snapshot!("table_markdown", sample().to_markdown());
    }

    #[test]
    fn html_rendering_is_self_contained_and_links_every_failure() {
        let html = sample().to_html();
        assert!(!html.contains("<script") && !html.contains("src=\"http"));
        for i in 1..=3 {
            assert!(
                html.contains(&format!("href=\"#w{i}\"")) && html.contains(&format!("id=\"w{i}\""))
            );
        }
        // One line per row and item, so that snapshot diffs read.
        let lines = ["</tr>", "</li>", "</h1>", "</h2>", "</p>", "</style>"]
            .iter()
            .fold(html.clone(), |h, end| h.replace(end, &format!("{end}\n")));
        insta::assert_snapshot!("table_html", lines);
    }

    #[test]
    fn two_disk_models_give_two_tables_and_what_tearing_changes() {
        let sector = crate::crash::DiskModel::study();
        let mut cells = sample().cells;
        let mut torn = cell("ext4-ordered", "single-block-append", CellVerdict::Violated, Some(2));
        torn.disk_model = sector;
        torn.story = Some("/A/log size grew but the new block is a mix (state e3:0[0-3])".into());
        cells.push(torn);
        let g = grid(cells);
        assert_eq!(g.disk_models().len(), 2);
        let md = g.to_markdown();
        assert!(md.contains("## Disk model: 4096 B atomic writes, real FUA"), "{md}");
        assert!(md.contains("## Disk model: 512 B atomic writes, barrier FUA"), "{md}");
        let diffs = g.model_differences();
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(diffs[0]
            .starts_with("single-block-append / ext4-ordered: 4096 B: held, 512 B: violated"));
        assert!(diffs[0].contains("state e3:0[0-3]"));
        let html = g.to_html();
        assert_eq!(html.matches("<html").count(), 1);
        assert!(html.contains("What the disk model changes"));
        // Merging keeps cells of different models apart.
        let merged = Grid::merge(vec![g.clone(), g]).unwrap();
        assert_eq!(merged.cells.len(), 6);
    }

    #[test]
    fn a_durability_promise_due_in_no_state_is_not_exercised_never_held() {
        let promise = |states| crate::report::PromiseCoverage {
            op: workloads::Op::Fsync { path: "/A/f0".into() }.op_ref(1),
            states,
        };
        let mut a = cell("ext2", "fsync-durable", CellVerdict::Held, None);
        a.promises = vec![promise(0)];
        a.apply_promise_coverage();
        assert_eq!(a.verdict, CellVerdict::NotExercised);
        assert!(a.to_text().contains("not exercised: no crash state after fsync /A/f0 (op 1)"));
        // Another shard's states exercised it: merged, the cell is judged.
        let mut b = cell("ext2", "fsync-durable", CellVerdict::Held, None);
        b.promises = vec![promise(3)];
        merge_cell(&mut a, &b).unwrap();
        assert_eq!(a.verdict, CellVerdict::Held);
        // Only durability rows turn into not-exercised.
        let mut c = cell("ext2", "append-then-dir-op", CellVerdict::Held, None);
        c.promises = vec![promise(0)];
        c.apply_promise_coverage();
        assert_eq!(c.verdict, CellVerdict::Held);
    }

    #[test]
    fn merge_of_shards_sums_counts_and_keeps_the_earliest_witness() {
        let mut a = cell("ext2", "single-block-append", CellVerdict::Violated, Some(9));
        a.shard = Some("1/2".into());
        let mut b = cell("ext2", "single-block-append", CellVerdict::Violated, Some(4));
        b.story = Some("earlier".into());
        let c = cell("ext2", "single-block-append", CellVerdict::Held, None);
        let merged = Grid::merge(vec![grid(vec![a]), grid(vec![b]), grid(vec![c])]).unwrap();
        assert_eq!(merged.cells.len(), 1);
        let m = &merged.cells[0];
        assert_eq!(m.verdict, CellVerdict::Violated);
        assert_eq!(m.counts.violated, 4);
        assert_eq!(m.counts.held, 30);
        assert_eq!(m.states_explored, 12 + 12 + 10);
        assert_eq!(m.witness_position, Some(4));
        assert_eq!(m.story.as_deref(), Some("earlier"));
        assert_eq!(m.shard, None);
    }

    fn scenario(name: &str, silent: usize, errors: usize, pos: Option<usize>) -> ScenarioCell {
        ScenarioCell {
            scenario: name.into(),
            silent_kinds: if silent > 0 { vec!["HL".into()] } else { Vec::new() },
            silent_states: silent,
            error_states: errors,
            witness_state: pos.map(|p| format!("e0:{p}")),
            witness_position: pos,
            story: pos.map(|_| "silent HL: /a has link count 2 but 1 name(s) reach it".into()),
            confirmed: pos.map(|_| true),
        }
    }

    #[test]
    fn scenario_rows_merge_across_shards_and_render_one_row_each() {
        let p = "detects-inconsistency";
        let mut a = cell("orderless", p, CellVerdict::Violated, Some(7));
        a.scenarios = vec![scenario("link", 2, 0, Some(7)), scenario("mkdir", 0, 1, None)];
        let mut b = cell("orderless", p, CellVerdict::Violated, Some(3));
        b.scenarios = vec![scenario("link", 1, 4, Some(3)), scenario("mkdir", 0, 0, None)];
        let mut n = cell("nofs", p, CellVerdict::Held, None);
        n.scenarios = vec![scenario("link", 0, 5, None), scenario("mkdir", 0, 0, None)];
        let detection = |cells| Grid {
            configs: vec!["orderless".into(), "nofs".into()],
            properties: vec![p.into()],
            ..grid(cells)
        };
        let merged = Grid::merge(vec![detection(vec![a, n]), detection(vec![b])]).unwrap();
        let o = merged.cell("orderless", p).unwrap();
        assert_eq!(o.scenarios[0].silent_states, 3);
        assert_eq!(o.scenarios[0].error_states, 4);
        assert_eq!(o.scenarios[0].witness_position, Some(3), "the earliest state wins");
        assert_eq!(o.scenarios[1].error_states, 1);
        let md = merged.to_markdown();
        assert!(
            md.contains(
                "| link | C-HL, C-OI | HL | no: silent HL in 3 [s1] | yes: error returned in 5 |"
            ),
            "{md}"
        );
        assert!(md.contains("| mkdir | P-BD, C-OB, C-BD, C-OI | only errors returned | yes: error returned in 1 | yes: nothing wrong |"), "{md}");
        assert!(md.contains("--state e0:3 --to crash.img --check"), "{md}");
        assert!(merged.to_html().contains("--state e0:3"));
    }

    #[test]
    fn merge_refuses_shards_of_different_recordings_in_one_line() {
        let share = |digest: &str| crate::report::ScheduleCell {
            schedule: "sync".into(),
            trace_digest: digest.into(),
            verdict: CellVerdict::Held,
            states_explored: 5,
            states_unique: 5,
            counts: Default::default(),
            first_state: None,
            first_position: None,
            op_barriers: None,
            fua_writes: 0,
            fua_postflushes: 0,
            ..Default::default()
        };
        let shard = |i: usize, digest: &str| {
            let mut c = cell("ext4-ordered", "append-then-rename", CellVerdict::Held, None);
            c.shard = Some(format!("{i}/2"));
            c.schedules = vec![share(digest)];
            grid(vec![c])
        };
        let (one, other) = ("ab".repeat(32), "cd".repeat(32));
        let same = Grid::merge(vec![shard(1, &one), shard(2, &one)]).unwrap();
        assert_eq!(same.cells[0].schedules[0].states_explored, 10);
        let twice = Grid::merge(vec![shard(1, &one), shard(1, &one)]).unwrap_err();
        assert!(matches!(twice, MergeError::ShardMismatch { .. }), "{twice}");
        assert!(twice.to_string().contains("shards 1/2 and 1/2"), "{twice}");
        let mut of_three = shard(2, &one);
        of_three.cells[0].shard = Some("2/3".into());
        let split = Grid::merge(vec![shard(1, &one), of_three]).unwrap_err();
        assert!(split.to_string().contains("shards 1/2 and 2/3"), "{split}");
        let e = Grid::merge(vec![shard(1, &one), shard(2, &other)]).unwrap_err();
        assert!(matches!(e, MergeError::TraceMismatch { .. }), "{e}");
        let text = e.to_string();
        assert!(!text.contains('\n'), "one line: {text}");
        for part in ["ext4-ordered / append-then-rename", "schedule sync", &one, &other] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    /// A racy cell says so beside its numbers, in its footnote (k of n, in words) and in
    /// the legend; shards of its recordings merge into the union of the recordings each
    /// saw violated.
    #[test]
    fn a_racy_cell_says_so_in_every_table_and_merges_by_recording() {
        let share = |violated_in: Vec<usize>| crate::report::ScheduleCell {
            schedule: "syncfs".into(),
            trace_digest: "ab".repeat(32),
            verdict: if violated_in.is_empty() { CellVerdict::Held } else { CellVerdict::Violated },
            recordings: 3,
            racy: crate::report::ScheduleCell::is_racy(violated_in.len(), 3),
            violated_in,
            ..Default::default()
        };
        let mut c = cell("ext4-ordered", "single-block-append", CellVerdict::Violated, Some(3));
        c.schedules = vec![share(vec![2])];
        c.update_racy();
        let g = grid(vec![c.clone()]);
        let md = g.to_markdown();
        assert!(md.contains("| x 8/9/12 racy [1] |"), "{md}");
        assert!(md.contains("syncfs violated in 1 of 3 recordings: racy"), "{md}");
        assert!(md.contains("racy: a drain schedule recorded more than once"), "{md}");
        let html = g.to_html();
        assert!(html.contains(">racy</small>"), "{html}");
        assert!(html.contains("syncfs violated in 1 of 3 recordings: racy."), "{html}");
        // A table with no racy cell says nothing of it.
        let plain =
            grid(vec![cell("ext4-ordered", "single-block-append", CellVerdict::Held, None)]);
        assert!(!plain.to_markdown().contains("racy"));

        // Two shards of the same three recordings: one saw recording 2 violated, the other
        // recordings 2 and 3; the whole is violated in 2 of 3, still racy. With all three,
        // it is not.
        let shard = |i: usize, violated_in: Vec<usize>| {
            let mut c = c.clone();
            c.shard = Some(format!("{i}/2"));
            c.schedules = vec![share(violated_in)];
            c.update_racy();
            grid(vec![c])
        };
        let merged = Grid::merge(vec![shard(1, vec![2]), shard(2, vec![2, 3])]).unwrap();
        let s = &merged.cells[0].schedules[0];
        assert_eq!((s.violated_in.clone(), s.recordings, s.racy), (vec![2, 3], 3, true));
        assert!(merged.cells[0].racy);
        let merged = Grid::merge(vec![shard(1, vec![1, 2]), shard(2, vec![3])]).unwrap();
        assert!(!merged.cells[0].schedules[0].racy && !merged.cells[0].racy, "3 of 3");
        assert_eq!(
            merged.cells[0].schedules[0].recordings_text().as_deref(),
            Some("violated in 3 of 3 recordings")
        );
    }

    #[test]
    fn merge_refuses_mixed_kernels() {
        let mut other = sample();
        other.kernel = "5.10".into();
        assert!(matches!(Grid::merge(vec![sample(), other]), Err(MergeError::KernelMismatch(..))));
        assert!(matches!(Grid::merge(vec![]), Err(MergeError::Empty)));
    }
}
