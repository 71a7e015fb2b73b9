//! Crash-state ids: which writes a crash state applies, in a compact printable form.
//!
//! A [`StateId`] says: every write of every epoch before `epoch` applied whole, in trace
//! order, then the listed writes of epoch `epoch`, in trace order, each whole or torn
//! (only some of its 512-byte sectors persisted). Printed, it reads
//!
//! ```text
//! e3:0-4,6,7[0-3]     epoch 3: writes 0 to 4 and 6 whole, write 7's sectors 0 to 3
//! e3:-                epoch 3: none of its writes (the state right after its barrier)
//! e3:5[0,2,4-6]       epoch 3: only write 5, sectors 0, 2, 4, 5 and 6 of it
//! ```
//!
//! Write numbers are positions in [`Epoch::writes`]; sector numbers are 512-byte sector
//! indices within the request. A parsed id is canonical: adjacent sector ranges are
//! merged, so that equal ids mean equal states. [`StateId::validate`] checks an id against
//! the trace it is meant for; every id bob generates passes it.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use super::epoch::{Barrier, Epoch};
use super::Error;
use crate::trace::{EntryKind, Trace};

/// One write of the crash epoch that a state applies.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Applied {
    /// Position of the write within its epoch's [`Epoch::writes`].
    pub write: u32,
    /// `None`: the whole request persisted. Otherwise the persisted sectors: sorted,
    /// disjoint, non-adjacent inclusive ranges of 512-byte sector indices within the
    /// request, neither empty nor covering the whole request.
    pub sectors: Option<Vec<(u32, u32)>>,
}

impl Applied {
    /// The whole request `write`.
    pub fn whole(write: u32) -> Self {
        Applied { write, sectors: None }
    }

    /// Request `write` torn: only `sectors` (inclusive ranges, see [`Applied::sectors`])
    /// persisted.
    pub fn torn(write: u32, sectors: Vec<(u32, u32)>) -> Self {
        Applied { write, sectors: Some(sectors) }
    }

    /// Whether `sector` (an index within the request) persisted.
    pub fn has_sector(&self, sector: u32) -> bool {
        match &self.sectors {
            None => true,
            Some(ranges) => ranges.iter().any(|&(a, b)| a <= sector && sector <= b),
        }
    }
}

/// A crash state's name: the crash epoch and the writes of it that persisted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId {
    /// Index of the crash epoch; all earlier epochs are applied whole.
    pub epoch: u32,
    /// The writes of the crash epoch that persisted, by increasing position.
    pub applied: Vec<Applied>,
    /// For a recording with a persistent-memory region ([`crate::pm`]): the PM half of
    /// the state, printed after a `+` (`e3:0-4+p17:40,41`). An id with one may name the
    /// epoch one past the last (`e<len>:-`): every disk epoch applied.
    pub pm: Option<crate::pm::PmCut>,
}

impl StateId {
    /// Epoch `epoch` with the whole writes at `positions` (which must be increasing).
    pub fn whole(epoch: u32, positions: impl IntoIterator<Item = u32>) -> Self {
        StateId { epoch, applied: positions.into_iter().map(Applied::whole).collect(), pm: None }
    }

    /// Whether this state is legal in `epoch` (its own epoch) under the FUA model: a FUA
    /// write that completed before a write the state applies (any write at a later
    /// position) must be applied whole.
    pub fn is_legal_in(&self, epoch: &Epoch) -> bool {
        let Some(last) = self.applied.last().map(|a| a.write) else { return true };
        epoch
            .fua_writes
            .iter()
            .filter(|&&f| f < last)
            .all(|&f| self.applied.iter().any(|a| a.write == f && a.sectors.is_none()))
    }

    /// Checks the id against `epochs` (from [`super::epochs`] of `trace`): the epoch
    /// exists, every write position exists and is listed once in increasing order, and
    /// every tear names sorted, disjoint, non-adjacent sector ranges inside the request
    /// that neither are empty nor cover the whole request (that is the whole write).
    pub fn validate(&self, epochs: &[Epoch], trace: &Trace) -> Result<(), Error> {
        let bad = |reason: String| Error::InvalidState { id: self.to_string(), reason };
        if self.pm.is_some() && self.epoch as usize == epochs.len() && self.applied.is_empty() {
            return Ok(());
        }
        let epoch = epochs.get(self.epoch as usize).ok_or_else(|| Error::NoSuchEpoch {
            id: self.to_string(),
            epoch: self.epoch,
            epochs: epochs.len(),
        })?;
        let mut previous: Option<u32> = None;
        for applied in &self.applied {
            if let Some(p) = previous {
                if applied.write <= p {
                    return Err(bad(format!(
                        "write positions must be strictly increasing, {} follows {p}",
                        applied.write
                    )));
                }
            }
            previous = Some(applied.write);
            let entry = epoch
                .writes
                .get(applied.write as usize)
                .and_then(|&i| trace.entries.get(i))
                .ok_or_else(|| Error::NoSuchWrite {
                    id: self.to_string(),
                    epoch: self.epoch,
                    write: applied.write,
                    writes: epoch.writes.len(),
                })?;
            let Some(ranges) = &applied.sectors else {
                continue;
            };
            if ranges.is_empty() {
                return Err(bad(format!("write {} is torn to no sectors", applied.write)));
            }
            let mut next_free: u64 = 0; // first sector index a range may start at
            let mut covered: u64 = 0;
            for &(a, b) in ranges {
                if a > b {
                    return Err(bad(format!(
                        "sector range {a}-{b} of write {} is reversed",
                        applied.write
                    )));
                }
                if u64::from(a) < next_free {
                    return Err(bad(format!(
                        "sector ranges of write {} must be increasing, disjoint and not \
                         adjacent ({a} is too low)",
                        applied.write
                    )));
                }
                if u64::from(b) >= entry.nr_sectors {
                    return Err(Error::SectorOutOfRange {
                        id: self.to_string(),
                        epoch: self.epoch,
                        write: applied.write,
                        sector: b,
                        nr_sectors: entry.nr_sectors,
                    });
                }
                next_free = u64::from(b) + 2;
                covered += u64::from(b - a) + 1;
            }
            if covered == entry.nr_sectors {
                return Err(bad(format!(
                    "the tear of write {0} covers the whole request; write it as `{0}`",
                    applied.write
                )));
            }
            // Under the disk model, a tear keeps or drops whole atomic units.
            let units =
                super::disk::request_units(entry.sector, entry.nr_sectors, epoch.unit_sectors);
            let starts_unit = |s: u64| units.iter().any(|u| u.0 == s);
            let ends_unit = |s: u64| units.iter().any(|u| u.1 == s);
            if let Some(&(a, b)) = ranges
                .iter()
                .find(|(a, b)| !starts_unit(u64::from(*a)) || !ends_unit(u64::from(*b)))
            {
                return Err(bad(format!(
                    "the tear {a}-{b} of write {} splits an atomic write unit of {} bytes; \
                     this disk model persists whole units only",
                    applied.write,
                    epoch.unit_sectors * 512
                )));
            }
        }
        if !self.is_legal_in(epoch) {
            return Err(bad(
                "a FUA write of the epoch completed before a later write the state applies, \
                 so it must be applied whole (real FUA)"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// One human line saying where the crash is and what persisted, e.g. "crash in epoch
    /// 3 of 7 (entries 40..57, after the flush at entry 39): 5 of 6 writes applied, write
    /// 5 (entry 52, sector 8208, 8 sectors) torn: sectors 0-3 persisted". Never panics,
    /// even for an id that does not [`validate`](Self::validate).
    pub(crate) fn describe(&self, trace: &Trace, epochs: &[Epoch]) -> String {
        let Some(cut) = &self.pm else { return self.describe_disk(trace, epochs) };
        let disk = if self.epoch as usize == epochs.len() && self.applied.is_empty() {
            "disk: every epoch applied".to_owned()
        } else {
            self.describe_disk(trace, epochs)
        };
        let lines = match (cut.lines.len(), cut.torn) {
            (0, None) => "no pending line".to_owned(),
            (n, None) => format!("{n} pending line(s) persisted"),
            (n, Some((l, k))) => {
                format!("{n} pending line(s) persisted, line {l} torn after {k} word(s)")
            }
        };
        format!("{disk}; PM: crash after {} entries of its log, fenced lines and {lines}", cut.pos)
    }

    fn describe_disk(&self, trace: &Trace, epochs: &[Epoch]) -> String {
        let Some(epoch) = epochs.get(self.epoch as usize) else {
            return format!(
                "crash in epoch {} of {}: no such epoch (invalid id {self})",
                self.epoch,
                epochs.len()
            );
        };
        let mut s = format!(
            "crash in epoch {} of {} (entries {}..{}, ",
            self.epoch,
            epochs.len(),
            epoch.start_entry,
            epoch.end_entry(trace)
        );
        match epoch.barrier_before(trace) {
            None => s.push_str("from the start of the trace"),
            Some((at, Barrier::Flush)) => {
                let _ = write!(s, "after the flush at entry {at}");
            }
            Some((at, Barrier::Preflush)) => {
                let _ = write!(s, "after the preflush of entry {at}");
            }
            Some((at, Barrier::Fua)) => {
                let _ = write!(s, "after the FUA write at entry {at}");
            }
            Some((at, Barrier::Adn)) => {
                let _ = write!(s, "after the disk's durability notification at entry {at}");
            }
        }
        if !epoch.fua_writes.is_empty() {
            let emulated: Vec<String> = (epoch.start_entry..epoch.end_entry(trace))
                .filter(|&i| trace.entries[i].is_fua_postflush())
                .map(|i| i.to_string())
                .collect();
            if !emulated.is_empty() {
                let _ = write!(
                    s,
                    "; the flush{} at entr{} {} only emulated FUA on the recording device: \
                     no barrier on a disk with real FUA",
                    if emulated.len() == 1 { "" } else { "es" },
                    if emulated.len() == 1 { "y" } else { "ies" },
                    emulated.join(", ")
                );
            }
        }
        s.push_str("): ");
        let n = epoch.writes.len();
        if n == 0 {
            s.push_str("the epoch has no writes, everything recorded is applied");
            return s;
        }
        let _ = write!(s, "{} of {n} writes applied", self.applied.len());
        if self.applied.is_empty() {
            s.push_str(" (the state right after the barrier)");
        }
        let annotated = trace.entries.iter().any(|e| e.is_metadata());
        let what = |position: u32| -> String {
            let Some(entry_index) = epoch.writes.get(position as usize).copied() else {
                return format!("write {position} (no such write)");
            };
            let Some(entry) = trace.entries.get(entry_index) else {
                return format!("write {position} (entry {entry_index}, missing)");
            };
            // Where block tracepoints annotated the trace, name what kind of write it was.
            let noun = if entry.kind() == EntryKind::Discard {
                "discard"
            } else if entry.is_metadata() {
                "metadata write"
            } else if annotated {
                "data write"
            } else {
                "write"
            };
            let fua = if matches!(entry.kind(), EntryKind::Write { fua: true, .. }) {
                "FUA "
            } else {
                ""
            };
            format!(
                "{fua}{noun} {position} (entry {entry_index}, sector {}, {} sector{})",
                entry.sector,
                entry.nr_sectors,
                if entry.nr_sectors == 1 { "" } else { "s" }
            )
        };
        let missing: Vec<u32> =
            (0..n as u32).filter(|p| !self.applied.iter().any(|a| a.write == *p)).collect();
        if !missing.is_empty() && !self.applied.is_empty() {
            const SHOWN: usize = 4;
            s.push_str("; not applied: ");
            let names: Vec<String> = missing.iter().take(SHOWN).map(|&p| what(p)).collect();
            s.push_str(&names.join(", "));
            if missing.len() > SHOWN {
                let _ = write!(s, " and {} more", missing.len() - SHOWN);
            }
        }
        for applied in &self.applied {
            if let Some(ranges) = &applied.sectors {
                let _ = write!(s, "; {} torn: sectors ", what(applied.write));
                let _ = write_ranges(&mut s, ranges);
                s.push_str(" persisted");
            }
        }
        s
    }
}

/// Writes `ranges` as `0,2,4-6`.
fn write_ranges(out: &mut impl fmt::Write, ranges: &[(u32, u32)]) -> fmt::Result {
    for (k, &(a, b)) in ranges.iter().enumerate() {
        if k > 0 {
            out.write_char(',')?;
        }
        if a == b {
            write!(out, "{a}")?;
        } else {
            write!(out, "{a}-{b}")?;
        }
    }
    Ok(())
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_disk(f)?;
        match &self.pm {
            Some(cut) => write!(f, "+{cut}"),
            None => Ok(()),
        }
    }
}

impl StateId {
    fn fmt_disk(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}:", self.epoch)?;
        if self.applied.is_empty() {
            return f.write_char('-');
        }
        let mut k = 0;
        let mut first = true;
        while k < self.applied.len() {
            if !first {
                f.write_char(',')?;
            }
            first = false;
            let a = &self.applied[k];
            match &a.sectors {
                Some(ranges) => {
                    write!(f, "{}[", a.write)?;
                    write_ranges(f, ranges)?;
                    f.write_char(']')?;
                    k += 1;
                }
                None => {
                    // A run of whole writes with consecutive positions prints as `a-b`.
                    let mut end = k;
                    while let Some(next) = self.applied.get(end + 1) {
                        if next.sectors.is_none()
                            && Some(next.write) == self.applied[end].write.checked_add(1)
                        {
                            end += 1;
                        } else {
                            break;
                        }
                    }
                    if end == k {
                        write!(f, "{}", a.write)?;
                    } else {
                        write!(f, "{}-{}", a.write, self.applied[end].write)?;
                    }
                    k = end + 1;
                }
            }
        }
        Ok(())
    }
}

/// A strict recursive-descent parser of the id grammar:
/// `id = "e" num ":" ( "-" | item ("," item)* )`,
/// `item = num ( "-" num | "[" range ("," range)* "]" )?`, `range = num ("-" num)?`,
/// `num` = decimal digits without a superfluous leading zero.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, position: usize, reason: impl Into<String>) -> Error {
        Error::InvalidId { id: self.text.to_owned(), position, reason: reason.into() }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, what: &str) -> Result<(), Error> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(self.pos, format!("expected {what}")))
        }
    }

    fn num(&mut self, what: &str) -> Result<u32, Error> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.text[start..self.pos];
        if digits.is_empty() {
            return Err(self.error(start, format!("expected {what} (a decimal number)")));
        }
        if digits.len() > 1 && digits.starts_with('0') {
            return Err(self.error(start, format!("{what} {digits:?} has a leading zero")));
        }
        digits.parse().map_err(|_| self.error(start, format!("{what} {digits} is too large")))
    }

    fn ranges(&mut self, write: u32) -> Result<Vec<(u32, u32)>, Error> {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        loop {
            let at = self.pos;
            let a = self.num("a sector index")?;
            let b = if self.eat(b'-') { self.num("the end of a sector range")? } else { a };
            if b < a {
                return Err(self.error(at, format!("sector range {a}-{b} is reversed")));
            }
            match ranges.last_mut() {
                Some(last) if a <= last.1 => {
                    return Err(self.error(
                        at,
                        format!(
                            "sectors of write {write} must be increasing and disjoint \
                             ({a} after {})",
                            last.1
                        ),
                    ));
                }
                // Adjacent ranges merge, so that the id is canonical.
                Some(last) if u64::from(a) == u64::from(last.1) + 1 => last.1 = b,
                _ => ranges.push((a, b)),
            }
            if !self.eat(b',') {
                return Ok(ranges);
            }
        }
    }

    fn id(&mut self) -> Result<StateId, Error> {
        self.expect(b'e', "`e` followed by the epoch number")?;
        let epoch = self.num("the epoch number")?;
        self.expect(b':', "`:` after the epoch number")?;
        let mut applied: Vec<Applied> = Vec::new();
        if self.eat(b'-') {
            if self.pos != self.text.len() {
                return Err(self.error(self.pos, "nothing may follow `-` (the empty set)"));
            }
            return Ok(StateId { epoch, applied, pm: None });
        }
        loop {
            let at = self.pos;
            let first = self.num("a write position")?;
            if let Some(last) = applied.last() {
                if first <= last.write {
                    return Err(self.error(
                        at,
                        format!(
                            "write positions must be strictly increasing ({first} after {})",
                            last.write
                        ),
                    ));
                }
            }
            if self.eat(b'-') {
                let last = self.num("the end of a write range")?;
                if last < first {
                    return Err(self.error(at, format!("write range {first}-{last} is reversed")));
                }
                applied.extend((first..=last).map(Applied::whole));
            } else if self.eat(b'[') {
                let ranges = self.ranges(first)?;
                self.expect(b']', "`,` or `]` in the sector list")?;
                applied.push(Applied::torn(first, ranges));
            } else {
                applied.push(Applied::whole(first));
            }
            if self.pos == self.text.len() {
                return Ok(StateId { epoch, applied, pm: None });
            }
            self.expect(b',', "`,` between writes, or the end of the id")?;
        }
    }
}

impl FromStr for StateId {
    type Err = Error;

    /// Parses the printed form (see the module documentation). Strict: no spaces, no
    /// leading zeros, increasing positions; adjacent sector ranges are merged.
    fn from_str(s: &str) -> Result<Self, Error> {
        let Some((disk, pm)) = s.split_once('+') else {
            return Parser { text: s, pos: 0 }.id();
        };
        let mut id = Parser { text: disk, pos: 0 }.id().map_err(|e| match e {
            Error::InvalidId { position, reason, .. } => {
                Error::InvalidId { id: s.to_owned(), position, reason }
            }
            other => other,
        })?;
        let cut = pm.parse().map_err(|reason| Error::InvalidId {
            id: s.to_owned(),
            position: disk.len() + 1,
            reason,
        })?;
        id.pm = Some(cut);
        Ok(id)
    }
}

impl serde::Serialize for StateId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StateId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
