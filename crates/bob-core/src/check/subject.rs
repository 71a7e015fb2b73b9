//! The subject of checking: one recorded trace, its epochs and the workload it ran, and
//! what a state id means for it (its schedule prefix, the promises due in it).

use std::sync::Arc;

use workloads::{Observed, Workload};

use super::Error;
use crate::crash::{DiskModel, Epoch, StateId};
use crate::fs::FsConfig;
use crate::image::BaseImage;
use crate::trace::sidecar::OpSpan;
use crate::trace::{EntryKind, Trace};

/// What a recording left, before it is a [`Subject`]: fresh from a recorder
/// (`run::subject_of`) or read back from a trace directory
/// (`report::witness::load_subject`).
#[derive(Debug)]
pub struct SubjectParts {
    /// The configuration.
    pub config: FsConfig,
    /// The workload that was recorded.
    pub workload: Workload,
    /// What the workload observed.
    pub observed: Observed,
    /// The trace.
    pub trace: Trace,
    /// Op positions in the trace.
    pub spans: Vec<OpSpan>,
    /// The drain schedule it was recorded under, if known.
    pub schedule: Option<workloads::Schedule>,
    /// The base image file; a persistent-memory log ([`crate::pm`]) is looked for beside
    /// it.
    pub base_image: std::path::PathBuf,
}

/// A subject's crash states, streamed ([`Subject::crash_states`]).
pub struct CrashStates<'a> {
    /// The states, one at a time.
    pub states: Box<dyn Iterator<Item = crate::crash::CrashState> + 'a>,
    /// Distinct states of the disk's that a state cap (`Limits::max_states`) left out:
    /// when not zero, a property that held says only that no checked state broke it.
    pub left_out: usize,
}

impl Subject {
    /// The one way a recording becomes a subject: its base image opened, its
    /// persistent-memory log (if any) loaded from beside the base image, its epochs cut
    /// under `disk`.
    pub fn load(recorded: SubjectParts, disk: DiskModel) -> Result<Subject, Error> {
        let path = recorded.base_image;
        let base =
            BaseImage::open(&path).map_err(|source| Error::Io { path: path.clone(), source })?;
        let pm = crate::pm::PmTrace::load_beside(&path)
            .map_err(|e| Error::Io { path: path.clone(), source: std::io::Error::other(e) })?
            .map(Arc::new);
        let epochs = crate::crash::epochs(&recorded.trace, &disk);
        Ok(Subject {
            config: recorded.config,
            workload: recorded.workload,
            observed: recorded.observed,
            trace: Arc::new(recorded.trace),
            epochs,
            spans: recorded.spans,
            schedule: recorded.schedule,
            recording: 1,
            base: Arc::new(base),
            disk,
            pm,
        })
    }
}

/// Everything about one recorded trace that checking needs.
pub struct Subject {
    /// The configuration.
    pub config: FsConfig,
    /// The workload that was recorded.
    pub workload: Workload,
    /// What the workload observed.
    pub observed: Observed,
    /// The trace.
    pub trace: Arc<Trace>,
    /// Its epochs.
    pub epochs: Vec<Epoch>,
    /// Op positions in the trace.
    pub spans: Vec<OpSpan>,
    /// The drain schedule the trace was recorded under, if it was a property recording
    /// that knows it: state ids of this trace print with it as a prefix (`syncfs/e3:0-4`).
    pub schedule: Option<workloads::Schedule>,
    /// Which recording of its schedule the trace is (1 and up): a cell may record a
    /// schedule more than once, and the ids of a later recording's states name it
    /// (`syncfs.2/e3:0-4`) so that no id names two states.
    pub recording: usize,
    /// The base image.
    pub base: Arc<BaseImage>,
    /// The disk model the epochs (and so every state id) are cut under.
    pub disk: DiskModel,
    /// The persistent-memory region recorded beside the disk, for a design that has one
    /// ([`crate::pm`]): every state id of this trace then names its PM half.
    pub pm: Option<Arc<crate::pm::PmTrace>>,
}

impl Subject {
    /// Every crash state of this trace under `strategies` and `limits`, lazily: the
    /// disk's, and with a persistent-memory region the states naming both devices
    /// ([`crate::crash::pm_states::combined`]); and how many the state cap left out.
    pub(crate) fn crash_states<'a>(
        &'a self,
        strategies: &[crate::crash::Strategy],
        limits: &crate::crash::Limits,
    ) -> CrashStates<'a> {
        let disk = crate::crash::stream(&self.trace, &self.epochs, strategies, limits);
        // Known once the stream is built: its counting pass comes before the first state.
        let left_out = disk.truncated();
        let states: Box<dyn Iterator<Item = crate::crash::CrashState> + 'a> = match &self.pm {
            Some(pm) => Box::new(crate::crash::pm_states::combined(
                pm,
                &self.trace,
                &self.epochs,
                disk,
                limits.max_states,
            )),
            None => Box::new(disk),
        };
        CrashStates { states, left_out }
    }

    /// Cuts the trace again under another disk model (state ids change meaning with it).
    pub fn set_disk(&mut self, disk: DiskModel) {
        if disk != self.disk || self.epochs.is_empty() {
            self.epochs = crate::crash::epochs(&self.trace, &disk);
            self.disk = disk;
        }
    }

    /// Persistence-point ops (fsync, fdatasync, sync, ...) whose completion is durable in
    /// crash state `id`, and the promises of `metadata-op-durable` and `output-durable`
    /// due in it ([`Subject::returned_metadata_ops`], [`Subject::released_outputs`]). An
    /// op that issued no flush or FUA write between its begin and end marks is due once
    /// it returned (its end mark precedes the crash). Otherwise its completing barrier is
    /// the last flush or FUA write before its end mark. A flush (or a FUA write that closes an epoch, under the `barrier` FUA
    /// model) is durable once the crash epoch starts after it. Under the `real` FUA model
    /// a FUA write is durable in any later epoch, and in its own epoch in the states that
    /// apply it whole (a state that lacks it was cut before it completed, so before the
    /// op returned).
    pub fn durable_ops(&self, id: &StateId) -> Vec<usize> {
        if let Some(pm) = &self.pm {
            return self.pm_durable_ops(pm, id);
        }
        let Some(crash) = self.epochs.get(id.epoch as usize) else {
            return Vec::new();
        };
        let real_fua = self.disk.fua == crate::crash::disk::FuaModel::Real;
        let is_barrier = |i: usize| match self.trace.entries[i].kind() {
            EntryKind::Flush => !(real_fua && self.trace.entries[i].is_fua_postflush()),
            EntryKind::Write { fua, .. } => fua,
            _ => false,
        };
        let durable = |b: usize| -> bool {
            if b < crash.start_entry {
                return true;
            }
            // A FUA write inside the crash epoch (real FUA): durable if applied whole.
            crash.writes.iter().position(|&w| w == b).is_some_and(|p| {
                crash.fua_writes.contains(&(p as u32))
                    && id.applied.iter().any(|a| a.write == p as u32 && a.sectors.is_none())
            })
        };
        let crash_entry = self.crash_entry(id).unwrap_or(0);
        let promised = self.promised_ops();
        let mut out: Vec<usize> = self
            .spans
            .iter()
            .filter(|s| promised.contains(&s.index))
            .filter(|s| {
                // An op that issued no barrier of its own (xsyncfs' fsync returns at once,
                // ext4 with barrier=0) waited for nothing: its promise is due once it
                // returned, not once some earlier op's flush is durable.
                if !(s.begin_entry..s.end_entry).any(is_barrier) {
                    return s.end_entry < crash_entry;
                }
                (0..s.end_entry).rev().find(|&i| is_barrier(i)).is_some_and(durable)
            })
            .map(|s| s.index)
            .collect();
        out.extend(self.returned_metadata_ops(id));
        out.extend(self.released_outputs(id));
        out.sort_unstable();
        out
    }

    /// The persistence-point ops (indices into the workload's ops) whose promise on this
    /// configuration is durability when they return ([`crate::fs::profile`]): a point
    /// that promises nothing (NoFS' fsync, a sync on xsyncfs, whose output waits instead)
    /// is never due.
    fn promised_ops(&self) -> std::collections::BTreeSet<usize> {
        let profile = crate::fs::profile(&self.config);
        // Whether a fsync's target is a directory matters only where the two promise
        // differently (the model is replayed for it, once per call).
        let dirs_differ =
            profile.dir_fsync != profile.fsync || profile.dir_fsync != profile.fdatasync;
        let states = if dirs_differ { workloads::model_states(&self.workload) } else { Vec::new() };
        self.workload
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.is_persistence_point())
            .filter(|(k, op)| {
                // The node the op names: by its path, or the one its descriptor was
                // opened on.
                let dir = states.get(*k).is_some_and(|s| {
                    let node = match (op.paths().first(), op.fd()) {
                        (Some(p), _) => s.node(p),
                        (None, Some(fd)) => s.handles.get(fd).and_then(|id| s.nodes.get(id)),
                        (None, None) => None,
                    };
                    node.is_some_and(|n| n.kind == workloads::NodeKind::Dir)
                });
                profile.promise_of(op, dir) == crate::fs::Promise::Durable
            })
            .map(|(k, _)| k)
            .collect()
    }

    /// The entry where crash state `id` happens: its epoch's closing barrier, or the
    /// first FUA write of the epoch the state lacks (real FUA: the state was cut before it
    /// completed). Every mark before it had been made.
    fn crash_entry(&self, id: &StateId) -> Option<usize> {
        let epoch = self.epochs.get(id.epoch as usize)?;
        let applied_whole = |p: u32| id.applied.iter().any(|a| a.write == p && a.sectors.is_none());
        let first_missing_fua = epoch
            .fua_writes
            .iter()
            .filter(|&&p| !applied_whole(p))
            .map(|&p| epoch.writes[p as usize])
            .min();
        let end = epoch.end_entry(&self.trace).min(first_missing_fua.unwrap_or(usize::MAX));
        Some(end.min(self.trace.entries.len()))
    }

    /// `metadata-op-durable`: the directory ops (creat, mkdir, link, unlink, rmdir,
    /// rename) that had returned when crash state `id` happened (their end mark precedes
    /// it): each promises its own effect.
    pub(crate) fn returned_metadata_ops(&self, id: &StateId) -> Vec<usize> {
        if self.workload.property != Some(workloads::Property::MetadataOpDurable) {
            return Vec::new();
        }
        let Some(end) = self.crash_entry(id) else { return Vec::new() };
        self.spans
            .iter()
            .filter(|s| s.end_entry < end)
            .filter(|s| self.workload.ops.get(s.index).is_some_and(|o| o.kind().is_metadata_op()))
            .map(|s| s.index)
            .collect()
    }

    /// `output-durable` (and any workload with output): the output ops whose release the
    /// file system had logged ([`crate::trace::OUTPUT_PREFIX`] marks) when crash state
    /// `id` happened. Output is released in order, so the first k output ops of the
    /// workload when k release marks precede the crash.
    pub(crate) fn released_outputs(&self, id: &StateId) -> Vec<usize> {
        let Some(end) = self.crash_entry(id) else { return Vec::new() };
        let released = self.trace.entries[..end]
            .iter()
            .filter_map(|e| e.mark_text())
            .filter(|t| t.starts_with(crate::trace::OUTPUT_PREFIX))
            .count();
        let outputs =
            self.workload.ops.iter().enumerate().filter(|(_, o)| **o == workloads::Op::Output);
        outputs.take(released).map(|(i, _)| i).collect()
    }

    /// Text of the marks the recorded program had made by the time of crash state `id`:
    /// every mark before its epoch's closing barrier (a state of that epoch is what the
    /// disk may hold at its end, when all those marks had been made), except marks after a
    /// FUA write of the epoch that the state lacks (real FUA): that write was durable once
    /// it completed, so a state without it was cut before, when those marks were not made.
    pub(crate) fn acked_marks(&self, id: &StateId) -> Vec<String> {
        if let (Some(pm), Some(cut)) = (&self.pm, &id.pm) {
            // With a PM region the crash is a point in the PM log, which has a copy of
            // every mark the program made: those before it.
            return pm
                .entries
                .iter()
                .take(usize::try_from(cut.pos).unwrap_or(usize::MAX))
                .filter_map(|e| match e {
                    crate::pm::PmEntry::Mark { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect();
        }
        let Some(end) = self.crash_entry(id) else {
            return Vec::new();
        };
        self.trace.entries[..end]
            .iter()
            .filter(|e| !e.is_adn())
            .filter_map(|e| e.mark_text())
            .collect()
    }

    /// Parses and validates a state id against this trace. The id may name the trace's
    /// schedule as a prefix (`syncfs/e3:0-4`); a bare id (`e3:0-4`, as witnesses from
    /// before schedules have) means this trace's own. A prefix naming another schedule is
    /// an error: that state is a state of another recording.
    pub(crate) fn state_id(&self, text: &str) -> Result<StateId, Error> {
        let bad = |reason: String| Error::BadState { id: text.to_owned(), reason };
        let (schedule, bare) = split_schedule(text);
        if let Some(label) = schedule {
            let (name, recording) = split_recording(label);
            let named: workloads::Schedule =
                name.parse().map_err(|e: workloads::ParseScheduleError| bad(e.to_string()))?;
            let recording = recording.ok_or_else(|| {
                bad(format!("{label:?}: a recording is numbered from 2 ({name}.2)"))
            })?;
            match self.schedule {
                Some(own) if own == named && recording != self.recording => {
                    return Err(bad(format!(
                        "this trace is recording {} of the {own} drain schedule, not \
                         recording {recording}; that state replays from a witness that keeps \
                         that recording",
                        self.recording
                    )))
                }
                Some(own) if own == named => {}
                Some(own) => {
                    return Err(bad(format!(
                        "this trace was recorded under the {own} drain schedule, not {named}; \
                         a {named} state replays from a witness of that schedule"
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "this trace names no drain schedule; give the bare id {bare}"
                    )))
                }
            }
        }
        let id: StateId = bare.parse().map_err(|e: crate::crash::Error| bad(e.to_string()))?;
        id.validate(&self.epochs, &self.trace).map_err(|e| bad(e.to_string()))?;
        match (&self.pm, &id.pm) {
            (Some(pm), Some(cut)) => pm.validate(cut).map_err(|e| bad(e.to_string()))?,
            (Some(_), None) => {
                return Err(bad(
                    "this trace has a persistent-memory region: name its half too (`+p<pos>...`)"
                        .into(),
                ))
            }
            (None, Some(_)) => {
                return Err(bad("this trace has no persistent-memory region (`+p...`)".into()))
            }
            (None, None) => {}
        }
        Ok(id)
    }
}

impl Subject {
    /// [`Subject::durable_ops`] of a recording with a PM region, whose ops commit in PM:
    /// a persistence-point op is durable when the state's PM crash point is past the op's
    /// end mark (copied into the PM log) and the disk is past its last barrier.
    fn pm_durable_ops(&self, pm: &crate::pm::PmTrace, id: &StateId) -> Vec<usize> {
        let Some(cut) = &id.pm else { return Vec::new() };
        let promised = self.promised_ops();
        let disk_ok = |end: usize| {
            let barrier = (0..end).rev().find(|&i| {
                matches!(self.trace.entries[i].kind(), EntryKind::Flush)
                    || matches!(self.trace.entries[i].kind(), EntryKind::Write { fua: true, .. })
            });
            match (barrier, self.epochs.get(id.epoch as usize)) {
                (None, _) => true,
                (Some(b), Some(e)) => b < e.start_entry,
                (Some(_), None) => true,
            }
        };
        self.spans
            .iter()
            .filter(|s| promised.contains(&s.index))
            .filter(|s| {
                let end_mark = pm.entries.iter().position(|e| {
                    e.disk() as usize == s.end_entry + 1
                        && matches!(e, crate::pm::PmEntry::Mark { .. })
                });
                end_mark.is_some_and(|m| (m as u64) < cut.pos) && disk_ok(s.end_entry)
            })
            .map(|s| s.index)
            .collect()
    }

    /// The printable id of a state of this trace: prefixed with its schedule where the
    /// trace has one (`syncfs/e3:0-4`), bare otherwise.
    pub(crate) fn qualify(&self, id: &StateId) -> String {
        match self.label() {
            Some(label) => format!("{label}/{id}"),
            None => id.to_string(),
        }
    }

    /// The prefix of this trace's state ids: its schedule, and its recording number from
    /// the second on (`syncfs`, `syncfs.2`); `None` without a schedule.
    pub fn label(&self) -> Option<String> {
        self.schedule.map(|s| recording_label(s.name(), self.recording))
    }
}

/// A recording's label: the schedule's name, with the recording's number from the second
/// on (`syncfs`, `syncfs.2`).
pub(crate) fn recording_label(schedule: &str, recording: usize) -> String {
    if recording <= 1 {
        schedule.to_owned()
    } else {
        format!("{schedule}.{recording}")
    }
}

/// Splits a label (`syncfs.2`) into the schedule's name and the recording number (1
/// when none is written); `None` as the number when it is not one of 2 and up.
pub(crate) fn split_recording(label: &str) -> (&str, Option<usize>) {
    match label.rsplit_once('.') {
        Some((name, n)) => (name, n.parse().ok().filter(|&n| n >= 2)),
        None => (label, Some(1)),
    }
}

/// Splits `syncfs/e3:0-4` into its schedule prefix and the bare id.
pub(crate) fn split_schedule(text: &str) -> (Option<&str>, &str) {
    match text.split_once('/') {
        Some((schedule, bare)) => (Some(schedule), bare),
        None => (None, text),
    }
}
