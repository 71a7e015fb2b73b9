//! The JSON documents bob prints (`--format json`), declared in one place so that their
//! shape is written down, versioned and snapshot-tested rather than assembled where they
//! are printed. Every command's JSON is one of these types (or a type re-exported here);
//! field names are snake_case, as the documents bob has always written, and a document
//! that is bob's own carries `schema_version` ([`SCHEMA_VERSION`]).
//!
//! | command | document |
//! |---|---|
//! | `bob run` | [`Cell`] (one disk model) or an array of them |
//! | `bob table`, `bob merge` | [`Grid`] |
//! | `bob table --record-only` | [`TraceSet`] (also the set's manifest, `traces.json`) |
//! | `bob check` | [`CheckReport`] |
//! | `bob replay` | [`ReplayReport`] |
//! | `bob explain` | [`Explanation`] |
//! | `bob diff` | [`TableDiff`] |
//! | `bob report`, `bob table --html-site` | [`SiteReport`] |
//! | `bob list` | [`ListReport`] |
//! | `bob cleanup` | [`Reclaimed`] |
//! | `bob bench` | `bench::BenchReport` (declared with the benchmark, which sits above this module); [`StreamStatesReport`] with `--stream-states` |
//! | `bob import` | [`ImportReport`], or [`BlktraceReport`] with `--blktrace` |
//! | `bob explore`, `bob merge` of explore results | [`ExploreReport`] |
//! | `bob replay --recovery-crashes` | [`RecoveryReport`] |
//! | `bob log` | [`LogEntryRow`] rows (`--list`), [`crate::trace::replay_log::Answer`] (replay-log's verbs) |
//!
//! Adding a field is compatible; renaming or removing one bumps [`SCHEMA_VERSION`].
//!
//! This module sits between `report` (whose cells, tables and explanations it re-exports)
//! and `run` (whose pipelines return its types); it imports no pipeline.

use serde::{Deserialize, Serialize};

use crate::check::OutcomeKind;
pub use crate::device::registry::Reclaimed;
pub use crate::report::diff::{CellChange, DiffSide, DiffWitness, TableDiff, UnmatchedCell};
pub use crate::report::explain::{Explanation, OpPersistence};
pub use crate::report::site::SiteReport;
pub use crate::report::table::Grid;
pub use crate::report::{Cell, SCHEMA_VERSION};
use crate::trace::blktrace::{Annotation, BlockRequest};
use crate::trace::{flags, Entry, EntryKind, Trace};
pub use render::{json, plain, Format, GridDiff, NamedComparison, Render, RenderError, TABLE};
pub(crate) use render::{text_and_json, Paint, TEXT_JSON};
use workloads::ScenarioMark;

mod render;

/// `bob list`: the configurations and properties this bob knows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Every configuration, available here or not.
    pub configs: Vec<ConfigInfo>,
    /// Every property.
    pub properties: Vec<PropertyInfo>,
}

/// One configuration in [`ListReport`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigInfo {
    /// Name on the command line.
    pub name: String,
    /// One line on what it is.
    pub description: String,
    /// Kernel file-system type.
    pub fstype: String,
    /// The mkfs command line (the device is appended).
    pub mkfs: String,
    /// Mount options while the workload runs.
    pub mount_options: String,
    /// The read-only fsck command line.
    pub fsck: String,
    /// The repair ladder, one command line per step.
    pub repair: Vec<String>,
    /// Whether it can run on this kernel (its programs are not checked here).
    pub available: bool,
    /// Why it cannot run on this kernel, if it cannot (no driver, no FUSE).
    pub unavailable: Option<String>,
    /// What bob's disk offers it: flush, FUA, asynchronous durability notifications.
    pub disk: crate::fs::DiskFeatures,
}

/// One property in [`ListReport`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PropertyInfo {
    /// Name on the command line.
    pub name: String,
    /// Its family (ordering, durability, ...).
    pub family: String,
    /// One line on what it promises.
    pub summary: String,
}

impl ListReport {
    /// Every configuration and property, with availability on this kernel.
    pub fn gather() -> ListReport {
        let configs = crate::fs::every()
            .iter()
            .map(|c| {
                let here = c.runs_here();
                ConfigInfo {
                    name: c.name.into(),
                    description: c.description.into(),
                    fstype: c.fstype.into(),
                    mkfs: c.mkfs.join(" "),
                    mount_options: c.mount_options.into(),
                    fsck: c.fsck.join(" "),
                    repair: c.repair.iter().map(|s| s.text()).collect(),
                    available: here.is_ok(),
                    unavailable: here.err().map(|e| e.reason()),
                    disk: c.disk_features(),
                }
            })
            .collect();
        let properties = workloads::Property::EVERY
            .iter()
            .map(|p| PropertyInfo {
                name: p.name().into(),
                family: p.family().to_string(),
                summary: p.summary().into(),
            })
            .collect();
        ListReport { schema_version: SCHEMA_VERSION, configs, properties }
    }

    /// The human-readable listing.
    pub fn to_text(&self) -> String {
        let mut s = String::from("Configurations:\n");
        for c in &self.configs {
            let note = match (&c.unavailable, c.available) {
                (Some(why), _) => format!("  (unavailable: {why})"),
                (None, false) => "  (unavailable)".into(),
                (None, true) => String::new(),
            };
            s.push_str(&format!("  {:<16} {}{}\n", c.name, c.description, note));
        }
        s.push_str("\nDisk features (bob's recording disk, per configuration):\n");
        for c in &self.configs {
            let yes = |b: bool| if b { "yes" } else { "no" };
            let adn = c
                .disk
                .adn_requests
                .map_or("no".to_string(), |t| format!("yes, T_D = {t} write requests"));
            s.push_str(&format!(
                "  {:<16} flush {}, FUA {}, ADN {}\n",
                c.name,
                yes(c.disk.flush),
                yes(c.disk.fua),
                adn
            ));
        }
        s.push_str("\nProperties:\n");
        for p in &self.properties {
            s.push_str(&format!("  {:<27} {:<11} {}\n", p.name, p.family, p.summary));
        }
        s
    }
}

/// `bob table --record-only`: the recordings of a table saved as a trace set, which
/// `bob table --traces` checks (in shards) instead of recording; also the set's manifest
/// (`DIR/traces.json`; the layout is documented at [`crate::run::record_table`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceSet {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `uname -r` of the machine that recorded.
    pub kernel: String,
    /// bob's version.
    pub tool_version: String,
    /// Configuration names, in table order.
    pub configs: Vec<String>,
    /// Property names, in table order.
    pub properties: Vec<String>,
    /// The drain schedules asked for (each cell records those its configuration supports).
    pub schedules: Vec<String>,
    /// One entry per configuration x property.
    pub cells: Vec<RecordedCell>,
}

/// One cell of a [`TraceSet`]: its recordings, one per drain schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedCell {
    /// Configuration.
    pub config: String,
    /// Property.
    pub property: String,
    /// Why the configuration could not run on the recording machine (nothing recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Its recordings.
    pub schedules: Vec<RecordedTrace>,
}

/// One recording of a [`RecordedCell`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedTrace {
    /// The drain schedule it was recorded under.
    pub schedule: String,
    /// blake3 of the trace (`Trace::digest`): what the cells checked from it carry as
    /// `trace_digest`, and what `bob merge` compares.
    pub trace_digest: String,
    /// Entries of the log.
    pub entries: usize,
    /// Its trace directory, relative to the set.
    pub dir: String,
}

impl TraceSet {
    /// One line per recording.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for c in &self.cells {
            if let Some(why) = &c.unavailable {
                s.push_str(&format!("{} / {}: not recorded ({why})\n", c.config, c.property));
            }
            for r in &c.schedules {
                s.push_str(&format!(
                    "{} / {} [{}]: {} entries, trace {}, in {}\n",
                    c.config,
                    c.property,
                    r.schedule,
                    r.entries,
                    &r.trace_digest[..r.trace_digest.len().min(12)],
                    r.dir
                ));
            }
        }
        s
    }
}

/// `bob check`: the cell of a checked trace, and, when a state failed, what the witness
/// state was and what the user's checker said in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The cell (its `property` is the judge: `checker: CMD` or `fsck only`).
    #[serde(flatten)]
    pub cell: Cell,
    /// The witness state's description (epoch and writes applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_description: Option<String>,
    /// The checker's output in the witness state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker_output: Option<String>,
}

impl CheckReport {
    /// The cell's text, the witness state and the checker's last lines.
    pub fn to_text(&self) -> String {
        let mut s = self.cell.to_text();
        if let Some(description) = &self.witness_description {
            s.push_str(&format!("  state:   {description}\n"));
        }
        if let Some(out) = &self.checker_output {
            let lines: Vec<&str> = out.lines().collect();
            for line in &lines[lines.len().saturating_sub(5)..] {
                s.push_str(&format!("  checker> {line}\n"));
            }
        }
        s
    }
}

/// `bob replay`: which crash state was written where, what was recorded about it and,
/// with `--check`, what checking the rebuilt image found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The witness directory.
    pub witness: String,
    /// The image file written.
    pub image: String,
    /// The state's id (schedule-qualified).
    pub state: String,
    /// The drain schedule of the trace it came from.
    pub schedule: Option<String>,
    /// The state's description.
    pub description: String,
    /// The outcome the witness recorded (`unknown` for another state than its own).
    pub recorded_outcome: String,
    /// The recorded story.
    pub recorded_story: String,
    /// The witness's configuration.
    pub config: String,
    /// The witness's property, if any.
    pub property: Option<String>,
    /// The configuration's file-system type (to mount the image by hand).
    pub fstype: String,
    /// With `--check`: the outcome of the rebuilt image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeKind>,
    /// With `--check`: its story.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub story: Option<String>,
    /// With `--check`: whether it reached the recorded outcome (absent when the record
    /// names an outcome the table no longer has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduced: Option<bool>,
    /// With `--check` of a `detects-inconsistency` witness: its scenarios.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioMark>,
    /// For a design with a persistent-memory region (conquest): the PM image file
    /// written beside the disk image (`--pm-out`, default `<image>.pm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm_image: Option<String>,
}

impl ReplayReport {
    /// The outcome that decides the exit code: the replayed one, or held when the image
    /// was only written.
    pub fn verdict(&self) -> OutcomeKind {
        self.outcome.unwrap_or(OutcomeKind::Held)
    }

    /// What was written, and how to look at it.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "wrote {}: crash state {} of {} / {}\n  {}\n  recorded: {}: {}\n",
            self.image,
            self.state,
            self.config,
            self.property.as_deref().unwrap_or("-"),
            self.description,
            self.recorded_outcome,
            self.recorded_story
        );
        if let Some(pm) = &self.pm_image {
            s.push_str(&format!("  pm image: {pm}\n"));
        }
        if let Some(outcome) = self.outcome {
            s.push_str(&format!(
                "  replayed: {outcome}: {}\n",
                self.story.as_deref().unwrap_or("")
            ));
        }
        s.push_str(&self.look());
        s
    }

    /// How to look at the image by hand, by its file system type: a read-only mount
    /// that works on it (recovery needs write access, so a journaled type is mounted
    /// without it), and a copy mounted read-write to see it recovered.
    fn look(&self) -> String {
        let (fstype, image) = (self.fstype.as_str(), self.image.as_str());
        if fstype.starts_with("fuse.") {
            // A research design: served by bob's FUSE file system, not a kernel driver.
            return format!(
                "  look:     {image} is a {fstype} image: no kernel driver mounts it; \
                 --check recovers and checks it\n"
            );
        }
        let copy = format!(
            "cp --sparse=always {image} /tmp/look.img && mount -t {fstype} -o loop \
             /tmp/look.img /mnt"
        );
        match (fstype, crate::fs::norecovery_option(fstype)) {
            ("ext2", _) => format!(
                "  look:     mount -t ext2 -o loop,ro {image} /mnt   (as the crash left it; \
                 e2fsck -fy a copy first to see it repaired)\n"
            ),
            (_, Some(option)) => format!(
                "  look:     mount -t {fstype} -o loop,ro,{option} {image} /mnt   (as the \
                 crash left it, {} not replayed)\n  recovered: {copy}   (recovery writes \
                 into the copy)\n",
                if matches!(fstype, "xfs" | "btrfs") { "its log" } else { "its journal" }
            ),
            (_, None) => format!("  look:     {copy}   (recovery writes into the copy)\n"),
        }
    }
}

/// Counts of a trace's entries, as `bob import` and `bob record` report them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Entries.
    pub entries: usize,
    /// Writes (data).
    pub writes: usize,
    /// Entries with the FLUSH flag.
    pub flushes: usize,
    /// Writes with the FUA flag. An empty flush that carries it (device-mapper splits a
    /// `REQ_PREFLUSH | REQ_FUA` write into such a flush and the FUA write, and the kernel's
    /// dm-log-writes logs both) is a flush, not a FUA write.
    pub fua: usize,
    /// Discards.
    pub discards: usize,
    /// Marks.
    pub marks: usize,
    /// Writes marked as metadata.
    pub metadata: usize,
    /// The trace's sector size.
    pub sector_size: u32,
}

impl TraceSummary {
    /// Counts `trace`'s entries.
    pub fn of(trace: &Trace) -> TraceSummary {
        let count = |k: fn(&Entry) -> bool| trace.entries.iter().filter(|e| k(e)).count();
        TraceSummary {
            entries: trace.entries.len(),
            writes: count(|e| matches!(e.kind(), EntryKind::Write { .. })),
            flushes: count(|e| e.flags & flags::FLUSH != 0),
            fua: count(|e| matches!(e.kind(), EntryKind::Write { fua: true, .. })),
            discards: count(|e| e.kind() == EntryKind::Discard),
            marks: count(|e| e.kind() == EntryKind::Mark),
            metadata: count(|e| e.is_metadata() && matches!(e.kind(), EntryKind::Write { .. })),
            sector_size: trace.sector_size,
        }
    }
}

/// `bob import LOG`: what was imported, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The imported trace's counts.
    #[serde(flatten)]
    pub summary: TraceSummary,
    /// The trace directory written.
    pub out: String,
    /// Whether a base image came with it (`bob check` needs one).
    pub base_image: bool,
}

/// How many writes a block-request annotation matched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnnotationCounts {
    /// Writes matched to a request.
    pub matched_writes: usize,
    /// Writes no request covers.
    pub unmatched_writes: usize,
    /// Writes marked as metadata.
    pub metadata_writes: usize,
}

impl From<&Annotation> for AnnotationCounts {
    fn from(a: &Annotation) -> Self {
        AnnotationCounts {
            matched_writes: a.matched,
            unmatched_writes: a.unmatched,
            metadata_writes: a.metadata,
        }
    }
}

/// `bob import --blktrace`: the decoded requests, and the annotation of a trace if one
/// was given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlktraceReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The block requests.
    pub requests: Vec<BlockRequest>,
    /// What annotating the trace matched, if a trace was annotated.
    pub annotated: Option<AnnotationCounts>,
    /// Where the requests were read from (named in the text, not in the JSON).
    #[serde(skip)]
    pub source: String,
}

impl std::fmt::Display for ImportReport {
    /// What `bob import LOG` says in text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.summary;
        writeln!(
            f,
            "imported {} entries ({} writes, {} flushes, {} FUA, {} discards, {} marks) into {}",
            s.entries, s.writes, s.flushes, s.fua, s.discards, s.marks, self.out
        )?;
        if !self.base_image {
            writeln!(f, "  no base image (--base): bob log can replay it; bob check needs one")?;
        }
        Ok(())
    }
}

impl BlktraceReport {
    /// What `bob import --blktrace` says in text: a line per request, then the count of
    /// requests read from [`Self::source`] and what annotating a trace with them matched.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let t = |x: Option<u64>| x.map_or("-".to_owned(), |n| format!("{n}"));
        for r in &self.requests {
            let _ = writeln!(
                s,
                "{},{} {:<5} {:>10} + {:<5} issue {} complete {} error {}",
                r.major,
                r.minor,
                r.rwbs,
                r.sector,
                r.nr_sectors(),
                t(r.issue_ns),
                t(r.complete_ns),
                r.error
            );
        }
        let _ = writeln!(s, "{} requests from {}", self.requests.len(), self.source);
        if let Some(a) = &self.annotated {
            let _ = writeln!(
                s,
                "annotated the trace: {} writes matched ({} metadata), {} unmatched",
                a.matched_writes, a.metadata_writes, a.unmatched_writes
            );
        }
        s
    }
}

/// `bob log --list --format json`: one row per entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEntryRow {
    /// Entry index.
    pub index: usize,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub nr_sectors: u64,
    /// Raw flags.
    pub flags: u64,
    /// Flags by name (`FLUSH|FUA`, `-` for none).
    pub flag_names: String,
    /// A mark's text.
    pub mark: Option<String>,
}

impl LogEntryRow {
    /// The row of entry `index` of a log.
    pub fn of(index: usize, e: &Entry) -> LogEntryRow {
        LogEntryRow {
            index,
            sector: e.sector,
            nr_sectors: e.nr_sectors,
            flags: e.flags,
            flag_names: flags::names(e.flags),
            mark: e.mark_text(),
        }
    }
}

impl std::fmt::Display for LogEntryRow {
    /// `bob log --list` in text: index, sector, length, flags and a mark's text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {} {}", self.index, self.sector, self.nr_sectors, self.flag_names)?;
        match self.mark.as_deref() {
            Some(mark) if !mark.is_empty() => write!(f, " {mark}"),
            _ => Ok(()),
        }
    }
}

/// `bob bench --stream-states N`: crash states of one recorded trace generated and deduped
/// without mounting, and how the process's memory moved while they streamed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamStatesReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The configuration recorded.
    pub config: String,
    /// The property whose workload was recorded.
    pub property: String,
    /// The disk model the trace was cut under.
    pub disk_model: crate::crash::DiskModel,
    /// The strategies asked for, in order.
    pub strategies: Vec<String>,
    /// `--max-states`: the states asked for.
    pub states_requested: usize,
    /// States the stream gave (fewer than asked when the trace has no more).
    pub states: usize,
    /// Of those, drawn by `random`.
    pub states_random: usize,
    /// Distinct check keys (content digest and due promises): what the engine would mount.
    pub states_unique: usize,
    /// Trace entries and epochs.
    pub trace_entries: usize,
    /// Epochs of the trace under the disk model.
    pub epochs: usize,
    /// Wall time of generating, digesting and deduping every state, seconds.
    pub seconds: f64,
    /// `states / seconds`.
    pub states_per_s: f64,
    /// VmRSS before the first state, KiB.
    pub rss_kib_start: u64,
    /// VmRSS when the first tenth of the states had streamed, KiB.
    pub rss_kib_first_tenth: u64,
    /// VmRSS when the last tenth had (at the end), KiB.
    pub rss_kib_last_tenth: u64,
    /// VmHWM at the end (peak since the process started, recording included), KiB.
    pub peak_rss_kib: u64,
    /// Id digests the generator held at the end (16 bytes each, in hash sets).
    pub id_digests_held: usize,
    /// Check keys the dedup held at the end (32 bytes each, in a hash set).
    pub check_keys_held: usize,
    /// The 1-minute load average at the start and at the end.
    pub load_average: [f64; 2],
}

impl StreamStatesReport {
    /// The human-readable summary.
    pub fn to_text(&self) -> String {
        let per_state = |kib_a: u64, kib_b: u64| {
            let states = (self.states - self.states / 10).max(1) as f64;
            (kib_b as f64 - kib_a as f64) * 1024.0 / states
        };
        format!(
            "bench stream-states {} / {} ({}; strategies {}; load {:.2} -> {:.2})\n\
             trace: {} entries, {} epochs\n\
             states: {} of {} asked ({} random), {} distinct by content\n\
             {:.1} s, {:.0} states/s\n\
             rss: {} KiB at start, {} KiB after the first tenth, {} KiB after the last \
             ({:+.1} bytes per state between them); peak {} KiB\n\
             held at the end: {} id digests, {} check keys\n",
            self.config,
            self.property,
            self.disk_model,
            self.strategies.join(","),
            self.load_average[0],
            self.load_average[1],
            self.trace_entries,
            self.epochs,
            self.states,
            self.states_requested,
            self.states_random,
            self.states_unique,
            self.seconds,
            self.states_per_s,
            self.rss_kib_start,
            self.rss_kib_first_tenth,
            self.rss_kib_last_tenth,
            per_state(self.rss_kib_first_tenth, self.rss_kib_last_tenth),
            self.peak_rss_kib,
            self.id_digests_held,
            self.check_keys_held,
        )
    }
}

/// The verdict of `recovery-idempotent` on one crash state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Configuration.
    pub config: String,
    /// The crash state whose recovery was interrupted.
    pub state: String,
    /// `held` (every second recovery reached a state the oracle allows), or the worst
    /// outcome of a crash state inside recovery (`violated`, `unrecoverable`, ...).
    pub verdict: OutcomeKind,
    /// The first recovery's own outcome.
    pub first_recovery: OutcomeKind,
    /// Writes and flushes recovery issued.
    pub recovery_writes: usize,
    /// Flushes among them.
    pub recovery_flushes: usize,
    /// Crash states inside recovery, checked.
    pub states: usize,
    /// How many of them failed.
    pub failed: usize,
    /// The first failing one: its id in the recovery trace and story.
    pub first_failure: Option<String>,
}

impl RecoveryReport {
    /// One paragraph.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{} / {}: recovery-idempotent {}: recovery issued {} writes and {} flushes; {} \
             crash state(s) inside it recovered again, {} failed (the first recovery: {})\n",
            self.config,
            self.state,
            self.verdict.name().to_uppercase(),
            self.recovery_writes,
            self.recovery_flushes,
            self.states,
            self.failed,
            self.first_recovery.name()
        );
        if let Some(f) = &self.first_failure {
            s.push_str(&format!("  first: {f}\n"));
        }
        s
    }
}

/// `bob explore`: generated workloads run on configurations, their failures grouped into
/// signatures, each with a minimal witness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The bounds, in words (`seq 1; ops creat,...; persist fsync,...`).
    pub bounds: String,
    /// Which workloads: `all`, `sample K seed S`, with `shard I/N` when sharded.
    pub selection: String,
    /// Workloads run: one per generated workload and configuration.
    pub workloads: usize,
    /// Distinct generated workloads among them.
    pub distinct_workloads: usize,
    /// Wall time of the runs, over `workloads` (each record, crash states, checks and the
    /// replay confirming a failure; shrinking not included).
    pub seconds_per_workload: f64,
    /// Wall time of the runs (recorded per workload; a resumed run adds its journal's).
    pub seconds: f64,
    /// Seconds spent shrinking failing workloads to their witnesses.
    pub shrink_seconds: f64,
    /// Per configuration.
    pub configs: Vec<ExploreConfig>,
    /// Failures grouped by configuration, kinds of ops and kind of discrepancy.
    pub signatures: Vec<Signature>,
    /// Runs bob could not complete (not the file system's failures), at most the first 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ExploreError>,
    /// Whether every selected workload was run (false: a budget or an interrupt ended the
    /// run early; `--resume` continues it).
    pub complete: bool,
}

/// One configuration's share of an [`ExploreReport`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreConfig {
    /// Configuration name.
    pub config: String,
    /// The promises beyond POSIX judged on it (`fsync-persists-name`); empty: POSIX.
    pub guarantees: Vec<String>,
    /// Where its guarantee profile departs from POSIX (`sync: nothing`, `fsck accepts
    /// OB,OI`, `no symlink`: `bob_core::fs::Profile::departures`); empty: it does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<String>,
    /// Workloads run.
    pub workloads: usize,
    /// Wall time of its runs.
    pub seconds: f64,
    /// `seconds` over `workloads`.
    pub seconds_per_workload: f64,
    /// Workloads with a failing crash state.
    pub failed: usize,
    /// Workloads the file system refused to run (an op it does not support, e.g.
    /// fallocate on ext2): not checked.
    pub unsupported: usize,
    /// Crash states checked over all its workloads.
    pub states: usize,
    /// Crash states inside recovery checked (`--recovery-crashes`), each recovered again.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub recovery_states: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// What groups failures into one signature.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SignatureKey {
    /// Configuration.
    pub config: String,
    /// The kinds of the workload's ops, sorted, each once (`creat`, `fsync`).
    pub ops: Vec<String>,
    /// The kind of discrepancy (`stale-data`, `unmountable`, ...).
    pub discrepancy: SignatureDiscrepancy,
}

impl SignatureKey {
    /// A file-name form: `ext2--creat+fsync--lost-file`.
    pub(crate) fn slug(&self) -> String {
        format!("{}--{}--{}", self.config, self.ops.join("+"), self.discrepancy)
    }
}

/// The kind of discrepancy a signature groups failures by: for a violation, the kind the
/// oracle carried on its finding; otherwise what recovery or the check did. Written as
/// its kebab-case name (`stale-data`, `needs-repair`), as reports have always said it,
/// and ordered by that name, so that signatures keep the order they were listed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SignatureDiscrepancy {
    /// A promise the oracle found broken ([`workloads::DiscrepancyKind`]; `read-error`
    /// and `other` also name those outcomes).
    Oracle(workloads::DiscrepancyKind),
    /// A state recovery could not bring back as the oracle allows.
    Recovery(RecoveryDiscrepancy),
}

/// The discrepancies of recovery rather than of the recovered tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryDiscrepancy {
    /// The kernel would not mount the state and the repair ladder did not help.
    Unmountable,
    /// The state mounted only after a repair.
    NeedsRepair,
    /// The read-only fsck complained about a state whose tree held.
    FsckComplaint,
    /// Recovery or the check ran out of time.
    Timeout,
    /// A crash during recovery left a state whose second recovery the oracle does not
    /// allow (`--recovery-crashes`).
    RecoveryNotIdempotent,
}

impl SignatureDiscrepancy {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            SignatureDiscrepancy::Oracle(kind) => kind.name(),
            SignatureDiscrepancy::Recovery(RecoveryDiscrepancy::Unmountable) => "unmountable",
            SignatureDiscrepancy::Recovery(RecoveryDiscrepancy::NeedsRepair) => "needs-repair",
            SignatureDiscrepancy::Recovery(RecoveryDiscrepancy::FsckComplaint) => "fsck-complaint",
            SignatureDiscrepancy::Recovery(RecoveryDiscrepancy::Timeout) => "timeout",
            SignatureDiscrepancy::Recovery(RecoveryDiscrepancy::RecoveryNotIdempotent) => {
                "recovery-not-idempotent"
            }
        }
    }

    /// Whether it is about recovery (its reproducer also tries the states without one
    /// write, each of which must mount).
    pub(crate) fn is_recovery(self) -> bool {
        matches!(
            self,
            SignatureDiscrepancy::Recovery(
                RecoveryDiscrepancy::Unmountable
                    | RecoveryDiscrepancy::NeedsRepair
                    | RecoveryDiscrepancy::FsckComplaint
            )
        )
    }
}

impl Ord for SignatureDiscrepancy {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for SignatureDiscrepancy {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for SignatureDiscrepancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<workloads::DiscrepancyKind> for SignatureDiscrepancy {
    fn from(kind: workloads::DiscrepancyKind) -> Self {
        SignatureDiscrepancy::Oracle(kind)
    }
}

impl From<RecoveryDiscrepancy> for SignatureDiscrepancy {
    fn from(kind: RecoveryDiscrepancy) -> Self {
        SignatureDiscrepancy::Recovery(kind)
    }
}

/// One signature: how many failing workloads share its key, the first one's story, and
/// its minimal witness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// The key.
    pub key: SignatureKey,
    /// Failing workloads with this key.
    pub count: usize,
    /// The first failure's story (outcome and what the oracle found).
    pub story: String,
    /// The first workload that failed so (its file under `--out`).
    pub first_workload: String,
    /// The minimal witness.
    pub witness: SignatureWitness,
    /// Listed in `--known` (triaged: documented behaviour or already reported): reported,
    /// but not a reason to exit 1.
    #[serde(default)]
    pub known: bool,
    /// The note `--known` gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_note: Option<String>,
}

/// A signature's smallest failing workload and the crash state that shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignatureWitness {
    /// The shrunk workload's file (`bob run --workload FILE` reruns it).
    pub workload: String,
    /// Its ops, in words.
    pub ops: Vec<String>,
    /// Its story (the minimal workload's failure).
    pub story: String,
    /// The witness directory `bob replay` reads.
    pub dir: String,
    /// The crash state.
    pub state: String,
    /// The command that rebuilds and checks the crash image.
    pub replay: String,
    /// Whether an independent replay reached the same outcome when it was found.
    pub confirmed: Option<bool>,
    /// Ops dropped from the first failing workload while the signature held.
    pub dropped_ops: usize,
    /// The standalone shell reproducer (mkfs, workload, replay, check), if exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproducer: Option<String>,
}

/// A run bob could not complete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreError {
    /// Configuration.
    pub config: String,
    /// Workload name.
    pub workload: String,
    /// What failed.
    pub error: String,
}

impl ExploreReport {
    /// Signatures not listed as known: what makes `bob explore` exit 1.
    pub fn new_signatures(&self) -> usize {
        self.signatures.iter().filter(|s| !s.known).count()
    }

    /// The summary and signature table in Markdown.
    pub(crate) fn to_md(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "# bob explore\n");
        let _ = writeln!(
            out,
            "{} workload runs ({} distinct workloads; {}; {}), {:.2} s per workload, {} signature(s){}.\n",
            self.workloads,
            self.distinct_workloads,
            self.bounds,
            self.selection,
            self.seconds_per_workload,
            self.signatures.len(),
            if self.complete { "" } else { "; incomplete (resume with --resume)" }
        );
        let _ = writeln!(out, "| configuration | guarantees | workloads | s/workload | failed | unsupported | states |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
        for c in &self.configs {
            let mut g =
                if c.guarantees.is_empty() { "posix".into() } else { c.guarantees.join(",") };
            for d in &c.profile {
                g.push_str("; ");
                g.push_str(d);
            }
            let _ = writeln!(
                out,
                "| {} | {g} | {} | {:.2} | {} | {} | {} |",
                c.config, c.workloads, c.seconds_per_workload, c.failed, c.unsupported, c.states
            );
        }
        let _ = writeln!(out, "\n## Signatures\n");
        if self.signatures.is_empty() {
            let _ = writeln!(out, "None: every promise held in every crash state explored.");
        } else {
            let _ = writeln!(
                out,
                "| configuration | ops | discrepancy | count | minimal witness | story | status |"
            );
            let _ = writeln!(out, "|---|---|---|---:|---|---|---|");
            for s in &self.signatures {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | `{}` | {} | {} |",
                    s.key.config,
                    s.key.ops.join(", "),
                    s.key.discrepancy,
                    s.count,
                    s.witness.ops.join("; "),
                    s.witness.story.replace('|', "\\|"),
                    match (&s.known, &s.known_note) {
                        (true, Some(n)) => format!("known: {}", n.replace('|', "\\|")),
                        (true, None) => "known".to_owned(),
                        (false, _) => "new".to_owned(),
                    }
                );
            }
            let _ = writeln!(out);
            for s in &self.signatures {
                let _ = writeln!(out, "* `{}`: `{}`", s.key.slug(), s.witness.replay);
            }
        }
        for e in &self.errors {
            let _ = writeln!(out, "\nerror: {} / {}: {}", e.config, e.workload, e.error);
        }
        out
    }

    /// The same as one self-contained HTML page (maud escapes every interpolated string,
    /// as in the table's and the site's pages).
    pub(crate) fn to_html(&self) -> String {
        use maud::{html, DOCTYPE};
        let page = html! {
            (DOCTYPE)
            html {
                head {
                    meta charset="utf-8";
                    title { "bob explore" }
                    style { "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}" }
                }
                body {
                    h1 { "bob explore" }
                    p {
                        (format!(
                            "{} workload runs ({} distinct; {}; {}), {:.2} s per workload, {} signature(s).",
                            self.workloads,
                            self.distinct_workloads,
                            self.bounds,
                            self.selection,
                            self.seconds_per_workload,
                            self.signatures.len()
                        ))
                    }
                    table {
                        tr {
                            th { "configuration" } th { "ops" } th { "discrepancy" } th { "count" }
                            th { "minimal witness" } th { "story" } th { "replay" } th { "status" }
                        }
                        @for s in &self.signatures {
                            tr {
                                td { (s.key.config) }
                                td { (s.key.ops.join(", ")) }
                                td { (s.key.discrepancy) }
                                td { (s.count) }
                                td { code { (s.witness.ops.join("; ")) } }
                                td { (s.witness.story) }
                                td { code { (s.witness.replay) } }
                                td { @if s.known { "known" } @else { "new" } }
                            }
                        }
                    }
                }
            }
        };
        page.into_string() + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::DiskModel;

    /// A cell as `bob run` prints it, with what differs between runs fixed.
    fn cell() -> Cell {
        let mut cell = Cell::of_results("ext4-ordered", "single-block-append", &[]).0;
        cell.seconds = 1.5;
        cell
    }

    #[test]
    fn list_report_shape() {
        let report = ListReport::gather();
        let mut value = serde_json::to_value(&report).unwrap();
        // The configurations and properties grow; the shape of one entry is the schema.
        value["configs"] = serde_json::Value::Array(vec![value["configs"][0].clone()]);
        value["properties"] = serde_json::Value::Array(vec![value["properties"][0].clone()]);
        insta::assert_json_snapshot!("list", value, {
            ".configs[0].available" => "[depends on the kernel]",
        });
    }

    #[test]
    fn replay_report_shape() {
        let report = ReplayReport {
            schema_version: SCHEMA_VERSION,
            witness: "/tmp/bob-out/ext4-ordered/single-block-append".into(),
            image: "/tmp/crash.img".into(),
            state: "syncfs/e3:0-1".into(),
            schedule: Some("syncfs".into()),
            description: "epoch 3 of 5, writes 0-1 of 4".into(),
            recorded_outcome: "violated".into(),
            recorded_story: "op 1 did not persist".into(),
            config: "ext4-ordered".into(),
            property: Some("single-block-append".into()),
            fstype: "ext4".into(),
            outcome: Some(OutcomeKind::Violated),
            story: Some("op 1 did not persist".into()),
            reproduced: Some(true),
            scenarios: Vec::new(),
            pm_image: None,
        };
        insta::assert_json_snapshot!("replay", report, {
            ".witness" => "[path]", ".image" => "[path]",
        });
        insta::assert_snapshot!("replay_text", report.to_text());
    }

    #[test]
    fn check_report_shape() {
        let mut cell = cell();
        cell.config = "ext4-ordered".into();
        cell.property = "checker: ./check.sh".into();
        cell.disk_model = DiskModel::default();
        let report = CheckReport {
            cell,
            witness_description: Some("epoch 2 of 3, writes 0 of 2".into()),
            checker_output: Some("commit 1 missing\n".into()),
        };
        insta::assert_json_snapshot!("check", report, { ".seconds" => "[seconds]" });
    }

    #[test]
    fn import_report_shape() {
        let report = ImportReport {
            schema_version: SCHEMA_VERSION,
            summary: TraceSummary {
                entries: 9,
                writes: 5,
                flushes: 2,
                fua: 1,
                ..TraceSummary::default()
            },
            out: "/tmp/trace".into(),
            base_image: true,
        };
        insta::assert_json_snapshot!("import", report, { ".out" => "[path]" });
    }

    #[test]
    fn trace_set_shape() {
        let set = TraceSet {
            schema_version: SCHEMA_VERSION,
            kernel: "6.18.0".into(),
            tool_version: "0.1.0".into(),
            configs: vec!["ext4-ordered".into(), "reiserfs".into()],
            properties: vec!["append-then-rename".into()],
            schedules: vec!["sync".into()],
            cells: vec![
                RecordedCell {
                    config: "ext4-ordered".into(),
                    property: "append-then-rename".into(),
                    unavailable: None,
                    schedules: vec![RecordedTrace {
                        schedule: "sync".into(),
                        trace_digest: "ab".repeat(32),
                        entries: 42,
                        dir: "traces/ext4-ordered/append-then-rename/sync".into(),
                    }],
                },
                RecordedCell {
                    config: "reiserfs".into(),
                    property: "append-then-rename".into(),
                    unavailable: Some("removed from the kernel".into()),
                    schedules: Vec::new(),
                },
            ],
        };
        insta::assert_json_snapshot!("trace_set", set);
        insta::assert_snapshot!("trace_set_text", set.to_text());
    }

    #[test]
    fn run_cell_shape() {
        insta::assert_json_snapshot!("run_cell", cell(), { ".seconds" => "[seconds]" });
    }

    #[test]
    fn site_report_shape() {
        let report = SiteReport {
            schema_version: SCHEMA_VERSION,
            site: "bob-out/site".into(),
            index: "bob-out/site/index.html".into(),
            cells: 4,
            witnesses: 3,
            unreadable_witnesses: 0,
            diff: true,
        };
        insta::assert_json_snapshot!("site_report", report);
        insta::assert_snapshot!("site_report_text", report.to_text());
    }

    #[test]
    fn stream_states_report_shape() {
        let report = StreamStatesReport {
            schema_version: SCHEMA_VERSION,
            config: "ext4-ordered".into(),
            property: "single-block-append".into(),
            disk_model: DiskModel { atomic_write_unit: 512, fua: crate::crash::FuaModel::Real },
            strategies: vec!["request-prefix".into(), "random".into()],
            states_requested: 1000,
            states: 1000,
            states_random: 900,
            states_unique: 990,
            trace_entries: 41,
            epochs: 10,
            seconds: 2.0,
            states_per_s: 500.0,
            rss_kib_start: 9000,
            rss_kib_first_tenth: 9100,
            rss_kib_last_tenth: 9190,
            peak_rss_kib: 12000,
            id_digests_held: 1900,
            check_keys_held: 990,
            load_average: [1.0, 1.5],
        };
        insta::assert_json_snapshot!("stream_states", report);
        insta::assert_snapshot!("stream_states_text", report.to_text());
    }

    fn explore_report() -> ExploreReport {
        let key = SignatureKey {
            config: "ext2".into(),
            ops: vec!["fsync".into(), "rename".into()],
            discrepancy: workloads::DiscrepancyKind::LostFile.into(),
        };
        ExploreReport {
            schema_version: SCHEMA_VERSION,
            bounds: "seq 1; ops rename; persist fsync".into(),
            selection: "all".into(),
            workloads: 3,
            distinct_workloads: 3,
            seconds_per_workload: 2.5,
            seconds: 7.5,
            shrink_seconds: 1.0,
            configs: vec![ExploreConfig {
                config: "ext2".into(),
                guarantees: vec!["fsync-persists-name".into()],
                profile: Vec::new(),
                workloads: 3,
                seconds: 7.5,
                seconds_per_workload: 2.5,
                failed: 1,
                unsupported: 0,
                states: 57,
                recovery_states: 0,
            }],
            signatures: vec![Signature {
                story: "violated: fsync /A/bar (op 1) is durable here, but /A/bar is absent (state sync/e2:-)".into(),
                first_workload: "out/workloads/ace-s1-10.json".into(),
                witness: SignatureWitness {
                    workload: format!("out/signatures/{}/workload.json", key.slug()),
                    ops: vec!["rename /foo /A/bar".into(), "fsync /A/bar".into()],
                    story: "violated: fsync /A/bar (op 1) is durable here, but /A/bar is absent (state sync/e2:-)".into(),
                    dir: "out/runs/ext2/ace-s1-10".into(),
                    state: "sync/e2:-".into(),
                    replay: "bob replay out/runs/ext2/ace-s1-10 --state sync/e2:- --to crash.img --check".into(),
                    confirmed: Some(true),
                    dropped_ops: 0,
                    reproducer: Some(format!("out/signatures/{}/reproduce.sh", key.slug())),
                },
                key,
                count: 1,
                known: false,
                known_note: None,
            }],
            errors: vec![],
            complete: true,
        }
    }

    #[test]
    fn explore_report_shape() {
        let report = explore_report();
        insta::assert_json_snapshot!("explore", report);
        let md = report.to_md();
        assert!(md.contains("| ext2 | fsync, rename | lost-file | 1 |"), "{md}");
        assert!(md.contains(" | new |"), "{md}");
        assert_eq!(report.new_signatures(), 1);
        assert!(md.contains("ext2--fsync+rename--lost-file"), "{md}");
        let html = report.to_html();
        assert!(html.contains("<td>lost-file</td>") && html.ends_with("</html>\n"), "{html}");
        let mut hostile = report.clone();
        hostile.signatures[0].witness.story = "a <script> & \"b\"".into();
        let html = hostile.to_html();
        assert!(html.contains("a &lt;script&gt; &amp; &quot;b&quot;"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        let back: ExploreReport =
            serde_json::from_value(serde_json::to_value(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn explore_shards_merge_into_the_whole() {
        let whole = explore_report();
        let mut a = whole.clone();
        a.selection = "all, shard 1/2".into();
        a.workloads = 2;
        a.distinct_workloads = 2;
        a.seconds = 5.0;
        a.configs[0].workloads = 2;
        a.configs[0].seconds = 5.0;
        a.configs[0].states = 40;
        let mut b = a.clone();
        b.selection = "all, shard 2/2".into();
        b.workloads = 1;
        b.distinct_workloads = 1;
        b.seconds = 2.5;
        b.configs[0].workloads = 1;
        b.configs[0].seconds = 2.5;
        b.configs[0].states = 17;
        b.configs[0].failed = 0;
        b.signatures.clear();
        let merged = ExploreReport::merge(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(merged.selection, "all");
        assert_eq!(merged.workloads, whole.workloads);
        assert_eq!(merged.seconds_per_workload, whole.seconds_per_workload);
        assert_eq!(merged.configs, whole.configs);
        assert_eq!(merged.signatures, whole.signatures);
        assert!(merged.complete);
        // A shard given twice, other bounds, a missing shard.
        assert!(ExploreReport::merge(vec![a.clone(), a.clone()]).unwrap_err().contains("twice"));
        let mut other = b.clone();
        other.bounds = "seq 2".into();
        assert!(ExploreReport::merge(vec![a.clone(), other]).is_err());
        assert!(!ExploreReport::merge(vec![a]).unwrap().complete);
    }

    #[test]
    fn recovery_report_shape() {
        let r = RecoveryReport {
            schema_version: SCHEMA_VERSION,
            config: "ext4-ordered".into(),
            state: "sync/e3:0-1".into(),
            verdict: OutcomeKind::Held,
            first_recovery: OutcomeKind::Held,
            recovery_writes: 12,
            recovery_flushes: 3,
            states: 20,
            failed: 0,
            first_failure: None,
        };
        insta::assert_json_snapshot!("recovery", r);
        assert!(r.to_text().contains("recovery-idempotent HELD"), "{}", r.to_text());
    }
}
