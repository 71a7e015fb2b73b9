//! Runs every property's setup, ops and drain on the real file system (a tempdir), then
//! snapshots it: the fully persisted state must pass every check, and the model after all
//! ops must agree with the snapshot.

use std::collections::BTreeSet;
use workloads::*;

fn run(p: Property, params: &Params) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let w = workload_for(p, params);
    let mut observed = Observed::default();
    let mut events = Vec::new();
    execute(&w, Phase::Setup, root, &mut observed, &mut |_| {}).unwrap();
    execute(&w, Phase::Workload, root, &mut observed, &mut |ev| match ev {
        OpEvent::Begin { index, op } => events.push(format!("op {index} begin: {op}")),
        OpEvent::End { index, op } => events.push(format!("op {index} end: {op}")),
    })
    .unwrap();
    execute(&w, Phase::Drain, root, &mut observed, &mut |_| {}).unwrap();
    assert_eq!(events.len(), 2 * w.ops.len());
    assert_eq!(events[0], format!("op 0 begin: {}", w.ops[0]));

    let snap = take_snapshot(root, &w).unwrap();
    let durable: Vec<usize> =
        (0..w.ops.len()).filter(|&i| w.ops[i].is_persistence_point()).collect();
    let findings = check_all(&w, &observed, &snap, &CrashContext { durable_ops: durable });
    assert!(findings.is_empty(), "{p}: {findings:?}");

    // The model after all ops agrees with the real tree.
    let states = model_states(&w);
    let model = states.last().unwrap();
    let real_names: BTreeSet<&String> = snap.entries.keys().filter(|p| *p != DRAIN_FILE).collect();
    let model_names: BTreeSet<&String> = model.names.keys().filter(|p| *p != DRAIN_FILE).collect();
    assert_eq!(real_names, model_names, "{p}: names");
    for (path, &id) in model.names.iter().filter(|(p, _)| *p != DRAIN_FILE) {
        let (n, m) = (&snap.entries[path], &model.nodes[&id]);
        assert_eq!(Some(n.ino), observed.ino(id), "{p}: {path} inode");
        assert_eq!(n.kind, m.kind, "{p}: {path} kind");
        if m.kind == NodeKind::File {
            assert_eq!((n.size, n.nlink), (m.size, m.nlink), "{p}: {path} size, nlink");
            if let Some(c) = &n.content {
                assert_eq!(c, &m.content, "{p}: {path} content");
            }
        }
    }
    // Files an op writes have their content read; untouched large files do not.
    for op in &w.ops {
        if let Op::Write { path, .. } | Op::Append { path, .. } = op {
            if let Some(n) = snap.entries.get(path) {
                assert!(n.content.is_some(), "{p}: {path} content read");
            }
        }
    }
    if p == Property::SingleSectorAppend {
        assert!(snap.entries["/big3"].content.is_none(), "untouched large files are not read");
    }
}

#[test]
fn every_property_fully_persisted_holds() {
    let params =
        Params { large_file_bytes: 512 * 1024, multi_block_bytes: 256 * 1024, ..Params::default() };
    for &p in Property::ALL {
        run(p, &params);
    }
}

#[test]
fn default_sizes_multi_block() {
    run(Property::MultiBlockAppend, &Params::default());
}

#[test]
fn paths_outside_root_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = Workload {
        name: "escape".into(),
        property: None,
        setup: vec![Op::Creat { path: "/../escape".into(), sync: false }],
        ops: vec![],
        drain: vec![],
        commit_midway: vec![],
        guarantees: vec![],
    };
    let err =
        execute(&w, Phase::Setup, dir.path(), &mut Observed::default(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("/../escape"), "{err}");
    assert!(!dir.path().parent().unwrap().join("escape").exists());
}
