//! Valor under bob (issue 15, its transactions): each cell is recorded in process on
//! bob's disk, every crash state is checked by mounting it (the undo log's recovery
//! rolls back unresolved transactions), and the negative control's cross is replayed
//! from its witness with `bob replay --check`. docs/researchfs.md has the runs.

mod util;

use util::{cell, replays, run, run_json, Dir};

#[test]
fn valor_holds_txn_atomic_and_durable_where_nolog_order_breaks_atomicity() {
    let dir = Dir::new();
    let (code, grid) = run_json(
        &dir,
        "table",
        "valor,valor-nolog-order,ordered-core",
        "txn-atomic,txn-durable",
        &["--schedules", "sync"],
    );
    assert_eq!(code, 1, "valor-nolog-order fails: {grid}");
    for p in ["txn-atomic", "txn-durable"] {
        let valor = cell(&grid, "valor", p);
        assert_eq!(valor["verdict"], "held", "{valor}");
        // Every epoch of the four transactions, not a sample.
        assert!(valor["states_mounted"].as_u64().unwrap() >= 40, "{valor}");
        let plain = cell(&grid, "ordered-core", p);
        assert_eq!(plain["verdict"], "not-applicable", "{plain}");
        assert_eq!(plain["states_explored"], 0, "{plain}");
    }
    // Durable commits flush in both designs: the negative control keeps txn-durable.
    assert_eq!(cell(&grid, "valor-nolog-order", "txn-durable")["verdict"], "held", "{grid}");
    // Without the flush between the undo records and the data, an overwrite reaches the
    // disk while its undo record does not: recovery cannot roll it back.
    let nolog = cell(&grid, "valor-nolog-order", "txn-atomic");
    assert_eq!(nolog["verdict"], "violated", "{nolog}");
    let story = nolog["story"].as_str().unwrap();
    assert!(story.contains("the transaction of ops"), "{story}");
    let v = replays(&dir, nolog);
    assert_eq!(v["outcome"], "violated", "{v}");
    assert_eq!(v["reproduced"], true, "{v}");
    assert_eq!(v["recorded_story"], v["story"], "{v}");
    assert!(story.starts_with(v["story"].as_str().unwrap()), "{v}");
}

#[test]
fn list_shows_valor_and_the_transaction_properties_which_elsewhere_do_not_apply() {
    let out = run(&["list", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["valor", "valor-nolog-order"] {
        let c = v["configs"].as_array().unwrap().iter().find(|c| c["name"] == name);
        assert_eq!(c.map(|c| c["available"].clone()), Some(true.into()), "{name}");
    }
    for p in ["txn-atomic", "txn-durable"] {
        assert!(v["properties"].as_array().unwrap().iter().any(|x| x["name"] == p), "{p}");
    }
    let out = run(&["run", "--fs", "orderless", "--property", "txn-durable", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let cell: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cell["verdict"], "not-applicable", "{cell}");
    assert!(cell["unavailable"].as_str().unwrap().contains("no transactions"), "{cell}");
}
