//! Interop commands: `bob import` (dm-log-writes logs, blktrace and blkparse output),
//! `bob log` (xfstests replay-log's verbs), `bob record` and `bob mark` (bring your own
//! workload), `bob check` (explore a recorded trace with your own checker).

use std::io::{BufReader, Write as _};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bob_core::check::{self, EngineOptions, Judge, UserChecker};
use bob_core::crash::{self, Limits};
use bob_core::fs::Timeouts;
use bob_core::record::custom::{self, Annotate, Backend, CommandRequest};
use bob_core::report::{witness, Cell};
use bob_core::run::WorkDir;
use bob_core::trace::blktrace::{self, BlockRequest};
use bob_core::trace::log::{read_log_file, write_log_file, LogReader};
use bob_core::trace::sidecar::{BaseImageInfo, Sidecar, SIDECAR_FORMAT};
use bob_core::trace::{flags, Entry, EntryKind, Trace, TraceDir};

use crate::cli::{ExploreArgs, Format};
use crate::commands::{check_environment, config_named, exit_for, parse_strategies, usage, Bar};
use crate::exit;
use crate::signals::CANCEL;

type Result = std::result::Result<ExitCode, Box<dyn std::error::Error>>;

/// `bob import` arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// A dm-log-writes log (from the kernel target, xfstests, or bob).
    #[arg(required_unless_present = "blktrace", conflicts_with = "blktrace")]
    pub log: Option<PathBuf>,
    /// Instead: blktrace output to decode into block-request annotations: a directory of
    /// per-CPU files (`<dev>.blktrace.<cpu>`), one such file, or blkparse's text output.
    #[arg(long)]
    pub blktrace: Option<PathBuf>,
    /// Trace directory to write (log import), or whose trace to annotate (blktrace).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The image the log applies to (copied into the trace directory as base.img).
    #[arg(long, conflicts_with = "blktrace")]
    pub base: Option<PathBuf>,
    /// Configuration the log was recorded on (see `bob list`), needed by `bob check`.
    #[arg(long = "fs", conflicts_with = "blktrace")]
    pub fs: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `bob log` arguments: replay-log's verbs.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The log (a dm-log-writes log file, or a trace directory holding trace.log).
    pub log: PathBuf,
    /// Print every entry: index, sector, sectors (512-byte units), flags, mark text.
    #[arg(long)]
    pub list: bool,
    /// Print the number of entries.
    #[arg(long)]
    pub num_entries: bool,
    /// Print the index of the entry found by --mark, --next-fua or --next-flush.
    #[arg(long)]
    pub find: bool,
    /// Apply entries from the start onto this image file (created if missing) or loop
    /// device, up to --limit, --end-mark or --next-flush (default: all).
    #[arg(long, value_name = "DEV_OR_IMAGE")]
    pub replay: Option<PathBuf>,
    /// With --find: the mark with this text.
    #[arg(long, requires = "find")]
    pub mark: Option<String>,
    /// With --find: the first FUA write.
    #[arg(long, requires = "find")]
    pub next_fua: bool,
    /// With --find: the first flush (empty flush or preflush write); with --replay:
    /// replay up to and including it.
    #[arg(long)]
    pub next_flush: bool,
    /// With --replay: apply this many entries.
    #[arg(long, requires = "replay")]
    pub limit: Option<u64>,
    /// With --replay: apply the entries before the mark with this text.
    #[arg(long, requires = "replay")]
    pub end_mark: Option<String>,
    /// Replay onto a block device that is not a loop device.
    #[arg(long)]
    pub force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// How `bob record` annotates the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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

/// `bob record` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Configuration to make and mount (see `bob list`).
    #[arg(long = "fs")]
    pub fs: String,
    /// Trace directory to write (trace.log, trace.json, base.img).
    #[arg(long)]
    pub out: PathBuf,
    /// A free loop device to record on (default: any free one).
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Recording backend.
    #[arg(long, value_enum, default_value_t = crate::cli::Backend::Fuse)]
    pub backend: crate::cli::Backend,
    /// The log device of the dm-log-writes backend.
    #[arg(long, required_if_eq("backend", "dm-log-writes"))]
    pub log_dev: Option<PathBuf>,
    /// Block-request annotations from the kernel's block tracepoints.
    #[arg(long, value_enum, default_value_t = AnnotateArg::Auto)]
    pub annotate: AnnotateArg,
    /// Directory for scratch files (default: the system temp dir).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// The command and its arguments (after `--`); it runs with the mount as its working
    /// directory and BOB_MARK_FILE naming the mark control file.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// `bob mark` arguments.
#[derive(Debug, clap::Args)]
pub struct MarkArgs {
    /// The mark's text (words are joined with spaces).
    #[arg(required = true)]
    pub text: Vec<String>,
    /// The control file (default: $BOB_MARK_FILE, set by `bob record`).
    #[arg(long)]
    pub file: Option<PathBuf>,
}

/// `bob check` arguments.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Trace directory (from `bob record`, `bob import --base`, or `bob run --save-trace`).
    pub dir: PathBuf,
    /// Shell command run in each recovered mount (its working directory); exit 0 means
    /// consistent. Without it, only recovery and the read-only fsck judge.
    #[arg(long)]
    pub checker: Option<String>,
    /// Seconds before a checker run is killed (a timeout outcome).
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exploration options.
    #[command(flatten)]
    pub explore: ExploreArgs,
}

fn flag_names(f: u64) -> String {
    let mut names: Vec<&str> = [
        (flags::FLUSH, "FLUSH"),
        (flags::FUA, "FUA"),
        (flags::DISCARD, "DISCARD"),
        (flags::MARK, "MARK"),
        (flags::METADATA, "METADATA"),
    ]
    .iter()
    .filter(|(bit, _)| f & bit != 0)
    .map(|(_, n)| *n)
    .collect();
    let unknown = f & !(flags::FLUSH | flags::FUA | flags::DISCARD | flags::MARK | flags::METADATA);
    let extra = format!("{unknown:#x}");
    if unknown != 0 {
        names.push(&extra);
    }
    if names.is_empty() {
        "-".into()
    } else {
        names.join("|")
    }
}

fn summary(trace: &Trace) -> serde_json::Value {
    let count = |k: fn(&Entry) -> bool| trace.entries.iter().filter(|e| k(e)).count();
    serde_json::json!({
        "entries": trace.entries.len(),
        "writes": count(|e| matches!(e.kind(), EntryKind::Write { .. })),
        "flushes": count(|e| e.flags & flags::FLUSH != 0),
        "fua": count(|e| e.flags & flags::FUA != 0),
        "discards": count(|e| e.kind() == EntryKind::Discard),
        "marks": count(|e| e.kind() == EntryKind::Mark),
        "metadata": count(|e| e.is_metadata()),
        "sector_size": trace.sector_size,
    })
}

/// Adds the block requests and their mapping onto entries to the sidecar file, under
/// `block_requests` (the sidecar's reader ignores keys it does not know).
fn save_requests(
    dir: &Path,
    source: &str,
    requests: &[BlockRequest],
    annotation: &blktrace::Annotation,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let path = TraceDir::sidecar_path(dir);
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let entries: Vec<[usize; 2]> = annotation
        .request_of_entry
        .iter()
        .enumerate()
        .filter_map(|(e, r)| r.map(|r| [e, r]))
        .collect();
    value["block_requests"] = serde_json::json!({
        "source": source,
        "matched_writes": annotation.matched,
        "unmatched_writes": annotation.unmatched,
        "metadata_writes": annotation.metadata,
        "entry_request": entries,
        "requests": requests,
    });
    std::fs::write(&path, serde_json::to_string_pretty(&value)? + "\n")?;
    Ok(())
}

/// `bob import`.
pub fn import(args: ImportArgs) -> Result {
    if let Some(src) = &args.blktrace {
        return import_blktrace(src, &args);
    }
    let log = args.log.as_deref().ok_or_else(|| usage("bob import: give a LOG or --blktrace"))?;
    let out = args.out.as_deref().ok_or_else(|| usage("bob import LOG needs --out DIR"))?;
    let trace = read_log_file(log)?;
    let config = match &args.fs {
        Some(name) => config_named(name)?.name.to_owned(),
        None => "unknown".to_owned(),
    };
    std::fs::create_dir_all(out)?;
    let base_image = match &args.base {
        Some(base) => {
            let dest = out.join("base.img");
            bob_core::image::copy_sparse(base, &dest)
                .map_err(|e| usage(format!("{}: {e}", base.display())))?;
            BaseImageInfo {
                file: "base.img".into(),
                size_bytes: std::fs::metadata(&dest)?.len(),
                blake3: bob_core::image::file_digest(&dest)?,
            }
        }
        // An empty file name says the log came without its base image: `bob log --replay`
        // works on it, `bob check` asks for --base.
        None => BaseImageInfo { file: String::new(), size_bytes: 0, blake3: String::new() },
    };
    let sidecar = Sidecar {
        format: SIDECAR_FORMAT.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: bob_core::record::kernel_release(),
        config,
        property: None,
        workload: serde_json::json!({
            "name": format!("imported: {}", log.display()),
            "property": null, "setup": [], "ops": [], "drain": [],
        }),
        observed: serde_json::json!({ "inos": {} }),
        base_image,
        ops: Vec::new(),
        roles: Vec::new(),
        schedule: None,
        fua: None,
    };
    TraceDir::write(out, &trace, &sidecar)?;
    let mut s = summary(&trace);
    s["out"] = out.display().to_string().into();
    s["base_image"] = (!sidecar.base_image.file.is_empty()).into();
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&s)?),
        Format::Text => {
            println!(
                "imported {} entries ({} writes, {} flushes, {} FUA, {} discards, {} marks) into {}",
                s["entries"], s["writes"], s["flushes"], s["fua"], s["discards"], s["marks"],
                out.display()
            );
            if sidecar.base_image.file.is_empty() {
                println!("  no base image (--base): bob log can replay it; bob check needs one");
            }
        }
    }
    Ok(ExitCode::from(exit::HELD))
}

fn import_blktrace(src: &Path, args: &ImportArgs) -> Result {
    let requests = blktrace::read_source(src)?;
    let mut annotated = None;
    if let Some(out) = &args.out {
        if TraceDir::log_path(out).is_file() {
            let mut td = TraceDir::open(out)?;
            let a = blktrace::annotate(&mut td.trace, &requests);
            write_log_file(&TraceDir::log_path(out), &td.trace)?;
            save_requests(out, "blktrace", &requests, &a)?;
            annotated = Some(a);
        } else {
            std::fs::create_dir_all(out)?;
            let path = out.join("block-requests.json");
            std::fs::write(&path, serde_json::to_string_pretty(&requests)? + "\n")?;
        }
    }
    match args.format {
        Format::Json => {
            let v = serde_json::json!({
                "requests": requests,
                "annotated": annotated.as_ref().map(|a| serde_json::json!({
                    "matched_writes": a.matched, "unmatched_writes": a.unmatched,
                    "metadata_writes": a.metadata,
                })),
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Text => {
            for r in &requests {
                let t = |x: Option<u64>| x.map_or("-".to_owned(), |n| format!("{n}"));
                println!(
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
            println!("{} requests from {}", requests.len(), src.display());
            if let Some(a) = annotated {
                println!(
                    "annotated the trace: {} writes matched ({} metadata), {} unmatched",
                    a.matched, a.metadata, a.unmatched
                );
            }
        }
    }
    Ok(ExitCode::from(exit::HELD))
}

fn log_path(p: &Path) -> PathBuf {
    if p.is_dir() {
        TraceDir::log_path(p)
    } else {
        p.to_owned()
    }
}

/// `bob log`.
pub fn log(args: LogArgs) -> Result {
    let path = log_path(&args.log);
    let verbs = [args.list, args.num_entries, args.find, args.replay.is_some()];
    if verbs.iter().filter(|&&v| v).count() != 1 {
        return Err(usage("bob log: give exactly one of --list, --num-entries, --find, --replay"));
    }
    if args.num_entries {
        let reader = LogReader::open(&path)?;
        println!("{}", reader.nr_entries());
        return Ok(ExitCode::from(exit::HELD));
    }
    if args.list {
        let reader = LogReader::open(&path)?;
        let mut out = std::io::stdout().lock();
        let mut json = Vec::new();
        for (i, e) in reader.enumerate() {
            let e = e?;
            match args.format {
                Format::Text => {
                    let mark = e.mark_text().unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "{i} {} {} {}{}{}",
                        e.sector,
                        e.nr_sectors,
                        flag_names(e.flags),
                        if mark.is_empty() { "" } else { " " },
                        mark
                    );
                }
                Format::Json => json.push(serde_json::json!({
                    "index": i, "sector": e.sector, "nr_sectors": e.nr_sectors,
                    "flags": e.flags, "flag_names": flag_names(e.flags), "mark": e.mark_text(),
                })),
            }
        }
        if args.format == Format::Json {
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        return Ok(ExitCode::from(exit::HELD));
    }
    if args.find {
        let pred: Box<dyn Fn(&Entry) -> bool> = match (&args.mark, args.next_fua, args.next_flush) {
            (Some(text), false, false) => {
                let text = text.clone();
                Box::new(move |e: &Entry| e.mark_text().as_deref() == Some(text.as_str()))
            }
            (None, true, false) => Box::new(|e: &Entry| e.flags & flags::FUA != 0),
            (None, false, true) => Box::new(|e: &Entry| e.flags & flags::FLUSH != 0),
            _ => {
                return Err(usage(
                    "bob log --find: give one of --mark TEXT, --next-fua, --next-flush",
                ))
            }
        };
        for (i, e) in LogReader::open(&path)?.enumerate() {
            if pred(&e?) {
                println!("{i}");
                return Ok(ExitCode::from(exit::HELD));
            }
        }
        eprintln!("bob: {}: no such entry", path.display());
        return Ok(ExitCode::from(exit::VIOLATION));
    }
    let target = args.replay.as_deref().unwrap_or(Path::new(""));
    replay(&path, target, &args)
}

enum Stop {
    All,
    Limit(u64),
    BeforeMark(String),
    AfterFlush,
}

fn replay(path: &Path, target: &Path, args: &LogArgs) -> Result {
    let stop = match (args.limit, &args.end_mark, args.next_flush) {
        (None, None, false) => Stop::All,
        (Some(n), None, false) => Stop::Limit(n),
        (None, Some(m), false) => Stop::BeforeMark(m.clone()),
        (None, None, true) => Stop::AfterFlush,
        _ => {
            return Err(usage(
                "bob log --replay: give at most one of --limit, --end-mark, --next-flush",
            ))
        }
    };
    if let Ok(meta) = std::fs::metadata(target) {
        if meta.file_type().is_block_device()
            && !bob_core::device::loopdev::is_loop_device(target)
            && !args.force
        {
            return Err(usage(format!(
                "{}: not a loop device; bob refuses to write to it (pass --force if you mean it)",
                target.display()
            )));
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(!target.exists())
        .truncate(false)
        .open(target)
        .map_err(|e| usage(format!("{}: {e}", target.display())))?;
    let mut applied = 0u64;
    let mut found = matches!(stop, Stop::All | Stop::Limit(_));
    let zeros = vec![0u8; 1 << 20];
    let reader = LogReader::new(BufReader::new(std::fs::File::open(path)?))?;
    for (i, e) in reader.enumerate() {
        if let Stop::Limit(n) = stop {
            if i as u64 >= n {
                break;
            }
        }
        let e = e?;
        if let Stop::BeforeMark(m) = &stop {
            if e.mark_text().as_deref() == Some(m.as_str()) {
                found = true;
                break;
            }
        }
        match e.kind() {
            EntryKind::Write { .. } => file.write_all_at(&e.data, e.sector * 512)?,
            EntryKind::Discard => {
                let (mut off, end) = (e.sector * 512, (e.sector + e.nr_sectors) * 512);
                while off < end {
                    let n = ((end - off) as usize).min(zeros.len());
                    file.write_all_at(&zeros[..n], off)?;
                    off += n as u64;
                }
            }
            EntryKind::Flush | EntryKind::Mark => {}
        }
        if e.flags & flags::FLUSH != 0 {
            file.sync_data()?;
        }
        applied += 1;
        if matches!(stop, Stop::AfterFlush) && e.flags & flags::FLUSH != 0 {
            found = true;
            break;
        }
    }
    file.sync_all()?;
    if !found {
        return Err(usage(format!(
            "{}: {} not found; replayed all {applied} entries onto {}",
            path.display(),
            match &stop {
                Stop::BeforeMark(m) => format!("mark {m:?}"),
                _ => "a flush".to_owned(),
            },
            target.display()
        )));
    }
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::json!({"replayed": applied, "target": target.display().to_string()})
        ),
        Format::Text => println!("replayed {applied} entries onto {}", target.display()),
    }
    Ok(ExitCode::from(exit::HELD))
}

/// `bob record`.
pub fn record(args: RecordArgs) -> Result {
    let config = config_named(&args.fs)?;
    let backend = match args.backend {
        crate::cli::Backend::Fuse => Backend::Fuse,
        crate::cli::Backend::DmLogWrites => {
            bob_core::record::dm_log_writes_available().map_err(usage)?;
            let log_dev = args.log_dev.clone().ok_or_else(|| usage("--log-dev DEV is required"))?;
            Backend::DmLogWrites { log_dev }
        }
    };
    if let Some(dev) = &args.device {
        bob_core::device::loopdev::vet_user_device(dev, false)?;
    }
    check_environment(&config)?;
    let work = WorkDir::new(args.scratch.as_deref())?;
    let started = Instant::now();
    let rec = custom::record_command(&CommandRequest {
        config: &config,
        command: &args.command,
        device: args.device.as_deref(),
        work_dir: work.path(),
        timeouts: Timeouts::default(),
        annotate: match args.annotate {
            AnnotateArg::Auto => Annotate::Auto,
            AnnotateArg::Tracefs => Annotate::Tracefs,
            AnnotateArg::Blktrace => Annotate::Blktrace,
            AnnotateArg::None => Annotate::Off,
        },
        backend,
    })?;
    TraceDir::write(&args.out, &rec.trace, &rec.sidecar)?;
    bob_core::image::copy_sparse(&rec.base_image, &args.out.join("base.img"))?;
    if let (Some(r), Some(a)) = (&rec.requests, &rec.annotation) {
        save_requests(&args.out, "tracefs", r, a)?;
    }
    let s = summary(&rec.trace);
    println!(
        "recorded {} entries ({} writes, {} flushes, {} marks, {} metadata) in {:.1}s into {}",
        s["entries"],
        s["writes"],
        s["flushes"],
        s["marks"],
        s["metadata"],
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    if let Some(a) = &rec.annotation {
        println!(
            "  tracefs: {} block requests; {} writes matched ({} metadata), {} unmatched",
            rec.requests.as_ref().map_or(0, Vec::len),
            a.matched,
            a.metadata,
            a.unmatched
        );
    }
    match rec.exit_code {
        Some(0) => Ok(ExitCode::from(exit::HELD)),
        code => Err(usage(format!(
            "the command {} ({}); the trace was written anyway",
            match code {
                Some(c) => format!("exited {c}"),
                None => "was killed by a signal".to_owned(),
            },
            args.command.join(" ")
        ))),
    }
}

/// `bob mark`.
pub fn mark(args: MarkArgs) -> Result {
    let file = match args.file.or_else(|| std::env::var_os(custom::MARK_FILE_ENV).map(PathBuf::from))
    {
        Some(f) => f,
        None => {
            return Err(usage(
                "BOB_MARK_FILE is not set: bob mark runs inside a command started by `bob record` (or give --file)",
            ))
        }
    };
    let text = args.text.join(" ");
    custom::send_mark(&file, &text, Duration::from_secs(10))
        .map_err(|e| usage(format!("{}: {e}", file.display())))?;
    Ok(ExitCode::from(exit::HELD))
}

/// `bob check`.
pub fn check(args: CheckArgs) -> Result {
    let started = Instant::now();
    let sidecar = Sidecar::load(&TraceDir::sidecar_path(&args.dir))?;
    if sidecar.base_image.file.is_empty() {
        return Err(usage(format!(
            "{}: the trace has no base image; import it with --base IMAGE",
            args.dir.display()
        )));
    }
    if args.explore.shard.is_some() {
        return Err(usage("bob check does not shard; run it whole"));
    }
    let (mut subject, sidecar) = witness::load_subject(&args.dir)?;
    check_environment(&subject.config)?;
    match crate::commands::disk_models(&args.explore, &subject.config.block_size())?.as_slice() {
        [model] => subject.set_disk(*model),
        _ => {
            return Err(usage(
                "bob check judges one disk model at a time: give one --atomic-write-unit",
            ))
        }
    }
    if let Some(c) = &args.checker {
        if c.trim().is_empty() {
            return Err(usage("--checker: empty command"));
        }
    }
    let judge = match &args.checker {
        Some(command) => Judge::Checker(UserChecker {
            command: command.clone(),
            timeout: Duration::from_secs(args.timeout.max(1)),
        }),
        None => Judge::Oracle,
    };
    let strategies = parse_strategies(&args.explore.strategy)?;
    let limits = Limits {
        max_states: args.explore.max_states,
        seed: args.explore.seed,
        ..Limits::default()
    };
    let states = crash::generate(&subject.trace, &subject.epochs, &strategies, &limits).states;
    let work = WorkDir::new(args.explore.scratch.as_deref())?;
    let timeouts = Timeouts {
        recovery: Duration::from_secs(args.explore.recovery_timeout),
        ..Timeouts::default()
    };
    let engine = EngineOptions {
        jobs: args
            .explore
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
        timeouts,
        work_dir: work.path().to_owned(),
    };
    let bar = Bar::new(
        args.format == Format::Text && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    bob_core::run::Progress::phase(&bar, "checking", states.len());
    let results = check::run_states_with(
        &subject,
        &judge,
        &states,
        &engine,
        &|d, t| bob_core::run::Progress::state_done(&bar, d, t),
        &CANCEL,
    );
    bar.bar.finish_and_clear();
    let results = results?;
    let label = match &args.checker {
        Some(c) => format!("checker: {c}"),
        None => "fsck only".to_owned(),
    };
    let (mut cell, witness_index) = Cell::of_results(subject.config.name, &label, &results);
    cell.disk_model = subject.disk;
    let positions: Vec<usize> = (0..results.len()).collect();
    (cell.mount_failures, cell.read_errors) =
        bob_core::report::cell_causes(&results, &positions, &subject, timeouts.fsck);
    let mut witness_info = None;
    if let Some(i) = witness_index {
        let r = &results[i];
        let dir = args.explore.out.join(subject.config.name).join("check");
        let record = witness::StateRecord::of(r, &subject, None);
        witness::write(&dir, &subject, &sidecar, &record, &r.check)?;
        if let Some(out) = &r.check.checker_output {
            std::fs::write(dir.join("checker.txt"), out)?;
        }
        std::fs::write(
            dir.join("acked-marks.txt"),
            subject.acked_marks(r.state.id.epoch as usize).join("\n") + "\n",
        )?;
        cell.witness = Some(dir.display().to_string());
        cell.story = Some(format!("{} (state {})", record.story, record.id));
        cell.witness_state = Some(record.id.clone());
        witness_info = Some((record, r.check.checker_output.clone()));
    }
    cell.seconds = started.elapsed().as_secs_f64();
    match args.format {
        Format::Json => {
            let mut v = serde_json::to_value(&cell)?;
            if let Some((record, output)) = &witness_info {
                v["witness_description"] = record.description.clone().into();
                v["checker_output"] = output.clone().into();
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Text => {
            print!("{}", cell.to_text());
            if let Some((record, output)) = &witness_info {
                println!("  state:   {}", record.description);
                if let Some(out) = output {
                    for line in out.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev() {
                        println!("  checker> {line}");
                    }
                }
            }
        }
    }
    if CANCEL.load(Ordering::Relaxed) {
        return Err(usage("interrupted"));
    }
    Ok(exit_for(cell.verdict))
}

/// `bob run --backend dm-log-writes`, once device-mapper is known to be there.
pub fn run_with_dm_log_writes() -> Result {
    Err(usage(
        "bob run --backend dm-log-writes: the property workloads record through the FUSE disk; \
         record any command through dm-log-writes with `bob record --backend dm-log-writes \
         --log-dev DEV --fs CONFIG --out DIR -- CMD` and explore it with `bob check DIR`",
    ))
}
