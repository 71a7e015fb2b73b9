//! The ops the recall catalog needed (synchronous writes, descriptors kept open, inode
//! eviction): the model's and the oracle's rules on synthetic snapshots, no file system.

use workloads::*;

/// A workload file's text (the ops only; setup and drain as given) with inode numbers
/// observed for every node the model makes.
fn workload(setup: &str, ops: &str) -> (Workload, Observed, Vec<ModelState>) {
    let text = format!(
        r#"{{"name": "t", "property": null, "setup": [{setup}], "ops": [{ops}], "drain": []}}"#
    );
    let w: Workload = serde_json::from_str(&text).expect("the workload parses");
    let states = model_states(&w);
    assert_eq!(states.len(), w.ops.len() + 1, "the workload models");
    let mut observed = Observed::default();
    for id in states.last().unwrap().nodes.keys() {
        observed.inos.insert(*id, 100 + u64::from(*id));
    }
    (w, observed, states)
}

fn findings(w: &Workload, obs: &Observed, snap: &Snapshot, durable: Vec<usize>) -> Vec<Finding> {
    check_all(w, obs, snap, &CrashContext { durable_ops: durable })
}

fn file_mut<'a>(snap: &'a mut Snapshot, path: &str) -> &'a mut Node {
    snap.entries.get_mut(path).unwrap_or_else(|| panic!("{path} in snapshot"))
}

/// File `path` of `snap` cut to `size` bytes (its content too).
fn cut(snap: &mut Snapshot, path: &str, size: u64) {
    let n = file_mut(snap, path);
    n.size = size;
    let content = n.content.as_mut().unwrap();
    let kept: Vec<SectorClass> = content.iter().take((size / 512) as usize).collect();
    let mut c = Content::new();
    for class in kept {
        c.push(class, 1);
    }
    *content = c;
}

#[test]
fn a_synchronous_write_promises_its_range_and_the_size_to_read_it() {
    // The recall catalog's ext4 direct-write bug: a delayed buffered write past the end,
    // then an O_SYNC direct write below it; after the crash the size was 0.
    let (w, obs, states) = workload(
        r#"{"op": "creat", "path": "/f"}"#,
        r#"{"op": "write", "path": "/f", "offset": 16384, "len": 4096},
           {"op": "sync-write", "path": "/f", "offset": 0, "len": 4096, "flag": "o-sync",
            "direct": true}"#,
    );
    assert!(w.ops[1].is_persistence_point());
    assert_eq!(w.ops[1].to_string(), "sync-write-direct /f o-sync 4096@0");
    let after = states[2].to_snapshot(&obs);
    assert_eq!(after.entries["/f"].size, 20480);
    assert!(findings(&w, &obs, &after, vec![1]).is_empty());
    // The buffered write's data and size are not promised: only the range written.
    let mut own = after.clone();
    cut(&mut own, "/f", 4096);
    assert!(findings(&w, &obs, &own, vec![1]).is_empty(), "only the range is promised");
    // Size 0 (the bug): a violation of its size, once the write is durable.
    let mut empty = after.clone();
    cut(&mut empty, "/f", 0);
    assert!(findings(&w, &obs, &empty, vec![]).is_empty(), "not durable: no promise");
    let f = findings(&w, &obs, &empty, vec![1]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::WrongSize, "{f:?}");
    assert!(f[0].story.contains("sync-write-direct /f o-sync 4096@0 (op 1)"), "{}", f[0].story);
    assert!(f[0].story.contains("short of 4096"), "{}", f[0].story);
    // The size, with zeros where the write went: its data is lost.
    let mut zeros = after.clone();
    file_mut(&mut zeros, "/f").content.as_mut().unwrap().set(0, 8, SectorClass::Zero);
    let f = findings(&w, &obs, &zeros, vec![1]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::StaleData, "{f:?}");
}

#[test]
fn o_sync_promises_the_inode_and_o_dsync_only_the_data() {
    for (flag, promises_xattr) in [("o-sync", true), ("o-dsync", false)] {
        let (w, obs, states) = workload(
            r#"{"op": "creat", "path": "/f"}"#,
            &format!(
                r#"{{"op": "setxattr", "path": "/f", "name": "user.a", "value": "op0"}},
                   {{"op": "sync-write", "path": "/f", "offset": 0, "len": 4096,
                     "flag": "{flag}"}}"#
            ),
        );
        let mut lost = states[2].to_snapshot(&obs);
        assert!(findings(&w, &obs, &lost, vec![1]).is_empty(), "{flag}");
        file_mut(&mut lost, "/f").xattrs.clear();
        let f = findings(&w, &obs, &lost, vec![1]);
        assert_eq!(!f.is_empty(), promises_xattr, "{flag}: {f:?}");
        if promises_xattr {
            assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::WrongXattr);
        }
    }
}

#[test]
fn drop_caches_changes_nothing_and_promises_nothing() {
    // The catalog's cm-r09 (fstests generic/106): a link removed, the inode evicted, then
    // a fsync of the file.
    let (w, obs, states) = workload(
        r#"{"op": "mkdir", "path": "/d"}, {"op": "creat", "path": "/d/foo"}"#,
        r#"{"op": "link", "from": "/d/foo", "to": "/d/bar"}, {"op": "sync"},
           {"op": "unlink", "path": "/d/bar"}, {"op": "drop-caches"},
           {"op": "fsync", "path": "/d/foo"}"#,
    );
    let op = &w.ops[3];
    assert_eq!((op.to_string(), op.kind().name()), ("drop-caches".into(), "drop-caches"));
    assert!(!op.is_persistence_point() && !op.has_effect() && op.paths().is_empty());
    let (mut before, mut after) = (states[3].clone(), states[4].clone());
    (before.after_op, after.after_op) = (None, None);
    assert_eq!(before, after, "the model does not change");
    let snap = states[5].to_snapshot(&obs);
    assert!(findings(&w, &obs, &snap, vec![1, 4]).is_empty());
    // The removed link back after the fsync: two names for a file with one link.
    let mut back = snap.clone();
    back.entries.insert("/d/bar".into(), snap.entries["/d/foo"].clone());
    let f = findings(&w, &obs, &back, vec![1, 4]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::WrongLinkCount, "{f:?}");
    assert!(f[0].story.contains("fsync /d/foo (op 4)"), "{}", f[0].story);
}

#[test]
fn a_fsync_through_a_descriptor_of_an_unlinked_file_must_not_bring_its_name_back() {
    let ops = |sync: &str| {
        format!(
            r#"{{"op": "open", "path": "/d/foo", "fd": "h"}},
               {{"op": "fd-write", "fd": "h", "offset": 0, "len": 4096}},
               {{"op": "unlink", "path": "/d/foo"}},
               {{"op": "{sync}", "fd": "h"}},
               {{"op": "close", "fd": "h"}}"#
        )
    };
    let setup = r#"{"op": "mkdir", "path": "/d"}, {"op": "creat", "path": "/d/foo"}"#;
    let (w, obs, states) = workload(setup, &ops("fd-fsync"));
    assert_eq!(w.ops[3].to_string(), "fd-fsync h");
    assert!(w.ops[3].is_persistence_point());
    assert!(
        states[5].handles.is_empty() && states[4].handles["h"] == states[0].id("/d/foo").unwrap()
    );
    let gone = states[5].to_snapshot(&obs);
    assert!(!gone.entries.contains_key("/d/foo"));
    assert!(findings(&w, &obs, &gone, vec![3]).is_empty(), "the name is gone: nothing else");
    // The unlinked name back, holding the inode the fsync made durable with no link.
    let mut back = gone.clone();
    back.entries.insert("/d/foo".into(), states[2].to_snapshot(&obs).entries["/d/foo"].clone());
    let f = findings(&w, &obs, &back, vec![3]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::StaleName, "{f:?}");
    assert!(f[0].story.contains("fd-fsync h (op 3)"), "{}", f[0].story);
    assert!(f[0].story.contains("unlinked before the fsync"), "{}", f[0].story);
    assert!(findings(&w, &obs, &back, vec![]).is_empty(), "not durable: no promise");
    // fdatasync promises no attribute, the link count included.
    let (w, obs, _) = workload(setup, &ops("fd-fdatasync"));
    assert!(findings(&w, &obs, &back, vec![3]).is_empty());
}

#[test]
fn a_fsync_through_a_descriptor_follows_the_inode_across_a_rename() {
    let (w, obs, states) = workload(
        r#"{"op": "mkdir", "path": "/d"}, {"op": "creat", "path": "/d/foo"}"#,
        r#"{"op": "open", "path": "/d/foo", "fd": "h"},
           {"op": "rename", "from": "/d/foo", "to": "/d/bar"},
           {"op": "fd-write", "fd": "h", "offset": 0, "len": 4096},
           {"op": "fd-fsync", "fd": "h"}"#,
    );
    let after = states[4].to_snapshot(&obs);
    assert_eq!(after.entries["/d/bar"].size, 4096);
    assert!(findings(&w, &obs, &after, vec![3]).is_empty());
    // The data written through the descriptor, under the new name, is promised.
    let mut lost = after.clone();
    lost.entries.get_mut("/d/bar").unwrap().content.as_mut().unwrap().set(0, 8, SectorClass::Zero);
    let f = findings(&w, &obs, &lost, vec![3]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::StaleData, "{f:?}");
    assert!(f[0].story.contains("/d/bar"), "{}", f[0].story);
}

#[test]
fn descriptors_must_be_open_in_their_phase() {
    let parse = |setup: &str, ops: &str| -> Workload {
        let text = format!(
            r#"{{"name": "t", "property": null, "setup": [{setup}], "ops": [{ops}], "drain": []}}"#
        );
        serde_json::from_str(&text).unwrap()
    };
    // Never opened.
    let w = parse(r#"{"op": "creat", "path": "/f"}"#, r#"{"op": "fd-fsync", "fd": "h"}"#);
    assert_eq!(model_states(&w).len(), 1, "the model stops at the fd-fsync");
    // Opened in the setup: closed when the setup's phase ended.
    let w = parse(
        r#"{"op": "creat", "path": "/f"}, {"op": "open", "path": "/f", "fd": "h"}"#,
        r#"{"op": "fd-fsync", "fd": "h"}"#,
    );
    assert_eq!(model_states(&w).len(), 1);
    // fdatasync and writes need a file.
    let w = parse(
        r#"{"op": "mkdir", "path": "/d"}"#,
        r#"{"op": "open", "path": "/d", "fd": "h"}, {"op": "fd-fdatasync", "fd": "h"}"#,
    );
    assert_eq!(model_states(&w).len(), 2);
}

#[test]
fn a_fsync_promises_the_blocks_a_keep_size_fallocate_left_past_the_end() {
    // The catalog's cm-n08 (fstests generic/483): 4 KiB written, 4 KiB allocated past
    // the end, fsync.
    let (w, obs, states) = workload(
        r#"{"op": "creat", "path": "/foo"}"#,
        r#"{"op": "write", "path": "/foo", "offset": 0, "len": 4096},
           {"op": "falloc", "path": "/foo", "mode": "keep-size", "offset": 4096, "len": 4096},
           {"op": "fsync", "path": "/foo"}"#,
    );
    let node = states[2].node("/foo").unwrap();
    assert_eq!(
        (node.size, node.prealloc.clone(), node.allocated_past_eof()),
        (4096, vec![(4096, 8192)], 4096)
    );
    let after = states[3].to_snapshot(&obs);
    assert_eq!(after.entries["/foo"].allocated_past_eof, Some(4096));
    assert!(findings(&w, &obs, &after, vec![2]).is_empty());
    // More allocated (speculative preallocation, a coarser block) is no loss.
    let mut more = after.clone();
    file_mut(&mut more, "/foo").allocated_past_eof = Some(65536);
    assert!(findings(&w, &obs, &more, vec![2]).is_empty());
    // The blocks gone after the fsync: their own kind of discrepancy.
    let mut lost = after.clone();
    file_mut(&mut lost, "/foo").allocated_past_eof = Some(0);
    let f = findings(&w, &obs, &lost, vec![2]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::LostAllocation, "{f:?}");
    assert!(f[0].story.contains("0 bytes allocated past its end (4096)"), "{}", f[0].story);
    assert!(findings(&w, &obs, &lost, vec![]).is_empty(), "not durable: no promise");
    // Not read (a file system without FIEMAP): not judged.
    file_mut(&mut lost, "/foo").allocated_past_eof = None;
    assert!(findings(&w, &obs, &lost, vec![2]).is_empty());
}

#[test]
fn the_model_forgets_an_allocation_a_later_op_may_free() {
    let (_, _, states) = workload(
        r#"{"op": "creat", "path": "/foo"}"#,
        r#"{"op": "falloc", "path": "/foo", "mode": "keep-size", "offset": 0, "len": 16384},
           {"op": "falloc", "path": "/foo", "mode": "punch-hole", "offset": 4096, "len": 4096},
           {"op": "write", "path": "/foo", "offset": 0, "len": 4096},
           {"op": "truncate", "path": "/foo", "size": 512}"#,
    );
    assert_eq!(states[1].node("/foo").unwrap().allocated_past_eof(), 16384);
    assert_eq!(states[2].node("/foo").unwrap().prealloc, vec![(0, 4096), (8192, 16384)]);
    // The write made the first block data: only what lies past the new end counts.
    assert_eq!(states[3].node("/foo").unwrap().allocated_past_eof(), 8192);
    assert!(states[4].node("/foo").unwrap().prealloc.is_empty(), "a truncate may free it");
}

#[test]
fn names_that_cannot_be_created_after_recovery_are_a_violation_of_their_own() {
    let text = r#"{"name": "t", "property": null,
        "setup": [{"op": "mkdir", "path": "/d"}],
        "ops": [{"op": "creat", "path": "/d/foo"}, {"op": "fsync", "path": "/d/foo"},
                {"op": "unlink", "path": "/d/foo"}],
        "drain": [], "guarantees": ["creatable-after-recovery"]}"#;
    let w: Workload = serde_json::from_str(text).unwrap();
    let states = model_states(&w);
    let mut obs = Observed::default();
    for id in states.last().unwrap().nodes.keys() {
        obs.inos.insert(*id, 100 + u64::from(*id));
    }
    // A real tree: /d, and /d/foo on the disk although the snapshot (taken before it
    // was made) does not show it, as a name whose inode number the file system hands
    // out again would be.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let snap = states[3].to_snapshot(&obs);
    assert!(!snap.entries.contains_key("/d/foo"));
    std::fs::write(dir.path().join("d/foo"), b"").unwrap();
    let failed = create_after_recovery(dir.path(), &w, &snap);
    // The new file and directory in / and /d were made; the removed name was not.
    assert!(dir.path().join("d/bob-new-dir").is_dir() && dir.path().join("bob-new-file").is_file());
    assert_eq!(failed.keys().collect::<Vec<_>>(), ["/d/foo"], "{failed:?}");
    assert!(failed["/d/foo"].contains("exists"), "{failed:?}");
    let mut judged = snap.clone();
    judged.not_creatable = failed;
    let f = findings(&w, &obs, &judged, vec![]);
    assert_eq!(f[0].discrepancy.kind, DiscrepancyKind::NotCreatable, "{f:?}");
    assert!(
        f[0].story.starts_with("after recovery, /d/foo could not be created"),
        "{}",
        f[0].story
    );
    assert!(findings(&w, &obs, &snap, vec![1]).is_empty());
}

#[test]
fn a_symlink_may_be_linked_and_unlinked() {
    // The catalog's cm-r25, its symlink variant (fstests generic/479).
    let (w, obs, states) = workload(
        r#"{"op": "mkdir", "path": "/d"}, {"op": "symlink", "target": "t", "path": "/d/foo"}"#,
        r#"{"op": "creat", "path": "/d/dummy"}, {"op": "open", "path": "/d/dummy", "fd": "h"},
           {"op": "fd-fsync", "fd": "h"},
           {"op": "rename", "from": "/d/foo", "to": "/d/bar"},
           {"op": "link", "from": "/d/bar", "to": "/d/foo"},
           {"op": "unlink", "path": "/d/dummy"}, {"op": "fd-fsync", "fd": "h"},
           {"op": "close", "fd": "h"}, {"op": "unlink", "path": "/d/bar"}"#,
    );
    let link = states[5].node("/d/foo").unwrap();
    assert_eq!((link.kind, link.nlink), (NodeKind::Symlink, 2));
    assert_eq!(states[5].id("/d/foo"), states[5].id("/d/bar"));
    assert_eq!(states[9].node("/d/foo").unwrap().nlink, 1);
    let snap = states[9].to_snapshot(&obs);
    assert!(findings(&w, &obs, &snap, vec![2, 6]).is_empty());
    // A directory is still no link's source.
    let text = r#"{"name": "t", "property": null, "setup": [{"op": "mkdir", "path": "/d"}],
        "ops": [{"op": "link", "from": "/d", "to": "/e"}], "drain": []}"#;
    assert_eq!(model_states(&serde_json::from_str(text).unwrap()).len(), 1);
}
