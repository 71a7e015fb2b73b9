//! Strategies: which crash states of each epoch to generate, within a budget.
//!
//! Every strategy works epoch by epoch, on top of every earlier epoch applied whole. With
//! `n` writes (writes and discards) in an epoch, position `r` meaning its `r`-th write:
//!
//! | strategy             | states of one epoch                                               |
//! |----------------------|-------------------------------------------------------------------|
//! | `request-prefix`     | the first `k` writes, for `k` in `0..=n`: `n + 1`                 |
//! | `block-prefix`       | writes `0..r` and the first `j` 4096-byte blocks of `r`, for every `r` spanning `b > 1` disk blocks and `j` in `1..b`: `sum(b - 1)` |
//! | `single-request`     | only write `r`: `n`                                               |
//! | `all-but-one`        | every write but `r`, when `n >= 2`: `n`                           |
//! | `torn`               | writes `0..r` and a tear of `r`, for every `r` of `L >= 2` sectors (see [`TORN_ALL_BUT_ONE_MAX_SECTORS`]) |
//! | `persistence-points` | no write, in an epoch that starts after a barrier: 1 or 0         |
//! | `exhaustive`         | every subset, when `n <= exhaustive_max_writes`: `2^n`            |
//! | `random`             | seeded random subsets with random tears, up to the budget         |
//! | `drop-role`          | every write but those of one role, and of each pair of roles: `g + g(g-1)/2` for `g` roles present |
//!
//! Tears are made of the disk model's atomic units (see [`super::disk`]): a request
//! touching `L` units (aligned to the disk, the first and last possibly partial) tears
//! into the first `L/2` units, the other `L - L/2`, the even units, the odd units and,
//! when `L <= 16`, each set of all units but one; coinciding sets count once (so `L = 2`
//! gives 2, `L = 3` gives 5, `4 <= L <= 16` gives `4 + L`, `L > 16` gives 4). A request
//! within one unit never tears. Block boundaries are those of the disk (sector numbers
//! multiple of 8), not of the request.
//!
//! Under the `real` FUA model, a state that applies a write after a FUA write of its epoch
//! without applying the FUA write whole is illegal, and no strategy lists it
//! ([`StateId::is_legal_in`]).
//!
//! A state two strategies produce is listed once, under the first strategy of the list;
//! `random` only draws states no other strategy produced. States are listed by epoch,
//! then by strategy in the order given, then in each strategy's own order.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::str::FromStr;

use super::epoch::Epoch;
use super::id::{Applied, StateId};
use super::Error;
use crate::trace::{Trace, SECTOR_SIZE};
use workloads::rng::SplitMix64;

/// The block size `block-prefix` splits requests at.
pub(crate) const BLOCK_SIZE: u64 = 4096;

/// `torn` adds the "all units but one" tears only for requests of at most this many
/// atomic units, which bounds it to 20 states per request.
pub(crate) const TORN_ALL_BUT_ONE_MAX_SECTORS: u64 = 16;

/// `exhaustive` never enumerates epochs of more writes than this (2^16 states each),
/// whatever [`Limits::exhaustive_max_writes`] says.
pub(crate) const EXHAUSTIVE_CEILING: usize = 16;

/// Without [`Limits::max_states`], `random` draws this many states per epoch (fewer when
/// the epoch has fewer distinct states left).
pub(crate) const RANDOM_PER_EPOCH: usize = 16;

/// A way of choosing crash states within an epoch (see the module documentation).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Each prefix of the epoch's write requests.
    RequestPrefix,
    /// Each prefix counted in 4096-byte blocks that splits a request.
    BlockPrefix,
    /// Each single write request alone.
    SingleRequest,
    /// All write requests but one.
    AllButOne,
    /// A bounded family of sector subsets of each multi-sector request.
    Torn,
    /// The state right after each barrier: the crash points where an fsync or sync has
    /// just returned.
    PersistencePoints,
    /// Every subset of the epoch's requests, for small epochs.
    Exhaustive,
    /// Seeded random subsets with random tears, up to the budget.
    Random,
    /// "Drop exactly these block writes": every write of the epoch but those of one role
    /// (and of each pair of roles), the NoFS thesis' reliability experiment. Roles come
    /// from the trace (a research design's recorder tags each write, see `fs::roles`);
    /// an untagged write counts as `metadata` or `data` by its METADATA flag.
    DropRole,
    /// The cache-line cuts of a persistent-memory region ([`crate::pm`]), paired with the
    /// disk by [`crate::crash::pm_states::combined`]. A label only, not in [`Strategy::ALL`]:
    /// a recording with a PM region always gets its cuts, and a disk's epochs none.
    PmCacheLines,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: &'static [Strategy] = &[
        Strategy::RequestPrefix,
        Strategy::BlockPrefix,
        Strategy::SingleRequest,
        Strategy::AllButOne,
        Strategy::Torn,
        Strategy::PersistencePoints,
        Strategy::Exhaustive,
        Strategy::Random,
        Strategy::DropRole,
    ];

    /// The original study's four (CrashMonkey's permuters).
    pub const ORIGINAL: &'static [Strategy] = &[
        Strategy::RequestPrefix,
        Strategy::BlockPrefix,
        Strategy::SingleRequest,
        Strategy::AllButOne,
    ];

    /// What bob runs unless told otherwise: the original four, torn writes and
    /// persistence points.
    pub const DEFAULT: &'static [Strategy] = &[
        Strategy::RequestPrefix,
        Strategy::BlockPrefix,
        Strategy::SingleRequest,
        Strategy::AllButOne,
        Strategy::Torn,
        Strategy::PersistencePoints,
    ];

    /// The kebab-case name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::RequestPrefix => "request-prefix",
            Strategy::BlockPrefix => "block-prefix",
            Strategy::SingleRequest => "single-request",
            Strategy::AllButOne => "all-but-one",
            Strategy::Torn => "torn",
            Strategy::PersistencePoints => "persistence-points",
            Strategy::Exhaustive => "exhaustive",
            Strategy::Random => "random",
            Strategy::DropRole => "drop-role",
            Strategy::PmCacheLines => "pm-cache-lines",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Strategy::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
            Error::UnknownStrategy {
                name: s.to_owned(),
                expected: Strategy::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
            }
        })
    }
}

/// Bounds on generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// At most this many states in all; `None` for no bound. When the deterministic
    /// strategies produce more, [`generate`] keeps a selection spread over all epochs;
    /// when they produce fewer, `random` fills the rest.
    pub max_states: Option<usize>,
    /// Seed of `random`: the same seed, trace, strategies and limits give the same states.
    pub seed: u64,
    /// `exhaustive` enumerates only epochs of at most this many writes (capped at
    /// [`EXHAUSTIVE_CEILING`]).
    pub exhaustive_max_writes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_states: None, seed: 0, exhaustive_max_writes: 10 }
    }
}

/// One generated crash state and the strategy that produced it first.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CrashState {
    /// The state's id.
    pub id: StateId,
    /// The first strategy (in the order asked for) that produced it.
    pub strategy: Strategy,
}

/// What [`generate`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Generated {
    /// The states, by epoch, then strategy order.
    pub states: Vec<CrashState>,
    /// How many distinct states of the deterministic strategies (all but `random`) the
    /// budget left out.
    pub truncated: usize,
}

/// Generates the crash states of `strategies` for `trace`, cut into `epochs` (see the
/// module documentation for what each strategy gives and how the budget cuts): the whole
/// list of [`stream`], for callers that want it in memory.
pub fn generate(
    trace: &Trace,
    epochs: &[Epoch],
    strategies: &[Strategy],
    limits: &Limits,
) -> Generated {
    let stream = stream(trace, epochs, strategies, limits);
    let truncated = stream.truncated();
    Generated { states: stream.collect(), truncated }
}

/// The crash states of `strategies` for `trace`, cut into `epochs`, one at a time: the
/// same states in the same order as [`generate`] lists them, without holding them.
///
/// With `limits.max_states = Some(m)` and more than `m` deterministic states, every epoch
/// gets a share as equal as its own count allows (water-filling, leftovers to the earliest
/// epochs), and within an epoch the kept states are evenly spaced over its list, so that
/// every strategy and every part of the epoch stays represented; `random` then draws
/// nothing. With fewer, `random` (if asked for) fills the rest of the budget, one state
/// per epoch in turn, until the budget is spent or no epoch yields a new state; without a
/// budget it draws [`RANDOM_PER_EPOCH`] per epoch. Deterministic throughout.
///
/// What it holds: before the first state, one pass over the deterministic strategies
/// counts each epoch's distinct states (the budget's shares need every count); then the
/// ids of one strategy of one epoch at a time. Dedup keeps a 128-bit digest of each id
/// (a hash set of `u128`: 16 bytes and a control byte per state, at most 8/7 of that
/// for the table's load, twice that while it grows), never the id: for the current
/// epoch its states so far and, with a budget and `random`, every epoch's random draws so
/// far (the round-robin over epochs needs to know which epochs still yield). Two distinct
/// ids share a digest with probability about `n^2 / 2^129` for `n` states of an epoch,
/// negligible at any count bob can mount (about 1e-27 at a million); such an id would be
/// left out as if listed already.
pub fn stream<'a>(
    trace: &'a Trace,
    epochs: &'a [Epoch],
    strategies: &[Strategy],
    limits: &Limits,
) -> StateStream<'a> {
    StateStream::new(trace, epochs, strategies, limits)
}

/// A 128-bit digest of a state id: what dedup keeps instead of the id.
fn id_digest(id: &StateId) -> u128 {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        id.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// A fixed-key hasher: the keys are not attacker-chosen, so no per-run random state is
/// needed, and the output order never depends on hash values.
type IdHasher = BuildHasherDefault<DefaultHasher>;

/// Digests of the states listed so far.
type IdSet = HashSet<u128, IdHasher>;

/// Adds `id`'s digest to `seen`; whether it was new.
fn first_time(seen: &mut IdSet, id: &StateId) -> bool {
    seen.insert(id_digest(id))
}

/// The lazy list of crash states [`stream`] returns (an [`Iterator`] of [`CrashState`]).
pub struct StateStream<'a> {
    trace: &'a Trace,
    epochs: &'a [Epoch],
    /// The strategies asked for, duplicates dropped.
    order: Vec<Strategy>,
    limits: Limits,
    /// Each epoch's share of its deterministic states, when the budget cuts them.
    quotas: Option<Vec<usize>>,
    /// Each epoch's number of distinct deterministic states.
    det_lens: Vec<usize>,
    truncated: usize,
    /// `random`'s budget over all epochs (`None`: [`RANDOM_PER_EPOCH`] each), when it
    /// draws at all.
    random: Option<Option<usize>>,
    /// With a budget: each epoch's random stream run ahead, to know how far it yields.
    probes: Vec<Probe>,
    // The cursor: epoch, strategy (index in `order`), what it produced and not yet given.
    epoch: usize,
    group: usize,
    ready: VecDeque<CrashState>,
    /// Digests of the current epoch's deterministic states so far.
    seen: IdSet,
    /// Position of the next distinct deterministic state in the current epoch's list.
    position: usize,
    /// How many of the current epoch's states its quota has kept so far.
    kept: usize,
    /// The current epoch's random stream, its digests (deterministic states included) and
    /// how many states it has given.
    draws: Option<(RandomDraw, IdSet, usize)>,
}

/// One epoch's random stream run ahead of the output: how many new states it yields.
struct Probe {
    draw: RandomDraw,
    seen: IdSet,
    found: usize,
}

impl Probe {
    /// Whether the epoch yields more than `j` random states (drawing as far as needed).
    fn more_than(&mut self, j: usize, epoch: &Epoch) -> bool {
        while self.found <= j {
            if self.draw.draw(&mut self.seen, epoch).is_none() {
                // Exhausted: its count is final, its digests no longer needed.
                self.seen = IdSet::default();
                return false;
            }
            self.found += 1;
        }
        true
    }

    /// `min(yield, j)`.
    fn capped(&mut self, j: usize, epoch: &Epoch) -> usize {
        if j == 0 || self.more_than(j - 1, epoch) {
            j
        } else {
            self.found
        }
    }
}

impl<'a> StateStream<'a> {
    fn new(
        trace: &'a Trace,
        epochs: &'a [Epoch],
        strategies: &[Strategy],
        limits: &Limits,
    ) -> StateStream<'a> {
        let mut order: Vec<Strategy> = Vec::new();
        for &s in strategies {
            if !order.contains(&s) {
                order.push(s);
            }
        }
        let has_random = order.contains(&Strategy::Random);
        let mut stream = StateStream {
            trace,
            epochs,
            order,
            limits: limits.clone(),
            quotas: None,
            det_lens: Vec::new(),
            truncated: 0,
            random: None,
            probes: Vec::new(),
            epoch: 0,
            group: 0,
            ready: VecDeque::new(),
            seen: IdSet::default(),
            position: 0,
            kept: 0,
            draws: None,
        };
        // The counting pass. With a budget and `random`, every epoch's digests seed its
        // probe; otherwise each epoch's are dropped once counted.
        let keep_sets = has_random && limits.max_states.is_some();
        let mut sets = Vec::new();
        for e in 0..epochs.len() {
            let set = stream.deterministic_set(e);
            stream.det_lens.push(set.len());
            if keep_sets {
                sets.push(set);
            }
        }
        let total: usize = stream.det_lens.iter().sum();
        match limits.max_states {
            Some(max) if total > max => {
                stream.truncated = total - max;
                stream.quotas = Some(water_fill(&stream.det_lens, max));
            }
            budget if has_random => {
                let budget = budget.map(|max| max - total);
                stream.random = Some(budget);
                if budget.is_some() {
                    stream.probes = sets
                        .into_iter()
                        .enumerate()
                        .map(|(e, seen)| Probe {
                            draw: RandomDraw::new(limits.seed, e as u32, &epochs[e], trace),
                            seen,
                            found: 0,
                        })
                        .collect();
                }
            }
            _ => {}
        }
        stream
    }

    /// How many distinct deterministic states the budget left out.
    pub fn truncated(&self) -> usize {
        self.truncated
    }

    /// How many id digests the stream holds now (its dedup sets): what its memory grows
    /// with, for the tests that show it does not run ahead of what was taken.
    pub(crate) fn digests_held(&self) -> usize {
        self.seen.len()
            + self.draws.as_ref().map_or(0, |d| d.1.len())
            + self.probes.iter().map(|p| p.seen.len()).sum::<usize>()
    }

    /// The legal ids strategy `s` gives in epoch `e`, duplicates included.
    fn ids_of(&self, s: Strategy, e: usize) -> Vec<StateId> {
        let epoch = &self.epochs[e];
        let mut ids = Vec::new();
        deterministic(s, self.trace, epoch, e as u32, &self.limits, &mut |id| {
            if id.is_legal_in(epoch) {
                ids.push(id);
            }
        });
        ids
    }

    /// The digests of epoch `e`'s distinct deterministic states.
    fn deterministic_set(&self, e: usize) -> IdSet {
        let mut seen = IdSet::default();
        for &s in &self.order {
            for id in self.ids_of(s, e) {
                first_time(&mut seen, &id);
            }
        }
        seen
    }

    /// Whether the budget lets epoch `e` have a `j`-th random state (0-based), given that
    /// its stream yields one: the round-robin over epochs, one state per epoch per round,
    /// has reached epoch `e` in round `j` with budget left.
    fn budget_allows(&mut self, e: usize, j: usize, budget: usize) -> bool {
        let epochs = self.epochs;
        let mut before = 0;
        for (k, probe) in self.probes.iter_mut().enumerate() {
            before += probe.capped(j, &epochs[k]);
            if k < e && probe.more_than(j, &epochs[k]) {
                before += 1;
            }
            if before >= budget {
                return false;
            }
        }
        true
    }

    /// The current epoch's next random state, if the budget and the epoch allow one.
    fn next_random(&mut self) -> Option<StateId> {
        let budget = self.random?;
        let e = self.epoch;
        if self.draws.is_none() {
            // Random draws skip every deterministic state of the epoch: those listed so
            // far, and those of the strategies after `random`.
            let seen = if self.group + 1 == self.order.len() {
                std::mem::take(&mut self.seen)
            } else {
                self.deterministic_set(e)
            };
            let draw = RandomDraw::new(self.limits.seed, e as u32, &self.epochs[e], self.trace);
            self.draws = Some((draw, seen, 0));
        }
        let given = self.draws.as_ref().map_or(0, |d| d.2);
        let allowed = match budget {
            None => given < RANDOM_PER_EPOCH,
            Some(budget) => self.budget_allows(e, given, budget),
        };
        if !allowed {
            return None;
        }
        let epoch = &self.epochs[e];
        let (draw, seen, given) = self.draws.as_mut()?;
        let id = draw.draw(seen, epoch)?;
        *given += 1;
        Some(id)
    }

    /// Queues what deterministic strategy `s` adds to the current epoch: its new states,
    /// those the epoch's quota keeps.
    fn fill(&mut self, s: Strategy) {
        let e = self.epoch;
        let len = self.det_lens[e];
        let quota = self.quotas.as_ref().map_or(len, |q| q[e]);
        for id in self.ids_of(s, e) {
            if !first_time(&mut self.seen, &id) {
                continue;
            }
            // Evenly spaced over the epoch's list: positions `k * len / quota` for `k` in
            // `0..quota` (strictly increasing, as `quota < len`).
            let keep =
                quota >= len || (self.kept < quota && self.position == self.kept * len / quota);
            self.position += 1;
            if keep {
                self.kept += 1;
                self.ready.push_back(CrashState { id, strategy: s });
            }
        }
    }
}

impl Iterator for StateStream<'_> {
    type Item = CrashState;

    fn next(&mut self) -> Option<CrashState> {
        loop {
            if let Some(state) = self.ready.pop_front() {
                return Some(state);
            }
            if self.epoch >= self.epochs.len() {
                return None;
            }
            let Some(&s) = self.order.get(self.group) else {
                self.epoch += 1;
                self.group = 0;
                self.seen = IdSet::default();
                self.position = 0;
                self.kept = 0;
                self.draws = None;
                continue;
            };
            if s == Strategy::Random {
                if let Some(id) = self.next_random() {
                    return Some(CrashState { id, strategy: s });
                }
                self.draws = None;
            } else {
                self.fill(s);
            }
            self.group += 1;
        }
    }
}

/// Picks shard `index` of `count` (0-based): every `count`-th state starting at `index`.
/// The shards of one list partition it, and as the list is deterministic, runs on other
/// machines with the same trace, strategies and limits pick the same shard.
pub fn shard(states: &[CrashState], index: usize, count: usize) -> Result<Vec<CrashState>, Error> {
    if count == 0 || index >= count {
        return Err(Error::InvalidShard { index, count });
    }
    Ok(states.iter().skip(index).step_by(count).cloned().collect())
}

/// Per-epoch quotas summing to `min(max, sum(lens))`: a common level, capped by each
/// epoch's own count, with what is left over given one each to the earliest epochs that
/// have more.
pub(super) fn water_fill(lens: &[usize], max: usize) -> Vec<usize> {
    let filled = |level: usize| lens.iter().map(|&l| l.min(level)).sum::<usize>();
    let (mut lo, mut hi) = (0, lens.iter().copied().max().unwrap_or(0));
    // The highest level whose total fits.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if filled(mid) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut left = max.saturating_sub(filled(lo));
    lens.iter()
        .map(|&l| {
            let extra = usize::from(l > lo && left > 0);
            left -= extra;
            l.min(lo) + extra
        })
        .collect()
}

/// The atomic units of write `r` of `epoch`, as inclusive sector ranges within the
/// request (see [`super::disk::request_units`]); empty for a request too large to name.
fn units_of(trace: &Trace, epoch: &Epoch, r: usize) -> Vec<(u64, u64)> {
    match epoch.writes.get(r).and_then(|&i| trace.entries.get(i)) {
        Some(entry) if entry.nr_sectors <= u64::from(u32::MAX) => {
            super::disk::request_units(entry.sector, entry.nr_sectors, epoch.unit_sectors)
        }
        _ => Vec::new(),
    }
}

/// Inclusive ranges of unit indices as inclusive sector ranges within the request.
fn unit_ranges_to_sectors(units: &[(u64, u64)], unit_ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    unit_ranges
        .iter()
        .map(|&(a, b)| (units[a as usize].0 as u32, units[b as usize].1 as u32))
        .collect()
}

/// Writes `0..r` whole, then `r` torn to `ranges`.
fn on_prefix(e: u32, r: usize, ranges: Vec<(u32, u32)>) -> StateId {
    let mut id = StateId::whole(e, 0..r as u32);
    id.applied.push(Applied::torn(r as u32, ranges));
    id
}

/// Feeds `out` the states strategy `s` gives in `epoch` (number `e`); `random` gives none
/// here.
pub(super) fn deterministic(
    s: Strategy,
    trace: &Trace,
    epoch: &Epoch,
    e: u32,
    limits: &Limits,
    out: &mut dyn FnMut(StateId),
) {
    let n = epoch.writes.len();
    let n32 = n as u32;
    match s {
        Strategy::RequestPrefix => (0..=n32).for_each(|k| out(StateId::whole(e, 0..k))),
        Strategy::SingleRequest => (0..n32).for_each(|r| out(StateId::whole(e, [r]))),
        Strategy::AllButOne if n >= 2 => {
            (0..n32).for_each(|r| out(StateId::whole(e, (0..n32).filter(|&p| p != r))));
        }
        Strategy::AllButOne => {}
        Strategy::BlockPrefix => {
            let per_block = BLOCK_SIZE / SECTOR_SIZE;
            for r in 0..n {
                let Some(entry) = epoch.writes.get(r).and_then(|&i| trace.entries.get(i)) else {
                    continue;
                };
                let (start, len) = (entry.sector, entry.nr_sectors);
                if len < 2 || len > u64::from(u32::MAX) {
                    continue;
                }
                let first_block = start / per_block;
                let Some(last_sector) = start.checked_add(len - 1) else {
                    continue;
                };
                let blocks = last_sector / per_block - first_block + 1;
                for j in 1..blocks {
                    let end = (first_block + j) * per_block - start; // sectors in the prefix
                    out(on_prefix(e, r, vec![(0, (end - 1) as u32)]));
                }
            }
        }
        Strategy::Torn => {
            for r in 0..n {
                let units = units_of(trace, epoch, r);
                if units.len() < 2 || units.len() > u32::MAX as usize {
                    continue;
                }
                for unit_ranges in tears(units.len() as u32) {
                    out(on_prefix(e, r, unit_ranges_to_sectors(&units, &unit_ranges)));
                }
            }
        }
        Strategy::PersistencePoints => {
            if epoch.barrier_before(trace).is_some() {
                out(StateId::whole(e, []));
            }
        }
        Strategy::Exhaustive => {
            if n <= limits.exhaustive_max_writes.min(EXHAUSTIVE_CEILING) {
                for mask in 0u32..1 << n {
                    out(StateId::whole(e, (0..n32).filter(|p| mask & 1 << p != 0)));
                }
            }
        }
        Strategy::Random | Strategy::PmCacheLines => {}
        Strategy::DropRole => {
            let group = |r: usize| -> &'static str {
                let Some(entry) = epoch.writes.get(r).and_then(|&i| trace.entries.get(i)) else {
                    return "data";
                };
                match crate::fs::roles::entry_role(entry) {
                    Some(role) => role.name(),
                    None if entry.is_metadata() => "metadata",
                    None => "data",
                }
            };
            let groups: Vec<&str> = (0..n).map(group).collect();
            let mut present: Vec<&str> = groups.clone();
            present.sort_unstable();
            present.dedup();
            let keep_without = |dropped: &[&str]| {
                StateId::whole(e, (0..n32).filter(|&p| !dropped.contains(&groups[p as usize])))
            };
            for (i, a) in present.iter().enumerate() {
                out(keep_without(&[a]));
                for b in &present[i + 1..] {
                    out(keep_without(&[a, b]));
                }
            }
        }
    }
}

/// The `torn` family of a request of `len >= 2` sectors (duplicates included; the caller
/// dedups).
fn tears(len: u32) -> Vec<Vec<(u32, u32)>> {
    let half = len / 2;
    let mut out = vec![
        vec![(0, half - 1)],
        vec![(half, len - 1)],
        (0..len).step_by(2).map(|s| (s, s)).collect(),
        (1..len).step_by(2).map(|s| (s, s)).collect(),
    ];
    if u64::from(len) <= TORN_ALL_BUT_ONE_MAX_SECTORS {
        for k in 0..len {
            let mut ranges = Vec::new();
            if k > 0 {
                ranges.push((0, k - 1));
            }
            if k + 1 < len {
                ranges.push((k + 1, len - 1));
            }
            out.push(ranges);
        }
    }
    out
}

/// The random states of one epoch: its own stream, so that an epoch's draws do not
/// depend on the other epochs or on the budget.
pub(super) struct RandomDraw {
    rng: SplitMix64,
    epoch: u32,
    /// The atomic units of each of the epoch's writes (sector ranges within the request).
    units: Vec<Vec<(u64, u64)>>,
    exhausted: bool,
}

/// Consecutive draws of already known states after which an epoch counts as exhausted.
pub(super) const RANDOM_ATTEMPTS: usize = 64;

impl RandomDraw {
    pub(super) fn new(seed: u64, epoch: u32, e: &Epoch, trace: &Trace) -> Self {
        let units = (0..e.writes.len()).map(|r| units_of(trace, e, r)).collect();
        let stream = seed ^ u64::from(epoch).wrapping_mul(0xD1B5_4A32_D192_ED03);
        RandomDraw { rng: SplitMix64::new(stream), epoch, units, exhausted: false }
    }

    /// One random state: each write applied with probability 1/2, an applied write of
    /// several atomic units torn with probability 1/4, the tear a random proper prefix or
    /// a random subset of its units.
    pub(super) fn one(&mut self) -> StateId {
        let mut applied = Vec::new();
        for (r, units) in self.units.iter().enumerate() {
            if self.rng.next_u64() & 1 == 0 {
                continue;
            }
            let r = r as u32;
            let len = units.len() as u64;
            if len < 2 || self.rng.below(4) != 0 {
                applied.push(Applied::whole(r));
                continue;
            }
            let keep: Vec<bool> = if self.rng.next_u64() & 1 == 0 {
                let prefix = 1 + self.rng.below(len - 1);
                (0..len).map(|s| s < prefix).collect()
            } else {
                (0..len).map(|_| self.rng.next_u64() & 1 == 1).collect()
            };
            let ranges = to_ranges(&keep);
            match ranges.as_slice() {
                [] => {}
                [(0, b)] if u64::from(*b) + 1 == len => applied.push(Applied::whole(r)),
                _ => applied.push(Applied::torn(r, unit_ranges_to_sectors(units, &ranges))),
            }
        }
        StateId { epoch: self.epoch, applied, pm: None }
    }

    /// The next state `seen` lacks (its digest added to `seen`); `None` once none turns
    /// up in [`RANDOM_ATTEMPTS`] draws in a row, and ever after.
    pub(super) fn draw(&mut self, seen: &mut IdSet, epoch: &Epoch) -> Option<StateId> {
        if self.exhausted {
            return None;
        }
        for _ in 0..RANDOM_ATTEMPTS {
            let id = self.one();
            if id.is_legal_in(epoch) && first_time(seen, &id) {
                return Some(id);
            }
        }
        self.exhausted = true;
        None
    }
}

/// Maximal runs of `true` as inclusive ranges.
fn to_ranges(keep: &[bool]) -> Vec<(u32, u32)> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for (s, _) in keep.iter().enumerate().filter(|(_, &k)| k) {
        let s = s as u32;
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => ranges.push((s, s)),
        }
    }
    ranges
}
