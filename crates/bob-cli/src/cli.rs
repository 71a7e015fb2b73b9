//! Command-line syntax (clap derive): every subcommand's arguments, the value enums and
//! the `FromStr` types of values (`--shard`, sizes, strategies, schedules, names), with
//! conflicts and requirements declared to clap rather than checked by hand. Only syntax
//! and names live here; `options.rs` turns arguments into bob-core options, and
//! what depends on the machine or the trace is the library's to reject.

use std::path::PathBuf;
use std::str::FromStr;

use bob_core::crash::Strategy;
use bob_core::fs::FsConfig;
use bob_core::output::{self, Format, GridDiff, Render};
use bob_core::report::Cell;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use workloads::{Property, Schedule};

/// bob, the Block-Order Breaker: finds out what a file system really promises across a
/// crash.
#[derive(Debug, Parser)]
#[command(
    name = "bob",
    version,
    about = "bob, the Block-Order Breaker: records the block writes a file system issues while a \
             workload runs, builds every crash state a disk with a volatile write cache may \
             leave, lets the file system recover each one, and reports which atomicity, \
             ordering and durability properties fail, each failure with a crash state that \
             replays exactly.",
    long_about = None
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record a property's workload on a configuration, explore its crash states, and
    /// give the verdict (exit 0 nothing failed, 1 a violation or another failed state, 2 error).
    Run(RunArgs),
    /// Rebuild a witness's exact crash image (or another state of its trace), and check
    /// it again with --check.
    Replay(ReplayArgs),
    /// List configurations and properties.
    List(ListArgs),
    /// Run properties x configurations and print the property table.
    Table(TableArgs),
    /// Merge tables (CI matrix jobs, shards) into one.
    Merge(MergeArgs),
    /// Tell a witness's story in words: what persisted, what did not, which bytes are wrong.
    Explain(ExplainArgs),
    /// Build a static HTML site from a `bob table --out` directory: the table, a page per
    /// cell and per witness, with the trace and the crash state drawn.
    Report(ReportArgs),
    /// The cells whose verdict changed between two tables (exit 0 none, 1 some).
    Diff(DiffArgs),
    /// Release what killed bob processes left behind (mounts, loop devices, FUSE disks,
    /// dm targets, tracefs instances, scratch directories); never touches a live
    /// process's or anything bob did not make.
    Cleanup(CleanupArgs),
    /// Measure bob's engine against the naive per-state pipeline and the mount floor; with
    /// --table a whole table, with --stream-states state generation alone, with --latency
    /// the research designs' own speed.
    Bench(BenchArgs),
    /// Import a dm-log-writes log as a bob trace, or blktrace output as block-request
    /// annotations.
    Import(ImportArgs),
    /// Inspect and replay a log the way xfstests' replay-log does.
    Log(LogArgs),
    /// Record any command's block I/O on a configuration (bring your own workload).
    Record(RecordArgs),
    /// Insert a mark into the trace of the running `bob record`.
    Mark(MarkArgs),
    /// Explore and check the crash states of a recorded trace, with your own checker.
    Check(CheckArgs),
    /// Generate every workload within bounds (CrashMonkey's Ace), run each on each
    /// configuration, and group the failures into signatures with minimal witnesses
    /// (exit 0 none, 1 a signature found, 2 error).
    Explore(ExploreCmdArgs),
}

impl Command {
    /// Its `--kernel` options, for a command that can run in a virtual machine.
    pub fn vm(&self) -> Option<&VmArgs> {
        match self {
            Command::Run(a) => Some(&a.vm),
            Command::Table(a) => Some(&a.vm),
            Command::Explore(a) => Some(&a.vm),
            Command::Record(a) => Some(&a.vm),
            Command::Check(a) => Some(&a.vm),
            Command::Replay(a) => Some(&a.vm),
            Command::List(a) => Some(&a.vm),
            Command::Bench(a) => Some(&a.vm),
            _ => None,
        }
    }

    /// The directories the command writes into (its outputs and scratch), which a
    /// virtual machine shares read-write; for a file, its directory.
    pub fn written_dirs(&self) -> Vec<PathBuf> {
        let parent = |p: &PathBuf| {
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| ".".into())
        };
        let mut dirs: Vec<PathBuf> = match self {
            Command::Run(a) => {
                [Some(a.explore.out.clone()), a.save_trace.clone(), a.explore.scratch.clone()]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            Command::Table(a) => [
                Some(a.explore.out.clone()),
                a.doc.as_ref().map(parent),
                a.html_site.clone(),
                a.explore.scratch.clone(),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Command::Explore(a) => {
                [Some(a.explore.out.clone()), a.export_xfstests.clone(), a.explore.scratch.clone()]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            Command::Record(a) => {
                [Some(a.out.clone()), a.scratch.clone()].into_iter().flatten().collect()
            }
            Command::Check(a) => [Some(a.explore.out.clone()), a.explore.scratch.clone()]
                .into_iter()
                .flatten()
                .collect(),
            Command::Replay(a) => [a.to.as_ref().map(parent), a.pm_out.as_ref().map(parent)]
                .into_iter()
                .flatten()
                .collect(),
            Command::Bench(a) => {
                [a.recall.then(|| a.out.clone()), a.scratch.clone()].into_iter().flatten().collect()
            }
            _ => Vec::new(),
        };
        dirs.dedup();
        dirs
    }

    /// The argument that makes the command continue from its journal after the guest
    /// kernel crashed (`None`: it has no journal, and a crash ends it).
    pub fn resume_flag(&self) -> Option<&'static str> {
        match self {
            Command::Run(_) | Command::Explore(_) => Some("--resume"),
            Command::Table(a) if !a.record_only => Some("--resume"),
            _ => None,
        }
    }

    /// Its output directory (`--out`), where a command has one: with several kernels,
    /// each kernel's run writes below it.
    pub fn out_dir(&self) -> Option<&PathBuf> {
        match self {
            Command::Run(a) => Some(&a.explore.out),
            Command::Table(a) => Some(&a.explore.out),
            Command::Explore(a) => Some(&a.explore.out),
            Command::Record(a) => Some(&a.out),
            Command::Check(a) => Some(&a.explore.out),
            Command::Bench(a) if a.recall => Some(&a.out),
            _ => None,
        }
    }

    /// Whether the command binds loop devices or mounts (and so first reclaims what dead
    /// bob processes left).
    pub fn creates_resources(&self) -> bool {
        match self {
            Command::Run(_) | Command::Table(_) | Command::Bench(_) | Command::Record(_) => true,
            Command::Check(_) => true,
            Command::Explore(a) => !a.list,
            Command::Replay(a) => a.check || a.recovery_crashes,
            _ => false,
        }
    }

    /// `--jobs` where the command takes it and it was given.
    pub fn jobs(&self) -> Option<usize> {
        match self {
            Command::Run(a) => a.explore.jobs,
            Command::Table(a) => a.explore.jobs,
            Command::Explore(a) => a.explore.jobs,
            Command::Check(a) => a.explore.jobs,
            Command::Bench(a) => a.jobs,
            _ => None,
        }
    }
}

/// A count of crash states (`--max-states`): at least 1, as none would check nothing and
/// still print a verdict.
fn at_least_one_state(s: &str) -> Result<usize, String> {
    match s.parse::<usize>().map_err(|e| e.to_string())? {
        0 => Err("0 crash states would check nothing and still print a verdict; give 1 or more \
                  (leave the flag out for no bound)"
            .into()),
        n => Ok(n),
    }
}

/// `--jobs`: at least 1 worker (the limit on open files is checked before the command
/// starts, `crate::limits`).
fn at_least_one_job(s: &str) -> Result<usize, String> {
    match s.parse::<usize>().map_err(|e| e.to_string())? {
        0 => Err("0 workers would check nothing; give 1 or more (leave the flag out for \
                  twice the cores)"
            .into()),
        n => Ok(n),
    }
}

/// A time limit in seconds: at least 1, as 0 kills every step at once and reports a
/// timeout the file system never had.
fn at_least_one_second(s: &str) -> Result<u64, String> {
    match s.parse::<u64>().map_err(|e| e.to_string())? {
        0 => Err("0 s would kill every step at once and report a timeout the file system \
                  never had; give 1 or more seconds"
            .into()),
        n => Ok(n),
    }
}

/// `--kernel` and the virtual machine's options, on every command that mounts or lists
/// what the kernel has.
#[derive(Debug, Default, Args)]
pub struct VmArgs {
    /// The kernel to check on: host (this machine's, the default), debian:6.1 or
    /// debian:6.12 (Debian's kernel packages, booted under qemu), uml:6.1, uml:6.12 or
    /// uml:7.2 (Debian's user-mode Linux kernels, run as programs: no virtualisation),
    /// all fetched into bob's kernel cache on first use, or the path of a kernel image
    /// (a bzImage, or a user-mode Linux `linux` binary) with --modules. Several,
    /// comma-separated, run in turn, each with its own --out below the given one.
    #[arg(long, value_delimiter = ',', default_value = "host", value_name = "SPEC[,SPEC]")]
    pub kernel: Vec<String>,
    /// The modules directory of a --kernel image (lib/modules/RELEASE after `make
    /// modules_install`).
    #[arg(long, value_name = "DIR")]
    pub modules: Option<PathBuf>,
    /// The virtual machine's CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub vm_cpus: u32,
    /// The virtual machine's memory, as qemu's -m takes it (4G, 2048M).
    #[arg(long, default_value = "4G")]
    pub vm_memory: String,
    /// How qemu runs the guest: auto (KVM where a probe boot of the kernel works, else
    /// emulation), kvm, or tcg (emulation: works everywhere, kernel work 20-35x slower).
    #[arg(long, value_enum, default_value_t = AccelArg::Auto)]
    pub vm_accel: AccelArg,
    /// Extra options for the guest kernel's command line (repeat for several), after
    /// bob's own: `--vm-append seccomp=off` on a user-mode Linux kernel, for example.
    #[arg(long, value_name = "OPTION")]
    pub vm_append: Vec<String>,
    /// Guests run at once by `bob table` on a kernel other than the host's: the table is
    /// recorded in one, then each guest checks a shard of every cell's states, and the
    /// shards are merged; `bob bench` runs its benchmark in that many guests at once and
    /// reports what they deliver together. Default: one per core for a user-mode Linux
    /// kernel (a UML guest has one CPU), one for a qemu guest (which has --vm-cpus).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub vm_guests: Option<u32>,
}

impl VmArgs {
    /// Whether the command runs here, on this machine's kernel alone.
    pub fn is_host(&self) -> bool {
        self.kernel.iter().all(|k| k == "host")
    }
}

/// `--vm-accel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum AccelArg {
    /// KVM where it boots the kernel, else emulation.
    #[default]
    Auto,
    /// KVM.
    Kvm,
    /// Emulation (TCG).
    Tcg,
}

impl From<AccelArg> for bob_core::vm::Accel {
    fn from(a: AccelArg) -> Self {
        match a {
            AccelArg::Auto => bob_core::vm::Accel::Auto,
            AccelArg::Kvm => bob_core::vm::Accel::Kvm,
            AccelArg::Tcg => bob_core::vm::Accel::Tcg,
        }
    }
}

/// The command-line flags of [`VmArgs`], which the guest's command line leaves out.
pub const VM_FLAGS: [&str; 7] = [
    "--kernel",
    "--modules",
    "--vm-cpus",
    "--vm-memory",
    "--vm-accel",
    "--vm-append",
    "--vm-guests",
];

/// `--format`'s parser: offers `formats` (what the command's documents render,
/// `Render::FORMATS`) and no other, so that clap refuses the rest as a usage error.
fn formats(formats: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(
        formats.iter().map(|f| PossibleValue::new(f.name()).help(f.summary())),
    )
    .map(|name| name.parse::<Format>().expect("clap passes only the names it offered"))
}

/// Options shared by commands that explore crash states.
#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// Crash-state strategies, comma-separated (request-prefix, block-prefix,
    /// single-request, all-but-one, torn, persistence-points, exhaustive, random; or
    /// `original`, `default`).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub strategy: Vec<StrategySet>,
    /// At most this many crash states per cell and drain schedule (spread over epochs; at
    /// least 1).
    #[arg(long, value_parser = at_least_one_state)]
    pub max_states: Option<usize>,
    /// Seed for sampled strategies.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Parallel workers (default: twice the number of cores; see docs/performance.md).
    #[arg(long, short = 'j', value_parser = at_least_one_job)]
    pub jobs: Option<usize>,
    /// Timeout for each recovery step (mount, repairing fsck), in seconds (a host's: in a
    /// guest under emulation every step may take 20 times as long; at least 1).
    #[arg(long, default_value_t = 30, value_parser = at_least_one_second)]
    pub recovery_timeout: u64,
    /// Directory for witnesses.
    #[arg(long, default_value = "bob-out")]
    pub out: PathBuf,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// The simulated disk's atomic write unit in bytes: a write persists any subset of the
    /// aligned units it touches, each whole or not at all. Powers of two from 512 (a 512n
    /// disk, the BOB study's model) to the file system's block size (4096: 4Kn and 512e
    /// disks, NVMe). Several, comma-separated (512,4096), judge every cell under each.
    #[arg(long, default_value = "4096", value_name = "BYTES[,BYTES]")]
    pub atomic_write_unit: bob_core::crash::AtomicWriteUnits,
    /// What a FUA write means: `real` (durable when it completes, alone) or `barrier`
    /// (write + flush, as bob and CrashMonkey treated it before).
    #[arg(long, value_enum, default_value_t = FuaArg::Real)]
    pub fua: FuaArg,
    /// Mount and snapshot every state even when an earlier one recovered to the same
    /// image (the verdict is always judged afresh; this only repeats the work).
    #[arg(long)]
    pub no_recovered_dedup: bool,
    /// When the read-only fsck runs: `once` per distinct recovered image, or `always`,
    /// for every mounted state.
    #[arg(long, value_enum, default_value_t = FsckArg::Once)]
    pub fsck: FsckArg,
    /// Make the file system and base image anew for every cell, instead of once per
    /// configuration and run.
    #[arg(long)]
    pub no_shared_setup: bool,
    /// In a table, record each cell's workload only when the cell before it is checked,
    /// instead of while its states are checked.
    #[arg(long)]
    pub no_record_ahead: bool,
    /// Serve every configuration's crash states to the loop driver with direct I/O (by
    /// default xfs's go through the page cache, so that xfs_repair's 1 KiB log reads
    /// come from readahead; every read then reaches bob as its own request).
    #[arg(long)]
    pub no_cached_views: bool,
    /// Pass the kernel's flushes of crash-state views to bob (a FUSE round trip each)
    /// instead of refusing them once: a view has no cache to flush.
    #[arg(long)]
    pub no_flushless_views: bool,
    /// Mount every distinct state, even one whose bytes equal an earlier state's on every
    /// sector that state's recovery, walk and fsck read (which then would be the same).
    #[arg(long)]
    pub no_reuse_by_reads: bool,
    /// Run the read-only fsck of every distinct recovered image, even one whose bytes
    /// equal an earlier image's on every sector that image's fsck read; and the routine
    /// fsck before mounting (ext2's e2fsck -y) of every distinct state, likewise.
    #[arg(long)]
    pub no_fsck_by_reads: bool,
    /// Count every journal block ext3/ext4 recovery read as read by it, even those jbd2
    /// read ahead past the end of its scan and never used (reuse by reads then needs
    /// states to agree on them too).
    #[arg(long)]
    pub no_recovery_used: bool,
    /// Mount every state that differs from an earlier checked state in file data, even
    /// where only that state's walk read the data (ext2, ext3, ext4), instead of taking
    /// its mount and reading those sectors from the state's own bytes.
    #[arg(long)]
    pub no_patch_file_data: bool,
    /// In a table, check one cell at a time instead of two at once (each with its own
    /// `--jobs` workers).
    #[arg(long)]
    pub no_parallel_cells: bool,
}

impl ExploreArgs {
    /// Every option at its default, as a command line without any of them gives it
    /// (`bob bench --table` runs its tables so).
    pub fn defaults() -> ExploreArgs {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            explore: ExploreArgs,
        }
        Only::parse_from(["bob"]).explore
    }

    /// The engine shortcuts these flags leave on.
    pub fn speedups(&self) -> bob_core::check::Speedups {
        bob_core::check::Speedups {
            recovered_dedup: !self.no_recovered_dedup,
            fsck: match self.fsck {
                FsckArg::Once => bob_core::check::FsckPolicy::Once,
                FsckArg::Always => bob_core::check::FsckPolicy::Always,
            },
            shared_setup: !self.no_shared_setup,
            record_ahead: !self.no_record_ahead,
            cached_views: !self.no_cached_views,
            flushless_views: !self.no_flushless_views,
            reuse_by_reads: !self.no_reuse_by_reads,
            fsck_by_reads: !self.no_fsck_by_reads,
            recovery_used: !self.no_recovery_used,
            patch_file_data: !self.no_patch_file_data,
            parallel_cells: !self.no_parallel_cells,
        }
    }
}

/// `--fsck`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FsckArg {
    /// Once per distinct recovered image; other states reuse its result.
    Once,
    /// For every mounted state.
    Always,
}

/// Options of the commands that run property cells (`bob run`, `bob table`): a shard of
/// each cell's states, and resuming an interrupted run. `bob check` has neither: it runs
/// one trace whole.
#[derive(Debug, Default, Args)]
pub struct CellArgs {
    /// Check only shard I of N of each cell's crash states (1-based, e.g. 2/4); merge the
    /// results with `bob merge`. Every shard must split the same recordings, so this
    /// needs --traces (or, for `bob run`, --trace).
    #[arg(long)]
    pub shard: Option<Shard>,
    /// Continue an interrupted run: reuse its recorded trace and every verdict already
    /// journaled under --out (and, for `bob table`, every finished cell).
    #[arg(long)]
    pub resume: bool,
    /// How many times to record each drain schedule: auto (once, and 3 times in all for
    /// a schedule whose first recording shows a violation) or a number. A cell's states
    /// are the union of every recording's (a second or later recording checked until its
    /// first violation, all that k needs), and a schedule violated in some of its
    /// recordings but not all is marked racy (`violated in 1 of 3 recordings: racy`),
    /// which `bob diff` reports as racy, not as a change. Cells checked from saved traces
    /// (--trace, --traces) use the recordings saved.
    #[arg(long, default_value = "auto", value_name = "auto|N")]
    pub recordings: bob_core::run::Recordings,
    /// Read, and add this run's recordings to, a flip history: per cell, schedule, disk
    /// model and kernel, how many recordings earlier runs made and how many of them were
    /// violated (created if missing). Under --recordings auto, a schedule it shows
    /// flipping (violated in some recordings, not in others) is recorded from the start as
    /// many times as its rate needs for the race to show with 99% confidence (at most 20),
    /// and on the kernel it flipped on its cell is marked racy even when this run's
    /// recordings agree, so `bob diff` reports it as racy, not as a change.
    #[arg(long, value_name = "FILE")]
    pub flip_history: Option<PathBuf>,
}

/// `--fua`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FuaArg {
    /// A FUA write is durable when it completes; it makes nothing else durable.
    Real,
    /// A FUA write is a write followed by a flush.
    Barrier,
}

impl From<FuaArg> for bob_core::crash::FuaModel {
    fn from(f: FuaArg) -> Self {
        match f {
            FuaArg::Real => bob_core::crash::FuaModel::Real,
            FuaArg::Barrier => bob_core::crash::FuaModel::Barrier,
        }
    }
}

/// `bob run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Configuration (see `bob list`).
    #[arg(long = "fs", value_parser = parse_config)]
    pub fs: FsConfig,
    /// Property (see `bob list`).
    #[arg(long, required_unless_present = "workload")]
    pub property: Option<Property>,
    /// Record this workload file instead of a property's (JSON, as `bob explore` writes
    /// them: name, setup, ops, drain); every durability promise of its ops is judged.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["property", "traces"])]
    pub workload: Option<PathBuf>,
    /// Record on this free loop device instead of taking one.
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Accept a --device that is not a loop device (where a backend can use it).
    #[arg(long)]
    pub force: bool,
    /// Recording backend.
    #[arg(long, value_enum, default_value_t = Backend::Fuse)]
    pub backend: Backend,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(<[Cell]>::FORMATS))]
    pub format: Format,
    /// Check this recorded trace directory (from --save-trace) instead of recording: one
    /// trace directory, or one holding a directory per drain schedule.
    #[arg(long, conflicts_with = "device")]
    pub trace: Option<PathBuf>,
    /// Check this cell's recordings in a trace set (from `bob table --record-only`)
    /// instead of recording.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["device", "trace", "save_trace"])]
    pub traces: Option<PathBuf>,
    /// Save the recorded trace directory here (log, sidecar, base image); with several
    /// drain schedules, one directory per schedule below it (`DIR/syncfs`, ...).
    #[arg(long)]
    pub save_trace: Option<PathBuf>,
    /// Drain schedules to record the workload under, comma-separated: sync, syncfs,
    /// writeback-commit, or all. Each is its own recording; the states of all are checked
    /// and each cross names the schedule that produced it.
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub schedules: ScheduleList,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
    /// Sharding and resuming.
    #[command(flatten)]
    pub cell: CellArgs,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// The operation set `bob explore`'s bounds start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OpSet {
    /// Ace's operations and fallocate modes.
    Ace,
    /// The operations and fallocate modes beyond Ace's.
    BeyondAce,
    /// Both.
    All,
}

/// `bob explore`.
#[derive(Debug, Args)]
pub struct ExploreCmdArgs {
    /// Configurations, comma-separated.
    #[arg(long = "fs", value_delimiter = ',', value_parser = parse_config, required = true)]
    pub fs: Vec<FsConfig>,
    /// Core operations per workload (Ace's seq-1, seq-2, seq-3).
    #[arg(long, default_value_t = 1)]
    pub seq: usize,
    /// The operation set whose bounds start: `ace` (Ace's operations and fallocate
    /// modes), `beyond-ace` (reflink, copy and dedupe, renameat2's flags, O_TMPFILE +
    /// linkat, chmod/chown/utimensat, fallocate collapse/insert/unshare) or `all`.
    /// `--ops` and `--falloc-modes` narrow it further.
    #[arg(long, value_enum, default_value_t = OpSet::Ace)]
    pub op_set: OpSet,
    /// Core operations, comma-separated (default the `--op-set`'s; Ace's: creat, mkdir,
    /// falloc, write, dwrite, mmapwrite, link, symlink, unlink, rename, truncate,
    /// setxattr, removexattr; beyond them: clone, clone-range, copy-range, dedupe-range,
    /// rename-exchange, rename-noreplace, rename-whiteout, tmpfile, chmod, chown, utimes).
    #[arg(long, value_delimiter = ',')]
    pub ops: Vec<workloads::enumerate::CoreOp>,
    /// Persistence points after each op: fsync, fdatasync, sync, none (default all; never
    /// none after the last op).
    #[arg(long, value_delimiter = ',')]
    pub persist: Vec<workloads::enumerate::Persist>,
    /// First files (default /foo,/A/foo).
    #[arg(long, value_delimiter = ',')]
    pub files: Vec<String>,
    /// Second files: link, symlink and rename targets (default /bar,/A/bar).
    #[arg(long, value_delimiter = ',')]
    pub second_files: Vec<String>,
    /// Directories made and renamed (default /A).
    #[arg(long, value_delimiter = ',')]
    pub dirs: Vec<String>,
    /// Directory rename targets (default /B).
    #[arg(long, value_delimiter = ',')]
    pub second_dirs: Vec<String>,
    /// Ranges of buffered writes and fallocate: append, overlap-unaligned,
    /// overlap-extend, overlap-aligned (default the first three).
    #[arg(long, value_delimiter = ',')]
    pub ranges: Vec<workloads::enumerate::Range>,
    /// Ranges of O_DIRECT and mmap writes (default append, overlap-aligned).
    #[arg(long, value_delimiter = ',')]
    pub direct_ranges: Vec<workloads::enumerate::Range>,
    /// fallocate modes: zero-range, zero-range-keep-size, punch-hole, keep-size, default,
    /// collapse-range, insert-range, unshare-range (default the `--op-set`'s).
    #[arg(long, value_delimiter = ',')]
    pub falloc_modes: Vec<workloads::FallocMode>,
    /// truncate sizes: aligned, unaligned (default both).
    #[arg(long, value_delimiter = ',')]
    pub truncate: Vec<workloads::enumerate::TruncateTo>,
    /// Ace's nested file set: adds /A/C, /A/C/foo, /A/C/bar.
    #[arg(long)]
    pub nested: bool,
    /// Where the files and directories an op needs are made: setup (default: the synced
    /// base image, so every crash state starts from durable files) or ops (as Ace places
    /// its dependency ops: recorded, unsynced, just before the op; names get `-deps`).
    #[arg(long, value_name = "setup|ops", default_value = "setup", value_parser = ["setup", "ops"])]
    pub deps: String,
    /// Promises the oracle holds each workload to: posix (default), documented (each
    /// file system's documented stronger guarantees), or named ones
    /// (fsync-persists-name, creatable-after-recovery), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "posix")]
    pub guarantee: Vec<String>,
    /// Run K workloads drawn at random (with --seed) instead of all.
    #[arg(long, value_name = "K")]
    pub sample: Option<usize>,
    /// Run only workloads whose index is I-1 modulo N (1-based I, e.g. 2/4).
    #[arg(long)]
    pub shard: Option<Shard>,
    /// Start no new workload after this long (90s, 30m, 2h); --resume continues.
    #[arg(long, value_name = "TIME", value_parser = parse_budget)]
    pub budget: Option<std::time::Duration>,
    /// Continue the exploration journaled in --out.
    #[arg(long)]
    pub resume: bool,
    /// Triaged signatures, one per line: SLUG [note] (`#` comments). They are reported
    /// but do not make the exit code 1: CI fails only on new ones.
    #[arg(long, value_name = "FILE")]
    pub known: Option<PathBuf>,
    /// Keep each signature's first failing workload as its witness instead of shrinking.
    #[arg(long)]
    pub no_shrink: bool,
    /// After each run that held, crash during recovery (recovery-idempotent): interrupt
    /// the recovery of up to K crash states right after a barrier whose recovery writes
    /// something, and recover each crash state inside it again (journaling
    /// configurations: ext3, ext4, xfs, btrfs).
    #[arg(long, value_name = "K")]
    pub recovery_crashes: Option<usize>,
    /// At most this many crash states inside each interrupted recovery.
    #[arg(long, value_name = "N", default_value_t = 8, requires = "recovery_crashes", value_parser = at_least_one_state)]
    pub recovery_max_states: usize,
    /// Print the selected workloads (one line each) and their number; run nothing.
    #[arg(long)]
    pub list: bool,
    /// Also write an xfstests generic test per signature into DIR/tests/generic/.
    #[arg(long, value_name = "DIR")]
    pub export_xfstests: Option<PathBuf>,
    /// Drain schedules to record each workload under (default sync: one recording each).
    #[arg(long, default_value = "sync", value_name = "LIST")]
    pub schedules: ScheduleList,
    /// Output format of the signature table.
    #[arg(long, default_value_t = Format::Md, value_parser = formats(output::ExploreReport::FORMATS))]
    pub format: Format,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// Parses `90s`, `30m`, `2h` or plain seconds.
fn parse_budget(s: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("{s:?}: expected a time such as 90s, 30m or 2h");
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(bad()),
    };
    if secs == 0 {
        return Err(bad());
    }
    Ok(std::time::Duration::from_secs(secs))
}

/// `bob table`.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// Configurations, comma-separated (default: all).
    #[arg(long = "fs", value_delimiter = ',', value_parser = parse_config)]
    pub fs: Vec<FsConfig>,
    /// Properties, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub property: Vec<Property>,
    /// Output format.
    #[arg(long, default_value_t = Format::Md, value_parser = formats(output::Grid::FORMATS))]
    pub format: Format,
    /// Also write the results document (the table, the command that regenerates it, and
    /// each failure's story) to this Markdown file.
    #[arg(long)]
    pub doc: Option<PathBuf>,
    /// Drain schedules to record the workload under, comma-separated: sync, syncfs,
    /// writeback-commit, or all. Each is its own recording; the states of all are checked
    /// and each cross names the schedule that produced it.
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub schedules: ScheduleList,
    /// Only record: save every cell's traces (one per drain schedule) as a trace set in
    /// --out (DIR/traces.json, DIR/traces/CONFIG/PROPERTY/SCHEDULE/), checking no state;
    /// check it, whole or in shards, with --traces DIR.
    #[arg(long, conflicts_with_all = ["traces", "shard", "resume", "doc"])]
    pub record_only: bool,
    /// Check the recordings of this trace set (from --record-only) instead of recording
    /// each cell, so that every shard splits the same traces; without --fs and --property,
    /// the set's configurations and properties.
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// Also build the static HTML site of the run into this directory (what `bob report
    /// OUT --to DIR` builds).
    #[arg(long, value_name = "DIR", conflicts_with = "record_only")]
    pub html_site: Option<PathBuf>,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
    /// Sharding and resuming.
    #[command(flatten)]
    pub cell: CellArgs,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `bob merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Table JSON files (from `bob table --format json`).
    #[arg(required = true)]
    pub tables: Vec<PathBuf>,
    /// Also write the results document of the merged table to this Markdown file.
    #[arg(long)]
    pub doc: Option<PathBuf>,
    /// Output format.
    #[arg(long, default_value_t = Format::Md, value_parser = formats(output::Grid::FORMATS))]
    pub format: Format,
}

/// `bob cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::Reclaimed::FORMATS))]
    pub format: Format,
}

/// `bob report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The `--out` directory of a `bob table` run (its table.json and witnesses).
    pub out: PathBuf,
    /// The site's directory (created; its pages replaced).
    #[arg(long)]
    pub to: PathBuf,
    /// Another table's JSON: also write diff.html, what changed from this run to it.
    #[arg(long, value_name = "TABLE_JSON")]
    pub diff: Option<PathBuf>,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::SiteReport::FORMATS))]
    pub format: Format,
}

/// `bob diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first table's JSON (`bob table --format json`, or `table.json` under --out).
    pub a: PathBuf,
    /// The second's.
    pub b: PathBuf,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(GridDiff::FORMATS))]
    pub format: Format,
}

/// `bob explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Witness directory.
    pub witness: PathBuf,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::Explanation::FORMATS))]
    pub format: Format,
}

/// Recording backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// bob's FUSE disk under a loop device (works without device-mapper).
    Fuse,
    /// The kernel's dm-log-writes target (needs device-mapper).
    DmLogWrites,
}

/// `bob replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Witness directory (as printed by `bob run`).
    pub witness: PathBuf,
    /// Image file to write the crash state into (created; an existing file only with
    /// --force; never a file inside the witness directory).
    #[arg(long, required_unless_present = "recovery_crashes")]
    pub to: Option<PathBuf>,
    /// Replace the --to file (and its `.pm` beside it) if it exists.
    #[arg(long, requires = "to")]
    pub force: bool,
    /// Also recover and check the rebuilt image, confirming the witness independently.
    #[arg(long)]
    pub check: bool,
    /// Another crash state of the witness's trace than the recorded one (an id such as
    /// `e0:0-6`, as the per-scenario table prints).
    #[arg(long, value_name = "ID")]
    pub state: Option<String>,
    /// recovery-idempotent: record the state's recovery (the mount's journal replay) as a
    /// trace, and recover again every crash state inside it; each must reach a state the
    /// oracle allows (exit 1 if one does not). WITNESS may also be a trace directory
    /// (`--save-trace`), with --state.
    #[arg(long, conflicts_with = "check")]
    pub recovery_crashes: bool,
    /// With --recovery-crashes: at most this many crash states inside recovery.
    #[arg(long, requires = "recovery_crashes", value_parser = at_least_one_state)]
    pub max_states: Option<usize>,
    /// For a design with a persistent-memory region (conquest): also write the state's
    /// PM image here (it is always written beside the disk image as `<IMAGE>.pm`).
    #[arg(long, value_name = "FILE")]
    pub pm_out: Option<PathBuf>,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::ReplayReport::FORMATS))]
    pub format: Format,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `bob list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::ListReport::FORMATS))]
    pub format: Format,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `bob bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Configuration (see `bob list`; default ext4-ordered). With `--table`, several,
    /// comma-separated (default: all).
    #[arg(long = "fs", value_delimiter = ',', value_parser = parse_config)]
    pub fs: Vec<FsConfig>,
    /// Property whose workload is recorded (see `bob list`; default single-block-append).
    /// With `--table`, several, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub property: Vec<Property>,
    /// Time a whole `bob table` (narrowed by `--fs` and `--property`; every drain
    /// schedule, the default disk model) with the engine's shortcuts on against the same
    /// with all of them off, one run each: `table_speedup`.
    #[arg(long)]
    pub table: bool,
    /// With `--table`: the whole default table as a user waits for it (every
    /// configuration this kernel runs, every property, both disk models, 512 and 4096 B
    /// atomic writes, every drain schedule), timed four ways: recording alone, checking
    /// the saved recordings, a sample of cells from them with every shortcut off, and
    /// the table recording as it checks, against the 30-minute target.
    #[arg(long, requires = "table")]
    pub full: bool,
    /// With `--full`: the shortcuts-off sample takes every N-th property.
    #[arg(long, requires = "full", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_every: u64,
    /// With `--table`: at most this many crash states per cell and drain schedule.
    #[arg(long, requires = "table", value_parser = at_least_one_state)]
    pub max_states: Option<usize>,
    /// The file systems' own speed on bob's disk with this latency model (hdd, ssd,
    /// none): a Varmail-like flow, optfs with osync against journal-flush with fsync
    /// (`optfs_vs_fsync_flush`), and a PostMark-like run, xsyncfs against xsyncfs-async
    /// and journal-sync (`xsyncfs_vs_async`, `xsyncfs_vs_sync_flush`); `--fs` may name
    /// those five only, and all run. With `--fs valor`: a serial overwrite in
    /// transactions of 16 pages against the same writes without transactions
    /// (`valor_vs_plain`); with `--fs softupdates` or `--fs conquest`: their papers'
    /// benchmarks.
    #[arg(long, conflicts_with_all = ["table", "stream_states"])]
    pub latency: Option<bob_core::record::latency::Latency>,
    /// Instead: generate and dedup this many crash states (e.g. 1000000) of one recorded
    /// trace without mounting (the default strategies, then random; 512-byte atomic
    /// units), and report states/s and resident memory after the first and the last
    /// tenth of them.
    #[arg(long, conflicts_with = "table", value_parser = clap::value_parser!(u64).range(1..))]
    pub stream_states: Option<u64>,
    /// bob's recall on the published crash-consistency bugs of the recall catalog
    /// (docs/recall/catalog.md): each expressible entry's workload run as a cell on its
    /// configuration, on each `--kernel`; per kernel, the entries known buggy there
    /// found or missed (recall) and those known fixed there held or falsely alarmed
    /// (precision). Exit 0 when every entry came out as the catalog expects, 1 when one
    /// was missed or alarmed falsely, 2 when one could not be run.
    #[arg(long, conflicts_with_all = ["table", "latency", "stream_states"])]
    pub recall: bool,
    /// With `--recall`: the catalog's JSON (its workload paths are relative to it).
    #[arg(
        long,
        requires = "recall",
        default_value = "docs/recall/catalog.json",
        value_name = "FILE"
    )]
    pub catalog: PathBuf,
    /// With `--recall`: only these entries (ids, comma-separated; default all).
    #[arg(long, requires = "recall", value_delimiter = ',', value_name = "ID[,ID]")]
    pub entry: Vec<String>,
    /// With `--recall`: leave out the entries of which the catalog knows neither the bug
    /// nor the fix on the kernel (they are listed, not run).
    #[arg(long, requires = "recall")]
    pub known_only: bool,
    /// With `--recall`: drain schedules each workload is recorded under (sync, syncfs,
    /// writeback-commit, or all).
    #[arg(long, requires = "recall", default_value = "sync", value_name = "LIST")]
    pub schedules: ScheduleList,
    /// With `--recall`: how many times to record each drain schedule of each entry (auto:
    /// once, three times for a schedule whose first recording shows a violation; or a
    /// number, for bugs whose crash state arises in some recordings only).
    #[arg(long, requires = "recall", default_value = "auto", value_name = "auto|N")]
    pub recordings: bob_core::run::Recordings,
    /// With `--recall`: where each entry's witnesses go (`DIR/ID`; with several kernels,
    /// `DIR/KERNEL/ID`).
    #[arg(long, requires = "recall", default_value = "bob-out/recall", value_name = "DIR")]
    pub out: PathBuf,
    /// Output format (`md` with `--recall` only).
    #[arg(long, default_value_t = Format::Text, value_parser = formats(bob_core::bench::recall::RecallReport::FORMATS))]
    pub format: Format,
    /// Timed mount + umount rounds of the floor.
    #[arg(long, default_value_t = bob_core::bench::DEFAULT_FLOOR_RUNS as u64, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "table")]
    pub floor_runs: u64,
    /// The engine's parallel workers (default: number of cores).
    #[arg(long, short = 'j', value_parser = at_least_one_job)]
    pub jobs: Option<usize>,
    /// Size of the multi-block workloads (e.g. 256K, 1M, 4M; a multiple of 4 KiB), to
    /// measure how the cost grows with the trace.
    #[arg(long, conflicts_with = "table")]
    pub multi_block_bytes: Option<BlockBytes>,
    /// Run the whole-image-copy naive pipeline (the strawman, not the headline) on at most
    /// this many evenly spaced states (default: all).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "table")]
    pub naive_sample: Option<u64>,
    /// MiB the recorder-overhead workload writes (0 skips that measurement).
    #[arg(long, default_value_t = bob_core::bench::DEFAULT_RECORDER_BYTES >> 20, conflicts_with = "table")]
    pub recorder_mib: u64,
    /// Timeout for each recovery step (mount, repairing fsck), in seconds (at least 1).
    #[arg(long, default_value_t = 30, value_parser = at_least_one_second)]
    pub recovery_timeout: u64,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `bob import` arguments.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A dm-log-writes log (from the kernel target, xfstests, or bob).
    #[arg(required_unless_present = "blktrace", conflicts_with = "blktrace")]
    pub log: Option<PathBuf>,
    /// Instead: blktrace output to decode into block-request annotations: a directory of
    /// per-CPU files (`<dev>.blktrace.<cpu>`), one such file, or blkparse's text output.
    #[arg(long)]
    pub blktrace: Option<PathBuf>,
    /// Trace directory to write (log import), or whose trace to annotate (blktrace).
    #[arg(long, required_unless_present = "blktrace")]
    pub out: Option<PathBuf>,
    /// The image the log applies to (copied into the trace directory as base.img).
    #[arg(long, conflicts_with = "blktrace")]
    pub base: Option<PathBuf>,
    /// Configuration the log was recorded on (see `bob list`), needed by `bob check`.
    #[arg(long = "fs", conflicts_with = "blktrace", value_parser = parse_config)]
    pub fs: Option<FsConfig>,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::ImportReport::FORMATS))]
    pub format: Format,
}

/// `bob log` arguments: every xfstests replay-log option, with replay-log's meaning,
/// output and exit status (bob_core::trace::replay_log), plus bob's `--list`, `--format`
/// and `--force`. Numbers stay strings here: replay-log's own parser reads them (hex,
/// octal, its error messages), so that both command lines accept the same values.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// The log (a dm-log-writes log file or device, or a trace directory holding
    /// trace.log); or give it with --log.
    #[arg(required_unless_present = "log_file", conflicts_with = "log_file")]
    pub log: Option<PathBuf>,
    /// The log, as replay-log takes it.
    #[arg(long = "log", value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Print every entry: index, sector, sectors (512-byte units), flags, mark text.
    #[arg(long)]
    pub list: bool,
    /// Compare with another recording of the same workload (a log or trace directory):
    /// marks, writes, flushes and FUA writes between marks, request sizes, epochs and
    /// crash states (4096-byte atomic writes, real FUA, the default strategies).
    #[arg(long, value_name = "OTHER")]
    pub compare: Option<PathBuf>,
    /// Print the number of entries.
    #[arg(long)]
    pub num_entries: bool,
    /// Print ENTRY@SECTOR of the entry found by --end-mark, --next-fua, --next-flush or
    /// --limit (SECTOR: the log position after it).
    #[arg(long)]
    pub find: bool,
    /// Replay onto this image file or device (it must exist). bob refuses a mounted
    /// device, and a block device that is not a loop device unless --force.
    #[arg(long, value_name = "DEV_OR_IMAGE")]
    pub replay: Option<PathBuf>,
    /// Stop after this many entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<String>,
    /// Stop at (find) the next entry with FLUSH.
    #[arg(long)]
    pub next_flush: bool,
    /// Stop at (find) the next entry with FUA.
    #[arg(long)]
    pub next_fua: bool,
    /// Start at this entry.
    #[arg(long, value_name = "N")]
    pub start_entry: Option<String>,
    /// Start after this mark.
    #[arg(long, value_name = "TEXT")]
    pub start_mark: Option<std::ffi::OsString>,
    /// Stop at (find) this mark (the mark is replayed; it carries no data).
    #[arg(long, visible_alias = "mark", value_name = "TEXT")]
    pub end_mark: Option<std::ffi::OsString>,
    /// Do not replay discards.
    #[arg(long)]
    pub no_discard: bool,
    /// Shell command to run at the --check points (after an fsync of the target).
    #[arg(long, value_name = "CMD")]
    pub fsck: Option<std::ffi::OsString>,
    /// When to run --fsck: every N entries, or after each flush, fua or discard.
    #[arg(long, value_name = "N|flush|fua|discard")]
    pub check: Option<String>,
    /// Skip writes that end at or before this sector (log sectors).
    #[arg(long, value_name = "SECTOR")]
    pub start_sector: Option<String>,
    /// Skip writes that start after this sector (log sectors).
    #[arg(long, value_name = "SECTOR")]
    pub end_sector: Option<String>,
    /// Print replayed entries; twice, also skipped and seeked-over ones.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Replay onto a block device that is not a loop device.
    #[arg(long)]
    pub force: bool,
    /// Output format (json: the answer as one object).
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::NamedComparison::FORMATS))]
    pub format: Format,
}

/// How `bob record` annotates the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AnnotateArg {
    /// Block tracepoints where tracefs is mounted.
    Auto,
    /// Block tracepoints always (tracefs is mounted privately if needed).
    Tracefs,
    /// Live blktrace (needs debugfs and relay files).
    Blktrace,
    /// No annotations.
    None,
}

impl From<AnnotateArg> for bob_core::record::custom::Annotate {
    fn from(a: AnnotateArg) -> Self {
        use bob_core::record::custom::Annotate;
        match a {
            AnnotateArg::Auto => Annotate::Auto,
            AnnotateArg::Tracefs => Annotate::Tracefs,
            AnnotateArg::Blktrace => Annotate::Blktrace,
            AnnotateArg::None => Annotate::Off,
        }
    }
}

/// `bob record` arguments.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Configuration to make and mount (see `bob list`).
    #[arg(long = "fs", value_parser = parse_config)]
    pub fs: FsConfig,
    /// Trace directory to write (trace.log, trace.json, base.img).
    #[arg(long)]
    pub out: PathBuf,
    /// A free loop device to record on (default: any free one).
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Recording backend.
    #[arg(long, value_enum, default_value_t = Backend::Fuse)]
    pub backend: Backend,
    /// The log device of the dm-log-writes backend.
    #[arg(long, required_if_eq("backend", "dm-log-writes"))]
    pub log_dev: Option<PathBuf>,
    /// Block-request annotations from the kernel's block tracepoints.
    #[arg(long, value_enum, default_value_t = AnnotateArg::Auto)]
    pub annotate: AnnotateArg,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Latency model of bob's recording disk: hdd, ssd or none (each write, discard and
    /// flush takes the model's time; constants in docs/researchfs.md). FUSE disk only.
    #[arg(long, default_value = "none")]
    pub latency: bob_core::record::latency::Latency,
    /// The command and its arguments (after `--`); it runs with the mount as its working
    /// directory and BOB_MARK_FILE naming the mark control file.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `bob mark` arguments.
#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The mark's text (words are joined with spaces).
    #[arg(required = true)]
    pub text: Vec<String>,
    /// The control file (default: $BOB_MARK_FILE, set by `bob record`).
    #[arg(long)]
    pub file: Option<PathBuf>,
}

/// `bob check` arguments.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Trace directory (from `bob record`, `bob import --base`, or `bob run --save-trace`).
    pub dir: PathBuf,
    /// Shell command run in each recovered mount (its working directory); exit 0 means
    /// consistent. Without it, only recovery and the read-only fsck judge.
    #[arg(long)]
    pub checker: Option<String>,
    /// Seconds before a checker run is killed (a timeout outcome; at least 1).
    #[arg(long, default_value_t = 60, value_parser = at_least_one_second)]
    pub timeout: u64,
    /// Output format.
    #[arg(long, default_value_t = Format::Text, value_parser = formats(output::CheckReport::FORMATS))]
    pub format: Format,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
    /// Where the checks run (this machine's kernel or a virtual machine's).
    #[command(flatten)]
    pub vm: VmArgs,
}

/// `--fs NAME`: a configuration bob knows.
fn parse_config(name: &str) -> Result<FsConfig, String> {
    bob_core::fs::by_name(name).ok_or_else(|| {
        format!("unknown configuration {name:?}; known: {}", bob_core::fs::names().join(", "))
    })
}

/// One `--strategy` name: a strategy, or `default` / `original` for their sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrategySet(pub Vec<Strategy>);

impl FromStr for StrategySet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "default" => Ok(StrategySet(Strategy::DEFAULT.to_vec())),
            "original" => Ok(StrategySet(Strategy::ORIGINAL.to_vec())),
            other => {
                other.parse::<Strategy>().map(|s| StrategySet(vec![s])).map_err(|e| e.to_string())
            }
        }
    }
}

/// `--shard I/N`, kept 0-based (`I` is 1-based on the command line, as CI matrices
/// number jobs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (index, count) = bob_core::run::parse_shard(s)?;
        Ok(Shard { index, count })
    }
}

/// `--schedules LIST`: drain schedules, comma-separated, or `all`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleList(pub Vec<Schedule>);

impl FromStr for ScheduleList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Schedule::parse_list(s).map(ScheduleList).map_err(|e| e.to_string())
    }
}

/// A size in bytes: `4096`, `256K`, `1M`, `4MiB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
            Some(i) => lower.split_at(i),
            None => (lower.as_str(), ""),
        };
        let shift = match unit {
            "" | "b" => 0,
            "k" | "kib" => 10,
            "m" | "mib" => 20,
            "g" | "gib" => 30,
            _ => return Err(format!("{t:?}: expected a size like 4096, 256K, 1M or 4MiB")),
        };
        let n: u64 = digits.parse().map_err(|_| format!("{t:?}: expected a size like 256K"))?;
        n.checked_shl(shift)
            .filter(|v| v >> shift == n)
            .map(ByteSize)
            .ok_or_else(|| format!("{t:?}: too large"))
    }
}

/// A size that is a positive multiple of 4 KiB (the multi-block workloads write whole
/// blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockBytes(pub u64);

impl FromStr for BlockBytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<ByteSize>()? {
            ByteSize(n) if n > 0 && n % 4096 == 0 => Ok(BlockBytes(n)),
            ByteSize(n) => Err(format!("{n}: must be a positive multiple of 4096")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes() {
        let size = |s: &str| s.parse::<ByteSize>().map(|b| b.0);
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("256K"), Ok(256 << 10));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert_eq!(size("4MiB"), Ok(4 << 20));
        assert!(size("4X").is_err());
        assert!(size("").is_err());
        assert!(size("99999999999999G").is_err());
        assert!("1000".parse::<BlockBytes>().is_err());
        assert_eq!("8K".parse::<BlockBytes>(), Ok(BlockBytes(8192)));
    }

    /// What a user sees for a wrong name or value: one clear message naming what is known.
    #[test]
    fn usage_error_messages() {
        let err = |args: &[&str]| {
            let mut argv = vec!["bob"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).unwrap_err().to_string()
        };
        insta::assert_snapshot!(
            "unknown_configuration",
            err(&["run", "--fs", "ext9", "--property", "single-block-append"])
        );
        insta::assert_snapshot!("bad_shard", err(&["table", "--shard", "0/4"]));
        insta::assert_snapshot!("bad_size", err(&["bench", "--multi-block-bytes", "6K"]));
    }

    /// Command lines clap must accept or reject, before any command runs.
    #[test]
    fn command_lines() {
        let ok = |args: &[&str]| {
            let mut argv = vec!["bob"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv)
        };
        assert!(ok(&["run", "--fs", "ext4-ordered", "--property", "single-block-append"]).is_ok());
        assert!(ok(&["run", "--fs", "ext9", "--property", "single-block-append"]).is_err());
        assert!(ok(&["run", "--fs", "ext4-ordered", "--property", "nope"]).is_err());
        let shard = ["table", "--shard", "2/4"];
        assert!(ok(&shard).is_ok());
        assert!(ok(&["table", "--shard", "5/4"]).is_err());
        assert!(ok(&["table", "--strategy", "default,torn"]).is_ok());
        assert!(ok(&["table", "--strategy", "sideways"]).is_err());
        assert!(ok(&["table", "--schedules", "syncfs,nope"]).is_err());
        assert!(ok(&["bench", "--floor-runs", "0"]).is_err());
        assert!(ok(&["bench", "--multi-block-bytes", "1000"]).is_err());
        assert!(ok(&["bench", "--table", "--fs", "ext2,xfs", "--max-states", "5"]).is_ok());
        assert!(ok(&["bench", "--max-states", "5"]).is_err(), "--max-states needs --table");
        assert!(ok(&["bench", "--full"]).is_err(), "--full needs --table");
        assert!(ok(&["bench", "--table", "--full", "--sample-every", "3"]).is_ok());
        assert!(ok(&["bench", "--table", "--sample-every", "3"]).is_err(), "needs --full");
        assert!(ok(&["bench", "--stream-states", "1000000", "--format", "json"]).is_ok());
        assert!(ok(&["bench", "--stream-states", "0"]).is_err(), "at least one state");
        assert!(ok(&["bench", "--table", "--stream-states", "5"]).is_err(), "one or the other");
        assert!(ok(&["bench", "--table", "--naive-sample", "5"]).is_err(), "not a table's option");
        assert!(ok(&["import", "x.log"]).is_err(), "a log import needs --out");
        assert!(ok(&["check", "dir", "--shard", "1/2"]).is_err(), "bob check runs whole");
        assert!(ok(&["table", "--record-only", "--out", "t"]).is_ok());
        assert!(ok(&["table", "--traces", "t", "--shard", "1/3"]).is_ok());
        assert!(ok(&["table", "--record-only", "--shard", "1/3"]).is_err());
        assert!(ok(&["table", "--record-only", "--traces", "t"]).is_err());
        assert!(ok(&["import", "--blktrace", "dir"]).is_ok());
        assert!(ok(&[
            "record",
            "--fs",
            "ext4-ordered",
            "--out",
            "t",
            "--backend",
            "dm-log-writes",
            "--",
            "true"
        ])
        .is_err());
    }
}
