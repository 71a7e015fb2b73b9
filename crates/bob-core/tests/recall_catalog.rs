//! The recall catalog is kept twice, for people (docs/recall/catalog.md, its summary table)
//! and for `bob bench --recall` (docs/recall/catalog.json). These tests fail when the two
//! disagree on an entry, when an entry's workload file does not load as `bob run
//! --workload` loads it, or when a workload file belongs to no entry.

use std::path::{Path, PathBuf};

use bob_core::bench::recall::Catalog;

fn recall_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/recall")
}

fn catalog() -> Catalog {
    Catalog::load(&recall_dir().join("catalog.json")).expect("the catalog loads and checks")
}

/// The summary table's rows, each a list of trimmed cells.
fn summary_rows() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(recall_dir().join("catalog.md")).expect("catalog.md");
    let mut lines = text.lines().skip_while(|l| !l.starts_with("| id | fs | `--fs` |"));
    let header = lines.next().expect("the summary table's header in catalog.md");
    assert_eq!(
        header,
        "| id | fs | `--fs` | buggy kernels | fix (commit) | fixed kernels | \
         expected on a buggy kernel | fstests | bob today | what is missing |"
    );
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_owned()).collect())
        .collect()
}

fn joined(list: &[String]) -> String {
    if list.is_empty() {
        "?".into()
    } else {
        list.join(", ")
    }
}

#[test]
fn the_markdown_table_and_the_json_agree() {
    let catalog = catalog();
    let rows = summary_rows();
    let md_ids: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    let json_ids: Vec<&str> = catalog.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(md_ids, json_ids, "the same entries, in the same order");
    for (row, e) in rows.iter().zip(&catalog.entries) {
        assert_eq!(row.len(), 10, "{}: ten columns: {row:?}", e.id);
        let expected: Vec<String> = e.expected.iter().map(|k| k.name().to_owned()).collect();
        let missing = e.missing.clone().unwrap_or_else(|| "—".into());
        assert_eq!(row[2], e.fs, "{}: --fs", e.id);
        assert_eq!(row[3], joined(&e.buggy), "{}: buggy kernels", e.id);
        assert_eq!(row[5], joined(&e.fixed), "{}: fixed kernels", e.id);
        assert_eq!(row[6], expected.join(", "), "{}: expected outcomes", e.id);
        assert_eq!(row[8].starts_with('y'), e.expressible, "{}: bob today {:?}", e.id, row[8]);
        assert_eq!(row[9], missing, "{}: what is missing", e.id);
        assert!(
            row[1].starts_with(e.fs.split('-').next().unwrap_or_default()),
            "{}: family {:?} against --fs {}",
            e.id,
            row[1],
            e.fs
        );
    }
}

#[test]
fn the_counts_the_catalog_states_are_the_jsons() {
    let catalog = catalog();
    let expressible = catalog.entries.iter().filter(|e| e.expressible).count();
    let text = std::fs::read_to_string(recall_dir().join("catalog.md")).expect("catalog.md");
    let claim = format!("bob can express **{expressible} of {}** today", catalog.entries.len());
    assert!(text.contains(&claim), "catalog.md should say {claim:?}");
}

#[test]
fn every_workload_file_loads_and_belongs_to_an_entry() {
    let catalog = catalog();
    let mut referenced = Vec::new();
    for e in catalog.entries.iter().filter(|e| e.expressible) {
        let path = catalog.workload_path(e).expect("an expressible entry has a workload");
        let w = bob_core::run::load_workload(&path).unwrap_or_else(|err| panic!("{}: {err}", e.id));
        assert_eq!(w.name, e.id, "{}: the workload's name is the entry's id", e.id);
        referenced.push(path.canonicalize().expect("the workload file exists"));
    }
    for file in std::fs::read_dir(recall_dir().join("workloads")).expect("workloads/") {
        let path = file.expect("a directory entry").path().canonicalize().expect("a path");
        assert!(referenced.contains(&path), "{}: no entry names it", path.display());
    }
}

#[test]
fn an_unknown_entry_is_refused_with_the_known_ones() {
    let catalog = catalog();
    let err = catalog.select(&["cm-r99".into()]).expect_err("no such entry");
    let text = err.to_string();
    assert!(text.contains("cm-r99") && text.contains("cm-r24"), "{text}");
    let two = catalog.select(&["cm-n04".into(), "cm-r24".into()]).expect("known ids");
    assert_eq!(two.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["cm-r24", "cm-n04"]);
}
