//! FUA in kernel recordings: which writes the file system sent with FUA, and which flushes
//! the block layer added only to emulate it.
//!
//! A loop device advertises a volatile write cache but no FUA, so the block layer's flush
//! machinery turns a `REQ_PREFLUSH | REQ_FUA` write (ext4's jbd2 commit block, xfs's log
//! writes) into flush, plain write, flush before the driver sees it: the `block_rq_*`
//! tracepoints, and bob's recording disk below the loop device, see no FUA at all. The
//! `block_bio_queue` tracepoint fires before that machinery and still shows the bio's
//! flags (`FWFSM`: preflush, write, FUA, sync, meta). [`mark_fua`] matches those bios to
//! the requests the driver got and to the trace's entries, sets [`flags::FUA`] on the
//! writes, and [`flags::FUA_POSTFLUSH`] on each flush that only emulated a FUA: the disk
//! model then decides what they mean (`--fua real`: the write is durable on its own and
//! the emulation's flush is no barrier; `--fua barrier`: both as recorded).
//!
//! Every doubt keeps a flush a barrier: a flush that may also serve another bio's
//! preflush, or an empty flush bio (`fsync` without a commit, `blkdev_issue_flush`), is
//! never marked. Keeping a barrier that a FUA disk would not have can only hide crash
//! states, never invent one that no disk could produce.

use serde::{Deserialize, Serialize};

use super::blktrace::{BlockRequest, ReqOp, RwbsFlags};
use super::{flags, EntryKind, Trace};

/// One bio as the file system queued it (`block_bio_queue`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueuedBio {
    /// When it was queued (ns, the same clock as the requests' times).
    pub time_ns: u64,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in bytes (0 for an empty flush).
    pub bytes: u64,
    /// The operation.
    pub op: ReqOp,
    /// Its flags, before the flush machinery strips PREFLUSH and FUA.
    pub flags: RwbsFlags,
}

/// What [`mark_fua`] found and marked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FuaMarking {
    /// Bios the file system queued with FUA and data.
    pub fua_bios: usize,
    /// Trace write entries marked FUA.
    pub fua_entries: usize,
    /// Flushes marked as FUA emulation (no barrier under real FUA).
    pub postflushes: usize,
    /// FUA bios whose request or emulating flush was not found (left unmarked).
    pub unmatched: usize,
    /// Why nothing was marked, when the trace and the tracepoints disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Marks FUA writes and their emulating flushes in `trace` (see the module docs).
/// `request_of_entry` maps trace entries to indices of `requests` (from
/// [`super::blktrace::annotate`]).
pub(crate) fn mark_fua(
    trace: &mut Trace,
    requests: &[BlockRequest],
    bios: &[QueuedBio],
    request_of_entry: &[Option<usize>],
) -> FuaMarking {
    let mut out = FuaMarking {
        fua_bios: bios.iter().filter(|b| is_data(b) && b.flags.fua).count(),
        ..Default::default()
    };
    if out.fua_bios == 0 {
        return out;
    }
    let mut flushes: Vec<u64> =
        requests.iter().filter(|r| r.op == ReqOp::Flush).filter_map(|r| r.issue_ns).collect();
    flushes.sort_unstable();
    let trace_flushes: Vec<usize> =
        (0..trace.entries.len()).filter(|&i| trace.entries[i].kind() == EntryKind::Flush).collect();
    if trace_flushes.len() != flushes.len() {
        // Each flush request the loop device got is one flush of the recording disk; if
        // the counts differ, the k-th of one is not the k-th of the other.
        out.skipped = Some(format!(
            "the trace holds {} flushes but the tracepoints saw {} flush requests",
            trace_flushes.len(),
            flushes.len()
        ));
        return out;
    }

    // The driver's write request of each data bio with PREFLUSH or FUA: the oldest one
    // not yet claimed at the same place, issued after the bio was queued (the flush
    // machinery never merges such bios, so the request is the bio).
    let mut claimed = vec![false; requests.len()];
    let write_of: Vec<Option<usize>> = bios
        .iter()
        .map(|b| {
            if !is_data(b) || !(b.flags.fua || b.flags.preflush) {
                return None;
            }
            let w = requests.iter().enumerate().position(|(i, r)| {
                !claimed[i]
                    && r.op == ReqOp::Write
                    && r.sector == b.sector
                    && r.bytes == b.bytes
                    && r.issue_ns.is_some_and(|t| t >= b.time_ns)
            })?;
            claimed[w] = true;
            Some(w)
        })
        .collect();

    // Flushes that are (or may be) some bio's preflush stay barriers.
    let mut keep = vec![false; flushes.len()];
    for (b, w) in bios.iter().zip(&write_of) {
        if !(b.flags.preflush || b.op == ReqOp::Flush) {
            continue;
        }
        if let Some(issued) = w.and_then(|w| requests[w].issue_ns) {
            // The preflush is the last flush issued before the write itself.
            if let Some(k) = flushes.iter().rposition(|&t| t > b.time_ns && t < issued) {
                keep[k] = true;
                continue;
            }
        }
        // An empty flush (or one whose write was not found) is served by the first flush
        // issued once it is pending; one issued just after it may have been started
        // before it was, so both are kept.
        let first = flushes.partition_point(|&t| t <= b.time_ns);
        for k in keep.iter_mut().skip(first).take(2) {
            *k = true;
        }
    }

    let mut postflush = vec![false; flushes.len()];
    for (b, w) in bios.iter().zip(&write_of) {
        if !(is_data(b) && b.flags.fua) {
            continue;
        }
        // The emulation's flush is the first issued after the write completed.
        let Some((w, done)) = w.and_then(|w| Some((w, requests[w].complete_ns?))) else {
            out.unmatched += 1;
            continue;
        };
        let k = flushes.partition_point(|&t| t <= done);
        if k == flushes.len() {
            out.unmatched += 1;
            continue;
        }
        postflush[k] |= !keep[k];
        for (entry, r) in trace.entries.iter_mut().zip(request_of_entry) {
            if *r == Some(w) && entry.flags & flags::FUA == 0 {
                entry.flags |= flags::FUA;
                out.fua_entries += 1;
            }
        }
    }
    for (k, &i) in trace_flushes.iter().enumerate() {
        if postflush[k] {
            trace.entries[i].flags |= flags::FUA_POSTFLUSH;
            out.postflushes += 1;
        }
    }
    out
}

fn is_data(b: &QueuedBio) -> bool {
    b.op == ReqOp::Write && b.bytes > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::blktrace::parse_rwbs;
    use crate::trace::Entry;

    fn req(rwbs: &str, sector: u64, bytes: u64, issue: u64, done: u64) -> BlockRequest {
        BlockRequest::for_test(rwbs, sector, bytes, issue, done)
    }

    fn bio(rwbs: &str, sector: u64, bytes: u64, time: u64) -> QueuedBio {
        let (op, flags) = parse_rwbs(rwbs).unwrap();
        QueuedBio { time_ns: time, sector, bytes, op, flags }
    }

    fn w(sector: u64, n: u64) -> Entry {
        Entry {
            sector,
            nr_sectors: n,
            flags: 0,
            data: bytes::Bytes::from(vec![1u8; (n * 512) as usize]),
        }
    }

    /// The jbd2 commit on a loop device, as measured on this kernel: journal blocks, then
    /// `FWFSM` queued; the driver sees flush, write, flush.
    fn commit() -> (Trace, Vec<BlockRequest>, Vec<QueuedBio>, Vec<Option<usize>>) {
        let trace = Trace::new(512, vec![w(100, 8), Entry::flush(), w(108, 2), Entry::flush()]);
        let requests = vec![
            req("WSM", 100, 4096, 10, 20),
            req("FF", 0, 0, 31, 32),
            req("WSM", 108, 1024, 33, 34),
            req("FF", 0, 0, 35, 36),
        ];
        let bios = vec![bio("WSM", 100, 4096, 5), bio("FWFSM", 108, 1024, 30)];
        let of = vec![Some(0), None, Some(2), None];
        (trace, requests, bios, of)
    }

    #[test]
    fn a_commit_block_is_fua_and_only_its_second_flush_is_emulation() {
        let (mut t, r, b, of) = commit();
        let m = mark_fua(&mut t, &r, &b, &of);
        assert_eq!((m.fua_bios, m.fua_entries, m.postflushes, m.unmatched), (1, 1, 1, 0));
        assert!(m.skipped.is_none());
        assert_eq!(t.entries[2].flags & flags::FUA, flags::FUA);
        assert!(!t.entries[1].is_fua_postflush(), "the preflush stays a barrier");
        assert!(t.entries[3].is_fua_postflush());
        assert_eq!(t.entries[0].flags, 0);
    }

    #[test]
    fn a_flush_that_also_serves_another_preflush_stays_a_barrier() {
        let (mut t, mut r, mut b, mut of) = commit();
        // A second commit queued before the first one's post-flush: that flush is its
        // preflush too (the block layer coalesces them).
        b.push(bio("FWFSM", 200, 1024, 34));
        r.push(req("WSM", 200, 1024, 37, 38));
        r.push(req("FF", 0, 0, 39, 40));
        t.entries.push(w(200, 2));
        t.entries.push(Entry::flush());
        of.extend([Some(4), None]);
        let m = mark_fua(&mut t, &r, &b, &of);
        assert_eq!(m.fua_entries, 2);
        assert!(!t.entries[3].is_fua_postflush(), "it is the next commit's preflush");
        assert!(t.entries[5].is_fua_postflush());
        assert_eq!(m.postflushes, 1);
    }

    #[test]
    fn an_empty_flush_bio_keeps_the_flushes_that_may_serve_it() {
        let (mut t, r, mut b, of) = commit();
        b.push(bio("FWS", 0, 0, 34));
        let m = mark_fua(&mut t, &r, &b, &of);
        assert_eq!(m.postflushes, 0);
        assert!(!t.entries[3].is_fua_postflush());
        assert_eq!(m.fua_entries, 1, "the write is FUA all the same");
    }

    #[test]
    fn disagreeing_flush_counts_mark_nothing() {
        let (mut t, r, b, of) = commit();
        t.entries.push(Entry::flush());
        let m = mark_fua(&mut t, &r, &b, &of);
        assert!(m.skipped.as_deref().unwrap().contains("3 flushes"), "{m:?}");
        assert!(t.entries.iter().all(|e| e.flags & (flags::FUA | flags::FUA_POSTFLUSH) == 0));
    }
}
