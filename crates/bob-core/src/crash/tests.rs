//! Tests of epochs, state ids, strategies and overlays on hand-made and random traces.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::{any, prop, prop_assert, prop_assert_eq, prop_oneof, proptest, Just};
use proptest::strategy::Strategy as Gen;
use proptest::test_runner::Config as ProptestConfig;

use super::overlay::RecoveryHashes;
use super::strategy::{Generated, RANDOM_PER_EPOCH};
use super::*;
use crate::trace::{flags, Entry, Trace};

const DISK_SECTORS: u64 = 64;
const SECTOR: usize = 512;

/// A write of `n` sectors at `sector`, sector `k` filled with byte `sector + k`.
fn w(sector: u64, n: u64) -> Entry {
    let data: Vec<u8> = (0..n).flat_map(|k| vec![(sector + k) as u8; SECTOR]).collect();
    Entry::write(sector, data)
}

fn with(mut entry: Entry, flag: u64) -> Entry {
    entry.flags |= flag;
    entry
}

fn trace(entries: Vec<Entry>) -> Trace {
    Trace::new(512, entries)
}

/// The epochs under the study's disk (512-byte tears, FUA as a barrier), which most
/// tests here were written for; the disk-model tests below name their model.
fn epochs(t: &Trace) -> Vec<Epoch> {
    super::epochs(t, &DiskModel::STUDY)
}

fn unit_4k() -> DiskModel {
    DiskModel { atomic_write_unit: 4096, fua: FuaModel::Barrier }
}

#[test]
fn a_4096_byte_atomic_unit_never_tears_inside_a_block() {
    // An aligned 4 KiB write, an unaligned 8 KiB write (three units: 6 + 8 + 2 sectors)
    // and a 512-byte write.
    let t = trace(vec![w(8, 8), w(18, 16), w(40, 1), Entry::flush()]);
    let e = super::epochs(&t, &unit_4k());
    let states = generate(&t, &e, Strategy::ALL, &Limits::default()).states;
    let mut torn = 0;
    for s in &states {
        s.id.validate(&e, &t).unwrap();
        for a in &s.id.applied {
            let Some(ranges) = &a.sectors else { continue };
            torn += 1;
            let entry = &t.entries[e[s.id.epoch as usize].writes[a.write as usize]];
            for &(x, y) in ranges {
                // Every kept range starts and ends on a 4 KiB boundary of the disk (or the
                // request's own ends).
                let (first, last) = (entry.sector + u64::from(x), entry.sector + u64::from(y));
                assert!(x == 0 || first % 8 == 0, "{}: range starts inside a block", s.id);
                assert!(
                    u64::from(y) + 1 == entry.nr_sectors || (last + 1) % 8 == 0,
                    "{}: range ends inside a block",
                    s.id
                );
            }
        }
    }
    assert!(torn > 0, "the 3-unit write still tears at unit boundaries");
    // The single-block write is never torn; the study's disk tears it.
    assert!(states.iter().all(|s| s
        .id
        .applied
        .iter()
        .all(|a| a.write != 0 || a.sectors.is_none())));
    let study = generate(&t, &epochs(&t), Strategy::ALL, &Limits::default()).states;
    assert!(study.iter().any(|s| s.id.applied.iter().any(|a| a.write == 0 && a.sectors.is_some())));
    // A hand-written tear inside a unit is refused under 4 KiB, accepted under 512 B.
    let id: StateId = "e0:0[0-3]".parse().unwrap();
    assert!(id.validate(&e, &t).unwrap_err().to_string().contains("atomic write unit"));
    id.validate(&epochs(&t), &t).unwrap();
    let id: StateId = "e0:1[0-5]".parse().unwrap();
    id.validate(&e, &t).unwrap();
    let id: StateId = "e0:1[0-1]".parse().unwrap();
    assert!(id.validate(&e, &t).is_err());
}

#[test]
fn real_fua_keeps_the_epoch_open_and_a_completed_fua_write() {
    // w0, FUA w1, w2, flush: under `barrier` two epochs; under `real` one, in which any
    // state that applies w2 applies w1 whole.
    let t = trace(vec![w(0, 1), with(w(8, 8), flags::FUA), w(16, 1), Entry::flush()]);
    let barrier = epochs(&t);
    assert_eq!(shape(&barrier)[0], (vec![0, 1], 0, Some(1)));
    let real = super::epochs(&t, &DiskModel::default());
    assert_eq!(shape(&real)[0], (vec![0, 1, 2], 0, Some(3)));
    assert_eq!(real[0].fua_writes, vec![1]);
    let states = generate(&t, &real, Strategy::ALL, &Limits::default()).states;
    for s in states.iter().filter(|s| s.id.epoch == 0) {
        if s.id.applied.iter().any(|a| a.write == 2) {
            assert!(
                s.id.applied.iter().any(|a| a.write == 1 && a.sectors.is_none()),
                "{} applies w2 without the completed FUA write",
                s.id
            );
        }
    }
    // Legal under real FUA, lost under barrier: w0 missing after the FUA write completed.
    assert!(states.iter().any(|s| s.id.to_string() == "e0:1-2"));
    let id: StateId = "e0:2".parse().unwrap();
    assert!(id.validate(&real, &t).unwrap_err().to_string().contains("FUA"));
}

fn shape(epochs: &[Epoch]) -> Vec<(Vec<usize>, usize, Option<usize>)> {
    epochs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            assert_eq!(e.index, i);
            (e.writes.clone(), e.start_entry, e.end_flush)
        })
        .collect()
}

// ---------------------------------------------------------------- epochs

#[test]
fn flush_closes_the_epoch() {
    let t = trace(vec![w(0, 1), w(1, 1), Entry::flush(), w(2, 1)]);
    let e = epochs(&t);
    assert_eq!(shape(&e), vec![(vec![0, 1], 0, Some(2)), (vec![3], 3, None)]);
    assert_eq!(e[1].barrier_before(&t), Some((2, Barrier::Flush)));
    assert_eq!(e[0].barrier_before(&t), None);
    assert_eq!(e[0].end_entry(&t), 2);
    assert_eq!(e[1].end_entry(&t), 4);
}

#[test]
fn preflush_write_opens_a_new_epoch() {
    let t = trace(vec![w(0, 1), with(w(1, 1), flags::FLUSH), w(2, 1)]);
    let e = epochs(&t);
    assert_eq!(shape(&e), vec![(vec![0], 0, Some(1)), (vec![1, 2], 1, None)]);
    assert_eq!(e[1].barrier_before(&t), Some((1, Barrier::Preflush)));
    assert_eq!(e[0].end_entry(&t), 1);
}

#[test]
fn fua_write_joins_then_closes() {
    let t = trace(vec![w(0, 1), with(w(1, 1), flags::FUA), w(2, 1)]);
    let e = epochs(&t);
    assert_eq!(shape(&e), vec![(vec![0, 1], 0, Some(1)), (vec![2], 2, None)]);
    assert_eq!(e[1].barrier_before(&t), Some((1, Barrier::Fua)));
    assert_eq!(e[0].end_entry(&t), 2);
}

#[test]
fn preflush_fua_write_is_an_epoch_of_its_own() {
    let t = trace(vec![w(0, 1), with(w(1, 1), flags::FLUSH | flags::FUA), w(2, 1)]);
    assert_eq!(
        shape(&epochs(&t)),
        vec![(vec![0], 0, Some(1)), (vec![1], 1, Some(1)), (vec![2], 2, None)]
    );
}

#[test]
fn marks_belong_to_no_epoch() {
    let t = trace(vec![
        Entry::mark("op 0"),
        w(0, 1),
        Entry::mark("op 1"),
        Entry::flush(),
        Entry::mark("op 2"),
        w(1, 1),
        Entry::mark("end"),
    ]);
    assert_eq!(shape(&epochs(&t)), vec![(vec![1], 0, Some(3)), (vec![5], 4, None)]);
}

#[test]
fn there_is_always_a_trailing_epoch() {
    let t = trace(vec![w(0, 1), Entry::flush()]);
    assert_eq!(shape(&epochs(&t)), vec![(vec![0], 0, Some(1)), (vec![], 2, None)]);
    assert_eq!(shape(&epochs(&trace(vec![]))), vec![(vec![], 0, None)]);
    assert_eq!(
        shape(&epochs(&trace(vec![Entry::flush(), Entry::flush()]))),
        vec![(vec![], 2, None)]
    );
}

#[test]
fn barriers_in_a_row_make_no_empty_epoch() {
    let t = trace(vec![with(w(0, 1), flags::FUA), Entry::flush(), Entry::flush(), w(1, 1)]);
    let e = epochs(&t);
    assert_eq!(shape(&e), vec![(vec![0], 0, Some(0)), (vec![3], 3, None)]);
    assert_eq!(e[1].barrier_before(&t), Some((2, Barrier::Flush)));
}

#[test]
fn discards_join_and_empty_writes_do_not() {
    let empty_fua = Entry { sector: 5, nr_sectors: 0, flags: flags::FUA, data: Default::default() };
    let t = trace(vec![Entry::discard(0, 4), empty_fua, Entry::discard(9, 0), w(4, 1)]);
    assert_eq!(shape(&epochs(&t)), vec![(vec![0, 3], 0, None)]);
}

// ---------------------------------------------------------------- strategies

/// One epoch of three writes of 1, 8 and 16 sectors (block aligned), then a flush.
fn three_writes() -> Trace {
    trace(vec![w(0, 1), w(8, 8), w(16, 16), Entry::flush()])
}

fn count(t: &Trace, strategies: &[Strategy], limits: &Limits) -> usize {
    let e = epochs(t);
    let g = generate(t, &e, strategies, limits);
    for s in &g.states {
        s.id.validate(&e, t).unwrap_or_else(|err| panic!("{err}"));
    }
    let unique: HashSet<_> = g.states.iter().map(|s| &s.id).collect();
    assert_eq!(unique.len(), g.states.len(), "duplicate ids");
    g.states.len()
}

#[test]
fn state_counts_per_strategy() {
    let t = three_writes();
    let l = Limits::default();
    let c = |s: &[Strategy]| count(&t, s, &l);
    use Strategy::*;
    assert_eq!(c(&[RequestPrefix]), 4 + 1);
    assert_eq!(c(&[BlockPrefix]), 1); // only the 16-sector write spans two blocks
    assert_eq!(c(&[SingleRequest]), 3);
    assert_eq!(c(&[AllButOne]), 3);
    assert_eq!(c(&[Torn]), 12 + 20); // 8 sectors: 4 + 8, 16 sectors: 4 + 16
    assert_eq!(c(&[PersistencePoints]), 1); // e1:-
    assert_eq!(c(&[Exhaustive]), 8 + 1);
    assert_eq!(c(&[Random]), RANDOM_PER_EPOCH + 1); // e1 has a single state
    assert_eq!(c(Strategy::ORIGINAL), 5 + 1 + 2 + 2);
    // torn's first half of the 16-sector write is block-prefix's state.
    assert_eq!(c(Strategy::DEFAULT), 5 + 1 + 2 + 2 + 31);
    let small = Limits { exhaustive_max_writes: 2, ..Limits::default() };
    assert_eq!(count(&t, &[Exhaustive], &small), 1);
}

#[test]
fn single_write_epoch_has_no_all_but_one() {
    let t = trace(vec![w(0, 1)]);
    assert_eq!(count(&t, &[Strategy::AllButOne], &Limits::default()), 0);
    assert_eq!(count(&t, &[Strategy::PersistencePoints], &Limits::default()), 0);
}

#[test]
fn block_prefix_follows_disk_blocks() {
    let ids = |t: &Trace| -> Vec<String> {
        let e = epochs(t);
        generate(t, &e, &[Strategy::BlockPrefix], &Limits::default())
            .states
            .iter()
            .map(|s| s.id.to_string())
            .collect()
    };
    assert_eq!(ids(&trace(vec![w(4, 8)])), ["e0:0[0-3]"]);
    assert_eq!(ids(&trace(vec![w(0, 1), w(4, 16)])), ["e0:0,1[0-3]", "e0:0,1[0-11]"]);
    assert!(ids(&trace(vec![w(8, 8)])).is_empty());
}

#[test]
fn torn_family_sizes() {
    for (len, expected) in [(2, 2), (3, 5), (4, 8), (8, 12), (16, 20), (17, 4), (64, 4)] {
        let t = trace(vec![w(0, len)]);
        assert_eq!(count(&t, &[Strategy::Torn], &Limits::default()), expected, "{len} sectors");
    }
}

#[test]
fn identical_ids_appear_once_under_the_first_strategy() {
    use Strategy::*;
    let t = three_writes();
    let e = epochs(&t);
    let g = generate(&t, &e, &[RequestPrefix, SingleRequest, RequestPrefix], &Limits::default());
    let listed: Vec<(String, Strategy)> =
        g.states.iter().map(|s| (s.id.to_string(), s.strategy)).collect();
    let expect = |v: &[(&str, Strategy)]| -> Vec<(String, Strategy)> {
        v.iter().map(|(s, k)| (s.to_string(), *k)).collect()
    };
    assert_eq!(
        listed,
        expect(&[
            ("e0:-", RequestPrefix),
            ("e0:0", RequestPrefix),
            ("e0:0-1", RequestPrefix),
            ("e0:0-2", RequestPrefix),
            ("e0:1", SingleRequest),
            ("e0:2", SingleRequest),
            ("e1:-", RequestPrefix),
        ])
    );
    let g = generate(&t, &e, &[SingleRequest, RequestPrefix], &Limits::default());
    assert_eq!(g.states[0].id.to_string(), "e0:0");
    assert_eq!(g.states[0].strategy, SingleRequest);
}

/// Six epochs of 1, 6, 2, 12, 3 and 0 writes of mixed sizes.
fn many_epochs() -> Trace {
    let mut entries = Vec::new();
    for (k, n) in [1u64, 6, 2, 12, 3].into_iter().enumerate() {
        for j in 0..n {
            entries.push(w((k as u64 * 13 + j * 5) % 56, 1 + (j * 3) % 9));
        }
        entries.push(Entry::flush());
    }
    trace(entries)
}

#[test]
fn budget_cuts_spread_over_epochs() {
    let t = many_epochs();
    let e = epochs(&t);
    let full = generate(&t, &e, Strategy::DEFAULT, &Limits::default());
    assert_eq!(full.truncated, 0);
    let limits = Limits { max_states: Some(40), ..Limits::default() };
    let cut = generate(&t, &e, Strategy::DEFAULT, &limits);
    assert_eq!(cut.states.len(), 40);
    assert_eq!(cut.truncated, full.states.len() - 40);
    assert_eq!(cut, generate(&t, &e, Strategy::DEFAULT, &limits), "deterministic");
    // Every epoch keeps states; the small ones keep all of theirs.
    let per_epoch =
        |g: &Generated, epoch: u32| g.states.iter().filter(|s| s.id.epoch == epoch).count();
    for epoch in 0..e.len() as u32 {
        assert!(per_epoch(&cut, epoch) >= 1, "epoch {epoch} lost all its states");
        assert!(per_epoch(&cut, epoch) >= per_epoch(&full, epoch).min(40 / e.len()));
    }
    // The kept states are a subsequence of the full list.
    let mut full_iter = full.states.iter();
    for s in &cut.states {
        assert!(full_iter.any(|f| f == s), "{} out of order", s.id);
    }
    // The long epoch keeps more than its request prefixes.
    let kinds: HashSet<Strategy> =
        cut.states.iter().filter(|s| s.id.epoch == 3).map(|s| s.strategy).collect();
    assert!(kinds.len() >= 3, "{kinds:?}");
}

#[test]
fn water_fill_edge_cases() {
    let t = many_epochs();
    let e = epochs(&t);
    let zero = Limits { max_states: Some(0), ..Limits::default() };
    let g = generate(&t, &e, Strategy::DEFAULT, &zero);
    assert!(g.states.is_empty());
    assert!(g.truncated > 0);
    let huge = Limits { max_states: Some(1_000_000), ..Limits::default() };
    let g = generate(&t, &e, Strategy::DEFAULT, &huge);
    assert_eq!(g, generate(&t, &e, Strategy::DEFAULT, &Limits::default()));
}

#[test]
fn random_fills_the_budget_deterministically() {
    let t = many_epochs();
    let e = epochs(&t);
    let mut strategies = Strategy::ORIGINAL.to_vec();
    strategies.push(Strategy::Random);
    let original = generate(&t, &e, Strategy::ORIGINAL, &Limits::default()).states.len();
    let limits = Limits { max_states: Some(original + 50), seed: 7, ..Limits::default() };
    let g = generate(&t, &e, &strategies, &limits);
    assert_eq!(g.states.len(), original + 50);
    assert_eq!(g.truncated, 0);
    assert_eq!(g.states.iter().filter(|s| s.strategy == Strategy::Random).count(), 50);
    assert_eq!(g, generate(&t, &e, &strategies, &limits));
    let other_seed = generate(&t, &e, &strategies, &Limits { seed: 8, ..limits.clone() });
    assert_ne!(g, other_seed);
    assert!(g.states.iter().any(|s| s.id.applied.iter().any(|a| a.sectors.is_some())), "tears");
    for s in &g.states {
        s.id.validate(&e, &t).unwrap();
    }
    // Random alone on a tiny space stops when it is exhausted.
    let tiny = trace(vec![w(0, 1)]);
    let te = epochs(&tiny);
    let g = generate(&tiny, &te, &[Strategy::Random], &Limits { max_states: Some(100), ..limits });
    assert_eq!(g.states.len(), 2);
}

#[test]
fn strategy_names() {
    for &s in Strategy::ALL {
        assert_eq!(s.to_string().parse::<Strategy>(), Ok(s));
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
    }
    assert_eq!("all-but-one".parse(), Ok(Strategy::AllButOne));
    let err = "prefix".parse::<Strategy>().unwrap_err();
    assert!(err.to_string().contains("request-prefix, block-prefix"), "{err}");
    assert_eq!(Strategy::ORIGINAL.len(), 4);
    assert_eq!(&Strategy::DEFAULT[..4], Strategy::ORIGINAL);
}

#[test]
fn shards_partition_the_states() {
    let t = many_epochs();
    let e = epochs(&t);
    let states = generate(&t, &e, Strategy::DEFAULT, &Limits::default()).states;
    for n in 1..6 {
        let shards: Vec<Vec<CrashState>> = (0..n).map(|i| shard(&states, i, n).unwrap()).collect();
        let mut all: Vec<&CrashState> = shards.iter().flatten().collect();
        assert_eq!(all.len(), states.len());
        all.sort_by(|a, b| a.id.cmp(&b.id));
        let mut expected: Vec<&CrashState> = states.iter().collect();
        expected.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(all, expected);
        let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
    }
    assert!(matches!(shard(&states, 0, 0), Err(Error::InvalidShard { .. })));
    assert!(matches!(shard(&states, 3, 3), Err(Error::InvalidShard { .. })));
}

// ---------------------------------------------------------------- state ids

#[test]
fn ids_print_compactly() {
    let id = StateId {
        epoch: 3,
        applied: vec![
            Applied::whole(0),
            Applied::whole(1),
            Applied::whole(2),
            Applied::whole(3),
            Applied::whole(4),
            Applied::whole(6),
            Applied::torn(7, vec![(0, 3)]),
        ],
        pm: None,
    };
    assert_eq!(id.to_string(), "e3:0-4,6,7[0-3]");
    assert_eq!("e3:0-4,6,7[0-3]".parse::<StateId>(), Ok(id));
    assert_eq!(StateId::whole(3, []).to_string(), "e3:-");
    let torn = StateId {
        epoch: 3,
        applied: vec![Applied::torn(5, vec![(0, 0), (2, 2), (4, 6)])],
        pm: None,
    };
    assert_eq!(torn.to_string(), "e3:5[0,2,4-6]");
    assert_eq!("e3:5[0,2,4-6]".parse::<StateId>(), Ok(torn));
    let mixed = "e0:0-1,2[1],3-4,6";
    assert_eq!(mixed.parse::<StateId>().unwrap().to_string(), mixed);
    assert_eq!(serde_json::to_string(&StateId::whole(1, [0, 1])).unwrap(), "\"e1:0-1\"");
    assert_eq!(serde_json::from_str::<StateId>("\"e1:0-1\"").unwrap(), StateId::whole(1, [0, 1]));
    assert!(serde_json::from_str::<StateId>("\"e1:1,0\"").is_err());
}

#[test]
fn parsing_canonicalizes_equivalent_spellings() {
    let p = |s: &str| s.parse::<StateId>().unwrap();
    assert_eq!(p("e2:0,1,2"), p("e2:0-2"));
    assert_eq!(p("e2:0-0"), p("e2:0"));
    assert_eq!(p("e2:4[0-1,2,5-5]"), p("e2:4[0-2,5]"));
    assert_eq!(p("e2:4[0-1,2,5-5]").to_string(), "e2:4[0-2,5]");
}

#[test]
fn malformed_ids_are_rejected() {
    for bad in [
        "",
        "e",
        "E3:1",
        "3:0",
        "e3",
        "e3:",
        "e3:-,1",
        "e3:--",
        "e03:1",
        "e3:01",
        "e3:1,1",
        "e3:2,1",
        "e3:1-0",
        "e3:0-4,4",
        "e3:1[",
        "e3:1[]",
        "e3:1[2-1]",
        "e3:1[0,0]",
        "e3:1[3,1]",
        "e3:1[0-4,2]",
        "e3: 1",
        "e3:1 ",
        "e3:1,",
        "e3:,1",
        "e4294967296:1",
        "e3:1]",
        "e3:-x",
        "e3:1[0]x",
        "e3:1[0]-2",
        "e3:1-2[0]",
        "e3:1;2",
        "e3:+1",
        "e3:-1",
        "e3:1[0,]",
        "e3:1[-1]",
        "e3:1[0-]",
        "e3:99999999999",
    ] {
        match bad.parse::<StateId>() {
            Err(Error::InvalidId { id, position, reason }) => {
                assert_eq!(id, bad);
                assert!(position <= bad.len(), "{bad}: position {position}");
                assert!(!reason.is_empty());
            }
            other => panic!("{bad:?} parsed as {other:?}"),
        }
    }
    let err = "e3:2,1".parse::<StateId>().unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid crash-state id \"e3:2,1\": write positions must be strictly increasing \
         (1 after 2) (at byte 5)"
    );
}

#[test]
fn validation_checks_the_id_against_the_trace() {
    let t = three_writes(); // e0: 1, 8 and 16 sectors; e1: empty
    let e = epochs(&t);
    let check = |s: &str| s.parse::<StateId>().unwrap().validate(&e, &t);
    for good in ["e0:-", "e0:0-2", "e0:1[0-6]", "e0:0,2[0,15]", "e1:-"] {
        check(good).unwrap_or_else(|err| panic!("{good}: {err}"));
    }
    assert!(matches!(check("e2:-"), Err(Error::NoSuchEpoch { epoch: 2, epochs: 2, .. })));
    assert!(matches!(check("e0:3"), Err(Error::NoSuchWrite { write: 3, writes: 3, .. })));
    assert!(matches!(check("e1:0"), Err(Error::NoSuchWrite { .. })));
    assert!(matches!(check("e0:1[8]"), Err(Error::SectorOutOfRange { sector: 8, .. })));
    assert!(matches!(check("e0:1[0-7]"), Err(Error::InvalidState { .. })), "whole as tear");
    assert!(matches!(check("e0:0[0]"), Err(Error::InvalidState { .. })), "1-sector tear");
    // Constructed (not parsed) ids that no parse would produce.
    let constructed =
        |applied: Vec<Applied>| StateId { epoch: 0, applied, pm: None }.validate(&e, &t);
    assert!(constructed(vec![Applied::whole(1), Applied::whole(0)]).is_err());
    assert!(constructed(vec![Applied::whole(1), Applied::whole(1)]).is_err());
    assert!(constructed(vec![Applied::torn(2, vec![])]).is_err());
    assert!(constructed(vec![Applied::torn(2, vec![(0, 1), (2, 3)])]).is_err(), "adjacent");
    assert!(constructed(vec![Applied::torn(2, vec![(3, 1)])]).is_err());
    assert!(constructed(vec![Applied::torn(2, vec![(4, 5), (0, 1)])]).is_err());
    let msg = check("e2:-").unwrap_err().to_string();
    assert_eq!(msg, "crash-state id e2:-: no epoch 2, the trace has 2 (0 to 1)");
}

#[test]
fn describe_names_the_flushes_that_only_emulated_fua() {
    let postflush = Entry { flags: flags::FLUSH | flags::FUA_POSTFLUSH, ..Entry::flush() };
    let t = trace(vec![w(0, 8), Entry::flush(), with(w(8, 8), flags::FUA), postflush, w(16, 8)]);
    let real = DiskModel { atomic_write_unit: 4096, fua: FuaModel::Real };
    let e = super::epochs(&t, &real);
    assert_eq!(e.len(), 2, "the emulation's flush closes no epoch under real FUA");
    assert_eq!(e[1].fua_writes, vec![0]);
    let d = "e1:0".parse::<StateId>().unwrap().describe(&t, &e);
    assert!(d.contains("the flush at entry 3 only emulated FUA"), "{d}");
    assert!(d.contains("FUA write 0") || d.contains("1 of 2 writes"), "{d}");
    // Under the barrier model the same flush is a barrier again.
    assert_eq!(super::epochs(&t, &unit_4k()).len(), 3);
}

#[test]
fn describe_says_where_and_what() {
    let mut entries = vec![Entry::mark("op 0 begin: write"), w(0, 1), Entry::flush()];
    entries.extend([w(3, 1), w(8, 8), with(w(24, 8), flags::FUA), w(40, 1)]);
    let t = trace(entries);
    let e = epochs(&t);
    let d = |s: &str| s.parse::<StateId>().unwrap().describe(&t, &e);
    assert_eq!(
        d("e1:0,2[0-3]"),
        "crash in epoch 1 of 3 (entries 3..6, after the flush at entry 2): 2 of 3 writes \
         applied; not applied: write 1 (entry 4, sector 8, 8 sectors); FUA write 2 (entry \
         5, sector 24, 8 sectors) torn: sectors 0-3 persisted"
    );
    assert_eq!(
        d("e0:-"),
        "crash in epoch 0 of 3 (entries 0..2, from the start of the trace): 0 of 1 writes \
         applied (the state right after the barrier)"
    );
    assert_eq!(
        d("e2:0"),
        "crash in epoch 2 of 3 (entries 6..7, after the FUA write at entry 5): 1 of 1 writes \
         applied"
    );
    // Invalid ids are described, not panicked on.
    assert!(d("e9:0").contains("no such epoch"));
    assert!(d("e1:7[3]").contains("no such write"));
}

// ---------------------------------------------------------------- overlays

#[test]
fn overlay_of_a_small_state() {
    let t = trace(vec![w(0, 2), Entry::flush(), w(1, 2), Entry::discard(0, 1)]);
    let e = epochs(&t);
    let ov = overlay(&t, &e, &"e1:0[1],1".parse().unwrap());
    let got: Vec<(u64, SectorSource)> = ov.iter().collect();
    assert_eq!(
        got,
        vec![
            (0, SectorSource::Zero),
            (1, SectorSource::Entry { entry: 0, index: 1 }),
            (2, SectorSource::Entry { entry: 2, index: 1 }),
        ]
    );
    assert_eq!(ov.len(), 3);
    assert!(!ov.is_empty());
    assert_eq!(ov.get(2), Some(SectorSource::Entry { entry: 2, index: 1 }));
    assert_eq!(ov.get(3), None);
    assert!(overlay(&t, &e, &"e0:-".parse().unwrap()).is_empty());
    // An unaligned read across three sectors.
    let mut buf = vec![0xAA; 600];
    ov.read_into(&t, 500, &mut buf);
    assert!(buf[..12].iter().all(|&b| b == 0), "discarded sector 0");
    assert!(buf[12..524].iter().all(|&b| b == 1), "sector 1 of entry 0");
    assert!(buf[524..].iter().all(|&b| b == 2), "sector 1 of entry 2 (written at 1)");
}

#[test]
fn equal_contents_have_equal_digests() {
    // Everything applied, named from the last epoch and from the one before.
    let t = trace(vec![w(0, 1), w(1, 1), Entry::flush(), w(2, 1), Entry::flush()]);
    let e = epochs(&t);
    let b = OverlayBuilder::new(&t, &e);
    let d = |s: &str| b.state(&s.parse().unwrap()).digest(&t);
    assert_eq!(d("e1:0"), d("e2:-"));
    assert_eq!(d("e0:0-1"), d("e1:-"));
    assert_ne!(d("e0:0"), d("e0:1"));
    // A discard and a write of zeros are alike.
    let zeros = trace(vec![Entry::write(4, vec![0; 1024]), Entry::flush(), Entry::discard(4, 2)]);
    let ze = epochs(&zeros);
    let zd = |s: &str| overlay(&zeros, &ze, &s.parse().unwrap()).digest(&zeros);
    assert_eq!(zd("e1:-"), zd("e1:0"));
}

/// Reading a state over the base image with `read_over` gives the bytes of the base read
/// whole and patched, at every offset and length over every state of a trace, and reads
/// no byte of the base image twice.
#[test]
fn reading_over_the_base_reads_only_what_the_overlay_lacks() {
    let t = trace(vec![w(3, 2), w(8, 4), w(20, 1), w(22, 9), Entry::flush(), w(0, 1)]);
    let e = epochs(&t);
    let base: Vec<u8> = (0..DISK_SECTORS as usize * SECTOR).map(|i| (i % 241) as u8 | 1).collect();
    let states = generate(&t, &e, Strategy::ALL, &Limits::default()).states;
    assert!(states.len() > 10);
    for state in &states {
        let ov = overlay(&t, &e, &state.id);
        for (offset, len) in [(0, 16 * 512), (700, 3000), (4 * 512, 512), (30 * 512, 9000)] {
            let mut want = base[offset..offset + len].to_vec();
            ov.read_into(&t, offset as u64, &mut want);
            let mut got = vec![0xEEu8; len];
            let mut from_base = vec![0u32; base.len()];
            ov.read_over(&t, offset as u64, &mut got, |at, part| {
                let at = at as usize;
                part.copy_from_slice(&base[at..at + part.len()]);
                from_base[at..at + part.len()].iter_mut().for_each(|n| *n += 1);
                Ok(())
            })
            .unwrap();
            assert_eq!(got, want, "{} at {offset}+{len}", state.id);
            assert!(from_base.iter().all(|&n| n <= 1), "{}: a base byte read twice", state.id);
            // Few enough runs here for one read per run: none under the overlay.
            let read_under_overlay = (offset..offset + len)
                .any(|b| from_base[b] > 0 && ov.get((b / SECTOR) as u64).is_some());
            assert!(!read_under_overlay, "{}: read the base under the overlay", state.id);
        }
    }
}

#[test]
fn builder_cache_serves_any_order() {
    let t = many_epochs();
    let e = epochs(&t);
    let states = generate(&t, &e, Strategy::DEFAULT, &Limits::default()).states;
    let b = OverlayBuilder::new(&t, &e);
    let order = states.iter().rev().chain(states.iter()).chain(states.iter().step_by(7));
    for s in order {
        let cached = b.state(&s.id);
        let fresh = overlay(&t, &e, &s.id);
        assert_eq!(cached.iter().collect::<Vec<_>>(), fresh.iter().collect::<Vec<_>>());
        assert_eq!(cached.len(), fresh.len());
    }
}

// ---------------------------------------------------------------- properties

#[derive(Clone, Debug)]
enum Op {
    Write { sector: u64, fills: Vec<u8>, preflush: bool, fua: bool },
    Discard { sector: u64, len: u64 },
    Flush,
    Mark,
}

fn op() -> impl Gen<Value = Op> {
    prop_oneof![
        6 => (0..DISK_SECTORS, prop::collection::vec(0u8..3, 1..10), any::<bool>(), any::<bool>())
            .prop_map(|(sector, mut fills, p, f)| {
                fills.truncate((DISK_SECTORS - sector) as usize);
                Op::Write { sector, fills, preflush: p && sector % 3 == 0, fua: f && sector % 4 == 0 }
            }),
        1 => (0..DISK_SECTORS, 1u64..12)
            .prop_map(|(sector, len)| Op::Discard { sector, len: len.min(DISK_SECTORS - sector) }),
        2 => Just(Op::Flush),
        1 => Just(Op::Mark),
    ]
}

fn build(ops: &[Op]) -> Trace {
    let entries = ops
        .iter()
        .map(|op| match op {
            Op::Write { sector, fills, preflush, fua } => {
                let data: Vec<u8> = fills.iter().flat_map(|&b| vec![b; SECTOR]).collect();
                let mut e = Entry::write(*sector, data);
                e.flags |=
                    if *preflush { flags::FLUSH } else { 0 } | if *fua { flags::FUA } else { 0 };
                e
            }
            Op::Discard { sector, len } => Entry::discard(*sector, *len),
            Op::Flush => Entry::flush(),
            Op::Mark => Entry::mark("m"),
        })
        .collect();
    trace(entries)
}

/// A valid random id for `epochs` of `t`, from `seed`.
fn random_id(t: &Trace, epochs: &[Epoch], mut seed: u64) -> StateId {
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed >> 33
    };
    let e = (next() as usize) % epochs.len();
    let mut applied = Vec::new();
    for (r, &entry) in epochs[e].writes.iter().enumerate() {
        if next() % 2 == 0 {
            continue;
        }
        let len = t.entries[entry].nr_sectors as u32;
        if len >= 2 && next() % 3 == 0 {
            let keep: Vec<u32> = (0..len).filter(|_| next() % 2 == 0).collect();
            if !keep.is_empty() && keep.len() < len as usize {
                let mut ranges: Vec<(u32, u32)> = Vec::new();
                for s in keep {
                    match ranges.last_mut() {
                        Some(l) if l.1 + 1 == s => l.1 = s,
                        _ => ranges.push((s, s)),
                    }
                }
                applied.push(Applied::torn(r as u32, ranges));
                continue;
            }
        }
        applied.push(Applied::whole(r as u32));
    }
    StateId { epoch: e as u32, applied, pm: None }
}

/// The crash image built the slow way: a whole disk, byte by byte.
fn naive(t: &Trace, epochs: &[Epoch], id: &StateId, base: &[u8]) -> Vec<u8> {
    let mut disk = base.to_vec();
    let mut put = |entry: usize, keep: &dyn Fn(u32) -> bool| {
        let en = &t.entries[entry];
        for k in 0..en.nr_sectors {
            if !keep(k as u32) {
                continue;
            }
            let at = (en.sector + k) as usize * SECTOR;
            for b in 0..SECTOR {
                disk[at + b] = if en.flags & flags::DISCARD != 0 {
                    0
                } else {
                    en.data[k as usize * SECTOR + b]
                };
            }
        }
    };
    for epoch in &epochs[..id.epoch as usize] {
        for &entry in &epoch.writes {
            put(entry, &|_| true);
        }
    }
    for a in &id.applied {
        put(epochs[id.epoch as usize].writes[a.write as usize], &|s| a.has_sector(s));
    }
    disk
}

fn base_image(seed: u8) -> Vec<u8> {
    (0..DISK_SECTORS as usize * SECTOR).map(|i| (i / SECTOR) as u8 ^ seed).collect()
}

fn canonical_id() -> impl Gen<Value = StateId> {
    let tear = prop::collection::btree_set(0u32..300, 1..12);
    let item = (any::<bool>(), tear).prop_map(|(whole, sectors)| {
        (!whole).then(|| {
            let mut ranges: Vec<(u32, u32)> = Vec::new();
            for s in sectors {
                match ranges.last_mut() {
                    Some(l) if l.1 + 1 == s => l.1 = s,
                    _ => ranges.push((s, s)),
                }
            }
            ranges
        })
    });
    let positions = prop_oneof![
        prop::collection::btree_set(0u32..40, 0..12),
        prop::collection::btree_set(any::<u32>(), 0..4),
    ];
    (any::<u32>(), positions, prop::collection::vec(item, 12)).prop_map(|(epoch, ps, items)| {
        let applied =
            ps.into_iter().zip(items).map(|(write, sectors)| Applied { write, sectors }).collect();
        StateId { epoch, applied, pm: None }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn ids_round_trip(id in canonical_id()) {
        let text = id.to_string();
        prop_assert_eq!(text.parse::<StateId>(), Ok(id.clone()), "{}", text);
        prop_assert_eq!(text.parse::<StateId>().unwrap().to_string(), text);
    }

    #[test]
    fn parsing_never_panics(text in "e[0-9]{0,3}:?[-0-9,\\[\\]]{0,12}") {
        if let Ok(id) = text.parse::<StateId>() {
            prop_assert_eq!(id.to_string().parse::<StateId>(), Ok(id));
        }
    }

    #[test]
    fn overlay_matches_the_naive_image(
        ops in prop::collection::vec(op(), 0..30),
        seeds in (any::<u64>(), any::<u64>()),
        base_seed in any::<u8>(),
        window in (0usize..DISK_SECTORS as usize * SECTOR, 0usize..3000),
    ) {
        let t = build(&ops);
        let e = epochs(&t);
        let builder = OverlayBuilder::new(&t, &e);
        let base = base_image(base_seed);
        let mut seen = Vec::new();
        for seed in [seeds.0, seeds.1] {
            let id = random_id(&t, &e, seed);
            prop_assert!(id.validate(&e, &t).is_ok(), "{}: {:?}", id, id.validate(&e, &t));
            prop_assert_eq!(id.to_string().parse::<StateId>(), Ok(id.clone()));
            let _ = id.describe(&t, &e);
            let ov = builder.state(&id);
            let expected = naive(&t, &e, &id, &base);
            let mut image = base.clone();
            ov.read_into(&t, 0, &mut image);
            prop_assert!(image == expected, "whole disk differs for {}", id);
            let (offset, len) = window;
            let len = len.min(base.len() - offset);
            let mut part = base[offset..offset + len].to_vec();
            ov.read_into(&t, offset as u64, &mut part);
            prop_assert!(part == expected[offset..offset + len], "window differs for {}", id);
            let sectors: BTreeSet<u64> = ov.iter().map(|(s, _)| s).collect();
            prop_assert_eq!(sectors.len(), ov.len());
            seen.push((id, expected, sectors, ov.digest(&t)));
        }
        // Equal written contents give equal digests, and only they do.
        let (a, b) = (&seen[0], &seen[1]);
        let same_content = a.1 == b.1 && a.2 == b.2;
        prop_assert_eq!(a.3 == b.3, same_content, "{} vs {}", a.0, b.0);
    }

    #[test]
    fn generated_states_are_valid_unique_and_sharded(
        ops in prop::collection::vec(op(), 0..25),
        max in prop::option::of(0usize..60),
        seed in any::<u64>(),
        n in 1usize..5,
    ) {
        let t = build(&ops);
        let e = epochs(&t);
        let limits = Limits { max_states: max, seed, exhaustive_max_writes: 4 };
        let g = generate(&t, &e, Strategy::ALL, &limits);
        if let Some(max) = max {
            prop_assert!(g.states.len() <= max);
        }
        let mut ids = HashSet::new();
        let mut last_epoch = 0;
        for s in &g.states {
            prop_assert!(s.id.validate(&e, &t).is_ok(), "{}", s.id);
            prop_assert!(ids.insert(s.id.clone()), "duplicate {}", s.id);
            prop_assert!(s.id.epoch >= last_epoch, "not by epoch");
            last_epoch = s.id.epoch;
        }
        let mut count = 0;
        for i in 0..n {
            for s in shard(&g.states, i, n).unwrap() {
                prop_assert!(ids.remove(&s.id), "{} in two shards", s.id);
                count += 1;
            }
        }
        prop_assert_eq!(count, g.states.len());
    }
}

#[test]
fn recovered_digests_merge_states_that_recovery_converges_and_nothing_else() {
    // Epoch 0: writes at sectors 0 and 8 (one sector each), then the end.
    let t = trace(vec![w(0, 1), w(8, 1)]);
    let e = epochs(&t);
    let ov = |s: &str| overlay(&t, &e, &s.parse().unwrap());
    let (a, b) = (ov("e0:0,1"), ov("e0:0"));
    assert_ne!(a.digest(&t), b.digest(&t), "different before recovery");
    // Recovery writes sector 8's content in both: the same image afterwards.
    let eight = [8u8; SECTOR];
    let stamp = 512u64..520; // bytes 0..8 of sector 1
    let mut one = [1u8; SECTOR];
    let ra = a.recovered_digest(
        &t,
        [(8, &eight), (1, &one)],
        std::slice::from_ref(&stamp),
        &RecoveryHashes::default(),
    );
    one[..8].copy_from_slice(b"mounted!"); // a mount stamp that differs
    let rb = b.recovered_digest(
        &t,
        [(8, &eight), (1, &one)],
        std::slice::from_ref(&stamp),
        &RecoveryHashes::default(),
    );
    assert_eq!(ra, rb, "converged images digest alike, stamps masked");
    // A byte outside the stamp differs: different images.
    one[100] ^= 1;
    let rc = b.recovered_digest(
        &t,
        [(8, &eight), (1, &one)],
        std::slice::from_ref(&stamp),
        &RecoveryHashes::default(),
    );
    assert_ne!(ra, rc);
    // Stamps are masked in sectors only the overlay sets too: entry 0 wrote zeros to
    // sector 0, which is the image recovery leaves when it writes zeros there itself.
    let stamp0 = 0u64..4;
    let x = ov("e0:0").recovered_digest(
        &t,
        [],
        std::slice::from_ref(&stamp0),
        &RecoveryHashes::default(),
    );
    let mut stamped = [0u8; SECTOR];
    stamped[..4].copy_from_slice(b"time");
    let y = ov("e0:-").recovered_digest(
        &t,
        [(0, &stamped)],
        std::slice::from_ref(&stamp0),
        &RecoveryHashes::default(),
    );
    assert_eq!(x, y);
    stamped[4] = 1;
    let z = ov("e0:-").recovered_digest(
        &t,
        [(0, &stamped)],
        std::slice::from_ref(&stamp0),
        &RecoveryHashes::default(),
    );
    assert_ne!(x, z);
}

#[test]
fn recovered_digests_with_shared_sector_hashes_are_the_digests_without() {
    let t = trace(vec![w(0, 1), w(8, 1)]);
    let e = epochs(&t);
    let ov = |s: &str| overlay(&t, &e, &s.parse().unwrap());
    let stamps = vec![std::ops::Range { start: 512u64, end: 520 }];
    let hashes = RecoveryHashes::default();
    let (eight, mut one, mut forty) = ([8u8; SECTOR], [1u8; SECTOR], [40u8; SECTOR]);
    // States in turn, each writing some of the sectors a state before it wrote, with the
    // same bytes, other bytes, or a different mount stamp: every digest taken through the
    // shared hashes is the one taken without them.
    for (i, state) in ["e0:0,1", "e0:0", "e0:-", "e0:1", "e0:0,1", "e0:-"].iter().enumerate() {
        if i % 2 == 1 {
            forty[7] ^= 1; // recovery wrote other bytes here than the state before
        }
        one[..8].copy_from_slice(&(i as u64).to_le_bytes()); // the stamp differs each time
        let written: Vec<(u64, &[u8; SECTOR])> = match i % 3 {
            0 => vec![(8, &eight), (1, &one), (40, &forty)],
            1 => vec![(1, &one), (40, &forty)],
            _ => vec![(40, &forty), (0, &eight)],
        };
        let o = ov(state);
        let plain = o.recovered_digest(&t, written.clone(), &stamps, &RecoveryHashes::default());
        let shared = o.recovered_digest(&t, written, &stamps, &hashes);
        assert_eq!(plain, shared, "state {i} ({state})");
    }
}

// ---------------------------------------------------------------- streaming

/// The list generator as it was before states were streamed (every epoch's ids held,
/// exact dedup by id), kept as the reference the stream must equal.
mod reference {
    use std::collections::{HashMap, HashSet};
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

    use super::super::strategy::{deterministic, water_fill, RandomDraw, RANDOM_ATTEMPTS};
    use super::super::strategy::{Generated, RANDOM_PER_EPOCH};
    use super::super::{CrashState, Epoch, Limits, StateId, Strategy};
    use crate::trace::Trace;

    struct EpochStates {
        groups: Vec<Vec<StateId>>,
        index: HashMap<u64, Vec<(usize, usize)>>,
        len: usize,
    }

    type IdHasher = BuildHasherDefault<DefaultHasher>;

    impl EpochStates {
        fn new(strategies: usize) -> Self {
            EpochStates { groups: vec![Vec::new(); strategies], index: HashMap::new(), len: 0 }
        }
        fn insert(&mut self, k: usize, id: StateId) -> bool {
            let hash = IdHasher::default().hash_one(&id);
            if self
                .index
                .get(&hash)
                .is_some_and(|places| places.iter().any(|&(k, i)| self.groups[k][i] == id))
            {
                return false;
            }
            self.index.entry(hash).or_default().push((k, self.groups[k].len()));
            self.groups[k].push(id);
            self.len += 1;
            true
        }
        fn keep_evenly(&mut self, quota: usize) {
            self.index.clear();
            if quota >= self.len {
                return;
            }
            let keep: HashSet<usize> = (0..quota).map(|k| k * self.len / quota).collect();
            let mut position = 0;
            for group in &mut self.groups {
                group.retain(|_| {
                    let kept = keep.contains(&position);
                    position += 1;
                    kept
                });
            }
            self.len = quota;
        }
    }

    fn draw(
        d: &mut RandomDraw,
        exhausted: &mut bool,
        set: &mut EpochStates,
        slot: usize,
        epoch: &Epoch,
    ) -> bool {
        if *exhausted {
            return false;
        }
        for _ in 0..RANDOM_ATTEMPTS {
            let id = d.one();
            if id.is_legal_in(epoch) && set.insert(slot, id) {
                return true;
            }
        }
        *exhausted = true;
        false
    }

    pub fn generate(
        trace: &Trace,
        epochs: &[Epoch],
        strategies: &[Strategy],
        limits: &Limits,
    ) -> Generated {
        let mut order: Vec<Strategy> = Vec::new();
        for &s in strategies {
            if !order.contains(&s) {
                order.push(s);
            }
        }
        let random_slot = order.iter().position(|&s| s == Strategy::Random);
        let mut sets: Vec<EpochStates> = Vec::new();
        for (e, epoch) in epochs.iter().enumerate() {
            let mut set = EpochStates::new(order.len());
            for (k, &s) in order.iter().enumerate() {
                deterministic(s, trace, epoch, e as u32, limits, &mut |id| {
                    if id.is_legal_in(epoch) {
                        set.insert(k, id);
                    }
                });
            }
            sets.push(set);
        }
        let total: usize = sets.iter().map(|s| s.len).sum();
        let mut truncated = 0;
        match limits.max_states {
            Some(max) if total > max => {
                truncated = total - max;
                let lens: Vec<usize> = sets.iter().map(|s| s.len).collect();
                for (set, quota) in sets.iter_mut().zip(water_fill(&lens, max)) {
                    set.keep_evenly(quota);
                }
            }
            _ => {
                if let Some(slot) = random_slot {
                    let budget = limits.max_states.map(|max| max - total);
                    let mut draws: Vec<(RandomDraw, bool)> = epochs
                        .iter()
                        .enumerate()
                        .map(|(e, epoch)| {
                            (RandomDraw::new(limits.seed, e as u32, epoch, trace), false)
                        })
                        .collect();
                    let mut left = budget.unwrap_or(usize::MAX);
                    let mut round = 0;
                    while left > 0 && (budget.is_some() || round < RANDOM_PER_EPOCH) {
                        let mut progress = false;
                        for (((d, ex), set), epoch) in
                            draws.iter_mut().map(|(d, x)| (d, x)).zip(sets.iter_mut()).zip(epochs)
                        {
                            if left == 0 {
                                break;
                            }
                            if draw(d, ex, set, slot, epoch) {
                                left -= 1;
                                progress = true;
                            }
                        }
                        if !progress {
                            break;
                        }
                        round += 1;
                    }
                }
            }
        }
        let states = sets
            .into_iter()
            .flat_map(|set| {
                let order = order.clone();
                set.groups.into_iter().enumerate().flat_map(move |(k, ids)| {
                    let strategy = order[k];
                    ids.into_iter().map(move |id| CrashState { id, strategy })
                })
            })
            .collect();
        Generated { states, truncated }
    }
}

/// Strategy lists in several orders, `random` first, between and last.
fn orders() -> Vec<Vec<Strategy>> {
    use Strategy::*;
    vec![
        Strategy::ALL.to_vec(),
        vec![Random, RequestPrefix, Torn],
        vec![SingleRequest, Random, AllButOne, Exhaustive, BlockPrefix],
        [Strategy::DEFAULT, &[Random]].concat(),
        vec![Torn, RequestPrefix, Torn],
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_stream_lists_what_the_list_generator_did(
        ops in prop::collection::vec(op(), 0..30),
        max in prop::option::of(0usize..400),
        seed in any::<u64>(),
        which in 0usize..5,
    ) {
        let t = build(&ops);
        let e = epochs(&t);
        let limits = Limits { max_states: max, seed, exhaustive_max_writes: 5 };
        let strategies = &orders()[which];
        let expected = reference::generate(&t, &e, strategies, &limits);
        let got = generate(&t, &e, strategies, &limits);
        prop_assert_eq!(got.truncated, expected.truncated);
        prop_assert_eq!(got.states.len(), expected.states.len());
        for (g, x) in got.states.iter().zip(&expected.states) {
            prop_assert_eq!(g, x);
        }
    }
}

#[test]
fn the_stream_matches_the_list_generator_on_the_hand_made_traces() {
    for t in [three_writes(), many_epochs(), trace(vec![w(0, 1)]), trace(vec![])] {
        let e = epochs(&t);
        for strategies in orders() {
            for max in [None, Some(0), Some(7), Some(40), Some(90), Some(400), Some(5000)] {
                let limits = Limits { max_states: max, seed: 3, ..Limits::default() };
                assert_eq!(
                    generate(&t, &e, &strategies, &limits),
                    reference::generate(&t, &e, &strategies, &limits),
                    "{strategies:?} {max:?}"
                );
            }
        }
    }
}

/// Three epochs of 8 multi-sector writes each: random tears give more states than any
/// budget below reaches.
fn wide_epochs() -> Trace {
    let mut entries = Vec::new();
    for k in 0..3u64 {
        for j in 0..8u64 {
            entries.push(w((k * 8 + j) % 7 * 8, 8));
        }
        entries.push(Entry::flush());
    }
    trace(entries)
}

#[test]
fn taking_the_first_states_of_a_huge_request_draws_only_those() {
    let t = wide_epochs();
    let e = epochs(&t);
    let strategies = [Strategy::DEFAULT, &[Strategy::Random]].concat();
    let deterministic = generate(&t, &e, Strategy::DEFAULT, &Limits::default()).states.len();
    let huge = Limits { max_states: Some(1_000_000_000), seed: 5, ..Limits::default() };
    let k = 500;
    let mut stream = stream(&t, &e, &strategies, &huge);
    let first: Vec<CrashState> = stream.by_ref().take(k).collect();
    assert_eq!(first.len(), k);
    assert!(first.iter().any(|s| s.strategy == Strategy::Random));
    // What it holds: the deterministic states' digests (seeding each epoch's random
    // stream, and the current epoch's list) and the random draws so far, each epoch's
    // stream run ahead to the round the output has reached: in proportion to what was
    // taken, nothing in proportion to the billion asked for.
    let held = stream.digests_held();
    assert!(held <= 2 * deterministic + (e.len() + 1) * (k + 1), "{held} digests held");
    // The same first states as a request of a thousand (the budget has not bitten yet).
    let small = Limits { max_states: Some(deterministic + 5 * k), ..huge.clone() };
    let again: Vec<CrashState> = super::stream(&t, &e, &strategies, &small).take(k).collect();
    assert_eq!(first, again);
    // Carrying on gives more, all distinct.
    let more: Vec<CrashState> = stream.take(2000).collect();
    assert_eq!(more.len(), 2000);
    let ids: HashSet<&StateId> = first.iter().chain(&more).map(|s| &s.id).collect();
    assert_eq!(ids.len(), k + 2000);
}
