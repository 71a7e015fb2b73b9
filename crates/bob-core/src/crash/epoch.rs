//! Epochs: the trace cut at its durability barriers.
//!
//! A disk with a volatile write cache may persist the writes it has acknowledged in any
//! order, until a barrier makes them durable. An epoch is the run of writes between two
//! barriers: every write of an earlier epoch is durable when a crash hits the current one,
//! and any subset of the current epoch's writes (each possibly torn) may have reached the
//! media. The barriers are:
//!
//! * an empty flush: closes the current epoch;
//! * a write with REQ_PREFLUSH: its flush closes the current epoch, then the write joins
//!   the next one;
//! * a write with FUA, under the `barrier` FUA model only: joins the current epoch and
//!   then closes it (conservative: it loses crash states where earlier writes of the
//!   epoch are missing after the FUA write completed, exactly as CrashMonkey treats it).
//!   Under the `real` model (the default, see [`super::disk`]) a FUA write stays inside
//!   its epoch and only constrains it: a state that applies any later write of the epoch
//!   was cut after the FUA write completed, so it must apply the FUA write whole
//!   ([`StateId::is_legal_in`](super::id::StateId::is_legal_in)). A loop device has no FUA, so the block layer follows each FUA
//!   write with a flush of its own; kernel recordings mark those flushes
//!   ([`crate::trace::flags::FUA_POSTFLUSH`], from the `block_bio_queue` tracepoint) and
//!   under the `real` model they close no epoch, as a disk with FUA would issue none.
//!
//! * an asynchronous durability notification (a mark with [`crate::trace::ADN_PREFIX`],
//!   appended by bob's disk on its request-counting clock): every write before it is
//!   durable, exactly as after a flush, so it closes the current epoch too. The file
//!   system issued nothing; the disk wrote its cache back on its own.
//!
//! Other marks belong to no epoch. Write or discard entries addressing zero sectors change
//! nothing on the disk and are left out of every epoch (a zero-sector FUA write is not a
//! barrier: FUA covers only its own, empty, data).
//!
//! An epoch left without writes by two barriers in a row is dropped, because every crash
//! state inside it equals the state right after the first barrier. The last epoch (after
//! the last barrier) is always kept, even without writes, so that the state "everything
//! applied" exists; a trace without entries has exactly one, empty, epoch.

use super::disk::{DiskModel, FuaModel};
use crate::trace::{EntryKind, Trace};

/// One flush-delimited run of writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Epoch {
    /// Position of this epoch in the list [`epochs`] returns.
    pub index: usize,
    /// Entry indices of the epoch's Write and Discard entries, in trace order. A crash
    /// state names them by their position in this list.
    pub writes: Vec<usize>,
    /// Index of the first entry after the barrier that opened the epoch (for an epoch
    /// opened by a preflush write, that write's own index).
    pub start_entry: usize,
    /// Entry index of the barrier that closes the epoch: an empty flush, a FUA write (the
    /// epoch's last write) or a preflush write (the first write of the next epoch).
    /// `None` for the last epoch.
    pub end_flush: Option<usize>,
    /// 512-byte sectors per atomic write unit of the disk model: a tear keeps or drops
    /// whole units.
    pub unit_sectors: u64,
    /// Positions (in `writes`) of FUA writes that do not close the epoch (the `real` FUA
    /// model): each is durable once a later write of the epoch was issued.
    pub fua_writes: Vec<u32>,
}

impl Epoch {
    /// The end of the epoch's entry range (exclusive): the closing flush or preflush
    /// write is not part of it, a closing FUA write is.
    pub(crate) fn end_entry(&self, trace: &Trace) -> usize {
        match self.end_flush {
            None => trace.entries.len(),
            Some(f) if self.writes.last() == Some(&f) => f + 1,
            Some(f) => f,
        }
    }

    /// The barrier the epoch starts after, if any: the entry index and what it is.
    pub(crate) fn barrier_before(&self, trace: &Trace) -> Option<(usize, Barrier)> {
        let entries = &trace.entries;
        if let Some(&first) = self.writes.first() {
            if first == self.start_entry {
                if let Some(EntryKind::Write { preflush: true, .. }) =
                    entries.get(first).map(|e| e.kind())
                {
                    return Some((first, Barrier::Preflush));
                }
            }
        }
        let prev = self.start_entry.checked_sub(1)?;
        match entries.get(prev)?.kind() {
            EntryKind::Flush => Some((prev, Barrier::Flush)),
            EntryKind::Mark if entries[prev].is_adn() => Some((prev, Barrier::Adn)),
            EntryKind::Write { fua: true, .. } => Some((prev, Barrier::Fua)),
            _ => None,
        }
    }
}

/// What made an epoch boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// An empty cache flush.
    Flush,
    /// The flush that precedes a REQ_PREFLUSH write.
    Preflush,
    /// The completion of a FUA write.
    Fua,
    /// An asynchronous durability notification from the disk.
    Adn,
}

/// Cuts `trace` into its epochs under the disk model `disk` (see the module documentation
/// for the rules).
pub fn epochs(trace: &Trace, disk: &DiskModel) -> Vec<Epoch> {
    let real_fua = disk.fua == FuaModel::Real;
    let unit_sectors = disk.unit_sectors();
    let mut out = Vec::new();
    let mut writes = Vec::new();
    let mut fua_writes: Vec<u32> = Vec::new();
    let mut start_entry = 0;
    // Closes the current epoch at barrier `at`; a write-less epoch is dropped.
    let close = |out: &mut Vec<Epoch>,
                 writes: &mut Vec<usize>,
                 fua_writes: &mut Vec<u32>,
                 start: usize,
                 at: usize| {
        if !writes.is_empty() {
            out.push(Epoch {
                index: out.len(),
                writes: std::mem::take(writes),
                start_entry: start,
                end_flush: Some(at),
                unit_sectors,
                fua_writes: std::mem::take(fua_writes),
            });
        }
    };
    for (i, entry) in trace.entries.iter().enumerate() {
        match entry.kind() {
            EntryKind::Mark if entry.is_adn() => {
                close(&mut out, &mut writes, &mut fua_writes, start_entry, i);
                start_entry = i + 1;
            }
            EntryKind::Mark => {}
            // With real FUA the write is durable on its own; its emulation's flush is not.
            EntryKind::Flush if real_fua && entry.is_fua_postflush() => {}
            EntryKind::Flush => {
                close(&mut out, &mut writes, &mut fua_writes, start_entry, i);
                start_entry = i + 1;
            }
            EntryKind::Discard => {
                if entry.nr_sectors > 0 {
                    writes.push(i);
                }
            }
            EntryKind::Write { preflush, fua } => {
                if preflush {
                    close(&mut out, &mut writes, &mut fua_writes, start_entry, i);
                    start_entry = i;
                }
                if entry.nr_sectors > 0 {
                    writes.push(i);
                    if fua && real_fua {
                        fua_writes.push(writes.len() as u32 - 1);
                    } else if fua {
                        close(&mut out, &mut writes, &mut fua_writes, start_entry, i);
                        start_entry = i + 1;
                    }
                }
            }
        }
    }
    out.push(Epoch {
        index: out.len(),
        writes,
        start_entry,
        end_flush: None,
        unit_sectors,
        fua_writes,
    });
    out
}

/// Where one workload op's own writes fell in a trace: the epochs holding a write that
/// carries a sector stamped by that op (see `workloads::stamp`). Stamps find the op's data
/// wherever the kernel wrote it: inside the op's marks, or later at writeback (delayed
/// allocation), or through the journal (data=journal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpEpochs {
    /// The first epoch holding one of its writes.
    pub first: usize,
    /// The last such epoch.
    pub last: usize,
    /// How many distinct epochs hold its writes.
    pub epochs: usize,
    /// How many write requests carry its data.
    pub writes: usize,
}

impl OpEpochs {
    /// Barriers (epoch boundaries: flushes, FUA writes) between the op's first and last
    /// write: 0 when all of them fell into one epoch.
    pub fn barriers(&self) -> usize {
        self.last - self.first
    }
}

/// The epochs of `epochs` (of `trace`) holding a write with a sector stamped by op `op` of
/// the workload of generation `gen`; `None` if no write carries its data.
pub(crate) fn op_epochs(trace: &Trace, epochs: &[Epoch], gen: u32, op: u32) -> Option<OpEpochs> {
    let mut found: Option<OpEpochs> = None;
    for epoch in epochs {
        let mut writes = 0;
        for &i in &epoch.writes {
            let Some(entry) = trace.entries.get(i) else { continue };
            if !matches!(entry.kind(), EntryKind::Write { .. }) {
                continue;
            }
            let ours = entry.data.chunks(workloads::stamp::SECTOR).any(|s| {
                workloads::stamp::Stamp::decode(s).is_some_and(|st| st.op == op && st.gen == gen)
            });
            if ours {
                writes += 1;
            }
        }
        if writes > 0 {
            let f = found.get_or_insert(OpEpochs {
                first: epoch.index,
                last: epoch.index,
                epochs: 0,
                writes: 0,
            });
            f.last = epoch.index;
            f.epochs += 1;
            f.writes += writes;
        }
    }
    found
}
