//! The engine's shortcuts: each exact, each switchable off, and recorded in the documents
//! a run writes, so that a table says how it was checked.

/// The shortcuts that make checking fast, each exact and each switchable off, so that
/// `bob bench --table` can measure what it gains and a doubt about one can be ruled out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Speedups {
    /// States whose recovered images are identical but for mount stamps share the
    /// snapshot and fsck result of the first (`--no-recovered-dedup` turns it off).
    pub recovered_dedup: bool,
    /// When the read-only fsck runs (`--fsck once|always`).
    pub fsck: FsckPolicy,
    /// mkfs and the base image are made once per configuration and reused by every cell
    /// of a run (`--no-shared-setup` turns it off).
    pub shared_setup: bool,
    /// A table records the next cell's workload while it checks the current cell's
    /// states (`--no-record-ahead` turns it off). Absent in documents written before it:
    /// read as off, as those tables ran.
    #[serde(default)]
    pub record_ahead: bool,
    /// Crash-state views of a configuration that prefers it
    /// ([`crate::fs::FsConfig::prefers_cached_views`]: xfs) are served through the
    /// kernel's page cache, so that small reads (xfs_repair reads its log 1 KiB at a
    /// time) come from readahead instead of one FUSE request each (`--no-cached-views`
    /// turns it off for every configuration). Absent in older documents: off.
    #[serde(default)]
    pub cached_views: bool,
    /// The FUSE disk serving crash-state views refuses the kernel's fsyncs, which a view
    /// has nothing to do for, so that the loop driver's flushes and FUA writes during
    /// recovery and unmount are not a FUSE round trip each (`--no-flushless-views` turns
    /// it off). Absent in older documents: off.
    #[serde(default)]
    pub flushless_views: bool,
    /// A state whose bytes equal an earlier checked state's on every sector that state's
    /// check read reuses its recovery, walk and fsck, unmounted (`check::reads`;
    /// `--no-reuse-by-reads` turns it off). Absent in older documents: off.
    #[serde(default)]
    pub reuse_by_reads: bool,
    /// A mounted state whose image after unmount equals an earlier state's on every
    /// sector that state's read-only fsck read takes its fsck result (`check::reads`;
    /// with [`FsckPolicy::Once`] only); and a state whose own bytes equal an earlier
    /// state's on every sector that state's routine fsck before mounting (ext2's
    /// `e2fsck -y`) read takes its answer and its writes instead of running it
    /// (`--no-fsck-by-reads` turns both off). Absent in older documents: off.
    #[serde(default)]
    pub fsck_by_reads: bool,
    /// Reuse by reads counts, of the journal blocks ext3/ext4 recovery read, only those
    /// on jbd2's path from the journal's start to the end of its scan, not those it read
    /// ahead past it (`check::recovery_used`; `--no-recovery-used` turns it off). Absent
    /// in older documents: off.
    #[serde(default)]
    pub recovery_used: bool,
    /// With reuse by reads: a state that differs from an earlier checked state only in
    /// file data that state's walk alone read takes its mount, its classes of those
    /// sectors computed from its own bytes (`check::file_data`; ext2, ext3, ext4;
    /// `--no-patch-file-data` turns it off). Absent in older documents: off.
    #[serde(default)]
    pub patch_file_data: bool,
    /// A table checks [`crate::run::CELLS_AT_ONCE`] cells at once, each with its own
    /// workers, so that one cell's serial steps (the recordings `--recordings auto`
    /// adds after a violation, the witness's independent replay, the last few states of
    /// a schedule) leave no core idle (`--no-parallel-cells` checks one cell at a
    /// time). Absent in older documents: off.
    #[serde(default)]
    pub parallel_cells: bool,
}

impl Default for Speedups {
    fn default() -> Self {
        Speedups {
            recovered_dedup: true,
            fsck: FsckPolicy::Once,
            shared_setup: true,
            record_ahead: true,
            cached_views: true,
            flushless_views: true,
            reuse_by_reads: true,
            fsck_by_reads: true,
            recovery_used: true,
            patch_file_data: true,
            parallel_cells: true,
        }
    }
}

impl Speedups {
    /// Every shortcut off: the engine as it was before them.
    pub const NONE: Speedups = Speedups {
        recovered_dedup: false,
        fsck: FsckPolicy::Always,
        shared_setup: false,
        record_ahead: false,
        cached_views: false,
        flushless_views: false,
        reuse_by_reads: false,
        fsck_by_reads: false,
        recovery_used: false,
        patch_file_data: false,
        parallel_cells: false,
    };
}

/// When a mounted state's read-only fsck runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsckPolicy {
    /// Once per distinct recovered image; states that recover to an image already checked
    /// reuse its result (counted as `fsck_reused`).
    Once,
    /// For every mounted state.
    Always,
}
