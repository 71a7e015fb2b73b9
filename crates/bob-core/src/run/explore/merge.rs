//! `bob merge`: the documents of shards, CI jobs or separate runs merged into one, a
//! table ([`Grid::merge`]) or a `bob explore` report ([`ExploreReport::merge`]). The
//! document type is read from each file by a typed deserialization, never guessed.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::output::ExploreReport;
use crate::report::table::{Grid, MergeError as TableMergeError};
use crate::SCHEMA_VERSION;

/// Why documents could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No document was given.
    #[error("no document to merge")]
    Empty,
    /// A document could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is neither a table nor an explore report.
    #[error("{path}: not a bob table ({table}), nor a bob explore report ({explore})")]
    NotADocument {
        /// The file.
        path: PathBuf,
        /// Why it is not a table.
        table: String,
        /// Why it is not an explore report.
        explore: String,
    },
    /// Documents of both kinds were given.
    #[error("{path}: a bob {found}, but {first} is a bob {expected}; merge documents of one kind")]
    Mixed {
        /// The file of the other kind.
        path: PathBuf,
        /// What it is.
        found: &'static str,
        /// The first file.
        first: PathBuf,
        /// What the first file is.
        expected: &'static str,
    },
    /// The tables do not merge.
    #[error(transparent)]
    Tables(#[from] TableMergeError),
    /// The explore reports do not merge.
    #[error("explore reports: {0}")]
    Explore(String),
    /// A document was given twice (the same file, or two files with the same content):
    /// merging it with itself would count every state twice.
    #[error(
        "{second}: {how} {first}; merging a document with itself would count every state \
         twice (merge each shard or job once)"
    )]
    Twice {
        /// The first of the two.
        first: PathBuf,
        /// The one that repeats it.
        second: PathBuf,
        /// `is the same file as` or `has the same content as`.
        how: &'static str,
    },
}

/// A document `bob merge` reads: an explore report (it has `signatures`) or a table.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Document {
    /// A `bob explore` report.
    Explore(ExploreReport),
    /// A `bob table` (or `bob run --format json` of a whole table).
    Table(Grid),
}

impl Document {
    fn kind(&self) -> &'static str {
        match self {
            Document::Explore(_) => "explore report",
            Document::Table(_) => "table",
        }
    }

    /// Reads the document in `path`.
    pub fn read(path: &Path) -> Result<Document, MergeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| MergeError::Io { path: path.to_owned(), source })?;
        serde_json::from_str(&text).map_err(|_| {
            // An untagged enum's own error names no variant: each type's says what is
            // wrong for it.
            let why = |e: Option<serde_json::Error>| e.map(|e| e.to_string()).unwrap_or_default();
            MergeError::NotADocument {
                path: path.to_owned(),
                table: why(serde_json::from_str::<Grid>(&text).err()),
                explore: why(serde_json::from_str::<ExploreReport>(&text).err()),
            }
        })
    }
}

/// What merging gave: one table or one explore report.
#[derive(Debug)]
pub enum Merged {
    /// The merged table.
    Table(Grid),
    /// The merged explore report.
    Explore(ExploreReport),
}

/// Refuses a document given twice: the same file (by device and inode, however it is
/// spelled) or a copy of one (the same bytes).
fn refuse_repeats(paths: &[PathBuf]) -> Result<(), MergeError> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<(&PathBuf, (u64, u64), String)> = Vec::new();
    for path in paths {
        let io = |source| MergeError::Io { path: path.clone(), source };
        let meta = std::fs::metadata(path).map_err(io)?;
        let id = (meta.dev(), meta.ino());
        let digest = crate::files::file_digest(path).map_err(io)?;
        for (first, first_id, first_digest) in &seen {
            let how = if *first_id == id {
                "is the same file as"
            } else if *first_digest == digest {
                "has the same content as"
            } else {
                continue;
            };
            return Err(MergeError::Twice { first: (*first).clone(), second: path.clone(), how });
        }
        seen.push((path, id, digest));
    }
    Ok(())
}

/// Merges the documents in `paths`, all of the first one's kind.
pub fn merge_documents(paths: &[PathBuf]) -> Result<Merged, MergeError> {
    let first = paths.first().ok_or(MergeError::Empty)?;
    refuse_repeats(paths)?;
    let docs = paths.iter().map(|p| Document::read(p)).collect::<Result<Vec<_>, _>>()?;
    let expected = docs[0].kind();
    let (mut grids, mut reports) = (Vec::new(), Vec::new());
    for (doc, path) in docs.into_iter().zip(paths) {
        if doc.kind() != expected {
            let found = doc.kind();
            return Err(MergeError::Mixed {
                path: path.clone(),
                found,
                first: first.clone(),
                expected,
            });
        }
        match doc {
            Document::Table(g) => grids.push(g),
            Document::Explore(r) => reports.push(r),
        }
    }
    Ok(match expected {
        "table" => Merged::Table(Grid::merge(grids)?),
        _ => Merged::Explore(ExploreReport::merge(reports).map_err(MergeError::Explore)?),
    })
}

impl ExploreReport {
    /// Merges the reports of shards (`--shard I/N`) or of separate runs of the same
    /// bounds: workloads and times summed, configurations summed by name, signatures by
    /// key (counts summed; the first report's witness kept). Refuses reports of other
    /// bounds or selections, and a shard given twice.
    pub fn merge(reports: Vec<ExploreReport>) -> Result<ExploreReport, String> {
        let base = |sel: &str| -> (String, Option<String>) {
            match sel.find(", shard ") {
                Some(i) => {
                    let rest = &sel[i + ", shard ".len()..];
                    let (shard, tail) = rest.split_once(',').unwrap_or((rest, ""));
                    (
                        format!(
                            "{}{}",
                            &sel[..i],
                            if tail.is_empty() { String::new() } else { format!(",{tail}") }
                        ),
                        Some(shard.to_owned()),
                    )
                }
                None => (sel.to_owned(), None),
            }
        };
        let mut iter = reports.into_iter();
        let mut out = iter.next().ok_or("no explore report to merge")?;
        let (selection, first_shard) = base(&out.selection);
        let mut shards: Vec<String> = first_shard.into_iter().collect();
        out.selection = selection.clone();
        out.schema_version = SCHEMA_VERSION;
        for r in iter {
            if r.bounds != out.bounds {
                return Err(format!("explored other bounds: {} vs {}", r.bounds, out.bounds));
            }
            let (sel, shard) = base(&r.selection);
            if sel != selection {
                return Err(format!("another selection: {sel} vs {selection}"));
            }
            if let Some(s) = shard {
                if shards.contains(&s) {
                    return Err(format!("shard {s} given twice"));
                }
                shards.push(s);
            }
            out.workloads += r.workloads;
            out.distinct_workloads += r.distinct_workloads;
            out.seconds += r.seconds;
            out.shrink_seconds += r.shrink_seconds;
            out.complete &= r.complete;
            for c in r.configs {
                match out.configs.iter_mut().find(|o| o.config == c.config) {
                    Some(o) => {
                        o.workloads += c.workloads;
                        o.seconds += c.seconds;
                        o.failed += c.failed;
                        o.unsupported += c.unsupported;
                        o.states += c.states;
                        o.recovery_states += c.recovery_states;
                    }
                    None => out.configs.push(c),
                }
            }
            for s in r.signatures {
                match out.signatures.iter_mut().find(|o| o.key == s.key) {
                    Some(o) => {
                        o.count += s.count;
                        o.known |= s.known;
                    }
                    None => out.signatures.push(s),
                }
            }
            out.errors.extend(r.errors);
        }
        // Every shard of one N must be there for the merge to be complete.
        if let Some(n) = shards
            .first()
            .and_then(|s| s.split_once('/'))
            .and_then(|(_, n)| n.parse::<usize>().ok())
        {
            if shards.len() != n || shards.iter().any(|s| !s.ends_with(&format!("/{n}"))) {
                out.complete = false;
            }
        }
        out.signatures.sort_by(|a, b| a.key.cmp(&b.key));
        out.errors.truncate(20);
        let per =
            |s: f64, n: usize| if n == 0 { 0.0 } else { (s / n as f64 * 1000.0).round() / 1000.0 };
        out.seconds_per_workload = per(out.seconds, out.workloads);
        for c in &mut out.configs {
            c.seconds_per_workload = per(c.seconds, c.workloads);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_neither_kind_says_why_for_each_and_kinds_do_not_mix() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.json");
        std::fs::write(&junk, r#"{"cells": 3}"#).unwrap();
        let e = merge_documents(std::slice::from_ref(&junk)).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, MergeError::NotADocument { .. }), "{text}");
        assert!(text.contains("not a bob table (") && text.contains("explore report ("), "{text}");
        let table = dir.path().join("table.json");
        let grid = Grid {
            schema_version: SCHEMA_VERSION,
            kernel: "k".into(),
            tool_version: "v".into(),
            configs: vec![],
            properties: vec![],
            cells: vec![],
            notes: vec![],
        };
        std::fs::write(&table, serde_json::to_string(&grid).unwrap()).unwrap();
        assert!(matches!(merge_documents(std::slice::from_ref(&table)), Ok(Merged::Table(_))));
        let report = dir.path().join("explore.json");
        let explore = r#"{"schema_version": 2, "bounds": "seq 1", "selection": "all",
            "workloads": 0, "distinct_workloads": 0, "seconds_per_workload": 0.0,
            "seconds": 0.0, "shrink_seconds": 0.0, "configs": [], "signatures": [],
            "complete": true}"#;
        std::fs::write(&report, explore).unwrap();
        let one = merge_documents(std::slice::from_ref(&report));
        assert!(matches!(one, Ok(Merged::Explore(_))), "{one:?}");
        let e = merge_documents(&[report, table]).unwrap_err();
        assert!(matches!(e, MergeError::Mixed { expected: "explore report", .. }), "{e}");
    }
}
