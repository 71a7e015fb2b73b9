//! Command-line syntax (clap derive). Only syntax lives here; [`crate::commands`] turns it
//! into bob-core options and rejects what does not fit the machine.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// bob, the Block-Order Breaker: finds out what a file system really promises across a
/// crash.
#[derive(Debug, Parser)]
#[command(name = "bob", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Record a property's workload on a configuration, explore its crash states, and
    /// give the verdict (exit 0 held, 1 violated, 2 error).
    Run(RunArgs),
    /// Rebuild a witness's exact crash image.
    Replay(ReplayArgs),
    /// List configurations and properties.
    List(ListArgs),
    /// Run properties x configurations and print the property table.
    Table(TableArgs),
    /// Merge tables (CI matrix jobs, shards) into one.
    Merge(MergeArgs),
    /// Tell a witness's story in words: what persisted, what did not, which bytes are wrong.
    Explain(ExplainArgs),
    /// Release what killed bob processes left behind (mounts, loop devices, FUSE disks,
    /// scratch directories); never touches a live process's or anything bob did not make.
    Cleanup(CleanupArgs),
    /// Measure bob's engine against the naive per-state pipeline and the mount floor.
    Bench(crate::bench_cmd::BenchArgs),
    /// Import a dm-log-writes log (or blktrace output) as a bob trace.
    Import(crate::interop_cmd::ImportArgs),
    /// Inspect and replay a log the way xfstests' replay-log does.
    Log(crate::interop_cmd::LogArgs),
    /// Record any command's block I/O on a configuration (bring your own workload).
    Record(crate::interop_cmd::RecordArgs),
    /// Insert a mark into the trace of the running `bob record`.
    Mark(crate::interop_cmd::MarkArgs),
    /// Explore and check the crash states of a recorded trace, with your own checker.
    Check(crate::interop_cmd::CheckArgs),
}

impl Command {
    /// Whether the command binds loop devices or mounts (and so first reclaims what dead
    /// bob processes left).
    pub fn creates_resources(&self) -> bool {
        match self {
            Command::Run(_) | Command::Table(_) | Command::Bench(_) | Command::Record(_) => true,
            Command::Check(_) => true,
            Command::Replay(a) => a.check,
            _ => false,
        }
    }
}

/// Output formats for one result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable text.
    Text,
    /// One JSON object.
    Json,
}

/// Options shared by commands that explore crash states.
#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// Crash-state strategies, comma-separated (request-prefix, block-prefix,
    /// single-request, all-but-one, torn, persistence-points, exhaustive, random; or
    /// `original`, `default`).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub strategy: Vec<String>,
    /// At most this many crash states per cell and drain schedule (spread over epochs).
    #[arg(long)]
    pub max_states: Option<usize>,
    /// Seed for sampled strategies.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Parallel workers (default: number of cores).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Timeout for each recovery step (mount, repairing fsck), in seconds.
    #[arg(long, default_value_t = 30)]
    pub recovery_timeout: u64,
    /// Directory for witnesses.
    #[arg(long, default_value = "bob-out")]
    pub out: PathBuf,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Check only shard I of N of each cell's crash states (1-based, e.g. 2/4); merge the
    /// results with `bob merge`.
    #[arg(long)]
    pub shard: Option<String>,
    /// Continue an interrupted run: reuse its recorded trace and every verdict already
    /// journaled under --out (and, for `bob table`, every finished cell).
    #[arg(long)]
    pub resume: bool,
    /// The simulated disk's atomic write unit in bytes: a write persists any subset of the
    /// aligned units it touches, each whole or not at all. Powers of two from 512 (a 512n
    /// disk, the BOB study's model) to the file system's block size (4096: 4Kn and 512e
    /// disks, NVMe). Several, comma-separated (512,4096), judge every cell under each.
    #[arg(long, default_value = "4096", value_name = "BYTES[,BYTES]")]
    pub atomic_write_unit: String,
    /// What a FUA write means: `real` (durable when it completes, alone) or `barrier`
    /// (write + flush, as bob and CrashMonkey treated it before).
    #[arg(long, value_enum, default_value_t = FuaArg::Real)]
    pub fua: FuaArg,
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
    #[arg(long = "fs")]
    pub fs: String,
    /// Property (see `bob list`).
    #[arg(long)]
    pub property: String,
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
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Check this recorded trace directory (from --save-trace) instead of recording: one
    /// trace directory, or one holding a directory per drain schedule.
    #[arg(long, conflicts_with = "device")]
    pub trace: Option<PathBuf>,
    /// Save the recorded trace directory here (log, sidecar, base image); with several
    /// drain schedules, one directory per schedule below it (`DIR/syncfs`, ...).
    #[arg(long)]
    pub save_trace: Option<PathBuf>,
    /// Drain schedules to record the workload under, comma-separated: sync, syncfs,
    /// writeback-commit, or all. Each is its own recording; the states of all are checked
    /// and each cross names the schedule that produced it.
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub schedules: String,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
}

/// Table output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    /// Markdown.
    Md,
    /// JSON (what `bob merge` reads).
    Json,
    /// One self-contained HTML page.
    Html,
}

/// `bob table`.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// Configurations, comma-separated (default: all).
    #[arg(long = "fs", value_delimiter = ',')]
    pub fs: Vec<String>,
    /// Properties, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub property: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormat::Md)]
    pub format: TableFormat,
    /// Also write the results document (the table, the command that regenerates it, and
    /// each failure's story) to this Markdown file.
    #[arg(long)]
    pub doc: Option<PathBuf>,
    /// Drain schedules to record the workload under, comma-separated: sync, syncfs,
    /// writeback-commit, or all. Each is its own recording; the states of all are checked
    /// and each cross names the schedule that produced it.
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub schedules: String,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
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
    #[arg(long, value_enum, default_value_t = TableFormat::Md)]
    pub format: TableFormat,
}

/// `bob cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `bob explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Witness directory.
    pub witness: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
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
    /// Image file to write the crash state into (created or replaced).
    #[arg(long)]
    pub to: PathBuf,
    /// Also recover and check the rebuilt image, confirming the witness independently.
    #[arg(long)]
    pub check: bool,
    /// Another crash state of the witness's trace than the recorded one (an id such as
    /// `e0:0-6`, as the per-scenario table prints).
    #[arg(long, value_name = "ID")]
    pub state: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `bob list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}
