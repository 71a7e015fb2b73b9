//! `bob report OUT_DIR --to SITE_DIR`: a static site built from a `bob table --out` run
//! (its `table.json` and witness directories), self-contained (no script, no font or
//! style sheet from elsewhere), so that it opens from `file://` and as a CI artifact. An
//! index with the property table of each disk model, a page per cell and a page per
//! witness, with its trace drawn (see [`super::timeline`]); with a second table, a page
//! of what changed ([`super::diff`]). Every page is a maud template: every value a file
//! system, a kernel or a user wrote is escaped by construction.

use std::path::{Path, PathBuf};

use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde::{Deserialize, Serialize};
use workloads::{SectorClass, Snapshot};

use super::diff::{CellChange, TableDiff};
use super::table::Grid;
use super::timeline::Timeline;
use super::{witness, Cell, OutcomeKind};
use crate::fs::regions::Regions;

/// Site errors, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The table does not parse.
    #[error("{path}: not a bob table: {message}")]
    Table {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// `bob report`: what was written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteReport {
    /// [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The site's directory.
    pub site: String,
    /// Its index page.
    pub index: String,
    /// Cell pages written.
    pub cells: usize,
    /// Witness pages written.
    pub witnesses: usize,
    /// Witnesses that could not be read (their cell page says why).
    pub unreadable_witnesses: usize,
    /// Whether a page of changes against another table was written (`diff.html`).
    pub diff: bool,
}

impl SiteReport {
    /// One line for the terminal.
    pub fn to_text(&self) -> String {
        format!(
            "site: {} ({} cell pages, {} witness pages{}{})\n",
            self.index,
            self.cells,
            self.witnesses,
            if self.unreadable_witnesses > 0 {
                format!(", {} witnesses unreadable", self.unreadable_witnesses)
            } else {
                String::new()
            },
            if self.diff { ", diff.html" } else { "" }
        )
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

/// Reads a table JSON file (`bob table --format json`, `table.json` under `--out`).
pub fn read_table(path: &Path) -> Result<Grid, Error> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Table { path: path.to_owned(), message: e.to_string() })
}

/// A name safe in a file name and a URL: letters, digits, `-`, `_` and `.`; anything else
/// becomes `_`.
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' })
        .collect()
}

/// The key of a cell's pages: configuration, property and disk model.
fn key(c: &Cell) -> String {
    format!("{}--{}--{}", safe(&c.config), safe(&c.property), safe(&c.disk_model.slug()))
}

/// The page of a cell.
fn cell_page(c: &Cell) -> String {
    format!("cell-{}.html", key(c))
}

/// The page of a cell's witness.
pub fn witness_page(c: &Cell) -> String {
    format!("witness-{}.html", key(c))
}

/// The letter a cell shows (a held cell, whose letter is empty, shows a check mark), so
/// that colour is never the only sign of a verdict: the same as the table's HTML.
fn mark(c: &Cell) -> &'static str {
    super::table::html_mark(c)
}

/// The outcome breakdown shown on hover: every state kind with a state.
fn breakdown(c: &Cell) -> String {
    let mut s = format!("{}: {}", c.verdict.name(), c.counts.text());
    if let Some(story) = &c.story {
        s.push_str(&format!(" — {story}"));
    }
    s
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:80em}\
nav{margin-bottom:1em}nav a{margin-right:1em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.3em .6em;text-align:center}\
th.p,td.p{text-align:left;font-family:monospace}td.l{text-align:left}\
.missing{color:#999;font-style:italic}\
.n{color:#555;font-size:.8em}td a.m{font-weight:bold;font-size:1.1em;text-decoration:none;color:#222;display:block}\
a{color:#803}code,pre{background:#f4f4f4;padding:.1em .3em}pre{padding:.6em;overflow-x:auto}\
.scroll{overflow-x:auto;border:1px solid #ddd;padding:.3em;margin:.5em 0}\
rect.write{stroke:#222;stroke-width:1}rect.write.missing{fill:#fff !important;stroke-dasharray:4,2;stroke:#c00}\
rect.write.later{opacity:.35}rect.write.torn{fill-opacity:.35}\
rect.unit.kept{fill:#2a7;stroke:#050;stroke-width:1}rect.unit.lost{fill:url(#hatch);stroke:#c00;stroke-width:1}\
.role-data{fill:#6aa6e8}.role-meta{fill:#9bc48a}.role-super{fill:#e8946a}.role-journal{fill:#b48ae0}\
.role-inode{fill:#e8d06a}.role-dir{fill:#6ad8c8}.role-discard{fill:#ccc}.role-unknown{fill:#bbb}\
rect.wall.flush{fill:#222}rect.wall.fua{fill:#e07000}rect.wall.fua-emulation{fill:#bbb}\
.sw{display:inline-block;width:1em;height:1em;border:1px solid #444;vertical-align:middle;margin:0 .3em 0 1em}\
.map{display:flex;height:1.4em;border:1px solid #444;max-width:60em}.map span{display:block;min-width:3px;border-right:1px solid #fff}\
.c-old{background:#9ab}.c-new{background:#2a7}.c-zero{background:#fff;outline:1px solid #ccc}.c-garbage{background:#c00}.c-foreign{background:#e8a000}";

/// A whole page: title, navigation back to the index, body.
fn page(title: &str, body: Markup) -> String {
    page_with(title, true, body)
}

/// `bob diff --format html`: the diff as one page of its own.
pub(crate) fn diff_page(d: &TableDiff) -> String {
    page_with("bob: what changed", false, d.html_body(&|_, _| None))
}

fn page_with(title: &str, nav: bool, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) }
                style { (PreEscaped(STYLE)) (PreEscaped(OutcomeKind::stylesheet())) }
            }
            body {
                @if nav { nav { a href="index.html" { "index" } } }
                (body)
            }
        }
    }
    .into_string()
}

/// A cell of a table loaded for the site: its witness, if its directory reads.
struct Loaded<'a> {
    cell: &'a Cell,
    /// The witness directory (as the user named the table's directory, joined).
    dir: Option<PathBuf>,
    /// The witness page, when it was written.
    page: Option<Result<String, String>>,
    /// Pages of other drain schedules' first states: (their states' prefix, `syncfs` or `syncfs.2`, and the page).
    schedule_pages: Vec<(String, String)>,
}

impl Loaded<'_> {
    /// The page showing state `state` of this cell, if one was written.
    fn page_of(&self, state: Option<&str>) -> Option<String> {
        let state = state?;
        if self.cell.witness_state.as_deref() == Some(state) {
            return self.page.clone()?.ok();
        }
        let (schedule, _) = crate::check::split_schedule(state);
        self.schedule_pages.iter().find(|(s, _)| Some(s.as_str()) == schedule).map(|p| p.1.clone())
    }
}

/// Builds the site of the `bob table --out` directory `out` into `to` (created); with
/// `against` (another table's file name and grid), also `diff.html`.
pub fn build(out: &Path, to: &Path, against: Option<(&str, &Grid)>) -> Result<SiteReport, Error> {
    let table_path = out.join("table.json");
    let grid = read_table(&table_path)?;
    std::fs::create_dir_all(to).map_err(io(to))?;
    let relative = super::document::with_relative_witnesses(&grid);
    let mut loaded: Vec<Loaded> = Vec::new();
    for (c, r) in grid.cells.iter().zip(&relative.cells) {
        // The witness where the table's directory now is; else where the run wrote it.
        let dir = r.witness.as_ref().map(|w| out.join(w)).and_then(|d| {
            if d.join("state.json").exists() {
                Some(d)
            } else {
                c.witness.as_ref().map(PathBuf::from)
            }
        });
        loaded.push(Loaded { cell: c, dir, page: None, schedule_pages: Vec::new() });
    }
    let mut witnesses = 0;
    let mut unreadable = 0;
    for l in &mut loaded {
        let Some(dir) = &l.dir else { continue };
        match witness_html(dir, l.cell) {
            Ok(html) => {
                let path = to.join(witness_page(l.cell));
                std::fs::write(&path, html).map_err(io(&path))?;
                witnesses += 1;
                l.page = Some(Ok(witness_page(l.cell)));
            }
            Err(e) => {
                unreadable += 1;
                l.page = Some(Err(e.to_string()));
                continue;
            }
        }
        for sc in &l.cell.schedules {
            let Some(state) = &sc.first_state else { continue };
            // Its trace is kept under its states' prefix: the schedule, and the recording
            // from the second on (`syncfs.2`).
            let label = match crate::check::split_schedule(state) {
                (Some(label), _) => label.to_owned(),
                (None, _) => sc.schedule.clone(),
            };
            let other = witness::schedule_dir(dir, &label);
            if l.cell.witness_state.as_ref() == Some(state) || !other.join("trace.json").exists() {
                continue;
            }
            // A schedule's trace that does not read costs its page, not the site.
            if let Ok(html) = schedule_witness_html(dir, l.cell, sc, state) {
                let name = schedule_witness_page(l.cell, &label);
                let path = to.join(&name);
                std::fs::write(&path, html).map_err(io(&path))?;
                witnesses += 1;
                l.schedule_pages.push((label, name));
            }
        }
    }
    for l in &loaded {
        let path = to.join(cell_page(l.cell));
        std::fs::write(&path, cell_html(l)).map_err(io(&path))?;
    }
    let diff = against.map(|(name, other)| {
        let d = TableDiff::of(&table_path.display().to_string(), &grid, name, other);
        let link = |side: char, c: &CellChange| {
            let cell = grid.cells.iter().find(|x| {
                side == 'a'
                    && x.config == c.config
                    && x.property == c.property
                    && x.disk_model == c.a.disk_model
            })?;
            loaded.iter().find(|l| std::ptr::eq(l.cell, cell))?.page_of(c.a.state.as_deref())
        };
        page("bob: what changed", d.html_body(&link))
    });
    if let Some(html) = &diff {
        let path = to.join("diff.html");
        std::fs::write(&path, html).map_err(io(&path))?;
    }
    let index = to.join("index.html");
    std::fs::write(&index, index_html(&grid, &loaded, diff.is_some())).map_err(io(&index))?;
    Ok(SiteReport {
        schema_version: super::SCHEMA_VERSION,
        site: to.display().to_string(),
        index: index.display().to_string(),
        cells: loaded.len(),
        witnesses,
        unreadable_witnesses: unreadable,
        diff: diff.is_some(),
    })
}

/// The legend of the letters.
fn legend() -> Markup {
    html! {
        table.legend {
            @for k in OutcomeKind::ALL {
                tr {
                    td class=(k.name()) { b { (if k.letter().is_empty() { super::table::HELD_MARK } else { k.letter() }) } }
                    td.l { (k.name()) ": " (k.legend()) }
                }
            }
            tr {
                td.missing { b { (super::table::MISSING_MARK) } }
                td.l { (super::table::MISSING_LEGEND) }
            }
        }
    }
}

fn index_html(grid: &Grid, loaded: &[Loaded], diff: bool) -> String {
    let find = |c: &str, p: &str, m| {
        loaded.iter().find(|l| l.cell.config == c && l.cell.property == p && l.cell.disk_model == m)
    };
    let body = html! {
        h1 { "Persistence properties" }
        p { "Kernel " (grid.kernel) ", bob " (grid.tool_version) ". "
            "Each cell: its verdict as a colour and a letter (hover for its outcome breakdown, "
            "click for its page), then states mounted / distinct / explored." }
        @if !grid.notes.is_empty() { ul { @for n in &grid.notes { li { (n) } } } }
        @if diff { p { a href="diff.html" { "What changed against the other table" } } }
        @for m in grid.disk_models() {
            h2 { "Disk model: " (m.to_string()) }
            table.grid {
                tr { th.p { "property" } @for c in &grid.configs { th { (c) } } }
                @for p in &grid.properties {
                    tr {
                        td.p { (p) }
                        @for c in &grid.configs {
                            @match find(c, p, m) {
                                None => td.missing title=(super::table::MISSING_LEGEND) { (super::table::MISSING_MARK) },
                                Some(l) => td class=(l.cell.verdict.name()) title=(breakdown(l.cell)) {
                                    a.m.cell href=(cell_page(l.cell)) { (mark(l.cell)) }
                                    " "
                                    span.n { (l.cell.states_mounted) "/" (l.cell.states_unique) "/" (l.cell.states_explored) }
                                    @if l.cell.racy { " " small title=(l.cell.racy_text().join("; ")) { "racy" } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @let diffs = grid.model_differences();
        @if !diffs.is_empty() {
            h2 { "What the disk model changes" }
            ul { @for d in diffs { li { (d) } } }
        }
        h2 { "Legend" }
        (legend())
    };
    page("bob: persistence properties", body)
}

fn cell_html(l: &Loaded) -> String {
    let c = l.cell;
    let body = html! {
        h1 { (c.property) " / " (c.config) }
        p { "Disk model: " (c.disk_model.to_string()) "." }
        p class=(c.verdict.name()) style="display:inline-block;padding:.4em .8em" {
            b { (mark(c)) " " (c.verdict.name()) } " — " (c.verdict.legend())
        }
        @if c.racy {
            p {
                b { "Racy: " } (c.racy_text().join("; ")) ". The verdict is the union's; \
                another run may see the race go the other way, and bob diff reports this \
                cell as racy, not as a change."
            }
        }
        p { (c.states_explored) " crash states explored, " (c.states_unique) " distinct, "
            (c.states_mounted) " mounted; " (format!("{:.1}", c.seconds)) " s." }
        h2 { "Outcomes" }
        table {
            tr { th.p { "outcome" } th { "states" } }
            @for k in OutcomeKind::STATE {
                @if k != OutcomeKind::InfraError || c.counts.infra_error > 0 {
                    tr { td.p class=(k.name()) { (k.name()) } td { (c.counts.get(k)) } }
                }
            }
        }
        @if !c.mount_failures.is_empty() {
            h2 { "Mount failures, by cause" }
            table {
                tr { th { "states" } th.p { "kernel error" } th { "fate" } th { "torn region" } th { "first state" } }
                @for f in &c.mount_failures {
                    tr {
                        td { (f.count) } td.l { (f.error) }
                        td { (f.repaired_by.as_deref().map(|r| format!("mounted after {r}")).unwrap_or_else(|| "unrecoverable".into())) }
                        td { (f.torn_write_role.map(|r| r.name()).unwrap_or("-")) }
                        td { code { (f.first_state) } }
                    }
                }
            }
        }
        @if !c.read_errors.is_empty() {
            h2 { "Read errors, by cause" }
            table {
                tr { th { "states" } th.p { "path" } th { "error" } th { "first state" } }
                @for f in &c.read_errors {
                    tr { td { (f.count) } td.p { (if f.path.is_empty() { "the tree" } else { &f.path }) } td.l { (f.error) } td { code { (f.first_state) } } }
                }
            }
        }
        @if !c.fsck_failures.is_empty() {
            h2 { "Fsck complaints, by message" }
            table {
                tr { th { "states" } th { "complaint" } th { "first state" } }
                @for f in &c.fsck_failures {
                    tr { td { (f.count) } td.l { (f.message) } td { code { (f.first_state) } } }
                }
            }
        }
        @if !c.schedules.is_empty() {
            h2 { "Drain schedules" }
            table {
                tr { th.p { "schedule" } th { "verdict" } th { "explored" } th { "distinct" } th.p { "outcomes" } th { "first state" } }
                @for s in &c.schedules {
                    tr {
                        td.p { (s.schedule) }
                        td class=(s.verdict.name()) {
                            (s.verdict.name())
                            @if let Some(r) = s.recordings_text() { br; small { (r) } }
                        }
                        td { (s.states_explored) } td { (s.states_unique) } td.l { (s.counts.text()) }
                        td {
                            @if let Some(f) = &s.first_state {
                                @match l.page_of(Some(f)) {
                                    Some(href) => a href=(href) { code { (f) } },
                                    None => code { (f) },
                                }
                            }
                        }
                    }
                }
            }
        }
        @if c.other_reorderings.is_some() || c.other_durability.is_some() {
            h2 { "Seen beside the verdict (another row's finding)" }
            ul {
                @if let Some(o) = &c.other_reorderings { li { "Reorderings outside the row's pair: " (o.to_text()) } }
                @if let Some(o) = &c.other_durability { li { "Durability failures: " (o.to_text()) } }
            }
        }
        @if let Some(why) = &c.not_exercised { p { "Not exercised: " (why) } }
        @for p in c.unexercised_promises() { p { "Not exercised: no crash state after " (p) " returned." } }
        @if let Some(u) = &c.unavailable { p { "Unavailable: " (u) } }
        @if let Some(i) = &c.infra_error { p { "Not checked: " (i) } }
        @if c.witness.is_some() {
            h2 { "Witness" }
            @if let Some(story) = &c.story { p { (story) } }
            p {
                @match (c.confirmed, &c.confirm_error) {
                    (Some(true), _) => "Confirmed by an independent replay.",
                    (Some(false), _) => "NOT confirmed: an independent replay reached another outcome.",
                    (None, Some(_)) => "NOT confirmed: the independent replay could not run.",
                    (None, None) => "",
                }
            }
            @match &l.page {
                Some(Ok(href)) => p { a.witness href=(href) { "The witness: its trace and crash state" } },
                Some(Err(e)) => p { "The witness could not be read: " (e) },
                None => p { "The witness directory is not there." },
            }
            @if let Some(dir) = &l.dir {
                pre { (replay_command(dir, c.witness_state.as_deref())) }
            }
        }
    };
    page(&format!("bob: {} / {}", c.property, c.config), body)
}

fn replay_command(dir: &Path, state: Option<&str>) -> String {
    let state = state.map(|s| format!(" --state '{s}'")).unwrap_or_default();
    format!("bob replay {}{state} --to crash.img --check", dir.display())
}

/// What a run of a file's sectors holds, for the sector map: CSS class and words.
fn class_words(
    class: SectorClass,
    own: Option<u32>,
    names: &dyn Fn(u32) -> String,
) -> (&'static str, String) {
    match class {
        SectorClass::Zero => ("c-zero", "zeros".into()),
        SectorClass::Garbage => ("c-garbage", "garbage".into()),
        SectorClass::Foreign { file, offset, .. } => {
            ("c-foreign", format!("data of {} at byte {offset} (misplaced)", names(file)))
        }
        SectorClass::Data { file, .. } if own.is_some_and(|o| o != file) => {
            ("c-foreign", format!("another file's data ({})", names(file)))
        }
        SectorClass::Data { op: None, .. } => ("c-old", "old data".into()),
        SectorClass::Data { op: Some(k), .. } => ("c-new", format!("new data of op {k}")),
    }
}

/// A run of a file's sectors in the sector map: CSS class, words, first sector, sectors.
type Run = (&'static str, String, u64, u64);

/// Model file ids to paths, from the model's states (the last name a file had).
fn model_names(subject: &crate::check::Subject) -> std::collections::BTreeMap<u32, String> {
    let mut names_of = std::collections::BTreeMap::new();
    for s in workloads::model_states(&subject.workload) {
        for (path, &node) in &s.names {
            names_of.insert(node, path.clone());
        }
    }
    names_of
}

/// The trace drawn with crash state `id` on it, and its legend.
fn trace_section(
    subject: &crate::check::Subject,
    id: &crate::crash::StateId,
    names: &dyn Fn(u32) -> String,
) -> Markup {
    let regions =
        Regions::of_image(&subject.config, subject.base.path(), std::time::Duration::from_secs(20));
    let timeline = Timeline::of(subject, id, &regions, names);
    let writes: usize = subject.epochs.iter().map(|e| e.writes.len()).sum();
    let drawn = timeline.writes().count();
    let torn = timeline.writes().filter(|w| w.fate.name() == "torn").count();
    html! {
        h2 { "The trace" }
        p.n { (writes) " writes in " (timeline.epochs) " epochs"
            @if drawn < writes { " (" (drawn) " drawn one by one)" }
            "; the crash fell in epoch "
            (timeline.crash_epoch) ", where " (torn) " write(s) tore. Box width grows with the "
            "log of the write's sectors; hover a box for its entry, sectors and role."
            @if timeline.items.iter().any(|i| matches!(i, super::timeline::Item::Collapsed { .. })) {
                " Epochs far from the crash, and the middle of big epochs beside it, are collapsed into one dashed box each run."
            }
        }
        div.scroll { (timeline.svg()) }
        p.n {
            "Roles:"
            @for (class, what) in [("role-data", "file data (the workload's stamp)"), ("role-meta", "metadata (REQ_META)"), ("role-super", "superblock"), ("role-journal", "journal"), ("role-inode", "inode"), ("role-dir", "directory"), ("role-unknown", "not known")] {
                svg width="14" height="14" style="vertical-align:middle;margin:0 .3em 0 1em" { rect class=(class) width="14" height="14" {} }
                (what)
            }
            br;
            "The crash state: solid = persisted; dashed red outline = in the crash epoch, did not "
            "persist; faded = issued after the crash; torn writes show their atomic units "
            "(green: persisted, hatched: lost). Walls: black = flush (a barrier), orange = FUA, "
            "grey = a flush that only emulated FUA (no barrier under real FUA)."
        }
    }
}

/// The page of a state of another drain schedule's trace that the witness in `dir`
/// keeps (`<dir>/schedules/<name>/`): its trace and crash state; the recovered files are
/// not kept for it, `--check` on its replay shows them.
fn schedule_witness_html(
    dir: &Path,
    c: &Cell,
    sc: &super::ScheduleCell,
    state: &str,
) -> Result<String, witness::Error> {
    let loaded = witness::load_for(dir, Some(state))?;
    let mut subject = loaded.subject;
    subject.set_disk(c.disk_model);
    let id = subject.state_id(state).map_err(|e| witness::Error::Invalid {
        path: witness::schedule_dir(
            dir,
            crate::check::split_schedule(state).0.unwrap_or(&sc.schedule),
        ),
        message: e.to_string(),
    })?;
    let names_of = model_names(&subject);
    let names = |f: u32| names_of.get(&f).cloned().unwrap_or_else(|| format!("file {f}"));
    let body = html! {
        h1 { "Witness: " (c.property) " / " (c.config) ", schedule " (sc.schedule) }
        p class=(sc.verdict.name()) style="display:inline-block;padding:.4em .8em" {
            b { (sc.verdict.name()) } ": " (sc.counts.text())
        }
        p { "Crash state " code id="state" { (state) } " under " (c.disk_model.to_string())
            ", the first of this schedule's " (sc.verdict.name()) " states." }
        p { (id.describe(&subject.trace, &subject.epochs)) }
        p { a href=(cell_page(c)) { "The cell's page" } }
        (trace_section(&subject, &id, &names))
        p { "bob keeps this schedule's trace with the cell's witness, not its recovered files: "
            "replay it with --check to see them." }
        h2 { "Replay it" }
        pre { (replay_command(dir, Some(state))) }
    };
    Ok(page(&format!("bob: witness of {} / {}, {}", c.property, c.config, sc.schedule), body))
}

/// The page of a cell's state of drain schedule `schedule` (not the witness's own).
fn schedule_witness_page(c: &Cell, schedule: &str) -> String {
    format!("witness-{}--{}.html", key(c), safe(schedule))
}

/// Renders the page of the witness in `dir` (cell `c`'s).
fn witness_html(dir: &Path, c: &Cell) -> Result<String, witness::Error> {
    let (loaded, id) = witness::load_with_state(dir)?;
    let subject = &loaded.subject;
    let record = &loaded.record;
    let explanation = super::explain(dir)?;
    let names_of = model_names(subject);
    let names = |f: u32| names_of.get(&f).cloned().unwrap_or_else(|| format!("file {f}"));
    let snapshot: Option<Snapshot> = std::fs::read_to_string(dir.join("snapshot.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .flatten();
    // Files whose content is anything but their own old data: what the crash touched.
    let mut files: Vec<(String, u64, Vec<Run>)> = Vec::new();
    if let Some(s) = &snapshot {
        for (path, node) in &s.entries {
            let Some(content) = &node.content else { continue };
            let own = names_of.iter().find(|(_, p)| *p == path).map(|(f, _)| *f);
            let mut runs = Vec::new();
            let mut at = 0u64;
            let mut touched = false;
            for &(class, n) in content.runs() {
                let (css, words) = class_words(class, own, &names);
                touched |= css != "c-old";
                runs.push((css, words, at, n));
                at += n;
            }
            if touched && !runs.is_empty() {
                files.push((path.clone(), node.size, runs));
            }
        }
    }
    let body = html! {
        h1 { "Witness: " (c.property) " / " (c.config) }
        p class=(c.verdict.name()) style="display:inline-block;padding:.4em .8em" {
            b { (record.outcome) } ": " (record.story)
        }
        p { "Crash state " code id="state" { (record.id) } " under " (record.disk_model.to_string())
            @if let Some(s) = &loaded.sidecar.schedule { ", recorded under the " (s) " drain schedule" } "." }
        p { (record.description) }
        p { a href=(cell_page(c)) { "The cell's page" } }
        (trace_section(subject, &id, &names))
        h2 { "The workload's ops after recovery" }
        table {
            tr { th { "op" } th.p { "what" } th { "after recovery" } }
            @for op in &explanation.ops {
                tr {
                    td { (op.index) } td.p { (op.op) }
                    td.l class=(if op.state == "not persisted" { "violated" } else if op.state == "persisted" { "held" } else { "" }) {
                        (op.state) @if !op.why.is_empty() { ": " (op.why) }
                    }
                }
            }
        }
        @if let Some((a, b)) = explanation.earlier_op.as_ref().zip(explanation.later_op.as_ref()) {
            p { "The property's pair: op " (a.index) " (" (a.kind.name()) ") did not persist, op "
                (b.index) " (" (b.kind.name()) ") did." }
        }
        h2 { "The files the crash touched" }
        @if snapshot.is_none() { p { "No snapshot: the state did not mount." } }
        @if snapshot.is_some() && files.is_empty() { p { "Every file holds its own old data." } }
        @for (path, size, runs) in &files {
            @let total: u64 = runs.iter().map(|r| r.3).sum::<u64>().max(1);
            h3 { code { (path) } " (" (size) " bytes)" }
            div.map {
                @for (css, words, at, n) in runs {
                    span class=(css) style={ "flex-grow:" (n * 1000 / total + 1) }
                        title={ "bytes " (at * 512) ".." ((at + n) * 512) ": " (words) } {}
                }
            }
            table {
                tr { th { "bytes" } th { "sectors" } th.p { "holds" } }
                @for (css, words, at, n) in runs {
                    tr { td { (at * 512) ".." ((at + n) * 512) } td { (n) } td.l { span class={ "sw " (css) } {} (words) } }
                }
            }
        }
        h2 { "Replay it" }
        pre { (replay_command(dir, Some(&record.id))) }
    };
    Ok(page(&format!("bob: witness of {} / {}", c.property, c.config), body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CellVerdict;

    #[test]
    fn page_names_are_safe_and_distinct_per_disk_model() {
        let mut c = Cell::of_results("ext4-ordered", "a/b<c>", &[]).0;
        let four = cell_page(&c);
        c.disk_model.atomic_write_unit = 512;
        assert_ne!(four, cell_page(&c));
        assert_eq!(cell_page(&c), "cell-ext4-ordered--a_b_c_--awu-512.html");
        c.verdict = CellVerdict::Held;
        assert_eq!(mark(&c), "\u{2713}");
    }
}
