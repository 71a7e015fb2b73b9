//! `bob explore`: generated workloads ([`workloads::enumerate`], Ace's bounds) run one by
//! one on each configuration through the same pipeline as a cell ([`super::run_cell`]:
//! record, crash states at and between persistence points, recovery, the oracle's
//! durability promises), their failures grouped into signatures (configuration, kinds of
//! ops, kind of discrepancy), each signature with a minimal witness found by dropping ops
//! while it still fails so.
//!
//! Layout of `--out DIR`:
//! * `explore.json`: what the run explores (bounds, selection); a resumed run must match.
//! * `journal.jsonl`: one line per workload run and per witness, appended as each is
//!   reached, so `--resume` continues exactly where a budget, an interrupt or a kill left.
//! * `workloads/NAME.json`: every generated workload, as `bob run --workload` reads it.
//! * `runs/CONFIG/NAME/`: the witness of each failing run (`bob replay` reads it).
//! * `signatures/SLUG/workload.json`: each signature's minimal workload, and
//!   `reproduce.sh`, its standalone reproducer.

pub mod merge;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use workloads::enumerate::{Bounds, Generator};
use workloads::Workload;

use super::{scratch_dir, Error, Quiet, RunOptions};
use crate::check::OutcomeKind;
use crate::fs::FsConfig;
use crate::output::{
    ExploreConfig, ExploreError, ExploreReport, RecoveryDiscrepancy, Signature,
    SignatureDiscrepancy, SignatureKey, SignatureWitness,
};
use crate::record;

/// The journal's file name under `--out`.
const JOURNAL: &str = "journal.jsonl";
/// The description of the run under `--out`.
pub(crate) const HEADER: &str = "explore.json";

/// What to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    /// The configurations, each workload run on every one.
    pub configs: Vec<FsConfig>,
    /// The bounds.
    pub bounds: Bounds,
    /// `--sample K --seed S`: K workloads drawn with seed S instead of all.
    pub sample: Option<(usize, u64)>,
    /// `--shard I/N` (0-based I): the workloads whose index is I modulo N.
    pub shard: Option<(usize, usize)>,
    /// Start no new workload after this long.
    pub budget: Option<Duration>,
    /// Continue the run journaled in `out`.
    pub resume: bool,
    /// Add each configuration's documented guarantees (its profile's, [`crate::fs::profile`]).
    pub documented: bool,
    /// Shrink each new signature's workload to a minimal witness.
    pub shrink: bool,
    /// Where everything goes.
    pub out: PathBuf,
    /// Triaged signatures (`--known FILE`): slug -> note.
    pub known: BTreeMap<String, String>,
    /// Crash states inside recovery for each run that held, on configurations whose
    /// recovery is the mount's own journal or log replay.
    pub recovery_crashes: Option<RecoveryCrashes>,
    /// The template of each run: strategies, limits, jobs, timeouts, scratch, drain
    /// schedules, disk model. Its config, workload and out_dir are set per run.
    pub run: RunOptions,
}

/// Progress of an exploration.
pub trait ExploreProgress: Sync {
    /// The number of workload runs to do, if known.
    fn start(&self, total: Option<u64>);
    /// Enumeration has looked at `scanned` of the space's `indices` (called every
    /// [`SCAN_STEP`] indices while it skips those that make no workload).
    fn scanning(&self, _scanned: u64, _indices: u64) {}
    /// One more run done; `signatures` found so far; `last`: its workload and config.
    fn done(&self, done: u64, signatures: usize, last: &str);
}

/// One journal line.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum Line {
    Run(RunRecord),
    Witness(WitnessRecord),
}

/// One workload run on one configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RunRecord {
    config: String,
    index: u64,
    workload: String,
    outcome: String,
    key: Option<SignatureKey>,
    story: Option<String>,
    seconds: f64,
    states: usize,
    unsupported: bool,
    error: Option<String>,
    /// Crash states inside recovery checked (`--recovery-crashes`).
    #[serde(default, skip_serializing_if = "is_zero")]
    recovery_states: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `--recovery-crashes`: a crash during recovery, after each run that held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryCrashes {
    /// Crash states of each run whose recovery is interrupted: the states right after a
    /// barrier (no write of the epoch applied), the first ones whose recovery writes
    /// something.
    pub per_run: usize,
    /// At most this many crash states inside each recovery.
    pub max_states: usize,
}

/// A signature's minimal witness.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WitnessRecord {
    key: SignatureKey,
    witness: SignatureWitness,
    seconds: f64,
}

/// What the run explores, in words; a resumed run must say the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    bounds: String,
    selection: String,
    configs: Vec<String>,
}

/// Reads a `--known` file: one signature per line, its slug
/// (`CONFIG--OP+OP--DISCREPANCY`, as `signatures/` names them) and an optional note after
/// whitespace (documented behaviour, a bug report); `#` starts a comment.
pub fn load_known(path: &Path) -> Result<BTreeMap<String, String>, Error> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (slug, note) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        if slug.split("--").count() != 3 {
            return Err(Error::Invalid(format!(
                "{}:{}: {slug:?} is not a signature (CONFIG--OP+OP--DISCREPANCY)",
                path.display(),
                n + 1
            )));
        }
        out.insert(slug.to_owned(), note.trim().to_owned());
    }
    Ok(out)
}

/// The bounds in words.
pub fn describe_bounds(b: &Bounds) -> String {
    let names = |v: Vec<String>| v.join(",");
    format!(
        "seq {}; ops {}; persist {}; files {}; second files {}; dirs {}; second dirs {}; \
         ranges {}; direct ranges {}; falloc modes {}; truncate {}; guarantees {}{}",
        b.seq,
        names(b.ops.iter().map(|o| o.to_string()).collect()),
        names(b.persist.iter().map(|o| o.to_string()).collect()),
        names(b.files.clone()),
        names(b.second_files.clone()),
        names(b.dirs.clone()),
        names(b.second_dirs.clone()),
        names(b.ranges.iter().map(|o| o.to_string()).collect()),
        names(b.direct_ranges.iter().map(|o| o.to_string()).collect()),
        names(b.falloc_modes.iter().map(|o| o.name().to_owned()).collect()),
        names(b.truncate.iter().map(|o| o.to_string()).collect()),
        if b.guarantees.is_empty() {
            "posix".to_owned()
        } else {
            names(b.guarantees.iter().map(|g| g.name().to_owned()).collect())
        },
        if b.deps_in_ops { "; dependencies among the recorded ops" } else { "" }
    )
}

fn selection(opts: &ExploreOptions) -> String {
    let mut s = match opts.sample {
        Some((k, seed)) => format!("sample {k} seed {seed}"),
        None => "all".to_owned(),
    };
    if let Some((i, n)) = opts.shard {
        s.push_str(&format!(", shard {}/{n}", i + 1));
    }
    if opts.documented {
        s.push_str(", documented guarantees");
    }
    if let Some(rc) = opts.recovery_crashes {
        s.push_str(&format!(
            ", recovery crashes {} per run, {} states each",
            rc.per_run, rc.max_states
        ));
    }
    s
}

/// Indices enumeration looks at between two checks of the interrupt flag and two
/// progress reports ([`Scan`]): a few milliseconds' worth.
const SCAN_STEP: u64 = 4096;

/// The most indices a whole enumeration (no `--sample`) may have to look at: beyond it
/// the bounds are refused ([`check_space`]). Indices are looked at about a million a
/// second (fewer in a debug build), so this is a few hours of enumeration alone.
const MAX_INDICES: u64 = 10_000_000_000;

/// How enumeration reports and stops: the interrupt flag (checked every [`SCAN_STEP`]
/// indices, so that SIGINT/SIGTERM end a skip that finds nothing) and a progress report.
#[derive(Clone, Copy)]
pub struct Scan<'a> {
    /// Set by SIGINT/SIGTERM: enumeration ends, as if the space were done.
    pub cancel: &'a AtomicBool,
    /// Called with (indices looked at, indices in the space) every [`SCAN_STEP`].
    pub progress: &'a (dyn Fn(u64, u64) + Sync),
}

/// Refuses bounds whose whole space is too large to enumerate (more than [`MAX_INDICES`]
/// indices, with no `--sample` to draw from it), saying how large and what to do.
pub fn check_space(g: &Generator, opts: &ExploreOptions) -> Result<(), Error> {
    let indices = g.indices();
    if opts.sample.is_some() || indices <= MAX_INDICES {
        return Ok(());
    }
    let size = if indices == u64::MAX {
        format!("more than {} indices", u64::MAX)
    } else {
        format!("{indices} indices")
    };
    Err(Error::Invalid(format!(
        "bob explore: the bounds make {size} (seq {}: every op choice at every position), \
         over the {MAX_INDICES} bob will enumerate (at about a million a second, {}); \
         narrow them (a smaller --seq, fewer --ops, --files or --persist) or draw from the \
         space with --sample K",
        g.bounds().seq,
        duration_words(indices / 1_000_000)
    )))
}

/// About `seconds`, in the largest unit that is at least 1 (`3 days`, `about 10^12
/// years`).
fn duration_words(seconds: u64) -> String {
    let units = [(365 * 86400, "years"), (86400, "days"), (3600, "hours"), (60, "minutes")];
    for (unit, name) in units {
        if seconds >= unit {
            let n = seconds / unit;
            return if n >= 1_000_000 {
                format!("about 10^{} {name}", n.ilog10())
            } else {
                format!("about {n} {name}")
            };
        }
    }
    format!("{seconds} s")
}

/// The selected workloads, in order: every valid index (or the sample), this shard's;
/// ends early when `scan.cancel` is set.
fn selected<'g>(
    g: &'g Generator,
    opts: &ExploreOptions,
    scan: Scan<'g>,
) -> Box<dyn Iterator<Item = (u64, Workload)> + Send + 'g> {
    select(g, opts.sample, opts.shard, scan)
}

/// [`selected`] of `--sample` and `--shard` alone.
fn select<'g>(
    g: &'g Generator,
    sample: Option<(usize, u64)>,
    shard: Option<(usize, usize)>,
    scan: Scan<'g>,
) -> Box<dyn Iterator<Item = (u64, Workload)> + Send + 'g> {
    let mine = move |i: &u64| shard.is_none_or(|(k, n)| (*i % n as u64) as usize == k);
    let Scan { cancel, progress } = scan;
    match sample {
        Some((k, seed)) => Box::new(
            g.sample(k, seed)
                .take_while(move |_| !cancel.load(Ordering::Relaxed))
                .filter(move |(i, _)| mine(i)),
        ),
        None => {
            let indices = g.indices();
            let mut next = 0u64;
            Box::new(std::iter::from_fn(move || {
                while next < indices {
                    let i = next;
                    next += 1;
                    if i % SCAN_STEP == 0 {
                        if cancel.load(Ordering::Relaxed) {
                            next = indices;
                            return None;
                        }
                        if i > 0 {
                            progress(i, indices);
                        }
                    }
                    if !mine(&i) {
                        continue;
                    }
                    if let Some(w) = g.workload_at(i) {
                        return Some((i, w));
                    }
                }
                None
            }))
        }
    }
}

/// The selected workloads (every valid index, or the sample; this shard's), one line
/// each (`INDEX<TAB>NAME<TAB>ops`), for `--list`: nothing is run; lazily, as
/// enumeration is, and ending early when `scan.cancel` is set.
pub fn list<'g>(
    g: &'g Generator,
    opts: &ExploreOptions,
    scan: Scan<'g>,
) -> impl Iterator<Item = String> + 'g {
    selected(g, opts, scan).map(|(i, w)| {
        let ops: Vec<String> = w.ops.iter().map(|o| o.to_string()).collect();
        format!("{i}\t{}\t{}", w.name, ops.join("; "))
    })
}

/// Leaves the report under `out`: `explore.md`, `explore.html`, `explore-report.json`.
pub fn write_reports(report: &ExploreReport, out: &Path) -> Result<(), Error> {
    let files = [
        ("explore.md", report.to_md()),
        ("explore.html", report.to_html()),
        ("explore-report.json", json_text(report, &out.join("explore-report.json"))? + "\n"),
    ];
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(())
}

/// How many workloads [`selected`] gives, where counting is cheap (at most a hundred
/// thousand indices to look at: a fraction of a second); `None` otherwise or when
/// interrupted.
fn count_selected(g: &Generator, opts: &ExploreOptions, cancel: &AtomicBool) -> Option<u64> {
    if opts.sample.is_none() && g.indices() > 100_000 {
        return None;
    }
    let n = selected(g, opts, Scan { cancel, progress: &|_, _| {} }).count() as u64;
    (!cancel.load(Ordering::Relaxed)).then_some(n)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io { path: path.to_owned(), source }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let text = json_text(value, path)?;
    std::fs::write(path, text + "\n").map_err(io(path))
}

/// `value` as pretty JSON, or the error of the file it was for.
fn json_text<T: Serialize + ?Sized>(value: &T, path: &Path) -> Result<String, Error> {
    serde_json::to_string_pretty(value).map_err(|e| io(path)(e.into()))
}

/// The kinds of a workload's ops, sorted, each once.
fn op_kinds(w: &Workload) -> Vec<String> {
    let set: BTreeSet<&str> = w.ops.iter().map(|o| o.kind().name()).collect();
    set.into_iter().map(str::to_owned).collect()
}

/// The discrepancy of a failing cell: for a violation, the kind the oracle carried on the
/// finding its witness state shows (`other` for a verdict without one: a user checker's);
/// otherwise its outcome's.
fn discrepancy(cell: &crate::report::Cell) -> SignatureDiscrepancy {
    use workloads::DiscrepancyKind;
    match cell.verdict {
        OutcomeKind::Violated => {
            cell.discrepancy.as_ref().map_or(DiscrepancyKind::Other, |d| d.kind).into()
        }
        OutcomeKind::Unrecoverable => RecoveryDiscrepancy::Unmountable.into(),
        OutcomeKind::NeedsRepair => RecoveryDiscrepancy::NeedsRepair.into(),
        OutcomeKind::FsckFailed => RecoveryDiscrepancy::FsckComplaint.into(),
        OutcomeKind::ReadError => DiscrepancyKind::ReadError.into(),
        OutcomeKind::Timeout => RecoveryDiscrepancy::Timeout.into(),
        _ => DiscrepancyKind::Other.into(),
    }
}

/// The result of one run.
enum Ran {
    /// Checked: the cell's verdict, story, witness and states.
    Checked(Box<crate::report::Cell>),
    /// The file system refused an op (EOPNOTSUPP, EINVAL, ENOTTY): nothing to check.
    Unsupported(String),
}

/// A workload recorded on one configuration, waiting to be checked.
enum WorkloadRecording {
    Cell(Box<super::CellRecordings>),
    /// The configuration refused one of the workload's calls (why).
    Unsupported(String),
}

/// Records `w` on `config` as a cell of its own, its witness (if it fails) under `runs`.
fn record_workload(
    template: &RunOptions,
    config: &FsConfig,
    w: &Workload,
    runs: &Path,
    save_trace: Option<&Path>,
    cancel: &AtomicBool,
) -> Result<WorkloadRecording, Error> {
    let opts = RunOptions {
        config: config.clone(),
        workload: Some(w.clone()),
        save_trace: save_trace.map(Path::to_owned),
        explore: super::Exploration { out_dir: runs.to_owned(), ..template.explore.clone() },
        resume: false,
        // A generated workload is recorded once: its failures are grouped into signatures
        // and shrunk, which record again anyway.
        recordings: super::Recordings::Exactly(1),
        ..template.clone()
    };
    match super::record_cell(&opts, &Quiet, cancel) {
        Ok(recorded) => Ok(WorkloadRecording::Cell(Box::new(recorded))),
        Err(Error::Record(record::Error::Workload { source, .. })) => {
            let refused = match &source {
                workloads::ExecError::Io { source: e, .. } => matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENOTTY)
                ),
                _ => false,
            };
            if refused {
                Ok(WorkloadRecording::Unsupported(source.to_string()))
            } else {
                Err(Error::Record(record::Error::Workload {
                    config: config.name.to_owned(),
                    source,
                }))
            }
        }
        Err(e) => Err(e),
    }
}

/// Checks a recorded workload's crash states.
fn check_workload(
    recorded: WorkloadRecording,
    name: &str,
    cancel: &AtomicBool,
) -> Result<Ran, Error> {
    let recorded = match recorded {
        WorkloadRecording::Cell(r) => r,
        WorkloadRecording::Unsupported(why) => return Ok(Ran::Unsupported(why)),
    };
    let dir = super::cell_dir(recorded.options());
    match super::check_cell(*recorded, &Quiet, cancel) {
        Ok(mut cells) if !cells.is_empty() => {
            // A held run leaves no witness: drop its empty directory (one that is not
            // empty holds a witness, and stays).
            let _ = std::fs::remove_dir(&dir);
            Ok(Ran::Checked(Box::new(cells.swap_remove(0))))
        }
        Ok(_) => Err(Error::Invalid(format!("{name}: no cell"))),
        Err(e) => Err(e),
    }
}

/// Records and checks `w` on `config` (shrinking runs its candidates this way).
fn run_workload(
    template: &RunOptions,
    config: &FsConfig,
    w: &Workload,
    runs: &Path,
    save_trace: Option<&Path>,
    cancel: &AtomicBool,
) -> Result<Ran, Error> {
    let recorded = record_workload(template, config, w, runs, save_trace, cancel)?;
    check_workload(recorded, &w.name, cancel)
}

/// One workload run still to do: the workload's index, its configuration, the workload
/// as run there (named as generated), and where its trace is kept for crashes during
/// recovery.
struct Job<'a> {
    index: u64,
    config: &'a FsConfig,
    workload: Workload,
    recovery: Option<RecoveryCrashes>,
    trace_dir: PathBuf,
}

/// The workload as run on `config`: the bounds' guarantees plus, with `documented`, the
/// configuration's own; on a design with transactions, each overwrite in a transaction;
/// on an externally synchronous design (xsyncfs, whose fsync and sync promise
/// durability before the next output, not at their return: its profile), an output
/// after each persistence point, where what the point promises is kept.
fn for_config(w: &Workload, config: &FsConfig, documented: bool) -> Workload {
    let mut w = w.clone();
    let profile = crate::fs::profile(config);
    if profile.txn_commit_durable != crate::fs::Promise::Absent {
        // A design with transactions (Valor) is explored through them: each overwrite of
        // pages a file has (what a transaction may hold) runs as a transaction of its own,
        // committed durably, and is judged whole (all or nothing, durable once committed).
        // Only where no other op of the workload changes that file (its data, size or
        // names; a persistence point may name it): the oracle judges a transaction's
        // files whole, against the state before the first transaction, so another op's
        // effect on them (lost, or half done, in a crash) would read as the transaction's.
        let states = workloads::model_states(&w);
        let ops = w.ops.clone();
        let node = |k: usize, path: &str| states.get(k).and_then(|s| s.id(path));
        let touches = |k: usize, op: &workloads::Op| -> Vec<u32> {
            op.paths().iter().filter_map(|p| node(k, p)).collect()
        };
        let overwrites = |k: usize, op: &workloads::Op| match op {
            workloads::Op::Write { path, offset, len } => {
                let fits = states
                    .get(k)
                    .and_then(|s| s.node(path))
                    .is_some_and(|n| offset + len <= n.size);
                let alone = node(k, path).is_some_and(|id| {
                    let other = |(j, o): &(usize, &workloads::Op)| *j != k && o.has_effect();
                    !ops.iter().enumerate().filter(other).any(|(j, o)| touches(j, o).contains(&id))
                });
                fits && alone
            }
            _ => false,
        };
        w.ops = std::mem::take(&mut w.ops)
            .into_iter()
            .enumerate()
            .flat_map(|(k, op)| match overwrites(k, &op) {
                true => {
                    vec![workloads::Op::TxnBegin, op, workloads::Op::TxnCommit { durable: true }]
                }
                false => vec![op],
            })
            .collect();
    }
    if profile.output_after_persistence() {
        w.ops = w
            .ops
            .into_iter()
            .flat_map(|op| {
                let output = op.is_persistence_point().then_some(workloads::Op::Output);
                std::iter::once(op).chain(output)
            })
            .collect();
    }
    if documented {
        for g in crate::fs::profile(config).guarantees {
            if !w.guarantees.contains(&g) {
                w.guarantees.push(g);
            }
        }
        w.guarantees.sort();
    }
    w
}

/// Explores: runs every selected workload on every configuration (resuming the journal
/// in `opts.out` with `opts.resume`), groups the failures into signatures and shrinks each
/// new one to a minimal witness.
pub fn explore(
    opts: &ExploreOptions,
    progress: &dyn ExploreProgress,
    cancel: &AtomicBool,
) -> Result<ExploreReport, Error> {
    let started = Instant::now();
    if opts.configs.is_empty() {
        return Err(Error::Invalid("bob explore: no configuration".into()));
    }
    check_space(&opts.bounds.generator(), opts)?;
    std::fs::create_dir_all(&opts.out).map_err(io(&opts.out))?;
    let header = Header {
        bounds: describe_bounds(&opts.bounds),
        selection: selection(opts),
        configs: opts.configs.iter().map(|c| c.name.to_owned()).collect(),
    };
    let (lines, journal) = ExploreJournal::open(opts, &header)?;
    let done: HashSet<(String, u64)> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Run(r) => Some((r.config.clone(), r.index)),
            Line::Witness(_) => None,
        })
        .collect();
    let witnessed: BTreeSet<SignatureKey> = lines
        .into_iter()
        .filter_map(|l| match l {
            Line::Witness(w) => Some(w.key),
            Line::Run(_) => None,
        })
        .collect();

    // One scratch directory and one made file system per configuration for the whole run.
    let work = scratch_dir(opts.run.explore.scratch.as_deref())?;
    let template = RunOptions {
        setup_cache: opts
            .run
            .explore
            .speed
            .shared_setup
            .then(|| std::sync::Arc::new(record::SetupCache::new(work.path().join("setup")))),
        ..opts.run.clone()
    };
    let generator = opts.bounds.generator();
    let total = count_selected(&generator, opts, cancel).map(|n| n * opts.configs.len() as u64);
    progress.start(total);
    let runs_dir = opts.out.join("runs");
    let recorder = Recorder { template: &template, runs_dir: &runs_dir, cancel };
    let mut explorer = Explorer {
        opts,
        template: &template,
        journal,
        witnessed,
        progress,
        cancel,
        count: done.len() as u64,
    };
    let report_scan = |scanned, indices| progress.scanning(scanned, indices);
    let scan = Scan { cancel, progress: &report_scan };
    let jobs = pending(&generator, opts, &done, work.path(), scan);
    // Whether to start another run: not after an interrupt or the budget.
    let go_on =
        || !cancel.load(Ordering::Relaxed) && opts.budget.is_none_or(|b| started.elapsed() < b);
    let complete = explorer.run(jobs, &recorder, &go_on)?;
    // Witness lines appended during this run are read back with the rest.
    let journal_path = &explorer.journal.path;
    let text = std::fs::read_to_string(journal_path).map_err(io(journal_path))?;
    let all: Vec<Line> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    drop(work);
    Ok(summarize(opts, &header, &all, complete))
}

/// The exploration's journal under `--out`, open for appending.
struct ExploreJournal {
    path: PathBuf,
    file: std::fs::File,
}

impl ExploreJournal {
    /// Writes the header, and opens the journal: with `--resume` of the same exploration,
    /// its lines so far are read first; otherwise it starts empty.
    fn open(opts: &ExploreOptions, header: &Header) -> Result<(Vec<Line>, ExploreJournal), Error> {
        let header_path = opts.out.join(HEADER);
        let path = opts.out.join(JOURNAL);
        let mut lines: Vec<Line> = Vec::new();
        if opts.resume && header_path.exists() {
            let text = std::fs::read_to_string(&header_path).map_err(io(&header_path))?;
            let old: Header = serde_json::from_str(&text).map_err(|e| {
                Error::Invalid(format!("{}: not an explore header: {e}", header_path.display()))
            })?;
            if old != *header {
                return Err(Error::Invalid(format!(
                    "{}: --resume of another exploration (it explored {}; {}; {}), not this one",
                    opts.out.display(),
                    old.bounds,
                    old.selection,
                    old.configs.join(",")
                )));
            }
            if path.exists() {
                let text = std::fs::read_to_string(&path).map_err(io(&path))?;
                // A line cut by a kill is dropped: its run is simply done again.
                lines.extend(text.lines().filter_map(|l| serde_json::from_str::<Line>(l).ok()));
            }
        } else {
            // A journal left in place would be appended to, and resumed later as this one.
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&path)(e)),
                _ => {}
            }
        }
        write_json(&header_path, header)?;
        let file =
            std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(io(&path))?;
        Ok((lines, ExploreJournal { path, file }))
    }

    fn append(&mut self, line: &Line) -> Result<(), Error> {
        let text = serde_json::to_string(line).map_err(|e| io(&self.path)(e.into()))?;
        writeln!(self.file, "{text}").map_err(io(&self.path))
    }
}

/// The runs still to do, in order (those not in `done`), each workload's file written as
/// it is reached.
fn pending<'a>(
    generator: &'a Generator,
    opts: &'a ExploreOptions,
    done: &'a HashSet<(String, u64)>,
    work: &'a Path,
    scan: Scan<'a>,
) -> impl Iterator<Item = Result<Job<'a>, Error>> + Send + 'a {
    let workloads_dir = opts.out.join("workloads");
    selected(generator, opts, scan).flat_map(move |(index, w)| {
        let file = workloads_dir.join(format!("{}.json", w.name));
        let written = match file.exists() {
            true => Ok(()),
            false => write_json(&file, &w),
        };
        let jobs: Vec<Result<Job, Error>> = match written {
            Err(e) => vec![Err(e)],
            Ok(()) => opts
                .configs
                .iter()
                .filter(|c| !done.contains(&(c.name.to_owned(), index)))
                .map(|config| {
                    let workload = for_config(&w, config, opts.documented);
                    Ok(Job {
                        index,
                        config,
                        recovery: opts
                            .recovery_crashes
                            .filter(|_| matches!(config.recovery, crate::fs::Recovery::Mount)),
                        trace_dir: work.join("traces").join(config.name).join(&workload.name),
                        workload,
                    })
                })
                .collect(),
        };
        jobs
    })
}

/// Records runs (on the exploring thread, or ahead of it on one of its own).
struct Recorder<'a> {
    template: &'a RunOptions,
    runs_dir: &'a Path,
    cancel: &'a AtomicBool,
}

impl Recorder<'_> {
    fn record(&self, job: &Job) -> Result<WorkloadRecording, Error> {
        if let Some(why) = job.config.unsupported_op(&job.workload) {
            return Ok(WorkloadRecording::Unsupported(why));
        }
        let save_trace = job.recovery.map(|_| job.trace_dir.as_path());
        let (config, w) = (job.config, &job.workload);
        record_workload(self.template, config, w, self.runs_dir, save_trace, self.cancel)
    }
}

/// A recorded run on its way to be checked, or the error of the runs to do.
type RecordedJob<'a> = Result<(Job<'a>, Result<WorkloadRecording, Error>), Error>;

/// A run judged, or the exploration interrupted while judging it.
enum Judged {
    Run(Box<RunRecord>),
    Interrupted,
}

/// What judging the runs of an exploration changes: the journal, the signatures that
/// have a witness, the runs counted.
struct Explorer<'a> {
    opts: &'a ExploreOptions,
    template: &'a RunOptions,
    journal: ExploreJournal,
    witnessed: BTreeSet<SignatureKey>,
    progress: &'a dyn ExploreProgress,
    cancel: &'a AtomicBool,
    count: u64,
}

impl<'a> Explorer<'a> {
    /// Records, checks and judges every job while `go_on` says so; whether the
    /// exploration is complete (no interrupt, no budget reached). With `record_ahead`, one
    /// thread records the runs in order, each while the run before it is checked
    /// (recording is mostly waiting on mounts and syncs, so it overlaps well with
    /// checking on 2 cores): a rendezvous channel, so that at most one recorded run waits.
    /// Otherwise each run is recorded here.
    fn run(
        &mut self,
        mut jobs: impl Iterator<Item = Result<Job<'a>, Error>> + Send,
        recorder: &Recorder,
        go_on: &(dyn Fn() -> bool + Sync),
    ) -> Result<bool, Error> {
        let ahead = self.template.explore.speed.record_ahead;
        let stopped_early = AtomicBool::new(false);
        let complete = std::thread::scope(|scope| -> Result<bool, Error> {
            let (recorded_tx, recorded_rx) = std::sync::mpsc::sync_channel::<RecordedJob>(0);
            let mut inline_jobs = None;
            match ahead {
                true => {
                    let stopped_early = &stopped_early;
                    scope.spawn(move || {
                        for job in jobs {
                            if !go_on() {
                                stopped_early.store(true, Ordering::Relaxed);
                                break;
                            }
                            let job = match job {
                                Ok(job) => job,
                                Err(e) => {
                                    let _ = recorded_tx.send(Err(e));
                                    break;
                                }
                            };
                            let made = recorder.record(&job);
                            // The loop stopped taking runs (an error, an interrupt): stop
                            // too.
                            if recorded_tx.send(Ok((job, made))).is_err() {
                                break;
                            }
                        }
                    });
                }
                false => {
                    drop(recorded_tx);
                    inline_jobs = Some(&mut jobs);
                }
            }
            let mut mark = Instant::now();
            loop {
                let (job, made) = match inline_jobs.as_mut() {
                    None => match recorded_rx.recv() {
                        Ok(next) => next?,
                        Err(_) => break,
                    },
                    Some(jobs) => match jobs.next() {
                        None => break,
                        Some(_) if !go_on() => {
                            stopped_early.store(true, Ordering::Relaxed);
                            break;
                        }
                        Some(Err(e)) => return Err(e),
                        Some(Ok(job)) => {
                            let made = recorder.record(&job);
                            (job, made)
                        }
                    },
                };
                let ran = made.and_then(|r| check_workload(r, &job.workload.name, self.cancel));
                // A run's time is the loop's, from the end of the run before it: with
                // recording ahead, the runs' times add up to the wall time.
                let seconds = mark.elapsed().as_secs_f64();
                let mut rec = match self.judge(&job, ran, seconds)? {
                    Judged::Run(rec) => rec,
                    Judged::Interrupted => return Ok(false),
                };
                if job.recovery.is_some() {
                    // The run's wall time includes its crashes during recovery.
                    rec.seconds = mark.elapsed().as_secs_f64();
                    // Scratch below the exploration's work directory, removed with it.
                    let _ = std::fs::remove_dir_all(&job.trace_dir);
                }
                self.count += 1;
                self.journal.append(&Line::Run(*rec))?;
                let label = format!("{} on {}", job.workload.name, job.config.name);
                self.progress.done(self.count, self.witnessed.len(), &label);
                mark = Instant::now();
            }
            drop(recorded_rx);
            Ok(true)
        })?;
        Ok(complete && !stopped_early.load(Ordering::Relaxed))
    }

    /// The record of one run from what checking it gave: its outcome, and for a new
    /// signature, its witness (journaled here).
    fn judge(&mut self, job: &Job, ran: Result<Ran, Error>, seconds: f64) -> Result<Judged, Error> {
        let mut rec = Box::new(RunRecord {
            config: job.config.name.to_owned(),
            index: job.index,
            workload: job.workload.name.clone(),
            outcome: String::new(),
            key: None,
            story: None,
            seconds,
            states: 0,
            unsupported: false,
            error: None,
            recovery_states: 0,
        });
        match ran {
            Err(e) if e.is_interrupted() => return Ok(Judged::Interrupted),
            Err(e) => {
                rec.outcome = "error".into();
                rec.error = Some(e.to_string());
            }
            Ok(Ran::Unsupported(why)) => {
                rec.outcome = "unsupported".into();
                rec.unsupported = true;
                rec.story = Some(why);
            }
            Ok(Ran::Checked(cell)) => {
                rec.outcome = cell.verdict.name().into();
                rec.states = cell.states_explored;
                if cell.verdict.is_failure() && cell.confirmed == Some(false) {
                    // The independent replay of the failing state disagreed: bob's
                    // machinery, not the file system (a cross stands only if replayed).
                    rec.outcome = "unconfirmed".into();
                    rec.error = Some(format!(
                        "not confirmed by an independent replay: {}",
                        cell.story.clone().unwrap_or_default()
                    ));
                } else if cell.verdict.is_failure() && cell.verdict != OutcomeKind::InfraError {
                    return self.failure(job, &cell, rec);
                } else if cell.verdict == OutcomeKind::InfraError {
                    rec.error = cell.infra_error.as_ref().map(|e| format!("{e:?}"));
                } else if let Some(rc) = job.recovery {
                    return self.recovery_crashes(job, rc, rec);
                }
            }
        }
        Ok(Judged::Run(rec))
    }

    /// A failing run: its signature, and for a new one, its minimal witness.
    fn failure(
        &mut self,
        job: &Job,
        cell: &crate::report::Cell,
        mut rec: Box<RunRecord>,
    ) -> Result<Judged, Error> {
        let story = cell.story.clone().unwrap_or_default();
        let key = SignatureKey {
            config: job.config.name.to_owned(),
            ops: op_kinds(&job.workload),
            discrepancy: discrepancy(cell),
        };
        rec.key = Some(key.clone());
        rec.story = Some(story);
        if self.witnessed.contains(&key) {
            return Ok(Judged::Run(rec));
        }
        let (opts, template, cancel) = (self.opts, self.template, self.cancel);
        let t = Instant::now();
        let shrunk = minimal_witness(opts, template, job.config, &job.workload, cell, &key, cancel);
        let witness = match shrunk {
            Ok(w) => w,
            Err(e) if e.is_interrupted() => return Ok(Judged::Interrupted),
            // A run bob could not complete while shrinking: the first failing workload
            // stays the witness, and the error is told.
            Err(e) => {
                rec.error = Some(format!("shrinking {}: {e}", job.workload.name));
                let whole = ExploreOptions { shrink: false, ..opts.clone() };
                minimal_witness(&whole, template, job.config, &job.workload, cell, &key, cancel)?
            }
        };
        let seconds = t.elapsed().as_secs_f64();
        self.journal.append(&Line::Witness(WitnessRecord {
            key: key.clone(),
            witness,
            seconds,
        }))?;
        self.witnessed.insert(key);
        Ok(Judged::Run(rec))
    }

    /// A run that held, with `--recovery-crashes`: crashes during its recovery, and for
    /// a recovery that is not idempotent, its signature and witness.
    fn recovery_crashes(
        &mut self,
        job: &Job,
        rc: RecoveryCrashes,
        mut rec: Box<RunRecord>,
    ) -> Result<Judged, Error> {
        let (checked, failure) =
            match interrupt_recoveries(&job.trace_dir, rc, self.template, self.cancel) {
                Err(e) if e.is_interrupted() => return Ok(Judged::Interrupted),
                Err(e) => {
                    rec.error = Some(format!("recovery crashes: {e}"));
                    return Ok(Judged::Run(rec));
                }
                Ok(found) => found,
            };
        rec.recovery_states = checked;
        let Some((state, report)) = failure else { return Ok(Judged::Run(rec)) };
        let key = SignatureKey {
            config: job.config.name.to_owned(),
            ops: op_kinds(&job.workload),
            discrepancy: RecoveryDiscrepancy::RecoveryNotIdempotent.into(),
        };
        let story = format!(
            "a crash during the recovery of {state}: {} of {} \
                 crash states inside recovery recovered again to a \
                 state the oracle does not allow ({}); the first \
                 recovery held",
            report.failed,
            report.states,
            report.first_failure.clone().unwrap_or_default()
        );
        rec.outcome = report.verdict.name().into();
        rec.key = Some(key.clone());
        rec.story = Some(story.clone());
        if !self.witnessed.contains(&key) {
            let witness = recovery_witness(
                self.opts,
                job.config,
                &job.workload,
                &job.trace_dir,
                &state,
                &story,
                rc,
            )?;
            let line = WitnessRecord { key: key.clone(), witness, seconds: 0.0 };
            self.journal.append(&Line::Witness(line))?;
            self.witnessed.insert(key);
        }
        Ok(Judged::Run(rec))
    }
}

/// The report of every journaled line.
fn summarize(
    opts: &ExploreOptions,
    header: &Header,
    lines: &[Line],
    complete: bool,
) -> ExploreReport {
    let runs: Vec<&RunRecord> =
        lines.iter().filter_map(|l| if let Line::Run(r) = l { Some(r) } else { None }).collect();
    let witnesses: BTreeMap<&SignatureKey, &WitnessRecord> = lines
        .iter()
        .filter_map(|l| if let Line::Witness(w) = l { Some((&w.key, w)) } else { None })
        .collect();
    let mut configs = Vec::new();
    for c in &opts.configs {
        let mine: Vec<&&RunRecord> = runs.iter().filter(|r| r.config == c.name).collect();
        let seconds: f64 = mine.iter().map(|r| r.seconds).sum();
        let n = mine.len();
        let mut guarantees: Vec<String> =
            opts.bounds.guarantees.iter().map(|g| g.name().to_owned()).collect();
        if opts.documented {
            guarantees.extend(crate::fs::profile(c).guarantees.iter().map(|g| g.name().to_owned()));
            guarantees.sort();
            guarantees.dedup();
        }
        configs.push(ExploreConfig {
            config: c.name.to_owned(),
            guarantees,
            profile: crate::fs::profile(c).departures(),
            workloads: n,
            seconds: round3(seconds),
            seconds_per_workload: if n > 0 { round3(seconds / n as f64) } else { 0.0 },
            failed: mine.iter().filter(|r| r.key.is_some()).count(),
            unsupported: mine.iter().filter(|r| r.unsupported).count(),
            states: mine.iter().map(|r| r.states).sum(),
            recovery_states: mine.iter().map(|r| r.recovery_states).sum(),
        });
    }
    let mut by_key: BTreeMap<&SignatureKey, Vec<&RunRecord>> = BTreeMap::new();
    for r in &runs {
        if let Some(k) = &r.key {
            by_key.entry(k).or_default().push(r);
        }
    }
    let signatures = by_key
        .into_iter()
        .filter_map(|(key, rs)| {
            let w = witnesses.get(key)?;
            Some(Signature {
                key: key.clone(),
                count: rs.len(),
                story: rs[0].story.clone().unwrap_or_default(),
                first_workload: opts
                    .out
                    .join("workloads")
                    .join(format!("{}.json", rs[0].workload))
                    .display()
                    .to_string(),
                witness: w.witness.clone(),
                known: opts.known.contains_key(&key.slug()),
                known_note: opts.known.get(&key.slug()).filter(|n| !n.is_empty()).cloned(),
            })
        })
        .collect();
    let seconds: f64 = runs.iter().map(|r| r.seconds).sum();
    let distinct: HashSet<u64> = runs.iter().map(|r| r.index).collect();
    ExploreReport {
        schema_version: crate::SCHEMA_VERSION,
        bounds: header.bounds.clone(),
        selection: header.selection.clone(),
        workloads: runs.len(),
        distinct_workloads: distinct.len(),
        seconds_per_workload: if runs.is_empty() {
            0.0
        } else {
            round3(seconds / runs.len() as f64)
        },
        seconds: round3(seconds),
        shrink_seconds: round3(witnesses.values().map(|w| w.seconds).sum()),
        configs,
        signatures,
        errors: runs
            .iter()
            .filter_map(|r| {
                Some(ExploreError {
                    config: r.config.clone(),
                    workload: r.workload.clone(),
                    error: r.error.clone()?,
                })
            })
            .take(20)
            .collect(),
        complete,
    }
}

fn round3(x: f64) -> f64 {
    // `+ 0.0`: a sum of nothing is -0.0 in Rust, which would print as such.
    (x * 1000.0).round() / 1000.0 + 0.0
}

/// Shrinks `w` (which failed on `config` with `cell`, under `key`) by dropping ops, one at
/// a time from the last, while a run still fails with the same discrepancy; writes the
/// minimal workload to `signatures/SLUG/workload.json` and returns its witness.
fn minimal_witness(
    opts: &ExploreOptions,
    template: &RunOptions,
    config: &FsConfig,
    w: &Workload,
    cell: &crate::report::Cell,
    key: &SignatureKey,
    cancel: &AtomicBool,
) -> Result<SignatureWitness, Error> {
    let runs_dir = opts.out.join("runs");
    let mut best_cell = cell.clone();
    let best = if opts.shrink {
        let mut best_name = w.name.clone();
        workloads::enumerate::shrink(w, |candidate| {
            if cancel.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let ran = run_workload(template, config, candidate, &runs_dir, None, cancel)?;
            let still = match ran {
                Ran::Checked(c)
                    if c.verdict.is_failure()
                        && c.confirmed != Some(false)
                        && discrepancy(&c) == key.discrepancy =>
                {
                    Some(c)
                }
                _ => None,
            };
            Ok::<bool, Error>(match still {
                Some(c) => {
                    // The previous smallest one's witness is superseded.
                    if best_name != w.name {
                        let _ =
                            std::fs::remove_dir_all(runs_dir.join(config.name).join(&best_name));
                    }
                    best_name = candidate.name.clone();
                    best_cell = *c;
                    true
                }
                None => {
                    let _ =
                        std::fs::remove_dir_all(runs_dir.join(config.name).join(&candidate.name));
                    false
                }
            })
        })?
    } else {
        w.clone()
    };
    let sig_dir = opts.out.join("signatures").join(key.slug());
    let file = sig_dir.join("workload.json");
    write_json(&file, &best)?;
    let dir = best_cell.witness.clone().unwrap_or_default();
    let state = best_cell.witness_state.clone().unwrap_or_default();
    let replay = format!("bob replay {dir} --state {state} --to crash.img --check");
    let mut witness = SignatureWitness {
        workload: file.display().to_string(),
        ops: best.ops.iter().map(|o| o.to_string()).collect(),
        story: best_cell.story.clone().unwrap_or_default(),
        dir,
        state,
        replay,
        confirmed: best_cell.confirmed,
        dropped_ops: w.ops.len() - best.ops.len(),
        reproducer: None,
    };
    let script = sig_dir.join("reproduce.sh");
    std::fs::write(
        &script,
        super::reproducer::shell(config, &best, &witness, &file, &run_args(template)),
    )
    .map_err(io(&script))?;
    witness.reproducer = Some(script.display().to_string());
    Ok(witness)
}

/// Interrupts the recovery of the crash states right after each barrier of the trace
/// in `trace` (`rc.per_run` of them whose recovery writes something): each recovery is
/// recorded and its own crash states recovered again ([`super::recovery`]). Returns the
/// crash states inside recovery checked and the first failing state with its report.
fn interrupt_recoveries(
    trace: &Path,
    rc: RecoveryCrashes,
    template: &RunOptions,
    cancel: &AtomicBool,
) -> Result<(usize, Option<(String, crate::output::RecoveryReport)>), Error> {
    let (subject, _) = crate::report::witness::load_subject(trace)?;
    let mut interrupted = 0;
    let mut checked = 0;
    // Epoch 0 ends at the first barrier; a crash "right after barrier N" is `eN:-`.
    for epoch in 1..subject.epochs.len() {
        if interrupted >= rc.per_run {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(crate::check::Error::Interrupted.into());
        }
        let state = format!("e{epoch}:-");
        let report = super::recovery::recovery_idempotent(&super::recovery::RecoveryOptions {
            trace: trace.to_owned(),
            state: state.clone(),
            max_states: Some(rc.max_states),
            timeouts: template.explore.timeouts,
            scratch: template.explore.scratch.clone(),
        })?;
        if report.recovery_writes == 0 {
            continue;
        }
        interrupted += 1;
        checked += report.states;
        if report.verdict.is_failure() {
            return Ok((checked, Some((state, report))));
        }
    }
    Ok((checked, None))
}

/// The witness of a recovery that was not idempotent: the run's trace kept under
/// `runs/CONFIG/NAME-recovery`, the state whose recovery was interrupted, and the command
/// that does it again. Not shrunk (each candidate would need its own recording and
/// recovery crashes; the workload is a seq-N one already).
fn recovery_witness(
    opts: &ExploreOptions,
    config: &FsConfig,
    w: &Workload,
    trace: &Path,
    state: &str,
    story: &str,
    rc: RecoveryCrashes,
) -> Result<SignatureWitness, Error> {
    let key_dir = opts.out.join("runs").join(config.name).join(format!("{}-recovery", w.name));
    if let Some(parent) = key_dir.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    // An earlier witness there would be mixed with this one (or stop the rename).
    match std::fs::remove_dir_all(&key_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&key_dir)(e)),
        _ => {}
    }
    if std::fs::rename(trace, &key_dir).is_err() {
        // Another file system (the scratch directory): copy it.
        copy_dir(trace, &key_dir)?;
    }
    let sig_dir = opts.out.join("signatures").join(
        SignatureKey {
            config: config.name.to_owned(),
            ops: op_kinds(w),
            discrepancy: RecoveryDiscrepancy::RecoveryNotIdempotent.into(),
        }
        .slug(),
    );
    let file = sig_dir.join("workload.json");
    write_json(&file, w)?;
    let dir = key_dir.display().to_string();
    Ok(SignatureWitness {
        workload: file.display().to_string(),
        ops: w.ops.iter().map(|o| o.to_string()).collect(),
        story: story.to_owned(),
        replay: format!(
            "bob replay {dir} --state {state} --recovery-crashes --max-states {}",
            rc.max_states
        ),
        dir,
        state: state.to_owned(),
        confirmed: None,
        dropped_ops: 0,
        reproducer: None,
    })
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let target = to.join(entry.file_name());
        if entry.file_type().map_err(io(from))?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(io(&target))?;
        }
    }
    Ok(())
}

/// The `bob run` options that find the same crash states again: the disk model, the
/// state budget and seed.
fn run_args(run: &RunOptions) -> String {
    let mut a = String::new();
    if let Some(d) = run.disk_models.first() {
        let fua = match d.fua {
            crate::crash::FuaModel::Real => "real",
            crate::crash::FuaModel::Barrier => "barrier",
        };
        a.push_str(&format!(" --atomic-write-unit {} --fua {fua}", d.atomic_write_unit));
    }
    if let Some(n) = run.explore.limits.max_states {
        a.push_str(&format!(" --max-states {n}"));
    }
    if run.explore.limits.seed != 0 {
        a.push_str(&format!(" --seed {}", run.explore.limits.seed));
    }
    a
}

/// Writes an xfstests test per signature of `report` into `dir` (`dir/tests/DIR/NNN`
/// and `NNN.out`, numbered from `first`; DIR is `generic` unless the configuration
/// forces options, see [`super::reproducer::xfstests_target`]), each from the
/// signature's minimal workload and each passing bob's lint of fstests' conventions
/// ([`super::xfstests_lint`]). Returns the files written.
pub fn export_xfstests(
    report: &ExploreReport,
    configs: &[FsConfig],
    dir: &Path,
    first: u32,
) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for (k, sig) in report.signatures.iter().enumerate() {
        let file = Path::new(&sig.witness.workload);
        let w = super::load_workload(file)?;
        let Some(config) = configs.iter().find(|c| c.name == sig.key.config) else {
            continue;
        };
        let seq = format!("{:03}", first + k as u32);
        let tests = dir.join("tests").join(super::reproducer::xfstests_target(config).dir);
        std::fs::create_dir_all(&tests).map_err(io(&tests))?;
        let test = tests.join(&seq);
        // A signature about recovery gets the lost-write states too: the state that
        // failed may be a reordering inside one flush interval.
        let recovery = sig.key.discrepancy.is_recovery();
        let body = super::reproducer::xfstests(&seq, config, &w, &sig.witness.story, recovery);
        let golden = super::reproducer::xfstests_out(&seq);
        // The exporter's own output must pass the lint: a broken rule is bob's bug.
        let lints = super::xfstests_lint::lint(&seq, &body, Some(&golden));
        debug_assert!(lints.is_empty(), "bob's xfstests export breaks its lint: {lints:?}");
        std::fs::write(&test, body).map_err(io(&test))?;
        let out = tests.join(format!("{seq}.out"));
        std::fs::write(&out, golden).map_err(io(&out))?;
        written.extend([test, out]);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use workloads::Op;

    /// Enumeration reports its progress every [`SCAN_STEP`] indices while it skips, and
    /// ends at once when interrupted (`--seq 9` once spun with no output and took
    /// no signal).
    #[test]
    fn enumeration_reports_progress_and_stops_when_interrupted() {
        let mut bounds = Bounds::ace(3);
        bounds.ops.truncate(2);
        let g = bounds.generator();
        let indices = g.indices();
        assert!(indices > 2 * SCAN_STEP, "{indices}");
        let reports = std::sync::Mutex::new(Vec::new());
        let report = |scanned, of| reports.lock().unwrap().push((scanned, of));
        let cancel = AtomicBool::new(false);
        let scan = Scan { cancel: &cancel, progress: &report };
        let all: Vec<u64> = select(&g, None, None, scan).map(|(i, _)| i).collect();
        assert!(!all.is_empty());
        let reports = reports.into_inner().unwrap();
        assert_eq!(reports.len() as u64, (indices - 1) / SCAN_STEP, "{reports:?}");
        assert!(reports.iter().all(|&(_, of)| of == indices));
        assert!(reports.windows(2).all(|w| w[0].0 < w[1].0));
        // Interrupted: nothing more, however much is left.
        cancel.store(true, Ordering::Relaxed);
        let scan = Scan { cancel: &cancel, progress: &|_, _| {} };
        assert_eq!(select(&g, None, None, scan).count(), 0);
        assert_eq!(select(&g, Some((5, 1)), None, scan).count(), 0);
    }

    /// Every file named `name` under `dir`.
    fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(files_named(&path, name));
            } else if path.file_name().is_some_and(|n| n == name) {
                out.push(path);
            }
        }
        out
    }

    /// The committed explore runs (docs/explore/) read with typed discrepancies: every
    /// journal line and report parses, each key writes back as the text it was read from,
    /// and the reports' signatures are in the typed keys' order, so the committed groups
    /// keep their names and their order.
    #[test]
    fn committed_explore_runs_read_with_typed_keys_and_write_back_the_same() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/explore");
        let mut keys = 0;
        for journal in files_named(&docs, JOURNAL) {
            for text in std::fs::read_to_string(&journal).unwrap().lines() {
                let line: Line = serde_json::from_str(text).unwrap();
                let raw: serde_json::Value = serde_json::from_str(text).unwrap();
                let key = match &line {
                    Line::Run(r) => r.key.as_ref(),
                    Line::Witness(w) => Some(&w.key),
                };
                if let Some(key) = key {
                    assert_eq!(serde_json::to_value(key).unwrap(), raw["key"], "{text}");
                    keys += 1;
                }
            }
        }
        let reports = files_named(&docs, "explore-report.json");
        assert!(reports.len() >= 8, "{reports:?}");
        for report in reports {
            let text = std::fs::read_to_string(&report).unwrap();
            let typed: ExploreReport = serde_json::from_str(&text).unwrap();
            let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
            for (sig, raw) in typed.signatures.iter().zip(raw["signatures"].as_array().unwrap()) {
                assert_eq!(serde_json::to_value(&sig.key).unwrap(), raw["key"]);
                keys += 1;
            }
            assert!(typed.signatures.windows(2).all(|s| s[0].key < s[1].key), "{report:?}");
        }
        assert!(keys >= 30, "{keys}");
    }

    /// A failing cell's discrepancy: the oracle's kind for a violation (`other` for a
    /// violation without one), the outcome's otherwise, by the names reports use.
    #[test]
    fn a_failing_cells_discrepancy_is_the_oracles_kind_or_its_outcomes() {
        let cell = |verdict, kind: Option<workloads::DiscrepancyKind>| crate::report::Cell {
            verdict,
            discrepancy: kind.map(|kind| workloads::Discrepancy { kind, ..Default::default() }),
            ..Default::default()
        };
        let stale = Some(workloads::DiscrepancyKind::StaleData);
        for (verdict, kind, name) in [
            (OutcomeKind::Violated, stale, "stale-data"),
            (OutcomeKind::Violated, None, "other"),
            (OutcomeKind::Unrecoverable, None, "unmountable"),
            (OutcomeKind::NeedsRepair, None, "needs-repair"),
            (OutcomeKind::FsckFailed, None, "fsck-complaint"),
            (OutcomeKind::ReadError, None, "read-error"),
            (OutcomeKind::Timeout, None, "timeout"),
            (OutcomeKind::KernelCrash, None, "other"),
        ] {
            let d = discrepancy(&cell(verdict, kind));
            assert_eq!(d.to_string(), name);
            assert_eq!(serde_json::to_value(d).unwrap(), name);
            assert_eq!(serde_json::from_value::<SignatureDiscrepancy>(name.into()).unwrap(), d);
        }
        let not_idempotent: SignatureDiscrepancy =
            RecoveryDiscrepancy::RecoveryNotIdempotent.into();
        assert_eq!(not_idempotent.to_string(), "recovery-not-idempotent");
        assert!(!not_idempotent.is_recovery());
        assert!(SignatureDiscrepancy::from(RecoveryDiscrepancy::NeedsRepair).is_recovery());
    }

    fn workload(ops: Vec<Op>) -> Workload {
        Workload {
            name: "w".into(),
            property: None,
            setup: vec![
                Op::Creat { path: "/foo".into(), sync: false },
                Op::Write { path: "/foo".into(), offset: 0, len: 16384 },
            ],
            ops,
            drain: Vec::new(),
            commit_midway: Vec::new(),
            guarantees: Vec::new(),
        }
    }

    /// Each design runs a workload as its guarantee profile says: Valor an overwrite in a
    /// transaction of its own, but only where no other op changes that file (a seq-2
    /// sample found an mmap write before it read as the transaction half done); xsyncfs
    /// an output after each persistence point; a kernel configuration as generated.
    #[test]
    fn workloads_run_on_a_design_as_its_profile_says() {
        let config = |n: &str| crate::fs::by_name(n).unwrap();
        let write = Op::Write { path: "/foo".into(), offset: 7680, len: 4096 };
        let fsync = Op::Fsync { path: "/foo".into() };
        let alone = workload(vec![write.clone(), fsync.clone()]);
        let txn = for_config(&alone, &config("valor"), false);
        assert_eq!(
            txn.ops,
            vec![Op::TxnBegin, write.clone(), Op::TxnCommit { durable: true }, fsync.clone()]
        );
        let mmap = Op::MmapWrite { path: "/foo".into(), offset: 16384, len: 4096 };
        let shared = workload(vec![mmap, write.clone(), fsync.clone()]);
        assert_eq!(for_config(&shared, &config("valor"), false).ops, shared.ops);
        let out = for_config(&alone, &config("xsyncfs"), false);
        assert_eq!(out.ops, vec![write, fsync, Op::Output]);
        assert_eq!(for_config(&alone, &config("ext4-ordered"), false).ops, alone.ops);
        assert_eq!(
            for_config(&alone, &config("ext4-ordered"), true).guarantees,
            vec![workloads::Guarantee::FsyncPersistsName]
        );
    }
}
