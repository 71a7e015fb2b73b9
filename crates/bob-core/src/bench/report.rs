//! The benchmark's report: its figures, their summary in words, and how two verdicts
//! compare.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RECORDER_FILES;
use crate::check::Outcome;
use crate::host::Machine;

/// Where the naive pipeline's time goes, per state on average.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NaiveBreakdown {
    /// Copying the base image file whole (`std::fs::copy`).
    pub copy_ms: f64,
    /// Writing the state's sectors into the copy.
    pub write_ms: f64,
    /// [`crate::check::check_image`]: attach, recovery mount, snapshot, umount, fsck, detach.
    pub check_ms: f64,
    /// Deleting the copy.
    pub delete_ms: f64,
}

/// One run of a naive pipeline: the sparse-copy baseline (every state, or an evenly
/// spaced sample, copied sparsely), or the whole-image copy (`std::fs::copy`, a strawman
/// kept to compare with figures measured before, never the headline).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NaiveRun {
    /// States in the sample.
    pub states: usize,
    /// States per second.
    pub states_per_s: f64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Where the time goes.
    pub breakdown: NaiveBreakdown,
    /// Engine covered/s over this variant's states/s.
    pub ratio_covered: f64,
    /// Engine mounted/s over this variant's states/s.
    pub ratio_mounted: f64,
}

impl NaiveRun {
    /// A run of `states` in `seconds` at `states_per_s`, against the engine's covered and
    /// mounted states per second.
    pub fn of(
        states: usize,
        seconds: f64,
        states_per_s: f64,
        breakdown: NaiveBreakdown,
        engine_covered_per_s: f64,
        engine_mounted_per_s: f64,
    ) -> NaiveRun {
        NaiveRun {
            states,
            states_per_s,
            seconds,
            breakdown,
            ratio_covered: super::stats::ratio(engine_covered_per_s, states_per_s),
            ratio_mounted: super::stats::ratio(engine_mounted_per_s, states_per_s),
        }
    }
}

/// The engine run with one worker on a sample of the states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineSerial {
    /// States in the sample.
    pub states: usize,
    /// States mounted (after dedup).
    pub states_mounted: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Wall time per mounted state, ms.
    pub ms_per_mounted_state: f64,
    /// Where a mounted state's time went, step by step (absent in reports before it).
    #[serde(default)]
    pub steps: StepMeans,
}

/// The mean time per mounted state of each step of its check, ms, over the states of one
/// engine run that were checked (not reused from an earlier run's journal): the steps add
/// up to `total_ms`, with `other_ms` what falls between them (serving the view, the
/// verdict). A snapshot or fsck reused from a state that recovered to the same image
/// counts 0, so their means are what dedup after recovery left of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepMeans {
    /// States the means are over.
    pub states: usize,
    /// Of them, states whose tree was walked.
    pub snapshots_taken: usize,
    /// Of them, states whose read-only fsck ran.
    pub fscks_run: usize,
    /// Loop attach (as each field, see [`crate::check::StepTimes`]).
    pub attach_ms: f64,
    /// Recovery: the mount with its journal replay.
    pub recover_ms: f64,
    /// The recovered image's key.
    pub key_ms: f64,
    /// The walk of the recovered tree.
    pub snapshot_ms: f64,
    /// The unmount.
    pub unmount_ms: f64,
    /// The read-only fsck.
    pub fsck_ms: f64,
    /// Loop detach.
    pub detach_ms: f64,
    /// The rest of the check: serving the view, the verdict.
    pub other_ms: f64,
    /// The whole check.
    pub total_ms: f64,
}

impl StepMeans {
    /// The means over `steps`, one per checked state.
    pub fn of<'a>(steps: impl IntoIterator<Item = &'a crate::check::StepTimes>) -> StepMeans {
        let steps: Vec<_> = steps.into_iter().collect();
        let n = steps.len();
        let mean = |f: &dyn Fn(&crate::check::StepTimes) -> f64| {
            if n == 0 {
                0.0
            } else {
                steps.iter().map(|s| f(s)).sum::<f64>() / n as f64
            }
        };
        StepMeans {
            states: n,
            snapshots_taken: steps.iter().filter(|s| s.snapshot_ms > 0.0).count(),
            fscks_run: steps.iter().filter(|s| s.fsck_ms > 0.0).count(),
            attach_ms: mean(&|s| s.attach_ms),
            recover_ms: mean(&|s| s.recover_ms),
            key_ms: mean(&|s| s.key_ms),
            snapshot_ms: mean(&|s| s.snapshot_ms),
            unmount_ms: mean(&|s| s.unmount_ms),
            fsck_ms: mean(&|s| s.fsck_ms),
            detach_ms: mean(&|s| s.detach_ms),
            other_ms: mean(&|s| (s.total_ms - s.steps_ms()).max(0.0)),
            total_ms: mean(&|s| s.total_ms),
        }
    }
}

/// The floor and the single steps that explain the engine's cost above it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FloorBreakdown {
    /// Timed mount + umount rounds.
    pub runs: usize,
    /// Median mount + umount, ms.
    pub mount_umount_ms_median: f64,
    /// Median mount + umount of the same unchanged image served through bob's FUSE disk
    /// (a crash-state view with nothing applied, served as the engine serves states), ms.
    pub fuse_mount_umount_ms_median: f64,
    /// The configuration's read-only fsck of the unchanged image, median ms.
    pub fsck_ms: f64,
    /// Binding a free loop device to the image and unbinding it, median ms.
    pub loop_attach_detach_ms: f64,
}

/// The recorder comparison (medians of a few rounds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecorderBench {
    /// Bytes written (spread over files, then each fsynced).
    pub bytes: u64,
    /// Rounds per side.
    pub rounds: usize,
    /// Median wall time on bob's recording disk (FUSE disk + loop, recording), seconds.
    pub recording_seconds: f64,
    /// Median wall time on a plain loop device over a sparse file, seconds.
    pub plain_seconds: f64,
    /// Size of the log the recording streamed to disk (the last round), bytes.
    #[serde(default)]
    pub log_bytes: u64,
    /// How much the process's peak RSS rose above its RSS at the start of recording,
    /// through the workload, the unmount and sealing the trace (the largest of the
    /// rounds), KiB. What the recorder holds in memory; the payloads are on disk.
    #[serde(default)]
    pub recording_rss_growth_kib: u64,
}

/// Peak resident memory around the engine phase (from /proc/self/status).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// VmHWM just before the engine phase (recording and the naive pipeline included).
    pub peak_rss_before_engine_kib: u64,
    /// VmHWM after the engine ran all states. When `hwm_reset` is set the mark was reset
    /// just before, so this is the engine's own peak.
    pub peak_rss_after_engine_kib: u64,
    /// The engine's peak over every other state only (mark reset before).
    pub peak_rss_engine_half_kib: u64,
    /// States in that half.
    pub half_states: usize,
    /// Whether the kernel let bob reset the peak mark (`/proc/self/clear_refs`).
    pub hwm_reset: bool,
    /// Whether glibc's mmap threshold was pinned for the run (see [`super::run`]).
    pub malloc_pinned: bool,
}

/// The first state whose naive and engine verdicts differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// Position in the state list.
    pub index: usize,
    /// The state id.
    pub state: String,
    /// The naive pipeline's outcome and detail.
    pub naive: String,
    /// The engine's outcome and detail.
    pub engine: String,
}

/// Everything `bob bench` measures. The first nine fields are the stable keys the issue
/// names; the rest explain them. "Naive" in them is the honest baseline, the naive
/// pipeline with sparse copies (`naive_sparse`, a [`NaiveRun`]); the whole-copy strawman
/// is reported apart, as `naive_full_copy` (before, the headline keys were measured
/// against it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Naive pipeline (sparse copies): states per second.
    pub naive_states_per_s: f64,
    /// Engine: states covered (duplicates included) per second of wall time.
    pub engine_states_covered_per_s: f64,
    /// Engine: states actually mounted (after dedup) per second of wall time.
    pub engine_states_mounted_per_s: f64,
    /// Floor: mount + umount rounds per second.
    pub floor_mounts_per_s: f64,
    /// `engine_states_covered_per_s / naive_states_per_s`.
    pub ratio_covered: f64,
    /// `engine_states_mounted_per_s / naive_states_per_s`.
    pub ratio_mounted: f64,
    /// Engine wall time per mounted state over the floor's mean mount + umount time.
    pub cost_vs_floor: f64,
    /// Engine wall time per mounted state over the median mount + umount of the same
    /// image through bob's FUSE disk (`floor.fuse_mount_umount_ms_median`): the floor of
    /// the path the engine's states take. Absent in reports made before it: 0.
    #[serde(default)]
    pub cost_vs_fuse_floor: f64,
    /// Recording-disk wall time over plain-loop wall time of the write-heavy workload
    /// (0 when that phase was skipped).
    pub recorder_overhead: f64,
    /// Whether naive and engine reached the same verdict on every state.
    pub verdicts_agree: bool,

    /// The configuration.
    pub config: String,
    /// The property.
    pub property: String,
    /// The workload's multi-block size, bytes.
    pub multi_block_bytes: u64,
    /// The machine.
    pub machine: Machine,
    /// Engine workers.
    pub jobs: usize,
    /// Trace entries (writes, flushes, discards, marks).
    pub trace_entries: usize,
    /// Bytes of write data in the trace.
    pub trace_write_bytes: u64,
    /// Flush-delimited epochs.
    pub epochs: usize,
    /// States checked by both sides.
    pub states: usize,
    /// States the engine mounted (distinct contents).
    pub states_mounted: usize,
    /// Of those, states the kernel never mounted: reuse by reads gave them an earlier
    /// state's check (counted in `states_mounted`, as the cells count them). Absent in
    /// reports made before it: 0.
    #[serde(default)]
    pub states_reads_reused: usize,
    /// Engine wall time per state the kernel mounted (`states_mounted` less
    /// `states_reads_reused`), ms: the cost per mount, where `engine_ms_per_mounted_state`
    /// is the cost per distinct state checked.
    #[serde(default)]
    pub engine_ms_per_kernel_mount: f64,
    /// States the naive pipeline (sparse copies) ran: an evenly spaced sample.
    pub naive_states: usize,
    /// Naive wall time (sparse copies), seconds.
    pub naive_seconds: f64,
    /// Where the naive time goes (sparse copies).
    pub naive_breakdown: NaiveBreakdown,
    /// The naive pipeline with a sparse copy, on a sample of the states: the headline's
    /// baseline, in detail.
    pub naive_sparse: NaiveRun,
    /// The strawman: the naive pipeline copying the whole image per state.
    pub naive_full_copy: NaiveRun,
    /// Engine wall time over all states, seconds.
    pub engine_seconds: f64,
    /// Engine wall time per mounted state, ms.
    pub engine_ms_per_mounted_state: f64,
    /// Engine worker time per mounted state (wall x jobs) over the floor: the cost with
    /// the parallel speed-up taken out.
    pub cost_vs_floor_per_worker: f64,
    /// Building every state's overlay and digest once, as the engine does before it
    /// mounts anything (part of `engine_seconds`), seconds.
    pub engine_dedup_seconds: f64,
    /// The engine with one worker on the sparse-copy sample.
    pub engine_serial: EngineSerial,
    /// Floor mean mount + umount, ms.
    pub floor_ms: f64,
    /// The floor and the single steps above it.
    pub floor: FloorBreakdown,
    /// The recorder comparison, if run.
    pub recorder: Option<RecorderBench>,
    /// Peak memory around the engine.
    pub memory: MemoryReport,
    /// The 1-minute load average of the machine at the start and at the end: other work
    /// on the machine slows every phase, the ratios less than the rates.
    pub load_average: [f64; 2],
    /// The engine's outcomes by name, over all states.
    pub outcomes: BTreeMap<String, usize>,
    /// States whose verdicts differ.
    pub disagreements: usize,
    /// The first of them.
    pub first_disagreement: Option<Disagreement>,
}

impl BenchReport {
    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let mut lines = Vec::new();
        self.text_setup(&mut lines);
        self.text_speeds(&mut lines);
        self.text_serial(&mut lines);
        self.text_costs(&mut lines);
        self.text_verdicts(&mut lines);
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// What was measured, and on what machine.
    fn text_setup(&self, out: &mut Vec<String>) {
        out.push(format!(
            "bench {} / {} (multi-block {} KiB): {} states, {} distinct after dedup, {} epochs, \
             {} trace entries ({} KiB written)",
            self.config,
            self.property,
            self.multi_block_bytes >> 10,
            self.states,
            self.states_mounted,
            self.epochs,
            self.trace_entries,
            self.trace_write_bytes >> 10
        ));
        out.push(format!(
            "machine: {} cores, kernel {}, {} MiB memory; engine jobs {}",
            self.machine.cores,
            self.machine.kernel,
            self.machine.mem_total_kib >> 10,
            self.jobs
        ));
    }

    /// The naive pipeline, the engine and the mount floor, and their ratios.
    fn text_speeds(&self, out: &mut Vec<String>) {
        let nb = &self.naive_breakdown;
        out.push(format!(
            "naive:  {:8.1} states/s  (sparse copies; {} sampled states in {:.1} s; per state: \
             copy {:.1} ms, write {:.2} ms, check {:.1} ms, delete {:.1} ms)",
            self.naive_states_per_s,
            self.naive_states,
            self.naive_seconds,
            nb.copy_ms,
            nb.write_ms,
            nb.check_ms,
            nb.delete_ms
        ));
        let full = &self.naive_full_copy;
        out.push(format!(
            "naive, whole-image copy (strawman, not the headline): {:.1} states/s over {} states \
             (copy {:.1} ms, check {:.1} ms, delete {:.1} ms); engine/this: {:.2}x covered, \
             {:.2}x mounted",
            full.states_per_s,
            full.states,
            full.breakdown.copy_ms,
            full.breakdown.check_ms,
            full.breakdown.delete_ms,
            full.ratio_covered,
            full.ratio_mounted
        ));
        out.push(format!(
            "engine: {:8.1} states/s covered, {:.1} mounted/s  ({:.2} s, of which overlays and \
             digests {:.2} s; {:.1} ms per mounted state)",
            self.engine_states_covered_per_s,
            self.engine_states_mounted_per_s,
            self.engine_seconds,
            self.engine_dedup_seconds,
            self.engine_ms_per_mounted_state
        ));
        if self.states_reads_reused > 0 {
            out.push(format!(
                "  reuse by reads: {} of the {} distinct states were not mounted (an earlier \
                 state's check read no sector where they differ); {:.1} ms per state mounted",
                self.states_reads_reused, self.states_mounted, self.engine_ms_per_kernel_mount
            ));
        }
        out.push(format!(
            "floor:  {:8.1} mount+umount/s  ({:.2} ms mean, {:.2} ms median over {}; \
             over bob's FUSE disk {:.2} ms median; fsck {:.1} ms, loop attach+detach {:.2} ms)",
            self.floor_mounts_per_s,
            self.floor_ms,
            self.floor.mount_umount_ms_median,
            self.floor.runs,
            self.floor.fuse_mount_umount_ms_median,
            self.floor.fsck_ms,
            self.floor.loop_attach_detach_ms
        ));
        out.push(format!(
            "ratio engine/naive (sparse copies): {:.2}x covered, {:.2}x mounted; cost per mounted state: \
             {:.2}x floor ({:.2}x per worker), {:.2}x the floor over bob's FUSE disk",
            self.ratio_covered,
            self.ratio_mounted,
            self.cost_vs_floor,
            self.cost_vs_floor_per_worker,
            self.cost_vs_fuse_floor
        ));
    }

    /// The engine with one worker, step by step.
    fn text_serial(&self, out: &mut Vec<String>) {
        out.push(format!(
            "engine, one worker: {:.1} ms per mounted state ({} of {} sampled states mounted)",
            self.engine_serial.ms_per_mounted_state,
            self.engine_serial.states_mounted,
            self.engine_serial.states
        ));
        let st = &self.engine_serial.steps;
        out.push(format!(
            "  its steps, mean ms per mounted state: attach {:.2}, recover (mount) {:.2}, key \
             {:.2}, walk {:.2} ({} walked), unmount {:.2}, fsck {:.2} ({} run), detach {:.2}, \
             other {:.2}; total {:.2}",
            st.attach_ms,
            st.recover_ms,
            st.key_ms,
            st.snapshot_ms,
            st.snapshots_taken,
            st.unmount_ms,
            st.fsck_ms,
            st.fscks_run,
            st.detach_ms,
            st.other_ms,
            st.total_ms
        ));
    }

    /// The recorder's overhead, memory and load.
    fn text_costs(&self, out: &mut Vec<String>) {
        let m = &self.memory;
        match &self.recorder {
            Some(r) => out.push(format!(
                "recorder overhead: {:.2}x ({} MiB over {} files + fsync: recording disk {:.2} s, \
                 plain loop {:.2} s; medians of {}); recorder peak RSS +{} KiB, log {} KiB on disk",
                self.recorder_overhead,
                r.bytes >> 20,
                RECORDER_FILES,
                r.recording_seconds,
                r.plain_seconds,
                r.rounds,
                r.recording_rss_growth_kib,
                r.log_bytes >> 10
            )),
            None => out.push("recorder overhead: not measured".into()),
        }
        out.push(format!(
            "peak RSS: {} KiB before the engine; engine alone {} KiB over all {} states, \
             {} KiB over {} states{}",
            m.peak_rss_before_engine_kib,
            m.peak_rss_after_engine_kib,
            self.states,
            m.peak_rss_engine_half_kib,
            m.half_states,
            if m.hwm_reset { "" } else { " (peak mark could not be reset: process peaks)" }
        ));
        out.push(format!(
            "load average (1 min): {:.2} at the start, {:.2} at the end",
            self.load_average[0], self.load_average[1]
        ));
    }

    /// The outcomes, and whether the two pipelines' verdicts agree.
    fn text_verdicts(&self, out: &mut Vec<String>) {
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push(format!("outcomes: {}", outcomes.join(", ")));
        match &self.first_disagreement {
            None => out.push(format!("verdicts agree on all {} states", self.states)),
            Some(d) => out.push(format!(
                "VERDICTS DISAGREE on {} states; first: state {} (#{}): naive {}, engine {}",
                self.disagreements, d.state, d.index, d.naive, d.engine
            )),
        }
    }
}

/// Whether two outcomes are the same verdict: the same outcome, and for a violation the
/// same story. Mount and fsck messages name the loop device, so only their kind counts.
pub fn same_verdict(a: &Outcome, b: &Outcome) -> bool {
    a.kind() == b.kind() && (!matches!(a, Outcome::Violated { .. }) || a.detail() == b.detail())
}

pub(super) fn describe(o: &Outcome) -> String {
    if o.detail().is_empty() {
        o.name().to_owned()
    } else {
        format!("{}: {}", o.name(), o.detail())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::StepTimes;

    #[test]
    fn step_means_add_up_to_the_total_with_reused_steps_counted_as_zero() {
        let walked = StepTimes {
            attach_ms: 1.0,
            recover_ms: 4.0,
            key_ms: 0.5,
            snapshot_ms: 2.0,
            unmount_ms: 3.0,
            fsck_ms: 6.0,
            detach_ms: 0.5,
            total_ms: 18.0,
        };
        let reused = StepTimes { snapshot_ms: 0.0, fsck_ms: 0.0, total_ms: 10.0, ..walked };
        let m = StepMeans::of([&walked, &reused]);
        assert_eq!((m.states, m.snapshots_taken, m.fscks_run), (2, 1, 1));
        assert_eq!((m.snapshot_ms, m.fsck_ms, m.recover_ms), (1.0, 3.0, 4.0));
        // 18 - 17 and 10 - 9: one ms each outside the steps.
        assert_eq!(m.other_ms, 1.0);
        assert_eq!(m.total_ms, 14.0);
        let parts = m.attach_ms
            + m.recover_ms
            + m.key_ms
            + m.snapshot_ms
            + m.unmount_ms
            + m.fsck_ms
            + m.detach_ms
            + m.other_ms;
        assert!((parts - m.total_ms).abs() < 1e-9);
        assert_eq!(StepMeans::of([]), StepMeans::default());
    }
}
