//! Rendering: the one [`Format`] type and the one [`Render`] trait every printable
//! document implements, so that the CLI prints every result down one path and a new
//! format is one variant and the arms of the documents that have it.
//!
//! A document says which formats it has ([`Render::FORMATS`], which the CLI offers on
//! `--format` and no more) and renders each; any other is [`RenderError::Unsupported`].
//! Text may colour verdicts through the caller's [`Paint`] (the terminal's colours are
//! the CLI's business; [`plain`] leaves text as it is).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::{
    BlktraceReport, CheckReport, ExploreReport, ImportReport, ListReport, RecoveryReport,
    ReplayReport, StreamStatesReport, TraceSet,
};
use crate::check::OutcomeKind;
use crate::crash::compare::Comparison;
use crate::device::registry::Reclaimed;
use crate::report::diff::TableDiff;
use crate::report::explain::Explanation;
use crate::report::junit::{self, Case, CaseResult, Stamp, Suite};
use crate::report::site::{self, SiteReport};
use crate::report::table::Grid;
use crate::report::Cell;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Human-readable text (verdicts in colour on a terminal).
    Text,
    /// Markdown.
    Md,
    /// Pretty JSON, one document (the types of [`crate::output`]).
    Json,
    /// One self-contained HTML page.
    Html,
    /// JUnit XML, for CI test reporters.
    Junit,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 5] =
        [Format::Text, Format::Md, Format::Json, Format::Html, Format::Junit];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Md => "md",
            Format::Json => "json",
            Format::Html => "html",
            Format::Junit => "junit",
        }
    }

    /// One line on what it is, for `--help`.
    pub const fn summary(self) -> &'static str {
        match self {
            Format::Text => "Human-readable text (in colour on a terminal, unless NO_COLOR is set)",
            Format::Md => "Markdown",
            Format::Json => "One JSON document",
            Format::Html => "One self-contained HTML page",
            Format::Junit => "JUnit XML, for CI test reporters: one test case per cell",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = RenderError;

    fn from_str(s: &str) -> Result<Format, RenderError> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| RenderError::UnknownFormat(s.to_owned()))
    }
}

/// Why a document was not rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The document has no such form.
    #[error("{document} cannot be shown as {format} (it can as {})", names(.formats))]
    Unsupported {
        /// What the document is.
        document: &'static str,
        /// The format asked for.
        format: Format,
        /// The formats it has.
        formats: &'static [Format],
    },
    /// No format has that name.
    #[error("no output format is called {0:?}")]
    UnknownFormat(String),
    /// The document did not serialize.
    #[error("the document does not serialize as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn names(formats: &[Format]) -> String {
    formats.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

/// How text shows a verdict's name: the CLI's terminal colours, or [`plain`].
pub(crate) type Paint<'a> = &'a dyn Fn(OutcomeKind, &str) -> String;

/// A verdict's name as it is.
pub fn plain(_: OutcomeKind, text: &str) -> String {
    text.to_owned()
}

/// The formats of a document that is text for people and JSON for programs.
pub(crate) const TEXT_JSON: &[Format] = &[Format::Text, Format::Json];
/// The formats of a table (and of the documents shown as one).
pub const TABLE: &[Format] = &[Format::Md, Format::Json, Format::Html, Format::Junit];

/// A printable document.
pub trait Render {
    /// What it is, for the error that refuses a format.
    const NAME: &'static str;
    /// The formats it has, in the order `--help` lists them.
    const FORMATS: &'static [Format];

    /// The document in `format` (text, Markdown and XML end with a newline, as JSON
    /// does); [`RenderError::Unsupported`] for a format not in [`Self::FORMATS`].
    fn render(&self, format: Format, paint: Paint) -> Result<String, RenderError>;

    /// The refusal of `format`.
    fn unsupported(format: Format) -> RenderError {
        RenderError::Unsupported { document: Self::NAME, format, formats: Self::FORMATS }
    }
}

/// `value` as pretty JSON with a final newline (what bob has always printed).
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, RenderError> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// `suite` as a JUnit XML document, stamped with this machine and now.
fn junit_of(suite: Suite) -> String {
    junit::render(&[suite], &Stamp::now())
}

/// Implements [`Render`] for documents of [`TEXT_JSON`] whose text is their `to_text()`,
/// or, for those marked `=> to_string`, their `Display`.
macro_rules! text_and_json {
    (@text $doc:ident) => { $doc.to_text() };
    (@text $doc:ident $text:ident) => { $doc.$text() };
    ($($t:ty: $name:literal $(=> $text:ident)?),* $(,)?) => {$(
        impl $crate::output::Render for $t {
            const NAME: &'static str = $name;
            const FORMATS: &'static [$crate::output::Format] = $crate::output::TEXT_JSON;

            fn render(
                &self,
                format: $crate::output::Format,
                _: $crate::output::Paint,
            ) -> Result<String, $crate::output::RenderError> {
                match format {
                    $crate::output::Format::Text => {
                        Ok($crate::output::text_and_json!(@text self $($text)?))
                    }
                    $crate::output::Format::Json => $crate::output::json(self),
                    f => Err(<Self as $crate::output::Render>::unsupported(f)),
                }
            }
        }
    )*};
}
pub(crate) use text_and_json;

text_and_json!(
    ListReport: "the list",
    TraceSet: "a trace set",
    ReplayReport: "a replay",
    StreamStatesReport: "a state-stream benchmark",
    RecoveryReport: "a recovery-idempotence check",
    Explanation: "an explanation",
    SiteReport: "a site report",
    Reclaimed: "a cleanup" => to_string,
    ImportReport: "an import" => to_string,
    BlktraceReport: "a blktrace import",
);

/// A cell's text with the verdict on its first line painted.
fn cell_text(cell: &Cell, text: String, paint: Paint) -> String {
    let verdict = cell.verdict.name().to_uppercase();
    let painted = paint(cell.verdict, &verdict);
    text.replacen(&format!(": {verdict} ("), &format!(": {painted} ("), 1)
}

/// `bob run`'s cells, one per disk model: one cell is shown alone (JSON: an object),
/// several one after the other (JSON: an array; JUnit: a test case each).
impl Render for [Cell] {
    const NAME: &'static str = "a run's cells";
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json, Format::Junit];

    fn render(&self, format: Format, paint: Paint) -> Result<String, RenderError> {
        match (format, self) {
            (Format::Text, _) => {
                Ok(self.iter().map(|c| cell_text(c, c.to_text(), paint)).collect())
            }
            (Format::Json, [cell]) => json(cell),
            (Format::Json, _) => json(self),
            (Format::Junit, _) => {
                let kernel = crate::host::kernel_release();
                Ok(junit_of(junit::cells_suite(self, &kernel, env!("CARGO_PKG_VERSION"))))
            }
            (f, _) => Err(Self::unsupported(f)),
        }
    }
}

impl Render for CheckReport {
    const NAME: &'static str = "a checked trace";
    const FORMATS: &'static [Format] = TEXT_JSON;

    fn render(&self, format: Format, paint: Paint) -> Result<String, RenderError> {
        match format {
            Format::Text => Ok(cell_text(&self.cell, self.to_text(), paint)),
            Format::Json => json(self),
            f => Err(Self::unsupported(f)),
        }
    }
}

impl Render for Grid {
    const NAME: &'static str = "a table";
    const FORMATS: &'static [Format] = TABLE;

    fn render(&self, format: Format, _: Paint) -> Result<String, RenderError> {
        match format {
            Format::Md => Ok(self.to_markdown()),
            Format::Json => json(self),
            Format::Html => Ok(self.to_html()),
            Format::Junit => Ok(junit_of(junit::grid_suite(self))),
            f => Err(Self::unsupported(f)),
        }
    }
}

/// The suite of `bob explore`: one case per failure signature (a configuration, the kinds
/// of ops, the discrepancy), since a signature is what a person triages and what
/// `--known` lists; a known one is skipped with its note. A configuration with no
/// signature gets one passing case for its workloads, and each run bob could not
/// complete is an error.
fn explore_suite(r: &ExploreReport) -> Suite {
    let mut cases = Vec::new();
    for s in &r.signatures {
        let classname = s.key.config.clone();
        let name = format!("{} [{}]", s.key.ops.join("+"), s.key.discrepancy);
        let result = if s.known {
            CaseResult::Skipped {
                message: format!("known: {}", s.known_note.as_deref().unwrap_or(&s.story)),
            }
        } else {
            CaseResult::Failure {
                message: s.witness.story.clone(),
                kind: s.key.discrepancy.to_string(),
                text: format!(
                    "{} failing workload(s); minimal: {} ({})\n{}\n",
                    s.count,
                    s.witness.workload,
                    s.witness.ops.join("; "),
                    s.witness.replay
                ),
            }
        };
        cases.push(Case { classname, name, seconds: 0.0, result });
    }
    for c in &r.configs {
        if !r.signatures.iter().any(|s| s.key.config == c.config) {
            cases.push(Case {
                classname: c.config.clone(),
                name: format!("{} workloads", c.workloads),
                seconds: c.seconds,
                result: CaseResult::Pass,
            });
        }
    }
    for e in &r.errors {
        cases.push(Case {
            classname: e.config.clone(),
            name: e.workload.clone(),
            seconds: 0.0,
            result: CaseResult::Error {
                message: e.error.clone(),
                kind: "infra-error".to_string(),
                text: e.error.clone(),
            },
        });
    }
    Suite {
        name: "bob explore".to_string(),
        properties: vec![
            ("bounds".to_string(), r.bounds.clone()),
            ("selection".to_string(), r.selection.clone()),
        ],
        cases,
    }
}

impl Render for ExploreReport {
    const NAME: &'static str = "an explore report";
    const FORMATS: &'static [Format] = TABLE;

    fn render(&self, format: Format, _: Paint) -> Result<String, RenderError> {
        match format {
            Format::Md => Ok(self.to_md()),
            Format::Json => json(self),
            Format::Html => Ok(self.to_html()),
            Format::Junit => Ok(junit_of(explore_suite(self))),
            f => Err(Self::unsupported(f)),
        }
    }
}

/// `bob diff`: what changed between two tables, with the tables (JUnit passes the cells
/// that did not change).
#[derive(Clone, Copy, Debug)]
pub struct GridDiff<'a> {
    /// The changes (the JSON document).
    pub diff: &'a TableDiff,
    /// The first table.
    pub a: &'a Grid,
    /// The second.
    pub b: &'a Grid,
}

impl Render for GridDiff<'_> {
    const NAME: &'static str = "a diff";
    const FORMATS: &'static [Format] =
        &[Format::Text, Format::Md, Format::Json, Format::Html, Format::Junit];

    fn render(&self, format: Format, paint: Paint) -> Result<String, RenderError> {
        match format {
            Format::Text => Ok(self.diff.to_text_with(paint)),
            Format::Md => Ok(self.diff.to_markdown()),
            Format::Json => json(self.diff),
            Format::Html => Ok(site::diff_page(self.diff)),
            Format::Junit => Ok(junit_of(junit::diff_suite(self.diff, self.a, self.b))),
        }
    }
}

/// `bob log --compare`: two recordings side by side, each column headed by its name.
#[derive(Clone, Copy, Debug)]
pub struct NamedComparison<'a> {
    /// The comparison (the JSON document).
    pub comparison: &'a Comparison,
    /// The first recording's column head.
    pub a: &'a str,
    /// The second's.
    pub b: &'a str,
}

impl Render for NamedComparison<'_> {
    const NAME: &'static str = "a comparison of two recordings";
    const FORMATS: &'static [Format] = TEXT_JSON;

    fn render(&self, format: Format, _: Paint) -> Result<String, RenderError> {
        match format {
            Format::Text => Ok(self.comparison.to_text(self.a, self.b)),
            Format::Json => json(self.comparison),
            f => Err(Self::unsupported(f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
        }
        assert!(matches!("xml".parse::<Format>(), Err(RenderError::UnknownFormat(_))));
    }

    #[test]
    fn a_document_renders_its_formats_and_refuses_the_others() {
        let list = ListReport::gather();
        for f in Format::ALL {
            let r = list.render(f, &plain);
            assert_eq!(r.is_ok(), ListReport::FORMATS.contains(&f), "{f}: {r:?}");
        }
        let e = list.render(Format::Html, &plain).unwrap_err().to_string();
        assert_eq!(e, "the list cannot be shown as html (it can as text, json)");
        assert_eq!(list.render(Format::Json, &plain).unwrap(), json(&list).unwrap());
    }
}
