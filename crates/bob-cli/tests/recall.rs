//! `bob bench --recall` on this machine's kernel, for real: a small subset of the recall
//! catalog (bob's own xfs finding, which no kernel has fixed, and a btrfs entry whose fix
//! is two years older than 4.16), checked for the verdicts the catalog expects and for
//! figures that add up.

mod util;

use std::path::PathBuf;

use serde_json::Value;
use util::{assert_no_leaks, run, Dir};

fn catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/recall/catalog.json")
}

fn count(entries: &[Value], result: &str) -> u64 {
    entries.iter().filter(|e| e["result"] == result).count() as u64
}

/// The summary's figures are the entries' results counted.
fn assert_figures_add_up(kernel: &Value) {
    let entries = kernel["entries"].as_array().expect("entries");
    let s = &kernel["summary"];
    let (found, other, missed) =
        (count(entries, "found"), count(entries, "found-other"), count(entries, "missed"));
    let (held, alarms) = (count(entries, "held"), count(entries, "false-alarm"));
    assert_eq!(s["found"], found, "{kernel}");
    assert_eq!(s["missed"], missed, "{kernel}");
    assert_eq!(s["expected"], found + other + missed, "{kernel}");
    assert_eq!(s["fixed"], held + alarms, "{kernel}");
    assert_eq!(s["false_alarms"], alarms, "{kernel}");
    assert_eq!(s["unavailable"], count(entries, "unavailable"), "{kernel}");
    assert_eq!(s["not_known"], count(entries, "not-known"), "{kernel}");
    assert_eq!(s["errors"], count(entries, "error"), "{kernel}");
    if found + other + missed > 0 {
        let recall = s["recall"].as_f64().expect("a recall figure");
        assert!((recall - found as f64 / (found + other + missed) as f64).abs() < 1e-9);
    } else {
        assert!(s["recall"].is_null(), "{kernel}");
    }
    if held + alarms > 0 {
        let precision = s["precision"].as_f64().expect("a precision figure");
        assert!((precision - held as f64 / (held + alarms) as f64).abs() < 1e-9);
    }
}

/// `bob bench --recall` on the repository's catalog, its `--entry` list, and `extra`.
fn bench_recall(entries: &str, extra: &[&str]) -> std::process::Output {
    let catalog = catalog();
    let mut args = vec![
        "bench",
        "--recall",
        "--catalog",
        catalog.to_str().expect("a UTF-8 path"),
        "--entry",
        entries,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn the_xfs_finding_is_found_and_a_fixed_btrfs_bug_holds() {
    let dir = Dir::new();
    let scratch = dir.scratch();
    let out = bench_recall(
        "bob-xfs-sync-no-flush,cm-r06",
        &[
            "--out",
            dir.out().to_str().expect("a UTF-8 path"),
            "--scratch",
            scratch.to_str().expect("a UTF-8 path"),
            "--format",
            "json",
        ],
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let kernels = report["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), 1, "{report}");
    let host = &kernels[0];
    assert_eq!(host["kernel"], "host");
    let entries = host["entries"].as_array().expect("entries");
    let ids: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap_or("")).collect();
    assert_eq!(ids, ["cm-r06", "bob-xfs-sync-no-flush"], "the catalog's order");
    // bob's own finding: no kernel has a fix, and the host breaks sync's promise.
    let xfs = &entries[1];
    assert_eq!(xfs["verdict"], "violated", "{xfs}");
    assert!(xfs["seen"].as_array().is_some_and(|s| s.contains(&"violated".into())), "{xfs}");
    assert!(xfs["states_explored"].as_u64() > Some(0), "{xfs}");
    assert!(xfs["witness"].is_string(), "{xfs}");
    assert_ne!(xfs["known"], "fixed", "{xfs}");
    if xfs["known"] == "buggy" {
        assert_eq!(xfs["result"], "found", "{xfs}");
    }
    // A btrfs bug of 3.13, fixed since 2014: this kernel (>= 4.16) must hold.
    let btrfs = &entries[0];
    assert_eq!(btrfs["known"], "fixed", "{btrfs}");
    assert_eq!(btrfs["result"], "held", "{btrfs}");
    assert_eq!(btrfs["verdict"], "held", "{btrfs}");
    assert_figures_add_up(host);
    assert_eq!(host["summary"]["fixed"], 1);
    assert_eq!(host["summary"]["false_alarms"], 0);
    assert!(report["not_expressible"].as_array().is_some_and(Vec::is_empty), "{report}");
    // Everything as the catalog expects: exit 0.
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_no_leaks(&scratch);
}

#[test]
fn entries_bob_cannot_express_are_listed_with_what_they_lack() {
    // cm-r09 runs (fixed here); cm-r14 and cm-n03 need gaps bob has not closed.
    let dir = Dir::new();
    let (out_dir, scratch) = (dir.out(), dir.scratch());
    let args = ["--out", out_dir.to_str().unwrap(), "--scratch", scratch.to_str().unwrap()];
    let out = bench_recall("cm-r09,cm-r14,cm-n03", &[&args[..], &["--format", "md"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("| entry | `--fs` |"), "{md}");
    assert!(md.contains("recall - (no entry known buggy here)"), "{md}");
    assert!(md.contains("Not expressible in bob today: cm-r14 (G7); cm-n03 (G9)."), "{md}");
}

#[test]
fn an_entry_the_catalog_lacks_is_a_usage_error() {
    let out = bench_recall("cm-r99", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no entry \"cm-r99\""));
}
