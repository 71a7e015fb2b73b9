//! The PM crash model at cache-line granularity: counts, fences as barriers, tears at
//! 8 bytes, ids, and the log's round trip.

use super::*;
use crate::crash::StateId;

fn store(offset: u64, data: &[u8]) -> PmEntry {
    PmEntry::Store { offset, data: data.to_vec(), disk: 0 }
}
fn clwb(offset: u64, len: u64) -> PmEntry {
    PmEntry::Clwb { offset, len, disk: 0 }
}
fn fence() -> PmEntry {
    PmEntry::Fence { disk: 0 }
}
fn trace(entries: Vec<PmEntry>) -> PmTrace {
    PmTrace { base: vec![0; 1024], entries }
}

#[test]
fn three_unfenced_lines_give_every_bounded_subset_and_each_tear() {
    // Three lines stored, none written back: at the end all three are pending.
    let t = trace(vec![store(0, &[1; 8]), store(64, &[2; 16]), store(128, &[3; 8])]);
    let cuts = t.cuts_at(3);
    let sets: Vec<(Vec<u64>, Torn)> = cuts.iter().map(|c| (c.lines.clone(), c.torn)).collect();
    // none; singles 0,1,2; prefixes {0,1}, {0,1,2}; all-but-one adds {1,2}, {0,2};
    // pairs are all seen; line 1 has two changed words: one tear keeping the first.
    assert_eq!(
        sets,
        vec![
            (vec![], None),
            (vec![0], None),
            (vec![1], None),
            (vec![2], None),
            (vec![0, 1], None),
            (vec![0, 1, 2], None),
            (vec![1, 2], None),
            (vec![0, 2], None),
            (vec![], Some((1, 1))),
        ]
    );
    let torn = t.image(&PmCut { pos: 3, lines: vec![], torn: Some((1, 1)) });
    assert_eq!(&torn[64..72], &[2; 8], "the first changed word persisted");
    assert_eq!(&torn[72..80], &[0; 8], "the second did not: 8-byte atomicity, no more");
    assert_eq!(t.crash_points(), vec![3]);
}

#[test]
fn a_fence_persists_written_back_lines_only() {
    let t = trace(vec![
        store(0, &[1; 8]),
        store(64, &[2; 8]),
        clwb(0, 8),
        fence(),
        // After the fence: line 0 is persistent, line 1 (never written back) still pending.
        store(128, &[3; 8]),
    ]);
    // Before the fence (position 3): both lines pending, 2 lines -> none, 2 singles, both.
    assert_eq!(t.cuts_at(3).len(), 4);
    let after = t.cuts_at(5);
    assert!(after.iter().all(|c| !c.lines.contains(&0)), "line 0 is no longer pending");
    let none = t.image(&PmCut { pos: 5, lines: vec![], torn: None });
    assert_eq!(&none[0..8], &[1; 8], "fenced: persistent in every state after the fence");
    assert_eq!(&none[64..72], &[0; 8], "stored but not written back: may be lost");
    // Before the fence, even the written-back line may be lost.
    let before = t.image(&PmCut { pos: 3, lines: vec![], torn: None });
    assert_eq!(&before[0..8], &[0; 8]);
    assert_eq!(t.crash_points(), vec![3, 5]);
}

#[test]
fn a_write_back_persists_the_content_it_saw_not_a_later_store() {
    let t = trace(vec![store(0, &[1; 8]), clwb(0, 64), store(0, &[9; 8]), fence()]);
    let s = t.image(&PmCut { pos: 4, lines: vec![], torn: None });
    assert_eq!(&s[0..8], &[1; 8]);
    let cuts = t.cuts_at(4);
    assert_eq!(cuts.len(), 2, "the later store is still pending: lost or persisted");
    assert_eq!(&t.image(&cuts[1])[0..8], &[9; 8]);
}

#[test]
fn the_bound_caps_each_crash_point() {
    // 40 pending lines: far more subsets than the cap.
    let t = trace((0..16).map(|i| store(i * 64, &[1; 64])).collect());
    assert_eq!(t.cuts_at(16).len(), SUBSETS_PER_POINT);
    let t = PmTrace {
        base: vec![0; 64 * 40],
        entries: (0..40).map(|i| store(i * 64, &[1; 8])).collect(),
    };
    let cuts = t.cuts_at(40);
    assert_eq!(cuts.len(), SUBSETS_PER_POINT);
    // Deterministic: the same cuts every time.
    assert_eq!(cuts, t.cuts_at(40));
}

#[test]
fn cuts_print_parse_and_validate() {
    let t = trace(vec![store(0, &[1; 16]), store(64, &[2; 8])]);
    for cut in t.cuts_at(2) {
        let text = cut.to_string();
        assert_eq!(text.parse::<PmCut>().unwrap(), cut, "{text}");
        t.validate(&cut).unwrap();
    }
    assert_eq!(PmCut { pos: 2, lines: vec![1], torn: Some((0, 1)) }.to_string(), "p2:1,0[1]");
    assert!(t.validate(&"p9".parse().unwrap()).is_err(), "past the log");
    assert!(t.validate(&"p2:5".parse().unwrap()).is_err(), "line 5 never stored");
    assert!(t.validate(&"p2:0[2]".parse().unwrap()).is_err(), "a tear keeps fewer words");
    assert!("p2:1,0".parse::<PmCut>().is_err(), "lines increase");
    assert!("q2".parse::<PmCut>().is_err());
    assert!("p02".parse::<PmCut>().is_err());
    let id: StateId = "e0:-+p2:1".parse().unwrap();
    assert_eq!(id.pm, Some(PmCut { pos: 2, lines: vec![1], torn: None }));
    assert_eq!(id.to_string(), "e0:-+p2:1");
    assert!("e0:-+x".parse::<StateId>().is_err());
}

#[test]
fn the_log_round_trips_and_a_hostile_one_fails_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = trace(vec![store(0, &[1; 8]), clwb(0, 8), fence()]);
    t.base[100] = 7;
    t.entries.push(PmEntry::Mark { text: "op 0 end: creat /a".into(), disk: 3 });
    t.save(dir.path()).unwrap();
    assert_eq!(PmTrace::load(dir.path()).unwrap(), Some(t));
    let log = dir.path().join(PM_LOG_FILE);
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"op\":\"store\",\"offset\":1020,\"data\":[1,2,3,4,5,6,7,8],\"disk\":0}\n");
    std::fs::write(&log, text).unwrap();
    let e = PmTrace::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("line 6") && e.contains("past the region"), "{e}");
    assert!(PmTrace::load(tempfile::tempdir().unwrap().path()).unwrap().is_none());
}
