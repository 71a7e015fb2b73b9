//! Property checks on synthetic snapshots built from the model (no file system): legal
//! intermediate states must pass, hand-made violations must be flagged with a story.

use workloads::*;

fn setup(p: Property) -> (Workload, Observed, Vec<ModelState>) {
    let params =
        Params { large_file_bytes: 256 * 1024, multi_block_bytes: 64 * 1024, ..Params::default() };
    let w = workload_for(p, &params);
    let states = model_states(&w);
    assert_eq!(states.len(), w.ops.len() + 1);
    let last = states.last().unwrap();
    let mut observed = Observed::default();
    for id in last.nodes.keys() {
        observed.inos.insert(*id, 100 + u64::from(*id));
    }
    (w, observed, states)
}

fn points_before(w: &Workload, k: usize) -> Vec<usize> {
    (0..k).filter(|&i| w.ops[i].is_persistence_point()).collect()
}

fn verdict(w: &Workload, obs: &Observed, snap: &Snapshot, durable: Vec<usize>) -> Verdict {
    check(w, obs, snap, &CrashContext { durable_ops: durable })
}

/// The typed discrepancy of the first finding (the one the verdict's story tells).
fn first_discrepancy(
    w: &Workload,
    obs: &Observed,
    snap: &Snapshot,
    durable: Vec<usize>,
) -> Discrepancy {
    let findings = check_all(w, obs, snap, &CrashContext { durable_ops: durable });
    findings.into_iter().next().expect("a finding").discrepancy
}

fn violated(v: Verdict, needles: &[&str]) -> String {
    match v {
        Verdict::Held => panic!("expected a violation containing {needles:?}"),
        Verdict::Violated { story } => {
            eprintln!("story: {story}");
            assert!(!story.contains('\n'), "one line: {story}");
            for n in needles {
                assert!(story.contains(n), "story {story:?} lacks {n:?}");
            }
            story
        }
    }
}

fn file_mut<'a>(snap: &'a mut Snapshot, path: &str) -> &'a mut Node {
    snap.entries.get_mut(path).unwrap_or_else(|| panic!("{path} in snapshot"))
}

fn set(snap: &mut Snapshot, path: &str, start: u64, n: u64, c: SectorClass) {
    file_mut(snap, path).content.as_mut().unwrap().set(start, n, c);
}

#[test]
fn every_program_order_prefix_holds() {
    for &p in Property::ALL {
        let (w, obs, states) = setup(p);
        for (k, s) in states.iter().enumerate() {
            let v = verdict(&w, &obs, &s.to_snapshot(&obs), points_before(&w, k));
            assert_eq!(v, Verdict::Held, "{p}: state after {k} ops");
        }
    }
}

#[test]
fn single_sector_overwrite() {
    let (w, obs, states) = setup(Property::SingleSectorOverwrite);
    let Op::Write { offset, .. } = w.ops[0] else { panic!() };
    let s = offset / 512;
    let mut snap = states[0].to_snapshot(&obs);
    set(&mut snap, "/big0", s, 1, SectorClass::Zero);
    violated(verdict(&w, &obs, &snap, vec![]), &["write /big0", "zeros"]);
    set(&mut snap, "/big0", s, 1, SectorClass::Garbage);
    violated(verdict(&w, &obs, &snap, vec![]), &["garbage"]);
    let big0 = states[0].id("/big0").unwrap();
    set(&mut snap, "/big0", s, 1, SectorClass::Foreign { file: big0, offset: 0, op: None });
    violated(verdict(&w, &obs, &snap, vec![]), &["foreign"]);
    // Damage elsewhere in the file is not "before or after" either.
    let mut snap = states[1].to_snapshot(&obs);
    set(&mut snap, "/big0", if s == 0 { 1 } else { 0 }, 1, SectorClass::Zero);
    violated(verdict(&w, &obs, &snap, vec![]), &["outside the written range"]);
}

#[test]
fn single_block_overwrite_mix_of_old_and_new() {
    let (w, obs, states) = setup(Property::SingleBlockOverwrite);
    let Op::Write { offset, .. } = w.ops[0] else { panic!() };
    let mut snap = states[1].to_snapshot(&obs);
    let big0 = states[0].id("/big0").unwrap();
    set(&mut snap, "/big0", offset / 512 + 3, 5, SectorClass::Data { file: big0, op: None });
    violated(verdict(&w, &obs, &snap, vec![]), &["a mix of 5 old, 3 new sectors"]);
}

#[test]
fn appends_grow_size_only_with_data() {
    for (p, len) in [(Property::SingleSectorAppend, 512u64), (Property::SingleBlockAppend, 4096)] {
        let (w, obs, states) = setup(p);
        let mut snap = states[0].to_snapshot(&obs);
        let log = file_mut(&mut snap, "/A/log");
        log.size += len;
        log.content.as_mut().unwrap().resize((40960 + len) / 512);
        violated(verdict(&w, &obs, &snap, vec![]), &["size grew to", "all zeros"]);
        // Size at neither value.
        let mut snap = states[1].to_snapshot(&obs);
        file_mut(&mut snap, "/A/log").size = 40960 + 1024 * 1024;
        violated(verdict(&w, &obs, &snap, vec![]), &["neither"]);
    }
}

#[test]
fn multi_block_append_and_prefix_append() {
    let (w, obs, states) = setup(Property::MultiBlockAppend);
    let (wp, obsp, statesp) = setup(Property::MultiBlockPrefixAppend);
    // A prefix of the append: legal for the prefix property only.
    let half = 40960 + 32 * 1024;
    for (w, obs, states, ok) in [(&w, &obs, &states, false), (&wp, &obsp, &statesp, true)] {
        let mut snap = states[1].to_snapshot(obs);
        let log = file_mut(&mut snap, "/A/log");
        log.size = half;
        log.content.as_mut().unwrap().resize(half / 512);
        let v = verdict(w, obs, &snap, vec![]);
        if ok {
            assert_eq!(v, Verdict::Held);
        } else {
            violated(v, &["neither"]);
        }
        // Zeros inside the new size: never legal.
        set(&mut snap, "/A/log", 40960 / 512 + 8, 8, SectorClass::Zero);
        violated(verdict(w, obs, &snap, vec![]), &["zero"]);
    }
    // The multi-block overwrite: half old, half new.
    let mbo = states[0].id("/B/mbo").unwrap();
    let mut snap = states[2].to_snapshot(&obs);
    set(&mut snap, "/B/mbo", 0, 64, SectorClass::Data { file: mbo, op: None });
    violated(verdict(&w, &obs, &snap, vec![]), &["write /B/mbo", "mix"]);
}

#[test]
fn dir_ops_in_between_states() {
    let (w, obs, states) = setup(Property::DirOpAtomic);
    let after = states.last().unwrap();
    // Renamed file present in both directories.
    let mut snap = after.to_snapshot(&obs);
    let r3 = snap.entries["/A/r3"].clone();
    snap.entries.insert("/A/f3".into(), r3);
    violated(verdict(&w, &obs, &snap, vec![]), &["rename /A/f3 /A/r3", "both name"]);
    // Renamed across directories, missing from both.
    let mut snap = after.to_snapshot(&obs);
    snap.entries.remove("/B/r4");
    violated(verdict(&w, &obs, &snap, vec![]), &["rename /A/f4 /B/r4", "missing from both"]);
    // Link: new name present but the link count still 1.
    let mut snap = after.to_snapshot(&obs);
    file_mut(&mut snap, "/A/f1").nlink = 1;
    file_mut(&mut snap, "/A/l1").nlink = 1;
    violated(
        verdict(&w, &obs, &snap, vec![]),
        &["link /A/f1 /A/l1", "link count 1 but 2 names were found"],
    );
    // Rename over an existing file: the destination lost, the source gone.
    let mut snap = states[0].to_snapshot(&obs);
    snap.entries.remove("/B/f5");
    violated(verdict(&w, &obs, &snap, vec![]), &["rename /B/f5 /B/f6"]);
    // Unlink: name present but link count 0.
    let mut snap = states[0].to_snapshot(&obs);
    file_mut(&mut snap, "/A/f2").nlink = 0;
    violated(verdict(&w, &obs, &snap, vec![]), &["unlink /A/f2", "link count 0"]);
    // Any mix of whole ops (each op before or after) is legal for atomicity.
    let mut snap = states[0].to_snapshot(&obs);
    for p in ["/A/r3", "/A/l1"] {
        snap.entries.insert(p.into(), after.to_snapshot(&obs).entries[p].clone());
    }
    snap.entries.remove("/A/f3");
    file_mut(&mut snap, "/A/f1").nlink = 2;
    file_mut(&mut snap, "/A/l1").nlink = 2;
    assert_eq!(verdict(&w, &obs, &snap, vec![]), Verdict::Held);
}

#[test]
fn append_then_rename_out_of_order() {
    let (w, obs, states) = setup(Property::AppendThenRename);
    let mut snap = states[2].to_snapshot(&obs);
    set(&mut snap, "/A/dst", 0, 8, SectorClass::Zero);
    violated(
        verdict(&w, &obs, &snap, vec![]),
        &[
            "rename /A/f0 /A/dst persisted (op 1)",
            "append /A/f0 4096@0 not (op 0)",
            "/A/dst @0+4096 is all zeros",
        ],
    );
    // The rename alone with size 0 (data and size not persisted).
    let mut snap = states[2].to_snapshot(&obs);
    let dst = file_mut(&mut snap, "/A/dst");
    dst.size = 0;
    dst.content = Some(Content::new());
    violated(verdict(&w, &obs, &snap, vec![]), &["has size 0"]);
}

#[test]
fn append_then_append_hole() {
    let (w, obs, states) = setup(Property::AppendThenAppend);
    let mut snap = states[10].to_snapshot(&obs);
    set(&mut snap, "/A/f0", 3 * 8, 8, SectorClass::Zero);
    violated(verdict(&w, &obs, &snap, vec![]), &["persisted (op 9)", "not (op 3)"]);
    // A prefix of the appends is fine, even with the size ahead of the data's end.
    let mut snap = states[4].to_snapshot(&obs);
    let f0 = file_mut(&mut snap, "/A/f0");
    f0.size = 5 * 4096;
    f0.content.as_mut().unwrap().resize(5 * 8);
    assert_eq!(verdict(&w, &obs, &snap, vec![]), Verdict::Held);
}

#[test]
fn otrunc_and_dir_op_orderings() {
    let (w, obs, states) = setup(Property::OtruncAppendThenClose);
    // Later ops persisted, the truncate not: the old data is all still there.
    let mut snap = states.last().unwrap().to_snapshot(&obs);
    let old = states[0].to_snapshot(&obs).entries["/big1"].clone();
    snap.entries.insert("/big1".into(), old);
    violated(verdict(&w, &obs, &snap, vec![]), &["not (op 0)", "otrunc-write /big1"]);
    // Truncated to 0 and nothing else yet: before op 0 in effect, nothing later: fine.
    let mut snap = states[0].to_snapshot(&obs);
    let b = file_mut(&mut snap, "/big1");
    b.size = 0;
    b.content = Some(Content::new());
    assert_eq!(verdict(&w, &obs, &snap, vec![]), Verdict::Held);

    let (w, obs, states) = setup(Property::AppendThenDirOp);
    let mut snap = states[4].to_snapshot(&obs);
    let f0 = file_mut(&mut snap, "/A/f0");
    f0.size = 0;
    f0.content = Some(Content::new());
    violated(
        verdict(&w, &obs, &snap, vec![3]),
        &["creat-osync /B/c0 persisted (op 3)", "append /A/f0"],
    );

    let (w, obs, states) = setup(Property::DirOpThenAny);
    let mut snap = states.last().unwrap().to_snapshot(&obs);
    snap.entries.remove("/A/c0");
    violated(verdict(&w, &obs, &snap, vec![]), &["creat /A/c0 not (op 0)", "/A/c0 is absent"]);
}

#[test]
fn durability_promises() {
    let (w, obs, states) = setup(Property::FsyncDurable);
    // Nothing persisted, but the first fsync is durable.
    violated(
        verdict(&w, &obs, &states[0].to_snapshot(&obs), vec![1]),
        &["fsync /A/f0 (op 1) is durable", "size 0, not 8192"],
    );
    // The state right after the fsync is fine, and a later append to the same file too.
    assert_eq!(verdict(&w, &obs, &states[2].to_snapshot(&obs), vec![1]), Verdict::Held);
    assert_eq!(verdict(&w, &obs, &states[5].to_snapshot(&obs), vec![1, 3]), Verdict::Held);
    // fsync of /big0 durable but its block old.
    let mut snap = states[6].to_snapshot(&obs);
    let Op::Write { offset, .. } = w.ops[2] else { panic!() };
    let big0 = states[0].id("/big0").unwrap();
    set(&mut snap, "/big0", offset / 512, 8, SectorClass::Data { file: big0, op: None });
    violated(verdict(&w, &obs, &snap, vec![1, 3]), &["fsync /big0 (op 3)", "not the data of op 2"]);

    let (w, obs, states) = setup(Property::FdatasyncDurable);
    violated(verdict(&w, &obs, &states[0].to_snapshot(&obs), vec![1]), &["fdatasync /A/f0"]);
    assert_eq!(verdict(&w, &obs, &states[1].to_snapshot(&obs), vec![1]), Verdict::Held);

    let (w, obs, states) = setup(Property::SyncDurable);
    let mut snap = states[8].to_snapshot(&obs);
    let r2 = snap.entries.remove("/B/r2").unwrap();
    snap.entries.insert("/A/f2".into(), r2);
    violated(verdict(&w, &obs, &snap, vec![7]), &["sync (op 7) is durable", "/A/f2"]);
    assert_eq!(verdict(&w, &obs, &states[8].to_snapshot(&obs), vec![7]), Verdict::Held);

    let (w, obs, states) = setup(Property::DirFsyncDurable);
    violated(
        verdict(&w, &obs, &states[0].to_snapshot(&obs), vec![2, 3]),
        &["fsync /A (op 3) is durable", "/A/c0 is absent"],
    );
    // The rename: old name still there after fsync(/A).
    let mut snap = states[5].to_snapshot(&obs);
    let r1 = snap.entries.remove("/A/r1").unwrap();
    snap.entries.insert("/A/f1".into(), r1);
    violated(verdict(&w, &obs, &snap, vec![2, 3, 5]), &["fsync /A (op 5)"]);
    // Durable points only constrain what they promise: later non-durable ops are free.
    assert_eq!(verdict(&w, &obs, &states[6].to_snapshot(&obs), vec![2, 3]), Verdict::Held);
}

#[test]
fn durability_inside_other_workloads_is_reported_beside_the_verdict() {
    let (w, obs, states) = setup(Property::AppendThenDirOp);
    // Everything before the O_SYNC creat persisted, the creat itself not, yet durable:
    // a durability failure, which is not what append-then-dir-op's row says.
    let snap = states[3].to_snapshot(&obs);
    let ctx = CrashContext { durable_ops: vec![3] };
    assert_eq!(check(&w, &obs, &snap, &ctx), Verdict::Held);
    let j = Oracle::new(&w).judge(&obs, &snap, &ctx);
    assert!(j.findings.is_empty());
    assert_eq!(j.beside.len(), 1);
    assert_eq!(j.beside[0].family, Family::Durability);
    assert!(
        j.beside[0].story.starts_with("durability: creat-osync /B/c0 (op 3) is durable here"),
        "{}",
        j.beside[0].story
    );
}

/// The state after every op, except that op `k`'s effect is undone (its names or data as
/// before it).
fn all_but(states: &[ModelState], obs: &Observed, k: usize, paths: &[&str]) -> Snapshot {
    let mut snap = states.last().unwrap().to_snapshot(obs);
    let before = states[k].to_snapshot(obs);
    for p in paths {
        match before.entries.get(*p) {
            Some(n) => {
                snap.entries.insert((*p).into(), n.clone());
            }
            None => {
                snap.entries.remove(*p);
            }
        }
    }
    snap
}

#[test]
fn an_ordering_row_judges_only_its_own_pair() {
    // append-then-rename: the plain append to /B/f5 (op 2) missing while the later rename
    // of another file (op 4) persisted is a reordering, but not this row's pair.
    let (w, obs, states) = setup(Property::AppendThenRename);
    let snap = all_but(&states, &obs, 2, &["/B/f5"]);
    let ctx = CrashContext::default();
    assert_eq!(check(&w, &obs, &snap, &ctx), Verdict::Held);
    let j = Oracle::new(&w).judge(&obs, &snap, &ctx);
    let other = &j.beside[0];
    let pair = other.pair.as_ref().expect("a reordering names both ops");
    assert_eq!((pair.earlier_op.index, pair.later_op.index), (2, 4));
    assert_eq!(pair.earlier_op.kind, OpKind::Append);
    assert_eq!(pair.later_op.kind, OpKind::Rename);
    assert_eq!(pair.later_op.paths, vec!["/A/f2".to_string(), "/B/r2".to_string()]);
    // Its own pair: the append to /A/f0 (op 0) missing, the rename of /A/f0 (op 1) done.
    let mut snap = states[2].to_snapshot(&obs);
    set(&mut snap, "/A/dst", 0, 8, SectorClass::Zero);
    let j = Oracle::new(&w).judge(&obs, &snap, &ctx);
    let pair = j.findings[0].pair.as_ref().unwrap();
    assert_eq!((pair.earlier_op.index, pair.later_op.index), (0, 1));

    // dir-op-then-any: an overwrite (op 3) missing before later dir ops is
    // overwrite-then-any's finding, not this row's.
    let (w, obs, states) = setup(Property::DirOpThenAny);
    let Op::Write { offset, .. } = w.ops[3] else { panic!() };
    let mut snap = states.last().unwrap().to_snapshot(&obs);
    let big2 = states[0].id("/big2").unwrap();
    set(&mut snap, "/big2", offset / 512, 8, SectorClass::Data { file: big2, op: None });
    assert_eq!(check(&w, &obs, &snap, &ctx), Verdict::Held);
    assert!(!Oracle::new(&w).judge(&obs, &snap, &ctx).beside.is_empty());
    // A dir op in /A (op 1, link) missing while a link in /B (op 5) persisted: the pair.
    let snap = all_but(&states, &obs, 1, &["/A/l0", "/A/f0"]);
    violated(verdict(&w, &obs, &snap, vec![]), &["not (op 1)"]);
    // The same dir op missing while only later ops in its own directory persisted is not
    // "elsewhere".
    let o = Oracle::new(&w);
    assert!(!o.is_pair(0, 2), "creat /A/c0 -> rename in /A");
    assert!(o.is_pair(0, 5), "creat /A/c0 -> link in /B");
    assert!(!o.is_pair(3, 5), "an overwrite is no dir op");

    // overwrite-then-any and append-then-append name their pairs.
    let (w, ..) = setup(Property::OverwriteThenAny);
    let o = Oracle::new(&w);
    assert!(o.is_pair(0, 1) && o.is_pair(0, 5) && !o.is_pair(1, 2));
    let (w, ..) = setup(Property::AppendThenAppend);
    let o = Oracle::new(&w);
    assert!(o.is_pair(0, 9) && !o.is_pair(9, 0));
    let (w, ..) = setup(Property::AppendThenDirOp);
    let o = Oracle::new(&w);
    assert!(o.is_pair(0, 1) && o.is_pair(0, 2) && o.is_pair(0, 3));
}

#[test]
fn a_fsynced_file_whose_durable_name_vanished_is_a_violation() {
    let (w, obs, states) = setup(Property::FsyncDurable);
    // /A/f0 is in the base image (a durable name); after its fsync (op 1) it is gone.
    let mut snap = states[2].to_snapshot(&obs);
    snap.entries.remove("/A/f0");
    violated(
        verdict(&w, &obs, &snap, vec![1]),
        &["fsync /A/f0 (op 1) is durable", "found under none of its names (/A/f0)"],
    );
    // dir-fsync-durable: /B/c1 was created and its directory fsynced, but the file was
    // never fsynced: its name is not promised, so its absence is no violation.
    let (w, obs, states) = setup(Property::DirFsyncDurable);
    let mut snap = states[10].to_snapshot(&obs);
    snap.entries.remove("/B/c1");
    assert_eq!(verdict(&w, &obs, &snap, vec![2, 3, 5, 7, 9]), Verdict::Held);
    // /A/c0 was fsynced and then /A: its name is promised.
    let mut snap = states[10].to_snapshot(&obs);
    snap.entries.remove("/A/c0");
    violated(
        verdict(&w, &obs, &snap, vec![2, 3, 5, 7, 9]),
        &["fsync /A (op 3)", "/A/c0 is absent"],
    );
}

/// Issue 11: a file the file system refuses to read is the state's `read-error` (bob's
/// outcome), not an atomicity or ordering violation; but data an fsync promised that now
/// reads as an error is a broken promise, a violation.
#[test]
fn issue_11_a_read_error_breaks_a_durability_promise_but_is_no_reordering_or_tear() {
    let eio = || Some("Input/output error (os error 5)".to_owned());
    let unreadable = |snap: &mut Snapshot, path: &str| {
        let n = file_mut(snap, path);
        n.content = None;
        n.read_error = eio();
    };
    let (w, obs, states) = setup(Property::SingleBlockAppend);
    let Op::Append { path, .. } = &w.ops[0] else { panic!("{:?}", w.ops[0]) };
    let mut snap = states[1].to_snapshot(&obs);
    unreadable(&mut snap, path);
    assert_eq!(verdict(&w, &obs, &snap, vec![]), Verdict::Held, "no tear to judge");

    let (w, obs, states) = setup(Property::AppendThenRename);
    let mut snap = states[2].to_snapshot(&obs);
    unreadable(&mut snap, "/A/dst");
    assert_eq!(verdict(&w, &obs, &snap, vec![]), Verdict::Held, "no reordering to judge");

    let (w, obs, states) = setup(Property::FsyncDurable);
    let mut snap = states[2].to_snapshot(&obs);
    unreadable(&mut snap, "/A/f0");
    violated(verdict(&w, &obs, &snap, vec![1]), &["fsync /A/f0 (op 1)", "reading /A/f0 failed"]);
}

/// A generated seq-1 workload (Ace's bounds) by its listed text, with inode numbers
/// observed.
fn generated(text: &str) -> (Workload, Observed, Vec<ModelState>) {
    generated_in(1, text)
}

/// [`generated`] among the workloads of `seq` core operations.
fn generated_in(seq: usize, text: &str) -> (Workload, Observed, Vec<ModelState>) {
    let g = workloads::enumerate::Bounds::ace(seq).generator();
    let (_, w) = g
        .iter_from(0)
        .find(|(_, w)| w.ops.iter().map(|o| o.to_string()).collect::<Vec<_>>().join("; ") == text)
        .unwrap_or_else(|| panic!("no seq-1 workload {text:?}"));
    let states = model_states(&w);
    let mut observed = Observed::default();
    for id in states.last().unwrap().nodes.keys() {
        observed.inos.insert(*id, 100 + u64::from(*id));
    }
    (w, observed, states)
}

#[test]
fn fsync_and_sync_promise_extended_attributes_and_fdatasync_does_not() {
    // setxattr, then fsync of the file: the value must be there after the fsync.
    let (w, obs, states) = generated("setxattr /foo user.xattr1=op0; fsync /foo");
    let after = states[2].to_snapshot(&obs);
    assert_eq!(after.entries["/foo"].xattrs["user.xattr1"], "op0");
    assert_eq!(verdict(&w, &obs, &after, vec![1]), Verdict::Held);
    let mut lost = after.clone();
    lost.entries.get_mut("/foo").unwrap().xattrs.clear();
    violated(verdict(&w, &obs, &lost, vec![1]), &["/foo lacks the attribute"]);
    let d = first_discrepancy(&w, &obs, &lost, vec![1]);
    assert_eq!(
        (d.kind, d.ops, d.paths),
        (DiscrepancyKind::WrongXattr, vec![1], vec!["/foo".into()])
    );
    // Before the fsync was durable nothing was promised.
    assert_eq!(verdict(&w, &obs, &lost, vec![]), Verdict::Held);

    // removexattr, then sync: a value back from the setup is a violation.
    let (w, obs, states) = generated("removexattr /foo user.xattr1; sync");
    let mut back = states[2].to_snapshot(&obs);
    assert_eq!(verdict(&w, &obs, &back, vec![1]), Verdict::Held);
    back.entries.get_mut("/foo").unwrap().xattrs.insert("user.xattr1".into(), "setup".into());
    violated(verdict(&w, &obs, &back, vec![1]), &["user.xattr1=setup", "removed"]);

    // fdatasync promises the data, not the attribute.
    let (w, obs, states) = generated("setxattr /foo user.xattr1=op0; fdatasync /foo");
    let mut lost = states[2].to_snapshot(&obs);
    lost.entries.get_mut("/foo").unwrap().xattrs.clear();
    assert_eq!(verdict(&w, &obs, &lost, vec![1]), Verdict::Held);
}

/// A name whose inode number the file system gave again to the file created there next
/// (ext4 reuses a freed inode number at once) is the new file's, not a stale name: the
/// seq-2 sample's `unlink /foo; creat /foo; sync` on ext4-ordered was crossed for it.
#[test]
fn a_reused_inode_number_is_no_stale_name() {
    let (w, mut obs, states) = generated_in(2, "unlink /foo; creat /foo; sync");
    let (old, new) = (states[0].id("/foo").unwrap(), states[2].id("/foo").unwrap());
    assert_ne!(old, new);
    obs.inos.insert(old, 13);
    obs.inos.insert(new, 13);
    let after = states[3].to_snapshot(&obs);
    assert_eq!(verdict(&w, &obs, &after, vec![2]), Verdict::Held);
    // The old file back under its name (its size, not the new empty file's) still is.
    let mut stale = after.clone();
    stale.entries.insert("/foo".into(), states[0].to_snapshot(&obs).entries["/foo"].clone());
    violated(verdict(&w, &obs, &stale, vec![2]), &["/foo"]);
}

#[test]
fn a_synced_file_whose_link_count_is_not_its_names_is_a_violation() {
    let (w, obs, states) = generated("link /foo /bar; sync");
    let after = states[2].to_snapshot(&obs);
    assert_eq!(after.entries["/foo"].nlink, 2);
    assert_eq!(verdict(&w, &obs, &after, vec![1]), Verdict::Held);
    // Both names, but the inode counts one link: an unlink of either would free it.
    let mut wrong = after.clone();
    for p in ["/foo", "/bar"] {
        wrong.entries.get_mut(p).unwrap().nlink = 1;
    }
    violated(verdict(&w, &obs, &wrong, vec![1]), &["link count 1", "2 name(s)"]);
    assert_eq!(first_discrepancy(&w, &obs, &wrong, vec![1]).kind, DiscrepancyKind::WrongLinkCount);
}

#[test]
fn transactions_are_all_or_nothing_and_durable_commits_survive() {
    let (w, obs, states) = setup(Property::TxnAtomic);
    let kinds: Vec<String> = w.ops.iter().map(|o| o.kind().name().to_string()).collect();
    assert_eq!(kinds[3], "txn-commit");
    assert_eq!(w.ops[7], Op::TxnCommit { durable: true });
    assert_eq!(w.ops[11], Op::TxnAbort);
    // The model rolls the abort back: after it, the state of before the transaction.
    assert_eq!(states[12].nodes, states[8].nodes);
    // Between transactions (and inside one before its first write) every state holds.
    for k in [0, 1, 4, 5, 8, 9, 12, 13] {
        let v = verdict(&w, &obs, &states[k].to_snapshot(&obs), vec![]);
        assert_eq!(v, Verdict::Held, "state before op {k}");
    }
    // Half a committed transaction, a trace of an aborted and of an unfinished one.
    let v = verdict(&w, &obs, &states[2].to_snapshot(&obs), vec![]);
    violated(v, &["ops 0-3 (committed) is half there", "/B/tb @0+8192 is all the old data"]);
    let d = first_discrepancy(&w, &obs, &states[2].to_snapshot(&obs), vec![]);
    assert_eq!((d.kind, d.paths), (DiscrepancyKind::TxnNotAtomic, vec!["/B/tb".to_string()]));
    let v = verdict(&w, &obs, &states[10].to_snapshot(&obs), vec![]);
    violated(v, &["ops 8-11 (aborted) left a trace", "write /A/ta 4096@12288 (op 9)"]);
    let v = verdict(&w, &obs, &states[14].to_snapshot(&obs), vec![]);
    violated(v, &["ops 12-14 (unfinished at the crash) left a trace", "(op 13)"]);
    // A lost durable commit: atomic (T1 alone is whole), so held here, but its row fails.
    let lost = states[4].to_snapshot(&obs);
    assert_eq!(verdict(&w, &obs, &lost, vec![7]), Verdict::Held);
    let (wd, obsd, statesd) = setup(Property::TxnDurable);
    assert_eq!(wd.ops, w.ops);
    let v = verdict(&wd, &obsd, &statesd[4].to_snapshot(&obsd), vec![7]);
    violated(v, &["ops 4-7 (committed durably) is not durable", "(op 5)"]);
    let d = first_discrepancy(&wd, &obsd, &statesd[4].to_snapshot(&obsd), vec![7]);
    assert_eq!((d.kind, d.ops), (DiscrepancyKind::TxnLost, vec![7, 5]));
    assert_eq!(verdict(&wd, &obsd, &statesd[8].to_snapshot(&obsd), vec![7]), Verdict::Held);
    assert_eq!(verdict(&wd, &obsd, &statesd[4].to_snapshot(&obsd), vec![]), Verdict::Held);
    // A page of the committed transaction torn to zeros is no candidate either.
    let mut torn = states[8].to_snapshot(&obs);
    set(&mut torn, "/A/ta", 8, 8, SectorClass::Zero);
    violated(verdict(&w, &obs, &torn, vec![]), &["ops 0-3 (committed) is half there"]);
}
