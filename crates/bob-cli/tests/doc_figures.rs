//! Figures the docs state about committed results, checked against them: every number
//! docs/explore.md gives for a run whose report and journal are in docs/explore/, and the
//! size docs/commands.md gives of the committed results document. A sentence's figures
//! are written as `{NAME}` in a claim below; the sentence must be in the document (its
//! whitespace and line breaks aside) with each figure equal to its source, to the
//! precision the document shows. A figure typed by hand that drifts from its source, or
//! a sentence reworded without its claim, fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A document's text with every run of whitespace one space.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn doc(name: &str) -> String {
    flat(&std::fs::read_to_string(repo().join("docs").join(name)).unwrap())
}

/// A figure as a document writes it: its value and the step of its last digit.
#[derive(Clone, Copy, Debug)]
struct Written {
    value: f64,
    step: f64,
}

/// The figure at the start of `text`, and its length: digits with thousands commas and
/// decimals (`3,022`, `0.30`), or a number word (`no`, `five`).
fn figure_at(text: &str) -> Option<(Written, usize)> {
    const WORDS: [&str; 13] = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    let word: String = text.chars().take_while(char::is_ascii_alphabetic).collect();
    if let Some(n) = WORDS.iter().position(|w| w.eq_ignore_ascii_case(&word)) {
        return Some((Written { value: n as f64, step: 1.0 }, word.len()));
    }
    let len = text
        .char_indices()
        .take_while(|&(i, c)| {
            c.is_ascii_digit()
                || (matches!(c, ',' | '.')
                    && text[i + 1..].starts_with(|d: char| d.is_ascii_digit())
                    && i > 0)
        })
        .count();
    let token = text.get(..len).filter(|t| !t.is_empty())?.replace(',', "");
    let decimals = token.split_once('.').map_or(0, |(_, d)| d.len());
    Some((Written { value: token.parse().ok()?, step: 10f64.powi(-(decimals as i32)) }, len))
}

/// Every place `doc` says `template` (literal text with `{NAME}` figures), with the
/// figures it writes there.
fn said(doc: &str, template: &str) -> Vec<BTreeMap<String, Written>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').expect("a closed {NAME}") + open;
        parts.push((rest[..open].to_owned(), rest[open + 1..close].to_owned()));
        rest = &rest[close + 1..];
    }
    let tail = rest;
    let first = &parts.first().expect("a figure").0;
    assert!(!first.is_empty(), "a claim starts with words: {template}");
    let mut out = Vec::new();
    for (start, _) in doc.match_indices(first.as_str()) {
        let mut at = start;
        let mut figures = BTreeMap::new();
        let matched = parts.iter().all(|(text, name)| {
            if !doc[at..].starts_with(text.as_str()) {
                return false;
            }
            at += text.len();
            let Some((w, len)) = figure_at(&doc[at..]) else { return false };
            at += len;
            figures.insert(name.clone(), w);
            true
        });
        if matched && doc[at..].starts_with(tail) {
            out.push(figures);
        }
    }
    out
}

/// The figures of committed explore reports: a report's own (its seconds per workload as
/// it rounded them), or of several merged (sums, and the rates of the sums).
fn explore_figures(reports: &[&str]) -> BTreeMap<String, f64> {
    let mut f: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |k: String, v: f64| *f.entry(k).or_default() += v;
    for dir in reports {
        let dir = repo().join("docs/explore").join(dir);
        let text = std::fs::read_to_string(dir.join("explore-report.json")).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        for k in ["workloads", "distinct_workloads", "seconds", "shrink_seconds"] {
            add(k.into(), report[k].as_f64().unwrap());
        }
        add("seconds_per_workload".into(), report["seconds_per_workload"].as_f64().unwrap());
        add("signatures".into(), report["signatures"].as_array().unwrap().len() as f64);
        add("errors".into(), report["errors"].as_array().map_or(0, Vec::len) as f64);
        for c in report["configs"].as_array().unwrap() {
            let name = c["config"].as_str().unwrap();
            for k in ["workloads", "seconds", "failed", "unsupported", "states"] {
                add(format!("{name}.{k}"), c[k].as_f64().unwrap());
            }
            add(
                format!("{name}.seconds_per_workload"),
                c["seconds_per_workload"].as_f64().unwrap(),
            );
            add("states".into(), c["states"].as_f64().unwrap());
        }
        let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap_or_default();
        for line in journal.lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            if line["kind"] == "run" {
                add(format!("outcome.{}", line["outcome"].as_str().unwrap()), 1.0);
            }
        }
    }
    let configs: Vec<String> =
        f.keys().filter_map(|k| k.strip_suffix(".workloads")).map(str::to_owned).collect();
    let one = reports.len() == 1;
    for c in &configs {
        let per_run = if one {
            f[&format!("{c}.seconds_per_workload")]
        } else {
            f[&format!("{c}.seconds")] / f[&format!("{c}.workloads")]
        };
        f.insert(format!("{c}.per-run"), per_run);
    }
    let each: Vec<f64> = configs.iter().map(|c| f[&format!("{c}.workloads")]).collect();
    let same = each.windows(2).all(|w| w[0] == w[1]);
    f.insert("each.workloads".into(), if same { each[0] } else { f64::NAN });
    f.insert("runs".into(), f["workloads"]);
    let per_run = if one { f["seconds_per_workload"] } else { f["seconds"] / f["workloads"] };
    f.insert("per-run".into(), per_run);
    f.insert("hours".into(), f["seconds"] / 3600.0);
    f.insert("distinct".into(), f["distinct_workloads"]);
    f.insert("shrink".into(), f["shrink_seconds"]);
    f
}

/// Checks that `doc` says `template` somewhere with the figures `source` gives.
fn check(doc_name: &str, doc: &str, template: &str, source: &BTreeMap<String, f64>) {
    let places = said(doc, template);
    assert!(!places.is_empty(), "{doc_name} no longer says: {template}");
    let wrong = |figures: &BTreeMap<String, Written>| -> Vec<String> {
        figures
            .iter()
            .filter_map(|(name, w)| {
                let Some(&want) = source.get(name) else { panic!("no figure {name}") };
                let off = (w.value - want).abs() > w.step / 2.0 + 1e-9 || want.is_nan();
                off.then(|| format!("{name}: says {}, the source {want}", w.value))
            })
            .collect()
    };
    let all: Vec<Vec<String>> = places.iter().map(wrong).collect();
    assert!(
        all.iter().any(Vec::is_empty),
        "{doc_name}: {template}\nfigures that differ from their source: {all:?}"
    );
}

/// What docs/explore.md says about each committed run: (its reports, the sentence).
const EXPLORE_CLAIMS: &[(&[&str], &str)] = &[
    (
        &["seq1-beyond-ace"],
        "all **{each.workloads} workloads** (620 indices) on each configuration, **{runs} runs**",
    ),
    (
        &["seq1-beyond-ace"],
        "| ext4-ordered | {ext4-ordered.workloads} | {ext4-ordered.per-run} | \
         {ext4-ordered.failed} | {ext4-ordered.unsupported} (clone, clone-range, dedupe-range, \
         unshare-range) | {ext4-ordered.states} |",
    ),
    (
        &["seq1-beyond-ace"],
        "| xfs | {xfs.workloads} | {xfs.per-run} | {xfs.failed} | {xfs.unsupported} | \
         {xfs.states} |",
    ),
    (
        &["seq1-beyond-ace"],
        "| btrfs | {btrfs.workloads} | {btrfs.per-run} | {btrfs.failed} | {btrfs.unsupported} \
         (collapse-range, insert-range, unshare-range) | {btrfs.states} |",
    ),
    (&["seq1-beyond-ace"], "**{signatures} signature**: every promise of every new operation"),
    (
        &["seq1-new-configs"],
        "Ace's {each.workloads} workloads on each, **{runs} runs**, 02:20 to 02:38 UTC beside \
         the seq-2 sample below (load average about 10), **{signatures} signature**",
    ),
    (
        &["seq1-new-configs"],
        "| ext4-fast-commit | {ext4-fast-commit.workloads} | {ext4-fast-commit.per-run} | \
         {ext4-fast-commit.states} |",
    ),
    (
        &["seq1-new-configs"],
        "| btrfs-nodatacow | {btrfs-nodatacow.workloads} | {btrfs-nodatacow.per-run} | \
         {btrfs-nodatacow.states} |",
    ),
    (
        &["seq1-new-configs"],
        "| btrfs-zstd | {btrfs-zstd.workloads} | {btrfs-zstd.per-run} | {btrfs-zstd.states} |",
    ),
    (
        &["seq1-new-configs"],
        "| xfs-minlog | {xfs-minlog.workloads} | {xfs-minlog.per-run} | {xfs-minlog.states} |",
    ),
    (
        &["seq2-beyond-ace-sample-earlier-oracle/shard-1"],
        "Shard 1, stopped before its end: {runs} runs ({ext4-ordered.workloads} workloads on \
         ext4-ordered, {xfs.workloads} on xfs and {btrfs.workloads} on btrfs; ext4-ordered \
         {ext4-ordered.per-run} s, xfs {xfs.per-run} s, btrfs {btrfs.per-run} s per run; \
         {ext4-ordered.unsupported} and {btrfs.unsupported} of the ext4 and btrfs runs \
         `unsupported`), beside virtual machines running xfstests: {signatures} signatures",
    ),
    (
        &["seq2-beyond-ace-sample/shard-1"],
        "**{runs} runs** ({each.workloads} workloads on each configuration), **{seconds} s of \
         run time, {per-run} s per run** (ext4-ordered {ext4-ordered.per-run} s, xfs \
         {xfs.per-run} s, btrfs {btrfs.per-run} s; {ext4-ordered.unsupported} of the ext4 runs \
         and {btrfs.unsupported} of the btrfs runs `unsupported`; {ext4-ordered.states} + \
         {xfs.states} + {btrfs.states} crash states), shrinking {shrink} s. Of the runs, \
         {outcome.unsupported} were refused by the file system as unsupported (not checked) \
         and {outcome.held} held; **{outcome.violated} violated, both xfs",
    ),
    (
        &["seq2-beyond-ace-sample/shard-2"],
        "**{runs} runs** ({each.workloads} workloads), {seconds} s of run time, {per-run} s per \
         run (ext4-ordered {ext4-ordered.per-run} s, xfs {xfs.per-run} s, btrfs \
         {btrfs.per-run} s; {outcome.unsupported} refused as unsupported, {outcome.held} held), \
         **{signatures} signature**",
    ),
    (&["seq2-beyond-ace-sample/shard-3"], "stopped after {runs} runs (`--resume` continues it)"),
    (
        &[
            "seq2-beyond-ace-sample/shard-1",
            "seq2-beyond-ace-sample/shard-2",
            "seq2-beyond-ace-sample/shard-3",
        ],
        "So far **{runs} of the sample's 10,002 runs**",
    ),
    (
        &["seq2-sample/shard-1"],
        "shard 1 **complete**: {runs} runs ({each.workloads} workloads on each configuration)",
    ),
    (
        &["seq2-sample/shard-1"],
        "**{seconds} s of run time, {per-run} s per run** (ext4-ordered {ext4-ordered.per-run} \
         s, xfs {xfs.per-run} s, btrfs {btrfs.per-run} s: btrfs explores {btrfs.states} of the \
         shard's {states} crash states), shrinking {shrink} s. {outcome.held} held, \
         **{outcome.violated} violated, all xfs**",
    ),
    (
        &["seq2-sample/shard-2"],
        "short measurements): {runs} runs ({each.workloads} workloads on each configuration), \
         **{seconds} s of run \
         time, {per-run} s per run** (ext4-ordered {ext4-ordered.per-run} s, xfs \
         {xfs.per-run} s, btrfs {btrfs.per-run} s: btrfs explores {btrfs.states} of the \
         shard's {states} crash states), shrinking {shrink} s. {outcome.held} held, \
         **{outcome.violated} violated (xfs)**, {errors} error of bob's machinery",
    ),
    (
        &["seq2-sample/shard-3"],
        "In all {runs} runs ({each.workloads} workloads on each configuration), **{seconds} s \
         of run time, {per-run} s per run**, shrinking {shrink} s: {outcome.held} held, \
         {outcome.violated} violated, {errors} error.",
    ),
    (
        &["seq2-sample/shard-1", "seq2-sample/shard-2", "seq2-sample/shard-3"],
        "**{runs} workload runs** ({each.workloads} distinct seq-2 workloads on each of \
         ext4-ordered, xfs and btrfs), **{seconds} s ({hours} h) of run time, {per-run} s per \
         run** (ext4-ordered {ext4-ordered.per-run} s, xfs {xfs.per-run} s, btrfs \
         {btrfs.per-run} s per workload; {ext4-ordered.states} + {xfs.states} + \
         {btrfs.states} crash states), in six sittings over two days; {signatures} signatures",
    ),
];

#[test]
fn explore_md_figures_are_those_of_the_committed_reports() {
    let text = doc("explore.md");
    for (reports, claim) in EXPLORE_CLAIMS {
        check("docs/explore.md", &text, &flat(claim), &explore_figures(reports));
    }
}

/// The figures the committed results document gives itself, in its first lines.
fn results_figures(name: &str) -> BTreeMap<String, f64> {
    let text = doc(name);
    let header = "under loop devices. {cells} cells, {states} crash states explored, {distinct} distinct after \
                  dedup, {mounted} of them mounted (by themselves or after repair), {seconds} \
                  s of cell time.";
    let places = said(&text, header);
    let first = places.first().unwrap_or_else(|| panic!("{name} no longer says {header}"));
    let mut f: BTreeMap<String, f64> = first.iter().map(|(k, w)| (k.clone(), w.value)).collect();
    f.insert("hours".into(), f["seconds"] / 3600.0);
    f
}

#[test]
fn commands_md_figures_are_those_of_the_committed_results_document() {
    let results = "results-linux-6.18.44-fc-v669.md";
    let claim = format!(
        "[{results}]({results}), generated by `bob table` ({{cells}} cells, {{states}} crash \
         states, {{distinct}} distinct and mounted; about {{hours}} hours of cell time"
    );
    check("docs/commands.md", &doc("commands.md"), &flat(&claim), &results_figures(results));
}

/// The matcher itself: figures are read where the claim puts them, to their precision.
#[test]
fn claims_read_figures_to_the_precision_written() {
    let text = "Shard 1, 3,022 runs (0.30 s per run), five signatures, **no signature**.";
    let places = said(text, "Shard 1, {runs} runs ({per-run} s per run), {signatures} signatures");
    assert_eq!(places.len(), 1);
    let f = &places[0];
    assert_eq!((f["runs"].value, f["runs"].step), (3022.0, 1.0));
    assert_eq!((f["per-run"].value, f["per-run"].step), (0.3, 0.01));
    assert_eq!(f["signatures"].value, 5.0);
    assert_eq!(said(text, "**{n} signature**")[0]["n"].value, 0.0);
    assert!(said(text, "Shard 2, {runs} runs").is_empty());
    let source = BTreeMap::from([("per-run".to_string(), 0.298), ("runs".to_string(), 3022.0)]);
    check("text", text, "Shard 1, {runs} runs ({per-run} s per run)", &source);
    let off = BTreeMap::from([("per-run".to_string(), 0.306), ("runs".to_string(), 3022.0)]);
    let caught = std::panic::catch_unwind(|| {
        check("text", text, "Shard 1, {runs} runs ({per-run} s per run)", &off)
    });
    assert!(caught.is_err(), "0.30 is not 0.306 to two decimals");
}
