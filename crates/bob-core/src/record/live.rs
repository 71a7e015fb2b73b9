//! The recording disk's live view: which sectors were written or discarded since
//! recording started, and where their current content is. Content is never held here:
//! a written run of sectors points at its payload in the log file being recorded, so
//! this map costs one small node per write however much the write carries.

use std::collections::BTreeMap;

use crate::trace::SECTOR_SIZE;

/// Where the current content of a run of sectors is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// In the log file, the run's first sector at this byte offset, the rest after it.
    Log(u64),
    /// Zeros: the run was discarded.
    Zero,
}

impl Source {
    /// The source of the sector `sectors` into the run.
    fn advance(self, sectors: u64) -> Source {
        match self {
            Source::Log(at) => Source::Log(at + sectors * SECTOR_SIZE),
            Source::Zero => Source::Zero,
        }
    }
}

/// Non-overlapping runs of sectors, by first sector: `start -> (length, source)`.
#[derive(Debug, Default)]
pub(crate) struct LiveMap {
    runs: BTreeMap<u64, (u64, Source)>,
}

impl LiveMap {
    /// Sectors `start..start + len` now come from `source`; what they came from before is
    /// cut away (runs it covered partly keep their other sectors).
    pub(crate) fn insert(&mut self, start: u64, len: u64, source: Source) {
        if len == 0 {
            return;
        }
        let end = start.saturating_add(len);
        // Runs are sorted and disjoint, so their ends are sorted too: walking back from the
        // last run starting before `end`, the overlapping ones come first.
        let overlapping: Vec<(u64, u64, Source)> = self
            .runs
            .range(..end)
            .rev()
            .take_while(|(&s, &(l, _))| s + l > start)
            .map(|(&s, &(l, src))| (s, l, src))
            .collect();
        for (s, l, src) in overlapping {
            self.runs.remove(&s);
            if s < start {
                self.runs.insert(s, (start - s, src));
            }
            if s + l > end {
                self.runs.insert(end, (s + l - end, src.advance(end - s)));
            }
        }
        self.runs.insert(start, (len, source));
    }

    /// The runs (clipped) that cover sectors of `first..end`, in sector order, as
    /// `(first sector, sector count, source)`.
    pub(crate) fn covering(&self, first: u64, end: u64) -> Vec<(u64, u64, Source)> {
        let mut out = Vec::new();
        if first >= end {
            return out;
        }
        let before = self.runs.range(..first).next_back().filter(|(&s, &(l, _))| s + l > first);
        for (&s, &(l, src)) in before.into_iter().chain(self.runs.range(first..end)) {
            let from = s.max(first);
            let to = (s + l).min(end);
            out.push((from, to - from, src.advance(from - s)));
        }
        out
    }

    /// Whether nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Number of runs held (what the map costs).
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn overwrites_split_runs() {
        let mut m = LiveMap::default();
        m.insert(10, 10, Source::Log(1000));
        m.insert(12, 2, Source::Zero);
        assert_eq!(
            m.covering(0, 100),
            vec![
                (10, 2, Source::Log(1000)),
                (12, 2, Source::Zero),
                (14, 6, Source::Log(1000 + 4 * 512)),
            ]
        );
        assert_eq!(
            m.covering(11, 15),
            vec![(11, 1, Source::Log(1512)), (12, 2, Source::Zero), (14, 1, Source::Log(3048)),]
        );
        m.insert(0, 100, Source::Log(9));
        assert_eq!(m.runs(), 1);
        assert_eq!(m.covering(50, 51), vec![(50, 1, Source::Log(9 + 50 * 512))]);
        assert!(m.covering(100, 200).is_empty() && m.covering(5, 5).is_empty());
    }

    proptest! {
        /// Against a sector-by-sector model, after any sequence of writes and discards.
        #[test]
        fn agrees_with_a_sector_map(
            ops in prop::collection::vec((0u64..64, 1u64..24, any::<bool>()), 0..40),
            (lo, hi) in (0u64..90, 0u64..90),
        ) {
            let mut m = LiveMap::default();
            let mut model: HashMap<u64, Source> = HashMap::new();
            for (i, &(start, len, zero)) in ops.iter().enumerate() {
                let base = 1_000_000 * (i as u64 + 1);
                let src = if zero { Source::Zero } else { Source::Log(base) };
                m.insert(start, len, src);
                for k in 0..len {
                    model.insert(start + k, src.advance(k));
                }
            }
            let mut seen = HashMap::new();
            let mut last_end = lo;
            for (s, n, src) in m.covering(lo, hi) {
                prop_assert!(s >= last_end && n > 0 && s + n <= hi);
                last_end = s + n;
                for k in 0..n {
                    seen.insert(s + k, src.advance(k));
                }
            }
            let expected: HashMap<u64, Source> =
                model.into_iter().filter(|(s, _)| (lo..hi).contains(s)).collect();
            prop_assert_eq!(seen, expected);
            prop_assert!(m.runs() <= 2 * ops.len() + 1);
        }
    }
}
