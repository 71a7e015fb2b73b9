//! `bob diff`: the cells whose verdict changed between two tables (two kernels, two disk
//! models, two drain schedules, two commits of a file system), so that CI can gate on a
//! regression. Cells are matched on configuration, property, disk model and drain
//! schedule; a dimension that is the one thing the two tables differ in (each table of
//! one disk model, and the models differ) is what is compared, not matched on.
//!
//! A cell or schedule share marked racy in either table (a violation appeared in some of
//! its recordings and not in others) is listed apart as racy when its verdicts differ:
//! another recording could have given either verdict, so the difference is no change of
//! the file system's, and it does not make `bob diff` exit 1.

use maud::{html, Markup};
use serde::{Deserialize, Serialize};

use super::table::Grid;
use super::{Cell, CellVerdict};
use crate::crash::DiskModel;

/// How a racy cell's difference is introduced, in text and Markdown.
const RACY: &str = "racy, not a change: ";

/// One side of a diff: where its table came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffSide {
    /// The table file as named on the command line.
    pub table: String,
    /// `uname -r` of the machine that ran it.
    pub kernel: String,
    /// bob's version.
    pub tool_version: String,
    /// Its disk models (as `512 B atomic writes, real FUA`).
    pub disk_models: Vec<String>,
}

/// The witness of one side of a change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffWitness {
    /// The verdict on this side.
    pub verdict: CellVerdict,
    /// Outcome counts, in words (`3 violated, ..., 40 held`).
    pub counts: String,
    /// The witness directory, as its table names it (absent: held, nothing to replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
    /// The witness's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Its story.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<String>,
    /// The disk model of this side's cell.
    pub disk_model: DiskModel,
    /// In how many of its recordings a violation appeared, when recorded more than once
    /// (`violated in 1 of 3 recordings: racy`); for a whole cell, its racy schedules'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recordings: Option<String>,
    /// Whether this side is marked racy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub racy: bool,
}

/// A cell (or one drain schedule's share of it) whose verdict changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellChange {
    /// Configuration.
    pub config: String,
    /// Property.
    pub property: String,
    /// The disk model, when both sides' cells have the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_model: Option<DiskModel>,
    /// The drain schedule whose share changed; absent: the cell's verdict (over every
    /// schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The first table's side.
    pub a: DiffWitness,
    /// The second's.
    pub b: DiffWitness,
}

/// A cell found in one table only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnmatchedCell {
    /// Configuration.
    pub config: String,
    /// Property.
    pub property: String,
    /// Disk model.
    pub disk_model: DiskModel,
    /// Its verdict.
    pub verdict: CellVerdict,
    /// When the cell is in both tables but this drain schedule's share of it in one only:
    /// the schedule (the cell's verdicts then rest on different recordings and are not
    /// compared; the schedules both ran are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// `bob diff A.json B.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableDiff {
    /// [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The first table.
    pub a: DiffSide,
    /// The second.
    pub b: DiffSide,
    /// What cells were matched on (`config`, `property`, `disk_model`, `schedule`).
    pub matched_on: Vec<String>,
    /// Cells present in both tables.
    pub matched: usize,
    /// Matched cells and schedule shares whose verdict changed, in the first table's
    /// order (a cell's own change first, then its schedules').
    pub changes: Vec<CellChange>,
    /// Matched cells and schedule shares whose verdicts differ but which are marked racy
    /// in either table: not changes (see the module documentation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub racy: Vec<CellChange>,
    /// Cells of the first table the second lacks.
    pub only_in_a: Vec<UnmatchedCell>,
    /// Cells of the second table the first lacks.
    pub only_in_b: Vec<UnmatchedCell>,
    /// What differs in the two tables' inputs (kernel, bob's version, disk models, drain
    /// schedules), each in words: what a change may come from besides the file system.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs_differ: Vec<String>,
}

fn side(table: &str, g: &Grid) -> DiffSide {
    DiffSide {
        table: table.into(),
        kernel: g.kernel.clone(),
        tool_version: g.tool_version.clone(),
        disk_models: g.disk_models().iter().map(|m| m.to_string()).collect(),
    }
}

fn witness(c: &Cell) -> DiffWitness {
    DiffWitness {
        verdict: c.verdict,
        counts: c.counts.text(),
        witness: c.witness.clone(),
        state: c.witness_state.clone(),
        story: c.story.clone(),
        disk_model: c.disk_model,
        recordings: (!c.racy_text().is_empty()).then(|| c.racy_text().join("; ")),
        racy: c.racy,
    }
}

fn unmatched(c: &Cell) -> UnmatchedCell {
    UnmatchedCell {
        config: c.config.clone(),
        property: c.property.clone(),
        disk_model: c.disk_model,
        verdict: c.verdict,
        schedule: None,
    }
}

/// The drain schedules of a table's cells, in first appearance.
fn schedules_of(g: &Grid) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in g.cells.iter().flat_map(|c| &c.schedules) {
        if !out.contains(&s.schedule) {
            out.push(s.schedule.clone());
        }
    }
    out
}

/// What differs between the inputs of `a` and `b`, in words.
fn inputs_differ(a: &Grid, b: &Grid) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: A {x}, B {y}"));
        }
    };
    differ("kernel", a.kernel.clone(), b.kernel.clone());
    differ("bob", a.tool_version.clone(), b.tool_version.clone());
    let models = |g: &Grid| g.disk_models().iter().map(|m| m.to_string()).collect::<Vec<_>>();
    differ("disk models", models(a).join("; "), models(b).join("; "));
    let none = |v: Vec<String>| if v.is_empty() { "none".to_owned() } else { v.join(",") };
    differ("drain schedules", none(schedules_of(a)), none(schedules_of(b)));
    out
}

impl TableDiff {
    /// The diff of table `a` (read from the file named `a_name`) against `b`.
    pub fn of(a_name: &str, a: &Grid, b_name: &str, b: &Grid) -> TableDiff {
        let (ma, mb) = (a.disk_models(), b.disk_models());
        // Two tables of one disk model each, different: the model is what is compared.
        let compare_models = ma.len() == 1 && mb.len() == 1 && ma != mb;
        let key = |c: &Cell| {
            (c.config.clone(), c.property.clone(), (!compare_models).then_some(c.disk_model))
        };
        let mut changes = Vec::new();
        let mut racy = Vec::new();
        let mut only_in_a = Vec::new();
        let mut only_in_b = Vec::new();
        let mut matched = 0;
        for ca in &a.cells {
            let Some(cb) = b.cells.iter().find(|cb| key(cb) == key(ca)) else {
                only_in_a.push(unmatched(ca));
                continue;
            };
            matched += 1;
            let model = (!compare_models).then_some(ca.disk_model);
            // A cell's verdict is over its schedules' states: two cells of different
            // schedules are not like with like, and only their common schedules compare.
            let names = |c: &Cell| c.schedules.iter().map(|s| s.schedule.clone()).collect();
            let (na, nb): (Vec<String>, Vec<String>) = (names(ca), names(cb));
            for (c, theirs, only) in [(ca, &nb, &mut only_in_a), (cb, &na, &mut only_in_b)] {
                for s in c.schedules.iter().filter(|s| !theirs.contains(&s.schedule)) {
                    only.push(UnmatchedCell {
                        verdict: s.verdict,
                        schedule: Some(s.schedule.clone()),
                        ..unmatched(c)
                    });
                }
            }
            let same_schedules = {
                let (mut x, mut y) = (na.clone(), nb.clone());
                x.sort();
                y.sort();
                x == y
            };
            if same_schedules && ca.verdict != cb.verdict {
                let list = if ca.racy || cb.racy { &mut racy } else { &mut changes };
                list.push(CellChange {
                    config: ca.config.clone(),
                    property: ca.property.clone(),
                    disk_model: model,
                    schedule: None,
                    a: witness(ca),
                    b: witness(cb),
                });
            }
            for sa in &ca.schedules {
                let Some(sb) = cb.schedules.iter().find(|s| s.schedule == sa.schedule) else {
                    continue;
                };
                if sa.verdict == sb.verdict {
                    continue;
                }
                let share = |c: &Cell, s: &super::ScheduleCell| DiffWitness {
                    verdict: s.verdict,
                    counts: s.counts.text(),
                    witness: c.witness.clone().filter(|_| s.first_state.is_some()),
                    state: s.first_state.clone(),
                    story: (c.witness_state == s.first_state).then(|| c.story.clone()).flatten(),
                    disk_model: c.disk_model,
                    recordings: s.recordings_text(),
                    racy: s.racy,
                };
                let list = if sa.racy || sb.racy { &mut racy } else { &mut changes };
                list.push(CellChange {
                    config: ca.config.clone(),
                    property: ca.property.clone(),
                    disk_model: model,
                    schedule: Some(sa.schedule.clone()),
                    a: share(ca, sa),
                    b: share(cb, sb),
                });
            }
        }
        only_in_b.extend(
            b.cells.iter().filter(|cb| !a.cells.iter().any(|ca| key(ca) == key(cb))).map(unmatched),
        );
        let mut matched_on = vec!["config".to_owned(), "property".to_owned()];
        if !compare_models {
            matched_on.push("disk_model".into());
        }
        matched_on.push("schedule".into());
        TableDiff {
            schema_version: super::SCHEMA_VERSION,
            a: side(a_name, a),
            b: side(b_name, b),
            matched_on,
            matched,
            changes,
            racy,
            only_in_a,
            only_in_b,
            inputs_differ: inputs_differ(a, b),
        }
    }

    /// The inputs' differences, one line each, or nothing.
    fn inputs_text(&self, bullet: &str) -> String {
        self.inputs_differ.iter().map(|d| format!("{bullet}inputs differ: {d}\n")).collect()
    }

    /// An unmatched cell or schedule share, in words.
    fn unmatched_text(name: &str, u: &UnmatchedCell) -> String {
        let schedule = u.schedule.as_deref().map(|s| format!(" schedule {s}")).unwrap_or_default();
        let what = if u.schedule.is_some() { " (not compared)" } else { "" };
        format!(
            "only in {name}: {} / {} [{}]{schedule}: {}{what}",
            u.property,
            u.config,
            u.disk_model.slug(),
            u.verdict.name()
        )
    }

    /// Whether some matched cell's verdict changed (`bob diff` exits 1 then). Cells in
    /// one table only are listed but change nothing: tables of different row sets still
    /// compare on the rows they share.
    pub fn changed(&self) -> bool {
        !self.changes.is_empty()
    }

    fn what(c: &CellChange) -> String {
        let mut s = format!("{} / {}", c.property, c.config);
        if let Some(m) = &c.disk_model {
            s.push_str(&format!(" [{}]", m.slug()));
        }
        if let Some(sc) = &c.schedule {
            s.push_str(&format!(" schedule {sc}"));
        }
        s
    }

    fn side_line(w: &DiffWitness) -> String {
        let mut s = format!("{} ({})", w.verdict.name(), w.counts);
        if let Some(r) = &w.recordings {
            s.push_str(&format!(", {r}"));
        }
        if let Some(story) = &w.story {
            s.push_str(&format!(": {story}"));
        }
        if let Some(dir) = &w.witness {
            let state = w.state.as_deref().map(|st| format!(" --state {st}")).unwrap_or_default();
            s.push_str(&format!("; replay: bob replay {dir}{state} --to crash.img --check"));
        }
        s
    }

    fn header(&self) -> String {
        let models = if self.matched_on.iter().any(|m| m == "disk_model") {
            String::new()
        } else {
            format!(
                "; disk models compared: A {}, B {}",
                self.a.disk_models.join(", "),
                self.b.disk_models.join(", ")
            )
        };
        format!(
            "A = {} (kernel {}), B = {} (kernel {}); {} cell(s) matched on {}{models}",
            self.a.table,
            self.a.kernel,
            self.b.table,
            self.b.kernel,
            self.matched,
            self.matched_on.join(", ")
        )
    }

    /// For the terminal; `paint(verdict, text)` may colour a verdict's name.
    pub(crate) fn to_text_with(&self, paint: &dyn Fn(CellVerdict, &str) -> String) -> String {
        let mut s = format!("{}\n", self.header());
        s.push_str(&self.inputs_text(""));
        if self.changes.is_empty() {
            s.push_str("no verdict changed\n");
        }
        for (c, racy) in
            self.changes.iter().map(|c| (c, "")).chain(self.racy.iter().map(|c| (c, RACY)))
        {
            s.push_str(&format!(
                "{racy}{}: {} -> {}\n  A: {}\n  B: {}\n",
                Self::what(c),
                paint(c.a.verdict, c.a.verdict.name()),
                paint(c.b.verdict, c.b.verdict.name()),
                Self::side_line(&c.a),
                Self::side_line(&c.b)
            ));
        }
        for (name, cells) in [("A", &self.only_in_a), ("B", &self.only_in_b)] {
            for u in cells {
                s.push_str(&format!("{}\n", Self::unmatched_text(name, u)));
            }
        }
        s
    }

    /// Plain text.
    pub fn to_text(&self) -> String {
        self.to_text_with(&|_, t| t.to_owned())
    }

    /// Markdown.
    pub(crate) fn to_markdown(&self) -> String {
        let mut s = format!("{}.\n\n", self.header());
        if !self.inputs_differ.is_empty() {
            s.push_str(&self.inputs_text("- "));
            s.push('\n');
        }
        if self.changes.is_empty() {
            s.push_str("No verdict changed.\n");
        } else {
            s.push_str("| cell | A | B |\n|---|---|---|\n");
            for c in &self.changes {
                s.push_str(&format!(
                    "| {} | {} | {} |\n",
                    Self::what(c),
                    c.a.verdict.name(),
                    c.b.verdict.name()
                ));
            }
            s.push('\n');
            for (i, c) in self.changes.iter().enumerate() {
                s.push_str(&format!(
                    "{}. {}\n   - A: {}\n   - B: {}\n",
                    i + 1,
                    Self::what(c),
                    Self::side_line(&c.a).replace('|', "\\|"),
                    Self::side_line(&c.b).replace('|', "\\|")
                ));
            }
        }
        if !self.racy.is_empty() {
            s.push_str(
                "\nRacy (violated in some recordings of a schedule and not in others, in \
                 either table), not changes:\n\n",
            );
            for c in &self.racy {
                s.push_str(&format!(
                    "- {}: {} -> {}\n   - A: {}\n   - B: {}\n",
                    Self::what(c),
                    c.a.verdict.name(),
                    c.b.verdict.name(),
                    Self::side_line(&c.a).replace('|', "\\|"),
                    Self::side_line(&c.b).replace('|', "\\|")
                ));
            }
            s.push('\n');
        }
        for (name, cells) in [("A", &self.only_in_a), ("B", &self.only_in_b)] {
            for u in cells {
                s.push_str(&format!("- {}\n", Self::unmatched_text(name, u)));
            }
        }
        s
    }

    /// The body of an HTML page of the diff; `link(side, change)` gives the page of a
    /// side's witness when the site has one.
    pub(crate) fn html_body(&self, link: &dyn Fn(char, &CellChange) -> Option<String>) -> Markup {
        let side = |name: char, c: &CellChange, w: &DiffWitness| {
            html! {
                td class=(w.verdict.name()) {
                    b { (w.verdict.name()) } br;
                    span.n { (w.counts) }
                    @if let Some(r) = &w.recordings { br; (r) }
                    @if let Some(story) = &w.story { br; (story) }
                    @if let Some(dir) = &w.witness {
                        br;
                        @if let Some(href) = link(name, c) {
                            a href=(href) { "witness page" } " "
                        }
                        code {
                            "bob replay " (dir)
                            @if let Some(st) = &w.state { " --state " (st) }
                            " --to crash.img --check"
                        }
                    }
                }
            }
        };
        html! {
            h1 { "What changed between two tables" }
            p { (self.header()) "." }
            @if !self.inputs_differ.is_empty() {
                ul { @for d in &self.inputs_differ { li { "inputs differ: " (d) } } }
            }
            @if self.changes.is_empty() {
                p.held { "No verdict changed." }
            } @else {
                table.diff {
                    tr { th.p { "cell" } th { "A" } th { "B" } }
                    @for c in &self.changes {
                        tr.change {
                            td.p { (Self::what(c)) }
                            (side('a', c, &c.a))
                            (side('b', c, &c.b))
                        }
                    }
                }
            }
            @if !self.racy.is_empty() {
                h2 { "Racy, not changes" }
                p {
                    "Violated in some recordings of a schedule and not in others, in either \
                     table: another recording could give either verdict."
                }
                table.diff {
                    tr { th.p { "cell" } th { "A" } th { "B" } }
                    @for c in &self.racy {
                        tr.racy {
                            td.p { (Self::what(c)) }
                            (side('a', c, &c.a))
                            (side('b', c, &c.b))
                        }
                    }
                }
            }
            @if !self.only_in_a.is_empty() || !self.only_in_b.is_empty() {
                h2 { "Cells and schedules in one table only" }
                ul {
                    @for (name, cells) in [("A", &self.only_in_a), ("B", &self.only_in_b)] {
                        @for u in cells {
                            li { (Self::unmatched_text(name, u)) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{OutcomeCounts, ScheduleCell};

    fn cell(model: u64, verdict: CellVerdict) -> Cell {
        let mut counts = OutcomeCounts { held: 9, ..Default::default() };
        if verdict == CellVerdict::Violated {
            counts.violated = 1;
        }
        let failed = verdict != CellVerdict::Held;
        Cell {
            config: "ext4-ordered".into(),
            property: "single-block-overwrite".into(),
            disk_model: DiskModel { atomic_write_unit: model, ..DiskModel::default() },
            verdict,
            witness: failed.then(|| "bob-out/a/ext4-ordered/single-block-overwrite".into()),
            witness_state: failed.then(|| "sync/e1:0-3,4[0-3]".into()),
            story: failed.then(|| "a mix of 4 new, 4 old sectors".into()),
            schedules: vec![ScheduleCell {
                schedule: "sync".into(),
                trace_digest: "ab".into(),
                verdict,
                states_explored: 10,
                states_unique: 10,
                counts: counts.clone(),
                first_state: failed.then(|| "sync/e1:0-3,4[0-3]".into()),
                first_position: None,
                op_barriers: None,
                fua_writes: 0,
                fua_postflushes: 0,
                ..Default::default()
            }],
            counts,
            ..Default::default()
        }
    }

    fn grid(cells: Vec<Cell>) -> Grid {
        Grid {
            schema_version: crate::report::SCHEMA_VERSION,
            kernel: "6.1.0-test".into(),
            tool_version: "0.1.0".into(),
            configs: vec!["ext4-ordered".into()],
            properties: vec!["single-block-overwrite".into()],
            cells,
            notes: Vec::new(),
        }
    }

    #[test]
    fn tables_of_two_disk_models_compare_the_models() {
        let a = grid(vec![cell(512, CellVerdict::Violated)]);
        let b = grid(vec![cell(4096, CellVerdict::Held)]);
        let d = TableDiff::of("a.json", &a, "b.json", &b);
        assert!(d.changed());
        assert_eq!(d.matched, 1);
        assert_eq!(d.matched_on, ["config", "property", "schedule"]);
        assert_eq!(d.changes.len(), 2, "the cell and its sync share");
        assert_eq!(d.changes[1].schedule.as_deref(), Some("sync"));
        insta::assert_json_snapshot!("table_diff", d);
        insta::assert_snapshot!("table_diff_text", d.to_text());
        assert!(d
            .to_markdown()
            .contains("| single-block-overwrite / ext4-ordered | violated | held |"));
        let same = TableDiff::of("a.json", &a, "a.json", &a);
        assert!(!same.changed());
        assert!(same.to_text().contains("no verdict changed"));
    }

    #[test]
    fn the_html_page_escapes_stories_and_links_witness_pages() {
        let mut bad = cell(512, CellVerdict::Violated);
        bad.story = Some("/A/<script>alert(1)</script> & \"x\"".into());
        let d =
            TableDiff::of("a", &grid(vec![bad]), "b", &grid(vec![cell(4096, CellVerdict::Held)]));
        let html = d.html_body(&|side, _| (side == 'a').then(|| "w.html".to_owned())).into_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;"));
        assert_eq!(html.matches("href=\"w.html\"").count(), 2, "A's witness, in both rows");
        assert_eq!(html.matches("<tr class=\"change\">").count(), 2);
    }

    #[test]
    fn tables_of_both_models_match_on_the_model() {
        let a = grid(vec![cell(512, CellVerdict::Violated), cell(4096, CellVerdict::Held)]);
        let b = grid(vec![cell(512, CellVerdict::Held)]);
        let d = TableDiff::of("a.json", &a, "b.json", &b);
        assert!(d.matched_on.iter().any(|m| m == "disk_model"));
        assert_eq!(d.matched, 1);
        assert_eq!(d.only_in_a.len(), 1);
        assert_eq!(d.only_in_a[0].disk_model.atomic_write_unit, 4096);
        assert!(d.changed());
    }

    /// A cell whose schedule was violated in some of its recordings and not in others
    /// (racy) is listed as racy, not as a change, whichever table marks it; a cell racy
    /// in neither still changes.
    #[test]
    fn a_cell_racy_in_either_table_is_racy_not_a_change() {
        let racy = |mut c: Cell| {
            let s = &mut c.schedules[0];
            s.recordings = 3;
            s.violated_in = vec![2];
            s.racy = true;
            c.update_racy();
            c
        };
        let held = cell(512, CellVerdict::Held);
        let violated = racy(cell(512, CellVerdict::Violated));
        assert!(violated.racy);
        for (a, b) in [(&held, &violated), (&violated, &held)] {
            let d =
                TableDiff::of("a.json", &grid(vec![a.clone()]), "b.json", &grid(vec![b.clone()]));
            assert!(!d.changed(), "racy is no change: {d:?}");
            assert!(d.changes.is_empty());
            assert_eq!(d.racy.len(), 2, "the cell and its sync share: {d:?}");
            assert_eq!(d.racy[1].schedule.as_deref(), Some("sync"));
            let text = d.to_text();
            assert!(text.contains("no verdict changed"), "{text}");
            assert!(
                text.contains(
                    "racy, not a change: single-block-overwrite / ext4-ordered [awu-512]"
                ),
                "{text}"
            );
            assert!(text.contains("violated in 1 of 3 recordings: racy"), "{text}");
            let md = d.to_markdown();
            assert!(md.contains("No verdict changed.") && md.contains("Racy (violated"), "{md}");
            let html = d.html_body(&|_, _| None).into_string();
            assert!(html.contains("Racy, not changes") && html.contains("No verdict changed."));
        }
        insta::assert_json_snapshot!(
            "table_diff_racy",
            TableDiff::of("a.json", &grid(vec![held.clone()]), "b.json", &grid(vec![violated]))
        );
        // Racy with the same verdict on both sides: nothing to list.
        let both = racy(cell(512, CellVerdict::Violated));
        let d = TableDiff::of("a", &grid(vec![both.clone()]), "b", &grid(vec![both]));
        assert!(!d.changed() && d.racy.is_empty(), "{d:?}");
        // A schedule racy in neither table is a change, even beside a racy one.
        let mut a = cell(512, CellVerdict::Violated);
        let mut other = a.schedules[0].clone();
        other.schedule = "syncfs".into();
        other.verdict = CellVerdict::Held;
        a.schedules.push(other.clone());
        let mut b = racy(cell(512, CellVerdict::Violated));
        b.schedules.push(ScheduleCell { verdict: CellVerdict::Violated, ..other });
        let d = TableDiff::of("a", &grid(vec![a]), "b", &grid(vec![b]));
        assert!(d.changed(), "{d:?}");
        assert_eq!(d.changes.len(), 1);
        assert_eq!(d.changes[0].schedule.as_deref(), Some("syncfs"));
        assert!(d.racy.is_empty(), "sync's verdict is the same on both sides: {d:?}");
    }

    /// Two tables of one cell under different drain schedules: the cells'
    /// verdicts are not compared, only their common schedules, and what differs in the
    /// inputs is said first; a schedule on one side only is listed, not skipped.
    #[test]
    fn cells_of_different_schedules_compare_only_their_common_schedules() {
        let share = |name: &str, verdict| {
            let mut s = cell(512, verdict).schedules.remove(0);
            s.schedule = name.into();
            s
        };
        let mut a = cell(512, CellVerdict::Violated);
        a.schedules = vec![share("sync", CellVerdict::Violated)];
        let mut b = cell(512, CellVerdict::Held);
        b.schedules = vec![share("writeback-commit", CellVerdict::Held)];
        let d = TableDiff::of("a.json", &grid(vec![a.clone()]), "b.json", &grid(vec![b.clone()]));
        assert!(!d.changed(), "nothing like with like changed: {d:?}");
        assert_eq!(d.only_in_a[0].schedule.as_deref(), Some("sync"));
        assert_eq!(d.only_in_b[0].schedule.as_deref(), Some("writeback-commit"));
        let text = d.to_text();
        assert!(!text.contains("violated -> held"), "{text}");
        let inputs = text.find("inputs differ: drain schedules: A sync, B writeback-commit");
        assert!(inputs.is_some_and(|i| i < text.find("only in A").unwrap()), "{text}");
        // With a schedule in common, that schedule's change is the one reported.
        b.schedules.push(share("sync", CellVerdict::Held));
        let d = TableDiff::of("a.json", &grid(vec![a]), "b.json", &grid(vec![b]));
        assert_eq!(d.changes.len(), 1, "{d:?}");
        assert_eq!(d.changes[0].schedule.as_deref(), Some("sync"));
        assert_eq!(d.only_in_b.len(), 1);
        assert!(d.only_in_a.is_empty());
    }
}
