//! Two recordings of one workload side by side (`bob log A --compare B`): the marks each
//! holds, the writes, flushes and FUA writes between consecutive marks, the request sizes,
//! the epochs a disk model cuts and the crash states the strategies draw from each.
//!
//! Two recorders see the same workload differently (bob's FUSE disk below a loop device
//! logs requests as the loop driver sends them; the kernel's dm-log-writes logs bios, and
//! a plain write only once a flush covers it; docs/dm-log-writes.md names each
//! difference). Only shapes are compared, never bytes: two recordings of one workload
//! differ in time stamps, UUIDs and often in where blocks were allocated.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::crash::{self, DiskModel, Limits, Strategy};
use crate::trace::{Entry, EntryKind, Trace};

/// What a stretch of a trace holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Write requests with data.
    pub writes: usize,
    /// Their 512-byte sectors.
    pub sectors: u64,
    /// Empty flushes that are barriers (not the emulation of a FUA write).
    pub flushes: usize,
    /// Writes with FUA.
    pub fua_writes: usize,
    /// Writes that carry a preflush themselves.
    pub preflush_writes: usize,
    /// Flushes that only emulated a FUA write on a device without FUA (bob's
    /// `FUA_POSTFLUSH`: the FUSE disk below a loop device).
    pub fua_postflushes: usize,
    /// Discards.
    pub discards: usize,
    /// Writes flagged as metadata.
    pub metadata: usize,
}

impl Counts {
    fn add(&mut self, e: &Entry) {
        match e.kind() {
            EntryKind::Write { preflush, fua } => {
                self.writes += 1;
                self.sectors += e.nr_sectors;
                self.fua_writes += usize::from(fua);
                self.preflush_writes += usize::from(preflush);
                self.metadata += usize::from(e.is_metadata());
            }
            EntryKind::Flush if e.is_fua_postflush() => self.fua_postflushes += 1,
            EntryKind::Flush => self.flushes += 1,
            EntryKind::Discard => self.discards += 1,
            EntryKind::Mark => {}
        }
    }

    fn brief(&self) -> String {
        let mut s =
            format!("{}w/{}s {}fl {}fua", self.writes, self.sectors, self.flushes, self.fua_writes);
        if self.fua_postflushes > 0 {
            s.push_str(&format!(" {}pf", self.fua_postflushes));
        }
        if self.discards > 0 {
            s.push_str(&format!(" {}d", self.discards));
        }
        s
    }
}

/// One trace's totals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// Entries.
    pub entries: usize,
    /// Marks (durability notifications not counted).
    pub marks: usize,
    /// Every request of the trace.
    pub counts: Counts,
    /// Write requests by length in 512-byte sectors.
    pub write_sizes: BTreeMap<u64, usize>,
    /// Epochs under the disk model.
    pub epochs: usize,
    /// Writes that follow a FUA write inside its epoch (real FUA): a state that applies
    /// one must apply the FUA write. In a dm-log-writes log such a write may have
    /// completed before the FUA write (the target logs plain writes only at the next
    /// flush), so those states are the ones that log cannot tell apart.
    pub after_fua: usize,
    /// Crash states the strategies draw (before de-duplication by content).
    pub states: usize,
}

/// The requests between one mark and the next, in each trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// The mark that opens the stretch (`None`: the start of the trace).
    pub after: Option<String>,
    /// In the first trace (`None`: it has no such mark).
    pub a: Option<Counts>,
    /// In the second.
    pub b: Option<Counts>,
}

/// One epoch's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EpochShape {
    /// Writes and discards in it.
    pub writes: usize,
    /// Their sectors.
    pub sectors: u64,
    /// FUA writes inside it that do not close it (the `real` FUA model).
    pub fua_inside: usize,
}

/// Two traces compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// The disk model the epochs and states are cut under.
    pub disk: DiskModel,
    /// The first trace's totals.
    pub a: Side,
    /// The second's.
    pub b: Side,
    /// Whether both hold the same marks in the same order.
    pub same_marks: bool,
    /// The stretches between marks, in the first trace's order, then the second's own.
    pub segments: Vec<Segment>,
    /// Epoch by epoch (the shorter list padded with `None`).
    pub epochs: Vec<(Option<EpochShape>, Option<EpochShape>)>,
}

fn marks(trace: &Trace) -> Vec<String> {
    trace.entries.iter().filter(|e| !e.is_adn()).filter_map(Entry::mark_text).collect()
}

/// The stretches of `trace` between marks, each keyed by its opening mark and how many
/// marks with that text came before (so that a repeated text stays its own key).
fn segments(trace: &Trace) -> Vec<((Option<String>, usize), Counts)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = vec![((None, 0), Counts::default())];
    for e in &trace.entries {
        match e.mark_text().filter(|_| !e.is_adn()) {
            Some(text) => {
                let n = seen.entry(text.clone()).or_default();
                out.push(((Some(text), *n), Counts::default()));
                *n += 1;
            }
            None => out.last_mut().map_or((), |(_, c)| c.add(e)),
        }
    }
    out
}

fn side(trace: &Trace, epochs: &[crash::Epoch], strategies: &[Strategy], limits: &Limits) -> Side {
    let mut counts = Counts::default();
    let mut write_sizes = BTreeMap::new();
    for e in &trace.entries {
        counts.add(e);
        if matches!(e.kind(), EntryKind::Write { .. }) {
            *write_sizes.entry(e.nr_sectors).or_default() += 1;
        }
    }
    Side {
        entries: trace.entries.len(),
        marks: marks(trace).len(),
        counts,
        write_sizes,
        epochs: epochs.len(),
        after_fua: epochs
            .iter()
            .filter_map(|e| e.fua_writes.iter().min().map(|&p| e.writes.len() - 1 - p as usize))
            .sum(),
        states: crash::stream(trace, epochs, strategies, limits).count(),
    }
}

fn epoch_shape(trace: &Trace, epoch: &crash::Epoch) -> EpochShape {
    EpochShape {
        writes: epoch.writes.len(),
        sectors: epoch.writes.iter().map(|&i| trace.entries[i].nr_sectors).sum(),
        fua_inside: epoch.fua_writes.len(),
    }
}

/// Compares `a` and `b` under `disk`, drawing crash states with `strategies` and `limits`.
pub fn compare(
    a: &Trace,
    b: &Trace,
    disk: &DiskModel,
    strategies: &[Strategy],
    limits: &Limits,
) -> Comparison {
    let (ea, eb) = (crash::epochs(a, disk), crash::epochs(b, disk));
    let (sa, sb) = (segments(a), segments(b));
    let mut in_b: HashMap<(Option<String>, usize), Counts> = sb.iter().cloned().collect();
    let mut rows: Vec<Segment> = sa
        .into_iter()
        .map(|(key, counts)| Segment { b: in_b.remove(&key), after: key.0, a: Some(counts) })
        .collect();
    // The second trace's own marks, in its order.
    for (key, _) in sb {
        if let Some(counts) = in_b.remove(&key) {
            rows.push(Segment { after: key.0, a: None, b: Some(counts) });
        }
    }
    let n = ea.len().max(eb.len());
    let epochs = (0..n)
        .map(|i| (ea.get(i).map(|e| epoch_shape(a, e)), eb.get(i).map(|e| epoch_shape(b, e))))
        .collect();
    Comparison {
        disk: *disk,
        a: side(a, &ea, strategies, limits),
        b: side(b, &eb, strategies, limits),
        same_marks: marks(a) == marks(b),
        segments: rows,
        epochs,
    }
}

impl Comparison {
    /// The comparison as text: totals, then the stretches between marks, then the epochs;
    /// `a_name` and `b_name` head the columns.
    pub fn to_text(&self, a_name: &str, b_name: &str) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let (a, b) = (&self.a, &self.b);
        let row = |out: &mut String, what: &str, x: String, y: String| {
            let mark = if x == y { ' ' } else { '*' };
            let _ = writeln!(out, "{mark} {what:<44} {x:>24} {y:>24}");
        };
        let _ = writeln!(out, "  {:<44} {a_name:>24} {b_name:>24}", format!("({})", self.disk));
        row(&mut out, "entries", a.entries.to_string(), b.entries.to_string());
        row(&mut out, "marks", a.marks.to_string(), b.marks.to_string());
        let (ca, cb) = (&a.counts, &b.counts);
        row(&mut out, "writes", ca.writes.to_string(), cb.writes.to_string());
        row(&mut out, "written sectors", ca.sectors.to_string(), cb.sectors.to_string());
        row(&mut out, "flushes", ca.flushes.to_string(), cb.flushes.to_string());
        row(&mut out, "FUA writes", ca.fua_writes.to_string(), cb.fua_writes.to_string());
        row(
            &mut out,
            "preflush writes",
            ca.preflush_writes.to_string(),
            cb.preflush_writes.to_string(),
        );
        row(
            &mut out,
            "FUA-emulating flushes",
            ca.fua_postflushes.to_string(),
            cb.fua_postflushes.to_string(),
        );
        row(&mut out, "discards", ca.discards.to_string(), cb.discards.to_string());
        row(&mut out, "metadata writes", ca.metadata.to_string(), cb.metadata.to_string());
        row(&mut out, "epochs", a.epochs.to_string(), b.epochs.to_string());
        row(&mut out, "writes after a FUA write", a.after_fua.to_string(), b.after_fua.to_string());
        row(&mut out, "crash states", a.states.to_string(), b.states.to_string());
        let sizes = |s: &BTreeMap<u64, usize>| {
            s.iter().map(|(len, n)| format!("{n}x{len}")).collect::<Vec<_>>().join(" ")
        };
        let _ = writeln!(
            out,
            "  write sizes (sectors)\n    {a_name}: {}\n    {b_name}: {}",
            sizes(&a.write_sizes),
            sizes(&b.write_sizes)
        );
        let _ = writeln!(
            out,
            "\n  between marks ({}): writes/sectors, flushes, FUA writes, FUA-emulating flushes",
            if self.same_marks { "the same marks in both" } else { "the marks differ" }
        );
        for s in &self.segments {
            let show =
                |c: &Option<Counts>| c.as_ref().map_or("(no such mark)".into(), Counts::brief);
            let (x, y) = (show(&s.a), show(&s.b));
            let mark = if x == y { ' ' } else { '*' };
            let after = s.after.as_deref().unwrap_or("(start)");
            let _ = writeln!(out, "{mark} {after:<44} {x:>24} {y:>24}");
        }
        let _ = writeln!(out, "\n  epochs: writes/sectors (+ FUA writes inside)");
        for (i, (x, y)) in self.epochs.iter().enumerate() {
            let show = |e: &Option<EpochShape>| {
                e.map_or("-".into(), |e| {
                    let fua = if e.fua_inside > 0 {
                        format!(" +{}fua", e.fua_inside)
                    } else {
                        String::new()
                    };
                    format!("{}w/{}s{fua}", e.writes, e.sectors)
                })
            };
            let (x, y) = (show(x), show(y));
            let mark = if x == y { ' ' } else { '*' };
            let _ = writeln!(out, "{mark} e{i:<43} {x:>24} {y:>24}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::flags;

    fn fua(sector: u64) -> Entry {
        let mut e = Entry::write(sector, vec![1; 4096]);
        e.flags |= flags::FUA | flags::METADATA;
        e
    }

    /// One fsync's commit as each recorder logs it: the FUSE disk below a loop device sees
    /// flush, write, flush (the block layer's FUA emulation, marked by the tracepoints) and
    /// one merged 16 KiB journal request; dm-log-writes sees four 4 KiB bios, logged at
    /// the flush dm splits from the preflush write, then the write with FUA.
    #[test]
    fn the_two_recorders_shapes_of_one_commit() {
        let mut postflush = Entry::flush();
        postflush.flags |= flags::FUA_POSTFLUSH;
        let fuse = Trace::new(
            512,
            vec![
                Entry::mark("op 1 begin: fsync /A/log"),
                Entry::write(20880, vec![2; 16384]),
                Entry::flush(),
                fua(20912),
                postflush,
                Entry::mark("op 1 end: fsync /A/log"),
            ],
        );
        let mut split_flush = Entry::flush();
        split_flush.sector = 20912;
        split_flush.flags |= flags::FUA | flags::METADATA;
        let mut dm = vec![Entry::mark("op 1 begin: fsync /A/log")];
        dm.extend((0..4).map(|k| Entry::write(20880 + 8 * k, vec![2; 4096])));
        dm.extend([split_flush, fua(20912), Entry::mark("op 1 end: fsync /A/log")]);
        let dm = Trace::new(512, dm);
        let c = compare(&fuse, &dm, &DiskModel::default(), Strategy::DEFAULT, &Limits::default());
        assert!(c.same_marks);
        assert_eq!((c.a.counts.writes, c.b.counts.writes), (2, 5));
        assert_eq!((c.a.counts.sectors, c.b.counts.sectors), (40, 40));
        assert_eq!((c.a.counts.flushes, c.b.counts.flushes), (1, 1), "the split flush is one");
        assert_eq!((c.a.counts.fua_writes, c.b.counts.fua_writes), (1, 1));
        assert_eq!((c.a.counts.fua_postflushes, c.b.counts.fua_postflushes), (1, 0));
        assert_eq!(c.a.write_sizes, BTreeMap::from([(8, 1), (32, 1)]));
        assert_eq!(c.b.write_sizes, BTreeMap::from([(8, 5)]));
        // Under real FUA both are two epochs: the journal, then the commit block.
        assert_eq!((c.a.epochs, c.b.epochs), (2, 2));
        assert_eq!((c.a.after_fua, c.b.after_fua), (0, 0));
        let commit = EpochShape { writes: 1, sectors: 8, fua_inside: 1 };
        assert_eq!(c.epochs[1], (Some(commit), Some(commit)));
        assert_eq!(c.epochs[0].0.unwrap().writes, 1);
        assert_eq!(c.epochs[0].1.unwrap().writes, 4);
        let seg = &c.segments[1];
        assert_eq!(seg.after.as_deref(), Some("op 1 begin: fsync /A/log"));
        assert_eq!(seg.a.unwrap().writes, 2);
        assert_eq!(seg.b.unwrap().writes, 5);
        let text = c.to_text("fuse", "dm");
        assert!(text.contains("* writes"), "{text}");
        assert!(text.contains("  flushes"), "{text}");
        assert!(text.contains("* FUA-emulating flushes"), "{text}");
    }

    /// Plain writes logged after a FUA write of their epoch are counted: real FUA ties
    /// them to it.
    #[test]
    fn writes_after_a_fua_write_in_its_epoch_are_counted() {
        let w = |s| Entry::write(s, vec![0; 512]);
        let t = Trace::new(512, vec![w(1), fua(8), w(2), w(3), Entry::flush(), fua(16), w(4)]);
        let c = compare(&t, &t, &DiskModel::default(), Strategy::DEFAULT, &Limits::default());
        assert_eq!(c.a.after_fua, 3);
        let barrier = DiskModel { fua: crate::crash::FuaModel::Barrier, ..DiskModel::default() };
        let c = compare(&t, &t, &barrier, Strategy::DEFAULT, &Limits::default());
        assert_eq!(c.a.after_fua, 0, "a FUA barrier closes its epoch");
    }

    #[test]
    fn a_mark_only_one_trace_holds_gets_its_own_row() {
        let a = Trace::new(512, vec![Entry::mark("x"), Entry::flush(), Entry::mark("y")]);
        let b = Trace::new(512, vec![Entry::mark("x"), Entry::flush(), Entry::mark("z")]);
        let c = compare(&a, &b, &DiskModel::default(), Strategy::DEFAULT, &Limits::default());
        assert!(!c.same_marks);
        let rows: Vec<(Option<&str>, bool, bool)> =
            c.segments.iter().map(|s| (s.after.as_deref(), s.a.is_some(), s.b.is_some())).collect();
        assert_eq!(
            rows,
            [
                (None, true, true),
                (Some("x"), true, true),
                (Some("y"), true, false),
                (Some("z"), false, true)
            ]
        );
    }
}
