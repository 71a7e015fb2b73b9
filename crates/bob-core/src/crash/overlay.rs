//! Overlays: the sectors a crash state changes, as references into the trace.
//!
//! An [`Overlay`] maps 512-byte sector numbers of the disk to where their crash-state
//! content lives: a sector of some trace entry's data, or zeros (a discard). It copies no
//! trace data; [`Overlay::read_into`] patches the content over a buffer the caller filled
//! from the base image, which is all the copy-on-write view in `image` needs, and
//! [`Overlay::digest`] hashes it for dedup.
//!
//! Thousands of states share the prefix "every epoch before e applied whole", so an
//! [`OverlayBuilder`] keeps that prefix map, built once, behind an `Arc` and puts only the
//! crash epoch's writes in a small map on top. It caches the prefix maps of the few epochs
//! it served last and builds a new one from the nearest cached earlier prefix, so walking
//! the states in epoch order (as [`super::generate`] lists them) builds each prefix
//! incrementally, while memory stays a few prefix maps however many epochs there are.
//!
//! The digest follows the same split. It is a set hash: the sum, modulo 2^256, of one
//! blake3 hash per set sector (of its number and content), finished with blake3. A prefix
//! carries its sum, kept up to date as it is built, so a state's digest costs only its
//! crash epoch's sectors, not the whole overlay (tens of megabytes for long traces).
//! Additive set hashes resist accidental collisions like the hash they sum; their weaker
//! resistance to deliberately crafted inputs does not matter for disk contents that a file
//! system wrote. The hash of each written sector is computed once per builder and kept
//! ([`SectorHashes`]): every state of a crash epoch sums that epoch's sectors again, and a
//! 4 MiB epoch of thousands of states would otherwise hash the same 4 MiB for each.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::epoch::Epoch;
use super::id::{Applied, StateId};
use crate::trace::{EntryKind, Trace, SECTOR_SIZE};

const SECTOR: usize = SECTOR_SIZE as usize;

/// Where one sector of a crash state comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SectorSource {
    /// Sector `index` (0-based, in 512-byte units) of the data of trace entry `entry`.
    Entry {
        /// Index of the write entry in [`Trace::entries`].
        entry: u32,
        /// Sector index within that entry's data.
        index: u32,
    },
    /// Zeros: the sector was discarded.
    Zero,
}

impl SectorSource {
    /// Whether two sectors hold the same bytes: the same source, or equal contents.
    /// `None` (content not set by the sources' map) equals only `None`.
    pub(crate) fn same_content(
        a: Option<SectorSource>,
        b: Option<SectorSource>,
        trace: &Trace,
    ) -> bool {
        match (a, b) {
            (a, b) if a == b => true,
            (Some(a), Some(b)) => {
                let (mut x, mut y) = ([0u8; SECTOR], [0u8; SECTOR]);
                a.copy_to(trace, 0, &mut x);
                b.copy_to(trace, 0, &mut y);
                x == y
            }
            _ => false,
        }
    }

    /// Copies bytes `from..from + out.len()` of this sector's content into `out`. Data a
    /// (malformed) entry lacks reads as zeros.
    fn copy_to(self, trace: &Trace, from: usize, out: &mut [u8]) {
        let data: &[u8] = match self {
            SectorSource::Zero => &[],
            SectorSource::Entry { entry, index } => {
                let data = trace.entries.get(entry as usize).map_or(&[][..], |e| &e.data[..]);
                let start = (index as usize).saturating_mul(SECTOR).saturating_add(from);
                data.get(start..).unwrap_or(&[])
            }
        };
        let n = data.len().min(out.len());
        out[..n].copy_from_slice(&data[..n]);
        out[n..].fill(0);
    }
}

type SectorMap = BTreeMap<u64, SectorSource>;

/// The sectors a crash state changes relative to the base image (see the module docs).
#[derive(Clone, Debug)]
pub struct Overlay {
    /// Every epoch before the crash epoch, shared between states.
    base: Arc<Prefix>,
    /// The crash epoch's applied writes; wins over `base`.
    top: SectorMap,
    /// Number of distinct sectors in `base` and `top`.
    len: usize,
    /// The trace's sector hashes, shared by every overlay of one builder.
    hashes: Arc<SectorHashes>,
}

impl Overlay {
    /// Number of sectors the overlay sets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the state equals the base image.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where `sector` comes from, or `None` if the base image provides it.
    pub fn get(&self, sector: u64) -> Option<SectorSource> {
        self.top.get(&sector).or_else(|| self.base.map.get(&sector)).copied()
    }

    /// Where `sector` comes from in the crash epoch's writes this state applies, or
    /// `None` when it holds an earlier epoch's or the base image's content.
    pub(crate) fn crash_epoch_source(&self, sector: u64) -> Option<SectorSource> {
        self.top.get(&sector).copied()
    }

    /// Every sector the overlay sets, by increasing sector number.
    pub fn iter(&self) -> impl Iterator<Item = (u64, SectorSource)> + '_ {
        self.range(0..=u64::MAX)
    }

    fn range(&self, sectors: RangeInclusive<u64>) -> Merge<'_> {
        Merge {
            top: self.top.range(sectors.clone()).peekable(),
            base: self.base.map.range(sectors).peekable(),
        }
    }

    /// Patches the overlay's sectors over `buf`, which holds the base image's bytes
    /// starting at byte `offset_bytes` (neither need be sector aligned).
    pub(crate) fn read_into(&self, trace: &Trace, offset_bytes: u64, buf: &mut [u8]) {
        if buf.is_empty() {
            return;
        }
        let start = u128::from(offset_bytes);
        let end = start + buf.len() as u128; // exclusive
        let sector = SECTOR_SIZE as u128;
        let first = (start / sector) as u64;
        let last = ((end - 1) / sector).min(u128::from(u64::MAX)) as u64;
        for (s, source) in self.range(first..=last) {
            let s_start = u128::from(s) * sector;
            let lo = start.max(s_start);
            let hi = end.min(s_start + sector);
            source.copy_to(
                trace,
                (lo - s_start) as usize,
                &mut buf[(lo - start) as usize..(hi - start) as usize],
            );
        }
    }

    /// Fills `buf` with the state's bytes from byte `offset_bytes`: the overlay's sectors
    /// from the trace, and the runs between them from `base` (called with a byte offset
    /// and the part of `buf` it fills). Equal to `base` over the whole buffer and then
    /// [`Overlay::read_into`], without reading what the overlay covers: a crash state's
    /// walk reads megabytes the trace wrote, and copying the base image's bytes under
    /// them first was a tenth of a data-heavy cell's CPU. Past [`BASE_READS_PER_CALL`]
    /// runs, one read of the whole buffer costs fewer calls.
    pub(crate) fn read_over(
        &self,
        trace: &Trace,
        offset_bytes: u64,
        buf: &mut [u8],
        mut base: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let start = u128::from(offset_bytes);
        let end = start + buf.len() as u128; // exclusive
        let sector = SECTOR_SIZE as u128;
        let first = (start / sector) as u64;
        let last = ((end - 1) / sector).min(u128::from(u64::MAX)) as u64;
        // The byte runs [lo, hi) the overlay does not cover.
        let mut gaps: Vec<(u128, u128)> = Vec::new();
        let mut covered_to = start;
        for (s, _) in self.range(first..=last) {
            let s_start = u128::from(s) * sector;
            let lo = start.max(s_start);
            if covered_to < lo {
                gaps.push((covered_to, lo));
                if gaps.len() > BASE_READS_PER_CALL {
                    base(offset_bytes, buf)?;
                    self.read_into(trace, offset_bytes, buf);
                    return Ok(());
                }
            }
            covered_to = end.min(s_start + sector);
        }
        if covered_to < end {
            gaps.push((covered_to, end));
        }
        for (lo, hi) in gaps {
            base(lo as u64, &mut buf[(lo - start) as usize..(hi - start) as usize])?;
        }
        self.read_into(trace, offset_bytes, buf);
        Ok(())
    }

    /// The dedup key: a digest of the set of (sector number, content) pairs the overlay
    /// sets. Two states whose overlays set the same sectors to the same bytes get the
    /// same digest, however they got there (a discard and a write of zeros are alike);
    /// different contents collide with negligible probability. It does not know the base
    /// image: a state that rewrites a sector with the base image's own bytes digests
    /// differently from one that leaves it alone, so dedup never merges different states
    /// but may keep such twins apart. Costs the crash epoch's sectors only (see the
    /// module documentation).
    pub fn digest(&self, trace: &Trace) -> [u8; 32] {
        self.sum(trace).finish(b"bob crash overlay v1\0")
    }

    fn sum(&self, trace: &Trace) -> Sum {
        let mut sum = self.base.sum;
        for (&s, &source) in &self.top {
            if let Some(&old) = self.base.map.get(&s) {
                sum.sub(self.hashes.get(trace, s, old));
            }
            sum.add(self.hashes.get(trace, s, source));
        }
        sum
    }

    /// The digest of the image after recovery: the overlay's sectors with `written` (the
    /// sectors recovery wrote, by number) over them, and the bytes of `stamps` (disk byte
    /// ranges that mounting itself stamps: times, mount counts, the last mount point,
    /// the checksum over them) zeroed wherever they fall in a hashed sector. Two states
    /// that recover to the same blocks but for those stamps digest alike; different
    /// contents collide with negligible probability. Like [`Overlay::digest`] it never
    /// reads the base image, so a sector set back to its base bytes keeps two images
    /// apart (a missed merge, never a wrong one). Costs the crash epoch's and recovery's
    /// sectors, plus the overlay's sectors under `stamps`.
    ///
    /// The hash of a sector recovery wrote comes from `hashes` when an earlier state's
    /// recovery wrote the same bytes there (the same digest, for less work).
    pub(crate) fn recovered_digest<'a>(
        &self,
        trace: &Trace,
        written: impl IntoIterator<Item = (u64, &'a [u8; SECTOR])>,
        stamps: &[std::ops::Range<u64>],
        hashes: &RecoveryHashes,
    ) -> [u8; 32] {
        let mut sum = self.sum(trace);
        // Written sectors under a stamp: the loop over stamps below must not count them
        // twice. Only those, as recovery may write thousands of sectors.
        let stamped = |s: u64| {
            let (start, end) = (s * SECTOR_SIZE, (s + 1) * SECTOR_SIZE);
            stamps.iter().any(|r| r.start < end && start < r.end)
        };
        let mut done = std::collections::BTreeSet::new();
        let mut seen = hashes.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for (s, content) in written {
            if let Some(old) = self.get(s) {
                sum.sub(self.hashes.get(trace, s, old));
            }
            let mut content = *content;
            mask(s, &mut content, stamps);
            let hash = match seen.get(&s) {
                Some((known, hash)) if **known == content => *hash,
                _ => {
                    let hash = content_hash(s, &content);
                    if seen.len() < RECOVERY_HASHES_KEPT || seen.contains_key(&s) {
                        seen.insert(s, (Box::new(content), hash));
                    }
                    hash
                }
            };
            sum.add(hash);
            if stamped(s) {
                done.insert(s);
            }
        }
        drop(seen);
        // Stamped sectors that only the overlay sets: hashed again with the stamps masked.
        for range in stamps {
            let sectors = range.start / SECTOR_SIZE..range.end.div_ceil(SECTOR_SIZE);
            for (s, source) in self.range(sectors.start..=sectors.end.saturating_sub(1)) {
                if !done.insert(s) {
                    continue;
                }
                sum.sub(self.hashes.get(trace, s, source));
                let mut content = [0u8; SECTOR];
                source.copy_to(trace, 0, &mut content);
                mask(s, &mut content, stamps);
                sum.add(content_hash(s, &content));
            }
        }
        sum.finish(b"bob recovered image v1\0")
    }
}

/// The hashes of sectors recovery wrote, by sector number, shared by the states of one
/// run: their recoveries mostly write the same bytes to the same sectors (xfs rewrites
/// about 2 MiB of its log at every mount, beyond any sector the crash state sets), and
/// comparing 512 bytes costs far less than hashing them. Keeps the last content seen for
/// each sector, of at most [`RECOVERY_HASHES_KEPT`] sectors.
#[derive(Debug, Default)]
pub struct RecoveryHashes {
    seen: Mutex<std::collections::HashMap<u64, KnownSector>>,
}

/// A sector's content as an earlier recovery wrote it (mount stamps masked), and its hash.
type KnownSector = (Box<[u8; SECTOR]>, Sum);

/// Sectors whose recovery hash is kept at most: 16 MiB of contents.
const RECOVERY_HASHES_KEPT: usize = 1 << 15;

/// Zeroes the bytes of sector `s` that fall in any of `stamps` (disk byte ranges).
pub(crate) fn mask(s: u64, content: &mut [u8; SECTOR], stamps: &[std::ops::Range<u64>]) {
    let start = s * SECTOR_SIZE;
    let end = start + SECTOR_SIZE;
    for r in stamps {
        let (lo, hi) = (r.start.max(start), r.end.min(end));
        if lo < hi {
            content[(lo - start) as usize..(hi - start) as usize].fill(0);
        }
    }
}

/// A 256-bit sum of sector hashes (little-endian limbs), wrapping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sum([u64; 4]);

impl Sum {
    pub(crate) fn add(&mut self, other: Sum) {
        let mut carry = false;
        for (a, b) in self.0.iter_mut().zip(other.0) {
            let (x, c1) = a.overflowing_add(b);
            let (y, c2) = x.overflowing_add(u64::from(carry));
            *a = y;
            carry = c1 || c2;
        }
    }

    fn sub(&mut self, other: Sum) {
        let mut borrow = false;
        for (a, b) in self.0.iter_mut().zip(other.0) {
            let (x, b1) = a.overflowing_sub(b);
            let (y, b2) = x.overflowing_sub(u64::from(borrow));
            *a = y;
            borrow = b1 || b2;
        }
    }
}

impl Sum {
    pub(crate) fn finish(self, domain: &[u8]) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(domain);
        for limb in self.0 {
            hasher.update(&limb.to_le_bytes());
        }
        *hasher.finalize().as_bytes()
    }
}

/// The hash of sector `s` holding `source`'s content.
fn sector_hash(trace: &Trace, s: u64, source: SectorSource) -> Sum {
    let mut content = [0u8; SECTOR];
    source.copy_to(trace, 0, &mut content);
    content_hash(s, &content)
}

/// The hashes of a trace's written sectors, computed an entry at a time on first use and
/// kept, within a budget: a sector of entry `e` at index `i` sits at `e.sector + i`
/// whatever state applies it, so its hash is the trace's, not the state's.
#[derive(Debug)]
struct SectorHashes {
    /// Per trace entry: its sectors' hashes, or `None` when the budget was spent.
    entries: Vec<OnceLock<Option<Box<[Sum]>>>>,
    /// Sectors that may still be kept (32 bytes each).
    budget: AtomicUsize,
}

/// Sector hashes kept at most per builder: 64 MiB of hashes, the writes of a 1 GiB trace.
const SECTOR_HASHES_KEPT: usize = 1 << 21;

impl SectorHashes {
    fn new(trace: &Trace) -> SectorHashes {
        SectorHashes {
            entries: (0..trace.entries.len()).map(|_| OnceLock::new()).collect(),
            budget: AtomicUsize::new(SECTOR_HASHES_KEPT),
        }
    }

    /// [`sector_hash`] of `source` at sector `s`, from the kept hashes when there are.
    fn get(&self, trace: &Trace, s: u64, source: SectorSource) -> Sum {
        if let SectorSource::Entry { entry, index } = source {
            let kept = self.entries.get(entry as usize).and_then(|slot| {
                let e = trace.entries.get(entry as usize)?;
                slot.get_or_init(|| self.hash_entry(trace, entry as usize)).as_ref().filter(|_| {
                    // An overlay only ever puts an entry's sector at its own place; any
                    // other pairing is hashed as asked.
                    e.sector.checked_add(u64::from(index)) == Some(s)
                })
            });
            if let Some(&hash) = kept.and_then(|h| h.get(index as usize)) {
                return hash;
            }
        }
        sector_hash(trace, s, source)
    }

    fn hash_entry(&self, trace: &Trace, entry: usize) -> Option<Box<[Sum]>> {
        let e = trace.entries.get(entry)?;
        let n = usize::try_from(e.nr_sectors).ok()?;
        let index = u32::try_from(entry).ok()?;
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(n))
            .ok()?;
        let at = |i: usize| e.sector.checked_add(i as u64);
        (0..n)
            .map(|i| {
                let source = SectorSource::Entry { entry: index, index: u32::try_from(i).ok()? };
                Some(sector_hash(trace, at(i)?, source))
            })
            .collect()
    }
}

/// The hash of sector `s` holding `content`.
pub(crate) fn content_hash(s: u64, content: &[u8; SECTOR]) -> Sum {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&s.to_le_bytes());
    hasher.update(content);
    let bytes = hasher.finalize();
    let mut limbs = [0u64; 4];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.as_bytes().chunks_exact(8)) {
        *limb = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    }
    Sum(limbs)
}

/// Every epoch before some epoch applied whole, with its digest sum.
#[derive(Clone, Debug, Default)]
struct Prefix {
    map: SectorMap,
    sum: Sum,
}

/// Merges the two maps' ranges, `top` winning on equal sectors.
struct Merge<'a> {
    top: Peekable<std::collections::btree_map::Range<'a, u64, SectorSource>>,
    base: Peekable<std::collections::btree_map::Range<'a, u64, SectorSource>>,
}

impl Iterator for Merge<'_> {
    type Item = (u64, SectorSource);

    fn next(&mut self) -> Option<Self::Item> {
        let t = self.top.peek().map(|(s, _)| **s);
        let b = self.base.peek().map(|(s, _)| **s);
        let take_top = match (t, b) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(t), Some(b)) => {
                if t == b {
                    self.base.next();
                }
                t <= b
            }
        };
        let (&s, &source) = if take_top { self.top.next() } else { self.base.next() }?;
        Some((s, source))
    }
}

/// Applies entry `entry_index` (whole, or only the sectors of `tear`) to `map`, keeping
/// `sum` (if any) the digest sum of the map.
fn apply(
    map: &mut SectorMap,
    mut sum: Option<(&mut Sum, &SectorHashes)>,
    trace: &Trace,
    entry_index: usize,
    tear: Option<&[(u32, u32)]>,
) {
    let Some(entry) = trace.entries.get(entry_index) else {
        return;
    };
    let Ok(entry_u32) = u32::try_from(entry_index) else {
        return;
    };
    let discard = entry.kind() == EntryKind::Discard;
    let mut set = |k: u64| {
        let (Some(s), Ok(index)) = (entry.sector.checked_add(k), u32::try_from(k)) else {
            return;
        };
        let source = if discard {
            SectorSource::Zero
        } else {
            SectorSource::Entry { entry: entry_u32, index }
        };
        let old = map.insert(s, source);
        if let Some((sum, hashes)) = sum.as_mut() {
            if let Some(old) = old {
                sum.sub(hashes.get(trace, s, old));
            }
            sum.add(hashes.get(trace, s, source));
        }
    };
    match tear {
        None => (0..entry.nr_sectors).for_each(&mut set),
        Some(ranges) => {
            for &(a, b) in ranges {
                let b = u64::from(b).min(entry.nr_sectors.saturating_sub(1));
                (u64::from(a)..=b).for_each(&mut set);
            }
        }
    }
}

/// Builds the overlays of many states of one trace, sharing their epoch prefixes.
///
/// `Sync`: workers checking states in parallel can share one builder.
#[derive(Debug)]
pub struct OverlayBuilder<'t> {
    trace: &'t Trace,
    epochs: &'t [Epoch],
    /// Recently used prefix maps, keyed by the crash epoch; most recent last.
    cache: Mutex<Vec<(usize, Arc<Prefix>)>>,
    hashes: Arc<SectorHashes>,
}

/// How many prefix maps an [`OverlayBuilder`] keeps.
const CACHED_PREFIXES: usize = 4;

impl<'t> OverlayBuilder<'t> {
    /// A builder for states of `trace`, cut into `epochs` by [`super::epochs`].
    pub fn new(trace: &'t Trace, epochs: &'t [Epoch]) -> Self {
        let hashes = Arc::new(SectorHashes::new(trace));
        OverlayBuilder { trace, epochs, cache: Mutex::new(Vec::new()), hashes }
    }

    /// The map of every epoch before `e` applied whole.
    fn prefix(&self, e: usize) -> Arc<Prefix> {
        let e = e.min(self.epochs.len());
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pos) = cache.iter().position(|(k, _)| *k == e) {
            let hit = cache.remove(pos);
            let map = Arc::clone(&hit.1);
            cache.push(hit);
            return map;
        }
        let nearest = cache.iter().filter(|(k, _)| *k < e).max_by_key(|(k, _)| *k);
        let (mut k, mut prefix) = match nearest {
            Some((k, prefix)) => (*k, Prefix::clone(prefix)),
            None => (0, Prefix::default()),
        };
        while k < e {
            for &w in &self.epochs[k].writes {
                apply(&mut prefix.map, Some((&mut prefix.sum, &self.hashes)), self.trace, w, None);
            }
            k += 1;
        }
        let map = Arc::new(prefix);
        cache.push((e, Arc::clone(&map)));
        if cache.len() > CACHED_PREFIXES {
            cache.remove(0);
        }
        map
    }

    /// The overlay of state `id`: every epoch before `id.epoch` whole, then the listed
    /// writes of the crash epoch in trace order. `id` should pass [`StateId::validate`];
    /// parts of it that do not exist are ignored (an epoch past the last means
    /// everything applied), never a panic.
    pub fn state(&self, id: &StateId) -> Overlay {
        let e = id.epoch as usize;
        let base = self.prefix(e);
        let mut top = SectorMap::new();
        if let Some(epoch) = self.epochs.get(e) {
            let mut applied: Vec<&Applied> = id.applied.iter().collect();
            applied.sort_by_key(|a| a.write);
            for a in applied {
                if let Some(&w) = epoch.writes.get(a.write as usize) {
                    apply(&mut top, None, self.trace, w, a.sectors.as_deref());
                }
            }
        }
        let len = base.map.len() + top.keys().filter(|s| !base.map.contains_key(s)).count();
        Overlay { base, top, len, hashes: Arc::clone(&self.hashes) }
    }
}

/// Runs of base-image bytes [`Overlay::read_over`] reads one by one at most.
const BASE_READS_PER_CALL: usize = 8;

/// The overlay of one state; prefer an [`OverlayBuilder`] for many states of a trace.
pub fn overlay(trace: &Trace, epochs: &[Epoch], id: &StateId) -> Overlay {
    OverlayBuilder::new(trace, epochs).state(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Entry;

    /// A kept hash is the hash of that sector's bytes: for every sector of every entry,
    /// for a source asked at another place than its own, for a discard, and once the
    /// budget is spent.
    #[test]
    fn kept_sector_hashes_are_the_hashes_of_the_bytes() {
        let entries = vec![
            Entry::write(8, (0..2048).map(|i| (i % 251) as u8).collect::<Vec<_>>()),
            Entry::write(100, vec![7u8; 512]),
            Entry::discard(8, 2),
        ];
        let trace = Trace::new(512, entries);
        let hashes = SectorHashes::new(&trace);
        for (entry, e) in trace.entries.iter().enumerate().take(2) {
            for index in 0..e.nr_sectors as u32 {
                let source = SectorSource::Entry { entry: entry as u32, index };
                let s = e.sector + u64::from(index);
                assert_eq!(hashes.get(&trace, s, source), sector_hash(&trace, s, source));
                assert_eq!(
                    hashes.get(&trace, s + 1, source),
                    sector_hash(&trace, s + 1, source),
                    "a source at another sector is hashed there"
                );
            }
        }
        assert_eq!(
            hashes.get(&trace, 8, SectorSource::Zero),
            sector_hash(&trace, 8, SectorSource::Zero)
        );
        let spent = SectorHashes { budget: AtomicUsize::new(0), ..SectorHashes::new(&trace) };
        let source = SectorSource::Entry { entry: 0, index: 3 };
        assert_eq!(spent.get(&trace, 11, source), sector_hash(&trace, 11, source));
        assert!(spent.entries[0].get().is_some_and(|kept| kept.is_none()), "nothing kept");
    }
}
