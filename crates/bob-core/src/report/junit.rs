//! JUnit XML results: the form CI test reporters (GitHub, GitLab, Jenkins) and KernelCI
//! read, as xfstests' `check -R xunit` writes for the file-system world. One `<testsuite>`
//! per table, one `<testcase>` per cell (`classname` the configuration, `name` the
//! property and disk model): a failing verdict is a `<failure>` whose message is the story
//! and whose text is the replay command, `infra-error` an `<error>` (bob could not check),
//! `not-exercised`, `not-applicable` and `unavailable` `<skipped>` with the reason, and
//! `held` a pass (the same split as the exit codes: `needs-repair` fails). The document validates against the
//! Apache Ant JUnit schema most reporters accept (fixtures/junit/JUnit.xsd), which asks
//! for `<properties>`, `<system-out>` and `<system-err>` in every suite.

use std::io;

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use super::diff::TableDiff;
use super::table::Grid;
use super::{Cell, OutcomeKind};
use crate::check::JunitForm;

/// What became of one test case.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CaseResult {
    /// Passed.
    Pass,
    /// Failed.
    Failure {
        /// The story.
        message: String,
        /// The verdict.
        kind: String,
        /// The replay command.
        text: String,
    },
    /// Not checked because bob's own machinery failed.
    Error {
        /// What failed.
        message: String,
        /// `infra-error`.
        kind: String,
        /// What failed, whole.
        text: String,
    },
    /// Not run or not judged.
    Skipped {
        /// Why.
        message: String,
    },
}

/// One test case.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The group reporters file it under (the configuration).
    pub classname: String,
    /// Its name within the group (the property and disk model).
    pub name: String,
    /// Seconds it took.
    pub seconds: f64,
    /// Its result.
    pub result: CaseResult,
}

/// One test suite: a table, a diff or an explore run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Suite {
    /// The suite's name (`bob`, `bob diff`, `bob explore`).
    pub name: String,
    /// Name/value pairs the reporters show beside it (the kernel, bob's version).
    pub properties: Vec<(String, String)>,
    /// Its cases.
    pub cases: Vec<Case>,
}

/// Where and when the document was written: the suite's `hostname` and `timestamp`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stamp {
    /// The machine's name (`localhost` when unknown).
    pub hostname: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SS` (the schema allows no zone suffix).
    pub timestamp: String,
}

impl Stamp {
    /// This machine, now.
    pub fn now() -> Stamp {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_string());
        Stamp { hostname, timestamp: crate::host::utc_now() }
    }
}

/// The command that rebuilds and checks a witness's crash state.
fn replay(witness: Option<&str>, state: Option<&str>) -> String {
    match (witness, state) {
        (Some(w), Some(s)) => format!("bob replay {w} --state {s} --to crash.img --check"),
        (Some(w), None) => format!("bob replay {w} --to crash.img --check"),
        (None, _) => "no witness was kept (nothing to replay)".to_string(),
    }
}

/// The result a cell of `verdict` gives, with its story, reason and replay command.
fn verdict_result(
    verdict: OutcomeKind,
    story: Option<&str>,
    reason: &str,
    text: String,
) -> CaseResult {
    let message = story.filter(|s| !s.is_empty()).unwrap_or(verdict.legend()).to_string();
    let kind = verdict.name().to_string();
    match verdict.row().junit {
        JunitForm::Pass => CaseResult::Pass,
        JunitForm::Skipped => {
            let message =
                if reason.is_empty() { verdict.legend().to_string() } else { reason.to_string() };
            CaseResult::Skipped { message: format!("{kind}: {message}") }
        }
        JunitForm::Error => CaseResult::Error { message, kind, text },
        JunitForm::Failure => CaseResult::Failure { message, kind, text },
    }
}

/// A cell's test case.
fn cell_case(cell: &Cell) -> Case {
    let reason = match cell.verdict {
        OutcomeKind::Unavailable => cell.unavailable.clone(),
        OutcomeKind::NotExercised => cell.not_exercised.clone(),
        OutcomeKind::InfraError => cell.infra_error.clone(),
        _ => None,
    }
    .unwrap_or_default();
    let story = match cell.verdict {
        OutcomeKind::InfraError => cell.infra_error.as_deref().or(cell.story.as_deref()),
        _ => cell.story.as_deref(),
    };
    // A racy cell's failure says so first: another run may give the other verdict.
    let racy = cell
        .racy
        .then(|| format!("racy ({}): {}", cell.racy_text().join("; "), story.unwrap_or("")));
    let story = racy.as_deref().or(story);
    let text = replay(cell.witness.as_deref(), cell.witness_state.as_deref());
    Case {
        classname: cell.config.clone(),
        name: format!("{} [{}]", cell.property, cell.disk_model),
        seconds: cell.seconds,
        result: verdict_result(cell.verdict, story, &reason, text),
    }
}

/// The suite of a table's (or `bob run`'s) cells, run on `kernel`.
pub(crate) fn cells_suite(cells: &[Cell], kernel: &str, tool_version: &str) -> Suite {
    Suite {
        name: "bob".to_string(),
        properties: vec![
            ("kernel".to_string(), kernel.to_string()),
            ("bob".to_string(), tool_version.to_string()),
        ],
        cases: cells.iter().map(cell_case).collect(),
    }
}

/// The suite of a table.
pub(crate) fn grid_suite(grid: &Grid) -> Suite {
    cells_suite(&grid.cells, &grid.kernel, &grid.tool_version)
}

/// The suite of `bob diff`: a failing case per changed cell, a skipped one per cell whose
/// verdicts differ but which is racy in either table (no change), a passing one per cell
/// of the second table that the first has with the same verdict. `b` is the second table.
pub(crate) fn diff_suite(d: &TableDiff, a: &Grid, b: &Grid) -> Suite {
    let mut cases = Vec::new();
    for c in &d.changes {
        let model = c
            .disk_model
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_else(|| format!("{} -> {}", c.a.disk_model, c.b.disk_model));
        let schedule = c.schedule.as_deref().map(|s| format!(" {s}")).unwrap_or_default();
        let story = c.b.story.as_deref().or(c.a.story.as_deref()).unwrap_or("");
        let text = [("A", &c.a), ("B", &c.b)]
            .iter()
            .map(|(side, w)| {
                format!(
                    "{side}: {} ({}): {}\n",
                    w.verdict.name(),
                    w.counts,
                    replay(w.witness.as_deref(), w.state.as_deref())
                )
            })
            .collect::<String>();
        cases.push(Case {
            classname: c.config.clone(),
            name: format!("{} [{model}]{schedule}", c.property),
            seconds: 0.0,
            result: CaseResult::Failure {
                message: format!("{} -> {}: {story}", c.a.verdict.name(), c.b.verdict.name()),
                kind: format!("changed-to-{}", c.b.verdict.name()),
                text,
            },
        });
    }
    for c in d.racy.iter().filter(|c| c.schedule.is_none()) {
        let model =
            c.disk_model.as_ref().map_or_else(|| c.b.disk_model.to_string(), |m| m.to_string());
        let sides =
            [&c.a, &c.b].map(|w| w.recordings.clone().unwrap_or_else(|| "recorded once".into()));
        cases.push(Case {
            classname: c.config.clone(),
            name: format!("{} [{model}]", c.property),
            seconds: 0.0,
            result: CaseResult::Skipped {
                message: format!(
                    "racy, not a change: {} -> {} (A: {}; B: {})",
                    c.a.verdict.name(),
                    c.b.verdict.name(),
                    sides[0],
                    sides[1]
                ),
            },
        });
    }
    let changed = |cell: &Cell| {
        d.changes.iter().chain(&d.racy).any(|c| {
            c.schedule.is_none()
                && c.config == cell.config
                && c.property == cell.property
                && c.disk_model.as_ref().is_none_or(|m| *m == cell.disk_model)
        })
    };
    for cell in &b.cells {
        let in_a = a.cells.iter().any(|x| {
            x.config == cell.config
                && x.property == cell.property
                && x.disk_model == cell.disk_model
        });
        if in_a && !changed(cell) {
            cases.push(Case {
                classname: cell.config.clone(),
                name: format!("{} [{}]", cell.property, cell.disk_model),
                seconds: 0.0,
                result: CaseResult::Pass,
            });
        }
    }
    Suite {
        name: "bob diff".to_string(),
        properties: vec![
            ("a".to_string(), d.a.table.clone()),
            ("a.kernel".to_string(), d.a.kernel.clone()),
            ("b".to_string(), d.b.table.clone()),
            ("b.kernel".to_string(), d.b.kernel.clone()),
        ],
        cases,
    }
}

/// XML 1.0 has no form for most control characters, escaped or not: each becomes U+FFFD.
fn xml_text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// `<testsuites>` of `suites`, written at `stamp`, as a UTF-8 document.
pub fn render(suites: &[Suite], stamp: &Stamp) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    write_suites(&mut w, suites, stamp).expect("writing to memory does not fail");
    let mut text = String::from_utf8(w.into_inner()).expect("the writer was given UTF-8 only");
    text.push('\n');
    text
}

fn write_suites(w: &mut Writer<Vec<u8>>, suites: &[Suite], stamp: &Stamp) -> io::Result<()> {
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.write_event(Event::Start(BytesStart::new("testsuites")))?;
    for (id, suite) in suites.iter().enumerate() {
        let count = |f: fn(&CaseResult) -> bool| {
            suite.cases.iter().filter(|c| f(&c.result)).count().to_string()
        };
        let time: f64 = suite.cases.iter().map(|c| c.seconds).sum();
        let mut start = BytesStart::new("testsuite");
        let name = xml_text(&suite.name);
        start.push_attribute(("name", name.as_str()));
        start.push_attribute(("package", name.as_str()));
        start.push_attribute(("id", id.to_string().as_str()));
        start.push_attribute(("timestamp", stamp.timestamp.as_str()));
        start.push_attribute(("hostname", xml_text(&stamp.hostname).as_str()));
        start.push_attribute(("tests", suite.cases.len().to_string().as_str()));
        start.push_attribute((
            "failures",
            count(|r| matches!(r, CaseResult::Failure { .. })).as_str(),
        ));
        start.push_attribute(("errors", count(|r| matches!(r, CaseResult::Error { .. })).as_str()));
        start.push_attribute((
            "skipped",
            count(|r| matches!(r, CaseResult::Skipped { .. })).as_str(),
        ));
        start.push_attribute(("time", format!("{time:.3}").as_str()));
        w.write_event(Event::Start(start))?;
        w.write_event(Event::Start(BytesStart::new("properties")))?;
        for (k, v) in &suite.properties {
            w.create_element("property")
                .with_attribute(("name", xml_text(k).as_str()))
                .with_attribute(("value", xml_text(v).as_str()))
                .write_empty()?;
        }
        w.write_event(Event::End(BytesEnd::new("properties")))?;
        for case in &suite.cases {
            write_case(w, case)?;
        }
        w.create_element("system-out").write_empty()?;
        w.create_element("system-err").write_empty()?;
        w.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuites")))?;
    Ok(())
}

fn write_case(w: &mut Writer<Vec<u8>>, case: &Case) -> io::Result<()> {
    let el = w
        .create_element("testcase")
        .with_attribute(("classname", xml_text(&case.classname).as_str()))
        .with_attribute(("name", xml_text(&case.name).as_str()))
        .with_attribute(("time", format!("{:.3}", case.seconds.max(0.0)).as_str()));
    match &case.result {
        CaseResult::Pass => {
            el.write_empty()?;
        }
        CaseResult::Skipped { message } => {
            el.write_inner_content(|w| {
                w.create_element("skipped")
                    .with_attribute(("message", xml_text(message).as_str()))
                    .write_empty()
                    .map(|_| ())
            })?;
        }
        CaseResult::Failure { message, kind, text } | CaseResult::Error { message, kind, text } => {
            let tag =
                if matches!(case.result, CaseResult::Failure { .. }) { "failure" } else { "error" };
            el.write_inner_content(|w| {
                w.create_element(tag)
                    .with_attribute(("message", xml_text(message).as_str()))
                    .with_attribute(("type", xml_text(kind).as_str()))
                    .write_text_content(BytesText::new(&xml_text(text)))
                    .map(|_| ())
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(verdict: OutcomeKind) -> Cell {
        Cell {
            config: "ext4-ordered".into(),
            property: "single-block-append".into(),
            verdict,
            seconds: 1.5,
            ..Default::default()
        }
    }

    #[test]
    fn each_verdict_maps_to_its_junit_result_and_text_is_escaped() {
        let mut violated = cell(OutcomeKind::Violated);
        violated.story = Some("lost <data> & \"name\"\u{1}".into());
        violated.witness = Some("out/ext4-ordered/single-block-append".into());
        violated.witness_state = Some("sync/e1:0".into());
        let mut skipped = cell(OutcomeKind::NotExercised);
        skipped.not_exercised = Some("no promise was due".into());
        let mut infra = cell(OutcomeKind::InfraError);
        infra.infra_error = Some("loop device /dev/loop7: busy".into());
        let suite = cells_suite(&[violated, cell(OutcomeKind::Held), skipped, infra], "6.1", "0.1");
        let stamp = Stamp { hostname: "h".into(), timestamp: "2026-01-02T03:04:05".into() };
        let xml = render(&[suite], &stamp);
        assert!(xml.contains(r#"failures="1" errors="1" skipped="1""#), "{xml}");
        assert!(
            xml.contains("message=\"lost &lt;data&gt; &amp; &quot;name&quot;\u{FFFD}\""),
            "{xml}"
        );
        assert!(xml.contains("bob replay out/ext4-ordered/single-block-append --state sync/e1:0"));
        assert!(xml.contains(r#"<skipped message="not-exercised: no promise was due"/>"#), "{xml}");
        assert!(
            xml.contains(r#"<error message="loop device /dev/loop7: busy" type="infra-error">"#)
        );
        assert!(!xml.contains('\u{1}'));
    }

    /// A racy cell's failure says it is racy; in `bob diff`'s suite a racy cell whose
    /// verdicts differ is skipped as no change, never failed nor passed.
    #[test]
    fn a_racy_cell_fails_as_racy_and_its_difference_is_skipped() {
        let mut racy = cell(OutcomeKind::Violated);
        racy.story = Some("the new block is all zeros".into());
        racy.schedules = vec![crate::report::ScheduleCell {
            schedule: "syncfs".into(),
            verdict: OutcomeKind::Violated,
            recordings: 3,
            violated_in: vec![2],
            racy: true,
            ..Default::default()
        }];
        racy.update_racy();
        let case = cell_case(&racy);
        let CaseResult::Failure { message, .. } = &case.result else { panic!("{case:?}") };
        assert_eq!(
            message,
            "racy (syncfs violated in 1 of 3 recordings: racy): the new block is all zeros"
        );
        let grid = |c: Cell| Grid {
            schema_version: crate::SCHEMA_VERSION,
            kernel: "6.1".into(),
            tool_version: "0.1".into(),
            configs: vec![c.config.clone()],
            properties: vec![c.property.clone()],
            cells: vec![c],
            notes: Vec::new(),
        };
        let mut held = cell(OutcomeKind::Held);
        held.schedules =
            vec![crate::report::ScheduleCell { schedule: "syncfs".into(), ..Default::default() }];
        let (a, b) = (grid(held), grid(racy));
        let d = TableDiff::of("a", &a, "b", &b);
        let suite = diff_suite(&d, &a, &b);
        assert_eq!(suite.cases.len(), 1, "{suite:?}");
        let CaseResult::Skipped { message } = &suite.cases[0].result else { panic!("{suite:?}") };
        assert!(message.starts_with("racy, not a change: held -> violated"), "{message}");
        assert!(message.contains("B: syncfs violated in 1 of 3 recordings: racy"), "{message}");
    }
}
