//! The recall catalog as data (`docs/recall/catalog.json`): each published bug's
//! configuration, workload file, the outcomes that count as finding it, and the kernels
//! known to have it and known to have its fix, as release patterns.
//!
//! A pattern is matched against the leading numbers of a release (`uname -r`):
//! `4.16` is the series (4.16.0, 4.16.13, ...), `4.16.13` that release (and
//! `4.16.13-anything`), `>=5.10` every release from 5.10 on. The markdown catalog beside
//! the JSON is the same table for people; `tests/recall_catalog.rs` keeps the two equal.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::check::OutcomeKind;

/// Why the catalog cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The catalog file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a catalog.
    #[error("{path}: not a recall catalog: {source}")]
    Parse {
        /// The catalog file.
        path: PathBuf,
        /// What serde said.
        source: serde_json::Error,
    },
    /// An entry contradicts itself or the catalog.
    #[error("{path}: entry {id}: {why}")]
    Entry {
        /// The catalog file.
        path: PathBuf,
        /// The entry's id.
        id: String,
        /// What is wrong.
        why: String,
    },
    /// `--entry` named an id the catalog does not have.
    #[error("{path}: no entry {id:?} (known: {known})")]
    UnknownEntry {
        /// The catalog file.
        path: PathBuf,
        /// The id asked for.
        id: String,
        /// The ids the catalog has.
        known: String,
    },
}

/// One published bug.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its id in the catalog (`cm-r24`, `bob-xfs-sync-no-flush`).
    pub id: String,
    /// bob's configuration (`--fs`) the bug is on.
    pub fs: String,
    /// Its bob workload file, relative to the catalog; `None` when bob cannot express it.
    pub workload: Option<String>,
    /// Whether bob can run it today (then `workload` is set).
    pub expressible: bool,
    /// The outcomes that count as finding the bug: a crash state with any of them.
    pub expected: Vec<OutcomeKind>,
    /// Kernel patterns known to have the bug.
    pub buggy: Vec<String>,
    /// Kernel patterns known to have the fix.
    pub fixed: Vec<String>,
    /// What bob lacks to express it (or to see all of it), as the catalog's gaps name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// What the catalog knows of an entry on one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Known {
    /// The kernel has the bug: bob should find it.
    Buggy,
    /// The kernel has the fix: bob should not fail the workload.
    Fixed,
    /// Neither is known.
    Unknown,
}

impl Entry {
    /// What is known of this entry on a kernel of `release`.
    pub(crate) fn known_on(&self, release: &str) -> Known {
        if self.buggy.iter().any(|p| matches(p, release)) {
            Known::Buggy
        } else if self.fixed.iter().any(|p| matches(p, release)) {
            Known::Fixed
        } else {
            Known::Unknown
        }
    }
}

/// The catalog file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// What the file is (for a reader of the JSON).
    #[serde(default)]
    pub about: String,
    /// Every entry, in the markdown table's order.
    pub entries: Vec<Entry>,
    /// The directory the workload paths are relative to (the file's own).
    #[serde(skip)]
    pub dir: PathBuf,
    /// The file it was read from.
    #[serde(skip)]
    pub path: PathBuf,
}

impl Catalog {
    /// Reads and checks `path`: unique ids, a workload exactly where expressible, known
    /// configurations, outcomes that are failures, patterns that parse, and no release
    /// both buggy and fixed by the same pattern.
    pub fn load(path: &Path) -> Result<Catalog, CatalogError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| CatalogError::Read { path: path.to_owned(), source })?;
        let mut catalog: Catalog = serde_json::from_str(&text)
            .map_err(|source| CatalogError::Parse { path: path.to_owned(), source })?;
        catalog.path = path.to_owned();
        catalog.dir = path.parent().map(Path::to_owned).unwrap_or_else(|| ".".into());
        catalog.check()?;
        Ok(catalog)
    }

    fn check(&self) -> Result<(), CatalogError> {
        let mut seen = std::collections::BTreeSet::new();
        for e in &self.entries {
            let bad = |why: String| CatalogError::Entry {
                path: self.path.clone(),
                id: e.id.clone(),
                why,
            };
            if !seen.insert(e.id.as_str()) {
                return Err(bad("the id appears twice".into()));
            }
            if e.expressible != e.workload.is_some() {
                return Err(bad("a workload file exactly when expressible".into()));
            }
            if crate::fs::by_name(&e.fs).is_none() {
                return Err(bad(format!("unknown configuration {:?}", e.fs)));
            }
            if e.expected.is_empty() || e.expected.iter().any(|k| k.exit_code() != 1) {
                return Err(bad("expected outcomes must be failures, at least one".into()));
            }
            for p in e.buggy.iter().chain(&e.fixed) {
                Pattern::parse(p).map_err(|why| bad(format!("kernel {p:?}: {why}")))?;
            }
            for b in &e.buggy {
                if let Some(f) = e.fixed.iter().find(|f| overlap(b, f)) {
                    return Err(bad(format!("kernel {b} is buggy and {f} fixed: they overlap")));
                }
            }
        }
        Ok(())
    }

    /// The workload file of `entry`, if it has one.
    pub fn workload_path(&self, entry: &Entry) -> Option<PathBuf> {
        entry.workload.as_ref().map(|w| self.dir.join(w))
    }

    /// The entries `ids` names, in the catalog's order (all of them when `ids` is empty);
    /// an id the catalog lacks is an error.
    pub fn select(&self, ids: &[String]) -> Result<Vec<&Entry>, CatalogError> {
        for id in ids {
            if !self.entries.iter().any(|e| &e.id == id) {
                return Err(CatalogError::UnknownEntry {
                    path: self.path.clone(),
                    id: id.clone(),
                    known: self
                        .entries
                        .iter()
                        .map(|e| e.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(self.entries.iter().filter(|e| ids.is_empty() || ids.contains(&e.id)).collect())
    }
}

/// A parsed kernel pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    /// `>=`: this release and every later one.
    at_least: bool,
    /// The version numbers named.
    numbers: Vec<u64>,
}

impl Pattern {
    fn parse(text: &str) -> Result<Pattern, String> {
        let (at_least, rest) = match text.strip_prefix(">=") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let numbers = rest
            .split('.')
            .map(|n| n.parse::<u64>().map_err(|_| format!("{n:?} is not a number")))
            .collect::<Result<Vec<_>, _>>()?;
        if numbers.len() < 2 {
            return Err("a pattern names at least a series (major.minor)".into());
        }
        Ok(Pattern { at_least, numbers })
    }
}

/// The leading numbers of a release: `6.18.44-fc-v657` -> [6, 18, 44]; a series'
/// first release (`4.16`) counts as `4.16.0`.
fn release_numbers(release: &str) -> Vec<u64> {
    let end = release.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(release.len());
    let mut numbers: Vec<u64> =
        release[..end].split('.').map_while(|n| n.parse::<u64>().ok()).collect();
    if numbers.len() == 2 {
        numbers.push(0);
    }
    numbers
}

/// Whether kernel pattern `pattern` covers `release`. A pattern that does not parse
/// covers nothing ([`Catalog::load`] refuses such a catalog).
pub fn matches(pattern: &str, release: &str) -> bool {
    let Ok(p) = Pattern::parse(pattern) else { return false };
    let r = release_numbers(release);
    if r.len() < 2 {
        return false;
    }
    if p.at_least {
        return r >= p.numbers;
    }
    r.len() >= p.numbers.len() && r[..p.numbers.len()] == p.numbers[..]
}

/// Whether two patterns cover a release in common (checked on the releases either
/// names, and the next releases after them).
fn overlap(a: &str, b: &str) -> bool {
    let probes = |p: &str| -> Vec<String> {
        let Ok(p) = Pattern::parse(p) else { return Vec::new() };
        let base = p.numbers.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
        let mut next = p.numbers.clone();
        if let Some(last) = next.last_mut() {
            *last += 1;
        }
        let next = next.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
        vec![base.clone(), format!("{base}.0"), format!("{base}.99"), next]
    };
    probes(a).into_iter().chain(probes(b)).any(|r| matches(a, &r) && matches(b, &r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_releases_by_their_leading_numbers() {
        assert!(matches("4.16", "4.16.13"));
        assert!(matches("4.16", "4.16.0-041600-generic"));
        assert!(!matches("4.16", "4.1.1"));
        assert!(!matches("4.1", "4.16.13"));
        assert!(matches("6.18.44", "6.18.44-fc-v657"));
        assert!(!matches("6.18.44", "6.18.4"));
        assert!(matches("4.16.0", "4.16"));
        assert!(!matches("4.16.0", "4.16.13"));
        assert!(matches(">=5.10", "7.2.7"));
        assert!(matches(">=5.10", "5.10.0-35-amd64"));
        assert!(!matches(">=5.10", "4.16.13"));
        assert!(matches(">=4.16.13", "4.16.13"));
        assert!(!matches(">=4.16.13", "4.16.12"));
        assert!(!matches("4.16", "not a release"));
    }

    #[test]
    fn overlapping_patterns_are_seen() {
        assert!(overlap("4.16", ">=4.16"));
        assert!(overlap("6.12.117", ">=5.10"));
        assert!(!overlap("4.16.0", ">=4.16.13"));
        assert!(!overlap("3.13", ">=4.16"));
        assert!(!overlap("4.16", ">=5.10"));
    }

    #[test]
    fn what_is_known_of_an_entry_follows_its_patterns() {
        let e = Entry {
            id: "x".into(),
            fs: "btrfs".into(),
            workload: None,
            expressible: false,
            expected: vec![OutcomeKind::Violated],
            buggy: vec!["4.16.0".into()],
            fixed: vec![">=4.16.13".into()],
            missing: None,
        };
        assert_eq!(e.known_on("4.16.0-041600-generic"), Known::Buggy);
        assert_eq!(e.known_on("4.16.13"), Known::Fixed);
        assert_eq!(e.known_on("4.4.0"), Known::Unknown);
    }
}
