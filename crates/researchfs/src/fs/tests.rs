//! Tests of the researchfs core, for every design.

use super::*;
use crate::device::MemDevice;
use crate::layout::{build_dir_block, BackLink, DirEntry, INODE_SIZE, NDIRECT};

fn fresh(design: Design, mb: u64) -> (Arc<MemDevice>, Arc<Fs>) {
    let dev = Arc::new(MemDevice::new(mb << 20));
    mkfs(design, dev.as_ref(), dev.size()).unwrap();
    let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
    fs.wait_scan();
    (dev, fs)
}

fn reopen(design: Design, dev: &Arc<MemDevice>) -> Arc<Fs> {
    let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
    fs.wait_scan();
    fs
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn mkfs_then_fsck_is_clean_for_every_design() {
    for d in Design::ALL {
        let (dev, fs) = fresh(d, 8);
        fs.shutdown().unwrap();
        let r = crate::fsck(d, dev.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);
        assert_eq!(r.inodes_reachable, 1);
    }
}

#[test]
fn round_trips_survive_remount_and_fsck_for_every_design() {
    for d in Design::ALL {
        let (dev, fs) = fresh(d, 64);
        let a = fs.mkdir(ROOT, "a").unwrap();
        let f = fs.create(a, "f").unwrap();
        // Past the direct blocks and into the double-indirect tree.
        let p = d.payload();
        let big = pattern((NDIRECT + d.ptrs_per_block() + 3) * p + 17, 3);
        fs.write(f, 0, &big).unwrap();
        fs.write(f, 5, b"hello").unwrap();
        let g = fs.create(ROOT, "g").unwrap();
        fs.write(g, 0, b"small").unwrap();
        fs.link(g, a, "g2").unwrap();
        fs.rename(ROOT, "g", a, "g3").unwrap();
        for i in 0..200 {
            fs.create(a, format!("many-{i:03}")).unwrap();
        }
        for i in 0..100 {
            fs.unlink(a, format!("many-{i:03}")).unwrap();
        }
        fs.shutdown().unwrap();
        let r = crate::fsck(d, dev.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);

        let fs = reopen(d, &dev);
        let f = fs.resolve("a/f").unwrap();
        let mut expect = big.clone();
        expect[5..10].copy_from_slice(b"hello");
        assert_eq!(fs.read(f, 0, expect.len() + 100).unwrap(), expect, "{d}");
        let g3 = fs.resolve("a/g3").unwrap();
        assert_eq!(fs.resolve("a/g2").unwrap(), g3);
        assert_eq!(fs.getattr(g3).unwrap().nlink, 2);
        assert!(matches!(fs.resolve("g"), Err(Error::NotFound)));
        assert_eq!(fs.readdir(fs.resolve("a").unwrap()).unwrap().len(), 3 + 100);
        let before = fs.statfs();
        fs.truncate(f, 10).unwrap();
        assert_eq!(fs.read(f, 0, 100).unwrap(), &expect[..10]);
        fs.truncate(f, 20).unwrap();
        assert_eq!(&fs.read(f, 0, 100).unwrap()[10..], &[0u8; 10]);
        assert!(fs.statfs().bfree > before.bfree);
        fs.unlink(a, "g2").unwrap();
        fs.unlink(a, "g3").unwrap();
        fs.unlink(a, "f").unwrap();
        for i in 100..200 {
            fs.unlink(a, format!("many-{i:03}")).unwrap();
        }
        assert!(matches!(fs.rmdir(ROOT, "nope"), Err(Error::NotFound)));
        fs.rmdir(ROOT, "a").unwrap();
        fs.shutdown().unwrap();
        let r = crate::fsck(d, dev.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{d}: {:?}", r.problems);
        assert_eq!(r.inodes_reachable, 1, "{d}");
        let fs = reopen(d, &dev);
        let u = fs.statfs();
        assert_eq!(u.ffree, u.files - 1, "{d}: every inode but the root is free again");
        assert_eq!(u.bfree, u.blocks - 1, "{d}: every block but the root's is free again");
    }
}

#[test]
fn namespace_errors() {
    let (_dev, fs) = fresh(Design::Nofs, 4);
    let a = fs.mkdir(ROOT, "a").unwrap();
    fs.create(a, "x").unwrap();
    assert!(matches!(fs.create(a, "x"), Err(Error::Exists)));
    assert!(matches!(fs.rmdir(ROOT, "a"), Err(Error::NotEmpty)));
    assert!(matches!(fs.create(a, "a/b"), Err(Error::BadName)));
    assert!(matches!(fs.rename(ROOT, "a", a, "inside"), Err(Error::BadName)));
    assert!(matches!(fs.unlink(ROOT, "a"), Err(Error::IsDir)));
}

#[test]
fn nofs_issues_no_flush_even_on_fsync_unless_durable() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let base = dev.flushes();
    let f = fs.create(ROOT, "f").unwrap();
    fs.write(f, 0, b"x").unwrap();
    fs.fsync(f).unwrap();
    fs.shutdown().unwrap();
    assert_eq!(dev.flushes(), base);
    let fs = Fs::open(Design::Nofs, dev.clone(), Options { durable: true, ..Options::default() })
        .unwrap();
    fs.fsync(f).unwrap();
    assert_eq!(dev.flushes(), base + 1);
    fs.crash();
}

#[test]
fn ordered_core_flushes_between_dependent_writes() {
    let (dev, fs) = fresh(Design::Ordered, 4);
    let base = dev.flushes();
    let f = fs.create(ROOT, "f").unwrap();
    assert!(dev.flushes() > base, "inode before entry");
    let mid = dev.flushes();
    fs.write(f, 0, b"x").unwrap();
    assert!(dev.flushes() > mid, "data before inode");
    fs.crash();
    let (dev, fs) = fresh(Design::Orderless, 4);
    let base = dev.flushes();
    let f = fs.create(ROOT, "f").unwrap();
    fs.write(f, 0, b"x").unwrap();
    assert_eq!(dev.flushes(), base);
    fs.fsync(f).unwrap();
    assert_eq!(dev.flushes(), base + 1);
    fs.crash();
}

#[test]
fn wrong_design_is_refused_with_its_name() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    fs.shutdown().unwrap();
    let err = Fs::open(Design::Orderless, dev.clone(), Options::default()).err().unwrap();
    assert!(err.to_string().contains("made for design nofs"), "{err}");
    let blank = Arc::new(MemDevice::new(1 << 20));
    assert!(Fs::open(Design::Nofs, blank, Options::default()).is_err());
}

/// Corrupts the backpointer of the block at `role`/`index` of `path`'s blocks.
fn corrupt(dev: &MemDevice, fs: &Fs, path: &str, role: Role, what: &[u8]) {
    let ino = fs.resolve(path).unwrap();
    let (_, b) = fs.blocks_of(ino).unwrap().into_iter().find(|(r, _)| *r == role).unwrap();
    dev.write_at(b * BLOCK as u64, what, WriteInfo::new(Role::Other)).unwrap();
}

#[test]
fn nofs_data_backpointer_mismatch_is_eio_not_data() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let f = fs.create(ROOT, "f").unwrap();
    let other = fs.create(ROOT, "other").unwrap();
    fs.write(f, 0, b"secret").unwrap();
    // A backpointer naming another live file: two files claim one block (TP).
    let bp = [other.to_le_bytes(), 0u32.to_le_bytes()].concat();
    corrupt(&dev, &fs, "f", Role::Data, &bp);
    let err = fs.read(f, 0, 6).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Tp), .. }), "{err}");
    // Wrong offset, right owner: garbage for this position (GD).
    let bp = [f.to_le_bytes(), 7u32.to_le_bytes()].concat();
    corrupt(&dev, &fs, "f", Role::Data, &bp);
    let err = fs.read(f, 0, 6).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Gd), .. }), "{err}");
    assert_eq!(err.errno(), libc::EIO);
    // Overwriting is refused too: the block may be someone else's.
    assert!(fs.write(f, 0, b"x").is_err());
    // The same corruption on orderless reads back silently.
    let (dev, fs) = fresh(Design::Orderless, 4);
    let f = fs.create(ROOT, "f").unwrap();
    fs.write(f, 0, b"secret").unwrap();
    corrupt(&dev, &fs, "f", Role::Data, b"XX");
    assert_eq!(fs.read(f, 0, 6).unwrap(), b"XXcret");
}

#[test]
fn nofs_indirect_backpointer_mismatch_is_eio() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let f = fs.create(ROOT, "f").unwrap();
    let p = Design::Nofs.payload();
    fs.write(f, 0, &pattern((NDIRECT + 2) * p, 1)).unwrap();
    assert_eq!(fs.read(f, (NDIRECT * p) as u64, 4).unwrap().len(), 4);
    corrupt(&dev, &fs, "f", Role::Indirect, &[f.to_le_bytes(), 0u32.to_le_bytes()].concat());
    let err = fs.read(f, (NDIRECT * p) as u64, 4).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Gd), .. }), "{err}");
    // Direct blocks do not depend on the indirect block and still read.
    assert_eq!(fs.read(f, 0, 4).unwrap(), pattern(4, 1));
}

#[test]
fn nofs_directory_dot_backpointer_mismatch_is_eio() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let d = fs.mkdir(ROOT, "d").unwrap();
    fs.create(d, "x").unwrap();
    // "." of d's block now names the root.
    corrupt(&dev, &fs, "d", Role::Directory, &ROOT.to_le_bytes());
    let err = fs.readdir(d).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
    assert!(fs.lookup(d, "x").is_err());
}

#[test]
fn nofs_backlink_mismatch_is_eio_and_link_count_is_repaired() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let a = fs.mkdir(ROOT, "a").unwrap();
    let b = fs.mkdir(ROOT, "b").unwrap();
    let f = fs.create(a, "f").unwrap();
    fs.link(f, b, "g").unwrap();
    fs.shutdown().unwrap();
    // Rewrite the inode with a back link to the root instead of b: b's entry no longer
    // agrees with the inode it names.
    let (blk, off) = fs.lock().sb.inode_location(f);
    let mut raw = vec![0u8; BLOCK];
    dev.read_at(blk * BLOCK as u64, &mut raw).unwrap();
    let mut inode = Inode::decode(&raw[off..off + INODE_SIZE]);
    inode.backlinks = vec![BackLink::new(a, b"f"), BackLink::new(ROOT, b"g")];
    inode.encode_into(&mut raw[off..off + INODE_SIZE]);
    dev.write_at(blk * BLOCK as u64, &raw, WriteInfo::new(Role::Other)).unwrap();
    let fs = reopen(Design::Nofs, &dev);
    let err = fs.resolve("b/g").unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
    // Through a, the file is fine, and its link count is corrected to the one
    // directory that confirms it.
    let f = fs.resolve("a/f").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 1);
    assert!(fs
        .detections()
        .iter()
        .any(|d| d.kind == Some(ErrorKind::Hl) && d.action == Action::Repaired));
}

#[test]
fn nofs_is_usable_during_its_scan_and_reclaims_orphans() {
    let (dev, fs) = fresh(Design::Nofs, 16);
    let a = fs.mkdir(ROOT, "a").unwrap();
    let f = fs.create(a, "f").unwrap();
    fs.write(f, 0, &pattern(20_000, 2)).unwrap();
    fs.shutdown().unwrap();
    // Orphan f: remove a's entry behind the file system's back.
    let ai = fs.lock().get_inode(a).unwrap();
    let d = ai.direct[0];
    let blk = build_dir_block(&[
        DirEntry { ino: a, gen: ai.generation, kind: Kind::Dir, name: b".".to_vec() },
        DirEntry { ino: ROOT, gen: 0, kind: Kind::Dir, name: b"..".to_vec() },
    ])
    .unwrap();
    dev.write_at(u64::from(d) * BLOCK as u64, &blk, WriteInfo::new(Role::Other)).unwrap();
    let fs = Fs::open(Design::Nofs, dev.clone(), Options::default()).unwrap();
    // Usable at once: create and write while the scan may still run.
    let g = fs.create(ROOT, "g").unwrap();
    fs.write(g, 0, b"during scan").unwrap();
    fs.wait_scan();
    assert!(fs.scan_done());
    assert_eq!(fs.read(g, 0, 100).unwrap(), b"during scan");
    let ev = fs.detections();
    assert!(ev.iter().any(|e| e.kind == Some(ErrorKind::Oi)), "{ev:?}");
    let u = fs.statfs();
    // Root + a + g remain; f and its 5 blocks were reclaimed.
    assert_eq!(u.files - u.ffree, 3);
    assert_eq!(u.blocks - u.bfree, 3);
}

/// The raw block `b` of `dev`.
fn raw(dev: &MemDevice, b: u64) -> Vec<u8> {
    let mut v = vec![0u8; BLOCK];
    dev.read_at(b * BLOCK as u64, &mut v).unwrap();
    v
}

/// Puts back an earlier copy of block `b`, as if the writes since were lost.
fn lose_writes(dev: &MemDevice, b: u64, old: &[u8]) {
    dev.write_at(b * BLOCK as u64, old, WriteInfo::new(Role::Other)).unwrap();
}

#[test]
fn nofs_notices_a_lost_second_link_in_the_same_directory() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let a = fs.mkdir(ROOT, "a").unwrap();
    let f = fs.create(a, "f").unwrap();
    fs.write(f, 0, b"linked twice").unwrap();
    let (iblk, _) = fs.lock().sb.inode_location(f);
    let before = raw(&dev, iblk);
    fs.link(f, a, "g").unwrap();
    fs.shutdown().unwrap();
    // The inode write of the link is lost; the entry "g" reached the disk.
    lose_writes(&dev, iblk, &before);
    let fs = reopen(Design::Nofs, &dev);
    let err = fs.resolve("a/g").unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Bd), .. }), "{err}");
    let f2 = fs.resolve("a/f").unwrap();
    assert_eq!(f2, f);
    assert_eq!(fs.getattr(f).unwrap().nlink, 1);
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"linked twice");
    let r = crate::check::classify(fs.as_ref(), &[]);
    assert!(r.silent().is_empty(), "{:?}", r.silent());
}

#[test]
fn nofs_reused_inode_and_block_do_not_pass_for_the_deleted_file() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let b = fs.mkdir(ROOT, "b").unwrap();
    let old = fs.create(b, "old").unwrap();
    fs.write(old, 0, &pattern(3000, 1)).unwrap();
    let old_inode = fs.lock().get_inode(old).unwrap();
    let (iblk, _) = fs.lock().sb.inode_location(old);
    let dblk = u64::from(fs.lock().get_inode(b).unwrap().direct[0]);
    let (inode_before, dir_before) = (raw(&dev, iblk), raw(&dev, dblk));
    fs.unlink(b, "old").unwrap();
    let new = fs.create(b, "new").unwrap();
    fs.write(new, 0, &pattern(3000, 2)).unwrap();
    let new_inode = fs.lock().get_inode(new).unwrap();
    // The scenario needs the number and the block reused.
    assert_eq!(new, old);
    assert_eq!(new_inode.direct[0], old_inode.direct[0]);
    assert_eq!(new_inode.generation, old_inode.generation + 1);
    fs.shutdown().unwrap();
    // Only the new file's data block reached the disk.
    lose_writes(&dev, iblk, &inode_before);
    lose_writes(&dev, dblk, &dir_before);
    let fs = reopen(Design::Nofs, &dev);
    let ino = fs.resolve("b/old").unwrap();
    let err = fs.read(ino, 0, 3000).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { kind: Some(ErrorKind::Tp), .. }), "{err}");
    let r = crate::check::classify(fs.as_ref(), &[]);
    assert!(r.silent().is_empty(), "{:?}", r.silent());

    // And the other way round: the inode and data reached the disk, the directory
    // block did not; the old name now names a newer generation.
    let (dev, fs) = fresh(Design::Nofs, 4);
    let b = fs.mkdir(ROOT, "b").unwrap();
    let old = fs.create(b, "old").unwrap();
    fs.write(old, 0, &pattern(3000, 1)).unwrap();
    let dblk = u64::from(fs.lock().get_inode(b).unwrap().direct[0]);
    let other = fs.mkdir(ROOT, "c").unwrap();
    let dir_before = raw(&dev, dblk);
    fs.unlink(b, "old").unwrap();
    let new = fs.create(other, "new").unwrap();
    assert_eq!(new, old);
    fs.write(new, 0, &pattern(3000, 2)).unwrap();
    fs.shutdown().unwrap();
    lose_writes(&dev, dblk, &dir_before);
    let fs = reopen(Design::Nofs, &dev);
    let err = fs.resolve("b/old").unwrap_err();
    assert!(err.to_string().contains("generation"), "{err}");
    assert_eq!(fs.read(fs.resolve("c/new").unwrap(), 0, 3000).unwrap(), pattern(3000, 2));
}

#[test]
fn rename_within_a_directory_moves_the_back_link() {
    let (dev, fs) = fresh(Design::Nofs, 4);
    let a = fs.mkdir(ROOT, "a").unwrap();
    let f = fs.create(a, "f").unwrap();
    fs.link(f, a, "g").unwrap();
    fs.rename(a, "f", a, "h").unwrap();
    fs.shutdown().unwrap();
    let r = crate::fsck(Design::Nofs, dev.as_ref()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let fs = reopen(Design::Nofs, &dev);
    assert_eq!(fs.resolve("a/h").unwrap(), f);
    assert_eq!(fs.resolve("a/g").unwrap(), f);
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    assert!(fs.detections().is_empty(), "{:?}", fs.detections());
}

/// The journaling designs' crash behaviour: three osync-delimited groups (create and
/// write `a`; then `b`; then `c`) recorded at the request level; crash images keep every
/// logged write but the dropped ones (the disk reordered them past the crash).
mod journal {
    use super::*;
    use crate::device::{RecordingDevice, Request};

    const GROUPS: [(&str, u8); 3] = [("a", 1), ("b", 2), ("c", 3)];

    /// The base image (after mkfs) and the log of the three groups.
    fn record(design: Design) -> (Vec<u8>, Vec<Request>) {
        // No notifications: nothing is checkpointed, every group lives in the journal.
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        let base = mem.snapshot();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        for (name, seed) in GROUPS {
            let f = fs.create(ROOT, name).unwrap();
            fs.write(f, 0, &pattern(6000, seed)).unwrap();
            fs.osync().unwrap();
        }
        fs.crash();
        (base, rec.log())
    }

    /// The image holding `base` plus every logged write whose index `keep` accepts.
    fn image(base: &[u8], log: &[Request], keep: impl Fn(usize) -> bool) -> Arc<MemDevice> {
        let dev = Arc::new(MemDevice::from_bytes(base.to_vec()));
        for (i, r) in log.iter().enumerate() {
            if let (true, Request::Write { offset, info, data }) = (keep(i), r) {
                dev.write_at(*offset, data, *info).unwrap();
            }
        }
        dev
    }

    /// After recovery: how many groups the file system holds as a prefix (`Some(k)`:
    /// exactly the first k files with their contents), or `None` if it holds anything
    /// else (a later group without an earlier one, wrong content, fsck damage).
    fn prefix(design: Design, dev: &Arc<MemDevice>) -> Option<usize> {
        let fs = Fs::open(design, dev.clone(), Options::default()).ok()?;
        let mut names: Vec<Vec<u8>> = fs.readdir(ROOT).ok()?.into_iter().map(|e| e.0).collect();
        names.sort();
        let k = names.len();
        for (i, (name, seed)) in GROUPS.iter().enumerate() {
            if i < k {
                if names[i] != name.as_bytes() {
                    return None;
                }
                let f = fs.resolve(name).ok()?;
                if fs.read(f, 0, 10_000).ok()? != pattern(6000, *seed) {
                    return None;
                }
            }
        }
        fs.shutdown().ok()?;
        crate::fsck(design, dev.as_ref()).ok()?.problems.is_empty().then_some(k)
    }

    /// Indices of the log's writes, with their block number and whether the write is a
    /// commit block, per transaction (split after each commit block).
    fn transactions(log: &[Request]) -> Vec<Vec<(usize, u64, Role, bool)>> {
        let mut txs = vec![Vec::new()];
        for (i, r) in log.iter().enumerate() {
            if let Request::Write { offset, info, data } = r {
                let commit = info.role == Role::Journal && data.starts_with(b"RFSJCMIT");
                txs.last_mut().unwrap().push((i, offset / BLOCK as u64, info.role, commit));
                if commit {
                    txs.push(Vec::new());
                }
            }
        }
        txs.retain(|t| !t.is_empty());
        txs
    }

    /// A data block tagged in an earlier transaction, freed in a later one and reused
    /// since holds its new owner's data: its tag no longer describes it. OptFS' recovery
    /// took that mismatch for a transaction whose data never reached the disk and
    /// replayed nothing from it on, dropping every durable transaction after it: bob
    /// explore found a durable link lost that way (its directory block checkpointed, its
    /// inode not: link count 1, two names).
    #[test]
    fn optfs_recovery_does_not_count_tags_of_blocks_freed_since() {
        let design = Design::Optfs;
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        let base = mem.snapshot();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, &pattern(16384, 1)).unwrap();
        fs.dsync().unwrap();
        let freed: BTreeSet<u64> = fs.blocks_of(f).unwrap().into_iter().map(|b| b.1).collect();
        fs.truncate(f, 0).unwrap();
        fs.dsync().unwrap();
        let g = fs.create(ROOT, "g").unwrap();
        fs.link(g, ROOT, "h").unwrap();
        fs.dsync().unwrap();
        let d = fs.create(ROOT, "d").unwrap();
        fs.write(d, 0, &pattern(16384, 2)).unwrap();
        let reused: BTreeSet<u64> = fs.blocks_of(d).unwrap().into_iter().map(|b| b.1).collect();
        assert!(!freed.is_disjoint(&reused), "d reuses none of f's blocks: {freed:?} {reused:?}");
        fs.osync().unwrap();
        fs.crash();
        let log = rec.log();
        let txs = transactions(&log);
        assert_eq!(txs.len(), 4, "{txs:?}");
        // The disk kept everything but the last transaction's commit block and the
        // checkpoint of the link's inode (the first inode-table write after its commit).
        let link_commit = txs[2].last().unwrap().0;
        let last_commit = txs[3].last().unwrap().0;
        let lost_inode = log
            .iter()
            .enumerate()
            .skip(link_commit + 1)
            .find(|(_, r)| matches!(r, Request::Write { info, .. } if info.role == Role::Inode))
            .map(|(i, _)| i)
            .unwrap();
        let dev = image(&base, &log, |i| i != last_commit && i != lost_inode);
        let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
        assert_eq!(fs.getattr(fs.resolve("/g").unwrap()).unwrap().nlink, 2);
        assert_eq!(fs.resolve("/h").unwrap(), fs.resolve("/g").unwrap());
        fs.shutdown().unwrap();
        let report = crate::fsck(design, dev.as_ref()).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }

    #[test]
    fn every_prefix_of_the_log_recovers_to_a_prefix_of_the_groups() {
        for design in [Design::JournalFlush, Design::Optfs, Design::OptfsNocsum] {
            let (base, log) = record(design);
            let commits = transactions(&log).iter().flatten().filter(|w| w.3).count();
            assert_eq!(commits, 3, "{design}: one transaction per osync");
            let mut seen = BTreeSet::new();
            for cut in 0..=log.len() {
                let got = prefix(design, &image(&base, &log, |i| i < cut));
                assert!(got.is_some(), "{design}: the first {cut} requests recover to no prefix");
                seen.insert(got.unwrap());
            }
            assert_eq!(seen, BTreeSet::from([0, 1, 2, 3]), "{design}");
        }
    }

    #[test]
    fn optfs_replays_the_checksummed_prefix_and_nocsum_replays_garbage() {
        for design in [Design::Optfs, Design::OptfsNocsum] {
            let (base, log) = record(design);
            let txs = transactions(&log);
            // Every write of the second transaction but its commit block, lost one at a
            // time while everything after it (the third transaction too) reached the disk.
            let mut verdicts = Vec::new();
            for &(lost, block, role, commit) in &txs[1] {
                if commit {
                    continue;
                }
                let got = prefix(design, &image(&base, &log, |i| i != lost));
                verdicts.push((block, role, got));
            }
            assert!(verdicts.iter().any(|v| v.1 == Role::Data), "{design}: {verdicts:?}");
            assert!(verdicts.iter().any(|v| v.1 == Role::Journal), "{design}: {verdicts:?}");
            if design == Design::Optfs {
                // A checksum fails in transaction 2: recovery keeps transaction 1 only.
                assert!(verdicts.iter().all(|v| v.2 == Some(1)), "{design}: {verdicts:?}");
            } else {
                // Without checksums the commit block is trusted: some lost write leaves a
                // state that is no prefix at all.
                assert!(verdicts.iter().any(|v| v.2.is_none()), "{design}: {verdicts:?}");
            }
        }
    }

    #[test]
    fn journal_flush_surrounds_each_commit_block_with_flushes() {
        let (_, log) = record(Design::JournalFlush);
        for (i, r) in log.iter().enumerate() {
            if let Request::Write { info, data, .. } = r {
                if info.role == Role::Journal && data.starts_with(b"RFSJCMIT") {
                    assert_eq!(log[i - 1], Request::Flush, "a flush before the commit at {i}");
                    assert_eq!(log.get(i + 1), Some(&Request::Flush), "and after it");
                }
            }
        }
        let (_, log) = record(Design::Optfs);
        assert!(!log.contains(&Request::Flush), "osync never flushes");
    }

    #[test]
    fn optfs_checkpoints_and_reuses_freed_blocks_only_after_notification() {
        let mem = Arc::new(MemDevice::with_adn(16 << 20, 1000));
        mkfs(Design::Optfs, mem.as_ref(), mem.size()).unwrap();
        let fs = Fs::open(Design::Optfs, mem.clone(), Options::default()).unwrap();
        let (ib, _) = fs.lock().sb.inode_location(2);
        let mut raw = vec![0u8; BLOCK];
        mem.read_at(ib * BLOCK as u64, &mut raw).unwrap();
        let before = raw.clone();
        let f = fs.create(ROOT, "f").unwrap();
        assert_eq!(f, 2);
        fs.write(f, 0, &pattern(BLOCK, 1)).unwrap();
        let first = fs.blocks_of(f).unwrap()[0].1;
        fs.osync().unwrap();
        // Freed in transaction 2, not yet durable: a new file must not get the block.
        fs.truncate(f, 0).unwrap();
        fs.osync().unwrap();
        let g = fs.create(ROOT, "g").unwrap();
        fs.write(g, 0, &pattern(BLOCK, 2)).unwrap();
        assert_ne!(fs.blocks_of(g).unwrap()[0].1, first, "reused before notification");
        assert!(fs.lock().jnl.as_ref().unwrap().borrow().reuse_blocked(first));
        // The inode table's in-place block is as mkfs left it: no checkpoint yet.
        mem.read_at(ib * BLOCK as u64, &mut raw).unwrap();
        assert_eq!(raw, before, "checkpointed before notification");
        // dsync flushes: everything is durable, checkpointed, and the block reusable.
        fs.dsync().unwrap();
        mem.read_at(ib * BLOCK as u64, &mut raw).unwrap();
        assert_ne!(raw, before, "not checkpointed after dsync");
        let blocked = |fs: &Fs| fs.lock().jnl.as_ref().unwrap().borrow().reuse_blocked(first);
        assert!(!blocked(&fs), "durably free after dsync");
        assert!(fs.journal_stats().unwrap().commits >= 3);
        fs.shutdown().unwrap();
    }

    #[test]
    fn osync_is_not_supported_without_a_journal() {
        let (_, fs) = fresh(Design::Orderless, 8);
        assert!(matches!(fs.osync(), Err(Error::NotSupported)));
        assert!(fs.journal_stats().is_none());
    }
}

mod soft {
    use super::*;
    use crate::device::{RecordingDevice, Request};
    use crate::layout::Kind;

    /// A soft-updates file system on a recording device over memory.
    fn recorded(design: Design) -> (Arc<MemDevice>, Arc<RecordingDevice>, Arc<Fs>) {
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        (mem, rec, fs)
    }

    fn writes_to(log: &[Request], block: u64) -> Vec<&Vec<u8>> {
        log.iter()
            .filter_map(|r| match r {
                Request::Write { offset, data, .. } if *offset == block * BLOCK as u64 => {
                    Some(data)
                }
                _ => None,
            })
            .collect()
    }

    fn inode_in(blk: &[u8], sb: &Superblock, ino: u32) -> Inode {
        let off = sb.inode_location(ino).1;
        Inode::decode(&blk[off..off + INODE_SIZE])
    }

    /// The paper's cycle (§4): a create and a delete whose names share a directory block
    /// and whose inodes share an inode-table block. The inode block must go out with the
    /// new inode but the deleted one still live (its clearing rolled back: the name is
    /// still on the disk), then the directory block, then the inode block again.
    #[test]
    fn the_papers_cycle_is_broken_by_rolling_back_the_delete() {
        let (mem, rec, fs) = recorded(Design::Softupdates);
        let b = fs.create(ROOT, "b").unwrap();
        fs.writeback().unwrap();
        let sb = fs.lock().sb.clone();
        let start = rec.position();
        let a = fs.create(ROOT, "a").unwrap();
        assert_ne!(a, b, "b's inode is not free before its name is durably gone");
        fs.unlink(ROOT, "b").unwrap();
        // Nothing reached the disk yet: soft updates write back.
        assert_eq!(rec.position(), start);
        fs.writeback().unwrap();
        let log = rec.log()[start..].to_vec();
        let iblock = sb.inode_location(a).0;
        assert_eq!(iblock, sb.inode_location(b).0, "one inode-table block holds both");
        let inode_writes = writes_to(&log, iblock);
        assert!(inode_writes.len() >= 2, "{} inode-block writes", inode_writes.len());
        let first = inode_writes[0];
        assert_eq!(inode_in(first, &sb, a).kind, Kind::File, "a initialised first");
        assert_eq!(inode_in(first, &sb, b).kind, Kind::File, "b's clearing rolled back");
        let last = inode_writes.last().unwrap();
        assert_eq!(inode_in(last, &sb, b).kind, Kind::Free, "and redone later");
        // The directory block goes out between them, after a flush.
        let pos = |pred: &dyn Fn(&Request) -> bool| log.iter().position(pred).unwrap();
        let first_inode = pos(
            &|r| matches!(r, Request::Write { offset, .. } if *offset == iblock * BLOCK as u64),
        );
        let dir_block = u64::from(fs.lock().get_inode(ROOT).unwrap().direct[0]);
        let dir_write = pos(
            &|r| matches!(r, Request::Write { offset, .. } if *offset == dir_block * BLOCK as u64),
        );
        assert!(first_inode < dir_write);
        assert!(log[first_inode..dir_write].contains(&Request::Flush), "a flush orders them");
        let stats = fs.soft_stats().unwrap();
        assert!(stats.rollbacks >= 1, "{stats:?}");
        assert!(stats.flushes >= 3, "{stats:?}");
        fs.shutdown().unwrap();
        let r = crate::fsck(Design::Softupdates, mem.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    /// Every dependency rule in one mixed workload: mkdir, create + write past the
    /// direct blocks (indirect block), link, a rename across directories, a rename over
    /// an existing file, unlink, truncate.
    fn workload(fs: &Fs) {
        let d = fs.mkdir(ROOT, "d").unwrap();
        let e = fs.mkdir(ROOT, "e").unwrap();
        let f = fs.create(d, "f").unwrap();
        fs.write(f, 0, &pattern((NDIRECT + 2) * BLOCK, 7)).unwrap();
        let g = fs.create(d, "g").unwrap();
        fs.write(g, 0, &pattern(100, 1)).unwrap();
        fs.writeback().unwrap();
        let h = fs.create(e, "h").unwrap();
        fs.write(h, 0, &pattern(5000, 2)).unwrap();
        fs.link(g, e, "g2").unwrap();
        fs.rename(d, "f", e, "f2").unwrap();
        fs.rename(e, "h", d, "g").unwrap();
        fs.truncate(f, 10).unwrap();
        fs.unlink(e, "g2").unwrap();
        fs.create(d, "n").unwrap();
    }

    /// The crash images of one recording: every write before a flush kept, plus each
    /// subset of the following epoch that drops exactly one of its writes (and the whole
    /// epoch). Returns the fsck problem kinds of each image after recovery.
    fn crash_kinds(design: Design) -> Vec<Vec<Option<ErrorKind>>> {
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        let base_pos = rec.position();
        let base = mem.snapshot();
        workload(&fs);
        fs.writeback().unwrap();
        fs.crash();
        let log = rec.log()[base_pos..].to_vec();
        let flushes: Vec<usize> = std::iter::once(0)
            .chain(log.iter().enumerate().filter(|(_, r)| **r == Request::Flush).map(|(i, _)| i))
            .chain(std::iter::once(log.len()))
            .collect();
        let mut out = Vec::new();
        for w in flushes.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let epoch: Vec<usize> =
                (lo..hi).filter(|&i| matches!(log[i], Request::Write { .. })).collect();
            let mut drops: Vec<Option<usize>> = vec![None];
            drops.extend(epoch.iter().map(|&i| Some(i)));
            for drop in drops {
                let dev = Arc::new(MemDevice::from_bytes(base.clone()));
                for (i, r) in log[..hi].iter().enumerate() {
                    if let Request::Write { offset, info, data } = r {
                        if Some(i) != drop {
                            dev.write_at(*offset, data, *info).unwrap();
                        }
                    }
                }
                let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
                fs.crash();
                let r = crate::fsck(design, dev.as_ref()).unwrap();
                out.push(r.problems.iter().map(|p| p.kind).collect());
            }
        }
        out
    }

    #[test]
    fn flush_ordered_write_back_leaves_only_leaks_in_every_crash_image() {
        let kinds = crash_kinds(Design::Softupdates);
        assert!(kinds.len() > 10, "{} images", kinds.len());
        for (i, k) in kinds.iter().enumerate() {
            assert!(
                k.iter().all(|k| matches!(k, Some(ErrorKind::Oi | ErrorKind::Ob))),
                "image {i}: {k:?}"
            );
        }
        assert!(kinds.iter().any(|k| !k.is_empty()), "some image leaks (frees in flight)");
    }

    #[test]
    fn completion_ordered_write_back_breaks_on_a_volatile_cache() {
        let kinds = crash_kinds(Design::SoftupdatesCompletion);
        let bad = kinds
            .iter()
            .filter(|k| k.iter().any(|k| !matches!(k, Some(ErrorKind::Oi | ErrorKind::Ob))))
            .count();
        assert!(bad > 0, "no image beyond leaks among {}", kinds.len());
    }

    /// Completion mode issues no flush while writing back; fsync flushes once after.
    #[test]
    fn completion_mode_writes_back_without_flushes() {
        let (_mem, rec, fs) = recorded(Design::SoftupdatesCompletion);
        let start = rec.position();
        workload(&fs);
        fs.writeback().unwrap();
        let log = rec.log()[start..].to_vec();
        assert!(!log.contains(&Request::Flush), "no flush in completion-ordered write-back");
        assert!(log.iter().any(|r| matches!(r, Request::Write { .. })));
        fs.fsync(ROOT).unwrap();
        assert_eq!(rec.log().last(), Some(&Request::Flush));
    }

    /// A link count raised before a name that never reached the disk is lowered at
    /// mount; a freed block is reused only after its pointer is durably gone.
    #[test]
    fn mount_lowers_link_counts_too_high_and_frees_wait_for_write_back() {
        let (mem, rec, fs) = recorded(Design::Softupdates);
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, &pattern(BLOCK, 3)).unwrap();
        fs.writeback().unwrap();
        let base = mem.snapshot();
        let start = rec.position();
        fs.link(f, ROOT, "l").unwrap();
        fs.writeback().unwrap();
        let log = rec.log()[start..].to_vec();
        // The first epoch of the link's write-back: the raised count, not the name.
        let first_flush = log.iter().position(|r| *r == Request::Flush).unwrap();
        let dev = Arc::new(MemDevice::from_bytes(base));
        for r in &log[..first_flush] {
            if let Request::Write { offset, info, data } = r {
                dev.write_at(*offset, data, *info).unwrap();
            }
        }
        let before = crate::fsck(Design::Softupdates, dev.as_ref()).unwrap();
        assert!(before.kinds().contains(&ErrorKind::Hl), "{:?}", before.problems);
        let again = Fs::open(Design::Softupdates, dev.clone(), Options::default()).unwrap();
        assert_eq!(again.getattr(again.resolve("f").unwrap()).unwrap().nlink, 1);
        again.shutdown().unwrap();
        assert!(crate::fsck(Design::Softupdates, dev.as_ref()).unwrap().problems.is_empty());

        // Frees wait: the block of an unlinked file stays allocated until write-back.
        let blk = fs.lock().get_inode(f).unwrap().direct[0];
        fs.unlink(ROOT, "l").unwrap();
        fs.unlink(ROOT, "f").unwrap();
        let g = fs.create(ROOT, "g").unwrap();
        fs.write(g, 0, &pattern(BLOCK, 4)).unwrap();
        assert_ne!(fs.lock().get_inode(g).unwrap().direct[0], blk, "reused before durable");
        fs.writeback().unwrap();
        assert!(fs.soft_stats().unwrap().frees_released >= 2);
    }
}

mod soft_rename {
    use super::*;
    use crate::device::{RecordingDevice, Request};
    use crate::layout::parse_dir_block;

    /// A rename inside one directory block, here over an existing file, is one block
    /// write: every image of the directory the disk ever receives holds either both old
    /// names (each its own inode) or the new name alone, naming the renamed file.
    #[test]
    fn a_rename_within_one_directory_block_is_one_write() {
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(Design::Softupdates, mem.as_ref(), mem.size()).unwrap();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(Design::Softupdates, rec.clone(), Options::default()).unwrap();
        let a = fs.create(ROOT, "a").unwrap();
        let b = fs.create(ROOT, "b").unwrap();
        fs.writeback().unwrap();
        let start = rec.position();
        fs.rename(ROOT, "a", ROOT, "b").unwrap();
        fs.writeback().unwrap();
        let dir_block = u64::from(fs.lock().get_inode(ROOT).unwrap().direct[0]);
        let images: Vec<Vec<(Vec<u8>, u32)>> = rec.log()[start..]
            .iter()
            .filter_map(|r| match r {
                Request::Write { offset, data, .. } if *offset == dir_block * BLOCK as u64 => {
                    Some(parse_dir_block(data).unwrap())
                }
                _ => None,
            })
            .map(|es| {
                es.into_iter()
                    .filter(|e| e.name != b"." && e.name != b"..")
                    .map(|e| (e.name, e.ino))
                    .collect()
            })
            .collect();
        assert_eq!(images.len(), 1, "{images:?}");
        assert_eq!(images[0], vec![(b"b".to_vec(), a)], "b names a's inode, a is gone");
        // b's old inode is freed after its name is gone, and the image fscks clean.
        assert_eq!(fs.getattr(a).unwrap().nlink, 1);
        assert_eq!(fs.resolve("b").unwrap(), a);
        let _ = b;
        fs.shutdown().unwrap();
        let r = crate::fsck(Design::Softupdates, mem.as_ref()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

/// journal-async, journal-sync and the xsyncfs family (issues 14 and 15).
mod sync_variants {
    use super::*;
    use crate::design::JOURNAL_ASYNC_COMMIT_OPS;
    use crate::device::{RecordingDevice, Request};

    /// A fresh `design` on a logged in-memory disk: the file system and the log.
    fn logged(design: Design) -> (Arc<RecordingDevice>, Arc<Fs>) {
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        BASE.with(|b| *b.borrow_mut() = mem.snapshot());
        let dev = Arc::new(RecordingDevice::new(mem));
        let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
        (dev, fs)
    }

    fn flushes(log: &[Request]) -> usize {
        log.iter().filter(|r| **r == Request::Flush).count()
    }

    fn commits(fs: &Fs) -> u64 {
        fs.journal_stats().unwrap().commits
    }

    #[test]
    fn journal_sync_commits_and_flushes_every_metadata_op_before_it_returns() {
        let (dev, fs) = logged(Design::JournalSync);
        let d = fs.mkdir(ROOT, "d").unwrap();
        let ops: Vec<Box<dyn Fn()>> = vec![
            Box::new(|| {
                fs.create(d, "a").unwrap();
            }),
            Box::new(|| fs.link(fs.resolve("d/a").unwrap(), ROOT, "b").unwrap()),
            Box::new(|| fs.rename(d, "a", ROOT, "c").unwrap()),
            Box::new(|| fs.unlink(ROOT, "b").unwrap()),
            Box::new(|| {
                fs.write(fs.resolve("c").unwrap(), 0, &pattern(BLOCK, 3)).unwrap();
            }),
        ];
        for (i, op) in ops.iter().enumerate() {
            let (c0, at) = (commits(&fs), dev.position());
            op();
            assert_eq!(commits(&fs), c0 + 1, "op {i} committed");
            // The op's last flush comes after its commit block: durable on return.
            let log = &dev.log()[at..];
            let commit = log.iter().rposition(
                |r| matches!(r, Request::Write { data, .. } if data.starts_with(b"RFSJCMIT")),
            );
            let flush = log.iter().rposition(|r| *r == Request::Flush);
            assert!(commit.is_some() && flush > commit, "op {i}: {commit:?} {flush:?}");
        }
        // After a crash right now (every flushed write on the disk) all of it is there.
        fs.crash();
        let mem = MemDevice::from_bytes(image_of(&dev));
        let fs = Fs::open(Design::JournalSync, Arc::new(mem), Options::default()).unwrap();
        assert!(fs.resolve("c").is_ok() && fs.resolve("b").is_err() && fs.resolve("d/a").is_err());
        assert_eq!(fs.read(fs.resolve("c").unwrap(), 0, BLOCK).unwrap(), pattern(BLOCK, 3));
    }

    thread_local! {
        /// The image mkfs made, under the log of [`logged`].
        static BASE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// The disk as the flushed writes left it: mkfs' image and every logged write up to
    /// the last flush.
    fn image_of(dev: &RecordingDevice) -> Vec<u8> {
        let log = dev.log();
        let last = log.iter().rposition(|r| *r == Request::Flush).unwrap_or(0);
        let mut img = BASE.with(|b| b.borrow().clone());
        for r in &log[..last] {
            if let Request::Write { offset, data, .. } = r {
                img[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
            }
        }
        img
    }

    #[test]
    fn journal_async_commits_on_its_timer_and_fsync_still_flushes() {
        let (dev, fs) = logged(Design::JournalAsync);
        let start = flushes(&dev.log());
        for i in 0..JOURNAL_ASYNC_COMMIT_OPS - 1 {
            fs.create(ROOT, format!("f{i}")).unwrap();
        }
        assert_eq!(commits(&fs), 0, "no commit before the timer");
        assert_eq!(flushes(&dev.log()), start, "no flush before the timer");
        fs.create(ROOT, "last").unwrap();
        assert_eq!(commits(&fs), 1, "the timer commits");
        fs.create(ROOT, "after").unwrap();
        let before = flushes(&dev.log());
        fs.fsync(ROOT).unwrap();
        assert_eq!(commits(&fs), 2, "fsync commits");
        assert!(flushes(&dev.log()) > before, "fsync flushes");
    }

    /// Positions in the log of the released outputs and of the last flush before each.
    fn outputs(log: &[Request]) -> Vec<(String, Option<usize>, usize)> {
        log.iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Request::Output { text } => {
                    Some((text.clone(), log[..i].iter().rposition(|r| *r == Request::Flush), i))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn xsyncfs_holds_output_until_every_earlier_write_is_durable() {
        let (dev, fs) = logged(Design::Xsyncfs);
        let f = fs.create(ROOT, "f").unwrap();
        fs.write(f, 0, &pattern(BLOCK, 1)).unwrap();
        let before = flushes(&dev.log());
        fs.fsync(f).unwrap();
        assert_eq!(flushes(&dev.log()), before, "fsync returns at once, no flush");
        assert_eq!(commits(&fs), 0, "nor a commit");
        fs.output("one").unwrap();
        fs.output("two").unwrap();
        assert_eq!(fs.held_output(), ["one", "two"], "held: the writes are not durable");
        assert!(outputs(&dev.log()).is_empty());
        // The next request runs the output-triggered commit, then releases both in order.
        let g = fs.create(ROOT, "g").unwrap();
        assert!(fs.held_output().is_empty());
        let out = outputs(&dev.log());
        assert_eq!(out.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(), ["one", "two"]);
        let log = dev.log();
        let commit = log
            .iter()
            .rposition(
                |r| matches!(r, Request::Write { data, .. } if data.starts_with(b"RFSJCMIT")),
            )
            .unwrap();
        for (text, flush, at) in &out {
            assert!(flush.is_some_and(|f| f > commit), "{text} released before the flush");
            assert!(*at > commit);
        }
        // The create after the output is not covered: the next output waits for it.
        fs.output("three").unwrap();
        assert_eq!(fs.held_output(), ["three"]);
        let _ = g;
        fs.shutdown().unwrap();
        assert_eq!(outputs(&dev.log()).len(), 3, "unmount commits and releases");
        // With nothing pending, output leaves at once.
        let (dev, fs) = logged(Design::Xsyncfs);
        fs.output("idle").unwrap();
        assert_eq!(outputs(&dev.log()).len(), 1);
        fs.crash();
    }

    #[test]
    fn xsyncfs_eager_and_async_release_output_before_the_commit() {
        for design in [Design::XsyncfsEager, Design::XsyncfsAsync] {
            let (dev, fs) = logged(design);
            let f = fs.create(ROOT, "f").unwrap();
            fs.write(f, 0, &pattern(BLOCK, 1)).unwrap();
            fs.output("now").unwrap();
            assert!(fs.held_output().is_empty(), "{design}");
            let out = outputs(&dev.log());
            assert_eq!(out.len(), 1, "{design}: released at once");
            assert_eq!(commits(&fs), 0, "{design}: before any commit");
            fs.create(ROOT, "g").unwrap();
            // Eager still triggers the commit; async waits for its timer.
            let want = u64::from(design == Design::XsyncfsEager);
            assert_eq!(commits(&fs), want, "{design}");
            fs.crash();
        }
        let (_, fs) = fresh(Design::JournalFlush, 16);
        assert!(matches!(fs.output("x"), Err(Error::NotSupported)));
    }
}

/// The flush-ordered core (ordered-core, and Valor on top of it) keeps FFS' rule: a
/// crash leaves no more names of a file than its link count, and mount after an unclean
/// shutdown lowers a count left too high. bob explore found both broken (fsck's HL: a
/// rename left two names with a count of 1, a link a count of 2 with one name). Every
/// prefix of the requests of a rename across directories, one within a directory, over
/// an existing file, and a link recovers with an fsck that finds nothing.
#[test]
fn the_ordered_core_never_leaves_more_names_than_links() {
    use crate::device::{RecordingDevice, Request};
    for design in [Design::Ordered, Design::Valor] {
        let mem = Arc::new(MemDevice::new(16 << 20));
        mkfs(design, mem.as_ref(), mem.size()).unwrap();
        let setup = Fs::open(design, mem.clone(), Options::default()).unwrap();
        let a = setup.mkdir(ROOT, "A").unwrap();
        for name in ["f", "g", "h", "t"] {
            let f = setup.create(ROOT, name).unwrap();
            setup.write(f, 0, &pattern(4096, 1)).unwrap();
        }
        setup.crash();
        let base = mem.snapshot();
        let rec = Arc::new(RecordingDevice::new(mem.clone()));
        let fs = Fs::open(design, rec.clone(), Options::default()).unwrap();
        fs.rename(ROOT, "f", a, "f2").unwrap();
        fs.rename(ROOT, "g", ROOT, "g2").unwrap();
        fs.rename(ROOT, "h", ROOT, "t").unwrap();
        let t = fs.resolve("t").unwrap();
        fs.link(t, a, "l").unwrap();
        fs.crash();
        let log = rec.log();
        for cut in 0..=log.len() {
            let dev = Arc::new(MemDevice::from_bytes(base.clone()));
            for r in &log[..cut] {
                if let Request::Write { offset, info, data } = r {
                    dev.write_at(*offset, data, *info).unwrap();
                }
            }
            let fs = Fs::open(design, dev.clone(), Options::default()).unwrap();
            fs.shutdown().unwrap();
            let r = crate::fsck(design, dev.as_ref()).unwrap();
            assert!(r.damage().is_empty(), "{design}, first {cut} requests: {:?}", r.problems);
        }
    }
}
