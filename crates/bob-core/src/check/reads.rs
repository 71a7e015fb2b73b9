//! Reuse by reads: a crash state whose bytes equal an earlier checked state's on every
//! sector that state's check read gets that state's recovery, walk and fsck, without a
//! mount of its own; its verdict is still judged afresh against its own promises.
//!
//! Why this is exact: recovery (the kernel's mount, fsck-before-mount, a repair ladder),
//! the walk of the recovered tree and the read-only fsck are deterministic programs of
//! the bytes they read, and everything else they depend on (the configuration, the
//! workload, mount options) is the same for every state of one run. Every byte of a
//! state's own content that they saw reached them through the view's server
//! ([`crate::image::CrashView`] logs each sector read before the check itself wrote
//! it): a view's file has an inode of its own, so its page cache starts empty, and a
//! loop device's cache dies with its binding. So a state that agrees with a donor on
//! the donor's reads would have been asked the same questions and given the same
//! answers, down to the last read: same recovery writes, same tree, same fsck result.
//! Readahead makes the logged set larger than what was used, which costs hits, never
//! exactness. Timeouts and bob's own failures are not deterministic and never donate.
//!
//! States of one crash epoch share every earlier epoch, so only the sectors the crash
//! epoch writes can differ between them: a donor keeps its reads among those, with
//! where each came from. States with identical bytes (the same disk before and after a
//! flush, which owes different promises) match whatever they read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use workloads::Snapshot;

use super::file_data::SharedFileData;
use super::verdict::oracle_verdict;
use super::{Outcome, Repair, StateCheck, Subject};
use crate::crash::overlay::Sum;
use crate::crash::{Epoch, Overlay, SectorSource};
use crate::image::SectorSet;
use crate::trace::{Trace, SECTOR_SIZE};

/// A set of sectors as sorted runs `[start, end)`: what a recovered image keeps of the
/// reads behind it, a few runs where readahead read thousands of sectors in a row.
#[derive(Debug, Default)]
pub(crate) struct SectorRuns(Vec<(u64, u64)>);

impl SectorRuns {
    /// The runs of `sectors`.
    pub(crate) fn of(sectors: &SectorSet) -> SectorRuns {
        SectorRuns(sectors.iter().map(|r| (r.start, r.end)).collect())
    }

    /// Adds every sector of the runs to `set`.
    pub(crate) fn add_to(&self, set: &mut SectorSet) {
        for &(start, end) in &self.0 {
            set.insert(start..end);
        }
    }
}

/// What a donor's check found that a state which agrees with it on its reads shares.
#[derive(Debug)]
pub(crate) enum Reusable {
    /// The state mounted (perhaps after repair) and was walked and fsck'd: the verdict
    /// is judged again against the receiving state's own promises.
    Walked {
        snapshot: Snapshot,
        fsck: Option<String>,
        repair: Option<Repair>,
        recovery_writes: usize,
        /// The file data only the walk read, where a later state may differ.
        file_data: Option<SharedFileData>,
    },
    /// The check ended before a verdict: the state did not mount, or its walk failed.
    Ended(Box<StateCheck>),
}

/// One checked state that later states may reuse.
#[derive(Debug)]
struct Donor {
    /// The crash epoch's sectors the check read, each with the donor's source for it
    /// in the crash epoch (`None`: an earlier epoch's or the base image's content).
    reads: Vec<(u64, Option<SectorSource>)>,
    result: Arc<Reusable>,
    /// Where in `reads` the last state that did not match this donor differed: the
    /// states of an epoch come in runs that differ from a donor in the same place, so
    /// looking there first rejects most of them at one sector instead of thousands.
    differed_at: AtomicUsize,
}

impl Donor {
    /// Whether `overlay` holds the donor's bytes on every sector it read, but for file
    /// data only its walk read ([`super::file_data`]): then the sectors of that data
    /// where the two differ (none for a state that agrees everywhere).
    fn matches(&self, overlay: &Overlay, trace: &Trace) -> Option<Vec<u64>> {
        let same = |&(s, theirs): &(u64, Option<SectorSource>)| {
            SectorSource::same_content(theirs, overlay.crash_epoch_source(s), trace)
        };
        let data = match &*self.result {
            Reusable::Walked { file_data, .. } => file_data.as_deref(),
            Reusable::Ended(_) => None,
        };
        let may_differ = |s: u64| data.is_some_and(|d| d.covers(s));
        let hint = self.differed_at.load(Ordering::Relaxed);
        if self.reads.get(hint).is_some_and(|r| !same(r) && !may_differ(r.0)) {
            return None;
        }
        let mut differing = Vec::new();
        for (at, r) in self.reads.iter().enumerate() {
            if same(r) {
                continue;
            }
            if !may_differ(r.0) {
                self.differed_at.store(at, Ordering::Relaxed);
                return None;
            }
            differing.push(r.0);
        }
        Some(differing)
    }
}

/// Donors kept at most in one run, so memory stays bounded on the largest cells; past
/// that, states are checked but not remembered.
const DONORS_KEPT: usize = 4096;

/// The run's donors, by crash epoch and by content digest.
#[derive(Debug, Default)]
pub(crate) struct ReadsMemo {
    // Read-locked by every state's lookup, write-locked only to add a donor.
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_epoch: HashMap<u32, Vec<Donor>>,
    by_digest: HashMap<[u8; 32], Arc<Reusable>>,
    /// Sector ranges each crash epoch writes, computed once per epoch.
    written: HashMap<u32, Arc<Vec<(u64, u64)>>>,
    kept: usize,
}

/// The sector ranges `[start, end)` the writes of `epoch` touch.
fn written_by(trace: &Trace, epoch: &Epoch) -> Vec<(u64, u64)> {
    epoch
        .writes
        .iter()
        .filter_map(|&i| trace.entries.get(i))
        .map(|e| (e.sector, e.sector.saturating_add(e.nr_sectors)))
        .collect()
}

impl ReadsMemo {
    /// The result of an earlier state that `overlay` (a state of crash epoch `epoch`
    /// with content digest `digest`) agrees with on every sector its check read, but
    /// for file data only that state's walk read; and the sectors of that data where the
    /// two differ ([`Reusable::check_for`] reads them from the state's own bytes).
    pub(crate) fn find(
        &self,
        epoch: u32,
        digest: &[u8; 32],
        overlay: &Overlay,
        trace: &Trace,
    ) -> Option<(Arc<Reusable>, Vec<u64>)> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = inner.by_digest.get(digest) {
            return Some((hit.clone(), Vec::new()));
        }
        let donors = inner.by_epoch.get(&epoch)?;
        donors.iter().find_map(|d| Some((d.result.clone(), d.matches(overlay, trace)?)))
    }

    /// Offers a finished check to later states: `state` is its crash epoch, digest and
    /// overlay, `reads` the sectors its view logged. A check whose snapshot or fsck came
    /// from an earlier state that recovered to the same image counts that state's reads
    /// too, and donates only when they are known.
    pub(crate) fn donate(
        &self,
        subject: &Subject,
        state: (u32, [u8; 32], &Overlay),
        mut reads: SectorSet,
        check: &StateCheck,
    ) {
        if check.snapshot_reused || check.fsck_reused {
            let Some(behind) = &check.reads_behind else { return };
            behind.add_to(&mut reads);
        }
        if let Some(result) = Reusable::of(check) {
            self.add(&subject.epochs, &subject.trace, state, &reads, result);
        }
    }

    /// Remembers a checked state: `reads` are the sectors its check (and, for a result
    /// taken from an earlier state that recovered to the same image, that state's
    /// check) read before writing them.
    fn add(
        &self,
        epochs: &[Epoch],
        trace: &Trace,
        state: (u32, [u8; 32], &Overlay),
        reads: &SectorSet,
        result: Reusable,
    ) {
        let (epoch, digest, overlay) = state;
        let Some(e) = epochs.get(epoch as usize) else { return };
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if inner.kept >= DONORS_KEPT {
            return;
        }
        inner.kept += 1;
        let written =
            inner.written.entry(epoch).or_insert_with(|| Arc::new(written_by(trace, e))).clone();
        let mut read: Vec<u64> = written
            .iter()
            .flat_map(|&(start, end)| {
                reads.overlapping(start..end).flat_map(move |r| r.start.max(start)..r.end.min(end))
            })
            .collect();
        read.sort_unstable();
        read.dedup();
        // Of the file data only the walk read, what the crash epoch wrote: the rest is
        // the same in every state of the epoch, and a donor of a multi-block cell would
        // otherwise keep thousands of sectors no state can differ in.
        let mut result = result;
        if let Reusable::Walked { file_data, .. } = &mut result {
            *file_data = file_data
                .as_ref()
                .map(|d| d.only(|s| read.binary_search(&s).is_ok()))
                .filter(|d| !d.is_empty())
                .map(Arc::new);
        }
        let reads = read.into_iter().map(|s| (s, overlay.crash_epoch_source(s))).collect();
        let result = Arc::new(result);
        inner.by_digest.entry(digest).or_insert_with(|| result.clone());
        let differed_at = AtomicUsize::new(0);
        let donor = Donor { reads, result, differed_at };
        inner.by_epoch.entry(epoch).or_default().push(donor);
    }
}

impl Reusable {
    /// What a finished check of a state can give later states, if anything: not a
    /// timeout, not bob's own failure, not a check that reused a result itself without
    /// the reads behind it.
    pub(crate) fn of(check: &StateCheck) -> Option<Reusable> {
        if let Some(snapshot) = &check.snapshot {
            return Some(Reusable::Walked {
                snapshot: snapshot.clone(),
                fsck: check.fsck.clone(),
                repair: check.repair.clone(),
                recovery_writes: check.recovery_writes,
                file_data: check.file_data.clone(),
            });
        }
        match check.outcome {
            Outcome::Unrecoverable { .. } | Outcome::ReadError { .. } => {
                Some(Reusable::Ended(Box::new(StateCheck { steps: None, ..check.clone() })))
            }
            _ => None,
        }
    }

    /// This result for a state (`overlay`) with `durable_ops` due, which differs from the
    /// donor in the file data sectors `differing` only ([`ReadsMemo::find`]): the donor's
    /// snapshot with those sectors classified from the state's own bytes. `None` if one
    /// of them cannot be read (the state is then mounted).
    pub(crate) fn check_for(
        &self,
        subject: &Subject,
        durable_ops: Vec<usize>,
        differing: &[u64],
        overlay: &Overlay,
    ) -> Option<StateCheck> {
        let mut check = match self {
            Reusable::Walked { snapshot, fsck, repair, recovery_writes, file_data } => {
                let snapshot = match (differing.is_empty(), file_data) {
                    (true, _) => snapshot.clone(),
                    (false, Some(data)) => data.patched(snapshot, differing, |s, buf| {
                        let base = |at, part: &mut [u8]| subject.base.read_at(at, part);
                        overlay.read_over(&subject.trace, s * SECTOR_SIZE, buf, base)
                    })?,
                    (false, None) => return None,
                };
                let mut c = oracle_verdict(subject, snapshot, fsck.clone(), durable_ops)
                    .after_repair(repair.clone());
                c.recovery_writes = *recovery_writes;
                c.file_data_patched = !differing.is_empty();
                c
            }
            Reusable::Ended(_) if !differing.is_empty() => return None,
            Reusable::Ended(c) => (**c).clone(),
        };
        check.reads_reused = true;
        check.recovered_image = None;
        check.snapshot_reused = false;
        check.fsck_reused = false;
        check.infra_retries = 0;
        check.steps = None;
        check.file_data = None;
        Some(check)
    }
}

/// Reuse of the read-only fsck by what it read: a mounted state whose image after
/// unmount equals an earlier state's on every sector that state's fsck read (mount
/// stamps masked, as for dedup after recovery) takes that fsck result instead of running
/// fsck. Exact for the reason the module gives, once fsck's reads are all seen: the loop
/// device's cache is dropped before fsck runs and the view is not cached, so every
/// sector fsck reads reaches the view's log. A walk reads file data that fsck never
/// reads, so states whose recovered images differ only in file contents share one fsck
/// run (check mounts are `noatime`, so reading a file does not stamp its inode).
#[derive(Debug)]
pub(crate) struct FsckMemo<R = Option<String>> {
    inner: RwLock<FsckInner<R>>,
    base: BaseHashes,
}

impl<R> Default for FsckMemo<R> {
    fn default() -> Self {
        FsckMemo {
            inner: RwLock::new(FsckInner { sets: Vec::new(), union: Vec::new(), kept: 0 }),
            base: BaseHashes::default(),
        }
    }
}

#[derive(Debug)]
struct FsckInner<R> {
    /// The distinct sets of sectors an fsck read, most recent last.
    sets: Vec<FsckReadSet<R>>,
    /// Every sector of every set, as runs: what a state hashes to look itself up.
    union: Vec<(u64, u64)>,
    kept: usize,
}

/// Hashes of sectors views took from the base image, by sector (a run's base is one).
type BaseHashes = std::sync::Mutex<HashMap<u64, Sum>>;

#[derive(Debug)]
struct FsckReadSet<R> {
    runs: Arc<SectorRuns>,
    /// Fsck results by the digest of the image on `runs`.
    results: HashMap<[u8; 32], R>,
}

/// Distinct read sets kept (fsck reads the same metadata of most states of a run).
const FSCK_READ_SETS: usize = 16;
/// Fsck results kept at most in one run.
const FSCK_RESULTS_KEPT: usize = 8192;

/// An fsck result an earlier state's fsck gave, and the sectors that fsck read.
pub(crate) struct FsckHit<R = Option<String>> {
    pub(crate) fsck: R,
    pub(crate) reads: Arc<SectorRuns>,
}

impl<R: Clone> FsckMemo<R> {
    /// The result of an earlier fsck whose reads `view` (unmounted) agrees with: on the
    /// view's bytes as they are now, or with `own`, on the state's own bytes (what a
    /// program run before anything wrote the view saw).
    pub(crate) fn find(
        &self,
        view: &crate::image::CrashView,
        stamps: &[std::ops::Range<u64>],
        own: bool,
    ) -> std::io::Result<Option<FsckHit<R>>> {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        if inner.sets.is_empty() {
            return Ok(None);
        }
        let hashes = view.sector_hashes(&inner.union, stamps, &self.base, own)?;
        Ok(inner.sets.iter().rev().find_map(|set| {
            let fsck = set.results.get(&set_digest(&set.runs, &hashes)?)?;
            Some(FsckHit { fsck: fsck.clone(), reads: set.runs.clone() })
        }))
    }

    /// Remembers the result of an fsck of `view` that read `read` (`own`: as for
    /// [`FsckMemo::find`]).
    pub(crate) fn add(
        &self,
        view: &crate::image::CrashView,
        stamps: &[std::ops::Range<u64>],
        read: &SectorSet,
        fsck: &R,
        own: bool,
    ) -> std::io::Result<()> {
        let runs = SectorRuns::of(read);
        let hashes = view.sector_hashes(&runs.0, stamps, &self.base, own)?;
        let Some(digest) = set_digest(&runs, &hashes) else { return Ok(()) };
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if inner.kept >= FSCK_RESULTS_KEPT {
            return Ok(());
        }
        inner.kept += 1;
        if let Some(set) = inner.sets.iter_mut().find(|s| s.runs.0 == runs.0) {
            set.results.entry(digest).or_insert_with(|| fsck.clone());
            return Ok(());
        }
        if inner.sets.len() >= FSCK_READ_SETS {
            inner.sets.remove(0);
        }
        let results = HashMap::from([(digest, fsck.clone())]);
        inner.sets.push(FsckReadSet { runs: Arc::new(runs), results });
        let mut every = SectorSet::new();
        inner.sets.iter().for_each(|s| s.runs.add_to(&mut every));
        inner.union = SectorRuns::of(&every).0;
        Ok(())
    }
}

/// What a configuration's routine fsck before mounting (ext2's `e2fsck -y`) gave a
/// state: its answer and every sector it wrote. A state that agrees with it on every
/// sector it read, before anything wrote them, gets the same (`FsckMemo::<Arc<_>>`).
#[derive(Debug)]
pub(crate) struct RoutineFsck {
    pub(crate) output: crate::device::cmd::Output,
    pub(crate) writes: Vec<(u64, Box<[u8; 512]>)>,
}

/// The digest of an image on `runs`, from its sectors' `hashes` (sorted by sector;
/// `None` if one lacks): their sum, the set hash `crash::overlay` uses for states, so
/// that a state compared with sixteen read sets of two thousand sectors adds, not hashes.
fn set_digest(runs: &SectorRuns, hashes: &[(u64, Sum)]) -> Option<[u8; 32]> {
    let mut sum = Sum::default();
    let mut at = 0;
    for &(start, end) in &runs.0 {
        at += hashes[at..].partition_point(|&(s, _)| s < start);
        for s in start..end {
            match hashes.get(at) {
                Some(&(hs, h)) if hs == s => sum.add(h),
                _ => return None,
            }
            at += 1;
        }
    }
    Some(sum.finish(b"bob fsck reads v1\0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::{DiskModel, OverlayBuilder, StateId};
    use crate::trace::Entry;

    /// A donor's result for a state that agrees with it on what it read, and none for a
    /// state that differs on one sector it read; equal bytes from another write agree.
    #[test]
    fn a_state_reuses_a_donor_only_where_they_agree_on_what_it_read() {
        // One epoch of four writes: sectors 0-1, 8-9, 16-17, and 0-1 again with the
        // same bytes.
        let entries = vec![
            Entry::write(0, vec![1u8; 1024]),
            Entry::write(8, vec![2u8; 1024]),
            Entry::write(16, vec![3u8; 1024]),
            Entry::write(0, vec![1u8; 1024]),
        ];
        let trace = Trace::new(512, entries);
        let epochs = crate::crash::epochs(&trace, &DiskModel::STUDY);
        let builder = OverlayBuilder::new(&trace, &epochs);
        let overlay = |writes: &[u32]| builder.state(&StateId::whole(0, writes.iter().copied()));
        let memo = ReadsMemo::default();
        let donor = overlay(&[0]);
        let digest = donor.digest(&trace);
        // The donor's check read sectors 0, 1 and 9 (and 40, which no write touches).
        let reads: SectorSet = [0..2, 9..10, 40..41].into_iter().collect();
        let ended = StateCheck::failed(Outcome::Unrecoverable { message: "no fs".into() });
        let result = Reusable::of(&ended).expect("an unrecoverable state donates");
        memo.add(&epochs, &trace, (0, digest, &donor), &reads, result);

        let find = |o: &Overlay| memo.find(0, &o.digest(&trace), o, &trace).is_some();
        assert!(find(&donor), "the donor itself");
        assert!(!find(&overlay(&[])), "sectors 0-1 unwritten: read, so they differ");
        assert!(!find(&overlay(&[0, 1])), "sector 9 written: read, so it differs");
        assert!(find(&overlay(&[0, 2])), "sectors 16-17 written: never read");
        assert!(find(&overlay(&[3])), "sectors 0-1 from another write, with the same bytes");
        assert!(memo.find(1, &[7; 32], &donor, &trace).is_none(), "another epoch, another digest");
        let runs = SectorRuns::of(&[3, 4, 5, 9, 11, 12].into_iter().map(|s| s..s + 1).collect());
        assert_eq!(runs.0, vec![(3, 6), (9, 10), (11, 13)]);
        // A read set's digest takes its own sectors' hashes out of a state's larger list.
        let hash = |s: u64| crate::crash::overlay::content_hash(s, &[s as u8; 512]);
        let hashes: Vec<(u64, Sum)> = (0..20).map(|s| (s, hash(s))).collect();
        let mut sum = Sum::default();
        [3, 4, 5, 9, 11, 12].into_iter().for_each(|s| sum.add(hash(s)));
        assert_eq!(set_digest(&runs, &hashes), Some(sum.finish(b"bob fsck reads v1\0")));
        let missing: Vec<(u64, Sum)> = hashes.iter().copied().filter(|&(s, _)| s != 11).collect();
        assert_eq!(set_digest(&runs, &missing), None, "sector 11 was not hashed");
        let timeout = StateCheck::failed(Outcome::Timeout { step: "mount".into() });
        assert!(Reusable::of(&timeout).is_none(), "a timeout says nothing about the bytes");
    }
}
