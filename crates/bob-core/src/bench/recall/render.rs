//! The recall report as text and Markdown: per kernel, its figures in one line, then one
//! row per entry; the entries bob cannot express after the kernels.

use std::fmt::Write as _;

use crate::check::OutcomeKind;
use crate::output::{Format, Paint, Render, RenderError};

use super::{EntryResult, KernelRecall, RecallReport, RecallSummary};

/// `a/b (p%)`, or `none expected` when `b` is 0.
fn share(a: usize, b: usize, figure: Option<f64>, none: &str) -> String {
    match figure {
        Some(f) => format!("{a}/{b} ({:.0}%)", f * 100.0),
        None => none.to_owned(),
    }
}

impl RecallSummary {
    /// The kernel's figures in one line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "recall {}; precision {}",
            share(self.found, self.expected, self.recall, "- (no entry known buggy here)"),
            share(
                self.fixed - self.false_alarms,
                self.fixed,
                self.precision,
                "- (no entry known fixed here)"
            ),
        );
        for (n, what) in [
            (self.missed, "missed"),
            (self.found_other, "found with another outcome"),
            (self.false_alarms, "false alarm(s)"),
            (self.not_known, "not known for this kernel"),
            (self.unavailable, "unavailable on this kernel"),
            (self.errors, "error(s)"),
        ] {
            if n > 0 {
                let _ = write!(s, "; {n} {what}");
            }
        }
        s
    }
}

fn kinds(list: &[OutcomeKind]) -> String {
    if list.is_empty() {
        return "-".into();
    }
    list.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// What a row says beyond its result: the story of a failure, and the note.
fn detail(e: &EntryResult) -> String {
    [e.story.as_deref(), e.note.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("; ")
}

fn kernel_heading(k: &KernelRecall) -> String {
    format!("{} ({})", k.kernel, k.release)
}

impl RecallReport {
    /// The report as text.
    pub fn to_text(&self, paint: Paint) -> String {
        let mut s = format!(
            "recall on {} kernel(s); catalog {}; schedules {}\n",
            self.kernels.len(),
            self.catalog.display(),
            self.schedules.join(",")
        );
        for k in &self.kernels {
            let _ = writeln!(s, "\n{}: {}", kernel_heading(k), k.summary.line());
            for e in &k.entries {
                let verdict = match e.verdict {
                    Some(v) => paint(v, &format!("{:<13}", v.name())),
                    None => format!("{:<13}", "-"),
                };
                let _ = writeln!(
                    s,
                    "  {:<22} {:<18} {:<8} {:<26} {verdict} {:>5} states {:>6.1}s  {}",
                    e.id,
                    e.fs,
                    format!("{:?}", e.known).to_lowercase(),
                    e.result.words(),
                    e.states_explored,
                    e.seconds,
                    detail(e)
                );
            }
        }
        if !self.not_expressible.is_empty() {
            let _ = writeln!(
                s,
                "\nnot expressible in bob today ({}): {}",
                self.not_expressible.len(),
                self.not_expressible
                    .iter()
                    .map(|n| format!("{} ({})", n.id, n.missing))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        s
    }

    /// The report as Markdown: a section per kernel with its table.
    pub(crate) fn to_markdown(&self) -> String {
        let cell = |t: &str| t.replace('|', "\\|");
        let mut s = format!(
            "Catalog `{}`, drain schedules {}.\n",
            self.catalog.display(),
            self.schedules.join(", ")
        );
        for k in &self.kernels {
            let _ = writeln!(s, "\n### {}\n\n{}\n", cell(&kernel_heading(k)), k.summary.line());
            s.push_str(
                "| entry | `--fs` | catalog | result | verdict | outcomes seen | expected | states | s | story or note |\n\
                 |---|---|---|---|---|---|---|---|---|---|\n",
            );
            for e in &k.entries {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                    e.id,
                    e.fs,
                    format!("{:?}", e.known).to_lowercase(),
                    e.result.words(),
                    e.verdict.map_or("-", |v| v.name()),
                    kinds(&e.seen),
                    kinds(&e.expected),
                    e.states_explored,
                    e.seconds,
                    cell(&detail(e))
                );
            }
        }
        if !self.not_expressible.is_empty() {
            s.push_str("\nNot expressible in bob today: ");
            let list: Vec<String> = self
                .not_expressible
                .iter()
                .map(|n| format!("{} ({})", n.id, cell(&n.missing)))
                .collect();
            s.push_str(&list.join("; "));
            s.push_str(".\n");
        }
        s
    }
}

impl Render for RecallReport {
    const NAME: &'static str = "a recall benchmark";
    const FORMATS: &'static [Format] = &[Format::Text, Format::Md, Format::Json];

    fn render(&self, format: Format, paint: Paint) -> Result<String, RenderError> {
        match format {
            Format::Text => Ok(self.to_text(paint)),
            Format::Md => Ok(self.to_markdown()),
            Format::Json => crate::output::json(self),
            f => Err(Self::unsupported(f)),
        }
    }
}
