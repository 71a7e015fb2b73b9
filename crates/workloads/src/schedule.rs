//! Drain schedules: the kernel's other legal timings.
//!
//! One recording of a workload is one timing of the kernel: when the workload's dirty
//! data is written back, when the journal commits, what the drain waits for. bob records
//! every workload once per schedule and checks the union of their crash states. A
//! schedule only changes the workload's drain (the ops after the judged ones):
//!
//! * `sync`: today's drain: append a block to the drain file, fsync it (commits the
//!   running transaction without forcing the workload's data in data=writeback), then
//!   sync(2), which writes every file's data back before the final commit.
//! * `syncfs`: the same with syncfs(2) on the mount instead of sync(2). On ext4 this
//!   changes the writeback order: the new size of an append can commit with a still
//!   unwritten extent, before the extent conversion, so the appended block reads zeros in
//!   some crash states.
//! * `writeback-commit`: "writeback started, commit forced": sync_file_range(...,
//!   SYNC_FILE_RANGE_WRITE) on every file the workload wrote (writeback starts, nothing
//!   waits), then the drain file's append and fsync (a commit forced by an unrelated
//!   file), then sync(2).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::model::History;
use crate::op::Op;
use crate::workload::{Workload, DRAIN_FILE};

/// A drain schedule (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Append + fsync of the drain file, then sync(2).
    Sync,
    /// Append + fsync of the drain file, then syncfs(2) on the mount.
    Syncfs,
    /// Writeback started on every written file, a commit forced by the drain file's
    /// fsync, then sync(2).
    WritebackCommit,
}

/// A schedule name that is not one of [`Schedule::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown drain schedule {0:?}; expected one of: sync, syncfs, writeback-commit (or all)")]
pub struct ParseScheduleError(pub String);

impl Schedule {
    /// Every schedule, in the order bob records them (the first is the default witness's).
    pub const ALL: &'static [Schedule] =
        &[Schedule::Sync, Schedule::Syncfs, Schedule::WritebackCommit];

    /// kebab-case name (the prefix of state ids: `syncfs/e3:0-4`).
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Sync => "sync",
            Schedule::Syncfs => "syncfs",
            Schedule::WritebackCommit => "writeback-commit",
        }
    }

    /// One line on what the schedule does.
    pub fn summary(self) -> &'static str {
        match self {
            Schedule::Sync => "fsync of an unrelated file, then sync(2)",
            Schedule::Syncfs => "fsync of an unrelated file, then syncfs(2) on the mount",
            Schedule::WritebackCommit => {
                "sync_file_range(WRITE) on every written file, fsync of an unrelated file, then sync(2)"
            }
        }
    }

    /// Parses a comma-separated list (`sync,syncfs`, or `all`), keeping the order of
    /// [`Schedule::ALL`] and dropping repeats.
    pub fn parse_list(text: &str) -> Result<Vec<Schedule>, ParseScheduleError> {
        let mut set = BTreeSet::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if name == "all" {
                set.extend(Schedule::ALL.iter().copied());
            } else {
                set.insert(name.parse::<Schedule>()?);
            }
        }
        if set.is_empty() {
            return Err(ParseScheduleError(text.to_owned()));
        }
        Ok(set.into_iter().collect())
    }

    /// `w` drained by this schedule: only the drain changes (see the module docs), so the
    /// judged ops, their stamps and the model are the same under every schedule.
    pub fn apply(self, w: &Workload) -> Workload {
        let mut out = w.clone();
        match self {
            Schedule::Sync => {}
            Schedule::Syncfs => {
                let mut replaced = false;
                for op in &mut out.drain {
                    if *op == Op::Sync {
                        *op = Op::Syncfs;
                        replaced = true;
                    }
                }
                if !replaced {
                    out.drain.push(Op::Syncfs);
                }
            }
            Schedule::WritebackCommit => {
                let mut starts: Vec<Op> =
                    written_files(w).into_iter().map(|path| Op::WritebackStart { path }).collect();
                starts.append(&mut out.drain);
                out.drain = starts;
            }
        }
        out
    }
}

/// The names (after the last op) of the files whose data an op of `w.ops` writes, once
/// each, the drain file excepted.
fn written_files(w: &Workload) -> Vec<String> {
    let h = History::new(w);
    let Some(last) = h.states.last() else { return Vec::new() };
    let mut out = BTreeSet::new();
    for (k, op) in w.ops.iter().enumerate() {
        if op.data_range().is_none() {
            continue;
        }
        if let Some(Some(id)) = h.op_ids.get(k) {
            if let Some(name) = last.names_of(*id).find(|n| *n != DRAIN_FILE) {
                out.insert(name.to_owned());
            }
        }
    }
    out.into_iter().collect()
}

impl FromStr for Schedule {
    type Err = ParseScheduleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::ALL
            .iter()
            .copied()
            .find(|x| x.name() == s)
            .ok_or_else(|| ParseScheduleError(s.to_owned()))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workload_for, Params, Property};

    #[test]
    fn names_parse_and_serialize() {
        for &s in Schedule::ALL {
            assert_eq!(s.name().parse::<Schedule>().unwrap(), s);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.name()));
        }
        assert_eq!(Schedule::parse_list("all").unwrap(), Schedule::ALL);
        assert_eq!(
            Schedule::parse_list("writeback-commit,sync,sync").unwrap(),
            vec![Schedule::Sync, Schedule::WritebackCommit]
        );
        assert!(Schedule::parse_list("fsync").is_err());
        assert!(Schedule::parse_list("").is_err());
    }

    #[test]
    fn schedules_change_only_the_drain_and_model_cleanly() {
        let w = workload_for(Property::AppendThenRename, &Params::default());
        for &s in Schedule::ALL {
            let v = s.apply(&w);
            assert_eq!((&v.name, &v.setup, &v.ops), (&w.name, &w.setup, &w.ops), "{s}");
            assert!(History::new(&v).error.is_none(), "{s}: {:?}", History::new(&v).error);
        }
        assert_eq!(Schedule::Sync.apply(&w), w);
        let syncfs = Schedule::Syncfs.apply(&w);
        assert!(syncfs.drain.contains(&Op::Syncfs) && !syncfs.drain.contains(&Op::Sync));
        // The appended /A/f0 was renamed to /A/dst; /B/f5 was appended to.
        let wb = Schedule::WritebackCommit.apply(&w);
        let starts: Vec<String> = wb
            .drain
            .iter()
            .filter_map(|o| match o {
                Op::WritebackStart { path } => Some(path.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(starts, vec!["/A/dst".to_owned(), "/B/f5".to_owned()]);
        assert_eq!(wb.drain[starts.len()..], w.drain[..]);
    }
}
